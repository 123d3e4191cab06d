-- What holds replicas back, and what the engine waits on: rows refused,
-- uploads set aside and waiting, rows quarantined, notes parked or of a later
-- build, declarations the relay will not run with, replicas unreachable or
-- provisioning, backlogs.  Each is reported by the reads, and each says
-- whether it waits on the infrastructure or on a fix.  Goes on with the fleet
-- of 60_read, in its database.
\c contrib_regression_read
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
-- what the engine waits on, now and since left out (and when a refused row goes again)
CREATE FUNCTION t.health(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL)
	RETURNS TABLE (kind text, waits_on text, replica uuid, tab regclass, key text, count bigint,
		since boolean, reason text, sqlstate text)
	LANGUAGE sql AS $$
	SELECT h.kind, h.waits_on, h.replica, h.tab, h.key, h.count, h.since IS NOT NULL,
	       regexp_replace(h.reason, ' again at [^,]*,', ' again at T,'), h.sqlstate
	  FROM sync.health(replicas, "partition") h
$$;

-- caught up, nothing waits
SELECT * FROM t.states();
SELECT * FROM t.health();

-- a replica cannot take a row: it refuses it (a real upload), and has it set aside
SELECT t.file('00000000-0000-0000-0000-000000000002',
	refusals => '[{"table": "shop.products", "key": ["2"], "reason": "no such column: a test"}]') ->> 'acknowledged' IS NOT NULL AS filed;
SELECT * FROM t.states();
SELECT * FROM t.tables();
SELECT tables_agree FROM t.overview();
SELECT * FROM t.row('shop.products', '{2}');
SELECT * FROM t.progress('{00000000-0000-0000-0000-000000000002}') WHERE tab = 'shop.products'::regclass;
SELECT * FROM t.health();
-- it is sent again once the row changes (a fix deployed on the replica)
UPDATE shop.products SET name = 'dark coffee' WHERE id = 2;
SELECT rows_sent FROM sync.relay_pass();
SELECT * FROM t.row('shop.products', '{2}');
SELECT t.ack_all();
SELECT * FROM t.states();

-- an upload the server cannot file (a constraint refuses it): set aside in
-- the inbox until a fix lets it through
SELECT t.file('00000000-0000-0000-0000-000000000001',
	rows => '[{"table": "shop.stock", "key": ["00000000-0000-0000-0000-000000000001", "1"], "row": {"counted": -1}}]') ->> 'set_aside' AS set_aside;
SELECT * FROM t.states();
SELECT * FROM t.tables();
SELECT tables_agree FROM t.overview();
SELECT * FROM t.row('shop.stock', '{00000000-0000-0000-0000-000000000001,1}');
SELECT * FROM t.health();
-- the fix is deployed (the constraint was wrong); the inbox is retried once its backoff passed
ALTER TABLE shop.stock DROP CONSTRAINT stock_counted_check;
UPDATE sync.inbox SET last_at = last_at - interval '1 hour';
SELECT sync.inbox_retry();
SELECT counted FROM shop.stock WHERE product = 1;
SELECT rows_sent FROM sync.relay_pass();
SELECT t.ack_all();
SELECT * FROM t.states();

-- a row that cannot go (too large for any message): quarantined, and every
-- replica set aside, since the engine records no replica for it (any whose
-- rules send it lacks it); it is taken back where held, and a row pointing
-- at it with it
SET magic_sync.message_bytes = 1024;
UPDATE shop.products SET name = repeat('x', 2000) WHERE id = 3;
SELECT quarantined, rows_taken FROM sync.relay_pass();
SELECT * FROM t.states();
SELECT * FROM t.tables();
SELECT tables_agree FROM t.overview();
SELECT * FROM t.row('shop.products', '{3}');
SELECT t.ack_all();
SELECT * FROM t.row('shop.products', '{3}');
SELECT * FROM t.row('shop.order_lines', '{200,1}');
SELECT * FROM t.progress('{00000000-0000-0000-0000-000000000002}');
SELECT * FROM t.health();
SELECT (sync.overview() ->> 'quarantined')::int AS quarantined;
-- the fix: messages large enough; the rows are tried again, and go
RESET magic_sync.message_bytes;
SELECT sync.quarantine_retry();
SELECT quarantined, rows_sent FROM sync.relay_pass();
SELECT t.ack_all();
SELECT * FROM t.states();
SELECT * FROM t.row('shop.order_lines', '{200,1}');

-- notes parked (their planning failed for good: 32_relay_park shows the
-- relay parking them) and notes of a later build wait on a fix: written here
-- by hand, on this fleet
INSERT INTO sync.notes (tab, key, parked)
	SELECT id, sync.key('{1}'), 'planning failed: a test' FROM sync.tables WHERE relid = 'shop.products'::regclass;
INSERT INTO sync.notes (tab, key, build)
	SELECT id, sync.key('{100}'), 2 FROM sync.tables WHERE relid = 'shop.customers'::regclass;
SELECT * FROM t.states();
SELECT * FROM t.tables();
SELECT tables_agree FROM t.overview();
SELECT * FROM t.health();
SELECT o -> 'notes_parked' AS parked, o -> 'notes_later' AS later, o -> 'notes_pending' AS pending
  FROM sync.overview() o;
DELETE FROM sync.notes WHERE parked IS NOT NULL OR build > 1;

-- a trigger disabled: the relay will not run until it is put right
ALTER TABLE shop.customers DISABLE TRIGGER USER;
SELECT kind, waits_on, tab, reason FROM t.health();
-- put right as sync.mirror wrote them: ENABLE ALWAYS (a bare ENABLE fires in origin sessions only)
ALTER TABLE shop.customers ENABLE ALWAYS TRIGGER magic_sync_note, ENABLE ALWAYS TRIGGER magic_sync_truncate;

-- not heard from within magic_sync.unreachable_after: unreachable
SET magic_sync.unreachable_after = '1s';
SELECT pg_sleep(1.2);
SELECT t.ack('00000000-0000-0000-0000-000000000001') IS NOT NULL AS heard,
       t.ack('00000000-0000-0000-0000-000000000002') IS NOT NULL AS heard;
SELECT * FROM t.states();
SELECT * FROM t.overview();
SELECT * FROM t.tables();
SELECT tables_agree FROM t.overview();
SELECT kind, waits_on, replica, since, reason FROM t.health();
RESET magic_sync.unreachable_after;
-- a send that keeps failing: a message goes out again and again (sync.pull
-- returns it) and the replica applies none of it -- it is lost on the way,
-- or its file refuses it: unreachable too, from its third time
UPDATE shop.products SET name = 'decaf' WHERE id = 2;
SELECT messages > 0 AS written FROM sync.relay_pass();
SELECT count(number) AS pulled FROM sync.pull('00000000-0000-0000-0000-000000000002',
	(SELECT acked_number FROM sync.replicas WHERE id = '00000000-0000-0000-0000-000000000002'));
SELECT count(number) AS pulled FROM sync.pull('00000000-0000-0000-0000-000000000002',
	(SELECT acked_number FROM sync.replicas WHERE id = '00000000-0000-0000-0000-000000000002'));
SELECT replica, state FROM t.states();
SELECT count(number) AS pulled FROM sync.pull('00000000-0000-0000-0000-000000000002',
	(SELECT acked_number FROM sync.replicas WHERE id = '00000000-0000-0000-0000-000000000002'));
SELECT * FROM t.states();
SELECT send_failures, send_failing = last_number AS the_message FROM sync.live_replicas
 WHERE id = '00000000-0000-0000-0000-000000000002';
SELECT kind, waits_on, replica, regexp_replace(reason, '[0-9]+ went', 'N went') AS reason
  FROM t.health() WHERE kind = 'unreachable';
-- applied and acknowledged at last: nothing keeps failing
SELECT t.ack_all();
SELECT * FROM t.states();
SELECT * FROM t.health();

-- what a replica says it has not sent or filed yet: its backlog
SELECT t.file('00000000-0000-0000-0000-000000000001',
	backlog => '[{"table": "shop.stock", "unsent": 2, "unfiled": 1, "set_aside": 1, "refused": 0}]') ->> 'acknowledged' IS NOT NULL AS filed;
SELECT kind, waits_on, replica, tab, count, reason ~ 'rows' AS says FROM t.health();
SELECT t.file('00000000-0000-0000-0000-000000000001') IS NOT NULL AS filed;

-- a replica moved to another partition is provisioned again: a snapshot is
-- due, then on its way; an edit of a row it no longer holds waits meanwhile
SELECT sync.replica_set('00000000-0000-0000-0000-000000000002', "partition" => 'south');
UPDATE shop.shelves SET store = '00000000-0000-0000-0000-000000000001' WHERE id = 1;
SELECT * FROM t.states();
SELECT kind, waits_on, replica, reason FROM t.health();
SELECT provisioned FROM sync.relay_pass();
SELECT * FROM t.states();
SELECT * FROM t.overview(partition => 'south');
SELECT t.file('00000000-0000-0000-0000-000000000002', applied => 0,
	rows => '[{"table": "shop.shelves", "key": ["1"], "row": {"checked": true}}]') ->> 'waiting' AS waiting;
SELECT * FROM t.row('shop.shelves', '{1}');
SELECT kind, waits_on, replica, tab, key, reason, sqlstate FROM t.health();
SELECT t.ack_all();
SELECT * FROM t.states();
-- once it holds what it should, the edit is tried again: it was never sent that row
UPDATE sync.inbox SET last_at = last_at - interval '1 hour';
SELECT sync.inbox_retry();
SELECT count(*) FROM sync.inbox;
-- refused, the edit is answered with the server's row: none, so the row
-- its note may have kept on replica 2 is taken back (docs/design.md 5.2)

-- a replica that is not live is not counted
SELECT sync.replica_set('00000000-0000-0000-0000-000000000003', live => false);
SELECT * FROM t.overview();
SELECT forgotten FROM sync.relay_pass();
SELECT * FROM t.states();

-- the views, for psql
SELECT state, count, since IS NOT NULL AS since, worst_first FROM sync.overview_now;
SELECT tab, caught_up, on_its_way, behind, provisioning, set_aside, unreachable, notes_pending,
       quarantined, rows_refused, uploads_set_aside, rows_letting_go FROM sync.overview_tables_now;
SELECT replica, "partition", state, messages, rows_on_its_way FROM sync.replicas_now;
SELECT count(*) AS waiting FROM sync.health_now;
-- the views they are built of
SELECT id, "partition", unreachable, provisioning FROM sync.live_replicas ORDER BY id;
SELECT replica, state, since IS NULL AS since, messages, rows_refused FROM sync.replica_states ORDER BY replica;
SELECT replica, tab, state FROM sync.table_states WHERE tab = 'shop.products'::regclass ORDER BY replica;
SELECT tab, notes_pending, quarantined FROM sync.fleet_tables ORDER BY tab::text;
-- sync.overview's shape
SELECT jsonb_object_keys(sync.overview()) AS key ORDER BY 1;
SELECT jsonb_object_keys(sync.overview() -> 'worst' -> 0) AS key ORDER BY 1;
SELECT jsonb_object_keys(sync.overview() -> 'tables' -> 0) AS key ORDER BY 1;
SELECT sync.overview() -> 'now' = to_jsonb(now()) AS carries_now;
-- errors a reader can make
SELECT * FROM sync.row_progress('shop.products', '{1,2}');
SELECT * FROM sync.row_progress('pg_class', '{1}');
SELECT * FROM sync.row_progress(NULL, '{1}');
-- only sync_admin reads; progress reads the mirrored tables too (as
-- sync.wanted does).  In a new session, so that the temporary tables of the
-- wanted set are the reader's own.
CREATE ROLE regress_reader8;
\c contrib_regression_read
SET client_min_messages = warning;
SET ROLE regress_reader8;
SELECT sync.overview();
SELECT * FROM sync.overview_now;
SELECT * FROM sync.progress();
RESET ROLE;
GRANT sync_admin TO regress_reader8;
GRANT USAGE ON SCHEMA shop TO regress_reader8;
GRANT SELECT ON ALL TABLES IN SCHEMA shop TO regress_reader8;
SET ROLE regress_reader8;
SELECT (sync.overview() ->> 'replicas')::int AS replicas;
SELECT count(*) > 0 AS tables FROM sync.overview_tables_now;
SELECT count(*) AS rows FROM sync.progress('{00000000-0000-0000-0000-000000000001}');
SELECT answer FROM sync.row_progress('shop.products', '{1}');
RESET ROLE;
DROP OWNED BY regress_reader8;
DROP ROLE regress_reader8;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_read;
