/*-------------------------------------------------------------------------
 * range.c
 *	  Range repair's buckets and their digests.  See range.h.
 *-------------------------------------------------------------------------
 */
#include "range.h"
#include "digest.h"

#include <stdlib.h>

uint64_t
ms_range_key_hash(const char *key, size_t len)
{
	return ms_fnv1a(MS_FNV_OFFSET, key, len);
}

uint64_t
ms_range_bucket(uint64_t key_hash, unsigned depth)
{
	return depth == 0 ? 0 : key_hash >> (64 - depth);
}

uint64_t
ms_range_row(const char *key, size_t len)
{
	ms_digest	d;

	ms_digest_init(&d);
	ms_digest_add(&d, key, len);
	return d.fnv;
}

static int
sum_cmp(const void *a, const void *b)
{
	const ms_range_sum *x = a;
	const ms_range_sum *y = b;

	return x->bucket < y->bucket ? -1 : x->bucket > y->bucket;
}

size_t
ms_range_aggregate(ms_range_sum *rows, size_t n)
{
	size_t		out = 0;

	if (n == 0)
		return 0;
	qsort(rows, n, sizeof(ms_range_sum), sum_cmp);
	for (size_t i = 1; i < n; i++)
	{
		if (rows[i].bucket == rows[out].bucket)
		{
			rows[out].count += rows[i].count;
			rows[out].sum += rows[i].sum;
		}
		else
			rows[++out] = rows[i];
	}
	return out + 1;
}

const ms_range_sum *
ms_range_find(const ms_range_sum *s, size_t n, uint64_t b)
{
	size_t		lo = 0,
				hi = n;

	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;

		if (s[mid].bucket == b)
			return &s[mid];
		if (s[mid].bucket < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int
ms_range_member(const uint64_t *buckets, size_t n, uint64_t b)
{
	size_t		lo = 0,
				hi = n;

	while (lo < hi)
	{
		size_t		mid = lo + (hi - lo) / 2;

		if (buckets[mid] == b)
			return 1;
		if (buckets[mid] < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}
