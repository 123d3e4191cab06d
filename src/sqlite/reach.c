/*
** reach.c - what the replica's own writes may point at (docs/design.md 5.4).
**
** Rules decide what a replica reaches, never its writes: a record it writes,
** or an owned column of a two-way row, may point only at rows it holds (or
** holds retired), since what a row of its own points at travels to it with
** the row.  The server refuses any other pointer (src/pg/transport/reach.c);
** where the replica can know -- the parent is not in its file -- it refuses
** the write at once, in the writer's statement, as it refuses writes to a
** catalog's rows: for each foreign key of the schema it writes, a trigger
**
**   _sync_fk_ins_<table>_<n>   BEFORE INSERT of a record
**   _sync_fk_upd_<table>_<n>   BEFORE UPDATE OF the foreign key's columns,
**                              when one of them changed
**
** fails (RAISE(ABORT), naming the table, its columns and the parent's
** columns) when no column is NULL and the parent has no row of those values
** -- or is a table the replica does not hold (_unheld ends such a trigger's
** name).  Plain SQL, silent while
** sync_apply writes, never PRAGMA foreign_keys (the host's to set); SQLite
** 3.40's RAISE takes a literal, so the message names columns, not values.
** They reference their parent tables, which a rename or rebuild would trip
** on: they are dropped before a snapshot's schema or a schema change is
** applied and made again after it (apply.c), and made again by any message
** that finds them otherwise than the schema wants (a file of an earlier
** build; a host that dropped one, or dropped a parent table: until then,
** SQLite refuses the host's ALTER TABLE, naming the trigger).
**
** The replica's uploads say since when its writes wait (Up.unfiled_since):
** each note is dated, before a message is applied, by the last message
** applied before it (_sync_notes.written_after); a note written since the
** last message is dated by the last one.  The server keeps what it takes
** back after that message, which such a row may still point at.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

static const char *const quiet = "(SELECT applying FROM _sync_state WHERE id = 1) = 0";

/* checked: whether the replica writes this foreign key of t */
static bool
checked(const ms_tbl *t, const ms_fk *fk)
{
	if (t->record)
		return true;
	for (int j = 0; j < fk->n; j++)
		if (fk->cols[j] >= 0 && t->cols[fk->cols[j]].owned && !t->cols[fk->cols[j]].key)
			return true;
	return false;
}

/* the held, whole table fk points at, or NULL */
static const ms_tbl *
parent_of(ms_ctx *c, const ms_fk *fk)
{
	const ms_tbl *p = fk->parent >= 0 ? &c->schema->t[fk->parent] : NULL;

	return p != NULL && p->broken == NULL ? p : NULL;
}

/* usable: every column of fk is one of t's (a schema always says so; a check costs nothing) */
static bool
usable(const ms_tbl *t, const ms_fk *fk)
{
	if (fk->n <= 0)
		return false;
	for (int j = 0; j < fk->n; j++)
		if (fk->cols[j] < 0 || fk->cols[j] >= t->ncols)
			return false;
	return true;
}

/* is_uuid: the server's type of t's column i is uuid: its values compared as the server does, case aside */
static bool
is_uuid(const ms_tbl *t, int i)
{
	const char *st = t->msg->columns[i]->server_type;

	return st != NULL && strcmp(st, "uuid") == 0;
}

/*
 * trigger_name: the name of a foreign key's trigger (what: "ins" or "upd"; n:
 * its place among t's); one that points at a table not held says so, so that
 * a parent the host dropped (whose name a trigger must not keep: SQLite's
 * ALTER TABLE fails on any table while one does) names other triggers
 */
static char *
trigger_name(ms_ctx *c, const char *what, const ms_tbl *t, int n, bool held)
{
	return ms_printf(&c->arena, "_sync_fk_%s_%s_%d%s", what, t->name, n, held ? "" : "_unheld");
}

/* fk_triggers: the triggers of one foreign key of t (n: its place among t's) */
static int
fk_triggers(ms_ctx *c, const ms_tbl *t, const ms_fk *fk, int n)
{
	const ms_tbl *p = parent_of(c, fk);
	ms_buf		cols = {0};
	ms_buf		refs = {0};
	ms_buf		notnull = {0};
	ms_buf		changed = {0};
	ms_buf		absent = {0};
	ms_buf		msg = {0};
	char	   *ins;
	char	   *upd;
	int			rc = SQLITE_OK;

	for (int j = 0; j < fk->n; j++)
	{
		const ms_col *col = &t->cols[fk->cols[j]];

		ms_buf_printf(&cols, "%s%s", j ? ", " : "", col->q);
		ms_buf_printf(&refs, "%s%s", j ? ", " : "", fk->refs[j]);
		ms_buf_printf(&notnull, " AND NEW.%s IS NOT NULL", col->q);
		ms_buf_printf(&changed, "%sOLD.%s IS NOT NEW.%s", j ? " OR " : "", col->q, col->q);
	}
	if (p == NULL)
	{
		/* a table the replica does not hold: none of its rows is the replica's to point at */
		ms_buf_str(&absent, "1");
		ms_buf_printf(&msg, "magic_sync: %s %s of table %s %s at table %s, which this replica does not hold:"
					  " a replica's writes point only at rows it holds (its rules decide what it reaches)",
					  fk->n == 1 ? "column" : "columns", cols.data, t->name, fk->n == 1 ? "points" : "point",
					  fk->parent_name);
	}
	else
	{
		ms_buf_printf(&absent, "NOT EXISTS (SELECT 1 FROM %s WHERE ", p->q);
		for (int j = 0; j < fk->n; j++)
		{
			const ms_col *col = &t->cols[fk->cols[j]];

			/* the parent's index, the value as written or as the server prints a uuid */
			if (is_uuid(t, fk->cols[j]))
				ms_buf_printf(&absent, "%s%s IN (NEW.%s, lower(NEW.%s))", j ? " AND " : "", fk->refs[j],
							  col->q, col->q);
			else
				ms_buf_printf(&absent, "%s%s = NEW.%s", j ? " AND " : "", fk->refs[j], col->q);
		}
		ms_buf_str(&absent, ")");
		ms_buf_printf(&msg, "magic_sync: %s %s of table %s %s at a row of table %s (%s) this replica does not"
					  " hold: a replica's writes point only at rows it holds (its rules decide what it reaches)",
					  fk->n == 1 ? "column" : "columns", cols.data, t->name, fk->n == 1 ? "points" : "point",
					  p->name, refs.data);
	}
	ins = trigger_name(c, "ins", t, n, p != NULL);
	upd = trigger_name(c, "upd", t, n, p != NULL);
	if (cols.oom || refs.oom || notnull.oom || changed.oom || absent.oom || msg.oom || ins == NULL || upd == NULL)
		rc = SQLITE_NOMEM;
	if (rc == SQLITE_OK && t->record)
		rc = ms_exec(c, "CREATE TRIGGER \"%w\" BEFORE INSERT ON %s WHEN %s%s AND %s BEGIN"
					 " SELECT RAISE(ABORT, %Q); END", ins, t->q, quiet, notnull.data, absent.data, msg.data);
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "CREATE TRIGGER \"%w\" BEFORE UPDATE OF %s ON %s WHEN %s AND (%s)%s AND %s"
					 " BEGIN SELECT RAISE(ABORT, %Q); END", upd, cols.data, t->q, quiet, changed.data,
					 notnull.data, absent.data, msg.data);
	ms_buf_free(&cols);
	ms_buf_free(&refs);
	ms_buf_free(&notnull);
	ms_buf_free(&changed);
	ms_buf_free(&absent);
	ms_buf_free(&msg);
	return rc;
}

/*
 * wanted: whether the file has every trigger the schema needs, and no
 * other (names: n of them); out of memory an error, not a "no": the
 * triggers made again for nothing would be kept found under another
 * schema_version than with memory enough
 */
static int
wanted(ms_ctx *c, char **names, int n, bool *yes)
{
	int			found = 0;

	*yes = false;

	for (int i = 0; c->schema && i < c->schema->n; i++)
	{
		const ms_tbl *t = &c->schema->t[i];

		if (t->broken != NULL)
			continue;
		for (int f = 0; f < t->nfk; f++)
		{
			bool		held = parent_of(c, &t->fks[f]) != NULL;

			if (!usable(t, &t->fks[f]) || !checked(t, &t->fks[f]))
				continue;
			for (int w = t->record ? 0 : 1; w < 2; w++)
			{
				char	   *name = trigger_name(c, w == 0 ? "ins" : "upd", t, f, held);
				bool		has = false;

				if (name == NULL)
					return SQLITE_NOMEM;
				for (int k = 0; k < n && !has; k++)
					has = strcmp(names[k], name) == 0;
				if (!has)
					return SQLITE_OK;
				found++;
			}
		}
	}
	*yes = found == n;
	return SQLITE_OK;
}

/* existing: the names of the foreign-key triggers in the file */
static int
existing(ms_ctx *c, char ***names, int *n)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "SELECT name FROM main.sqlite_master WHERE type = 'trigger'"
								" AND name GLOB '_sync_fk_*'");

	return ms_names_read(c, st, rc, names, n);
}

/*
 * Which triggers the schema wants, and which the file has, can change only
 * with the file's schema (DDL of anyone's: schema_version) or with what the
 * schema is read from (_sync_tables, _sync_made: tables_gen).  Reading
 * sqlite_master for them was an eighth of a one-row sync_apply, so the
 * finding is kept in _sync_state (reach_version, reach_gen), written in
 * the transaction that found it: rolled back with it.  A schema_version
 * can come back after a rollback with other DDL than before; one written
 * beside it cannot, since that write goes too.
 */
static int
found(ms_ctx *c, bool *yes)
{
	sqlite3_stmt *st = NULL;
	/* the pragma itself: a table-valued pragma in a SELECT costs ten times as much */
	int			rc = ms_prepare(c, &st, "PRAGMA main.schema_version");
	int64_t		version = -1;
	int64_t		same = 0;

	rc = ms_int_read(c, st, rc, &version);
	st = NULL;
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "SELECT reach_version IS ?1 AND reach_gen IS tables_gen FROM _sync_state WHERE id = 1");
	if (rc == SQLITE_OK)
		sqlite3_bind_int64(st, 1, version);
	rc = ms_int_read(c, st, rc, &same);
	*yes = same != 0;
	return rc;
}

/*
 * keep: the triggers are as wanted now, by the schema read at the call's
 * start (after any DDL of ms_reach_ensure's own).  Not after a message's
 * schema changes: the next message looks at them once more.
 */
static int
keep(ms_ctx *c)
{
	return ms_exec_one(c, "UPDATE _sync_state SET reach_version = (SELECT schema_version FROM pragma_schema_version),"
					   " reach_gen = tables_gen WHERE id = 1");
}

int
ms_reach_untrigger(ms_ctx *c)
{
	char	  **names;
	int			n;
	int			rc = existing(c, &names, &n);

	for (int i = 0; i < n && rc == SQLITE_OK; i++)
		rc = ms_exec(c, "DROP TRIGGER IF EXISTS \"%w\"", names[i]);
	return rc;
}

int
ms_reach_trigger(ms_ctx *c)
{
	int			rc = ms_reach_untrigger(c);

	for (int i = 0; c->schema && i < c->schema->n && rc == SQLITE_OK; i++)
	{
		const ms_tbl *t = &c->schema->t[i];

		if (t->broken != NULL)
			continue;
		for (int f = 0; f < t->nfk && rc == SQLITE_OK; f++)
			if (usable(t, &t->fks[f]) && checked(t, &t->fks[f]))
				rc = fk_triggers(c, t, &t->fks[f], f);
	}
	return rc;
}

int
ms_reach_ensure(ms_ctx *c)
{
	char	  **names;
	int			n;
	bool		yes;
	int			rc = found(c, &yes);

	if (rc != SQLITE_OK || yes)
		return rc;
	rc = existing(c, &names, &n);
	if (rc == SQLITE_OK)
		rc = wanted(c, names, n, &yes);
	if (rc == SQLITE_OK && !yes)
		rc = ms_reach_trigger(c);
	return rc == SQLITE_OK ? keep(c) : rc;
}

/* ---- since when the replica's writes wait ---------------------------- */

int
ms_reach_notes_ensure(ms_ctx *c)
{
	bool		has;
	int			rc = ms_has_column(c, "_sync_state", "reach_version", &has);

	/* a file of an older build: its triggers looked at once */
	if (rc == SQLITE_OK && !has)
		rc = ms_exec(c, "ALTER TABLE _sync_state ADD COLUMN reach_version INTEGER;"
					 "ALTER TABLE _sync_state ADD COLUMN reach_gen INTEGER");
	if (rc == SQLITE_OK)
		rc = ms_has_column(c, "_sync_notes", "written_after", &has);
	if (rc != SQLITE_OK || has)
		return rc;
	/* notes from before: written at some message, the first at the earliest */
	return ms_exec(c, "ALTER TABLE _sync_notes ADD COLUMN written_after INTEGER;"
				   "UPDATE _sync_notes SET written_after = 1;"
				   "CREATE INDEX IF NOT EXISTS _sync_notes_undated ON _sync_notes(tbl, key)"
				   " WHERE written_after IS NULL");
}

/*
 * ms_reach_date: most messages find no note undated (the replica wrote
 * nothing since the last): looked for first, through the partial index,
 * since the UPDATE, which changes what that index holds, first gathers its
 * rows in a temporary table, for a quarter of a one-row sync_apply's own work
 */
int
ms_reach_date(ms_ctx *c)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "SELECT 1 FROM _sync_notes WHERE written_after IS NULL LIMIT 1");

	if (rc == SQLITE_OK)
		rc = ms_step(c, st);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW)
		return rc == SQLITE_DONE ? SQLITE_OK : rc;
	rc = ms_prepare(c, &st, "UPDATE _sync_notes SET written_after = ?1 WHERE written_after IS NULL");
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64) c->st.number);
	rc = ms_done(c, st);
	sqlite3_finalize(st);
	return rc;
}

int
ms_reach_since(ms_ctx *c, uint64_t *since)
{
	sqlite3_stmt *st;
	bool		has;
	int			rc = ms_has_column(c, "_sync_notes", "written_after", &has);

	*since = c->st.number;
	/* a file no message dated yet (sync_apply makes the column): what it applied */
	if (rc != SQLITE_OK || !has)
		return rc;
	/*
	 * A note not dated yet was written since the last message: the last
	 * applied dates it.  Notes set aside count too: sync_retry, or the
	 * narrowing down of a refused upload, sends them again, and the server
	 * must still know what they may point at.
	 */
	rc = ms_prepare(c, &st, "SELECT min(written_after) FROM _sync_notes");
	if (rc != SQLITE_OK)
		return rc;
	rc = ms_step(c, st);
	if (rc == SQLITE_ROW)
	{
		if (sqlite3_column_type(st, 0) == SQLITE_INTEGER && sqlite3_column_int64(st, 0) >= 0 &&
			(uint64_t) sqlite3_column_int64(st, 0) < *since)
			*since = (uint64_t) sqlite3_column_int64(st, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}
