/*-------------------------------------------------------------------------
 * inspect.c
 *	  sync.inspect(message bytea): what a message to a replica, or an
 *	  upload from one, says, as jsonb, for operators and tests.
 *
 * Decoded with the same checks a replica applies (src/shared/wire.c); a
 * message sealed under an epoch this server knows says whether its seal is
 * one the server made, and a signed one whether its signature verifies
 * under the server's key (signed).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "epoch.h"
#include "settings.h"
#include "sign.h"
#include "subxact.h"
#include "updated.h"
#include "wire.h"

PG_FUNCTION_INFO_V1(ms_inspect);

static void
hex(StringInfo out, ProtobufCBinaryData b)
{
	static const char digits[] = "0123456789abcdef";

	appendStringInfoChar(out, '"');
	for (size_t i = 0; i < b.len; i++)
	{
		appendStringInfoChar(out, digits[b.data[i] >> 4]);
		appendStringInfoChar(out, digits[b.data[i] & 15]);
	}
	appendStringInfoChar(out, '"');
}

static void
str(StringInfo out, const char *s)
{
	escape_json(out, s ? s : "");
}

static void
key(StringInfo out, const Sync__Key *k)
{
	ms_json_strings(out, k->parts, k->n_parts);
}

static void
jsonb_check(void *arg)
{
	(void) DirectFunctionCall1(jsonb_in, CStringGetDatum((char *) arg));
}

/* an upsert: its JSON when it is JSON, else its bytes in hex */
static void
upsert(StringInfo out, ProtobufCBinaryData b)
{
	char	   *s = pnstrdup((const char *) b.data, b.len);
	bool		json = b.len > 0 && b.data[0] == '{' && ms_utf8_valid(s, b.len);
	ErrorData  *err;

	/* the jsonb input function is the judge; in a subtransaction, undone either way */
	if (json && !ms_trial(jsonb_check, s, &err))
	{
		FreeErrorData(err);
		json = false;
	}
	if (json)
		appendStringInfoString(out, s);
	else
		hex(out, b);
}

static void
rows(StringInfo out, Sync__Rows **r, size_t n)
{
	appendStringInfoChar(out, '[');
	for (size_t i = 0; i < n; i++)
	{
		appendStringInfo(out, "%s{\"table\":", i ? "," : "");
		str(out, r[i]->table);
		appendStringInfoString(out, ",\"upserts\":[");
		for (size_t j = 0; j < r[i]->n_upserts; j++)
		{
			if (j)
				appendStringInfoChar(out, ',');
			upsert(out, r[i]->upserts[j]);
		}
		appendStringInfoString(out, "],\"keys\":[");
		for (size_t j = 0; j < r[i]->n_keys; j++)
		{
			if (j)
				appendStringInfoChar(out, ',');
			key(out, r[i]->keys[j]);
		}
		appendStringInfoString(out, "],\"deletes\":[");
		for (size_t j = 0; j < r[i]->n_deletes; j++)
		{
			if (j)
				appendStringInfoChar(out, ',');
			key(out, r[i]->deletes[j]);
		}
		appendStringInfoString(out, "]}");
	}
	appendStringInfoChar(out, ']');
}

/*
 * schema: Tables as a JSON array; a schema change's (evolving) with what it
 * matches and adds by: ids, unique indexes, the fill row.
 */
static void
schema(StringInfo out, Sync__Table **tables, size_t n, bool evolving)
{
	appendStringInfoChar(out, '[');
	for (size_t i = 0; i < n; i++)
	{
		const Sync__Table *t = tables[i];

		appendStringInfo(out, "%s{\"name\":", i ? "," : "");
		str(out, t->name);
		if (evolving)
			appendStringInfo(out, ",\"id\":%u", t->id);
		appendStringInfoString(out, ",\"mirror\":");
		str(out, t->mirror);
		appendStringInfoString(out, ",\"codec\":");
		str(out, t->codec);
		appendStringInfoString(out, ",\"columns\":[");
		for (size_t c = 0; c < t->n_columns; c++)
		{
			appendStringInfo(out, "%s{\"name\":", c ? "," : "");
			str(out, t->columns[c]->name);
			appendStringInfoString(out, ",\"type\":");
			str(out, t->columns[c]->type);
			appendStringInfo(out, ",\"not_null\":%s,\"replica_owned\":%s,\"field\":%u",
							 t->columns[c]->not_null ? "true" : "false",
							 t->columns[c]->replica_owned ? "true" : "false",
							 t->columns[c]->field);
			if (evolving)
				appendStringInfo(out, ",\"id\":%u", t->columns[c]->id);
			appendStringInfoChar(out, '}');
		}
		appendStringInfoString(out, "],\"key\":");
		ms_json_strings(out, t->key, t->n_key);
		appendStringInfoString(out, ",\"foreign_keys\":[");
		for (size_t f = 0; f < t->n_foreign_keys; f++)
		{
			appendStringInfo(out, "%s{\"table\":", f ? "," : "");
			str(out, t->foreign_keys[f]->table);
			appendStringInfoString(out, ",\"columns\":");
			ms_json_strings(out, t->foreign_keys[f]->columns, t->foreign_keys[f]->n_columns);
			appendStringInfoChar(out, '}');
		}
		appendStringInfoString(out, "],\"retired\":");
		str(out, t->retired);
		appendStringInfoString(out, ",\"origin\":");
		str(out, t->origin);
		appendStringInfoString(out, ",\"version\":");
		str(out, t->version);
		/* version => 'hlc' (docs/protocol.md 12): said only when set */
		if (t->hlc)
			appendStringInfoString(out, ",\"hlc\":true");
		if (evolving)
		{
			appendStringInfoString(out, ",\"unique\":[");
			for (size_t u = 0; u < t->n_unique; u++)
			{
				appendStringInfo(out, "%s{\"name\":", u ? "," : "");
				str(out, t->unique[u]->name);
				appendStringInfoString(out, ",\"columns\":");
				ms_json_strings(out, t->unique[u]->columns, t->unique[u]->n_columns);
				appendStringInfoChar(out, '}');
			}
			appendStringInfoString(out, "],\"fill\":");
			if (t->fill.len > 0)
				upsert(out, t->fill);
			else
				appendStringInfoString(out, "null");
		}
		appendStringInfoChar(out, '}');
	}
	appendStringInfoChar(out, ']');
}

/* whether the seal is one this server made, under an epoch it knows */
static const char *
sealed(const Sync__ToReplica *m)
{
	ms_epoch	e;
	bool		current;
	const char *answer = "null";

	if (m->seal.len == 0)
		return answer;
	SPI_connect();
	if (ms_epoch_find(m->epoch.data, &e, &current))
		answer = ms_seal_verify(e.secret, MS_SECRET_BYTES, m->replica.data, m->epoch.data,
								m->number, m->nonce.data, m->seal.data, m->seal.len) ? "true" : "false";
	SPI_finish();
	return answer;
}

/*
 * whether the message's signature is this server's, made with its key
 * (docs/protocol.md 2.4): NULL when it carries none, false when it does not
 * verify under the server's key (or the server has none)
 */
static const char *
signed_here(const Sync__ToReplica *m, const uint8 *bytes, size_t len)
{
	size_t		at,
				after;
	const uint8_t *sig;
	char		reason[MS_REASON_MAX];
	uint8		digest[MS_SIGN_DIGEST_BYTES];
	uint8		key[MS_SIGN_KEY_BYTES];
	bool		has = false;

	if (m->signature.len == 0)
		return "null";
	if (ms_sign_find(bytes, len, &at, &after, &sig, reason) != MS_SIGN_FOUND || !ms_catalog_has("signing_key"))
		return "false";
	SPI_connect();
	if (SPI_execute("SELECT public_key FROM sync.signing_key", true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		bool		isnull;
		bytea	   *b = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));

		has = !isnull && VARSIZE_ANY_EXHDR(b) == MS_SIGN_KEY_BYTES;
		if (has)
			memcpy(key, VARDATA_ANY(b), MS_SIGN_KEY_BYTES);
	}
	SPI_finish();
	if (!has)
		return "false";
	ms_sign_message_digest(bytes, len, at, after, digest);
	return ms_sign_check(key, digest, sig, MS_SIGNATURE_BYTES) ? "true" : "false";
}

/* the message's head; a later protocol's is read only as far as this build can */
static void
head(StringInfo out, const Sync__ToReplica *m, ms_wire_status st, const uint8 *bytes, size_t len)
{
	appendStringInfo(out, "{\"protocol\":%u,\"epoch\":", m->protocol);
	hex(out, m->epoch);
	appendStringInfo(out, ",\"generation\":" UINT64_FORMAT ",\"number\":" UINT64_FORMAT
					 ",\"previous\":" UINT64_FORMAT ",\"nonce\":",
					 (uint64) m->generation, (uint64) m->number, (uint64) m->previous);
	hex(out, m->nonce);
	appendStringInfoString(out, ",\"previous_nonce\":");
	hex(out, m->previous_nonce);
	appendStringInfoString(out, ",\"replica\":");
	/* checked to be a uuid's 16 bytes in this build's protocol only */
	if (m->replica.len == MS_REPLICA_BYTES)
		appendStringInfo(out, "\"%s\"", DatumGetCString(DirectFunctionCall1(uuid_out,
																		   PointerGetDatum(m->replica.data))));
	else
		hex(out, m->replica);
	appendStringInfo(out, ",\"sealed\":%s", st == MS_WIRE_OK ? sealed(m) : "null");
	/* only a signed message says: those of servers that signed none read as they did */
	if (st == MS_WIRE_OK && m->signature.len > 0)
		appendStringInfo(out, ",\"signed\":%s", signed_here(m, bytes, len));
}

/* the rows a Filed answer names, with why */
static void
named(StringInfo out, const char *name, Sync__Refusal **r, size_t n)
{
	appendStringInfo(out, ",\"%s\":[", name);
	for (size_t i = 0; i < n; i++)
	{
		appendStringInfo(out, "%s{\"table\":", i ? "," : "");
		str(out, r[i]->table);
		appendStringInfoString(out, ",\"key\":");
		key(out, r[i]->key);
		appendStringInfoString(out, ",\"reason\":");
		str(out, r[i]->reason);
		appendStringInfoChar(out, '}');
	}
	appendStringInfoChar(out, ']');
}

/* a Filed answer: its counts per table, the rows it names, whether the send was a duplicate */
static void
filed(StringInfo out, const Sync__Filed *f)
{
	appendStringInfoString(out, ",\"filed\":{\"send_id\":");
	hex(out, f->send_id);
	appendStringInfo(out, ",\"rows\":%u", f->rows);
	named(out, "refused", f->refused, f->n_refused);
	named(out, "dropped", f->dropped, f->n_dropped);
	named(out, "kept", f->kept, f->n_kept);
	if (f->n_again > 0)
		named(out, "again", f->again, f->n_again);
	appendStringInfoString(out, ",\"tables\":[");
	for (size_t i = 0; i < f->n_tables; i++)
	{
		const Sync__FiledTable *t = f->tables[i];

		appendStringInfo(out, "%s{\"table\":", i ? "," : "");
		str(out, t->table);
		appendStringInfo(out, ",\"filed\":%u,\"refused\":%u,\"dropped\":%u,\"waiting\":%u,\"set_aside\":%u",
						 t->filed, t->refused, t->dropped, t->waiting, t->set_aside);
		if (t->again > 0)
			appendStringInfo(out, ",\"again\":%u", t->again);
		appendStringInfoChar(out, '}');
	}
	appendStringInfoChar(out, ']');
	/* the server's range questions (docs/protocol.md 8.1); said only when it asks */
	if (f->n_ranges > 0)
	{
		appendStringInfoString(out, ",\"ranges\":[");
		for (size_t i = 0; i < f->n_ranges; i++)
		{
			const Sync__RangeAsk *a = f->ranges[i];

			appendStringInfo(out, "%s{\"table\":", i ? "," : "");
			str(out, a->table);
			appendStringInfo(out, ",\"round\":" UINT64_FORMAT ",\"depth\":%u,\"split\":%u,\"values\":%s,\"buckets\":[",
							 (uint64) a->round, a->depth, a->split, a->values ? "true" : "false");
			for (size_t b = 0; b < a->n_buckets; b++)
				appendStringInfo(out, "%s" UINT64_FORMAT, b ? "," : "", (uint64) a->buckets[b]);
			appendStringInfoString(out, "]}");
		}
		appendStringInfoChar(out, ']');
	}
	appendStringInfo(out, ",\"duplicate\":%s,\"last_seq\":" UINT64_FORMAT,
					 f->duplicate ? "true" : "false", (uint64) f->last_seq);
	/* the lane of the send answered (docs/protocol.md 7.2); the first lane's is not said, as before lanes */
	if (f->lane != NULL && f->lane[0] != '\0')
	{
		appendStringInfoString(out, ",\"lane\":");
		str(out, f->lane);
	}
	appendStringInfoChar(out, '}');
}

/* a Down's wishes (docs/protocol.md 5.4), their values and expected rows as the text they are */
static void
wishes(StringInfo out, Sync__Wish **w, size_t n)
{
	appendStringInfoString(out, "\"wishes\":[");
	for (size_t i = 0; i < n; i++)
	{
		appendStringInfo(out, "%s{\"id\":" UINT64_FORMAT ",\"table\":", i ? "," : "", w[i]->id);
		str(out, w[i]->table);
		appendStringInfoString(out, ",\"key\":");
		key(out, w[i]->key);
		appendStringInfoString(out, ",\"values\":");
		str(out, w[i]->values);
		appendStringInfoString(out, ",\"apply\":");
		str(out, w[i]->apply);
		appendStringInfoString(out, ",\"expected\":");
		str(out, w[i]->expected);
		appendStringInfoChar(out, '}');
	}
	appendStringInfoString(out, "],");
}

static void
body(StringInfo out, const Sync__ToReplica *m)
{
	switch (m->body_case)
	{
		case SYNC__TO_REPLICA__BODY_DOWN:
			appendStringInfoString(out, ",\"down\":{");
			if (m->down->begin)
			{
				appendStringInfoString(out, "\"begin\":");
				schema(out, m->down->begin->schema, m->down->begin->n_schema, false);
				/* what the snapshot says it carries: a replica's progress counts against it */
				appendStringInfo(out, ",\"begin_rows\":" UINT64_FORMAT ",", (uint64) m->down->begin->rows);
			}
			if (m->down->n_schema > 0)
			{
				appendStringInfoString(out, "\"schema\":");
				schema(out, m->down->schema, m->down->n_schema, true);
				appendStringInfoChar(out, ',');
			}
			if (m->down->n_let_go > 0)
			{
				appendStringInfoString(out, "\"let_go\":[");
				for (size_t i = 0; i < m->down->n_let_go; i++)
				{
					if (i)
						appendStringInfoChar(out, ',');
					str(out, m->down->let_go[i]);
				}
				appendStringInfoString(out, "],");
			}
			if (m->down->n_wishes > 0)
				wishes(out, m->down->wishes, m->down->n_wishes);
			appendStringInfoString(out, "\"tables\":");
			rows(out, m->down->tables, m->down->n_tables);
			appendStringInfoChar(out, '}');
			break;
		case SYNC__TO_REPLICA__BODY_END_SNAPSHOT:
			appendStringInfoString(out, ",\"end_snapshot\":[");
			for (size_t i = 0; i < m->end_snapshot->n_tables; i++)
			{
				if (i)
					appendStringInfoChar(out, ',');
				str(out, m->end_snapshot->tables[i]);
			}
			appendStringInfoChar(out, ']');
			break;
		case SYNC__TO_REPLICA__BODY_FILED:
			filed(out, m->filed);
			break;
		default:
			break;
	}
}

/*
 * ms_inspect: sync.inspect(message bytea) returns jsonb: the message's head
 * and body.  A message that does not decode is an error saying why.  One of
 * a later protocol shows its head and later_protocol: its body went
 * unchecked (its names need not even be text), and is not this build's to read.
 */
Datum
ms_inspect(PG_FUNCTION_ARGS)
{
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	Sync__ToReplica *m;
	StringInfoData out;

	m = ms_to_replica_decode((const uint8_t *) VARDATA_ANY(in), VARSIZE_ANY_EXHDR(in),
							 MaxAllocSize, ms_pg_allocator(), &st, reason);
	if (m == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("the bytes are not a message to a replica"),
				 errdetail("%s.", reason)));
	initStringInfo(&out);
	head(&out, m, st, (const uint8 *) VARDATA_ANY(in), VARSIZE_ANY_EXHDR(in));
	if (st == MS_WIRE_LATER_PROTOCOL)
		appendStringInfoString(&out, ",\"later_protocol\":true");
	else
		body(&out, m);
	appendStringInfoChar(&out, '}');
	sync__to_replica__free_unpacked(m, ms_pg_allocator());
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(out.data)));
}
