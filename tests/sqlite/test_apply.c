/*
 * test_apply.c - sync_apply and the chain (docs/protocol.md 5.1): a snapshot
 * on an empty file, messages that follow, duplicates and messages from the
 * past, gaps until a snapshot, a new epoch, a later protocol, another
 * replica's message, schema changes, and the caller's transaction.
 */
#include "harness.h"

#include <strings.h>

#include "vectors.h"

void		test_apply(void);

static void
empty_file_snapshot(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	char	   *st;

	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
				" AND name IN ('customers', 'products', 'orders', 'sales')") == 4,
		  "the snapshot created the four tables");
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 2, "two customers");
	CHECK(t_int(db, "SELECT count(*) FROM products") == 3, "three products");
	CHECK(t_int(db, "SELECT vip FROM customers WHERE id = 1") == 1, "true is 1");
	CHECK(t_int(db, "SELECT pk FROM pragma_table_info('orders') WHERE name = 'id'") == 2 &&
		  t_int(db, "SELECT pk FROM pragma_table_info('orders') WHERE name = 'origin'") == 1,
		  "the key (origin, id) is the primary key, in key order");
	CHECK(t_int(db, "SELECT \"notnull\" FROM pragma_table_info('orders') WHERE name = 'origin'") == 1,
		  "key columns are NOT NULL");
	CHECK(t_int(db, "SELECT count(*) FROM pragma_table_info('products') WHERE name = 'retired_at' AND type = 'INTEGER'") == 1,
		  "the retired column is INTEGER");
	CHECK(t_int(db, "SELECT typeof(price) = 'real' FROM products WHERE id = 3") == 1,
		  "a whole number in a REAL column is REAL");
	st = t_text(db, "SELECT sync_status()");
	CHECK(t_has(st, tm_replica_text(&s)), "the replica learnt its uuid from the snapshot: %s", S(st));
	CHECK(t_has(st, "\"applied\":2") && t_has(st, "\"snapshot\":null") && t_has(st, "\"gap\":0"),
		  "status after the snapshot: %s", S(st));
	CHECK(t_has(st, "\"epoch\":\"202122232425262728292a2b2c2d2e2f\""), "the epoch: %s", S(st));
	sqlite3_free(st);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_tables") == 4, "the schema is stored");
	sqlite3_close(db);
}

static tm_msg
one_product(tm_server *s, const char *id, const char *name)
{
	Sync__Down *d = tm_down();
	char		row[128];

	snprintf(row, sizeof row, "{\"id\":%s,\"name\":\"%s\",\"price\":1}", id, name);
	tm_upsert(tm_rows(d, "products"), row, -1, id, NULL);
	return tm_next(s, d, NULL);
}

static void
chain_duplicates_and_past(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_msg		m3 = one_product(&s, "4", "jam");
	tm_msg		m4 = one_product(&s, "4", "marmalade");
	char	   *r;
	uint64_t	sum;

	r = tm_apply(db, m3);
	CHECK(t_has(r, "\"result\":\"applied\",\"number\":3") && t_has(r, "\"upserts\":1"),
		  "a message that follows is applied: %s %s", S(r), tm_error());
	r = tm_apply(db, m4);
	CHECK(t_has(r, "\"applied\""), "and the next: %s", S(r));
	sum = tm_checksum(db, 1);
	r = tm_apply(db, m4);
	CHECK(t_has(r, "\"result\":\"duplicate\",\"number\":4,\"last\":4"), "the same again is a duplicate: %s", S(r));
	r = tm_apply(db, m3);
	CHECK(t_has(r, "\"result\":\"duplicate\",\"number\":3"), "a message from the past is a duplicate: %s", S(r));
	CHECK(tm_checksum(db, 1) == sum, "duplicates change nothing, not even the state");
	CHECK(t_int(db, "SELECT name = 'marmalade' FROM products WHERE id = 4") == 1, "the newest stays");
	sqlite3_close(db);
}

static void
gap_then_snapshot(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_msg		lost = one_product(&s, "5", "lost");
	tm_msg		after = one_product(&s, "6", "after");
	tm_msg		later = one_product(&s, "7", "later");
	tm_msg		begin,
				end;
	char	   *r;
	uint64_t	sum = tm_checksum(db, 0);
	tm_msg		up;
	Sync__Up   *u;
	ms_wire_status status;
	char		reason[MS_REASON_MAX];

	(void) lost;
	r = tm_apply(db, after);
	CHECK(t_has(r, "\"result\":\"gap\",\"number\":4,\"gap\":4"), "a message after one lost opens a gap: %s", S(r));
	r = tm_apply(db, later);
	CHECK(t_has(r, "\"result\":\"gap\",\"number\":5,\"gap\":5"), "nothing applies while the gap is open: %s", S(r));
	r = tm_apply(db, after);
	CHECK(t_has(r, "\"duplicate\"") == false && t_has(r, "\"gap\":5"), "the gap keeps the newest: %s", S(r));
	CHECK(tm_checksum(db, 0) == sum, "no row changed during the gap");
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"gap\":5") && t_has(r, "\"applied\":2"), "status shows the gap: %s", S(r));
	sqlite3_free(r);
	up = tm_upload(db);
	u = ms_up_decode(up.data, up.len, 1 << 20, NULL, &status, reason);
	CHECK(u && u->gap == 5 && u->gap_epoch.len == 16 && u->applied && u->applied->number == 2,
		  "the upload reports the gap and the last applied: %s", reason);
	if (u)
		sync__up__free_unpacked(u, NULL);
	/* the server provisions again */
	tm_shop_snapshot(&s, &begin, &end);
	r = tm_apply(db, begin);
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"snapshot\":\"begin\""), "a snapshot begins despite the gap: %s", S(r));
	r = tm_apply(db, end);
	CHECK(t_has(r, "\"applied\""), "and ends: %s", S(r));
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"gap\":0") && t_has(r, "\"applied\":7"), "the gap is closed: %s", S(r));
	sqlite3_free(r);
	r = tm_apply(db, one_product(&s, "8", "fine"));
	CHECK(t_has(r, "\"applied\""), "the chain goes on: %s", S(r));
	sqlite3_close(db);
}

static void
new_epoch(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_msg		begin,
				end;
	char	   *r;
	uint64_t	sum = tm_checksum(db, 0);

	/* the server restored from a copy, with a new epoch: numbers start over */
	tm_server_init(&s, 0x70, 0x10);
	r = tm_apply(db, one_product(&s, "9", "new epoch"));
	CHECK(t_has(r, "\"result\":\"gap\"") && t_has(r, "another epoch"),
		  "a new epoch without a snapshot is a gap: %s", S(r));
	CHECK(tm_checksum(db, 0) == sum, "and changes no row");
	s.number = 0;
	tm_shop_snapshot(&s, &begin, &end);
	r = tm_apply(db, begin);
	CHECK(t_has(r, "\"applied\",\"number\":1"), "a new epoch begins with a snapshot, whatever its number: %s", S(r));
	r = tm_apply(db, end);
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"epoch\":\"707172737475767778797a7b7c7d7e7f\"") && t_has(r, "\"gap\":0"),
		  "the new epoch is the replica's: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 9") == 0, "the gap's message was not applied");
	sqlite3_close(db);
}

static void
later_protocol_and_wrong_replica(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d = tm_down();
	uint8_t		nonce[16] = {9};
	tm_msg		m;
	char	   *r;
	uint64_t	sum = tm_checksum(db, 1);
	tm_server	other;

	tm_upsert(tm_rows(d, "products"), "{\"id\":50,\"name\":\"x\"}", -1, "50", NULL);
	m = tm_message(&s, MS_PROTOCOL + 1, s.number + 1, nonce, s.number, s.nonce, d, NULL, NULL);
	r = tm_apply(db, m);
	CHECK(t_has(r, "\"result\":\"later_protocol\",\"protocol\":2"), "a later protocol: %s %s", S(r), tm_error());
	CHECK(tm_checksum(db, 1) == sum, "is neither applied nor acknowledged");
	other = s;
	other.replica[15] ^= 1;
	m = tm_next(&other, d, NULL);
	r = tm_apply(db, m);
	CHECK(t_has(r, "\"result\":\"wrong_replica\""), "another replica's message is refused: %s", S(r));
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 50") == 0, "nothing of it applied");
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "not this one"), "last_error says so: %s", S(r));
	sqlite3_free(r);
	r = tm_apply(db, one_product(&s, "51", "mine"));
	CHECK(t_has(r, "\"applied\""), "the chain goes on with this replica's own: %s", S(r));
	sqlite3_close(db);
}

static void
no_snapshot_yet(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	char	   *r;

	tm_server_init(&s, 0x20, 0x10);
	r = tm_apply(db, one_product(&s, "1", "early"));
	CHECK(t_has(r, "\"result\":\"gap\"") && t_has(r, "no snapshot yet"), "a message before any snapshot is a gap: %s", S(r));
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"replica\":null"), "the replica is not learnt from it: %s", S(r));
	sqlite3_free(r);
	sqlite3_close(db);
}

static void
schema_changes(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Table *schema[4];
	Sync__Down *d;
	char	   *r;

	t_exec(db, "UPDATE products SET stock = 99 WHERE id = 1", NULL);
	/* a new snapshot: customers gain a column, products lose their retired column's index */
	tm_shop(schema);
	schema[0] = tm_table("customers", "catalog", "json", "id", "id INTEGER, name TEXT, vip INTEGER, city TEXT");
	d = tm_begin(schema, 4);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":1,\"city\":\"Oslo\"}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\",\"price\":2.5,\"stock\":10}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\""), "a snapshot with a new column: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM pragma_table_info('customers') WHERE name = 'city'") == 1,
		  "the column was added");
	CHECK(t_int(db, "SELECT city = 'Oslo' FROM customers WHERE id = 1") == 1, "and filled");
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 2, "rows not yet named stay until the end");
	CHECK(t_int(db, "SELECT stock FROM products WHERE id = 1") == 99, "an owned column is never overwritten");
	/* ... but by a replacement: the server dropped an edit and made the row again */
	d = tm_down();
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\",\"price\":2.5,\"stock\":10}", -1, "1", NULL);
	tm_replace(tm_rows(d, "products"), "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\""), "a replacement applies: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT stock FROM products WHERE id = 1") == 10, "a replacement overwrites the owned column");
	r = tm_apply(db, tm_next(&s, NULL, tm_end("customers", "products", "orders", "sales", NULL)));
	CHECK(t_has(r, "\"deletes\":3"), "the end lets go of customer 2 and products 2, 3: %s", S(r));
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 1 && t_int(db, "SELECT count(*) FROM products") == 1,
		  "only the named rows remain");

	/* a key that changes: the table is rebuilt with its rows */
	tm_shop(schema);
	schema[0] = tm_table("customers", "catalog", "json", "name", "id INTEGER, name TEXT, vip INTEGER, city TEXT");
	d = tm_begin(schema, 4);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":1,\"city\":\"Rome\"}", -1, "Ada", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"upserts\":1"), "a snapshot with another key: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT pk FROM pragma_table_info('customers') WHERE name = 'name'") == 1 &&
		  t_int(db, "SELECT pk FROM pragma_table_info('customers') WHERE name = 'id'") == 0,
		  "the primary key is the new key");
	CHECK(t_int(db, "SELECT city = 'Rome' FROM customers WHERE name = 'Ada'") == 1, "the row is there");

	/* a table the schema drops stops being mirrored; one it cannot hold is refused */
	schema[0] = tm_table("_sync_state", "catalog", "json", "id", "id INTEGER");
	d = tm_begin(schema, 4);
	tm_upsert(tm_rows(d, "_sync_state"), "{\"id\":1}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"refused\":1"), "a reserved name is not held, its row refused: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_tables WHERE name = 'customers'") == 0,
		  "customers are no longer mirrored");
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 1, "but keep their rows, as a local table");
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "reserved"), "last_error says why: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT id FROM _sync_state") == 1, "the extension's own state is untouched");
	sqlite3_close(db);
}

static void
view_in_the_way(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[4];
	Sync__Down *d;
	char	   *r;

	t_exec(db, "CREATE VIEW customers AS SELECT 1 AS id", NULL);
	tm_server_init(&s, 0x20, 0x10);
	tm_shop(schema);
	d = tm_begin(schema, 4);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\"}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\"}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"upserts\":1") && t_has(r, "\"refused\":1"),
		  "a view in the way: that table is not held, the rest is: %s %s", S(r), tm_error());
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "the host's own view \\\"customers\\\""), "last_error names it: %s", S(r));
	sqlite3_free(r);
	sqlite3_close(db);
}

static void
callers_transaction(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	char	   *r;
	tm_msg		m = one_product(&s, "11", "inside");
	sqlite3_stmt *st;

	t_exec(db, "CREATE TABLE mine(x)", NULL);
	CHECK(t_exec(db, "BEGIN; INSERT INTO mine VALUES (1)", NULL) == SQLITE_OK, "the caller's transaction");
	r = tm_apply(db, m);
	CHECK(t_has(r, "\"applied\""), "applies in a savepoint of the caller's transaction: %s %s", S(r), tm_error());
	CHECK(sqlite3_get_autocommit(db) == 0, "the caller's transaction is still open");
	r = tm_apply(db, (tm_msg) {(uint8_t *) "\x08", 1});
	CHECK(r == NULL && t_has(tm_error(), "sync_apply:"), "a broken message is an error: %s", tm_error());
	CHECK(sqlite3_get_autocommit(db) == 0, "the caller's transaction is still open after the error");
	CHECK(t_int(db, "SELECT count(*) FROM mine") == 1, "and its work intact");
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 11") == 1, "and the message applied before it");
	CHECK(t_exec(db, "ROLLBACK", NULL) == SQLITE_OK, "the caller rolls back its own");
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 11") == 0, "and ours with it");
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"applied\":2"), "the last applied is as before: %s", S(r));
	sqlite3_free(r);
	/* from a statement that writes: refused with a clear message, nothing changed */
	sqlite3_prepare_v2(db, "INSERT INTO mine SELECT sync_apply(?1)", -1, &st, NULL);
	sqlite3_bind_blob(st, 1, m.data, (int) m.len, SQLITE_STATIC);
	CHECK(sqlite3_step(st) == SQLITE_ERROR && t_has(sqlite3_errmsg(db), "SELECT sync_apply"),
		  "called from an INSERT: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	CHECK(t_int(db, "SELECT count(*) FROM mine") == 0, "nothing inserted");
	r = tm_apply(db, m);
	CHECK(t_has(r, "\"applied\""), "the same message from a SELECT applies: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 11") == 1, "and commits");
	sqlite3_close(db);
}

static void
filed_during_gap(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	uint8_t		id[16] = {1, 2, 3};
	char	   *r;

	r = tm_apply(db, one_product(&s, "4", "jam"));
	s.number++;					/* one lost */
	r = tm_apply(db, one_product(&s, "5", "pie"));
	CHECK(t_has(r, "\"gap\""), "a gap: %s", S(r));
	r = tm_apply(db, tm_filed_msg(&s, tm_filed(id, 0)));
	CHECK(t_has(r, "\"result\":\"filed\",\"send_id\":\"01020300000000000000000000000000\""),
		  "a Filed answer applies during a gap: %s %s", S(r), tm_error());
	sqlite3_close(db);
}

static void
file_database_restart(void)
{
	const char *path = t_path("apply.db");
	sqlite3    *db;
	tm_server	s;
	tm_msg		begin,
				end;
	char	   *r;

	remove(path);
	db = t_open(path);
	tm_server_init(&s, 0x20, 0x10);
	/* a snapshot of tables that hold rows names them one by one (an empty one is named whole) */
	tm_shop_snapshot(&s, &begin, &end);
	r = tm_apply(db, begin);
	r = tm_apply(db, end);
	CHECK(t_has(r, "\"snapshot\":\"end\""), "a first snapshot: %s %s", S(r), tm_error());
	tm_shop_snapshot(&s, &begin, &end);
	r = tm_apply(db, begin);
	CHECK(t_has(r, "\"applied\""), "begin on a file: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_named WHERE tbl = 'customers' AND key <> ''") == 2,
		  "its customers are named one by one");
	sqlite3_close(db);
	/* the process restarts between the messages of a snapshot */
	db = t_open(path);
	/* a row behind the engine's back (the guard stepped around as sync_apply does) */
	t_exec(db, "UPDATE _sync_state SET applying = 1; INSERT INTO customers(id, name) VALUES (77, 'stale');"
		   " UPDATE _sync_state SET applying = 0", NULL);
	r = tm_apply(db, end);
	CHECK(t_has(r, "\"snapshot\":\"end\"") && t_has(r, "\"deletes\":1"),
		  "the snapshot's named keys survived the restart: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 2, "only the named customers remain");
	r = tm_apply(db, one_product(&s, "4", "jam"));
	CHECK(t_has(r, "\"applied\""), "the chain survived too: %s", S(r));
	sqlite3_close(db);
	remove(path);
}

static void
host_breaks_tables(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d;
	char	   *r;
	char	   *sql;
	tm_msg		begin,
				end;

	sql = sqlite3_mprintf("INSERT INTO orders VALUES ('%s', 1, 1, 1, NULL)", tm_replica_text(&s));
	t_exec(db, sql, NULL);
	sqlite3_free(sql);
	t_exec(db, "DROP TABLE customers", NULL);
	/* a parent dropped: the foreign-key check of orders reads it, and SQLite refuses the host's DDL (reach.c) ... */
	CHECK(t_exec(db, "ALTER TABLE orders DROP COLUMN note", NULL) != SQLITE_OK, "until a message");
	d = tm_down();
	tm_upsert(tm_rows(d, "customers"), "{\"id\":5,\"name\":\"Eve\"}", -1, "5", NULL);
	tm_delete(tm_rows(d, "customers"), "1", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":5,\"name\":\"pie\"}", -1, "5", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"upserts\":1") && t_has(r, "\"refused\":1"),
		  "a table the host dropped: its rows refused, the rest applied: %s %s", S(r), tm_error());
	r = t_text(db, "SELECT sync_status() ->> 'last_error'");
	CHECK(t_has(r, "not as the snapshot made it"), "last_error says so: %s", S(r));
	sqlite3_free(r);
	/* ... which makes it again without it */
	CHECK(t_exec(db, "ALTER TABLE orders DROP COLUMN note", NULL) == SQLITE_OK, "then the host's DDL runs");
	CHECK(tm_upload(db).data != NULL, "the upload still works: %s", tm_error());
	r = t_text(db, "SELECT set_aside FROM _sync_notes WHERE tbl = 'orders'");
	CHECK(t_has(r, "cannot be read"), "the order, whose column is gone, is set aside: %s", S(r));
	sqlite3_free(r);
	tm_shop_snapshot(&s, &begin, &end);
	r = tm_apply(db, begin);
	CHECK(t_has(r, "\"applied\""), "a snapshot: %s %s", S(r), tm_error());
	r = tm_apply(db, end);
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 2 &&
		  t_int(db, "SELECT count(*) FROM pragma_table_info('orders') WHERE name = 'note'") == 1,
		  "makes them again");
	sqlite3_close(db);
}

/* the sample ToReplica of docs/protocol.md, applied after message 41 */
static void
protocol_sample(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[1];
	Sync__Down *d;
	uint8_t		bytes[512];
	long		head,
				body;
	char	   *r;

	tm_server_init(&s, 0x20, 0x10);
	memcpy(s.replica, ms_vector_replica, 16);
	memcpy(s.epoch, ms_vector_epoch, 16);
	schema[0] = tm_table("products", "catalog", "json", "id", "id INTEGER, name TEXT");
	d = tm_begin(schema, 1);
	tm_upsert(tm_rows(d, "products"), "{\"id\":8,\"name\":\"old\"}", -1, "8", NULL);
	r = tm_apply(db, tm_message(&s, MS_PROTOCOL, 41, ms_vector_previous_nonce, 0, NULL, d, NULL, NULL));
	CHECK(t_has(r, "\"applied\""), "message 41 begins a snapshot: %s %s", S(r), tm_error());
	head = ms_hex_decode(ms_vector_head_hex, bytes, sizeof bytes);
	body = ms_hex_decode(ms_vector_body_hex, bytes + head, sizeof bytes - (size_t) head);
	r = tm_apply(db, (tm_msg) {bytes, (size_t) (head + body)});
	CHECK(t_has(r, "\"result\":\"applied\",\"number\":42") && t_has(r, "\"upserts\":1") && t_has(r, "\"deletes\":1"),
		  "the sample message follows it: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE id = 7 AND name = 'tea'") == 1 &&
		  t_int(db, "SELECT count(*) FROM products WHERE id = 8") == 0, "tea is 7, 8 is gone");
	r = t_text(db, "SELECT hex(seal) FROM _sync_state");
	CHECK(r && strcasecmp(r, ms_vector_seal_hex) == 0, "its seal is kept to give back: %s", S(r));
	sqlite3_free(r);
	sqlite3_close(db);
}

/* names that need quoting, everywhere: tables, columns, triggers, indexes, uploads */
static void
awkward_names(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[2];
	Sync__Down *d;
	char	   *r;
	tm_msg		m;

	tm_server_init(&s, 0x20, 0x10);
	schema[0] = tm_table("inv.Parent 'p'", "catalog", "json", "k\"ey", "k\"ey TEXT, v'al TEXT owned");
	schema[1] = tm_table("inv.child \"c\"", "record", "proto", "or_igin,id", "or_igin TEXT, id INTEGER, par_ent TEXT");
	/* names with spaces (the builder splits on them) */
	schema[1]->columns[0]->name = schema[1]->key[0] = "or igin";
	schema[1]->columns[2]->name = "par ent";
	tm_origin(schema[1], "or igin");
	tm_fk(schema[1], "par_ent", "inv.Parent 'p'", "k\"ey");
	schema[1]->foreign_keys[0]->columns[0] = "par ent";
	d = tm_begin(schema, 2);
	tm_upsert(tm_rows(d, "inv.Parent 'p'"), "{\"k\\\"ey\":\"a'b\\\"c\",\"v'al\":\"x\"}", -1, "a'b\"c", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1"), "awkward names: %s %s", S(r), tm_error());
	r = tm_apply(db, tm_next(&s, NULL, tm_end("inv.Parent 'p'", "inv.child \"c\"", NULL)));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "end: %s %s", S(r), tm_error());
	r = sqlite3_mprintf("INSERT INTO \"inv.child \"\"c\"\"\" VALUES ('%s', 1, 'a''b\"c');"
						" UPDATE \"inv.Parent 'p'\" SET \"v'al\" = 'y'", tm_replica_text(&s));
	CHECK(t_exec(db, r, NULL) == SQLITE_OK, "the host writes both");
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes") == 2, "both noted");
	m = tm_upload(db);
	CHECK(m.data != NULL, "and uploaded: %s", tm_error());
	d = tm_down();
	tm_delete(tm_rows(d, "inv.Parent 'p'"), "a'b\"c", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"retired\":1"), "the parent is retired, the replica's child points at it: %s %s", S(r), tm_error());
	r = t_text(db, "SELECT sync_digest()");
	CHECK(t_has(r, "\"inv.Parent 'p'\":{\"count\":0") && t_has(r, "\"inv.child \\\"c\\\"\":{\"count\":1"),
		  "digests name them: %s", S(r));
	sqlite3_free(r);
	sqlite3_close(db);
}

/* key comparisons of the replace check, counted by src/sqlite/apply.c */
extern unsigned long ms_replace_compares;

/*
 * replace_compares: key comparisons sync_apply makes checking a message of n
 * customers, each replacing the replica's copy whole, against its replace
 * list (listed in the reverse order of the upserts).
 */
static unsigned long
replace_compares(int n)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d = tm_down();
	Sync__Rows *rows = tm_rows(d, "customers");
	unsigned long before;
	char	   *r;

	for (int i = 0; i < n; i++)
	{
		char		row[64];
		char		id[16];

		snprintf(id, sizeof id, "%d", 100 + i);
		snprintf(row, sizeof row, "{\"id\":%s,\"name\":\"c\"}", id);
		tm_upsert(rows, row, -1, id, NULL);
	}
	for (int i = n - 1; i >= 0; i--)
	{
		char		id[16];

		snprintf(id, sizeof id, "%d", 100 + i);
		tm_replace(rows, id, NULL);
	}
	before = ms_replace_compares;
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\""), "%d replacements apply: %s %s", n, S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 2 + n, "all %d are there", n);
	sqlite3_close(db);
	return ms_replace_compares - before;
}

/*
 * Issue 13.6: the check of upserts against a message's replace list was
 * quadratic (16k rows: 8.5 s against 0.04 s).  Four times the rows cost
 * about four times the comparisons (n log n), not sixteen.
 */
static void
replaces_scale(void)
{
	unsigned long small = replace_compares(1000);
	unsigned long large = replace_compares(4000);

	CHECK(small > 0 && large <= 6 * small,
		  "comparisons grow as n log n: %lu for 1000 rows, %lu for 4000", small, large);
	/* sorting the list once, then a search per upsert: each about n log2 n */
	CHECK(large <= 2 * 4000UL * 14, "at most 2 n (log2 n + 2): %lu for 4000 rows", large);
}

/*
 * A catalog table empty when a snapshot begins is named whole: its guards let
 * no one but sync_apply add its rows, so it holds only what the snapshot
 * sends, and no key of it is written down nor looked for at the end.  A
 * record takes rows of the replica's own: its rows are named one by one,
 * and a row of its own not sent stays.
 */
static void
fresh_tables_named_whole(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[4];
	Sync__Down *d;
	char	   *r;

	tm_server_init(&s, 0x20, 0x10);
	tm_shop(schema);
	d = tm_begin(schema, 4);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":true}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "orders"), "{\"origin\":\"aaaaaaaa-0000-0000-0000-000000000001\",\"id\":1,"
			  "\"customer\":1,\"total\":3}", -1, "aaaaaaaa-0000-0000-0000-000000000001", "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"upserts\":2"), "a first snapshot begins: %s %s", S(r), tm_error());
	CHECK(t_has(r, "\"begin_rows\":"), "its first message says how many rows it carries: %s", S(r));
	CHECK(t_int(db, "SELECT count(*) FROM _sync_named WHERE tbl IN ('customers', 'products')") == 2 &&
		  t_int(db, "SELECT count(*) FROM _sync_named WHERE tbl IN ('customers', 'products') AND key = ''") == 2,
		  "its catalog tables are named whole, no key of theirs written");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_named WHERE tbl = 'orders' AND key <> ''") == 1 &&
		  t_int(db, "SELECT count(*) FROM _sync_named WHERE tbl = 'orders' AND key = ''") == 0,
		  "a record's rows are named one by one");
	/* a row of the replica's own, written while the snapshot is open */
	{
		char		sql[256];

		snprintf(sql, sizeof sql, "INSERT INTO orders(origin, id, customer, total) VALUES ('%s', 7, 1, 1)",
				 tm_replica_text(&s));
		t_exec(db, sql, NULL);
	}
	d = tm_down();
	tm_upsert(tm_rows(d, "customers"), "{\"id\":2,\"name\":\"Bob\",\"vip\":false}", -1, "2", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\",\"price\":2.5,\"stock\":10}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":2"), "the next message of the snapshot: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_named WHERE tbl IN ('customers', 'products')") == 2,
		  "still no key of a table named whole");
	r = tm_apply(db, tm_next(&s, NULL, tm_end("customers", "products", "orders", "sales", NULL)));
	CHECK(t_has(r, "\"snapshot\":\"end\"") && t_has(r, "\"deletes\":0"),
		  "the end lets go of nothing: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 2 && t_int(db, "SELECT count(*) FROM products") == 1 &&
		  t_int(db, "SELECT count(*) FROM orders") == 2, "every row sent is there, and the replica's own order");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_named") == 0, "nothing named after the end");

	/* the next snapshot finds the tables holding rows: each row is named, one not sent let go of */
	tm_shop(schema);
	d = tm_begin(schema, 4);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":true}", -1, "1", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_int(db, "SELECT count(*) FROM _sync_named WHERE tbl = 'customers' AND key = ''") == 0 &&
		  t_int(db, "SELECT count(*) FROM _sync_named WHERE tbl = 'products' AND key = ''") == 0,
		  "tables holding rows are not named whole: %s %s", S(r), tm_error());
	r = tm_apply(db, tm_next(&s, NULL, tm_end("customers", "products", "orders", "sales", NULL)));
	CHECK(t_int(db, "SELECT count(*) FROM customers") == 1 && t_int(db, "SELECT count(*) FROM products") == 0,
		  "the rows it did not name are let go of: %s %s", S(r), tm_error());
	sqlite3_close(db);
}

void
test_apply(void)
{
	empty_file_snapshot();
	chain_duplicates_and_past();
	gap_then_snapshot();
	new_epoch();
	later_protocol_and_wrong_replica();
	no_snapshot_yet();
	schema_changes();
	view_in_the_way();
	callers_transaction();
	filed_during_gap();
	file_database_restart();
	fresh_tables_named_whole();
	host_breaks_tables();
	protocol_sample();
	awkward_names();
	replaces_scale();
}
