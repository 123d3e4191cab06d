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
} ms_recorded;

/*
 * ms_record: write the messages the plan (pg_temp.ms_send, ms_take) asks for,
 * for these replicas; provisioning ones get a snapshot (Begin ... EndSnapshot).
 * Returns the rows that cannot go (ms_bad *): when there are any, nothing it
 * wrote may be kept, and the plan runs again with them set aside.  plan:
 * what ms_plan returned; *did: what it wrote, when it returns NIL.
 */
extern List *ms_record(ms_pass *p, ArrayType *replicas, ArrayType *provisioning,
					   const ms_planned *plan, ms_recorded *did);

#endif
