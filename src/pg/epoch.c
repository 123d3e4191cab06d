/*-------------------------------------------------------------------------
 * epoch.c
 *	  Epochs (sync.epoch), generations (sync.generations), and the
 *	  operator's two levers: sync.epoch_begin(reason) provisions every
 *	  replica again, sync.replica_reprovision(replica) one.
 *
 * The first epoch is begun by the first relay pass, not by CREATE EXTENSION,
 * so that pg_restore of a dump brings back the dump's own epoch, and its
 * replicas can tell the restored server from the one they followed.
 *
 * A generation is the time it began, in microseconds since 2000, or one more
 * than the one before when that is later: it only grows, across epochs and
 * across copies of the record.  A server restored from a copy older than its
 * last generations raises its own past them as soon as it begins one (its
 * restore is seen as another database or timeline, or an operator begins an
 * epoch), so its replicas follow it again.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "bytes.h"
#include "epoch.h"
#include "probe.h"
#include "spi_check.h"
#include "updated.h"

PG_FUNCTION_INFO_V1(ms_epoch_begin_sql);
PG_FUNCTION_INFO_V1(ms_replica_reprovision);

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

/*
 * The newest generation as this transaction last read it with its epoch
 * (read_current), until it begins one: what ms_generation_observe compares
 * with the server.  newest_in: the transaction, or none.
 */
static LocalTransactionId newest_in = InvalidLocalTransactionId;
static bool newest_none;		/* there was none */
static uint64 newest_generation;
static uint32 newest_timeline;
static char newest_system[32];
static Oid	newest_database;

/*
 * recorded: whether the catalog records generations.  An extension not
 * updated yet (ALTER EXTENSION magic_sync UPDATE) has no sync.generations,
 * and its messages carry none.
 */
static bool
recorded(void)
{
	return ms_catalog_has("generations");
}

/* what probe_epoch and probe_generation found */
typedef struct current_probe
{
	ms_epoch   *e;
	bool		epoch;			/* the current epoch was found */
	bool		generation;		/* a generation was */
	uint64		number;
	uint32		timeline;
	char	   *system;
	Oid			database;
} current_probe;

/* a probe's look at sync.epoch by epoch_current: the epoch without an end */
static bool
probe_epoch(HeapTuple row, TupleDesc desc, void *arg)
{
	current_probe *c = arg;
	bool		isnull;
	Datum		d;

	(void) ms_probe_column(row, desc, "ended", &isnull);
	if (!isnull)
		return true;
	d = ms_probe_column(row, desc, "id", &isnull);
	copy_bytea(d, c->e->id, MS_EPOCH_BYTES);
	d = ms_probe_column(row, desc, "secret", &isnull);
	copy_bytea(d, c->e->secret, MS_SECRET_BYTES);
	c->epoch = true;
	return false;
}

/* a probe's look at a row of sync.generations: the newest is kept */
static bool
probe_generation(HeapTuple row, TupleDesc desc, void *arg)
{
	current_probe *c = arg;
	bool		isnull;
	uint64		number = (uint64) DatumGetInt64(ms_probe_column(row, desc, "generation", &isnull));

	if (c->generation && number <= c->number)
		return true;
	c->generation = true;
	c->number = number;
	c->timeline = (uint32) DatumGetInt32(ms_probe_column(row, desc, "timeline", &isnull));
	c->system = TextDatumGetCString(ms_probe_column(row, desc, "system", &isnull));
	c->database = DatumGetObjectId(ms_probe_column(row, desc, "database", &isnull));
	return true;
}

/* probe_current: a probe of table as a read-only statement sees it (the caller's snapshot), or one that writes */
static bool
probe_current(bool read_only, const char *table, const char *index, ms_probe_fn fn, void *arg)
{
	if (read_only && ActiveSnapshotSet())
		return ms_probe_rows(GetActiveSnapshot(), table, index, true, 0, NULL, fn, arg);
	return ms_probe_now(table, index, fn, arg);
}

/*
 * read_current_probe: read_current as two probes (probe.h) rather than a
 * statement: every pass, filing and pull reads the epoch, and a statement's
 * start and end cost more than its two index descents (bench/passcost.py:
 * 3.7 % of the worker's samples; bench/pullcost.py, issue 37).  Read-only:
 * as a read-only statement sees them, by the caller's snapshot; else as
 * one that writes, at a new command.  A generation begins when a server's
 * history changes (a restore, a promotion, a new epoch): a handful of rows,
 * read whole.
 */
static bool
read_current_probe(ms_epoch *e, bool generations, bool read_only)
{
	current_probe c = {.e = e};

	if (!probe_current(read_only, "epoch", "epoch_current", probe_epoch, &c))
		elog(ERROR, "magic_sync: the catalog has no sync.epoch");
	if (!c.epoch)
		return false;
	e->generation = 0;
	if (generations)
	{
		if (!probe_current(read_only, "generations", NULL, probe_generation, &c))
			elog(ERROR, "magic_sync: the catalog has no sync.generations");
		e->generation = c.generation ? c.number : 0;
		newest_none = !c.generation;
		newest_generation = e->generation;
		newest_timeline = c.generation ? c.timeline : 0;
		strlcpy(newest_system, c.generation ? c.system : "", sizeof newest_system);
		newest_database = c.generation ? c.database : InvalidOid;
		/* a system identifier is 20 digits at most: one longer is read again, never compared cut */
		newest_in = !c.generation || strlen(c.system) < sizeof newest_system ? MyProc->lxid : InvalidLocalTransactionId;
	}
	return true;
}

/* read_current: the current epoch and generation, read read_only or not; false when none */
static bool
read_current(ms_epoch *e, bool read_only)
{
	return read_current_probe(e, recorded(), read_only);
}

bool
ms_epoch_read(ms_epoch *e)
{
	if (read_current(e, true))
		return true;
	memset(e, 0, sizeof *e);
	return false;
}

bool
ms_epoch_current(ms_epoch *e)
{
	if (read_current(e, false))
		return true;
	/* the first epoch: one transaction begins it, whoever comes first (a pass, a filing) */
	ms_spi_check(SPI_execute("LOCK TABLE sync.epoch IN SHARE ROW EXCLUSIVE MODE", false, 0), SPI_OK_UTILITY,
				 "could not read sync.epoch");
	if (read_current(e, false))
		return true;
	ms_epoch_begin("the first relay pass", e);
	return false;
}

/*
 * generation_begin: a new generation in epoch e, on the server as it is now (its
 * timeline, cluster and database), for this reason; e->generation is it.
 */
static void
generation_begin(ms_epoch *e, const char *reason)
{
	Oid			types[6] = {INT8OID, BYTEAOID, INT4OID, TEXTOID, OIDOID, TEXTOID};
	Datum		values[6];
	bool		isnull;

	if (!recorded())
		return;
	/* what read_current kept is older than this one */
	newest_in = InvalidLocalTransactionId;

	values[0] = Int64GetDatum(GetCurrentTimestamp());
	values[1] = PointerGetDatum(ms_to_bytea(e->id, MS_EPOCH_BYTES));
	values[2] = Int32GetDatum((int32) GetWALInsertionTimeLine());
	values[3] = CStringGetTextDatum(psprintf(UINT64_FORMAT, GetSystemIdentifier()));
	values[4] = ObjectIdGetDatum(MyDatabaseId);
	values[5] = CStringGetTextDatum(reason);
	ms_spi_check_one(ms_spi_run("INSERT INTO sync.generations (generation, epoch, timeline, system, database, reason)"
										   " SELECT greatest(coalesce(max(generation), 0) + 1, $1), $2, $3, $4, $5, $6"
										   "   FROM sync.generations RETURNING generation",
										   6, types, values, NULL, false, 0), SPI_OK_INSERT_RETURNING, "could not begin a generation");
	e->generation = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	ereport(LOG,
			(errmsg("magic_sync: generation " UINT64_FORMAT " begins: %s", e->generation, reason),
			 errdetail("Replicas that follow it refuse messages of older generations.")));
}

void
ms_generation_observe(ms_epoch *e)
{
	bool		isnull;
	uint64		generation;
	uint32		timeline;
	char	   *system;
	Oid			database;
	TimeLineID	now_timeline;
	char	   *now_system;

	/* a standby neither writes nor follows a timeline of its own */
	if (RecoveryInProgress() || !recorded())
		return;
	/* the pass read it with its epoch (ms_epoch_current), and began none since */
	if (newest_in == MyProc->lxid)
	{
		if (newest_none)
		{
			generation_begin(e, "the first pass that numbers generations");
			return;
		}
		generation = newest_generation;
		timeline = newest_timeline;
		system = pstrdup(newest_system);
		database = newest_database;
	}
	else
	{
		ms_spi_check(ms_spi_run("SELECT generation, timeline, system, database FROM sync.generations"
								" ORDER BY generation DESC LIMIT 1", 0, NULL, NULL, NULL, false, 1),
					 SPI_OK_SELECT, "could not read sync.generations");
		if (SPI_processed == 0)
		{
			/* an installation upgraded from a build that numbered none */
			generation_begin(e, "the first pass that numbers generations");
			return;
		}
		generation = (uint64) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		timeline = (uint32) DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		system = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
		database = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	}
	now_timeline = GetWALInsertionTimeLine();
	now_system = psprintf(UINT64_FORMAT, GetSystemIdentifier());
	e->generation = generation;
	if (now_timeline != timeline)
		generation_begin(e, psprintf("the server's timeline is %u, not %u as when generation " UINT64_FORMAT
						  " began: a standby was promoted, or the server recovered to a point in time",
						  now_timeline, timeline, generation));
	else if (strcmp(now_system, system) != 0)
		generation_begin(e, psprintf("the server is another cluster (system %s) than the one generation " UINT64_FORMAT
						  " began on (%s): restored from a copy of its files, or upgraded",
						  now_system, generation, system));
	else if (database != MyDatabaseId)
		generation_begin(e, psprintf("the database (oid %u) is not the one generation " UINT64_FORMAT
						  " began in (oid %u): restored from a dump",
						  MyDatabaseId, generation, database));
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
	values[0] = PointerGetDatum(ms_to_bytea(e->id, MS_EPOCH_BYTES));
	values[1] = PointerGetDatum(ms_to_bytea(e->secret, MS_SECRET_BYTES));
	values[2] = CStringGetTextDatum(reason);
	ms_spi_check(SPI_execute("UPDATE sync.epoch SET ended = now() WHERE ended IS NULL", false, 0), SPI_OK_UPDATE,
				 "could not begin a new epoch");
	ms_spi_check(ms_spi_run("INSERT INTO sync.epoch (id, secret, reason) VALUES ($1, $2, $3)",
									   3, types, values, NULL, false, 0), SPI_OK_INSERT, "could not begin a new epoch");
	/* each says why, as every provisioning does but a replica's first (the first epoch's) */
	ms_spi_check(ms_spi_run("UPDATE sync.replicas SET provision = true,"
							" last_error_at = CASE WHEN snapshot_number IS NULL THEN last_error_at ELSE now() END,"
							" last_error = CASE WHEN snapshot_number IS NULL THEN last_error"
							"   ELSE 'a new epoch began (' || $3 || '): provisioned again' END WHERE NOT dropped",
							3, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not begin a new epoch");
	ereport(LOG,
			(errmsg("magic_sync: a new epoch begins: %s", reason),
			 errdetail("Every replica is provisioned again.")));
	/* its snapshots are newer than anything of the epochs before: a replayed one is refused */
	generation_begin(e, psprintf("a new epoch: %s", reason));
}

bool
ms_epoch_find(const uint8 *id, ms_epoch *e, bool *current)
{
	Oid			types[1] = {BYTEAOID};
	Datum		values[1];
	bool		isnull;

	values[0] = PointerGetDatum(ms_to_bytea(id, MS_EPOCH_BYTES));
	ms_spi_check(ms_spi_run("SELECT secret, ended IS NULL FROM sync.epoch WHERE id = $1",
									   1, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.epoch");
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
	/* not beside a pass, which seals with the epoch its snapshot saw */
	ms_spi_check(SPI_execute(MS_LOCK_PASSES, false, 0), SPI_OK_UTILITY, "could not lock sync.replicas");
	ms_epoch_begin(reason, &e);
	SPI_finish();
	out = ms_to_bytea(e.id, MS_EPOCH_BYTES);
	PG_RETURN_BYTEA_P(out);
}

/*
 * ms_replica_reprovision: sync.replica_reprovision(replica) has one replica
 * provisioned again at the next pass, from scratch, in the current epoch
 * (sync_admin: an operator's call, never a replica's).  A snapshot that
 * failed for good is tried again at once.
 */
Datum
ms_replica_reprovision(PG_FUNCTION_ARGS)
{
	Oid			types[2] = {UUIDOID, TEXTOID};
	Datum		values[2];
	char	   *id;
	char	   *why;
	bool		isnull;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a replica is named by its uuid"),
				 errhint("Pass the replica's uuid, not NULL.")));
	values[0] = PG_GETARG_DATUM(0);
	id = DatumGetCString(DirectFunctionCall1(uuid_out, values[0]));
	why = psprintf("provisioned again by sync.replica_reprovision (role %s)",
				   GetUserNameFromId(GetOuterUserId(), false));
	values[1] = CStringGetTextDatum(why);
	SPI_connect();
	ms_spi_check(ms_spi_run("SELECT dropped FROM sync.replicas WHERE id = $1 FOR UPDATE",
									   1, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.replicas");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replica %s does not exist", id),
				 errhint("sync.replica_add adds a replica; sync.replicas lists them.")));
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("replica %s is dropped", id),
				 errdetail("The relay forgets it at its next pass."),
				 errhint("Add it again with sync.replica_add: it is provisioned from scratch.")));
	ms_spi_check(ms_spi_run("UPDATE sync.replicas SET provision = true, provision_failed_at = NULL,"
									   " last_error = $2, last_error_at = now() WHERE id = $1",
									   2, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not mark a replica to provision");
	SPI_finish();
	ereport(LOG, (errmsg("magic_sync: replica %s is %s", id, why)));
	PG_RETURN_VOID();
}
