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

void
test_kept(void)
{
	same_outcome();
	nested();
}
