-- magic_sync: the extension script of the version magic_sync.control names, put
-- together from src/pg/sql/*.sql by make (src/pg/README.md).
\echo Use "CREATE EXTENSION magic_sync" to load this file. \quit

-- Every object lives in schema sync (magic_sync.control: schema = sync).
COMMENT ON SCHEMA sync IS 'magic_sync: keeps partial copies of tables on SQLite replicas';
