/*-------------------------------------------------------------------------
 * digest.c
 *	  Count and FNV-1a 64 over sorted canonical keys.  See digest.h.
 *-------------------------------------------------------------------------
 */
#include "digest.h"
#include "key.h"

#include <stdlib.h>
#include <string.h>

uint64_t
ms_fnv1a(uint64_t h, const void *bytes, size_t len)
{
	const unsigned char *p = bytes;

	for (size_t i = 0; i < len; i++)
	{
		h ^= p[i];
		h *= MS_FNV_PRIME;
	}
	return h;
}

void
ms_digest_init(ms_digest *d)
{
	d->count = 0;
	d->fnv = MS_FNV_OFFSET;
}

void
ms_digest_add(ms_digest *d, const char *key, size_t len)
{
	d->fnv = ms_fnv1a(d->fnv, key, len);
	d->fnv = ms_fnv1a(d->fnv, "\n", 1);
	d->count++;
}

static int
keyref_cmp(const void *a, const void *b)
{
	const ms_keyref *x = a;
	const ms_keyref *y = b;

	return ms_key_cmp(x->key, x->len, y->key, y->len);
}

void
ms_keyref_sort(ms_keyref *refs, size_t n)
{
	if (n > 1)
		qsort(refs, n, sizeof(ms_keyref), keyref_cmp);
}

void
ms_digest_keys(ms_digest *d, ms_keyref *refs, size_t n)
{
	ms_digest_init(d);
	ms_keyref_sort(refs, n);
	for (size_t i = 0; i < n; i++)
		ms_digest_add(d, refs[i].key, refs[i].len);
}

/*
 * A row's hash takes 64-bit words: one rotated into the hash and multiplied
 * (odd: no two hashes go to one), so that a value costs a step per 8 bytes,
 * not one per byte (sync_digest reads every row).  The steps are inline in
 * digest.h.
 */
uint64_t
ms_digest_row_value(uint64_t h, const ms_digest_value *v)
{
	switch (v->tag)
	{
		case MS_DV_NULL:
			return ms_digest_row_null(h);
		case MS_DV_INTEGER:
			return ms_digest_row_int(h, v->i);
		case MS_DV_REAL:
			return ms_digest_row_real(h, v->d);
		case MS_DV_TEXT:
		case MS_DV_BLOB:
			return ms_digest_row_bytes(h, v->tag, v->p, v->n);
	}
	return h;
}

uint64_t
ms_digest_row(const char *key, size_t keylen, const ms_digest_value *vals, int n)
{
	uint64_t	h = ms_digest_row_begin(key, keylen);

	for (int i = 0; i < n; i++)
		h = ms_digest_row_value(h, &vals[i]);
	return ms_digest_row_end(h);
}

void
ms_digest_hex(uint64_t fnv, char out[17])
{
	static const char hex[] = "0123456789abcdef";

	for (int i = 15; i >= 0; i--)
	{
		out[i] = hex[fnv & 0xf];
		fnv >>= 4;
	}
	out[16] = '\0';
}
