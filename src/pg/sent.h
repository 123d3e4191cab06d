/*-------------------------------------------------------------------------
 * sent.h
 *	  What each replica's pulls returned last, in shared memory (sent.c).
 *-------------------------------------------------------------------------
 */
#ifndef MS_SENT_H
#define MS_SENT_H

#include "postgres.h"

#include "utils/uuid.h"

/* ms_sent_preload: at preload, the table's shared memory requested. */
extern void ms_sent_preload(void);

/*
 * ms_sent_last: the last message a pull returned to the replica (*through)
 * and the key of its body (*body), from this database's sync.outbox (its oid), on this server since it started; false
 * when it does not know (not preloaded, never pulled, or forgotten).
 */
extern bool ms_sent_last(const pg_uuid_t *replica, Oid outbox, int64 *through, int64 *body);

/*
 * ms_sent_record: a pull returned the replica messages through `through`,
 * whose body is `body`; forget: what the table said names another message
 * (the replica was added again and numbers anew), replaced even by a lower number.
 */
extern void ms_sent_record(const pg_uuid_t *replica, Oid outbox, int64 through, int64 body, bool forget);

#endif							/* MS_SENT_H */
