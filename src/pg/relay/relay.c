/*-------------------------------------------------------------------------
 * relay.c
 *	  A relay pass (docs/design.md 4): observe what became of the replicas; record,
 *	  in one transaction on the connection holding the relay lock, the plan
 *	  for every note not done, the messages that carry it and what they
 *	  carry; publish (as record.c writes the chains down): NOTIFY
 *	  magic_sync with the replicas that have new messages, delivered when
 *	  the pass commits.
 *
 * Recorded before it is sent: nothing is in an outbox that is not recorded
 * as held, in the transaction that marks its notes done.  A pass that dies
 * before its commit leaves nothing; the next one plans the same notes.  A
 * relay that loses its lock's connection loses the transaction with it, so
 * it can never commit over the relay that took the lock.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/md5.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/uuid.h"

#include "batch.h"
#include "catalog.h"
#include "chains.h"
#include "evolve.h"
#include "heldrows.h"
#include "load.h"
#include "observe.h"
#include "park.h"
#include "plan.h"
#include "record.h"
#include "relay.h"
#include "retry.h"
#include "settings.h"
#include "subxact.h"
#include "temp.h"
#include "transient.h"
#include "updated.h"
#include "watch.h"
#include "wish.h"

PG_FUNCTION_INFO_V1(ms_relay_pass_sql);
PG_FUNCTION_INFO_V1(ms_relay_snapshots_sql);

bool
ms_relay_try_lock(bool session)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, MS_RELAY_LOCK_KEY1, MS_RELAY_LOCK_KEY2, 2);
	return LockAcquire(&tag, ExclusiveLock, session, true) != LOCKACQUIRE_NOT_AVAIL;
}

void
ms_relay_hold_replicas(bool whole)
{
	LockRelationOid(get_relname_relid("replicas", get_namespace_oid("sync", false)),
					whole ? ExclusiveLock : RowExclusiveLock);
}

/*
 * troubled: what sync.check() reports, but a foreign key not indexed.  The
 * tables it names, and those joined to them, are held back (ms_catalog_hold);
 * the relay runs for every other table (the tables of a foreign key cycle
 * are each named: declare/catalog.c).  A problem of no one table stops it.
 */
static List *
troubled(ms_pass *p)
{
	List	   *problems = NIL;

	ms_exec(&p->exec, "SELECT c.tab, c.problem, c.detail FROM sync.check() c WHERE c.problem <> '" MS_CHECK_UNINDEXED "'",
			0, NULL, NULL, NULL, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		ms_problem *pr = palloc0(sizeof(ms_problem));
		bool		isnull;

		pr->table = TextDatumGetCString(ms_value(i, 1, &isnull));
		pr->problem = TextDatumGetCString(ms_value(i, 2, &isnull));
		pr->detail = TextDatumGetCString(ms_value(i, 3, &isnull));
		if (pr->table[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the relay will not run while sync.check() reports a problem"),
					 errdetail("%s", pr->detail),
					 errhint("SELECT * FROM sync.check() says what to fix.")));
		problems = lappend(problems, pr);
	}
	/* a problem of a declaration written after the snapshot is the pass's: it runs again */
	ms_evolve_check_race(p);
	return problems;
}

/* the ids of the tables held back, as an int[] (sync.health says why each waits) */
static ArrayType *
held_ids(List *held)
{
	Datum	   *ids = palloc(sizeof(Datum) * Max(list_length(held), 1));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, held)
	{
		ms_held    *h = lfirst(lc);

		if (h->t != NULL)
			ids[n++] = Int32GetDatum(h->t->id);
	}
	return construct_array(ids, n, INT4OID, sizeof(int32), true, TYPALIGN_INT);
}

/* set aside rows that cannot go, until a change or a fix lets them through */
static void
quarantine(ms_pass *p, List *tables, List *bad)
{
	Oid			types[4] = {INT4OID, TEXTOID, TEXTOID, TEXTOID};
	SPIPlanPtr	plan = ms_prepare_kept(&p->exec,
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
		ms_run(&p->exec, plan, values, NULL, 0);
		t = ms_catalog_find(tables, b->tab);
		ereport(WARNING,
				(errmsg("magic_sync: a row of table \"%s\" cannot go and is quarantined",
						t ? t->name : "?"),
				 errdetail("Key %s: %s", b->key, b->reason),
				 errhint("It goes once it changes or a fix lets it through; SELECT * FROM sync.quarantine lists it.")));
	}
	p->did.quarantined += list_length(bad);
}

/*
 * record: plan and record in a subtransaction; when rows cannot go, undo
 * it, set them aside, and plan again around them.  When it fails for good,
 * the failure is narrowed down to the notes it is about, which are parked
 * (park.c), and the rest planned again; a failure about no note fails the
 * pass.
 */
static void
record(ms_pass *p, ArrayType *replicas, ArrayType *provisioning, int64 replicas_all, int64 floor,
	   const ms_record_in *rin, ms_pass_later *later)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ms_pass_fault *fault = rin->fault;
	ms_plan_in	in = {replicas_all, p->did.more, floor, fault, rin->cat};

	for (;;)
	{
		List	   *volatile bad = NIL;
		ErrorData  *volatile failure = NULL;
		ms_pass		before = *p;
		ms_pass_fault fault_before = *fault;
		ms_planned	plan;
		ms_recorded did;
		int64		parked;

		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			ms_plan(p, replicas, provisioning, &in, &plan);
			p->did.notes_read += plan.joined;
			bad = ms_record(p, rin, replicas, provisioning, &plan, &did);
		}
		PG_CATCH();
		{
			/* never let an error out with the subtransaction open: the caller's session would be left aborted */
			failure = ms_subxact_undo(cxt, owner);
		}
		PG_END_TRY();
		if (failure != NULL)
		{
			bool		resent = fault->resent > 0;
			bool		whole_failed = fault->whole_failed;

			*p = before;
			*fault = fault_before;
			/* a table read whole failed for good: planned again, its rows through the plan (load.c) */
			if (whole_failed && !ms_transient(failure->sqlerrcode))
			{
				fault->no_whole = true;
				FreeErrorData(failure);
				continue;
			}
			/* rows refused sent again are no notes to park: they wait an hour, the rest goes on (retry.c) */
			if (resent && !fault->resend_held && !ms_transient(failure->sqlerrcode))
			{
				ereport(WARNING,
						(errmsg("magic_sync: rows replicas refused could not be sent again: they wait an hour"),
						 errdetail("%s", failure->message),
						 errhint("SELECT * FROM sync.health() lists them.")));
				fault->resend_held = true;
				FreeErrorData(failure);
				continue;
			}
			if (ms_transient(failure->sqlerrcode) || !ms_park(p, &replicas, &provisioning, &in, rin, &parked))
				ReThrowError(failure);
			p->did.notes_read -= parked;
			p->did.parked += parked;
			FreeErrorData(failure);
			continue;
		}
		if (bad == NIL)
		{
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
			p->did.provisioned += did.provisioned;
			p->did.rows_sent = did.rows_sent;
			p->did.rows_taken = did.rows_taken;
			p->did.messages = did.messages;
			if (later != NULL)
				*later = did.later;
			return;
		}
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		quarantine(p, rin->cat->tables, bad);
	}
}

/* replicas whose outbox outgrew its bounds are provisioned again, with an alarm; whether any was */
static bool
outbox_bounds(ms_pass *p, bool has_owed)
{
	Oid			types[3] = {INT8OID, INT8OID, INT8OID};
	Datum		values[3] = {Int64GetDatum(ms_outbox_messages),
		Int64GetDatum((int64) ms_outbox_bytes * 1024), Int64GetDatum(ms_message_bytes)};

	/*
	 * Only an outbox this pass wrote to can have grown past its bounds, and
	 * only one whose replica is owed more than they allow (76_owed.sql, kept
	 * as messages are written and acknowledged); its outbox is then counted,
	 * so that the alarm says what is there.  A replica within its bounds
	 * costs one look at its sync.replicas row, however many messages it is
	 * owed and however many replicas share the message numbers.  A catalog
	 * not updated yet keeps no such figure: a replica whose numbers moved on
	 * past what the bounds allow messages (every replica's messages are
	 * numbered from one sequence, so they count its own from above) has its
	 * outbox counted.
	 */
	const char *owed = has_owed ? "x.owed_messages > $1 OR x.owed_bytes > $2"
		: "x.last_number - greatest(x.acked_number, coalesce(x.snapshot_end, 0)) > least($1, $2 / $3)";

	ms_exec(&p->exec, psprintf(
			"UPDATE sync.replicas r SET provision = true, last_error_at = now(),"
			" last_error = format('the outbox outgrew its bounds (%%s messages, %%s bytes beyond its snapshot;"
			" magic_sync.outbox_messages = %%s, magic_sync.outbox_bytes = %%s kB): provisioned again',"
			"   b.n, b.s, $1, $2 / 1024)"
			" FROM (SELECT x.id AS replica, o.n, o.s FROM pg_temp.ms_written w JOIN sync.replicas x ON x.id = w.id"
			"       CROSS JOIN LATERAL (SELECT count(*) AS n, sum(o.bytes) AS s FROM sync.outbox o"
			"        WHERE o.replica = x.id AND NOT o.dropped AND o.number > coalesce(x.snapshot_end, 0)) o"
			"      WHERE %s) b"
			" WHERE r.id = b.replica AND NOT r.provision AND (b.n > $1 OR b.s > $2)", owed),
			3, types, values, NULL, 0);
	if (SPI_processed > 0)
		ereport(WARNING,
				(errmsg("magic_sync: %llu replicas' outboxes outgrew their bounds; they are provisioned again",
						(unsigned long long) SPI_processed),
				 errhint("A replica that takes its messages too slowly, or not at all, is sent a snapshot instead.")));
	return SPI_processed > 0;
}

/*
 * The catalog as the last pass read it: the tables, checked, and their
 * schemas (each table's Table, packed and hashed: evolve.c).  Read again
 * (and sync.check() run again) only when a declaration changed, or a
 * relation they name was altered (a relcache invalidation: DDL, triggers
 * enabled or dropped, a partition attached, an index made).
 */
static MemoryContext catalog_cxt = NULL;
static ms_watch catalog_watch;	/* whether a relation it names changed (watch.h) */
static char *catalog_text = NULL;
static List *catalog_tables = NIL;
static List *catalog_held = NIL;
static ArrayType *catalog_held_ids = NULL;
static StringInfoData catalog_begin;
static bytea *catalog_schema_hash = NULL;
static ms_evolve *catalog_evolve = NULL;

/* a probe's fingerprint of a row of sync.tables: its address and the transaction that wrote it */
static bool
declaration(HeapTuple row, TupleDesc desc, void *arg)
{
	StringInfo	text = arg;

	(void) desc;
	appendStringInfo(text, "%s(%u,%u)%u", text->len > 0 ? "," : "",
					 ItemPointerGetBlockNumber(&row->t_self), ItemPointerGetOffsetNumber(&row->t_self),
					 HeapTupleHeaderGetRawXmin(row->t_data));
	return true;
}

/*
 * the declarations as text: what the catalog and the kept plans were
 * prepared for (pass.h).  Each row version of sync.tables by its address and
 * the transaction that wrote it: a declaration written, made or dropped is
 * another version, another address or one fewer; a version is never
 * rewritten in place but by VACUUM FULL or CLUSTER, which move it, and
 * freezing keeps the xmin it shows.  Rendering each row whole (regclass
 * names, jsonb) cost every pass ~0.1 ms for one table (issue 37); read in C
 * (ms_probe), in the table's order, no statement at all.
 */
static char *
declarations(ms_pass *p)
{
	StringInfoData text;
	char		md5[MD5_PASSWD_LEN + 1];
	const char *errstr = NULL;

	initStringInfo(&text);
	if (!ms_probe(&p->exec, "tables", NULL, declaration, &text))
		elog(ERROR, "the catalog has no sync.tables");
	if (!pg_md5_hash(text.data, text.len, md5, &errstr))
		elog(ERROR, "could not hash the declarations: %s", errstr);
	pfree(text.data);
	return pstrdup(md5);
}

/* the catalog, read once per pass, or kept from the last while nothing it names changed */
static void
read_catalog(ms_pass *p, ms_pass_catalog *cat)
{
	char	   *decls = declarations(p);
	MemoryContext old;
	List	   *problems;

	ms_plans_catalog(decls);
	if (!catalog_watch.valid || catalog_text == NULL || strcmp(catalog_text, decls) != 0)
	{
		ms_watch_reading(&catalog_watch);
		if (catalog_cxt == NULL)
			catalog_cxt = AllocSetContextCreate(TopMemoryContext, "magic_sync catalog", ALLOCSET_DEFAULT_SIZES);
		MemoryContextReset(catalog_cxt);
		catalog_text = NULL;
		problems = troubled(p);
		old = MemoryContextSwitchTo(catalog_cxt);
		/* the catalog, read once: every part of the pass is handed this list */
		{
			List	   *ignored = NIL;	/* sync.check() said them, and more */

			cat->held = NIL;
			cat->tables = ms_catalog_hold(ms_catalog_read(&ignored), problems, &cat->held);
			cat->held_ids = cat->held != NIL ? held_ids(cat->held) : NULL;
		}
		catalog_held = cat->held;
		catalog_held_ids = cat->held_ids;
		ms_evolve_schema(p, cat);
		catalog_tables = cat->tables;
		catalog_begin = cat->begin;
		catalog_schema_hash = cat->schema_hash;
		catalog_evolve = cat->evolve;
		/*
		 * a table held back leaves it invalid: the next pass reads again, as
		 * a fix may put it right in many ways (sync.check() says them)
		 */
		ms_watch_read(&catalog_watch, cat->tables, cat->held == NIL);
		catalog_text = pstrdup(decls);
		MemoryContextSwitchTo(old);
		/* what the pass finds of each replica is its own, the schemas are kept */
		cat->evolve = ms_evolve_kept(catalog_evolve);
		return;
	}
	cat->tables = catalog_tables;
	cat->held = catalog_held;
	cat->held_ids = catalog_held_ids;
	cat->begin = catalog_begin;
	cat->schema_hash = catalog_schema_hash;
	cat->evolve = ms_evolve_kept(catalog_evolve);
}

/*
 * the replicas a note may move: every live one, but a snapshot that failed a
 * minute ago; and how many there are in all (fast.c)
 */
static ArrayType *
live_replicas(ms_pass *p, int64 *replicas_all)
{
	bool		isnull;
	ArrayType  *live;

	/* those left to a snapshot pass are its alone */
	ms_exec(&p->exec, p->did.snapshots_left ?
			"SELECT array_agg(id) FILTER (WHERE live AND NOT dropped AND NOT provision), count(*) FROM sync.replicas" :
			"SELECT array_agg(id) FILTER (WHERE live AND NOT dropped"
			" AND NOT (provision AND coalesce(provision_failed_at >= now() - interval '1 minute', false))),"
			" count(*) FROM sync.replicas",
			0, NULL, NULL, NULL, 0);
	*replicas_all = DatumGetInt64(ms_value(0, 2, &isnull));
	live = ms_array();
	return live;
}

void
ms_relay_pass(ms_pass *p, const ms_relay_in *in, ms_pass_later *later)
{
	ArrayType  *provisioning;
	ArrayType  *replicas = NULL;
	int64		replicas_all = 0;	/* fast.c's choice: the replicas there are (live_replicas) */
	int64		notes;
	ms_observed observed;
	int			snapshots = in->snapshots;
	ms_pass_catalog cat;
	ms_record_in rin;

	/* one snapshot for the whole pass, whose writes never land on newer versions (pass.h) */
	if (!IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("sync.relay_pass() needs a REPEATABLE READ transaction"),
				 errdetail("A pass plans and records in one snapshot; under READ COMMITTED, what it records over a row changed since would land on the newer version."),
				 errhint("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM sync.relay_pass(); COMMIT;")));
	if (later != NULL)
		memset(later, 0, sizeof *later);
	SPI_connect();
	ms_pass_begin(p, p->exec.cxt);
	/* the relay reads each table as its owner: its code runs with no other rights */
	p->exec.as_owners = true;
	/* a small pass runs statements prepared by the passes before it (pass.h) */
	ms_plans_keep(true);
	/* the session's first pass creates every temporary table: no later one runs DDL (temp.c) */
	ms_temp_tables(&p->exec);
	memset(&cat, 0, sizeof cat);
	read_catalog(p, &cat);
	ms_epoch_current(&cat.epoch);
	provisioning = ms_observe(p, &cat, snapshots, &observed);
	p->did.forgotten = observed.forgotten;
	p->did.snapshots_left = observed.snapshots_left;
	rin.bounds_later = in->bounds_later;
	/* held rows after the pass need the column that says they are due */
	rin.held_later = in->held_later && later != NULL && observed.held_due;
	rin.has = observed.has;
	/* the worker copies the chains from what record.c hands it (ms_relay_bounds) */
	rin.chains_later = in->bounds_later && later != NULL;
	/* what a failure is about, kept across the subtransactions record() undoes */
	rin.fault = MemoryContextAllocZero(p->exec.cxt, sizeof(ms_pass_fault));
	rin.cat = &cat;
	/* a snapshot pass reads no note: the next pass plans them for every replica */
	if (snapshots == MS_SNAPSHOTS_ONLY && provisioning == NULL)
	{
		ms_pass_end(p);
		SPI_finish();
		return;
	}
	ms_plan_prepare(p);
	if (snapshots == MS_SNAPSHOTS_ONLY)
	{
		ms_temp_table(&p->exec, "ms_notes_read");
		ms_temp_table(&p->exec, "ms_pending");
		notes = 0;
	}
	else
		notes = ms_batch_read(p, in->floor, cat.held_ids, &p->did.more);
	p->did.notes_read = notes;
	/* a large batch or a snapshot: each statement planned for what it reads now */
	if (notes >= MS_ANALYZE_ROWS || provisioning != NULL || ms_full_plan)
		ms_plans_keep(false);

	/*
	 * every live replica may be moved by a note or a schema change; otherwise
	 * only those provisioned, and those with refused rows due (retry.c)
	 */
	if (snapshots == MS_SNAPSHOTS_ONLY)
		replicas = provisioning;
	else if ((notes > 0 || ms_evolve_any(&cat)) && observed.live_read)
	{
		/* observe read them, and changed none since */
		replicas = observed.live;
		replicas_all = observed.replicas_all;
	}
	else if (notes > 0 || ms_evolve_any(&cat))
		replicas = live_replicas(p, &replicas_all);
	else
		/* those provisioned, with refused rows due (retry.c), with wishes to send (wish_send.c) */
		replicas = ms_wish_replicas(p, ms_retry_replicas(p, provisioning));
	if (provisioning == NULL)
		provisioning = construct_empty_array(UUIDOID);

	if (replicas != NULL)
	{
		ms_temp_table(&p->exec, "ms_written");
		record(p, replicas, provisioning, replicas_all, ms_batch_floor(in->floor), &rin, later);
		ms_evolve_recorded(p, &cat, provisioning);
		if (!in->bounds_later)
			outbox_bounds(p, observed.has.owed);
		/* the replicas written to were told as record.c wrote them down (NOTIFY magic_sync) */
	}
	if (notes > 0)
		ms_batch_done(p);
	ms_pass_end(p);
	SPI_finish();
}

/*
 * ms_relay_held: the held rows a pass of the worker left to write once it
 * committed (heldrows.c), in a transaction of their own, while the replicas
 * provisioned pull and apply their snapshots.  Their filings are refused,
 * transiently, while held_due is set (ack.c), at once: this transaction holds
 * no replica's row until it clears held_due at its end.  It held them from
 * its start once, and the agent's first filing, sent as its snapshot's pass
 * began, waited for every held row before it pulled a message
 * (bench/firstsync.py: 63-70 % of its backend's time at 10^6).  Passes,
 * which may provision a replica whose held_due is set, take the relay lock,
 * as this worker holds it.
 */
void
ms_relay_held(ms_pass *p, const ms_pass_later *later)
{
	MemoryContext cxt = p->exec.cxt;

	SPI_connect();
	ms_pass_begin(p, cxt);
	ms_plans_keep(false);
	ms_record_held_later(p, later);
	ms_pass_end(p);
	SPI_finish();
}

/* the snapshot of the pass at its current command, as a statement of it runs (pass.c's ms_run) */
static Snapshot
chains_snapshot(ms_pass *p)
{
	CommandCounterIncrement();
	PushCopiedSnapshot(p->exec.snapshot);
	UpdateActiveSnapshotCommandId();
	return GetActiveSnapshot();
}

/* magic_sync.full_plan: the statement made of row i what C computed, or the pass fails */
static void
chains_compare(const ms_chain_copied *copied, int ncopied, uint64 i, bool owed)
{
	bool		isnull;
	pg_uuid_t  *id = DatumGetUUIDP(ms_value(i, 2, &isnull));
	int64		number = DatumGetInt64(ms_value(i, 3, &isnull));
	Datum		nonce = ms_value(i, 4, &isnull);
	bool		nonce_null = isnull;
	int64		owed_m = owed ? DatumGetInt64(ms_value(i, 5, &isnull)) : 0;
	int64		owed_b = owed ? DatumGetInt64(ms_value(i, 6, &isnull)) : 0;
	bool		past = DatumGetBool(ms_value(i, 1, &isnull));

	for (int c = 0; c < ncopied; c++)
	{
		const ms_chain_copied *k = &copied[c];

		if (memcmp(k->id.data, id->data, UUID_LEN) != 0)
			continue;
		if (k->last_number == number && (k->last_nonce == NULL) == nonce_null &&
			(nonce_null || DatumGetBool(DirectFunctionCall2(byteaeq, PointerGetDatum(k->last_nonce), nonce))) &&
			(!owed || (k->owed_messages == owed_m && k->owed_bytes == owed_b)) && k->past == past)
			return;
		break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("magic_sync: the chain copied in C differs from the statement's"),
			 errdetail_internal("replica %s: the statement made number %lld, owed %lld, %lld, past %d",
								DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(id))),
								(long long) number, (long long) owed_m, (long long) owed_b, (int) past)));
}

/*
 * The chains a worker's pass wrote, and what it made each replica owed,
 * copied into sync.replicas after its commit (record.c), under READ
 * COMMITTED: a filing of the replica meanwhile is waited for, never failed
 * on.  Where each chain is comes from the outbox (MS_HEAD), so a copy after
 * a rewind that took the pass's messages back, or after an acknowledgement
 * that trimmed them, says where the chain is now; what is owed is added,
 * and taken off by acknowledgements in any order (ack.c).  The replicas
 * handed over are copied in C (chains.c: no statement, issue 37), but under
 * magic_sync.full_plan, where the statement runs and is compared with it.
 */
static bool
copy_chains(ms_pass *p, const ms_pass_later *later)
{
	bool		owed = ms_catalog_has_column("replicas", "owed_messages");
	bool		handed = later != NULL && later->written != NULL;
	Oid			types[6] = {INT8OID, INT8OID, INT8OID, UUIDARRAYOID, INT8ARRAYOID, INT8ARRAYOID};
	Datum		values[6] = {Int64GetDatum(ms_outbox_messages),
		Int64GetDatum((int64) ms_outbox_bytes * 1024), Int64GetDatum(ms_message_bytes),
		PointerGetDatum(handed ? later->written : NULL), PointerGetDatum(handed ? later->written_messages : NULL),
	PointerGetDatum(handed ? later->written_bytes : NULL)};
	bool		past = false;
	ms_chain_copied *copied = NULL;
	int			ncopied = 0;
	bool		in_c = false;

	if (handed)
	{
		in_c = ms_chains_copy(chains_snapshot(p), later->written, later->written_messages, later->written_bytes,
							  owed, !ms_full_plan, &copied, &ncopied);
		PopActiveSnapshot();
		if (in_c && !ms_full_plan)
		{
			for (int i = 0; i < ncopied && !past; i++)
				past = copied[i].past;
			/* tests/e2e/chains.sh counts them */
			ereport(DEBUG1, (errmsg_internal("magic_sync: the chains of %d replicas copied in C", ncopied)));
			return past;
		}
	}

	/* and, for each chain copied, whether its replica may be past its outbox's bounds (outbox_bounds) */
	ms_exec(&p->exec, psprintf(
			"UPDATE sync.replicas r SET (last_number, last_nonce) = (SELECT x.number, x.nonce FROM ("
			"   SELECT r.last_number, r.last_nonce UNION ALL SELECT r.acked_number, r.acked_nonce"
			"   UNION ALL (SELECT o.number, o.nonce FROM sync.outbox o WHERE o.replica = r.id"
			"              ORDER BY o.number DESC LIMIT 1)) x(number, nonce)"
			"   ORDER BY x.number DESC LIMIT 1)%s"
			"  FROM %s WHERE r.id = w.id AND w.messages IS NOT NULL"
			" RETURNING NOT r.provision AND (r.last_number - greatest(r.acked_number, coalesce(r.snapshot_end, 0))"
			"   > least($1, $2 / $3)%s), r.id, r.last_number, r.last_nonce%s",
			owed ? ", owed_messages = r.owed_messages + w.messages, owed_bytes = r.owed_bytes + w.bytes" : "",
			handed ? "unnest($4, $5, $6) w(id, messages, bytes)" : "pg_temp.ms_written w",
			owed ? " OR r.owed_messages > $1 OR r.owed_bytes > $2" : "",
			owed ? ", r.owed_messages, r.owed_bytes" : ""),
			handed ? 6 : 3, types, values, NULL, 0);
	if (in_c && (uint64) ncopied != SPI_processed)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("magic_sync: the chains copied in C were %d, the statement's %llu",
						ncopied, (unsigned long long) SPI_processed)));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		if (in_c)
			chains_compare(copied, ncopied, i, owed);
		past = past || DatumGetBool(ms_value(i, 1, &isnull));
	}
	return past;
}

void
ms_relay_chains(ms_pass *p)
{
	MemoryContext cxt = p->exec.cxt;
	bool		owed = ms_catalog_has_column("replicas", "owed_messages");

	SPI_connect();
	ms_pass_begin(p, cxt);
	ms_plans_keep(false);
	ms_exec(&p->exec, psprintf(
			"UPDATE sync.replicas r SET (last_number, last_nonce) = (SELECT x.number, x.nonce FROM ("
			"   SELECT r.acked_number, r.acked_nonce"
			"   UNION ALL (SELECT o.number, o.nonce FROM sync.outbox o WHERE o.replica = r.id"
			"              ORDER BY o.number DESC LIMIT 1)) x(number, nonce)"
			"   ORDER BY x.number DESC LIMIT 1)%s"
			" WHERE r.last_number < " MS_HEAD("r"),
			owed ? ", owed_messages = (SELECT count(*) FROM sync.outbox o WHERE o.replica = r.id AND NOT o.dropped"
			"   AND o.number > coalesce(r.snapshot_end, 0)),"
			" owed_bytes = (SELECT coalesce(sum(o.bytes), 0) FROM sync.outbox o WHERE o.replica = r.id AND NOT o.dropped"
			"   AND o.number > coalesce(r.snapshot_end, 0))" : ""),
			0, NULL, NULL, NULL, 0);
	if (SPI_processed > 0)
		ereport(LOG,
				(errmsg("magic_sync: the chains of %llu replicas were copied after a pass that did not copy them",
						(unsigned long long) SPI_processed)));
	ms_pass_end(p);
	SPI_finish();
}

bool
ms_relay_bounds(ms_pass *p, const ms_pass_later *later)
{
	MemoryContext cxt = p->exec.cxt;
	bool		marked = false;

	SPI_connect();
	ms_pass_begin(p, cxt);
	ms_plans_keep(true);
	/*
	 * The bounds are looked at only when the copy found a replica that may
	 * be past them, which is rare: a statement fewer after every pass that
	 * wrote (issue 37).  Its look at the numbers is the copy's, current; what
	 * it counts is the outbox's.
	 */
	/*
	 * Counted by the numbers, as a catalog without the owed figures is: a
	 * replica owed more bytes than the bounds allow is past them by the
	 * numbers too (no message is larger than magic_sync.message_bytes).
	 */
	if (copy_chains(p, later))
	{
		/* what outbox_bounds reads, when the pass handed it over (rare: a replica past its bounds) */
		if (later != NULL && later->written != NULL)
		{
			ms_temp_table(&p->exec, "ms_written");
			ms_exec(&p->exec, "INSERT INTO pg_temp.ms_written SELECT * FROM unnest($1, $2, $3)", 3,
					(Oid[]) {UUIDARRAYOID, INT8ARRAYOID, INT8ARRAYOID},
					(Datum[]) {PointerGetDatum(later->written), PointerGetDatum(later->written_messages),
				PointerGetDatum(later->written_bytes)}, NULL, 0);
		}
		marked = outbox_bounds(p, false);
	}
	ms_pass_end(p);
	SPI_finish();
	return marked;
}

/*
 * pass_sql: sync.relay_pass() and sync.relay_snapshots() run one pass in the
 * caller's transaction, under the relay lock, and say what it did.
 */
static Datum
pass_sql(FunctionCallInfo fcinfo, int snapshots)
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
	/*
	 * as a worker's pass run again after it failed to serialize (worker.c):
	 * its chains are written in the caller's transaction, so filings and
	 * pulls wait for it; what one committed since the caller's snapshot
	 * fails the pass as a serialization failure, to be run again
	 */
	if (IsolationUsesXactSnapshot() && snapshots != MS_SNAPSHOTS_ONLY)
		ms_relay_hold_replicas(true);
	memset(&p, 0, sizeof p);
	p.exec.cxt = CurrentMemoryContext;
	ms_relay_pass(&p, &(ms_relay_in) {.snapshots = snapshots}, NULL);
	values[0] = Int64GetDatum(p.did.notes_read);
	values[1] = Int64GetDatum(p.did.provisioned);
	values[2] = Int64GetDatum(p.did.forgotten);
	values[3] = Int64GetDatum(p.did.rows_sent);
	values[4] = Int64GetDatum(p.did.rows_taken);
	values[5] = Int64GetDatum(p.did.messages);
	values[6] = Int64GetDatum(p.did.quarantined);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

Datum
ms_relay_pass_sql(PG_FUNCTION_ARGS)
{
	return pass_sql(fcinfo, MS_SNAPSHOTS_ALL);
}

/* sync.relay_snapshots(): the replicas waiting for a snapshot provisioned, holding their rows alone */
Datum
ms_relay_snapshots_sql(PG_FUNCTION_ARGS)
{
	return pass_sql(fcinfo, MS_SNAPSHOTS_ONLY);
}
