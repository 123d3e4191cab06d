/*-------------------------------------------------------------------------
 * pack.c
 *	  Rows packed into the messages being filled (docs/design.md 4.7): each
 *	  replica's message under magic_sync.message_bytes, a snapshot's first
 *	  carrying its Begin, and all of them under magic_sync.fill_bytes,
 *	  ending at the same row so that replicas sent the same rows share the
 *	  bodies (record.c writes them).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "fields.h"
#include "pbwrite.h"
#include "recorder.h"
#include "settings.h"

/* what a message being filled starts with: grown as rows come, given back when it is written */
#define FILL_START 256

void
ms_fill_init(MemoryContext cxt, StringInfo s)
{
	s->data = MemoryContextAlloc(cxt, FILL_START);
	s->maxlen = FILL_START;
	s->len = 0;
	s->data[0] = '\0';
	s->cursor = 0;
}

/* empty s, and give back what a large message grew it to */
static void
fill_reset(StringInfo s)
{
	if (s->maxlen > FILL_START * 4)
	{
		MemoryContext cxt = GetMemoryChunkContext(s->data);

		pfree(s->data);
		ms_fill_init(cxt, s);
	}
	else
		resetStringInfo(s);
}

/* move the Rows being filled into Down */
static void
close_rows(target *tg)
{
	if (tg->rows_tab == 0)
		return;
	enlargeStringInfo(&tg->down, (int) ms_pb_len_field_size(MS_FIELD_DOWN_TABLES, tg->rows.len));
	tg->down.len += (int) ms_pb_len_head((uint8_t *) tg->down.data + tg->down.len, MS_FIELD_DOWN_TABLES, tg->rows.len);
	appendBinaryStringInfo(&tg->down, tg->rows.data, tg->rows.len);
	fill_reset(&tg->rows);
	tg->rows_tab = 0;
	tg->seg = NULL;
}

/* the message being filled, as a Down body */
static bool
has_content(target *tg)
{
	return tg->down.len > 0 || tg->rows_tab != 0;
}

static void start_message(recorder *r, target *tg);
static void down_body(recorder *r, const StringInfo down, StringInfo body);

/* write the message being filled, if it has anything (a snapshot's first always) */
void
ms_flush(recorder *r, target *tg)
{
	StringInfoData body;
	bool		start = tg->snapshot && !tg->begun;
	ListCell   *lc;

	if (!has_content(tg) && !start)
		return;
	/* a snapshot of no rows begins all the same: its Begin carries the schema */
	if (start)
		start_message(r, tg);
	close_rows(tg);
	down_body(r, &tg->down, &body);
	/* write_message resets the scratch context, body and all */
	ms_write_message(r, tg, &body, start, tg->upserts, tg->deletes);
	fill_reset(&tg->down);
	if (tg->whole_keys.data != NULL)
		fill_reset(&tg->whole_keys);
	tg->last_kind = 0;
	tg->upserts = tg->deletes = 0;
	/* a message's segments go with it, their keys too: a snapshot to many replicas writes thousands */
	foreach(lc, tg->segments)
	{
		segment    *seg = lfirst(lc);

		pfree(seg->first);
		pfree(seg->last);
	}
	list_free_deep(tg->segments);
	tg->segments = NIL;
	tg->seg = NULL;
}

/* Begin: the schema, shared, and how many rows this replica's snapshot carries, appended to down */
static void
pack_begin(recorder *r, target *tg, StringInfo down)
{
	size_t		rows = ms_pb_varint_field_size(MS_FIELD_BEGIN_ROWS, (uint64) tg->snapshot_rows);

	enlargeStringInfo(down, (int) ms_pb_len_field_size(MS_FIELD_DOWN_BEGIN, r->begin.len + rows));
	down->len += (int) ms_pb_len_head((uint8_t *) down->data, MS_FIELD_DOWN_BEGIN, r->begin.len + rows);
	appendBinaryStringInfo(down, r->begin.data, r->begin.len);
	down->len += (int) ms_pb_varint_field((uint8_t *) down->data + down->len,
										  MS_FIELD_BEGIN_ROWS, (uint64) tg->snapshot_rows);
}

/* start a message: a snapshot's first carries its Begin */
static void
start_message(recorder *r, target *tg)
{
	if (tg->snapshot && !tg->begun && tg->down.len == 0)
		pack_begin(r, tg, &tg->down);
}

/* a message of a Down of these fields, as a ToReplica body, in r's scratch (ms_write_placed resets it) */
static void
down_body(recorder *r, const StringInfo down, StringInfo body)
{
	MemoryContext old = MemoryContextSwitchTo(r->scratch);

	initStringInfo(body);
	MemoryContextSwitchTo(old);
	enlargeStringInfo(body, (int) ms_pb_len_field_size(MS_FIELD_TO_REPLICA_DOWN, down->len));
	body->len += (int) ms_pb_len_head((uint8_t *) body->data, MS_FIELD_TO_REPLICA_DOWN, down->len);
	appendBinaryStringInfo(body, down->data, down->len);
}

/*
 * ms_begin_first: tg's snapshot begins with a message of its Begin alone,
 * written last (ms_write_begin), when the rows of the tables read whole
 * are counted: its place in the chain is taken now, first, and its rows
 * follow it.  Counting them beforehand read every such table twice: a
 * tenth of a first sync's pass at 10^6 rows (plan.c).
 */
void
ms_begin_first(recorder *r, target *tg)
{
	Assert(tg->snapshot && !tg->begun);
	ms_place_next(r, tg, &tg->begin_place);
	tg->begin_later = true;
	tg->first_number = tg->begin_place.number;
	tg->begun = true;
}

/* ms_write_begin: the Begin ms_begin_first placed, with the rows the snapshot carried (tg's messages flushed) */
void
ms_write_begin(recorder *r, target *tg)
{
	StringInfoData down;
	StringInfoData body;

	Assert(tg->begin_later && tg->segments == NIL && tg->down.len == 0);
	tg->snapshot_rows += r->whole_read;
	initStringInfo(&down);
	pack_begin(r, tg, &down);
	down_body(r, &down, &body);
	ms_write_placed(r, tg, &body, true, 0, 0, &tg->begin_place);
	pfree(down.data);
	tg->begin_later = false;
}

/* bytes of a message whose Down has `down` bytes of fields and a Rows of `rows` bytes */
static size_t
message_size(size_t down, size_t rows)
{
	return HEAD_MAX + ms_pb_len_field_size(MS_FIELD_TO_REPLICA_DOWN, down + ms_pb_len_field_size(MS_FIELD_DOWN_TABLES, rows));
}

/* bytes tg's message would take with `fields` more bytes of one row of t */
static size_t
projected(target *tg, ms_table *t, char kind, size_t fields)
{
	if (tg->rows_tab == t->id && tg->rows_kind == kind)
		return message_size(tg->down.len, tg->rows.len + fields);
	return message_size(tg->down.len + (tg->rows_tab ? ms_pb_len_field_size(MS_FIELD_DOWN_TABLES, tg->rows.len) : 0),
						ms_pb_len_field_size(MS_FIELD_ROWS_TABLE, strlen(t->name)) + fields);
}

/*
 * flush_all: end every replica's message being filled.  The memory of the
 * messages being filled is bounded relay-wide (magic_sync.fill_bytes), not
 * only per message: a change broadcast to many replicas fills a message for
 * each.  They all end at the same row (bound_fill), so replicas sent the
 * same rows get the same bodies, stored once.
 */
static void
flush_all(recorder *r)
{
	HASH_SEQ_STATUS seq;
	target	   *tg;

	hash_seq_init(&seq, r->targets);
	while ((tg = hash_seq_search(&seq)) != NULL)
		ms_flush(r, tg);

	/*
	 * Every message ended: their memory goes at once.  Given back one by one,
	 * what each grew through on its way (256 bytes, 512, ... doubling) stayed
	 * in the context, free in sizes the next ones outgrow: messages to 10,000
	 * replicas growing in step held 120 MB of it under a bound of 64 MB.
	 */
	MemoryContextReset(r->fill);
	hash_seq_init(&seq, r->targets);
	while ((tg = hash_seq_search(&seq)) != NULL)
	{
		Assert(tg->down.len == 0 && tg->rows.len == 0 && tg->whole_keys.len == 0);
		ms_fill_init(r->fill, &tg->down);
		ms_fill_init(r->fill, &tg->rows);
		memset(&tg->whole_keys, 0, sizeof(StringInfoData));
	}
	r->fill_empty = MemoryContextMemAllocated(r->fill, false);
}

/*
 * over_fill: the messages being filled hold more than magic_sync.fill_bytes,
 * counted as their context holds it, free chunks and all.  So many replicas
 * that their empty messages alone take the bound end theirs once they hold
 * as much again: each time with something in them.
 */
static bool
over_fill(recorder *r)
{
	Size		held = MemoryContextMemAllocated(r->fill, false);

	return held > (Size) ms_fill_bytes * 1024 && held > 2 * r->fill_empty;
}

/*
 * bound_fill: past the relay-wide bound, every message ends early, before a
 * row goes to any of the n replicas getting it: so all end at the same row,
 * and replicas sent the same rows share the bodies.  Never between a
 * replica's upserts and its deletes.
 */
void
ms_bound_fill(recorder *r, const pg_uuid_t *ids, int n, char kind)
{
	if (!over_fill(r))
		return;
	if (kind == 'd')
		for (int i = 0; i < n; i++)
			if (ms_find_target(r, &ids[i])->last_kind == 'u')
				return;
	flush_all(r);
}

/* append one row (an upsert, or a delete when bytes is NULL) to tg's message */
void
ms_append(recorder *r, target *tg, ms_table *t, char kind, const char *key,
	   const char *bytes, int len, bool replace, bool whole)
{
	size_t		fields;
	MemoryContext old = MemoryContextSwitchTo(r->cxt);

	if (kind == 'u')
		fields = ms_pb_len_field_size(MS_FIELD_ROWS_UPSERTS, len) + ms_pb_len_field_size(MS_FIELD_ROWS_KEYS, r->key.len) +
			(replace ? ms_pb_len_field_size(MS_FIELD_ROWS_REPLACES, r->key.len) : 0);
	else
		fields = ms_pb_len_field_size(MS_FIELD_ROWS_DELETES, r->key.len);

	start_message(r, tg);
	if (projected(tg, t, kind, fields) > (size_t) ms_message_bytes)
	{
		ms_flush(r, tg);
		start_message(r, tg);
	}
	if (tg->rows_tab != t->id || tg->rows_kind != kind)
	{
		close_rows(tg);
		tg->rows_tab = t->id;
		tg->rows_kind = kind;
		enlargeStringInfo(&tg->rows, (int) ms_pb_len_field_size(MS_FIELD_ROWS_TABLE, strlen(t->name)));
		tg->rows.len += (int) ms_pb_len_field((uint8_t *) tg->rows.data, MS_FIELD_ROWS_TABLE, t->name, strlen(t->name));
	}
	enlargeStringInfo(&tg->rows, (int) fields);
	if (kind == 'u')
	{
		tg->rows.len += (int) ms_pb_len_field((uint8_t *) tg->rows.data + tg->rows.len, MS_FIELD_ROWS_UPSERTS, bytes, len);
		tg->rows.len += (int) ms_pb_len_field((uint8_t *) tg->rows.data + tg->rows.len, MS_FIELD_ROWS_KEYS,
											  r->key.data, r->key.len);
		if (replace)
			tg->rows.len += (int) ms_pb_len_field((uint8_t *) tg->rows.data + tg->rows.len, MS_FIELD_ROWS_REPLACES,
												  r->key.data, r->key.len);
		tg->upserts++;
	}
	else
	{
		tg->rows.len += (int) ms_pb_len_field((uint8_t *) tg->rows.data + tg->rows.len, MS_FIELD_ROWS_DELETES,
											  r->key.data, r->key.len);
		tg->deletes++;
	}
	if (tg->seg == NULL || tg->seg->whole != whole)
	{
		tg->seg = palloc(sizeof(segment));
		tg->seg->tab = t->id;
		tg->seg->kind = kind;
		tg->seg->first = pstrdup(key);
		tg->seg->rows = 0;
		tg->seg->whole = whole;
		tg->segments = lappend(tg->segments, tg->seg);
	}
	else
		pfree(tg->seg->last);
	tg->seg->last = pstrdup(key);
	tg->seg->rows++;
	/* its held row is written with its message's number: the key is kept till then */
	if (whole)
	{
		if (tg->whole_keys.data == NULL)
			ms_fill_init(r->fill, &tg->whole_keys);
		appendBinaryStringInfo(&tg->whole_keys, key, (int) strlen(key) + 1);
	}
	tg->last_kind = kind;
	MemoryContextSwitchTo(old);
}
