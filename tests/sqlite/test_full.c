/*
 * test_full.c - a full disk (issue 38.9): SQLite's SQLITE_FULL, met with
 * PRAGMA max_page_count as a disk with no room left would make it, is said
 * as a full disk by sync_apply and sync_upload, with its own error code,
 * and changes nothing; once there is room the same call goes through.
 * (The agent said "the replica file stays busy" for it: src/agent.)
 */
#include "harness.h"

#include <stdlib.h>

void		test_full(void);

/* call: SELECT f(?1) with a blob (or none): the step's code, its error message in msg */
static int
call(sqlite3 *db, const char *sql, tm_msg *m, char *msg, size_t cap)
{
	sqlite3_stmt *st;
	int			rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
	{
		snprintf(msg, cap, "prepare: %s", sqlite3_errmsg(db));
		return rc;
	}
	if (m != NULL)
		sqlite3_bind_blob(st, 1, m->data, (int) m->len, SQLITE_STATIC);
	rc = sqlite3_step(st);
	snprintf(msg, cap, "%s", rc == SQLITE_ROW ? (const char *) sqlite3_column_text(st, 0) : sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return rc;
}

/* no_room: the file may grow no more than it is now */
static void
no_room(sqlite3 *db)
{
	char		sql[64];

	snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", t_int(db, "PRAGMA page_count"));
	t_exec(db, sql, NULL);
}

static void
full_disk(void)
{
	const char *path = t_path("full.db");
	sqlite3    *db;
	tm_server	s;
	tm_msg		begin,
				end,
				m;
	Sync__Down *d;
	uint64_t	before;
	char		msg[1024];
	char	   *r;
	int			rc;

	remove(path);
	db = t_open(path);
	t_exec(db, "PRAGMA journal_mode = WAL", NULL);
	tm_server_init(&s, 0x20, 0x10);
	tm_shop_snapshot(&s, &begin, &end);
	r = tm_apply(db, begin);
	CHECK(t_has(r, "\"applied\""), "a snapshot: %s %s", S(r), tm_error());
	r = tm_apply(db, end);
	CHECK(t_has(r, "\"end\""), "and its end: %s %s", S(r), tm_error());

	/* a message of many rows, and no room for them */
	d = tm_down();
	for (int i = 10; i < 400; i++)
	{
		char		row[256];
		char		key[16];

		snprintf(key, sizeof key, "%d", i);
		snprintf(row, sizeof row, "{\"id\":%d,\"name\":\"customer %d, whose name takes some room on a page\",\"vip\":0}", i, i);
		tm_upsert(tm_rows(d, "customers"), row, -1, key, NULL);
	}
	m = tm_next(&s, d, NULL);
	no_room(db);
	before = tm_checksum(db, 1);
	rc = call(db, "SELECT sync_apply(?1)", &m, msg, sizeof msg);
	CHECK(rc == SQLITE_FULL, "sync_apply on a full disk: SQLITE_FULL, not %d (%s)", rc, msg);
	CHECK(t_has(msg, "sync_apply: the disk of the replica file is full") && !t_has(msg, "busy"),
		  "and says so: %s", msg);
	CHECK(sqlite3_get_autocommit(db) && tm_checksum(db, 1) == before, "nothing changed, no transaction left open");
	r = t_text(db, "SELECT sync_status() ->> 'applied'");
	CHECK(r && strcmp(r, "2") == 0, "the replica still reads: applied %s", S(r));
	sqlite3_free(r);
	t_exec(db, "PRAGMA max_page_count = 1000000", NULL);
	rc = call(db, "SELECT sync_apply(?1)", &m, msg, sizeof msg);
	CHECK(rc == SQLITE_ROW && t_has(msg, "\"upserts\":390"), "with room, the same message applies: %s", msg);

	/* the replica's own rows to send, and no room to record what the upload carries */
	for (int i = 1; i <= 300; i++)
	{
		char	   *sql = sqlite3_mprintf("INSERT INTO orders(origin, id, customer, note) VALUES ('%s', %d, 1,"
										  " 'an order of the replica''s own, number %d, with a note')",
										  tm_replica_text(&s), i, i);

		t_exec(db, sql, NULL);
		sqlite3_free(sql);
	}
	no_room(db);
	before = tm_checksum(db, 1);
	rc = call(db, "SELECT sync_upload()", NULL, msg, sizeof msg);
	CHECK(rc == SQLITE_FULL, "sync_upload on a full disk: SQLITE_FULL, not %d (%s)", rc, msg);
	CHECK(t_has(msg, "sync_upload: the disk of the replica file is full"), "and says so: %s", msg);
	CHECK(sqlite3_get_autocommit(db) && tm_checksum(db, 1) == before, "nothing changed");
	t_exec(db, "PRAGMA max_page_count = 1000000", NULL);
	CHECK(tm_upload(db).data != NULL, "with room, the upload goes: %s", tm_error());
	sqlite3_close(db);
	remove(path);
	{
		char		other[64];

		snprintf(other, sizeof other, "%s-wal", path);
		remove(other);
		snprintf(other, sizeof other, "%s-shm", path);
		remove(other);
	}
}

void
test_full(void)
{
	full_disk();
}
