/*-------------------------------------------------------------------------
 * sha256.h
 *	  SHA-256 (FIPS 180-4), for an upload's check (upcheck.c) and a message's
 *	  signature (sign_digest.c).  Written here
 *	  because the replica links no crypto library (it runs on phones, vans
 *	  and Windows tablets); the server's seals keep using OpenSSL (seal.c).
 *-------------------------------------------------------------------------
 */
#ifndef MS_SHA256_H
#define MS_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MS_SHA256_BYTES 32

/* ms_sha256: OUT = SHA-256 of LEN bytes at BUF (by the CPU's SHA instructions where it has them) */
extern void ms_sha256(const uint8_t *buf, size_t len, uint8_t out[MS_SHA256_BYTES]);

/* whether ms_sha256 runs on the CPU's SHA instructions here; ms_sha256_plain: never (the tests) */
extern bool ms_sha256_hardware(void);
extern bool ms_sha256_plain;

/* ms_same_bytes: whether A and B agree, in time that does not depend on where they differ */
extern bool ms_same_bytes(const uint8_t *a, const uint8_t *b, size_t len);

#endif
