/*-------------------------------------------------------------------------
 * park.h
 *	  A permanent failure of a pass, narrowed down to the notes it is about
 *	  and set aside (docs/design.md 6.3): parked notes, quarantined rows.
 *-------------------------------------------------------------------------
 */
#ifndef MS_PARK_H
#define MS_PARK_H

#include "utils/array.h"

#include "pass.h"

/*
 * ms_park: the plan of the notes read (pg_temp.ms_notes_read) for these
 * replicas failed for good.  Finds the notes it fails on, parks them
 * (sync.notes.parked), quarantines their rows, and leaves the others in
 * ms_notes_read; or, when it fails without any note, the snapshots that fail
 * alone, which it sets aside and leaves out of *replicas and *provisioning.
 * True when it set anything aside; false when the failure is about neither,
 * and nothing is changed.  in, rin: what the pass told the planner and the
 * recording (the fault they share is as it was when it returns).  *nparked:
 * the notes it parked.
 */
struct ms_plan_in;
struct ms_record_in;
extern bool ms_park(ms_pass *p, ArrayType **replicas, ArrayType **provisioning, const struct ms_plan_in *in,
					const struct ms_record_in *rin, int64 *nparked);

#endif
