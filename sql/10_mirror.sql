-- Declaring tables: sync.mirror stores a declaration and installs its
-- triggers; every misuse is refused with its own error.
-- start from an empty catalog: ids are deterministic
DO $$ BEGIN PERFORM setval('sync.tables_id_seq', 1, false); END $$;
CREATE TABLE customers (id bigint PRIMARY KEY, name text);
CREATE TABLE products (id int PRIMARY KEY, name text, cost numeric, secret text,
	shelf int);
CREATE SCHEMA "Odd Schema";
CREATE TABLE "Odd Schema"."Mixed Case" ("Code" text NOT NULL, part int NOT NULL,
	"Label" text, UNIQUE ("Code", part));
CREATE TABLE sales (store uuid NOT NULL, id bigint NOT NULL, customer bigint REFERENCES customers,
	total numeric, at timestamptz NOT NULL DEFAULT now(), filed timestamptz,
	score int GENERATED ALWAYS AS (1) STORED, who jsonb, PRIMARY KEY (store, id));
CREATE TABLE orders (id int PRIMARY KEY, store uuid, customer bigint REFERENCES customers,
	parent int REFERENCES orders);
CREATE TABLE order_lines (order_id int NOT NULL REFERENCES orders, line int NOT NULL,
	product int NOT NULL REFERENCES products, PRIMARY KEY (order_id, line));

-- a catalog, a record, composite keys, quoted names, a schema, a proto codec
SELECT sync.mirror('customers', 'catalog');
SELECT sync.mirror('products', 'catalog', 'broadcast', unmirrored => '{secret}',
	replica_owned => '{shelf}', codec => 'proto');
SELECT sync.mirror('"Odd Schema"."Mixed Case"', 'catalog', '  broadcast  ',
	key => '{Code,part}');
SELECT sync.mirror('sales', 'record', 'assigned ( "store" )', key => '{store,id}',
	origin => 'store', version => 'at', retired => 'gone', created => 'filed',
	generated => '{score}', sender => 'who');
SELECT sync.mirror('orders', 'catalog', 'assigned(store)');
SELECT sync.mirror('order_lines', 'catalog', 'follows(order_id)');
SELECT id, "table", name, mirror, sync, key, origin, version, replica_owned, unmirrored,
	retired, created, generated, active, partition, codec, sender
  FROM sync.mirrors ORDER BY id;
SELECT name, fields, columns, foreign_keys FROM sync.tables ORDER BY id;
SELECT c.relname, t.tgname, t.tgtype, t.tgenabled,
	translate(encode(t.tgargs, 'escape'), E'\\000', '|') AS args
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE NOT t.tgisinternal AND c.relnamespace <> 'sync'::regnamespace ORDER BY 1, 2;

-- misuses
SELECT sync.mirror(NULL, 'catalog');
-- (declared again as it is: nothing changes; with other options, 40_evolve)
SELECT sync.mirror('customers', 'catalog');
CREATE VIEW customer_names AS SELECT id, name FROM customers;
SELECT sync.mirror('customer_names', 'catalog');
CREATE TABLE t1 (id int PRIMARY KEY, store uuid, n int, code text NOT NULL, v int,
	at timestamptz, j json, who text);
SELECT sync.mirror('t1', 'mirror');
SELECT sync.mirror('t1', 'catalog', 'sometimes');
SELECT sync.mirror('t1', 'catalog', 'assigned');
SELECT sync.mirror('t1', 'catalog', 'assigned(store');
SELECT sync.mirror('t1', 'catalog', 'assigned(store, n)');
SELECT sync.mirror('t1', 'catalog', 'broadcast now');
SELECT sync.mirror('t1', 'catalog', 'assigned("store)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => x)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => a, colour => b)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => no_such, assigned => t1)');
SELECT sync.mirror('t1', 'catalog', codec => 'xml');
SELECT sync.mirror('t1', 'catalog', 'assigned(nope)');
SELECT sync.mirror('t1', 'catalog', 'assigned(n)');
SELECT sync.mirror('t1', 'catalog', 'follows(n)');
SELECT sync.mirror('t1', 'catalog', key => '{nope}');
SELECT sync.mirror('t1', 'catalog', key => '{code,code}');
SELECT sync.mirror('t1', 'catalog', key => '{v}');
SELECT sync.mirror('t1', 'catalog', key => '{j}');
SELECT sync.mirror('t1', 'catalog', key => '{code}');
SELECT sync.mirror('t1', 'catalog', replica_owned => '{id}');
SELECT sync.mirror('t1', 'catalog', replica_owned => '{n,n}');
SELECT sync.mirror('t1', 'catalog', replica_owned => '{n}', unmirrored => '{n}');
SELECT sync.mirror('t1', 'catalog', unmirrored => '{id}');
SELECT sync.mirror('t1', 'catalog', 'assigned(store)', unmirrored => '{store}');
SELECT sync.mirror('t1', 'catalog', origin => 'store');
SELECT sync.mirror('t1', 'catalog', version => 'v');
SELECT sync.mirror('t1', 'record');
SELECT sync.mirror('t1', 'record', origin => 'n');
SELECT sync.mirror('t1', 'record', origin => 'store');
SELECT sync.mirror('t1', 'catalog', retired => 'n');
SELECT sync.mirror('t1', 'catalog', sender => 'who');
SELECT sync.mirror('t1', 'catalog', active => 'customer_names');
SELECT sync.mirror('t1', 'catalog', active => 't1');
CREATE VIEW t1_codes AS SELECT code FROM t1;
SELECT sync.mirror('t1', 'catalog', active => 't1_codes');
SELECT sync.mirror('t1', 'catalog', "partition" => 'nope');
CREATE TABLE t2 (id int PRIMARY KEY);
SELECT sync.mirror('t2', 'catalog');
CREATE TABLE recs (origin uuid NOT NULL, id int NOT NULL, v int, at timestamptz NOT NULL,
	pt point NOT NULL, who text, PRIMARY KEY (origin, id));
SELECT sync.mirror('recs', 'record', key => '{origin,id}', origin => 'origin', version => 'v');
SELECT sync.mirror('recs', 'record', key => '{origin,id}', origin => 'origin', version => 'pt');
SELECT sync.mirror('recs', 'record', key => '{origin,id}', origin => 'origin', created => 'v');
SELECT sync.mirror('recs', 'record', key => '{origin,id}', origin => 'origin', replica_owned => '{v}');
SELECT sync.mirror('recs', 'record', key => '{origin,id}', origin => 'origin', generated => '{id}');
SELECT sync.mirror('recs', 'record', key => '{origin,id}', origin => 'origin', sender => 'who');
CREATE TABLE nokey (a int, b text);
SELECT sync.mirror('nokey', 'catalog');
CREATE TABLE nullkey (a int UNIQUE);
SELECT sync.mirror('nullkey', 'catalog', key => '{a}');
CREATE TABLE floatkey (a float8 PRIMARY KEY);
SELECT sync.mirror('floatkey', 'catalog');

-- foreign keys: every parent mirrored first, through its key or unique
-- columns a note can name (not an interval: printed as each session's IntervalStyle says)
CREATE TABLE suppliers (id int PRIMARY KEY, code interval UNIQUE NOT NULL);
CREATE TABLE supplies (id int PRIMARY KEY, supplier int REFERENCES suppliers,
	supplier_code interval REFERENCES suppliers (code), made_by int REFERENCES suppliers);
CREATE INDEX ON supplies (supplier);
SELECT sync.mirror('supplies', 'catalog', 'follows(supplier)');
SELECT sync.mirror('supplies', 'catalog', unmirrored => '{supplier_code, made_by}');
SELECT sync.mirror('suppliers', 'catalog');
SELECT sync.mirror('supplies', 'catalog', unmirrored => '{supplier}');
SELECT sync.mirror('supplies', 'catalog', unmirrored => '{supplier_code, made_by}',
	sync => 'follows(id)');
SELECT sync.mirror('supplies', 'catalog', 'follows(supplier)', unmirrored => '{made_by}');
SELECT sync.mirror('supplies', 'catalog', 'follows(supplier)',
	unmirrored => '{supplier_code, made_by}');
SELECT name, sync, foreign_keys FROM sync.mirrors JOIN sync.tables USING (name)
 WHERE name = 'supplies';

-- groups
CREATE TABLE lists (id int PRIMARY KEY);
CREATE TABLE list_members (list int REFERENCES lists, grp text, PRIMARY KEY (list, grp));
CREATE TABLE list_owners (grp text, replica uuid, PRIMARY KEY (grp, replica));
CREATE TABLE bad_owners (grp text, replica text, other text);
CREATE TABLE two_owners (grp text, replica uuid, backup uuid);
SELECT sync.mirror('lists', 'catalog', 'grouped(members => public.list_owners, assigned => public.list_owners)');
SELECT sync.mirror('lists', 'catalog', 'grouped(members => public.list_members, assigned => public.bad_owners)');
SELECT sync.mirror('lists', 'catalog', 'grouped(members => public.list_members, assigned => public.bad_owners, replica => replica)');
SELECT sync.mirror('lists', 'catalog', 'grouped(members => public.list_members, assigned => public.two_owners)');
SELECT sync.mirror('lists', 'catalog', 'grouped(members => public.list_members, assigned => public.customers)');
SELECT sync.mirror('lists', 'catalog', 'grouped(members => public.list_members, assigned => public.two_owners, replica => backup, group => grp)');
SELECT name, sync FROM sync.mirrors WHERE name = 'lists';

-- a partition is declared by its parent
CREATE TABLE parted (id int, region text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE parted_a PARTITION OF parted FOR VALUES IN ('a');
SELECT sync.mirror('parted_a', 'catalog');
SELECT sync.mirror('parted', 'catalog', 'broadcast', "partition" => 'region');
SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relname LIKE 'parted%' ORDER BY 1, 2;

-- unmirror: refused while a mirrored table points at it
SELECT sync.unmirror('customers');
SELECT sync.unmirror('t2');
SELECT sync.unmirror('parted');
SELECT sync.unmirror('lists');
SELECT sync.unmirror('order_lines');
SELECT sync.unmirror('orders');
SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE NOT t.tgisinternal AND c.relname IN ('parted', 'parted_a', 'lists', 'list_members',
	'two_owners', 'orders', 'order_lines') ORDER BY 1, 2;
SELECT name FROM sync.mirrors ORDER BY id;

-- the rule's names read as PostgreSQL reads them: a grouped rule's tables
-- looked up through the caller's search_path, qualified or not, and stored as
-- the tables themselves
CREATE TABLE "Odd Schema".boards (id int PRIMARY KEY);
CREATE TABLE "Odd Schema".board_members (board int NOT NULL REFERENCES "Odd Schema".boards,
	grp text NOT NULL, PRIMARY KEY (board, grp));
CREATE TABLE "Odd Schema".board_owners (grp text NOT NULL, replica uuid NOT NULL,
	PRIMARY KEY (grp, replica));
SELECT sync.mirror('"Odd Schema".boards', 'catalog',
	'grouped(members => board_members, assigned => board_owners)');
SET search_path = "Odd Schema", public;
SELECT sync.mirror('boards', 'catalog', 'GROUPED(Members => board_members, ASSIGNED => Board_Owners)');
SHOW search_path;
RESET search_path;
SELECT name, sync FROM sync.mirrors WHERE name = 'Odd Schema.boards';
SELECT members = '"Odd Schema".board_members'::regclass AS members,
	assignments = '"Odd Schema".board_owners'::regclass AS assignments, member_key,
	group_column, assignment_replica
  FROM sync.tables WHERE name = 'Odd Schema.boards';
SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relname LIKE 'board%' AND NOT t.tgisinternal ORDER BY 1, 2;

-- malformed rules: each its own error
SELECT sync.mirror('t1', 'catalog', '');
SELECT sync.mirror('t1', 'catalog', '(store)');
SELECT sync.mirror('t1', 'catalog', 'assigned()');
SELECT sync.mirror('t1', 'catalog', 'assigned(store))');
SELECT sync.mirror('t1', 'catalog', 'assigned("")');
SELECT sync.mirror('t1', 'catalog', 'follows(t1.n)');
SELECT sync.mirror('t1', 'catalog', 'broadcast(store)');
SELECT sync.mirror('t1', 'catalog', 'broadcast.x');
SELECT sync.mirror('t1', 'catalog', 'grouped');
SELECT sync.mirror('t1', 'catalog', 'grouped()');
SELECT sync.mirror('t1', 'catalog', 'grouped(members board_members)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => , assigned => t2)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => list members, assigned => t2)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => a.b.c.d, assigned => t2)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => list_members, members => t2, assigned => t2)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => list_members, assigned => t2, group => a.b)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => elsewhere.public.t2, assigned => t2)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => customer_names, assigned => t2)');
SELECT sync.mirror('t1', 'catalog', 'grouped(members => list_members, assigned => "Odd Schema".no_such)');

-- sync.proto: the message of a table in the proto codec, by the table or by
-- the name replicas know it by
SELECT sync.proto('products');
SELECT sync.proto('products'::regclass) = sync.proto('products') AS same;
-- each field number it prints is the one the declaration fixed for its column
SELECT m[3] AS "column", m[4]::int AS field, (t.fields ->> m[3])::int = m[4]::int AS fixed
  FROM sync.tables t,
	LATERAL regexp_split_to_table(sync.proto(t.relid), E'\n') l,
	LATERAL regexp_match(l, '^  (optional )?(\w+) (\w+) = (\d+);') m
 WHERE t.name = 'products' AND m IS NOT NULL;
SELECT count(*) FROM sync.tables t, jsonb_object_keys(t.fields) WHERE t.name = 'products';
-- names that are no protobuf identifiers, every type
CREATE TABLE "Odd Schema".readings ("Reading Id" int PRIMARY KEY, "2nd" float8, at timestamptz NOT NULL,
	raw bytea, ok boolean, "Reading-Id" text, small int2, real4 real);
SELECT sync.mirror('"Odd Schema".readings', 'catalog', 'broadcast', codec => 'proto');
SELECT sync.proto('Odd Schema.readings');
-- refused: a json table, a table not mirrored, a name no table travels as
SELECT sync.proto('customers');
SELECT sync.proto('t1'::regclass);
SELECT sync.proto('public.products');
-- a column added is followed (the event trigger): it has a field of its own
ALTER TABLE "Odd Schema".readings ADD COLUMN extra int;
SELECT sync.proto('"Odd Schema".readings'::regclass);
ALTER TABLE "Odd Schema".readings DROP COLUMN extra;
SELECT sync.proto('"Odd Schema".readings'::regclass) = sync.proto('Odd Schema.readings') AS same;

-- leave nothing behind for the next test
DO $$
DECLARE r regclass;
BEGIN
	FOR r IN SELECT relid FROM sync.tables ORDER BY id DESC LOOP
		PERFORM sync.unmirror(r);
	END LOOP;
END
$$;
DROP VIEW customer_names, t1_codes;
DROP TABLE customers, products, "Odd Schema"."Mixed Case", sales, orders, order_lines, t1, t2, recs, nokey, nullkey, floatkey, suppliers, supplies, lists, list_members, list_owners, bad_owners, two_owners, parted CASCADE;
DROP TABLE "Odd Schema".boards, "Odd Schema".board_members, "Odd Schema".board_owners,
	"Odd Schema".readings;
DELETE FROM sync.replicas;
TRUNCATE sync.notes;
DROP SCHEMA "Odd Schema";
