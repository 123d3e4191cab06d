/*
** backfill.c - rows already in a file before its first snapshot (docs/design.md 4.9)
**
** A file that never applied a snapshot may already hold a mirrored table
** of the application's: made by the app with the schema the server
** declares (its migrations ran before the replica was set up), or made by
** an earlier provisioning whose _sync_ tables were lost.  Its rows are the
** device's, not the server's: a snapshot's end must never delete them.
**
** At the first snapshot only, a table of the host's of a declared name is
** taken as the replica's when it fits the declaration: its primary key is
** the declared key in order, every declared column is there with the same
** SQLite affinity, and none of its own columns would make the replica's
** inserts fail (NOT NULL without a default).  Any other table of that name
** stays the host's, untouched (schema.c, "the host's tables are the host's").
** After a first snapshot nothing is taken: a table the app makes later is
** its own.
**
** A table taken so is backfilled once its noting triggers exist:
**   - a table the replica writes (a record, a catalog with owned columns):
**     every row is noted, as if written now, and goes up to be filed as any
**     write (refused with its reason, and set aside, when it must be);
**   - a record table's rows are also named in the open snapshot, so that
**     its end lets none of them go, whatever their origin, before the
**     server has said what it makes of them;
**   - a catalog's rows are named only as the snapshot sends them: each one
**     sent replaces the file's copy (its owned columns excepted, as always),
**     and the snapshot's end lets go of every one it did not send.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>
#include <strings.h>

/* whether s holds w (upper-case ASCII), ignoring ASCII case: strcasestr is not everywhere */
static bool
has(const char *s, const char *w)
{
	size_t		n = strlen(w);

	for (; *s; s++)
		if (sqlite3_strnicmp(s, w, (int) n) == 0)
			return true;
	return false;
}

/* the affinity SQLite gives a declared type (datatype3.html, 3.1) */
static char
affinity(const char *type)
{
	if (type == NULL || type[0] == '\0')
		return 'b';
	if (has(type, "INT"))
		return 'i';
	if (has(type, "CHAR") || has(type, "CLOB") || has(type, "TEXT"))
		return 't';
	if (has(type, "BLOB"))
		return 'b';
	if (has(type, "REAL") || has(type, "FLOA") || has(type, "DOUB"))
		return 'r';
	return 'n';
}

int
ms_backfill_fits(ms_ctx *c, const ms_tbl *t, bool *fits)
{
	sqlite3_stmt *st = NULL;
	int			found = 0;
	int			npk = 0;
	int			rc = ms_prepare(c, &st, "SELECT name, type, pk, \"notnull\", dflt_value IS NOT NULL"
								" FROM pragma_table_info(?1)");

	*fits = true;
	if (rc == SQLITE_OK)
		sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *name = (const char *) sqlite3_column_text(st, 0);
		const char *type = (const char *) sqlite3_column_text(st, 1);
		int			pk = sqlite3_column_int(st, 2);
		int			col = -1;

		rc = SQLITE_OK;
		for (int i = 0; name != NULL && i < t->ncols; i++)
			if (strcasecmp(name, t->cols[i].name) == 0)
				col = i;
		if (pk > 0)
		{
			npk++;
			if (pk > t->nkey || col < 0 || t->key[pk - 1] != col)
				*fits = false;
		}
		if (col >= 0)
		{
			found++;
			if (affinity(type) != affinity(ms_type_name(t->cols[col].type)))
				*fits = false;
		}
		/* a column of the app's own that the replica's inserts would leave NULL */
		else if (sqlite3_column_int(st, 3) && !sqlite3_column_int(st, 4) && pk == 0)
			*fits = false;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	if (found != t->ncols || npk != t->nkey)
		*fits = false;
	return rc;
}

int
ms_backfill_take(ms_ctx *c, const char *name)
{
	ms_backfill *b = c->backfill;
	const char **names;

	if (b->n == b->cap)
	{
		int			cap = b->cap ? b->cap * 2 : 8;

		names = ms_alloc(&c->arena, sizeof(char *) * (size_t) cap);
		if (names == NULL)
			return SQLITE_NOMEM;
		if (b->n)
			memcpy(names, b->names, sizeof(char *) * (size_t) b->n);
		b->names = names;
		b->cap = cap;
	}
	if ((b->names[b->n] = ms_strdup(&c->arena, name)) == NULL)
		return SQLITE_NOMEM;
	b->n++;
	return ms_table_made(c, name, NULL);
}

int
ms_backfill_rows(ms_ctx *c, const ms_backfill *b)
{
	int			rc = SQLITE_OK;

	for (int j = 0; j < b->n && rc == SQLITE_OK; j++)
		for (int i = 0; i < c->schema->n && rc == SQLITE_OK; i++)
		{
			const ms_tbl *t = &c->schema->t[i];

			/* taken, then undone (its savepoint rolled back): the host's still */
			if (strcmp(t->name, b->names[j]) != 0 || t->unmade || t->broken != NULL)
				continue;
			if (t->noted)
				rc = ms_exec(c, "INSERT INTO _sync_notes(tbl, key) SELECT %s, k FROM (SELECT %s AS k FROM %s)"
							 " WHERE k IS NOT NULL ON CONFLICT (tbl, key) DO UPDATE SET writes = writes + 1,"
							 " send_id = NULL, sent_at = NULL, set_aside = NULL",
							 t->lit, t->keyexpr, t->q);
			if (rc == SQLITE_OK && t->record)
				rc = ms_exec(c, "INSERT OR IGNORE INTO _sync_named(tbl, key) SELECT %s, k"
							 " FROM (SELECT %s AS k FROM %s) WHERE k IS NOT NULL",
							 t->lit, t->keyexpr, t->q);
		}
	return rc;
}
