/*-------------------------------------------------------------------------
 * sign_digest.c
 *	  The digest a signature is over, and where a message's signature is
 *	  (sign.h, docs/protocol.md 2.4): no library, both sides.
 *-------------------------------------------------------------------------
 */
#include "sign.h"

#include <string.h>

#include "fields.h"
#include "pbwrite.h"
#include "sha256.h"

void
ms_sign_digest(const uint8_t *head, size_t head_len, const uint8_t body_sha256[32],
			   uint8_t out[MS_SIGN_DIGEST_BYTES])
{
	uint8_t		input[MS_SIGN_DOMAIN_BYTES + 2 * MS_SHA256_BYTES];

	_Static_assert(sizeof MS_SIGN_DOMAIN - 1 == MS_SIGN_DOMAIN_BYTES, "the domain is 32 bytes");
	memcpy(input, MS_SIGN_DOMAIN, MS_SIGN_DOMAIN_BYTES);
	ms_sha256(head, head_len, input + MS_SIGN_DOMAIN_BYTES);
	memcpy(input + MS_SIGN_DOMAIN_BYTES + MS_SHA256_BYTES, body_sha256, MS_SHA256_BYTES);
	ms_sha256(input, sizeof input, out);
}

size_t
ms_sign_field(const uint8_t signature[MS_SIGNATURE_BYTES], uint8_t *out)
{
	size_t		n = ms_pb_len_field(out, MS_FIELD_TO_REPLICA_SIGNATURE, signature, MS_SIGNATURE_BYTES);

	_Static_assert(((MS_FIELD_TO_REPLICA_SIGNATURE << 3) | MS_PB_LEN) < 0x80 && MS_SIGNATURE_BYTES < 0x80,
				   "the signature field is a one-byte tag and a one-byte length");
	return n;
}

ms_sign_found
ms_sign_find(const uint8_t *msg, size_t len, size_t *at, size_t *after, const uint8_t **signature,
			 char reason[MS_REASON_MAX])
{
	size_t		pos = 0;
	bool		found = false;

	reason[0] = '\0';
	while (pos < len)
	{
		size_t		start = pos;
		ms_pb_field f;
		ms_pb_next_result r = ms_pb_next(msg, len, &pos, &f);

		if (r == MS_PB_BROKEN_TAG)
		{
			ms_refuse(reason, "truncated field tag at byte %zu", start);
			return MS_SIGN_MALFORMED;
		}
		if (f.number == MS_FIELD_TO_REPLICA_SIGNATURE)
		{
			if (found)
			{
				ms_refuse(reason, "the message carries two signatures");
				return MS_SIGN_MALFORMED;
			}
			if (r != MS_PB_FIELD || f.wire != MS_PB_LEN || f.len != MS_SIGNATURE_BYTES)
			{
				ms_refuse(reason, "its signature (field 14 at byte %zu) is not %d bytes", start, MS_SIGNATURE_BYTES);
				return MS_SIGN_MALFORMED;
			}
			found = true;
			*at = start;
			*signature = f.bytes;
			*after = pos;
			continue;
		}
		if (r == MS_PB_FIELD)
			continue;
		switch (f.wire)
		{
			case MS_PB_VARINT:
				ms_refuse(reason, "truncated varint at byte %zu", start);
				break;
			case MS_PB_FIXED64:
			case MS_PB_FIXED32:
				ms_refuse(reason, "truncated field at byte %zu", start);
				break;
			case MS_PB_LEN:
				ms_refuse(reason, "truncated field at byte %zu: its length runs past the end", start);
				break;
			default:
				ms_refuse(reason, "a field at byte %zu has unsupported wire type %u", start, (unsigned) f.wire);
				break;
		}
		return MS_SIGN_MALFORMED;
	}
	return found ? MS_SIGN_FOUND : MS_SIGN_NONE;
}

void
ms_sign_message_digest(const uint8_t *msg, size_t len, size_t at, size_t after,
					   uint8_t out[MS_SIGN_DIGEST_BYTES])
{
	uint8_t		body[MS_SHA256_BYTES];

	ms_sha256(msg + after, len - after, body);
	ms_sign_digest(msg, at, body, out);
}
