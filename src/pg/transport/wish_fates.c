/*-------------------------------------------------------------------------
 * wish_fates.c
 *	  What an upload says became of the replica's wishes (Up field 15,
 *	  docs/protocol.md 5.4).
 *
 * A replica says a wish's fate in every upload until one carrying it is
 * filed, so the same fate may come again: a fate is taken while the wish
 * is pending.  A wish the server superseded after it was sent may have been
 * applied (or declined) first: what the replica did is the truth, and
 * replaces it.  A fate for a wish of another replica, or unknown, is none
 * of this replica's and changes nothing.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/uuid.h"

#include "spi_check.h"
#include "wish.h"

void
ms_wish_fates(const pg_uuid_t *replica, const Sync__Up *up)
{
	Oid			types[4] = {INT8OID, UUIDOID, TEXTOID, TEXTOID};
	SPIPlanPtr	plan;

	if (up->n_wish_fates == 0)
		return;
	plan = ms_spi_prepare("UPDATE sync.wish_list SET fate = $3, why = NULLIF($4, ''), decided = now()"
						  " WHERE id = $1 AND replica = $2 AND (fate = 'pending'"
						  "  OR (fate = 'superseded' AND number IS NOT NULL AND $3 <> 'superseded'))",
						  4, types);
	for (size_t i = 0; i < up->n_wish_fates; i++)
	{
		const Sync__WishFate *f = up->wish_fates[i];
		Datum		values[4];

		if (f->id > (uint64) PG_INT64_MAX)
			continue;
		values[0] = Int64GetDatum((int64) f->id);
		values[1] = UUIDPGetDatum(replica);
		values[2] = CStringGetTextDatum(f->fate);
		values[3] = CStringGetTextDatum(f->why);
		ms_spi_check(SPI_execute_plan(plan, values, NULL, false, 0), SPI_OK_UPDATE, "could not file a wish's fate");
	}
	SPI_freeplan(plan);
}
