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
 * A write of a replica's that filing refused (transport/refusal.c) marks
 * its held row replace: the next pass sends that replica alone the row as
 * the server has it, replacing its copy whole, or takes it back when the
 * server has no such row (or never sent it: a row it made up, held at
 * number 0 and note 0).  Once sent the mark is gone (record.c).
 *
 * A pass with no note runs only for the replicas it has work for: those
 * provisioning, and those with a refused row due or a held row to replace.
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

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "owner.h"
#include "retry.h"
#include "temp.h"
#include "updated.h"

/* a probe's look for a row whose column (named) is true, or (a timestamp) due by now */
typedef struct first_row
{
	const char *column;
	bool		timestamp;		/* due: at or before the transaction's start, now() */
	bool		found;
} first_row;

static bool
first_true(HeapTuple row, TupleDesc desc, void *arg)
{
	first_row  *f = arg;
	bool		isnull;
	Datum		d = ms_probe_column(row, desc, f->column, &isnull);

	if (!isnull)
		f->found = f->timestamp ? DatumGetTimestampTz(d) <= GetCurrentTransactionStartTimestamp() : DatumGetBool(d);
	return !f->found;
}

/*
 * whether a refused row is due: sync.refused_due, a row per replica with
 * refused rows waiting (never later than the first of them), read in C
 * (ms_probe).  Not refused_rows_due: its entries of rows sent or refused
 * again stay until vacuum, and the earliest was found past them, every
 * pass, for every replica.
 */
static bool
any_due(ms_pass *p)
{
	first_row	f = {"due", true, false};

	return ms_probe(&p->exec, "refused_due", NULL, first_true, &f) && f.found;
}

/*
 * whether a held row is marked replace: the first entry of held_replace,
 * read from that small partial index itself (ms_probe).  Not by SQL:
 * whatever order a query asks, sync.held's primary key serves it too, and a
 * plan made while sync.held was empty (a fresh catalog, or just vacuumed) is
 * a Seq Scan of it, kept across passes after the table grows: a first
 * sync's 10^6 held rows read again by each pass (0.64 s of its 1.9 s,
 * bench/firstsync.py).  A row marked that a delete is taking only costs a
 * plan.  A catalog not updated yet (ALTER EXTENSION magic_sync UPDATE) marks
 * none.
 */
static bool
any_replaced(ms_pass *p)
{
	first_row	f = {"replace", false, false};

	return ms_probe(&p->exec, "held", "held_replace", first_true, &f) && f.found;
}

ArrayType *
ms_retry_replicas(ms_pass *p, ArrayType *provisioning)
{
	Oid			types[2] = {UUIDARRAYOID, UUIDARRAYOID};
	Datum		values[2];
	ArrayType  *due;

	bool		refused = ms_catalog_has("refused_rows") && any_due(p);
	bool		replaced = any_replaced(p);

	if (!refused && !replaced)
		return provisioning;
	/* by refused_rows_due and held_replace: the rows due are few, or none */
	ms_exec(&p->exec, !replaced ?
			"SELECT array_agg(DISTINCT r.replica) FROM sync.refused_due r"
			" JOIN sync.replicas x ON x.id = r.replica"
			" WHERE r.due <= now() AND x.live AND NOT x.dropped AND NOT x.provision" :
			!refused ?
			"SELECT array_agg(DISTINCT h.replica) FROM sync.held h"
			" JOIN sync.replicas x ON x.id = h.replica"
			" WHERE h.replace AND h.taken IS NULL AND x.live AND NOT x.dropped AND NOT x.provision" :
			"SELECT array_agg(DISTINCT d.replica) FROM ("
			" SELECT r.replica FROM sync.refused_due r WHERE r.due <= now()"
			" UNION SELECT h.replica FROM sync.held h WHERE h.replace AND h.taken IS NULL) d"
			" JOIN sync.replicas x ON x.id = d.replica"
			" WHERE x.live AND NOT x.dropped AND NOT x.provision",
			0, NULL, NULL, NULL, 0);
	due = ms_array();
	if (due == NULL || provisioning == NULL)
		return due != NULL ? due : provisioning;
	values[0] = PointerGetDatum(provisioning);
	values[1] = PointerGetDatum(due);
	ms_exec(&p->exec, "SELECT array_agg(DISTINCT u) FROM unnest($1 || $2) u", 2, types, values, NULL, 0);
	return ms_array();
}

/*
 * against_rows: a statement on ms_retry's rows of table t ($1, its id) that
 * reads t (fmt's first %s, its name, and second, its key matched to k.key),
 * run as its owner.
 */
static void
against_rows(ms_pass *p, ms_table *t, const char *fmt)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(t->id)};
	char	   *sql = psprintf(fmt, t->qualified, ms_key_match(t, "t", "k.key"));
	ms_as_owner as;

	ms_owner_begin(&as, MS_OWNER_OF(p, t->relid));
	ms_exec(&p->exec, sql, 1, types, values, NULL, 0);
	ms_owner_end(&as);
}

/* drop from ms_retry the rows of table t that are no longer there (read as its owner) */
static void
gone(ms_pass *p, ms_table *t)
{
	against_rows(p, t, "DELETE FROM pg_temp.ms_retry k WHERE k.tab = $1"
				 " AND NOT EXISTS (SELECT FROM %s t WHERE %s OFFSET 0)");
}

/*
 * retry_each_table: each(p, t) for each table t with rows in pg_temp.ms_retry;
 * a table no longer mirrored has its rows dropped instead: they go with it.
 */
static void
retry_each_table(ms_pass *p, List *tables, void (*each) (ms_pass *, ms_table *))
{
	uint64		n;
	int		   *tabs;

	ms_exec(&p->exec, "SELECT DISTINCT tab FROM pg_temp.ms_retry", 0, NULL, NULL, NULL, 0);
	n = SPI_processed;
	tabs = palloc(sizeof(int) * n);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;

		tabs[i] = DatumGetInt32(ms_value(i, 1, &isnull));
	}
	for (uint64 i = 0; i < n; i++)
	{
		ms_table   *t = ms_catalog_find(tables, tabs[i]);
		Oid			types[1] = {INT4OID};
		Datum		values[1] = {Int32GetDatum(tabs[i])};

		if (t != NULL)
			each(p, t);
		else
			ms_exec(&p->exec, "DELETE FROM pg_temp.ms_retry WHERE tab = $1", 1, types, values, NULL, 0);
	}
	pfree(tabs);
}

/*
 * gone_or_taken: of ms_retry's rows of table t (read as its owner), a row the
 * server has not (or that it never sent, note < 0): its deletion goes instead.
 */
static void
gone_or_taken(ms_pass *p, ms_table *t)
{
	against_rows(p, t, "WITH g AS (DELETE FROM pg_temp.ms_retry k WHERE k.tab = $1"
				 " AND (k.note < 0 OR NOT EXISTS (SELECT FROM %s t WHERE %s))"
				 " RETURNING k.replica, k.tab, k.key)"
				 " INSERT INTO ms_take (replica, tab, key) SELECT * FROM g ON CONFLICT DO NOTHING");
}

/* the rows due of the replicas $1 (those sync.refused_due says), by refused_rows_due (a subquery's condition on one, r) */
#define DUE "r.replica = ANY ($1) AND r.due <= now()"
/* r's held row, still refused and not being taken, looked up alone (held_pkey, held_row or held_refused) */
#define HELD_REFUSED "SELECT %s FROM sync.held h WHERE h.replica = r.replica AND h.tab = r.tab AND h.key = r.key" \
	" AND h.taken IS NULL AND h.refused IS NOT NULL OFFSET 0"

/*
 * sync.refused_due of the replicas $1 made exact again: when their first
 * refused row is due now, if any is (their rows due were just sent, or
 * looked at again later).  Their entries of refused_rows_due alone are read.
 * No filing of theirs writes meanwhile: sync.file waits for the pass
 * (relay.c holds sync.replicas).
 */
static void
due_again(ms_pass *p, Datum *values)
{
	Oid			types[1] = {UUIDARRAYOID};

	ms_exec(&p->exec, "WITH m AS (SELECT d.replica, (SELECT min(r.due) FROM sync.refused_rows r"
			"                                 WHERE r.replica = d.replica AND r.due IS NOT NULL) AS due"
			"             FROM sync.refused_due d WHERE d.replica = ANY ($1)),"
			" u AS (UPDATE sync.refused_due d SET due = m.due FROM m"
			"        WHERE d.replica = m.replica AND m.due IS NOT NULL AND d.due IS DISTINCT FROM m.due)"
			" DELETE FROM sync.refused_due d USING m WHERE d.replica = m.replica AND m.due IS NULL",
			1, types, values, NULL, 0);
}

/* the work of ms_plan_refused for the replicas $1 that have refused rows due */
static void
plan_due(ms_pass *p, ms_pass_fault *fault, List *tables, Datum *values)
{
	Oid			types[1] = {UUIDARRAYOID};

	if (fault->resend_held)
	{
		/* sending them failed for good this pass (relay.c): an hour, and the rest goes on */
		ms_exec(&p->exec, "UPDATE sync.refused_rows r SET due = now() + interval '1 hour' WHERE " DUE,
				1, types, values, NULL, 0);
		return;
	}
	/* a count whose row is held no more, or held not refused (it changed, and went): over */
	ms_exec(&p->exec, psprintf("DELETE FROM sync.refused_rows r WHERE " DUE " AND NOT EXISTS (" HELD_REFUSED ")", ""),
			1, types, values, NULL, 0);
	ms_temp_table(&p->exec, "ms_retry");
	/* each due row's marks looked up alone, as its held row: the temporary tables' keys lead with (tab, key) */
	ms_exec(&p->exec, psprintf("INSERT INTO pg_temp.ms_retry SELECT r.replica, r.tab, r.key, (" HELD_REFUSED ")"
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
	fault->resent = (int64) SPI_processed;
	retry_each_table(p, tables, gone);
	/* to the replica that refused it alone; a row a note sends already goes once */
	ms_exec(&p->exec, "INSERT INTO ms_send (replica, tab, key, note)"
			" SELECT replica, tab, key, note FROM pg_temp.ms_retry ON CONFLICT DO NOTHING",
			0, NULL, NULL, NULL, 0);
	ms_exec(&p->exec, "UPDATE sync.refused_rows r SET due = NULL WHERE " DUE
			" AND EXISTS (SELECT FROM pg_temp.ms_retry k WHERE k.tab = r.tab AND k.key = r.key"
			"               AND k.replica = r.replica OFFSET 0)",
			1, types, values, NULL, 0);
	/* what could not go now is looked at again a minute later, not every pass */
	ms_exec(&p->exec, "UPDATE sync.refused_rows r SET due = now() + interval '1 minute' WHERE " DUE,
			1, types, values, NULL, 0);
}

bool
ms_plan_refused(ms_pass *p, ArrayType *replicas, ms_pass_fault *fault, List *tables)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(replicas)};
	ArrayType  *due;

	fault->resent = 0;
	if (!ms_catalog_has("refused_rows"))
		return false;
	/* most passes: none due, one read of sync.refused_due */
	if (!any_due(p))
		return false;
	/* the replicas it says are due: only their entries of refused_rows_due are read */
	ms_exec(&p->exec, "SELECT array_agg(d.replica) FROM sync.refused_due d WHERE d.due <= now() AND d.replica = ANY ($1)",
			1, types, values, NULL, 0);
	due = ms_array();
	if (due == NULL)
		return false;
	values[0] = PointerGetDatum(due);
	plan_due(p, fault, tables, values);
	due_again(p, values);
	return true;
}

bool
ms_plan_replaced(ms_pass *p, ArrayType *replicas, ms_pass_fault *fault, List *tables)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(replicas)};

	/* most passes: none marked, one probe of held_replace */
	if (!any_replaced(p) || fault->resend_held)
		return false;
	/* ms_retry again (ms_plan_refused is done with it): note -1 for a row it made up */
	ms_temp_table(&p->exec, "ms_retry");
	ms_exec(&p->exec, "INSERT INTO pg_temp.ms_retry"
			" SELECT h.replica, h.tab, h.key, CASE WHEN h.number = 0 AND h.note = 0 THEN -1 ELSE h.note END"
			"  FROM sync.held h"
			" WHERE h.replace AND h.taken IS NULL AND h.replica = ANY ($1)"
			"   AND NOT EXISTS (SELECT FROM ms_blocked b WHERE b.tab = h.tab AND b.key = h.key)"
			"   AND NOT EXISTS (SELECT FROM ms_unplanned u WHERE u.tab = h.tab AND u.key = h.key)"
			"   AND NOT EXISTS (SELECT FROM ms_send s WHERE s.replica = h.replica AND s.tab = h.tab AND s.key = h.key)"
			"   AND NOT EXISTS (SELECT FROM ms_take t WHERE t.replica = h.replica AND t.tab = h.tab AND t.key = h.key)",
			1, types, values, NULL, 0);
	if (SPI_processed == 0)
		return false;
	/* from here a failure is theirs, as the refused rows' (relay.c) */
	fault->resent += (int64) SPI_processed;
	retry_each_table(p, tables, gone_or_taken);
	/* the rest: the row as the server has it, to that replica alone (plan.c marks it a replacement) */
	ms_exec(&p->exec, "INSERT INTO ms_send (replica, tab, key, note)"
			" SELECT replica, tab, key, note FROM pg_temp.ms_retry ON CONFLICT DO NOTHING",
			0, NULL, NULL, NULL, 0);
	return true;
}
