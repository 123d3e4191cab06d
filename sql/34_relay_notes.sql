-- A pass deletes its own notes, and reads no other page of sync.notes to
-- find them (issue 14: a pass costs what changed).  After a large change,
-- with statistics taken while its notes waited, every later pass, however
-- small, deleted its notes by a hash join over a scan of the whole table,
-- until the table was analysed again.
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';

CREATE SCHEMA big;
CREATE TABLE big.items (id int PRIMARY KEY, v text NOT NULL);
SELECT sync.mirror('big.items', 'catalog', 'broadcast');
SELECT sync.replica_add('cccccccc-0000-0000-0000-000000000001');
SELECT provisioned FROM sync.relay_pass();

-- a large change, analysed while its notes wait
INSERT INTO big.items SELECT g, 'v' FROM generate_series(1, 20000) g;
ANALYZE sync.notes;
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT count(*) AS pending FROM sync.notes WHERE NOT done;

-- one row changed: its pass scans no page of sync.notes, and deletes its
-- note and no other
UPDATE big.items SET v = 'w' WHERE id = 7;
SELECT last_value AS note7 FROM sync.note_seq \gset
-- the session's counts so far flushed, so that the pass's are its own
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT seq_scan AS notes_scanned, n_tup_del AS notes_deleted
  FROM pg_stat_xact_all_tables WHERE relid = 'sync.notes'::regclass;
COMMIT;
SELECT count(*) AS pending FROM sync.notes WHERE NOT done;
SELECT note = :note7 AS held_its_note FROM sync.held WHERE key = sync.key(ARRAY['7']);

-- clean up for the tests that follow
SELECT sync.unmirror('big.items');
SELECT sync.replica_drop(id) FROM sync.replicas;
SELECT forgotten FROM sync.relay_pass();
DROP SCHEMA big CASCADE;
TRUNCATE sync.notes, sync.quarantine, sync.bodies CASCADE;
