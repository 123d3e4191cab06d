/*-------------------------------------------------------------------------
 * writer.c
 *	  A table of the extension's written in C as an INSERT writes it.  See
 *	  writer.h.
 *
 * As relay/chains.c writes sync.replicas: table_tuple_insert, then
 * ExecInsertIndexTuples for its indexes (a unique one checked as an
 * INSERT's is).  A statement's start and end cost a one-row pass more than
 * its rows (issue 37).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "writer.h"

bool
ms_rel_plain(Relation rel, const char *const *columns, int n)
{
	TupleDesc	desc = RelationGetDescr(rel);

	/* what an INSERT would run or be turned by: checks, rules, row security */
	if (desc->natts != n || (desc->constr != NULL && desc->constr->num_check > 0) ||
		rel->rd_rel->relhasrules || rel->rd_rel->relrowsecurity ||
		rel->rd_rel->relkind != RELKIND_RELATION)
		return false;
	if (rel->trigdesc != NULL)
		for (int i = 0; i < rel->trigdesc->numtriggers; i++)
			if (!rel->trigdesc->triggers[i].tgisinternal)
				return false;
	for (int c = 0; c < n; c++)
		if (TupleDescAttr(desc, c)->attisdropped || strcmp(NameStr(TupleDescAttr(desc, c)->attname), columns[c]) != 0)
			return false;
	return true;
}

ms_writer *
ms_writer_open(const char *name, bool temp, const char *const *columns, int ncolumns, Oid self, AclMode more)
{
	Oid			relid = temp ? RangeVarGetRelid(makeRangeVar("pg_temp", (char *) name, -1), NoLock, true)
		: get_relname_relid(name, get_namespace_oid("sync", false));
	ms_writer  *w;
	Relation	rel;

	if (!OidIsValid(relid) || pg_class_aclcheck(relid, self, ACL_INSERT | more) != ACLCHECK_OK)
		return NULL;
	rel = table_open(relid, RowExclusiveLock);
	if ((rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP) != temp || !ms_rel_plain(rel, columns, ncolumns))
	{
		/* the lock kept, as a statement's on it would be */
		table_close(rel, NoLock);
		return NULL;
	}
	w = palloc(sizeof(ms_writer));
	w->rel = rel;
	w->estate = CreateExecutorState();
	w->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->rri, rel, 1, NULL, 0);
	ExecOpenIndices(w->rri, false);
	w->slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
	return w;
}

void
ms_writer_put(ms_writer *w, const Datum *values, const bool *nulls, ItemPointer at)
{
	int			natts = RelationGetDescr(w->rel)->natts;

	ExecClearTuple(w->slot);
	memcpy(w->slot->tts_values, values, natts * sizeof(Datum));
	memcpy(w->slot->tts_isnull, nulls, natts * sizeof(bool));
	ExecStoreVirtualTuple(w->slot);
	table_tuple_insert(w->rel, w->slot, GetCurrentCommandId(true), 0, NULL);
	if (w->rri->ri_NumIndices > 0)
		(void) ExecInsertIndexTuples(w->rri, w->slot, w->estate, false, false, NULL, NIL);
	ResetPerTupleExprContext(w->estate);
	if (at != NULL)
		*at = w->slot->tts_tid;
}

void
ms_writer_close(ms_writer *w)
{
	ExecDropSingleTupleTableSlot(w->slot);
	ExecCloseIndices(w->rri);
	FreeExecutorState(w->estate);
	table_close(w->rel, NoLock);
	pfree(w);
}

void
ms_tm_check(TM_Result res, const char *what)
{
	switch (res)
	{
		case TM_Ok:
		case TM_SelfModified:
			break;
		case TM_Updated:
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));
			break;
		case TM_Deleted:
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent delete")));
			break;
		default:
			elog(ERROR, "magic_sync: unexpected result %d %s", (int) res, what);
	}
}

void
ms_unique_as_conflict(void (*fn) (void *), void *arg, const char *message, const char *hint)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		fn(arg);
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		if (e->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("%s", message),
				 errdetail("%s", e->detail != NULL ? e->detail : e->message),
				 errhint("%s", hint)));
	}
	PG_END_TRY();
}

static void
relations_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	(void) cacheid;
	(void) hashvalue;
	*(bool *) DatumGetPointer(arg) = false;
}

void
ms_on_relation_change(bool *flag)
{
	CacheRegisterSyscacheCallback(RELOID, relations_changed, PointerGetDatum(flag));
}
