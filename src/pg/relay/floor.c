/*-------------------------------------------------------------------------
 * floor.c
 *	  The relay worker's floor under the notes it reads (floor.h).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_sequence.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/acl.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "floor.h"

/* a quiet pass reads from the first note at most this often */
#define FROM_FIRST_EVERY_MS (60 * 1000)

/*
 * note_seq: sync.note_seq, when it numbers notes one by one and in order,
 * one backend at a time (no cache: a value drawn is the last value at once;
 * no cycle, going up) and the worker may read it; else InvalidOid.
 */
static Oid
note_seq(void)
{
	Oid			seq = get_relname_relid("note_seq", get_namespace_oid("sync", false));
	HeapTuple	tup;
	bool		in_order;

	if (!OidIsValid(seq) || pg_class_aclcheck(seq, GetUserId(), ACL_SELECT | ACL_USAGE) != ACLCHECK_OK)
		return InvalidOid;
	tup = SearchSysCache1(SEQRELID, ObjectIdGetDatum(seq));
	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	in_order = ((Form_pg_sequence) GETSTRUCT(tup))->seqcache == 1 &&
		!((Form_pg_sequence) GETSTRUCT(tup))->seqcycle &&
		((Form_pg_sequence) GETSTRUCT(tup))->seqincrement > 0;
	ReleaseSysCache(tup);
	return in_order ? seq : InvalidOid;
}

/* the last value the sequence gave, read from its page (no snapshot); 0 before its first */
int64
ms_seq_last_value(Oid seq)
{
	LOCAL_FCINFO(fcinfo, 1);
	Datum		d;

	InitFunctionCallInfoData(*fcinfo, NULL, 1, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = ObjectIdGetDatum(seq);
	fcinfo->args[0].isnull = false;
	d = pg_sequence_last_value(fcinfo);
	return fcinfo->isnull ? 0 : DatumGetInt64(d);
}

static void
forget_candidate(ms_floor *f)
{
	if (f->running != NULL)
		pfree(f->running);
	f->running = NULL;
	f->nrunning = 0;
}

/* whether every transaction of the candidate ended: those that did are let go */
static bool
candidate_settled(ms_floor *f)
{
	int			left = 0;

	for (int i = 0; i < f->nrunning; i++)
		if (!VirtualXactLock(f->running[i], false))
			f->running[left++] = f->running[i];
	f->nrunning = left;
	return left == 0;
}

void
ms_floor_before_snapshot(ms_floor *f, bool quiet)
{
	Oid			seq = note_seq();
	int64		last = OidIsValid(seq) ? ms_seq_last_value(seq) : 0;

	/* numbered otherwise than the floor assumes, or anew: nothing is known */
	if (!OidIsValid(seq) || seq != f->seq || last < f->candidate || last < f->settled)
	{
		forget_candidate(f);
		f->floor = f->settled = f->candidate = 0;
		f->seq = seq;
	}
	if (f->running != NULL && candidate_settled(f))
	{
		f->settled = Max(f->settled, f->candidate);
		forget_candidate(f);
	}
	if (OidIsValid(seq) && f->running == NULL)
	{
		/* the value first, then who runs: whoever drew up to it runs still, or has ended */
		VirtualTransactionId *running;
		int			n;

		f->candidate = last;
		running = GetCurrentVirtualXIDs(InvalidTransactionId, false, false, PROC_IN_VACUUM, &n);
		if (n == 0)
			/* nobody else: the snapshot about to be taken sees every note up to it */
			f->settled = Max(f->settled, last);
		else
		{
			f->running = MemoryContextAlloc(TopMemoryContext, sizeof(VirtualTransactionId) * n);
			memcpy(f->running, running, sizeof(VirtualTransactionId) * n);
			f->nrunning = n;
		}
		pfree(running);
	}
	if (quiet)
	{
		TimestampTz now = GetCurrentTimestamp();

		if (f->from_first_at == 0 || TimestampDifferenceExceeds(f->from_first_at, now, FROM_FIRST_EVERY_MS))
		{
			f->floor = 0;
			f->from_first_at = now;
		}
	}
	f->next = f->floor;
}

void
ms_floor_committed(ms_floor *f)
{
	f->floor = Max(f->floor, f->next);
}
