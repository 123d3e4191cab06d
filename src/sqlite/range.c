/*
** range.c - range repair (docs/protocol.md 8.1): the server's questions
** about what the replica holds of a table, and their answers.
**
** A Filed answer may carry RangeAsks (a table digest of the replica's
** differed): each is kept in _sync_range_asks, the newest of a table
** replacing the one before, and answered by the next upload of the first
** lane (Up.ranges), then forgotten -- an answer lost is asked again when
** the next digest differs.  A table with a row written and not filed is
** not answered until it is filed, as it has no digest until then.  An answer
** covers the rows the table digest counts (counted.c): retired and refused
** rows are left out.  Per row, its
** bucket is the top bits of FNV-1a of its canonical key, its hash
** ms_range_row (src/shared/range.h): no sort, no collation.  An ask of
** values (RangeAsk.values) is answered with each row's values hash instead,
** the one its values digest sums (counted.c, MS_COUNTED_VALUES).
**
** What the server sends is untrusted: depth, split and the buckets are
** bounded before anything is kept; an ask of a table the replica does not
** hold is answered with nothing.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdlib.h>
#include <string.h>

#include "key.h"
#include "range.h"

static int
ensure(ms_ctx *c)
{
	bool		has = false;
	int			rc = ms_exec(c, "CREATE TABLE IF NOT EXISTS _sync_range_asks (tbl TEXT PRIMARY KEY, round INTEGER NOT NULL,"
							 " depth INTEGER NOT NULL, split INTEGER NOT NULL, buckets BLOB NOT NULL,"
							 " vals INTEGER NOT NULL DEFAULT 0)");

	if (rc == SQLITE_OK)
		rc = ms_has_column(c, "_sync_range_asks", "vals", &has);
	/* a file from before values asks: its asks were of keys */
	if (rc == SQLITE_OK && !has)
		rc = ms_exec(c, "ALTER TABLE _sync_range_asks ADD COLUMN vals INTEGER NOT NULL DEFAULT 0");
	return rc;
}

static int
u64_cmp(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

int
ms_range_asked(ms_ctx *c, const Sync__Filed *f)
{
	sqlite3_stmt *st = NULL;
	int			rc;

	if (f->n_ranges == 0)
		return SQLITE_OK;
	rc = ensure(c);
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "INSERT OR REPLACE INTO _sync_range_asks (tbl, round, depth, split, buckets, vals)"
						" VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
	for (size_t i = 0; i < f->n_ranges && rc == SQLITE_OK; i++)
	{
		Sync__RangeAsk *a = f->ranges[i];
		uint64_t   *b;

		/* out of bounds: not asked (the server's next digest asks again) */
		if (a->depth > MS_RANGE_DEPTH_MAX || a->split > MS_RANGE_SPLIT_MAX ||
			a->depth + a->split > MS_RANGE_DEPTH_MAX || a->n_buckets > MS_RANGE_ASK_MAX ||
			a->table == NULL || strlen(a->table) > 127)
			continue;
		b = sqlite3_malloc64(sizeof(uint64_t) * (a->n_buckets + 1));
		if (b == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		if (a->n_buckets > 0)
			memcpy(b, a->buckets, sizeof(uint64_t) * a->n_buckets);
		qsort(b, a->n_buckets, sizeof(uint64_t), u64_cmp);
		sqlite3_bind_text(st, 1, a->table, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (sqlite3_int64) a->round);
		sqlite3_bind_int(st, 3, (int) a->depth);
		sqlite3_bind_int(st, 4, (int) a->split);
		sqlite3_bind_blob(st, 5, b, (int) (sizeof(uint64_t) * a->n_buckets), SQLITE_TRANSIENT);
		sqlite3_bind_int(st, 6, a->values ? 1 : 0);
		rc = ms_done(c, st);
		sqlite3_reset(st);
		sqlite3_free(b);
	}
	sqlite3_finalize(st);
	return rc;
}

/* grow: an arena array of n entries of size to room for one more */
static void *
grow(ms_ctx *c, void *arr, size_t size, size_t n, size_t *cap)
{
	void	   *bigger;

	if (n < *cap)
		return arr;
	*cap = *cap ? *cap * 2 : 16;
	bigger = ms_alloc(&c->arena, size * *cap);
	if (bigger != NULL && n > 0)
		memcpy(bigger, arr, size * n);
	return bigger;
}

/* one ask's answer, gathered row by row */
typedef struct answering
{
	ms_ctx	   *c;
	const ms_tbl *t;
	unsigned	depth;
	unsigned	split;
	const uint64_t *b;			/* the buckets asked, ascending (none: all) */
	size_t		nb;
	ms_range_sum *sums;			/* split > 0: each row's child bucket and hash */
	size_t		nsums;
	size_t		capsums;
	size_t		capkeys;
	bool		values;			/* each row's hash its values hash (the walk's), not its key's */
	Sync__RangeAnswer *ans;		/* split 0: the rows themselves */
} answering;

static int
answer_row(void *arg, const char *key, size_t len, uint64_t hash)
{
	answering  *a = arg;
	ms_ctx	   *c = a->c;
	Sync__RangeAnswer *ans = a->ans;
	uint64_t	h = ms_range_key_hash(key, len);
	uint64_t	row = a->values ? hash : ms_range_row(key, len);

	if (a->nb > 0 && !ms_range_member(a->b, a->nb, ms_range_bucket(h, a->depth)))
		return SQLITE_OK;
	if (a->split > 0)
	{
		ms_range_sum *s = ms_counted_room(a->sums, sizeof(ms_range_sum), a->nsums, &a->capsums);

		if (s == NULL)
			return SQLITE_NOMEM;
		a->sums = s;
		a->sums[a->nsums].bucket = ms_range_bucket(h, a->depth + a->split);
		a->sums[a->nsums].count = 1;
		a->sums[a->nsums++].sum = row;
	}
	else
	{
		/* the row itself: its key's parts as the table digest spelled them, and its hash */
		Sync__Key  *kp = ms_alloc(&c->arena, sizeof(Sync__Key));
		char	  **parts = ms_alloc(&c->arena, sizeof(char *) * (size_t) a->t->nkey);
		size_t		cap = a->capkeys;
		size_t		pos = 0;

		ans->keys = grow(c, ans->keys, sizeof(Sync__Key *), ans->n_keys, &cap);
		ans->hashes = grow(c, ans->hashes, sizeof(uint64_t), ans->n_hashes, &a->capkeys);
		if (kp == NULL || parts == NULL || ans->keys == NULL || ans->hashes == NULL)
			return SQLITE_NOMEM;
		sync__key__init(kp);
		kp->n_parts = (size_t) a->t->nkey;
		kp->parts = parts;
		for (int k = 0; k < a->t->nkey; k++)
		{
			const char *p = "";
			size_t		n = 0;

			/* the walk made the key of nkey parts: each is there */
			if (ms_key_next_part(key, len, &pos, &p, &n) != 1)
				return ms_fail(c, SQLITE_INTERNAL, "a key of table \"%s\" not canonical", a->t->name);
			parts[k] = ms_alloc(&c->arena, n + 1);
			if (parts[k] == NULL)
				return SQLITE_NOMEM;
			memcpy(parts[k], p, n);
		}
		ans->keys[ans->n_keys++] = kp;
		ans->hashes[ans->n_hashes++] = row;
	}
	return SQLITE_OK;
}

/* answer: one ask, over the rows of t the table digest counts */
static int
answer(ms_ctx *c, const ms_tbl *t, sqlite3_stmt *ask, Sync__RangeAnswer *ans)
{
	answering	a = {0};
	uint64_t   *b = NULL;
	int			rc;

	a.c = c;
	a.t = t;
	a.ans = ans;
	a.depth = (unsigned) sqlite3_column_int(ask, 2);
	a.split = (unsigned) sqlite3_column_int(ask, 3);
	a.nb = (size_t) sqlite3_column_bytes(ask, 4) / sizeof(uint64_t);
	a.values = sqlite3_column_int(ask, 5) != 0;
	ans->values = a.values;
	ans->round = (uint64_t) sqlite3_column_int64(ask, 1);
	ans->depth = a.depth + a.split;
	if (a.nb > 0 && (b = sqlite3_malloc64(sizeof(uint64_t) * a.nb)) == NULL)
		return SQLITE_NOMEM;
	if (a.nb > 0)
		memcpy(b, sqlite3_column_blob(ask, 4), sizeof(uint64_t) * a.nb);
	a.b = b;
	rc = ms_counted_walk(c, t, a.values ? MS_COUNTED_VALUES : 0, NULL, answer_row, &a);
	if (rc == SQLITE_OK && a.split > 0)
	{
		size_t		nsums = ms_range_aggregate(a.sums, a.nsums);

		ans->buckets = ms_alloc(&c->arena, sizeof(uint64_t) * (nsums + 1));
		ans->counts = ms_alloc(&c->arena, sizeof(uint64_t) * (nsums + 1));
		ans->sums = ms_alloc(&c->arena, sizeof(uint64_t) * (nsums + 1));
		if (ans->buckets == NULL || ans->counts == NULL || ans->sums == NULL)
			rc = SQLITE_NOMEM;
		for (size_t i = 0; rc == SQLITE_OK && i < nsums; i++)
		{
			ans->buckets[i] = a.sums[i].bucket;
			ans->counts[i] = a.sums[i].count;
			ans->sums[i] = a.sums[i].sum;
		}
		if (rc == SQLITE_OK)
			ans->n_buckets = ans->n_counts = ans->n_sums = nsums;
	}
	sqlite3_free(a.sums);
	sqlite3_free(b);
	return rc;
}

int
ms_range_answers(ms_ctx *c, Sync__Up *up)
{
	sqlite3_stmt *st = NULL;
	size_t		cap = 0;
	int			rc;

	sqlite3_stmt *pending = NULL;
	sqlite3_stmt *answered = NULL;
	bool		vals = false;
	bool		has = false;

	up->range_repair = 1;
	/* asks kept by a build before values asks: of keys (the column made by the next ask) */
	rc = ms_has_column(c, "_sync_range_asks", "vals", &vals);
	if (rc != SQLITE_OK)
		return rc;
	/*
	 * none asked yet: no table (made by the first ask, never by an upload);
	 * looked up, not found by a prepare failing, which parsed at every upload
	 */
	if (!vals && (rc = ms_has_column(c, "_sync_range_asks", NULL, &has)) != SQLITE_OK)
		return rc;
	if (!vals && !has)
		return SQLITE_OK;
	if (ms_kept_prepare(c->db, vals ? "SELECT tbl, round, depth, split, buckets, vals FROM _sync_range_asks ORDER BY tbl" :
						"SELECT tbl, round, depth, split, buckets, 0 FROM _sync_range_asks ORDER BY tbl",
						&st) != SQLITE_OK)
	{
		sqlite3_finalize(st);
		return SQLITE_OK;
	}
	rc = ms_prepare(c, &pending, "SELECT 1 FROM _sync_notes WHERE tbl = ?1 LIMIT 1");
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &answered, "DELETE FROM _sync_range_asks WHERE tbl = ?1");
	while (rc == SQLITE_OK && (rc = ms_step(c, st)) == SQLITE_ROW)
	{
		const char *name = (const char *) sqlite3_column_text(st, 0);
		ms_tbl	   *t = name ? ms_schema_find(c, name) : NULL;
		Sync__RangeAnswer *ans;

		rc = SQLITE_OK;
		if (t != NULL && t->broken == NULL && !t->host)
		{
			/* a row written and not filed is not drift: asked again once it is (as digests) */
			sqlite3_bind_text(pending, 1, t->name, -1, SQLITE_STATIC);
			rc = ms_step(c, pending);
			sqlite3_reset(pending);
			if (rc == SQLITE_ROW)
			{
				rc = SQLITE_OK;
				continue;
			}
			if (rc != SQLITE_DONE)
				break;
			rc = SQLITE_OK;
		}
		/* answered once, or of a table it does not hold (nothing to say): forgotten */
		sqlite3_bind_text(answered, 1, name, -1, SQLITE_TRANSIENT);
		rc = ms_done(c, answered);
		if (rc != SQLITE_OK)
			break;
		if (t == NULL || t->broken != NULL || t->host)
			continue;
		ans = ms_alloc(&c->arena, sizeof(Sync__RangeAnswer));
		up->ranges = grow(c, up->ranges, sizeof(Sync__RangeAnswer *), up->n_ranges, &cap);
		if (ans == NULL || up->ranges == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		sync__range_answer__init(ans);
		ans->table = (char *) t->name;
		rc = answer(c, t, st, ans);
		if (rc == SQLITE_OK)
			up->ranges[up->n_ranges++] = ans;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	sqlite3_finalize(pending);
	sqlite3_finalize(answered);
	return rc;
}
