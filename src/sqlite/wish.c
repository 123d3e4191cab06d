/*
** wish.c - the server's wishes for the replica's setting rows
** (docs/protocol.md 5.4).
**
** A setting table is a record of one row per replica, keyed by its origin
** alone, that the replica writes.  A Down may carry wishes (field 5): each
** is kept in _sync_wishes by its id, once however often it comes (a message
** sent again), and a newer wish for the same row supersedes one still
** pending.  A wish for a table that is no setting here, or for a row that
** is not the replica's own, changes nothing of the replica's rows: it is
** declined, and says why.
**
** Wishes are decided when the next upload is put together (sync_upload),
** before its rows are gathered: an applied wish is the replica's own write,
** noted by the table's triggers, and goes up in that very upload as any
** write does.  apply = always: the row takes the wish's values (made when
** the replica has none).  apply = if_unchanged: only while the row still
** holds, in the columns the wish names, what the server last filed of them
** (the wish's expected row; none: while the replica has no row); otherwise
** the replica keeps its own, and the wish is declined.  A row a local
** constraint refuses declines the wish too, with SQLite's reason.
**
** Every upload carries the fates not yet answered (Up field 15), until a
** Filed answer for an upload that carried them (ms_wish_filed).  Fates alone
** make an upload go only when one was never carried, or was carried
** resend_after ago (its answer lost): else an agent filed the same fates a
** thousand times a pass while their answer was on its way.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>
#include <strings.h>

/* the columns one wish may name */
#define MS_WISH_COLUMNS 256

static const char *const wishes_ddl =
"CREATE TABLE IF NOT EXISTS _sync_wishes("
"  id INTEGER PRIMARY KEY, tbl TEXT NOT NULL, key TEXT NOT NULL,"
"  vals TEXT NOT NULL, apply TEXT NOT NULL, expected TEXT,"
"  fate TEXT NOT NULL DEFAULT 'pending', why TEXT,"
"  got_at INTEGER NOT NULL, decided_at INTEGER,"
"  send_id BLOB, answered INTEGER NOT NULL DEFAULT 0, carried_at INTEGER);"
"CREATE INDEX IF NOT EXISTS _sync_wishes_row ON _sync_wishes(tbl, key) WHERE fate = 'pending';";

/* whether _sync_wishes exists */
static int
exists(ms_ctx *c, bool *yes)
{
	/* in the schema SQLite holds: a scan of sqlite_master was a fifteenth of an upload */
	return ms_has_column(c, "_sync_wishes", NULL, yes);
}

int
ms_wishes_ensure(ms_ctx *c)
{
	bool		yes;
	int			rc = exists(c, &yes);

	return rc != SQLITE_OK || yes ? rc : ms_exec(c, "%s", wishes_ddl);
}

/* ---- receiving: sync_apply --------------------------------------------- */

/* why a wish is none of this replica's setting rows; NULL when it is */
static char *
not_ours(ms_ctx *c, const Sync__Wish *w)
{
	const ms_tbl *t = ms_schema_find(c, w->table);

	if (t == NULL || !t->setting || t->origin < 0)
		return sqlite3_mprintf("the replica holds no setting table \"%s\"", w->table);
	if (t->broken)
		return sqlite3_mprintf("table \"%s\" is not as the snapshot made it: %s", w->table, t->broken);
	if (!c->st.has_replica || strcasecmp(w->key->parts[0], c->st.replica_text) != 0)
		return sqlite3_mprintf("the row named (%.40s) is not this replica's own", w->key->parts[0]);
	return NULL;
}

int
ms_wish_receive(ms_ctx *c, const Sync__Down *d)
{
	sqlite3_stmt *ins = NULL;
	sqlite3_stmt *sup = NULL;
	int			rc = SQLITE_OK;

	if (d->n_wishes == 0)
		return SQLITE_OK;
	rc = ms_wishes_ensure(c);
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &ins, "INSERT OR IGNORE INTO _sync_wishes(id, tbl, key, vals, apply, expected, fate, why,"
						" got_at, decided_at) VALUES (?1, ?2, lower(?3), ?4, ?5, nullif(?6, ''),"
						" CASE WHEN ?7 IS NULL THEN 'pending' ELSE 'declined' END, ?7, ?8,"
						" CASE WHEN ?7 IS NULL THEN NULL ELSE ?8 END)");
	/* a newer wish for the row: the pending ones before it are superseded */
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &sup, "UPDATE _sync_wishes SET fate = 'superseded', decided_at = ?3,"
						" why = 'wish ' || ?2 || ' came for the row before this one was applied'"
						" WHERE fate = 'pending' AND id < ?2 AND (tbl, key) = (SELECT tbl, key FROM _sync_wishes WHERE id = ?1"
						" AND fate = 'pending')");
	for (size_t i = 0; rc == SQLITE_OK && i < d->n_wishes; i++)
	{
		const Sync__Wish *w = d->wishes[i];
		char	   *why = not_ours(c, w);

		if (w->id > (uint64_t) INT64_MAX)
		{
			sqlite3_free(why);
			continue;
		}
		sqlite3_bind_int64(ins, 1, (sqlite3_int64) w->id);
		sqlite3_bind_text(ins, 2, w->table, -1, SQLITE_STATIC);
		sqlite3_bind_text(ins, 3, w->key->parts[0], -1, SQLITE_STATIC);
		sqlite3_bind_text(ins, 4, w->values, -1, SQLITE_STATIC);
		sqlite3_bind_text(ins, 5, w->apply, -1, SQLITE_STATIC);
		sqlite3_bind_text(ins, 6, w->expected, -1, SQLITE_STATIC);
		if (why)
			sqlite3_bind_text(ins, 7, why, -1, SQLITE_TRANSIENT);
		else
			sqlite3_bind_null(ins, 7);
		sqlite3_bind_int64(ins, 8, c->now);
		rc = ms_done(c, ins);
		sqlite3_free(why);
		if (rc == SQLITE_OK && sqlite3_changes(c->db) > 0)
		{
			sqlite3_bind_int64(sup, 1, (sqlite3_int64) w->id);
			sqlite3_bind_int64(sup, 2, (sqlite3_int64) w->id);
			sqlite3_bind_int64(sup, 3, c->now);
			rc = ms_done(c, sup);
		}
	}
	sqlite3_finalize(ins);
	sqlite3_finalize(sup);
	return rc;
}

/* ---- deciding: sync_upload --------------------------------------------- */

typedef struct wish
{
	sqlite3_int64 id;
	const char *tbl;
	const char *key;
	const char *vals;
	const char *apply;
	const char *expected;		/* NULL: the server filed no row */
} wish;

/* the column of t named name, one a wish may set; -1 when none */
static int
settable(const ms_tbl *t, const char *name)
{
	if (strchr(name, '"') != NULL)
		return -1;
	for (int i = 0; i < t->ncols; i++)
		if (strcmp(t->cols[i].name, name) == 0)
			return i == t->origin || t->cols[i].retired ? -1 : i;
	return -1;
}

/*
 * columns: the columns a JSON object names, each a column of t a wish may
 * set, into cols (*n of them); *why when it names another or is no object
 */
static int
columns(ms_ctx *c, const ms_tbl *t, const char *json, int *cols, int *n, char **why)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "SELECT key FROM json_each(CASE WHEN json_valid(?1) AND json_type(?1) = 'object' THEN ?1 ELSE '{}' END)");

	*n = 0;
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
	while ((rc = ms_step(c, st)) == SQLITE_ROW && *why == NULL)
	{
		const char *name = (const char *) sqlite3_column_text(st, 0);
		int			i = name ? settable(t, name) : -1;

		if (i < 0 || *n >= MS_WISH_COLUMNS)
			*why = sqlite3_mprintf("table \"%s\" has no column \"%.60s\" the replica writes", t->name, name ? name : "");
		else
			cols[(*n)++] = i;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return rc;
	if (*why == NULL && *n == 0)
		*why = sqlite3_mprintf("the wish names no column (its values are no JSON object of columns)");
	return SQLITE_OK;
}

/* the value of column col of a JSON object: JSON text for a json column, else the SQL value */
static char *
value_of(const ms_tbl *t, int col, int param)
{
	return sqlite3_mprintf("(?%d %s '$.\"%q\"')", param, t->cols[col].json ? "->" : "->>", t->cols[col].name);
}

/* unchanged: the replica's row still holds what the server last filed of these columns */
static int
unchanged(ms_ctx *c, const ms_tbl *t, const wish *w, bool *yes, char **why)
{
	ms_buf		sql = {0};
	sqlite3_stmt *st = NULL;
	int			cols[MS_WISH_COLUMNS];
	int			n = 0;
	int			rc = SQLITE_OK;

	*yes = false;
	if (w->expected != NULL)
	{
		rc = columns(c, t, w->expected, cols, &n, why);
		if (rc != SQLITE_OK || *why != NULL)
			return rc;
	}
	/* the comparison goes in the select list: a row that differs is counted, not skipped */
	ms_buf_str(&sql, "SELECT count(*), coalesce(min(1");
	for (int i = 0; i < n; i++)
	{
		char	   *v = value_of(t, cols[i], 2);

		ms_buf_printf(&sql, " AND %s IS %s", t->cols[cols[i]].q, v ? v : "NULL");
		if (v == NULL)
			sql.oom = true;
		sqlite3_free(v);
	}
	ms_buf_printf(&sql, "), 0) FROM %s WHERE %s = ?1", t->q, t->cols[t->origin].q);
	rc = sql.oom ? SQLITE_NOMEM : ms_prepare(c, &st, "%s", sql.data);
	ms_buf_free(&sql);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(st, 1, c->st.replica_text, -1, SQLITE_STATIC);
	if (w->expected)
		sqlite3_bind_text(st, 2, w->expected, -1, SQLITE_STATIC);
	rc = ms_step(c, st);
	if (rc == SQLITE_ROW)
	{
		bool		row = sqlite3_column_int64(st, 0) > 0;

		*yes = w->expected == NULL ? !row : row && sqlite3_column_int(st, 1) == 1;
		if (!*yes)
			*why = sqlite3_mprintf("%s", w->expected == NULL ? "the replica made its row since: it keeps its own"
								   : row ? "the replica changed its row since the server last filed it: it keeps its own"
								   : "the replica has no such row any more: it keeps it so");
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

/* write: the wish's values into the replica's row, made when it has none; a local constraint declines it */
static int
write_row(ms_ctx *c, const ms_tbl *t, const wish *w, const int *cols, int n, char **why)
{
	ms_buf		sql = {0};
	sqlite3_stmt *st = NULL;
	int			rc;

	ms_buf_printf(&sql, "INSERT INTO %s(%s", t->q, t->cols[t->origin].q);
	for (int i = 0; i < n; i++)
		ms_buf_printf(&sql, ", %s", t->cols[cols[i]].q);
	ms_buf_str(&sql, ") VALUES (?1");
	for (int i = 0; i < n; i++)
	{
		char	   *v = value_of(t, cols[i], 2);

		ms_buf_printf(&sql, ", %s", v ? v : "NULL");
		sqlite3_free(v);
	}
	ms_buf_printf(&sql, ") ON CONFLICT(%s) DO UPDATE SET ", t->cols[t->origin].q);
	for (int i = 0; i < n; i++)
		ms_buf_printf(&sql, "%s%s = excluded.%s", i ? ", " : "", t->cols[cols[i]].q, t->cols[cols[i]].q);
	if (sql.oom)
	{
		ms_buf_free(&sql);
		return SQLITE_NOMEM;
	}
	rc = ms_prepare(c, &st, "%s", sql.data);
	ms_buf_free(&sql);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(st, 1, c->st.replica_text, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, w->vals, -1, SQLITE_STATIC);
	rc = ms_begin(c, "_sync_wish");
	if (rc == SQLITE_OK)
	{
		int			step = sqlite3_step(st);

		if ((step & 0xff) == SQLITE_CONSTRAINT || step == SQLITE_MISMATCH)
		{
			*why = sqlite3_mprintf("the replica's table refused the values: %s", sqlite3_errmsg(c->db));
			sqlite3_reset(st);
			/* undone, and the wish declined: not the upload's failure */
			rc = ms_end(c, "_sync_wish", step);
			if (rc == step)
				rc = SQLITE_OK;
		}
		else
			rc = ms_end(c, "_sync_wish", step == SQLITE_DONE ? SQLITE_OK : ms_dberr(c, step));
	}
	sqlite3_finalize(st);
	return rc;
}

/* decide: apply one pending wish, or keep the replica's own row; its fate and why */
static int
decide(ms_ctx *c, const wish *w, const char **fate, char **why)
{
	const ms_tbl *t = ms_schema_find(c, w->tbl);
	int			cols[MS_WISH_COLUMNS];
	int			n = 0;
	bool		ok = true;
	int			rc = SQLITE_OK;

	*fate = "declined";
	if (t == NULL || !t->setting || t->origin < 0 || t->broken)
	{
		*why = sqlite3_mprintf("the replica holds no setting table \"%s\" it can write", w->tbl);
		return SQLITE_OK;
	}
	rc = columns(c, t, w->vals, cols, &n, why);
	if (rc == SQLITE_OK && *why == NULL && strcmp(w->apply, "if_unchanged") == 0)
		rc = unchanged(c, t, w, &ok, why);
	if (rc == SQLITE_OK && *why == NULL && ok)
		rc = write_row(c, t, w, cols, n, why);
	if (rc == SQLITE_OK && *why == NULL)
		*fate = "applied";
	return rc;
}

/* decide_pending: every pending wish, in the order they came */
static int
decide_pending(ms_ctx *c)
{
	sqlite3_stmt *st = NULL;
	sqlite3_stmt *set = NULL;
	int			rc = ms_prepare(c, &st, "SELECT id, tbl, key, vals, apply, expected FROM _sync_wishes"
								" WHERE fate = 'pending' ORDER BY id");

	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &set, "UPDATE _sync_wishes SET fate = ?2, why = ?3, decided_at = ?4 WHERE id = ?1");
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		wish		w;
		const char *fate = NULL;
		char	   *why = NULL;

		w.id = sqlite3_column_int64(st, 0);
		w.tbl = (const char *) sqlite3_column_text(st, 1);
		w.key = (const char *) sqlite3_column_text(st, 2);
		w.vals = (const char *) sqlite3_column_text(st, 3);
		w.apply = (const char *) sqlite3_column_text(st, 4);
		w.expected = (const char *) sqlite3_column_text(st, 5);
		if (w.tbl == NULL || w.key == NULL || w.vals == NULL || w.apply == NULL)
			rc = ms_fail(c, SQLITE_CORRUPT, "wish %lld is stored without its table, key, values or apply", (long long) w.id);
		/* stored by ms_wish_receive, which declined a row of another's: checked again all the same */
		else if (!c->st.has_replica || strcasecmp(w.key, c->st.replica_text) != 0)
		{
			fate = "declined";
			why = sqlite3_mprintf("the row named (%.40s) is not this replica's own", w.key);
		}
		else
			rc = decide(c, &w, &fate, &why);
		if (rc == SQLITE_OK)
		{
			sqlite3_bind_int64(set, 1, w.id);
			sqlite3_bind_text(set, 2, fate, -1, SQLITE_STATIC);
			if (why)
				sqlite3_bind_text(set, 3, why, -1, SQLITE_TRANSIENT);
			else
				sqlite3_bind_null(set, 3);
			sqlite3_bind_int64(set, 4, c->now);
			rc = ms_done(c, set);
		}
		sqlite3_free(why);
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	sqlite3_finalize(set);
	return rc;
}

/* carried_column: a file of an earlier build gains when each fate was last carried */
static int
carried_column(ms_ctx *c)
{
	bool		has;
	int			rc = ms_has_column(c, "_sync_wishes", "carried_at", &has);

	if (rc != SQLITE_OK || has)
		return rc;
	return ms_exec(c, "ALTER TABLE _sync_wishes ADD COLUMN carried_at INTEGER");
}

/*
 * carry: the fates not yet answered into up; *due: whether one was never
 * carried, or last carried resend_after ago
 */
static int
carry(ms_ctx *c, Sync__Up *up, int64_t resend_after, bool *due)
{
	sqlite3_stmt *st = NULL;
	size_t		cap = 0;
	int			rc = ms_prepare(c, &st, "SELECT id, fate, coalesce(why, ''),"
								" send_id IS NULL OR carried_at IS NULL OR carried_at <= ?1 FROM _sync_wishes"
								" WHERE fate <> 'pending' AND answered = 0 ORDER BY id LIMIT %d", MS_WISH_FATES_MAX);

	if (rc == SQLITE_OK)
		sqlite3_bind_int64(st, 1, c->now - resend_after);
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		Sync__WishFate *f = ms_alloc(&c->arena, sizeof *f);
		const char *why = (const char *) sqlite3_column_text(st, 2);

		rc = SQLITE_NOMEM;
		if (f == NULL)
			break;
		sync__wish_fate__init(f);
		f->id = (uint64_t) sqlite3_column_int64(st, 0);
		f->fate = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 1));
		/* a reason is short on the wire: the server's column says as much as the replica's */
		f->why = ms_printf(&c->arena, "%.*s", MS_REASON_MAX - 1, why ? why : "");
		if (f->fate == NULL || f->why == NULL)
			break;
		if (up->n_wish_fates == cap)
		{
			Sync__WishFate **more = ms_alloc(&c->arena, sizeof(*more) * (cap ? cap * 2 : 16));

			if (more == NULL)
				break;
			if (cap)
				memcpy(more, up->wish_fates, sizeof(*more) * cap);
			up->wish_fates = more;
			cap = cap ? cap * 2 : 16;
		}
		up->wish_fates[up->n_wish_fates++] = f;
		if (sqlite3_column_int(st, 3))
			*due = true;
		rc = SQLITE_OK;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	return rc;
}

int
ms_wish_decide(ms_ctx *c, Sync__Up *up, int64_t resend_after, bool *due)
{
	bool		yes;
	int			rc = exists(c, &yes);

	*due = false;
	if (rc != SQLITE_OK || !yes)
		return rc;
	rc = carried_column(c);
	if (rc == SQLITE_OK)
		rc = decide_pending(c);
	if (rc == SQLITE_OK)
		rc = carry(c, up, resend_after, due);
	return rc;
}

int
ms_wish_carried(ms_ctx *c, const Sync__Up *up, const uint8_t send_id[MS_SEND_ID_BYTES])
{
	sqlite3_stmt *stamp = NULL;
	int			rc;

	if (up->n_wish_fates == 0)
		return SQLITE_OK;
	rc = ms_prepare(c, &stamp, "UPDATE _sync_wishes SET send_id = ?2, carried_at = ?3 WHERE id = ?1");
	for (size_t i = 0; rc == SQLITE_OK && i < up->n_wish_fates; i++)
	{
		sqlite3_bind_int64(stamp, 1, (sqlite3_int64) up->wish_fates[i]->id);
		sqlite3_bind_blob(stamp, 2, send_id, MS_SEND_ID_BYTES, SQLITE_STATIC);
		sqlite3_bind_int64(stamp, 3, c->now);
		rc = ms_done(c, stamp);
	}
	sqlite3_finalize(stamp);
	return rc;
}

int
ms_wish_filed(ms_ctx *c, const uint8_t send_id[MS_SEND_ID_BYTES])
{
	sqlite3_stmt *st;
	bool		yes;
	int			rc = exists(c, &yes);

	if (rc != SQLITE_OK || !yes)
		return rc;
	rc = ms_prepare(c, &st, "UPDATE _sync_wishes SET answered = 1 WHERE send_id = ?1 AND fate <> 'pending'");
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_blob(st, 1, send_id, MS_SEND_ID_BYTES, SQLITE_STATIC);
	rc = ms_done(c, st);
	sqlite3_finalize(st);
	return rc;
}

/* ---- sync_progress ------------------------------------------------------ */

int
ms_wish_progress(ms_ctx *c, const char *table, ms_buf *out)
{
	sqlite3_stmt *st;
	bool		yes;
	int			n = 0;
	int			rc = exists(c, &yes);

	if (rc != SQLITE_OK || !yes)
		return rc;
	/* the newest few, newest first: what became of what the server last wished */
	rc = ms_prepare(c, &st, "SELECT id, fate, why, apply, vals, got_at, decided_at, answered FROM _sync_wishes"
					" WHERE tbl = ?1 ORDER BY id DESC LIMIT 20");
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	while ((rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *fate = (const char *) sqlite3_column_text(st, 1);
		const char *why = (const char *) sqlite3_column_text(st, 2);
		const char *apply = (const char *) sqlite3_column_text(st, 3);
		const char *vals = (const char *) sqlite3_column_text(st, 4);

		ms_buf_str(out, n++ ? "," : ",\"wishes\":[");
		ms_buf_printf(out, "{\"id\":%lld,\"fate\":", (long long) sqlite3_column_int64(st, 0));
		ms_buf_json_string(out, fate ? fate : "", fate ? strlen(fate) : 0);
		ms_buf_str(out, ",\"why\":");
		if (why)
			ms_buf_json_string(out, why, strlen(why));
		else
			ms_buf_str(out, "null");
		ms_buf_str(out, ",\"apply\":");
		ms_buf_json_string(out, apply ? apply : "", apply ? strlen(apply) : 0);
		ms_buf_str(out, ",\"values\":");
		ms_buf_json_string(out, vals ? vals : "", vals ? strlen(vals) : 0);
		ms_buf_printf(out, ",\"got_at\":%lld,\"decided_at\":", (long long) sqlite3_column_int64(st, 5));
		if (sqlite3_column_type(st, 6) == SQLITE_NULL)
			ms_buf_str(out, "null");
		else
			ms_buf_printf(out, "%lld", (long long) sqlite3_column_int64(st, 6));
		ms_buf_printf(out, ",\"answered\":%s}", sqlite3_column_int(st, 7) ? "true" : "false");
	}
	if (n > 0)
		ms_buf_byte(out, ']');
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}
