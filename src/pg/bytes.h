/*-------------------------------------------------------------------------
 * bytes.h
 *	  Bytes as a bytea, and SHA-256 on the server, written once: every file
 *	  of src/pg that makes a bytea of bytes it holds, or hashes them, calls
 *	  these.
 *-------------------------------------------------------------------------
 */
#ifndef MS_BYTES_H
#define MS_BYTES_H

#include "postgres.h"

#include "common/sha2.h"

/* ms_bytea_new: a bytea (or text) of len bytes, to be filled; palloc'd in CurrentMemoryContext */
extern bytea *ms_bytea_new(size_t len);

/* ms_to_bytea: len bytes at data (NULL when len is 0) as a bytea */
extern bytea *ms_to_bytea(const void *data, size_t len);

/*
 * ms_pg_sha256: out = SHA-256 of len bytes at data, through pg_cryptohash
 * (OpenSSL's when the server is built with it, faster than src/shared's
 * ms_sha256, which the replica needs); ms_pg_sha256_bytea: as a bytea.
 * what names what is hashed, for the can't-happen error.
 */
extern void ms_pg_sha256(const void *data, size_t len, uint8 out[PG_SHA256_DIGEST_LENGTH], const char *what);
extern bytea *ms_pg_sha256_bytea(const void *data, size_t len, const char *what);

#endif
