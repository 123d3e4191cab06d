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
