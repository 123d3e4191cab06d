/*-------------------------------------------------------------------------
 * heldrows.c
 *	  What the messages a pass records carry, recorded as held (sync.held,
 *	  sync.carried): from the segments set by set; the held rows of a table
 *	  read whole buffered as their messages are written, or kept by the
 *	  worker for after its pass (ms_record_held_later), and written to
 *	  sync.held a page at a time, as COPY writes rows (heap_multi_insert),
 *	  and then to its indexes.
 *
 * An INSERT ... SELECT of them wrote a heap record and ran the executor for
 * each row: a million rows of a first sync's were two fifths of what
 * recording them cost.  Only for rows with no note to look up (this file
 * asks the batch's notes by a join otherwise), and only while sync.held is
 * as this build knows it (its columns, no trigger, no rule); else the
 * caller writes them by SQL.  A row held already fails its unique index as
 * the INSERT's would (insert_held makes that a serialization failure).
 *
 * Then the two B-tree inserts of each row were four fifths of what was
 * left (perf of bench/firstsync.py at 10^6): the rows go in the order of
 * held_pkey and held_row, (replica, tab, key) in "C" order, not in the
 * table's key order (a bigint's text is not in its numeric order), so that
 * each insert lands next to the one before, on a page still in the CPU's
 * caches, and a page fills before it splits (an INSERT ... SELECT of 10^6
 * such rows, ordered so: 6,072 pages of held_pkey instead of 10,725, 308 MB
 * of WAL instead of 379, a third less CPU; the snapshot's rows kept for
 * after the pass are sorted whole, ms_record_held_later; those written in
 * the pass, a batch at a time).  And a partial index whose predicate reads
 * only columns every row written here has alike (held_taken, held_refused,
 * held_replace: none of these rows is in them) is asked once, not per row.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/nbtree.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "storage/indexfsm.h"
#include "storage/smgr.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/uuid.h"

#include "heldrows.h"
#include "record.h"
#include "recorder.h"
#include "sent.h"
#include "settings.h"
#include "writer.h"

/* rows buffered for one heap_multi_insert: as COPY's MAX_BUFFERED_TUPLES */
#define HELD_PAGE_ROWS 1000

/* sync.held's columns, in order, as this build writes them */
static const struct
{
	const char *name;
	Oid			type;
}			held_columns[] =
{
	{"replica", UUIDOID},
	{"tab", INT4OID},
	{"key", TEXTOID},
	{"note", INT8OID},
	{"number", INT8OID},
	{"taken", INT8OID},
	{"refused", TEXTOID},
	{"since", INT8OID},
	{"replace", BOOLOID},
};

/* whether rel is sync.held as held_columns says, with nothing that runs on insert */
static bool
as_known(Relation rel)
{
	const char *names[lengthof(held_columns)];

	for (int i = 0; i < (int) lengthof(held_columns); i++)
		names[i] = held_columns[i].name;
	/* no trigger at all, not even a foreign key's: none is checked here */
	if (rel->trigdesc != NULL || !ms_rel_plain(rel, names, lengthof(held_columns)))
		return false;
	for (int i = 0; i < (int) lengthof(held_columns); i++)
		if (TupleDescAttr(RelationGetDescr(rel), i)->atttypid != held_columns[i].type)
			return false;
	return true;
}

/* the columns every row ms_held_insert writes has alike: note 0, taken and refused NULL, replace false */
static const AttrNumber alike_columns[] = {4, 6, 7, 9};

/* a row of ms_held_insert's, by its index, for sorting */
typedef struct held_order
{
	const Datum *replicas;
	const Datum *tabs;
	const Datum *keys;
} held_order;

/* two rows in sync.held's index order: (replica, tab, key), the key in "C" order */
static int
held_cmp(const void *a, const void *b, void *arg)
{
	const held_order *o = arg;
	int			i = *(const int *) a;
	int			j = *(const int *) b;
	int			c = memcmp(DatumGetUUIDP(o->replicas[i]), DatumGetUUIDP(o->replicas[j]), UUID_LEN);
	text	   *x,
			   *y;
	int			lx,
				ly;

	if (c != 0)
		return c;
	if (DatumGetInt32(o->tabs[i]) != DatumGetInt32(o->tabs[j]))
		return DatumGetInt32(o->tabs[i]) < DatumGetInt32(o->tabs[j]) ? -1 : 1;
	x = DatumGetTextPP(o->keys[i]);
	y = DatumGetTextPP(o->keys[j]);
	lx = VARSIZE_ANY_EXHDR(x);
	ly = VARSIZE_ANY_EXHDR(y);
	c = memcmp(VARDATA_ANY(x), VARDATA_ANY(y), Min(lx, ly));
	return c != 0 ? c : (lx > ly) - (lx < ly);
}

/*
 * leave_out_alike: rri's partial indexes whose predicate reads only
 * alike_columns, asked once of a row written here (slot): those it leaves
 * out, none of the rows does either, so they are closed and taken out of
 * rri, and ExecInsertIndexTuples asks the rest per row as always.
 */
static void
leave_out_alike(ResultRelInfo *rri, EState *estate, TupleTableSlot *slot)
{
	ExprContext *econtext = GetPerTupleExprContext(estate);
	int			kept = 0;

	econtext->ecxt_scantuple = slot;
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		IndexInfo  *ii = rri->ri_IndexRelationInfo[i];
		Bitmapset  *read = NULL;
		bool		alike = ii->ii_Predicate != NIL;
		int			k = -1;

		if (alike)
		{
			pull_varattnos((Node *) ii->ii_Predicate, 1, &read);
			while (alike && (k = bms_next_member(read, k)) >= 0)
			{
				AttrNumber	att = k + FirstLowInvalidHeapAttributeNumber;
				bool		found = false;

				for (int c = 0; c < (int) lengthof(alike_columns); c++)
					found |= alike_columns[c] == att;
				alike = found;
			}
		}
		if (alike && !ExecQual(ExecPrepareQual(ii->ii_Predicate, estate), econtext))
		{
			index_close(rri->ri_IndexRelationDescs[i], RowExclusiveLock);
			continue;
		}
		rri->ri_IndexRelationDescs[kept] = rri->ri_IndexRelationDescs[i];
		rri->ri_IndexRelationInfo[kept++] = ii;
	}
	rri->ri_NumIndices = kept;
	ResetPerTupleExprContext(estate);
}

/*
 * fsm_made: a B-tree's free space map made when it has none.  An index has
 * none until a VACUUM frees one of its pages, and a split asks the map for
 * a free page (GetFreeIndexPage): a map found missing is looked for on disk
 * again at each ask, a failed open() a split (12,162 for a first sync's
 * million held rows, strace of bench/firstsync.py).  Its metapage marked
 * used, which it is, makes the map: a split then reads its root page in
 * shared buffers.
 */
static void
fsm_made(Relation index)
{
	if (index->rd_rel->relam == BTREE_AM_OID && !smgrexists(RelationGetSmgr(index), FSM_FORKNUM))
		RecordUsedIndexPage(index, BTREE_METAPAGE);
}

/*
 * sync.held open for ms_held_insert, kept across a recorder's writes of
 * HELD_BATCH rows: a snapshot's million held rows were 122 of them, each
 * opening the table and its indexes and making a thousand slots again.
 */
struct ms_held_writer
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	BulkInsertState bistate;
	TupleTableSlot **slots;
	bool		asked;			/* leave_out_alike asked */
};

ms_held_writer *
ms_held_open(void)
{
	Oid			relid = get_relname_relid("held", get_namespace_oid("sync", false));
	Relation	rel;
	ms_held_writer *w;

	if (!OidIsValid(relid))
		return NULL;
	/* what the INSERT would have been checked for */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) != ACLCHECK_OK)
		return NULL;
	rel = table_open(relid, RowExclusiveLock);
	if (!as_known(rel))
	{
		table_close(rel, RowExclusiveLock);
		return NULL;
	}
	w = palloc0(sizeof(ms_held_writer));
	w->rel = rel;
	w->estate = CreateExecutorState();
	w->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->rri, rel, 1, NULL, 0);
	ExecOpenIndices(w->rri, false);
	for (int i = 0; i < w->rri->ri_NumIndices; i++)
		fsm_made(w->rri->ri_IndexRelationDescs[i]);
	w->bistate = GetBulkInsertState();
	w->slots = palloc(sizeof(TupleTableSlot *) * HELD_PAGE_ROWS);
	for (int i = 0; i < HELD_PAGE_ROWS; i++)
		w->slots[i] = table_slot_create(rel, NULL);
	return w;
}

void
ms_held_close(ms_held_writer *w)
{
	for (int i = 0; i < HELD_PAGE_ROWS; i++)
		ExecDropSingleTupleTableSlot(w->slots[i]);
	pfree(w->slots);
	FreeBulkInsertState(w->bistate);
	ExecCloseIndices(w->rri);
	FreeExecutorState(w->estate);
	table_close(w->rel, NoLock);
	pfree(w);
}

void
ms_held_insert(ms_held_writer *w, int n, const Datum *replicas, const Datum *tabs, const Datum *keys,
			   const Datum *numbers)
{
	/* the statements run since the last write see these rows as the INSERT's (a command of its own) */
	CommandId	cid = GetCurrentCommandId(true);
	int			done = 0;
	int		   *order;
	held_order	o = {replicas, tabs, keys};

	/* in the indexes' order (above) */
	order = palloc(sizeof(int) * Max(n, 1));
	for (int i = 0; i < n; i++)
		order[i] = i;
	qsort_arg(order, n, sizeof(int), held_cmp, &o);

	while (done < n)
	{
		int			k = Min(n - done, HELD_PAGE_ROWS);

		for (int i = 0; i < k; i++)
		{
			TupleTableSlot *slot = w->slots[i];
			int			row = order[done + i];

			ExecClearTuple(slot);
			memset(slot->tts_isnull, false, sizeof(bool) * lengthof(held_columns));
			slot->tts_values[0] = replicas[row];
			slot->tts_values[1] = tabs[row];
			slot->tts_values[2] = keys[row];
			slot->tts_values[3] = Int64GetDatum(0);
			slot->tts_values[4] = numbers[row];
			slot->tts_isnull[5] = true;
			slot->tts_isnull[6] = true;
			slot->tts_values[7] = numbers[row];
			slot->tts_values[8] = BoolGetDatum(false);
			ExecStoreVirtualTuple(slot);
		}
		table_multi_insert(w->rel, w->slots, k, cid, 0, w->bistate);
		if (!w->asked)
			leave_out_alike(w->rri, w->estate, w->slots[0]);
		w->asked = true;
		for (int i = 0; i < k; i++)
		{
			ResetPerTupleExprContext(w->estate);
			/* a unique index's conflict is raised here, as the INSERT's is */
			(void) ExecInsertIndexTuples(w->rri, w->slots[i], w->estate, false, false, NULL, NIL);
		}
		done += k;
	}
	pfree(order);
}

static void insert_held(ms_pass *p, const char *sql, int nargs, Oid *types, Datum *values);
static bool insert_held_direct(recorder *r);

/*
 * write_held: the held rows of tables read whole buffered so far.  A row
 * held already is one recorded since the pass's snapshot: insert_held
 * makes it a serialization failure.  Its note is the newest the batch has
 * of it, as the plan's rows' (plan.c).
 */
void
ms_write_held(recorder *r)
{
	static const Oid elem[4] = {UUIDOID, INT4OID, TEXTOID, INT8OID};
	Oid			types[4] = {UUIDARRAYOID, INT4ARRAYOID, TEXTARRAYOID, INT8ARRAYOID};
	Datum		arrays[4];
	MemoryContext old;

	if (r->nheld == 0)
		return;
	old = MemoryContextSwitchTo(r->held_cxt);
	/* with no note to look up, a page at a time (heldrows.c) */
	if (!r->noted && insert_held_direct(r))
	{
		r->held_whole += (uint64) r->nheld;
		r->nheld = 0;
		MemoryContextSwitchTo(old);
		MemoryContextReset(r->held_cxt);
		return;
	}
	for (int c = 0; c < 4; c++)
		arrays[c] = ms_batch_array(r->held[c], r->nheld, elem[c]);
	/* the arrays read in step, a row at a time (in FROM, unnest would gather them first) */
	insert_held(r->p, r->noted
				? "INSERT INTO sync.held (replica, tab, key, note, number, since)"
				" SELECT u.replica, u.tab, u.key, coalesce(n.note, 0), u.number, u.number"
				"   FROM (SELECT unnest($1) AS replica, unnest($2) AS tab, unnest($3) COLLATE \"C\" AS key,"
				"                unnest($4) AS number) u"
				"   LEFT JOIN pg_temp.ms_pending n ON n.tab = u.tab AND n.key = u.key"
				: "INSERT INTO sync.held (replica, tab, key, number, since)"
				" SELECT unnest($1), unnest($2), unnest($3), unnest($4), unnest($4)",
				4, types, arrays);
	if (SPI_processed != (uint64) r->nheld)
		elog(ERROR, "magic_sync: %llu held rows were recorded of %d rows sent whole",
			 (unsigned long long) SPI_processed, r->nheld);
	r->held_whole += SPI_processed;
	r->nheld = 0;
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->held_cxt);
}

void
ms_held_written(recorder *r)
{
	if (r->held_writer != NULL)
		ms_held_close(r->held_writer);
	r->held_writer = NULL;
	r->held_opened = false;
}

/* held_add: one held row of a table read whole, buffered; id is not copied */
static void
held_add(recorder *r, const pg_uuid_t *id, int tab, const char *key, int64 number)
{
	MemoryContext old;
	int			i;

	if (r->nheld == HELD_BATCH)
		ms_write_held(r);
	old = MemoryContextSwitchTo(r->held_cxt);
	i = r->nheld++;
	r->held[0][i] = UUIDPGetDatum(id);
	r->held[1][i] = Int32GetDatum(tab);
	r->held[2][i] = CStringGetTextDatum(key);
	r->held[3][i] = Int64GetDatum(number);
	MemoryContextSwitchTo(old);
}

/*
 * A message's held rows of tables read whole, kept by a worker's pass for
 * after its commit (ms_record_held_later): its keys as its target had them,
 * copied once, and its whole segments' tables and rows.
 */
typedef struct later_message
{
	pg_uuid_t	replica;
	int64		number;
	int			nsegs;
	int		   *tabs;
	int		   *rows;
	char	   *keys;			/* each ending in a NUL, in the segments' order */
} later_message;

/* what a message kept costs beside its keys: its struct, its list cell, their chunks' headers */
#define LATER_OVERHEAD (sizeof(later_message) + 64)

/* what a worker's pass keeps for after its commit, in its memory (p->exec.cxt outlives the transaction) */
struct ms_held_later
{
	List	   *messages;		/* later_message * */
	Size		bytes;			/* their keys, bounded by magic_sync.fill_bytes */
	bool		noted;			/* a held row looks up its note in pg_temp.ms_pending */
	Oid			outbox;			/* sync.outbox, as sent.c names it (ms_held_later_pulled) */
};

/*
 * later_keep: tg's message number's held rows of tables read whole, kept
 * for after the pass when it is the worker's and they fit under the bound
 * (magic_sync.fill_bytes, as the messages being filled are); the rest are
 * written in the pass.  True when kept.
 */
static bool
later_keep(recorder *r, target *tg, int64 number)
{
	ms_pass    *p = r->p;
	ms_pass_later *later = r->did != NULL ? &r->did->later : NULL;
	MemoryContext old;
	later_message *m;
	ListCell   *lc;
	int			n = 0;
	int64		rows = 0;

	if (later == NULL || !r->in->held_later || tg->whole_keys.len == 0 ||
		(later->kept != NULL && later->kept->bytes + tg->whole_keys.len + LATER_OVERHEAD > (Size) ms_fill_bytes * 1024))
		return false;
	old = MemoryContextSwitchTo(p->exec.cxt);
	if (later->kept == NULL)
	{
		later->kept = palloc0(sizeof(struct ms_held_later));
		later->kept->noted = r->noted;
		later->kept->outbox = get_relname_relid("outbox", get_namespace_oid("sync", false));
	}
	m = palloc(sizeof(later_message));
	m->replica = tg->id;
	m->number = number;
	foreach(lc, tg->segments)
		n += ((segment *) lfirst(lc))->whole ? 1 : 0;
	m->nsegs = 0;
	m->tabs = palloc(sizeof(int) * n);
	m->rows = palloc(sizeof(int) * n);
	foreach(lc, tg->segments)
	{
		segment    *s = lfirst(lc);

		if (!s->whole)
			continue;
		m->tabs[m->nsegs] = s->tab;
		m->rows[m->nsegs++] = s->rows;
		rows += s->rows;
	}
	m->keys = palloc(tg->whole_keys.len);
	memcpy(m->keys, tg->whole_keys.data, tg->whole_keys.len);
	later->kept->messages = lappend(later->kept->messages, m);
	later->kept->bytes += tg->whole_keys.len + LATER_OVERHEAD + 2 * sizeof(int) * n;
	later->rows += rows;
	/* counted as recorded: the pass checks its segments against them (held_of_snapshots) */
	r->held_whole += (uint64) rows;
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * ms_held_later_pulled: whether every message whose held rows were kept for
 * after the pass was pulled (sent.c: its replica's last pull returned it or
 * a later one); *pulled, how many were, for the caller to see the pulls
 * move on.  Outside a transaction: shared memory only.  A replica whose
 * pulls the table forgot (not preloaded, its slot taken) reads as not
 * pulled.
 */
bool
ms_held_later_pulled(const ms_pass_later *later, int *pulled)
{
	ListCell   *lc;
	int			n = 0;

	*pulled = 0;
	if (later->kept == NULL)
		return true;
	foreach(lc, later->kept->messages)
	{
		later_message *m = lfirst(lc);
		int64		through,
					body;

		if (ms_sent_last(&m->replica, later->kept->outbox, &through, &body) && through >= m->number)
			n++;
	}
	*pulled = n;
	return n == list_length(later->kept->messages);
}

int
ms_held_later_messages(const ms_pass_later *later)
{
	return later->kept == NULL ? 0 : list_length(later->kept->messages);
}

/* held_of_whole: the held rows of tg's message number, of its whole segments, buffered or kept */
void
ms_held_of_whole(recorder *r, target *tg, int64 number)
{
	const char *key = tg->whole_keys.data;
	ListCell   *lc;

	if (later_keep(r, tg, number))
		return;
	foreach(lc, tg->segments)
	{
		segment    *s = lfirst(lc);

		if (!s->whole)
			continue;
		for (int k = 0; k < s->rows; k++)
		{
			/* the target's own id: a hash table's entries never move */
			held_add(r, &tg->id, s->tab, key, number);
			key += strlen(key) + 1;
		}
	}
	Assert(key == tg->whole_keys.data + tg->whole_keys.len);
}

/*
 * What a held row (old) of a row sent again (new: its note and message
 * number) is set to.  A row coming back after it was being let go is a row
 * made again: since now.
 */
static char *
sent_again(const char *new, const char *old)
{
	return psprintf("note = %s.note, number = %s.number, taken = NULL, refused = NULL, replace = false,"
					" since = CASE WHEN %s.taken IS NOT NULL THEN %s.number ELSE %s.since END",
					new, new, old, new, old);
}

/* a write of held rows: by SQL, or a recorder's buffered rows by heldrows.c */
typedef struct held_write
{
	ms_pass    *p;
	const char *sql;			/* by SQL, with these arguments; or */
	int			nargs;
	Oid		   *types;
	Datum	   *values;
	recorder   *r;				/* r's rows buffered, by heldrows.c */
	bool		done;			/* heldrows.c wrote them */
} held_write;

static void
held_write_run(held_write *w)
{
	recorder   *r = w->r;

	if (r != NULL)
	{
		if (!r->held_opened)
		{
			/* beside the recorder, not in held_cxt, which each write resets */
			MemoryContext old = MemoryContextSwitchTo(MemoryContextGetParent(r->held_cxt));

			r->held_writer = ms_held_open();
			r->held_opened = true;
			MemoryContextSwitchTo(old);
		}
		if (r->held_writer != NULL)
			ms_held_insert(r->held_writer, r->nheld, r->held[0], r->held[1], r->held[2], r->held[3]);
		w->done = r->held_writer != NULL;
	}
	else
		ms_exec(&w->p->exec, w->sql, w->nargs, w->types, w->values, NULL, 0);
}

static void insert_held_as(held_write *w);

/*
 * The held rows of rows the plan found held by no replica, inserted: one
 * there now was recorded since the pass's snapshot (sync.file's of a row the
 * replica uploaded, while a pass by hand ran on an older snapshot), a write
 * the pass did not see.  As an update of a row changed since is, it is a
 * serialization failure, transient: the pass is run again, nothing parked.
 */
static void
insert_held(ms_pass *p, const char *sql, int nargs, Oid *types, Datum *values)
{
	held_write	w = {p, sql, nargs, types, values, NULL, false};

	insert_held_as(&w);
}

/* r's buffered held rows, by heldrows.c: false when it cannot, and they go by SQL */
static bool
insert_held_direct(recorder *r)
{
	held_write	w = {r->p, NULL, 0, NULL, NULL, r, false};

	insert_held_as(&w);
	return w.done;
}

static void
held_write_any(void *w)
{
	held_write_run(w);
}

static void
insert_held_as(held_write *w)
{
	ms_unique_as_conflict(held_write_any, w,
						  "magic_sync: a row the pass found held by no replica was recorded held since the pass's snapshot",
						  "Run the pass again: it sees the held row then.");
}

/* what each message carries per table, (replica, tab, number, rows) as select gives them, added to sync.carried */
#define CARRIED_ADD(select) \
	"INSERT INTO sync.carried (replica, tab, number, rows) " select \
	" ON CONFLICT (replica, tab, number) DO UPDATE SET rows = sync.carried.rows + EXCLUDED.rows"

char *
ms_held_addressed(const char *segments, const char *filter, bool has_carried)
{
	return psprintf("e AS MATERIALIZED (SELECT s.held, s.replica, s.tab, s.key, s.note, g.number FROM %s g"
					"  JOIN pg_temp.ms_send s ON s.tab = g.tab AND s.key >= g.first_key"
					"   AND s.key <= g.last_key AND s.replica = g.replica"
					" WHERE g.kind = 'u'%s AND NOT s.fresh AND s.held IS NOT NULL),"
					" h AS (UPDATE sync.held h SET %s FROM e"
					"  WHERE h.ctid = e.held AND h.replica = e.replica AND h.tab = e.tab AND h.key = e.key"
					"  RETURNING h.replica, h.tab, e.number),"
					" c AS (%s)",
					segments, filter, sent_again("e", "h"),
					has_carried ? CARRIED_ADD("SELECT replica, tab, number, count(*) FROM h GROUP BY replica, tab, number")
					: "SELECT count(*) FROM h");
}

void
ms_held_addressed_check(int64 expected, int64 updated)
{
	if (updated != expected)
		elog(ERROR, "magic_sync: %lld of %lld held rows were where the plan found them",
			 (long long) updated, (long long) expected);
}

/*
 * The held rows of the replicas provisioned: every row of their segments,
 * inserted, and what each message carries per table counted as it was
 * packed (segment.rows), not again from the rows inserted: a RETURNING
 * of every row of a snapshot, grouped, held work_mem twice over (4 of a 10^6
 * row snapshot's 13 MB) and took a fifth of the insert's time at 3 x 10^5.
 * The two counts are checked against each other.
 */
static void
held_of_snapshots(ms_pass *p, bool has_carried, ArrayType *provisioning, const char *segment_rows, uint64 whole)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(provisioning)};
	uint64		inserted;
	int64		packed;
	bool		isnull;

	insert_held(p, psprintf("INSERT INTO sync.held (replica, tab, key, note, number, since) "
							"SELECT s.replica, s.tab, s.key, s.note, g.number, g.number %s"
							"   AND g.replica = ANY ($1)", segment_rows),
				1, types, values);
	inserted = SPI_processed + whole;
	ms_exec(&p->exec, psprintf("WITH c AS (SELECT replica, tab, number, sum(rows) AS rows FROM pg_temp.ms_segments"
						"  WHERE kind = 'u' AND replica = ANY ($1) GROUP BY replica, tab, number)%s"
						" SELECT coalesce(sum(rows), 0)::bigint FROM c",
						has_carried ? ", i AS (" CARRIED_ADD("SELECT * FROM c") ")" : ""),
			1, types, values, NULL, 0);
	packed = DatumGetInt64(ms_value(0, 1, &isnull));
	if ((int64) inserted != packed)
		elog(ERROR, "magic_sync: a snapshot's messages carry %lld rows, and %llu held rows were recorded of them",
			 (long long) packed, (unsigned long long) inserted);
}

/*
 * sync.held from the segments: what each message carries, set by set.  A
 * replica being provisioned holds nothing yet, and a row the plan found no
 * held version of for its replica (fresh, fast.c) is held by it nowhere:
 * their rows go in without the cost of looking for a conflict.  A row sent
 * again updates only columns no index has (a HOT update): by the address the
 * plan found its held row at, where it looked one up (question.c, fast.c),
 * with no descent of held_pkey and no lock taken before the update, as an
 * upsert's is; otherwise (a plan of rows compared whole, rows refused sent
 * again) by an upsert.  The plan and the recording see one snapshot and
 * nothing in between writes held rows, so the address is the row's: a
 * concurrent write of it fails the update, as it fails the upsert.  What
 * each message carries per table goes to sync.carried, which the reads count
 * instead of the held rows.
 */
void
ms_record_held(ms_pass *p, bool has_carried, bool trim_carried, ArrayType *provisioning,
			   uint64 segments, uint64 whole, const ms_planned *plan, bool addressed_done)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(provisioning)};
	const char *carried = has_carried
		? CARRIED_ADD("SELECT replica, tab, number, count(*) FROM h GROUP BY replica, tab, number")
		: "SELECT count(*) FROM h";
	const char *segment_rows = "FROM pg_temp.ms_segments g"
		"  JOIN pg_temp.ms_send s ON s.tab = g.tab AND s.key >= g.first_key"
		"   AND s.key <= g.last_key AND s.replica = g.replica"
		" WHERE g.kind = 'u'";
	bool		isnull;
	bool		provisioned = ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning)) > 0;
	/* which of the three kinds the plan has (plan.c): each spares the others a read of every segment's rows */
	bool		fresh = plan->fresh,
				addressed = plan->addressed,
				unaddressed = plan->unaddressed;

	/* a few segments, each a range of ms_send's key index: the planner must know, when ms_send is large */
	ms_analyze(&p->exec, "pg_temp.ms_segments", plan->planned >= MS_ANALYZE_ROWS ? Max(segments, MS_ANALYZE_ROWS) : segments);
	if (provisioned)
		held_of_snapshots(p, has_carried, provisioning, segment_rows, whole);
	if (fresh)
		insert_held(p, psprintf(
				"WITH h AS (INSERT INTO sync.held (replica, tab, key, note, number, since) "
				"SELECT s.replica, s.tab, s.key, s.note, g.number, g.number %s"
				"   AND NOT g.replica = ANY ($1) AND s.fresh RETURNING replica, tab, number) %s",
				segment_rows, carried),
				1, types, values);
	if (addressed && !addressed_done)
	{
		ms_exec(&p->exec, psprintf("WITH %s SELECT (SELECT count(*) FROM e), (SELECT count(*) FROM h)",
								   ms_held_addressed("pg_temp.ms_segments", "   AND NOT g.replica = ANY ($1)", has_carried)),
				1, types, values, NULL, 0);
		ms_held_addressed_check(DatumGetInt64(ms_value(0, 1, &isnull)), DatumGetInt64(ms_value(0, 2, &isnull)));
	}
	if (unaddressed)
		ms_exec(&p->exec, psprintf(
				"WITH h AS (INSERT INTO sync.held (replica, tab, key, note, number, since) "
				"SELECT s.replica, s.tab, s.key, s.note, g.number, g.number %s"
				"   AND NOT g.replica = ANY ($1) AND NOT s.fresh AND s.held IS NULL "
				"ON CONFLICT (replica, tab, key) DO UPDATE SET %s"
				" RETURNING replica, tab, number) %s", segment_rows, sent_again("EXCLUDED", "sync.held"), carried),
				1, types, values, NULL, 0);
	/* most passes take nothing back (plan.c counted ms_take) */
	if (plan->taken > 0)
		ms_exec(&p->exec,
				"UPDATE sync.held h SET taken = g.number FROM pg_temp.ms_segments g "
				"  JOIN pg_temp.ms_take t ON t.tab = g.tab AND t.key >= g.first_key "
				"   AND t.key <= g.last_key AND t.replica = g.replica "
				" WHERE g.kind = 'd' AND h.replica = t.replica AND h.tab = t.tab AND h.key = t.key",
				0, NULL, NULL, NULL, 0);
	/*
	 * what the messages it acknowledged carried, for the replicas written to:
	 * by the primary key's prefix; only when the caller found any (record.c)
	 */
	if (trim_carried)
		ms_exec(&p->exec,
				"DELETE FROM sync.carried c USING sync.replicas r"
				" WHERE r.id IN (SELECT DISTINCT g.replica FROM pg_temp.ms_segments g)"
				"   AND c.replica = r.id AND c.number <= r.acked_number",
				0, NULL, NULL, NULL, 0);
}

/*
 * The held rows kept for after the pass are written in the indexes' order
 * (above), sorted LATER_SORT_ROWS at a time: a snapshot of up to a million
 * rows whole, in 16 MB beside its keys.
 */
#define LATER_SORT_ROWS (1 << 20)

/* a kept held row: its key, its message (an index of later_sort's), its table */
typedef struct later_row
{
	const char *key;
	uint32		message;
	int32		tab;
} later_row;

/* (replica, tab, key), the key in "C" order: as held_cmp */
static int
later_cmp(const void *a, const void *b, void *arg)
{
	const later_row *x = a;
	const later_row *y = b;
	later_message **m = arg;
	int			c = x->message == y->message ? 0
		: memcmp(&m[x->message]->replica, &m[y->message]->replica, sizeof(pg_uuid_t));

	if (c != 0)
		return c;
	if (x->tab != y->tab)
		return x->tab < y->tab ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* later_sort: rows[0..n) sorted, then buffered for sync.held */
static void
later_sort(recorder *r, later_message **m, later_row *rows, int n)
{
	qsort_arg(rows, n, sizeof(later_row), later_cmp, m);
	for (int i = 0; i < n; i++)
		held_add(r, &m[rows[i].message]->replica, rows[i].tab, rows[i].key, m[rows[i].message]->number);
}

void
ms_record_held_later(ms_pass *p, const ms_pass_later *later)
{
	recorder	r;
	ListCell   *lc;
	later_message **m;
	later_row  *rows;
	int			nm = 0;
	int			n = 0;
	int			cap = (int) Min(Max(later->rows, 1), LATER_SORT_ROWS);

	memset(&r, 0, RECORDER_CLEARED);
	r.p = p;
	r.held_cxt = AllocSetContextCreate(CurrentMemoryContext, "magic_sync held rows to write", ALLOCSET_DEFAULT_SIZES);
	r.noted = later->kept != NULL && later->kept->noted;
	m = palloc(sizeof(later_message *) * Max(list_length(later->kept != NULL ? later->kept->messages : NIL), 1));
	rows = palloc(sizeof(later_row) * cap);
	foreach(lc, later->kept != NULL ? later->kept->messages : NIL)
	{
		later_message *lm = lfirst(lc);
		const char *key = lm->keys;

		m[nm] = lm;
		for (int s = 0; s < lm->nsegs; s++)
			for (int k = 0; k < lm->rows[s]; k++)
			{
				if (n == cap)
				{
					later_sort(&r, m, rows, n);
					n = 0;
				}
				rows[n].key = key;
				rows[n].message = nm;
				rows[n++].tab = lm->tabs[s];
				key += strlen(key) + 1;
			}
		nm++;
	}
	later_sort(&r, m, rows, n);
	pfree(rows);
	pfree(m);
	ms_write_held(&r);
	ms_held_written(&r);
	if ((int64) r.held_whole != later->rows)
		elog(ERROR, "magic_sync: %llu held rows were recorded of %lld left for after the pass",
			 (unsigned long long) r.held_whole, (long long) later->rows);
	ms_exec(&p->exec, "UPDATE sync.replicas SET held_due = NULL WHERE held_due IS NOT NULL", 0, NULL, NULL, NULL, 0);
	MemoryContextDelete(r.held_cxt);
}
