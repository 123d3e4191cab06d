/*-------------------------------------------------------------------------
 * magic_sync.h
 *	  What the modules of the server extension share.
 *-------------------------------------------------------------------------
 */
#ifndef MAGIC_SYNC_H
#define MAGIC_SYNC_H

#include "postgres.h"

#include "lib/stringinfo.h"

#include "alloc.h"

/* ms_pg_allocator: a protobuf-c allocator on palloc, in CurrentMemoryContext. */
extern ms_allocator *ms_pg_allocator(void);

/* ms_same_strings: whether two lists of strings are the same, in the same order */
extern bool ms_same_strings(char **a, int na, char **b, int nb);

/* ms_vformat: fmt formatted with args (left as they were: va_copy), palloc'd */
extern char *ms_vformat(const char *fmt, va_list args) pg_attribute_printf(1, 0);

/* ms_json_strings: n strings as a JSON array of strings (a NULL one as "") */
extern void ms_json_strings(StringInfo out, char *const *s, size_t n);

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
