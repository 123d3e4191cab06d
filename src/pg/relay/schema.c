/*-------------------------------------------------------------------------
 * schema.c
 *	  The Table of a mirrored table as replicas are sent it (docs/protocol.md
 *	  2.1): in a snapshot's Begin, every table the replica may hold or write
 *	  (record tables included even while it holds none of their rows), so a
 *	  new, empty SQLite file needs no hand-written DDL; in a schema change
 *	  (5.3), one table as it now is.
 *
 * Besides what a snapshot needs, a Table carries what a schema change
 * matches and adds by: the table's and its columns' ids (sync.tables.ids),
 * the unique indexes that travel (read from the relcache), and the fill
 * row: the values columns added since took on every row then, encoded in
 * the table's codec as its rows are (row_to_json, or load.c's proto).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "fields.h"
#include "keys.h"
#include "load.h"
#include "pbwrite.h"
#include "schema.h"
#include "wire.h"

/* column_of_attnum: the index in t->columns of the mirrored column attnum, or -1 */
static int
column_of_attnum(const ms_table *t, AttrNumber attnum)
{
	for (int c = 0; c < t->ncolumns; c++)
		if (t->columns[c].attnum == attnum)
			return c;
	return -1;
}

static int
unique_order(const ListCell *a, const ListCell *b)
{
	return strcmp(((Sync__Unique *) lfirst(a))->name, ((Sync__Unique *) lfirst(b))->name);
}

/*
 * unique_indexes: the table's unique indexes that travel: immediate, valid,
 * on columns only (no expression, no predicate), every one of them mirrored
 * and none the replica's own, and not on the key's columns exactly (the
 * key is the replica's primary key).  By name.
 */
static List *
unique_indexes(const ms_table *t)
{
	Relation	rel = relation_open(t->relid, AccessShareLock);
	List	   *indexes = RelationGetIndexList(rel);
	List	   *out = NIL;
	ListCell   *lc;

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index index;
		Sync__Unique *u;
		bool		travels;
		int			nkey = 0;

		if (!HeapTupleIsValid(tup))
			continue;
		index = (Form_pg_index) GETSTRUCT(tup);
		travels = index->indisunique && index->indimmediate && index->indisvalid &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL) &&
			heap_attisnull(tup, Anum_pg_index_indexprs, NULL);
		u = palloc(sizeof(Sync__Unique));
		sync__unique__init(u);
		u->n_columns = index->indnkeyatts;
		u->columns = palloc(sizeof(char *) * Max(u->n_columns, 1));
		for (int i = 0; i < index->indnkeyatts && travels; i++)
		{
			int			c = column_of_attnum(t, index->indkey.values[i]);

			travels = c >= 0 && !t->columns[c].replica_owned;
			if (travels)
			{
				u->columns[i] = t->columns[c].name;
				nkey += t->columns[c].key;
			}
		}
		if (travels && !(nkey == t->nkey && index->indnkeyatts == t->nkey))
		{
			u->name = get_rel_name(lfirst_oid(lc));
			out = lappend(out, u);
		}
		ReleaseSysCache(tup);
	}
	list_free(indexes);
	relation_close(rel, AccessShareLock);
	list_sort(out, unique_order);
	return out;
}

/*
 * fill_row: the columns added since the table was declared that every row
 * then took a value of (declaration's fills), as one row in the table's
 * codec; empty when none.  Encoded in the pass, as the rows are.
 */
static void
fill_row(ms_pass *p, const ms_table *t, StringInfo out)
{
	StringInfoData sql;
	ms_table	sub = *t;
	Oid		   *types;
	Datum	   *values;
	int			n = 0;
	int			nest;
	MemoryContext cxt;

	sub.columns = palloc0(sizeof(ms_column) * (t->ncolumns + 1));
	types = palloc(sizeof(Oid) * (t->ncolumns + 1));
	values = palloc(sizeof(Datum) * (t->ncolumns + 1));
	initStringInfo(&sql);
	appendStringInfoString(&sql, t->proto ? "SELECT " : "SELECT row_to_json(r)::text FROM (SELECT ");
	for (int c = 0; c < t->ncolumns; c++)
	{
		const ms_decl_column *dc = NULL;

		for (int i = 0; i < t->decl->ncolumns && dc == NULL; i++)
			if (strcmp(t->decl->columns[i].name, t->columns[c].name) == 0 && t->decl->columns[i].fill)
				dc = &t->decl->columns[i];
		if (dc == NULL)
			continue;
		types[n] = TEXTOID;
		values[n] = CStringGetTextDatum(dc->fill);
		sub.columns[n] = t->columns[c];
		appendStringInfo(&sql, "%sCAST($%d AS %s) AS %s", n ? ", " : "", n + 1,
						 format_type_be_qualified(t->columns[c].type), t->columns[c].quoted);
		n++;
	}
	if (n == 0)
		return;
	sub.ncolumns = n;
	if (!t->proto)
		appendStringInfoString(&sql, ") r");
	cxt = CurrentMemoryContext;
	/* read and written as the rows are (load.h), so a filled row is one the values digest expects */
	nest = ms_output_pin();
	ms_exec(&p->exec, sql.data, n, types, values, NULL, 1);
	/* SPI_prepare leaves SPI's procedure context current: the catalog kept across passes is not in it */
	MemoryContextSwitchTo(cxt);
	if (SPI_processed != 1)
		elog(ERROR, "the fill row of %s did not come back", t->name);
	if (t->proto)
		ms_encode_proto(&sub, SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, out);
	else
		appendStringInfoString(out, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	AtEOXact_GUC(true, nest);
	SPI_freetuptable(SPI_tuptable);
}

/*
 * key_type: a key column's kind for a replica, when its parts are spelled
 * otherwise than its text (docs/protocol.md 3): what server_type, a
 * domain's name, may not say
 */
static char *
key_type(Oid type)
{
	switch (ms_key_kind_of(type))
	{
		case MS_KEY_NUMERIC:
			return "numeric";
		case MS_KEY_DATE:
			return "date";
		case MS_KEY_TIME:
			return "time";
		case MS_KEY_TIMESTAMP:
			return "timestamp";
		case MS_KEY_TIMESTAMPTZ:
			return "timestamptz";
		default:
			return "";
	}
}

/* table_message: t as a Table; legacy: as 0.1 wrote it, without ids, unique indexes, fill */
static Sync__Table *
table_message(ms_pass *p, List *tables, ms_table *mt, bool legacy)
{
	Sync__Table *st = palloc(sizeof(Sync__Table));
	int			ncols = mt->ncolumns + (mt->retired ? 1 : 0);

	sync__table__init(st);
	st->name = mt->name;
	st->mirror = mt->setting ? "setting" : mt->record ? "record" : "catalog";
	st->codec = mt->proto ? "proto" : "json";
	st->n_columns = ncols;
	st->columns = palloc(sizeof(Sync__Column *) * ncols);
	for (int c = 0; c < mt->ncolumns; c++)
	{
		Sync__Column *col = palloc(sizeof(Sync__Column));

		sync__column__init(col);
		col->name = mt->columns[c].name;
		col->type = (char *) ms_type_name(mt->columns[c].sqlite_type);
		col->not_null = mt->columns[c].not_null;
		col->replica_owned = mt->columns[c].replica_owned;
		col->field = mt->columns[c].field;
		col->server_type = mt->columns[c].type_name;
		col->id = legacy ? 0 : (uint32) mt->columns[c].id;
		col->key_type = legacy || !mt->columns[c].key ? "" : key_type(mt->columns[c].type);
		st->columns[c] = col;
	}
	if (mt->retired)
	{
		/* replica-side only: the time the row was retired, NULL while live */
		Sync__Column *col = palloc(sizeof(Sync__Column));

		sync__column__init(col);
		col->name = mt->retired;
		col->type = (char *) ms_type_name(MS_INTEGER);
		col->server_type = "";
		st->columns[ncols - 1] = col;
		st->retired = mt->retired;
	}
	st->n_key = mt->nkey;
	st->key = palloc(sizeof(char *) * mt->nkey);
	for (int k = 0; k < mt->nkey; k++)
		st->key[k] = mt->columns[mt->key[k]].name;
	st->n_foreign_keys = mt->nfkeys;
	st->foreign_keys = palloc(sizeof(Sync__ForeignKey *) * Max(mt->nfkeys, 1));
	for (int f = 0; f < mt->nfkeys; f++)
	{
		ms_fkey    *fk = &mt->fkeys[f];
		Sync__ForeignKey *sf = palloc(sizeof(Sync__ForeignKey));

		sync__foreign_key__init(sf);
		sf->table = ms_catalog_find(tables, fk->parent)->name;
		sf->n_columns = fk->ncols;
		sf->columns = palloc(sizeof(char *) * fk->ncols);
		sf->n_references = fk->ncols;
		sf->references = fk->parent_cols;
		for (int i = 0; i < fk->ncols; i++)
			sf->columns[i] = mt->columns[fk->cols[i]].name;
		st->foreign_keys[f] = sf;
	}
	if (mt->origin >= 0)
		st->origin = mt->columns[mt->origin].name;
	if (mt->version >= 0)
		st->version = mt->columns[mt->version].name;
	st->hlc = mt->hlc;
	if (!legacy)
	{
		List	   *unique = unique_indexes(mt);
		StringInfoData fill;
		ListCell   *lc;
		int			u = 0;

		st->id = (uint32) mt->id;
		st->lane = mt->decl != NULL && mt->decl->lane != NULL ? mt->decl->lane : "";
		st->n_unique = list_length(unique);
		st->unique = palloc(sizeof(Sync__Unique *) * Max(st->n_unique, 1));
		foreach(lc, unique)
			st->unique[u++] = lfirst(lc);
		initStringInfo(&fill);
		fill_row(p, mt, &fill);
		st->fill.len = fill.len;
		st->fill.data = (uint8_t *) fill.data;
	}
	return st;
}

void
ms_schema_table(ms_pass *p, List *tables, ms_table *t, bool legacy, StringInfo out)
{
	Sync__Table *st = table_message(p, tables, t, legacy);
	size_t		size = sync__table__get_packed_size(st);

	enlargeStringInfo(out, (int) size);
	sync__table__pack(st, (uint8_t *) out->data + out->len);
	out->len += (int) size;
	out->data[out->len] = '\0';
}

void
ms_schema_field(StringInfo out, int field, const StringInfo table)
{
	enlargeStringInfo(out, (int) ms_pb_len_field_size((uint32) field, table->len));
	out->len += (int) ms_pb_len_field((uint8_t *) out->data + out->len, (uint32) field,
									  table->data, table->len);
	out->data[out->len] = '\0';
}
