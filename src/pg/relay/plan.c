/*-------------------------------------------------------------------------
 * plan.c
 *	  The plan: what each replica should hold (sync.wanted), compared with
 *	  what the engine records it holds (sync.held).
 *
 *	    send = wanted - held, and held rows a note of this snapshot changed
 *	    take = held - wanted
 *
 * Rows that cannot go (sync.quarantine) are never wanted, nor any row that
 * points at one: a replica never holds a row without its parents.  Nor is a
 * blocked row a reason to want what it points at: wanted sets are closed
 * over the rows that go (wanted.c, question.c), or a parent sent for a row
 * the replica never holds would stay when that row leaves its set -- nothing
 * it holds would put the parent in question.  A quarantined row with a note
 * newer than its quarantine is tried again.
 *
 * The notes planned are the batch (batch.c); question.c plans around what
 * they changed, or (magic_sync.full_plan) the whole wanted set is compared.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/uuid.h"

#include "catalog.h"
#include "owner.h"
#include "fast.h"
#include "plan.h"
#include "question.h"
#include "retry.h"
#include "settings.h"
#include "temp.h"
#include "wanted.h"

/* 8 MB: below it, counting a snapshot's rows beforehand costs little */
#define WHOLE_LARGE_BLOCKS 1024

void
ms_plan_prepare(ms_pass *p)
{
	ms_temp_table(&p->exec, "ms_blocked");
	ms_temp_table(&p->exec, "ms_unplanned");
	ms_temp_table(&p->exec, "ms_released");
	ms_fast_held_back(true);
	ms_temp_table(&p->exec, "ms_send");
	ms_temp_table(&p->exec, "ms_take");
}

/* add to pg_temp.<set> (tab, key) every row pointing at one of its rows, to a fixpoint */
static void
children_closure(ms_pass *p, List *tables, const char *set)
{
	ListCell   *lc;
	bool		grew;

	do
	{
		grew = false;
		foreach(lc, tables)
		{
			ms_table   *child = lfirst(lc);

			for (int f = 0; f < child->nfkeys; f++)
			{
				ms_fkey    *fk = &child->fkeys[f];
				ms_table   *parent = ms_catalog_find(tables, fk->parent);
				StringInfoData sql;
				Oid			types[1] = {INT4OID};
				Datum		values[1] = {Int32GetDatum(parent->id)};
				ms_as_owner as;

				initStringInfo(&sql);
				appendStringInfo(&sql,
								 "INSERT INTO pg_temp.%s SELECT %d, %s FROM pg_temp.%s b "
								 "JOIN %s p ON %s JOIN %s c ON %s WHERE b.tab = $1 ON CONFLICT DO NOTHING",
								 set, child->id, ms_key_expr(child, "c"), set,
								 parent->qualified, ms_key_match(parent, "p", "b.key"),
								 child->qualified, ms_fkey_match(child, fk, "c", "p", true));
				/* the child's rows, read as the child's owner */
				ms_owner_begin(&as, MS_OWNER_OF(p, child->relid));
				ms_exec(&p->exec, sql.data, 1, types, values, NULL, 0);
				ms_owner_end(&as);
				grew |= SPI_processed > 0;
			}
		}
	} while (grew);
}

/* a probe's look for any row */
static bool
any_row(HeapTuple row, TupleDesc desc, void *arg)
{
	(void) row;
	(void) desc;
	return !(*(bool *) arg = true);
}

/* a probe's look for a parked note of a row (notes_parked: parked, and not done) */
static bool
parked_note(HeapTuple row, TupleDesc desc, void *arg)
{
	bool	   *found = arg;
	bool		isnull;
	Datum		d;

	(void) ms_probe_column(row, desc, "parked", &isnull);
	if (isnull)
		return true;
	d = ms_probe_column(row, desc, "done", &isnull);
	if (isnull || DatumGetBool(d))
		return true;
	(void) ms_probe_column(row, desc, "key", &isnull);
	if (isnull)
		return true;
	d = ms_probe_column(row, desc, "source", &isnull);
	*found = !isnull && DatumGetChar(d) == 'r';
	return !*found;
}

/*
 * blocked: quarantined rows, then every row pointing at a blocked row.  A
 * quarantined row with a note newer than its quarantine (it changed, or is
 * tried again) is released, and so is everything that was blocked because of
 * it: those rows have no note of their own, so they are planned as changed.
 */
static bool
plan_blocked(ms_pass *p, List *tables, bool dry)
{
	bool		blocked = false;
	bool		quarantined;
	bool		parked;
	bool		isnull;

	/*
	 * Whether any row is quarantined or any note parked, in one look by their
	 * indexes, in C (ms_probe): mostly none is, and the statements that would
	 * find them are each a write to a temporary table a small pass need not
	 * start.  A catalog without those indexes asks by SQL.
	 */
	quarantined = parked = false;
	if (!ms_probe(&p->exec, "quarantine", "quarantine_pkey", any_row, &quarantined) ||
		!ms_probe(&p->exec, "notes", "notes_parked", parked_note, &parked))
	{
		ms_exec_by_index(&p->exec, "SELECT EXISTS (SELECT FROM sync.quarantine),"
						 " EXISTS (SELECT FROM sync.notes WHERE parked IS NOT NULL AND NOT done"
						 "         AND source = 'r' AND key IS NOT NULL)",
						 0, NULL, NULL, NULL, 0);
		quarantined = DatumGetBool(ms_value(0, 1, &isnull));
		parked = DatumGetBool(ms_value(0, 2, &isnull));
	}
	if (quarantined)
	{
		ms_exec(&p->exec,
				"INSERT INTO ms_released SELECT q.tab, q.key FROM sync.quarantine q JOIN ms_pending n"
				"    ON n.tab = q.tab AND n.key = q.key WHERE n.note > q.note",
				0, NULL, NULL, NULL, 0);
		/* a dry run (ms_plan_dry) writes nothing of the catalog: released rows are left out instead */
		if (SPI_processed > 0)
		{
			if (!dry)
				ms_exec(&p->exec, "DELETE FROM sync.quarantine q USING ms_released r WHERE r.tab = q.tab AND r.key = q.key",
						0, NULL, NULL, NULL, 0);
			children_closure(p, tables, "ms_released");
		}
		ms_exec(&p->exec, dry ? "INSERT INTO ms_blocked SELECT q.tab, q.key FROM sync.quarantine q"
				" WHERE NOT EXISTS (SELECT FROM ms_released r WHERE r.tab = q.tab AND r.key = q.key)"
				: "INSERT INTO ms_blocked SELECT tab, key FROM sync.quarantine",
				0, NULL, NULL, NULL, 0);
		blocked = SPI_processed > 0;
		if (blocked)
			children_closure(p, tables, "ms_blocked");
	}
	/* the rows of parked notes: their rules are not even evaluated (park.c) */
	if (parked)
		ms_exec_by_index(&p->exec, "INSERT INTO ms_unplanned SELECT DISTINCT tab, key FROM sync.notes"
						 " WHERE parked IS NOT NULL AND NOT done AND source = 'r' AND key IS NOT NULL",
						 0, NULL, NULL, NULL, 0);
	/* emptied by ms_plan_prepare, filled only here */
	ms_fast_held_back(quarantined || parked);
	return blocked;
}

static int
uuid_order(const void *a, const void *b)
{
	return memcmp(DatumGetPointer(*(const Datum *) a), DatumGetPointer(*(const Datum *) b), UUID_LEN);
}

/* the replicas of `replicas` not in `provisioning`, in C rather than a statement; NULL when none */
static ArrayType *
not_provisioned(ArrayType *replicas, ArrayType *provisioning)
{
	Datum	   *r;
	Datum	   *v;
	int			nr;
	int			nv;
	int			n = 0;

	deconstruct_array(replicas, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, &r, NULL, &nr);
	deconstruct_array(provisioning, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, &v, NULL, &nv);
	qsort(v, nv, sizeof(Datum), uuid_order);
	for (int i = 0; i < nr; i++)
		if (nv == 0 || bsearch(&r[i], v, nv, sizeof(Datum), uuid_order) == NULL)
			r[n++] = r[i];
	return n == 0 ? NULL : construct_array(r, n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR);
}

/*
 * The rows of a table sent whole (ms_wanted_whole) that a replica
 * provisioned gets: every row not blocked, counted as record.c's read of
 * them (load.c) finds them, in the same snapshot.  Read as the table's owner.
 */
static int64
whole_rows(ms_pass *p, ms_table *t, bool blocked)
{
	ms_as_owner as;

	ms_owner_begin(&as, MS_OWNER_OF(p, t->relid));
	ms_exec(&p->exec, psprintf("SELECT count(*) FROM %s t%s", t->qualified, ms_whole_filter(t, blocked)),
			0, NULL, NULL, NULL, 0);
	ms_owner_end(&as);
	return ms_int64();
}

/*
 * A replica provisioned from scratch: its whole wanted set, it holds
 * nothing.  The rows of a table it wants whole are no plan's: record.c
 * reads the table once and sends every row of it to each (load.c), rather
 * than writing one key per row here, and reading them back by key.
 */
/*
 * whole_large: whether the tables read whole (whole, by table id) take
 * WHOLE_LARGE_BLOCKS or more: their rows are then counted as they are read
 * (record.c), not beforehand, and each snapshot's Begin is written last
 * (pack.c's ms_begin_first).  Tables with a partitioned one among them are
 * counted beforehand, as small ones are.
 */
static bool
whole_large(List *tables, const bool *whole)
{
	BlockNumber blocks = 0;
	ListCell   *lc;

	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);
		Relation	rel;
		bool		stored;

		if (!whole[t->id])
			continue;
		/* its size, as a read of it finds it: by the pass, which reads it whole */
		rel = table_open(t->relid, AccessShareLock);
		stored = RELKIND_HAS_STORAGE(rel->rd_rel->relkind);
		if (stored)
			blocks += RelationGetNumberOfBlocks(rel);
		table_close(rel, AccessShareLock);
		if (!stored)
			return false;
	}
	return blocks >= WHOLE_LARGE_BLOCKS;
}

static void
plan_provisioned(ms_pass *p, ArrayType *provisioning, const ms_plan_in *in, ms_planned *out)
{
	int64		rows;
	ListCell   *lc;
	bool		isnull;

	out->whole = ms_whole_tables && !in->fault->no_whole ? ms_wanted_whole(in->cat->tables) : NULL;
	/* straight into what is sent: it is all of it (never a blocked row: wanted.c) */
	rows = (int64) ms_wanted_into(MS_READER(p, in->cat->tables), provisioning, "ms_send", out->whole, out->blocked);
	if (out->whole != NULL)
	{
		/* whether a held row of theirs looks up a note (record.c) */
		ms_exec(&p->exec, "SELECT EXISTS (SELECT FROM pg_temp.ms_pending)", 0, NULL, NULL, NULL, 0);
		out->noted = DatumGetBool(ms_value(0, 1, &isnull));
		/* large ones are not read twice: counted as record.c reads them */
		out->whole_later = whole_large(in->cat->tables, out->whole);
		foreach(lc, in->cat->tables)
		{
			ms_table   *t = lfirst(lc);

			if (out->whole[t->id] && !out->whole_later)
				out->whole_rows += whole_rows(p, t, out->blocked);
		}
	}

	/* one replica: what its snapshot's Begin says, without counting again */
	if (ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning)) == 1)
		out->snapshot_rows = rows + out->whole_rows;
	ms_exec(&p->exec, "UPDATE ms_send s SET note = n.note FROM ms_pending n WHERE n.tab = s.tab AND n.key = s.key",
			0, NULL, NULL, NULL, 0);
}

/* magic_sync.full_plan: the wanted sets of these replicas compared whole with what they hold */
static void
plan_whole(ms_pass *p, List *tables, ArrayType *replicas, bool blocked)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(replicas)};

	/* never a blocked row (wanted.c) */
	ms_wanted_fill(MS_READER(p, tables), replicas, blocked);

	/*
	 * A held row is sent again when a note of this snapshot is newer than
	 * the version it holds; one it refused, only once the row changed since.
	 */
	ms_exec(&p->exec,
			"INSERT INTO ms_send (replica, tab, key, note) "
			"SELECT w.replica, w.tab, w.key, coalesce(n.note, 0) "
			"  FROM pg_temp.ms_wanted w "
			"  LEFT JOIN sync.held h ON h.replica = w.replica AND h.tab = w.tab "
			"       AND h.key = w.key AND h.taken IS NULL "
			"  LEFT JOIN ms_pending n ON n.tab = w.tab AND n.key = w.key "
			" WHERE h.replica IS NULL OR n.note > h.note",
			0, NULL, NULL, NULL, 0);
	ms_exec(&p->exec,
			"INSERT INTO ms_take (replica, tab, key) "
			"SELECT h.replica, h.tab, h.key FROM sync.held h "
			" WHERE h.replica = ANY ($1) AND h.taken IS NULL "
			"   AND NOT EXISTS (SELECT FROM pg_temp.ms_wanted w "
			"                    WHERE w.replica = h.replica AND w.tab = h.tab AND w.key = h.key)",
			1, types, values, NULL, 0);
}

char *
ms_whole_filter(ms_table *t, bool blocked)
{
	if (!blocked)
		return "";
	return psprintf(" WHERE NOT EXISTS (SELECT FROM pg_temp.ms_blocked b WHERE b.tab = %d AND b.key = %s)",
					t->id, ms_key_expr(t, "t"));
}

void
ms_plan(ms_pass *p, ArrayType *replicas, ArrayType *provisioning, const ms_plan_in *in, ms_planned *out)
{
	ArrayType  *around;
	ms_sent_counts counted = {0};
	bool		retried = false;

	out->blocked = plan_blocked(p, in->cat->tables, false);
	out->snapshot_rows = -1;
	out->whole = NULL;
	out->whole_rows = 0;
	out->whole_later = false;
	out->planned = 0;
	out->noted = false;
	out->joined = 0;
	if (ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning)) > 0)
		plan_provisioned(p, provisioning, in, out);

	/* every other: around what changed, or (magic_sync.full_plan) compared whole */
	around = not_provisioned(replicas, provisioning);
	if (around != NULL && !ms_full_plan)
		out->joined = ms_plan_question(MS_READER(p, in->cat->tables), around, out->blocked, in->more, in->replicas_all, in->floor,
									   ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning)) > 0, &counted);
	else if (around != NULL)
		plan_whole(p, in->cat->tables, around, out->blocked);
	/* rows a replica refused, due again: to it alone (retry.c) */
	if (around != NULL)
		retried = ms_plan_refused(p, around, in->fault, in->cat->tables);
	/* held rows marked replace with nothing on its way: to that replica alone (retry.c) */
	if (around != NULL)
		retried |= ms_plan_replaced(p, around, in->fault, in->cat->tables);
	/* a held row whose edit was dropped goes as a replacement of the replica's copy */
	/* few rows are marked (held_replace): read by that index, never the held set whole */
	/*
	 * and the rows planned counted in the same statement, with the kinds
	 * the held rows' writes look for (heldrows.c): marking changes neither,
	 * and nothing writes ms_send or ms_take after it.  A statement that each
	 * of those asked for cost a one-row pass its executor (issue 37).
	 */
	/*
	 * A pass of fast rows alone: the statement that wrote ms_send counted it,
	 * and marked its replacements (fast.c); nothing wrote ms_send or ms_take
	 * since.  A statement fewer (issue 37).
	 */
	if (counted.valid && !retried)
	{
		out->taken = 0;
		out->planned = counted.rows;
		out->fresh = counted.fresh;
		out->addressed = counted.addressed;
		out->unaddressed = counted.unaddressed;
		ms_analyze(&p->exec, "ms_send, ms_take", (uint64) out->planned);
		return;
	}
	ms_exec(&p->exec, "WITH u AS (UPDATE ms_send s SET replace = true FROM sync.held h"
			" WHERE h.replace AND h.replica = s.replica AND h.tab = s.tab AND h.key = s.key)"
			" SELECT s.n, (SELECT count(*) FROM ms_take), s.fresh, s.addressed, s.unaddressed"
			"  FROM (SELECT count(*) AS n, coalesce(bool_or(fresh), false) AS fresh,"
			"        coalesce(bool_or(held IS NOT NULL), false) AS addressed,"
			"        coalesce(bool_or(NOT fresh AND held IS NULL), false) AS unaddressed FROM ms_send) s",
			0, NULL, NULL, NULL, 0);
	{
		bool		isnull;

		out->taken = DatumGetInt64(ms_value(0, 2, &isnull));
		out->planned = Max(DatumGetInt64(ms_value(0, 1, &isnull)), out->taken);
		out->fresh = DatumGetBool(ms_value(0, 3, &isnull));
		out->addressed = DatumGetBool(ms_value(0, 4, &isnull));
		out->unaddressed = DatumGetBool(ms_value(0, 5, &isnull));
		SPI_freetuptable(SPI_tuptable);
	}
	ms_analyze(&p->exec, "ms_send, ms_take", (uint64) out->planned);
}

/*
 * ms_plan_dry: the batch planned for these replicas (none being
 * provisioned) as ms_plan plans it, but for the rows refused or marked to be
 * replaced, which no note sends: what the batch alone moves, writing nothing
 * but the plan's temporary tables (sync.would_send).
 */
void
ms_plan_dry(ms_pass *p, ArrayType *replicas, const ms_plan_in *in)
{
	bool		blocked = plan_blocked(p, in->cat->tables, true);

	if (!ms_full_plan)
		(void) ms_plan_question(MS_READER(p, in->cat->tables), replicas, blocked, in->more, in->replicas_all, in->floor,
								true, NULL);
	else
		plan_whole(p, in->cat->tables, replicas, blocked);
}
