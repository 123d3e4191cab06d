/*-------------------------------------------------------------------------
 * heldrows.c
 *	  The held rows of a table read whole, written to sync.held a page at a
 *	  time, as COPY writes rows (heap_multi_insert), and then to its
 *	  indexes.
 *
 * An INSERT ... SELECT of them wrote a heap record and ran the executor for
 * each row: a million rows of a first sync's were two fifths of what
 * recording them cost.  Only for rows with no note to look up (record.c
 * asks the batch's notes by a join otherwise), and only while sync.held is
 * as this build knows it (its columns, no trigger, no rule); else the
 * caller writes them by SQL.  A row held already fails its unique index as
 * the INSERT's would (record.c makes that a serialization failure).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "heldrows.h"

/* rows buffered for one heap_multi_insert: as COPY's MAX_BUFFERED_TUPLES */
#define HELD_PAGE_ROWS 1000

/* sync.held's columns, in order, as this build writes them */
static const struct
{
	const char *name;
	Oid			type;
}			held_columns[] =
{
	{"replica", UUIDOID},
	{"tab", INT4OID},
	{"key", TEXTOID},
	{"note", INT8OID},
	{"number", INT8OID},
	{"taken", INT8OID},
	{"refused", TEXTOID},
	{"since", INT8OID},
	{"replace", BOOLOID},
};

/* whether rel is sync.held as held_columns says, with nothing that runs on insert */
static bool
as_known(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (desc->natts != (int) lengthof(held_columns) || rel->trigdesc != NULL ||
		rel->rd_rel->relhasrules || rel->rd_rel->relrowsecurity ||
		rel->rd_rel->relkind != RELKIND_RELATION)
		return false;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || att->atttypid != held_columns[i].type ||
			strcmp(NameStr(att->attname), held_columns[i].name) != 0)
			return false;
	}
	return true;
}

bool
ms_held_insert(int n, const Datum *replicas, const Datum *tabs, const Datum *keys, const Datum *numbers)
{
	Oid			relid = get_relname_relid("held", get_namespace_oid("sync", false));
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	BulkInsertState bistate;
	TupleTableSlot **slots;
	CommandId	cid;
	int			done = 0;

	if (!OidIsValid(relid))
		return false;
	/* what the INSERT would have been checked for */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) != ACLCHECK_OK)
		return false;
	rel = table_open(relid, RowExclusiveLock);
	if (!as_known(rel))
	{
		table_close(rel, RowExclusiveLock);
		return false;
	}
	estate = CreateExecutorState();
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	bistate = GetBulkInsertState();
	cid = GetCurrentCommandId(true);
	slots = palloc(sizeof(TupleTableSlot *) * HELD_PAGE_ROWS);
	for (int i = 0; i < HELD_PAGE_ROWS; i++)
		slots[i] = table_slot_create(rel, NULL);

	while (done < n)
	{
		int			k = Min(n - done, HELD_PAGE_ROWS);

		for (int i = 0; i < k; i++)
		{
			TupleTableSlot *slot = slots[i];
			int			row = done + i;

			ExecClearTuple(slot);
			memset(slot->tts_isnull, false, sizeof(bool) * lengthof(held_columns));
			slot->tts_values[0] = replicas[row];
			slot->tts_values[1] = tabs[row];
			slot->tts_values[2] = keys[row];
			slot->tts_values[3] = Int64GetDatum(0);
			slot->tts_values[4] = numbers[row];
			slot->tts_isnull[5] = true;
			slot->tts_isnull[6] = true;
			slot->tts_values[7] = numbers[row];
			slot->tts_values[8] = BoolGetDatum(false);
			ExecStoreVirtualTuple(slot);
		}
		table_multi_insert(rel, slots, k, cid, 0, bistate);
		for (int i = 0; i < k; i++)
		{
			ResetPerTupleExprContext(estate);
			/* a unique index's conflict is raised here, as the INSERT's is */
			(void) ExecInsertIndexTuples(rri, slots[i], estate, false, false, NULL, NIL);
		}
		done += k;
	}

	for (int i = 0; i < HELD_PAGE_ROWS; i++)
		ExecDropSingleTupleTableSlot(slots[i]);
	pfree(slots);
	FreeBulkInsertState(bistate);
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	table_close(rel, NoLock);
	return true;
}
