/*-------------------------------------------------------------------------
 * park.c
 *	  A permanent failure of a pass, narrowed down to the notes it is about
 *	  (docs/design.md 6.3): those notes are parked, their rows set aside in
 *	  sync.quarantine, and the pass goes on without them.  Nothing else
 *	  waits for them.  A minute later they are tried again, since what they
 *	  wait for is a fix deployed.
 *
 * Narrowing plans parts of the batch, each in a subtransaction rolled back
 * whatever it did: no note at all (a failure it still meets is not about
 * notes: the pass fails, as before), then the notes of one table at a time,
 * then, in a table whose notes fail, halves while one half fails and the
 * other goes through.  Halves that both fail are narrowed each in turn,
 * within a budget of trials; past it, or when only the whole fails, the
 * whole is parked.  When no table's notes fail alone, the batch is halved
 * the same way across tables.  A transient failure met on the way fails the
 * pass, to be retried whole.
 *
 * A parked note's row is quarantined: a replica that holds a version of it
 * has that version taken back with whatever points at it there (plan.c), so
 * no replica keeps a version the planner cannot reason about.  A row whose
 * key does not even parse for its table is not: nothing is held under it.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/uuid.h"

#include "batch.h"
#include "catalog.h"
#include "owner.h"
#include "park.h"
#include "plan.h"
#include "record.h"
#include "subxact.h"

#define TRIALS 64				/* plans tried per narrowing, at most */
#define KEYS_ONE_BY_ONE 100		/* keys checked alone when a table's do not all parse */

typedef struct trial
{
	ms_pass    *p;
	ArrayType  *replicas;
	ArrayType  *provisioning;
	const ms_plan_in *in;		/* what the pass told the planner */
	const ms_record_in *rin;	/* and the recording */
	int64	   *ids;
	int			n;
} trial;

typedef struct narrowing
{
	trial		t;
	int64	   *ids;			/* the batch, by table then id */
	int		   *tabs;
	int			n;
	bool	   *parked;			/* per note of the batch */
	char	  **why;
	int			trials;
} narrowing;

static ArrayType *
ids_array(const int64 *ids, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(ids[i]);
	return construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

static void
plan_part(void *arg)
{
	trial	   *t = arg;
	ms_planned	plan;
	ms_recorded did;

	ms_batch_only(t->p, ids_array(t->ids, t->n));
	ms_plan(t->p, t->replicas, t->provisioning, t->in, &plan);
	(void) ms_record(t->p, t->rin, t->replicas, t->provisioning, &plan, &did);
}

/* whether planning these notes alone fails for good; why, when it does */
static bool
fails(narrowing *w, int lo, int hi, char **why)
{
	ms_pass		saved = *w->t.p;
	ms_pass_fault fault = *w->t.in->fault;
	ErrorData  *e = NULL;
	bool		ok;

	w->trials++;
	w->t.ids = w->ids + lo;
	w->t.n = hi - lo;
	ok = ms_trial(plan_part, &w->t, &e);
	*w->t.p = saved;
	*w->t.in->fault = fault;
	if (ok)
	{
		ereport(DEBUG1, (errmsg_internal("magic_sync: narrowing: trial %d, %d notes from %lld: planned",
										 w->trials, hi - lo, hi > lo ? (long long) w->ids[lo] : 0LL)));
		return false;
	}
	*why = psprintf("%s (SQLSTATE %s)", e->message, unpack_sql_state(e->sqlerrcode));
	ereport(DEBUG1, (errmsg_internal("magic_sync: narrowing: trial %d, %d notes from %lld: %s",
									 w->trials, hi - lo, hi > lo ? (long long) w->ids[lo] : 0LL, *why)));
	FreeErrorData(e);
	return true;
}

static void
park_part(narrowing *w, int lo, int hi, char *why)
{
	for (int i = lo; i < hi; i++)
	{
		w->parked[i] = true;
		w->why[i] = why;
	}
}

/* [lo, hi) fails with why: park what it is about */
static void
narrow(narrowing *w, int lo, int hi, char *why)
{
	int			mid = lo + (hi - lo) / 2;
	char	   *wl = NULL;
	char	   *wr = NULL;
	bool		l;
	bool		r;

	if (hi - lo == 1 || w->trials + 2 > TRIALS)
	{
		park_part(w, lo, hi, why);
		return;
	}
	l = fails(w, lo, mid, &wl);
	r = fails(w, mid, hi, &wr);
	if (!l && !r)
		park_part(w, lo, hi, why);	/* only together */
	if (l)
		narrow(w, lo, mid, wl);
	if (r)
		narrow(w, mid, hi, wr);
}

/* keys of one table, for check_keys */
typedef struct key_check
{
	ms_pass    *p;
	ms_table   *t;
	ArrayType  *keys;
} key_check;

static void
check_keys(void *arg)
{
	key_check  *k = arg;
	ms_table   *t = k->t;
	ArrayType  *keys = k->keys;
	StringInfoData sql;
	Oid			types[1] = {TEXTARRAYOID};
	Datum		values[1] = {PointerGetDatum(keys)};
	bool		isnull;
	ms_as_owner as;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT count(*) FROM unnest($1::text[]) k(key) WHERE cardinality(sync.key_parts(k.key)) = %d",
					 t->nkey);
	for (int k = 0; k < t->nkey; k++)
		appendStringInfo(&sql, " AND (sync.key_parts(k.key))[%d]::%s IS NOT NULL", k + 1,
						 format_type_be_qualified(t->columns[t->key[k]].type));
	/* a cast to a domain of the owner's runs its check: as the owner */
	ms_owner_begin(&as, MS_OWNER_OF(k->p, t->relid));
	ms_exec(&k->p->exec, sql.data, 1, types, values, NULL, 0);
	ms_owner_end(&as);
	if (DatumGetInt64(ms_value(0, 1, &isnull)) != ArrayGetNItems(ARR_NDIM(keys), ARR_DIMS(keys)))
		ereport(ERROR, (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
						errmsg("a key does not parse for table \"%s\"", t->name)));
}

static bool
keys_parse(ms_pass *p, ms_table *t, Datum *keys, int n)
{
	key_check	k = {p, t, construct_array(keys, n, TEXTOID, -1, false, TYPALIGN_INT)};
	ErrorData  *e = NULL;

	if (ms_try(check_keys, &k, &e))
		return true;
	FreeErrorData(e);
	return false;
}

/*
 * quarantine the rows of the parked notes whose keys parse for their table,
 * as of just before their note: that note, read again, tries them again
 */
static void
quarantine_rows(ms_pass *p, List *tables, int64 *ids, int n, char *why)
{
	Oid			types[1] = {INT8ARRAYOID};
	Datum		values[1] = {PointerGetDatum(ids_array(ids, n))};
	int			rows;
	int		   *tabs;
	Datum	   *keys;
	int64	   *notes;

	/* copied out: what runs next replaces SPI_tuptable */
	ms_exec(&p->exec, "SELECT tab, key, min(id) FROM sync.notes WHERE id = ANY ($1) AND source = 'r' AND key IS NOT NULL"
			" GROUP BY tab, key ORDER BY tab, key", 1, types, values, NULL, 0);
	rows = (int) SPI_processed;
	tabs = palloc(sizeof(int) * Max(rows, 1));
	keys = palloc(sizeof(Datum) * Max(rows, 1));
	notes = palloc(sizeof(int64) * Max(rows, 1));
	for (int i = 0; i < rows; i++)
	{
		bool		isnull;

		tabs[i] = DatumGetInt32(ms_value(i, 1, &isnull));
		keys[i] = PointerGetDatum(DatumGetTextPCopy(ms_value(i, 2, &isnull)));
		notes[i] = DatumGetInt64(ms_value(i, 3, &isnull));
	}
	for (int from = 0, to; from < rows; from = to)
	{
		ms_table   *t = ms_catalog_find(tables, tabs[from]);
		bool		all;

		for (to = from; to < rows && tabs[to] == tabs[from]; to++)
			;
		all = t != NULL && keys_parse(p, t, keys + from, to - from);
		for (int i = from; i < to; i++)
		{
			Oid			qtypes[4] = {INT4OID, TEXTOID, INT8OID, TEXTOID};
			Datum		qvalues[4] = {Int32GetDatum(tabs[i]), keys[i], Int64GetDatum(notes[i] - 1),
			CStringGetTextDatum(why)};

			if (!all && (t == NULL || to - from > KEYS_ONE_BY_ONE || !keys_parse(p, t, keys + i, 1)))
				continue;
			ms_exec(&p->exec, "INSERT INTO sync.quarantine (tab, key, note, reason, sqlstate)"
					" VALUES ($1, $2, $3, 'planning failed: ' || $4, NULL)"
					" ON CONFLICT (tab, key) DO UPDATE SET note = EXCLUDED.note, reason = EXCLUDED.reason,"
					" sqlstate = EXCLUDED.sqlstate, since = now()",
					4, qtypes, qvalues, NULL, 0);
		}
	}
}

/* uuid[] a minus b, never NULL */
static ArrayType *
minus(ms_pass *p, ArrayType *a, ArrayType *b)
{
	Oid			types[2] = {UUIDARRAYOID, UUIDARRAYOID};
	Datum		values[2] = {PointerGetDatum(a), PointerGetDatum(b)};

	ms_exec(&p->exec, "SELECT coalesce(array_agg(x), '{}') FROM unnest($1::uuid[]) x WHERE x <> ALL ($2)",
			2, types, values, NULL, 0);
	return ms_array();
}

/*
 * snapshots: the plan fails without any note.  When it goes through without
 * the replicas being provisioned, the snapshots that fail alone are set aside
 * (sync.replicas.provision_failed_at, last_error) and left out of this pass:
 * the others are planned.  False when that is not what fails.
 */
static bool
snapshots(narrowing *w, ArrayType **replicas, ArrayType **provisioning)
{
	ms_pass    *p = w->t.p;
	int			n = ArrayGetNItems(ARR_NDIM(*provisioning), ARR_DIMS(*provisioning));
	pg_uuid_t  *ids = (pg_uuid_t *) ARR_DATA_PTR(*provisioning);
	ArrayType  *failing;
	Datum	   *bad = palloc(sizeof(Datum) * Max(n, 1));
	char	  **why = palloc(sizeof(char *) * Max(n, 1));
	char	   *w0 = NULL;
	int			nbad = 0;

	if (n == 0)
		return false;
	w->t.replicas = minus(p, *replicas, *provisioning);
	w->t.provisioning = construct_empty_array(UUIDOID);
	if (fails(w, 0, 0, &w0))
		return false;
	for (int i = 0; i < n && w->trials < TRIALS; i++)
	{
		ArrayType  *one = construct_array((Datum[]) {UUIDPGetDatum(&ids[i])}, 1, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR);

		w->t.replicas = one;
		w->t.provisioning = one;
		if (fails(w, 0, 0, &why[nbad]))
			bad[nbad++] = UUIDPGetDatum(&ids[i]);
	}
	if (nbad == 0)
		return false;			/* only together: the pass fails */
	failing = construct_array(bad, nbad, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR);
	for (int i = 0; i < nbad; i++)
	{
		Oid			types[2] = {UUIDOID, TEXTOID};
		Datum		values[2] = {bad[i], CStringGetTextDatum(why[i])};

		ms_exec(&p->exec, "UPDATE sync.replicas SET provision_failed_at = now(), last_error_at = now(),"
				" last_error = 'its snapshot cannot be planned: ' || $2 WHERE id = $1",
				2, types, values, NULL, 0);
		ereport(WARNING,
				(errmsg("magic_sync: the snapshot of replica %s cannot be planned and is set aside",
						DatumGetCString(DirectFunctionCall1(uuid_out, bad[i]))),
				 errdetail("%s", why[i]),
				 errhint("It is tried again a minute later; the other replicas are planned meanwhile.")));
	}
	*replicas = minus(p, *replicas, failing);
	*provisioning = minus(p, *provisioning, failing);
	return true;
}

bool
ms_park(ms_pass *p, ArrayType **replicas, ArrayType **provisioning, const ms_plan_in *in,
		const ms_record_in *rin, int64 *nparked)
{
	narrowing	w;
	char	   *why = NULL;
	int64	   *rest;
	int			nrest = 0;
	int			parked = 0;
	bool		failed_alone = false;

	*nparked = 0;
	memset(&w, 0, sizeof w);
	w.t.p = p;
	w.t.replicas = *replicas;
	w.t.provisioning = *provisioning;
	w.t.in = in;
	w.t.rin = rin;

	/* the batch, by table */
	w.n = ms_batch_by_table(p, &w.ids, &w.tabs);
	w.parked = palloc0(sizeof(bool) * Max(w.n, 1));
	w.why = palloc0(sizeof(char *) * Max(w.n, 1));

	/* without any note, it fails all the same: not about notes; maybe a snapshot */
	if (fails(&w, 0, 0, &why))
		return snapshots(&w, replicas, provisioning);
	for (int lo = 0, hi; lo < w.n; lo = hi)
	{
		for (hi = lo; hi < w.n && w.tabs[hi] == w.tabs[lo]; hi++)
			;
		if (w.trials < TRIALS && fails(&w, lo, hi, &why))
		{
			narrow(&w, lo, hi, why);
			failed_alone = true;
		}
	}
	/*
	 * Every table's notes go alone, and fail together (code of the user's
	 * that remembers what it was asked before): narrowed down across tables,
	 * by halves, down to the whole batch when only the whole fails.
	 */
	if (!failed_alone && w.n > 0 && w.trials < TRIALS && fails(&w, 0, w.n, &why))
		narrow(&w, 0, w.n, why);

	/* park them, quarantine their rows, and read the rest */
	rest = palloc(sizeof(int64) * Max(w.n, 1));
	for (int lo = 0, hi; lo < w.n; lo = hi)
	{
		for (hi = lo + 1; hi < w.n && w.parked[hi] == w.parked[lo] && w.why[hi] == w.why[lo]; hi++)
			;
		if (!w.parked[lo])
		{
			for (int i = lo; i < hi; i++)
				rest[nrest++] = w.ids[i];
			continue;
		}
		{
			Oid			types[2] = {INT8ARRAYOID, TEXTOID};
			Datum		values[2] = {PointerGetDatum(ids_array(w.ids + lo, hi - lo)), CStringGetTextDatum(w.why[lo])};
			ms_table   *t = ms_catalog_find(in->cat->tables, w.tabs[lo]);

			ms_exec(&p->exec, "UPDATE sync.notes SET parked = $2, parked_at = now() WHERE id = ANY ($1)",
					2, types, values, NULL, 0);
			quarantine_rows(p, in->cat->tables, w.ids + lo, hi - lo, w.why[lo]);
			parked += hi - lo;
			ereport(WARNING,
					(errmsg("magic_sync: %d notes of table \"%s\" cannot be planned and are parked",
							hi - lo, t ? t->name : "?"),
					 errdetail("%s", w.why[lo]),
					 errhint("They are tried again a minute later; SELECT * FROM sync.health() lists them.")));
		}
	}
	ms_batch_only(p, ids_array(rest, nrest));
	*nparked = parked;
	return parked > 0;
}
