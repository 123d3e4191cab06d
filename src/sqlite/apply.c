/*
** apply.c - sync_apply(message): apply one ToReplica, all of it or nothing.
**
** The message is decoded under max_message_bytes (sync_config) and checked
** by src/shared/wire.c; one that fails changes nothing and is an error.
** Then, in a savepoint (a transaction of its own when the caller has none):
**
**   Filed        outside the chain, applied whenever it comes (sends.c):
**                the notes still stamped with its send id are let go of
**                when it accounts for them, those it refused set aside.
**   Down, End    the chain of docs/protocol.md 5.1: a later protocol is
**                neither applied nor acknowledged; another replica's
**                message is refused; so is one of a generation older than
**                the one the replica follows (an old primary's, a stale
**                snapshot replayed), whatever its epoch; a new epoch only
**                begins with a snapshot; within a generation, a number at
**                or below the last is a duplicate; a message that does not
**                follow the last applied opens a gap, and nothing but a
**                snapshot's start is applied until one begins -- or, for a
**                gap a lost message opened, the message that follows the
**                last applied, sent again.
**
** A Filed answer of an older generation is refused too: it answers for a
** server whose history was lost (an old primary), and its notes go again.
** A state found impossible as it is loaded (state.c) is written back as a
** chain that applied nothing with a gap open, before anything else.
**
** Applying a Down: a Begin applies the schema (tables.c) and opens the
** snapshot; upserts of every table, parents first, overwrite the row except
** the columns the replica owns (a record of its own origin with a pending
** note is kept whole), make a retired row live, clear its refusal; a row
** that does not decode, whose key columns are not its key, that a local
** constraint refuses, or of a table the replica does not hold is refused
** (recorded in _sync_refused) and the rest goes on; then deletes, children
** first, let go of rows (letgo.c); a Down of many rows runs with the
** connection's triggers off while every trigger of the file is ours, each
** silent while sync_apply writes (quiet_triggers).  An EndSnapshot lets
** go of every row of its tables the snapshot did not name (_sync_named).
** A catalog table empty when the snapshot began is named whole instead (the
** key '', which no row has): only sync_apply adds its rows (its guards), so
** every row it has at the end came with the snapshot, and neither its keys
** nor a scan of it at the end cost anything.  The last applied number,
** nonce and seal are recorded, then retired rows nothing points at go for
** good in a savepoint of their own: a failure there is only noted in
** last_error.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "key.h"

typedef struct stats
{
	int			upserts;
	int			deletes;
	int			retired;
	int			kept;
	int			refused;
	int			let_go;
} stats;

typedef struct applier
{
	ms_ctx	   *c;
	Sync__ToReplica *m;
	stats		n;
	ms_letgo   *lg;
	sqlite3_stmt *refuse;
	sqlite3_stmt *unrefuse;
	sqlite3_stmt *unretire;
	sqlite3_stmt *named;
	sqlite3_stmt *note;
	ms_buf		key;			/* a canonical key */
	ms_buf		rowkey;
	ms_buf		evolved;		/* the result's "schema" member (evolve.c) */
	signed char *usable;		/* per table: its breakage was reported */
} applier;

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

static const char *const refuse_sql =
"INSERT INTO _sync_refused(tbl, key, reason, at) VALUES (?1, ?2, ?3, ?4)"
" ON CONFLICT (tbl, key) DO UPDATE SET reason = excluded.reason, at = excluded.at,"
" send_id = NULL, sent_at = NULL, filed = 0";
static const char *const unrefuse_sql = "DELETE FROM _sync_refused WHERE tbl = ?1 AND key = ?2";
static const char *const unretire_sql = "DELETE FROM _sync_retired WHERE tbl = ?1 AND key = ?2";
static const char *const note_sql = "SELECT 1 FROM _sync_notes WHERE tbl = ?1 AND key = ?2";
static const char *const named_sql = "INSERT OR IGNORE INTO _sync_named(tbl, key) VALUES (?1, ?2)";
/* the key no row has: the open snapshot names the table whole (fresh_tables) */
static const char *const whole_sql = "SELECT EXISTS (SELECT 1 FROM _sync_named WHERE tbl = ?1 AND key = '')";

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

/* marks: whether the table has retired rows and refused rows, in one query */
static int
marks(applier *a, const char *table, bool *retired, bool *refused)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(a->c, &st, "SELECT EXISTS (SELECT 1 FROM _sync_retired WHERE tbl = ?1),"
								" EXISTS (SELECT 1 FROM _sync_refused WHERE tbl = ?1)");

	*retired = *refused = false;
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
		rc = ms_step(a->c, st);
		if (rc == SQLITE_ROW)
		{
			*retired = sqlite3_column_int(st, 0) != 0;
			*refused = sqlite3_column_int(st, 1) != 0;
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(st);
	return rc;
}

/* named_whole: whether the open snapshot names every row of the table (fresh_tables) */
static int
named_whole(applier *a, const char *table, bool *yes)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(a->c, &st, "%s", whole_sql);

	*yes = false;
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
		rc = ms_step(a->c, st);
		if (rc == SQLITE_ROW)
		{
			*yes = sqlite3_column_int(st, 0) != 0;
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(st);
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
 * replacement, Rows.replaces)
 */
static int
upsert_statement(applier *a, const ms_tbl *t, bool whole, sqlite3_stmt **st)
{
	ms_buf		b = {0};
	bool		set = false;
	int			param = 0;
	int			rc;

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
	rc = b.oom ? SQLITE_NOMEM : ms_prepare(a->c, st, "%s", b.data);
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

static int
upserts(applier *a, const Sync__Rows *r)
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
		rc = marks(a, t->name, &retired_rows, &refusals);
	if (rc == SQLITE_OK && name)
	{
		bool		whole;

		rc = named_whole(a, t->name, &whole);
		name = !whole;
	}
	if (rc == SQLITE_OK && (vals = sqlite3_malloc64(sizeof(ms_val) * (size_t) t->ncols)) == NULL)
		rc = SQLITE_NOMEM;
	for (size_t i = 0; i < r->n_upserts && rc == SQLITE_OK; i++)
	{
		const ProtobufCBinaryData *row = &r->upserts[i];
		char		reason[MS_REASON_MAX];
		bool		kept = false;
		bool		unique;

		if (!wire_key(a, r->keys[i]))
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
			rc = refuse_row(a, t->name, a->key.data, a->key.len, reason);
			continue;
		}
		if (!ms_row_key(t, vals, &a->rowkey))
		{
			if (a->rowkey.oom)
				rc = SQLITE_NOMEM;
			else
				rc = refuse_row(a, t->name, a->key.data, a->key.len, "a key column of the row is NULL or not a key value");
			continue;
		}
		if (a->rowkey.len != a->key.len || memcmp(a->rowkey.data, a->key.data, a->key.len) != 0)
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

static int
deletes(applier *a, const Sync__Rows *r)
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
static int
end_snapshot(applier *a, const Sync__EndSnapshot *e)
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
		while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
		{
			size_t		n = (size_t) sqlite3_column_bytes(st, 0);
			const char *k = (const char *) sqlite3_column_text(st, 0);

			rc = SQLITE_OK;
			if (k == NULL)
				continue;
			ms_buf_add(&keys, &n, sizeof n);
			ms_buf_add(&keys, k, n);
			if (keys.oom)
				rc = SQLITE_NOMEM;
		}
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
		sqlite3_finalize(st);
		while (rc == SQLITE_OK && pos < keys.len)
		{
			size_t		n;
			ms_letgo_result res;

			memcpy(&n, keys.data + pos, sizeof n);
			pos += sizeof n;
			rc = ms_let_go(a->lg, t, keys.data + pos, n, &res);
			if (rc == SQLITE_OK)
				rc = keyed(a, &a->unrefuse, unrefuse_sql, t->name, keys.data + pos, n);
			count(a, res);
			pos += n;
		}
		ms_buf_free(&keys);
	}
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "DELETE FROM _sync_named; UPDATE _sync_state SET snapshot = 0, digest_due = 1 WHERE id = 1");
	if (rc == SQLITE_OK)
		c->st.snapshot = 0;
	return rc;
}

/*
 * fresh_tables: each catalog table the snapshot begins with empty is named
 * whole (the key '', which no row has).  Its guards let no one but
 * sync_apply add rows to it, so at the snapshot's end it holds only rows the
 * snapshot sent: naming each of them, and looking at each at the end for
 * one not named, would double the cost of a first sync's rows.  A record
 * takes rows of the replica's own: its rows are named one by one.
 */
static int
fresh_tables(ms_ctx *c)
{
	int			rc = SQLITE_OK;

	for (int i = 0; i < c->schema->n && rc == SQLITE_OK; i++)
	{
		const ms_tbl *t = &c->schema->t[i];
		sqlite3_stmt *st = NULL;

		if (t->record || t->broken != NULL)
			continue;
		rc = ms_prepare(c, &st, "INSERT OR IGNORE INTO _sync_named(tbl, key)"
						" SELECT %s, '' WHERE NOT EXISTS (SELECT 1 FROM %s)", t->lit, t->q);
		if (rc == SQLITE_OK)
			rc = ms_done(c, st);
		sqlite3_finalize(st);
	}
	return rc;
}

/* begin_snapshot: a new chain, perhaps a new epoch, and the schema */
static int
begin_snapshot(applier *a)
{
	ms_ctx	   *c = a->c;
	Sync__ToReplica *m = a->m;
	sqlite3_stmt *st;
	ms_backfill backfill = {0};
	bool		first = !c->st.has_epoch;	/* a file's first snapshot: its rows are backfilled */
	int			rc;

	rc = ms_prepare(c, &st, "UPDATE _sync_state SET replica = coalesce(replica, ?1), epoch = ?2,"
					" snapshot = ?3, gap = 0, gap_epoch = NULL WHERE id = 1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_blob(st, 1, m->replica.data, MS_REPLICA_BYTES, SQLITE_STATIC);
		sqlite3_bind_blob(st, 2, m->epoch.data, MS_EPOCH_BYTES, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, (sqlite3_int64) m->number);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK)
		return rc;
	if (!c->st.has_replica)
	{
		c->st.has_replica = true;
		memcpy(c->st.replica, m->replica.data, MS_REPLICA_BYTES);
		ms_uuid_text(c->st.replica, c->st.replica_text);
	}
	c->st.has_epoch = true;
	memcpy(c->st.epoch, m->epoch.data, MS_EPOCH_BYTES);
	c->st.snapshot = m->number;
	c->st.gap = 0;
	c->backfill = first ? &backfill : NULL;
	rc = ms_schema_begin(c, m->down->begin);
	c->backfill = NULL;
	if (rc == SQLITE_OK && backfill.n > 0)
		rc = ms_backfill_rows(c, &backfill);
	return rc == SQLITE_OK ? fresh_tables(c) : rc;
}

static int
prepare(applier *a)
{
	return ms_letgo_open(a->c, &a->lg);
}

static void
finish(applier *a)
{
	sqlite3_finalize(a->refuse);
	sqlite3_finalize(a->unrefuse);
	sqlite3_finalize(a->unretire);
	sqlite3_finalize(a->named);
	sqlite3_finalize(a->note);
	ms_letgo_close(a->lg);
	a->refuse = a->unrefuse = a->unretire = a->named = a->note = NULL;
	a->lg = NULL;
	ms_buf_free(&a->key);
	ms_buf_free(&a->rowkey);
	ms_buf_free(&a->evolved);
}

/*
 * A Down of at least this many rows is applied with the connection's
 * triggers off when every trigger of the file is ours (quiet_triggers).
 */
#define QUIET_ROWS 256

/* how every trigger of ours begins: silent while sync_apply writes (ddl.c, reach.c, hlc.c) */
static const char *const ours_when = "WHEN (SELECT applying FROM _sync_state WHERE id = 1) = 0";

/*
 * quiet_triggers: turn the connection's triggers off for the rows of a
 * large Down (SQLITE_DBCONFIG_ENABLE_TRIGGER), when each trigger of the
 * file is one of ours, all silent while sync_apply writes: each row's guard
 * or noting trigger would otherwise run a subprogram reading _sync_state
 * for nothing, which was a third of a snapshot's apply.  A trigger of the
 * host's (any other name or body, or any TEMP trigger) keeps them on, so it
 * fires on every row as before.  Turning them off and on expires the
 * connection's statements, as DDL does (util.c's sentinel covers an undo):
 * only for many rows.  *off: they were turned off, and must be turned on.
 */
static int
quiet_triggers(applier *a, const Sync__Down *d, bool *off)
{
	ms_ctx	   *c = a->c;
	sqlite3_stmt *st = NULL;
	size_t		rows = 0;
	int			on = 0;
	int			rc;

	*off = false;
	for (size_t i = 0; i < d->n_tables; i++)
		rows += d->tables[i]->n_upserts + d->tables[i]->n_deletes;
	if (rows < QUIET_ROWS || sqlite3_db_config(c->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, -1, &on) != SQLITE_OK || !on)
		return SQLITE_OK;
	rc = ms_prepare(c, &st, "SELECT EXISTS (SELECT 1 FROM main.sqlite_master WHERE type = 'trigger'"
					" AND NOT (name GLOB '_sync_*' AND instr(sql, %Q) > 0)"
					" UNION ALL SELECT 1 FROM temp.sqlite_master WHERE type = 'trigger')", ours_when);
	if (rc == SQLITE_OK)
		rc = ms_step(c, st);
	if (rc == SQLITE_ROW)
	{
		rc = SQLITE_OK;
		if (sqlite3_column_int(st, 0) == 0 &&
			sqlite3_db_config(c->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, (int *) NULL) == SQLITE_OK)
			*off = true;
	}
	sqlite3_finalize(st);
	return rc;
}

/* apply: a message that follows the chain */
static int
apply(applier *a, ms_buf *out)
{
	ms_ctx	   *c = a->c;
	Sync__ToReplica *m = a->m;
	bool		begins = m->body_case == SYNC__TO_REPLICA__BODY_DOWN && m->down->begin != NULL;
	bool		reschema = begins || (m->body_case == SYNC__TO_REPLICA__BODY_DOWN &&
									  (m->down->n_schema > 0 || m->down->n_let_go > 0));
	sqlite3_stmt *st = NULL;
	int			rc;
	int			let_go = 0;
	int			made = 0;
	const char *snapshot;

	rc = ms_exec(c, "UPDATE _sync_state SET applying = 1 WHERE id = 1");
	/* rows written since the last message are dated by it (reach.c) */
	if (rc == SQLITE_OK)
		rc = ms_reach_date(c);
	/* a table that waited for a name the host had is made once the host renamed its own (tables.c) */
	if (rc == SQLITE_OK && !begins)
		rc = ms_schema_host(c, &made);
	/* the foreign-key triggers read their parents: gone while the tables change */
	if (rc == SQLITE_OK && reschema)
		rc = ms_reach_untrigger(c);
	if (rc == SQLITE_OK && begins)
		rc = begin_snapshot(a);
	/* schema changes, before the rows that need them (docs/protocol.md 5.3) */
	if (rc == SQLITE_OK && m->body_case == SYNC__TO_REPLICA__BODY_DOWN)
		rc = ms_evolve_apply(c, m->down, &a->evolved);
	if (rc == SQLITE_OK)
		rc = reschema ? ms_reach_trigger(c) : ms_reach_ensure(c);
	if (rc == SQLITE_OK)
		rc = prepare(a);
	if (rc == SQLITE_OK && m->body_case == SYNC__TO_REPLICA__BODY_DOWN)
	{
		const Sync__Down *d = m->down;
		bool		off;

		rc = quiet_triggers(a, d, &off);
		for (size_t i = 0; i < d->n_tables && rc == SQLITE_OK; i++)
			rc = upserts(a, d->tables[i]);
		for (size_t i = d->n_tables; i > 0 && rc == SQLITE_OK; i--)
			rc = deletes(a, d->tables[i - 1]);
		if (off)
			sqlite3_db_config(c->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 1, (int *) NULL);
		/* the server's wishes, kept to be decided at the next upload (wish.c) */
		if (rc == SQLITE_OK)
			rc = ms_wish_receive(c, d);
	}
	snapshot = begins ? "begin" : c->st.snapshot ? "open" : NULL;
	if (rc == SQLITE_OK && m->body_case == SYNC__TO_REPLICA__BODY_END_SNAPSHOT)
	{
		snapshot = c->st.snapshot ? "end" : NULL;
		rc = end_snapshot(a, m->end_snapshot);
	}
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "UPDATE _sync_state SET number = ?1, nonce = ?2, seal = ?3, applied_at = ?4,"
						" generation = ?5 WHERE id = 1");
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_int64(st, 1, (sqlite3_int64) m->number);
		sqlite3_bind_blob(st, 2, m->nonce.data, MS_NONCE_BYTES, SQLITE_STATIC);
		sqlite3_bind_blob(st, 3, m->seal.data, MS_SEAL_BYTES, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, c->now);
		/* never older than the one it followed: the chain refused those */
		sqlite3_bind_int64(st, 5, (sqlite3_int64) m->generation);
		rc = ms_done(c, st);
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_OK)
		c->st.generation = m->generation;
	/* retired rows nothing points at: for good, in a step of their own */
	if (rc == SQLITE_OK)
		rc = ms_begin(c, "_sync_let_go");
	if (rc == SQLITE_OK)
	{
		int			rc2 = ms_let_go_retired(a->lg, &let_go);

		if (rc2 != SQLITE_OK && rc2 != SQLITE_NOMEM && rc2 != SQLITE_IOERR && rc2 != SQLITE_FULL)
		{
			char	   *why = sqlite3_mprintf("letting go of retired rows failed: %s",
											  c->err ? c->err : sqlite3_errstr(rc2));

			sqlite3_free(c->err);
			c->err = NULL;
			rc = ms_end(c, "_sync_let_go", rc2);
			let_go = 0;
			/* noted, unless it could not be undone as it should */
			if (rc == rc2)
				rc = why ? ms_state_error(c, "%s", why) : SQLITE_NOMEM;
			sqlite3_free(why);
		}
		else
			rc = ms_end(c, "_sync_let_go", rc2);
	}
	if (rc == SQLITE_OK)
		rc = ms_exec(c, "UPDATE _sync_state SET applying = 0 WHERE id = 1");
	a->n.let_go = let_go;
	if (rc == SQLITE_OK)
	{
		/* a snapshot's first message says how many rows the snapshot carries (the agent's bar) */
		ms_buf_printf(out, "{\"result\":\"applied\",\"number\":%llu,\"snapshot\":%s%s%s,"
					  "\"upserts\":%d,\"deletes\":%d,\"retired\":%d,\"kept\":%d,\"refused\":%d,\"let_go\":%d%s",
					  (unsigned long long) m->number, snapshot ? "\"" : "", snapshot ? snapshot : "null",
					  snapshot ? "\"" : "", a->n.upserts, a->n.deletes, a->n.retired, a->n.kept,
					  a->n.refused, a->n.let_go, a->evolved.len ? a->evolved.data : "");
		if (begins)
			ms_buf_printf(out, ",\"begin_rows\":%llu", (unsigned long long) m->down->begin->rows);
		/* tables made now that the host renamed its own of their names */
		ms_buf_printf(out, made ? ",\"made\":%d}" : "}", made);
	}
	finish(a);
	return rc;
}

/* open_gap: M does not follow; remember the newest such message */
static int
open_gap(ms_ctx *c, Sync__ToReplica *m, const char *why, ms_buf *out)
{
	ms_state   *s = &c->st;
	bool		newer = !(s->gap != 0 && s->has_gap_epoch &&
						  memcmp(s->gap_epoch, m->epoch.data, MS_EPOCH_BYTES) == 0 &&
						  s->gap >= m->number);
	int			rc = SQLITE_OK;

	if (newer)
	{
		sqlite3_stmt *st;

		rc = ms_prepare(c, &st, "UPDATE _sync_state SET gap = ?1, gap_epoch = ?2 WHERE id = 1");
		if (rc == SQLITE_OK)
		{
			sqlite3_bind_int64(st, 1, (sqlite3_int64) m->number);
			sqlite3_bind_blob(st, 2, m->epoch.data, MS_EPOCH_BYTES, SQLITE_STATIC);
			rc = ms_done(c, st);
		}
		sqlite3_finalize(st);
		if (rc == SQLITE_OK)
			s->gap = m->number;
	}
	ms_buf_printf(out, "{\"result\":\"gap\",\"number\":%llu,\"gap\":%llu,\"reason\":\"%s\"}",
				  (unsigned long long) m->number, (unsigned long long) s->gap, why);
	return rc;
}

/*
 * older: M is of a generation older than the one the replica follows: an
 * old primary's message, queued before a standby was promoted past it, or a
 * stale one replayed (a snapshot's Begin of any epoch included).  Neither
 * applied nor acknowledged.
 */
static int
older(ms_ctx *c, Sync__ToReplica *m, ms_buf *out)
{
	ms_buf_printf(out, "{\"result\":\"older_generation\",\"number\":%llu,\"generation\":%llu,\"follows\":%llu}",
				  (unsigned long long) m->number, (unsigned long long) m->generation,
				  (unsigned long long) c->st.generation);
	return ms_state_error(c, "message %llu is of generation %llu, older than the generation %llu this replica follows"
						  " (an old primary's, or replayed): refused",
						  (unsigned long long) m->number, (unsigned long long) m->generation,
						  (unsigned long long) c->st.generation);
}

/* the chain of docs/protocol.md 5.1, rules 2 to 8 */
static int
chain(ms_ctx *c, Sync__ToReplica *m, ms_buf *out)
{
	ms_state   *s = &c->st;
	bool		begins = m->body_case == SYNC__TO_REPLICA__BODY_DOWN && m->down->begin != NULL;
	bool		same_epoch = s->has_epoch && memcmp(s->epoch, m->epoch.data, MS_EPOCH_BYTES) == 0;
	bool		follows;
	applier		a;
	int			rc;

	memset(&a, 0, sizeof a);
	a.c = c;
	a.m = m;
	if (m->body_case == SYNC__TO_REPLICA__BODY_FILED)
	{
		if (m->generation < s->generation)
			return older(c, m, out);
		/* the server's clock, merged from every message it sends this replica */
		rc = ms_hlc_heard(c, m->clock);
		return rc == SQLITE_OK ? ms_apply_filed(c, m, out) : rc;
	}
	if (s->has_replica && memcmp(m->replica.data, s->replica, MS_REPLICA_BYTES) != 0)
	{
		char		other[37];

		ms_uuid_text(m->replica.data, other);
		ms_buf_printf(out, "{\"result\":\"wrong_replica\",\"number\":%llu,\"replica\":\"%s\"}",
					  (unsigned long long) m->number, other);
		return ms_state_error(c, "message %llu is for replica %s, not this one (%s): refused",
							  (unsigned long long) m->number, other, s->replica_text);
	}
	if (m->generation < s->generation)
		return older(c, m, out);
	rc = ms_hlc_heard(c, m->clock);
	if (rc != SQLITE_OK)
		return rc;
	if (!same_epoch && !begins)
		return open_gap(c, m, s->has_epoch ? "another epoch" : "no snapshot yet", out);
	/* a newer generation is a newer position, whatever its number */
	if (same_epoch && m->generation == s->generation && m->number <= s->number)
	{
		sqlite3_stmt *st = NULL;
		int			rc;

		/*
		 * Applied none of it: say again what was applied, so that a server
		 * restored from an older copy, numbering again, hears of it (docs/design.md 4.8).
		 */
		rc = ms_prepare(c, &st, "UPDATE _sync_state SET report = NULL WHERE id = 1");
		if (rc == SQLITE_OK)
			rc = ms_done(c, st);
		sqlite3_finalize(st);
		ms_buf_printf(out, "{\"result\":\"duplicate\",\"number\":%llu,\"last\":%llu}",
					  (unsigned long long) m->number, (unsigned long long) s->number);
		return rc;
	}
	if (begins)
		return apply(&a, out);
	follows = same_epoch && m->previous == s->number && m->previous_nonce.len == MS_NONCE_BYTES &&
		memcmp(m->previous_nonce.data, s->nonce, MS_NONCE_BYTES) == 0;
	/*
	 * A gap a lost message opened (a later one came: its number is beyond the
	 * next) closes when the message that follows the last applied comes after
	 * all, sent again (docs/protocol.md 8.1); a gap sync_resync() opened (the
	 * next number) waits for a snapshot.
	 */
	if (s->gap != 0 && !(follows && s->gap > s->number + 1))
		return open_gap(c, m, "a gap is open", out);
	if (follows)
	{
		if (s->gap != 0)
		{
			rc = ms_exec(c, "UPDATE _sync_state SET gap = 0, gap_epoch = NULL WHERE id = 1");
			if (rc != SQLITE_OK)
				return rc;
			s->gap = 0;
			s->has_gap_epoch = false;
		}
		return apply(&a, out);
	}
	return open_gap(c, m, "it does not follow the last applied", out);
}

static void
apply_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	ProtobufCAllocator pa;
	Sync__ToReplica *m;
	ms_wire_status status;
	char		reason[MS_REASON_MAX];
	int64_t		bound = MS_MAX_MESSAGE_DEFAULT;
	const uint8_t *bytes;
	size_t		n;
	int			rc;
	ms_buf		out = {0};

	(void) argc;
	ms_ctx_init(&c, ctx, "sync_apply");
	pa = ms_arena_allocator(&c.arena);
	if (sqlite3_value_type(argv[0]) != SQLITE_BLOB)
	{
		rc = ms_fail(&c, SQLITE_ERROR, "the message must be a BLOB, not %s",
					 sqlite3_value_type(argv[0]) == SQLITE_NULL ? "NULL" :
					 sqlite3_value_type(argv[0]) == SQLITE_TEXT ? "TEXT" : "a number");
		goto done;
	}
	rc = ms_state_exists(&c);
	if (rc == SQLITE_OK)
		rc = ms_config(&c, "max_message_bytes", &bound);
	if (rc != SQLITE_OK)
		goto done;
	n = (size_t) sqlite3_value_bytes(argv[0]);
	bytes = sqlite3_value_blob(argv[0]);
	if ((int64_t) n > bound)
	{
		rc = ms_fail(&c, SQLITE_TOOBIG, "the message is %llu bytes, over max_message_bytes (%lld)",
					 (unsigned long long) n, (long long) bound);
		goto done;
	}
	/* the server's signature, on the bytes as they came: nothing of a message it does not sign is read */
	rc = ms_trust_check(&c, bytes, n);
	if (rc != SQLITE_OK)
		goto done;
	m = ms_to_replica_decode(bytes, n, (size_t) bound, &pa, &status, reason);
	if (status == MS_WIRE_LATER_PROTOCOL)
	{
		/* neither applied nor acknowledged */
		ms_buf_printf(&out, "{\"result\":\"later_protocol\",\"protocol\":%u,\"number\":%llu}",
					  m->protocol, (unsigned long long) m->number);
		goto done;
	}
	if (m == NULL)
	{
		rc = status == MS_WIRE_NO_MEMORY ? SQLITE_NOMEM :
			ms_fail(&c, SQLITE_ERROR, "the message cannot be applied: %s", reason);
		goto done;
	}
	rc = ms_begin(&c, "_sync_apply");
	if (rc != SQLITE_OK)
		goto done;
	rc = ms_state_ensure(&c);
	if (rc == SQLITE_OK)
		rc = ms_state_load(&c);
	if (rc == SQLITE_OK)
		rc = ms_state_repair(&c);
	if (rc == SQLITE_OK)
		rc = ms_schema_load(&c);
	if (rc == SQLITE_OK)
		rc = chain(&c, m, &out);
	/* the result is whole before anything is kept */
	if (rc == SQLITE_OK && out.oom)
		rc = SQLITE_NOMEM;
	rc = ms_end(&c, "_sync_apply", rc);
done:
	if (rc == SQLITE_OK && out.oom)
		rc = SQLITE_NOMEM;
	if (rc == SQLITE_OK)
	{
		/* handed over, not copied: nothing may fail once the work is kept */
		sqlite3_result_text(ctx, out.data, -1, sqlite3_free);
		out.data = NULL;
	}
	else
		ms_ctx_error(&c, ctx, rc);
	ms_buf_free(&out);
	ms_ctx_done(&c);
}

int
ms_apply_register(sqlite3 *db)
{
	return sqlite3_create_function(db, "sync_apply", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY,
								   NULL, apply_func, NULL, NULL);
}
