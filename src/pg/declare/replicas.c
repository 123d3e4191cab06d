/*-------------------------------------------------------------------------
 * replicas.c
 *	  The replicas (sync.replicas): sync.replica_add, sync.replica_set and
 *	  sync.replica_drop.  What the relay saw of each (seen_*) is the relay's
 *	  to write: a change here is observed at its next pass (docs/design.md 4.2).
 *
 *	  A replica's role pulls and files for it: sync.replica_add and
 *	  sync.replica_set give one only if their caller could grant it
 *	  (access.h), then write sync.replicas as their own owner (owner.h).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/uuid.h"

#include "access.h"
#include "owner.h"
#include "spi_check.h"

PG_FUNCTION_INFO_V1(ms_replica_add);
PG_FUNCTION_INFO_V1(ms_replica_set);
PG_FUNCTION_INFO_V1(ms_replica_drop);

static char *
uuid_text(Datum id)
{
	return DatumGetCString(DirectFunctionCall1(uuid_out, id));
}

static void
require_id(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a replica is named by its uuid"),
				 errhint("Pass the replica's uuid, not NULL.")));
}

/*
 * replica_state: 0 when the replica is unknown, 1 when known, 2 when
 * dropped and not yet forgotten by the relay.
 */
static int
replica_state(Datum id)
{
	Oid			argtypes[1] = {UUIDOID};
	Datum		args[1] = {id};
	bool		isnull;
	int			rc;

	rc = SPI_execute_with_args("SELECT dropped FROM sync.replicas WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
							   1, argtypes, args, NULL, false, 0);
	ms_spi_check(rc, SPI_OK_SELECT, "reading sync.replicas failed");
	if (SPI_processed == 0)
		return 0;
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) ? 2 : 1;
}

/*
 * role_arg: the role argument i, checked: it exists, and the caller may
 * grant it.  NULL when not given.
 */
static char *
role_arg(FunctionCallInfo fcinfo, int i)
{
	char	   *role;

	if (PG_NARGS() <= i || PG_ARGISNULL(i))
		return NULL;
	role = NameStr(*PG_GETARG_NAME(i));
	if (!OidIsValid(get_role_oid(role, true)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role \"%s\" does not exist", role),
				 errdetail("A replica authenticates as its role to pull and file."),
				 errhint("CREATE ROLE %s LOGIN, then add the replica.", quote_identifier(role))));
	ms_require_grant(role, GetUserId());
	return role;
}

static void
unknown(Datum id)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("replica %s does not exist", uuid_text(id)),
			 errhint("sync.replica_add adds a replica; sync.replicas lists them.")));
}

static void
being_dropped(Datum id)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("replica %s is dropped", uuid_text(id)),
			 errdetail("The relay forgets it at its next pass."),
			 errhint("Wait for the relay's next pass, then add it again.")));
}

/*
 * shared_role: a role pulls and files for every replica that has it, so two
 * replicas given one role can each act for the other: said with a WARNING
 * (once per transaction and role: a fleet added in one statement is told
 * once).  Not refused: a fleet whose devices share a pooled role does so by
 * design (docs/scale.md), and so may one device's two files.
 */
static void
shared_role(Datum id, Datum role)
{
	static TransactionId warned_xid = InvalidTransactionId;
	static NameData warned_role;
	Oid			argtypes[2] = {UUIDOID, NAMEOID};
	Datum		args[2] = {id, role};
	bool		isnull;
	int64		others;
	char	   *first;

	if (TransactionIdEquals(warned_xid, GetCurrentTransactionId()) &&
		strcmp(NameStr(warned_role), NameStr(*DatumGetName(role))) == 0)
		return;
	ms_spi_check_one(SPI_execute_with_args("SELECT pg_catalog.count(*), pg_catalog.min(r.id::pg_catalog.text) FROM sync.replicas r"
										   " WHERE r.role OPERATOR(pg_catalog.=) $2 AND r.id OPERATOR(pg_catalog.<>) $1"
										   "   AND NOT r.dropped",
										   2, argtypes, args, NULL, true, 1), SPI_OK_SELECT, "reading sync.replicas failed");
	others = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (others == 0)
		return;
	first = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	warned_xid = GetCurrentTransactionId();
	namestrcpy(&warned_role, NameStr(*DatumGetName(role)));
	ereport(WARNING,
			(errcode(ERRCODE_WARNING),
			 errmsg("replica %s shares role \"%s\" with %lld other replica%s (%s%s)", uuid_text(id),
					NameStr(*DatumGetName(role)), (long long) others, others == 1 ? "" : "s", first,
					others > 1 ? ", ..." : ""),
			 errdetail("A replica's role may pull and file for every replica that has it: each of their agents can act for the others."),
			 errhint("Give each replica a login role of its own (sync.replica_set(..., role => ...)), unless they share one by design: one device's files, or a fleet through one pooled role.")));
}

/* a mirrored table that declares a partition column */
typedef struct part_table
{
	Oid			relid;
	char	   *name;			/* as sync.tables.relid prints it, search_path pinned */
	char	   *column;			/* quoted */
} part_table;

/* the mirrored tables that declare a partition column */
static List *
partition_tables(void)
{
	List	   *tables = NIL;
	int			rc;

	rc = SPI_execute("SELECT t.relid::pg_catalog.oid, t.relid::pg_catalog.text, t.partition FROM sync.tables t"
					 " WHERE t.partition IS NOT NULL ORDER BY t.id", true, 0);
	ms_spi_check(rc, SPI_OK_SELECT, "reading sync.tables failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		part_table *t = palloc(sizeof(part_table));
		bool		isnull;

		t->relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		t->name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		t->column = pstrdup(quote_identifier(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3)));
		tables = lappend(tables, t);
	}
	return tables;
}

/*
 * table_partitions: run sql (of t, with $1 the partition unless it is
 * (Datum) 0) as t's owner, as the relay reads it: a cast of the owner's
 * type to text is the owner's code (owner.h).  The caller reads the result.
 */
static void
table_partitions(const part_table *t, const char *sql, Datum partition)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {partition};
	ms_as_owner as;
	int			rc;

	ms_owner_begin(&as, t->relid);
	rc = SPI_execute_with_args(psprintf(sql, t->column, t->name, t->column), partition ? 1 : 0,
							   argtypes, args, NULL, true, 0);
	ms_owner_end(&as);
	ms_spi_check(rc, SPI_OK_SELECT, "reading the partitions of %s failed", t->name);
}

/* whether partition is one some mirrored table's partition column holds, or a replica has */
static bool
partition_known(List *tables, Datum partition)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {partition};
	ListCell   *lc;

	foreach(lc, tables)
	{
		table_partitions(lfirst(lc), "SELECT FROM %2$s t WHERE (t.%1$s)::pg_catalog.text"
						 " COLLATE pg_catalog.\"default\" OPERATOR(pg_catalog.=) $1 LIMIT 1", partition);
		if (SPI_processed > 0)
			return true;
	}
	return ms_spi_bool("SELECT EXISTS (SELECT FROM sync.replicas r WHERE NOT r.dropped"
					   " AND r.partition OPERATOR(pg_catalog.=) $1)",
					   1, argtypes, args, true, "reading sync.replicas failed");
}

/* the first ten partitions known, quoted and listed; NULL when none */
static char *
partitions_listed(List *tables)
{
	ArrayBuildState *known = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	Oid			argtypes[1] = {TEXTARRAYOID};
	Datum		args[1];
	ListCell   *lc;

	/* the first ten of each: the first ten of all are among them */
	foreach(lc, tables)
	{
		table_partitions(lfirst(lc), "SELECT DISTINCT (t.%1$s)::pg_catalog.text COLLATE pg_catalog.\"default\""
						 " FROM %2$s t WHERE t.%3$s IS NOT NULL ORDER BY 1 LIMIT 10", (Datum) 0);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

			known = accumArrayResult(known, d, isnull, TEXTOID, CurrentMemoryContext);
		}
	}
	args[0] = makeArrayResult(known, CurrentMemoryContext);
	ms_spi_check_one(SPI_execute_with_args("SELECT pg_catalog.string_agg(pg_catalog.quote_literal(l.p), ', ') FROM"
										   " (SELECT k.p FROM (SELECT pg_catalog.unnest($1) UNION"
										   "  SELECT r.partition FROM sync.replicas r WHERE NOT r.dropped) k(p)"
										   "  WHERE k.p IS NOT NULL ORDER BY k.p LIMIT 10) l",
										   1, argtypes, args, NULL, true, 0), SPI_OK_SELECT, "reading the partitions failed");
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/*
 * check_partition: a replica's partition must be one the fleet knows: a
 * value some mirrored table's partition column holds, or one a replica
 * already has (docs/operations.md, "Partitions").  A partition no row and
 * no replica has is, far more likely than not, misspelt: the replica would
 * quietly hold none of the partitioned rows.  Where no mirrored table
 * declares a partition column a partition only scopes the reads, and any
 * is taken.  Each table's partitions are read as its owner.
 */
static void
check_partition(Datum partition)
{
	List	   *tables = partition_tables();
	char	   *name = TextDatumGetCString(partition);
	char	   *listed;

	if (tables == NIL || partition_known(tables, partition))
		return;
	listed = partitions_listed(tables);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("partition \"%s\" is unknown", name),
			 errdetail("No mirrored table's partition column holds \"%s\", and no replica has it.", name),
			 listed == NULL
			 ? errhint("No partition is known yet: write the rows of partition \"%s\" first, then add the replica.", name)
			 : errhint("Known partitions: %s. Check the spelling, or write the rows of partition \"%s\" first.",
					   listed, name)));
}

/*
 * require_state: the replica is known (or, adding it, unknown), and not
 * dropped.
 */
static void
require_state(Datum id, bool known)
{
	int			state = replica_state(id);

	if (state == 2)
		being_dropped(id);
	if (known && state == 0)
		unknown(id);
	if (!known && state == 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("replica %s already exists", uuid_text(id)),
				 errhint("sync.replica_set changes a replica.")));
}

/*
 * replica_begin: the replica argument 0 names, known (or, adding it, not),
 * and the role argument role_argno checked (role_arg); from here as the
 * function's owner (ms_definer_end), SPI connected.
 */
static Datum
replica_begin(FunctionCallInfo fcinfo, bool known, int role_argno, ms_as_owner *owner)
{
	Datum		id;

	require_id(fcinfo);
	id = PG_GETARG_DATUM(0);
	(void) role_arg(fcinfo, role_argno);
	ms_definer_begin(fcinfo, owner);
	SPI_connect();
	require_state(id, known);
	return id;
}

/* replica_end: the end of replica_begin; a role given shared with another replica warned of */
static void
replica_end(FunctionCallInfo fcinfo, Datum id, int role_argno, ms_as_owner *owner)
{
	if (PG_NARGS() > role_argno && !PG_ARGISNULL(role_argno))
		shared_role(id, PG_GETARG_DATUM(role_argno));
	SPI_finish();
	ms_definer_end(owner);
}

/* arg_value: argument i as SPI takes it: its value, or a null. */
static void
arg_value(FunctionCallInfo fcinfo, int i, Datum *value, char *null)
{
	*value = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
	*null = PG_ARGISNULL(i) ? 'n' : ' ';
}

/* partition_arg: the partition argument i, checked when given, as SPI takes it. */
static void
partition_arg(FunctionCallInfo fcinfo, int i, Datum *value, char *null)
{
	if (!PG_ARGISNULL(i))
		check_partition(PG_GETARG_DATUM(i));
	arg_value(fcinfo, i, value, null);
}

/*
 * ms_replica_add: sync.replica_add(id, partition, role, live) adds a
 * replica; the relay provisions it at its next pass.
 */
Datum
ms_replica_add(PG_FUNCTION_ARGS)
{
	Oid			argtypes[4] = {UUIDOID, TEXTOID, NAMEOID, BOOLOID};
	Datum		args[4];
	char		nulls[5] = "    ";
	int			rc;
	ms_as_owner owner;
	Datum		id = replica_begin(fcinfo, false, 2, &owner);

	args[0] = id;
	partition_arg(fcinfo, 1, &args[1], &nulls[1]);
	arg_value(fcinfo, 2, &args[2], &nulls[2]);
	args[3] = PG_ARGISNULL(3) ? BoolGetDatum(true) : PG_GETARG_DATUM(3);
	rc = SPI_execute_with_args("INSERT INTO sync.replicas (id, partition, role, live)"
							   " VALUES ($1, $2, $3, $4)",
							   4, argtypes, args, nulls, false, 0);
	ms_spi_check(rc, SPI_OK_INSERT, "adding the replica failed");
	replica_end(fcinfo, id, 2, &owner);
	PG_RETURN_VOID();
}

/*
 * ms_replica_set: sync.replica_set(id, live, partition, role) changes what
 * is given (a NULL leaves it as it is).  0.1 declared it without role.
 */
Datum
ms_replica_set(PG_FUNCTION_ARGS)
{
	Oid			argtypes[4] = {UUIDOID, BOOLOID, TEXTOID, NAMEOID};
	Datum		args[4];
	char		nulls[5] = "    ";
	int			rc;
	bool		role = PG_NARGS() > 3 && !PG_ARGISNULL(3);
	ms_as_owner owner;
	Datum		id = replica_begin(fcinfo, true, 3, &owner);

	args[0] = id;
	arg_value(fcinfo, 1, &args[1], &nulls[1]);
	partition_arg(fcinfo, 2, &args[2], &nulls[2]);
	args[3] = role ? PG_GETARG_DATUM(3) : (Datum) 0;
	nulls[3] = role ? ' ' : 'n';
	rc = SPI_execute_with_args("UPDATE sync.replicas"
							   "   SET live = coalesce($2, live), partition = coalesce($3, partition),"
							   "       role = coalesce($4, role)"
							   " WHERE id OPERATOR(pg_catalog.=) $1",
							   4, argtypes, args, nulls, false, 0);
	ms_spi_check(rc, SPI_OK_UPDATE, "changing the replica failed");
	replica_end(fcinfo, id, 3, &owner);
	PG_RETURN_VOID();
}

/*
 * ms_replica_drop: sync.replica_drop(id) marks a replica dropped and not
 * live; the relay forgets it (what it held, its outbox) at its next pass.
 */
Datum
ms_replica_drop(PG_FUNCTION_ARGS)
{
	Datum		id;
	Oid			argtypes[1] = {UUIDOID};
	Datum		args[1];
	int			rc;

	require_id(fcinfo);
	id = PG_GETARG_DATUM(0);
	SPI_connect();
	switch (replica_state(id))
	{
		case 0:
			unknown(id);
			break;
		case 2:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("replica %s is already dropped", uuid_text(id)),
					 errdetail("The relay forgets it at its next pass.")));
			break;
	}
	args[0] = id;
	rc = SPI_execute_with_args("UPDATE sync.replicas SET dropped = true, live = false WHERE id OPERATOR(pg_catalog.=) $1",
							   1, argtypes, args, NULL, false, 0);
	ms_spi_check(rc, SPI_OK_UPDATE, "dropping the replica failed");
	SPI_finish();
	PG_RETURN_VOID();
}
