/*-------------------------------------------------------------------------
 * observe.c
 *	  Observe (docs/design.md 4.2): compare sync.replicas with what the last pass saw
 *	  (seen_live, seen_partition).  A replica that became live, or moved to
 *	  another partition, is provisioned again from scratch; one that stopped
 *	  being live, or was dropped, is forgotten.  One whose mirrored tables
 *	  changed since it was sent them is sent the change (evolve.c).  One
 *	  whose snapshot's held rows were left for after its pass (held_due,
 *	  heldrows.c) and never written -- the worker died in between -- is
 *	  provisioned again.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/stratnum.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/timestamp.h"
#include "utils/fmgroids.h"
#include "utils/uuid.h"

#include "evolve.h"
#include "observe.h"
#include "settings.h"
#include "temp.h"
#include "updated.h"

/* a replica to provision; a snapshot that failed for good is tried again a minute later (park.c) */
#define PROVISIONING "live AND provision" \
	" AND (provision_failed_at IS NULL OR provision_failed_at < now() - interval '1 minute')"

/* last_error (and its time) for a replica observed to need a snapshot; more: a CASE's WHENs after these */
#define PROVISION_WHY(more) \
	", last_error = coalesce(" PROVISION_CASE(more) ", last_error)," \
	" last_error_at = CASE WHEN " PROVISION_CASE(more) " IS NULL THEN last_error_at ELSE now() END"
#define PROVISION_CASE(more) \
	"CASE WHEN NOT seen_live AND acked_number > 0 THEN 'live again: provisioned from scratch'" \
	" WHEN NOT seen_live THEN NULL" \
	" WHEN seen_partition IS DISTINCT FROM partition THEN pg_catalog.format('its partition changed from %s to %s:" \
	" provisioned again', coalesce(pg_catalog.quote_literal(seen_partition), 'none')," \
	" coalesce(pg_catalog.quote_literal(partition), 'none')) " more " END"

/*
 * What the pass's one look at sync.replicas counts (ms_observe), in C: each
 * replica's row read with no statement started, planned or counted
 * (probe.h); sync.replicas holds a row a replica, few.  The conditions are
 * the statement's (below), one for one; now() is the transaction's start.
 */
typedef struct replicas_look
{
	const bytea *schema_hash;	/* $1 of the statement */
	bool		held_due;		/* the catalog has the column */
	TimestampTz minute_ago;		/* now() - interval '1 minute' */
	int64		to_forget;
	int64		to_provision;
	int64		to_evolve;
	int64		all;
	List	   *provisioning;	/* of pg_uuid_t * */
	List	   *live;
	bool		kept;			/* a table is held back: MS_EVOLVE_KEPT */
	List	   *evolve_if_kept;	/* of pg_uuid_t *: due but for MS_EVOLVE_KEPT, looked up after */
} replicas_look;

/* what the look found, in C or by the statement */
typedef struct ms_look
{
	int64		to_forget;
	int64		to_provision;
	int64		to_evolve;
	int64		replicas_all;
	ArrayType  *provisioning;	/* NULL: none */
	ArrayType  *live;			/* NULL: none */
} ms_look;

static bool
column_bool(HeapTuple row, TupleDesc desc, const char *name)
{
	bool		isnull;
	Datum		d = ms_probe_column(row, desc, name, &isnull);

	return !isnull && DatumGetBool(d);
}

/* a varlena column, its bytes at hand (a short header, or compressed, as stored) */
static Datum
column_bytes(HeapTuple row, TupleDesc desc, const char *name, bool *isnull)
{
	Datum		d = ms_probe_column(row, desc, name, isnull);

	return *isnull ? (Datum) 0 : PointerGetDatum(PG_DETOAST_DATUM_PACKED(d));
}

/* whether two varlena columns are distinct, as IS DISTINCT FROM says of text and bytea (byte for byte) */
static bool
distinct_bytes(Datum a, bool a_null, Datum b, bool b_null)
{
	if (a_null || b_null)
		return a_null != b_null;
	return VARSIZE_ANY_EXHDR(DatumGetPointer(a)) != VARSIZE_ANY_EXHDR(DatumGetPointer(b)) ||
		memcmp(VARDATA_ANY(DatumGetPointer(a)), VARDATA_ANY(DatumGetPointer(b)),
			   VARSIZE_ANY_EXHDR(DatumGetPointer(a))) != 0;
}

static bool
replica_row(HeapTuple row, TupleDesc desc, void *arg)
{
	replicas_look *l = arg;
	bool		live = column_bool(row, desc, "live");
	bool		dropped = column_bool(row, desc, "dropped");
	bool		seen_live = column_bool(row, desc, "seen_live");
	bool		provision = column_bool(row, desc, "provision");
	bool		part_null,
				seen_null,
				hash_null,
				failed_null,
				isnull;
	Datum		part = column_bytes(row, desc, "partition", &part_null);
	Datum		seen = column_bytes(row, desc, "seen_partition", &seen_null);
	Datum		hash = column_bytes(row, desc, "schema_hash", &hash_null);
	Datum		failed = ms_probe_column(row, desc, "provision_failed_at", &failed_null);
	Datum		id = ms_probe_column(row, desc, "id", &isnull);
	bool		held_due = false;

	if (l->held_due)
	{
		(void) ms_probe_column(row, desc, "held_due", &isnull);
		held_due = !isnull;
	}
	l->all++;
	/* dropped OR (NOT live AND seen_live) */
	if (dropped || (!live && seen_live))
		l->to_forget++;
	/* live AND (NOT seen_live OR seen_partition IS DISTINCT FROM partition [OR held_due IS NOT NULL]) */
	if (live && (!seen_live || distinct_bytes(seen, seen_null, part, part_null) || held_due))
		l->to_provision++;
	/* PROVISIONING AND NOT dropped */
	if (live && provision && !dropped &&
		(failed_null || DatumGetTimestampTz(failed) < l->minute_ago))
		l->provisioning = lappend(l->provisioning, DatumGetUUIDP(datumCopy(id, false, UUID_LEN)));
	/* MS_EVOLVE_DUE(""): live AND NOT provision AND schema_hash IS DISTINCT FROM $1 */
	if (live && !provision &&
		distinct_bytes(hash, hash_null, PointerGetDatum(l->schema_hash), l->schema_hash == NULL))
	{
		/* [AND EXISTS (SELECT FROM sync.replica_tables x WHERE x.replica = r.id)]: after this scan */
		if (l->kept)
			l->evolve_if_kept = lappend(l->evolve_if_kept, DatumGetUUIDP(datumCopy(id, false, UUID_LEN)));
		else
			l->to_evolve++;
	}
	/* live AND NOT dropped AND NOT (provision AND coalesce(provision_failed_at >= now() - 1 minute, false)) */
	if (live && !dropped && !(provision && !failed_null && DatumGetTimestampTz(failed) >= l->minute_ago))
		l->live = lappend(l->live, DatumGetUUIDP(datumCopy(id, false, UUID_LEN)));
	return true;
}

/* array_agg of the ids: NULL when there are none */
static ArrayType *
uuid_array(List *ids)
{
	Datum	   *d;
	int			n = 0;
	ListCell   *c;

	if (ids == NIL)
		return NULL;
	d = palloc(sizeof(Datum) * list_length(ids));
	foreach(c, ids)
		d[n++] = UUIDPGetDatum(lfirst(c));
	return construct_array(d, n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR);
}

/* a probe's look for any row: whether the replica keyed has one in sync.replica_tables */
static bool
any_row(HeapTuple row, TupleDesc desc, void *arg)
{
	(void) row;
	(void) desc;
	*(bool *) arg = true;
	return false;
}

/*
 * look_in_c: the look at sync.replicas by a probe, the statement's
 * conditions one for one (look_by_sql); with a table held back,
 * MS_EVOLVE_KEPT's look at sync.replica_tables by its key, for each
 * replica otherwise due.  False when a probe could not be made (a catalog
 * without the table or its index): the statement looks then.
 */
static bool
look_in_c(ms_pass *p, ms_pass_catalog *cat, bool held_due, ms_look *out)
{
	replicas_look l;
	ListCell   *lc;

	memset(&l, 0, sizeof l);
	l.schema_hash = cat->schema_hash;
	l.held_due = held_due;
	l.kept = cat->held != NIL;
	l.minute_ago = GetCurrentTransactionStartTimestamp() - 60 * USECS_PER_SEC;
	if (!ms_probe(&p->exec, "replicas", NULL, replica_row, &l))
		return false;
	foreach(lc, l.evolve_if_kept)
	{
		ScanKeyData key;
		bool		sent = false;

		/* replica: sync.replica_tables' first column, the first of its primary key */
		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(lfirst(lc)));
		if (!ms_probe_keyed(&p->exec, "replica_tables", "replica_tables_pkey", 1, &key, any_row, &sent))
			return false;
		if (sent)
			l.to_evolve++;
	}
	out->to_forget = l.to_forget;
	out->to_provision = l.to_provision;
	out->provisioning = uuid_array(l.provisioning);
	out->to_evolve = l.to_evolve;
	out->live = uuid_array(l.live);
	out->replicas_all = l.all;
	return true;
}

/* the same look by a statement: a catalog a probe cannot read, and the check of look_in_c */
static void
look_by_sql(ms_pass *p, ms_pass_catalog *cat, bool held_due, ms_look *out)
{
	bool		isnull;
	Datum		d;

	ms_exec(&p->exec, psprintf(
			"SELECT count(*) FILTER (WHERE dropped OR (NOT live AND seen_live)),"
			" count(*) FILTER (WHERE live AND (NOT seen_live OR seen_partition IS DISTINCT FROM partition%s)),"
			" array_agg(id) FILTER (WHERE " PROVISIONING " AND NOT dropped),"
			/* what evolve.c has to do, and relay.c's live_replicas */
			" count(*) FILTER (WHERE %s),"
			" array_agg(id) FILTER (WHERE live AND NOT dropped"
			"  AND NOT (provision AND coalesce(provision_failed_at >= now() - interval '1 minute', false))),"
			" count(*)"
			" FROM sync.replicas r", held_due ? " OR held_due IS NOT NULL" : "",
			cat->held == NIL ? MS_EVOLVE_DUE("") : MS_EVOLVE_DUE(MS_EVOLVE_KEPT)),
			1, (Oid[]) {BYTEAOID}, (Datum[]) {PointerGetDatum(cat->schema_hash)}, NULL, 0);
	out->to_forget = DatumGetInt64(ms_value(0, 1, &isnull));
	out->to_provision = DatumGetInt64(ms_value(0, 2, &isnull));
	d = ms_value(0, 3, &isnull);
	out->provisioning = isnull ? NULL : DatumGetArrayTypePCopy(d);
	out->to_evolve = DatumGetInt64(ms_value(0, 4, &isnull));
	d = ms_value(0, 5, &isnull);
	out->live = isnull ? NULL : DatumGetArrayTypePCopy(d);
	out->replicas_all = DatumGetInt64(ms_value(0, 6, &isnull));
}

/* two arrays of ids (NULL: none) as sets: the same members, in any order */
static bool
same_ids(ArrayType *a, ArrayType *b)
{
	Datum	   *x = NULL;
	Datum	   *y = NULL;
	int			nx = 0;
	int			ny = 0;

	if (a != NULL)
		deconstruct_array(a, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, &x, NULL, &nx);
	if (b != NULL)
		deconstruct_array(b, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, &y, NULL, &ny);
	if (nx != ny)
		return false;
	for (int i = 0; i < nx; i++)
	{
		bool		found = false;

		for (int j = 0; j < ny && !found; j++)
			found = memcmp(DatumGetPointer(x[i]), DatumGetPointer(y[j]), UUID_LEN) == 0;
		if (!found)
			return false;
	}
	return true;
}

/*
 * magic_sync.full_plan, the slow way that checks the fast one: the look in
 * C and the statement must find the same (sql/30_relay_observe.sql walks
 * every condition, with a table held back and without).  Two spellings of
 * one rule; a difference is a defect of this build.
 */
static void
look_checked(ms_pass *p, ms_pass_catalog *cat, bool held_due, const ms_look *c)
{
	ms_look		s;

	look_by_sql(p, cat, held_due, &s);
	if (s.to_forget != c->to_forget || s.to_provision != c->to_provision || s.to_evolve != c->to_evolve ||
		s.replicas_all != c->replicas_all || !same_ids(s.provisioning, c->provisioning) || !same_ids(s.live, c->live))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("magic_sync: the look at sync.replicas in C differs from its statement"),
				 errdetail("C: %lld to forget, %lld to provision, %lld to evolve, %lld in all; "
						   "the statement: %lld, %lld, %lld, %lld (or the ids provisioning or live differ).",
						   (long long) c->to_forget, (long long) c->to_provision, (long long) c->to_evolve,
						   (long long) c->replicas_all, (long long) s.to_forget, (long long) s.to_provision,
						   (long long) s.to_evolve, (long long) s.replicas_all)));
}

ArrayType *
ms_observe(ms_pass *p, ms_pass_catalog *cat, int snapshots, ms_observed *did)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1];
	ArrayType  *provisioning;
	bool		held_due;
	int64		to_forget;
	int64		to_provision;
	int64		to_evolve;
	ms_look		look;

	/* what a replica dropped, or no longer live, was sent goes with it */
	static const char *const forget[] = {
		"DELETE FROM sync.held WHERE replica IN (SELECT id FROM ms_forget)",
		"DELETE FROM sync.outbox WHERE replica IN (SELECT id FROM ms_forget)",
		"DELETE FROM sync.answers WHERE replica IN (SELECT r.id FROM sync.replicas r WHERE r.dropped)",
		"DELETE FROM sync.replicas WHERE dropped",
		"UPDATE sync.replicas SET seen_live = false, seen_partition = NULL,"
		"  snapshot_number = NULL, snapshot_end = NULL WHERE NOT live AND seen_live",
		NULL
	};

	memset(did, 0, sizeof *did);
	ms_generation_observe(&cat->epoch);
	did->has.carried = ms_catalog_has("carried");
	did->has.owed = ms_catalog_has_column("replicas", "owed_messages");
	/* sync.replicas has held_due (77_held_due.sql; a catalog not updated has none) */
	held_due = ms_catalog_has_column("replicas", "held_due");
	did->held_due = held_due;
	/*
	 * A snapshot pass writes the rows of the replicas it provisions alone:
	 * forgetting replicas and their schema changes are the other passes'
	 * (relay.c), which hold sync.replicas whole.
	 */
	/*
	 * Most passes find no replica to forget or to provision again, and one
	 * look at sync.replicas says so: the statements that would change them,
	 * and a second look for the replicas provisioned, run only when there is
	 * something to do (bench/passcost.py, issue 37).  The replicas the pass
	 * provisions are those it finds here, in its one snapshot: a dropped one
	 * is forgotten by this pass, or (a snapshot pass) left alone.  The look
	 * is made in C (look_in_c), a table held back or not.
	 */
	if (!look_in_c(p, cat, held_due, &look))
		look_by_sql(p, cat, held_due, &look);
	else if (ms_full_plan)
		look_checked(p, cat, held_due, &look);
	to_forget = look.to_forget;
	to_provision = look.to_provision;
	provisioning = look.provisioning;
	to_evolve = look.to_evolve;
	did->live = look.live;
	did->replicas_all = look.replicas_all;
	/* nothing forgotten, provisioned or evolved below: what it read stands */
	did->live_read = to_forget == 0 && to_provision == 0 && to_evolve == 0;
	if (snapshots != MS_SNAPSHOTS_ONLY && to_forget > 0)
	{
		ms_temp_table(&p->exec, "ms_forget");
		ms_exec(&p->exec, "INSERT INTO ms_forget SELECT id FROM sync.replicas WHERE dropped OR (NOT live AND seen_live)",
				0, NULL, NULL, NULL, 0);
		did->forgotten = (int64) SPI_processed;
	}
	/* most passes forget nobody: then none of it is asked, nor planned */
	if (did->forgotten > 0)
	{
		/* a dropped replica's refused claims go with it (an extension not updated yet has none) */
		if (ms_catalog_has("refused_claims"))
			ms_exec(&p->exec, "DELETE FROM sync.refused_claims WHERE replica IN (SELECT r.id FROM sync.replicas r WHERE r.dropped)",
					0, NULL, NULL, NULL, 0);
		ms_exec_all(&p->exec, forget);
		/*
		 * its rows held no more: their refusals' counts end with them (else
		 * due forever, every pass asked whether they are)
		 */
		if (ms_catalog_has("refused_rows"))
		{
			ms_exec(&p->exec, "DELETE FROM sync.refused_rows WHERE replica IN (SELECT id FROM ms_forget)", 0, NULL, NULL, NULL, 0);
			ms_exec(&p->exec, "DELETE FROM sync.refused_due WHERE replica IN (SELECT id FROM ms_forget)", 0, NULL, NULL, NULL, 0);
		}
		/* what its messages carried goes with them, and nothing is owed it */
		if (did->has.carried)
			ms_exec(&p->exec, "DELETE FROM sync.carried WHERE replica IN (SELECT id FROM ms_forget)", 0, NULL, NULL, NULL, 0);
		if (did->has.owed)
			ms_exec(&p->exec, "UPDATE sync.replicas SET owed_messages = 0, owed_bytes = 0 WHERE id IN (SELECT id FROM ms_forget)",
					0, NULL, NULL, NULL, 0);
	}
	/*
	 * Each says why in last_error, as every provisioning does but a new
	 * replica's first (nothing went wrong): one made live again (it had
	 * applied messages), its partition changed, its snapshot's held rows
	 * never recorded.
	 */
	if (to_provision > 0)
		ms_exec(&p->exec, psprintf(held_due
			? "UPDATE sync.replicas SET provision = true, seen_live = true, seen_partition = partition, held_due = NULL%s"
			" WHERE live AND (NOT seen_live OR seen_partition IS DISTINCT FROM partition OR held_due IS NOT NULL)"
			: "UPDATE sync.replicas SET provision = true, seen_live = true, seen_partition = partition%s"
			" WHERE live AND (NOT seen_live OR seen_partition IS DISTINCT FROM partition)",
			held_due ? PROVISION_WHY("WHEN held_due IS NOT NULL THEN 'the held rows of its snapshot were never recorded:"
									 " provisioned again'") : PROVISION_WHY("")),
			0, NULL, NULL, NULL, 0);
	/* the mirrored tables changed since what it was sent: a schema change, or a snapshot */
	if (snapshots != MS_SNAPSHOTS_ONLY && !did->live_read)
		ms_evolve_observe(p, cat, did->forgotten);

	/*
	 * A snapshot pass takes the rows of the replicas it provisions: their
	 * filings and pulls wait for it (its snapshot replaces what they would
	 * change), the others' go on.  One filed since the pass's snapshot fails
	 * it here, before it wrote anything, as a serialization failure.
	 */
	if (snapshots == MS_SNAPSHOTS_ONLY)
		ms_exec(&p->exec, "SELECT id FROM sync.replicas WHERE " PROVISIONING " AND NOT dropped ORDER BY id FOR UPDATE",
				0, NULL, NULL, NULL, 0);
	if (!did->live_read)
	{
		ms_exec(&p->exec, snapshots == MS_SNAPSHOTS_ONLY ?
				"SELECT array_agg(id) FROM sync.replicas WHERE " PROVISIONING " AND NOT dropped" :
				"SELECT array_agg(id) FROM sync.replicas WHERE " PROVISIONING,
				0, NULL, NULL, NULL, 0);
		provisioning = ms_array();
	}
	if (provisioning == NULL)
		return NULL;
	/*
	 * A table held back (relay.c) is left out of the snapshot: the replica
	 * is provisioned with the tables that flow, and again once it flows
	 * (evolve.c, MS_LEFT_OUT)
	 */
	/* the worker's pass that reads notes leaves them to a snapshot pass (relay.c) */
	if (snapshots == MS_SNAPSHOTS_LEFT)
	{
		did->snapshots_left = true;
		did->live_read = false;
		return NULL;
	}
	/* a snapshot replaces what the replica was owed: its outbox is dropped */
	values[0] = PointerGetDatum(provisioning);

	/*
	 * What it held is taken back by the snapshot, at its end (the replica's
	 * file keeps the rows a snapshot does not name until then): a row it
	 * wrote before that end, not filed yet, may still point at one of them
	 * (transport/reach.c), as at a row a message took back.  The end's
	 * number is not known yet: MS_LET_GO_SNAPSHOT stands for it.
	 */
	if (ms_catalog_has("let_go"))
		ms_exec(&p->exec,
				"INSERT INTO sync.let_go (replica, tab, key, taken)"
				" SELECT h.replica, h.tab, h.key, " CppAsString2(MS_LET_GO_SNAPSHOT)
				"   FROM sync.held h"
				"  WHERE h.replica = ANY ($1) AND h.refused IS NULL"
				" ON CONFLICT (replica, tab, key) DO UPDATE SET taken = EXCLUDED.taken",
				1, types, values, NULL, 0);
	ms_exec(&p->exec,
			"DELETE FROM sync.held WHERE replica = ANY ($1)",
			1, types, values, NULL, 0);
	if (did->has.carried)
		ms_exec(&p->exec, "DELETE FROM sync.carried WHERE replica = ANY ($1)", 1, types, values, NULL, 0);
	ms_exec(&p->exec,
			"UPDATE sync.outbox SET dropped = true, body = NULL WHERE replica = ANY ($1) AND NOT dropped",
			1, types, values, NULL, 0);
	/* a dropped message is owed no more (76_owed.sql) */
	if (did->has.owed)
		ms_exec(&p->exec,
				"UPDATE sync.replicas SET owed_messages = 0, owed_bytes = 0"
				" WHERE id = ANY ($1) AND (owed_messages <> 0 OR owed_bytes <> 0)",
				1, types, values, NULL, 0);
	return provisioning;
}
