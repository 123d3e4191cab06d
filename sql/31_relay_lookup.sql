-- A pass looks up one replica's held row in one descent (issue 14: a pass
-- costs what changed).  A line that follows an item points at a broadcast
-- product every replica holds; when the item moves, the pass asks, for the
-- replica it leaves, whether that replica holds the product.  With held_row
-- on (tab, key) alone the planner, costing it like held_pkey, answered by
-- reading the held row of every replica holding the product and keeping the
-- one it asked for: a pass's reads of sync.held grew with the fleet (and at
-- 10^6 rows, each was a page read).  In a database of its own, so that no
-- other test's replicas are in its fleet.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_lookup;
\c contrib_regression_lookup
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE items (id bigint PRIMARY KEY, store uuid NOT NULL);
CREATE TABLE lines (id bigint PRIMARY KEY, item bigint NOT NULL REFERENCES items,
                    product int NOT NULL REFERENCES products, qty int NOT NULL);
CREATE INDEX ON lines (item);
CREATE INDEX ON items (store);
-- 200 replicas, ten items each, a line each; five products
CREATE TEMP TABLE fleet AS SELECT g, ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid AS id
  FROM generate_series(1, 200) g;
INSERT INTO products SELECT g, 'p' || g FROM generate_series(1, 5) g;
INSERT INTO items SELECT i, f.id FROM generate_series(1, 2000) i JOIN fleet f ON f.g = 1 + i % 200;
INSERT INTO lines SELECT i, i, 1 + i % 5, 1 FROM generate_series(1, 2000) i;
SELECT count(*) FROM (SELECT sync.mirror('products', 'catalog', 'broadcast')
                UNION ALL SELECT sync.mirror('items', 'catalog', 'assigned(store)')
                UNION ALL SELECT sync.mirror('lines', 'catalog', 'follows(item)')) m;
SELECT count(*) FROM (SELECT sync.replica_add(id) FROM fleet) r;
SELECT provisioned FROM sync.relay_pass();
SELECT count(*) AS held FROM sync.held;
UPDATE sync.replicas SET acked_number = last_number;
VACUUM ANALYZE sync.held, sync.replicas, products, items, lines;

-- each pass: an item moves to the next store; the held rows the pass read
-- (fetched by an index, or by a scan of sync.held) and the messages it wrote
CREATE FUNCTION move(i bigint) RETURNS TABLE (held_rows_read bigint, messages int) LANGUAGE plpgsql AS $$
DECLARE
	before bigint;
	m int;
BEGIN
	PERFORM pg_stat_force_next_flush();
	SELECT idx_tup_fetch + seq_tup_read INTO before FROM pg_stat_xact_user_tables WHERE relid = 'sync.held'::regclass;
	UPDATE items SET store = (SELECT id FROM fleet WHERE g = 1 + (i + 1) % 200) WHERE id = i;
	SELECT p.messages INTO m FROM sync.relay_pass() p;
	RETURN QUERY SELECT idx_tup_fetch + seq_tup_read - before, m
	               FROM pg_stat_xact_user_tables WHERE relid = 'sync.held'::regclass;
END $$;
-- a warm pass, then three moves (the worker's session is warm too): each
-- reads about a dozen held rows, not one of each of the 200 replicas holding
-- the line's product (238-277 a pass before, with a scan of all 5,000 held
-- rows besides: a planner's choice at this size)
SELECT messages FROM move(1);
BEGIN;
SELECT held_rows_read < 40 AS few, messages FROM move(11);
COMMIT;
BEGIN;
SELECT held_rows_read < 40 AS few, messages FROM move(21);
COMMIT;
BEGIN;
SELECT held_rows_read < 40 AS few, messages FROM move(31);
COMMIT;
-- and each moved the item, its line and the product to the store it went to
SELECT h.tab, count(*) FROM sync.held h JOIN fleet f ON f.id = h.replica
 WHERE f.g = 1 + 32 % 200 AND h.taken IS NULL GROUP BY h.tab ORDER BY h.tab;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_lookup;
