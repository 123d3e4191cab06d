/*-------------------------------------------------------------------------
 * wire.h
 *	  Decoding and checking the messages of sync.proto.
 *
 * Every byte string handed to us by the network is untrusted: decoding
 * refuses anything over the caller's bound and anything malformed, and says
 * why in a sentence.  A decoded message has passed ms_*_check: its byte
 * fields have their sizes, its strings are UTF-8, every upsert has its key.
 *
 * Messages to a replica are written as a head (fields 1 to 8 of ToReplica,
 * per replica) followed by a body (field 9, 10 or 11, stored once however
 * many replicas receive it).  A protobuf message is its fields one after the
 * other, so head || body is the message itself.
 *-------------------------------------------------------------------------
 */
#ifndef MS_WIRE_H
#define MS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "reason.h"
#include "sync.pb-c.h"

#define MS_PROTOCOL 1
/* Longest table or column name: schema.relname, each at most 63 bytes. */
#define MS_NAME_MAX 127
/* An Up's build (field 14): the replica library's, at most this many bytes. */
#define MS_BUILD_MAX 200

typedef enum ms_wire_status
{
	MS_WIRE_OK = 0,
	MS_WIRE_LATER_PROTOCOL,		/* well formed, from a later protocol: not ours to apply */
	MS_WIRE_MALFORMED,
	MS_WIRE_TOO_LARGE,
	MS_WIRE_NO_MEMORY
} ms_wire_status;

/*
 * ms_wire_within: the first check of every decoder: len within bound and
 * bytes to read; false, with the status (too large, malformed) and reason.
 */
extern bool ms_wire_within(const uint8_t *buf, size_t len, size_t bound, ms_wire_status *status,
						   char reason[MS_REASON_MAX]);

/*
 * ms_wire_scan: walk the top-level fields of a protobuf encoding; false, with
 * the reason, when a field is truncated or has no valid tag.
 */
extern bool ms_wire_scan(const uint8_t *buf, size_t len, char reason[MS_REASON_MAX]);

/*
 * ms_to_replica_decode: decode and check a message to a replica.  NULL, with
 * the status and reason, when it cannot be decoded.  A well-formed message of
 * a later protocol comes back unchecked with MS_WIRE_LATER_PROTOCOL, so the
 * caller can say which message it will not apply; the caller frees it.
 */
extern Sync__ToReplica *ms_to_replica_decode(const uint8_t *buf, size_t len, size_t bound,
											 ms_allocator *alloc,
											 ms_wire_status *status,
											 char reason[MS_REASON_MAX]);

/*
 * ms_to_replica_read: ms_to_replica_decode for a replica's apply, the same
 * checks, refusals and reasons, with a Down's Rows read by a walk of their
 * own rather than by protobuf-c: each upsert points into buf, which must
 * outlive the message.  The allocator is an arena's (frees nothing one by
 * one): what comes back is freed with it, never by
 * protobuf_c_message_free_unpacked.
 */
extern Sync__ToReplica *ms_to_replica_read(const uint8_t *buf, size_t len, size_t bound,
										   ms_allocator *arena,
										   ms_wire_status *status,
										   char reason[MS_REASON_MAX]);

/* ms_up_decode: decode and check an upload from a replica. */
extern Sync__Up *ms_up_decode(const uint8_t *buf, size_t len, size_t bound,
							  ms_allocator *alloc,
							  ms_wire_status *status,
							  char reason[MS_REASON_MAX]);

/*
 * ms_applied_decode: decode and check what a replica says it applied, on its
 * own (sync.pull's claim: an Applied as sync_applied() returns it, at most
 * MS_APPLIED_MAX bytes).  NULL, with the reason, when it cannot be decoded.
 */
#define MS_APPLIED_MAX 256
extern Sync__Applied *ms_applied_decode(const uint8_t *buf, size_t len, ms_allocator *alloc,
										char reason[MS_REASON_MAX]);

/* The checks decode runs, for messages built in memory. */
extern bool ms_to_replica_check(const Sync__ToReplica *m, char reason[MS_REASON_MAX]);
extern bool ms_up_check(const Sync__Up *m, char reason[MS_REASON_MAX]);

/*
 * A backlog entry's reasons for rows set aside (Backlog.aside): at most this
 * many, each reason at most MS_ASIDE_REASON_MAX bytes.
 */
#define MS_ASIDE_MAX 8
#define MS_ASIDE_REASON_MAX 500

/* Wish fates an upload may carry (a replica decides few wishes at a time). */
#define MS_WISH_FATES_MAX 4096

/* ms_wish_check: one wish of a Down: numbered, a setting's one-part key, a known apply. */
extern bool ms_wish_check(const Sync__Wish *w, char reason[MS_REASON_MAX]);
extern bool ms_applied_check(const Sync__Applied *a, char reason[MS_REASON_MAX]);
extern bool ms_table_check(const Sync__Table *t, char reason[MS_REASON_MAX]);
extern bool ms_rows_check(const Sync__Rows *r, char reason[MS_REASON_MAX]);

/*
 * The head of a message to a replica: everything but its body.  The
 * generation, when not 0, is packed after the replica (field 12), and the
 * clock, when not 0, after it (field 13).
 */
typedef struct ms_head
{
	uint32_t	protocol;
	const uint8_t *epoch;		/* MS_EPOCH_BYTES */
	uint64_t	number;
	const uint8_t *nonce;		/* MS_NONCE_BYTES, or NULL for a Filed */
	uint64_t	previous;
	const uint8_t *previous_nonce;	/* MS_NONCE_BYTES, or NULL when previous is 0 */
	const uint8_t *seal;		/* MS_SEAL_BYTES, or NULL for a Filed */
	const uint8_t *replica;		/* MS_REPLICA_BYTES */
	uint64_t	generation;		/* the server's lineage; 0 before it numbered them */
	uint64_t	clock;			/* the server's hybrid logical clock (hlc.h); 0: none */
} ms_head;

extern size_t ms_head_packed_size(const ms_head *h);
extern size_t ms_head_pack(const ms_head *h, uint8_t *out);

/*
 * The body of a message: exactly one of down, end or filed; its bytes are the
 * field with its tag and length, ready to be appended to a head.
 */
extern size_t ms_body_packed_size(Sync__Down *down, Sync__EndSnapshot *end, Sync__Filed *filed);
extern size_t ms_body_pack(Sync__Down *down, Sync__EndSnapshot *end, Sync__Filed *filed,
						   uint8_t *out);

/* ms_key_canonical_size / write: a wire Key's canonical bytes (key.h). */
extern size_t ms_wire_key_size(const Sync__Key *k);
extern size_t ms_wire_key_write(const Sync__Key *k, char *out);

#endif
