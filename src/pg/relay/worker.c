/*-------------------------------------------------------------------------
 * worker.c
 *	  The relay's background worker: the server's runner (docs/design.md 4).
 *
 * With shared_preload_libraries = 'magic_sync' and magic_sync.database set,
 * one worker relays in that database; sync.relay_start() starts one in the
 * current database without a restart.  The worker holds the relay lock for
 * as long as it lives (a session advisory lock), runs a pass every
 * magic_sync.naptime and at once when woken (sync.wake()), each in a
 * REPEATABLE READ transaction of its own, in a memory context reset every
 * pass.  A transient failure (transient.h) is retried after a backoff that
 * doubles up to a minute; a permanent one is logged, and retried at the same
 * pace, since the fix it waits for is a deploy.  SIGHUP reloads the
 * settings; SIGTERM ends the pass and the worker (the transaction is rolled
 * back: nothing half-done is committed).
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
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "relay.h"
#include "settings.h"
#include "transient.h"
#include "worker.h"

PG_FUNCTION_INFO_V1(ms_wake);
PG_FUNCTION_INFO_V1(ms_relay_start);

#define WORKER_TYPE "magic_sync relay"
#define BACKOFF_MAX_MS (60 * 1000)
#define PINNED_SEARCH_PATH "pg_catalog, pg_temp"

static void
fill_worker(BackgroundWorker *w, Oid dboid)
{
	memset(w, 0, sizeof(*w));
	w->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w->bgw_start_time = BgWorkerStart_RecoveryFinished;
	w->bgw_restart_time = 10;
	snprintf(w->bgw_library_name, BGW_MAXLEN, "magic_sync");
	snprintf(w->bgw_function_name, BGW_MAXLEN, "ms_worker_main");
	snprintf(w->bgw_type, BGW_MAXLEN, WORKER_TYPE);
	if (OidIsValid(dboid))
	{
		char	   *name = get_database_name(dboid);

		snprintf(w->bgw_name, BGW_MAXLEN, WORKER_TYPE " in database %u", dboid);
		/* a dynamic worker connects by name: as magic_sync.role when it starts */
		if (name != NULL)
			strlcpy(w->bgw_extra, name, BGW_EXTRALEN);
	}
	else
		snprintf(w->bgw_name, BGW_MAXLEN, WORKER_TYPE " in %s", ms_database);
	w->bgw_main_arg = ObjectIdGetDatum(dboid);
}

void
ms_worker_register_static(void)
{
	BackgroundWorker w;

	if (ms_database == NULL || ms_database[0] == '\0')
		return;
	fill_worker(&w, InvalidOid);
	RegisterBackgroundWorker(&w);
}

/* one pass in a REPEATABLE READ transaction; returns whether it did anything */
static bool
run_pass(MemoryContext pass_cxt, bool *holding)
{
	ms_pass		p;
	bool		busy = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	XactIsoLevel = XACT_REPEATABLE_READ;
	if (!OidIsValid(get_extension_oid("magic_sync", true)))
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
	}
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "magic_sync relay pass");
	MemoryContextSwitchTo(pass_cxt);
	memset(&p, 0, sizeof p);
	p.cxt = pass_cxt;
	ms_relay_pass(&p);
	busy = p.messages > 0 || p.provisioned > 0 || p.forgotten > 0 || p.more;

	/* the rest of the runner's work: the inbox, then pruning, each a small batch */
	SPI_connect();
	if (SPI_execute("SELECT sync.inbox_retry(100) WHERE EXISTS (SELECT FROM sync.inbox)", false, 0) < 0 ||
		SPI_execute_with_args("SELECT * FROM sync.prune($1)", 1, (Oid[]) {INT4OID},
							  (Datum[]) {Int32GetDatum(ms_prune_rows)}, NULL, false, 0) < 0)
		elog(ERROR, "could not retry the inbox or prune");
	SPI_finish();
	if (busy || p.quarantined > 0 || p.parked > 0)
		ereport(DEBUG1,
				(errmsg("magic_sync pass: %lld notes, %lld provisioned, %lld rows sent, %lld taken back, %lld messages, %lld quarantined, %lld parked",
						(long long) p.notes_read, (long long) p.provisioned, (long long) p.rows_sent,
						(long long) p.rows_taken, (long long) p.messages, (long long) p.quarantined,
						(long long) p.parked)));
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
	return busy;
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

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	{
		const char *role = ms_role != NULL && ms_role[0] != '\0' ? ms_role : NULL;

		if (OidIsValid(dboid) && MyBgworkerEntry->bgw_extra[0] != '\0')
			BackgroundWorkerInitializeConnection(MyBgworkerEntry->bgw_extra, role, 0);
		else if (OidIsValid(dboid))
			BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
		else
			BackgroundWorkerInitializeConnection(ms_database, role, 0);
	}
	pgstat_report_appname(WORKER_TYPE);
	/* above the database's and the role's settings: a session's own */
	SetConfigOption("search_path", PINNED_SEARCH_PATH, PGC_USERSET, PGC_S_SESSION);
	/* the plan's temporary tables mislead JIT's cost threshold into compiling */
	SetConfigOption("jit", "off", PGC_SUSET, PGC_S_OVERRIDE);
	/* before any temporary table: local buffers are sized once per session */
	SetConfigOption("temp_buffers", psprintf("%d", ms_temp_buffers), PGC_USERSET, PGC_S_OVERRIDE);

	top = AllocSetContextCreate(TopMemoryContext, "magic_sync worker", ALLOCSET_DEFAULT_SIZES);
	pass_cxt = AllocSetContextCreate(top, "magic_sync pass", ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		long		wait = backoff > 0 ? backoff : (again ? 0 : ms_naptime);

		if (wait > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 wait, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
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
			{
			bool		h = holding;

			again = run_pass(pass_cxt, &h);
			holding = h;
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
			ereport(transient ? LOG : WARNING,
					(errmsg("magic_sync: the relay pass failed (%s): %s",
							transient ? "transient, retried" : "permanent, waiting for a fix", e->message),
					 e->detail ? errdetail_internal("%s", e->detail) : 0,
					 errhint("The next pass runs in %ld ms; nothing it planned was committed.", backoff)));
			FreeErrorData(e);
			again = false;
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
	int			pid = worker_pid();
	PGPROC	   *proc;

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
	fill_worker(&w, MyDatabaseId);
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
