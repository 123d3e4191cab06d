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

/*
 * ms_plan: plan the batch for these replicas (uuid[]): those being
 * provisioned (provisioning, a subset) from scratch; the others around what
 * changed.
 */
extern void ms_plan(ms_pass *p, ArrayType *replicas, ArrayType *provisioning);

/*
 * ms_plan_dry: what ms_plan does for these replicas (uuid[]), none being
 * provisioned, of the batch's notes alone: nothing of the catalog written
 * (a quarantined row the batch changed is left out of what is blocked,
 * not taken out of sync.quarantine); rows refused, due again, not added.
 */
extern void ms_plan_dry(ms_pass *p, ArrayType *replicas);

/*
 * ms_whole_filter: " WHERE the row t (of table t) is not blocked", or ""
 * when no row is: what a read of a table sent whole (p->whole) leaves out.
 */
struct ms_table;
extern char *ms_whole_filter(ms_pass *p, struct ms_table *t);

#endif
