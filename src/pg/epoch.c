/*-------------------------------------------------------------------------
 * epoch.c
 *	  Epochs (sync.epoch) and sync.epoch_begin(reason).
 *
 * The first epoch is begun by the first relay pass, not by CREATE EXTENSION,
 * so that pg_restore of a dump brings back the dump's own epoch, and its
 * replicas can tell the restored server from the one they followed.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "epoch.h"

PG_FUNCTION_INFO_V1(ms_epoch_begin_sql);

static void
copy_bytea(Datum d, uint8 *out, size_t n)
{
	bytea	   *b = DatumGetByteaPP(d);

	/* cannot happen: the table's CHECKs hold the lengths */
	if (VARSIZE_ANY_EXHDR(b) != n)
		elog(ERROR, "sync.epoch holds a value of %zu bytes, not %zu",
			 (size_t) VARSIZE_ANY_EXHDR(b), n);
	memcpy(out, VARDATA_ANY(b), n);
}

static bytea *
make_bytea(const uint8 *bytes, size_t n)
{
	bytea	   *b = palloc(VARHDRSZ + n);

	SET_VARSIZE(b, VARHDRSZ + n);
	memcpy(VARDATA(b), bytes, n);
	return b;
}

bool
ms_epoch_current(ms_epoch *e)
{
	bool		isnull;

	if (SPI_execute("SELECT id, secret FROM sync.epoch WHERE ended IS NULL", false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.epoch");
	if (SPI_processed == 1)
	{
		copy_bytea(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull),
				   e->id, MS_EPOCH_BYTES);
		copy_bytea(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull),
				   e->secret, MS_SECRET_BYTES);
		return true;
	}
	/* the first epoch: one transaction begins it, whoever comes first (a pass, a filing) */
	if (SPI_execute("LOCK TABLE sync.epoch IN SHARE ROW EXCLUSIVE MODE", false, 0) < 0 ||
		SPI_execute("SELECT id, secret FROM sync.epoch WHERE ended IS NULL", false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.epoch");
	if (SPI_processed == 1)
	{
		copy_bytea(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull),
				   e->id, MS_EPOCH_BYTES);
		copy_bytea(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull),
				   e->secret, MS_SECRET_BYTES);
		return true;
	}
	ms_epoch_begin("the first relay pass", e);
	return false;
}

void
ms_epoch_begin(const char *reason, ms_epoch *e)
{
	Oid			types[3] = {BYTEAOID, BYTEAOID, TEXTOID};
	Datum		values[3];

	if (!ms_random(e->id, MS_EPOCH_BYTES) || !ms_random(e->secret, MS_SECRET_BYTES))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not draw random bytes for a new epoch")));
	values[0] = PointerGetDatum(make_bytea(e->id, MS_EPOCH_BYTES));
	values[1] = PointerGetDatum(make_bytea(e->secret, MS_SECRET_BYTES));
	values[2] = CStringGetTextDatum(reason);
	if (SPI_execute("UPDATE sync.epoch SET ended = now() WHERE ended IS NULL", false, 0) < 0 ||
		SPI_execute_with_args("INSERT INTO sync.epoch (id, secret, reason) VALUES ($1, $2, $3)",
							  3, types, values, NULL, false, 0) != SPI_OK_INSERT ||
		SPI_execute("UPDATE sync.replicas SET provision = true WHERE NOT dropped", false, 0) < 0)
		elog(ERROR, "could not begin a new epoch");
	ereport(LOG,
			(errmsg("magic_sync: a new epoch begins: %s", reason),
			 errdetail("Every replica is provisioned again.")));
}

bool
ms_epoch_find(const uint8 *id, ms_epoch *e, bool *current)
{
	Oid			types[1] = {BYTEAOID};
	Datum		values[1];
	bool		isnull;

	values[0] = PointerGetDatum(make_bytea(id, MS_EPOCH_BYTES));
	if (SPI_execute_with_args("SELECT secret, ended IS NULL FROM sync.epoch WHERE id = $1",
							  1, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read sync.epoch");
	if (SPI_processed == 0)
		return false;
	memcpy(e->id, id, MS_EPOCH_BYTES);
	copy_bytea(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull),
			   e->secret, MS_SECRET_BYTES);
	*current = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	return true;
}

/*
 * ms_epoch_begin_sql: sync.epoch_begin(reason) ends the current epoch and
 * begins a new one: every replica is provisioned again at the next pass.
 * Returns the new epoch's id.
 */
Datum
ms_epoch_begin_sql(PG_FUNCTION_ARGS)
{
	ms_epoch	e;
	char	   *reason = PG_ARGISNULL(0) ? "sync.epoch_begin()" : text_to_cstring(PG_GETARG_TEXT_PP(0));
	bytea	   *out;

	SPI_connect();
	ms_epoch_begin(reason, &e);
	SPI_finish();
	out = make_bytea(e.id, MS_EPOCH_BYTES);
	PG_RETURN_BYTEA_P(out);
}
