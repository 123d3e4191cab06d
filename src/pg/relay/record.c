/*-------------------------------------------------------------------------
 * record.c
 *	  Packing messages and recording them (docs/design.md 4.7).
 *
 * Each replica's rows are packed into messages under magic_sync.message_bytes
 * (pack.c): upserts parents first, then deletes children first.  Every message is one
 * ToReplica: a head written for its replica (number from sync.message_seq,
 * random nonce, the previous message's number and nonce, the seal, the
 * installation's signature of head and body, signing.h) and a
 * body stored once in sync.bodies, however many replicas' messages carry
 * it.  What a message carries is recorded as segments (table, first and last
 * key) and turned into sync.held rows set by set at the end (heldrows.c),
 * so a snapshot of a million rows costs one INSERT, not a million.
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

#include "access/stratnum.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/sequence.h"
#include "common/sha2.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/uuid.h"

#include "bytes.h"
#include "catalog.h"
#include "evolve.h"
#include "fields.h"
#include "load.h"
#include "pbwrite.h"
#include "record.h"
#include "wake.h"
#include "recorder.h"
#include "seal.h"
#include "settings.h"
#include "signing.h"
#include "hlc_clock.h"
#include "wire.h"
#include "wish.h"
#include "temp.h"

static const Oid outbox_types[OUTBOX_COLS] = {UUIDOID, INT8OID, BYTEAOID, BYTEAOID, BYTEAOID, INT8OID, INT4OID, BOOLOID};
static const Oid segment_types[SEGMENT_COLS] = {UUIDOID, INT4OID, CHAROID, TEXTOID, TEXTOID, INT8OID, INT4OID};
static const Oid body_types[BODY_COLS] = {BYTEAOID, BYTEAOID, INT4OID, INT4OID};

/* a column of a batch as an array of its type */
Datum
ms_batch_array(Datum *values, int n, Oid type)
{
	int16		len;
	bool		byval;
	char		align;

	get_typlenbyvalalign(type, &len, &byval, &align);
	return PointerGetDatum(construct_array(values, n, type, len, byval, align));
}

/*
 * The statement writing a batch (recorder_init): the bodies (b), the
 * segments, the messages (o, returning each one's body)
 */
#define BATCH_BODIES "b AS (INSERT INTO sync.bodies (hash, bytes, upserts, deletes)" \
	"  SELECT * FROM unnest($16, $17, $18, $19)" \
	"  ON CONFLICT (hash) DO UPDATE SET hash = EXCLUDED.hash RETURNING id, hash)"
#define BATCH_SEGMENTS "SELECT * FROM unnest($9, $10, $11, $12, $13, $14, $15)"
#define BATCH_OUTBOX " o AS (INSERT INTO sync.outbox (replica, number, epoch, nonce, head, body, bytes, snapshot)" \
	" SELECT m.replica, m.number, m.epoch, m.nonce, m.head," \
	"  CASE WHEN m.body > 0 THEN m.body ELSE coalesce((SELECT b.id FROM b WHERE b.hash = m.hash)," \
	"   (SELECT x.id FROM sync.bodies x WHERE x.hash = m.hash)) END, m.bytes, m.snapshot" \
	" FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $20)" \
	"  m(replica, number, epoch, nonce, head, body, bytes, snapshot, hash) RETURNING body)"

/* the bodies, messages and segments buffered so far, by plan; false when there were none */
static bool
write_batch(recorder *r, SPIPlanPtr plan)
{
	MemoryContext old = MemoryContextSwitchTo(r->batch);
	bool		any = r->nmessages > 0 || r->nsegments > 0 || r->nbodies > 0;

	/*
	 * all in one statement, any of them empty (issue 37: the bodies' own
	 * statement cost a one-row pass its executor's start and end)
	 */
	if (any)
	{
		Datum		arrays[OUTBOX_COLS + SEGMENT_COLS + BODY_COLS + 1];

		for (int c = 0; c < OUTBOX_COLS; c++)
			arrays[c] = ms_batch_array(r->messages[c], r->nmessages, outbox_types[c]);
		for (int c = 0; c < SEGMENT_COLS; c++)
			arrays[OUTBOX_COLS + c] = ms_batch_array(r->segs[c], r->nsegments, segment_types[c]);
		for (int c = 0; c < BODY_COLS; c++)
			arrays[OUTBOX_COLS + SEGMENT_COLS + c] = ms_batch_array(r->bodies_new[c], r->nbodies, body_types[c]);
		arrays[OUTBOX_COLS + SEGMENT_COLS + BODY_COLS] = ms_batch_array(r->message_body_hash, r->nmessages, BYTEAOID);
		ms_run(&r->p->exec, plan, arrays, NULL, 0);
		if (DatumGetInt64(ms_value(0, 1, &(bool) {false})) != 0)
			elog(ERROR, "magic_sync: a message's body was not found by its hash");
	}
	MemoryContextSwitchTo(old);
	ms_batch_written(r);
	return any;
}

void
ms_batch_written(recorder *r)
{
	r->segments += r->nsegments;
	r->nmessages = 0;
	r->nsegments = 0;
	r->nbodies = 0;
	r->body_bytes = 0;
	MemoryContextReset(r->batch);
}

void
ms_write_batch(recorder *r)
{
	if (write_batch(r, r->store_batch))
		SPI_freetuptable(SPI_tuptable);
}

/*
 * The pass's only batch, none provisioned, in C (batch_write.c): the
 * statement and its foreign key's check cost a one-row pass more than its
 * rows (issue 37).  Under magic_sync.full_plan, by the statement, as
 * tests/e2e/fast.py compares them.
 */
static void
only_batch(recorder *r)
{
	if (!ms_full_plan && ms_write_batch_c(r))
	{
		/* tests/e2e/fast.py counts them */
		ereport(DEBUG1, (errmsg_internal("magic_sync: the batch written in C")));
		return;
	}
	ms_write_batch(r);
}

/*
 * The pass's last batch, and its first (its segments are all the pass's),
 * written with the held rows the plan addressed recorded as sent again, in
 * one statement: a statement fewer a one-row pass (issue 37).  What
 * ms_record_held does of them, from the segments as the statement returns
 * them rather than read again from pg_temp.ms_segments; the caller knows no
 * replica is provisioned.  False when nothing was written (and no held row
 * recorded).
 */
bool
ms_write_batch_held(recorder *r, bool has_carried)
{
	SPIPlanPtr	plan;
	bool		isnull;
	int64		expected;
	int64		updated;

	Assert(r->segments == 0);
	if (r->nmessages == 0 && r->nsegments == 0 && r->nbodies == 0)
		return false;
	/*
	 * The held rows in C (held_update.c), from the segments buffered, before
	 * the batch's statement writes them: a one-row pass's statement without
	 * its join, its UPDATE and its upsert (issue 37).
	 */
	if (ms_held_update_addressed(r, has_carried, &expected, &updated))
	{
		ms_held_addressed_check(expected, updated);
		/* tests/e2e/fast.py counts them */
		ereport(DEBUG1, (errmsg_internal("magic_sync: %lld held rows sent again updated in C", (long long) updated)));
		only_batch(r);
		return true;
	}
	plan = ms_prepare_kept_generic(&r->p->exec, psprintf(
			"WITH " BATCH_BODIES ","
			" sg AS (INSERT INTO pg_temp.ms_segments " BATCH_SEGMENTS " RETURNING *),"
			BATCH_OUTBOX ", %s"
			" SELECT (SELECT count(*) FILTER (WHERE body IS NULL) FROM o), (SELECT count(*) FROM e),"
			"  (SELECT count(*) FROM h)", ms_held_addressed("sg", "", has_carried)),
			OUTBOX_COLS + SEGMENT_COLS + BODY_COLS + 1, r->batch_types);
	if (!write_batch(r, plan))
		return false;
	ms_held_addressed_check(DatumGetInt64(ms_value(0, 2, &isnull)), DatumGetInt64(ms_value(0, 3, &isnull)));
	SPI_freetuptable(SPI_tuptable);
	return true;
}

target *
ms_find_target(recorder *r, const pg_uuid_t *id)
{
	bool		found;
	target	   *tg = hash_search(r->targets, id, HASH_FIND, &found);

	if (!found)
		elog(ERROR, "the plan names a replica the pass does not write to");
	return tg;
}

/*
 * store a body once: by its hash (into hash: what a message's signature
 * covers), in this pass and in sync.bodies.  Buffered with the messages
 * (ms_write_batch), whose statement writes it and gives each message its
 * id, by its hash; 0 is returned but for a body of a pass before whose id
 * this pass read.  The buffer is written first when it holds too many
 * bodies or bytes: the message that carries this one is buffered after it.
 */
static int64
store_body(recorder *r, StringInfo body, int upserts, int deletes, uint8 hash[PG_SHA256_DIGEST_LENGTH])
{
	bool		found;
	body_entry *e;
	MemoryContext old;
	int			i;

	ms_pg_sha256(body->data, body->len, hash, "a message body");
	e = hash_search(r->bodies, hash, HASH_ENTER, &found);
	if (found)
		return e->id;
	e->id = 0;
	if (r->nbodies > 0 && (r->nbodies == WRITE_BATCH || r->body_bytes + body->len > BODY_BATCH_BYTES))
		ms_write_batch(r);
	old = MemoryContextSwitchTo(r->batch);
	i = r->nbodies++;
	r->bodies_new[0][i] = PointerGetDatum(ms_to_bytea(hash, PG_SHA256_DIGEST_LENGTH));
	r->bodies_new[1][i] = PointerGetDatum(ms_to_bytea(body->data, body->len));
	r->bodies_new[2][i] = Int32GetDatum(upserts);
	r->bodies_new[3][i] = Int32GetDatum(deletes);
	r->body_bytes += body->len;
	MemoryContextSwitchTo(old);
	return 0;
}

/*
 * ms_place_next: the next place in tg's chain, drawn now (a number from
 * sync.message_seq, a random nonce, the clock), after its last; the chain
 * moves on to it
 */
void
ms_place_next(recorder *r, target *tg, ms_place *at)
{
	at->number = (uint64) nextval_internal(r->message_seq, true);
	if (!ms_random(at->nonce, sizeof at->nonce))
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not draw a nonce")));
	at->previous = tg->has_last ? tg->last_number : 0;
	at->has_previous_nonce = tg->has_last && tg->last_number > 0;
	if (at->has_previous_nonce)
		memcpy(at->previous_nonce, tg->last_nonce, MS_NONCE_BYTES);
	at->clock = ms_hlc_server_clock();
	tg->last_number = at->number;
	memcpy(tg->last_nonce, at->nonce, MS_NONCE_BYTES);
	tg->has_last = true;
}

/* write one message for tg with this body at its place in the chain: seal, outbox */
void
ms_write_placed(recorder *r, target *tg, StringInfo body, bool snapshot_start,
				int upserts, int deletes, const ms_place *at)
{
	MemoryContext old = MemoryContextSwitchTo(r->scratch);
	uint8		body_hash[PG_SHA256_DIGEST_LENGTH];
	int64		body_id;
	uint64		number = at->number;
	uint8		seal[MS_SEAL_BYTES];
	uint8		head[HEAD_MAX];
	size_t		headlen;
	ms_head		h;
	ListCell   *lc;

	/* buffered: written WRITE_BATCH at a time, and before anything reads them; the body with them */
	if (r->nmessages == WRITE_BATCH)
		ms_write_batch(r);
	body_id = store_body(r, body, upserts, deletes, body_hash);
	if (!ms_seal(r->in->cat->epoch.secret, MS_SECRET_BYTES, tg->id.data, r->in->cat->epoch.id, number, at->nonce, seal))
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not seal a message")));
	h.protocol = MS_PROTOCOL;
	h.epoch = r->in->cat->epoch.id;
	h.number = number;
	h.nonce = at->nonce;
	h.previous = at->previous;
	h.previous_nonce = at->has_previous_nonce ? at->previous_nonce : NULL;
	h.seal = seal;
	h.replica = tg->id.data;
	h.generation = r->in->cat->epoch.generation;
	h.clock = at->clock;
	Assert(ms_head_packed_size(&h) + MS_SIGNATURE_FIELD_BYTES <= HEAD_MAX);
	headlen = ms_head_pack(&h, head);
	/* signed over the head and the body's hash, computed once per body (docs/protocol.md 2.4) */
	if (r->signer != NULL)
		headlen = ms_sign_head(r->signer, head, headlen, body_hash);

	MemoryContextSwitchTo(r->batch);
	{
		pg_uuid_t  *id = palloc(sizeof(pg_uuid_t));
		int			i = r->nmessages++;

		memcpy(id, &tg->id, sizeof(pg_uuid_t));
		r->messages[0][i] = UUIDPGetDatum(id);
		r->messages[1][i] = Int64GetDatum((int64) number);
		r->messages[2][i] = PointerGetDatum(ms_to_bytea(r->in->cat->epoch.id, MS_EPOCH_BYTES));
		r->messages[3][i] = PointerGetDatum(ms_to_bytea(at->nonce, MS_NONCE_BYTES));
		r->messages[4][i] = PointerGetDatum(ms_to_bytea(head, headlen));
		r->messages[5][i] = Int64GetDatum(body_id);
		r->message_body_hash[i] = PointerGetDatum(ms_to_bytea(body_hash, PG_SHA256_DIGEST_LENGTH));
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
			ms_write_batch(r);
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
	ms_held_of_whole(r, tg, (int64) number);

	tg->written = true;
	tg->owed_messages++;
	tg->owed_bytes += (int64) (headlen + body->len);
	if (snapshot_start)
	{
		tg->first_number = number;
		tg->begun = true;
	}
	r->did->messages++;
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->scratch);
}

/* write one message for tg with this body, next in its chain */
void
ms_write_message(recorder *r, target *tg, StringInfo body, bool snapshot_start,
				 int upserts, int deletes)
{
	ms_place	at;

	ms_place_next(r, tg, &at);
	ms_write_placed(r, tg, body, snapshot_start, upserts, deletes, &at);
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
	ms_bound_fill(r, row->replicas, row->nreplicas, 'u');
	for (int i = 0; i < row->nreplicas; i++)
	{
		bool		replace = false;

		for (int j = 0; j < row->nreplacing && !replace; j++)
			replace = memcmp(&row->replacing[j], &row->replicas[i], sizeof(pg_uuid_t)) == 0;
		ms_append(r, ms_find_target(r, &row->replicas[i]), t, 'u', key, row->bytes, row->len, replace, whole);
	}
	r->did->rows_sent += row->nreplicas;
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

	const char *why;

	row->replicas = r->provisioning;
	row->nreplicas = r->nprovisioning;
	why = emit_rows(arg, t, row, true);
	if (why == NULL)
		r->whole_read++;
	return why;
}

/* the deletes of table t, children first: to every replica letting go of them */
static void
record_deletes(recorder *r, ms_table *t)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(t->id)};
	Portal		cur = ms_open(&r->p->exec,
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
			ms_bound_fill(r, ids, nreps, 'd');
			for (int j = 0; j < nreps; j++)
				ms_append(r, ms_find_target(r, &ids[j]), t, 'd', key, NULL, 0, false, false);
			r->did->rows_taken += nreps;
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
		foreach(lc, r->in->cat->tables)
		{
			ms_table   *t = lfirst(lc);

			enlargeStringInfo(&end, (int) ms_pb_len_field_size(MS_FIELD_END_SNAPSHOT_TABLES, strlen(t->name)));
			end.len += (int) ms_pb_len_field((uint8_t *) end.data + end.len, MS_FIELD_END_SNAPSHOT_TABLES, t->name, strlen(t->name));
		}
		enlargeStringInfo(body, (int) ms_pb_len_field_size(MS_FIELD_TO_REPLICA_END_SNAPSHOT, end.len));
		body->len += (int) ms_pb_len_head((uint8_t *) body->data, MS_FIELD_TO_REPLICA_END_SNAPSHOT, end.len);
		appendBinaryStringInfo(body, end.data, end.len);
	}
	ms_write_message(r, tg, body, false, 0, 0);
}

/* a probe's read of a replica's row: its chain's last place, into the target */
typedef struct target_read
{
	recorder   *r;
	bool		snapshot;		/* it is provisioned */
} target_read;

static bool
target_row(HeapTuple row, TupleDesc desc, void *arg)
{
	target_read *tr = arg;
	recorder   *r = tr->r;
	bool		isnull;
	pg_uuid_t  *id = DatumGetUUIDP(ms_probe_column(row, desc, "id", &isnull));
	bool		found;
	target	   *tg = hash_search(r->targets, id, HASH_ENTER, &found);
	Datum		nonce;
	MemoryContext old = MemoryContextSwitchTo(r->cxt);

	memset(((char *) tg) + sizeof(pg_uuid_t), 0, sizeof(target) - sizeof(pg_uuid_t));
	tg->last_number = (uint64) DatumGetInt64(ms_probe_column(row, desc, "last_number", &isnull));
	tg->acked_number = (uint64) DatumGetInt64(ms_probe_column(row, desc, "acked_number", &isnull));
	nonce = ms_probe_column(row, desc, "last_nonce", &isnull);
	if (!isnull && VARSIZE_ANY_EXHDR(DatumGetByteaPP(nonce)) == MS_NONCE_BYTES)
	{
		memcpy(tg->last_nonce, VARDATA_ANY(DatumGetByteaPP(nonce)), MS_NONCE_BYTES);
		tg->has_last = tg->last_number > 0;
	}
	tg->snapshot = tr->snapshot;
	ms_fill_init(r->fill, &tg->down);
	ms_fill_init(r->fill, &tg->rows);
	/* its first message begins with the schema changes it is sent (evolve.c) */
	if (!tg->snapshot)
		ms_evolve_down(r->in->cat, &tg->id, &tg->down);
	MemoryContextSwitchTo(old);
	return false;
}

/*
 * the replicas written to, each with where its chain is: read by the primary
 * key in C (ms_probe_keyed), a descent a replica, as the statement's index
 * scan did; a statement planned again every pass, as its arrays' values
 * were new (issue 37).  A replica no longer there has no target.
 */
static void
load_targets(recorder *r, ArrayType *replicas, ArrayType *provisioning)
{
	Datum	   *ids;
	Datum	   *prov;
	int			n;
	int			nprov;

	deconstruct_array(replicas, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, &ids, NULL, &n);
	deconstruct_array(provisioning, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, &prov, NULL, &nprov);
	for (int i = 0; i < n; i++)
	{
		ScanKeyData key;
		target_read tr = {r, false};

		for (int j = 0; j < nprov && !tr.snapshot; j++)
			tr.snapshot = memcmp(DatumGetPointer(ids[i]), DatumGetPointer(prov[j]), UUID_LEN) == 0;
		/* id: sync.replicas' first column, its primary key */
		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, ids[i]);
		if (!ms_probe_keyed(&r->p->exec, "replicas", "replicas_pkey", 1, &key, target_row, &tr))
			elog(ERROR, "the catalog has no sync.replicas");
	}
	r->fill_empty = MemoryContextMemAllocated(r->fill, false);
}

/* a probe's look for a row of sync.carried its replica acknowledged (*arg: its acked_number, then whether found) */
static bool
carried_acked_row(HeapTuple row, TupleDesc desc, void *arg)
{
	uint64	   *acked = arg;
	bool		isnull;
	Datum		d = ms_probe_column(row, desc, "number", &isnull);

	if (isnull || (uint64) DatumGetInt64(d) > *acked)
		return true;
	*acked = UINT64_MAX;
	return false;
}

/*
 * whether a replica written to holds rows of sync.carried of messages it
 * acknowledged: those heldrows.c deletes.  Mostly none (an acknowledgement
 * since the last pass to it), and no statement is started for them (issue
 * 37); looked for by sync.carried's primary key's prefix, as it deletes them.
 */
static bool
carried_acked(recorder *r)
{
	HASH_SEQ_STATUS seq;
	target	   *tg;
	bool		any = false;

	hash_seq_init(&seq, r->targets);
	while (!any && (tg = hash_seq_search(&seq)) != NULL)
	{
		ScanKeyData key;
		uint64		acked = tg->acked_number;

		if (!tg->written)
			continue;
		/* replica: sync.carried's first column, its primary key's first */
		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(&tg->id));
		any = !ms_probe_keyed(&r->p->exec, "carried", "carried_pkey", 1, &key, carried_acked_row, &acked) ||
			acked == UINT64_MAX;
	}
	if (any)
		hash_seq_term(&seq);
	return any;
}

/* recorder_init: memory, hash tables and statements of one recording */
static void
recorder_init(recorder *r, ms_pass *p, const ms_record_in *in)
{
	HASHCTL		ctl;
	Oid			types[OUTBOX_COLS + SEGMENT_COLS + BODY_COLS + 1];

	memset(r, 0, RECORDER_CLEARED);
	r->p = p;
	r->in = in;
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
		types[c] = get_array_type(outbox_types[c]);
	for (int c = 0; c < SEGMENT_COLS; c++)
		types[OUTBOX_COLS + c] = get_array_type(segment_types[c]);
	for (int c = 0; c < BODY_COLS; c++)
		types[OUTBOX_COLS + SEGMENT_COLS + c] = get_array_type(body_types[c]);
	types[OUTBOX_COLS + SEGMENT_COLS + BODY_COLS] = BYTEAARRAYOID;
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
	r->begin = in->cat->begin;
	r->signer = ms_signing_key();
	initStringInfo(&r->key);

	ms_temp_table(&p->exec, "ms_segments");
	/*
	 * A body stored by a pass before, and not pruned since, is the row its
	 * hash finds (ON CONFLICT ... RETURNING gives its id); one this pass
	 * wrote by an earlier statement (its id 0 in the message) is read by its
	 * hash.  The outbox's reference to sync.bodies is checked at the
	 * statement's end, the bodies written.
	 */
	/* given arrays, it looked cheaper planned for each batch's lengths: planned at every pass (issue 37) */
	r->store_batch = ms_prepare_kept_generic(&p->exec,
									 "WITH " BATCH_BODIES ","
									 " s AS (INSERT INTO pg_temp.ms_segments " BATCH_SEGMENTS "),"
									 BATCH_OUTBOX
									 /* a message whose body was not found: none is, but it would be lost */
									 " SELECT count(*) FILTER (WHERE body IS NULL) FROM o",
									 OUTBOX_COLS + SEGMENT_COLS + BODY_COLS + 1, types);
	memcpy(r->batch_types, types, sizeof r->batch_types);
}

/* snapshot_rows: how many rows each replica's snapshot carries, as its Begin says */
static void
snapshot_rows(recorder *r, ArrayType *provisioning)
{
	ms_pass    *p = r->p;
	Oid			types[1] = {UUIDARRAYOID};
	Datum		values[1] = {PointerGetDatum(provisioning)};

	/* one replica provisioned: the plan counted them (plan.c) */
	if (r->plan->snapshot_rows >= 0)
	{
		ms_find_target(r, (pg_uuid_t *) ARR_DATA_PTR(provisioning))->snapshot_rows = r->plan->snapshot_rows;
		return;
	}
	if (ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning)) == 0)
		return;
	/* every one of them gets every row of the tables read whole (plan.c) */
	for (int i = 0; i < ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning)); i++)
		ms_find_target(r, (pg_uuid_t *) ARR_DATA_PTR(provisioning) + i)->snapshot_rows = r->plan->whole_rows;
	ms_exec(&p->exec, "SELECT replica, count(*) FROM pg_temp.ms_send WHERE replica = ANY ($1) GROUP BY replica",
			1, types, values, NULL, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		ms_find_target(r, DatumGetUUIDP(ms_value(i, 1, &isnull)))->snapshot_rows +=
			DatumGetInt64(ms_value(i, 2, &isnull));
	}
}

/*
 * chains_later: the n replicas written to, none provisioned, handed to the
 * worker with what the pass made each owed (ms_pass_later.written), and
 * told (NOTIFY magic_sync, at commit, 200 to a payload) as the statement
 * that keeps them in pg_temp.ms_written tells them.  Nothing in such a pass
 * reads ms_written: evolve.c only when it provisions or sends a schema
 * change, relay.c's outbox_bounds only in a pass that checks them itself.
 */
static void
chains_later(recorder *r, Datum *ids, Datum *messages, Datum *bytes, int n)
{
	MemoryContext old = MemoryContextSwitchTo(r->p->exec.cxt);
	ms_pass_later *later = &r->did->later;
	StringInfoData payload;

	later->written = construct_array(ids, n, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR);
	later->written_messages = construct_array(messages, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	later->written_bytes = construct_array(bytes, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	MemoryContextSwitchTo(old);
	initStringInfo(&payload);
	for (int i = 0; i < n; i++)
	{
		if (i % 200 > 0)
			appendStringInfoChar(&payload, ',');
		appendStringInfoString(&payload, DatumGetCString(DirectFunctionCall1(uuid_out, ids[i])));
		if (i % 200 == 199 || i == n - 1)
		{
			Async_Notify("magic_sync", payload.data);
			resetStringInfo(&payload);
		}
	}
	pfree(payload.data);
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
	bool		snapshots = false;

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
		cols[2][k] = PointerGetDatum(ms_to_bytea(tg->last_nonce, MS_NONCE_BYTES));
		cols[3][k] = Int64GetDatum((int64) tg->first_number);
		cols[4][k] = Int64GetDatum((int64) tg->last_number);
		nulls[3][k] = nulls[4][k] = !tg->snapshot;
		snapshots = snapshots || tg->snapshot;
		cols[5][k] = Int64GetDatum(tg->owed_messages);
		cols[6][k] = Int64GetDatum(tg->owed_bytes);
		k++;
	}
	if (k == 0)
		return;
	/* their waiting pulls wake at the commit, before the NOTIFY (transport/pull_wait.c) */
	for (int i = 0; i < k; i++)
		ms_wake_replica_at_commit(DatumGetUUIDP(cols[0][i]));
	if (r->in->chains_later && !snapshots && r->nprovisioning == 0 && !ms_evolve_any(r->in->cat))
	{
		chains_later(r, cols[0], cols[5], cols[6], k);
		return;
	}
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
	values[7] = PointerGetDatum(r->in->cat->schema_hash);
	/*
	 * A worker's pass (bounds_later) writes no chain but a snapshot's into
	 * sync.replicas: every filing and pull writes its replica's row, and the
	 * pass, which does not hold them off (worker.c), would fail to serialize
	 * on it.  ms_relay_bounds copies them after its commit, from the
	 * messages and bytes kept here, before the worker's next pass reads
	 * them (worker.c); meanwhile the outbox says where each chain is
	 * (MS_HEAD).
	 */
	/*
	 * And the replicas written to are told (NOTIFY magic_sync, delivered at
	 * commit; a payload holds fewer than 8000 bytes: 200 uuids at a time) by
	 * the same statement: one fewer a pass (issue 37).
	 */
	ms_exec(&p->exec, psprintf("WITH w AS (%s RETURNING id)"
			" SELECT pg_notify('magic_sync', string_agg(id::text, ',')) FROM ("
			"  SELECT id, (row_number() OVER (ORDER BY id) - 1) / 200 AS g FROM w) s"
			" GROUP BY g", r->in->bounds_later
			? "INSERT INTO pg_temp.ms_written SELECT w.id, CASE WHEN w.first IS NULL THEN w.messages END,"
			"  CASE WHEN w.first IS NULL THEN w.bytes END"
			"  FROM unnest($1, $2, $3, $4, $5, $6, $7) w(id, last, nonce, first, snap_end, messages, bytes)"
			: "INSERT INTO pg_temp.ms_written (id) SELECT unnest($1)"), r->in->bounds_later ? 7 : 1, types, values, NULL, 0);
	if (r->in->bounds_later && !snapshots)
		return;
	/*
	 * A snapshot written ($4 not null): its numbers, its schema, the replica
	 * provisioned, and nothing owed beyond it (every message of the pass is
	 * numbered up to its end).  Otherwise what the pass wrote is owed too
	 * ($6, $7): relay.c's outbox_bounds reads it rather than the outbox.
	 * A snapshot whose held rows are written once the pass committed
	 * (ms_record_held_later): held_due names it until then.
	 */
	ms_exec(&p->exec, psprintf(
			"UPDATE sync.replicas r SET last_number = w.last, last_nonce = w.nonce,"
			" snapshot_number = coalesce(w.first, r.snapshot_number),"
			" snapshot_end = coalesce(w.snap_end, r.snapshot_end),%s"
			" schema_hash = CASE WHEN w.first IS NULL THEN r.schema_hash ELSE $8 END,"
			" provision = CASE WHEN w.first IS NULL THEN r.provision ELSE false END,"
			" provision_failed_at = CASE WHEN w.first IS NULL THEN r.provision_failed_at END%s"
			" FROM unnest($1, $2, $3, $4, $5, $6, $7) w(id, last, nonce, first, snap_end, messages, bytes)"
			" WHERE r.id = w.id%s",
			r->in->has.owed ? " owed_messages = CASE WHEN w.first IS NULL THEN r.owed_messages + w.messages ELSE 0 END,"
			" owed_bytes = CASE WHEN w.first IS NULL THEN r.owed_bytes + w.bytes ELSE 0 END," : "",
			r->did->later.rows > 0 ? ", held_due = w.first" : "",
			r->in->bounds_later ? " AND w.first IS NOT NULL" : ""),
			8, types, values, NULL, 0);
}

List *
ms_record(ms_pass *p, const ms_record_in *in, ArrayType *replicas, ArrayType *provisioning,
		  const ms_planned *plan, ms_recorded *did)
{
	recorder	r;
	HASH_SEQ_STATUS seq;
	target	   *tg;
	List	   *bad = NIL;
	ListCell   *lc;
	StringInfoData end;
	ms_wish_due_set *due;
	bool		one_replica;
	bool		addressed_done = false;

	recorder_init(&r, p, in);
	r.plan = plan;
	r.noted = plan->noted;
	r.did = did;
	/* a plan run again after rows were set aside starts over (did->later too) */
	memset(did, 0, sizeof *did);
	load_targets(&r, replicas, provisioning);
	one_replica = ArrayGetNItems(ARR_NDIM(replicas), ARR_DIMS(replicas)) == 1;
	r.provisioning = (pg_uuid_t *) ARR_DATA_PTR(provisioning);
	r.nprovisioning = ArrayGetNItems(ARR_NDIM(provisioning), ARR_DIMS(provisioning));
	snapshot_rows(&r, provisioning);
	/* rows of large tables read whole counted as they are read: each snapshot's Begin written last (pack.c) */
	if (plan->whole_later)
	{
		hash_seq_init(&seq, r.targets);
		while ((tg = hash_seq_search(&seq)) != NULL)
			if (tg->snapshot)
				ms_begin_first(&r, tg);
	}

	/* upserts, parents first; the rows that cannot go are in the pass's memory */
	foreach(lc, in->cat->tables)
	{
		ms_table   *t = lfirst(lc);

		ms_load_table(p, t, one_replica, emit_upsert, &r, &bad);
		/* a table the replicas provisioned want whole: read once, for all of them (plan.c) */
		if (plan->whole != NULL && plan->whole[t->id])
			ms_load_whole(p, t, plan->blocked, emit_whole, &r, &bad, &in->fault->whole_failed);
	}
	if (bad != NIL)
	{
		MemoryContextDelete(r.cxt);
		return bad;
	}
	/* then deletes, children first; most passes take nothing back (plan.c counted them) */
	for (int i = list_length(in->cat->tables) - 1; i >= 0 && plan->taken > 0; i--)
		record_deletes(&r, list_nth(in->cat->tables, i));

	initStringInfo(&end);
	due = ms_wish_due(p);
	hash_seq_init(&seq, r.targets);
	while ((tg = hash_seq_search(&seq)) != NULL)
	{
		ms_flush(&r, tg);
		if (tg->snapshot)
		{
			if (tg->begin_later)
				ms_write_begin(&r, tg);
			end_snapshot(&r, tg, &end);
			did->provisioned++;
		}
		/* the server's wishes last, in a message of their own (wish_send.c) */
		if (ms_wish_due_for(due, &tg->id) && ms_wish_pack(p, &tg->id, &tg->down))
		{
			ms_flush(&r, tg);
			ms_wish_sent(p, &tg->id, tg->last_number);
		}
	}
	/*
	 * the held rows the plan addressed, with the last batch when it is the
	 * only one, no replica is provisioned, no held row of a table read whole
	 * is written before them, and the segments are too few to analyse
	 */
	if (r.segments == 0 && r.nprovisioning == 0 && r.nheld == 0 && plan->addressed &&
		plan->planned < MS_ANALYZE_ROWS)
		addressed_done = ms_write_batch_held(&r, in->has.carried);
	else if (r.segments == 0 && r.nprovisioning == 0 && r.nheld == 0 && plan->planned < MS_ANALYZE_ROWS)
		only_batch(&r);
	else
		ms_write_batch(&r);
	ms_write_held(&r);
	ms_held_written(&r);
	ms_record_held(p, in->has.carried, in->has.carried && carried_acked(&r), provisioning,
				   r.segments, r.held_whole, plan, addressed_done);
	record_chains(&r);
	MemoryContextDelete(r.cxt);
	return NIL;
}
