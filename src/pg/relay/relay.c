/*-------------------------------------------------------------------------
 * relay.c
 *	  A relay pass (docs/design.md 4): observe what became of the replicas; record,
 *	  in one transaction on the connection holding the relay lock, the plan
 *	  for every note not done, the messages that carry it and what they
 *	  carry; publish: NOTIFY magic_sync with the replicas that have new
 *	  messages, delivered when the pass commits.
 *
 * Recorded before it is sent: nothing is in an outbox that is not recorded
 * as held, in the transaction that marks its notes done.  A pass that dies
 * before its commit leaves nothing; the next one plans the same notes.  A
 * relay that loses its lock's connection loses the transaction with it, so
 * it can never commit over the relay that took the lock.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "batch.h"
#include "catalog.h"
#include "load.h"
#include "observe.h"
#include "park.h"
#include "plan.h"
#include "record.h"
#include "schema.h"
#include "relay.h"
#include "settings.h"
#include "transient.h"

PG_FUNCTION_INFO_V1(ms_relay_pass_sql);

bool
ms_relay_try_lock(bool session)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, MS_RELAY_LOCK_KEY1, MS_RELAY_LOCK_KEY2, 2);
	return LockAcquire(&tag, ExclusiveLock, session, true) != LOCKACQUIRE_NOT_AVAIL;
}

/* the relay refuses to run while sync.check() reports a problem */
static void
refuse_unless_checked(ms_pass *p)
{
	bool		isnull;
	Datum		d;

	ms_exec(p, "SELECT string_agg(c.detail, ' ') FROM sync.check() c",
			0, NULL, NULL, NULL, 0);
	d = ms_value(0, 1, &isnull);
	if (!isnull)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the relay will not run while sync.check() reports a problem"),
				 errdetail("%s", TextDatumGetCString(d)),
				 errhint("SELECT * FROM sync.check() says what to fix; sync.retrigger(table) writes its triggers again.")));
}

/* set aside rows that cannot go, until a change or a fix lets them through */
static void
quarantine(ms_pass *p, List *bad)
{
	Oid			types[4] = {INT4OID, TEXTOID, TEXTOID, TEXTOID};
	SPIPlanPtr	plan = ms_prepare(
								  "INSERT INTO sync.quarantine (tab, key, note, reason, sqlstate)"
								  " VALUES ($1, $2, coalesce((SELECT note FROM ms_pending WHERE tab = $1 AND key = $2), 0), $3, $4)"
								  " ON CONFLICT (tab, key) DO UPDATE SET note = EXCLUDED.note,"
								  " reason = EXCLUDED.reason, sqlstate = EXCLUDED.sqlstate, since = now()",
								  4, types);
	ListCell   *lc;

	foreach(lc, bad)
	{
		ms_bad	   *b = lfirst(lc);
		Datum		values[4];
		ms_table   *t;

		values[0] = Int32GetDatum(b->tab);
		values[1] = CStringGetTextDatum(b->key);
		values[2] = CStringGetTextDatum(b->reason);
		values[3] = CStringGetTextDatum(unpack_sql_state(b->sqlerrcode));
		ms_run(p, plan, values, NULL, 0);
		t = ms_catalog_find(p->tables, b->tab);
		ereport(WARNING,
				(errmsg("magic_sync: a row of table \"%s\" cannot go and is quarantined",
						t ? t->name : "?"),
				 errdetail("Key %s: %s", b->key, b->reason),
				 errhint("It goes once it changes or a fix lets it through; SELECT * FROM sync.quarantine lists it.")));
	}
	p->quarantined += list_length(bad);
}

/*
 * record: plan and record in a subtransaction; when rows cannot go, undo
 * it, set them aside, and plan again around them.  When it fails for good,
 * the failure is narrowed down to the notes it is about, which are parked
 * (park.c), and the rest planned again; a failure about no note fails the
 * pass.
 */
static void
record(ms_pass *p, ArrayType *replicas, ArrayType *provisioning)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	for (;;)
	{
		List	   *volatile bad = NIL;
		ErrorData  *volatile failure = NULL;
		ms_pass		before = *p;

		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			p->rows_sent = p->rows_taken = p->messages = 0;
			ms_plan(p, replicas, provisioning);
			bad = ms_record(p, replicas, provisioning);
		}
		PG_CATCH();
		{
			/* never let an error out with the subtransaction open: the caller's session would be left aborted */
			MemoryContextSwitchTo(cxt);
			failure = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
		}
		PG_END_TRY();
		if (failure != NULL)
		{
			*p = before;
			if (ms_transient(failure->sqlerrcode) || !ms_park(p, &replicas, &provisioning))
				ReThrowError(failure);
			FreeErrorData(failure);
			continue;
		}
		if (bad == NIL)
		{
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
			return;
		}
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		p->provisioned = before.provisioned;
		quarantine(p, bad);
	}
}

/* replicas whose outbox outgrew its bounds are provisioned again, with an alarm */
static void
outbox_bounds(ms_pass *p)
{
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(ms_outbox_messages),
	Int64GetDatum((int64) ms_outbox_bytes * 1024)};

	ms_exec(p,
			"UPDATE sync.replicas r SET provision = true, last_error_at = now(),"
			" last_error = format('the outbox outgrew its bounds (%s messages, %s bytes beyond its snapshot;"
			" magic_sync.outbox_messages = %s, magic_sync.outbox_bytes = %s kB): provisioned again',"
			"   b.n, b.s, $1, $2 / 1024)"
			" FROM (SELECT o.replica, count(*) AS n, sum(o.bytes) AS s FROM sync.outbox o"
			"       JOIN sync.replicas x ON x.id = o.replica"
			"      WHERE NOT o.dropped AND o.number > coalesce(x.snapshot_end, 0) GROUP BY o.replica) b"
			" WHERE r.id = b.replica AND NOT r.provision AND (b.n > $1 OR b.s > $2)",
			2, types, values, NULL, 0);
	if (SPI_processed > 0)
		ereport(WARNING,
				(errmsg("magic_sync: %llu replicas' outboxes outgrew their bounds; they are provisioned again",
						(unsigned long long) SPI_processed),
				 errhint("A replica that takes its messages too slowly, or not at all, is sent a snapshot instead.")));
}

/* publish: NOTIFY magic_sync, delivered at commit, with the replicas written to */
static void
publish(ms_pass *p)
{
	/* a NOTIFY payload holds fewer than 8000 bytes: 200 uuids at a time */
	ms_exec(p,
			"SELECT pg_notify('magic_sync', string_agg(id::text, ',')) FROM ("
			"  SELECT id, (row_number() OVER (ORDER BY id) - 1) / 200 AS g FROM pg_temp.ms_written) s"
			" GROUP BY g",
			0, NULL, NULL, NULL, 0);
}

/*
 * schema: the schema a snapshot carries (Begin), packed once for the pass,
 * and its SHA-256.  A replica provisioned with another (a table declared,
 * dropped or changed since) is provisioned again, so it has every table it
 * may be sent.
 */
static void
schema(ms_pass *p)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	initStringInfo(&p->begin);
	ms_schema_pack(p->tables, &p->begin);
	p->schema_hash = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	SET_VARSIZE(p->schema_hash, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (uint8 *) p->begin.data, p->begin.len) < 0 ||
		pg_cryptohash_final(ctx, (uint8 *) VARDATA(p->schema_hash), PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute a SHA-256 of the schema");
	pg_cryptohash_free(ctx);
}

/* the replicas a note may move: every live one, but a snapshot that failed a minute ago */
static ArrayType *
live_replicas(ms_pass *p)
{
	ms_exec(p, "SELECT array_agg(id) FROM sync.replicas WHERE live AND NOT dropped"
			" AND NOT (provision AND coalesce(provision_failed_at >= now() - interval '1 minute', false))",
			0, NULL, NULL, NULL, 0);
	return ms_array();
}

void
ms_relay_pass(ms_pass *p)
{
	ArrayType  *provisioning;
	ArrayType  *replicas = NULL;
	int64		notes;

	/* one snapshot for the whole pass, whose writes never land on newer versions (pass.h) */
	if (!IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("sync.relay_pass() needs a REPEATABLE READ transaction"),
				 errdetail("A pass plans and records in one snapshot; under READ COMMITTED, what it records over a row changed since would land on the newer version."),
				 errhint("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM sync.relay_pass(); COMMIT;")));
	SPI_connect();
	ms_pass_begin(p, p->cxt);
	/* the relay reads each table as its owner: its code runs with no other rights */
	p->as_owners = true;
	refuse_unless_checked(p);
	/* the catalog, read once: every part of the pass is handed this list */
	p->tables = ms_catalog_tables();
	schema(p);
	ms_epoch_current(&p->epoch);
	provisioning = ms_observe(p);
	ms_plan_prepare(p);
	notes = ms_batch_read(p);
	p->notes_read = notes;

	/* every live replica may be moved by a note; otherwise only those provisioned */
	if (notes > 0)
		replicas = live_replicas(p);
	else if (provisioning != NULL)
		replicas = provisioning;
	if (provisioning == NULL)
		provisioning = construct_empty_array(UUIDOID);

	if (replicas != NULL)
	{
		ms_temp_table(p, "ms_written", "id uuid PRIMARY KEY");
		record(p, replicas, provisioning);
		outbox_bounds(p);
		publish(p);
	}
	if (notes > 0)
		ms_batch_done(p);
	ms_pass_end(p);
	SPI_finish();
}

/*
 * ms_relay_pass_sql: sync.relay_pass() runs one pass in the caller's
 * transaction, under the relay lock, and says what it did.
 */
Datum
ms_relay_pass_sql(PG_FUNCTION_ARGS)
{
	ms_pass		p;
	TupleDesc	desc;
	Datum		values[7];
	bool		nulls[7] = {0};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "sync.relay_pass must return a composite type");
	if (!ms_relay_try_lock(false))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("another relay holds the relay lock"),
				 errdetail("One relay runs at a time in a database: the background worker, or another sync.relay_pass()."),
				 errhint("Wait for it, or wake it with SELECT sync.wake().")));
	p.cxt = CurrentMemoryContext;
	ms_relay_pass(&p);
	values[0] = Int64GetDatum(p.notes_read);
	values[1] = Int64GetDatum(p.provisioned);
	values[2] = Int64GetDatum(p.forgotten);
	values[3] = Int64GetDatum(p.rows_sent);
	values[4] = Int64GetDatum(p.rows_taken);
	values[5] = Int64GetDatum(p.messages);
	values[6] = Int64GetDatum(p.quarantined);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
