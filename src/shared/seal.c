/*-------------------------------------------------------------------------
 * seal.c
 *	  HMAC-SHA256 seals and CSPRNG bytes, through OpenSSL libcrypto: the
 *	  server's only.  A replica keeps the seal it was sent and gives it back,
 *	  never computes one, and takes its random bytes from SQLite
 *	  (sqlite3_randomness): magic_sync_sqlite does not link this file, nor
 *	  libcrypto.  The bytes a seal is over are seal_input.c's.
 *-------------------------------------------------------------------------
 */
#include "seal.h"

#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

bool
ms_seal(const uint8_t *secret, size_t secret_len,
		const uint8_t replica[MS_REPLICA_BYTES],
		const uint8_t epoch[MS_EPOCH_BYTES],
		uint64_t number,
		const uint8_t nonce[MS_NONCE_BYTES],
		uint8_t out[MS_SEAL_BYTES])
{
	uint8_t		input[MS_SEAL_INPUT_BYTES];
	unsigned int outlen = 0;

	if (secret_len == 0 || secret_len > INT_MAX)
		return false;
	ms_seal_input(replica, epoch, number, nonce, input);
	if (HMAC(EVP_sha256(), secret, (int) secret_len, input, sizeof input,
			 out, &outlen) == NULL)
		return false;
	return outlen == MS_SEAL_BYTES;
}

bool
ms_seal_verify(const uint8_t *secret, size_t secret_len,
			   const uint8_t replica[MS_REPLICA_BYTES],
			   const uint8_t epoch[MS_EPOCH_BYTES],
			   uint64_t number,
			   const uint8_t nonce[MS_NONCE_BYTES],
			   const uint8_t *seal, size_t seal_len)
{
	uint8_t		expected[MS_SEAL_BYTES];

	if (seal_len != MS_SEAL_BYTES)
		return false;
	if (!ms_seal(secret, secret_len, replica, epoch, number, nonce, expected))
		return false;
	return CRYPTO_memcmp(expected, seal, MS_SEAL_BYTES) == 0;
}

bool
ms_random(void *buf, size_t len)
{
	if (len > INT_MAX)
		return false;
	return RAND_bytes(buf, (int) len) == 1;
}
