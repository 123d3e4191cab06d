-- magic_sync: the extension script of the version magic_sync.control names, put
-- together from src/pg/sql/*.sql by make (src/pg/README.md).
\echo Use "CREATE EXTENSION magic_sync" to load this file. \quit

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

-- Every object lives in schema sync (magic_sync.control: schema = sync).
COMMENT ON SCHEMA sync IS 'magic_sync: keeps partial copies of tables on SQLite replicas';
