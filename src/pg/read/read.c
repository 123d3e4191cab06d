/*-------------------------------------------------------------------------
 * read.c
 *	  sync.progress and sync.row_progress (docs/design.md 7): what replicas
 *	  should hold, from scratch, against what they acknowledged holding.
 *
 * The other reads -- sync.overview, sync.listing, sync.health and their
 * views -- are SQL (sql/60_read.sql): they read only what the engine
 * records, in one statement.  These two need the wanted set (wanted.c), many
 * statements in temporary tables, and read it in one snapshot with the held
 * rows it is compared with: each read runs through the executor of a pass
 * (relay/pass.h), whose registered snapshot is one view for all its
 * statements under READ COMMITTED too, as it writes only its own temporary
 * tables.
 *
 * Of a replica's held row (sync.held), nothing counts until the replica
 * acknowledged the message that carried it (number <= acked_number):
 *
 *   set aside     it refused the row, or the row is quarantined (it cannot go)
 *   letting go    a delete of it is on its way (taken)
 *   on its way    number > acked_number
 *   holds         number <= acked_number -- an older version when a note of
 *                 the row not planned yet is newer than the version's note
 *   lacks         it should hold the row and none of the above applies: a
 *                 note not planned yet, a snapshot not written yet, or a row it
 *                 points at quarantined holds it back (or the only row that
 *                 needs it is one: a row that cannot go is no reason to send
 *                 its parents, relay/plan.c)
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"

#include "catalog.h"
#include "keys.h"
#include "owner.h"
#include "pass.h"
#include "wanted.h"

PG_FUNCTION_INFO_V1(ms_progress);
PG_FUNCTION_INFO_V1(ms_row_progress);

/* the live replicas of a scope, as "-- $1 uuid[] (NULL: all), $2 partition (NULL: all)" */
#define SCOPE_SQL \
	"SELECT array_agg(r.id ORDER BY r.id) FROM sync.replicas r" \
	" WHERE r.live AND NOT r.dropped" \
	"   AND ($1::uuid[] IS NULL OR r.id = ANY ($1)) AND ($2::text IS NULL OR r.partition = $2)"

/*
 * The figures per replica and table.  ms_wanted holds what the scope's
 * replicas should hold; a held row of theirs is joined to it, and to the
 * newest note of the row not planned yet (a change it lacks).
 */
static const char progress_sql[] =
"WITH s AS (SELECT r.id, r.acked_number FROM sync.replicas r WHERE r.id = ANY ($1)),"
" pend AS ("
"   SELECT c.tab, c.key, max(c.id) AS note FROM ("
"     SELECT n.tab, n.key, n.id FROM sync.notes n"
"      WHERE NOT n.done AND n.source = 'r' AND n.key IS NOT NULL"
"     UNION ALL"
"     SELECT n.tab, n.old_key, n.id FROM sync.notes n"
"      WHERE NOT n.done AND n.source = 'r' AND n.old_key IS NOT NULL) c"
"   GROUP BY c.tab, c.key),"
" h AS (SELECT h.* FROM sync.held h WHERE h.replica = ANY ($1)),"
" j AS ("
"   SELECT coalesce(w.replica, h.replica) AS replica, coalesce(w.tab, h.tab) AS tab,"
"          w.key IS NOT NULL AS wanted, h.key IS NOT NULL AS held,"
"          h.number, h.taken, h.refused, h.note, p.note AS newer, h.replace,"
"          EXISTS (SELECT FROM sync.quarantine q WHERE q.tab = coalesce(w.tab, h.tab)"
"                     AND q.key = coalesce(w.key, h.key)) AS quarantined"
"     FROM pg_temp.ms_wanted w"
"     FULL JOIN h ON h.replica = w.replica AND h.tab = w.tab AND h.key = w.key"
"     LEFT JOIN pend p ON p.tab = coalesce(w.tab, h.tab) AND p.key = coalesce(w.key, h.key)),"
" k AS ("
"   SELECT j.*, CASE WHEN NOT j.wanted THEN NULL"
"                    WHEN j.refused IS NOT NULL OR j.quarantined THEN 'set aside'"
"                    WHEN j.held AND j.taken IS NULL AND j.number <= s.acked_number THEN 'holds'"
"                    WHEN j.held AND j.taken IS NULL THEN 'on its way'"
"                    ELSE 'lacks' END AS place"
"     FROM j JOIN s ON s.id = j.replica)"
" SELECT s.id, t.relid,"
"        count(*) FILTER (WHERE k.wanted),"
"        count(*) FILTER (WHERE k.place = 'holds'),"
"        count(*) FILTER (WHERE k.place = 'holds' AND (k.newer > k.note OR k.replace)),"
"        count(*) FILTER (WHERE k.place = 'on its way'),"
"        count(*) FILTER (WHERE k.place = 'set aside'),"
"        count(*) FILTER (WHERE k.place = 'lacks'),"
"        count(*) FILTER (WHERE k.held AND k.taken IS NOT NULL),"
"        count(*) FILTER (WHERE k.held AND k.taken IS NULL AND NOT k.wanted),"
"        now()"
"   FROM s CROSS JOIN sync.tables t"
"   LEFT JOIN k ON k.replica = s.id AND k.tab = t.id"
"  GROUP BY s.id, t.relid"
"  ORDER BY s.id, t.relid::text";

/*
 * Where one row is, per replica of the scope.  %s is whether the replica
 * should hold it: from ms_wanted, or false when the engine's record answers
 * (see ms_row_progress).
 */
static const char row_progress_sql[] =
"WITH s AS (SELECT r.* FROM sync.replicas r WHERE r.id = ANY ($1)),"
" q AS (SELECT q.reason FROM sync.quarantine q WHERE q.tab = $2 AND q.key = $3),"
" p AS (SELECT max(n.id) AS note FROM sync.notes n"
"        WHERE NOT n.done AND n.source = 'r' AND n.tab = $2 AND (n.key = $3 OR n.old_key = $3)),"
" x AS ("
"   SELECT s.id, s.acked_number, h.key IS NOT NULL AS held, h.number, h.taken, h.note, h.refused, h.replace,"
"          i.reason AS upload, i.sqlstate, (%s) AS wanted, p.note AS newer, q.reason AS quarantined,"
"          s.provision OR NOT s.seen_live OR s.seen_partition IS DISTINCT FROM s.partition AS due,"
"          EXISTS (SELECT FROM sync.notes n WHERE NOT n.done) AS behind"
"     FROM s CROSS JOIN p LEFT JOIN q ON true"
"     LEFT JOIN sync.held h ON h.replica = s.id AND h.tab = $2 AND h.key = $3"
"     LEFT JOIN sync.inbox i ON i.replica = s.id AND i.tab = $2 AND i.key = $3),"
" a AS ("
"   SELECT x.*, CASE"
"     WHEN x.refused IS NOT NULL THEN 'set aside'"
"     WHEN x.upload IS NOT NULL THEN 'set aside'"
"     WHEN x.quarantined IS NOT NULL AND (x.held OR x.wanted) THEN 'set aside'"
"     WHEN x.taken IS NOT NULL THEN 'letting go'"
"     WHEN x.held AND x.number > x.acked_number THEN 'on its way'"
"     WHEN x.held AND (x.newer > x.note OR x.replace) THEN 'holds an older version'"
"     WHEN x.held THEN 'holds'"
"     WHEN x.wanted THEN 'lacks' END AS answer"
"     FROM x)"
" SELECT a.id, a.answer, coalesce(a.taken, a.number), a.note,"
"        CASE WHEN a.newer > coalesce(a.note, 0) THEN a.newer END,"
"        CASE"
"          WHEN a.refused IS NOT NULL THEN 'the replica refused it: ' || a.refused"
"          WHEN a.upload IS NOT NULL AND a.sqlstate IS NULL THEN 'its upload waits: ' || a.upload"
"          WHEN a.upload IS NOT NULL THEN 'its upload is set aside: ' || a.upload"
"          WHEN a.answer = 'set aside' THEN 'quarantined: ' || a.quarantined"
"          WHEN a.answer = 'letting go' THEN 'a delete of it is on its way'"
"          WHEN a.answer = 'on its way' THEN 'a message it has not acknowledged carries it'"
"          WHEN a.answer = 'holds an older version' AND a.replace"
"               THEN 'a write of its own was refused or dropped: the server''s row, or its deletion, goes to it at the next pass'"
"          WHEN a.answer = 'holds an older version' THEN 'a change not planned yet'"
"          WHEN a.answer = 'lacks' AND a.due THEN 'its snapshot is due at the next pass'"
"          WHEN a.answer = 'lacks' AND a.behind THEN 'changes not planned yet send it at the next pass'"
"          WHEN a.answer = 'lacks' THEN 'a row it points at, or the only row that needs it, is quarantined: it goes once that row does'"
"        END,"
"        now()"
"   FROM a WHERE a.answer IS NOT NULL"
"  ORDER BY a.id";

/* the live replicas of the scope; NULL when there are none */
static ArrayType *
scope(ms_reader *p, FunctionCallInfo fcinfo, int arg)
{
	Oid			types[2] = {UUIDARRAYOID, TEXTOID};
	Datum		values[2];
	char		nulls[2] = {' ', ' '};

	values[0] = PG_ARGISNULL(arg) ? (Datum) 0 : PG_GETARG_DATUM(arg);
	values[1] = PG_ARGISNULL(arg + 1) ? (Datum) 0 : PG_GETARG_DATUM(arg + 1);
	nulls[0] = PG_ARGISNULL(arg) ? 'n' : ' ';
	nulls[1] = PG_ARGISNULL(arg + 1) ? 'n' : ' ';
	ms_exec(p->exec, SCOPE_SQL, 2, types, values, nulls, 1);
	return ms_array();
}

static char *
relname(Oid tab)
{
	return DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(tab)));
}

/* run sql and return its rows as the function's result */
static void
emit(ms_reader *p, ReturnSetInfo *rsinfo, const char *sql, int nargs, Oid *types, Datum *values)
{
	int			natts = rsinfo->setDesc->natts;
	Datum	   *out = palloc(sizeof(Datum) * natts);
	bool	   *outnull = palloc(sizeof(bool) * natts);

	ms_exec(p->exec, sql, nargs, types, values, NULL, 0);
	if (SPI_tuptable->tupdesc->natts != natts)
		elog(ERROR, "a read returns %d columns, not %d", SPI_tuptable->tupdesc->natts, natts);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		for (int c = 0; c < natts; c++)
			out[c] = ms_value(i, c + 1, &outnull[c]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, outnull);
	}
}

/*
 * wanted: the wanted sets of these replicas into pg_temp.ms_wanted, over the
 * catalog read once.  Read only when a read needs the wanted set: where the
 * engine's record answers sync.row_progress, no declaration is read (nor
 * refused when it no longer matches its table).
 */
static void
wanted(ms_reader *p, ArrayType *replicas)
{
	p->tables = ms_catalog_tables();
	ms_read_as_owners(p);
	ms_wanted_fill(p, replicas, false);
}

/*
 * ms_progress: sync.progress(replicas uuid[], partition text) returns, per
 * live replica of the scope and mirrored table, (replica, tab, should,
 * holds, outdated, on_its_way, set_aside, lacks, letting_go, extra, now).
 *
 *   should      rows of the table it should hold: sync.wanted, from scratch,
 *               now (so a change not planned yet already counts)
 *   holds       of those, rows it acknowledged holding
 *   outdated    of those it holds, rows a change not planned yet is newer than,
 *               or whose copy a write of its own refused or dropped left unlike
 *               the server's (sync.held.replace: the next pass sends it again)
 *   on_its_way  of should, rows a message it has not acknowledged carries
 *   set_aside   of should, rows it refused or that are quarantined
 *   lacks       the rest of should: should = holds + on_its_way + set_aside + lacks
 *   letting_go  held rows a delete on its way takes back
 *   extra       held rows (or on their way) it should no longer hold, which
 *               the next pass takes back
 */
Datum
ms_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ms_executor x;
	ms_reader	p = {&x, NIL};
	ArrayType  *replicas;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	ms_executor_begin(&x, CurrentMemoryContext);
	replicas = scope(&p, fcinfo, 0);
	if (replicas != NULL)
	{
		Oid			types[1] = {UUIDARRAYOID};
		Datum		values[1] = {PointerGetDatum(replicas)};

		wanted(&p, replicas);
		emit(&p, rsinfo, progress_sql, 1, types, values);
	}
	ms_executor_end(&x);
	SPI_finish();
	return (Datum) 0;
}

/* sync.key (keys.c), called directly */
extern PGDLLEXPORT Datum ms_key(PG_FUNCTION_ARGS);

/*
 * canonical_parts: the parts of a key as the key columns' types print them
 * (each read by its type's input function, written by its output, or
 * spelled as keys.h says), as the noting triggers and filing spell keys
 * (src/shared/canon.h): '0950' for an integer is 950, an upper-case uuid is
 * lower-case, 1.50 is 1.5.  A part that is no
 * value of its type fails as its input function says.  A domain's base type
 * spells its values (a domain's check is no part of the spelling); and what
 * a type's functions run is the table owner's code, run as the owner,
 * security-restricted, as the relay reads the table (owner.h).
 */
static Datum
canonical_parts(Oid tab, Datum parts, ArrayType *types)
{
	ms_as_owner as;
	Datum	   *elems;
	bool	   *nulls;
	Datum	   *typs;
	int			n;
	int			ntypes;

	deconstruct_array(DatumGetArrayTypeP(parts), TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	deconstruct_array(types, OIDOID, sizeof(Oid), true, TYPALIGN_INT, &typs, NULL, &ntypes);
	ms_owner_begin(&as, tab);
	for (int i = 0; i < n && i < ntypes; i++)
	{
		Oid			in,
					out,
					ioparam;
		bool		varlena;
		Datum		value;
		ms_key_kind kind = ms_key_kind_of(DatumGetObjectId(typs[i]));

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("part %d of the key is null", i + 1),
					 errdetail("Key columns are never null.")));
		getTypeInputInfo(getBaseType(DatumGetObjectId(typs[i])), &in, &ioparam);
		getTypeOutputInfo(getBaseType(DatumGetObjectId(typs[i])), &out, &varlena);
		value = OidInputFunctionCall(in, TextDatumGetCString(elems[i]), ioparam, -1);
		elems[i] = CStringGetTextDatum(ms_key_spelled(kind) ? ms_key_text(kind, value) :
									   OidOutputFunctionCall(out, value));
	}
	ms_owner_end(&as);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * table_key: the id of mirrored table tab and the canonical key of these
 * parts (a text[]), or an error naming what is wrong.
 */
static void
table_key(ms_reader *p, Oid tab, Datum parts, int32 *id, char **key)
{
	Oid			types[2] = {REGCLASSOID, TEXTARRAYOID};
	Datum		values[2] = {ObjectIdGetDatum(tab), parts};
	bool		isnull;
	int32		nkey;
	int32		nparts;
	Datum		keytypes;

	ms_exec(p->exec, "SELECT t.id, cardinality(t.key), cardinality($2),"
			"       array(SELECT a.atttypid FROM unnest(t.key) WITH ORDINALITY AS k(name, i)"
			"               JOIN pg_catalog.pg_attribute a ON a.attrelid = t.relid AND a.attname = k.name"
			"              ORDER BY k.i)"
			"  FROM sync.tables t WHERE t.relid = $1",
			2, types, values, NULL, 1);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table %s is not mirrored", relname(tab)),
				 errhint("SELECT * FROM sync.mirrors lists the mirrored tables.")));
	*id = DatumGetInt32(ms_value(0, 1, &isnull));
	nkey = DatumGetInt32(ms_value(0, 2, &isnull));
	nparts = DatumGetInt32(ms_value(0, 3, &isnull));
	if (isnull || nparts != nkey)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table %s has a key of %d parts", relname(tab), nkey),
				 errhint("Give the row's key columns as text, in the order sync.mirrors lists them.")));
	keytypes = ms_value(0, 4, &isnull);
	*key = TextDatumGetCString(DirectFunctionCall1(ms_key, canonical_parts(tab, parts, DatumGetArrayTypeP(keytypes))));
}

/*
 * unsure: the replicas of the scope the engine's record cannot answer for:
 * not holding the row while the record may be stale; NULL when none.
 */
static ArrayType *
unsure(ms_reader *p, int nargs, Oid *types, Datum *values)
{
	ms_exec(p->exec, "SELECT array_agg(r.id) FROM sync.replicas r"
			" WHERE r.id = ANY ($1)"
			"   AND NOT EXISTS (SELECT FROM sync.held h WHERE h.replica = r.id"
			"                    AND h.tab = $2 AND h.key = $3 AND h.taken IS NULL)"
			"   AND (EXISTS (SELECT FROM sync.notes n WHERE NOT n.done)"
			"        OR EXISTS (SELECT FROM sync.quarantine)"
			"        OR r.provision OR NOT r.seen_live"
			"        OR r.seen_partition IS DISTINCT FROM r.partition)",
			nargs, types, values, NULL, 1);
	return ms_array();
}

/*
 * ms_row_progress: sync.row_progress(tab regclass, key text[], replicas
 * uuid[], partition text) returns, per live replica of the scope that holds
 * the row, should hold it, or uploaded it, (replica, answer, number, note,
 * newer_note, reason, now).
 *
 * Whether a replica that does not hold the row should hold it is worked out
 * from scratch only when the engine's record cannot say: after every pass,
 * what a replica is recorded holding (acknowledged or on its way) is what it
 * should hold but for rows a quarantined row holds back, so the record
 * answers unless notes are not done, rows are quarantined, or the replica's
 * snapshot is not written yet.
 */
Datum
ms_row_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ms_executor x;
	ms_reader	p = {&x, NIL};
	int32		id;
	char	   *key;
	ArrayType  *replicas;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sync.row_progress takes a table and the parts of a key, neither of them null"),
				 errhint("SELECT * FROM sync.row_progress('shop.products', ARRAY['1']).")));
	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	ms_executor_begin(&x, CurrentMemoryContext);
	table_key(&p, PG_GETARG_OID(0), PG_GETARG_DATUM(1), &id, &key);
	replicas = scope(&p, fcinfo, 2);
	if (replicas != NULL)
	{
		Oid			types[3] = {UUIDARRAYOID, INT4OID, TEXTOID};
		Datum		values[3] = {PointerGetDatum(replicas), Int32GetDatum(id), CStringGetTextDatum(key)};
		ArrayType  *some = unsure(&p, 3, types, values);

		if (some != NULL)
			wanted(&p, some);
		emit(&p, rsinfo,
			 psprintf(row_progress_sql,
					  some == NULL ? "false" :
					  "EXISTS (SELECT FROM pg_temp.ms_wanted w"
					  "         WHERE w.replica = s.id AND w.tab = $2 AND w.key = $3)"),
			 3, types, values);
	}
	ms_executor_end(&x);
	SPI_finish();
	return (Datum) 0;
}
