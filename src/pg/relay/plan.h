/*-------------------------------------------------------------------------
 * plan.h
 *	  What each replica is sent, and what it lets go of, this pass.
 *
 * The plan is worked out in the database, set by set, into temporary tables
 * of the relay's connection, from the batch (batch.h), and read a page at a
 * time by what records it:
 *
 *   pg_temp.ms_blocked(tab, key)            rows that cannot go, and what points at them
 *                                           (temp.h's MS_NOT_BLOCKED reads it)
 *   pg_temp.ms_send(replica, tab, key, note) rows to send (note: newest the snapshot sees)
 *   pg_temp.ms_take(replica, tab, key)      rows to take back
 *-------------------------------------------------------------------------
 */
#ifndef MS_PLAN_H
#define MS_PLAN_H

#include "utils/array.h"

#include "pass.h"

/* ms_plan_prepare: create the plan's temporary tables if missing, empty them. */
extern void ms_plan_prepare(ms_pass *p);

/* what ms_plan planned, for record.c (and heldrows.c) to record */
/* what the planner is told (relay.c; park.c as relay.c told it; would_send.c) */
typedef struct ms_plan_in
{
	int64		replicas_all;	/* the replicas there are: fast.c's choice */
	bool		more;			/* the batch was full (batch.c): question.c closes it over the notes its rows touch */
	int64		floor;			/* the id the batch was read from (ms_batch_floor) */
	ms_pass_fault *fault;		/* relay.c's (pass.h); NULL: a dry run */
	const ms_pass_catalog *cat; /* the pass's (a dry run: its tables alone) */
} ms_plan_in;

typedef struct ms_planned
{
	int64		snapshot_rows;	/* one replica provisioned: the rows the plan sends it; -1: count them */
	bool	   *whole;			/* by table id: sent whole to the replicas provisioned, read once; or NULL */
	int64		whole_rows;		/* the rows of those tables each of them is sent; */
	bool		whole_later;	/* or they are large, and counted as record.c reads them (plan.c) */
	int64		planned;		/* rows of the larger of ms_send and ms_take */
	int64		taken;			/* rows of ms_take */
	/* which kinds of rows ms_send has, for the held rows' writes (heldrows.c) */
	bool		fresh;			/* held by the replica in no version (fast.c) */
	bool		addressed;		/* held, its held row's address found by the plan */
	bool		unaddressed;	/* held, or maybe, its held row not looked up */
	bool		noted;			/* tables read whole, and pg_temp.ms_pending has rows: a held row of theirs looks up its note */
	bool		blocked;		/* pg_temp.ms_blocked has rows: none goes, nor grows a wanted set (load.c too) */
	int64		joined;			/* notes the batch took in as it was closed (question.c): read by the pass too */
} ms_planned;

/*
 * ms_plan: plan the batch for these replicas (uuid[]): those being
 * provisioned (provisioning, a subset) from scratch; the others around what
 * changed.  *out: what it planned beyond ms_send and ms_take.
 */
extern void ms_plan(ms_pass *p, ArrayType *replicas, ArrayType *provisioning, const ms_plan_in *in,
					ms_planned *out);

/*
 * ms_plan_dry: what ms_plan does for these replicas (uuid[]), none being
 * provisioned, of the batch's notes alone: nothing of the catalog written
 * (a quarantined row the batch changed is left out of what is blocked,
 * not taken out of sync.quarantine); rows refused, due again, not added.
 */
extern void ms_plan_dry(ms_pass *p, ArrayType *replicas, const ms_plan_in *in);

/*
 * ms_whole_filter: " WHERE the row t (of table t) is not blocked", or ""
 * when no row is: what a read of a table sent whole (ms_planned) leaves out.
 */
struct ms_table;
extern char *ms_whole_filter(struct ms_table *t, bool blocked);

#endif
