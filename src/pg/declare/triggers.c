/*-------------------------------------------------------------------------
 * triggers.c
 *	  The triggers a declaration installs, as sync.mirror writes them
 *	  (triggers.h): made from the declaration, created and dropped through
 *	  SPI, identifiers quoted once, arguments as literals; ENABLE ALWAYS.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "spi_check.h"
#include "triggers.h"

#define ROW_TRIGGER (TRIGGER_TYPE_ROW | TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE)
#define TRUNCATE_TRIGGER (TRIGGER_TYPE_BEFORE | TRIGGER_TYPE_TRUNCATE)

static ms_trigger *
new_trigger(Oid relid, char *name, int16 tgtype)
{
	ms_trigger *tg = palloc0(sizeof(ms_trigger));

	tg->relid = relid;
	tg->name = name;
	tg->tgtype = tgtype;
	tg->args = palloc(sizeof(char *) * 8);
	return tg;
}

static void
add_arg(ms_trigger *tg, const char *arg)
{
	if ((tg->nargs & 7) == 0 && tg->nargs > 0)
		tg->args = repalloc(tg->args, sizeof(char *) * (tg->nargs + 8));
	tg->args[tg->nargs++] = pstrdup(arg);
}

static void
add_int(ms_trigger *tg, int n)
{
	add_arg(tg, psprintf("%d", n));
}

static void
add_kind(ms_trigger *tg, int id, char kind)
{
	add_int(tg, id);
	add_arg(tg, psprintf("%c", kind));
}

/* truncate_trigger: the trigger refusing TRUNCATE on relid. */
static ms_trigger *
truncate_trigger(Oid relid, char *name, int id)
{
	ms_trigger *tg = new_trigger(relid, name, TRUNCATE_TRIGGER);

	add_kind(tg, id, MS_NOTE_TRUNCATE);
	return tg;
}

/* row_trigger: the noting trigger of the table itself. */
static ms_trigger *
row_trigger(const ms_table *t)
{
	ms_trigger *tg = new_trigger(t->relid, "magic_sync_note", ROW_TRIGGER);
	int			nignore = t->nunmirrored;

	add_kind(tg, t->id, MS_NOTE_ROW);
	add_int(tg, t->nkey);
	/* by the declaration's names: a key column gone is sync.check's to say */
	for (int k = 0; k < t->nkey; k++)
		add_arg(tg, t->decl->key[k]);
	for (int c = 0; c < t->ncolumns; c++)
		if (t->columns[c].replica_owned)
			nignore++;
	add_int(tg, nignore);
	for (int c = 0; c < t->ncolumns; c++)
		if (t->columns[c].replica_owned)
			add_arg(tg, t->columns[c].name);
	for (int u = 0; u < t->nunmirrored; u++)
		add_arg(tg, t->unmirrored[u]);
	add_arg(tg, t->partition >= 0 ? t->columns[t->partition].name : "");
	add_int(tg, t->nfkeys);
	for (int f = 0; f < t->nfkeys; f++)
	{
		add_arg(tg, t->fkeys[f].name);
		/* a note's "pointed" spells these (catalog.h: noted) */
		add_int(tg, t->fkeys[f].ncols);
		for (int c = 0; c < t->fkeys[f].ncols; c++)
			add_arg(tg, t->columns[t->fkeys[f].noted[c]].name);
	}
	return tg;
}

/* group_trigger_name: the name of a grouped table's trigger on a group table. */
static char *
group_trigger_name(const char *what, int id, bool truncate)
{
	return psprintf("magic_sync_%s_%d%s", what, id, truncate ? "_truncate" : "");
}

List *
ms_triggers_of(const ms_table *t)
{
	List	   *out = NIL;
	ms_trigger *tg;

	out = lappend(out, row_trigger(t));
	out = lappend(out, truncate_trigger(t->relid, "magic_sync_truncate", t->id));
	if (t->rule != MS_RULE_GROUPED)
		return out;

	tg = new_trigger(t->members, group_trigger_name("member", t->id, false), ROW_TRIGGER);
	add_kind(tg, t->id, MS_NOTE_MEMBER);
	add_int(tg, t->nkey);
	for (int k = 0; k < t->nkey; k++)
		add_arg(tg, t->member_key_names[k]);
	add_arg(tg, t->group_column_name);
	out = lappend(out, tg);
	out = lappend(out, truncate_trigger(t->members, group_trigger_name("member", t->id, true), t->id));

	tg = new_trigger(t->assignments, group_trigger_name("assignment", t->id, false), ROW_TRIGGER);
	add_kind(tg, t->id, MS_NOTE_ASSIGNMENT);
	add_arg(tg, t->assignment_replica_name);
	add_arg(tg, t->group_column_name);
	out = lappend(out, tg);
	out = lappend(out, truncate_trigger(t->assignments,
										group_trigger_name("assignment", t->id, true), t->id));
	return out;
}

static char *
qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* drop_on: DROP TRIGGER IF EXISTS name ON relid. */
static void
drop_on(const char *name, Oid relid)
{
	int			rc = SPI_execute(psprintf("DROP TRIGGER IF EXISTS %s ON %s", quote_identifier(name),
										  qualified_name(relid)), false, 0);

	ms_spi_check(rc, SPI_OK_UTILITY, "dropping trigger %s failed", name);
}

/* create_on: CREATE TRIGGER for tg on relid, replacing one of its name. */
static void
create_on(const ms_trigger *tg, Oid relid, bool replace)
{
	StringInfoData sql;
	int			rc;

	if (replace)
		drop_on(tg->name, relid);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TRIGGER %s %s ON %s FOR EACH %s EXECUTE FUNCTION sync.note(",
					 quote_identifier(tg->name),
					 tg->tgtype == TRUNCATE_TRIGGER ? "BEFORE TRUNCATE" : "AFTER INSERT OR UPDATE OR DELETE",
					 qualified_name(relid), tg->tgtype == TRUNCATE_TRIGGER ? "STATEMENT" : "ROW");
	for (int i = 0; i < tg->nargs; i++)
		appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "", quote_literal_cstr(tg->args[i]));
	appendStringInfoChar(&sql, ')');
	rc = SPI_execute(sql.data, false, 0);
	ms_spi_check(rc, SPI_OK_UTILITY, "creating trigger %s failed", tg->name);
	/*
	 * Every change is noted, under session_replication_role = replica too (a
	 * logical replication subscriber applying, a restore without triggers):
	 * otherwise replicas would keep old values for good.  On a partitioned
	 * table this reaches the partitions' clones too.
	 */
	rc = SPI_execute(psprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER %s", qualified_name(relid),
							  quote_identifier(tg->name)), false, 0);
	ms_spi_check(rc, SPI_OK_UTILITY, "enabling trigger %s failed", tg->name);
}

List *
ms_partitions(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	List	   *parts = NIL;
	int			rc;

	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return NIL;
	rc = SPI_execute_with_args("SELECT r.relid FROM pg_catalog.pg_partition_tree($1) r WHERE r.level > 0"
							   " ORDER BY r.relid::regclass::text", 1, argtypes, args, NULL, true, 0);
	ms_spi_check(rc, SPI_OK_SELECT, "reading partitions failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		parts = lappend_oid(parts, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																  SPI_tuptable->tupdesc, 1, &isnull)));
	}
	SPI_freetuptable(SPI_tuptable);
	return parts;
}

void
ms_trigger_create(const ms_trigger *tg, bool replace)
{
	ListCell   *lc;

	create_on(tg, tg->relid, replace);

	/*
	 * PostgreSQL clones a row trigger onto every partition, present and
	 * future, but not a TRUNCATE trigger, and TRUNCATE of a partition fires
	 * only its own: each partition gets one.
	 */
	if (tg->tgtype != TRUNCATE_TRIGGER)
		return;
	foreach(lc, ms_partitions(tg->relid))
		create_on(tg, lfirst_oid(lc), replace);
}

void
ms_triggers_drop(const ms_decl *d)
{
	ListCell   *lc;

	/* a partition's clone of the row trigger goes with the parent's */
	if (get_rel_name(d->relid) != NULL)
	{
		drop_on("magic_sync_note", d->relid);
		drop_on("magic_sync_truncate", d->relid);
		foreach(lc, ms_partitions(d->relid))
			drop_on("magic_sync_truncate", lfirst_oid(lc));
	}
	for (int g = 0; g < 2; g++)
	{
		Oid			grel = g == 0 ? d->members : d->assignments;
		const char *what = g == 0 ? "member" : "assignment";

		if (!OidIsValid(grel) || get_rel_name(grel) == NULL)
			continue;
		drop_on(group_trigger_name(what, d->id, false), grel);
		drop_on(group_trigger_name(what, d->id, true), grel);
	}
}
