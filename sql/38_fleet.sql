-- A fleet's polls (docs/scale.md): a caught-up pull is read and writes
-- nothing, not even a row lock; sync.settled says how far a replica must
-- apply to hold what was committed before a moment (an agent's --once).
-- Run as a replica's own role, in a database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_fleet;
\c contrib_regression_fleet
SET client_min_messages = warning;
CREATE EXTENSION magic_sync;
CREATE TABLE products (id bigint PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('products', 'catalog', 'broadcast');
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 5) g;
CREATE ROLE fleet_one;
CREATE ROLE fleet_two;
SELECT sync.replica_add('f1f1f1f1-0000-4000-8000-000000000001', role => 'fleet_one');
SELECT sync.replica_add('f1f1f1f1-0000-4000-8000-000000000002', role => 'fleet_two');
\set R1 '''f1f1f1f1-0000-4000-8000-000000000001'''
CREATE TABLE marks (name text PRIMARY KEY, snap pg_snapshot);
GRANT SELECT ON marks TO PUBLIC;
-- a relay runs: this session holds the relay lock, as the worker does
SELECT pg_advisory_lock(1835100009, 1668512110) IS NOT NULL AS relay_runs;

-- before the first pass a snapshot is due: not settled
INSERT INTO marks VALUES ('start', pg_current_snapshot());
SET ROLE fleet_one;
SELECT sync.settled(:R1, (SELECT snap FROM marks WHERE name = 'start')) IS NULL AS not_yet;
RESET ROLE;
SET default_transaction_isolation = 'repeatable read';
SELECT messages > 0 AS written FROM sync.relay_pass();
RESET default_transaction_isolation;
SELECT last_number AS last FROM sync.replicas WHERE id = :R1 \gset
SET ROLE fleet_one;
-- once the pass wrote its snapshot: apply through the last message written for it
SELECT sync.settled(:R1, (SELECT snap FROM marks WHERE name = 'start')) = :last AS through_its_last;
RESET ROLE;

-- a change committed before the mark holds it back until a pass plans it;
-- one committed after the mark does not
UPDATE products SET name = 'tea' WHERE id = 1;
INSERT INTO marks VALUES ('after tea', pg_current_snapshot());
UPDATE products SET name = 'coffee' WHERE id = 2;
SET ROLE fleet_one;
SELECT sync.settled(:R1, (SELECT snap FROM marks WHERE name = 'after tea')) IS NULL AS tea_not_planned;
SELECT sync.settled(:R1, (SELECT snap FROM marks WHERE name = 'start')) IS NOT NULL AS start_settled;
RESET ROLE;
SET default_transaction_isolation = 'repeatable read';
SELECT messages > 0 AS written FROM sync.relay_pass();
RESET default_transaction_isolation;
SELECT last_number AS last FROM sync.replicas WHERE id = :R1 \gset
SET ROLE fleet_one;
SELECT sync.settled(:R1, (SELECT snap FROM marks WHERE name = 'after tea')) = :last AS tea_planned;
-- another replica's role may not ask
RESET ROLE;
SET ROLE fleet_two;
SELECT sync.settled(:R1, pg_current_snapshot());
RESET ROLE;

-- a replica provisioned again is not settled until its snapshot is written
SELECT sync.replica_reprovision(:R1);
SELECT sync.settled(:R1, pg_current_snapshot()) IS NULL AS provisioning;
-- unless no relay runs: nothing comes before one does, and nobody is kept waiting
SELECT pg_advisory_unlock(1835100009, 1668512110) AS relay_stops;
SELECT sync.settled(:R1, pg_current_snapshot()) = 0 AS nothing_to_wait_for;
SELECT pg_advisory_lock(1835100009, 1668512110) IS NOT NULL AS relay_runs;

-- a caught-up pull takes no lock on the replica's row (its xmax stays), and
-- counts nothing; one that finds messages counts them
SET default_transaction_isolation = 'repeatable read';
SELECT messages > 0 AS written FROM sync.relay_pass();
RESET default_transaction_isolation;
UPDATE sync.replicas SET acked_number = last_number WHERE id = :R1;
VACUUM FREEZE sync.replicas;
SELECT last_number AS last FROM sync.replicas WHERE id = :R1 \gset
SET ROLE fleet_one;
SELECT count(*) AS pulled FROM sync.pull(:R1, :last, 1024, ''::bytea);
RESET ROLE;
SELECT xmax = '0' AS no_lock FROM sync.replicas WHERE id = :R1;
SELECT sum(pulls) AS pulls FROM sync.outbox WHERE replica = :R1;
SET ROLE fleet_one;
SELECT count(*) > 0 AS pulled FROM sync.pull(:R1, 0, 1024);
RESET ROLE;
SELECT sum(pulls) > 0 AS counted FROM sync.outbox WHERE replica = :R1;

-- A message's first send writes nothing: no transaction id, its row keeps
-- its version, pulls stays 0 (0 and 1 both say no send failed: transport/
-- sent.c).  Each send after it counts, from 2: a send that keeps failing
-- shows (sync.live_replicas)
UPDATE products SET name = 'mate' WHERE id = 3;
SET default_transaction_isolation = 'repeatable read';
SELECT messages > 0 AS written FROM sync.relay_pass();
RESET default_transaction_isolation;
SELECT last_number AS last, acked_number AS acked FROM sync.replicas WHERE id = :R1 \gset
SELECT xmin AS row_xmin FROM sync.outbox WHERE replica = :R1 AND number = :last \gset
SET ROLE fleet_one;
BEGIN;
SELECT count(*) AS pulled FROM sync.pull(:R1, :acked, 1024);
SELECT pg_current_xact_id_if_assigned() IS NULL AS wrote_nothing;
COMMIT;
RESET ROLE;
SELECT pulls, xmin = :'row_xmin' AS same_version FROM sync.outbox WHERE replica = :R1 AND number = :last;
SET ROLE fleet_one;
SELECT count(*) AS pulled_again FROM sync.pull(:R1, :acked, 1024);
RESET ROLE;
SELECT pulls FROM sync.outbox WHERE replica = :R1 AND number = :last;
SET ROLE fleet_one;
SELECT count(*) AS pulled_again FROM sync.pull(:R1, :acked, 1024);
RESET ROLE;
SELECT pulls, send_failing = :last AS the_message, send_failures, unreachable
  FROM sync.outbox, sync.live_replicas r WHERE replica = :R1 AND number = :last AND r.id = :R1;

-- A batch of rows assigned to a fleet: the pass weighs each changed row with
-- the replicas its rule names, never the rows times every replica (30 rows
-- and 42 replicas made 1,260 candidates, and 2 * 10^6 for 10^4 rows and 200
-- replicas: bench/incremental.py --batch)
CREATE TABLE stock (id int PRIMARY KEY, store uuid NOT NULL, qty int NOT NULL);
SELECT sync.mirror('stock', 'catalog', 'assigned(store)');
SELECT count(sync.replica_add(('f1f1f1f1-0000-4000-8000-1' || lpad(g::text, 11, '0'))::uuid)) AS added
  FROM generate_series(1, 40) g;
SET default_transaction_isolation = 'repeatable read';
SELECT provisioned AS provisioned FROM sync.relay_pass();
RESET default_transaction_isolation;
UPDATE sync.replicas SET acked_number = last_number;
INSERT INTO stock SELECT g, ('f1f1f1f1-0000-4000-8000-1' || lpad((1 + g % 40)::text, 11, '0'))::uuid, g
  FROM generate_series(1, 30) g;
SET default_transaction_isolation = 'repeatable read';
SELECT rows_sent AS sent FROM sync.relay_pass();
RESET default_transaction_isolation;
SELECT (SELECT count(*) FROM pg_temp.ms_cand) AS for_one_replica,
       (SELECT count(*) FROM pg_temp.ms_cand_rows) AS for_every_replica;
-- each row went to its store, and only there
SELECT count(*) AS held, count(*) FILTER (WHERE h.replica = s.store) AS at_its_store
  FROM sync.held h JOIN sync.tables t ON t.id = h.tab AND t.relid = 'stock'::regclass
  LEFT JOIN stock s ON sync.key(ARRAY[s.id::text]) = h.key;
-- moved to another store, in one batch: taken from the one, sent to the other
UPDATE sync.replicas SET acked_number = last_number;
UPDATE stock SET store = ('f1f1f1f1-0000-4000-8000-1' || lpad((1 + (id + 1) % 40)::text, 11, '0'))::uuid;
SET default_transaction_isolation = 'repeatable read';
SELECT rows_sent AS sent, rows_taken AS taken FROM sync.relay_pass();
RESET default_transaction_isolation;
SELECT (SELECT count(*) FROM pg_temp.ms_cand) AS for_one_replica,
       (SELECT count(*) FROM pg_temp.ms_cand_rows) AS for_every_replica;
SELECT count(*) FILTER (WHERE h.taken IS NULL) AS held,
       count(*) FILTER (WHERE h.taken IS NULL AND h.replica = s.store) AS at_its_store,
       count(*) FILTER (WHERE h.taken IS NOT NULL AND h.replica <> s.store) AS taken_from_the_last
  FROM sync.held h JOIN sync.tables t ON t.id = h.tab AND t.relid = 'stock'::regclass
  LEFT JOIN stock s ON sync.key(ARRAY[s.id::text]) = h.key;

SELECT pg_advisory_unlock(1835100009, 1668512110) AS relay_stops;
\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_fleet WITH (FORCE);
DROP ROLE fleet_one;
DROP ROLE fleet_two;
