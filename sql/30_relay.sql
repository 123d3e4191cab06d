-- The relay: a provisioning of the shop sends exactly sync.wanted; each kind
-- of change sends exactly the upserts and deletes it should; a parent goes
-- with its child and is taken back only when nothing held points at it;
-- messages are numbered, chained, sealed, and their bodies shared.
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
-- ... and refuses READ COMMITTED, with what to do
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT * FROM sync.relay_pass();
ROLLBACK;
CREATE SCHEMA shop;
-- test helpers, kept for 31_relay_bounds
CREATE SCHEMA t;
CREATE TABLE shop.products (id bigint PRIMARY KEY, name text NOT NULL, price numeric(10,2));
CREATE TABLE shop.customers (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE shop.orders (id bigint PRIMARY KEY, store uuid NOT NULL,
	customer bigint REFERENCES shop.customers, placed date NOT NULL DEFAULT '2026-01-01');
CREATE TABLE shop.order_lines (order_id bigint REFERENCES shop.orders ON UPDATE CASCADE ON DELETE CASCADE,
	line int, product bigint NOT NULL REFERENCES shop.products, qty int NOT NULL,
	PRIMARY KEY (order_id, line));
CREATE TABLE shop.stock (store uuid, product bigint REFERENCES shop.products, qty int NOT NULL,
	counted int, PRIMARY KEY (store, product));
SELECT sync.mirror('shop.products', 'catalog', 'broadcast');
SELECT sync.mirror('shop.customers', 'catalog');
SELECT sync.mirror('shop.orders', 'catalog', 'assigned(store)');
SELECT sync.mirror('shop.order_lines', 'catalog', 'follows(order_id)');
SELECT sync.mirror('shop.stock', 'catalog', 'assigned(store)', replica_owned => '{counted}');

INSERT INTO shop.products VALUES (1, 'tea', 2.50), (2, 'coffee', 4.00), (3, 'cocoa', 3.20);
INSERT INTO shop.customers VALUES (10, 'ada'), (11, 'bob'), (12, 'cy');
INSERT INTO shop.orders VALUES
	(100, 'aaaaaaaa-0000-0000-0000-000000000001', 10),
	(101, 'aaaaaaaa-0000-0000-0000-000000000001', 11),
	(200, 'aaaaaaaa-0000-0000-0000-000000000002', 11);
INSERT INTO shop.order_lines VALUES (100, 1, 1, 2), (100, 2, 2, 1), (101, 1, 3, 5), (200, 1, 1, 1);
INSERT INTO shop.stock VALUES
	('aaaaaaaa-0000-0000-0000-000000000001', 1, 10, NULL),
	('aaaaaaaa-0000-0000-0000-000000000002', 2, 20, 19);

-- what a replica was sent, decoded: one row per upsert or delete, in order
CREATE FUNCTION t.sent(r uuid, after bigint DEFAULT 0)
	RETURNS TABLE (number bigint, kind text, tab text, op text, key text)
	LANGUAGE sql AS $$
	WITH m AS (SELECT p.number, sync.inspect(p.message) AS j
	             FROM sync.pull(r, after, 100000000) p WHERE p.number IS NOT NULL),
	rows AS (
		SELECT m.number, 0 AS pos, 'begin' AS kind, NULL AS tab, NULL AS op, NULL AS key
		  FROM m WHERE m.j -> 'down' ? 'begin'
		UNION ALL
		SELECT m.number, t.pos, 'rows', t.t ->> 'table', 'upsert',
		       sync.key(ARRAY(SELECT jsonb_array_elements_text(k)))
		  FROM m, jsonb_array_elements(m.j -> 'down' -> 'tables') WITH ORDINALITY AS t(t, pos),
		       jsonb_array_elements(t.t -> 'keys') k
		UNION ALL
		SELECT m.number, t.pos, 'rows', t.t ->> 'table', 'delete',
		       sync.key(ARRAY(SELECT jsonb_array_elements_text(k)))
		  FROM m, jsonb_array_elements(m.j -> 'down' -> 'tables') WITH ORDINALITY AS t(t, pos),
		       jsonb_array_elements(t.t -> 'deletes') k
		UNION ALL
		SELECT m.number, 1000, 'end', NULL, NULL, NULL FROM m WHERE m.j ? 'end_snapshot')
	-- in the order the replica applies them: message, then table within it
	SELECT number, kind, tab, op, key FROM rows ORDER BY number, pos, op DESC, key
$$;
-- what the engine records a replica holds, by wire name
CREATE FUNCTION t.held(r uuid)
	RETURNS TABLE (tab text, key text) LANGUAGE sql AS $$
	SELECT t.name, h.key FROM sync.held h JOIN sync.tables t ON t.id = h.tab
	 WHERE h.replica = r AND h.taken IS NULL ORDER BY 1, 2
$$;
CREATE FUNCTION t.wanted(r uuid)
	RETURNS TABLE (tab text, key text) LANGUAGE sql AS $$
	SELECT t.name, w.key FROM sync.wanted(r) w JOIN sync.tables t ON t.relid = w.tab ORDER BY 1, 2
$$;
-- acknowledge everything sent so far, as a replica would (filing is tested apart)
CREATE FUNCTION t.ack_all() RETURNS void LANGUAGE sql AS $$
	UPDATE sync.replicas r SET acked_number = r.last_number;
	DELETE FROM sync.held h USING sync.replicas r WHERE h.replica = r.id AND h.taken <= r.acked_number;
	DELETE FROM sync.outbox o USING sync.replicas r WHERE o.replica = r.id AND o.number <= r.acked_number;
$$;

-- no replica yet: a pass reads the notes and sends nothing
SELECT notes_read > 0 AS read_notes, provisioned, messages FROM sync.relay_pass();

SELECT sync.replica_add('aaaaaaaa-0000-0000-0000-000000000001');
SELECT sync.replica_add('aaaaaaaa-0000-0000-0000-000000000002');
SELECT notes_read, provisioned, rows_sent, rows_taken, messages FROM sync.relay_pass();

-- each snapshot: Begin, exactly the wanted rows (parents before children), EndSnapshot
SELECT kind, tab, op, key FROM t.sent('aaaaaaaa-0000-0000-0000-000000000001');
SELECT tab, key FROM t.sent('aaaaaaaa-0000-0000-0000-000000000002') WHERE op = 'upsert'
EXCEPT SELECT * FROM t.wanted('aaaaaaaa-0000-0000-0000-000000000002');
SELECT * FROM t.wanted('aaaaaaaa-0000-0000-0000-000000000002')
EXCEPT SELECT tab, key FROM t.sent('aaaaaaaa-0000-0000-0000-000000000002') WHERE op = 'upsert';
-- what is recorded as held is what was sent
SELECT (SELECT array_agg(h) FROM t.held('aaaaaaaa-0000-0000-0000-000000000001') h)
     = (SELECT array_agg(w) FROM t.wanted('aaaaaaaa-0000-0000-0000-000000000001') w) AS held_is_wanted;
-- the schema travels with the snapshot
SELECT jsonb_path_query(sync.inspect(p.message), '$.down.begin[*].name') AS tables
  FROM sync.pull('aaaaaaaa-0000-0000-0000-000000000001', 0) p LIMIT 5;
-- rows travel as JSON objects of their columns
SELECT jsonb_path_query(sync.inspect(p.message), '$.down.tables[*] ? (@.table == "shop.products").upserts[0]')
  FROM sync.pull('aaaaaaaa-0000-0000-0000-000000000001', 0) p;

-- numbering and chaining: each message names the one before it
SELECT count(*) AS messages,
       bool_and((j ->> 'previous')::bigint = coalesce(prev_number, 0)) AS chained,
       bool_and(j ->> 'previous_nonce' = coalesce(prev_nonce, '')) AS chained_nonce,
       bool_and((j ->> 'sealed')::boolean) AS sealed
  FROM (SELECT j, lag((j ->> 'number')::bigint) OVER w AS prev_number, lag(j ->> 'nonce') OVER w AS prev_nonce
          FROM (SELECT sync.inspect(message) j FROM sync.pull('aaaaaaaa-0000-0000-0000-000000000001', 0)) s
        WINDOW w AS (ORDER BY (j ->> 'number')::bigint)) c;
-- no two messages share a number
SELECT count(*) = count(DISTINCT number) AS unique_numbers FROM sync.outbox;
SELECT t.ack_all();

-- a broadcast change goes to both replicas in one shared body
UPDATE shop.products SET price = 2.75 WHERE id = 1;
SELECT notes_read, rows_sent, rows_taken, messages FROM sync.relay_pass();
SELECT replica, number > 0 AS numbered FROM sync.outbox ORDER BY replica;
SELECT count(DISTINCT body) AS bodies FROM sync.outbox;
SELECT tab, op, key FROM t.sent('aaaaaaaa-0000-0000-0000-000000000002');
SELECT t.ack_all();

-- an update that changes nothing a replica does not own sends nothing
UPDATE shop.stock SET counted = 9 WHERE product = 1;
SELECT notes_read, rows_sent, messages FROM sync.relay_pass();

-- a new order with lines: the lines follow it, its customer goes with it
INSERT INTO shop.customers VALUES (13, 'dee');
INSERT INTO shop.orders VALUES (102, 'aaaaaaaa-0000-0000-0000-000000000001', 13);
INSERT INTO shop.order_lines VALUES (102, 1, 2, 3);
SELECT rows_sent, rows_taken FROM sync.relay_pass();
SELECT tab, op, key FROM t.sent('aaaaaaaa-0000-0000-0000-000000000001');
SELECT t.ack_all();

-- a key change: the old key is taken back, the new one sent, with its lines
UPDATE shop.orders SET id = 103 WHERE id = 102;
SELECT rows_sent, rows_taken FROM sync.relay_pass();
SELECT tab, op, key FROM t.sent('aaaaaaaa-0000-0000-0000-000000000001');
SELECT t.ack_all();

-- an order moving to the other store: it, its lines and its customer (no
-- longer needed there) leave store 1; store 2 gets them (bob, 11, stays at
-- store 1 for order 101)
UPDATE shop.orders SET store = 'aaaaaaaa-0000-0000-0000-000000000002' WHERE id = 103;
SELECT rows_sent, rows_taken FROM sync.relay_pass();
SELECT tab, op, key FROM t.sent('aaaaaaaa-0000-0000-0000-000000000001');
SELECT tab, op, key FROM t.sent('aaaaaaaa-0000-0000-0000-000000000002');
SELECT t.ack_all();

-- a parent is taken back only when nothing held points at it
UPDATE shop.orders SET customer = 12 WHERE id = 101;
SELECT rows_sent, rows_taken FROM sync.relay_pass();
SELECT tab, op, key FROM t.sent('aaaaaaaa-0000-0000-0000-000000000001');
SELECT t.ack_all();

-- a delete: the order and its lines (cascaded) are taken back, children first
DELETE FROM shop.orders WHERE id = 100;
SELECT rows_sent, rows_taken FROM sync.relay_pass();
SELECT number - min(number) OVER () AS nth, tab, op, key FROM t.sent('aaaaaaaa-0000-0000-0000-000000000001');
SELECT t.ack_all();

-- after every step, held equals wanted
SELECT r.id, (SELECT array_agg(h) FROM t.held(r.id) h) = (SELECT array_agg(w) FROM t.wanted(r.id) w) AS held_is_wanted
  FROM sync.replicas r ORDER BY r.id;
-- a pass with nothing to do writes nothing
SELECT notes_read, provisioned, rows_sent, messages FROM sync.relay_pass();
