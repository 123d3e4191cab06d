/*-------------------------------------------------------------------------
 * alarm.c
 *	  Recording a refused claim out of the refused call's transaction: a
 *	  short-lived background worker writes it on the replica
 *	  (sync.refused_claims, sync.replicas.last_error), commits, and exits.
 *
 * A refused claim is an error, and an error rolls back everything the call
 * wrote; yet the refusal must be seen (sync.health lists it), on that
 * replica alone.  PostgreSQL has no autonomous transaction, but registering
 * a background worker is not transactional: it starts whatever becomes of
 * the caller's, and records the refusal in a transaction of its own.
 *
 * Bounded, whatever a replica claims and however often: a small table in
 * shared memory holds, per replica, the last claim refused that waits to be
 * recorded.  A refusal of a replica already waiting replaces its claim (the
 * catalog keeps the last one anyway); one of a replica being recorded is
 * recorded again after.  One worker per database records them all, one
 * after another, then exits, and at most ALARM_WORKERS run on the server
 * at a time (a worker ending hands its slot to a database left waiting):
 * a storm of bad claims, from one replica with numbers that vary or from
 * many, takes at most that many background worker slots, never the ones
 * parallel queries need.  What is coalesced is said in the log: refusals
 * replaced by a later one of the same replica before it was recorded, and,
 * when ALARM_ENTRIES replicas already wait, the refusal itself.  The same
 * claim of the same replica is recorded once a few seconds, never on a
 * standby (nothing is written there).
 *
 * The table is requested when the library is preloaded, and otherwise
 * taken from the shared memory PostgreSQL keeps spare (as pg_prewarm's
 * autoprewarm does); without it, refusals are only logged.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "claim.h"
#include "settings.h"
#include "spi_check.h"
#include "updated.h"

PGDLLEXPORT void ms_alarm_main(Datum arg);

/* replicas whose refused claim waits to be recorded, server-wide */
#define ALARM_ENTRIES 128
/* alarm workers running at a time, server-wide */
#define ALARM_WORKERS 2
/* a worker registered that never started (its fork failed) gives its slot back after this */
#define ALARM_START_MS 60000

/* A refused claim, by its parts. */
typedef struct alarm_args
{
	uint8		replica[UUID_LEN];
	uint8		call;			/* ms_claim_call */
	uint8		why;			/* ms_claim_refusal */
	int64		number;
	int64		a;
	int64		b;
} alarm_args;

/* The last claim of one replica refused, waiting to be recorded. */
typedef struct alarm_entry
{
	Oid			db;				/* InvalidOid: free */
	bool		taken;			/* a worker records it now */
	bool		again;			/* refused again since it was taken: args are newer */
	alarm_args	args;
} alarm_entry;

/*
 * A worker's slot: free; registered (pid 0); running for db; ending (db
 * InvalidOid: it records no more, and is given back once the worker is
 * gone from pg_stat_activity).
 */
typedef struct alarm_worker
{
	bool		used;
	Oid			db;
	int			pid;
	TimestampTz registered;
} alarm_worker;

typedef struct alarm_shared
{
	slock_t		mutex;
	uint64		coalesced;		/* refusals replaced before they were recorded, since startup */
	alarm_worker workers[ALARM_WORKERS];
	alarm_entry entries[ALARM_ENTRIES];
} alarm_shared;

/* What a worker is told, in bgw_extra: its slot and the role it connects as. */
typedef struct alarm_start
{
	int			slot;
	Oid			role;			/* magic_sync.role's, as the relay worker connects; InvalidOid: the bootstrap superuser */
} alarm_start;

StaticAssertDecl(sizeof(alarm_start) <= BGW_EXTRALEN, "an alarm worker's start fits in bgw_extra");

static alarm_shared *shared = NULL;
static shmem_request_hook_type prev_request = NULL;

static void
alarm_request(void)
{
	if (prev_request)
		prev_request();
	RequestAddinShmemSpace(MAXALIGN(sizeof(alarm_shared)));
}

void
ms_alarm_preload(void)
{
	prev_request = shmem_request_hook;
	shmem_request_hook = alarm_request;
}

/* attach: the table, made by the first to look for it */
static alarm_shared *
attach(void)
{
	bool		found;

	if (shared != NULL)
		return shared;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	/* without the preload's request, from the spare (a few kilobytes): raises when none is left */
	shared = ShmemInitStruct("magic_sync alarms", sizeof(alarm_shared), &found);
	if (!found)
	{
		SpinLockInit(&shared->mutex);
		shared->coalesced = 0;
		memset(shared->workers, 0, sizeof shared->workers);
		memset(shared->entries, 0, sizeof shared->entries);
	}
	LWLockRelease(AddinShmemInitLock);
	return shared;
}

static const char *
sqlstate(ms_claim_refusal why)
{
	return why == MS_CLAIM_SUPERSEDED ? "55000" : "22023";
}

/* recordable: whether the catalog has sync.refused_claims (an extension updated) */
static bool
recordable(void)
{
	return ms_catalog_has("refused_claims");
}

/* recorded_lately: whether this very refusal was recorded on the replica a few seconds ago */
static bool
recorded_lately(const pg_uuid_t *replica, const char *claim, const char *reason)
{
	Oid			types[3] = {UUIDOID, TEXTOID, TEXTOID};
	Datum		values[3] = {UUIDPGetDatum(replica), CStringGetTextDatum(claim), CStringGetTextDatum(reason)};

	ms_spi_check(SPI_execute_with_args("SELECT FROM sync.refused_claims WHERE replica = $1 AND claim = $2 AND reason = $3"
									   " AND at > pg_catalog.clock_timestamp() - interval '10 seconds'",
									   3, types, values, NULL, true, 1), SPI_OK_SELECT, "could not read sync.refused_claims");
	return SPI_processed > 0;
}

/*
 * worker_of: the slot of db's worker, registered or running, or -1.  A slot
 * registered long ago whose worker never started is free again.  Under the
 * mutex.
 */
static int
worker_of(alarm_shared *st, Oid db, TimestampTz now)
{
	for (int i = 0; i < ALARM_WORKERS; i++)
	{
		alarm_worker *w = &st->workers[i];

		if (w->used && w->pid == 0 && TimestampDifferenceExceeds(w->registered, now, ALARM_START_MS))
			w->used = false;
		if (w->used && w->db == db)
			return i;
	}
	return -1;
}

/* claim_slot: a free worker slot taken for db, or -1 when ALARM_WORKERS run.  Under the mutex. */
static int
claim_slot(alarm_shared *st, Oid db, TimestampTz now)
{
	for (int i = 0; i < ALARM_WORKERS; i++)
		if (!st->workers[i].used)
		{
			st->workers[i].used = true;
			st->workers[i].db = db;
			st->workers[i].pid = 0;
			st->workers[i].registered = now;
			return i;
		}
	return -1;
}

/*
 * waiting_db: a database with a claim waiting and no worker, whose worker
 * may take a slot given back; InvalidOid when none.  Under the mutex.
 */
static Oid
waiting_db(alarm_shared *st, TimestampTz now)
{
	for (int i = 0; i < ALARM_ENTRIES; i++)
		if (st->entries[i].db != InvalidOid && !st->entries[i].taken &&
			worker_of(st, st->entries[i].db, now) < 0)
			return st->entries[i].db;
	return InvalidOid;
}

/* start: register the worker of slot for db; its slot is given back when no background worker slot is free */
static void
start(alarm_shared *st, int slot, Oid db, Oid role)
{
	BackgroundWorker w;
	alarm_start s = {slot, role};

	memset(&w, 0, sizeof w);
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	w.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(w.bgw_library_name, BGW_MAXLEN, "magic_sync");
	snprintf(w.bgw_function_name, BGW_MAXLEN, "ms_alarm_main");
	snprintf(w.bgw_type, BGW_MAXLEN, "magic_sync alarm");
	snprintf(w.bgw_name, BGW_MAXLEN, "magic_sync alarm in database %u", db);
	w.bgw_main_arg = ObjectIdGetDatum(db);
	memcpy(w.bgw_extra, &s, sizeof s);
	if (RegisterDynamicBackgroundWorker(&w, NULL))
		return;
	SpinLockAcquire(&st->mutex);
	st->workers[slot].used = false;
	SpinLockRelease(&st->mutex);
	ereport(LOG,
			(errmsg("magic_sync: refused claims wait to be recorded: no background worker slot is free"),
			 errhint("Raise max_worker_processes; the next refusal tries again.")));
}

/* the role alarm workers connect as: magic_sync.role's, or the bootstrap superuser's */
static Oid
alarm_role(void)
{
	return ms_role != NULL && ms_role[0] != '\0' ? get_role_oid(ms_role, true) : InvalidOid;
}

void
ms_alarm(const pg_uuid_t *replica, ms_claim_call call, ms_claim_refusal why,
		 int64 number, int64 a, int64 b)
{
	alarm_args	args;
	alarm_shared *st;
	alarm_entry *e = NULL;
	bool		replaced = false;
	int			slot = -1;
	char	   *claim;
	char	   *reason;
	TimestampTz now = GetCurrentTimestamp();

	ms_claim_text(call, why, number, a, b, &claim, &reason);
	ereport(LOG, (errmsg("magic_sync: %s is refused: %s", claim, reason)));
	/* nowhere to record it on a standby, or before ALTER EXTENSION magic_sync UPDATE */
	if (RecoveryInProgress() || !recordable() || recorded_lately(replica, claim, reason))
		return;
	st = attach();
	memset(&args, 0, sizeof args);
	memcpy(args.replica, replica->data, UUID_LEN);
	args.call = (uint8) call;
	args.why = (uint8) why;
	args.number = number;
	args.a = a;
	args.b = b;

	SpinLockAcquire(&st->mutex);
	for (int i = 0; i < ALARM_ENTRIES && e == NULL; i++)
		if (st->entries[i].db == MyDatabaseId && memcmp(st->entries[i].args.replica, args.replica, UUID_LEN) == 0)
			e = &st->entries[i];
	if (e != NULL)
	{
		/* the replica's last claim is the one recorded: an earlier one not recorded yet is replaced */
		replaced = !e->taken;
		e->again |= e->taken;
		st->coalesced += replaced ? 1 : 0;
	}
	else
		for (int i = 0; i < ALARM_ENTRIES && e == NULL; i++)
			if (st->entries[i].db == InvalidOid)
			{
				e = &st->entries[i];
				e->db = MyDatabaseId;
				e->taken = false;
				e->again = false;
			}
	if (e != NULL)
	{
		e->args = args;
		if (worker_of(st, MyDatabaseId, now) < 0)
			slot = claim_slot(st, MyDatabaseId, now);
	}
	SpinLockRelease(&st->mutex);

	if (e == NULL)
		ereport(LOG,
				(errmsg("magic_sync: the refusal is not recorded on the replica: %d replicas' refused claims wait already",
						ALARM_ENTRIES)));
	else if (replaced)
		ereport(DEBUG1, (errmsg("magic_sync: the replica's refused claim waiting to be recorded is replaced by this one")));
	if (slot >= 0)
		start(st, slot, MyDatabaseId, alarm_role());
}

/* record: one refused claim on its replica, if it is still registered, in a transaction of its own */
static void
record(const alarm_args *args)
{
	pg_uuid_t	replica;
	char	   *claim;
	char	   *reason;
	Oid			types[4] = {UUIDOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[4];

	memcpy(replica.data, args->replica, UUID_LEN);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION);
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "magic_sync: recording a refused claim");

	ms_claim_text((ms_claim_call) args->call, (ms_claim_refusal) args->why, args->number, args->a, args->b,
				  &claim, &reason);
	values[0] = UUIDPGetDatum(&replica);
	values[1] = CStringGetTextDatum(claim);
	values[2] = CStringGetTextDatum(reason);
	values[3] = CStringGetTextDatum(sqlstate((ms_claim_refusal) args->why));
	ms_spi_check(SPI_execute_with_args("INSERT INTO sync.refused_claims (replica, claim, reason, sqlstate)"
									   " SELECT $1, $2, $3, $4 FROM sync.replicas WHERE id = $1"
									   " ON CONFLICT (replica) DO UPDATE SET claim = EXCLUDED.claim, reason = EXCLUDED.reason,"
									   "   sqlstate = EXCLUDED.sqlstate, at = EXCLUDED.at",
									   4, types, values, NULL, false, 0), SPI_OK_INSERT, "could not record a refused claim");
	ms_spi_check(SPI_execute_with_args("UPDATE sync.replicas SET last_error = $2 || ': ' || $3, last_error_at = now()"
									   " WHERE id = $1",
									   3, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not record a refused claim");

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* my_slot and my_entry: this worker's slot, and the entry it records now (-1: none) */
static int	my_slot = -1;
static int	my_entry = -1;
/* the role it connected as, for the worker it hands its slot to (no catalog is read at exit) */
static Oid	my_role = InvalidOid;

/*
 * worker_exit: at the worker's exit, whatever ends it, once it left
 * pg_stat_activity (whose hook, registered after this one, runs before it):
 * an entry being recorded is dropped (a worker that failed on it would fail
 * again), the slot given back, to a database left waiting first.
 */
static void
worker_exit(int code, Datum arg)
{
	TimestampTz now = GetCurrentTimestamp();
	Oid			next = InvalidOid;
	int			slot = my_slot;

	(void) code;
	(void) arg;
	if (shared == NULL || my_slot < 0)
		return;
	SpinLockAcquire(&shared->mutex);
	if (my_entry >= 0)
		shared->entries[my_entry].db = InvalidOid;
	if (shared->workers[slot].used && shared->workers[slot].pid == MyProcPid)
	{
		shared->workers[slot].used = false;
		next = waiting_db(shared, now);
		if (next != InvalidOid)
			slot = claim_slot(shared, next, now);
	}
	SpinLockRelease(&shared->mutex);
	my_slot = my_entry = -1;
	if (next != InvalidOid && slot >= 0)
		start(shared, slot, next, my_role);
}

/*
 * ms_alarm_main: the worker of one database.  Records the refused claims
 * waiting in it, the last of each replica, one after another, as the relay
 * worker's role (magic_sync.role; the bootstrap superuser by default:
 * sync_relay has the rights it uses) with search_path pinned: it evaluates
 * no user code.  When none waits, it records no more, and exits.
 */
void
ms_alarm_main(Datum arg)
{
	alarm_start s;
	Oid			db = DatumGetObjectId(arg);
	uint64		recorded = 0;

	memcpy(&s, MyBgworkerEntry->bgw_extra, sizeof s);
	my_role = s.role;
	BackgroundWorkerUnblockSignals();
	attach();
	SpinLockAcquire(&shared->mutex);
	if (shared->workers[s.slot].used && shared->workers[s.slot].db == db && shared->workers[s.slot].pid == 0)
	{
		shared->workers[s.slot].pid = MyProcPid;
		my_slot = s.slot;
	}
	SpinLockRelease(&shared->mutex);
	/* a slot given back meanwhile (this worker took too long to start): another worker has it */
	if (my_slot < 0)
		proc_exit(0);
	/* before the connection: runs after pg_stat_activity's hook, which the connection registers */
	on_shmem_exit(worker_exit, (Datum) 0);
	BackgroundWorkerInitializeConnectionByOid(db, s.role, 0);

	for (;;)
	{
		alarm_args	args = {0};

		CHECK_FOR_INTERRUPTS();
		SpinLockAcquire(&shared->mutex);
		for (int i = 0; i < ALARM_ENTRIES && my_entry < 0; i++)
			if (shared->entries[i].db == db && !shared->entries[i].taken)
			{
				my_entry = i;
				shared->entries[i].taken = true;
				shared->entries[i].again = false;
				args = shared->entries[i].args;
			}
		/*
		 * none waits: it records no more, in the same hold of the mutex as
		 * the look, so a refusal made from now on starts a worker of its own
		 */
		if (my_entry < 0)
			shared->workers[my_slot].db = InvalidOid;
		SpinLockRelease(&shared->mutex);
		if (my_entry < 0)
			break;

		record(&args);
		recorded++;

		SpinLockAcquire(&shared->mutex);
		/* refused again while it was recorded: it waits again, with the newer claim */
		if (shared->entries[my_entry].again)
			shared->entries[my_entry].taken = false;
		else
			shared->entries[my_entry].db = InvalidOid;
		my_entry = -1;
		SpinLockRelease(&shared->mutex);
	}
	ereport(DEBUG1, (errmsg("magic_sync alarm: %llu refused claims recorded", (unsigned long long) recorded)));
	proc_exit(0);
}
