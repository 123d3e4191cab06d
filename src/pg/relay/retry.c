/*-------------------------------------------------------------------------
 * retry.c
 *	  Rows a replica refused go to it again (docs/design.md 4.4: what it keeps and lacks
 *	  -- or holds as an older version, or refused -- is sent).
 *
 * A refused row is held, marked refused: a note newer than its version
 * sends it at once, as to every holder (plan.c).  Without one, it is sent
 * to the replica that refused it, and to no other, once sync.refused_rows
 * says it is due (transport/refused.c: a minute after the refusal, doubling
 * to an hour; at once on a new build).  Never by a note: that would send it
 * to every holder.  It is rebuilt from the current row, as every send; a
 * row no longer there, blocked, parked or being taken is not sent, and
 * looked at again a minute later.  Once sent, it is due no more until the
 * replica refuses it again (or takes it, which ends its count).
 *
 * A pass with no note runs only for the replicas it has work for: those
 * provisioning, and those with a refused row due.
 *
 * One replica's refusals cost that replica: every statement here reads the
 * rows due and looks up each one's held row, table row or mark alone (a
 * subquery kept a subplan by its OFFSET 0, or in the select list), by an
 * index whose every column the lookup names (held_refused included), so
 * the work is linear in what is due whatever the statistics say.  Joined,
 * the planner nested a scan of every refused row of the replica inside
 * every due one when its statistics were older than the refusals: 15,005
 * rows due took 18 s (bench/refused.py).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"

#include "catalog.h"
#include "owner.h"
#include "retry.h"
#include "temp.h"
#include "updated.h"

/*
 * whether a refused row is due: the first entry of refused_rows_due (min()
 * is read from the index whatever the statistics say; EXISTS was a scan of
 * every refused row when they said many were due), in a statement kept
 * across passes
 */
static bool
any_due(ms_pass *p)
{
	ms_run(p, ms_prepare_kept(p, "SELECT coalesce(min(due) <= now(), false)::int::int8 FROM sync.refused_rows",
							  0, NULL), NULL, NULL, 0);
	return ms_int64() != 0;
}

ArrayType *
ms_retry_replicas(ms_pass *p, ArrayType *provisioning)
{
	Oid			types[2] = {UUIDARRAYOID, UUIDARRAYOID};
	Datum		values[2];
	ArrayType  *due;

	if (!ms_catalog_has("refused_rows"))
		return provisioning;

	/*
	 * Most passes: none due.  Probed by an index scan, which marks the
	 * entries of rows sent since (due no more) dead as it passes them: the
	 * bitmap scan below read each one's heap row, every pass, until the
	 * table was vacuumed.
	 */
	if (!any_due(p))
		return provisioning;
	/* by refused_rows_due: the rows due are few, or none */
	ms_exec(p, "SELECT array_agg(DISTINCT r.replica) FROM sync.refused_rows r"
			" JOIN sync.replicas x ON x.id = r.replica"
			" WHERE r.due <= now() AND x.live AND NOT x.dropped AND NOT x.provision",
			0, NULL, NULL, NULL, 0);
	due = ms_array();
	if (due == NULL || provisioning == NULL)
		return due != NULL ? due : provisioning;
	values[0] = PointerGetDatum(provisioning);
	values[1] = PointerGetDatum(due);
	ms_exec(p, "SELECT array_agg(DISTINCT u) FROM unnest($1 || $2) u", 2, types, values, NULL, 0);
	return ms_array();
}

/* drop from ms_retry the rows of table t that are no longer there (read as its owner) */
static void
gone(ms_pass *p, ms_table *t)
{
	StringInfoData sql;
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(t->id)};
	ms_as_owner as;

	initStringInfo(&sql);
	appendStringInfo(&sql, "DELETE FROM pg_temp.ms_retry k WHERE k.tab = $1"
					 " AND NOT EXISTS (SELECT FROM %s t WHERE %s OFFSET 0)",
					 t->qualified, ms_key_match(t, "t", "k.key"));
	ms_owner_begin(&as, MS_OWNER_OF(p, t->relid));
	ms_exec(p, sql.data, 1, types, values, NULL, 0);
	ms_owner_end(&as);
}

/* the rows due of the replicas $1, by refused_rows_due (a subquery's condition on one, r) */
#define DUE "r.replica = ANY ($1) AND r.due <= now()"
/* r's held row, still refused and not being taken, looked up alone (held_pkey, held_row or held_refused) */
#define HELD_REFUSED "SELECT %s FROM sync.held h WHERE h.replica = r.replica AND h.tab = r.tab AND h.key = r.key" \
	" AND h.taken IS NULL AND h.refused IS NOT NULL OFFSET 0"

void
ms_plan_refused(ms_pass *p, ArrayType *replicas)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(replicas)};
	uint64		n;
	int		   *tabs;

	p->resent = 0;
	if (!ms_catalog_has("refused_rows"))
		return;
	/* most passes: none due, one probe of refused_rows_due */
	if (!any_due(p))
		return;
	if (p->resend_held)
	{
		/* sending them failed for good this pass (relay.c): an hour, and the rest goes on */
		ms_exec(p, "UPDATE sync.refused_rows r SET due = now() + interval '1 hour' WHERE " DUE,
				1, types, values, NULL, 0);
		return;
	}
	/* a count whose row is held no more, or held not refused (it changed, and went): over */
	ms_exec(p, psprintf("DELETE FROM sync.refused_rows r WHERE " DUE " AND NOT EXISTS (" HELD_REFUSED ")", ""),
			1, types, values, NULL, 0);
	ms_temp_table(p, "ms_retry");
	/* each due row's marks looked up alone, as its held row: the temporary tables' keys lead with (tab, key) */
	ms_exec(p, psprintf("INSERT INTO pg_temp.ms_retry SELECT r.replica, r.tab, r.key, (" HELD_REFUSED ")"
						"  FROM sync.refused_rows r WHERE " DUE
						"   AND NOT EXISTS (SELECT FROM ms_blocked b WHERE b.tab = r.tab AND b.key = r.key OFFSET 0)"
						"   AND NOT EXISTS (SELECT FROM ms_unplanned u WHERE u.tab = r.tab AND u.key = r.key OFFSET 0)"
						"   AND NOT EXISTS (SELECT FROM ms_take t WHERE t.tab = r.tab AND t.key = r.key"
						"                     AND t.replica = r.replica OFFSET 0)",
						"h.note"),
			1, types, values, NULL, 0);
	if (SPI_processed == 0)
		return;
	/* from here a failure is theirs (relay.c) */
	p->resent = (int64) SPI_processed;
	ms_exec(p, "SELECT DISTINCT tab FROM pg_temp.ms_retry", 0, NULL, NULL, NULL, 0);
	n = SPI_processed;
	tabs = palloc(sizeof(int) * n);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		tabs[i] = DatumGetInt32(ms_value(i, 1, &isnull));
	}
	for (uint64 i = 0; i < n; i++)
	{
		ms_table   *t = ms_catalog_find(p->tables, tabs[i]);

		if (t != NULL)
			gone(p, t);
		else
		{
			Oid			itypes[1] = {INT4OID};
			Datum		ivalues[1] = {Int32GetDatum(tabs[i])};

			/* a table no longer mirrored: its rows go with it */
			ms_exec(p, "DELETE FROM pg_temp.ms_retry WHERE tab = $1", 1, itypes, ivalues, NULL, 0);
		}
	}
	pfree(tabs);
	/* to the replica that refused it alone; a row a note sends already goes once */
	ms_exec(p, "INSERT INTO ms_send (replica, tab, key, note)"
			" SELECT replica, tab, key, note FROM pg_temp.ms_retry ON CONFLICT DO NOTHING",
			0, NULL, NULL, NULL, 0);
	ms_exec(p, "UPDATE sync.refused_rows r SET due = NULL WHERE " DUE
			" AND EXISTS (SELECT FROM pg_temp.ms_retry k WHERE k.tab = r.tab AND k.key = r.key"
			"               AND k.replica = r.replica OFFSET 0)",
			1, types, values, NULL, 0);
	/* what could not go now is looked at again a minute later, not every pass */
	ms_exec(p, "UPDATE sync.refused_rows r SET due = now() + interval '1 minute' WHERE " DUE,
			1, types, values, NULL, 0);
}
