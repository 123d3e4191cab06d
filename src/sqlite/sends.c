/*
** sends.c - what the replica sent, and what became of it (docs/protocol.md
** 7.1, 2.3).
**
**   _sync_seq      the last send number: every upload is numbered greater
**                  than any before it (one more, or the time in
**                  microseconds when that is later, so that a file restored
**                  from an older copy numbers beyond what it sent), and the
**                  server files only a number greater than the last it filed
**   _sync_sent     per send and table, the rows it carried, until its
**                  answer comes
**   _sync_waits    rows the server keeps in its inbox (waiting, or set aside
**                  until a fix): their notes stay, so the row is never let
**                  go of while it is not filed, and go up again with a
**                  backoff (a minute, doubling to an hour)
**   _sync_dropped  edits the server did not take, its own copy winning, with
**                  why: until the row is filed again
**
** A Filed answer (ms_apply_filed) lets go of the notes still stamped with
** its send only when it accounts for them: for each table the send carried,
** its counts add up to the rows carried, and every row not filed is named
** (refused: set aside, with the server's reason and SQLSTATE; dropped: let
** go, and remembered; kept: waits;
** again, written in a schema the replica has been sent a change of since:
** up again at once, in the new one).  Rows
** of an answer that does not account for them stay stamped and go again
** after resend_after, as when an answer is lost; what the send carried of
** a table is forgotten once an answer accounted for it (or after a week).  An answer that says the
** send is a duplicate makes the replica number beyond the last the server
** filed of the answer's lane (each lane numbers its own, lanes.c), and its
** rows go again at once.
**
** sync_upload_refused(upload, reason, blame[, sqlstate]) is for a host
** whose sync.file refused an upload for good: the rows it carried go again
** at once (the host narrows the failure down by sending fewer), or, blamed,
** are set aside with the reason and the SQLSTATE the server refused it with.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

#include "key.h"

static const char *const sends_ddl =
"CREATE TABLE IF NOT EXISTS _sync_seq(id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL);"
"CREATE TABLE IF NOT EXISTS _sync_sent(send_id BLOB NOT NULL, tbl TEXT NOT NULL,"
"  rows INTEGER NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (send_id, tbl)) WITHOUT ROWID;"
"CREATE TABLE IF NOT EXISTS _sync_waits(tbl TEXT NOT NULL, key TEXT NOT NULL,"
"  writes INTEGER NOT NULL, reason TEXT NOT NULL, tries INTEGER NOT NULL DEFAULT 1,"
"  retry_at INTEGER NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID;"
"CREATE TABLE IF NOT EXISTS _sync_dropped(tbl TEXT NOT NULL, key TEXT NOT NULL,"
"  reason TEXT NOT NULL, at INTEGER NOT NULL, PRIMARY KEY (tbl, key)) WITHOUT ROWID;";

/*
 * aside_columns: a note set aside says its SQLSTATE and since when; a file
 * of an earlier build gains the columns (its notes set aside say neither)
 */
static int
aside_columns(ms_ctx *c)
{
	bool		has;
	int			rc = ms_has_column(c, "_sync_notes", "aside_at", &has);

	if (rc != SQLITE_OK || has)
		return rc;
	return ms_exec(c, "ALTER TABLE _sync_notes ADD COLUMN aside_sqlstate TEXT;"
				   " ALTER TABLE _sync_notes ADD COLUMN aside_at INTEGER");
}

int
ms_sends_ensure(ms_ctx *c)
{
	bool		has;
	/* in the schema SQLite holds: a scan of sqlite_master was a fifteenth of an upload */
	int			rc = ms_has_column(c, "_sync_dropped", NULL, &has);

	if (rc == SQLITE_OK && !has)
		rc = ms_exec(c, "%s", sends_ddl);
	return rc == SQLITE_OK ? aside_columns(c) : rc;
}

int
ms_send_seq(ms_ctx *c, const char *lane, uint64_t *seq)
{
	sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
	sqlite3_int64 julian_ms = 0;
	uint64_t	now = 0;
	uint64_t	last = 0;
	int			rc;

	/*
	 * the clock as SQLite's VFS reads it (the same on every platform the
	 * replica runs on), in microseconds since 1970; never below the last
	 * number, so a clock set back still numbers forward
	 */
	if (vfs != NULL && vfs->iVersion >= 2 && vfs->xCurrentTimeInt64 != NULL &&
		vfs->xCurrentTimeInt64(vfs, &julian_ms) == SQLITE_OK && julian_ms > INT64_C(210866760000000))
		now = (uint64_t) (julian_ms - INT64_C(210866760000000)) * 1000;
	/* each lane numbers on its own (lanes.c) */
	rc = ms_lane_last(c, lane, &last);
	if (rc != SQLITE_OK)
		return rc;
	*seq = last + 1 > now ? last + 1 : now;
	return ms_lane_set_last(c, lane, *seq, false);
}

int
ms_send_carried(ms_ctx *c, const uint8_t send_id[MS_SEND_ID_BYTES], const Sync__Up *up)
{
	sqlite3_stmt *st;
	sqlite3_stmt *old = NULL;
	int			rc = ms_prepare(c, &st, "INSERT OR REPLACE INTO _sync_sent(send_id, tbl, rows, at) VALUES (?1, ?2, ?3, ?4)");

	/*
	 * what the answers of sends a week old would have let go of went again
	 * long since (the time bound, not written into the text: kept, not parsed at each upload)
	 */
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &old, "DELETE FROM _sync_sent WHERE at < ?1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_int64(old, 1, (sqlite3_int64) (c->now - 7 * 86400));
		rc = ms_done(c, old);
	}
	sqlite3_finalize(old);
	for (size_t i = 0; rc == SQLITE_OK && i < up->n_rows; i++)
	{
		sqlite3_bind_blob(st, 1, send_id, MS_SEND_ID_BYTES, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, up->rows[i]->table, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, (sqlite3_int64) (up->rows[i]->n_upserts + up->rows[i]->n_deletes));
		sqlite3_bind_int64(st, 4, c->now);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	return rc;
}

/* ---- a Filed answer ---------------------------------------------------- */

typedef struct answer
{
	ms_ctx	   *c;
	Sync__Filed *f;
	ms_buf		key;
	int			let_go;
	int			set_aside;
	int			dropped;
	int			waiting;
	int			unaccounted;
} answer;

/* the canonical key of a wire Key, into a->key */
static bool
key_of(answer *a, const Sync__Key *k)
{
	a->key.len = 0;
	for (size_t p = 0; p < k->n_parts; p++)
		ms_key_append(&a->key, k->parts[p], strlen(k->parts[p]));
	return !a->key.oom;
}

/* run sql on the note (table, key) stamped with the send: ?1 table, ?2 key, ?3 send, ?4 text, ?5 now */
static int
on_note(answer *a, const char *sql, const char *table, const char *text, int *changed)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(a->c, &st, "%s", sql);

	*changed = 0;
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, a->key.data, (int) a->key.len, SQLITE_STATIC);
	sqlite3_bind_blob(st, 3, a->f->send_id.data, MS_SEND_ID_BYTES, SQLITE_STATIC);
	if (sqlite3_bind_parameter_count(st) >= 4)
		sqlite3_bind_text(st, 4, text, -1, SQLITE_STATIC);
	if (sqlite3_bind_parameter_count(st) >= 5)
		sqlite3_bind_int64(st, 5, a->c->now);
	rc = ms_done(a->c, st);
	*changed = sqlite3_changes(a->c->db);
	sqlite3_finalize(st);
	return rc;
}

/* refused for good: the note is set aside with the server's reason and SQLSTATE, and since when */
static int
refused(answer *a, const Sync__Refusal *r)
{
	char	   *why = sqlite3_mprintf("refused by the server: %s", r->reason);
	sqlite3_stmt *st = NULL;
	int			rc;

	if (why == NULL || !key_of(a, r->key))
	{
		sqlite3_free(why);
		return SQLITE_NOMEM;
	}
	rc = ms_prepare(a->c, &st, "UPDATE _sync_notes SET set_aside = ?4, aside_sqlstate = nullif(?5, ''), aside_at = ?6,"
					" send_id = NULL, sent_at = NULL WHERE tbl = ?1 AND key = ?2 AND send_id = ?3");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, r->table, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, a->key.data, (int) a->key.len, SQLITE_STATIC);
		sqlite3_bind_blob(st, 3, a->f->send_id.data, MS_SEND_ID_BYTES, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, why, -1, SQLITE_STATIC);
		/* checked by the wire (src/shared/wire.c): "" or a SQLSTATE; "" from a server before it */
		sqlite3_bind_text(st, 5, r->sqlstate != NULL ? r->sqlstate : "", -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 6, a->c->now);
		rc = ms_done(a->c, st);
		a->set_aside += sqlite3_changes(a->c->db);
	}
	sqlite3_finalize(st);
	sqlite3_free(why);
	return rc;
}

/* dropped: the server's copy wins; the note goes, what became of it stays */
static int
dropped(answer *a, const Sync__Refusal *r)
{
	int			n = 0;
	int			m = 0;
	int			rc;

	if (!key_of(a, r->key))
		return SQLITE_NOMEM;
	rc = on_note(a, "DELETE FROM _sync_notes WHERE tbl = ?1 AND key = ?2 AND send_id = ?3", r->table, NULL, &n);
	if (rc == SQLITE_OK && n > 0)
		rc = on_note(a, "INSERT OR REPLACE INTO _sync_dropped(tbl, key, reason, at)"
					 " SELECT ?1, ?2, ?4, ?5 WHERE ?3 IS NOT NULL", r->table, r->reason, &m);
	if (rc == SQLITE_OK && n > 0)
		rc = on_note(a, "DELETE FROM _sync_waits WHERE tbl = ?1 AND key = ?2 AND ?3 IS NOT NULL", r->table, NULL, &m);
	a->dropped += n;
	return rc;
}

/* kept in the server's inbox: the note stays, and goes again after a backoff */
static int
kept(answer *a, const Sync__Refusal *r)
{
	int			n = 0;
	int			m = 0;
	int			rc;

	if (!key_of(a, r->key))
		return SQLITE_NOMEM;
	rc = on_note(a, "UPDATE _sync_notes SET send_id = NULL, sent_at = NULL"
				 " WHERE tbl = ?1 AND key = ?2 AND send_id = ?3", r->table, NULL, &n);
	if (rc == SQLITE_OK && n > 0)
		rc = on_note(a, "INSERT INTO _sync_waits(tbl, key, writes, reason, tries, retry_at)"
					 " SELECT tbl, key, writes, ?4, 1, ?5 + 60 FROM _sync_notes"
					 "  WHERE tbl = ?1 AND key = ?2 AND ?3 IS NOT NULL"
					 " ON CONFLICT (tbl, key) DO UPDATE SET writes = excluded.writes, reason = excluded.reason,"
					 "  tries = tries + 1, retry_at = ?5 + min(3600, 60 << min(tries, 6))",
					 r->table, r->reason, &m);
	a->waiting += n;
	return rc;
}

/* how many rows of table the answer names as not filed */
static size_t
named(const Sync__Filed *f, const char *table)
{
	size_t		n = 0;

	for (size_t i = 0; i < f->n_refused; i++)
		n += strcmp(f->refused[i]->table, table) == 0;
	for (size_t i = 0; i < f->n_dropped; i++)
		n += strcmp(f->dropped[i]->table, table) == 0;
	for (size_t i = 0; i < f->n_kept; i++)
		n += strcmp(f->kept[i]->table, table) == 0;
	for (size_t i = 0; i < f->n_again; i++)
		n += strcmp(f->again[i]->table, table) == 0;
	return n;
}

static const Sync__FiledTable *
counts_of(const Sync__Filed *f, const char *table)
{
	for (size_t i = 0; i < f->n_tables; i++)
		if (strcmp(f->tables[i]->table, table) == 0)
			return f->tables[i];
	return NULL;
}

/* run sql with ?1 the table and ?2 the send; the rows it changed, or its one integer */
static int
of_send(answer *a, const char *sql, const char *table, int *n)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(a->c, &st, "%s", sql);

	*n = 0;
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 2, a->f->send_id.data, MS_SEND_ID_BYTES, SQLITE_STATIC);
	rc = ms_step(a->c, st);
	if (rc == SQLITE_ROW)
		*n = sqlite3_column_int(st, 0);
	else if (rc == SQLITE_DONE)
		*n = sqlite3_changes(a->c->db);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* a table the answer accounts for: its notes still stamped with the send were filed */
static int
filed_table(answer *a, const char *table)
{
	int			n;
	int			rc = of_send(a, "DELETE FROM _sync_dropped WHERE tbl = ?1 AND key IN"
							 " (SELECT key FROM _sync_notes WHERE tbl = ?1 AND send_id = ?2)", table, &n);

	if (rc == SQLITE_OK)
		rc = of_send(a, "DELETE FROM _sync_waits WHERE tbl = ?1 AND key IN"
					 " (SELECT key FROM _sync_notes WHERE tbl = ?1 AND send_id = ?2)", table, &n);
	if (rc == SQLITE_OK)
		rc = of_send(a, "DELETE FROM _sync_notes WHERE tbl = ?1 AND send_id = ?2", table, &n);
	a->let_go += n;
	/* accounted for: an answer that comes again lets go of nothing more */
	if (rc == SQLITE_OK)
		rc = of_send(a, "DELETE FROM _sync_sent WHERE tbl = ?1 AND send_id = ?2", table, &n);
	return rc;
}

/*
 * accounted: for each table the send carried, the notes still stamped with
 * it are let go of when the answer accounts for every row of the table: its
 * counts add up to the rows carried, and each row not filed is named.
 */
static int
accounted(answer *a)
{
	ms_ctx	   *c = a->c;
	sqlite3_stmt *sent;
	ms_buf		tables = {0};
	size_t		pos = 0;
	int			rc = ms_prepare(c, &sent, "SELECT tbl, rows FROM _sync_sent WHERE send_id = ?1");

	if (rc == SQLITE_OK)
		sqlite3_bind_blob(sent, 1, a->f->send_id.data, MS_SEND_ID_BYTES, SQLITE_STATIC);
	/* the tables first, then let go: never delete under a running SELECT */
	while (rc == SQLITE_OK && (rc = ms_step(c, sent)) == SQLITE_ROW)
	{
		const char *t = (const char *) sqlite3_column_text(sent, 0);
		const Sync__FiledTable *ft = counts_of(a->f, t);
		uint64_t	carried = (uint64_t) sqlite3_column_int64(sent, 1);
		uint64_t	total = ft ? (uint64_t) ft->filed + ft->refused + ft->dropped + ft->waiting + ft->set_aside + ft->again : 0;

		rc = SQLITE_OK;
		ms_buf_byte(&tables, ft != NULL && total == carried && named(a->f, t) == total - ft->filed);
		ms_buf_add(&tables, t, strlen(t) + 1);
	}
	sqlite3_finalize(sent);
	if (rc == SQLITE_DONE)
		rc = tables.oom ? SQLITE_NOMEM : SQLITE_OK;
	while (rc == SQLITE_OK && pos < tables.len)
	{
		bool		whole = tables.data[pos] != 0;
		const char *t = tables.data + pos + 1;
		int			n = 0;

		pos += 2 + strlen(t);
		if (whole)
			rc = filed_table(a, t);
		else
		{
			/* stamped still: they go again after resend_after, as when an answer is lost */
			rc = of_send(a, "SELECT count(*) FROM _sync_notes WHERE tbl = ?1 AND send_id = ?2", t, &n);
			a->unaccounted += n;
		}
	}
	ms_buf_free(&tables);
	return rc;
}

/* run sql with ?1 the send */
static int
on_send(ms_ctx *c, const char *sql, const uint8_t *send_id, int *n)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "%s", sql);

	if (rc == SQLITE_OK)
	{
		sqlite3_bind_blob(st, 1, send_id, MS_SEND_ID_BYTES, SQLITE_STATIC);
		rc = ms_done(c, st);
		if (n)
			*n = sqlite3_changes(c->db);
	}
	sqlite3_finalize(st);
	return rc;
}

/*
 * again: the rows and refusals a send carried go again at once; what it
 * carried and said is forgotten.  Returns the notes that go again in *n.
 */
static int
again(ms_ctx *c, const uint8_t *send_id, int *n)
{
	int			rc = on_send(c, "UPDATE _sync_notes SET send_id = NULL, sent_at = NULL WHERE send_id = ?1", send_id, n);

	if (rc == SQLITE_OK)
		rc = on_send(c, "UPDATE _sync_refused SET send_id = NULL, sent_at = NULL WHERE send_id = ?1 AND filed = 0",
					 send_id, NULL);
	if (rc == SQLITE_OK)
		rc = on_send(c, "DELETE FROM _sync_sent WHERE send_id = ?1", send_id, NULL);
	/* what the send said goes again too, its digests among it when it carried them */
	if (rc == SQLITE_OK)
		rc = on_send(c, "UPDATE _sync_state SET report = NULL,"
					 " digest_due = CASE WHEN digest_at = report_at THEN 1 ELSE digest_due END"
					 " WHERE id = 1 AND report_send_id = ?1", send_id, NULL);
	return rc;
}

/*
 * duplicate: the server filed nothing of the send, numbered at or below the
 * last it filed.  When the send is one of this replica's (a file restored
 * from an older copy, or sends filed out of order), it numbers beyond the
 * last filed and its rows go again; a replay's answer names nothing here.
 */
static int
duplicate(ms_ctx *c, Sync__Filed *f, const char *send, ms_buf *out)
{
	sqlite3_stmt *st;
	int			n = 0;
	bool		ours = false;
	int			rc = ms_prepare(c, &st, "SELECT EXISTS (SELECT 1 FROM _sync_sent WHERE send_id = ?1)"
								" OR EXISTS (SELECT 1 FROM _sync_notes WHERE send_id = ?1)"
								" OR EXISTS (SELECT 1 FROM _sync_state WHERE report_send_id = ?1)");

	if (rc == SQLITE_OK)
	{
		sqlite3_bind_blob(st, 1, f->send_id.data, MS_SEND_ID_BYTES, SQLITE_STATIC);
		if ((rc = ms_step(c, st)) == SQLITE_ROW)
			ours = sqlite3_column_int(st, 0) != 0;
		rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	/* the lane the answer is of numbers beyond it; another lane's numbers are its own */
	if (rc == SQLITE_OK && ours)
		rc = ms_lane_set_last(c, f->lane != NULL ? f->lane : "", f->last_seq, true);
	if (rc == SQLITE_OK && ours)
		rc = again(c, f->send_id.data, &n);
	ms_buf_printf(out, "{\"result\":\"filed\",\"send_id\":\"%s\",\"duplicate\":true,\"ours\":%s,"
				  "\"lane\":\"%s\",\"last_seq\":%llu,\"rows\":0,\"notes\":0,\"set_aside\":0,\"dropped\":0,\"waiting\":0,\"again\":%d}",
				  send, ours ? "true" : "false", f->lane != NULL ? f->lane : "", (unsigned long long) f->last_seq, n);
	return rc;
}

int
ms_apply_filed(ms_ctx *c, Sync__ToReplica *m, ms_buf *out)
{
	Sync__Filed *f = m->filed;
	answer		a;
	char		send[2 * MS_SEND_ID_BYTES + 1];
	int			rc;

	ms_hex(f->send_id.data, MS_SEND_ID_BYTES, send);
	if (c->st.has_replica && memcmp(m->replica.data, c->st.replica, MS_REPLICA_BYTES) != 0)
	{
		char		other[37];

		ms_uuid_text(m->replica.data, other);
		ms_buf_printf(out, "{\"result\":\"wrong_replica\",\"number\":0,\"replica\":\"%s\"}", other);
		return ms_state_error(c, "a Filed answer (send %s) is for replica %s, not this one", send, other);
	}
	rc = ms_sends_ensure(c);
	/* the server's questions about what it holds (range.c), whatever the answer says besides */
	if (rc == SQLITE_OK)
		rc = ms_range_asked(c, f);
	if (rc != SQLITE_OK)
		return rc;
	if (f->duplicate)
		return duplicate(c, f, send, out);
	memset(&a, 0, sizeof a);
	a.c = c;
	a.f = f;
	for (size_t i = 0; rc == SQLITE_OK && i < f->n_refused; i++)
		rc = refused(&a, f->refused[i]);
	for (size_t i = 0; rc == SQLITE_OK && i < f->n_dropped; i++)
		rc = dropped(&a, f->dropped[i]);
	for (size_t i = 0; rc == SQLITE_OK && i < f->n_kept; i++)
		rc = kept(&a, f->kept[i]);
	/* written in an old schema: not filed, sent again in the new one (docs/protocol.md 5.3) */
	if (rc == SQLITE_OK && f->n_again > 0)
		rc = ms_evolve_again(c, f);
	if (rc == SQLITE_OK)
		rc = accounted(&a);
	ms_buf_free(&a.key);
	if (rc == SQLITE_OK)
		rc = on_send(c, "UPDATE _sync_refused SET filed = 1 WHERE send_id = ?1", f->send_id.data, NULL);
	if (rc == SQLITE_OK)
		rc = on_send(c, "UPDATE _sync_state SET report_filed = 1 WHERE id = 1 AND report_send_id = ?1",
					 f->send_id.data, NULL);
	if (rc == SQLITE_OK && f->send_id.len == MS_SEND_ID_BYTES)
		rc = ms_wish_filed(c, f->send_id.data);
	ms_buf_printf(out, "{\"result\":\"filed\",\"send_id\":\"%s\",\"rows\":%u,\"notes\":%d,\"set_aside\":%d,"
				  "\"dropped\":%d,\"waiting\":%d,\"unaccounted\":%d}",
				  send, (unsigned) f->rows, a.let_go, a.set_aside, a.dropped, a.waiting, a.unaccounted);
	return rc;
}

/* ---- sync_upload_refused ----------------------------------------------- */

static void
refused_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	ProtobufCAllocator pa;
	Sync__Up   *up = NULL;
	ms_wire_status status;
	char		reason[MS_REASON_MAX];
	const char *why = sqlite3_value_type(argv[1]) == SQLITE_TEXT ? (const char *) sqlite3_value_text(argv[1]) : NULL;
	bool		blame = argc > 2 && sqlite3_value_int(argv[2]) != 0;
	const char *state = argc > 3 && sqlite3_value_type(argv[3]) == SQLITE_TEXT ?
		(const char *) sqlite3_value_text(argv[3]) : NULL;
	int			n = 0;
	int			rc;

	ms_ctx_init(&c, ctx, "sync_upload_refused");
	pa = ms_arena_allocator(&c.arena);
	if (sqlite3_value_type(argv[0]) == SQLITE_BLOB)
		up = ms_up_decode(sqlite3_value_blob(argv[0]), (size_t) sqlite3_value_bytes(argv[0]), (size_t) 1 << 30,
						  &pa, &status, reason);
	if (up == NULL || why == NULL)
		rc = ms_fail(&c, SQLITE_ERROR, "takes an upload sync_upload() returned (%s) and the reason the server refused it",
					 up == NULL ? "this is none" : "the reason is missing");
	else if (state != NULL && !ms_sqlstate_ok(state))
		rc = ms_fail(&c, SQLITE_ERROR, "the SQLSTATE the server refused it with is five digits or capital letters");
	else
		rc = ms_begin(&c, "_sync_upload_refused");
	if (up != NULL && why != NULL && rc == SQLITE_OK)
	{
		rc = ms_state_load(&c);
		if (rc == SQLITE_OK && (!c.st.has_replica || memcmp(up->replica.data, c.st.replica, MS_REPLICA_BYTES) != 0))
			rc = ms_fail(&c, SQLITE_ERROR, "the upload is another replica's");
		if (rc == SQLITE_OK)
			rc = ms_sends_ensure(&c);
		if (rc == SQLITE_OK && blame)
		{
			sqlite3_stmt *st;

			/* the server never takes it: set aside, counted in the backlog, until written again or sync_retry */
			rc = ms_prepare(&c, &st, "UPDATE _sync_notes SET set_aside = ?2, aside_sqlstate = ?3, aside_at = ?4,"
							" send_id = NULL, sent_at = NULL WHERE send_id = ?1");
			if (rc == SQLITE_OK)
			{
				sqlite3_bind_blob(st, 1, up->send_id.data, MS_SEND_ID_BYTES, SQLITE_STATIC);
				sqlite3_bind_text(st, 2, why, -1, SQLITE_STATIC);
				if (state != NULL)
					sqlite3_bind_text(st, 3, state, -1, SQLITE_STATIC);
				sqlite3_bind_int64(st, 4, c.now);
				rc = ms_done(&c, st);
				n = sqlite3_changes(c.db);
			}
			sqlite3_finalize(st);
			if (rc == SQLITE_OK)
				rc = again(&c, up->send_id.data, NULL);
		}
		else if (rc == SQLITE_OK)
			rc = again(&c, up->send_id.data, &n);
		rc = ms_end(&c, "_sync_upload_refused", rc);
	}
	if (rc == SQLITE_OK)
	{
		char	   *json = sqlite3_mprintf("{\"rows\":%d,\"set_aside\":%d}", n, blame ? n : 0);

		if (json == NULL)
			sqlite3_result_error_nomem(ctx);
		else
			sqlite3_result_text(ctx, json, -1, sqlite3_free);
	}
	else
		ms_ctx_error(&c, ctx, rc);
	ms_ctx_done(&c);
}

int
ms_sends_register(sqlite3 *db)
{
	int			flags = SQLITE_UTF8 | SQLITE_DIRECTONLY;
	int			rc = sqlite3_create_function(db, "sync_upload_refused", 2, flags, NULL, refused_func, NULL, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_upload_refused", 3, flags, NULL, refused_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_upload_refused", 4, flags, NULL, refused_func, NULL, NULL);
	return rc;
}
