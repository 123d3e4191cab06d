/*-------------------------------------------------------------------------
 * reach.c
 *	  What a replica's writes may point at (docs/design.md 5.4): rules decide
 *	  what a replica reaches, never its writes.
 *
 * A record a replica files is its own, and what it points at travels to it
 * with it (a sale keeps its customer); a two-way row's owned columns point
 * the same way.  So a row it files may point, through each foreign key it
 * writes, only at a row it holds (acknowledged, on its way, or being taken
 * back), one taken back from it since it wrote the row (sync.let_go), or a
 * record of its own.  Any other pointer is refused, that row alone, saying
 * which table, columns and key (SQLSTATE 42501): it is not filed, so nothing
 * is sent because of it.  A foreign key whose values the row does not change
 * (the server's copy points there already) points at nothing new and is not
 * asked about; a null in one of its columns points at nothing.
 *
 * The check reads the row's pointers with one statement per table, run as
 * the table's owner (its casts are the owner's code), and looks each parent
 * up in sync.held by its key: one index probe, by the key as the relay names
 * the parent (its columns' values as their types print them).  A foreign key
 * to columns other than the parent's key finds the parent's key first, by
 * those columns as their own types, through the parent's unique index.
 *
 * "Taken back since it wrote the row": every upload says the last message
 * the replica had applied before its oldest write not yet filed
 * (Up.unfiled_since).  When it acknowledges messages that took rows back,
 * those taken after that message are kept in sync.let_go: a row it wrote
 * before may still point at them (the replica kept them, retired).  Each
 * upload forgets the ones taken at or before it: no write still pending
 * was made while the replica held them.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "file.h"
#include "owner.h"
#include "pass.h"
#include "spi_check.h"
#include "updated.h"
#include "wanted.h"

/* One foreign key a table's filed rows are checked through. */
typedef struct reach_fk
{
	const ms_fkey *fk;
	const ms_table *parent;
	int		   *key_order;		/* per part of the parent's key, the fk column
								 * giving it; NULL: the fk references other
								 * columns than the key */
	int			own_part;		/* the fk column giving the parent's origin
								 * (a record keyed by it), or -1 */
	SPIPlanPtr	lookup;			/* key_order NULL: the parent's key by the
								 * referenced columns */
} reach_fk;

/* What the check of one table prepares, the first time a row of it is filed. */
typedef struct reach_table
{
	bool		built;
	int			nfks;
	reach_fk   *fks;
	SPIPlanPtr	points;			/* $1 row (json), $2 key: per fk, its values new and old */
} reach_table;

struct ms_reach
{
	reach_table *tables;		/* one per table of the filer */
	SPIPlanPtr	held;			/* $1 replica, $2 tab, $3 key: the replica may point at it */
	bool		let_go;			/* the catalog has sync.let_go */
	bool		wanted_read;	/* wanted, nwanted: read (wanted_rows) */
	char	  **wanted;			/* "tab:key" of the rows its rules give it, sorted */
	int			nwanted;
};

/* checked: whether a foreign key is the replica's to write in this table */
static bool
checked(const ms_table *t, const ms_fkey *fk)
{
	if (t->record)
		return true;
	for (int j = 0; j < fk->ncols; j++)
		if (t->columns[fk->cols[j]].replica_owned)
			return true;
	return false;
}

/* values: "CASE WHEN none is null THEN ARRAY[their text] END" of fk's columns, new or as they are */
static void
values_sql(StringInfo sql, const ms_table *t, const ms_fkey *fk, bool two_way, bool new)
{
	appendStringInfoString(sql, "CASE WHEN ");
	for (int pass = 0; pass < 2; pass++)
	{
		for (int j = 0; j < fk->ncols; j++)
		{
			const ms_column *col = &t->columns[fk->cols[j]];
			/* the row as filed: a record whole, a two-way row's owned columns over the server's */
			const char *alias = new && (!two_way || col->replica_owned) ? "r" : "t";

			if (pass == 0)
				appendStringInfo(sql, "%s%s.%s IS NOT NULL", j ? " AND " : "", alias, col->quoted);
			else
				appendStringInfo(sql, "%s(%s.%s)::pg_catalog.text", j ? ", " : "", alias, col->quoted);
		}
		appendStringInfoString(sql, pass == 0 ? " THEN ARRAY[" : "] END");
	}
}

/* points_sql: per foreign key checked, its values as the row is filed and as the server has it */
static char *
points_sql(const ms_table *t, reach_table *rt)
{
	StringInfoData sql;
	bool		two_way = !t->record;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < rt->nfks; i++)
	{
		appendStringInfoString(&sql, i ? ", " : "");
		values_sql(&sql, t, rt->fks[i].fk, two_way, true);
		appendStringInfoString(&sql, ", ");
		values_sql(&sql, t, rt->fks[i].fk, two_way, false);
	}
	if (two_way)
		appendStringInfo(&sql, " FROM %s t, pg_catalog.jsonb_populate_record(NULL::%s, $1::pg_catalog.jsonb) r"
						 " WHERE %s", t->qualified, t->qualified, ms_key_match(t, "t", "$2"));
	else
		appendStringInfo(&sql, " FROM pg_catalog.jsonb_populate_record(NULL::%s, $1::pg_catalog.jsonb) r"
						 " LEFT JOIN %s t ON %s", t->qualified, t->qualified, ms_key_match(t, "t", "$2"));
	return sql.data;
}

/* the column of t named name, or NULL */
static const ms_column *
column_named(const ms_table *t, const char *name)
{
	for (int c = 0; c < t->ncolumns; c++)
		if (strcmp(t->columns[c].name, name) == 0)
			return &t->columns[c];
	return NULL;
}

/* lookup_sql: the parent's key by the columns fk references, each compared as its own type */
static char *
lookup_sql(const reach_fk *rf, Oid *types)
{
	StringInfoData sql;
	const ms_table *p = rf->parent;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s FROM %s p WHERE ", ms_key_expr(p, "p"), p->qualified);
	for (int j = 0; j < rf->fk->ncols; j++)
	{
		const ms_column *col = column_named(p, rf->fk->parent_cols[j]);

		if (col == NULL)
			elog(ERROR, "table \"%s\" has no mirrored column \"%s\"", p->name, rf->fk->parent_cols[j]);
		appendStringInfo(&sql, "%sp.%s %s $%d::%s", j ? " AND " : "", col->quoted,
						 ms_eq_operator(col->type), j + 1, format_type_be_qualified(col->type));
		types[j] = TEXTOID;
	}
	return sql.data;
}

/* build: what the check of t needs, in the call's memory */
static void
build(ms_filer *fr, const ms_table *t, reach_table *rt)
{
	MemoryContext old = MemoryContextSwitchTo(fr->cxt);
	Oid			types[2] = {TEXTOID, TEXTOID};

	rt->built = true;
	rt->fks = palloc0(sizeof(reach_fk) * Max(t->nfkeys, 1));
	for (int f = 0; f < t->nfkeys; f++)
	{
		const ms_fkey *fk = &t->fkeys[f];
		reach_fk   *rf = &rt->fks[rt->nfks];

		if (!checked(t, fk))
			continue;
		rf->fk = fk;
		rf->parent = ms_catalog_find(fr->tables, fk->parent);
		rf->own_part = -1;
		if (rf->parent == NULL)
			elog(ERROR, "foreign key %s of \"%s\" points at a table not mirrored", fk->name, t->name);
		rt->nfks++;
		if (fk->by_parent_key != NULL)
		{
			const ms_table *p = rf->parent;

			rf->key_order = palloc(sizeof(int) * Max(p->nkey, 1));
			for (int k = 0; k < p->nkey; k++)
			{
				rf->key_order[k] = -1;
				for (int j = 0; j < fk->ncols; j++)
					if (fk->cols[j] == fk->by_parent_key[k])
						rf->key_order[k] = j;
				if (rf->key_order[k] < 0)
					elog(ERROR, "foreign key %s of \"%s\" does not give the key of \"%s\"", fk->name, t->name, p->name);
				/* a record of the replica's own is pointed at by its origin */
				if (p->record && p->key[k] == p->origin)
					rf->own_part = rf->key_order[k];
			}
		}
		else
		{
			Oid		   *ltypes = palloc(sizeof(Oid) * Max(fk->ncols, 1));
			char	   *sql = lookup_sql(rf, ltypes);

			rf->lookup = ms_spi_prepare(sql, fk->ncols, ltypes);
		}
	}
	if (rt->nfks > 0)
		rt->points = ms_spi_prepare(points_sql(t, rt), 2, types);
	MemoryContextSwitchTo(old);
}

/* reach_of: the call's check, made on first use */
static struct ms_reach *
reach_of(ms_filer *fr)
{
	if (fr->reach == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(fr->cxt);
		struct ms_reach *r = palloc0(sizeof(struct ms_reach));
		Oid			types[3] = {UUIDOID, INT4OID, TEXTOID};

		r->tables = palloc0(sizeof(reach_table) * Max(fr->ntables, 1));
		r->let_go = ms_catalog_has("let_go");
		r->held = ms_spi_prepare(r->let_go ?
								 "SELECT EXISTS (SELECT FROM sync.held WHERE replica = $1 AND tab = $2 AND key = $3)"
								 " OR EXISTS (SELECT FROM sync.let_go WHERE replica = $1 AND tab = $2 AND key = $3)" :
								 "SELECT EXISTS (SELECT FROM sync.held WHERE replica = $1 AND tab = $2 AND key = $3)",
								 3, types);
		fr->reach = r;
		MemoryContextSwitchTo(old);
	}
	return fr->reach;
}

/* the text[] datum's elements (no nulls: values_sql gives none) */
static char **
elements(Datum d, int *n)
{
	Datum	   *elems;
	char	  **out;

	deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, n);
	out = palloc(sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		out[i] = TextDatumGetCString(elems[i]);
	return out;
}

/* parent_key: the canonical key of the row fk points at (its values), NULL when there is none */
static char *
parent_key(const reach_fk *rf, char **vals)
{
	if (rf->key_order != NULL)
	{
		const ms_table *p = rf->parent;
		Sync__Key	k;

		sync__key__init(&k);
		k.n_parts = p->nkey;
		k.parts = palloc(sizeof(char *) * Max(p->nkey, 1));
		for (int i = 0; i < p->nkey; i++)
			k.parts[i] = vals[rf->key_order[i]];
		return ms_canonical_key(&k);
	}
	else
	{
		Datum	   *values = palloc(sizeof(Datum) * Max(rf->fk->ncols, 1));
		ms_as_owner as;
		char	   *key = NULL;

		for (int j = 0; j < rf->fk->ncols; j++)
			values[j] = CStringGetTextDatum(vals[j]);
		/* the parent's columns, their equality and casts, are its owner's */
		ms_owner_begin(&as, rf->parent->relid);
		ms_filer_run(rf->lookup, values, NULL, true, 1, SPI_OK_SELECT, "find the row a foreign key points at");
		ms_owner_end(&as);
		if (SPI_processed == 1)
			key = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		SPI_freetuptable(SPI_tuptable);
		/* none: the foreign key itself refuses the row as it is filed */
		return key;
	}
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * wanted_rows: the rows the replica's rules give it now, read once a filing
 * (in the filer's memory: a row's subtransaction rolled back keeps them),
 * as sync.wanted reads them: each table as its owner.  A row its rules give
 * it is never a widening of its reach, whatever the server's record of what
 * it holds says at that moment: being provisioned again, a row quarantined
 * and not sent, a snapshot on its way.
 */
static void
wanted_rows(ms_filing *f, struct ms_reach *r)
{
	MemoryContext cxt = f->filer->cxt;
	Datum		elems[1] = {UUIDPGetDatum(&f->replica)};
	ms_executor x;
	ms_reader	p = {&x, NIL};

	r->wanted_read = true;
	SPI_connect();
	ms_executor_begin(&x, CurrentMemoryContext);
	p.tables = ms_catalog_tables();
	ms_read_as_owners(&p);
	ms_wanted_fill(&p, construct_array(elems, 1, UUIDOID, 16, false, TYPALIGN_CHAR), false);
	ms_exec(&x, "SELECT w.tab || ':' || w.key FROM pg_temp.ms_wanted w", 0, NULL, NULL, NULL, 0);
	r->nwanted = (int) SPI_processed;
	r->wanted = MemoryContextAlloc(cxt, sizeof(char *) * Max(r->nwanted, 1));
	for (int i = 0; i < r->nwanted; i++)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

		r->wanted[i] = MemoryContextStrdup(cxt, v);
	}
	ms_exec(&x, "DELETE FROM pg_temp.ms_wanted", 0, NULL, NULL, NULL, 0);
	ms_executor_end(&x);
	SPI_finish();
	qsort(r->wanted, r->nwanted, sizeof(char *), cmp_str);
}

/*
 * reachable: whether the replica may point at the row of table tab keyed
 * key: one it holds or held when it wrote (sync.held, sync.let_go), or one
 * its rules give it now (wanted_rows, read only when the first is not so)
 */
static bool
reachable(ms_filing *f, struct ms_reach *r, int tab, const char *key)
{
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int32GetDatum(tab), CStringGetTextDatum(key)};
	bool		isnull;
	bool		yes;
	char	   *probe;

	ms_filer_run(r->held, values, NULL, true, 1, SPI_OK_SELECT, "read sync.held");
	yes = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	if (yes)
		return true;
	if (!r->wanted_read)
		wanted_rows(f, r);
	probe = psprintf("%d:%s", tab, key);
	yes = bsearch(&probe, r->wanted, r->nwanted, sizeof(char *), cmp_str) != NULL;
	pfree(probe);
	return yes;
}

/* a value as a message shows it: quoted, cut at 60 bytes */
static void
append_value(StringInfo s, const char *v)
{
	int			n = strlen(v);

	appendStringInfoChar(s, '\'');
	if (n > 60)
		appendStringInfo(s, "%s...", pnstrdup(v, pg_mbcliplen(v, n, 60)));
	else
		appendStringInfoString(s, v);
	appendStringInfoChar(s, '\'');
}

/* why_refused: what the Filed answer says of a row pointing where the replica may not */
static char *
why_refused(ms_filing *f, const ms_table *t, const reach_fk *rf, char **vals)
{
	StringInfoData s;
	const ms_fkey *fk = rf->fk;

	initStringInfo(&s);
	appendStringInfo(&s, "%s ", fk->ncols == 1 ? "column" : "columns");
	for (int j = 0; j < fk->ncols; j++)
		appendStringInfo(&s, "%s\"%s\"", j ? ", " : "", t->columns[fk->cols[j]].name);
	appendStringInfo(&s, " of table \"%s\" %s at the row of table \"%s\" whose ", t->name,
					 fk->ncols == 1 ? "points" : "point", rf->parent->name);
	for (int j = 0; j < fk->ncols; j++)
		appendStringInfo(&s, "%s\"%s\"", j ? ", " : "", fk->parent_cols[j]);
	appendStringInfoString(&s, fk->ncols == 1 ? " is " : " are ");
	for (int j = 0; j < fk->ncols; j++)
	{
		appendStringInfoString(&s, j ? ", " : "");
		append_value(&s, vals[j]);
	}
	appendStringInfo(&s, ", which replica %s does not hold (SQLSTATE 42501). "
					 "A replica's writes point only at rows it holds, or held when it wrote them:"
					 " its rules decide what it reaches, never its writes."
					 " Point it at a row the replica holds; nothing is sent because of this one.",
					 f->replica_text);
	return s.data;
}

bool
ms_reach_refused(ms_filing *f, ms_filed_table *ft, const char *key, const char *json,
				 char **why, char **sqlstate)
{
	ms_filer   *fr = f->filer;
	const ms_table *t = ft->t;
	struct ms_reach *r;
	reach_table *rt;
	Datum		values[2];
	ms_as_owner as;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		refused = false;

	if (t->nfkeys == 0)
		return false;
	r = reach_of(fr);
	rt = &r->tables[ft - fr->filed];
	if (!rt->built)
		build(fr, t, rt);
	if (rt->nfks == 0)
		return false;
	values[0] = CStringGetTextDatum(json);
	values[1] = CStringGetTextDatum(key);
	/* the row's values as their types print them: the owner's code */
	ms_owner_begin(&as, t->relid);
	ms_filer_run(rt->points, values, NULL, true, 1, SPI_OK_SELECT, "read what a row points at");
	ms_owner_end(&as);
	if (SPI_processed != 1)
	{
		SPI_freetuptable(SPI_tuptable);
		return false;			/* a two-way row gone meanwhile: filing says so */
	}
	tup = SPI_copytuple(SPI_tuptable->vals[0]);
	desc = CreateTupleDescCopy(SPI_tuptable->tupdesc);
	SPI_freetuptable(SPI_tuptable);
	for (int i = 0; i < rt->nfks && !refused; i++)
	{
		const reach_fk *rf = &rt->fks[i];
		bool		isnull;
		bool		oldnull;
		Datum		nd = heap_getattr(tup, 2 * i + 1, desc, &isnull);
		Datum		od = heap_getattr(tup, 2 * i + 2, desc, &oldnull);
		char	  **vals;
		char	  **olds = NULL;
		int			n;
		int			nold = 0;
		char	   *pkey;

		/* a null points at nothing */
		if (isnull)
			continue;
		vals = elements(nd, &n);
		if (!oldnull)
			olds = elements(od, &nold);
		/* where the server's copy points already: nothing new */
		if (olds != NULL && ms_same_strings(vals, n, olds, nold))
			continue;
		/* a record of its own: it reaches it anyway */
		if (rf->own_part >= 0 && pg_strcasecmp(vals[rf->own_part], f->replica_text) == 0)
			continue;
		pkey = parent_key(rf, vals);
		if (pkey == NULL || reachable(f, r, rf->fk->parent, pkey))
			continue;
		*why = why_refused(f, t, rf, vals);
		*sqlstate = "42501";
		refused = true;
	}
	return refused;
}

/*
 * ms_reach_acknowledged: the held rows the messages through acked took back
 * are gone; those taken after the message the replica had applied before its
 * oldest write still pending are remembered (sync.let_go).
 */
void
ms_reach_acknowledged(ms_filing *f, int64 acked)
{
	Oid			types[3] = {UUIDOID, INT8OID, INT8OID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int64GetDatum(acked), Int64GetDatum((int64) f->unfiled_since)};
	int			rc;

	if (f->unfiled_since > 0 && (int64) f->unfiled_since < acked && ms_catalog_has("let_go"))
		rc = ms_spi_run("WITH d AS (DELETE FROM sync.held WHERE replica = $1 AND taken <= $2"
								   "            RETURNING tab, key, taken)"
								   " INSERT INTO sync.let_go (replica, tab, key, taken)"
								   " SELECT $1, d.tab, d.key, d.taken FROM d WHERE d.taken > $3"
								   " ON CONFLICT (replica, tab, key) DO UPDATE SET taken = EXCLUDED.taken",
								   3, types, values, NULL, false, 0) == SPI_OK_INSERT ? SPI_OK_DELETE : -1;
	else
		rc = ms_spi_run("DELETE FROM sync.held WHERE replica = $1 AND taken <= $2",
								   2, types, values, NULL, false, 0);
	ms_spi_check(rc, SPI_OK_DELETE, "could not record an acknowledgement");
}

/*
 * ms_reach_forget: the rows taken back at or before the message the replica
 * applied before its oldest write still pending (what it applied, when it
 * says none, or is of a library that does not say) are forgotten.
 */
void
ms_reach_forget(ms_filing *f)
{
	Oid			types[2] = {UUIDOID, INT8OID};
	Datum		values[2];
	int64		floor = f->acked;

	if (!ms_catalog_has("let_go"))
		return;
	if (f->unfiled_since > 0 && (int64) f->unfiled_since < floor)
		floor = (int64) f->unfiled_since;
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = Int64GetDatum(floor);
	/* taken by a snapshot (MS_LET_GO_SNAPSHOT): at its end, the replica's snapshot_end */
	ms_spi_check(ms_spi_run("DELETE FROM sync.let_go l WHERE l.replica = $1 AND (l.taken <= $2"
									   " OR (l.taken = " CppAsString2(MS_LET_GO_SNAPSHOT)
									   "     AND EXISTS (SELECT FROM sync.replicas x WHERE x.id = $1"
									   "                 AND x.snapshot_end <= $2 AND NOT x.provision)))",
									   2, types, values, NULL, false, 0), SPI_OK_DELETE, "could not forget rows let go of");
}
