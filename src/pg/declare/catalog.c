/*-------------------------------------------------------------------------
 * catalog.c
 *	  Reading declarations: sync.tables (what was declared) against
 *	  pg_catalog (what each table is now), into one ms_table per mirrored
 *	  table.  Every mismatch is an ms_problem; sync.check() lists them and
 *	  ms_catalog_tables() refuses to describe a catalog that has any.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "catalog.h"

/* A row of sync.tables, as stored. */
typedef struct decl
{
	int			id;
	Oid			relid;
	char	   *name;
	bool		record;
	char	   *rule;
	char	   *rule_column;
	Oid			members;
	int			nmember_key;
	char	  **member_key;
	Oid			assignments;
	char	   *assignment_replica;
	char	   *group_column;
	int			nkey;
	char	  **key;
	char	   *origin;
	char	   *version;
	int			nowned;
	char	  **owned;
	int			nunmirrored;
	char	  **unmirrored;
	char	   *retired;
	char	   *created;
	int			ngenerated;
	char	  **generated;
	Oid			active;
	char	   *partition;
	bool		proto;
	char	   *sender;
	int			nfields;
	char	  **field_names;
	char	  **field_numbers;
	int			ncoltypes;
	char	  **col_names;
	char	  **col_types;
	int			nstored_fks;
	char	  **fk_names;
	char	  **fk_parents;
} decl;

static const char *read_sql =
"SELECT t.id, t.relid::oid, t.name, t.mirror = 'record', t.rule, t.rule_column::text,"
"       t.members::oid, t.member_key::text[], t.assignments::oid,"
"       t.assignment_replica::text, t.group_column::text, t.key::text[],"
"       t.origin::text, t.version::text, t.replica_owned::text[], t.unmirrored::text[],"
"       t.retired::text, t.created::text, t.generated::text[], t.active::oid,"
"       t.partition::text, t.codec = 'proto', t.sender::text,"
"       ARRAY(SELECT e.key FROM pg_catalog.jsonb_each_text(t.fields) e ORDER BY e.key),"
"       ARRAY(SELECT e.value FROM pg_catalog.jsonb_each_text(t.fields) e ORDER BY e.key),"
"       ARRAY(SELECT e.key FROM pg_catalog.jsonb_each_text(t.columns) e ORDER BY e.key),"
"       ARRAY(SELECT e.value FROM pg_catalog.jsonb_each_text(t.columns) e ORDER BY e.key),"
"       ARRAY(SELECT e.key FROM pg_catalog.jsonb_each_text(t.foreign_keys) e ORDER BY e.key),"
"       ARRAY(SELECT e.value FROM pg_catalog.jsonb_each_text(t.foreign_keys) e ORDER BY e.key)"
"  FROM sync.tables t ORDER BY t.id";

static char *
get_text(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

static Oid
get_oid(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	return isnull ? InvalidOid : DatumGetObjectId(d);
}

static char **
get_names(HeapTuple tup, TupleDesc desc, int col, int *n)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);
	Datum	   *elems;
	bool	   *nulls;
	char	  **out;

	*n = 0;
	if (isnull)
		return NULL;
	deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, n);
	out = palloc0(sizeof(char *) * (*n + 1));
	for (int i = 0; i < *n; i++)
		out[i] = nulls[i] ? pstrdup("") : TextDatumGetCString(elems[i]);
	return out;
}

/* read_decls: every row of sync.tables, copied into the caller's context. */
static List *
read_decls(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *out = NIL;
	int			rc;

	rc = SPI_execute(read_sql, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading sync.tables failed: %s", SPI_result_code_string(rc));
	MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		decl	   *d = palloc0(sizeof(decl));
		bool		isnull;

		d->id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		d->relid = get_oid(tup, desc, 2);
		d->name = get_text(tup, desc, 3);
		d->record = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		d->rule = get_text(tup, desc, 5);
		d->rule_column = get_text(tup, desc, 6);
		d->members = get_oid(tup, desc, 7);
		d->member_key = get_names(tup, desc, 8, &d->nmember_key);
		d->assignments = get_oid(tup, desc, 9);
		d->assignment_replica = get_text(tup, desc, 10);
		d->group_column = get_text(tup, desc, 11);
		d->key = get_names(tup, desc, 12, &d->nkey);
		d->origin = get_text(tup, desc, 13);
		d->version = get_text(tup, desc, 14);
		d->owned = get_names(tup, desc, 15, &d->nowned);
		d->unmirrored = get_names(tup, desc, 16, &d->nunmirrored);
		d->retired = get_text(tup, desc, 17);
		d->created = get_text(tup, desc, 18);
		d->generated = get_names(tup, desc, 19, &d->ngenerated);
		d->active = get_oid(tup, desc, 20);
		d->partition = get_text(tup, desc, 21);
		d->proto = DatumGetBool(SPI_getbinval(tup, desc, 22, &isnull));
		d->sender = get_text(tup, desc, 23);
		d->field_names = get_names(tup, desc, 24, &d->nfields);
		d->field_numbers = get_names(tup, desc, 25, &d->nfields);
		d->col_names = get_names(tup, desc, 26, &d->ncoltypes);
		d->col_types = get_names(tup, desc, 27, &d->ncoltypes);
		d->fk_names = get_names(tup, desc, 28, &d->nstored_fks);
		d->fk_parents = get_names(tup, desc, 29, &d->nstored_fks);
		out = lappend(out, d);
	}
	SPI_freetuptable(SPI_tuptable);
	return out;
}

static void
add_problem(List **problems, const char *table, const char *problem, const char *fmt,...)
	pg_attribute_printf(4, 5);

static void
add_problem(List **problems, const char *table, const char *problem, const char *fmt,...)
{
	ms_problem *p = palloc(sizeof(ms_problem));
	StringInfoData buf;

	initStringInfo(&buf);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&buf, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&buf, needed);
	}
	p->table = pstrdup(table);
	p->problem = pstrdup(problem);
	p->detail = buf.data;
	*problems = lappend(*problems, p);
}

static bool
name_in(const char *name, char **names, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* column_index: the index in t->columns of the column named name, or -1. */
static int
column_index(const ms_table *t, const char *name)
{
	if (name == NULL)
		return -1;
	for (int i = 0; i < t->ncolumns; i++)
		if (strcmp(t->columns[i].name, name) == 0)
			return i;
	return -1;
}

static decl *
decl_of_relid(List *decls, Oid relid)
{
	ListCell   *lc;

	foreach(lc, decls)
	{
		decl	   *d = lfirst(lc);

		if (d->relid == relid)
			return d;
	}
	return NULL;
}

char *
ms_wire_name(Oid relid)
{
	Oid			nsp = get_rel_namespace(relid);
	char	   *rel = get_rel_name(relid);

	if (rel == NULL)
		return NULL;
	if (nsp == PG_PUBLIC_NAMESPACE)
		return rel;
	return psprintf("%s.%s", get_namespace_name(nsp), rel);
}

const char *
ms_sqlite_type(Oid type)
{
	switch (getBaseType(type))
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case BOOLOID:
			return "INTEGER";
		case FLOAT4OID:
		case FLOAT8OID:
			return "REAL";
		case BYTEAOID:
			return "BLOB";
		default:
			return "TEXT";
	}
}

bool
ms_key_type_ok(Oid type)
{
	switch (getBaseType(type))
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case TEXTOID:
		case VARCHAROID:
		case UUIDOID:
			return true;
		default:
			return false;
	}
}

bool
ms_unique_on(Oid relid, int n, const AttrNumber *attnums)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	bool		found = false;

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index index;

		if (!HeapTupleIsValid(tup))
			continue;
		index = (Form_pg_index) GETSTRUCT(tup);
		if (index->indisunique && index->indimmediate && index->indisvalid &&
			index->indnkeyatts == n &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL) &&
			heap_attisnull(tup, Anum_pg_index_indexprs, NULL))
		{
			bool		all = true;

			for (int i = 0; i < n && all; i++)
			{
				bool		in = false;

				for (int j = 0; j < n; j++)
					if (index->indkey.values[j] == attnums[i])
						in = true;
				all = in;
			}
			found = all;
		}
		ReleaseSysCache(tup);
		if (found)
			break;
	}
	list_free(indexes);
	relation_close(rel, AccessShareLock);
	return found;
}

/*
 * read_fkeys: t's foreign keys to mirrored tables, from pg_constraint,
 * checked against the ones stored when it was declared.
 */
static void
read_fkeys(ms_table *t, decl *d, List *decls, List **problems)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(t->relid)};
	int			rc;
	SPITupleTable *tuptable;
	uint64		n;
	bool	   *seen = palloc0(sizeof(bool) * (d->nstored_fks + 1));

	rc = SPI_execute_with_args(
		"SELECT c.conname::text, c.confrelid, c.conkey, c.confkey"
		"  FROM pg_catalog.pg_constraint c"
		" WHERE c.conrelid = $1 AND c.contype = 'f' ORDER BY c.conname",
		1, argtypes, args, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading foreign keys failed: %s", SPI_result_code_string(rc));
	MemoryContextSwitchTo(cxt);
	tuptable = SPI_tuptable;
	n = SPI_processed;
	t->fkeys = palloc0(sizeof(ms_fkey) * (n + 1));
	t->nfkeys = 0;
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = tuptable->vals[i];
		TupleDesc	desc = tuptable->tupdesc;
		char	   *conname = get_text(tup, desc, 1);
		Oid			parent = get_oid(tup, desc, 2);
		bool		isnull;
		Datum	   *conkey;
		Datum	   *confkey;
		int			ncols;
		int			nmirrored = 0;
		int			stored = -1;
		decl	   *pd;
		ms_fkey    *fk;

		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 3, &isnull)),
						  INT2OID, 2, true, TYPALIGN_SHORT, &conkey, NULL, &ncols);
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 4, &isnull)),
						  INT2OID, 2, true, TYPALIGN_SHORT, &confkey, NULL, &ncols);
		fk = &t->fkeys[t->nfkeys];
		fk->name = conname;
		fk->ncols = ncols;
		fk->cols = palloc(sizeof(int) * ncols);
		fk->parent_cols = palloc(sizeof(char *) * ncols);
		fk->by_parent_key = palloc(sizeof(int) * ncols);
		for (int c = 0; c < ncols; c++)
		{
			char	   *attname = get_attname(t->relid, DatumGetInt16(conkey[c]), false);

			fk->cols[c] = column_index(t, attname);
			fk->parent_cols[c] = get_attname(parent, DatumGetInt16(confkey[c]), false);
			if (fk->cols[c] >= 0)
				nmirrored++;
		}
		for (int s = 0; s < d->nstored_fks; s++)
			if (strcmp(d->fk_names[s], conname) == 0)
				stored = s;
		if (stored >= 0)
			seen[stored] = true;

		/* a foreign key none of whose columns travel points at nothing a replica sees */
		if (nmirrored == 0)
			continue;
		if (nmirrored < ncols)
		{
			add_problem(problems, t->name, "foreign key partly unmirrored",
						"Some columns of foreign key %s of %s are unmirrored: a replica could not follow it.",
						conname, t->name);
			continue;
		}
		pd = decl_of_relid(decls, parent);
		if (pd == NULL)
		{
			add_problem(problems, t->name, "foreign key to a table not mirrored",
						"Foreign key %s of %s points at %s, which is not mirrored: a replica would hold rows without their parents.",
						conname, t->name, ms_wire_name(parent));
			continue;
		}
		if (stored < 0)
			add_problem(problems, t->name, "foreign key added",
						"Foreign key %s of %s was added after %s was declared.",
						conname, t->name, t->name);
		else if (atoi(d->fk_parents[stored]) != pd->id)
			add_problem(problems, t->name, "foreign key changed",
						"Foreign key %s of %s points at another table than when %s was declared.",
						conname, t->name, t->name);
		/* the parent's key, read from the child's columns */
		if (pd->nkey != ncols)
		{
			add_problem(problems, t->name, "foreign key not on the parent's key",
						"Foreign key %s of %s does not reference the declared key of %s.",
						conname, t->name, pd->name);
			continue;
		}
		for (int k = 0; k < pd->nkey; k++)
		{
			fk->by_parent_key[k] = -1;
			for (int c = 0; c < ncols; c++)
				if (strcmp(fk->parent_cols[c], pd->key[k]) == 0)
					fk->by_parent_key[k] = fk->cols[c];
			if (fk->by_parent_key[k] < 0)
				break;
		}
		if (fk->by_parent_key[pd->nkey - 1] < 0)
		{
			add_problem(problems, t->name, "foreign key not on the parent's key",
						"Foreign key %s of %s does not reference the declared key of %s.",
						conname, t->name, pd->name);
			continue;
		}
		fk->parent = pd->id;
		t->nfkeys++;
	}
	for (int s = 0; s < d->nstored_fks; s++)
		if (!seen[s])
			add_problem(problems, t->name, "foreign key dropped",
						"Foreign key %s of %s was dropped after %s was declared.",
						d->fk_names[s], t->name, t->name);
	SPI_freetuptable(tuptable);
}

/* group_column_ok: whether relid (a group table) still has the column name. */
static bool
has_column(Oid relid, const char *name)
{
	return name != NULL && get_attnum(relid, name) != InvalidAttrNumber;
}

/*
 * build: describe the table of one declaration, or NULL when the table is
 * gone.  Problems are appended to *problems.
 */
static ms_table *
build(decl *d, List *decls, List **problems)
{
	Relation	rel;
	TupleDesc	desc;
	ms_table   *t;
	char	   *wire;
	AttrNumber *keyatts;
	bool		key_ok = true;

	rel = try_relation_open(d->relid, AccessShareLock);
	if (rel == NULL)
	{
		add_problem(problems, d->name, "table dropped",
					"Table %s was dropped; its declaration remains.", d->name);
		return NULL;
	}
	t = palloc0(sizeof(ms_table));
	t->id = d->id;
	t->relid = d->relid;
	t->name = d->name;
	t->qualified = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											  RelationGetRelationName(rel));
	t->record = d->record;
	t->rule = d->rule;
	t->proto = d->proto;
	t->retired = d->retired;
	t->sender = d->sender;
	t->active = d->active;
	t->nunmirrored = d->nunmirrored;
	t->unmirrored = d->unmirrored;
	wire = ms_wire_name(d->relid);
	if (strcmp(wire, d->name) != 0)
		add_problem(problems, d->name, "table renamed",
					"Table %s is now called %s: replicas know it by its old name.", d->name, wire);

	/* the mirrored columns, in attnum order */
	desc = RelationGetDescr(rel);
	t->columns = palloc0(sizeof(ms_column) * (desc->natts + 1));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		ms_column  *c;
		char	   *name = NameStr(att->attname);
		bool		known = false;

		if (att->attisdropped || name_in(name, d->unmirrored, d->nunmirrored))
			continue;
		c = &t->columns[t->ncolumns++];
		c->name = pstrdup(name);
		c->quoted = pstrdup(quote_identifier(name));
		c->attnum = att->attnum;
		c->type = att->atttypid;
		c->type_name = format_type_be(att->atttypid);
		c->sqlite_type = ms_sqlite_type(att->atttypid);
		c->not_null = att->attnotnull;
		c->replica_owned = name_in(name, d->owned, d->nowned);
		c->key = name_in(name, d->key, d->nkey);
		for (int f = 0; f < d->nfields; f++)
			if (strcmp(d->field_names[f], name) == 0)
				c->field = atoi(d->field_numbers[f]);
		for (int s = 0; s < d->ncoltypes; s++)
			if (strcmp(d->col_names[s], name) == 0)
			{
				char	   *now = format_type_with_typemod(att->atttypid, att->atttypmod);

				known = true;
				if (strcmp(now, d->col_types[s]) != 0)
					add_problem(problems, d->name, "type changed",
								"Column %s of %s was declared as %s and is now %s.",
								name, d->name, d->col_types[s], now);
			}
		if (!known && d->proto)
			add_problem(problems, d->name, "column added",
						"Column %s was added to %s, which travels in the proto codec: it has no field number.",
						name, d->name);
	}
	for (int s = 0; s < d->ncoltypes; s++)
		if (column_index(t, d->col_names[s]) < 0)
			add_problem(problems, d->name, "column dropped",
						"Column %s of %s was dropped or renamed after it was declared.",
						d->col_names[s], d->name);

	/* the key: its columns, still not null, still unique */
	t->nkey = d->nkey;
	t->key = palloc(sizeof(int) * d->nkey);
	keyatts = palloc(sizeof(AttrNumber) * d->nkey);
	for (int k = 0; k < d->nkey; k++)
	{
		t->key[k] = column_index(t, d->key[k]);
		if (t->key[k] < 0)
			key_ok = false;
		else
		{
			keyatts[k] = t->columns[t->key[k]].attnum;
			if (!t->columns[t->key[k]].not_null)
			{
				add_problem(problems, d->name, "key changed",
							"Key column %s of %s is no longer NOT NULL.", d->key[k], d->name);
				key_ok = false;
			}
		}
	}
	if (key_ok && !ms_unique_on(d->relid, d->nkey, keyatts))
		add_problem(problems, d->name, "key changed",
					"No unique index of %s is on its declared key any more.", d->name);

	t->origin = column_index(t, d->origin);
	t->version = column_index(t, d->version);
	if (t->version >= 0 && !t->columns[t->version].not_null)
		add_problem(problems, d->name, "version nullable",
					"Version column %s of %s is no longer NOT NULL.", d->version, d->name);
	t->partition = column_index(t, d->partition);
	t->created = column_index(t, d->created);
	t->generated = palloc(sizeof(int) * (d->ngenerated + 1));
	t->ngenerated = 0;
	for (int g = 0; g < d->ngenerated; g++)
		if (column_index(t, d->generated[g]) >= 0)
			t->generated[t->ngenerated++] = column_index(t, d->generated[g]);
	t->rule_column = column_index(t, d->rule_column);
	t->follows_fkey = -1;

	read_fkeys(t, d, decls, problems);
	if (d->rule != NULL && strcmp(d->rule, "follows") == 0)
	{
		for (int f = 0; f < t->nfkeys; f++)
			if (t->rule_column >= 0 && t->fkeys[f].cols[0] == t->rule_column &&
				t->fkeys[f].parent != t->id)
				t->follows_fkey = f;
		if (t->follows_fkey < 0)
			add_problem(problems, d->name, "follows no foreign key",
						"Column %s of %s, which %s follows, is no longer the first column of a foreign key to a mirrored table.",
						d->rule_column, d->name, d->name);
	}

	if (d->rule != NULL && strcmp(d->rule, "grouped") == 0)
	{
		t->members = d->members;
		t->assignments = d->assignments;
		t->member_key = palloc(sizeof(char *) * (d->nmember_key + 1));
		t->member_key_names = d->member_key;
		for (int k = 0; k < d->nmember_key; k++)
			t->member_key[k] = pstrdup(quote_identifier(d->member_key[k]));
		t->assignment_replica_name = d->assignment_replica;
		t->group_column_name = d->group_column;
		t->assignment_replica = pstrdup(quote_identifier(d->assignment_replica));
		t->group_column = pstrdup(quote_identifier(d->group_column));
		if (get_rel_name(d->members) == NULL)
			add_problem(problems, d->name, "group table dropped",
						"The member table of %s was dropped.", d->name);
		else
		{
			bool		ok = has_column(d->members, d->group_column);

			for (int k = 0; k < d->nmember_key; k++)
				ok = ok && has_column(d->members, d->member_key[k]);
			if (!ok)
				add_problem(problems, d->name, "group column dropped",
							"A column of %s, the member table of %s, was dropped or renamed.",
							get_rel_name(d->members), d->name);
			t->members_qualified = quote_qualified_identifier(
				get_namespace_name(get_rel_namespace(d->members)), get_rel_name(d->members));
		}
		if (get_rel_name(d->assignments) == NULL)
			add_problem(problems, d->name, "group table dropped",
						"The assignment table of %s was dropped.", d->name);
		else
		{
			if (!has_column(d->assignments, d->group_column) ||
				!has_column(d->assignments, d->assignment_replica))
				add_problem(problems, d->name, "group column dropped",
							"A column of %s, the assignment table of %s, was dropped or renamed.",
							get_rel_name(d->assignments), d->name);
			t->assignments_qualified = quote_qualified_identifier(
				get_namespace_name(get_rel_namespace(d->assignments)), get_rel_name(d->assignments));
		}
	}

	if (OidIsValid(d->active))
	{
		if (get_rel_name(d->active) == NULL)
			add_problem(problems, d->name, "view dropped",
						"The active view of %s was dropped.", d->name);
		else
		{
			t->active_qualified = quote_qualified_identifier(
				get_namespace_name(get_rel_namespace(d->active)), get_rel_name(d->active));
			for (int k = 0; k < d->nkey; k++)
				if (!has_column(d->active, d->key[k]))
					add_problem(problems, d->name, "view changed",
								"The active view of %s has no column %s, a key column.",
								d->name, d->key[k]);
		}
	}
	relation_close(rel, NoLock);
	return t;
}

static int
table_order(const ListCell *a, const ListCell *b)
{
	const ms_table *x = lfirst(a);
	const ms_table *y = lfirst(b);

	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return x->id < y->id ? -1 : (x->id > y->id ? 1 : 0);
}

List *
ms_catalog_read(List **problems)
{
	List	   *decls = read_decls();
	List	   *tables = NIL;
	ListCell   *lc;
	bool		changed = true;
	int			rounds = 0;

	foreach(lc, decls)
	{
		ms_table   *t = build(lfirst(lc), decls, problems);

		if (t != NULL)
			tables = lappend(tables, t);
	}

	/*
	 * Depth: one more than the deepest parent (self-references aside).  A
	 * cycle cannot be declared; one made later stops after as many rounds as
	 * there are tables.
	 */
	while (changed && rounds++ <= list_length(tables))
	{
		changed = false;
		foreach(lc, tables)
		{
			ms_table   *t = lfirst(lc);

			for (int f = 0; f < t->nfkeys; f++)
			{
				ms_table   *p = ms_catalog_find(tables, t->fkeys[f].parent);

				if (p != NULL && p != t && t->depth < p->depth + 1)
				{
					t->depth = p->depth + 1;
					changed = true;
				}
			}
		}
	}
	if (changed)
		add_problem(problems, "", "foreign key cycle",
					"Mirrored tables point at each other in a cycle: no order sends parents first.");
	list_sort(tables, table_order);
	return tables;
}

List *
ms_catalog_tables(void)
{
	List	   *problems = NIL;
	List	   *tables = ms_catalog_read(&problems);

	if (problems != NIL)
	{
		ms_problem *p = linitial(problems);

		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the declaration of %s no longer matches its table: %s",
						p->table, p->problem),
				 errdetail_internal("%s", p->detail),
				 errhint("SELECT * FROM sync.check() lists every problem.")));
	}
	return tables;
}

ms_table *
ms_catalog_find(List *tables, int id)
{
	ListCell   *lc;

	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);

		if (t->id == id)
			return t;
	}
	return NULL;
}

char *
ms_key_expr(const ms_table *t, const char *alias)
{
	StringInfoData buf;

	/*
	 * The canonical bytes spelled out (key.h): for each part its length in
	 * bytes, a colon, its text.  The same bytes as sync.key(ARRAY[...]),
	 * without building an array and calling a function for every row.
	 */
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int k = 0; k < t->nkey; k++)
	{
		const ms_column *c = &t->columns[t->key[k]];

		if (k > 0)
			appendStringInfoString(&buf, " || ");
		appendStringInfo(&buf, "octet_length((%s.%s)::text)::text || ':' || (%s.%s)::text",
						 alias, c->quoted, alias, c->quoted);
	}
	appendStringInfoString(&buf, ") COLLATE \"C\"");
	return buf.data;
}

char *
ms_key_match(const ms_table *t, const char *alias, const char *keyexpr)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int k = 0; k < t->nkey; k++)
	{
		const ms_column *c = &t->columns[t->key[k]];

		if (k > 0)
			appendStringInfoString(&buf, " AND ");
		appendStringInfo(&buf, "%s.%s = (sync.key_parts(%s))[%d]::%s",
						 alias, c->quoted, keyexpr, k + 1, format_type_be_qualified(c->type));
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}
