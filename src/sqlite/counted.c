/*
** counted.c - the rows a digest counts (docs/protocol.md 8, 8.1): of a
** table, each row not retired, whose key has no NULL part, and whose
** canonical key is neither retired nor refused (_sync_retired,
** _sync_refused); each given with its canonical key and, when asked, its
** hash (src/shared ms_digest_row) over the columns that count.  The table
** digest (digest.c) and range repair's answers (range.c) both walk them
** here, so that both speak of the same rows.
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

/* the hash of the row st holds: its key (key, len) and its values from column first on */
static uint64_t
row_hash(const ms_tbl *t, sqlite3_stmt *st, int first, const char *key, size_t len)
{
	uint64_t	h = ms_digest_row_begin(key, len);
	int			at = first;

	for (int i = 0; i < t->ncols; i++)
	{
		ms_digest_value v = {MS_DV_NULL, 0, 0, NULL, 0};

		sqlite3_value *sv;

		if (!ms_digest_counted(t, i))
			continue;
		/*
		 * one call that takes the connection's mutex a column, not three;
		 * the value is read under that mutex, which sync_digest's caller's
		 * sqlite3_step holds throughout
		 */
		sv = sqlite3_column_value(st, at);
		switch (sqlite3_value_type(sv))
		{
			case SQLITE_INTEGER:
				v.tag = MS_DV_INTEGER;
				v.i = sqlite3_value_int64(sv);
				break;
			case SQLITE_FLOAT:
				v.tag = MS_DV_REAL;
				v.d = sqlite3_value_double(sv);
				break;
			case SQLITE_TEXT:
				v.tag = MS_DV_TEXT;
				v.p = sqlite3_value_text(sv);
				v.n = (size_t) sqlite3_value_bytes(sv);
				break;
			case SQLITE_BLOB:
				v.tag = MS_DV_BLOB;
				v.p = sqlite3_value_blob(sv);
				v.n = (size_t) sqlite3_value_bytes(sv);
				break;
			default:
				break;
		}
		h = ms_digest_row_value(h, &v);
		at++;
	}
	return ms_digest_row_end(h);
}

int
ms_counted_walk(ms_ctx *c, const ms_tbl *t, unsigned flags, ms_counted_row row, void *arg)
{
	excluded	ex;
	ms_buf		vcols = {0};
	ms_buf		key = {0};
	sqlite3_stmt *st = NULL;
	bool		values = (flags & MS_COUNTED_VALUES) != 0;
	const char *order = (flags & MS_COUNTED_ORDERED) ? " ORDER BY " : "";
	int			rc;

	rc = load_excluded(c, t, &ex);
	for (int i = 0; values && i < t->ncols; i++)
		if (ms_digest_counted(t, i))
			ms_buf_printf(&vcols, ", %s", t->cols[i].q);
	ms_buf_byte(&vcols, '\0');
	if (rc == SQLITE_OK && vcols.oom)
		rc = SQLITE_NOMEM;
	if (rc == SQLITE_OK)
	{
		if (t->retired >= 0)
			rc = ms_prepare(c, &st, "SELECT %s%s FROM %s WHERE %s IS NULL%s%s", t->keycols, vcols.data, t->q,
							t->cols[t->retired].q, order, *order ? t->keycols : "");
		else
			rc = ms_prepare(c, &st, "SELECT %s%s FROM %s%s%s", t->keycols, vcols.data, t->q,
							order, *order ? t->keycols : "");
	}
	while (rc == SQLITE_OK)
	{
		int			step = sqlite3_step(st);
		bool		null = false;

		if (step == SQLITE_DONE)
			break;
		if (step != SQLITE_ROW)
		{
			rc = ms_dberr(c, step);
			break;
		}
		key.len = 0;
		for (int k = 0; k < t->nkey; k++)
		{
			switch (sqlite3_column_type(st, k))
			{
				case SQLITE_INTEGER:
					ms_key_append_int(&key, sqlite3_column_int64(st, k));
					break;
				case SQLITE_NULL:
					null = true;
					break;
				default:
					{
						const char *p = (const char *) sqlite3_column_text(st, k);

						ms_key_append(&key, p ? p : "", (size_t) sqlite3_column_bytes(st, k));
					}
			}
		}
		if (key.oom)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		/* a NULL key part names no row the server knows */
		if (null || (ex.n > 0 && is_excluded(&ex, key.data, key.len)))
			continue;
		rc = row(arg, key.data, key.len, values ? row_hash(t, st, t->nkey, key.data, key.len) : 0);
	}
	sqlite3_finalize(st);
	sqlite3_free(ex.ends);
	ms_buf_free(&ex.bytes);
	ms_buf_free(&vcols);
	ms_buf_free(&key);
	return rc;
}
