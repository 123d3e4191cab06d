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

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/uuid.h"

#include "access.h"
#include "owner.h"

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
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading sync.replicas failed: %s", SPI_result_code_string(rc));
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
	ms_as_owner owner;

	require_id(fcinfo);
	id = PG_GETARG_DATUM(0);
	(void) role_arg(fcinfo, 2);
	ms_definer_begin(fcinfo, &owner);
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
	ms_definer_end(&owner);
	PG_RETURN_VOID();
}

/*
 * ms_replica_set: sync.replica_set(id, live, partition, role) changes what
 * is given (a NULL leaves it as it is).  0.1 declared it without role.
 */
Datum
ms_replica_set(PG_FUNCTION_ARGS)
{
	Datum		id;
	Oid			argtypes[4] = {UUIDOID, BOOLOID, TEXTOID, NAMEOID};
	Datum		args[4];
	char		nulls[5] = "    ";
	int			rc;
	char	   *role;
	ms_as_owner owner;

	require_id(fcinfo);
	id = PG_GETARG_DATUM(0);
	role = role_arg(fcinfo, 3);
	ms_definer_begin(fcinfo, &owner);
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
	args[0] = id;
	args[1] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[1] = PG_ARGISNULL(1) ? 'n' : ' ';
	args[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2) ? 'n' : ' ';
	args[3] = role != NULL ? PG_GETARG_DATUM(3) : (Datum) 0;
	nulls[3] = role != NULL ? ' ' : 'n';
	rc = SPI_execute_with_args("UPDATE sync.replicas"
							   "   SET live = coalesce($2, live), partition = coalesce($3, partition),"
							   "       role = coalesce($4, role)"
							   " WHERE id OPERATOR(pg_catalog.=) $1",
							   4, argtypes, args, nulls, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "changing the replica failed: %s", SPI_result_code_string(rc));
	SPI_finish();
	ms_definer_end(&owner);
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
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "dropping the replica failed: %s", SPI_result_code_string(rc));
	SPI_finish();
	PG_RETURN_VOID();
}
