-- The batch's notes are read by a probe of notes_pending, in C, not by a
-- statement (batch_probe.c, issue 37): the notes not done from the floor up,
-- oldest first, up to magic_sync.batch_notes, of build 1 or older and not
-- parked, into pg_temp.ms_notes_read; the rows they name, the newest note of
-- each and whether a note moved it (its key changed, to it or from it),
-- into pg_temp.ms_pending.  Under magic_sync.full_plan the statement reads
-- them too, and the pass fails where the probe found otherwise.  Each pass
-- here runs both ways in one snapshot; what each read is compared.  In a
-- database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_batch;
\c contrib_regression_batch
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE SCHEMA b;
-- text keys whose "C" order is not the database's
CREATE TABLE b.items (id text PRIMARY KEY, v text NOT NULL);
INSERT INTO b.items VALUES ('a', 'v'), ('B', 'v'), ('é', 'v'), ('a b', 'v'), ('Z', 'v'), ('m', 'v');
SELECT sync.mirror('b.items', 'catalog', 'broadcast');
SELECT sync.replica_add('dddddddd-0000-0000-0000-000000000001');
SELECT provisioned FROM sync.relay_pass();

-- what a pass read: its notes (their ids as of :first) and its rows
CREATE FUNCTION pg_temp.read(first bigint) RETURNS TABLE (notes text, pending text) LANGUAGE sql AS $$
	SELECT (SELECT string_agg((n.id - first)::text || n.source::text || coalesce(sync.key_parts(n.key)::text, ''), ',' ORDER BY n.id) FROM pg_temp.ms_notes_read n),
	       (SELECT string_agg(sync.key_parts(p.key)::text || ':' || (p.note - first) || CASE WHEN p.moved THEN 'm' ELSE '' END, ','
	                          ORDER BY p.tab, p.key) FROM pg_temp.ms_pending p)
$$;
SELECT last_value AS first FROM sync.note_seq \gset

-- a row changed twice (its newest note), one changed once, a key changed
-- (both keys moved), a row made; a later build's note and a parked one,
-- neither read; a note done, not read
UPDATE b.items SET v = 'w' WHERE id = 'a';
UPDATE b.items SET v = 'x' WHERE id = 'é';
UPDATE b.items SET v = 'y' WHERE id = 'a';
UPDATE b.items SET id = 'A' WHERE id = 'B';
INSERT INTO b.items VALUES ('zz', 'v');
INSERT INTO sync.notes (tab, key, build) SELECT id, sync.key(ARRAY['m']), 2 FROM sync.tables;
INSERT INTO sync.notes (tab, key, parked, parked_at) SELECT id, sync.key(ARRAY['Z']), 'a test', now() FROM sync.tables;
INSERT INTO sync.notes (tab, key, done) SELECT id, sync.key(ARRAY['a b']), true FROM sync.tables;

BEGIN;
SAVEPOINT whole;
SET LOCAL magic_sync.full_plan = on;
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT notes AS full_notes, pending AS full_pending FROM pg_temp.read(:first) \gset
ROLLBACK TO SAVEPOINT whole;
SET LOCAL magic_sync.full_plan = off;
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT notes, pending, notes = :'full_notes' AS notes_as_full, pending = :'full_pending' AS pending_as_full
  FROM pg_temp.read(:first);
COMMIT;
-- the later build's note and the parked one wait; the pass deleted its own
SELECT build, parked IS NOT NULL AS parked, done FROM sync.notes ORDER BY id;

-- a batch of two: the two oldest notes, however many wait
SELECT last_value AS first FROM sync.note_seq \gset
UPDATE b.items SET v = 'p' WHERE id = 'm';
UPDATE b.items SET v = 'q' WHERE id = 'a';
UPDATE b.items SET v = 'r' WHERE id = 'A';
SET magic_sync.batch_notes = 2;
SELECT notes_read FROM sync.relay_pass();
SELECT * FROM pg_temp.read(:first);
SELECT notes_read FROM sync.relay_pass();
SELECT * FROM pg_temp.read(:first);
RESET magic_sync.batch_notes;

-- a group member's note is read, and names no row of ms_pending
SELECT last_value AS first FROM sync.note_seq \gset
INSERT INTO sync.notes (tab, source, key, grp) SELECT id, 'm', sync.key(ARRAY['a']), 'g' FROM sync.tables;
UPDATE b.items SET v = 's' WHERE id = 'a';
BEGIN;
SAVEPOINT whole;
SET LOCAL magic_sync.full_plan = on;
SELECT notes_read FROM sync.relay_pass();
ROLLBACK TO SAVEPOINT whole;
SET LOCAL magic_sync.full_plan = off;
SELECT notes_read FROM sync.relay_pass();
SELECT * FROM pg_temp.read(:first);
ROLLBACK;

-- a pass by hand in the transaction that wrote the notes reads them: the
-- noting trigger buffers them, and writes them for the probe as it does for
-- a statement that reads sync.notes
BEGIN;
UPDATE b.items SET v = 't' WHERE id = 'zz';
UPDATE b.items SET v = 't' WHERE id = 'm';
SELECT notes_read FROM sync.relay_pass();
COMMIT;
SELECT count(*) AS pending FROM sync.notes WHERE NOT done AND build = 1 AND parked IS NULL;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_batch;
