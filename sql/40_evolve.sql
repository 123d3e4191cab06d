-- Schema changes (docs/design.md 4.11, docs/protocol.md 5.3): DDL on a
-- mirrored table reaches every replica as a schema change in the chain, in
-- the first message written for it, with only the rows the change needs and
-- nothing of any other table; what a schema change cannot carry provisions
-- again only the replicas holding the table.  The messages are decoded with
-- sync.inspect; after every pass, what each replica holds is its wanted set.
-- In a database of its own: no other test's replicas are in its fleet.
SET client_min_messages = warning;
CREATE DATABASE contrib_regression_evolve;
\c contrib_regression_evolve
SET client_min_messages = notice;
SET default_transaction_isolation = 'repeatable read';
CREATE EXTENSION magic_sync;
CREATE SCHEMA evt;
-- what a replica was sent since it last acknowledged, one line per message:
-- the tables changed (columns name:id, ! not null; their fill; their unique
-- indexes), the tables let go of, and per table its upserts (+) and deletes (-)
CREATE FUNCTION evt.sent(r uuid)
	RETURNS TABLE (message bigint, schema text, let_go text, rows text) LANGUAGE sql AS $$
	WITH m AS (SELECT row_number() OVER (ORDER BY p.number) AS n, sync.inspect(p.message) -> 'down' AS d
	             FROM sync.pull(r, (SELECT acked_number FROM sync.replicas WHERE id = r), 100000000) p
	            WHERE p.number IS NOT NULL)
	SELECT m.n,
	       (SELECT string_agg(t ->> 'name' || '('
	                || (SELECT string_agg(c ->> 'name' || ':' || (c ->> 'id')
	                                      || CASE WHEN (c ->> 'not_null')::boolean THEN '!' ELSE '' END, ',')
	                      FROM jsonb_array_elements(t -> 'columns') c) || ')'
	                || CASE WHEN t -> 'fill' <> 'null' THEN ' fill ' || (t -> 'fill')::text ELSE '' END
	                || CASE WHEN jsonb_array_length(t -> 'unique') > 0
	                        THEN ' unique ' || (t -> 'unique')::text ELSE '' END, '; ')
	          FROM jsonb_array_elements(m.d -> 'schema') t),
	       (SELECT string_agg(x, ', ') FROM jsonb_array_elements_text(m.d -> 'let_go') x),
	       (SELECT string_agg(t ->> 'table' || ' +' || jsonb_array_length(t -> 'upserts')
	                          || ' -' || jsonb_array_length(t -> 'deletes'), ', ')
	          FROM jsonb_array_elements(m.d -> 'tables') t)
	  FROM m ORDER BY m.n
$$;
-- both replicas at once
CREATE FUNCTION evt.sent_all()
	RETURNS TABLE (replica text, message bigint, schema text, let_go text, rows text) LANGUAGE sql AS $$
	SELECT right(r.id::text, 1), s.* FROM sync.replicas r, evt.sent(r.id) s ORDER BY 1, 2
$$;
-- acknowledge everything sent so far, as a replica would (filing is tested apart)
CREATE FUNCTION evt.ack() RETURNS void LANGUAGE sql AS $$
	UPDATE sync.replicas r SET acked_number = r.last_number;
	DELETE FROM sync.held h USING sync.replicas r WHERE h.replica = r.id AND h.taken <= r.acked_number;
	DELETE FROM sync.outbox o USING sync.replicas r WHERE o.replica = r.id AND o.number <= r.acked_number;
$$;
-- whether every replica holds exactly its wanted set
CREATE FUNCTION evt.agree() RETURNS TABLE (replica text, agrees boolean) LANGUAGE sql AS $$
	SELECT right(r.id::text, 1),
	       ARRAY(SELECT h.tab || ' ' || h.key FROM sync.held h WHERE h.replica = r.id AND h.taken IS NULL ORDER BY 1)
	       = ARRAY(SELECT t.id || ' ' || w.key FROM sync.wanted(r.id) w JOIN sync.tables t ON t.relid = w.tab ORDER BY 1)
	  FROM sync.replicas r ORDER BY 1
$$;
-- a pass, what it did
CREATE FUNCTION evt.pass() RETURNS TABLE (provisioned bigint, rows_sent bigint, rows_taken bigint, messages bigint)
	LANGUAGE sql AS $$
	SELECT provisioned, rows_sent, rows_taken, messages FROM sync.relay_pass()
$$;

CREATE SCHEMA ev;
CREATE TABLE ev.makers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE ev.products (id int PRIMARY KEY, name text NOT NULL, maker int);
CREATE TABLE ev.stock (store uuid, product int REFERENCES ev.products, qty int NOT NULL, counted int,
	PRIMARY KEY (store, product));
CREATE TABLE ev.notices (id int PRIMARY KEY, body text, region text);
CREATE TABLE ev.tasks (id int PRIMARY KEY, store uuid NOT NULL, what text);
SELECT sync.mirror('ev.makers', 'catalog');
SELECT sync.mirror('ev.products', 'catalog', 'broadcast');
SELECT sync.mirror('ev.stock', 'catalog', 'assigned(store)', replica_owned => '{counted}');
SELECT sync.mirror('ev.notices', 'catalog', 'broadcast', codec => 'proto');
SELECT sync.mirror('ev.tasks', 'catalog', 'assigned(store)');
INSERT INTO ev.makers VALUES (1, 'acme'), (2, 'globex');
INSERT INTO ev.products VALUES (1, 'tea', 1), (2, 'coffee', 2), (3, 'cocoa', NULL);
INSERT INTO ev.stock VALUES ('aaaaaaaa-0000-0000-0000-000000000001', 1, 10, NULL),
	('aaaaaaaa-0000-0000-0000-000000000001', 2, 5, NULL), ('aaaaaaaa-0000-0000-0000-000000000002', 3, 7, NULL);
INSERT INTO ev.notices VALUES (1, 'open', 'north'), (2, 'closed', 'south');
INSERT INTO ev.tasks VALUES (1, 'aaaaaaaa-0000-0000-0000-000000000001', 'count');
SELECT sync.replica_add('aaaaaaaa-0000-0000-0000-000000000001');
SELECT sync.replica_add('aaaaaaaa-0000-0000-0000-000000000002');
SELECT * FROM evt.pass();
SELECT evt.ack();

-- a column added with a default PostgreSQL evaluates once: every row took
-- it, so the change carries it as the fill, and no row goes
ALTER TABLE ev.products ADD COLUMN price int NOT NULL DEFAULT 0;
SELECT * FROM evt.pass();
SELECT * FROM evt.sent_all();
SELECT * FROM evt.agree();
SELECT evt.ack();
-- without a default: NULL, nothing to fill; a text default of a time zone's
-- type is written so any session reads it back the same
ALTER TABLE ev.products ADD COLUMN note text, ADD COLUMN since timestamptz DEFAULT '2026-01-02 03:04:05+02';
SELECT fills FROM sync.tables WHERE name = 'ev.products';
SELECT * FROM evt.pass();
SELECT * FROM evt.sent('aaaaaaaa-0000-0000-0000-000000000001');
SELECT evt.ack();
-- values row by row (a volatile default, a generated column): the rows again,
-- of that table only
ALTER TABLE ev.products ADD COLUMN code int DEFAULT (random() * 0)::int;
SELECT * FROM evt.pass();
SELECT * FROM evt.sent_all();
SELECT evt.ack();
ALTER TABLE ev.products ADD COLUMN name_len int GENERATED ALWAYS AS (length(name)) STORED;
SELECT * FROM evt.pass();
SELECT evt.ack();

-- a column renamed: followed by attnum, its id kept; the relay never stops
ALTER TABLE ev.products RENAME COLUMN name TO title;
SELECT key, (SELECT jsonb_object_agg(k, v) FROM jsonb_each(ids) e(k, v) WHERE k IN ('title', 'price')) AS ids
  FROM sync.tables WHERE name = 'ev.products';
SELECT * FROM sync.check();
SELECT * FROM evt.pass();
SELECT * FROM evt.sent('aaaaaaaa-0000-0000-0000-000000000001');
SELECT evt.ack();
-- a renamed key column of another table, and one its rule names; an upload of
-- its rows waiting in the inbox is filed again by the new name
INSERT INTO sync.inbox (replica, tab, key, row, reason)
	SELECT 'aaaaaaaa-0000-0000-0000-000000000001', id, '36:aaaaaaaa-0000-0000-0000-0000000000011:1',
	       convert_to('{"store": "aaaaaaaa-0000-0000-0000-000000000001", "product": 1, "counted": 3}', 'UTF8'),
	       'waits' FROM sync.tables WHERE name = 'ev.stock';
ALTER TABLE ev.stock RENAME COLUMN store TO shop;
SELECT key, rule_column, replica_owned FROM sync.tables WHERE name = 'ev.stock';
SELECT convert_from(row, 'UTF8')::jsonb AS waiting FROM sync.inbox;
DELETE FROM sync.inbox;
SELECT * FROM evt.pass();
SELECT evt.ack();
-- dropped: the schema change only
ALTER TABLE ev.products DROP COLUMN note;
SELECT * FROM evt.pass();
SELECT evt.ack();
-- a type changed: the table's rows again
ALTER TABLE ev.products ALTER COLUMN price TYPE bigint;
SELECT * FROM evt.pass();
SELECT evt.ack();
-- NOT NULL set, a unique index that travels made and dropped: the schema change only
ALTER TABLE ev.products ALTER COLUMN code SET NOT NULL;
ALTER TABLE ev.products ALTER COLUMN code DROP NOT NULL;
ALTER TABLE ev.notices ALTER COLUMN body SET NOT NULL;
CREATE UNIQUE INDEX notices_body ON ev.notices (body);
SELECT * FROM evt.pass();
SELECT * FROM evt.sent('aaaaaaaa-0000-0000-0000-000000000002');
SELECT evt.ack();
DROP INDEX ev.notices_body;
SELECT * FROM evt.pass();
SELECT evt.ack();
-- a proto table's new column gets its field, for good
ALTER TABLE ev.notices ADD COLUMN pinned boolean NOT NULL DEFAULT false;
SELECT line FROM regexp_split_to_table(sync.proto('ev.notices'), E'\n') line WHERE line LIKE '%pinned%';
SELECT * FROM evt.pass();
SELECT * FROM evt.sent('aaaaaaaa-0000-0000-0000-000000000002');
SELECT evt.ack();
-- a table renamed: replicas know it by its new name
ALTER TABLE ev.notices RENAME TO bulletins;
SELECT name FROM sync.tables WHERE relid = 'ev.bulletins'::regclass;
SELECT * FROM evt.pass();
SELECT * FROM evt.sent('aaaaaaaa-0000-0000-0000-000000000002');
SELECT evt.ack();

-- a foreign key added: the table is planned again and its parents follow
ALTER TABLE ev.products ADD CONSTRAINT products_maker FOREIGN KEY (maker) REFERENCES ev.makers;
SELECT * FROM evt.pass();
SELECT * FROM evt.sent_all();
SELECT * FROM evt.agree();
SELECT evt.ack();
-- dropped: they may go, and do
ALTER TABLE ev.products DROP CONSTRAINT products_maker;
SELECT * FROM evt.pass();
SELECT * FROM evt.sent_all();
SELECT * FROM evt.agree();
SELECT evt.ack();

-- a new mirrored table: its schema and its rows, nothing else
CREATE TABLE ev.regions (id int PRIMARY KEY, name text);
INSERT INTO ev.regions VALUES (1, 'north'), (2, 'south');
SELECT sync.mirror('ev.regions', 'catalog', 'broadcast');
SELECT * FROM evt.pass();
SELECT * FROM evt.sent_all();
SELECT evt.ack();
-- declared again with another rule and an active view, its child (stock) left
-- declared: planned again from what each replica holds
CREATE VIEW ev.cheap AS SELECT * FROM ev.products WHERE id <> 2;
SELECT sync.mirror('ev.products', 'catalog', 'broadcast', active => 'ev.cheap');
SELECT * FROM evt.pass();
SELECT * FROM evt.sent_all();
SELECT * FROM evt.agree();
SELECT evt.ack();
-- a column given to the replicas: the schema change only; taken back: the rows again
SELECT sync.mirror('ev.products', 'catalog', 'broadcast', active => 'ev.cheap', replica_owned => '{code}');
SELECT * FROM evt.pass();
SELECT evt.ack();
SELECT sync.mirror('ev.products', 'catalog', 'broadcast', active => 'ev.cheap');
SELECT * FROM evt.pass();
SELECT evt.ack();
-- a column that stops travelling (unmirrored): the schema change only, the
-- replicas drop it; travelling again: the rows again, with its values
SELECT sync.mirror('ev.products', 'catalog', 'broadcast', active => 'ev.cheap', unmirrored => '{code}');
SELECT * FROM evt.pass();
SELECT * FROM evt.sent('aaaaaaaa-0000-0000-0000-000000000001');
SELECT evt.ack();
SELECT sync.mirror('ev.products', 'catalog', 'broadcast', active => 'ev.cheap');
SELECT * FROM evt.pass();
SELECT * FROM evt.agree();
SELECT evt.ack();

-- declared again with a partition: each replica keeps only its partition's
-- rows of that table, the others taken back, and no replica is provisioned
-- (giving a replica a partition, before, provisions it: sync.replica_set's)
SELECT sync.replica_set('aaaaaaaa-0000-0000-0000-000000000001', "partition" => 'north');
SELECT sync.replica_set('aaaaaaaa-0000-0000-0000-000000000002', "partition" => 'south');
SELECT provisioned FROM evt.pass();
SELECT evt.ack();
SELECT sync.mirror('ev.bulletins', 'catalog', 'broadcast', codec => 'proto', "partition" => 'region');
SELECT * FROM evt.pass();
SELECT * FROM evt.sent_all();
SELECT * FROM evt.agree();
SELECT right(h.replica::text, 1) AS replica, b.region FROM sync.held h
  JOIN sync.tables t ON t.id = h.tab AND t.name = 'ev.bulletins'
  JOIN ev.bulletins b ON h.key = sync.key(ARRAY[b.id::text])
 WHERE h.taken IS NULL ORDER BY 1, 2;
SELECT evt.ack();
-- unmirrored: its replicas let it go (rows taken back by that message)
SELECT sync.unmirror('ev.regions');
SELECT * FROM evt.pass();
SELECT * FROM evt.sent_all();
SELECT count(*) AS taken FROM sync.held h WHERE h.taken IS NOT NULL;
SELECT evt.ack();
SELECT count(*) AS held FROM sync.held WHERE tab NOT IN (SELECT id FROM sync.tables);
-- a mirrored table dropped is unmirrored
DROP TABLE ev.bulletins;
SELECT count(*) FROM sync.tables WHERE name = 'ev.bulletins';
SELECT * FROM evt.pass();
SELECT * FROM evt.sent_all();
SELECT evt.ack();

-- what a schema change cannot carry (a key column's type): only the replica
-- holding the table's rows is provisioned again, the other sent the change
ALTER TABLE ev.tasks ALTER COLUMN id TYPE bigint;
SELECT right(id::text, 1) AS replica, provision, last_error FROM sync.replicas ORDER BY 1;
SELECT kind, right(replica::text, 1) AS replica, reason FROM sync.health() ORDER BY 1, 2;
SELECT * FROM evt.pass();
SELECT replica, message, schema IS NOT NULL AS changed, rows FROM evt.sent_all() WHERE replica = '2';
SELECT * FROM evt.agree();
SELECT evt.ack();
SELECT * FROM sync.check();

-- a declaration made again with another key changes no column: its notice
-- lists no change (issue 39: it said "the schema change ()")
CREATE UNIQUE INDEX tasks_store_id ON ev.tasks (store, id);
SELECT sync.mirror('ev.tasks', 'catalog', 'assigned(store)', key => '{store,id}');
SELECT right(id::text, 1) AS replica, provision FROM sync.replicas ORDER BY 1;
SELECT * FROM evt.pass();
SELECT evt.ack();

-- leave nothing behind
\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE contrib_regression_evolve;
