/*-------------------------------------------------------------------------
 * magic_sync.h
 *	  What the modules of the server extension share.
 *-------------------------------------------------------------------------
 */
#ifndef MAGIC_SYNC_H
#define MAGIC_SYNC_H

#include "postgres.h"

#include "alloc.h"

/* ms_pg_allocator: a protobuf-c allocator on palloc, in CurrentMemoryContext. */
extern ms_allocator *ms_pg_allocator(void);

#endif
