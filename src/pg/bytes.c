/*-------------------------------------------------------------------------
 * bytes.c
 *	  Bytes as a bytea; SHA-256 on the server (bytes.h).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "common/cryptohash.h"

#include "bytes.h"

bytea *
ms_bytea_new(size_t len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	return b;
}

bytea *
ms_to_bytea(const void *data, size_t len)
{
	bytea	   *b = ms_bytea_new(len);

	if (len > 0)
		memcpy(VARDATA(b), data, len);
	return b;
}

void
ms_pg_sha256(const void *data, size_t len, uint8 out[PG_SHA256_DIGEST_LENGTH], const char *what)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) data, len) < 0 ||
		pg_cryptohash_final(ctx, out, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute a SHA-256 of %s", what);
	pg_cryptohash_free(ctx);
}

bytea *
ms_pg_sha256_bytea(const void *data, size_t len, const char *what)
{
	bytea	   *b = ms_bytea_new(PG_SHA256_DIGEST_LENGTH);

	ms_pg_sha256(data, len, (uint8 *) VARDATA(b), what);
	return b;
}
