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

-- a pass runs in one snapshot: sync.relay_pass() refuses READ COMMITTED,
-- and the wanted sets are read in one snapshot whatever the caller's level
COMMENT ON FUNCTION sync.relay_pass() IS
	'One relay pass in the caller''s transaction, which must be REPEATABLE READ, under the relay lock: observe the replicas, plan every note not done, record the messages and what they carry, NOTIFY magic_sync';
COMMENT ON FUNCTION sync.wanted(uuid) IS
	'The rows a replica should hold, from scratch, in one snapshot: what its tables'' rules send it, closed over the rows they point at and the rows that follow them; (table, canonical key, its parts)';
COMMENT ON FUNCTION sync.wanted_fill(uuid[]) IS
	'Fills pg_temp.ms_wanted (replica, tab, key) with the wanted sets of these replicas (NULL: every live replica), all at once, in one snapshot; returns its row count';

-- sync.mirror looks up a grouped rule's tables in the caller's search_path,
-- then becomes the function's owner with search_path pinned itself
-- (declare/declare.c): no SECURITY DEFINER, no SET clause
ALTER FUNCTION sync.mirror(regclass, text, text, name[], name, name, name[], name[],
		name, name, name[], regclass, name, text, name)
	SECURITY INVOKER RESET search_path;

-- sync.proto(table): the .proto of a table in the proto codec
CREATE FUNCTION sync.proto(tab regclass) RETURNS text
	LANGUAGE c STABLE STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_proto';
COMMENT ON FUNCTION sync.proto(regclass) IS
	'The .proto of a table in the proto codec: one message, the field numbers its declaration fixed, each column typed as it travels';
CREATE FUNCTION sync.proto(name text) RETURNS text
	LANGUAGE c STABLE STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_proto_named';
COMMENT ON FUNCTION sync.proto(text) IS
	'The .proto of a table in the proto codec, by the name replicas know it by (sync.tables.name)';
REVOKE ALL ON FUNCTION sync.proto(regclass), sync.proto(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.proto(regclass), sync.proto(text) TO sync_admin;

-- What a replica says is a claim (src/pg/transport/claim.c, src/pg/epoch.c):
-- generations, the claims refused, sync.pull with what the replica applied,
-- sync.replica_reprovision, and sync.health listing the claims refused
-- Generations (src/pg/epoch.c): the server's lineage.  Every message carries
-- the generation it was written in; a replica never applies one of a
-- generation older than it follows.  Raised with each new epoch, and by a
-- relay pass that finds the server's history changed under its record:
-- another timeline (a standby promoted), cluster or database (a copy
-- restored).  Dumped with the record, so a restored copy sees it moved.
CREATE TABLE sync.generations (
	generation		bigint PRIMARY KEY,			-- when it began, in microseconds since 2000, or one more than the last
	epoch			bytea NOT NULL,				-- the epoch it began in
	timeline		int NOT NULL,				-- the server's timeline then
	system			text NOT NULL,				-- the cluster's system identifier then
	database		oid NOT NULL,				-- the database's oid then
	began			timestamptz NOT NULL DEFAULT now(),
	reason			text NOT NULL
);
COMMENT ON TABLE sync.generations IS 'Generations: the server''s lineage, raised with each epoch and when its timeline, cluster or database changed; messages carry the newest';

-- Claims refused (src/pg/transport/claim.c): what a replica said of itself
-- that the server would not believe (a number beyond its record without a
-- seal that verifies, a seal it never made, a generation newer than its
-- own).  Written out of the refused call's transaction (alarm.c), one row per
-- replica, the last; sync.health lists those of the last hour.  Not dumped:
-- an alarm, not a record.
CREATE TABLE sync.refused_claims (
	replica			uuid PRIMARY KEY,
	claim			text NOT NULL,				-- what was claimed, and through which call
	reason			text NOT NULL,
	sqlstate		text NOT NULL,
	at				timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE sync.refused_claims IS 'The last claim of each replica the server refused, and why';
SELECT pg_catalog.pg_extension_config_dump('sync.generations', '');
REVOKE ALL ON TABLE sync.generations, sync.refused_claims FROM PUBLIC;
GRANT SELECT ON TABLE sync.generations, sync.refused_claims TO sync_admin;
-- An operator's "provision it again" (src/pg/epoch.c): one replica, from
-- scratch, at the next pass; sync.epoch_begin does it for every replica.
CREATE FUNCTION sync.replica_reprovision(id uuid)
	RETURNS void
	LANGUAGE c SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_replica_reprovision';
COMMENT ON FUNCTION sync.replica_reprovision(uuid) IS
	'Has one replica provisioned again from scratch at the relay''s next pass (a snapshot that failed for good is tried again at once); the reason goes into its last_error';
REVOKE ALL ON FUNCTION sync.replica_reprovision(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.replica_reprovision(uuid) TO sync_admin;
-- with what the replica applied (sync_applied() on the replica): its claim,
-- checked (src/pg/transport/claim.c)
CREATE FUNCTION sync.pull(replica uuid, after bigint, max_bytes integer, applied bytea,
	OUT number bigint, OUT message bytea)
	RETURNS SETOF record
	LANGUAGE c VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_pull';
COMMENT ON FUNCTION sync.pull(uuid, bigint, integer, bytea) IS
	'sync.pull with what the replica says it applied (an Applied, as sync_applied() returns it): a claim beyond what the server wrote for it is believed only with a seal that verifies; one before what it acknowledged, 0 included, has it provisioned again';
REVOKE ALL ON FUNCTION sync.pull(uuid, bigint, integer, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.pull(uuid, bigint, integer, bytea) TO sync_admin;
GRANT EXECUTE ON FUNCTION sync.pull(uuid, bigint, integer, bytea) TO PUBLIC;
CREATE OR REPLACE FUNCTION sync.health(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	OUT kind text, OUT waits_on text, OUT replica uuid, OUT tab regclass, OUT key text,
	OUT count bigint, OUT since timestamptz, OUT reason text, OUT sqlstate text,
	OUT now timestamptz)
	RETURNS SETOF record
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET plan_cache_mode = force_generic_plan
	AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
		WITH s AS (
			SELECT r.* FROM sync.live_replicas r
			 WHERE ($1 IS NULL OR r.id = ANY ($1)) AND ($2 IS NULL OR r.partition = $2)),
		items AS (
			-- the relay refuses to run while a declaration or trigger is wrong
			SELECT 'declaration' AS kind, 'a fix' AS waits_on, NULL::uuid AS replica,
			       (SELECT t.relid FROM sync.tables t WHERE t.name = c.tab) AS tab, NULL::text AS key,
			       1::bigint AS count, NULL::timestamptz AS since,
			       format('%s: %s: %s; the relay will not run until sync.mirror or sync.retrigger puts it right',
			              c.tab, c.problem, c.detail) AS reason, NULL::text AS sqlstate
			  FROM sync.check() c
			UNION ALL
			-- changes the relay has not planned yet: it plans them at its next pass
			SELECT 'notes pending', 'infrastructure', NULL, t.relid, NULL, count(*), min(n.noted),
			       'changes not planned yet: the relay plans them at its next pass (waiting long: is it running?)',
			       NULL
			  FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
			 WHERE NOT n.done AND n.parked IS NULL AND n.build <= 1
			 GROUP BY t.relid
			UNION ALL
			SELECT 'notes parked', 'a fix', NULL, t.relid, min(n.key), count(*), min(n.noted), n.parked, NULL
			  FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
			 WHERE NOT n.done AND n.parked IS NOT NULL
			 GROUP BY t.relid, n.parked
			UNION ALL
			SELECT 'notes of a later build', 'a fix', NULL, t.relid, min(n.key), count(*), min(n.noted),
			       format('noted by build %s, which plans them once it is deployed', n.build), NULL
			  FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
			 WHERE NOT n.done AND n.parked IS NULL AND n.build > 1
			 GROUP BY t.relid, n.build
			UNION ALL
			-- rows that cannot go: tried again a minute after, and when they change
			SELECT 'rows quarantined', 'a fix', NULL, t.relid, min(q.key), count(*), min(q.since),
			       q.reason, q.sqlstate
			  FROM sync.quarantine q JOIN sync.tables t ON t.id = q.tab
			 GROUP BY t.relid, q.reason, q.sqlstate
			UNION ALL
			-- rows a replica could not take: sent again once they change
			SELECT 'rows refused', 'a fix', h.replica, t.relid, min(h.key), count(*), NULL, h.refused, NULL
			  FROM s JOIN sync.held h ON h.replica = s.id JOIN sync.tables t ON t.id = h.tab
			 WHERE h.refused IS NOT NULL
			 GROUP BY h.replica, t.relid, h.refused
			UNION ALL
			-- uploads set aside: failed for good (a SQLSTATE), retried by sync.inbox_retry;
			-- or waiting until the replica holds the row again (none)
			SELECT CASE WHEN i.sqlstate IS NULL THEN 'uploads waiting' ELSE 'uploads set aside' END,
			       CASE WHEN i.sqlstate IS NULL THEN 'infrastructure' ELSE 'a fix' END,
			       i.replica, t.relid, min(i.key), count(*), min(i.first_at), i.reason, i.sqlstate
			  FROM s JOIN sync.inbox i ON i.replica = s.id JOIN sync.tables t ON t.id = i.tab
			 GROUP BY i.replica, t.relid, i.reason, i.sqlstate
			UNION ALL
			-- what a replica said that the server would not believe, in the last
			-- hour: refused with the call it came with (src/pg/transport/claim.c)
			SELECT 'claim refused', 'a fix', c.replica, NULL, NULL, 1, c.at, c.claim || ': ' || c.reason, c.sqlstate
			  FROM s JOIN sync.refused_claims c ON c.replica = s.id
			 WHERE c.at > now() - interval '1 hour'
			UNION ALL
			SELECT 'unreachable', 'infrastructure', s.id, NULL, NULL, NULL, coalesce(s.heard_at, s.added),
			       CASE WHEN s.send_failures >= 2
			            THEN format('message %s went out %s times and it applied none of them', s.send_failing, s.send_failures + 1)
			            WHEN s.heard_at IS NULL THEN 'never heard from since it was added'
			            ELSE 'not heard from since its last upload' END,
			       NULL
			  FROM s WHERE s.unreachable
			UNION ALL
			-- a snapshot due or on its way: it goes as the replica takes its messages
			-- (or, set aside when it failed for good, on a fix)
			SELECT 'provisioning',
			       CASE WHEN s.provision AND s.provision_failed_at IS NOT NULL THEN 'a fix' ELSE 'infrastructure' END,
			       s.id, NULL, NULL, NULL,
			       (SELECT o.written FROM sync.outbox o WHERE o.replica = s.id
			           AND o.number = s.snapshot_number AND NOT o.dropped AND NOT s.provision),
			       CASE WHEN s.provision AND s.provision_failed_at IS NOT NULL
			            THEN 'its snapshot failed for good, and is tried again a minute later'
			            WHEN s.provision OR NOT s.seen_live OR s.seen_partition IS DISTINCT FROM s.partition
			            THEN 'a snapshot is due at the next pass'
			            ELSE 'its snapshot is on its way' END
			       || coalesce(' (its last alarm: ' || s.last_error || ')', ''), NULL
			  FROM s WHERE s.provisioning
			UNION ALL
			-- what the replica last said it has not sent or filed (its backlog)
			SELECT 'backlog', 'infrastructure', s.id, t.relid, NULL,
			       (b.value ->> 'unsent')::bigint + (b.value ->> 'unfiled')::bigint, NULL,
			       format('as it said at %s: %s rows written not yet sent, %s sent not yet filed',
			              s.heard_at, b.value ->> 'unsent', b.value ->> 'unfiled'), NULL
			  FROM s CROSS JOIN LATERAL jsonb_each(s.backlog) b
			  LEFT JOIN sync.tables t ON t.name = b.key
			 WHERE (b.value ->> 'unsent')::bigint + (b.value ->> 'unfiled')::bigint > 0
			UNION ALL
			SELECT 'backlog set aside', 'a fix', s.id, t.relid, NULL, (b.value ->> 'set_aside')::bigint, NULL,
			       format('as it said at %s: %s rows it wrote can never go up (too large, or refused for good)',
			              s.heard_at, b.value ->> 'set_aside'), NULL
			  FROM s CROSS JOIN LATERAL jsonb_each(s.backlog) b
			  LEFT JOIN sync.tables t ON t.name = b.key
			 WHERE (b.value ->> 'set_aside')::bigint > 0)
		SELECT i.kind, i.waits_on, i.replica, i.tab, i.key, i.count, i.since, i.reason, i.sqlstate, now()
		  FROM items i
		 ORDER BY i.waits_on = 'infrastructure', i.kind, i.tab::text NULLS FIRST, i.replica NULLS FIRST,
		          i.reason, i.key;
END
$$;
COMMENT ON FUNCTION sync.health(uuid[], text) IS
	'What the engine waits on over the scope, one row per kind, table, replica and reason: declarations the relay will not run with, notes pending and since when, notes parked or of a later build, rows quarantined and refused, uploads set aside and waiting, claims of replicas refused in the last hour, replicas unreachable or provisioning, the replicas'' backlogs; waits_on says whether it waits on the infrastructure (wait) or on a fix (deploy one). Healthy: no row waits on a fix';

-- A fleet (docs/scale.md): an answer is given until the replica's filings
-- show it received (transport/ack.c), also by a hot standby, which marks
-- nothing; sync.settled for an agent run with --once (transport/settled.c)
ALTER TABLE sync.answers ADD COLUMN received timestamptz;
CREATE FUNCTION sync.settled(replica uuid, since pg_snapshot) RETURNS bigint
	LANGUAGE c STABLE STRICT SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_settled';
COMMENT ON FUNCTION sync.settled(uuid, pg_snapshot) IS
	'The last message written for a replica once every note committed before `since` (pg_current_snapshot() then) is planned and no snapshot is due for it: applying through it, the replica holds what was committed before; NULL while the relay has not got there';
REVOKE ALL ON FUNCTION sync.settled(uuid, pg_snapshot) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sync.settled(uuid, pg_snapshot) TO sync_admin;
GRANT EXECUTE ON FUNCTION sync.settled(uuid, pg_snapshot) TO PUBLIC;

-- The fleet's reads run without JIT (src/pg/sql/60_read.sql, docs/scale.md):
-- compiling their plans took seconds at 10,000 replicas
ALTER FUNCTION sync.listing(uuid[], text, sync.state, uuid, integer) SET jit = off;
ALTER FUNCTION sync.overview_tables(uuid[], text) SET jit = off;
ALTER FUNCTION sync.overview_states(uuid[], text, integer) SET jit = off;
ALTER FUNCTION sync.overview(uuid[], text, integer) SET jit = off;
ALTER FUNCTION sync.health(uuid[], text) SET jit = off;
