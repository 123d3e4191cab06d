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

/* ms_same_strings: whether two lists of strings are the same, in the same order */
extern bool ms_same_strings(char **a, int na, char **b, int nb);

/*
 * sync.let_go.taken of the rows a replica held when it was provisioned
 * again: taken back at its snapshot's end, whose number is not known when
 * they are let go of (relay/observe.c, transport/reach.c)
 */
#define MS_LET_GO_SNAPSHOT 9223372036854775807

#endif
