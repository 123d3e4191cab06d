-- sync.pull flushes what it returns (issue 37: a write reaches the device
-- sooner).  The worker's passes commit without waiting for their WAL to be
-- flushed, so that their NOTIFY goes out at once; no replica may apply a
-- pass a crash could take back, so the pull flushes the WAL of the passes
-- it returns before it returns them.  A pass committed so by hand here; the
-- pull too, as the agent's is (what the pull writes is bookkeeping).
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';

CREATE SCHEMA flushed;
CREATE TABLE flushed.items (id int PRIMARY KEY, v text NOT NULL);
SELECT sync.mirror('flushed.items', 'catalog', 'broadcast');
SELECT sync.replica_add('ffffffff-0000-0000-0000-000000000001');
SELECT provisioned FROM sync.relay_pass();
SELECT max(number) AS provisioned_by FROM sync.outbox WHERE replica = 'ffffffff-0000-0000-0000-000000000001' \gset

-- a change, relayed by a pass that commits without waiting for its flush
INSERT INTO flushed.items VALUES (1, 'a');
BEGIN;
SET LOCAL synchronous_commit = off;
SELECT notes_read FROM sync.relay_pass();
COMMIT;
SELECT count(*) AS written FROM sync.outbox WHERE replica = 'ffffffff-0000-0000-0000-000000000001' AND number > :provisioned_by;
-- where the WAL inserted so far ends (a position just past a page's header,
-- where nothing was written yet, ends at the page's start)
SELECT CASE WHEN (i - '0/0'::pg_lsn) % 8192 IN (24, 40) THEN i - ((i - '0/0'::pg_lsn) % 8192) ELSE i END AS inserted
  FROM pg_current_wal_insert_lsn() i \gset

-- pulled, in a transaction that waits for no flush either: what it returns
-- is flushed all the same
BEGIN;
SET LOCAL synchronous_commit = off;
SELECT count(*) AS returned FROM sync.pull('ffffffff-0000-0000-0000-000000000001', :provisioned_by, 1048576);
COMMIT;
SELECT pg_current_wal_flush_lsn() >= :'inserted'::pg_lsn AS flushed;

-- clean up for the tests that follow
SELECT sync.unmirror('flushed.items');
SELECT sync.replica_drop('ffffffff-0000-0000-0000-000000000001');
SELECT forgotten >= 1 AS forgotten FROM sync.relay_pass();
DROP SCHEMA flushed CASCADE;
TRUNCATE sync.notes, sync.quarantine, sync.bodies CASCADE;
