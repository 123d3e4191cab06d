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

#include "catalog.h"
#include "fast.h"
#include "owner.h"

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

uint64
ms_fast_find(ms_pass *p)
{
	ListCell   *lc;
	uint64		n = 0;

	ms_temp_table(p, "ms_fast", "tab int, key text COLLATE \"C\", note bigint, PRIMARY KEY (tab, key)");
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);
		Oid			types[1] = {INT4OID};
		Datum		values[1] = {Int32GetDatum(t->id)};
		ms_as_owner as;

		if (!fast_table(p->tables, t))
			continue;
		/* the row itself, read as its table's owner */
		ms_owner_begin(&as, MS_OWNER_OF(p, t->relid));
		ms_exec(p, psprintf("INSERT INTO pg_temp.ms_fast (tab, key, note)"
							" SELECT c.tab, c.key, c.note FROM pg_temp.ms_pending c"
							/* OFFSET 0: a test of each row by its key, never a semi-join over the table */
							" WHERE c.tab = $1 AND EXISTS (SELECT FROM %s x WHERE %s OFFSET 0)"
							"   AND NOT c.moved"
							"   AND NOT EXISTS (SELECT FROM pg_temp.ms_blocked b WHERE b.tab = c.tab AND b.key = c.key)"
							"   AND NOT EXISTS (SELECT FROM pg_temp.ms_released b WHERE b.tab = c.tab AND b.key = c.key)"
							"   AND NOT EXISTS (SELECT FROM pg_temp.ms_unplanned b WHERE b.tab = c.tab AND b.key = c.key)",
							t->qualified, ms_key_match(t, "x", "c.key")),
				1, types, values, NULL, 0);
		ms_owner_end(&as);
		n += SPI_processed;
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
 * replica's held row.
 */
void
ms_fast_send(ms_pass *p)
{
	bool		by_row = 2 * p->replicas_around >= p->replicas_all;

	if (p->fast_rows == 0)
		return;
	if (by_row)
		ms_exec(p,
				"WITH h AS MATERIALIZED (SELECT x.replica, f.tab, f.key FROM pg_temp.ms_fast f"
				"  CROSS JOIN LATERAL (SELECT h.replica FROM sync.held h WHERE h.tab = f.tab AND h.key = f.key"
				"       AND h.taken IS NULL AND h.note >= f.note OFFSET 0) x)"
				" INSERT INTO pg_temp.ms_send (replica, tab, key, note)"
				" SELECT i.id, f.tab, f.key, f.note FROM pg_temp.ms_fast f CROSS JOIN pg_temp.ms_inc_replicas i"
				" WHERE NOT EXISTS (SELECT FROM h WHERE h.replica = i.id AND h.tab = f.tab AND h.key = f.key)"
				" ON CONFLICT DO NOTHING",
				0, NULL, NULL, NULL, 0);
	else
		ms_exec(p,
				"INSERT INTO pg_temp.ms_send (replica, tab, key, note)"
				" SELECT i.id, f.tab, f.key, f.note FROM pg_temp.ms_fast f CROSS JOIN pg_temp.ms_inc_replicas i"
				"  LEFT JOIN LATERAL (SELECT h.note FROM sync.held h WHERE h.replica = i.id AND h.tab = f.tab"
				"       AND h.key = f.key AND h.taken IS NULL OFFSET 0) h ON true"
				" WHERE h.note IS NULL OR f.note > h.note"
				" ON CONFLICT DO NOTHING",
				0, NULL, NULL, NULL, 0);
	/* tests/e2e/fast.py walks both */
	ereport(DEBUG1, (errmsg_internal("magic_sync: %llu rows' held versions looked up by %s",
									 (unsigned long long) p->fast_rows, by_row ? "held_row" : "held_pkey")));
}
