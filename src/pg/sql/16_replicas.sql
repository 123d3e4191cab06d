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
	'Adds a replica: its partition (one the fleet knows: a value of a mirrored table''s partition column, or one a replica has; any where no table declares a partition column), the role it authenticates as (one the caller may grant), and whether it is live; the relay provisions it at its next pass';

CREATE FUNCTION sync.replica_set(id uuid, live boolean DEFAULT NULL,
		"partition" text DEFAULT NULL, role name DEFAULT NULL)
	RETURNS void
	LANGUAGE c
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_replica_set';
COMMENT ON FUNCTION sync.replica_set(uuid, boolean, text, name) IS
	'Changes whether a replica is live, its partition (one the fleet knows, as sync.replica_add takes), or its role (one the caller may grant); NULL leaves each as it is; the relay observes it at its next pass';

CREATE FUNCTION sync.replica_drop(id uuid)
	RETURNS void
	LANGUAGE c SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_replica_drop';
COMMENT ON FUNCTION sync.replica_drop(uuid) IS
	'Drops a replica: no longer live, and forgotten by the relay at its next pass';

-- An operator's "provision it again" (src/pg/epoch.c): one replica, from
-- scratch, at the next pass; sync.epoch_begin does it for every replica.
CREATE FUNCTION sync.replica_reprovision(id uuid)
	RETURNS void
	LANGUAGE c SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_replica_reprovision';
COMMENT ON FUNCTION sync.replica_reprovision(uuid) IS
	'Has one replica provisioned again from scratch at the relay''s next pass (a snapshot that failed for good is tried again at once); the reason goes into its last_error';
