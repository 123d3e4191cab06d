/*-------------------------------------------------------------------------
 * relay.h
 *	  One relay pass: observe, record, publish.
 *-------------------------------------------------------------------------
 */
#ifndef MS_RELAY_H
#define MS_RELAY_H

#include "pass.h"

/* The advisory lock only one relay holds at a time (per database). */
#define MS_RELAY_LOCK_KEY1 0x6d616769	/* "magi" */
#define MS_RELAY_LOCK_KEY2 0x6373796e	/* "csyn" */

/*
 * ms_relay_try_lock: take the relay lock, for the session (the worker) or
 * for the transaction (sync.relay_pass); false when another relay holds it.
 */
extern bool ms_relay_try_lock(bool session);

/*
 * ms_relay_hold_replicas: what a pass takes on sync.replicas before its
 * snapshot.  whole: an ExclusiveLock, so that sync.file and sync.pull, which
 * write rows of sync.replicas, sync.held and sync.outbox a pass writes too,
 * wait for it (sync.relay_pass(), and a worker's pass after one that failed
 * to serialize).  Otherwise a RowExclusiveLock: filings and pulls go on (the
 * worker's pass writes no row of sync.replicas they write: its chains are
 * copied after its commit, ms_relay_bounds), and what must not run beside a
 * pass (MS_LOCK_PASSES: a rewind, a new epoch) waits for it.  A snapshot
 * pass (MS_SNAPSHOTS_ONLY) takes the rows of the replicas it provisions
 * instead (observe.c).
 */
extern void ms_relay_hold_replicas(bool whole);

/* what the caller asks of a pass */
struct ms_floor;
typedef struct ms_relay_in
{
	bool		bounds_later;	/* the caller checks the outbox bounds once the pass commits (ms_relay_bounds) */
	int			snapshots;		/* MS_SNAPSHOTS_*: whether this pass provisions replicas */
	struct ms_floor *floor;		/* the worker's floor under the notes it reads (floor.h); NULL by hand */
	bool		held_later;		/* the held rows of tables read whole may be left for after the pass (*later) */
} ms_relay_in;

/*
 * ms_relay_pass: one pass in the current transaction, which must hold the
 * relay lock and be REPEATABLE READ (pass.h says why; refused otherwise).
 * SPI is connected and finished inside.  p->exec.cxt is the memory the pass
 * allocates in; the rest of *p it sets up and fills with what it did.
 * *later (NULL unless in->held_later): the held rows it left for after its
 * commit (ms_relay_held), in p->exec.cxt.
 */
extern void ms_relay_pass(ms_pass *p, const ms_relay_in *in, ms_pass_later *later);

/*
 * ms_relay_bounds: the replicas the last pass of this session wrote to
 * whose outbox outgrew its bounds are provisioned again, with an alarm; in
 * the current transaction, SPI connected inside.  A pass does it itself
 * unless ms_relay_in.bounds_later (the worker, after the pass's commit: the
 * count of each outbox is then not between the commit and its messages).
 * Returns whether it marked any to be provisioned again.  later: what the
 * pass returned (the replicas it wrote to, when it handed them over rather
 * than keep them in pg_temp.ms_written), or NULL.
 */
extern bool ms_relay_bounds(ms_pass *p, const ms_pass_later *later);

/*
 * ms_relay_chains: the chains a worker's pass left uncopied (its relay died,
 * or the transaction after its commit failed: ms_relay_bounds) copied into
 * sync.replicas from the outbox, what each replica is owed counted again;
 * in the current transaction, SPI connected inside.  The worker runs it
 * before its first pass, and before a pass after such a failure.
 */
extern void ms_relay_chains(ms_pass *p);

/*
 * ms_relay_held: the held rows the last pass of this session left to write
 * once it committed (what ms_relay_pass returned in *later), in the current
 * transaction, under the lock a pass holds; SPI connected inside.
 */
extern void ms_relay_held(ms_pass *p, const ms_pass_later *later);

#endif
