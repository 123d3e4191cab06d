/*-------------------------------------------------------------------------
 * pull_wait.c
 *	  CALL sync.pull_wait(replica, after, timeout_ms): waits until the
 *	  replica's outbox holds a message numbered after `after`, for up to
 *	  timeout_ms (PULL_WAIT_MAX_MS at most).
 *
 * The agent sends it on its listening connection with the ordinary
 * sync.pull right behind it, in one pipeline, each with its own Sync: the
 * backend holds the request when the relay's pass commits, and the pull
 * runs as the wait ends, without the NOTIFY's hop to the agent and the
 * agent's back (docs/protocol.md, the pull).
 *
 * It sleeps on its replica's condition variable (wake.h), which a pass that
 * wrote messages for the replica broadcasts as it commits; woken, it looks
 * again whether a message past `after` is there (a replica that shares the
 * bucket woke it, or nothing yet), by a probe of sync.outbox in a snapshot
 * of its own, let go of before it sleeps again.  A procedure, not a
 * function: a SELECT holds its statement's snapshot, and with it the
 * backend's xmin, for as long as it runs, which holds back vacuum and the
 * pruning of every table for the whole wait.  A procedure called on its own
 * (non-atomic) commits its transaction once it checked the caller
 * (SPI_commit), and with it the CALL's snapshot; nothing it holds across the
 * wait keeps a row version.
 *
 * It checks the caller as sync.pull does (access.c: the replica's role, or
 * sync_admin's), before it waits: a procedure may not be SECURITY DEFINER
 * and commit, so the check reads sync.replicas as the procedure's owner.
 * A role holds one backend for its wait, the one it called on, and no
 * longer than PULL_WAIT_MAX_MS.  A cancel, statement_timeout, the
 * postmaster's death and the client's going away end it; so does a client
 * that closed its connection, looked at every second.
 *
 * Without the shared memory (the library not preloaded) nothing would wake
 * it, and on a hot standby no relay runs: it refuses (55000) at once, and
 * the agent waits for the NOTIFY as before.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/xlog.h"
#include "catalog/pg_proc.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/condition_variable.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
#include "utils/wait_event.h"

#include "access.h"
#include "probe.h"
#include "wake.h"

/* libpq/libpq.h's (PostgreSQL 14 on): that header needs GSSAPI's, not installed here */
extern bool pq_check_connection(void);

PG_FUNCTION_INFO_V1(ms_pull_wait);

#define PULL_WAIT_MAX_MS (10 * 60 * 1000)	/* the agent's longest --interval */
#define CONNECTION_LOOK_MS 1000

static bool
message_past(HeapTuple row, TupleDesc desc, void *arg)
{
	bool	   *found = arg;
	bool		isnull;
	bool		dropped = DatumGetBool(ms_probe_column(row, desc, "dropped", &isnull));

	/* as sync.pull reads them: a message dropped, or its body let go of, is not returned */
	(void) ms_probe_column(row, desc, "body", &isnull);
	*found = !dropped && !isnull;
	return !*found;
}

/*
 * waiting: whether nothing the replica does not have is in its outbox, by
 * a probe in a snapshot taken now; the transaction is committed after it,
 * so that neither the snapshot nor the catalog's outlives the look.
 */
static bool
waiting(pg_uuid_t *replica, int64 after)
{
	bool		found = false;
	ScanKeyData keys[2];

	/* replica, number: sync.outbox's first two columns, its primary key */
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(replica));
	ScanKeyInit(&keys[1], 2, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(after));
	PushActiveSnapshot(GetTransactionSnapshot());
	if (!ms_probe_rows(GetActiveSnapshot(), "outbox", "outbox_pkey", false, 2, keys, message_past, &found))
		elog(ERROR, "magic_sync: the catalog has no sync.outbox");
	PopActiveSnapshot();
	SPI_commit();
	return !found;
}

/* checked: ms_replica_access, as the procedure's owner reads sync.replicas (SECURITY DEFINER's part) */
static void
checked(FunctionCallInfo fcinfo, pg_uuid_t *replica)
{
	HeapTuple	proc = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	Oid			owner;
	Oid			user;
	int			context;

	if (!HeapTupleIsValid(proc))
		elog(ERROR, "cache lookup failed for procedure %u", fcinfo->flinfo->fn_oid);
	owner = ((Form_pg_proc) GETSTRUCT(proc))->proowner;
	ReleaseSysCache(proc);
	GetUserIdAndSecContext(&user, &context);
	/* an error on the way: the transaction's abort restores the user */
	SetUserIdAndSecContext(owner, context | SECURITY_LOCAL_USERID_CHANGE);
	ms_replica_access(replica, "pull");
	SetUserIdAndSecContext(user, context);
}

Datum
ms_pull_wait(PG_FUNCTION_ARGS)
{
	CallContext *call = fcinfo->context != NULL && IsA(fcinfo->context, CallContext)
		? (CallContext *) fcinfo->context : NULL;
	pg_uuid_t	replica;
	int64		after;
	int32		timeout_ms;
	ConditionVariable *cv;
	TimestampTz deadline;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sync.pull_wait takes a replica, a message number and a timeout, none of them null")));
	replica = *PG_GETARG_UUID_P(0);
	after = PG_GETARG_INT64(1);
	timeout_ms = PG_GETARG_INT32(2);
	if (after < 0 || timeout_ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sync.pull_wait takes a message number and a timeout of 0 or more"),
				 errhint("Pass the number of the last message the replica applied, and a timeout in ms.")));
	if (call == NULL || call->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("sync.pull_wait waits only when called on its own"),
				 errdetail("Inside a transaction block, or from a function, it would hold its snapshot through the wait."),
				 errhint("CALL it outside a transaction block, then pull.")));
	cv = ms_wake_wait_of(&replica);
	if (cv == NULL || RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("nothing wakes a waiting pull on this server"),
				 errdetail(RecoveryInProgress() ? "A hot standby runs no relay."
						   : "magic_sync is not in shared_preload_libraries."),
				 errhint("Pull, and LISTEN magic_sync for the relay's notifications.")));

	SPI_connect_ext(SPI_OPT_NONATOMIC);
	checked(fcinfo, &replica);
	/* the CALL's snapshot goes: the backend holds no xmin while it waits */
	SPI_commit();
	timeout_ms = Min(timeout_ms, PULL_WAIT_MAX_MS);
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	/* asleep on it before looking: a pass that commits after the look wakes it */
	ConditionVariablePrepareToSleep(cv);
	while (waiting(&replica, after))
	{
		bool		woken = false;

		for (;;)
		{
			long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

			if (left <= 0)
				break;
			if (!ConditionVariableTimedSleep(cv, Min(left, CONNECTION_LOOK_MS), PG_WAIT_EXTENSION))
			{
				woken = true;
				break;
			}
			/* nobody reads its answer: the backend is let go of now, not at the timeout */
			if (!pq_check_connection())
				ereport(FATAL,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("connection to client lost")));
		}
		if (!woken)
			break;
	}
	ConditionVariableCancelSleep();
	SPI_finish();
	PG_RETURN_VOID();
}
