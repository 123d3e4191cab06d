/*-------------------------------------------------------------------------
 * plan.h
 *	  What each replica is sent, and what it lets go of, this pass.
 *
 * The plan is worked out in the database, set by set, into temporary tables
 * of the relay's connection, and read a page at a time by what records it:
 *
 *   pg_temp.ms_pending(tab, key, note)      newest note of each changed row
 *   pg_temp.ms_blocked(tab, key)            rows that cannot go, and what points at them
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

/*
 * ms_plan_pending: read the notes not done, up to magic_sync.batch_notes,
 * into pg_temp.ms_notes_read and ms_pending; returns how many.
 */
extern int64 ms_plan_pending(ms_pass *p);

/* ms_plan_pending_rows: pg_temp.ms_pending again, from ms_notes_read. */
extern void ms_plan_pending_rows(ms_pass *p);

/*
 * ms_plan: plan for these replicas (uuid[]): those being provisioned
 * (provisioning, a subset) from scratch; the others around what changed.
 */
extern void ms_plan(ms_pass *p, ArrayType *replicas, ArrayType *provisioning);

#endif
