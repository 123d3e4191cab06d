/*
** alter.c - a Down's schema (docs/protocol.md 5.3, evolve.c): each Table
** matched with a table held, by id (by name when either side has none),
** and the table changed to it: made when none is; otherwise renamed, its
** columns renamed, dropped and added (an added column takes the fill row's
** value on every row held), rebuilt with its rows when its key or a
** column's SQLite type changed, its indexes and triggers made again, its
** Table stored.  Renames go through names of our own first (_sync_moving_,
** _sync_col_), so that tables or columns that trade names in one change
** never collide.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "evolver.h"

/* ---- matching ---------------------------------------------------------- */

/*
 * A new Table's columns looked up as an old column matches them: by id
 * when both have one, else by name (names are unique in a Table, wire.c).
 * by_id: (id, place) of the columns with an id, in that order, searched by
 * halves; by_name: every column's place.
 */
typedef struct id_place
{
	uint32_t	id;
	int			place;
} id_place;

typedef struct matcher
{
	const Sync__Table *m;
	int			nid;
	id_place   *by_id;
	int		   *place;
	ms_map		by_name;
} matcher;

static int
id_order(const void *a, const void *b)
{
	const id_place *x = a;
	const id_place *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->place < y->place ? -1 : x->place > y->place;
}

static int
matcher_make(ms_ctx *c, const Sync__Table *m, matcher *mt)
{
	mt->m = m;
	mt->nid = 0;
	mt->by_id = ms_alloc(&c->arena, sizeof(id_place) * (m->n_columns + 1));
	mt->place = ms_alloc(&c->arena, sizeof(int) * (m->n_columns + 1));
	ms_map_init(&mt->by_name, false);
	if (mt->by_id == NULL || mt->place == NULL)
		return SQLITE_NOMEM;
	for (size_t i = 0; i < m->n_columns; i++)
	{
		mt->place[i] = (int) i;
		if (ms_map_put(&c->arena, &mt->by_name, m->columns[i]->name, strlen(m->columns[i]->name),
					   &mt->place[i]) != SQLITE_OK)
			return SQLITE_NOMEM;
		if (m->columns[i]->id != 0)
			mt->by_id[mt->nid++] = (id_place) {m->columns[i]->id, (int) i};
	}
	qsort(mt->by_id, (size_t) mt->nid, sizeof(id_place), id_order);
	return SQLITE_OK;
}

/*
 * match_column: the place in the new Table of the old column oc, or -1
 * (dropped): the first column whose id is oc's when both have one, or
 * whose name is oc's when either has none
 */
static int
match_column(const Sync__Column *oc, const matcher *mt)
{
	const int  *named = ms_map_get(&mt->by_name, oc->name, strlen(oc->name));
	int			found = -1;

	if (named != NULL && (oc->id == 0 || mt->m->columns[*named]->id == 0))
		found = *named;
	if (oc->id != 0)
	{
		int			lo = 0,
					hi = mt->nid;

		while (lo < hi)
		{
			int			mid = (lo + hi) / 2;

			if (mt->by_id[mid].id < oc->id)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < mt->nid && mt->by_id[lo].id == oc->id && (found < 0 || mt->by_id[lo].place < found))
			found = mt->by_id[lo].place;
	}
	return found;
}

/* the file's columns of a table: their names */
static int
file_columns(ms_ctx *c, const char *table, char ***names, int *n)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "SELECT name FROM pragma_table_info(?1)");

	if (rc == SQLITE_OK)
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	return ms_names_read(c, st, rc, names, n);
}

/* name_set: names as SQLite compares them, to ask whether one is among them */
static int
name_set(ms_ctx *c, char **names, int n, ms_map *set)
{
	ms_map_init(set, true);
	for (int i = 0; i < n; i++)
		if (ms_map_put(&c->arena, set, names[i], strlen(names[i]), names[i]) != SQLITE_OK)
			return SQLITE_NOMEM;
	return SQLITE_OK;
}

static bool
in_set(const ms_map *set, const char *name)
{
	return ms_map_get(set, name, strlen(name)) != NULL;
}

/* rename_refs: what the extension keeps of a table follows it to its new name */
static int
rename_refs(ms_ctx *c, const char *from, const char *to)
{
	int			rc = ms_exec(c, "UPDATE _sync_notes SET tbl = %Q WHERE tbl = %Q;"
				   "UPDATE _sync_refused SET tbl = %Q WHERE tbl = %Q;"
				   "UPDATE _sync_retired SET tbl = %Q WHERE tbl = %Q;"
				   "UPDATE _sync_named SET tbl = %Q WHERE tbl = %Q",
				   to, from, to, from, to, from, to, from);

	return rc == SQLITE_OK ? ms_table_made(c, to, from) : rc;
}

/* ---- one table's change ------------------------------------------------- */

/*
 * A change under way: the held table it alters (NULL: a new one) and where
 * it is now; unmade: the stored table it matched, which the replica never
 * made (the host had its name): the change is a new Table for it.
 */
typedef struct change
{
	Sync__Table *m;
	ms_tbl	   *old;
	ms_tbl	   *unmade;
	char	   *fname;			/* the file's name of the table now */
	bool		failed;
}			change;

/*
 * The names the tables held will have once the change is applied, as
 * SQLite compares them, counted: a table whose name another has too
 * cannot be held.  A change that fails takes its name out.
 */
typedef struct held_names
{
	ms_map		count;			/* folded name -> int */
	ms_schema  *s;
	bool	   *changing;		/* per table of s: a change alters it */
	change	   *ch;
	size_t		nch;
} held_names;

static int
held_add(ms_ctx *c, held_names *h, const char *name, int by)
{
	int		   *n = ms_map_get(&h->count, name, strlen(name));

	if (n == NULL)
	{
		if ((n = ms_alloc(&c->arena, sizeof(int))) == NULL ||
			ms_map_put(&c->arena, &h->count, name, strlen(name), n) != SQLITE_OK)
			return SQLITE_NOMEM;
	}
	*n += by;
	return SQLITE_OK;
}

/* held_clash: another table held with the name of change i (NULL: none) */
static const char *
held_clash(held_names *h, size_t i)
{
	const char *name = h->ch[i].m->name;
	int		   *n = ms_map_get(&h->count, name, strlen(name));

	if (n == NULL || *n <= 1)
		return NULL;
	for (int j = 0; j < h->s->n; j++)
		if (!h->changing[j] && strcasecmp(h->s->t[j].name, name) == 0)
			return h->s->t[j].name;
	for (size_t k = 0; k < h->nch; k++)
		if (k != i && !h->ch[k].failed && strcasecmp(h->ch[k].m->name, name) == 0)
			return h->ch[k].m->name;
	return NULL;
}

/*
 * rebuild: the table made again with its rows (a key or a column's type
 * changed); the replica's own indexes and triggers of it made again after,
 * each reported when it no longer fits (ddl.c makes it again without
 * renaming a table, so SQLite checks no view against it while it is gone).
 */
static int
rebuild(evolver *e, const ms_tbl *t)
{
	ms_ctx	   *c = e->c;
	sqlite3_stmt *st;
	char	  **own = NULL;
	int			nown = 0;
	int			cap = 0;
	int			rc = ms_prepare(c, &st, "SELECT sql FROM main.sqlite_master WHERE tbl_name = ?1"
						" AND type IN ('index', 'trigger') AND sql IS NOT NULL AND substr(name, 1, 6) <> '_sync_'");
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
	while ((rc = ms_step(c, st)) == SQLITE_ROW)
	{
		if (nown == cap)
		{
			char	  **more = ms_alloc(&c->arena, sizeof(char *) * (size_t) (cap = cap ? cap * 2 : 8));

			if (more == NULL)
				break;
			if (nown)
				memcpy(more, own, sizeof(char *) * (size_t) nown);
			own = more;
		}
		own[nown++] = ms_strdup(&c->arena, (const char *) sqlite3_column_text(st, 0));
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return rc == SQLITE_ROW ? SQLITE_NOMEM : rc;
	rc = ms_table_rebuild(c, t);
	if (rc != SQLITE_OK && e->stmt == NULL)
	{
		e->stmt = ms_printf(&c->arena, "(rebuilding table \"%s\" with its rows)", t->name);
		e->error = ms_strdup(&c->arena, c->err ? c->err : sqlite3_errstr(rc));
	}
	for (int i = 0; i < nown && rc == SQLITE_OK; i++)
		rc = own[i] ? ms_ev_attempt(e, t->name, own[i]) : SQLITE_NOMEM;
	return rc;
}

/* decode_fill: the Table's fill row decoded as a row of it (*vals NULL: it has none) */
static int
decode_fill(evolver *e, const ms_tbl *t, ms_val **vals)
{
	ms_ctx	   *c = e->c;
	const ProtobufCBinaryData *f = &t->msg->fill;
	char	   *scratch;
	char		reason[MS_REASON_MAX];

	*vals = NULL;
	if (f->len == 0)
		return SQLITE_OK;
	*vals = ms_alloc(&c->arena, sizeof(ms_val) * (size_t) (t->ncols + 1));
	scratch = ms_alloc(&c->arena, f->len + 1);
	if (*vals == NULL || scratch == NULL)
		return SQLITE_NOMEM;
	if (!ms_row_decode(t, f->data, f->len, *vals, scratch, reason))
	{
		e->stmt = ms_printf(&c->arena, "(decoding the fill row of table \"%s\")", t->name);
		e->error = ms_strdup(&c->arena, reason);
		return SQLITE_MISMATCH;
	}
	return SQLITE_OK;
}

/*
 * add_column: a column the change adds.  Its fill, when an integer or a
 * text, is the column's default in SQLite, which the rows held read without
 * being written (and the vals entry is used up); otherwise fill() writes it.
 */
static int
add_column(evolver *e, const ms_tbl *t, int ci, ms_val *vals)
{
	ms_val	   *v = vals ? &vals[ci] : NULL;
	char	   *lit = NULL;
	int			rc;

	if (v != NULL && v->type == SQLITE_INTEGER)
		lit = ms_printf(&e->c->arena, " DEFAULT %lld", (long long) v->i);
	else if (v != NULL && v->type == SQLITE_TEXT && memchr(v->p, 0, v->n) == NULL)
		lit = ms_printf(&e->c->arena, " DEFAULT %.*Q", (int) v->n, v->p);
	rc = ms_ev_run(e, "ALTER TABLE %s ADD COLUMN %s %s%s", t->q, t->cols[ci].q, ms_type_name(t->cols[ci].type),
			 lit ? lit : "");
	if (rc == SQLITE_OK && lit != NULL)
		v->type = SQLITE_NULL;
	return rc;
}

/* fill: the rows held take, in each column the change added, the fill row's value */
static int
fill(evolver *e, const ms_tbl *t, const ms_val *vals, char **added, int nadded)
{
	ms_ctx	   *c = e->c;
	ms_map		set;
	int			rc = vals != NULL ? name_set(c, added, nadded, &set) : SQLITE_OK;

	for (int i = 0; vals != NULL && i < t->ncols && rc == SQLITE_OK; i++)
	{
		const ms_val *v = &vals[i];
		sqlite3_stmt *st;

		if (v->type == SQLITE_NULL || t->cols[i].retired || !in_set(&set, t->cols[i].name))
			continue;
		rc = ms_prepare(c, &st, "UPDATE %s SET %s = ?1", t->q, t->cols[i].q);
		if (rc != SQLITE_OK)
			break;
		if (v->type == SQLITE_INTEGER)
			sqlite3_bind_int64(st, 1, v->i);
		else if (v->type == SQLITE_FLOAT)
			sqlite3_bind_double(st, 1, v->d);
		else if (v->type == SQLITE_TEXT)
			sqlite3_bind_text64(st, 1, v->p, v->n, SQLITE_STATIC, SQLITE_UTF8);
		else
			sqlite3_bind_blob64(st, 1, v->p, v->n, SQLITE_STATIC);
		rc = ms_done(c, st);
		sqlite3_finalize(st);
	}
	return rc;
}

/*
 * columns: the held table's columns altered to the new Table's, renamed
 * through names of our own, dropped, then added or the table rebuilt.
 * *added: the columns the file did not have.
 */
static int
columns(evolver *e, change *ch, const ms_tbl *t, ms_val *vals, char ***added, int *nadded)
{
	ms_ctx	   *c = e->c;
	const Sync__Table *om = ch->old->msg;
	const Sync__Table *m = ch->m;
	bool		rebuilt = false;
	char	  **have;
	int			nhave;
	ms_map		have_set;
	ms_map		old_names;
	matcher		mt;
	int			rc = matcher_make(c, m, &mt);

	ms_map_init(&old_names, false);
	for (size_t k = om->n_columns; k > 0 && rc == SQLITE_OK; k--)	/* the first of a name wins */
		rc = ms_map_put(&c->arena, &old_names, om->columns[k - 1]->name, strlen(om->columns[k - 1]->name),
						om->columns[k - 1]);

	/*
	 * Renamed to a name of our own, then the dropped ones dropped (their
	 * values go; one something of the replica's own uses stays), then the
	 * renamed ones given their own names: columns that trade names, or take
	 * a dropped one's, never collide.
	 */
	for (int pass = 0; pass < 3 && rc == SQLITE_OK; pass++)
		for (size_t k = 0; k < om->n_columns && rc == SQLITE_OK; k++)
		{
			const char *name = om->columns[k]->name;
			int			j = match_column(om->columns[k], &mt);
			char	   *tmp = ms_printf(&c->arena, "_sync_col_%d", (int) k);
			char	   *sql;

			if (tmp == NULL)
				return SQLITE_NOMEM;
			if (om->retired[0] && strcmp(name, om->retired) == 0)
				continue;
			if (pass == 1 && j < 0)
			{
				sql = ms_printf(&c->arena, "ALTER TABLE \"%w\" DROP COLUMN \"%w\"", m->name, name);
				rc = sql ? ms_ev_attempt(e, m->name, sql) : SQLITE_NOMEM;
			}
			else if (pass != 1 && j >= 0 && strcmp(name, m->columns[j]->name) != 0)
				rc = pass == 0 ? ms_ev_run(e, "ALTER TABLE \"%w\" RENAME COLUMN \"%w\" TO \"%w\"", m->name, name, tmp)
					: ms_ev_run(e, "ALTER TABLE \"%w\" RENAME COLUMN \"%w\" TO \"%w\"", m->name, tmp, m->columns[j]->name);
		}
	if (rc == SQLITE_OK)
		rc = file_columns(c, m->name, &have, &nhave);
	if (rc == SQLITE_OK)
		rc = name_set(c, have, nhave, &have_set);
	if (rc != SQLITE_OK)
		return rc;
	*added = ms_alloc(&c->arena, sizeof(char *) * (size_t) (t->ncols + 1));
	if (*added == NULL)
		return SQLITE_NOMEM;
	*nadded = 0;
	for (int i = 0; i < t->ncols; i++)
		if (!in_set(&have_set, t->cols[i].name))
			(*added)[(*nadded)++] = (char *) t->cols[i].name;
	/* a key, or a column's SQLite type, changed: the table is made again with its rows */
	if (om->n_key != m->n_key)
		rebuilt = true;
	for (size_t k = 0; k < m->n_key && !rebuilt; k++)
	{
		const Sync__Column *oc = ms_map_get(&old_names, om->key[k], strlen(om->key[k]));
		int			ok = oc ? match_column(oc, &mt) : -1;

		rebuilt = ok < 0 || strcmp(m->columns[ok]->name, m->key[k]) != 0;
	}
	for (size_t k = 0; k < om->n_columns && !rebuilt; k++)
	{
		int			j = match_column(om->columns[k], &mt);

		rebuilt = j >= 0 && strcmp(om->columns[k]->type, m->columns[j]->type) != 0 &&
			!(om->retired[0] && strcmp(om->columns[k]->name, om->retired) == 0);
	}
	if (rebuilt)
		return rebuild(e, t);
	for (int i = 0; i < *nadded && rc == SQLITE_OK; i++)
	{
		int			ci = ms_tbl_column(t, (*added)[i], strlen((*added)[i]));

		rc = add_column(e, t, ci, t->cols[ci].retired ? NULL : vals);
	}
	return rc;
}

/* alter: a held table altered to the server's Table (in its own savepoint, by the caller) */
static int
alter(evolver *e, change *ch, ms_tbl *t)
{
	ms_ctx	   *c = e->c;
	const Sync__Table *m = ch->m;
	char	  **added = NULL;
	int			nadded = 0;
	ms_val	   *vals;
	int			rc = decode_fill(e, t, &vals);

	if (rc == SQLITE_OK && strcmp(ch->fname, m->name) != 0)
	{
		char	   *type;

		rc = ms_object_type(c, m->name, &type);
		if (rc == SQLITE_OK && type != NULL)
		{
			e->stmt = ms_printf(&c->arena, "ALTER TABLE \"%s\" RENAME TO \"%s\"", ch->old->name, m->name);
			e->error = ms_printf(&c->arena, "a %s named \"%s\" is in the way", type, m->name);
			return SQLITE_ERROR;
		}
		if (rc == SQLITE_OK)
			rc = ms_ev_run(e, "ALTER TABLE \"%w\" RENAME TO \"%w\"", ch->fname, m->name);
		if (rc == SQLITE_OK)
			rc = rename_refs(c, ch->fname, m->name);
	}
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "DELETE FROM _sync_tables WHERE name = %Q", ch->old->name);
	if (rc == SQLITE_OK)
		rc = ms_table_untrigger(c, ch->old->name);
	if (rc == SQLITE_OK)
		rc = ms_ev_drop_ours(e, m->name);
	if (rc == SQLITE_OK)
		rc = columns(e, ch, t, vals, &added, &nadded);
	if (rc == SQLITE_OK)
		rc = fill(e, t, vals, added, nadded);
	if (rc == SQLITE_OK)
		rc = ms_table_finish(c, ch->m, t, ch->old->position);
	/* what it wrote and has not had filed goes up again, in the new schema */
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "UPDATE _sync_notes SET send_id = NULL, sent_at = NULL WHERE tbl = %Q", m->name);
	return rc;
}

/* position: where a new table goes among the tables held */
static int
next_position(ms_ctx *c)
{
	int			p = 0;

	for (int i = 0; c->schema && i < c->schema->n; i++)
		if (c->schema->t[i].position >= p)
			p = c->schema->t[i].position + 1;
	return p;
}

/*
 * move_back: a table moved aside whose change failed goes back to its name
 * and gets its triggers again; when even that fails (a name now taken), it
 * is left out until a snapshot makes it again.
 */
static int
move_back(evolver *e, change *ch)
{
	ms_ctx	   *c = e->c;
	int			rc = ms_begin(c, "_sync_evolve");

	if (rc == SQLITE_OK)
		rc = ms_ev_run(e, "ALTER TABLE \"%w\" RENAME TO \"%w\"", ch->fname, ch->old->name);
	if (rc == SQLITE_OK)
		rc = rename_refs(c, ch->fname, ch->old->name);
	if (rc == SQLITE_OK)
		rc = ms_table_finish(c, ch->old->msg, ch->old, ch->old->position);
	if (rc == SQLITE_OK || ms_ev_fatal(rc))
		return ms_end(c, "_sync_evolve", rc);
	sqlite3_free(c->err);
	c->err = NULL;
	(void) ms_end(c, "_sync_evolve", rc);
	rc = ms_ev_report(e, ch->old->name, e->stmt ? e->stmt : "(moving the table back)", e->error ? e->error : "failed", false);
	e->stmt = e->error = NULL;
	return rc;
}

/*
 * change_table: one Table of Down.schema, whole or not at all; a failure is
 * reported and absorbed.  clash: a table held once the whole change is
 * applied whose name is this one's in SQLite (NULL: none).  A new table
 * whose name the host has waits, unmade: stored, reported, not made.
 */
static int
change_table(evolver *e, change *ch, const char *clash, int position)
{
	ms_ctx	   *c = e->c;
	char	   *why = ms_why_not_held(c, ch->m, clash);
	char	   *host = NULL;
	ms_tbl		t;
	int			rc;

	if (why != NULL)
		return ms_ev_report(e, ch->m->name, "(holding the table)", why, false);
	rc = ms_begin(c, "_sync_evolve");
	if (rc != SQLITE_OK)
		return rc;
	e->stmt = e->error = NULL;
	rc = ms_tbl_build(c, ch->m, &t);
	if (rc == SQLITE_OK && ch->old == NULL)
	{
		if (ch->unmade != NULL)
		{
			position = ch->unmade->position;
			rc = ms_exec(c, "DELETE FROM _sync_tables WHERE name = %Q", ch->unmade->name);
		}
		if (rc == SQLITE_OK)
			rc = ms_table_take(c, &t, &host);
		if (rc == SQLITE_OK && host == NULL)
			rc = ms_table_finish(c, ch->m, &t, position);
		else if (rc == SQLITE_OK)
			rc = ms_table_store(c, ch->m, position);
	}
	else if (rc == SQLITE_OK)
		rc = alter(e, ch, &t);
	if (rc == SQLITE_OK && host != NULL)
	{
		char	   *stmt = ms_printf(&c->arena, "(making table \"%s\")", ch->m->name);

		rc = ms_end(c, "_sync_evolve", rc);
		if (rc == SQLITE_OK)
			rc = stmt ? ms_ev_report(e, ch->m->name, stmt, host, false) : SQLITE_NOMEM;
		return rc;
	}
	if (rc == SQLITE_OK)
	{
		e->changed++;
		return ms_end(c, "_sync_evolve", rc);
	}
	if (ms_ev_fatal(rc))
		return ms_end(c, "_sync_evolve", rc);
	/* the table stays as it was: moved back when it was moved aside, its triggers made again */
	{
		char	   *stmt = e->stmt ? e->stmt : ms_printf(&c->arena, "(making table \"%s\")", ch->m->name);
		char	   *error = e->error ? e->error : ms_strdup(&c->arena, c->err ? c->err : sqlite3_errstr(rc));

		sqlite3_free(c->err);
		c->err = NULL;
		(void) ms_end(c, "_sync_evolve", rc);
		ch->failed = true;
		e->stmt = e->error = NULL;
		if (stmt == NULL || error == NULL)
			return SQLITE_NOMEM;
		rc = ms_ev_report(e, ch->m->name, stmt, error, false);
		if (rc == SQLITE_OK && ch->old != NULL && strcmp(ch->fname, ch->old->name) != 0)
			rc = move_back(e, ch);
		return rc;
	}
}

/*
 * move_aside: a held table the change renames goes to a name of our own
 * first, so that tables trading names never collide; its triggers go.
 */
static int
move_aside(evolver *e, change *ch, int i)
{
	ms_ctx	   *c = e->c;
	char	   *tmp = ms_printf(&c->arena, "_sync_moving_%d", i);
	int			rc;

	if (tmp == NULL)
		return SQLITE_NOMEM;
	rc = ms_begin(c, "_sync_evolve");
	if (rc == SQLITE_OK)
		rc = ms_table_untrigger(c, ch->old->name);
	if (rc == SQLITE_OK)
		rc = ms_ev_run(e, "ALTER TABLE \"%w\" RENAME TO \"%w\"", ch->old->name, tmp);
	if (rc == SQLITE_OK)
		rc = rename_refs(c, ch->old->name, tmp);
	if (rc == SQLITE_OK)
	{
		ch->fname = tmp;
		return ms_end(c, "_sync_evolve", rc);
	}
	if (ms_ev_fatal(rc))
		return ms_end(c, "_sync_evolve", rc);
	sqlite3_free(c->err);
	c->err = NULL;
	(void) ms_end(c, "_sync_evolve", rc);
	ch->failed = true;
	rc = ms_ev_report(e, ch->m->name, e->stmt ? e->stmt : "(renaming the table)", e->error ? e->error : "failed", false);
	e->stmt = e->error = NULL;
	return rc;
}

/*
 * matching: the held table a Table changes (NULL: none), the first in the
 * schema's order that is it: by id when both have one, else by name
 */
static ms_tbl *
matching(const Sync__Table *m, const ms_map *by_id, const ms_map *by_name)
{
	ms_tbl	   *named = ms_map_get(by_name, m->name, strlen(m->name));
	ms_tbl	   *same = m->id != 0 ? ms_map_get(by_id, (const char *) &m->id, sizeof m->id) : NULL;

	if (named != NULL && m->id != 0 && named->msg->id != 0)
		named = NULL;
	return same != NULL && (named == NULL || same < named) ? same : named;
}

/* schema_changes: Down.schema, matched first, renamed tables moved aside, then each applied */
int
ms_ev_schema_changes(evolver *e, const Sync__Down *d)
{
	ms_ctx	   *c = e->c;
	ms_schema  *s = c->schema;
	change	   *ch = ms_alloc(&c->arena, sizeof(change) * (d->n_schema + 1));
	held_names	h;
	ms_map		by_id;
	ms_map		by_name;
	int			position = next_position(c);
	int			rc = SQLITE_OK;

	h.changing = ms_alloc(&c->arena, sizeof(bool) * (size_t) (s->n + 1));
	if (ch == NULL || h.changing == NULL)
		return SQLITE_NOMEM;
	h.s = s;
	h.ch = ch;
	h.nch = d->n_schema;
	ms_map_init(&h.count, true);
	ms_map_init(&by_id, false);
	ms_map_init(&by_name, false);
	/* the first of an id, or of a name, in the schema's order wins */
	for (int j = s->n - 1; j >= 0 && rc == SQLITE_OK; j--)
	{
		if (s->t[j].msg->id != 0)
			rc = ms_map_put(&c->arena, &by_id, (const char *) &s->t[j].msg->id, sizeof s->t[j].msg->id, &s->t[j]);
		if (rc == SQLITE_OK)
			rc = ms_map_put(&c->arena, &by_name, s->t[j].name, strlen(s->t[j].name), &s->t[j]);
	}
	for (size_t i = 0; i < d->n_schema && rc == SQLITE_OK; i++)
	{
		ch[i].m = d->schema[i];
		ch[i].old = matching(d->schema[i], &by_id, &by_name);
		/* a table the replica never made is not altered: the change is a new Table for it */
		if (ch[i].old != NULL && ch[i].old->unmade)
		{
			ch[i].unmade = ch[i].old;
			ch[i].old = NULL;
		}
		if (ch[i].old != NULL)
			h.changing[ch[i].old - s->t] = true;
		if (ch[i].unmade != NULL)
			h.changing[ch[i].unmade - s->t] = true;
		ch[i].fname = ch[i].old ? (char *) ch[i].old->name : NULL;
	}
	for (int j = 0; j < s->n && rc == SQLITE_OK; j++)
		if (!h.changing[j])
			rc = held_add(c, &h, s->t[j].name, 1);
	for (size_t i = 0; i < d->n_schema && rc == SQLITE_OK; i++)
		rc = held_add(c, &h, ch[i].m->name, 1);
	for (size_t i = 0; i < d->n_schema && rc == SQLITE_OK; i++)
		if (ch[i].old != NULL && strcmp(ch[i].old->name, ch[i].m->name) != 0)
		{
			rc = move_aside(e, &ch[i], (int) i);
			if (rc == SQLITE_OK && ch[i].failed)
				rc = held_add(c, &h, ch[i].m->name, -1);
		}
	for (size_t i = 0; i < d->n_schema && rc == SQLITE_OK; i++)
	{
		if (ch[i].failed)
			continue;
		rc = change_table(e, &ch[i], held_clash(&h, i), position++);
		if (rc == SQLITE_OK && ch[i].failed)
			rc = held_add(c, &h, ch[i].m->name, -1);
	}
	return rc;
}

