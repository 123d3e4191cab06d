/*-------------------------------------------------------------------------
 * pass.c
 *	  One relay pass: its snapshot, and the executor every statement of a
 *	  pass or a read runs through.  See pass.h.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "common/hashfn.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/snapmgr.h"

#include "access.h"
#include "catalog.h"
#include "owner.h"
#include "pass.h"
#include "settings.h"
#include "spi_check.h"

/*
 * The statements a pass runs, prepared once per session and kept
 * (SPI_keepplan), by their text: a small pass is a few dozen statements of a
 * millisecond's work each, and parsing and planning them again every pass
 * would cost more than running them.  A declaration changed, or more texts
 * than PLANS_MAX (rules and foreign keys are spelled into them), and every
 * plan goes: ms_plans_catalog.  PostgreSQL itself plans a kept statement
 * again when a table it reads changes, or is analysed.
 */
#define PLANS_MAX 2000

typedef struct kept_plan
{
	uint64		hash;			/* hash key: of the text and the role */
	char	   *sql;			/* the text, in TopMemoryContext */
	Oid			self;			/* the role its sync.* and pg_temp relations are checked as (owner.h) */
	SPIPlanPtr	plan;
} kept_plan;

static HTAB *plans = NULL;
static bool keeping = false;	/* this pass keeps its plans */
static char *plans_catalog = NULL;	/* what the declarations were when they were prepared */

static void
plans_flush(void)
{
	HASH_SEQ_STATUS seq;
	kept_plan  *k;

	if (plans == NULL)
		return;
	hash_seq_init(&seq, plans);
	while ((k = hash_seq_search(&seq)) != NULL)
	{
		SPI_freeplan(k->plan);
		pfree(k->sql);
	}
	hash_destroy(plans);
	plans = NULL;
}

void
ms_plans_keep(bool keep)
{
	keeping = keep;
}

void
ms_plans_catalog(const char *catalog)
{
	if (plans_catalog != NULL && strcmp(plans_catalog, catalog) == 0)
		return;
	plans_flush();
	if (plans_catalog != NULL)
		pfree(plans_catalog);
	plans_catalog = MemoryContextStrdup(TopMemoryContext, catalog);
}

/*
 * a plan for sql, checked for its own relations as self (owner.h): the one
 * kept, or (not keeping) a new one the caller frees (*kept false).  A plan
 * is kept for the role that began the pass: another role's pass (SET ROLE,
 * then sync.relay_pass) never runs a statement checked as the first.
 */
static SPIPlanPtr
plan_for(const char *sql, int nargs, Oid *types, Oid self, int options, bool *kept)
{
	uint64		hash;
	kept_plan  *k;
	bool		found;
	SPIPlanPtr	plan;

	*kept = false;
	if (!keeping)
		return ms_owner_prepare(sql, nargs, types, self);
	if (plans != NULL && hash_get_num_entries(plans) >= PLANS_MAX)
		plans_flush();
	if (plans == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(kept_plan);
		ctl.hcxt = TopMemoryContext;
		plans = hash_create("magic_sync kept plans", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	hash = hash_bytes_extended((const unsigned char *) sql, (int) strlen(sql), self);
	k = hash_search(plans, &hash, HASH_ENTER, &found);
	if (found && k->self == self && strcmp(k->sql, sql) == 0)
	{
		*kept = true;
		return k->plan;
	}
	if (found)		/* another text or role of the same hash: not kept */
		return ms_owner_prepare(sql, nargs, types, self);
	k->sql = NULL;
	k->plan = NULL;
	PG_TRY();
	{
		plan = ms_owner_prepare_cursor(sql, nargs, types, self, options);
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "could not keep a plan of the relay pass");
	}
	PG_CATCH();
	{
		hash_search(plans, &hash, HASH_REMOVE, NULL);
		PG_RE_THROW();
	}
	PG_END_TRY();
	k->sql = MemoryContextStrdup(TopMemoryContext, sql);
	k->self = self;
	k->plan = plan;
	*kept = true;
	return plan;
}

SPIPlanPtr
ms_prepare_kept(ms_executor *x, const char *sql, int nargs, Oid *types)
{
	bool		kept;

	/* not keeping: a plan of the pass, freed with the pass's SPI memory */
	return plan_for(sql, nargs, types, x->self, 0, &kept);
}

SPIPlanPtr
ms_prepare_kept_generic(ms_executor *x, const char *sql, int nargs, Oid *types)
{
	bool		kept;

	/* not keeping: planned for its values, as ms_exec_generic's */
	return plan_for(sql, nargs, types, x->self, CURSOR_OPT_GENERIC_PLAN, &kept);
}

void
ms_executor_begin(ms_executor *x, MemoryContext cxt)
{
	memset(x, 0, sizeof *x);
	x->cxt = cxt;
	x->self = GetUserId();
	/* a relay pass keeps its plans (ms_plans_keep); a read plans afresh */
	keeping = false;
	/* under REPEATABLE READ, the transaction's snapshot; else one taken now */
	x->snapshot = RegisterSnapshot(GetTransactionSnapshot());
}

void
ms_pass_begin(ms_pass *p, MemoryContext cxt)
{
	memset(p, 0, sizeof *p);
	ms_executor_begin(&p->exec, cxt);
}

void
ms_read_as_owners(ms_reader *rd)
{
	ListCell   *lc;

	foreach(lc, rd->tables)
	{
		ms_table   *t = lfirst(lc);

		ms_require_select(t->relid, rd->exec->self);
		if (OidIsValid(t->members))
			ms_require_select(t->members, rd->exec->self);
		if (OidIsValid(t->assignments))
			ms_require_select(t->assignments, rd->exec->self);
		if (OidIsValid(t->active))
			ms_require_select(t->active, rd->exec->self);
	}
	rd->exec->as_owners = true;
}

void
ms_executor_end(ms_executor *x)
{
	if (x->snapshot != NULL)
		UnregisterSnapshot(x->snapshot);
	x->snapshot = NULL;
	keeping = false;
}

void
ms_pass_end(ms_pass *p)
{
	ms_executor_end(&p->exec);
}

SPIPlanPtr
ms_prepare(const char *sql, int nargs, Oid *types)
{
	return ms_owner_prepare(sql, nargs, types, GetUserId());
}

/*
 * check_scans: magic_sync.check_scans: the plan of each statement the pass
 * runs, explained as it would run it (its role, its snapshot, its values),
 * and a warning naming every table of the application it would read whole
 * (a sequential scan, but of the extension's own and temporary tables).  A
 * test runs passes with it, and enable_seqscan off: a table scanned whole
 * then is one no index of it could serve.
 */
static void
check_scans(ms_executor *x, SPIPlanPtr plan, Datum *values, const char *nulls)
{
	ListCell   *lc;

	foreach(lc, SPI_plan_get_plan_sources(plan))
	{
		CachedPlanSource *ps = lfirst(lc);
		NodeTag		tag = ps->raw_parse_tree ? nodeTag(ps->raw_parse_tree->stmt) : T_Invalid;
		SPIPlanPtr	explain;
		Datum		json;
		bool		isnull;
		int			rc;

		if (tag != T_SelectStmt && tag != T_InsertStmt && tag != T_UpdateStmt && tag != T_DeleteStmt)
			continue;
		explain = ms_owner_prepare(psprintf("EXPLAIN (VERBOSE, FORMAT JSON) %s", ps->query_string),
								   ps->num_params, ps->param_types, x->self);
		rc = SPI_execute_snapshot(explain, values, nulls, x->snapshot, InvalidSnapshot, false, false, 0);
		if (rc < 0 || SPI_processed != 1)
			elog(ERROR, "could not explain a statement of the relay pass: %s", SPI_result_code_string(rc));
		json = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		rc = SPI_execute_with_args(
			"SELECT string_agg(DISTINCT pg_catalog.format('%I.%I', n ->> 'Schema', n ->> 'Relation Name'), ', ')"
			"  FROM pg_catalog.jsonb_path_query($1::pg_catalog.text::pg_catalog.jsonb, 'strict $.**') n"
			" WHERE pg_catalog.jsonb_typeof(n) OPERATOR(pg_catalog.=) 'object'"
			"   AND n ->> 'Node Type' OPERATOR(pg_catalog.=) 'Seq Scan'"
			"   AND n ->> 'Schema' OPERATOR(pg_catalog.<>) 'sync'"
			"   AND n ->> 'Schema' NOT LIKE 'pg\\_temp%'",
			1, (Oid[]) {SPI_gettypeid(SPI_tuptable->tupdesc, 1)}, &json, NULL, true, 1);
		ms_spi_check(rc, SPI_OK_SELECT, "could not read the plan of a statement of the relay pass");
		json = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			ereport(WARNING,
					(errmsg("magic_sync: a statement of the relay pass reads %s whole", TextDatumGetCString(json)),
					 errdetail_internal("%s", ps->query_string)));
		SPI_freeplan(explain);
	}
}

int
ms_run(ms_executor *x, SPIPlanPtr plan, Datum *values, const char *nulls, long tcount)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc;

	if (ms_check_scans)
		check_scans(x, plan, values, nulls);
	rc = SPI_execute_snapshot(plan, values, nulls, x->snapshot, InvalidSnapshot, false, true, tcount);

	/* SPI leaves its procedure's context current: a chunk's copies belong to the chunk */
	MemoryContextSwitchTo(cxt);
	if (rc < 0)
		elog(ERROR, "could not run a statement of the relay pass: %s", SPI_result_code_string(rc));
	return rc;
}

static int
exec_with(ms_executor *x, const char *sql, int nargs, Oid *types,
		  Datum *values, const char *nulls, long tcount, int options)
{
	bool		kept;
	SPIPlanPtr	plan = plan_for(sql, nargs, types, x->self, options, &kept);
	int			rc = ms_run(x, plan, values, nulls, tcount);

	if (!kept)
		SPI_freeplan(plan);
	return rc;
}

int
ms_exec(ms_executor *x, const char *sql, int nargs, Oid *types,
		Datum *values, const char *nulls, long tcount)
{
	return exec_with(x, sql, nargs, types, values, nulls, tcount, 0);
}

int
ms_exec_generic(ms_executor *x, const char *sql, int nargs, Oid *types,
				Datum *values, const char *nulls, long tcount)
{
	/* a plan made for this pass's values alone (not keeping) is made for them */
	return exec_with(x, sql, nargs, types, values, nulls, tcount, CURSOR_OPT_GENERIC_PLAN);
}

int
ms_exec_by_index(ms_executor *x, const char *sql, int nargs, Oid *types,
				 Datum *values, const char *nulls, long tcount)
{
	/* as a function's SET clause does: undone after it, or when it fails */
	int			nest = NewGUCNestLevel();
	int			rc;

	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	rc = ms_exec(x, sql, nargs, types, values, nulls, tcount);
	AtEOXact_GUC(true, nest);
	return rc;
}

void
ms_analyze(ms_executor *x, const char *tables, uint64 rows)
{
	/* as a function's SET clause does: undone when ANALYZE is, or after it */
	int			nest;

	/*
	 * A few rows are planned well without: an unanalysed table is taken to
	 * be as large as its pages hold, and ANALYZE would cost more than the
	 * statements it serves, and make PostgreSQL plan the kept ones again.
	 */
	if (rows < MS_ANALYZE_ROWS)
		return;
	nest = NewGUCNestLevel();
	(void) set_config_option("default_statistics_target", "10", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	ms_exec(x, psprintf("ANALYZE %s", tables), 0, NULL, NULL, NULL, 0);
	AtEOXact_GUC(true, nest);
}

void
ms_exec_all(ms_executor *x, const char *const *stmts)
{
	/* one at a time: each statement is analysed after the one before it ran */
	for (; *stmts != NULL; stmts++)
		ms_exec(x, *stmts, 0, NULL, NULL, NULL, 0);
}

Portal
ms_open(ms_executor *x, const char *sql, int nargs, Oid *types,
		Datum *values, const char *nulls)
{
	MemoryContext cxt = CurrentMemoryContext;
	SPIPlanPtr	plan = ms_prepare_kept(x, sql, nargs, types);
	Portal		portal;

	/* a copy of the pass's snapshot, at the current command id */
	CommandCounterIncrement();
	PushCopiedSnapshot(x->snapshot);
	UpdateActiveSnapshotCommandId();
	portal = SPI_cursor_open(NULL, plan, values, nulls, true);
	PopActiveSnapshot();
	MemoryContextSwitchTo(cxt);
	if (portal == NULL)
		elog(ERROR, "could not open a cursor over \"%s\"", sql);
	return portal;
}

/*
 * A look at a small table of the extension's in C, as the pass's statements
 * see it: no statement started, planned or counted for what most passes
 * find empty (issue 37: each statement's start and end cost a small pass
 * more than its scan).
 */
bool
ms_probe(ms_executor *x, const char *table, const char *index, ms_probe_fn fn, void *arg)
{
	return ms_probe_keyed(x, table, index, 0, NULL, fn, arg);
}

bool
ms_probe_keyed(ms_executor *x, const char *table, const char *index, int nkeys, ScanKey keys,
			   ms_probe_fn fn, void *arg)
{
	bool		looked;

	/* the pass's snapshot at its current command, as ms_run's statements see it */
	CommandCounterIncrement();
	PushCopiedSnapshot(x->snapshot);
	UpdateActiveSnapshotCommandId();
	/* the pass's own tables: its statements are checked as x->self, who may read them all (pass.h) */
	looked = ms_probe_rows(GetActiveSnapshot(), table, index, false, nkeys, keys, fn, arg);
	PopActiveSnapshot();
	return looked;
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
