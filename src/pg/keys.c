/*-------------------------------------------------------------------------
 * keys.c
 *	  Canonical keys and digests in SQL: sync.key, sync.key_parts and the
 *	  aggregate sync.digest, computed by src/shared byte for byte as a
 *	  replica computes them; a key part's spelling (keys.h), and
 *	  sync.key_text.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "bytes.h"
#include "digest.h"
#include "key.h"
#include "keys.h"

PG_FUNCTION_INFO_V1(ms_key);
PG_FUNCTION_INFO_V1(ms_key_parts);
PG_FUNCTION_INFO_V1(ms_digest_transfn);
PG_FUNCTION_INFO_V1(ms_digest_finalfn);
PG_FUNCTION_INFO_V1(ms_key_text_fn);

/*
 * case_folded: citext's (a contrib type, of no fixed oid): its output
 * function says it
 */
static bool
case_folded(Oid base)
{
	Oid			out;
	bool		varlena;

	if (base < FirstNormalObjectId)
		return false;
	getTypeOutputInfo(base, &out, &varlena);
	return strcmp(get_func_name(out), "citextout") == 0;
}

ms_key_kind
ms_key_kind_of(Oid type)
{
	Oid			base = getBaseType(type);

	if (case_folded(base))
		return MS_KEY_FOLDED;
	switch (base)
	{
		case INT2OID:
			return MS_KEY_INT2;
		case INT4OID:
			return MS_KEY_INT4;
		case INT8OID:
			return MS_KEY_INT8;
		case UUIDOID:
			return MS_KEY_UUID;
		case NUMERICOID:
			return MS_KEY_NUMERIC;
		case DATEOID:
			return MS_KEY_DATE;
		case TIMEOID:
			return MS_KEY_TIME;
		case TIMESTAMPOID:
			return MS_KEY_TIMESTAMP;
		case TIMESTAMPTZOID:
			return MS_KEY_TIMESTAMPTZ;
		default:
			return MS_KEY_TEXT;
	}
}

bool
ms_key_spelled(ms_key_kind kind)
{
	return kind == MS_KEY_NUMERIC || kind == MS_KEY_DATE || kind == MS_KEY_TIMESTAMP ||
		kind == MS_KEY_TIMESTAMPTZ || kind == MS_KEY_FOLDED;
}

char *
ms_key_text(ms_key_kind kind, Datum value)
{
	int			utc = 0;

	switch (kind)
	{
		case MS_KEY_NUMERIC:
			return DatumGetCString(DirectFunctionCall1(numeric_out,
													   DirectFunctionCall1(numeric_trim_scale, value)));
		case MS_KEY_DATE:
			return JsonEncodeDateTime(NULL, value, DATEOID, NULL);
		case MS_KEY_TIMESTAMP:
			return JsonEncodeDateTime(NULL, value, TIMESTAMPOID, NULL);
		case MS_KEY_TIMESTAMPTZ:
			/* at offset zero, whatever TimeZone says */
			return JsonEncodeDateTime(NULL, value, TIMESTAMPTZOID, &utc);
		case MS_KEY_FOLDED:
			/* as citext compares: lowercase under the database's own locale */
			return TextDatumGetCString(DirectFunctionCall1Coll(lower, DEFAULT_COLLATION_OID, value));
		default:
			elog(ERROR, "a key part of kind %d is spelled by its output function", (int) kind);
	}
	pg_unreachable();
}

char *
ms_key_text_sql(Oid type, const char *expr)
{
	ms_key_kind kind = ms_key_kind_of(type);

	/* trim_scale, not a call of ours: the planner knows it, and a numeric stays one */
	if (kind == MS_KEY_NUMERIC)
		return psprintf("pg_catalog.trim_scale(%s)::pg_catalog.text", expr);
	/* lower() too: the planner knows it; citext folds by the database's locale */
	if (kind == MS_KEY_FOLDED)
		return psprintf("pg_catalog.lower((%s)::pg_catalog.text COLLATE pg_catalog.\"default\")", expr);
	if (ms_key_spelled(kind))
		return psprintf("sync.key_text(%s)", expr);
	return psprintf("(%s)::pg_catalog.text", expr);
}

/* What sync.key_text keeps across calls: its argument's kind and output function. */
typedef struct key_text_cache
{
	Oid			type;
	ms_key_kind kind;
	FmgrInfo	out;
} key_text_cache;

/*
 * ms_key_text_fn: sync.key_text(value anyelement) returns value as a key
 * part: as the noting trigger and the relay spell it (keys.h), its type's
 * text otherwise.
 */
Datum
ms_key_text_fn(PG_FUNCTION_ARGS)
{
	key_text_cache *c = fcinfo->flinfo->fn_extra;
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 0);

	if (!OidIsValid(type))
		elog(ERROR, "sync.key_text: the type of its argument is not known");
	if (c == NULL || c->type != type)
	{
		Oid			out;
		bool		varlena;

		c = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(key_text_cache));
		c->type = type;
		c->kind = ms_key_kind_of(type);
		getTypeOutputInfo(getBaseType(type), &out, &varlena);
		fmgr_info_cxt(out, &c->out, fcinfo->flinfo->fn_mcxt);
		fcinfo->flinfo->fn_extra = c;
	}
	if (ms_key_spelled(c->kind))
		PG_RETURN_TEXT_P(cstring_to_text(ms_key_text(c->kind, PG_GETARG_DATUM(0))));
	PG_RETURN_TEXT_P(cstring_to_text(OutputFunctionCall(&c->out, PG_GETARG_DATUM(0))));
}

/*
 * ms_key: sync.key(parts text[]) returns the canonical key of its parts.
 */
Datum
ms_key(PG_FUNCTION_ARGS)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	const char **parts;
	size_t	   *lens;
	size_t		size;
	text	   *out;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("a key is a one-dimensional array of its parts")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a key has at least one part")));
	parts = palloc(sizeof(char *) * n);
	lens = palloc(sizeof(size_t) * n);
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("part %d of the key is null", i + 1),
					 errdetail("Key columns are never null.")));
		parts[i] = VARDATA_ANY(DatumGetPointer(elems[i]));
		lens[i] = VARSIZE_ANY_EXHDR(DatumGetPointer(elems[i]));
	}
	size = ms_key_size(n, parts, lens);
	out = ms_bytea_new(size);
	ms_key_write(VARDATA(out), n, parts, lens);
	PG_RETURN_TEXT_P(out);
}

/*
 * ms_key_parts: sync.key_parts(key text) returns the parts of a canonical key.
 */
Datum
ms_key_parts(PG_FUNCTION_ARGS)
{
	text	   *key = PG_GETARG_TEXT_PP(0);
	const char *bytes = VARDATA_ANY(key);
	size_t		len = VARSIZE_ANY_EXHDR(key);
	int			n = ms_key_count_parts(bytes, len);
	Datum	   *elems;
	size_t		pos = 0;
	const char *part;
	size_t		plen;

	if (n <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("\"%s\" is not a canonical key", text_to_cstring(key)),
				 errdetail("A canonical key is, for each part, its length in bytes, a colon and its bytes: '2:42'."),
				 errhint("Build keys with sync.key(ARRAY[...]).")));
	elems = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
	{
		ms_key_next_part(bytes, len, &pos, &part, &plen);
		elems[i] = PointerGetDatum(cstring_to_text_with_len(part, (int) plen));
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* The aggregate's state: the keys seen, copied into the aggregate's context. */
typedef struct digest_state
{
	ms_keyref  *refs;
	size_t		n;
	size_t		cap;
} digest_state;

/*
 * ms_digest_transfn: collects the canonical keys of sync.digest(key); the
 * final function sorts them, so the digest does not depend on input order.
 */
Datum
ms_digest_transfn(PG_FUNCTION_ARGS)
{
	MemoryContext aggcxt;
	MemoryContext old;
	digest_state *st;
	text	   *key;
	size_t		len;
	char	   *copy;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "ms_digest_transfn called outside an aggregate");
	st = PG_ARGISNULL(0) ? NULL : (digest_state *) PG_GETARG_POINTER(0);
	old = MemoryContextSwitchTo(aggcxt);
	if (st == NULL)
	{
		st = palloc0(sizeof(digest_state));
		st->cap = 64;
		st->refs = palloc(sizeof(ms_keyref) * st->cap);
	}
	if (!PG_ARGISNULL(1))
	{
		key = PG_GETARG_TEXT_PP(1);
		len = VARSIZE_ANY_EXHDR(key);
		if (ms_key_count_parts(VARDATA_ANY(key), len) <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("\"%s\" is not a canonical key", text_to_cstring(key)),
					 errhint("Build keys with sync.key(ARRAY[...]).")));
		if (st->n == st->cap)
		{
			st->cap *= 2;
			st->refs = repalloc_huge(st->refs, sizeof(ms_keyref) * st->cap);
		}
		copy = palloc(len + 1);
		memcpy(copy, VARDATA_ANY(key), len);
		st->refs[st->n].key = copy;
		st->refs[st->n].len = len;
		st->n++;
	}
	MemoryContextSwitchTo(old);
	PG_RETURN_POINTER(st);
}

/*
 * ms_digest_finalfn: (count, fnv) of the keys, fnv as 16 hex digits.
 */
Datum
ms_digest_finalfn(PG_FUNCTION_ARGS)
{
	digest_state *st = PG_ARGISNULL(0) ? NULL : (digest_state *) PG_GETARG_POINTER(0);
	ms_digest	d;
	char		hex[17];
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "sync.digest must return a composite type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (st == NULL)
		ms_digest_init(&d);
	else
		ms_digest_keys(&d, st->refs, st->n);
	ms_digest_hex(d.fnv, hex);
	values[0] = Int64GetDatum((int64) d.count);
	values[1] = CStringGetTextDatum(hex);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
