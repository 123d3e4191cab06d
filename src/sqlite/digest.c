/*
** digest.c - what the replica holds of each table, in a count and an FNV-1a
** fingerprint of its canonical keys in ascending order (docs/protocol.md 8),
** byte for byte as the server's sync.digest(key) computes it.  Retired rows
** and refused rows are left out.  The values digest is the sum of each row's
** hash (src/shared ms_digest_row) over its values as the file stores them,
** read in the same scan: the columns the replica owns and its retired
** column do not count, as the server's messages never overwrite them.
**
** The keys are read in the table's key order, made canonical and sorted
** with a natural merge sort: the canonical order ("<length>:<bytes>") is the
** key order within each run of keys of one length, so a table read in key
** order is a few runs merged in a few passes, not a full sort.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

#include "digest.h"
#include "key.h"

/* natural merge sort of keyrefs; the result is in a (tmp is scratch of n) */
static void
merge_sort(ms_keyref *a, ms_keyref *tmp, size_t n)
{
	ms_keyref  *src = a;
	ms_keyref  *dst = tmp;

	for (;;)
	{
		size_t		i = 0;
		size_t		runs = 0;

		while (i < n)
		{
			size_t		j = i + 1;
			size_t		k;
			size_t		x,
						y,
						o;

			while (j < n && ms_key_cmp(src[j - 1].key, src[j - 1].len, src[j].key, src[j].len) <= 0)
				j++;
			runs++;
			if (j == n)
			{
				memcpy(dst + i, src + i, sizeof(ms_keyref) * (n - i));
				break;
			}
			k = j + 1;
			while (k < n && ms_key_cmp(src[k - 1].key, src[k - 1].len, src[k].key, src[k].len) <= 0)
				k++;
			runs++;
			x = i;
			y = j;
			o = i;
			while (x < j && y < k)
			{
				if (ms_key_cmp(src[y].key, src[y].len, src[x].key, src[x].len) < 0)
					dst[o++] = src[y++];
				else
					dst[o++] = src[x++];
			}
			while (x < j)
				dst[o++] = src[x++];
			while (y < k)
				dst[o++] = src[y++];
			i = k;
		}
		if (runs <= 1)
		{
			/* src was sorted already: it is the result */
			if (src != a)
				memcpy(a, src, sizeof(ms_keyref) * n);
			return;
		}
		{
			ms_keyref  *swap = src;

			src = dst;
			dst = swap;
		}
	}
}

/* keys_of: copies of the canonical keys of a query's rows ("SELECT key ...") */
static int
keys_of(ms_ctx *c, const char *sql, const char *table, ms_buf *buf, size_t *n)
{
	sqlite3_stmt *st;
	int			rc = ms_prepare(c, &st, "%s", sql);

	*n = 0;
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
		while ((rc = ms_step(c, st)) == SQLITE_ROW)
		{
			size_t		len = (size_t) sqlite3_column_bytes(st, 0);

			ms_buf_add(buf, &len, sizeof len);
			ms_buf_add(buf, sqlite3_column_text(st, 0), len);
			(*n)++;
		}
		if (rc == SQLITE_DONE)
			rc = buf->oom ? SQLITE_NOMEM : SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

static bool
excluded(const ms_keyref *ex, size_t nex, const char *key, size_t len)
{
	size_t		lo = 0,
				hi = nex;

	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;
		int			cmp = ms_key_cmp(ex[mid].key, ex[mid].len, key, len);

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
ms_digest_table(ms_ctx *c, const ms_tbl *t, ms_table_digest *d)
{
	ms_buf		exbuf = {0};
	ms_buf		keys = {0};
	ms_keyref  *ex = NULL;
	ms_keyref  *refs = NULL;
	size_t	   *ends = NULL;
	size_t		nex = 0;
	size_t		n = 0;
	size_t		cap = 0;
	sqlite3_stmt *st = NULL;
	int			rc;
	ms_digest	dg;
	ms_buf		vcols = {0};
	uint64_t	values = 0;

	rc = keys_of(c, "SELECT key FROM _sync_retired WHERE tbl = ?1"
				 " UNION SELECT key FROM _sync_refused WHERE tbl = ?1 ORDER BY 1",
				 t->name, &exbuf, &nex);
	if (rc == SQLITE_OK && nex > 0)
	{
		size_t		pos = 0;

		ex = sqlite3_malloc64(sizeof(ms_keyref) * nex);
		if (ex == NULL)
			rc = SQLITE_NOMEM;
		for (size_t i = 0; ex && i < nex; i++)
		{
			memcpy(&ex[i].len, exbuf.data + pos, sizeof(size_t));
			pos += sizeof(size_t);
			ex[i].key = exbuf.data + pos;
			pos += ex[i].len;
		}
	}
	for (int i = 0; i < t->ncols; i++)
		if (ms_digest_counted(t, i))
			ms_buf_printf(&vcols, ", %s", t->cols[i].q);
	ms_buf_byte(&vcols, '\0');
	if (rc == SQLITE_OK && vcols.oom)
		rc = SQLITE_NOMEM;
	if (rc == SQLITE_OK)
	{
		if (t->retired >= 0)
			rc = ms_prepare(c, &st, "SELECT %s%s FROM %s WHERE %s IS NULL ORDER BY %s",
							t->keycols, vcols.data, t->q, t->cols[t->retired].q, t->keycols);
		else
			rc = ms_prepare(c, &st, "SELECT %s%s FROM %s ORDER BY %s", t->keycols, vcols.data, t->q,
							t->keycols);
	}
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
	{
		size_t		start = keys.len;
		bool		null = false;

		rc = SQLITE_OK;
		for (int k = 0; k < t->nkey; k++)
		{
			switch (sqlite3_column_type(st, k))
			{
				case SQLITE_INTEGER:
					ms_key_append_int(&keys, sqlite3_column_int64(st, k));
					break;
				case SQLITE_NULL:
					null = true;
					break;
				default:
					{
						const char *p = (const char *) sqlite3_column_text(st, k);

						ms_key_append(&keys, p ? p : "", (size_t) sqlite3_column_bytes(st, k));
					}
			}
		}
		if (keys.oom)
		{
			rc = SQLITE_NOMEM;
			break;
		}
		if (null || (nex > 0 && excluded(ex, nex, keys.data + start, keys.len - start)))
		{
			keys.len = start;	/* a NULL key part names no row the server knows */
			continue;
		}
		values += row_hash(t, st, t->nkey, keys.data + start, keys.len - start);
		if (n == cap)
		{
			size_t		ncap = cap ? cap * 2 : 1024;
			size_t	   *e = sqlite3_realloc64(ends, sizeof(size_t) * ncap);

			if (e == NULL)
			{
				rc = SQLITE_NOMEM;
				break;
			}
			ends = e;
			cap = ncap;
		}
		ends[n++] = keys.len;
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	else if (rc != SQLITE_OK)
		ms_dberr(c, rc);
	sqlite3_finalize(st);
	if (rc == SQLITE_OK && n > 0)
	{
		/* two arrays of n: the keys, and the merge sort's scratch */
		refs = sqlite3_malloc64(sizeof(ms_keyref) * n * 2);
		if (refs == NULL)
			rc = SQLITE_NOMEM;
		else
		{
			for (size_t i = 0; i < n; i++)
			{
				size_t		start = i ? ends[i - 1] : 0;

				refs[i].key = keys.data + start;
				refs[i].len = ends[i] - start;
			}
			merge_sort(refs, refs + n, n);
		}
	}
	if (rc == SQLITE_OK)
	{
		ms_digest_init(&dg);
		for (size_t i = 0; i < n; i++)
			ms_digest_add(&dg, refs[i].key, refs[i].len);
		d->count = dg.count;
		d->fnv = dg.fnv;
		d->values = values;
	}
	sqlite3_free(refs);
	sqlite3_free(ends);
	sqlite3_free(ex);
	ms_buf_free(&keys);
	ms_buf_free(&exbuf);
	ms_buf_free(&vcols);
	return rc;
}

static void
digest_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	int			rc;
	ms_buf		out = {0};
	const char *only = NULL;

	ms_ctx_init(&c, ctx, "sync_digest");
	if (argc == 1)
	{
		if (sqlite3_value_type(argv[0]) != SQLITE_TEXT)
		{
			rc = ms_fail(&c, SQLITE_ERROR, "the table must be named by TEXT");
			goto done;
		}
		only = (const char *) sqlite3_value_text(argv[0]);
		if (only == NULL)
		{
			rc = SQLITE_NOMEM;
			goto done;
		}
	}
	rc = ms_begin(&c, "_sync_digest");
	if (rc != SQLITE_OK)
		goto done;
	rc = ms_state_exists(&c);
	if (rc == SQLITE_OK)
		rc = ms_schema_load(&c);
	if (rc == SQLITE_OK && only != NULL)
	{
		ms_tbl	   *t = ms_schema_find(&c, only);
		ms_table_digest d;
		char		hex[17];

		if (t == NULL)
			rc = ms_fail(&c, SQLITE_ERROR, "table \"%s\" is not held by this replica", only);
		else if (t->broken != NULL)
			rc = ms_fail(&c, SQLITE_ERROR, "%s, not as the snapshot made it", t->broken);
		else
			rc = ms_digest_table(&c, t, &d);
		if (rc == SQLITE_OK)
		{
			ms_digest_hex(d.fnv, hex);
			ms_buf_printf(&out, "{\"count\":%llu,\"fnv\":\"%s\"", (unsigned long long) d.count, hex);
			ms_digest_hex(d.values, hex);
			ms_buf_printf(&out, ",\"values\":\"%s\"}", hex);
		}
	}
	else if (rc == SQLITE_OK)
	{
		ms_buf_byte(&out, '{');
		for (int i = 0; i < c.schema->n && rc == SQLITE_OK; i++)
		{
			ms_tbl	   *t = &c.schema->t[i];
			ms_table_digest d;
			char		hex[17];

			if (t->broken != NULL)
				continue;
			rc = ms_digest_table(&c, t, &d);
			if (rc != SQLITE_OK)
				break;
			ms_digest_hex(d.fnv, hex);
			if (out.len > 1)
				ms_buf_byte(&out, ',');
			ms_buf_json_string(&out, t->name, strlen(t->name));
			ms_buf_printf(&out, ":{\"count\":%llu,\"fnv\":\"%s\"", (unsigned long long) d.count, hex);
			ms_digest_hex(d.values, hex);
			ms_buf_printf(&out, ",\"values\":\"%s\"}", hex);
		}
		ms_buf_byte(&out, '}');
	}
	rc = ms_end(&c, "_sync_digest", rc);
done:
	if (rc == SQLITE_OK && out.oom)
		rc = SQLITE_NOMEM;
	if (rc == SQLITE_OK)
		sqlite3_result_text(ctx, out.data, (int) out.len, SQLITE_TRANSIENT);
	else
		ms_ctx_error(&c, ctx, rc);
	ms_buf_free(&out);
	ms_ctx_done(&c);
}

int
ms_digest_register(sqlite3 *db)
{
	int			rc;

	rc = sqlite3_create_function(db, "sync_digest", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY,
								 NULL, digest_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_digest", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY,
									 NULL, digest_func, NULL, NULL);
	return rc;
}
