/*-------------------------------------------------------------------------
 * settled.c
 *	  sync.settled(replica, since): how far a replica must apply to hold
 *	  what was committed before `since` (a pg_snapshot), for an agent that
 *	  runs --once.
 *
 * Returns the last message written for the replica once every note
 * committed before `since` is planned (done; parked notes and a later
 * build's are set aside, and wait on a fix, not on the relay) and no
 * snapshot is due for it; NULL while the relay has not got there.  When no
 * relay runs (nobody holds the relay lock: no worker, passes by hand), it
 * returns 0: nothing will come before a relay runs -- not even the snapshot
 * of a replica provisioned again, so its last message written may never be
 * reached -- and an agent is not kept waiting for one.  Every
 * message that carries those notes is numbered at or below it: the pass
 * that marked them done wrote them, in the same transaction.  The replica's
 * own role may ask, for its own uuid (access.c).  Read-only: it runs on a
 * hot standby too, where it says what the standby has replayed.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/uuid.h"

#include "access.h"
#include "relay.h"
#include "spi_check.h"

PG_FUNCTION_INFO_V1(ms_settled);

/* ms_settled: sync.settled(replica uuid, since pg_snapshot) returns bigint */
Datum
ms_settled(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *replica = PG_GETARG_UUID_P(0);
	Oid			types[2] = {UUIDOID, PG_SNAPSHOTOID};
	Datum		values[2] = {UUIDPGetDatum(replica), PG_GETARG_DATUM(1)};
	bool		isnull = true;
	bool		planned = false;
	bool		relay = false;
	Datum		last = (Datum) 0;
	char	   *sql;

	SPI_connect();
	ms_replica_access(replica, "ask how far to apply");
	/* the pending notes are few, by notes_pending; the replica's row by its key */
	sql = psprintf("SELECT " MS_HEAD("r") ","
				   " NOT r.provision AND r.seen_live AND r.seen_partition IS NOT DISTINCT FROM r.partition"
				   "   AND NOT EXISTS (SELECT FROM sync.notes n WHERE NOT n.done AND n.parked IS NULL"
				   "                     AND n.build <= 1 AND pg_catalog.pg_visible_in_snapshot(n.xid, $2)),"
				   " EXISTS (SELECT FROM pg_catalog.pg_locks l WHERE l.locktype = 'advisory' AND l.granted"
				   "           AND l.database = %u AND l.classid = %u AND l.objid = %u AND l.objsubid = 2)"
				   " FROM sync.replicas r WHERE r.id = $1",
				   MyDatabaseId, (uint32) MS_RELAY_LOCK_KEY1, (uint32) MS_RELAY_LOCK_KEY2);
	ms_spi_check(SPI_execute_with_args(sql, 2, types, values, NULL, true, 1), SPI_OK_SELECT, "could not read sync.replicas");
	if (SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		null2;

		last = SPI_getbinval(tup, desc, 1, &isnull);
		planned = DatumGetBool(SPI_getbinval(tup, desc, 2, &null2));
		relay = DatumGetBool(SPI_getbinval(tup, desc, 3, &null2));
	}
	SPI_finish();
	if (isnull || (relay && !planned))
		PG_RETURN_NULL();
	/* no relay: nothing is on its way, and nothing to wait for */
	if (!relay)
		PG_RETURN_INT64(0);
	PG_RETURN_DATUM(last);
}
