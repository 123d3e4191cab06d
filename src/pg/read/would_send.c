/*-------------------------------------------------------------------------
 * would_send.c
 *	  sync.would_send(statement): a dry run of one INSERT, UPDATE, DELETE or
 *	  MERGE -- how many rows of each table each replica would be sent, and
 *	  how many it would let go of, were the statement run and its notes
 *	  planned by a pass.
 *
 * In a subtransaction: the statement runs as the caller (the function is
 * SECURITY INVOKER; the statement, security-restricted, cannot change the
 * session for what runs after it), its notes written by the noting trigger
 * as they would be; those notes are then the batch of a plan, made by the
 * relay's own planner (relay/plan.c's ms_plan_dry, relay/question.c), for
 * every live replica not waiting for a snapshot, against what each holds
 * now; the plan is counted; and the subtransaction is rolled back: the
 * statement's writes, its notes and the plan go, and nothing is recorded
 * held, put in an outbox or sent.  What cannot be rolled back is not:
 * sequences the statement draws from stay drawn.
 *
 * The batch is the notes the statement wrote: those of the plan's snapshot,
 * taken before the statement ran, with an id above the last one it saw.  A
 * note another transaction commits meanwhile is not in the snapshot; one
 * the caller's transaction wrote before, below that id.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "batch.h"
#include "catalog.h"
#include "pass.h"
#include "plan.h"
#include "subxact.h"
#include "temp.h"

PG_FUNCTION_INFO_V1(ms_would_send);

/* one line of the answer: a replica, a table, what it is sent and lets go of */
typedef struct line
{
	Datum		replica;
	Oid			relid;
	int64		sent;
	int64		let_go;
} line;

/* the statement's raw statements, refused unless they are one INSERT, UPDATE, DELETE or MERGE */
static void
refuse_unless_dml(const char *sql)
{
	List	   *raw = raw_parser(sql, RAW_PARSE_DEFAULT);
	Node	   *stmt = list_length(raw) == 1 ? ((RawStmt *) linitial(raw))->stmt : NULL;
	char	   *what;

	if (stmt != NULL && (IsA(stmt, InsertStmt) || IsA(stmt, UpdateStmt) ||
						 IsA(stmt, DeleteStmt) || IsA(stmt, MergeStmt)))
		return;
	if (stmt != NULL)
		what = psprintf("The statement given is %s.", CreateCommandName(stmt));
	else
		what = psprintf("%d statements were given.", list_length(raw));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("sync.would_send runs one INSERT, UPDATE, DELETE or MERGE statement"),
			 errdetail("%s", what),
			 errhint("Give the one statement whose effect on the replicas you want to see.")));
}

/* search_path = pg_catalog, pg_temp for the extension's own statements, until AtEOXact_GUC(true, the level returned) */
static int
pin_search_path(void)
{
	int			nest = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nest;
}

/* run the caller's statement as the caller, security-restricted: it cannot change the session */
static void
run_statement(const char *sql)
{
	Oid			user;
	int			sec;
	int			rc;

	GetUserIdAndSecContext(&user, &sec);
	SetUserIdAndSecContext(user, sec | SECURITY_RESTRICTED_OPERATION);
	rc = SPI_execute(sql, false, 0);
	SetUserIdAndSecContext(user, sec);
	if (rc < 0)
		elog(ERROR, "magic_sync: sync.would_send's statement failed: %s", SPI_result_code_string(rc));
}

/*
 * dry_run: in the subtransaction the caller opened, the statement, its
 * notes planned, the plan counted into a list of lines allocated in out.
 */
static List *
dry_run(const char *sql, MemoryContext out)
{
	ms_pass		p;
	ms_pass_catalog cat = {0};	/* its tables alone */
	int64		before;
	bool		isnull;
	ArrayType  *replicas;
	int64		replicas_all;
	ArrayType  *notes;
	List	   *lines = NIL;

	int			nest;

	SPI_connect();
	nest = pin_search_path();
	ms_pass_begin(&p, CurrentMemoryContext);
	ms_exec(&p.exec, "SELECT max(id) FROM sync.notes", 0, NULL, NULL, NULL, 0);
	before = ms_int64();
	AtEOXact_GUC(true, nest);

	/* the caller's statement, in the caller's search_path */
	run_statement(sql);

	/* the extension's own statements in its own (undone with the subtransaction) */
	(void) pin_search_path();
	cat.tables = ms_catalog_tables();
	ms_read_as_owners(MS_READER(&p, cat.tables));
	ms_exec(&p.exec, "SELECT array_agg(id ORDER BY id) FROM sync.notes WHERE id > $1 AND NOT done",
			1, (Oid[]) {INT8OID}, (Datum[]) {Int64GetDatum(before)}, NULL, 0);
	notes = ms_array();
	/* the replicas a pass plans around what changed: live ones, none waiting for its snapshot */
	ms_exec(&p.exec, "SELECT array_agg(id) FILTER (WHERE live AND NOT dropped AND NOT provision), count(*)"
			" FROM sync.replicas", 0, NULL, NULL, NULL, 0);
	replicas_all = DatumGetInt64(ms_value(0, 2, &isnull));
	replicas = ms_array();
	if (notes != NULL && replicas != NULL)
	{
		ms_temp_table(&p.exec, "ms_notes_read");
		ms_temp_table(&p.exec, "ms_pending");
		ms_batch_only(&p, notes);
		p.did.notes_read = ArrayGetNItems(ARR_NDIM(notes), ARR_DIMS(notes));
		ms_plan_prepare(&p);
		ms_plan_dry(&p, replicas, &(ms_plan_in) {replicas_all, false, 0, NULL, &cat});
		ms_exec(&p.exec, "SELECT c.replica, t.relid, sum(c.sent)::bigint, sum(c.let_go)::bigint FROM ("
				"  SELECT replica, tab, 1 AS sent, 0 AS let_go FROM pg_temp.ms_send"
				"  UNION ALL SELECT replica, tab, 0, 1 FROM pg_temp.ms_take) c"
				" JOIN sync.tables t ON t.id = c.tab"
				" GROUP BY c.replica, t.relid ORDER BY c.replica, t.relid::regclass::text",
				0, NULL, NULL, NULL, 0);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			MemoryContext old = MemoryContextSwitchTo(out);
			line	   *l = palloc(sizeof(line));

			l->replica = datumCopy(ms_value(i, 1, &isnull), false, 16);
			l->relid = DatumGetObjectId(ms_value(i, 2, &isnull));
			l->sent = DatumGetInt64(ms_value(i, 3, &isnull));
			l->let_go = DatumGetInt64(ms_value(i, 4, &isnull));
			lines = lappend(lines, l);
			MemoryContextSwitchTo(old);
		}
	}
	ms_pass_end(&p);
	SPI_finish();
	return lines;
}

/*
 * ms_would_send: sync.would_send(statement) returns (replica, tab, sent,
 * let_go): per replica and table, the rows a pass would send it and those
 * it would let go of, had the statement run; nothing of it stays.
 */
Datum
ms_would_send(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	List	   *volatile lines = NIL;
	ListCell   *lc;

	refuse_unless_dml(sql);
	/* the plan's temporary tables, made once in the session (rolled back, they would be made at every call) */
	SPI_connect();
	{
		ms_executor x;
		int			nest = pin_search_path();

		ms_executor_begin(&x, CurrentMemoryContext);
		ms_temp_tables(&x);
		ms_executor_end(&x);
		AtEOXact_GUC(true, nest);
	}
	SPI_finish();

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		lines = dry_run(sql, cxt);
	}
	PG_CATCH();
	{
		/* never let an error out with the subtransaction open: the caller's own would roll back ours */
		ReThrowError(ms_subxact_undo(cxt, owner));
	}
	PG_END_TRY();
	/* whatever the statement did, its notes, the plan: all undone */
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, lines)
	{
		line	   *l = lfirst(lc);
		Datum		values[4] = {l->replica, ObjectIdGetDatum(l->relid), Int64GetDatum(l->sent),
		Int64GetDatum(l->let_go)};
		bool		nulls[4] = {0};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
