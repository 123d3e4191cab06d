-- Lanes (docs/protocol.md 7.2): a table's lane, declared by sync.mirror and
-- checked there; each replica's lanes numbered on their own (sync.sends per
-- replica and lane), answered on their own (sync.answers.lane, Filed.lane),
-- seen in sync.lanes; the first lane alone says the replica's backlog; an
-- upload of a lane no table is in is refused.  In a database of its own.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_lanes;
\c contrib_regression_lanes
SET client_min_messages = warning;
CREATE EXTENSION magic_sync;

CREATE TABLE notes (store uuid NOT NULL, id bigint NOT NULL, body text, PRIMARY KEY (store, id));
CREATE TABLE sales (store uuid NOT NULL, id bigint NOT NULL, total numeric, PRIMARY KEY (store, id));
CREATE TABLE refunds (store uuid NOT NULL, id bigint NOT NULL, PRIMARY KEY (store, id));

CREATE SCHEMA lt;
-- what a call says: ok, or its SQLSTATE, message, and whether it has a detail and a hint
CREATE FUNCTION lt.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
	hint text;
BEGIN
	EXECUTE sql;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
		hint = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg || CASE WHEN det <> '' THEN ' [detail: ' || det || ']' ELSE '' END
	       || CASE WHEN hint <> '' THEN ' [hint]' ELSE '' END;
END $$;

-- declared: the default lane is the first (''), NULL too
SELECT sync.mirror('notes', 'record', 'assigned(store)', key => '{store,id}', origin => 'store');
SELECT sync.mirror('sales', 'record', 'assigned(store)', key => '{store,id}', origin => 'store',
	lane => 'sales');
SELECT sync.mirror('refunds', 'record', 'assigned(store)', key => '{store,id}', origin => 'store',
	lane => NULL);
SELECT name, lane FROM sync.mirrors ORDER BY id;

-- a lane's name: a lower-case letter, then lower-case letters, digits, underscores; 63 bytes at most
SELECT lt.try(format('SELECT sync.mirror(%L, %L, %L, key => %L, origin => %L, lane => %L)',
	'refunds', 'record', 'assigned(store)', '{store,id}', 'store', l)) AS refused, l
  FROM unnest(ARRAY['Sales', 'sales lane', '9sales', '_sales', 'café', 'sales-2', repeat('a', 64)]) l;
-- refused, the declaration stays as it was
SELECT name, lane FROM sync.mirrors WHERE name = 'refunds';
-- 63 bytes is a lane; the catalog holds only lanes' names
SELECT sync.mirror('refunds', 'record', 'assigned(store)', key => '{store,id}', origin => 'store',
	lane => repeat('r', 63));
SELECT length(lane) FROM sync.tables WHERE name = 'refunds';
SELECT split_part(lt.try($$UPDATE sync.tables SET lane = 'No Lane' WHERE name = 'refunds'$$), ' [detail', 1);
-- declared again: the lane changes with the declaration (a schema change that travels)
SELECT sync.mirror('refunds', 'record', 'assigned(store)', key => '{store,id}', origin => 'store',
	lane => 'sales');
SELECT name, lane FROM sync.mirrors ORDER BY id;

-- Uploads by hand (docs/protocol.md 7): framed, numbered, of a lane
SELECT sync.replica_add('dddddddd-0000-4000-8000-000000000001');
SELECT sync.replica_add('dddddddd-0000-4000-8000-000000000002');
\set R1 '''dddddddd-0000-4000-8000-000000000001'''
\set R2 '''dddddddd-0000-4000-8000-000000000002'''
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/wire.sql
CREATE FUNCTION lt.pb_int(field int, n bigint) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN n = 0 THEN '\x'::bytea ELSE wire.varint(field * 8) || wire.varint(n) END
$$;
-- an Up of replica r, send number seq, lane (field 16; '' is not written), with a backlog entry
CREATE FUNCTION lt.up(r uuid, seq bigint, lane text, unsent bigint DEFAULT 0) RETURNS bytea LANGUAGE sql AS $$
	SELECT wire.framed(lt.pb_int(1, 1) || wire.pb_bytes(2, uuid_send(r)) || wire.pb_bytes(3, decode(md5(random()::text), 'hex'))
	       || CASE WHEN unsent > 0 THEN wire.pb_bytes(8, wire.pb_bytes(1, 'notes') || lt.pb_int(2, unsent)) ELSE '' END
	       || lt.pb_int(11, seq) || CASE WHEN lane = '' THEN '' ELSE wire.pb_bytes(16, convert_to(lane, 'UTF8')) END)
$$;
-- what sync.file says of it
CREATE FUNCTION lt.file(r uuid, seq bigint, lane text, unsent bigint DEFAULT 0) RETURNS text LANGUAGE sql AS $$
	SELECT (SELECT jsonb_build_object('seq', f->'seq', 'lane', f->'lane', 'duplicate', f->'duplicate',
	                                  'last_seq', f->'last_seq')::text
	          FROM sync.file(r, lt.up(r, seq, lane, unsent)) f)
$$;

-- each lane numbers on its own: a lane's low numbers are no duplicates of the first's
SELECT lt.file(:R1, 100, '', 2) AS first;
SELECT lt.file(:R1, 5, 'sales') AS sales;
SELECT lt.file(:R1, 5, 'sales') AS sales_again;
SELECT lt.file(:R1, 6, '') AS first_below;
SELECT lt.file(:R1, 6, 'sales') AS sales_next;
SELECT lt.file(:R1, 101, '', 7) AS first_next;
-- an Up with no lane is the first lane's, as before lanes; another replica's numbers are its own
SELECT lt.file(:R2, 1, '') AS other_first, lt.file(:R2, 1, 'sales') AS other_sales;
-- a lane no table is declared in, and a name no lane has: refused, nothing filed
SELECT lt.try(format('SELECT sync.file(%L, %L)', :R1, lt.up(:R1, 200, 'spare')));
SELECT lt.try(format('SELECT sync.file(%L, %L)', :R1, lt.up(:R1, 200, 'Sales')));
SELECT lt.try(format('SELECT sync.file(%L, %L)', :R1, lt.up(:R1, 200, repeat('s', 64))));

-- where the numbers and answers are: sync.sends, sync.answers.lane, sync.lanes
SELECT replica, lane, filed_seq FROM sync.sends ORDER BY replica, lane;
SELECT replica, lane, count(*) AS answers,
	count(*) FILTER (WHERE wire.field(wire.field(message, 11), 7) IS NOT NULL) AS duplicates,
	array_agg(DISTINCT coalesce(convert_from(wire.field(wire.field(message, 11), 10), 'UTF8'), '')) AS filed_lanes
  FROM sync.answers GROUP BY replica, lane ORDER BY replica, lane;
SELECT replica, lane, last_seq, answers, answers_unpulled, tables FROM sync.lanes ORDER BY replica, lane;
-- sync.inspect says an answer's lane
SELECT a.lane, count(*) FILTER (WHERE sync.inspect(a.message)::text LIKE '%"lane": "sales"%') AS said_sales
  FROM sync.answers a GROUP BY a.lane ORDER BY a.lane;
-- the backlog is the first lane's to say: a lane's upload leaves it as the first lane said it
SELECT backlog FROM sync.replicas WHERE id = :R1;
SELECT lt.file(:R1, 7, 'sales') AS sales_after;
SELECT backlog FROM sync.replicas WHERE id = :R1;
-- a lane once filed stays a lane of its replica after its tables leave it (sends on their way)
SELECT sync.mirror('sales', 'record', 'assigned(store)', key => '{store,id}', origin => 'store');
SELECT sync.mirror('refunds', 'record', 'assigned(store)', key => '{store,id}', origin => 'store');
SELECT lt.file(:R1, 8, 'sales') AS sales_kept;
SELECT sync.replica_add('dddddddd-0000-4000-8000-000000000003');
SELECT lt.try(format('SELECT sync.file(%L, %L)', 'dddddddd-0000-4000-8000-000000000003',
	lt.up('dddddddd-0000-4000-8000-000000000003', 9, 'sales')));

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_lanes WITH (FORCE);
