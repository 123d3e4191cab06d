-- Canonical keys and digests (src/pg/keys.c, src/shared/key.c, digest.c).

CREATE FUNCTION sync.key(parts text[]) RETURNS text
	LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'ms_key';
COMMENT ON FUNCTION sync.key(text[]) IS
	'The canonical key of its parts: for each part, its length in bytes, a colon and its bytes';

CREATE FUNCTION sync.key_parts(key text) RETURNS text[]
	LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'ms_key_parts';
COMMENT ON FUNCTION sync.key_parts(text) IS 'The parts of a canonical key';

CREATE TYPE sync.digest AS (count bigint, fnv text);
COMMENT ON TYPE sync.digest IS
	'What a replica holds of a table: how many rows, and FNV-1a 64 over their sorted canonical keys';

CREATE FUNCTION sync.digest_transfn(internal, text) RETURNS internal
	LANGUAGE c IMMUTABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'ms_digest_transfn';
CREATE FUNCTION sync.digest_finalfn(internal) RETURNS sync.digest
	LANGUAGE c IMMUTABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'ms_digest_finalfn';
CREATE AGGREGATE sync.digest(key text) (
	SFUNC = sync.digest_transfn,
	STYPE = internal,
	FINALFUNC = sync.digest_finalfn
);
COMMENT ON AGGREGATE sync.digest(text) IS
	'The digest of a set of canonical keys, in any order: (count, fnv)';

CREATE FUNCTION sync.key_text(value anyelement) RETURNS text
	LANGUAGE c STABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'ms_key_text_fn';
COMMENT ON FUNCTION sync.key_text(anyelement) IS
	'A value as a key part, whatever the session''s settings: a numeric without trailing zeros, a date or timestamp in ISO 8601, a timestamptz at UTC, a citext lowercase, anything else as its type prints it';
