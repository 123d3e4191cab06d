/*
 * test_upload.c - writing up (docs/protocol.md 7): notes, sync_upload and
 * the Filed answers, resends, a late answer that must not forget a write it
 * did not carry, deletes of records, the size bound and rows set aside,
 * refusals and digests in the upload, progress.
 */
#include "harness.h"

void		test_upload(void);

extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

/* decode an upload as the server will: NULL when it does not pass */
static Sync__Up *
decode(tm_msg m, const char *what)
{
	ms_wire_status status;
	char		reason[MS_REASON_MAX] = "";
	Sync__Up   *u = m.data ? ms_up_decode(m.data, m.len, 1 << 30, NULL, &status, reason) : NULL;

	CHECK(u != NULL, "%s: the upload decodes and passes the server's checks: %s %s", what, reason, tm_error());
	return u;
}

static Sync__Rows *
rows_of(Sync__Up *u, const char *table)
{
	for (size_t i = 0; u && i < u->n_rows; i++)
		if (strcmp(u->rows[i]->table, table) == 0)
			return u->rows[i];
	return NULL;
}

static Sync__Backlog *
backlog_of(Sync__Up *u, const char *table)
{
	for (size_t i = 0; u && i < u->n_backlog; i++)
		if (strcmp(u->backlog[i]->table, table) == 0)
			return u->backlog[i];
	return NULL;
}

/* the answer of an upload every row of which was filed */
static char *
filed(sqlite3 *db, tm_server *s, Sync__Up *u)
{
	return tm_apply(db, tm_filed_msg(s, tm_filed_all(u)));
}

static void
exec_mine(sqlite3 *db, const tm_server *s, const char *fmt)
{
	char	   *sql = sqlite3_mprintf(fmt, tm_replica_text(s), tm_replica_text(s));
	char	   *err = NULL;

	CHECK(t_exec(db, sql, &err) == SQLITE_OK, "%s: %s", sql, S(err));
	sqlite3_free(err);
	sqlite3_free(sql);
}

static void
unknown_replica(void)
{
	sqlite3    *db = t_open(NULL);
	tm_msg		m = tm_upload(db);
	Sync__Up   *u;
	char	   *r;

	CHECK(m.data == NULL && tm_error()[0] == '\0', "nothing to say before the uuid is known: NULL (%s)", tm_error());
	r = t_text(db, "SELECT sync_init('7C9E6679-7425-40DE-944B-E07FC1F90AE7')");
	CHECK(r && strcmp(r, "7c9e6679-7425-40de-944b-e07fc1f90ae7") == 0, "sync_init sets it: %s", S(r));
	sqlite3_free(r);
	r = t_text(db, "SELECT sync_init('7c9e6679-7425-40de-944b-e07fc1f90ae7')");
	CHECK(r != NULL, "the same again is fine");
	sqlite3_free(r);
	CHECK(t_exec(db, "SELECT sync_init('0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1')", NULL) == SQLITE_ERROR,
		  "another is refused");
	m = tm_upload(db);
	u = decode(m, "a replica with no message yet");
	CHECK(u && u->applied && u->applied->number == 0 && u->applied->seal.len == 0 && u->n_rows == 0 &&
		  u->replica.len == 16 && u->replica.data[0] == 0x7c, "says it applied nothing");
	if (u)
		sync__up__free_unpacked(u, NULL);
	m = tm_upload(db);
	CHECK(m.data == NULL && tm_error()[0] == '\0', "then has nothing to say: NULL");
	sqlite3_close(db);
}

static void
cycle(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_msg		m;
	Sync__Up   *u,
			   *u2;
	Sync__Rows *r;
	char	   *res;
	char		want[256];

	m = tm_upload(db);
	u = decode(m, "after the snapshot");
	CHECK(u && u->applied->number == 2 && u->applied->seal.len == 32 && u->applied->nonce.len == 16 &&
		  memcmp(u->applied->epoch.data, s.epoch, 16) == 0 && memcmp(u->applied->nonce.data, s.nonce, 16) == 0,
		  "the last applied, with its nonce, seal and epoch");
	CHECK(u && u->n_digests == 4 && u->n_backlog == 4 && u->n_rows == 0, "digests after a snapshot, every table's backlog");
	CHECK(u && u->gap == 0 && u->gap_epoch.len == 0 && u->protocol == 1, "no gap");
	if (u)
		sync__up__free_unpacked(u, NULL);
	m = tm_upload(db);
	CHECK(m.data == NULL, "nothing more to say: NULL (%s)", tm_error());

	/* the replica writes: a record in json, one in proto, an owned column */
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 12.5, 'first \"order\"')");
	exec_mine(db, &s, "INSERT INTO sales VALUES ('%s', 1, 2, 3, 9.75, 'memo', X'beef')");
	t_exec(db, "UPDATE products SET stock = 4 WHERE id = 2", NULL);
	t_exec(db, "UPDATE orders SET total = 13.5 WHERE id = 1", NULL);
	res = t_text(db, "SELECT sync_progress()");
	CHECK(t_has(res, "\"orders\":{\"unsent\":1,\"unfiled\":0,\"set_aside\":0,\"refused\":0,\"waiting\":0,\"dropped\":0}"),
		  "progress: %s", S(res));
	sqlite3_free(res);
	m = tm_upload(db);
	u = decode(m, "with rows");
	r = rows_of(u, "orders");
	snprintf(want, sizeof want, "{\"origin\":\"%s\",\"id\":1,\"customer\":1,\"total\":13.5,\"note\":\"first \\\"order\\\"\"}",
			 tm_replica_text(&s));
	CHECK(r && r->n_upserts == 1 && r->upserts[0].len == strlen(want) && memcmp(r->upserts[0].data, want, strlen(want)) == 0,
		  "a record written twice goes once, as it is now: %.*s", r ? (int) r->upserts[0].len : 0, r ? (char *) r->upserts[0].data : "");
	CHECK(r && r->keys[0]->n_parts == 2 && strcmp(r->keys[0]->parts[0], tm_replica_text(&s)) == 0 &&
		  strcmp(r->keys[0]->parts[1], "1") == 0, "with its key");
	r = rows_of(u, "sales");
	{
		tm_buf		b;

		memset(&b, 0, sizeof b);
		tm_pb_bytes(&b, 1, tm_replica_text(&s), 36);
		tm_pb_int(&b, 2, 1);
		tm_pb_int(&b, 3, 2);
		tm_pb_int(&b, 4, 3);
		tm_pb_double(&b, 5, 9.75);
		tm_pb_bytes(&b, 6, "memo", 4);
		tm_pb_bytes(&b, 7, "\xbe\xef", 2);
		CHECK(r && r->n_upserts == 1 && r->upserts[0].len == b.len && memcmp(r->upserts[0].data, b.data, b.len) == 0,
			  "a proto record, every field");
	}
	r = rows_of(u, "products");
	CHECK(r && r->n_upserts == 1 && r->upserts[0].len == strlen("{\"id\":2,\"stock\":4}") &&
		  memcmp(r->upserts[0].data, "{\"id\":2,\"stock\":4}", r->upserts[0].len) == 0,
		  "a catalog row as its key and owned columns");
	CHECK(u && u->n_rows == 3 && u->rows[0] == rows_of(u, "products"), "parents' tables first");
	CHECK(u && u->n_digests == 0, "no digests until the next hour");
	CHECK(u && backlog_of(u, "orders") && backlog_of(u, "orders")->unfiled == 1 && backlog_of(u, "orders")->unsent == 0,
		  "the backlog as it is once sent");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE send_id IS NOT NULL") == 3, "the notes are stamped");

	/* written again since: goes again; the late answer of the first send forgets only what it carried */
	t_exec(db, "UPDATE orders SET total = 14 WHERE id = 1", NULL);
	m = tm_upload(db);
	u2 = decode(m, "the row written since");
	CHECK(u2 && u2->n_rows == 1 && rows_of(u2, "orders") && memcmp(u2->send_id.data, u->send_id.data, 16) != 0,
		  "goes again, alone, under a new send id");
	res = filed(db, &s, u);
	CHECK(t_has(res, "\"result\":\"filed\"") && t_has(res, "\"notes\":2"), "the first answer lets go of two notes: %s %s", S(res), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes") == 1 && t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'orders'") == 1,
		  "the order's note stays: the late answer never forgets a write it did not carry");
	res = filed(db, &s, u2);
	CHECK(t_has(res, "\"notes\":1") && t_int(db, "SELECT count(*) FROM _sync_notes") == 0, "its own answer does: %s", S(res));
	res = filed(db, &s, u2);
	CHECK(t_has(res, "\"notes\":0"), "an answer twice is harmless: %s", S(res));
	sync__up__free_unpacked(u2, NULL);
	/* the backlog changed: one more report, then nothing */
	m = tm_upload(db);
	u2 = decode(m, "the backlog emptied");
	CHECK(u2 && u2->n_rows == 0 && backlog_of(u2, "orders")->unfiled == 0, "reports the empty backlog");
	filed(db, &s, u2);
	sync__up__free_unpacked(u2, NULL);
	m = tm_upload(db);
	CHECK(m.data == NULL, "then nothing to say");
	sync__up__free_unpacked(u, NULL);
	sqlite3_close(db);
}

static void
resend(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_msg		m;
	Sync__Up   *u1,
			   *u2;
	char	   *res;

	tm_upload(db);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 1, NULL)");
	u1 = decode(tm_upload(db), "first send");
	m = tm_upload(db);
	CHECK(m.data == NULL, "a note sent waits for its answer");
	t_exec(db, "SELECT sync_config('resend_after', 0)", NULL);
	u2 = decode(tm_upload(db), "resend");
	CHECK(u2 && u2->n_rows == 1 && memcmp(u2->send_id.data, u1->send_id.data, 16) != 0,
		  "unanswered, it goes again under a new send id");
	res = filed(db, &s, u1);
	CHECK(t_has(res, "\"notes\":0") && t_int(db, "SELECT count(*) FROM _sync_notes") == 1,
		  "a note sent again waits for the answer to that send: %s", S(res));
	res = filed(db, &s, u2);
	CHECK(t_has(res, "\"notes\":1") && t_int(db, "SELECT count(*) FROM _sync_notes") == 0, "which lets it go: %s", S(res));
	sync__up__free_unpacked(u1, NULL);
	sync__up__free_unpacked(u2, NULL);
	/* an answer for another replica names nothing of this one */
	{
		tm_server	other = s;
		uint8_t		id[16] = {0};

		other.replica[0] ^= 0xff;
		res = tm_apply(db, tm_filed_msg(&other, tm_filed(id, 0)));
		CHECK(t_has(res, "\"wrong_replica\""), "another replica's answer: %s", S(res));
	}
	sqlite3_close(db);
}

static void
deletes_and_gone_rows(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	Sync__Rows *r;
	Sync__Down *d;

	tm_upload(db);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 1, NULL)");
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 2, 1, 1, NULL)");
	exec_mine(db, &s, "DELETE FROM orders WHERE id = 2");
	t_exec(db, "UPDATE products SET stock = 1 WHERE id = 3", NULL);
	/* the server takes product 3 back before the edit went up */
	d = tm_down();
	tm_delete(tm_rows(d, "products"), "3", NULL);
	tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'products'") == 0,
		  "the server's delete wins over the edit of an owned column");
	u = decode(tm_upload(db), "a delete");
	r = rows_of(u, "orders");
	CHECK(r && r->n_upserts == 1 && r->n_deletes == 1 && strcmp(r->deletes[0]->parts[1], "2") == 0,
		  "a record that is gone goes as its key");
	CHECK(rows_of(u, "products") == NULL, "nothing of the product");
	if (u)
	{
		filed(db, &s, u);
		sync__up__free_unpacked(u, NULL);
	}
	/* an order whose key changes: the new key goes, the old as a delete */
	t_exec(db, "UPDATE orders SET id = 3 WHERE id = 1", NULL);
	u = decode(tm_upload(db), "a key changed");
	r = rows_of(u, "orders");
	CHECK(r && r->n_upserts == 1 && strcmp(r->keys[0]->parts[1], "3") == 0 && r->n_deletes == 1 &&
		  strcmp(r->deletes[0]->parts[1], "1") == 0, "upsert of the new key, delete of the old");
	if (u)
		sync__up__free_unpacked(u, NULL);
	sqlite3_close(db);
}

static void
size_bound(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_msg		m;
	Sync__Up   *u;
	int			carried = 0;
	int			uploads = 0;
	bool		told = false;
	char	   *res;

	tm_upload(db);
	CHECK(t_int(db, "SELECT sync_config('max_upload_bytes', 2048)") == 2048, "a small bound");
	for (int i = 1; i <= 60; i++)
	{
		char	   *sql = sqlite3_mprintf("INSERT INTO orders VALUES ('%s', %d, 1, %d, 'order number %d, a few words long')",
										  tm_replica_text(&s), i, i, i);

		t_exec(db, sql, NULL);
		sqlite3_free(sql);
	}
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1000, 1, 0, printf('%%.3000c', 'x'))");
	for (;;)
	{
		m = tm_upload(db);
		if (m.data == NULL)
			break;
		uploads++;
		CHECK(m.len <= 2048, "upload %d is %zu bytes: within the bound", uploads, m.len);
		u = decode(m, "bounded");
		if (u == NULL)
			break;
		if (rows_of(u, "orders"))
			carried += (int) rows_of(u, "orders")->n_upserts;
		/* the backlog says why the row is set aside: its reason, SQLSTATE, rows and key */
		for (size_t i = 0; i < u->n_backlog; i++)
			if (strcmp(u->backlog[i]->table, "orders") == 0 && u->backlog[i]->n_aside == 1 &&
				strncmp(u->backlog[i]->aside[0]->reason, "too large: ", 11) == 0 &&
				strcmp(u->backlog[i]->aside[0]->sqlstate, "54000") == 0 && u->backlog[i]->aside[0]->rows == 1 &&
				u->backlog[i]->aside[0]->since > 0 && u->backlog[i]->aside[0]->key != NULL &&
				u->backlog[i]->aside[0]->key->n_parts == 2 &&
				strcmp(u->backlog[i]->aside[0]->key->parts[1], "1000") == 0)
				told = true;
		filed(db, &s, u);
		sync__up__free_unpacked(u, NULL);
		if (uploads > 20)
			break;
	}
	CHECK(carried == 60 && uploads >= 3 && uploads <= 10, "every row that fits went, over %d uploads (%d rows)", uploads, carried);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside LIKE 'too large%'") == 1,
		  "the row that can never fit is set aside");
	CHECK(told, "an upload told the server why it is set aside");
	res = t_text(db, "SELECT sync_progress()");
	CHECK(t_has(res, "\"orders\":{\"unsent\":0,\"unfiled\":0,\"set_aside\":1,\"refused\":0,\"waiting\":0,\"dropped\":0,"
				"\"set_aside_rows\":[{\"key\":["),
		  "and counted: %s", S(res));
	CHECK(t_has(res, "\"1000\"],\"reason\":\"too large: ") && t_has(res, "\"sqlstate\":\"54000\",\"since\":"),
		  "with its key, reason and SQLSTATE: %s", S(res));
	sqlite3_free(res);
	CHECK(t_int(db, "SELECT sync_retry()") == 1, "sync_retry puts it back");
	tm_upload(db);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside IS NOT NULL") == 1,
		  "where it is set aside again, still too large");
	t_exec(db, "UPDATE orders SET note = 'short now' WHERE id = 1000", NULL);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside IS NOT NULL") == 0, "a write clears it");
	u = decode(tm_upload(db), "the row made small");
	CHECK(u && rows_of(u, "orders") && rows_of(u, "orders")->n_upserts == 1, "and it goes");
	if (u)
		sync__up__free_unpacked(u, NULL);
	CHECK(t_exec(db, "SELECT sync_config('max_upload_bytes', 100)", NULL) == SQLITE_ERROR, "a bound too small is refused");
	sqlite3_close(db);
}

static void
refused_by_the_server(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	Sync__Filed *f;
	char	   *res;

	tm_upload(db);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 1, NULL)");
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 2, 1, 1, NULL)");
	u = decode(tm_upload(db), "two orders");
	f = tm_filed(u->send_id.data, 1);
	tm_filed_table(f, "orders", 1, 1, 0, 0, 0);
	tm_filed_refuse(f, "orders", tm_key(tm_replica_text(&s), "2", NULL), "total must be positive");
	res = tm_apply(db, tm_filed_msg(&s, f));
	CHECK(t_has(res, "\"notes\":1") && t_has(res, "\"set_aside\":1"), "the refused row is set aside: %s %s", S(res), tm_error());
	res = t_text(db, "SELECT set_aside FROM _sync_notes WHERE tbl = 'orders'");
	CHECK(t_has(res, "refused by the server: total must be positive"), "with the server's reason: %s", S(res));
	sqlite3_free(res);
	sync__up__free_unpacked(u, NULL);
	u = decode(tm_upload(db), "backlog");
	CHECK(u && rows_of(u, "orders") == NULL && backlog_of(u, "orders")->set_aside == 1, "not sent again, counted");
	if (u)
		sync__up__free_unpacked(u, NULL);
	sqlite3_close(db);
}

static void
refusals_and_digests(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	Sync__Down *d;

	tm_upload(db);
	d = tm_down();
	tm_upsert(tm_rows(d, "customers"), "{\"id\":9,\"name\":", -1, "9", NULL);
	tm_upsert(tm_rows(d, "nowhere"), "{}", -1, "x", "y", NULL);
	tm_apply(db, tm_next(&s, d, NULL));
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 1, NULL)");
	t_exec(db, "SELECT sync_config('digest_interval', 0)", NULL);
	u = decode(tm_upload(db), "refusals");
	CHECK(u && u->n_refusals == 2, "both refusals go up");
	CHECK(u && strcmp(u->refusals[0]->table, "customers") == 0 && strcmp(u->refusals[0]->key->parts[0], "9") == 0 &&
		  t_has(u->refusals[0]->reason, "not JSON"), "with table, key and reason");
	CHECK(u && u->n_digests == 3, "digests when due, but not of a table with a pending note (orders)");
	for (size_t i = 0; u && i < u->n_digests; i++)
		CHECK(strcmp(u->digests[i]->table, "orders") != 0, "no digest of orders");
	CHECK(u && backlog_of(u, "nowhere") && backlog_of(u, "nowhere")->refused == 1 && backlog_of(u, "customers")->refused == 1,
		  "refusals in the backlog");
	filed(db, &s, u);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_refused WHERE filed = 1") == 2, "filed refusals are not sent again");
	if (u)
		sync__up__free_unpacked(u, NULL);
	u = decode(tm_upload(db), "again");
	CHECK(u && u->n_refusals == 0 && u->n_digests == 4, "no refusals again; digests of every table now");
	if (u)
		sync__up__free_unpacked(u, NULL);
	sqlite3_close(db);
}

static void
writes_without_the_extension(void)
{
	const char *path = t_path("upload.db");
	tm_server	s;
	sqlite3    *db;
	sqlite3    *plain;
	tm_msg		begin,
				end;
	Sync__Up   *u;

	remove(path);
	db = t_open(path);
	tm_server_init(&s, 0x20, 0x10);
	tm_shop_snapshot(&s, &begin, &end);
	tm_apply(db, begin);
	tm_apply(db, end);
	tm_upload(db);
	/* another program writes with no extension loaded: the triggers note all the same */
	sqlite3_cancel_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
	plain = t_open(path);
	CHECK(t_exec(plain, "SELECT sync_key(1)", NULL) == SQLITE_ERROR, "this connection has no extension");
	exec_mine(plain, &s, "INSERT INTO orders VALUES ('%s', 5, 1, 1, NULL)");
	CHECK(t_exec(plain, "INSERT INTO orders(origin, id) VALUES (NULL, 6)", NULL) == SQLITE_CONSTRAINT,
		  "a NULL key is refused");
	sqlite3_close(plain);
	sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
	u = decode(tm_upload(db), "written elsewhere");
	CHECK(u && rows_of(u, "orders") && rows_of(u, "orders")->n_upserts == 1, "the row goes up");
	if (u)
		sync__up__free_unpacked(u, NULL);
	sqlite3_close(db);
	remove(path);
}

/*
 * the build an upload carries (field 14): this library, its protocol, the
 * SQLite under it and the app's build; a new one is news, said at once
 */
static void
build(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_msg		m;
	Sync__Up   *u;
	char		want[128];

	sqlite3_snprintf(sizeof want, want, " protocol %d sqlite %s", MS_PROTOCOL, sqlite3_libversion());
	m = tm_upload(db);
	u = decode(m, "an upload");
	CHECK(u && strncmp(u->build, "magic_sync_sqlite ", 18) == 0 && strlen(u->build) > strlen(want) &&
		  strcmp(u->build + strlen(u->build) - strlen(want), want) == 0, "it says its build: %s", u ? u->build : "");
	if (u)
		sync__up__free_unpacked(u, NULL);
	m = tm_upload(db);
	CHECK(m.data == NULL, "then nothing: the same build is no news");
	CHECK(t_int(db, "SELECT sync_config('app_build', 42)") == 42, "the app's build is set");
	m = tm_upload(db);
	u = decode(m, "an upload after a new app build");
	CHECK(u && t_has(u->build, want) && t_has(u->build, " app 42"),
		  "a new app build is said at once, after the library's: %s", u ? u->build : "");
	CHECK(u && m.len > 34 && memcmp(m.data + m.len - 34, "\x6a\x20", 2) == 0, "its check is still last");
	if (u)
		sync__up__free_unpacked(u, NULL);
	CHECK(t_exec(db, "SELECT sync_config('app_build', -1)", NULL) == SQLITE_ERROR, "an app build is 0 or more");
	sqlite3_close(db);
}

/* ---- what an acknowledgement costs when nothing waits (issue 37) ------------ */

/*
 * An acknowledgement after a message: no table looked for in sqlite_master
 * (a scan of it each), no DELETE of rows waiting when none waits (it
 * gathers them in a temporary table first); one that waits and whose row
 * is gone still goes.
 */
static void
steady(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	/* a table looked for in sqlite_master; a DELETE of rows waiting */
	static const char *const words[] = {"name = '_sync_wishes'", "name = '_sync_dropped'",
	"DELETE FROM _sync_waits", NULL};
	int			n[3];
	tm_msg		m;

	while (tm_upload(db).data != NULL)
		;
	CHECK(t_has(tm_apply(db, tm_next(&s, tm_down(), NULL)), "\"applied\""), "a message: %s", tm_error());
	t_trace(db, words, n);
	m = tm_upload(db);
	t_trace(db, NULL, NULL);
	CHECK(m.data != NULL, "acknowledges it (%s)", tm_error());
	CHECK(n[0] == 0 && n[1] == 0 && n[2] == 0, "looks for its tables %d, %d times, deletes waits %d times",
		  n[0], n[1], n[2]);
	t_exec(db, "INSERT INTO _sync_waits(tbl, key, writes, reason, retry_at) VALUES ('orders', 'gone', 1, 'x', 0)", NULL);
	CHECK(t_has(tm_apply(db, tm_next(&s, tm_down(), NULL)), "\"applied\""), "another: %s", tm_error());
	t_trace(db, words, n);
	m = tm_upload(db);
	t_trace(db, NULL, NULL);
	CHECK(m.data != NULL && n[2] == 1 && t_int(db, "SELECT count(*) FROM _sync_waits") == 0,
		  "a wait for a row with no note goes (%d)", n[2]);
	sqlite3_close(db);
}

void
test_upload(void)
{
	unknown_replica();
	cycle();
	resend();
	deletes_and_gone_rows();
	size_bound();
	refused_by_the_server();
	refusals_and_digests();
	writes_without_the_extension();
	build();
	steady();
}
