-- The extension owns its schema (issue 38).  A database owner (no superuser)
-- who made schema sync before a superuser's CREATE EXTENSION had the
-- extension installed into a schema it owned: the install script drew
-- note ids with its sync.nextval(text), and it could rename the schema and
-- put a sync of its own in its place, which the definer functions and the
-- relay then used.  Now: the squat is refused, by CREATE EXTENSION and by an
-- update of 0.1 installed there; the swap is refused; and no function of the
-- owner's -- in the squatted schema, or on a search_path it set for its
-- database -- ever runs.  In a database of its own, owned by that owner.
SET client_min_messages = warning;
CREATE ROLE regress_squatter LOGIN PASSWORD 'squatter-secret';
CREATE DATABASE contrib_regression_squat OWNER regress_squatter;
\c contrib_regression_squat
SET client_min_messages = warning;
\set SHOW_CONTEXT never

-- The owner's trojans: each says, should it ever run, what it is and as whom.
-- In public, ahead of pg_catalog on the search_path it sets for its database,
-- the very names the extension calls.
SET ROLE regress_squatter;
CREATE FUNCTION public.trojan(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	RAISE WARNING 'trojan % ran as %', what, current_user;
	RETURN true;
END $$;
CREATE FUNCTION public.nextval(regclass) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trojan('public.nextval(regclass)'); RETURN 1; END $$;
CREATE FUNCTION public.nextval(text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trojan('public.nextval(text)'); RETURN 1; END $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trojan('public.now()'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION public.pg_current_xact_id() RETURNS xid8 LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trojan('public.pg_current_xact_id()'); RETURN pg_catalog.pg_current_xact_id(); END $$;
-- and = on oids and on text, which every catalog query compares with
CREATE FUNCTION public.oideq(oid, oid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trojan('public.=(oid, oid)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = public.oideq);
CREATE FUNCTION public.texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trojan('public.=(text, text)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.texteq);
ALTER DATABASE contrib_regression_squat SET search_path = public, pg_catalog;

-- The squat: sync, made before CREATE EXTENSION, with a nextval(text) in it
CREATE SCHEMA sync;
CREATE FUNCTION sync.nextval(text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trojan('sync.nextval(text)'); RETURN 1; END $$;
RESET ROLE;
\c contrib_regression_squat
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SHOW search_path;
CREATE EXTENSION magic_sync;
-- as a superuser, take it: still refused, for what it holds
ALTER SCHEMA sync OWNER TO CURRENT_USER;
CREATE EXTENSION magic_sync;
-- and for who may create in it
DROP FUNCTION sync.nextval(text);
GRANT CREATE ON SCHEMA sync TO regress_squatter;
CREATE EXTENSION magic_sync;
REVOKE CREATE ON SCHEMA sync FROM regress_squatter;
ALTER SCHEMA sync OWNER TO regress_squatter;

-- 0.1 (its script is frozen, unguarded) installed in the squatted schema: its
-- note ids are the owner's nextval.  Updating it is refused.
SET ROLE regress_squatter;
CREATE FUNCTION sync.nextval(text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN PERFORM public.trojan('sync.nextval(text)'); RETURN 1; END $$;
RESET ROLE;
CREATE EXTENSION magic_sync VERSION '0.1';
SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid) AS note_id_default
  FROM pg_catalog.pg_attrdef d
 WHERE d.adrelid OPERATOR(pg_catalog.=) 'sync.notes'::regclass AND d.adnum OPERATOR(pg_catalog.=) 1;
ALTER EXTENSION magic_sync UPDATE;
-- the swap: the owner renames it and puts a sync of its own in its place
SET ROLE regress_squatter;
ALTER SCHEMA sync RENAME TO sync_theirs;
CREATE SCHEMA sync;
RESET ROLE;
ALTER EXTENSION magic_sync UPDATE;
SELECT e.extversion, n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n
    ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
 WHERE e.extname OPERATOR(pg_catalog.=) 'magic_sync';
DROP EXTENSION magic_sync;
DROP SCHEMA sync_theirs, sync CASCADE;

-- CREATE EXTENSION makes the schema: the superuser's, and no trojan runs,
-- the owner's search_path notwithstanding
CREATE EXTENSION magic_sync;
SELECT r.rolsuper AS owned_by_a_superuser, n.nspacl
  FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
 WHERE n.nspname OPERATOR(pg_catalog.=) 'sync';
SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid) AS note_id_default
  FROM pg_catalog.pg_attrdef d
 WHERE d.adrelid OPERATOR(pg_catalog.=) 'sync.notes'::regclass AND d.adnum OPERATOR(pg_catalog.=) 1;
-- a second CREATE EXTENSION, after a DROP, finds the superuser's schema empty
DROP EXTENSION magic_sync;
CREATE EXTENSION magic_sync;

-- The swap, now: the owner may not rename the schema, take it, drop it,
-- create in it, or make another
SET ROLE regress_squatter;
ALTER SCHEMA sync RENAME TO sync_theirs;
ALTER SCHEMA sync OWNER TO regress_squatter;
DROP SCHEMA sync CASCADE;
CREATE FUNCTION sync.nextval(text) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
CREATE SCHEMA sync;
RESET ROLE;

-- Every function of the extension pins search_path, but those in C that run
-- no SQL through the caller's (sync.mirror and the DDL event triggers pin it
-- themselves; the noting trigger writes without SQL; keys and digests run none),
-- and sync.would_send, whose statement is the caller's, in the caller's (it pins
-- it for its own), and its JSON face, which names everything qualified; and
-- sync.pull_wait, a procedure that commits (a SET would forbid it) and runs no SQL
SELECT p.oid::regprocedure AS search_path_not_pinned
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace OPERATOR(pg_catalog.=) 'sync'::regnamespace AND p.prokind OPERATOR(pg_catalog.<>) 'a'
   AND NOT 'search_path=pg_catalog, pg_temp' OPERATOR(pg_catalog.=) ANY (coalesce(p.proconfig, '{}'))
 ORDER BY p.oid::regprocedure::text COLLATE "C";

-- The extension at work under the owner's search_path: its table declared,
-- written, relayed, pulled, read.  No trojan runs.
GRANT sync_admin TO regress_squatter;
SET ROLE regress_squatter;
CREATE TABLE public.items (id int PRIMARY KEY, name text NOT NULL);
SELECT sync.mirror('items', 'catalog', 'broadcast');
INSERT INTO public.items VALUES (1, 'one'), (2, 'two');
UPDATE public.items SET name = 'zwei' WHERE id OPERATOR(pg_catalog.=) 2;
RESET ROLE;
-- each note numbered by the extension's sequence
SELECT pg_catalog.count(DISTINCT n.id) AS notes FROM sync.notes n;
SELECT sync.replica_add('5a5a5a5a-0000-4000-8000-000000000001');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT provisioned, messages > 0 AS wrote FROM sync.relay_pass();
COMMIT;
SELECT pg_catalog.count(*) > 0 AS pulled FROM sync.pull('5a5a5a5a-0000-4000-8000-000000000001', 0);
SELECT pg_catalog.jsonb_typeof(sync.overview()) AS overview;
SELECT pg_catalog.count(*) >= 0 AS health_read FROM sync.health();
-- DDL, the superuser's too, fires the extension's event triggers: they
-- read what the command did with search_path pinned
CREATE TABLE public.scratch (id int);
ALTER TABLE public.items ADD COLUMN note text;
DROP TABLE public.scratch;
SET ROLE regress_squatter;
ALTER TABLE public.items DROP COLUMN note;
RESET ROLE;

\c contrib_regression
DROP DATABASE contrib_regression_squat;
DROP ROLE regress_squatter;
