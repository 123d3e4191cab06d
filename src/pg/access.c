/*-------------------------------------------------------------------------
 * access.c
 *	  Who may act for a replica: its own role, for its own uuid only, or
 *	  sync_admin.  sync.pull and sync.file run with raised rights
 *	  (SECURITY DEFINER), so they check the caller themselves: the role that
 *	  called them (GetOuterUserId), not the one they run as.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "access.h"

void
ms_replica_access(pg_uuid_t *replica, const char *what)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(replica)};
	Oid			caller = GetOuterUserId();
	Oid			admin = get_role_oid("sync_admin", true);
	bool		role_null;
	bool		isnull;
	Datum		role;
	bool		dropped;
	char	   *id = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(replica)));

	if (SPI_execute_with_args("SELECT role, dropped FROM sync.replicas WHERE id = $1",
							  1, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.replicas");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replica %s is not registered", id),
				 errhint("Register it with sync.replica_add('%s').", id)));
	role = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &role_null);
	dropped = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (dropped)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replica %s was dropped", id),
				 errdetail("A dropped replica is forgotten: nothing is sent to it, nothing it files is taken."),
				 errhint("Register it again with sync.replica_add('%s') to provision it from scratch.", id)));
	if (superuser_arg(caller) ||
		(OidIsValid(admin) && has_privs_of_role(caller, admin)))
		return;
	if (!role_null && get_role_oid(NameStr(*DatumGetName(role)), true) == caller)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("role \"%s\" may not %s for replica %s", GetUserNameFromId(caller, false), what, id),
			 errdetail("A replica's role acts for its own uuid only."),
			 errhint("Connect as the replica's role, or as a member of sync_admin.")));
}
