-- magic_sync 0.1: the extension script, put together from src/pg/sql/*.sql.
\echo Use "CREATE EXTENSION magic_sync" to load this file. \quit

-- Every object lives in schema sync (magic_sync.control: schema = sync).
COMMENT ON SCHEMA sync IS 'magic_sync: keeps partial copies of tables on SQLite replicas';
