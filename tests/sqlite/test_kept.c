/*
 * test_kept.c - sync_keep_statements (src/sqlite/kept.c): a connection that
 * keeps the extension's statements applies, uploads and reports exactly as
 * one that prepares them each call; a statement is never lent twice at once;
 * they are all finalized when it lets them go, so the connection closes.
 * (The whole suite also runs with every connection keeping them:
 * MS_TEST_KEEP=1 build/test_sqlite.)
 */
#include "harness.h"

void		test_kept(void);

static tm_msg
product(tm_server *s, int id, const char *name)
{
	Sync__Down *d = tm_down();
	char		row[128];
	char		key[16];

	snprintf(row, sizeof row, "{\"id\":%d,\"name\":\"%s\",\"price\":1}", id, name);
	snprintf(key, sizeof key, "%d", id);
	tm_upsert(tm_rows(d, "products"), row, -1, key, NULL);
	return tm_next(s, d, NULL);
}

/* how many statements the connection has open, finalized or not */
static int
open_statements(sqlite3 *db)
{
	int			n = 0;

	for (sqlite3_stmt *st = sqlite3_next_stmt(db, NULL); st != NULL; st = sqlite3_next_stmt(db, st))
		n++;
	return n;
}

static void
same_outcome(void)
{
	tm_server	s1,
				s2;
	sqlite3    *kept = t_shop(&s1);
	sqlite3    *fresh = t_shop(&s2);
	int			before;
	bool		same = true;

	/* a connection of the suite may keep already (MS_TEST_KEEP): from none kept */
	t_int(fresh, "SELECT sync_keep_statements(0)");
	t_int(kept, "SELECT sync_keep_statements(0)");
	before = open_statements(kept);
	CHECK(before == 0, "none open before: %d", before);
	CHECK(t_int(kept, "SELECT sync_keep_statements(1)") == 0, "the connection keeps its statements, none yet");
	for (int i = 0; i < 20; i++)
	{
		char		name[16];
		char	   *a;
		char	   *b;

		snprintf(name, sizeof name, "p%d", i);
		a = tm_apply(kept, product(&s1, 10 + i % 3, name));
		b = tm_apply(fresh, product(&s2, 10 + i % 3, name));
		if (a == NULL || b == NULL || strcmp(a, b) != 0)
		{
			same = false;
			fprintf(stderr, "message %d: kept %s, fresh %s\n", i, S(a), S(b));
		}
		/* and the replica's own writes in between, noted for its uploads */
		for (int k = 0; k < 2; k++)
		{
			char	   *sql = sqlite3_mprintf("INSERT INTO products(id, name, price) VALUES (%d, 'w', 2)"
											  " ON CONFLICT (id) DO UPDATE SET price = price + 1", 100 + i % 5);

			sqlite3_exec(k ? fresh : kept, sql, NULL, NULL, NULL);
			sqlite3_free(sql);
		}
		{
			long long	ua = t_int(kept, "SELECT length(sync_upload())");
			long long	ub = t_int(fresh, "SELECT length(sync_upload())");

			if (ua <= 0 || ua != ub)
			{
				same = false;
				fprintf(stderr, "upload %d: kept %lld bytes, fresh %lld\n", i, ua, ub);
			}
		}
	}
	CHECK(same, "each message applied the same, kept or prepared each call");
	CHECK(tm_checksum(kept, 0) == tm_checksum(fresh, 0), "the two files hold the same rows");
	{
		const char *q = "SELECT number || hex(seal) || gap || snapshot || generation FROM _sync_state";
		char	   *a = t_text(kept, q);
		char	   *b = t_text(fresh, q);

		CHECK(a != NULL && b != NULL && strcmp(a, b) == 0, "the same chain: %s / %s", S(a), S(b));
		sqlite3_free(a);
		sqlite3_free(b);
		CHECK(t_int(kept, "SELECT count(*) FROM _sync_notes WHERE send_id IS NOT NULL") ==
			  t_int(fresh, "SELECT count(*) FROM _sync_notes WHERE send_id IS NOT NULL") &&
			  t_int(kept, "SELECT count(*) FROM _sync_notes") == t_int(fresh, "SELECT count(*) FROM _sync_notes"),
			  "the same notes, sent as the same");
	}
	{
		char	   *a = t_text(kept, "SELECT sync_status()");
		char	   *b = t_text(fresh, "SELECT sync_status()");

		CHECK(a != NULL && b != NULL && strcmp(a, b) == 0, "the same status: %s / %s", S(a), S(b));
		sqlite3_free(a);
		sqlite3_free(b);
	}
	CHECK(t_int(kept, "SELECT sync_keep_statements(1)") > 0, "it keeps some: %lld",
		  t_int(kept, "SELECT sync_keep_statements(1)"));
	CHECK(open_statements(kept) > before, "kept statements stay prepared between calls");
	CHECK(open_statements(fresh) == 0, "a connection that keeps none has none open between calls");
	/* every kept statement given back: none holds a read (a checkpoint truncates the WAL whole) */
	CHECK(t_int(kept, "SELECT sync_keep_statements(0)") == 0, "let go");
	CHECK(open_statements(kept) == 0, "none is left once it lets them go: %d", open_statements(kept));
	CHECK(sqlite3_close_v2(kept) == SQLITE_OK, "and the connection closes");
	sqlite3_close(fresh);
}

/* calls row after row in one statement, and side by side, lend and give back the same statements */
static void
nested(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	char	   *r;

	t_int(db, "SELECT sync_keep_statements(1)");
	r = tm_apply(db, product(&s, 7, "jam"));
	CHECK(t_has(r, "\"applied\""), "applied: %s", S(r));
	CHECK(t_int(db, "SELECT count(DISTINCT a) FROM (SELECT sync_applied() AS a, sync_status() AS s"
				" FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50)"
				" SELECT i FROM n))") == 1, "the same answer at every row");
	CHECK(t_int(db, "SELECT count(*) FROM (SELECT sync_applied() FROM products p1, products p2)") > 1,
		  "calls side by side in one statement");
	CHECK(t_int(db, "SELECT sync_keep_statements(0)") == 0, "let go");
	CHECK(open_statements(db) == 0, "none left");
	sqlite3_close(db);
}

/* products as the shop has it, with one column more (more: "name TYPE", before the retired column) */
static tm_msg
products_gain(tm_server *s, const char *more)
{
	Sync__Down *d = tm_down();
	char		cols[256];
	Sync__Table *t;

	snprintf(cols, sizeof cols, "id INTEGER, name TEXT, price REAL, stock INTEGER owned, %s,"
			 " retired_at INTEGER field=0", more);
	t = tm_table("products", "catalog", "json", "id", cols);
	tm_retired(t, "retired_at");
	tm_change(d, t);
	return tm_next(s, d, NULL);
}

static tm_msg
one_row(tm_server *s, const char *table, const char *row, const char *key)
{
	Sync__Down *d = tm_down();

	tm_upsert(tm_rows(d, table), row, -1, key, NULL);
	return tm_next(s, d, NULL);
}

/*
 * kept_shop: the shop's file at path, a keeping a's statements, b not;
 * the snapshot and a row applied through a
 */
static void
kept_shop(const char *path, uint8_t id, sqlite3 **a, sqlite3 **b, tm_server *s)
{
	tm_msg		begin,
				end;
	char	   *r;

	*a = t_open(path);
	*b = t_open(path);
	t_int(*a, "SELECT sync_keep_statements(1)");
	t_int(*b, "SELECT sync_keep_statements(0)");
	tm_server_init(s, id, (uint8_t) (id - 0x10));
	tm_shop_snapshot(s, &begin, &end);
	r = tm_apply(*a, begin);
	CHECK(t_has(r, "\"applied\""), "the snapshot begins: %s %s", S(r), tm_error());
	r = tm_apply(*a, end);
	CHECK(t_has(r, "\"snapshot\":\"end\""), "and ends: %s %s", S(r), tm_error());
	r = tm_apply(*a, product(s, 4, "rye"));
	CHECK(t_has(r, "\"upserts\":1"), "a row, the schema kept: %s %s", S(r), tm_error());
}

/*
 * The schema a connection that keeps its statements keeps between calls
 * (schema.c) is read again once anyone changed it: another connection's
 * schema change and let_go, its own schema change, a change it applied and
 * rolled back followed by another connection's (the same schema version
 * again), a hand edit of _sync_tables.
 */
static void
schema_kept(void)
{
	const char *path = t_path("kept_schema.db");
	sqlite3    *a;
	sqlite3    *b;
	tm_server	s,
				saved;
	char	   *r;

	kept_shop(path, 0x20, &a, &b, &s);

	/* another connection's schema change, then a row of the new column on the keeping one */
	r = tm_apply(b, products_gain(&s, "origin TEXT"));
	CHECK(t_has(r, "\"changed\":1") && t_has(r, "\"failed\":[]"), "b adds products.origin: %s %s", S(r), tm_error());
	r = tm_apply(a, one_row(&s, "products", "{\"id\":5,\"name\":\"oat\",\"price\":1,\"origin\":\"NO\"}", "5"));
	CHECK(t_has(r, "\"upserts\":1"), "a applies a row of the new schema: %s %s", S(r), tm_error());
	CHECK(t_int(a, "SELECT count(*) FROM products WHERE id = 5 AND origin = 'NO'") == 1,
		  "with the column b added (not the schema a kept before)");

	/* its own schema change, then a row of the new column */
	r = tm_apply(a, products_gain(&s, "origin TEXT, size TEXT"));
	CHECK(t_has(r, "\"changed\":1") && t_has(r, "\"failed\":[]"), "a adds products.size: %s %s", S(r), tm_error());
	r = tm_apply(a, one_row(&s, "products", "{\"id\":6,\"name\":\"spelt\",\"price\":1,\"size\":\"L\"}", "6"));
	CHECK(t_has(r, "\"upserts\":1") && t_int(a, "SELECT count(*) FROM products WHERE id = 6 AND size = 'L'") == 1,
		  "a row of its own new column: %s %s", S(r), tm_error());

	/* a change applied and rolled back, then another connection's: the schema version comes back */
	saved = s;
	CHECK(t_exec(a, "BEGIN", NULL) == SQLITE_OK, "a begins");
	r = tm_apply(a, products_gain(&s, "origin TEXT, size TEXT, grade INTEGER"));
	CHECK(t_has(r, "\"changed\":1"), "a adds products.grade: %s %s", S(r), tm_error());
	r = t_text(a, "SELECT sync_status()");
	CHECK(r != NULL, "read with it");
	sqlite3_free(r);
	CHECK(t_exec(a, "ROLLBACK", NULL) == SQLITE_OK, "and rolls back");
	s = saved;
	r = tm_apply(b, products_gain(&s, "origin TEXT, size TEXT, note TEXT"));
	CHECK(t_has(r, "\"changed\":1") && t_has(r, "\"failed\":[]"), "b adds products.note instead: %s %s", S(r), tm_error());
	r = tm_apply(a, one_row(&s, "products", "{\"id\":7,\"name\":\"millet\",\"price\":1,\"note\":\"new\"}", "7"));
	CHECK(t_has(r, "\"upserts\":1") && t_int(a, "SELECT count(*) FROM products WHERE id = 7 AND note = 'new'") == 1,
		  "a applies it with note, not grade: %s %s", S(r), tm_error());

	/* another connection lets go of a table: its rows are no longer taken */
	{
		Sync__Down *d = tm_down();

		tm_let_go(d, "customers");
		r = tm_apply(b, tm_next(&s, d, NULL));
		CHECK(t_has(r, "\"let_go\":1"), "b lets go of customers: %s %s", S(r), tm_error());
	}
	r = tm_apply(a, one_row(&s, "customers", "{\"id\":3,\"name\":\"Cy\",\"vip\":false}", "3"));
	CHECK(t_has(r, "\"upserts\":0") && t_has(r, "\"refused\":1"), "a no longer takes its rows: %s %s", S(r), tm_error());

	/* the host's own hand on _sync_tables, on the keeping connection itself */
	CHECK(t_int(a, "SELECT count(*) FROM _sync_tables WHERE name = 'orders'") == 1, "orders is held");
	CHECK(t_exec(a, "DELETE FROM _sync_tables WHERE name = 'orders'", NULL) == SQLITE_OK, "the host forgets it");
	{
		Sync__Down *d = tm_down();

		tm_upsert(tm_rows(d, "orders"), "{\"origin\":\"00000000-0000-0000-0000-000000000001\",\"id\":1,"
				  "\"customer\":null,\"total\":1,\"note\":null}", -1, "00000000-0000-0000-0000-000000000001", "1",
				  NULL);
		r = tm_apply(a, tm_next(&s, d, NULL));
	}
	CHECK(t_has(r, "\"upserts\":0"), "a no longer takes its rows either: %s %s", S(r), tm_error());

	CHECK(t_int(a, "SELECT sync_keep_statements(0)") == 0, "let go");
	sqlite3_close(a);
	sqlite3_close(b);
	remove(path);
}

/*
 * What the file's tables are, found whole, is kept with the schema only
 * while nothing can have changed it under the same schema version: a
 * rollback of DDL (the version comes back, then names another schema), a
 * TEMP table of one of its names (temp's version, not main's).
 */
static void
tables_checked(void)
{
	const char *path = t_path("kept_tables.db");
	sqlite3    *a;
	sqlite3    *b;
	tm_server	s;
	char	   *r;

	kept_shop(path, 0x21, &a, &b, &s);

	/* a TEMP table of a name of ours hides it: found as the file has it then */
	CHECK(t_exec(a, "CREATE TEMP TABLE scratch(x)", NULL) == SQLITE_OK, "a TEMP table of the host's");
	r = tm_apply(a, product(&s, 5, "oat"));
	CHECK(t_has(r, "\"upserts\":1"), "a row of products: %s %s", S(r), tm_error());
	CHECK(t_exec(a, "CREATE TEMP TABLE products(id INTEGER PRIMARY KEY)", NULL) == SQLITE_OK,
		  "a TEMP products, without the columns");
	r = tm_apply(a, product(&s, 6, "spelt"));
	CHECK(t_has(r, "\"upserts\":0") && t_has(r, "\"refused\":1"),
		  "its rows are refused, not an error: %s %s", S(r), tm_error());
	CHECK(t_exec(a, "DROP TABLE temp.products", NULL) == SQLITE_OK, "the TEMP table dropped");
	r = tm_apply(a, product(&s, 7, "millet"));
	CHECK(t_has(r, "\"upserts\":1"), "rows taken again: %s %s", S(r), tm_error());

	/* found whole at version V+1 in a transaction rolled back; then V+1 again, customers dropped */
	CHECK(t_exec(a, "BEGIN", NULL) == SQLITE_OK && t_exec(a, "CREATE TABLE host_scratch(x)", NULL) == SQLITE_OK,
		  "the host makes a table of its own in a transaction");
	r = t_text(a, "SELECT sync_status()");
	CHECK(r != NULL, "read with it: %s", tm_error());
	sqlite3_free(r);
	CHECK(t_exec(a, "ROLLBACK", NULL) == SQLITE_OK, "and rolls back");
	CHECK(t_exec(b, "DROP TABLE customers", NULL) == SQLITE_OK, "another connection drops customers");
	r = tm_apply(a, one_row(&s, "customers", "{\"id\":3,\"name\":\"Cy\",\"vip\":false}", "3"));
	CHECK(t_has(r, "\"upserts\":0") && t_has(r, "\"refused\":1"),
		  "its rows are refused, the table not in the file: %s %s", S(r), tm_error());

	CHECK(t_int(a, "SELECT sync_keep_statements(0)") == 0, "let go");
	sqlite3_close(a);
	sqlite3_close(b);
	remove(path);
}

void
test_kept(void)
{
	same_outcome();
	nested();
	schema_kept();
	tables_checked();
}
