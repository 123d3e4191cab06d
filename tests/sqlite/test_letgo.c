/*
 * test_letgo.c - what a message does to rows the replica wrote or points
 * at (docs/protocol.md 5.2): owned columns kept, records with a pending
 * note kept whole and never let go of, rows retired while something that
 * stays points at them and let go of for good once nothing does, children
 * first, and EndSnapshot letting go of what a snapshot did not name.
 */
#include "harness.h"

#include <time.h>

void		test_letgo(void);

static char *
apply_down(sqlite3 *db, tm_server *s, Sync__Down *d)
{
	char	   *r = tm_apply(db, tm_next(s, d, NULL));

	CHECK(t_has(r, "\"applied\""), "a message applies: %s %s", S(r), tm_error());
	return r;
}

static char *
order_sql(const tm_server *s, const char *fmt)
{
	return sqlite3_mprintf(fmt, tm_replica_text(s));
}

static void
exec_mine(sqlite3 *db, const tm_server *s, const char *fmt)
{
	char	   *sql = order_sql(s, fmt);
	char	   *err = NULL;

	CHECK(t_exec(db, sql, &err) == SQLITE_OK, "%s: %s", sql, S(err));
	sqlite3_free(err);
	sqlite3_free(sql);
}

static void
owned_columns_kept(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d;

	t_exec(db, "UPDATE products SET stock = 42 WHERE id = 1", NULL);
	CHECK(t_int(db, "SELECT writes FROM _sync_notes WHERE tbl = 'products' AND key = '1:1'") == 1,
		  "a write of an owned column is noted");
	t_exec(db, "UPDATE products SET stock = 43 WHERE id = 1", NULL);
	t_exec(db, "UPDATE products SET stock = 43 WHERE id = 1", NULL);
	CHECK(t_int(db, "SELECT writes FROM _sync_notes WHERE tbl = 'products' AND key = '1:1'") == 2,
		  "writes are counted, one note per row; a write that changes nothing is not one");
	CHECK(t_exec(db, "UPDATE products SET name = 'local' WHERE id = 2", NULL) == SQLITE_CONSTRAINT,
		  "a write of a column the server owns is refused (test_guard.c)");
	/* ... and one behind the guard's back (as sync_apply steps around it) */
	t_exec(db, "UPDATE _sync_state SET applying = 1; UPDATE products SET name = 'local' WHERE id = 2;"
		   " UPDATE _sync_state SET applying = 0", NULL);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE key = '1:2'") == 0,
		  "a write of a column the server owns is not noted");
	d = tm_down();
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"green tea\",\"price\":2.75,\"stock\":10}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":2,\"name\":\"coffee\",\"price\":3.25,\"stock\":5}", -1, "2", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":7,\"name\":\"new\",\"price\":1,\"stock\":70}", -1, "7", NULL);
	apply_down(db, &s, d);
	CHECK(t_int(db, "SELECT stock = 43 AND name = 'green tea' AND price = 2.75 FROM products WHERE id = 1") == 1,
		  "the server's columns overwrite, the owned one stays");
	CHECK(t_int(db, "SELECT name = 'coffee' FROM products WHERE id = 2") == 1, "a local edit of the server's column is overwritten");
	CHECK(t_int(db, "SELECT stock FROM products WHERE id = 7") == 70, "a new row takes the server's owned value");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'products'") == 1, "applying notes nothing");
	sqlite3_close(db);
}

static void
pending_records_kept(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d;
	char	   *r;
	char		row[256];

	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 5.0, 'mine')");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'orders'") == 1, "an insert of a record is noted");
	d = tm_down();
	snprintf(row, sizeof row, "{\"origin\":\"%s\",\"id\":1,\"customer\":1,\"total\":9,\"note\":\"server\"}", tm_replica_text(&s));
	tm_upsert(tm_rows(d, "orders"), row, -1, tm_replica_text(&s), "1", NULL);
	tm_upsert(tm_rows(d, "orders"), "{\"origin\":\"other\",\"id\":1,\"customer\":2,\"total\":1}", -1, "other", "1", NULL);
	r = apply_down(db, &s, d);
	CHECK(t_has(r, "\"upserts\":1") && t_has(r, "\"kept\":1"), "an own record with a pending note is kept: %s", S(r));
	CHECK(t_int(db, "SELECT total = 5.0 AND note = 'mine' FROM orders WHERE id = 1 AND origin <> 'other'") == 1,
		  "whole");
	d = tm_down();
	tm_delete(tm_rows(d, "orders"), tm_replica_text(&s), "1", NULL);
	r = apply_down(db, &s, d);
	CHECK(t_has(r, "\"kept\":1") && t_has(r, "\"deletes\":0"), "and never let go of: %s", S(r));
	CHECK(t_int(db, "SELECT count(*) FROM orders WHERE origin <> 'other'") == 1, "it is there");
	/* filed: the note goes, and the server's version wins from then on */
	t_exec(db, "DELETE FROM _sync_notes", NULL);
	d = tm_down();
	tm_upsert(tm_rows(d, "orders"), row, -1, tm_replica_text(&s), "1", NULL);
	r = apply_down(db, &s, d);
	CHECK(t_has(r, "\"upserts\":1") && t_int(db, "SELECT total FROM orders WHERE id = 1 AND origin <> 'other'") == 9,
		  "without a note the server's version is applied: %s", S(r));
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes") == 0, "and noted nothing");
	sqlite3_close(db);
}

static void
retire_and_let_go(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d;
	char	   *r;
	char	   *dg;
	int64_t		now = (int64_t) time(NULL);

	/* the replica's own order points at customer 2, its own sale at product 3 */
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 2, 5.0, NULL)");
	exec_mine(db, &s, "INSERT INTO sales(origin, id, product, qty) VALUES ('%s', 1, 3, 1)");
	t_exec(db, "DELETE FROM _sync_notes", NULL);	/* filed */
	d = tm_down();
	tm_delete(tm_rows(d, "customers"), "2", NULL);
	tm_delete(tm_rows(d, "customers"), "1", NULL);
	tm_delete(tm_rows(d, "products"), "3", NULL);
	tm_delete(tm_rows(d, "products"), "2", NULL);
	r = apply_down(db, &s, d);
	CHECK(t_has(r, "\"deletes\":2") && t_has(r, "\"retired\":2"), "two let go of, two retired: %s", S(r));
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 1 && t_int(db, "SELECT count(*) FROM _sync_retired WHERE tbl = 'customers' AND key = '1:2'") == 1,
		  "customer 2 retired in _sync_retired (customers have no retired column)");
	CHECK(t_int(db, "SELECT retired_at IS NOT NULL FROM products WHERE id = 3") == 1 &&
		  t_int(db, "SELECT count(*) FROM products") == 2, "product 3 retired in its column, product 2 gone");
	{
		sqlite3_stmt *st;

		sqlite3_prepare_v2(db, "SELECT retired_at BETWEEN ?1 - 5 AND ?1 + 5 FROM products WHERE id = 3", -1, &st, NULL);
		sqlite3_bind_int64(st, 1, now);
		CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1, "retired at the time, unix seconds");
		sqlite3_finalize(st);
	}
	dg = t_text(db, "SELECT sync_digest('customers') || sync_digest('products')");
	CHECK(t_has(dg, "{\"count\":0,") && t_has(dg, "{\"count\":1,"), "retired rows are left out of digests: %s", S(dg));
	sqlite3_free(dg);
	/* offered again: live again */
	d = tm_down();
	tm_upsert(tm_rows(d, "customers"), "{\"id\":2,\"name\":\"Bob\"}", -1, "2", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":3,\"name\":\"cake\"}", -1, "3", NULL);
	apply_down(db, &s, d);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_retired") == 0 && t_int(db, "SELECT retired_at IS NULL FROM products WHERE id = 3") == 1,
		  "a retired row offered again is live");
	/* retired again, then the replica lets go of its own rows: the next message lets go for good */
	d = tm_down();
	tm_delete(tm_rows(d, "customers"), "2", NULL);
	tm_delete(tm_rows(d, "products"), "3", NULL);
	r = apply_down(db, &s, d);
	CHECK(t_has(r, "\"retired\":2"), "retired again: %s", S(r));
	exec_mine(db, &s, "DELETE FROM orders WHERE origin = '%s'");
	exec_mine(db, &s, "DELETE FROM sales WHERE origin = '%s'");
	r = apply_down(db, &s, tm_down());
	CHECK(t_has(r, "\"let_go\":2"), "nothing points at them any more: let go of for good: %s", S(r));
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE id = 2") == 0 && t_int(db, "SELECT count(*) FROM products WHERE id = 3") == 0 &&
		  t_int(db, "SELECT count(*) FROM _sync_retired") == 0, "gone, with their records");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl IN ('orders', 'sales')") == 2,
		  "the replica's deletes of its records wait to go up");
	sqlite3_close(db);
}

static void
local_tables_and_chains(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d;
	char	   *r;

	/* a local table of the host points at an order of the replica's own */
	t_exec(db, "CREATE TABLE receipts(id INTEGER PRIMARY KEY, origin TEXT, order_id INTEGER,"
		   " FOREIGN KEY (origin, order_id) REFERENCES orders(origin, id))", NULL);
	t_exec(db, "CREATE TABLE visits(id INTEGER PRIMARY KEY, customer INTEGER REFERENCES customers)", NULL);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 5.0, NULL)");
	exec_mine(db, &s, "INSERT INTO receipts VALUES (1, '%s', 1)");
	t_exec(db, "INSERT INTO visits VALUES (1, 2)", NULL);
	t_exec(db, "DELETE FROM _sync_notes", NULL);
	/* the server takes back the order (own, filed) and both customers */
	d = tm_down();
	tm_delete(tm_rows(d, "customers"), "1", NULL);
	tm_delete(tm_rows(d, "customers"), "2", NULL);
	tm_delete(tm_rows(d, "orders"), tm_replica_text(&s), "1", NULL);
	r = apply_down(db, &s, d);
	CHECK(t_has(r, "\"retired\":3") && t_has(r, "\"deletes\":0"),
		  "the order (a receipt points at it), customer 1 (the retired order does), customer 2 (a visit does): %s", S(r));
	/* the receipt goes: the order, then its customer, go for good in one step, children first */
	t_exec(db, "DELETE FROM receipts", NULL);
	r = apply_down(db, &s, tm_down());
	CHECK(t_has(r, "\"let_go\":2"), "order and customer 1 let go of for good: %s", S(r));
	CHECK(t_int(db, "SELECT count(*) FROM orders") == 0 && t_int(db, "SELECT count(*) FROM customers") == 1,
		  "customer 2 stays while its visit does");
	t_exec(db, "DELETE FROM visits", NULL);
	r = apply_down(db, &s, tm_down());
	CHECK(t_has(r, "\"let_go\":1") && t_int(db, "SELECT count(*) FROM customers") == 0, "then it goes: %s", S(r));
	sqlite3_close(db);
}

static void
sqlite_refuses_the_delete(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d;
	char	   *r;

	/* a rule the extension cannot see: the delete fails, the row is retired */
	t_exec(db, "CREATE TRIGGER keep_ada BEFORE DELETE ON customers WHEN OLD.id = 1"
		   " BEGIN SELECT RAISE(ABORT, 'Ada stays'); END", NULL);
	d = tm_down();
	tm_delete(tm_rows(d, "customers"), "1", NULL);
	tm_delete(tm_rows(d, "customers"), "2", NULL);
	r = apply_down(db, &s, d);
	CHECK(t_has(r, "\"deletes\":1") && t_has(r, "\"retired\":1"), "a delete SQLite refuses retires the row: %s", S(r));
	r = apply_down(db, &s, tm_down());
	CHECK(t_has(r, "\"let_go\":0") && t_int(db, "SELECT count(*) FROM _sync_retired") == 1,
		  "and it stays retired while the rule holds: %s", S(r));
	/* a let-go step that fails for another reason fails only itself */
	t_exec(db, "DROP TRIGGER keep_ada; CREATE TRIGGER broken BEFORE DELETE ON customers"
		   " BEGIN INSERT INTO nowhere VALUES (1); END", NULL);
	r = apply_down(db, &s, tm_down());
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"let_go\":0"), "the message still applies: %s", S(r));
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "letting go of retired rows failed") && t_has(r, "nowhere"), "last_error says why: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 1, "the row is still there, retired");
	t_exec(db, "DROP TRIGGER broken", NULL);
	r = apply_down(db, &s, tm_down());
	CHECK(t_has(r, "\"let_go\":1"), "once the cause is fixed it goes: %s", S(r));
	sqlite3_close(db);
}

static void
foreign_keys_on(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d;
	char	   *r;

	t_exec(db, "PRAGMA foreign_keys = ON; CREATE TABLE visits(id INTEGER PRIMARY KEY,"
		   " customer INTEGER REFERENCES customers ON DELETE CASCADE); INSERT INTO visits VALUES (1, 2)", NULL);
	d = tm_down();
	tm_delete(tm_rows(d, "customers"), "2", NULL);
	r = apply_down(db, &s, d);
	CHECK(t_has(r, "\"retired\":1") && t_int(db, "SELECT count(*) FROM visits") == 1,
		  "a local row pointing keeps its parent: no cascade: %s", S(r));
	sqlite3_close(db);
}

static void
end_snapshot_cleanup(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Table *schema[4];
	Sync__Down *d;
	char	   *r;

	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 2, 5.0, NULL)");	/* pending: kept */
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 2, 2, 6.0, NULL)");
	t_exec(db, "DELETE FROM _sync_notes WHERE key LIKE '%1:2'", NULL);	/* order 2 filed */
	t_exec(db, "INSERT INTO orders VALUES ('other', 1, 1, 1.0, NULL)", NULL);	/* another replica's: noted, not ours */
	t_exec(db, "DELETE FROM _sync_notes WHERE key LIKE '5:other%'", NULL);
	tm_shop(schema);
	d = tm_begin(schema, 4);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\"}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":2,\"name\":\"coffee\"}", -1, "2", NULL);
	apply_down(db, &s, d);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_named") == 2, "the snapshot's keys are kept in a table");
	d = tm_down();
	tm_upsert(tm_rows(d, "products"), "{\"id\":3,\"name\":\"cake\"}", -1, "3", NULL);
	apply_down(db, &s, d);
	r = tm_apply(db, tm_next(&s, NULL, tm_end("customers", "products", "orders", "sales", NULL)));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "the end: %s %s", S(r), tm_error());
	CHECK(t_has(r, "\"deletes\":3") && t_has(r, "\"retired\":1") && t_has(r, "\"kept\":1"),
		  "order 2 and the other's order and product 1 let go of; customer 2 retired (order 1 points at it); order 1 kept: %s", S(r));
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id IN (2, 3)") == 2, "products 2 and 3 remain");
	CHECK(t_int(db, "SELECT count(*) FROM products") == 2, "only them");
	CHECK(t_int(db, "SELECT count(*) FROM orders") == 1, "the order with a pending note remains");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_named") == 0, "the named keys are let go of");
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"snapshot\":null") && t_has(r, "\"digest_due\":true"), "no snapshot open, digests due: %s", S(r));
	sqlite3_free(r);
	/* an EndSnapshot with no snapshot open lets go of nothing */
	r = tm_apply(db, tm_next(&s, NULL, tm_end("customers", "products", NULL)));
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"deletes\":0") && t_int(db, "SELECT count(*) FROM products") == 2,
		  "a stray EndSnapshot lets go of nothing: %s", S(r));
	sqlite3_close(db);
}

void
test_letgo(void)
{
	owned_columns_kept();
	pending_records_kept();
	retire_and_let_go();
	local_tables_and_chains();
	sqlite_refuses_the_delete();
	foreign_keys_on();
	end_snapshot_cleanup();
}
