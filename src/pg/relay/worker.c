/*-------------------------------------------------------------------------
 * worker.c
 *	  The relay's background worker: the server's runner (docs/design.md 4).
 *
 * With shared_preload_libraries = 'magic_sync' and magic_sync.database set,
 * a launcher starts with the server and keeps the relay worker running in
 * that database, waiting quietly (it says so once) while it does not exist;
 * sync.relay_start() starts one in the current database without a restart.
 * The worker holds the relay lock for as long as it lives (a session
 * advisory lock) and runs a pass as soon as a transaction that wrote notes
 * commits (wake.c sets its latch), when woken by sync.wake(), and every
 * magic_sync.naptime otherwise, each in a REPEATABLE READ transaction of its
 * own, in a memory context reset every pass.  Commits that come during a
 * pass make one pass after it: under load, passes follow each other and
 * each takes every note committed since the last, the next one waiting
 * while commits keep coming (coalesce, at most magic_sync.coalesce), so that a
 * stream of commits, however short its passes, makes fewer, larger passes.
 * A transient failure (transient.h) is retried after a backoff that doubles
 * up to a minute; a permanent one is logged, and retried at the same pace,
 * since the fix it waits for is a deploy.  Its passes read
 * the notes from a floor it keeps (floor.h); one the naptime started reads
 * from the first, once a minute at most.  SIGHUP reloads the settings;
 * SIGTERM ends the pass and the worker (the transaction is rolled back:
 * nothing half-done is committed).
 *
 * Who it is: it connects as magic_sync.role (empty: the bootstrap
 * superuser) with search_path = pg_catalog, pg_temp, whatever the database
 * or the role set: its own SQL names everything it uses, and a database
 * owner's schema first in the path would otherwise have its operators run as
 * the worker.  A user's code it reaches -- an active view, a domain's check,
 * a trigger of a table the inbox files -- runs as that table's owner,
 * security-restricted (owner.h).
 *
 * States: idle (waiting on its latch) -> pass -> idle, or -> backoff -> pass.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/syncrep.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/inval.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "floor.h"
#include "heldrows.h"
#include "relay.h"
#include "settings.h"
#include "spi_check.h"
#include "transient.h"
#include "wake.h"
#include "worker.h"
#include "writer.h"

PG_FUNCTION_INFO_V1(ms_wake);
PG_FUNCTION_INFO_V1(ms_relay_start);

#define WORKER_TYPE "magic_sync relay"
#define LAUNCHER_TYPE "magic_sync launcher"
#define LAUNCHER_RECHECK_MS 5000
#define RELAY_RESTART_MS 10000
/* housekeeping after a pass: batches of at most this many rows, each its own transaction ... */
#define HOUSEKEEPING_BATCH 1000
/* ... for at most this long, unless nothing waits for a pass */
#define HOUSEKEEPING_MS 20
/* ... and no sooner than this after the last began, unless it left more to do */
#define HOUSEKEEPING_EVERY_MS 1000
#define BACKOFF_MAX_MS (60 * 1000)
/* commits arriving during a pass of part of a batch, or a slice after: the next waits at most magic_sync.coalesce ... */
/*
 * ... in slices of this long, or a tenth of magic_sync.coalesce if longer,
 * for as long as each slice saw a commit (coalesce): a stream is commits
 * less than a slice apart, and a longer wait takes in sparser ones
 */
#ifndef COALESCE_SLICE_MS
#define COALESCE_SLICE_MS 10
#endif
#define COALESCE_SLICE() Max(COALESCE_SLICE_MS, ms_coalesce / 10)
#define PINNED_SEARCH_PATH "pg_catalog, pg_temp"

static void
fill_worker(BackgroundWorker *w, Oid dboid, const char *dbname)
{
	memset(w, 0, sizeof(*w));
	w->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w->bgw_start_time = BgWorkerStart_RecoveryFinished;
	w->bgw_restart_time = 10;
	snprintf(w->bgw_library_name, BGW_MAXLEN, "magic_sync");
	snprintf(w->bgw_function_name, BGW_MAXLEN, "ms_worker_main");
	snprintf(w->bgw_type, BGW_MAXLEN, WORKER_TYPE);
	snprintf(w->bgw_name, BGW_MAXLEN, WORKER_TYPE " in database %u", dboid);
	/* the worker connects by name: as magic_sync.role when it starts */
	if (dbname != NULL)
		strlcpy(w->bgw_extra, dbname, BGW_EXTRALEN);
	w->bgw_main_arg = ObjectIdGetDatum(dboid);
}

void
ms_worker_register_static(void)
{
	BackgroundWorker w;

	if (ms_database == NULL || ms_database[0] == '\0')
		return;
	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	w.bgw_restart_time = 10;
	snprintf(w.bgw_library_name, BGW_MAXLEN, "magic_sync");
	snprintf(w.bgw_function_name, BGW_MAXLEN, "ms_launcher_main");
	snprintf(w.bgw_type, BGW_MAXLEN, LAUNCHER_TYPE);
	snprintf(w.bgw_name, BGW_MAXLEN, LAUNCHER_TYPE " for %s", ms_database);
	RegisterBackgroundWorker(&w);
}

/*
 * database_oid: the oid of the database of this name, or InvalidOid, read
 * from pg_database by a heap scan: a process connected to no database has
 * the shared catalogs only, not their indexes (as the autovacuum launcher
 * reads it).
 */
static Oid
database_oid(const char *name)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	ScanKeyData key;
	Oid			oid = InvalidOid;

	ScanKeyInit(&key, Anum_pg_database_datname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum(name));
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 1, &key);
	if ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
		oid = ((Form_pg_database) GETSTRUCT(tup))->oid;
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return oid;
}

/* the launcher's nap: between looks at pg_database, or after its relay ended */
static void
launcher_nap(long ms)
{
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);

	/* the whole time: the postmaster's notices of its workers set the latch too */
	for (;;)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until);

		if (left <= 0)
			return;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}

/*
 * ms_launcher_main: connected to no database, the launcher keeps a relay
 * worker running in magic_sync.database.  While that database does not
 * exist it says so once and looks again every few seconds: no FATAL every
 * restart.  It starts the worker there (not restarted by the postmaster),
 * waits for it to end, and after a pause starts it again, in the database of
 * that name then, which may have been dropped and created again meanwhile.
 */
void
ms_launcher_main(Datum arg)
{
	bool		said = false;

	(void) arg;
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname(LAUNCHER_TYPE);
	for (;;)
	{
		Oid			dboid;
		BackgroundWorker w;
		BackgroundWorkerHandle *handle;
		pid_t		pid;

		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		dboid = database_oid(ms_database);
		CommitTransactionCommand();
		if (!OidIsValid(dboid))
		{
			if (!said)
				ereport(LOG,
						(errmsg("magic_sync: database \"%s\" does not exist yet; the relay waits for it",
								ms_database),
						 errhint("CREATE DATABASE %s, then CREATE EXTENSION magic_sync in it; or set magic_sync.database.",
								 quote_identifier(ms_database))));
			said = true;
			launcher_nap(LAUNCHER_RECHECK_MS);
			continue;
		}
		/* a relay a launcher before this one started (it was ended alone) runs on */
		if (ms_wake_registered(dboid))
		{
			launcher_nap(LAUNCHER_RECHECK_MS);
			continue;
		}
		if (said)
			ereport(LOG, (errmsg("magic_sync: database \"%s\" exists now; the relay starts", ms_database)));
		said = false;
		fill_worker(&w, dboid, ms_database);
		w.bgw_restart_time = BGW_NEVER_RESTART;
		w.bgw_notify_pid = MyProcPid;
		if (!RegisterDynamicBackgroundWorker(&w, &handle))
		{
			ereport(LOG,
					(errmsg("magic_sync: could not start the relay worker in database \"%s\"", ms_database),
					 errhint("Raise max_worker_processes; the launcher tries again in %d s.",
							 LAUNCHER_RECHECK_MS / 1000)));
			launcher_nap(LAUNCHER_RECHECK_MS);
			continue;
		}
		if (WaitForBackgroundWorkerStartup(handle, &pid) == BGWH_STARTED)
			(void) WaitForBackgroundWorkerShutdown(handle);
		pfree(handle);
		/* as the postmaster restarts a worker that failed */
		launcher_nap(RELAY_RESTART_MS);
	}
}

/*
 * The outboxes the pass wrote to, against their bounds, in a transaction of
 * its own once the pass committed: the agents pull meanwhile, and a pass to
 * many replicas no longer waits on a count of each outbox (relay.c).
 * Returns whether it marked a replica to be provisioned again: the next pass
 * runs at once for it.
 */
static bool
outbox_bounds(MemoryContext pass_cxt, const ms_pass_later *later)
{
	ms_pass		b;
	bool		marked;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "magic_sync outbox bounds");
	/*
	 * It holds the rows of the replicas written to from the copy of their
	 * chains to its commit: a filing of one waits for no flush of it.  A
	 * crash may lose it; the next worker copies them again (chains_left).
	 */
	if (SyncRepStandbyNames == NULL || SyncRepStandbyNames[0] == '\0')
		(void) set_config_option("synchronous_commit", "off", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
	MemoryContextSwitchTo(pass_cxt);
	memset(&b, 0, sizeof b);
	b.exec.cxt = pass_cxt;
	marked = ms_relay_bounds(&b, later);
	PopActiveSnapshot();
	CommitTransactionCommand();
	return marked;
}

/*
 * last_message: the last number sync.message_seq gave, in the pass's
 * transaction: the pass's own last message, or a number a claim moved it to
 * since (transport/claim.c), which no later message is numbered at or below.
 */
static int64
last_message(void)
{
	static Oid	seq = InvalidOid;

	if (!OidIsValid(seq))
		seq = get_relname_relid("message_seq", get_namespace_oid("sync", false));
	return OidIsValid(seq) ? ms_seq_last_value(seq) : 0;
}

/*
 * step_begin / step_end: a step of the relay after a pass (its held rows,
 * its chains) in a transaction of its own, with an empty pass in the pass's
 * memory
 */
static void
step_begin(ms_pass *p, MemoryContext pass_cxt, const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
	MemoryContextSwitchTo(pass_cxt);
	memset(p, 0, sizeof *p);
	p->exec.cxt = pass_cxt;
}

static void
step_end(void)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * held_wait: the held rows wait, up to magic_sync.held_wait, until the
 * replicas pulled every message they are of, as long as the pulls move on
 * (none for magic_sync.held_pull_gap ends it, from the commit too).
 * Recorded meanwhile, they took the CPU the pull and the apply need: 1.7 s
 * of a 10^6-row snapshot, beside ~1 s of apply and 0.7 s of pulls on two
 * cores (bench/firstsync.py: the file held every row 0.65 s later).
 * Outside any transaction, holding no row: the replicas' filings are
 * refused meanwhile (held_due), other replicas file and pull as always,
 * and a worker that dies here leaves held_due set as one that dies in the
 * recording does.  No pass runs meanwhile (one would provision these
 * replicas again, observe.c), so the wait is bounded, and it yields to
 * work: a commit that wakes the worker during it (its latch set) ends it,
 * so that a stream of other replicas' changes waits for the recording only,
 * as before (a commit's wake only: the count of them, wake.c).  A wake from
 * before the wait (the pass's own, a commit during the pass) is kept for
 * the pass after, not taken for a new one.
 */
static void
held_wait(const ms_pass_later *later)
{
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz moved = start;
	int			pulled = -1;
	bool		woken;
	bool		counted;
	uint32		wakes;
	uint32		now_wakes;
	const char *why = NULL;

	if (ms_held_wait <= 0)
		return;
	woken = MyLatch->is_set;
	ResetLatch(MyLatch);
	counted = ms_wake_count(&wakes);
	pgstat_report_activity(STATE_RUNNING, "magic_sync held rows wait for the snapshot's pulls");
	for (;;)
	{
		int			now_pulled;
		TimestampTz now;

		/*
		 * Only a commit's wake ends the wait: a latch is set for more (a
		 * reload, an interrupt, a condition variable's late signal), which
		 * ended it mid-pull at times (tests/e2e/held_later.sh).  Without the
		 * shared memory, any.  The latch reset is set again after the wait,
		 * as a wake from before it is: it may be one counted before the
		 * wait began.  A wake between the look and the reset moved the count
		 * before its latch: seen by the second look.
		 */
		if (MyLatch->is_set)
		{
			if (!counted || (ms_wake_count(&now_wakes) && now_wakes != wakes))
			{
				why = "a commit woke the relay for a pass";
				break;
			}
			ResetLatch(MyLatch);
			woken = true;
			if (ms_wake_count(&now_wakes) && now_wakes != wakes)
			{
				why = "a commit woke the relay for a pass";
				break;
			}
			CHECK_FOR_INTERRUPTS();
			if (ConfigReloadPending)
			{
				ConfigReloadPending = false;
				ProcessConfigFile(PGC_SIGHUP);
			}
		}
		if (ms_held_later_pulled(later, &now_pulled))
			break;
		now = GetCurrentTimestamp();
		if (now_pulled != pulled)
		{
			pulled = now_pulled;
			moved = now;
		}
		if (TimestampDifferenceExceeds(start, now, ms_held_wait))
		{
			why = "magic_sync.held_wait passed";
			break;
		}
		if (TimestampDifferenceExceeds(moved, now, ms_held_pull_gap))
		{
			why = "no pull moved on for magic_sync.held_pull_gap";
			break;
		}
		/* a commit's wake (the latch) ends the wait, and is left for the pass after */
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 5, PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}
	/* recorded before the replicas pulled their snapshots (an offline device's is): why, for tuning */
	if (why != NULL)
		ereport(DEBUG1,
				(errmsg("magic_sync: the held rows of a snapshot are recorded before it was pulled: %s", why),
				 errdetail("%d of the snapshot's %d messages pulled after %ld ms.", Max(pulled, 0),
						   ms_held_later_messages(later),
						   (long) ((GetCurrentTimestamp() - start) / 1000))));
	if (woken)
		SetLatch(MyLatch);
}

/*
 * The held rows the pass left for after its commit (heldrows.c), in a
 * transaction of their own, once the replicas it provisioned pulled their
 * snapshots (held_wait), as they apply the last of them.  A failure leaves
 * their held_due set, and the next pass provisions them again (observe.c).
 */
static void
held_later(MemoryContext pass_cxt, const ms_pass_later *later)
{
	ms_pass		h;

	held_wait(later);
	step_begin(&h, pass_cxt, "magic_sync held rows of the pass");
	ms_relay_held(&h, later);
	step_end();
}

/*
 * the floor under the notes the passes read (floor.h): the worker's own, for
 * as long as it holds the relay lock
 */
static ms_floor notes_floor;

/* the last pass failed to serialize: the next holds sync.replicas whole (run_pass) */
static bool hold_whole = false;

/*
 * A pass committed and its chains may not be copied into sync.replicas
 * (relay.c): copied before the next pass reads them.  So too before the
 * first pass of this worker: a relay before it may have died in between.
 */
static bool chains_pending = true;

static void
chains_left(MemoryContext pass_cxt)
{
	ms_pass		c;

	step_begin(&c, pass_cxt, "magic_sync chains");
	ms_relay_chains(&c);
	step_end();
	chains_pending = false;
}

/*
 * The snapshots the pass before left (relay.c), in a REPEATABLE READ
 * transaction of their own that holds the rows of the replicas provisioned
 * alone: the other replicas' filings and pulls go on meanwhile, however
 * long the snapshot.  Returns whether it provisioned any.
 */
static bool
snapshot_pass(MemoryContext pass_cxt)
{
	ms_pass		p;
	ms_relay_in in = {0};
	ms_pass_later later;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	XactIsoLevel = XACT_REPEATABLE_READ;
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "magic_sync snapshot pass");
	MemoryContextSwitchTo(pass_cxt);
	memset(&p, 0, sizeof p);
	p.exec.cxt = pass_cxt;
	in.bounds_later = true;
	in.snapshots = MS_SNAPSHOTS_ONLY;
	/* a snapshot's held rows of tables read whole are written after it */
	in.held_later = ms_held_later;
	ms_relay_pass(&p, &in, &later);
	if (p.did.provisioned > 0)
		ereport(DEBUG1,
				(errmsg("magic_sync snapshot pass: %lld provisioned, %lld rows sent, %lld messages, in %ld ms",
						(long long) p.did.provisioned, (long long) p.did.rows_sent, (long long) p.did.messages,
						TimestampDifferenceMilliseconds(GetCurrentTransactionStartTimestamp(), GetCurrentTimestamp()))));
	PopActiveSnapshot();
	CommitTransactionCommand();
	if (later.rows > 0)
		held_later(pass_cxt, &later);
	if (p.did.messages > 0)
		outbox_bounds(pass_cxt, &later);
	return p.did.provisioned > 0;
}

/*
 * one pass in a REPEATABLE READ transaction, then the snapshots it left;
 * returns whether it did anything, *read the notes it read, and *again
 * whether the next pass runs at once, without a commit waking it: when this
 * one left work it knows of (a full batch, a snapshot, a replica forgotten
 * or provisioned, or marked by the outbox bounds to be).  A pass that only sent what its notes changed leaves
 * none: a commit during it set the latch again (ms_worker_main), and a pass
 * straight after it found nothing but cost a small pass's fixed cost again
 * (bench/hops.py, issue 37).  quiet: the naptime started it (floor.h).
 */
/*
 * Whether the extension is installed, as get_extension_oid finds it: a scan
 * of pg_extension, 1.4 % of a one-row pass (issue 37), asked again only
 * once a relation changed (pg_class: DROP EXTENSION drops sync.tables, and
 * invalidations are taken in as the pass's transaction starts); never kept
 * while it is not there.
 */
static bool extension_known = false;
static bool extension_watched = false;

static bool
extension_installed(void)
{
	if (!extension_watched)
	{
		ms_on_relation_change(&extension_known);
		extension_watched = true;
	}
	if (!extension_known)
		extension_known = OidIsValid(get_extension_oid("magic_sync", true));
	return extension_known;
}

static bool
run_pass(MemoryContext pass_cxt, bool *holding, bool quiet, int64 *read, bool *full, bool *again)
{
	ms_pass		p;
	ms_relay_in in = {0};
	ms_pass_later later;
	bool		busy = false;
	int64		through;

	*read = 0;
	*full = false;
	*again = false;
	if (*holding && chains_pending)
		chains_left(pass_cxt);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	XactIsoLevel = XACT_REPEATABLE_READ;
	if (!extension_installed())
	{
		CommitTransactionCommand();
		return false;
	}
	if (!*holding)
	{
		*holding = ms_relay_try_lock(true);
		if (!*holding)
		{
			ereport(DEBUG1, (errmsg("magic_sync: another relay holds the relay lock; waiting")));
			CommitTransactionCommand();
			return false;
		}
		ereport(LOG, (errmsg("magic_sync: the relay lock is taken; relaying")));
		/* the chains a relay before it left, before its pass's snapshot */
		CommitTransactionCommand();
		chains_left(pass_cxt);
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		XactIsoLevel = XACT_REPEATABLE_READ;
	}
	/*
	 * Before the pass's snapshot.  Under REPEATABLE READ, a pass that writes
	 * a row a filing or a pull wrote since its snapshot fails to serialize;
	 * the row every acknowledgement writes, its replica's in sync.replicas,
	 * the pass leaves to a transaction after its commit (ms_relay_bounds:
	 * the chain, what is owed), so filings and pulls go on beside it.  What
	 * is left (a held row both write) is rare: the pass that failed on it is
	 * run again holding sync.replicas whole, so that they wait for it, and
	 * no pass fails again and again under load.
	 */
	ms_relay_hold_replicas(hold_whole);
	/* before the snapshot: it must see what the transactions it waited for committed */
	ms_floor_before_snapshot(&notes_floor, quiet);
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "magic_sync relay pass");
	MemoryContextSwitchTo(pass_cxt);
	memset(&p, 0, sizeof p);
	p.exec.cxt = pass_cxt;
	in.floor = &notes_floor;
	/* its messages go out first: the outbox bounds are checked after the commit */
	in.bounds_later = true;
	/* a snapshot, however long, is a pass of its own that holds no other replica (snapshot_pass) */
	in.snapshots = MS_SNAPSHOTS_LEFT;
	/* and a snapshot's held rows of tables read whole are written after it too */
	in.held_later = ms_held_later;
	ms_relay_pass(&p, &in, &later);
	busy = p.did.messages > 0 || p.did.provisioned > 0 || p.did.forgotten > 0 || p.did.more;
	*again = p.did.provisioned > 0 || p.did.forgotten > 0 || p.did.more;
	*read = p.did.notes_read;
	*full = p.did.more;
	/* how long it took, from its transaction's start to its commit: most of what its notes waited */
	if (busy || p.did.quarantined > 0 || p.did.parked > 0)
		ereport(DEBUG1,
				(errmsg("magic_sync pass: %lld notes, %lld provisioned, %lld rows sent, %lld taken back, %lld messages, %lld quarantined, %lld parked, in %ld ms",
						(long long) p.did.notes_read, (long long) p.did.provisioned, (long long) p.did.rows_sent,
						(long long) p.did.rows_taken, (long long) p.did.messages, (long long) p.did.quarantined,
						(long long) p.did.parked,
						TimestampDifferenceMilliseconds(GetCurrentTransactionStartTimestamp(), GetCurrentTimestamp()))));
	PopActiveSnapshot();
	/*
	 * The commit waits for no flush: the pulls it wakes work while it runs.
	 * A held pull woken, this process begins it at the commit, before the
	 * NOTIFY; none, the WAL writer begins it beside the NOTIFY (wake.c), and
	 * this process waits for it, or does it, just after the commit.
	 * sync.pull flushes what it returns before it returns it
	 * (transport/pull.c), so no replica applies a pass a crash could take
	 * back; a crash before the flush loses the pass whole, and the next plans
	 * its notes again, as after one that died before its commit.  With
	 * synchronous standbys the commit waits for them as before: a standby
	 * promoted then has every pass a replica pulled.
	 */
	through = p.did.messages > 0 ? last_message() : 0;
	if (SyncRepStandbyNames == NULL || SyncRepStandbyNames[0] == '\0')
	{
		(void) set_config_option("synchronous_commit", "off", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
		if (p.did.messages > 0)
			ms_wake_flush_at_commit(through);
	}
	CommitTransactionCommand();
	hold_whole = false;
	/* until ms_relay_bounds copied its chains (an error on the way leaves it set) */
	chains_pending = p.did.messages > 0;
	if (through > 0)
		ms_wake_passed(XactLastCommitEnd, through);
	XLogFlush(XactLastCommitEnd);
	ms_floor_committed(&notes_floor);
	if (later.rows > 0)
		held_later(pass_cxt, &later);
	if (p.did.messages > 0 && outbox_bounds(pass_cxt, &later))
		*again = true;
	chains_pending = false;
	if (p.did.snapshots_left && snapshot_pass(pass_cxt))
	{
		busy = true;
		*again = true;
	}
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	return busy;
}

/* one batch of housekeeping in a transaction of its own; whether it found anything to do */
static bool
housekeeping_batch(int rows, bool inbox)
{
	bool		found = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "magic_sync housekeeping");
	SPI_connect();
	/* both planned once a session (ms_spi_run), not once a second */
	if (inbox && ms_spi_run("SELECT sync.inbox_retry(100) WHERE EXISTS (SELECT FROM sync.inbox)",
							0, NULL, NULL, NULL, false, 0) < 0)
		elog(ERROR, "could not retry the inbox");
	/* every count it returns, whatever the catalog's version (0.1 prunes no wishes) */
	ms_spi_check(ms_spi_run("SELECT * FROM sync.prune($1)", 1, (Oid[]) {INT4OID},
							(Datum[]) {Int32GetDatum(rows)}, NULL, false, 0), SPI_OK_SELECT, "could not prune");
	for (int c = 1; SPI_processed == 1 && c <= SPI_tuptable->tupdesc->natts && !found; c++)
	{
		bool		isnull;
		Datum		d;

		/* only its bigint counts: any other type's Datum is no count */
		if (SPI_gettypeid(SPI_tuptable->tupdesc, c) != INT8OID)
			continue;
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, c, &isnull);
		found = !isnull && DatumGetInt64(d) > 0;
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return found;
}

/*
 * housekeeping: the rest of the runner's work, after the pass committed (its
 * messages are out meanwhile): the inbox, then pruning what is done, in
 * batches of HOUSEKEEPING_BATCH rows, up to magic_sync.prune_rows a pass.  It
 * stops after HOUSEKEEPING_MS once a commit waits for a pass (the latch is
 * set), so a backlog a large change left never holds back the next small
 * one; the first batch always runs, so pruning keeps up under any load.
 * Returns whether more may wait.  It runs once a second at most while each
 * run finds no more than a batch (housekeeping_due): a stream of commits
 * makes passes many times a second, and parsing and planning sync.prune
 * after each cost a pass of a few notes as much again.
 */
static bool
housekeeping(void)
{
	TimestampTz start = GetCurrentTimestamp();
	int			done = 0;

	while (done < ms_prune_rows)
	{
		int			rows = Min(HOUSEKEEPING_BATCH, ms_prune_rows - done);

		if (!housekeeping_batch(rows, done == 0))
			return false;
		done += rows;
		CHECK_FOR_INTERRUPTS();
		if (MyLatch->is_set && TimestampDifferenceExceeds(start, GetCurrentTimestamp(), HOUSEKEEPING_MS))
			break;
	}
	/* more may wait: the worker comes back at once, not a naptime later */
	return true;
}

/*
 * housekeeping_due: whether housekeeping runs after this pass (or, *wait_ms
 * on, without one): when the last run left more to do, or began
 * HOUSEKEEPING_EVERY_MS ago; a pass in between leaves it due later, and the
 * worker wakes for it then however long its naptime.
 */
static bool
housekeeping_due(TimestampTz last, bool more, long *wait_ms)
{
	TimestampTz due = TimestampTzPlusMilliseconds(last, HOUSEKEEPING_EVERY_MS);
	TimestampTz now = GetCurrentTimestamp();

	*wait_ms = 0;
	if (more || last == 0 || now >= due)
		return true;
	*wait_ms = Max(1, (long) ((due - now + 999) / 1000));
	return false;
}

/*
 * Many commits, one pass: when commits came during a pass that read part of
 * a batch, or come within a slice after it, the next waits for more for as
 * long as they keep coming, up to magic_sync.coalesce (*until): first as
 * long as that pass took, at most a slice (*slice), then by slices, and it
 * begins after the first slice no commit came in (coalesce).
 * Under a stream of commits each pass takes more notes for the same fixed
 * cost of a pass, of its message, of the agent's pull and acknowledgement
 * and its apply; the last commit of a stream waits two slices at most, and
 * a commit after a quiet spell, or a backlog (a full batch), goes at once.
 * Commits during the pass alone said too little: a pass of one note is
 * shorter than the gap between a stream's commits (a few ms), each commit
 * then found the worker idle and made a pass of its own, and the stream
 * never coalesced (wake.sh).  Returns whether the next pass runs at once
 * (run_pass); work it left (again) is not held back by a watch for commits.
 */
static bool
run_pass_coalescing(MemoryContext pass_cxt, bool *holding, bool quiet, TimestampTz *until, long *slice)
{
	TimestampTz began = GetCurrentTimestamp();
	int64		read;
	bool		full;
	bool		again;
	bool		busy = run_pass(pass_cxt, holding, quiet, &read, &full, &again);

	if (busy && read > 0 && !full && ms_coalesce > 0 && (MyLatch->is_set || !again))
	{
		TimestampTz now = GetCurrentTimestamp();

		*until = now + (TimestampTz) ms_coalesce * 1000;
		*slice = Max(1, (long) Min((now - began) / 1000, COALESCE_SLICE()));
	}
	return again;
}

/*
 * coalesce: the wait run_pass_coalescing asked for.  The commits it waits
 * for set the latch, and wake it for nothing: it sleeps a slice at a time,
 * then looks whether one came meanwhile.  When none came during the pass,
 * it first watches a slice for one, woken by it: none, and it returns false
 * (no stream: the worker waits as after any pass, and the next commit goes
 * at once).  The first slice (first_ms, as long as the pass took, or a
 * slice after the watch) always passes: commits came.  After it, slices of
 * COALESCE_SLICE(): one none came in ends the wait, the stream stopped,
 * and what came is relayed now.
 */
static bool
coalesce(TimestampTz until, long first_ms)
{
	if (!MyLatch->is_set)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 COALESCE_SLICE(), PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
		if (!MyLatch->is_set)
			return false;
		first_ms = COALESCE_SLICE();
	}
	for (bool first = true;; first = false)
	{
		long		left = (long) ((until - GetCurrentTimestamp()) / 1000);

		if (left <= 0 || (!first && !MyLatch->is_set))
			return true;
		ResetLatch(MyLatch);
		(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(left, first ? first_ms : COALESCE_SLICE()), PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}
}

void
ms_worker_main(Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);
	MemoryContext top;
	MemoryContext pass_cxt;
	volatile bool holding = false;
	volatile long backoff = 0;
	volatile bool again = true;
	volatile bool tidy = false;
	volatile TimestampTz coalesce_until = 0;
	volatile long coalesce_slice = 0;
	volatile TimestampTz housekept = 0;	/* when housekeeping last began */
	volatile bool untidy = false;	/* passes ran since (housekeeping_due) */
	bool		woken;
	volatile bool quiet = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	{
		const char *role = ms_role != NULL && ms_role[0] != '\0' ? ms_role : NULL;

		if (MyBgworkerEntry->bgw_extra[0] != '\0')
			BackgroundWorkerInitializeConnection(MyBgworkerEntry->bgw_extra, role, 0);
		else
			BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	}
	pgstat_report_appname(WORKER_TYPE);
	/* above the database's and the role's settings: a session's own */
	SetConfigOption("search_path", PINNED_SEARCH_PATH, PGC_USERSET, PGC_S_SESSION);
	/* the plan's temporary tables mislead JIT's cost threshold into compiling */
	SetConfigOption("jit", "off", PGC_SUSET, PGC_S_OVERRIDE);
	/* before any temporary table: local buffers are sized once per session */
	SetConfigOption("temp_buffers", psprintf("%d", ms_temp_buffers), PGC_USERSET, PGC_S_OVERRIDE);
	/* commits of notes set this latch (wake.c); without the shared memory, the naptime */
	woken = ms_wake_register();
	if (!woken)
		ereport(LOG,
				(errmsg("magic_sync: commits do not wake this relay; it runs a pass every magic_sync.naptime (%d ms)",
						ms_naptime),
				 errhint("Add magic_sync to shared_preload_libraries for passes at every commit.")));

	top = AllocSetContextCreate(TopMemoryContext, "magic_sync worker", ALLOCSET_DEFAULT_SIZES);
	pass_cxt = AllocSetContextCreate(top, "magic_sync pass", ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		long		wait = backoff > 0 ? backoff : (again || tidy ? 0 : ms_naptime);
		long		rest = coalesce_until == 0 ? 0 :
			(long) ((coalesce_until - GetCurrentTimestamp()) / 1000);
		long		tidy_in = 0;
		bool		for_tidy = false;
		volatile bool tidy_only = false;

		quiet = false;
		/* no commit within a slice of the pass: no stream, it waits as after any */
		if (backoff == 0 && rest > 0 && !coalesce(coalesce_until, coalesce_slice))
			rest = 0;
		/* passes left housekeeping due later: the worker wakes for it then */
		if (backoff == 0 && rest <= 0 && wait > 0 && untidy && holding)
		{
			if (housekeeping_due(housekept, false, &tidy_in))
				tidy_in = 0;
			if (tidy_in < wait)
			{
				wait = tidy_in;
				for_tidy = true;
				tidy_only = wait == 0;
			}
		}
		if ((backoff > 0 || rest <= 0) && wait > 0)
		{
			int			rc;

			/* what the passes counted is in the statistics while it sleeps */
			pgstat_report_stat(true);
			rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						   wait, PG_WAIT_EXTENSION);
			/* woken for the housekeeping alone: no pass, nor a naptime's quiet one */
			tidy_only = for_tidy && (rc & WL_TIMEOUT) && !(rc & WL_LATCH_SET);
			/* nothing woke it for a naptime: that pass may read from the first note (floor.h) */
			quiet = !tidy_only && backoff == 0 && (rc & WL_TIMEOUT) && !(rc & WL_LATCH_SET);
		}
		coalesce_until = 0;
		/* before the pass: a commit during it sets the latch again, for the next; housekeeping alone leaves it set */
		if (!tidy_only)
			ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		MemoryContextSwitchTo(top);
		MemoryContextReset(pass_cxt);
		PG_TRY();
		{
			bool		h = holding;
			bool		more = tidy;
			long		later;
			TimestampTz until = 0;
			long		slice = 0;

			if (!tidy_only)
			{
				again = run_pass_coalescing(pass_cxt, &h, quiet, &until, &slice);
				holding = h;
				coalesce_until = until;
				coalesce_slice = slice;
			}
			untidy = holding;
			tidy = false;
			if (holding && (tidy_only || housekeeping_due(housekept, more, &later)))
			{
				housekept = GetCurrentTimestamp();
				untidy = false;
				tidy = housekeeping();
			}
			backoff = 0;
		}
		PG_CATCH();
		{
			ErrorData  *e;
			bool		transient;

			MemoryContextSwitchTo(top);
			e = CopyErrorData();
			FlushErrorState();
			/* the error may come from a subtransaction (relay.c record): end them all */
			AbortOutOfAnyTransaction();
			transient = ms_transient(e->sqlerrcode);
			backoff = backoff == 0 ? ms_naptime : Min(backoff * 2, BACKOFF_MAX_MS);
			/*
			 * a filing or a pull wrote what the pass writes: run again at
			 * once, holding sync.replicas whole (run_pass)
			 */
			if (e->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE && !hold_whole)
			{
				hold_whole = true;
				backoff = 0;
			}
			ereport(transient ? LOG : WARNING,
					(errmsg("magic_sync: the relay pass failed (%s): %s",
							transient ? "transient, retried" : "permanent, waiting for a fix", e->message),
					 e->detail ? errdetail_internal("%s", e->detail) : 0,
					 errhint("The next pass runs in %ld ms; nothing it planned was committed.", backoff)));
			FreeErrorData(e);
			again = backoff == 0;
			tidy = false;
			pgstat_report_activity(STATE_IDLE, NULL);
		}
		PG_END_TRY();
	}
}

/* the pid of the relay worker of this database, or 0 */
static int
worker_pid(void)
{
	int			pid = 0;

	SPI_connect();
	if (SPI_execute("SELECT pid FROM pg_catalog.pg_stat_activity"
					" WHERE backend_type = '" WORKER_TYPE "' AND datid = (SELECT oid FROM pg_catalog.pg_database"
					" WHERE datname = pg_catalog.current_database()) LIMIT 1", true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		isnull;

		pid = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();
	return pid;
}

/*
 * ms_wake: sync.wake() wakes this database's relay worker for a pass now;
 * false when none runs.
 */
Datum
ms_wake(PG_FUNCTION_ARGS)
{
	int			pid;
	PGPROC	   *proc;

	if (ms_wake_relay(MyDatabaseId))
		PG_RETURN_BOOL(true);
	pid = worker_pid();
	if (pid == 0)
		PG_RETURN_BOOL(false);
	proc = BackendPidGetProc(pid);
	if (proc == NULL)
		PG_RETURN_BOOL(false);
	SetLatch(&proc->procLatch);
	PG_RETURN_BOOL(true);
}

/*
 * ms_relay_start: sync.relay_start() starts a relay worker in the current
 * database without a restart, unless one runs there; returns its pid.
 */
Datum
ms_relay_start(PG_FUNCTION_ARGS)
{
	BackgroundWorker w;
	BackgroundWorkerHandle *handle;
	pid_t		pid;
	int			running = worker_pid();

	if (running != 0)
		PG_RETURN_INT32(running);
	fill_worker(&w, MyDatabaseId, get_database_name(MyDatabaseId));
	w.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&w, &handle))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not start a relay worker"),
				 errhint("Raise max_worker_processes.")));
	if (WaitForBackgroundWorkerStartup(handle, &pid) != BGWH_STARTED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("the relay worker did not start"),
				 errhint("The server log says why.")));
	PG_RETURN_INT32((int32) pid);
}
