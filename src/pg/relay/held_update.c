/*-------------------------------------------------------------------------
 * held_update.c
 *	  The held rows a pass's only batch sends again, updated in C.  See
 *	  recorder.h (ms_held_update_addressed).
 *
 * heldrows.c's ms_held_addressed says it in SQL: each row of ms_send the
 * plan found held (not fresh, its held row's address known) that a segment
 * of kind 'u' carries gets, at that address, the note and the message that
 * carry it, no longer taken, refused or to be replaced, "since" the message
 * if it was being let go; what each message carries per table is added to
 * sync.carried.  A one-row pass sends one row again: the statement's join,
 * its UPDATE's executor and its INSERT ... ON CONFLICT cost it more than the
 * row (issue 37).  Here ms_send is read in C (a temporary table of a few
 * rows: this runs only when the plan is under MS_ANALYZE_ROWS), each held
 * row fetched at its address as the pass's snapshot sees it, checked to be
 * the row the plan found (replica, tab, key), and updated as an UPDATE under
 * REPEATABLE READ updates it (table_tuple_update: a row another transaction
 * changed since the snapshot fails the pass, a serialization failure; its
 * indexes written when the new version is not HOT, as relay/chains.c does).
 * sync.held and sync.carried have no trigger of their own and no check: a
 * catalog that gives either one, or other columns, is written by the
 * statement.  sync.carried's rows are the messages' own (numbers this pass
 * drew: no other transaction writes them), inserted; one there already is a
 * unique violation, never a silent sum.
 *
 * tests/e2e/fast.py compares every held row and carried count a walk's
 * passes record this way with what the full plan records.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/uuid.h"

#include "recorder.h"
#include "writer.h"

/* sync.held's columns, in its order */
enum
{
	H_REPLICA, H_TAB, H_KEY, H_NOTE, H_NUMBER, H_TAKEN, H_REFUSED, H_SINCE, H_REPLACE, H_COUNT
};
static const char *const held_columns[H_COUNT] = {
	"replica", "tab", "key", "note", "number", "taken", "refused", "since", "replace"
};

/* a row of ms_send sent again to a replica that holds it, at `held` */
typedef struct addressed
{
	pg_uuid_t	replica;
	int32		tab;
	char	   *key;
	int64		note;
	ItemPointerData held;
} addressed;

/* (replica, tab, number) and the rows of tab the message carries */
typedef struct carried_row
{
	pg_uuid_t	replica;
	int32		tab;
	int64		number;
	int64		rows;
} carried_row;

/* the rows of pg_temp.ms_send the plan found held, and where */
static addressed *
read_send(Snapshot snapshot, int *n)
{
	Oid			relid = RangeVarGetRelid(makeRangeVar("pg_temp", "ms_send", -1), NoLock, false);
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	int			col[6];
	static const char *const names[6] = {"replica", "tab", "key", "note", "fresh", "held"};
	TableScanDesc scan;
	HeapTuple	tup;
	int			cap = 16;
	addressed  *rows = palloc(sizeof(addressed) * cap);

	for (int c = 0; c < 6; c++)
		if ((col[c] = SPI_fnumber(desc, names[c])) <= 0)
			elog(ERROR, "magic_sync: pg_temp.ms_send has no column %s", names[c]);
	*n = 0;
	scan = table_beginscan(rel, snapshot, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull[6];
		Datum		v[6];
		addressed  *a;

		for (int c = 0; c < 6; c++)
			v[c] = heap_getattr(tup, col[c], desc, &isnull[c]);
		/* NOT s.fresh AND s.held IS NOT NULL */
		if (isnull[4] || DatumGetBool(v[4]) || isnull[5] || isnull[0] || isnull[1] || isnull[2])
			continue;
		if (*n == cap)
			rows = repalloc(rows, sizeof(addressed) * (cap *= 2));
		a = &rows[(*n)++];
		memcpy(a->replica.data, DatumGetUUIDP(v[0])->data, UUID_LEN);
		a->tab = DatumGetInt32(v[1]);
		a->key = TextDatumGetCString(v[2]);
		/* note is NOT NULL in ms_send */
		a->note = isnull[3] ? 0 : DatumGetInt64(v[3]);
		a->held = *(ItemPointer) DatumGetPointer(v[5]);
	}
	table_endscan(scan);
	table_close(rel, NoLock);
	return rows;
}

/* the held row at a's address updated as sent again by message `number`; false: it is not a's */
static bool
update_held(Relation held, ResultRelInfo *rri, EState *estate, Snapshot snapshot, TupleTableSlot *next,
			const addressed *a, int64 number)
{
	TupleDesc	desc = RelationGetDescr(held);
	HeapTupleData tup;
	Buffer		buf;
	bool		isnull;
	bool		same;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool		update_indexes;
	TM_Result	res;
	bool		was_taken;

	tup.t_self = a->held;
	if (!heap_fetch(held, snapshot, &tup, &buf, false))
		return false;
	/* h.replica = e.replica AND h.tab = e.tab AND h.key = e.key */
	same = memcmp(DatumGetUUIDP(heap_getattr(&tup, H_REPLICA + 1, desc, &isnull))->data, a->replica.data, UUID_LEN) == 0 &&
		DatumGetInt32(heap_getattr(&tup, H_TAB + 1, desc, &isnull)) == a->tab &&
		strcmp(TextDatumGetCString(heap_getattr(&tup, H_KEY + 1, desc, &isnull)), a->key) == 0;
	if (!same)
	{
		ReleaseBuffer(buf);
		return false;
	}
	/* the version as it is, its values in the page, pinned until it is updated */
	ExecClearTuple(next);
	heap_deform_tuple(&tup, desc, next->tts_values, next->tts_isnull);
	/* sent_again (heldrows.c) */
	was_taken = !next->tts_isnull[H_TAKEN];
	next->tts_values[H_NOTE] = Int64GetDatum(a->note);
	next->tts_isnull[H_NOTE] = false;
	next->tts_values[H_NUMBER] = Int64GetDatum(number);
	next->tts_isnull[H_NUMBER] = false;
	next->tts_isnull[H_TAKEN] = true;
	next->tts_values[H_TAKEN] = (Datum) 0;
	next->tts_isnull[H_REFUSED] = true;
	next->tts_values[H_REPLACE] = BoolGetDatum(false);
	next->tts_isnull[H_REPLACE] = false;
	if (was_taken)
	{
		next->tts_values[H_SINCE] = Int64GetDatum(number);
		next->tts_isnull[H_SINCE] = false;
	}
	ExecStoreVirtualTuple(next);
	res = table_tuple_update(held, &tup.t_self, next, GetCurrentCommandId(true), snapshot, InvalidSnapshot,
							 true, &tmfd, &lockmode, &update_indexes);
	ReleaseBuffer(buf);
	/* updated already by this pass: not where the plan found it, as the statement's count says */
	if (res == TM_SelfModified)
		return false;
	ms_tm_check(res, "updating a held row");
	if (update_indexes && rri->ri_NumIndices > 0)
		(void) ExecInsertIndexTuples(rri, next, estate, false, false, NULL, NIL);
	return true;
}

static int
carried_cmp(const void *a, const void *b)
{
	const carried_row *x = a;
	const carried_row *y = b;
	int			c = memcmp(x->replica.data, y->replica.data, UUID_LEN);

	if (c != 0)
		return c;
	if (x->tab != y->tab)
		return x->tab < y->tab ? -1 : 1;
	return x->number < y->number ? -1 : x->number > y->number ? 1 : 0;
}

/* what each message carries per table, inserted into sync.carried */
static void
insert_carried(ms_writer *carried, carried_row *rows, int n)
{
	int			g = 0;

	qsort(rows, n, sizeof(carried_row), carried_cmp);
	for (int i = 1; i <= n; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		if (i < n && carried_cmp(&rows[g], &rows[i]) == 0)
		{
			rows[g].rows += rows[i].rows;
			continue;
		}
		values[0] = UUIDPGetDatum(&rows[g].replica);
		values[1] = Int32GetDatum(rows[g].tab);
		values[2] = Int64GetDatum(rows[g].number);
		values[3] = Int64GetDatum(rows[g].rows);
		ms_writer_put(carried, values, nulls, NULL);
		if (i < n)
			rows[g = i] = rows[i];
	}
}

bool
ms_held_update_addressed(recorder *r, bool has_carried, int64 *expected, int64 *updated)
{
	static const char *const carried_columns[4] = {"replica", "tab", "number", "rows"};
	Oid			held_id = get_relname_relid("held", get_namespace_oid("sync", false));
	Relation	held;
	ms_writer  *carried = NULL;
	Snapshot	snapshot;
	addressed  *send;
	int			nsend;
	carried_row *counts = NULL;
	int			ncounts = 0;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *next;

	*expected = *updated = 0;
	/* the rights the statement needs, as the pass's role */
	if (!OidIsValid(held_id) || pg_class_aclcheck(held_id, r->p->exec.self, ACL_UPDATE | ACL_SELECT) != ACLCHECK_OK)
		return false;
	if (has_carried &&
		(carried = ms_writer_open("carried", false, carried_columns, 4, r->p->exec.self, ACL_UPDATE)) == NULL)
		return false;
	held = table_open(held_id, RowExclusiveLock);
	if (!ms_rel_plain(held, held_columns, H_COUNT))
	{
		if (carried != NULL)
			ms_writer_close(carried);
		table_close(held, NoLock);
		return false;
	}
	/* the pass's snapshot at a new command, as its statement's */
	CommandCounterIncrement();
	PushCopiedSnapshot(r->p->exec.snapshot);
	UpdateActiveSnapshotCommandId();
	snapshot = GetActiveSnapshot();
	send = read_send(snapshot, &nsend);
	estate = CreateExecutorState();
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, held, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	next = MakeSingleTupleTableSlot(RelationGetDescr(held), &TTSOpsVirtual);
	/* a row a held row at most: a second update of one is TM_SelfModified */
	if (has_carried)
		counts = palloc(sizeof(carried_row) * Max(nsend, 1));
	/* e: each segment of kind 'u' with the rows of ms_send it carries */
	for (int g = 0; g < r->nsegments; g++)
	{
		pg_uuid_t  *replica = DatumGetUUIDP(r->segs[0][g]);
		int32		tab = DatumGetInt32(r->segs[1][g]);
		char	   *first;
		char	   *last;
		int64		number = DatumGetInt64(r->segs[5][g]);

		if (DatumGetChar(r->segs[2][g]) != 'u')
			continue;
		first = TextDatumGetCString(r->segs[3][g]);
		last = TextDatumGetCString(r->segs[4][g]);
		for (int i = 0; i < nsend; i++)
		{
			addressed  *a = &send[i];

			if (a->tab != tab || memcmp(a->replica.data, replica->data, UUID_LEN) != 0 ||
				strcmp(a->key, first) < 0 || strcmp(a->key, last) > 0)
				continue;
			(*expected)++;
			if (!update_held(held, rri, estate, snapshot, next, a, number))
				continue;
			(*updated)++;
			if (has_carried)
			{
				counts[ncounts].replica = a->replica;
				counts[ncounts].tab = tab;
				counts[ncounts].number = number;
				counts[ncounts].rows = 1;
				ncounts++;
			}
		}
	}
	ExecDropSingleTupleTableSlot(next);
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	if (ncounts > 0)
		insert_carried(carried, counts, ncounts);
	PopActiveSnapshot();
	if (carried != NULL)
		ms_writer_close(carried);
	table_close(held, NoLock);
	/* what follows sees them */
	CommandCounterIncrement();
	return true;
}
