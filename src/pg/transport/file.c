/*-------------------------------------------------------------------------
 * file.c
 *	  sync.file(replica, upload, sender): filing what a replica says (docs/design.md 5.2).
 *
 * In one transaction, trusting only what the server knows of the sender (the
 * replica argument, checked against the caller's role), never what the rows
 * claim: the acknowledgement and what the replica says of itself (ack.c),
 * its rows (filing.c), then the answer (answers.c), a Filed for the send,
 * queued for sync.pull and seen only once this transaction commits.  The
 * catalog is read, and the statements prepared, once for the call
 * (filer.c), however many rows the upload carries.
 *
 * Filing the same upload twice changes nothing the second time: its answer
 * is found by send id.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "access.h"
#include "evolve.h"
#include "file.h"
#include "settings.h"
#include "wire.h"

PG_FUNCTION_INFO_V1(ms_file);

/* decode: the upload as an Up of this replica, or an error saying why not */
static Sync__Up *
decode(bytea *upload, pg_uuid_t *replica, const char *replica_text)
{
	Sync__Up   *up;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];

	if (VARSIZE_ANY_EXHDR(upload) > (Size) ms_upload_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("an upload of %zu bytes is over magic_sync.upload_bytes (%d)",
						(size_t) VARSIZE_ANY_EXHDR(upload), ms_upload_bytes),
				 errhint("A replica keeps its uploads under the bound it is given; raise magic_sync.upload_bytes to take larger ones.")));
	up = ms_up_decode((const uint8_t *) VARDATA_ANY(upload), VARSIZE_ANY_EXHDR(upload),
					  (size_t) ms_upload_bytes, ms_pg_allocator(), &st, reason);
	if (up == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("the upload is not an Up message"),
				 errdetail("%s.", reason),
				 errhint("Nothing of it was filed.")));
	if (st == MS_WIRE_LATER_PROTOCOL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the upload is of protocol %u, later than this server's %d", up->protocol, MS_PROTOCOL),
				 errhint("Upgrade the server's magic_sync before its replicas'.")));
	if (memcmp(up->replica.data, replica->data, MS_REPLICA_BYTES) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the upload names another replica than %s", replica_text),
				 errdetail("An upload is filed under the replica it is filed for, and names it."),
				 errhint("File each replica's uploads under its own uuid.")));
	return up;
}

/* again: every row of r named in the answer, to be sent again in the new schema */
static void
again(ms_filing *f, const Sync__Rows *r)
{
	for (size_t i = 0; i < r->n_keys + r->n_deletes; i++)
	{
		Sync__Refusal *a = palloc(sizeof(Sync__Refusal));

		sync__refusal__init(a);
		a->table = r->table;
		a->key = i < r->n_keys ? r->keys[i] : r->deletes[i - r->n_keys];
		a->reason = "written in a schema the replica has been sent a change of since";
		f->again = lappend(f->again, a);
	}
}

/*
 * ms_file: sync.file(replica uuid, upload bytea, sender jsonb) returns jsonb:
 * what became of the upload.
 */
Datum
ms_file(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *replica;
	ms_filer	fr;
	ms_filing	f;
	Sync__Up   *up;
	const char *digests;
	char	   *result;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sync.file takes a replica and an upload, neither of them null"),
				 errhint("File what sync_upload() returned on the replica.")));
	replica = PG_GETARG_UUID_P(0);
	memset(&f, 0, sizeof f);
	f.filer = &fr;
	f.replica = *replica;
	f.replica_text = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(replica)));
	f.sender = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);

	SPI_connect();
	ms_replica_access(replica, "file");
	up = decode(PG_GETARG_BYTEA_PP(1), replica, f.replica_text);
	if (ms_already_filed(&f, up))
	{
		SPI_finish();
		PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum("{\"duplicate\": true}")));
	}
	ms_filer_begin(&fr);
	ms_epoch_current(&f.epoch);
	ms_acknowledge(&f, up->applied);
	ms_gap(&f, up);
	ms_refusals(&f, up);
	/* rows written in a schema the replica has been sent a change of since: it sends them again */
	for (size_t i = 0; i < up->n_rows; i++)
	{
		if (up->applied != NULL && ms_evolve_stale(replica, up->rows[i]->table, up->applied->number))
			again(&f, up->rows[i]);
		else
			ms_file_rows(&f, up->rows[i]);
	}
	digests = ms_digests(&f, up);
	ms_backlog(&f, up);
	ms_answer(&f, up);
	SPI_finish();

	/* what it says is built in the caller's memory: the call's went with SPI_finish */
	result = ms_file_result(&f, digests);
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(result)));
}
