/*-------------------------------------------------------------------------
 * upcheck.c
 *	  An upload's length and check: written by the replica, verified by the
 *	  server before anything of the upload is read (upcheck.h).
 *-------------------------------------------------------------------------
 */
#include "upcheck.h"

#include "fields.h"
#include "pbwrite.h"
#include "sha256.h"

_Static_assert(MS_UP_CHECK_BYTES == MS_SHA256_BYTES, "an upload's check is a SHA-256");

bool
ms_up_close(uint8_t *buf, size_t total)
{
	size_t		n = ms_pb_tag(buf, MS_FIELD_UP_LENGTH, MS_PB_FIXED64);
	size_t		at = total - MS_UP_CHECK_FIELD;

	for (int i = 0; i < 8; i++)
		buf[n++] = (uint8_t) ((uint64_t) total >> (8 * i));
	n = ms_pb_len_head(buf + at, MS_FIELD_UP_CHECK, MS_UP_CHECK_BYTES);
	ms_sha256(buf, at, buf + at + n);
	return true;
}

bool
ms_up_verify(const uint8_t *buf, size_t len, char reason[MS_REASON_MAX])
{
	size_t		pos = 0;
	size_t		last = 0;		/* where the last field began */
	uint64_t	last_field = 0;
	bool		has_length = false;
	uint64_t	length = 0;
	size_t		check_at = 0;
	int			checks = 0;
	uint8_t		want[MS_UP_CHECK_BYTES];

	while (pos < len)
	{
		size_t		at = pos;
		ms_pb_field f;
		ms_pb_next_result r = ms_pb_next(buf, len, &pos, &f);

		if (r == MS_PB_BROKEN_TAG)
			break;
		last = at;
		last_field = f.number;
		if (r == MS_PB_BROKEN_VALUE)
		{
			pos = SIZE_MAX;
			break;
		}
		if (f.wire == MS_PB_LEN && f.number == MS_FIELD_UP_CHECK)
		{
			checks++;
			check_at = at;
			if (f.len != MS_UP_CHECK_BYTES)
				return ms_refuse(reason, "the upload's check has %llu bytes, not %d",
								 (unsigned long long) f.len, MS_UP_CHECK_BYTES);
		}
		else if (f.wire == MS_PB_FIXED64 && f.number == MS_FIELD_UP_LENGTH)
		{
			if (has_length)
				return ms_refuse(reason, "the upload says its length twice");
			has_length = true;
			length = f.value;
		}
	}
	if (has_length && length != (uint64_t) len)
		return ms_refuse(reason, "the upload is %zu bytes, but says it is %llu: it was %s on the way",
						 len, (unsigned long long) length, (uint64_t) len < length ? "cut short" : "joined to other bytes");
	if (pos != len)
		return ms_refuse(reason, "the upload is cut short%s: its fields run past its %zu bytes",
						 has_length ? "" : " (it does not say its length)", len);
	if (!has_length)
		return ms_refuse(reason, "the upload does not say its length: an upload carries its length first and its check last");
	if (checks != 1 || last_field != MS_FIELD_UP_CHECK || check_at != last)
		return ms_refuse(reason, "the upload's last field is not its check (field %d): %s",
						 MS_FIELD_UP_CHECK, checks ? "it is given twice, or bytes follow it" : "it carries none");
	ms_sha256(buf, check_at, want);
	if (!ms_same_bytes(want, buf + len - MS_UP_CHECK_BYTES, MS_UP_CHECK_BYTES))
		return ms_refuse(reason, "the upload's check does not match its bytes: it was damaged on the way");
	return true;
}
