/*
 * vectors.h - the test vectors of docs/protocol.md, derived independently by
 * tests/unit/make_vectors.py and shared by the unit tests and the SQLite suite.
 */
#ifndef MS_VECTORS_H
#define MS_VECTORS_H

#include <stddef.h>
#include <stdint.h>

#include "alloc.h"

typedef struct ms_vector_digest
{
	const char *name;
	int			nkeys;
	int			nparts;			/* parts per key; a NULL part ends a shorter key */
	const char *keys[4][2];
	uint64_t	count;
	const char *fnv;
} ms_vector_digest;

extern const ms_vector_digest ms_vector_digests[];
extern const int ms_vector_ndigests;

/*
 * Values digests: rows of (id INTEGER key, name TEXT, price REAL, photo
 * BLOB, note TEXT), each row's hash and the table's sum (docs/protocol.md 10)
 */
extern const char *ms_vector_row_hashes[2];
extern const char *ms_vector_values;

/* a key part of a kind (a Column's key_type), as written, and its one spelling (NULL: refused) */
typedef struct ms_vector_spelling
{
	const char *kind;
	const char *written;
	const char *spelled;
} ms_vector_spelling;

extern const ms_vector_spelling ms_vector_spellings[];
extern const int ms_vector_nspellings;

extern const uint8_t ms_vector_secret[32];
extern const uint8_t ms_vector_replica[16];
extern const uint8_t ms_vector_epoch[16];
extern const uint8_t ms_vector_nonce[16];
extern const uint8_t ms_vector_previous_nonce[16];
extern const uint64_t ms_vector_number;
extern const char *ms_vector_seal_input_hex;
extern const char *ms_vector_seal_hex;
extern const char *ms_vector_head_hex;
extern const char *ms_vector_body_hex;
/* the sample schema change: message 43, after the sample message 42 */
extern const uint8_t ms_vector_evolve_nonce[16];
extern const char *ms_vector_evolve_seal_hex;
extern const char *ms_vector_evolve_head_hex;
extern const char *ms_vector_evolve_body_hex;
/* the sample wish: message 43 after 42, of one wish; and an Up saying it was applied */
extern const uint8_t ms_vector_wish_nonce[16];
extern const char *ms_vector_wish_seal_hex;
extern const char *ms_vector_wish_head_hex;
extern const char *ms_vector_wish_body_hex;
extern const char *ms_vector_wish_up_hex;
/* the sample's head in a generation, and what a replica that applied it says (Applied) */
extern const uint64_t ms_vector_generation;
extern const char *ms_vector_generation_head_hex;
extern const char *ms_vector_applied_hex;
extern const uint8_t ms_vector_send_id[16];
extern const uint64_t ms_vector_seq;
extern const char *ms_vector_up_hex;
extern const char *ms_vector_up_lane_hex;
/* bundles: the sample message to the replica, the sample Up from it */
extern const uint64_t ms_vector_bundle_written;
extern const char *ms_vector_bundle_to_hex;
extern const char *ms_vector_bundle_from_hex;

/* signatures: the key's seed and public key, the sample's digest, signature and signed bytes; a signed Filed answer */
extern const uint8_t ms_vector_sign_seed[32];
extern const char *ms_vector_sign_public_hex;
extern const char *ms_vector_sign_digest_hex;
extern const char *ms_vector_signature_hex;
extern const char *ms_vector_signed_hex;
extern const char *ms_vector_filed_head_hex;
extern const char *ms_vector_filed_body_hex;
extern const char *ms_vector_filed_digest_hex;
extern const char *ms_vector_filed_signature_hex;
extern const char *ms_vector_signed_filed_hex;

/* ms_test_allocator: malloc and free, lent to src/shared by both suites (ASan sees every leak) */
extern ms_allocator ms_test_allocator;

/* ms_hex_decode: hex to bytes; returns the byte count, or -1. */
extern long ms_hex_decode(const char *hex, uint8_t *out, size_t cap);
/* ms_hex_encode: bytes to lowercase hex with a NUL; out holds 2 * len + 1. */
extern void ms_hex_encode(const uint8_t *bytes, size_t len, char *out);

#endif
