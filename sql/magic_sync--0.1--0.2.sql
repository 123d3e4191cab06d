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
