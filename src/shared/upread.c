/*-------------------------------------------------------------------------
 * upread.c
 *	  Reading an upload a piece at a time (upread.h).
 *
 * The checks are ms_up_decode's (wire.c), made as the bytes are walked:
 * the head through protobuf-c and ms_up_check, each refusal, digest and
 * backlog entry unpacked alone and freed, each Rows walked field by field
 * with each key unpacked alone.  One difference: a key part holding a NUL
 * byte is refused here (protobuf-c's strings end at one, so ms_up_decode
 * would read it shorter), as no replica writes one.
 *-------------------------------------------------------------------------
 */
#include "upread.h"

#include <string.h>

#include "fields.h"
#include "key.h"
#include "pbwrite.h"
#include "seal.h"

/*
 * next_field: the field at *pos (ms_pb_next), whole; false at the end or
 * (for bytes a scan passed, never) on bad bytes.  Its number is read as 32
 * bits, as this reader always read it.
 */
static bool
next_field(const uint8_t *buf, size_t len, size_t *pos, ms_pb_field *f)
{
	ms_pb_next_result r = ms_pb_next(buf, len, pos, f);

	if (r == MS_PB_FIELD || r == MS_PB_BROKEN_VALUE)
		f->number = (uint32_t) f->number;
	return r == MS_PB_FIELD;
}

/* a message's bytes, walked whole: every field well formed */
static bool
scan(const uint8_t *buf, size_t len, const char *what, char reason[MS_REASON_MAX])
{
	size_t		pos = 0;
	ms_pb_field f;

	while (pos < len)
	{
		size_t		at = pos;

		if (!next_field(buf, len, &pos, &f) || f.number == 0)
			return ms_refuse(reason, "%s is malformed at its byte %zu", what, at);
	}
	return true;
}

static bool
name_ok(const uint8_t *p, size_t n, const char *what, char reason[MS_REASON_MAX])
{
	if (p == NULL || n == 0)
		return ms_refuse(reason, "%s is %s", what, p == NULL ? "missing" : "empty");
	if (!ms_utf8_valid((const char *) p, n))
		return ms_refuse(reason, "%s is not valid UTF-8", what);
	if (n > MS_NAME_MAX)
		return ms_refuse(reason, "%s is longer than %d bytes", what, MS_NAME_MAX);
	return true;
}

/* a Key: one part at least, each UTF-8 without NUL and not too long */
static bool
key_ok(const uint8_t *buf, size_t len, const char *table, char reason[MS_REASON_MAX])
{
	size_t		pos = 0;
	size_t		parts = 0;
	ms_pb_field f;

	if (!scan(buf, len, "a key", reason))
		return false;
	while (next_field(buf, len, &pos, &f))
	{
		if (f.number != MS_FIELD_KEY_PARTS)
			continue;
		if (f.wire != MS_PB_LEN)
			return ms_refuse(reason, "a key part of table \"%s\" is not a string", table);
		if (!ms_utf8_valid((const char *) f.bytes, f.len))
			return ms_refuse(reason, "a key part of table \"%s\" is not valid UTF-8 (or holds a NUL byte)", table);
		if (f.len > MS_KEY_PART_MAX)
			return ms_refuse(reason, "a key part of table \"%s\" is too long", table);
		parts++;
	}
	if (parts == 0)
		return ms_refuse(reason, "a key of table \"%s\" has no parts", table);
	return true;
}

/* the table name of a Rows: its last field 1, as protobuf reads a string given twice */
static bool
rows_table(const uint8_t *buf, size_t len, char table[MS_NAME_MAX + 1], char reason[MS_REASON_MAX])
{
	size_t		pos = 0;
	ms_pb_field f;
	const uint8_t *name = NULL;
	size_t		n = 0;

	while (next_field(buf, len, &pos, &f))
		if (f.number == MS_FIELD_ROWS_TABLE)
		{
			if (f.wire != MS_PB_LEN)
				return ms_refuse(reason, "a table name is not a string");
			name = f.bytes;
			n = f.len;
		}
	if (!name_ok(name, n, "a table name", reason))
		return false;
	memcpy(table, name, n);
	table[n] = '\0';
	return true;
}

/* a Rows: its table, one key per upsert, every key well formed */
static bool
rows_ok(const uint8_t *buf, size_t len, char reason[MS_REASON_MAX])
{
	char		table[MS_NAME_MAX + 1];
	size_t		pos = 0;
	size_t		upserts = 0;
	size_t		keys = 0;
	ms_pb_field f;

	if (!scan(buf, len, "a table's rows", reason) || !rows_table(buf, len, table, reason))
		return false;
	while (next_field(buf, len, &pos, &f))
	{
		if (f.number < MS_FIELD_ROWS_UPSERTS || f.number > MS_FIELD_ROWS_REPLACES)
			continue;
		if (f.wire != MS_PB_LEN)
			return ms_refuse(reason, "field %u of the rows of table \"%s\" has the wrong wire type",
							 (unsigned) f.number, table);
		if (f.number == MS_FIELD_ROWS_UPSERTS)
			upserts++;
		else if (!key_ok(f.bytes, f.len, table, reason))
			return false;
		else if (f.number == MS_FIELD_ROWS_KEYS)
			keys++;
	}
	if (keys != upserts)
		return ms_refuse(reason, "table \"%s\" has %zu upserts but %zu keys", table, upserts, keys);
	return true;
}

/* one refusal, digest or backlog entry, unpacked alone, checked, freed */
static bool
element_ok(uint32_t field, const uint8_t *p, size_t n, ms_allocator *alloc, char reason[MS_REASON_MAX])
{
	Sync__Up	one = SYNC__UP__INIT;
	ProtobufCMessage *m;
	const ProtobufCMessageDescriptor *desc =
		field == MS_FIELD_UP_REFUSALS ? &sync__refusal__descriptor :
		field == MS_FIELD_UP_DIGESTS ? &sync__digest__descriptor : &sync__backlog__descriptor;
	bool		ok;

	m = protobuf_c_message_unpack(desc, alloc, n, p);
	if (m == NULL)
		return ms_refuse(reason, "the bytes are not a well-formed Up (a %s has the wrong type or length)",
						 desc->short_name);
	/* the checks of a one-element list are ms_up_check's */
	one.protocol = MS_PROTOCOL;
	one.replica.len = MS_REPLICA_BYTES;
	one.replica.data = (uint8_t *) "0123456789abcdef";
	one.send_id = one.replica;
	if (field == MS_FIELD_UP_REFUSALS)
	{
		one.n_refusals = 1;
		one.refusals = (Sync__Refusal **) &m;
	}
	else if (field == MS_FIELD_UP_DIGESTS)
	{
		one.n_digests = 1;
		one.digests = (Sync__Digest **) &m;
	}
	else
	{
		one.n_backlog = 1;
		one.backlog = (Sync__Backlog **) &m;
	}
	ok = ms_up_check(&one, reason);
	protobuf_c_message_free_unpacked(m, alloc);
	return ok;
}

static bool
is_list(uint32_t field)
{
	return field >= MS_FIELD_UP_ROWS && field <= MS_FIELD_UP_BACKLOG;
}

/* lists: every element of the upload's lists checked; counted */
static bool
lists_ok(const uint8_t *buf, size_t len, ms_allocator *alloc, ms_wire_status *status,
		 char reason[MS_REASON_MAX])
{
	size_t		pos = 0;
	size_t		counts[MS_FIELD_UP_BACKLOG + 1] = {0};
	ms_pb_field f;

	while (next_field(buf, len, &pos, &f))
	{
		if (!is_list(f.number))
			continue;
		if (f.wire != MS_PB_LEN)
		{
			*status = MS_WIRE_MALFORMED;
			return ms_refuse(reason, "the bytes are not a well-formed Up (field %u has the wrong wire type)",
							 (unsigned) f.number);
		}
		if (f.number != MS_FIELD_UP_ROWS && ++counts[f.number] > MS_UP_LIST_MAX)
		{
			*status = MS_WIRE_TOO_LARGE;
			return ms_refuse(reason, "the upload carries more than %d %s", MS_UP_LIST_MAX,
							 f.number == MS_FIELD_UP_DIGESTS ? "digests" : "backlog entries");
		}
		if (!(f.number == MS_FIELD_UP_ROWS ? rows_ok(f.bytes, f.len, reason)
			  : element_ok(f.number, f.bytes, f.len, alloc, reason)))
		{
			*status = MS_WIRE_MALFORMED;
			return false;
		}
	}
	return true;
}

/* head: the upload without its lists, unpacked */
static Sync__Up *
head(const uint8_t *buf, size_t len, ms_allocator *alloc, char reason[MS_REASON_MAX])
{
	uint8_t    *copy = alloc->alloc(alloc->allocator_data, len ? len : 1);
	size_t		pos = 0;
	size_t		n = 0;
	ms_pb_field f;
	Sync__Up   *up;

	if (copy == NULL)
		return NULL;
	while (pos < len)
	{
		size_t		at = pos;

		next_field(buf, len, &pos, &f);
		if (!is_list(f.number))
		{
			memcpy(copy + n, buf + at, pos - at);
			n += pos - at;
		}
	}
	up = sync__up__unpack(alloc, n, copy);
	alloc->free(alloc->allocator_data, copy);
	if (up == NULL)
		ms_refuse(reason, "the bytes are not a well-formed Up (a field has the wrong type or length)");
	return up;
}

Sync__Up *
ms_up_read(const uint8_t *buf, size_t len, size_t bound, ms_allocator *alloc,
		   ms_wire_status *status, char reason[MS_REASON_MAX])
{
	Sync__Up   *up;

	*status = MS_WIRE_MALFORMED;
	if (!ms_wire_within(buf, len, bound, status, reason))
		return NULL;
	if (!ms_wire_scan(buf, len, reason))
		return NULL;
	up = head(buf, len, alloc, reason);
	if (up == NULL)
		return NULL;
	if (up->protocol > MS_PROTOCOL)
	{
		*status = MS_WIRE_LATER_PROTOCOL;
		ms_refuse(reason, "protocol %u is later than this build's %d", up->protocol, MS_PROTOCOL);
		return up;
	}
	if (!ms_up_check(up, reason) || !lists_ok(buf, len, alloc, status, reason))
	{
		if (*status == MS_WIRE_OK)
			*status = MS_WIRE_MALFORMED;
		sync__up__free_unpacked(up, alloc);
		return NULL;
	}
	*status = MS_WIRE_OK;
	return up;
}

bool
ms_up_next(const uint8_t *buf, size_t len, uint32_t field, size_t *pos,
		   const uint8_t **elem, size_t *elem_len)
{
	ms_pb_field f;

	while (next_field(buf, len, pos, &f))
		if (f.number == field && f.wire == MS_PB_LEN)
		{
			*elem = f.bytes;
			*elem_len = f.len;
			return true;
		}
	return false;
}

void
ms_rows_open(ms_rows_reader *r, const uint8_t *rows, size_t len)
{
	char		reason[MS_REASON_MAX];

	memset(r, 0, sizeof *r);
	r->buf = rows;
	r->len = len;
	if (!rows_table(rows, len, r->table, reason))
		r->table[0] = '\0';
}

bool
ms_rows_next(ms_rows_reader *r, ms_allocator *alloc, Sync__Key **key,
			 const uint8_t **row, size_t *row_len)
{
	const uint8_t *k;
	size_t		kn;

	*key = NULL;
	*row = NULL;
	*row_len = 0;
	if (ms_up_next(r->buf, r->len, MS_FIELD_ROWS_UPSERTS, &r->upsert_at, row, row_len))
	{
		if (!ms_up_next(r->buf, r->len, MS_FIELD_ROWS_KEYS, &r->key_at, &k, &kn))
			return false;		/* ms_up_read counted one key per upsert */
	}
	else if (!ms_up_next(r->buf, r->len, MS_FIELD_ROWS_DELETES, &r->delete_at, &k, &kn))
		return false;
	*key = sync__key__unpack(alloc, kn, k);
	return *key != NULL;
}
