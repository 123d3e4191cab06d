/*-------------------------------------------------------------------------
 * access.c
 *	  Who may act for a replica: its own role, for its own uuid only, or
 *	  sync_admin.  sync.pull and sync.file run with raised rights
 *	  (SECURITY DEFINER), so they check the caller themselves: the role that
 *	  called them (GetOuterUserId), not the one they run as.
 *
 *	  And what sync_admin may not do by being sync_admin: declare a table it
 *	  does not own (its triggers and its rows are the owner's, as CREATE
 *	  TRIGGER asks), or give a replica a role it could not grant (that role
 *	  would pull and file the replica's rows).  Those functions read their
 *	  caller before they become the extension's owner (owner.h).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/objectaddress.h"
#include "catalog/pg_authid.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "access.h"
#include "probe.h"
#include "spi_check.h"

/* what a probe of sync.replicas found of the replica */
typedef struct access_row
{
	bool		found;
	bool		role_null;
	NameData	role;
	bool		dropped;
	ms_probe_fn also;			/* the caller's look at the same row, or NULL */
	void	   *also_arg;
} access_row;

static bool
access_probe(HeapTuple row, TupleDesc desc, void *arg)
{
	access_row *a = arg;
	bool		isnull;
	Datum		d = ms_probe_column(row, desc, "role", &a->role_null);

	if (!a->role_null)
		namestrcpy(&a->role, NameStr(*DatumGetName(d)));
	d = ms_probe_column(row, desc, "dropped", &isnull);
	a->dropped = !isnull && DatumGetBool(d);
	a->found = true;
	if (a->also != NULL)
		(void) a->also(row, desc, a->also_arg);
	return false;
}

void
ms_replica_access(pg_uuid_t *replica, const char *what)
{
	ms_replica_access_row(replica, what, NULL, NULL);
}

void
ms_replica_access_row(pg_uuid_t *replica, const char *what, ms_probe_fn also, void *arg)
{
	Oid			caller = GetOuterUserId();
	Oid			admin = get_role_oid("sync_admin", true);
	bool		privileged = superuser_arg(caller) || (OidIsValid(admin) && has_privs_of_role(caller, admin));
	bool		found;
	bool		mine = false;
	bool		dropped = false;
	char	   *id;
	access_row	a = {.also = also,.also_arg = arg};
	ScanKeyData key;

	/*
	 * By its primary key, as a read-only statement would see it (the
	 * caller's snapshot): a probe, no statement, at every pull and filing
	 * (issue 37).  id: sync.replicas' first column.
	 */
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(replica));
	if (!(ActiveSnapshotSet()
		  ? ms_probe_rows(GetActiveSnapshot(), "replicas", "replicas_pkey", true, 1, &key, access_probe, &a)
		  : ms_probe_now_keyed("replicas", "replicas_pkey", 1, &key, access_probe, &a)))
		elog(ERROR, "magic_sync: the catalog has no sync.replicas");
	found = a.found;
	if (found)
	{
		mine = !a.role_null && get_role_oid(NameStr(a.role), true) == caller;
		dropped = a.dropped;
	}

	if ((privileged || mine) && found && !dropped)
		return;
	id = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(replica)));

	/*
	 * To a role that may not act for it, a replica not its own and a uuid
	 * never registered get the same answer: which uuids are registered is
	 * not for any role to find out by asking.
	 */
	if (!privileged && !mine)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" may not %s for replica %s", GetUserNameFromId(caller, false), what, id),
				 errdetail("A replica's role acts for its own uuid only."),
				 errhint("Connect as the replica's role, or as a member of sync_admin.")));
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replica %s is not registered", id),
				 errhint("Register it with sync.replica_add('%s').", id)));
	if (dropped)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replica %s was dropped", id),
				 errdetail("A dropped replica is forgotten: nothing is sent to it, nothing it files is taken."),
				 errhint("Register it again with sync.replica_add('%s') to provision it from scratch.", id)));
}

void
ms_require_owner(Oid relid, Oid caller)
{
	char	   *name = get_rel_name(relid);

	if (name != NULL && !pg_class_ownercheck(relid, caller))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)), name);
}

void
ms_require_select(Oid relid, Oid caller)
{
	char	   *name = get_rel_name(relid);

	if (name != NULL && pg_class_aclcheck(relid, caller, ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(get_rel_relkind(relid)), name);
}

/* role_createrole: whether roleid has CREATEROLE */
static bool
role_createrole(Oid roleid)
{
	HeapTuple	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(roleid));
	bool		yes = false;

	if (HeapTupleIsValid(tup))
	{
		yes = ((Form_pg_authid) GETSTRUCT(tup))->rolcreaterole;
		ReleaseSysCache(tup);
	}
	return yes;
}

void
ms_require_grant(const char *role, Oid caller)
{
	Oid			roleid = get_role_oid(role, false);
	bool		may;

	/* GRANT's rule (PostgreSQL 15): a superuser role, by a superuser; any other by CREATEROLE or ADMIN OPTION */
	if (superuser_arg(roleid))
		may = superuser_arg(caller);
	else
		may = role_createrole(caller) || is_admin_of_role(caller, roleid);
	if (!may)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" may not give a replica role \"%s\"", GetUserNameFromId(caller, false), role),
				 errdetail("A replica's role pulls and files for the replica: giving it one is granting it that, which needs the right to grant the role."),
				 errhint("Ask for ADMIN OPTION on role \"%s\", or have a role that holds it register the replica.", role)));
}
