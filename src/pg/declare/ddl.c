/*-------------------------------------------------------------------------
 * ddl.c
 *	  DDL followed as it runs (docs/design.md 4.11): the event triggers
 *	  magic_sync_ddl (ddl_command_end) and magic_sync_drop (sql_drop).
 *
 * At the end of every DDL command, the declarations of the tables it
 * touched -- altered, renamed, indexed, a partition attached -- follow
 * them (follow.c), in the DDL's own transaction: a rename is followed by
 * attnum and never stops the relay; a column added gets its id (and, in
 * the proto codec, its field); the rows a change needs are noted with it.
 * What an event trigger cannot see (DDL while event triggers are off, a
 * group table's columns, an active view made again) is sync.check()'s to
 * say, as before.
 *
 * sql_drop cannot name the table of a dropped index or constraint (they are
 * gone from the catalog): when it sees one, every declaration follows at
 * the command's end.  A mirrored table dropped is no longer mirrored, and
 * its replicas let it go.
 *
 * Both follow as the extension's owner, with search_path pinned: whoever
 * runs the DDL needs no right on sync.*.  What they read of the command
 * first they read as whoever runs it, with search_path pinned all the same:
 * a superuser's DDL in a database whose owner put an operator of its own
 * ahead of pg_catalog must not run it.  The triggers the follow makes again
 * fire these event triggers too; they are let pass.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "follow.h"
#include "owner.h"
#include "spi_check.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(ms_ddl_end);
PG_FUNCTION_INFO_V1(ms_ddl_drop);

/* our own DDL (the triggers a follow makes again) fires the event triggers too */
static bool following = false;

/* sql_drop saw an index, constraint, column or table go: every declaration follows */
static bool follow_all = false;

/*
 * touched: the tables the command touched, as relation oids: an index's
 * table, a partition's partitioned table, the table itself.
 */
static List *
touched(void)
{
	List	   *out = NIL;
	int			rc = SPI_execute(
		"SELECT DISTINCT coalesce(i.indrelid, c.oid), h.inhparent"
		"  FROM pg_catalog.pg_event_trigger_ddl_commands() d"
		"  JOIN pg_catalog.pg_class c ON c.oid = d.objid"
		"  LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid"
		"  LEFT JOIN pg_catalog.pg_inherits h ON h.inhrelid = coalesce(i.indrelid, c.oid)"
		" WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND NOT d.in_extension"
		"   AND c.relpersistence <> 't'", true, 0);

	ms_spi_check(rc, SPI_OK_SELECT, "reading the DDL's commands failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		rel = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
		Datum		parent = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);

		out = list_append_unique_oid(out, DatumGetObjectId(rel));
		if (!isnull)
			out = list_append_unique_oid(out, DatumGetObjectId(parent));
	}
	SPI_freetuptable(SPI_tuptable);
	return out;
}

/*
 * in_service: whether the declaration's table, if it is still there, has
 * every noting trigger sync.mirror gives it (its own two, and a grouped
 * table's on its member and assignment tables).  One without them all is
 * not in service: being made -- pg_restore creates the triggers one by one
 * after the table's constraints and indexes, enabling each ALWAYS by a
 * command of its own, and its declaration is restored before them all: a
 * follow then would make the triggers pg_restore is about to make -- or
 * broken, which sync.check() says.
 */
static bool
in_service(const ms_decl *d)
{
	Oid			types[4] = {OIDOID, OIDOID, OIDOID, TEXTOID};
	Datum		values[4] = {ObjectIdGetDatum(d->relid), ObjectIdGetDatum(d->members),
							 ObjectIdGetDatum(d->assignments), CStringGetTextDatum(psprintf("%d", d->id))};

	return ms_spi_bool("SELECT NOT EXISTS (SELECT FROM pg_catalog.pg_class WHERE oid = $1)"
					   " OR ((SELECT count(*) FROM pg_catalog.pg_trigger WHERE tgrelid = $1"
					   "       AND tgname IN ('magic_sync_note', 'magic_sync_truncate')) = 2"
					   "     AND ($2 = 0 OR (SELECT count(*) FROM pg_catalog.pg_trigger WHERE tgrelid = $2"
					   "       AND tgname IN ('magic_sync_member_' || $4, 'magic_sync_member_' || $4 || '_truncate')) = 2)"
					   "     AND ($3 = 0 OR (SELECT count(*) FROM pg_catalog.pg_trigger WHERE tgrelid = $3"
					   "       AND tgname IN ('magic_sync_assignment_' || $4, 'magic_sync_assignment_' || $4 || '_truncate')) = 2))",
					   4, types, values, true, "reading the triggers of a mirrored table failed");
}

/*
 * in_service_decls: every declaration (*decls), and those in service of
 * these tables (or all), read as sync.mirror does: as the function's owner,
 * search_path pinned, from here to the caller's ms_definer_end -- whoever
 * runs DDL, most often a role with no right on the extension's tables, is no
 * reason for the DDL to fail.
 */
static List *
in_service_decls(FunctionCallInfo fcinfo, ms_as_owner *owner, List **decls, List *relids, bool all)
{
	List	   *out = NIL;
	ListCell   *lc;

	ms_definer_begin(fcinfo, owner);
	*decls = ms_decl_read_all();
	foreach(lc, *decls)
	{
		ms_decl    *d = lfirst(lc);

		if ((all || list_member_oid(relids, d->relid)) && in_service(d))
			out = lappend(out, d);
	}
	return out;
}

/* follow: the declarations of these tables (or all) follow them */
static void
follow(FunctionCallInfo fcinfo, List *relids, bool all)
{
	List	   *decls;
	List	   *volatile pending;
	ListCell   *lc;
	ms_as_owner owner;

	pending = in_service_decls(fcinfo, &owner, &decls, relids, all);
	if (pending == NIL)
	{
		ms_definer_end(&owner);
		return;
	}
	following = true;
	PG_TRY();
	{
		foreach(lc, pending)
		{
			ms_decl    *d = lfirst(lc);
			ms_follow	f;

			ms_follow_init(&f);
			ms_follow_table(d, decls, &f);
			ms_follow_finish(d, decls, &f, "the DDL");
		}
	}
	PG_FINALLY();
	{
		following = false;
	}
	PG_END_TRY();
	ms_definer_end(&owner);
}

/*
 * enum_renamed: the enum the command renamed a label of (ALTER TYPE ...
 * RENAME VALUE: the type, as the command's own list names it), or InvalidOid
 */
static Oid
enum_renamed(FunctionCallInfo fcinfo)
{
	EventTriggerData *trig = (EventTriggerData *) fcinfo->context;
	Oid			type = InvalidOid;

	if (trig->parsetree == NULL || !IsA(trig->parsetree, AlterEnumStmt) ||
		((AlterEnumStmt *) trig->parsetree)->oldVal == NULL)
		return InvalidOid;
	ms_spi_check(SPI_execute("SELECT d.objid FROM pg_catalog.pg_event_trigger_ddl_commands() d"
							 " WHERE d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND NOT d.in_extension",
							 true, 0), SPI_OK_SELECT, "reading the DDL's commands failed");
	if (SPI_processed == 1)
	{
		bool		isnull;

		type = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_freetuptable(SPI_tuptable);
	return type;
}

/* follow_enum: the tables in service with a column of enum type follow a label of it renamed */
static void
follow_enum(FunctionCallInfo fcinfo, Oid type)
{
	List	   *decls;
	ListCell   *lc;
	ms_as_owner owner;

	foreach(lc, in_service_decls(fcinfo, &owner, &decls, NIL, true))
	{
		ms_decl    *d = lfirst(lc);
		List	   *problems = NIL;
		ms_table   *t;

		t = ms_validate(d, decls, false, &problems);
		if (t != NULL && problems == NIL)
			ms_follow_enum_renamed(t, type);
	}
	ms_definer_end(&owner);
}

/*
 * to_follow: called as an event trigger (an error otherwise), whether the
 * command is one to follow: not the extension's own, nor a follow's DDL.
 */
static bool
to_follow(FunctionCallInfo fcinfo, const char *name)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s runs only as an event trigger", name)));
	return !(following || creating_extension);
}

/* ms_ddl_end: ddl_command_end: the declarations of the tables the command touched follow them. */
Datum
ms_ddl_end(PG_FUNCTION_ARGS)
{
	List	   *relids;
	bool		all = follow_all;
	ms_as_owner pinned;

	if (!to_follow(fcinfo, "sync.ddl_end()"))
		PG_RETURN_NULL();
	follow_all = false;
	/* what the command wrote is seen by the catalog queries that follow it */
	CommandCounterIncrement();
	PushCopiedSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();
	ms_pinned_begin(&pinned);
	SPI_connect();
	relids = touched();
	if (relids != NIL || all)
		follow(fcinfo, relids, all);
	else
	{
		Oid			renamed = enum_renamed(fcinfo);

		if (OidIsValid(renamed))
			follow_enum(fcinfo, renamed);
	}
	SPI_finish();
	ms_pinned_end(&pinned);
	PopActiveSnapshot();
	PG_RETURN_NULL();
}

/* ms_ddl_drop: sql_drop: what went may be what a declaration leans on; all follow at the end. */
Datum
ms_ddl_drop(PG_FUNCTION_ARGS)
{
	int			rc;
	ms_as_owner pinned;

	if (!to_follow(fcinfo, "sync.ddl_drop()"))
		PG_RETURN_NULL();
	ms_pinned_begin(&pinned);
	SPI_connect();
	rc = SPI_execute("SELECT EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects()"
					 "  WHERE NOT is_temporary AND object_type IN ('table', 'table column',"
					 "   'table constraint', 'index', 'view', 'materialized view'))", true, 0);
	ms_spi_check(rc, SPI_OK_SELECT, "reading the objects dropped failed");
	{
		bool		isnull;

		follow_all |= DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();
	ms_pinned_end(&pinned);
	PG_RETURN_NULL();
}
