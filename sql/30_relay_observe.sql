-- The pass's look at sync.replicas (src/pg/relay/observe.c) is made in C;
-- the statement that says the same rule in SQL looks when a probe cannot.
-- Under magic_sync.full_plan each pass makes both and fails if they differ:
-- every condition of the look is walked here, with a table held back
-- (MS_EVOLVE_KEPT: a replica sent no table yet is not due a schema change)
-- and without.  In a database of its own: no other test's replicas.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_observe;
\c contrib_regression_observe
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;
SET magic_sync.full_plan = on;
CREATE TABLE obs_a (id int PRIMARY KEY, v text);
CREATE TABLE obs_b (id int PRIMARY KEY, v text);
SELECT sync.mirror('obs_a', 'catalog', 'broadcast');
SELECT sync.mirror('obs_b', 'catalog', 'broadcast');
INSERT INTO obs_a VALUES (1, 'one');
INSERT INTO obs_b VALUES (1, 'one');
CREATE FUNCTION pass() RETURNS TABLE (provisioned bigint, forgotten bigint) LANGUAGE sql AS $$
	SELECT provisioned, forgotten FROM sync.relay_pass()
$$;
-- what each replica's row says the look reads, after each pass
CREATE FUNCTION seen() RETURNS TABLE (replica text, live boolean, seen_live boolean, provision boolean,
                                      failed boolean, held_due boolean, tables bigint) LANGUAGE sql AS $$
	SELECT right(r.id::text, 1), r.live, r.seen_live, r.provision, r.provision_failed_at IS NOT NULL,
	       r.held_due IS NOT NULL, (SELECT count(*) FROM sync.replica_tables t WHERE t.replica = r.id)
	  FROM sync.replicas r ORDER BY 1
$$;
-- no replica yet; then two new ones (live, never seen: provisioned)
SELECT * FROM pass();
SELECT sync.replica_add('0b5e0000-0000-4000-8000-000000000001');
SELECT sync.replica_add('0b5e0000-0000-4000-8000-000000000002');
SELECT sync.replica_add('0b5e0000-0000-4000-8000-000000000003', live => false);
SELECT * FROM pass();
SELECT * FROM seen();
-- a snapshot that failed a minute ago is not provisioned, nor live; one that failed before is
UPDATE sync.replicas SET provision = true, provision_failed_at = now() WHERE id = '0b5e0000-0000-4000-8000-000000000002';
SELECT * FROM pass();
UPDATE sync.replicas SET provision_failed_at = now() - interval '2 minutes' WHERE id = '0b5e0000-0000-4000-8000-000000000002';
SELECT * FROM pass();
-- a partition seen otherwise, and held rows left due: provisioned again
UPDATE sync.replicas SET seen_partition = 'elsewhere' WHERE id = '0b5e0000-0000-4000-8000-000000000001';
SELECT * FROM pass();
UPDATE sync.replicas SET held_due = 1 WHERE id = '0b5e0000-0000-4000-8000-000000000002';
SELECT * FROM pass();
SELECT * FROM seen();
-- a schema change: due to the live replicas not being provisioned
ALTER TABLE obs_a ADD COLUMN w int;
SELECT * FROM pass();
-- a table held back (its noting trigger off); a schema change of the other:
-- due to a replica sent tables (1), not to one sent none (3, live now, its
-- snapshot marked failed a minute ago so that it is not provisioned)
ALTER TABLE obs_b DISABLE TRIGGER magic_sync_note;
UPDATE sync.replicas SET live = true, seen_live = true, provision = true, provision_failed_at = now() - interval '2 minutes',
       schema_hash = NULL WHERE id = '0b5e0000-0000-4000-8000-000000000003';
UPDATE sync.replicas SET provision_failed_at = now() WHERE id = '0b5e0000-0000-4000-8000-000000000003';
ALTER TABLE obs_a ADD COLUMN x int;
SELECT * FROM pass();
SELECT * FROM seen();
UPDATE sync.replicas SET provision = false, provision_failed_at = NULL WHERE id = '0b5e0000-0000-4000-8000-000000000003';
SELECT * FROM pass();
-- no longer live, and dropped: forgotten, with the table still held back and after
SELECT sync.replica_set('0b5e0000-0000-4000-8000-000000000002', live => false);
SELECT * FROM pass();
SELECT sync.replica_drop('0b5e0000-0000-4000-8000-000000000003');
ALTER TABLE obs_b ENABLE TRIGGER magic_sync_note;
SELECT * FROM pass();
SELECT * FROM seen();
\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_observe;
