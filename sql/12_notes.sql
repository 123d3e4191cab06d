-- Noting: every change of a mirrored row writes one note in the writer's
-- transaction; an update of replica-owned or unmirrored columns only, and a
-- rolled-back change, leave none; TRUNCATE is refused.
-- start from an empty catalog: ids are deterministic
DO $$ BEGIN PERFORM setval('sync.tables_id_seq', 1, false); END $$;
CREATE SCHEMA "Shop";
CREATE TABLE "Shop".customers (id bigint PRIMARY KEY, name text);
CREATE TABLE "Shop"."Stock Items" (
	store uuid NOT NULL,
	"Item" text NOT NULL,
	qty int,
	counted int,
	note text,
	customer bigint REFERENCES "Shop".customers,
	PRIMARY KEY (store, "Item")
);
SELECT sync.mirror('"Shop".customers', 'catalog');
SELECT sync.mirror('"Shop"."Stock Items"', 'catalog', 'assigned(store)',
	replica_owned => '{counted}', unmirrored => '{note}');
CREATE VIEW notes AS
	SELECT n.id - (SELECT coalesce(min(id), 1) FROM sync.notes) + 1 AS n,
		t.name AS tab, n.source, sync.key_parts(n.key) AS key, n.part,
		sync.key_parts(n.old_key) AS old_key, n.old_part, n.pointed, n.replica, n.grp,
		n.xid = pg_current_xact_id() AS this_xact, n.done
	  FROM sync.notes n JOIN sync.tables t ON t.id = n.tab;

BEGIN;
INSERT INTO "Shop".customers VALUES (1, 'Ann'), (2, 'Bo');
INSERT INTO "Shop"."Stock Items" VALUES
	('7c9e6679-7425-40de-944b-e07fc1f90ae7', 'tea', 5, NULL, 'x', 1);
SELECT * FROM notes ORDER BY n;
COMMIT;
TRUNCATE sync.notes;

-- updates: a noted column, an owned column only, an unmirrored column only,
-- nothing at all, the key, a foreign key
UPDATE "Shop"."Stock Items" SET qty = 6;
UPDATE "Shop"."Stock Items" SET counted = 4;
UPDATE "Shop"."Stock Items" SET note = 'y';
UPDATE "Shop"."Stock Items" SET counted = 5, note = 'z';
UPDATE "Shop"."Stock Items" SET qty = qty;
UPDATE "Shop"."Stock Items" SET "Item" = 'green tea';
UPDATE "Shop"."Stock Items" SET customer = 2;
UPDATE "Shop"."Stock Items" SET customer = NULL;
DELETE FROM "Shop"."Stock Items";
SELECT * FROM notes ORDER BY n;
TRUNCATE sync.notes;

-- rolled back, wholly or to a savepoint: no note
BEGIN;
INSERT INTO "Shop".customers VALUES (3, 'Cy');
ROLLBACK;
BEGIN;
INSERT INTO "Shop".customers VALUES (4, 'Di');
SAVEPOINT s;
INSERT INTO "Shop".customers VALUES (5, 'Ed');
UPDATE "Shop".customers SET name = 'Ann B' WHERE id = 1;
ROLLBACK TO SAVEPOINT s;
DELETE FROM "Shop".customers WHERE id = 2;
COMMIT;
SELECT * FROM notes ORDER BY n;
TRUNCATE sync.notes;

-- TRUNCATE is refused
TRUNCATE "Shop".customers CASCADE;
TRUNCATE "Shop"."Stock Items";
SELECT count(*) FROM "Shop".customers;

-- a partitioned table, declared by its parent, with a partition column:
-- a row moving between partitions (of PostgreSQL, or of replicas) is noted
-- in the one it left too
CREATE TABLE regions (region text NOT NULL, id int NOT NULL, zone text NOT NULL,
	name text, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE regions_north PARTITION OF regions FOR VALUES IN ('north');
CREATE TABLE regions_south (zone text NOT NULL, name text, id int NOT NULL, region text NOT NULL);
ALTER TABLE regions ATTACH PARTITION regions_south FOR VALUES IN ('south');
SELECT sync.mirror('regions', 'catalog', 'broadcast', "partition" => 'zone');
SELECT sync.mirror('regions_north', 'catalog', 'broadcast');
INSERT INTO regions VALUES ('north', 1, 'z1', 'a'), ('south', 2, 'z2', 'b');
UPDATE regions SET zone = 'z3' WHERE id = 1;
UPDATE regions SET region = 'south' WHERE id = 1;
UPDATE regions SET name = 'c' WHERE id = 2;
DELETE FROM regions WHERE id = 2;
SELECT * FROM notes ORDER BY n;
TRUNCATE sync.notes;
TRUNCATE regions;
TRUNCATE regions_north;
SELECT count(*) FROM regions;

-- a group: members joining and leaving, groups given and taken
CREATE TABLE price_lists (id int PRIMARY KEY, name text);
CREATE TABLE price_list_groups (price_list int NOT NULL REFERENCES price_lists,
	grp text NOT NULL, PRIMARY KEY (price_list, grp));
CREATE TABLE group_replicas (grp text NOT NULL, replica uuid NOT NULL, PRIMARY KEY (grp, replica));
SELECT sync.mirror('price_lists', 'catalog',
	'grouped( members => public.price_list_groups , assigned => "public"."group_replicas" )');
SELECT name, sync FROM sync.mirrors WHERE name = 'price_lists';
INSERT INTO price_lists VALUES (1, 'retail'), (2, 'trade');
INSERT INTO price_list_groups VALUES (1, 'city'), (2, 'city');
INSERT INTO group_replicas VALUES ('city', '0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1');
UPDATE price_list_groups SET grp = 'town' WHERE price_list = 2;
UPDATE group_replicas SET replica = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
DELETE FROM price_list_groups WHERE price_list = 1;
DELETE FROM group_replicas;
SELECT * FROM notes ORDER BY n;
TRUNCATE price_list_groups;
TRUNCATE group_replicas;

-- sync.note is a trigger only, and only as sync.mirror writes it
SELECT sync.note();
TRUNCATE sync.notes;
CREATE TABLE misuse (id int PRIMARY KEY, code text);
CREATE TRIGGER t BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION sync.note('1', 'r');
INSERT INTO misuse VALUES (1);
DROP TRIGGER t ON misuse;
CREATE TRIGGER t AFTER INSERT ON misuse FOR EACH STATEMENT EXECUTE FUNCTION sync.note('1', 'r');
INSERT INTO misuse VALUES (1);
DROP TRIGGER t ON misuse;
CREATE TRIGGER t AFTER INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION sync.note('one', 'r');
INSERT INTO misuse VALUES (1);
DROP TRIGGER t ON misuse;
CREATE TRIGGER t AFTER INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION sync.note('1', 'r', '1');
INSERT INTO misuse VALUES (1);
DROP TRIGGER t ON misuse;
CREATE TRIGGER t AFTER INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION sync.note('1', 'r', '0');
INSERT INTO misuse VALUES (1);
DROP TRIGGER t ON misuse;
CREATE TRIGGER t AFTER INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION sync.note('1', 't');
INSERT INTO misuse VALUES (1);
DROP TRIGGER t ON misuse;
CREATE TRIGGER t AFTER INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION sync.note('1', 'r', '1', 'nope');
INSERT INTO misuse VALUES (1);
DROP TRIGGER t ON misuse;
SELECT count(*) FROM misuse;
-- a key column made nullable after it was declared: the row cannot be noted
CREATE UNIQUE INDEX misuse_code ON misuse (code);
ALTER TABLE misuse ALTER COLUMN code SET NOT NULL;
SELECT sync.mirror('misuse', 'catalog', key => '{code}');
ALTER TABLE misuse ALTER COLUMN code DROP NOT NULL;
INSERT INTO misuse VALUES (2, NULL);
INSERT INTO misuse VALUES (3, 'c');
SELECT tab, key FROM notes ORDER BY n;
SELECT tab, problem, detail FROM sync.check() WHERE tab = 'misuse';
TRUNCATE sync.notes;

-- notes of the top level wait in the backend and are written at commit,
-- many in one insert: a statement of the transaction reading them sees
-- them as written, ids are drawn when noted (currval), more than a buffer
-- of them are all written, and a transaction failing at commit leaves none
-- behind for the next
CREATE TABLE buffered (id int PRIMARY KEY, v int);
SELECT sync.mirror('buffered', 'catalog');
BEGIN;
INSERT INTO buffered VALUES (1, 0);
SELECT currval('sync.note_seq') = (SELECT max(id) FROM sync.notes) AS drawn_when_noted;
UPDATE buffered SET v = 1;
INSERT INTO buffered SELECT g, 0 FROM generate_series(2, 150) g;
SELECT count(*), count(DISTINCT n), bool_and(this_xact) FROM notes WHERE tab = 'buffered';
UPDATE buffered SET v = 2 WHERE id <= 70;
SAVEPOINT s;
UPDATE buffered SET v = 3 WHERE id = 1;
ROLLBACK TO SAVEPOINT s;
DELETE FROM buffered WHERE id = 150;
COMMIT;
SELECT count(*), count(DISTINCT n), min(key[1]::int), max(key[1]::int) FROM notes WHERE tab = 'buffered';
TRUNCATE sync.notes;
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON buffered
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.id = 999) EXECUTE FUNCTION refuse();
BEGIN;
UPDATE buffered SET v = 4 WHERE id = 1;
INSERT INTO buffered VALUES (999, 0);
COMMIT;
UPDATE buffered SET v = 5 WHERE id = 2;
SELECT tab, key FROM notes ORDER BY n;
-- a transaction whose only note waits at the top level, while a
-- subtransaction's is written at once, both kept on commit
BEGIN;
UPDATE buffered SET v = 6 WHERE id = 3;
SAVEPOINT s;
UPDATE buffered SET v = 6 WHERE id = 4;
RELEASE SAVEPOINT s;
COMMIT;
SELECT tab, key FROM notes ORDER BY n;
TRUNCATE sync.notes;

-- a note goes into the indexes of sync.notes whose predicate it meets, as
-- an INSERT's row would: the backend knows once which take every note
-- (notes_pending), which none (notes_done, notes_parked), and asks the rest
-- per note; an index made after it knew is known at the next note
-- (amcheck: every heap row an index's predicate admits is in the index)
CREATE EXTENSION amcheck;
UPDATE buffered SET v = 7 WHERE id = 5;
CREATE INDEX notes_built ON sync.notes (id) WHERE build = 1;
CREATE INDEX notes_later ON sync.notes (id) WHERE build > 1 AND NOT done;
CREATE INDEX notes_keyed ON sync.notes (key) WHERE key LIKE '%7%';
UPDATE buffered SET v = 7 WHERE id IN (6, 7);
DROP INDEX sync.notes_built;
BEGIN;
UPDATE buffered SET v = 8 WHERE id = 17;
UPDATE buffered SET v = 8 WHERE id = 27;
COMMIT;
SELECT count(*) AS notes, count(*) FILTER (WHERE key[1] LIKE '%7%') AS sevens FROM notes;
SELECT count(*) AS checked
  FROM unnest(ARRAY['sync.notes_pending', 'sync.notes_done', 'sync.notes_parked', 'sync.notes_later',
                    'sync.notes_keyed']) i,
       LATERAL (SELECT bt_index_check(i::regclass, true)) c;
DROP INDEX sync.notes_later, sync.notes_keyed;
DROP EXTENSION amcheck;
TRUNCATE sync.notes;

-- leave nothing behind for the next test
DO $$
DECLARE r regclass;
BEGIN
	FOR r IN SELECT relid FROM sync.tables ORDER BY id DESC LOOP
		PERFORM sync.unmirror(r);
	END LOOP;
END
$$;
DROP VIEW notes;
DROP TABLE "Shop".customers, "Shop"."Stock Items", regions, price_lists, price_list_groups, group_replicas, misuse, buffered CASCADE;
DROP FUNCTION refuse();
DELETE FROM sync.replicas;
TRUNCATE sync.notes;
DROP SCHEMA "Shop";
