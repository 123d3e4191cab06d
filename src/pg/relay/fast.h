/*-------------------------------------------------------------------------
 * fast.h
 *	  Rows whose plan is trivial, planned without asking (fast.c).
 *
 *   pg_temp.ms_fast(tab, key, note)   the batch's rows on the fast path,
 *       with their newest note
 *-------------------------------------------------------------------------
 */
#ifndef MS_FAST_H
#define MS_FAST_H

#include "pass.h"

/* what ms_send holds, as plan.c counts it (ms_fast_send) */
typedef struct ms_sent_counts
{
	bool		valid;			/* counted: the rest says what ms_send holds */
	int64		rows;
	bool		fresh;			/* a row sent to a replica holding no version of it */
	bool		addressed;		/* a row whose held row the plan looked up (held) */
	bool		unaddressed;	/* a row not fresh whose held row was not looked up */
} ms_sent_counts;

/* what ms_fast_find needs to send the rows it finds at once (ms_fast_send's arguments) */
typedef struct ms_fast_ahead
{
	ArrayType  *around;
	int64		replicas_all;
	bool		planned;
	ms_sent_counts *counted;	/* may be NULL */
} ms_fast_ahead;

/*
 * ms_fast_find: the rows of the batch (ms_pending) on the fast path, into
 * pg_temp.ms_fast; returns how many.  ms_blocked, ms_released and
 * ms_unplanned are the plan's (plan.c); ms_inc_replicas the replicas planned
 * around the change (question.c).  ahead (may be NULL): the caller found
 * nothing else can be in question (no row blocked, no batch to close, no
 * group), so that when the rows found are every row of the batch
 * (ms_fast_only) the same statement sends them, as ms_fast_send would, and
 * *sent says so; else *sent is false and nothing was sent.
 */
extern uint64 ms_fast_find(ms_reader *p, const ms_fast_ahead *ahead, bool *sent);

/*
 * ms_fast_held_back: whether any of ms_blocked, ms_released and ms_unplanned
 * may hold rows, as the plan found them (plan.c, where they are emptied and
 * filled): when none does, ms_fast_find spares every row three looks.
 */
extern void ms_fast_held_back(bool any);

/*
 * ms_fast_only: whether the fast_rows rows ms_fast_find found are every row
 * the batch changed, with no row held back, released, or moved by a group
 * member's note (batch.c): then no other row changed.
 */
extern bool ms_fast_only(uint64 fast_rows);

/*
 * ms_fast_send: what the plan sends of the fast_rows rows ms_fast_find
 * found, into pg_temp.ms_send, for the replicas planned around them
 * (around, uuid[]: ids of sync.replicas) of replicas_all; it takes back none.  planned: ms_send may
 * hold rows planned before these (the caller knows, from what it wrote).
 * It marks each row sent a replacement where the replica's held row says
 * replace, as plan.c does every row of ms_send.  counted (may be NULL): when
 * ms_send held nothing before (not planned), what it holds now, counted as
 * plan.c counts it, by the same statement; else counted->valid is false.
 */
extern void ms_fast_send(ms_reader *p, uint64 fast_rows, ArrayType *around, int64 replicas_all,
						 bool planned, ms_sent_counts *counted);

#endif
