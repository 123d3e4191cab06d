-- How far a replica must apply to hold what was committed before a moment
-- (src/pg/transport/settled.c): what an agent run with --once waits for.

CREATE FUNCTION sync.settled(replica uuid, since pg_snapshot) RETURNS bigint
	LANGUAGE c STABLE STRICT SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_settled';
COMMENT ON FUNCTION sync.settled(uuid, pg_snapshot) IS
	'The last message written for a replica once every note committed before `since` (pg_current_snapshot() then) is planned and no snapshot is due for it: applying through it, the replica holds what was committed before; NULL while the relay has not got there; 0 when no relay runs (nothing to wait for)';
