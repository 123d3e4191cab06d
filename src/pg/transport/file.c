/*-------------------------------------------------------------------------
 * file.c
 *	  sync.file(replica, upload, sender): filing what a replica says (docs/design.md 5.2).
 *
 * First the upload is verified whole (src/shared/upcheck.h): its length is
 * its length and its last field a check of every byte before: a cut, a
 * flipped bit or bytes joined on the way are refused, nothing of them filed.
 * Then it is read a piece at a time (src/shared/upread.h), so that memory
 * while filing is the upload and one piece of it, never the whole decoded.
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
 * is found by send id.  Every send is numbered by its replica, greater than
 * the last: one numbered at or below the last filed is a replay, however
 * late, and changes nothing either (its answer says so).  Numbers are
 * the upload's lane's (lanes.c): each lane of a replica numbers its own.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "access.h"
#include "evolve.h"
#include "fields.h"
#include "file.h"
#include "settings.h"
#include "upcheck.h"
#include "upread.h"
#include "utils/memutils.h"
#include "wire.h"
#include "wish.h"
#include "updated.h"

PG_FUNCTION_INFO_V1(ms_file);

/* refuse: an upload that is not whole or not an Up, refused before anything of it is read */
static void
refuse(const char *what, const char *reason)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("%s", what),
			 errdetail("%s.", reason),
			 errhint("Nothing of it was filed; the replica sends its rows again.")));
}

/*
 * decode: the upload verified whole and checked as an Up of this replica,
 * its head unpacked; its lists stay bytes, read a piece at a time.
 */
static Sync__Up *
decode(const uint8 *bytes, size_t len, pg_uuid_t *replica, const char *replica_text)
{
	Sync__Up   *up;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];

	if (len > (Size) ms_upload_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("an upload of %zu bytes is over magic_sync.upload_bytes (%d)", len, ms_upload_bytes),
				 errhint("A replica keeps its uploads under the bound it is given; raise magic_sync.upload_bytes to take larger ones.")));
	if (ms_up_verify(bytes, len, reason))
		 /* whole */ ;
	else if (len > 0 && bytes[0] == 0x08)
		/* an Up that begins with its protocol: written by a library from before uploads were framed */
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the upload is of a replica library older than this server's"),
				 errdetail("It carries no length and no check (%s), so it cannot be known to be whole.", reason),
				 errhint("Update the replica's magic_sync_sqlite and agent to this release; nothing of it was filed, and its rows wait on the replica.")));
	else
		refuse("the upload is not whole", reason);
	up = ms_up_read(bytes, len, (size_t) ms_upload_bytes, ms_pg_allocator(), &st, reason);
	if (up == NULL)
		refuse("the upload is not an Up message", reason);
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
	if (up->seq == 0)
		refuse("the upload is not numbered", "An upload carries its send number (field 11), one greater than the last its replica sent");
	return up;
}

/* stale: whether the rows (a Rows of the upload) are of a table in a schema older than the replica was sent */
static bool
stale(ms_filing *f, Sync__Up *up, const uint8 *rows, size_t len)
{
	ms_rows_reader r;

	ms_rows_open(&r, rows, len);
	return ms_evolve_stale(&f->replica, r.table, up->applied->number);
}

/*
 * again: every row of a Rows counted, and named in the answer (as many as
 * it names in all), to be sent again in the new schema
 */
static void
again(ms_filing *f, const uint8 *rows, size_t len)
{
	ms_rows_reader r;
	ms_filed_counts *c = NULL;
	Sync__Key  *k;
	const uint8_t *bytes;
	size_t		n;
	ListCell   *lc;
	MemoryContext old = MemoryContextSwitchTo(f->filer->cxt);

	ms_rows_open(&r, rows, len);
	foreach(lc, f->again_tables)
		if (strcmp(((ms_filed_counts *) lfirst(lc))->table, r.table) == 0)
			c = lfirst(lc);
	if (c == NULL)
	{
		c = palloc0(sizeof(ms_filed_counts));
		c->table = pstrdup(r.table);
		f->again_tables = lappend(f->again_tables, c);
	}
	while (ms_rows_next(&r, ms_pg_allocator(), &k, &bytes, &n))
	{
		c->counts[MS_FILED]++;
		if (f->nnamed < MS_ANSWER_NAMED_MAX)
		{
			Sync__Refusal *a = palloc(sizeof(Sync__Refusal));

			sync__refusal__init(a);
			a->table = c->table;
			a->key = k;
			a->reason = "written in a schema the replica has been sent a change of since";
			f->again = lappend(f->again, a);
			f->nnamed++;
		}
	}
	MemoryContextSwitchTo(old);
}

/*
 * refusals: the rows the replica could not take, a chunk at a time: ack.c
 * takes them as a list, and a chunk keeps the list small however many the
 * upload carries
 */
static void
refusals(ms_filing *f, Sync__Up *up, const uint8 *bytes, size_t len)
{
	Sync__Up	chunk = *up;
	Sync__Refusal *some[256];
	size_t		pos = 0;
	const uint8_t *p;
	size_t		n;
	bool		more = true;
	MemoryContext old = MemoryContextSwitchTo(f->row_cxt);

	chunk.n_refusals = 0;
	chunk.refusals = some;
	while (more)
	{
		more = ms_up_next(bytes, len, MS_FIELD_UP_REFUSALS, &pos, &p, &n);
		if (more)
			some[chunk.n_refusals++] = sync__refusal__unpack(ms_pg_allocator(), n, p);
		if (chunk.n_refusals == lengthof(some) || (!more && chunk.n_refusals > 0))
		{
			/* what filing them allocates goes with the chunk (SPI leaves its own context current) */
			ms_refusals(f, &chunk);
			MemoryContextSwitchTo(f->row_cxt);
			MemoryContextReset(f->row_cxt);
			chunk.n_refusals = 0;
		}
	}
	MemoryContextSwitchTo(old);
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
	bytea	   *upload;
	const uint8 *bytes;
	size_t		len;
	const char *digests;
	char	   *result;
	MemoryContext call_cxt;
	size_t		pos = 0;
	const uint8_t *rows;
	size_t		nrows;
	bool		filed_before;

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
	upload = PG_GETARG_BYTEA_PP(1);
	bytes = (const uint8 *) VARDATA_ANY(upload);
	len = VARSIZE_ANY_EXHDR(upload);

	/*
	 * The answer is built in the caller's memory before SPI_finish: what it
	 * says (the reasons, the lane) the filing kept in the call's, which goes
	 * with SPI_finish.
	 */
	call_cxt = CurrentMemoryContext;
	SPI_connect();
	ms_replica_access(replica, "file");
	up = decode(bytes, len, replica, f.replica_text);
	ms_lane_admit(&f, up);
	f.seq = up->seq;
	filed_before = ms_already_filed(&f, up);
	if (filed_before || ms_numbered_before(&f, up))
	{
		if (!filed_before)
			ms_answer_duplicate(&f, up);
		MemoryContextSwitchTo(call_cxt);
		result = ms_duplicate_result(&f, !filed_before);
		SPI_finish();
		PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(result)));
	}
	f.upload = bytes;
	f.upload_len = len;
	f.row_cxt = AllocSetContextCreate(CurrentMemoryContext, "magic_sync filing", ALLOCSET_DEFAULT_SIZES);
	ms_filer_begin(&fr);
	ms_epoch_current(&f.epoch);
	f.unfiled_since = up->unfiled_since;
	/* the replica knows range repair: a gap, a digest that differs are repaired without a snapshot */
	f.range_repair = up->range_repair != 0;
	ms_acknowledge(&f, up->applied);
	/* the replica's gap and backlog are the first lane's to say (lanes.c) */
	if (ms_lane_first(&f))
		ms_gap(&f, up);
	refusals(&f, up, bytes, len);
	/* after the refusals: a row taken is one acknowledged that none of them names */
	if (ms_catalog_has("refused_rows"))
	{
		ms_refused_settle(&f);
		ms_refused_build(&f, up);
	}
	while (ms_up_next(bytes, len, MS_FIELD_UP_ROWS, &pos, &rows, &nrows))
	{
		MemoryContext old = MemoryContextSwitchTo(f.row_cxt);
		bool		is_stale = up->applied != NULL && stale(&f, up, rows, nrows);

		/* what the look allocated goes with it: an upload may carry tens of thousands of tables */
		MemoryContextSwitchTo(old);
		MemoryContextReset(f.row_cxt);
		/* rows written in a schema the replica has been sent a change of since: it sends them again */
		if (is_stale)
			again(&f, rows, nrows);
		else
			ms_file_rows(&f, rows, nrows);
	}
	/* range answers before the digests: a repair they conclude has rows on their way (range.c) */
	if (ms_lane_first(&f))
		ms_range_answers(&f, up);
	digests = ms_digests(&f);
	if (ms_lane_first(&f))
		ms_backlog(&f, up);
	ms_wish_fates(&f.replica, up);
	ms_answer(&f, up);
	MemoryContextSwitchTo(call_cxt);
	result = ms_file_result(&f, digests);
	SPI_finish();
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(result)));
}
