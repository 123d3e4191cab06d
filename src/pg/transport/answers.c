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
 * restored from an older copy numbers beyond it.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"

#include "file.h"
#include "hlc_clock.h"
#include "utils/json.h"
#include "wire.h"

bool
ms_already_filed(ms_filing *f, Sync__Up *up)
{
	Oid			types[2] = {UUIDOID, BYTEAOID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica),
	PointerGetDatum(ms_to_bytea(up->send_id.data, up->send_id.len))};
	bool		found;

	if (SPI_execute_with_args("SELECT FROM sync.answers WHERE replica = $1 AND send_id = $2",
							  2, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.answers");
	found = SPI_processed > 0;
	SPI_freetuptable(SPI_tuptable);
	return found;
}

bool
ms_numbered_before(ms_filing *f, Sync__Up *up)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(&f->replica)};
	bool		isnull;

	/* the replica's row, locked: two filings of one replica take turns from here */
	if (SPI_execute_with_args(ms_uploads_catalog() ?
							  "SELECT coalesce((SELECT s.filed_seq FROM sync.sends s WHERE s.replica = r.id), 0)"
							  "  FROM sync.replicas r WHERE r.id = $1 FOR UPDATE OF r" :
							  "SELECT 0::bigint FROM sync.replicas WHERE id = $1 FOR UPDATE",
							  1, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.replicas");
	f->last_seq = SPI_processed == 1 ?
		(uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) : 0;
	SPI_freetuptable(SPI_tuptable);
	return up->seq <= f->last_seq;
}

/* queue: a Filed answer of the send, seen once the filing commits */
static void
queue(ms_filing *f, Sync__Up *up, Sync__Filed *filed)
{
	Sync__ToReplica m = SYNC__TO_REPLICA__INIT;
	size_t		size;
	bytea	   *bytes;
	Oid			types[3] = {UUIDOID, BYTEAOID, BYTEAOID};
	Datum		values[3];

	m.protocol = MS_PROTOCOL;
	m.epoch.data = f->epoch.id;
	m.epoch.len = MS_EPOCH_BYTES;
	/* an old primary's answer is refused by a replica of a newer generation */
	m.generation = f->epoch.generation;
	m.replica.data = f->replica.data;
	m.replica.len = MS_REPLICA_BYTES;
	m.body_case = SYNC__TO_REPLICA__BODY_FILED;
	m.filed = filed;
	m.clock = ms_hlc_server_clock();
	size = sync__to_replica__get_packed_size(&m);
	bytes = palloc(VARHDRSZ + size);
	SET_VARSIZE(bytes, VARHDRSZ + size);
	sync__to_replica__pack(&m, (uint8_t *) VARDATA(bytes));
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = PointerGetDatum(ms_to_bytea(up->send_id.data, up->send_id.len));
	values[2] = PointerGetDatum(bytes);
	if (SPI_execute_with_args("INSERT INTO sync.answers (replica, send_id, message) VALUES ($1, $2, $3)"
							  " ON CONFLICT DO NOTHING",
							  3, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not queue an answer");
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
	Oid			types[2] = {UUIDOID, INT8OID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), Int64GetDatum((int64) f->seq)};

	filed.send_id = up->send_id;
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
	/* the server's clock is never behind what it filed: the answer carries it */
	ms_hlc_merge_upload(up->clock);
	queue(f, up, &filed);
	/* the last send filed: one numbered at or below it is a duplicate from now on */
	if (f->filer->updated &&
		SPI_execute_with_args("INSERT INTO sync.sends (replica, filed_seq) VALUES ($1, $2)"
							  " ON CONFLICT (replica) DO UPDATE SET filed_seq = greatest(sync.sends.filed_seq, EXCLUDED.filed_seq),"
							  "   filed_at = now()",
							  2, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record the last send filed");
}

void
ms_answer_duplicate(ms_filing *f, Sync__Up *up)
{
	Sync__Filed filed = SYNC__FILED__INIT;

	ms_epoch_current(&f->epoch);
	filed.send_id = up->send_id;
	filed.duplicate = true;
	filed.last_seq = f->last_seq;
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
	appendStringInfo(&out, ", \"digests\": \"%s\", \"provisioning\": %s, \"seq\": " UINT64_FORMAT ", \"reasons\": {",
					 digests, f->provisioning ? "true" : "false", f->seq);
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
	if (!numbered_before)
		return pstrdup("{\"duplicate\": true}");
	return psprintf("{\"duplicate\": true, \"seq\": " UINT64_FORMAT ", \"last_seq\": " UINT64_FORMAT "}",
					f->seq, f->last_seq);
}
