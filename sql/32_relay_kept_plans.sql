-- A session's passes keep the plans of their statements (src/pg/relay/pass.c),
-- the fast path's send its generic one from the first pass (issue 37).  A
-- declaration changed between two passes, or a mirrored table altered, and
-- the next pass plans again: each sends exactly the rows each replica is
-- owed (rows_sent: one a replica for a one-row change of a broadcast table),
-- on int, text and varchar keys.  In a database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_kept;
\c contrib_regression_kept
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE TABLE note (id int PRIMARY KEY, v text NOT NULL);
CREATE TABLE tag (name varchar(20) PRIMARY KEY, v text NOT NULL);
CREATE TABLE label (name text PRIMARY KEY, v text NOT NULL);
INSERT INTO note SELECT g, 'n' || g FROM generate_series(1, 5) g;
INSERT INTO tag SELECT 't' || g, 'v' FROM generate_series(1, 3) g;
INSERT INTO label SELECT 'l' || g, 'v' FROM generate_series(1, 4) g;
SELECT count(*) FROM (SELECT sync.mirror('note', 'catalog', 'broadcast')) m;
SELECT count(*) FROM (SELECT sync.mirror('label', 'catalog', 'broadcast')) m;
SELECT sync.replica_add('00000000-0000-0000-0000-000000000001');
SELECT sync.replica_add('00000000-0000-0000-0000-000000000002');
SELECT provisioned, rows_sent FROM sync.relay_pass();

-- how many rows of each table each replica holds (none being taken back)
CREATE FUNCTION held() RETURNS TABLE (replica uuid, tab text, rows bigint) LANGUAGE sql AS $$
	SELECT h.replica, t.name, count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab
	 WHERE h.taken IS NULL GROUP BY 1, 2 ORDER BY 1, 2 $$;

-- one-row changes, each its pass: planned once, then run from the kept plans
UPDATE note SET v = 'a' WHERE id = 1;
SELECT notes_read, rows_sent, rows_taken FROM sync.relay_pass();
UPDATE note SET v = 'b' WHERE id = 2;
SELECT notes_read, rows_sent, rows_taken FROM sync.relay_pass();
UPDATE label SET v = 'b' WHERE name = 'l2';
SELECT notes_read, rows_sent, rows_taken FROM sync.relay_pass();

-- a declaration between two passes: a table declared (varchar keys); its rows go with its schema
SELECT count(*) FROM (SELECT sync.mirror('tag', 'catalog', 'broadcast')) m;
SELECT rows_sent, rows_taken FROM sync.relay_pass();
UPDATE tag SET v = 'c' WHERE name = 't1';
SELECT notes_read, rows_sent, rows_taken FROM sync.relay_pass();
UPDATE note SET v = 'c' WHERE id = 3;
SELECT notes_read, rows_sent, rows_taken FROM sync.relay_pass();
SELECT * FROM held();

-- a table unmirrored between two passes: its rows taken back, its changes no longer sent
SELECT count(*) FROM (SELECT sync.unmirror('label')) m;
SELECT rows_sent, rows_taken FROM sync.relay_pass();
UPDATE note SET v = 'd' WHERE id = 4;
UPDATE label SET v = 'd' WHERE name = 'l3';
SELECT notes_read, rows_sent, rows_taken FROM sync.relay_pass();
SELECT * FROM held();

-- a mirrored table altered between two passes: its statements planned again
ALTER TABLE note ADD COLUMN w int;
SELECT rows_sent, rows_taken FROM sync.relay_pass();
UPDATE note SET v = 'e', w = 1 WHERE id = 5;
SELECT notes_read, rows_sent, rows_taken FROM sync.relay_pass();
UPDATE tag SET v = 'e' WHERE name = 't2';
INSERT INTO note VALUES (6, 'six', 6);
SELECT notes_read, rows_sent, rows_taken FROM sync.relay_pass();
SELECT * FROM held();

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_kept;
