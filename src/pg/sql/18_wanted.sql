-- The wanted set from scratch (src/pg/wanted.c): the oracle.

CREATE FUNCTION sync.wanted(replica uuid)
	RETURNS TABLE (tab regclass, key text, parts text[])
	LANGUAGE c STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_wanted';
COMMENT ON FUNCTION sync.wanted(uuid) IS
	'The rows a replica should hold, from scratch: what its tables'' rules send it, closed over the rows they point at and the rows that follow them; (table, canonical key, its parts)';
