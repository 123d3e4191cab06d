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

#include "key.h"

/* a table of more columns than this has its columns looked up in a map */
#define COLMAP_MIN 16

/* ---- columns by name ---------------------------------------------------- */

int
ms_tbl_column(const ms_tbl *t, const char *name, size_t n)
{
	if (t->colmap != NULL)
	{
		const ms_col *col = ms_map_get(t->colmap, name, n);

		return col != NULL ? (int) (col - t->cols) : -1;
	}
	for (int i = 0; i < t->ncols; i++)
		if (strncmp(t->cols[i].name, name, n) == 0 && t->cols[i].name[n] == '\0')
			return i;
	return -1;
}

static int
column_of(const ms_tbl *t, const char *name)
{
	return ms_tbl_column(t, name, strlen(name));
}

/*
 * A set of names as SQLite compares them (case folded), for matching the
 * columns of a Table against the file's: a list, or a map once it is long.
 */
typedef struct names
{
	int			n;
	const char **name;
	ms_map	   *map;			/* name -> its slot in name */
} names;

static int
names_make(ms_ctx *c, names *ns, const char **list, int n)
{
	ns->n = n;
	ns->name = list;
	ns->map = NULL;
	if (n <= COLMAP_MIN)
		return SQLITE_OK;
	ns->map = ms_alloc(&c->arena, sizeof(ms_map));
	if (ns->map == NULL)
		return SQLITE_NOMEM;
	ms_map_init(ns->map, true);
	for (int i = n - 1; i >= 0; i--)	/* the first of equal names wins */
		if (ms_map_put(&c->arena, ns->map, list[i], strlen(list[i]), &list[i]) != SQLITE_OK)
			return SQLITE_NOMEM;
	return SQLITE_OK;
}

/* names_find: the slot of a name (folded), or -1 */
static int
names_find(const names *ns, const char *name)
{
	if (ns->map != NULL)
	{
		const char **p = ms_map_get(ns->map, name, strlen(name));

		return p != NULL ? (int) (p - ns->name) : -1;
	}
	for (int i = 0; i < ns->n; i++)
		if (strcasecmp(ns->name[i], name) == 0)
			return i;
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
	for (int i = 0; i < t->ncols; i++)
		t->cols[i].name = m->columns[i]->name;
	if (t->ncols > COLMAP_MIN)
	{
		if ((t->colmap = ms_alloc(&c->arena, sizeof(ms_map))) == NULL)
			return SQLITE_NOMEM;
		ms_map_init(t->colmap, false);
		/* names are unique (wire.c) */
		for (int i = 0; i < t->ncols; i++)
			if (ms_map_put(&c->arena, t->colmap, t->cols[i].name, strlen(t->cols[i].name), &t->cols[i]) != SQLITE_OK)
				return SQLITE_NOMEM;
	}
	t->retired = m->retired[0] ? column_of(t, m->retired) : -1;
	t->origin = m->origin[0] ? column_of(t, m->origin) : -1;
	for (int i = 0; i < t->ncols; i++)
	{
		const Sync__Column *mc = m->columns[i];
		ms_col	   *col = &t->cols[i];

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
		t->key[k] = column_of(t, m->key[k]);
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
		fk->ref_names = (const char **) mf->references;
		if (fk->cols == NULL || fk->refs == NULL)
			return SQLITE_NOMEM;
		fk->parent_name = mf->table;
		fk->parent = -1;
		for (int j = 0; j < fk->n; j++)
		{
			fk->cols[j] = column_of(t, mf->columns[j]);
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

/* ---- the schema as stored ------------------------------------------------- */

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

/* by_name: the schema's names mapped to their tables, as the array is now */
static int
by_name(ms_ctx *c, ms_schema *s)
{
	ms_map_init(&s->byname, false);
	for (int i = 0; i < s->n; i++)
		if (ms_map_put(&c->arena, &s->byname, s->t[i].name, strlen(s->t[i].name), &s->t[i]) != SQLITE_OK)
			return SQLITE_NOMEM;
	return SQLITE_OK;
}

/* the held table a foreign key points at, or -1 (not held, or not at its columns) */
static int
fk_parent(const ms_schema *s, const ms_fk *fk)
{
	const ms_tbl *p = ms_map_get(&s->byname, fk->parent_name, strlen(fk->parent_name));

	if (p == NULL)
		return -1;
	for (int k = 0; k < fk->n; k++)
		if (column_of(p, fk->ref_names[k]) < 0)
			return -1;
	return (int) (p - s->t);
}

/*
 * depths: each table's longest chain of parents, by a walk that goes up
 * each table once (a foreign key that closes a cycle is not followed)
 */
static int
depths(ms_ctx *c, ms_schema *s)
{
	signed char *state = ms_alloc(&c->arena, (size_t) s->n + 1);	/* 0 not seen, 1 on the walk, 2 done */
	int		   *at = ms_alloc(&c->arena, sizeof(int) * (size_t) (s->n + 1));
	int		   *next = ms_alloc(&c->arena, sizeof(int) * (size_t) (s->n + 1));

	if (state == NULL || at == NULL || next == NULL)
		return SQLITE_NOMEM;
	for (int root = 0; root < s->n; root++)
	{
		int			top = 0;

		if (state[root] != 0)
			continue;
		at[0] = root;
		next[0] = 0;
		state[root] = 1;
		while (top >= 0)
		{
			ms_tbl	   *t = &s->t[at[top]];

			if (next[top] < t->nfk)
			{
				int			p = t->fks[next[top]++].parent;

				if (p < 0 || p == at[top])
					continue;
				if (state[p] == 0)
				{
					state[p] = 1;
					top++;
					at[top] = p;
					next[top] = 0;
				}
				else if (state[p] == 2 && s->t[p].depth + 1 > t->depth)
					t->depth = s->t[p].depth + 1;
				continue;
			}
			state[at[top]] = 2;
			top--;
			if (top >= 0 && t->depth + 1 > s->t[at[top]].depth)
				s->t[at[top]].depth = t->depth + 1;
		}
	}
	return SQLITE_OK;
}

/* link foreign keys to the tables held, and order parents first */
static int
schema_link(ms_ctx *c, ms_schema *s)
{
	int			rc = by_name(c, s);

	for (int i = 0; i < s->n && rc == SQLITE_OK; i++)
	{
		s->t[i].depth = 0;
		for (int f = 0; f < s->t[i].nfk; f++)
			s->t[i].fks[f].parent = fk_parent(s, &s->t[i].fks[f]);
	}
	if (rc == SQLITE_OK)
		rc = depths(c, s);
	if (rc == SQLITE_OK && s->n > 1)
	{
		/* sort, then relink: parent indexes follow the new order */
		qsort(s->t, (size_t) s->n, sizeof(ms_tbl), tbl_order);
		rc = by_name(c, s);
		for (int i = 0; i < s->n && rc == SQLITE_OK; i++)
			for (int f = 0; f < s->t[i].nfk; f++)
				s->t[i].fks[f].parent = fk_parent(s, &s->t[i].fks[f]);
	}
	return rc;
}

/* host_has: what of the host's has the name of a table the replica did not make: why it waits */
static char *
host_has(ms_ctx *c, const ms_object *o, const char *table)
{
	return ms_printf(&c->arena, "the host's own %s \"%s\" has the name of table \"%s\": the replica holds"
					 " the server's table once the host renames its own", o->type, o->name, table);
}

/*
 * check: every table of the schema is in the file, with every column (one
 * table_info each, not a scan of sqlite_master); one the replica never made
 * waits for the host's name, or for the next message
 */
static int
schema_check(ms_ctx *c, ms_schema *s)
{
	sqlite3_stmt *st = NULL;
	int			rc = ms_prepare(c, &st, "SELECT name FROM pragma_table_info(?1)");
	const char **have = NULL;
	int			cap = 0;

	for (int i = 0; i < s->n && rc == SQLITE_OK; i++)
	{
		ms_tbl	   *t = &s->t[i];
		int			nhave = 0;
		int			missing = -1;
		int			present = 0;
		names		ns;

		if (t->unmade)
		{
			ms_catalog *cat;
			ms_object  *o;

			rc = ms_catalog_get(c, &cat);
			if (rc != SQLITE_OK)
				break;
			o = ms_cat_object(cat, t->name);
			t->host = o != NULL;
			t->broken = o ? host_has(c, o, t->name) :
				ms_printf(&c->arena, "table \"%s\" is not made yet: the next message makes it", t->name);
			if (t->broken == NULL)
				rc = SQLITE_NOMEM;
			continue;
		}
		sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
		while ((rc = ms_step(c, st)) == SQLITE_ROW)
		{
			rc = SQLITE_OK;
			if (nhave == cap)
			{
				const char **more = ms_alloc(&c->arena, sizeof(char *) * (size_t) (cap = cap ? cap * 2 : 32));

				if (more == NULL)
				{
					rc = SQLITE_NOMEM;
					break;
				}
				if (nhave)
					memcpy(more, have, sizeof(char *) * (size_t) nhave);
				have = more;
			}
			if ((have[nhave++] = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 0))) == NULL)
			{
				rc = SQLITE_NOMEM;
				break;
			}
		}
		sqlite3_reset(st);
		if (rc == SQLITE_DONE)
			rc = names_make(c, &ns, have, nhave);
		if (rc != SQLITE_OK)
			break;
		for (int k = 0; k < t->ncols; k++)
		{
			if (names_find(&ns, t->cols[k].name) >= 0)
				present++;
			else if (missing < 0)
				missing = k;
		}
		t->absent = present == 0;
		if (present == 0)
			t->broken = ms_printf(&c->arena, "table \"%s\" is not in the file", t->name);
		else if (missing >= 0)
			t->broken = ms_printf(&c->arena, "table \"%s\" has no column \"%s\"", t->name, t->cols[missing].name);
		if (missing >= 0 && t->broken == NULL)
			rc = SQLITE_NOMEM;
	}
	sqlite3_finalize(st);
	return rc;
}

int
ms_schema_load(ms_ctx *c)
{
	sqlite3_stmt *st = NULL;
	ProtobufCAllocator pa = ms_arena_allocator(&c->arena);
	int			rc = SQLITE_OK;
	int			cap = 0;
	bool		has_made = false;
	ms_schema  *s = ms_alloc(&c->arena, sizeof(ms_schema));

	if (s == NULL)
		return SQLITE_NOMEM;
	c->schema = s;
	if (!c->have_state)
		return SQLITE_OK;
	rc = ms_prepare(c, &st, "SELECT count(*), (SELECT count(*) FROM pragma_table_info('_sync_made'))"
					" FROM _sync_tables");
	if (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		cap = sqlite3_column_int(st, 0);
		has_made = sqlite3_column_int(st, 1) > 0;
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc != SQLITE_OK)
		return rc;
	s->t = ms_alloc(&c->arena, sizeof(ms_tbl) * (size_t) (cap + 1));
	if (s->t == NULL)
		return SQLITE_NOMEM;
	/* a file of an older build has no _sync_made: it made every table it holds */
	rc = ms_prepare(c, &st, "SELECT t.name, t.schema, t.position, %s FROM _sync_tables t ORDER BY t.position, t.name",
					has_made ? "EXISTS (SELECT 1 FROM _sync_made m WHERE m.name = t.name)" : "1");
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
		s->t[s->n].unmade = sqlite3_column_int(st, 3) == 0;
		s->n++;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	if (rc == SQLITE_OK)
		rc = schema_link(c, s);
	if (rc == SQLITE_OK && s->n > 0)
		rc = schema_check(c, s);
	return rc;
}

ms_tbl *
ms_schema_find(ms_ctx *c, const char *name)
{
	if (c->schema == NULL)
		return NULL;
	return ms_map_get(&c->schema->byname, name, strlen(name));
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
	names		ns;

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
	if (names_make(c, &ns, cols, (int) m->n_columns) != SQLITE_OK)
		return NULL;
	for (size_t i = 0; i < m->n_columns; i++)
	{
		int			j = names_find(&ns, m->columns[i]->name);

		if (j >= 0 && (size_t) j != i)
			return ms_printf(&c->arena, "columns \"%s\" and \"%s\" of table \"%s\" are one column in SQLite",
							 m->columns[j]->name, m->columns[i]->name, m->name);
	}
	for (size_t k = 0; k < m->n_key; k++)
	{
		const char *type = NULL;

		/* checked (wire.c): a column, named exactly */
		for (int j = names_find(&ns, m->key[k]); j >= 0 && type == NULL; j = -1)
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
	names		want;
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
	rc = names_make(c, &want, wanted, t->ncols);
	if (rc != SQLITE_OK)
		return rc;
	for (int j = 0; j < fc.n; j++)
	{
		int			i = names_find(&want, fc.name[j]);

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
	names		have;
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
		rc = names_make(c, &have, fc.name, fc.n);
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
		if (names_find(&have, t->cols[i].name) < 0)
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
		*host = host_has(c, o, t->name);
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
 * server's: a local write of them would never go up and would outlive every
 * digest (which covers keys only).  So outside sync_apply each fails, naming
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
	char	   *knew = key_sql(c, t, "NEW.");
	char	   *kold = key_sql(c, t, "OLD.");
	char	   *why = ms_printf(&c->arena, "magic_sync: a key column of table %s is NULL", t->name);
	char	   *raise = why ? ms_printf(&c->arena, "RAISE(ABORT, %Q)", why) : NULL;
	char	   *sql[TR_KINDS] = {NULL};
	int			rc = SQLITE_OK;
	ms_buf		changed = {0};
	ms_buf		of = {0};

	if (knew == NULL || kold == NULL || raise == NULL)
		return SQLITE_NOMEM;
	if (!t->record)
		rc = guards(c, t, quiet, sql);
	if (rc == SQLITE_OK && t->record)
	{
		sql[TR_INS] = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_ins_%w\" AFTER INSERT ON %s WHEN %s BEGIN"
								" INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s; END",
								t->name, t->q, quiet, t->lit, knew, raise, noted);
		sql[TR_UPD] = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_upd_%w\" AFTER UPDATE ON %s WHEN %s BEGIN"
								" INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s;"
								" INSERT INTO _sync_notes(tbl, key) SELECT %s, %s WHERE (%s) IS NOT (%s) %s; END",
								t->name, t->q, quiet, t->lit, knew, raise, noted,
								t->lit, kold, kold, knew, noted);
		sql[TR_DEL] = ms_printf(&c->arena, "CREATE TRIGGER \"_sync_del_%w\" AFTER DELETE ON %s WHEN %s BEGIN"
								" INSERT INTO _sync_notes(tbl, key) VALUES (%s, coalesce(%s, %s)) %s; END",
								t->name, t->q, quiet, t->lit, kold, raise, noted);
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
		char	   *why = why_not_held(c, m, clash ? clash->name : NULL);
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
		rc = tbl_build(c, m, &t);
		if (rc == SQLITE_OK)
			rc = take(c, &t, &host);
		if (rc == SQLITE_OK && host == NULL)
			rc = indexes(c, &t);
		if (rc == SQLITE_OK && host == NULL)
			rc = triggers(c, &t);
		if (rc == SQLITE_OK)
			rc = store(c, m, (int) i);
		if (rc == SQLITE_OK)
			rc = ms_map_put(&c->arena, &held, m->name, strlen(m->name), m);
		/* the host's own: stored, unmade; its rows refused, saying why */
		if (rc == SQLITE_OK && host != NULL)
			rc = ms_state_error(c, "table \"%s\" is not held: %s", m->name, host);
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
	/* the tables of the last schema this one does not hold stop being mirrored */
	for (int i = 0; old && i < old->n && rc == SQLITE_OK; i++)
		if (ms_map_get(&held, old->t[i].name, strlen(old->t[i].name)) == NULL && !old->t[i].unmade)
			rc = drop_triggers(c, old->t[i].name);
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
		rc = take(c, t, &host);
		if (rc == SQLITE_OK && host == NULL)
			rc = indexes(c, t);
		if (rc == SQLITE_OK && host == NULL)
			rc = triggers(c, t);
		if (rc == SQLITE_OK && host == NULL)
		{
			(*made)++;
			rc = ms_state_error(c, "table \"%s\" is made: the host's own of its name is gone", t->name);
		}
		if (table_failure(rc))
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

/* ---- for schema changes (evolve.c) ------------------------------------- */

int
ms_tbl_build(ms_ctx *c, Sync__Table *m, ms_tbl *t)
{
	return tbl_build(c, m, t);
}

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
