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
 * not one per byte (sync_digest reads every row).
 */
#define ROW_MULT UINT64_C(0x9e3779b97f4a7c15)

static inline uint64_t
absorb(uint64_t h, uint64_t w)
{
	h ^= w;
	h = h << 31 | h >> 33;
	return h * ROW_MULT;
}

/* n bytes as little-endian words, the last padded with zero bytes */
static uint64_t
absorb_bytes(uint64_t h, const unsigned char *p, size_t n)
{
	uint64_t	w;

	for (; n >= 8; p += 8, n -= 8)
	{
		w = (uint64_t) p[0] | (uint64_t) p[1] << 8 | (uint64_t) p[2] << 16 | (uint64_t) p[3] << 24 |
			(uint64_t) p[4] << 32 | (uint64_t) p[5] << 40 | (uint64_t) p[6] << 48 | (uint64_t) p[7] << 56;
		h = absorb(h, w);
	}
	if (n > 0)
	{
		w = 0;
		for (size_t i = 0; i < n; i++)
			w |= (uint64_t) p[i] << (8 * i);
		h = absorb(h, w);
	}
	return h;
}

uint64_t
ms_digest_row_begin(const char *key, size_t keylen)
{
	return absorb_bytes(absorb(MS_FNV_OFFSET, (uint64_t) keylen), (const unsigned char *) key, keylen);
}

uint64_t
ms_digest_row_value(uint64_t h, const ms_digest_value *v)
{
	switch (v->tag)
	{
		case MS_DV_NULL:
			return absorb(h, MS_DV_NULL);
		case MS_DV_INTEGER:
			return absorb(absorb(h, MS_DV_INTEGER), (uint64_t) v->i);
		case MS_DV_REAL:
			{
				double		d = v->d == 0 ? 0.0 : v->d; /* -0 is stored as 0 */
				uint64_t	bits;

				memcpy(&bits, &d, sizeof bits);
				return absorb(absorb(h, MS_DV_REAL), bits);
			}
		case MS_DV_TEXT:
		case MS_DV_BLOB:
			h = absorb(h, (uint64_t) v->tag | (uint64_t) v->n << 8);
			return absorb_bytes(h, v->p, v->n);
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
