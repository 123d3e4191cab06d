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

-- Every argument of sync.mirror named in its comment (PostgreSQL has no
-- comment per argument), and a comment on every catalog table (issue 17)
COMMENT ON FUNCTION sync.mirror(regclass, text, text, name[], name, name, name[], name[],
		name, name, name[], regclass, name, text, name) IS
	'Declares a mirrored table and installs its noting triggers. Its arguments (docs/design.md 3): '
	'tab, the table; '
	'mirror, catalog (written on the server, held by replicas) or record (written by replicas, keyed by the replica); '
	'sync, which replicas hold which rows: broadcast, assigned(col), grouped(members => t, assigned => u), follows(col), or NULL (the row travels only as a parent of a row a replica holds); '
	'key, the columns that name a row (default: the primary key); '
	'origin, a record''s uuid column naming the replica that wrote it, in its key; '
	'version, a record''s column whose greater value wins when an upload is filed (without one a record is kept as first filed); '
	'replica_owned, a catalog''s columns the replicas write and send up (a two-way table); '
	'unmirrored, columns that never travel; '
	'retired, the column a replica''s copy of the table gets (no column of the table on the server) and sets when it keeps a row it was told to let go of because a row of its own points at it; '
	'created, a record''s timestamp column the server sets to now() when it first files the row, never taken from an upload; '
	'generated, columns the server fills itself when it files an upload (a default, a sequence, a generated column), never taken from an upload; '
	'active, a view of the table: rows outside it are not wanted; '
	'partition, the column naming a row''s partition: a broadcast row goes to the replicas of its partition; '
	'codec, json (an object of columns) or proto (a protobuf message per row, its field numbers fixed per column: sync.proto); '
	'sender, a jsonb column stamped with the sender sync.file was given when it filed the row';

COMMENT ON TABLE sync.bodies IS 'Message bodies, each stored once however many replicas'' messages carry it (by its SHA-256)';
COMMENT ON TABLE sync.answers IS 'The answer (a Filed message) to each upload filed, returned by sync.pull before the outbox; kept an hour after it was pulled, for a send that comes again';
COMMENT ON TABLE sync.inbox IS 'Uploaded rows set aside: they failed for good (a SQLSTATE: filed again by sync.inbox_retry after a fix) or wait until the replica holds the row again (none)';
COMMENT ON TABLE sync.quarantine IS 'Rows that cannot go to replicas (they do not encode, or no message can carry them): planned around, tried again a minute later, when they change, or on sync.quarantine_retry';

-- sync.replica_add and sync.replica_set refuse a partition the fleet does not know
COMMENT ON FUNCTION sync.replica_set(uuid, boolean, text) IS
	'Changes whether a replica is live, or its partition (one the fleet knows, as sync.replica_add takes); NULL leaves either as it is; the relay observes it at its next pass';
COMMENT ON FUNCTION sync.replica_add(uuid, text, name, boolean) IS
	'Adds a replica: its partition (one the fleet knows: a value of a mirrored table''s partition column, or one a replica has; any where no table declares a partition column), the role it authenticates as, and whether it is live; the relay provisions it at its next pass';

-- The states are named in snake_case, as every JSON key is (sync.overview's
-- "states" are keyed by them): sync.listing(state => 'on_its_way').  The
-- views and functions that name a state in their text are made again: a
-- CASE's text cast to sync.state, and plpgsql bodies, keep the old labels
ALTER TYPE sync.state RENAME VALUE 'caught up' TO 'caught_up';
ALTER TYPE sync.state RENAME VALUE 'on its way' TO 'on_its_way';
ALTER TYPE sync.state RENAME VALUE 'set aside' TO 'set_aside';
COMMENT ON TYPE sync.state IS
	'A replica''s state, in order of severity: caught_up, on_its_way, behind, provisioning, set_aside, unreachable (sync.overview, sync.listing)';
CREATE OR REPLACE VIEW sync.replica_states AS
	-- each read once, however the plan joins them
	WITH fleet AS MATERIALIZED (
		SELECT coalesce(sum(f.notes_pending), 0) > 0 AS behind, min(f.pending_since) AS behind_since,
		       coalesce(sum(f.notes_parked + f.notes_later + f.quarantined), 0) > 0 AS aside,
		       min(f.aside_since) AS aside_since
		  FROM sync.fleet_tables f),
	-- rows set aside are few: read once, all of them
	rf AS MATERIALIZED (
		SELECT h.replica, count(*) AS n FROM sync.held h WHERE h.refused IS NOT NULL GROUP BY h.replica),
	i AS MATERIALIZED (
		SELECT i.replica, count(*) FILTER (WHERE i.sqlstate IS NOT NULL) AS set_aside,
		       count(*) FILTER (WHERE i.sqlstate IS NULL) AS waiting,
		       min(i.first_at) FILTER (WHERE i.sqlstate IS NOT NULL) AS since
		  FROM sync.inbox i GROUP BY i.replica),
	v AS (
		SELECT r.*, o.messages, o.bytes, o.oldest,
		       coalesce(rf.n, 0) AS refused, coalesce(i.set_aside, 0) AS set_aside,
		       coalesce(i.waiting, 0) AS waiting, i.since AS inbox_since,
		       fleet.behind_since, fleet.aside_since,
		       CASE WHEN r.unreachable THEN 'unreachable'
		            WHEN rf.n > 0 OR i.set_aside > 0 OR fleet.aside THEN 'set_aside'
		            WHEN r.provisioning THEN 'provisioning'
		            WHEN fleet.behind THEN 'behind'
		            WHEN r.last_number > r.acked_number THEN 'on_its_way'
		            ELSE 'caught_up' END::sync.state AS state
		  FROM sync.live_replicas r CROSS JOIN fleet
		  -- its messages not acknowledged: none to read once it acknowledged its last
		  CROSS JOIN LATERAL (
			SELECT count(*) AS messages, coalesce(sum(o.bytes), 0) AS bytes, min(o.written) AS oldest
			  FROM sync.outbox o
			 WHERE r.last_number > r.acked_number
			   AND o.replica = r.id AND o.number > r.acked_number AND NOT o.dropped) o
		  LEFT JOIN rf ON rf.replica = r.id
		  LEFT JOIN i ON i.replica = r.id)
	SELECT v.id AS replica, v.partition, v.state,
	       CASE v.state
	         WHEN 'unreachable' THEN coalesce(v.heard_at, v.added)
	         WHEN 'set_aside' THEN least(v.inbox_since, v.aside_since)
	         WHEN 'provisioning' THEN (SELECT o.written FROM sync.outbox o
	                                    WHERE o.replica = v.id AND o.number = v.snapshot_number
	                                      AND NOT o.dropped AND NOT v.provision)
	         WHEN 'behind' THEN v.behind_since
	         WHEN 'on_its_way' THEN v.oldest
	       END AS since,
	       v.messages, v.bytes, v.refused AS rows_refused, v.set_aside AS uploads_set_aside,
	       v.waiting AS uploads_waiting, v.acked_number, v.last_number, v.acked_at, v.heard_at,
	       v.send_failures, v.last_error, v.last_error_at, v.unreachable, v.provisioning
	  FROM v;
CREATE OR REPLACE VIEW sync.table_states AS
	-- each read once, however the plan joins them; rows letting go and set
	-- aside are few: all of them
	WITH f AS MATERIALIZED (
		SELECT t.id, f.* FROM sync.tables t JOIN sync.fleet_tables f ON f.tab = t.relid),
	tk AS MATERIALIZED (
		SELECT h.replica, h.tab, count(*) AS n
		  FROM sync.held h JOIN sync.replicas x ON x.id = h.replica
		 WHERE h.taken IS NOT NULL AND h.taken > x.acked_number
		 GROUP BY h.replica, h.tab),
	rf AS MATERIALIZED (
		SELECT h.replica, h.tab, count(*) AS n FROM sync.held h
		 WHERE h.refused IS NOT NULL GROUP BY h.replica, h.tab),
	ib AS MATERIALIZED (
		SELECT i.replica, i.tab, count(*) AS n FROM sync.inbox i
		 WHERE i.sqlstate IS NOT NULL GROUP BY i.replica, i.tab)
	SELECT r.id AS replica, r.partition, f.tab,
	       CASE WHEN r.unreachable THEN 'unreachable'
	            WHEN rf.n > 0 OR ib.n > 0 OR f.notes_parked + f.notes_later + f.quarantined > 0
	                 THEN 'set_aside'
	            WHEN r.provisioning THEN 'provisioning'
	            WHEN f.notes_pending > 0 THEN 'behind'
	            -- one probe of held_number: does a message it has not acknowledged carry a row of it?
	            WHEN r.last_number > r.acked_number
	                 AND (tk.n > 0 OR EXISTS (SELECT FROM sync.held h
	                                           WHERE h.replica = r.id AND h.tab = f.id
	                                             AND h.number > r.acked_number)) THEN 'on_its_way'
	            ELSE 'caught_up' END::sync.state AS state,
	       coalesce(tk.n, 0) AS rows_letting_go, coalesce(rf.n, 0) AS rows_refused,
	       coalesce(ib.n, 0) AS uploads_set_aside
	  FROM sync.live_replicas r CROSS JOIN f
	  LEFT JOIN tk ON tk.replica = r.id AND tk.tab = f.id
	  LEFT JOIN rf ON rf.replica = r.id AND rf.tab = f.id
	  LEFT JOIN ib ON ib.replica = r.id AND ib.tab = f.id;
CREATE OR REPLACE FUNCTION sync.overview_tables(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	OUT tab regclass, OUT caught_up bigint, OUT on_its_way bigint, OUT behind bigint,
	OUT provisioning bigint, OUT set_aside bigint, OUT unreachable bigint,
	OUT notes_pending bigint, OUT pending_since timestamptz, OUT notes_parked bigint,
	OUT notes_later bigint, OUT quarantined bigint, OUT rows_refused bigint,
	OUT uploads_set_aside bigint, OUT rows_letting_go bigint, OUT now timestamptz)
	RETURNS SETOF record
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET plan_cache_mode = force_generic_plan
	AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
		SELECT f.tab,
		       count(x.state) FILTER (WHERE x.state = 'caught_up'),
		       count(x.state) FILTER (WHERE x.state = 'on_its_way'),
		       count(x.state) FILTER (WHERE x.state = 'behind'),
		       count(x.state) FILTER (WHERE x.state = 'provisioning'),
		       count(x.state) FILTER (WHERE x.state = 'set_aside'),
		       count(x.state) FILTER (WHERE x.state = 'unreachable'),
		       f.notes_pending, f.pending_since, f.notes_parked, f.notes_later, f.quarantined,
		       coalesce(sum(x.rows_refused), 0)::bigint, coalesce(sum(x.uploads_set_aside), 0)::bigint,
		       coalesce(sum(x.rows_letting_go), 0)::bigint, now()
		  FROM sync.fleet_tables f
		  LEFT JOIN (SELECT * FROM sync.table_states x
		              WHERE ($1 IS NULL OR x.replica = ANY ($1)) AND ($2 IS NULL OR x.partition = $2)) x
		         ON x.tab = f.tab
		 GROUP BY f.tab, f.notes_pending, f.pending_since, f.notes_parked, f.notes_later, f.quarantined
		 ORDER BY f.tab::text;
END
$$;
CREATE OR REPLACE FUNCTION sync.overview(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	worst integer DEFAULT 10)
	RETURNS jsonb
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET plan_cache_mode = force_generic_plan
	AS $$
BEGIN
	RETURN (
		WITH r AS MATERIALIZED (
			SELECT * FROM sync.replica_states r
			 WHERE ($1 IS NULL OR r.replica = ANY ($1)) AND ($2 IS NULL OR r.partition = $2)),
		f AS MATERIALIZED (SELECT * FROM sync.fleet_tables),
		-- the worst, with their rows counted one by one (as sync.listing does)
		w AS (
			SELECT r.replica, r.partition, r.state, r.since, r.messages, r.bytes,
			       c.rows_on_its_way, c.rows_letting_go, r.rows_refused, r.uploads_set_aside,
			       r.uploads_waiting, r.acked_number, r.last_number, r.acked_at, r.heard_at,
			       r.send_failures, r.last_error, r.last_error_at
			  FROM (SELECT * FROM r ORDER BY r.state DESC, r.since NULLS LAST, r.replica LIMIT $3) r
			  CROSS JOIN LATERAL (
				SELECT (SELECT coalesce(sum(c.n), 0)::bigint FROM sync.tables t
				          CROSS JOIN LATERAL (SELECT count(*) AS n FROM sync.held h
				                               WHERE h.replica = r.replica AND h.tab = t.id
				                                 AND h.number > r.acked_number) c
				         WHERE r.last_number > r.acked_number) AS rows_on_its_way,
				       (SELECT count(*) FROM sync.held h
				         WHERE h.replica = r.replica AND h.taken IS NOT NULL
				           AND h.taken > r.acked_number) AS rows_letting_go) c),
		s AS (SELECT r.state, count(*) AS n FROM r GROUP BY r.state),
		-- per table, as sync.overview_tables (the tests hold them equal).  A
		-- replica with nothing of its own to say of any table -- no message
		-- on its way, no row refused, no upload set aside -- is in the same
		-- state for every table but for what is recorded without a replica:
		-- those are counted once, the others table by table.
		own AS MATERIALIZED (
			SELECT r.replica FROM r
			 WHERE r.last_number > r.acked_number OR r.rows_refused > 0 OR r.uploads_set_aside > 0),
		pl AS (
			SELECT count(*) FILTER (WHERE r.unreachable) AS u,
			       count(*) FILTER (WHERE NOT r.unreachable AND r.provisioning) AS p,
			       count(*) FILTER (WHERE NOT r.unreachable AND NOT r.provisioning) AS c
			  FROM r WHERE r.replica NOT IN (SELECT own.replica FROM own)),
		x AS (
			SELECT x.tab,
			       count(*) FILTER (WHERE x.state = 'caught_up') AS caught_up,
			       count(*) FILTER (WHERE x.state = 'on_its_way') AS on_its_way,
			       count(*) FILTER (WHERE x.state = 'behind') AS behind,
			       count(*) FILTER (WHERE x.state = 'provisioning') AS provisioning,
			       count(*) FILTER (WHERE x.state = 'set_aside') AS set_aside,
			       count(*) FILTER (WHERE x.state = 'unreachable') AS unreachable,
			       sum(x.rows_refused) AS rows_refused, sum(x.uploads_set_aside) AS uploads_set_aside,
			       sum(x.rows_letting_go) AS rows_letting_go
			  FROM sync.table_states x WHERE x.replica IN (SELECT own.replica FROM own)
			 GROUP BY x.tab),
		t AS (
			SELECT f.tab,
			       coalesce(x.caught_up, 0)
			         + CASE WHEN a.aside OR f.notes_pending > 0 THEN 0 ELSE pl.c END AS caught_up,
			       coalesce(x.on_its_way, 0) AS on_its_way,
			       coalesce(x.behind, 0)
			         + CASE WHEN NOT a.aside AND f.notes_pending > 0 THEN pl.c ELSE 0 END AS behind,
			       coalesce(x.provisioning, 0) + CASE WHEN a.aside THEN 0 ELSE pl.p END AS provisioning,
			       coalesce(x.set_aside, 0) + CASE WHEN a.aside THEN pl.p + pl.c ELSE 0 END AS set_aside,
			       coalesce(x.unreachable, 0) + pl.u AS unreachable,
			       f.notes_pending, f.pending_since, f.notes_parked, f.notes_later, f.quarantined,
			       coalesce(x.rows_refused, 0)::bigint AS rows_refused,
			       coalesce(x.uploads_set_aside, 0)::bigint AS uploads_set_aside,
			       coalesce(x.rows_letting_go, 0)::bigint AS rows_letting_go
			  FROM f CROSS JOIN pl
			  CROSS JOIN LATERAL (SELECT f.notes_parked + f.notes_later + f.quarantined > 0 AS aside) a
			  LEFT JOIN x ON x.tab = f.tab)
		SELECT jsonb_build_object(
			'now', now(),
			'scope', jsonb_build_object('replicas', $1, 'partition', $2),
			'unreachable_after', current_setting('magic_sync.unreachable_after'),
			'replicas', (SELECT count(*) FROM r),
			'states', (SELECT jsonb_object_agg(e.state, coalesce(s.n, 0))
			             FROM unnest(enum_range(NULL::sync.state)) e(state)
			             LEFT JOIN s ON s.state = e.state),
			'worst', (SELECT coalesce(jsonb_agg(to_jsonb(w) ORDER BY w.state DESC, w.since NULLS LAST, w.replica), '[]')
			            FROM w),
			'tables', (SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.tab::text), '[]') FROM t),
			'notes_pending', (SELECT coalesce(sum(f.notes_pending), 0) FROM f),
			'pending_since', (SELECT min(f.pending_since) FROM f),
			'notes_parked', (SELECT coalesce(sum(f.notes_parked), 0) FROM f),
			'notes_later', (SELECT coalesce(sum(f.notes_later), 0) FROM f),
			'quarantined', (SELECT coalesce(sum(f.quarantined), 0) FROM f)));
END
$$;
