/*-------------------------------------------------------------------------
 * replicas.c
 *	  The replicas (sync.replicas): sync.replica_add, sync.replica_set and
 *	  sync.replica_drop.  What the relay saw of each (seen_*) is the relay's
 *	  to write: a change here is observed at its next pass (docs/design.md 4.2).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/uuid.h"

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

	rc = SPI_execute_with_args("SELECT dropped FROM sync.replicas WHERE id = $1 FOR UPDATE",
							   1, argtypes, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading sync.replicas failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return 0;
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) ? 2 : 1;
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
 * partitions_sql: one query over the partition column of every mirrored
 * table that declares one, and the partitions the replicas have: the
 * distinct partitions known, as text.  NULL when no mirrored table declares
 * a partition column.
 */
static char *
partitions_sql(void)
{
	StringInfoData sql;
	int			rc;

	rc = SPI_execute("SELECT t.relid::text, t.partition FROM sync.tables t"
					 " WHERE t.partition IS NOT NULL ORDER BY t.id", true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading sync.tables failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return NULL;
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT r.partition FROM sync.replicas r WHERE NOT r.dropped");
	for (uint64 i = 0; i < SPI_processed; i++)
		appendStringInfo(&sql, " UNION SELECT %s::text FROM %s",
						 quote_identifier(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2)),
						 SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	return sql.data;
}

/*
 * check_partition: a replica's partition must be one the fleet knows: a
 * value some mirrored table's partition column holds, or one a replica
 * already has (docs/operations.md, "Partitions").  A partition no row and
 * no replica has is, far more likely than not, misspelt: the replica would
 * quietly hold none of the partitioned rows.  Where no mirrored table
 * declares a partition column a partition only scopes the reads, and any
 * is taken.
 */
static void
check_partition(Datum partition)
{
	char	   *known = partitions_sql();
	char	   *name = TextDatumGetCString(partition);
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {partition};
	StringInfoData sql;
	bool		isnull;
	int			rc;

	if (known == NULL)
		return;
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT EXISTS (SELECT FROM (%s) k(p) WHERE k.p = $1),"
					 " (SELECT string_agg(quote_literal(p), ', ') FROM"
					 "  (SELECT k.p FROM (%s) k(p) WHERE k.p IS NOT NULL ORDER BY k.p LIMIT 10) l)",
					 known, known);
	rc = SPI_execute_with_args(sql.data, 1, argtypes, args, NULL, true, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "reading the partitions failed: %s", SPI_result_code_string(rc));
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		return;
	(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("partition \"%s\" is unknown", name),
			 errdetail("No mirrored table's partition column holds \"%s\", and no replica has it.", name),
			 isnull
			 ? errhint("No partition is known yet: write the rows of partition \"%s\" first, then add the replica.", name)
			 : errhint("Known partitions: %s. Check the spelling, or write the rows of partition \"%s\" first.",
					   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2), name)));
}

/*
 * ms_replica_add: sync.replica_add(id, partition, role, live) adds a
 * replica; the relay provisions it at its next pass.
 */
Datum
ms_replica_add(PG_FUNCTION_ARGS)
{
	Datum		id;
	Oid			argtypes[4] = {UUIDOID, TEXTOID, NAMEOID, BOOLOID};
	Datum		args[4];
	char		nulls[5] = "    ";
	int			rc;

	require_id(fcinfo);
	id = PG_GETARG_DATUM(0);
	if (!PG_ARGISNULL(2))
	{
		char	   *role = NameStr(*PG_GETARG_NAME(2));

		if (!OidIsValid(get_role_oid(role, true)))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("role \"%s\" does not exist", role),
					 errdetail("A replica authenticates as its role to pull and file."),
					 errhint("CREATE ROLE %s LOGIN, then add the replica.", quote_identifier(role))));
	}
	SPI_connect();
	switch (replica_state(id))
	{
		case 1:
			ereport(ERROR,
					(errcode(ERRCODE_UNIQUE_VIOLATION),
					 errmsg("replica %s already exists", uuid_text(id)),
					 errhint("sync.replica_set changes a replica.")));
			break;
		case 2:
			being_dropped(id);
			break;
	}
	if (!PG_ARGISNULL(1))
		check_partition(PG_GETARG_DATUM(1));
	args[0] = id;
	args[1] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[1] = PG_ARGISNULL(1) ? 'n' : ' ';
	args[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2) ? 'n' : ' ';
	args[3] = PG_ARGISNULL(3) ? BoolGetDatum(true) : PG_GETARG_DATUM(3);
	rc = SPI_execute_with_args("INSERT INTO sync.replicas (id, partition, role, live)"
							   " VALUES ($1, $2, $3, $4)",
							   4, argtypes, args, nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "adding the replica failed: %s", SPI_result_code_string(rc));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * ms_replica_set: sync.replica_set(id, live, partition) changes what is
 * given (a NULL leaves it as it is).
 */
Datum
ms_replica_set(PG_FUNCTION_ARGS)
{
	Datum		id;
	Oid			argtypes[3] = {UUIDOID, BOOLOID, TEXTOID};
	Datum		args[3];
	char		nulls[4] = "   ";
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
			being_dropped(id);
			break;
	}
	if (!PG_ARGISNULL(2))
		check_partition(PG_GETARG_DATUM(2));
	args[0] = id;
	args[1] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[1] = PG_ARGISNULL(1) ? 'n' : ' ';
	args[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2) ? 'n' : ' ';
	rc = SPI_execute_with_args("UPDATE sync.replicas"
							   "   SET live = coalesce($2, live), partition = coalesce($3, partition)"
							   " WHERE id = $1",
							   3, argtypes, args, nulls, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "changing the replica failed: %s", SPI_result_code_string(rc));
	SPI_finish();
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
	rc = SPI_execute_with_args("UPDATE sync.replicas SET dropped = true, live = false WHERE id = $1",
							   1, argtypes, args, NULL, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "dropping the replica failed: %s", SPI_result_code_string(rc));
	SPI_finish();
	PG_RETURN_VOID();
}
