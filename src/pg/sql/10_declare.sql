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
	'Declares a mirrored table and installs its noting triggers; a table declared already is declared again with these options, planned again from what each replica holds (no child unmirrored first). Its arguments (docs/design.md 3): '
	'tab, the table; '
	'mirror, catalog (written on the server, held by replicas) record (written by replicas, keyed by the replica) or setting (one row per replica, keyed by its origin alone, written by the replica; the server may wish it changed: sync.wish); '
	'sync, which replicas hold which rows: broadcast, assigned(col), grouped(members => t, assigned => u), follows(col), or NULL (the row travels only as a parent of a row a replica holds); '
	'key, the columns that name a row (default: the primary key); '
	'origin, a record''s uuid column naming the replica that wrote it, in its key; '
	'version, a record''s column whose greater value wins when an upload is filed (without one a record is kept as first filed); ''hlc'' (a bigint column named hlc) or ''hlc(col)'': the replica stamps that column itself with its hybrid logical clock on every write, and equal stamps are ordered by the row (docs/protocol.md 12); a column named hlc kept as the host stamps it is written ''"hlc"''; '
	'replica_owned, a catalog''s columns the replicas write and send up (a two-way table); '
	'unmirrored, columns that never travel; '
	'retired, the column a replica''s copy of the table gets (no column of the table on the server) and sets when it keeps a row it was told to let go of because a row of its own points at it; '
	'created, a record''s timestamp column the server sets to now() when it first files the row, never taken from an upload; '
	'generated, columns the server fills itself when it files an upload (a default, a sequence, a generated column), never taken from an upload; '
	'active, a view of the table: rows outside it are not wanted; '
	'partition, the column naming a row''s partition: a broadcast row goes to the replicas of its partition; '
	'codec, json (an object of columns) or proto (a protobuf message per row, its field numbers fixed per column: sync.proto); '
	'sender, a jsonb column stamped with the sender sync.file was given when it filed the row';

CREATE FUNCTION sync.unmirror(tab regclass) RETURNS void
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_unmirror';
COMMENT ON FUNCTION sync.unmirror(regclass) IS
	'Takes back the declaration of a mirrored table and drops its triggers, for the table''s owner; its replicas let go of its rows, then of the table; refused while another mirrored table points at it';

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
		t.created, t.generated, t.active, t.partition, t.codec, t.sender, t.declared,
		t.hlc
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

-- Following DDL (src/pg/declare/ddl.c, follow.c): at the end of every DDL
-- command, the declarations of the tables it touched follow them -- a
-- rename by attnum, a column added given its id -- and the rows a change
-- needs are noted; the relay sends each replica the schema change
-- (src/pg/relay/evolve.c).  What an event trigger cannot see stays
-- sync.check()'s to say.
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
CREATE EVENT TRIGGER magic_sync_ddl ON ddl_command_end EXECUTE FUNCTION sync.ddl_end();
CREATE EVENT TRIGGER magic_sync_drop ON sql_drop EXECUTE FUNCTION sync.ddl_drop();
