/*-------------------------------------------------------------------------
 * seal_input.c
 *	  The 56 bytes a seal is computed over, for whoever computes one (the
 *	  server's seal.c, the SQLite suite's pretend server): no library.
 *-------------------------------------------------------------------------
 */
#include "seal.h"

void
ms_seal_input(const uint8_t replica[MS_REPLICA_BYTES],
			  const uint8_t epoch[MS_EPOCH_BYTES],
			  uint64_t number,
			  const uint8_t nonce[MS_NONCE_BYTES],
			  uint8_t out[MS_SEAL_INPUT_BYTES])
{
	uint8_t    *p = out;

	for (int i = 0; i < MS_REPLICA_BYTES; i++)
		*p++ = replica[i];
	for (int i = 0; i < MS_EPOCH_BYTES; i++)
		*p++ = epoch[i];
	for (int shift = 56; shift >= 0; shift -= 8)
		*p++ = (uint8_t) (number >> shift);
	for (int i = 0; i < MS_NONCE_BYTES; i++)
		*p++ = nonce[i];
}
