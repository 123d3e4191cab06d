/*-------------------------------------------------------------------------
 * load.c
 *	  Loading and encoding rows in their table's codec (docs/protocol.md 4).
 *
 * Each chunk is one query run in a subtransaction of its own: when a chunk
 * fails for good, its rows are tried one by one, so a row that cannot go is
 * named and set aside, and nothing else waits for it.  What the relay holds
 * in memory is one chunk, whatever the plan sends.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

#include "fields.h"
#include "key.h"
#include "keys.h"
#include "load.h"
#include "owner.h"
#include "plan.h"
#include "subxact.h"
#include "pbwrite.h"
#include "settings.h"

void
ms_encode_key(StringInfo out, const char *key, int keylen)
{
	size_t		pos = 0;
	const char *part;
	size_t		plen;

	while (ms_key_next_part(key, keylen, &pos, &part, &plen) == 1)
	{
		enlargeStringInfo(out, (int) ms_pb_len_field_size(MS_FIELD_KEY_PARTS, plen));
		out->len += (int) ms_pb_len_field((uint8_t *) out->data + out->len, MS_FIELD_KEY_PARTS, part, plen);
	}
}

/*
 * t's mirrored columns of alias, as a select list; spell: a column a
 * replica compares as a key in its key spelling (keys.h; a numeric stays
 * one, a date or time becomes text), so that its text there is its key part
 */
static char *
columns_of(const ms_table *t, const char *alias, bool spell)
{
	StringInfoData cols;

	initStringInfo(&cols);
	for (int c = 0; c < t->ncolumns; c++)
	{
		const ms_column *col = &t->columns[c];
		ms_key_kind kind = spell && col->spelled ? ms_key_kind_of(col->type) : MS_KEY_TEXT;

		if (kind == MS_KEY_NUMERIC)
			appendStringInfo(&cols, "%spg_catalog.trim_scale(%s.%s) AS %s", c ? ", " : "", alias, col->quoted,
							 col->quoted);
		else if (ms_key_spelled(kind))
			appendStringInfo(&cols, "%ssync.key_text(%s.%s) AS %s", c ? ", " : "", alias, col->quoted, col->quoted);
		else
			appendStringInfo(&cols, "%s%s.%s", c ? ", " : "", alias, col->quoted);
	}
	return cols.data;
}

char *
ms_load_columns(const ms_table *t, const char *alias)
{
	return columns_of(t, alias, true);
}

/*
 * What row_to_json makes of a column of these types, written here rather
 * than by row_to_json (json.c's datum_to_json): a boolean, a number (its
 * text, or quoted when that is no JSON number: NaN, Infinity), a string
 * (its text, quoted).  row_to_json looked each column's category up again
 * for every row, and a first sync's pass spent a third of its reading in it.
 */
typedef enum json_kind
{
	JSON_OTHER,					/* row_to_json's */
	JSON_BOOL,
	JSON_NUMBER,
	JSON_STRING
} json_kind;

static json_kind
json_kind_of(Oid base_type)
{
	switch (base_type)
	{
		case BOOLOID:
			return JSON_BOOL;
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
			return JSON_NUMBER;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case UUIDOID:
			return JSON_STRING;
		default:
			return JSON_OTHER;
	}
}

/* whether load.c writes t's json rows itself: every mirrored column of a kind above */
static bool
json_written(const ms_table *t)
{
	if (t->proto)
		return false;
	for (int c = 0; c < t->ncolumns; c++)
		if (json_kind_of(t->columns[c].base_type) == JSON_OTHER)
			return false;
	return true;
}

/* a row r of t's mirrored columns in its codec: its columns (proto, json written here), or its json */
static char *
payload(const ms_table *t)
{
	return t->proto || json_written(t) ? columns_of(t, "r", false) : "pg_catalog.row_to_json(r)::pg_catalog.text";
}

/* How a chunk's json rows are written: each column's output function, and its name as a key. */
typedef struct json_writer
{
	FmgrInfo   *out;
	char	  **keys;			/* ,"name": (the first without its comma) */
	json_kind  *kinds;
} json_writer;

static void
json_writer_init(const ms_table *t, json_writer *w)
{
	w->out = palloc(sizeof(FmgrInfo) * t->ncolumns);
	w->keys = palloc(sizeof(char *) * t->ncolumns);
	w->kinds = palloc(sizeof(json_kind) * t->ncolumns);
	for (int c = 0; c < t->ncolumns; c++)
	{
		StringInfoData key;
		Oid			fn;
		bool		varlena;

		initStringInfo(&key);
		if (c > 0)
			appendStringInfoChar(&key, ',');
		escape_json(&key, t->columns[c].name);
		appendStringInfoChar(&key, ':');
		w->keys[c] = key.data;
		w->kinds[c] = json_kind_of(t->columns[c].base_type);
		getTypeOutputInfo(t->columns[c].base_type, &fn, &varlena);
		fmgr_info(fn, &w->out[c]);
	}
}

/*
 * escape_json's string: one with nothing to escape (no quote, backslash or
 * control character) in one piece, rather than a character at a time
 */
static void
json_string(StringInfo out, const char *s)
{
	const char *q = s;

	while (*q != '\0' && (unsigned char) *q >= ' ' && *q != '"' && *q != '\\')
		q++;
	if (*q != '\0')
	{
		escape_json(out, s);
		return;
	}
	enlargeStringInfo(out, (int) (q - s) + 2);
	out->data[out->len++] = '"';
	memcpy(out->data + out->len, s, q - s);
	out->len += (int) (q - s);
	out->data[out->len++] = '"';
	out->data[out->len] = '\0';
}

/* a uuid as uuid_out writes it, quoted: uuid_out appends it a character at a time */
static void
json_uuid(StringInfo out, const pg_uuid_t *u)
{
	static const char hex[] = "0123456789abcdef";
	char	   *o;

	enlargeStringInfo(out, 2 + 36);
	o = out->data + out->len;
	*o++ = '"';
	for (int i = 0; i < UUID_LEN; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*o++ = '-';
		*o++ = hex[u->data[i] >> 4];
		*o++ = hex[u->data[i] & 0x0f];
	}
	*o++ = '"';
	*o = '\0';
	out->len += 2 + 36;
}

/* the row as row_to_json writes it, of the result's columns from values, nulls on (json_written(t)) */
static void
encode_json(const ms_table *t, const json_writer *w, const Datum *values, const bool *nulls, StringInfo out)
{
	appendStringInfoChar(out, '{');
	for (int c = 0; c < t->ncolumns; c++)
	{
		bool		isnull = nulls[c];
		Datum		d = values[c];
		char	   *s;

		appendStringInfoString(out, w->keys[c]);
		if (isnull)
		{
			appendStringInfoString(out, "null");
			continue;
		}
		if (w->kinds[c] == JSON_BOOL)
		{
			appendStringInfoString(out, DatumGetBool(d) ? "true" : "false");
			continue;
		}
		/* integers and uuids written in place, as their output functions write them, nothing allocated */
		switch (t->columns[c].base_type)
		{
			case INT2OID:
			case INT4OID:
			case INT8OID:
				enlargeStringInfo(out, MAXINT8LEN + 1);
				out->len += pg_lltoa(t->columns[c].base_type == INT2OID ? DatumGetInt16(d) :
									 t->columns[c].base_type == INT4OID ? DatumGetInt32(d) : DatumGetInt64(d),
									 out->data + out->len);
				continue;
			case UUIDOID:
				json_uuid(out, DatumGetUUIDP(d));
				continue;
			default:
				break;
		}
		s = OutputFunctionCall(&w->out[c], d);
		if (w->kinds[c] == JSON_NUMBER && IsValidJsonNumber(s, strlen(s)))
			appendStringInfoString(out, s);
		else
			json_string(out, s);
		pfree(s);
	}
	appendStringInfoChar(out, '}');
}

/*
 * the query loading the rows of table $1 after key $2 in key order, with the
 * replicas that get each; with a limit, at most $3 of them
 */
static char *
load_query(ms_table *t, bool limited, bool one_replica)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT k.key, k.replicas, k.replacing, %s", payload(t));
	/* one replica planned: a row of ms_send per key, nothing to group */
	/* the key's parts computed once a key (kp1, ...), not once a row of a table read whole */
	if (one_replica)
		appendStringInfo(&sql,
						 " FROM (SELECT s.key, ARRAY[s.replica] AS replicas,"
						 " CASE WHEN s.replace THEN ARRAY[s.replica] END AS replacing%s FROM pg_temp.ms_send s"
						 " WHERE s.tab = $1 AND s.key > $2 ORDER BY s.key%s) k",
						 ms_key_parts_out(t, "s.key"), limited ? " LIMIT $3" : "");
	else
		appendStringInfo(&sql,
						 " FROM (SELECT s.key, array_agg(s.replica) AS replicas,"
						 " array_agg(s.replica) FILTER (WHERE s.replace) AS replacing%s FROM pg_temp.ms_send s"
						 " WHERE s.tab = $1 AND s.key > $2 GROUP BY s.key ORDER BY s.key%s) k",
						 ms_key_parts_out(t, "s.key"), limited ? " LIMIT $3" : "");
	/* the mirrored columns only, looked up by key in key order: no hash, no sort */
	appendStringInfo(&sql, " CROSS JOIN LATERAL (SELECT %s FROM %s t WHERE %s OFFSET 0) r",
					 columns_of(t, "t", true), t->qualified, ms_key_match_parts(t, "t", "k"));
	appendStringInfoString(&sql, " ORDER BY k.key");
	return sql.data;
}

/*
 * whether a table read whole has its canonical keys written here, from the
 * row's own key columns, rather than by ms_key_expr in the query: keys of
 * integers only (their text is their decimal, as int8out writes it), in a
 * row written here (proto, or json_written), whose columns hold them.  The
 * expression cost 0.3-0.5 s of a 10^6-row snapshot's 0.2 s read (int8out
 * twice, int4out, two text concatenations a row).
 */
static bool
keys_written(const ms_table *t)
{
	if (!t->proto && !json_written(t))
		return false;
	for (int k = 0; k < t->nkey; k++)
	{
		Oid			type = t->columns[t->key[k]].type;

		if (type != INT2OID && type != INT4OID && type != INT8OID)
			return false;
	}
	return t->nkey > 0;
}

/*
 * the canonical key of a row whose key columns are integers (keys_written):
 * each part's length in bytes, a colon, its decimal, as ms_key_expr spells it
 */
static char *
key_of_ints(const ms_table *t, const Datum *values, const bool *nulls, int *len)
{
	/* a part: up to 20 characters, its length in two, a colon */
	char		key[INDEX_MAX_KEYS * (MAXINT8LEN + 4)];
	int			at = 0;

	if (t->nkey > INDEX_MAX_KEYS)
		elog(ERROR, "magic_sync: table \"%s\" has a key of %d columns", t->name, t->nkey);
	for (int k = 0; k < t->nkey; k++)
	{
		int			c = t->key[k];
		Oid			type = t->columns[c].type;
		char		digits[MAXINT8LEN + 1];
		int			n;

		if (nulls[c])
			elog(ERROR, "magic_sync: a key column of table \"%s\" is NULL", t->name);
		n = pg_lltoa(type == INT2OID ? DatumGetInt16(values[c]) :
					 type == INT4OID ? DatumGetInt32(values[c]) : DatumGetInt64(values[c]), digits);
		at += pg_ltoa(n, key + at);
		key[at++] = ':';
		memcpy(key + at, digits, n);
		at += n;
	}
	*len = at;
	return pnstrdup(key, at);
}

/*
 * the query reading every row of table t not blocked: one sequential read,
 * in the order of the table.  No row names its replicas: each goes to all
 * the caller provisions (a copy of their array a row would be 16 bytes a
 * replica a row: 160 MB a chunk for 10,000 replicas).  Its key NULL when
 * written here (keys_written).
 */
static char *
whole_query(ms_table *t, bool blocked)
{
	/* r: the mirrored columns only, by their names, as load_query's row */
	return psprintf("SELECT %s, NULL::pg_catalog.uuid[], NULL::pg_catalog.uuid[], %s"
					" FROM %s t CROSS JOIN LATERAL (SELECT %s) r%s",
					keys_written(t) ? "NULL::pg_catalog.text" : ms_key_expr(t, "t"), payload(t), t->qualified,
					columns_of(t, "t", true), ms_whole_filter(t, blocked));
}

int
ms_output_pin(void)
{
	int			nest = NewGUCNestLevel();

	(void) set_config_option("DateStyle", "ISO, YMD", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("IntervalStyle", "postgres", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("TimeZone", "UTC", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("extra_float_digits", "3", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("bytea_output", "hex", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("lc_monetary", "C", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nest;
}

/* proto codec: the row as a message whose fields are its columns (NULL: absent) */
void
ms_encode_proto(const ms_table *t, HeapTuple tup, TupleDesc desc, int first, StringInfo out)
{
	for (int c = 0; c < t->ncolumns; c++)
	{
		ms_column  *col = &t->columns[c];
		bool		isnull;
		Datum		d = SPI_getbinval(tup, desc, c + first, &isnull);
		uint32		field = (uint32) col->field;

		if (isnull)
			continue;
		enlargeStringInfo(out, 32);
		/* a domain travels as its base type, as the schema and sync.proto say */
		switch (col->base_type)
		{
			case INT2OID:
			case INT4OID:
			case INT8OID:
			case BOOLOID:
				{
					int64		v = col->base_type == INT2OID ? DatumGetInt16(d) :
						col->base_type == INT4OID ? DatumGetInt32(d) :
						col->base_type == BOOLOID ? (DatumGetBool(d) ? 1 : 0) : DatumGetInt64(d);

					out->len += (int) ms_pb_varint_field((uint8_t *) out->data + out->len,
														 field, ms_pb_zigzag(v));
					break;
				}
			case FLOAT4OID:
			case FLOAT8OID:
				out->len += (int) ms_pb_double_field((uint8_t *) out->data + out->len, field,
													 col->base_type == FLOAT4OID ?
													 (double) DatumGetFloat4(d) : DatumGetFloat8(d));
				break;
			case BYTEAOID:
				{
					bytea	   *b = DatumGetByteaPP(d);
					size_t		n = VARSIZE_ANY_EXHDR(b);

					enlargeStringInfo(out, (int) ms_pb_len_field_size(field, n));
					out->len += (int) ms_pb_len_field((uint8_t *) out->data + out->len,
													  field, VARDATA_ANY(b), n);
					break;
				}
			default:
				{
					char	   *s = SPI_getvalue(tup, desc, c + first);
					size_t		n = strlen(s);

					enlargeStringInfo(out, (int) ms_pb_len_field_size(field, n));
					out->len += (int) ms_pb_len_field((uint8_t *) out->data + out->len, field, s, n);
					break;
				}
		}
	}
}

/* A chunk of rows, encoded, copied out of SPI's memory. */
typedef struct chunk
{
	int			n;
	ms_row	   *rows;
	char	   *last;			/* the last key read */
} chunk;

/* an array of uuids from a result column, copied: *n of them */
static pg_uuid_t *
copy_uuids(Datum d, int *n)
{
	ArrayType  *a = DatumGetArrayTypeP(d);
	pg_uuid_t  *out;

	*n = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
	out = palloc(sizeof(pg_uuid_t) * Max(*n, 1));
	memcpy(out, ARR_DATA_PTR(a), sizeof(pg_uuid_t) * *n);
	/* a short array was copied to be read: that copy goes at once */
	if ((Pointer) a != DatumGetPointer(d))
		pfree(a);
	return out;
}

/*
 * copy_chunk: encode the rows of the last result into c, then free the result.
 * Each row is encoded into one buffer kept across rows and copied out at its
 * size: a buffer of its own would be 1 kB a row, and the chunk's memory,
 * given back at each chunk's end, is then faulted in again at the next.
 */
static void
copy_chunk(ms_table *t, chunk *c)
{
	StringInfoData buf;
	bool		json = json_written(t);
	json_writer w = {0};
	TupleDesc	desc = SPI_tuptable ? SPI_tuptable->tupdesc : NULL;
	/* each row's columns taken apart once: a column after a varlena was looked for again per column */
	Datum	   *values = palloc(sizeof(Datum) * (desc ? desc->natts : 1));
	bool	   *nulls = palloc(sizeof(bool) * (desc ? desc->natts : 1));

	c->n = (int) SPI_processed;
	c->rows = palloc(sizeof(ms_row) * Max(c->n, 1));
	initStringInfo(&buf);
	if (json)
		json_writer_init(t, &w);
	for (int i = 0; i < c->n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		text	   *key;
		ms_row	   *row = &c->rows[i];
		char	   *bytes;

		heap_deform_tuple(tup, desc, values, nulls);
		if (nulls[0])
		{
			/* a table read whole: its key from its integer columns (whole_query) */
			if (!keys_written(t))
				elog(ERROR, "magic_sync: a row of table \"%s\" was read without its key", t->name);
			row->key = key_of_ints(t, values + 3, nulls + 3, &row->keylen);
		}
		else
		{
			key = DatumGetTextPP(values[0]);
			row->keylen = VARSIZE_ANY_EXHDR(key);
			row->key = pnstrdup(VARDATA_ANY(key), row->keylen);
		}
		/* none: a table read whole, whose every row goes to the replicas the caller knows */
		row->nreplicas = 0;
		row->replicas = nulls[1] ? NULL : copy_uuids(values[1], &row->nreplicas);
		row->nreplacing = 0;
		row->replacing = nulls[2] ? NULL : copy_uuids(values[2], &row->nreplacing);
		resetStringInfo(&buf);
		if (t->proto)
			ms_encode_proto(t, tup, desc, 4, &buf);
		else if (json)
			encode_json(t, &w, values + 3, nulls + 3, &buf);
		else
		{
			text	   *json = DatumGetTextPP(values[3]);

			appendBinaryStringInfo(&buf, VARDATA_ANY(json), VARSIZE_ANY_EXHDR(json));
		}
		bytes = palloc(Max(buf.len, 1));
		memcpy(bytes, buf.data, buf.len);
		row->bytes = bytes;
		row->len = buf.len;
		if (i == c->n - 1)
			c->last = (char *) row->key;
	}
	pfree(buf.data);
	pfree(values);
	pfree(nulls);
	/* everything is copied out: the chunk's result goes now, not at the pass's end */
	SPI_freetuptable(SPI_tuptable);
}

/*
 * load_chunk: read and encode up to limit rows into c, from the cursor, or
 * (cur NULL) by running plan after key `after`.  Raises any error; emits
 * nothing, so a failed chunk leaves no trace.  The rows are read as t's
 * owner in a relay pass (a cast of theirs to json runs as they read).
 */
static void
load_chunk(ms_pass *p, ms_table *t, Portal cur, SPIPlanPtr plan, const char *after, int limit, chunk *c)
{
	MemoryContext cxt = CurrentMemoryContext;
	ms_as_owner as;
	int			nest = ms_output_pin();

	ms_owner_begin(&as, MS_OWNER_OF(p, t->relid));
	if (cur != NULL)
	{
		SPI_cursor_fetch(cur, true, limit);
		MemoryContextSwitchTo(cxt);
	}
	else
	{
		Datum		values[3];

		values[0] = Int32GetDatum(t->id);
		values[1] = CStringGetTextDatum(after);
		values[2] = Int64GetDatum(limit);
		ms_run(&p->exec, plan, values, NULL, 0);
	}
	ms_owner_end(&as);
	copy_chunk(t, c);
	AtEOXact_GUC(true, nest);
}

/* a chunk to load, for ms_try */
typedef struct chunk_job
{
	ms_pass    *p;
	ms_table   *t;
	Portal		cur;
	SPIPlanPtr	plan;
	const char *after;
	int			limit;
	chunk	   *c;
} chunk_job;

static void
chunk_job_run(void *arg)
{
	chunk_job  *j = arg;

	load_chunk(j->p, j->t, j->cur, j->plan, j->after, j->limit, j->c);
}

/* try_chunk: load_chunk in a subtransaction: false, with the error, when it failed for good */
static bool
try_chunk(ms_pass *p, ms_table *t, Portal cur, SPIPlanPtr plan, const char *after, int limit,
		  chunk *c, ErrorData **err)
{
	chunk_job	j = {p, t, cur, plan, after, limit, c};

	return ms_try(chunk_job_run, &j, err);
}

static void
add_bad(ms_pass *p, List **bad, int tab, const char *key, const char *reason, int sqlerrcode)
{
	MemoryContext old = MemoryContextSwitchTo(p->exec.cxt);
	ms_bad	   *b = palloc(sizeof(ms_bad));

	b->tab = tab;
	b->key = pstrdup(key);
	b->reason = pstrdup(reason);
	b->sqlerrcode = sqlerrcode;
	*bad = lappend(*bad, b);
	MemoryContextSwitchTo(old);
}

/* emit the rows of a chunk that loaded; a row no message can carry is bad */
static void
emit_chunk(ms_pass *p, ms_table *t, chunk *c, ms_emit emit, void *arg, List **bad)
{
	for (int i = 0; i < c->n; i++)
	{
		const char *why = emit(arg, t, &c->rows[i]);

		if (why != NULL)
			add_bad(p, bad, t->id, c->rows[i].key, why, ERRCODE_PROGRAM_LIMIT_EXCEEDED);
	}
}

/*
 * load_cursor: open sql (with these arguments) as t's owner, and emit its
 * rows a chunk at a time, each loaded in cxt, reset before each; false, with
 * *err (in cxt), when a chunk failed for good.  *last, when last is not
 * NULL, is then the last key of the rows emitted (in p->exec.cxt).
 */
static bool
load_cursor(ms_pass *p, ms_table *t, const char *sql, int nargs, Oid *types, Datum *values,
			MemoryContext cxt, ms_emit emit, void *arg, List **bad, char **last, ErrorData **err)
{
	ms_as_owner as;
	Portal		cur;

	/* planned and started as the owner, as each chunk is read */
	ms_owner_begin(&as, MS_OWNER_OF(p, t->relid));
	cur = ms_open(&p->exec, sql, nargs, types, values, NULL);
	ms_owner_end(&as);
	for (;;)
	{
		chunk		c = {0, NULL, NULL};

		/* what the relay holds in memory is one chunk */
		MemoryContextReset(cxt);
		if (!try_chunk(p, t, cur, NULL, NULL, ms_chunk_rows, &c, err))
			break;
		if (c.n == 0)
			break;
		emit_chunk(p, t, &c, emit, arg, bad);
		if (last != NULL)
			*last = MemoryContextStrdup(p->exec.cxt, c.last);
	}
	SPI_cursor_close(cur);
	return *err == NULL;
}

void
ms_load_table(ms_pass *p, ms_table *t, bool one_replica, ms_emit emit, void *arg, List **bad)
{
	Oid			types[3] = {INT4OID, TEXTOID, INT8OID};
	char	   *all = load_query(t, false, one_replica);
	SPIPlanPtr	one;
	ms_as_owner as_one;
	SPIPlanPtr	keys = ms_prepare_kept(&p->exec, "SELECT DISTINCT key FROM pg_temp.ms_send WHERE tab = $1 AND key > $2"
								  " ORDER BY key LIMIT $3", 3, types);
	char	   *after = "";
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "magic_sync load chunk",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old;

	/* it names the table: analysed as the owner, who may see its schema */
	ms_owner_begin(&as_one, MS_OWNER_OF(p, t->relid));
	one = ms_prepare_kept(&p->exec, load_query(t, true, one_replica), 3, types);
	ms_owner_end(&as_one);
	old = MemoryContextSwitchTo(cxt);
	for (;;)
	{
		Datum		values[3];
		ErrorData  *err = NULL;
		int			n;
		char	  **chunk_keys;

		/* one cursor over the table's rows, a chunk at a time */
		values[0] = Int32GetDatum(t->id);
		values[1] = CStringGetTextDatum(after);
		if (load_cursor(p, t, all, 2, types, values, cxt, emit, arg, bad, &after, &err))
			break;

		/* the chunk failed for good: find the rows that do not encode, one by one */
		values[1] = CStringGetTextDatum(after);
		values[2] = Int64GetDatum(ms_chunk_rows);
		ms_run(&p->exec, keys, values, NULL, 0);
		n = (int) SPI_processed;
		if (n == 0)
			ReThrowError(err);
		/* the error is in cxt: freed only once it is not raised */
		MemoryContextReset(cxt);
		chunk_keys = palloc(sizeof(char *) * n);
		for (int i = 0; i < n; i++)
			chunk_keys[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		SPI_freetuptable(SPI_tuptable);
		for (int i = 0; i < n; i++)
		{
			chunk		row = {0, NULL, NULL};
			ErrorData  *rowerr = NULL;

			if (try_chunk(p, t, NULL, one, i == 0 ? after : chunk_keys[i - 1], 1, &row, &rowerr))
				emit_chunk(p, t, &row, emit, arg, bad);
			else
				add_bad(p, bad, t->id, chunk_keys[i],
						rowerr->message ? rowerr->message : "it does not encode", rowerr->sqlerrcode);
		}
		after = MemoryContextStrdup(p->exec.cxt, chunk_keys[n - 1]);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

void
ms_load_whole(ms_pass *p, ms_table *t, bool blocked, ms_emit emit, void *arg, List **bad, bool *failed)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "magic_sync load chunk",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	ErrorData  *err = NULL;

	bool		loaded = load_cursor(p, t, whole_query(t, blocked), 0, NULL, NULL, cxt, emit, arg, bad, NULL, &err);

	MemoryContextSwitchTo(old);
	if (!loaded)
	{
		/* which row fails is found row by row, through the plan: the pass plans again without */
		*failed = true;
		ReThrowError(err);		/* the error is in cxt, freed with the pass */
	}
	MemoryContextDelete(cxt);
}
