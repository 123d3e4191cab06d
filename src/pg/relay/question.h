/*-------------------------------------------------------------------------
 * question.h
 *	  Planning around what changed: the rows in question (docs/design.md 4.4).
 *-------------------------------------------------------------------------
 */
#ifndef MS_QUESTION_H
#define MS_QUESTION_H

#include "utils/array.h"

#include "fast.h"
#include "pass.h"

/*
 * ms_plan_question: for these replicas (uuid[]; none being provisioned),
 * what the batch (batch.h: ms_notes_read, ms_pending) and the rows that
 * cannot go (ms_blocked) change in what each holds: into pg_temp.ms_send and
 * ms_take, as comparing sync.wanted with sync.held would, around the change.
 * blocked: ms_blocked has rows (plan.c); more: the batch was full
 * (batch.c), and is closed over the notes its rows touch; replicas_all: the
 * replicas there are (fast.c's choice); floor: the notes below it are done
 * (the worker's floor, floor.h; 0 by hand); sent: ms_send may hold rows
 * already (a snapshot's, plan.c).  Returns how many notes the batch took
 * in so.  counted (may be NULL): when the batch's rows were all on the fast
 * path and ms_send held nothing before, what ms_send and ms_take hold now
 * (ms_take nothing; fast.h); else counted->valid is false.
 */
extern int64 ms_plan_question(ms_reader *p, ArrayType *replicas, bool blocked, bool more, int64 replicas_all,
							  int64 floor, bool sent, ms_sent_counts *counted);

#endif
