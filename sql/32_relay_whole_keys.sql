-- A table read whole for a snapshot whose key columns are integers has its
-- keys written by the relay from the row (load.c), not by the query: each
-- key as the noting trigger and the plan spell it (key.h: each part's length,
-- a colon, its decimal), for smallint, int and bigint, negative, zero and
-- the extremes, alone and composite, in the json codec and the proto one;
-- a table with a key the relay does not write (a timestamptz beside an int)
-- beside them.  What the replica holds is its wanted set, and a change to a
-- row moves the held row it names, adding none.  In a database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_whole_keys;
\c contrib_regression_whole_keys
SET client_min_messages = notice;
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE TABLE one (id bigint PRIMARY KEY, v text NOT NULL);
CREATE TABLE three (a smallint, b int, c bigint, v text NOT NULL, PRIMARY KEY (a, b, c));
CREATE TABLE packed (id int PRIMARY KEY, n bigint NOT NULL);
CREATE TABLE stamped (id int, at timestamptz, v text, PRIMARY KEY (id, at));
INSERT INTO one VALUES (-9223372036854775808, 'min'), (9223372036854775807, 'max'), (0, 'zero'), (-1, 'minus one'),
	(7, 'seven'), (1234567890123, 'big');
INSERT INTO three VALUES (-32768, -2147483648, -9223372036854775808, 'least'), (32767, 2147483647, 9223372036854775807, 'most'),
	(0, 0, 0, 'zeros'), (-1, 10, -100, 'mixed'), (1, -10, 100, 'mixed again');
INSERT INTO packed SELECT g, g * 1000 FROM generate_series(-3, 3) g;
INSERT INTO stamped VALUES (1, '2024-01-02 03:04:05+00', 'a'), (-2, '1999-12-31 23:59:59.5+00', 'b');
SELECT sync.mirror('one', 'catalog', 'broadcast');
SELECT sync.mirror('three', 'catalog', 'broadcast');
SELECT sync.mirror('packed', 'catalog', 'broadcast', codec => 'proto');
SELECT sync.mirror('stamped', 'catalog', 'broadcast');

SELECT sync.replica_add('00000000-0000-0000-0000-000000000001');
SELECT provisioned, rows_sent FROM sync.relay_pass();
UPDATE sync.replicas SET acked_number = last_number;

-- the keys held, as the snapshot named them
SELECT t.relid::regclass AS "table", h.key FROM sync.held h JOIN sync.tables t ON t.id = h.tab
 WHERE t.relid IN ('one'::regclass, 'three'::regclass, 'packed'::regclass) ORDER BY t.relid::regclass::text, h.key;

-- what the replica holds is its wanted set
CREATE FUNCTION pg_temp.agrees() RETURNS TABLE (held bigint, agrees boolean) LANGUAGE sql AS $$
	SELECT (SELECT count(*) FROM sync.held h),
	       NOT EXISTS (SELECT FROM (SELECT w.tab, w.key FROM sync.wanted('00000000-0000-0000-0000-000000000001') w) w
	                   FULL JOIN (SELECT t.relid AS tab, h.key FROM sync.held h JOIN sync.tables t ON t.id = h.tab) h
	                     ON h.tab = w.tab AND h.key = w.key
	                   WHERE h.key IS NULL OR w.key IS NULL) $$;
SELECT * FROM pg_temp.agrees();

-- a change to rows the snapshot sent moves their held rows: none added
UPDATE one SET v = 'least' WHERE id = -9223372036854775808;
UPDATE three SET v = 'most, edited' WHERE a = 32767;
UPDATE packed SET n = -1 WHERE id = -3;
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT * FROM pg_temp.agrees();

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_whole_keys;
