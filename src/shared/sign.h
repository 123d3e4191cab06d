/*-------------------------------------------------------------------------
 * sign.h
 *	  Signatures: who wrote a message to a replica (docs/protocol.md 2.4).
 *
 * A seal (seal.h) is the server's proof of what it sent, which only the
 * server can check.  A signature is the replica's proof of who sent it:
 * the server signs every ToReplica with the Ed25519 key of its installation,
 * and a replica that trusts the key applies nothing, and lets go of no
 * note, on a message whose signature does not verify -- so bytes on a
 * stick, or any relay between, cannot speak for the server.
 *
 * What is signed is a 32-byte digest, so that a body shared by many
 * replicas' messages is hashed once:
 *
 *   digest = SHA-256( "magic_sync ToReplica signature 1"   (32 bytes)
 *                     || SHA-256(head) || SHA-256(body) )
 *
 * where the message is  head || signature field || body : the signature
 * field is field 14 (tag 0x72, length 0x40, the 64 bytes), head is every
 * byte before it and body every byte after it.  The signature is pure
 * Ed25519 (RFC 8032) of the digest's 32 bytes.
 *
 * Three files:
 *   sign_digest.c  the digest, finding the signature field: no library, both sides
 *   sign.c         signing through libsodium: the server's
 *   verify.c       checking through libsodium: both sides'
 *-------------------------------------------------------------------------
 */
#ifndef MS_SIGN_H
#define MS_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reason.h"

#define MS_SIGN_KEY_BYTES 32		/* an Ed25519 public key */
#define MS_SIGN_SEED_BYTES 32		/* an Ed25519 private key: its seed */
#define MS_SIGNATURE_BYTES 64
#define MS_SIGN_DIGEST_BYTES 32
/* the signature as a field of ToReplica: tag 0x72, length 0x40, the signature */
#define MS_SIGNATURE_FIELD_BYTES (2 + MS_SIGNATURE_BYTES)
/* what the digest begins with: 32 ASCII bytes, no NUL */
#define MS_SIGN_DOMAIN "magic_sync ToReplica signature 1"
#define MS_SIGN_DOMAIN_BYTES 32

/* ---- sign_digest.c ------------------------------------------------------ */

/*
 * ms_sign_digest: the digest signed, of a message whose head (every byte
 * before the signature field) is given and whose body's SHA-256 is given
 */
extern void ms_sign_digest(const uint8_t *head, size_t head_len,
						   const uint8_t body_sha256[32],
						   uint8_t out[MS_SIGN_DIGEST_BYTES]);

/* ms_sign_field: the signature field (MS_SIGNATURE_FIELD_BYTES) written to out */
extern size_t ms_sign_field(const uint8_t signature[MS_SIGNATURE_BYTES], uint8_t *out);

typedef enum ms_sign_found
{
	MS_SIGN_NONE,				/* the message carries no signature */
	MS_SIGN_FOUND,
	MS_SIGN_MALFORMED			/* its fields cannot be walked, or its signature is not one */
} ms_sign_found;

/*
 * ms_sign_find: the signature field of a message, walking its top-level
 * fields: *at is the field's first byte, *after the first byte after it,
 * *signature its 64 bytes.  MALFORMED, with the reason, when a field runs
 * past the end, or field 14 comes twice, is not length-delimited or is not
 * 64 bytes long.
 */
extern ms_sign_found ms_sign_find(const uint8_t *msg, size_t len, size_t *at, size_t *after,
								  const uint8_t **signature, char reason[MS_REASON_MAX]);

/* ms_sign_message_digest: the digest of a whole message whose signature field is msg[at, after) */
extern void ms_sign_message_digest(const uint8_t *msg, size_t len, size_t at, size_t after,
								   uint8_t out[MS_SIGN_DIGEST_BYTES]);

/* ---- sign.c: libsodium, the server's ------------------------------------ */

/* A private key ready to sign (libsodium's expanded secret key), made once and kept. */
typedef struct ms_signer ms_signer;

/* ms_signer_new: the key of this seed, and its public key; NULL when libsodium cannot start or allocate. */
extern ms_signer *ms_signer_new(const uint8_t seed[MS_SIGN_SEED_BYTES],
								uint8_t public_key[MS_SIGN_KEY_BYTES]);
extern bool ms_signer_sign(ms_signer *s, const uint8_t digest[MS_SIGN_DIGEST_BYTES],
						   uint8_t signature[MS_SIGNATURE_BYTES]);
extern void ms_signer_free(ms_signer *s);

/* ms_sign_check: whether the signature of digest verifies under key (verify.c): sync.inspect, the tests */
extern bool ms_sign_check(const uint8_t key[MS_SIGN_KEY_BYTES], const uint8_t digest[MS_SIGN_DIGEST_BYTES],
						  const uint8_t *signature, size_t signature_len);

/* ---- verify.c: libsodium, both sides' ------------------------------------ */

/* ms_verify: whether the signature of digest verifies under key; false when libsodium cannot start */
extern bool ms_verify(const uint8_t key[MS_SIGN_KEY_BYTES], const uint8_t digest[MS_SIGN_DIGEST_BYTES],
					  const uint8_t signature[MS_SIGNATURE_BYTES]);

#endif
