/*-------------------------------------------------------------------------
 * decl.c
 *	  Declarations in sync.tables: the one place that reads a row of it
 *	  into an ms_decl and writes one back (decl.h).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "catalog/namespace.h"

#include "decl.h"
#include "spi_check.h"

/* The words of the rules, by ms_rule. */
static const char *const rule_names[] = {NULL, "broadcast", "assigned", "follows", "grouped"};

const char *
ms_rule_name(ms_rule rule)
{
	return rule_names[rule];
}

ms_rule
ms_rule_of_name(const char *word)
{
	if (word == NULL)
		return MS_RULE_NONE;
	for (int r = MS_RULE_BROADCAST; r <= MS_RULE_GROUPED; r++)
		if (strcmp(rule_names[r], word) == 0)
			return (ms_rule) r;
	elog(ERROR, "sync.tables holds an unknown rule \"%s\"", word);
	return MS_RULE_NONE;		/* keep the compiler quiet */
}

/* The columns of sync.tables in the order read_sql selects them. */
enum
{
	C_ID = 1, C_RELID, C_NAME, C_RECORD, C_RULE, C_RULE_COLUMN, C_MEMBERS,
	C_MEMBER_KEY, C_ASSIGNMENTS, C_REPLICA, C_GROUP, C_KEY, C_ORIGIN, C_VERSION,
	C_OWNED, C_UNMIRRORED, C_RETIRED, C_CREATED, C_GENERATED, C_ACTIVE,
	C_PARTITION, C_PROTO, C_SENDER, C_COL_NAMES, C_COL_TYPES, C_COL_FIELDS,
	C_FK_NAMES, C_FK_PARENTS, C_COL_IDS, C_FILL_NAMES, C_FILL_VALUES, C_ATT_NAMES,
	C_ATT_NUMS, C_LAST_ID, C_HLC, C_LANE
};

/*
 * The columns a catalog updated for schema evolution adds; read as empty
 * from a catalog not yet updated (the library is installed before ALTER
 * EXTENSION UPDATE runs), and not written to it.
 */
static const char *const evolving_sql =
"       ARRAY(SELECT coalesce(t.ids ->> e.key, '0')"
"               FROM pg_catalog.jsonb_each_text(t.columns) e ORDER BY e.key),"
"       ARRAY(SELECT e.key FROM pg_catalog.jsonb_each_text(t.fills) e ORDER BY e.key),"
"       ARRAY(SELECT e.value FROM pg_catalog.jsonb_each_text(t.fills) e ORDER BY e.key),"
"       ARRAY(SELECT e.key FROM pg_catalog.jsonb_each_text(t.attnums) e ORDER BY e.key),"
"       ARRAY(SELECT e.value FROM pg_catalog.jsonb_each_text(t.attnums) e ORDER BY e.key),"
"       t.last_id";
static const char *const before_sql =
"       ARRAY(SELECT '0'::text FROM pg_catalog.jsonb_each_text(t.columns) e),"
"       '{}'::text[], '{}'::text[], '{}'::text[], '{}'::text[], 0";

bool
ms_decl_laned(void)
{
	Oid			nsp = get_namespace_oid("sync", true);
	Oid			tables = OidIsValid(nsp) ? get_relname_relid("tables", nsp) : InvalidOid;

	return OidIsValid(tables) && get_attnum(tables, "lane") != InvalidAttrNumber;
}

bool
ms_decl_evolving(void)
{
	Oid			nsp = get_namespace_oid("sync", true);
	Oid			tables = OidIsValid(nsp) ? get_relname_relid("tables", nsp) : InvalidOid;

	return OidIsValid(tables) && get_attnum(tables, "last_id") != InvalidAttrNumber;
}

static const char *const read_sql =
"SELECT t.id, t.relid::oid, t.name, t.mirror, t.rule, t.rule_column::text,"
"       t.members::oid, t.member_key::text[], t.assignments::oid,"
"       t.assignment_replica::text, t.group_column::text, t.key::text[],"
"       t.origin::text, t.version::text, t.replica_owned::text[], t.unmirrored::text[],"
"       t.retired::text, t.created::text, t.generated::text[], t.active::oid,"
"       t.partition::text, t.codec OPERATOR(pg_catalog.=) 'proto', t.sender::text,"
"       ARRAY(SELECT e.key FROM pg_catalog.jsonb_each_text(t.columns) e ORDER BY e.key),"
"       ARRAY(SELECT e.value FROM pg_catalog.jsonb_each_text(t.columns) e ORDER BY e.key),"
"       ARRAY(SELECT coalesce(t.fields OPERATOR(pg_catalog.->>) e.key, '0')"
"               FROM pg_catalog.jsonb_each_text(t.columns) e ORDER BY e.key),"
"       ARRAY(SELECT e.key FROM pg_catalog.jsonb_each_text(t.foreign_keys) e ORDER BY e.key),"
"       ARRAY(SELECT e.value FROM pg_catalog.jsonb_each_text(t.foreign_keys) e ORDER BY e.key),"
"%s%s"
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

static bool
get_bool(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	return !isnull && DatumGetBool(d);
}

/* get_names: a text[] column as a NULL-terminated array of its n strings. */
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

/* decl_of_row: one row of read_sql as an ms_decl. */
static ms_decl *
decl_of_row(HeapTuple tup, TupleDesc desc)
{
	ms_decl    *d = palloc0(sizeof(ms_decl));
	bool		isnull;
	int			n;
	char	  **names;
	char	  **types;
	char	  **fields;
	char	  **parents;
	char	  **ids;
	char	  **fill_names;
	char	  **fill_values;
	int			nfills;

	d->id = DatumGetInt32(SPI_getbinval(tup, desc, C_ID, &isnull));
	d->relid = get_oid(tup, desc, C_RELID);
	d->name = get_text(tup, desc, C_NAME);
	{
		char	   *mirror = get_text(tup, desc, C_RECORD);

		d->record = strcmp(mirror, "catalog") != 0;
		d->setting = strcmp(mirror, "setting") == 0;
	}
	d->rule = ms_rule_of_name(get_text(tup, desc, C_RULE));
	d->rule_column = get_text(tup, desc, C_RULE_COLUMN);
	d->members = get_oid(tup, desc, C_MEMBERS);
	d->member_key = get_names(tup, desc, C_MEMBER_KEY, &d->nmember_key);
	d->assignments = get_oid(tup, desc, C_ASSIGNMENTS);
	d->assignment_replica = get_text(tup, desc, C_REPLICA);
	d->group_column = get_text(tup, desc, C_GROUP);
	d->key = get_names(tup, desc, C_KEY, &d->nkey);
	d->origin = get_text(tup, desc, C_ORIGIN);
	d->version = get_text(tup, desc, C_VERSION);
	d->hlc = get_bool(tup, desc, C_HLC);
	d->owned = get_names(tup, desc, C_OWNED, &d->nowned);
	d->unmirrored = get_names(tup, desc, C_UNMIRRORED, &d->nunmirrored);
	d->retired = get_text(tup, desc, C_RETIRED);
	d->created = get_text(tup, desc, C_CREATED);
	d->generated = get_names(tup, desc, C_GENERATED, &d->ngenerated);
	d->active = get_oid(tup, desc, C_ACTIVE);
	d->partition = get_text(tup, desc, C_PARTITION);
	d->proto = get_bool(tup, desc, C_PROTO);
	d->sender = get_text(tup, desc, C_SENDER);

	names = get_names(tup, desc, C_COL_NAMES, &d->ncolumns);
	types = get_names(tup, desc, C_COL_TYPES, &n);
	fields = get_names(tup, desc, C_COL_FIELDS, &n);
	ids = get_names(tup, desc, C_COL_IDS, &n);
	fill_names = get_names(tup, desc, C_FILL_NAMES, &nfills);
	fill_values = get_names(tup, desc, C_FILL_VALUES, &n);
	d->columns = palloc0(sizeof(ms_decl_column) * (d->ncolumns + 1));
	for (int i = 0; i < d->ncolumns; i++)
	{
		d->columns[i].name = names[i];
		d->columns[i].type = types[i];
		d->columns[i].field = atoi(fields[i]);
		d->columns[i].id = atoi(ids[i]);
		for (int f = 0; f < nfills; f++)
			if (strcmp(fill_names[f], names[i]) == 0)
				d->columns[i].fill = fill_values[f];
	}
	names = get_names(tup, desc, C_ATT_NAMES, &d->natts);
	fields = get_names(tup, desc, C_ATT_NUMS, &n);
	d->atts = palloc0(sizeof(ms_decl_att) * (d->natts + 1));
	for (int i = 0; i < d->natts; i++)
	{
		d->atts[i].name = names[i];
		d->atts[i].attnum = atoi(fields[i]);
	}
	d->last_id = DatumGetInt32(SPI_getbinval(tup, desc, C_LAST_ID, &isnull));
	d->lane = get_text(tup, desc, C_LANE);
	names = get_names(tup, desc, C_FK_NAMES, &d->nfkeys);
	parents = get_names(tup, desc, C_FK_PARENTS, &n);
	d->fkeys = palloc0(sizeof(ms_decl_fkey) * (d->nfkeys + 1));
	for (int i = 0; i < d->nfkeys; i++)
	{
		d->fkeys[i].name = names[i];
		d->fkeys[i].parent = atoi(parents[i]);
	}
	return d;
}

List *
ms_decl_read_all(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *out = NIL;
	int			rc;

	rc = SPI_execute(psprintf(read_sql, ms_decl_evolving() ? evolving_sql : before_sql,
							  psprintf("%s%s", ms_hlc_decl_read_sql(),
									   ms_decl_laned() ? ", t.lane" : ", ''::text")), false, 0);
	ms_spi_check(rc, SPI_OK_SELECT, "reading sync.tables failed");
	MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
		out = lappend(out, decl_of_row(SPI_tuptable->vals[i], SPI_tuptable->tupdesc));
	SPI_freetuptable(SPI_tuptable);
	return out;
}

ms_decl *
ms_decl_of_relid(List *decls, Oid relid)
{
	ListCell   *lc;

	foreach(lc, decls)
		if (((ms_decl *) lfirst(lc))->relid == relid)
			return lfirst(lc);
	return NULL;
}

ms_decl *
ms_decl_of_name(List *decls, const char *name)
{
	ListCell   *lc;

	foreach(lc, decls)
		if (strcmp(((ms_decl *) lfirst(lc))->name, name) == 0)
			return lfirst(lc);
	return NULL;
}

/* names_datum: n names as a text[] datum. */
static Datum
names_datum(int n, char **names)
{
	Datum	   *elems = palloc(sizeof(Datum) * (n + 1));

	for (int i = 0; i < n; i++)
		elems[i] = CStringGetTextDatum(names[i]);
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* What columns_json writes of each column. */
typedef enum column_json
{
	CJ_TYPE,					/* {column: type} */
	CJ_FIELD,					/* {column: field number} */
	CJ_ID,						/* {column: id} */
	CJ_FILL						/* {column: fill}, of those that have one */
} column_json;

static char *
columns_json(const ms_decl *d, column_json what)
{
	StringInfoData buf;
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < d->ncolumns; i++)
	{
		const ms_decl_column *c = &d->columns[i];

		if (what == CJ_FILL && c->fill == NULL)
			continue;
		appendStringInfoString(&buf, first ? "" : ", ");
		first = false;
		escape_json(&buf, c->name);
		appendStringInfoString(&buf, ": ");
		if (what == CJ_FIELD)
			appendStringInfo(&buf, "%d", c->field);
		else if (what == CJ_ID)
			appendStringInfo(&buf, "%d", c->id);
		else
			escape_json(&buf, what == CJ_FILL ? c->fill : c->type);
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * numbers_json: {column: attnum} of every column of the table, or (fkeys)
 * {foreign key: the id of the table it points at}.
 */
static char *
numbers_json(const ms_decl *d, bool fkeys)
{
	StringInfoData buf;
	int			n = fkeys ? d->nfkeys : d->natts;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < n; i++)
	{
		appendStringInfoString(&buf, i > 0 ? ", " : "");
		escape_json(&buf, fkeys ? d->fkeys[i].name : d->atts[i].name);
		appendStringInfo(&buf, ": %d", fkeys ? d->fkeys[i].parent : d->atts[i].attnum);
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/* next_id: the id a new declaration takes. */
static int
next_id(void)
{
	bool		isnull;

	ms_spi_check_one(SPI_execute("SELECT pg_catalog.nextval('sync.tables_id_seq')::int", false, 0), SPI_OK_SELECT, "reading sync.tables_id_seq failed");
	return DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

#define NPARAMS 30

/* the columns both catalogs have, and their updates when made again, or following the table */
#define STORE_COLUMNS \
	"INSERT INTO sync.tables (id, relid, name, mirror, rule, rule_column, members, member_key," \
	"       assignments, assignment_replica, group_column, key, origin, version," \
	"       replica_owned, unmirrored, retired, created, generated, active, partition," \
	"       codec, fields, columns, foreign_keys, sender%s)" \
	" VALUES ($1, $2::regclass, $3, $4, $5, $6::name, $7::regclass, $8::name[], $9::regclass," \
	"       $10::name, $11::name, $12::name[], $13::name, $14::name, $15::name[], $16::name[]," \
	"       $17::name, $18::name, $19::name[], $20::regclass, $21::name, $22, $23::jsonb," \
	"       $24::jsonb, $25::jsonb, $26::name%s)" \
	" ON CONFLICT (id) DO UPDATE SET relid = EXCLUDED.relid, name = EXCLUDED.name," \
	"       mirror = EXCLUDED.mirror, rule = EXCLUDED.rule, rule_column = EXCLUDED.rule_column," \
	"       members = EXCLUDED.members, member_key = EXCLUDED.member_key," \
	"       assignments = EXCLUDED.assignments, assignment_replica = EXCLUDED.assignment_replica," \
	"       group_column = EXCLUDED.group_column, key = EXCLUDED.key, origin = EXCLUDED.origin," \
	"       version = EXCLUDED.version, replica_owned = EXCLUDED.replica_owned," \
	"       unmirrored = EXCLUDED.unmirrored, retired = EXCLUDED.retired, created = EXCLUDED.created," \
	"       generated = EXCLUDED.generated, active = EXCLUDED.active, partition = EXCLUDED.partition," \
	"       codec = EXCLUDED.codec, fields = EXCLUDED.fields, columns = EXCLUDED.columns," \
	"       foreign_keys = EXCLUDED.foreign_keys, sender = EXCLUDED.sender%s"

void
ms_decl_store(ms_decl *d)
{
	Datum		values[NPARAMS];
	char		nulls[NPARAMS];
	Oid			types[NPARAMS];
	int			rc;
	bool		evolving;

	if (d->id == 0)
		d->id = next_id();
	for (int i = 0; i < d->nfkeys; i++)
		if (d->fkeys[i].parent == 0)
			d->fkeys[i].parent = d->id;
	for (int i = 0; i < NPARAMS; i++)
	{
		nulls[i] = 'n';
		values[i] = (Datum) 0;
		types[i] = TEXTOID;
	}
#define SETP(i, t, v) (types[(i)] = (t), values[(i)] = (v), nulls[(i)] = ' ')
#define SETS(i, s) do { if ((s) != NULL) SETP(i, TEXTOID, CStringGetTextDatum(s)); } while (0)
#define SETO(i, o) do { if (OidIsValid(o)) SETP(i, OIDOID, ObjectIdGetDatum(o)); } while (0)
#define SETA(i, n, a) do { if ((a) != NULL) SETP(i, TEXTARRAYOID, names_datum(n, a)); } while (0)
	SETP(0, INT4OID, Int32GetDatum(d->id));
	SETO(1, d->relid);
	SETS(2, d->name);
	SETS(3, d->setting ? "setting" : d->record ? "record" : "catalog");
	SETS(4, ms_rule_name(d->rule));
	SETS(5, d->rule_column);
	SETO(6, d->members);
	SETA(7, d->nmember_key, d->member_key);
	SETO(8, d->assignments);
	SETS(9, d->assignment_replica);
	SETS(10, d->group_column);
	SETA(11, d->nkey, d->key);
	SETS(12, d->origin);
	SETS(13, d->version);
	SETP(14, TEXTARRAYOID, names_datum(d->nowned, d->owned));
	SETP(15, TEXTARRAYOID, names_datum(d->nunmirrored, d->unmirrored));
	SETS(16, d->retired);
	SETS(17, d->created);
	SETP(18, TEXTARRAYOID, names_datum(d->ngenerated, d->generated));
	SETO(19, d->active);
	SETS(20, d->partition);
	SETS(21, d->proto ? "proto" : "json");
	/* the field numbers, fixed for good; only the proto codec has any */
	SETS(22, d->proto ? columns_json(d, CJ_FIELD) : "{}");
	SETS(23, columns_json(d, CJ_TYPE));
	SETS(24, numbers_json(d, true));
	SETS(25, d->sender);
	SETS(26, columns_json(d, CJ_ID));
	SETS(27, numbers_json(d, false));
	SETS(28, columns_json(d, CJ_FILL));
	SETP(29, INT4OID, Int32GetDatum(d->last_id));
#undef SETP
#undef SETS
#undef SETO
#undef SETA
	/* typed alike whether NULL or not */
	types[0] = INT4OID;
	types[1] = types[6] = types[8] = types[19] = OIDOID;
	types[7] = types[11] = types[14] = types[15] = types[18] = TEXTARRAYOID;

	evolving = ms_decl_evolving();
	rc = SPI_execute_with_args(evolving ?
							   psprintf(STORE_COLUMNS, ", ids, attnums, fills, last_id",
										", $27::jsonb, $28::jsonb, $29::jsonb, $30",
										", ids = EXCLUDED.ids, attnums = EXCLUDED.attnums,"
										" fills = EXCLUDED.fills, last_id = EXCLUDED.last_id") :
							   psprintf(STORE_COLUMNS, "", "", ""),
							   evolving ? NPARAMS : NPARAMS - 4, types, values, nulls, false, 0);
	ms_spi_check_one(rc, SPI_OK_INSERT, "storing the declaration failed");
	ms_hlc_decl_store(d);
	/* the lane, apart: a catalog not yet updated has none, and every table is in the first */
	if (ms_decl_laned())
	{
		Oid			ltypes[2] = {INT4OID, TEXTOID};
		Datum		lvalues[2] = {Int32GetDatum(d->id), CStringGetTextDatum(d->lane ? d->lane : "")};

		ms_spi_check(SPI_execute_with_args("UPDATE sync.tables SET lane = $2 WHERE id OPERATOR(pg_catalog.=) $1"
										   " AND lane OPERATOR(pg_catalog.<>) $2",
										   2, ltypes, lvalues, NULL, false, 0), SPI_OK_UPDATE, "storing the declaration's lane failed");
	}
}

void
ms_decl_delete(int id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(id)};

	ms_spi_check(SPI_execute_with_args("DELETE FROM sync.tables WHERE id OPERATOR(pg_catalog.=) $1", 1, types, args,
									   NULL, false, 0), SPI_OK_DELETE, "deleting the declaration failed");
}
