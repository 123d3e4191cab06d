/*-------------------------------------------------------------------------
 * catalog.c
 *	  Reading declarations: sync.tables (what was declared, decl.c) against
 *	  pg_catalog (what each table is now, validate.c), into one ms_table
 *	  per mirrored table, parents first.  Every mismatch is an ms_problem;
 *	  sync.check() lists them and ms_catalog_tables() holds back the tables
 *	  they name, with the tables joined to them (ms_catalog_hold).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "nodes/value.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "keys.h"
#include "validate.h"

char *
ms_member_match(const ms_table *t, const char *m, const char *x)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int k = 0; k < t->nkey; k++)
	{
		const ms_column *c = &t->columns[t->key[k]];
		Oid			type;
		int32		typmod;
		Oid			coll;
		char	   *member = psprintf("%s.%s", m, t->member_key[k]);

		get_atttypetypmodcoll(t->members, get_attnum(t->members, t->member_key_names[k]), &type, &typmod, &coll);
		if (type != c->type)
			member = psprintf("(%s)::%s", member, format_type_be_qualified(c->type));
		if (OidIsValid(c->collation) && coll != c->collation)
			member = psprintf("%s COLLATE %s", member, generate_collation_name(c->collation));
		appendStringInfo(&buf, "%s%s %s %s.%s", k > 0 ? " AND " : "", member, ms_eq_operator(c->type), x,
						 c->quoted);
	}
	return buf.data;
}

/* leads_with: whether the index's first n columns are these n attributes, in any order */
static bool
leads_with(Form_pg_index index, int n, const AttrNumber *attnums)
{
	if (index->indnkeyatts < n)
		return false;
	for (int i = 0; i < n; i++)
	{
		bool		in = false;

		for (int j = 0; j < n; j++)
			in = in || index->indkey.values[i] == attnums[j];
		if (!in)
			return false;
	}
	return true;
}

/* serves: whether the index's column at position i compares column c by eqop, under c's collation */
static bool
serves(HeapTuple tup, Form_pg_index index, int i, const ms_column *c, Oid eqop)
{
	bool		isnull;
	oidvector  *classes = (oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, tup, Anum_pg_index_indclass,
																	  &isnull));
	oidvector  *collations = (oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, tup,
																		  Anum_pg_index_indcollation, &isnull));

	(void) index;
	if (collations->values[i] != c->collation)
		return false;
	return !OidIsValid(eqop) || op_in_opfamily(eqop, get_opclass_family(classes->values[i]));
}

char *
ms_fkey_unindexed(const ms_table *t, const ms_fkey *fk)
{
	Relation	rel = relation_open(t->relid, AccessShareLock);
	List	   *indexes = RelationGetIndexList(rel);
	AttrNumber *all = palloc(sizeof(AttrNumber) * fk->ncols);
	AttrNumber *keyed = palloc(sizeof(AttrNumber) * (fk->nby + 1));
	ListCell   *lc;
	bool		found = false;
	StringInfoData buf;

	for (int i = 0; i < fk->ncols; i++)
		all[i] = t->columns[fk->cols[i]].attnum;
	for (int k = 0; k < fk->nby; k++)
		keyed[k] = t->columns[fk->by_parent_key[k]].attnum;
	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index index;
		int			n = 0;

		if (!HeapTupleIsValid(tup))
			continue;
		index = (Form_pg_index) GETSTRUCT(tup);
		if (index->indisvalid && heap_attisnull(tup, Anum_pg_index_indpred, NULL))
		{
			if (leads_with(index, fk->ncols, all))
				n = fk->ncols;
			else if (fk->keyed && fk->nby > 0 && leads_with(index, fk->nby, keyed))
				n = fk->nby;
		}
		found = n > 0;
		for (int i = 0; i < n && found; i++)
			for (int c = 0; c < fk->ncols; c++)
				if (t->columns[fk->cols[c]].attnum == index->indkey.values[i])
					found = found && serves(tup, index, i, &t->columns[fk->cols[c]], fk->eqop[c]);
		ReleaseSysCache(tup);
		if (found)
			break;
	}
	list_free(indexes);
	relation_close(rel, AccessShareLock);
	if (found)
		return NULL;
	initStringInfo(&buf);
	appendStringInfo(&buf, "CREATE INDEX ON %s (", t->qualified);
	for (int i = 0; i < fk->ncols; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "", t->columns[fk->cols[i]].quoted);
	appendStringInfoString(&buf, ")");
	return buf.data;
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

/* whether from's foreign keys lead, through mirrored tables, to the table of id to */
static bool
leads_to(List *tables, const ms_table *from, int to, bool *seen)
{
	for (int f = 0; f < from->nfkeys; f++)
	{
		int			parent = from->fkeys[f].parent;
		ListCell   *lc;

		if (parent == from->id)
			continue;			/* a self-reference orders nothing */
		if (parent == to)
			return true;
		foreach(lc, tables)
		{
			ms_table   *p = lfirst(lc);
			int			i = foreach_current_index(lc);

			if (p->id == parent && !seen[i])
			{
				seen[i] = true;
				if (leads_to(tables, p, to, seen))
					return true;
			}
		}
	}
	return false;
}

/*
 * name_cycles: a cycle made after the tables were declared (ALTER TABLE ADD
 * FOREIGN KEY) is a problem of each table on it, so that they are held back
 * together, with the tables joined to them (ms_catalog_hold), while every
 * other table flows.
 */
static void
name_cycles(List *tables, List **problems)
{
	bool	   *seen = palloc(sizeof(bool) * Max(list_length(tables), 1));
	ListCell   *lc;

	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);

		memset(seen, 0, sizeof(bool) * list_length(tables));
		if (leads_to(tables, t, t->id, seen))
		{
			ms_problem *p = palloc0(sizeof(ms_problem));

			p->table = t->name;
			p->problem = "foreign key cycle";
			p->detail = psprintf("Mirrored table %s points, through its foreign keys, back at itself: no order sends parents first.",
								 t->name);
			*problems = lappend(*problems, p);
		}
	}
	pfree(seen);
}

List *
ms_catalog_read(List **problems)
{
	List	   *decls = ms_decl_read_all();
	List	   *tables = NIL;
	ListCell   *lc;
	bool		changed = true;
	int			rounds = 0;

	foreach(lc, decls)
	{
		ms_table   *t = ms_validate(lfirst(lc), decls, false, problems);

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
	/* the columns a foreign key references travel spelled, as the columns pointing at them do */
	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);

		for (int f = 0; f < t->nfkeys; f++)
		{
			ms_table   *p = ms_catalog_find(tables, t->fkeys[f].parent);

			for (int i = 0; p != NULL && i < t->fkeys[f].ncols; i++)
				for (int c = 0; c < p->ncolumns; c++)
					if (strcmp(p->columns[c].name, t->fkeys[f].parent_cols[i]) == 0)
						p->columns[c].spelled = true;
		}
	}
	if (changed)
		name_cycles(tables, problems);
	list_sort(tables, table_order);
	return tables;
}

List *
ms_catalog_tables(void)
{
	List	   *problems = NIL;
	List	   *tables = ms_catalog_read(&problems);

	return ms_catalog_hold(tables, problems, NULL);
}

/* the place of the table of this id in tables, or -1 */
static int
place_of(List *tables, int id)
{
	ListCell   *lc;

	foreach(lc, tables)
		if (((ms_table *) lfirst(lc))->id == id)
			return foreach_current_index(lc);
	return -1;
}

List *
ms_catalog_hold(List *tables, List *problems, List **held)
{
	int			n = list_length(tables);
	char	  **why = palloc0(sizeof(char *) * Max(n, 1));
	List	   *flowing = NIL;
	List	   *gone = NIL;		/* troubled tables not described: their names */
	ListCell   *lc;
	bool		changed = true;

	foreach(lc, problems)
	{
		ms_problem *p = lfirst(lc);
		bool		found = false;
		ListCell   *tc;

		if (p->table == NULL || p->table[0] == '\0')
			ms_catalog_refuse(p, "SELECT * FROM sync.check() lists every problem.");
		if (strcmp(p->problem, MS_CHECK_UNINDEXED) == 0)
			continue;
		foreach(tc, tables)
		{
			ms_table   *t = lfirst(tc);

			if (strcmp(t->name, p->table) == 0)
			{
				found = true;
				if (why[foreach_current_index(tc)] == NULL)
					why[foreach_current_index(tc)] = psprintf("%s: %s", p->problem, p->detail);
			}
		}
		if (!found && !list_member(gone, makeString(p->table)))
		{
			gone = lappend(gone, makeString(p->table));
			if (held != NULL)
			{
				ms_held    *h = palloc0(sizeof(ms_held));

				h->name = p->table;
				h->why = psprintf("%s: %s", p->problem, p->detail);
				*held = lappend(*held, h);
			}
		}
	}
	/* every table joined to one held back, either way, until none is added */
	while (changed)
	{
		changed = false;
		foreach(lc, tables)
		{
			ms_table   *t = lfirst(lc);
			int			i = foreach_current_index(lc);

			for (int f = 0; f < t->nfkeys; f++)
			{
				int			j = place_of(tables, t->fkeys[f].parent);
				ms_table   *parent = j >= 0 ? list_nth(tables, j) : NULL;

				if (why[i] == NULL && (j < 0 || why[j] != NULL))
					why[i] = psprintf("its foreign key %s points at %s, which is held back",
									  t->fkeys[f].name, parent ? parent->name : "a table no longer described");
				else if (why[i] != NULL && j >= 0 && why[j] == NULL)
					why[j] = psprintf("%s, which points at it, is held back", t->name);
				else
					continue;
				changed = true;
			}
		}
	}
	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);
		int			i = foreach_current_index(lc);

		if (why[i] == NULL)
			flowing = lappend(flowing, t);
		else if (held != NULL)
		{
			ms_held    *h = palloc0(sizeof(ms_held));

			h->t = t;
			h->name = t->name;
			h->why = why[i];
			*held = lappend(*held, h);
		}
	}
	return flowing;
}

void
ms_catalog_refuse(const ms_problem *p, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("the declaration of %s no longer matches its table: %s",
					p->table, p->problem),
			 errdetail_internal("%s", p->detail),
			 errhint("%s", hint)));
	pg_unreachable();
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
	 * bytes, a colon, its spelling (keys.h).  The same bytes as
	 * sync.key(ARRAY[...]), without building an array and calling a
	 * function for every row.
	 */
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int k = 0; k < t->nkey; k++)
	{
		const ms_column *c = &t->columns[t->key[k]];

		char	   *part = ms_key_text_sql(c->type, psprintf("%s.%s", alias, c->quoted));

		if (k > 0)
			appendStringInfoString(&buf, " OPERATOR(pg_catalog.||) ");
		appendStringInfo(&buf, "pg_catalog.octet_length(%s)::pg_catalog.text"
						 " OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) %s", part, part);
	}
	appendStringInfoString(&buf, ") COLLATE \"C\"");
	return buf.data;
}

/*
 * key_compared: each key column of alias equal, by its type's own equality
 * (citext's is not pg_catalog's), to its part of keyexpr, or (parts not
 * NULL) to the column parts.kpN ms_key_parts_out made of it.
 */
static char *
key_compared(const ms_table *t, const char *alias, const char *keyexpr, const char *parts)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int k = 0; k < t->nkey; k++)
	{
		const ms_column *c = &t->columns[t->key[k]];

		appendStringInfo(&buf, "%s%s.%s %s %s", k > 0 ? " AND " : "", alias, c->quoted, ms_eq_operator(c->type),
						 parts != NULL ? psprintf("%s.kp%d", parts, k + 1) : ms_key_part(c, keyexpr, k + 1));
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

char *
ms_key_match(const ms_table *t, const char *alias, const char *keyexpr)
{
	return key_compared(t, alias, keyexpr, NULL);
}

char *
ms_key_parts_out(const ms_table *t, const char *keyexpr)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int k = 0; k < t->nkey; k++)
		appendStringInfo(&buf, ", %s AS kp%d", ms_key_part(&t->columns[t->key[k]], keyexpr, k + 1), k + 1);
	return buf.data;
}

char *
ms_key_match_parts(const ms_table *t, const char *alias, const char *parts)
{
	return key_compared(t, alias, NULL, parts);
}

char *
ms_key_part(const ms_column *c, const char *keyexpr, int i)
{
	/* the cast keeps the key's "C": the column's own collation, said explicitly, wins */
	return psprintf("((sync.key_parts(%s))[%d]::%s%s%s)", keyexpr, i, format_type_be_qualified(c->type),
					OidIsValid(c->collation) ? " COLLATE " : "",
					OidIsValid(c->collation) ? generate_collation_name(c->collation) : "");
}

char *
ms_fkey_match(const ms_table *child, const ms_fkey *fk, const char *c, const char *p, bool to_child)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < fk->ncols; i++)
		appendStringInfo(&buf, "%s(%s.%s%s) %s (%s.%s%s)", i > 0 ? " AND " : "",
						 p, quote_identifier(fk->parent_cols[i]), to_child ? fk->collate[i] : "", fk->eq[i],
						 c, child->columns[fk->cols[i]].quoted, to_child ? "" : fk->parent_collate[i]);
	appendStringInfoChar(&buf, ')');
	return buf.data;
}
