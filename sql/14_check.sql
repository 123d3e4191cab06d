-- sync.check: one row per problem with a trigger or a declaration.
-- start from an empty catalog: ids are deterministic
DO $$ BEGIN PERFORM setval('sync.tables_id_seq', 1, false); END $$;
CREATE TABLE customers (id bigint PRIMARY KEY, name text);
CREATE TABLE orders (id int PRIMARY KEY, customer bigint REFERENCES customers,
	total numeric, note text, extra int);
CREATE INDEX ON orders (customer);
CREATE TABLE regions (region text NOT NULL, id int NOT NULL, PRIMARY KEY (region, id))
	PARTITION BY LIST (region);
CREATE TABLE regions_a PARTITION OF regions FOR VALUES IN ('a');
CREATE TABLE lists (id int PRIMARY KEY);
CREATE TABLE list_members (list int REFERENCES lists, grp text, PRIMARY KEY (list, grp));
CREATE TABLE list_owners (grp text, replica uuid, PRIMARY KEY (grp, replica));
SELECT sync.mirror('customers', 'catalog', 'broadcast');
SELECT sync.mirror('orders', 'catalog', unmirrored => '{note}', codec => 'proto');
SELECT sync.mirror('regions', 'catalog', 'broadcast');
SELECT sync.mirror('lists', 'catalog', 'grouped(members => public.list_members, assigned => public.list_owners)');
SELECT * FROM sync.check();

-- triggers dropped, disabled, altered, on a partition, on a group table
DROP TRIGGER magic_sync_note ON customers;
ALTER TABLE orders DISABLE TRIGGER magic_sync_truncate;
DROP TRIGGER magic_sync_truncate ON regions_a;
ALTER TABLE regions_a DISABLE TRIGGER magic_sync_note;
CREATE TABLE regions_b PARTITION OF regions FOR VALUES IN ('b');
DROP TRIGGER magic_sync_member_4 ON list_members;
CREATE TRIGGER magic_sync_member_4 AFTER INSERT ON list_members
	FOR EACH ROW EXECUTE FUNCTION sync.note('4', 'm', '1', 'list', 'grp');
ALTER TABLE list_owners ENABLE REPLICA TRIGGER magic_sync_assignment_4;
SELECT * FROM sync.check() ORDER BY 1, 2, 3;
SELECT sync.retrigger('customers');
SELECT sync.retrigger('orders');
SELECT sync.retrigger('regions');
SELECT sync.retrigger('lists');
SELECT * FROM sync.check();
-- every noting trigger fires ALWAYS, on partitions and group tables too
SELECT g.tgrelid::regclass, g.tgname, g.tgenabled FROM pg_trigger g
 WHERE g.tgname LIKE 'magic\_sync\_%' ORDER BY 1, 2;

-- declarations that no longer match their tables: DDL the event triggers do
-- not see (they fire in origin mode, not with session_replication_role =
-- replica, as in a restore); what they follow is 40_evolve's
SET session_replication_role = replica;
ALTER TABLE orders ALTER COLUMN total TYPE int;
ALTER TABLE orders DROP COLUMN extra;
ALTER TABLE orders DROP COLUMN note;
ALTER TABLE orders ADD COLUMN added text;
ALTER TABLE customers RENAME COLUMN name TO full_name;
SELECT * FROM sync.check() ORDER BY 1, 2, 3;
ALTER TABLE orders DROP CONSTRAINT orders_customer_fkey;
CREATE TABLE notes_x (id int PRIMARY KEY);
ALTER TABLE customers ADD COLUMN x int REFERENCES notes_x;
ALTER TABLE lists ADD COLUMN owner bigint REFERENCES customers;
CREATE INDEX ON lists (owner);
ALTER TABLE regions DROP CONSTRAINT regions_pkey;
ALTER TABLE list_members DROP COLUMN grp;
SELECT * FROM sync.check() ORDER BY 1, 2, 3;
DROP TABLE regions;
ALTER TABLE customers RENAME TO clients;
SELECT * FROM sync.check() ORDER BY 1, 2, 3;
RESET session_replication_role;
SELECT sync.retrigger('orders');
-- a declaration that does not match holds its table back: the relay's description leaves it out
SELECT sync.replica_add('7c9e6679-7425-40de-944b-e07fc1f90ae7');
SELECT sync.wanted('7c9e6679-7425-40de-944b-e07fc1f90ae7');

-- one validator: what sync.mirror refuses when declaring, sync.check finds
-- when the table is changed that way later
CREATE TABLE stock (id int PRIMARY KEY, shop uuid NOT NULL, qty int);
SELECT sync.mirror('stock', 'catalog', 'assigned(shop)', retired => 'gone');
SELECT * FROM sync.check() WHERE tab = 'stock';
SET session_replication_role = replica;
ALTER TABLE stock ALTER COLUMN shop TYPE text;
ALTER TABLE stock ADD COLUMN gone int;
RESET session_replication_role;
SELECT * FROM sync.check() WHERE tab = 'stock' ORDER BY 1, 2, 3;

-- Every change is noted (issue 19.8): the noting triggers are ENABLE ALWAYS,
-- so a write under session_replication_role = replica (a logical
-- replication subscriber applying, pg_restore --disable-triggers) is noted
-- too; a trigger enabled only for origin sessions, as ENABLE TRIGGER (ALL)
-- after such a restore leaves it, is reported, and sync.retrigger puts it right.
CREATE TABLE replicated (id int PRIMARY KEY, v text);
SELECT sync.mirror('replicated', 'catalog', 'broadcast');
SET session_replication_role = replica;
INSERT INTO replicated VALUES (1, 'a');
UPDATE replicated SET v = 'b';
RESET session_replication_role;
SELECT n.key, n.old_key FROM sync.notes n JOIN sync.tables t ON t.id = n.tab
 WHERE t.relid = 'replicated'::regclass ORDER BY n.id;
ALTER TABLE replicated DISABLE TRIGGER ALL;
ALTER TABLE replicated ENABLE TRIGGER ALL;
SELECT * FROM sync.check() WHERE tab = 'replicated' ORDER BY 1, 2, 3;
SELECT sync.retrigger('replicated');
SELECT * FROM sync.check() WHERE tab = 'replicated';
SELECT g.tgname, g.tgenabled FROM pg_trigger g WHERE g.tgrelid = 'replicated'::regclass ORDER BY 1;

-- leave nothing behind for the next test
DO $$
DECLARE r regclass;
BEGIN
	FOR r IN SELECT relid FROM sync.tables ORDER BY id DESC LOOP
		PERFORM sync.unmirror(r);
	END LOOP;
END
$$;
DROP TABLE clients, orders, lists, list_members, list_owners, notes_x, stock, replicated CASCADE;
DELETE FROM sync.replicas;
TRUNCATE sync.notes;
