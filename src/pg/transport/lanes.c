/*-------------------------------------------------------------------------
 * lanes.c
 *	  The lane of an upload (docs/protocol.md 7.2, src/shared/lane.h).
 *
 * A replica splits its uploads into lanes, one per lane its tables are
 * declared in (sync.tables.lane): each numbers its sends on its own, and
 * the server records the last it filed per replica and lane (sync.sends),
 * so a busy lane's numbers never make another's sends duplicates.  An Up
 * with no lane is of the first lane (''), as every upload was before lanes.
 *
 * What the engine says of the replica as a whole -- its gap and backlog --
 * is the first lane's to say: an upload of another lane carries only its
 * tables' rows (and the message it applied, which dates them: rows written
 * in a schema older than the replica was sent are sent again, relay/
 * evolve.c).  A lane is admitted when a table is declared in it, or when
 * the replica has had a send of it filed before (a table moved out of it
 * since, with sends still on their way): so that an upload cannot make
 * the server keep numbers for lanes no one declared.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "decl.h"
#include "file.h"
#include "lane.h"
#include "spi_check.h"

void
ms_lane_admit(ms_filing *f, Sync__Up *up)
{
	Oid			types[2] = {UUIDOID, TEXTOID};
	Datum		values[2];
	bool		known;

	f->lane = up->lane != NULL ? up->lane : "";
	if (f->lane[0] == '\0')
		return;
	/* ms_up_check checked the name; an upload is refused before anything of it is read */
	if (!ms_decl_laned())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the upload is of lane \"%s\", and this server's catalog has no lanes", f->lane),
				 errdetail("The extension's library is newer than its catalog: ALTER EXTENSION magic_sync UPDATE has not run."),
				 errhint("Run ALTER EXTENSION magic_sync UPDATE; nothing of the upload was filed, and its rows wait on the replica.")));
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = CStringGetTextDatum(f->lane);
	ms_spi_check_one(ms_spi_run("SELECT EXISTS (SELECT FROM sync.tables WHERE lane OPERATOR(pg_catalog.=) $2)"
										   "    OR EXISTS (SELECT FROM sync.sends WHERE replica OPERATOR(pg_catalog.=) $1"
										   "                 AND lane OPERATOR(pg_catalog.=) $2)",
										   2, types, values, NULL, true, 1), SPI_OK_SELECT, "could not read the lanes of sync.tables");
	known = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &known));
	SPI_freetuptable(SPI_tuptable);
	if (!known)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the upload is of lane \"%s\", which no mirrored table is declared in", f->lane),
				 errdetail("A replica uploads in the lanes its tables' declarations name (sync.mirror's lane), and this replica has had no send of this lane filed."),
				 errhint("Nothing of it was filed; the replica uploads its rows in the first lane once it applied the schema that moved them.")));
}

bool
ms_lane_first(const ms_filing *f)
{
	return f->lane == NULL || f->lane[0] == '\0';
}
