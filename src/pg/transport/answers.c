/*-------------------------------------------------------------------------
 * answers.c
 *	  What a filing answers: to the replica, a Filed message for the send
 *	  (queued in sync.answers for sync.pull, seen only once the filing
 *	  commits, and found by send id when the same upload is filed again);
 *	  to the caller of sync.file, what became of the upload.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"

#include "file.h"
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

void
ms_answer(ms_filing *f, Sync__Up *up)
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
	filed.rows = (uint32) f->counts[MS_FILED];
	filed.n_refused = list_length(f->refused);
	filed.refused = palloc(sizeof(Sync__Refusal *) * Max(filed.n_refused, 1));
	foreach(lc, f->refused)
		filed.refused[i++] = lfirst(lc);
	filed.n_again = list_length(f->again);
	filed.again = palloc(sizeof(Sync__Refusal *) * Max(filed.n_again, 1));
	i = 0;
	foreach(lc, f->again)
		filed.again[i++] = lfirst(lc);
	m.protocol = MS_PROTOCOL;
	m.epoch.data = f->epoch.id;
	m.epoch.len = MS_EPOCH_BYTES;
	/* an old primary's answer is refused by a replica of a newer generation */
	m.generation = f->epoch.generation;
	m.replica.data = f->replica.data;
	m.replica.len = MS_REPLICA_BYTES;
	m.body_case = SYNC__TO_REPLICA__BODY_FILED;
	m.filed = &filed;
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

char *
ms_file_result(const ms_filing *f, const char *digests)
{
	StringInfoData out;

	initStringInfo(&out);
	appendStringInfo(&out, "{\"acknowledged\": " INT64_FORMAT, f->acked);
	for (int i = 0; i < MS_OUTCOMES; i++)
		appendStringInfo(&out, ", \"%s\": %d", ms_outcome_names[i], f->counts[i]);
	appendStringInfo(&out, ", \"digests\": \"%s\", \"provisioning\": %s}", digests,
					 f->provisioning ? "true" : "false");
	return out.data;
}
