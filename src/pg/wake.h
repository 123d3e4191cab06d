/*-------------------------------------------------------------------------
 * wake.h
 *	  Waking the relay when notes commit (docs/design.md 4.1): shared memory
 *	  the library requests at preload, naming the relay worker of each
 *	  database by its PGPROC, and a transaction callback that sets that
 *	  worker's latch when a transaction that wrote notes commits; and where
 *	  the commit of its last pass ends, for sync.pull to flush up to.
 *-------------------------------------------------------------------------
 */
#ifndef MS_WAKE_H
#define MS_WAKE_H

#include "postgres.h"

#include "access/xlogdefs.h"
#include "storage/condition_variable.h"
#include "utils/uuid.h"

/* ms_wake_preload: from _PG_init while preloading: request the shared memory and its hooks. */
extern void ms_wake_preload(void);

/* ms_wake_available: whether the shared memory exists (the library was preloaded). */
extern bool ms_wake_available(void);

/*
 * ms_wake_register: the relay worker of MyDatabaseId says where its latch
 * is; taken back when the process exits.  False without the shared memory.
 */
extern bool ms_wake_register(void);

/*
 * ms_wake_at_commit: the noting trigger, at the first note of a
 * transaction: wake the relay when this transaction commits.  Cheap: a flag,
 * and a callback registered once per backend.
 */
extern void ms_wake_at_commit(void);

/*
 * ms_wake_flush_at_commit: the worker, before a pass that wrote messages
 * commits without waiting for its flush, with the last message number drawn
 * (`through`, 0: none): once the commit record is in, ms_wake_passed says
 * so before its pulls wake, and the flush sync.pull waits for begins before
 * the commit's NOTIFY: by this process when a pull was held, by the WAL
 * writer when none was.
 */
extern void ms_wake_flush_at_commit(int64 through);

/* ms_wake_registered: whether a relay worker of this database is registered. */
extern bool ms_wake_registered(Oid dboid);

/* ms_wake_relay: set the latch of the relay worker of this database now; false when none is registered. */
extern bool ms_wake_relay(Oid dboid);

/*
 * ms_wake_count: the worker: how many times ms_wake_relay woke it (*count),
 * told apart from what else sets a latch (a reload, an interrupt, a
 * condition variable's late signal); false when it is not registered.
 */
extern bool ms_wake_count(uint32 *count);

/*
 * ms_wake_passed: the worker, once a pass that wrote messages committed:
 * where its commit record ends, and the last message number drawn before.
 */
extern void ms_wake_passed(XLogRecPtr end, int64 through);

/*
 * ms_wake_committed_by: whether a message numbered `number` was written by
 * this database's worker at or before its last pass it said of, and then
 * (*end) where that pass's commit ends: flushed up to there, the message is
 * durable.  False when it cannot say (no worker, another's pass, not yet).
 */
extern bool ms_wake_committed_by(int64 number, XLogRecPtr *end);

/*
 * ms_wake_replica_at_commit: a transaction that wrote messages for the
 * replica: its waiting pulls (ms_wake_wait_of) are woken when it commits.
 * Nothing without the shared memory.
 */
extern void ms_wake_replica_at_commit(const pg_uuid_t *replica);

/*
 * ms_wake_wait_of: the condition variable a pull waiting for the replica's
 * next messages sleeps on (in this database); NULL without the shared memory.
 */
extern ConditionVariable *ms_wake_wait_of(const pg_uuid_t *replica);

#endif
