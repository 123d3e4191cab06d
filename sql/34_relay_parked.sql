-- A pass looks for parked notes by their index, and reads no other page of
-- sync.notes, nor any large table but by an index (issue 37: capture costs
-- the writer less).  Its statements are planned once and kept; planned
-- while sync.notes was small, the reads of parked notes (those read again,
-- the rows they hold back) scanned the whole table at every pass once it
-- had grown, however few notes were parked: under pgbench, two scans of
-- hundreds of pages a pass.  Parking itself is sql/32_relay_park.sql's.
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';

CREATE SCHEMA parked;
CREATE TABLE parked.items (id int PRIMARY KEY, v text NOT NULL);
SELECT sync.mirror('parked.items', 'catalog', 'broadcast');
SELECT sync.replica_add('cccccccc-0000-0000-0000-000000000002');
SELECT provisioned FROM sync.relay_pass();

-- small passes, their statements kept, while sync.notes is small
VACUUM ANALYZE sync.notes;
INSERT INTO parked.items VALUES (1, 'a');
SELECT notes_read FROM sync.relay_pass();
UPDATE parked.items SET v = 'b' WHERE id = 1;
SELECT notes_read FROM sync.relay_pass();

-- sync.notes grows: a large change, relayed (its notes deleted, their
-- pages left until a vacuum)
INSERT INTO parked.items SELECT g, 'v' FROM generate_series(2, 20001) g;
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT pg_relation_size('sync.notes') > 100 * 8192 AS grown;

-- one row changed: its pass scans no page of sync.notes
UPDATE parked.items SET v = 'c' WHERE id = 7;
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT seq_scan AS notes_scanned FROM pg_stat_xact_all_tables WHERE relid = 'sync.notes'::regclass;
-- nor any table that grew with it (sync.held, the mirrored table), nor one
-- an earlier test left large: a pass reads a large table by an index only
SELECT s.schemaname, s.relname, s.seq_scan FROM pg_stat_xact_all_tables s
 WHERE s.seq_scan > 0 AND pg_relation_size(s.relid) > 100 * 8192 ORDER BY 1, 2;
COMMIT;

SELECT count(*) AS pending FROM sync.notes WHERE NOT done;

-- clean up for the tests that follow
SELECT sync.unmirror('parked.items');
SELECT sync.replica_drop('cccccccc-0000-0000-0000-000000000002');
SELECT forgotten >= 1 AS forgotten FROM sync.relay_pass();
DROP SCHEMA parked CASCADE;
TRUNCATE sync.notes, sync.quarantine, sync.bodies CASCADE;
