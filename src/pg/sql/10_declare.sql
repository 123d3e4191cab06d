-- Declaring tables (src/pg/declare/declare.c, relay/notes.c): sync.mirror, sync.unmirror,
-- sync.retrigger, the view sync.mirrors, the noting trigger they install, and
-- sync.proto (declare/proto.c).

CREATE FUNCTION sync.note() RETURNS trigger
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'ms_note';
COMMENT ON FUNCTION sync.note() IS
	'The noting trigger sync.mirror installs: one row in sync.notes per change of a mirrored row, in the same transaction; refuses TRUNCATE';

-- Declaring writes sync.tables, which only the extension's owner writes;
-- sync_admin is who may call it (99_grants.sql), for a table the caller owns
-- (as CREATE TRIGGER asks).  Not SECURITY DEFINER with a SET clause: the
-- tables a grouped rule names are looked up in the caller's search_path
-- first, and the caller's ownership checked, and only then does ms_mirror
-- become the function's owner with search_path pinned, as SECURITY DEFINER
-- and SET would (src/pg/owner.c, ms_definer_begin).  sync.unmirror and
-- sync.retrigger do the same: they check their caller, then become their
-- owner.
CREATE FUNCTION sync.mirror(tab regclass, mirror text, sync text DEFAULT NULL,
		key name[] DEFAULT NULL, origin name DEFAULT NULL, version name DEFAULT NULL,
		replica_owned name[] DEFAULT '{}', unmirrored name[] DEFAULT '{}',
		retired name DEFAULT NULL, created name DEFAULT NULL,
		generated name[] DEFAULT '{}', active regclass DEFAULT NULL,
		"partition" name DEFAULT NULL, codec text DEFAULT 'json',
		sender name DEFAULT NULL)
	RETURNS void
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'ms_mirror';
COMMENT ON FUNCTION sync.mirror(regclass, text, text, name[], name, name, name[], name[],
		name, name, name[], regclass, name, text, name) IS
	'Declares a mirrored table: which way it travels (catalog or record), which replicas hold which rows (broadcast, assigned(col), follows(col), grouped(members => t, assigned => u), or none), its key and columns; installs its noting triggers';

CREATE FUNCTION sync.unmirror(tab regclass) RETURNS void
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_unmirror';
COMMENT ON FUNCTION sync.unmirror(regclass) IS
	'Takes back the declaration of a mirrored table and drops its triggers, for the table''s owner; refused while another mirrored table points at it';

CREATE VIEW sync.mirrors AS
	SELECT t.id, t.relid AS "table", t.name, t.mirror,
		CASE t.rule
			WHEN 'assigned' THEN pg_catalog.format('assigned(%I)', t.rule_column)
			WHEN 'follows' THEN pg_catalog.format('follows(%I)', t.rule_column)
			WHEN 'grouped' THEN pg_catalog.format(
				'grouped(members => %s, assigned => %s, group => %I, replica => %I)',
				t.members, t.assignments, t.group_column, t.assignment_replica)
			ELSE t.rule
		END AS sync,
		t.key, t.origin, t.version, t.replica_owned, t.unmirrored, t.retired,
		t.created, t.generated, t.active, t.partition, t.codec, t.sender, t.declared
	  FROM sync.tables t;
COMMENT ON VIEW sync.mirrors IS 'The mirrored tables, as declared';

CREATE FUNCTION sync.retrigger(tab regclass) RETURNS void
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_retrigger';
COMMENT ON FUNCTION sync.retrigger(regclass) IS
	'Installs the triggers of a mirrored table again as sync.mirror writes them (ENABLE ALWAYS), for the owner of the tables they are on: after one was dropped, disabled, altered or enabled other than ALWAYS, or a partition was added';

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
