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

/*
 * MS_HEAD(r): the number of the last message written for the replica whose
 * sync.replicas row is r (an alias, in SQL): its last_number, or a newer
 * message in its outbox, or one it acknowledged since.  A worker's pass
 * copies its chains into sync.replicas only after its commit (relay/relay.c), so
 * whatever reads the chain of a replica to act on it reads this.
 */
#define MS_HEAD(r) \
	"GREATEST(" r ".last_number, " r ".acked_number, (SELECT pg_catalog.max(o_.number)" \
	" FROM sync.outbox o_ WHERE o_.replica OPERATOR(pg_catalog.=) " r ".id))"

/*
 * MS_LOCK_PASSES: taken by what must not run beside a pass (a rewind, a new
 * epoch): it waits for the pass in progress, and the next waits for it.
 */
#define MS_LOCK_PASSES "LOCK TABLE sync.replicas IN SHARE ROW EXCLUSIVE MODE"

#endif
