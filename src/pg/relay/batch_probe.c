/*-------------------------------------------------------------------------
 * batch_probe.c
 *	  The batch's notes read by an index probe, in C.  See batch_probe.h.
 *
 * batch.c's statement reads the notes not done from the floor up, oldest
 * first, into pg_temp.ms_notes_read, and the rows they name, the newest note
 * of each, into pg_temp.ms_pending.  A one-row pass reads one note: the
 * statement's start and end, its plan's check and its two inserts' executor
 * cost it more than the note (9.5 % of the worker, issue 37).  Here the
 * notes come by notes_pending in id order (the statement's ORDER BY id: ids
 * are unique), each checked for what the statement asks of it, and the two
 * tables are written as an INSERT writes them (table_tuple_insert, then
 * their indexes): they are this session's temporary tables, with no
 * trigger, rule or key that refers to them.  The rights the statement
 * needed are checked as the pass's role (SELECT on sync.notes, INSERT on
 * the two).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "batch_probe.h"
#include "notes.h"
#include "probe.h"
#include "writer.h"

/* the columns of sync.notes read */
enum
{
	N_ID, N_TAB, N_SOURCE, N_KEY, N_OLD_KEY, N_POINTED, N_REPLICA, N_GRP, N_BUILD, N_DONE, N_PARKED, N_COUNT
};
static const char *const note_columns[N_COUNT] = {
	"id", "tab", "source", "key", "old_key", "pointed", "replica", "grp", "build", "done", "parked"
};

/* the columns of the two tables written (temp.c) */
#define READ_COLS 9
static const char *const read_columns[READ_COLS] = {
	"id", "tab", "source", "key", "old_key", "pointed", "replica", "grp", "at"
};
#define PENDING_COLS 4
static const char *const pending_columns[PENDING_COLS] = {"tab", "key", "note", "moved"};

/* a row a note names: its key, or the key it had (moved) */
typedef struct pending_part
{
	int32		tab;
	char	   *key;
	int64		note;
	bool		moved;
} pending_part;

typedef struct probed_note
{
	int64		id;
	ItemPointerData at;
} probed_note;

struct ms_batch_probed
{
	probed_note *notes;
	int64		nnotes;
	pending_part *pending;		/* grouped by (tab, key), in that order */
	int64		npending;
	int64		members;
};

typedef struct reading
{
	int64		from;
	int64		limit;			/* < 0: all */
	bool		write;
	AttrNumber	col[N_COUNT];
	bool		resolved;
	ms_batch_probed *out;
	int64		cap_notes;
	pending_part *parts;
	int64		nparts;
	int64		cap_parts;
	int64		members;
	ms_writer  *notes_read;
} reading;

static void
add_part(reading *r, int32 tab, Datum key, int64 note, bool moved)
{
	pending_part *p;

	if (r->nparts == r->cap_parts)
	{
		r->cap_parts = Max(16, r->cap_parts * 2);
		r->parts = r->parts == NULL ? palloc(sizeof(pending_part) * r->cap_parts)
			: repalloc_huge(r->parts, sizeof(pending_part) * r->cap_parts);
	}
	p = &r->parts[r->nparts++];
	p->tab = tab;
	p->key = TextDatumGetCString(key);
	p->note = note;
	p->moved = moved;
}

static void
resolve(reading *r, TupleDesc desc)
{
	for (int c = 0; c < N_COUNT; c++)
	{
		r->col[c] = SPI_fnumber(desc, note_columns[c]);
		if (r->col[c] <= 0)
			elog(ERROR, "magic_sync: sync.notes has no column %s", note_columns[c]);
	}
	r->resolved = true;
}

/* one note of notes_pending: the statement's WHERE, then its two inserts' rows */
static bool
one_note(HeapTuple row, TupleDesc desc, void *arg)
{
	reading    *r = arg;
	Datum		v[N_COUNT];
	bool		n[N_COUNT];
	int64		id;
	int32		tab;
	bool		row_note;

	if (!r->resolved)
		resolve(r, desc);
	for (int c = 0; c < N_COUNT; c++)
		v[c] = heap_getattr(row, r->col[c], desc, &n[c]);
	/* NOT done AND build <= 1 AND parked IS NULL AND id >= from (an index's predicate is checked too) */
	if (n[N_ID] || n[N_DONE] || DatumGetBool(v[N_DONE]) || n[N_BUILD] || DatumGetInt16(v[N_BUILD]) > 1 ||
		!n[N_PARKED] || DatumGetInt64(v[N_ID]) < r->from)
		return true;
	id = DatumGetInt64(v[N_ID]);
	tab = DatumGetInt32(v[N_TAB]);
	if (r->out->nnotes == r->cap_notes)
	{
		r->cap_notes = Max(16, r->cap_notes * 2);
		r->out->notes = r->out->notes == NULL ? palloc(sizeof(probed_note) * r->cap_notes)
			: repalloc_huge(r->out->notes, sizeof(probed_note) * r->cap_notes);
	}
	r->out->notes[r->out->nnotes].id = id;
	r->out->notes[r->out->nnotes].at = row->t_self;
	r->out->nnotes++;
	row_note = !n[N_SOURCE] && DatumGetChar(v[N_SOURCE]) == 'r';
	if (!n[N_SOURCE] && DatumGetChar(v[N_SOURCE]) == 'm' && !n[N_KEY])
		r->members++;
	/* PENDING (batch.c): a row's own notes, by its key, and by the key it had */
	if (row_note && !n[N_KEY])
		add_part(r, tab, v[N_KEY], id, !n[N_OLD_KEY]);
	if (row_note && !n[N_OLD_KEY])
		add_part(r, tab, v[N_OLD_KEY], id, true);
	if (r->write)
	{
		Datum		values[READ_COLS];
		bool		nulls[READ_COLS];
		ItemPointer at = palloc(sizeof(ItemPointerData));
		static const int from[READ_COLS - 1] = {N_ID, N_TAB, N_SOURCE, N_KEY, N_OLD_KEY, N_POINTED, N_REPLICA, N_GRP};

		for (int c = 0; c < READ_COLS - 1; c++)
		{
			values[c] = v[from[c]];
			nulls[c] = n[from[c]];
		}
		*at = row->t_self;
		values[READ_COLS - 1] = PointerGetDatum(at);
		nulls[READ_COLS - 1] = false;
		ms_writer_put(r->notes_read, values, nulls, NULL);
	}
	return r->limit < 0 || r->out->nnotes < r->limit;
}

/* (tab, key), the key in "C" order: as ms_pending's primary key compares them */
static int
part_cmp(const void *a, const void *b)
{
	const pending_part *x = a;
	const pending_part *y = b;

	if (x->tab != y->tab)
		return x->tab < y->tab ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* GROUP BY tab, key: the newest note, and whether any moved it */
static int64
group_parts(pending_part *parts, int64 n)
{
	int64		g = 0;

	if (n == 0)
		return 0;
	qsort(parts, n, sizeof(pending_part), part_cmp);
	for (int64 i = 1; i < n; i++)
	{
		if (part_cmp(&parts[g], &parts[i]) == 0)
		{
			parts[g].note = Max(parts[g].note, parts[i].note);
			parts[g].moved = parts[g].moved || parts[i].moved;
			continue;
		}
		parts[++g] = parts[i];
	}
	return g + 1;
}

bool
ms_batch_probe(ms_executor *x, int64 from, int64 limit, bool write, ms_batch_counts *out, ms_batch_probed **probed)
{
	Oid			ns = get_namespace_oid("sync", false);
	Oid			relid = get_relname_relid("notes", ns);
	AttrNumber	idcol = OidIsValid(relid) ? get_attnum(relid, "id") : InvalidAttrNumber;
	reading		r;
	ScanKeyData key;
	AclResult	acl;
	bool		looked;
	ms_writer  *pending = NULL;

	memset(out, 0, sizeof *out);
	if (probed != NULL)
		*probed = NULL;
	if (!OidIsValid(relid) || idcol == InvalidAttrNumber || !OidIsValid(get_relname_relid("notes_pending", ns)))
		return false;
	acl = pg_class_aclcheck(relid, x->self, ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, "notes");
	memset(&r, 0, sizeof r);
	r.from = from;
	r.limit = limit;
	r.write = write;
	r.out = palloc0(sizeof(ms_batch_probed));
	if (write)
	{
		r.notes_read = ms_writer_open("ms_notes_read", true, read_columns, READ_COLS, x->self, 0);
		pending = ms_writer_open("ms_pending", true, pending_columns, PENDING_COLS, x->self, 0);
		/* another role's pass in this session (SET ROLE): the statement says what it may not do */
		if (r.notes_read == NULL || pending == NULL)
		{
			if (r.notes_read != NULL)
				ms_writer_close(r.notes_read);
			if (pending != NULL)
				ms_writer_close(pending);
			return false;
		}
	}
	/* the notes this transaction buffered, as the statement would see them written (a pass by hand) */
	ms_notes_written();
	/* id >= from, on notes_pending (id) WHERE NOT done: in id order */
	ScanKeyInit(&key, idcol, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(from));
	looked = ms_probe_keyed(x, "notes", "notes_pending", 1, &key, one_note, &r);
	if (write)
		ms_writer_close(r.notes_read);
	if (!looked)
		elog(ERROR, "magic_sync: sync.notes could not be read by notes_pending");
	r.out->pending = r.parts;
	r.out->npending = group_parts(r.parts, r.nparts);
	if (write)
	{
		for (int64 i = 0; i < r.out->npending; i++)
		{
			pending_part *p = &r.out->pending[i];
			Datum		values[PENDING_COLS] = {Int32GetDatum(p->tab), CStringGetTextDatum(p->key),
			Int64GetDatum(p->note), BoolGetDatum(p->moved)};
			bool		nulls[PENDING_COLS] = {false, false, false, false};

			ms_writer_put(pending, values, nulls, NULL);
		}
		ms_writer_close(pending);
	}
	/* what follows sees them */
	if (write)
		CommandCounterIncrement();
	out->notes = r.out->nnotes;
	out->last = r.out->nnotes > 0 ? r.out->notes[r.out->nnotes - 1].id : 0;
	out->rows = r.out->npending;
	out->members = r.members;
	r.out->members = r.members;
	if (probed != NULL)
		*probed = r.out;
	return true;
}

static void
differs(const char *what, int64 i)
{
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("magic_sync: the batch read by probe differs from the statement's"),
			 errdetail_internal("%s, at row %lld", what, (long long) i)));
}

void
ms_batch_probe_compare(ms_executor *x, const ms_batch_probed *probed, const ms_batch_counts *stmt)
{
	bool		isnull;

	if (probed->nnotes != stmt->notes || probed->npending != stmt->rows || probed->members != stmt->members ||
		(probed->nnotes > 0 && probed->notes[probed->nnotes - 1].id != stmt->last))
		differs(psprintf("%lld notes, %lld rows, %lld members' notes; the statement's %lld, %lld, %lld",
						 (long long) probed->nnotes, (long long) probed->npending, (long long) probed->members,
						 (long long) stmt->notes, (long long) stmt->rows, (long long) stmt->members), 0);
	ms_exec(x, "SELECT id, at FROM pg_temp.ms_notes_read ORDER BY id", 0, NULL, NULL, NULL, 0);
	if ((int64) SPI_processed != probed->nnotes)
		differs("the notes read", 0);
	for (int64 i = 0; i < probed->nnotes; i++)
		if (DatumGetInt64(ms_value(i, 1, &isnull)) != probed->notes[i].id ||
			!ItemPointerEquals((ItemPointer) DatumGetPointer(ms_value(i, 2, &isnull)), (ItemPointer) &probed->notes[i].at))
			differs("a note or its address", i);
	SPI_freetuptable(SPI_tuptable);
	ms_exec(x, "SELECT tab, key, note, moved FROM pg_temp.ms_pending ORDER BY tab, key", 0, NULL, NULL, NULL, 0);
	if ((int64) SPI_processed != probed->npending)
		differs("the rows of the notes", 0);
	for (int64 i = 0; i < probed->npending; i++)
	{
		const pending_part *p = &probed->pending[i];

		if (DatumGetInt32(ms_value(i, 1, &isnull)) != p->tab ||
			strcmp(TextDatumGetCString(ms_value(i, 2, &isnull)), p->key) != 0 ||
			DatumGetInt64(ms_value(i, 3, &isnull)) != p->note || DatumGetBool(ms_value(i, 4, &isnull)) != p->moved)
			differs(psprintf("the row %d %s", p->tab, p->key), i);
	}
	SPI_freetuptable(SPI_tuptable);
}
