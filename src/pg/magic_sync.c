/*-------------------------------------------------------------------------
 * magic_sync.c
 *	  The server extension's module: its magic, its settings, its parse
 *	  analysis hook (owner.h) and worker at load, and the allocator it lends to src/shared.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "claim.h"
#include "owner.h"
#include "settings.h"
#include "wake.h"
#include "worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	ms_settings_init();
	ms_owner_init();
	if (process_shared_preload_libraries_in_progress)
	{
		ms_wake_preload();
		ms_alarm_preload();
		ms_worker_register_static();
	}
}

static void *
pg_alloc(void *data, size_t size)
{
	(void) data;
	/* protobuf-c may ask for large arrays: decoding is bounded by our callers */
	return MemoryContextAllocHuge(CurrentMemoryContext, size == 0 ? 1 : size);
}

static void
pg_free(void *data, void *pointer)
{
	(void) data;
	if (pointer != NULL)
		pfree(pointer);
}

static ms_allocator pg_allocator = {pg_alloc, pg_free, NULL};

ms_allocator *
ms_pg_allocator(void)
{
	return &pg_allocator;
}
