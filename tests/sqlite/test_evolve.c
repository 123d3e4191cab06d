/*
 * test_evolve.c - schema changes on the replica (docs/protocol.md 5.3): a
 * Down's schema and let_go, applied before its rows, per table whole or not
 * at all, what cannot be applied reported with its statement.
 */
#include "harness.h"
#include "vectors.h"

/* the shop, its tables and columns with ids (as a server of protocol 5.3 sends them) */
static void
shop_tables(Sync__Table *schema[4])
{
	tm_shop(schema);
	for (int i = 0; i < 4; i++)
		tm_ids(schema[i], (uint32_t) i + 1);
}

static sqlite3 *
shop(tm_server *s)
{
	sqlite3    *db = t_open(NULL);
	Sync__Table *schema[4];
	Sync__Down *d;
	char	   *r;

	tm_server_init(s, 0x20, 0x10);
	shop_tables(schema);
	d = tm_begin(schema, 4);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":1}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":2,\"name\":\"Bob\",\"vip\":0}", -1, "2", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\",\"price\":2.5,\"stock\":10}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":2,\"name\":\"coffee\",\"price\":3.25,\"stock\":5}", -1, "2", NULL);
	r = tm_apply(db, tm_next(s, d, NULL));
	CHECK(t_has(r, "\"applied\""), "the shop's snapshot begins: %s %s", S(r), tm_error());
	r = tm_apply(db, tm_next(s, NULL, tm_end("customers", "products", "orders", "sales", NULL)));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "and ends: %s %s", S(r), tm_error());
	return db;
}

/* the sample schema change of docs/protocol.md, after the sample 42 */
static void
protocol_sample(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[1];
	Sync__Down *d;
	uint8_t		bytes[1024];
	long		head,
				body;
	char	   *r;

	tm_server_init(&s, 0x20, 0x10);
	memcpy(s.replica, ms_vector_replica, 16);
	memcpy(s.epoch, ms_vector_epoch, 16);
	schema[0] = tm_table("products", "catalog", "json", "id", "id INTEGER, name TEXT");
	tm_ids(schema[0], 1);
	d = tm_begin(schema, 1);
	r = tm_apply(db, tm_message(&s, MS_PROTOCOL, 41, ms_vector_previous_nonce, 0, NULL, d, NULL, NULL));
	CHECK(t_has(r, "\"applied\""), "message 41 begins a snapshot: %s %s", S(r), tm_error());
	head = ms_hex_decode(ms_vector_head_hex, bytes, sizeof bytes);
	body = ms_hex_decode(ms_vector_body_hex, bytes + head, sizeof bytes - (size_t) head);
	r = tm_apply(db, (tm_msg) {bytes, (size_t) (head + body)});
	CHECK(t_has(r, "\"number\":42"), "the sample 42: %s %s", S(r), tm_error());
	head = ms_hex_decode(ms_vector_evolve_head_hex, bytes, sizeof bytes);
	body = ms_hex_decode(ms_vector_evolve_body_hex, bytes + head, sizeof bytes - (size_t) head);
	r = tm_apply(db, (tm_msg) {bytes, (size_t) (head + body)});
	CHECK(t_has(r, "\"number\":43") && t_has(r, "\"upserts\":1") &&
		  t_has(r, "\"schema\":{\"changed\":1,\"let_go\":0,\"failed\":[]}"),
		  "the sample schema change applies: %s %s", S(r), tm_error());
	r = t_text(db, "SELECT group_concat(name, ',') FROM pragma_table_info('products')");
	CHECK(r && strcmp(r, "id,title,price") == 0, "products is (id, title, price): %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 7 AND title = 'tea' AND price = 0") == 1,
		  "row 7 kept its title, renamed, and took the fill");
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 9 AND title = 'rye' AND price = 4") == 1,
		  "row 9 came in the new schema");
	sqlite3_close(db);
}

/* a column added with a fill, one without, one dropped, one renamed; the rows stay */
static void
columns(void)
{
	tm_server	s;
	sqlite3    *db = shop(&s);
	Sync__Table *schema[4];
	Sync__Down *d;
	char	   *r;

	CHECK(t_exec(db, "CREATE VIEW vips AS SELECT name FROM customers WHERE vip", NULL) == SQLITE_OK,
		  "the host's own view over customers");
	shop_tables(schema);
	/* customers: name (id 2) is now full_name; city (4) added, every row 'Oslo'; note (5) added, NULL */
	schema[0] = tm_table("customers", "catalog", "json", "id",
						 "id INTEGER id=1, full_name TEXT id=2, vip INTEGER id=3, city TEXT id=4, note TEXT id=5");
	schema[0]->id = 1;
	tm_fill(schema[0], "{\"city\":\"Oslo\"}", -1);
	d = tm_down();
	tm_change(d, schema[0]);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"schema\":{\"changed\":1") && t_has(r, "\"failed\":[]"), "a change of customers: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE city = 'Oslo' AND note IS NULL") == 2,
		  "every row took the fill; the column without one is NULL");
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE full_name = 'Ada' AND vip = 1") == 1, "the values stay");
	r = t_text(db, "SELECT group_concat(full_name, ',') FROM vips");
	CHECK(r && strcmp(r, "Ada") == 0, "the host's view follows the rename: %s", S(r));
	sqlite3_free(r);

	/* products: price (id 3) dropped, and a host index on stock keeps nothing from going */
	CHECK(t_exec(db, "CREATE INDEX host_stock ON products(stock)", NULL) == SQLITE_OK, "the host indexes stock");
	schema[1] = tm_table("products", "catalog", "json", "id",
						 "id INTEGER id=1, name TEXT id=2, stock INTEGER owned id=4, retired_at INTEGER field=0");
	tm_retired(schema[1], "retired_at");
	schema[1]->id = 2;
	d = tm_down();
	tm_change(d, schema[1]);
	tm_upsert(tm_rows(d, "products"), "{\"id\":3,\"name\":\"cake\",\"stock\":1}", -1, "3", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1") && t_has(r, "\"failed\":[]"), "price dropped, then a row in the new schema: %s %s",
		  S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM pragma_table_info('products') WHERE name = 'price'") == 0, "price is gone");
	CHECK(t_int(db, "SELECT count(*) FROM products") == 3 &&
		  t_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'host_stock'") == 1,
		  "the rows and the host's index stay");

	/* a column something of the host's uses cannot be dropped: said, the rest applied */
	CHECK(t_exec(db, "CREATE INDEX host_name ON products(name)", NULL) == SQLITE_OK, "the host indexes name");
	schema[1] = tm_table("products", "catalog", "json", "id",
						 "id INTEGER id=1, stock INTEGER owned id=4, label TEXT id=5, retired_at INTEGER field=0");
	tm_retired(schema[1], "retired_at");
	schema[1]->id = 2;
	tm_fill(schema[1], "{\"label\":\"plain\"}", -1);
	d = tm_down();
	tm_change(d, schema[1]);
	tm_upsert(tm_rows(d, "products"), "{\"id\":4,\"stock\":2,\"label\":\"fine\"}", -1, "4", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1") && t_has(r, "DROP COLUMN") && t_has(r, "\"rest_applied\":true"),
		  "the drop that cannot run is said with its statement, the rest applies: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE label = 'plain'") == 3 &&
		  t_int(db, "SELECT count(*) FROM products WHERE id = 4 AND label = 'fine'") == 1,
		  "the column added took its fill, the new row its value");
	CHECK(t_int(db, "SELECT count(*) FROM pragma_table_info('products') WHERE name = 'name'") == 1,
		  "the column that could not be dropped stays in the file");
	r = t_text(db, "SELECT sync_status() ->> 'last_error'");
	CHECK(t_has(r, "DROP COLUMN") && t_has(r, "host_name"), "last_error says which statement and why: %s", S(r));
	sqlite3_free(r);
	/* rows go on in the new schema, the leftover column aside */
	d = tm_down();
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"stock\":10,\"label\":\"special\"}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1") && t_has(r, "\"refused\":0"), "the next rows apply: %s %s", S(r), tm_error());
	sqlite3_close(db);
}

/* columns that trade names, one dropped and made again (a new id): values follow the ids */
static void
ids(void)
{
	tm_server	s;
	sqlite3    *db = shop(&s);
	Sync__Table *t;
	Sync__Down *d;
	char	   *r;

	t = tm_table("customers", "catalog", "json", "id", "id INTEGER id=1, vip TEXT id=2, name INTEGER id=3");
	t->id = 1;
	/* name (2) and vip (3) trade names, and their types with them: the table is rebuilt */
	d = tm_down();
	tm_change(d, t);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"changed\":1") && t_has(r, "\"failed\":[]"), "names traded: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE id = 1 AND vip = 'Ada' AND name = 1") == 1,
		  "each value stays with its column's id");
	r = t_text(db, "SELECT type FROM pragma_table_info('customers') WHERE name = 'vip'");
	CHECK(r && strcmp(r, "TEXT") == 0, "and its type: %s", S(r));
	sqlite3_free(r);
	/* vip (id 2) dropped and a column vip made again (id 4): the old values go */
	t = tm_table("customers", "catalog", "json", "id", "id INTEGER id=1, name INTEGER id=3, vip TEXT id=4");
	t->id = 1;
	tm_fill(t, "{\"vip\":\"no\"}", -1);
	d = tm_down();
	tm_change(d, t);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"changed\":1"), "dropped and made again: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE vip = 'no'") == 2, "the new column is not the old one");
	sqlite3_close(db);
}

/* a table renamed; a new table; a change that cannot apply leaves its table as it was */
static void
tables(void)
{
	tm_server	s;
	sqlite3    *db = shop(&s);
	Sync__Table *schema[4];
	Sync__Table *notices;
	Sync__Down *d;
	char	   *r;

	/* the replica wrote a sale; its note was sent, not yet filed */
	r = sqlite3_mprintf("INSERT INTO sales(origin, id, product, qty) VALUES ('%s', 1, 1, 2)", tm_replica_text(&s));
	CHECK(t_exec(db, r, NULL) == SQLITE_OK, "a sale");
	sqlite3_free(r);
	CHECK(tm_upload(db).data != NULL, "sent: %s", tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE send_id IS NOT NULL") == 1, "its note waits for its answer");
	shop_tables(schema);
	/* customers is now clients (id 1); orders points at it by its new name; sales takes a column */
	schema[0]->name = "clients";
	schema[2]->foreign_keys[0]->table = "clients";
	schema[3] = tm_table("sales", "record", "proto", "origin,id",
						 "origin TEXT server=uuid, id INTEGER, product INTEGER, qty INTEGER, price REAL, memo TEXT, photo BLOB,"
						 " till INTEGER");
	tm_origin(schema[3], "origin");
	tm_fk(schema[3], "product", "products", "id");
	tm_ids(schema[3], 4);
	notices = tm_table("notices", "catalog", "json", "id", "id INTEGER, body TEXT");
	tm_ids(notices, 9);
	d = tm_down();
	tm_change(d, schema[0]);
	tm_change(d, schema[2]);
	tm_change(d, schema[3]);
	tm_change(d, notices);
	tm_upsert(tm_rows(d, "clients"), "{\"id\":3,\"name\":\"Cy\",\"vip\":0}", -1, "3", NULL);
	tm_upsert(tm_rows(d, "notices"), "{\"id\":1,\"body\":\"hello\"}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"changed\":4") && t_has(r, "\"upserts\":2") && t_has(r, "\"failed\":[]"),
		  "a table renamed, one altered, one made, with their rows: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM clients") == 3 &&
		  t_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'customers'") == 0,
		  "customers is clients, with its rows");
	CHECK(t_int(db, "SELECT count(*) FROM notices WHERE body = 'hello'") == 1, "the new table and its row");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_tables") == 5, "five tables held");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'sales' AND send_id IS NULL") == 1,
		  "the sale goes up again, in the new schema");
	r = t_text(db, "SELECT sync_digest()");
	CHECK(t_has(r, "\"clients\":{\"count\":3") && !t_has(r, "\"customers\""), "the digests name clients: %s", S(r));
	sqlite3_free(r);

	/* a local table takes the name a rename wants: that change is not applied, the other is */
	CHECK(t_exec(db, "CREATE TABLE goods(x)", NULL) == SQLITE_OK, "the host's own table named goods");
	schema[1]->name = "goods";
	notices = tm_table("notices", "catalog", "json", "id", "id INTEGER, body TEXT, region TEXT");
	tm_ids(notices, 9);
	d = tm_down();
	tm_change(d, schema[1]);
	tm_change(d, notices);
	tm_upsert(tm_rows(d, "goods"), "{\"id\":1,\"name\":\"tea\",\"price\":1,\"stock\":1}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "notices"), "{\"id\":2,\"body\":\"hi\",\"region\":\"north\"}", -1, "2", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"changed\":1") && t_has(r, "RENAME TO") && t_has(r, "\"rest_applied\":false") &&
		  t_has(r, "\"refused\":1") && t_has(r, "\"upserts\":1"),
		  "the rename is said and not applied; its rows are refused; the rest goes on: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM products") == 2 && t_int(db, "SELECT count(*) FROM goods") == 0,
		  "products is as it was");
	CHECK(t_int(db, "SELECT count(*) FROM notices WHERE region = 'north'") == 1, "notices changed");
	sqlite3_close(db);
}

/* tables let go of: rows, then the table, children first; what stays stays a local table's */
static void
let_go(void)
{
	tm_server	s;
	sqlite3    *db = shop(&s);
	Sync__Down *d;
	char	   *r;

	r = sqlite3_mprintf("INSERT INTO orders(origin, id, customer) VALUES ('%s', 1, 1)", tm_replica_text(&s));
	CHECK(t_exec(db, r, NULL) == SQLITE_OK, "an order of its own, not yet sent");
	sqlite3_free(r);
	d = tm_down();
	tm_upsert(tm_rows(d, "orders"), "{\"origin\":\"99999999-0000-4000-8000-000000000000\",\"id\":2,\"customer\":2}",
			  -1, "99999999-0000-4000-8000-000000000000", "2", NULL);
	CHECK(t_has(tm_apply(db, tm_next(&s, d, NULL)), "\"upserts\":1"), "another's order: %s", tm_error());
	d = tm_down();
	tm_let_go(d, "customers");
	tm_let_go(d, "orders");
	tm_let_go(d, "products");
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"let_go\":3") && t_has(r, "\"failed\":[]"), "three tables let go of: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'products'") == 0, "products is gone");
	CHECK(t_int(db, "SELECT count(*) FROM orders") == 1 && t_int(db, "SELECT id FROM orders") == 1,
		  "orders keeps only the replica's own, not yet sent");
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 1 && t_int(db, "SELECT id FROM customers") == 1,
		  "the customer it points at stays; the other went first");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_tables") == 1 &&
		  t_int(db, "SELECT count(*) FROM _sync_notes") == 0 &&
		  t_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name NOT GLOB '_sync_fk_*'"
			  " AND name <> '_sync_vsum_hand' AND name NOT GLOB '_sync_gen_*'") == 3,
		  "only sales is mirrored; nothing of the others is noted");
	sqlite3_close(db);
}

/* unique indexes that travel: made, and an upsert makes room in them */
static void
unique(void)
{
	tm_server	s;
	sqlite3    *db = shop(&s);
	Sync__Table *schema[4];
	Sync__Down *d;
	char	   *r;

	shop_tables(schema);
	tm_unique(schema[0], "customers_name_key", "name");
	d = tm_down();
	tm_change(d, schema[0]);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"changed\":1"), "a unique index travels: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE name = '_sync_uq_9_customers_customers_name_key'") == 1,
		  "the replica has it");
	CHECK(t_exec(db, "INSERT INTO customers(id, name) VALUES (5, 'Ada')", NULL) == SQLITE_CONSTRAINT,
		  "and it holds locally");
	/* Bob took Ada's name on the server, Ada another: Bob's row comes first */
	d = tm_down();
	tm_upsert(tm_rows(d, "customers"), "{\"id\":2,\"name\":\"Ada\",\"vip\":0}", -1, "2", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1") && t_has(r, "\"refused\":0"), "the row that takes the value applies: %s %s",
		  S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE id = 1 AND name IS NULL") == 1,
		  "the row it took it from waits for its own change with NULL");
	d = tm_down();
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada Lovelace\",\"vip\":1}", -1, "1", NULL);
	CHECK(t_has(tm_apply(db, tm_next(&s, d, NULL)), "\"upserts\":1"), "which comes");
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE id = 1 AND name = 'Ada Lovelace'") == 1, "and is taken");
	/* dropped: the index goes */
	shop_tables(schema);
	d = tm_down();
	tm_change(d, schema[0]);
	CHECK(t_has(tm_apply(db, tm_next(&s, d, NULL)), "\"changed\":1"), "the unique index is dropped");
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE name LIKE '\\_sync\\_uq\\_%' ESCAPE '\\'") == 0,
		  "and goes from the replica");
	sqlite3_close(db);
}

/* a change whose key changes rebuilds the table; the host's own indexes and triggers come back */
static void
rebuilt(void)
{
	tm_server	s;
	sqlite3    *db = shop(&s);
	Sync__Table *t;
	Sync__Down *d;
	char	   *r;

	CHECK(t_exec(db, "CREATE INDEX host_vip ON customers(vip);"
				 "CREATE TABLE host_log(x); CREATE TRIGGER host_t AFTER INSERT ON customers BEGIN"
				 " INSERT INTO host_log VALUES (NEW.id); END;"
				 "CREATE VIEW host_v AS SELECT id, name FROM customers", NULL) == SQLITE_OK,
		  "the host's index, trigger and view on customers");
	t = tm_table("customers", "catalog", "json", "id", "id TEXT id=1, name TEXT id=2, vip INTEGER id=3");
	t->id = 1;
	d = tm_down();
	tm_change(d, t);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"changed\":1") && t_has(r, "\"failed\":[]"), "the key's type changes: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 2, "the rows stay");
	r = t_text(db, "SELECT type FROM pragma_table_info('customers') WHERE name = 'id'");
	CHECK(r && strcmp(r, "TEXT") == 0, "the column has its new type: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE name IN ('host_vip', 'host_t')") == 2,
		  "the host's index and trigger are made again");
	CHECK(t_int(db, "SELECT count(*) FROM host_v") == 2, "its view reads the table");
	sqlite3_close(db);
}

/* a Filed answer naming rows not filed (an old schema): their notes go up again, the rest are let go of */
static void
filed_again(void)
{
	tm_server	s;
	sqlite3    *db = shop(&s);
	tm_msg		up;
	Sync__Up   *u;
	Sync__Filed *f;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	char	   *r;

	r = sqlite3_mprintf("INSERT INTO sales(origin, id, product, qty) VALUES ('%s', 1, 1, 2);"
						"INSERT INTO orders(origin, id, customer) VALUES ('%s', 1, 1)",
						tm_replica_text(&s), tm_replica_text(&s));
	CHECK(t_exec(db, r, NULL) == SQLITE_OK, "a sale and an order");
	sqlite3_free(r);
	up = tm_upload(db);
	u = up.data ? ms_up_decode(up.data, up.len, 1 << 20, &ms_test_allocator, &st, reason) : NULL;
	CHECK(u != NULL, "the upload decodes: %s", tm_error());
	if (u == NULL)
	{
		sqlite3_close(db);
		return;
	}
	f = tm_filed(u->send_id.data, 1);
	f->again = tm_alloc(sizeof(Sync__Refusal *));
	f->again[0] = tm_alloc(sizeof(Sync__Refusal));
	sync__refusal__init(f->again[0]);
	f->again[0]->table = "sales";
	f->again[0]->key = tm_key(tm_replica_text(&s), "1", NULL);
	f->again[0]->reason = "written in a schema the replica has been sent a change of since";
	f->n_again = 1;
	/* the answer accounts for every row: the order filed, the sale to go again */
	tm_filed_table(f, "orders", 1, 0, 0, 0, 0);
	tm_filed_table(f, "sales", 0, 0, 0, 0, 0);
	f->tables[f->n_tables - 1]->again = 1;
	r = tm_apply(db, tm_filed_msg(&s, f));
	CHECK(t_has(r, "\"filed\"") && t_has(r, "\"notes\":1"), "the answer lets go of the order only: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'sales' AND send_id IS NULL") == 1,
		  "the sale goes up again");
	sync__up__free_unpacked(u, &ms_test_allocator);
	sqlite3_close(db);
}

void
test_evolve(void)
{
	protocol_sample();
	columns();
	ids();
	tables();
	let_go();
	unique();
	rebuilt();
	filed_again();
}
