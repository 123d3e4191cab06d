/*-------------------------------------------------------------------------
 * wake.c
 *	  Waking the relay when notes commit; where its last pass's commit ends.
 *
 * A write is relayed as soon as the transaction that noted it commits, not
 * a naptime later, and without a NOTIFY per transaction (which would take
 * the database's notify lock at every commit).  The library, preloaded,
 * requests a small array in shared memory: one slot per relay worker, the
 * database it relays in and its PGPROC number.  The noting trigger marks its
 * transaction at the first note (ms_wake_at_commit); a transaction callback
 * then sets the worker's latch at XACT_EVENT_COMMIT, once the commit is
 * visible to the snapshot the worker's next pass takes.  Setting a latch
 * already set costs a read: commits that come while a pass runs make one
 * pass after it, however many they are.
 *
 * The same slot says where the WAL of the worker's last pass that wrote
 * messages ends, and the last message number drawn before its commit: its
 * passes commit without waiting for their flush, and sync.pull flushes up
 * to there, not past WAL other sessions are still writing, before it
 * returns one of them (transport/pull.c).  Passes commit one at a time,
 * and numbers are drawn in order: a message numbered at or below it was
 * written by that pass or one before.
 *
 * And it holds WAIT_BUCKETS condition variables, a waiting pull's
 * (transport/pull_wait.c): a replica's is the bucket of its database and
 * uuid.  A transaction that wrote messages for a replica (a relay pass)
 * marks its bucket (ms_wake_replica_at_commit), and the same callback
 * broadcasts it at XACT_EVENT_COMMIT, once the messages are visible and
 * before the pass's NOTIFY goes out.  Replicas that share a bucket wake each
 * other for nothing: each looks again, and sleeps on.
 *
 * Readers take no lock: a slot's fields are atomics, and a latch set on a
 * process that reused a departed worker's PGPROC only wakes it for nothing.
 * Without the shared memory (the library loaded by a backend, the relay
 * started with sync.relay_start() on a server that does not preload it),
 * nothing is woken: the worker runs its passes every magic_sync.naptime.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/proclist.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#include "wake.h"

#define WAKE_SLOTS 64			/* relay workers, one per database at most */
#define WAIT_BUCKETS 256		/* waiting pulls' condition variables */

typedef struct wake_slot
{
	pg_atomic_uint32 dboid;		/* InvalidOid: free */
	pg_atomic_uint32 procno;	/* the worker's PGPROC number */
	pg_atomic_uint64 committed;	/* where the commit of its last pass that wrote messages ends */
	pg_atomic_uint64 through;	/* the last message number drawn before it (0: none yet) */
	pg_atomic_uint32 wakes;		/* the times ms_wake_relay set its latch (ms_wake_count) */
} wake_slot;

typedef struct wake_shared
{
	slock_t		mutex;			/* taken by workers claiming or freeing a slot */
	wake_slot	slots[WAKE_SLOTS];
	ConditionVariable waits[WAIT_BUCKETS];
} wake_shared;

static wake_shared *shared = NULL;
static shmem_request_hook_type prev_request = NULL;
static shmem_startup_hook_type prev_startup = NULL;
static bool preloaded = false;

/* this backend's transaction noted something: wake the relay at its commit */
static bool wake_pending = false;
/* the worker's pass commits without a flush: its end said, and its flush begun, at its commit */
static bool flush_pending = false;
static int64 flush_through = 0;		/* the last message number drawn before it */
/* the buckets of the replicas this transaction wrote messages for: broadcast at its commit */
static uint64 waits_pending[WAIT_BUCKETS / 64];
static bool any_waits_pending = false;
static bool callback_registered = false;
static wake_slot *my_slot = NULL;

static void
wake_request(void)
{
	if (prev_request)
		prev_request();
	RequestAddinShmemSpace(MAXALIGN(sizeof(wake_shared)));
}

static void
wake_startup(void)
{
	bool		found;

	if (prev_startup)
		prev_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("magic_sync wake", sizeof(wake_shared), &found);
	if (!found)
	{
		SpinLockInit(&shared->mutex);
		for (int i = 0; i < WAKE_SLOTS; i++)
		{
			pg_atomic_init_u32(&shared->slots[i].dboid, InvalidOid);
			pg_atomic_init_u32(&shared->slots[i].procno, 0);
			pg_atomic_init_u64(&shared->slots[i].committed, 0);
			pg_atomic_init_u64(&shared->slots[i].through, 0);
			pg_atomic_init_u32(&shared->slots[i].wakes, 0);
		}
		for (int i = 0; i < WAIT_BUCKETS; i++)
			ConditionVariableInit(&shared->waits[i]);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
ms_wake_preload(void)
{
	preloaded = true;
	prev_request = shmem_request_hook;
	shmem_request_hook = wake_request;
	prev_startup = shmem_startup_hook;
	shmem_startup_hook = wake_startup;
}

bool
ms_wake_available(void)
{
	return preloaded && shared != NULL;
}

static void
wake_unregister(int code, Datum arg)
{
	(void) code;
	(void) arg;
	if (my_slot != NULL)
		pg_atomic_write_u32(&my_slot->dboid, InvalidOid);
	my_slot = NULL;
}

bool
ms_wake_register(void)
{
	wake_slot  *free_slot = NULL;

	if (!ms_wake_available())
		return false;
	SpinLockAcquire(&shared->mutex);
	for (int i = 0; i < WAKE_SLOTS; i++)
	{
		wake_slot  *s = &shared->slots[i];
		Oid			db = pg_atomic_read_u32(&s->dboid);

		/* one relay per database holds the lock; a slot of ours left by a crash is reused */
		if (db == MyDatabaseId || (db == InvalidOid && free_slot == NULL))
			free_slot = s;
		if (db == MyDatabaseId)
			break;
	}
	if (free_slot != NULL)
	{
		/* what a worker before it committed is unknown to this one: pulls flush as without */
		pg_atomic_write_u64(&free_slot->through, 0);
		/* ... before the database is: a pull there never reads another database's numbers */
		pg_write_barrier();
		pg_atomic_write_u32(&free_slot->procno, (uint32) MyProc->pgprocno);
		pg_atomic_write_u32(&free_slot->dboid, MyDatabaseId);
	}
	SpinLockRelease(&shared->mutex);
	if (free_slot == NULL)
		return false;
	my_slot = free_slot;
	before_shmem_exit(wake_unregister, (Datum) 0);
	return true;
}

/* slot_of: the slot of the worker of database dboid, or NULL (none, or no shared memory) */
static wake_slot *
slot_of(Oid dboid)
{
	if (!ms_wake_available())
		return NULL;
	for (int i = 0; i < WAKE_SLOTS; i++)
		if (pg_atomic_read_u32(&shared->slots[i].dboid) == dboid)
			return &shared->slots[i];
	return NULL;
}

bool
ms_wake_registered(Oid dboid)
{
	return slot_of(dboid) != NULL;
}

bool
ms_wake_relay(Oid dboid)
{
	wake_slot  *s = slot_of(dboid);
	uint32		procno;

	if (s == NULL)
		return false;
	procno = pg_atomic_read_u32(&s->procno);
	/* the worker's own notes (quarantined rows noted again) are in the pass writing them */
	if (MyProc != NULL && procno == (uint32) MyProc->pgprocno)
		return true;
	/* before the latch: a worker that sees the latch set sees the count moved (ms_wake_count) */
	pg_atomic_fetch_add_u32(&s->wakes, 1);
	if (procno < ProcGlobal->allProcCount)
		SetLatch(&ProcGlobal->allProcs[procno].procLatch);
	return true;
}

bool
ms_wake_count(uint32 *count)
{
	*count = 0;
	if (my_slot == NULL)
		return false;
	pg_read_barrier();
	*count = pg_atomic_read_u32(&my_slot->wakes);
	return true;
}

void
ms_wake_passed(XLogRecPtr end, int64 through)
{
	if (my_slot == NULL)
		return;
	/* the end first: a reader that sees the number sees this end or a later one */
	pg_atomic_write_u64(&my_slot->committed, end);
	pg_write_barrier();
	pg_atomic_write_u64(&my_slot->through, (uint64) through);
}

bool
ms_wake_committed_by(int64 number, XLogRecPtr *end)
{
	if (!ms_wake_available())
		return false;
	for (int i = 0; i < WAKE_SLOTS; i++)
	{
		wake_slot  *s = &shared->slots[i];

		if (pg_atomic_read_u32(&s->dboid) == MyDatabaseId)
		{
			uint64		through;

			pg_read_barrier();
			through = pg_atomic_read_u64(&s->through);
			pg_read_barrier();
			if (through == 0 || (uint64) number > through)
				return false;
			*end = pg_atomic_read_u64(&s->committed);
			/* the slot still this database's: not freed and taken by another's worker meanwhile */
			pg_read_barrier();
			return pg_atomic_read_u32(&s->dboid) == MyDatabaseId;
		}
	}
	return false;
}

/* bucket: a replica's condition variable, by its database and uuid (FNV-1a) */
static int
bucket(Oid dboid, const pg_uuid_t *replica)
{
	uint32		h = 2166136261u ^ (uint32) dboid;

	for (int i = 0; i < UUID_LEN; i++)
		h = (h ^ replica->data[i]) * 16777619u;
	return (int) (h % WAIT_BUCKETS);
}

ConditionVariable *
ms_wake_wait_of(const pg_uuid_t *replica)
{
	if (!ms_wake_available())
		return NULL;
	return &shared->waits[bucket(MyDatabaseId, replica)];
}

/*
 * broadcast_waits: wakes the pulls waiting in the buckets this transaction
 * marked; whether one was waiting there (a pull that comes to wait just
 * after looks at the outbox first, and finds what this commit made visible)
 */
static bool
broadcast_waits(void)
{
	bool		waited = false;

	if (!any_waits_pending)
		return false;
	any_waits_pending = false;
	for (int w = 0; w < WAIT_BUCKETS / 64; w++)
		for (int b = 0; waits_pending[w] != 0 && b < 64; b++)
			if (waits_pending[w] & (UINT64CONST(1) << b))
			{
				ConditionVariable *cv = &shared->waits[w * 64 + b];

				waits_pending[w] &= ~(UINT64CONST(1) << b);
				SpinLockAcquire(&cv->mutex);
				waited |= !proclist_is_empty(&cv->wakeup);
				SpinLockRelease(&cv->mutex);
				ConditionVariableBroadcast(cv);
			}
	return waited;
}

static void
wake_xact(XactEvent event, void *arg)
{
	(void) arg;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			if (flush_pending && flush_through > 0)
			{
				/*
				 * where the pass ends, before its pulls wake: one woken flushes
				 * up to there, not up to all the WAL inserted by then, which
				 * a worker that lost its CPU to the woken pull said too late
				 */
				ms_wake_passed(XactLastCommitEnd, flush_through);
			}
			/* first: the waiting pulls wake before this process flushes and sends the NOTIFY */
			if (broadcast_waits() && flush_pending)
			{
				flush_pending = false;

				/*
				 * A pull was held: it answers once the pass is flushed
				 * (transport/pull.c), and it has ~1 ms of its own work
				 * before it asks.  This process begins the flush now, through
				 * the commit record, while that pull works: after the NOTIFY
				 * and the commit's end it began 0.3-1.6 ms later (the woken
				 * pull took this process's CPU), and the pull, come to it
				 * first, flushed itself.  The WAL writer is not woken for it:
				 * it writes whole pages only, and flushes at most once a
				 * wal_writer_delay, and its flush ahead of this one made two
				 * in a row (bench/hops.py's traces, d486e18).  The NOTIFY
				 * goes out after: agents without a held pull ask only then.
				 */
				XLogFlush(XactLastCommitEnd);
			}
			if (flush_pending)
			{
				flush_pending = false;

				/*
				 * No pull held: the NOTIFY goes out at once, and the WAL
				 * writer begins the flush beside it, rather than once this
				 * process gets the CPU back.  The commit's own nudge
				 * (XLogSetAsyncXactLSN) comes only when a whole page waits
				 * or the writer sleeps.
				 */
				if (ProcGlobal->walwriterLatch != NULL)
					SetLatch(ProcGlobal->walwriterLatch);
			}
			if (wake_pending)
			{
				wake_pending = false;
				(void) ms_wake_relay(MyDatabaseId);
			}
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			/* a prepared transaction commits elsewhere: that pass waits for the naptime */
			wake_pending = false;
			flush_pending = false;
			any_waits_pending = false;
			memset(waits_pending, 0, sizeof waits_pending);
			break;
		default:
			break;
	}
}

static void
register_callback(void)
{
	if (!callback_registered)
	{
		RegisterXactCallback(wake_xact, NULL);
		callback_registered = true;
	}
}

void
ms_wake_at_commit(void)
{
	if (wake_pending || !ms_wake_available())
		return;
	register_callback();
	wake_pending = true;
}

void
ms_wake_flush_at_commit(int64 through)
{
	register_callback();
	flush_pending = true;
	flush_through = through;
}

void
ms_wake_replica_at_commit(const pg_uuid_t *replica)
{
	int			b;

	if (!ms_wake_available())
		return;
	register_callback();
	b = bucket(MyDatabaseId, replica);
	waits_pending[b / 64] |= UINT64CONST(1) << (b % 64);
	any_waits_pending = true;
}
