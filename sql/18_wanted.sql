-- sync.wanted: what a replica should hold, from scratch, on a shop using
-- every mirror and sync kind.
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

-- A: products of the north (1, 3), and 2 and 4, south, as parents of its
-- stock and of a line of its open order; its store, stock, open order 100
-- (not 101, closed) and that order's lines; customer 10 and city 1 two
-- levels above the lines; its group's price list and the prices that follow
-- it; its own sale, and customer 13 and city 3 above it.
SELECT * FROM sync.wanted('aaaaaaaa-0000-0000-0000-000000000000');
-- B: products 2 and 4 (south), 1 above its order's line, 3 above a price
-- of its group's price list; sales of its own, in both partitions.
SELECT * FROM sync.wanted('bbbbbbbb-0000-0000-0000-000000000000');
-- C, with no partition and nothing assigned: nothing
SELECT * FROM sync.wanted('cccccccc-0000-0000-0000-000000000000');
SELECT * FROM sync.wanted('dddddddd-0000-0000-0000-000000000000');

-- every live replica at once: the same sets
SELECT sync.wanted_fill();
SELECT w.replica, t.name, count(*) FROM pg_temp.ms_wanted w JOIN sync.tables t ON t.id = w.tab
 GROUP BY 1, 2 ORDER BY 1, 2;
SELECT sync.wanted_fill(ARRAY['cccccccc-0000-0000-0000-000000000000']::uuid[]);

-- order 100 closes: it leaves A's set with its lines, customer 10, city 1
-- and product 4; A's group is taken, price list 1 and its price go
UPDATE orders SET status = 'closed' WHERE id = 100;
DELETE FROM group_replicas WHERE grp = 'city';
SELECT * FROM sync.wanted('aaaaaaaa-0000-0000-0000-000000000000');
-- B moves to the north: products 1 and 3 by its partition, 4 above its stock
-- (3 above a price too, 1 above its order line)
SELECT sync.replica_set('bbbbbbbb-0000-0000-0000-000000000000', "partition" => 'north');
SELECT tab, key FROM sync.wanted('bbbbbbbb-0000-0000-0000-000000000000') WHERE tab = 'products'::regclass;

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
DELETE FROM sync.replicas;
TRUNCATE sync.notes;
