-- Replicas: added, changed, dropped; each misuse refused.
-- start from an empty catalog: ids are deterministic
DO $$ BEGIN PERFORM setval('sync.tables_id_seq', 1, false); END $$;
CREATE ROLE store_7 LOGIN;
SELECT sync.replica_add('7c9e6679-7425-40de-944b-e07fc1f90ae7', 'north', 'store_7');
SELECT sync.replica_add('0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1', live => false);
SELECT id, partition, role, live, dropped, seen_live, provision FROM sync.replicas ORDER BY id;
SELECT sync.replica_add('7c9e6679-7425-40de-944b-e07fc1f90ae7');
SELECT sync.replica_add('11111111-1111-1111-1111-111111111111', role => 'nobody_here');
SELECT sync.replica_add(NULL);
SELECT sync.replica_set('0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1', live => true);
SELECT sync.replica_set('7c9e6679-7425-40de-944b-e07fc1f90ae7', "partition" => 'south');
SELECT sync.replica_set('7c9e6679-7425-40de-944b-e07fc1f90ae7');
SELECT sync.replica_set('22222222-2222-2222-2222-222222222222', live => true);
SELECT id, partition, role, live, dropped FROM sync.replicas ORDER BY id;
SELECT sync.replica_drop('0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1');
SELECT id, partition, role, live, dropped FROM sync.replicas ORDER BY id;
SELECT sync.replica_drop('0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1');
SELECT sync.replica_set('0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1', live => true);
SELECT sync.replica_add('0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1');
SELECT sync.replica_drop('33333333-3333-3333-3333-333333333333');
-- only sync_admin may call them
SET ROLE store_7;
SELECT sync.replica_add('44444444-4444-4444-4444-444444444444');
SELECT sync.mirror('pg_class', 'catalog');
SELECT * FROM sync.check();
RESET ROLE;
DROP ROLE store_7;
-- a replica's partition is one the fleet knows: a value of a mirrored
-- table's partition column, or one a replica already has; where no mirrored
-- table declares a partition column, a partition only scopes the reads
SELECT sync.replica_add('55555555-5555-4555-8555-555555555555', 'anywhere');
CREATE TABLE regions_t (id int PRIMARY KEY, region text NOT NULL);
SELECT sync.mirror('regions_t', 'catalog', 'broadcast', "partition" => 'region');
SELECT sync.replica_add('66666666-6666-4666-8666-666666666666', 'north');
INSERT INTO regions_t VALUES (1, 'north'), (2, 'south'), (3, 'north');
SELECT sync.replica_add('66666666-6666-4666-8666-666666666666', 'north');
SELECT sync.replica_add('77777777-7777-4777-8777-777777777777', 'nrth');
-- one a replica has is known, rows or not; a dropped replica's is not
SELECT sync.replica_add('77777777-7777-4777-8777-777777777777', 'anywhere');
SELECT sync.replica_drop('55555555-5555-4555-8555-555555555555');
SELECT sync.replica_drop('77777777-7777-4777-8777-777777777777');
SELECT sync.replica_add('88888888-8888-4888-8888-888888888888', 'anywhere');
-- a replica moved: to a partition the fleet knows only
SELECT sync.replica_set('66666666-6666-4666-8666-666666666666', "partition" => 'sout');
SELECT sync.replica_set('66666666-6666-4666-8666-666666666666', "partition" => 'south');
SELECT sync.replica_set('66666666-6666-4666-8666-666666666666', live => false);
SELECT id, partition, live FROM sync.replicas WHERE NOT dropped ORDER BY id;
SELECT sync.unmirror('regions_t');
DROP TABLE regions_t;
-- one role given to two replicas: each could pull and file for the other,
-- and the caller is warned, once a transaction and role (issue 39); a
-- dropped replica's role is no longer shared
CREATE ROLE store_9 LOGIN;
SELECT sync.replica_add('99999999-0000-4000-8000-000000000001', role => 'store_9');
SELECT sync.replica_add('99999999-0000-4000-8000-000000000002', role => 'store_9');
BEGIN;
SELECT sync.replica_add('99999999-0000-4000-8000-000000000003', role => 'store_9');
SELECT sync.replica_add('99999999-0000-4000-8000-000000000004', role => 'store_9');
COMMIT;
SELECT sync.replica_drop(r) FROM unnest('{99999999-0000-4000-8000-000000000002,99999999-0000-4000-8000-000000000003,99999999-0000-4000-8000-000000000004}'::uuid[]) r;
SELECT sync.replica_set('99999999-0000-4000-8000-000000000001', role => 'store_9');
-- leave nothing behind for the next test
DELETE FROM sync.replicas;
DROP ROLE store_9;
