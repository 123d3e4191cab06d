/*-------------------------------------------------------------------------
 * recorder.h
 *	  What the recording of a plan shares between its files: the recorder,
 *	  its targets (one replica written to, and the message being filled for
 *	  it) and their segments.  record.c writes the messages, pack.c fills
 *	  them, heldrows.c records what they carry as held.
 *-------------------------------------------------------------------------
 */
#ifndef MS_RECORDER_H
#define MS_RECORDER_H

#include "postgres.h"

#include "common/sha2.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/array.h"
#include "utils/hsearch.h"
#include "utils/uuid.h"

#include "catalog.h"
#include "load.h"
#include "pass.h"
#include "plan.h"
#include "seal.h"
#include "signing.h"

/* room for a head: protocol, epoch, number, nonce, previous, its nonce, seal, replica, generation, clock; signature */
#define HEAD_MAX (160 + MS_SIGNATURE_FIELD_BYTES)
/* messages and segments written to the catalog in one statement */
#define WRITE_BATCH 256
#define OUTBOX_COLS 8
#define SEGMENT_COLS 7
/* the bodies new to the pass, written with them: hash, bytes, upserts, deletes */
#define BODY_COLS 4
/* and no more of their bytes in memory at once than this (a snapshot's messages are 256 kB each) */
#define BODY_BATCH_BYTES (1024 * 1024)
/* held rows of tables sent whole written in one statement */
#define HELD_BATCH 8192

/* A run of one table's upserts or deletes in one message. */
typedef struct segment
{
	int			tab;
	char		kind;			/* 'u' upserts, 'd' deletes */
	char	   *first;
	char	   *last;
	int			rows;			/* rows it carries */
	bool		whole;			/* of a table read whole: its keys are the target's whole_keys */
} segment;

/* A message's place in its replica's chain: drawn as it is written, or before (a Begin written last). */
typedef struct ms_place
{
	uint64		number;
	uint8		nonce[MS_NONCE_BYTES];
	uint64		previous;
	uint8		previous_nonce[MS_NONCE_BYTES];
	bool		has_previous_nonce;
	uint64		clock;
} ms_place;

/* One replica the pass writes to, and the message being filled for it. */
typedef struct target
{
	pg_uuid_t	id;				/* hash key */
	uint64		last_number;
	uint64		acked_number;	/* the last it acknowledged, as the pass sees it */
	uint8		last_nonce[MS_NONCE_BYTES];
	bool		has_last;
	bool		snapshot;		/* provisioned this pass */
	bool		begun;			/* its snapshot's first message is written */
	uint64		first_number;
	bool		written;		/* it has new messages */
	int64		snapshot_rows;	/* rows its snapshot carries */
	bool		begin_later;	/* its Begin, alone, is written last at begin_place (ms_write_begin) */
	ms_place	begin_place;
	int64		owed_messages;	/* written this pass, and their bytes: */
	int64		owed_bytes;		/* added to sync.replicas.owed_* */

	StringInfoData down;		/* Down's fields so far: Begin, complete Rows */
	StringInfoData rows;		/* the Rows being filled */
	int			rows_tab;
	char		rows_kind;
	char		last_kind;		/* of the last row appended to this message, or 0 */
	int			upserts;
	int			deletes;
	List	   *segments;
	segment    *seg;
	StringInfoData whole_keys;	/* the keys of its whole segments, in order, each ending in a NUL;
								 * no buffer (NULL) until a row of a table read whole comes */
} target;

typedef struct body_entry
{
	uint8		hash[PG_SHA256_DIGEST_LENGTH];
	int64		id;				/* 0: written by the pass's statements, its id not read back */
} body_entry;

typedef struct recorder
{
	ms_pass    *p;
	const struct ms_record_in *in;	/* what ms_record was told (record.h); NULL: writing held rows after the pass */
	const ms_planned *plan;		/* what ms_plan planned */
	bool		noted;			/* a held row of a table read whole looks up its note (ms_planned) */
	struct ms_recorded *did;	/* what it wrote (record.h), for ms_record's caller; NULL: not counted */
	HTAB	   *targets;
	HTAB	   *bodies;			/* bodies stored this pass, by hash */
	MemoryContext cxt;
	MemoryContext scratch;		/* one message's copies, reset after each */
	MemoryContext fill;			/* the messages being filled (target's down, rows, whole_keys) */
	ms_signer  *signer;			/* the installation's key (signing.h); NULL: the catalog has none yet */
	Size		fill_empty;		/* what it holds with every one of them empty */
	StringInfoData begin;		/* the packed Begin of a snapshot */
	StringInfoData key;			/* scratch: the wire Key of the current row */
	Oid			message_seq;	/* sync.message_seq: numbers drawn as nextval() draws them */
	SPIPlanPtr	store_batch;	/* the bodies to sync.bodies, the messages to sync.outbox,
								 * their segments to pg_temp.ms_segments */
	Oid			batch_types[OUTBOX_COLS + SEGMENT_COLS + BODY_COLS + 1];	/* its arguments' */
	uint64		segments;		/* rows of pg_temp.ms_segments */

	/*
	 * Messages and segments not yet written: a broadcast to many replicas is
	 * a few statements, not one per message.  Their values live in batch,
	 * reset after each write.
	 */
	MemoryContext batch;
	int			nmessages;
	int			nsegments;
	int			nbodies;
	Size		body_bytes;		/* of bodies_new */

	/*
	 * The held rows of the rows of tables read whole, as their messages are
	 * written: (replica, tab, key, number), HELD_BATCH at a time.
	 */
	MemoryContext held_cxt;
	int			nheld;
	uint64		held_whole;		/* written so far */
	struct ms_held_writer *held_writer; /* sync.held open for them (heldrows.c), once held_opened */
	bool		held_opened;
	int64		whole_read;		/* rows of tables read whole sent, each to every replica provisioned */
	pg_uuid_t  *provisioning;	/* the replicas provisioned, who get every row of those tables */
	int			nprovisioning;

	/*
	 * The buffers of the batches above, last: never read past their counts,
	 * so left as they are when a recorder is begun (RECORDER_CLEARED): 300
	 * kB zeroed a pass cost a one-row pass 1.5 % of its CPU and its caches.
	 */
	Datum		messages[OUTBOX_COLS][WRITE_BATCH];
	Datum		segs[SEGMENT_COLS][WRITE_BATCH];
	Datum		message_body_hash[WRITE_BATCH];	/* each message's body, by its hash */
	Datum		bodies_new[BODY_COLS][WRITE_BATCH];
	Datum		held[4][HELD_BATCH];	/* (replica, tab, key, number) */
} recorder;

/* what of a recorder is zeroed when it is begun: all but its buffers */
#define RECORDER_CLEARED offsetof(recorder, messages)

/* record.c */
extern Datum ms_batch_array(Datum *values, int n, Oid type);
extern void ms_write_batch(recorder *r);
extern bool ms_write_batch_held(recorder *r, bool has_carried);
extern target *ms_find_target(recorder *r, const pg_uuid_t *id);
extern void ms_write_message(recorder *r, target *tg, StringInfo body, bool snapshot_start,
							 int upserts, int deletes);
extern void ms_place_next(recorder *r, target *tg, ms_place *at);
extern void ms_write_placed(recorder *r, target *tg, StringInfo body, bool snapshot_start,
							int upserts, int deletes, const ms_place *at);

/* pack.c */
extern void ms_fill_init(MemoryContext cxt, StringInfo s);
extern void ms_flush(recorder *r, target *tg);
extern void ms_begin_first(recorder *r, target *tg);
extern void ms_write_begin(recorder *r, target *tg);
extern void ms_bound_fill(recorder *r, const pg_uuid_t *ids, int n, char kind);
extern void ms_append(recorder *r, target *tg, ms_table *t, char kind, const char *key,
					  const char *bytes, int len, bool replace, bool whole);

/* heldrows.c */
extern void ms_write_held(recorder *r);
/* ms_held_written: the last of them written: sync.held closed (before the transaction ends) */
extern void ms_held_written(recorder *r);
extern void ms_held_of_whole(recorder *r, target *tg, int64 number);
extern void ms_record_held(ms_pass *p, bool has_carried, bool trim_carried, ArrayType *provisioning,
						   uint64 segments, uint64 whole, const ms_planned *plan, bool addressed_done);
/*
 * ms_held_addressed: the CTEs e, h and c of the statement that records the
 * held rows the plan addressed (ms_send.held) as sent again, from the
 * segments `segments` (as g) with `filter` on them; ms_held_addressed_check:
 * that it updated as many (count(e), count(h)) as it found.
 */
extern char *ms_held_addressed(const char *segments, const char *filter, bool has_carried);
extern void ms_held_addressed_check(int64 expected, int64 updated);

/*
 * ms_held_update_addressed: what ms_held_addressed's CTEs do, for the
 * segments r buffers (none provisioned), in C (held_update.c): *expected
 * and *updated as ms_held_addressed_check takes them.  False, having
 * written nothing, when the catalog's sync.held or sync.carried is not as
 * it writes them (the statement does it then).
 */
extern bool ms_held_update_addressed(recorder *r, bool has_carried, int64 *expected, int64 *updated);

/*
 * ms_write_batch_c: what ms_write_batch writes, in C (batch_write.c), for
 * the pass's only batch; false, having written nothing, when the catalog's
 * tables are not as it writes them, or the pass's role lacks a right (the
 * statement writes it then, and says so).
 */
extern bool ms_write_batch_c(recorder *r);

/* ms_batch_written: r's buffered batch written (by either): its buffers emptied */
extern void ms_batch_written(recorder *r);

#endif
