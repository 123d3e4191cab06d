/*-------------------------------------------------------------------------
 * subxact.c
 *	  Running a piece of work in a subtransaction of its own, so that a
 *	  permanent failure sets aside only that piece: a chunk of rows that do
 *	  not encode (load.c), an uploaded row a constraint refuses (file.c).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "subxact.h"
#include "transient.h"

bool
ms_try(void (*fn) (void *arg), void *arg, ErrorData **err)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		/* never let an error out with the subtransaction open */
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (ms_transient(e->sqlerrcode))
			ReThrowError(e);
		*err = e;
		ok = false;
	}
	PG_END_TRY();
	return ok;
}
