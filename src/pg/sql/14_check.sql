-- Checking declarations and triggers (src/pg/declare/check.c).

CREATE FUNCTION sync.check()
	RETURNS TABLE (tab text, problem text, detail text)
	LANGUAGE c STABLE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_check';
COMMENT ON FUNCTION sync.check() IS
	'One row per problem: a noting trigger missing, disabled, not ENABLE ALWAYS or not as sync.mirror writes it, or a declaration that no longer matches its table; the relay refuses to run while there is any, but a foreign key not indexed (the relay runs, reading the table whole)';
