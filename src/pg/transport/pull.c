/*-------------------------------------------------------------------------
 * pull.c
 *	  sync.pull(replica, after, max_bytes [, applied]): the transport's way down.
 *
 * Returns, in order, the Filed answers waiting for the replica (number NULL)
 * and the messages of its outbox numbered after `after`, up to max_bytes
 * (always at least one).  Messages stay in the outbox until the replica
 * acknowledges them (sync.file), so a message lost on the way is pulled
 * again: it keeps its number and bytes however often it goes.
 *
 * `after`, with `applied` (what the replica applied: an Applied, as
 * sync_applied() returns it on the replica), is the replica's claim of
 * where it is (claim.h): it may have the replica provisioned again, never
 * move anything shared without a seal that verifies.  Without `applied`, a
 * pull after 0 reads what waits and claims nothing.
 *
 * On a hot standby (RecoveryInProgress()) a pull only reads: it checks no
 * claim, marks no answer, counts no send.  A standby's record lags the
 * primary's, so what a replica claims beyond it is no news there; the
 * replica's own chain, epoch and generation keep it from applying anything
 * out of order, and the primary checks its claims when it files (ack.c) and
 * when the agent pulls from it (at its start, after a failure).  An answer
 * goes out from a standby until the primary learns, from the replica's next
 * filing, that it was received (ack.c), during the minute after it was
 * filed; past that the primary gives it.
 *
 * A standby whose replay stays behind the WAL it received (paused, waiting
 * on a query in conflict with it, or slower than the primary writes) for
 * longer than magic_sync.standby_lag refuses the pull, transiently: its
 * replicas would otherwise wait on it unnoticed until their agent's next
 * pull from the primary, up to 10 minutes later.
 *
 * A caught-up pull on the primary writes nothing either: the replica's row
 * is locked only when its claim says something is to be written.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/xlogrecovery.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "replication/walreceiver.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/uuid.h"

#include "access.h"
#include "bytes.h"
#include "claim.h"
#include "probe.h"
#include "rewind.h"
#include "sent.h"
#include "spi_check.h"
#include "wake.h"
#include "settings.h"
#include "wire.h"

PG_FUNCTION_INFO_V1(ms_pull);

/* What sync.replicas records of the replica, locked for the pull. */
typedef struct pull_record
{
	int64		last;			/* the last message written for it */
	int64		acked;			/* the last it acknowledged */
	bool		provision;
	bool		snapshot_due;	/* a snapshot written since its last acknowledgement is on its way */
} pull_record;

static void
read_record(pg_uuid_t *replica, const char *id, bool lock, pull_record *r)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(replica)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;

	/* where its chain is: a worker's pass copies it after its commit (MS_HEAD) */
	ms_spi_check(ms_spi_run(lock ? "SELECT " MS_HEAD("r") ", acked_number, provision,"
									   " coalesce(snapshot_number > acked_number, false) FROM sync.replicas r"
									   " WHERE id = $1 FOR UPDATE"
									   : "SELECT " MS_HEAD("r") ", acked_number, provision,"
									   " coalesce(snapshot_number > acked_number, false) FROM sync.replicas r"
									   " WHERE id = $1",
									   1, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.replicas");
	/* dropped, and forgotten by a pass, since ms_replica_access found it */
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replica %s was dropped", id),
				 errdetail("It was dropped while it pulled: nothing is sent to it any more."),
				 errhint("Register it again with sync.replica_add('%s') to provision it from scratch.", id)));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	r->last = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	r->acked = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
	r->provision = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
	r->snapshot_due = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
	SPI_freetuptable(SPI_tuptable);
}

/* what a probe of the replica's row found (record_probe) */
typedef struct record_row
{
	bool		found;
	int64		last_number;
	int64		acked;
	bool		snapshot_due;
} record_row;

static bool
record_probe(HeapTuple row, TupleDesc desc, void *arg)
{
	record_row *r = arg;
	bool		isnull;
	Datum		snapshot = ms_probe_column(row, desc, "snapshot_number", &isnull);

	r->acked = DatumGetInt64(ms_probe_column(row, desc, "acked_number", &isnull));
	r->snapshot_due = !isnull && DatumGetInt64(snapshot) > r->acked;
	r->last_number = DatumGetInt64(ms_probe_column(row, desc, "last_number", &isnull));
	r->found = true;
	return false;
}

/*
 * caught_up: whether the replica's record, as the access check's probe read
 * its row (record_probe, no statement: issue 37), says that a pull after
 * `after` writes nothing.  Its chain's head is at least last_number and
 * acked_number: at or before them, the outbox's last number is not needed.
 * That probe reads by the caller's snapshot, where read_record's statement
 * would take a new one under READ COMMITTED: a commit between the two could
 * only be one that moved the record on since the pull's statement began,
 * and one a moment later is missed by either look alike -- what is to be
 * written is decided under the row's lock (read_record's FOR UPDATE).
 */
static bool
caught_up(const record_row *r, int64 after)
{
	return r->found && after <= Max(r->last_number, r->acked) && !(after < r->acked && !r->snapshot_due);
}

/*
 * ahead: the replica claims message `after`, beyond the last this server
 * wrote for it.  Believed only with a seal that verifies: the server's
 * database was restored from an older copy, or a standby that lagged was
 * promoted (docs/design.md 4.8).  The server numbers again from where its
 * copy left off, and the replica applies nothing numbered at or below what
 * it applied -- a snapshot of the same generation included, or an old
 * snapshot delivered twice could take it back in time.  So the sequence
 * moves past `after` (a bounded distance at most), and the replica is
 * provisioned again: its snapshot is numbered beyond anything it applied.
 * Of an epoch this server never had, or one that ended, nothing needs to
 * move: a snapshot of the current epoch applies whatever its number.
 * Returns why it is provisioned again.
 */
static char *
ahead(pg_uuid_t *replica, const char *id, int64 after, int64 last, Sync__Applied *a)
{
	if (a == NULL || a->seal.len == 0)
		ms_claim_refuse(replica, MS_CLAIM_PULL, MS_CLAIM_NO_SEAL, after, last, 0);
	switch (ms_claim_check(replica, a, after))
	{
		case MS_SEAL_UNKNOWN_EPOCH:
			return psprintf("replica %s pulls after message " INT64_FORMAT " of an epoch this server never had"
							" (was the server restored from before its last epoch?): provisioned again", id, after);
		case MS_SEAL_FORGED:
			ms_claim_refuse(replica, MS_CLAIM_PULL, MS_CLAIM_BAD_SEAL, after, 0, 0);
			break;
		case MS_SEAL_CURRENT:
			ms_claim_believe(replica, MS_CLAIM_PULL, after);
			break;
		case MS_SEAL_PAST_EPOCH:
			break;
	}
	return psprintf("replica %s pulls after message " INT64_FORMAT ", which this server never wrote for it"
					" (its last is " INT64_FORMAT "): the server was restored from an older copy, or a standby"
					" promoted: provisioned again", id, after, last);
}

/*
 * beyond_the_record: what a pull says of the replica's file and of the
 * server.  `after` is the last message the replica says it applied, `a`
 * what it says of it (NULL when it said nothing).
 * Beyond what the server wrote for it: ahead().  Before what it
 * acknowledged -- 0 included, a blank file -- its file was lost, or restored
 * from an older copy: it is provisioned again, unless a snapshot is on its
 * way already.
 */
static void
beyond_the_record(pg_uuid_t *replica, int64 after, Sync__Applied *a, const record_row *rec)
{
	Oid			types[3] = {UUIDOID, INT8OID, TEXTOID};
	Datum		values[3] = {UUIDPGetDatum(replica), Int64GetDatum(after), (Datum) 0};
	pull_record r;
	char	   *why = NULL;
	char	   *id;
	bool		found = rec->found;
	bool		done;

	/* a read from the start, with nothing said of what the replica applied */
	if (after == 0 && a == NULL)
		return;
	done = caught_up(rec, after);
	/* gone: it says so (the replica was dropped while it pulled) */
	if (!found)
		read_record(replica, DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(replica))), false, &r);
	if (a != NULL)
	{
		ms_epoch	e;

		if (ms_epoch_read(&e))
			ms_claim_superseded(replica, MS_CLAIM_PULL, &e, a, after);
	}
	/* a caught-up pull writes nothing: the row is locked only when something is to be */
	if (done)
		return;
	id = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(replica)));
	if (found)
		read_record(replica, id, false, &r);
	if (after <= r.last && !(after < r.acked && !r.snapshot_due))
		return;
	read_record(replica, id, true, &r);
	if (after > r.last)
		why = ahead(replica, id, after, r.last, a);
	else if (after < r.acked && !r.snapshot_due && after > 0 && ms_rewind(replica, id, a))
		return;					/* restored: what went after its copy goes again (rewind.c) */
	else if (after < r.acked && !r.snapshot_due)
		why = after == 0
			? psprintf("replica %s pulls having applied nothing, before the " INT64_FORMAT " it acknowledged:"
					   " its file is new or was lost: provisioned again", id, r.acked)
			: psprintf("replica %s pulls after message " INT64_FORMAT ", before the " INT64_FORMAT " it acknowledged:"
					   " its file was restored from an older copy: provisioned again", id, after, r.acked);
	if (why == NULL || r.provision)
		return;
	values[2] = CStringGetTextDatum(why);
	ms_spi_check(ms_spi_run("UPDATE sync.replicas SET provision = true, last_error = $3,"
									   " last_error_at = now() WHERE id = $1",
									   3, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not mark a replica to provision");
	ereport(LOG, (errmsg("magic_sync: %s", why)));
}

/*
 * replay_behind_ms: how long a hot standby's replay has stayed behind the
 * WAL it received, in ms; 0 when it keeps up.  PostgreSQL's own measure for
 * max_standby_streaming_delay: when the startup process began on the WAL it
 * replays, which it moves on only once it has replayed all it had received
 * (GetCurrentChunkReplayStartTime), on this server's clock.
 */
static int64
replay_behind_ms(XLogRecPtr *received, XLogRecPtr *replayed)
{
	TimestampTz began = GetCurrentChunkReplayStartTime();

	*received = GetWalRcvFlushRecPtr(NULL, NULL);
	*replayed = GetXLogReplayRecPtr(NULL);
	if (*received <= *replayed || began == 0)
		return 0;
	return (GetCurrentTimestamp() - began) / 1000;
}

/*
 * standby_keeps_up: on a hot standby, refuses the pull (57P03, transient:
 * the agent pulls from the next standby or the primary, and comes back
 * later) while replay has stayed behind for longer than
 * magic_sync.standby_lag.  WAL that arrives after a quiet spell is behind
 * from the moment it is received to the moment the startup process takes
 * it: looked at again for up to 100 ms, that does not count.
 */
static void
standby_keeps_up(void)
{
	XLogRecPtr	received;
	XLogRecPtr	replayed;
	int64		behind;

	if (ms_standby_lag == 0)
		return;
	for (int looks = 1; (behind = replay_behind_ms(&received, &replayed)) > (int64) ms_standby_lag * 1000; looks++)
	{
		if (looks > 10)
			ereport(ERROR,
					(errcode(ERRCODE_CANNOT_CONNECT_NOW),
					 errmsg("this standby's replay has stayed behind the WAL it received for %lld s: pull from the primary",
							(long long) (behind / 1000)),
					 errdetail("It received WAL up to %X/%X and replayed up to %X/%X%s; magic_sync.standby_lag is %d s.",
							   LSN_FORMAT_ARGS(received), LSN_FORMAT_ARGS(replayed),
							   GetRecoveryPauseState() != RECOVERY_NOT_PAUSED ? ", and its replay is paused" : "",
							   ms_standby_lag),
					 errhint("The agent pulls from the next --pull, or the primary, and tries this standby again 30 s later."
							 "  What holds replay: pg_get_wal_replay_pause_state(), a query in conflict with it (max_standby_streaming_delay).")));
		pg_usleep(10000L);
		CHECK_FOR_INTERRUPTS();
	}
}

/* claim: what the replica says it applied, decoded; NULL when it said nothing */
static Sync__Applied *
claim(FunctionCallInfo fcinfo)
{
	bytea	   *b;
	Sync__Applied *a;
	char		reason[MS_REASON_MAX];

	if (PG_NARGS() < 4 || PG_ARGISNULL(3))
		return NULL;
	b = PG_GETARG_BYTEA_PP(3);
	a = ms_applied_decode((const uint8_t *) VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), ms_pg_allocator(), reason);
	if (a == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("what the replica applied is not an Applied message"),
				 errdetail("%s.", reason),
				 errhint("Pass what sync_applied() returns on the replica, as it is.")));
	return a;
}

/*
 * received_recorded: whether the catalog records answers received
 * (sync.answers.received); one not updated yet (ALTER EXTENSION magic_sync
 * UPDATE) does not, and its answers go out as they did.
 */
static bool
received_recorded(void)
{
	Oid			ns = get_namespace_oid("sync", true);
	Oid			rel = OidIsValid(ns) ? get_relname_relid("answers", ns) : InvalidOid;

	return OidIsValid(rel) && get_attnum(rel, "received") != InvalidAttrNumber;
}

/* answers_sql: the answers a pull gives, on a standby (read) or the primary (marked) */
static const char *
answers_sql(bool standby, bool received)
{
	if (standby)
		return received
			? "SELECT NULL::bigint, message FROM sync.answers"
			" WHERE replica = $1 AND received IS NULL AND filed > now() - interval '1 minute' ORDER BY filed"
			: "SELECT NULL::bigint, message FROM sync.answers"
			" WHERE replica = $1 AND filed > now() - interval '1 minute' ORDER BY filed";
	return received
		? "WITH a AS (UPDATE sync.answers SET pulled = now()"
		" WHERE replica = $1 AND received IS NULL"
		" AND (pulled IS NULL"
		"      OR (pulled < now() - interval '1 minute' AND filed > now() - interval '1 hour'))"
		" RETURNING filed, message)"
		" SELECT NULL::bigint, message FROM a ORDER BY filed"
		: "WITH a AS (UPDATE sync.answers SET pulled = now()"
		" WHERE replica = $1 AND (pulled IS NULL OR pulled < now() - interval '1 minute')"
		" RETURNING filed, message)"
		" SELECT NULL::bigint, message FROM a ORDER BY filed";
}

/*
 * answers_waiting: whether an answer of the replica may be given: not
 * received, and given never or over a minute ago (the primary), filed
 * within the minute (a standby).  Read by a probe, as answers_sql's
 * statement sees them (the primary's writes, at a new command; a
 * standby's reads, by the caller's snapshot): almost every pull finds
 * none, and runs no statement (issue 37).  It says what may be given, the
 * statement what is.
 */
typedef struct answers_look
{
	bool		standby;
	TimestampTz minute_ago;
	bool		any;
} answers_look;

static bool
answer_row(HeapTuple row, TupleDesc desc, void *arg)
{
	answers_look *l = arg;
	bool		isnull;
	Datum		d;

	/* a catalog not updated (no received) records none received */
	(void) ms_probe_column(row, desc, "received", &isnull);
	if (!isnull)
		return true;
	d = ms_probe_column(row, desc, l->standby ? "filed" : "pulled", &isnull);
	if (l->standby)
		l->any = DatumGetTimestampTz(d) > l->minute_ago;
	else
		l->any = isnull || DatumGetTimestampTz(d) < l->minute_ago;
	return !l->any;
}

static bool
answers_waiting(pg_uuid_t *replica, bool standby)
{
	answers_look l = {.standby = standby,
	.minute_ago = GetCurrentTransactionStartTimestamp() - 60 * USECS_PER_SEC};
	ScanKeyData key;
	bool		looked;

	/* replica: sync.answers' first column, its primary key's first */
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(replica));
	looked = standby
		? ms_probe_rows(GetActiveSnapshot(), "answers", "answers_pkey", true, 1, &key, answer_row, &l)
		: ms_probe_now_keyed("answers", "answers_pkey", 1, &key, answer_row, &l);
	/* no such table: the statement says */
	return !looked || l.any;
}

/* What a pull returns so far, and what it says of sent.c's last. */
typedef struct pulling
{
	ReturnSetInfo *rsinfo;
	int32		max_bytes;
	int64		total;
	int64		last;			/* the last message returned (after, none) */
	int64		last_body;
	int64		sent_through;	/* the last message a pull returned before (sent.c) */
	int64		sent_body;
	bool		sent_again;		/* that message is among these, the same one */
	bool		sent_other;		/* its number is, another message (the replica added again) */
} pulling;

static bool
body_row(HeapTuple row, TupleDesc desc, void *arg)
{
	bytea	  **out = arg;
	bool		isnull;
	Datum		d = ms_probe_column(row, desc, "bytes", &isnull);

	*out = isnull ? NULL : DatumGetByteaPCopy(d);
	return false;
}

/* body_of: message number's body, by its key (id: sync.bodies' first column, its primary key) */
static bytea *
body_of(int64 number, int64 id)
{
	bytea	   *bytes = NULL;
	ScanKeyData key;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(id));
	if (!ms_probe_rows(GetActiveSnapshot(), "bodies", "bodies_pkey", true, 1, &key, body_row, &bytes))
		elog(ERROR, "magic_sync: the catalog has no sync.bodies");
	if (bytes == NULL)
		elog(ERROR, "message %lld has no body", (long long) number);
	return bytes;
}

/* message_row: a message of the outbox, in order: returned while the bound lets it */
static bool
message_row(HeapTuple row, TupleDesc desc, void *arg)
{
	pulling    *p = arg;
	bool		isnull;
	Datum		d = ms_probe_column(row, desc, "body", &isnull);
	int64		number;
	int64		id;
	int32		size;
	bytea	   *head;
	bytea	   *bytes;
	bytea	   *m;

	/* dropped (replaced by a snapshot), or its body let go of */
	if (isnull || DatumGetBool(ms_probe_column(row, desc, "dropped", &isnull)))
		return true;
	id = DatumGetInt64(d);
	number = DatumGetInt64(ms_probe_column(row, desc, "number", &isnull));
	size = DatumGetInt32(ms_probe_column(row, desc, "bytes", &isnull));
	/* what it says it weighs (its head and body, record.c): one that cannot fit is not read */
	if (p->total > 0 && p->total + (int64) size > p->max_bytes)
		return false;
	head = DatumGetByteaPCopy(ms_probe_column(row, desc, "head", &isnull));
	bytes = body_of(number, id);
	/* always at least one message, then only what fits */
	if (p->total > 0 && p->total + (int64) (VARSIZE_ANY_EXHDR(head) + VARSIZE_ANY_EXHDR(bytes)) > p->max_bytes)
		return false;
	m = ms_bytea_new(VARSIZE_ANY_EXHDR(head) + VARSIZE_ANY_EXHDR(bytes));
	memcpy(VARDATA(m), VARDATA_ANY(head), VARSIZE_ANY_EXHDR(head));
	memcpy(VARDATA(m) + VARSIZE_ANY_EXHDR(head), VARDATA_ANY(bytes), VARSIZE_ANY_EXHDR(bytes));
	p->total += VARSIZE_ANY_EXHDR(m);
	p->last = number;
	p->last_body = id;
	if (number == p->sent_through)
	{
		p->sent_again = id == p->sent_body;
		p->sent_other = id != p->sent_body;
	}
	{
		Datum		out[2] = {Int64GetDatum(number), PointerGetDatum(m)};
		bool		nulls[2] = {false, false};

		tuplestore_putvalues(p->rsinfo->setResult, p->rsinfo->setDesc, out, nulls);
	}
	/* the tuplestore has its copy: a pull holds one message at a time */
	pfree(m);
	pfree(head);
	pfree(bytes);
	return p->total < p->max_bytes;
}

/*
 * inserted: the end of the WAL inserted so far.  GetXLogInsertRecPtr()
 * says where the next record goes, past the header of a page not written
 * yet when the last one ended the page before: no flush reaches there.
 */
static XLogRecPtr
inserted(void)
{
	XLogRecPtr	at = GetXLogInsertRecPtr();

	if (XLogSegmentOffset(at, wal_segment_size) == SizeOfXLogLongPHD)
		return at - SizeOfXLogLongPHD;
	if (at % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		return at - SizeOfXLogShortPHD;
	return at;
}

/*
 * materialize: the result's tuplestore, kept in memory up to the bound
 * asked (and a message past it), up to PULL_MEMORY_KB: at work_mem's
 * 4 MB, the agent's 4 MB batches were written to a temporary file and
 * read back, a third of a snapshot's pull (bench/firstsync.py)
 */
#define PULL_MEMORY_KB (64 * 1024)

static void
materialize(FunctionCallInfo fcinfo, int32 max_bytes)
{
	int			kept = work_mem;

	work_mem = Max(work_mem, Min(max_bytes / 1024, PULL_MEMORY_KB) + 1024);
	PG_TRY();
	{
		InitMaterializedSRF(fcinfo, 0);
	}
	PG_FINALLY();
	{
		work_mem = kept;
	}
	PG_END_TRY();
}

/*
 * ms_pull: sync.pull(replica uuid, after bigint, max_bytes int [, applied
 * bytea]) returns table(number bigint, message bytea).
 */
Datum
ms_pull(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	pg_uuid_t  *replica;
	int64		after;
	int32		max_bytes;
	Oid			types[2] = {UUIDOID, INT8OID};
	Datum		values[2];
	int64		last;
	pulling		p = {0};
	ScanKeyData keys[2];
	Sync__Applied *applied;
	bool		standby = RecoveryInProgress();
	int64		sent_through = 0;	/* the last message a pull returned before (sent.c) */
	int64		sent_body = 0;
	bool		sent_known;
	bool		sent_again = false; /* that message is among these, the same one */
	bool		sent_other = false; /* its number is, another message (the replica added again) */
	int64		last_body = 0;
	Oid			outbox = InvalidOid;
	record_row	record = {0};

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sync.pull takes a replica, a message number and a byte bound, none of them null"),
				 errhint("Pull from 0 to start: SELECT * FROM sync.pull(replica, 0).")));
	replica = PG_GETARG_UUID_P(0);
	after = PG_GETARG_INT64(1);
	max_bytes = PG_GETARG_INT32(2);
	if (after < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot pull after message %lld", (long long) after),
				 errdetail("Messages are numbered from 1."),
				 errhint("Pass the number of the last message the replica applied, or 0.")));
	if (max_bytes < 1024)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_bytes %d is out of range", max_bytes),
				 errdetail("sync.pull returns at least 1024 bytes' worth of messages, and at least one message."),
				 errhint("Pass a bound of 1024 bytes or more.")));

	materialize(fcinfo, max_bytes);
	SPI_connect();
	/* the replica's record read with the check: caught_up's look */
	ms_replica_access_row(replica, "pull", record_probe, &record);
	if (standby)
		standby_keeps_up();
	values[0] = UUIDPGetDatum(replica);
	applied = claim(fcinfo);
	/* a standby's record lags: claims are the primary's to check */
	if (!standby)
		beyond_the_record(replica, after, applied, &record);
	values[1] = Int64GetDatum(after);
	last = after;
	if (!standby)
		outbox = get_relname_relid("outbox", get_namespace_oid("sync", false));
	sent_known = !standby && ms_sent_last(replica, outbox, &sent_through, &sent_body);

	/*
	 * Answers first, in the order they were filed: queued only once their
	 * filing committed.  Each answer once, and again a minute after it was
	 * last given, for an hour after it was filed, in case a pull was lost on
	 * its way -- until the replica's filings show it was received (ack.c).
	 * A standby marks nothing: it gives an answer not received at every pull
	 * during the minute after it was filed; past that, the primary's pulls
	 * give it (an agent pulls from the primary when it starts or reconnects,
	 * and every 10 minutes).
	 */
	if (answers_waiting(replica, standby))
	{
		ms_spi_check(ms_spi_run(answers_sql(standby, received_recorded()),
								1, types, values, NULL, standby, 0), SPI_OK_SELECT, "could not read sync.answers");
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			Datum		out[2];
			bool		nulls[2] = {true, false};
			bool		isnull;

			out[1] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
		}
	}

	/*
	 * The messages in order first, without their bodies; then each one's
	 * body by its key, for a message returned only.  Read with the messages
	 * and put in order with them, every body not yet applied was read, and
	 * sorted on disk: 100 MB for an agent 400 messages behind, to return the
	 * 17 its bound let through.  By its key: a join may be planned as a scan
	 * of sync.bodies while its statistics lag (thousands of snapshots just
	 * written, docs/scale.md).  Both read by their primary keys, in
	 * sync.outbox's order, as a read-only statement sees them (the caller's
	 * snapshot): probes, no statement (issue 37).
	 */
	p.rsinfo = rsinfo;
	p.max_bytes = max_bytes;
	p.last = after;
	p.sent_through = sent_through;
	p.sent_body = sent_body;
	/* replica, number: sync.outbox's first two columns, its primary key */
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(replica));
	ScanKeyInit(&keys[1], 2, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(after));
	if (!ms_probe_rows(GetActiveSnapshot(), "outbox", "outbox_pkey", true, 2, keys, message_row, &p))
		elog(ERROR, "magic_sync: the catalog has no sync.outbox");
	last = p.last;
	last_body = p.last_body;
	sent_again = p.sent_again;
	sent_other = p.sent_other;

	/*
	 * What it returns is flushed first: the worker's passes commit without
	 * waiting for their flush (relay/worker.c), so that the pulls they wake
	 * work while it runs: the worker begins it as the pulls wake, when one
	 * was held, or just after its NOTIFY (wake.c).  Up to the end of the
	 * worker's pass that wrote the last message returned (wake.h): this
	 * waits for that flush, or finds it done, and for no WAL another session
	 * is writing.  When wake.h cannot say (a pass by hand, or the worker has
	 * yet to say), up to all the WAL inserted by now: every pass this
	 * snapshot sees inserted its commit record before it became visible.  A
	 * standby replays only what its primary flushed.
	 */
	if (last > after && !standby)
	{
		XLogRecPtr	end;

		XLogFlush(ms_wake_committed_by(last, &end) ? end : inserted());
	}

	/*
	 * each message counts the times it went out: a send that keeps failing
	 * shows (sync.live_replicas).  Only the primary counts: the agent pulls
	 * from it again after a message failed to apply.  A first send is no
	 * news (pulls 0 and 1 both say no send failed): what sent.c says went
	 * out before counts, the rest writes nothing -- no row version, no WAL,
	 * between a write and its device.  Where it cannot say, every message
	 * returned counts, as each send did.
	 */
	if (last > after && !standby)
	{
		Oid			utypes[3] = {UUIDOID, INT8OID, INT8OID};
		Datum		uvalues[3] = {values[0], values[1], Int64GetDatum(last)};

		if (sent_known && sent_through <= after)
			;					/* all of them first sends */
		else if (sent_known && sent_again)
		{
			uvalues[2] = Int64GetDatum(sent_through);
			ms_spi_check(ms_spi_run("UPDATE sync.outbox SET pulls = greatest(pulls, 1) + 1"
									" WHERE replica = $1 AND number > $2 AND number <= $3 AND NOT dropped",
									3, utypes, uvalues, NULL, false, 0), SPI_OK_UPDATE, "could not count the pulls of sync.outbox");
		}
		else
			ms_spi_check(ms_spi_run("UPDATE sync.outbox SET pulls = pulls + 1"
									" WHERE replica = $1 AND number > $2 AND number <= $3 AND NOT dropped",
									3, utypes, uvalues, NULL, false, 0), SPI_OK_UPDATE, "could not count the pulls of sync.outbox");
		ms_sent_record(replica, outbox, last, last_body, sent_other);
	}
	SPI_finish();
	return (Datum) 0;
}
