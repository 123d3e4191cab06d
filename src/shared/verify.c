/*-------------------------------------------------------------------------
 * verify.c
 *	  Checking a signature through libsodium (sign.h): the replica's, and the
 *	  server's where it reads a message back (sync.inspect).
 *	  crypto_sign_verify_detached refuses a non-canonical signature and a key
 *	  of small order, so one message has one signature that verifies.
 *-------------------------------------------------------------------------
 */
#include "sign.h"

#include <sodium.h>

bool
ms_verify(const uint8_t key[MS_SIGN_KEY_BYTES], const uint8_t digest[MS_SIGN_DIGEST_BYTES],
		  const uint8_t signature[MS_SIGNATURE_BYTES])
{
	/* once per process, thread-safe; -1 only when it cannot start at all */
	if (sodium_init() < 0)
		return false;
	return crypto_sign_verify_detached(signature, digest, MS_SIGN_DIGEST_BYTES, key) == 0;
}
