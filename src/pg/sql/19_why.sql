-- Why a replica holds, should hold, or is letting go of a row (src/pg/read/why.c).

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
