/*
 * test_guard.c - local writes to the server's data are refused on the
 * replica (issue 19.9): a catalog table's rows, and its columns the replica
 * does not own, are the server's.  Written locally they were accepted, never
 * uploaded, and survived digests (which cover keys only).  Now each such write
 * fails with the table and the column named; the replica's own columns and
 * records stay writable, and sync_apply writes everything.
 */
#include "harness.h"

/* refused: sql fails with an error naming every word in words (NULL-terminated) */
static bool
refused(sqlite3 *db, const char *sql, const char *const *words)
{
	char	   *err = NULL;
	int			rc = t_exec(db, sql, &err);
	bool		ok = rc == SQLITE_CONSTRAINT && t_has(err, "magic_sync");

	for (; ok && *words != NULL; words++)
		ok = t_has(err, *words);
	if (!ok)
		fprintf(stderr, "  %s: rc %d, %s\n", sql, rc, S(err));
	sqlite3_free(err);
	return ok;
}

static void
server_columns_refused(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	uint64_t	before = tm_checksum(db, 1);
	char	   *err = NULL;

	CHECK(refused(db, "UPDATE products SET price = '0.01' WHERE id = 1",
				  (const char *const[]) {"products", "price", NULL}),
		  "a server column of a catalog is refused, naming the table and the column");
	CHECK(refused(db, "UPDATE customers SET name = 'Eve' WHERE id = 1",
				  (const char *const[]) {"customers", "name", NULL}),
		  "so is one of a catalog without owned columns");
	CHECK(refused(db, "UPDATE products SET id = 9 WHERE id = 1", (const char *const[]) {"products", "id", NULL}),
		  "so is its key");
	CHECK(refused(db, "UPDATE products SET stock = 1, name = 'x' WHERE id = 2",
				  (const char *const[]) {"products", "name", NULL}),
		  "and a write of an owned column with a server one");
	CHECK(refused(db, "INSERT INTO products(id, name, price) VALUES (99, 'mine', 1)",
				  (const char *const[]) {"products", NULL}),
		  "a row the replica makes in a catalog is refused");
	CHECK(refused(db, "INSERT OR REPLACE INTO customers(id, name) VALUES (1, 'Ada')",
				  (const char *const[]) {"customers", NULL}),
		  "so is a replacement");
	CHECK(refused(db, "DELETE FROM products WHERE id = 3", (const char *const[]) {"products", NULL}),
		  "a catalog row deleted by the replica is refused");
	CHECK(tm_checksum(db, 1) == before, "nothing of them was written, nor noted");

	/* what is the replica's own stays writable */
	CHECK(t_exec(db, "UPDATE products SET stock = 5 WHERE id = 1", &err) == SQLITE_OK, "an owned column: %s", S(err));
	sqlite3_free(err);
	CHECK(t_exec(db, "UPDATE products SET stock = 6, price = price, name = name WHERE id = 1", &err) == SQLITE_OK,
		  "with the server's columns set as they are: %s", S(err));
	sqlite3_free(err);
	CHECK(t_int(db, "SELECT writes FROM _sync_notes WHERE tbl = 'products' AND key = '1:1'") == 2,
		  "both noted, to go up");
	CHECK(t_exec(db, "INSERT INTO orders VALUES ('10111213-1415-4617-1819-1a1b1c1d1e1f', 7, 1, 9.5, 'mine')", &err)
		  == SQLITE_OK, "a record: %s", S(err));
	sqlite3_free(err);
	CHECK(t_exec(db, "UPDATE orders SET note = 'changed' WHERE id = 7", &err) == SQLITE_OK,
		  "a record changed: %s", S(err));
	sqlite3_free(err);
	CHECK(t_exec(db, "DELETE FROM orders WHERE id = 7", &err) == SQLITE_OK, "a record deleted: %s", S(err));
	sqlite3_free(err);
	CHECK(t_exec(db, "CREATE TABLE notes_local (id INTEGER PRIMARY KEY, product INTEGER);"
				 " INSERT INTO notes_local VALUES (1, 1); UPDATE notes_local SET product = 2", &err) == SQLITE_OK,
		  "a local table: %s", S(err));
	sqlite3_free(err);
	sqlite3_close(db);
}

static void
apply_still_writes(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d = tm_down();
	char	   *r;

	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"green tea\",\"price\":3,\"stock\":10}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":8,\"name\":\"new\",\"price\":1,\"stock\":1}", -1, "8", NULL);
	tm_delete(tm_rows(d, "customers"), "2", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"upserts\":2") && t_has(r, "\"deletes\":1"),
		  "sync_apply writes the server's rows and columns: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT price = 3 AND name = 'green tea' FROM products WHERE id = 1") == 1, "changed");
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 8") == 1, "made");
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE id = 2") == 0, "let go of");
	CHECK(refused(db, "UPDATE products SET price = 0 WHERE id = 8", (const char *const[]) {"price", NULL}),
		  "and after it, the guard is back");
	sqlite3_close(db);
}

/* a Down of n new products from id first: many rows, applied with the triggers off when all are ours */
static char *
apply_many(sqlite3 *db, tm_server *s, int first, int n)
{
	Sync__Down *d = tm_down();

	for (int i = first; i < first + n; i++)
	{
		char		row[128];
		char		key[16];

		snprintf(row, sizeof row, "{\"id\":%d,\"name\":\"p%d\",\"price\":1,\"stock\":1}", i, i);
		snprintf(key, sizeof key, "%d", i);
		tm_upsert(tm_rows(d, "products"), tm_strdup(row), -1, tm_strdup(key), NULL);
	}
	return tm_apply(db, tm_next(s, d, NULL));
}

/*
 * A large Down runs with the connection's triggers off while every trigger
 * is ours (apply.c's quiet_triggers): the host's own triggers, whatever
 * their name, and TEMP ones, still fire on every row, and after it the
 * guards are back.
 */
static void
many_rows_keep_host_triggers(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	char	   *err = NULL;
	char	   *r;
	int			on = 0;

	r = apply_many(db, &s, 100, 300);
	CHECK(t_has(r, "\"upserts\":300"), "300 rows applied: %s %s", S(r), tm_error());
	CHECK(sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, -1, &on) == SQLITE_OK && on == 1,
		  "the connection's triggers are on again");
	CHECK(refused(db, "INSERT INTO products(id, name, price) VALUES (1000, 'mine', 1)",
				  (const char *const[]) {"products", NULL}),
		  "and the guard refuses a local row after it");
	CHECK(t_exec(db, "CREATE TABLE host_log (id INTEGER, way TEXT);"
				 " CREATE TRIGGER host_ins AFTER INSERT ON products BEGIN INSERT INTO host_log VALUES (NEW.id, 'host'); END",
				 &err) == SQLITE_OK, "the host's trigger: %s", S(err));
	sqlite3_free(err);
	r = apply_many(db, &s, 400, 300);
	CHECK(t_has(r, "\"upserts\":300") && t_int(db, "SELECT count(*) FROM host_log WHERE way = 'host'") == 300,
		  "the host's trigger fired on each of 300 rows: %s %s", S(r), tm_error());
	CHECK(t_exec(db, "DROP TRIGGER host_ins; CREATE TRIGGER \"_sync_mine\" AFTER INSERT ON products"
				 " BEGIN INSERT INTO host_log VALUES (NEW.id, 'named'); END", &err) == SQLITE_OK, "%s", S(err));
	sqlite3_free(err);
	r = apply_many(db, &s, 700, 300);
	CHECK(t_has(r, "\"upserts\":300") && t_int(db, "SELECT count(*) FROM host_log WHERE way = 'named'") == 300,
		  "so did one named as ours but not silent while applying: %s %s", S(r), tm_error());
	CHECK(t_exec(db, "DROP TRIGGER \"_sync_mine\"; CREATE TEMP TRIGGER host_temp AFTER INSERT ON main.products"
				 " BEGIN INSERT INTO host_log VALUES (NEW.id, 'temp'); END", &err) == SQLITE_OK, "%s", S(err));
	sqlite3_free(err);
	r = apply_many(db, &s, 1000, 300);
	CHECK(t_has(r, "\"upserts\":300") && t_int(db, "SELECT count(*) FROM host_log WHERE way = 'temp'") == 300,
		  "and a TEMP one: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id >= 100") == 1200, "every row is there");

	/*
	 * What quiet_triggers found is kept with the kept schema (MS_TEST_KEEP),
	 * across the large messages' own expiries: a TEMP trigger the host makes
	 * after two of them still fires on the third's rows
	 */
	CHECK(t_exec(db, "DROP TRIGGER host_temp", &err) == SQLITE_OK, "%s", S(err));
	sqlite3_free(err);
	r = apply_many(db, &s, 1300, 100);
	CHECK(t_has(r, "\"upserts\":100"), "%s %s", S(r), tm_error());
	r = apply_many(db, &s, 1400, 100);
	CHECK(t_has(r, "\"upserts\":100") && t_int(db, "SELECT count(*) FROM host_log WHERE id >= 1300") == 0,
		  "two more large messages, every trigger ours: %s %s", S(r), tm_error());
	CHECK(t_exec(db, "CREATE TEMP TRIGGER host_again AFTER INSERT ON main.products"
				 " BEGIN INSERT INTO host_log VALUES (NEW.id, 'again'); END", &err) == SQLITE_OK, "%s", S(err));
	sqlite3_free(err);
	r = apply_many(db, &s, 1500, 100);
	CHECK(t_has(r, "\"upserts\":100") && t_int(db, "SELECT count(*) FROM host_log WHERE way = 'again'") == 100,
		  "the TEMP trigger made after them fired on each of 100 rows: %s %s", S(r), tm_error());
	CHECK(t_exec(db, "DROP TRIGGER host_again", &err) == SQLITE_OK, "%s", S(err));
	sqlite3_free(err);
	/* and one the host made and rolled back (its schema version back as it was) fires on nothing */
	CHECK(t_exec(db, "BEGIN; CREATE TRIGGER host_gone AFTER INSERT ON products"
				 " BEGIN INSERT INTO host_log VALUES (NEW.id, 'gone'); END; ROLLBACK", &err) == SQLITE_OK, "%s", S(err));
	sqlite3_free(err);
	r = apply_many(db, &s, 1600, 100);
	CHECK(t_has(r, "\"upserts\":100") && t_int(db, "SELECT count(*) FROM host_log WHERE way = 'gone'") == 0 &&
		  t_int(db, "SELECT count(*) FROM products WHERE id >= 1300") == 400,
		  "a rolled back trigger is no trigger: %s %s", S(r), tm_error());
	sqlite3_close(db);
}

void
test_guard(void)
{
	server_columns_refused();
	apply_still_writes();
	many_rows_keep_host_triggers();
}
