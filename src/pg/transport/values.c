/*-------------------------------------------------------------------------
 * values.c
 *	  The server's values digest of what a replica holds of a table, and
 *	  its repair (docs/protocol.md 8).
 *
 * A replica's digest covers each row's values: the sum of each row's hash
 * (src/shared ms_digest_row) over its values as the file stores them.  The
 * server keeps no hash of what it sent: it computes the same over its
 * current rows, each read and made into the values a replica stores as a
 * send makes it (relay/load.c's columns; proto: the very bytes a message
 * carries, walked by src/shared/row.c; json: each column's to_json, read as
 * the replica's codec reads it).  Its current rows are what the replica
 * holds only when nothing of the table is on its way: ack.c compares once
 * the replica applied every message recorded for it, and here no note of
 * the table may wait (nor a row be quarantined), else nothing is compared.
 *
 * A difference is repaired, not only recorded: each row the replica holds
 * of the table goes to it again, as a row it refused does (relay/retry.c),
 * rebuilt from the current row, to it alone, as an upsert -- never a
 * replacement, so a write it made since and has not had filed keeps its
 * columns, as any upsert leaves them.  A replica that answers range
 * questions has the difference narrowed down first (range.c, values mode):
 * then only the rows whose values differ go, by the same path.
 *
 * Both sides write values with the same output settings (load.h
 * ms_output_pin), whatever the filing session's.  A replica that says false
 * values digests costs a read of the table and a resend of its rows: none
 * is compared while a repair's rows are on their way, nor a table's again
 * for magic_sync.values_repair_interval after one started.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "digest.h"
#include "file.h"
#include "load.h"
#include "owner.h"
#include "settings.h"
#include "spi_check.h"
#include "updated.h"
#include "wake.h"

/* why the rows of a values repair are held as refused (and known by) */
#define REPAIR_REASON "'its values differ from the server''s (digest)'"

/* rows read a fetch at a time, in memory of their own */
#define FETCH_ROWS 1000

/* whether column c of t counts in a row's hash: a replica overwrites it (digest.h) */
static bool
counted(const ms_table *t, int c)
{
	return !t->columns[c].replica_owned || t->columns[c].key;
}

static int
hex_digit(char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
		ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* hex digits of a "\x..." BLOB as the json codec carries it, decoded in place; false: none */
static bool
unhex(char *s, size_t *n)
{
	size_t		len = strlen(s);

	if (len < 2 || s[0] != '\\' || s[1] != 'x' || len % 2 != 0)
		return false;
	for (size_t i = 2; i < len; i += 2)
	{
		int			hi = hex_digit(s[i]),
					lo = hex_digit(s[i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		s[(i - 2) / 2] = (char) (hi << 4 | lo);
	}
	*n = (len - 2) / 2;
	return true;
}

/*
 * json_value: what a replica's json codec stores of a column of type type
 * given s, the column's to_json as text (a string unquoted, anything else
 * its JSON text); NULL is NULL.  src/sqlite/codec.c reads the same.
 */
static ms_digest_value
json_value(ms_type type, char *s)
{
	ms_digest_value v = {MS_DV_NULL, 0, 0, NULL, 0};
	char	   *end;

	if (s == NULL)
		return v;
	switch (type)
	{
		case MS_INTEGER:
			v.tag = MS_DV_INTEGER;
			v.i = strcmp(s, "true") == 0 ? 1 : strcmp(s, "false") == 0 ? 0 : strtoll(s, &end, 10);
			break;
		case MS_REAL:
			v.tag = MS_DV_REAL;
			v.d = strtod(s, &end);
			break;
		case MS_BLOB:
			v.tag = MS_DV_BLOB;
			v.p = s;
			if (!unhex(s, &v.n))
				v.n = strlen(s);
			break;
		case MS_TEXT:
			v.tag = MS_DV_TEXT;
			v.p = s;
			v.n = strlen(s);
			break;
	}
	return v;
}

/* proto: the walker's values, by column */
static bool
proto_value(void *arg, int column, const ms_row_value *rv, char reason[MS_REASON_MAX])
{
	ms_digest_value *vals = arg;
	ms_digest_value *v = &vals[column];

	(void) reason;
	v->tag = rv->type == MS_INTEGER ? MS_DV_INTEGER : rv->type == MS_REAL ? MS_DV_REAL :
		rv->type == MS_TEXT ? MS_DV_TEXT : MS_DV_BLOB;
	v->i = rv->i;
	v->d = rv->d;
	v->p = rv->p;
	v->n = rv->n;
	return true;
}

/*
 * select_list: what the walk reads of a row r of t after its key (the walk's
 * column 2 on: each column as a send makes it, proto, or its JSON text), into
 * sql; and the names r's columns are given, c0, c1 ..., into names (no
 * column's name can take another's)
 */
static void
select_list(const ms_table *t, StringInfo sql, StringInfo names)
{
	for (int c = 0; c < t->ncolumns; c++)
	{
		appendStringInfo(names, "%sc%d", c > 0 ? ", " : "", c);
		if (t->proto)
			appendStringInfo(sql, ", r.c%d", c);
		else if (counted(t, c))
			appendStringInfo(sql, ", pg_catalog.json_extract_path_text(pg_catalog.to_json(r.c%d),"
							 " VARIADIC '{}'::pg_catalog.text[])", c);
	}
}

/*
 * the statement reading each row the replica $1 holds of table $2, as a send
 * reads it: joined by the row's canonical key, which the planner may hash
 * rather than look each held row up by its key (bench/values.py)
 */
static char *
rows_sql(const ms_table *t)
{
	StringInfoData sql;
	StringInfoData names;

	initStringInfo(&sql);
	initStringInfo(&names);
	appendStringInfoString(&sql, "SELECT h.key");
	select_list(t, &sql, &names);
	/* the subquery's key renamed k: no column's name can take it */
	appendStringInfo(&sql, " FROM sync.held h JOIN (SELECT %s, %s FROM %s t) r(k, %s) ON r.k = h.key"
					 " WHERE h.replica = $1 AND h.tab = $2 AND h.refused IS NULL AND h.taken IS NULL",
					 ms_key_expr(t, "t"), ms_load_columns(t, "t"), t->qualified, names.data);
	return sql.data;
}

/*
 * the statement reading the rows of table t of the held keys $1 (a text[]),
 * as rows_sql reads them: each looked up by its key, compared as the key
 * columns' own types (catalog.c), through the table's key index -- the rows
 * of a range question's buckets, not the whole table (range.c).  A key the
 * table no longer has reads no row.
 */
static char *
keys_sql(const ms_table *t)
{
	StringInfoData sql;
	StringInfoData names;

	initStringInfo(&sql);
	initStringInfo(&names);
	appendStringInfoString(&sql, "SELECT k.key");
	select_list(t, &sql, &names);
	/* the key's parts computed once a key (kp1, ...), as load.c's load_query */
	appendStringInfo(&sql, " FROM (SELECT u.key%s FROM pg_catalog.unnest($1::pg_catalog.text[]) u(key)) k"
					 " CROSS JOIN LATERAL (SELECT %s FROM %s t WHERE %s OFFSET 0) r(%s)",
					 ms_key_parts_out(t, "u.key"), ms_load_columns(t, "t"), t->qualified,
					 ms_key_match_parts(t, "t", "k"), names.data);
	return sql.data;
}

/* whether a note of t waits, or a row of it is quarantined: its rows may not be what went */
bool
ms_values_on_its_way(const ms_table *t)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(t->id)};
	bool		isnull;

	ms_spi_check_one(SPI_execute_with_args("SELECT EXISTS (SELECT FROM sync.notes WHERE NOT done AND tab = $1)"
										   " OR EXISTS (SELECT FROM sync.quarantine WHERE tab = $1)",
										   1, types, values, NULL, true, 1), SPI_OK_SELECT, "could not read the notes of table \"%s\"", t->name);
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * rested: whether t's values of this replica may be compared: no repair of
 * them started less than magic_sync.values_repair_interval ago.  A replica
 * that says false values digests makes the server read the table and send
 * every row it holds: this bounds how often.
 */
static bool
rested(ms_filing *f, const ms_table *t)
{
	Oid			types[3] = {UUIDOID, INT4OID, FLOAT8OID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t->id),
								 Float8GetDatum((double) ms_values_repair_interval)};
	bool		isnull;

	/* a catalog not updated yet (ALTER EXTENSION magic_sync UPDATE) keeps no time: ms_values_repairing alone bounds */
	if (!ms_catalog_has_column("replica_tables", "values_repaired"))
		return true;
	ms_spi_check_one(SPI_execute_with_args("SELECT NOT EXISTS (SELECT FROM sync.replica_tables WHERE replica = $1 AND tab = $2"
										   "   AND values_repaired > pg_catalog.now() - pg_catalog.make_interval(secs => $3))",
										   3, types, values, NULL, true, 1), SPI_OK_SELECT, "could not read when table \"%s\" was last repaired", t->name);
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

bool
ms_values_repairing(ms_filing *f)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(&f->replica)};
	bool		isnull;

	/*
	 * by held_refused: the rows the replica refused or are sent again, few;
	 * not read-only, so that rows range repair marked in this very filing
	 * (range.c, before the digests) are seen
	 */
	ms_spi_check_one(SPI_execute_with_args("SELECT EXISTS (SELECT FROM sync.held WHERE replica = $1 AND refused IS NOT NULL"
										   "   AND refused = " REPAIR_REASON " AND taken IS NULL)",
										   1, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read the rows held as refused");
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* the values digest's walk: each row's hash summed, and by bucket at the first question's depth */
typedef struct summing
{
	uint64		sum;
	uint64		counts[1 << MS_RANGE_FIRST_SPLIT];
	uint64		sums[1 << MS_RANGE_FIRST_SPLIT];
} summing;

static void
sum_row(void *arg, const char *key, size_t len, uint64 hash)
{
	summing    *s = arg;
	uint64		b = ms_range_bucket(ms_range_key_hash(key, len), MS_RANGE_FIRST_SPLIT);

	s->sum += hash;
	s->counts[b]++;
	s->sums[b] += hash;
}

bool
ms_values_digest(ms_filing *f, ms_filed_table *ft, uint64 count, uint64 *out,
				 ms_range_sum **first, size_t *nfirst)
{
	const ms_table *t = ft->t;
	summing    *sum = palloc0(sizeof(summing));
	uint64		rows = 0;
	bool		walked;

	if (ms_values_on_its_way(t))
		return false;
	/* its CPU is what a false digest costs: not spent while a repair rests */
	if (!rested(f, t))
	{
		f->values_rested++;
		return false;
	}
	walked = ms_values_walk(f, ft, sum_row, sum, &rows);
	*out = sum->sum;
	*first = palloc(sizeof(ms_range_sum) * (1 << MS_RANGE_FIRST_SPLIT));
	*nfirst = 0;
	for (uint64 b = 0; b < (1 << MS_RANGE_FIRST_SPLIT); b++)
		if (sum->counts[b] > 0)
		{
			(*first)[*nfirst].bucket = b;
			(*first)[*nfirst].count = sum->counts[b];
			(*first)[(*nfirst)++].sum = sum->sums[b];
		}
	/* what a values digest cost (tests/e2e/values_settings.py counts them) */
	ereport(DEBUG1, (errmsg("magic_sync: values of table \"%s\" compared for replica %s: %llu rows read",
							t->name, f->replica_text, (unsigned long long) rows)));
	/* a held row the table no longer has: a change on its way after all */
	return rows == count && walked;
}

/*
 * walk: each row sql reads ($1.. of types and values), its first column a
 * held key and the table's columns after it as rows_sql reads them, hashed
 */
static bool
walk(ms_filed_table *ft, const char *sql, int nargs, Oid *types, Datum *values,
	 ms_values_row fn, void *arg, uint64 *nrows)
{
	const ms_table *t = ft->t;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "magic_sync values digest",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = CurrentMemoryContext;
	ms_digest_value *vals = palloc(sizeof(ms_digest_value) * Max(t->ncolumns, 1));
	SPIPlanPtr	plan;
	Portal		portal;
	ms_as_owner as;
	int			nest;
	uint64		rows = 0;
	bool		unwalked = false;

	/* sync.held checked as sync.file's owner, the table read as its own (owner.h) */
	plan = ms_owner_prepare(sql, nargs, types, GetUserId());
	/* values written as the relay writes them, not as this filing session would (load.h) */
	nest = ms_output_pin();
	ms_owner_begin(&as, t->relid);
	portal = SPI_cursor_open(NULL, plan, values, NULL, true);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		MemoryContextSwitchTo(cxt);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			char	   *key = SPI_getvalue(tup, desc, 1);
			size_t		klen = strlen(key);
			uint64_t	h = ms_digest_row_begin(key, klen);
			int			at = 2;

			if (t->proto)
			{
				StringInfoData row;
				char		reason[MS_REASON_MAX];

				initStringInfo(&row);
				ms_encode_proto(t, tup, desc, 2, &row);
				for (int c = 0; c < t->ncolumns; c++)
					vals[c] = (ms_digest_value) {MS_DV_NULL, 0, 0, NULL, 0};
				/* a row no replica takes (TEXT not UTF-8 in a SQL_ASCII database): refused, or to be */
				if (!ms_row_walk(&ft->shape, (const uint8_t *) row.data, (size_t) row.len,
								 proto_value, vals, reason))
					unwalked = true;
			}
			for (int c = 0; c < t->ncolumns; c++)
			{
				if (!counted(t, c))
					continue;
				if (!t->proto)
					vals[c] = json_value(t->columns[c].sqlite_type, SPI_getvalue(tup, desc, at++));
				h = ms_digest_row_value(h, &vals[c]);
			}
			/* the caller's memory, not the row's */
			MemoryContextSwitchTo(old);
			fn(arg, key, klen, ms_digest_row_end(h));
			MemoryContextSwitchTo(cxt);
			rows++;
			MemoryContextReset(cxt);
		}
		MemoryContextSwitchTo(old);
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	ms_owner_end(&as);
	AtEOXact_GUC(true, nest);
	MemoryContextDelete(cxt);
	*nrows = rows;
	return !unwalked;
}

bool
ms_values_walk(ms_filing *f, ms_filed_table *ft, ms_values_row fn, void *arg, uint64 *nrows)
{
	Oid			types[2] = {UUIDOID, INT4OID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), Int32GetDatum(ft->t->id)};

	return walk(ft, rows_sql(ft->t), 2, types, values, fn, arg, nrows);
}

bool
ms_values_walk_keys(ms_filed_table *ft, Datum keys, ms_values_row fn, void *arg, uint64 *nrows)
{
	Oid			types[1] = {TEXTARRAYOID};
	Datum		values[1] = {keys};

	return walk(ft, keys_sql(ft->t), 1, types, values, fn, arg, nrows);
}

/* rest: t's values of this replica not compared again for magic_sync.values_repair_interval */
void
ms_values_rest(ms_filing *f, ms_filed_table *ft)
{
	Oid			types[2] = {UUIDOID, INT4OID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), Int32GetDatum(ft->t->id)};

	/* a replica without the table's row (provisioned by 0.1) is not rested: ms_values_repairing bounds it */
	if (ms_catalog_has_column("replica_tables", "values_repaired"))
		ms_spi_check(SPI_execute_with_args("UPDATE sync.replica_tables SET values_repaired = pg_catalog.now()"
										   " WHERE replica = $1 AND tab = $2",
										   2, types, values, NULL, false, 0), SPI_OK_UPDATE,
					 "could not record when table \"%s\" was repaired", ft->t->name);
}

void
ms_values_repair(ms_filing *f, ms_filed_table *ft)
{
	ms_values_repair_keys(f, ft, (Datum) 0);
}

void
ms_values_repair_keys(ms_filing *f, ms_filed_table *ft, Datum keys)
{
	Oid			types[3] = {UUIDOID, INT4OID, TEXTARRAYOID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int32GetDatum(ft->t->id), keys};

	/*
	 * Held as refused, due at once: the next pass sends each to this replica
	 * alone, and its acknowledgement ends it (relay/retry.c, record.c).
	 * Range repair (range.c) names the rows whose values differ; otherwise
	 * every row held.
	 */
	ms_spi_check(SPI_execute_with_args(keys != (Datum) 0 ?
									   "WITH h AS (UPDATE sync.held SET refused = " REPAIR_REASON
									   "            WHERE replica = $1 AND tab = $2 AND key = ANY ($3) AND refused IS NULL AND taken IS NULL"
									   "            RETURNING key, note)"
									   " INSERT INTO sync.refused_rows AS r (replica, tab, key, note, due)"
									   " SELECT $1, $2, h.key, h.note, pg_catalog.now() FROM h"
									   " ON CONFLICT (replica, tab, key) DO UPDATE SET due = pg_catalog.now(), note = excluded.note" :
									   "WITH h AS (UPDATE sync.held SET refused = " REPAIR_REASON
									   "            WHERE replica = $1 AND tab = $2 AND refused IS NULL AND taken IS NULL"
									   "            RETURNING key, note)"
									   " INSERT INTO sync.refused_rows AS r (replica, tab, key, note, due)"
									   " SELECT $1, $2, h.key, h.note, pg_catalog.now() FROM h"
									   " ON CONFLICT (replica, tab, key) DO UPDATE SET due = pg_catalog.now(), note = excluded.note",
									   keys != (Datum) 0 ? 3 : 2, types, values, NULL, false, 0), SPI_OK_INSERT,
				 "could not mark the rows of table \"%s\" to send again", ft->t->name);
	ms_values_rest(f, ft);
	ms_wake_at_commit();
}
