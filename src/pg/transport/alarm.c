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
 * Bounded: the same claim of the same replica is recorded once a few
 * seconds, never on a standby (nothing is written there), and when no
 * worker slot is free the refusal is only logged.
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
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

#include "claim.h"
#include "settings.h"
#include "updated.h"

PGDLLEXPORT void ms_alarm_main(Datum arg);

/* What the worker is told, in bgw_extra: the claim, by its parts. */
typedef struct alarm_args
{
	uint8		replica[UUID_LEN];
	uint8		call;			/* ms_claim_call */
	uint8		why;			/* ms_claim_refusal */
	int64		number;
	int64		a;
	int64		b;
	Oid			role;			/* magic_sync.role's, as the relay worker connects; InvalidOid: the bootstrap superuser */
} alarm_args;

StaticAssertDecl(sizeof(alarm_args) <= BGW_EXTRALEN, "a refused claim fits in bgw_extra");

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

	if (SPI_execute_with_args("SELECT FROM sync.refused_claims WHERE replica = $1 AND claim = $2 AND reason = $3"
							  " AND at > pg_catalog.clock_timestamp() - interval '10 seconds'",
							  3, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.refused_claims");
	return SPI_processed > 0;
}

void
ms_alarm(const pg_uuid_t *replica, ms_claim_call call, ms_claim_refusal why,
		 int64 number, int64 a, int64 b)
{
	BackgroundWorker w;
	alarm_args	args;
	char	   *claim;
	char	   *reason;

	ms_claim_text(call, why, number, a, b, &claim, &reason);
	ereport(LOG, (errmsg("magic_sync: %s is refused: %s", claim, reason)));
	/* nowhere to record it on a standby, or before ALTER EXTENSION magic_sync UPDATE */
	if (RecoveryInProgress() || !recordable() || recorded_lately(replica, claim, reason))
		return;
	memset(&args, 0, sizeof args);
	memcpy(args.replica, replica->data, UUID_LEN);
	args.call = (uint8) call;
	args.why = (uint8) why;
	args.number = number;
	args.a = a;
	args.b = b;
	args.role = ms_role != NULL && ms_role[0] != '\0' ? get_role_oid(ms_role, true) : InvalidOid;
	memset(&w, 0, sizeof w);
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	w.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(w.bgw_library_name, BGW_MAXLEN, "magic_sync");
	snprintf(w.bgw_function_name, BGW_MAXLEN, "ms_alarm_main");
	snprintf(w.bgw_type, BGW_MAXLEN, "magic_sync alarm");
	snprintf(w.bgw_name, BGW_MAXLEN, "magic_sync alarm in database %u", MyDatabaseId);
	w.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
	memcpy(w.bgw_extra, &args, sizeof args);
	if (!RegisterDynamicBackgroundWorker(&w, NULL))
		ereport(LOG,
				(errmsg("magic_sync: the refusal could not be recorded on the replica: no background worker slot is free"),
				 errhint("Raise max_worker_processes.")));
}

/*
 * ms_alarm_main: the worker.  Records the refusal on the replica, if it is
 * still registered, in one transaction, as the relay worker's role
 * (magic_sync.role; the bootstrap superuser by default: sync_relay has the
 * rights it uses) with search_path pinned: it evaluates no user code.
 */
void
ms_alarm_main(Datum arg)
{
	alarm_args	args;
	pg_uuid_t	replica;
	char	   *claim;
	char	   *reason;
	Oid			types[4] = {UUIDOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[4];

	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof args);
	memcpy(replica.data, args.replica, UUID_LEN);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), args.role, 0);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION);
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "magic_sync: recording a refused claim");

	ms_claim_text((ms_claim_call) args.call, (ms_claim_refusal) args.why, args.number, args.a, args.b,
				  &claim, &reason);
	values[0] = UUIDPGetDatum(&replica);
	values[1] = CStringGetTextDatum(claim);
	values[2] = CStringGetTextDatum(reason);
	values[3] = CStringGetTextDatum(sqlstate((ms_claim_refusal) args.why));
	if (SPI_execute_with_args("INSERT INTO sync.refused_claims (replica, claim, reason, sqlstate)"
							  " SELECT $1, $2, $3, $4 FROM sync.replicas WHERE id = $1"
							  " ON CONFLICT (replica) DO UPDATE SET claim = EXCLUDED.claim, reason = EXCLUDED.reason,"
							  "   sqlstate = EXCLUDED.sqlstate, at = EXCLUDED.at",
							  4, types, values, NULL, false, 0) != SPI_OK_INSERT ||
		SPI_execute_with_args("UPDATE sync.replicas SET last_error = $2 || ': ' || $3, last_error_at = now()"
							  " WHERE id = $1",
							  3, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record a refused claim");

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	proc_exit(0);
}
