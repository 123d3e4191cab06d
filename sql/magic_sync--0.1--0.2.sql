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

-- the relay worker's role, when not a superuser (magic_sync.role): sync_relay
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'sync_relay') THEN
		CREATE ROLE sync_relay NOLOGIN;
	END IF;
	IF NOT pg_catalog.pg_has_role('sync_relay', 'sync_admin', 'MEMBER') THEN
		GRANT sync_admin TO sync_relay;
	END IF;
END
$$;
GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA sync TO sync_relay;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA sync TO sync_relay;

-- No one gets in (issue 13): sync.unmirror, sync.retrigger, sync.replica_add
-- and sync.replica_set check their caller (the table's ownership, the right
-- to grant a replica's role), then become their owner themselves
-- (src/pg/owner.c): no SECURITY DEFINER
ALTER FUNCTION sync.unmirror(regclass) SECURITY INVOKER;
COMMENT ON FUNCTION sync.unmirror(regclass) IS
	'Takes back the declaration of a mirrored table and drops its triggers, for the table''s owner; refused while another mirrored table points at it';
ALTER FUNCTION sync.retrigger(regclass) SECURITY INVOKER;
COMMENT ON FUNCTION sync.retrigger(regclass) IS
	'Installs the triggers of a mirrored table again as sync.mirror writes them (ENABLE ALWAYS), for the owner of the tables they are on: after one was dropped, disabled, altered or enabled other than ALWAYS, or a partition was added';
ALTER FUNCTION sync.replica_add(uuid, text, name, boolean) SECURITY INVOKER;
COMMENT ON FUNCTION sync.replica_add(uuid, text, name, boolean) IS
	'Adds a replica: its partition, the role it authenticates as (one the caller may grant), and whether it is live; the relay provisions it at its next pass';
-- sync.replica_set changes a replica's role too
DROP FUNCTION sync.replica_set(uuid, boolean, text);
CREATE FUNCTION sync.replica_set(id uuid, live boolean DEFAULT NULL,
		"partition" text DEFAULT NULL, role name DEFAULT NULL)
	RETURNS void
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_replica_set';
COMMENT ON FUNCTION sync.replica_set(uuid, boolean, text, name) IS
	'Changes whether a replica is live, its partition, or its role (one the caller may grant; NULL leaves each as it is); the relay observes it at its next pass';
REVOKE ALL ON FUNCTION sync.replica_set(uuid, boolean, text, name) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.replica_set(uuid, boolean, text, name) TO sync_admin;

-- Every change is noted (issue 19.8): the noting triggers fire ALWAYS, under
-- session_replication_role = replica too; sync.check reports one that does not
COMMENT ON FUNCTION sync.check() IS
	'One row per problem: a noting trigger missing, disabled, not ENABLE ALWAYS or not as sync.mirror writes it, or a declaration that no longer matches its table; the relay refuses to run while there is any';
DO $$
DECLARE
	g record;
BEGIN
	-- a partitioned table's reaches its partitions' clones
	FOR g IN SELECT t.tgrelid::regclass AS rel, t.tgname FROM pg_catalog.pg_trigger t
	          WHERE t.tgfoid = 'sync.note()'::pg_catalog.regprocedure AND t.tgparentid = 0
	            AND t.tgenabled = 'O' LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', g.rel, g.tgname);
	END LOOP;
END
$$;
