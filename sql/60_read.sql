-- What each replica holds, honestly (docs/design.md 7): replicas driven through every
-- state by real relay passes and real uploads (sync.file: acknowledgements,
-- refusals, rows, backlogs); each state reached and reported by
-- sync.overview, sync.listing and the views.  In a database of its own, so
-- that no other test's replicas are in its fleet.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_read;
\c contrib_regression_read
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE SCHEMA shop;
CREATE TABLE shop.products (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE shop.customers (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE shop.orders (id bigint PRIMARY KEY, store uuid NOT NULL,
	customer bigint REFERENCES shop.customers);
CREATE TABLE shop.order_lines (order_id bigint REFERENCES shop.orders ON DELETE CASCADE,
	line int, product bigint NOT NULL REFERENCES shop.products, qty int NOT NULL,
	PRIMARY KEY (order_id, line));
CREATE TABLE shop.stock (store uuid, product bigint REFERENCES shop.products, qty int NOT NULL,
	counted int CHECK (counted >= 0), PRIMARY KEY (store, product));
CREATE TABLE shop.shelves (id int PRIMARY KEY, store uuid NOT NULL, label text, checked boolean);
SELECT sync.mirror('shop.products', 'catalog', 'broadcast');
SELECT sync.mirror('shop.customers', 'catalog');
SELECT sync.mirror('shop.orders', 'catalog', 'assigned(store)');
SELECT sync.mirror('shop.order_lines', 'catalog', 'follows(order_id)');
SELECT sync.mirror('shop.stock', 'catalog', 'assigned(store)', replica_owned => '{counted}');
SELECT sync.mirror('shop.shelves', 'catalog', 'assigned(store)', replica_owned => '{checked}');
INSERT INTO shop.products VALUES (1, 'tea'), (2, 'coffee'), (3, 'cocoa');
INSERT INTO shop.customers VALUES (10, 'ada'), (11, 'bob');
INSERT INTO shop.orders VALUES
	(100, '00000000-0000-0000-0000-000000000001', 10),
	(200, '00000000-0000-0000-0000-000000000002', 11);
INSERT INTO shop.order_lines VALUES (100, 1, 1, 2), (100, 2, 2, 1), (200, 1, 3, 5);
INSERT INTO shop.stock VALUES
	('00000000-0000-0000-0000-000000000001', 1, 10, NULL),
	('00000000-0000-0000-0000-000000000002', 2, 20, NULL);
INSERT INTO shop.shelves VALUES (1, '00000000-0000-0000-0000-000000000002', 'top', NULL);

-- Uploads as a replica makes them (docs/protocol.md, section 7): protobuf by hand.
CREATE SCHEMA t;
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/wire.sql
-- An Up: the last message applied (0: none; default: the last written),
-- rows [{table, key, row}], refusals [{table, key, reason}], backlog [{table,
-- unsent, unfiled, set_aside, refused}]
CREATE FUNCTION t.up(r uuid, applied bigint DEFAULT -1, rows jsonb DEFAULT '[]',
	refusals jsonb DEFAULT '[]', backlog jsonb DEFAULT '[]') RETURNS bytea
	LANGUAGE plpgsql AS $$
DECLARE
	m bytea;
	o record;
	x jsonb;
BEGIN
	m := wire.pb_int(1, 1) || wire.pb_bytes(2, uuid_send(r)) || wire.pb_bytes(3, decode(md5(random()::text), 'hex'));
	IF applied = -1 THEN
		SELECT last_number INTO applied FROM sync.replicas WHERE id = r;
	END IF;
	SELECT * INTO o FROM sync.outbox WHERE replica = r AND number = applied;
	IF FOUND THEN
		m := m || wire.pb_bytes(4, wire.pb_bytes(1, o.epoch) || wire.pb_int(2, o.number)
		                        || wire.pb_bytes(3, o.nonce) || wire.pb_bytes(4, wire.seal(o.head)));
	END IF;
	FOR x IN SELECT * FROM jsonb_array_elements(rows) LOOP
		m := m || wire.pb_bytes(5, wire.pb_text(1, x ->> 'table')
		                        || wire.pb_bytes(2, convert_to((x -> 'row')::text, 'UTF8'))
		                        || wire.pb_key(3, x -> 'key'));
	END LOOP;
	FOR x IN SELECT * FROM jsonb_array_elements(refusals) LOOP
		m := m || wire.pb_bytes(6, wire.pb_text(1, x ->> 'table') || wire.pb_key(2, x -> 'key')
		                        || wire.pb_text(3, x ->> 'reason'));
	END LOOP;
	FOR x IN SELECT * FROM jsonb_array_elements(backlog) LOOP
		m := m || wire.pb_bytes(8, wire.pb_text(1, x ->> 'table') || wire.pb_int(2, (x ->> 'unsent')::bigint)
		                        || wire.pb_int(3, (x ->> 'unfiled')::bigint)
		                        || wire.pb_int(4, (x ->> 'set_aside')::bigint)
		                        || wire.pb_int(5, (x ->> 'refused')::bigint));
	END LOOP;
	-- numbered as a replica numbers its sends, its length first and its check last
	m := m || wire.pb_int(11, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
	RETURN wire.framed(m);
END $$;
-- a replica files an upload; says it applied everything written for it
CREATE FUNCTION t.file(r uuid, rows jsonb DEFAULT '[]', refusals jsonb DEFAULT '[]',
	backlog jsonb DEFAULT '[]', applied bigint DEFAULT -1) RETURNS jsonb LANGUAGE sql AS $$
	SELECT sync.file(r, t.up(r, applied, rows, refusals, backlog))
$$;
CREATE FUNCTION t.ack(r uuid) RETURNS jsonb LANGUAGE sql AS $$
	SELECT t.file(r)
$$;
CREATE FUNCTION t.ack_all() RETURNS void LANGUAGE sql AS $$
	SELECT t.ack(id) FROM sync.replicas WHERE live ORDER BY id
$$;
-- the states, as sync.listing says them
CREATE FUNCTION t.states(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL)
	RETURNS TABLE (replica uuid, state sync.state, messages bigint, on_its_way bigint,
		letting_go bigint, refused bigint, uploads bigint, since boolean)
	LANGUAGE sql AS $$
	SELECT l.replica, l.state, l.messages, l.rows_on_its_way, l.rows_letting_go, l.rows_refused,
	       l.uploads_set_aside + l.uploads_waiting, l.since IS NOT NULL
	  FROM sync.listing(replicas, "partition") l
$$;
-- sync.overview's counts per state, its worst replicas, and whether its
-- tables say what sync.overview_tables says
CREATE FUNCTION t.overview(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL)
	RETURNS TABLE (replicas bigint, states jsonb, worst jsonb, tables_agree boolean)
	LANGUAGE sql AS $$
	SELECT (o ->> 'replicas')::bigint, o -> 'states',
	       (SELECT jsonb_agg(jsonb_build_object('replica', w ->> 'replica', 'state', w ->> 'state'))
	          FROM jsonb_array_elements(o -> 'worst') w),
	       o -> 'tables' = (SELECT jsonb_agg(to_jsonb(x) - 'now' ORDER BY x.tab::text)
	                          FROM sync.overview_tables(replicas, "partition") x)
	  FROM sync.overview(replicas, "partition", 2) o
$$;
-- per table, the replicas in each state that has any
CREATE FUNCTION t.tables(replicas uuid[] DEFAULT NULL, "partition" text DEFAULT NULL)
	RETURNS TABLE (tab regclass, states text)
	LANGUAGE sql AS $$
	SELECT x.tab, concat_ws(', ',
		CASE WHEN x.caught_up > 0 THEN x.caught_up || ' caught up' END,
		CASE WHEN x.on_its_way > 0 THEN x.on_its_way || ' on its way' END,
		CASE WHEN x.behind > 0 THEN x.behind || ' behind' END,
		CASE WHEN x.provisioning > 0 THEN x.provisioning || ' provisioning' END,
		CASE WHEN x.set_aside > 0 THEN x.set_aside || ' set aside' END,
		CASE WHEN x.unreachable > 0 THEN x.unreachable || ' unreachable' END)
	  FROM sync.overview_tables(replicas, "partition") x
$$;
-- where a row is, now left out
CREATE FUNCTION t.row(tab regclass, key text[])
	RETURNS TABLE (replica uuid, answer text, number bigint, note bigint, newer_note bigint, reason text)
	LANGUAGE sql AS $$
	SELECT r.replica, r.answer, r.number, r.note, r.newer_note, r.reason FROM sync.row_progress(tab, key) r
$$;
-- what sync.progress says, now left out
CREATE FUNCTION t.progress(replicas uuid[])
	RETURNS TABLE (replica uuid, tab regclass, should bigint, holds bigint, outdated bigint,
		on_its_way bigint, set_aside bigint, lacks bigint, letting_go bigint, extra bigint)
	LANGUAGE sql AS $$
	SELECT p.replica, p.tab, p.should, p.holds, p.outdated, p.on_its_way, p.set_aside, p.lacks,
	       p.letting_go, p.extra
	  FROM sync.progress(replicas) p
	 WHERE p.should + p.letting_go + p.extra > 0
$$;

SELECT sync.replica_add('00000000-0000-0000-0000-000000000001', 'north');
SELECT sync.replica_add('00000000-0000-0000-0000-000000000002', 'north');
SELECT sync.replica_add('00000000-0000-0000-0000-000000000003', 'south');

-- added, not yet observed by a pass: provisioning
SELECT * FROM t.states();
SELECT * FROM t.overview();
-- the snapshots are written: still provisioning until each acknowledges its end
SELECT provisioned FROM sync.relay_pass();
SELECT * FROM t.states();
SELECT * FROM t.tables();
SELECT tables_agree FROM t.overview();
-- nothing counts until the replica says it applied it: all on its way
SELECT * FROM t.progress('{00000000-0000-0000-0000-000000000001}');
SELECT * FROM t.row('shop.products', '{1}');

-- the first replica acknowledges its snapshot (a real upload): caught up
SELECT (t.ack('00000000-0000-0000-0000-000000000001') ->> 'acknowledged')::bigint > 0 AS acknowledged;
SELECT * FROM t.states();
SELECT * FROM t.overview();
SELECT * FROM t.progress('{00000000-0000-0000-0000-000000000001}');
SELECT t.ack_all();
SELECT * FROM t.states();
SELECT * FROM t.tables();
SELECT tables_agree FROM t.overview();
SELECT * FROM t.row('shop.products', '{1}');
-- a key is taken as its columns' types print it: '01' and ' +1' are the
-- bigint 1, an upper-case uuid is the uuid; a part no value of its type fails
SELECT (SELECT array_agg(answer ORDER BY replica) FROM t.row('shop.products', '{01}'))
     = (SELECT array_agg(answer ORDER BY replica) FROM t.row('shop.products', '{1}')) AS spellings_agree,
       (SELECT array_agg(answer ORDER BY replica) FROM t.row('shop.products', '{" +1"}'))
     = (SELECT array_agg(answer ORDER BY replica) FROM t.row('shop.products', '{1}')) AS signed_agrees;
SELECT (SELECT array_agg(answer ORDER BY replica) FROM t.row('shop.stock', ARRAY[upper(s.store::text), '01']))
     = (SELECT array_agg(answer ORDER BY replica) FROM t.row('shop.stock', ARRAY[s.store::text, '1'])) AS uuid_agrees
  FROM (SELECT store FROM shop.stock WHERE product = 1 LIMIT 1) s;
SELECT * FROM t.row('shop.products', '{one}');

-- a change not planned yet: every replica is behind (any may be concerned),
-- and those holding the row hold an older version
UPDATE shop.products SET name = 'green tea' WHERE id = 1;
SELECT * FROM t.states();
SELECT * FROM t.tables();
SELECT tables_agree FROM t.overview();
SELECT * FROM t.row('shop.products', '{1}');
SELECT * FROM t.progress('{00000000-0000-0000-0000-000000000002}') WHERE tab = 'shop.products'::regclass;
-- planned and sent: on its way until acknowledged
SELECT rows_sent FROM sync.relay_pass();
SELECT * FROM t.states();
SELECT * FROM t.tables();
SELECT tables_agree FROM t.overview();
SELECT * FROM t.row('shop.products', '{1}');
SELECT * FROM t.progress('{00000000-0000-0000-0000-000000000002}') WHERE tab = 'shop.products'::regclass;
-- listing pages through a state
SELECT replica, state FROM sync.listing(state => 'on_its_way', "limit" => 2);
SELECT replica, state FROM sync.listing(state => 'on_its_way', after => '00000000-0000-0000-0000-000000000002');
SELECT replica, state FROM sync.listing(state => 'caught_up');
SELECT * FROM sync.listing(state => 'lost');
-- one acknowledges: only the others are still on its way
SELECT (t.ack('00000000-0000-0000-0000-000000000002') ->> 'acknowledged')::bigint > 0 AS acknowledged;
SELECT * FROM t.states();
SELECT * FROM t.overview();
SELECT * FROM t.overview(partition => 'north');
SELECT * FROM t.overview(replicas => '{00000000-0000-0000-0000-000000000002}');
SELECT t.ack_all();

-- an order deleted: the replica is letting go of it and its lines
DELETE FROM shop.orders WHERE id = 100;
SELECT rows_taken FROM sync.relay_pass();
SELECT * FROM t.states();
SELECT * FROM t.row('shop.orders', '{100}');
SELECT * FROM t.progress('{00000000-0000-0000-0000-000000000001}');
SELECT t.ack_all();
SELECT * FROM t.row('shop.orders', '{100}');

-- a new order not planned yet: the replica it is for lacks it, and its customer
INSERT INTO shop.orders VALUES (300, '00000000-0000-0000-0000-000000000003', 10);
SELECT * FROM t.row('shop.orders', '{300}');
SELECT * FROM t.row('shop.customers', '{10}');
SELECT * FROM t.progress('{00000000-0000-0000-0000-000000000003}');
SELECT rows_sent FROM sync.relay_pass();
SELECT * FROM t.row('shop.orders', '{300}');
SELECT t.ack_all();
SELECT * FROM t.progress('{00000000-0000-0000-0000-000000000003}');
SELECT * FROM t.overview();
