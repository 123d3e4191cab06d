/*-------------------------------------------------------------------------
 * refused.c
 *	  Rows a replica refused, as its uploads say: when each is sent to it
 *	  again (sync.refused_rows; the relay's half is relay/retry.c).
 *
 *   refusal  a row it could not take is not held (ack.c) and is sent to it
 *            again a minute later; each refusal of the same version doubles
 *            the wait, up to an hour.  A refusal it says again (its answer
 *            not applied yet) is the same refusal: counted once.  One of a
 *            newer version (the row changed, and went at once) counts from
 *            one again.  A refusal of a row whose version on its way was
 *            sent after what the upload says it applied is of an older
 *            version (said again before its answer came): not counted, and
 *            the row not marked (ack.c).
 *   taken    a row sent again and acknowledged without a refusal is held:
 *            its count ends; so does that of a row no longer held (let go
 *            of, provisioned again).
 *   build    the build and protocol it says it runs (Up.build): when either
 *            changed, every row it refused is due at once (a fix deployed
 *            on the replica lets them through), and the relay woken.
 *
 * A catalog not updated yet (ALTER EXTENSION magic_sync UPDATE) has no
 * sync.refused_rows: refusals are recorded as before, and rows refused are
 * sent again only once they change.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "file.h"
#include "wake.h"

void
ms_refused_backoff(ms_filing *f, const char *table, const char *key)
{
	Oid			types[4] = {UUIDOID, TEXTOID, TEXTOID, INT8OID};
	Datum		values[4] = {UUIDPGetDatum(&f->replica), CStringGetTextDatum(table), CStringGetTextDatum(key),
	Int64GetDatum(f->acked)};

	/*
	 * Before ack.c marks the held row refused: a row not marked yet is a new
	 * refusal (the first, or of a row sent again); one marked is a refusal
	 * said again, which moves nothing but a count missing (a catalog updated
	 * while the row was refused).
	 */
	if (SPI_execute_with_args("WITH h AS (SELECT h.replica, h.tab, h.key, h.note, h.refused IS NULL AS new"
							  "   FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
							  "  WHERE t.name = $2 AND h.replica = $1 AND h.key = $3 AND h.taken IS NULL"
							  "    AND h.number <= $4),"
							  " c AS (SELECT h.*, CASE WHEN r.replica IS NULL OR h.note > r.note THEN 1"
							  "                   ELSE r.times + 1 END AS times"
							  "   FROM h LEFT JOIN sync.refused_rows r"
							  "     ON r.replica = h.replica AND r.tab = h.tab AND r.key = h.key"
							  "  WHERE h.new OR r.replica IS NULL)"
							  " INSERT INTO sync.refused_rows AS r (replica, tab, key, note, times, refused_at, due)"
							  " SELECT c.replica, c.tab, c.key, c.note, c.times, now(),"
							  "        now() + least(interval '1 minute' * power(2, least(c.times - 1, 6)), interval '1 hour')"
							  "   FROM c"
							  " ON CONFLICT (replica, tab, key) DO UPDATE SET note = EXCLUDED.note, times = EXCLUDED.times,"
							  "   refused_at = EXCLUDED.refused_at, due = EXCLUDED.due",
							  4, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record when a refused row goes again");
}

void
ms_refused_settle(ms_filing *f)
{
	Oid			types[2] = {UUIDOID, INT8OID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), Int64GetDatum(f->acked)};

	/* few rows, by the primary key's prefix: nothing to do for a replica that refused none */
	if (SPI_execute_with_args("DELETE FROM sync.refused_rows r WHERE r.replica = $1"
							  "   AND NOT EXISTS (SELECT FROM sync.held h"
							  "                    WHERE h.replica = r.replica AND h.tab = r.tab AND h.key = r.key"
							  "                      AND h.taken IS NULL AND (h.refused IS NOT NULL OR h.number > $2))",
							  2, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not end the counts of rows taken");
}

void
ms_refused_build(ms_filing *f, Sync__Up *up)
{
	Oid			types[3] = {UUIDOID, TEXTOID, INT4OID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica),
		CStringGetTextDatum(up->build != NULL ? up->build : ""), Int32GetDatum((int32) up->protocol)};

	if (SPI_execute_with_args("UPDATE sync.replicas SET build = $2, protocol = $3 WHERE id = $1"
							  " AND (build IS DISTINCT FROM $2 OR protocol IS DISTINCT FROM $3)",
							  3, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record a replica's build");
	if (SPI_processed == 0)
		return;
	/* another build may take what this one refused: at once, and waiting a minute again if not */
	if (SPI_execute_with_args("UPDATE sync.refused_rows SET due = now(), times = 0"
							  " WHERE replica = $1 AND due IS NOT NULL",
							  1, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not make refused rows due");
	if (SPI_processed > 0)
	{
		ereport(LOG,
				(errmsg("magic_sync: replica %s runs %s (protocol %u) now: the %llu rows it refused are sent to it again",
						f->replica_text, up->build != NULL && up->build[0] ? up->build : "a build that does not say",
						up->protocol, (unsigned long long) SPI_processed)));
		ms_wake_at_commit();
	}
}
