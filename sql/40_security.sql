-- No one gets in (issue 13): each hole as the attack that worked, run by the
-- roles the project has -- a database owner, a table owner, a sync_admin
-- member, two replica roles -- now refused (42501, or the right code) and
-- nothing changed; the table owner's code (an active view, a domain check,
-- a default, a CHECK, a trigger) runs as that owner, security-restricted,
-- when the relay reads its table or a replica files a row of it.  In a
-- database of its own, owned by its owner.
SET client_min_messages = warning;
CREATE ROLE regress_dbowner LOGIN PASSWORD 'dbowner-secret';
CREATE ROLE regress_tabowner LOGIN PASSWORD 'tabowner-secret' IN ROLE sync_admin;
CREATE ROLE regress_admin LOGIN PASSWORD 'admin-secret' IN ROLE sync_admin;
CREATE ROLE regress_store1 LOGIN PASSWORD 'store1-secret';
CREATE ROLE regress_store2 LOGIN PASSWORD 'store2-secret';
CREATE DATABASE contrib_regression_security OWNER regress_dbowner;
\c contrib_regression_security
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;
\set s1 '''11111111-1111-4111-8111-111111111111'''
\set s2 '''22222222-2222-4222-8222-222222222222'''
\set s3 '''33333333-3333-4333-8333-333333333333'''

-- The table owner's tables, and code of its own that says as whom it ran and
-- tries what only a superuser or an unrestricted session may do.
CREATE SCHEMA app AUTHORIZATION regress_tabowner;
SET ROLE regress_tabowner;
GRANT USAGE ON SCHEMA app TO PUBLIC;
CREATE TABLE app.ran (what text, who name, super boolean, temp text);
CREATE TABLE app.fail ();
CREATE FUNCTION app.ran(what text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	temp text := 'made';
	super boolean;
BEGIN
	-- a security-restricted operation refuses temporary objects
	BEGIN
		EXECUTE 'CREATE TEMP TABLE ' || quote_ident('scratch_' || md5(random()::text)) || ' (x int)';
	EXCEPTION WHEN insufficient_privilege THEN
		temp := 'refused';
	END;
	super := (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user);
	INSERT INTO app.ran VALUES (what, current_user, super, temp);
	-- the attack: run as a superuser, the owner makes itself one
	IF super THEN
		ALTER ROLE regress_tabowner SUPERUSER;
	END IF;
	IF what = 'trigger boom' THEN
		RAISE EXCEPTION 'the owner''s trigger refuses this row';
	END IF;
	-- a failure of the infrastructure's kind fails the whole pass
	IF what = 'active view' AND EXISTS (SELECT FROM app.fail) THEN
		RAISE EXCEPTION 'the owner''s view fails' USING ERRCODE = 'serialization_failure';
	END IF;
	RETURN true;
END $$;
-- a catalog read through an active view, keyed by a domain with a check
CREATE DOMAIN app.code AS int CHECK (app.ran('domain check'));
CREATE TABLE app.parts (id app.code PRIMARY KEY, name text NOT NULL);
CREATE VIEW app.parts_active AS SELECT id FROM app.parts WHERE app.ran('active view');
-- a record filed by replicas: a default, a CHECK and a trigger of the owner's
CREATE TABLE app.visits (store uuid, id int, note text NOT NULL,
	stamp boolean DEFAULT app.ran('default'), CHECK (app.ran('check')),
	PRIMARY KEY (store, id));
CREATE FUNCTION app.visit_noted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM app.ran('trigger ' || NEW.note);
	RETURN NEW;
END $$;
CREATE TRIGGER visit_noted BEFORE INSERT ON app.visits FOR EACH ROW EXECUTE FUNCTION app.visit_noted();
INSERT INTO app.parts VALUES (1, 'bolt'), (2, 'nut');
SELECT sync.mirror('app.parts', 'catalog', 'broadcast', active => 'app.parts_active');
SELECT sync.mirror('app.visits', 'record', origin => 'store', unmirrored => '{stamp}');
RESET ROLE;
TRUNCATE app.ran;

-- A table nobody but its owner (the superuser) may read or write.
CREATE SCHEMA secret;
CREATE TABLE secret.payroll (store uuid, id int, salary int NOT NULL, PRIMARY KEY (store, id));
INSERT INTO secret.payroll VALUES (:s1, 1, 100000);
GRANT USAGE ON SCHEMA secret TO PUBLIC;

-- Uploads as a replica makes them (docs/protocol.md, section 7), by hand.
CREATE SCHEMA t;
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/wire.sql
-- an Up of replica r with these rows [{table, key, row}], acknowledging
-- nothing, numbered (field 11) above every send before it, as a replica
-- numbers its sends
CREATE SEQUENCE t.send_seq;
CREATE FUNCTION t.up(r uuid, rows jsonb) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
	m bytea;
	x jsonb;
BEGIN
	m := wire.pb_int(1, 1) || wire.pb_bytes(2, uuid_send(r)) || wire.pb_bytes(3, decode(md5(random()::text), 'hex'));
	FOR x IN SELECT * FROM jsonb_array_elements(rows) LOOP
		m := m || wire.pb_bytes(5, wire.pb_text(1, x ->> 'table')
		                        || wire.pb_bytes(2, convert_to((x -> 'row')::text, 'UTF8'))
		                        || wire.pb_key(3, x -> 'key'));
	END LOOP;
	RETURN wire.framed(m || wire.pb_int(11, nextval('t.send_seq')));
END $$;
-- Everything an attack could change: every sync.* table and sequence, the
-- user tables, the noting triggers, who is a superuser.  Equal before and
-- after an attack that was refused.
CREATE FUNCTION t.snapshot() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r record;
	v text;
	s text := '';
BEGIN
	FOR r IN SELECT c.oid::regclass AS rel, c.relkind FROM pg_class c
	          WHERE c.relnamespace IN ('sync'::regnamespace, 'app'::regnamespace, 'secret'::regnamespace)
	            AND c.relkind IN ('r', 'S')
	          ORDER BY c.oid::regclass::text LOOP
		IF r.relkind = 'S' THEN
			EXECUTE format('SELECT last_value || '' '' || is_called FROM %s', r.rel) INTO v;
		ELSE
			EXECUTE format('SELECT md5(coalesce(string_agg(x::text, '','' ORDER BY x::text), '''')) FROM %s x',
			               r.rel) INTO v;
		END IF;
		s := s || r.rel || '=' || v || ';';
	END LOOP;
	SELECT s || string_agg(g.tgrelid::regclass || '.' || g.tgname || g.tgenabled::text, ',' ORDER BY 1) INTO s
	  FROM pg_trigger g WHERE g.tgname LIKE 'magic_sync%';
	SELECT s || string_agg(a.rolname || a.rolsuper::text, ',' ORDER BY 1) INTO s
	  FROM pg_roles a WHERE a.rolname LIKE 'regress%';
	RETURN md5(s);
END $$;
-- who ran the owner's code, whether a superuser, whether it could make a
-- temporary table (how often it ran is the planner's)
CREATE VIEW t.ran AS
	SELECT DISTINCT what, who, super, temp FROM app.ran ORDER BY 1, 2, 3, 4;
CREATE VIEW t.supers AS
	SELECT rolname, rolsuper FROM pg_roles WHERE rolname LIKE 'regress%' ORDER BY 1;

-- 13.5: sync_admin reads and writes tables it has no rights on.  A member of
-- sync_admin that owns no table mirrored one it cannot read (to pull its rows
-- to a replica of its own), took back another's declaration, and gave
-- replicas roles it has no right to grant.  Each is refused, changing nothing.
SELECT sync.replica_add(:s1, role => 'regress_store1');
SELECT sync.replica_add(:s2, role => 'regress_store2');
SELECT t.snapshot() AS before \gset
SET ROLE regress_admin;
SELECT sync.mirror('secret.payroll', 'record', origin => 'store');
SELECT sync.mirror('app.parts', 'catalog', 'broadcast');
SELECT sync.unmirror('app.visits');
SELECT sync.retrigger('app.parts');
SELECT sync.replica_add(:s3, role => 'regress_store1');
SELECT sync.replica_set(:s2, role => 'regress_admin');
SELECT sync.replica_set(:s1, role => 'regress_store2');
RESET ROLE;
SELECT t.snapshot() = :'before' AS nothing_changed;
SELECT id, name, mirror, sync, active FROM sync.mirrors ORDER BY id;
-- ... what it may: a replica without a role, and one whose role it may grant
SET ROLE regress_admin;
SELECT sync.replica_add(:s3);
RESET ROLE;
GRANT regress_store2 TO regress_admin WITH ADMIN OPTION;
SET ROLE regress_admin;
SELECT sync.replica_set(:s3, role => 'regress_store2');
RESET ROLE;
SELECT id, role FROM sync.replicas ORDER BY id;
SELECT sync.replica_drop(:s3);
REVOKE regress_store2 FROM regress_admin;
-- the table owner itself may take its declaration back and make it again
SET ROLE regress_tabowner;
SELECT sync.retrigger('app.parts');
RESET ROLE;

-- 13.3: the relay runs the owner's code (its active view, its key's domain
-- check) as the owner, security-restricted -- never as the superuser that
-- runs the pass -- and the owner did not become a superuser.
SELECT notes_read, provisioned, rows_sent FROM sync.relay_pass();
SELECT * FROM t.ran;
SELECT * FROM t.supers;
SELECT count(*) AS parts_held FROM sync.held h JOIN sync.tables t ON t.id = h.tab WHERE t.name = 'app.parts';
-- an error in the owner's code fails the pass, and the caller is itself again
UPDATE app.parts SET name = 'bolt!' WHERE id = 1;
INSERT INTO app.fail DEFAULT VALUES;
DO $$
BEGIN
	PERFORM sync.relay_pass();
EXCEPTION WHEN serialization_failure THEN
	RAISE WARNING 'the pass failed: %', SQLERRM;
END $$;
SELECT current_user = session_user AS caller_again, current_setting('search_path') AS search_path;
DELETE FROM app.fail;
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT * FROM t.ran;
TRUNCATE app.ran;

-- 13.4: a replica files rows of the owner's record: its default, CHECK and
-- trigger run as the owner, security-restricted, never as sync.file's owner;
-- a row the owner's trigger refuses is set aside, and the rows after it are
-- filed as the owner too.
SELECT t.up(:s1, jsonb_build_array(
	jsonb_build_object('table', 'app.visits', 'key', jsonb_build_array(:s1, '1'),
	                   'row', jsonb_build_object('store', :s1, 'id', 1, 'note', 'hello')),
	jsonb_build_object('table', 'app.visits', 'key', jsonb_build_array(:s1, '2'),
	                   'row', jsonb_build_object('store', :s1, 'id', 2, 'note', 'boom')),
	jsonb_build_object('table', 'app.visits', 'key', jsonb_build_array(:s1, '3'),
	                   'row', jsonb_build_object('store', :s1, 'id', 3, 'note', 'again')))) AS up \gset
SET ROLE regress_store1;
SELECT f ->> 'filed' AS filed, f ->> 'set_aside' AS set_aside, f ->> 'refused' AS refused
  FROM sync.file(:s1, :'up') f;
SELECT current_user AS caller_again;
RESET ROLE;
SELECT * FROM t.ran;
SELECT * FROM t.supers;
SELECT store, id, note, stamp FROM app.visits ORDER BY id;
SELECT key, reason, sqlstate FROM sync.inbox ORDER BY key;
TRUNCATE app.ran;

-- 13.5 again: with a declaration of its own refused, sync_admin cannot write
-- a table it may not write through sync.file either.
SELECT t.up(:s2, jsonb_build_array(jsonb_build_object('table', 'secret.payroll',
	'key', jsonb_build_array(:s2, '1'), 'row', jsonb_build_object('store', :s2, 'id', 1, 'salary', 1))))
	AS up2 \gset
SET ROLE regress_admin;
SELECT f ->> 'filed' AS filed, f ->> 'refused' AS refused FROM sync.file(:s2, :'up2') f;
RESET ROLE;
SELECT * FROM secret.payroll ORDER BY store, id;

-- A replica's role acts for its own uuid only.
SELECT t.snapshot() AS before \gset
SET ROLE regress_store2;
SELECT sync.file(:s1, :'up');
SELECT count(*) FROM sync.pull(:s1, 0);
SELECT sync.replica_add(:s3);
SELECT * FROM sync.check();
RESET ROLE;
SELECT t.snapshot() = :'before' AS nothing_changed;

-- A hostile search_path (in the style of pg_partman's test_no_search_path):
-- a schema earlier in the path shadows the operators and functions the
-- extension's SQL uses, each recording that it was called.  None is, by
-- sync.pull, sync.file, the relay, or any SECURITY DEFINER function.
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE TABLE evil.calls (fn text, who name);
GRANT INSERT ON evil.calls TO PUBLIC;
CREATE FUNCTION evil.called(fn text) RETURNS void LANGUAGE sql AS
	'INSERT INTO evil.calls VALUES (fn, current_user)';
DO $$
DECLARE
	ty text;
BEGIN
	FOREACH ty IN ARRAY ARRAY['integer', 'bigint', 'smallint', 'text', 'uuid', 'bytea', 'name',
	                          'boolean', 'jsonb', 'oid', 'timestamptz', '"char"'] LOOP
		EXECUTE format('CREATE FUNCTION evil.eq(a %1$s, b %1$s) RETURNS boolean LANGUAGE plpgsql AS '
		               '$f$BEGIN PERFORM evil.called(''= %1$s''); RETURN a OPERATOR(pg_catalog.=) b; END$f$', ty);
		EXECUTE format('CREATE OPERATOR evil.= (LEFTARG = %1$s, RIGHTARG = %1$s, FUNCTION = evil.eq)', ty);
		EXECUTE format('CREATE FUNCTION evil.lt(a %1$s, b %1$s) RETURNS boolean LANGUAGE plpgsql AS '
		               '$f$BEGIN PERFORM evil.called(''< %1$s''); RETURN a OPERATOR(pg_catalog.<) b; END$f$', ty);
		EXECUTE format('CREATE OPERATOR evil.< (LEFTARG = %1$s, RIGHTARG = %1$s, FUNCTION = evil.lt)', ty);
		EXECUTE format('CREATE FUNCTION evil.gt(a %1$s, b %1$s) RETURNS boolean LANGUAGE plpgsql AS '
		               '$f$BEGIN PERFORM evil.called(''> %1$s''); RETURN a OPERATOR(pg_catalog.>) b; END$f$', ty);
		EXECUTE format('CREATE OPERATOR evil.> (LEFTARG = %1$s, RIGHTARG = %1$s, FUNCTION = evil.gt)', ty);
	END LOOP;
END $$;
CREATE FUNCTION evil.cat(a text, b text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('|| text'); RETURN a OPERATOR(pg_catalog.||) b; END$$;
CREATE OPERATOR evil.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.cat);
CREATE FUNCTION evil.cat(a bytea, b bytea) RETURNS bytea LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('|| bytea'); RETURN a OPERATOR(pg_catalog.||) b; END$$;
CREATE OPERATOR evil.|| (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = evil.cat);
CREATE FUNCTION evil.cat(a jsonb, b jsonb) RETURNS jsonb LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('|| jsonb'); RETURN a OPERATOR(pg_catalog.||) b; END$$;
CREATE OPERATOR evil.|| (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = evil.cat);
CREATE FUNCTION evil.lower(s text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('lower'); RETURN pg_catalog.lower(s); END$$;
CREATE FUNCTION evil.upper(s text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('upper'); RETURN pg_catalog.upper(s); END$$;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('now'); RETURN pg_catalog.now(); END$$;
CREATE FUNCTION evil.format(f text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('format'); RETURN pg_catalog.format(f); END$$;
CREATE FUNCTION evil.format(f text, a text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('format'); RETURN pg_catalog.format(f, a); END$$;
CREATE FUNCTION evil.length(s text) RETURNS integer LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('length'); RETURN pg_catalog.length(s); END$$;
CREATE FUNCTION evil.octet_length(s text) RETURNS integer LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('octet_length'); RETURN pg_catalog.octet_length(s); END$$;
CREATE FUNCTION evil.md5(s text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('md5'); RETURN pg_catalog.md5(s); END$$;
CREATE FUNCTION evil.jsonb_typeof(j jsonb) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('jsonb_typeof'); RETURN pg_catalog.jsonb_typeof(j); END$$;
CREATE FUNCTION evil.array_length(a anyarray, d integer) RETURNS integer LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('array_length'); RETURN pg_catalog.array_length(a, d); END$$;
CREATE FUNCTION evil.cardinality(a anyarray) RETURNS integer LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('cardinality'); RETURN pg_catalog.cardinality(a); END$$;
CREATE FUNCTION evil.current_database() RETURNS name LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('current_database'); RETURN pg_catalog.current_database(); END$$;
CREATE FUNCTION evil.set_config(n text, v text, l boolean) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('set_config'); RETURN pg_catalog.set_config(n, v, l); END$$;
CREATE FUNCTION evil.current_setting(n text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('current_setting'); RETURN pg_catalog.current_setting(n); END$$;
-- uploads made first: building them uses what evil shadows
UPDATE app.parts SET name = 'bolt?' WHERE id = 2;
SELECT t.up(:s1, jsonb_build_array(
	jsonb_build_object('table', 'app.visits', 'key', jsonb_build_array(:s1, '4'),
	                   'row', jsonb_build_object('store', :s1, 'id', 4, 'note', 'evil')))) AS up \gset
SELECT t.up(:s2, '[]') AS up2 \gset
SET search_path = evil, pg_catalog, public;
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT count(*) > 0 AS pulled FROM sync.pull(:s1, 0);
SELECT sync.file(:s1, :'up') ->> 'filed' AS filed;
SET ROLE regress_store1;
SELECT count(*) > 0 AS pulled FROM sync.pull(:s1, 0);
SELECT count(*) > 0 AS pulled FROM sync.pull(:s1, 0, 1048576, NULL);
SELECT sync.file(:s1, :'up') AS again;
RESET ROLE;
SET ROLE regress_store2;
SELECT sync.file(:s2, :'up2') ->> 'filed' AS filed;
RESET ROLE;
SET ROLE regress_tabowner;
SELECT sync.retrigger('app.parts');
RESET ROLE;
SELECT sync.replica_add(:s3, 'north');
SELECT sync.replica_set(:s3, "partition" => 'south');
SELECT sync.replica_reprovision(:s3);
SELECT sync.replica_drop(:s3);
SELECT count(*) FROM sync.check();
SELECT count(*) FROM sync.wanted(:s1);
SELECT count(*) FROM sync.progress(ARRAY[:s1]::uuid[]);
SELECT count(*) FROM sync.row_progress('app.parts', '{1}');
SELECT sync.overview() ? 'states' AS overview;
SELECT count(*) >= 0 AS health FROM sync.health();
SELECT count(*) >= 0 AS inbox FROM (SELECT sync.inbox_retry()) i;
SELECT (sync.prune()).notes >= 0 AS pruned;
SELECT sync.unmirror('app.visits');
SELECT sync.inspect(message) ? 'down' AS inspected FROM sync.pull(:s1, 0) LIMIT 1;
RESET search_path;
SELECT fn, who, count(*) FROM evil.calls GROUP BY 1, 2 ORDER BY 1, 2;
-- the reads (sync.wanted, progress, row_progress) a superuser made ran the
-- owner's code as the owner too
SELECT * FROM t.ran;
SELECT * FROM t.supers;

-- sync.replica_add and sync.replica_set read the partition column of every
-- table that declares one, to know the partitions: as the table's owner,
-- whose cast of the column's type to text is code of its own
SET ROLE regress_tabowner;
CREATE TYPE app.zone AS (name text);
CREATE FUNCTION app.zone_text(z app.zone) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM app.ran('partition cast');
	RETURN z.name;
END $$;
CREATE CAST (app.zone AS text) WITH FUNCTION app.zone_text(app.zone);
CREATE TABLE app.zones (id int PRIMARY KEY, zone app.zone);
INSERT INTO app.zones VALUES (1, ROW('north'));
SELECT sync.mirror('app.zones', 'catalog', 'broadcast', "partition" => 'zone');
RESET ROLE;
-- declaring notes the rows it has, reading their partitions as their owner
SELECT DISTINCT what, who, super, temp FROM app.ran ORDER BY 1;
TRUNCATE app.ran;
-- so does a migration whose rows go again (an event trigger, run as the
-- extension's owner): the owner's cast still runs as the owner
SET ROLE regress_tabowner;
ALTER TABLE app.zones ADD COLUMN seen float8 DEFAULT random();
RESET ROLE;
SELECT DISTINCT what, who, super, temp FROM app.ran ORDER BY 1;
SELECT rolsuper AS tabowner_became_superuser FROM pg_roles WHERE rolname = 'regress_tabowner';
TRUNCATE app.ran;
SELECT sync.replica_add('44444444-4444-4444-8444-444444444444', 'north');
SELECT sync.replica_set('44444444-4444-4444-8444-444444444444', "partition" => 'nrth');
SELECT DISTINCT what, who, super, temp FROM app.ran ORDER BY 1;

-- a snapshot reads a table a replica wants whole (magic_sync.whole_tables)
-- as its owner too: the owner's cast of a column's type to json runs as the
-- owner, security-restricted
SET ROLE regress_tabowner;
CREATE TYPE app.grade AS ENUM ('good', 'fair');
CREATE FUNCTION app.grade_json(g app.grade) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
	PERFORM app.ran('json cast');
	RETURN to_json(g::text);
END $$;
CREATE CAST (app.grade AS json) WITH FUNCTION app.grade_json(app.grade);
CREATE TABLE app.grades (id int PRIMARY KEY, grade app.grade);
INSERT INTO app.grades VALUES (1, 'good'), (2, 'fair');
SELECT sync.mirror('app.grades', 'catalog', 'broadcast');
RESET ROLE;
-- (the replicas there are take the new table's rows through the plan first)
SELECT count(*) > 0 AS relayed FROM sync.relay_pass();
TRUNCATE app.ran;
SELECT sync.replica_add('55555555-5555-4555-8555-555555555555');
SELECT provisioned FROM sync.relay_pass();
SELECT DISTINCT what, who, super, temp FROM app.ran WHERE what = 'json cast' ORDER BY 1;
SELECT count(*) AS grades_held FROM sync.held h JOIN sync.tables t ON t.id = h.tab
 WHERE h.replica = '55555555-5555-4555-8555-555555555555' AND t.name = 'app.grades';
SELECT rolsuper AS tabowner_became_superuser FROM pg_roles WHERE rolname = 'regress_tabowner';

\c contrib_regression
DROP DATABASE contrib_regression_security;
DROP ROLE regress_dbowner, regress_tabowner, regress_admin, regress_store1, regress_store2;
