/*-------------------------------------------------------------------------
 * answers.c
 *	  What a filing answers: to the replica, a Filed message for the send
 *	  (queued in sync.answers for sync.pull, seen only once the filing
 *	  commits, and found by send id when the same upload is filed again);
 *	  to the caller of sync.file, what became of the upload.
 *
 * The answer accounts for every row of the send: per table how many came to
 * each end, and each row not filed named with why (up to
 * MS_ANSWER_NAMED_MAX; the replica lets go of a table's rows only when all
 * are accounted for, and sends the rest again).  A send numbered at or
 * below the last filed for its replica (sync.sends) is a
 * duplicate however late it comes, its answers long pruned: its answer
 * says so and names the last filed, so that a replica whose file was
 * restored from an older copy numbers beyond it.  Numbers and answers are
 * per lane (lanes.c): the answer says the lane of the send it answers.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "decl.h"
#include "file.h"
#include "hlc_clock.h"
#include "signing.h"
#include "utils/json.h"
#include "spi_check.h"
#include "wire.h"

bool
ms_already_filed(ms_filing *f, Sync__Up *up)
{
	Oid			types[2] = {UUIDOID, BYTEAOID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica),
	PointerGetDatum(ms_to_bytea(up->send_id.data, up->send_id.len))};
	bool		found;

	ms_spi_check(ms_spi_run("SELECT FROM sync.answers WHERE replica = $1 AND send_id = $2",
									   2, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.answers");
	found = SPI_processed > 0;
	SPI_freetuptable(SPI_tuptable);
	return found;
}

bool
ms_numbered_before(ms_filing *f, Sync__Up *up)
{
	Oid			types[2] = {UUIDOID, TEXTOID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), CStringGetTextDatum(f->lane ? f->lane : "")};
	bool		isnull;

	/* the replica's row, locked: two filings of one replica, of any lanes, take turns from here */
	ms_spi_check(ms_spi_run(ms_decl_laned() ?
									   "SELECT coalesce((SELECT s.filed_seq FROM sync.sends s WHERE s.replica = r.id"
									   "   AND s.lane = $2), 0)"
									   "  FROM sync.replicas r WHERE r.id = $1 FOR UPDATE OF r" :
									   ms_uploads_catalog() ?
									   "SELECT coalesce((SELECT s.filed_seq FROM sync.sends s WHERE s.replica = r.id), 0)"
									   "  FROM sync.replicas r WHERE r.id = $1 FOR UPDATE OF r" :
									   "SELECT 0::bigint FROM sync.replicas WHERE id = $1 FOR UPDATE",
									   2, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.replicas");
	f->last_seq = SPI_processed == 1 ?
		(uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) : 0;
	SPI_freetuptable(SPI_tuptable);
	return up->seq <= f->last_seq;
}

/*
 * queue: a Filed answer of the send, seen once the filing commits: its
 * head, the installation's signature (signing.h), its body -- signed like
 * every message, so that an answer forged from what an upload carries lets
 * go of nothing on a replica that trusts the key
 */
static void
queue(ms_filing *f, Sync__Up *up, Sync__Filed *filed)
{
	ms_head		h;
	size_t		headlen,
				bodylen;
	uint8	   *message;
	bytea	   *bytes;
	uint8		body_hash[PG_SHA256_DIGEST_LENGTH];
	ms_signer  *signer = ms_signing_key();
	Oid			types[4] = {UUIDOID, BYTEAOID, BYTEAOID, TEXTOID};
	Datum		values[4];
	bool		laned = ms_decl_laned();

	memset(&h, 0, sizeof h);
	h.protocol = MS_PROTOCOL;
	h.epoch = f->epoch.id;
	/* an old primary's answer is refused by a replica of a newer generation */
	h.generation = f->epoch.generation;
	h.replica = f->replica.data;
	h.clock = ms_hlc_server_clock();
	headlen = ms_head_packed_size(&h);
	bodylen = ms_body_packed_size(NULL, NULL, filed);
	bytes = palloc(VARHDRSZ + headlen + MS_SIGNATURE_FIELD_BYTES + bodylen);
	message = (uint8 *) VARDATA(bytes);
	ms_head_pack(&h, message);
	if (signer != NULL)
	{
		/*
		 * packed past the room its signature takes, then moved up to where
		 * the signed head ends: one copy of an answer that may name a
		 * thousand rows, not two (issue 38.7)
		 */
		uint8	   *body = message + headlen + MS_SIGNATURE_FIELD_BYTES;
		size_t		signed_len;

		ms_body_pack(NULL, NULL, filed, body);
		ms_pg_sha256(body, bodylen, body_hash, "an answer's body");
		signed_len = ms_sign_head(signer, message, headlen, body_hash);
		if (signed_len != headlen + MS_SIGNATURE_FIELD_BYTES)
			memmove(message + signed_len, body, bodylen);
		headlen = signed_len;
	}
	else
		ms_body_pack(NULL, NULL, filed, message + headlen);
	SET_VARSIZE(bytes, VARHDRSZ + headlen + bodylen);
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = PointerGetDatum(ms_to_bytea(up->send_id.data, up->send_id.len));
	values[2] = PointerGetDatum(bytes);
	values[3] = CStringGetTextDatum(filed->lane);
	/*
	 * not a kept plan (ms_spi_run): run through one, an answer's bytes (up to
	 * megabytes) were held twice at the filing's peak -- tests/e2e/
	 * filing_memory.py's tables case, 3.7 x the upload here, 4.2 x kept
	 */
	ms_spi_check(SPI_execute_with_args(laned ?
									   "INSERT INTO sync.answers (replica, send_id, message, lane) VALUES ($1, $2, $3, $4)"
									   " ON CONFLICT DO NOTHING" :
									   "INSERT INTO sync.answers (replica, send_id, message) VALUES ($1, $2, $3)"
									   " ON CONFLICT DO NOTHING",
									   laned ? 4 : 3, types, values, NULL, false, 0), SPI_OK_INSERT, "could not queue an answer");
}

/* a list of the answer's Refusals */
static Sync__Refusal **
refusals(List *l, size_t *n)
{
	Sync__Refusal **out = palloc(sizeof(Sync__Refusal *) * Max(list_length(l), 1));
	ListCell   *lc;

	*n = 0;
	foreach(lc, l)
		out[(*n)++] = lfirst(lc);
	return out;
}

void
ms_answer(ms_filing *f, Sync__Up *up)
{
	Sync__Filed filed = SYNC__FILED__INIT;
	ListCell   *lc;
	Oid			types[3] = {UUIDOID, INT8OID, TEXTOID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int64GetDatum((int64) f->seq),
	CStringGetTextDatum(f->lane ? f->lane : "")};
	bool		laned = ms_decl_laned();

	filed.send_id = up->send_id;
	filed.lane = (char *) (f->lane ? f->lane : "");
	filed.rows = (uint32) f->counts[MS_FILED];
	filed.refused = refusals(f->named[MS_REFUSED], &filed.n_refused);
	filed.dropped = refusals(f->named[MS_DROPPED], &filed.n_dropped);
	filed.kept = refusals(f->named[MS_WAITS], &filed.n_kept);
	filed.tables = palloc(sizeof(Sync__FiledTable *) * Max(list_length(f->tables), 1));
	foreach(lc, f->tables)
	{
		ms_filed_counts *c = lfirst(lc);
		Sync__FiledTable *t = palloc(sizeof(Sync__FiledTable));

		sync__filed_table__init(t);
		t->table = c->table;
		t->filed = (uint32) c->counts[MS_FILED];
		t->refused = (uint32) c->counts[MS_REFUSED];
		t->dropped = (uint32) c->counts[MS_DROPPED];
		t->waiting = (uint32) c->counts[MS_WAITS];
		t->set_aside = (uint32) c->counts[MS_SET_ASIDE];
		filed.tables[filed.n_tables++] = t;
	}
	/* rows in an old schema, not filed: counted with their table, named apart (docs/protocol.md 5.3) */
	filed.again = refusals(f->again, &filed.n_again);
	filed.tables = repalloc(filed.tables, sizeof(Sync__FiledTable *) *
							Max(list_length(f->tables) + list_length(f->again_tables), 1));
	foreach(lc, f->again_tables)
	{
		ms_filed_counts *c = lfirst(lc);
		Sync__FiledTable *t = NULL;

		for (size_t i = 0; i < filed.n_tables && t == NULL; i++)
			if (strcmp(filed.tables[i]->table, c->table) == 0)
				t = filed.tables[i];
		if (t == NULL)
		{
			t = palloc(sizeof(Sync__FiledTable));
			sync__filed_table__init(t);
			t->table = c->table;
			filed.tables[filed.n_tables++] = t;
		}
		t->again = (uint32) c->counts[MS_FILED];
	}
	/* range questions (range.c), answered by the replica's next upload */
	filed.n_ranges = list_length(f->range_asks);
	filed.ranges = palloc(sizeof(Sync__RangeAsk *) * Max(filed.n_ranges, 1));
	for (size_t i = 0; i < filed.n_ranges; i++)
		filed.ranges[i] = list_nth(f->range_asks, (int) i);
	/* the server's clock is never behind what it filed: the answer carries it */
	ms_hlc_merge_upload(up->clock);
	queue(f, up, &filed);
	/* the last send filed: one numbered at or below it is a duplicate from now on */
	if (f->filer->updated)
		ms_spi_check(ms_spi_run(laned ?
										   "INSERT INTO sync.sends (replica, filed_seq, lane) VALUES ($1, $2, $3)"
										   " ON CONFLICT (replica, lane) DO UPDATE"
										   "   SET filed_seq = greatest(sync.sends.filed_seq, EXCLUDED.filed_seq), filed_at = now()" :
										   "INSERT INTO sync.sends (replica, filed_seq) VALUES ($1, $2)"
										   " ON CONFLICT (replica) DO UPDATE SET filed_seq = greatest(sync.sends.filed_seq, EXCLUDED.filed_seq),"
										   "   filed_at = now()",
										   laned ? 3 : 2, types, values, NULL, false, 0), SPI_OK_INSERT,
					 "could not record the last send filed");
}

void
ms_answer_duplicate(ms_filing *f, Sync__Up *up)
{
	Sync__Filed filed = SYNC__FILED__INIT;

	ms_epoch_current(&f->epoch);
	filed.send_id = up->send_id;
	filed.duplicate = true;
	filed.last_seq = f->last_seq;
	filed.lane = (char *) (f->lane ? f->lane : "");
	queue(f, up, &filed);
}

/* the few reasons of an outcome, as a JSON array */
static void
reasons(StringInfo out, List *l)
{
	ListCell   *lc;

	appendStringInfoChar(out, '[');
	foreach(lc, l)
	{
		if (lc != list_head(l))
			appendStringInfoChar(out, ',');
		escape_json(out, lfirst(lc));
	}
	appendStringInfoChar(out, ']');
}

char *
ms_file_result(const ms_filing *f, const char *digests)
{
	StringInfoData out;

	initStringInfo(&out);
	appendStringInfo(&out, "{\"acknowledged\": " INT64_FORMAT, f->acked);
	for (int i = 0; i < MS_OUTCOMES; i++)
		appendStringInfo(&out, ", \"%s\": %d", ms_outcome_names[i], f->counts[i]);
	appendStringInfo(&out, ", \"digests\": \"%s\", \"provisioning\": %s, \"seq\": " UINT64_FORMAT,
					 digests, f->provisioning ? "true" : "false", f->seq);
	/* a lane's name needs no escaping (lane.h); the first lane's is not said, as before lanes */
	if (!ms_lane_first(f))
		appendStringInfo(&out, ", \"lane\": \"%s\"", f->lane);
	appendStringInfoString(&out, ", \"reasons\": {");
	for (int i = 1, n = 0; i < MS_OUTCOMES; i++)
	{
		if (f->reasons[i] == NIL)
			continue;
		appendStringInfo(&out, "%s\"%s\": ", n++ ? ", " : "", ms_outcome_names[i]);
		reasons(&out, f->reasons[i]);
	}
	appendStringInfoString(&out, "}}");
	return out.data;
}

char *
ms_duplicate_result(const ms_filing *f, bool numbered_before)
{
	const char *lane = ms_lane_first(f) ? "" : psprintf(", \"lane\": \"%s\"", f->lane);

	if (!numbered_before)
		return psprintf("{\"duplicate\": true%s}", lane);
	return psprintf("{\"duplicate\": true, \"seq\": " UINT64_FORMAT ", \"last_seq\": " UINT64_FORMAT "%s}",
					f->seq, f->last_seq, lane);
}
