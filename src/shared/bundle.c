/*-------------------------------------------------------------------------
 * bundle.c
 *	  Writing and reading a bundle (bundle.h, docs/protocol.md 11): every
 *	  byte of one read is checked before a message is handed out.
 *-------------------------------------------------------------------------
 */
#include "bundle.h"

#include <string.h>

#include "sha256.h"

_Static_assert(MS_BUNDLE_CHECK == MS_SHA256_BYTES, "a bundle's check is a SHA-256");

#define AT_VERSION 8
#define AT_KIND 10
#define AT_ZERO 11
#define AT_REPLICA 12
#define AT_COUNT 28
#define AT_WRITTEN 32

static void
put_be(uint8_t *out, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--)
	{
		out[i] = (uint8_t) v;
		v >>= 8;
	}
}

static uint64_t
get_be(const uint8_t *in, int bytes)
{
	uint64_t	v = 0;

	for (int i = 0; i < bytes; i++)
		v = v << 8 | in[i];
	return v;
}

bool
ms_bundle_head_check(const uint8_t *buf, size_t len, char reason[MS_REASON_MAX])
{
	uint64_t	count;

	if (len < 8 || memcmp(buf, MS_BUNDLE_MAGIC, 8) != 0)
		return ms_refuse(reason, "not a magic_sync bundle: it does not begin with \"MSBUNDLE\"");
	if (len < MS_BUNDLE_HEAD)
		return ms_refuse(reason, "a bundle of %zu bytes is cut short: its head and check alone take %d",
						 len, MS_BUNDLE_HEAD + MS_BUNDLE_CHECK);
	if (get_be(buf + AT_VERSION, 2) != MS_BUNDLE_VERSION)
		return ms_refuse(reason, "a bundle of version %u, this build reads version %d: use a build that reads it",
						 (unsigned) get_be(buf + AT_VERSION, 2), MS_BUNDLE_VERSION);
	if (buf[AT_KIND] != MS_BUNDLE_TO_REPLICA && buf[AT_KIND] != MS_BUNDLE_FROM_REPLICA)
		return ms_refuse(reason, "a bundle of kind %u, neither to a replica (1) nor from one (2)", buf[AT_KIND]);
	if (buf[AT_ZERO] != 0)
		return ms_refuse(reason, "a bundle whose byte %d is %u, not 0", AT_ZERO, buf[AT_ZERO]);
	count = get_be(buf + AT_COUNT, 4);
	if (count > MS_BUNDLE_MESSAGES_MAX)
		return ms_refuse(reason, "a bundle of %llu messages, more than the %d one may carry",
						 (unsigned long long) count, MS_BUNDLE_MESSAGES_MAX);
	return true;
}

bool
ms_bundle_open(ms_bundle *b, const uint8_t *buf, size_t len, size_t max_message, char reason[MS_REASON_MAX])
{
	uint8_t		sum[MS_SHA256_BYTES];
	size_t		pos = MS_BUNDLE_HEAD;
	size_t		end;
	uint64_t	version;

	memset(b, 0, sizeof *b);
	if (len < MS_BUNDLE_HEAD + MS_BUNDLE_CHECK || memcmp(buf, MS_BUNDLE_MAGIC, 8) != 0)
		return ms_refuse(reason, len >= 8 && memcmp(buf, MS_BUNDLE_MAGIC, 8) == 0
						 ? "a bundle of %zu bytes is cut short: its head and check alone take %d"
						 : "not a magic_sync bundle (%zu bytes, without its \"MSBUNDLE\" head)",
						 len, MS_BUNDLE_HEAD + MS_BUNDLE_CHECK);
	version = get_be(buf + AT_VERSION, 2);
	if (version != MS_BUNDLE_VERSION)
		return ms_refuse(reason, "a bundle of version %u, this build reads version %d: use a build that reads it",
						 (unsigned) version, MS_BUNDLE_VERSION);
	end = len - MS_BUNDLE_CHECK;
	/* the check first: a damaged bundle's lengths and count are not worth reading */
	ms_sha256(buf, end, sum);
	if (!ms_same_bytes(sum, buf + end, MS_BUNDLE_CHECK))
		return ms_refuse(reason, "the bundle is not whole: its check does not match its %zu bytes"
						 " (cut short, joined to other bytes, or damaged on the way)", len);
	if (buf[AT_KIND] != MS_BUNDLE_TO_REPLICA && buf[AT_KIND] != MS_BUNDLE_FROM_REPLICA)
		return ms_refuse(reason, "a bundle of kind %u, neither to a replica (1) nor from one (2)", buf[AT_KIND]);
	if (buf[AT_ZERO] != 0)
		return ms_refuse(reason, "a bundle whose byte %d is %u, not 0", AT_ZERO, buf[AT_ZERO]);
	b->kind = (ms_bundle_kind) buf[AT_KIND];
	memcpy(b->replica, buf + AT_REPLICA, 16);
	b->count = (uint32_t) get_be(buf + AT_COUNT, 4);
	b->written = get_be(buf + AT_WRITTEN, 8);
	if (b->count > MS_BUNDLE_MESSAGES_MAX)
		return ms_refuse(reason, "a bundle of %u messages, more than the %d one may carry",
						 b->count, MS_BUNDLE_MESSAGES_MAX);
	/* every length within what remains and the bound, and nothing after the last */
	for (uint32_t i = 0; i < b->count; i++)
	{
		uint64_t	n;

		if (end - pos < 4)
			return ms_refuse(reason, "the bundle ends inside message %u's length, of %u", i + 1, b->count);
		n = get_be(buf + pos, 4);
		pos += 4;
		if (n == 0)
			return ms_refuse(reason, "message %u of the bundle is empty", i + 1);
		if (n > max_message)
			return ms_refuse(reason, "message %u of the bundle is %llu bytes, more than the %zu allowed",
							 i + 1, (unsigned long long) n, max_message);
		if (n > end - pos)
			return ms_refuse(reason, "message %u of the bundle is %llu bytes, %zu remain", i + 1,
							 (unsigned long long) n, end - pos);
		pos += (size_t) n;
	}
	if (pos != end)
		return ms_refuse(reason, "%zu bytes after the bundle's %u messages", end - pos, b->count);
	b->buf = buf;
	b->len = end;
	b->pos = MS_BUNDLE_HEAD;
	return true;
}

bool
ms_bundle_next(ms_bundle *b, const uint8_t **msg, size_t *len)
{
	size_t		n;

	if (b->buf == NULL || b->next >= b->count)
		return false;
	/* ms_bundle_open walked these lengths: within the buffer */
	n = (size_t) get_be(b->buf + b->pos, 4);
	*msg = b->buf + b->pos + 4;
	*len = n;
	b->pos += 4 + n;
	b->next++;
	return true;
}

/* room: at least more bytes free, growing by doubling */
static bool
room(ms_bundle_writer *w, size_t more)
{
	size_t		cap = w->cap ? w->cap : 4096;
	uint8_t    *grown;

	if (w->failed)
		return false;
	if (more <= w->cap - w->len)
		return true;
	while (cap - w->len < more)
	{
		if (cap > SIZE_MAX / 2)
		{
			w->failed = true;
			return false;
		}
		cap *= 2;
	}
	grown = w->alloc->alloc(w->alloc->allocator_data, cap);
	if (grown == NULL)
	{
		w->failed = true;
		return false;
	}
	if (w->len)
		memcpy(grown, w->buf, w->len);
	if (w->buf)
		w->alloc->free(w->alloc->allocator_data, w->buf);
	w->buf = grown;
	w->cap = cap;
	return true;
}

void
ms_bundle_begin(ms_bundle_writer *w, ms_allocator *alloc, ms_bundle_kind kind, const uint8_t replica[16],
				uint64_t written)
{
	memset(w, 0, sizeof *w);
	w->alloc = alloc;
	if (!room(w, MS_BUNDLE_HEAD))
		return;
	memcpy(w->buf, MS_BUNDLE_MAGIC, 8);
	put_be(w->buf + AT_VERSION, MS_BUNDLE_VERSION, 2);
	w->buf[AT_KIND] = (uint8_t) kind;
	w->buf[AT_ZERO] = 0;
	memcpy(w->buf + AT_REPLICA, replica, 16);
	put_be(w->buf + AT_COUNT, 0, 4);
	put_be(w->buf + AT_WRITTEN, written, 8);
	w->len = MS_BUNDLE_HEAD;
}

bool
ms_bundle_add(ms_bundle_writer *w, const uint8_t *msg, size_t len)
{
	if (len == 0 || len > UINT32_MAX || w->count >= MS_BUNDLE_MESSAGES_MAX)
		w->failed = true;
	if (!room(w, 4 + len))
		return false;
	put_be(w->buf + w->len, len, 4);
	memcpy(w->buf + w->len + 4, msg, len);
	w->len += 4 + len;
	w->count++;
	return true;
}

uint8_t *
ms_bundle_finish(ms_bundle_writer *w, size_t *len)
{
	uint8_t    *out;

	if (!room(w, MS_BUNDLE_CHECK))
	{
		ms_bundle_discard(w);
		return NULL;
	}
	put_be(w->buf + AT_COUNT, w->count, 4);
	ms_sha256(w->buf, w->len, w->buf + w->len);
	*len = w->len + MS_BUNDLE_CHECK;
	out = w->buf;
	w->buf = NULL;
	w->len = w->cap = 0;
	return out;
}

void
ms_bundle_discard(ms_bundle_writer *w)
{
	if (w->buf)
		w->alloc->free(w->alloc->allocator_data, w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
	w->failed = true;
}
