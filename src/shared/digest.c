/*-------------------------------------------------------------------------
 * digest.c
 *	  Count and FNV-1a 64 over sorted canonical keys.  See digest.h.
 *-------------------------------------------------------------------------
 */
#include "digest.h"
#include "key.h"

#include <stdlib.h>

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
