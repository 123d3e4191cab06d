/*-------------------------------------------------------------------------
 * follow.c
 *	  A declaration following its table (follow.h, docs/design.md 4.11).
 *
 * Columns are followed by attnum (sync.tables.attnums): a name the table
 * no longer has is a rename when its attnum now holds a column the
 * declaration does not know, and a drop when that attnum holds a dropped
 * column.  When the attnums the declaration knows are not those of the
 * table (it was restored elsewhere, with event triggers off, and its
 * dropped columns compacted), nothing is inferred: the declaration is left
 * for sync.check() to say what no longer matches.
 *
 * What each change needs (docs/protocol.md 5.3):
 *
 *   column renamed, dropped, table renamed     the schema change only
 *   column added, default evaluated once       the schema change, with the value
 *                                              every row took (its fill)
 *   column added, no default                   the schema change only (NULL)
 *   column added, values per row (volatile     the table's rows again
 *     default, generated, identity); a type
 *     changed; a column that begins to travel;
 *     one the replica no longer owns
 *   foreign key added or dropped; another      the table planned again (and a
 *     rule, partition or active view           dropped key's parent table)
 *   a key column's type, the key, the mirror   the replicas holding its rows
 *     or the codec changed                     provisioned again
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/relation.h"
#include "access/tupdesc_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "follow.h"
#include "owner.h"
#include "spi_check.h"
#include "triggers.h"
#include "validate.h"
#include "wake.h"

void
ms_follow_init(ms_follow *f)
{
	memset(f, 0, sizeof *f);
	initStringInfo(&f->what);
}

static void
said(ms_follow *f, const char *fmt,...) pg_attribute_printf(2, 3);

static void
said(ms_follow *f, const char *fmt,...)
{
	va_list		ap;

	if (f->what.len > 0)
		appendStringInfoString(&f->what, ", ");
	for (;;)
	{
		int			needed;

		va_start(ap, fmt);
		needed = appendStringInfoVA(&f->what, fmt, ap);
		va_end(ap);
		if (needed == 0)
			break;
		enlargeStringInfo(&f->what, needed);
	}
}

static bool
in_list(const char *name, char **list, int n)
{
	for (int i = 0; name != NULL && i < n; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

/* ---- renames and drops, by attnum ------------------------------------- */

static void
rename_one(char **slot, const char *from, const char *to)
{
	if (*slot != NULL && strcmp(*slot, from) == 0)
		*slot = pstrdup(to);
}

static void
rename_list(char **list, int n, const char *from, const char *to)
{
	for (int i = 0; i < n; i++)
		rename_one(&list[i], from, to);
}

/* rename_everywhere: every role of the declaration that names column from names to */
static void
rename_everywhere(ms_decl *d, const char *from, const char *to)
{
	rename_list(d->key, d->nkey, from, to);
	rename_list(d->owned, d->nowned, from, to);
	rename_list(d->unmirrored, d->nunmirrored, from, to);
	rename_list(d->generated, d->ngenerated, from, to);
	rename_one(&d->origin, from, to);
	rename_one(&d->version, from, to);
	rename_one(&d->created, from, to);
	rename_one(&d->partition, from, to);
	rename_one(&d->sender, from, to);
	rename_one(&d->rule_column, from, to);
	for (int c = 0; c < d->ncolumns; c++)
		rename_one(&d->columns[c].name, from, to);
	for (int a = 0; a < d->natts; a++)
		rename_one(&d->atts[a].name, from, to);
}

/* drop_from: name out of a list of n */
static void
drop_from(char **list, int *n, const char *name)
{
	int			k = 0;

	for (int i = 0; i < *n; i++)
		if (strcmp(list[i], name) != 0)
			list[k++] = list[i];
	*n = k;
}

/* forget_column: a column dropped leaves the lists it was in, and the mirrored columns */
static void
forget_column(ms_decl *d, const char *name)
{
	int			k = 0;

	drop_from(d->owned, &d->nowned, name);
	drop_from(d->unmirrored, &d->nunmirrored, name);
	drop_from(d->generated, &d->ngenerated, name);
	for (int c = 0; c < d->ncolumns; c++)
		if (strcmp(d->columns[c].name, name) != 0)
			d->columns[k++] = d->columns[c];
	d->ncolumns = k;
}

static Form_pg_attribute
live_att(TupleDesc desc, const char *name)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att;
	}
	return NULL;
}

static bool
known_att(const ms_decl *d, const char *name)
{
	for (int a = 0; a < d->natts; a++)
		if (strcmp(d->atts[a].name, name) == 0)
			return true;
	return false;
}

/* follow_renames: names gone, by their attnums: renamed or dropped; then every attnum as it is */
static void
follow_renames(ms_decl *d, TupleDesc desc, ms_follow *f)
{
	bool		consistent = true;
	ms_decl_att *atts = palloc0(sizeof(ms_decl_att) * (desc->natts + 1));
	int			natts = 0;

	for (int a = 0; a < d->natts; a++)
	{
		Form_pg_attribute now = live_att(desc, d->atts[a].name);

		consistent &= now == NULL || now->attnum == d->atts[a].attnum;
	}
	for (int a = 0; a < d->natts && consistent; a++)
	{
		char	   *name = d->atts[a].name;
		int			attnum = d->atts[a].attnum;
		Form_pg_attribute at;

		if (live_att(desc, name) != NULL || attnum < 1 || attnum > desc->natts)
			continue;
		at = TupleDescAttr(desc, attnum - 1);
		if (!at->attisdropped && !known_att(d, NameStr(at->attname)))
		{
			char	   *to = pstrdup(NameStr(at->attname));

			said(f, "column %s renamed %s", name, to);
			f->renamed = lappend(lappend(f->renamed, pstrdup(name)), to);
			rename_everywhere(d, name, to);
			f->changed = true;
		}
		else if (at->attisdropped)
		{
			said(f, "column %s dropped", name);
			forget_column(d, name);
			f->changed = true;
		}
	}
	/* the declaration's attnums are the table's now */
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		atts[natts].name = pstrdup(NameStr(att->attname));
		atts[natts++].attnum = att->attnum;
	}
	/* known as they are (in any order): nothing to write */
	if (natts != d->natts)
		f->changed = true;
	for (int a = 0; a < natts && !f->changed; a++)
	{
		bool		same = false;

		for (int b = 0; b < d->natts && !same; b++)
			same = strcmp(atts[a].name, d->atts[b].name) == 0 && atts[a].attnum == d->atts[b].attnum;
		f->changed = !same;
	}
	if (!consistent)
		ereport(WARNING,
				(errmsg("magic_sync: the columns of %s are numbered otherwise than when it was last followed", d->name),
				 errdetail("It was restored elsewhere while event triggers were off: what was renamed or dropped since cannot be told."),
				 errhint("sync.check() says what no longer matches; declare the table again with sync.mirror.")));
	d->natts = natts;
	d->atts = atts;
}

/* ---- columns added and retyped ----------------------------------------- */

/*
 * missing_value: the value every row held when the column was added, when
 * PostgreSQL evaluated its default once (attmissingval), as text written
 * so that any session reads it back the same (ISO dates, UTC, every float
 * digit); NULL when it has none.
 */
static char *
missing_value(Relation rel, Form_pg_attribute att)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	Oid			out;
	bool		varlena;
	int			nest;
	char	   *text;

	if (!att->atthasmissing || constr == NULL || constr->missing == NULL ||
		!constr->missing[att->attnum - 1].am_present)
		return NULL;
	getTypeOutputInfo(att->atttypid, &out, &varlena);
	nest = NewGUCNestLevel();
	(void) set_config_option("DateStyle", "ISO, YMD", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("IntervalStyle", "postgres", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("TimeZone", "UTC", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("extra_float_digits", "3", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("bytea_output", "hex", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	text = OidOutputFunctionCall(out, constr->missing[att->attnum - 1].am_value);
	AtEOXact_GUC(true, nest);
	return text;
}

static ms_decl_column *
decl_column(ms_decl *d, const char *name)
{
	for (int c = 0; c < d->ncolumns; c++)
		if (strcmp(d->columns[c].name, name) == 0)
			return &d->columns[c];
	return NULL;
}

/* follow_columns: the mirrored columns as they are now, ids kept, new ones given theirs */
static void
follow_columns(ms_decl *d, Relation rel, ms_follow *f)
{
	TupleDesc	desc = RelationGetDescr(rel);
	ms_decl_column *cols = palloc0(sizeof(ms_decl_column) * (desc->natts + 1));
	int			ncols = 0;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		char	   *name = NameStr(att->attname);
		char	   *type;
		ms_decl_column *c;

		if (att->attisdropped || in_list(name, d->unmirrored, d->nunmirrored))
			continue;
		type = format_type_with_typemod(att->atttypid, att->atttypmod);
		c = decl_column(d, name);
		if (c == NULL)
		{
			c = &cols[ncols++];
			c->name = pstrdup(name);
			c->type = type;
			c->id = ++d->last_id;
			c->field = d->proto ? c->id : 0;
			c->fill = missing_value(rel, att);
			f->changed = true;
			if (c->fill == NULL && (att->atthasdef || att->attgenerated || att->attidentity))
			{
				said(f, "column %s added, its values row by row", name);
				f->rows_again = true;
			}
			else
				said(f, c->fill ? "column %s added, with the value every row took" : "column %s added", name);
			continue;
		}
		cols[ncols] = *c;
		if (strcmp(c->type, type) != 0)
		{
			said(f, "column %s is now %s", name, type);
			cols[ncols].type = type;
			f->changed = f->rows_again = true;
			if (in_list(name, d->key, d->nkey))
				f->reprovision = psprintf("the type of its key column %s changed", name);
		}
		ncols++;
	}
	if (ncols != d->ncolumns)
		f->changed = true;
	d->ncolumns = ncols;
	d->columns = cols;
}

/* ---- foreign keys, the wire name -------------------------------------- */

static int
fkey_parent(const ms_decl_fkey *fks, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(fks[i].name, name) == 0)
			return fks[i].parent;
	return -1;
}

/*
 * compare_fkeys: foreign keys now against before: one added plans the table
 * again (parents follow); one dropped too, and the table it pointed at
 * (rows may now go).
 */
static void
compare_fkeys(const ms_decl_fkey *now, int nnow, const ms_decl_fkey *before, int nbefore, ms_follow *f)
{
	for (int i = 0; i < nnow; i++)
		if (fkey_parent(before, nbefore, now[i].name) != now[i].parent)
		{
			said(f, "foreign key %s added", now[i].name);
			f->changed = f->replan = true;
		}
	for (int i = 0; i < nbefore; i++)
		if (fkey_parent(now, nnow, before[i].name) != before[i].parent)
		{
			said(f, "foreign key %s dropped", before[i].name);
			f->changed = f->replan = true;
			f->replan_parents = list_append_unique_int(f->replan_parents, before[i].parent);
		}
}

static void
follow_fkeys(ms_decl *d, List *decls, ms_follow *f)
{
	ms_decl		now = *d;

	/* what a declaration made now would fix: its foreign keys to declared tables */
	ms_decl_fix(&now, decls);
	compare_fkeys(now.fkeys, now.nfkeys, d->fkeys, d->nfkeys, f);
	d->nfkeys = now.nfkeys;
	d->fkeys = now.fkeys;
}

static void
follow_name(ms_decl *d, List *decls, ms_follow *f)
{
	char	   *wire = ms_wire_name(d->relid);

	/* one another table travels as already is for sync.check to say */
	if (wire == NULL || strcmp(wire, d->name) == 0 || ms_decl_of_name(decls, wire) != NULL)
		return;
	said(f, "renamed %s", wire);
	d->name = wire;
	f->changed = true;
}

void
ms_follow_table(ms_decl *d, List *decls, ms_follow *f)
{
	Relation	rel = try_relation_open(d->relid, AccessShareLock);

	if (rel == NULL)
	{
		f->dropped = true;
		return;
	}
	follow_renames(d, RelationGetDescr(rel), f);
	follow_columns(d, rel, f);
	relation_close(rel, NoLock);
	follow_fkeys(d, decls, f);
	follow_name(d, decls, f);
}

/* ---- a declaration made again ------------------------------------------- */

static bool
same_text(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

void
ms_follow_redeclare(ms_decl *d, const ms_decl *old, ms_follow *f)
{
	f->changed = true;
	if (d->record != old->record || d->setting != old->setting)
		f->reprovision = "its mirror changed";
	else if (d->proto != old->proto)
		f->reprovision = "its codec changed";
	else if (!ms_same_strings(d->key, d->nkey, old->key, old->nkey))
		f->reprovision = "its key changed";
	d->last_id = old->last_id;
	for (int c = 0; c < d->ncolumns; c++)
	{
		ms_decl_column *nc = &d->columns[c];
		const ms_decl_column *oc = decl_column((ms_decl *) old, nc->name);

		if (oc != NULL)
		{
			nc->id = oc->id;
			nc->fill = oc->fill;
			if (d->proto && old->proto)
				nc->field = oc->field;
			continue;
		}
		nc->id = ++d->last_id;
		nc->field = d->proto ? nc->id : 0;
		said(f, "column %s now travels", nc->name);
		f->rows_again = true;
	}
	for (int c = 0; c < old->ncolumns; c++)
		if (decl_column(d, old->columns[c].name) == NULL)
			said(f, "column %s no longer travels", old->columns[c].name);
	for (int i = 0; i < old->nowned; i++)
		if (!in_list(old->owned[i], d->owned, d->nowned) && decl_column(d, old->owned[i]) != NULL)
		{
			said(f, "column %s is no longer the replicas'", old->owned[i]);
			f->rows_again = true;
		}
	for (int i = 0; i < d->nowned; i++)
		if (!in_list(d->owned[i], old->owned, old->nowned))
			said(f, "column %s is the replicas'", d->owned[i]);
	if (d->rule != old->rule || !same_text(d->rule_column, old->rule_column) ||
		d->members != old->members || d->assignments != old->assignments ||
		!same_text(d->group_column, old->group_column) ||
		!same_text(d->assignment_replica, old->assignment_replica) ||
		!ms_same_strings(d->member_key, d->nmember_key, old->member_key, old->nmember_key))
	{
		said(f, "another rule");
		f->replan = true;
	}
	if (!same_text(d->partition, old->partition))
	{
		said(f, "another partition");
		f->replan = true;
	}
	if (d->active != old->active)
	{
		said(f, "another active view");
		f->replan = true;
	}
	/* its Table says so: the replicas holding it upload its rows in the lane from then on */
	if (strcmp(d->lane ? d->lane : "", old->lane ? old->lane : "") != 0)
		said(f, "another lane");
	compare_fkeys(d->fkeys, d->nfkeys, old->fkeys, old->nfkeys, f);
}

/* ---- what the replicas need ------------------------------------------- */

/*
 * ms_follow_note_rows: a note for every row of t.  Its keys and partitions
 * are read as t's owner, security-restricted (owner.h): a key column of the
 * owner's own type, cast to text by a function of the owner's, is the
 * owner's code, and this runs as the extension's owner, in sync.mirror and
 * in the event triggers.  The notes are written as the caller, a batch of
 * rows at a time.
 */
uint64
ms_follow_note_rows(const ms_table *t, char source)
{
	char	   *part = t->partition >= 0 ? psprintf("(x.%s)::text", t->columns[t->partition].quoted) : "NULL";
	Oid			types[4] = {INT4OID, CHAROID, TEXTARRAYOID, TEXTARRAYOID};
	SPIPlanPtr	read;
	SPIPlanPtr	write;
	Portal		portal;
	ms_as_owner as;
	uint64		n = 0;

	read = ms_spi_prepare(psprintf("SELECT %s, %s FROM %s x", ms_key_expr(t, "x"), part, t->qualified), 0, NULL);
	write = ms_spi_prepare("INSERT INTO sync.notes (tab, source, key, part)"
						   " SELECT $1, $2, u.key, u.part FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4)) AS u(key, part)",
						   4, types);
	ms_owner_begin(&as, t->relid);
	portal = SPI_cursor_open(NULL, read, NULL, NULL, true);
	ms_owner_end(&as);
	for (;;)
	{
		Datum	   *keys;
		Datum	   *parts;
		bool	   *part_nulls;
		Datum		values[4];
		char		nulls[4] = {' ', ' ', ' ', ' '};
		uint64		got;
		SPITupleTable *tt;

		ms_owner_begin(&as, t->relid);
		SPI_cursor_fetch(portal, true, 10000);
		ms_owner_end(&as);
		got = SPI_processed;
		tt = SPI_tuptable;
		if (got == 0)
			break;
		keys = palloc(sizeof(Datum) * got);
		parts = palloc(sizeof(Datum) * got);
		part_nulls = palloc(sizeof(bool) * got);
		for (uint64 i = 0; i < got; i++)
		{
			bool		isnull;

			keys[i] = SPI_getbinval(tt->vals[i], tt->tupdesc, 1, &isnull);
			parts[i] = SPI_getbinval(tt->vals[i], tt->tupdesc, 2, &part_nulls[i]);
		}
		values[0] = Int32GetDatum(t->id);
		values[1] = CharGetDatum(source);
		values[2] = PointerGetDatum(construct_array(keys, (int) got, TEXTOID, -1, false, TYPALIGN_INT));
		{
			int			dims[1] = {(int) got};
			int			lbs[1] = {1};

			values[3] = PointerGetDatum(construct_md_array(parts, part_nulls, 1, dims, lbs, TEXTOID, -1, false,
														   TYPALIGN_INT));
		}
		ms_spi_check(SPI_execute_plan(write, values, nulls, false, 0), SPI_OK_INSERT, "noting the rows of %s failed", t->name);
		n += got;
		SPI_freetuptable(tt);
		pfree(keys);
		pfree(parts);
		pfree(part_nulls);
	}
	SPI_cursor_close(portal);
	SPI_freeplan(read);
	SPI_freeplan(write);
	/* written here, not by the noting trigger: wake the relay at commit as it would */
	ms_wake_at_commit();
	return n;
}

void
ms_follow_unmirrored(int id)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(id)};

	ms_spi_check(SPI_execute_with_args("UPDATE sync.notes SET done = true WHERE tab = $1 AND NOT done",
									   1, types, values, NULL, false, 0), SPI_OK_UPDATE,
				 "letting go of the notes of a table no longer mirrored failed");
	ms_spi_check(SPI_execute_with_args("DELETE FROM sync.quarantine WHERE tab = $1",
									   1, types, values, NULL, false, 0), SPI_OK_DELETE,
				 "letting go of the notes of a table no longer mirrored failed");
	/* its replicas let it go at the next pass */
	ms_wake_at_commit();
}

/*
 * inbox_renamed: uploaded rows waiting in sync.inbox, kept as they came, are
 * filed again by the names their table has now: in the json codec, a column
 * renamed is renamed in them (a proto row names its columns by field, which a
 * rename keeps).
 */
static void
inbox_renamed(const ms_decl *d, List *renamed)
{
	Oid			types[3] = {INT4OID, TEXTOID, TEXTOID};
	ListCell   *lc;

	if (d->proto)
		return;
	for (lc = list_head(renamed); lc != NULL; lc = lnext(renamed, lnext(renamed, lc)))
	{
		Datum		values[3] = {Int32GetDatum(d->id), CStringGetTextDatum(lfirst(lc)),
		CStringGetTextDatum(lfirst(lnext(renamed, lc)))};

		ms_spi_check(SPI_execute_with_args("UPDATE sync.inbox SET row = pg_catalog.convert_to((j - $2"
										   "   || pg_catalog.jsonb_build_object($3, j -> $2))::text, 'UTF8')"
										   "  FROM (SELECT id AS i, pg_catalog.convert_from(row, 'UTF8')::jsonb AS j"
										   "          FROM sync.inbox WHERE tab = $1 AND row IS NOT NULL) r"
										   " WHERE id = r.i AND r.j ? $2",
										   3, types, values, NULL, false, 0), SPI_OK_UPDATE, "renaming a column in the inbox failed");
	}
}

/* reprovision: the live replicas holding rows of the table, provisioned again; how many */
static uint64
reprovision(const ms_table *t, const char *why)
{
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2] = {Int32GetDatum(t->id),
		CStringGetTextDatum(psprintf("table %s: %s, which a schema change cannot carry: provisioned again",
									 t->name, why))};

	ms_spi_check(SPI_execute_with_args("UPDATE sync.replicas r SET provision = true, last_error = $2, last_error_at = now()"
									   " WHERE live AND NOT dropped AND EXISTS (SELECT FROM sync.held h"
									   "   WHERE h.replica = r.id AND h.tab = $1)",
									   2, types, values, NULL, false, 0), SPI_OK_UPDATE, "provisioning the replicas of %s failed", t->name);
	return SPI_processed;
}

/* noted_parents: the tables a foreign key dropped pointed at, planned again */
static void
noted_parents(List *ids, List *decls)
{
	ListCell   *lc;

	foreach(lc, ids)
	{
		List	   *problems = NIL;
		ms_decl    *pd = NULL;
		ListCell   *dc;
		ms_table   *pt;

		foreach(dc, decls)
			if (((ms_decl *) lfirst(dc))->id == lfirst_int(lc))
				pd = lfirst(dc);
		if (pd == NULL)
			continue;
		pt = ms_validate(pd, decls, false, &problems);
		if (pt != NULL && problems == NIL)
			(void) ms_follow_note_rows(pt, 'm');
	}
}

void
ms_follow_enum_renamed(const ms_table *t, Oid type)
{
	bool		keyed = false;
	bool		any = false;
	uint64		n;

	for (int c = 0; c < t->ncolumns; c++)
		if (getBaseType(t->columns[c].type) == type)
		{
			any = true;
			keyed = keyed || t->columns[c].key;
		}
	if (!any)
		return;
	ms_wake_at_commit();
	if (keyed)
	{
		n = reprovision(t, psprintf("a label of %s, the type of a key column, was renamed", format_type_be(type)));
		ereport(NOTICE,
				(errmsg("magic_sync: ALTER TYPE %s of %s: a key's label renamed, which a schema change cannot carry",
						format_type_be(type), t->name),
				 errdetail("Replicas holding its rows are provisioned again (%llu of them).", (unsigned long long) n),
				 errhint("sync.health() lists them until their snapshots are applied.")));
	}
	else
	{
		n = ms_follow_note_rows(t, 'r');
		ereport(NOTICE,
				(errmsg("magic_sync: ALTER TYPE %s of %s: its %llu rows go again to the replicas that hold them",
						format_type_be(type), t->name, (unsigned long long) n)));
	}
}

void
ms_follow_finish(ms_decl *d, List *decls, ms_follow *f, const char *cause)
{
	List	   *problems = NIL;
	ms_table   *t;
	ListCell   *lc;
	uint64		n = 0;

	if (f->dropped)
	{
		ms_decl_delete(d->id);
		ms_follow_unmirrored(d->id);
		ereport(NOTICE,
				(errmsg("magic_sync: table %s was dropped: it is no longer mirrored, and its replicas let it go", d->name)));
		return;
	}
	if (!f->changed)
		return;
	/* a schema change travels at the next pass: wake the relay at commit, as a note does */
	ms_wake_at_commit();
	ms_decl_store(d);
	inbox_renamed(d, f->renamed);
	t = ms_validate(d, decls, false, &problems);
	if (t == NULL || problems != NIL)
	{
		ms_problem *p = problems != NIL ? linitial(problems) : NULL;

		ereport(WARNING,
				(errmsg("magic_sync: the declaration of %s no longer matches its table%s%s", d->name,
						p ? ": " : "", p ? p->problem : ""),
				 p ? errdetail_internal("%s", p->detail) : 0,
				 errhint("The relay waits until it is declared again with sync.mirror; sync.check() says what to fix.")));
		return;
	}
	foreach(lc, ms_triggers_of(t))
		ms_trigger_create(lfirst(lc), !f->untriggered);
	if (f->reprovision != NULL)
	{
		n = reprovision(t, f->reprovision);
		/* a key, mirror or codec made again changes no column: nothing to list then */
		ereport(NOTICE,
				(errmsg("magic_sync: %s of %s: %s, which a schema change cannot carry", cause, d->name, f->reprovision),
				 f->what.len > 0 ?
				 errdetail("Replicas holding its rows are provisioned again (%llu of them); the others are sent the schema change (%s).",
						   (unsigned long long) n, f->what.data) :
				 errdetail("Replicas holding its rows are provisioned again (%llu of them); the others, holding none, are sent its new schema.",
						   (unsigned long long) n),
				 errhint("sync.health() lists them until their snapshots are applied.")));
	}
	else if (f->what.len > 0)
	{
		if (f->rows_again)
			n = ms_follow_note_rows(t, 'r');
		else if (f->replan)
			n = ms_follow_note_rows(t, 'm');
		noted_parents(f->replan_parents, decls);
		ereport(NOTICE,
				(errmsg("magic_sync: %s of %s travels to its replicas as a schema change%s", cause, d->name,
						f->rows_again ? psprintf(", with its %llu rows again to those that hold them", (unsigned long long) n) :
						f->replan ? psprintf(", its %llu rows planned again", (unsigned long long) n) : ""),
				 errdetail("%s.", f->what.data)));
	}
	/* plans a session keeps over the table are made again (cached statements name its columns) */
	CacheInvalidateRelcacheByRelid(d->relid);
}
