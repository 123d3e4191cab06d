-- Who may call what (last, so it covers every object above).
-- Roles: sync_admin administers (declaring a table also needs its
-- ownership; giving a replica a role, the right to grant it); sync_relay is
-- what the relay worker's role (magic_sync.role) needs when it is not a
-- superuser: sync_admin's rights and the writing of every sync table -- the
-- mirrored tables it reads as their owners; a replica's own role may call
-- sync.pull and sync.file, each of which checks the uuid it is given
-- against the caller.
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'sync_admin') THEN
		CREATE ROLE sync_admin NOLOGIN;
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'sync_relay') THEN
		CREATE ROLE sync_relay NOLOGIN;
	END IF;
	IF NOT pg_catalog.pg_has_role('sync_relay', 'sync_admin', 'MEMBER') THEN
		GRANT sync_admin TO sync_relay;
	END IF;
END
$$;
GRANT USAGE ON SCHEMA sync TO PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA sync FROM PUBLIC;
GRANT SELECT ON ALL TABLES IN SCHEMA sync TO sync_admin;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA sync FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA sync TO sync_admin;
GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA sync TO sync_relay;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA sync TO sync_relay;
-- Pure functions of their arguments: anyone may compute keys and digests.
-- (An aggregate runs its steps with its owner's rights: they need no grant.)
GRANT EXECUTE ON FUNCTION sync.key(text[]), sync.key_parts(text), sync.key_text(anyelement), sync.digest(text) TO PUBLIC;
-- A replica's role pulls and files for its own uuid (each function checks).
GRANT EXECUTE ON FUNCTION sync.pull(uuid, bigint, integer) TO PUBLIC;
GRANT EXECUTE ON FUNCTION sync.pull(uuid, bigint, integer, bytea) TO PUBLIC;
-- (ALL FUNCTIONS leaves procedures alone)
REVOKE ALL ON PROCEDURE sync.pull_wait(uuid, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE sync.pull_wait(uuid, bigint, integer) TO PUBLIC;
GRANT EXECUTE ON FUNCTION sync.is_transient(text) TO PUBLIC;
GRANT EXECUTE ON FUNCTION sync.file(uuid, bytea, jsonb) TO PUBLIC;
GRANT EXECUTE ON FUNCTION sync.settled(uuid, pg_snapshot) TO PUBLIC;
-- The signing key's private half is the extension's alone (32_signing.sql);
-- the relay's role signs with it; anyone may read the public key a replica pins.
REVOKE SELECT ON sync.signing_key FROM sync_admin;
GRANT SELECT (id, public_key, made) ON sync.signing_key TO sync_admin;
GRANT SELECT ON sync.signing_key TO sync_relay;
GRANT EXECUTE ON FUNCTION sync.signing_key() TO PUBLIC;
