-- A pass that fails for good, narrowed down to the notes it is about (docs/design.md
-- 6.3): they are parked, their rows quarantined, and everything else goes on.
-- In a database of its own, so that no other test's replicas are planned.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_park;
\c contrib_regression_park
SET client_min_messages = warning;
-- a relay pass runs in a REPEATABLE READ transaction (src/pg/relay/pass.h)
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;

CREATE SCHEMA park;
CREATE TABLE park.products (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE park.stock (store uuid, product bigint REFERENCES park.products, qty int NOT NULL,
	PRIMARY KEY (store, product));
-- which products are shown: a bug makes it fail on a product named 'broken'
CREATE FUNCTION park.shown(p park.products) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF p.name = 'broken' THEN
		RAISE EXCEPTION 'product % is broken', p.id;
	END IF;
	RETURN true;
END $$;
CREATE VIEW park.shown_products AS SELECT * FROM park.products p WHERE park.shown(p);
SELECT sync.mirror('park.products', 'catalog', 'broadcast', active => 'park.shown_products');
SELECT sync.mirror('park.stock', 'catalog', 'assigned(store)');
INSERT INTO park.products SELECT g, 'p' || g FROM generate_series(1, 20) g;
SELECT sync.replica_add('cccccccc-0000-0000-0000-000000000001');
INSERT INTO park.stock VALUES ('cccccccc-0000-0000-0000-000000000001', 13, 5),
	('cccccccc-0000-0000-0000-000000000001', 14, 6);
SELECT notes_read > 0 AS read, provisioned, rows_sent FROM sync.relay_pass();
-- what the replica holds, as recorded
CREATE FUNCTION held() RETURNS TABLE (tab text, keys bigint) LANGUAGE sql AS $$
	SELECT t.name, count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab
	 WHERE h.taken IS NULL GROUP BY t.name ORDER BY 1
$$;
SELECT * FROM held();

-- the bug meets product 13: its note is parked and the row quarantined; the
-- replica's copy of it is taken back with the stock row pointing at it, and
-- the other changes of the same pass go
UPDATE park.products SET name = 'broken' WHERE id = 13;
UPDATE park.products SET name = 'fine' WHERE id IN (3, 17);
SELECT notes_read, rows_sent, rows_taken, messages FROM sync.relay_pass();
SELECT key, done, parked, parked_at IS NOT NULL AS since FROM sync.notes WHERE NOT done ORDER BY id;
SELECT key, note > 0 AS noted, reason FROM sync.quarantine;
SELECT * FROM held();
SELECT kind, waits_on, key, count, reason FROM sync.health() WHERE kind <> 'provisioning';
-- the next pass does not try it again: it waits for a fix
UPDATE park.products SET name = 'fine too' WHERE id = 4;
SELECT notes_read, rows_sent, rows_taken FROM sync.relay_pass();

-- a note no build can read (its key does not parse): parked, and nothing is
-- quarantined under it
INSERT INTO sync.notes (tab, key) SELECT id, 'garbage' FROM sync.tables WHERE relid = 'park.products'::regclass;
UPDATE park.products SET name = 'fine again' WHERE id = 5;
SELECT notes_read, rows_sent FROM sync.relay_pass();
SELECT key, parked FROM sync.notes WHERE parked IS NOT NULL ORDER BY id;
SELECT count(*) AS quarantined FROM sync.quarantine;

-- a snapshot that fails without any note (a replica provisioned reads every
-- product through the view) is set aside, and the other replicas go on
SELECT sync.replica_add('cccccccc-0000-0000-0000-000000000002');
UPDATE park.products SET name = 'fine at last' WHERE id = 6;
SELECT notes_read, provisioned, rows_sent FROM sync.relay_pass();
SELECT id, provision, provision_failed_at IS NOT NULL AS set_aside, last_error FROM sync.replicas ORDER BY id;
SELECT kind, waits_on, replica, reason FROM sync.health() WHERE kind = 'provisioning';
-- the next pass leaves it be; a minute later (here: moved back) it is tried
-- again, and set aside again while the bug is there
SELECT provisioned FROM sync.relay_pass();
UPDATE sync.replicas SET provision_failed_at = provision_failed_at - interval '2 minutes';
SELECT provisioned FROM sync.relay_pass();
SELECT id, provision, provision_failed_at IS NOT NULL AS set_aside FROM sync.replicas ORDER BY id;

-- the fix deployed; a minute later (here: moved back) the parked notes are
-- read again: product 13 goes, with its stock row; the garbage note is parked again
CREATE OR REPLACE FUNCTION park.shown(p park.products) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
UPDATE sync.notes SET parked_at = parked_at - interval '2 minutes' WHERE parked IS NOT NULL;
SELECT notes_read, rows_sent, rows_taken FROM sync.relay_pass();
SELECT key, parked FROM sync.notes WHERE NOT done ORDER BY id;
SELECT count(*) AS quarantined FROM sync.quarantine;
SELECT * FROM held();
SELECT kind, waits_on, key, count FROM sync.health() WHERE kind <> 'provisioning';
DELETE FROM sync.notes WHERE key = 'garbage';
-- and the snapshot set aside goes once its minute is up
UPDATE sync.replicas SET provision_failed_at = provision_failed_at - interval '2 minutes';
SELECT provisioned FROM sync.relay_pass();
SELECT id, provision, provision_failed_at IS NOT NULL AS set_aside FROM sync.replicas ORDER BY id;

-- a batch whose failures spend the narrowing's budget (64 plans tried) before
-- every table of it is tried: the pass plans the rest again and narrows down
-- what still fails with a budget of its own, so the table left untried (the
-- broken shelf) is parked in the same pass, and the pass goes on
CREATE OR REPLACE FUNCTION park.shown(p park.products) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF p.name = 'broken' THEN
		RAISE EXCEPTION 'product % is broken', p.id;
	END IF;
	RETURN true;
END $$;
CREATE TABLE park.shelves (id int PRIMARY KEY, name text NOT NULL);
CREATE FUNCTION park.shelf_shown(s park.shelves) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF s.name = 'broken' THEN
		RAISE EXCEPTION 'shelf % is broken', s.id;
	END IF;
	RETURN true;
END $$;
CREATE VIEW park.shown_shelves AS SELECT * FROM park.shelves s WHERE park.shelf_shown(s);
SELECT sync.mirror('park.shelves', 'catalog', 'broadcast', active => 'park.shown_shelves');
INSERT INTO park.shelves VALUES (1, 'top'), (2, 'bottom');
INSERT INTO park.products SELECT g, 'p' || g FROM generate_series(100, 139) g;
SELECT notes_read FROM sync.relay_pass();
-- forty broken products narrowed down one by one spend the budget
UPDATE park.products SET name = 'broken' WHERE id BETWEEN 100 AND 139;
UPDATE park.shelves SET name = 'broken' WHERE id = 2;
SET client_min_messages = error;	-- a WARNING per part parked
SELECT notes_read, rows_sent FROM sync.relay_pass();
SET client_min_messages = warning;
SELECT t.name, count(*) FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
 WHERE n.parked IS NOT NULL AND NOT n.done GROUP BY t.name ORDER BY 1;
-- and a change elsewhere goes meanwhile
UPDATE park.products SET name = 'fine once more' WHERE id = 7;
UPDATE park.shelves SET name = 'top shelf' WHERE id = 1;
SELECT notes_read, rows_sent FROM sync.relay_pass();

-- a parked note read again a minute later, the bug still there, in a batch
-- with the note of a row pointing at its row (a stock row of the broken
-- product): only the notes to blame are parked again (its own, and the note
-- the quarantine wrote for its row), and the stock note goes.  The view's
-- function is STABLE this time, as a view's usually is
CREATE OR REPLACE FUNCTION park.shown(p park.products) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
	IF p.name = 'broken' THEN
		RAISE EXCEPTION 'product % is broken', p.id;
	END IF;
	RETURN true;
END $$;
UPDATE park.products SET name = 'broken' WHERE id = 14;
SET client_min_messages = error;
SELECT notes_read, rows_taken FROM sync.relay_pass();
SET client_min_messages = warning;
-- meanwhile, the view is tested only for the rows in question, whatever plan
-- the database picks: with every join hashed and every table scanned whole
-- (as a plan chosen once the candidates looked many does), another product's
-- change and a stock row's go, and are not parked for product 14's failure
-- (in a session of its own: a session's passes keep the plans they prepared)
\c contrib_regression_park
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';
SET enable_nestloop = off;
SET enable_mergejoin = off;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
UPDATE park.products SET name = 'fine, hashed' WHERE id = 13;
UPDATE park.stock SET qty = 8 WHERE product = 13;
SELECT notes_read, rows_sent FROM sync.relay_pass();
\c contrib_regression_park
SET client_min_messages = warning;
SET default_transaction_isolation = 'repeatable read';
SELECT t.name, n.key FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
 WHERE n.parked IS NOT NULL AND NOT n.done AND n.key IN (sync.key(ARRAY['13']), sync.key(ARRAY['14'])) ORDER BY n.id;
UPDATE sync.notes SET parked_at = parked_at - interval '2 minutes'
 WHERE parked IS NOT NULL AND key = sync.key(ARRAY['14']);
UPDATE sync.quarantine SET since = since - interval '2 minutes' WHERE key = sync.key(ARRAY['14']);
UPDATE park.stock SET qty = 7 WHERE product = 14;
SET client_min_messages = error;
SELECT notes_read FROM sync.relay_pass();
SET client_min_messages = warning;
SELECT t.name, n.key, n.parked IS NOT NULL AS parked FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
 WHERE NOT n.done AND (t.name = 'park.stock' OR n.key = sync.key(ARRAY['14'])) ORDER BY n.id;

-- the fixes deployed, and everything parked read again
CREATE OR REPLACE FUNCTION park.shown(p park.products) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OR REPLACE FUNCTION park.shelf_shown(s park.shelves) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
UPDATE sync.notes SET parked_at = parked_at - interval '2 minutes' WHERE parked IS NOT NULL;
SELECT rows_sent > 0 AS sent FROM sync.relay_pass();
SELECT count(*) AS parked FROM sync.notes WHERE parked IS NOT NULL AND NOT done;
SELECT count(*) AS quarantined FROM sync.quarantine;

-- code of the user's that remembers what it was asked before: a product and a
-- shelf each plan alone, and fail together.  No table's notes fail alone, so
-- the batch is halved across tables: both are parked, the pass goes on, and
-- a change elsewhere goes meanwhile (before, the pass failed for good)
CREATE TABLE park.asked (what text);
CREATE OR REPLACE FUNCTION park.shown(p park.products) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF p.name = 'remembers' THEN
		IF EXISTS (SELECT FROM park.asked WHERE what = 'shelf') THEN
			RAISE EXCEPTION 'product % asked after a shelf', p.id;
		END IF;
		INSERT INTO park.asked VALUES ('product');
	END IF;
	RETURN true;
END $$;
CREATE OR REPLACE FUNCTION park.shelf_shown(s park.shelves) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	IF s.name = 'remembers' THEN
		IF EXISTS (SELECT FROM park.asked WHERE what = 'product') THEN
			RAISE EXCEPTION 'shelf % asked after a product', s.id;
		END IF;
		INSERT INTO park.asked VALUES ('shelf');
	END IF;
	RETURN true;
END $$;
UPDATE park.products SET name = 'remembers' WHERE id = 9;
UPDATE park.shelves SET name = 'remembers' WHERE id = 1;
UPDATE park.products SET name = 'forgets' WHERE id = 10;
SET client_min_messages = error;
SELECT notes_read, rows_sent > 0 AS sent FROM sync.relay_pass();
SET client_min_messages = warning;
SELECT t.name, n.key, n.parked FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
 WHERE n.parked IS NOT NULL AND NOT n.done ORDER BY n.id;
SELECT t.name, q.key FROM sync.quarantine q JOIN sync.tables t ON t.id = q.tab ORDER BY 1, 2;
UPDATE park.products SET name = 'still fine' WHERE id = 11;
SELECT notes_read, rows_sent FROM sync.relay_pass();

\c contrib_regression
DROP DATABASE contrib_regression_park;
