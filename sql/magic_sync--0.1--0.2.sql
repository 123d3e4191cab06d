-- magic_sync 0.1 to 0.2 (ALTER EXTENSION magic_sync UPDATE): every change to
-- the catalog since 0.1 shipped.  tests/e2e/upgrade.py checks that 0.1 updated
-- is what a fresh 0.2 install makes.
\echo Use "ALTER EXTENSION magic_sync UPDATE" to load this file. \quit

-- The extension owns its schema (docs/operations.md, Installing).  Schema
-- sync must be this extension's, owned by a superuser, no one else may
-- create in it, and it holds nothing but the extension's own objects:
-- whoever could put an object there -- a database owner who ran CREATE
-- SCHEMA sync before CREATE EXTENSION, say -- would have the script, the
-- definer functions and the relay resolve names to theirs, and whoever owns
-- it could rename it and put a sync of their own in its place.  Checked by
-- CREATE EXTENSION and by every update, before anything else runs; every name
-- here is pg_catalog's, for the search_path is that schema's.
DO $guard$
DECLARE
	ext pg_catalog.oid;
	home pg_catalog.oid;
	nsp pg_catalog.oid;
	owner_name pg_catalog.name;
	creators pg_catalog.text;
	foreign_objects pg_catalog.text;
BEGIN
	SELECT e.oid, e.extnamespace INTO ext, home
	  FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'magic_sync';
	SELECT n.oid, r.rolname INTO nsp, owner_name
	  FROM pg_catalog.pg_namespace n
	  LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner AND r.rolsuper
	 WHERE n.nspname OPERATOR(pg_catalog.=) 'sync';
	IF home IS NULL OR nsp IS NULL OR nsp OPERATOR(pg_catalog.<>) home THEN
		RAISE EXCEPTION 'the schema of extension magic_sync is not schema sync'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				DETAIL = pg_catalog.format('The extension is in schema %s; the schema named sync is %s.',
					pg_catalog.quote_ident((SELECT n.nspname FROM pg_catalog.pg_namespace n WHERE n.oid OPERATOR(pg_catalog.=) home)),
					CASE WHEN nsp IS NULL THEN 'none' ELSE 'another' END),
				HINT = 'Whoever renamed it could put a schema sync of its own in its place: see docs/operations.md, Installing.';
	END IF;
	IF owner_name IS NULL THEN
		RAISE EXCEPTION 'schema sync is owned by role %, which is not a superuser',
			(SELECT n.nspowner::pg_catalog.regrole FROM pg_catalog.pg_namespace n WHERE n.oid OPERATOR(pg_catalog.=) nsp)
			USING ERRCODE = 'insufficient_privilege',
				DETAIL = 'The owner of the extension''s schema can rename it and put a schema of its own in its place, or create objects in it that the extension''s functions, run with raised rights, would call.',
				HINT = 'Let CREATE EXTENSION magic_sync make its schema: as a superuser, drop this one, with what it holds checked first, and try again.  The extension installed in it already: docs/operations.md, Installing.';
	END IF;
	SELECT pg_catalog.string_agg(CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
	                                  ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END, ', ')
	  INTO creators
	  FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
	 WHERE n.oid OPERATOR(pg_catalog.=) nsp AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
	   AND NOT EXISTS (SELECT FROM pg_catalog.pg_roles r
	                    WHERE r.oid OPERATOR(pg_catalog.=) a.grantee AND r.rolsuper);
	IF creators IS NOT NULL THEN
		RAISE EXCEPTION 'roles other than superusers may create objects in schema sync: %', creators
			USING ERRCODE = 'insufficient_privilege',
				DETAIL = 'An object of theirs in the extension''s schema could be called by its functions, run with raised rights.',
				HINT = pg_catalog.format('REVOKE CREATE ON SCHEMA sync FROM %s; and check what they created there.', creators);
	END IF;
	-- what DROP SCHEMA would drop: every object that depends on the schema
	-- itself, but the extension and its members
	SELECT pg_catalog.string_agg(pg_catalog.format('%s %s', o.type, o.identity), ', ' ORDER BY d.classid, d.objid)
	  INTO foreign_objects
	  FROM pg_catalog.pg_depend d, pg_catalog.pg_identify_object(d.classid, d.objid, d.objsubid) o
	 WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
	   AND d.refobjid OPERATOR(pg_catalog.=) nsp
	   AND NOT (d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
	            AND d.objid OPERATOR(pg_catalog.=) ext)
	   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend m
	                    WHERE m.classid OPERATOR(pg_catalog.=) d.classid AND m.objid OPERATOR(pg_catalog.=) d.objid
	                      AND m.deptype OPERATOR(pg_catalog.=) 'e'
	                      AND m.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
	                      AND m.refobjid OPERATOR(pg_catalog.=) ext);
	IF foreign_objects IS NOT NULL THEN
		RAISE EXCEPTION 'schema sync holds objects that are not the extension''s'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				DETAIL = pg_catalog.format('Not the extension''s: %s.', foreign_objects),
				HINT = 'The extension''s schema holds its objects only: move those out (ALTER ... SET SCHEMA) or drop them, once you know who made them and why.';
	END IF;
END
$guard$;

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

-- snapshots are passes of their own, holding the rows of the replicas they
-- provision alone (src/pg/relay/observe.c)
CREATE FUNCTION sync.relay_snapshots(
	OUT notes_read bigint, OUT provisioned bigint, OUT forgotten bigint,
	OUT rows_sent bigint, OUT rows_taken bigint, OUT messages bigint, OUT quarantined bigint)
	LANGUAGE c VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp
	SET jit = off
	AS 'MODULE_PATHNAME', 'ms_relay_snapshots_sql';
COMMENT ON FUNCTION sync.relay_snapshots() IS
	'A snapshot pass in the caller''s transaction, which must be REPEATABLE READ, under the relay lock: provisions the replicas waiting for a snapshot, holding their rows of sync.replicas alone (the others'' filings and pulls go on), and reads no note';
REVOKE ALL ON FUNCTION sync.relay_snapshots() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.relay_snapshots() TO sync_admin;

COMMENT ON FUNCTION sync.wanted(uuid) IS
	'The rows a replica should hold, from scratch, in one snapshot: what its tables'' rules send it, closed over the rows they point at and the rows that follow them; (table, canonical key, its parts)';
COMMENT ON FUNCTION sync.wanted_fill(uuid[]) IS
	'Fills pg_temp.ms_wanted (replica, tab, key) with the wanted sets of these replicas (NULL: every live replica), all at once, in one snapshot; returns its row count';

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

-- What a replica says is a claim (src/pg/transport/claim.c, src/pg/epoch.c):
-- generations, the claims refused, sync.pull with what the replica applied,
-- sync.replica_reprovision, and sync.health listing the claims refused
-- Generations (src/pg/epoch.c): the server's lineage.  Every message carries
-- the generation it was written in; a replica never applies one of a
-- generation older than it follows.  Raised with each new epoch, and by a
-- relay pass that finds the server's history changed under its record:
-- another timeline (a standby promoted), cluster or database (a copy
-- restored).  Dumped with the record, so a restored copy sees it moved.
CREATE TABLE sync.generations (
	generation		bigint PRIMARY KEY,			-- when it began, in microseconds since 2000, or one more than the last
	epoch			bytea NOT NULL,				-- the epoch it began in
	timeline		int NOT NULL,				-- the server's timeline then
	system			text NOT NULL,				-- the cluster's system identifier then
	database		oid NOT NULL,				-- the database's oid then
	began			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	reason			text NOT NULL
);
COMMENT ON TABLE sync.generations IS 'Generations: the server''s lineage, raised with each epoch and when its timeline, cluster or database changed; messages carry the newest';

-- Claims refused (src/pg/transport/claim.c): what a replica said of itself
-- that the server would not believe (a number beyond its record without a
-- seal that verifies, a seal it never made, a generation newer than its
-- own).  Written out of the refused call's transaction (alarm.c), one row per
-- replica, the last; sync.health lists those of the last hour.  Not dumped:
-- an alarm, not a record.
CREATE TABLE sync.refused_claims (
	replica			uuid PRIMARY KEY,
	claim			text NOT NULL,				-- what was claimed, and through which call
	reason			text NOT NULL,
	sqlstate		text NOT NULL,
	at				timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE sync.refused_claims IS 'The last claim of each replica the server refused, and why';
SELECT pg_catalog.pg_extension_config_dump('sync.generations', '');
REVOKE ALL ON TABLE sync.generations, sync.refused_claims FROM PUBLIC;
GRANT SELECT ON TABLE sync.generations, sync.refused_claims TO sync_admin;
-- An operator's "provision it again" (src/pg/epoch.c): one replica, from
-- scratch, at the next pass; sync.epoch_begin does it for every replica.
CREATE FUNCTION sync.replica_reprovision(id uuid)
	RETURNS void
	LANGUAGE c SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_replica_reprovision';
COMMENT ON FUNCTION sync.replica_reprovision(uuid) IS
	'Has one replica provisioned again from scratch at the relay''s next pass (a snapshot that failed for good is tried again at once); the reason goes into its last_error';
REVOKE ALL ON FUNCTION sync.replica_reprovision(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.replica_reprovision(uuid) TO sync_admin;
-- with what the replica applied (sync_applied() on the replica): its claim,
-- checked (src/pg/transport/claim.c)
CREATE FUNCTION sync.pull(replica uuid, after bigint, max_bytes integer, applied bytea,
	OUT number bigint, OUT message bytea)
	RETURNS SETOF record
	LANGUAGE c VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_pull';
COMMENT ON FUNCTION sync.pull(uuid, bigint, integer, bytea) IS
	'sync.pull with what the replica says it applied (an Applied, as sync_applied() returns it): a claim beyond what the server wrote for it is believed only with a seal that verifies; one before what it acknowledged, 0 included, has it provisioned again';
REVOKE ALL ON FUNCTION sync.pull(uuid, bigint, integer, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.pull(uuid, bigint, integer, bytea) TO sync_admin;
GRANT EXECUTE ON FUNCTION sync.pull(uuid, bigint, integer, bytea) TO PUBLIC;
-- uploads whole or refused, numbered, and honest (src/pg/transport): the
-- last send filed per replica and lane; edits dropped for the replica to fix
CREATE TABLE sync.sends (
	replica			uuid NOT NULL,
	filed_seq		bigint NOT NULL,
	filed_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	lane			text COLLATE "C" NOT NULL DEFAULT '',
	PRIMARY KEY (replica, lane)
);
COMMENT ON TABLE sync.sends IS 'The last send number filed per replica and lane: one at or below it is a duplicate';
SELECT pg_catalog.pg_extension_config_dump('sync.sends', '');
GRANT SELECT ON sync.sends TO sync_admin;
CREATE TABLE sync.dropped (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	key				text COLLATE "C" NOT NULL,
	reason			text NOT NULL,
	at				timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (replica, tab, key)
);
COMMENT ON TABLE sync.dropped IS 'Edits replicas sent that the server did not take, for a reason the replica must fix, until the row is filed';
SELECT pg_catalog.pg_extension_config_dump('sync.dropped', '');
GRANT SELECT ON sync.dropped TO sync_admin;
COMMENT ON FUNCTION sync.file(uuid, bytea, jsonb) IS
	'Files one upload of a replica in one transaction, whole or not at all (its length and check verified first), once (a send numbered at or below the last filed is a duplicate): its acknowledgement, refusals, rows, digests and backlog; queues its Filed answer for sync.pull; says what became of it';

-- a pass finds the replicas holding a changed row by (tab, key), and one
-- replica's held row in one descent by either index (issue 14)
CREATE INDEX held_row ON sync.held (tab, key, replica);
-- the rows a pass sends as replacements, found without reading every held row
CREATE INDEX held_replace ON sync.held (replica, tab, key) WHERE replace;
-- pruning reads at most its batch, by an index, whatever a large change left (issue 14)
CREATE INDEX answers_pulled ON sync.answers (pulled) WHERE pulled IS NOT NULL;

-- A message's body compressed by lz4 where the server has it (02_catalog.sql
-- stored it as it is): rows in JSON, or proto with text in them, shrink 6x,
-- and a snapshot of 10^6 rows wrote 76 MB of bodies, their TOAST and WAL,
-- that it now writes as 13 MB, faster than it wrote them whole and read back
-- no slower.  A body under 2 kB (a one-row change's) stays in its row, never
-- compressed.  Without lz4 as it was: pglz costs a snapshot's pass more than
-- it saves.
DO $$
BEGIN
	ALTER TABLE sync.bodies ALTER COLUMN bytes SET COMPRESSION lz4, ALTER COLUMN bytes SET STORAGE EXTENDED;
EXCEPTION WHEN feature_not_supported THEN
	NULL;
END
$$;

-- a comment on every catalog table (issue 17)
COMMENT ON TABLE sync.bodies IS 'Message bodies, each stored once however many replicas'' messages carry it (by its SHA-256)';
COMMENT ON TABLE sync.answers IS 'The answer (a Filed message) to each upload filed, returned by sync.pull before the outbox; kept an hour after it was pulled, for a send that comes again';
COMMENT ON TABLE sync.inbox IS 'Uploaded rows set aside: they failed for good (a SQLSTATE: filed again by sync.inbox_retry after a fix) or wait until the replica holds the row again (none)';
COMMENT ON TABLE sync.quarantine IS 'Rows that cannot go to replicas (they do not encode, or no message can carry them): planned around, tried again a minute later, when they change, or on sync.quarantine_retry';

-- The states are named in snake_case, as every JSON key is (sync.overview's
-- "states" are keyed by them): sync.listing(state => 'on_its_way').  The
-- views and functions that name a state in their text are made again below
-- (issue 39): a CASE's text cast to sync.state, and plpgsql bodies, keep the
-- old labels
ALTER TYPE sync.state RENAME VALUE 'caught up' TO 'caught_up';
ALTER TYPE sync.state RENAME VALUE 'on its way' TO 'on_its_way';
ALTER TYPE sync.state RENAME VALUE 'set aside' TO 'set_aside';

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
	values_repaired	timestamptz,				-- when a values digest last started a repair (transport/values.c)
	keys_repaired	timestamptz,				-- when a key digest that ranges could not narrow was answered with a snapshot (transport/ack.c)
	PRIMARY KEY (replica, tab)
);
COMMENT ON TABLE sync.replica_tables IS 'The schema of each mirrored table as each replica was last sent it';
SELECT pg_catalog.pg_extension_config_dump('sync.replica_tables', '');
REVOKE ALL ON sync.replica_tables FROM PUBLIC;
GRANT SELECT ON sync.replica_tables TO sync_admin;

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

-- A fleet (docs/scale.md): an answer is given until the replica's filings
-- show it received (transport/ack.c), also by a hot standby, which marks
-- nothing; sync.settled for an agent run with --once (transport/settled.c)
ALTER TABLE sync.answers ADD COLUMN received timestamptz;
CREATE FUNCTION sync.settled(replica uuid, since pg_snapshot) RETURNS bigint
	LANGUAGE c STABLE STRICT SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_settled';
COMMENT ON FUNCTION sync.settled(uuid, pg_snapshot) IS
	'The last message written for a replica once every note committed before `since` (pg_current_snapshot() then) is planned and no snapshot is due for it: applying through it, the replica holds what was committed before; NULL while the relay has not got there; 0 when no relay runs (nothing to wait for)';
REVOKE ALL ON FUNCTION sync.settled(uuid, pg_snapshot) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.settled(uuid, pg_snapshot) TO sync_admin;
GRANT EXECUTE ON FUNCTION sync.settled(uuid, pg_snapshot) TO PUBLIC;

-- The fleet's reads run without JIT (src/pg/sql/60_read.sql, docs/scale.md):
-- compiling their plans took seconds at 10,000 replicas
ALTER FUNCTION sync.overview_states(uuid[], text, integer) SET jit = off;

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
	'Takes back the declaration of a mirrored table and drops its triggers, for the table''s owner; its replicas let go of its rows, then of the table; refused while another mirrored table points at it';
ALTER FUNCTION sync.retrigger(regclass) SECURITY INVOKER;
COMMENT ON FUNCTION sync.retrigger(regclass) IS
	'Installs the triggers of a mirrored table again as sync.mirror writes them (ENABLE ALWAYS), for the owner of the tables they are on: after one was dropped, disabled, altered or enabled other than ALWAYS, or a partition was added';
ALTER FUNCTION sync.replica_add(uuid, text, name, boolean) SECURITY INVOKER;
COMMENT ON FUNCTION sync.replica_add(uuid, text, name, boolean) IS
	'Adds a replica: its partition (one the fleet knows: a value of a mirrored table''s partition column, or one a replica has; any where no table declares a partition column), the role it authenticates as (one the caller may grant), and whether it is live; the relay provisions it at its next pass';
-- sync.replica_set changes a replica's role too
DROP FUNCTION sync.replica_set(uuid, boolean, text);
CREATE FUNCTION sync.replica_set(id uuid, live boolean DEFAULT NULL,
		"partition" text DEFAULT NULL, role name DEFAULT NULL)
	RETURNS void
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_replica_set';
COMMENT ON FUNCTION sync.replica_set(uuid, boolean, text, name) IS
	'Changes whether a replica is live, its partition (one the fleet knows, as sync.replica_add takes), or its role (one the caller may grant); NULL leaves each as it is; the relay observes it at its next pass';
REVOKE ALL ON FUNCTION sync.replica_set(uuid, boolean, text, name) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.replica_set(uuid, boolean, text, name) TO sync_admin;

-- Every change is noted (issue 19.8): the noting triggers fire ALWAYS, under
-- session_replication_role = replica too; sync.check reports one that does not
COMMENT ON FUNCTION sync.check() IS
	'One row per problem: a noting trigger missing, disabled, not ENABLE ALWAYS or not as sync.mirror writes it, or a declaration that no longer matches its table; the relay refuses to run while there is any, but a foreign key not indexed (the relay runs, reading the table whole)';
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

-- A refused row comes back by itself (issue 19.6): each replica's build and
-- protocol (Up.build), and when each row it refused goes to it again
ALTER TABLE sync.replicas ADD COLUMN build text, ADD COLUMN protocol int, ADD COLUMN build_due timestamptz;
COMMENT ON COLUMN sync.replicas.build IS 'The build its last upload said it runs (Up.build): a change sends the rows it refused again at once';
COMMENT ON COLUMN sync.replicas.protocol IS 'The protocol of its last upload: a change sends the rows it refused again at once';
COMMENT ON COLUMN sync.replicas.build_due IS 'When a change of its build or protocol last made the rows it refused due: the next makes them due ten minutes after, at the earliest';
-- one refused row looked up in one descent of held_refused (issue 38.2)
DROP INDEX sync.held_refused;
CREATE INDEX held_refused ON sync.held (replica, tab, key) WHERE refused IS NOT NULL;
-- Rows a replica refused, tried again (src/pg/relay/retry.c,
-- transport/refused.c): one row per refused held row, kept apart from the
-- held set so that no pass or acknowledgement pays for it.  A row refused is
-- sent again to that replica alone, rebuilt from the current row, when due:
-- a minute after the refusal, the wait doubling with each refusal of the
-- same version up to an hour, and at once when the replica reports a new
-- build or protocol.  A change of the row on the server sends it at once, as
-- to every holder, and starts the count again; the replica taking it ends it.
CREATE TABLE sync.refused_rows (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	key				text COLLATE "C" NOT NULL,
	note			bigint NOT NULL,			-- the version refused (sync.held.note then)
	times			int NOT NULL DEFAULT 1,		-- how often in a row this version was refused
	refused_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),	-- the last refusal
	due				timestamptz,				-- when it is sent again; NULL: sent, its answer awaited
	PRIMARY KEY (replica, tab, key)
);
CREATE INDEX refused_rows_due ON sync.refused_rows (replica, due) WHERE due IS NOT NULL;
COMMENT ON TABLE sync.refused_rows IS 'Rows a replica refused: how often, and when each is sent to it again';
-- When each replica's first refused row is due, or sooner (never later):
-- what every pass reads to know whether any is due (relay/retry.c), kept
-- apart so that no pass reads sync.refused_rows for it.  That table's due
-- index fills with the entries of rows sent again or refused again (every
-- change of due is a new one), which a probe of the earliest walked until
-- vacuum: a replica refusing 60,000 rows again and again made every other
-- replica's pass read them.  One row per replica, updated in place; kept by
-- the statement triggers below whatever writes sync.refused_rows (a
-- restore's too: it is not dumped), and made exact again by the pass that
-- sends that replica its rows.
CREATE TABLE sync.refused_due (
	replica			uuid PRIMARY KEY,
	due				timestamptz NOT NULL		-- at or before its first refused row due
);
COMMENT ON TABLE sync.refused_due IS 'When each replica''s first refused row is due, or sooner: what a pass reads to know whether any is';
CREATE FUNCTION sync.refused_due_keep() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	INSERT INTO sync.refused_due AS d (replica, due)
	SELECT c.replica, min(c.due) FROM changed c WHERE c.due IS NOT NULL GROUP BY c.replica
	ON CONFLICT (replica) DO UPDATE SET due = EXCLUDED.due WHERE EXCLUDED.due < d.due;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION sync.refused_due_keep() IS 'Keeps sync.refused_due no later than the rows written to sync.refused_rows';
-- (a trigger with a transition table has one event)
CREATE TRIGGER refused_due_inserted AFTER INSERT ON sync.refused_rows
	REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION sync.refused_due_keep();
CREATE TRIGGER refused_due_updated AFTER UPDATE ON sync.refused_rows
	REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION sync.refused_due_keep();
-- under session_replication_role = replica too (a restore, a logical replica's apply)
ALTER TABLE sync.refused_rows ENABLE ALWAYS TRIGGER refused_due_inserted;
ALTER TABLE sync.refused_rows ENABLE ALWAYS TRIGGER refused_due_updated;
SELECT pg_catalog.pg_extension_config_dump('sync.refused_rows', '');
GRANT SELECT ON sync.refused_rows TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON sync.refused_rows TO sync_relay;
GRANT SELECT ON sync.refused_due TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON sync.refused_due TO sync_relay;
REVOKE ALL ON FUNCTION sync.refused_due_keep() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.refused_due_keep() TO sync_admin;
-- the rows refused before this update: sent to their replicas again at once
INSERT INTO sync.refused_rows (replica, tab, key, note, due)
	SELECT h.replica, h.tab, h.key, h.note, now() FROM sync.held h WHERE h.refused IS NOT NULL;

-- Settings and wishes (issue 18.1): a third mirror kind, setting, one row per
-- replica that the replica writes; sync.wish, sync.wish_list, sync.wishes
ALTER TABLE sync.tables DROP CONSTRAINT tables_mirror_check;
ALTER TABLE sync.tables ADD CONSTRAINT tables_mirror_check CHECK (mirror IN ('catalog', 'record', 'setting'));
-- Causal versions (issue 18.3, docs/protocol.md 12): version => 'hlc' on a
-- record table, and the server's hybrid logical clock
-- (added without a default, then given one: a default added with the column
-- would be kept as its missing value, which a fresh install has not)
ALTER TABLE sync.tables ADD COLUMN hlc boolean;
UPDATE sync.tables SET hlc = false;
ALTER TABLE sync.tables ALTER COLUMN hlc SET DEFAULT false, ALTER COLUMN hlc SET NOT NULL;
CREATE TABLE sync.wish_list (
	id				bigserial PRIMARY KEY,		-- never reused: a replica applies a wish once by it
	replica			uuid NOT NULL REFERENCES sync.replicas (id) ON DELETE CASCADE,
	tab				integer NOT NULL REFERENCES sync.tables (id) ON DELETE CASCADE,
	"values"		jsonb NOT NULL,				-- the columns it sets
	apply			text NOT NULL CHECK (apply IN ('always', 'if_unchanged')),
	expected		jsonb,						-- if_unchanged: those columns as the server last filed them
	fate			text NOT NULL DEFAULT 'pending'
		CHECK (fate IN ('pending', 'applied', 'declined', 'superseded')),
	why				text,
	made			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	decided			timestamptz,
	number			bigint						-- the message that carried it down; NULL: not sent yet
);
CREATE INDEX wish_list_pending ON sync.wish_list (replica, tab) WHERE fate = 'pending';
SELECT pg_catalog.pg_extension_config_dump('sync.wish_list', '');
SELECT pg_catalog.pg_extension_config_dump('sync.wish_list_id_seq', '');
COMMENT ON TABLE sync.wish_list IS 'The server''s wishes for replicas'' setting rows, and what became of each (sync.wish; read sync.wishes)';

CREATE FUNCTION sync.wish("table" regclass, key uuid, "values" jsonb, apply text DEFAULT 'always')
	RETURNS bigint
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_wish';
COMMENT ON FUNCTION sync.wish(regclass, uuid, jsonb, text) IS
	'Wishes one replica''s row of a setting table changed, for the table''s owner: table, a setting table; key, the row''s origin (the replica''s uuid); values, a JSON object of the columns to set; apply, always (the replica takes it) or if_unchanged (only while its row still holds what the server last filed of those columns, else it keeps its own and says so). A newer wish for the row supersedes a pending one. Returns the wish''s id; sync.wishes says what became of it';

CREATE VIEW sync.wishes AS
	SELECT w.id, w.replica, t.relid AS "table",
		pg_catalog.jsonb_build_object(t.origin, w.replica) AS key,
		w."values", w.apply, w.fate, w.why, w.made, w.decided,
		w.number AS sent_in
	FROM sync.wish_list w JOIN sync.tables t ON t.id = w.tab;
REVOKE ALL ON sync.wish_list, sync.wishes FROM PUBLIC;
GRANT SELECT ON sync.wish_list, sync.wishes TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON sync.wish_list, sync.wishes TO sync_relay;
GRANT USAGE, SELECT, UPDATE ON SEQUENCE sync.wish_list_id_seq TO sync_relay;
REVOKE ALL ON FUNCTION sync.wish(regclass, uuid, jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.wish(regclass, uuid, jsonb, text) TO sync_admin;
-- The server's hybrid logical clock (src/pg/hlc_clock.c,
-- docs/protocol.md 12): one row once a clock is stored (none before: 0), the greatest clock any upload brought that
-- was ahead of the server's physical time, and not too far ahead.  Every message to a
-- replica carries the greater of it and the physical time (ToReplica.clock),
-- so a replica whose clock is behind stamps its next write after what it saw.
CREATE TABLE sync.clock (
	one				boolean PRIMARY KEY DEFAULT true CHECK (one),
	hlc				bigint NOT NULL DEFAULT 0 CHECK (hlc >= 0)	-- (ms << 16) | counter
);
COMMENT ON TABLE sync.clock IS
	'The server''s hybrid logical clock, (ms << 16) | counter: the greatest clock an upload brought (docs/protocol.md 12)';
SELECT pg_catalog.pg_extension_config_dump('sync.clock', '');
REVOKE ALL ON TABLE sync.clock FROM PUBLIC;
GRANT SELECT ON TABLE sync.clock TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON TABLE sync.clock TO sync_relay;

-- Lanes (issue 18.2, docs/protocol.md 7.2): a table's lane, declared by
-- sync.mirror; send numbers and answers per replica and lane.  A send
-- filed before lanes is the first lane's ('').
-- (added without a default, filled, then given one: a default added with
-- the column would be kept as its missing value, which a fresh install has not)
ALTER TABLE sync.tables ADD COLUMN lane text COLLATE "C" CHECK (lane ~ '^([a-z][a-z0-9_]{0,62})?$');
ALTER TABLE sync.answers ADD COLUMN lane text COLLATE "C";
UPDATE sync.tables SET lane = '';
UPDATE sync.answers SET lane = '';
ALTER TABLE sync.tables ALTER COLUMN lane SET DEFAULT '', ALTER COLUMN lane SET NOT NULL;
ALTER TABLE sync.answers ALTER COLUMN lane SET DEFAULT '', ALTER COLUMN lane SET NOT NULL;
-- sync.mirror looks up a grouped rule's tables in the caller's search_path,
-- then becomes the function's owner with search_path pinned itself
-- (declare/declare.c): no SECURITY DEFINER, no SET clause
DROP FUNCTION sync.mirror(regclass, text, text, name[], name, name, name[], name[],
		name, name, name[], regclass, name, text, name);
CREATE FUNCTION sync.mirror(tab regclass, mirror text, sync text DEFAULT NULL,
		key name[] DEFAULT NULL, origin name DEFAULT NULL, version name DEFAULT NULL,
		replica_owned name[] DEFAULT '{}', unmirrored name[] DEFAULT '{}',
		retired name DEFAULT NULL, created name DEFAULT NULL,
		generated name[] DEFAULT '{}', active regclass DEFAULT NULL,
		"partition" name DEFAULT NULL, codec text DEFAULT 'json',
		sender name DEFAULT NULL, lane text DEFAULT '')
	RETURNS void
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'ms_mirror';
COMMENT ON FUNCTION sync.mirror(regclass, text, text, name[], name, name, name[], name[],
		name, name, name[], regclass, name, text, name, text) IS
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
	'sender, a jsonb column stamped with the sender sync.file was given when it filed the row; '
	'lane, the lane replicas upload its rows in, with send numbers and answers of its own ('''' or NULL: the first lane, which carries what the engine says too; else a lower-case letter, then lower-case letters, digits and underscores, 63 bytes at most)';
REVOKE ALL ON FUNCTION sync.mirror(regclass, text, text, name[], name, name, name[], name[],
		name, name, name[], regclass, name, text, name, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.mirror(regclass, text, text, name[], name, name, name[], name[],
		name, name, name[], regclass, name, text, name, text) TO sync_admin;
CREATE OR REPLACE VIEW sync.mirrors AS
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
		t.hlc, t.lane
	  FROM sync.tables t;
COMMENT ON VIEW sync.mirrors IS 'The mirrored tables, as declared';

-- Each replica's lanes as the server has filed them (docs/protocol.md 7.2):
-- the last send number filed of each, and its answers (sync.answers.lane).
CREATE VIEW sync.lanes AS
	SELECT s.replica, s.lane, s.filed_seq AS last_seq, s.filed_at,
		(SELECT pg_catalog.count(*) FROM sync.answers a
		  WHERE a.replica OPERATOR(pg_catalog.=) s.replica AND a.lane OPERATOR(pg_catalog.=) s.lane) AS answers,
		(SELECT pg_catalog.count(*) FROM sync.answers a
		  WHERE a.replica OPERATOR(pg_catalog.=) s.replica AND a.lane OPERATOR(pg_catalog.=) s.lane
		    AND a.pulled IS NULL) AS answers_unpulled,
		ARRAY(SELECT t.name FROM sync.tables t WHERE t.lane OPERATOR(pg_catalog.=) s.lane ORDER BY t.name) AS tables
	  FROM sync.sends s;
COMMENT ON VIEW sync.lanes IS 'Per replica and lane: the last send number filed (one at or below it is a duplicate), its answers kept and not yet pulled, and the tables declared in the lane';
GRANT SELECT ON sync.lanes TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON sync.lanes TO sync_relay;

-- Sending a row again is a HOT update of sync.held: no index has number (the
-- index held_number goes); what each message carries per table is in
-- sync.carried, which the reads count instead (filled from the held rows on
-- their way), and the table's pages keep room for the new versions.
DROP INDEX sync.held_number;
ALTER TABLE sync.held SET (fillfactor = 85);
CREATE TABLE sync.carried (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	number			bigint NOT NULL,			-- the message
	rows			bigint NOT NULL,			-- rows of tab it upserts
	PRIMARY KEY (replica, tab, number)
);
COMMENT ON TABLE sync.carried IS 'The rows of each table each message upserts, until the replica acknowledges it';
SELECT pg_catalog.pg_extension_config_dump('sync.carried', '');
REVOKE ALL ON sync.carried FROM PUBLIC;
GRANT SELECT ON sync.carried TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON sync.carried TO sync_relay;
INSERT INTO sync.carried (replica, tab, number, rows)
	SELECT h.replica, h.tab, h.number, pg_catalog.count(*)
	  FROM sync.held h JOIN sync.replicas r ON r.id OPERATOR(pg_catalog.=) h.replica
	 WHERE h.number OPERATOR(pg_catalog.>) r.acked_number
	 GROUP BY h.replica, h.tab, h.number;

-- Decided wishes are pruned after magic_sync.wishes_kept, by an index: the
-- wish list no longer grows for ever (sync.prune returns their count too)
CREATE INDEX wish_list_decided ON sync.wish_list (decided) WHERE decided IS NOT NULL;
DROP FUNCTION sync.prune(integer);
CREATE FUNCTION sync.prune(max integer DEFAULT 10000,
	OUT notes bigint, OUT bodies bigint, OUT answers bigint, OUT wishes bigint)
	LANGUAGE plpgsql VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp
	AS $$
BEGIN
	-- the oldest done notes, by notes_done, deleted by their row's address
	WITH n AS (
		DELETE FROM sync.notes WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM sync.notes WHERE done ORDER BY id LIMIT max))
		RETURNING 1),
	-- bodies are numbered as they are stored: every body older than the
	-- oldest one a message carries is carried by none (outbox_body)
	b AS (
		DELETE FROM sync.bodies WHERE id = ANY (ARRAY(
			SELECT b.id FROM sync.bodies b
			 WHERE b.id < coalesce((SELECT min(o.body) FROM sync.outbox o), 9223372036854775807)
			 ORDER BY b.id LIMIT max))
		RETURNING 1),
	a AS (
		DELETE FROM sync.answers WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM sync.answers
			 WHERE pulled < now() - interval '1 hour' ORDER BY pulled LIMIT max))
		RETURNING 1),
	-- wishes decided longer ago than magic_sync.wishes_kept, by
	-- wish_list_decided; a pending one is never pruned (the library may not
	-- be loaded in this session: its default then)
	w AS (
		DELETE FROM sync.wish_list WHERE id = ANY (ARRAY(
			SELECT id FROM sync.wish_list
			 WHERE decided < now() - coalesce(nullif(current_setting('magic_sync.wishes_kept', true), ''), '7d')::interval
			 ORDER BY decided LIMIT max))
		RETURNING 1)
	SELECT (SELECT count(*) FROM n), (SELECT count(*) FROM b), (SELECT count(*) FROM a), (SELECT count(*) FROM w)
	  INTO notes, bodies, answers, wishes;
END
$$;
COMMENT ON FUNCTION sync.prune(integer) IS
	'Removes up to max each of: notes done (oldest first), bodies older than any a message carries, answers pulled over an hour ago, wishes decided longer ago than magic_sync.wishes_kept (oldest first)';
REVOKE ALL ON FUNCTION sync.prune(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.prune(integer) TO sync_admin;
-- a decided wish is kept until magic_sync.wishes_kept has passed
COMMENT ON VIEW sync.wishes IS
	'Every wish and its fate: pending (not decided yet; sent_in is the message that carried it down, NULL until the relay sends it), applied, declined (the replica changed its row first: it keeps its own), superseded (a newer wish for the row came first), with why, when made and when decided; a decided wish until magic_sync.wishes_kept has passed (sync.prune)';

-- What each replica is owed (src/pg/sql/76_owed.sql): counted once from the
-- outbox here, kept by the relay and the acknowledgements from now on
ALTER TABLE sync.replicas ADD COLUMN owed_messages bigint NOT NULL DEFAULT 0,
	ADD COLUMN owed_bytes bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN sync.replicas.owed_messages IS 'Messages written to it beyond its latest snapshot and not yet acknowledged (checked against magic_sync.outbox_messages)';
COMMENT ON COLUMN sync.replicas.owed_bytes IS 'The bytes of those messages (checked against magic_sync.outbox_bytes)';
UPDATE sync.replicas r SET owed_messages = o.n, owed_bytes = o.b
  FROM (SELECT o.replica, count(*) AS n, sum(o.bytes) AS b FROM sync.outbox o JOIN sync.replicas x ON x.id = o.replica
         WHERE NOT o.dropped AND o.number > coalesce(x.snapshot_end, 0) GROUP BY o.replica) o
 WHERE r.id = o.replica;

-- keys of every type (issue 37, src/pg/keys.c): a value as a key part,
-- whatever the session's settings
CREATE FUNCTION sync.key_text(value anyelement) RETURNS text
	LANGUAGE c STABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'ms_key_text_fn';
COMMENT ON FUNCTION sync.key_text(anyelement) IS
	'A value as a key part, whatever the session''s settings: a numeric without trailing zeros, a date or timestamp in ISO 8601, a timestamptz at UTC, a citext lowercase, anything else as its type prints it';
REVOKE ALL ON FUNCTION sync.key_text(anyelement) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.key_text(anyelement) TO sync_admin;
GRANT EXECUTE ON FUNCTION sync.key_text(anyelement) TO PUBLIC;

-- What a replica is refused, it is told, and so is the operator (issue 39):
-- the state writes_refused (rows a replica wrote never go up, as its backlog
-- says, the server's own refusals added at filing), between set_aside and
-- unreachable; the rows counted (writes_set_aside) in the views, listing
-- and overview; sync.health's "writes refused" by reason and SQLSTATE.
-- An update may add a label but not use it in a view it makes in the same
-- transaction: the views compare the state with it as text.
ALTER TYPE sync.state ADD VALUE 'writes_refused' BEFORE 'unreachable';
COMMENT ON TYPE sync.state IS
	'A replica''s state, in order of severity: caught_up, on_its_way, behind, provisioning, set_aside, writes_refused, unreachable (sync.overview, sync.listing)';
CREATE OR REPLACE VIEW sync.replica_states AS
	-- each read once, however the plan joins them
	WITH fleet AS MATERIALIZED (
		SELECT coalesce(sum(f.notes_pending), 0) > 0 AS behind, min(f.pending_since) AS behind_since,
		       coalesce(sum(f.notes_parked + f.notes_later + f.quarantined), 0) > 0 AS aside,
		       min(f.aside_since) AS aside_since
		  FROM sync.fleet_tables f),
	-- rows set aside are few: read once, all of them
	rf AS MATERIALIZED (
		SELECT h.replica, count(*) AS n FROM sync.held h WHERE h.refused IS NOT NULL GROUP BY h.replica),
	i AS MATERIALIZED (
		SELECT i.replica, count(*) FILTER (WHERE i.sqlstate IS NOT NULL) AS set_aside,
		       count(*) FILTER (WHERE i.sqlstate IS NULL) AS waiting,
		       min(i.first_at) FILTER (WHERE i.sqlstate IS NOT NULL) AS since
		  FROM sync.inbox i GROUP BY i.replica),
	-- rows replicas wrote and can never send, as their backlogs last said
	-- (the server's own refusals added at filing: src/pg/transport/aside.c):
	-- a replica whose backlog says none is passed over by one jsonpath test
	wr AS MATERIALIZED (
		SELECT r.id AS replica,
		       (SELECT sum((b.value ->> 'set_aside')::bigint)::bigint FROM jsonb_each(r.backlog) b) AS n,
		       (SELECT to_timestamp(min((a.value ->> 'since')::bigint))
		          FROM jsonb_each(r.backlog) b
		          CROSS JOIN LATERAL jsonb_array_elements(b.value -> 'aside') a) AS since
		  FROM sync.replicas r
		 WHERE r.backlog @? '$.* ? (@.set_aside > 0)'),
	v AS (
		SELECT r.*, o.messages, o.bytes, o.oldest,
		       coalesce(rf.n, 0) AS refused, coalesce(i.set_aside, 0) AS set_aside,
		       coalesce(i.waiting, 0) AS waiting, i.since AS inbox_since,
		       fleet.behind_since, fleet.aside_since,
		       coalesce(wr.n, 0) AS writes, wr.since AS writes_since,
		       CASE WHEN r.unreachable THEN 'unreachable'
		            WHEN wr.n > 0 THEN 'writes_refused'
		            WHEN rf.n > 0 OR i.set_aside > 0 OR fleet.aside THEN 'set_aside'
		            WHEN r.provisioning THEN 'provisioning'
		            WHEN fleet.behind THEN 'behind'
		            WHEN r.last_number > r.acked_number THEN 'on_its_way'
		            ELSE 'caught_up' END::sync.state AS state
		  FROM sync.live_replicas r CROSS JOIN fleet
		  -- its messages not acknowledged: none to read once it acknowledged its last
		  CROSS JOIN LATERAL (
			SELECT count(*) AS messages, coalesce(sum(o.bytes), 0) AS bytes, min(o.written) AS oldest
			  FROM sync.outbox o
			 WHERE r.last_number > r.acked_number
			   AND o.replica = r.id AND o.number > r.acked_number AND NOT o.dropped) o
		  LEFT JOIN rf ON rf.replica = r.id
		  LEFT JOIN i ON i.replica = r.id
		  LEFT JOIN wr ON wr.replica = r.id)
	SELECT v.id AS replica, v.partition, v.state,
	       -- the state compared as text where it is writes_refused: an update
	       -- script may not name, in a view, a label it adds to sync.state
	       CASE WHEN v.state::text = 'writes_refused' THEN coalesce(v.writes_since, v.heard_at) ELSE
	       CASE v.state
	         WHEN 'unreachable' THEN coalesce(v.heard_at, v.added)
	         WHEN 'set_aside' THEN least(v.inbox_since, v.aside_since)
	         WHEN 'provisioning' THEN (SELECT o.written FROM sync.outbox o
	                                    WHERE o.replica = v.id AND o.number = v.snapshot_number
	                                      AND NOT o.dropped AND NOT v.provision)
	         WHEN 'behind' THEN v.behind_since
	         WHEN 'on_its_way' THEN v.oldest
	       END END AS since,
	       v.messages, v.bytes, v.refused AS rows_refused, v.set_aside AS uploads_set_aside,
	       v.waiting AS uploads_waiting, v.acked_number, v.last_number, v.acked_at, v.heard_at,
	       v.send_failures, v.last_error, v.last_error_at, v.unreachable, v.provisioning,
	       v.writes AS writes_set_aside
	  FROM v;
COMMENT ON VIEW sync.replica_states IS
	'Per live replica: its state (sync.state) and since when, its messages not acknowledged and their bytes, its rows refused, its uploads set aside and waiting, the columns of sync.replicas they are read from, whether it is unreachable or provisioning (sync.live_replicas), and the rows it wrote and can never send (its backlog); counts no held row but refused ones';
CREATE OR REPLACE VIEW sync.table_states AS
	-- each read once, however the plan joins them; rows letting go and set
	-- aside are few: all of them
	WITH f AS MATERIALIZED (
		SELECT t.id, f.* FROM sync.tables t JOIN sync.fleet_tables f ON f.tab = t.relid),
	tk AS MATERIALIZED (
		SELECT h.replica, h.tab, count(*) AS n
		  FROM sync.held h JOIN sync.replicas x ON x.id = h.replica
		 WHERE h.taken IS NOT NULL AND h.taken > x.acked_number
		 GROUP BY h.replica, h.tab),
	rf AS MATERIALIZED (
		SELECT h.replica, h.tab, count(*) AS n FROM sync.held h
		 WHERE h.refused IS NOT NULL GROUP BY h.replica, h.tab),
	ib AS MATERIALIZED (
		SELECT i.replica, i.tab, count(*) AS n FROM sync.inbox i
		 WHERE i.sqlstate IS NOT NULL GROUP BY i.replica, i.tab),
	-- rows each replica wrote and can never send, per table, as its backlog says
	wt AS MATERIALIZED (
		SELECT r.id AS replica, t.id AS tab, (b.value ->> 'set_aside')::bigint AS n
		  FROM sync.replicas r CROSS JOIN LATERAL jsonb_each(r.backlog) b
		  JOIN sync.tables t ON t.name = b.key
		 WHERE r.backlog @? '$.* ? (@.set_aside > 0)' AND (b.value ->> 'set_aside')::bigint > 0)
	SELECT r.id AS replica, r.partition, f.tab,
	       CASE WHEN r.unreachable THEN 'unreachable'
	            WHEN wt.n > 0 THEN 'writes_refused'
	            WHEN rf.n > 0 OR ib.n > 0 OR f.notes_parked + f.notes_later + f.quarantined > 0
	                 THEN 'set_aside'
	            WHEN r.provisioning THEN 'provisioning'
	            WHEN f.notes_pending > 0 THEN 'behind'
	            -- one probe of sync.carried: does a message it has not acknowledged carry a row of it?
	            WHEN r.last_number > r.acked_number
	                 AND (tk.n > 0 OR EXISTS (SELECT FROM sync.carried c
	                                           WHERE c.replica = r.id AND c.tab = f.id
	                                             AND c.number > r.acked_number)) THEN 'on_its_way'
	            ELSE 'caught_up' END::sync.state AS state,
	       coalesce(tk.n, 0) AS rows_letting_go, coalesce(rf.n, 0) AS rows_refused,
	       coalesce(ib.n, 0) AS uploads_set_aside, coalesce(wt.n, 0) AS writes_set_aside
	  FROM sync.live_replicas r CROSS JOIN f
	  LEFT JOIN tk ON tk.replica = r.id AND tk.tab = f.id
	  LEFT JOIN rf ON rf.replica = r.id AND rf.tab = f.id
	  LEFT JOIN ib ON ib.replica = r.id AND ib.tab = f.id
	  LEFT JOIN wt ON wt.replica = r.id AND wt.tab = f.id;
COMMENT ON VIEW sync.table_states IS
	'Per live replica and mirrored table: its state for that table (unreachable and provisioning are the replica''s; the others are read of that table alone), its rows letting go and refused, its uploads set aside, the rows of it it wrote and can never send';
-- a replica listed says the rows it wrote and can never send: the type, the
-- function returning it and the view over that are made again
DROP VIEW sync.replicas_now;
DROP FUNCTION sync.listing(uuid[], text, sync.state, uuid, integer);
DROP TYPE sync.listed;
CREATE TYPE sync.listed AS (
	replica				uuid,
	"partition"			text,
	state				sync.state,
	since				timestamptz,
	messages			bigint,
	bytes				bigint,
	rows_on_its_way		bigint,
	rows_letting_go		bigint,
	rows_refused		bigint,
	uploads_set_aside	bigint,
	uploads_waiting		bigint,
	writes_set_aside	bigint,
	acked_number		bigint,
	last_number			bigint,
	acked_at			timestamptz,
	heard_at			timestamptz,
	send_failures		integer,
	last_error			text,
	last_error_at		timestamptz,
	now					timestamptz
);
COMMENT ON TYPE sync.listed IS 'A replica as sync.listing lists it: sync.replica_states, with its rows on their way and letting go counted';

CREATE FUNCTION sync.listing(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	state sync.state DEFAULT NULL, after uuid DEFAULT NULL, "limit" integer DEFAULT 100)
	RETURNS SETOF sync.listed
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET plan_cache_mode = force_generic_plan
	AS $$
BEGIN
	RETURN QUERY
		SELECT r.replica, r.partition, r.state, r.since, r.messages, r.bytes,
		       c.on_its_way, c.letting_go, r.rows_refused, r.uploads_set_aside, r.uploads_waiting,
		       r.writes_set_aside, r.acked_number, r.last_number, r.acked_at, r.heard_at, r.send_failures,
		       r.last_error, r.last_error_at, now()
		  FROM (SELECT * FROM sync.replica_states r
		         WHERE ($1 IS NULL OR r.replica = ANY ($1)) AND ($2 IS NULL OR r.partition = $2)
		           AND ($3 IS NULL OR r.state = $3) AND ($4 IS NULL OR r.replica > $4)
		         ORDER BY r.replica LIMIT $5) r
		  -- the rows of the page's replicas: per table, what the messages
		  -- it has not acknowledged carry (sync.carried)
		  CROSS JOIN LATERAL (
			SELECT (SELECT coalesce(sum(c.n), 0)::bigint FROM sync.tables t
			          CROSS JOIN LATERAL (SELECT sum(m.rows) AS n FROM sync.carried m
			                               WHERE m.replica = r.replica AND m.tab = t.id
			                                 AND m.number > r.acked_number) c
			         WHERE r.last_number > r.acked_number) AS on_its_way,
			       (SELECT count(*) FROM sync.held h
			         WHERE h.replica = r.replica AND h.taken IS NOT NULL
			           AND h.taken > r.acked_number) AS letting_go) c
		 ORDER BY r.replica;
END
$$;
COMMENT ON FUNCTION sync.listing(uuid[], text, sync.state, uuid, integer) IS
	'Pages through the live replicas of the scope (in a state, or all), by uuid after `after`, up to `limit` (NULL: all): each replica''s state and since when, its messages, rows and uploads not where they should be (rows on their way: what the messages it has not acknowledged carry, a row sent twice meanwhile counted twice; rows letting go counted one by one), the rows it wrote and can never send, what it acknowledged and when it was heard from';
CREATE VIEW sync.replicas_now AS
	SELECT * FROM sync.listing("limit" => NULL) ORDER BY state DESC, since, replica;
COMMENT ON VIEW sync.replicas_now IS
	'sync.listing() of every live replica, worst first';
REVOKE ALL ON FUNCTION sync.listing(uuid[], text, sync.state, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.listing(uuid[], text, sync.state, uuid, integer) TO sync_admin;
REVOKE ALL ON sync.replicas_now FROM PUBLIC;
GRANT SELECT ON sync.replicas_now TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON sync.replicas_now TO sync_relay;
-- per table, the replicas in writes_refused and the rows written that never go up
DROP VIEW sync.overview_tables_now;
DROP FUNCTION sync.overview_tables(uuid[], text);
CREATE FUNCTION sync.overview_tables(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	OUT tab regclass, OUT caught_up bigint, OUT on_its_way bigint, OUT behind bigint,
	OUT provisioning bigint, OUT set_aside bigint, OUT writes_refused bigint, OUT unreachable bigint,
	OUT notes_pending bigint, OUT pending_since timestamptz, OUT notes_parked bigint,
	OUT notes_later bigint, OUT quarantined bigint, OUT rows_refused bigint,
	OUT uploads_set_aside bigint, OUT writes_set_aside bigint, OUT rows_letting_go bigint,
	OUT now timestamptz)
	RETURNS SETOF record
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET plan_cache_mode = force_generic_plan
	AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
		SELECT f.tab,
		       count(x.state) FILTER (WHERE x.state = 'caught_up'),
		       count(x.state) FILTER (WHERE x.state = 'on_its_way'),
		       count(x.state) FILTER (WHERE x.state = 'behind'),
		       count(x.state) FILTER (WHERE x.state = 'provisioning'),
		       count(x.state) FILTER (WHERE x.state = 'set_aside'),
		       count(x.state) FILTER (WHERE x.state = 'writes_refused'),
		       count(x.state) FILTER (WHERE x.state = 'unreachable'),
		       f.notes_pending, f.pending_since, f.notes_parked, f.notes_later, f.quarantined,
		       coalesce(sum(x.rows_refused), 0)::bigint, coalesce(sum(x.uploads_set_aside), 0)::bigint,
		       coalesce(sum(x.writes_set_aside), 0)::bigint, coalesce(sum(x.rows_letting_go), 0)::bigint, now()
		  FROM sync.fleet_tables f
		  LEFT JOIN (SELECT * FROM sync.table_states x
		              WHERE ($1 IS NULL OR x.replica = ANY ($1)) AND ($2 IS NULL OR x.partition = $2)) x
		         ON x.tab = f.tab
		 GROUP BY f.tab, f.notes_pending, f.pending_since, f.notes_parked, f.notes_later, f.quarantined
		 ORDER BY f.tab::text;
END
$$;
COMMENT ON FUNCTION sync.overview_tables(uuid[], text) IS
	'Per mirrored table, over the live replicas of the scope: how many are in each state for that table, its notes pending, parked and of a later build, its rows quarantined, refused and letting go, its uploads set aside, its rows replicas wrote and can never send';
CREATE VIEW sync.overview_tables_now AS
	SELECT * FROM sync.overview_tables();
COMMENT ON VIEW sync.overview_tables_now IS
	'sync.overview_tables() over every live replica: per table, replicas per state and what holds it back';
REVOKE ALL ON FUNCTION sync.overview_tables(uuid[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.overview_tables(uuid[], text) TO sync_admin;
REVOKE ALL ON sync.overview_tables_now FROM PUBLIC;
GRANT SELECT ON sync.overview_tables_now TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON sync.overview_tables_now TO sync_relay;
CREATE OR REPLACE FUNCTION sync.overview(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	worst integer DEFAULT 10)
	RETURNS jsonb
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET plan_cache_mode = force_generic_plan
	AS $$
BEGIN
	RETURN (
		WITH r AS MATERIALIZED (
			SELECT * FROM sync.replica_states r
			 WHERE ($1 IS NULL OR r.replica = ANY ($1)) AND ($2 IS NULL OR r.partition = $2)),
		f AS MATERIALIZED (SELECT * FROM sync.fleet_tables),
		-- the worst, with their rows counted one by one (as sync.listing does)
		w AS (
			SELECT r.replica, r.partition, r.state, r.since, r.messages, r.bytes,
			       c.rows_on_its_way, c.rows_letting_go, r.rows_refused, r.uploads_set_aside,
			       r.uploads_waiting, r.writes_set_aside, r.acked_number, r.last_number, r.acked_at, r.heard_at,
			       r.send_failures, r.last_error, r.last_error_at
			  FROM (SELECT * FROM r ORDER BY r.state DESC, r.since NULLS LAST, r.replica LIMIT $3) r
			  CROSS JOIN LATERAL (
				SELECT (SELECT coalesce(sum(c.n), 0)::bigint FROM sync.tables t
				          CROSS JOIN LATERAL (SELECT sum(m.rows) AS n FROM sync.carried m
				                               WHERE m.replica = r.replica AND m.tab = t.id
				                                 AND m.number > r.acked_number) c
				         WHERE r.last_number > r.acked_number) AS rows_on_its_way,
				       (SELECT count(*) FROM sync.held h
				         WHERE h.replica = r.replica AND h.taken IS NOT NULL
				           AND h.taken > r.acked_number) AS rows_letting_go) c),
		s AS (SELECT r.state, count(*) AS n FROM r GROUP BY r.state),
		-- per table, as sync.overview_tables (the tests hold them equal).  A
		-- replica with nothing of its own to say of any table -- no message
		-- on its way, no row refused, no upload set aside, no write it cannot
		-- send -- is in the same state for every table but for what is
		-- recorded without a replica: those are counted once, the others
		-- table by table.
		own AS MATERIALIZED (
			SELECT r.replica FROM r
			 WHERE r.last_number > r.acked_number OR r.rows_refused > 0 OR r.uploads_set_aside > 0
			    OR r.writes_set_aside > 0),
		pl AS (
			SELECT count(*) FILTER (WHERE r.unreachable) AS u,
			       count(*) FILTER (WHERE NOT r.unreachable AND r.provisioning) AS p,
			       count(*) FILTER (WHERE NOT r.unreachable AND NOT r.provisioning) AS c
			  FROM r WHERE r.replica NOT IN (SELECT own.replica FROM own)),
		x AS (
			SELECT x.tab,
			       count(*) FILTER (WHERE x.state = 'caught_up') AS caught_up,
			       count(*) FILTER (WHERE x.state = 'on_its_way') AS on_its_way,
			       count(*) FILTER (WHERE x.state = 'behind') AS behind,
			       count(*) FILTER (WHERE x.state = 'provisioning') AS provisioning,
			       count(*) FILTER (WHERE x.state = 'set_aside') AS set_aside,
			       count(*) FILTER (WHERE x.state = 'writes_refused') AS writes_refused,
			       count(*) FILTER (WHERE x.state = 'unreachable') AS unreachable,
			       sum(x.rows_refused) AS rows_refused, sum(x.uploads_set_aside) AS uploads_set_aside,
			       sum(x.writes_set_aside) AS writes_set_aside, sum(x.rows_letting_go) AS rows_letting_go
			  FROM sync.table_states x WHERE x.replica IN (SELECT own.replica FROM own)
			 GROUP BY x.tab),
		t AS (
			SELECT f.tab,
			       coalesce(x.caught_up, 0)
			         + CASE WHEN a.aside OR f.notes_pending > 0 THEN 0 ELSE pl.c END AS caught_up,
			       coalesce(x.on_its_way, 0) AS on_its_way,
			       coalesce(x.behind, 0)
			         + CASE WHEN NOT a.aside AND f.notes_pending > 0 THEN pl.c ELSE 0 END AS behind,
			       coalesce(x.provisioning, 0) + CASE WHEN a.aside THEN 0 ELSE pl.p END AS provisioning,
			       coalesce(x.set_aside, 0) + CASE WHEN a.aside THEN pl.p + pl.c ELSE 0 END AS set_aside,
			       coalesce(x.writes_refused, 0) AS writes_refused,
			       coalesce(x.unreachable, 0) + pl.u AS unreachable,
			       f.notes_pending, f.pending_since, f.notes_parked, f.notes_later, f.quarantined,
			       coalesce(x.rows_refused, 0)::bigint AS rows_refused,
			       coalesce(x.uploads_set_aside, 0)::bigint AS uploads_set_aside,
			       coalesce(x.writes_set_aside, 0)::bigint AS writes_set_aside,
			       coalesce(x.rows_letting_go, 0)::bigint AS rows_letting_go
			  FROM f CROSS JOIN pl
			  CROSS JOIN LATERAL (SELECT f.notes_parked + f.notes_later + f.quarantined > 0 AS aside) a
			  LEFT JOIN x ON x.tab = f.tab)
		SELECT jsonb_build_object(
			'now', now(),
			'scope', jsonb_build_object('replicas', $1, 'partition', $2),
			'unreachable_after', current_setting('magic_sync.unreachable_after'),
			'replicas', (SELECT count(*) FROM r),
			'states', (SELECT jsonb_object_agg(e.state, coalesce(s.n, 0))
			             FROM unnest(enum_range(NULL::sync.state)) e(state)
			             LEFT JOIN s ON s.state = e.state),
			'worst', (SELECT coalesce(jsonb_agg(to_jsonb(w) ORDER BY w.state DESC, w.since NULLS LAST, w.replica), '[]')
			            FROM w),
			'tables', (SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.tab::text), '[]') FROM t),
			'notes_pending', (SELECT coalesce(sum(f.notes_pending), 0) FROM f),
			'pending_since', (SELECT min(f.pending_since) FROM f),
			'notes_parked', (SELECT coalesce(sum(f.notes_parked), 0) FROM f),
			'notes_later', (SELECT coalesce(sum(f.notes_later), 0) FROM f),
			'quarantined', (SELECT coalesce(sum(f.quarantined), 0) FROM f)));
END
$$;
COMMENT ON FUNCTION sync.overview(uuid[], text, integer) IS
	'Whether everything is where it should be, over the live replicas of the scope, in one snapshot: the server''s now, how many replicas are in each state, the worst up to `worst` (with their rows on their way counted), per table the same figures, and the notes pending, parked, of a later build and rows quarantined; reads only what the engine records, never what replicas should hold';

CREATE OR REPLACE FUNCTION sync.health(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	OUT kind text, OUT waits_on text, OUT replica uuid, OUT tab regclass, OUT key text,
	OUT count bigint, OUT since timestamptz, OUT reason text, OUT sqlstate text,
	OUT now timestamptz)
	RETURNS SETOF record
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET plan_cache_mode = force_generic_plan
	AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
		WITH s AS (
			SELECT r.* FROM sync.live_replicas r
			 WHERE ($1 IS NULL OR r.id = ANY ($1)) AND ($2 IS NULL OR r.partition = $2)),
		items AS (
			-- a table whose declaration or trigger is wrong is held back, with those joined to it
			SELECT 'declaration' AS kind, 'a fix' AS waits_on, NULL::uuid AS replica,
			       (SELECT t.relid FROM sync.tables t WHERE t.name = c.tab) AS tab, NULL::text AS key,
			       1::bigint AS count, NULL::timestamptz AS since,
			       format('%s: %s: %s; it is held back, with every table joined to it by a foreign key'
			              ' (its changes, their filing, snapshots), until sync.mirror or sync.retrigger puts it right;'
			              ' every other table flows',
			              c.tab, c.problem, c.detail) AS reason, NULL::text AS sqlstate
			  FROM sync.check() c
			 WHERE c.problem <> 'foreign key not indexed'	-- it runs, reading a table whole
			UNION ALL
			-- changes the relay has not planned yet: it plans them at its next pass
			SELECT 'notes pending', 'infrastructure', NULL, t.relid, NULL, count(*), min(n.noted),
			       'changes not planned yet: the relay plans them at its next pass (waiting long: is it running?)',
			       NULL
			  FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
			 WHERE NOT n.done AND n.parked IS NULL AND n.build <= 1
			 GROUP BY t.relid
			UNION ALL
			SELECT 'notes parked', 'a fix', NULL, t.relid, min(n.key), count(*), min(n.noted), n.parked, NULL
			  FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
			 WHERE NOT n.done AND n.parked IS NOT NULL
			 GROUP BY t.relid, n.parked
			UNION ALL
			SELECT 'notes of a later build', 'a fix', NULL, t.relid, min(n.key), count(*), min(n.noted),
			       format('noted by build %s, which plans them once it is deployed', n.build), NULL
			  FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
			 WHERE NOT n.done AND n.parked IS NULL AND n.build > 1
			 GROUP BY t.relid, n.build
			UNION ALL
			-- rows that cannot go: tried again a minute after, and when they change
			SELECT 'rows quarantined', 'a fix', NULL, t.relid, min(q.key), count(*), min(q.since),
			       q.reason, q.sqlstate
			  FROM sync.quarantine q JOIN sync.tables t ON t.id = q.tab
			 GROUP BY t.relid, q.reason, q.sqlstate
			UNION ALL
			-- rows a replica could not take: sent again at once when they change or
			-- it reports a new build, and otherwise when due (sync.refused_rows)
			SELECT 'rows refused', 'a fix', h.replica, t.relid, min(h.key), count(*), min(r.refused_at),
			       h.refused || CASE WHEN min(r.due) IS NOT NULL
			                         THEN format(' (sent to it again at %s, or at once when it changes or the replica reports a new build)',
			                                     min(r.due))
			                         ELSE ' (sent again once it changes or the replica reports a new build)' END, NULL
			  FROM s JOIN sync.held h ON h.replica = s.id JOIN sync.tables t ON t.id = h.tab
			  LEFT JOIN sync.refused_rows r ON r.replica = h.replica AND r.tab = h.tab AND r.key = h.key
			 WHERE h.refused IS NOT NULL
			 GROUP BY h.replica, t.relid, h.refused
			UNION ALL
			-- uploads set aside: failed for good (a SQLSTATE), retried by sync.inbox_retry;
			-- or waiting until the replica holds the row again (none)
			SELECT CASE WHEN i.sqlstate IS NULL THEN 'uploads waiting' ELSE 'uploads set aside' END,
			       CASE WHEN i.sqlstate IS NULL THEN 'infrastructure' ELSE 'a fix' END,
			       i.replica, t.relid, min(i.key), count(*), min(i.first_at), i.reason, i.sqlstate
			  FROM s JOIN sync.inbox i ON i.replica = s.id JOIN sync.tables t ON t.id = i.tab
			 GROUP BY i.replica, t.relid, i.reason, i.sqlstate
			UNION ALL
			-- what a replica said that the server would not believe, in the last
			-- hour: refused with the call it came with (src/pg/transport/claim.c)
			SELECT 'claim refused', 'a fix', c.replica, NULL, NULL, 1, c.at, c.claim || ': ' || c.reason, c.sqlstate
			  FROM s JOIN sync.refused_claims c ON c.replica = s.id
			 WHERE c.at > now() - interval '1 hour'
			UNION ALL
			-- edits a replica sent that the server did not take, its copy winning, for a
			-- reason the replica's application must fix (a version not raised): until filed
			SELECT 'uploads dropped', 'a fix', d.replica, t.relid, min(d.key), count(*), min(d.at), d.reason, NULL
			  FROM s JOIN sync.dropped d ON d.replica = s.id JOIN sync.tables t ON t.id = d.tab
			 GROUP BY d.replica, t.relid, d.reason
			UNION ALL
			SELECT 'unreachable', 'infrastructure', s.id, NULL, NULL, NULL, coalesce(s.heard_at, s.added),
			       CASE WHEN s.send_failures >= 2
			            THEN format('message %s went out %s times and it applied none of them', s.send_failing, s.send_failures + 1)
			            WHEN s.heard_at IS NULL THEN 'never heard from since it was added'
			            ELSE 'not heard from since its last upload' END,
			       NULL
			  FROM s WHERE s.unreachable
			UNION ALL
			-- a snapshot due or on its way: it goes as the replica takes its messages
			-- (or, set aside when it failed for good, on a fix)
			SELECT 'provisioning',
			       CASE WHEN s.provision AND s.provision_failed_at IS NOT NULL THEN 'a fix' ELSE 'infrastructure' END,
			       s.id, NULL, NULL, NULL,
			       (SELECT o.written FROM sync.outbox o WHERE o.replica = s.id
			           AND o.number = s.snapshot_number AND NOT o.dropped AND NOT s.provision),
			       CASE WHEN s.provision AND s.provision_failed_at IS NOT NULL
			            THEN 'its snapshot failed for good, and is tried again a minute later'
			            WHEN s.provision OR NOT s.seen_live OR s.seen_partition IS DISTINCT FROM s.partition
			            THEN 'a snapshot is due at the next pass'
			            ELSE 'its snapshot is on its way' END
			       || coalesce(' (its last alarm: ' || s.last_error || ')', ''), NULL
			  FROM s WHERE s.provisioning
			UNION ALL
			-- what the replica last said it has not sent or filed (its backlog)
			SELECT 'backlog', 'infrastructure', s.id, t.relid, NULL,
			       (b.value ->> 'unsent')::bigint + (b.value ->> 'unfiled')::bigint, NULL,
			       format('as it said at %s: %s rows written not yet sent, %s sent not yet filed',
			              s.heard_at, b.value ->> 'unsent', b.value ->> 'unfiled'), NULL
			  FROM s CROSS JOIN LATERAL jsonb_each(s.backlog) b
			  LEFT JOIN sync.tables t ON t.name = b.key
			 WHERE (b.value ->> 'unsent')::bigint + (b.value ->> 'unfiled')::bigint > 0
			UNION ALL
			-- what a replica wrote and can never send, by reason and SQLSTATE, as
			-- its backlog last said (the server's own refusals added at filing:
			-- src/pg/transport/aside.c): set aside in its file until written again
			SELECT 'writes refused', 'a fix', s.id, t.relid,
			       CASE WHEN jsonb_typeof(a.value -> 'key') = 'array'
			            THEN sync.key(ARRAY(SELECT jsonb_array_elements_text(a.value -> 'key'))) END,
			       (a.value ->> 'rows')::bigint, to_timestamp((a.value ->> 'since')::bigint),
			       a.value ->> 'reason', nullif(a.value ->> 'sqlstate', '')
			  FROM s CROSS JOIN LATERAL jsonb_each(s.backlog) b
			  CROSS JOIN LATERAL jsonb_array_elements(b.value -> 'aside') a
			  LEFT JOIN sync.tables t ON t.name = b.key
			 WHERE s.backlog @? '$.* ? (@.set_aside > 0)' AND (b.value ->> 'set_aside')::bigint > 0
			UNION ALL
			-- ... and those it gave no reason for (a replica of an earlier build, or more reasons than it lists)
			SELECT 'writes refused', 'a fix', s.id, t.relid, NULL, c.n - c.told, NULL,
			       format('%s rows it wrote can never go up; it did not say why (a replica of an earlier build, or more reasons than an upload lists)',
			              c.n - c.told), NULL
			  FROM s CROSS JOIN LATERAL jsonb_each(s.backlog) b
			  LEFT JOIN sync.tables t ON t.name = b.key
			  CROSS JOIN LATERAL (
				SELECT (b.value ->> 'set_aside')::bigint AS n,
				       coalesce((SELECT sum((a.value ->> 'rows')::bigint)
				                   FROM jsonb_array_elements(b.value -> 'aside') a), 0)::bigint AS told) c
			 WHERE s.backlog @? '$.* ? (@.set_aside > 0)' AND c.n > c.told)
		SELECT i.kind, i.waits_on, i.replica, i.tab, i.key, i.count, i.since, i.reason, i.sqlstate, now()
		  FROM items i
		 ORDER BY i.waits_on = 'infrastructure', i.kind, i.tab::text NULLS FIRST, i.replica NULLS FIRST,
		          i.reason, i.key;
END
$$;
COMMENT ON FUNCTION sync.health(uuid[], text) IS
	'What the engine waits on over the scope, one row per kind, table, replica and reason: declarations the relay will not run with, notes pending and since when, notes parked or of a later build, rows quarantined and refused, uploads set aside, waiting and dropped, claims of replicas refused in the last hour, replicas unreachable or provisioning, the replicas'' backlogs, and the writes they can never send, by reason and SQLSTATE; waits_on says whether it waits on the infrastructure (wait) or on a fix (deploy one). Healthy: no row waits on a fix';
-- CREATE OR REPLACE sets the options it names alone: JIT off again, as the parts leave it
ALTER FUNCTION sync.listing(uuid[], text, sync.state, uuid, integer) SET jit = off;
ALTER FUNCTION sync.overview_tables(uuid[], text) SET jit = off;
ALTER FUNCTION sync.overview(uuid[], text, integer) SET jit = off;
ALTER FUNCTION sync.health(uuid[], text) SET jit = off;

-- The installation's signing key (src/pg/signing.c, docs/protocol.md 2.4):
-- one Ed25519 key, made by the first relay pass or filing that signs a
-- message (not by CREATE EXTENSION, so that a restored dump brings back its
-- own key, as it brings its epoch) and kept across epochs.  Its private half
-- is the extension's alone: sync_admin reads its public half (99_grants.sql).
CREATE TABLE sync.signing_key (
	id				boolean PRIMARY KEY DEFAULT true CHECK (id),
	private_key		bytea NOT NULL CHECK (octet_length(private_key) = 32),
	public_key		bytea NOT NULL CHECK (octet_length(public_key) = 32),
	made			timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE sync.signing_key IS 'The installation''s Ed25519 key: every message to a replica is signed with it; replicas pin its public half (sync.signing_key())';
SELECT pg_catalog.pg_extension_config_dump('sync.signing_key', '');

CREATE FUNCTION sync.signing_key() RETURNS bytea
	LANGUAGE sql STABLE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS $$ SELECT public_key FROM sync.signing_key $$;
COMMENT ON FUNCTION sync.signing_key() IS
	'The public key every message to a replica is signed with (32 bytes, Ed25519), NULL before the first relay pass made it: what a replica''s agent pins over its connection (sync_trust_key)';
REVOKE ALL ON sync.signing_key FROM PUBLIC;
GRANT SELECT (id, public_key, made) ON sync.signing_key TO sync_admin;
GRANT INSERT, UPDATE, DELETE, SELECT ON sync.signing_key TO sync_relay;
REVOKE ALL ON FUNCTION sync.signing_key() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.signing_key() TO sync_admin;
GRANT EXECUTE ON FUNCTION sync.signing_key() TO PUBLIC;

-- A snapshot whose held rows are recorded after its pass (src/pg/sql/77_held_due.sql)
ALTER TABLE sync.replicas ADD COLUMN held_due bigint;
COMMENT ON COLUMN sync.replicas.held_due IS 'The snapshot whose held rows of tables read whole the relay records after its pass; NULL once recorded';

-- What a replica's writes may point at (src/pg/transport/reach.c): the rows
-- taken back from it that a row it wrote before may still point at
CREATE TABLE sync.let_go (
	replica			uuid NOT NULL REFERENCES sync.replicas ON DELETE CASCADE,
	tab				int NOT NULL,
	key				text COLLATE "C" NOT NULL,
	taken			bigint NOT NULL,			-- the message that took it back
	PRIMARY KEY (replica, tab, key)
);
CREATE INDEX let_go_taken ON sync.let_go (replica, taken);
COMMENT ON TABLE sync.let_go IS 'Rows taken back from each replica that a row it wrote before, not filed yet, may still point at';
SELECT pg_catalog.pg_extension_config_dump('sync.let_go', '');
REVOKE ALL ON sync.let_go FROM PUBLIC;
GRANT SELECT ON sync.let_go TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON sync.let_go TO sync_relay;

-- Why a replica holds, should hold, or is letting go of a row (src/pg/sql/19_why.sql)
CREATE FUNCTION sync.why(replica uuid, tab regclass, key text)
	RETURNS TABLE (depth int, tab regclass, key text, relation text, wanted boolean, held text)
	LANGUAGE c STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_why';
COMMENT ON FUNCTION sync.why(uuid, regclass, text) IS
	'Why a replica should hold a row (key as sync.key writes it), in one snapshot: the chain from a rule''s row (depth 0, relation ''rule: broadcast'', ''rule: assigned'', ''rule: grouped'' or ''rule: its own record'') through ''parent of (fk)'' and ''follows (fk)'' links, each of the row on the line before, down to the row; whether each is wanted, and whether the replica holds it, has it on its way, is letting go of it, or not (''no''). One line, not wanted, when no rule, parent or follower brings the row';

CREATE FUNCTION sync.why_json(replica uuid, tab regclass, key text)
	RETURNS jsonb
	LANGUAGE sql STRICT
	SET search_path = pg_catalog, pg_temp
	AS $$
	SELECT pg_catalog.jsonb_build_object(
		'replica', $1, 'table', $2::text, 'key', $3,
		'wanted', pg_catalog.bool_or(w.wanted),
		'chain', pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
			'depth', w.depth, 'table', w.tab::text, 'key', w.key, 'relation', w.relation,
			'wanted', w.wanted, 'held', w.held) ORDER BY w.depth))
	  FROM sync.why($1, $2, $3) w
	$$;
COMMENT ON FUNCTION sync.why_json(uuid, regclass, text) IS
	'sync.why as one jsonb object for a program: {replica, table, key, wanted, chain: [{depth, table, key, relation, wanted, held}, ...]}';
CREATE FUNCTION sync.why_all(replica uuid)
	RETURNS TABLE (tab regclass, key text, depth int, relation text, from_tab regclass, from_key text)
	LANGUAGE c STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_why_all';
COMMENT ON FUNCTION sync.why_all(uuid) IS
	'sync.why for every row a replica should hold, from one walk of its wanted set (sync.why walks it once per row): each row with the link that first reached it, its relation as sync.why says it and the row one link up its shortest chain (from_tab, from_key; NULL at depth 0, a rule''s row); depth NULL for a wanted row no link reaches';
REVOKE ALL ON FUNCTION sync.why(uuid, regclass, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.why(uuid, regclass, text) TO sync_admin;
REVOKE ALL ON FUNCTION sync.why_json(uuid, regclass, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.why_json(uuid, regclass, text) TO sync_admin;
REVOKE ALL ON FUNCTION sync.why_all(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.why_all(uuid) TO sync_admin;

-- A dry run of a statement: what each replica would be sent or let go of (src/pg/sql/19_why.sql)
CREATE FUNCTION sync.would_send(statement text)
	RETURNS TABLE (replica uuid, tab regclass, sent bigint, let_go bigint)
	LANGUAGE c STRICT
	AS 'MODULE_PATHNAME', 'ms_would_send';
COMMENT ON FUNCTION sync.would_send(text) IS
	'A dry run of one INSERT, UPDATE, DELETE or MERGE: run as the caller in a subtransaction, its notes planned by the relay''s own planner for every live replica not waiting for a snapshot, against what each holds now, then all rolled back (nothing noted, held or sent; sequences stay drawn). Per replica and table, the rows a pass would send it and those it would let go of; none when the statement moves nothing';

CREATE FUNCTION sync.would_send_json(statement text)
	RETURNS jsonb
	LANGUAGE sql STRICT
	AS $$
	SELECT pg_catalog.jsonb_build_object(
		'sent', COALESCE(pg_catalog.sum(w.sent), 0), 'let_go', COALESCE(pg_catalog.sum(w.let_go), 0),
		'by', COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
			'replica', w.replica, 'table', w.tab::pg_catalog.text, 'sent', w.sent, 'let_go', w.let_go)
			ORDER BY w.replica, w.tab::pg_catalog.text), '[]'))
	  FROM sync.would_send($1) w
	$$;
COMMENT ON FUNCTION sync.would_send_json(text) IS
	'sync.would_send as one jsonb object for a program: {sent, let_go, by: [{replica, table, sent, let_go}, ...]}';
REVOKE ALL ON FUNCTION sync.would_send(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.would_send(text) TO sync_admin;
REVOKE ALL ON FUNCTION sync.would_send_json(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.would_send_json(text) TO sync_admin;

-- 78_ranges.sql
-- Range repair (src/pg/transport/range.c, docs/protocol.md 8.1): the open
-- question of the server's about what a replica holds of a table, narrowing
-- down a digest that differs; one per replica and table, gone once the rows
-- that differ are marked to go again (sync.held.replace), or left split -1
-- when the whole table matched (its digest differing again is a snapshot).
CREATE TABLE sync.ranges (
	replica			uuid NOT NULL,
	tab				int NOT NULL,
	round			bigint NOT NULL,			-- said back by the answer
	depth			int NOT NULL,				-- of the buckets asked about
	split			int NOT NULL,				-- 0: their rows; -1: the whole table matched
	buckets			bigint[] NOT NULL,			-- ascending, as unsigned
	of_values		boolean NOT NULL DEFAULT false,	-- of the rows' values hashes: a values digest narrowed
	asked_at		timestamptz NOT NULL DEFAULT pg_catalog.now(),
	-- a values question's first (the whole table): the server's buckets at depth + split,
	-- their rows and sums, made by the values digest's walk that asked it, so its answer
	-- is compared without reading the table again; NULL: read when answered
	held_buckets	bigint[],
	held_counts		bigint[],
	held_sums		bigint[],
	PRIMARY KEY (replica, tab)
);
COMMENT ON TABLE sync.ranges IS 'Range repair: the open question to each replica about a table whose digest differs';
GRANT SELECT ON sync.ranges TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON sync.ranges TO sync_relay;

-- 30_relay.sql: a pull that waits (src/pg/transport/pull_wait.c)
CREATE PROCEDURE sync.pull_wait(replica uuid, after bigint, timeout_ms integer)
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'ms_pull_wait';
COMMENT ON PROCEDURE sync.pull_wait(uuid, bigint, integer) IS
	'Waits, holding no snapshot, until the replica''s outbox holds a message after `after` (a relay pass that wrote for it commits), for up to timeout_ms (10 minutes at most); then sync.pull';
REVOKE ALL ON PROCEDURE sync.pull_wait(uuid, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE sync.pull_wait(uuid, bigint, integer) TO PUBLIC;
