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

/* The same a value at a time: begin, one ms_digest_row_value per column, end. */
extern uint64_t ms_digest_row_begin(const char *key, size_t keylen);
extern uint64_t ms_digest_row_value(uint64_t h, const ms_digest_value *v);
extern uint64_t ms_digest_row_end(uint64_t h);

/* ms_digest_hex: the fingerprint as 16 lowercase hex digits and a NUL. */
extern void ms_digest_hex(uint64_t fnv, char out[17]);

#endif
