/*-------------------------------------------------------------------------
 * observe.h
 *	  What became of the replicas since the last pass.
 *-------------------------------------------------------------------------
 */
#ifndef MS_OBSERVE_H
#define MS_OBSERVE_H

#include "utils/array.h"

#include "pass.h"

/*
 * ms_observe: forget replicas dropped or no longer live (nothing held,
 * nothing sent); mark those that became live or moved partition to be
 * provisioned; for every replica to provision, clear what it holds and drop
 * its outbox.  cat: the pass's catalog (relay.c); snapshots: MS_SNAPSHOTS_*
 * (pass.h), what the pass
 * provisions.  Returns the replicas to provision (uuid[]), or NULL; *did:
 * how many replicas it forgot, whether it left replicas to a snapshot pass
 * (MS_SNAPSHOTS_LEFT), and what the catalog has.
 */
typedef struct ms_observed
{
	int64		forgotten;
	bool		snapshots_left;
	bool		held_due;		/* sync.replicas has held_due (77_held_due.sql): held rows may be written after the pass */
	ms_pass_has has;			/* what else the catalog has, for the rest of the pass (ms_record_in) */
	/*
	 * the replicas a note may move, and how many there are in all, as relay.c
	 * asks them (live_replicas), when observe changed none and read them
	 * (live_read); live NULL when none is
	 */
	bool		live_read;
	ArrayType  *live;
	int64		replicas_all;
} ms_observed;

extern ArrayType *ms_observe(ms_pass *p, ms_pass_catalog *cat, int snapshots, ms_observed *did);

#endif
