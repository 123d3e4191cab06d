/*-------------------------------------------------------------------------
 * validate_links.c
 *	  The validator's part about what a declared table points at and leans
 *	  on: its foreign keys to mirrored tables (through their declared keys,
 *	  as when declared), the column its rule assigns by or follows, and a
 *	  grouped table's member and assignment tables.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"

#include "keys.h"
#include "spi_check.h"
#include "table.h"
#include "validate_int.h"

/* has_column: whether relid has a live column name. */
static bool
has_column(Oid relid, const char *name)
{
	return name != NULL && get_attnum(relid, name) > 0;
}

/* ms_v_read_fks: see validate_int.h. */
List *
ms_v_read_fks(Oid relid)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	List	   *out = NIL;
	int			rc;

	rc = SPI_execute_with_args(
		"SELECT c.conname::text, c.confrelid, c.conkey, c.confkey, c.conpfeqop"
		"  FROM pg_catalog.pg_constraint c"
		" WHERE c.conrelid OPERATOR(pg_catalog.=) $1 AND c.contype OPERATOR(pg_catalog.=) 'f' ORDER BY c.conname",
		1, argtypes, args, NULL, true, 0);
	ms_spi_check(rc, SPI_OK_SELECT, "reading foreign keys failed");
	MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		ms_fk_row  *fk = palloc0(sizeof(ms_fk_row));
		bool		isnull;
		Datum	   *conkey;
		Datum	   *confkey;
		Datum	   *eqop;
		int			n;

		fk->name = TextDatumGetCString(SPI_getbinval(tup, desc, 1, &isnull));
		fk->parent = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 3, &isnull)),
						  INT2OID, 2, true, TYPALIGN_SHORT, &conkey, NULL, &fk->ncols);
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 4, &isnull)),
						  INT2OID, 2, true, TYPALIGN_SHORT, &confkey, NULL, &fk->ncols);
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tup, desc, 5, &isnull)),
						  OIDOID, sizeof(Oid), true, TYPALIGN_INT, &eqop, NULL, &n);
		fk->cols = palloc(sizeof(char *) * fk->ncols);
		fk->parent_cols = palloc(sizeof(char *) * fk->ncols);
		fk->eqop = palloc(sizeof(Oid) * fk->ncols);
		fk->types = palloc(sizeof(Oid) * fk->ncols);
		fk->collations = palloc(sizeof(Oid) * fk->ncols);
		fk->parent_types = palloc(sizeof(Oid) * fk->ncols);
		fk->parent_collations = palloc(sizeof(Oid) * fk->ncols);
		for (int c = 0; c < fk->ncols; c++)
		{
			int32		typmod;

			fk->cols[c] = get_attname(relid, DatumGetInt16(conkey[c]), false);
			fk->parent_cols[c] = get_attname(fk->parent, DatumGetInt16(confkey[c]), false);
			fk->eqop[c] = c < n ? DatumGetObjectId(eqop[c]) : InvalidOid;
			get_atttypetypmodcoll(relid, DatumGetInt16(conkey[c]), &fk->types[c], &typmod, &fk->collations[c]);
			get_atttypetypmodcoll(fk->parent, DatumGetInt16(confkey[c]), &fk->parent_types[c], &typmod,
								  &fk->parent_collations[c]);
		}
		out = lappend(out, fk);
	}
	SPI_freetuptable(SPI_tuptable);
	return out;
}

/*
 * by_parent_key: those of fk's columns (indexes into t->columns) referencing
 * the parent's declared key, in its order; NULL when fk does not reference
 * every column of that key (it references another unique constraint).
 */
static int *
by_parent_key(const ms_table *t, const ms_fk_row *fk, const ms_decl *pd)
{
	int		   *out = palloc(sizeof(int) * (fk->ncols + 1));

	if (pd->nkey > fk->ncols)
		return NULL;
	for (int k = 0; k < pd->nkey; k++)
	{
		out[k] = -1;
		for (int c = 0; c < fk->ncols; c++)
			if (strcmp(fk->parent_cols[c], pd->key[k]) == 0)
				out[k] = ms_v_column(t, fk->cols[c]);
		if (out[k] < 0)
			return NULL;
	}
	return out;
}

/*
 * spelled_once: whether every value of type has one text in every session
 * (its output reads no setting, or a note spells it as a key part, keys.h),
 * so that a note's text of it finds the same row in the relay's session:
 * integers, numeric, text and the like, uuid, boolean, dates and times but
 * timetz, enums, citext, and domains over them.
 */
static bool
spelled_once(Oid type)
{
	Oid			base = getBaseType(type);
	Oid			out;
	bool		varlena;

	switch (base)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case NUMERICOID:
		case DATEOID:
		case TIMEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case UUIDOID:
		case BOOLOID:
			return true;
		default:
			break;
	}
	if (type_is_enum(base))
		return true;
	getTypeOutputInfo(base, &out, &varlena);
	return strcmp(get_func_name(out), "citextout") == 0;
}

/*
 * spelled_alike: whether a value of one type and the equal value of the
 * other have one spelling as key parts (keys.h): the same kind, or numbers
 * (an integer is spelled as the numeric it equals).  A timestamp equals a
 * timestamptz, and a date a timestamp, by the session's TimeZone: no.
 */
static bool
spelled_alike(Oid a, Oid b)
{
	ms_key_kind x = ms_key_kind_of(a);
	ms_key_kind y = ms_key_kind_of(b);

	if (x == y)
		return true;
	return (x == MS_KEY_INT2 || x == MS_KEY_INT4 || x == MS_KEY_INT8 || x == MS_KEY_NUMERIC) &&
		(y == MS_KEY_INT2 || y == MS_KEY_INT4 || y == MS_KEY_INT8 || y == MS_KEY_NUMERIC);
}

/* check_fkey: one foreign key whose columns travel; true when a replica can follow it. */
static bool
check_fkey(ms_vcx *v, const ms_fk_row *fk, const ms_decl *pd, bool *seen)
{
	const ms_decl *d = v->d;
	char	   *pname = ms_wire_name(fk->parent);
	int			stored = -1;

	for (int s = 0; s < d->nfkeys; s++)
		if (strcmp(d->fkeys[s].name, fk->name) == 0)
			stored = s;
	if (stored >= 0)
		seen[stored] = true;
	if (pd == NULL)
	{
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_FOREIGN_KEY,
			.problem = "foreign key to a table not mirrored",
			.message = psprintf("%s points at %s, which is not mirrored", v->tabname, pname),
			.why = psprintf("Foreign key %s: a replica must never hold a row without the rows it points at.", fk->name),
			.hint = psprintf("Declare %s first with sync.mirror, or list the foreign key's columns in unmirrored.", pname),
			.detail = psprintf("Foreign key %s of %s points at %s, which is not mirrored: a replica would hold rows without their parents.",
							   fk->name, d->name, pname)
		});
		return false;
	}
	if (stored < 0)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_FOREIGN_KEY,
			.problem = "foreign key added",
			.message = psprintf("foreign key %s of %s was added after %s was declared",
								fk->name, d->name, d->name)
		});
	else if (d->fkeys[stored].parent != pd->id)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_FOREIGN_KEY,
			.problem = "foreign key changed",
			.message = psprintf("foreign key %s of %s points at another table than when %s was declared",
								fk->name, d->name, d->name)
		});
	for (int c = 0; c < fk->ncols; c++)
		if (!spelled_alike(fk->types[c], fk->parent_types[c]))
		{
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_INVALID_FOREIGN_KEY,
				.problem = "foreign key of another type",
				.message = psprintf("foreign key %s of %s compares column \"%s\", of type %s, with column \"%s\" of %s, of type %s",
									fk->name, v->tabname, fk->cols[c], format_type_be(fk->types[c]),
									fk->parent_cols[c], pname, format_type_be(fk->parent_types[c])),
				.why = "A row names its parent by the spelling of the values it points at, and equal values of these types are spelled apart.",
				.hint = "Give both columns the same type.",
				.detail = psprintf("Foreign key %s of %s compares column %s, of type %s, with column %s of %s, of type %s.",
								   fk->name, d->name, fk->cols[c], format_type_be(fk->types[c]),
								   fk->parent_cols[c], pd->name, format_type_be(fk->parent_types[c]))
			});
			return false;
		}
	/* the parent found by the values of other unique columns: a note spells them (notes.c) */
	for (int c = 0; c < fk->ncols && by_parent_key(v->t, fk, pd) == NULL; c++)
		if (!spelled_once(fk->parent_types[c]) || !spelled_once(fk->types[c]))
		{
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_INVALID_FOREIGN_KEY,
				.problem = "foreign key not on the parent's key",
				.message = psprintf("foreign key %s of %s references column \"%s\" of %s, of type %s, and not the key of %s",
									fk->name, v->tabname, fk->parent_cols[c], pname,
									format_type_be(fk->parent_types[c]), pname),
				.why = "A row's parent is named by its key, or by the text of the columns its foreign key references, which must be the same in every session: a value of this type is printed as the session's settings say.",
				.hint = psprintf("Reference a unique constraint of %s that includes its key, or columns of another type.", pname),
				.detail = psprintf("Foreign key %s of %s references column %s of %s, of type %s, and not its declared key.",
								   fk->name, d->name, fk->parent_cols[c], pd->name,
								   format_type_be(fk->parent_types[c]))
			});
			return false;
		}
	return true;
}

/*
 * ms_v_check_fkeys: every foreign key whose columns travel points at a mirrored
 * table (or this one) through its declared key, as when declared: a
 * replica must never hold a row without its parents.
 */
void
ms_v_check_fkeys(ms_vcx *v)
{
	const ms_decl *d = v->d;
	ms_table   *t = v->t;
	List	   *fks = ms_v_read_fks(d->relid);
	bool	   *seen = palloc0(sizeof(bool) * (d->nfkeys + 1));
	ListCell   *lc;

	t->fkeys = palloc0(sizeof(ms_fkey) * (list_length(fks) + 1));
	foreach(lc, fks)
	{
		ms_fk_row  *fk = lfirst(lc);
		int			nmirrored = 0;
		int			n;
		ms_fkey    *out;

		for (int c = 0; c < fk->ncols; c++)
			nmirrored += !ms_v_in_list(fk->cols[c], d->unmirrored, d->nunmirrored);
		/* a foreign key none of whose columns travel points at nothing a replica sees */
		if (nmirrored == 0)
			continue;
		if (nmirrored < fk->ncols)
		{
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_INVALID_PARAMETER_VALUE,
				.problem = "foreign key partly unmirrored",
				.message = psprintf("foreign key %s of %s is partly unmirrored", fk->name, v->tabname),
				.why = "A replica follows a foreign key only when all of its columns travel.",
				.hint = "List all of its columns in unmirrored, or none.",
				.detail = psprintf("Some columns of foreign key %s of %s are unmirrored: a replica could not follow it.",
								   fk->name, d->name)
			});
			continue;
		}
		if (!check_fkey(v, fk, ms_decl_of_relid(v->decls, fk->parent), seen))
			continue;
		out = &t->fkeys[t->nfkeys++];
		out->name = fk->name;
		out->parent = ms_decl_of_relid(v->decls, fk->parent)->id;
		out->ncols = fk->ncols;
		out->cols = palloc(sizeof(int) * fk->ncols);
		for (int c = 0; c < fk->ncols; c++)
		{
			out->cols[c] = ms_v_column(t, fk->cols[c]);
			/* compared with the parent's on a replica: spelled as it is */
			if (out->cols[c] >= 0)
				t->columns[out->cols[c]].spelled = true;
		}
		out->parent_cols = fk->parent_cols;
		out->parent_types = fk->parent_types;
		out->parent_collations = fk->parent_collations;
		out->eqop = fk->eqop;
		out->eq = palloc(sizeof(char *) * fk->ncols);
		out->collate = palloc(sizeof(char *) * fk->ncols);
		out->parent_collate = palloc(sizeof(char *) * fk->ncols);
		for (int c = 0; c < fk->ncols; c++)
		{
			bool		differ = fk->collations[c] != fk->parent_collations[c];

			out->eq[c] = OidIsValid(fk->eqop[c]) ? ms_operator_sql(fk->eqop[c]) : "OPERATOR(pg_catalog.=)";
			out->collate[c] = differ && OidIsValid(fk->collations[c]) ?
				psprintf(" COLLATE %s", generate_collation_name(fk->collations[c])) : "";
			out->parent_collate[c] = differ && OidIsValid(fk->parent_collations[c]) ?
				psprintf(" COLLATE %s", generate_collation_name(fk->parent_collations[c])) : "";
		}
		out->by_parent_key = by_parent_key(t, fk, ms_decl_of_relid(v->decls, fk->parent));
		out->keyed = out->by_parent_key != NULL;
		out->nby = out->keyed ? ms_decl_of_relid(v->decls, fk->parent)->nkey : 0;
		/* keyed: the parent's key first, then the others in the constraint's order */
		out->noted = palloc(sizeof(int) * fk->ncols);
		n = 0;
		for (int k = 0; k < out->nby; k++)
			out->noted[n++] = out->by_parent_key[k];
		for (int c = 0; c < fk->ncols; c++)
		{
			bool		in = false;

			for (int k = 0; k < out->nby; k++)
				in = in || out->by_parent_key[k] == out->cols[c];
			if (!in)
				out->noted[n++] = out->cols[c];
		}
	}
	for (int s = 0; s < d->nfkeys; s++)
		if (!seen[s])
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_INVALID_FOREIGN_KEY,
				.problem = "foreign key dropped",
				.message = psprintf("foreign key %s of %s was dropped after %s was declared",
									d->fkeys[s].name, d->name, d->name)
			});
}


/* ms_v_check_rule_column: assigned's uuid column, or the foreign key follows follows. */
void
ms_v_check_rule_column(ms_vcx *v)
{
	const ms_decl *d = v->d;
	ms_table   *t = v->t;
	const char *word = d->rule == MS_RULE_ASSIGNED ? "assigned" : "follows";
	char	   *role = psprintf("%s column", word);
	Form_pg_attribute att;
	int			found = 0;

	ms_v_named(v, d->rule_column, word);
	ms_v_refuse_in(v, d->rule_column, d->unmirrored, d->nunmirrored, "unmirrored", role);
	ms_v_refuse_in(v, d->rule_column, d->owned, d->nowned, "replica_owned", role);
	t->rule_column = ms_v_column(t, d->rule_column);
	att = ms_v_att(v, d->rule_column);
	if (d->rule == MS_RULE_ASSIGNED)
	{
		if (att != NULL && getBaseType(att->atttypid) != UUIDOID)
			ms_v_report(v, (ms_problem) {
				.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
				.problem = "assigned column not a uuid",
				.message = psprintf("assigned column \"%s\" of %s is not a uuid", d->rule_column, v->tabname),
				.why = "A row is assigned to the replica whose uuid is in the column.",
				.hint = "Name a uuid column: assigned(col)."
			});
		return;
	}
	for (int f = 0; f < t->nfkeys; f++)
		if (t->rule_column >= 0 && t->fkeys[f].cols[0] == t->rule_column &&
			t->fkeys[f].parent != d->id)
		{
			t->follows_fkey = f;
			found++;
		}
	if (found == 0)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_FOREIGN_KEY,
			.problem = "follows no foreign key",
			.message = psprintf("follows column \"%s\" of %s is not a foreign key to a mirrored table",
								d->rule_column, v->tabname),
			.why = "A following row goes wherever the row it points at goes.",
			.hint = "Name the (first) column of a foreign key to another mirrored table.",
			.detail = psprintf("Column %s of %s, which %s follows, is no longer the first column of a foreign key to a mirrored table.",
							   d->rule_column, d->name, d->name)
		});
	if (found > 1)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_FOREIGN_KEY,
			.problem = "follows more than one foreign key",
			.message = psprintf("follows column \"%s\" of %s begins more than one foreign key",
								d->rule_column, v->tabname),
			.hint = "Follow a column that begins one foreign key only."
		});
}

List *
ms_member_keys(Oid members, Oid relid, int nkey, char **key)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			argtypes[2] = {OIDOID, OIDOID};
	Datum		args[2] = {ObjectIdGetDatum(members), ObjectIdGetDatum(relid)};
	List	   *out = NIL;
	int			rc;

	rc = SPI_execute_with_args(
		"SELECT ARRAY(SELECT a.attname::text FROM pg_catalog.unnest(c.conkey) WITH ORDINALITY k(n, i)"
		"               JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.conrelid AND a.attnum OPERATOR(pg_catalog.=) k.n ORDER BY k.i),"
		"       ARRAY(SELECT a.attname::text FROM pg_catalog.unnest(c.confkey) WITH ORDINALITY k(n, i)"
		"               JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.confrelid AND a.attnum OPERATOR(pg_catalog.=) k.n ORDER BY k.i)"
		"  FROM pg_catalog.pg_constraint c"
		" WHERE c.conrelid OPERATOR(pg_catalog.=) $1 AND c.confrelid OPERATOR(pg_catalog.=) $2 AND c.contype OPERATOR(pg_catalog.=) 'f' ORDER BY c.conname",
		2, argtypes, args, NULL, true, 0);
	ms_spi_check(rc, SPI_OK_SELECT, "reading foreign keys failed");
	MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum	   *cols;
		Datum	   *pcols;
		int			n;
		char	  **ordered = palloc0(sizeof(char *) * (nkey + 1));
		bool		ok;

		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull)),
						  TEXTOID, -1, false, TYPALIGN_INT, &cols, NULL, &n);
		deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)),
						  TEXTOID, -1, false, TYPALIGN_INT, &pcols, NULL, &n);
		ok = n == nkey;
		for (int k = 0; k < nkey && ok; k++)
		{
			for (int c = 0; c < n; c++)
				if (strcmp(TextDatumGetCString(pcols[c]), key[k]) == 0)
					ordered[k] = TextDatumGetCString(cols[c]);
			ok = ordered[k] != NULL;
		}
		if (ok)
			out = lappend(out, ordered);
	}
	SPI_freetuptable(SPI_tuptable);
	return out;
}

/* group_columns_gone: the first of the columns a group table lacks, or NULL. */
static const char *
group_columns_gone(Oid relid, int n, char **names, const char *also)
{
	for (int i = 0; i < n; i++)
		if (!has_column(relid, names[i]))
			return names[i];
	return has_column(relid, also) ? NULL : also;
}

/*
 * group_table_there: the kind ("member", "assignment") of group table relid
 * is there, with the n columns named and `also` (a column of also_kind,
 * "replica " say, unless it is the group column); what it lacks is
 * reported.  Its wire name, or NULL when it lacks something; *qualified is
 * its qualified name once it is there.
 */
static char *
group_table_there(ms_vcx *v, Oid relid, const char *kind, char **qualified,
				  int n, char **names, const char *also, const char *also_kind)
{
	const ms_decl *d = v->d;
	char	   *there = ms_v_relation_there(v, relid, psprintf("%s table", kind), "group table dropped");
	char	   *name;
	const char *gone;

	if (there == NULL)
		return NULL;
	*qualified = there;
	name = ms_wire_name(relid);
	gone = group_columns_gone(relid, n, names, also);
	if (gone != NULL)
	{
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_UNDEFINED_COLUMN,
			.problem = "group column dropped",
			.message = psprintf("%s table %s has no %scolumn \"%s\"", kind, name,
								gone == d->group_column ? "group " : also_kind, gone),
			.detail = psprintf("A column of %s, the %s table of %s, was dropped or renamed.",
							   get_rel_name(relid), kind, d->name)
		});
		return NULL;
	}
	return name;
}

/* check_members: the member table, its columns, its foreign key to this table's key. */
static void
check_members(ms_vcx *v)
{
	const ms_decl *d = v->d;
	ms_table   *t = v->t;
	char	   *mname;
	bool		keyed = false;
	ListCell   *lc;

	mname = group_table_there(v, d->members, "member", &t->members_qualified,
							  d->nmember_key, d->member_key, d->group_column, "");
	if (mname == NULL)
		return;
	foreach(lc, ms_member_keys(d->members, d->relid, d->nkey, d->key))
	{
		char	  **cols = lfirst(lc);

		keyed = keyed || d->nmember_key == d->nkey;
		for (int k = 0; k < d->nmember_key && keyed; k++)
			keyed = strcmp(cols[k], d->member_key[k]) == 0;
		if (keyed)
			break;
	}
	if (!keyed)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_INVALID_FOREIGN_KEY,
			.problem = "group foreign key dropped",
			.message = psprintf("member table %s has no foreign key to the key of %s", mname, v->tabname),
			.why = "A member row names the grouped row it puts in a group by one foreign key.",
			.hint = psprintf("Give %s one foreign key referencing the key of %s.", mname, v->tabname)
		});
}

/* check_assignments: the assignment table, its group column and its uuid replica column. */
static void
check_assignments(ms_vcx *v)
{
	const ms_decl *d = v->d;
	char	   *cols[1] = {d->group_column};
	char	   *aname;
	Oid			gtype;

	aname = group_table_there(v, d->assignments, "assignment", &v->t->assignments_qualified,
							  1, cols, d->assignment_replica, "replica ");
	if (aname == NULL)
		return;
	gtype = get_atttype(d->assignments, get_attnum(d->assignments, d->group_column));
	if (has_column(d->members, d->group_column) &&
		gtype != get_atttype(d->members, get_attnum(d->members, d->group_column)))
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
			.problem = "group column types differ",
			.message = psprintf("group column \"%s\" has one type in %s and another in %s",
								d->group_column, ms_wire_name(d->members), aname),
			.hint = "Give both the same type."
		});
	if (getBaseType(get_atttype(d->assignments, get_attnum(d->assignments, d->assignment_replica))) != UUIDOID)
		ms_v_report(v, (ms_problem) {
			.sqlerrcode = ERRCODE_DATATYPE_MISMATCH,
			.problem = "replica column not a uuid",
			.message = psprintf("replica column \"%s\" of %s is not a uuid", d->assignment_replica, aname),
			.why = "It holds the uuid of the replica given the group.",
			.hint = "Name a uuid column with replica => col."
		});
}

/* describe_grouped: the names the relay's queries use, quoted once. */
static void
describe_grouped(ms_vcx *v)
{
	const ms_decl *d = v->d;
	ms_table   *t = v->t;

	t->members = d->members;
	t->assignments = d->assignments;
	t->member_key_names = d->member_key;
	t->member_key = palloc0(sizeof(char *) * (d->nmember_key + 1));
	for (int k = 0; k < d->nmember_key; k++)
		t->member_key[k] = pstrdup(quote_identifier(d->member_key[k]));
	t->group_column_name = d->group_column;
	t->assignment_replica_name = d->assignment_replica;
	t->group_column = pstrdup(quote_identifier(d->group_column));
	t->assignment_replica = pstrdup(quote_identifier(d->assignment_replica));
}

void
ms_v_check_grouped(ms_vcx *v)
{
	describe_grouped(v);
	check_members(v);
	check_assignments(v);
}
