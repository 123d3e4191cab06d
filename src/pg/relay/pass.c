/*-------------------------------------------------------------------------
 * pass.c
 *	  One relay pass: its snapshot, and the executor every statement of a
 *	  pass or a read runs through.  See pass.h.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

#include "access.h"
#include "catalog.h"
#include "owner.h"
#include "pass.h"

void
ms_pass_begin(ms_pass *p, MemoryContext cxt)
{
	memset(p, 0, sizeof *p);
	p->cxt = cxt;
	p->snapshot_rows = -1;
	p->self = GetUserId();
	/* under REPEATABLE READ, the transaction's snapshot; else one taken now */
	p->snapshot = RegisterSnapshot(GetTransactionSnapshot());
}

void
ms_pass_read_as_owners(ms_pass *p)
{
	ListCell   *lc;

	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);

		ms_require_select(t->relid, p->self);
		if (OidIsValid(t->members))
			ms_require_select(t->members, p->self);
		if (OidIsValid(t->assignments))
			ms_require_select(t->assignments, p->self);
		if (OidIsValid(t->active))
			ms_require_select(t->active, p->self);
	}
	p->as_owners = true;
}

void
ms_pass_end(ms_pass *p)
{
	if (p->snapshot != NULL)
		UnregisterSnapshot(p->snapshot);
	p->snapshot = NULL;
}

SPIPlanPtr
ms_prepare(const char *sql, int nargs, Oid *types)
{
	return ms_owner_prepare(sql, nargs, types, GetUserId());
}

int
ms_run(ms_pass *p, SPIPlanPtr plan, Datum *values, const char *nulls, long tcount)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc = SPI_execute_snapshot(plan, values, nulls, p->snapshot,
										  InvalidSnapshot, false, true, tcount);

	/* SPI leaves its procedure's context current: a chunk's copies belong to the chunk */
	MemoryContextSwitchTo(cxt);
	if (rc < 0)
		elog(ERROR, "could not run a statement of the relay pass: %s", SPI_result_code_string(rc));
	return rc;
}

int
ms_exec(ms_pass *p, const char *sql, int nargs, Oid *types,
		Datum *values, const char *nulls, long tcount)
{
	SPIPlanPtr	plan = ms_owner_prepare(sql, nargs, types, p->self);
	int			rc = ms_run(p, plan, values, nulls, tcount);

	SPI_freeplan(plan);
	return rc;
}

void
ms_analyze(ms_pass *p, const char *tables)
{
	/* as a function's SET clause does: undone when ANALYZE is, or after it */
	int			nest = NewGUCNestLevel();

	(void) set_config_option("default_statistics_target", "10", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	ms_exec(p, psprintf("ANALYZE %s", tables), 0, NULL, NULL, NULL, 0);
	AtEOXact_GUC(true, nest);
}

void
ms_temp_table(ms_pass *p, const char *name, const char *definition)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(psprintf("pg_temp.%s", name))};
	bool		isnull;

	ms_exec(p, "SELECT to_regclass($1) IS NULL", 1, types, values, NULL, 0);
	/*
	 * Emptied in place at every commit: no new file, no pg_class update, as
	 * TRUNCATE would cost every pass.  A pass earlier in the same transaction
	 * may have left rows: those are deleted.
	 */
	if (DatumGetBool(ms_value(0, 1, &isnull)))
		ms_exec(p, psprintf("CREATE TEMP TABLE %s (%s) ON COMMIT DELETE ROWS", name, definition),
				0, NULL, NULL, NULL, 0);
	else
		ms_exec(p, psprintf("DELETE FROM pg_temp.%s", name), 0, NULL, NULL, NULL, 0);
}

void
ms_exec_all(ms_pass *p, const char *const *stmts)
{
	/* one at a time: each statement is analysed after the one before it ran */
	for (; *stmts != NULL; stmts++)
		ms_exec(p, *stmts, 0, NULL, NULL, NULL, 0);
}

Portal
ms_open(ms_pass *p, const char *sql, int nargs, Oid *types,
		Datum *values, const char *nulls)
{
	MemoryContext cxt = CurrentMemoryContext;
	SPIPlanPtr	plan = ms_owner_prepare(sql, nargs, types, p->self);
	Portal		portal;

	/* a copy of the pass's snapshot, at the current command id */
	CommandCounterIncrement();
	PushCopiedSnapshot(p->snapshot);
	UpdateActiveSnapshotCommandId();
	portal = SPI_cursor_open(NULL, plan, values, nulls, true);
	PopActiveSnapshot();
	MemoryContextSwitchTo(cxt);
	if (portal == NULL)
		elog(ERROR, "could not open a cursor over \"%s\"", sql);
	return portal;
}

Datum
ms_value(uint64 row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

int64
ms_int64(void)
{
	bool		isnull = true;
	int64		v = 0;

	if (SPI_tuptable == NULL)
		return 0;
	if (SPI_processed > 0)
	{
		Datum		d = ms_value(0, 1, &isnull);

		v = isnull ? 0 : DatumGetInt64(d);
	}
	/* read once: a pass writing thousands of messages must not keep every result */
	SPI_freetuptable(SPI_tuptable);
	return v;
}

ArrayType *
ms_array(void)
{
	bool		isnull = true;
	Datum		d = (Datum) 0;

	if (SPI_tuptable != NULL && SPI_processed > 0)
		d = ms_value(0, 1, &isnull);
	return isnull ? NULL : DatumGetArrayTypePCopy(d);
}
