/*-------------------------------------------------------------------------
 * declare.c
 *	  Declaring a table (docs/design.md 3): sync.mirror reads its arguments
 *	  into a declaration (decl.h), completes it from the table, validates
 *	  it (validate.c), stores it in sync.tables and installs the noting
 *	  triggers (triggers.c), or declares it again with other options
 *	  (follow.c); sync.unmirror takes it back; sync.retrigger installs its
 *	  triggers again.
 *
 * Every misuse a user can make is its own ereport, so that whoever declares
 * a table learns what to change.
 *
 * Who may: sync_admin may call them (99_grants.sql), and each also asks for
 * the table's ownership, as CREATE TRIGGER does -- the triggers are
 * installed on it, and its rows travel to whoever the declaration says --
 * and for every table it installs triggers on (a grouped rule's group
 * tables), and SELECT on its active view, which the relay reads as the
 * table's owner.  Each reads its caller first, then runs as its own owner
 * with search_path pinned (owner.h), who alone writes sync.tables.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "access.h"
#include "catalog.h"
#include "follow.h"
#include "lane.h"
#include "owner.h"
#include "rule.h"
#include "triggers.h"
#include "validate.h"

PG_FUNCTION_INFO_V1(ms_mirror);
PG_FUNCTION_INFO_V1(ms_unmirror);
PG_FUNCTION_INFO_V1(ms_retrigger);

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

/* check_lane: a lane's name both sides print and compare byte for byte (lane.h) */
static void
check_lane(const char *lane)
{
	char		reason[MS_REASON_MAX];

	if (!ms_lane_check(lane, strlen(lane), reason))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid lane \"%s\"", lane),
				 errdetail("%s.", reason),
				 errhint("Name a lane with a lower-case letter, then lower-case letters, digits and underscores"
						 " (at most %d bytes), or leave it '' for the first lane.", MS_LANE_MAX)));
}

/*
 * read_args: sync.mirror(tab, mirror, sync, key, origin, version,
 * replica_owned, unmirrored, retired, created, generated, active,
 * partition, codec, sender, lane) into d, but for the rule.
 */
static void
read_args(FunctionCallInfo fcinfo, ms_decl *d)
{
	char	   *mirror;
	char	   *codec;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sync.mirror needs a table and a mirror"),
				 errhint("SELECT sync.mirror('schema.table', 'catalog', 'broadcast').")));
	d->relid = PG_GETARG_OID(0);
	mirror = text_to_cstring(PG_GETARG_TEXT_PP(1));
	d->key = arg_names(fcinfo, 3, &d->nkey);
	d->origin = arg_name(fcinfo, 4);
	d->version = arg_name(fcinfo, 5);
	ms_hlc_version_arg(d);
	d->owned = arg_names(fcinfo, 6, &d->nowned);
	d->unmirrored = arg_names(fcinfo, 7, &d->nunmirrored);
	d->retired = arg_name(fcinfo, 8);
	d->created = arg_name(fcinfo, 9);
	d->generated = arg_names(fcinfo, 10, &d->ngenerated);
	d->active = PG_ARGISNULL(11) ? InvalidOid : PG_GETARG_OID(11);
	d->partition = arg_name(fcinfo, 12);
	codec = PG_ARGISNULL(13) ? "json" : text_to_cstring(PG_GETARG_TEXT_PP(13));
	d->sender = arg_name(fcinfo, 14);
	d->lane = PG_NARGS() > 15 && !PG_ARGISNULL(15) ? text_to_cstring(PG_GETARG_TEXT_PP(15)) : "";

	if (strcmp(mirror, "record") == 0)
		d->record = true;
	else if (strcmp(mirror, "setting") == 0)
		d->record = d->setting = true;
	else if (strcmp(mirror, "catalog") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown mirror \"%s\"", mirror),
				 errdetail("A table is a catalog (written on the server), a record (written by replicas) or a setting (one row per replica, written by it, which the server may wish changed)."),
				 errhint("Write 'catalog', 'record' or 'setting'.")));
	check_lane(d->lane);
	if (strcmp(codec, "proto") == 0)
		d->proto = true;
	else if (strcmp(codec, "json") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown codec \"%s\"", codec),
				 errhint("Write 'json' or 'proto'.")));
}

/* check_new: the table is not declared yet, and its wire name is free. */
static void
check_new(const ms_decl *d, List *decls, const char *tabname)
{
	if (ms_decl_of_relid(decls, d->relid) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("%s is already mirrored", tabname),
				 errdetail("A table is declared once."),
				 errhint("sync.unmirror it first to declare it again.")));
	if (ms_decl_of_name(decls, d->name) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("another mirrored table travels as \"%s\"", d->name),
				 errdetail("Replicas know a table by its name: the relation name, or schema.relname outside public."),
				 errhint("Rename one of the two tables.")));
}

/* declarable: a table, no partition (validation says why not, first). */
static bool
declarable(Oid relid)
{
	char		kind = get_rel_relkind(relid);

	return (kind == RELKIND_RELATION || kind == RELKIND_PARTITIONED_TABLE) &&
		!get_rel_relispartition(relid);
}

/* default_key: no key given, the primary key's columns in its order. */
static void
default_key(ms_decl *d, const char *tabname)
{
	Relation	rel;
	Oid			pk;
	HeapTuple	tup;
	Form_pg_index index;

	if (d->nkey > 0)
		return;
	rel = relation_open(d->relid, AccessShareLock);
	pk = RelationGetPrimaryKeyIndex(rel);
	relation_close(rel, NoLock);
	if (!OidIsValid(pk))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("%s has no key", tabname),
				 errdetail("It has no primary key, and no key was given."),
				 errhint("Add a primary key, or name its key columns with key => ARRAY[...].")));
	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pk));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for index %u", pk);
	index = (Form_pg_index) GETSTRUCT(tup);
	d->nkey = index->indnkeyatts;
	d->key = palloc(sizeof(char *) * (d->nkey + 1));
	for (int k = 0; k < d->nkey; k++)
		d->key[k] = get_attname(d->relid, index->indkey.values[k], false);
	ReleaseSysCache(tup);
}

/* default_member_key: the member table's one foreign key to the key. */
static void
default_member_key(ms_decl *d, const char *tabname)
{
	List	   *keys = ms_member_keys(d->members, d->relid, d->nkey, d->key);
	char	   *mname = ms_wire_name(d->members);

	if (list_length(keys) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_FOREIGN_KEY),
				 errmsg("member table %s has %s foreign key to the key of %s", mname,
						keys == NIL ? "no" : "more than one", tabname),
				 errdetail("A member row names the grouped row it puts in a group by one foreign key."),
				 errhint("Give %s one foreign key referencing the key of %s.", mname, tabname)));
	d->nmember_key = d->nkey;
	d->member_key = linitial(keys);
}

static bool
in_names(const char *name, char **names, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* group_column_fits: a column of the member table, not of the member key, the assignment table has too. */
static bool
group_column_fits(const ms_decl *d, Form_pg_attribute att)
{
	char	   *name = NameStr(att->attname);

	return !in_names(name, d->member_key, d->nmember_key) && get_attnum(d->assignments, name) > 0;
}

/* replica_fits: an assignment table's uuid column other than its group column. */
static bool
replica_fits(const ms_decl *d, Form_pg_attribute att)
{
	return getBaseType(att->atttypid) == UUIDOID &&
		strcmp(NameStr(att->attname), d->group_column) != 0;
}

/*
 * the_one_column: the column of relid that fits, when one and only one
 * does (the last that fits, *found counting them, otherwise).
 */
static char *
the_one_column(Oid relid, const ms_decl *d, bool (*fits) (const ms_decl *, Form_pg_attribute), int *found)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	char	   *name = NULL;

	*found = 0;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && fits(d, att))
		{
			name = pstrdup(NameStr(att->attname));
			(*found)++;
		}
	}
	relation_close(rel, AccessShareLock);
	return name;
}

/* default_group_column: not named, the one column members and assignments share. */
static void
default_group_column(ms_decl *d)
{
	int			found;

	if (d->group_column != NULL)
		return;
	d->group_column = the_one_column(d->members, d, group_column_fits, &found);
	if (found != 1)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("cannot tell the group column of %s and %s",
						ms_wire_name(d->members), ms_wire_name(d->assignments)),
				 errdetail("They share %s.", found == 0 ? "no column" : "more than one column"),
				 errhint("Name it: grouped(members => ..., assigned => ..., group => col).")));
}

/* default_replica: not named, the assignment table's one other uuid column. */
static void
default_replica(ms_decl *d)
{
	int			found;

	if (d->assignment_replica != NULL)
		return;
	d->assignment_replica = the_one_column(d->assignments, d, replica_fits, &found);
	if (found != 1)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("cannot tell the replica column of %s", ms_wire_name(d->assignments)),
				 errdetail("It has %s uuid column besides its group column.",
						   found == 0 ? "no" : "more than one"),
				 errhint("Name it: grouped(members => ..., assigned => ..., replica => col).")));
}

/*
 * complete: what a declaration leaves out and takes from its table: the
 * key, a group's columns; then what it fixes for good.  A relation that
 * cannot be declared is left as it is: validation says why.
 */
static void
complete(ms_decl *d, List *decls, const char *tabname)
{
	if (!declarable(d->relid))
		return;
	default_key(d, tabname);
	if (d->rule == MS_RULE_GROUPED)
	{
		default_member_key(d, tabname);
		default_group_column(d);
		default_replica(d);
	}
	ms_decl_fix(d, decls);
}

/*
 * may_declare: caller owns every table d installs triggers on, and may read
 * its active view.
 */
static void
may_declare(const ms_decl *d, Oid caller)
{
	ms_require_owner(d->relid, caller);
	if (OidIsValid(d->members))
		ms_require_owner(d->members, caller);
	if (OidIsValid(d->assignments))
		ms_require_owner(d->assignments, caller);
	if (OidIsValid(d->active))
		ms_require_select(d->active, caller);
}

/*
 * unindexed_notice: a foreign key the relay walks from the parent without an
 * index on the referencing columns is declared, but said: each pass that
 * plans a change to a parent would read the table whole (sync.check() says
 * it too, and docs/operations.md why).
 */
static void
unindexed_notice(const ms_table *t)
{
	for (int f = 0; f < t->nfkeys; f++)
	{
		char	   *index = ms_fkey_unindexed(t, &t->fkeys[f]);

		if (index != NULL)
			ereport(NOTICE,
					(errmsg("magic_sync: foreign key %s of %s has no index on its columns", t->fkeys[f].name, t->name),
					 errdetail("The relay looks up the rows pointing at a row by them: without an index, a pass planning a change to a row they point at reads %s whole.",
							   t->name),
					 errhint("%s;", index)));
	}
}

/*
 * ms_mirror: sync.mirror(tab, mirror, sync, ...) declares tab: reads the
 * declaration (the rule's tables through the caller's search_path), checks
 * the caller may, completes and validates it, stores it, installs its
 * triggers, and notes its rows, which its replicas are sent with its
 * schema.  A table declared already is declared again with these options
 * (follow.c): its id and its columns' ids kept, it is planned again from
 * what each replica holds, and no table pointing at it need be unmirrored.
 */
Datum
ms_mirror(PG_FUNCTION_ARGS)
{
	ms_decl    *d = palloc0(sizeof(ms_decl));
	char	   *tabname;
	ms_as_owner owner;
	Oid			caller = GetUserId();
	List	   *decls;
	ms_decl    *old;
	ms_table   *t;
	ListCell   *lc;
	ms_follow	f;

	read_args(fcinfo, d);
	if (!PG_ARGISNULL(2))
		ms_rule_parse(text_to_cstring(PG_GETARG_TEXT_PP(2)), d);
	if (get_rel_name(d->relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", d->relid)));
	may_declare(d, caller);
	ms_definer_begin(fcinfo, &owner);
	SPI_connect();

	tabname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(d->relid)),
										 get_rel_name(d->relid));
	d->name = ms_wire_name(d->relid);
	decls = ms_decl_read_all();
	old = ms_decl_of_relid(decls, d->relid);
	if (old == NULL)
		check_new(d, decls, tabname);
	else
	{
		d->id = old->id;
		decls = list_delete_ptr(decls, old);
	}
	decls = lappend(decls, d);
	complete(d, decls, tabname);
	ms_follow_init(&f);
	if (old != NULL)
		ms_follow_redeclare(d, old, &f);
	t = ms_validate(d, decls, true, NULL);
	unindexed_notice(t);

	if (old != NULL)
	{
		/* its triggers as the new options write them: the old ones go first */
		ms_triggers_drop(old);
		f.untriggered = true;
		ms_follow_finish(d, decls, &f, "sync.mirror");
		SPI_finish();
		ms_definer_end(&owner);
		PG_RETURN_VOID();
	}
	ms_decl_store(d);
	/* validated as id 0: a foreign key to itself, too */
	t->id = d->id;
	for (int k = 0; k < t->nfkeys; k++)
		if (t->fkeys[k].parent == 0)
			t->fkeys[k].parent = d->id;
	foreach(lc, ms_triggers_of(t))
		ms_trigger_create(lfirst(lc), false);
	/* the rows it has: planned for every replica, sent with its schema */
	(void) ms_follow_note_rows(t, 'm');

	SPI_finish();
	ms_definer_end(&owner);
	PG_RETURN_VOID();
}

static void
not_mirrored(Oid relid)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("%s is not mirrored", get_rel_name(relid) ? ms_wire_name(relid) : "the table"),
			 errhint("sync.mirrors lists the mirrored tables.")));
}

/*
 * ms_unmirror: sync.unmirror(tab): takes back a declaration and its
 * triggers, for tab's owner (a table dropped since: for sync_admin).
 * Refused while another mirrored table points at tab.
 */
Datum
ms_unmirror(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	List	   *problems = NIL;
	ms_decl    *d;
	ListCell   *lc;
	ms_as_owner owner;

	ms_require_owner(relid, GetUserId());
	ms_definer_begin(fcinfo, &owner);
	SPI_connect();
	d = ms_decl_of_relid(ms_decl_read_all(), relid);
	if (d == NULL)
		not_mirrored(relid);
	foreach(lc, ms_catalog_read(&problems))
	{
		ms_table   *t = lfirst(lc);

		for (int f = 0; f < t->nfkeys; f++)
			if (t->id != d->id && t->fkeys[f].parent == d->id)
				ereport(ERROR,
						(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
						 errmsg("mirrored table %s points at %s", t->name, d->name),
						 errdetail("Foreign key %s: a replica must never hold a row without the rows it points at.",
								   t->fkeys[f].name),
						 errhint("sync.unmirror %s first.", t->name)));
	}
	ms_triggers_drop(d);
	ms_decl_delete(d->id);
	/* its replicas let it go: the relay tells them (relay/evolve.c) */
	ms_follow_unmirrored(d->id);
	if (get_rel_name(relid) != NULL)
		CacheInvalidateRelcacheByRelid(relid);
	SPI_finish();
	ms_definer_end(&owner);
	PG_RETURN_VOID();
}

/*
 * ms_retrigger: sync.retrigger(tab) installs tab's triggers again as
 * sync.mirror writes them: after one was dropped, disabled, altered or
 * enabled other than ALWAYS, or a partition was added (it has no TRUNCATE
 * trigger of its own).  For the owner of every table it installs them on.
 */
Datum
ms_retrigger(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Oid			caller = GetUserId();
	List	   *problems = NIL;
	List	   *tables;
	ListCell   *lc;
	ms_table   *t = NULL;
	ms_as_owner owner;

	ms_require_owner(relid, caller);
	ms_definer_begin(fcinfo, &owner);
	SPI_connect();
	tables = ms_catalog_read(&problems);
	foreach(lc, tables)
		if (((ms_table *) lfirst(lc))->relid == relid)
			t = lfirst(lc);
	if (t == NULL)
		not_mirrored(relid);
	foreach(lc, problems)
	{
		ms_problem *p = lfirst(lc);

		if (strcmp(p->table, t->name) == 0)
			ms_catalog_refuse(p, "Declare it again: sync.unmirror, then sync.mirror.");
	}
	foreach(lc, ms_triggers_of(t))
		ms_require_owner(((ms_trigger *) lfirst(lc))->relid, caller);
	foreach(lc, ms_triggers_of(t))
		ms_trigger_create(lfirst(lc), true);
	SPI_finish();
	ms_definer_end(&owner);
	PG_RETURN_VOID();
}
