/*
** ddl.c - the tables a snapshot's Begin or a schema change makes.
**
** Applying a Begin (tables.c) creates the tables a new file lacks (key as
** PRIMARY KEY, key columns NOT NULL, columns typed INTEGER, REAL, TEXT or BLOB, the retired column as
** INTEGER), adds the columns an older file lacks, rebuilds a table whose
** primary key is not the declared key, indexes the columns of every foreign
** key and the retired column, and installs the noting triggers:
**
**   record table       AFTER INSERT, UPDATE, DELETE: note the row (the old
**                      key too when an update changed it), and mark the
**                      table's values sum stale (vsum.c)
**   catalog table      AFTER UPDATE OF its replica-owned columns, when one
**                      of them changed: note the row; and guards: BEFORE
**                      INSERT, DELETE, and UPDATE of a column the replica
**                      does not own, fail with the table and column named
**
** A note is one row of _sync_notes per (table, key), counting writes; a
** write clears the send that carried it, so the row goes up again.  The
** triggers are plain SQL (the canonical key computed with length() and
** CAST), so a connection that never loaded the extension notes all the same.
** They are silent while sync_apply writes (_sync_state.applying); a guard
** keeps a catalog the server's, so that a local write of its data, which
** would never go up and would outlive every digest, fails instead.
**
** A table the replica cannot hold (a reserved name, a name or column that
** collides in SQLite's case-insensitive names, a REAL or BLOB key, DDL
** that fails, as more columns than SQLite takes) is left out with the reason
** in last_error; its rows are refused.  A table the new schema no longer
** names stops being mirrored: its triggers and notes go, its rows stay.
**
** SQLite's own DDL reads the whole schema each time (a CREATE scans
** sqlite_master), so making N tables costs SQLite more than N times one;
** what the replica adds is linear: the file's objects are read once
** (the catalog), an index or trigger already as it would be written is
** kept, not made again (a snapshot of an unchanged schema runs no DDL),
** and names and columns are looked up in maps.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- making a table ------------------------------------------------- */

/* a failure the table's own savepoint absorbs: the table is not held */
static bool
table_failure(int rc)
{
	return rc == SQLITE_ERROR || rc == SQLITE_CONSTRAINT || rc == SQLITE_MISMATCH ||
		rc == SQLITE_LOCKED || rc == SQLITE_RANGE || rc == SQLITE_TOOBIG;
}

static bool
reserved_name(const char *name)
{
	return strncasecmp(name, "_sync_", 6) == 0 || strncasecmp(name, "sqlite_", 7) == 0;
}

/* why_not_held: NULL when the replica can hold this table (clash: a table held of the same name in SQLite) */
static char *
why_not_held(ms_ctx *c, const Sync__Table *m, const char *clash)
{
	const char **cols;
	ms_names	ns;

	if (reserved_name(m->name))
		return ms_printf(&c->arena, "table \"%s\" has a name reserved by SQLite or magic_sync", m->name);
	if (clash != NULL)
		return ms_printf(&c->arena, "tables \"%s\" and \"%s\" are one table in SQLite, whose names ignore case",
						 clash, m->name);
	cols = ms_alloc(&c->arena, sizeof(char *) * (m->n_columns + 1));
	if (cols == NULL)
		return NULL;
	for (size_t i = 0; i < m->n_columns; i++)
		cols[i] = m->columns[i]->name;
	if (ms_names_make(c, &ns, cols, (int) m->n_columns) != SQLITE_OK)
		return NULL;
	for (size_t i = 0; i < m->n_columns; i++)
	{
		int			j = ms_names_find(&ns, m->columns[i]->name);

		if (j >= 0 && (size_t) j != i)
			return ms_printf(&c->arena, "columns \"%s\" and \"%s\" of table \"%s\" are one column in SQLite",
							 m->columns[j]->name, m->columns[i]->name, m->name);
	}
	for (size_t k = 0; k < m->n_key; k++)
	{
		const char *type = NULL;

		/* checked (wire.c): a column, named exactly */
		for (int j = ms_names_find(&ns, m->key[k]); j >= 0 && type == NULL; j = -1)
			type = m->columns[j]->type;
		if (type == NULL)
			return ms_printf(&c->arena, "key column \"%s\" of table \"%s\" is not a column", m->key[k], m->name);
		if (strcmp(type, "INTEGER") != 0 && strcmp(type, "TEXT") != 0)
			return ms_printf(&c->arena, "key column \"%s\" of table \"%s\" is %s: a key is INTEGER or TEXT",
							 m->key[k], m->name, type);
		if (m->retired[0] && strcmp(m->key[k], m->retired) == 0)
			return ms_printf(&c->arena, "the retired column \"%s\" of table \"%s\" is a key column",
							 m->retired, m->name);
	}
	return NULL;
}

/* a declared type of the host's, written again only when it is plain words and numbers */
static bool
plain_type(const char *type)
{
	for (const char *p = type; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
			  *p == ' ' || *p == '_' || *p == '(' || *p == ')' || *p == ','))
			return false;
	return true;
}

/*
 * the columns of a CREATE TABLE, with the key as PRIMARY KEY; extra: the
 * host's own columns of the table (name, declared type), kept
 */
static char *
table_sql(ms_ctx *c, const ms_tbl *t, const char *name_q, const char **extra, const char **types, int nextra)
{
	ms_buf		b = {0};
	char	   *out;

	ms_buf_printf(&b, "CREATE TABLE %s(", name_q);
	for (int i = 0; i < t->ncols; i++)
		ms_buf_printf(&b, "%s%s %s%s", i ? ", " : "", t->cols[i].q, ms_type_name(t->cols[i].type),
					  t->cols[i].key ? " NOT NULL" : "");
	for (int i = 0; i < nextra; i++)
		ms_buf_printf(&b, ", \"%w\"%s%s", extra[i], types[i][0] && plain_type(types[i]) ? " " : "",
					  plain_type(types[i]) ? types[i] : "");
	ms_buf_printf(&b, ", PRIMARY KEY (%s))", t->keycols);
	out = b.oom ? NULL : ms_strdup(&c->arena, b.data);
	ms_buf_free(&b);
	return out;
}

/* what exists under this name: "table", "view", "index", or NULL */
static int
object_type(ms_ctx *c, const char *name, char **type)
{
	ms_catalog *cat;
	int			rc = ms_catalog_get(c, &cat);
	ms_object  *o = rc == SQLITE_OK ? ms_cat_object(cat, name) : NULL;

	*type = o ? (char *) o->type : NULL;
	return rc;
}

/* the file's columns of a table: names, declared types, places in the primary key */
typedef struct file_cols
{
	int			n;
	const char **name;
	const char **type;
	int		   *pk;
} file_cols;

static int
read_columns(ms_ctx *c, const char *table, file_cols *fc)
{
	sqlite3_stmt *st = NULL;
	int			cap = 0;
	int			rc = ms_prepare(c, &st, "SELECT name, type, pk FROM pragma_table_info(?1)");

	memset(fc, 0, sizeof *fc);
	if (rc == SQLITE_OK)
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *name = (const char *) sqlite3_column_text(st, 0);
		const char *type = (const char *) sqlite3_column_text(st, 1);

		rc = SQLITE_OK;
		if (fc->n == cap)
		{
			int			ncap = cap ? cap * 2 : 16;
			const char **n = ms_alloc(&c->arena, sizeof(char *) * (size_t) ncap);
			const char **t = ms_alloc(&c->arena, sizeof(char *) * (size_t) ncap);
			int		   *p = ms_alloc(&c->arena, sizeof(int) * (size_t) ncap);

			if (n == NULL || t == NULL || p == NULL)
			{
				rc = SQLITE_NOMEM;
				break;
			}
			if (fc->n)
			{
				memcpy(n, fc->name, sizeof(char *) * (size_t) fc->n);
				memcpy(t, fc->type, sizeof(char *) * (size_t) fc->n);
				memcpy(p, fc->pk, sizeof(int) * (size_t) fc->n);
			}
			fc->name = n;
			fc->type = t;
			fc->pk = p;
			cap = ncap;
		}
		fc->name[fc->n] = name ? ms_strdup(&c->arena, name) : NULL;
		fc->type[fc->n] = ms_strdup(&c->arena, type ? type : "");
		fc->pk[fc->n] = sqlite3_column_int(st, 2);
		if (fc->name[fc->n] == NULL || fc->type[fc->n] == NULL)
			rc = SQLITE_NOMEM;
		fc->n++;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	return rc;
}

/*
 * rebuild: the table made again with its rows (its primary key is not the
 * declared key, or a column's type changed), the host's own columns of it
 * kept with their declared types; its indexes and triggers go with the
 * old one (the caller makes again what it must).  The rows wait in a
 * table of their own while it is made again under its name: no ALTER
 * TABLE RENAME, which checks every view of the host's against a table
 * while it is gone (and legacy_alter_table, which would let it, expires
 * every statement prepared, the savepoints' ROLLBACK TO too).
 */
static int
rebuild(ms_ctx *c, const ms_tbl *t)
{
	ms_buf		cols = {0};
	file_cols	fc;
	const char **extra;
	const char **types;
	int			nextra = 0;
	ms_names	want;
	const char **wanted;
	char	   *create;
	int			rc = read_columns(c, t->name, &fc);

	if (rc != SQLITE_OK)
		return rc;
	extra = ms_alloc(&c->arena, sizeof(char *) * (size_t) (fc.n + 1));
	types = ms_alloc(&c->arena, sizeof(char *) * (size_t) (fc.n + 1));
	wanted = ms_alloc(&c->arena, sizeof(char *) * (size_t) (t->ncols + 1));
	if (extra == NULL || types == NULL || wanted == NULL)
		return SQLITE_NOMEM;
	for (int i = 0; i < t->ncols; i++)
		wanted[i] = t->cols[i].name;
	rc = ms_names_make(c, &want, wanted, t->ncols);
	if (rc != SQLITE_OK)
		return rc;
	for (int j = 0; j < fc.n; j++)
	{
		int			i = ms_names_find(&want, fc.name[j]);

		if (i >= 0)
			ms_buf_printf(&cols, "%s%s", cols.len ? ", " : "", t->cols[i].q);
		else
		{
			/* the host's own column: kept */
			ms_buf_printf(&cols, "%s\"%w\"", cols.len ? ", " : "", fc.name[j]);
			extra[nextra] = fc.name[j];
			types[nextra++] = fc.type[j];
		}
	}
	create = table_sql(c, t, t->q, extra, types, nextra);
	if (cols.oom || create == NULL)
	{
		ms_buf_free(&cols);
		return SQLITE_NOMEM;
	}
	rc = ms_exec(c, "DROP TABLE IF EXISTS \"_sync_rebuild\"");
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "CREATE TABLE \"_sync_rebuild\" AS SELECT %s FROM %s", cols.len ? cols.data : "1", t->q);
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "DROP TABLE %s", t->q);
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "%s", create);
	if (rc == SQLITE_OK && cols.len > 0)
		rc = ms_exec(c, "INSERT OR IGNORE INTO %s(%s) SELECT %s FROM \"_sync_rebuild\"", t->q, cols.data, cols.data);
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "DROP TABLE \"_sync_rebuild\"");
	ms_buf_free(&cols);
	/* its indexes and triggers went with it */
	ms_catalog_forget(c);
	return rc;
}

/*
 * rebuild_keeping: a rebuild whose caller makes the replica's own objects
 * again, and the host's indexes and triggers of the table made again
 * after it; one that no longer fits is said in last_error
 */
static int
rebuild_keeping(ms_ctx *c, ms_catalog *cat, const ms_tbl *t)
{
	const char **own;
	int			nown = 0;
	int			n = 0;
	int			rc;

	for (ms_object *o = ms_cat_of_table(cat, t->name); o != NULL; o = o->next)
		n++;
	own = ms_alloc(&c->arena, sizeof(char *) * (size_t) (n + 1));
	if (own == NULL)
		return SQLITE_NOMEM;
	for (ms_object *o = ms_cat_of_table(cat, t->name); o != NULL; o = o->next)
		if (!o->gone && o->sql != NULL && strncasecmp(o->name, "_sync_", 6) != 0)
			own[nown++] = o->sql;
	rc = rebuild(c, t);
	for (int i = nown - 1; i >= 0 && rc == SQLITE_OK; i--)
	{
		rc = ms_begin(c, "_sync_own");
		if (rc == SQLITE_OK)
			rc = ms_exec(c, "%s", own[i]);
		if (table_failure(rc))
		{
			char	   *why = ms_printf(&c->arena, "table \"%s\" was made again; an object of the host's on it"
										" no longer fits and is not made again: %s: %s", t->name, own[i],
										c->err ? c->err : sqlite3_errstr(rc));

			sqlite3_free(c->err);
			c->err = NULL;
			(void) ms_end(c, "_sync_own", rc);
			rc = why ? ms_state_error(c, "%s", why) : SQLITE_NOMEM;
		}
		else
			rc = ms_end(c, "_sync_own", rc);
	}
	ms_catalog_forget(c);
	return rc;
}

/* create the table (the replica made it), or add what it lacks to the one the replica made */
static int
create_or_alter(ms_ctx *c, ms_catalog *cat, const ms_object *o, const ms_tbl *t)
{
	file_cols	fc;
	ms_names	have;
	bool		same_key = true;
	int			npk = 0;
	int			rc;

	if (o == NULL)
	{
		char	   *sql = table_sql(c, t, t->q, NULL, NULL, 0);

		rc = sql ? ms_ddl(c, sql) : SQLITE_NOMEM;
		if (rc == SQLITE_OK && c->catalog == cat)
			rc = ms_cat_add(c, cat, "table", t->name, t->name, sql, true);
		if (rc == SQLITE_OK)
			rc = ms_table_made(c, t->name, NULL);
		return rc;
	}
	rc = read_columns(c, t->name, &fc);
	if (rc == SQLITE_OK)
		rc = ms_names_make(c, &have, fc.name, fc.n);
	if (rc != SQLITE_OK)
		return rc;
	/* the primary key, in its order, against the declared key */
	for (int j = 0; j < fc.n; j++)
		if (fc.pk[j] > 0)
			npk++;
	if (npk != t->nkey)
		same_key = false;
	for (int j = 0; j < fc.n && same_key; j++)
		if (fc.pk[j] > 0 && strcasecmp(fc.name[j], t->cols[t->key[fc.pk[j] - 1]].name) != 0)
			same_key = false;
	if (!same_key)
		return rebuild_keeping(c, cat, t);
	for (int i = 0; i < t->ncols && rc == SQLITE_OK; i++)
		if (ms_names_find(&have, t->cols[i].name) < 0)
		{
			char	   *sql = ms_printf(&c->arena, "ALTER TABLE %s ADD COLUMN %s %s", t->q, t->cols[i].q,
										ms_type_name(t->cols[i].type));

			rc = sql ? ms_ddl(c, sql) : SQLITE_NOMEM;
		}
	return rc;
}

/*
 * take: make the table a Table declares, or alter the one the replica made
 * of its name; a table, view or index of the host's own of that name is
 * never touched: *host says why the table waits
 */
static int
take(ms_ctx *c, const ms_tbl *t, char **host)
{
	ms_catalog *cat;
	ms_object  *o;
	int			rc = ms_catalog_get(c, &cat);

	*host = NULL;
	if (rc != SQLITE_OK)
		return rc;
	o = ms_cat_object(cat, t->name);
	/* a file's first snapshot takes a table of the app's that fits the declaration (backfill.c) */
	if (o != NULL && o->type == ms_object_types[0] && !o->made && c->backfill != NULL)
	{
		bool		fits;

		rc = ms_backfill_fits(c, t, &fits);
		if (rc == SQLITE_OK && fits && (rc = ms_backfill_take(c, t->name)) == SQLITE_OK)
			o->made = true;
		if (rc != SQLITE_OK)
			return rc;
	}
	if (o != NULL && !(o->type == ms_object_types[0] && o->made))
	{
		*host = ms_host_has(c, o, t->name);
		return *host ? SQLITE_OK : SQLITE_NOMEM;
	}
	return create_or_alter(c, cat, o, t);
}

/* ensure one index is as we write it: kept when its text is the same */
static int
ensure_index(ms_ctx *c, const ms_tbl *t, const char *name, const char *sql, ms_map *keep)
{
	ms_catalog *cat;
	ms_object  *o;
	int			rc = ms_catalog_get(c, &cat);

	if (rc != SQLITE_OK)
		return rc;
	o = ms_cat_object(cat, name);
	if (o != NULL && o->type != ms_object_types[2])
		o = NULL;				/* not an index: CREATE says what is in the way */
	if (o == NULL || o->sql == NULL || strcmp(o->sql, sql) != 0)
	{
		char	   *drop = o ? ms_printf(&c->arena, "DROP INDEX \"%w\"", o->name) : NULL;

		if (o != NULL)
		{
			rc = drop ? ms_ddl(c, drop) : SQLITE_NOMEM;
			o->gone = true;
		}
		if (rc == SQLITE_OK)
			rc = ms_ddl(c, sql);
		if (rc == SQLITE_OK && c->catalog == cat)
			rc = ms_cat_add(c, cat, "index", name, t->name, sql, false);
	}
	if (rc == SQLITE_OK)
		rc = ms_map_put(&c->arena, keep, name, strlen(name), (void *) name);
	return rc;
}

/* a name written so that SQLite, which ignores ASCII case, tells it from every other: A as ^a, ^ as ^^ */
static void
case_safe(ms_buf *b, const char *s)
{
	for (const char *p = s; *p; p++)
	{
		if (*p >= 'A' && *p <= 'Z')
		{
			ms_buf_byte(b, '^');
			ms_buf_byte(b, (uint8_t) (*p + 32));
		}
		else if (*p == '^')
			ms_buf_str(b, "^^");
		else
			ms_buf_byte(b, (uint8_t) *p);
	}
}

/*
 * uq_name: the name of a unique index that travels: _sync_uq_, the table
 * name's length in bytes, then the table's and the index's names written
 * case-safe.  The length says where the table's name ends, so that no two
 * (table, index) pairs share one ("a" and "b_x", "a_b" and "x"), and no
 * two names differ by case alone, which SQLite would take for one.
 */
static char *
uq_name(ms_ctx *c, const char *table, const char *index)
{
	ms_buf		b = {0};
	char	   *out;

	ms_buf_printf(&b, "_sync_uq_%d_", (int) strlen(table));
	case_safe(&b, table);
	ms_buf_byte(&b, '_');
	case_safe(&b, index);
	out = b.oom ? NULL : ms_strdup(&c->arena, b.data);
	ms_buf_free(&b);
	return out;
}

/*
 * unique_indexes: the server's unique indexes that travel (docs/protocol.md
 * 5.3).  One the rows held cannot take yet (two hold one value, one of them
 * on its way to another) is left out and said, and made at the table's
 * next change or snapshot.
 */
static int
unique_indexes(ms_ctx *c, const ms_tbl *t, ms_map *keep)
{
	int			rc = SQLITE_OK;

	for (size_t u = 0; u < t->msg->n_unique && rc == SQLITE_OK; u++)
	{
		const Sync__Unique *ui = t->msg->unique[u];
		ms_buf		cols = {0};
		char	   *name = uq_name(c, t->name, ui->name);
		char	   *sql;

		for (size_t j = 0; j < ui->n_columns; j++)
			ms_buf_printf(&cols, "%s\"%w\"", j ? ", " : "", ui->columns[j]);
		sql = (name && !cols.oom) ? ms_printf(&c->arena, "CREATE UNIQUE INDEX \"%w\" ON %s(%s)", name, t->q, cols.data) : NULL;
		ms_buf_free(&cols);
		if (sql == NULL)
			return SQLITE_NOMEM;
		rc = ms_begin(c, "_sync_unique");
		if (rc == SQLITE_OK)
			rc = ensure_index(c, t, name, sql, keep);
		if (rc == SQLITE_CONSTRAINT)
		{
			char	   *why = ms_printf(&c->arena, "unique index \"%s\" of table \"%s\" is not made yet:"
										" rows held share a value (%s)", ui->name, t->name,
										c->err ? c->err : "constraint failed");

			sqlite3_free(c->err);
			c->err = NULL;
			(void) ms_end(c, "_sync_unique", rc);
			rc = why ? ms_state_error(c, "%s", why) : SQLITE_NOMEM;
		}
		else
			rc = ms_end(c, "_sync_unique", rc);
	}
	return rc;
}

/* ours: an index the replica makes of its tables */
static bool
our_index(const char *name)
{
	return strncmp(name, "_sync_fk_", 9) == 0 || strncmp(name, "_sync_retired_", 14) == 0 ||
		strncmp(name, "_sync_uq_", 9) == 0;
}

/* indexes: the columns of every foreign key, the retired column, the unique indexes that travel */
static int
indexes(ms_ctx *c, const ms_tbl *t)
{
	ms_map		keep;
	int			rc = SQLITE_OK;
	ms_catalog *cat;

	ms_map_init(&keep, false);
	for (int f = 0; f < t->nfk && rc == SQLITE_OK; f++)
	{
		ms_buf		cols = {0};
		char	   *name = ms_printf(&c->arena, "_sync_fk_%s_%d", t->name, f + 1);
		char	   *sql;

		for (int j = 0; j < t->fks[f].n; j++)
			ms_buf_printf(&cols, "%s%s", j ? ", " : "", t->cols[t->fks[f].cols[j]].q);
		sql = (name && !cols.oom) ? ms_printf(&c->arena, "CREATE INDEX \"%w\" ON %s(%s)", name, t->q, cols.data) : NULL;
		ms_buf_free(&cols);
		rc = sql ? ensure_index(c, t, name, sql, &keep) : SQLITE_NOMEM;
	}
	if (rc == SQLITE_OK && t->retired >= 0)
	{
		char	   *name = ms_printf(&c->arena, "_sync_retired_%s", t->name);
		char	   *sql = name ? ms_printf(&c->arena, "CREATE INDEX \"%w\" ON %s(%s) WHERE %s IS NOT NULL",
										   name, t->q, t->cols[t->retired].q, t->cols[t->retired].q) : NULL;

		rc = sql ? ensure_index(c, t, name, sql, &keep) : SQLITE_NOMEM;
	}
	if (rc == SQLITE_OK)
		rc = unique_indexes(c, t, &keep);
	if (rc == SQLITE_OK)
		rc = ms_catalog_get(c, &cat);
	/* our indexes of this table that the schema no longer asks for */
	for (ms_object *o = rc == SQLITE_OK ? ms_cat_of_table(cat, t->name) : NULL;
		 o != NULL && rc == SQLITE_OK; o = o->next)
	{
		char	   *sql;

		if (o->gone || o->type != ms_object_types[2] || !our_index(o->name) ||
			ms_map_get(&keep, o->name, strlen(o->name)) != NULL)
			continue;
		sql = ms_printf(&c->arena, "DROP INDEX \"%w\"", o->name);
		rc = sql ? ms_ddl(c, sql) : SQLITE_NOMEM;
		o->gone = true;
	}
	return rc;
}

/* the noting triggers, the guards and the stamping triggers of a table: each kind's name is _sync_<kind>_<table> */
enum
{
	TR_INS, TR_UPD, TR_DEL, TR_GUARD_INS, TR_GUARD_UPD, TR_GUARD_DEL, TR_HLC_INS, TR_HLC_UPD, TR_KINDS
};
static const char *const trigger_kinds[TR_KINDS] = {
	"ins", "upd", "del", "guard_ins", "guard_upd", "guard_del", "hlc_ins", "hlc_upd"
};

/*
 * set_triggers: a table's triggers as sql says (NULL: none of that kind):
 * one already so is kept, one otherwise or not wanted dropped, one missing
 * made
 */
static int
set_triggers(ms_ctx *c, const char *table, char *const sql[TR_KINDS])
{
	ms_catalog *cat;
	ms_object  *have[TR_KINDS];
	char	   *name[TR_KINDS];
	int			rc = ms_catalog_get(c, &cat);

	for (int k = 0; k < TR_KINDS && rc == SQLITE_OK; k++)
	{
		name[k] = ms_printf(&c->arena, "_sync_%s_%s", trigger_kinds[k], table);
		if (name[k] == NULL)
			return SQLITE_NOMEM;
		have[k] = ms_cat_trigger(cat, name[k]);
		if (have[k] != NULL && (sql[k] == NULL || have[k]->sql == NULL || strcmp(have[k]->sql, sql[k]) != 0))
		{
			char	   *drop = ms_printf(&c->arena, "DROP TRIGGER \"%w\"", have[k]->name);

			rc = drop ? ms_ddl(c, drop) : SQLITE_NOMEM;
			have[k]->gone = true;
			have[k] = NULL;
		}
	}
	for (int k = 0; k < TR_KINDS && rc == SQLITE_OK; k++)
		if (sql[k] != NULL && have[k] == NULL)
		{
			rc = ms_ddl(c, sql[k]);
			if (rc == SQLITE_OK && c->catalog == cat)
				rc = ms_cat_add(c, cat, "trigger", name[k], table, sql[k], false);
		}
	return rc;
}

static int
drop_triggers(ms_ctx *c, const char *name)
{
	char	   *none[TR_KINDS] = {NULL};

	return set_triggers(c, name, none);
}

/*
 * guards: a catalog's rows, and its columns the replica does not own, are the
 * server's: a local write of them would never go up, and would stand until
 * the next values digest sent the row again.  So outside sync_apply each fails, naming
 * the table and the column; the owned columns stay writable.
 */
static int
guards(ms_ctx *c, const ms_tbl *t, const char *quiet, char *sql[TR_KINDS])
{
	ms_buf		cases = {0};
	bool		any;
	char	   *ins = ms_printf(&c->arena, "magic_sync: table %s is the server's: a replica does not add rows"
								" to it (sync_apply does)", t->name);
	char	   *del = ms_printf(&c->arena, "magic_sync: table %s is the server's: a replica does not delete"
								" its rows (sync_apply does)", t->name);

	if (ins == NULL || del == NULL)
		return SQLITE_NOMEM;
	for (int i = 0; i < t->ncols; i++)
	{
		const ms_col *col = &t->cols[i];
		char	   *why;

		if (col->owned && !col->key)
			continue;
		why = ms_printf(&c->arena, "magic_sync: column %s of table %s is the server's: a replica writes"
						" only the columns it owns", col->name, t->name);
		if (why == NULL)
			return SQLITE_NOMEM;
		ms_buf_printf(&cases, " WHEN OLD.%s IS NOT NEW.%s THEN RAISE(ABORT, %Q)", col->q, col->q, why);
	}
	if (cases.oom)
		return SQLITE_NOMEM;
	sql[TR_GUARD_INS] = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_guard_ins_%w\" BEFORE INSERT ON %s WHEN %s BEGIN"
								  " SELECT RAISE(ABORT, %Q); END", t->name, t->q, quiet, ins);
	sql[TR_GUARD_DEL] = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_guard_del_%w\" BEFORE DELETE ON %s WHEN %s BEGIN"
								  " SELECT RAISE(ABORT, %Q); END", t->name, t->q, quiet, del);
	any = cases.len > 0;
	if (any)
		sql[TR_GUARD_UPD] = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_guard_upd_%w\" BEFORE UPDATE ON %s WHEN %s BEGIN"
									  " SELECT CASE%s END; END", t->name, t->q, quiet, cases.data);
	ms_buf_free(&cases);
	if (sql[TR_GUARD_INS] == NULL || sql[TR_GUARD_DEL] == NULL || (any && sql[TR_GUARD_UPD] == NULL))
		return SQLITE_NOMEM;
	return SQLITE_OK;
}

static int
triggers(ms_ctx *c, const ms_tbl *t)
{
	static const char *const quiet = "(SELECT applying FROM _sync_state WHERE id = 1) = 0";
	static const char *const noted =
	"ON CONFLICT (tbl, key) DO UPDATE SET writes = writes + 1, send_id = NULL,"
	" sent_at = NULL, set_aside = NULL";
	char	   *knew = ms_key_sql(c, t, "NEW.");
	char	   *kold = ms_key_sql(c, t, "OLD.");
	char	   *why = ms_printf(&c->arena, "magic_sync: a key column of table %s is NULL", t->name);
	char	   *raise = why ? ms_printf(&c->arena, "RAISE(ABORT, %Q)", why) : NULL;
	char	   *sql[TR_KINDS] = {NULL};
	char	   *stale = NULL;
	int			rc = SQLITE_OK;
	ms_buf		changed = {0};
	ms_buf		of = {0};

	if (knew == NULL || kold == NULL || raise == NULL)
		return SQLITE_NOMEM;
	if (!t->record)
		rc = guards(c, t, quiet, sql);
	/* a record's local write makes its values sum stale (vsum.c): plain SQL cannot hash */
	if (rc == SQLITE_OK)
		rc = ms_vsum_ensure(c);
	if (rc == SQLITE_OK && t->record &&
		(stale = ms_printf(&c->arena, " UPDATE _sync_vsum SET fresh = 0 WHERE tbl = %s AND fresh = 1;", t->lit)) == NULL)
		rc = SQLITE_NOMEM;
	if (rc == SQLITE_OK && t->record)
	{
		sql[TR_INS] = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_ins_%w\" AFTER INSERT ON %s WHEN %s BEGIN"
								" INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s;%s END",
								t->name, t->q, quiet, t->lit, knew, raise, noted, stale);
		sql[TR_UPD] = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_upd_%w\" AFTER UPDATE ON %s WHEN %s BEGIN"
								" INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s;"
								" INSERT INTO _sync_notes(tbl, key) SELECT %s, %s WHERE (%s) IS NOT (%s) %s;%s END",
								t->name, t->q, quiet, t->lit, knew, raise, noted,
								t->lit, kold, kold, knew, noted, stale);
		sql[TR_DEL] = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_del_%w\" AFTER DELETE ON %s WHEN %s BEGIN"
								" INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s;%s END",
								t->name, t->q, quiet, t->lit, kold, raise, noted, stale);
		if (sql[TR_INS] == NULL || sql[TR_UPD] == NULL || sql[TR_DEL] == NULL)
			rc = SQLITE_NOMEM;
		/* version => 'hlc': the row's version stamped by the replica's clock */
		if (rc == SQLITE_OK)
			rc = ms_hlc_trigger_sql(c, t, quiet, &sql[TR_HLC_INS], &sql[TR_HLC_UPD]);
	}
	else if (rc == SQLITE_OK && t->noted)
	{
		/* a catalog table: the replica writes only its own columns */
		for (int i = 0; i < t->ncols; i++)
		{
			const ms_col *col = &t->cols[i];

			if (!col->owned || col->key || col->retired)
				continue;
			ms_buf_printf(&of, "%s%s", of.len ? ", " : "", col->q);
			ms_buf_printf(&changed, "%sOLD.%s IS NOT NEW.%s", changed.len ? " OR " : "", col->q, col->q);
		}
		if (of.oom || changed.oom)
			rc = SQLITE_NOMEM;
		else if ((sql[TR_UPD] = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_upd_%w\" AFTER UPDATE OF %s ON %s WHEN %s AND (%s)"
										  " BEGIN INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s; END",
										  t->name, of.data, t->q, quiet, changed.data, t->lit, knew, raise,
										  noted)) == NULL)
			rc = SQLITE_NOMEM;
		ms_buf_free(&of);
		ms_buf_free(&changed);
	}
	return rc == SQLITE_OK ? set_triggers(c, t->name, sql) : rc;
}

/* store: the Table message as it came */
static int
store(ms_ctx *c, Sync__Table *m, int position)
{
	size_t		n = sync__table__get_packed_size(m);
	uint8_t    *buf = sqlite3_malloc64(n ? n : 1);
	sqlite3_stmt *st;
	int			rc;

	if (buf == NULL)
		return SQLITE_NOMEM;
	sync__table__pack(m, buf);
	rc = ms_prepare(c, &st, "INSERT OR REPLACE INTO _sync_tables(name, position, schema) VALUES (?1, ?2, ?3)");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, m->name, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 2, position);
		sqlite3_bind_blob64(st, 3, buf, n, SQLITE_STATIC);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	sqlite3_free(buf);
	return rc;
}

/* ---- for schema changes (evolve.c) and tables.c ----------------------- */


char *
ms_why_not_held(ms_ctx *c, const Sync__Table *m, const char *clash)
{
	return why_not_held(c, m, clash);
}

int
ms_object_type(ms_ctx *c, const char *name, char **type)
{
	return object_type(c, name, type);
}

int
ms_table_take(ms_ctx *c, const ms_tbl *t, char **host)
{
	return take(c, t, host);
}

int
ms_table_rebuild(ms_ctx *c, const ms_tbl *t)
{
	return rebuild(c, t);
}

int
ms_table_finish(ms_ctx *c, Sync__Table *m, const ms_tbl *t, int position)
{
	int			rc = indexes(c, t);

	if (rc == SQLITE_OK)
		rc = triggers(c, t);
	if (rc == SQLITE_OK)
		rc = store(c, m, position);
	return rc;
}

int
ms_table_store(ms_ctx *c, Sync__Table *m, int position)
{
	return store(c, m, position);
}

int
ms_table_untrigger(ms_ctx *c, const char *name)
{
	return drop_triggers(c, name);
}

bool
ms_table_failure(int rc)
{
	return table_failure(rc);
}

int
ms_table_indexes(ms_ctx *c, const ms_tbl *t)
{
	return indexes(c, t);
}

int
ms_table_triggers(ms_ctx *c, const ms_tbl *t)
{
	return triggers(c, t);
}
