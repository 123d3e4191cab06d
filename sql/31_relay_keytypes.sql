-- Keys of every type a key may have, each value spelled one way (issue 37,
-- docs/protocol.md 3): numeric without trailing zeros, dates and timestamps
-- in ISO 8601 whatever DateStyle says, timestamptz at UTC whatever TimeZone
-- says, an enum's label, a citext lowercase (as it compares), domains over
-- them, composite keys mixing them.
-- The noting trigger runs in the writer's session, under its settings; the
-- relay in its own.  A one-row change on each table is planned by index
-- lookups only (magic_sync.check_scans, sequential scans off), and after
-- every step each replica holds its wanted set, from scratch.  In a
-- database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_keytypes;
\c contrib_regression_keytypes
SET client_min_messages = notice;
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;
CREATE EXTENSION citext;

-- a value as a key part, whatever the session says (tests/unit/vectors.c spells the same)
SET DateStyle = 'SQL, DMY';
SET TimeZone = 'Asia/Kolkata';
SET extra_float_digits = -10;
SELECT v.type, v.value, v.v AS spelled FROM (VALUES
	('numeric', '1.50', sync.key_text('1.50'::numeric)),
	('numeric', '-0.0', sync.key_text('-0.0'::numeric)),
	('numeric', '1.5e3', sync.key_text('1.5e3'::numeric)),
	('numeric', '0.00120', sync.key_text('0.00120'::numeric)),
	('numeric', 'NaN', sync.key_text('NaN'::numeric)),
	('numeric', '-Infinity', sync.key_text('-Infinity'::numeric)),
	('date', '2024-01-02', sync.key_text('2024-01-02'::date)),
	('date', '0044-03-15 BC', sync.key_text('0044-03-15 BC'::date)),
	('date', 'infinity', sync.key_text('infinity'::date)),
	('time', '03:04:05.120', sync.key_text('03:04:05.120'::time)),
	('timestamp', '2024-01-02 03:04:05.5', sync.key_text('2024-01-02 03:04:05.5'::timestamp)),
	('timestamp', '0044-03-15 03:00 BC', sync.key_text('0044-03-15 03:00 BC'::timestamp)),
	('timestamptz', '2024-01-02 04:04:05.5+01', sync.key_text('2024-01-02 04:04:05.5+01'::timestamptz)),
	('timestamptz', '2024-01-01 00:30:00+01', sync.key_text('2024-01-01 00:30:00+01'::timestamptz)),
	('timestamptz', '-infinity', sync.key_text('-infinity'::timestamptz)),
	('citext', 'Ärger@Example.ORG', sync.key_text('Ärger@Example.ORG'::citext))
) v(type, value, v);
RESET DateStyle;
RESET TimeZone;
RESET extra_float_digits;

-- a shop keyed by a numeric; its days (numeric, date); slots at instants
-- (timestamptz) and their bookings; ticks (timestamp); openings (time);
-- kinds (an enum) and their items; a ledger keyed by domains; a key of six
-- types; each with the index a one-row change needs
CREATE TYPE size AS ENUM ('small', 'large');
CREATE DOMAIN money2 AS numeric(8,2);
CREATE DOMAIN workday AS date CHECK (extract(isodow FROM VALUE) < 6);
CREATE TABLE shop (id numeric PRIMARY KEY, owner uuid NOT NULL, name text NOT NULL);
CREATE TABLE day (shop numeric REFERENCES shop, day date, note text NOT NULL, PRIMARY KEY (shop, day));
CREATE TABLE slot (at timestamptz PRIMARY KEY, shop numeric NOT NULL REFERENCES shop, label text NOT NULL);
CREATE INDEX ON slot (shop);
CREATE TABLE booking (id int PRIMARY KEY, at timestamptz NOT NULL REFERENCES slot ON UPDATE CASCADE, who text NOT NULL);
CREATE INDEX ON booking (at);
CREATE TABLE tick (at timestamp PRIMARY KEY, shop numeric NOT NULL REFERENCES shop, n int NOT NULL);
CREATE INDEX ON tick (shop);
CREATE TABLE opening (t time PRIMARY KEY, note text);
CREATE TABLE kind (k size PRIMARY KEY, shop numeric NOT NULL REFERENCES shop);
CREATE INDEX ON kind (shop);
CREATE TABLE item (id int PRIMARY KEY, kind size NOT NULL REFERENCES kind, n int NOT NULL);
CREATE INDEX ON item (kind);
CREATE TABLE ledger (amount money2, day workday, shop numeric NOT NULL REFERENCES shop, PRIMARY KEY (amount, day));
CREATE INDEX ON ledger (shop);
CREATE TABLE mixed (n numeric, d date, at timestamptz, k size, s text COLLATE "en-x-icu", u uuid,
                    shop numeric NOT NULL REFERENCES shop, v int NOT NULL, PRIMARY KEY (n, d, at, k, s, u));
CREATE INDEX ON mixed (shop);
-- a foreign key to a unique timestamptz that is not the key: a note names the
-- row it points at by its spelling, whatever the writer's TimeZone
CREATE TABLE stamp (id int PRIMARY KEY, at timestamptz UNIQUE NOT NULL, shop numeric NOT NULL REFERENCES shop);
CREATE INDEX ON stamp (shop);
CREATE TABLE stamped (id int PRIMARY KEY, at timestamptz NOT NULL REFERENCES stamp (at) ON UPDATE CASCADE);
CREATE INDEX ON stamped (at);
-- mailboxes keyed by citext, and letters pointing at them
CREATE TABLE mailbox (email citext PRIMARY KEY, shop numeric NOT NULL REFERENCES shop, note text);
CREATE INDEX ON mailbox (shop);
CREATE TABLE letter (id int PRIMARY KEY, email citext NOT NULL REFERENCES mailbox ON UPDATE CASCADE);
CREATE INDEX ON letter (email);

INSERT INTO shop VALUES (1.5, '00000000-0000-0000-0000-000000000001', 'one'),
                        (2.50, '00000000-0000-0000-0000-000000000002', 'two'), (3, '00000000-0000-0000-0000-000000000001', 'three');
INSERT INTO day SELECT s.id, date '2024-01-01' + g, 'n' FROM shop s, generate_series(0, 29) g;
INSERT INTO slot SELECT timestamptz '2024-01-01 00:00+00' + g * interval '90 minutes', (ARRAY[1.5, 2.5, 3])[1 + g % 3], 's'
  FROM generate_series(0, 59) g;
INSERT INTO booking SELECT g, timestamptz '2024-01-01 00:00+00' + (g % 60) * interval '90 minutes', 'w' FROM generate_series(1, 120) g;
INSERT INTO tick SELECT timestamp '2024-01-01 00:00' + g * interval '1.25 seconds', (ARRAY[1.5, 2.5, 3])[1 + g % 3], g
  FROM generate_series(0, 59) g;
INSERT INTO opening SELECT time '08:00' + g * interval '15.5 minutes', 'o' FROM generate_series(0, 20) g;
INSERT INTO kind VALUES ('small', 1.5), ('large', 2.5);
INSERT INTO item SELECT g, (ARRAY['small', 'large'])[1 + g % 2]::size, g FROM generate_series(1, 40) g;
INSERT INTO ledger SELECT g * 0.25, d, (ARRAY[1.5, 2.5, 3])[1 + g % 3]
  FROM generate_series(1, 60) g, LATERAL (SELECT date '2024-01-01' + (g % 5) AS d) x;
INSERT INTO mixed SELECT g * 1.10, date '2024-02-01' + g, timestamptz '2024-02-01 00:00+00' + g * interval '1 hour',
                         (ARRAY['small', 'large'])[1 + g % 2]::size, 'm' || g,
                         ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid, (ARRAY[1.5, 2.5, 3])[1 + g % 3], g
  FROM generate_series(1, 40) g;
INSERT INTO stamp SELECT g, timestamptz '2024-03-01 00:00+00' + g * interval '1 minute', (ARRAY[1.5, 2.5, 3])[1 + g % 3]
  FROM generate_series(1, 30) g;
INSERT INTO stamped SELECT g, timestamptz '2024-03-01 00:00+00' + (1 + g % 30) * interval '1 minute' FROM generate_series(1, 60) g;
INSERT INTO mailbox SELECT 'Box' || g || '@Example.org', (ARRAY[1.5, 2.5, 3])[1 + g % 3], 'm' FROM generate_series(1, 30) g;
INSERT INTO letter SELECT g, 'BOX' || (1 + g % 30) || '@EXAMPLE.ORG' FROM generate_series(1, 60) g;
ANALYZE;

SELECT count(*) FROM (
SELECT sync.mirror('shop', 'catalog', 'assigned(owner)')
  UNION ALL SELECT sync.mirror('day', 'catalog', 'follows(shop)')
  UNION ALL SELECT sync.mirror('slot', 'catalog', 'follows(shop)', codec => 'proto')
  UNION ALL SELECT sync.mirror('booking', 'catalog', 'follows(at)')
  UNION ALL SELECT sync.mirror('tick', 'catalog', 'follows(shop)')
  UNION ALL SELECT sync.mirror('opening', 'catalog', 'broadcast')
  UNION ALL SELECT sync.mirror('kind', 'catalog', 'follows(shop)')
  UNION ALL SELECT sync.mirror('item', 'catalog', 'follows(kind)')
  UNION ALL SELECT sync.mirror('ledger', 'catalog', 'follows(shop)')
  UNION ALL SELECT sync.mirror('mixed', 'catalog', 'follows(shop)')
  UNION ALL SELECT sync.mirror('stamp', 'catalog', 'follows(shop)')
  UNION ALL SELECT sync.mirror('stamped', 'catalog', 'follows(at)')
  UNION ALL SELECT sync.mirror('mailbox', 'catalog', 'follows(shop)')
  UNION ALL SELECT sync.mirror('letter', 'catalog', 'follows(email)')) m;
SELECT * FROM sync.check();

-- a record keyed by citext: its replicas spell its keys lowercase, as the
-- server's locale folds them; a row in another case is refused when filed
-- (tests/e2e/keys.py)
CREATE TABLE inbox (origin uuid, email citext, PRIMARY KEY (origin, email));
SELECT sync.mirror('inbox', 'record', key => '{origin,email}', origin => 'origin');
SELECT sync.unmirror('inbox');
-- keys no replica could spell as the server does: refused, saying what to do
CREATE COLLATION folded (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE folder (name text COLLATE folded PRIMARY KEY);
SELECT sync.mirror('folder', 'catalog', 'broadcast');
CREATE TABLE span (d interval PRIMARY KEY);
SELECT sync.mirror('span', 'catalog', 'broadcast');
-- a timestamp pointing at a timestamptz: equal by the session's TimeZone, spelled apart
CREATE TABLE local_booking (id int PRIMARY KEY, at timestamp NOT NULL REFERENCES slot);
SELECT sync.mirror('local_booking', 'catalog', 'follows(at)');
DROP TABLE inbox, folder, span, local_booking;

SELECT sync.replica_add('00000000-0000-0000-0000-000000000001');
SELECT sync.replica_add('00000000-0000-0000-0000-000000000002');
SELECT provisioned FROM sync.relay_pass();
UPDATE sync.replicas SET acked_number = last_number;

-- what each replica holds, against its wanted set from scratch
CREATE FUNCTION pg_temp.agrees() RETURNS TABLE (replica uuid, held bigint, agrees boolean)
	LANGUAGE sql SET magic_sync.check_scans = off SET enable_seqscan = on AS $$
	SELECT r.id, (SELECT count(*) FROM sync.held h WHERE h.replica = r.id AND h.taken IS NULL),
	       NOT EXISTS (SELECT FROM (SELECT w.tab, w.key FROM sync.wanted(r.id) w) w
	                   FULL JOIN (SELECT t.relid AS tab, h.key FROM sync.held h JOIN sync.tables t ON t.id = h.tab
	                               WHERE h.replica = r.id AND h.taken IS NULL) h ON h.tab = w.tab AND h.key = w.key
	                   WHERE h.key IS NULL OR w.key IS NULL)
	  FROM sync.replicas r ORDER BY r.id $$;
SELECT * FROM pg_temp.agrees();
CREATE FUNCTION pg_temp.pass(OUT notes_read bigint, OUT rows_sent bigint, OUT rows_taken bigint, OUT agrees boolean)
	LANGUAGE sql AS $$
	SELECT p.notes_read, p.rows_sent, p.rows_taken, (SELECT bool_and(a.agrees) FROM pg_temp.agrees() a)
	  FROM sync.relay_pass() p $$;
-- the keys of the notes of the last writes
CREATE FUNCTION pg_temp.noted(after bigint) RETURNS TABLE (tab text, key text, old_key text)
	LANGUAGE sql AS $$
	SELECT t.name, n.key, n.old_key FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
	 WHERE n.id > after ORDER BY n.id $$;
SELECT coalesce(max(id), 0) AS before FROM sync.notes \gset

-- the same rows written in sessions of three settings: the same keys
SET DateStyle = 'SQL, DMY';
SET TimeZone = 'Asia/Kolkata';
SET extra_float_digits = -10;
UPDATE slot SET label = 'a' WHERE at = '2024-01-01 03:00+00';
UPDATE tick SET n = n + 1 WHERE at = '2024-01-01 00:00:02.5';
UPDATE day SET note = 'a' WHERE (shop, day) = (1.50, '2024-01-02');
UPDATE mixed SET v = v + 1 WHERE n = 2.2;
SET DateStyle = 'German';
SET TimeZone = 'America/St_Johns';
SET extra_float_digits = 3;
UPDATE slot SET label = 'b' WHERE at = '2024-01-01 03:00+00';
UPDATE tick SET n = n + 1 WHERE at = '2024-01-01 00:00:02.5';
UPDATE day SET note = 'b' WHERE (shop, day) = (1.5, '2024-01-02');
UPDATE mixed SET v = v + 1 WHERE n = 2.2;
SET DateStyle = 'Postgres, MDY';
SET IntervalStyle = 'sql_standard';
SET TimeZone = 'Pacific/Chatham';
UPDATE slot SET label = 'c' WHERE at = '2024-01-01 03:00+00';
UPDATE tick SET n = n + 1 WHERE at = '2024-01-01 00:00:02.5';
UPDATE day SET note = 'c' WHERE (shop, day) = (1.500, '2024-01-02');
UPDATE mixed SET v = v + 1 WHERE n = 2.2;
UPDATE mailbox SET note = 'c' WHERE email = 'box2@example.ORG';
SELECT * FROM pg_temp.noted(:before);
-- a numeric key given another scale is the same key: no key changed
SELECT coalesce(max(id), 0) AS before FROM sync.notes \gset
UPDATE shop SET id = 1.50000 WHERE id = 1.5;
-- nor a citext key given another case, its letters with it
UPDATE mailbox SET email = 'bOx4@eXample.org' WHERE email = 'box4@example.org';
SELECT * FROM pg_temp.noted(:before);
-- the relay in the last session's settings: a key column travels in its key's spelling
SELECT * FROM pg_temp.pass();
SELECT u AS upsert
  FROM sync.outbox o JOIN sync.bodies b ON b.id = o.body,
       LATERAL jsonb_array_elements(sync.inspect(o.head || b.bytes) -> 'down' -> 'tables') t,
       LATERAL jsonb_array_elements_text(t -> 'upserts') u
 WHERE t ->> 'table' IN ('tick', 'day', 'mixed', 'shop', 'mailbox', 'letter') AND o.number = (SELECT max(number) FROM sync.outbox)
 ORDER BY 1;
RESET DateStyle;
RESET IntervalStyle;
RESET TimeZone;
RESET extra_float_digits;
UPDATE sync.replicas SET acked_number = last_number;

SET enable_seqscan = off;
SET magic_sync.check_scans = on;
-- a shop renamed; moved to the other replica, with its family
UPDATE shop SET name = 'renamed' WHERE id = 3;
SELECT * FROM pg_temp.pass();
UPDATE shop SET owner = '00000000-0000-0000-0000-000000000002' WHERE id = 3;
SELECT * FROM pg_temp.pass();
-- a day's key changed (numeric and date)
UPDATE day SET day = day + 100 WHERE (shop, day) = (2.5, '2024-01-05');
SELECT * FROM pg_temp.pass();
-- a slot moved to another shop; a booking moved to another slot; a slot's instant changed, its bookings with it
UPDATE slot SET shop = 3 WHERE at = '2024-01-01 01:30+00';
SELECT * FROM pg_temp.pass();
UPDATE booking SET at = '2024-01-01 04:30+00' WHERE id = 7;
SELECT * FROM pg_temp.pass();
UPDATE slot SET at = '2024-02-01 00:00+00' WHERE at = '2024-01-01 06:00+00';
SELECT * FROM pg_temp.pass();
-- a tick, an opening, an item moved to another kind, a ledger line, a mixed row moved to another shop
UPDATE tick SET shop = 1.5 WHERE at = '2024-01-01 00:00:05';
SELECT * FROM pg_temp.pass();
UPDATE opening SET note = 'late' WHERE t = '08:15:30';
SELECT * FROM pg_temp.pass();
UPDATE item SET kind = 'large' WHERE id = 4;
SELECT * FROM pg_temp.pass();
UPDATE ledger SET amount = amount + 0.01 WHERE (amount, day) = (1.00, '2024-01-05');
SELECT * FROM pg_temp.pass();
UPDATE mixed SET shop = 2.5 WHERE n = 3.3;
SELECT * FROM pg_temp.pass();
-- a mailbox moved to another shop, its letters with it; a letter to another mailbox, in another case
UPDATE mailbox SET shop = 3 WHERE email = 'BOX6@example.org';
SELECT * FROM pg_temp.pass();
UPDATE letter SET email = 'box7@EXAMPLE.org' WHERE id = 1;
SELECT * FROM pg_temp.pass();
-- a stamp moved to another shop, its stamped rows with it; its instant
-- changed in a session far from UTC, theirs with it
UPDATE stamp SET shop = 2.5 WHERE id = 3;
SELECT * FROM pg_temp.pass();
SET TimeZone = 'Pacific/Kiritimati';
UPDATE stamp SET at = '2024-03-02 00:00+00' WHERE id = 4;
RESET TimeZone;
SELECT * FROM pg_temp.pass();
-- the check is live: without the index on booking (at), moving a slot to
-- another shop reads booking whole, and the pass says so
DROP INDEX booking_at_idx;
UPDATE slot SET shop = 1.5 WHERE at = '2024-01-01 07:30+00';
\set VERBOSITY terse
SELECT * FROM pg_temp.pass();
\set VERBOSITY default
CREATE INDEX ON booking (at);
-- gone, and back
DELETE FROM booking WHERE id = 9;
DELETE FROM slot WHERE at = '2024-01-01 13:30+00' AND NOT EXISTS (SELECT FROM booking WHERE at = '2024-01-01 13:30+00');
SELECT * FROM pg_temp.pass();
INSERT INTO booking VALUES (9, '2024-01-01 15:00+00', 'again');
SELECT * FROM pg_temp.pass();
RESET magic_sync.check_scans;
RESET enable_seqscan;
-- a grouped table keyed by citext: its member rows are joined to its rows
-- as citext compares (its own equality: pg_catalog's, through text,
-- compared case and all and could use no index of board), so that its key
-- index serves the join -- a group given, a row changed, a group taken, why
-- a replica holds a row
CREATE TABLE board (email citext PRIMARY KEY, title text NOT NULL);
CREATE TABLE board_groups (email citext NOT NULL REFERENCES board, grp text NOT NULL, PRIMARY KEY (grp, email));
CREATE INDEX ON board_groups (email);
CREATE TABLE board_replicas (grp text NOT NULL, replica uuid NOT NULL, PRIMARY KEY (grp, replica));
INSERT INTO board SELECT 'Board' || g || '@Example.org', 'b' || g FROM generate_series(1, 40) g;
INSERT INTO board_groups SELECT 'board' || g || '@example.org', 'g' || (g % 4) FROM generate_series(1, 40) g;
INSERT INTO board_replicas VALUES ('g1', '00000000-0000-0000-0000-000000000001');
SELECT sync.mirror('board', 'catalog', 'grouped(members => board_groups, assigned => board_replicas)');
SELECT * FROM pg_temp.pass();
UPDATE sync.replicas SET acked_number = last_number;
ANALYZE board, board_groups, board_replicas;
SET enable_seqscan = off;
SET magic_sync.check_scans = on;
INSERT INTO board_replicas VALUES ('g2', '00000000-0000-0000-0000-000000000002');
SELECT * FROM pg_temp.pass();
UPDATE board SET title = 'renamed' WHERE email = 'BOARD6@example.org';
SELECT * FROM pg_temp.pass();
DELETE FROM board_replicas WHERE grp = 'g1';
SELECT * FROM pg_temp.pass();
RESET magic_sync.check_scans;
RESET enable_seqscan;
SELECT depth, relation, wanted, held FROM sync.why('00000000-0000-0000-0000-000000000002', 'board', sync.key('{board10@example.org}')) ORDER BY depth;

-- a row's progress by its key in another spelling
SELECT replica, answer FROM sync.row_progress('slot', '{"2024-01-01 08:30:00+05:30"}') ORDER BY replica;
SELECT replica, answer FROM sync.row_progress('ledger', '{1.2500,"2024-01-01"}') ORDER BY replica;
SELECT replica, answer FROM sync.row_progress('mailbox', '{BOX8@Example.ORG}') ORDER BY replica;

-- a label of the enum renamed: its tables' keys are spelled anew, which no
-- row's trigger sees; kind and mixed, keyed by it, are provisioned again,
-- item, which points at it, sent again
ALTER TYPE size RENAME VALUE 'large' TO 'big';
SELECT * FROM pg_temp.pass();
SELECT count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab
 WHERE t.name IN ('kind', 'mixed') AND h.taken IS NULL AND h.key LIKE '%large%';
SELECT * FROM pg_temp.agrees();

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_keytypes;
