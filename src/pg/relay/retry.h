/*-------------------------------------------------------------------------
 * retry.h
 *	  Rows a replica refused, sent to that replica again when due
 *	  (sync.refused_rows; transport/refused.c records when).
 *-------------------------------------------------------------------------
 */
#ifndef MS_RETRY_H
#define MS_RETRY_H

#include "pass.h"
#include "utils/array.h"

/*
 * ms_retry_replicas: the replicas a pass without notes plans for: those
 * provisioning (may be NULL), those with refused rows due, and those with
 * held rows to replace.  NULL when none.
 */
extern ArrayType *ms_retry_replicas(ms_pass *p, ArrayType *provisioning);

/*
 * ms_plan_refused: into ms_send, the refused rows of these replicas that
 * are due, each for the replica that refused it alone; after the plan of
 * what changed, so a row a note sends goes once.  fault: relay.c's
 * (pass.h): fault->resent counts the rows it sends again; none is, but an
 * hour later, once fault->resend_held.  tables: the pass's (ms_pass_catalog).
 * Returns false when it looked and found none due: it wrote nothing.
 */
extern bool ms_plan_refused(ms_pass *p, ArrayType *replicas, ms_pass_fault *fault, List *tables);

/*
 * ms_plan_replaced: into ms_send, the held rows of these replicas marked
 * replace (a write of theirs refused, an edit dropped) that nothing of the
 * pass sends or takes yet, each for its replica alone; into ms_take those
 * the server has not, or never sent it.  After ms_plan_refused; fault and
 * tables as for it.  Returns false when it wrote nothing.
 */
extern bool ms_plan_replaced(ms_pass *p, ArrayType *replicas, ms_pass_fault *fault, List *tables);

#endif
