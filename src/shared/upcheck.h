/*-------------------------------------------------------------------------
 * upcheck.h
 *	  An upload is whole or refused: its length and its check
 *	  (docs/protocol.md 7.1).
 *
 * An Up is written with its length first (field 12, fixed64: every byte of
 * the upload) and its check last (field 13: SHA-256 of every byte before
 * it).  The server verifies both before it reads anything else, so a cut, a
 * flipped bit, or bytes joined on the way are refused whole: nothing of them
 * is filed.  A checksum, not an HMAC: the role that calls sync.file already
 * says which replica is speaking; what the check must catch is damage on
 * the way, and a checksum needs no key that a snapshot would have to
 * deliver first and renew at every provisioning.
 *-------------------------------------------------------------------------
 */
#ifndef MS_UPCHECK_H
#define MS_UPCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define MS_UP_CHECK_BYTES 32
/* field 12's tag and its 8 bytes; field 13's tag, length and 32 bytes */
#define MS_UP_LENGTH_FIELD 9
#define MS_UP_CHECK_FIELD 34
#define MS_UP_FRAME (MS_UP_LENGTH_FIELD + MS_UP_CHECK_FIELD)

/*
 * ms_up_close: buf holds total bytes: MS_UP_LENGTH_FIELD free bytes, the
 * Up's other fields (packed without length and check), MS_UP_CHECK_FIELD
 * free bytes.  Writes the length first and the check last; false only if
 * OpenSSL fails.
 */
extern bool ms_up_close(uint8_t *buf, size_t total);

/*
 * ms_up_verify: whether the upload is whole: one length, that is its
 * length, and its last field a check of the bytes before it.  False with
 * the reason (a sentence a person can act on) when it is not.
 */
extern bool ms_up_verify(const uint8_t *buf, size_t len, char reason[MS_REASON_MAX]);

#endif
