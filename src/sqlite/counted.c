/*
** counted.c - the rows a digest counts (docs/protocol.md 8, 8.1): of a
** table, each row not retired, whose key has no NULL part, and whose
** canonical key is neither retired nor refused (_sync_retired,
** _sync_refused); each given with its canonical key and, when asked, its
** hash (src/shared ms_digest_row) over the columns that count.  The table
** digest (digest.c) and range repair's answers (range.c) both walk them
** here, so that both speak of the same rows.
**
** A digest reads every row of a table: SQLite reads each into the arguments
** of _sync_counted, the walk's own aggregate, which makes the key and hashes
** the values where they are (no sqlite3_column_* call, each of which takes
** the connection's mutex), into a buffer of the caller's that keeps them.
** An aggregate, so that the whole walk is one sqlite3_step: SQLite does not
** stop and come back for each row.  Rows come as SQLite finds them (a rowid
** table in rowid order): a key order would make SQLite look up each row of a
** table keyed by TEXT through its key's index, many times a scan's cost.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

#include "digest.h"
#include "key.h"

void *
ms_counted_room(void *arr, size_t size, size_t n, size_t *cap)
{
	void	   *bigger;
	size_t		ncap;

	if (n < *cap)
		return arr;
	ncap = *cap ? *cap * 2 : 1024;
	bigger = sqlite3_realloc64(arr, size * ncap);
	if (bigger != NULL)
		*cap = ncap;
	return bigger;
}

/* the keys a digest leaves out (retired, refused), in canonical order */
typedef struct excluded
{
	ms_buf		bytes;
	size_t	   *ends;
	size_t		n;
} excluded;

static int
load_excluded(ms_ctx *c, const ms_tbl *t, excluded *ex)
{
	sqlite3_stmt *st = NULL;
	size_t		cap = 0;
	int			rc = ms_prepare(c, &st, "SELECT key FROM _sync_retired WHERE tbl = ?1"
								" UNION SELECT key FROM _sync_refused WHERE tbl = ?1 ORDER BY 1");

	memset(ex, 0, sizeof *ex);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(st, 1, t->name, -1, SQLITE_STATIC);
	while ((rc = ms_step(c, st)) == SQLITE_ROW)
	{
		size_t	   *e = ms_counted_room(ex->ends, sizeof(size_t), ex->n, &cap);

		if (e == NULL)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		ex->ends = e;
		ms_buf_add(&ex->bytes, sqlite3_column_blob(st, 0), (size_t) sqlite3_column_bytes(st, 0));
		ex->ends[ex->n++] = ex->bytes.len;
	}
	if (rc == SQLITE_DONE)
		rc = ex->bytes.oom ? SQLITE_NOMEM : SQLITE_OK;
	sqlite3_finalize(st);
	return rc;
}

static bool
is_excluded(const excluded *ex, const char *key, size_t len)
{
	size_t		lo = 0,
				hi = ex->n;

	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;
		size_t		start = mid ? ex->ends[mid - 1] : 0;
		int			cmp = ms_key_cmp(ex->bytes.data + start, ex->ends[mid] - start, key, len);

		if (cmp == 0)
			return true;
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

bool
ms_digest_counted(const ms_tbl *t, int i)
{
	return !t->cols[i].retired && !(t->cols[i].owned && !t->cols[i].key);
}

/* one walk: what its rows are checked against, and where they go */
typedef struct walk
{
	const ms_tbl *t;
	excluded	ex;
	ms_buf	   *keys;			/* where each key is written: kept (the caller's) or not */
	bool		keep;
	bool		values;
	ms_counted_row row;
	void	   *arg;
	int			rc;				/* the first error row gave */
} walk;

#define WALK_POINTER "magic_sync counted walk"

/*
 * _sync_counted(walk, key parts..., values...): an aggregate, each row of
 * the walk bound as its first argument (sqlite3_bind_pointer: no SQL can
 * make one), read by SQLite into its arguments -- no sqlite3_column_* call,
 * each of which takes the connection's mutex, and no copy.  The walk is
 * found once and kept in the aggregate's context.  Called by the host: NULL.
 */
/*
 * row_key: a row's canonical key from its key parts (argv[0..nkey-1]),
 * appended to keys; false (keys as they were) when a part is NULL: such a
 * row names no row the server knows
 */
static inline bool
row_key(const ms_tbl *t, sqlite3_value **argv, ms_buf *keys)
{
	size_t		start = keys->len;

	for (int k = 0; k < t->nkey; k++)
	{
		sqlite3_value *v = argv[k];

		switch (sqlite3_value_type(v))
		{
			case SQLITE_INTEGER:
				ms_key_append_int(keys, sqlite3_value_int64(v));
				break;
			case SQLITE_NULL:
				keys->len = start;
				return false;
			default:
				{
					const char *p = (const char *) sqlite3_value_text(v);

					ms_key_append(keys, p ? p : "", (size_t) sqlite3_value_bytes(v));
				}
		}
	}
	return true;
}

/* row_hash: ms_digest_row of a row, its key's bytes and its n counted values */
static inline uint64_t
row_hash(const char *key, size_t len, int n, sqlite3_value **argv)
{
	uint64_t	h = ms_digest_row_begin(key, len);

	/* ms_digest_row_value's steps, inline: this runs for every value of the table */
	for (int i = 0; i < n; i++)
	{
		sqlite3_value *sv = argv[i];

		switch (sqlite3_value_type(sv))
		{
			case SQLITE_INTEGER:
				h = ms_digest_row_int(h, sqlite3_value_int64(sv));
				break;
			case SQLITE_FLOAT:
				h = ms_digest_row_real(h, sqlite3_value_double(sv));
				break;
			case SQLITE_TEXT:
				{
					const void *p = sqlite3_value_text(sv);

					h = ms_digest_row_bytes(h, MS_DV_TEXT, p, (size_t) sqlite3_value_bytes(sv));
				}
				break;
			case SQLITE_BLOB:
				{
					const void *p = sqlite3_value_blob(sv);

					h = ms_digest_row_bytes(h, MS_DV_BLOB, p, (size_t) sqlite3_value_bytes(sv));
				}
				break;
			default:
				h = ms_digest_row_null(h);
				break;
		}
	}
	return ms_digest_row_end(h);
}

bool
ms_counted_one(const ms_tbl *t, int argc, sqlite3_value **argv, ms_buf *key, uint64_t *hash)
{
	key->len = 0;
	if (argc < t->nkey || !row_key(t, argv, key) || key->oom)
		return false;
	*hash = row_hash(key->data, key->len, argc - t->nkey, argv + t->nkey);
	return true;
}

/*
 * counted_row: one row of the walk, its key parts from argv[1] and its
 * counted values after them (argv[0] is the walk's place); w->rc says how
 * it went.
 */
static void
counted_row(walk *w, int argc, sqlite3_value **argv)
{
	const ms_tbl *t;
	ms_buf	   *keys;
	size_t		start;
	uint64_t	h = 0;

	t = w->t;
	keys = w->keys;
	start = keys->len;
	if (argc < 1 + t->nkey)
		return;
	if (!row_key(t, argv + 1, keys))
		return;					/* a NULL key part names no row the server knows */
	if (keys->oom)
		w->rc = SQLITE_NOMEM;
	else if (w->ex.n > 0 && is_excluded(&w->ex, keys->data + start, keys->len - start))
	{
		keys->len = start;
		return;
	}
	if (w->rc == SQLITE_OK && w->values)
		h = row_hash(keys->data + start, keys->len - start, argc - 1 - t->nkey, argv + 1 + t->nkey);
	if (w->rc == SQLITE_OK)
		w->rc = w->row(w->arg, keys->data + start, keys->len - start, h);
	if (!w->keep)
		keys->len = start;
}

static void
counted_step(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	walk	  **found = sqlite3_aggregate_context(ctx, (int) sizeof(walk *));
	walk	   *w;

	if (found == NULL)
	{
		sqlite3_result_error_nomem(ctx);
		return;
	}
	if (*found == NULL && argc > 0)
		*found = sqlite3_value_pointer(argv[0], WALK_POINTER);
	w = *found;
	if (w == NULL || w->rc != SQLITE_OK)
		return;
	counted_row(w, argc, argv);
	if (w->rc != SQLITE_OK)
		sqlite3_result_error_code(ctx, w->rc);
}

/* the walk's rows went to its row function: the aggregate itself is NULL */
static void
counted_final(sqlite3_context *ctx)
{
	(void) ctx;
}

int
ms_counted_register(sqlite3 *db)
{
	return sqlite3_create_function(db, "_sync_counted", -1, SQLITE_UTF8 | SQLITE_DIRECTONLY,
								   NULL, NULL, counted_step, counted_final);
}

int
ms_counted_walk(ms_ctx *c, const ms_tbl *t, unsigned flags, ms_buf *keys, ms_counted_row row, void *arg)
{
	walk		w = {0};
	ms_buf		own = {0};
	ms_buf		vcols = {0};
	sqlite3_stmt *st = NULL;
	sqlite3_value **vals = NULL;
	int			nargs = 1 + t->nkey;
	bool		wide;
	int			rc;

	w.t = t;
	w.values = (flags & MS_COUNTED_VALUES) != 0;
	w.row = row;
	w.arg = arg;
	w.keys = keys != NULL ? keys : &own;
	w.keep = keys != NULL;
	rc = load_excluded(c, t, &w.ex);
	for (int i = 0; w.values && i < t->ncols; i++)
		if (ms_digest_counted(t, i))
		{
			ms_buf_printf(&vcols, ", %s", t->cols[i].q);
			nargs++;
		}
	ms_buf_byte(&vcols, '\0');
	if (rc == SQLITE_OK && vcols.oom)
		rc = SQLITE_NOMEM;

	/*
	 * A table wider than a function may take arguments (127 in SQLite as
	 * built by default) is read row by row, its columns handed to the same
	 * counted_row: slower, the same digest.
	 */
	wide = nargs > sqlite3_limit(c->db, SQLITE_LIMIT_FUNCTION_ARG, -1);
	if (rc == SQLITE_OK)
		rc = ms_prepare(c, &st, "SELECT %s%s%s%s FROM %s%s%s%s", wide ? "NULL, " : "_sync_counted(?1, ", t->keycols,
						vcols.data, wide ? "" : ")", t->q, t->retired >= 0 ? " WHERE " : "",
						t->retired >= 0 ? t->cols[t->retired].q : "", t->retired >= 0 ? " IS NULL" : "");
	if (rc == SQLITE_OK && !wide)
		rc = sqlite3_bind_pointer(st, 1, &w, WALK_POINTER, NULL);
	if (rc == SQLITE_OK && wide && (vals = sqlite3_malloc64(sizeof(sqlite3_value *) * (sqlite3_uint64) nargs)) == NULL)
		rc = SQLITE_NOMEM;
	while (rc == SQLITE_OK)
	{
		int			step = sqlite3_step(st);

		if (step == SQLITE_DONE)
			break;
		if (step != SQLITE_ROW)
			rc = w.rc != SQLITE_OK ? w.rc : ms_dberr(c, step);
		else if (wide)
		{
			for (int i = 0; i < nargs; i++)
				vals[i] = sqlite3_column_value(st, i);
			counted_row(&w, nargs, vals);
			rc = w.rc;
		}
	}
	sqlite3_free(vals);
	sqlite3_finalize(st);
	sqlite3_free(w.ex.ends);
	ms_buf_free(&w.ex.bytes);
	ms_buf_free(&vcols);
	ms_buf_free(&own);
	return rc;
}
