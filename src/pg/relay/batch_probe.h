/*-------------------------------------------------------------------------
 * batch_probe.h
 *	  The batch's notes read by an index probe, in C (batch.c's read).
 *
 * ms_batch_probe: the notes not done that x's snapshot sees, from the id
 * `from` up, oldest first, up to `limit` (< 0: all of them), build 1 or
 * older and not parked, as batch.c's statement reads them; with `write`,
 * copied into pg_temp.ms_notes_read and their rows into pg_temp.ms_pending
 * (both emptied by the caller), as that statement writes them.  Returns
 * false, having read nothing, when the catalog has no notes_pending index
 * (the statement reads them then).  *out: what the statement returns.
 *
 * ms_batch_probe_compare: magic_sync.full_plan: the batch the statement
 * wrote (ms_notes_read, ms_pending) against what a probe without `write`
 * found; a difference fails the pass (tests: sql/30_relay_batch.sql,
 * tests/e2e/fast.py).
 *-------------------------------------------------------------------------
 */
#ifndef MS_BATCH_PROBE_H
#define MS_BATCH_PROBE_H

#include "pass.h"

typedef struct ms_batch_counts
{
	int64		notes;			/* notes read */
	int64		last;			/* the newest one's id (0: none) */
	int64		rows;			/* rows of ms_pending */
	int64		members;		/* notes of a group member (source 'm', a key) */
} ms_batch_counts;

typedef struct ms_batch_probed ms_batch_probed;

extern bool ms_batch_probe(ms_executor *x, int64 from, int64 limit, bool write,
						   ms_batch_counts *out, ms_batch_probed **probed);
extern void ms_batch_probe_compare(ms_executor *x, const ms_batch_probed *probed, const ms_batch_counts *stmt);

#endif
