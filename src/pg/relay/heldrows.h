/*-------------------------------------------------------------------------
 * heldrows.h
 *	  What a pass's messages carry, recorded as held (heldrows.c).
 *-------------------------------------------------------------------------
 */
#ifndef MS_HELDROWS_H
#define MS_HELDROWS_H

#include "postgres.h"

#include "pass.h"

/*
 * ms_held_open: sync.held opened for ms_held_insert, in the current memory
 * context, until ms_held_close (before the transaction ends); NULL when it
 * is not as this build knows it (the caller writes its rows by SQL then).
 * ms_held_insert: n rows (replica, tab, key, number) into it, with no note
 * and since = number, in the current transaction.  A row held already
 * raises the unique violation.
 */
typedef struct ms_held_writer ms_held_writer;

extern ms_held_writer *ms_held_open(void);
extern void ms_held_insert(ms_held_writer *w, int n, const Datum *replicas, const Datum *tabs,
						   const Datum *keys, const Datum *numbers);
extern void ms_held_close(ms_held_writer *w);

/*
 * ms_record_held_later: the held rows of tables read whole that a pass of
 * the worker kept in its memory (what ms_record returned in its
 * ms_recorded.later), written to sync.held once it committed; their
 * replicas' held_due cleared.
 */
extern void ms_record_held_later(ms_pass *p, const ms_pass_later *later);

/*
 * ms_held_later_pulled: whether the replicas pulled every message whose
 * held rows were kept for after the pass; *pulled, how many of them they
 * did.  Shared memory only: outside any transaction.
 */
extern bool ms_held_later_pulled(const ms_pass_later *later, int *pulled);
/* ms_held_later_messages: how many messages those held rows wait to see pulled */
extern int	ms_held_later_messages(const ms_pass_later *later);

#endif
