-- A replica provisioned is sent each table it wants every row of (broadcast,
-- no partition, no active view, no round through it) by one read of the
-- table, not through the plan's tables (magic_sync.whole_tables; plan.c,
-- load.c, record.c).  What it is sent is what the plan would send: the same
-- messages (the same bodies, stored once), the same held rows, the same
-- count in its Begin; a blocked row left out; a row no message carries
-- quarantined; a row that fails to encode found through the plan.  In a
-- database of its own, so that no other test's replicas are in its fleet.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_whole;
\c contrib_regression_whole
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;
SHOW magic_sync.whole_tables;

-- a grade whose cast to json fails for 'bad' (a codec bug)
CREATE TYPE grade AS ENUM ('good', 'bad');
CREATE FUNCTION grade_json(g grade) RETURNS json LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
	IF g = 'bad' THEN RAISE EXCEPTION 'cannot encode grade %', g; END IF;
	RETURN to_json(g::text);
END $$;
CREATE CAST (grade AS json) WITH FUNCTION grade_json(grade);
-- products: broadcast and pointed at (wanted whole); items: assigned (through the plan)
CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, grade grade NOT NULL DEFAULT 'good', label text);
CREATE TABLE items (id bigint PRIMARY KEY, store uuid NOT NULL, product int NOT NULL REFERENCES products);
-- two-digit ids: the table's order is its keys' order, so both ways pack the same messages
INSERT INTO products (id, name) SELECT g, 'product ' || g FROM generate_series(10, 99) g;
INSERT INTO items SELECT g, '00000000-0000-0000-0000-00000000000c', 10 + g % 90 FROM generate_series(1, 60) g;
-- colors: broadcast in the proto codec (wanted whole)
CREATE TABLE colors (id int PRIMARY KEY, name text, weight float8, raw bytea, dark boolean, shade smallint);
INSERT INTO colors SELECT g, 'color ' || g, g / 3.0, decode(md5(g::text), 'hex'), g % 2 = 0,
       CASE WHEN g % 5 <> 0 THEN g END FROM generate_series(10, 40) g;
SELECT count(*) FROM (SELECT sync.mirror('products', 'catalog', 'broadcast')
                UNION ALL SELECT sync.mirror('items', 'catalog', 'assigned(store)')
                UNION ALL SELECT sync.mirror('colors', 'catalog', 'broadcast', codec => 'proto')) m;
-- small messages: a snapshot is many
SET magic_sync.message_bytes = 1024;

-- what a replica was sent: its messages' bodies in order, and its held rows
CREATE FUNCTION bodies(r uuid) RETURNS bigint[] LANGUAGE sql AS $$
	SELECT array_agg(o.body ORDER BY o.number) FROM sync.outbox o WHERE o.replica = r
$$;
CREATE FUNCTION held(r uuid) RETURNS TABLE (tab int, key text, note bigint) LANGUAGE sql AS $$
	SELECT h.tab, h.key, h.note FROM sync.held h WHERE h.replica = r
$$;
CREATE FUNCTION products() RETURNS int LANGUAGE sql AS $$ SELECT id FROM sync.tables WHERE name = 'products' $$;
-- the key of the last product a replica's messages upsert: the plan sends
-- rows in key order, a table read whole in the table's order
CREATE FUNCTION last_product(r uuid) RETURNS jsonb LANGUAGE sql AS $$
	SELECT t -> 'keys' -> -1 FROM sync.pull(r, 0) m, jsonb_array_elements(sync.inspect(m.message) -> 'down' -> 'tables') t
	 WHERE t ->> 'table' = 'products' ORDER BY m.number DESC LIMIT 1
$$;
-- the rows a replica's messages upsert, as sync.inspect reads them
CREATE FUNCTION sent(r uuid) RETURNS TABLE (tab text, key jsonb, row_ jsonb) LANGUAGE sql AS $$
	SELECT t ->> 'table', t -> 'keys' -> (x.i - 1)::int, x.u
	  FROM sync.pull(r, 0) m, jsonb_array_elements(sync.inspect(m.message) -> 'down' -> 'tables') t,
	       jsonb_array_elements(t -> 'upserts') WITH ORDINALITY AS x(u, i)
$$;
-- two replicas sent the same: the same bodies, the same rows, the same held rows
CREATE FUNCTION same(a uuid, b uuid)
	RETURNS TABLE (messages int, same_bodies boolean, rows bigint, rows_differ bigint, held bigint, held_differ bigint)
LANGUAGE sql AS $$
	SELECT cardinality(bodies(a)), bodies(a) = bodies(b), (SELECT count(*) FROM sent(a)),
	       (SELECT count(*) FROM ((SELECT * FROM sent(a) EXCEPT ALL SELECT * FROM sent(b))
	                    UNION ALL (SELECT * FROM sent(b) EXCEPT ALL SELECT * FROM sent(a))) d),
	       (SELECT count(*) FROM held(a)),
	       (SELECT count(*) FROM ((SELECT * FROM held(a) EXCEPT SELECT * FROM held(b))
	                    UNION ALL (SELECT * FROM held(b) EXCEPT SELECT * FROM held(a))) d)
$$;
-- the row count a replica's snapshot's Begin says
CREATE FUNCTION begin_rows(r uuid) RETURNS text LANGUAGE sql AS $$
	SELECT sync.inspect(m.message) -> 'down' ->> 'begin_rows' FROM sync.pull(r, 0) m
	 WHERE sync.inspect(m.message) -> 'down' ? 'begin_rows'
$$;

-- the store holding the items, then one replica the plan's way, one read whole
SELECT sync.replica_add('00000000-0000-0000-0000-00000000000c');
SELECT provisioned, rows_sent FROM sync.relay_pass();
SELECT sync.replica_add('00000000-0000-0000-0000-00000000000a');
SET magic_sync.whole_tables = off;
SELECT provisioned, rows_sent FROM sync.relay_pass();
RESET magic_sync.whole_tables;
SELECT sync.replica_add('00000000-0000-0000-0000-00000000000b');
SELECT provisioned, rows_sent FROM sync.relay_pass();
SELECT * FROM same('00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-00000000000b');
SELECT begin_rows('00000000-0000-0000-0000-00000000000a') AS a, begin_rows('00000000-0000-0000-0000-00000000000b') AS b;
-- the store: the products read whole, its items through the plan
SELECT t.name, count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab
 WHERE h.replica = '00000000-0000-0000-0000-00000000000c' GROUP BY 1 ORDER BY 1;
SELECT begin_rows('00000000-0000-0000-0000-00000000000c') AS c;

-- provisioned while a product changes: its held row has the change's note,
-- as the replicas sent the change have
SELECT sync.replica_add('00000000-0000-0000-0000-00000000000d');
UPDATE products SET name = 'renamed' WHERE id = 15;
SELECT provisioned, rows_sent FROM sync.relay_pass();
SELECT h.replica, h.note > 0 AS noted, h.note = (SELECT max(note) FROM sync.held WHERE key = h.key) AS newest
  FROM sync.held h JOIN sync.tables t ON t.id = h.tab
 WHERE t.name = 'products' AND h.key = sync.key(ARRAY['15']) ORDER BY 1;

-- a product turns bad while a replica is provisioned: reading it whole
-- fails, the pass plans again without, and the row is found and set aside,
-- with the items pointing at it; the replica gets every other row
SELECT sync.replica_add('00000000-0000-0000-0000-00000000000e');
UPDATE products SET grade = 'bad' WHERE id = 20;
SELECT provisioned, quarantined FROM sync.relay_pass();
SELECT t.name, q.key, q.reason FROM sync.quarantine q JOIN sync.tables t ON t.id = q.tab ORDER BY 1, 2;
SELECT count(*) AS held, count(*) FILTER (WHERE tab = products() AND key = sync.key(ARRAY['20'])) AS bad
  FROM held('00000000-0000-0000-0000-00000000000e');
-- read whole or through the plan, the blocked row is left out alike (the
-- bodies differ: product 15, updated, is now last in the table's order,
-- and the first of the two is sent it last)
SELECT sync.replica_add('00000000-0000-0000-0000-00000000000f');
SELECT provisioned, quarantined FROM sync.relay_pass();
SELECT sync.replica_add('00000000-0000-0000-0000-000000000010');
SET magic_sync.whole_tables = off;
SELECT provisioned, quarantined FROM sync.relay_pass();
RESET magic_sync.whole_tables;
SELECT messages, rows, rows_differ, held, held_differ
  FROM same('00000000-0000-0000-0000-00000000000f', '00000000-0000-0000-0000-000000000010');
SELECT last_product('00000000-0000-0000-0000-00000000000f') AS f, last_product('00000000-0000-0000-0000-000000000010') AS g;
SELECT begin_rows('00000000-0000-0000-0000-00000000000f') AS f, begin_rows('00000000-0000-0000-0000-000000000010') AS g;

-- a row no message can carry, read whole: quarantined, the rest goes
UPDATE products SET label = repeat('x', 2000) WHERE id = 30;
SELECT rows_sent, quarantined FROM sync.relay_pass();
SELECT sync.replica_add('00000000-0000-0000-0000-000000000011');
SELECT sync.replica_add('00000000-0000-0000-0000-000000000012');
-- (it is quarantined already: made larger again, it is tried again while both are provisioned)
UPDATE products SET label = repeat('y', 2000) WHERE id = 30;
SELECT provisioned, quarantined FROM sync.relay_pass();
SELECT t.name, q.key FROM sync.quarantine q JOIN sync.tables t ON t.id = q.tab ORDER BY 1, 2;
-- two provisioned by one pass: the table read once, each sent all of it, in the same bodies
SELECT * FROM same('00000000-0000-0000-0000-000000000011', '00000000-0000-0000-0000-000000000012');
SELECT begin_rows('00000000-0000-0000-0000-000000000011') AS h, begin_rows('00000000-0000-0000-0000-000000000012') AS i;
SELECT count(*) FILTER (WHERE tab = products() AND key IN (sync.key(ARRAY['20']), sync.key(ARRAY['30']))) AS blocked
  FROM held('00000000-0000-0000-0000-000000000011');
-- and what each of their messages carries per table is what its held rows say
SELECT coalesce(c.replica, h.replica) AS replica, tab, number, c.rows AS carried, h.rows AS held
  FROM (SELECT replica, tab, number, rows FROM sync.carried) c
  FULL JOIN (SELECT replica, tab, number, count(*) AS rows FROM sync.held GROUP BY replica, tab, number) h
    USING (replica, tab, number)
 WHERE c.rows IS DISTINCT FROM h.rows
   AND coalesce(c.replica, h.replica) IN ('00000000-0000-0000-0000-000000000011', '00000000-0000-0000-0000-000000000012');

-- a json table of booleans, numbers and strings: load.c writes its rows
-- itself, as row_to_json writes them (NaN and the infinities quoted, strings
-- escaped), whether read whole or through the plan
CREATE DOMAIN label AS text;
CREATE TABLE kinds (id int PRIMARY KEY, b boolean, i2 smallint, i8 bigint, f4 real, f8 float8, n numeric,
                    t text, v varchar(12), c char(4), u uuid, l label);
INSERT INTO kinds VALUES
	(1, true, -32768, 9223372036854775807, 1.5, 0.1, 12345.678901234567890, 'plain', 'v', 'ab', '00000000-0000-0000-0000-000000000001', 'l'),
	(2, false, 0, -1, 'NaN', 'Infinity', 'NaN', E'quote " backslash \\ slash / tab \t nl \n bell \x07', '', '', NULL, E'\u00e9t\u00e9 \u65e5\u672c'),
	(3, NULL, NULL, NULL, '-Infinity', '-Infinity', 1e-20, NULL, NULL, NULL, NULL, NULL),
	(4, true, 1, 2, 3.25e30, 1e308, -0.0, '{"a":1}', 'x', 'y', 'ffffffff-ffff-ffff-ffff-ffffffffffff', ''),
	(-2147483648, false, 32767, -9223372036854775808, 0, 0, 0, '', '', '', '0123abcd-89ef-4567-a0b1-c2d3e4f5a6b7', NULL);
SELECT sync.mirror('kinds', 'catalog', 'broadcast') IS NOT NULL AS mirrored;
SELECT rows_sent > 0 AS sent FROM sync.relay_pass();
SELECT sync.replica_add('00000000-0000-0000-0000-000000000013');
SELECT provisioned FROM sync.relay_pass();
SELECT sync.replica_add('00000000-0000-0000-0000-000000000014');
SET magic_sync.whole_tables = off;
SELECT provisioned FROM sync.relay_pass();
RESET magic_sync.whole_tables;
SELECT s.row_ ->> 'id' AS id, s.row_ = row_to_json(k)::jsonb AS as_row_to_json
  FROM sent('00000000-0000-0000-0000-000000000013') s JOIN kinds k ON k.id = (s.row_ ->> 'id')::int
 WHERE s.tab = 'kinds' ORDER BY 1;
SELECT count(*) AS rows FROM sent('00000000-0000-0000-0000-000000000014') s JOIN kinds k ON k.id = (s.row_ ->> 'id')::int
 WHERE s.tab = 'kinds' AND s.row_ = row_to_json(k)::jsonb;
SELECT count(*) AS rows_differ
  FROM ((SELECT * FROM sent('00000000-0000-0000-0000-000000000013') WHERE tab = 'kinds'
         EXCEPT ALL SELECT * FROM sent('00000000-0000-0000-0000-000000000014') WHERE tab = 'kinds')
        UNION ALL (SELECT * FROM sent('00000000-0000-0000-0000-000000000014') WHERE tab = 'kinds'
         EXCEPT ALL SELECT * FROM sent('00000000-0000-0000-0000-000000000013') WHERE tab = 'kinds')) d;

-- The held rows of a table read whole, written a page at a time in the
-- indexes' order (heldrows.c), are in every index of sync.held: a partial
-- index whose predicate reads only columns all of them have alike is asked
-- once (true here: every row goes in), any other per row (amcheck: every
-- heap row its predicate admits is in the index, and the index in order)
CREATE EXTENSION amcheck;
CREATE TABLE many (id int PRIMARY KEY, v text NOT NULL);
INSERT INTO many SELECT g, 'v' || g FROM generate_series(1, 3000) g;
SELECT sync.mirror('many', 'catalog', 'broadcast') IS NOT NULL AS mirrored;
SELECT rows_sent > 0 AS sent FROM sync.relay_pass();
CREATE INDEX held_untaken ON sync.held (replica, tab, key) WHERE taken IS NULL AND NOT replace;
CREATE INDEX held_sevens ON sync.held (key) WHERE key LIKE '%7%';
SELECT sync.replica_add('00000000-0000-0000-0000-000000000015');
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) AS held FROM sync.held h JOIN sync.tables t ON t.id = h.tab
 WHERE h.replica = '00000000-0000-0000-0000-000000000015' AND t.name = 'many';
SELECT count(*) AS checked
  FROM unnest(ARRAY['sync.held_pkey', 'sync.held_row', 'sync.held_untaken', 'sync.held_sevens']) i,
       LATERAL (SELECT bt_index_check(i::regclass, true)) c;
DROP INDEX sync.held_untaken, sync.held_sevens;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_whole;
