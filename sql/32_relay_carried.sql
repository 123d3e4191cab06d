-- What each message carries per table (sync.carried, which the reads count
-- instead of the held rows) matches the held rows it set, message by
-- message and table by table: for a snapshot it is counted as the messages
-- are packed, for a change as the held rows are written (record.c).  Small
-- messages, so that a snapshot is many and a table spans several.  In a
-- database of its own, so that no other test's replicas are in its fleet.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_carried;
\c contrib_regression_carried
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE items (id bigint PRIMARY KEY, store uuid NOT NULL, product int NOT NULL REFERENCES products);
CREATE INDEX ON items (store);
INSERT INTO products SELECT g, 'product ' || g FROM generate_series(1, 300) g;
INSERT INTO items SELECT g, ('00000000-0000-0000-0000-00000000000' || (1 + g % 3))::uuid, 1 + g % 300
  FROM generate_series(1, 600) g;
SELECT count(*) FROM (SELECT sync.mirror('products', 'catalog', 'broadcast')
                UNION ALL SELECT sync.mirror('items', 'catalog', 'assigned(store)')) m;
SET magic_sync.message_bytes = 1024;

-- the messages written after number $1: carried against held, per message and table
CREATE FUNCTION mismatches(after_number bigint) RETURNS TABLE (replica uuid, tab int, number bigint, carried bigint, held bigint)
LANGUAGE sql AS $$
	SELECT coalesce(c.replica, h.replica), coalesce(c.tab, h.tab), coalesce(c.number, h.number), c.rows, h.rows
	  FROM (SELECT replica, tab, number, rows FROM sync.carried WHERE number > after_number) c
	  FULL JOIN (SELECT replica, tab, number, count(*) AS rows FROM sync.held WHERE number > after_number
	              GROUP BY replica, tab, number) h
	    ON h.replica = c.replica AND h.tab = c.tab AND h.number = c.number
	 WHERE c.rows IS DISTINCT FROM h.rows
$$;
CREATE TABLE since (number bigint);
INSERT INTO since VALUES (0);

-- two replicas provisioned by one pass
SELECT sync.replica_add('00000000-0000-0000-0000-000000000001');
SELECT sync.replica_add('00000000-0000-0000-0000-000000000002');
SELECT provisioned FROM sync.relay_pass();
SELECT * FROM mismatches((SELECT number FROM since));
SELECT r.id, count(DISTINCT c.number) > 10 AS many_messages, sum(c.rows) AS carried,
       (SELECT count(*) FROM sync.held h WHERE h.replica = r.id) AS held
  FROM sync.replicas r JOIN sync.carried c ON c.replica = r.id GROUP BY r.id ORDER BY r.id;
UPDATE since SET number = (SELECT max(last_number) FROM sync.replicas);

-- a third provisioned while a change goes to the other two, and one more
-- of their rows is sent (an item moved to the second)
SELECT sync.replica_add('00000000-0000-0000-0000-000000000003');
UPDATE products SET name = 'renamed' WHERE id <= 5;
UPDATE items SET store = '00000000-0000-0000-0000-000000000002' WHERE id = 3;
SELECT provisioned FROM sync.relay_pass();
SELECT * FROM mismatches((SELECT number FROM since));
SELECT c.replica, sum(c.rows) AS carried
  FROM sync.carried c WHERE c.number > (SELECT number FROM since) GROUP BY c.replica ORDER BY c.replica;

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_carried;
