-- The messages being filled are bounded relay-wide (magic_sync.fill_bytes,
-- record.c): past it, every replica's message ends early, all at the same
-- row, so that replicas sent the same rows share bodies.  The bound counts
-- what their memory holds; so many replicas that their empty messages alone
-- pass it end theirs once they hold as much again.  A snapshot of many
-- replicas (a table read whole) and a change broadcast to them.  In a
-- database of its own, so that no other test's replicas are in its fleet.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_fill;
\c contrib_regression_fill
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO products SELECT g, repeat('p', 150) || g FROM generate_series(1, 1000) g;
SELECT sync.mirror('products', 'catalog', 'broadcast');
SELECT count(sync.replica_add(('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid))
  FROM generate_series(1, 100) g;
CREATE TABLE since (number bigint);
INSERT INTO since VALUES (0);
-- the messages written since, per replica: how many, how many bodies they
-- share, the largest, and the rows they carry
CREATE FUNCTION written() RETURNS TABLE (messages_each numeric, bodies bigint, largest_kb int, rows_each bigint)
LANGUAGE sql AS $$
	SELECT count(*)::numeric / count(DISTINCT o.replica), count(DISTINCT o.body), max(o.bytes) / 1024,
	       (SELECT sum(c.rows) / count(DISTINCT c.replica) FROM sync.carried c
	         WHERE c.number > (SELECT number FROM since))
	  FROM sync.outbox o WHERE o.number > (SELECT number FROM since)
$$;

-- a bound above what they all take: each replica's snapshot is one message of rows
SET magic_sync.fill_bytes = '1GB';
SELECT provisioned, messages FROM sync.relay_pass();
SELECT * FROM written();
UPDATE since SET number = (SELECT max(last_number) FROM sync.replicas);

-- the least bound: their empty messages alone take more, and each of theirs
-- ends once they hold as much again (not at every row); every replica's
-- messages end at the same rows, and share their bodies
SELECT count(sync.replica_reprovision(id)) FROM sync.replicas;
SET magic_sync.fill_bytes = '64kB';
SELECT provisioned FROM sync.relay_pass();
SELECT messages_each > 20 AS ended_early, messages_each < 1000 AS not_each_row,
       bodies = messages_each AS shared, largest_kb < 8 AS small, rows_each
  FROM written();
SELECT count(*) AS held, count(DISTINCT replica) AS replicas FROM sync.held;
UPDATE since SET number = (SELECT max(last_number) FROM sync.replicas);

-- a change to every row, broadcast: the same
UPDATE products SET name = name || 'x';
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT messages_each > 20 AS ended_early, messages_each < 1000 AS not_each_row,
       bodies = messages_each AS shared, largest_kb < 8 AS small, rows_each
  FROM written();

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_fill;
