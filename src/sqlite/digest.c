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
** The values digest of a table whose sum is kept as rows are written
** (vsum.c) is that sum, and only the keys are read.  The keys are read in
** rowid order (counted.c): through a TEXT key's index, in its order, SQLite
** reads them more than twice as slowly as it reads the rows and they are
** sorted here (make bench-replica).  While each comes after the
** one before in canonical order (an integer key of one sign and of one
** length), the fingerprint is made as they come; else they are sorted
** (sort_keys), 8 bytes a step.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "key.h"

/*
 * the bytes of a key read some keys ahead: sorted, keys are read out of the
 * order they lie in, each a cache miss at 10^6 rows unless asked for early
 */
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void) (p))
#endif
#define AHEAD 8

/* the 8 bytes of a key from byte d, big-endian (so that words order as the bytes do), zero-padded */
static inline uint64_t
word_at(const ms_keyref *r, size_t d)
{
	const unsigned char *p = (const unsigned char *) r->key + d;
	size_t		n = r->len > d ? r->len - d : 0;
	uint64_t	w = 0;

	if (n >= 8)
	{
		memcpy(&w, p, sizeof w);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		w = __builtin_bswap64(w);
#endif
		return w;
	}
	for (size_t i = 0; i < n; i++)
		w |= (uint64_t) p[i] << (56 - 8 * i);
	return w;
}

/* a key being sorted: the word at the depth its group is at, and where its bytes are */
typedef struct sortref
{
	uint64_t	w;
	ms_keyref	r;
} sortref;

static int
sortref_cmp(const void *x, const void *y)
{
	const sortref *a = x;
	const sortref *b = y;

	return ms_key_cmp(a->r.key, a->r.len, b->r.key, b->r.len);
}

static inline void
swap_refs(sortref *a, size_t i, size_t j)
{
	sortref	x = a[i];

	a[i] = a[j];
	a[j] = x;
}

/*
 * sort_small: a small group of sort_keys' in canonical order, their first d
 * bytes alike, with no counts to clear: a multikey quicksort taking 8 bytes
 * a step -- each pass parts them by the word at d into less, equal and
 * more, and only the equal go on to the next word.  The smaller parts are
 * sorted by recursion and the largest by the loop, so the stack is log n
 * deep whatever the keys.
 */
static void
sort_small(sortref *a, size_t n, size_t d)
{
	while (n > 1)
	{
		uint64_t	v;
		size_t		lt = 0,
					i = 0,
					gt = n;
		size_t		neq;
		bool		ends = false;	/* a key of the equal part ends in this word */

		if (n <= 12)
		{
			for (size_t j = 1; j < n; j++)
				for (size_t k = j; k > 0 && ms_key_cmp(a[k - 1].r.key, a[k - 1].r.len, a[k].r.key, a[k].r.len) > 0; k--)
					swap_refs(a, k - 1, k);
			return;
		}
		v = word_at(&a[n / 2].r, d);
		while (i < gt)
		{
			uint64_t	w;

			if (i + AHEAD < gt)
				PREFETCH(a[i + AHEAD].r.key);
			w = word_at(&a[i].r, d);

			if (w < v)
				swap_refs(a, lt++, i++);
			else if (w > v)
				swap_refs(a, i, --gt);
			else
			{
				ends |= a[i].r.len <= d + 8;
				i++;
			}
		}
		neq = gt - lt;
		/*
		 * the equal part: while its keys go on past this word, the next word
		 * orders them; a key ending in this word (its padding like a zero
		 * byte) is ordered with the rest of them by comparison
		 */
		if (ends)
		{
			qsort(a + lt, neq, sizeof(sortref), sortref_cmp);
			neq = 0;
		}
		if (neq >= lt && neq >= n - gt)
		{
			sort_small(a, lt, d);
			sort_small(a + gt, n - gt, d);
			a += lt;
			n = neq;
			d += 8;
		}
		else if (lt >= n - gt)
		{
			sort_small(a + lt, neq, d + 8);
			sort_small(a + gt, n - gt, d);
			n = lt;
		}
		else
		{
			sort_small(a, lt, d);
			sort_small(a + lt, neq, d + 8);
			a += gt;
			n -= gt;
		}
	}
}

/* a group of keys still to sort: a[at..at+n), their first d bytes alike */
typedef struct sortjob
{
	size_t		at;
	size_t		n;
	size_t		d;
} sortjob;

/*
 * sort_keys: keys in canonical order (ms_key_cmp), 8 bytes a step: a group
 * is sorted by the word at its depth d (a radix sort, a byte a pass, the
 * passes where every key has the same byte left out), then each run of
 * keys with that word alike is a group at d + 8.  A table read in rowid
 * order gives its TEXT keys in any order, many sharing a long beginning (a
 * two-part key's first part): a comparison sort would compare those
 * beginnings again each time.  A run in which a key ends in the word (its
 * padding like a zero byte), and a small group, are sorted by comparison.
 * The groups wait in a list, not on the stack, however long the keys.
 */
static int
sort_keys(sortref *a, size_t n)
{
	sortref    *tmp = sqlite3_malloc64(sizeof(sortref) * n);
	size_t	   *count = sqlite3_malloc64(sizeof(size_t) * 8 * 256);
	sortjob    *jobs = NULL;
	size_t		njobs = 0,
				cap = 0;
	int			rc = SQLITE_OK;

	if (tmp == NULL || count == NULL || (jobs = ms_counted_room(NULL, sizeof(sortjob), 0, &cap)) == NULL)
		rc = SQLITE_NOMEM;
	if (rc == SQLITE_OK)
		jobs[njobs++] = (sortjob) {0, n, 0};
	while (rc == SQLITE_OK && njobs > 0)
	{
		sortjob		job = jobs[--njobs];
		sortref    *s = a + job.at;
		sortref    *src = s,
				   *dst = tmp;

		if (job.n < 2048)
		{
			sort_small(s, job.n, job.d);	/* no counts to clear */
			continue;
		}
		{
			bool		alike = true;
			bool		ends = false;

			for (size_t i = 0; i < job.n; i++)
			{
				if (i + AHEAD < job.n)
					PREFETCH(s[i + AHEAD].r.key);
				s[i].w = word_at(&s[i].r, job.d);
				alike &= s[i].w == s[0].w;
				ends |= s[i].r.len <= job.d + 8;
			}
			/* one word for all (a first part they share): on to the next, as one group */
			if (alike && ends)
				qsort(s, job.n, sizeof(sortref), sortref_cmp);
			if (alike && !ends)
				jobs[njobs++] = (sortjob) {job.at, job.n, job.d + 8};
			if (alike)
				continue;
		}
		memset(count, 0, sizeof(size_t) * 8 * 256);
		for (size_t i = 0; i < job.n; i++)
			for (int b = 0; b < 8; b++)
				count[b * 256 + ((s[i].w >> (8 * b)) & 0xff)]++;
		for (int b = 0; b < 8; b++)
		{
			size_t	   *c = count + b * 256;
			size_t		sum = 0;

			if (c[(s[0].w >> (8 * b)) & 0xff] == job.n)
				continue;		/* every key has this byte: nothing to move */
			for (int v = 0; v < 256; v++)
			{
				size_t		k = c[v];

				c[v] = sum;
				sum += k;
			}
			for (size_t i = 0; i < job.n; i++)
				dst[c[(src[i].w >> (8 * b)) & 0xff]++] = src[i];
			{
				sortref    *x = src;

				src = dst;
				dst = x;
			}
		}
		if (src != s)
			memcpy(s, src, sizeof(sortref) * job.n);
		for (size_t i = 0, j; i < job.n && rc == SQLITE_OK; i = j)
		{
			bool		ends = s[i].r.len <= job.d + 8;

			for (j = i + 1; j < job.n && s[j].w == s[i].w; j++)
				ends |= s[j].r.len <= job.d + 8;
			if (j - i < 2)
				continue;
			if (ends)
				qsort(s + i, j - i, sizeof(sortref), sortref_cmp);
			else
			{
				sortjob    *more = ms_counted_room(jobs, sizeof(sortjob), njobs, &cap);

				if (more == NULL)
					rc = SQLITE_NOMEM;
				else
				{
					jobs = more;
					jobs[njobs++] = (sortjob) {job.at + i, j - i, job.d + 8};
				}
			}
		}
	}
	sqlite3_free(tmp);
	sqlite3_free(count);
	sqlite3_free(jobs);
	return rc;
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
	sortref    *refs = NULL;
	ms_digest	dg;
	int			rc;

	bool		kept;			/* the values digest is the sum kept (vsum.c): the keys alone read */
	uint64_t	sum;

	ms_digest_init(&g.dg);
	rc = ms_vsum_get(c, t, &kept, &sum);
	if (rc == SQLITE_OK)
		rc = ms_counted_walk(c, t, kept ? 0 : MS_COUNTED_VALUES, &g.keys, gather, &g);
	if (kept)
		g.values = sum;
	/* read in canonical order (an integer key, mostly): digested as they came */
	if (rc == SQLITE_OK && !g.unsorted)
	{
		d->count = g.dg.count;
		d->fnv = g.dg.fnv;
		d->values = g.values;
	}
	else if (rc == SQLITE_OK && g.n > 0)
	{
		refs = sqlite3_malloc64(sizeof(sortref) * g.n);
		if (refs == NULL)
			rc = SQLITE_NOMEM;
		else
		{
			for (size_t i = 0; i < g.n; i++)
			{
				size_t		start = i ? g.ends[i - 1] : 0;

				refs[i].r.key = g.keys.data + start;
				refs[i].r.len = g.ends[i] - start;
			}
			rc = sort_keys(refs, g.n);
		}
	}
	if (rc == SQLITE_OK && g.unsorted)
	{
		ms_digest_init(&dg);
		for (size_t i = 0; i < g.n; i++)
		{
			if (i + AHEAD < g.n)
				PREFETCH(refs[i + AHEAD].r.key);
			ms_digest_add(&dg, refs[i].r.key, refs[i].r.len);
		}
		d->count = dg.count;
		d->fnv = dg.fnv;
		d->values = g.values;
	}
	if (rc == SQLITE_OK)
		rc = ms_vsum_put(c, t, !kept, g.values, d->count);
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
	ms_ctx_finish(&c, ctx, rc, &out);
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
