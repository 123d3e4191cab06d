/*-------------------------------------------------------------------------
 * seal.h
 *	  Seals, nonces and secrets.
 *
 * Every message is sealed for its replica: HMAC-SHA256, under the epoch's
 * secret, of the 56 bytes  replica (16) || epoch (16) || number (8, big
 * endian) || nonce (16).  The replica gives the seal back when it says what it
 * applied, so the server knows it sent that message.
 *
 * Two files: seal_input.c (the 56 bytes, no library) for both sides, and
 * seal.c (ms_seal, ms_seal_verify, ms_random: HMAC-SHA256 and the CSPRNG
 * through OpenSSL libcrypto), which only the server links.  A replica never
 * computes a seal: it keeps the one it was sent and gives it back, and its
 * random bytes come from sqlite3_randomness.
 *-------------------------------------------------------------------------
 */
#ifndef MS_SEAL_H
#define MS_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MS_REPLICA_BYTES 16
#define MS_EPOCH_BYTES 16
#define MS_NONCE_BYTES 16
#define MS_SEAL_BYTES 32
#define MS_SECRET_BYTES 32
#define MS_SEND_ID_BYTES 16
#define MS_SEAL_INPUT_BYTES (MS_REPLICA_BYTES + MS_EPOCH_BYTES + 8 + MS_NONCE_BYTES)

/* ms_seal_input: the 56 bytes a seal is computed over (seal_input.c). */
extern void ms_seal_input(const uint8_t replica[MS_REPLICA_BYTES],
						  const uint8_t epoch[MS_EPOCH_BYTES],
						  uint64_t number,
						  const uint8_t nonce[MS_NONCE_BYTES],
						  uint8_t out[MS_SEAL_INPUT_BYTES]);

/* ms_seal: the seal of one message; false only if OpenSSL fails (seal.c). */
extern bool ms_seal(const uint8_t *secret, size_t secret_len,
					const uint8_t replica[MS_REPLICA_BYTES],
					const uint8_t epoch[MS_EPOCH_BYTES],
					uint64_t number,
					const uint8_t nonce[MS_NONCE_BYTES],
					uint8_t out[MS_SEAL_BYTES]);

/*
 * ms_seal_verify: whether seal (of seal_len bytes) is the seal of this
 * message, compared in constant time.
 */
extern bool ms_seal_verify(const uint8_t *secret, size_t secret_len,
						   const uint8_t replica[MS_REPLICA_BYTES],
						   const uint8_t epoch[MS_EPOCH_BYTES],
						   uint64_t number,
						   const uint8_t nonce[MS_NONCE_BYTES],
						   const uint8_t *seal, size_t seal_len);

/* ms_random: fill buf from the CSPRNG; false when it cannot (seal.c). */
extern bool ms_random(void *buf, size_t len);

#endif
