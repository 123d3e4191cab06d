-- pgbench_mirror.sql: pgbench's four tables mirrored, broadcast, as
-- bench/sustained.sh and bench/apply_floor.sh --noting measure them.
-- pgbench_history gets the key a mirrored table needs; sync.mirror notes the
-- rows each table has.
CREATE EXTENSION magic_sync;
ALTER TABLE pgbench_history ADD COLUMN id bigserial PRIMARY KEY;
SELECT sync.mirror('pgbench_branches', 'catalog', 'broadcast');
SELECT sync.mirror('pgbench_tellers', 'catalog', 'broadcast');
SELECT sync.mirror('pgbench_accounts', 'catalog', 'broadcast');
SELECT sync.mirror('pgbench_history', 'catalog', 'broadcast');
