/*-------------------------------------------------------------------------
 * signing.h
 *	  The installation's signing key (sync.signing_key) and the signature
 *	  every message to a replica carries (docs/protocol.md 2.4,
 *	  docs/design.md 4.12).
 *
 * One Ed25519 key per installation, kept across epochs: a new epoch (and a
 * forged one's snapshot on a stick) brings no new key, so a replica that
 * pinned it never needs another unless the server is installed anew.  Made
 * by the first relay pass or filing that signs, not by CREATE EXTENSION,
 * so that a restored dump brings back its own key, as it brings its epoch.
 * Its private half is read by the extension only (docs/operations.md).
 *-------------------------------------------------------------------------
 */
#ifndef MS_SIGNING_H
#define MS_SIGNING_H

#include "postgres.h"

#include "sign.h"

/*
 * ms_signing_key: the installation's key, ready to sign, made when there is
 * none; NULL when the catalog has no sync.signing_key (not updated yet:
 * messages go unsigned, as before).  SPI connected; kept by the backend.
 */
extern ms_signer *ms_signing_key(void);

/*
 * ms_sign_head: the signature field appended to a message's head (which
 * has room for MS_SIGNATURE_FIELD_BYTES more) whose body has this SHA-256;
 * the head's new length.  The message is then head || body.
 */
extern size_t ms_sign_head(ms_signer *s, uint8 *head, size_t head_len, const uint8 body_sha256[32]);

#endif
