/*-------------------------------------------------------------------------
 * subxact.h
 *	  One failure holds back only what it is about (docs/design.md 6.1).
 *-------------------------------------------------------------------------
 */
#ifndef MS_SUBXACT_H
#define MS_SUBXACT_H

#include "postgres.h"

#include "utils/resowner.h"

/*
 * ms_try: run fn(arg) in a subtransaction of its own.  True when it went
 * through; false, with the error in *err, when it failed for good (all it did
 * undone); a transient failure (transient.h) is undone and raised again, so
 * the whole of the work is retried.
 */
extern bool ms_try(void (*fn) (void *arg), void *arg, ErrorData **err);

/*
 * ms_trial: as ms_try, but whatever fn(arg) did is undone either way: it
 * only says whether the work would go through.
 */
extern bool ms_trial(void (*fn) (void *arg), void *arg, ErrorData **err);

/*
 * ms_subxact_undo: in the PG_CATCH of work begun with
 * BeginInternalSubTransaction: the error copied, the subtransaction rolled
 * back (never an error let out with it open), cxt and owner, as they were
 * before it began, current again; returns the error.
 */
extern ErrorData *ms_subxact_undo(MemoryContext cxt, ResourceOwner owner);

#endif
