-- Who may call what (src/pg/sql/99_grants.sql): the README's "(anyone)"
-- functions are callable by a role with no rights of its own, a replica's
-- role reaches sync.pull, sync.pull_wait and sync.file (each checks the uuid), and
-- everything else needs sync_admin.
CREATE ROLE regress_nobody;
CREATE ROLE regress_admin IN ROLE sync_admin;

-- what PUBLIC may execute in schema sync, every function and aggregate
SELECT p.oid::regprocedure AS callable_by_anyone
  FROM pg_proc p
 WHERE p.pronamespace = 'sync'::regnamespace
   AND has_function_privilege('regress_nobody', p.oid, 'EXECUTE')
 ORDER BY p.proname, p.oid::regprocedure::text;
-- sync_admin may execute everything, and read every table but one: the
-- signing key, whose private half only the extension reads
SELECT count(*) AS not_for_sync_admin
  FROM pg_proc p
 WHERE p.pronamespace = 'sync'::regnamespace
   AND NOT has_function_privilege('regress_admin', p.oid, 'EXECUTE');
SELECT c.relname AS unreadable_by_sync_admin
  FROM pg_class c
 WHERE c.relnamespace = 'sync'::regnamespace AND c.relkind IN ('r', 'v', 'p')
   AND NOT has_table_privilege('regress_admin', c.oid, 'SELECT');
SELECT has_column_privilege('regress_admin', 'sync.signing_key', 'public_key', 'SELECT') AS admin_reads_public,
       has_column_privilege('regress_admin', 'sync.signing_key', 'private_key', 'SELECT') AS admin_reads_private,
       has_column_privilege('sync_relay', 'sync.signing_key', 'private_key', 'SELECT') AS relay_signs;

SET ROLE regress_nobody;
-- keys and digests: anyone
SELECT sync.key(ARRAY['a', 'bc']) AS key, sync.key_parts('1:a2:bc') AS parts;
SELECT (sync.digest(sync.key(ARRAY[p]))).* FROM unnest(ARRAY['10', '2', '1']) AS p;
SELECT sync.is_transient('40001') AS serialization_failure, sync.is_transient('23505') AS unique_violation;
-- the key every message is signed with, for a replica to pin: anyone (none before the first pass)
SELECT sync.signing_key() IS NULL AS no_key_yet;
SELECT private_key FROM sync.signing_key;
-- the aggregate's steps are not for calling
SELECT sync.digest_transfn(NULL, '1:a');
-- nothing else
SELECT sync.relay_pass();
SELECT sync.inspect('\x0802');
SELECT count(*) FROM sync.replicas;
RESET ROLE;

DROP ROLE regress_nobody;
DROP ROLE regress_admin;
