/*-------------------------------------------------------------------------
 * fast.c
 *	  Rows whose plan is trivial: a row of a table broadcast to every
 *	  replica, changed in place or made, that points at nothing and that
 *	  nothing follows.
 *
 * Planning around what changed (question.c) asks several statements a row
 * and replica about such a row, and can only answer one thing.  Its table is
 * broadcast with no partition and no active view, and is not a record: every
 * replica's rules want every row of it that exists.  It has no foreign keys:
 * no parents to bring along, and it is blocked only when it is quarantined
 * itself.  No table follows it: no follower's place depends on it.  So when
 *
 *   - it exists in the pass's snapshot (read as its table's owner),
 *   - no note of the batch moved it (its key changed, to it or from it),
 *   - and it is not blocked, released from quarantine, or of a parked note,
 *
 * every replica planned around the change keeps it: the plan sends it to
 * each one that does not hold, not being let go, the version of its newest
 * note or a newer one -- the difference question.c computes, for a row in
 * question whose rules send it to every replica -- and takes it back from
 * none.  Such a row is no change to the rows in question (question.c leaves
 * it out of ms_changed), and costs the plan one look at its held rows.  A
 * plan that asks about it for another reason (a child that pointed at it
 * changed) keeps it and sends it the same.
 *
 * tests/e2e/fast.py plans every step of a random walk twice in one snapshot,
 * with magic_sync.full_plan and without, and compares what each recorded.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "batch.h"
#include "catalog.h"
#include "fast.h"
#include "owner.h"
#include "temp.h"

/* whether a row of t can be planned on the fast path at all */
static bool
fast_table(List *tables, const ms_table *t)
{
	ListCell   *lc;

	if (t->rule != MS_RULE_BROADCAST || t->record || OidIsValid(t->active) ||
		t->partition >= 0 || t->nfkeys > 0)
		return false;
	foreach(lc, tables)
	{
		const ms_table *u = lfirst(lc);

		if (u->follows_fkey >= 0 && u->fkeys[u->follows_fkey].parent == t->id)
			return false;
	}
	return true;
}

/*
 * What ms_fast_send's statement returns: ms_send counted as plan.c counts
 * it, when it held nothing before (a pass of fast rows alone: a statement
 * fewer, issue 37)
 */
#define SENT_COUNTS "count(*), coalesce(bool_or(fresh), false), coalesce(bool_or(held IS NOT NULL), false)," \
	" coalesce(bool_or(NOT fresh AND held IS NULL), false) FROM sent"
#define COUNTED " SELECT " SENT_COUNTS

/* true but while the plan says none is (plan.c): unknown is "maybe" */
static bool held_back = true;

void
ms_fast_held_back(bool any)
{
	held_back = any;
}

bool
ms_fast_only(uint64 fast_rows)
{
	return !held_back && ms_batch_rows_all(fast_rows);
}

/*
 * The statement that sends the rows of the fast path (ms_fast_send), read
 * from `fast` (as f): its CTEs, the last `sent`, which inserts into ms_send
 * and returns fresh and held.  $arr: the replicas around (uuid[]), $cnt:
 * how many (by_row alone reads it).
 */
static char *
send_ctes(const char *fast, int arr, int cnt, bool by_row, const char *conflict)
{
	if (by_row)
		/*
		 * The held rows of the replicas around (h), and how many of them
		 * hold each row (c): each replica holding an older version, or
		 * letting go, gets it again; when none holds the row, every replica
		 * gets it fresh.  Only a row some hold and some do not (a replica
		 * that was not live, say) looks up the others' one by one.  Every
		 * join here is on a whole key: a join by the row with the replica
		 * left to a filter compares every replica with every other.
		 */
		return psprintf(
				"h AS MATERIALIZED (SELECT x.replica, f.tab, f.key, f.note, x.kept, x.held, x.replace FROM %s f"
				"  CROSS JOIN LATERAL (SELECT h.replica, h.taken IS NULL AND h.note >= f.note AS kept, h.ctid AS held,"
				"       h.replace"
				"       FROM sync.held h WHERE h.tab = f.tab AND h.key = f.key OFFSET 0) x"
				"  JOIN unnest($%d::uuid[]) i(id) ON i.id = x.replica),"
				" c AS MATERIALIZED (SELECT tab, key, count(*) AS holders FROM h GROUP BY tab, key),"
				" sent AS (INSERT INTO pg_temp.ms_send (replica, tab, key, note, fresh, held, replace)"
				" SELECT h.replica, h.tab, h.key, h.note, false, h.held, h.replace FROM h WHERE NOT h.kept"
				" UNION ALL"
				" SELECT i.id, f.tab, f.key, f.note, true, NULL, false FROM %s f CROSS JOIN unnest($%d::uuid[]) i(id)"
				"  WHERE NOT EXISTS (SELECT FROM c WHERE c.tab = f.tab AND c.key = f.key)"
				" UNION ALL"
				" SELECT i.id, f.tab, f.key, f.note, true, NULL, false FROM %s f"
				"  JOIN c ON c.tab = f.tab AND c.key = f.key AND c.holders < $%d"
				"  CROSS JOIN unnest($%d::uuid[]) i(id)"
				"  LEFT JOIN LATERAL (SELECT true AS held FROM sync.held x WHERE x.replica = i.id"
				"       AND x.tab = f.tab AND x.key = f.key OFFSET 0) x ON true"
				"  WHERE x.held IS NULL%s RETURNING fresh, held)",
				fast, arr, fast, arr, fast, cnt, arr, conflict);
	return psprintf(
			"sent AS (INSERT INTO pg_temp.ms_send (replica, tab, key, note, fresh, held, replace)"
			" SELECT i.id, f.tab, f.key, f.note, h.note IS NULL, h.ctid, coalesce(h.replace, false)"
			"  FROM %s f CROSS JOIN unnest($%d::uuid[]) i(id)"
			"  LEFT JOIN LATERAL (SELECT h.note, h.taken, h.ctid, h.replace FROM sync.held h WHERE h.replica = i.id"
			"       AND h.tab = f.tab AND h.key = f.key OFFSET 0) h ON true"
			" WHERE h.note IS NULL OR h.taken IS NOT NULL OR f.note > h.note%s RETURNING fresh, held)",
			fast, arr, conflict);
}

/*
 * One replica around: one descent of held_pkey a row, as held_row's would
 * be, without the hash by replica and the holders counted per row that the
 * lookup by row needs for many
 */
static bool
send_by_row(ArrayType *around, int64 replicas_all)
{
	int64		replicas_around = ArrayGetNItems(ARR_NDIM(around), ARR_DIMS(around));

	return replicas_around > 1 && 2 * replicas_around >= replicas_all;
}

/* what ms_send was counted to hold, from the statement's columns from col on */
static void
read_counts(ms_sent_counts *counted, int col)
{
	bool		isnull;

	counted->valid = true;
	counted->rows = DatumGetInt64(ms_value(0, col, &isnull));
	counted->fresh = DatumGetBool(ms_value(0, col + 1, &isnull));
	counted->addressed = DatumGetBool(ms_value(0, col + 2, &isnull));
	counted->unaddressed = DatumGetBool(ms_value(0, col + 3, &isnull));
}

/* tests/e2e/fast.py walks both lookups, and counts the fresh */
static void
send_debug(ms_reader *p, uint64 fast_rows, bool by_row, ArrayType *around)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(around)};

	ereport(DEBUG1, (errmsg_internal("magic_sync: %llu rows' held versions looked up by %s",
									 (unsigned long long) fast_rows, by_row ? "held_row" : "held_pkey")));
	if (!message_level_is_interesting(DEBUG1))
		return;
	ms_exec(p->exec, "SELECT count(*) FROM pg_temp.ms_send WHERE fresh", 0, NULL, NULL, NULL, 0);
	ereport(DEBUG1, (errmsg_internal("magic_sync: %lld rows sent to replicas holding no version of them",
									 (long long) DatumGetInt64(ms_value(0, 1, &(bool) {false})))));
	ms_exec(p->exec, "SELECT count(*) FROM pg_temp.ms_fast f"
			" WHERE EXISTS (SELECT FROM pg_temp.ms_send s WHERE s.tab = f.tab AND s.key = f.key AND s.fresh)"
			"   AND EXISTS (SELECT FROM sync.held h JOIN unnest($1::uuid[]) i(id) ON i.id = h.replica"
			"                WHERE h.tab = f.tab AND h.key = f.key)",
			1, types, values, NULL, 0);
	ereport(DEBUG1, (errmsg_internal("magic_sync: %lld fast rows held by some of the replicas around, not all",
									 (long long) DatumGetInt64(ms_value(0, 1, &(bool) {false})))));
}

/*
 * The fast rows of t (as its owner) into ms_fast, and, when ahead is given
 * and they are every row of the batch (`rows`, known), sent in the same
 * statement, as ms_fast_send would send them: a statement fewer for a pass
 * of fast rows alone (issue 37).  Returns how many; *sent: they were sent.
 */
static uint64
find_table(ms_reader *p, ms_table *t, const ms_fast_ahead *ahead, int64 rows, bool *sent)
{
	char	   *find;
	ms_as_owner as;
	uint64		n;

	/* the row itself, read as its table's owner */
	find = psprintf("INSERT INTO pg_temp.ms_fast (tab, key, note)"
					/* the key's parts computed once a row (OFFSET 0), not once a row of a small table read whole */
					" SELECT c.tab, c.key, c.note FROM (SELECT c.tab, c.key, c.note%s FROM pg_temp.ms_pending c"
					"   WHERE c.tab = $1 AND NOT c.moved%s"
					"   OFFSET 0) c"
					/* OFFSET 0: a test of each row by its key, never a semi-join over the table */
					" WHERE EXISTS (SELECT FROM %s x WHERE %s OFFSET 0)",
					ms_key_parts_out(t, "c.key"),
					held_back ?
					"   AND NOT EXISTS (SELECT FROM pg_temp.ms_blocked b WHERE b.tab = c.tab AND b.key = c.key)"
					"   AND NOT EXISTS (SELECT FROM pg_temp.ms_released b WHERE b.tab = c.tab AND b.key = c.key)"
					"   AND NOT EXISTS (SELECT FROM pg_temp.ms_unplanned b WHERE b.tab = c.tab AND b.key = c.key)"
					: "",
					t->qualified, ms_key_match_parts(t, "x", "c"));
	*sent = false;
	ms_owner_begin(&as, MS_EXEC_OWNER_OF(p->exec, t->relid));
	if (ahead == NULL || held_back || rows <= 0)
	{
		ms_exec(p->exec, find, 1, (Oid[]) {INT4OID}, (Datum[]) {Int32GetDatum(t->id)}, NULL, 0);
		n = SPI_processed;
	}
	else
	{
		bool		by_row = send_by_row(ahead->around, ahead->replicas_all);
		Oid			types[4] = {INT4OID, UUIDARRAYOID, INT8OID, INT8OID};
		Datum		values[4] = {Int32GetDatum(t->id), PointerGetDatum(ahead->around),
			Int64GetDatum(ArrayGetNItems(ARR_NDIM(ahead->around), ARR_DIMS(ahead->around))), Int64GetDatum(rows)};
		bool		isnull;

		/*
		 * fs: the rows found, but none unless they are the batch's every
		 * row ($4): then the plan is theirs alone (ms_fast_only), and the
		 * caller, having checked that nothing else is in question, asks no
		 * more.  Else ms_fast_send sends them after the rest is planned.
		 */
		ms_exec_generic(p->exec, psprintf(
				"WITH f AS (%s RETURNING tab, key, note),"
				" fs AS (SELECT tab, key, note FROM f WHERE (SELECT count(*) FROM f) = $4), %s"
				" SELECT (SELECT count(*) FROM f), (SELECT count(*) FROM f) = $4, " SENT_COUNTS,
				find, send_ctes("fs", 2, 3, by_row, ahead->planned ? " ON CONFLICT DO NOTHING" : "")),
				4, types, values, NULL, 0);
		n = (uint64) DatumGetInt64(ms_value(0, 1, &isnull));
		*sent = DatumGetBool(ms_value(0, 2, &isnull));
		if (*sent && ahead->counted != NULL && !ahead->planned)
			read_counts(ahead->counted, 3);
	}
	ms_owner_end(&as);
	if (*sent)
	{
		/* tests/e2e/fast.py counts the passes so */
		ereport(DEBUG1, (errmsg_internal("magic_sync: %llu fast rows sent as they were found", (unsigned long long) n)));
		send_debug(p, n, send_by_row(ahead->around, ahead->replicas_all), ahead->around);
	}
	return n;
}

uint64
ms_fast_find(ms_reader *p, const ms_fast_ahead *ahead, bool *sent)
{
	ListCell   *lc;
	uint64		n = 0;
	/* the batch's rows, known, when none is a group member's */
	int64		rows = ahead != NULL ? ms_batch_rows_known() : -1;

	*sent = false;
	ms_temp_table(p->exec, "ms_fast");
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);
		bool		sent_here;

		if (!fast_table(p->tables, t))
			continue;
		/* once sent, every row of the batch was found */
		n += find_table(p, t, *sent ? NULL : ahead, rows, &sent_here);
		*sent = *sent || sent_here;
	}
	/* tests/e2e/fast.py counts them */
	if (n > 0)
		ereport(DEBUG1, (errmsg_internal("magic_sync: %llu rows planned on the fast path", (unsigned long long) n)));
	return n;
}

/*
 * Each replica that does not hold, not letting go, the version of the row's
 * newest note or a newer one gets it.  Its held versions are looked up by
 * the row's key, never the held set whole: when most of the replicas are
 * planned around the change, by held_row, one descent that finds every
 * replica's; when few are (the rest are not live, or being provisioned), by
 * held_pkey, one descent for each of those few rather than a read of every
 * replica's held row.  A replica that holds no version of the row at all,
 * not even one it is letting go, is marked fresh: record.c inserts its held
 * row without looking for one to update.  The lookup and the recording see
 * one snapshot (REPEATABLE READ): a held row another session wrote since
 * fails the pass either way, the upsert's update of it as a serialization
 * failure, the insert as a unique violation; the worker's pass makes
 * sync.file and sync.pull wait for it on sync.replicas.  Rows planned before
 * these (question.c's, plan.c's) may be sent already: only then is a
 * conflict looked for in ms_send: the caller says whether any was (a
 * statement fewer a pass than asking it, issue 37).
 */
void
ms_fast_send(ms_reader *p, uint64 fast_rows, ArrayType *around, int64 replicas_all, bool planned,
			 ms_sent_counts *counted)
{
	int64		replicas_around = ArrayGetNItems(ARR_NDIM(around), ARR_DIMS(around));
	bool		by_row = send_by_row(around, replicas_all);

	/*
	 * The replicas as the array they are (i), not question.c's
	 * ms_inc_replicas: a pass of fast rows alone never fills it, a statement
	 * fewer (issue 37).
	 */
	Oid			types[2] = {UUIDARRAYOID, INT8OID};
	Datum		values[2] = {PointerGetDatum(around), Int64GetDatum(replicas_around)};

	if (counted != NULL)
		counted->valid = false;
	if (fast_rows == 0)
		return;
	ms_exec_generic(p->exec, psprintf("WITH %s%s",
									  send_ctes("pg_temp.ms_fast", 1, 2, by_row, planned ? " ON CONFLICT DO NOTHING" : ""),
									  COUNTED),
					by_row ? 2 : 1, types, values, NULL, 0);
	if (counted != NULL && !planned)
		read_counts(counted, 1);
	send_debug(p, fast_rows, by_row, around);
}
