/*-------------------------------------------------------------------------
 * subxact.c
 *	  Running a piece of work in a subtransaction of its own, so that a
 *	  permanent failure sets aside only that piece: a chunk of rows that do
 *	  not encode (load.c), an uploaded row a constraint refuses (filing.c).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "subxact.h"
#include "transient.h"

ErrorData *
ms_subxact_undo(MemoryContext cxt, ResourceOwner owner)
{
	ErrorData  *e;

	MemoryContextSwitchTo(cxt);
	e = CopyErrorData();
	FlushErrorState();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return e;
}

static bool
attempt(void (*fn) (void *arg), void *arg, ErrorData **err, bool keep)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		if (keep)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *e = ms_subxact_undo(cxt, owner);

		if (ms_transient(e->sqlerrcode))
			ReThrowError(e);
		*err = e;
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

bool
ms_try(void (*fn) (void *arg), void *arg, ErrorData **err)
{
	return attempt(fn, arg, err, true);
}

bool
ms_trial(void (*fn) (void *arg), void *arg, ErrorData **err)
{
	return attempt(fn, arg, err, false);
}
