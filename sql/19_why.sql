-- sync.why: why a replica should hold a row, on sync.wanted's shop: rules
-- broadcast by partition, assigned, grouped, follows, records, and rows
-- brought only as parents.
-- Replicas: A (store A, partition north), B (store B, south), C (not live).
DO $$ BEGIN PERFORM setval('sync.tables_id_seq', 1, false); END $$;
SELECT sync.replica_add('aaaaaaaa-0000-0000-0000-000000000000', 'north');
SELECT sync.replica_add('bbbbbbbb-0000-0000-0000-000000000000', 'south');
SELECT sync.replica_add('cccccccc-0000-0000-0000-000000000000', live => false);

CREATE TABLE cities (id int PRIMARY KEY, name text);
CREATE TABLE customers (id bigint PRIMARY KEY, city int REFERENCES cities, name text);
CREATE TABLE products (id int PRIMARY KEY, name text, region text);
CREATE TABLE stores (id uuid PRIMARY KEY, name text);
CREATE TABLE stock (store uuid NOT NULL REFERENCES stores, product int NOT NULL REFERENCES products,
	qty int, counted int, PRIMARY KEY (store, product));
CREATE TABLE orders (id int PRIMARY KEY, store uuid REFERENCES stores,
	customer bigint REFERENCES customers, status text);
CREATE VIEW open_orders AS SELECT * FROM orders WHERE status <> 'closed';
CREATE TABLE order_lines (order_id int NOT NULL REFERENCES orders, line int NOT NULL,
	product int NOT NULL REFERENCES products, PRIMARY KEY (order_id, line));
CREATE TABLE price_lists (id int PRIMARY KEY, name text);
CREATE TABLE price_list_groups (price_list int NOT NULL REFERENCES price_lists,
	grp text NOT NULL, PRIMARY KEY (price_list, grp));
CREATE TABLE group_replicas (grp text NOT NULL, replica uuid NOT NULL, PRIMARY KEY (grp, replica));
CREATE TABLE prices (price_list int NOT NULL REFERENCES price_lists,
	product int NOT NULL REFERENCES products, price numeric, PRIMARY KEY (price_list, product));
CREATE TABLE sales (store uuid NOT NULL, id int NOT NULL, customer bigint REFERENCES customers,
	at timestamptz NOT NULL DEFAULT '2024-01-01', PRIMARY KEY (store, id)) PARTITION BY RANGE (id);
CREATE TABLE sales_low PARTITION OF sales FOR VALUES FROM (0) TO (1000);
CREATE TABLE sales_high PARTITION OF sales FOR VALUES FROM (1000) TO (MAXVALUE);

SELECT sync.mirror('cities', 'catalog');
SELECT sync.mirror('customers', 'catalog');
SELECT sync.mirror('products', 'catalog', 'broadcast', "partition" => 'region');
SELECT sync.mirror('stores', 'catalog', 'assigned(id)');
SELECT sync.mirror('stock', 'catalog', 'assigned(store)', replica_owned => '{counted}');
SELECT sync.mirror('orders', 'catalog', 'assigned(store)', active => 'open_orders');
SELECT sync.mirror('order_lines', 'catalog', 'follows(order_id)');
SELECT sync.mirror('price_lists', 'catalog',
	'grouped(members => public.price_list_groups, assigned => public.group_replicas)');
SELECT sync.mirror('prices', 'catalog', 'follows(price_list)');
SELECT sync.mirror('sales', 'record', key => '{store,id}', origin => 'store', version => 'at');

INSERT INTO cities VALUES (1, 'Oslo'), (2, 'Rome'), (3, 'Lima'), (4, 'Kyiv');
INSERT INTO customers VALUES (10, 1, 'Ann'), (11, 2, 'Bo'), (12, NULL, 'Cy'), (13, 3, 'Di'), (14, 4, 'Ed');
INSERT INTO products VALUES (1, 'tea', 'north'), (2, 'coffee', 'south'), (3, 'cocoa', 'north'),
	(4, 'salt', 'south'), (5, 'pepper', 'west');
INSERT INTO stores VALUES ('aaaaaaaa-0000-0000-0000-000000000000', 'A'),
	('bbbbbbbb-0000-0000-0000-000000000000', 'B');
INSERT INTO stock VALUES ('aaaaaaaa-0000-0000-0000-000000000000', 2, 5, NULL),
	('bbbbbbbb-0000-0000-0000-000000000000', 4, 1, 1);
INSERT INTO orders VALUES (100, 'aaaaaaaa-0000-0000-0000-000000000000', 10, 'open'),
	(101, 'aaaaaaaa-0000-0000-0000-000000000000', 11, 'closed'),
	(102, 'bbbbbbbb-0000-0000-0000-000000000000', 12, 'open');
INSERT INTO order_lines VALUES (100, 1, 3), (100, 2, 4), (101, 1, 2), (102, 1, 1);
INSERT INTO price_lists VALUES (1, 'retail'), (2, 'trade'), (3, 'unused');
INSERT INTO price_list_groups VALUES (1, 'city'), (2, 'town');
INSERT INTO group_replicas VALUES ('city', 'aaaaaaaa-0000-0000-0000-000000000000'),
	('town', 'bbbbbbbb-0000-0000-0000-000000000000');
INSERT INTO prices VALUES (1, 1, 2.5), (2, 3, 1.5), (3, 5, 9);
INSERT INTO sales VALUES ('aaaaaaaa-0000-0000-0000-000000000000', 1, 13),
	('bbbbbbbb-0000-0000-0000-000000000000', 1, NULL),
	('bbbbbbbb-0000-0000-0000-000000000000', 2000, 11);

-- broadcast to A's partition: the rule's row itself
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{1}'));
-- product 4 (south) comes to A only as the parent of a line of its open order
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{4}'));
-- city 1: its order's customer's city, two parents up from an assigned order
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'cities', sync.key('{1}'));
-- a price follows the price list A's group is given
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'prices', sync.key('{1,1}'));
-- product 3 to B: above a price of its group's price list
SELECT * FROM sync.why('bbbbbbbb-0000-0000-0000-000000000000', 'products', sync.key('{3}'));
-- city 3: above A's own sale
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'cities', sync.key('{3}'));
-- not wanted: the closed order's line, product 5 (west), a key that is no row
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'order_lines', sync.key('{101,1}'));
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{5}'));
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{99}'));

-- what it holds: product 1 acknowledged, 3 on its way, 5 being let go
INSERT INTO sync.held (replica, tab, key, number, taken)
SELECT 'aaaaaaaa-0000-0000-0000-000000000000', t.id, sync.key(k), n, tk
  FROM sync.tables t, (VALUES ('{1}'::text[], 0::bigint, NULL::bigint), ('{3}', 7, NULL), ('{5}', 0, 8)) v(k, n, tk)
 WHERE t.relid = 'products'::regclass;
SELECT depth, key, relation, wanted, held
  FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{1}'));
SELECT depth, key, relation, wanted, held
  FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{3}'));
SELECT depth, key, relation, wanted, held
  FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{5}'));

-- for a program
SELECT jsonb_pretty(sync.why_json('aaaaaaaa-0000-0000-0000-000000000000', 'cities', sync.key('{1}')));
SELECT sync.why_json('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{5}'));

-- every link agrees with sync.wanted: each row A should hold has a chain,
-- whose every line is wanted, that begins with a rule
SELECT count(*) AS rows, bool_and(c.ok) AS all_explained
  FROM sync.wanted('aaaaaaaa-0000-0000-0000-000000000000') w,
  LATERAL (SELECT bool_and(y.wanted) AND min(y.relation) FILTER (WHERE y.depth = 0) LIKE 'rule: %'
                  AND max(y.depth) = count(*) - 1 AS ok
             FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', w.tab, w.key) y) c;

-- sync.why_all: every row A should hold from one walk, each with the link
-- sync.why ends its chain with (the same relation, depth and row before)
SELECT count(*) AS rows, count(*) FILTER (WHERE a.depth IS NULL) AS unreached,
       (SELECT count(*) FROM sync.wanted('aaaaaaaa-0000-0000-0000-000000000000')) AS wanted,
       bool_and(y.depth = a.depth AND y.relation = a.relation AND
                (a.depth = 0 AND a.from_tab IS NULL OR (a.from_tab, a.from_key) = (x.tab, x.key))) AS as_why_says
  FROM sync.why_all('aaaaaaaa-0000-0000-0000-000000000000') a,
  LATERAL (SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', a.tab, a.key)) y
  LEFT JOIN LATERAL (SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', a.tab, a.key)) x
    ON x.depth = y.depth - 1
 WHERE y.depth = (SELECT max(z.depth) FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', a.tab, a.key) z);
SELECT * FROM sync.why_all('aaaaaaaa-0000-0000-0000-000000000000') WHERE tab IN ('cities'::regclass, 'products'::regclass);
SELECT * FROM sync.why_all('dddddddd-0000-0000-0000-000000000000');

-- sync.why walks back from the row to the rules' rows, then forward along
-- the chains it found: the same chain sync.why_all's walk gives, where a row
-- is reached by several.  Customer 10 is the parent of A's open orders 100
-- and 105 (one step, two rows: the first by key), customer 13 of order 104
-- (assigned) and of A's own sale (a record): two steps at one depth.
INSERT INTO orders VALUES (104, 'aaaaaaaa-0000-0000-0000-000000000000', 13, 'open'),
	(105, 'aaaaaaaa-0000-0000-0000-000000000000', 10, 'open');
SELECT depth, tab, key, relation FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'cities', sync.key('{1}'));
SELECT depth, tab, key, relation FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'cities', sync.key('{3}'));
-- product 3 is a rule's row (north) and the parent of order 100's line: the rule's
SELECT depth, tab, key, relation FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{3}'));
-- customer 11: the parent of a closed order of A's and of B's sale, no chain from A's rules
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'customers', sync.key('{11}'));
-- held, no longer wanted: order 100 closed, its line still held by A (the relay lets it go)
INSERT INTO sync.held (replica, tab, key, number)
SELECT 'aaaaaaaa-0000-0000-0000-000000000000', t.id, sync.key('{100,1}'), 0
  FROM sync.tables t WHERE t.relid = 'order_lines'::regclass;
SELECT depth, key, relation, wanted, held
  FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'order_lines', sync.key('{100,1}'));
UPDATE orders SET status = 'closed' WHERE id = 100;
SELECT depth, key, relation, wanted, held
  FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'order_lines', sync.key('{100,1}'));
-- and product 3 still, by its rule; city 1 now through order 105
SELECT depth, tab, key, relation FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'cities', sync.key('{1}'));
-- every row as sync.why_all says, again, for both replicas
SELECT r.id, count(*) AS rows, count(*) FILTER (WHERE a.depth IS NULL) AS unreached,
       bool_and(y.depth = a.depth AND y.relation = a.relation AND
                (a.depth = 0 AND a.from_tab IS NULL OR (a.from_tab, a.from_key) = (x.tab, x.key))) AS as_why_says
  FROM (VALUES ('aaaaaaaa-0000-0000-0000-000000000000'::uuid), ('bbbbbbbb-0000-0000-0000-000000000000')) r(id),
  LATERAL sync.why_all(r.id) a,
  LATERAL (SELECT * FROM sync.why(r.id, a.tab, a.key)) y
  LEFT JOIN LATERAL (SELECT * FROM sync.why(r.id, a.tab, a.key)) x ON x.depth = y.depth - 1
 WHERE y.depth = (SELECT max(z.depth) FROM sync.why(r.id, a.tab, a.key) z)
 GROUP BY r.id ORDER BY r.id;
UPDATE orders SET status = 'open' WHERE id = 100;
DELETE FROM orders WHERE id IN (104, 105);

-- refused: an unknown replica, a table not mirrored
SELECT * FROM sync.why('dddddddd-0000-0000-0000-000000000000', 'products', sync.key('{1}'));
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'group_replicas', sync.key('{city}'));

-- sync_admin's, not PUBLIC's; run as the caller
CREATE ROLE why_admin LOGIN PASSWORD 'x' IN ROLE sync_admin;
CREATE ROLE why_nobody LOGIN PASSWORD 'x';
SET ROLE why_nobody;
SELECT * FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{1}'));
SELECT sync.why_json('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{1}'));
RESET ROLE;
SET ROLE why_admin;
-- it reads the tables as the caller: not without the right to (in a new
-- session: the temporary tables of the walk are the first caller's)
\c -
SET ROLE why_admin;
SELECT depth, key, relation FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{4}'));
RESET ROLE;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO why_admin;
SET ROLE why_admin;
SELECT depth, key, relation FROM sync.why('aaaaaaaa-0000-0000-0000-000000000000', 'products', sync.key('{4}'));
RESET ROLE;
REVOKE SELECT ON ALL TABLES IN SCHEMA public FROM why_admin;
SELECT p.proname, p.prosecdef FROM pg_proc p WHERE p.pronamespace = 'sync'::regnamespace AND p.proname LIKE 'why%' ORDER BY 1;
DROP ROLE why_admin;
DROP ROLE why_nobody;

-- leave nothing behind for the next test
DO $$
DECLARE r regclass;
BEGIN
	FOR r IN SELECT relid FROM sync.tables ORDER BY id DESC LOOP
		PERFORM sync.unmirror(r);
	END LOOP;
END
$$;
DROP VIEW open_orders;
DROP TABLE cities, customers, products, stores, stock, orders, order_lines, price_lists,
	price_list_groups, group_replicas, prices, sales CASCADE;
DELETE FROM sync.held;
DELETE FROM sync.replicas;
TRUNCATE sync.notes;
