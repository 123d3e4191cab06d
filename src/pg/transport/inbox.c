/*-------------------------------------------------------------------------
 * inbox.c
 *	  The inbox: uploaded rows that wait (the replica is being provisioned
 *	  again) or failed for good (a constraint, a trigger), kept as the
 *	  replica uploaded them and filed again by sync.inbox_retry, with a
 *	  backoff, so that a fix deployed lets them through without anyone
 *	  touching them.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "file.h"
#include "key.h"
#include "spi_check.h"

PG_FUNCTION_INFO_V1(ms_inbox_retry);

void
ms_inbox_keep(ms_filing *f, ms_filed_table *ft, const char *key,
			  const uint8 *bytes, size_t len, bool del,
			  const char *why, const char *sqlstate)
{
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};

	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = Int32GetDatum(ft->t->id);
	values[2] = CStringGetTextDatum(key);
	values[3] = del ? (Datum) 0 : PointerGetDatum(ms_to_bytea(bytes, len));
	values[4] = f->sender;
	values[5] = CStringGetTextDatum(why);
	values[6] = sqlstate ? CStringGetTextDatum(sqlstate) : (Datum) 0;
	if (del)
		nulls[3] = 'n';
	if (f->sender == (Datum) 0)
		nulls[4] = 'n';
	if (sqlstate == NULL)
		nulls[6] = 'n';
	ms_filer_run(f->filer->keep, values, nulls, false, 0, SPI_OK_INSERT, "keep a row in sync.inbox");
}

/* the parts of a canonical key of n parts */
static char **
key_parts(const char *key, int n)
{
	char	  **parts = palloc(sizeof(char *) * Max(n, 1));
	size_t		pos = 0;
	const char *part;
	size_t		plen;

	for (int k = 0; k < n; k++)
	{
		ms_key_next_part(key, strlen(key), &pos, &part, &plen);
		parts[k] = pnstrdup(part, plen);
	}
	return parts;
}

/* what the replica applied: its acknowledgement, as the row's rules read it */
static int64
acked_of(ms_filing *f)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(&f->replica)};
	bool		isnull;
	int64		acked = 0;

	ms_spi_check(SPI_execute_with_args("SELECT acked_number FROM sync.replicas WHERE id = $1",
									   1, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.replicas");
	if (SPI_processed == 1)
		acked = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return acked;
}

/* after a try: the row stays (with its new reason) or leaves the inbox */
static void
tried(int64 id, ms_outcome out, const char *why, const char *sqlstate)
{
	Oid			types[3] = {INT8OID, TEXTOID, TEXTOID};
	Datum		values[3] = {Int64GetDatum(id), CStringGetTextDatum(why ? why : ""),
	sqlstate ? CStringGetTextDatum(sqlstate) : (Datum) 0};
	char		nulls[3] = {' ', ' ', sqlstate ? ' ' : 'n'};

	if (out == MS_WAITS || out == MS_SET_ASIDE)
	{
		ms_spi_check(SPI_execute_with_args("UPDATE sync.inbox SET tries = tries + 1, last_at = now(),"
										   " reason = $2, sqlstate = $3 WHERE id = $1",
										   3, types, values, nulls, false, 0), SPI_OK_UPDATE, "could not update sync.inbox");
		return;
	}
	ms_spi_check(SPI_execute_with_args("DELETE FROM sync.inbox WHERE id = $1", 1, types, values, NULL, false, 0), SPI_OK_DELETE, "could not update sync.inbox");
}

/*
 * retry_one: file one row of the inbox again (row i of tt) as its replica
 * uploaded it; whether it went through.
 */
static bool
retry_one(ms_filer *fr, SPITupleTable *tt, uint64 i)
{
	HeapTuple	tup = tt->vals[i];
	bool		isnull;
	ms_filing	f;
	ms_filed_table *ft;
	char	   *key;
	int			nparts;
	Datum		row;
	char	   *why;
	char	   *sqlstate;
	ms_outcome	out;
	int64		id = DatumGetInt64(SPI_getbinval(tup, tt->tupdesc, 1, &isnull));

	memset(&f, 0, sizeof f);
	f.filer = fr;
	f.replica = *DatumGetUUIDP(SPI_getbinval(tup, tt->tupdesc, 2, &isnull));
	f.replica_text = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(&f.replica)));
	f.sender = SPI_getbinval(tup, tt->tupdesc, 6, &isnull);
	if (isnull)
		f.sender = (Datum) 0;
	f.provisioning = DatumGetBool(SPI_getbinval(tup, tt->tupdesc, 7, &isnull));
	ft = ms_filed_table_named(fr, TextDatumGetCString(SPI_getbinval(tup, tt->tupdesc, 3, &isnull)));
	key = TextDatumGetCString(SPI_getbinval(tup, tt->tupdesc, 4, &isnull));
	nparts = ms_key_count_parts(key, strlen(key));
	/* a table no longer mirrored, held back, or whose key changed: the row waits for a declaration that takes it */
	if (ft == NULL || ft->held != NULL || nparts != ft->t->nkey)
		return false;
	f.acked = acked_of(&f);
	row = SPI_getbinval(tup, tt->tupdesc, 5, &isnull);
	if (isnull)
		out = ms_file_row(&f, ft, key_parts(key, nparts), key, NULL, 0, true, &why, &sqlstate);
	else
	{
		bytea	   *b = DatumGetByteaPP(row);

		out = ms_file_row(&f, ft, key_parts(key, nparts), key, (const uint8 *) VARDATA_ANY(b),
						  VARSIZE_ANY_EXHDR(b), false, &why, &sqlstate);
	}
	if (out == MS_REFUSED || out == MS_DROPPED)
		ereport(LOG,
				(errmsg("magic_sync: a row replica %s uploaded leaves the inbox unfiled: %s",
						f.replica_text, why ? why : "")));
	tried(id, out, why, sqlstate);
	return out == MS_FILED;
}

/*
 * ms_inbox_retry: sync.inbox_retry(max int) files again up to max rows of
 * the inbox, oldest first, each as its replica uploaded it; returns how many
 * went through.  The worker calls it every pass.
 */
Datum
ms_inbox_retry(PG_FUNCTION_ARGS)
{
	int32		max = PG_GETARG_INT32(0);
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(max)};
	SPITupleTable *tt;
	uint64		n;
	int			through = 0;
	ms_filer	fr;

	SPI_connect();
	ms_filer_begin(&fr);
	ms_spi_check(SPI_execute_with_args("SELECT i.id, i.replica, t.name, i.key, i.row, i.sender, r.provision"
									   "  FROM sync.inbox i JOIN sync.tables t ON t.id = i.tab"
									   "  JOIN sync.replicas r ON r.id = i.replica"
									   " WHERE NOT r.dropped AND i.last_at < now() - least(interval '1 hour',"
									   "       interval '1 second' * power(2, least(i.tries, 12)))"
									   " ORDER BY i.last_at LIMIT $1",
									   1, types, values, NULL, false, 0), SPI_OK_SELECT, "could not read sync.inbox");
	tt = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
		through += retry_one(&fr, tt, i) ? 1 : 0;
	SPI_finish();
	PG_RETURN_INT32(through);
}
