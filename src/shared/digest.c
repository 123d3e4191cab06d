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

uint64_t
ms_digest_row_begin(const char *key, size_t keylen)
{
	return ms_fnv1a(ms_fnv1a(MS_FNV_OFFSET, key, keylen), "\n", 1);
}

static uint64_t
fnv_be64(uint64_t h, uint64_t v)
{
	unsigned char b[8];

	for (int i = 7; i >= 0; i--)
	{
		b[i] = (unsigned char) (v & 0xff);
		v >>= 8;
	}
	return ms_fnv1a(h, b, 8);
}

uint64_t
ms_digest_row_value(uint64_t h, const ms_digest_value *v)
{
	unsigned char tag = (unsigned char) v->tag;

	h = ms_fnv1a(h, &tag, 1);
	switch (v->tag)
	{
		case MS_DV_NULL:
			break;
		case MS_DV_INTEGER:
			h = fnv_be64(h, (uint64_t) v->i);
			break;
		case MS_DV_REAL:
			{
				double		d = v->d == 0 ? 0.0 : v->d; /* -0 is stored as 0 */
				uint64_t	bits;

				memcpy(&bits, &d, sizeof bits);
				h = fnv_be64(h, bits);
				break;
			}
		case MS_DV_TEXT:
		case MS_DV_BLOB:
			{
				unsigned char len[4] = {
					(unsigned char) (v->n >> 24), (unsigned char) (v->n >> 16),
					(unsigned char) (v->n >> 8), (unsigned char) v->n
				};

				h = ms_fnv1a(h, len, 4);
				h = ms_fnv1a(h, v->p, v->n);
				break;
			}
	}
	return h;
}

uint64_t
ms_digest_row_end(uint64_t h)
{
	/* MurmurHash3's fmix64 */
	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64_C(0xc4ceb9fe1a85ec53);
	h ^= h >> 33;
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
