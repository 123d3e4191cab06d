/*
** evolve.c - schema changes (docs/protocol.md 5.3): what a Down's let_go and
** schema do to the replica's tables, in the message's transaction, before
** its rows.
**
**   let_go     children first: every row of the table is let go of (deleted,
**              or retired while a row that stays points at it), then the
**              table is dropped, or kept as a local table when rows remain
**   schema     (alter.c) each Table matched with a table held, by id (by name when
**              either side has none): made when none is; otherwise renamed,
**              its columns renamed, dropped and added (an added column takes
**              the fill row's value on every row held: as its SQLite default
**              when an integer or text, so no row is written), rebuilt with its rows
**              when its key or a column's SQLite type changed, its indexes
**              and triggers made again, its Table stored; rows written and
**              not yet filed go up again in the new schema
**
** A table's change is applied whole or not at all, in a savepoint of its
** own.  A statement the replica cannot run is reported with the statement
** and SQLite's error (the result's "schema" member, and last_error): a
** column that cannot be dropped (something of the replica's own uses it)
** stays, no longer mirrored, and the rest of the change is applied; any
** other failure leaves the table as it was.  Renames go through names of
** our own first (_sync_moving_, _sync_col_), so that tables or columns that
** trade names in one change never collide.
**
** A table made by a change goes where no table, view or index of the
** host's own has its name (ddl.c): when one has, the table waits,
** unmade, reported and its rows refused, until the host renames its own;
** a change of a table that waits is a new Table for it to wait with.
**
** Unique indexes that travel (ddl.c makes them): an upsert that
** conflicts on one makes room, the other row taking NULL in the index's
** columns, since the server's index held when the message was written and
** that row's change is on its way (ms_unique_make_room).
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "evolver.h"

/* report: one statement that failed, in the result and in last_error */
int
ms_ev_report(evolver *e, const char *table, const char *stmt, const char *error, bool applied)
{
	ms_buf_str(&e->failed, e->nfailed++ ? "," : "");
	ms_buf_str(&e->failed, "{\"table\":");
	ms_buf_json_string(&e->failed, table, strlen(table));
	ms_buf_str(&e->failed, ",\"statement\":");
	ms_buf_json_string(&e->failed, stmt, strlen(stmt));
	ms_buf_str(&e->failed, ",\"error\":");
	ms_buf_json_string(&e->failed, error, strlen(error));
	ms_buf_printf(&e->failed, ",\"rest_applied\":%s}", applied ? "true" : "false");
	if (e->failed.oom)
		return SQLITE_NOMEM;
	return ms_state_error(e->c, "the schema change of table \"%s\" %s: %s failed: %s", table,
						  applied ? "is applied but for one statement" : "is not applied", stmt, error);
}

/* fatal: an error no savepoint absorbs */
bool
ms_ev_fatal(int rc)
{
	int			base = rc & 0xff;

	return base == SQLITE_NOMEM || base == SQLITE_IOERR || base == SQLITE_FULL ||
		base == SQLITE_CORRUPT || base == SQLITE_INTERRUPT || base == SQLITE_BUSY;
}

/*
 * run: one statement of a table's change.  On failure, the statement and
 * SQLite's error are kept (e->stmt, e->error) for the caller to report;
 * c->err is left alone, so the table's savepoint absorbs it.
 */
int
ms_ev_run(evolver *e, const char *fmt,...)
{
	va_list		ap;
	char	   *sql;
	char	   *msg = NULL;
	int			rc;

	va_start(ap, fmt);
	sql = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	if (sql == NULL)
		return SQLITE_NOMEM;
	rc = sqlite3_exec(e->c->db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK && e->stmt == NULL)
	{
		e->stmt = ms_strdup(&e->c->arena, sql);
		e->error = ms_strdup(&e->c->arena, msg ? msg : sqlite3_errstr(rc));
	}
	sqlite3_free(msg);
	sqlite3_free(sql);
	return rc;
}

/*
 * attempt: a statement whose failure the rest of the change survives (a
 * column dropped, an object of the replica's own made again): in a
 * savepoint of its own, reported when it fails.
 */
int
ms_ev_attempt(evolver *e, const char *table, const char *sql)
{
	int			rc = ms_begin(e->c, "_sync_attempt");

	if (rc != SQLITE_OK)
		return rc;
	rc = ms_ev_run(e, "%s", sql);
	if (rc == SQLITE_OK || ms_ev_fatal(rc))
		return ms_end(e->c, "_sync_attempt", rc);
	(void) ms_end(e->c, "_sync_attempt", rc);
	rc = ms_ev_report(e, table, e->stmt ? e->stmt : sql, e->error ? e->error : sqlite3_errstr(rc), true);
	e->stmt = e->error = NULL;
	return rc;
}

/* drop_ours: the noting triggers and our indexes of a table, so that nothing of ours is in the way */
int
ms_ev_drop_ours(evolver *e, const char *table)
{
	ms_ctx	   *c = e->c;
	sqlite3_stmt *st;
	ms_buf		drop = {0};
	int			rc = ms_table_untrigger(c, table);

	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "SELECT name FROM main.sqlite_master WHERE type = 'index' AND tbl_name = ?1"
						" AND substr(name, 1, 6) = '_sync_'");
	else
		return rc;
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	while ((rc = ms_step(c, st)) == SQLITE_ROW)
		ms_buf_printf(&drop, "DROP INDEX \"%w\";", (const char *) sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (rc == SQLITE_DONE)
		rc = drop.oom ? SQLITE_NOMEM : SQLITE_OK;
	if (rc == SQLITE_OK && drop.len > 0)
		rc = ms_exec(c, "%s", drop.data);
	ms_buf_free(&drop);
	return rc;
}

/* ---- tables let go of ---------------------------------------------------- */

/* let_go_table: every row let go of, then the table, or what stays of it kept as a local table's */
static int
let_go_table(evolver *e, ms_letgo *lg, ms_tbl *t)
{
	ms_ctx	   *c = e->c;
	sqlite3_stmt *st = NULL;
	ms_buf		keys = {0};
	size_t		pos = 0;
	size_t		n;
	const char *key;
	int			rc = ms_begin(c, "_sync_evolve");
	int			left = 0;

	/* the keys first, then let go: never delete under a running SELECT */
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "SELECT %s FROM %s", t->keyexpr, t->q);
	rc = ms_keys_read(c, st, rc, &keys);
	while (rc == SQLITE_OK && ms_keys_next(&keys, &pos, &key, &n))
	{
		ms_letgo_result res;

		rc = ms_let_go(lg, t, key, n, &res);
	}
	ms_buf_free(&keys);
	if (rc == SQLITE_OK)
		rc = ms_ev_drop_ours(e, t->name);
	if (rc == SQLITE_OK && (rc = ms_prepare(c, &st, "SELECT count(*) FROM %s", t->q)) == SQLITE_OK)
	{
		if ((rc = ms_step(c, st)) == SQLITE_ROW)
		{
			left = sqlite3_column_int(st, 0);
			rc = SQLITE_OK;
		}
		sqlite3_finalize(st);
	}
	if (rc == SQLITE_OK && left == 0)
		rc = ms_exec(c, "DROP TABLE %s", t->q);
	/* gone: its name is no longer the replica's */
	if (rc == SQLITE_OK && left == 0)
		rc = ms_table_unmade(c, t->name);
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "DELETE FROM _sync_tables WHERE name = %Q; DELETE FROM _sync_notes WHERE tbl = %Q;"
					 "DELETE FROM _sync_refused WHERE tbl = %Q; DELETE FROM _sync_retired WHERE tbl = %Q;"
					 "DELETE FROM _sync_named WHERE tbl = %Q",
					 t->name, t->name, t->name, t->name, t->name);
	if (rc == SQLITE_OK)
		e->let_go++;
	if (rc == SQLITE_OK || ms_ev_fatal(rc))
		return ms_end(c, "_sync_evolve", rc);
	{
		char	   *error = ms_strdup(&c->arena, c->err ? c->err : sqlite3_errstr(rc));

		sqlite3_free(c->err);
		c->err = NULL;
		(void) ms_end(c, "_sync_evolve", rc);
		return error ? ms_ev_report(e, t->name, "(letting go of the table)", error, false) : SQLITE_NOMEM;
	}
}

/* let_go: Down.let_go, children first (the deepest tables held first) */
static int
let_go(evolver *e, const Sync__Down *d)
{
	ms_ctx	   *c = e->c;
	ms_letgo   *lg;
	ms_map		names;
	int			rc = ms_letgo_open(c, &lg);

	ms_map_init(&names, false);
	for (size_t j = 0; j < d->n_let_go && rc == SQLITE_OK; j++)
		rc = ms_map_put(&c->arena, &names, d->let_go[j], strlen(d->let_go[j]), d->let_go[j]);
	for (int i = c->schema->n - 1; i >= 0 && rc == SQLITE_OK; i--)
	{
		ms_tbl	   *t = &c->schema->t[i];
		bool		named = ms_map_get(&names, t->name, strlen(t->name)) != NULL;

		/* one broken, or the host's (unmade), is only forgotten */
		if (named && t->broken == NULL)
			rc = let_go_table(e, lg, t);
		else if (named)
			rc = ms_exec(c, "DELETE FROM _sync_tables WHERE name = %Q; DELETE FROM _sync_notes WHERE tbl = %Q",
						 t->name, t->name);
	}
	ms_letgo_close(lg);
	return rc;
}

int
ms_evolve_apply(ms_ctx *c, const Sync__Down *d, ms_buf *out)
{
	evolver		e;
	int			rc = SQLITE_OK;

	if (d->n_schema == 0 && d->n_let_go == 0)
		return SQLITE_OK;
	memset(&e, 0, sizeof e);
	e.c = c;
	if (d->n_let_go > 0)
		rc = let_go(&e, d);
	if (rc == SQLITE_OK && d->n_let_go > 0)
		rc = ms_schema_load(c);
	if (rc == SQLITE_OK && d->n_schema > 0)
		rc = ms_ev_schema_changes(&e, d);
	/* the message's rows are read with the new schema */
	if (rc == SQLITE_OK)
		rc = ms_schema_load(c);
	ms_buf_printf(out, ",\"schema\":{\"changed\":%d,\"let_go\":%d,\"failed\":[%s]}",
				  e.changed, e.let_go, e.failed.len ? e.failed.data : "");
	ms_buf_free(&e.failed);
	return rc == SQLITE_OK && out->oom ? SQLITE_NOMEM : rc;
}

/* ---- unique indexes: making room ----------------------------------------- */

int
ms_unique_make_room(ms_ctx *c, const ms_tbl *t, const ms_val *vals, const char *key, size_t keylen,
					bool *made)
{
	int			rc = SQLITE_OK;

	*made = false;
	/* a record may be the replica's own: never overwritten so */
	if (t->record)
		return SQLITE_OK;
	for (size_t u = 0; u < t->msg->n_unique && rc == SQLITE_OK; u++)
	{
		const Sync__Unique *ui = t->msg->unique[u];
		ms_buf		sql = {0};
		sqlite3_stmt *st = NULL;
		int		   *cols = ms_alloc(&c->arena, sizeof(int) * (ui->n_columns + 1));
		bool		any_null = false;

		if (cols == NULL)
			return SQLITE_NOMEM;
		for (size_t j = 0; j < ui->n_columns; j++)
		{
			cols[j] = ms_tbl_column(t, ui->columns[j], strlen(ui->columns[j]));
			any_null |= cols[j] < 0 || vals[cols[j]].type == SQLITE_NULL;
		}
		/* NULLs never collide */
		if (any_null)
			continue;
		ms_buf_printf(&sql, "UPDATE %s SET ", t->q);
		for (size_t j = 0; j < ui->n_columns; j++)
			ms_buf_printf(&sql, "%s%s = NULL", j ? ", " : "", t->cols[cols[j]].q);
		ms_buf_str(&sql, " WHERE ");
		for (size_t j = 0; j < ui->n_columns; j++)
			ms_buf_printf(&sql, "%s = ?%d AND ", t->cols[cols[j]].q, (int) j + 1);
		ms_buf_printf(&sql, "%s <> ?%d", t->keyexpr, (int) ui->n_columns + 1);
		rc = sql.oom ? SQLITE_NOMEM : ms_prepare(c, &st, "%s", sql.data);
		ms_buf_free(&sql);
		for (size_t j = 0; j < ui->n_columns && rc == SQLITE_OK; j++)
		{
			const ms_val *v = &vals[cols[j]];

			if (v->type == SQLITE_INTEGER)
				sqlite3_bind_int64(st, (int) j + 1, v->i);
			else if (v->type == SQLITE_FLOAT)
				sqlite3_bind_double(st, (int) j + 1, v->d);
			else if (v->type == SQLITE_TEXT)
				sqlite3_bind_text64(st, (int) j + 1, v->p, v->n, SQLITE_STATIC, SQLITE_UTF8);
			else
				sqlite3_bind_blob64(st, (int) j + 1, v->p, v->n, SQLITE_STATIC);
		}
		if (rc == SQLITE_OK)
		{
			sqlite3_bind_text(st, (int) ui->n_columns + 1, key, (int) keylen, SQLITE_STATIC);
			rc = ms_done(c, st);
			*made |= sqlite3_changes(c->db) > 0;
		}
		sqlite3_finalize(st);
	}
	return rc;
}

/* ---- rows the server did not file ---------------------------------------- */

int
ms_evolve_again(ms_ctx *c, const Sync__Filed *f)
{
	sqlite3_stmt *st;
	ms_buf		key = {0};
	int			rc = ms_prepare(c, &st, "UPDATE _sync_notes SET send_id = NULL, sent_at = NULL"
								" WHERE tbl = ?1 AND key = ?2 AND send_id = ?3");

	for (size_t i = 0; i < f->n_again && rc == SQLITE_OK; i++)
	{
		const Sync__Refusal *a = f->again[i];

		key.len = 0;
		for (size_t p = 0; p < a->key->n_parts; p++)
			ms_key_append(&key, a->key->parts[p], strlen(a->key->parts[p]));
		if (key.oom)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		sqlite3_bind_text(st, 1, a->table, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, key.data, (int) key.len, SQLITE_STATIC);
		sqlite3_bind_blob(st, 3, f->send_id.data, MS_SEND_ID_BYTES, SQLITE_STATIC);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	ms_buf_free(&key);
	return rc;
}
