/*
** letgo.c - letting go of rows (docs/protocol.md 5.2).
**
** A row the server lets go of (a delete, or a row of a snapshot's table the
** snapshot did not name) is deleted, unless a row that stays, and that the
** server did not send, points at it: then it is retired, its retired column
** set to the time (unix seconds), or, where the table declares none, a row
** of _sync_retired.  Rows that stay and point:
**
**   - records of the replica's own origin (retired or not);
**   - retired rows of any held table (they wait for what points at them);
**   - rows of local tables (not mirrored) whose SQLite foreign keys point
**     at the table.
**
** A record of its own origin with a pending note is never let go of.  A
** delete that a foreign key of SQLite itself refuses (PRAGMA foreign_keys)
** retires the row instead.  After a message, ms_let_go_retired lets go for
** good of the retired rows nothing points at any more, children first.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>
#include <strings.h>

typedef struct referrer
{
	sqlite3_stmt *st;			/* SELECT 1 ... LIMIT 1: a row that stays points at ?1.. */
	struct referrer *next;
} referrer;

typedef struct per_table
{
	bool		linked;			/* referrers built */
	referrer   *refs;
	sqlite3_stmt *row;			/* keyexpr, origin of the row of this key */
	sqlite3_stmt *del;
	sqlite3_stmt *retire;
} per_table;

struct ms_letgo
{
	ms_ctx	   *c;
	per_table  *pt;
	sqlite3_stmt *note_exists;
	sqlite3_stmt *note_drop;
	sqlite3_stmt *retired_add;
	sqlite3_stmt *forget;		/* _sync_retired and _sync_refused of a row gone */
	/* foreign keys of local tables: "table", "from", "to" per column */
	int			nlocal;
	struct local_fk
	{
		char	   *table;		/* quoted */
		char	   *parent;		/* as SQLite has it */
		int			n;
		char	  **from;		/* quoted */
		char	  **to;			/* quoted, NULL: the parent's primary key */
	}		   *local;
};

bool
ms_own_origin(ms_ctx *c, sqlite3_value *v)
{
	const char *s;

	if (!c->st.has_replica || v == NULL || sqlite3_value_type(v) != SQLITE_TEXT)
		return false;
	s = (const char *) sqlite3_value_text(v);
	return s != NULL && sqlite3_value_bytes(v) == 36 && strcasecmp(s, c->st.replica_text) == 0;
}

/* the foreign keys of local tables, read once per call */
static int
local_fks(ms_letgo *lg)
{
	ms_ctx	   *c = lg->c;
	sqlite3_stmt *st;
	int			rc;
	int			cap = 0;
	char	   *last_table = NULL;
	int			last_id = -1;

	rc = ms_prepare(c, &st,
					"SELECT m.name, f.id, f.\"table\", f.\"from\", f.\"to\""
					" FROM main.sqlite_master m, pragma_foreign_key_list(m.name) f"
					" WHERE m.type = 'table' AND substr(m.name, 1, 6) <> '_sync_'"
					" AND substr(m.name, 1, 7) <> 'sqlite_'"
					" AND m.name NOT IN (SELECT name FROM _sync_tables)"
					" ORDER BY m.name, f.id, f.seq");
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *table = (const char *) sqlite3_column_text(st, 0);
		int			id = sqlite3_column_int(st, 1);
		struct local_fk *fk;

		rc = SQLITE_OK;
		if (last_table == NULL || strcmp(last_table, table) != 0 || last_id != id)
		{
			if (lg->nlocal == cap)
			{
				int			ncap = cap ? cap * 2 : 8;
				struct local_fk *l = ms_alloc(&c->arena, sizeof(struct local_fk) * (size_t) ncap);

				if (l == NULL)
				{
					rc = SQLITE_NOMEM;
					break;
				}
				if (lg->nlocal)
					memcpy(l, lg->local, sizeof(struct local_fk) * (size_t) lg->nlocal);
				lg->local = l;
				cap = ncap;
			}
			fk = &lg->local[lg->nlocal++];
			fk->table = ms_printf(&c->arena, "\"%w\"", table);
			fk->parent = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 2));
			fk->from = ms_alloc(&c->arena, sizeof(char *) * 64);
			fk->to = ms_alloc(&c->arena, sizeof(char *) * 64);
			last_table = ms_strdup(&c->arena, table);
			last_id = id;
			if (!fk->table || !fk->parent || !fk->from || !fk->to || !last_table)
			{
				rc = SQLITE_NOMEM;
				break;
			}
		}
		fk = &lg->local[lg->nlocal - 1];
		if (fk->n < 64)
		{
			fk->from[fk->n] = ms_printf(&c->arena, "\"%w\"", (const char *) sqlite3_column_text(st, 3));
			fk->to[fk->n] = sqlite3_column_type(st, 4) == SQLITE_NULL ? NULL :
				ms_printf(&c->arena, "\"%w\"", (const char *) sqlite3_column_text(st, 4));
			fk->n++;
		}
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	return rc;
}

/* lazy: prepare a statement the first time it is needed */
static int
lazy(ms_letgo *lg, sqlite3_stmt **st, const char *sql)
{
	return *st ? SQLITE_OK : ms_prepare(lg->c, st, "%s", sql);
}

int
ms_letgo_open(ms_ctx *c, ms_letgo **out)
{
	ms_letgo   *lg = ms_alloc(&c->arena, sizeof(ms_letgo));

	*out = lg;
	if (lg == NULL)
		return SQLITE_NOMEM;
	lg->c = c;
	lg->nlocal = -1;			/* read on first need */
	lg->pt = ms_alloc(&c->arena, sizeof(per_table) * (size_t) (c->schema->n + 1));
	return lg->pt ? SQLITE_OK : SQLITE_NOMEM;
}

void
ms_letgo_close(ms_letgo *lg)
{
	if (lg == NULL)
		return;
	for (int i = 0; lg->pt && i < lg->c->schema->n; i++)
	{
		per_table  *p = &lg->pt[i];

		for (referrer *r = p->refs; r; r = r->next)
			sqlite3_finalize(r->st);
		sqlite3_finalize(p->row);
		sqlite3_finalize(p->del);
		sqlite3_finalize(p->retire);
	}
	sqlite3_finalize(lg->note_exists);
	sqlite3_finalize(lg->note_drop);
	sqlite3_finalize(lg->retired_add);
	sqlite3_finalize(lg->forget);
}

static int
index_of(ms_letgo *lg, const ms_tbl *t)
{
	return (int) (t - lg->c->schema->t);
}

static int
add_referrer(ms_letgo *lg, per_table *p, const char *sql)
{
	referrer   *r = ms_alloc(&lg->c->arena, sizeof(referrer));
	int			rc;

	if (r == NULL || sql == NULL)
		return SQLITE_NOMEM;
	rc = ms_prepare(lg->c, &r->st, "%s", sql);
	if (rc == SQLITE_OK)
	{
		r->next = p->refs;
		p->refs = r;
	}
	return rc;
}

/*
 * link: the statements that say whether a row of t that stays points at
 * the row of t whose key parts are ?1..?nkey (the replica's uuid is ?nkey+1).
 */
static int
link(ms_letgo *lg, const ms_tbl *t, per_table *p)
{
	ms_ctx	   *c = lg->c;
	ms_schema  *s = c->schema;
	int			me = index_of(lg, t);
	int			rc = SQLITE_OK;

	p->linked = true;
	if (lg->nlocal < 0)
	{
		lg->nlocal = 0;
		rc = local_fks(lg);
	}
	for (int i = 0; i < s->n && rc == SQLITE_OK; i++)
	{
		const ms_tbl *ch = &s->t[i];

		if (ch->broken != NULL)
			continue;			/* not held: it points at nothing */
		for (int f = 0; f < ch->nfk && rc == SQLITE_OK; f++)
		{
			const ms_fk *fk = &ch->fks[f];
			ms_buf		b = {0};

			if (fk->parent != me)
				continue;
			ms_buf_printf(&b, "SELECT 1 FROM %s WHERE ", ch->q);
			for (int j = 0; j < fk->n; j++)
				ms_buf_printf(&b, "%s = (SELECT %s FROM %s WHERE %s) AND ",
							  ch->cols[fk->cols[j]].q, fk->refs[j], t->q, t->keymatch);
			ms_buf_str(&b, "(");
			if (ch->record && ch->origin >= 0 && c->st.has_replica)
				ms_buf_printf(&b, "%s = ?%d OR ", ch->cols[ch->origin].q, t->nkey + 1);
			if (ch->retired >= 0)
				ms_buf_printf(&b, "%s IS NOT NULL OR ", ch->cols[ch->retired].q);
			ms_buf_printf(&b, "(%s) IN (SELECT key FROM _sync_retired WHERE tbl = %s))",
						  ch->keyexpr, ch->lit);
			if (ch == t)
				ms_buf_printf(&b, " AND NOT (%s)", t->keymatch);
			ms_buf_str(&b, " LIMIT 1");
			rc = b.oom ? SQLITE_NOMEM : add_referrer(lg, p, b.data);
			ms_buf_free(&b);
		}
	}
	for (int i = 0; i < lg->nlocal && rc == SQLITE_OK; i++)
	{
		const struct local_fk *fk = &lg->local[i];
		ms_buf		b = {0};

		if (strcasecmp(fk->parent, t->name) != 0)
			continue;
		if (fk->to[0] == NULL && fk->n != t->nkey)
			continue;
		ms_buf_printf(&b, "SELECT 1 FROM %s WHERE ", fk->table);
		for (int j = 0; j < fk->n; j++)
			ms_buf_printf(&b, "%s%s = (SELECT %s FROM %s WHERE %s)", j ? " AND " : "", fk->from[j],
						  fk->to[j] ? fk->to[j] : t->cols[t->key[j]].q, t->q, t->keymatch);
		ms_buf_str(&b, " LIMIT 1");
		rc = b.oom ? SQLITE_NOMEM : add_referrer(lg, p, b.data);
		ms_buf_free(&b);
	}
	return rc;
}

/* stays_pointed: whether a row that stays points at this row of t */
static int
stays_pointed(ms_letgo *lg, const ms_tbl *t, per_table *p, const char *key, size_t len, bool *yes)
{
	int			rc = SQLITE_OK;

	*yes = false;
	if (!p->linked)
		rc = link(lg, t, p);
	for (referrer *r = p->refs; r && rc == SQLITE_OK && !*yes; r = r->next)
	{
		int			nparams = sqlite3_bind_parameter_count(r->st);

		rc = ms_bind_key(lg->c, r->st, 1, t, key, len);
		if (rc != SQLITE_OK)
			break;
		if (nparams > t->nkey)
			sqlite3_bind_text(r->st, t->nkey + 1, lg->c->st.replica_text, -1, SQLITE_STATIC);
		rc = ms_step(lg->c, r->st);
		*yes = rc == SQLITE_ROW;
		if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			rc = SQLITE_OK;
		sqlite3_reset(r->st);
	}
	return rc;
}

static int
retire(ms_letgo *lg, const ms_tbl *t, per_table *p, const char *key, size_t len)
{
	ms_ctx	   *c = lg->c;
	int			rc = SQLITE_OK;

	if (t->retired >= 0)
	{
		if (p->retire == NULL)
			rc = ms_prepare(c, &p->retire, "UPDATE %s SET %s = coalesce(%s, ?%d) WHERE %s",
							t->q, t->cols[t->retired].q, t->cols[t->retired].q, t->nkey + 1, t->keymatch);
		if (rc == SQLITE_OK)
			rc = ms_bind_key(c, p->retire, 1, t, key, len);
		if (rc == SQLITE_OK)
		{
			sqlite3_bind_int64(p->retire, t->nkey + 1, c->now);
			rc = ms_done(c, p->retire);
		}
		return rc;
	}
	rc = lazy(lg, &lg->retired_add, "INSERT OR IGNORE INTO _sync_retired(tbl, key, at) VALUES (?1, ?2, ?3)");
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(lg->retired_add, 1, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(lg->retired_add, 2, key, (int) len, SQLITE_STATIC);
	sqlite3_bind_int64(lg->retired_add, 3, c->now);
	return ms_done(c, lg->retired_add);
}

static int
note_exists(ms_letgo *lg, const ms_tbl *t, const char *key, size_t len, bool *yes)
{
	int			rc = lazy(lg, &lg->note_exists, "SELECT 1 FROM _sync_notes WHERE tbl = ?1 AND key = ?2");

	*yes = false;
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(lg->note_exists, 1, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(lg->note_exists, 2, key, (int) len, SQLITE_STATIC);
	rc = ms_step(lg->c, lg->note_exists);
	*yes = rc == SQLITE_ROW;
	sqlite3_reset(lg->note_exists);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/*
 * forget: what the extension recorded of a row that is gone: its retirement,
 * and, when it was deleted here, its note (the server's delete wins).
 */
static int
forget(ms_letgo *lg, const ms_tbl *t, const char *key, size_t len, bool deleted)
{
	int			rc = lazy(lg, &lg->forget, "DELETE FROM _sync_retired WHERE tbl = ?1 AND key = ?2");

	if (rc == SQLITE_OK && deleted)
		rc = lazy(lg, &lg->note_drop, "DELETE FROM _sync_notes WHERE tbl = ?1 AND key = ?2");
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(lg->forget, 1, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(lg->forget, 2, key, (int) len, SQLITE_STATIC);
	rc = ms_done(lg->c, lg->forget);
	if (rc == SQLITE_OK && deleted)
	{
		sqlite3_bind_text(lg->note_drop, 1, t->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(lg->note_drop, 2, key, (int) len, SQLITE_STATIC);
		rc = ms_done(lg->c, lg->note_drop);
	}
	return rc;
}

/*
 * find: whether the row of this key exists (its canonical key exactly this
 * one), and whether it is a record of the replica's own with a pending note.
 */
static int
find(ms_letgo *lg, const ms_tbl *t, per_table *p, const char *key, size_t len,
	 bool *exists, bool *kept)
{
	ms_ctx	   *c = lg->c;
	int			rc = SQLITE_OK;

	*exists = *kept = false;
	if (p->row == NULL)
		rc = ms_prepare(c, &p->row, "SELECT %s, %s FROM %s WHERE %s", t->keyexpr,
						t->origin >= 0 ? t->cols[t->origin].q : "NULL", t->q, t->keymatch);
	if (rc != SQLITE_OK)
		return rc;
	if (ms_bind_key(c, p->row, 1, t, key, len) != SQLITE_OK)
		return SQLITE_OK;		/* a key of another shape names no row */
	rc = ms_step(c, p->row);
	if (rc == SQLITE_ROW)
	{
		const char *k = (const char *) sqlite3_column_text(p->row, 0);

		*exists = k != NULL && (size_t) sqlite3_column_bytes(p->row, 0) == len &&
			memcmp(k, key, len) == 0;
		if (*exists && t->record && ms_own_origin(c, sqlite3_column_value(p->row, 1)))
			rc = note_exists(lg, t, key, len, kept);
		else
			rc = SQLITE_OK;
	}
	else if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_reset(p->row);
	return rc;
}

static int
delete_row(ms_letgo *lg, const ms_tbl *t, per_table *p, const char *key, size_t len)
{
	ms_ctx	   *c = lg->c;
	int			rc = SQLITE_OK;

	if (p->del == NULL)
		rc = ms_prepare(c, &p->del, "DELETE FROM %s WHERE %s", t->q, t->keymatch);
	if (rc == SQLITE_OK)
		rc = ms_bind_key(c, p->del, 1, t, key, len);
	if (rc == SQLITE_OK)
	{
		rc = sqlite3_step(p->del);
		sqlite3_reset(p->del);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
		else if (rc != SQLITE_CONSTRAINT)
			ms_dberr(c, rc);
	}
	return rc;
}

int
ms_let_go(ms_letgo *lg, ms_tbl *t, const char *key, size_t len, ms_letgo_result *res)
{
	int			i = index_of(lg, t);
	per_table  *p = &lg->pt[i];
	bool		exists,
				kept,
				pointed;
	int			rc;

	*res = MS_ABSENT;
	rc = find(lg, t, p, key, len, &exists, &kept);
	if (rc != SQLITE_OK)
		return rc;
	if (!exists)
		return forget(lg, t, key, len, false);
	if (kept)
	{
		*res = MS_KEPT;
		return SQLITE_OK;
	}
	rc = stays_pointed(lg, t, p, key, len, &pointed);
	if (rc == SQLITE_OK && !pointed)
	{
		rc = delete_row(lg, t, p, key, len);
		if (rc == SQLITE_OK)
		{
			*res = MS_LET_GO;
			return forget(lg, t, key, len, true);
		}
		/* SQLite's own foreign keys refuse: something local points at it */
		if (rc != SQLITE_CONSTRAINT)
			return rc;
		rc = SQLITE_OK;
	}
	if (rc == SQLITE_OK)
	{
		rc = retire(lg, t, p, key, len);
		*res = MS_RETIRED;
	}
	return rc;
}

/* the keys of t's retired rows, copied (the caller deletes while walking them) */
static int
retired_keys(ms_letgo *lg, const ms_tbl *t, char ***keys, size_t **lens, int *n)
{
	ms_ctx	   *c = lg->c;
	sqlite3_stmt *st;
	int			rc;
	int			cap = 0;

	*n = 0;
	*keys = NULL;
	*lens = NULL;
	if (t->retired >= 0)
		rc = ms_prepare(c, &st, "SELECT %s FROM %s WHERE %s IS NOT NULL"
						" UNION SELECT key FROM _sync_retired WHERE tbl = %s",
						t->keyexpr, t->q, t->cols[t->retired].q, t->lit);
	else
		rc = ms_prepare(c, &st, "SELECT key FROM _sync_retired WHERE tbl = %s", t->lit);
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		size_t		len = (size_t) sqlite3_column_bytes(st, 0);
		const char *k = (const char *) sqlite3_column_text(st, 0);

		rc = SQLITE_OK;
		if (k == NULL)
			continue;
		if (*n == cap)
		{
			int			ncap = cap ? cap * 2 : 16;
			char	  **nk = ms_alloc(&c->arena, sizeof(char *) * (size_t) ncap);
			size_t	   *nl = ms_alloc(&c->arena, sizeof(size_t) * (size_t) ncap);

			if (nk == NULL || nl == NULL)
			{
				rc = SQLITE_NOMEM;
				break;
			}
			if (*n)
			{
				memcpy(nk, *keys, sizeof(char *) * (size_t) *n);
				memcpy(nl, *lens, sizeof(size_t) * (size_t) *n);
			}
			*keys = nk;
			*lens = nl;
			cap = ncap;
		}
		(*keys)[*n] = ms_alloc(&c->arena, len + 1);
		if ((*keys)[*n] == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		memcpy((*keys)[*n], k, len);
		(*lens)[*n] = len;
		(*n)++;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	return rc;
}

/* any_retired: whether a retired row exists anywhere, in one query */
static int
any_retired(ms_letgo *lg, bool *yes)
{
	ms_ctx	   *c = lg->c;
	ms_buf		b = {0};
	sqlite3_stmt *st;
	int			rc;

	*yes = false;
	ms_buf_str(&b, "SELECT EXISTS (SELECT 1 FROM _sync_retired)");
	for (int i = 0; i < c->schema->n; i++)
	{
		const ms_tbl *t = &c->schema->t[i];

		if (t->retired >= 0 && t->broken == NULL)
			ms_buf_printf(&b, " OR EXISTS (SELECT 1 FROM %s WHERE %s IS NOT NULL)", t->q, t->cols[t->retired].q);
	}
	rc = b.oom ? SQLITE_NOMEM : ms_prepare(c, &st, "%s", b.data);
	ms_buf_free(&b);
	if (rc != SQLITE_OK)
		return rc;
	rc = ms_step(c, st);
	if (rc == SQLITE_ROW)
	{
		*yes = sqlite3_column_int(st, 0) != 0;
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

int
ms_let_go_due(ms_letgo *lg, bool *yes)
{
	return any_retired(lg, yes);
}

int
ms_let_go_retired(ms_letgo *lg, int *count)
{
	ms_schema  *s = lg->c->schema;
	int			rc;
	bool		changed;

	*count = 0;
	rc = any_retired(lg, &changed);
	if (rc != SQLITE_OK || !changed)
		return rc;
	for (int round = 0; changed && rc == SQLITE_OK && round <= s->n + 1; round++)
	{
		changed = false;
		for (int i = s->n - 1; i >= 0 && rc == SQLITE_OK; i--)
		{
			ms_tbl	   *t = &s->t[i];
			per_table  *p = &lg->pt[i];
			char	  **keys;
			size_t	   *lens;
			int			n;

			if (t->broken != NULL)
				continue;

			rc = retired_keys(lg, t, &keys, &lens, &n);
			for (int k = 0; k < n && rc == SQLITE_OK; k++)
			{
				bool		exists,
							kept,
							pointed;

				rc = find(lg, t, p, keys[k], lens[k], &exists, &kept);
				if (rc != SQLITE_OK || kept)
					continue;
				if (!exists)
				{
					rc = forget(lg, t, keys[k], lens[k], false);
					continue;
				}
				rc = stays_pointed(lg, t, p, keys[k], lens[k], &pointed);
				if (rc != SQLITE_OK || pointed)
					continue;
				rc = delete_row(lg, t, p, keys[k], lens[k]);
				if (rc == SQLITE_CONSTRAINT)
				{
					rc = SQLITE_OK;
					continue;
				}
				if (rc == SQLITE_OK)
					rc = forget(lg, t, keys[k], lens[k], true);
				if (rc == SQLITE_OK)
				{
					(*count)++;
					changed = true;
				}
			}
		}
	}
	return rc;
}
