/*-------------------------------------------------------------------------
 * notes.c
 *	  Noting (docs/design.md 4.1): the trigger sync.note writes one row to sync.notes
 *	  for every change of a mirrored row, in the writer's transaction, and
 *	  refuses TRUNCATE.
 *
 * Everything a trigger needs is in its arguments (their layout is
 * declare/triggers.h, which writes them), so firing never reads sync.tables.
 *
 * The arguments are resolved to attribute numbers once per trigger and
 * relation (a partition's columns may be numbered apart from its parent's)
 * and kept until a relcache invalidation.  The note is inserted directly
 * into sync.notes and its indexes, without SPI and without checking the
 * writer's rights on it: the writer needs none.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/genam.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "optimizer/optimizer.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/xid8.h"

#include "bytes.h"
#include "key.h"
#include "keys.h"
#include "notes.h"
#include "triggers.h"
#include "wake.h"

PG_FUNCTION_INFO_V1(ms_note);

/* A column the trigger reads, resolved on the firing relation. */
typedef struct note_col
{
	AttrNumber	attnum;			/* InvalidAttrNumber: not on this relation */
	FmgrInfo	out;			/* its output function: key parts are text */
	ms_key_kind kind;			/* a key part of it: spelled by ms_key_text when ms_key_spelled */
} note_col;

typedef struct note_fkey
{
	char	   *name;
	int			ncols;
	note_col   *cols;
} note_fkey;

/* One trigger on one relation, its arguments resolved. */
typedef struct note_key
{
	Oid			tgoid;
	Oid			relid;
} note_key;

typedef struct note_entry
{
	note_key	hkey;
	bool		valid;
	MemoryContext cxt;
	int32		tab;
	char		kind;
	int			nkey;
	note_col   *key;
	int			ncompare;		/* update: the columns whose change is noted */
	AttrNumber *compare;
	bool	   *byval;
	int16	   *len;
	note_col	part;
	int			nfkeys;
	note_fkey  *fkeys;
	note_col	group;
	note_col	replica;
} note_entry;

static HTAB *note_cache = NULL;

static void note_invalidate(Datum arg, Oid relid);

/* sync.notes, its sequence and where its columns are. */
typedef enum
{
	N_ID, N_TAB, N_SOURCE, N_KEY, N_PART, N_OLD_KEY, N_OLD_PART, N_POINTED,
	N_REPLICA, N_GRP, N_XID, N_BUILD, N_DONE, N_NOTED, N_COUNT
} note_field;

static const char *const note_field_names[N_COUNT] = {
	"id", "tab", "source", "key", "part", "old_key", "old_part", "pointed",
	"replica", "grp", "xid", "build", "done", "noted"
};

static Oid	notes_relid = InvalidOid;
static Oid	notes_seq = InvalidOid;
static int	notes_att[N_COUNT];

static void
notes_resolve(void)
{
	Oid			nsp;
	Relation	rel;
	TupleDesc	desc;

	if (OidIsValid(notes_relid))
		return;
	nsp = get_namespace_oid("sync", false);
	notes_seq = get_relname_relid("note_seq", nsp);
	rel = table_open(get_relname_relid("notes", nsp), AccessShareLock);
	desc = RelationGetDescr(rel);
	for (int f = 0; f < N_COUNT; f++)
	{
		notes_att[f] = -1;
		for (int i = 0; i < desc->natts; i++)
			if (!TupleDescAttr(desc, i)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, i)->attname), note_field_names[f]) == 0)
				notes_att[f] = i;
		if (notes_att[f] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("sync.notes has no column %s", note_field_names[f]),
					 errdetail("The extension's catalog was altered."),
					 errhint("Install the extension again.")));
	}
	if (!OidIsValid(notes_seq))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("sequence sync.note_seq is missing"),
				 errdetail("The extension's catalog was altered."),
				 errhint("Install the extension again.")));
	notes_relid = RelationGetRelid(rel);
	table_close(rel, AccessShareLock);
}

/* resolve_col: name's attnum on rel and its output function. */
static void
resolve_col(Relation rel, const char *name, note_col *c)
{
	TupleDesc	desc = RelationGetDescr(rel);

	c->attnum = InvalidAttrNumber;
	if (name == NULL || name[0] == '\0')
		return;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
		{
			Oid			out;
			bool		varlena;

			c->attnum = att->attnum;
			c->kind = ms_key_kind_of(att->atttypid);
			getTypeOutputInfo(att->atttypid, &out, &varlena);
			fmgr_info_cxt(out, &c->out, CurrentMemoryContext);
			return;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("column \"%s\" of \"%s\" is declared for mirroring but does not exist",
					name, RelationGetRelationName(rel)),
			 errhint("SELECT * FROM sync.check() says what changed.")));
}

/*
 * misused: the error of a trigger whose arguments are not as sync.mirror
 * writes them (CREATE TRIGGER ... EXECUTE FUNCTION sync.note(...) by hand).
 */
static void
misused(Trigger *tg, Relation rel, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
			 errmsg("trigger \"%s\" on \"%s\" is not as sync.mirror writes it",
					tg->tgname, RelationGetRelationName(rel)),
			 errdetail("%s", what),
			 errhint("sync.retrigger the mirrored table, or drop the trigger.")));
}

static char *
arg_str(Trigger *tg, Relation rel, int *pos)
{
	if (*pos >= tg->tgnargs)
		misused(tg, rel, "It has too few arguments.");
	return tg->tgargs[(*pos)++];
}

static int
arg_int(Trigger *tg, Relation rel, int *pos)
{
	char	   *s = arg_str(tg, rel, pos);
	char	   *end;
	long		n = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || n < 0 || n > PG_INT32_MAX)
		misused(tg, rel, psprintf("Its argument %d, \"%s\", is not a count or an id.", *pos, s));
	return (int) n;
}

/* entry_build_row: the arguments of a mirrored table's trigger after its key. */
static void
entry_build_row(note_entry *e, Trigger *tg, Relation rel, int *pos)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			nignore = arg_int(tg, rel, pos);
	char	  **ignore = &tg->tgargs[*pos];

	if (*pos + nignore > tg->tgnargs)
		misused(tg, rel, "It has too few arguments.");
	*pos += nignore;
	e->compare = palloc(sizeof(AttrNumber) * desc->natts);
	e->byval = palloc(sizeof(bool) * desc->natts);
	e->len = palloc(sizeof(int16) * desc->natts);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		bool		ignored = att->attisdropped;

		for (int j = 0; j < nignore && !ignored; j++)
			ignored = strcmp(ignore[j], NameStr(att->attname)) == 0;
		if (ignored)
			continue;
		e->compare[e->ncompare] = att->attnum;
		e->byval[e->ncompare] = att->attbyval;
		e->len[e->ncompare] = att->attlen;
		e->ncompare++;
	}
	resolve_col(rel, arg_str(tg, rel, pos), &e->part);
	e->nfkeys = arg_int(tg, rel, pos);
	e->fkeys = palloc0(sizeof(note_fkey) * (e->nfkeys + 1));
	for (int f = 0; f < e->nfkeys; f++)
	{
		note_fkey  *fk = &e->fkeys[f];

		fk->name = pstrdup(arg_str(tg, rel, pos));
		fk->ncols = arg_int(tg, rel, pos);
		fk->cols = palloc0(sizeof(note_col) * (fk->ncols + 1));
		for (int c = 0; c < fk->ncols; c++)
			resolve_col(rel, arg_str(tg, rel, pos), &fk->cols[c]);
	}
}

/* entry_build: parse the trigger's arguments against the firing relation. */
static void
entry_build(note_entry *e, Trigger *tg, Relation rel)
{
	MemoryContext old;
	int			pos = 0;

	if (e->cxt != NULL)
		MemoryContextDelete(e->cxt);
	e->cxt = AllocSetContextCreate(TopMemoryContext, "magic_sync note trigger",
								   ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(e->cxt);
	e->tab = arg_int(tg, rel, &pos);
	e->kind = arg_str(tg, rel, &pos)[0];
	e->nkey = 0;
	e->ncompare = 0;
	e->nfkeys = 0;
	e->part.attnum = e->group.attnum = e->replica.attnum = InvalidAttrNumber;
	if (e->kind == MS_NOTE_ROW || e->kind == MS_NOTE_MEMBER)
	{
		e->nkey = arg_int(tg, rel, &pos);
		if (e->nkey == 0)
			misused(tg, rel, "It names no key column.");
		e->key = palloc0(sizeof(note_col) * e->nkey);
		for (int k = 0; k < e->nkey; k++)
			resolve_col(rel, arg_str(tg, rel, &pos), &e->key[k]);
	}
	if (e->kind == MS_NOTE_ROW)
		entry_build_row(e, tg, rel, &pos);
	else if (e->kind == MS_NOTE_MEMBER)
		resolve_col(rel, arg_str(tg, rel, &pos), &e->group);
	else if (e->kind == MS_NOTE_ASSIGNMENT)
	{
		resolve_col(rel, arg_str(tg, rel, &pos), &e->replica);
		resolve_col(rel, arg_str(tg, rel, &pos), &e->group);
	}
	else
		misused(tg, rel, psprintf("Its second argument, \"%s\", is no kind of note a row change writes: r, m or a.",
								  tg->tgargs[1]));
	MemoryContextSwitchTo(old);
	e->valid = true;
}

static note_entry *
entry_get(Trigger *tg, Relation rel)
{
	note_key	hkey;
	note_entry *e;
	bool		found;

	if (note_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(note_key);
		ctl.entrysize = sizeof(note_entry);
		ctl.hcxt = TopMemoryContext;
		note_cache = hash_create("magic_sync note triggers", 64, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		CacheRegisterRelcacheCallback(note_invalidate, (Datum) 0);
	}
	memset(&hkey, 0, sizeof(hkey));
	hkey.tgoid = tg->tgoid;
	hkey.relid = RelationGetRelid(rel);
	e = hash_search(note_cache, &hkey, HASH_ENTER, &found);
	if (!found)
	{
		e->cxt = NULL;
		e->valid = false;
	}
	if (!e->valid)
	{
		PG_TRY();
		{
			entry_build(e, tg, rel);
		}
		PG_CATCH();
		{
			e->valid = false;
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	return e;
}

/*
 * slot_key: the canonical key of cols in slot, or NULL when one of them is
 * null (a foreign key pointing nowhere, a member in no group).
 */
static text *
slot_key(TupleTableSlot *slot, int n, note_col *cols)
{
	const char **parts = palloc(sizeof(char *) * n);
	size_t	   *lens = palloc(sizeof(size_t) * n);
	size_t		size;
	text	   *out;

	for (int k = 0; k < n; k++)
	{
		bool		isnull;
		Datum		d;

		if (cols[k].attnum == InvalidAttrNumber)
			return NULL;
		d = slot_getattr(slot, cols[k].attnum, &isnull);
		if (isnull)
			return NULL;
		/* whatever DateStyle and TimeZone the writer's session has (keys.h) */
		parts[k] = ms_key_spelled(cols[k].kind) ? ms_key_text(cols[k].kind, d) : OutputFunctionCall(&cols[k].out, d);
		lens[k] = strlen(parts[k]);
	}
	size = ms_key_size(n, parts, lens);
	out = ms_bytea_new(size);
	ms_key_write(VARDATA(out), n, parts, lens);
	return out;
}

/* slot_text: a column's text form, or NULL. */
static text *
slot_text(TupleTableSlot *slot, note_col *c)
{
	bool		isnull;
	Datum		d;

	if (c->attnum == InvalidAttrNumber)
		return NULL;
	d = slot_getattr(slot, c->attnum, &isnull);
	if (isnull)
		return NULL;
	return cstring_to_text(OutputFunctionCall(&c->out, d));
}

static bool
text_equal(text *a, text *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/*
 * pointed: {foreign key: parent's canonical key} of the row in slot, or
 * NULL.  Built as jsonb, not spelled and parsed: the same value jsonb_in
 * would make of it (keys sorted, one of each).
 */
static Datum
pointed(note_entry *e, TupleTableSlot *slot, bool *isnull)
{
	JsonbParseState *state = NULL;
	JsonbValue *object;
	bool		any = false;

	*isnull = true;
	if (e->nfkeys == 0)
		return (Datum) 0;
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (int f = 0; f < e->nfkeys; f++)
	{
		text	   *k = slot_key(slot, e->fkeys[f].ncols, e->fkeys[f].cols);
		JsonbValue	v;

		if (k == NULL)
			continue;
		v.type = jbvString;
		v.val.string.val = e->fkeys[f].name;
		v.val.string.len = (int) strlen(e->fkeys[f].name);
		pushJsonbValue(&state, WJB_KEY, &v);
		v.val.string.val = VARDATA(k);
		v.val.string.len = (int) (VARSIZE(k) - VARHDRSZ);
		pushJsonbValue(&state, WJB_VALUE, &v);
		any = true;
	}
	object = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	if (!any)
		return (Datum) 0;
	*isnull = false;
	return JsonbPGetDatum(JsonbValueToJsonb(object));
}

/* The values of one note, before it is written. */
typedef struct note_row
{
	char		source;
	text	   *key;
	text	   *part;
	text	   *old_key;
	text	   *old_part;
	Datum		pointed;
	bool		pointed_null;
	Datum		replica;
	bool		replica_null;
	text	   *grp;
} note_row;

/*
 * A note noted at the top level of its transaction is not written at once:
 * up to NOTE_BUFFER of them wait, their values copied by field, and go into
 * sync.notes in one multi-row insert (one WAL record a page, one buffer
 * lock) just before the transaction commits, or before a statement of it
 * reads sync.notes, or when the buffer is full.  The id is drawn when the
 * row is noted, as before, so the floor (floor.c) and currval() see what
 * they did.  A subtransaction's notes are written at once: the buffer's
 * rows are written under the top transaction's xid only, so that rolling a
 * subtransaction back can neither take them nor leave its own behind.
 */
#define NOTE_BUFFER 64

typedef struct note_buffered
{
	Datum		v[N_COUNT];
	bool		isnull[N_COUNT];
	CommandId	cid;			/* the noting statement's: what sees it, as if written then */
} note_buffered;

#define TEXT_OR_NULL(v, t, n) ((n) = ((t) == NULL), (v) = PointerGetDatum(t))


/*
 * The open sync.notes of this transaction.  Opening the table, its indexes
 * and an executor state for every note costs as much as writing it, so they
 * are opened at the first note of a transaction, on the top transaction's
 * resource owner (a subtransaction rolled back keeps them), and closed just
 * before it commits; an abort releases them with everything else.
 */
typedef struct note_writer
{
	bool		open;
	bool		stale;			/* sync.notes changed: reopen at the next note */
	bool		committing;		/* the buffer was written at pre-commit: write at once */
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	TupleTableSlot *slots[NOTE_BUFFER];	/* the buffer's, made at its first flush */
	MemoryContext cxt;			/* the buffer's values, in TopTransactionContext */
	note_buffered buffer[NOTE_BUFFER];
	int			nbuffered;
} note_writer;

static note_writer writer;
static bool writer_callback = false;
static bool writer_hooked = false;
static ExecutorStart_hook_type prev_executor_start = NULL;

/*
 * What becomes of a note in each index of sync.notes.  A note the trigger
 * writes is never done, of build 1 and never parked (its other columns
 * null): a partial index whose predicate reads only such columns takes
 * every note or none.  Known once (again after sync.notes' relcache entry
 * changes) rather than found in every noting transaction: of the three
 * indexes, a note enters notes_pending only, so the other two are not
 * opened and no predicate is compiled at a commit (bench/commit_cost.sh).
 */
typedef enum
{
	FATE_ASK,					/* as an INSERT would: its predicate for each note */
	FATE_ALWAYS,				/* every note: its predicate not evaluated */
	FATE_NEVER					/* no note: not opened */
} index_fate;

typedef struct note_index
{
	Oid			index;
	index_fate	fate;
} note_index;

static note_index *fates = NULL;
static int	nfates = 0;
static bool fates_known = false;

static void
note_invalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	note_entry *e;

	(void) arg;
	if (relid == InvalidOid || relid == notes_relid)
	{
		notes_relid = InvalidOid;
		writer.stale = true;
		fates_known = false;
	}
	for (int i = 0; i < nfates && fates_known; i++)
		fates_known = fates[i].index != relid;
	if (note_cache == NULL)
		return;
	hash_seq_init(&status, note_cache);
	while ((e = hash_seq_search(&status)) != NULL)
		if (relid == InvalidOid || e->hkey.relid == relid)
			e->valid = false;
}

static void
writer_close(void)
{
	ResourceOwner save = CurrentResourceOwner;

	if (!writer.open)
		return;
	writer.open = false;
	CurrentResourceOwner = TopTransactionResourceOwner;
	ExecDropSingleTupleTableSlot(writer.slot);
	for (int i = 0; i < NOTE_BUFFER && writer.slots[i] != NULL; i++)
	{
		ExecDropSingleTupleTableSlot(writer.slots[i]);
		writer.slots[i] = NULL;
	}
	ExecCloseIndices(writer.rri);
	FreeExecutorState(writer.estate);
	table_close(writer.rel, NoLock);
	CurrentResourceOwner = save;
}

/* fill: a note's values into slot, by sync.notes' columns as they are now */
static void
fill(TupleTableSlot *slot, const Datum *v, const bool *isnull)
{
	ExecClearTuple(slot);
	for (int i = 0; i < slot->tts_tupleDescriptor->natts; i++)
	{
		slot->tts_values[i] = (Datum) 0;
		slot->tts_isnull[i] = true;
	}
	for (int f = 0; f < N_COUNT; f++)
	{
		slot->tts_values[notes_att[f]] = v[f];
		slot->tts_isnull[notes_att[f]] = isnull[f];
	}
	ExecStoreVirtualTuple(slot);
}

/* note_constant: whether a column of sync.notes has one value in every note the trigger writes */
static bool
note_constant(AttrNumber attnum)
{
	if (attnum <= 0)
		return false;
	for (int f = 0; f < N_COUNT; f++)
		if (notes_att[f] == attnum - 1)
			return f == N_DONE || f == N_BUILD;
	/* not written by the trigger (parked, parked_at): null */
	return true;
}

/* fate_of: an index's fate, its predicate evaluated on a note's constants when it reads only them */
static index_fate
fate_of(Relation rel, Relation index)
{
	List	   *pred = RelationGetIndexPredicate(index);
	Bitmapset  *attrs = NULL;
	int			a = -1;
	EState	   *estate;
	ExprContext *econtext;
	TupleTableSlot *slot;
	Datum		v[N_COUNT];
	bool		isnull[N_COUNT];
	bool		in;

	if (pred == NIL || !index->rd_index->indisready)
		return FATE_ASK;
	pull_varattnos((Node *) pred, 1, &attrs);
	while ((a = bms_next_member(attrs, a)) >= 0)
		if (!note_constant(a + FirstLowInvalidHeapAttributeNumber))
			return FATE_ASK;
	for (int f = 0; f < N_COUNT; f++)
	{
		v[f] = (Datum) 0;
		isnull[f] = true;
	}
	/* as note_values writes them */
	v[N_DONE] = BoolGetDatum(false);
	isnull[N_DONE] = false;
	v[N_BUILD] = Int16GetDatum(1);
	isnull[N_BUILD] = false;
	estate = CreateExecutorState();
	econtext = GetPerTupleExprContext(estate);
	slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
	fill(slot, v, isnull);
	econtext->ecxt_scantuple = slot;
	in = ExecQual(ExecPrepareQual(pred, estate), econtext);
	ExecDropSingleTupleTableSlot(slot);
	FreeExecutorState(estate);
	return in ? FATE_ALWAYS : FATE_NEVER;
}

/* fates_find: each index's fate, rel's indexes as they are now */
static void
fates_find(Relation rel)
{
	List	   *oids = RelationGetIndexList(rel);
	note_index *found = palloc(sizeof(note_index) * (list_length(oids) + 1));
	ListCell   *lc;
	int			n = 0;

	/* known from here: an invalidation while the indexes open makes it unknown again */
	fates_known = true;
	foreach(lc, oids)
	{
		Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);

		found[n].index = RelationGetRelid(index);
		found[n].fate = fate_of(rel, index);
		n++;
		index_close(index, NoLock);
	}
	list_free(oids);
	if (fates != NULL)
		pfree(fates);
	fates = MemoryContextAlloc(TopMemoryContext, sizeof(note_index) * (n + 1));
	memcpy(fates, found, sizeof(note_index) * n);
	nfates = n;
	pfree(found);
}

/*
 * open_indexes: ExecOpenIndices, less the indexes no note enters and the
 * predicates every note meets (ExecInsertIndexTuples evaluates them when
 * ii_Predicate is set).
 */
static void
open_indexes(ResultRelInfo *rri)
{
	int			n = 0;

	if (!fates_known)
		fates_find(rri->ri_RelationDesc);
	rri->ri_NumIndices = 0;
	rri->ri_IndexRelationDescs = palloc(sizeof(Relation) * (nfates + 1));
	rri->ri_IndexRelationInfo = palloc(sizeof(IndexInfo *) * (nfates + 1));
	for (int i = 0; i < nfates; i++)
	{
		Relation	index;
		IndexInfo  *ii;

		if (fates[i].fate == FATE_NEVER)
			continue;
		index = index_open(fates[i].index, RowExclusiveLock);
		ii = BuildIndexInfo(index);
		if (fates[i].fate == FATE_ALWAYS)
			ii->ii_Predicate = NIL;
		rri->ri_IndexRelationDescs[n] = index;
		rri->ri_IndexRelationInfo[n] = ii;
		rri->ri_NumIndices = ++n;
	}
}

static void
writer_open(void)
{
	ResourceOwner save = CurrentResourceOwner;
	MemoryContext old;

	if (writer.open && writer.stale)
		writer_close();
	if (writer.open)
		return;
	/* the first note of the transaction: its commit wakes the relay (wake.c) */
	ms_wake_at_commit();
	notes_resolve();
	CurrentResourceOwner = TopTransactionResourceOwner;
	old = MemoryContextSwitchTo(TopTransactionContext);
	PG_TRY();
	{
		writer.rel = table_open(notes_relid, RowExclusiveLock);
		writer.estate = CreateExecutorState();
		MemoryContextSwitchTo(writer.estate->es_query_cxt);
		writer.rri = makeNode(ResultRelInfo);
		InitResultRelInfo(writer.rri, writer.rel, 1, NULL, 0);
		open_indexes(writer.rri);
		writer.slot = MakeSingleTupleTableSlot(RelationGetDescr(writer.rel), &TTSOpsVirtual);
		memset(writer.slots, 0, sizeof(writer.slots));
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = save;
		MemoryContextSwitchTo(old);
	}
	PG_END_TRY();
	writer.open = true;
	writer.stale = false;
}

/* write_indexes: a note written, into sync.notes' indexes, as an INSERT would */
static void
write_indexes(TupleTableSlot *slot)
{
	ExecInsertIndexTuples(writer.rri, slot, writer.estate, false, false, NULL, NIL);
	ResetPerTupleExprContext(writer.estate);
	ExecClearTuple(slot);
}

/*
 * notes_flush: the buffer into sync.notes.  Each run of notes of one
 * statement in one insert (so a statement of this transaction sees a note
 * exactly when it saw it written at once); at pre-commit, all in one.
 */
static void
notes_flush(bool at_commit)
{
	int			n = writer.nbuffered;
	int			from = 0;

	if (n == 0)
		return;
	Assert(GetCurrentTransactionNestLevel() == 1);
	writer_open();
	for (int i = 0; i < n; i++)
	{
		if (writer.slots[i] == NULL)
		{
			/* as the writer's: on the top transaction's resource owner */
			ResourceOwner save = CurrentResourceOwner;
			MemoryContext old = MemoryContextSwitchTo(writer.estate->es_query_cxt);

			CurrentResourceOwner = TopTransactionResourceOwner;
			writer.slots[i] = MakeSingleTupleTableSlot(RelationGetDescr(writer.rel),
													  table_slot_callbacks(writer.rel));
			CurrentResourceOwner = save;
			MemoryContextSwitchTo(old);
		}
		fill(writer.slots[i], writer.buffer[i].v, writer.buffer[i].isnull);
	}
	/* emptied first: an error below aborts the transaction, the buffer with it */
	writer.nbuffered = 0;
	for (int i = 1; i <= n; i++)
		if (i == n || (!at_commit && writer.buffer[i].cid != writer.buffer[from].cid))
		{
			table_multi_insert(writer.rel, &writer.slots[from], i - from,
							   at_commit ? GetCurrentCommandId(true) : writer.buffer[from].cid, 0, NULL);
			from = i;
		}
	for (int i = 0; i < n; i++)
		write_indexes(writer.slots[i]);
	MemoryContextReset(writer.cxt);
}

static void
writer_xact(XactEvent event, void *arg)
{
	(void) arg;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			notes_flush(true);
			/* a note after this (another callback's write) is written at once */
			writer.committing = true;
			writer_close();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			/* the resource owner releases them, TopTransactionContext frees them */
			writer.open = false;
			writer.nbuffered = 0;
			writer.cxt = NULL;
			writer.committing = false;
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			writer.cxt = NULL;
			writer.committing = false;
			break;
		default:
			break;
	}
}

/* whether a statement about to run reads (or writes) sync.notes */
static bool
touches_notes(QueryDesc *qd)
{
	ListCell   *lc;

	if (qd->plannedstmt == NULL)
		return false;
	foreach(lc, qd->plannedstmt->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		if (rte->rtekind == RTE_RELATION && rte->relid == notes_relid)
			return true;
	}
	return false;
}

/*
 * A statement of the noting transaction that reads sync.notes sees its
 * buffered notes, as it saw them written at once.  Inside a subtransaction
 * they stay buffered (written there, a rollback to a savepoint would take
 * them): such a statement sees the subtransaction's notes, not those
 * noted before it began.
 */
static void
notes_executor_start(QueryDesc *qd, int eflags)
{
	if (writer.nbuffered > 0 && GetCurrentTransactionNestLevel() == 1 &&
		(!OidIsValid(notes_relid) || touches_notes(qd)))
		notes_flush(false);
	if (prev_executor_start != NULL)
		prev_executor_start(qd, eflags);
	else
		standard_ExecutorStart(qd, eflags);
}

/*
 * ms_notes_written: this transaction's buffered notes written, as a
 * statement that reads sync.notes would have them (notes_executor_start),
 * for a reader of it in C (relay/batch_probe.c: a pass by hand in the
 * noting transaction).
 */
void
ms_notes_written(void)
{
	if (writer.nbuffered > 0 && GetCurrentTransactionNestLevel() == 1)
		notes_flush(false);
}

/* note_values: a note's values by field */
static void
note_values(int32 tab, note_row *n, Datum *v, bool *isnull)
{
	v[N_ID] = Int64GetDatum(nextval_internal(notes_seq, false));
	isnull[N_ID] = false;
	v[N_TAB] = Int32GetDatum(tab);
	isnull[N_TAB] = false;
	v[N_SOURCE] = CharGetDatum(n->source);
	isnull[N_SOURCE] = false;
	TEXT_OR_NULL(v[N_KEY], n->key, isnull[N_KEY]);
	TEXT_OR_NULL(v[N_PART], n->part, isnull[N_PART]);
	TEXT_OR_NULL(v[N_OLD_KEY], n->old_key, isnull[N_OLD_KEY]);
	TEXT_OR_NULL(v[N_OLD_PART], n->old_part, isnull[N_OLD_PART]);
	TEXT_OR_NULL(v[N_GRP], n->grp, isnull[N_GRP]);
	v[N_POINTED] = n->pointed;
	isnull[N_POINTED] = n->pointed_null;
	v[N_REPLICA] = n->replica;
	isnull[N_REPLICA] = n->replica_null;
	v[N_XID] = FullTransactionIdGetDatum(GetTopFullTransactionId());
	isnull[N_XID] = false;
	v[N_BUILD] = Int16GetDatum(1);
	isnull[N_BUILD] = false;
	v[N_DONE] = BoolGetDatum(false);
	isnull[N_DONE] = false;
	/* as the column's DEFAULT now(): when the noting transaction began */
	v[N_NOTED] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	isnull[N_NOTED] = false;
}

/* note_buffer: a top-level note's values, copied, into the buffer */
static void
note_buffer(int32 tab, note_row *n)
{
	note_buffered *b;
	MemoryContext old;
	TupleDesc	desc;

	if (writer.cxt == NULL)
		writer.cxt = AllocSetContextCreate(TopTransactionContext, "magic_sync notes buffered",
										   ALLOCSET_DEFAULT_SIZES);
	b = &writer.buffer[writer.nbuffered];
	note_values(tab, n, b->v, b->isnull);
	b->cid = GetCurrentCommandId(true);
	desc = RelationGetDescr(writer.rel);
	old = MemoryContextSwitchTo(writer.cxt);
	for (int f = 0; f < N_COUNT; f++)
		if (!b->isnull[f])
		{
			Form_pg_attribute att = TupleDescAttr(desc, notes_att[f]);

			b->v[f] = datumCopy(b->v[f], att->attbyval, att->attlen);
		}
	MemoryContextSwitchTo(old);
	if (++writer.nbuffered == NOTE_BUFFER)
		notes_flush(false);
}

/*
 * write_note: the note into sync.notes and its indexes, as an INSERT
 * would, minus the rights and the triggers it does not have: at once in a
 * subtransaction, buffered at the top level.
 */
static void
write_note(int32 tab, note_row *n)
{
	Datum		v[N_COUNT];
	bool		isnull[N_COUNT];

	if (!writer_callback)
	{
		RegisterXactCallback(writer_xact, NULL);
		writer_callback = true;
	}
	if (!writer_hooked)
	{
		prev_executor_start = ExecutorStart_hook;
		ExecutorStart_hook = notes_executor_start;
		writer_hooked = true;
	}
	writer_open();
	if (GetCurrentTransactionNestLevel() == 1 && !writer.committing)
	{
		note_buffer(tab, n);
		return;
	}
	note_values(tab, n, v, isnull);
	fill(writer.slot, v, isnull);
	table_tuple_insert(writer.rel, writer.slot, GetCurrentCommandId(true), 0, NULL);
	write_indexes(writer.slot);
}

/* changed: whether an update changed a column whose change is noted. */
static bool
changed(note_entry *e, TupleTableSlot *old, TupleTableSlot *new)
{
	for (int i = 0; i < e->ncompare; i++)
	{
		bool		onull;
		bool		nnull;
		Datum		o = slot_getattr(old, e->compare[i], &onull);
		Datum		n = slot_getattr(new, e->compare[i], &nnull);

		if (onull != nnull)
			return true;
		if (!onull && !datumIsEqual(o, n, e->byval[i], e->len[i]))
			return true;
	}
	return false;
}

static void
note_row_change(note_entry *e, TriggerData *td)
{
	TupleTableSlot *old = NULL;
	TupleTableSlot *new = NULL;
	note_row	n;

	memset(&n, 0, sizeof(n));
	n.source = MS_NOTE_ROW;
	n.pointed_null = true;
	n.replica_null = true;
	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
		new = td->tg_trigslot;
	else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
		old = td->tg_trigslot;
	else
	{
		old = td->tg_trigslot;
		new = td->tg_newslot;
		if (!changed(e, old, new))
			return;
	}
	if (new != NULL)
	{
		n.key = slot_key(new, e->nkey, e->key);
		n.part = slot_text(new, &e->part);
	}
	if (old != NULL)
	{
		text	   *okey = slot_key(old, e->nkey, e->key);
		text	   *opart = slot_text(old, &e->part);

		n.pointed = pointed(e, old, &n.pointed_null);
		if (new == NULL)
		{
			n.key = okey;
			n.part = opart;
		}
		else
		{
			if (!text_equal(okey, n.key))
				n.old_key = okey;
			if (!text_equal(opart, n.part))
				n.old_part = opart;
		}
	}
	if (n.key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("a key column of \"%s\" is null", RelationGetRelationName(td->tg_relation)),
				 errdetail("A mirrored row is noted by its key."),
				 errhint("SELECT * FROM sync.check() says what changed.")));
	write_note(e->tab, &n);
}

/*
 * note_group_side: the note of one side (old or new) of a change to a
 * member or an assignment; nothing when it names no group.
 */
static void
note_group_side(note_entry *e, TupleTableSlot *slot)
{
	note_row	n;
	bool		isnull = true;

	memset(&n, 0, sizeof(n));
	n.pointed_null = true;
	n.replica_null = true;
	n.grp = slot_text(slot, &e->group);
	if (n.grp == NULL)
		return;
	if (e->kind == MS_NOTE_MEMBER)
	{
		n.source = MS_NOTE_MEMBER;
		n.key = slot_key(slot, e->nkey, e->key);
		if (n.key == NULL)
			return;
	}
	else
	{
		n.source = MS_NOTE_ASSIGNMENT;
		if (e->replica.attnum != InvalidAttrNumber)
			n.replica = slot_getattr(slot, e->replica.attnum, &isnull);
		if (isnull)
			return;
		n.replica_null = false;
	}
	write_note(e->tab, &n);
}

static void
note_group_change(note_entry *e, TriggerData *td)
{
	if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
	{
		TupleTableSlot *old = td->tg_trigslot;
		TupleTableSlot *new = td->tg_newslot;
		bool		same;

		/* what a member or assignment says is its group and its row or replica */
		same = text_equal(slot_text(old, &e->group), slot_text(new, &e->group));
		if (e->kind == MS_NOTE_MEMBER)
			same = same && text_equal(slot_key(old, e->nkey, e->key),
									  slot_key(new, e->nkey, e->key));
		else
		{
			text	   *o = slot_text(old, &e->replica);
			text	   *n = slot_text(new, &e->replica);

			same = same && text_equal(o, n);
		}
		if (same)
			return;
		note_group_side(e, old);
		note_group_side(e, new);
	}
	else
		note_group_side(e, td->tg_trigslot);
}

/*
 * ms_note: the trigger sync.note.  AFTER INSERT OR UPDATE OR DELETE FOR
 * EACH ROW: writes the note; BEFORE TRUNCATE: refuses.
 */
Datum
ms_note(PG_FUNCTION_ARGS)
{
	TriggerData *td;
	note_entry *e;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("sync.note() is a trigger"),
				 errhint("sync.mirror installs it; it is not called directly.")));
	td = (TriggerData *) fcinfo->context;
	if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot truncate \"%s\": it is mirrored",
						RelationGetRelationName(td->tg_relation)),
				 errdetail("TRUNCATE removes rows without noting them, so replicas would keep them."),
				 errhint("Use DELETE, or sync.unmirror the table first.")));
	if (!TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_AFTER(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("sync.note() must be fired AFTER ... FOR EACH ROW, or BEFORE TRUNCATE"),
				 errhint("sync.mirror installs it; sync.retrigger installs it again.")));

	e = entry_get(td->tg_trigger, td->tg_relation);
	if (e->kind == MS_NOTE_ROW)
		note_row_change(e, td);
	else
		note_group_change(e, td);
	return PointerGetDatum(NULL);
}
