/*
** schema.c - the replica's tables as the last snapshot declared them.
**
** A snapshot's Begin carries the Table message of every mirrored table; each
** is stored in _sync_tables as it came, so that after a restart the replica
** still knows keys, foreign keys, owned columns and codecs.  This file reads
** them back (ms_schema_load): each table described (ms_tbl), its columns
** and names looked up in maps, its parents linked, its canonical key in SQL
** and in C.  Applying a Begin's schema is tables.c's; the DDL it runs,
** ddl.c's.
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

int
ms_names_make(ms_ctx *c, ms_names *ns, const char **list, int n)
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

/* ms_names_find: the slot of a name (folded), or -1 */
int
ms_names_find(const ms_names *ns, const char *name)
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
key_sql(ms_arena **a, const ms_tbl *t, const char *alias)
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
	out = b.oom ? NULL : ms_strdup(a, b.data);
	ms_buf_free(&b);
	return out;
}

char *
ms_key_sql(ms_ctx *c, const ms_tbl *t, const char *alias)
{
	return key_sql(&c->arena, t, alias);
}

/* tbl_build: the in-memory description of a checked Table message, in arena a */
static int
tbl_build(ms_arena **a, Sync__Table *m, ms_tbl *t)
{
	ms_buf		b = {0};
	ProtobufCAllocator rows = ms_arena_allocator(a);
	ms_row_column *rcols;

	memset(t, 0, sizeof *t);
	t->msg = m;
	t->name = m->name;
	t->q = ms_printf(a, "\"%w\"", m->name);
	t->lit = ms_printf(a, "%Q", m->name);
	t->setting = strcmp(m->mirror, "setting") == 0;
	t->record = t->setting || strcmp(m->mirror, "record") == 0;
	t->proto = strcmp(m->codec, "proto") == 0;
	t->ncols = (int) m->n_columns;
	t->cols = ms_alloc(a, sizeof(ms_col) * m->n_columns);
	t->nkey = (int) m->n_key;
	t->key = ms_alloc(a, sizeof(int) * m->n_key);
	t->nfk = (int) m->n_foreign_keys;
	t->fks = ms_alloc(a, sizeof(ms_fk) * (m->n_foreign_keys + 1));
	rcols = ms_alloc(a, sizeof(ms_row_column) * (m->n_columns + 1));
	if (t->q == NULL || t->lit == NULL || t->cols == NULL || t->key == NULL || t->fks == NULL ||
		rcols == NULL)
		return SQLITE_NOMEM;
	for (int i = 0; i < t->ncols; i++)
	{
		const char *name = m->columns[i]->name;
		size_t		n = 0;

		t->cols[i].name = name;
		while (name[n] != '\0' && name[n] != '"' && name[n] != '\\' && (unsigned char) name[n] >= 0x20)
			n++;
		t->cols[i].plain_len = name[n] == '\0' && n <= UINT32_MAX ? (uint32_t) n : 0;
	}
	if (t->ncols > COLMAP_MIN)
	{
		if ((t->colmap = ms_alloc(a, sizeof(ms_map))) == NULL)
			return SQLITE_NOMEM;
		ms_map_init(t->colmap, false);
		/* names are unique (wire.c) */
		for (int i = 0; i < t->ncols; i++)
			if (ms_map_put(a, t->colmap, t->cols[i].name, strlen(t->cols[i].name), &t->cols[i]) != SQLITE_OK)
				return SQLITE_NOMEM;
	}
	t->retired = m->retired[0] ? column_of(t, m->retired) : -1;
	t->origin = m->origin[0] ? column_of(t, m->origin) : -1;
	for (int i = 0; i < t->ncols; i++)
	{
		const Sync__Column *mc = m->columns[i];
		ms_col	   *col = &t->cols[i];

		col->q = ms_printf(a, "\"%w\"", mc->name);
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
		fk->cols = ms_alloc(a, sizeof(int) * mf->n_columns);
		fk->refs = ms_alloc(a, sizeof(char *) * mf->n_columns);
		fk->ref_names = (const char **) mf->references;
		if (fk->cols == NULL || fk->refs == NULL)
			return SQLITE_NOMEM;
		fk->parent_name = mf->table;
		fk->parent = -1;
		for (int j = 0; j < fk->n; j++)
		{
			fk->cols[j] = column_of(t, mf->columns[j]);
			fk->refs[j] = ms_printf(a, "\"%w\"", mf->references[j]);
			if (fk->refs[j] == NULL)
				return SQLITE_NOMEM;
		}
	}
	t->keyexpr = key_sql(a, t, "");
	for (int k = 0; k < t->nkey; k++)
		ms_buf_printf(&b, "%s%s = ?%d", k ? " AND " : "", t->cols[t->key[k]].q, k + 1);
	t->keymatch = b.oom ? NULL : ms_strdup(a, b.data);
	b.len = 0;
	for (int k = 0; k < t->nkey; k++)
		ms_buf_printf(&b, "%s%s", k ? ", " : "", t->cols[t->key[k]].q);
	t->keycols = b.oom ? NULL : ms_strdup(a, b.data);
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
by_name(ms_arena **a, ms_schema *s)
{
	ms_map_init(&s->byname, false);
	for (int i = 0; i < s->n; i++)
		if (ms_map_put(a, &s->byname, s->t[i].name, strlen(s->t[i].name), &s->t[i]) != SQLITE_OK)
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
depths(ms_arena **a, ms_schema *s)
{
	signed char *state = ms_alloc(a, (size_t) s->n + 1);	/* 0 not seen, 1 on the walk, 2 done */
	int		   *at = ms_alloc(a, sizeof(int) * (size_t) (s->n + 1));
	int		   *next = ms_alloc(a, sizeof(int) * (size_t) (s->n + 1));

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
schema_link(ms_arena **a, ms_schema *s)
{
	int			rc = by_name(a, s);

	for (int i = 0; i < s->n && rc == SQLITE_OK; i++)
	{
		s->t[i].depth = 0;
		for (int f = 0; f < s->t[i].nfk; f++)
			s->t[i].fks[f].parent = fk_parent(s, &s->t[i].fks[f]);
	}
	if (rc == SQLITE_OK)
		rc = depths(a, s);
	if (rc == SQLITE_OK && s->n > 1)
	{
		/* sort, then relink: parent indexes follow the new order */
		qsort(s->t, (size_t) s->n, sizeof(ms_tbl), tbl_order);
		rc = by_name(a, s);
		for (int i = 0; i < s->n && rc == SQLITE_OK; i++)
			for (int f = 0; f < s->t[i].nfk; f++)
				s->t[i].fks[f].parent = fk_parent(s, &s->t[i].fks[f]);
	}
	return rc;
}

/* host_has: what of the host's has the name of a table the replica did not make: why it waits */
char *
ms_host_has(ms_ctx *c, const ms_object *o, const char *table)
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
check_tables(ms_ctx *c, ms_schema *s)
{
	sqlite3_stmt *st = NULL;
	/* columns looked up in the schema SQLite holds, without a statement (ms_has_column says why) */
	bool		direct = sqlite3_api->table_column_metadata != NULL;
	int			rc = direct ? SQLITE_OK : ms_prepare(c, &st, "SELECT name FROM pragma_table_info(?1)");
	const char **have = NULL;
	int			cap = 0;

	for (int i = 0; i < s->n && rc == SQLITE_OK; i++)
	{
		ms_tbl	   *t = &s->t[i];
		int			nhave = 0;
		int			missing = -1;
		int			present = 0;
		ms_names	ns;

		/* as the file is now, whatever an earlier call found (a schema kept) */
		t->broken = NULL;
		t->host = false;
		t->absent = false;
		if (t->unmade)
		{
			ms_catalog *cat;
			ms_object  *o;

			rc = ms_catalog_get(c, &cat);
			if (rc != SQLITE_OK)
				break;
			o = ms_cat_object(cat, t->name);
			t->host = o != NULL;
			t->broken = o ? ms_host_has(c, o, t->name) :
				ms_printf(&c->arena, "table \"%s\" is not made yet: the next message makes it", t->name);
			if (t->broken == NULL)
				rc = SQLITE_NOMEM;
			continue;
		}
		for (int k = 0; direct && k < t->ncols; k++)
		{
			int			r = sqlite3_table_column_metadata(c->db, NULL, t->name, t->cols[k].name,
														  NULL, NULL, NULL, NULL, NULL);

			if (r == SQLITE_OK)
				present++;
			else if (r != SQLITE_ERROR)
			{
				rc = ms_dberr(c, r);
				break;
			}
			else if (missing < 0)
				missing = k;
		}
		if (rc != SQLITE_OK)
			break;
		if (direct)
			goto checked;
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
			rc = ms_names_make(c, &ns, have, nhave);
		if (rc != SQLITE_OK)
			break;
		for (int k = 0; k < t->ncols; k++)
		{
			if (ms_names_find(&ns, t->cols[k].name) >= 0)
				present++;
			else if (missing < 0)
				missing = k;
		}
checked:
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

/* schema_check: check_tables, for a schema of any table */
static int
schema_check(ms_ctx *c, ms_schema *s)
{
	return s->n > 0 ? check_tables(c, s) : SQLITE_OK;
}

/* read: _sync_tables into a schema of arena a (*out), linked, not yet checked against the file */
static int
read(ms_ctx *c, ms_arena **a, ms_schema **out)
{
	sqlite3_stmt *st = NULL;
	ProtobufCAllocator pa = ms_arena_allocator(a);
	int			rc = SQLITE_OK;
	int			cap = 0;
	bool		has_made = false;
	ms_schema  *s = ms_alloc(a, sizeof(ms_schema));

	*out = s;
	if (s == NULL)
		return SQLITE_NOMEM;
	s->arena = a;
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
	s->t = ms_alloc(a, sizeof(ms_tbl) * (size_t) (cap + 1));
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
		rc = tbl_build(a, m, &s->t[s->n]);
		s->t[s->n].position = sqlite3_column_int(st, 2);
		s->t[s->n].unmade = sqlite3_column_int(st, 3) == 0;
		s->n++;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	return rc == SQLITE_OK ? schema_link(a, s) : rc;
}

/* ---- the schema kept between calls ------------------------------------- */

/*
 * A connection that keeps its statements (kept.c) keeps the schema it read
 * last too, with what it was read under: reading and unpacking
 * _sync_tables was a third of a one-row sync_apply, and the same again of
 * each sync_status and sync_upload.  It is the file's as long as
 *
 *   tables_gen     _sync_state's, which the triggers _sync_gen_* set to a
 *                  random number at every write of _sync_tables or
 *                  _sync_made, whoever writes (another connection, another
 *                  process, an older build, the host by hand, sync_apply's
 *                  own schema changes), and which a rolled back write puts
 *                  back as it was: random, never a value seen before
 *   schema_version the file's: DDL of anyone's (a table of ours dropped,
 *                  a trigger _sync_gen_* dropped, _sync_made made)
 *
 * are both as they were.  What a table is in the file now (broken, absent,
 * the host's of its name: schema_check, a look-up of each column, 14 k
 * instructions for pgbench's four tables) is kept with it only when every
 * table was found whole, and only while the main and temp schema versions
 * are as then and no statement of the connection expired since
 * (ms_kept_expiries): a schema version comes back when a rollback undoes
 * DDL, which expires every statement, and may then name another schema
 * (a TEMP table of the same name hides a table of ours).  Only a
 * call's first read takes the kept schema; one read again after its own
 * changes (a Begin, a schema change) is the call's, and the next call reads
 * it whole.  A call holds it until it ends (ms_ctx_done): another call on the
 * connection in between (a call within a call) reads its own.
 */
struct ms_schema_kept
{
	ms_arena   *arena;			/* the schema and all it points at */
	ms_schema  *schema;
	sqlite3_int64 gen;
	sqlite3_int64 version;
	/* every table found whole at temp_version, with expiries (ms_kept_expiries) as then */
	bool		whole;
	sqlite3_int64 temp_version;
	int			expiries;
	/* under the same: every trigger of the file is ours (1), or not (-1), or not yet asked (0) */
	int			quiet;
};

void
ms_schema_kept_free(ms_schema_kept *k)
{
	if (k == NULL)
		return;
	ms_arena_free(&k->arena);
	sqlite3_free(k);
}

/* key: what the schema was read under (*keyed false: the file has no tables_gen, so nothing is kept) */
static int
key(ms_ctx *c, sqlite3_int64 *gen, sqlite3_int64 *version, bool *keyed)
{
	sqlite3_stmt *st = NULL;
	int64_t		v = -1;
	int			rc = ms_has_column(c, "_sync_state", "tables_gen", keyed);

	if (rc != SQLITE_OK || !*keyed)
		return rc;
	/* the pragma itself: as a table-valued pragma in the SELECT it cost ten times as much */
	rc = ms_prepare(c, &st, "PRAGMA main.schema_version");
	rc = ms_int_read(c, st, rc, &v);
	*version = v;
	st = NULL;
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "SELECT tables_gen FROM _sync_state WHERE id = 1");
	if (rc == SQLITE_OK)
		rc = ms_step(c, st);
	*keyed = rc == SQLITE_ROW;
	if (rc == SQLITE_ROW)
	{
		*gen = sqlite3_column_int64(st, 0);
		rc = SQLITE_OK;
	}
	else if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	return rc;
}

/* seen: what a check of the file's tables is kept under (*expiries -1: nothing is) */
static int
seen(ms_ctx *c, sqlite3_int64 *temp_version, int *expiries)
{
	sqlite3_stmt *st = NULL;
	int64_t		v = -1;
	int			rc = ms_kept_expiries(c->db, expiries);

	if (rc != SQLITE_OK)
		return ms_dberr(c, rc);
	if (*expiries < 0)
		return SQLITE_OK;
	rc = ms_prepare(c, &st, "PRAGMA temp.schema_version");
	rc = ms_int_read(c, st, rc, &v);
	*temp_version = v;
	return rc;
}

/*
 * check_kept: k's tables checked against the file; kept as found whole
 * (no table broken: nothing of the call's arena is left in k) under what
 * was seen
 */
static int
check_kept(ms_ctx *c, ms_schema_kept *k, sqlite3_int64 temp_version, int expiries)
{
	int			rc = schema_check(c, k->schema);

	k->whole = rc == SQLITE_OK && expiries >= 0;
	for (int i = 0; i < k->schema->n && k->whole; i++)
		k->whole = k->schema->t[i].broken == NULL;
	k->temp_version = temp_version;
	k->expiries = expiries;
	k->quiet = 0;
	return rc;
}

/*
 * kept_whole: the call's kept schema, when what was found of the file's
 * tables at its start still holds (no statement expired since: a rollback
 * of DDL expires them all), else NULL
 */
static ms_schema_kept *
kept_whole(ms_ctx *c)
{
	ms_schema_kept *k = c->kept_schema;
	int			expiries = -1;

	if (k == NULL || !k->whole || c->schema != k->schema ||
		ms_kept_expiries(c->db, &expiries) != SQLITE_OK || expiries != k->expiries)
		return NULL;
	return k;
}

int
ms_schema_quiet_kept(ms_ctx *c)
{
	ms_schema_kept *k = kept_whole(c);

	return k ? k->quiet : 0;
}

bool
ms_schema_quiet_keep(ms_ctx *c, bool ours)
{
	ms_schema_kept *k = kept_whole(c);

	if (k != NULL)
		k->quiet = ours ? 1 : -1;
	return k != NULL;
}

int
ms_schema_own_expiry(ms_ctx *c, bool held)
{
	ms_schema_kept *k = c->kept_schema;
	int			expiries = -1;
	int			rc;

	if (!held || k == NULL)
		return SQLITE_OK;
	rc = ms_kept_expiries(c->db, &expiries);
	if (rc != SQLITE_OK)
		return ms_dberr(c, rc);
	k->expiries = expiries;
	return SQLITE_OK;
}

/*
 * kept_read: the call's first read, on a connection that keeps its
 * statements and is not reading it already: the schema kept when it is
 * still the file's, else read into a new one kept in its place; its tables
 * checked against the file (schema_check) unless found whole under what is
 * seen now
 */
static int
kept_read(ms_ctx *c, ms_schema_kept *k)
{
	sqlite3_int64 gen = 0;
	sqlite3_int64 version = 0;
	sqlite3_int64 temp_version = 0;
	int			expiries = -1;
	bool		keyed = false;
	int			rc = key(c, &gen, &version, &keyed);

	if (rc == SQLITE_OK && keyed)
		rc = seen(c, &temp_version, &expiries);
	if (rc == SQLITE_OK && keyed && k != NULL && k->gen == gen && k->version == version)
	{
		c->kept_schema = k;
		c->schema = k->schema;
		if (k->whole && expiries >= 0 && k->expiries == expiries && k->temp_version == temp_version)
			return SQLITE_OK;
		k->whole = false;
		return check_kept(c, k, temp_version, expiries);
	}
	ms_schema_kept_free(k);
	if (rc == SQLITE_OK && !keyed)
		rc = read(c, &c->arena, &c->schema);
	if (rc != SQLITE_OK || !keyed)
		return rc == SQLITE_OK ? schema_check(c, c->schema) : rc;
	if ((k = sqlite3_malloc64(sizeof *k)) == NULL)
		return SQLITE_NOMEM;
	memset(k, 0, sizeof *k);
	k->gen = gen;
	k->version = version;
	rc = read(c, &k->arena, &k->schema);
	if (rc != SQLITE_OK)
	{
		ms_schema_kept_free(k);
		return rc;
	}
	c->kept_schema = k;
	c->schema = k->schema;
	return check_kept(c, k, temp_version, expiries);
}

int
ms_schema_load(ms_ctx *c)
{
	ms_schema_kept *k = NULL;
	int			rc;

	if (!c->have_state)
	{
		c->schema = ms_alloc(&c->arena, sizeof(ms_schema));
		return c->schema ? SQLITE_OK : SQLITE_NOMEM;
	}
	if (c->schema == NULL && !c->kept_lent && ms_kept_schema_lend(c->db, &k))
	{
		c->kept_lent = true;
		return kept_read(c, k);
	}
	rc = read(c, &c->arena, &c->schema);
	return rc == SQLITE_OK ? schema_check(c, c->schema) : rc;
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

	/* a part under 100 bytes (most), while there is room: head and bytes in place (a digest's every row) */
	if (n < 100 && !out->oom && out->len + n + 4 <= out->cap)
	{
		char	   *d = out->data + out->len;

		if (n >= 10)
			*d++ = (char) ('0' + n / 10);
		*d++ = (char) ('0' + n % 10);
		*d++ = ':';
		if (n > 0)
			memcpy(d, part, n);
		d[n] = '\0';
		out->len = (size_t) (d - out->data) + n;
		return;
	}
	ms_buf_add(out, head, ms_key_part_head(head, n));
	ms_buf_add(out, part, n);
}

/* in decimal, by hand, two digits a step, head and digits in one: a digest writes one for every row it counts */
void
ms_key_append_int(ms_buf *out, sqlite3_int64 i)
{
	static const char two[] =
		"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
		"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
		"8081828384858687888990919293949596979899";
	char		num[56];		/* written back from num[32]; read 24 at a time */
	int			k = 32;
	int			n;
	uint64_t	v = i < 0 ? (uint64_t) 0 - (uint64_t) i : (uint64_t) i;

	while (v >= 100)
	{
		unsigned	r = (unsigned) (v % 100);

		v /= 100;
		num[--k] = two[2 * r + 1];
		num[--k] = two[2 * r];
	}
	if (v >= 10)
	{
		num[--k] = two[2 * v + 1];
		num[--k] = two[2 * v];
	}
	else
		num[--k] = (char) ('0' + v);
	if (i < 0)
		num[--k] = '-';
	n = 32 - k;					/* at most 20: the part's length, as key.h spells it */
	num[--k] = ':';
	if (n >= 10)
		num[--k] = (char) ('0' + n % 10);
	num[--k] = (char) ('0' + (n >= 10 ? n / 10 : n));
	/* at most 23 bytes: while there is room, 24 copied in place (no call), as ms_buf_add would */
	if (!out->oom && out->len + 32 <= out->cap)
	{
		memcpy(out->data + out->len, num + k, 24);
		out->len += (size_t) (32 - k);
		out->data[out->len] = '\0';
	}
	else
		ms_buf_add(out, num + k, (size_t) (32 - k));
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
/* ---- for schema changes (evolve.c) ------------------------------------- */

int
ms_tbl_build(ms_ctx *c, Sync__Table *m, ms_tbl *t)
{
	return tbl_build(&c->arena, m, t);
}
