/*
 * test_sends.c - nothing lost on the way up (docs/protocol.md 7.1, 2.3):
 * an upload is numbered and whole (its length first, its check last); a
 * Filed answer lets go of a row only when it accounts for it; rows the
 * server keeps in its inbox stay, survive a snapshot's end and go again
 * after their backoff; edits the server drops are let go of and remembered
 * with why; a duplicate answer makes the replica number beyond the last
 * filed; narrowing down (sync_upload(max_rows), sync_upload_refused); a
 * record's key spelled as its types print it; a row refused is told, with
 * its reason and SQLSTATE, in sync_progress() and to the server.
 */
#include "harness.h"

#include <stdlib.h>
#include <time.h>

#include "upcheck.h"

void		test_sends(void);

/* what decode() unpacked, freed at the end of the group */
static Sync__Up *decoded[64];
static int	ndecoded;

static Sync__Up *
decode(tm_msg m, const char *what)
{
	ms_wire_status status;
	char		reason[MS_REASON_MAX] = "";
	Sync__Up   *u = m.data ? ms_up_decode(m.data, m.len, 1 << 30, NULL, &status, reason) : NULL;

	CHECK(u != NULL, "%s: the upload decodes: %s %s", what, reason, tm_error());
	if (u != NULL && ndecoded < (int) (sizeof decoded / sizeof decoded[0]))
		decoded[ndecoded++] = u;
	return u;
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

static size_t
rows_of(const Sync__Up *u, const char *table)
{
	for (size_t i = 0; u && i < u->n_rows; i++)
		if (strcmp(u->rows[i]->table, table) == 0)
			return u->rows[i]->n_upserts + u->rows[i]->n_deletes;
	return 0;
}

static char *
answer(sqlite3 *db, tm_server *s, Sync__Filed *f)
{
	return tm_apply(db, tm_filed_msg(s, f));
}

/* an upload is numbered, its length first and its check last: whole, or refused */
static void
whole(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	tm_msg		m;
	Sync__Up   *u;
	char		reason[MS_REASON_MAX];
	uint64_t	first;
	int			passed = 0;
	time_t		before = time(NULL);

	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 12.5, NULL)");
	m = tm_upload(db);
	CHECK(m.data != NULL && ms_up_verify(m.data, m.len, reason), "the upload is whole: %s", reason);
	CHECK(m.data != NULL && m.data[0] == 0x61, "its length goes first");
	u = decode(m, "numbered");
	first = u ? u->seq : 0;
	CHECK(u && u->length == m.len && u->check.len == 32, "it says its length and carries its check");
	CHECK(first >= (uint64_t) before * 1000000, "numbered from the clock: %llu", (unsigned long long) first);
	for (size_t n = 0; m.data && n < m.len; n++)
		passed += ms_up_verify(m.data, n, reason);
	CHECK(passed == 0, "no prefix of it is whole (%d were)", passed);
	passed = 0;
	for (size_t i = 0; m.data && i < m.len; i++)
		for (int bit = 0; bit < 8; bit++)
		{
			m.data[i] ^= (uint8_t) (1 << bit);
			passed += ms_up_verify(m.data, m.len, reason);
			m.data[i] ^= (uint8_t) (1 << bit);
		}
	CHECK(passed == 0, "no upload with a flipped bit is whole (%d were)", passed);
	t_exec(db, "SELECT sync_config('resend_after', 0)", NULL);
	u = decode(tm_upload(db), "sent again");
	CHECK(u && u->seq > first, "each send is numbered beyond the last: %llu > %llu",
		  (unsigned long long) (u ? u->seq : 0), (unsigned long long) first);
	/* a send number at the server's beyond the clock: the next is one more */
	t_exec(db, "UPDATE _sync_seq SET last = 9000000000000000000", NULL);
	u = decode(tm_upload(db), "beyond the clock");
	CHECK(u && u->seq == UINT64_C(9000000000000000001), "one more than the last: %llu",
		  (unsigned long long) (u ? u->seq : 0));
	sqlite3_close(db);
}

/* a Filed answer lets go of a table's rows only when it accounts for every one of them */
static void
accounting(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	Sync__Filed *f;
	char	   *res;

	tm_upload(db);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 1, NULL)");
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 2, 1, 1, NULL)");
	exec_mine(db, &s, "INSERT INTO sales VALUES ('%s', 1, 1, 1, 1.5, NULL, NULL)");
	u = decode(tm_upload(db), "three rows");
	/* an answer that says nothing of the tables: what a cut upload was answered with */
	res = answer(db, &s, tm_filed(u->send_id.data, 0));
	CHECK(t_has(res, "\"notes\":0") && t_has(res, "\"unaccounted\":3") &&
		  t_int(db, "SELECT count(*) FROM _sync_notes WHERE send_id IS NOT NULL") == 3,
		  "an answer that accounts for no row lets go of none: %s", S(res));
	/* one that accounts for the sale but counts one order too few */
	f = tm_filed(u->send_id.data, 2);
	tm_filed_table(f, "orders", 1, 0, 0, 0, 0);
	tm_filed_table(f, "sales", 1, 0, 0, 0, 0);
	res = answer(db, &s, f);
	CHECK(t_has(res, "\"notes\":1") && t_has(res, "\"unaccounted\":2") &&
		  t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'orders'") == 2 &&
		  t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'sales'") == 0,
		  "the sale is let go of, the orders wait: %s", S(res));
	u = decode(tm_upload(db), "the orders wait for an answer");
	CHECK(u && rows_of(u, "orders") == 0, "stamped still, they wait resend_after");
	sqlite3_close(db);
}

/* rows the server keeps in its inbox stay, survive a snapshot, and go again after a backoff */
static void
kept(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	Sync__Filed *f;
	tm_msg		begin,
				end;
	char	   *res;

	tm_upload(db);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 2, 1, NULL)");
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 2, 1, 1, NULL)");
	u = decode(tm_upload(db), "two orders");
	f = tm_filed(u->send_id.data, 1);
	tm_filed_table(f, "orders", 1, 0, 0, 0, 1);
	tm_filed_keep(f, "orders", tm_key(tm_replica_text(&s), "1", NULL), "violates check constraint");
	res = answer(db, &s, f);
	CHECK(t_has(res, "\"notes\":1") && t_has(res, "\"waiting\":1"), "one filed, one kept: %s", S(res));
	res = t_text(db, "SELECT sync_progress() ->> '$.orders.waiting' || '/' || (sync_progress() ->> '$.orders.unsent')");
	CHECK(res && strcmp(res, "1/0") == 0, "counted as waiting in the server's inbox, not unsent: %s", S(res));
	sqlite3_free(res);
	u = decode(tm_upload(db), "waiting");
	CHECK(u && rows_of(u, "orders") == 0, "it waits its backoff");
	/* a snapshot whose end does not name it lets go of nothing the server does not have yet */
	tm_server_init(&s, 0x21, 0x10);
	tm_shop_snapshot(&s, &begin, &end);
	tm_apply(db, begin);
	res = tm_apply(db, end);
	CHECK(t_has(res, "\"snapshot\":\"end\"") && t_int(db, "SELECT count(*) FROM orders WHERE id = 1") == 1,
		  "the snapshot's end keeps the row: %s", S(res));
	t_exec(db, "UPDATE _sync_waits SET retry_at = 0", NULL);
	u = decode(tm_upload(db), "backoff passed");
	CHECK(u && rows_of(u, "orders") == 1, "after its backoff it goes again");
	/* kept again: the backoff doubles */
	f = tm_filed(u->send_id.data, 0);
	tm_filed_table(f, "orders", 0, 0, 0, 0, 1);
	tm_filed_keep(f, "orders", tm_key(tm_replica_text(&s), "1", NULL), "violates check constraint");
	answer(db, &s, f);
	CHECK(t_int(db, "SELECT tries FROM _sync_waits") == 2 &&
		  t_int(db, "SELECT retry_at - strftime('%s', 'now') BETWEEN 100 AND 130 FROM _sync_waits") == 1,
		  "kept again, it waits twice as long");
	CHECK(t_int(db, "SELECT sync_retry()") >= 1, "sync_retry sends it at once");
	u = decode(tm_upload(db), "retried");
	CHECK(u && rows_of(u, "orders") == 1, "and it goes");
	/* written again: it goes at once whatever the backoff */
	f = tm_filed(u->send_id.data, 0);
	tm_filed_table(f, "orders", 0, 0, 0, 0, 1);
	tm_filed_keep(f, "orders", tm_key(tm_replica_text(&s), "1", NULL), "violates check constraint");
	answer(db, &s, f);
	t_exec(db, "UPDATE orders SET customer = 1 WHERE id = 1", NULL);
	u = decode(tm_upload(db), "written again");
	CHECK(u && rows_of(u, "orders") == 1, "a row written again goes at once");
	res = answer(db, &s, tm_filed_all(u));
	CHECK(t_has(res, "\"notes\":1") && t_int(db, "SELECT count(*) FROM _sync_waits") == 0,
		  "filed, it waits for nothing any more: %s", S(res));
	sqlite3_close(db);
}

/* edits the server drops are let go of, and remembered with why until filed again */
static void
dropped(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	Sync__Filed *f;
	char	   *res;

	tm_upload(db);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 1, NULL)");
	u = decode(tm_upload(db), "an edit");
	f = tm_filed(u->send_id.data, 0);
	tm_filed_table(f, "orders", 0, 0, 1, 0, 0);
	tm_filed_drop(f, "orders", tm_key(tm_replica_text(&s), "1", NULL),
				  "edited without raising its version column \"v\": the server keeps its copy");
	res = answer(db, &s, f);
	CHECK(t_has(res, "\"dropped\":1") && t_int(db, "SELECT count(*) FROM _sync_notes") == 0,
		  "the note goes: %s", S(res));
	res = t_text(db, "SELECT sync_progress() -> '$.orders'");
	CHECK(t_has(res, "\"dropped\":1") && t_has(res, "\"dropped_reasons\":[\"edited without raising its version"),
		  "progress says it was dropped, and why: %s", S(res));
	sqlite3_free(res);
	t_exec(db, "UPDATE orders SET total = 2 WHERE id = 1", NULL);
	u = decode(tm_upload(db), "edited again");
	res = answer(db, &s, tm_filed_all(u));
	res = t_text(db, "SELECT sync_progress() ->> '$.orders.dropped'");
	CHECK(res && strcmp(res, "0") == 0, "filed, it is forgotten: %s", S(res));
	sqlite3_free(res);
	sqlite3_close(db);
}

/* the backlog entry of table in u, or NULL */
static const Sync__Backlog *
backlog_of(const Sync__Up *u, const char *table)
{
	for (size_t i = 0; u && i < u->n_backlog; i++)
		if (strcmp(u->backlog[i]->table, table) == 0)
			return u->backlog[i];
	return NULL;
}

/*
 * a row the server refused is set aside with the server's reason and
 * SQLSTATE, listed by sync_progress() with its key, and told to the server
 * in the next upload's backlog (issue 39: the reason was only in _sync_notes)
 */
static void
refused_told(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	Sync__Filed *f;
	const Sync__Backlog *b;
	char	   *res;

	tm_upload(db);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 1, NULL)");
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 2, 1, 1, NULL)");
	u = decode(tm_upload(db), "two orders");
	f = tm_filed(u->send_id.data, 1);
	tm_filed_table(f, "orders", 1, 1, 0, 0, 0);
	tm_filed_refuse(f, "orders", tm_key(tm_replica_text(&s), "2", NULL),
					"a replica writes and deletes only its own records");
	f->refused[0]->sqlstate = tm_strdup("42501");
	res = answer(db, &s, f);
	CHECK(t_has(res, "\"set_aside\":1"), "one refused, set aside: %s", S(res));
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE aside_sqlstate = '42501' AND aside_at > 0"
				" AND set_aside = 'refused by the server: a replica writes and deletes only its own records'") == 1,
		  "with the server's reason, its SQLSTATE and since when");
	res = t_text(db, "SELECT sync_progress() -> '$.orders.set_aside_rows'");
	CHECK(res && t_has(res, "\"key\":[\"") && t_has(res, "\",\"2\"],\"reason\":\"refused by the server: a replica writes")
		  && t_has(res, "\"sqlstate\":\"42501\""), "sync_progress lists it with its key: %s", S(res));
	sqlite3_free(res);
	u = decode(tm_upload(db), "the backlog changed");
	b = backlog_of(u, "orders");
	CHECK(b && b->set_aside == 1 && b->n_aside == 1 && b->aside[0]->rows == 1 &&
		  strcmp(b->aside[0]->sqlstate, "42501") == 0 &&
		  strcmp(b->aside[0]->reason, "refused by the server: a replica writes and deletes only its own records") == 0 &&
		  b->aside[0]->key && b->aside[0]->key->n_parts == 2 && strcmp(b->aside[0]->key->parts[1], "2") == 0,
		  "and the upload tells the server why, with the key");
	/* an answer with no SQLSTATE (a server before it): set aside all the same, none said */
	t_exec(db, "UPDATE orders SET note = 'again' WHERE id = 2", NULL);
	u = decode(tm_upload(db), "written again");
	f = tm_filed(u->send_id.data, 0);
	tm_filed_table(f, "orders", 0, 1, 0, 0, 0);
	tm_filed_refuse(f, "orders", tm_key(tm_replica_text(&s), "2", NULL), "no");
	res = answer(db, &s, f);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside IS NOT NULL AND aside_sqlstate IS NULL") == 1,
		  "no SQLSTATE said, none kept: %s", S(res));
	res = t_text(db, "SELECT sync_progress() ->> '$.orders.set_aside_rows[0].sqlstate'");
	CHECK(res == NULL, "and none listed: %s", S(res));
	sqlite3_free(res);
	/* what is not a SQLSTATE refuses the answer, as any malformed message */
	t_exec(db, "UPDATE orders SET note = 'and again' WHERE id = 2", NULL);
	u = decode(tm_upload(db), "written again");
	f = tm_filed(u->send_id.data, 0);
	tm_filed_table(f, "orders", 0, 1, 0, 0, 0);
	tm_filed_refuse(f, "orders", tm_key(tm_replica_text(&s), "2", NULL), "no");
	f->refused[0]->sqlstate = tm_strdup("4250");
	res = answer(db, &s, f);
	CHECK(res == NULL && t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside IS NOT NULL") == 0,
		  "a SQLSTATE of four characters refuses the answer: %s", S(res));
	/* a row the host blames (sync_upload_refused) keeps the SQLSTATE the server refused it with */
	t_exec(db, "UPDATE orders SET note = 'once more' WHERE id = 2", NULL);
	{
		sqlite3_stmt *st;
		tm_msg		m = tm_upload(db);

		sqlite3_prepare_v2(db, "SELECT sync_upload_refused(?1, 'too large for the server: over upload_bytes', 1, ?2)",
						   -1, &st, NULL);
		sqlite3_bind_blob(st, 1, m.data, (int) m.len, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, "5400", -1, SQLITE_STATIC);
		CHECK(sqlite3_step(st) == SQLITE_ERROR, "a SQLSTATE that is none is refused");
		sqlite3_reset(st);
		sqlite3_bind_text(st, 2, "54000", -1, SQLITE_STATIC);
		CHECK(sqlite3_step(st) == SQLITE_ROW && t_has((const char *) sqlite3_column_text(st, 0), "\"set_aside\":1"),
			  "blamed");
		sqlite3_finalize(st);
	}
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside IS NOT NULL AND aside_sqlstate = '54000'") == 1,
		  "with the server's SQLSTATE");
	sqlite3_close(db);
}

/* a duplicate answer: the replica numbers beyond the last filed, and its rows go again */
static void
duplicates(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	Sync__Filed *f;
	char	   *res;
	uint8_t		other[16] = {7};

	tm_upload(db);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', 1, 1, 1, NULL)");
	u = decode(tm_upload(db), "a send");
	f = tm_filed(other, 0);
	f->duplicate = 1;
	f->last_seq = UINT64_C(8000000000000000000);
	res = answer(db, &s, f);
	CHECK(t_has(res, "\"ours\":false") && t_int(db, "SELECT count(*) FROM _sync_notes WHERE send_id IS NOT NULL") == 1 &&
		  t_int(db, "SELECT last < 8000000000000000000 FROM _sync_seq") == 1,
		  "the answer of a replay names nothing of this replica's: %s", S(res));
	f = tm_filed(u->send_id.data, 0);
	f->duplicate = 1;
	f->last_seq = UINT64_C(8000000000000000000);
	res = answer(db, &s, f);
	CHECK(t_has(res, "\"ours\":true") && t_has(res, "\"again\":1") &&
		  t_int(db, "SELECT count(*) FROM _sync_notes WHERE send_id IS NULL") == 1,
		  "its own send was a duplicate: its rows go again: %s", S(res));
	u = decode(tm_upload(db), "numbered beyond");
	CHECK(u && u->seq == UINT64_C(8000000000000000001) && rows_of(u, "orders") == 1,
		  "numbered beyond the last the server filed: %llu", (unsigned long long) (u ? u->seq : 0));
	sqlite3_close(db);
}

/* narrowing down: at most max_rows rows; a refused upload's rows go again, or are set aside */
static void
narrowing(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	tm_msg		m;
	char	   *res;

	tm_upload(db);
	CHECK(tm_upload(db).data == NULL, "nothing to say");
	m.data = NULL;
	{
		sqlite3_stmt *st;

		sqlite3_prepare_v2(db, "SELECT sync_upload(0)", -1, &st, NULL);
		CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_BLOB,
			  "sync_upload(0) always says what every upload says");
		sqlite3_finalize(st);
	}
	for (int i = 1; i <= 4; i++)
	{
		char	   *sql = sqlite3_mprintf("INSERT INTO orders VALUES ('%s', %d, 1, 1, NULL)", tm_replica_text(&s), i);

		t_exec(db, sql, NULL);
		sqlite3_free(sql);
	}
	res = t_text(db, "SELECT hex(sync_upload(1))");
	CHECK(res != NULL, "one row at most");
	m.len = res ? strlen(res) / 2 : 0;
	m.data = tm_alloc(m.len + 1);
	for (size_t i = 0; i < m.len; i++)
		sscanf(res + 2 * i, "%2hhx", &m.data[i]);
	sqlite3_free(res);
	u = decode(m, "narrowed");
	CHECK(u && rows_of(u, "orders") == 1 && u->n_digests == 0 && u->n_refusals == 0, "a row, no digests, no refusals");
	{
		sqlite3_stmt *st;

		sqlite3_prepare_v2(db, "SELECT sync_upload_refused(?1, 'too large for the server: over upload_bytes', ?2)",
						   -1, &st, NULL);
		sqlite3_bind_blob(st, 1, m.data, (int) m.len, SQLITE_STATIC);
		sqlite3_bind_int(st, 2, 0);
		CHECK(sqlite3_step(st) == SQLITE_ROW && t_has((const char *) sqlite3_column_text(st, 0), "\"rows\":1"),
			  "refused: its row goes again");
		sqlite3_reset(st);
		CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE send_id IS NULL") == 4, "all four unsent");
		m = tm_upload(db);
		u = decode(m, "all four");
		CHECK(u && rows_of(u, "orders") == 4, "and go at once");
		sqlite3_bind_blob(st, 1, m.data, (int) m.len, SQLITE_STATIC);
		sqlite3_bind_int(st, 2, 1);
		CHECK(sqlite3_step(st) == SQLITE_ROW && t_has((const char *) sqlite3_column_text(st, 0), "\"set_aside\":4"),
			  "blamed: set aside");
		sqlite3_finalize(st);
	}
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside = 'too large for the server: over upload_bytes'") == 4,
		  "with the reason");
	CHECK(t_int(db, "SELECT sync_config('resend_after', 300)") == 300, "a setting that is no bound changes nothing");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside IS NOT NULL") == 4, "still set aside");
	t_exec(db, "UPDATE _sync_notes SET set_aside = 'refused by the server: no' WHERE key LIKE '%1:4'", NULL);
	CHECK(t_int(db, "SELECT sync_retry('too large')") == 3, "sync_retry('too large') retries the too large only");
	t_exec(db, "UPDATE _sync_notes SET set_aside = 'too large: 9 bytes' WHERE key LIKE '%1:1'", NULL);
	t_exec(db, "SELECT sync_config('max_upload_bytes', 500000)", NULL);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside IS NOT NULL") == 1,
		  "a new max_upload_bytes retries the rows too large for the old");
	sqlite3_close(db);
}

/* a record's key is spelled as its types print it, in the row too */
static void
canonical(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	char		upper[37];
	char	   *sql;
	char	   *res;

	tm_upload(db);
	for (int i = 0; i < 36; i++)
		upper[i] = (char) (tm_replica_text(&s)[i] >= 'a' && tm_replica_text(&s)[i] <= 'f' ?
						   tm_replica_text(&s)[i] - 32 : tm_replica_text(&s)[i]);
	upper[36] = '\0';
	sql = sqlite3_mprintf("INSERT INTO orders VALUES ('%s', 1, 1, 1, 'upper')", upper);
	t_exec(db, sql, NULL);
	sqlite3_free(sql);
	u = decode(tm_upload(db), "an upper-case uuid");
	CHECK(u && rows_of(u, "orders") == 1 && u->rows[0]->n_keys == 1 &&
		  strcmp(u->rows[0]->keys[0]->parts[0], tm_replica_text(&s)) == 0,
		  "its key goes as a uuid prints: %s", u && u->n_rows ? u->rows[0]->keys[0]->parts[0] : "");
	res = t_text(db, "SELECT origin FROM orders WHERE id = 1");
	CHECK(res && strcmp(res, tm_replica_text(&s)) == 0, "and the row is spelled so: %s", S(res));
	sqlite3_free(res);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes") == 1 &&
		  t_int(db, "SELECT count(*) FROM _sync_notes, orders WHERE key = sync_key(origin, id)") == 1,
		  "its one note under that key");
	/* both spellings of one key: one of the two must go */
	sql = sqlite3_mprintf("INSERT INTO orders VALUES ('%s', 2, 1, 1, 'upper'), ('%s', 2, 1, 1, 'lower')",
						  upper, tm_replica_text(&s));
	t_exec(db, sql, NULL);
	sqlite3_free(sql);
	tm_upload(db);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside LIKE 'its key, spelled as its types print it, is another row%'") == 1,
		  "a row whose key is another's, spelled otherwise, is set aside");
	sqlite3_close(db);
}

/*
 * keys of dates, times and numerics (docs/protocol.md 3): held as the server
 * spells them, its key columns so too; a record's key spelled so before it
 * goes up, whatever the application wrote, and its row with it
 */
static void
typed(void)
{
	tm_server	s;
	sqlite3    *db = t_open(NULL);
	Sync__Table *schema[1];
	Sync__Down *d;
	Sync__Rows *rows;
	Sync__Up   *u;
	const char *other = "cccccccc-0000-4000-8000-000000000009";
	char	   *sql;
	char	   *r;

	tm_server_init(&s, 0x21, 0x11);
	/* a domain over date says nothing by its name: its key_type does */
	schema[0] = tm_table("visits", "record", "json", "origin,at,amount,day",
						 "origin TEXT server=uuid, at TEXT server=timestamptz key=timestamptz,"
						 " amount TEXT server=numeric key=numeric, day TEXT server=workday key=date, note TEXT");
	tm_origin(schema[0], "origin");
	d = tm_begin(schema, 1);
	rows = tm_rows(d, "visits");
	sql = sqlite3_mprintf("{\"origin\":\"%s\",\"at\":\"2024-01-02T03:04:05.5+00:00\",\"amount\":1.5,"
						  "\"day\":\"2024-01-02\",\"note\":\"theirs\"}", other);
	tm_upsert(rows, sql, -1, other, "2024-01-02T03:04:05.5+00:00", "1.5", "2024-01-02", NULL);
	sqlite3_free(sql);
	/* a row whose key columns are spelled otherwise than its key is refused, as ever */
	sql = sqlite3_mprintf("{\"origin\":\"%s\",\"at\":\"2024-01-02T03:04:06+00:00\",\"amount\":1.50,"
						  "\"day\":\"2024-01-02\",\"note\":\"theirs\"}", other);
	tm_upsert(rows, sql, -1, other, "2024-01-02T03:04:06+00:00", "1.5", "2024-01-02", NULL);
	sqlite3_free(sql);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1") && t_has(r, "\"refused\":1"), "the row spelled as its key is taken, the other refused: %s %s",
		  S(r), tm_error());
	r = tm_apply(db, tm_next(&s, NULL, tm_end("visits", NULL)));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "the snapshot ends: %s %s", S(r), tm_error());
	sql = sqlite3_mprintf("SELECT count(*) FROM visits WHERE sync_key(origin, at, amount, day) = sync_key('%s',"
						  " '2024-01-02T03:04:05.5+00:00', '1.5', '2024-01-02')", other);
	CHECK(t_int(db, sql) == 1, "its key, of its columns, is the server's");
	sqlite3_free(sql);

	/* the application's own, spelled as it likes */
	sql = sqlite3_mprintf("INSERT INTO visits VALUES ('%s', '2024-01-02 04:04:05.5+01', '001.50', '2024-1-2', 'mine'),"
						  " ('%s', 'yesterday', '2', '2024-01-03', 'when?')", tm_replica_text(&s), tm_replica_text(&s));
	CHECK(t_exec(db, sql, NULL) == SQLITE_OK, "records written");
	sqlite3_free(sql);
	u = decode(tm_upload(db), "typed keys");
	CHECK(u && rows_of(u, "visits") == 1 && u->rows[0]->n_keys == 1 && u->rows[0]->keys[0]->n_parts == 4 &&
		  strcmp(u->rows[0]->keys[0]->parts[1], "2024-01-02T03:04:05.5+00:00") == 0 &&
		  strcmp(u->rows[0]->keys[0]->parts[2], "1.5") == 0 && strcmp(u->rows[0]->keys[0]->parts[3], "2024-01-02") == 0,
		  "its key goes as the server spells it: %s %s %s", u && u->n_rows ? u->rows[0]->keys[0]->parts[1] : "",
		  u && u->n_rows ? u->rows[0]->keys[0]->parts[2] : "", u && u->n_rows ? u->rows[0]->keys[0]->parts[3] : "");
	CHECK(t_int(db, "SELECT count(*) FROM visits WHERE note = 'mine' AND at = '2024-01-02T03:04:05.5+00:00'"
				" AND amount = '1.5' AND day = '2024-01-02'") == 1, "and the row is spelled so");
	r = t_text(db, "SELECT set_aside FROM _sync_notes WHERE set_aside IS NOT NULL");
	CHECK(r && strstr(r, "\"yesterday\" is not a timestamptz in ISO 8601") != NULL,
		  "one no replica can spell is set aside, saying why: %s", S(r));
	sqlite3_free(r);
	sqlite3_close(db);
}

void
test_sends(void)
{
	whole();
	accounting();
	kept();
	dropped();
	duplicates();
	narrowing();
	canonical();
	typed();
	refused_told();
	for (int i = 0; i < ndecoded; i++)
		sync__up__free_unpacked(decoded[i], NULL);
	ndecoded = 0;
}
