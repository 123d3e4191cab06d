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
 * ms_held_insert: n rows (replica, tab, key, number) into sync.held, with no
 * note and since = number, in the current transaction; false, writing
 * nothing, when sync.held is not as this build knows it (the caller writes
 * them by SQL then).  A row held already raises the unique violation.
 */
extern bool ms_held_insert(int n, const Datum *replicas, const Datum *tabs, const Datum *keys,
						   const Datum *numbers);

/*
 * ms_record_held_later: the held rows of tables read whole that a pass of
 * the worker kept in its memory (what ms_record returned in its
 * ms_recorded.later), written to sync.held once it committed; their
 * replicas' held_due cleared.
 */
extern void ms_record_held_later(ms_pass *p, const ms_pass_later *later);

#endif
