/*
 * test_host.c - a replica's host tables are the host's (issue 38.5): a
 * mirrored table whose name a table, view or index of the host's own has
 * is never rebuilt, altered or emptied; its rows are refused, saying why,
 * until the host renames its own, and the next message makes it.  A table
 * the replica made stays the replica's, whatever the host added to it.
 * And (38.9) the unique indexes that travel are named so that no two
 * collide, SQLite ignoring case.
 */
#include "harness.h"

#include "wire.h"

void		test_host(void);

/* sql_of: the text of every object of a table (the host's DDL, as the file keeps it) */
static char *
sql_of(sqlite3 *db, const char *table)
{
	char	   *q = sqlite3_mprintf("SELECT group_concat(sql, ';') FROM (SELECT sql FROM sqlite_master"
									" WHERE tbl_name = %Q ORDER BY name)", table);
	char	   *r = t_text(db, q);

	sqlite3_free(q);
	return r;
}

/* the reasons of the refusals an upload carries for a table ("" none) */
static void
upload_refusals(sqlite3 *db, const char *table, char *out, size_t cap)
{
	tm_msg		m = tm_upload(db);
	Sync__Up   *u;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];

	out[0] = '\0';
	u = m.data ? ms_up_decode(m.data, m.len, 1 << 20, NULL, &st, reason) : NULL;
	for (size_t i = 0; u != NULL && i < u->n_refusals; i++)
		if (strcmp(u->refusals[i]->table, table) == 0)
			snprintf(out, cap, "%zu %s", i + 1, u->refusals[i]->reason);
	if (u != NULL)
		sync__up__free_unpacked(u, NULL);
}

static tm_msg
shop_begin(tm_server *s, Sync__Table *schema[4])
{
	Sync__Down *d = tm_begin(schema, 4);

	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":1}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":2,\"name\":\"Bob\",\"vip\":0}", -1, "2", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\",\"price\":2.5,\"stock\":10}", -1, "1", NULL);
	return tm_next(s, d, NULL);
}

static tm_msg
shop_end(tm_server *s)
{
	return tm_next(s, NULL, tm_end("customers", "products", "orders", "sales", NULL));
}

/*
 * The host's own customers table (its column, index, trigger, rows) when a
 * snapshot names a table customers: before, it was rebuilt with the
 * server's key, the host's column, index and trigger dropped, its inserts
 * refused by guards, and its rows let go of at the snapshot's end.
 */
static void
host_table_kept(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[4];
	Sync__Down *d;
	char	   *before;
	char	   *after;
	char	   *r;
	char		why[512];

	CHECK(t_exec(db, "CREATE TABLE customers(id INTEGER PRIMARY KEY, nickname TEXT, visits INTEGER);"
				 "CREATE INDEX customers_nick ON customers(nickname);"
				 "CREATE TABLE host_log(x);"
				 "CREATE TRIGGER customers_log AFTER INSERT ON customers BEGIN INSERT INTO host_log VALUES (NEW.id); END;"
				 "INSERT INTO customers VALUES (1, 'ada', 3), (7, 'zed', 1)", NULL) == SQLITE_OK,
		  "the host's own table customers, its index, trigger and rows");
	before = sql_of(db, "customers");
	tm_server_init(&s, 0x20, 0x10);
	tm_shop(schema);
	r = tm_apply(db, shop_begin(&s, schema));
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"upserts\":1") && t_has(r, "\"refused\":2"),
		  "a snapshot naming customers: its rows refused, the rest applied: %s %s", S(r), tm_error());
	r = tm_apply(db, shop_end(&s));
	CHECK(t_has(r, "\"snapshot\":\"end\"") && t_has(r, "\"deletes\":0"), "its end lets go of nothing of the host's: %s %s",
		  S(r), tm_error());
	after = sql_of(db, "customers");
	CHECK(before && after && strcmp(before, after) == 0, "the host's table, index and trigger are as they were:\n  %s\n  %s",
		  S(before), S(after));
	sqlite3_free(after);
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 2 &&
		  t_int(db, "SELECT visits FROM customers WHERE id = 1 AND nickname = 'ada'") == 3,
		  "its rows are as they were");
	CHECK(t_exec(db, "INSERT INTO customers VALUES (9, 'new', 0)", NULL) == SQLITE_OK &&
		  t_int(db, "SELECT count(*) FROM host_log WHERE x = 9") == 1, "the host writes it, its trigger runs");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_refused WHERE tbl = 'customers'"
				" AND reason LIKE '%host''s own table \"customers\"%'") == 2,
		  "the replica refused the server's rows, saying why");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_made WHERE name = 'customers'") == 0, "it did not make the table");
	r = t_text(db, "SELECT sync_progress() ->> '$.customers.not_held'");
	CHECK(t_has(r, "the host's own table \"customers\"") && t_has(r, "renames its own"),
		  "sync_progress says why: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT sync_status() ->> 'tables'") == 3, "three tables held");
	upload_refusals(db, "customers", why, sizeof why);
	CHECK(t_has(why, "host's own table \"customers\""), "the upload carries the refusals up: %s", why);

	/* a snapshot again, and a delete: the host's table is still the host's */
	r = tm_apply(db, shop_begin(&s, schema));
	CHECK(t_has(r, "\"refused\":2"), "a snapshot again refuses them again: %s %s", S(r), tm_error());
	tm_apply(db, shop_end(&s));
	d = tm_down();
	tm_delete(tm_rows(d, "customers"), "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\"") && t_int(db, "SELECT count(*) FROM customers") == 3,
		  "a delete of the server's lets go of no row of the host's: %s %s", S(r), tm_error());
	after = sql_of(db, "customers");
	CHECK(before && after && strcmp(before, after) == 0, "nor does anything else touch it");
	sqlite3_free(after);
	sqlite3_free(before);

	/* the host renames its own: the next message makes the server's, and takes the row sent again */
	CHECK(t_exec(db, "ALTER TABLE customers RENAME TO my_customers", NULL) == SQLITE_OK, "the host renames its table");
	d = tm_down();
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":1}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1") && t_has(r, "\"refused\":0") && t_has(r, "\"made\":1"),
		  "the next message makes the table and takes the row sent again: %s %s", S(r), tm_error());
	r = t_text(db, "SELECT group_concat(name, ',') FROM pragma_table_info('customers')");
	CHECK(r && strcmp(r, "id,name,vip") == 0, "the server's customers: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE id = 1 AND name = 'Ada'") == 1, "with its row");
	CHECK(t_int(db, "SELECT count(*) FROM my_customers") == 3 &&
		  t_int(db, "SELECT count(*) FROM sqlite_master WHERE name IN ('customers_nick', 'customers_log')"
				" AND tbl_name = 'my_customers'") == 2, "the host's, renamed, keeps its rows, index and trigger");
	CHECK(t_exec(db, "INSERT INTO customers(id, name) VALUES (5, 'Eve')", NULL) == SQLITE_CONSTRAINT,
		  "the server's table is guarded as every catalog");
	CHECK(t_int(db, "SELECT sync_status() ->> 'tables'") == 4 &&
		  t_int(db, "SELECT count(*) FROM _sync_made WHERE name = 'customers'") == 1, "four tables held, customers made");
	sqlite3_close(db);
}

/* a view, and an index, of the host's with a table's name: the same */
static void
host_view_and_index(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[4];
	char	   *r;

	CHECK(t_exec(db, "CREATE TABLE t(a); CREATE INDEX customers ON t(a); CREATE VIEW products AS SELECT 1 AS id", NULL) ==
		  SQLITE_OK, "an index customers and a view products of the host's");
	tm_server_init(&s, 0x20, 0x10);
	tm_shop(schema);
	r = tm_apply(db, shop_begin(&s, schema));
	CHECK(t_has(r, "\"refused\":3") && t_has(r, "\"upserts\":0"), "both tables wait, their rows refused: %s %s",
		  S(r), tm_error());
	r = t_text(db, "SELECT sync_progress()");
	CHECK(t_has(r, "the host's own index \\\"customers\\\"") && t_has(r, "the host's own view \\\"products\\\""),
		  "each says what of the host's has its name: %s", S(r));
	sqlite3_free(r);
	CHECK(t_exec(db, "DROP VIEW products", NULL) == SQLITE_OK, "the host drops its view");
	r = tm_apply(db, shop_end(&s));
	CHECK(t_has(r, "\"made\":1") && t_int(db, "SELECT count(*) FROM pragma_table_info('products')") == 5,
		  "the next message makes products: %s %s", S(r), tm_error());
	sqlite3_close(db);
}

/* a schema change making a table whose name the host has: it waits, said, until the host renames its own */
static void
host_table_and_change(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Table *notices = tm_table("notices", "catalog", "json", "id", "id INTEGER, body TEXT");
	Sync__Down *d;
	char	   *r;

	CHECK(t_exec(db, "CREATE TABLE notices(id TEXT, body BLOB, mine INTEGER); INSERT INTO notices VALUES ('x', 'y', 1)",
				 NULL) == SQLITE_OK, "the host's own notices");
	tm_ids(notices, 9);
	d = tm_down();
	tm_change(d, notices);
	tm_upsert(tm_rows(d, "notices"), "{\"id\":1,\"body\":\"hello\"}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"changed\":0") && t_has(r, "host's own table") && t_has(r, "\"refused\":1"),
		  "the change is said and not applied, the row refused: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM notices WHERE id = 'x' AND mine = 1") == 1 &&
		  t_int(db, "SELECT count(*) FROM pragma_table_info('notices')") == 3, "the host's notices as it was");
	/* changed again while it waits: still the host's */
	notices = tm_table("notices", "catalog", "json", "id", "id INTEGER, body TEXT, region TEXT");
	tm_ids(notices, 9);
	d = tm_down();
	tm_change(d, notices);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "host's own table") && t_int(db, "SELECT count(*) FROM pragma_table_info('notices')") == 3,
		  "a change of the table that waits touches nothing of the host's: %s %s", S(r), tm_error());
	CHECK(t_exec(db, "ALTER TABLE notices RENAME TO my_notices", NULL) == SQLITE_OK, "the host renames its own");
	d = tm_down();
	tm_upsert(tm_rows(d, "notices"), "{\"id\":1,\"body\":\"hello\",\"region\":\"north\"}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"made\":1") && t_has(r, "\"upserts\":1"), "the next message makes it, in its last Table: %s %s",
		  S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM notices WHERE region = 'north'") == 1 &&
		  t_int(db, "SELECT count(*) FROM my_notices") == 1, "both are there");
	sqlite3_close(db);
}

/*
 * A table the replica made stays the replica's whatever the host added to
 * it: a column, an index and a trigger of its own are kept when a snapshot
 * makes it again with a new key (before, the column and its values went,
 * and the host's view stopped the table being made again).
 */
static void
replica_table_altered(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Table *schema[4];
	Sync__Down *d;
	char	   *r;

	CHECK(t_exec(db, "ALTER TABLE customers ADD COLUMN loyalty INTEGER;"
				 "UPDATE customers SET loyalty = id * 10;"
				 "CREATE INDEX host_loyalty ON customers(loyalty);"
				 "CREATE TABLE host_log(x);"
				 "CREATE TRIGGER host_t AFTER UPDATE OF loyalty ON customers BEGIN INSERT INTO host_log VALUES (NEW.id); END;"
				 "CREATE VIEW host_v AS SELECT id, loyalty FROM customers", NULL) == SQLITE_OK,
		  "the host's column, index, trigger and view on the replica's customers");
	tm_shop(schema);
	schema[0] = tm_table("customers", "catalog", "json", "id,name", "id INTEGER, name TEXT, vip INTEGER");
	d = tm_begin(schema, 4);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":1}", -1, "1", "Ada", NULL);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":2,\"name\":\"Bob\",\"vip\":0}", -1, "2", "Bob", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"refused\":0"), "a snapshot with customers keyed by id and name: %s %s",
		  S(r), tm_error());
	tm_apply(db, shop_end(&s));
	CHECK(t_int(db, "SELECT count(*) FROM pragma_table_info('customers') WHERE pk > 0") == 2,
		  "the table is made again with the new key");
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE loyalty = 10 AND name = 'Ada'") == 1 &&
		  t_int(db, "SELECT sum(loyalty) FROM customers") == 30, "the host's column keeps its values");
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE name IN ('host_loyalty', 'host_t')") == 2 &&
		  t_int(db, "SELECT count(*) FROM host_v") == 2, "its index, trigger and view too");
	sqlite3_close(db);
}

/* the replica's table dropped by the host, which makes its own of that name: the host's from then on */
static void
dropped_then_host_made(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Table *schema[4];
	Sync__Down *d;
	char	   *r;

	CHECK(t_exec(db, "DROP TABLE products", NULL) == SQLITE_OK, "the host drops products");
	d = tm_down();
	tm_upsert(tm_rows(d, "customers"), "{\"id\":3,\"name\":\"Cy\",\"vip\":0}", -1, "3", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1") && t_int(db, "SELECT gone FROM _sync_made WHERE name = 'products'") == 1,
		  "the next message marks it gone: %s %s", S(r), tm_error());
	CHECK(t_exec(db, "CREATE TABLE products(sku TEXT PRIMARY KEY, label TEXT); INSERT INTO products VALUES ('a', 'b')",
				 NULL) == SQLITE_OK, "the host makes its own products");
	tm_shop(schema);
	r = tm_apply(db, shop_begin(&s, schema));
	CHECK(t_has(r, "\"refused\":1"), "a snapshot refuses products' rows: %s %s", S(r), tm_error());
	tm_apply(db, shop_end(&s));
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE sku = 'a'") == 1 &&
		  t_int(db, "SELECT count(*) FROM pragma_table_info('products')") == 2, "the host's products is untouched");
	sqlite3_close(db);
}

/* a file of a build without _sync_made: the tables it holds are its own */
static void
older_file(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Table *schema[4];
	char	   *r;

	CHECK(t_exec(db, "DROP TABLE _sync_made", NULL) == SQLITE_OK, "a file of an older build");
	r = t_text(db, "SELECT sync_progress()");
	CHECK(r && !t_has(r, "not_held"), "read, every table is held: %s", S(r));
	sqlite3_free(r);
	tm_shop(schema);
	schema[0] = tm_table("customers", "catalog", "json", "id", "id INTEGER, name TEXT, vip INTEGER, city TEXT");
	r = tm_apply(db, shop_begin(&s, schema));
	CHECK(t_has(r, "\"refused\":0") && t_int(db, "SELECT count(*) FROM pragma_table_info('customers') WHERE name = 'city'") == 1,
		  "a snapshot alters its tables as ever: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_made") == 4, "and knows them made");
	sqlite3_close(db);
}

/*
 * The unique indexes that travel were named _sync_uq_<table>_<index>: table
 * a's index b_x and table a_b's index x were one name, the second taking
 * the first's place; and a's b_x and a_B's x one name in SQLite, which
 * ignores case, so that a_B could not be held.
 */
static void
unique_names(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[3];
	Sync__Down *d;
	char	   *r;

	tm_server_init(&s, 0x20, 0x10);
	schema[0] = tm_table("a", "catalog", "json", "id", "id INTEGER, bx TEXT");
	tm_unique(schema[0], "b_x", "bx");
	schema[1] = tm_table("a_b", "catalog", "json", "id", "id INTEGER, x TEXT");
	tm_unique(schema[1], "x", "x");
	schema[2] = tm_table("a_B", "catalog", "json", "id", "id INTEGER, x TEXT");
	tm_unique(schema[2], "x", "x");
	/* a_b and a_B are one table in SQLite: a snapshot of a and a_b, then one of a and a_B */
	d = tm_begin(schema, 2);
	tm_upsert(tm_rows(d, "a"), "{\"id\":1,\"bx\":\"same\"}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "a_b"), "{\"id\":1,\"x\":\"same\"}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":2") && t_has(r, "\"refused\":0"), "a and a_b: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name LIKE '\\_sync\\_uq\\_%' ESCAPE '\\'"
				" AND tbl_name IN ('a', 'a_b')") == 2 &&
		  t_int(db, "SELECT count(DISTINCT tbl_name) FROM sqlite_master WHERE name LIKE '\\_sync\\_uq\\_%' ESCAPE '\\'") == 2,
		  "each has its unique index");
	tm_apply(db, tm_next(&s, NULL, tm_end("a", "a_b", NULL)));
	schema[1] = schema[2];
	d = tm_begin(schema, 2);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\"") && t_int(db, "SELECT count(*) FROM _sync_tables") == 2,
		  "a and a_B are both held: %s %s", S(r), tm_error());
	r = t_text(db, "SELECT sync_status() ->> 'last_error'");
	CHECK(r == NULL, "nothing failed: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name LIKE '\\_sync\\_uq\\_%' ESCAPE '\\'") == 2,
		  "each with its unique index");
	/* each holds: a row of the server's taking another's value makes room in its own table only */
	d = tm_down();
	tm_upsert(tm_rows(d, "a_B"), "{\"id\":2,\"x\":\"same\"}", -1, "2", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1") && t_int(db, "SELECT count(*) FROM a_B WHERE x = 'same'") == 1 &&
		  t_int(db, "SELECT count(*) FROM a WHERE bx = 'same'") == 1, "a_B's index holds, a's is untouched: %s %s",
		  S(r), tm_error());
	sqlite3_close(db);
}

void
test_host(void)
{
	host_table_kept();
	host_view_and_index();
	host_table_and_change();
	replica_table_altered();
	dropped_then_host_made();
	older_file();
	unique_names();
}
