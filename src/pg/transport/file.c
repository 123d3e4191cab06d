/*-------------------------------------------------------------------------
 * file.c
 *	  sync.file(replica, upload, sender): filing what a replica says (seed 5).
 *
 * In one transaction, trusting only what the server knows of the sender (the
 * replica argument, checked against the caller's role), never what the rows
 * claim:
 *
 *   acknowledgement  the last message applied, its seal checked in constant
 *                    time: what it carried counts as held, the outbox is
 *                    trimmed through it.  A seal the server never made, or
 *                    made for a message it has no record of, begins a new
 *                    epoch; a replica that applied less than it said before
 *                    was restored and is provisioned again; so is one that
 *                    reports a gap no snapshot on its way covers.
 *   refusals         rows the replica could not take are not counted as held.
 *   rows             each filed in a subtransaction of its own (file_row):
 *                    filed, refused (it never can be), dropped (the server's
 *                    change wins), waiting, or set aside in the inbox (it
 *                    failed for good: retried after a fix).
 *   digests          compared with what the server records, once the replica
 *                    applied every message recorded for it.
 *   answer           a Filed for the send, queued for sync.pull; it is seen
 *                    only once this transaction commits.
 *
 * Filing the same upload twice changes nothing the second time: its answer
 * is found by send id.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

#include "access.h"
#include "catalog.h"
#include "digest.h"
#include "epoch.h"
#include "key.h"
#include "pbwrite.h"
#include "settings.h"
#include "subxact.h"
#include "wire.h"

PG_FUNCTION_INFO_V1(ms_file);
PG_FUNCTION_INFO_V1(ms_inbox_retry);

typedef enum outcome
{
	FILED,
	REFUSED,					/* it never can be: told to the replica */
	DROPPED,					/* the server's change wins */
	WAITS,						/* kept in the inbox until the replica holds the row */
	SET_ASIDE					/* failed for good: kept in the inbox, retried after a fix */
} outcome;

typedef struct filing
{
	pg_uuid_t	replica;
	char	   *replica_text;
	Datum		sender;			/* jsonb, or 0 */
	List	   *tables;
	ms_epoch	epoch;
	int64		acked;			/* what the replica applied, after this upload's acknowledgement */
	bool		provisioning;	/* it is being provisioned again: held rows are on their way */
	int			counts[5];
	List	   *refused;		/* Sync__Refusal * for the answer */
} filing;

static const char *const outcome_names[] = {"filed", "refused", "dropped", "waiting", "set_aside"};

static bytea *
to_bytea(const void *data, size_t len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	if (len > 0)
		memcpy(VARDATA(b), data, len);
	return b;
}

static ms_table *
table_named(filing *f, const char *name)
{
	ListCell   *lc;

	foreach(lc, f->tables)
	{
		ms_table   *t = lfirst(lc);

		if (strcmp(t->name, name) == 0)
			return t;
	}
	return NULL;
}

/*
 * server_column: a column the server fills itself (generated, created, the
 * sender stamp): an upload may carry it, and it is ignored.
 */
static bool
server_column(ms_table *t, int c)
{
	for (int g = 0; g < t->ngenerated; g++)
		if (t->generated[g] == c)
			return true;
	return c == t->created || (t->sender && strcmp(t->columns[c].name, t->sender) == 0);
}

/* ---- codecs, the server's way up: a row as a JSON object of its columns ---- */

/* proto codec: a message whose fields are the columns (protocol 4), as JSON */
static bool
proto_to_json(ms_table *t, const uint8 *b, size_t len, StringInfo out, char **why)
{
	size_t		pos = 0;
	bool		first = true;

	appendStringInfoChar(out, '{');
	while (pos < len)
	{
		uint64		tag;
		uint64		v;
		ms_column  *col = NULL;

		if (!ms_pb_read_varint(b, len, &pos, &tag))
		{
			*why = "the row is not a well-formed protobuf message";
			return false;
		}
		for (int c = 0; c < t->ncolumns; c++)
			if ((uint64) t->columns[c].field == (tag >> 3))
				col = &t->columns[c];
		if (col == NULL)
		{
			*why = psprintf("the row has field %llu, which is no column of table \"%s\"",
							(unsigned long long) (tag >> 3), t->name);
			return false;
		}
		if (!first)
			appendStringInfoChar(out, ',');
		first = false;
		escape_json(out, col->name);
		appendStringInfoChar(out, ':');
		if (col->sqlite_type == MS_SQLITE_INTEGER && (tag & 7) == 0 && ms_pb_read_varint(b, len, &pos, &v))
			appendStringInfo(out, INT64_FORMAT, (int64) ((v >> 1) ^ (~(v & 1) + 1)));
		else if (col->sqlite_type == MS_SQLITE_REAL && (tag & 7) == 1 && len - pos >= 8)
		{
			uint64		bits = 0;
			double		d;

			for (int i = 0; i < 8; i++)
				bits |= (uint64) b[pos + i] << (8 * i);
			pos += 8;
			memcpy(&d, &bits, sizeof d);
			if (isnan(d) || isinf(d))
				appendStringInfo(out, "\"%s\"", isnan(d) ? "NaN" : (d > 0 ? "Infinity" : "-Infinity"));
			else
				appendStringInfo(out, "%.17g", d);
		}
		else if ((col->sqlite_type == MS_SQLITE_TEXT || col->sqlite_type == MS_SQLITE_BLOB) &&
				 (tag & 7) == 2 && ms_pb_read_varint(b, len, &pos, &v) && v <= len - pos)
		{
			if (col->sqlite_type == MS_SQLITE_TEXT)
			{
				char	   *s = pnstrdup((const char *) b + pos, v);

				if (!ms_utf8_valid(s, v))
				{
					*why = psprintf("column \"%s\" is not valid UTF-8", col->name);
					return false;
				}
				escape_json(out, s);
			}
			else
			{
				static const char digits[] = "0123456789abcdef";

				appendStringInfoString(out, "\"\\\\x");
				for (uint64 i = 0; i < v; i++)
				{
					appendStringInfoChar(out, digits[b[pos + i] >> 4]);
					appendStringInfoChar(out, digits[b[pos + i] & 15]);
				}
				appendStringInfoChar(out, '"');
			}
			pos += v;
		}
		else
		{
			*why = psprintf("column \"%s\" has the wrong wire type or is truncated", col->name);
			return false;
		}
	}
	appendStringInfoChar(out, '}');
	return true;
}

/* the row in its codec, as a JSON object; NULL with *why when it does not decode */
static char *
row_json(ms_table *t, const uint8 *b, size_t len, char **why)
{
	StringInfoData out;

	initStringInfo(&out);
	if (t->proto)
		return proto_to_json(t, b, len, &out, why) ? out.data : NULL;
	appendBinaryStringInfo(&out, (const char *) b, (int) len);
	if (len == 0 || b[0] != '{' || !ms_utf8_valid(out.data, len) ||
		pg_parse_json(makeJsonLexContextCstringLen(out.data, (int) len, PG_UTF8, false),
					  &nullSemAction) != JSON_SUCCESS)
	{
		*why = "the row is not a JSON object in UTF-8";
		return NULL;
	}
	return out.data;
}

/* ---- filing one row ---- */

/* key parts as a text[] datum */
static Datum
parts_array(char **parts, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = CStringGetTextDatum(parts[i]);
	return PointerGetDatum(construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * check_row: the upload carries only the columns it may (a catalog's: its key
 * and replica-owned ones), its key columns agree with the key it names, and
 * a record's origin is the replica filing it.  Returns the row as JSON with
 * the key (and origin) filled in, or NULL with *why.
 */
static char *
check_row(filing *f, ms_table *t, const char *json, char **parts, bool two_way, char **why)
{
	Oid			types[4] = {TEXTOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID};
	Datum		values[4];
	int			nnames = t->nkey + (t->origin >= 0 ? 1 : 0);
	char	  **names = palloc(sizeof(char *) * nnames);
	char	  **wanted = palloc(sizeof(char *) * nnames);
	char	  **allowed = palloc(sizeof(char *) * t->ncolumns);
	int			nallowed = 0;
	bool		isnull;
	Datum		d;

	for (int k = 0; k < t->nkey; k++)
	{
		names[k] = t->columns[t->key[k]].name;
		wanted[k] = parts[k];
	}
	if (t->origin >= 0)
	{
		names[t->nkey] = t->columns[t->origin].name;
		wanted[t->nkey] = f->replica_text;
	}
	for (int c = 0; c < t->ncolumns; c++)
		if (server_column(t, c) || !two_way || t->columns[c].key || t->columns[c].replica_owned)
			allowed[nallowed++] = t->columns[c].name;
	values[0] = CStringGetTextDatum(json);
	values[1] = parts_array(names, nnames);
	values[2] = parts_array(wanted, nnames);
	values[3] = parts_array(allowed, nallowed);
	if (SPI_execute_with_args(
							  "WITH r AS (SELECT $1::jsonb AS j) "
							  "SELECT jsonb_typeof(r.j) = 'object',"
							  "       (SELECT string_agg(format('%I', k), ', ') FROM jsonb_object_keys(r.j) k"
							  "         WHERE jsonb_typeof(r.j) = 'object' AND NOT (k = ANY ($4))),"
							  "       (SELECT string_agg(format('%I', n), ', ') FROM unnest($2, $3) AS u(n, p)"
							  "         WHERE jsonb_typeof(r.j) = 'object' AND r.j ? n"
							  "           AND lower(r.j ->> n) IS DISTINCT FROM lower(p)),"
							  "       (r.j || (SELECT jsonb_object_agg(n, p) FROM unnest($2, $3) AS u(n, p)))::text"
							  "  FROM r",
							  4, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read an uploaded row");
	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
	{
		*why = "the row is not a JSON object";
		return NULL;
	}
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (!isnull)
	{
		if (two_way)
			*why = psprintf("the upload carries columns the replica does not own: %s",
							TextDatumGetCString(d));
		else
			*why = psprintf("the upload carries columns table \"%s\" does not mirror: %s",
							t->name, TextDatumGetCString(d));
		return NULL;
	}
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
	if (!isnull)
	{
		*why = psprintf("the row's %s disagree with the key it names, or with the replica filing it",
						TextDatumGetCString(d));
		return NULL;
	}
	{
		char	   *json = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));

		SPI_freetuptable(SPI_tuptable);
		return json;
	}
}

/* the held row of (replica, t, key): found, its number, whether taken, since when */
static bool
held_row(filing *f, ms_table *t, const char *key, int64 *number, bool *taken, int64 *since)
{
	Oid			types[3] = {UUIDOID, INT4OID, TEXTOID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t->id), CStringGetTextDatum(key)};
	bool		isnull;

	if (SPI_execute_with_args("SELECT number, taken IS NOT NULL, since FROM sync.held"
							  " WHERE replica = $1 AND tab = $2 AND key = $3",
							  3, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.held");
	if (SPI_processed == 0)
	{
		SPI_freetuptable(SPI_tuptable);
		return false;
	}
	*number = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*taken = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	*since = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return true;
}

static bool
row_exists(ms_table *t, const char *key)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(key)};
	char	   *sql = psprintf("SELECT 1 FROM %s t WHERE %s", t->qualified, ms_key_match(t, "t", "$1"));
	bool		found;

	if (SPI_execute_with_args(sql, 1, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read table \"%s\"", t->name);
	found = SPI_processed > 0;
	SPI_freetuptable(SPI_tuptable);
	return found;
}

/* the replica holds this version of the row: the newest note of it, at once */
static void
mark_held(filing *f, ms_table *t, const char *key)
{
	Oid			types[3] = {UUIDOID, INT4OID, TEXTOID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t->id), CStringGetTextDatum(key)};

	/* the write just made drew the newest note of the row: the session's last */
	if (SPI_execute_with_args("INSERT INTO sync.held (replica, tab, key, note, number)"
							  " VALUES ($1, $2, $3, currval('sync.note_seq'), 0)"
							  " ON CONFLICT (replica, tab, key) DO UPDATE SET note = EXCLUDED.note,"
							  "   number = 0, taken = NULL, refused = NULL",
							  3, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record a filed row as held");
}

/* the replica's version lost: a note, so every replica holding the row gets the server's */
static void
note_again(ms_table *t, const char *key)
{
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2] = {Int32GetDatum(t->id), CStringGetTextDatum(key)};

	if (SPI_execute_with_args("INSERT INTO sync.notes (tab, key) VALUES ($1, $2)",
							  2, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not note a row");
}

/* a record: kept from its first delivery, or the newest wins by its version */
static outcome
file_record(filing *f, ms_table *t, const char *key, const char *json)
{
	StringInfoData sql;
	StringInfoData cols;
	Oid			types[2] = {TEXTOID, JSONBOID};
	Datum		values[2];
	char		nulls[2] = {' ', ' '};
	bool		taken;

	initStringInfo(&sql);
	initStringInfo(&cols);
	for (int c = 0; c < t->ncolumns; c++)
		if (!server_column(t, c))
			appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", t->columns[c].quoted);
	appendStringInfo(&sql, "INSERT INTO %s AS t (%s", t->qualified, cols.data);
	if (t->created >= 0)
		appendStringInfo(&sql, ", %s", t->columns[t->created].quoted);
	if (t->sender)
		appendStringInfo(&sql, ", %s", quote_identifier(t->sender));
	appendStringInfoString(&sql, ") SELECT ");
	for (int c = 0, n = 0; c < t->ncolumns; c++)
		if (!server_column(t, c))
			appendStringInfo(&sql, "%sr.%s", n++ ? ", " : "", t->columns[c].quoted);
	if (t->created >= 0)
		appendStringInfoString(&sql, ", now()");
	if (t->sender)
		appendStringInfoString(&sql, ", $2");
	appendStringInfo(&sql, " FROM jsonb_populate_record(NULL::%s, $1::jsonb) r ON CONFLICT (", t->qualified);
	for (int k = 0; k < t->nkey; k++)
		appendStringInfo(&sql, "%s%s", k ? ", " : "", t->columns[t->key[k]].quoted);
	if (t->version < 0)
		appendStringInfoString(&sql, ") DO NOTHING");
	else
	{
		appendStringInfoString(&sql, ") DO UPDATE SET ");
		for (int c = 0, n = 0; c < t->ncolumns; c++)
			if (!server_column(t, c) && !t->columns[c].key)
				appendStringInfo(&sql, "%s%s = EXCLUDED.%s", n++ ? ", " : "",
								 t->columns[c].quoted, t->columns[c].quoted);
		if (t->sender)
			appendStringInfo(&sql, ", %s = EXCLUDED.%s", quote_identifier(t->sender),
							 quote_identifier(t->sender));
		appendStringInfo(&sql, " WHERE t.%s < EXCLUDED.%s",
						 t->columns[t->version].quoted, t->columns[t->version].quoted);
	}
	appendStringInfoString(&sql, " RETURNING 1");
	values[0] = CStringGetTextDatum(json);
	values[1] = f->sender;
	if (f->sender == (Datum) 0)
		nulls[1] = 'n';
	if (SPI_execute_with_args(sql.data, 2, types, values, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not file a record");
	taken = SPI_processed > 0;
	SPI_freetuptable(SPI_tuptable);
	if (taken)
		mark_held(f, t, key);
	else
		note_again(t, key);
	return FILED;
}

/*
 * an edit of the replica's is dropped: the replica still has its own value in
 * its copy, so the next time the row goes to it, it replaces the copy whole
 */
static void
replace_next(filing *f, ms_table *t, const char *key)
{
	Oid			types[3] = {UUIDOID, INT4OID, TEXTOID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t->id), CStringGetTextDatum(key)};

	if (SPI_execute_with_args("UPDATE sync.held SET replace = true WHERE replica = $1 AND tab = $2 AND key = $3",
							  3, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not mark a held row");
}

/* a two-way row: only the columns the replica owns, of a row it holds */
static outcome
file_two_way(filing *f, ms_table *t, const char *key, const char *json, char **why)
{
	int64		number;
	bool		taken;
	int64		since;
	StringInfoData sql;
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2];

	if (!row_exists(t, key))
	{
		*why = "the server deleted the row: its change wins";
		replace_next(f, t, key);
		return DROPPED;
	}
	if (!held_row(f, t, key, &number, &taken, &since))
	{
		if (f->provisioning)
		{
			*why = "the replica is being provisioned again: the edit waits until it holds the row";
			return WAITS;
		}
		*why = "the replica was never sent this row: a replica never creates a two-way row";
		return REFUSED;
	}
	if (taken)
	{
		*why = "the server is taking the row back: its change wins";
		replace_next(f, t, key);
		return DROPPED;
	}
	if (since > f->acked)
	{
		/* the replica edited the row as it was before the server deleted and made it again */
		*why = "the server made the row again since the replica's edit: its change wins";
		replace_next(f, t, key);
		return DROPPED;
	}
	initStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE %s t SET ", t->qualified);
	for (int c = 0, n = 0; c < t->ncolumns; c++)
		if (t->columns[c].replica_owned)
			appendStringInfo(&sql, "%s%s = r.%s", n++ ? ", " : "",
							 t->columns[c].quoted, t->columns[c].quoted);
	appendStringInfo(&sql, " FROM jsonb_populate_record(NULL::%s, $1::jsonb) r WHERE %s",
					 t->qualified, ms_key_match(t, "t", "$2"));
	values[0] = CStringGetTextDatum(json);
	values[1] = CStringGetTextDatum(key);
	if (SPI_execute_with_args(sql.data, 2, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not file a two-way row");
	return FILED;
}

/* a record's delete: its copy goes only where the replica applied every message carrying it */
static outcome
file_delete(filing *f, ms_table *t, const char *key, char **why)
{
	int64		number;
	bool		taken;
	int64		since;
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(key)};
	Oid			htypes[3] = {UUIDOID, INT4OID, TEXTOID};
	Datum		hvalues[3] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t->id), CStringGetTextDatum(key)};

	if (held_row(f, t, key, &number, &taken, &since) && number > f->acked)
	{
		*why = "a message carrying the row is on its way to the replica: the server keeps it";
		return DROPPED;
	}
	if (SPI_execute_with_args(psprintf("DELETE FROM %s t WHERE %s", t->qualified,
									   ms_key_match(t, "t", "$1")),
							  1, types, values, NULL, false, 0) != SPI_OK_DELETE ||
		SPI_execute_with_args("DELETE FROM sync.held WHERE replica = $1 AND tab = $2 AND key = $3",
							  3, htypes, hvalues, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not file a delete");
	return FILED;
}

/*
 * file_row_inner: what the rules say of one row; raises what the database
 * says (a constraint refusing it).
 */
static outcome
file_row_inner(filing *f, ms_table *t, char **parts, const char *key,
			   const uint8 *bytes, size_t len, bool del, char **why)
{
	bool		two_way = !t->record;
	char	   *json;

	if (two_way)
	{
		bool		owns = false;

		for (int c = 0; c < t->ncolumns; c++)
			owns |= t->columns[c].replica_owned;
		if (!owns)
		{
			*why = psprintf("table \"%s\" is a catalog: replicas do not write the server's tables", t->name);
			return REFUSED;
		}
		if (del)
		{
			*why = "a replica deletes only its own records";
			return REFUSED;
		}
	}
	else if (t->origin >= 0)
	{
		/* a record's key includes its origin: the replica's own uuid */
		for (int k = 0; k < t->nkey; k++)
			if (t->key[k] == t->origin && pg_strcasecmp(parts[k], f->replica_text) != 0)
			{
				*why = "a replica writes and deletes only its own records";
				return REFUSED;
			}
	}
	if (del)
		return file_delete(f, t, key, why);
	json = row_json(t, bytes, len, why);
	if (json == NULL)
		return REFUSED;
	json = check_row(f, t, json, parts, two_way, why);
	if (json == NULL)
		return REFUSED;
	return two_way ? file_two_way(f, t, key, json, why) : file_record(f, t, key, json);
}

/* a row to file, for ms_try */
typedef struct row_job
{
	filing	   *f;
	ms_table   *t;
	char	  **parts;
	const char *key;
	const uint8 *bytes;
	size_t		len;
	bool		del;
	outcome		out;
	char	   *why;
} row_job;

static void
row_job_run(void *arg)
{
	row_job    *j = arg;

	j->out = file_row_inner(j->f, j->t, j->parts, j->key, j->bytes, j->len, j->del, &j->why);
}

/*
 * file_row: one row in a subtransaction of its own.  A permanent failure is
 * SET_ASIDE with its reason and SQLSTATE; a transient one is raised: the
 * whole filing rolls back and the replica sends it again.
 */
static outcome
file_row(filing *f, ms_table *t, char **parts, const char *key,
		 const uint8 *bytes, size_t len, bool del, char **why, char **sqlstate)
{
	row_job		j = {f, t, parts, key, bytes, len, del, FILED, NULL};
	ErrorData  *err = NULL;

	*sqlstate = NULL;
	if (ms_try(row_job_run, &j, &err))
	{
		*why = j.why;
		return j.out;
	}
	*why = err->message;
	*sqlstate = pstrdup(unpack_sql_state(err->sqlerrcode));
	return SET_ASIDE;
}

/* keep a row that waits or failed for good in the inbox */
static void
inbox_keep(filing *f, ms_table *t, const char *key, const uint8 *bytes, size_t len, bool del,
		   const char *why, const char *sqlstate)
{
	Oid			types[7] = {UUIDOID, INT4OID, TEXTOID, BYTEAOID, JSONBOID, TEXTOID, TEXTOID};
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = Int32GetDatum(t->id);
	values[2] = CStringGetTextDatum(key);
	values[3] = del ? (Datum) 0 : PointerGetDatum(to_bytea(bytes, len));
	values[4] = f->sender;
	values[5] = CStringGetTextDatum(why);
	values[6] = sqlstate ? CStringGetTextDatum(sqlstate) : (Datum) 0;
	if (del)
		nulls[3] = 'n';
	if (f->sender == (Datum) 0)
		nulls[4] = 'n';
	if (sqlstate == NULL)
		nulls[6] = 'n';
	if (SPI_execute_with_args("INSERT INTO sync.inbox (replica, tab, key, row, sender, reason, sqlstate)"
							  " VALUES ($1, $2, $3, $4, $5, $6, $7)"
							  " ON CONFLICT (replica, tab, key) DO UPDATE SET row = EXCLUDED.row,"
							  "   sender = EXCLUDED.sender, reason = EXCLUDED.reason,"
							  "   sqlstate = EXCLUDED.sqlstate, tries = sync.inbox.tries + 1, last_at = now()",
							  7, types, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not keep a row in sync.inbox");
}

static void
add_refusal(filing *f, const char *table, char **parts, int nparts, const char *why)
{
	Sync__Refusal *r = palloc(sizeof(Sync__Refusal));
	Sync__Key  *k = palloc(sizeof(Sync__Key));

	sync__refusal__init(r);
	sync__key__init(k);
	k->n_parts = nparts;
	k->parts = palloc(sizeof(char *) * Max(nparts, 1));
	for (int i = 0; i < nparts; i++)
		k->parts[i] = pstrdup(parts[i]);
	r->table = pstrdup(table);
	r->key = k;
	r->reason = pstrdup(why);
	f->refused = lappend(f->refused, r);
}

/* canonical key of a wire Key */
static char *
canonical(const Sync__Key *k)
{
	char	   *out = palloc(ms_wire_key_size(k) + 1);
	size_t		n = ms_wire_key_write(k, out);

	out[n] = '\0';
	return out;
}

static void
file_rows(filing *f, Sync__Rows *r)
{
	ms_table   *t = table_named(f, r->table);
	size_t		n = r->n_upserts + r->n_deletes;

	for (size_t i = 0; i < n; i++)
	{
		bool		del = i >= r->n_upserts;
		Sync__Key  *k = del ? r->deletes[i - r->n_upserts] : r->keys[i];
		char	   *key = canonical(k);
		char	   *why = NULL;
		char	   *sqlstate = NULL;
		outcome		out;

		if (t == NULL)
		{
			why = psprintf("table \"%s\" is not mirrored", r->table);
			out = REFUSED;
		}
		else if (k->n_parts != (size_t) t->nkey)
		{
			why = psprintf("table \"%s\" has a key of %d parts, not %zu", t->name, t->nkey, k->n_parts);
			out = REFUSED;
		}
		else
			out = file_row(f, t, k->parts, key,
						   del ? NULL : r->upserts[i].data, del ? 0 : r->upserts[i].len,
						   del, &why, &sqlstate);
		f->counts[out]++;
		if (out == REFUSED)
			add_refusal(f, r->table, k->parts, (int) k->n_parts, why);
		else if (out == WAITS || out == SET_ASIDE)
			inbox_keep(f, t, key, del ? NULL : r->upserts[i].data, del ? 0 : r->upserts[i].len,
					   del, why, sqlstate);
	}
}

/* ---- the rest of what a replica says ---- */

static void
provision(filing *f, const char *why)
{
	Oid			types[2] = {UUIDOID, TEXTOID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), CStringGetTextDatum(why)};

	if (SPI_execute_with_args("UPDATE sync.replicas SET provision = true, last_error = $2,"
							  " last_error_at = now() WHERE id = $1",
							  2, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not mark a replica to provision");
	f->provisioning = true;
	ereport(LOG, (errmsg("magic_sync: replica %s is provisioned again: %s", f->replica_text, why)));
}

static void
new_epoch(filing *f, const char *why)
{
	ms_epoch_begin(why, &f->epoch);
	f->provisioning = true;
}

/*
 * acknowledge: the last message the replica applied.  Sets f->acked.
 */
static void
acknowledge(filing *f, Sync__Applied *a)
{
	Oid			types[3] = {UUIDOID, INT8OID, BYTEAOID};
	Datum		values[3];
	bool		isnull;
	int64		acked;
	int64		last;
	bool		recorded;
	ms_epoch	e;
	bool		current;
	HeapTuple	tup;
	TupleDesc	desc;

	values[0] = UUIDPGetDatum(&f->replica);
	if (SPI_execute_with_args("SELECT acked_number, acked_epoch, acked_nonce, last_number, provision,"
							  " snapshot_end FROM sync.replicas WHERE id = $1 FOR UPDATE",
							  1, types, values, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read replica %s", f->replica_text);
	tup = SPI_copytuple(SPI_tuptable->vals[0]);
	desc = SPI_tuptable->tupdesc;
	acked = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	last = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
	f->provisioning = DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull));
	f->acked = acked;
	{
		Datum		end = SPI_getbinval(tup, desc, 6, &isnull);

		/* held rows are on their way while its snapshot is */
		if (!isnull && DatumGetInt64(end) > acked)
			f->provisioning = true;
	}
	if (a == NULL || a->number == 0)
		return;

	if (!ms_epoch_find(a->epoch.data, &e, &current))
	{
		provision(f, "the replica follows an epoch this server never had (was the server restored from an older copy?)");
		return;
	}
	if (!ms_seal_verify(e.secret, MS_SECRET_BYTES, f->replica.data, a->epoch.data, a->number,
						a->nonce.data, a->seal.data, a->seal.len))
	{
		new_epoch(f, psprintf("replica %s gave back a seal this server never made", f->replica_text));
		return;
	}
	if (!current)
		return;					/* a past epoch's message: the new epoch's snapshot is on its way */

	/* a record of sending it: in the outbox (dropped or not), or what it acknowledged before */
	values[1] = Int64GetDatum((int64) a->number);
	values[2] = PointerGetDatum(to_bytea(a->nonce.data, a->nonce.len));
	if (SPI_execute_with_args("SELECT EXISTS (SELECT FROM sync.outbox WHERE replica = $1 AND number = $2 AND nonce = $3)"
							  " OR EXISTS (SELECT FROM sync.replicas WHERE id = $1 AND acked_number = $2 AND acked_nonce = $3)",
							  3, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.outbox");
	recorded = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (!recorded)
	{
		if ((int64) a->number < acked)
			provision(f, psprintf("the replica says it applied message %llu, before the %lld it said it had applied: it was restored from an older copy",
								  (unsigned long long) a->number, (long long) acked));
		else
			new_epoch(f, psprintf("replica %s applied message %llu, sealed by this server, which has no record of sending it (was the server restored from an older copy, or a standby promoted?)",
								  f->replica_text, (unsigned long long) a->number));
		return;
	}
	if ((int64) a->number < acked)
	{
		provision(f, psprintf("the replica says it applied message %llu, before the %lld it said it had applied: it was restored from an older copy",
							  (unsigned long long) a->number, (long long) acked));
		return;
	}
	(void) last;
	if ((int64) a->number == acked)
		return;
	/* what the messages through it carried is held; what they took back is gone */
	if (SPI_execute_with_args("UPDATE sync.replicas SET acked_epoch = (SELECT id FROM sync.epoch WHERE ended IS NULL),"
							  " acked_number = $2, acked_nonce = $3, acked_at = now() WHERE id = $1",
							  3, types, values, NULL, false, 0) != SPI_OK_UPDATE ||
		SPI_execute_with_args("DELETE FROM sync.outbox WHERE replica = $1 AND number <= $2",
							  2, types, values, NULL, false, 0) != SPI_OK_DELETE ||
		SPI_execute_with_args("DELETE FROM sync.held WHERE replica = $1 AND taken <= $2",
							  2, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not record an acknowledgement");
	f->acked = (int64) a->number;
	{
		Datum		end = SPI_getbinval(tup, desc, 6, &isnull);

		if (!f->provisioning || (!isnull && DatumGetInt64(end) <= f->acked &&
								 !DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull))))
			f->provisioning = false;
	}
}

/* a gap provisions the replica again, unless a snapshot after it is on its way */
static void
gap(filing *f, Sync__Up *up)
{
	Oid			types[3] = {UUIDOID, INT8OID, BYTEAOID};
	Datum		values[3];
	bool		isnull;

	if (up->gap == 0)
		return;
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = Int64GetDatum((int64) up->gap);
	values[2] = PointerGetDatum(to_bytea(up->gap_epoch.data, up->gap_epoch.len));
	if (SPI_execute_with_args("UPDATE sync.replicas SET gap = $2 WHERE id = $1 RETURNING"
							  " provision OR (snapshot_number > $2 AND acked_number < snapshot_number"
							  "   AND $3 = (SELECT id FROM sync.epoch WHERE ended IS NULL))"
							  " OR ($3 <> (SELECT id FROM sync.epoch WHERE ended IS NULL)"
							  "   AND snapshot_number IS NOT NULL AND acked_number < snapshot_number)",
							  3, types, values, NULL, false, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not record a gap");
	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		provision(f, psprintf("the replica could not follow message %llu (a gap): a message was lost, or its file restored",
							  (unsigned long long) up->gap));
}

/* rows the replica could not take are not counted as held */
static void
refusals(filing *f, Sync__Up *up)
{
	Oid			types[4] = {UUIDOID, TEXTOID, TEXTOID, TEXTOID};

	for (size_t i = 0; i < up->n_refusals; i++)
	{
		Datum		values[4];

		values[0] = UUIDPGetDatum(&f->replica);
		values[1] = CStringGetTextDatum(up->refusals[i]->table);
		values[2] = CStringGetTextDatum(canonical(up->refusals[i]->key));
		values[3] = CStringGetTextDatum(up->refusals[i]->reason);
		if (SPI_execute_with_args("UPDATE sync.held h SET refused = $4 FROM sync.tables t"
								  " WHERE t.name = $2 AND h.tab = t.id AND h.replica = $1 AND h.key = $3",
								  4, types, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not record a refusal");
	}
}

/*
 * digests: compared only once the replica applied every message recorded
 * for it, so a message on its way is never taken for drift.
 */
static const char *
digests(filing *f, Sync__Up *up)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(&f->replica)};
	bool		isnull;
	SPITupleTable *tt;
	uint64		n;

	if (up->n_digests == 0)
		return "none";
	if (SPI_execute_with_args("SELECT provision OR acked_number < last_number FROM sync.replicas WHERE id = $1",
							  1, types, values, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read sync.replicas");
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) ||
		f->provisioning)
		return "not compared: messages are on their way";
	if (SPI_execute_with_args("SELECT t.name, (d).count, (d).fnv FROM ("
							  "  SELECT h.tab, sync.digest(h.key) AS d FROM sync.held h"
							  "   WHERE h.replica = $1 AND h.refused IS NULL AND h.taken IS NULL GROUP BY h.tab) s"
							  " JOIN sync.tables t ON t.id = s.tab",
							  1, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not compute the server's digests");
	tt = SPI_tuptable;
	n = SPI_processed;
	for (size_t i = 0; i < up->n_digests; i++)
	{
		Sync__Digest *d = up->digests[i];
		uint64		count = 0;
		uint64		fnv = MS_FNV_OFFSET;

		for (uint64 j = 0; j < n; j++)
			if (strcmp(TextDatumGetCString(SPI_getbinval(tt->vals[j], tt->tupdesc, 1, &isnull)), d->table) == 0)
			{
				count = (uint64) DatumGetInt64(SPI_getbinval(tt->vals[j], tt->tupdesc, 2, &isnull));
				fnv = strtoull(TextDatumGetCString(SPI_getbinval(tt->vals[j], tt->tupdesc, 3, &isnull)), NULL, 16);
			}
		if (count != d->count || fnv != d->fnv)
		{
			provision(f, psprintf("the digest of table \"%s\" differs: the replica holds %llu rows, the server records %llu (drift): provisioned again",
								  d->table, (unsigned long long) d->count, (unsigned long long) count));
			return "differ";
		}
	}
	if (SPI_execute_with_args("UPDATE sync.replicas SET digests_at = now() WHERE id = $1",
							  1, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record a digest");
	return "match";
}

static void
backlog(filing *f, Sync__Up *up)
{
	StringInfoData b;
	Oid			types[2] = {UUIDOID, TEXTOID};
	Datum		values[2];

	initStringInfo(&b);
	appendStringInfoChar(&b, '{');
	for (size_t i = 0; i < up->n_backlog; i++)
	{
		Sync__Backlog *l = up->backlog[i];

		if (i)
			appendStringInfoChar(&b, ',');
		escape_json(&b, l->table);
		appendStringInfo(&b, ":{\"unsent\":" UINT64_FORMAT ",\"unfiled\":" UINT64_FORMAT
						 ",\"set_aside\":" UINT64_FORMAT ",\"refused\":" UINT64_FORMAT "}",
						 (uint64) l->unsent, (uint64) l->unfiled, (uint64) l->set_aside, (uint64) l->refused);
	}
	appendStringInfoChar(&b, '}');
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = CStringGetTextDatum(b.data);
	if (SPI_execute_with_args("UPDATE sync.replicas SET backlog = $2::jsonb, heard_at = now() WHERE id = $1",
							  2, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not record a backlog");
}

/* the answer: a Filed message for the send, queued for sync.pull */
static void
answer(filing *f, Sync__Up *up)
{
	Sync__Filed filed = SYNC__FILED__INIT;
	Sync__ToReplica m = SYNC__TO_REPLICA__INIT;
	size_t		size;
	bytea	   *bytes;
	ListCell   *lc;
	int			i = 0;
	Oid			types[3] = {UUIDOID, BYTEAOID, BYTEAOID};
	Datum		values[3];

	filed.send_id = up->send_id;
	filed.rows = (uint32) f->counts[FILED];
	filed.n_refused = list_length(f->refused);
	filed.refused = palloc(sizeof(Sync__Refusal *) * Max(filed.n_refused, 1));
	foreach(lc, f->refused)
		filed.refused[i++] = lfirst(lc);
	m.protocol = MS_PROTOCOL;
	m.epoch.data = f->epoch.id;
	m.epoch.len = MS_EPOCH_BYTES;
	m.replica.data = f->replica.data;
	m.replica.len = MS_REPLICA_BYTES;
	m.body_case = SYNC__TO_REPLICA__BODY_FILED;
	m.filed = &filed;
	size = sync__to_replica__get_packed_size(&m);
	bytes = palloc(VARHDRSZ + size);
	SET_VARSIZE(bytes, VARHDRSZ + size);
	sync__to_replica__pack(&m, (uint8_t *) VARDATA(bytes));
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = PointerGetDatum(to_bytea(up->send_id.data, up->send_id.len));
	values[2] = PointerGetDatum(bytes);
	if (SPI_execute_with_args("INSERT INTO sync.answers (replica, send_id, message) VALUES ($1, $2, $3)"
							  " ON CONFLICT DO NOTHING",
							  3, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not queue an answer");
}

static bool
already_filed(filing *f, Sync__Up *up)
{
	Oid			types[2] = {UUIDOID, BYTEAOID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica),
	PointerGetDatum(to_bytea(up->send_id.data, up->send_id.len))};

	if (SPI_execute_with_args("SELECT FROM sync.answers WHERE replica = $1 AND send_id = $2",
							  2, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.answers");
	return SPI_processed > 0;
}

/*
 * ms_file: sync.file(replica uuid, upload bytea, sender jsonb) returns jsonb:
 * what became of the upload.
 */
Datum
ms_file(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *replica;
	bytea	   *upload;
	filing		f;
	Sync__Up   *up;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	StringInfoData out;
	const char *digest_state;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sync.file takes a replica and an upload, neither of them null"),
				 errhint("File what sync_upload() returned on the replica.")));
	replica = PG_GETARG_UUID_P(0);
	upload = PG_GETARG_BYTEA_PP(1);
	memset(&f, 0, sizeof f);
	f.replica = *replica;
	f.replica_text = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(replica)));
	f.sender = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);

	SPI_connect();
	ms_replica_access(replica, "file");
	if (VARSIZE_ANY_EXHDR(upload) > (Size) ms_upload_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("an upload of %zu bytes is over magic_sync.upload_bytes (%d)",
						(size_t) VARSIZE_ANY_EXHDR(upload), ms_upload_bytes),
				 errhint("A replica keeps its uploads under the bound it is given; raise magic_sync.upload_bytes to take larger ones.")));
	up = ms_up_decode((const uint8_t *) VARDATA_ANY(upload), VARSIZE_ANY_EXHDR(upload),
					  (size_t) ms_upload_bytes, ms_pg_allocator(), &st, reason);
	if (up == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("the upload is not an Up message"),
				 errdetail("%s.", reason),
				 errhint("Nothing of it was filed.")));
	if (st == MS_WIRE_LATER_PROTOCOL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the upload is of protocol %u, later than this server's %d", up->protocol, MS_PROTOCOL),
				 errhint("Upgrade the server's magic_sync before its replicas'.")));
	if (memcmp(up->replica.data, replica->data, MS_REPLICA_BYTES) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the upload names another replica than %s", f.replica_text),
				 errdetail("An upload is filed under the replica it is filed for, and names it."),
				 errhint("File each replica's uploads under its own uuid.")));

	initStringInfo(&out);
	if (already_filed(&f, up))
	{
		SPI_finish();
		PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum("{\"duplicate\": true}")));
	}
	f.tables = ms_catalog_tables();
	ms_epoch_current(&f.epoch);
	acknowledge(&f, up->applied);
	gap(&f, up);
	refusals(&f, up);
	for (size_t i = 0; i < up->n_rows; i++)
		file_rows(&f, up->rows[i]);
	digest_state = digests(&f, up);
	backlog(&f, up);
	answer(&f, up);
	SPI_finish();

	appendStringInfo(&out, "{\"acknowledged\": " INT64_FORMAT, f.acked);
	for (int i = 0; i < 5; i++)
		appendStringInfo(&out, ", \"%s\": %d", outcome_names[i], f.counts[i]);
	appendStringInfo(&out, ", \"digests\": \"%s\", \"provisioning\": %s}", digest_state,
					 f.provisioning ? "true" : "false");
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(out.data)));
}

/*
 * ms_inbox_retry: sync.inbox_retry(max int) files again up to max rows of
 * the inbox, oldest first, each as its replica uploaded it; returns how many
 * went through.  The worker calls it every pass; a fix deployed lets rows
 * through without anyone touching them.
 */
Datum
ms_inbox_retry(PG_FUNCTION_ARGS)
{
	int32		max = PG_GETARG_INT32(0);
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(max)};
	SPITupleTable *tt;
	uint64		n;
	int			through = 0;
	List	   *tables;

	SPI_connect();
	tables = ms_catalog_tables();
	if (SPI_execute_with_args("SELECT i.id, i.replica, t.name, i.key, i.row, i.sender, r.provision"
							  "  FROM sync.inbox i JOIN sync.tables t ON t.id = i.tab"
							  "  JOIN sync.replicas r ON r.id = i.replica"
							  " WHERE NOT r.dropped AND i.last_at < now() - least(interval '1 hour',"
							  "       interval '1 second' * power(2, least(i.tries, 12)))"
							  " ORDER BY i.last_at LIMIT $1",
							  1, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.inbox");
	tt = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = tt->vals[i];
		bool		isnull;
		filing		f;
		ms_table   *t;
		char	   *key;
		int			nparts;
		char	  **parts;
		size_t		pos = 0;
		const char *part;
		size_t		plen;
		Datum		row;
		char	   *why;
		char	   *sqlstate;
		outcome		out;
		int64		id = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 1, &isnull));
		Oid			dtypes[1] = {INT8OID};
		Datum		dvalues[1] = {Int64GetDatum(id)};

		memset(&f, 0, sizeof f);
		f.replica = *DatumGetUUIDP(SPI_getbinval(tup, tt->tupdesc, 2, &isnull));
		f.replica_text = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(&f.replica)));
		f.tables = tables;
		f.sender = SPI_getbinval(tup, tt->tupdesc, 6, &isnull);
		if (isnull)
			f.sender = (Datum) 0;
		f.provisioning = DatumGetBool(SPI_getbinval(tup, tt->tupdesc, 7, &isnull));
		t = table_named(&f, TextDatumGetCString(SPI_getbinval(tup, tt->tupdesc, 3, &isnull)));
		key = TextDatumGetCString(SPI_getbinval(tup, tt->tupdesc, 4, &isnull));
		nparts = ms_key_count_parts(key, strlen(key));
		if (t == NULL || nparts != t->nkey)
			continue;
		parts = palloc(sizeof(char *) * nparts);
		for (int k = 0; k < nparts; k++)
		{
			ms_key_next_part(key, strlen(key), &pos, &part, &plen);
			parts[k] = pnstrdup(part, plen);
		}
		{
			Oid			atypes[1] = {UUIDOID};
			Datum		avalues[1] = {UUIDPGetDatum(&f.replica)};

			if (SPI_execute_with_args("SELECT acked_number FROM sync.replicas WHERE id = $1",
									  1, atypes, avalues, NULL, false, 1) == SPI_OK_SELECT && SPI_processed == 1)
				f.acked = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		}
		row = SPI_getbinval(tup, tt->tupdesc, 5, &isnull);
		if (isnull)
			out = file_row(&f, t, parts, key, NULL, 0, true, &why, &sqlstate);
		else
		{
			bytea	   *b = DatumGetByteaPP(row);

			out = file_row(&f, t, parts, key, (const uint8 *) VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b),
						   false, &why, &sqlstate);
		}
		if (out == WAITS || out == SET_ASIDE)
		{
			Oid			utypes[3] = {INT8OID, TEXTOID, TEXTOID};
			Datum		uvalues[3] = {Int64GetDatum(id), CStringGetTextDatum(why ? why : ""),
			sqlstate ? CStringGetTextDatum(sqlstate) : (Datum) 0};
			char		unulls[3] = {' ', ' ', sqlstate ? ' ' : 'n'};

			SPI_execute_with_args("UPDATE sync.inbox SET tries = tries + 1, last_at = now(),"
								  " reason = $2, sqlstate = $3 WHERE id = $1",
								  3, utypes, uvalues, unulls, false, 0);
			continue;
		}
		if (out == REFUSED || out == DROPPED)
			ereport(LOG,
					(errmsg("magic_sync: a row replica %s uploaded leaves the inbox unfiled: %s",
							f.replica_text, why ? why : "")));
		else
			through++;
		SPI_execute_with_args("DELETE FROM sync.inbox WHERE id = $1", 1, dtypes, dvalues, NULL, false, 0);
	}
	SPI_finish();
	PG_RETURN_INT32(through);
}
