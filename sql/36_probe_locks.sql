-- A probe (probe.h) holds what it read to its transaction's end, as a
-- statement's scan does: the table and the index it read, in ACCESS SHARE
-- mode.  A pull that runs no statement, only probes (the replica's row, its
-- answers, its messages and their bodies, the epoch), leaves them locked
-- until its transaction ends, so that no ALTER, TRUNCATE, VACUUM FULL or
-- ALTER EXTENSION UPDATE commits between two of its reads (the isolation
-- spec probe_locks shows one waiting).
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';

CREATE SCHEMA plocks;
CREATE TABLE plocks.items (id int PRIMARY KEY, v text NOT NULL);
SELECT sync.mirror('plocks.items', 'catalog', 'broadcast');
INSERT INTO plocks.items VALUES (1, 'a'), (2, 'b');
SELECT sync.replica_add('eeeeeeee-0000-0000-0000-000000000011');
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) >= 0 AS relayed FROM sync.relay_pass();

-- its snapshot's messages, read by probes: each table and index read locked still
-- (its count of the messages' pulls, an UPDATE, takes locks of its own)
BEGIN;
SELECT count(*) > 0 AS messages FROM sync.pull('eeeeeeee-0000-0000-0000-000000000011', 0, 1000000);
SELECT c.relname, l.granted FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
 WHERE l.pid = pg_backend_pid() AND c.relnamespace = 'sync'::regnamespace AND l.mode = 'AccessShareLock'
 ORDER BY c.relname COLLATE "C";
COMMIT;

-- and none of it once the transaction ended
SELECT count(*) AS held FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
 WHERE l.pid = pg_backend_pid() AND c.relnamespace = 'sync'::regnamespace;

-- clean up for the tests that follow
SELECT sync.unmirror('plocks.items');
SELECT sync.replica_drop('eeeeeeee-0000-0000-0000-000000000011');
SELECT forgotten FROM sync.relay_pass();
DROP SCHEMA plocks CASCADE;
