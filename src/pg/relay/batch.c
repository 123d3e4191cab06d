/*-------------------------------------------------------------------------
 * batch.c
 *	  The notes a pass reads (docs/design.md 4.3): a batch, oldest first.
 *
 * The notes read are the oldest not done that the snapshot sees, up to
 * magic_sync.batch_notes, never "the notes after the last one read": ids are
 * drawn before commit, so a transaction that drew its id first may commit
 * last.  question.c closes the batch over the rows it touches; park.c
 * narrows it down to the notes a failure is about.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "batch_probe.h"
#include "floor.h"
#include "settings.h"
#include "temp.h"
#include "writer.h"

/*
 * The rows of the batch as ms_batch_read found them (ms_pending), and
 * whether a note of a group member is among its notes; -1: not known (the
 * batch changed since, ms_batch_rows)
 */
static int64 pending_rows = -1;
static bool member_notes = true;

/* rows set aside, and notes parked, tried again per pass */
#define RETRIES_PER_PASS 1000

/*
 * raise_floor: the floor once the pass commits (floor.h).  The batch is every
 * note it could read from the floor up, or the first of them: none of those
 * stays to be read (the pass deletes them, or parks them, and a note parked
 * lowers the floor when it is read again).  Under a settled value, the
 * snapshot saw every note there is; over it, a note may commit yet.
 */
static void
raise_floor(struct ms_floor *floor, int64 from, bool more, int64 last)
{
	int64		next = floor->settled + 1;

	if (more)
		next = Min(next, last + 1);
	floor->next = Max(from, next);
}

/*
 * the rows of the notes `notes` (as n) in ms_pending, the newest note of
 * each.  Only a row's own notes make a held version older; group notes move
 * sets.  A row a note of the batch moved (its key changed, to it or from
 * it) is never on the fast path (fast.c).
 */
#define PENDING(notes) \
	"INSERT INTO ms_pending (tab, key, note, moved) " \
	"SELECT tab, key, max(id), bool_or(moved) FROM (" \
	"  SELECT n.tab, n.key, n.id, n.old_key IS NOT NULL FROM " notes \
	"   WHERE n.source = 'r' AND n.key IS NOT NULL" \
	"  UNION ALL" \
	"  SELECT n.tab, n.old_key, n.id, true FROM " notes \
	"   WHERE n.source = 'r' AND n.old_key IS NOT NULL) c (tab, key, id, moved) " \
	"GROUP BY tab, key"

/* a probe's look for a row set aside, or a note parked, a minute ago or more (column: since, parked_at) */
typedef struct retry_look
{
	const char *column;
	TimestampTz before;
	bool		found;
} retry_look;

static bool
set_aside_before(HeapTuple row, TupleDesc desc, void *arg)
{
	retry_look *r = arg;
	bool		isnull;
	Datum		d = ms_probe_column(row, desc, r->column, &isnull);

	r->found = !isnull && DatumGetTimestampTz(d) < r->before;
	/* a parked note not done (notes_parked's predicate, checked on the row; sync.quarantine has no done) */
	if (r->found)
	{
		d = ms_probe_column(row, desc, "done", &isnull);
		r->found = isnull || !DatumGetBool(d);
	}
	return !r->found;
}

/* whether a row set aside or a note parked is to be tried again (a catalog without the indexes: asked) */
static bool
any_retry(ms_pass *p)
{
	TimestampTz before = GetCurrentTransactionStartTimestamp() - 60 * USECS_PER_SEC;
	retry_look	q = {"since", before, false};
	retry_look	n = {"parked_at", before, false};

	if (!ms_probe(&p->exec, "quarantine", "quarantine_pkey", set_aside_before, &q) || q.found)
		return true;
	return !ms_probe(&p->exec, "notes", "notes_parked", set_aside_before, &n) || n.found;
}

/* the batch's notes read by a statement, as the probe reads them (batch_probe.c) */
static void
read_statement(ms_pass *p, int64 from, ms_batch_counts *counts)
{
	bool		isnull;

	ms_exec(&p->exec, "WITH r AS (INSERT INTO ms_notes_read SELECT " MS_BATCH_COLUMNS " FROM sync.notes"
			" WHERE NOT done AND build <= 1 AND parked IS NULL AND id >= $2 ORDER BY id LIMIT $1"
			" RETURNING id, tab, source, key, old_key),"
			" w AS (" PENDING("r n") " RETURNING 1)"
			" SELECT count(*), max(id), (SELECT count(*) FROM w),"
			"  count(*) FILTER (WHERE source = 'm' AND key IS NOT NULL) FROM r",
			2, (Oid[]) {INT4OID, INT8OID}, (Datum[]) {Int32GetDatum(ms_batch_notes), Int64GetDatum(from)},
			ms_full_plan ? "n " : NULL, 0);
	counts->notes = DatumGetInt64(ms_value(0, 1, &isnull));
	counts->last = counts->notes > 0 ? DatumGetInt64(ms_value(0, 2, &isnull)) : 0;
	counts->rows = DatumGetInt64(ms_value(0, 3, &isnull));
	counts->members = DatumGetInt64(ms_value(0, 4, &isnull));
	SPI_freetuptable(SPI_tuptable);
}

int64
ms_batch_read(ms_pass *p, struct ms_floor *floor, ArrayType *held_ids, bool *more)
{
	int64		n;
	int64		unparked;
	int64		from;
	int64		last;
	bool		isnull;
	ms_batch_counts counts;

	ms_temp_table(&p->exec, "ms_notes_read");
	ms_temp_table(&p->exec, "ms_pending");
	pending_rows = -1;

	/*
	 * A row set aside a minute ago is noted again, and a note parked a
	 * minute ago read again: a fix may have been deployed.  A batch of them
	 * per pass (a row tried again and set aside again waits another minute),
	 * so many set aside at once never make one pass of them all.  One
	 * statement for both (the notes it makes are not parked, and the read
	 * below sees them), run only when a look in C finds one of either
	 * (ms_probe): mostly neither is there (issue 37).
	 */
	isnull = true;
	if (any_retry(p))
	{
		ms_exec_by_index(&p->exec,
						 "WITH q AS (INSERT INTO sync.notes (tab, key) SELECT tab, key FROM sync.quarantine"
						 "  WHERE since < now() - interval '1 minute' ORDER BY since LIMIT $1),"
						 " u AS (UPDATE sync.notes SET parked = NULL, parked_at = NULL WHERE ctid = ANY (ARRAY("
						 " SELECT ctid FROM sync.notes WHERE parked IS NOT NULL AND NOT done"
						 "  AND parked_at < now() - interval '1 minute' ORDER BY id LIMIT $1)) RETURNING id)"
						 " SELECT min(id) FROM u",
						 1, (Oid[]) {INT4OID}, (Datum[]) {Int32GetDatum(RETRIES_PER_PASS)}, NULL, 0);
		/* a note read again lies under the floor, most likely: the read begins at it */
		unparked = DatumGetInt64(ms_value(0, 1, &isnull));
	}
	/*
	 * The notes of a table held back (relay.c) are parked: read again a
	 * minute later, as any parked note, and planned once the table flows.
	 */
	if (held_ids != NULL)
		ms_exec(&p->exec,
				"UPDATE sync.notes SET parked = 'its table is held back: SELECT * FROM sync.check() says why',"
				" parked_at = now() WHERE tab = ANY ($1) AND parked IS NULL AND NOT done",
				1, (Oid[]) {INT4ARRAYOID}, (Datum[]) {PointerGetDatum(held_ids)}, NULL, 0);
	if (!isnull && floor != NULL)
		floor->floor = Min(floor->floor, unparked);
	from = floor != NULL ? floor->floor : 0;

	/*
	 * A later build's note is skipped by the read, and holds back nothing.
	 * Up to a batch, oldest first (question.c closes it over the rows it
	 * touches); the whole plan compares whole sets as they are now, and so
	 * reads every note.  Their rows go to ms_pending (emptied above) as they
	 * are read.  By a probe of notes_pending, in C (batch_probe.c: a
	 * statement fewer a pass, issue 37); under magic_sync.full_plan the
	 * statement reads them, and the pass fails where the probe found
	 * otherwise.
	 */
	if (ms_full_plan)
	{
		ms_batch_probed *probed;
		bool		looked = ms_batch_probe(&p->exec, from, -1, false, &counts, &probed);

		read_statement(p, from, &counts);
		if (looked)
			ms_batch_probe_compare(&p->exec, probed, &counts);
	}
	else if (!ms_batch_probe(&p->exec, from, ms_batch_notes, true, &counts, NULL))
		read_statement(p, from, &counts);
	else if (counts.notes > 0)
		/* tests count them (sql/30_relay_batch.sql, tests/e2e/fast.py) */
		ereport(DEBUG1, (errmsg_internal("magic_sync: %lld notes read by probe", (long long) counts.notes)));
	n = counts.notes;
	last = counts.last;
	pending_rows = counts.rows;
	member_notes = counts.members > 0;
	*more = !ms_full_plan && n == ms_batch_notes;
	if (floor != NULL)
		raise_floor(floor, from, *more, last);
	if (n == 0)
		return 0;
	ms_analyze(&p->exec, "ms_notes_read, ms_pending", (uint64) n);
	return n;
}

int64
ms_batch_floor(const struct ms_floor *floor)
{
	return floor != NULL ? floor->floor : 0;
}

void
ms_batch_rows(ms_executor *x)
{
	ms_temp_empty(x, "ms_pending");
	ms_exec(x, PENDING(MS_BATCH_NOTES), 0, NULL, NULL, NULL, 0);
	/* the batch changed: its member notes not counted */
	pending_rows = -1;
}

bool
ms_batch_rows_all(uint64 rows)
{
	return pending_rows >= 0 && (uint64) pending_rows == rows && !member_notes;
}

int64
ms_batch_rows_known(void)
{
	return member_notes ? -1 : pending_rows;
}

void
ms_batch_only(ms_pass *p, ArrayType *ids)
{
	Oid			types[1] = {INT8ARRAYOID};
	Datum		values[1] = {PointerGetDatum(ids)};

	ms_temp_empty(&p->exec, "ms_notes_read");
	ms_exec(&p->exec, "INSERT INTO ms_notes_read SELECT " MS_BATCH_COLUMNS " FROM sync.notes"
			" WHERE id = ANY ($1::bigint[]) AND NOT done",
			1, types, values, NULL, 0);
	ms_batch_rows(&p->exec);
}

int
ms_batch_by_table(ms_pass *p, int64 **ids, int **tabs)
{
	int			n;

	ms_exec(&p->exec, "SELECT n.id, n.tab FROM " MS_BATCH_NOTES " ORDER BY n.tab, n.id",
			0, NULL, NULL, NULL, 0);
	n = (int) SPI_processed;
	*ids = palloc(sizeof(int64) * Max(n, 1));
	*tabs = palloc(sizeof(int) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		(*ids)[i] = DatumGetInt64(ms_value(i, 1, &isnull));
		(*tabs)[i] = DatumGetInt32(ms_value(i, 2, &isnull));
	}
	SPI_freetuptable(SPI_tuptable);
	return n;
}

/* the rights the statement deleting the notes would need of sync.notes (relid), as self */
static void
notes_rights(Oid relid, Oid self)
{
	AclResult	acl = pg_class_aclcheck(relid, self, ACL_DELETE);

	if (acl == ACLCHECK_OK)
		acl = pg_class_aclcheck(relid, self, ACL_SELECT);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, "notes");
}

/*
 * The note at `at` deleted, if it is the note `id` the snapshot sees, as a
 * DELETE by its address would (ExecDelete): a note another transaction
 * changed or deleted since the snapshot fails the pass, a serialization
 * failure.
 */
static void
delete_note(Relation notes, Snapshot snapshot, int idcol, int64 id, ItemPointer at)
{
	HeapTupleData tup;
	Buffer		buf;
	bool		isnull;
	bool		same;
	TM_FailureData tmfd;
	TM_Result	result;

	tup.t_self = *at;
	if (!heap_fetch(notes, snapshot, &tup, &buf, false))
		return;
	same = DatumGetInt64(heap_getattr(&tup, idcol, RelationGetDescr(notes), &isnull)) == id && !isnull;
	ReleaseBuffer(buf);
	if (!same)
		return;
	result = table_tuple_delete(notes, at, GetCurrentCommandId(true), snapshot, InvalidSnapshot, true, &tmfd, false);
	/* TM_SelfModified: deleted by this command already, one note read twice */
	ms_tm_check(result, "deleting a note");
}

void
ms_batch_done(ms_pass *p)
{
	Oid			ns = get_namespace_oid("sync", false);
	Oid			relid = get_relname_relid("notes", ns);
	Oid			readid = RangeVarGetRelid(makeRangeVar("pg_temp", "ms_notes_read", -1), NoLock, false);
	Relation	notes;
	Relation	read;
	TableScanDesc scan;
	HeapTuple	tup;
	int			idcol;
	int			readid_col;
	int			at_col;

	/*
	 * By the addresses the notes were read at: the batch's notes and no
	 * other, whatever sync.notes' statistics say.  An address is the note's
	 * own until the pass commits: the pass updates none of its batch after
	 * reading it (park.c reads the batch again after parking), and a note
	 * another transaction changed since the snapshot fails the pass, as it
	 * did by id.  Deleted, not marked done: marking wrote a new version of
	 * each note (done is in the partial indexes' predicates, so never a HOT
	 * update), indexed in notes_done, that pruning then deleted.  A reader
	 * sees the same either way: a note not done, until the pass commits.
	 * Notes marked done otherwise (an unmirrored table's, follow.c) are
	 * pruned as before.  In C, as the statement did it ("DELETE FROM
	 * sync.notes n USING pg_temp.ms_notes_read r WHERE n.ctid = ANY (...) AND
	 * n.id = r.id"), with its rights checked as the pass's: sync.notes has no
	 * trigger, rule or key that refers to it, and a deletion leaves the
	 * indexes to pruning; a statement's start and end cost a one-row pass
	 * more than the deletion (issue 37).
	 */
	if (!OidIsValid(relid))
		elog(ERROR, "magic_sync: sync.notes is missing");
	notes_rights(relid, p->exec.self);
	CommandCounterIncrement();
	PushCopiedSnapshot(p->exec.snapshot);
	UpdateActiveSnapshotCommandId();
	notes = table_open(relid, RowExclusiveLock);
	read = table_open(readid, AccessShareLock);
	idcol = SPI_fnumber(RelationGetDescr(notes), "id");
	readid_col = SPI_fnumber(RelationGetDescr(read), "id");
	at_col = SPI_fnumber(RelationGetDescr(read), "at");
	if (idcol <= 0 || readid_col <= 0 || at_col <= 0)
		elog(ERROR, "magic_sync: sync.notes or pg_temp.ms_notes_read lacks a column");
	scan = table_beginscan(read, GetActiveSnapshot(), 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		idnull;
		bool		atnull;
		Datum		id = heap_getattr(tup, readid_col, RelationGetDescr(read), &idnull);
		Datum		at = heap_getattr(tup, at_col, RelationGetDescr(read), &atnull);

		if (!idnull && !atnull)
			delete_note(notes, GetActiveSnapshot(), idcol, DatumGetInt64(id), (ItemPointer) DatumGetPointer(at));
	}
	table_endscan(scan);
	table_close(read, NoLock);
	table_close(notes, NoLock);
	PopActiveSnapshot();
	/* what follows sees them gone */
	CommandCounterIncrement();
}
