/*-------------------------------------------------------------------------
 * why.c
 *	  sync.why(replica, tab, key): why a replica holds, should hold, or is
 *	  letting go of a row -- the chain from a rule through parents and
 *	  followers down to the row (docs/design.md 4.5).
 *
 * sync.why_all computes the replica's wanted set once, as sync.wanted does
 * (relay/wanted.c); then walks from its rules' rows, round by round, over
 * the same steps the wanted set is closed under (a row's parents, a row's
 * followers), each row reached remembering the row it was reached from.  The
 * first round that reaches a row is its shortest chain.
 *
 * sync.why does not compute the wanted set: it walks back from the row
 * (back()) to the nearest rules' rows, then forward from those, over the rows
 * found back only: the chain the whole walk gives, at the cost of the rows
 * leading to the row.  A row of the walk back is wanted when the walk goes on
 * to a rule's row; none found, the row is not wanted.
 *
 * Each step reuses the wanted set's own statements (ms_parents_select,
 * ms_followers_select, ms_children_select, ms_rule_select), which carry a
 * replica's uuid through, not the row a step starts from: the walk gives each
 * row of a round a uuid of its own, made of its table and key, and finds the
 * row again by it.
 *
 * Runs as the caller, in one snapshot, as sync.wanted does.
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
#include "owner.h"
#include "pass.h"
#include "spi_check.h"
#include "temp.h"
#include "wanted.h"

PG_FUNCTION_INFO_V1(ms_why);
PG_FUNCTION_INFO_V1(ms_why_all);

/* the uuid a row of a round goes by through a step's statement */
#define ROW_UUID(tab, key) "pg_catalog.md5(" tab "::pg_catalog.text || ':' || " key ")::pg_catalog.uuid"

/*
 * within: the condition a row s a step reaches meets to be kept at depth:
 * wanted, in a full walk (back < 0); else on a shortest chain to the row
 * asked about, back links long -- found back from it depth links before it.
 */
static char *
within(int back, int depth)
{
	if (back < 0)
		return "EXISTS (SELECT FROM pg_temp.ms_wanted w WHERE w.tab = s.tab AND w.key = s.key)";
	return psprintf("EXISTS (SELECT FROM pg_temp.ms_why_back w WHERE w.tab = s.tab AND w.key = s.key"
					" AND w.level = %d)", back - depth);
}

/*
 * step: add to pg_temp.ms_why the rows select (rows of t's, reached from
 * rows of pg_temp.ms_why_from) brings, with relation, at depth; the select
 * runs as t's owner, as in the wanted set.  A row reached from several rows
 * keeps the first by key, so that a walk back (back()) finds the same link.
 */
static uint64
step(ms_reader *p, const ms_table *t, const char *select, const char *relation, int depth, int back)
{
	ms_as_owner as;

	ms_owner_begin(&as, MS_EXEC_OWNER_OF(p->exec, t->relid));
	ms_exec(p->exec, psprintf("INSERT INTO pg_temp.ms_why (tab, key, depth, from_tab, from_key, relation)"
						" SELECT s.tab, s.key, %d, f.tab, f.key, %s"
						"  FROM (%s) s(replica, tab, key) JOIN pg_temp.ms_why_from f ON f.replica = s.replica"
						"  WHERE %s ORDER BY f.key"
						" ON CONFLICT DO NOTHING",
						depth, quote_literal_cstr(relation), select, within(back, depth)),
			0, NULL, NULL, NULL, 0);
	ms_owner_end(&as);
	return SPI_processed;
}

/*
 * rule_detail: an SQL expression naming, for the rule's row s.key of t's
 * given to replica s.replica, what gave it: the replica's partition, the
 * column naming it, the groups given to it the row is a member of.
 */
static char *
rule_detail(const ms_table *t)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (t->rule == MS_RULE_BROADCAST)
		return t->partition < 0 ? "'rule: broadcast'" :
			psprintf("'rule: broadcast, partition ' || (SELECT pg_catalog.quote_literal(r.partition)"
					 " FROM pg_temp.ms_wanted_replicas r WHERE r.id = s.replica)");
	if (t->rule == MS_RULE_ASSIGNED)
		return quote_literal_cstr(psprintf("rule: assigned(%s)", t->columns[t->rule_column].name));
	/* grouped: the groups of the row's memberships given to the replica */
	appendStringInfo(&buf, "'rule: grouped, group ' || (SELECT pg_catalog.string_agg(DISTINCT"
					 " pg_catalog.quote_literal(a.%s::pg_catalog.text), ', ')"
					 " FROM %s t JOIN %s m ON ", t->group_column, t->qualified, t->members_qualified);
	appendStringInfoString(&buf, ms_member_match(t, "m", "t"));
	appendStringInfo(&buf, " JOIN %s a ON a.%s %s m.%s WHERE a.%s OPERATOR(pg_catalog.=) s.replica AND %s)",
					 t->assignments_qualified, t->group_column,
					 ms_eq_operator(get_atttype(t->assignments, get_attnum(t->assignments, t->group_column_name))),
					 t->group_column, t->assignment_replica, ms_key_match(t, "t", "s.key"));
	return buf.data;
}

/*
 * rules: the rows t's rule and its records' origin give the replica, at
 * depth 0: every one that is wanted (cand NULL), or those of the rows
 * pg_temp.<cand> lists (replica, tab, key).  Returns how many.
 */
static uint64
rules(ms_reader *p, const ms_table *t, const char *cand)
{
	ms_table	rule = *t;
	ms_table	own = *t;
	ms_as_owner as;
	uint64		added = 0;

	rule.record = false;
	own.rule = MS_RULE_NONE;
	ms_owner_begin(&as, MS_EXEC_OWNER_OF(p->exec, t->relid));
	for (int i = 0; i < 2; i++)
	{
		const ms_table *r = i == 0 ? &rule : &own;
		char	   *select;

		/* a follows rule gives no row of its own: its rows come as followers */
		if (i == 0 && t->rule != MS_RULE_BROADCAST && t->rule != MS_RULE_ASSIGNED && t->rule != MS_RULE_GROUPED)
			continue;
		select = ms_rule_select(r, "ms_wanted_replicas", cand);
		if (select == NULL)
			continue;
		ms_exec(p->exec, psprintf("INSERT INTO pg_temp.ms_why (tab, key, depth, relation)"
							" SELECT s.tab, s.key, 0, %s FROM (%s) s(replica, tab, key)"
							" WHERE %s ON CONFLICT DO NOTHING",
							i == 0 ? rule_detail(t) : "'rule: its own record'", select,
							cand == NULL ? within(-1, 0) : "true"),
				0, NULL, NULL, NULL, 0);
		added += SPI_processed;
	}
	ms_owner_end(&as);
	return added;
}

/* reached: whether the row (tab, key) is in pg_temp.ms_why yet */
static bool
reached(ms_reader *p, Datum tab, Datum key)
{
	ms_exec(p->exec, "SELECT FROM pg_temp.ms_why WHERE tab = $1 AND key = $2", 2, (Oid[]) {INT4OID, TEXTOID},
			(Datum[]) {tab, key}, NULL, 1);
	return SPI_processed > 0;
}

/* from: pg_temp.ms_why_from made of the rows select (tab, key, with $1 = arg) lists, each with a uuid of its own */
static uint64
from(ms_reader *p, const char *select, int arg)
{
	ms_temp_empty(p->exec, "ms_why_from");
	ms_exec(p->exec, psprintf("INSERT INTO pg_temp.ms_why_from SELECT %s, tab, key FROM (%s) s"
						" ON CONFLICT DO NOTHING", ROW_UUID("tab", "key"), select),
			1, (Oid[]) {INT4OID}, (Datum[]) {Int32GetDatum(arg)}, NULL, 0);
	return SPI_processed;
}

/* what walk hands ms_links_round's step */
typedef struct walk_arg
{
	int			depth;
	int			back;
} walk_arg;

static uint64
walk_step(ms_reader *p, const ms_table *t, const ms_table *to, const ms_fkey *fk, bool follows,
		  const char *select, void *arg)
{
	walk_arg   *a = arg;

	(void) t;
	return step(p, to, select, psprintf(follows ? "follows (%s)" : "parent of (%s)", fk->name), a->depth, a->back);
}

/*
 * walk: from the rules' rows in pg_temp.ms_why, rounds of parents and
 * followers of the rows the last round reached, until (tab, key) is reached
 * or a round adds none; every wanted row, with whole.  back: see within().
 */
static void
walk(ms_reader *p, Datum tab, Datum key, bool whole, int back)
{
	for (int depth = 1; whole || !reached(p, tab, key); depth++)
	{
		walk_arg	a = {depth, back};

		if (from(p, "SELECT tab, key FROM pg_temp.ms_why WHERE depth = $1", depth - 1) == 0)
			break;
		if (ms_links_round(p, "ms_why_from", NULL, true, walk_step, &a, NULL) == 0)
			break;
	}
}

/* walk_whole: the walk from every rule's row, over the wanted set (ms_wanted_fill) */
static void
walk_whole(ms_reader *p, ArrayType *replicas, Datum tab, Datum key, bool whole)
{
	ListCell   *lc;

	ms_wanted_fill(p, replicas, false);
	ms_temp_table(p->exec, "ms_why");
	foreach(lc, p->tables)
		rules(p, lfirst(lc), NULL);
	walk(p, tab, key, whole, -1);
}

/* a walk back that lists more rows than this leaves the question to the whole walk */
#define BACK_ROWS 20000

/*
 * back_step: add the rows select (rows of t's, reached back from
 * pg_temp.ms_why_from) lists at level, but no more than limit of them (a
 * row very many rows point at is left to the whole walk before they are all
 * read): false when select lists limit rows or more.
 */
static bool
back_step(ms_reader *p, const ms_table *t, const char *select, int level, uint64 *rows, uint64 limit)
{
	ms_as_owner as;
	bool		isnull;
	int64		listed;

	ms_owner_begin(&as, MS_EXEC_OWNER_OF(p->exec, t->relid));
	ms_exec(p->exec, psprintf("WITH s AS MATERIALIZED (%s LIMIT " UINT64_FORMAT "),"
						" i AS (INSERT INTO pg_temp.ms_why_back (tab, key, level) SELECT s.tab, s.key, %d"
						"  FROM s s(replica, tab, key) ON CONFLICT DO NOTHING RETURNING 1)"
						" SELECT (SELECT pg_catalog.count(*) FROM s), (SELECT pg_catalog.count(*) FROM i)",
						select, limit, level),
			0, NULL, NULL, NULL, 0);
	ms_owner_end(&as);
	listed = DatumGetInt64(ms_value(0, 1, &isnull));
	*rows += (uint64) DatumGetInt64(ms_value(0, 2, &isnull));
	return (uint64) listed < limit;
}

/*
 * back: the walk back from the row (tab, key) to the rules' rows, level by
 * level over the three steps reversed -- the rows pointing at a row (it is
 * their parent), the row a row follows (when it is active) -- until a rule
 * gives the replica a row of the level; those rows are put in pg_temp.ms_why
 * at depth 0 and the level returned, the length of the shortest chains.
 * Every row on one is in pg_temp.ms_why_back, at the level of its distance
 * from the row, so that the walk forward from them, kept to those rows
 * (within()), is the whole walk's, at the cost of the chains.  -1: no row
 * leads to it, the replica should not hold it; -2: too many rows lead to it
 * (BACK_ROWS) to say.
 */
static int
back(ms_reader *p, Datum id, Datum tab, Datum key)
{
	uint64		rows = 1;

	ms_temp_table(p->exec, "ms_why_back");
	ms_exec(p->exec, "INSERT INTO pg_temp.ms_why_back VALUES ($1, $2, 0)", 2, (Oid[]) {INT4OID, TEXTOID},
			(Datum[]) {tab, key}, NULL, 0);
	for (int level = 0;; level++)
	{
		uint64		before = rows;
		uint64		given = 0;
		bool		fits = true;
		ListCell   *lc;

		ms_temp_table(p->exec, "ms_why_cand");
		ms_exec(p->exec, "INSERT INTO pg_temp.ms_why_cand SELECT $1, tab, key FROM pg_temp.ms_why_back WHERE level = $2",
				2, (Oid[]) {UUIDOID, INT4OID}, (Datum[]) {id, Int32GetDatum(level)}, NULL, 0);
		foreach(lc, p->tables)
			given += rules(p, lfirst(lc), "ms_why_cand");
		if (given > 0)
			return level;
		from(p, "SELECT tab, key FROM pg_temp.ms_why_back WHERE level = $1", level);
		foreach(lc, p->tables)
		{
			ms_table   *t = lfirst(lc);

			for (int f = 0; f < t->nfkeys; f++)
			{
				ms_table   *parent = ms_catalog_find(p->tables, t->fkeys[f].parent);

				if (parent != NULL && fits)
					fits = back_step(p, t, ms_children_select(t, &t->fkeys[f], parent, "ms_why_from"), level + 1,
									 &rows, BACK_ROWS + 1 - rows);
			}
			if (t->follows_fkey >= 0)
			{
				ms_table   *parent = ms_catalog_find(p->tables, t->fkeys[t->follows_fkey].parent);

				/* the followed row, of an active follower (as ms_followers_select asks) */
				if (parent != NULL && fits)
					fits = back_step(p, t, psprintf("%s%s", ms_parents_select(t, &t->fkeys[t->follows_fkey], parent,
																			  "ms_why_from"),
													ms_active_filter(t, "t", "d")),
									 level + 1, &rows, BACK_ROWS + 1 - rows);
			}
		}
		if (!fits || rows > BACK_ROWS)
			return -2;
		if (rows == before)
			return -1;
	}
}

/*
 * ms_why: sync.why(replica, tab, key) returns (depth, tab, key, relation,
 * wanted, held): the chain from a rule down to the row, the rule's row first;
 * one line, at depth 0 and with no relation, when the replica should not
 * hold the row.
 */
Datum
ms_why(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		id = PG_GETARG_DATUM(0);
	Oid			relid = PG_GETARG_OID(1);
	Datum		key = PG_GETARG_DATUM(2);
	Datum		elems[1] = {id};
	ms_executor x;
	ms_reader	p = {&x, NIL};
	Datum		tab;
	int			back_len;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	ms_executor_begin(&x, CurrentMemoryContext);
	ms_replica_must_exist(&p, id);
	ms_exec(&x, "SELECT id FROM sync.tables WHERE relid = $1", 1, (Oid[]) {REGCLASSOID},
			(Datum[]) {ObjectIdGetDatum(relid)}, NULL, 0);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table %s is not mirrored", DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(relid)))),
				 errdetail("Only a table sync.declare mirrors is sent to replicas."),
				 errhint("sync.mirrors lists the mirrored tables.")));
	{
		bool		isnull;

		tab = ms_value(0, 1, &isnull);
	}
	p.tables = ms_catalog_tables();
	ms_read_as_owners(&p);
	ms_temp_table(&x, "ms_why");
	ms_temp_table(&x, "ms_why_from");
	ms_temp_table(&x, "ms_wanted_replicas");
	ms_exec(&x, "INSERT INTO pg_temp.ms_wanted_replicas SELECT id, partition FROM sync.replicas WHERE id = $1",
			1, (Oid[]) {UUIDOID}, elems, NULL, 0);
	back_len = back(&p, id, tab, key);
	/* the chain forward from the rules' rows found; the whole walk when that cannot say */
	if (back_len >= 0)
		walk(&p, tab, key, false, back_len);
	if (back_len == -2 || (back_len >= 0 && !reached(&p, tab, key)))
		walk_whole(&p, construct_array(elems, 1, UUIDOID, 16, false, TYPALIGN_CHAR), tab, key, false);

	/* the chain, from the row back to its rule, read out rule first */
	ms_exec(&x, "WITH RECURSIVE c AS ("
			"  SELECT w.tab, w.key, w.depth, w.from_tab, w.from_key, w.relation FROM pg_temp.ms_why w"
			"   WHERE w.tab = $1 AND w.key = $2"
			"  UNION ALL"
			"  SELECT w.tab, w.key, w.depth, w.from_tab, w.from_key, w.relation"
			"   FROM c JOIN pg_temp.ms_why w ON w.tab = c.from_tab AND w.key = c.from_key),"
			" chain AS (SELECT tab, key, depth, relation, true AS wanted FROM c"
			"  UNION ALL SELECT $1, $2, 0, NULL, false WHERE NOT EXISTS (SELECT FROM c))"
			" SELECT ch.depth, t.relid, ch.key, ch.relation, ch.wanted,"
			"  CASE WHEN h.replica IS NULL THEN 'no' WHEN h.taken IS NOT NULL THEN 'letting go'"
			"   WHEN h.number > r.acked_number THEN 'on its way' ELSE 'holds' END"
			"  FROM chain ch JOIN sync.tables t ON t.id = ch.tab"
			"  JOIN sync.replicas r ON r.id = $3"
			"  LEFT JOIN sync.held h ON h.replica = $3 AND h.tab = ch.tab AND h.key = ch.key"
			" ORDER BY ch.depth",
			3, (Oid[]) {INT4OID, TEXTOID, UUIDOID}, (Datum[]) {tab, key, id}, NULL, 0);
	ms_spi_rows_out(rsinfo);
	ms_executor_end(&x);
	SPI_finish();
	return (Datum) 0;
}

/*
 * ms_why_all: sync.why_all(replica) returns (tab, key, depth, relation,
 * from_tab, from_key): every row the replica should hold, with the link that
 * first reached it -- its rule's (depth 0, no row before it), or the row one
 * link up its shortest chain -- from one walk of its whole wanted set, where
 * sync.why walks it once for each row asked about.  A wanted row no link
 * reaches (none should) is listed with depth and relation NULL.
 */
Datum
ms_why_all(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ms_executor x;
	ms_reader	p = {&x, NIL};
	ArrayType  *replica;
	Portal		portal;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	replica = ms_wanted_read_begin(&p, PG_GETARG_DATUM(0));
	ms_temp_table(&x, "ms_why_from");
	walk_whole(&p, replica, (Datum) 0, (Datum) 0, true);
	portal = ms_open(&x, "SELECT t.relid, w.key, y.depth, y.relation, f.relid, y.from_key"
					 "  FROM pg_temp.ms_wanted w JOIN sync.tables t ON t.id = w.tab"
					 "  LEFT JOIN pg_temp.ms_why y ON y.tab = w.tab AND y.key = w.key"
					 "  LEFT JOIN sync.tables f ON f.id = y.from_tab"
					 " ORDER BY t.relid::pg_catalog.regclass::pg_catalog.text, w.key",
					 0, NULL, NULL, NULL);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		ms_spi_rows_out(rsinfo);
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	ms_executor_end(&x);
	SPI_finish();
	return (Datum) 0;
}
