/*
 * seal.c - the pretend server's seal and signature (msgs.c): HMAC-SHA256
 * over ms_seal_input's 56 bytes, with src/shared's SHA-256 (sha256.c), and
 * Ed25519 through libsodium, so that the SQLite suite links what a replica
 * links and no more -- no libcrypto, on any target it is cross-built for.
 * test_seal.c checks both against the server's of the shared vectors
 * (tests/unit/vectors.c, made with OpenSSL and make_vectors.py).
 */
#include "msgs.h"

#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "sign.h"

#include <sodium.h>

void
tm_seal(const uint8_t *secret, size_t secret_len, const uint8_t replica[MS_REPLICA_BYTES],
		const uint8_t epoch[MS_EPOCH_BYTES], uint64_t number,
		const uint8_t nonce[MS_NONCE_BYTES], uint8_t out[MS_SEAL_BYTES])
{
	uint8_t		inner_in[64 + MS_SEAL_INPUT_BYTES];
	uint8_t		outer_in[64 + MS_SHA256_BYTES];
	uint8_t		pad[64] = {0};

	_Static_assert(MS_SEAL_BYTES == MS_SHA256_BYTES, "a seal is an HMAC-SHA256");
	/* keys of up to a block, as the server's secrets (32 bytes) are */
	memcpy(pad, secret, secret_len < sizeof pad ? secret_len : sizeof pad);
	for (int i = 0; i < 64; i++)
	{
		inner_in[i] = pad[i] ^ 0x36;
		outer_in[i] = pad[i] ^ 0x5c;
	}
	ms_seal_input(replica, epoch, number, nonce, inner_in + 64);
	ms_sha256(inner_in, sizeof inner_in, outer_in + 64);
	ms_sha256(outer_in, sizeof outer_in, out);
}

/* the pretend server's key: the seed of the vectors (docs/protocol.md 10), bytes 0x60 .. 0x7f */
static void
test_keypair(uint8_t pk[crypto_sign_PUBLICKEYBYTES], uint8_t sk[crypto_sign_SECRETKEYBYTES], uint8_t seed_xor)
{
	uint8_t		seed[crypto_sign_SEEDBYTES];

	for (int i = 0; i < (int) crypto_sign_SEEDBYTES; i++)
		seed[i] = (uint8_t) (0x60 + i);
	seed[0] ^= seed_xor;
	if (sodium_init() < 0 || crypto_sign_seed_keypair(pk, sk, seed) != 0)
		abort();
}

void
tm_server_key(uint8_t out[MS_SIGN_KEY_BYTES])
{
	uint8_t		sk[crypto_sign_SECRETKEYBYTES];

	test_keypair(out, sk, 0);
}

void
tm_sign(const uint8_t *head, size_t head_len, const uint8_t *body, size_t body_len, uint8_t seed_xor,
		uint8_t out[MS_SIGNATURE_BYTES])
{
	uint8_t		pk[crypto_sign_PUBLICKEYBYTES];
	uint8_t		sk[crypto_sign_SECRETKEYBYTES];
	uint8_t		body_hash[MS_SHA256_BYTES];
	uint8_t		digest[MS_SIGN_DIGEST_BYTES];

	test_keypair(pk, sk, seed_xor);
	ms_sha256(body, body_len, body_hash);
	ms_sign_digest(head, head_len, body_hash, digest);
	crypto_sign_detached(out, NULL, digest, sizeof digest, sk);
}
