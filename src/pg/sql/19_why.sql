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

CREATE FUNCTION sync.why_all(replica uuid)
	RETURNS TABLE (tab regclass, key text, depth int, relation text, from_tab regclass, from_key text)
	LANGUAGE c STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_why_all';
COMMENT ON FUNCTION sync.why_all(uuid) IS
	'sync.why for every row a replica should hold, from one walk of its wanted set (sync.why walks it once per row): each row with the link that first reached it, its relation as sync.why says it and the row one link up its shortest chain (from_tab, from_key; NULL at depth 0, a rule''s row); depth NULL for a wanted row no link reaches';

-- Its inverse, for the operator planning a change (src/pg/read/would_send.c): no SET
-- search_path, the statement is the caller's, in the caller's search_path.
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
