/*-------------------------------------------------------------------------
 * batch_write.c
 *	  A pass's only batch of messages written in C.  See recorder.h
 *	  (ms_write_batch_c).
 *
 * record.c's statement writes a batch: the new bodies into sync.bodies (a
 * body there already, by its hash, is the one its messages point at), the
 * segments into pg_temp.ms_segments, the messages into sync.outbox, each
 * pointing at its body by id or by hash; and the foreign key outbox.body ->
 * bodies checks each message's (a statement of its own, locking the body).
 * A one-row pass writes one message: the two statements cost it more than
 * its rows (~17 % of the worker, issue 37).  Here each is written as an
 * INSERT writes it (writer.h), and the reference is kept as the foreign
 * key keeps it: a body found by its hash is locked as its check locks it
 * (FOR KEY SHARE), a body written here needs none.  A body another pass
 * wrote since the snapshot, or a prune deleted, fails the pass, a
 * serialization failure, as the statement's ON CONFLICT and its check do.
 * The outbox's other columns get their defaults (not dropped, written now,
 * never pulled); a catalog with other columns, or triggers of its own, is
 * written by the statement.
 *
 * Under magic_sync.full_plan the statement writes it (record.c), and
 * tests/e2e/fast.py compares every message's body with the full plan's.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "recorder.h"
#include "writer.h"

static const char *const body_columns[5] = {"id", "hash", "bytes", "upserts", "deletes"};
static const char *const outbox_columns[11] = {
	"replica", "number", "epoch", "nonce", "head", "body", "bytes", "snapshot", "dropped", "written", "pulls"
};
static const char *const segment_columns[SEGMENT_COLS] = {
	"replica", "tab", "kind", "first_key", "last_key", "number", "rows"
};

/* a body this batch wrote: its hash and id */
typedef struct body_written
{
	bytea	   *hash;
	int64		id;
} body_written;

/*
 * the id of the body of this hash the snapshot sees, locked as the foreign
 * key's check locks it; 0: none
 */
static int64
body_by_hash(Relation bodies, Relation hash_index, Snapshot snapshot, bytea *hash)
{
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	int64		id = 0;
	ItemPointerData at;

	ScanKeyInit(&key, 2, BTEqualStrategyNumber, F_BYTEAEQ, PointerGetDatum(hash));
	scan = systable_beginscan(bodies, RelationGetRelid(hash_index), true, snapshot, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;

		id = DatumGetInt64(heap_getattr(tup, 1, RelationGetDescr(bodies), &isnull));
		at = tup->t_self;
	}
	systable_endscan(scan);
	if (id != 0)
	{
		TupleTableSlot *slot = table_slot_create(bodies, NULL);
		TM_FailureData tmfd;
		TM_Result	res = table_tuple_lock(bodies, &at, snapshot, slot, GetCurrentCommandId(false),
										   LockTupleKeyShare, LockWaitBlock, 0, &tmfd);

		ExecDropSingleTupleTableSlot(slot);
		ms_tm_check(res, "locking a message body");
	}
	return id;
}

/* a new body of a batch, into sync.bodies */
typedef struct body_put
{
	ms_writer  *bodies;
	Datum		values[5];
} body_put;

static void
body_put_one(void *arg)
{
	body_put   *b = arg;
	bool		nulls[5] = {false, false, false, false, false};

	ms_writer_put(b->bodies, b->values, nulls, NULL);
}

/* the new body i of r's batch inserted; its id */
static int64
body_insert(ms_writer *bodies, Oid seq, recorder *r, int i)
{
	body_put	b;
	int64		id = nextval_internal(seq, true);

	b.bodies = bodies;
	b.values[0] = Int64GetDatum(id);
	for (int c = 0; c < BODY_COLS; c++)
		b.values[1 + c] = r->bodies_new[c][i];
	/* another transaction's body of this hash, not in the snapshot */
	ms_unique_as_conflict(body_put_one, &b, "magic_sync: a message body of this hash was written since the pass's snapshot",
						  "Run the pass again: it sees the body then.");
	return id;
}

bool
ms_write_batch_c(recorder *r)
{
	Oid			self = r->p->exec.self;
	Oid			bodies_id = get_relname_relid("bodies", get_namespace_oid("sync", false));
	Oid			hash_index_id = get_relname_relid("bodies_hash_key", get_namespace_oid("sync", false));
	List	   *owned;
	Oid			seq;
	ms_writer  *bodies;
	ms_writer  *outbox;
	ms_writer  *segments;
	Relation	hash_index;
	Snapshot	snapshot;
	body_written *written;
	MemoryContext old;

	if (r->nmessages == 0 && r->nsegments == 0 && r->nbodies == 0)
		return true;
	if (!OidIsValid(bodies_id) || !OidIsValid(hash_index_id))
		return false;
	owned = getOwnedSequences(bodies_id);
	if (list_length(owned) != 1 || pg_class_aclcheck(linitial_oid(owned), self, ACL_USAGE) != ACLCHECK_OK)
		return false;
	seq = linitial_oid(owned);
	/* ON CONFLICT DO UPDATE: the statement needed UPDATE and SELECT on it too */
	bodies = ms_writer_open("bodies", false, body_columns, 5, self, ACL_UPDATE | ACL_SELECT);
	if (bodies == NULL)
		return false;
	outbox = ms_writer_open("outbox", false, outbox_columns, 11, self, 0);
	segments = ms_writer_open("ms_segments", true, segment_columns, SEGMENT_COLS, self, 0);
	if (outbox == NULL || segments == NULL)
	{
		if (outbox != NULL)
			ms_writer_close(outbox);
		if (segments != NULL)
			ms_writer_close(segments);
		ms_writer_close(bodies);
		return false;
	}
	hash_index = index_open(hash_index_id, RowExclusiveLock);
	old = MemoryContextSwitchTo(r->batch);
	/* the pass's snapshot at a new command, as its statement's */
	CommandCounterIncrement();
	PushCopiedSnapshot(r->p->exec.snapshot);
	UpdateActiveSnapshotCommandId();
	snapshot = GetActiveSnapshot();

	/* b: each new body, or the one of its hash there already */
	written = palloc(sizeof(body_written) * Max(r->nbodies, 1));
	for (int i = 0; i < r->nbodies; i++)
	{
		bytea	   *hash = DatumGetByteaPP(r->bodies_new[0][i]);
		int64		id = body_by_hash(bodies->rel, hash_index, snapshot, hash);

		if (id == 0)
			id = body_insert(bodies, seq, r, i);
		written[i].hash = hash;
		written[i].id = id;
	}

	/* the segments */
	for (int g = 0; g < r->nsegments; g++)
	{
		Datum		values[SEGMENT_COLS];
		bool		nulls[SEGMENT_COLS] = {false, false, false, false, false, false, false};

		for (int c = 0; c < SEGMENT_COLS; c++)
			values[c] = r->segs[c][g];
		ms_writer_put(segments, values, nulls, NULL);
	}

	/* o: each message, its body by id, by this batch's hash, or by one an earlier batch wrote */
	for (int m = 0; m < r->nmessages; m++)
	{
		Datum		values[11];
		bool		nulls[11] = {false, false, false, false, false, false, false, false, false, false, false};
		int64		body = DatumGetInt64(r->messages[5][m]);

		if (body <= 0)
		{
			bytea	   *hash = DatumGetByteaPP(r->message_body_hash[m]);

			for (int i = 0; i < r->nbodies && body <= 0; i++)
				if (VARSIZE_ANY_EXHDR(written[i].hash) == VARSIZE_ANY_EXHDR(hash) &&
					memcmp(VARDATA_ANY(written[i].hash), VARDATA_ANY(hash), VARSIZE_ANY_EXHDR(hash)) == 0)
					body = written[i].id;
			if (body <= 0)
				body = body_by_hash(bodies->rel, hash_index, snapshot, hash);
			if (body <= 0)
				elog(ERROR, "magic_sync: a message's body was not found by its hash");
		}
		for (int c = 0; c < OUTBOX_COLS; c++)
			values[c] = r->messages[c][m];
		values[5] = Int64GetDatum(body);
		/* the columns' defaults: not dropped, written now (the transaction's start), never pulled */
		values[8] = BoolGetDatum(false);
		values[9] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
		values[10] = Int32GetDatum(0);
		ms_writer_put(outbox, values, nulls, NULL);
	}
	PopActiveSnapshot();
	index_close(hash_index, NoLock);
	ms_writer_close(segments);
	ms_writer_close(outbox);
	ms_writer_close(bodies);
	/* what follows sees them */
	CommandCounterIncrement();
	MemoryContextSwitchTo(old);
	ms_batch_written(r);
	return true;
}
