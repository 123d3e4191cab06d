/*
 * test_seal.c - the pretend server (msgs.c) seals as the server does: its
 * HMAC-SHA256 (seal.c) gives the shared vectors' seal, made with OpenSSL.
 */
#include "harness.h"
#include "vectors.h"

#include <stdio.h>
#include <string.h>

void
test_seal(void)
{
	uint8_t		seal[MS_SEAL_BYTES];
	char		hex[2 * MS_SEAL_BYTES + 1];

	tm_seal(ms_vector_secret, 32, ms_vector_replica, ms_vector_epoch, ms_vector_number,
			ms_vector_nonce, seal);
	for (int i = 0; i < MS_SEAL_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", seal[i]);
	CHECK(strcmp(hex, ms_vector_seal_hex) == 0, "the pretend server seals as the server does: %s", hex);
}
