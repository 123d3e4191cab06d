/*-------------------------------------------------------------------------
 * digest.h
 *	  What a replica holds of a table, in 16 bytes: a count and a fingerprint.
 *
 * The fingerprint is FNV-1a 64 over the table's canonical keys (key.h) in
 * ascending order, each followed by one '\n' byte.  Server and replica compute
 * it the same way; docs/protocol.md has vectors.
 *
 * The values digest covers what each row holds: the sum, modulo 2^64, of
 * each row's hash (ms_digest_row), so it is the same in any order and a
 * range of keys has one of its own (a sum of its rows').
 *-------------------------------------------------------------------------
 */
#ifndef MS_DIGEST_H
#define MS_DIGEST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MS_FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define MS_FNV_PRIME UINT64_C(0x100000001b3)

typedef struct ms_digest
{
	uint64_t	count;
	uint64_t	fnv;
} ms_digest;

extern uint64_t ms_fnv1a(uint64_t h, const void *bytes, size_t len);

extern void ms_digest_init(ms_digest *d);

/* ms_digest_add: add the next key; keys must come in ascending order. */
extern void ms_digest_add(ms_digest *d, const char *key, size_t len);

/* A key to sort: the caller owns the array (src/shared never allocates). */
typedef struct ms_keyref
{
	const char *key;
	size_t		len;
} ms_keyref;

/* ms_keyref_sort: sort n keys into canonical order, in place. */
extern void ms_keyref_sort(ms_keyref *refs, size_t n);

/* ms_digest_keys: the digest of n keys in any order; sorts refs in place. */
extern void ms_digest_keys(ms_digest *d, ms_keyref *refs, size_t n);

/*
 * One value of a row as a digest sees it: the tag is how it is stored
 * (NULL, or one of the four types), the rest as in ms_row_value.
 */
typedef enum ms_dv_tag
{
	MS_DV_NULL = 0,
	MS_DV_INTEGER = 1,
	MS_DV_REAL = 2,
	MS_DV_TEXT = 3,
	MS_DV_BLOB = 4
} ms_dv_tag;

typedef struct ms_digest_value
{
	ms_dv_tag	tag;
	int64_t		i;				/* INTEGER */
	double		d;				/* REAL */
	const void *p;				/* TEXT, BLOB: n bytes */
	size_t		n;
} ms_digest_value;

/*
 * ms_digest_row: one row's contribution to its table's values digest
 * (docs/protocol.md 8), taken a 64-bit word w at a time, h = rotl(h ^ w, 31)
 * * 0x9e3779b97f4a7c15, from the FNV offset basis: the canonical key's
 * length, its bytes; then each value in the table's column order -- its tag,
 * then an INTEGER's 64 bits or a REAL's IEEE 754 bits (-0 as 0); a TEXT's or
 * BLOB's tag and length together (tag | length << 8), then its bytes --
 * bytes as little-endian words, the last padded with zero bytes; then mixed
 * (MurmurHash3's fmix64) so that a sum of rows spreads every bit.  Which
 * columns count is the caller's: the columns a replica owns and its retired
 * column do not.
 */
extern uint64_t ms_digest_row(const char *key, size_t keylen,
							  const ms_digest_value *vals, int n);

/*
 * The same a value at a time: ms_digest_row_begin, one ms_digest_row_value
 * per column, ms_digest_row_end (begin and end are inline, below).
 */
extern uint64_t ms_digest_row_value(uint64_t h, const ms_digest_value *v);

/*
 * The steps of ms_digest_row_value, inline, for a walk over every row of a
 * table (a replica's sync_digest): one definition, used by it and by the
 * functions above, so both sides hash alike.
 */
#define MS_DIGEST_ROW_MULT UINT64_C(0x9e3779b97f4a7c15)

static inline uint64_t
ms_digest_absorb(uint64_t h, uint64_t w)
{
	h ^= w;
	h = h << 31 | h >> 33;
	return h * MS_DIGEST_ROW_MULT;
}

/* n bytes as little-endian words, whatever the host's order, the last padded with zero bytes */
static inline uint64_t
ms_digest_absorb_bytes(uint64_t h, const unsigned char *p, size_t n)
{
	uint64_t	w;

	for (; n >= 8; p += 8, n -= 8)
	{
		memcpy(&w, p, sizeof w);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		w = __builtin_bswap64(w);
#endif
		h = ms_digest_absorb(h, w);
	}
	if (n > 0)
	{
		/* the last 1 to 7, by hand: a memcpy of n bytes would be a call */
		w = 0;
		switch (n)
		{
			case 7:
				w |= (uint64_t) p[6] << 48;
				/* fallthrough */
			case 6:
				w |= (uint64_t) p[5] << 40;
				/* fallthrough */
			case 5:
				w |= (uint64_t) p[4] << 32;
				/* fallthrough */
			case 4:
				w |= (uint64_t) p[3] << 24;
				/* fallthrough */
			case 3:
				w |= (uint64_t) p[2] << 16;
				/* fallthrough */
			case 2:
				w |= (uint64_t) p[1] << 8;
				/* fallthrough */
			default:
				w |= (uint64_t) p[0];
		}
		h = ms_digest_absorb(h, w);
	}
	return h;
}

static inline uint64_t
ms_digest_row_null(uint64_t h)
{
	return ms_digest_absorb(h, MS_DV_NULL);
}

static inline uint64_t
ms_digest_row_int(uint64_t h, int64_t i)
{
	return ms_digest_absorb(ms_digest_absorb(h, MS_DV_INTEGER), (uint64_t) i);
}

static inline uint64_t
ms_digest_row_real(uint64_t h, double d)
{
	uint64_t	bits;

	if (d == 0)
		d = 0.0;				/* -0 is stored as 0 */
	memcpy(&bits, &d, sizeof bits);
	return ms_digest_absorb(ms_digest_absorb(h, MS_DV_REAL), bits);
}

/* a TEXT's or BLOB's: tag MS_DV_TEXT or MS_DV_BLOB */
static inline uint64_t
ms_digest_row_bytes(uint64_t h, ms_dv_tag tag, const void *p, size_t n)
{
	h = ms_digest_absorb(h, (uint64_t) tag | (uint64_t) n << 8);
	return ms_digest_absorb_bytes(h, p, n);
}

static inline uint64_t
ms_digest_row_begin(const char *key, size_t keylen)
{
	return ms_digest_absorb_bytes(ms_digest_absorb(MS_FNV_OFFSET, (uint64_t) keylen), (const unsigned char *) key,
								  keylen);
}

static inline uint64_t
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

/* ms_digest_hex: the fingerprint as 16 lowercase hex digits and a NUL. */
extern void ms_digest_hex(uint64_t fnv, char out[17]);

#endif
