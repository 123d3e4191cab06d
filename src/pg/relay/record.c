/*-------------------------------------------------------------------------
 * record.c
 *	  Packing messages and recording them (docs/design.md 4.7).
 *
 * Each replica's rows are packed into messages under magic_sync.message_bytes:
 * upserts parents first, then deletes children first.  Every message is one
 * ToReplica: a head written for its replica (number from sync.message_seq,
 * random nonce, the previous message's number and nonce, the seal, the
 * installation's signature of head and body, signing.h) and a
 * body stored once in sync.bodies, however many replicas' messages carry
 * it.  What a message carries is recorded as segments (table, first and last
 * key) and turned into sync.held rows set by set at the end, so a snapshot
 * of a million rows costs one INSERT, not a million.
 *
 * The worker writes the held rows of tables read whole once the pass
 * committed, in a transaction of its own (ms_record_held_later): they are
 * most of a first sync's pass, and its replica pulls and applies the
 * snapshot meanwhile.  Until then the replica's held_due names the snapshot,
 * and a pass that finds it set (the worker died in between) provisions the
 * replica again (observe.c).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

#include "catalog.h"
#include "evolve.h"
#include "fields.h"
#include "load.h"
#include "pbwrite.h"
#include "record.h"
#include "seal.h"
#include "settings.h"
#include "signing.h"
#include "hlc_clock.h"
#include "heldrows.h"
#include "wire.h"
#include "wish.h"
#include "temp.h"

/* room for a head: protocol, epoch, number, nonce, previous, its nonce, seal, replica, generation, clock; signature */
#define HEAD_MAX (160 + MS_SIGNATURE_FIELD_BYTES)
/* messages and segments written to the catalog in one statement */
#define WRITE_BATCH 256
#define OUTBOX_COLS 8
#define SEGMENT_COLS 7
/* held rows of tables sent whole written in one statement */
#define HELD_BATCH 8192

/* A run of one table's upserts or deletes in one message. */
typedef struct segment
{
	int			tab;
	char		kind;			/* 'u' upserts, 'd' deletes */
	char	   *first;
	char	   *last;
	int			rows;			/* rows it carries */
	bool		whole;			/* of a table read whole: its keys are the target's whole_keys */
} segment;

/* One replica the pass writes to, and the message being filled for it. */
typedef struct target
{
	pg_uuid_t	id;				/* hash key */
	uint64		last_number;
	uint8		last_nonce[MS_NONCE_BYTES];
	bool		has_last;
	bool		snapshot;		/* provisioned this pass */
	bool		begun;			/* its snapshot's first message is written */
	uint64		first_number;
	bool		written;		/* it has new messages */
	int64		snapshot_rows;	/* rows its snapshot carries */
	int64		owed_messages;	/* written this pass, and their bytes: */
	int64		owed_bytes;		/* added to sync.replicas.owed_* */

	StringInfoData down;		/* Down's fields so far: Begin, complete Rows */
	StringInfoData rows;		/* the Rows being filled */
	int			rows_tab;
	char		rows_kind;
	char		last_kind;		/* of the last row appended to this message, or 0 */
	int			upserts;
	int			deletes;
	List	   *segments;
	segment    *seg;
	StringInfoData whole_keys;	/* the keys of its whole segments, in order, each ending in a NUL;
								 * no buffer (NULL) until a row of a table read whole comes */
} target;

typedef struct body_entry
{
	uint8		hash[PG_SHA256_DIGEST_LENGTH];
	int64		id;
} body_entry;

typedef struct recorder
{
	ms_pass    *p;
	HTAB	   *targets;
	HTAB	   *bodies;			/* bodies stored this pass, by hash */
	MemoryContext cxt;
	MemoryContext scratch;		/* one message's copies, reset after each */
	MemoryContext fill;			/* the messages being filled (target's down, rows, whole_keys) */
	ms_signer  *signer;			/* the installation's key (signing.h); NULL: the catalog has none yet */
	Size		fill_empty;		/* what it holds with every one of them empty */
	StringInfoData begin;		/* the packed Begin of a snapshot */
	StringInfoData key;			/* scratch: the wire Key of the current row */
	Oid			message_seq;	/* sync.message_seq: numbers drawn as nextval() draws them */
	SPIPlanPtr	store_body;
	SPIPlanPtr	store_messages;
	SPIPlanPtr	store_segments;
	uint64		segments;		/* rows of pg_temp.ms_segments */

	/*
	 * Messages and segments not yet written: a broadcast to many replicas is
	 * a few statements, not one per message.  Their values live in batch,
	 * reset after each write.
	 */
	MemoryContext batch;
	int			nmessages;
	Datum		messages[OUTBOX_COLS][WRITE_BATCH];
	int			nsegments;
	Datum		segs[SEGMENT_COLS][WRITE_BATCH];

	/*
	 * The held rows of the rows of tables read whole, as their messages are
	 * written: (replica, tab, key, number), HELD_BATCH at a time.
	 */
	MemoryContext held_cxt;
	int			nheld;
	Datum		held[4][HELD_BATCH];
	uint64		held_whole;		/* written so far */
	pg_uuid_t  *provisioning;	/* the replicas provisioned, who get every row of those tables */
	int			nprovisioning;
} recorder;

static const Oid outbox_types[OUTBOX_COLS] = {UUIDOID, INT8OID, BYTEAOID, BYTEAOID, BYTEAOID, INT8OID, INT4OID, BOOLOID};
static const Oid segment_types[SEGMENT_COLS] = {UUIDOID, INT4OID, CHAROID, TEXTOID, TEXTOID, INT8OID, INT4OID};

/* a column of a batch as an array of its type */
static Datum
batch_array(Datum *values, int n, Oid type)
{
	int16		len;
	bool		byval;
	char		align;

	get_typlenbyvalalign(type, &len, &byval, &align);
	return PointerGetDatum(construct_array(values, n, type, len, byval, align));
}

/* write_batch: the messages, then the segments, buffered so far */
static void
write_batch(recorder *r)
{
	MemoryContext old = MemoryContextSwitchTo(r->batch);

	if (r->nmessages > 0)
	{
		Datum		arrays[OUTBOX_COLS];

		for (int c = 0; c < OUTBOX_COLS; c++)
			arrays[c] = batch_array(r->messages[c], r->nmessages, outbox_types[c]);
		ms_run(r->p, r->store_messages, arrays, NULL, 0);
		r->nmessages = 0;
	}
	if (r->nsegments > 0)
	{
		Datum		arrays[SEGMENT_COLS];

		for (int c = 0; c < SEGMENT_COLS; c++)
			arrays[c] = batch_array(r->segs[c], r->nsegments, segment_types[c]);
		ms_run(r->p, r->store_segments, arrays, NULL, 0);
		r->segments += r->nsegments;
		r->nsegments = 0;
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->batch);
}

/* what a message being filled starts with: grown as rows come, given back when it is written */
#define FILL_START 256

static void
fill_init(MemoryContext cxt, StringInfo s)
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
		fill_init(cxt, s);
	}
	else
		resetStringInfo(s);
}

static target *
find_target(recorder *r, const pg_uuid_t *id)
{
	bool		found;
	target	   *tg = hash_search(r->targets, id, HASH_FIND, &found);

	if (!found)
		elog(ERROR, "the plan names a replica the pass does not write to");
	return tg;
}

static void
sha256(const char *data, int len, uint8 out[PG_SHA256_DIGEST_LENGTH])
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) data, len) < 0 ||
		pg_cryptohash_final(ctx, out, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute a SHA-256 of a message body");
	pg_cryptohash_free(ctx);
}

static bytea *
to_bytea(const void *data, size_t len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	return b;
}

/* store a body once: by its hash (into hash: what a message's signature covers), in this pass and in sync.bodies */
static int64
store_body(recorder *r, StringInfo body, int upserts, int deletes, uint8 hash[PG_SHA256_DIGEST_LENGTH])
{
	bool		found;
	body_entry *e;
	Datum		values[4];

	sha256(body->data, body->len, hash);
	e = hash_search(r->bodies, hash, HASH_ENTER, &found);
	if (found)
		return e->id;
	values[0] = PointerGetDatum(to_bytea(hash, PG_SHA256_DIGEST_LENGTH));
	values[1] = PointerGetDatum(to_bytea(body->data, body->len));
	values[2] = Int32GetDatum(upserts);
	values[3] = Int32GetDatum(deletes);
	ms_run(r->p, r->store_body, values, NULL, 1);
	e->id = ms_int64();
	return e->id;
}

static void insert_held(ms_pass *p, const char *sql, int nargs, Oid *types, Datum *values);
static bool insert_held_direct(recorder *r);

/*
 * write_held: the held rows of tables read whole buffered so far.  A row
 * held already is one recorded since the pass's snapshot: insert_held
 * makes it a serialization failure.  Its note is the newest the batch has
 * of it, as the plan's rows' (plan.c).
 */
static void
write_held(recorder *r)
{
	static const Oid elem[4] = {UUIDOID, INT4OID, TEXTOID, INT8OID};
	Oid			types[4] = {UUIDARRAYOID, INT4ARRAYOID, TEXTARRAYOID, INT8ARRAYOID};
	Datum		arrays[4];
	MemoryContext old;

	if (r->nheld == 0)
		return;
	old = MemoryContextSwitchTo(r->held_cxt);
	/* with no note to look up, a page at a time (heldrows.c) */
	if (!r->p->noted && insert_held_direct(r))
	{
		r->held_whole += (uint64) r->nheld;
		r->nheld = 0;
		MemoryContextSwitchTo(old);
		MemoryContextReset(r->held_cxt);
		return;
	}
	for (int c = 0; c < 4; c++)
		arrays[c] = batch_array(r->held[c], r->nheld, elem[c]);
	/* the arrays read in step, a row at a time (in FROM, unnest would gather them first) */
	insert_held(r->p, r->p->noted
				? "INSERT INTO sync.held (replica, tab, key, note, number, since)"
				" SELECT u.replica, u.tab, u.key, coalesce(n.note, 0), u.number, u.number"
				"   FROM (SELECT unnest($1) AS replica, unnest($2) AS tab, unnest($3) COLLATE \"C\" AS key,"
				"                unnest($4) AS number) u"
				"   LEFT JOIN pg_temp.ms_pending n ON n.tab = u.tab AND n.key = u.key"
				: "INSERT INTO sync.held (replica, tab, key, number, since)"
				" SELECT unnest($1), unnest($2), unnest($3), unnest($4), unnest($4)",
				4, types, arrays);
	if (SPI_processed != (uint64) r->nheld)
		elog(ERROR, "magic_sync: %llu held rows were recorded of %d rows sent whole",
			 (unsigned long long) SPI_processed, r->nheld);
	r->held_whole += SPI_processed;
	r->nheld = 0;
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->held_cxt);
}

/* held_add: one held row of a table read whole, buffered; id is not copied */
static void
held_add(recorder *r, const pg_uuid_t *id, int tab, const char *key, int64 number)
{
	MemoryContext old;
	int			i;

	if (r->nheld == HELD_BATCH)
		write_held(r);
	old = MemoryContextSwitchTo(r->held_cxt);
	i = r->nheld++;
	r->held[0][i] = UUIDPGetDatum(id);
	r->held[1][i] = Int32GetDatum(tab);
	r->held[2][i] = CStringGetTextDatum(key);
	r->held[3][i] = Int64GetDatum(number);
	MemoryContextSwitchTo(old);
}

/*
 * A message's held rows of tables read whole, kept by a worker's pass for
 * after its commit (ms_record_held_later): its keys as its target had them,
 * copied once, and its whole segments' tables and rows.
 */
typedef struct later_message
{
	pg_uuid_t	replica;
	int64		number;
	int			nsegs;
	int		   *tabs;
	int		   *rows;
	char	   *keys;			/* each ending in a NUL, in the segments' order */
} later_message;

/* what a message kept costs beside its keys: its struct, its list cell, their chunks' headers */
#define LATER_OVERHEAD (sizeof(later_message) + 64)

/* what a worker's pass keeps for after its commit, in its memory (p->cxt outlives the transaction) */
struct ms_held_later
{
	List	   *messages;		/* later_message * */
	Size		bytes;			/* their keys, bounded by magic_sync.fill_bytes */
	bool		noted;			/* a held row looks up its note in pg_temp.ms_pending */
};

/*
 * later_keep: tg's message number's held rows of tables read whole, kept
 * for after the pass when it is the worker's and they fit under the bound
 * (magic_sync.fill_bytes, as the messages being filled are); the rest are
 * written in the pass.  True when kept.
 */
static bool
later_keep(recorder *r, target *tg, int64 number)
{
	ms_pass    *p = r->p;
	MemoryContext old;
	later_message *m;
	ListCell   *lc;
	int			n = 0;
	int64		rows = 0;

	if (!p->held_later || tg->whole_keys.len == 0 ||
		(p->later != NULL && p->later->bytes + tg->whole_keys.len + LATER_OVERHEAD > (Size) ms_fill_bytes * 1024))
		return false;
	old = MemoryContextSwitchTo(p->cxt);
	if (p->later == NULL)
	{
		p->later = palloc0(sizeof(struct ms_held_later));
		p->later->noted = p->noted;
	}
	m = palloc(sizeof(later_message));
	m->replica = tg->id;
	m->number = number;
	foreach(lc, tg->segments)
		n += ((segment *) lfirst(lc))->whole ? 1 : 0;
	m->nsegs = 0;
	m->tabs = palloc(sizeof(int) * n);
	m->rows = palloc(sizeof(int) * n);
	foreach(lc, tg->segments)
	{
		segment    *s = lfirst(lc);

		if (!s->whole)
			continue;
		m->tabs[m->nsegs] = s->tab;
		m->rows[m->nsegs++] = s->rows;
		rows += s->rows;
	}
	m->keys = palloc(tg->whole_keys.len);
	memcpy(m->keys, tg->whole_keys.data, tg->whole_keys.len);
	p->later->messages = lappend(p->later->messages, m);
	p->later->bytes += tg->whole_keys.len + LATER_OVERHEAD + 2 * sizeof(int) * n;
	p->held_deferred += rows;
	/* counted as recorded: the pass checks its segments against them (held_of_snapshots) */
	r->held_whole += (uint64) rows;
	MemoryContextSwitchTo(old);
	return true;
}

/* held_of_whole: the held rows of tg's message number, of its whole segments, buffered or kept */
static void
held_of_whole(recorder *r, target *tg, int64 number)
{
	const char *key = tg->whole_keys.data;
	ListCell   *lc;

	if (later_keep(r, tg, number))
		return;
	foreach(lc, tg->segments)
	{
		segment    *s = lfirst(lc);

		if (!s->whole)
			continue;
		for (int k = 0; k < s->rows; k++)
		{
			/* the target's own id: a hash table's entries never move */
			held_add(r, &tg->id, s->tab, key, number);
			key += strlen(key) + 1;
		}
	}
	Assert(key == tg->whole_keys.data + tg->whole_keys.len);
}

/* write one message for tg with this body: number, chain, seal, outbox */
static void
write_message(recorder *r, target *tg, StringInfo body, bool snapshot_start,
			  int upserts, int deletes)
{
	ms_pass    *p = r->p;
	MemoryContext old = MemoryContextSwitchTo(r->scratch);
	uint8		body_hash[PG_SHA256_DIGEST_LENGTH];
	int64		body_id = store_body(r, body, upserts, deletes, body_hash);
	uint64		number;
	uint8		nonce[MS_NONCE_BYTES];
	uint8		seal[MS_SEAL_BYTES];
	uint8		head[HEAD_MAX];
	size_t		headlen;
	ms_head		h;
	ListCell   *lc;

	number = (uint64) nextval_internal(r->message_seq, true);
	if (!ms_random(nonce, sizeof nonce))
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not draw a nonce")));
	if (!ms_seal(p->epoch.secret, MS_SECRET_BYTES, tg->id.data, p->epoch.id, number, nonce, seal))
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not seal a message")));
	h.protocol = MS_PROTOCOL;
	h.epoch = p->epoch.id;
	h.number = number;
	h.nonce = nonce;
	h.previous = tg->has_last ? tg->last_number : 0;
	h.previous_nonce = tg->has_last && tg->last_number > 0 ? tg->last_nonce : NULL;
	h.seal = seal;
	h.replica = tg->id.data;
	h.generation = p->epoch.generation;
	h.clock = ms_hlc_server_clock();
	Assert(ms_head_packed_size(&h) + MS_SIGNATURE_FIELD_BYTES <= HEAD_MAX);
	headlen = ms_head_pack(&h, head);
	/* signed over the head and the body's hash, computed once per body (docs/protocol.md 2.4) */
	if (r->signer != NULL)
		headlen = ms_sign_head(r->signer, head, headlen, body_hash);

	/* buffered: written WRITE_BATCH at a time, and before anything reads them */
	if (r->nmessages == WRITE_BATCH)
		write_batch(r);
	MemoryContextSwitchTo(r->batch);
	{
		pg_uuid_t  *id = palloc(sizeof(pg_uuid_t));
		int			i = r->nmessages++;

		memcpy(id, &tg->id, sizeof(pg_uuid_t));
		r->messages[0][i] = UUIDPGetDatum(id);
		r->messages[1][i] = Int64GetDatum((int64) number);
		r->messages[2][i] = PointerGetDatum(to_bytea(p->epoch.id, MS_EPOCH_BYTES));
		r->messages[3][i] = PointerGetDatum(to_bytea(nonce, sizeof nonce));
		r->messages[4][i] = PointerGetDatum(to_bytea(head, headlen));
		r->messages[5][i] = Int64GetDatum(body_id);
		r->messages[6][i] = Int32GetDatum((int32) (headlen + body->len));
		r->messages[7][i] = BoolGetDatum(snapshot_start);
	}
	foreach(lc, tg->segments)
	{
		segment    *s = lfirst(lc);
		pg_uuid_t  *id;
		int			i;

		if (r->nsegments == WRITE_BATCH)
		{
			MemoryContextSwitchTo(r->scratch);
			write_batch(r);
			MemoryContextSwitchTo(r->batch);
		}
		id = palloc(sizeof(pg_uuid_t));
		memcpy(id, &tg->id, sizeof(pg_uuid_t));
		i = r->nsegments++;
		r->segs[0][i] = UUIDPGetDatum(id);
		r->segs[1][i] = Int32GetDatum(s->tab);
		r->segs[2][i] = CharGetDatum(s->kind);
		r->segs[3][i] = CStringGetTextDatum(s->first);
		r->segs[4][i] = CStringGetTextDatum(s->last);
		r->segs[5][i] = Int64GetDatum((int64) number);
		r->segs[6][i] = Int32GetDatum(s->rows);
	}
	MemoryContextSwitchTo(r->scratch);
	held_of_whole(r, tg, (int64) number);

	tg->last_number = number;
	memcpy(tg->last_nonce, nonce, sizeof nonce);
	tg->has_last = true;
	tg->written = true;
	tg->owed_messages++;
	tg->owed_bytes += (int64) (headlen + body->len);
	if (snapshot_start)
	{
		tg->first_number = number;
		tg->begun = true;
	}
	p->messages++;
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->scratch);
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

/* write the message being filled, if it has anything (a snapshot's first always) */
static void
flush(recorder *r, target *tg)
{
	StringInfoData body;
	bool		start = tg->snapshot && !tg->begun;
	MemoryContext old;
	ListCell   *lc;

	if (!has_content(tg) && !start)
		return;
	/* a snapshot of no rows begins all the same: its Begin carries the schema */
	if (start)
		start_message(r, tg);
	close_rows(tg);
	old = MemoryContextSwitchTo(r->scratch);
	initStringInfo(&body);
	MemoryContextSwitchTo(old);
	enlargeStringInfo(&body, (int) ms_pb_len_field_size(MS_FIELD_TO_REPLICA_DOWN, tg->down.len));
	body.len += (int) ms_pb_len_head((uint8_t *) body.data, MS_FIELD_TO_REPLICA_DOWN, tg->down.len);
	appendBinaryStringInfo(&body, tg->down.data, tg->down.len);
	/* write_message resets the scratch context, body and all */
	write_message(r, tg, &body, start, tg->upserts, tg->deletes);
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

/* start a message: a snapshot's first carries its Begin */
static void
start_message(recorder *r, target *tg)
{
	if (tg->snapshot && !tg->begun && tg->down.len == 0)
	{
		/* Begin: the schema, shared, and how many rows this replica's snapshot carries */
		size_t		rows = ms_pb_varint_field_size(MS_FIELD_BEGIN_ROWS, (uint64) tg->snapshot_rows);

		enlargeStringInfo(&tg->down, (int) ms_pb_len_field_size(MS_FIELD_DOWN_BEGIN, r->begin.len + rows));
		tg->down.len += (int) ms_pb_len_head((uint8_t *) tg->down.data, MS_FIELD_DOWN_BEGIN, r->begin.len + rows);
		appendBinaryStringInfo(&tg->down, r->begin.data, r->begin.len);
		tg->down.len += (int) ms_pb_varint_field((uint8_t *) tg->down.data + tg->down.len,
												 MS_FIELD_BEGIN_ROWS, (uint64) tg->snapshot_rows);
	}
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
		flush(r, tg);

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
		fill_init(r->fill, &tg->down);
		fill_init(r->fill, &tg->rows);
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
static void
bound_fill(recorder *r, const pg_uuid_t *ids, int n, char kind)
{
	if (!over_fill(r))
		return;
	if (kind == 'd')
		for (int i = 0; i < n; i++)
			if (find_target(r, &ids[i])->last_kind == 'u')
				return;
	flush_all(r);
}

/* append one row (an upsert, or a delete when bytes is NULL) to tg's message */
static void
append(recorder *r, target *tg, ms_table *t, char kind, const char *key,
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
		flush(r, tg);
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
			fill_init(r->fill, &tg->whole_keys);
		appendBinaryStringInfo(&tg->whole_keys, key, (int) strlen(key) + 1);
	}
	tg->last_kind = kind;
	MemoryContextSwitchTo(old);
}

/* the row once, to every replica that gets it; of a table read whole or of the plan */
static const char *
emit_rows(void *arg, ms_table *t, ms_row *row, bool whole)
{
	recorder   *r = arg;
	char	   *key = pnstrdup(row->key, row->keylen);
	size_t		alone;

	resetStringInfo(&r->key);
	ms_encode_key(&r->key, row->key, row->keylen);
	alone = HEAD_MAX + ms_pb_len_field_size(MS_FIELD_TO_REPLICA_DOWN,
											ms_pb_len_field_size(MS_FIELD_DOWN_TABLES,
																 ms_pb_len_field_size(MS_FIELD_ROWS_TABLE, strlen(t->name)) +
																 ms_pb_len_field_size(MS_FIELD_ROWS_UPSERTS, row->len) +
																 ms_pb_len_field_size(MS_FIELD_ROWS_KEYS, r->key.len)));
	if (alone > (size_t) ms_message_bytes)
		return psprintf("the row takes %zu bytes in a message, over magic_sync.message_bytes (%d)",
						alone, ms_message_bytes);
	bound_fill(r, row->replicas, row->nreplicas, 'u');
	for (int i = 0; i < row->nreplicas; i++)
	{
		bool		replace = false;

		for (int j = 0; j < row->nreplacing && !replace; j++)
			replace = memcmp(&row->replacing[j], &row->replicas[i], sizeof(pg_uuid_t)) == 0;
		append(r, find_target(r, &row->replicas[i]), t, 'u', key, row->bytes, row->len, replace, whole);
	}
	r->p->rows_sent += row->nreplicas;
	pfree(key);
	return NULL;
}

/* ms_emit for the upserts of the plan (pg_temp.ms_send) */
static const char *
emit_upsert(void *arg, ms_table *t, ms_row *row)
{
	return emit_rows(arg, t, row, false);
}

/* ms_emit for the rows of a table read whole (load.c): to every replica provisioned */
static const char *
emit_whole(void *arg, ms_table *t, ms_row *row)
{
	recorder   *r = arg;

	row->replicas = r->provisioning;
	row->nreplicas = r->nprovisioning;
	return emit_rows(arg, t, row, true);
}

/* the deletes of table t, children first: to every replica letting go of them */
static void
record_deletes(recorder *r, ms_table *t)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(t->id)};
	Portal		cur = ms_open(r->p,
							  "SELECT key, array_agg(replica) FROM pg_temp.ms_take"
							  " WHERE tab = $1 GROUP BY key ORDER BY key",
							  1, types, values, NULL);

	for (;;)
	{
		SPITupleTable *tt;
		uint64		n;

		SPI_cursor_fetch(cur, true, ms_chunk_rows);
		/* appending may write messages: keep this page's rows apart from theirs */
		tt = SPI_tuptable;
		n = SPI_processed;
		if (n == 0)
			break;
		for (uint64 i = 0; i < n; i++)
		{
			bool		isnull;
			char	   *key = TextDatumGetCString(SPI_getbinval(tt->vals[i], tt->tupdesc, 1, &isnull));
			ArrayType  *reps = DatumGetArrayTypeP(SPI_getbinval(tt->vals[i], tt->tupdesc, 2, &isnull));
			pg_uuid_t  *ids = (pg_uuid_t *) ARR_DATA_PTR(reps);
			int			nreps = ArrayGetNItems(ARR_NDIM(reps), ARR_DIMS(reps));

			resetStringInfo(&r->key);
			ms_encode_key(&r->key, key, strlen(key));
			bound_fill(r, ids, nreps, 'd');
			for (int j = 0; j < nreps; j++)
				append(r, find_target(r, &ids[j]), t, 'd', key, NULL, 0, false, false);
			r->p->rows_taken += nreps;
		}
		SPI_freetuptable(tt);
	}
	SPI_cursor_close(cur);
}

/* the EndSnapshot every snapshot ends with: one body for all */
static void
end_snapshot(recorder *r, target *tg, StringInfo body)
{
	if (body->len == 0)
	{
		StringInfoData end;
		ListCell   *lc;

		initStringInfo(&end);
		foreach(lc, r->p->tables)
		{
			ms_table   *t = lfirst(lc);

			enlargeStringInfo(&end, (int) ms_pb_len_field_size(MS_FIELD_END_SNAPSHOT_TABLES, strlen(t->name)));
			end.len += (int) ms_pb_len_field((uint8_t *) end.data + end.len, MS_FIELD_END_SNAPSHOT_TABLES, t->name, strlen(t->name));
		}
		enlargeStringInfo(body, (int) ms_pb_len_field_size(MS_FIELD_TO_REPLICA_END_SNAPSHOT, end.len));
		body->len += (int) ms_pb_len_head((uint8_t *) body->data, MS_FIELD_TO_REPLICA_END_SNAPSHOT, end.len);
		appendBinaryStringInfo(body, end.data, end.len);
	}
	write_message(r, tg, body, false, 0, 0);
}

static void
load_targets(recorder *r, ArrayType *replicas, ArrayType *provisioning)
{
	Oid			types[2] = {UUIDARRAYOID, UUIDARRAYOID};
	Datum		values[2] = {PointerGetDatum(replicas), PointerGetDatum(provisioning)};

	ms_exec(r->p,
			"SELECT id, last_number, last_nonce, id = ANY ($2) FROM sync.replicas WHERE id = ANY ($1)",
			2, types, values, NULL, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		pg_uuid_t  *id = DatumGetUUIDP(SPI_getbinval(tup, desc, 1, &isnull));
		bool		found;
		target	   *tg = hash_search(r->targets, id, HASH_ENTER, &found);
		Datum		nonce;
		MemoryContext old = MemoryContextSwitchTo(r->cxt);

		memset(((char *) tg) + sizeof(pg_uuid_t), 0, sizeof(target) - sizeof(pg_uuid_t));
		tg->last_number = (uint64) DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		nonce = SPI_getbinval(tup, desc, 3, &isnull);
		if (!isnull && VARSIZE_ANY_EXHDR(DatumGetByteaPP(nonce)) == MS_NONCE_BYTES)
		{
			memcpy(tg->last_nonce, VARDATA_ANY(DatumGetByteaPP(nonce)), MS_NONCE_BYTES);
			tg->has_last = tg->last_number > 0;
		}
		tg->snapshot = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		fill_init(r->fill, &tg->down);
		fill_init(r->fill, &tg->rows);
		/* its first message begins with the schema changes it is sent (evolve.c) */
		if (!tg->snapshot)
			ms_evolve_down(r->p, &tg->id, &tg->down);
		MemoryContextSwitchTo(old);
	}
	r->fill_empty = MemoryContextMemAllocated(r->fill, false);
}

/*
 * What a held row (old) of a row sent again (new: its note and message
 * number) is set to.  A row coming back after it was being let go is a row
 * made again: since now.
 */
static char *
sent_again(const char *new, const char *old)
{
	return psprintf("note = %s.note, number = %s.number, taken = NULL, refused = NULL, replace = false,"
					" since = CASE WHEN %s.taken IS NOT NULL THEN %s.number ELSE %s.since END",
					new, new, old, new, old);
}

/* a write of held rows: by SQL, or a recorder's buffered rows by heldrows.c */
typedef struct held_write
{
	ms_pass    *p;
	const char *sql;			/* by SQL, with these arguments; or */
	int			nargs;
	Oid		   *types;
	Datum	   *values;
	recorder   *r;				/* r's rows buffered, by heldrows.c */
	bool		done;			/* heldrows.c wrote them */
} held_write;

static void
held_write_run(held_write *w)
{
	if (w->r != NULL)
		w->done = ms_held_insert(w->r->nheld, w->r->held[0], w->r->held[1], w->r->held[2], w->r->held[3]);
	else
		ms_exec(w->p, w->sql, w->nargs, w->types, w->values, NULL, 0);
}

static void insert_held_as(held_write *w);

/*
 * The held rows of rows the plan found held by no replica, inserted: one
 * there now was recorded since the pass's snapshot (sync.file's of a row the
 * replica uploaded, while a pass by hand ran on an older snapshot), a write
 * the pass did not see.  As an update of a row changed since is, it is a
 * serialization failure, transient: the pass is run again, nothing parked.
 */
static void
insert_held(ms_pass *p, const char *sql, int nargs, Oid *types, Datum *values)
{
	held_write	w = {p, sql, nargs, types, values, NULL, false};

	insert_held_as(&w);
}

/* r's buffered held rows, by heldrows.c: false when it cannot, and they go by SQL */
static bool
insert_held_direct(recorder *r)
{
	held_write	w = {r->p, NULL, 0, NULL, NULL, r, false};

	insert_held_as(&w);
	return w.done;
}

static void
insert_held_as(held_write *w)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		held_write_run(w);
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		if (e->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("magic_sync: a row the pass found held by no replica was recorded held since the pass's snapshot"),
				 errdetail("%s", e->detail != NULL ? e->detail : e->message),
				 errhint("Run the pass again: it sees the held row then.")));
	}
	PG_END_TRY();
}

/* what each message carries per table, (replica, tab, number, rows) as select gives them, added to sync.carried */
#define CARRIED_ADD(select) \
	"INSERT INTO sync.carried (replica, tab, number, rows) " select \
	" ON CONFLICT (replica, tab, number) DO UPDATE SET rows = sync.carried.rows + EXCLUDED.rows"

/*
 * The held rows of the replicas provisioned: every row of their segments,
 * inserted, and what each message carries per table counted as it was
 * packed (segment.rows), not again from the rows inserted: a RETURNING
 * of every row of a snapshot, grouped, held work_mem twice over (4 of a 10^6
 * row snapshot's 13 MB) and took a fifth of the insert's time at 3 x 10^5.
 * The two counts are checked against each other.
 */
static void
held_of_snapshots(ms_pass *p, ArrayType *provisioning, const char *segment_rows, uint64 whole)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(provisioning)};
	uint64		inserted;
	int64		packed;
	bool		isnull;

	insert_held(p, psprintf("INSERT INTO sync.held (replica, tab, key, note, number, since) "
							"SELECT s.replica, s.tab, s.key, s.note, g.number, g.number %s"
							"   AND g.replica = ANY ($1)", segment_rows),
				1, types, values);
	inserted = SPI_processed + whole;
	ms_exec(p, psprintf("WITH c AS (SELECT replica, tab, number, sum(rows) AS rows FROM pg_temp.ms_segments"
						"  WHERE kind = 'u' AND replica = ANY ($1) GROUP BY replica, tab, number)%s"
						" SELECT coalesce(sum(rows), 0)::bigint FROM c",
						p->carried ? ", i AS (" CARRIED_ADD("SELECT * FROM c") ")" : ""),
			1, types, values, NULL, 0);
	packed = DatumGetInt64(ms_value(0, 1, &isnull));
	if ((int64) inserted != packed)
		elog(ERROR, "magic_sync: a snapshot's messages carry %lld rows, and %llu held rows were recorded of them",
			 (long long) packed, (unsigned long long) inserted);
}

/*
 * sync.held from the segments: what each message carries, set by set.  A
 * replica being provisioned holds nothing yet, and a row the plan found no
 * held version of for its replica (fresh, fast.c) is held by it nowhere:
 * their rows go in without the cost of looking for a conflict.  A row sent
 * again updates only columns no index has (a HOT update): by the address the
 * plan found its held row at, where it looked one up (question.c, fast.c),
 * with no descent of held_pkey and no lock taken before the update, as an
 * upsert's is; otherwise (a plan of rows compared whole, rows refused sent
 * again) by an upsert.  The plan and the recording see one snapshot and
 * nothing in between writes held rows, so the address is the row's: a
 * concurrent write of it fails the update, as it fails the upsert.  What
 * each message carries per table goes to sync.carried, which the reads count
 * instead of the held rows.
 */
static void
record_held(ms_pass *p, ArrayType *provisioning, uint64 segments, uint64 whole)
{
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(provisioning)};
	const char *carried = p->carried
		? CARRIED_ADD("SELECT replica, tab, number, count(*) FROM h GROUP BY replica, tab, number")
		: "SELECT count(*) FROM h";
	const char *segment_rows = "FROM pg_temp.ms_segments g"
		"  JOIN pg_temp.ms_send s ON s.tab = g.tab AND s.key >= g.first_key"
		"   AND s.key <= g.last_key AND s.replica = g.replica"
		" WHERE g.kind = 'u'";
	bool		isnull;
	bool		provisioned = ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning)) > 0;
	bool		fresh,
				addressed,
				unaddressed;

	/* a few segments, each a range of ms_send's key index: the planner must know, when ms_send is large */
	ms_analyze(p, "pg_temp.ms_segments", p->planned >= MS_ANALYZE_ROWS ? Max(segments, MS_ANALYZE_ROWS) : segments);
	/* which of the three kinds the plan has: a read of ms_send spares the others a read of every segment's rows */
	ms_exec(p, "SELECT coalesce(bool_or(fresh), false), coalesce(bool_or(held IS NOT NULL), false),"
			" coalesce(bool_or(NOT fresh AND held IS NULL), false) FROM pg_temp.ms_send",
			0, NULL, NULL, NULL, 0);
	fresh = DatumGetBool(ms_value(0, 1, &isnull));
	addressed = DatumGetBool(ms_value(0, 2, &isnull));
	unaddressed = DatumGetBool(ms_value(0, 3, &isnull));
	if (provisioned)
		held_of_snapshots(p, provisioning, segment_rows, whole);
	if (fresh)
		insert_held(p, psprintf(
				"WITH h AS (INSERT INTO sync.held (replica, tab, key, note, number, since) "
				"SELECT s.replica, s.tab, s.key, s.note, g.number, g.number %s"
				"   AND NOT g.replica = ANY ($1) AND s.fresh RETURNING replica, tab, number) %s",
				segment_rows, carried),
				1, types, values);
	if (addressed)
	{
		int64		expected,
					updated;

		ms_exec(p, psprintf(
				"WITH e AS MATERIALIZED (SELECT s.held, s.replica, s.tab, s.key, s.note, g.number %s"
				"   AND NOT g.replica = ANY ($1) AND NOT s.fresh AND s.held IS NOT NULL),"
				" h AS (UPDATE sync.held h SET %s FROM e"
				"  WHERE h.ctid = e.held AND h.replica = e.replica AND h.tab = e.tab AND h.key = e.key"
				"  RETURNING h.replica, h.tab, e.number),"
				" c AS (%s)"
				" SELECT (SELECT count(*) FROM e), (SELECT count(*) FROM h)",
				segment_rows, sent_again("e", "h"), carried),
				1, types, values, NULL, 0);
		expected = DatumGetInt64(ms_value(0, 1, &isnull));
		updated = DatumGetInt64(ms_value(0, 2, &isnull));
		if (updated != expected)
			elog(ERROR, "magic_sync: %lld of %lld held rows were where the plan found them",
				 (long long) updated, (long long) expected);
	}
	if (unaddressed)
		ms_exec(p, psprintf(
				"WITH h AS (INSERT INTO sync.held (replica, tab, key, note, number, since) "
				"SELECT s.replica, s.tab, s.key, s.note, g.number, g.number %s"
				"   AND NOT g.replica = ANY ($1) AND NOT s.fresh AND s.held IS NULL "
				"ON CONFLICT (replica, tab, key) DO UPDATE SET %s"
				" RETURNING replica, tab, number) %s", segment_rows, sent_again("EXCLUDED", "sync.held"), carried),
				1, types, values, NULL, 0);
	ms_exec(p,
			"UPDATE sync.held h SET taken = g.number FROM pg_temp.ms_segments g "
			"  JOIN pg_temp.ms_take t ON t.tab = g.tab AND t.key >= g.first_key "
			"   AND t.key <= g.last_key AND t.replica = g.replica "
			" WHERE g.kind = 'd' AND h.replica = t.replica AND h.tab = t.tab AND h.key = t.key",
			0, NULL, NULL, NULL, 0);
	/* what the messages it acknowledged carried, for the replicas written to: by the primary key's prefix */
	if (p->carried)
		ms_exec(p,
				"DELETE FROM sync.carried c USING sync.replicas r"
				" WHERE r.id IN (SELECT DISTINCT g.replica FROM pg_temp.ms_segments g)"
				"   AND c.replica = r.id AND c.number <= r.acked_number",
				0, NULL, NULL, NULL, 0);
}

/* recorder_init: memory, hash tables and statements of one recording */
static void
recorder_init(recorder *r, ms_pass *p)
{
	HASHCTL		ctl;
	Oid			btypes[4] = {BYTEAOID, BYTEAOID, INT4OID, INT4OID};
	Oid			mtypes[OUTBOX_COLS];
	Oid			stypes[SEGMENT_COLS];

	memset(r, 0, sizeof *r);
	r->p = p;
	r->cxt = AllocSetContextCreate(CurrentMemoryContext, "magic_sync record", ALLOCSET_DEFAULT_SIZES);
	r->scratch = AllocSetContextCreate(r->cxt, "magic_sync message", ALLOCSET_DEFAULT_SIZES);
	r->batch = AllocSetContextCreate(r->cxt, "magic_sync messages to write", ALLOCSET_DEFAULT_SIZES);
	r->held_cxt = AllocSetContextCreate(r->cxt, "magic_sync held rows to write", ALLOCSET_DEFAULT_SIZES);
	/*
	 * Small blocks: what it holds grows in steps of 8 kB, not of the doubling
	 * blocks of a default context, and a message past 1 kB has a block of its
	 * own, given back whole when it is written.
	 */
	r->fill = AllocSetContextCreate(r->cxt, "magic_sync messages being filled", ALLOCSET_SMALL_SIZES);
	for (int c = 0; c < OUTBOX_COLS; c++)
		mtypes[c] = get_array_type(outbox_types[c]);
	for (int c = 0; c < SEGMENT_COLS; c++)
		stypes[c] = get_array_type(segment_types[c]);
	r->message_seq = get_relname_relid("message_seq", get_namespace_oid("sync", false));
	if (!OidIsValid(r->message_seq))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("sequence sync.message_seq is missing"),
				 errdetail("The extension's catalog was altered."),
				 errhint("Install the extension again.")));
	memset(&ctl, 0, sizeof ctl);
	ctl.keysize = sizeof(pg_uuid_t);
	ctl.entrysize = sizeof(target);
	ctl.hcxt = r->cxt;
	r->targets = hash_create("magic_sync targets", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.keysize = PG_SHA256_DIGEST_LENGTH;
	ctl.entrysize = sizeof(body_entry);
	r->bodies = hash_create("magic_sync bodies", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	/* the pass packed it once (relay.c): every snapshot carries the same */
	r->begin = p->begin;
	r->signer = ms_signing_key();
	initStringInfo(&r->key);

	ms_temp_table(p, "ms_segments");
	r->store_body = ms_prepare_kept(p, "INSERT INTO sync.bodies (hash, bytes, upserts, deletes) VALUES ($1, $2, $3, $4)"
							   " ON CONFLICT (hash) DO UPDATE SET hash = EXCLUDED.hash RETURNING id",
							   4, btypes);
	r->store_messages = ms_prepare_kept(p, "INSERT INTO sync.outbox (replica, number, epoch, nonce, head, body, bytes, snapshot)"
										" SELECT * FROM unnest($1, $2, $3, $4, $5, $6, $7, $8)",
										OUTBOX_COLS, mtypes);
	r->store_segments = ms_prepare_kept(p, "INSERT INTO pg_temp.ms_segments SELECT * FROM unnest($1, $2, $3, $4, $5, $6, $7)",
										SEGMENT_COLS, stypes);
}

/* snapshot_rows: how many rows each replica's snapshot carries, as its Begin says */
static void
snapshot_rows(recorder *r, ArrayType *provisioning)
{
	ms_pass    *p = r->p;
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(provisioning)};

	/* one replica provisioned: the plan counted them (plan.c) */
	if (p->snapshot_rows >= 0)
	{
		find_target(r, (pg_uuid_t *) ARR_DATA_PTR(provisioning))->snapshot_rows = p->snapshot_rows;
		return;
	}
	if (ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning)) == 0)
		return;
	/* every one of them gets every row of the tables read whole (plan.c) */
	for (int i = 0; i < ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning)); i++)
		find_target(r, (pg_uuid_t *) ARR_DATA_PTR(provisioning) + i)->snapshot_rows = p->whole_rows;
	ms_exec(p, "SELECT replica, count(*) FROM pg_temp.ms_send WHERE replica = ANY ($1) GROUP BY replica",
			1, types, values, NULL, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		find_target(r, DatumGetUUIDP(ms_value(i, 1, &isnull)))->snapshot_rows +=
			DatumGetInt64(ms_value(i, 2, &isnull));
	}
}

/* record_chains: each replica written to, its chain, and the snapshot written for it: one statement */
static void
record_chains(recorder *r)
{
	ms_pass    *p = r->p;
	HASH_SEQ_STATUS seq;
	target	   *tg;
	long		n = hash_get_num_entries(r->targets);
	Datum	   *cols[7];
	bool	   *nulls[7];
	int			k = 0;
	Oid			types[8] = {UUIDARRAYOID, INT8ARRAYOID, BYTEAARRAYOID, INT8ARRAYOID, INT8ARRAYOID, INT8ARRAYOID,
	INT8ARRAYOID, BYTEAOID};
	Datum		values[8];
	static const Oid elem[7] = {UUIDOID, INT8OID, BYTEAOID, INT8OID, INT8OID, INT8OID, INT8OID};

	for (int c = 0; c < 7; c++)
	{
		cols[c] = palloc(sizeof(Datum) * Max(n, 1));
		nulls[c] = palloc0(sizeof(bool) * Max(n, 1));
	}
	hash_seq_init(&seq, r->targets);
	while ((tg = hash_seq_search(&seq)) != NULL)
	{
		if (!tg->written)
			continue;
		cols[0][k] = UUIDPGetDatum(&tg->id);
		cols[1][k] = Int64GetDatum((int64) tg->last_number);
		cols[2][k] = PointerGetDatum(to_bytea(tg->last_nonce, MS_NONCE_BYTES));
		cols[3][k] = Int64GetDatum((int64) tg->first_number);
		cols[4][k] = Int64GetDatum((int64) tg->last_number);
		nulls[3][k] = nulls[4][k] = !tg->snapshot;
		cols[5][k] = Int64GetDatum(tg->owed_messages);
		cols[6][k] = Int64GetDatum(tg->owed_bytes);
		k++;
	}
	if (k == 0)
		return;
	for (int c = 0; c < 7; c++)
	{
		int			dims[1] = {k};
		int			lbs[1] = {1};
		int16		len;
		bool		byval;
		char		align;

		get_typlenbyvalalign(elem[c], &len, &byval, &align);
		values[c] = PointerGetDatum(construct_md_array(cols[c], nulls[c], 1, dims, lbs, elem[c], len, byval, align));
	}
	values[7] = PointerGetDatum(p->schema_hash);
	ms_exec(p, "INSERT INTO pg_temp.ms_written SELECT unnest($1)", 1, types, values, NULL, 0);
	/*
	 * A snapshot written ($4 not null): its numbers, its schema, the replica
	 * provisioned, and nothing owed beyond it (every message of the pass is
	 * numbered up to its end).  Otherwise what the pass wrote is owed too
	 * ($6, $7): relay.c's outbox_bounds reads it rather than the outbox.
	 * A snapshot whose held rows are written once the pass committed
	 * (ms_record_held_later): held_due names it until then.
	 */
	ms_exec(p, psprintf(
			"UPDATE sync.replicas r SET last_number = w.last, last_nonce = w.nonce,"
			" snapshot_number = coalesce(w.first, r.snapshot_number),"
			" snapshot_end = coalesce(w.snap_end, r.snapshot_end),%s"
			" schema_hash = CASE WHEN w.first IS NULL THEN r.schema_hash ELSE $8 END,"
			" provision = CASE WHEN w.first IS NULL THEN r.provision ELSE false END,"
			" provision_failed_at = CASE WHEN w.first IS NULL THEN r.provision_failed_at END%s"
			" FROM unnest($1, $2, $3, $4, $5, $6, $7) w(id, last, nonce, first, snap_end, messages, bytes)"
			" WHERE r.id = w.id",
			p->owed ? " owed_messages = CASE WHEN w.first IS NULL THEN r.owed_messages + w.messages ELSE 0 END,"
			" owed_bytes = CASE WHEN w.first IS NULL THEN r.owed_bytes + w.bytes ELSE 0 END," : "",
			p->held_deferred > 0 ? ", held_due = w.first" : ""),
			8, types, values, NULL, 0);
}

List *
ms_record(ms_pass *p, ArrayType *replicas, ArrayType *provisioning)
{
	recorder	r;
	HASH_SEQ_STATUS seq;
	target	   *tg;
	List	   *bad = NIL;
	ListCell   *lc;
	StringInfoData end;
	ms_wish_due_set *due;

	recorder_init(&r, p);
	/* a plan run again after rows were set aside starts over */
	p->later = NULL;
	p->held_deferred = 0;
	load_targets(&r, replicas, provisioning);
	p->one_replica = ArrayGetNItems(ARR_NDIM(replicas), ARR_DIMS(replicas)) == 1;
	r.provisioning = (pg_uuid_t *) ARR_DATA_PTR(provisioning);
	r.nprovisioning = ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning));
	snapshot_rows(&r, provisioning);

	/* upserts, parents first; the rows that cannot go are in the pass's memory */
	foreach(lc, p->tables)
	{
		ms_table   *t = lfirst(lc);

		ms_load_table(p, t, emit_upsert, &r, &bad);
		/* a table the replicas provisioned want whole: read once, for all of them (plan.c) */
		if (p->whole != NULL && p->whole[t->id])
			ms_load_whole(p, t, emit_whole, &r, &bad);
	}
	if (bad != NIL)
	{
		MemoryContextDelete(r.cxt);
		return bad;
	}
	/* then deletes, children first */
	for (int i = list_length(p->tables) - 1; i >= 0; i--)
		record_deletes(&r, list_nth(p->tables, i));

	initStringInfo(&end);
	due = ms_wish_due(p);
	hash_seq_init(&seq, r.targets);
	while ((tg = hash_seq_search(&seq)) != NULL)
	{
		flush(&r, tg);
		if (tg->snapshot)
		{
			end_snapshot(&r, tg, &end);
			p->provisioned++;
		}
		/* the server's wishes last, in a message of their own (wish_send.c) */
		if (ms_wish_due_for(due, &tg->id) && ms_wish_pack(p, &tg->id, &tg->down))
		{
			flush(&r, tg);
			ms_wish_sent(p, &tg->id, tg->last_number);
		}
	}
	write_batch(&r);
	write_held(&r);
	record_held(p, provisioning, r.segments, r.held_whole);
	record_chains(&r);
	MemoryContextDelete(r.cxt);
	return NIL;
}

void
ms_record_held_later(ms_pass *p)
{
	recorder	r;
	ListCell   *lc;

	memset(&r, 0, sizeof r);
	r.p = p;
	r.held_cxt = AllocSetContextCreate(CurrentMemoryContext, "magic_sync held rows to write", ALLOCSET_DEFAULT_SIZES);
	p->noted = p->later != NULL && p->later->noted;
	foreach(lc, p->later != NULL ? p->later->messages : NIL)
	{
		later_message *m = lfirst(lc);
		const char *key = m->keys;

		for (int s = 0; s < m->nsegs; s++)
			for (int k = 0; k < m->rows[s]; k++)
			{
				held_add(&r, &m->replica, m->tabs[s], key, m->number);
				key += strlen(key) + 1;
			}
	}
	write_held(&r);
	if ((int64) r.held_whole != p->held_deferred)
		elog(ERROR, "magic_sync: %llu held rows were recorded of %lld left for after the pass",
			 (unsigned long long) r.held_whole, (long long) p->held_deferred);
	ms_exec(p, "UPDATE sync.replicas SET held_due = NULL WHERE held_due IS NOT NULL", 0, NULL, NULL, NULL, 0);
	MemoryContextDelete(r.held_cxt);
}
