/*-------------------------------------------------------------------------
 * analyze.c
 *	  ANALYZE of the plan's temporary tables, only where a plan needs it.
 *
 * The planner needs a plan table's row count, and a few rows need no
 * statistics (MS_ANALYZE_ROWS).  ANALYZE also makes PostgreSQL plan again
 * every kept statement that reads the tables it analysed: under a stream of
 * commits, passes of a few thousand notes each, analysing every pass's tables
 * made every pass parse and plan all its statements again.  So each group of
 * tables is analysed again only when its rows moved past twice, or half,
 * what they were at its last ANALYZE in this session: the statements a pass
 * of the same size runs are the plans made for that size, kept.
 *
 * What a group held at its last ANALYZE counts from the commit of the
 * transaction that ran it: one rolled back took its statistics with it.  A
 * table emptied by TRUNCATE (ms_temp_empty) keeps its statistics, and its
 * statements are planned again for the pages the pass filled.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "nodes/makefuncs.h"
#include "utils/guc.h"
#include "utils/regproc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "pass.h"

/* how far a group's rows may move from those it was analysed with */
#define ANALYZE_DRIFT 2

#define TABLES_MAX 128

typedef struct analyzed
{
	char		tables[TABLES_MAX];	/* hash key: the group, as ms_analyze names it */
	uint64		rows;			/* at its last committed ANALYZE; 0: none */
	uint64		pending;		/* at an ANALYZE of this transaction; 0: none */
	int			level;			/* the (sub)transaction nesting level it ran at */
	Oid			first;			/* its first table then: DISCARD TEMP makes new ones */
} analyzed;

static HTAB *groups = NULL;
static bool callbacks = false;

/* forget what was analysed at level or deeper: those groups are due again */
static void
groups_drop(int level)
{
	HASH_SEQ_STATUS seq;
	analyzed   *a;

	if (groups == NULL)
		return;
	hash_seq_init(&seq, groups);
	while ((a = hash_seq_search(&seq)) != NULL)
	{
		if (a->pending != 0 && a->level >= level)
		{
			a->rows = 0;
			a->pending = 0;
		}
	}
}

static void
groups_commit(void)
{
	HASH_SEQ_STATUS seq;
	analyzed   *a;

	if (groups == NULL)
		return;
	hash_seq_init(&seq, groups);
	while ((a = hash_seq_search(&seq)) != NULL)
		if (a->pending != 0)
		{
			a->rows = a->pending;
			a->pending = 0;
		}
}

static void
analyze_xact(XactEvent event, void *arg)
{
	(void) arg;
	if (event == XACT_EVENT_COMMIT)
		groups_commit();
	else if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE)
		/* prepared: its statistics count from a COMMIT PREPARED, maybe another session's */
		groups_drop(0);
}

/*
 * A savepoint rolled back may have taken an ANALYZE of the pass with it; one
 * released hands its ANALYZE to the transaction around it.
 */
static void
analyze_subxact(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	HASH_SEQ_STATUS seq;
	analyzed   *a;

	(void) sub;
	(void) parent;
	(void) arg;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		groups_drop(level);
	else if (event == SUBXACT_EVENT_COMMIT_SUB && groups != NULL)
	{
		hash_seq_init(&seq, groups);
		while ((a = hash_seq_search(&seq)) != NULL)
			if (a->pending != 0 && a->level >= level)
				a->level = level - 1;
	}
}

/* the first table of a group, as it is now (InvalidOid: none by that name) */
static Oid
first_table(const char *tables)
{
	const char *comma = strchr(tables, ',');
	char	   *name = comma != NULL ? pnstrdup(tables, comma - tables) : pstrdup(tables);
	List	   *names = stringToQualifiedNameList(name);

	return RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, true);
}

void
ms_analyze(ms_pass *p, const char *tables, uint64 rows)
{
	int			nest;
	analyzed   *a;
	bool		found;
	char		key[TABLES_MAX];
	Oid			first;

	if (rows < MS_ANALYZE_ROWS)
		return;
	if (groups == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = TABLES_MAX;
		ctl.entrysize = sizeof(analyzed);
		ctl.hcxt = TopMemoryContext;
		groups = hash_create("magic_sync analysed plan tables", 16, &ctl,
							 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	if (!callbacks)
	{
		RegisterXactCallback(analyze_xact, NULL);
		RegisterSubXactCallback(analyze_subxact, NULL);
		callbacks = true;
	}
	memset(key, 0, sizeof key);
	strlcpy(key, tables, sizeof key);
	first = first_table(tables);
	a = hash_search(groups, key, HASH_ENTER, &found);
	if (!found || a->first != first)
	{
		a->rows = a->pending = 0;
		a->first = first;
	}
	else
	{
		uint64		was = a->pending != 0 ? a->pending : a->rows;

		if (was != 0 && rows <= was * ANALYZE_DRIFT && rows * ANALYZE_DRIFT >= was)
			return;
	}

	/* as a function's SET clause does: undone when ANALYZE is, or after it */
	nest = NewGUCNestLevel();
	(void) set_config_option("default_statistics_target", "10", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	ms_exec(p, psprintf("ANALYZE %s", tables), 0, NULL, NULL, NULL, 0);
	AtEOXact_GUC(true, nest);
	a->pending = rows;
	a->level = GetCurrentTransactionNestLevel();
}
