-- examples/shop/seed.sql: two stores, seven products, a few customers,
-- orders and price lists.  The stores are registered as replicas by whoever
-- runs them (scripts/demo: sync.replica_add with a login role each).

INSERT INTO products (id, name, region, price, cost) VALUES
	(1, 'tea', 'north', 3.20, 1.10),
	(2, 'coffee', 'north', 6.50, 2.90),
	(3, 'rye bread', 'north', 2.80, 0.90),
	(4, 'herring', 'north', 4.10, 1.70),
	(5, 'olive oil', 'south', 9.90, 4.20),
	(6, 'lemons', 'south', 1.60, 0.40),
	(7, 'sardines', 'south', 2.30, 0.80);

INSERT INTO stores (id, name, region) VALUES
	('a1a1a1a1-0000-4000-8000-000000000001', 'Oslo', 'north'),
	('b2b2b2b2-0000-4000-8000-000000000002', 'Lisbon', 'south');

-- Oslo also stocks olive oil, a southern product: it travels to Oslo as the
-- parent of a stock row.  Lisbon stocks tea the same way.
INSERT INTO stock (store, product, qty) VALUES
	('a1a1a1a1-0000-4000-8000-000000000001', 1, 40),
	('a1a1a1a1-0000-4000-8000-000000000001', 2, 25),
	('a1a1a1a1-0000-4000-8000-000000000001', 3, 12),
	('a1a1a1a1-0000-4000-8000-000000000001', 5, 6),
	('b2b2b2b2-0000-4000-8000-000000000002', 5, 30),
	('b2b2b2b2-0000-4000-8000-000000000002', 6, 80),
	('b2b2b2b2-0000-4000-8000-000000000002', 7, 50),
	('b2b2b2b2-0000-4000-8000-000000000002', 1, 10);

INSERT INTO customers (id, name, city) VALUES
	(1, 'Ingrid', 'Oslo'), (2, 'Lars', 'Bergen'), (3, 'Ana', 'Lisbon'), (4, 'Rui', 'Porto');

INSERT INTO orders (id, store, customer, status) VALUES
	(100, 'a1a1a1a1-0000-4000-8000-000000000001', 1, 'open'),
	(101, 'a1a1a1a1-0000-4000-8000-000000000001', 2, 'closed'),
	(200, 'b2b2b2b2-0000-4000-8000-000000000002', 3, 'open');
INSERT INTO order_lines (order_id, line, product, qty) VALUES
	(100, 1, 1, 2), (100, 2, 3, 1), (101, 1, 2, 1), (200, 1, 5, 1), (200, 2, 6, 12);

INSERT INTO price_lists (id, name) VALUES (1, 'north retail'), (2, 'south retail'), (3, 'members');
INSERT INTO price_list_groups (price_list, grp) VALUES (1, 'north'), (2, 'south'), (3, 'club');
INSERT INTO group_stores (grp, store) VALUES
	('north', 'a1a1a1a1-0000-4000-8000-000000000001'),
	('south', 'b2b2b2b2-0000-4000-8000-000000000002'),
	('club', 'a1a1a1a1-0000-4000-8000-000000000001'),
	('club', 'b2b2b2b2-0000-4000-8000-000000000002');
INSERT INTO prices (price_list, product, price) VALUES
	(1, 1, 3.20), (1, 2, 6.50), (1, 3, 2.80), (1, 4, 4.10),
	(2, 5, 9.90), (2, 6, 1.60), (2, 7, 2.30),
	(3, 1, 2.90), (3, 5, 8.90);
