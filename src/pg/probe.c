/*-------------------------------------------------------------------------
 * probe.c
 *	  A look at a small table of the extension's in C.  See probe.h.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "probe.h"

bool
ms_probe_rows(Snapshot snapshot, const char *table, const char *index, bool as_user,
			  int nkeys, ScanKey keys, ms_probe_fn fn, void *arg)
{
	Oid			ns = get_namespace_oid("sync", true);
	Oid			relid = OidIsValid(ns) ? get_relname_relid(table, ns) : InvalidOid;
	Oid			indexid = index != NULL && OidIsValid(ns) ? get_relname_relid(index, ns) : InvalidOid;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;

	/* a catalog not updated yet (ALTER EXTENSION magic_sync UPDATE) has none */
	if (!OidIsValid(relid) || (index != NULL && !OidIsValid(indexid)))
		return false;
	/*
	 * Both locks held to the transaction's end, as a statement's scan holds
	 * them: no ALTER, TRUNCATE, VACUUM FULL, CLUSTER or ALTER EXTENSION
	 * UPDATE commits between two probes of one transaction (a pull, a pass)
	 * to show it another version of the table, or none of its rows; and the
	 * transaction's next probe of it is a hit in this backend's own lock
	 * table, with no invalidations to take in.
	 */
	rel = table_open(relid, AccessShareLock);
	if (OidIsValid(indexid))
		LockRelationOid(indexid, AccessShareLock);
	if (as_user)
	{
		AclResult	acl = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);

		if (acl != ACLCHECK_OK)
			aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(rel));
	}
	scan = systable_beginscan(rel, indexid, OidIsValid(indexid), snapshot, nkeys, keys);
	while (HeapTupleIsValid(tup = systable_getnext(scan)) && fn(tup, RelationGetDescr(rel), arg))
		;
	/* the scan lets go of its own lock on the index: the one above is kept */
	systable_endscan(scan);
	table_close(rel, NoLock);
	return true;
}

Datum
ms_probe_column(HeapTuple row, TupleDesc desc, const char *name, bool *isnull)
{
	int			col = SPI_fnumber(desc, name);

	*isnull = true;
	/* a system column, or none: not a column of the table's own */
	return col > 0 ? heap_getattr(row, col, desc, isnull) : (Datum) 0;
}

bool
ms_probe_now(const char *table, const char *index, ms_probe_fn fn, void *arg)
{
	bool		looked;

	/* as SPI runs a statement that is not read-only */
	PushActiveSnapshot(GetTransactionSnapshot());
	CommandCounterIncrement();
	UpdateActiveSnapshotCommandId();
	looked = ms_probe_rows(GetActiveSnapshot(), table, index, true, 0, NULL, fn, arg);
	PopActiveSnapshot();
	return looked;
}

bool
ms_probe_now_keyed(const char *table, const char *index, int nkeys, ScanKey keys, ms_probe_fn fn, void *arg)
{
	bool		looked;

	/* as ms_probe_now, by keys (a row by its primary key: sync.pull's reads, issue 37) */
	PushActiveSnapshot(GetTransactionSnapshot());
	CommandCounterIncrement();
	UpdateActiveSnapshotCommandId();
	looked = ms_probe_rows(GetActiveSnapshot(), table, index, true, nkeys, keys, fn, arg);
	PopActiveSnapshot();
	return looked;
}
