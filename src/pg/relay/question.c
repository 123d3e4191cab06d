/*-------------------------------------------------------------------------
 * question.c
 *	  Planning around what changed (docs/design.md 4.4): for the notes read, how each
 *	  replica's wanted set moved -- never the whole of it.
 *
 *	  1. Rows in question.  Of the rows a replica holds, those a change may
 *	     have taken out of its set: a changed row, the parents it pointed at
 *	     before (the notes' "pointed"), rows that cannot go, the rows of a
 *	     group taken from it; then, closed over what they point at and what
 *	     follows them, the rows of its that leaned on those.  But not a row
 *	     it certainly keeps (below): nothing that leans on it is in question
 *	     because of it; nor a row changed in place that no change can have
 *	     taken from any replica (in_place).  Every row it holds outside them
 *	     stays as recorded (it is "stable").
 *	  2. What it keeps, around them: the rows its rules send it among the
 *	     rows in question and the changed rows; the rows in question that a
 *	     stable row points at; the rows that follow a stable row; the changed
 *	     rows it certainly keeps, and the parents they point at now; then, a
 *	     round at a time, the parents and followers of what the last round
 *	     added, up to the stable rows, which are held already.
 *	  3. The difference: what it keeps and lacks, or holds as a version
 *	     older than a note read, is sent; the rows in question it does not
 *	     keep are taken back.
 *
 * A stable row's support is untouched: every row it leaned on for a place in
 * the set is stable too, or certainly kept, or would be in question.  So the
 * wanted set is the stable rows and what is kept, which tests/e2e/oracle.py
 * checks after every step of a random walk against sync.wanted computed
 * from scratch.
 *
 * A row a replica certainly keeps is one its rules send it now, or one that
 * follows, active and not blocked, a row it certainly keeps: a derivation of
 * its place in the set made of the rows as they are now, rule first, which
 * no other change can take away.  Asking that of a changed row, or of a
 * parent a changed row no longer points at, costs a look up its chain of
 * parents; closing over what leans on it cost every row that follows it,
 * and what follows those: a comment edited put its issue in question, and
 * with it the every other comment, and the project and its
 * every issue (bench/family.py: 2,000 comments, 20 replicas, 3 s of CPU a
 * pass; now 5 ms, as for one comment).  A row held only as the parent of a
 * row held (not sent by a rule, nor following such a row) is never certain:
 * when a change puts it in question, so are its followers.
 *
 * Everything is done set by set, for every replica at once, in temporary
 * tables: the cost follows what changed, not what the replicas hold.  A row
 * whose plan is trivial (a broadcast row changed in place: fast.c) is no
 * change to the rows in question; it is sent to every replica that lacks
 * its version, as this plan would.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "batch.h"
#include "catalog.h"
#include "fast.h"
#include "owner.h"
#include "question.h"
#include "temp.h"
#include "wanted.h"

/*
 * the held row of s (replica, tab, key), not being let go: looked up row by
 * row, by all three (OFFSET 0 keeps it a subplan).  As a join, the planner,
 * which takes (tab, key) for a key of held (it is, but for a broadcast row),
 * looked it up by (tab, key) alone and read the held row of every replica
 * holding a broadcast row to find the one (sql/31_relay_lookup.sql).
 */
#define HELD(s) \
	"EXISTS (SELECT FROM sync.held h WHERE h.replica = " s ".replica AND h.tab = " s ".tab" \
	" AND h.key = " s ".key AND h.taken IS NULL OFFSET 0)"
#define IN_QUESTION(s) \
	"EXISTS (SELECT FROM pg_temp.ms_q q WHERE q.replica = " s ".replica AND q.tab = " s ".tab" \
	" AND q.key = " s ".key)"

#define CERTAIN(s) \
	"EXISTS (SELECT FROM pg_temp.ms_certain k WHERE k.replica = " s ".replica AND k.tab = " s ".tab" \
	" AND k.key = " s ".key)"
#define UNPLANNED(s) \
	"EXISTS (SELECT FROM pg_temp.ms_unplanned u WHERE u.tab = " s ".tab AND u.key = " s ".key)"

/*
 * add: the rows of a SELECT of (replica, tab, key) of t's, filtered by
 * `where` on them (alias s), into pg_temp.set; those that are new into
 * pg_temp.delta, unless it is NULL.  Returns how many were new.  The
 * SELECT, which may run t's code, runs as t's owner in a relay pass.
 */
static uint64
add(ms_reader *p, const ms_table *t, const char *set, const char *select, const char *where, const char *delta)
{
	ms_as_owner as;

	ms_owner_begin(&as, MS_EXEC_OWNER_OF(p->exec, t->relid));
	if (delta == NULL)
		ms_exec(p->exec, psprintf("INSERT INTO pg_temp.%s (replica, tab, key)"
							" SELECT s.replica, s.tab, s.key FROM (%s) s(replica, tab, key) WHERE %s"
							" ON CONFLICT DO NOTHING",
							set, select, where ? where : "true"),
				0, NULL, NULL, NULL, 0);
	else
		ms_exec(p->exec, psprintf("WITH n AS (INSERT INTO pg_temp.%s (replica, tab, key)"
							" SELECT s.replica, s.tab, s.key FROM (%s) s(replica, tab, key) WHERE %s"
							" ON CONFLICT DO NOTHING RETURNING replica, tab, key)"
							" INSERT INTO pg_temp.%s SELECT replica, tab, key FROM n",
							set, select, where ? where : "true", delta),
				0, NULL, NULL, NULL, 0);
	ms_owner_end(&as);
	return SPI_processed;
}

/* what add's callers hand ms_links_round's step: add(p, t, set, select, where, delta) */
typedef struct add_arg
{
	const char *set;
	const char *where;
	const char *delta;
} add_arg;

static uint64
add_step(ms_reader *p, const ms_table *t, const ms_table *to, const ms_fkey *fk, bool follows,
		 const char *select, void *arg)
{
	add_arg    *a = arg;

	(void) to;
	(void) fk;
	(void) follows;
	return add(p, t, a->set, select, a->where, a->delta);
}

/*
 * close_over: rounds from pg_temp.<d0>: the parents and the followers of the
 * rows the last round added, filtered by where, into set; until a round adds
 * nothing.
 */
static void
close_over(ms_reader *p, const char *set, const char *d0, const char *d1, const char *where, uint64 rows)
{
	const char *from = d0;
	const char *into = d1;

	for (;;)
	{
		add_arg		a = {set, where, into};
		uint64		added;

		if (rows == 0)
			return;
		ms_analyze(p->exec, psprintf("pg_temp.%s", from), rows);
		added = ms_links_round(p, from, NULL, true, add_step, &a, NULL);
		ms_temp_empty(p->exec, from);
		if (added == 0)
			return;
		rows = added;
		from = from == d0 ? d1 : d0;
		into = into == d0 ? d1 : d0;
	}
}

/*
 * (child, foreign key name, parent, nby) of every foreign key referencing
 * its parent's key, as VALUES rows (nby: how many of the parts a note spells
 * are the parent's key, when it spells more; else NULL); NULL: none
 */
static char *
fk_values(ms_reader *p)
{
	StringInfoData fks;
	ListCell   *lc;

	initStringInfo(&fks);
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);

		for (int f = 0; f < t->nfkeys; f++)
		{
			if (!t->fkeys[f].keyed)
				continue;
			appendStringInfo(&fks, "%s(%d, ", fks.len ? ", " : "", t->id);
			appendStringInfoString(&fks, quote_literal_cstr(t->fkeys[f].name));
			if (t->fkeys[f].nby < t->fkeys[f].ncols)
				appendStringInfo(&fks, ", %d, %d)", t->fkeys[f].parent, t->fkeys[f].nby);
			else
				appendStringInfo(&fks, ", %d, NULL::int)", t->fkeys[f].parent);
		}
	}
	return fks.len > 0 ? fks.data : NULL;
}

/* what changed: the rows of the notes read, and the parents they pointed at before; how many */
static uint64
changed(ms_reader *p, uint64 fast_rows)
{
	ListCell   *lc;
	uint64		n = 0;

	/*
	 * The rows of the notes, but not a row on the fast path: its change moves
	 * no set (fast.c); rows blocked because of a row that was quarantined and
	 * goes now; a member joining or leaving a group: the grouped row's place
	 * moved.  One statement: each of its own cost a one-row pass an
	 * executor's start for nothing (bench/passcost.py, issue 37); none when
	 * every row of the batch is on the fast path and no other can be.
	 */
	if (!ms_fast_only(fast_rows))
	{
		ms_exec(p->exec, "INSERT INTO ms_changed SELECT tab, key FROM ms_pending c WHERE NOT EXISTS"
				" (SELECT FROM pg_temp.ms_fast f WHERE f.tab = c.tab AND f.key = c.key)"
				" UNION SELECT tab, key FROM ms_released"
				" UNION SELECT n.tab, n.key FROM " MS_BATCH_NOTES " WHERE n.source = 'm' AND n.key IS NOT NULL"
				" ON CONFLICT DO NOTHING",
				0, NULL, NULL, NULL, 0);
		n += SPI_processed;
	}
	/*
	 * The parents each changed row pointed at, by foreign key, before the
	 * change; but not a parent the row, under the same key, still points at:
	 * the replicas that hold the row keep it there (in question through the
	 * row, for those whose set the row leaves), and no other replica's hold
	 * on it moved.  A follower's change is then not a question to every
	 * replica holding its broadcast parent.
	 */
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);

		for (int f = 0; f < t->nfkeys; f++)
		{
			ms_fkey    *fk = &t->fkeys[f];
			char	   *name = quote_literal_cstr(fk->name);
			ms_as_owner as;

			/*
			 * t's rows, read as t's owner.  A parent found by other unique
			 * columns than its key that no longer has the values noted
			 * changed or went: it is a changed row itself.
			 */
			ms_owner_begin(&as, MS_EXEC_OWNER_OF(p->exec, t->relid));
			ms_exec(p->exec, psprintf("INSERT INTO ms_changed_parents"
								" SELECT DISTINCT %d, k.key FROM " MS_BATCH_NOTES
								" CROSS JOIN LATERAL (SELECT %s AS key) k"
								" WHERE n.source = 'r' AND n.tab = %d AND n.pointed ? %s AND k.key IS NOT NULL"
								"  AND NOT (n.old_key IS NULL AND EXISTS (SELECT FROM %s t WHERE %s"
								"   AND %s = n.pointed ->> %s))",
								fk->parent,
								ms_fkey_pointed(fk, ms_catalog_find(p->tables, fk->parent),
												psprintf("(n.pointed ->> %s)", name)),
								t->id, name, t->qualified, ms_key_match(t, "t", "n.key"),
								ms_fkey_noted(t, fk, "t"), name),
					0, NULL, NULL, NULL, 0);
			n += SPI_processed;
			ms_owner_end(&as);
		}
	}
	return n;
}

/*
 * nothing_in_question: whether the rest of the plan around the change can
 * find nothing, so that a pass of rows on the fast path (fast.c) does not
 * start its dozen statements: no row changed but the fast path's, none
 * blocked, no batch to close, no group given or taken (group_rows reads the
 * notes, not ms_changed).  Every row in question, candidate or kept row
 * comes from one of those.
 */
static bool
nothing_in_question(ms_reader *p, uint64 changed_rows, bool blocked, bool more)
{
	ListCell   *lc;

	if (changed_rows > 0 || blocked || more)
		return false;
	foreach(lc, p->tables)
		if (((ms_table *) lfirst(lc))->rule == MS_RULE_GROUPED)
			return false;
	return true;
}

/*
 * in_place: the changed rows whose place in no replica's set can have
 * shrunk, into pg_temp.ms_inplace: a row changed in place (its key, and what
 * each of its foreign keys points at, as every note of the batch found them;
 * it is there, not blocked, released or of a parked note) of a table whose
 * rule reads nothing a change in place can take away -- no rule, follows
 * (the row it follows is the same), broadcast to every partition -- active
 * now.  Every input of the wanted sets this change touched only grew: it
 * takes nothing from any replica, and is no question.  A replica holding it
 * keeps it, unless another change puts it in question (a row it follows,
 * say), and is sent it.  A comment edited, or its issue renamed, are so.
 */
static uint64
in_place(ms_reader *p, bool blocked)
{
	uint64		n = 0;
	uint64		ntabs;
	bool	   *changed_tab;
	int			maxid = 0;
	ListCell   *lc;

	/* the tables with changed rows: most passes have one or two */
	ms_exec(p->exec, "SELECT DISTINCT tab FROM pg_temp.ms_changed", 0, NULL, NULL, NULL, 0);
	ntabs = SPI_processed;
	if (ntabs == 0)
		return 0;
	foreach(lc, p->tables)
		maxid = Max(maxid, ((ms_table *) lfirst(lc))->id);
	changed_tab = palloc0(sizeof(bool) * (maxid + 1));
	for (uint64 i = 0; i < ntabs; i++)
	{
		bool		isnull;
		int			tab = DatumGetInt32(ms_value(i, 1, &isnull));

		if (tab >= 0 && tab <= maxid)
			changed_tab[tab] = true;
	}
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);
		StringInfoData same;
		ms_as_owner as;

		if (!changed_tab[t->id] ||
			!(t->rule == MS_RULE_NONE || t->rule == MS_RULE_FOLLOWS ||
			  (t->rule == MS_RULE_BROADCAST && t->partition < 0)))
			continue;
		initStringInfo(&same);
		for (int f = 0; f < t->nfkeys; f++)
			appendStringInfo(&same, " AND (n.pointed ->> %s) IS NOT DISTINCT FROM %s",
							 quote_literal_cstr(t->fkeys[f].name), ms_fkey_noted(t, &t->fkeys[f], "x"));
		/* t's rows, read as t's owner */
		ms_owner_begin(&as, MS_EXEC_OWNER_OF(p->exec, t->relid));
		ms_exec(p->exec, psprintf("INSERT INTO pg_temp.ms_inplace SELECT c.tab, c.key FROM pg_temp.ms_pending c"
							" JOIN %s x ON %s WHERE c.tab = %d AND NOT c.moved%s"
							" AND EXISTS (SELECT FROM pg_temp.ms_changed h WHERE h.tab = c.tab AND h.key = c.key)"
							" AND NOT EXISTS (SELECT FROM " MS_BATCH_NOTES " WHERE n.tab = c.tab AND n.key = c.key"
							"  AND n.source = 'r' AND NOT (true%s))"
							" AND NOT " UNPLANNED("c") " AND NOT EXISTS (SELECT FROM pg_temp.ms_released r"
							"  WHERE r.tab = c.tab AND r.key = c.key)%s",
							t->qualified, ms_key_match(t, "x", "c.key"), t->id, ms_active_filter(t, "x", "c"),
							same.data, blocked ? " AND " MS_NOT_BLOCKED("c") : ""),
				0, NULL, NULL, NULL, 0);
		n += SPI_processed;
		ms_owner_end(&as);
	}
	pfree(changed_tab);
	return n;
}

/* a group given to a replica or taken from it: the rows of the group, for that replica; how many */
static uint64
group_rows(ms_reader *p, const char *into, bool held)
{
	ListCell   *lc;
	uint64		n = 0;

	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);
		StringInfoData on;
		ms_as_owner as;

		if (t->rule != MS_RULE_GROUPED)
			continue;
		initStringInfo(&on);
		appendStringInfoString(&on, ms_member_match(t, "m", "x"));
		ms_owner_begin(&as, MS_EXEC_OWNER_OF(p->exec, t->relid));
		ms_exec(p->exec, psprintf("INSERT INTO pg_temp.%s (replica, tab, key)"
							" SELECT DISTINCT n.replica, %d, %s FROM " MS_BATCH_NOTES
							" JOIN %s m ON (m.%s)::pg_catalog.text OPERATOR(pg_catalog.=) n.grp JOIN %s x ON %s"
							" JOIN pg_temp.ms_inc_replicas i ON i.id = n.replica"
							" WHERE n.source = 'a' AND n.tab = %d%s ON CONFLICT DO NOTHING",
							into, t->id, ms_key_expr(t, "x"), t->members_qualified, t->group_column,
							t->qualified, on.data, t->id,
							held ? psprintf(" AND EXISTS (SELECT FROM sync.held h WHERE h.replica = n.replica"
											" AND h.tab = %d AND h.key = %s AND h.taken IS NULL OFFSET 0)",
											t->id, ms_key_expr(t, "x")) : ""),
				0, NULL, NULL, NULL, 0);
		n += SPI_processed;
		ms_owner_end(&as);
	}
	return n;
}

/* followed: the table t's rows follow a row of (by its foreign key *fk), or NULL */
static ms_table *
followed(ms_reader *p, ms_table *t, ms_fkey **fk)
{
	if (t->follows_fkey < 0)
		return NULL;
	*fk = &t->fkeys[t->follows_fkey];
	return ms_catalog_find(p->tables, (*fk)->parent);
}

/*
 * certain: of the rows of pg_temp.ms_chain (replica, tab, key), those the
 * replica certainly keeps, into pg_temp.ms_certain, where the rows found so
 * far this plan are: a row its rules send it now, or one that follows,
 * active and not blocked, a row it certainly keeps.  Neither blocked nor of
 * a parked note, whose rules are not evaluated (they failed: park.c), nor
 * the parents of such a row looked for.  The chain of parents is walked up
 * first, deepest tables first, then down from the rows the rules send,
 * parents first (a row follows a row of a table before its own).
 */
static void
certain(ms_reader *p, uint64 rows, bool blocked)
{
	char	   *ok = blocked ? "NOT " UNPLANNED("c") " AND " MS_NOT_BLOCKED("c") : "NOT " UNPLANNED("c");
	ListCell   *lc;

	ms_analyze(p->exec, "pg_temp.ms_chain", rows);
	/* up: each row's parent, the row it follows, for the rows not known to be kept */
	for (int i = list_length(p->tables) - 1; i >= 0; i--)
	{
		ms_table   *t = list_nth(p->tables, i);
		ms_fkey    *fk;
		ms_table   *parent = followed(p, t, &fk);

		if (parent != NULL)
			add(p, t, "ms_chain",
				psprintf("SELECT c.replica, %d, %s FROM pg_temp.ms_chain c JOIN %s x ON %s"
						 " WHERE c.tab = %d AND NOT " CERTAIN("c"),
						 parent->id, ms_fkey_key(t, fk, parent, "x"), t->qualified, ms_key_match(t, "x", "c.key"),
						 t->id),
				"s.key IS NOT NULL AND NOT " UNPLANNED("s"), NULL);
	}
	/* the rows the rules send */
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);
		char	   *rules = ms_rule_select(t, "ms_inc_replicas", "ms_chain");

		if (rules != NULL)
			add(p, t, "ms_certain", rules, psprintf("NOT " UNPLANNED("s") "%s", blocked ? " AND " MS_NOT_BLOCKED("s") : ""),
				NULL);
	}
	/* down: the rows following a row kept, parents first */
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);
		ms_fkey    *fk;
		ms_table   *parent = followed(p, t, &fk);

		if (parent != NULL)
			add(p, t, "ms_certain",
				psprintf("SELECT c.replica, c.tab, c.key FROM pg_temp.ms_chain c JOIN %s x ON %s"
						 " WHERE c.tab = %d AND %s%s AND EXISTS (SELECT FROM pg_temp.ms_certain k"
						 "  WHERE k.replica = c.replica AND k.tab = %d AND k.key = %s)",
						 t->qualified, ms_key_match(t, "x", "c.key"), t->id, ok, ms_active_filter(t, "x", "c"),
						 parent->id, ms_fkey_key(t, fk, parent, "x")),
				NULL, NULL);
	}
}

/*
 * question: the candidates of pg_temp.ms_qc that the replica does not
 * certainly keep are in question: into ms_q, and those new there into
 * pg_temp.<delta>.  Returns how many.
 */
static uint64
question(ms_reader *p, uint64 rows, const char *delta, bool blocked)
{
	uint64		n;

	if (rows == 0)
		return 0;
	ms_temp_empty(p->exec, "ms_chain");
	/* a row of a parked note: its rules are not even evaluated (park.c), it is in question */
	ms_exec(p->exec, "INSERT INTO pg_temp.ms_chain SELECT * FROM pg_temp.ms_qc c WHERE NOT " UNPLANNED("c"),
			0, NULL, NULL, NULL, 0);
	certain(p, rows, blocked);
	ms_exec(p->exec, psprintf("WITH n AS (INSERT INTO pg_temp.ms_q SELECT c.replica, c.tab, c.key FROM pg_temp.ms_qc c"
						" WHERE NOT " CERTAIN("c") " ON CONFLICT DO NOTHING RETURNING replica, tab, key)"
						" INSERT INTO pg_temp.%s SELECT replica, tab, key FROM n", delta),
			0, NULL, NULL, NULL, 0);
	n = SPI_processed;
	ms_temp_empty(p->exec, "ms_qc");
	return n;
}

/* 1. rows in question */
static void
in_question(ms_reader *p, bool blocked)
{
	const char *from = "ms_qd0";
	const char *into = "ms_qd1";
	uint64		rows;

	/* each row looked up by its key (held_row): the plan never reads the held set whole */
	ms_exec(p->exec,
			"INSERT INTO ms_qc SELECT h.replica, h.tab, h.key"
			"  FROM (SELECT tab, key FROM ms_changed c WHERE NOT EXISTS (SELECT FROM ms_inplace i"
			"         WHERE i.tab = c.tab AND i.key = c.key)"
			"        UNION SELECT tab, key FROM ms_changed_parents"
			"        UNION SELECT tab, key FROM ms_blocked) c"
			"  CROSS JOIN LATERAL (SELECT h.replica, h.tab, h.key FROM sync.held h"
			"   WHERE h.tab = c.tab AND h.key = c.key AND h.taken IS NULL OFFSET 0) h"
			"  JOIN ms_inc_replicas i ON i.id = h.replica"
			" ON CONFLICT DO NOTHING",
			0, NULL, NULL, NULL, 0);
	rows = SPI_processed;
	rows += group_rows(p, "ms_qc", true);
	rows = question(p, rows, from, blocked);

	/*
	 * Closed over what they point at and what follows them, among the rows
	 * held, up to the rows each replica certainly keeps: nothing leaning on
	 * one of those is in question because of it.
	 */
	while (rows > 0)
	{
		add_arg		a = {"ms_qc", "NOT " IN_QUESTION("s") " AND NOT " CERTAIN("s") " AND " HELD("s"), NULL};
		uint64		cand;
		const char *swap;

		ms_analyze(p->exec, psprintf("pg_temp.%s", from), rows);
		cand = ms_links_round(p, from, NULL, true, add_step, &a, NULL);
		ms_temp_empty(p->exec, from);
		rows = question(p, cand, into, blocked);
		swap = from;
		from = into;
		into = swap;
	}
}

/*
 * close_batch_by: the pending notes beyond the batch of the rows that
 * touched (a CTE over u (id, tab, key, pointed): the pending notes, by each
 * of their keys, and moved (tab, key): what the plan takes back, and what
 * the batch changed) names, into the batch with all their notes.  Returns
 * how many.
 */
static uint64
close_batch_by(ms_reader *p, const char *touched, int64 floor)
{
	int			nest;
	uint64		added;

	/*
	 * Keys and old keys as rows of their own: every join an equality, hashed
	 * (the notes' statistics lag a backlog, and a nested loop over it is
	 * quadratic).
	 */
	nest = NewGUCNestLevel();
	(void) set_config_option("enable_nestloop", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	ms_exec(p->exec, psprintf(
						"WITH u AS MATERIALIZED ("
						"  SELECT n.id, n.tab, k.key, n.pointed FROM sync.notes n"
						"  CROSS JOIN LATERAL (VALUES (n.key), (n.old_key)) k(key)"
						"   WHERE NOT n.done AND n.build <= 1 AND n.source = 'r' AND n.parked IS NULL"
						"     AND n.id >= $1 AND k.key IS NOT NULL"
						"     AND NOT EXISTS (SELECT FROM ms_notes_read r WHERE r.id = n.id)),"
						/* what the plan takes back, and what the batch changed */
						" moved AS MATERIALIZED ("
						"  SELECT q.tab, q.key FROM ms_q q WHERE NOT EXISTS (SELECT FROM ms_n n"
						"   WHERE n.replica = q.replica AND n.tab = q.tab AND n.key = q.key)"
						"  UNION SELECT tab, key FROM ms_changed UNION SELECT tab, key FROM ms_fast),"
						" touched AS (%s)"
						" INSERT INTO ms_notes_read"
						" SELECT " MS_BATCH_COLUMNS " FROM sync.notes n WHERE n.id IN"
						"  (SELECT u.id FROM touched t JOIN u USING (tab, key)) AND NOT n.done"
						" ON CONFLICT DO NOTHING",
						touched),
			1, (Oid[]) {INT8OID}, (Datum[]) {Int64GetDatum(floor)}, NULL, 0);
	added = SPI_processed;
	AtEOXact_GUC(true, nest);
	return added;
}

/*
 * close_batch: a batch is closed over the rows it moves.  A row whose change
 * waits beyond the batch is held as its version before that change, and what
 * that version points at is not the row as it is now, but what that change
 * recorded it pointed at before (docs/design.md 4.4).  When such a version points at a
 * row the plan takes back, or at a row a note of the batch changed (it may be
 * gone, and is kept only for that version), the row goes with the batch with
 * all its notes: the plan then sends it as it is now, or takes it back, and
 * never leaves an older version leaning on a row it moved.  Returns how many
 * notes it took in; the caller plans again.
 */
static uint64
close_batch(ms_reader *p, int64 floor)
{
	char	   *fks = fk_values(p);
	uint64		added = 0;
	ListCell   *lc;

	/* a note spells the parent's key, and other columns after it when the foreign key has more */
	if (fks != NULL)
		added += close_batch_by(p, psprintf(
											"SELECT DISTINCT u.tab, u.key FROM u CROSS JOIN LATERAL jsonb_each_text(u.pointed) e"
											" JOIN (VALUES %s) f(child, name, parent, nby) ON f.child = u.tab AND f.name = e.key"
											" JOIN moved m ON m.tab = f.parent AND m.key = CASE WHEN f.nby IS NULL THEN e.value"
											"  ELSE sync.key((sync.key_parts(e.value))[1:f.nby]) END",
											fks), floor);

	/*
	 * Through other unique columns, the parent that has the values noted
	 * now, read as its owner; one that has them no more (it changed them,
	 * or went) is a changed row of the batch or of one before, and the row
	 * goes with the batch.
	 */
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);

		for (int f = 0; f < t->nfkeys; f++)
		{
			ms_fkey    *fk = &t->fkeys[f];
			ms_table   *parent = ms_catalog_find(p->tables, fk->parent);
			char	   *name = quote_literal_cstr(fk->name);
			ms_as_owner as;

			if (fk->keyed)
				continue;
			ms_owner_begin(&as, MS_EXEC_OWNER_OF(p->exec, parent->relid));
			added += close_batch_by(p, psprintf(
												"SELECT DISTINCT u.tab, u.key FROM u CROSS JOIN LATERAL (SELECT %s AS key) r"
												" WHERE u.tab = %d AND u.pointed ? %s AND (r.key IS NULL"
												"  OR EXISTS (SELECT FROM moved m WHERE m.tab = %d AND m.key = r.key))",
												ms_fkey_pointed(fk, parent, psprintf("(u.pointed ->> %s)", name)),
												t->id, name, parent->id), floor);
			ms_owner_end(&as);
		}
	}
	return added;
}

/* 2. what each replica keeps, around the rows in question */
static void
kept(ms_reader *p, uint64 inplace, bool blocked)
{
	/*
	 * What is kept is a row not stable already, and one that can go: a row
	 * that cannot go is no reason to keep its parents (plan.c).
	 */
	const char *not_blocked = blocked ? MS_NOT_BLOCKED("s") : NULL;
	const char *not_stable = "NOT (" HELD("s") " AND NOT " IN_QUESTION("s") ")";
	ListCell   *lc;
	uint64		cand = 0;
	uint64		rows;
	uint64		added = 0;

	if (not_blocked != NULL)
		not_stable = psprintf("%s AND %s", not_stable, not_blocked);

	/*
	 * Candidates for the rules: of each replica, the rows in question and a
	 * group given (ms_cand); of every replica, the changed rows (ms_cand_rows),
	 * which each rule joins to the replicas it names -- never the changed
	 * rows times the replicas, which a batch of 10^4 rows and 200 replicas
	 * made 2 * 10^6 candidates (bench/incremental.py --batch).
	 */
	ms_exec(p->exec, "INSERT INTO ms_cand SELECT * FROM ms_q", 0, NULL, NULL, NULL, 0);
	cand += SPI_processed;
	cand += group_rows(p, "ms_cand", false);
	/* a row whose note is parked is quarantined, and its rules are not evaluated: they failed */
	ms_exec(p->exec, "DELETE FROM ms_cand c USING ms_unplanned u WHERE u.tab = c.tab AND u.key = c.key",
			0, NULL, NULL, NULL, 0);
	ms_exec(p->exec, "INSERT INTO ms_cand_rows SELECT c.tab, c.key FROM ms_changed c"
			" WHERE NOT EXISTS (SELECT FROM ms_unplanned u WHERE u.tab = c.tab AND u.key = c.key)",
			0, NULL, NULL, NULL, 0);
	rows = SPI_processed;
	cand += rows;
	ms_analyze(p->exec, "ms_cand, ms_cand_rows", cand);

	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);
		char	   *rules = ms_rule_select(t, "ms_inc_replicas", "ms_cand");

		/*
		 * The rows its rules send it.  Each branch only when it has rows: an
		 * empty one may still be planned as a scan of the table whole, and
		 * run the table's code (its policies, its view) on rows no note
		 * named.
		 */
		if (rules != NULL)
			added += add(p, t, "ms_n",
						 rows == 0 ? rules :
						 psprintf("%s UNION %s", rules, ms_rule_select_rows(t, "ms_inc_replicas", "ms_cand_rows")),
						 not_stable, "ms_nd0");
		/* the rows that follow a stable row (a changed row now pointing at one) */
		if (t->follows_fkey >= 0)
		{
			ms_fkey    *fk = &t->fkeys[t->follows_fkey];
			char	   *parent_key = ms_fkey_key(t, fk, ms_catalog_find(p->tables, fk->parent), "x");
			char	   *match = ms_key_match(t, "x", "c.key");
			char	   *active = ms_active_filter(t, "x", "c");

			/* the parent's held row of c's replica, by all three (HELD) */
			char	   *select = psprintf("SELECT c.replica, c.tab, c.key FROM pg_temp.ms_cand c JOIN %s x ON %s"
						 " CROSS JOIN LATERAL (SELECT h.replica, h.tab, h.key FROM sync.held h"
						 "  WHERE h.replica = c.replica AND h.tab = %d AND h.key = %s"
						 "  AND h.taken IS NULL OFFSET 0) h"
						 " WHERE c.tab = %d%s AND NOT EXISTS (SELECT FROM pg_temp.ms_q q"
						 "  WHERE q.replica = h.replica AND q.tab = h.tab AND q.key = h.key)",
						 t->qualified, match, fk->parent, parent_key, t->id, active);

			/* a changed row: the replicas holding its parent, looked up by the parent's key (held_row) */
			if (rows > 0)
				select = psprintf("%s UNION "
								  "SELECT h.replica, c.tab, c.key FROM pg_temp.ms_cand_rows c JOIN %s x ON %s"
								  " JOIN sync.held h ON h.tab = %d AND h.key = %s AND h.taken IS NULL"
								  " JOIN pg_temp.ms_inc_replicas i ON i.id = h.replica"
								  " WHERE c.tab = %d%s AND NOT EXISTS (SELECT FROM pg_temp.ms_q q"
								  "  WHERE q.replica = h.replica AND q.tab = h.tab AND q.key = h.key)",
								  select, t->qualified, match, fk->parent, parent_key, t->id, active);
			added += add(p, t, "ms_n", select, not_stable, "ms_nd0");
		}
	}
	/* the rows in question a stable row points at, unless kept already */
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);

		for (int f = 0; f < t->nfkeys; f++)
		{
			ms_fkey    *fk = &t->fkeys[f];
			ms_table   *parent = ms_catalog_find(p->tables, fk->parent);

			/*
			 * The child's rows, read as the child's owner: its key leads.
			 * Those not kept already, first; then, for each, is there one
			 * stable row of the replica's pointing at it: the children of a
			 * row looked up by their foreign key, never the held set whole.
			 */
			added += add(p, t, "ms_n",
						 psprintf("WITH q AS MATERIALIZED (SELECT q.replica, q.tab, q.key FROM pg_temp.ms_q q"
								  "  WHERE q.tab = %d AND NOT EXISTS (SELECT FROM pg_temp.ms_n n"
								  "   WHERE n.replica = q.replica AND n.tab = q.tab AND n.key = q.key))"
								  " SELECT q.replica, q.tab, q.key FROM q CROSS JOIN LATERAL ("
								  "  SELECT FROM %s x JOIN %s c ON %s"
								  "   JOIN sync.held h ON h.replica = q.replica AND h.tab = %d AND h.key = %s"
								  "    AND h.taken IS NULL"
								  "  WHERE %s AND NOT EXISTS (SELECT FROM pg_temp.ms_q q2 WHERE q2.replica = h.replica"
								  "   AND q2.tab = h.tab AND q2.key = h.key) LIMIT 1) e",
								  parent->id, parent->qualified, t->qualified, ms_fkey_match(t, fk, "c", "x", true), t->id,
								  ms_key_expr(t, "c"), ms_key_match(parent, "x", "q.key")),
						 not_blocked, "ms_nd0");
		}
	}
	/*
	 * The changed rows a replica certainly keeps, or keeps unless in
	 * question (in_place): kept, and what they point at now, unless
	 * stable.  Not what follows them: they were held, and their followers
	 * with them.
	 */
	ms_exec(p->exec, "SELECT EXISTS (SELECT FROM pg_temp.ms_certain)", 0, NULL, NULL, NULL, 0);
	rows = 0;
	if (inplace > 0 || DatumGetBool(ms_value(0, 1, &(bool) {false})))
	{
		ms_exec(p->exec, "INSERT INTO pg_temp.ms_kd SELECT k.replica, k.tab, k.key FROM pg_temp.ms_certain k"
				" WHERE EXISTS (SELECT FROM pg_temp.ms_changed c WHERE c.tab = k.tab AND c.key = k.key)"
				" UNION SELECT h.replica, h.tab, h.key FROM pg_temp.ms_inplace c"
				"  CROSS JOIN LATERAL (SELECT h.replica, h.tab, h.key FROM sync.held h"
				"   WHERE h.tab = c.tab AND h.key = c.key AND h.taken IS NULL OFFSET 0) h"
				"  JOIN pg_temp.ms_inc_replicas i ON i.id = h.replica"
				"  WHERE NOT " IN_QUESTION("h"),
				0, NULL, NULL, NULL, 0);
		rows = SPI_processed;
	}
	if (rows > 0)
	{
		add_arg		a = {"ms_n", not_stable, "ms_nd0"};

		ms_exec(p->exec, "INSERT INTO pg_temp.ms_n SELECT * FROM pg_temp.ms_kd ON CONFLICT DO NOTHING",
				0, NULL, NULL, NULL, 0);
		ms_analyze(p->exec, "pg_temp.ms_kd", rows);
		/* the rows they point at (not their followers) */
		added += ms_links_round(p, "ms_kd", NULL, false, add_step, &a, NULL);
	}
	/* then what those need, a round at a time, up to the stable rows (never a blocked row) */
	close_over(p, "ms_n", "ms_nd0", "ms_nd1", not_stable, added);
}

int64
ms_plan_question(ms_reader *p, ArrayType *replicas, bool blocked, bool more, int64 replicas_all, int64 floor,
				 bool sent, ms_sent_counts *counted)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(replicas)};
	uint64		inplace;
	uint64		fast_rows;
	uint64		added;
	int64		joined = 0;
	bool		sent_ahead;

	ms_temp_table(p->exec, "ms_inc_replicas");
	ms_temp_table(p->exec, "ms_changed");
	ms_temp_table(p->exec, "ms_changed_parents");
	ms_temp_table(p->exec, "ms_inplace");
	ms_temp_table(p->exec, "ms_q");
	ms_temp_table(p->exec, "ms_qd0");
	ms_temp_table(p->exec, "ms_qd1");
	ms_temp_table(p->exec, "ms_qc");
	ms_temp_table(p->exec, "ms_chain");
	ms_temp_table(p->exec, "ms_certain");
	ms_temp_table(p->exec, "ms_cand");
	ms_temp_table(p->exec, "ms_cand_rows");
	ms_temp_table(p->exec, "ms_n");
	ms_temp_table(p->exec, "ms_nd0");
	ms_temp_table(p->exec, "ms_nd1");
	ms_temp_table(p->exec, "ms_kd");

	if (counted != NULL)
		counted->valid = false;
	/* nothing else can be in question: a batch of fast rows alone is sent as they are found */
	if (nothing_in_question(p, 0, blocked, more))
	{
		ms_fast_ahead ahead = {replicas, replicas_all, sent, counted};

		fast_rows = ms_fast_find(p, &ahead, &sent_ahead);
	}
	else
		fast_rows = ms_fast_find(p, NULL, &sent_ahead);
	if (nothing_in_question(p, changed(p, fast_rows), blocked, more))
	{
		if (sent_ahead)
			return joined;
		/* nothing else planned, nothing taken back: its statement counts ms_send */
		ms_fast_send(p, fast_rows, replicas, replicas_all, sent, counted);
		return joined;
	}
	/* sent ahead only when they were the batch's every row, and so nothing else is in question */
	if (sent_ahead)
		elog(ERROR, "magic_sync: the fast path sent a batch in which more changed");
	/* the replicas with their partitions, which the rules read: a pass of fast rows alone needs neither */
	ms_exec(p->exec, "INSERT INTO ms_inc_replicas SELECT r.id, r.partition FROM unnest($1::uuid[]) u(id)"
			" JOIN sync.replicas r ON r.id = u.id",
			1, types, values, NULL, 0);
	inplace = in_place(p, blocked);
	in_question(p, blocked);
	kept(p, inplace, blocked);
	while (more && (added = close_batch(p, floor)) > 0)
	{
		/* planned again, around the notes the batch took in */
		static const char *const tables[] = {
			"ms_changed", "ms_changed_parents", "ms_inplace", "ms_q", "ms_qd0", "ms_qd1", "ms_qc", "ms_chain", "ms_certain",
			"ms_cand", "ms_cand_rows", "ms_n", "ms_nd0", "ms_nd1", "ms_kd", NULL};

		joined += (int64) added;
		ms_batch_rows(p->exec);
		for (const char *const *t = tables; *t != NULL; t++)
			ms_temp_empty(p->exec, *t);
		fast_rows = ms_fast_find(p, NULL, &sent_ahead);
		(void) changed(p, fast_rows);
		inplace = in_place(p, blocked);
		in_question(p, blocked);
		kept(p, inplace, blocked);
	}

	/* 3. the difference */
	/*
	 * each kept row's held version looked up by its key, never the held set
	 * whole; fresh where the replica holds no version at all (fast.c)
	 */
	ms_exec(p->exec,
			"INSERT INTO ms_send (replica, tab, key, note, fresh, held) "
			"SELECT n.replica, n.tab, n.key, coalesce(c.note, 0), h.note IS NULL, h.ctid FROM ms_n n"
			"  LEFT JOIN ms_pending c ON c.tab = n.tab AND c.key = n.key"
			"  LEFT JOIN LATERAL (SELECT h.note, h.taken, h.ctid FROM sync.held h WHERE h.replica = n.replica"
			"       AND h.tab = n.tab AND h.key = n.key OFFSET 0) h ON true"
			" WHERE h.note IS NULL OR h.taken IS NOT NULL OR c.note > h.note",
			0, NULL, NULL, NULL, 0);
	sent = sent || SPI_processed > 0;
	ms_fast_send(p, fast_rows, replicas, replicas_all, sent, NULL);
	ms_exec(p->exec,
			"INSERT INTO ms_take (replica, tab, key) SELECT q.replica, q.tab, q.key FROM ms_q q"
			" WHERE NOT EXISTS (SELECT FROM ms_n n WHERE n.replica = q.replica AND n.tab = q.tab AND n.key = q.key)",
			0, NULL, NULL, NULL, 0);
	return joined;
}
