/*
** schema.c - the replica's tables as the last snapshot declared them.
**
** A snapshot's Begin carries the Table message of every mirrored table; each
** is stored in _sync_tables as it came, so that after a restart the replica
** still knows keys, foreign keys, owned columns and codecs.  Applying a Begin
** creates the tables a new file lacks (key as PRIMARY KEY, key columns NOT
** NULL, columns typed INTEGER, REAL, TEXT or BLOB, the retired column as
** INTEGER), adds the columns an older file lacks, rebuilds a table whose
** primary key is not the declared key, indexes the columns of every foreign
** key and the retired column, and installs the noting triggers:
**
**   record table       AFTER INSERT, UPDATE, DELETE: note the row (the old
**                      key too when an update changed it)
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
** collides in SQLite's case-insensitive names, a REAL or BLOB key, DDL that
** fails) is left out with the reason in last_error; its rows are refused.
** A table the new schema no longer names stops being mirrored: its triggers
** and notes go, its rows stay as a local table's.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "key.h"

static int
col_index(const Sync__Table *m, const char *name)
{
	for (size_t i = 0; i < m->n_columns; i++)
		if (strcmp(m->columns[i]->name, name) == 0)
			return (int) i;
	return -1;
}

/* key_sql: the canonical key of a row in SQL; alias is "NEW.", "OLD." or "" */
static char *
key_sql(ms_ctx *c, const ms_tbl *t, const char *alias)
{
	ms_buf		b = {0};
	char	   *out;

	for (int k = 0; k < t->nkey; k++)
	{
		const char *q = t->cols[t->key[k]].q;

		if (k > 0)
			ms_buf_str(&b, " || ");
		ms_buf_printf(&b, "length(CAST(CAST(%s%s AS TEXT) AS BLOB)) || ':' || CAST(%s%s AS TEXT)",
					  alias, q, alias, q);
	}
	out = b.oom ? NULL : ms_strdup(&c->arena, b.data);
	ms_buf_free(&b);
	return out;
}

/* tbl_build: the in-memory description of a checked Table message */
static int
tbl_build(ms_ctx *c, Sync__Table *m, ms_tbl *t)
{
	ms_buf		b = {0};
	ProtobufCAllocator rows = ms_arena_allocator(&c->arena);
	ms_row_column *rcols;

	memset(t, 0, sizeof *t);
	t->msg = m;
	t->name = m->name;
	t->q = ms_printf(&c->arena, "\"%w\"", m->name);
	t->lit = ms_printf(&c->arena, "%Q", m->name);
	t->setting = strcmp(m->mirror, "setting") == 0;
	t->record = t->setting || strcmp(m->mirror, "record") == 0;
	t->proto = strcmp(m->codec, "proto") == 0;
	t->ncols = (int) m->n_columns;
	t->cols = ms_alloc(&c->arena, sizeof(ms_col) * m->n_columns);
	t->nkey = (int) m->n_key;
	t->key = ms_alloc(&c->arena, sizeof(int) * m->n_key);
	t->nfk = (int) m->n_foreign_keys;
	t->fks = ms_alloc(&c->arena, sizeof(ms_fk) * (m->n_foreign_keys + 1));
	rcols = ms_alloc(&c->arena, sizeof(ms_row_column) * (m->n_columns + 1));
	if (t->q == NULL || t->lit == NULL || t->cols == NULL || t->key == NULL || t->fks == NULL ||
		rcols == NULL)
		return SQLITE_NOMEM;
	t->retired = m->retired[0] ? col_index(m, m->retired) : -1;
	t->origin = m->origin[0] ? col_index(m, m->origin) : -1;
	for (int i = 0; i < t->ncols; i++)
	{
		const Sync__Column *mc = m->columns[i];
		ms_col	   *col = &t->cols[i];

		col->name = mc->name;
		col->q = ms_printf(&c->arena, "\"%w\"", mc->name);
		if (col->q == NULL)
			return SQLITE_NOMEM;
		/* checked (wire.c): one of the four */
		if (!ms_type_parse(mc->type, &col->type))
			col->type = MS_TEXT;
		col->owned = mc->replica_owned;
		col->field = mc->field;
		col->retired = i == t->retired;
		col->json = strcmp(mc->server_type, "json") == 0 || strcmp(mc->server_type, "jsonb") == 0;
		if (col->retired)
			col->type = MS_INTEGER;
		/* the retired column is the replica's own: no field of the server's is it */
		rcols[i] = (ms_row_column) {col->name, col->type, col->retired ? 0 : col->field};
	}
	if (!ms_row_shape_init(&t->shape, t->name, rcols, t->ncols, &rows))
		return SQLITE_NOMEM;
	for (int k = 0; k < t->nkey; k++)
	{
		t->key[k] = col_index(m, m->key[k]);
		t->cols[t->key[k]].key = true;
		if (t->key[k] == t->origin)
			t->origin_in_key = true;
	}
	for (int i = 0; i < t->ncols; i++)
		if (t->cols[i].owned && !t->cols[i].key && !t->cols[i].retired)
			t->noted = true;
	if (t->record)
		t->noted = true;
	for (int f = 0; f < t->nfk; f++)
	{
		const Sync__ForeignKey *mf = m->foreign_keys[f];
		ms_fk	   *fk = &t->fks[f];

		fk->n = (int) mf->n_columns;
		fk->cols = ms_alloc(&c->arena, sizeof(int) * mf->n_columns);
		fk->refs = ms_alloc(&c->arena, sizeof(char *) * mf->n_columns);
		if (fk->cols == NULL || fk->refs == NULL)
			return SQLITE_NOMEM;
		fk->parent_name = mf->table;
		fk->parent = -1;
		for (int j = 0; j < fk->n; j++)
		{
			fk->cols[j] = col_index(m, mf->columns[j]);
			fk->refs[j] = ms_printf(&c->arena, "\"%w\"", mf->references[j]);
			if (fk->refs[j] == NULL)
				return SQLITE_NOMEM;
		}
	}
	t->keyexpr = key_sql(c, t, "");
	for (int k = 0; k < t->nkey; k++)
		ms_buf_printf(&b, "%s%s = ?%d", k ? " AND " : "", t->cols[t->key[k]].q, k + 1);
	t->keymatch = b.oom ? NULL : ms_strdup(&c->arena, b.data);
	b.len = 0;
	for (int k = 0; k < t->nkey; k++)
		ms_buf_printf(&b, "%s%s", k ? ", " : "", t->cols[t->key[k]].q);
	t->keycols = b.oom ? NULL : ms_strdup(&c->arena, b.data);
	ms_buf_free(&b);
	if (t->keyexpr == NULL || t->keymatch == NULL || t->keycols == NULL)
		return SQLITE_NOMEM;
	return SQLITE_OK;
}

static int
tbl_order(const void *a, const void *b)
{
	const ms_tbl *x = a;
	const ms_tbl *y = b;

	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	if (x->position != y->position)
		return x->position < y->position ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* the held table a foreign key points at, or -1 (not held, or not at its columns) */
static int
fk_parent(const ms_schema *s, const ms_fk *fk)
{
	for (int j = 0; j < s->n; j++)
	{
		const ms_tbl *p = &s->t[j];
		bool		all = true;

		if (strcmp(p->name, fk->parent_name) != 0)
			continue;
		for (int k = 0; k < fk->n && all; k++)
		{
			bool		found = false;

			for (int i = 0; i < p->ncols && !found; i++)
				found = strcmp(p->cols[i].q, fk->refs[k]) == 0;
			all = found;
		}
		return all ? j : -1;
	}
	return -1;
}

/* link foreign keys to the tables held, and order parents first */
static void
schema_link(ms_schema *s)
{
	bool		changed = true;

	for (int i = 0; i < s->n; i++)
	{
		s->t[i].depth = 0;
		for (int f = 0; f < s->t[i].nfk; f++)
			s->t[i].fks[f].parent = fk_parent(s, &s->t[i].fks[f]);
	}
	/* depth: longest chain of parents, cycles cut after n rounds */
	for (int round = 0; changed && round < s->n; round++)
	{
		changed = false;
		for (int i = 0; i < s->n; i++)
			for (int f = 0; f < s->t[i].nfk; f++)
			{
				int			p = s->t[i].fks[f].parent;

				if (p >= 0 && p != i && s->t[p].depth + 1 > s->t[i].depth)
				{
					s->t[i].depth = s->t[p].depth + 1;
					changed = true;
				}
			}
	}
	if (s->n > 1)
	{
		/* sort, then relink: parent indexes follow the new order */
		qsort(s->t, (size_t) s->n, sizeof(ms_tbl), tbl_order);
		for (int i = 0; i < s->n; i++)
			for (int f = 0; f < s->t[i].nfk; f++)
				s->t[i].fks[f].parent = fk_parent(s, &s->t[i].fks[f]);
	}
}

/* check: every table of the schema is in the file, with every column */
static int
schema_check(ms_ctx *c, ms_schema *s)
{
	sqlite3_stmt *st;
	int			rc;
	bool	   *seen;
	int			total = 0;
	int		   *base = ms_alloc(&c->arena, sizeof(int) * (size_t) (s->n + 1));

	if (base == NULL)
		return SQLITE_NOMEM;
	for (int i = 0; i < s->n; i++)
	{
		base[i] = total;
		total += s->t[i].ncols;
	}
	seen = ms_alloc(&c->arena, sizeof(bool) * (size_t) (total + 1));
	if (seen == NULL)
		return SQLITE_NOMEM;
	rc = ms_prepare(c, &st, "SELECT t.name, p.name FROM _sync_tables t, main.sqlite_master m, pragma_table_info(m.name) p"
					" WHERE m.type = 'table' AND m.name = t.name COLLATE NOCASE");
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *table = (const char *) sqlite3_column_text(st, 0);
		const char *col = (const char *) sqlite3_column_text(st, 1);

		rc = SQLITE_OK;
		for (int i = 0; i < s->n && table && col; i++)
		{
			if (strcmp(s->t[i].name, table) != 0)
				continue;
			for (int k = 0; k < s->t[i].ncols; k++)
				if (strcasecmp(s->t[i].cols[k].name, col) == 0)
					seen[base[i] + k] = true;
		}
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	for (int i = 0; i < s->n && rc == SQLITE_OK; i++)
	{
		ms_tbl	   *t = &s->t[i];
		int			missing = -1;
		int			present = 0;

		for (int k = 0; k < t->ncols; k++)
		{
			if (seen[base[i] + k])
				present++;
			else if (missing < 0)
				missing = k;
		}
		if (present == 0)
			t->broken = ms_printf(&c->arena, "table \"%s\" is not in the file", t->name);
		else if (missing >= 0)
			t->broken = ms_printf(&c->arena, "table \"%s\" has no column \"%s\"", t->name, t->cols[missing].name);
		if (missing >= 0 && t->broken == NULL)
			rc = SQLITE_NOMEM;
	}
	return rc;
}

int
ms_schema_load(ms_ctx *c)
{
	sqlite3_stmt *st = NULL;
	ProtobufCAllocator pa = ms_arena_allocator(&c->arena);
	int			rc = SQLITE_OK;
	int			cap = 0;
	ms_schema  *s = ms_alloc(&c->arena, sizeof(ms_schema));

	if (s == NULL)
		return SQLITE_NOMEM;
	c->schema = s;
	if (!c->have_state)
		return SQLITE_OK;
	rc = ms_prepare(c, &st, "SELECT count(*) FROM _sync_tables");
	if (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		cap = sqlite3_column_int(st, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc != SQLITE_OK)
		return rc;
	s->t = ms_alloc(&c->arena, sizeof(ms_tbl) * (size_t) (cap + 1));
	if (s->t == NULL)
		return SQLITE_NOMEM;
	rc = ms_prepare(c, &st, "SELECT name, schema, position FROM _sync_tables ORDER BY position, name");
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const uint8_t *blob = sqlite3_column_blob(st, 1);
		size_t		n = (size_t) sqlite3_column_bytes(st, 1);
		Sync__Table *m;
		char		reason[MS_REASON_MAX];

		rc = SQLITE_OK;
		if (s->n >= cap)
			break;
		m = sync__table__unpack(&pa, n, blob);
		if (m == NULL || !ms_table_check(m, reason))
		{
			rc = ms_fail(c, SQLITE_CORRUPT, "the stored schema of table \"%s\" cannot be read",
						 (const char *) sqlite3_column_text(st, 0));
			break;
		}
		rc = tbl_build(c, m, &s->t[s->n]);
		s->t[s->n].position = sqlite3_column_int(st, 2);
		s->n++;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	if (rc == SQLITE_OK)
		schema_link(s);
	if (rc == SQLITE_OK && s->n > 0)
		rc = schema_check(c, s);
	return rc;
}

ms_tbl *
ms_schema_find(ms_ctx *c, const char *name)
{
	if (c->schema == NULL)
		return NULL;
	for (int i = 0; i < c->schema->n; i++)
		if (strcmp(c->schema->t[i].name, name) == 0)
			return &c->schema->t[i];
	return NULL;
}

/* ---- keys ------------------------------------------------------------- */

int
ms_key_parts(ms_ctx *c, const char *key, size_t len, const char ***parts, size_t **lens)
{
	int			n = ms_key_count_parts(key, len);
	size_t		pos = 0;

	if (n <= 0)
		return -1;
	*parts = ms_alloc(&c->arena, sizeof(char *) * (size_t) n);
	*lens = ms_alloc(&c->arena, sizeof(size_t) * (size_t) n);
	if (*parts == NULL || *lens == NULL)
		return -2;
	for (int i = 0; i < n; i++)
		ms_key_next_part(key, len, &pos, &(*parts)[i], &(*lens)[i]);
	return n;
}

int
ms_bind_key(ms_ctx *c, sqlite3_stmt *st, int first, const ms_tbl *t,
			const char *key, size_t len)
{
	size_t		pos = 0;
	const char *part;
	size_t		plen;
	int			n = 0;
	int			r;

	(void) c;
	while ((r = ms_key_next_part(key, len, &pos, &part, &plen)) == 1)
	{
		if (n >= t->nkey)
			return SQLITE_RANGE;
		sqlite3_bind_text(st, first + n, part, (int) plen, SQLITE_STATIC);
		n++;
	}
	if (r < 0 || n != t->nkey)
		return SQLITE_RANGE;
	return SQLITE_OK;
}

void
ms_key_append(ms_buf *out, const char *part, size_t n)
{
	char		head[MS_KEY_HEAD_MAX];

	ms_buf_add(out, head, ms_key_part_head(head, n));
	ms_buf_add(out, part, n);
}

/* in decimal, by hand: a digest writes one for every row it counts */
void
ms_key_append_int(ms_buf *out, sqlite3_int64 i)
{
	char		num[24];
	int			k = 24;
	uint64_t	v = i < 0 ? (uint64_t) 0 - (uint64_t) i : (uint64_t) i;

	do
	{
		num[--k] = (char) ('0' + v % 10);
		v /= 10;
	} while (v > 0);
	if (i < 0)
		num[--k] = '-';
	ms_key_append(out, num + k, (size_t) (24 - k));
}

int
ms_column_key(ms_ctx *c, sqlite3_stmt *st, int first, int n, ms_buf *out)
{
	(void) c;
	out->len = 0;
	for (int i = first; i < first + n; i++)
	{
		int			type = sqlite3_column_type(st, i);

		if (type == SQLITE_NULL)
			return SQLITE_MISMATCH;
		if (type == SQLITE_INTEGER)
			ms_key_append_int(out, sqlite3_column_int64(st, i));
		else
		{
			const char *p = (const char *) sqlite3_column_text(st, i);

			if (p == NULL)
				return SQLITE_NOMEM;
			ms_key_append(out, p, (size_t) sqlite3_column_bytes(st, i));
		}
	}
	return out->oom ? SQLITE_NOMEM : SQLITE_OK;
}

/* ---- applying a Begin ------------------------------------------------- */

static bool
reserved_name(const char *name)
{
	return strncasecmp(name, "_sync_", 6) == 0 || strncasecmp(name, "sqlite_", 7) == 0;
}

/* why_not_held: NULL when the replica can hold this table */
static char *
why_not_held(ms_ctx *c, const Sync__Table *m, Sync__Table **held, int nheld)
{
	if (reserved_name(m->name))
		return ms_printf(&c->arena, "table \"%s\" has a name reserved by SQLite or magic_sync", m->name);
	for (int i = 0; i < nheld; i++)
		if (strcasecmp(held[i]->name, m->name) == 0)
			return ms_printf(&c->arena, "tables \"%s\" and \"%s\" are one table in SQLite, whose names ignore case",
							 held[i]->name, m->name);
	for (size_t i = 0; i < m->n_columns; i++)
		for (size_t j = 0; j < i; j++)
			if (strcasecmp(m->columns[i]->name, m->columns[j]->name) == 0)
				return ms_printf(&c->arena, "columns \"%s\" and \"%s\" of table \"%s\" are one column in SQLite",
								 m->columns[j]->name, m->columns[i]->name, m->name);
	for (size_t k = 0; k < m->n_key; k++)
	{
		const char *type = m->columns[col_index(m, m->key[k])]->type;

		if (strcmp(type, "INTEGER") != 0 && strcmp(type, "TEXT") != 0)
			return ms_printf(&c->arena, "key column \"%s\" of table \"%s\" is %s: a key is INTEGER or TEXT",
							 m->key[k], m->name, type);
		if (m->retired[0] && strcmp(m->key[k], m->retired) == 0)
			return ms_printf(&c->arena, "the retired column \"%s\" of table \"%s\" is a key column",
							 m->retired, m->name);
	}
	return NULL;
}

/* the columns of a CREATE TABLE, with the key as PRIMARY KEY */
static char *
table_sql(ms_ctx *c, const ms_tbl *t, const char *name_q)
{
	ms_buf		b = {0};
	char	   *out;

	ms_buf_printf(&b, "CREATE TABLE %s(", name_q);
	for (int i = 0; i < t->ncols; i++)
		ms_buf_printf(&b, "%s%s %s%s", i ? ", " : "", t->cols[i].q, ms_type_name(t->cols[i].type),
					  t->cols[i].key ? " NOT NULL" : "");
	ms_buf_printf(&b, ", PRIMARY KEY (%s))", t->keycols);
	out = b.oom ? NULL : ms_strdup(&c->arena, b.data);
	ms_buf_free(&b);
	return out;
}

/* what exists under this name: "table", "view"..., or NULL */
static int
object_type(ms_ctx *c, const char *name, char **type)
{
	sqlite3_stmt *st;
	int			rc;

	*type = NULL;
	rc = ms_prepare(c, &st, "SELECT type FROM main.sqlite_master WHERE name = ?1 COLLATE NOCASE"
					" AND type IN ('table', 'view') ");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		rc = ms_step(c, st);
		if (rc == SQLITE_ROW)
		{
			*type = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 0));
			rc = *type ? SQLITE_OK : SQLITE_NOMEM;
		}
		else if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

/* rebuild: the table's primary key is not the declared key */
static int
rebuild(ms_ctx *c, const ms_tbl *t, char **have, int nhave)
{
	ms_buf		cols = {0};
	int			rc;
	char	   *create = table_sql(c, t, "\"_sync_rebuild\"");

	if (create == NULL)
		return SQLITE_NOMEM;
	for (int i = 0; i < t->ncols; i++)
		for (int j = 0; j < nhave; j++)
			if (strcasecmp(have[j], t->cols[i].name) == 0)
				ms_buf_printf(&cols, "%s%s", cols.len ? ", " : "", t->cols[i].q);
	if (cols.oom)
	{
		ms_buf_free(&cols);
		return SQLITE_NOMEM;
	}
	rc = ms_exec(c, "DROP TABLE IF EXISTS \"_sync_rebuild\"; %s", create);
	if (rc == SQLITE_OK && cols.len > 0)
		rc = ms_exec(c, "INSERT OR IGNORE INTO \"_sync_rebuild\"(%s) SELECT %s FROM %s",
					 cols.data, cols.data, t->q);
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "DROP TABLE %s; ALTER TABLE \"_sync_rebuild\" RENAME TO %s", t->q, t->q);
	ms_buf_free(&cols);
	return rc;
}

/* create the table, or add what it lacks */
static int
create_or_alter(ms_ctx *c, const ms_tbl *t)
{
	char	   *type;
	int			rc = object_type(c, t->name, &type);
	sqlite3_stmt *st = NULL;
	char	  **have = NULL;
	int		   *pk = NULL;
	int			nhave = 0;
	int			cap = 0;
	bool		same_key = true;
	int			npk = 0;

	if (rc != SQLITE_OK)
		return rc;
	if (type == NULL)
	{
		char	   *sql = table_sql(c, t, t->q);

		return sql ? ms_exec(c, "%s", sql) : SQLITE_NOMEM;
	}
	if (strcmp(type, "table") != 0)
		return ms_fail(c, SQLITE_ERROR, "a %s named \"%s\" is in the way", type, t->name);
	rc = ms_prepare(c, &st, "SELECT name, pk FROM pragma_table_info(?1)");
	if (rc == SQLITE_OK)
		sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		rc = SQLITE_OK;
		if (nhave == cap)
		{
			int			ncap = cap ? cap * 2 : 16;
			char	  **h = ms_alloc(&c->arena, sizeof(char *) * (size_t) ncap);
			int		   *p = ms_alloc(&c->arena, sizeof(int) * (size_t) ncap);

			if (h == NULL || p == NULL)
			{
				rc = SQLITE_NOMEM;
				break;
			}
			if (nhave)
			{
				memcpy(h, have, sizeof(char *) * (size_t) nhave);
				memcpy(p, pk, sizeof(int) * (size_t) nhave);
			}
			have = h;
			pk = p;
			cap = ncap;
		}
		have[nhave] = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 0));
		pk[nhave] = sqlite3_column_int(st, 1);
		if (have[nhave] == NULL)
			rc = SQLITE_NOMEM;
		nhave++;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	if (rc != SQLITE_OK)
		return rc;
	/* the primary key, in its order, against the declared key */
	for (int j = 0; j < nhave; j++)
		if (pk[j] > 0)
			npk++;
	if (npk != t->nkey)
		same_key = false;
	for (int j = 0; j < nhave && same_key; j++)
		if (pk[j] > 0 && strcasecmp(have[j], t->cols[t->key[pk[j] - 1]].name) != 0)
			same_key = false;
	if (!same_key)
		return rebuild(c, t, have, nhave);
	for (int i = 0; i < t->ncols && rc == SQLITE_OK; i++)
	{
		bool		found = false;

		for (int j = 0; j < nhave && !found; j++)
			found = strcasecmp(have[j], t->cols[i].name) == 0;
		if (!found)
			rc = ms_exec(c, "ALTER TABLE %s ADD COLUMN %s %s", t->q, t->cols[i].q,
						 ms_type_name(t->cols[i].type));
	}
	return rc;
}

/* ensure one index is as we write it: kept when its text is the same */
static int
ensure_index(ms_ctx *c, const char *name, const char *sql, char ***keep, int *nkeep)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "SELECT sql FROM main.sqlite_master WHERE type = 'index' AND name = ?1");
	bool		same = false;
	bool		exists = false;

	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
		rc = ms_step(c, st);
		if (rc == SQLITE_ROW)
		{
			exists = true;
			same = sqlite3_column_text(st, 0) != NULL &&
				strcmp((const char *) sqlite3_column_text(st, 0), sql) == 0;
		}
		if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_OK && exists && !same)
		rc = ms_exec(c, "DROP INDEX \"%w\"", name);
	if (rc == SQLITE_OK && !same)
		rc = ms_exec(c, "%s", sql);
	if (rc == SQLITE_OK)
		(*keep)[(*nkeep)++] = (char *) name;
	return rc;
}

/*
 * unique_indexes: the server's unique indexes that travel (docs/protocol.md
 * 5.3).  One the rows held cannot take yet (two hold one value, one of them
 * on its way to another) is left out and said, and made at the table's
 * next change or snapshot.
 */
static int
unique_indexes(ms_ctx *c, const ms_tbl *t, char ***keep, int *nkeep)
{
	int			rc = SQLITE_OK;

	for (size_t u = 0; u < t->msg->n_unique && rc == SQLITE_OK; u++)
	{
		const Sync__Unique *ui = t->msg->unique[u];
		ms_buf		cols = {0};
		char	   *name = ms_printf(&c->arena, "_sync_uq_%s_%s", t->name, ui->name);
		char	   *sql;

		for (size_t j = 0; j < ui->n_columns; j++)
			ms_buf_printf(&cols, "%s\"%w\"", j ? ", " : "", ui->columns[j]);
		sql = (name && !cols.oom) ? ms_printf(&c->arena, "CREATE UNIQUE INDEX \"%w\" ON %s(%s)", name, t->q, cols.data) : NULL;
		ms_buf_free(&cols);
		if (sql == NULL)
			return SQLITE_NOMEM;
		rc = ms_begin(c, "_sync_unique");
		if (rc == SQLITE_OK)
			rc = ensure_index(c, name, sql, keep, nkeep);
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

/* indexes: the columns of every foreign key, the retired column, the unique indexes that travel */
static int
indexes(ms_ctx *c, const ms_tbl *t)
{
	char	  **keep = ms_alloc(&c->arena, sizeof(char *) * (size_t) (t->nfk + t->msg->n_unique + 2));
	int			nkeep = 0;
	int			rc = SQLITE_OK;
	sqlite3_stmt *st = NULL;
	char	  **drop;
	int			ndrop = 0;

	if (keep == NULL)
		return SQLITE_NOMEM;
	for (int f = 0; f < t->nfk && rc == SQLITE_OK; f++)
	{
		ms_buf		cols = {0};
		char	   *name = ms_printf(&c->arena, "_sync_fk_%s_%d", t->name, f + 1);
		char	   *sql;

		for (int j = 0; j < t->fks[f].n; j++)
			ms_buf_printf(&cols, "%s%s", j ? ", " : "", t->cols[t->fks[f].cols[j]].q);
		sql = (name && !cols.oom) ? ms_printf(&c->arena, "CREATE INDEX \"%w\" ON %s(%s)", name, t->q, cols.data) : NULL;
		ms_buf_free(&cols);
		rc = sql ? ensure_index(c, name, sql, &keep, &nkeep) : SQLITE_NOMEM;
	}
	if (rc == SQLITE_OK && t->retired >= 0)
	{
		char	   *name = ms_printf(&c->arena, "_sync_retired_%s", t->name);
		char	   *sql = name ? ms_printf(&c->arena, "CREATE INDEX \"%w\" ON %s(%s) WHERE %s IS NOT NULL",
										   name, t->q, t->cols[t->retired].q, t->cols[t->retired].q) : NULL;

		rc = sql ? ensure_index(c, name, sql, &keep, &nkeep) : SQLITE_NOMEM;
	}
	if (rc == SQLITE_OK)
		rc = unique_indexes(c, t, &keep, &nkeep);
	if (rc != SQLITE_OK)
		return rc;
	/* our indexes of this table that the schema no longer asks for */
	drop = ms_alloc(&c->arena, sizeof(char *) * 64);
	if (drop == NULL)
		return SQLITE_NOMEM;
	rc = ms_prepare(c, &st, "SELECT name FROM main.sqlite_master WHERE type = 'index' AND tbl_name = ?1"
					" AND (substr(name, 1, 9) = '_sync_fk_' OR substr(name, 1, 14) = '_sync_retired_'"
					"      OR substr(name, 1, 9) = '_sync_uq_')");
	if (rc == SQLITE_OK)
		sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *name = (const char *) sqlite3_column_text(st, 0);
		bool		kept = false;

		rc = SQLITE_OK;
		for (int i = 0; i < nkeep; i++)
			kept |= strcmp(keep[i], name) == 0;
		if (!kept && ndrop < 64)
			drop[ndrop++] = ms_strdup(&c->arena, name);
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	for (int i = 0; i < ndrop && rc == SQLITE_OK; i++)
		rc = drop[i] ? ms_exec(c, "DROP INDEX \"%w\"", drop[i]) : SQLITE_NOMEM;
	return rc;
}

static int
drop_triggers(ms_ctx *c, const char *name)
{
	return ms_exec(c, "DROP TRIGGER IF EXISTS \"_sync_ins_%w\"; DROP TRIGGER IF EXISTS \"_sync_upd_%w\";"
				   " DROP TRIGGER IF EXISTS \"_sync_del_%w\"; DROP TRIGGER IF EXISTS \"_sync_guard_ins_%w\";"
				   " DROP TRIGGER IF EXISTS \"_sync_guard_upd_%w\"; DROP TRIGGER IF EXISTS \"_sync_guard_del_%w\";"
				   " DROP TRIGGER IF EXISTS \"_sync_hlc_ins_%w\"; DROP TRIGGER IF EXISTS \"_sync_hlc_upd_%w\"",
				   name, name, name, name, name, name, name, name);
}

/*
 * guards: a catalog's rows, and its columns the replica does not own, are the
 * server's: a local write of them would never go up and would outlive every
 * digest (which covers keys only).  So outside sync_apply each fails, naming
 * the table and the column; the owned columns stay writable.
 */
static int
guards(ms_ctx *c, const ms_tbl *t, const char *quiet)
{
	ms_buf		cases = {0};
	int			rc;
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
	rc = ms_exec(c, "CREATE TRIGGER \"_sync_guard_ins_%w\" BEFORE INSERT ON %s WHEN %s BEGIN"
				 " SELECT RAISE(ABORT, %Q); END", t->name, t->q, quiet, ins);
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "CREATE TRIGGER \"_sync_guard_del_%w\" BEFORE DELETE ON %s WHEN %s BEGIN"
					 " SELECT RAISE(ABORT, %Q); END", t->name, t->q, quiet, del);
	if (rc == SQLITE_OK && cases.len > 0)
		rc = ms_exec(c, "CREATE TRIGGER \"_sync_guard_upd_%w\" BEFORE UPDATE ON %s WHEN %s BEGIN"
					 " SELECT CASE%s END; END", t->name, t->q, quiet, cases.data);
	ms_buf_free(&cases);
	return rc;
}

static int
triggers(ms_ctx *c, const ms_tbl *t)
{
	static const char *const quiet = "(SELECT applying FROM _sync_state WHERE id = 1) = 0";
	static const char *const noted =
	"ON CONFLICT (tbl, key) DO UPDATE SET writes = writes + 1, send_id = NULL,"
	" sent_at = NULL, set_aside = NULL";
	char	   *knew = key_sql(c, t, "NEW.");
	char	   *kold = key_sql(c, t, "OLD.");
	char	   *why = ms_printf(&c->arena, "magic_sync: a key column of table %s is NULL", t->name);
	char	   *raise = why ? ms_printf(&c->arena, "RAISE(ABORT, %Q)", why) : NULL;
	int			rc = drop_triggers(c, t->name);
	ms_buf		changed = {0};
	ms_buf		of = {0};

	if (knew == NULL || kold == NULL || raise == NULL)
		return SQLITE_NOMEM;
	if (rc == SQLITE_OK && !t->record)
		rc = guards(c, t, quiet);
	if (rc != SQLITE_OK || !t->noted)
		return rc;
	if (t->record)
	{
		rc = ms_exec(c, "CREATE TRIGGER \"_sync_ins_%w\" AFTER INSERT ON %s WHEN %s BEGIN"
					 " INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s; END",
					 t->name, t->q, quiet, t->lit, knew, raise, noted);
		if (rc == SQLITE_OK)
			rc = ms_exec(c, "CREATE TRIGGER \"_sync_upd_%w\" AFTER UPDATE ON %s WHEN %s BEGIN"
						 " INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s;"
						 " INSERT INTO _sync_notes(tbl, key) SELECT %s, %s WHERE (%s) IS NOT (%s) %s; END",
						 t->name, t->q, quiet, t->lit, knew, raise, noted,
						 t->lit, kold, kold, knew, noted);
		if (rc == SQLITE_OK)
			rc = ms_exec(c, "CREATE TRIGGER \"_sync_del_%w\" AFTER DELETE ON %s WHEN %s BEGIN"
						 " INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s; END",
						 t->name, t->q, quiet, t->lit, kold, raise, noted);
		/* version => 'hlc': the row's version stamped by the replica's clock */
		if (rc == SQLITE_OK)
			rc = ms_hlc_triggers(c, t, quiet);
		return rc;
	}
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
	else
		rc = ms_exec(c, "CREATE TRIGGER \"_sync_upd_%w\" AFTER UPDATE OF %s ON %s WHEN %s AND (%s) BEGIN"
					 " INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s; END",
					 t->name, of.data, t->q, quiet, changed.data, t->lit, knew, raise, noted);
	ms_buf_free(&of);
	ms_buf_free(&changed);
	return rc;
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

/*
 * rearm_if_changed: a table whose stored Table is not m: the notes of rows
 * written and sent go again, in m's schema (the server files none of a
 * send made in another: docs/protocol.md 5.3).
 */
static int
rearm_if_changed(ms_ctx *c, Sync__Table *m)
{
	size_t		n = sync__table__get_packed_size(m);
	uint8_t    *buf = sqlite3_malloc64(n ? n : 1);
	sqlite3_stmt *st;
	bool		same = false;
	int			rc;

	if (buf == NULL)
		return SQLITE_NOMEM;
	sync__table__pack(m, buf);
	rc = ms_prepare(c, &st, "SELECT schema FROM _sync_tables WHERE name = ?1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, m->name, -1, SQLITE_STATIC);
		rc = ms_step(c, st);
		if (rc == SQLITE_ROW)
			same = (size_t) sqlite3_column_bytes(st, 0) == n &&
				(n == 0 || memcmp(sqlite3_column_blob(st, 0), buf, n) == 0);
		if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	sqlite3_free(buf);
	if (rc == SQLITE_OK && !same)
		rc = ms_exec(c, "UPDATE _sync_notes SET send_id = NULL, sent_at = NULL WHERE tbl = %Q", m->name);
	return rc;
}

/* a failure the table's own savepoint absorbs: the table is not held */
static bool
table_failure(int rc)
{
	return rc == SQLITE_ERROR || rc == SQLITE_CONSTRAINT || rc == SQLITE_MISMATCH ||
		rc == SQLITE_LOCKED || rc == SQLITE_RANGE || rc == SQLITE_TOOBIG;
}

int
ms_schema_begin(ms_ctx *c, Sync__Begin *b)
{
	ms_schema  *old = c->schema;
	Sync__Table **held = ms_alloc(&c->arena, sizeof(Sync__Table *) * (b->n_schema + 1));
	int			nheld = 0;
	int			rc = SQLITE_OK;

	if (held == NULL)
		return SQLITE_NOMEM;
	/* rows written in a table whose schema changes go up again, in the new one */
	for (size_t i = 0; i < b->n_schema && rc == SQLITE_OK; i++)
		rc = rearm_if_changed(c, b->schema[i]);
	/* the tables of the last schema stop being mirrored first ... */
	for (int i = 0; old && i < old->n && rc == SQLITE_OK; i++)
		rc = drop_triggers(c, old->t[i].name);
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "DELETE FROM _sync_tables");
	/* ... then each table of this one is made as it says */
	for (size_t i = 0; i < b->n_schema && rc == SQLITE_OK; i++)
	{
		Sync__Table *m = b->schema[i];
		char	   *why = why_not_held(c, m, held, nheld);
		ms_tbl		t;

		if (why != NULL)
		{
			rc = ms_state_error(c, "%s", why);
			continue;
		}
		rc = ms_begin(c, "_sync_table");
		if (rc != SQLITE_OK)
			break;
		rc = tbl_build(c, m, &t);
		if (rc == SQLITE_OK)
			rc = create_or_alter(c, &t);
		if (rc == SQLITE_OK)
			rc = indexes(c, &t);
		if (rc == SQLITE_OK)
			rc = triggers(c, &t);
		if (rc == SQLITE_OK)
			rc = store(c, m, (int) i);
		if (rc == SQLITE_OK)
			held[nheld++] = m;
		if (table_failure(rc))
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
	for (int i = 0; rc == SQLITE_OK && i < c->schema->n; i++)
		if (!c->schema->t[i].noted)
			rc = ms_exec(c, "DELETE FROM _sync_notes WHERE tbl = %Q", c->schema->t[i].name);
	return rc;
}

/* ---- for schema changes (evolve.c) ------------------------------------- */

int
ms_tbl_build(ms_ctx *c, Sync__Table *m, ms_tbl *t)
{
	return tbl_build(c, m, t);
}

char *
ms_why_not_held(ms_ctx *c, const Sync__Table *m, Sync__Table **held, int nheld)
{
	return why_not_held(c, m, held, nheld);
}

int
ms_object_type(ms_ctx *c, const char *name, char **type)
{
	return object_type(c, name, type);
}

int
ms_table_make(ms_ctx *c, const ms_tbl *t)
{
	return create_or_alter(c, t);
}

int
ms_table_rebuild(ms_ctx *c, const ms_tbl *t, char **have, int nhave)
{
	return rebuild(c, t, have, nhave);
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
ms_table_untrigger(ms_ctx *c, const char *name)
{
	return drop_triggers(c, name);
}

bool
ms_table_failure(int rc)
{
	return table_failure(rc);
}
