/*
** digest.c - what the replica holds of each table, in a count and an FNV-1a
** fingerprint of its canonical keys in ascending order (docs/protocol.md 8),
** byte for byte as the server's sync.digest(key) computes it, over the rows
** counted.c walks (retired and refused rows left out).  The values digest is
** the sum of each row's hash (src/shared ms_digest_row) over its values as
** the file stores them, read in the same scan: the columns the replica owns
** and its retired column do not count, as the server's messages never
** overwrite them.
**
** The keys are read in the table's key order.  While each comes after the
** one before in canonical order (an integer key of one sign, a key of one
** length), the fingerprint is made as they come; else they are sorted with
** a natural merge sort: the canonical order ("<length>:<bytes>") is the key
** order within each run of keys of one length, so a table read in key order
** is a few runs merged in a few passes, not a full sort.
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

/* the keys and the values sum of a table's counted rows, as the walk gives them */
typedef struct gathered
{
	ms_buf		keys;
	size_t	   *ends;			/* where each key ends in keys */
	size_t		n;
	size_t		cap;
	uint64_t	values;
	bool		unsorted;		/* a key came before the one read before it */
	ms_digest	dg;				/* while none did: the digest, as they come */
} gathered;

static int
gather(void *arg, const char *key, size_t len, uint64_t hash)
{
	gathered   *g = arg;
	size_t	   *e = ms_counted_room(g->ends, sizeof(size_t), g->n, &g->cap);

	if (e == NULL)
		return SQLITE_NOMEM;
	g->ends = e;
	/* the key is in g->keys already: the walk wrote it there */
	if (!g->unsorted && g->n > 0)
	{
		size_t		start = g->n > 1 ? g->ends[g->n - 2] : 0;

		g->unsorted = ms_key_cmp(g->keys.data + start, g->ends[g->n - 1] - start, key, len) > 0;
	}
	if (!g->unsorted)
		ms_digest_add(&g->dg, key, len);
	g->ends[g->n++] = g->keys.len;
	g->values += hash;
	return SQLITE_OK;
}

int
ms_digest_table(ms_ctx *c, const ms_tbl *t, ms_table_digest *d)
{
	gathered	g = {0};
	ms_keyref  *refs = NULL;
	ms_digest	dg;
	int			rc;

	ms_digest_init(&g.dg);
	rc = ms_counted_walk(c, t, MS_COUNTED_VALUES, &g.keys, gather, &g);
	/* read in canonical order (an integer key, mostly): digested as they came */
	if (rc == SQLITE_OK && !g.unsorted)
	{
		d->count = g.dg.count;
		d->fnv = g.dg.fnv;
		d->values = g.values;
	}
	else if (rc == SQLITE_OK && g.n > 0)
	{
		/* two arrays of n: the keys, and the merge sort's scratch */
		refs = sqlite3_malloc64(sizeof(ms_keyref) * g.n * 2);
		if (refs == NULL)
			rc = SQLITE_NOMEM;
		else
		{
			for (size_t i = 0; i < g.n; i++)
			{
				size_t		start = i ? g.ends[i - 1] : 0;

				refs[i].key = g.keys.data + start;
				refs[i].len = g.ends[i] - start;
			}
			merge_sort(refs, refs + g.n, g.n);
		}
	}
	if (rc == SQLITE_OK && g.unsorted)
	{
		ms_digest_init(&dg);
		for (size_t i = 0; i < g.n; i++)
			ms_digest_add(&dg, refs[i].key, refs[i].len);
		d->count = dg.count;
		d->fnv = dg.fnv;
		d->values = g.values;
	}
	sqlite3_free(refs);
	sqlite3_free(g.ends);
	ms_buf_free(&g.keys);
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

	rc = ms_counted_register(db);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_digest", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY,
								 NULL, digest_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_digest", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY,
									 NULL, digest_func, NULL, NULL);
	return rc;
}
