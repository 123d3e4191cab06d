-- sync.pull reads the replica's row, its answers, its messages and their
-- bodies by probes of their primary keys, and runs no statement when it has
-- no answer to give (issue 37): a caught-up pull does not lock sync.answers
-- to write it.  What it gives is what its statements gave: each answer once, and
-- again a minute after it was last given, until it was received; the
-- messages after `after`, in order, those dropped skipped.
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';

CREATE SCHEMA probed;
CREATE TABLE probed.items (id int PRIMARY KEY, v text NOT NULL);
SELECT sync.mirror('probed.items', 'catalog', 'broadcast');
SELECT sync.replica_add('eeeeeeee-0000-0000-0000-000000000001');
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) >= 0 AS relayed FROM sync.relay_pass();
SELECT max(number) AS provisioned_by FROM sync.outbox WHERE replica = 'eeeeeeee-0000-0000-0000-000000000001' \gset
INSERT INTO probed.items VALUES (1, 'a');
SELECT rows_sent >= 1 AS sent FROM sync.relay_pass();
INSERT INTO probed.items VALUES (2, 'b');
SELECT rows_sent >= 1 AS sent FROM sync.relay_pass();
-- its two messages (numbers are drawn for every replica: others' come between)
SELECT min(number) AS first, max(number) AS second FROM sync.outbox
 WHERE replica = 'eeeeeeee-0000-0000-0000-000000000001' AND number > :provisioned_by \gset

-- no answer waiting: the two messages, and sync.answers not locked to be written
BEGIN;
SELECT number = :first AS first, number = :second AS second, octet_length(message) > 0 AS whole
  FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :provisioned_by, 1000000);
SELECT count(*) AS answers_written FROM pg_locks
 WHERE pid = pg_backend_pid() AND relation = 'sync.answers'::regclass AND mode = 'RowExclusiveLock';
COMMIT;

-- an answer waiting: given first, once, and marked given
INSERT INTO sync.answers (replica, send_id, message) VALUES ('eeeeeeee-0000-0000-0000-000000000001', '\x01', '\xaa');
SELECT number = :second AS second, message = '\xaa' AS answer
  FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :first, 1024);
SELECT pulled IS NOT NULL AS given FROM sync.answers WHERE replica = 'eeeeeeee-0000-0000-0000-000000000001';
SELECT count(*) FILTER (WHERE number IS NULL) AS answers
  FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :first, 1024);
-- given over a minute ago: again
UPDATE sync.answers SET pulled = now() - interval '2 minutes' WHERE replica = 'eeeeeeee-0000-0000-0000-000000000001';
SELECT count(*) FILTER (WHERE number IS NULL) AS answers
  FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :first, 1024);
-- received: never again
UPDATE sync.answers SET pulled = now() - interval '2 minutes', received = now()
 WHERE replica = 'eeeeeeee-0000-0000-0000-000000000001';
SELECT count(*) FILTER (WHERE number IS NULL) AS answers
  FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :first, 1024);

-- a message dropped (replaced by a snapshot) is skipped, the next one returned
UPDATE sync.outbox SET dropped = true
 WHERE replica = 'eeeeeeee-0000-0000-0000-000000000001' AND number = :first;
SELECT number = :second AS second FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :provisioned_by, 1024);

-- who may pull is read at every pull, with the replica's record by one
-- probe of its row: a role given the replica, then taken from it, in one
-- session; a role made a member of sync_admin, then no longer
CREATE ROLE regress_puller1;
CREATE ROLE regress_puller2;
SELECT sync.replica_set('eeeeeeee-0000-0000-0000-000000000001', role => 'regress_puller1');
SET ROLE regress_puller1;
SELECT count(*) > 0 AS pulled FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :provisioned_by, 1024);
RESET ROLE;
SELECT sync.replica_set('eeeeeeee-0000-0000-0000-000000000001', role => 'regress_puller2');
SET ROLE regress_puller1;
SELECT count(*) FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :provisioned_by, 1024);
RESET ROLE;
SET ROLE regress_puller2;
SELECT count(*) > 0 AS pulled FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :provisioned_by, 1024);
RESET ROLE;
GRANT sync_admin TO regress_puller1;
SET ROLE regress_puller1;
SELECT count(*) > 0 AS pulled FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :provisioned_by, 1024);
RESET ROLE;
REVOKE sync_admin FROM regress_puller1;
SET ROLE regress_puller1;
SELECT count(*) FROM sync.pull('eeeeeeee-0000-0000-0000-000000000001', :provisioned_by, 1024);
RESET ROLE;
DROP ROLE regress_puller1, regress_puller2;

-- clean up for the tests that follow
SELECT sync.unmirror('probed.items');
SELECT sync.replica_drop('eeeeeeee-0000-0000-0000-000000000001');
SELECT forgotten FROM sync.relay_pass();
DROP SCHEMA probed CASCADE;
