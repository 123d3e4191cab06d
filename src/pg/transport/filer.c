/*-------------------------------------------------------------------------
 * filer.c
 *	  What one call of sync.file or sync.inbox_retry prepares once, however
 *	  many rows it files: the catalog read (kept across the session's calls
 *	  while nothing it was read from changed), the statements on sync.* that
 *	  every row uses (kept too), and per table the statements that file its
 *	  rows (prepared the first time a row of it needs one) and the shape of
 *	  its proto rows.  And a row in its codec, as the JSON object the filing
 *	  reads with jsonb_populate_record.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include <math.h>

#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "canon.h"
#include "file.h"
#include "hlc_file.h"
#include "keys.h"
#include "spi_check.h"
#include "watch.h"
#include "wire.h"

const char *const ms_outcome_names[MS_OUTCOMES] = {"filed", "refused", "dropped", "waiting", "set_aside"};

/*
 * The check of an uploaded row: $1 the row as JSON, $2 the names of its key
 * columns (and origin), $3 the values the key (and the replica) give them,
 * spelled as their types print them, $4 the columns it may carry, $5 the
 * kind of each of $2 (i integer, u uuid, t text: how a value the row gives
 * is the same value in another spelling).  Returns: is it an object; the
 * columns it may not carry; the key columns that disagree; the row with key
 * and origin filled in, as their types print them; a column it gives twice
 * (json keeps what jsonb would merge, and a replica refuses it too).
 */
static const char *const check_sql =
"WITH r AS (SELECT $1::jsonb AS j) "
"SELECT jsonb_typeof(r.j) = 'object',"
"       (SELECT string_agg(format('%I', k), ', ') FROM jsonb_object_keys(r.j) k"
"         WHERE jsonb_typeof(r.j) = 'object' AND NOT (k = ANY ($4))),"
"       (SELECT string_agg(format('%I', n), ', ') FROM unnest($2, $3, $5) AS u(n, p, kind)"
"         WHERE jsonb_typeof(r.j) = 'object' AND r.j ? n"
"           AND (CASE kind"
"                  WHEN 'i' THEN (r.j ->> n) ~ '^\\s*[+-]?[0-9]+\\s*$' AND (r.j ->> n)::numeric = p::numeric"
"                  WHEN 'u' THEN lower(translate(r.j ->> n, '{}-', '')) = translate(p, '-', '')"
"                  ELSE (r.j ->> n) = p END) IS NOT TRUE),"
"       (r.j || (SELECT jsonb_object_agg(n, p) FROM unnest($2, $3) AS u(n, p)))::text,"
"       (SELECT k FROM pg_catalog.json_object_keys($1::json) k"
"         WHERE jsonb_typeof(r.j) = 'object' GROUP BY k HAVING count(*) > 1 ORDER BY k LIMIT 1)"
"  FROM r";

bool
ms_uploads_catalog(void)
{
	Oid			sync = get_namespace_oid("sync", true);

	return OidIsValid(sync) && OidIsValid(get_relname_relid("dropped", sync));
}

/*
 * the statements on sync.* every row may use: prepared once a session and
 * kept (a session files an acknowledgement at every round), as they are
 */
static void
prepare_catalog(ms_filer *fr)
{
	static ms_filer kept;
	static bool prepared = false;
	static bool prepared_updated = false;
	Oid			check[5] = {TEXTOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID};
	Oid			dropped[4] = {UUIDOID, INT4OID, TEXTOID, TEXTOID};
	Oid			held[3] = {UUIDOID, INT4OID, TEXTOID};
	Oid			note[2] = {INT4OID, TEXTOID};
	Oid			keep[7] = {UUIDOID, INT4OID, TEXTOID, BYTEAOID, JSONBOID, TEXTOID, TEXTOID};

	if (!prepared)
	{
		kept.check = ms_spi_kept(check_sql, 5, check);
		kept.held = ms_spi_kept("SELECT number, taken IS NOT NULL, since FROM sync.held"
								" WHERE replica = $1 AND tab = $2 AND key = $3", 3, held);
		/* the write just made drew the newest note of the row: the session's last */
		kept.mark_held = ms_spi_kept("INSERT INTO sync.held (replica, tab, key, note, number)"
									 " VALUES ($1, $2, $3, currval('sync.note_seq'), 0)"
									 " ON CONFLICT (replica, tab, key) DO UPDATE SET note = EXCLUDED.note,"
									 "   number = 0, taken = NULL, refused = NULL", 3, held);
		kept.note = ms_spi_kept("INSERT INTO sync.notes (tab, key) VALUES ($1, $2)", 2, note);
		kept.replace = ms_spi_kept("UPDATE sync.held SET replace = true"
								   " WHERE replica = $1 AND tab = $2 AND key = $3", 3, held);
		kept.unhold = ms_spi_kept("DELETE FROM sync.held WHERE replica = $1 AND tab = $2 AND key = $3", 3, held);
		kept.keep = ms_spi_kept("INSERT INTO sync.inbox (replica, tab, key, row, sender, reason, sqlstate)"
								" VALUES ($1, $2, $3, $4, $5, $6, $7)"
								" ON CONFLICT (replica, tab, key) DO UPDATE SET row = EXCLUDED.row,"
								"   sender = EXCLUDED.sender, reason = EXCLUDED.reason,"
								"   sqlstate = EXCLUDED.sqlstate, tries = sync.inbox.tries + 1, last_at = now()",
								7, keep);
		kept.unkeep = ms_spi_kept("DELETE FROM sync.inbox WHERE replica = $1 AND tab = $2 AND key = $3", 3, held);
		prepared = true;
	}
	fr->check = kept.check;
	fr->held = kept.held;
	fr->mark_held = kept.mark_held;
	fr->note = kept.note;
	fr->replace = kept.replace;
	fr->unhold = kept.unhold;
	fr->keep = kept.keep;
	fr->unkeep = kept.unkeep;
	fr->updated = ms_uploads_catalog();
	if (!fr->updated)
		return;
	if (!prepared_updated)
	{
		kept.drop_note = ms_spi_kept("INSERT INTO sync.dropped (replica, tab, key, reason) VALUES ($1, $2, $3, $4)"
									 " ON CONFLICT (replica, tab, key) DO UPDATE SET reason = EXCLUDED.reason, at = now()",
									 4, dropped);
		kept.drop_forget = ms_spi_kept("DELETE FROM sync.dropped WHERE replica = $1 AND tab = $2 AND key = $3", 3, held);
		prepared_updated = true;
	}
	fr->drop_note = kept.drop_note;
	fr->drop_forget = kept.drop_forget;
}

/*
 * The catalog as the last call read it, checked (its triggers too) and
 * none of its tables held back: kept for the session, as the relay keeps
 * its own (relay/relay.c).  Read again when a declaration changed (the text
 * of sync.tables), a relation it names was altered (a relcache
 * invalidation: DDL, triggers enabled or disabled or dropped, a partition
 * attached, an index made), also while it was read (declare/watch.h).
 * Never kept while a table is held back: a fix may put that right in many
 * ways (sync.check() says them).
 */
static MemoryContext catalog_cxt = NULL;
static ms_watch catalog_watch;	/* whether a relation it names changed (watch.h) */
static char *catalog_decls = NULL;
static List *catalog_tables = NIL;

/* the declarations as text (their hash): what the kept catalog was read from */
static char *
declarations(void)
{
	bool		isnull;
	MemoryContext cxt = CurrentMemoryContext;
	int			rc = ms_spi_run("SELECT pg_catalog.md5(coalesce(pg_catalog.string_agg(t::text, ',' ORDER BY t.id), ''))"
								" FROM sync.tables t", 0, NULL, NULL, NULL, true, 0);
	char	   *out;

	ms_spi_check_one(rc, SPI_OK_SELECT, "could not read sync.tables");
	MemoryContextSwitchTo(cxt);
	out = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return out;
}

/*
 * the tables a call files into, checked, and those held back (*held):
 * the kept ones, or read now
 */
static List *
filer_catalog(List **held)
{
	char	   *decls = declarations();
	MemoryContext old = CurrentMemoryContext;
	List	   *problems = NIL;
	List	   *tables;

	*held = NIL;
	if (catalog_watch.valid && strcmp(catalog_decls, decls) == 0)
		return catalog_tables;
	ms_watch_reading(&catalog_watch);
	/* the last one goes with the transaction: a call still filing may be using it */
	if (catalog_cxt != NULL)
		MemoryContextSetParent(catalog_cxt, TopTransactionContext);
	catalog_cxt = AllocSetContextCreate(TopMemoryContext, "magic_sync filer catalog", ALLOCSET_DEFAULT_SIZES);
	catalog_tables = NIL;
	PG_TRY();
	{
		/* SPI leaves the call's context current after each statement: back each time */
		MemoryContextSwitchTo(catalog_cxt);
		/* a table held back is known, so that its rows wait in the inbox; it is not in tables */
		tables = ms_catalog_read(&problems);
		MemoryContextSwitchTo(catalog_cxt);
		/* a table whose triggers would not note what is filed waits as the relay holds it back */
		ms_check_triggers(tables, &problems);
		MemoryContextSwitchTo(catalog_cxt);
		tables = ms_catalog_hold(tables, problems, held);
		MemoryContextSwitchTo(catalog_cxt);
		ms_watch_read(&catalog_watch, tables, *held == NIL);
		catalog_decls = pstrdup(decls);
	}
	PG_FINALLY();
	{
		MemoryContextSwitchTo(old);
	}
	PG_END_TRY();
	catalog_tables = tables;
	return tables;
}

static void
filed_table_init(ms_filed_table *ft, ms_table *t)
{
	memset(ft, 0, sizeof *ft);
	ft->t = t;
	for (int c = 0; c < t->ncolumns; c++)
		ft->owned |= t->columns[c].replica_owned;
	if (!t->proto)
		return;
	ft->cols = palloc(sizeof(ms_row_column) * Max(t->ncolumns, 1));
	for (int c = 0; c < t->ncolumns; c++)
	{
		ft->cols[c].name = t->columns[c].name;
		ft->cols[c].type = t->columns[c].sqlite_type;
		ft->cols[c].field = (uint32_t) t->columns[c].field;
	}
	/* palloc raises when out of memory: the shape is always made */
	ms_row_shape_init(&ft->shape, t->name, ft->cols, t->ncolumns, ms_pg_allocator());
}

void
ms_filer_begin(ms_filer *fr)
{
	ListCell   *lc;
	int			i = 0;
	List	   *held = NIL;

	memset(fr, 0, sizeof *fr);
	fr->cxt = CurrentMemoryContext;
	fr->tables = filer_catalog(&held);
	fr->filed = palloc(sizeof(ms_filed_table) * Max(list_length(fr->tables) + list_length(held), 1));
	foreach(lc, fr->tables)
		filed_table_init(&fr->filed[i++], lfirst(lc));
	foreach(lc, held)
	{
		ms_held    *h = lfirst(lc);

		if (h->t == NULL)
			continue;
		filed_table_init(&fr->filed[i], h->t);
		fr->filed[i++].held = h->why;
	}
	fr->ntables = i;
	prepare_catalog(fr);
}

ms_filed_table *
ms_filed_table_named(ms_filer *fr, const char *name)
{
	for (int i = 0; i < fr->ntables; i++)
		if (strcmp(fr->filed[i].t->name, name) == 0)
			return &fr->filed[i];
	return NULL;
}

bool
ms_server_column(const ms_table *t, int c)
{
	for (int g = 0; g < t->ngenerated; g++)
		if (t->generated[g] == c)
			return true;
	return c == t->created || (t->sender && strcmp(t->columns[c].name, t->sender) == 0);
}

/* a record: kept from its first delivery, or the newest wins by its version */
static char *
record_sql(const ms_table *t)
{
	StringInfoData sql;
	Oid			lt;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s AS t (", t->qualified);
	for (int c = 0, n = 0; c < t->ncolumns; c++)
		if (!ms_server_column(t, c))
			appendStringInfo(&sql, "%s%s", n++ ? ", " : "", t->columns[c].quoted);
	if (t->created >= 0)
		appendStringInfo(&sql, ", %s", t->columns[t->created].quoted);
	if (t->sender)
		appendStringInfo(&sql, ", %s", quote_identifier(t->sender));
	appendStringInfoString(&sql, ") SELECT ");
	for (int c = 0, n = 0; c < t->ncolumns; c++)
		if (!ms_server_column(t, c))
			appendStringInfo(&sql, "%sr.%s", n++ ? ", " : "", t->columns[c].quoted);
	if (t->created >= 0)
		appendStringInfoString(&sql, ", now()");
	if (t->sender)
		appendStringInfoString(&sql, ", $2");
	appendStringInfo(&sql, " FROM pg_catalog.jsonb_populate_record(NULL::%s, $1::pg_catalog.jsonb) r ON CONFLICT (",
					 t->qualified);
	for (int k = 0; k < t->nkey; k++)
		appendStringInfo(&sql, "%s%s", k ? ", " : "", t->columns[t->key[k]].quoted);
	if (t->version < 0 && !t->setting)
		appendStringInfoString(&sql, ") DO NOTHING");
	else
	{
		appendStringInfoString(&sql, ") DO UPDATE SET ");
		for (int c = 0, n = 0; c < t->ncolumns; c++)
			if (!ms_server_column(t, c) && !t->columns[c].key)
				appendStringInfo(&sql, "%s%s = EXCLUDED.%s", n++ ? ", " : "",
								 t->columns[c].quoted, t->columns[c].quoted);
		if (t->sender)
			appendStringInfo(&sql, ", %s = EXCLUDED.%s", quote_identifier(t->sender),
							 quote_identifier(t->sender));
		/* a setting without a version: its one writer's uploads are filed in order, the latest wins */
		if (t->hlc)
			ms_hlc_newer_sql(&sql, t, "t", "EXCLUDED");
		else if (t->version >= 0)
		{
			/* the version's own order (sync.mirror checked it has one), wherever its type lives */
			lt = lookup_type_cache(t->columns[t->version].type, TYPECACHE_LT_OPR)->lt_opr;
			appendStringInfo(&sql, " WHERE t.%s %s EXCLUDED.%s", t->columns[t->version].quoted,
							 ms_operator_sql(lt), t->columns[t->version].quoted);
		}
	}
	/* an hlc table's stamp filed: the server's clock is never behind it */
	if (t->hlc)
		appendStringInfo(&sql, " RETURNING t.%s", t->columns[t->version].quoted);
	else
		appendStringInfoString(&sql, " RETURNING 1");
	return sql.data;
}

/*
 * a record not taken, against the server's copy: whether it is the same
 * (every column it carries, as text: json has no equality), whether it is
 * an older version, and both versions as text
 */
static char *
compare_sql(const ms_table *t)
{
	StringInfoData sql;
	const char *v = t->version >= 0 ? t->columns[t->version].quoted : NULL;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ROW(");
	for (int c = 0, n = 0; c < t->ncolumns; c++)
		if (!ms_server_column(t, c))
			appendStringInfo(&sql, "%st.%s::pg_catalog.text", n++ ? ", " : "", t->columns[c].quoted);
	appendStringInfoString(&sql, ") IS NOT DISTINCT FROM ROW(");
	for (int c = 0, n = 0; c < t->ncolumns; c++)
		if (!ms_server_column(t, c))
			appendStringInfo(&sql, "%sr.%s::pg_catalog.text", n++ ? ", " : "", t->columns[c].quoted);
	if (v && t->hlc)
	{
		/* older: the server's copy orders after the replica's, as record_sql's */
		appendStringInfoString(&sql, "), NOT ");
		ms_hlc_newer_expr(&sql, t, "t", "r");
		appendStringInfo(&sql, ", r.%s::pg_catalog.text, t.%s::pg_catalog.text", v, v);
	}
	else if (v)
	{
		/* the version's own order, as record_sql's */
		Oid			lt = lookup_type_cache(t->columns[t->version].type, TYPECACHE_LT_OPR)->lt_opr;

		appendStringInfo(&sql, "), r.%s %s t.%s, r.%s::pg_catalog.text, t.%s::pg_catalog.text",
						 v, ms_operator_sql(lt), v, v, v);
	}
	else
		appendStringInfoString(&sql, "), NULL::pg_catalog.bool, NULL::pg_catalog.text, NULL::pg_catalog.text");
	appendStringInfo(&sql, " FROM %s t, pg_catalog.jsonb_populate_record(NULL::%s, $1::pg_catalog.jsonb) r WHERE %s",
					 t->qualified, t->qualified, ms_key_match(t, "t", "$2"));
	return sql.data;
}

/* a two-way row: only the columns the replica owns */
static char *
two_way_sql(const ms_table *t)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE %s t SET ", t->qualified);
	for (int c = 0, n = 0; c < t->ncolumns; c++)
		if (t->columns[c].replica_owned)
			appendStringInfo(&sql, "%s%s = r.%s", n++ ? ", " : "",
							 t->columns[c].quoted, t->columns[c].quoted);
	appendStringInfo(&sql, " FROM pg_catalog.jsonb_populate_record(NULL::%s, $1::pg_catalog.jsonb) r WHERE %s",
					 t->qualified, ms_key_match(t, "t", "$2"));
	return sql.data;
}

SPIPlanPtr
ms_filed_plan(ms_filer *fr, ms_filed_table *ft, SPIPlanPtr *slot)
{
	const ms_table *t = ft->t;
	Oid			key[1] = {TEXTOID};
	Oid			record[2] = {TEXTOID, JSONBOID};
	Oid			two_way[2] = {TEXTOID, TEXTOID};
	MemoryContext old;

	if (*slot != NULL)
		return *slot;
	/* a row's subtransaction may be where it is first needed: the plan is the call's */
	old = MemoryContextSwitchTo(fr->cxt);
	if (slot == &ft->exists)
		*slot = ms_spi_prepare(psprintf("SELECT 1 FROM %s t WHERE %s", t->qualified,
										ms_key_match(t, "t", "$1")), 1, key);
	else if (slot == &ft->record)
		*slot = ms_spi_prepare(record_sql(t), 2, record);
	else if (slot == &ft->compare)
		*slot = ms_spi_prepare(compare_sql(t), 2, two_way);
	else if (slot == &ft->two_way)
		*slot = ms_spi_prepare(two_way_sql(t), 2, two_way);
	else if (slot == &ft->delete_row)
		*slot = ms_spi_prepare(psprintf("DELETE FROM %s t WHERE %s", t->qualified,
										ms_key_match(t, "t", "$1")), 1, key);
	else
		elog(ERROR, "no statement of table \"%s\" is prepared there", t->name);
	MemoryContextSwitchTo(old);
	return *slot;
}

void
ms_filer_run(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only,
			 long tcount, int expect, const char *what)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc = SPI_execute_plan(plan, values, nulls, read_only, tcount);

	/*
	 * SPI leaves the procedure's context current, which lives as long as the
	 * call: what a row allocates after its statements goes with the row's
	 */
	MemoryContextSwitchTo(cxt);
	ms_spi_check(rc, expect, "%s", what);
}

/*
 * within_typmod: whether a spelled key part is a value of its column as its
 * typmod bounds it (numeric(p,s), time(p), timestamp(p)): one the column
 * would round is another key than the replica's
 */
static bool
within_typmod(const ms_column *c, ms_key_kind kind, const char *part, size_t n)
{
	int			before,
				after;

	if (c->typmod < 0)
		return true;
	ms_key_canon_digits(kind, part, n, &before, &after);
	if (kind == MS_KEY_NUMERIC)
	{
		int			precision = ((c->typmod - VARHDRSZ) >> 16) & 0xffff;
		int			scale = (((c->typmod - VARHDRSZ) & 0x7ff) ^ 1024) - 1024;
		int			zeros = 0;

		if (strcmp(part, "NaN") == 0)
			return true;
		if (strstr(part, "Infinity") != NULL)
			return false;
		/* a negative scale: so many zeros end the integer */
		for (size_t i = n; i > 0 && part[i - 1] == '0' && after == 0; i--)
			zeros++;
		return after <= Max(scale, 0) && before <= precision - scale && (scale >= 0 || zeros >= -scale);
	}
	if (kind == MS_KEY_TIME || kind == MS_KEY_TIMESTAMP || kind == MS_KEY_TIMESTAMPTZ)
		return after <= c->typmod;
	return true;
}

bool
ms_key_canonical(const ms_table *t, const Sync__Key *k, char **parts, char **why)
{
	for (int i = 0; i < t->nkey; i++)
	{
		const ms_column *c = &t->columns[t->key[i]];
		ms_key_kind kind = ms_key_kind_of(c->type);
		size_t		len = strlen(k->parts[i]);
		char	   *canon = kind == MS_KEY_TEXT || kind == MS_KEY_FOLDED ? NULL : palloc(MS_KEY_CANON_ROOM(len));
		size_t		n;
		char		reason[MS_REASON_MAX];

		if (kind == MS_KEY_TEXT)
			parts[i] = k->parts[i];
		else if (kind == MS_KEY_FOLDED)
		{
			/*
			 * A citext part as the key spells it, lowercase as the database's
			 * locale folds it: the spelling the server sends the row in.  A
			 * part in another case would be a second row on the replica (its
			 * file compares bytes) of one row here: refused, that row alone.
			 */
			parts[i] = TextDatumGetCString(DirectFunctionCall1Coll(lower, DEFAULT_COLLATION_OID,
																   CStringGetTextDatum(k->parts[i])));
			if (strcmp(parts[i], k->parts[i]) != 0)
			{
				*why = psprintf("its key column \"%s\": a citext key part is spelled lowercase, as the server's locale folds it: \"%.40s\", not \"%.40s\"",
								c->name, parts[i], k->parts[i]);
				return false;
			}
		}
		else if (!ms_key_canon(kind, k->parts[i], len, canon, &n, reason))
		{
			*why = psprintf("its key column \"%s\": %s", c->name, reason);
			return false;
		}
		else if (!within_typmod(c, kind, canon, n))
		{
			*why = psprintf("its key column \"%s\": key part \"%.40s\" is not a value of %s: it would be rounded or overflow",
							c->name, canon, format_type_with_typemod(c->type, c->typmod));
			return false;
		}
		else
			parts[i] = canon;
	}
	return true;
}

char *
ms_canonical_key(const Sync__Key *k)
{
	char	   *out = palloc(ms_wire_key_size(k) + 1);
	size_t		n = ms_wire_key_write(k, out);

	out[n] = '\0';
	return out;
}

/* ---- a row in its codec, as JSON ---- */

/* the JSON object being written from a proto row's fields */
typedef struct json_row
{
	const ms_table *t;
	StringInfo	out;
	bool		first;
} json_row;

/* json_member: one value the walker (row.h) handed over, as a member of the object */
static bool
json_member(void *arg, int column, const ms_row_value *v, char reason[MS_REASON_MAX])
{
	json_row   *j = arg;
	StringInfo	out = j->out;
	static const char digits[] = "0123456789abcdef";

	(void) reason;
	if (!j->first)
		appendStringInfoChar(out, ',');
	j->first = false;
	escape_json(out, j->t->columns[column].name);
	appendStringInfoChar(out, ':');
	switch (v->type)
	{
		case MS_INTEGER:
			appendStringInfo(out, INT64_FORMAT, (int64) v->i);
			break;
		case MS_REAL:
			/* as PostgreSQL's float8 input takes them */
			if (isnan(v->d) || isinf(v->d))
				appendStringInfo(out, "\"%s\"", isnan(v->d) ? "NaN" : (v->d > 0 ? "Infinity" : "-Infinity"));
			else
				appendStringInfo(out, "%.17g", v->d);
			break;
		case MS_TEXT:
			/* UTF-8 without a NUL: the walker checked */
			escape_json(out, pnstrdup((const char *) v->p, v->n));
			break;
		case MS_BLOB:
			appendStringInfoString(out, "\"\\\\x");
			for (size_t i = 0; i < v->n; i++)
			{
				appendStringInfoChar(out, digits[v->p[i] >> 4]);
				appendStringInfoChar(out, digits[v->p[i] & 15]);
			}
			appendStringInfoChar(out, '"');
			break;
	}
	return true;
}

char *
ms_row_json(ms_filed_table *ft, const uint8 *bytes, size_t len, char **why)
{
	StringInfoData out;

	initStringInfo(&out);
	if (ft->t->proto)
	{
		json_row	j = {ft->t, &out, true};
		char		reason[MS_REASON_MAX];

		appendStringInfoChar(&out, '{');
		if (!ms_row_walk(&ft->shape, bytes, len, json_member, &j, reason))
		{
			*why = pstrdup(reason);
			return NULL;
		}
		appendStringInfoChar(&out, '}');
		return out.data;
	}
	appendBinaryStringInfo(&out, (const char *) bytes, (int) len);
	if (len == 0 || bytes[0] != '{' || !ms_utf8_valid(out.data, len) ||
		pg_parse_json(makeJsonLexContextCstringLen(out.data, (int) len, PG_UTF8, false),
					  &nullSemAction) != JSON_SUCCESS)
	{
		*why = "the row is not a JSON object in UTF-8";
		return NULL;
	}
	return out.data;
}
