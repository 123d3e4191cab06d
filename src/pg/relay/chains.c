/*-------------------------------------------------------------------------
 * chains.c
 *	  The chains a worker's pass wrote, copied into sync.replicas after its
 *	  commit, in C.  See chains.h.
 *
 * relay.c's copy_chains says it in SQL: each replica's row gets the newest
 * of its own last place, the place it acknowledged and the last message of
 * its outbox, and what the pass made it owed added; the statement returns
 * whether it may be past its outbox's bounds.  A one-row pass writes to one
 * replica, and the statement cost it an executor's start and end, a plan's
 * check and a join of one row (75-115 us, issue 37).  Here each row is found
 * by replicas_pkey, locked as an UPDATE under READ COMMITTED locks it (the
 * newest version, waiting for a filing that holds it: never failed on), its
 * outbox's last message read backwards by outbox_pkey, and the row updated
 * in place (table_tuple_update, its indexes as an UPDATE writes them when
 * the new version is not HOT).  sync.replicas has no trigger, and no key of
 * it changes: the foreign keys pointing at it check nothing.
 *
 * Under magic_sync.full_plan the statement runs instead, after each row was
 * locked and what it is to become computed here, and relay.c fails the pass
 * if the statement made anything else (tests/e2e/chains.sh).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/uuid.h"

#include "chains.h"
#include "settings.h"

/* the columns of sync.replicas read or written (0: not in this catalog) */
enum
{
	C_LAST_NUMBER, C_LAST_NONCE, C_ACKED_NUMBER, C_ACKED_NONCE, C_PROVISION, C_SNAPSHOT_END,
	C_OWED_MESSAGES, C_OWED_BYTES, C_COUNT
};
static const char *const column_names[C_COUNT] = {
	"last_number", "last_nonce", "acked_number", "acked_nonce", "provision", "snapshot_end",
	"owed_messages", "owed_bytes"
};

typedef struct chains_rels
{
	Relation	replicas;
	Relation	outbox;
	Relation	outbox_pkey;
	Oid			replicas_pkey;
	AttrNumber	col[C_COUNT];
	AttrNumber	outbox_number;
	AttrNumber	outbox_nonce;
} chains_rels;

static bool
rels_open(chains_rels *r, bool owed)
{
	Oid			ns = get_namespace_oid("sync", true);
	Oid			replicas = OidIsValid(ns) ? get_relname_relid("replicas", ns) : InvalidOid;
	Oid			outbox = OidIsValid(ns) ? get_relname_relid("outbox", ns) : InvalidOid;
	Oid			outbox_pkey = OidIsValid(ns) ? get_relname_relid("outbox_pkey", ns) : InvalidOid;

	r->replicas_pkey = OidIsValid(ns) ? get_relname_relid("replicas_pkey", ns) : InvalidOid;
	if (!OidIsValid(replicas) || !OidIsValid(outbox) || !OidIsValid(outbox_pkey) || !OidIsValid(r->replicas_pkey))
		return false;
	/* the locks the statement takes, to the transaction's end */
	r->replicas = table_open(replicas, RowExclusiveLock);
	LockRelationOid(r->replicas_pkey, RowExclusiveLock);
	r->outbox = table_open(outbox, AccessShareLock);
	r->outbox_pkey = index_open(outbox_pkey, AccessShareLock);
	for (int c = 0; c < C_COUNT; c++)
	{
		r->col[c] = SPI_fnumber(RelationGetDescr(r->replicas), column_names[c]);
		if (r->col[c] <= 0 && (owed || c < C_OWED_MESSAGES))
			elog(ERROR, "magic_sync: sync.replicas has no column %s", column_names[c]);
	}
	r->outbox_number = SPI_fnumber(RelationGetDescr(r->outbox), "number");
	r->outbox_nonce = SPI_fnumber(RelationGetDescr(r->outbox), "nonce");
	if (r->outbox_number <= 0 || r->outbox_nonce <= 0)
		elog(ERROR, "magic_sync: sync.outbox has no column number or nonce");
	return true;
}

static void
rels_close(chains_rels *r)
{
	index_close(r->outbox_pkey, NoLock);
	table_close(r->outbox, NoLock);
	table_close(r->replicas, NoLock);
}

/* the tid of the replica's row the snapshot sees; false: none */
static bool
replica_row(chains_rels *r, Snapshot snapshot, Datum id, ItemPointer tid)
{
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, id);
	scan = systable_beginscan(r->replicas, r->replicas_pkey, true, snapshot, 1, &key);
	tup = systable_getnext(scan);
	found = HeapTupleIsValid(tup);
	if (found)
		*tid = tup->t_self;
	systable_endscan(scan);
	return found;
}

/* the last message of the replica's outbox: its number and nonce (copied); false: none */
static bool
outbox_last(chains_rels *r, Snapshot snapshot, Datum id, int64 *number, bytea **nonce)
{
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, id);
	scan = systable_beginscan_ordered(r->outbox, r->outbox_pkey, snapshot, 1, &key);
	tup = systable_getnext_ordered(scan, BackwardScanDirection);
	found = HeapTupleIsValid(tup);
	if (found)
	{
		bool		isnull;

		*number = DatumGetInt64(heap_getattr(tup, r->outbox_number, RelationGetDescr(r->outbox), &isnull));
		*nonce = DatumGetByteaPCopy(heap_getattr(tup, r->outbox_nonce, RelationGetDescr(r->outbox), &isnull));
	}
	systable_endscan_ordered(scan);
	return found;
}

/*
 * the newest of the row's last place, its acknowledged one and its outbox's
 * last message: the statement's ORDER BY number DESC LIMIT 1, the first of
 * equal numbers kept (equal numbers are one message: one nonce)
 */
static void
newest(TupleTableSlot *row, chains_rels *r, Snapshot snapshot, Datum id, ms_chain_copied *out)
{
	int64		number;
	bytea	   *nonce;

	out->last_number = DatumGetInt64(row->tts_values[r->col[C_LAST_NUMBER] - 1]);
	out->last_nonce = row->tts_isnull[r->col[C_LAST_NONCE] - 1] ? NULL :
		DatumGetByteaPCopy(row->tts_values[r->col[C_LAST_NONCE] - 1]);
	number = DatumGetInt64(row->tts_values[r->col[C_ACKED_NUMBER] - 1]);
	if (number > out->last_number)
	{
		out->last_number = number;
		out->last_nonce = row->tts_isnull[r->col[C_ACKED_NONCE] - 1] ? NULL :
			DatumGetByteaPCopy(row->tts_values[r->col[C_ACKED_NONCE] - 1]);
	}
	if (outbox_last(r, snapshot, id, &number, &nonce) && number > out->last_number)
	{
		out->last_number = number;
		out->last_nonce = nonce;
	}
}

/* the statement's RETURNING, of the row as it becomes */
static bool
past_bounds(TupleTableSlot *row, chains_rels *r, const ms_chain_copied *c, bool owed)
{
	int64		acked = DatumGetInt64(row->tts_values[r->col[C_ACKED_NUMBER] - 1]);
	int64		end = row->tts_isnull[r->col[C_SNAPSHOT_END] - 1] ? 0 :
		DatumGetInt64(row->tts_values[r->col[C_SNAPSHOT_END] - 1]);
	int64		bytes = (int64) ms_outbox_bytes * 1024;

	if (DatumGetBool(row->tts_values[r->col[C_PROVISION] - 1]))
		return false;
	if (c->last_number - Max(acked, end) > Min((int64) ms_outbox_messages, bytes / ms_message_bytes))
		return true;
	return owed && (c->owed_messages > ms_outbox_messages || c->owed_bytes > bytes);
}

/* the row locked as an UPDATE locks it, in row; false: it is gone */
static bool
lock_row(chains_rels *r, Snapshot snapshot, ItemPointer tid, TupleTableSlot *row)
{
	TM_FailureData tmfd;
	TM_Result	res;

	res = table_tuple_lock(r->replicas, tid, snapshot, row, GetCurrentCommandId(false),
						   LockTupleNoKeyExclusive, LockWaitBlock, TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
	if (res == TM_Deleted)
		return false;
	if (res != TM_Ok)
		elog(ERROR, "magic_sync: could not lock a replica's row to copy its chain (%d)", (int) res);
	slot_getallattrs(row);
	return true;
}

static void
update_row(chains_rels *r, ResultRelInfo *rri, EState *estate, Snapshot snapshot, TupleTableSlot *row,
		   TupleTableSlot *next, const ms_chain_copied *c, bool owed)
{
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool		update_indexes;
	TM_Result	res;
	int			natts = RelationGetDescr(r->replicas)->natts;

	ExecClearTuple(next);
	memcpy(next->tts_values, row->tts_values, natts * sizeof(Datum));
	memcpy(next->tts_isnull, row->tts_isnull, natts * sizeof(bool));
	next->tts_values[r->col[C_LAST_NUMBER] - 1] = Int64GetDatum(c->last_number);
	next->tts_values[r->col[C_LAST_NONCE] - 1] = PointerGetDatum(c->last_nonce);
	next->tts_isnull[r->col[C_LAST_NONCE] - 1] = c->last_nonce == NULL;
	if (owed)
	{
		next->tts_values[r->col[C_OWED_MESSAGES] - 1] = Int64GetDatum(c->owed_messages);
		next->tts_isnull[r->col[C_OWED_MESSAGES] - 1] = false;
		next->tts_values[r->col[C_OWED_BYTES] - 1] = Int64GetDatum(c->owed_bytes);
		next->tts_isnull[r->col[C_OWED_BYTES] - 1] = false;
	}
	ExecStoreVirtualTuple(next);
	/* the row is locked by this transaction: nobody else changed it since */
	res = table_tuple_update(r->replicas, &row->tts_tid, next, GetCurrentCommandId(true), snapshot,
							 InvalidSnapshot, true, &tmfd, &lockmode, &update_indexes);
	if (res != TM_Ok)
		elog(ERROR, "magic_sync: could not update a replica's row to copy its chain (%d)", (int) res);
	/*
	 * Not as an UPDATE (update false): its hint that the key is unchanged
	 * reads the updated columns from a range table this has none of; the
	 * hint helps only bottom-up deletion, never what an index holds.
	 */
	if (update_indexes && rri->ri_NumIndices > 0)
		(void) ExecInsertIndexTuples(rri, next, estate, false, false, NULL, NIL);
}

bool
ms_chains_copy(Snapshot snapshot, ArrayType *written, ArrayType *messages, ArrayType *bytes,
			   bool owed, bool write, ms_chain_copied **copied, int *ncopied)
{
	chains_rels r;
	Datum	   *ids;
	Datum	   *m;
	Datum	   *b;
	bool	   *m_null;
	bool	   *b_null;
	int			n;
	EState	   *estate = NULL;
	ResultRelInfo *rri = NULL;
	TupleTableSlot *row;
	TupleTableSlot *next = NULL;

	*ncopied = 0;
	*copied = NULL;
	if (!rels_open(&r, owed))
		return false;
	deconstruct_array(written, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, &ids, NULL, &n);
	deconstruct_array(messages, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &m, &m_null, &n);
	deconstruct_array(bytes, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &b, &b_null, &n);
	*copied = palloc0(sizeof(ms_chain_copied) * Max(n, 1));
	row = table_slot_create(r.replicas, NULL);
	if (write)
	{
		estate = CreateExecutorState();
		rri = makeNode(ResultRelInfo);
		InitResultRelInfo(rri, r.replicas, 1, NULL, 0);
		ExecOpenIndices(rri, false);
		next = MakeSingleTupleTableSlot(RelationGetDescr(r.replicas), &TTSOpsVirtual);
	}
	for (int i = 0; i < n; i++)
	{
		ms_chain_copied *c = &(*copied)[*ncopied];
		ItemPointerData tid;

		/* the statement's w.messages IS NOT NULL */
		if (m_null[i])
			continue;
		if (!replica_row(&r, snapshot, ids[i], &tid) || !lock_row(&r, snapshot, &tid, row))
			continue;
		memcpy(c->id.data, DatumGetUUIDP(ids[i])->data, UUID_LEN);
		newest(row, &r, snapshot, ids[i], c);
		if (owed)
		{
			c->owed_messages = DatumGetInt64(row->tts_values[r.col[C_OWED_MESSAGES] - 1]) + DatumGetInt64(m[i]);
			c->owed_bytes = DatumGetInt64(row->tts_values[r.col[C_OWED_BYTES] - 1]) +
				(b_null[i] ? 0 : DatumGetInt64(b[i]));
		}
		c->past = past_bounds(row, &r, c, owed);
		if (write)
			update_row(&r, rri, estate, snapshot, row, next, c, owed);
		(*ncopied)++;
	}
	ExecDropSingleTupleTableSlot(row);
	if (write)
	{
		ExecDropSingleTupleTableSlot(next);
		ExecCloseIndices(rri);
		FreeExecutorState(estate);
		/* what follows sees the rows written */
		CommandCounterIncrement();
	}
	rels_close(&r);
	return true;
}
