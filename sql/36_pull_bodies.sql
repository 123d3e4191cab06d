-- sync.pull reads the body of a message it returns, and of no other (issue
-- 14: an agent keeps up).  It once put every message the replica had not
-- applied in order with its body: an agent 400 messages behind had 100 MB
-- read and sorted on disk to be handed the 17 its bound let through.
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';

CREATE SCHEMA pulled;
CREATE TABLE pulled.docs (id int PRIMARY KEY, body text NOT NULL);
SELECT sync.mirror('pulled.docs', 'catalog', 'broadcast');
SELECT sync.replica_add('dddddddd-0000-0000-0000-000000000001');
SELECT provisioned FROM sync.relay_pass();
-- whatever the tests before left to relay, relayed
SELECT count(*) >= 0 AS relayed FROM sync.relay_pass();
SELECT max(number) AS provisioned_by FROM sync.outbox WHERE replica = 'dddddddd-0000-0000-0000-000000000001' \gset

-- thirty messages not applied, each carrying a large row
CREATE FUNCTION pulled.doc(n int) RETURNS text LANGUAGE sql
	AS $$ SELECT string_agg(md5(n::text || ':' || g::text), '') FROM generate_series(1, 3000) g $$;
DO $$
BEGIN
	FOR i IN 1..30 LOOP
		INSERT INTO pulled.docs VALUES (i, pulled.doc(i));
		PERFORM sync.relay_pass();
	END LOOP;
END $$;
SELECT count(*) AS waiting, min(octet_length(b.bytes)) > 20000 AS large
  FROM sync.outbox o JOIN sync.bodies b ON b.id = o.body
 WHERE o.replica = 'dddddddd-0000-0000-0000-000000000001' AND NOT o.dropped AND o.number > :provisioned_by;

-- a pull bound to 1024 bytes returns the first, whole, and reads its body
-- alone (the session's counts so far flushed, so that the pull's are its own)
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT count(*) AS returned, bool_and(octet_length(message) > 20000) AS whole
  FROM sync.pull('dddddddd-0000-0000-0000-000000000001', :provisioned_by, 1024);
SELECT sum(idx_scan) AS bodies_read FROM pg_stat_xact_all_tables
 WHERE relid = (SELECT reltoastrelid FROM pg_class WHERE oid = 'sync.bodies'::regclass);
COMMIT;
-- four messages' worth: nothing is sorted on disk (with 1 MB of work_mem,
-- the thirty messages' 3 MB were)
SET work_mem = '1MB';
SELECT pg_stat_force_next_flush();
SELECT temp_files AS temp_before FROM pg_stat_database WHERE datname = current_database() \gset
SELECT count(*) AS returned FROM sync.pull('dddddddd-0000-0000-0000-000000000001', :provisioned_by, 400000);
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT temp_files - :temp_before AS temp_files FROM pg_stat_database WHERE datname = current_database();
-- all thirty, 3 MB, nothing written to disk either: a pull's batch is kept
-- in memory up to its bound (the agent's 4 MB batches were written to a
-- temporary file and read back at work_mem's 4 MB), the session's work_mem
-- left as it was
SELECT pg_stat_force_next_flush();
SELECT temp_files AS temp_before FROM pg_stat_database WHERE datname = current_database() \gset
SELECT count(*) AS returned FROM sync.pull('dddddddd-0000-0000-0000-000000000001', :provisioned_by, 4194304);
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT temp_files - :temp_before AS temp_files FROM pg_stat_database WHERE datname = current_database();
SHOW work_mem;
RESET work_mem;
-- in order, each once, every one in the end
SELECT count(*) AS all_of_them, count(DISTINCT number) AS each_once, bool_and(number > before) AS in_order
  FROM (SELECT number, lag(number, 1, 0::bigint) OVER (ORDER BY i) AS before
          FROM sync.pull('dddddddd-0000-0000-0000-000000000001', :provisioned_by, 100000000)
               WITH ORDINALITY p(number, message, i)) s;

-- clean up for the tests that follow
SELECT sync.unmirror('pulled.docs');
SELECT sync.replica_drop('dddddddd-0000-0000-0000-000000000001');
SELECT forgotten FROM sync.relay_pass();
DROP SCHEMA pulled CASCADE;
TRUNCATE sync.notes, sync.quarantine, sync.bodies CASCADE;
