-- What each replica holds, honestly (docs/design.md 7; src/pg/read/read.c;
-- docs/operations.md, "Reading progress", says what every column means).
--
-- Every read takes a scope -- some replicas (replicas uuid[]), a partition, or
-- all of them (both NULL; both given: the replicas of that partition among
-- them) -- and counts only live replicas.  Every read is one statement (of a
-- STABLE plpgsql function, which plans it once a session: generic plans), or
-- a C function reading one snapshot.  Each carries the server's now().
--
-- overview, listing and health read only what the engine records: the
-- replicas' columns, their unacknowledged messages, notes not done, rows set
-- aside, and a probe per replica and table of sync.carried.  They never count
-- what a replica should hold, nor every row it holds.  progress and
-- row_progress compare what replicas should hold, from scratch
-- (sync.wanted), with what they acknowledged: for a few replicas, or a row.

-- A replica's state, in order of severity: the worst that applies is its state.
CREATE TYPE sync.state AS ENUM (
	'caught_up',		-- holds what it should: nothing below applies
	'on_its_way',		-- messages it has not acknowledged
	'behind',			-- notes not yet planned (any may concern it)
	'provisioning',		-- a snapshot is due, or on its way
	'set_aside',		-- rows refused, uploads set aside, rows quarantined, notes parked
	'writes_refused',	-- rows it wrote never go up: refused by the server, or unsendable (its backlog says)
	'unreachable'		-- a send keeps failing to it, or not heard from since magic_sync.unreachable_after
);
COMMENT ON TYPE sync.state IS
	'A replica''s state, in order of severity: caught_up, on_its_way, behind, provisioning, set_aside, writes_refused, unreachable (sync.overview, sync.listing)';

-- What is recorded without a replica, per table: it may concern any replica.
CREATE VIEW sync.fleet_tables AS
	-- build 1 is this build (src/pg/relay/plan.c reads build <= 1): a later
	-- build's note waits for that build to be deployed
	SELECT t.relid AS tab, coalesce(n.pending, 0) AS notes_pending, n.pending_since,
	       coalesce(n.parked, 0) AS notes_parked, coalesce(n.later, 0) AS notes_later,
	       coalesce(q.n, 0) AS quarantined, least(n.aside_since, q.since) AS aside_since
	  FROM sync.tables t
	  LEFT JOIN (SELECT n.tab,
	                    count(*) FILTER (WHERE n.parked IS NULL AND n.build <= 1) AS pending,
	                    min(n.noted) FILTER (WHERE n.parked IS NULL AND n.build <= 1) AS pending_since,
	                    count(*) FILTER (WHERE n.parked IS NOT NULL) AS parked,
	                    count(*) FILTER (WHERE n.parked IS NULL AND n.build > 1) AS later,
	                    min(n.noted) FILTER (WHERE n.parked IS NOT NULL OR n.build > 1) AS aside_since
	               FROM sync.notes n WHERE NOT n.done GROUP BY n.tab) n ON n.tab = t.id
	  LEFT JOIN (SELECT q.tab, count(*) AS n, min(q.since) AS since
	               FROM sync.quarantine q GROUP BY q.tab) q ON q.tab = t.id;
COMMENT ON VIEW sync.fleet_tables IS
	'Per mirrored table, what the engine records without a replica, so that it may concern any: notes pending (not done) and since when, notes parked, notes of a later build, rows quarantined, and since when the oldest of those was set aside';

-- The live replicas, and what of their state their own columns say.
-- A send that keeps failing: the oldest message it has not acknowledged went
-- out (sync.pull returned it) three times or more, and it applied none of
-- them -- lost on the way, or refused by its file.  Once it applies and
-- acknowledges it, the next message counts afresh.
CREATE VIEW sync.live_replicas AS
	SELECT r.*, f.number AS send_failing, coalesce(f.pulls - 1, 0) AS send_failures,
	       coalesce(f.pulls >= 3, false)
	       OR coalesce(r.heard_at, r.added)
	          < now() - pg_catalog.current_setting('magic_sync.unreachable_after')::interval AS unreachable,
	       -- a snapshot due (or due once a pass observes it), or on its way
	       r.provision OR NOT r.seen_live OR r.seen_partition IS DISTINCT FROM r.partition
	       OR coalesce(r.snapshot_end > r.acked_number, false) AS provisioning
	  FROM sync.replicas r
	  LEFT JOIN LATERAL (
		SELECT o.number, o.pulls FROM sync.outbox o
		 WHERE r.last_number > r.acked_number
		   AND o.replica = r.id AND o.number > r.acked_number AND NOT o.dropped
		 ORDER BY o.number LIMIT 1) f ON true
	 WHERE r.live AND NOT r.dropped;
COMMENT ON VIEW sync.live_replicas IS
	'The live replicas (sync.replicas), each with the oldest message it has not acknowledged (send_failing) and how many times it went out again without being applied (send_failures), whether it is unreachable (that message went out three times or more, or it was not heard from within magic_sync.unreachable_after) and whether it is provisioning (a snapshot due, or on its way)';

-- Per live replica: its state, and what it is read from.  One row of
-- sync.replicas, probes of its outbox, and what is set aside: never a count
-- of what it holds.
CREATE VIEW sync.replica_states AS
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
	-- rows replicas wrote and can never send, as their backlogs last said
	-- (the server's own refusals added at filing: src/pg/transport/aside.c):
	-- a replica whose backlog says none is passed over by one jsonpath test
	wr AS MATERIALIZED (
		SELECT r.id AS replica,
		       (SELECT sum((b.value ->> 'set_aside')::bigint)::bigint FROM jsonb_each(r.backlog) b) AS n,
		       (SELECT to_timestamp(min((a.value ->> 'since')::bigint))
		          FROM jsonb_each(r.backlog) b
		          CROSS JOIN LATERAL jsonb_array_elements(b.value -> 'aside') a) AS since
		  FROM sync.replicas r
		 WHERE r.backlog @? '$.* ? (@.set_aside > 0)'),
	v AS (
		SELECT r.*, o.messages, o.bytes, o.oldest,
		       coalesce(rf.n, 0) AS refused, coalesce(i.set_aside, 0) AS set_aside,
		       coalesce(i.waiting, 0) AS waiting, i.since AS inbox_since,
		       fleet.behind_since, fleet.aside_since,
		       coalesce(wr.n, 0) AS writes, wr.since AS writes_since,
		       CASE WHEN r.unreachable THEN 'unreachable'
		            WHEN wr.n > 0 THEN 'writes_refused'
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
		  LEFT JOIN i ON i.replica = r.id
		  LEFT JOIN wr ON wr.replica = r.id)
	SELECT v.id AS replica, v.partition, v.state,
	       -- the state compared as text where it is writes_refused: an update
	       -- script may not name, in a view, a label it adds to sync.state
	       CASE WHEN v.state::text = 'writes_refused' THEN coalesce(v.writes_since, v.heard_at) ELSE
	       CASE v.state
	         WHEN 'unreachable' THEN coalesce(v.heard_at, v.added)
	         WHEN 'set_aside' THEN least(v.inbox_since, v.aside_since)
	         WHEN 'provisioning' THEN (SELECT o.written FROM sync.outbox o
	                                    WHERE o.replica = v.id AND o.number = v.snapshot_number
	                                      AND NOT o.dropped AND NOT v.provision)
	         WHEN 'behind' THEN v.behind_since
	         WHEN 'on_its_way' THEN v.oldest
	       END END AS since,
	       v.messages, v.bytes, v.refused AS rows_refused, v.set_aside AS uploads_set_aside,
	       v.waiting AS uploads_waiting, v.acked_number, v.last_number, v.acked_at, v.heard_at,
	       v.send_failures, v.last_error, v.last_error_at, v.unreachable, v.provisioning,
	       v.writes AS writes_set_aside
	  FROM v;
COMMENT ON VIEW sync.replica_states IS
	'Per live replica: its state (sync.state) and since when, its messages not acknowledged and their bytes, its rows refused, its uploads set aside and waiting, the columns of sync.replicas they are read from, whether it is unreachable or provisioning (sync.live_replicas), and the rows it wrote and can never send (its backlog); counts no held row but refused ones';

-- Per live replica and mirrored table: its state for that table.
CREATE VIEW sync.table_states AS
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
		 WHERE i.sqlstate IS NOT NULL GROUP BY i.replica, i.tab),
	-- rows each replica wrote and can never send, per table, as its backlog says
	wt AS MATERIALIZED (
		SELECT r.id AS replica, t.id AS tab, (b.value ->> 'set_aside')::bigint AS n
		  FROM sync.replicas r CROSS JOIN LATERAL jsonb_each(r.backlog) b
		  JOIN sync.tables t ON t.name = b.key
		 WHERE r.backlog @? '$.* ? (@.set_aside > 0)' AND (b.value ->> 'set_aside')::bigint > 0)
	SELECT r.id AS replica, r.partition, f.tab,
	       CASE WHEN r.unreachable THEN 'unreachable'
	            WHEN wt.n > 0 THEN 'writes_refused'
	            WHEN rf.n > 0 OR ib.n > 0 OR f.notes_parked + f.notes_later + f.quarantined > 0
	                 THEN 'set_aside'
	            WHEN r.provisioning THEN 'provisioning'
	            WHEN f.notes_pending > 0 THEN 'behind'
	            -- one probe of sync.carried: does a message it has not acknowledged carry a row of it?
	            WHEN r.last_number > r.acked_number
	                 AND (tk.n > 0 OR EXISTS (SELECT FROM sync.carried c
	                                           WHERE c.replica = r.id AND c.tab = f.id
	                                             AND c.number > r.acked_number)) THEN 'on_its_way'
	            ELSE 'caught_up' END::sync.state AS state,
	       coalesce(tk.n, 0) AS rows_letting_go, coalesce(rf.n, 0) AS rows_refused,
	       coalesce(ib.n, 0) AS uploads_set_aside, coalesce(wt.n, 0) AS writes_set_aside
	  FROM sync.live_replicas r CROSS JOIN f
	  LEFT JOIN tk ON tk.replica = r.id AND tk.tab = f.id
	  LEFT JOIN rf ON rf.replica = r.id AND rf.tab = f.id
	  LEFT JOIN ib ON ib.replica = r.id AND ib.tab = f.id
	  LEFT JOIN wt ON wt.replica = r.id AND wt.tab = f.id;
COMMENT ON VIEW sync.table_states IS
	'Per live replica and mirrored table: its state for that table (unreachable and provisioning are the replica''s; the others are read of that table alone), its rows letting go and refused, its uploads set aside, the rows of it it wrote and can never send';

-- A replica as sync.listing lists it (docs/operations.md says what each
-- column means).
CREATE TYPE sync.listed AS (
	replica				uuid,
	"partition"			text,
	state				sync.state,
	since				timestamptz,
	messages			bigint,
	bytes				bigint,
	rows_on_its_way		bigint,
	rows_letting_go		bigint,
	rows_refused		bigint,
	uploads_set_aside	bigint,
	uploads_waiting		bigint,
	writes_set_aside	bigint,
	acked_number		bigint,
	last_number			bigint,
	acked_at			timestamptz,
	heard_at			timestamptz,
	send_failures		integer,
	last_error			text,
	last_error_at		timestamptz,
	now					timestamptz
);
COMMENT ON TYPE sync.listed IS 'A replica as sync.listing lists it: sync.replica_states, with its rows on their way and letting go counted';

CREATE FUNCTION sync.listing(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	state sync.state DEFAULT NULL, after uuid DEFAULT NULL, "limit" integer DEFAULT 100)
	RETURNS SETOF sync.listed
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET plan_cache_mode = force_generic_plan
	AS $$
BEGIN
	RETURN QUERY
		SELECT r.replica, r.partition, r.state, r.since, r.messages, r.bytes,
		       c.on_its_way, c.letting_go, r.rows_refused, r.uploads_set_aside, r.uploads_waiting,
		       r.writes_set_aside, r.acked_number, r.last_number, r.acked_at, r.heard_at, r.send_failures,
		       r.last_error, r.last_error_at, now()
		  FROM (SELECT * FROM sync.replica_states r
		         WHERE ($1 IS NULL OR r.replica = ANY ($1)) AND ($2 IS NULL OR r.partition = $2)
		           AND ($3 IS NULL OR r.state = $3) AND ($4 IS NULL OR r.replica > $4)
		         ORDER BY r.replica LIMIT $5) r
		  -- the rows of the page's replicas: per table, what the messages
		  -- it has not acknowledged carry (sync.carried)
		  CROSS JOIN LATERAL (
			SELECT (SELECT coalesce(sum(c.n), 0)::bigint FROM sync.tables t
			          CROSS JOIN LATERAL (SELECT sum(m.rows) AS n FROM sync.carried m
			                               WHERE m.replica = r.replica AND m.tab = t.id
			                                 AND m.number > r.acked_number) c
			         WHERE r.last_number > r.acked_number) AS on_its_way,
			       (SELECT count(*) FROM sync.held h
			         WHERE h.replica = r.replica AND h.taken IS NOT NULL
			           AND h.taken > r.acked_number) AS letting_go) c
		 ORDER BY r.replica;
END
$$;
COMMENT ON FUNCTION sync.listing(uuid[], text, sync.state, uuid, integer) IS
	'Pages through the live replicas of the scope (in a state, or all), by uuid after `after`, up to `limit` (NULL: all): each replica''s state and since when, its messages, rows and uploads not where they should be (rows on their way: what the messages it has not acknowledged carry, a row sent twice meanwhile counted twice; rows letting go counted one by one), the rows it wrote and can never send, what it acknowledged and when it was heard from';

CREATE FUNCTION sync.overview_tables(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	OUT tab regclass, OUT caught_up bigint, OUT on_its_way bigint, OUT behind bigint,
	OUT provisioning bigint, OUT set_aside bigint, OUT writes_refused bigint, OUT unreachable bigint,
	OUT notes_pending bigint, OUT pending_since timestamptz, OUT notes_parked bigint,
	OUT notes_later bigint, OUT quarantined bigint, OUT rows_refused bigint,
	OUT uploads_set_aside bigint, OUT writes_set_aside bigint, OUT rows_letting_go bigint,
	OUT now timestamptz)
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
		       count(x.state) FILTER (WHERE x.state = 'writes_refused'),
		       count(x.state) FILTER (WHERE x.state = 'unreachable'),
		       f.notes_pending, f.pending_since, f.notes_parked, f.notes_later, f.quarantined,
		       coalesce(sum(x.rows_refused), 0)::bigint, coalesce(sum(x.uploads_set_aside), 0)::bigint,
		       coalesce(sum(x.writes_set_aside), 0)::bigint, coalesce(sum(x.rows_letting_go), 0)::bigint, now()
		  FROM sync.fleet_tables f
		  LEFT JOIN (SELECT * FROM sync.table_states x
		              WHERE ($1 IS NULL OR x.replica = ANY ($1)) AND ($2 IS NULL OR x.partition = $2)) x
		         ON x.tab = f.tab
		 GROUP BY f.tab, f.notes_pending, f.pending_since, f.notes_parked, f.notes_later, f.quarantined
		 ORDER BY f.tab::text;
END
$$;
COMMENT ON FUNCTION sync.overview_tables(uuid[], text) IS
	'Per mirrored table, over the live replicas of the scope: how many are in each state for that table, its notes pending, parked and of a later build, its rows quarantined, refused and letting go, its uploads set aside, its rows replicas wrote and can never send';

CREATE FUNCTION sync.overview_states(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	worst integer DEFAULT 10,
	OUT state sync.state, OUT count bigint, OUT since timestamptz, OUT worst_first uuid[],
	OUT now timestamptz)
	RETURNS SETOF record
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	SET plan_cache_mode = force_generic_plan
	AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
		SELECT s.state, count(r.replica), min(r.since),
		       (array_agg(r.replica ORDER BY r.since NULLS LAST, r.replica)
		          FILTER (WHERE r.replica IS NOT NULL))[1:$3],
		       now()
		  FROM unnest(enum_range(NULL::sync.state)) s(state)
		  LEFT JOIN (SELECT * FROM sync.replica_states r
		              WHERE ($1 IS NULL OR r.replica = ANY ($1)) AND ($2 IS NULL OR r.partition = $2)) r
		         ON r.state = s.state
		 GROUP BY s.state
		 ORDER BY s.state DESC;
END
$$;
COMMENT ON FUNCTION sync.overview_states(uuid[], text, integer) IS
	'Per state, worst first, over the live replicas of the scope: how many replicas are in it, since when the longest in it has been, and up to `worst` of them, longest first';

CREATE FUNCTION sync.overview(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
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
			       r.uploads_waiting, r.writes_set_aside, r.acked_number, r.last_number, r.acked_at, r.heard_at,
			       r.send_failures, r.last_error, r.last_error_at
			  FROM (SELECT * FROM r ORDER BY r.state DESC, r.since NULLS LAST, r.replica LIMIT $3) r
			  CROSS JOIN LATERAL (
				SELECT (SELECT coalesce(sum(c.n), 0)::bigint FROM sync.tables t
				          CROSS JOIN LATERAL (SELECT sum(m.rows) AS n FROM sync.carried m
				                               WHERE m.replica = r.replica AND m.tab = t.id
				                                 AND m.number > r.acked_number) c
				         WHERE r.last_number > r.acked_number) AS rows_on_its_way,
				       (SELECT count(*) FROM sync.held h
				         WHERE h.replica = r.replica AND h.taken IS NOT NULL
				           AND h.taken > r.acked_number) AS rows_letting_go) c),
		s AS (SELECT r.state, count(*) AS n FROM r GROUP BY r.state),
		-- per table, as sync.overview_tables (the tests hold them equal).  A
		-- replica with nothing of its own to say of any table -- no message
		-- on its way, no row refused, no upload set aside, no write it cannot
		-- send -- is in the same state for every table but for what is
		-- recorded without a replica: those are counted once, the others
		-- table by table.
		own AS MATERIALIZED (
			SELECT r.replica FROM r
			 WHERE r.last_number > r.acked_number OR r.rows_refused > 0 OR r.uploads_set_aside > 0
			    OR r.writes_set_aside > 0),
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
			       count(*) FILTER (WHERE x.state = 'writes_refused') AS writes_refused,
			       count(*) FILTER (WHERE x.state = 'unreachable') AS unreachable,
			       sum(x.rows_refused) AS rows_refused, sum(x.uploads_set_aside) AS uploads_set_aside,
			       sum(x.writes_set_aside) AS writes_set_aside, sum(x.rows_letting_go) AS rows_letting_go
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
			       coalesce(x.writes_refused, 0) AS writes_refused,
			       coalesce(x.unreachable, 0) + pl.u AS unreachable,
			       f.notes_pending, f.pending_since, f.notes_parked, f.notes_later, f.quarantined,
			       coalesce(x.rows_refused, 0)::bigint AS rows_refused,
			       coalesce(x.uploads_set_aside, 0)::bigint AS uploads_set_aside,
			       coalesce(x.writes_set_aside, 0)::bigint AS writes_set_aside,
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
COMMENT ON FUNCTION sync.overview(uuid[], text, integer) IS
	'Whether everything is where it should be, over the live replicas of the scope, in one snapshot: the server''s now, how many replicas are in each state, the worst up to `worst` (with their rows on their way counted), per table the same figures, and the notes pending, parked, of a later build and rows quarantined; reads only what the engine records, never what replicas should hold';

-- What the engine waits on: each item waits on the infrastructure (wait) or
-- on a fix (deploy one); never on someone repairing data.
CREATE FUNCTION sync.health(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
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
			-- a table whose declaration or trigger is wrong is held back, with those joined to it
			SELECT 'declaration' AS kind, 'a fix' AS waits_on, NULL::uuid AS replica,
			       (SELECT t.relid FROM sync.tables t WHERE t.name = c.tab) AS tab, NULL::text AS key,
			       1::bigint AS count, NULL::timestamptz AS since,
			       format('%s: %s: %s; it is held back, with every table joined to it by a foreign key'
			              ' (its changes, their filing, snapshots), until sync.mirror or sync.retrigger puts it right;'
			              ' every other table flows',
			              c.tab, c.problem, c.detail) AS reason, NULL::text AS sqlstate
			  FROM sync.check() c
			 WHERE c.problem <> 'foreign key not indexed'	-- it runs, reading a table whole
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
			-- rows a replica could not take: sent again at once when they change or
			-- it reports a new build, and otherwise when due (sync.refused_rows)
			SELECT 'rows refused', 'a fix', h.replica, t.relid, min(h.key), count(*), min(r.refused_at),
			       h.refused || CASE WHEN min(r.due) IS NOT NULL
			                         THEN format(' (sent to it again at %s, or at once when it changes or the replica reports a new build)',
			                                     min(r.due))
			                         ELSE ' (sent again once it changes or the replica reports a new build)' END, NULL
			  FROM s JOIN sync.held h ON h.replica = s.id JOIN sync.tables t ON t.id = h.tab
			  LEFT JOIN sync.refused_rows r ON r.replica = h.replica AND r.tab = h.tab AND r.key = h.key
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
			-- edits a replica sent that the server did not take, its copy winning, for a
			-- reason the replica's application must fix (a version not raised): until filed
			SELECT 'uploads dropped', 'a fix', d.replica, t.relid, min(d.key), count(*), min(d.at), d.reason, NULL
			  FROM s JOIN sync.dropped d ON d.replica = s.id JOIN sync.tables t ON t.id = d.tab
			 GROUP BY d.replica, t.relid, d.reason
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
			-- what a replica wrote and can never send, by reason and SQLSTATE, as
			-- its backlog last said (the server's own refusals added at filing:
			-- src/pg/transport/aside.c): set aside in its file until written again
			SELECT 'writes refused', 'a fix', s.id, t.relid,
			       CASE WHEN jsonb_typeof(a.value -> 'key') = 'array'
			            THEN sync.key(ARRAY(SELECT jsonb_array_elements_text(a.value -> 'key'))) END,
			       (a.value ->> 'rows')::bigint, to_timestamp((a.value ->> 'since')::bigint),
			       a.value ->> 'reason', nullif(a.value ->> 'sqlstate', '')
			  FROM s CROSS JOIN LATERAL jsonb_each(s.backlog) b
			  CROSS JOIN LATERAL jsonb_array_elements(b.value -> 'aside') a
			  LEFT JOIN sync.tables t ON t.name = b.key
			 WHERE s.backlog @? '$.* ? (@.set_aside > 0)' AND (b.value ->> 'set_aside')::bigint > 0
			UNION ALL
			-- ... and those it gave no reason for (a replica of an earlier build, or more reasons than it lists)
			SELECT 'writes refused', 'a fix', s.id, t.relid, NULL, c.n - c.told, NULL,
			       format('%s rows it wrote can never go up; it did not say why (a replica of an earlier build, or more reasons than an upload lists)',
			              c.n - c.told), NULL
			  FROM s CROSS JOIN LATERAL jsonb_each(s.backlog) b
			  LEFT JOIN sync.tables t ON t.name = b.key
			  CROSS JOIN LATERAL (
				SELECT (b.value ->> 'set_aside')::bigint AS n,
				       coalesce((SELECT sum((a.value ->> 'rows')::bigint)
				                   FROM jsonb_array_elements(b.value -> 'aside') a), 0)::bigint AS told) c
			 WHERE s.backlog @? '$.* ? (@.set_aside > 0)' AND c.n > c.told)
		SELECT i.kind, i.waits_on, i.replica, i.tab, i.key, i.count, i.since, i.reason, i.sqlstate, now()
		  FROM items i
		 ORDER BY i.waits_on = 'infrastructure', i.kind, i.tab::text NULLS FIRST, i.replica NULLS FIRST,
		          i.reason, i.key;
END
$$;
COMMENT ON FUNCTION sync.health(uuid[], text) IS
	'What the engine waits on over the scope, one row per kind, table, replica and reason: declarations the relay will not run with, notes pending and since when, notes parked or of a later build, rows quarantined and refused, uploads set aside, waiting and dropped, claims of replicas refused in the last hour, replicas unreachable or provisioning, the replicas'' backlogs, and the writes they can never send, by reason and SQLSTATE; waits_on says whether it waits on the infrastructure (wait) or on a fix (deploy one). Healthy: no row waits on a fix';

-- sync.progress and sync.row_progress (read.c): what should be, from scratch.
CREATE FUNCTION sync.progress(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	OUT replica uuid, OUT tab regclass, OUT should bigint, OUT holds bigint,
	OUT outdated bigint, OUT on_its_way bigint, OUT set_aside bigint, OUT lacks bigint,
	OUT letting_go bigint, OUT extra bigint, OUT now timestamptz)
	RETURNS SETOF record
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_progress';
COMMENT ON FUNCTION sync.progress(uuid[], text) IS
	'How far along each live replica of the scope is, per table, in one snapshot: the rows it should hold (from scratch, as sync.wanted), those it holds (acknowledged), holds as an older version, has on their way, has set aside, lacks; the rows it is letting go, and holds that it should no longer. holds - outdated of should is its progress bar. Costs a provisioning''s plan per replica: for a few';

CREATE FUNCTION sync.row_progress(tab regclass, key text[],
	replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL,
	OUT replica uuid, OUT answer text, OUT number bigint, OUT note bigint,
	OUT newer_note bigint, OUT reason text, OUT now timestamptz)
	RETURNS SETOF record
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_row_progress';
COMMENT ON FUNCTION sync.row_progress(regclass, text[], uuid[], text) IS
	'Where one row is, per live replica of the scope that holds it, should hold it, or uploaded it: holds, holds an older version, on its way, lacks, letting go, set aside (with the message, the version, the change it lacks and why)';

-- For psql.
CREATE VIEW sync.overview_now AS
	SELECT * FROM sync.overview_states();
COMMENT ON VIEW sync.overview_now IS
	'sync.overview_states() over every live replica: per state, worst first, how many replicas, since when, the ten worst';
CREATE VIEW sync.overview_tables_now AS
	SELECT * FROM sync.overview_tables();
COMMENT ON VIEW sync.overview_tables_now IS
	'sync.overview_tables() over every live replica: per table, replicas per state and what holds it back';
CREATE VIEW sync.replicas_now AS
	SELECT * FROM sync.listing("limit" => NULL) ORDER BY state DESC, since, replica;
COMMENT ON VIEW sync.replicas_now IS
	'sync.listing() of every live replica, worst first';
CREATE VIEW sync.health_now AS
	SELECT * FROM sync.health();
COMMENT ON VIEW sync.health_now IS
	'sync.health() over every live replica: what the engine waits on, fixes first';

-- At a fleet's size (docs/scale.md) the plans of these reads cost enough to be
-- compiled by JIT, which takes seconds (2.6 s measured at 10,000 replicas) for
-- what then runs in tens of milliseconds: they run interpreted.
ALTER FUNCTION sync.listing(uuid[], text, sync.state, uuid, integer) SET jit = off;
ALTER FUNCTION sync.overview_tables(uuid[], text) SET jit = off;
ALTER FUNCTION sync.overview_states(uuid[], text, integer) SET jit = off;
ALTER FUNCTION sync.overview(uuid[], text, integer) SET jit = off;
ALTER FUNCTION sync.health(uuid[], text) SET jit = off;
