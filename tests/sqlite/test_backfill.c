/*
 * test_backfill.c - rows already in a file before its first snapshot
 * (issue 40, the backfill): a table of the host's that fits the declaration
 * is taken by the first snapshot, its rows noted (a record's kept by the
 * snapshot's end whatever their origin), a catalog's replaced by what the
 * snapshot sends; one that does not fit (another affinity, a column of the
 * host's NOT NULL without a default, another key) stays the host's; after
 * the first snapshot, nothing is taken.
 */
#include "harness.h"

#include "wire.h"

void		test_backfill(void);

/* the shop's snapshot: customers 1 and 2, product 1; nothing of orders or sales */
static tm_msg
begin(tm_server *s, Sync__Table *schema[4])
{
	Sync__Down *d = tm_begin(schema, 4);

	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":1}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":2,\"name\":\"Bob\",\"vip\":0}", -1, "2", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\",\"price\":2.5,\"stock\":10}", -1, "1", NULL);
	return tm_next(s, d, NULL);
}

static tm_msg
end(tm_server *s)
{
	return tm_next(s, NULL, tm_end("customers", "products", "orders", "sales", NULL));
}

/* the app's tables, made before the replica was set up: two fit, two do not */
static void
first_snapshot(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[4];
	char	   *r;

	char	   *orders;

	tm_server_init(&s, 0x30, 0x40);
	/* the app knows its replica's uuid: its orders are its own */
	orders = sqlite3_mprintf("INSERT INTO orders VALUES (%Q, 1, 1, 9.5, 'mine'), (%Q, 2, 7, 1.0, NULL)",
							 tm_replica_text(&s), tm_replica_text(&s));
	CHECK(t_exec(db,
				 /* fits: the declared key and columns, and a nullable column of the app's own */
				 "CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, vip INT, city TEXT);"
				 "INSERT INTO customers VALUES (1, 'old Ada', 0, 'Oslo'), (9, 'gone', 0, NULL);"
				 "CREATE TABLE orders(origin TEXT, id INTEGER, customer INTEGER, total REAL, note VARCHAR(20),"
				 "  PRIMARY KEY (origin, id));"
				 /* do not fit: a price of another affinity; a column NOT NULL without a default */
				 "CREATE TABLE products(id INTEGER PRIMARY KEY, name TEXT, price TEXT, stock INTEGER,"
				 "  retired_at INTEGER);"
				 "INSERT INTO products VALUES (5, 'the app''s', 'cheap', 1, NULL);"
				 "CREATE TABLE sales(origin TEXT, id INTEGER, product INTEGER, qty INTEGER, price REAL, memo TEXT,"
				 "  photo BLOB, shelf TEXT NOT NULL, PRIMARY KEY (origin, id));"
				 "INSERT INTO sales VALUES ('anyone', 1, 5, 1, 1.0, NULL, NULL, 'A1')", NULL) == SQLITE_OK,
		  "the app's own tables, with rows, before the first snapshot");
	CHECK(t_exec(db, orders, NULL) == SQLITE_OK, "its orders");
	sqlite3_free(orders);
	tm_shop(schema);
	r = tm_apply(db, begin(&s, schema));
	CHECK(t_has(r, "\"applied\""), "the first snapshot begins: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_made WHERE name IN ('customers', 'orders')") == 2 &&
		  t_int(db, "SELECT count(*) FROM _sync_made WHERE name IN ('products', 'sales')") == 0,
		  "customers and orders are taken; products and sales stay the app's");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'orders'") == 2,
		  "each order the app wrote is noted");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl <> 'orders'") == 0,
		  "nothing else is (customers has no column the replica owns)");
	r = tm_apply(db, end(&s));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "the snapshot ends: %s %s", S(r), tm_error());
	r = t_text(db, "SELECT group_concat(id || ':' || name || ':' || coalesce(city, '-'), ',')"
			   " FROM (SELECT * FROM customers ORDER BY id)");
	CHECK(r && strcmp(r, "1:Ada:Oslo,2:Bob:-") == 0,
		  "customers ends as the server's: a row sent replaces the app's, one not sent goes: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM orders") == 2, "no order is let go of by the snapshot's end");
	CHECK(t_exec(db, "DELETE FROM customers WHERE id = 2", NULL) != SQLITE_OK,
		  "customers is guarded as a catalog the replica made");
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 5") == 1 &&
		  t_int(db, "SELECT count(*) FROM sales") == 1, "the app's products and sales are untouched");
	r = t_text(db, "SELECT sync_progress() ->> '$.products.not_held'");
	CHECK(t_has(r, "the host's own table \"products\""), "products waits for the app's name: %s", S(r));
	sqlite3_free(r);
	{
		tm_msg		m = tm_upload(db);
		Sync__Up   *u;
		ms_wire_status st;
		char		reason[MS_REASON_MAX];
		size_t		orders = 0;

		u = m.data ? ms_up_decode(m.data, m.len, 1 << 20, NULL, &st, reason) : NULL;
		for (size_t i = 0; u != NULL && i < u->n_rows; i++)
			if (strcmp(u->rows[i]->table, "orders") == 0)
				orders += u->rows[i]->n_upserts;
		CHECK(orders == 2, "the upload carries both orders: %zu", orders);
		if (u != NULL)
			sync__up__free_unpacked(u, NULL);
	}

	/* the app makes a table later under a declared name, fitting: it is its own */
	CHECK(t_exec(db, "ALTER TABLE products RENAME TO app_products", NULL) == SQLITE_OK,
		  "the app renames its products");
	r = tm_apply(db, begin(&s, schema));
	CHECK(t_has(r, "\"applied\""), "a second snapshot: %s %s", S(r), tm_error());
	tm_apply(db, end(&s));
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 1") == 1, "products is the replica's now");
	CHECK(t_exec(db, "DROP TABLE sales;"
				 "CREATE TABLE sales(origin TEXT, id INTEGER, product INTEGER, qty INTEGER, price REAL, memo TEXT,"
				 "  photo BLOB, PRIMARY KEY (origin, id));"
				 "INSERT INTO sales VALUES ('anyone', 3, 1, 1, 1.0, NULL, NULL)", NULL) == SQLITE_OK,
		  "the app makes a sales that fits, after the first snapshot");
	r = tm_apply(db, begin(&s, schema));
	CHECK(t_has(r, "\"applied\""), "a third snapshot: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_made WHERE name = 'sales'") == 0 &&
		  t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'sales'") == 0,
		  "it stays the app's: only a first snapshot takes a table");
	tm_apply(db, end(&s));
	CHECK(t_int(db, "SELECT count(*) FROM sales") == 1, "with its row");
	sqlite3_close(db);
}

/* a key of another shape: the app's table keyed otherwise stays its own */
static void
other_key(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[4];
	char	   *r;

	CHECK(t_exec(db, "CREATE TABLE orders(origin TEXT, id INTEGER PRIMARY KEY, customer INTEGER, total REAL,"
				 "  note TEXT);"
				 "INSERT INTO orders VALUES ('anyone', 1, 1, 9.5, NULL)", NULL) == SQLITE_OK,
		  "the app's orders, keyed by id alone");
	tm_server_init(&s, 0x30, 0x41);
	tm_shop(schema);
	r = tm_apply(db, begin(&s, schema));
	CHECK(t_has(r, "\"applied\"") && t_int(db, "SELECT count(*) FROM _sync_made WHERE name = 'orders'") == 0,
		  "it stays the app's: %s %s", S(r), tm_error());
	tm_apply(db, end(&s));
	CHECK(t_int(db, "SELECT count(*) FROM orders") == 1, "with its row");
	sqlite3_close(db);
}

void
test_backfill(void)
{
	first_snapshot();
	other_key();
}
