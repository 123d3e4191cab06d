/*-------------------------------------------------------------------------
 * digest.h
 *	  What a replica holds of a table, in 16 bytes: a count and a fingerprint.
 *
 * The fingerprint is FNV-1a 64 over the table's canonical keys (key.h) in
 * ascending order, each followed by one '\n' byte.  Server and replica compute
 * it the same way; docs/protocol.md has vectors.
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

/* ms_digest_hex: the fingerprint as 16 lowercase hex digits and a NUL. */
extern void ms_digest_hex(uint64_t fnv, char out[17]);

#endif
