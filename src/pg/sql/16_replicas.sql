-- The replicas (src/pg/declare/replicas.c).  sync.replicas is written by the
-- extension's owner only; sync_admin calls these.  replica_add and
-- replica_set give a replica a role only if their caller could grant it:
-- they read their caller, then become their owner (src/pg/owner.c), as
-- replica_drop is by SECURITY DEFINER.

CREATE FUNCTION sync.replica_add(id uuid, "partition" text DEFAULT NULL,
		role name DEFAULT NULL, live boolean DEFAULT true)
	RETURNS void
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_replica_add';
COMMENT ON FUNCTION sync.replica_add(uuid, text, name, boolean) IS
	'Adds a replica: its partition, the role it authenticates as (one the caller may grant), and whether it is live; the relay provisions it at its next pass';

CREATE FUNCTION sync.replica_set(id uuid, live boolean DEFAULT NULL,
		"partition" text DEFAULT NULL, role name DEFAULT NULL)
	RETURNS void
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_replica_set';
COMMENT ON FUNCTION sync.replica_set(uuid, boolean, text, name) IS
	'Changes whether a replica is live, its partition, or its role (one the caller may grant; NULL leaves each as it is); the relay observes it at its next pass';

CREATE FUNCTION sync.replica_drop(id uuid)
	RETURNS void
	LANGUAGE c SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_replica_drop';
COMMENT ON FUNCTION sync.replica_drop(uuid) IS
	'Drops a replica: no longer live, and forgotten by the relay at its next pass';
