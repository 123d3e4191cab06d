/*-------------------------------------------------------------------------
 * wanted.c
 *	  The wanted set from scratch (docs/design.md 4.5): the least set of rows closed
 *	  under three rules -- the rows its tables' rules send a replica; every
 *	  row one of those points at; every row that follows one of those.
 *
 * Computed set by set in temporary tables, for many replicas at once:
 * first the rules' rows, then rounds that add the parents and followers of
 * the rows the previous round added (semi-naive: a round reads only what is
 * new), until a round adds nothing.  Only rows of tables that point at
 * something or are followed need a round at all.
 *
 * Every statement runs in the snapshot of the pass or read it is part of
 * (pass.h), over the tables it read from the catalog once.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/uuid.h"

#include "catalog.h"
#include "keys.h"
#include "owner.h"
#include "pass.h"
#include "spi_check.h"
#include "temp.h"
#include "wanted.h"

PG_FUNCTION_INFO_V1(ms_wanted);
PG_FUNCTION_INFO_V1(ms_wanted_fill_sql);

/*
 * cols_key: the canonical key made of these columns of alias, in this order;
 * NULL when one of them is null (a foreign key pointing nowhere).  Written as
 * a CASE, since a condition beside it is no guard: a join or filter may
 * evaluate the key on every row of the table before that condition, and
 * sync.key refuses a null part (the plan of every note then failed for good,
 * once the tables grew enough for such a plan).
 */
char *
ms_cols_key(const ms_table *t, const char *alias, int n, const int *cols)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "(CASE WHEN ");
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s.%s IS NOT NULL", i > 0 ? " AND " : "", alias, t->columns[cols[i]].quoted);
	appendStringInfoString(&buf, " THEN sync.key(ARRAY[");
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 ms_key_text_sql(t->columns[cols[i]].type, psprintf("%s.%s", alias, t->columns[cols[i]].quoted)));
	appendStringInfoString(&buf, "]) END COLLATE \"C\")");
	return buf.data;
}

/* cols_not_null: none of these columns of alias is null. */
static char *
cols_not_null(const ms_table *t, const char *alias, int n, const int *cols)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s.%s IS NOT NULL", i > 0 ? " AND " : "", alias,
						 t->columns[cols[i]].quoted);
	return buf.data;
}

/*
 * cols_match: these columns of alias equal the parts of the key keyexpr,
 * each part taken as its column's value (ms_key_part): an index on the
 * columns serves it.
 */
static char *
cols_match(const ms_table *t, const char *alias, int n, const int *cols, const char *keyexpr)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s.%s %s %s", i > 0 ? " AND " : "",
						 alias, t->columns[cols[i]].quoted, ms_eq_operator(t->columns[cols[i]].type),
						 ms_key_part(&t->columns[cols[i]], keyexpr, i + 1));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

char *
ms_fkey_key(const ms_table *t, const ms_fkey *fk, const ms_table *parent, const char *alias)
{
	StringInfoData buf;

	if (fk->keyed && fk->nby == fk->ncols)
		return ms_cols_key(t, alias, fk->nby, fk->by_parent_key);
	initStringInfo(&buf);
	if (fk->keyed)
	{
		/* the key's columns, when none of the others is null either */
		appendStringInfo(&buf, "(CASE WHEN %s THEN %s END)", cols_not_null(t, alias, fk->ncols, fk->cols),
						 ms_cols_key(t, alias, fk->nby, fk->by_parent_key));
		return buf.data;
	}
	/* the parent the referenced columns find, by its unique index on them */
	appendStringInfo(&buf, "(SELECT %s FROM %s fp WHERE %s)", ms_key_expr(parent, "fp"), parent->qualified,
					 ms_fkey_match(t, fk, alias, "fp", false));
	return buf.data;
}

char *
ms_fkey_noted(const ms_table *t, const ms_fkey *fk, const char *alias)
{
	return ms_cols_key(t, alias, fk->ncols, fk->noted);
}

char *
ms_fkey_pointed(const ms_fkey *fk, const ms_table *parent, const char *noted)
{
	StringInfoData buf;

	if (fk->keyed && fk->nby == fk->ncols)
		return pstrdup(noted);
	initStringInfo(&buf);
	if (fk->keyed)
	{
		appendStringInfo(&buf, "(sync.key((sync.key_parts(%s))[1:%d]) COLLATE \"C\")", noted, fk->nby);
		return buf.data;
	}
	/* the parent whose referenced columns hold those values now, if any */
	appendStringInfo(&buf, "(SELECT %s FROM %s fp WHERE ", ms_key_expr(parent, "fp"), parent->qualified);
	for (int i = 0; i < fk->ncols; i++)
	{
		ms_column	c = {.type = fk->parent_types[i], .collation = fk->parent_collations[i]};

		appendStringInfo(&buf, "%sfp.%s %s %s", i > 0 ? " AND " : "", quote_identifier(fk->parent_cols[i]),
						 ms_eq_operator(fk->parent_types[i]), ms_key_part(&c, noted, i + 1));
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * active_filter: " AND the row of alias is in t's active view", or "".
 * OFFSET 0 keeps it a test of that row: made a semi-join, a plan chosen once
 * the tables grew scanned the whole view, and a row of it that fails (a bug
 * of the view) failed the plan of every other row, and the pass, for no
 * note of its own (park.c could not narrow it down).  by, when not NULL, is
 * the alias of the row in question the test is for (a candidate, a delta
 * row): named in the test, it makes it a condition of the join, met only by
 * the rows that join -- otherwise a plan that scans the table whole (a hash
 * join, chosen once the candidates looked many) tested every row of it.
 */
char *
ms_active_filter(const ms_table *t, const char *alias, const char *by)
{
	StringInfoData buf;

	if (t->active_qualified == NULL)
		return "";
	initStringInfo(&buf);
	appendStringInfo(&buf, " AND EXISTS (SELECT FROM %s v WHERE ", t->active_qualified);
	for (int k = 0; k < t->nkey; k++)
		appendStringInfo(&buf, "%sv.%s OPERATOR(pg_catalog.=) %s.%s", k > 0 ? " AND " : "",
						 t->columns[t->key[k]].quoted, alias, t->columns[t->key[k]].quoted);
	if (by != NULL)
		appendStringInfo(&buf, " AND %s.tab IS NOT NULL", by);
	appendStringInfoString(&buf, " OFFSET 0)");
	return buf.data;
}

/* every_replica: cand lists rows (tab, key), candidates for every replica */
static char *
rule_select(const ms_table *t, const char *replicas, const char *cand, bool every_replica)
{
	char	   *key = ms_key_expr(t, "t");
	char	   *active = ms_active_filter(t, "t", cand == NULL ? NULL : "c");
	/* restricted to candidate rows: (replica, key) of pg_temp.cand for this table */
	char	   *from = cand == NULL ? psprintf("%s t", t->qualified) :
		psprintf("pg_temp.%s c JOIN %s t ON c.tab = %d AND %s", cand, t->qualified, t->id,
				 ms_key_match(t, "t", "c.key"));
	char	   *same = cand == NULL || every_replica ? "" : " AND r.id = c.replica";
	StringInfoData sql;

	initStringInfo(&sql);
	if (t->rule == MS_RULE_BROADCAST)
	{
		char	   *part = t->partition < 0 ? "true" :
			psprintf("(t.%s)::pg_catalog.text IS NOT DISTINCT FROM r.partition",
					 t->columns[t->partition].quoted);

		appendStringInfo(&sql, "SELECT r.id, %d, %s FROM %s JOIN pg_temp.%s r ON %s%s WHERE true%s",
						 t->id, key, from, replicas, part, same, active);
	}
	else if (t->rule == MS_RULE_ASSIGNED)
		appendStringInfo(&sql, "SELECT r.id, %d, %s FROM %s JOIN pg_temp.%s r"
						 " ON r.id OPERATOR(pg_catalog.=) t.%s%s WHERE true%s", t->id, key, from, replicas,
						 t->columns[t->rule_column].quoted, same, active);
	else if (t->rule == MS_RULE_GROUPED)
	{
		StringInfoData on;

		initStringInfo(&on);
		appendStringInfoString(&on, ms_member_match(t, "m", "t"));
		/* the group column's own equality: it may be of any type */
		appendStringInfo(&sql, "SELECT DISTINCT r.id, %d, %s FROM %s JOIN %s m ON %s"
						 " JOIN %s a ON a.%s %s m.%s"
						 " JOIN pg_temp.%s r ON r.id OPERATOR(pg_catalog.=) a.%s%s WHERE true%s",
						 t->id, key, from, t->members_qualified, on.data,
						 t->assignments_qualified, t->group_column,
						 ms_eq_operator(get_atttype(t->assignments,
													get_attnum(t->assignments, t->group_column_name))),
						 t->group_column,
						 replicas, t->assignment_replica, same, active);
	}
	/* a replica holds the records it wrote */
	if (t->record && t->origin >= 0)
		appendStringInfo(&sql, "%sSELECT r.id, %d, %s FROM %s JOIN pg_temp.%s r"
						 " ON r.id OPERATOR(pg_catalog.=) t.%s%s WHERE true%s", sql.len ? " UNION " : "",
						 t->id, key, from, replicas, t->columns[t->origin].quoted, same, active);
	return sql.len ? sql.data : NULL;
}

char *
ms_rule_select(const ms_table *t, const char *replicas, const char *cand)
{
	return rule_select(t, replicas, cand, false);
}

char *
ms_rule_select_rows(const ms_table *t, const char *replicas, const char *rows)
{
	return rule_select(t, replicas, rows, true);
}

char *
ms_parents_select(const ms_table *t, const ms_fkey *fk, const ms_table *parent, const char *from)
{
	if (!fk->keyed)
		return psprintf("SELECT d.replica, %d, %s FROM pg_temp.%s d JOIN %s t ON %s JOIN %s fp ON %s"
						" WHERE d.tab = %d",
						fk->parent, ms_key_expr(parent, "fp"), from, t->qualified, ms_key_match(t, "t", "d.key"),
						parent->qualified, ms_fkey_match(t, fk, "t", "fp", false), t->id);
	return psprintf("SELECT d.replica, %d, %s FROM pg_temp.%s d JOIN %s t ON %s"
					" WHERE d.tab = %d AND %s",
					fk->parent, ms_cols_key(t, "t", fk->nby, fk->by_parent_key),
					from, t->qualified, ms_key_match(t, "t", "d.key"), t->id,
					cols_not_null(t, "t", fk->ncols, fk->cols));
}

/*
 * children_select: the rows of t pointing by fk at the rows of parent in
 * from, looked up by their foreign key's columns: an index on them serves
 * it.  Through the parent's row when they are more than its key's: an index
 * on all of them serves it, or on those referencing the key, in any order
 * (catalog.h: ms_fkey_unindexed).  active: only those in t's active view.
 */
static char *
children_select(const ms_table *t, const ms_fkey *fk, const ms_table *parent, const char *from, bool active)
{
	const char *filter = active ? ms_active_filter(t, "t", "d") : "";

	if (!fk->keyed || fk->nby < fk->ncols)
		return psprintf("SELECT d.replica, %d, %s FROM pg_temp.%s d JOIN %s fp ON %s JOIN %s t ON %s"
						" WHERE d.tab = %d%s",
						t->id, ms_key_expr(t, "t"), from, parent->qualified, ms_key_match(parent, "fp", "d.key"),
						t->qualified, ms_fkey_match(t, fk, "t", "fp", true), fk->parent, filter);
	return psprintf("SELECT d.replica, %d, %s FROM pg_temp.%s d JOIN %s t ON %s"
					" WHERE d.tab = %d%s",
					t->id, ms_key_expr(t, "t"), from, t->qualified,
					cols_match(t, "t", fk->nby, fk->by_parent_key, "d.key"),
					fk->parent, filter);
}

char *
ms_followers_select(const ms_table *t, const ms_table *parent, const char *from)
{
	return children_select(t, &t->fkeys[t->follows_fkey], parent, from, true);
}

char *
ms_children_select(const ms_table *t, const ms_fkey *fk, const ms_table *parent, const char *from)
{
	return children_select(t, fk, parent, from, false);
}

/*
 * add_rows: insert (replica, tab, key) rows of a SELECT of t's into
 * pg_temp.<set>, and those that are new into the delta table when the table
 * has rounds.  A table's rules run once, into a set that holds none of its
 * rows, and their rows are unique: they need no look for a conflict (first).
 * In a relay pass the SELECT, which may run t's code (its active view, its
 * key's domain), runs as t's owner.
 */
static uint64
add_rows(ms_reader *p, const ms_table *t, const char *set, const char *select, bool first, bool delta,
		 const char *into, bool blocked)
{
	const char *conflict = first ? "" : " ON CONFLICT DO NOTHING";
	ms_as_owner as;

	/* a row that cannot go is no one's, nor a reason to want its parents (plan.c) */
	if (blocked)
		select = psprintf("SELECT s.replica, s.tab, s.key FROM (%s) s(replica, tab, key) WHERE " MS_NOT_BLOCKED("s"),
						  select);
	ms_owner_begin(&as, MS_EXEC_OWNER_OF(p->exec, t->relid));
	if (delta)
		ms_exec(p->exec, psprintf("WITH n AS (INSERT INTO pg_temp.%s (replica, tab, key) %s%s"
							" RETURNING replica, tab, key)"
							" INSERT INTO pg_temp.%s SELECT replica, tab, key FROM n",
							set, select, conflict, into),
				0, NULL, NULL, NULL, 0);
	else
		ms_exec(p->exec, psprintf("INSERT INTO pg_temp.%s (replica, tab, key) %s%s", set, select, conflict),
				0, NULL, NULL, NULL, 0);
	ms_owner_end(&as);
	/* the rows added to set (with a delta, as many go into it) */
	return SPI_processed;
}

/* the temporary tables, created once per session; their rows outlive the transaction */
static void
wanted_tables(ms_reader *p, bool empty_first)
{
	if (empty_first)
		ms_temp_table(p->exec, "ms_wanted");
	ms_temp_table(p->exec, "ms_wanted_replicas");
	ms_temp_table(p->exec, "ms_wanted_delta0");
	ms_temp_table(p->exec, "ms_wanted_delta1");
}

/* rounds_of: by table id, whether its rows lead to more rows: they point at one, or are followed */
static bool *
rounds_of(List *tables)
{
	ListCell   *lc;
	int			maxid = 0;
	bool	   *rounds;

	foreach(lc, tables)
		maxid = Max(maxid, ((ms_table *) lfirst(lc))->id);
	rounds = palloc0(sizeof(bool) * (maxid + 1));
	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);

		if (t->nfkeys > 0)
			rounds[t->id] = true;
		if (t->follows_fkey >= 0)
			rounds[t->fkeys[t->follows_fkey].parent] = true;
	}
	return rounds;
}

uint64
ms_links_round(ms_reader *p, const char *from, const bool *skip, bool followers,
			   ms_link_step step, void *arg, bool *links)
{
	uint64		n = 0;
	ListCell   *lc;

	if (links != NULL)
		*links = false;
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);

		/* the rows the rows of t in from point at */
		for (int f = 0; f < t->nfkeys; f++)
		{
			ms_table   *parent = ms_catalog_find(p->tables, t->fkeys[f].parent);

			/* a table left out is wanted whole: the rows pointed at are in it */
			if (parent == NULL || (skip != NULL && skip[t->fkeys[f].parent]))
				continue;
			n += step(p, t, parent, &t->fkeys[f], false, ms_parents_select(t, &t->fkeys[f], parent, from), arg);
			if (links != NULL)
				*links = true;
		}
		/* the rows of t that follow rows of its parent in from */
		if (followers && t->follows_fkey >= 0)
		{
			ms_table   *parent = ms_catalog_find(p->tables, t->fkeys[t->follows_fkey].parent);

			if (parent == NULL)
				continue;
			n += step(p, t, t, &t->fkeys[t->follows_fkey], true, ms_followers_select(t, parent, from), arg);
			if (links != NULL)
				*links = true;
		}
	}
	return n;
}

/* what close_rounds hands ms_links_round's step */
typedef struct round_arg
{
	const char *set;
	const bool *rounds;
	const char *into;
	bool		blocked;
} round_arg;

static uint64
round_step(ms_reader *p, const ms_table *t, const ms_table *to, const ms_fkey *fk, bool follows,
		   const char *select, void *arg)
{
	round_arg  *a = arg;

	(void) fk;
	(void) follows;
	return add_rows(p, t, a->set, select, false, to != NULL && a->rounds[to->id], a->into, a->blocked);
}

/*
 * close_rounds: rounds from ms_wanted_delta0: the parents and the followers
 * of what the last round added, into set, until a round adds nothing.
 */
static uint64
close_rounds(ms_reader *p, const char *set, const bool *rounds, uint64 rows, const bool *skip, bool blocked)
{
	uint64		added = 0;
	int			cur = 0;

	for (;;)
	{
		const char *from = cur == 0 ? "ms_wanted_delta0" : "ms_wanted_delta1";
		round_arg	a = {set, rounds, cur == 0 ? "ms_wanted_delta1" : "ms_wanted_delta0", blocked};
		bool		more;
		uint64		round;

		if (rows == 0)
			break;
		ms_analyze(p->exec, psprintf("pg_temp.%s", from), rows);
		round = ms_links_round(p, from, skip, true, round_step, &a, &more);
		ms_temp_empty(p->exec, from);
		added += round;
		rows = round;
		cur = 1 - cur;
		if (!more)
			break;
	}
	return added;
}

/*
 * ms_wanted_whole: by table id, the tables whose wanted set, for any
 * replica, is every row not blocked: broadcast to every partition, with no
 * active view, not a record (whose writer would hold it anyway), and no
 * round reaching through them (they point at no table, none follows them).
 * NULL when there is none.
 */
bool *
ms_wanted_whole(List *tables)
{
	bool	   *rounds = rounds_of(tables);
	bool	   *whole = NULL;
	ListCell   *lc;
	int			maxid = 0;

	foreach(lc, tables)
		maxid = Max(maxid, ((ms_table *) lfirst(lc))->id);
	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);

		if (t->rule != MS_RULE_BROADCAST || t->partition >= 0 || t->active_qualified != NULL ||
			t->record || rounds[t->id])
			continue;
		if (whole == NULL)
			whole = palloc0(sizeof(bool) * (maxid + 1));
		whole[t->id] = true;
	}
	pfree(rounds);
	return whole;
}

/*
 * fill: the wanted sets of these replicas (NULL: every live replica not
 * dropped) into pg_temp.<set>: the rows the rules send, then rounds; but
 * not the rows of the tables skip names (by id), when it is not NULL.
 */
static uint64
fill(ms_reader *p, ArrayType *replicas, const char *set, bool empty_first, const bool *skip, bool blocked)
{
	bool	   *rounds = rounds_of(p->tables);
	uint64		added = 0;
	uint64		delta = 0;
	ListCell   *lc;

	wanted_tables(p, empty_first);
	ms_exec(p->exec, "INSERT INTO pg_temp.ms_wanted_replicas"
			" SELECT id, partition FROM sync.replicas"
			"  WHERE CASE WHEN $1 IS NULL THEN live AND NOT dropped ELSE id = ANY ($1) END",
			1, (Oid[]) {UUIDARRAYOID}, (Datum[]) {PointerGetDatum(replicas)},
			replicas == NULL ? "n" : NULL, 0);

	/* the rows the rules send */
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);
		char	   *rules = ms_rule_select(t, "ms_wanted_replicas", NULL);

		if (rules != NULL && !(skip != NULL && skip[t->id]))
		{
			uint64		n = add_rows(p, t, set, rules, true, rounds[t->id], "ms_wanted_delta0", blocked);

			added += n;
			if (rounds[t->id])
				delta += n;
		}
	}
	return added + close_rounds(p, set, rounds, delta, skip, blocked);
}

uint64
ms_wanted_fill(ms_reader *p, ArrayType *replicas, bool blocked)
{
	return fill(p, replicas, "ms_wanted", true, NULL, blocked);
}

uint64
ms_wanted_into(ms_reader *p, ArrayType *replicas, const char *set, const bool *skip, bool blocked)
{
	return fill(p, replicas, set, false, skip, blocked);
}

/* ms_replica_must_exist: an error, for a person, unless replica id exists */
void
ms_replica_must_exist(ms_reader *p, Datum id)
{
	ms_exec(p->exec, "SELECT FROM sync.replicas WHERE id = $1", 1, (Oid[]) {UUIDOID}, &id, NULL, 0);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replica %s does not exist", DatumGetCString(DirectFunctionCall1(uuid_out, id))),
				 errhint("sync.replicas lists the replicas.")));
}

ArrayType *
ms_wanted_read_begin(ms_reader *p, Datum id)
{
	ms_executor_begin(p->exec, CurrentMemoryContext);
	ms_replica_must_exist(p, id);
	p->tables = ms_catalog_tables();
	ms_read_as_owners(p);
	return construct_array(&id, 1, UUIDOID, 16, false, TYPALIGN_CHAR);
}

/*
 * ms_wanted: sync.wanted(replica) returns (tab, key, parts), the rows the
 * replica should hold, ordered by table (parents first) and key, in one
 * snapshot.
 */
Datum
ms_wanted(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ms_executor x;
	ms_reader	p = {&x, NIL};
	ArrayType  *replica;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	replica = ms_wanted_read_begin(&p, PG_GETARG_DATUM(0));
	ms_wanted_fill(&p, replica, false);
	ms_exec(&x, "SELECT t.relid, w.key, sync.key_parts(w.key)"
			"  FROM pg_temp.ms_wanted w JOIN sync.tables t ON t.id = w.tab"
			" ORDER BY t.id, w.key", 0, NULL, NULL, NULL, 0);
	ms_spi_rows_out(rsinfo);
	ms_executor_end(&x);
	SPI_finish();
	return (Datum) 0;
}

/*
 * ms_wanted_fill_sql: sync.wanted_fill(replicas uuid[]) fills
 * pg_temp.ms_wanted as ms_wanted_fill does, in one snapshot, and returns
 * its row count.
 */
Datum
ms_wanted_fill_sql(PG_FUNCTION_ARGS)
{
	ms_executor x;
	ms_reader	p = {&x, NIL};
	uint64		n;

	SPI_connect();
	ms_executor_begin(&x, CurrentMemoryContext);
	p.tables = ms_catalog_tables();
	ms_read_as_owners(&p);
	n = ms_wanted_fill(&p, PG_ARGISNULL(0) ? NULL : PG_GETARG_ARRAYTYPE_P(0), false);
	ms_executor_end(&x);
	SPI_finish();
	PG_RETURN_INT64((int64) n);
}
