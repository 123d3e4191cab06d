/*-------------------------------------------------------------------------
 * temp.c
 *	  The pass's temporary tables: every one declared here, all created by a
 *	  session's first pass, emptied by each pass that uses one.  See temp.h.
 *
 * A pass's plan lives in temporary tables whose rows outlive the
 * transaction (ON COMMIT DELETE ROWS would truncate each, and build its
 * indexes again, at every commit of the session).  Creating one is DDL: it
 * writes the catalogs and runs the event triggers.  A session's first pass
 * creates them all, so that the first snapshot, retry or schema change a
 * worker meets hours later does none (sql/32_temp_tables.sql).  One
 * another statement dropped (DISCARD TEMP in a session calling
 * sync.relay_pass()) is created again where it is used.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/heapam.h"
#include "access/relation.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/heap.h"
#include "catalog/namespace.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "pass.h"
#include "temp.h"
#include "writer.h"

#define KEY "key text COLLATE \"C\""

typedef struct temp_table
{
	const char *name;
	const char *columns;
} temp_table;

/* by the step of the pass that fills each */
static const temp_table temp_tables[] = {
	/* observe.c: replicas dropped, or no longer live */
	{"ms_forget", "id uuid PRIMARY KEY"},
	/* batch.c: the notes read, and the rows they name */
	{"ms_notes_read", "id bigint PRIMARY KEY, tab int, source \"char\", " KEY ","
	" old_key text COLLATE \"C\", pointed jsonb, replica uuid, grp text, at tid"},
	{"ms_pending", "tab int, " KEY ", note bigint, moved boolean, PRIMARY KEY (tab, key)"},
	/* evolve.c: the schema now, and what each replica is owed of its changes */
	{"ms_schemas_now", "tab int PRIMARY KEY, name text, hash bytea, ord int"},
	{"ms_evolve", "replica uuid, kind \"char\", tab int, name text, ord int, before bigint,"
	" PRIMARY KEY (replica, tab)"},
	/* plan.c: rows held back, and what is sent and taken back */
	{"ms_blocked", "tab int, " KEY ", PRIMARY KEY (tab, key)"},
	{"ms_unplanned", "tab int, " KEY ", PRIMARY KEY (tab, key)"},
	{"ms_released", "tab int, " KEY ", PRIMARY KEY (tab, key)"},
	{"ms_send", "replica uuid, tab int, " KEY ", note bigint NOT NULL DEFAULT 0,"
	" replace boolean NOT NULL DEFAULT false, fresh boolean NOT NULL DEFAULT false,"
	/* the held row's address as the plan looked it up, where it did (record.c) */
	" held tid, PRIMARY KEY (tab, key, replica)"},
	{"ms_take", "replica uuid, tab int, " KEY ", PRIMARY KEY (tab, key, replica)"},
	/* wanted.c: wanted sets, and the rows each round adds */
	{"ms_wanted", "replica uuid, tab int, " KEY ", PRIMARY KEY (replica, tab, key)"},
	{"ms_wanted_replicas", "id uuid PRIMARY KEY, partition text"},
	{"ms_wanted_delta0", "replica uuid, tab int, " KEY},
	{"ms_wanted_delta1", "replica uuid, tab int, " KEY},
	/* fast.c: changed rows whose replicas a lookup finds */
	{"ms_fast", "tab int, " KEY ", note bigint, PRIMARY KEY (tab, key)"},
	/* question.c: the rows in question, and the rounds that grow them */
	{"ms_inc_replicas", "id uuid PRIMARY KEY, partition text"},
	{"ms_changed", "tab int, " KEY ", PRIMARY KEY (tab, key)"},
	{"ms_changed_parents", "tab int, " KEY},
	{"ms_inplace", "tab int, " KEY ", PRIMARY KEY (tab, key)"},
	{"ms_q", "replica uuid, tab int, " KEY ", PRIMARY KEY (replica, tab, key)"},
	{"ms_qd0", "replica uuid, tab int, " KEY},
	{"ms_qd1", "replica uuid, tab int, " KEY},
	/* the rows a replica may keep or not (ms_qc), their chains of parents, those it certainly keeps */
	{"ms_qc", "replica uuid, tab int, " KEY ", PRIMARY KEY (replica, tab, key)"},
	{"ms_chain", "replica uuid, tab int, " KEY ", PRIMARY KEY (replica, tab, key)"},
	{"ms_certain", "replica uuid, tab int, " KEY ", PRIMARY KEY (replica, tab, key)"},
	{"ms_cand", "replica uuid, tab int, " KEY ", PRIMARY KEY (replica, tab, key)"},
	{"ms_cand_rows", "tab int, " KEY ", PRIMARY KEY (tab, key)"},
	{"ms_n", "replica uuid, tab int, " KEY ", PRIMARY KEY (replica, tab, key)"},
	{"ms_nd0", "replica uuid, tab int, " KEY},
	{"ms_nd1", "replica uuid, tab int, " KEY},
	{"ms_kd", "replica uuid, tab int, " KEY},
	/* retry.c: refused rows due again */
	{"ms_retry", "replica uuid, tab int, " KEY ", note bigint, PRIMARY KEY (tab, key, replica)"},
	/* relay.c, record.c: the replicas written to, and each message's rows */
	{"ms_written", "id uuid PRIMARY KEY, messages bigint, bytes bigint"},
	{"ms_segments", "replica uuid, tab int, kind \"char\","
	" first_key text COLLATE \"C\", last_key text COLLATE \"C\", number bigint, rows int"},
	/* evolve.c: the replicas a snapshot provisioned */
	{"ms_provisioned", "id uuid PRIMARY KEY, number bigint"},
};

/*
 * The reads' own (src/pg/read): created by the read that first uses one in a
 * session, never by a pass, which has no use for them.
 */
static const temp_table read_tables[] = {
	/* why.c: each wanted row reached from a rule, and the row it was reached from */
	{"ms_why", "tab int, " KEY ", depth int, from_tab int, from_key text COLLATE \"C\", relation text,"
	" PRIMARY KEY (tab, key)"},
	{"ms_why_from", "replica uuid, tab int, " KEY ", PRIMARY KEY (replica)"},
	/* why.c: the rows the row asked about is reached from, by how many links back */
	{"ms_why_back", "tab int, " KEY ", level int, PRIMARY KEY (tab, key)"},
	{"ms_why_cand", "replica uuid, tab int, " KEY ", PRIMARY KEY (replica, tab, key)"},
};

/* this session's pg_temp.name, InvalidOid when it has none */
static Oid
temp_relid(const char *name)
{
	return RangeVarGetRelid(makeRangeVar("pg_temp", (char *) name, -1), NoLock, true);
}

/*
 * The pages of a temporary relation, as its storage manager last knew them:
 * a system call fewer each (two or three a table, every pass; issue 37).
 * PostgreSQL 15 keeps the last size it learnt of a file, and what extends or
 * truncates it through the storage manager keeps that right, or forgets it;
 * it trusts it only in recovery, as another backend may extend a shared
 * relation.  No other backend writes this session's temporary relations,
 * and nothing changes their files' sizes but this backend's storage
 * manager: the size kept is the file's.  Unknown (a file opened anew), it
 * is asked, and kept from then on.
 */
static BlockNumber
temp_blocks(Relation rel)
{
	BlockNumber known = RelationGetSmgr(rel)->smgr_cached_nblocks[MAIN_FORKNUM];

	Assert(rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP);
	if (known != InvalidBlockNumber)
		return known;
	return RelationGetNumberOfBlocks(rel);
}

/*
 * the pages of a temporary table and its indexes.  A table of no page had
 * no row since it was made or truncated: its indexes are their metapages,
 * and nothing analysed it (ms_analyze takes no statistics of a few rows).
 * Most of a small pass's tables are so, and each index's size is a
 * system call (bench/passcost.py, issue 37).
 */
static int64
temp_pages(Oid relid)
{
	Relation	rel;
	List	   *indexes;
	ListCell   *lc;
	int64		pages;

	rel = relation_open(relid, AccessShareLock);
	pages = temp_blocks(rel);
	if (pages == 0)
	{
		relation_close(rel, AccessShareLock);
		return 0;
	}
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		Relation	idx = relation_open(lfirst_oid(lc), AccessShareLock);

		/* an empty btree is its metapage */
		pages += temp_blocks(idx) - 1;
		relation_close(idx, AccessShareLock);
	}
	list_free(indexes);
	relation_close(rel, AccessShareLock);
	return pages;
}

static const temp_table *
find(const char *name)
{
	for (size_t i = 0; i < lengthof(temp_tables); i++)
		if (strcmp(temp_tables[i].name, name) == 0)
			return &temp_tables[i];
	for (size_t i = 0; i < lengthof(read_tables); i++)
		if (strcmp(read_tables[i].name, name) == 0)
			return &read_tables[i];
	elog(ERROR, "magic_sync: no temporary table \"%s\" is declared", name);
	return NULL;				/* keep the compiler quiet */
}

static void
create(ms_executor *x, const temp_table *t)
{
	ms_exec(x, psprintf("CREATE TEMP TABLE %s (%s)", t->name, t->columns), 0, NULL, NULL, NULL, 0);
}

/*
 * Whether every table of temp_tables was found, and no relation changed
 * since (a pg_class invalidation: a table dropped, DISCARD TEMP, or the
 * transaction that created them rolled back): then a pass looks up none of
 * their ~35 names (0.9-1.6 % of a one-row pass, issue 37).
 */
static bool tables_known = false;
static bool tables_watched = false;

void
ms_temp_tables(ms_executor *x)
{
	if (!tables_watched)
	{
		ms_on_relation_change(&tables_known);
		tables_watched = true;
	}
	/* invalidations come in as a transaction starts, or as a lock is taken */
	AcceptInvalidationMessages();
	if (tables_known)
		return;
	/* a name looked up in the catalog cache each: a pass after the first creates none */
	for (size_t i = 0; i < lengthof(temp_tables); i++)
		if (!OidIsValid(temp_relid(temp_tables[i].name)))
			create(x, &temp_tables[i]);
	/* those created now are known once their transaction commits: until then a rollback may take them */
	tables_known = true;
	for (size_t i = 0; i < lengthof(temp_tables) && tables_known; i++)
		tables_known = OidIsValid(temp_relid(temp_tables[i].name));
}

/*
 * Delete every row of a temporary table, as DELETE FROM would: a statement
 * of its own cost a pass its plan's revalidation, an executor's start and
 * end and the result relation's indexes opened, about ten times a pass for
 * a handful of rows (bench/passcost.py, issue 37).  The table is this
 * session's, written only by this session's transactions: the rows it may
 * delete are those SnapshotSelf sees (committed, or this transaction's so
 * far); nothing else waits on them, no trigger or rule is on them, and a
 * deletion leaves the indexes alone, as the statement's would.
 */
static void
delete_rows(Oid relid)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;

	/* the rows the statements before this one wrote */
	CommandCounterIncrement();
	rel = table_open(relid, RowExclusiveLock);
	if (rel->rd_rel->relpersistence != RELPERSISTENCE_TEMP)
		elog(ERROR, "magic_sync: \"%s\" is not a temporary table", RelationGetRelationName(rel));
	scan = table_beginscan(rel, SnapshotSelf, 0, NULL);
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
		simple_heap_delete(rel, &tuple->t_self);
	table_endscan(scan);
	table_close(rel, RowExclusiveLock);
	/* the statements after this one see them gone */
	CommandCounterIncrement();
}

/* empty pg_temp.name, whose oid is relid */
static void
empty(ms_executor *x, const char *name, Oid relid)
{
	int64		pages = temp_pages(relid);

	/*
	 * DELETE leaves its dead rows to be pruned as pages are read again, and
	 * their index entries: a table that grew past a few pages (a large pass
	 * filled it, or small ones added up) gets new files instead.  Nothing
	 * vacuums a temporary table.
	 */
	if (pages == 0)
		return;
	if (pages > MS_TEMP_PAGES)
		ms_exec(x, psprintf("TRUNCATE pg_temp.%s", name), 0, NULL, NULL, NULL, 0);
	else
		delete_rows(relid);

	/*
	 * The statistics a large pass took of what it put here (ms_analyze) go
	 * with its rows.  They describe that pass alone -- one replica's 60,000
	 * refused rows sent again: every row of one replica and one table -- and
	 * neither TRUNCATE nor DELETE forgets them: every small pass after it
	 * was planned by them (another replica's rows "never there"), until the
	 * next large one, its one-row changes costing a third more
	 * (bench/refused.py).  The table is planned again as a session's first
	 * pass plans it: unanalysed, as large as its pages hold.
	 */
	if (SearchSysCacheExists3(STATRELATTINH, ObjectIdGetDatum(relid), Int16GetDatum(1), BoolGetDatum(false)))
	{
		RemoveStatistics(relid, 0);
		CacheInvalidateRelcacheByRelid(relid);
		CommandCounterIncrement();
	}
}

void
ms_temp_empty(ms_executor *x, const char *name)
{
	Oid			relid = temp_relid(name);

	if (OidIsValid(relid))
		empty(x, name, relid);
}

void
ms_temp_table(ms_executor *x, const char *name)
{
	const temp_table *t = find(name);
	Oid			relid = temp_relid(name);

	if (!OidIsValid(relid))
		create(x, t);
	else
		empty(x, name, relid);
}
