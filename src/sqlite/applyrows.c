/*
** applyrows.c - a Down's rows applied (applier.h: what it shares with
** apply.c): upserts of a table, parents first, that overwrite the row but
** the columns the replica owns; deletes, children first, that let go of
** rows (letgo.c); the rows a snapshot's end lets go of, those it did not
** name; and a row that cannot be taken refused (_sync_refused), the rest
** going on.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "applier.h"
#include "key.h"

/* wire_key: the canonical bytes of a wire Key into a->key */
static bool
wire_key(applier *a, const Sync__Key *k)
{
	size_t		n = ms_wire_key_size(k);

	if (n + 1 > a->key.cap)
	{
		char	   *d = sqlite3_realloc64(a->key.data, n + 1);

		if (d == NULL)
			return false;
		a->key.data = d;
		a->key.cap = n + 1;
	}
	a->key.len = ms_wire_key_write(k, a->key.data);
	a->key.data[a->key.len] = '\0';
	return true;
}

/*
 * wire_key_is: whether the canonical bytes of a wire Key are key[0, len):
 * compared where they are, nothing written (a first sync has a key a row)
 */
static bool
wire_key_is(const Sync__Key *k, const char *key, size_t len)
{
	size_t		pos = 0;

	for (size_t i = 0; i < k->n_parts; i++)
	{
		size_t		n = strlen(k->parts[i]);
		char		head[MS_KEY_HEAD_MAX];
		size_t		h = ms_key_part_head(head, n);

		if (len - pos < h || memcmp(key + pos, head, h) != 0 || len - pos - h < n ||
			memcmp(key + pos + h, k->parts[i], n) != 0)
			return false;
		pos += h + n;
	}
	return pos == len;
}

/*
 * part_is_int: whether a wire key's part is the canonical text of i (as
 * ms_key_append_int spells it: decimal, a '-' before a negative, no
 * leading zero).  Read, not written: false for more than 18 digits, which
 * the caller then compares written out.
 */
static inline bool
part_is_int(const char *part, sqlite3_int64 i)
{
	const char *p = part;
	uint64_t	v = 0;
	int			digits = 0;
	bool		neg = *p == '-';

	if (neg)
		p++;
	if (p[0] == '0' && (p[1] != '\0' || neg))
		return false;			/* "0" alone is zero's; "-0" and "01" are no integer's */
	for (; (unsigned) (*p - '0') < 10; p++)
		if (++digits > 18)
			return false;
		else
			v = v * 10 + (unsigned) (*p - '0');
	if (*p != '\0' || digits == 0)
		return false;
	return neg ? i < 0 && (uint64_t) 0 - (uint64_t) i == v : i >= 0 && (uint64_t) i == v;
}

/*
 * row_is_wire_key: whether the row's key columns are its wire Key, without
 * writing either (a first sync's every row; writing the row's key to
 * compare was a tenth of what we add to its upsert).  False is no verdict:
 * the caller writes and compares them then, as for any row.
 */
static bool
row_is_wire_key(const ms_tbl *t, const ms_val *vals, const Sync__Key *k)
{
	if ((size_t) t->nkey != k->n_parts)
		return false;
	for (int i = 0; i < t->nkey; i++)
	{
		const ms_val *v = &vals[t->key[i]];
		const char *part = k->parts[i];

		if (v->type == SQLITE_INTEGER)
		{
			if (!part_is_int(part, v->i))
				return false;
		}
		else if (v->type != SQLITE_TEXT || strlen(part) != v->n || memcmp(part, v->p, v->n) != 0)
			return false;
	}
	return true;
}

/* wire_key_swap: the row's key, found equal to its wire Key, becomes a->key: no copy */
static void
wire_key_swap(applier *a)
{
	ms_buf		b = a->key;

	a->key = a->rowkey;
	a->rowkey = b;
}

static const char *const refuse_sql =
"INSERT INTO _sync_refused(tbl, key, reason, at) VALUES (?1, ?2, ?3, ?4)"
" ON CONFLICT (tbl, key) DO UPDATE SET reason = excluded.reason, at = excluded.at,"
" send_id = NULL, sent_at = NULL, filed = 0";
static const char *const unrefuse_sql = "DELETE FROM _sync_refused WHERE tbl = ?1 AND key = ?2";
static const char *const unretire_sql = "DELETE FROM _sync_retired WHERE tbl = ?1 AND key = ?2";
static const char *const note_sql = "SELECT 1 FROM _sync_notes WHERE tbl = ?1 AND key = ?2";
static const char *const named_sql = "INSERT OR IGNORE INTO _sync_named(tbl, key) VALUES (?1, ?2)";
/* the key no row has: the open snapshot names the table whole (fresh_tables) */
#define NAMED_WHOLE "EXISTS (SELECT 1 FROM _sync_named WHERE tbl = ?1 AND key = '')"
static const char *const whole_sql = "SELECT " NAMED_WHOLE;

/* need: a statement, prepared the first time it is needed */
static int
need(applier *a, sqlite3_stmt **st, const char *sql)
{
	return *st ? SQLITE_OK : ms_prepare(a->c, st, "%s", sql);
}

static int
refuse_row(applier *a, const char *table, const char *key, size_t len, const char *reason)
{
	int			rc = need(a, &a->refuse, refuse_sql);

	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(a->refuse, 1, table, -1, SQLITE_STATIC);
	sqlite3_bind_text(a->refuse, 2, key, (int) len, SQLITE_STATIC);
	sqlite3_bind_text(a->refuse, 3, reason, -1, SQLITE_STATIC);
	sqlite3_bind_int64(a->refuse, 4, a->c->now);
	a->n.refused++;
	return ms_done(a->c, a->refuse);
}

/* keyed: run a statement of (table, key), prepared on first use */
static int
keyed(applier *a, sqlite3_stmt **st, const char *sql, const char *table, const char *key, size_t len)
{
	int			rc = need(a, st, sql);

	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(*st, 1, table, -1, SQLITE_STATIC);
	sqlite3_bind_text(*st, 2, key, (int) len, SQLITE_STATIC);
	return ms_done(a->c, *st);
}

/*
 * marks: whether the table has retired rows and refused rows, and, with
 * whole (a snapshot is open), whether the snapshot names it whole
 * (named_whole), in one query
 */
static int
marks(applier *a, const char *table, bool *retired, bool *refused, bool *whole)
{
	sqlite3_stmt *st;
	int64_t		v[3] = {0, 0, 0};
	int			rc = whole ? ms_prepare(a->c, &st, "SELECT EXISTS (SELECT 1 FROM _sync_retired WHERE tbl = ?1),"
										" EXISTS (SELECT 1 FROM _sync_refused WHERE tbl = ?1), " NAMED_WHOLE)
		: ms_prepare(a->c, &st, "SELECT EXISTS (SELECT 1 FROM _sync_retired WHERE tbl = ?1),"
					 " EXISTS (SELECT 1 FROM _sync_refused WHERE tbl = ?1)");

	if (rc == SQLITE_OK)
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	rc = ms_ints_read(a->c, st, rc, v, whole ? 3 : 2);
	*retired = v[0] != 0;
	*refused = v[1] != 0;
	if (whole)
		*whole = v[2] != 0;
	return rc;
}

/* named_whole: whether the open snapshot names every row of the table (fresh_tables) */
static int
named_whole(applier *a, const char *table, bool *yes)
{
	sqlite3_stmt *st;
	int64_t		v = 0;
	int			rc = ms_prepare(a->c, &st, "%s", whole_sql);

	if (rc == SQLITE_OK)
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	rc = ms_int_read(a->c, st, rc, &v);
	*yes = v != 0;
	return rc;
}

/*
 * usable: whether the file's table is as the schema says (the host may have
 * dropped it, or a column): one that is not is treated as a table the
 * replica does not hold, until a snapshot makes it again.
 */
static int
usable(applier *a, const ms_tbl *t, bool *yes)
{
	ms_ctx	   *c = a->c;
	int			i = (int) (t - c->schema->t);

	*yes = t->broken == NULL;
	if (*yes)
		return SQLITE_OK;
	if (a->usable == NULL && (a->usable = ms_alloc(&c->arena, (size_t) c->schema->n + 1)) == NULL)
		return SQLITE_NOMEM;
	if (a->usable[i])
		return SQLITE_OK;
	a->usable[i] = 1;			/* said once per message */
	if (t->unmade)
		return ms_state_error(c, "table \"%s\" is not held: %s; its rows are refused", t->name, t->broken);
	return ms_state_error(c, "%s, not as the snapshot made it: its rows are refused until a snapshot"
						  " makes it again", t->broken);
}

/*
 * The replace list of a message's rows (Rows.replaces), as canonical keys
 * sorted once, so that each upsert is looked up in log n comparisons: a
 * linear scan per upsert was quadratic (16k rows: 8.5 s, against 0.04 s).
 * ms_replace_compares counts the comparisons, for the tests.
 */
typedef struct replace_key
{
	const char *p;
	size_t		len;
} replace_key;

unsigned long ms_replace_compares;

static int
replace_cmp(const void *a, const void *b)
{
	const replace_key *x = a;
	const replace_key *y = b;

	ms_replace_compares++;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->p, y->p, x->len);
}

/* replaces_sorted: r's replace list as sorted keys in *keys (NULL when none), their bytes in *bytes */
static int
replaces_sorted(const Sync__Rows *r, replace_key **keys, char **bytes)
{
	size_t		total = 0;
	size_t		pos = 0;

	*keys = NULL;
	*bytes = NULL;
	if (r->n_replaces == 0)
		return SQLITE_OK;
	for (size_t i = 0; i < r->n_replaces; i++)
		total += ms_wire_key_size(r->replaces[i]);
	*keys = sqlite3_malloc64(sizeof(replace_key) * r->n_replaces);
	*bytes = sqlite3_malloc64(total ? total : 1);
	if (*keys == NULL || *bytes == NULL)
	{
		sqlite3_free(*keys);
		sqlite3_free(*bytes);
		*keys = NULL;
		*bytes = NULL;
		return SQLITE_NOMEM;
	}
	for (size_t i = 0; i < r->n_replaces; i++)
	{
		size_t		n = ms_wire_key_write(r->replaces[i], *bytes + pos);

		(*keys)[i].p = *bytes + pos;
		(*keys)[i].len = n;
		pos += n;
	}
	qsort(*keys, r->n_replaces, sizeof(replace_key), replace_cmp);
	return SQLITE_OK;
}

/* whether the row of this canonical key is listed in the sorted replace list */
static bool
replaced(const replace_key *keys, size_t n, const char *key, size_t len)
{
	replace_key k = {key, len};

	return keys != NULL && bsearch(&k, keys, n, sizeof(replace_key), replace_cmp) != NULL;
}

/*
 * the upsert of one table: every column but the retired one, as bound; an
 * existing row keeps the columns the replica owns, unless whole (a
 * replacement, Rows.replaces).  Its text is made once a schema, where the
 * schema lives (a kept schema's outlives the call: making it was 40 % of a
 * one-row message's upserts).
 */
static int
upsert_statement(applier *a, ms_tbl *t, bool whole, sqlite3_stmt **st)
{
	ms_arena  **arena = a->c->schema->arena;
	ms_buf		b = {0};
	bool		set = false;
	int			param = 0;
	int			rc;

	*st = NULL;
	if (t->upsert[whole] == NULL)
	{
		ms_buf_printf(&b, "INSERT INTO %s(", t->q);
		for (int i = 0, k = 0; i < t->ncols; i++)
			if (!t->cols[i].retired)
				ms_buf_printf(&b, "%s%s", k++ ? ", " : "", t->cols[i].q);
		ms_buf_str(&b, ") VALUES (");
		for (int i = 0; i < t->ncols; i++)
			if (!t->cols[i].retired)
				ms_buf_printf(&b, "%s?%d", param ? ", " : "", param + 1), param++;
		ms_buf_printf(&b, ") ON CONFLICT (%s) DO ", t->keycols);
		for (int i = 0; i < t->ncols; i++)
		{
			const ms_col *col = &t->cols[i];

			if (col->key || (col->owned && !whole))
				continue;
			if (col->retired)
				ms_buf_printf(&b, "%s%s = NULL", set ? ", " : "UPDATE SET ", col->q);
			else
				ms_buf_printf(&b, "%s%s = excluded.%s", set ? ", " : "UPDATE SET ", col->q, col->q);
			set = true;
		}
		if (!set)
			ms_buf_str(&b, "NOTHING");
		/* a schema of no arena (none is): made each time, as before */
		if (!b.oom && arena != NULL)
			t->upsert[whole] = ms_strdup(arena, b.data);
		if (b.oom || (arena != NULL && t->upsert[whole] == NULL))
		{
			ms_buf_free(&b);
			return SQLITE_NOMEM;
		}
	}
	rc = ms_kept_prepare(a->c->db, t->upsert[whole] ? t->upsert[whole] : b.data, st);
	if (rc != SQLITE_OK)
		ms_dberr(a->c, rc);
	ms_buf_free(&b);
	return rc;
}

/* own_pending: a record of the replica's own origin with a pending note */
static int
own_pending(applier *a, const ms_tbl *t, const ms_val *vals, bool *yes)
{
	const ms_val *o;
	int			rc;

	*yes = false;
	if (!t->record || t->origin < 0 || !a->c->st.has_replica)
		return SQLITE_OK;
	o = &vals[t->origin];
	if (o->type != SQLITE_TEXT || o->n != 36 || strncasecmp(o->p, a->c->st.replica_text, 36) != 0)
		return SQLITE_OK;
	rc = need(a, &a->note, note_sql);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(a->note, 1, t->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(a->note, 2, a->key.data, (int) a->key.len, SQLITE_STATIC);
	rc = ms_step(a->c, a->note);
	*yes = rc == SQLITE_ROW;
	sqlite3_reset(a->note);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int
ms_upserts(applier *a, const Sync__Rows *r)
{
	ms_ctx	   *c = a->c;
	ms_tbl	   *t = ms_schema_find(c, r->table);
	sqlite3_stmt *up = NULL;
	sqlite3_stmt *whole = NULL;		/* the upsert of a replacement */
	replace_key *replaces = NULL;	/* its keys, sorted */
	char	   *replace_bytes = NULL;
	sqlite3_stmt *st;
	ms_val	   *vals = NULL;
	char	   *scratch = NULL;
	size_t		scratch_cap = 0;
	bool		retired_rows = false;
	bool		refusals = false;
	bool		name = a->c->st.snapshot != 0;	/* each row's key, for the snapshot's end */
	bool		need_key;		/* each row's key read after its upsert (else written only for a refusal) */
	int			rc = SQLITE_OK;
	char	   *unheld = NULL;
	bool		ok = true;

	if (t != NULL && r->n_upserts > 0 && (rc = usable(a, t, &ok)) != SQLITE_OK)
		return rc;
	if (t == NULL || !ok)
	{
		unheld = t && t->unmade ? ms_printf(&c->arena, "table \"%s\" is not held by this replica: %s", r->table, t->broken)
			: ms_printf(&c->arena, t ? "table \"%s\" is not as the snapshot made it in this replica"
						: "table \"%s\" is not held by this replica", r->table);
		if (unheld == NULL)
			return SQLITE_NOMEM;
		for (size_t i = 0; i < r->n_upserts && rc == SQLITE_OK; i++)
		{
			if (!wire_key(a, r->keys[i]))
				return SQLITE_NOMEM;
			rc = refuse_row(a, r->table, a->key.data, a->key.len, unheld);
		}
		return rc;
	}
	if (r->n_upserts == 0)
		return SQLITE_OK;
	rc = upsert_statement(a, t, false, &up);
	if (rc == SQLITE_OK && r->n_replaces > 0)
		rc = upsert_statement(a, t, true, &whole);
	if (rc == SQLITE_OK)
		rc = replaces_sorted(r, &replaces, &replace_bytes);
	if (rc == SQLITE_OK)
	{
		bool		named_all = false;

		rc = marks(a, t->name, &retired_rows, &refusals, name ? &named_all : NULL);
		name = name && !named_all;
	}
	need_key = whole != NULL || t->record || retired_rows || refusals;
	if (rc == SQLITE_OK && (vals = sqlite3_malloc64(sizeof(ms_val) * (size_t) t->ncols)) == NULL)
		rc = SQLITE_NOMEM;
	for (size_t i = 0; i < r->n_upserts && rc == SQLITE_OK; i++)
	{
		const ProtobufCBinaryData *row = &r->upserts[i];
		char		reason[MS_REASON_MAX];
		bool		kept = false;
		bool		unique;
		bool		keyed_now = name;	/* a->key holds the wire key; else it is written when needed */

		if (name && !wire_key(a, r->keys[i]))
		{
			rc = SQLITE_NOMEM;
			break;
		}
		if (row->len + 1 > scratch_cap)
		{
			sqlite3_free(scratch);
			scratch_cap = row->len + 1 > 4096 ? row->len + 1 : 4096;
			scratch = sqlite3_malloc64(scratch_cap);
			if (scratch == NULL)
			{
				rc = SQLITE_NOMEM;
				break;
			}
		}
		if (name)
			rc = keyed(a, &a->named, named_sql, t->name, a->key.data, a->key.len);
		if (rc != SQLITE_OK)
			break;
		if (!ms_row_decode(t, row->data, row->len, vals, scratch, reason))
		{
			rc = keyed_now || wire_key(a, r->keys[i]) ? refuse_row(a, t->name, a->key.data, a->key.len, reason)
				: SQLITE_NOMEM;
			continue;
		}
		/* the row's key is its wire Key: a->key written only when what follows reads it */
		if (row_is_wire_key(t, vals, r->keys[i]))
		{
			if (need_key && !keyed_now && !wire_key(a, r->keys[i]))
			{
				rc = SQLITE_NOMEM;
				break;
			}
			keyed_now = keyed_now || need_key;
		}
		else if (!ms_row_key(t, vals, &a->rowkey))
		{
			if (a->rowkey.oom || !(keyed_now || wire_key(a, r->keys[i])))
				rc = SQLITE_NOMEM;
			else
				rc = refuse_row(a, t->name, a->key.data, a->key.len, "a key column of the row is NULL or not a key value");
			continue;
		}
		else if (wire_key_is(r->keys[i], a->rowkey.data, a->rowkey.len))
		{
			wire_key_swap(a);
			keyed_now = true;
		}
		else if (!wire_key(a, r->keys[i]))
		{
			rc = SQLITE_NOMEM;
			break;
		}
		else
		{
			char	   *why = sqlite3_mprintf("the row's key columns (%.*s) are not its key",
											  (int) (a->rowkey.len > 80 ? 80 : a->rowkey.len), a->rowkey.data);

			rc = why ? refuse_row(a, t->name, a->key.data, a->key.len, why) : SQLITE_NOMEM;
			sqlite3_free(why);
			continue;
		}
		rc = own_pending(a, t, vals, &kept);
		if (rc != SQLITE_OK)
			break;
		if (kept)
		{
			a->n.kept++;
			continue;
		}
		st = whole != NULL && replaced(replaces, r->n_replaces, a->key.data, a->key.len) ? whole : up;
		for (int k = 0, p = 1; k < t->ncols; k++)
		{
			const ms_val *v = &vals[k];

			if (t->cols[k].retired)
				continue;
			switch (v->type)
			{
				case SQLITE_INTEGER:
					sqlite3_bind_int64(st, p, v->i);
					break;
				case SQLITE_FLOAT:
					sqlite3_bind_double(st, p, v->d);
					break;
				case SQLITE_TEXT:
					sqlite3_bind_text64(st, p, v->p, v->n, SQLITE_STATIC, SQLITE_UTF8);
					break;
				case SQLITE_BLOB:
					sqlite3_bind_blob64(st, p, v->p, v->n, SQLITE_STATIC);
					break;
				default:
					sqlite3_bind_null(st, p);
			}
			p++;
		}
		rc = sqlite3_step(st);
		unique = rc == SQLITE_CONSTRAINT && sqlite3_extended_errcode(c->db) == SQLITE_CONSTRAINT_UNIQUE;
		sqlite3_reset(st);
		/* a row the table did not take: its key, for what follows */
		if (rc != SQLITE_DONE && !keyed_now)
		{
			if (!wire_key(a, r->keys[i]))
			{
				rc = SQLITE_NOMEM;
				break;
			}
			keyed_now = true;
		}
		if (unique && t->msg->n_unique > 0)
		{
			/* a unique index that travels: the row holding its values is on its way to others */
			bool		made;

			rc = ms_unique_make_room(c, t, vals, a->key.data, a->key.len, &made);
			if (rc == SQLITE_OK)
			{
				rc = made ? sqlite3_step(st) : SQLITE_CONSTRAINT;
				sqlite3_reset(st);
			}
		}
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
		else if (rc == SQLITE_CONSTRAINT || rc == SQLITE_MISMATCH || rc == SQLITE_TOOBIG)
		{
			/* a constraint of the replica's own: the row cannot be taken */
			char	   *why = sqlite3_mprintf("the replica's table refused it: %s", sqlite3_errmsg(c->db));

			rc = why ? refuse_row(a, t->name, a->key.data, a->key.len, why) : SQLITE_NOMEM;
			sqlite3_free(why);
			continue;
		}
		else
		{
			ms_dberr(c, rc);
			break;
		}
		a->n.upserts++;
		if (retired_rows)
			rc = keyed(a, &a->unretire, unretire_sql, t->name, a->key.data, a->key.len);
		if (rc == SQLITE_OK && refusals)
			rc = keyed(a, &a->unrefuse, unrefuse_sql, t->name, a->key.data, a->key.len);
	}
	sqlite3_finalize(up);
	sqlite3_finalize(whole);
	sqlite3_free(replaces);
	sqlite3_free(replace_bytes);
	sqlite3_free(vals);
	sqlite3_free(scratch);
	return rc;
}

static void
count(applier *a, ms_letgo_result res)
{
	if (res == MS_LET_GO)
		a->n.deletes++;
	else if (res == MS_RETIRED)
		a->n.retired++;
	else if (res == MS_KEPT)
		a->n.kept++;
}

int
ms_deletes(applier *a, const Sync__Rows *r)
{
	ms_tbl	   *t = ms_schema_find(a->c, r->table);
	int			rc = SQLITE_OK;
	bool		ok = true;

	if (t != NULL && r->n_deletes > 0 && (rc = usable(a, t, &ok)) != SQLITE_OK)
		return rc;
	if (t == NULL || !ok)
		return SQLITE_OK;		/* nothing of it is held: nothing to let go of */
	for (size_t i = 0; i < r->n_deletes && rc == SQLITE_OK; i++)
	{
		ms_letgo_result res;

		if (!wire_key(a, r->deletes[i]))
			return SQLITE_NOMEM;
		rc = ms_let_go(a->lg, t, a->key.data, a->key.len, &res);
		if (rc == SQLITE_OK)
			rc = keyed(a, &a->unrefuse, unrefuse_sql, t->name, a->key.data, a->key.len);
		count(a, res);
	}
	return rc;
}

/* end_snapshot: let go of every row of its tables that the snapshot did not name */
int
ms_end_snapshot(applier *a, const Sync__EndSnapshot *e)
{
	ms_ctx	   *c = a->c;
	ms_schema  *s = c->schema;
	ms_map		ending;			/* the tables it ends, by name: a walk per table was quadratic */
	int			rc = SQLITE_OK;

	if (c->st.snapshot == 0)
		return ms_state_error(c, "message %llu ends a snapshot, but none is open: nothing let go of",
							  (unsigned long long) a->m->number);
	ms_map_init(&ending, false);
	for (size_t j = 0; j < e->n_tables && rc == SQLITE_OK; j++)
		rc = ms_map_put(&c->arena, &ending, e->tables[j], strlen(e->tables[j]), e->tables[j]);
	for (int i = s->n - 1; i >= 0 && rc == SQLITE_OK; i--)
	{
		ms_tbl	   *t = &s->t[i];
		bool		ends = ms_map_get(&ending, t->name, strlen(t->name)) != NULL;
		sqlite3_stmt *st = NULL;
		ms_buf		keys = {0};
		size_t		pos = 0;
		size_t		n;
		const char *key;

		if (ends && (rc = usable(a, t, &ends)) != SQLITE_OK)
			break;
		if (ends)
		{
			bool		whole;

			/* named whole: every row it has came with the snapshot */
			if ((rc = named_whole(a, t->name, &whole)) != SQLITE_OK)
				break;
			ends = !whole;
		}
		if (!ends)
			continue;
		/* the keys first, then let go: never delete under a running SELECT */
		rc = ms_prepare(c, &st, "SELECT k FROM (SELECT %s AS k FROM %s)"
						" WHERE k NOT IN (SELECT key FROM _sync_named WHERE tbl = ?1)",
						t->keyexpr, t->q);
		if (rc == SQLITE_OK)
			sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
		rc = ms_keys_read(c, st, rc, &keys);
		while (rc == SQLITE_OK && ms_keys_next(&keys, &pos, &key, &n))
		{
			ms_letgo_result res;

			rc = ms_let_go(a->lg, t, key, n, &res);
			if (rc == SQLITE_OK)
				rc = keyed(a, &a->unrefuse, unrefuse_sql, t->name, key, n);
			count(a, res);
		}
		ms_buf_free(&keys);
	}
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "DELETE FROM _sync_named; UPDATE _sync_state SET snapshot = 0, digest_due = 1 WHERE id = 1");
	if (rc == SQLITE_OK)
		c->st.snapshot = 0;
	return rc;
}
