/*
** tables.c - a snapshot's schema applied (ms_schema_begin), and the tables
** that waited for a name the host had made once it is free (ms_schema_host).
**
** The host's tables are the host's.  The replica alters, rebuilds, fills
** and empties only a table it made (_sync_made: every table it created,
** followed through renames, marked gone once it finds it dropped).  A
** table, view or index of the host's own that has the name of a table of
** the server's is never touched: the table is stored, unmade, its rows
** refused with the reason (so the server hears of it), and made at the
** first message after the host renamed its own.  A table the replica made
** stays the replica's whatever the host did to it since (an index, a
** trigger, a column of its own): those are kept, through a rebuild too.
**
** A table the new schema no longer names stops being mirrored: its triggers
** and notes go, its rows stay.  Each table is made in a savepoint of its own
** (ddl.c): one that fails is not held, the others are.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

/*
 * rearm_if_changed: a table whose stored Table is not m: the notes of rows
 * written and sent go again, in m's schema (the server files none of a
 * send made in another: docs/protocol.md 5.3).  read and rearm: prepared
 * by the caller, once.
 */
static int
rearm_if_changed(ms_ctx *c, Sync__Table *m, sqlite3_stmt *read, sqlite3_stmt *rearm)
{
	size_t		n = sync__table__get_packed_size(m);
	uint8_t    *buf = sqlite3_malloc64(n ? n : 1);
	bool		same = false;
	int			rc;

	if (buf == NULL)
		return SQLITE_NOMEM;
	sync__table__pack(m, buf);
	sqlite3_bind_text(read, 1, m->name, -1, SQLITE_STATIC);
	rc = ms_step(c, read);
	if (rc == SQLITE_ROW)
		same = (size_t) sqlite3_column_bytes(read, 0) == n &&
			(n == 0 || memcmp(sqlite3_column_blob(read, 0), buf, n) == 0);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_reset(read);
	sqlite3_free(buf);
	if (rc == SQLITE_OK && !same)
	{
		sqlite3_bind_text(rearm, 1, m->name, -1, SQLITE_STATIC);
		rc = ms_done(c, rearm);
	}
	return rc;
}

/* each_name: a statement of one table name (?1), run for each name of a list */
static int
each_name(ms_ctx *c, const char *sql, const char **list, int n)
{
	sqlite3_stmt *st;
	int			rc = n > 0 ? ms_prepare(c, &st, "%s", sql) : SQLITE_OK;

	for (int i = 0; i < n && rc == SQLITE_OK; i++)
	{
		sqlite3_bind_text(st, 1, list[i], -1, SQLITE_STATIC);
		rc = ms_done(c, st);
	}
	if (n > 0)
		sqlite3_finalize(st);
	return rc;
}

int
ms_schema_begin(ms_ctx *c, Sync__Begin *b)
{
	ms_schema  *old = c->schema;
	ms_map		held;			/* the names stored so far, as SQLite compares them */
	sqlite3_stmt *read = NULL;
	sqlite3_stmt *rearm = NULL;
	const char **quiet = NULL;
	int			nquiet = 0;
	int			rc = SQLITE_OK;

	ms_map_init(&held, true);
	/* rows written in a table whose schema changes go up again, in the new one */
	rc = ms_prepare(c, &read, "SELECT schema FROM _sync_tables WHERE name = ?1");
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &rearm, "UPDATE _sync_notes SET send_id = NULL, sent_at = NULL WHERE tbl = ?1");
	for (size_t i = 0; i < b->n_schema && rc == SQLITE_OK; i++)
		rc = rearm_if_changed(c, b->schema[i], read, rearm);
	sqlite3_finalize(read);
	sqlite3_finalize(rearm);
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "DELETE FROM _sync_tables");
	/* each table of this one is made as it says; what is already so is kept */
	for (size_t i = 0; i < b->n_schema && rc == SQLITE_OK; i++)
	{
		Sync__Table *m = b->schema[i];
		const Sync__Table *clash = ms_map_get(&held, m->name, strlen(m->name));
		char	   *why = ms_why_not_held(c, m, clash ? clash->name : NULL);
		char	   *host = NULL;
		ms_tbl		t;

		if (why != NULL)
		{
			rc = ms_state_error(c, "%s", why);
			continue;
		}
		rc = ms_begin(c, "_sync_table");
		if (rc != SQLITE_OK)
			break;
		rc = ms_tbl_build(c, m, &t);
		if (rc == SQLITE_OK)
			rc = ms_table_take(c, &t, &host);
		if (rc == SQLITE_OK && host == NULL)
			rc = ms_table_indexes(c, &t);
		if (rc == SQLITE_OK && host == NULL)
			rc = ms_table_triggers(c, &t);
		if (rc == SQLITE_OK)
			rc = ms_table_store(c, m, (int) i);
		if (rc == SQLITE_OK)
			rc = ms_map_put(&c->arena, &held, m->name, strlen(m->name), m);
		/* the host's own: stored, unmade; its rows refused, saying why */
		if (rc == SQLITE_OK && host != NULL)
			rc = ms_state_error(c, "table \"%s\" is not held: %s", m->name, host);
		if (ms_table_failure(rc))
		{
			char	   *msg = ms_printf(&c->arena, "table \"%s\" cannot be held: %s", m->name,
										c->err ? c->err : sqlite3_errstr(rc));
			int			failed = rc;

			sqlite3_free(c->err);
			c->err = NULL;
			rc = ms_end(c, "_sync_table", rc);
			if (rc == failed)	/* undone as it should: the table is not held */
				rc = msg ? ms_state_error(c, "%s", msg) : SQLITE_NOMEM;
		}
		else
			rc = ms_end(c, "_sync_table", rc);
	}
	/* the tables of the last schema this one does not hold stop being mirrored */
	for (int i = 0; old && i < old->n && rc == SQLITE_OK; i++)
		if (ms_map_get(&held, old->t[i].name, strlen(old->t[i].name)) == NULL && !old->t[i].unmade)
			rc = ms_table_untrigger(c, old->t[i].name);
	/* what belonged to tables no longer mirrored goes; refusals start over */
	if (rc == SQLITE_OK)
		rc = ms_exec(c,
					 "DELETE FROM _sync_notes WHERE tbl NOT IN (SELECT name FROM _sync_tables);"
					 "DELETE FROM _sync_retired WHERE tbl NOT IN (SELECT name FROM _sync_tables);"
					 "DELETE FROM _sync_named;"
					 "DELETE FROM _sync_refused;");
	if (rc == SQLITE_OK)
		rc = ms_schema_load(c);
	/* and the notes of a table the replica no longer writes */
	if (rc == SQLITE_OK && (quiet = ms_alloc(&c->arena, sizeof(char *) * (size_t) (c->schema->n + 1))) == NULL)
		rc = SQLITE_NOMEM;
	for (int i = 0; rc == SQLITE_OK && i < c->schema->n; i++)
		if (!c->schema->t[i].noted)
			quiet[nquiet++] = c->schema->t[i].name;
	return rc == SQLITE_OK ? each_name(c, "DELETE FROM _sync_notes WHERE tbl = ?1", quiet, nquiet) : rc;
}

int
ms_schema_host(ms_ctx *c, int *made)
{
	ms_schema  *s = c->schema;
	const char **gone;
	int			ngone = 0;
	int			rc = SQLITE_OK;

	*made = 0;
	gone = ms_alloc(&c->arena, sizeof(char *) * (size_t) (s->n + 1));
	if (gone == NULL)
		return SQLITE_NOMEM;
	for (int i = 0; i < s->n && rc == SQLITE_OK; i++)
	{
		ms_tbl	   *t = &s->t[i];
		char	   *host = NULL;

		/* the replica's table, dropped by the host: the name is no longer the replica's to take */
		if (t->absent)
			gone[ngone++] = t->name;
		if (!t->unmade || t->host)
			continue;
		/* a table that waited for a name the host had: made now that it is free */
		rc = ms_begin(c, "_sync_table");
		if (rc != SQLITE_OK)
			break;
		rc = ms_table_take(c, t, &host);
		if (rc == SQLITE_OK && host == NULL)
			rc = ms_table_indexes(c, t);
		if (rc == SQLITE_OK && host == NULL)
			rc = ms_table_triggers(c, t);
		if (rc == SQLITE_OK && host == NULL)
		{
			(*made)++;
			rc = ms_state_error(c, "table \"%s\" is made: the host's own of its name is gone", t->name);
		}
		if (ms_table_failure(rc))
		{
			char	   *msg = ms_printf(&c->arena, "table \"%s\" cannot be made: %s", t->name,
										c->err ? c->err : sqlite3_errstr(rc));
			int			failed = rc;

			sqlite3_free(c->err);
			c->err = NULL;
			rc = ms_end(c, "_sync_table", rc);
			if (rc == failed)
				rc = msg ? ms_state_error(c, "%s", msg) : SQLITE_NOMEM;
		}
		else
			rc = ms_end(c, "_sync_table", rc);
	}
	if (rc == SQLITE_OK && ngone > 0)
		rc = each_name(c, "UPDATE _sync_made SET gone = 1 WHERE name = ?1", gone, ngone);
	if (rc == SQLITE_OK && *made > 0)
		rc = ms_schema_load(c);
	return rc;
}
