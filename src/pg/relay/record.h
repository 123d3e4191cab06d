/*-------------------------------------------------------------------------
 * record.h
 *	  Recording a plan: rows packed into each replica's messages, the
 *	  messages numbered, chained and sealed into its outbox, and what they
 *	  carry recorded as held, all in the pass's transaction.
 *-------------------------------------------------------------------------
 */
#ifndef MS_RECORD_H
#define MS_RECORD_H

#include "utils/array.h"

#include "pass.h"
#include "plan.h"

/* what ms_record wrote */
typedef struct ms_recorded
{
	int64		provisioned;	/* snapshots ended */
	int64		rows_sent;		/* rows upserted, once per replica */
	int64		rows_taken;		/* rows deleted, once per replica */
	int64		messages;
	ms_pass_later later;		/* the held rows kept for after the pass (ms_record_in.held_later) */
} ms_recorded;

/* what ms_record is told (relay.c; park.c as relay.c told it) */
typedef struct ms_record_in
{
	bool		bounds_later;	/* the caller checks the outbox bounds once the pass commits (ms_relay_bounds) */
	bool		held_later;		/* the held rows of tables read whole may be kept for after the pass (heldrows.c) */
	bool		chains_later;	/* the replicas written to may be handed back (ms_pass_later.written), not kept in ms_written */
	ms_pass_has has;			/* what the catalog has (ms_observed) */
	ms_pass_fault *fault;		/* relay.c's (pass.h): fault->whole_failed, when reading a table whole failed */
	const ms_pass_catalog *cat; /* the pass's catalog, and its schema changes (evolve.c) */
} ms_record_in;

/*
 * ms_record: write the messages the plan (pg_temp.ms_send, ms_take) asks for,
 * for these replicas; provisioning ones get a snapshot (Begin ... EndSnapshot).
 * Returns the rows that cannot go (ms_bad *): when there are any, nothing it
 * wrote may be kept, and the plan runs again with them set aside.  plan:
 * what ms_plan returned; *did: what it wrote, when it returns NIL, with
 * the held rows it left for after the pass (did->later: the caller writes
 * them once the pass committed, ms_record_held_later).
 */
extern List *ms_record(ms_pass *p, const ms_record_in *in, ArrayType *replicas, ArrayType *provisioning,
					   const ms_planned *plan, ms_recorded *did);

#endif
