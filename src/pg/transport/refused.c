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
 *            on the replica lets them through), and the relay woken.  At
 *            most once in ten minutes (sync.replicas.build_due): a change
 *            sooner makes them due ten minutes after the last, so a replica
 *            saying a new build in every upload (a bug, or a role that means
 *            it) cannot make every pass send them again.
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
#include "spi_check.h"
#include "wake.h"

void
ms_refused_backoff(ms_filing *f, Datum tables, Datum keys)
{
	Oid			types[4] = {UUIDOID, TEXTARRAYOID, TEXTARRAYOID, INT8OID};
	Datum		values[4] = {UUIDPGetDatum(&f->replica), tables, keys, Int64GetDatum(f->acked)};

	/*
	 * Before ack.c marks the held rows refused: a row not marked yet is a
	 * new refusal (the first, or of a row sent again); one marked is a
	 * refusal said again, which moves nothing but a count missing (a catalog
	 * updated while the row was refused).  A chunk of refusals at a time,
	 * each one's held and refused rows looked up alone (OFFSET 0 keeps them
	 * subplans) by (replica, tab, key), planned for what the tables hold
	 * now: sync.refused_rows grows as the upload is filed, and a statement
	 * per refusal, prepared while it was small, read it whole for every one
	 * (quadratic in the rows an upload refuses).
	 */
	ms_spi_check(ms_spi_run("INSERT INTO sync.refused_rows AS r (replica, tab, key, note, times, refused_at, due)"
									   " SELECT $1, c.tab, c.key, c.note, c.times, now(),"
									   "        now() + least(interval '1 minute' * power(2, least(c.times - 1, 6)), interval '1 hour')"
									   "   FROM (SELECT x.tab, x.key, h.note, h.new, p.note AS was,"
									   "                CASE WHEN p.note IS NULL OR h.note > p.note THEN 1 ELSE p.times + 1 END AS times"
									   "           FROM (SELECT DISTINCT t.id AS tab, a.k AS key"
									   "                   FROM unnest($2::text[], $3::text[]) AS a(n, k)"
									   "                   JOIN sync.tables t ON t.name = a.n) x"
									   "          CROSS JOIN LATERAL (SELECT h.note, h.refused IS NULL AS new FROM sync.held h"
									   "                               WHERE h.replica = $1 AND h.tab = x.tab AND h.key = x.key"
									   "                                 AND h.taken IS NULL AND h.number <= $4 OFFSET 0) h"
									   "           LEFT JOIN LATERAL (SELECT p.note, p.times FROM sync.refused_rows p"
									   "                               WHERE p.replica = $1 AND p.tab = x.tab AND p.key = x.key"
									   "                              OFFSET 0) p ON true) c"
									   "  WHERE c.new OR c.was IS NULL"
									   " ON CONFLICT (replica, tab, key) DO UPDATE SET note = EXCLUDED.note, times = EXCLUDED.times,"
									   "   refused_at = EXCLUDED.refused_at, due = EXCLUDED.due",
									   4, types, values, NULL, false, 0), SPI_OK_INSERT, "could not record when refused rows go again");
}

void
ms_refused_settle(ms_filing *f)
{
	Oid			types[2] = {UUIDOID, INT8OID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), Int64GetDatum(f->acked)};

	/*
	 * Only when the upload acknowledges another message: a count ends when
	 * its row went again and was acknowledged, or was taken back or let go
	 * of -- each in a message it acknowledges.  An upload that acknowledges
	 * nothing new ends none, and walking every row the replica refused
	 * (each one's held row looked up) cost each of its uploads what it
	 * refused: 60,000 rows, about 305,000 pages and a second of CPU an
	 * upload (bench/refused.py, pg_stat_statements), an empty one too.
	 */
	if (f->acked == f->acked_before)
		return;

	/*
	 * by the primary key's prefix: nothing to do for a replica that refused
	 * none; each row's held row looked up alone (OFFSET 0 keeps it a
	 * subplan, never a join the planner may misjudge: relay/retry.c)
	 */
	ms_spi_check(ms_spi_run("DELETE FROM sync.refused_rows r WHERE r.replica = $1"
									   "   AND NOT EXISTS (SELECT FROM sync.held h"
									   "                    WHERE h.replica = r.replica AND h.tab = r.tab AND h.key = r.key"
									   "                      AND h.taken IS NULL AND (h.refused IS NOT NULL OR h.number > $2)"
									   "                    OFFSET 0)",
									   2, types, values, NULL, false, 0), SPI_OK_DELETE, "could not end the counts of rows taken");
}

void
ms_refused_build(ms_filing *f, Sync__Up *up)
{
	Oid			types[3] = {UUIDOID, TEXTOID, INT4OID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica),
		CStringGetTextDatum(up->build != NULL ? up->build : ""), Int32GetDatum((int32) up->protocol)};
	bool		isnull;

	ms_spi_check(ms_spi_run("WITH o AS (SELECT build FROM sync.replicas WHERE id = $1 FOR UPDATE)"
									   " UPDATE sync.replicas x SET build = $2, protocol = $3 FROM o WHERE x.id = $1"
									   " AND (x.build IS DISTINCT FROM $2 OR x.protocol IS DISTINCT FROM $3)"
									   " RETURNING o.build IS NULL",
									   3, types, values, NULL, false, 0), SPI_OK_UPDATE_RETURNING, "could not record a replica's build");
	if (SPI_processed == 0)
		return;

	/*
	 * The first build a replica says is no change: what it refused, it
	 * refused running it (the refusals of the same upload are filed before
	 * this), and saying it must not spend the ten minutes the next, real,
	 * change may need.
	 */
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		return;

	/*
	 * Another build may take what this one refused: at once, and waiting a
	 * minute again if not; but no sooner than ten minutes after a change
	 * last made them due.  Rows due before then keep their time.
	 */
	ms_spi_check(ms_spi_run("WITH b AS (SELECT greatest(now(), x.build_due + interval '10 minutes') AS at"
									   "             FROM sync.replicas x WHERE x.id = $1),"
									   " d AS (UPDATE sync.refused_rows r SET due = b.at, times = 0 FROM b"
									   "        WHERE r.replica = $1 AND r.due > b.at RETURNING 1)"
									   " UPDATE sync.replicas x SET build_due = b.at FROM b"
									   "  WHERE x.id = $1 AND EXISTS (SELECT FROM d)"
									   " RETURNING (SELECT count(*) FROM d), b.at <= now()",
									   1, types, values, NULL, false, 0), SPI_OK_UPDATE_RETURNING, "could not make refused rows due");
	if (SPI_processed > 0 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)))
	{
		int64		due = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

		ereport(LOG,
				(errmsg("magic_sync: replica %s runs %s (protocol %u) now: the %llu rows it refused are sent to it again",
						f->replica_text, up->build != NULL && up->build[0] ? up->build : "a build that does not say",
						up->protocol, (unsigned long long) due)));
		ms_wake_at_commit();
	}
}
