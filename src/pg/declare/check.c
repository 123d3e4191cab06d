/*-------------------------------------------------------------------------
 * check.c
 *	  sync.check(): one row per reason the engine cannot trust its notes or
 *	  its declarations.  A trigger missing, disabled, not ENABLE ALWAYS (it
 *	  would miss writes under session_replication_role = replica: a logical
 *	  replication subscriber, a restore) or not as sync.mirror writes it could
 *	  let a change go unnoted; a declaration that no longer
 *	  matches its table could send replicas rows they cannot read.  The
 *	  relay holds back a table this names, with the tables joined to it
 *	  (declare/catalog.c, ms_catalog_hold), but for a foreign key with no
 *	  index on its columns, which only makes the relay read a table whole
 *	  where it would look rows up.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"

#include "bytes.h"
#include "catalog.h"
#include "spi_check.h"
#include "triggers.h"

PG_FUNCTION_INFO_V1(ms_check);

static void
problem(List **problems, const char *table, const char *what, char *detail)
{
	ms_problem *p = palloc0(sizeof(ms_problem));

	p->table = pstrdup(table);
	p->problem = pstrdup(what);
	p->detail = detail;
	*problems = lappend(*problems, p);
}

/* tgargs_of: the bytes pg_trigger.tgargs holds for these arguments. */
static bytea *
tgargs_of(const ms_trigger *tg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < tg->nargs; i++)
		appendBinaryStringInfo(&buf, tg->args[i], strlen(tg->args[i]) + 1);
	return ms_to_bytea(buf.data, buf.len);
}

/* check_one: compare one expected trigger with pg_trigger on relid. */
static void
check_one(List **problems, const ms_table *t, const ms_trigger *tg, Oid relid,
		  Oid note_fn)
{
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		args[2];
	bytea	   *want = tgargs_of(tg);
	char	   *where = ms_wire_name(relid);
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	char		enabled;
	bytea	   *have;
	bool		same;
	int			rc;

	/* kept across calls: sync.file checks every table's triggers at each filing (ms_check_triggers) */
	static SPIPlanPtr plan = NULL;

	if (plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(
									"SELECT g.tgfoid, g.tgtype, g.tgenabled, g.tgargs, g.tgnargs,"
									"       coalesce(pg_catalog.array_length(g.tgattr::int2[], 1), 0) = 0, g.tgqual IS NULL"
									"  FROM pg_catalog.pg_trigger g WHERE g.tgrelid OPERATOR(pg_catalog.=) $1 AND g.tgname OPERATOR(pg_catalog.=) $2",
									2, argtypes);

		if (p == NULL || SPI_keepplan(p) != 0)
			elog(ERROR, "could not prepare the reading of triggers: %s", SPI_result_code_string(SPI_result));
		plan = p;
	}
	args[0] = ObjectIdGetDatum(relid);
	args[1] = CStringGetTextDatum(tg->name);
	rc = SPI_execute_plan(plan, args, NULL, true, 0);
	ms_spi_check(rc, SPI_OK_SELECT, "reading triggers failed");
	if (SPI_processed == 0)
	{
		problem(problems, t->name, "trigger missing",
				psprintf("Trigger %s on %s, which notes changes of %s, is missing.",
						 tg->name, where, t->name));
		SPI_freetuptable(SPI_tuptable);
		return;
	}
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	enabled = DatumGetChar(SPI_getbinval(tup, desc, 3, &isnull));
	if (enabled == TRIGGER_DISABLED || enabled == TRIGGER_FIRES_ON_REPLICA)
		problem(problems, t->name, "trigger disabled",
				psprintf("Trigger %s on %s, which notes changes of %s, is disabled.",
						 tg->name, where, t->name));
	else if (enabled != TRIGGER_FIRES_ALWAYS)
		problem(problems, t->name, "trigger not always",
				psprintf("Trigger %s on %s, which notes changes of %s, is not ENABLE ALWAYS: a write under session_replication_role = replica would go unnoted.",
						 tg->name, where, t->name));
	have = DatumGetByteaPP(SPI_getbinval(tup, desc, 4, &isnull));
	same = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull)) == note_fn &&
		DatumGetInt16(SPI_getbinval(tup, desc, 2, &isnull)) == tg->tgtype &&
		DatumGetInt16(SPI_getbinval(tup, desc, 5, &isnull)) == tg->nargs &&
		VARSIZE_ANY_EXHDR(have) == VARSIZE_ANY_EXHDR(want) &&
		memcmp(VARDATA_ANY(have), VARDATA_ANY(want), VARSIZE_ANY_EXHDR(want)) == 0;
	same = same && DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));	/* no column list */
	same = same && DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));	/* no WHEN */
	if (!same)
		problem(problems, t->name, "trigger altered",
				psprintf("Trigger %s on %s is not as sync.mirror writes it for %s.",
						 tg->name, where, t->name));
	SPI_freetuptable(SPI_tuptable);
}

/*
 * check_trigger: one expected trigger, on its table and, for a partitioned
 * table, on every partition: PostgreSQL clones a row trigger there, where
 * it can be disabled apart, and a TRUNCATE of a partition fires only the
 * partition's own triggers.
 */
static void
check_trigger(List **problems, const ms_table *t, const ms_trigger *tg, Oid note_fn)
{
	ListCell   *lc;

	check_one(problems, t, tg, tg->relid, note_fn);
	foreach(lc, ms_partitions(tg->relid))
		check_one(problems, t, tg, lfirst_oid(lc), note_fn);
}

void
ms_check_triggers(List *tables, List **problems)
{
	Oid			note_fn = DatumGetObjectId(DirectFunctionCall1(regprocedurein, CStringGetDatum("sync.note()")));
	ListCell   *lc;

	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);
		ListCell   *tc;

		foreach(tc, ms_triggers_of(t))
		{
			ms_trigger *tg = lfirst(tc);

			if (get_rel_name(tg->relid) != NULL)
				check_trigger(problems, t, tg, note_fn);
		}
	}
}

/*
 * ms_check: sync.check() returns (tab, problem, detail), one row per
 * problem, ordered by table and problem.
 */
Datum
ms_check(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *problems = NIL;
	List	   *tables;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	tables = ms_catalog_read(&problems);
	ms_check_triggers(tables, &problems);
	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);

		/* not a reason to stop the relay (relay.c): a reason it is slow */
		for (int f = 0; f < t->nfkeys && get_rel_name(t->relid) != NULL; f++)
		{
			char	   *index = ms_fkey_unindexed(t, &t->fkeys[f]);

			if (index != NULL)
				problem(&problems, t->name, MS_CHECK_UNINDEXED,
						psprintf("Foreign key %s of %s has no index on its columns: a pass planning a change to a row it points at reads %s whole. %s;",
								 t->fkeys[f].name, t->name, t->name, index));
		}
	}
	foreach(lc, problems)
	{
		ms_problem *p = lfirst(lc);
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = CStringGetTextDatum(p->table);
		values[1] = CStringGetTextDatum(p->problem);
		values[2] = CStringGetTextDatum(p->detail);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}
