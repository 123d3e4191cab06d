/*-------------------------------------------------------------------------
 * bundle.h
 *	  A bundle: the messages of one replica in one file, for a van or a ship
 *	  that exchanges files instead of a network (docs/protocol.md 11).
 *
 * To the replica: what sync.pull returned for it (its Filed answers, then
 * the messages of its outbox, sealed as they are).  From the replica: its
 * uploads (sync_upload), each framed and checked as it always is.  A bundle
 * is untrusted input: its head, every message's length and the SHA-256
 * check over the whole are verified before any message is handed out, so a
 * file cut short, joined to another, or with a flipped bit is refused
 * whole.  A checksum, not a seal, for the reason an upload has one: the
 * messages inside carry their own seals and checks; what the bundle's must
 * catch is damage on the way.
 *
 *   head    8 bytes "MSBUNDLE", version (2 bytes, big-endian, 1), kind
 *           (1 byte: 1 to the replica, 2 from it), 1 byte 0, the
 *           replica's uuid (16 bytes), the message count (4 bytes), the
 *           time written (8 bytes, microseconds since 1970): 40 bytes
 *   body    per message its length (4 bytes, big-endian, at least 1), then
 *           its bytes
 *   check   SHA-256 of every byte before it: 32 bytes
 *-------------------------------------------------------------------------
 */
#ifndef MS_BUNDLE_H
#define MS_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "wire.h"

#define MS_BUNDLE_MAGIC "MSBUNDLE"
#define MS_BUNDLE_VERSION 1
#define MS_BUNDLE_HEAD 40
#define MS_BUNDLE_CHECK 32
/* the most messages one bundle carries: a count beyond it is damage */
#define MS_BUNDLE_MESSAGES_MAX 1000000

typedef enum ms_bundle_kind
{
	MS_BUNDLE_TO_REPLICA = 1,	/* written by export on the server's side */
	MS_BUNDLE_FROM_REPLICA = 2	/* written by import on the replica's side */
} ms_bundle_kind;

/* A bundle verified whole: its head, and a walk of its messages. */
typedef struct ms_bundle
{
	ms_bundle_kind kind;
	uint8_t		replica[16];
	uint32_t	count;
	uint64_t	written;		/* microseconds since 1970 */
	const uint8_t *buf;
	size_t		len;
	size_t		pos;			/* the next message's length */
	uint32_t	next;			/* messages handed out */
} ms_bundle;

/*
 * ms_bundle_open: whether buf holds one whole bundle whose every message is
 * at most max_message bytes; false with the reason when it does not.
 * Nothing is copied: b points into buf.
 */
extern bool ms_bundle_open(ms_bundle *b, const uint8_t *buf, size_t len, size_t max_message,
						   char reason[MS_REASON_MAX]);

/*
 * ms_bundle_head_check: whether the first len bytes of a file (len at most
 * MS_BUNDLE_HEAD is enough) can begin a bundle: its magic, version, kind,
 * zero byte and count; false with the reason when they cannot, so that a
 * reader refuses a file that is no bundle before it reads on.
 */
extern bool ms_bundle_head_check(const uint8_t *buf, size_t len, char reason[MS_REASON_MAX]);

/* ms_bundle_next: the next message of an open bundle; false after the last */
extern bool ms_bundle_next(ms_bundle *b, const uint8_t **msg, size_t *len);

/* Writing one, in memory from the caller's allocator. */
typedef struct ms_bundle_writer
{
	ms_allocator *alloc;
	uint8_t    *buf;
	size_t		len;
	size_t		cap;
	uint32_t	count;
	bool		failed;			/* out of memory, or too many messages */
} ms_bundle_writer;

extern void ms_bundle_begin(ms_bundle_writer *w, ms_allocator *alloc, ms_bundle_kind kind,
							const uint8_t replica[16], uint64_t written);
/* ms_bundle_add: one message of at least one byte; false when out of memory */
extern bool ms_bundle_add(ms_bundle_writer *w, const uint8_t *msg, size_t len);
/*
 * ms_bundle_finish: the bundle, its count and check written, for the caller
 * to free with the allocator; NULL when a step failed (then freed).
 */
extern uint8_t *ms_bundle_finish(ms_bundle_writer *w, size_t *len);
extern void ms_bundle_discard(ms_bundle_writer *w);

#endif
