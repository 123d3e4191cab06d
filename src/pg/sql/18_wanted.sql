-- The wanted set from scratch (src/pg/relay/wanted.c): the oracle.

CREATE FUNCTION sync.wanted(replica uuid)
	RETURNS TABLE (tab regclass, key text, parts text[])
	LANGUAGE c STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_wanted';
COMMENT ON FUNCTION sync.wanted(uuid) IS
	'The rows a replica should hold, from scratch, in one snapshot: what its tables'' rules send it, closed over the rows they point at and the rows that follow them; (table, canonical key, its parts)';

CREATE FUNCTION sync.wanted_fill(replicas uuid[] DEFAULT NULL)
	RETURNS bigint
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_wanted_fill_sql';
COMMENT ON FUNCTION sync.wanted_fill(uuid[]) IS
	'Fills pg_temp.ms_wanted (replica, tab, key) with the wanted sets of these replicas (NULL: every live replica), all at once, in one snapshot; returns its row count';
