/*
 * seal.c - the pretend server's seal (msgs.c): HMAC-SHA256 over
 * ms_seal_input's 56 bytes, with src/shared's SHA-256 (sha256.c), so that
 * the SQLite suite links what a replica links and no more -- no libcrypto,
 * on any target it is cross-built for.  test_seal.c checks it against the
 * server's seal of the shared vectors (tests/unit/vectors.c, made with
 * OpenSSL).
 */
#include "msgs.h"

#include <string.h>

#include "sha256.h"

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
