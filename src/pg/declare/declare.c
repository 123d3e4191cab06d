/*-------------------------------------------------------------------------
 * declare.c
 *	  Declaring a table (docs/design.md 3): sync.mirror checks a declaration
 *	  against pg_catalog, stores it in sync.tables and installs the noting
 *	  triggers; sync.unmirror takes it back.
 *
 * Every misuse a user can make is its own ereport, so that whoever declares
 * a table learns what to change.  Identifiers come from the catalogs and are
 * quoted once; values reach SQL only as $n parameters.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "parser/scansup.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "catalog.h"
#include "notes.h"

PG_FUNCTION_INFO_V1(ms_mirror);
PG_FUNCTION_INFO_V1(ms_unmirror);
PG_FUNCTION_INFO_V1(ms_retrigger);

/* A foreign key of the table being declared, from pg_constraint. */
typedef struct fk_info
{
	char	   *name;
	Oid			parent;
	int			ncols;
	AttrNumber *cols;
	AttrNumber *parent_cols;
} fk_info;

/* The parsed sync rule. */
typedef struct rule_info
{
	char	   *word;			/* broadcast, assigned, follows, grouped, or NULL */
	char	   *column;			/* assigned / follows */
	List	   *members;		/* grouped: qualified name of the member table */
	List	   *assigned;		/* grouped: of the assignment table */
	char	   *group;			/* grouped: the group column, when given */
	char	   *replica;		/* grouped: the replica column, when given */
} rule_info;

/* What sync.mirror is declaring. */
typedef struct mirror_in
{
	Oid			relid;
	Relation	rel;
	const char *tabname;		/* for messages */
	bool		record;
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
	int			nfks;
	fk_info    *fks;
} mirror_in;

static char *
arg_name(FunctionCallInfo fcinfo, int i)
{
	return PG_ARGISNULL(i) ? NULL : pstrdup(NameStr(*PG_GETARG_NAME(i)));
}

static char **
arg_names(FunctionCallInfo fcinfo, int i, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	char	  **out;

	*n = 0;
	if (PG_ARGISNULL(i))
		return NULL;
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(i), NAMEOID, NAMEDATALEN, false,
					  TYPALIGN_CHAR, &elems, &nulls, n);
	out = palloc0(sizeof(char *) * (*n + 1));
	for (int j = 0; j < *n; j++)
	{
		if (nulls[j])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("a list of columns has a null element")));
		out[j] = pstrdup(NameStr(*DatumGetName(elems[j])));
	}
	return out;
}

/* attnum_of: a column of the declared table, which must exist. */
static AttrNumber
attnum_of(mirror_in *m, const char *name, const char *role)
{
	AttrNumber	att = get_attnum(m->relid, name);

	if (att == InvalidAttrNumber || att < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of %s does not exist", name, m->tabname),
				 errdetail("It is named as the table's %s.", role),
				 errhint("Name an existing column of %s.", m->tabname)));
	return att;
}

static Form_pg_attribute
att_of(mirror_in *m, AttrNumber att)
{
	return TupleDescAttr(RelationGetDescr(m->rel), att - 1);
}

static bool
in_list(const char *name, char **list, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

/* check_list: every column of a list exists, and none is listed twice. */
static void
check_list(mirror_in *m, char **list, int n, const char *role)
{
	for (int i = 0; i < n; i++)
	{
		attnum_of(m, list[i], role);
		for (int j = 0; j < i; j++)
			if (strcmp(list[i], list[j]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" is listed twice as the %s of %s",
								list[i], role, m->tabname),
						 errdetail("A column is named once in each list."),
						 errhint("Remove the repeated name.")));
	}
}

static void
refuse_role(mirror_in *m, const char *col, const char *list, const char *role)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("column \"%s\" of %s cannot be %s", col, m->tabname, list),
			 errdetail("It is the table's %s.", role),
			 errhint("Remove \"%s\" from %s.", col, list)));
}

/* key_of: the declared key, or the primary key's columns in its order. */
static void
key_of(mirror_in *m)
{
	Oid			pk;
	HeapTuple	tup;
	Form_pg_index index;

	if (m->nkey > 0)
		return;
	pk = RelationGetPrimaryKeyIndex(m->rel);
	if (!OidIsValid(pk))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("%s has no key", m->tabname),
				 errdetail("It has no primary key, and no key was given."),
				 errhint("Add a primary key, or name its key columns with key => ARRAY[...].")));
	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pk));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for index %u", pk);
	index = (Form_pg_index) GETSTRUCT(tup);
	m->nkey = index->indnkeyatts;
	m->key = palloc(sizeof(char *) * m->nkey);
	for (int k = 0; k < m->nkey; k++)
		m->key[k] = get_attname(m->relid, index->indkey.values[k], false);
	ReleaseSysCache(tup);
}

static void
check_key(mirror_in *m)
{
	AttrNumber *atts = palloc(sizeof(AttrNumber) * (m->nkey + 1));

	check_list(m, m->key, m->nkey, "key");
	for (int k = 0; k < m->nkey; k++)
	{
		Form_pg_attribute att;

		atts[k] = attnum_of(m, m->key[k], "key");
		att = att_of(m, atts[k]);
		if (!ms_key_type_ok(att->atttypid))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("key column \"%s\" of %s has type %s", m->key[k], m->tabname,
							format_type_be(att->atttypid)),
					 errdetail("A key column is smallint, integer, bigint, text, varchar or uuid: its text is the same on every replica."),
					 errhint("Declare another key, or change the column's type.")));
		if (!att->attnotnull)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("key column \"%s\" of %s is nullable", m->key[k], m->tabname),
					 errdetail("Every row of a mirrored table has a whole key."),
					 errhint("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL.",
							 m->tabname, quote_identifier(m->key[k]))));
	}
	if (!ms_unique_on(m->relid, m->nkey, atts))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("the key of %s is not unique", m->tabname),
				 errdetail("No unique index of %s is on exactly its key columns.", m->tabname),
				 errhint("Add a primary key or a unique constraint on the key columns.")));
}

/* read_fks: the table's foreign keys, from pg_constraint. */
static void
read_fks(mirror_in *m)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(m->relid)};
	MemoryContext cxt = CurrentMemoryContext;
	int			rc;

	rc = SPI_execute_with_args(
		"SELECT c.conname::text, c.confrelid, c.conkey, c.confkey"
		"  FROM pg_catalog.pg_constraint c"
		" WHERE c.conrelid = $1 AND c.contype = 'f' ORDER BY c.conname",
		1, argtypes, args, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading foreign keys failed: %s", SPI_result_code_string(rc));
	MemoryContextSwitchTo(cxt);
	m->nfks = (int) SPI_processed;
	m->fks = palloc0(sizeof(fk_info) * (m->nfks + 1));
	for (int i = 0; i < m->nfks; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum	   *conkey;
		Datum	   *confkey;
		int			n;

		m->fks[i].name = TextDatumGetCString(SPI_getbinval(tup, desc, 1, &isnull));
		m->fks[i].parent = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 3, &isnull)),
						  INT2OID, 2, true, TYPALIGN_SHORT, &conkey, NULL, &n);
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 4, &isnull)),
						  INT2OID, 2, true, TYPALIGN_SHORT, &confkey, NULL, &n);
		m->fks[i].ncols = n;
		m->fks[i].cols = palloc(sizeof(AttrNumber) * n);
		m->fks[i].parent_cols = palloc(sizeof(AttrNumber) * n);
		for (int c = 0; c < n; c++)
		{
			m->fks[i].cols[c] = DatumGetInt16(conkey[c]);
			m->fks[i].parent_cols[c] = DatumGetInt16(confkey[c]);
		}
	}
	SPI_freetuptable(SPI_tuptable);
}

/*
 * declared_id: the sync.tables id of relid, or 0; *key gets its key
 * columns when asked.
 */
static int
declared_id(Oid relid, int *nkey, char ***key)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	MemoryContext cxt = CurrentMemoryContext;
	int			rc;
	int			id = 0;

	rc = SPI_execute_with_args("SELECT id, key::text[] FROM sync.tables WHERE relid = $1",
							   1, argtypes, args, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading sync.tables failed: %s", SPI_result_code_string(rc));
	MemoryContextSwitchTo(cxt);
	if (SPI_processed > 0)
	{
		bool		isnull;

		id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		if (key != NULL)
		{
			Datum	   *elems;
			int			n;

			deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[0],
															   SPI_tuptable->tupdesc, 2, &isnull)),
							  TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &n);
			*nkey = n;
			*key = palloc(sizeof(char *) * n);
			for (int i = 0; i < n; i++)
				(*key)[i] = TextDatumGetCString(elems[i]);
		}
	}
	SPI_freetuptable(SPI_tuptable);
	return id;
}

/* fk_mirrored: how many of fk's columns travel (are not unmirrored). */
static int
fk_mirrored(mirror_in *m, fk_info *fk)
{
	int			n = 0;

	for (int c = 0; c < fk->ncols; c++)
		if (!in_list(get_attname(m->relid, fk->cols[c], false), m->unmirrored, m->nunmirrored))
			n++;
	return n;
}

/*
 * check_fks: every foreign key whose columns travel points at a mirrored
 * table (or this one) through its declared key: a replica must never hold
 * a row without its parents.
 */
static void
check_fks(mirror_in *m)
{
	for (int i = 0; i < m->nfks; i++)
	{
		fk_info    *fk = &m->fks[i];
		int			n = fk_mirrored(m, fk);
		int			pnkey = m->nkey;
		char	  **pkey = m->key;
		char	   *pname = ms_wire_name(fk->parent);

		if (n == 0)
			continue;
		if (n < fk->ncols)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("foreign key %s of %s is partly unmirrored", fk->name, m->tabname),
					 errdetail("A replica follows a foreign key only when all of its columns travel."),
					 errhint("List all of its columns in unmirrored, or none.")));
		if (fk->parent != m->relid && declared_id(fk->parent, &pnkey, &pkey) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_FOREIGN_KEY),
					 errmsg("%s points at %s, which is not mirrored", m->tabname, pname),
					 errdetail("Foreign key %s: a replica must never hold a row without the rows it points at.",
							   fk->name),
					 errhint("Declare %s first with sync.mirror, or list the foreign key's columns in unmirrored.",
							 pname)));
		/* the parent's key must be read from the child's columns */
		{
			bool		ok = pnkey == fk->ncols;

			for (int k = 0; k < pnkey && ok; k++)
			{
				bool		found = false;

				for (int c = 0; c < fk->ncols; c++)
					if (strcmp(get_attname(fk->parent, fk->parent_cols[c], false), pkey[k]) == 0)
						found = true;
				ok = found;
			}
			if (!ok)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_FOREIGN_KEY),
						 errmsg("foreign key %s of %s does not reference the key of %s",
								fk->name, m->tabname, pname),
						 errdetail("A row's parent is named by its key, so a foreign key between mirrored tables references the parent's declared key."),
						 errhint("Reference the key columns of %s.", pname)));
		}
	}
}

/* The sync rule's parser: words, (quoted) identifiers, punctuation. */
typedef struct lexer
{
	const char *s;
	const char *p;
} lexer;

static void
malformed(lexer *lx, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("malformed sync rule \"%s\"", lx->s),
			 errdetail("%s.", what),
			 errhint("Write 'broadcast', 'assigned(col)', 'follows(col)' or "
					 "'grouped(members => schema.table, assigned => schema.table)'.")));
}

static void
skip_space(lexer *lx)
{
	while (*lx->p && scanner_isspace(*lx->p))
		lx->p++;
}

/* ident: an SQL identifier, downcased unless quoted; NULL when there is none. */
static char *
ident(lexer *lx)
{
	StringInfoData buf;

	skip_space(lx);
	initStringInfo(&buf);
	if (*lx->p == '"')
	{
		lx->p++;
		for (;;)
		{
			if (*lx->p == '\0')
				malformed(lx, "A quoted name is not closed");
			if (*lx->p == '"')
			{
				if (lx->p[1] != '"')
					break;
				lx->p++;
			}
			appendStringInfoChar(&buf, *lx->p++);
		}
		lx->p++;
		if (buf.len == 0)
			malformed(lx, "A quoted name is empty");
		return buf.data;
	}
	{
		const char *start = lx->p;

		while (*lx->p && (isalnum((unsigned char) *lx->p) || *lx->p == '_' || *lx->p == '$' ||
						  IS_HIGHBIT_SET(*lx->p)))
			lx->p++;
		if (lx->p == start)
			return NULL;
		return downcase_truncate_identifier(start, (int) (lx->p - start), false);
	}
}

static bool
punct(lexer *lx, const char *tok)
{
	skip_space(lx);
	if (strncmp(lx->p, tok, strlen(tok)) == 0)
	{
		lx->p += strlen(tok);
		return true;
	}
	return false;
}

static List *
qualified(lexer *lx)
{
	List	   *names = NIL;

	do
	{
		char	   *n = ident(lx);

		if (n == NULL)
			malformed(lx, "A table name is missing");
		names = lappend(names, makeString(n));
	} while (punct(lx, "."));
	return names;
}

static rule_info
parse_rule(const char *text)
{
	rule_info	r;
	lexer		lx = {text, text};
	char	   *word;

	memset(&r, 0, sizeof(r));
	word = ident(&lx);
	if (word == NULL)
		malformed(&lx, "It does not begin with a rule");
	if (strcmp(word, "broadcast") != 0 && strcmp(word, "assigned") != 0 &&
		strcmp(word, "follows") != 0 && strcmp(word, "grouped") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown sync rule \"%s\"", word),
				 errdetail("The rules are broadcast, assigned, follows and grouped; no rule (NULL) sends a row only as the parent of another."),
				 errhint("Write 'broadcast', 'assigned(col)', 'follows(col)' or "
						 "'grouped(members => schema.table, assigned => schema.table)'.")));
	r.word = word;
	if (strcmp(word, "broadcast") == 0)
	{
		if (punct(&lx, "(") && !punct(&lx, ")"))
			malformed(&lx, "broadcast takes no column");
	}
	else if (strcmp(word, "assigned") == 0 || strcmp(word, "follows") == 0)
	{
		if (!punct(&lx, "("))
			malformed(&lx, psprintf("%s needs a column in parentheses", word));
		r.column = ident(&lx);
		if (r.column == NULL)
			malformed(&lx, psprintf("%s needs a column in parentheses", word));
		if (!punct(&lx, ")"))
			malformed(&lx, psprintf("%s takes one column", word));
	}
	else
	{
		if (!punct(&lx, "("))
			malformed(&lx, "grouped needs members => and assigned => in parentheses");
		do
		{
			char	   *param = ident(&lx);

			if (param == NULL || !punct(&lx, "=>"))
				malformed(&lx, "grouped takes name => value pairs");
			if (strcmp(param, "members") == 0 && r.members == NIL)
				r.members = qualified(&lx);
			else if (strcmp(param, "assigned") == 0 && r.assigned == NIL)
				r.assigned = qualified(&lx);
			else if (strcmp(param, "group") == 0 && r.group == NULL)
				r.group = ident(&lx);
			else if (strcmp(param, "replica") == 0 && r.replica == NULL)
				r.replica = ident(&lx);
			else
				malformed(&lx, psprintf("\"%s\" is not a parameter of grouped, or is given twice", param));
		} while (punct(&lx, ","));
		if (!punct(&lx, ")"))
			malformed(&lx, "A parenthesis is not closed");
		if (r.members == NIL || r.assigned == NIL)
			malformed(&lx, "grouped needs both members => and assigned =>");
	}
	skip_space(&lx);
	if (*lx.p != '\0')
		malformed(&lx, psprintf("\"%s\" follows the rule", lx.p));
	return r;
}

/* group_table: the relation a grouped rule names, which must be a table. */
static Oid
group_table(List *names, const char *role)
{
	Oid			relid = RangeVarGetRelid(makeRangeVarFromNameList(names), AccessShareLock, true);
	char		kind;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("%s table %s does not exist", role, NameListToString(names)),
				 errhint("Name it schema-qualified, as grouped(members => schema.table, assigned => schema.table).")));
	kind = get_rel_relkind(relid);
	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s table %s is not a table", role, NameListToString(names))));
	return relid;
}

/* The grouped rule, resolved against its tables. */
typedef struct group_info
{
	Oid			members;
	Oid			assignments;
	char	  **member_key;		/* in the grouped table's key order */
	char	   *group;
	char	   *replica;
} group_info;

static group_info
check_grouped(mirror_in *m, rule_info *r)
{
	group_info	g;
	Oid			argtypes[2] = {OIDOID, OIDOID};
	Datum		args[2];
	MemoryContext cxt = CurrentMemoryContext;
	int			rc;
	char	   *mname;
	char	   *aname;
	int			nfk = 0;
	char	  **fkcols = NULL;
	Oid			gtype;
	Oid			rtype;

	memset(&g, 0, sizeof(g));
	g.members = group_table(r->members, "member");
	g.assignments = group_table(r->assigned, "assignment");
	mname = ms_wire_name(g.members);
	aname = ms_wire_name(g.assignments);

	/* the member table's foreign key to this table, on its key */
	args[0] = ObjectIdGetDatum(g.members);
	args[1] = ObjectIdGetDatum(m->relid);
	rc = SPI_execute_with_args(
		"SELECT c.conname::text,"
		"       ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, i)"
		"               JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i),"
		"       ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, i)"
		"               JOIN pg_catalog.pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i)"
		"  FROM pg_catalog.pg_constraint c"
		" WHERE c.conrelid = $1 AND c.confrelid = $2 AND c.contype = 'f'",
		2, argtypes, args, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading foreign keys failed: %s", SPI_result_code_string(rc));
	MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum	   *cols;
		Datum	   *pcols;
		int			n;
		char	  **ordered = palloc0(sizeof(char *) * (m->nkey + 1));
		bool		ok;

		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)),
						  TEXTOID, -1, false, TYPALIGN_INT, &cols, NULL, &n);
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull)),
						  TEXTOID, -1, false, TYPALIGN_INT, &pcols, NULL, &n);
		ok = n == m->nkey;
		for (int k = 0; k < m->nkey && ok; k++)
		{
			for (int c = 0; c < n; c++)
				if (strcmp(TextDatumGetCString(pcols[c]), m->key[k]) == 0)
					ordered[k] = TextDatumGetCString(cols[c]);
			ok = ordered[k] != NULL;
		}
		if (ok)
		{
			nfk++;
			fkcols = ordered;
		}
	}
	SPI_freetuptable(SPI_tuptable);
	if (nfk != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FOREIGN_KEY),
				 errmsg("member table %s has %s foreign key to the key of %s", mname,
						nfk == 0 ? "no" : "more than one", m->tabname),
				 errdetail("A member row names the grouped row it puts in a group by one foreign key."),
				 errhint("Give %s one foreign key referencing the key of %s.", mname, m->tabname)));
	g.member_key = fkcols;

	/* the group column: given, or the one column the two tables share */
	if (r->group != NULL)
		g.group = r->group;
	else
	{
		int			found = 0;
		Relation	rel = relation_open(g.members, AccessShareLock);
		TupleDesc	desc = RelationGetDescr(rel);

		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);
			char	   *name = NameStr(att->attname);

			if (att->attisdropped || in_list(name, g.member_key, m->nkey))
				continue;
			if (get_attnum(g.assignments, name) != InvalidAttrNumber &&
				get_attnum(g.assignments, name) > 0)
			{
				g.group = pstrdup(name);
				found++;
			}
		}
		relation_close(rel, AccessShareLock);
		if (found != 1)
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("cannot tell the group column of %s and %s", mname, aname),
					 errdetail("They share %s.", found == 0 ? "no column" : "more than one column"),
					 errhint("Name it: grouped(members => ..., assigned => ..., group => col).")));
	}
	if (get_attnum(g.members, g.group) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("member table %s has no group column \"%s\"", mname, g.group)));
	if (get_attnum(g.assignments, g.group) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("assignment table %s has no group column \"%s\"", aname, g.group)));
	gtype = get_atttype(g.members, get_attnum(g.members, g.group));
	if (gtype != get_atttype(g.assignments, get_attnum(g.assignments, g.group)))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("group column \"%s\" has one type in %s and another in %s", g.group, mname, aname),
				 errhint("Give both the same type.")));

	/* the replica column: given, or the assignment table's one other uuid column */
	if (r->replica != NULL)
		g.replica = r->replica;
	else
	{
		int			found = 0;
		Relation	rel = relation_open(g.assignments, AccessShareLock);
		TupleDesc	desc = RelationGetDescr(rel);

		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);

			if (!att->attisdropped && getBaseType(att->atttypid) == UUIDOID &&
				strcmp(NameStr(att->attname), g.group) != 0)
			{
				g.replica = pstrdup(NameStr(att->attname));
				found++;
			}
		}
		relation_close(rel, AccessShareLock);
		if (found != 1)
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("cannot tell the replica column of %s", aname),
					 errdetail("It has %s uuid column besides its group column.",
							   found == 0 ? "no" : "more than one"),
					 errhint("Name it: grouped(members => ..., assigned => ..., replica => col).")));
	}
	if (get_attnum(g.assignments, g.replica) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("assignment table %s has no replica column \"%s\"", aname, g.replica)));
	rtype = get_atttype(g.assignments, get_attnum(g.assignments, g.replica));
	if (getBaseType(rtype) != UUIDOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("replica column \"%s\" of %s is not a uuid", g.replica, aname),
				 errdetail("It holds the uuid of the replica given the group."),
				 errhint("Name a uuid column with replica => col.")));
	return g;
}

/* json_object_of: {names[i]: values[i]} as JSON text; values are numbers when numeric. */
static char *
json_object_of(int n, char **names, char **values, bool numeric)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(&buf, ", ");
		escape_json(&buf, names[i]);
		appendStringInfoString(&buf, ": ");
		if (numeric)
			appendStringInfoString(&buf, values[i]);
		else
			escape_json(&buf, values[i]);
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

static Datum
names_datum(int n, char **names)
{
	Datum	   *elems = palloc(sizeof(Datum) * (n + 1));

	for (int i = 0; i < n; i++)
		elems[i] = CStringGetTextDatum(names[i]);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

#define NPARAMS 25

/*
 * ms_mirror: sync.mirror(tab, mirror, sync, key, origin, version,
 * replica_owned, unmirrored, retired, created, generated, active,
 * partition, codec, sender): declares tab.
 */
Datum
ms_mirror(PG_FUNCTION_ARGS)
{
	mirror_in	m;
	char	   *mirror;
	char	   *codec;
	rule_info	rule;
	group_info	group;
	char		kind;
	AttrNumber	origin_att = InvalidAttrNumber;
	AttrNumber	rule_att = InvalidAttrNumber;
	AttrNumber	part_att = InvalidAttrNumber;
	Datum		values[NPARAMS];
	char		nulls[NPARAMS];
	Oid			types[NPARAMS];
	TupleDesc	desc;
	int			ncols = 0;
	char	  **colnames;
	char	  **coltypes;
	char	  **fieldnums;
	int			nfk = 0;
	char	  **fknames;
	char	  **fkparents;
	int			id;
	List	   *problems = NIL;
	List	   *tables;
	ms_table   *t;
	ListCell   *lc;
	char	   *wire;
	int			rc;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sync.mirror needs a table and a mirror"),
				 errhint("SELECT sync.mirror('schema.table', 'catalog', 'broadcast').")));
	memset(&m, 0, sizeof(m));
	memset(&rule, 0, sizeof(rule));
	memset(&group, 0, sizeof(group));
	m.relid = PG_GETARG_OID(0);
	mirror = text_to_cstring(PG_GETARG_TEXT_PP(1));
	m.key = arg_names(fcinfo, 3, &m.nkey);
	m.origin = arg_name(fcinfo, 4);
	m.version = arg_name(fcinfo, 5);
	m.owned = arg_names(fcinfo, 6, &m.nowned);
	m.unmirrored = arg_names(fcinfo, 7, &m.nunmirrored);
	m.retired = arg_name(fcinfo, 8);
	m.created = arg_name(fcinfo, 9);
	m.generated = arg_names(fcinfo, 10, &m.ngenerated);
	m.active = PG_ARGISNULL(11) ? InvalidOid : PG_GETARG_OID(11);
	m.partition = arg_name(fcinfo, 12);
	codec = PG_ARGISNULL(13) ? "json" : text_to_cstring(PG_GETARG_TEXT_PP(13));
	m.sender = arg_name(fcinfo, 14);

	SPI_connect();

	/* the table */
	kind = get_rel_relkind(m.relid);
	m.tabname = get_rel_name(m.relid) ? quote_qualified_identifier(
		get_namespace_name(get_rel_namespace(m.relid)), get_rel_name(m.relid)) : "?";
	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s is not a table", m.tabname),
				 errdetail("Only tables and partitioned tables are mirrored."),
				 errhint("Declare the table a view or other relation reads.")));
	if (get_rel_relispartition(m.relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s is a partition", m.tabname),
				 errdetail("A partitioned table is mirrored whole, by its own name."),
				 errhint("Declare the partitioned table it belongs to.")));
	if (declared_id(m.relid, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("%s is already mirrored", m.tabname),
				 errdetail("A table is declared once."),
				 errhint("sync.unmirror it first to declare it again.")));
	wire = ms_wire_name(m.relid);
	{
		Oid			argtypes[1] = {TEXTOID};
		Datum		args[1] = {CStringGetTextDatum(wire)};

		rc = SPI_execute_with_args("SELECT 1 FROM sync.tables WHERE name = $1", 1, argtypes,
								   args, NULL, true, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "reading sync.tables failed");
		if (SPI_processed > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("another mirrored table travels as \"%s\"", wire),
					 errdetail("Replicas know a table by its name: the relation name, or schema.relname outside public."),
					 errhint("Rename one of the two tables.")));
	}
	m.rel = relation_open(m.relid, AccessShareLock);

	/* the words */
	if (strcmp(mirror, "record") == 0)
		m.record = true;
	else if (strcmp(mirror, "catalog") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown mirror \"%s\"", mirror),
				 errdetail("A table is a catalog (written on the server) or a record (written by replicas)."),
				 errhint("Write 'catalog' or 'record'.")));
	if (strcmp(codec, "proto") == 0)
		m.proto = true;
	else if (strcmp(codec, "json") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown codec \"%s\"", codec),
				 errhint("Write 'json' or 'proto'.")));
	if (!PG_ARGISNULL(2))
		rule = parse_rule(text_to_cstring(PG_GETARG_TEXT_PP(2)));

	/* the columns */
	key_of(&m);
	check_key(&m);
	check_list(&m, m.owned, m.nowned, "replica_owned");
	check_list(&m, m.unmirrored, m.nunmirrored, "unmirrored");
	check_list(&m, m.generated, m.ngenerated, "generated");
	for (int i = 0; i < m.nowned; i++)
	{
		if (in_list(m.owned[i], m.key, m.nkey))
			refuse_role(&m, m.owned[i], "replica_owned", "key column");
		if (in_list(m.owned[i], m.unmirrored, m.nunmirrored))
			refuse_role(&m, m.owned[i], "replica_owned", "unmirrored column");
	}
	if (m.nowned > 0 && m.record)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("replica_owned is for catalog tables"),
				 errdetail("A record is written by replicas whole; replica_owned names the columns of a catalog that replicas write."),
				 errhint("Remove replica_owned, or declare %s a catalog.", m.tabname)));
	for (int i = 0; i < m.nunmirrored; i++)
		if (in_list(m.unmirrored[i], m.key, m.nkey))
			refuse_role(&m, m.unmirrored[i], "unmirrored", "key column");

	if (m.record)
	{
		if (m.origin == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("record %s has no origin", m.tabname),
					 errdetail("A record is keyed by the replica that wrote it: its key includes its origin, a uuid column."),
					 errhint("Name it with origin => col.")));
		origin_att = attnum_of(&m, m.origin, "origin");
		if (getBaseType(att_of(&m, origin_att)->atttypid) != UUIDOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("origin column \"%s\" of %s is not a uuid", m.origin, m.tabname),
					 errdetail("The origin of a record is the uuid of the replica that wrote it.")));
		if (!in_list(m.origin, m.key, m.nkey))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("origin column \"%s\" of %s is not in its key", m.origin, m.tabname),
					 errdetail("Replicas write records independently: only a key that includes the writer is unique across them."),
					 errhint("Make the key (origin, ...): key => ARRAY['%s', ...].", m.origin)));
	}
	else if (m.origin != NULL || m.version != NULL || m.created != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is for record tables", m.origin != NULL ? "origin" :
						m.version != NULL ? "version" : "created"),
				 errdetail("A catalog is written on the server."),
				 errhint("Declare %s a record, or leave it out.", m.tabname)));
	if (m.version != NULL)
	{
		Form_pg_attribute att = att_of(&m, attnum_of(&m, m.version, "version"));

		if (!att->attnotnull)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("version column \"%s\" of %s is nullable", m.version, m.tabname),
					 errdetail("The newest report of a record wins by its version: every row has one."),
					 errhint("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL.", m.tabname, quote_identifier(m.version))));
		if (!OidIsValid(lookup_type_cache(att->atttypid, TYPECACHE_LT_OPR)->lt_opr))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("version column \"%s\" of %s has no order", m.version, m.tabname),
					 errdetail("Type %s has no default btree ordering.", format_type_be(att->atttypid)),
					 errhint("Use a timestamp or a number.")));
		if (in_list(m.version, m.unmirrored, m.nunmirrored))
			refuse_role(&m, m.version, "unmirrored", "version");
	}
	if (m.origin != NULL && in_list(m.origin, m.unmirrored, m.nunmirrored))
		refuse_role(&m, m.origin, "unmirrored", "origin");
	if (m.created != NULL)
	{
		Oid			type = getBaseType(att_of(&m, attnum_of(&m, m.created, "created"))->atttypid);

		if (type != TIMESTAMPTZOID && type != TIMESTAMPOID && type != DATEOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("created column \"%s\" of %s is not a timestamp", m.created, m.tabname),
					 errdetail("The server stamps it with the time it first files the row.")));
		if (in_list(m.created, m.key, m.nkey))
			refuse_role(&m, m.created, "created", "key column");
		if (in_list(m.created, m.unmirrored, m.nunmirrored))
			refuse_role(&m, m.created, "unmirrored", "created column");
	}
	for (int i = 0; i < m.ngenerated; i++)
	{
		if (in_list(m.generated[i], m.key, m.nkey))
			refuse_role(&m, m.generated[i], "generated", "key column");
		if (in_list(m.generated[i], m.owned, m.nowned))
			refuse_role(&m, m.generated[i], "generated", "replica-owned column");
		if (in_list(m.generated[i], m.unmirrored, m.nunmirrored))
			refuse_role(&m, m.generated[i], "unmirrored", "generated column");
	}
	if (m.sender != NULL)
	{
		if (getBaseType(att_of(&m, attnum_of(&m, m.sender, "sender"))->atttypid) != JSONBOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("sender column \"%s\" of %s is not jsonb", m.sender, m.tabname),
					 errdetail("It is stamped with the sender sync.file is given, a jsonb value.")));
		if (in_list(m.sender, m.key, m.nkey))
			refuse_role(&m, m.sender, "sender", "key column");
		if (in_list(m.sender, m.owned, m.nowned))
			refuse_role(&m, m.sender, "sender", "replica-owned column");
		if (in_list(m.sender, m.unmirrored, m.nunmirrored))
			refuse_role(&m, m.sender, "unmirrored", "sender column");
	}
	if (m.retired != NULL && get_attnum(m.relid, m.retired) != InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_COLUMN),
				 errmsg("retired column \"%s\" is a column of %s", m.retired, m.tabname),
				 errdetail("retired names a column of the replica's copy only, set when the replica retires a row."),
				 errhint("Choose a name %s does not use.", m.tabname)));
	if (m.partition != NULL)
	{
		part_att = attnum_of(&m, m.partition, "partition");
		if (in_list(m.partition, m.owned, m.nowned))
			refuse_role(&m, m.partition, "replica_owned", "partition column");
		if (in_list(m.partition, m.unmirrored, m.nunmirrored))
			refuse_role(&m, m.partition, "unmirrored", "partition column");
	}
	(void) part_att;
	if (OidIsValid(m.active))
	{
		char		vk = get_rel_relkind(m.active);
		char	   *vname = ms_wire_name(m.active);

		if (vk != RELKIND_VIEW && vk != RELKIND_MATVIEW)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("active relation %s is not a view", vname),
					 errdetail("The active rows of a table are those a view of it returns."),
					 errhint("CREATE VIEW ... AS SELECT * FROM %s WHERE ...", m.tabname)));
		for (int k = 0; k < m.nkey; k++)
		{
			AttrNumber	va = get_attnum(m.active, m.key[k]);

			if (va <= 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("active view %s has no column \"%s\"", vname, m.key[k]),
						 errdetail("A row is active when the view returns its key."),
						 errhint("Select the key columns of %s in the view.", m.tabname)));
			if (get_atttype(m.active, va) != get_atttype(m.relid, get_attnum(m.relid, m.key[k])))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of active view %s is not of its table's type", m.key[k], vname),
						 errdetail("A row is active when the view returns its key."),
						 errhint("Select the key columns of %s in the view as they are.", m.tabname)));
		}
	}

	/* foreign keys, then the rule that may lean on one */
	read_fks(&m);
	check_fks(&m);
	if (rule.column != NULL)
	{
		rule_att = attnum_of(&m, rule.column, rule.word);
		if (in_list(rule.column, m.unmirrored, m.nunmirrored))
			refuse_role(&m, rule.column, "unmirrored", psprintf("%s column", rule.word));
		if (in_list(rule.column, m.owned, m.nowned))
			refuse_role(&m, rule.column, "replica_owned", psprintf("%s column", rule.word));
	}
	if (rule.word != NULL && strcmp(rule.word, "assigned") == 0 &&
		getBaseType(att_of(&m, rule_att)->atttypid) != UUIDOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("assigned column \"%s\" of %s is not a uuid", rule.column, m.tabname),
				 errdetail("A row is assigned to the replica whose uuid is in the column."),
				 errhint("Name a uuid column: assigned(col).")));
	if (rule.word != NULL && strcmp(rule.word, "follows") == 0)
	{
		int			found = 0;

		for (int i = 0; i < m.nfks; i++)
			if (m.fks[i].cols[0] == rule_att && m.fks[i].parent != m.relid &&
				fk_mirrored(&m, &m.fks[i]) > 0)
				found++;
		if (found == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_FOREIGN_KEY),
					 errmsg("follows column \"%s\" of %s is not a foreign key to a mirrored table",
							rule.column, m.tabname),
					 errdetail("A following row goes wherever the row it points at goes."),
					 errhint("Name the (first) column of a foreign key to another mirrored table.")));
		if (found > 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_FOREIGN_KEY),
					 errmsg("follows column \"%s\" of %s begins more than one foreign key", rule.column, m.tabname),
					 errhint("Follow a column that begins one foreign key only.")));
	}
	if (rule.word != NULL && strcmp(rule.word, "grouped") == 0)
		group = check_grouped(&m, &rule);

	/* what sync.check compares the table with later */
	desc = RelationGetDescr(m.rel);
	colnames = palloc(sizeof(char *) * (desc->natts + 1));
	coltypes = palloc(sizeof(char *) * (desc->natts + 1));
	fieldnums = palloc(sizeof(char *) * (desc->natts + 1));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || in_list(NameStr(att->attname), m.unmirrored, m.nunmirrored))
			continue;
		colnames[ncols] = pstrdup(NameStr(att->attname));
		coltypes[ncols] = format_type_with_typemod(att->atttypid, att->atttypmod);
		fieldnums[ncols] = psprintf("%d", ncols + 1);
		ncols++;
	}
	fknames = palloc(sizeof(char *) * (m.nfks + 1));
	fkparents = palloc(sizeof(char *) * (m.nfks + 1));
	for (int i = 0; i < m.nfks; i++)
	{
		if (fk_mirrored(&m, &m.fks[i]) == 0)
			continue;
		fknames[nfk] = m.fks[i].name;
		fkparents[nfk] = m.fks[i].parent == m.relid ? "0" :
			psprintf("%d", declared_id(m.fks[i].parent, NULL, NULL));
		nfk++;
	}

	/* store it */
	for (int i = 0; i < NPARAMS; i++)
	{
		nulls[i] = 'n';
		values[i] = (Datum) 0;
		types[i] = TEXTOID;
	}
#define SETP(i, v) (values[(i)] = (v), nulls[(i)] = ' ')
#define SETS(i, s) do { if ((s) != NULL) SETP(i, CStringGetTextDatum(s)); } while (0)
	types[0] = OIDOID;
	SETP(0, ObjectIdGetDatum(m.relid));
	SETS(1, wire);
	SETS(2, m.record ? "record" : "catalog");
	SETS(3, rule.word);
	SETS(4, rule.column);
	types[5] = OIDOID;
	if (OidIsValid(group.members))
		SETP(5, ObjectIdGetDatum(group.members));
	types[6] = TEXTARRAYOID;
	if (group.member_key != NULL)
		SETP(6, names_datum(m.nkey, group.member_key));
	types[7] = OIDOID;
	if (OidIsValid(group.assignments))
		SETP(7, ObjectIdGetDatum(group.assignments));
	SETS(8, group.replica);
	SETS(9, group.group);
	types[10] = TEXTARRAYOID;
	SETP(10, names_datum(m.nkey, m.key));
	SETS(11, m.origin);
	SETS(12, m.version);
	types[13] = TEXTARRAYOID;
	SETP(13, names_datum(m.nowned, m.owned));
	types[14] = TEXTARRAYOID;
	SETP(14, names_datum(m.nunmirrored, m.unmirrored));
	SETS(15, m.retired);
	SETS(16, m.created);
	types[17] = TEXTARRAYOID;
	SETP(17, names_datum(m.ngenerated, m.generated));
	types[18] = OIDOID;
	if (OidIsValid(m.active))
		SETP(18, ObjectIdGetDatum(m.active));
	SETS(19, m.partition);
	SETS(20, m.proto ? "proto" : "json");
	SETS(21, m.proto ? json_object_of(ncols, colnames, fieldnums, true) : "{}");
	SETS(22, json_object_of(ncols, colnames, coltypes, false));
	SETS(23, json_object_of(nfk, fknames, fkparents, true));
	SETS(24, m.sender);
	relation_close(m.rel, NoLock);

	rc = SPI_execute_with_args(
		"INSERT INTO sync.tables (relid, name, mirror, rule, rule_column, members, member_key,"
		"       assignments, assignment_replica, group_column, key, origin, version,"
		"       replica_owned, unmirrored, retired, created, generated, active, partition,"
		"       codec, fields, columns, foreign_keys, sender)"
		" VALUES ($1::regclass, $2, $3, $4, $5::name, $6::regclass, $7::name[], $8::regclass,"
		"       $9::name, $10::name, $11::name[], $12::name, $13::name, $14::name[], $15::name[],"
		"       $16::name, $17::name, $18::name[], $19::regclass, $20::name, $21, $22::jsonb,"
		"       $23::jsonb, $24::jsonb, $25::name)"
		" RETURNING id",
		NPARAMS, types, values, nulls, false, 0);
	if (rc != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
		elog(ERROR, "storing the declaration failed: %s", SPI_result_code_string(rc));
	{
		bool		isnull;

		id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}

	/*
	 * A self-reference was stored as parent 0: the id is known only now.
	 */
	{
		Oid			argtypes[1] = {INT4OID};
		Datum		args[1] = {Int32GetDatum(id)};

		rc = SPI_execute_with_args(
			"UPDATE sync.tables SET foreign_keys ="
			" (SELECT coalesce(pg_catalog.jsonb_object_agg(e.key,"
			"        CASE WHEN e.value = '0' THEN $1 ELSE e.value::int END), '{}')"
			"    FROM pg_catalog.jsonb_each_text(foreign_keys) e)"
			" WHERE id = $1", 1, argtypes, args, NULL, false, 0);
		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "storing the declaration failed: %s", SPI_result_code_string(rc));
	}

	/* install its triggers, as the description of it says */
	tables = ms_catalog_read(&problems);
	foreach(lc, problems)
	{
		ms_problem *p = lfirst(lc);

		if (strcmp(p->table, wire) == 0)
			elog(ERROR, "the declaration of %s does not describe it: %s", wire, p->detail);
	}
	t = ms_catalog_find(tables, id);
	if (t == NULL)
		elog(ERROR, "the declaration of %s was not stored", wire);
	foreach(lc, ms_notes_triggers(t))
		ms_trigger_create(lfirst(lc), false);

	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * ms_unmirror: sync.unmirror(tab): takes back a declaration and its
 * triggers.  Refused while another mirrored table points at tab.
 */
Datum
ms_unmirror(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	List	   *problems = NIL;
	List	   *tables;
	ListCell   *lc;
	int			id;
	char	   *name;
	Oid			members;
	Oid			assignments;
	bool		isnull;
	int			rc;
	static const char *const own_triggers[] = {"magic_sync_note", "magic_sync_truncate"};

	SPI_connect();
	rc = SPI_execute_with_args("SELECT id, name, members::oid, assignments::oid FROM sync.tables WHERE relid = $1",
							   1, argtypes, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading sync.tables failed");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("%s is not mirrored", get_rel_name(relid) ? ms_wire_name(relid) : "the table"),
				 errhint("sync.mirrors lists the mirrored tables.")));
	id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	members = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	if (isnull)
		members = InvalidOid;
	assignments = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	if (isnull)
		assignments = InvalidOid;

	tables = ms_catalog_read(&problems);
	foreach(lc, tables)
	{
		ms_table   *t = lfirst(lc);

		for (int f = 0; f < t->nfkeys; f++)
			if (t->id != id && t->fkeys[f].parent == id)
				ereport(ERROR,
						(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
						 errmsg("mirrored table %s points at %s", t->name, name),
						 errdetail("Foreign key %s: a replica must never hold a row without the rows it points at.",
								   t->fkeys[f].name),
						 errhint("sync.unmirror %s first.", t->name)));
	}

	/* our triggers, where their tables still are */
	if (get_rel_name(relid) != NULL)
	{
		List	   *rels = list_make1_oid(relid);
		ListCell   *rc2;

		/* a partitioned table's partitions have TRUNCATE triggers of their own */
		if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
		{
			rc = SPI_execute_with_args("SELECT relid FROM pg_catalog.pg_partition_tree($1) WHERE level > 0",
									   1, argtypes, args, NULL, false, 0);
			for (uint64 i = 0; rc == SPI_OK_SELECT && i < SPI_processed; i++)
				rels = lappend_oid(rels, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																		SPI_tuptable->tupdesc, 1, &isnull)));
		}
		foreach(rc2, rels)
		{
			Oid			r = lfirst_oid(rc2);

			for (int i = r == relid ? 0 : 1; i < 2; i++)
				SPI_execute(psprintf("DROP TRIGGER IF EXISTS %s ON %s", own_triggers[i],
									 quote_qualified_identifier(get_namespace_name(get_rel_namespace(r)),
																get_rel_name(r))), false, 0);
		}
	}
	for (int g = 0; g < 2; g++)
	{
		Oid			grel = g == 0 ? members : assignments;
		const char *what = g == 0 ? "member" : "assignment";

		if (!OidIsValid(grel) || get_rel_name(grel) == NULL)
			continue;
		for (int i = 0; i < 2; i++)
			SPI_execute(psprintf("DROP TRIGGER IF EXISTS %s ON %s",
								 quote_identifier(psprintf("magic_sync_%s_%d%s", what, id, i ? "_truncate" : "")),
								 quote_qualified_identifier(get_namespace_name(get_rel_namespace(grel)),
															get_rel_name(grel))), false, 0);
	}
	{
		Oid			itypes[1] = {INT4OID};
		Datum		iargs[1] = {Int32GetDatum(id)};

		rc = SPI_execute_with_args("DELETE FROM sync.tables WHERE id = $1", 1, itypes, iargs, NULL, false, 0);
		if (rc != SPI_OK_DELETE)
			elog(ERROR, "deleting the declaration failed");
	}
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * ms_retrigger: sync.retrigger(tab) installs tab's triggers again as
 * sync.mirror writes them: after one was dropped, disabled or altered, or
 * a partition was added (it has no TRUNCATE trigger of its own).
 */
Datum
ms_retrigger(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	List	   *problems = NIL;
	List	   *tables;
	ListCell   *lc;
	ms_table   *t = NULL;

	SPI_connect();
	tables = ms_catalog_read(&problems);
	foreach(lc, tables)
		if (((ms_table *) lfirst(lc))->relid == relid)
			t = lfirst(lc);
	if (t == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("%s is not mirrored", get_rel_name(relid) ? ms_wire_name(relid) : "the table"),
				 errhint("sync.mirrors lists the mirrored tables.")));
	foreach(lc, problems)
	{
		ms_problem *p = lfirst(lc);

		if (strcmp(p->table, t->name) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the declaration of %s no longer matches its table: %s", t->name, p->problem),
					 errdetail_internal("%s", p->detail),
					 errhint("Declare it again: sync.unmirror, then sync.mirror.")));
	}
	foreach(lc, ms_notes_triggers(t))
		ms_trigger_create(lfirst(lc), true);
	SPI_finish();
	PG_RETURN_VOID();
}
