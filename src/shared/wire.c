/*-------------------------------------------------------------------------
 * wire.c
 *	  Decoding, checking and packing the messages of sync.proto.
 *-------------------------------------------------------------------------
 */
#include "wire.h"
#include "key.h"
#include "lane.h"
#include "pbwrite.h"
#include "row.h"
#include "seal.h"
#include "sign.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * scan: the fields of buf[start, end), and of every field the descriptor
 * (when given) says is a message, so a field number 0 is refused however
 * deep: protobuf-c takes one spelled in two bytes (0x81 0x00) and packs it
 * again in one, which it then refuses, so a replica would store a schema
 * it cannot read back
 */
static bool
scan(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t start, size_t end,
	 char reason[MS_REASON_MAX])
{
	size_t		pos = start;

	while (pos < end)
	{
		size_t		at = pos;
		ms_pb_field f;
		ms_pb_next_result r = ms_pb_next(buf, end, &pos, &f);
		const ProtobufCFieldDescriptor *field;

		if (r == MS_PB_BROKEN_TAG)
			return ms_refuse(reason, "truncated field tag at byte %zu", at);
		if (f.number == 0 || f.number > 536870911)
			return ms_refuse(reason, "invalid field number at byte %zu", at);
		if (r == MS_PB_BROKEN_VALUE)
			switch (f.wire)
			{
				case MS_PB_VARINT:
					return ms_refuse(reason, "truncated varint of field %llu at byte %zu",
									 (unsigned long long) f.number, at);
				case MS_PB_FIXED64:
					return ms_refuse(reason, "truncated 64-bit field %llu at byte %zu",
									 (unsigned long long) f.number, at);
				case MS_PB_LEN:
					return ms_refuse(reason, "truncated field %llu at byte %zu: its length runs past the end",
									 (unsigned long long) f.number, at);
				case MS_PB_FIXED32:
					return ms_refuse(reason, "truncated 32-bit field %llu at byte %zu",
									 (unsigned long long) f.number, at);
				default:
					return ms_refuse(reason, "field %llu at byte %zu has unsupported wire type %u",
									 (unsigned long long) f.number, at, (unsigned) f.wire);
			}
		if (f.wire != MS_PB_LEN)
			continue;
		field = desc ? protobuf_c_message_descriptor_get_field(desc, (unsigned) f.number) : NULL;
		if (field != NULL && field->type == PROTOBUF_C_TYPE_MESSAGE &&
			!scan(field->descriptor, buf, (size_t) (f.bytes - buf), (size_t) (f.bytes - buf) + f.len, reason))
			return false;
	}
	return true;
}

bool
ms_wire_scan(const uint8_t *buf, size_t len, char reason[MS_REASON_MAX])
{
	return scan(NULL, buf, 0, len, reason);
}

static bool
check_string(const char *s, const char *what, char reason[MS_REASON_MAX])
{
	if (s == NULL)
		return ms_refuse(reason, "%s is missing", what);
	if (!ms_utf8_valid(s, strlen(s)))
		return ms_refuse(reason, "%s is not valid UTF-8", what);
	return true;
}

static bool
check_name(const char *s, const char *what, char reason[MS_REASON_MAX])
{
	if (!check_string(s, what, reason))
		return false;
	if (s[0] == '\0')
		return ms_refuse(reason, "%s is empty", what);
	if (strlen(s) > MS_NAME_MAX)
		return ms_refuse(reason, "%s is longer than %d bytes", what, MS_NAME_MAX);
	return true;
}

static bool
check_bytes(ProtobufCBinaryData b, size_t want, bool may_be_empty,
			const char *what, char reason[MS_REASON_MAX])
{
	if (b.len == 0 && may_be_empty)
		return true;
	if (b.len != want)
		return ms_refuse(reason, "%s has %zu bytes, not %zu", what, b.len, want);
	return true;
}

static bool
check_key(const Sync__Key *k, const char *table, char reason[MS_REASON_MAX])
{
	if (k == NULL || k->n_parts == 0)
		return ms_refuse(reason, "a key of table \"%s\" has no parts", table);
	for (size_t i = 0; i < k->n_parts; i++)
	{
		if (!check_string(k->parts[i], "a key part", reason))
			return false;
		if (strlen(k->parts[i]) > MS_KEY_PART_MAX)
			return ms_refuse(reason, "a key part of table \"%s\" is too long", table);
	}
	return true;
}

bool
ms_rows_check(const Sync__Rows *r, char reason[MS_REASON_MAX])
{
	if (!check_name(r->table, "a table name", reason))
		return false;
	if (r->n_keys != r->n_upserts)
		return ms_refuse(reason, "table \"%s\" has %zu upserts but %zu keys",
					r->table, r->n_upserts, r->n_keys);
	for (size_t i = 0; i < r->n_keys; i++)
		if (!check_key(r->keys[i], r->table, reason))
			return false;
	for (size_t i = 0; i < r->n_deletes; i++)
		if (!check_key(r->deletes[i], r->table, reason))
			return false;
	for (size_t i = 0; i < r->n_replaces; i++)
		if (!check_key(r->replaces[i], r->table, reason))
			return false;
	return true;
}

/*
 * A Table's columns by name, or by id: places (+1, 0 empty) in a table
 * open-addressed on the stack, since a Table has at most
 * MS_ROW_COLUMNS_MAX columns: every lookup of a check is constant, where a
 * walk of the columns made a table of many columns cost their square.
 */
#define COLUMN_SLOTS (2 * MS_ROW_COLUMNS_MAX)

typedef struct column_index
{
	uint16_t	slot[COLUMN_SLOTS];
} column_index;

static uint32_t
name_hash(const char *s)
{
	uint32_t	h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t) *s) * 16777619u;
	return h;
}

/* index_name: place column i; the place of a column of its name already there, or -1 */
static int
index_name(column_index *ix, const Sync__Table *t, size_t i)
{
	uint32_t	h = name_hash(t->columns[i]->name) & (COLUMN_SLOTS - 1);

	for (; ix->slot[h] != 0; h = (h + 1) & (COLUMN_SLOTS - 1))
		if (strcmp(t->columns[ix->slot[h] - 1]->name, t->columns[i]->name) == 0)
			return ix->slot[h] - 1;
	ix->slot[h] = (uint16_t) (i + 1);
	return -1;
}

/* index_id: the same by id (0, none, is never placed) */
static int
index_id(column_index *ix, const Sync__Table *t, size_t i)
{
	uint32_t	h = (t->columns[i]->id * 2654435761u) & (COLUMN_SLOTS - 1);

	for (; ix->slot[h] != 0; h = (h + 1) & (COLUMN_SLOTS - 1))
		if (t->columns[ix->slot[h] - 1]->id == t->columns[i]->id)
			return ix->slot[h] - 1;
	ix->slot[h] = (uint16_t) (i + 1);
	return -1;
}

static bool
has_column(const column_index *ix, const Sync__Table *t, const char *name)
{
	for (uint32_t h = name_hash(name) & (COLUMN_SLOTS - 1); ix->slot[h] != 0; h = (h + 1) & (COLUMN_SLOTS - 1))
		if (strcmp(t->columns[ix->slot[h] - 1]->name, name) == 0)
			return true;
	return false;
}

/*
 * check_evolving: what a schema change matches and adds by (protocol.md
 * 5.4): no two columns share an id, and every unique index names columns.
 */
static bool
check_evolving(const Sync__Table *t, const column_index *names, char reason[MS_REASON_MAX])
{
	column_index ids;

	memset(&ids, 0, sizeof ids);
	for (size_t i = 0; i < t->n_columns; i++)
	{
		int			j = t->columns[i]->id != 0 ? index_id(&ids, t, i) : -1;

		if (j >= 0)
			return ms_refuse(reason, "columns \"%s\" and \"%s\" of table \"%s\" have one id",
							 t->columns[j]->name, t->columns[i]->name, t->name);
	}
	for (size_t i = 0; i < t->n_unique; i++)
	{
		const Sync__Unique *u = t->unique[i];

		if (!check_name(u->name, "a unique index", reason))
			return false;
		if (u->n_columns == 0)
			return ms_refuse(reason, "unique index \"%s\" of table \"%s\" has no columns", u->name, t->name);
		for (size_t j = 0; j < u->n_columns; j++)
		{
			if (!check_name(u->columns[j], "a unique index's column", reason))
				return false;
			if (!has_column(names, t, u->columns[j]))
				return ms_refuse(reason, "column \"%s\" of unique index \"%s\" of table \"%s\" is not a column",
								 u->columns[j], u->name, t->name);
		}
	}
	return true;
}

bool
ms_table_check(const Sync__Table *t, char reason[MS_REASON_MAX])
{
	static const char *const types[] = {"INTEGER", "REAL", "TEXT", "BLOB"};
	column_index names;

	if (!check_name(t->name, "a table name", reason))
		return false;
	if (strcmp(t->mirror, "catalog") != 0 && strcmp(t->mirror, "record") != 0 && strcmp(t->mirror, "setting") != 0)
		return ms_refuse(reason, "table \"%s\" has unknown mirror \"%.20s\"", t->name, t->mirror);
	if (strcmp(t->codec, "json") != 0 && strcmp(t->codec, "proto") != 0)
		return ms_refuse(reason, "table \"%s\" has unknown codec \"%.20s\"", t->name, t->codec);
	if (t->n_columns == 0)
		return ms_refuse(reason, "table \"%s\" has no columns", t->name);
	/* more than a row can have: no server writes one (PostgreSQL's tables have at most 1600) */
	if (t->n_columns > MS_ROW_COLUMNS_MAX)
		return ms_refuse(reason, "table \"%s\" has %zu columns, more than a row can have (%d)", t->name,
						 t->n_columns, MS_ROW_COLUMNS_MAX);
	memset(&names, 0, sizeof names);
	for (size_t i = 0; i < t->n_columns; i++)
	{
		const Sync__Column *c = t->columns[i];
		bool		known = false;

		if (!check_name(c->name, "a column name", reason))
			return false;
		for (size_t j = 0; j < sizeof types / sizeof types[0]; j++)
			known |= strcmp(c->type, types[j]) == 0;
		if (!known)
			return ms_refuse(reason, "column \"%s\" of table \"%s\" has unknown type \"%.20s\"",
						c->name, t->name, c->type);
		if (!check_string(c->server_type, "a server type", reason))
			return false;
		if (index_name(&names, t, i) >= 0)
			return ms_refuse(reason, "table \"%s\" names column \"%s\" twice", t->name, c->name);
	}
	if (t->n_key == 0)
		return ms_refuse(reason, "table \"%s\" has no key", t->name);
	for (size_t i = 0; i < t->n_key; i++)
	{
		if (!check_name(t->key[i], "a key column", reason))
			return false;
		if (!has_column(&names, t, t->key[i]))
			return ms_refuse(reason, "key column \"%s\" of table \"%s\" is not a column",
						t->key[i], t->name);
	}
	for (size_t i = 0; i < t->n_foreign_keys; i++)
	{
		const Sync__ForeignKey *fk = t->foreign_keys[i];

		if (!check_name(fk->table, "a referenced table", reason))
			return false;
		if (fk->n_columns == 0 || fk->n_columns != fk->n_references)
			return ms_refuse(reason, "a foreign key of table \"%s\" has %zu columns and %zu references",
						t->name, fk->n_columns, fk->n_references);
		for (size_t j = 0; j < fk->n_columns; j++)
		{
			if (!check_name(fk->columns[j], "a foreign key column", reason) ||
				!check_name(fk->references[j], "a referenced column", reason))
				return false;
			if (!has_column(&names, t, fk->columns[j]))
				return ms_refuse(reason, "foreign key column \"%s\" of table \"%s\" is not a column",
							fk->columns[j], t->name);
		}
	}
	if (!check_string(t->retired, "a retired column", reason) ||
		!check_string(t->origin, "an origin column", reason) ||
		!check_string(t->version, "a version column", reason))
		return false;
	if (t->retired[0] && !has_column(&names, t, t->retired))
		return ms_refuse(reason, "retired column \"%s\" of table \"%s\" is not a column", t->retired, t->name);
	if (t->origin[0] && !has_column(&names, t, t->origin))
		return ms_refuse(reason, "origin column \"%s\" of table \"%s\" is not a column", t->origin, t->name);
	/* a setting is one row per replica: keyed by its origin alone */
	if (strcmp(t->mirror, "setting") == 0 &&
		(!t->origin[0] || t->n_key != 1 || strcmp(t->key[0], t->origin) != 0))
		return ms_refuse(reason, "setting table \"%s\" is not keyed by its origin alone", t->name);
	if (t->version[0] && !has_column(&names, t, t->version))
		return ms_refuse(reason, "version column \"%s\" of table \"%s\" is not a column", t->version, t->name);
	if (!check_string(t->lane, "a lane", reason) || !ms_lane_check(t->lane, strlen(t->lane), reason))
		return false;
	return check_evolving(t, &names, reason);
}

static bool
check_down(const Sync__Down *d, char reason[MS_REASON_MAX])
{
	if (d->begin != NULL)
		for (size_t i = 0; i < d->begin->n_schema; i++)
			if (!ms_table_check(d->begin->schema[i], reason))
				return false;
	for (size_t i = 0; i < d->n_tables; i++)
		if (!ms_rows_check(d->tables[i], reason))
			return false;
	for (size_t i = 0; i < d->n_schema; i++)
		if (!ms_table_check(d->schema[i], reason))
			return false;
	for (size_t i = 0; i < d->n_let_go; i++)
		if (!check_name(d->let_go[i], "a table let go", reason))
			return false;
	for (size_t i = 0; i < d->n_wishes; i++)
		if (!ms_wish_check(d->wishes[i], reason))
			return false;
	return true;
}

bool
ms_wish_check(const Sync__Wish *w, char reason[MS_REASON_MAX])
{
	if (w->id == 0)
		return ms_refuse(reason, "a wish is numbered 0");
	if (!check_name(w->table, "a wish's table", reason) ||
		!check_key(w->key, w->table, reason) ||
		!check_string(w->values, "a wish's values", reason) ||
		!check_string(w->apply, "a wish's apply", reason) ||
		!check_string(w->expected, "a wish's expected row", reason))
		return false;
	if (w->key->n_parts != 1)
		return ms_refuse(reason, "a wish for table \"%s\" names a key of %zu parts, not its origin alone",
						 w->table, w->key->n_parts);
	if (strcmp(w->apply, "always") != 0 && strcmp(w->apply, "if_unchanged") != 0)
		return ms_refuse(reason, "a wish applies \"%.40s\", neither always nor if_unchanged", w->apply);
	return true;
}

/* check_sqlstate: "" (none said), or five digits and capital letters */
static bool
check_sqlstate(const char *s, const char *what, char reason[MS_REASON_MAX])
{
	if (!check_string(s, what, reason))
		return false;
	if (s[0] == '\0')
		return true;
	for (int i = 0; i < 5; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z')))
			return ms_refuse(reason, "%s is not a SQLSTATE", what);
	if (s[5] != '\0')
		return ms_refuse(reason, "%s is not a SQLSTATE", what);
	return true;
}

static bool
check_refusal(const Sync__Refusal *r, char reason[MS_REASON_MAX])
{
	if (!check_name(r->table, "a refused row's table", reason) ||
		!check_key(r->key, r->table, reason) ||
		!check_string(r->reason, "a refusal's reason", reason) ||
		!check_sqlstate(r->sqlstate, "a refusal's SQLSTATE", reason))
		return false;
	return true;
}

/* check_backlog: a table's backlog, its reasons for rows set aside few and short */
static bool
check_backlog(const Sync__Backlog *b, char reason[MS_REASON_MAX])
{
	if (!check_name(b->table, "a backlog's table", reason))
		return false;
	if (b->n_aside > MS_ASIDE_MAX)
		return ms_refuse(reason, "the backlog of table \"%s\" gives more than %d reasons", b->table, MS_ASIDE_MAX);
	for (size_t i = 0; i < b->n_aside; i++)
	{
		const Sync__SetAside *a = b->aside[i];

		if (!check_string(a->reason, "a reason rows are set aside", reason) ||
			!check_sqlstate(a->sqlstate, "the SQLSTATE rows are set aside with", reason) ||
			(a->key != NULL && !check_key(a->key, b->table, reason)))
			return false;
		if (strlen(a->reason) > MS_ASIDE_REASON_MAX)
			return ms_refuse(reason, "a reason rows of table \"%s\" are set aside is longer than %d bytes",
							 b->table, MS_ASIDE_REASON_MAX);
	}
	return true;
}

bool
ms_to_replica_check(const Sync__ToReplica *m, char reason[MS_REASON_MAX])
{
	if (m->protocol == 0)
		return ms_refuse(reason, "the message names no protocol");
	if (!check_bytes(m->replica, MS_REPLICA_BYTES, false, "the replica", reason) ||
		!check_bytes(m->epoch, MS_EPOCH_BYTES, false, "the epoch", reason) ||
		!check_bytes(m->signature, MS_SIGNATURE_BYTES, true, "the signature", reason))
		return false;
	switch (m->body_case)
	{
		case SYNC__TO_REPLICA__BODY_FILED:
			if (m->number != 0)
				return ms_refuse(reason, "a Filed answer is numbered %llu, outside the chain it must be 0",
							(unsigned long long) m->number);
			if (!check_bytes(m->filed->send_id, MS_SEND_ID_BYTES, false, "the send id", reason))
				return false;
			if (!check_string(m->filed->lane, "the lane", reason) ||
				!ms_lane_check(m->filed->lane, strlen(m->filed->lane), reason))
				return false;
			for (size_t i = 0; i < m->filed->n_refused; i++)
				if (!check_refusal(m->filed->refused[i], reason))
					return false;
			for (size_t i = 0; i < m->filed->n_dropped; i++)
				if (!check_refusal(m->filed->dropped[i], reason))
					return false;
			for (size_t i = 0; i < m->filed->n_kept; i++)
				if (!check_refusal(m->filed->kept[i], reason))
					return false;
			for (size_t i = 0; i < m->filed->n_tables; i++)
				if (!check_name(m->filed->tables[i]->table, "a filed table's name", reason))
					return false;
			for (size_t i = 0; i < m->filed->n_again; i++)
				if (!check_refusal(m->filed->again[i], reason))
					return false;
			return true;
		case SYNC__TO_REPLICA__BODY_DOWN:
		case SYNC__TO_REPLICA__BODY_END_SNAPSHOT:
			break;
		default:
			return ms_refuse(reason, "the message has no body");
	}
	if (m->number == 0)
		return ms_refuse(reason, "the message is numbered 0");
	if (m->previous >= m->number)
		return ms_refuse(reason, "message %llu names a previous message %llu that is not before it",
					(unsigned long long) m->number, (unsigned long long) m->previous);
	if (!check_bytes(m->nonce, MS_NONCE_BYTES, false, "the nonce", reason) ||
		!check_bytes(m->seal, MS_SEAL_BYTES, false, "the seal", reason) ||
		!check_bytes(m->previous_nonce, MS_NONCE_BYTES, m->previous == 0, "the previous nonce", reason))
		return false;
	if (m->previous == 0 && m->previous_nonce.len != 0)
		return ms_refuse(reason, "the message names a previous nonce but no previous message");
	if (m->body_case == SYNC__TO_REPLICA__BODY_END_SNAPSHOT)
	{
		for (size_t i = 0; i < m->end_snapshot->n_tables; i++)
			if (!check_name(m->end_snapshot->tables[i], "a table name", reason))
				return false;
		return true;
	}
	return check_down(m->down, reason);
}

bool
ms_applied_check(const Sync__Applied *a, char reason[MS_REASON_MAX])
{
	bool		none = a->number == 0;

	if (!check_bytes(a->epoch, MS_EPOCH_BYTES, none, "the applied epoch", reason) ||
		!check_bytes(a->nonce, MS_NONCE_BYTES, none, "the applied nonce", reason) ||
		!check_bytes(a->seal, MS_SEAL_BYTES, none, "the applied seal", reason))
		return false;
	if (none && (a->nonce.len || a->seal.len))
		return ms_refuse(reason, "the upload names a nonce or seal but no applied message");
	return true;
}

bool
ms_up_check(const Sync__Up *m, char reason[MS_REASON_MAX])
{
	if (m->protocol == 0)
		return ms_refuse(reason, "the upload names no protocol");
	if (!check_bytes(m->replica, MS_REPLICA_BYTES, false, "the replica", reason) ||
		!check_bytes(m->send_id, MS_SEND_ID_BYTES, false, "the send id", reason))
		return false;
	if (m->applied != NULL && !ms_applied_check(m->applied, reason))
		return false;
	if (!check_bytes(m->gap_epoch, MS_EPOCH_BYTES, true, "the gap epoch", reason))
		return false;
	/* "" from a library before it (protobuf-c's default) */
	if (!check_string(m->build, "the build", reason))
		return false;
	if (strlen(m->build) > MS_BUILD_MAX)
		return ms_refuse(reason, "the build is longer than %d bytes", MS_BUILD_MAX);
	if (!check_string(m->lane, "the lane", reason) || !ms_lane_check(m->lane, strlen(m->lane), reason))
		return false;
	for (size_t i = 0; i < m->n_rows; i++)
		if (!ms_rows_check(m->rows[i], reason))
			return false;
	for (size_t i = 0; i < m->n_refusals; i++)
		if (!check_refusal(m->refusals[i], reason))
			return false;
	for (size_t i = 0; i < m->n_digests; i++)
	{
		if (!check_name(m->digests[i]->table, "a digest's table", reason))
			return false;
		if (m->digests[i]->values.len != 0 && m->digests[i]->values.len != 8)
			return ms_refuse(reason, "the values digest of table \"%s\" is %zu bytes, not 8",
							 m->digests[i]->table, m->digests[i]->values.len);
	}
	for (size_t i = 0; i < m->n_backlog; i++)
		if (!check_backlog(m->backlog[i], reason))
			return false;
	if (m->n_wish_fates > MS_WISH_FATES_MAX)
		return ms_refuse(reason, "the upload carries more than %d wish fates", MS_WISH_FATES_MAX);
	for (size_t i = 0; i < m->n_wish_fates; i++)
	{
		const Sync__WishFate *f = m->wish_fates[i];

		if (f->id == 0)
			return ms_refuse(reason, "a wish fate names wish 0");
		if (!check_string(f->fate, "a wish's fate", reason) || !check_string(f->why, "why a wish's fate", reason))
			return false;
		if (strcmp(f->fate, "applied") != 0 && strcmp(f->fate, "declined") != 0 && strcmp(f->fate, "superseded") != 0)
			return ms_refuse(reason, "a wish's fate \"%.40s\" is none of applied, declined, superseded", f->fate);
		if (strlen(f->why) > MS_REASON_MAX)
			return ms_refuse(reason, "why a wish's fate is longer than %d bytes", MS_REASON_MAX);
	}
	return true;
}

/*
 * the caller's allocator (protobuf-c's malloc when NULL), noting a failure:
 * out of memory is no malformed message
 */
typedef struct noting
{
	ms_allocator *alloc;
	bool		failed;
} noting;

static void *
noting_alloc(void *data, size_t size)
{
	noting	   *n = data;
	void	   *p = n->alloc ? n->alloc->alloc(n->alloc->allocator_data, size) : malloc(size);

	if (p == NULL)
		n->failed = true;
	return p;
}

static void
noting_free(void *data, void *p)
{
	noting	   *n = data;

	if (n->alloc)
		n->alloc->free(n->alloc->allocator_data, p);
	else
		free(p);
}

bool
ms_wire_within(const uint8_t *buf, size_t len, size_t bound, ms_wire_status *status, char reason[MS_REASON_MAX])
{
	reason[0] = '\0';
	if (len > bound)
	{
		*status = MS_WIRE_TOO_LARGE;
		return ms_refuse(reason, "%zu bytes is over the bound of %zu", len, bound);
	}
	if (buf == NULL && len > 0)
	{
		*status = MS_WIRE_MALFORMED;
		return ms_refuse(reason, "no bytes");
	}
	return true;
}

/* decode: bound, scan, unpack, check; the shared steps of both directions */
static void *
decode(const ProtobufCMessageDescriptor *desc,
	   bool (*check) (const void *, char *),
	   uint32_t (*protocol) (const void *),
	   const uint8_t *buf, size_t len, size_t bound, ms_allocator *alloc,
	   ms_wire_status *status, char reason[MS_REASON_MAX])
{
	ProtobufCMessage *m;

	if (!ms_wire_within(buf, len, bound, status, reason))
		return NULL;
	if (!scan(desc, buf, 0, len, reason))
	{
		*status = MS_WIRE_MALFORMED;
		return NULL;
	}
	{
		noting		n = {alloc, false};
		ms_allocator wrapped = {noting_alloc, noting_free, &n};

		m = protobuf_c_message_unpack(desc, &wrapped, len, buf);
		if (m == NULL && n.failed)
		{
			*status = MS_WIRE_NO_MEMORY;
			ms_refuse(reason, "out of memory decoding a %s", desc->short_name);
			return NULL;
		}
	}
	if (m == NULL)
	{
		*status = MS_WIRE_MALFORMED;
		ms_refuse(reason, "the bytes are not a well-formed %s (a field has the wrong type or length)",
			 desc->short_name);
		return NULL;
	}
	if (protocol(m) > MS_PROTOCOL)
	{
		*status = MS_WIRE_LATER_PROTOCOL;
		ms_refuse(reason, "protocol %u is later than this build's %d", protocol(m), MS_PROTOCOL);
		return m;
	}
	if (!check(m, reason))
	{
		protobuf_c_message_free_unpacked(m, alloc);
		*status = MS_WIRE_MALFORMED;
		return NULL;
	}
	*status = MS_WIRE_OK;
	return m;
}

/*
 * The replica's read of a message to it (ms_to_replica_read): a Down's Rows,
 * nearly all of a snapshot's bytes, read by one walk of their own; the rest
 * unpacked by protobuf-c as ms_to_replica_decode does.  Anything but a
 * plain well-formed Down (a body field given twice, a broken field, a field
 * number 0, a later protocol) is read by ms_to_replica_decode instead, so
 * every refusal and its reason are the same.
 */
typedef enum fast
{
	FAST_OK,
	FAST_NO_MEMORY,
	FAST_OTHER					/* not for this path: decode it whole */
} fast;

/* a field's number is one protobuf-c and the scan take */
static inline bool
plain_number(uint64_t number)
{
	return number != 0 && number <= 536870911;
}

/*
 * next: ms_pb_next, with a field of one byte of tag and one of length (a
 * Rows' upserts and keys, nearly all) read here: the same checks, inline
 */
static inline ms_pb_next_result
next(const uint8_t *buf, size_t len, size_t *pos, ms_pb_field *f)
{
	size_t		p = *pos;

	if (len - p >= 2 && buf[p] < 0x80 && (buf[p] & 7) == MS_PB_LEN && buf[p + 1] < 0x80 &&
		buf[p + 1] <= len - p - 2)
	{
		f->number = buf[p] >> 3;
		f->wire = MS_PB_LEN;
		f->len = buf[p + 1];
		f->bytes = buf + p + 2;
		*pos = p + 2 + f->len;
		return MS_PB_FIELD;
	}
	return ms_pb_next(buf, len, pos, f);
}

/*
 * plain_ascii: a short part of ASCII without NUL (a key's nearly always),
 * checked in line; false is no verdict: ms_utf8_valid decides then
 */
static inline bool
plain_ascii(const uint8_t *p, size_t n)
{
	if (n > 16)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char) (p[i] - 1) >= 0x7f)
			return false;
	return true;
}

/*
 * read_key: the Key at p (len bytes): its parts copied, each ended by a
 * NUL as protobuf-c ends a string, to *strs, their pointers to *ptrs
 * (each advanced).  A part takes at least its tag and length besides its
 * bytes: len / 2 pointers and len bytes are enough.
 */
static bool
read_key(const uint8_t *p, size_t len, Sync__Key *k, char ***ptrs, char **strs)
{
	size_t		pos = 0;
	ms_pb_field f;
	ms_pb_next_result r;

	sync__key__init(k);
	k->parts = *ptrs;
	while ((r = next(p, len, &pos, &f)) == MS_PB_FIELD)
	{
		if (!plain_number(f.number))
			return false;
		if (f.number != 1)
			continue;			/* unknown: protobuf-c keeps it aside, nothing reads it */
		/*
		 * check_key's checks, here: a part it would refuse, or one with a
		 * NUL (which it would read cut short), goes to the decode
		 */
		if (f.wire != MS_PB_LEN || f.len > MS_KEY_PART_MAX ||
			!(plain_ascii(f.bytes, f.len) || ms_utf8_valid((const char *) f.bytes, f.len)))
			return false;
		memcpy(*strs, f.bytes, f.len);
		(*strs)[f.len] = '\0';
		k->parts[k->n_parts++] = *strs;
		*strs += f.len + 1;
	}
	*ptrs += k->n_parts;
	return r == MS_PB_END && k->n_parts > 0;
}

/* align: n rounded up for a pointer */
static inline size_t
align(size_t n)
{
	return (n + 7) & ~(size_t) 7;
}

/*
 * read_rows: the Rows at p (len bytes) into r, in one block of alloc's: a
 * first walk counts the fields and checks each is whole, of a plain number
 * and of the wire type of its field; the second places them.  The upserts
 * point into the message's bytes (the caller keeps them), the table and
 * keys are copied.
 */
static fast
read_rows(const uint8_t *p, size_t len, noting *alloc, Sync__Rows *r)
{
	size_t		n[6] = {0};
	size_t		keybytes = 0;
	const uint8_t *table_at = NULL;	/* the last table name given: protobuf-c's */
	size_t		table_len = 0;
	size_t		pos = 0;
	size_t		nkeys;
	size_t		size;
	ms_pb_field f;
	ms_pb_next_result res;
	uint8_t    *block;
	ProtobufCBinaryData *upserts;
	Sync__Key  *keys;
	Sync__Key **keyp;
	char	  **ptrs;
	char	   *strs;
	char	   *table;

	while ((res = next(p, len, &pos, &f)) == MS_PB_FIELD)
	{
		if (!plain_number(f.number))
			return FAST_OTHER;
		if (f.number > 5)
			continue;
		if (f.wire != MS_PB_LEN)
			return FAST_OTHER;
		n[f.number]++;
		if (f.number == 1)
		{
			table_at = f.bytes;
			table_len = f.len;
		}
		else if (f.number >= 3)
			keybytes += f.len;
	}
	if (res != MS_PB_END)
		return FAST_OTHER;
	nkeys = n[3] + n[4] + n[5];
	size = align(table_len + 1) + align(sizeof(ProtobufCBinaryData) * n[2]) + align(sizeof(Sync__Key) * nkeys) +
		sizeof(Sync__Key *) * nkeys + sizeof(char *) * (keybytes / 2) + keybytes;
	block = noting_alloc(alloc, size ? size : 1);
	if (block == NULL)
		return FAST_NO_MEMORY;
	table = (char *) block;
	upserts = (ProtobufCBinaryData *) (block + align(table_len + 1));
	keys = (Sync__Key *) ((uint8_t *) upserts + align(sizeof(ProtobufCBinaryData) * n[2]));
	keyp = (Sync__Key **) ((uint8_t *) keys + align(sizeof(Sync__Key) * nkeys));
	ptrs = (char **) (keyp + nkeys);
	strs = (char *) (ptrs + keybytes / 2);

	sync__rows__init(r);
	if (table_at != NULL)
	{
		memcpy(table, table_at, table_len);
		table[table_len] = '\0';
		r->table = table;
	}
	r->upserts = n[2] ? upserts : NULL;
	r->keys = n[3] ? keyp : NULL;
	r->deletes = n[4] ? keyp + n[3] : NULL;
	r->replaces = n[5] ? keyp + n[3] + n[4] : NULL;
	pos = 0;
	while (next(p, len, &pos, &f) == MS_PB_FIELD)
	{
		Sync__Key  *k;

		switch (f.number)
		{
			case 2:
				upserts[r->n_upserts].data = f.len ? (uint8_t *) f.bytes : NULL;
				upserts[r->n_upserts++].len = f.len;
				break;
			case 3:
			case 4:
			case 5:
				k = keys++;
				if (!read_key(f.bytes, f.len, k, &ptrs, &strs))
					return FAST_OTHER;
				if (f.number == 3)
					r->keys[r->n_keys++] = k;
				else if (f.number == 4)
					r->deletes[r->n_deletes++] = k;
				else
					r->replaces[r->n_replaces++] = k;
				break;
			default:
				break;
		}
	}
	/* the rest of ms_rows_check (its keys' checks were read_key's) */
	{
		char		ignored[MS_REASON_MAX];

		if (!check_name(r->table, "a table name", ignored) || r->n_keys != r->n_upserts)
			return FAST_OTHER;
	}
	return FAST_OK;
}

/*
 * read_fast: a Down's message, its Rows read by read_rows and the rest (the
 * head, the Down without its Rows: written again into a buffer of its own)
 * scanned and unpacked as decode does
 */
static fast
read_fast(const uint8_t *buf, size_t len, noting *alloc, Sync__ToReplica **out)
{
	size_t		pos = 0;
	size_t		at;
	size_t		body_at = 0;
	size_t		body_end = 0;
	const uint8_t *down = NULL;
	size_t		down_len = 0;
	size_t		kept = 0;		/* the Down's bytes but its Rows */
	size_t		ntables = 0;
	size_t		bodies = 0;
	ms_pb_field f;
	ms_pb_next_result res;
	uint8_t    *head;
	size_t		hlen;
	ProtobufCMessage *pm;
	ms_allocator wrapped = {noting_alloc, noting_free, alloc};
	Sync__ToReplica *m;
	Sync__Rows *rows;

	for (at = pos; (res = ms_pb_next(buf, len, &pos, &f)) == MS_PB_FIELD; at = pos)
	{
		if (!plain_number(f.number))
			return FAST_OTHER;
		if (f.number >= 9 && f.number <= 11)
			bodies++;
		if (f.number == 9 && f.wire == MS_PB_LEN)
		{
			down = f.bytes;
			down_len = f.len;
			body_at = at;
			body_end = pos;
		}
	}
	if (res != MS_PB_END || bodies != 1 || down == NULL)
		return FAST_OTHER;
	pos = 0;
	for (at = pos; (res = ms_pb_next(down, down_len, &pos, &f)) == MS_PB_FIELD; at = pos)
	{
		if (!plain_number(f.number))
			return FAST_OTHER;
		if (f.number == 2)
		{
			if (f.wire != MS_PB_LEN)
				return FAST_OTHER;
			ntables++;
		}
		else
			kept += pos - at;
	}
	if (res != MS_PB_END)
		return FAST_OTHER;

	/* the message but the Down's Rows: its fields in their order */
	head = noting_alloc(alloc, len + 1);
	if (head == NULL)
		return FAST_NO_MEMORY;
	memcpy(head, buf, body_at);
	hlen = body_at + ms_pb_len_head(head + body_at, 9, kept);
	pos = 0;
	for (at = pos; ms_pb_next(down, down_len, &pos, &f) == MS_PB_FIELD; at = pos)
		if (f.number != 2)
		{
			memcpy(head + hlen, down + at, pos - at);
			hlen += pos - at;
		}
	memcpy(head + hlen, buf + body_end, len - body_end);
	hlen += len - body_end;
	{
		char		ignored[MS_REASON_MAX];

		if (!scan(&sync__to_replica__descriptor, head, 0, hlen, ignored))
			return FAST_OTHER;
	}
	pm = protobuf_c_message_unpack(&sync__to_replica__descriptor, &wrapped, hlen, head);
	if (pm == NULL)
		return alloc->failed ? FAST_NO_MEMORY : FAST_OTHER;
	m = (Sync__ToReplica *) pm;
	if (m->protocol > MS_PROTOCOL || m->body_case != SYNC__TO_REPLICA__BODY_DOWN)
		return FAST_OTHER;

	/* the Rows, in their order */
	if (ntables > 0)
	{
		m->down->tables = noting_alloc(alloc, sizeof(Sync__Rows *) * ntables);
		rows = noting_alloc(alloc, sizeof(Sync__Rows) * ntables);
		if (m->down->tables == NULL || rows == NULL)
			return FAST_NO_MEMORY;
		pos = 0;
		while (ms_pb_next(down, down_len, &pos, &f) == MS_PB_FIELD)
		{
			fast		r;

			if (f.number != 2)
				continue;
			r = read_rows(f.bytes, f.len, alloc, rows);
			if (r != FAST_OK)
				return r;
			m->down->tables[m->down->n_tables++] = rows++;
		}
	}
	*out = m;
	return FAST_OK;
}

Sync__ToReplica *
ms_to_replica_read(const uint8_t *buf, size_t len, size_t bound, ms_allocator *arena,
				   ms_wire_status *status, char reason[MS_REASON_MAX])
{
	noting		n = {arena, false};
	Sync__ToReplica *m = NULL;

	if (!ms_wire_within(buf, len, bound, status, reason))
		return NULL;
	switch (read_fast(buf, len, &n, &m))
	{
		case FAST_OK:
			{
				/* its Rows checked as read: the rest as decode checks it */
				size_t		tables = m->down->n_tables;
				bool		ok;

				m->down->n_tables = 0;
				ok = ms_to_replica_check(m, reason);
				m->down->n_tables = tables;
				if (ok)
				{
					*status = MS_WIRE_OK;
					return m;
				}
				/* which check refuses first, and why: the decode's order says */
				reason[0] = '\0';
				break;
			}
		case FAST_NO_MEMORY:
			*status = MS_WIRE_NO_MEMORY;
			ms_refuse(reason, "out of memory decoding a %s", sync__to_replica__descriptor.short_name);
			return NULL;
		default:
			break;
	}
	/* what the arena holds of the attempt goes with it */
	return ms_to_replica_decode(buf, len, bound, arena, status, reason);
}

static bool
check_to_replica(const void *m, char *reason)
{
	return ms_to_replica_check(m, reason);
}

static bool
check_up(const void *m, char *reason)
{
	return ms_up_check(m, reason);
}

static uint32_t
protocol_to_replica(const void *m)
{
	return ((const Sync__ToReplica *) m)->protocol;
}

static uint32_t
protocol_up(const void *m)
{
	return ((const Sync__Up *) m)->protocol;
}

Sync__ToReplica *
ms_to_replica_decode(const uint8_t *buf, size_t len, size_t bound, ms_allocator *alloc,
					 ms_wire_status *status, char reason[MS_REASON_MAX])
{
	return decode(&sync__to_replica__descriptor, check_to_replica, protocol_to_replica,
				  buf, len, bound, alloc, status, reason);
}

Sync__Up *
ms_up_decode(const uint8_t *buf, size_t len, size_t bound, ms_allocator *alloc,
			 ms_wire_status *status, char reason[MS_REASON_MAX])
{
	return decode(&sync__up__descriptor, check_up, protocol_up,
				  buf, len, bound, alloc, status, reason);
}

Sync__Applied *
ms_applied_decode(const uint8_t *buf, size_t len, ms_allocator *alloc, char reason[MS_REASON_MAX])
{
	Sync__Applied *a;

	reason[0] = '\0';
	if (len > MS_APPLIED_MAX)
	{
		ms_refuse(reason, "%zu bytes is over the bound of %d", len, MS_APPLIED_MAX);
		return NULL;
	}
	if ((buf == NULL && len > 0) || !ms_wire_scan(buf, len, reason))
	{
		if (reason[0] == '\0')
			ms_refuse(reason, "no bytes");
		return NULL;
	}
	a = sync__applied__unpack(alloc, len, buf);
	if (a == NULL)
	{
		ms_refuse(reason, "the bytes are not a well-formed Applied (a field has the wrong type or length)");
		return NULL;
	}
	if (!ms_applied_check(a, reason))
	{
		sync__applied__free_unpacked(a, alloc);
		return NULL;
	}
	return a;
}

static void
head_message(const ms_head *h, Sync__ToReplica *m)
{
	sync__to_replica__init(m);
	m->protocol = h->protocol;
	m->epoch.data = (uint8_t *) h->epoch;
	m->epoch.len = h->epoch ? MS_EPOCH_BYTES : 0;
	m->number = h->number;
	m->nonce.data = (uint8_t *) h->nonce;
	m->nonce.len = h->nonce ? MS_NONCE_BYTES : 0;
	m->previous = h->previous;
	m->previous_nonce.data = (uint8_t *) h->previous_nonce;
	m->previous_nonce.len = h->previous_nonce ? MS_NONCE_BYTES : 0;
	m->seal.data = (uint8_t *) h->seal;
	m->seal.len = h->seal ? MS_SEAL_BYTES : 0;
	m->replica.data = (uint8_t *) h->replica;
	m->replica.len = h->replica ? MS_REPLICA_BYTES : 0;
	m->generation = h->generation;
	m->clock = h->clock;
}

size_t
ms_head_packed_size(const ms_head *h)
{
	Sync__ToReplica m;

	head_message(h, &m);
	return sync__to_replica__get_packed_size(&m);
}

size_t
ms_head_pack(const ms_head *h, uint8_t *out)
{
	Sync__ToReplica m;

	head_message(h, &m);
	return sync__to_replica__pack(&m, out);
}

static void
body_message(Sync__Down *down, Sync__EndSnapshot *end, Sync__Filed *filed, Sync__ToReplica *m)
{
	sync__to_replica__init(m);
	if (down)
	{
		m->body_case = SYNC__TO_REPLICA__BODY_DOWN;
		m->down = down;
	}
	else if (end)
	{
		m->body_case = SYNC__TO_REPLICA__BODY_END_SNAPSHOT;
		m->end_snapshot = end;
	}
	else if (filed)
	{
		m->body_case = SYNC__TO_REPLICA__BODY_FILED;
		m->filed = filed;
	}
}

size_t
ms_body_packed_size(Sync__Down *down, Sync__EndSnapshot *end, Sync__Filed *filed)
{
	Sync__ToReplica m;

	body_message(down, end, filed, &m);
	return sync__to_replica__get_packed_size(&m);
}

size_t
ms_body_pack(Sync__Down *down, Sync__EndSnapshot *end, Sync__Filed *filed, uint8_t *out)
{
	Sync__ToReplica m;

	body_message(down, end, filed, &m);
	return sync__to_replica__pack(&m, out);
}

size_t
ms_wire_key_size(const Sync__Key *k)
{
	size_t		total = 0;

	for (size_t i = 0; i < k->n_parts; i++)
	{
		size_t		n = strlen(k->parts[i]);

		total += ms_key_size(1, (const char *const *) &k->parts[i], &n);
	}
	return total;
}

size_t
ms_wire_key_write(const Sync__Key *k, char *out)
{
	size_t		pos = 0;

	for (size_t i = 0; i < k->n_parts; i++)
	{
		size_t		n = strlen(k->parts[i]);

		pos += ms_key_write(out + pos, 1, (const char *const *) &k->parts[i], &n);
	}
	return pos;
}
