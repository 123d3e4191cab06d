/*-------------------------------------------------------------------------
 * claim.h
 *	  What a replica says it applied, and what of it the server believes
 *	  (docs/design.md 4.8).
 *
 * A replica's word is a claim: the number sync.pull is asked to pull after,
 * the last message an upload says it applied, with its seal and the
 * generation the replica follows.  A claim may change that replica's own
 * state (it is provisioned again), never a shared sequence beyond a bound,
 * never the epoch, never another replica.  One the server cannot believe is
 * refused with an error, and recorded on that replica alone
 * (sync.refused_claims, its last_error), in a transaction of its own, since
 * the refused one rolls back (alarm.c).
 *-------------------------------------------------------------------------
 */
#ifndef MS_CLAIM_H
#define MS_CLAIM_H

#include "postgres.h"

#include "utils/uuid.h"

#include "epoch.h"
#include "sync.pb-c.h"

/*
 * How far beyond the current value of sync.message_seq a claim with a seal
 * that verifies may move it: history a server lost is far shorter; a
 * leaked secret moves it no further.
 */
#define MS_CLAIM_REACH (INT64CONST(1) << 31)

/* The call a claim came through. */
typedef enum ms_claim_call
{
	MS_CLAIM_PULL,				/* sync.pull's `after` (and `applied`) */
	MS_CLAIM_FILE				/* sync.file: an upload's acknowledgement */
} ms_claim_call;

/* Why a claim is refused. */
typedef enum ms_claim_refusal
{
	MS_CLAIM_NO_SEAL,			/* beyond what the server wrote for it, with no seal */
	MS_CLAIM_BAD_SEAL,			/* with a seal this server never made */
	MS_CLAIM_OUT_OF_REACH,		/* sealed, but further than MS_CLAIM_REACH beyond the sequence */
	MS_CLAIM_SUPERSEDED			/* it follows a newer generation of this epoch: an old primary */
} ms_claim_refusal;

/* What a claim's seal says of it. */
typedef enum ms_claim_seal
{
	MS_SEAL_UNKNOWN_EPOCH,		/* of an epoch this server never had: nothing to check it with */
	MS_SEAL_FORGED,				/* of a known epoch, and not one the server made */
	MS_SEAL_PAST_EPOCH,			/* made by this server, in an epoch that ended */
	MS_SEAL_CURRENT				/* made by this server, in the current epoch */
} ms_claim_seal;

/* ms_claim_check: what the seal of a (a message `number` of replica) says.  SPI connected. */
extern ms_claim_seal ms_claim_check(const pg_uuid_t *replica, const Sync__Applied *a, int64 number);

/*
 * ms_claim_believe: message `number` of the current epoch, sealed by this
 * server for the replica, is beyond its record: the sequence moves past it,
 * so what is written next is numbered beyond anything the replica applied,
 * but never further than MS_CLAIM_REACH beyond where it is (refused then).
 */
extern void ms_claim_believe(const pg_uuid_t *replica, ms_claim_call call, int64 number);

/*
 * ms_claim_superseded: refuse a claim of epoch e's messages in a generation
 * newer than the server's own (this server is an old primary that still
 * runs); returns when it is not.
 */
extern void ms_claim_superseded(const pg_uuid_t *replica, ms_claim_call call, const ms_epoch *e,
								const Sync__Applied *a, int64 number);

/*
 * ms_claim_refuse: record the refusal on the replica (alarm.c), then raise
 * it: SQLSTATE 22023 (a number or seal not believed) or 55000 (this server
 * was superseded), with a detail and a hint.  `a` and `b` are the numbers
 * its reason names.
 */
extern void ms_claim_refuse(const pg_uuid_t *replica, ms_claim_call call, ms_claim_refusal why,
							int64 number, int64 a, int64 b) pg_attribute_noreturn();

/* ms_claim_text: the claim and its reason, as recorded and raised (palloc'd). */
extern void ms_claim_text(ms_claim_call call, ms_claim_refusal why, int64 number, int64 a, int64 b,
						  char **claim, char **reason);

/* ---- alarm.c ---- */

/*
 * ms_alarm: record a refused claim on the replica (sync.refused_claims, its
 * last_error) in a transaction of its own, in a background worker, so that
 * it stays when the caller's rolls back.  At most one a few seconds for the
 * same claim of the same replica; none on a standby.  One worker per
 * database records the last claim of each replica refused, and two at most
 * run on the server (alarm.c).
 */
extern void ms_alarm(const pg_uuid_t *replica, ms_claim_call call, ms_claim_refusal why,
					 int64 number, int64 a, int64 b);

/* ms_alarm_preload: at preload, the shared memory of the claims waiting to be recorded requested. */
extern void ms_alarm_preload(void);

#endif
