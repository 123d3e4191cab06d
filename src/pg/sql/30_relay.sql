-- The relay (src/pg/relay/: relay.c, batch.c, plan.c, load.c, record.c, worker.c; epoch.c), pull and
-- inspect (src/pg/transport/pull.c, inspect.c).

-- A message's body compressed by lz4 where the server has it (02_catalog.sql
-- stored it as it is): rows in JSON, or proto with text in them, shrink 6x,
-- and a snapshot of 10^6 rows wrote 76 MB of bodies, their TOAST and WAL,
-- that it now writes as 13 MB, faster than it wrote them whole and read back
-- no slower.  A body under 2 kB (a one-row change's) stays in its row, never
-- compressed.  Without lz4 as it was: pglz costs a snapshot's pass more than
-- it saves.
DO $$
BEGIN
	ALTER TABLE sync.bodies ALTER COLUMN bytes SET COMPRESSION lz4, ALTER COLUMN bytes SET STORAGE EXTENDED;
EXCEPTION WHEN feature_not_supported THEN
	NULL;
END
$$;

CREATE FUNCTION sync.relay_pass(
	OUT notes_read bigint, OUT provisioned bigint, OUT forgotten bigint,
	OUT rows_sent bigint, OUT rows_taken bigint, OUT messages bigint, OUT quarantined bigint)
	LANGUAGE c VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp
	-- the plan's temporary tables mislead JIT's cost threshold into compiling
	SET jit = off
	AS 'MODULE_PATHNAME', 'ms_relay_pass_sql';
COMMENT ON FUNCTION sync.relay_pass() IS
	'One relay pass in the caller''s transaction, which must be REPEATABLE READ, under the relay lock: observe the replicas, plan every note not done, record the messages and what they carry, NOTIFY magic_sync';

CREATE FUNCTION sync.relay_snapshots(
	OUT notes_read bigint, OUT provisioned bigint, OUT forgotten bigint,
	OUT rows_sent bigint, OUT rows_taken bigint, OUT messages bigint, OUT quarantined bigint)
	LANGUAGE c VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp
	SET jit = off
	AS 'MODULE_PATHNAME', 'ms_relay_snapshots_sql';
COMMENT ON FUNCTION sync.relay_snapshots() IS
	'A snapshot pass in the caller''s transaction, which must be REPEATABLE READ, under the relay lock: provisions the replicas waiting for a snapshot, holding their rows of sync.replicas alone (the others'' filings and pulls go on), and reads no note';

CREATE FUNCTION sync.wake() RETURNS boolean
	LANGUAGE c VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_wake';
COMMENT ON FUNCTION sync.wake() IS
	'Wakes this database''s relay worker for a pass now; false when none runs';

CREATE FUNCTION sync.relay_start() RETURNS integer
	LANGUAGE c VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_relay_start';
COMMENT ON FUNCTION sync.relay_start() IS
	'Starts a relay worker in the current database without a restart, unless one runs; returns its pid';

CREATE FUNCTION sync.epoch_begin(reason text DEFAULT NULL) RETURNS bytea
	LANGUAGE c VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_epoch_begin_sql';
COMMENT ON FUNCTION sync.epoch_begin(text) IS
	'Ends the current epoch and begins a new one: every replica is provisioned again at the next pass';

CREATE FUNCTION sync.is_transient(sqlstate text) RETURNS boolean
	LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_is_transient';
COMMENT ON FUNCTION sync.is_transient(text) IS
	'Whether an error of this SQLSTATE is the infrastructure''s (retried) rather than the data''s or the code''s (set aside)';

CREATE FUNCTION sync.pull(replica uuid, after bigint, max_bytes integer DEFAULT 1048576,
	OUT number bigint, OUT message bytea)
	RETURNS SETOF record
	LANGUAGE c VOLATILE SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_pull';
COMMENT ON FUNCTION sync.pull(uuid, bigint, integer) IS
	'The Filed answers waiting for a replica (number NULL), then its outbox''s messages numbered after `after`, up to max_bytes (at least one)';
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

-- A pull that waits (src/pg/transport/pull_wait.c): CALLed on its own, with
-- sync.pull behind it in the same pipeline.  Not SECURITY DEFINER, with no
-- SET: either would keep it from committing its snapshot before it waits.
CREATE PROCEDURE sync.pull_wait(replica uuid, after bigint, timeout_ms integer)
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'ms_pull_wait';
COMMENT ON PROCEDURE sync.pull_wait(uuid, bigint, integer) IS
	'Waits, holding no snapshot, until the replica''s outbox holds a message after `after` (a relay pass that wrote for it commits), for up to timeout_ms (10 minutes at most); then sync.pull';

CREATE FUNCTION sync.inspect(message bytea) RETURNS jsonb
	LANGUAGE c STABLE STRICT
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'ms_inspect';
COMMENT ON FUNCTION sync.inspect(bytea) IS
	'What a message to a replica says, as jsonb: its head (and whether this server sealed it) and its body; of a later protocol, its head only (later_protocol)';

CREATE FUNCTION sync.quarantine_retry(tab regclass DEFAULT NULL) RETURNS bigint
	LANGUAGE sql VOLATILE
	SET search_path = pg_catalog, pg_temp
	AS $$
	-- a note newer than its quarantine: the next pass tries the row again
	WITH n AS (INSERT INTO sync.notes (tab, key)
	           SELECT q.tab, q.key FROM sync.quarantine q
	            WHERE $1 IS NULL OR q.tab = (SELECT t.id FROM sync.tables t WHERE t.relid = $1)
	           RETURNING 1)
	SELECT count(*) FROM n
$$;
COMMENT ON FUNCTION sync.quarantine_retry(regclass) IS
	'Notes the quarantined rows (of one table, or all) again, so the next pass tries them, after a fix was deployed; the relay also tries each again a minute after it was set aside';
