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

/*
 * sync.let_go.taken of the rows a replica held when it was provisioned
 * again: taken back at its snapshot's end, whose number is not known when
 * they are let go of (relay/observe.c, transport/reach.c)
 */
#define MS_LET_GO_SNAPSHOT 9223372036854775807

#endif
