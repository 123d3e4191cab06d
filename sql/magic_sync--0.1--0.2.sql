-- magic_sync 0.1 to 0.2 (ALTER EXTENSION magic_sync UPDATE): every change to
-- the catalog since 0.1 shipped.  tests/e2e/upgrade.py checks that 0.1 updated
-- is what a fresh 0.2 install makes.
\echo Use "ALTER EXTENSION magic_sync UPDATE" to load this file. \quit

-- sync.digest(key) is anyone's, as the README says (0.1 granted its steps
-- instead, which an aggregate runs with its owner's rights)
GRANT EXECUTE ON FUNCTION sync.digest(text) TO PUBLIC;
REVOKE EXECUTE ON FUNCTION sync.digest_transfn(internal, text), sync.digest_finalfn(internal) FROM PUBLIC;

-- sync.inspect shows a later protocol's message by its head only
COMMENT ON FUNCTION sync.inspect(bytea) IS
	'What a message to a replica says, as jsonb: its head (and whether this server sealed it) and its body; of a later protocol, its head only (later_protocol)';

-- a pass runs in one snapshot: sync.relay_pass() refuses READ COMMITTED,
-- and the wanted sets are read in one snapshot whatever the caller's level
COMMENT ON FUNCTION sync.relay_pass() IS
	'One relay pass in the caller''s transaction, which must be REPEATABLE READ, under the relay lock: observe the replicas, plan every note not done, record the messages and what they carry, NOTIFY magic_sync';
COMMENT ON FUNCTION sync.wanted(uuid) IS
	'The rows a replica should hold, from scratch, in one snapshot: what its tables'' rules send it, closed over the rows they point at and the rows that follow them; (table, canonical key, its parts)';
COMMENT ON FUNCTION sync.wanted_fill(uuid[]) IS
	'Fills pg_temp.ms_wanted (replica, tab, key) with the wanted sets of these replicas (NULL: every live replica), all at once, in one snapshot; returns its row count';

-- sync.mirror looks up a grouped rule's tables in the caller's search_path,
-- then becomes the function's owner with search_path pinned itself
-- (declare/declare.c): no SECURITY DEFINER, no SET clause
ALTER FUNCTION sync.mirror(regclass, text, text, name[], name, name, name[], name[],
		name, name, name[], regclass, name, text, name)
	SECURITY INVOKER RESET search_path;

-- sync.proto(table): the .proto of a table in the proto codec
CREATE FUNCTION sync.proto(tab regclass) RETURNS text
	LANGUAGE c STABLE STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_proto';
COMMENT ON FUNCTION sync.proto(regclass) IS
	'The .proto of a table in the proto codec: one message, the field numbers its declaration fixed, each column typed as it travels';
CREATE FUNCTION sync.proto(name text) RETURNS text
	LANGUAGE c STABLE STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_proto_named';
COMMENT ON FUNCTION sync.proto(text) IS
	'The .proto of a table in the proto codec, by the name replicas know it by (sync.tables.name)';
REVOKE ALL ON FUNCTION sync.proto(regclass), sync.proto(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.proto(regclass), sync.proto(text) TO sync_admin;

-- Schema evolution (issue 16): a migration changes the fleet by the table it
-- touches.  What a declaration follows its table by -- its columns' ids,
-- every column's attnum, the fills of columns added since, the highest id
-- given -- filled in from the table as it is: a proto table's ids are its
-- field numbers, a json table's its mirrored columns in attnum order, as
-- sync.mirror gives them.
-- (added without a default, then given one: a default added with the column
-- would be kept as its missing value, which a fresh install has not)
ALTER TABLE sync.tables ADD COLUMN ids jsonb, ADD COLUMN attnums jsonb, ADD COLUMN fills jsonb,
	ADD COLUMN last_id int;
UPDATE sync.tables t SET fills = '{}',
	ids = CASE WHEN t.codec = 'proto' THEN t.fields ELSE coalesce(
		(SELECT pg_catalog.jsonb_object_agg(c.key, c.n)
		   FROM (SELECT e.key, row_number() OVER (ORDER BY a.attnum) AS n
				   FROM pg_catalog.jsonb_each(t.columns) e
				   JOIN pg_catalog.pg_attribute a ON a.attrelid = t.relid AND a.attname = e.key
					AND NOT a.attisdropped) c), '{}') END,
	attnums = coalesce(
		(SELECT pg_catalog.jsonb_object_agg(a.attname, a.attnum) FROM pg_catalog.pg_attribute a
		  WHERE a.attrelid = t.relid AND a.attnum > 0 AND NOT a.attisdropped), '{}');
UPDATE sync.tables t SET last_id = coalesce(
	(SELECT max(e.value::int) FROM pg_catalog.jsonb_each_text(t.ids) e), 0);
ALTER TABLE sync.tables
	ALTER COLUMN ids SET DEFAULT '{}', ALTER COLUMN ids SET NOT NULL,
	ALTER COLUMN attnums SET DEFAULT '{}', ALTER COLUMN attnums SET NOT NULL,
	ALTER COLUMN fills SET DEFAULT '{}', ALTER COLUMN fills SET NOT NULL,
	ALTER COLUMN last_id SET DEFAULT 0, ALTER COLUMN last_id SET NOT NULL;

-- the rows whose next send replaces the replica's copy, by an index of their
-- own: a pass sending a table's rows again never scans each replica's held rows
CREATE INDEX held_replace ON sync.held (replica, tab, key) WHERE replace;

-- The schema of each mirrored table as each replica was last sent it
-- (src/pg/relay/evolve.c).  Empty after the update: a replica a 0.1
-- snapshot provisioned is sent every table as a schema change, no row.
CREATE TABLE sync.replica_tables (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	name			text NOT NULL,				-- the wire name it knows the table by
	was				text,						-- the name it knew before, when the last change renamed it
	hash			bytea,						-- SHA-256 of the Table sent; NULL: sent by a 0.1 snapshot
	number			bigint NOT NULL,			-- the message that carried it
	PRIMARY KEY (replica, tab)
);
COMMENT ON TABLE sync.replica_tables IS 'The schema of each mirrored table as each replica was last sent it';
SELECT pg_catalog.pg_extension_config_dump('sync.replica_tables', '');
REVOKE ALL ON sync.replica_tables FROM PUBLIC;
GRANT SELECT ON sync.replica_tables TO sync_admin;

-- sync.mirror declares a table again with other options; sync.unmirror's
-- replicas let the table go
COMMENT ON FUNCTION sync.mirror(regclass, text, text, name[], name, name, name[], name[],
		name, name, name[], regclass, name, text, name) IS
	'Declares a mirrored table: which way it travels (catalog or record), which replicas hold which rows (broadcast, assigned(col), follows(col), grouped(members => t, assigned => u), or none), its key and columns; installs its noting triggers. A table declared already is declared again with these options, planned again from what each replica holds';
COMMENT ON FUNCTION sync.unmirror(regclass) IS
	'Takes back the declaration of a mirrored table and drops its triggers; its replicas let go of its rows, then of the table; refused while another mirrored table points at it';

-- DDL followed as it runs (src/pg/declare/ddl.c)
CREATE FUNCTION sync.ddl_end() RETURNS event_trigger
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'ms_ddl_end';
COMMENT ON FUNCTION sync.ddl_end() IS
	'The event trigger magic_sync_ddl (ddl_command_end): the declarations of the tables a DDL command touched follow them';
CREATE FUNCTION sync.ddl_drop() RETURNS event_trigger
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'ms_ddl_drop';
COMMENT ON FUNCTION sync.ddl_drop() IS
	'The event trigger magic_sync_drop (sql_drop): a table, column, index or constraint dropped makes every declaration follow its table at the command''s end';
REVOKE ALL ON FUNCTION sync.ddl_end(), sync.ddl_drop() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.ddl_end(), sync.ddl_drop() TO sync_admin;
CREATE EVENT TRIGGER magic_sync_ddl ON ddl_command_end EXECUTE FUNCTION sync.ddl_end();
CREATE EVENT TRIGGER magic_sync_drop ON sql_drop EXECUTE FUNCTION sync.ddl_drop();
