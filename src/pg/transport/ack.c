/*-------------------------------------------------------------------------
 * ack.c
 *	  Acknowledgements and restores: what a replica says of itself in an
 *	  upload, besides its rows (docs/design.md 4.8, 4.10).
 *
 *   acknowledgement  the last message applied, its seal checked in constant
 *                    time: what it carried counts as held, the outbox is
 *                    trimmed through it.  It is the replica's claim
 *                    (claim.h): a seal the server never made refuses the
 *                    upload, and begins no epoch; one it made for a message
 *                    it has no record of (it was restored, or is a standby
 *                    promoted), or of an epoch it never had, provisions that
 *                    replica again, and only it; a replica that applied less
 *                    than it said before was restored and is provisioned
 *                    again; so is one that reports a gap no snapshot on its
 *                    way covers.  A replica that follows a newer generation
 *                    of this epoch than the server's is refused: this server
 *                    is an old primary.
 *   refusals         rows the replica could not take are not counted as held,
 *                    and go to it again later (refused.c).
 *   digests          compared with what the server records, once the replica
 *                    applied every message recorded for it: keys that differ
 *                    provision it again; values that differ are
 *                    narrowed down by ranges too, or send the table's
 *                    rows again (values.c).
 *   backlog          what it has not sent, and not had filed, as it says.
 *                    When no row of it waits for an answer but this
 *                    upload's, every answer queued for it before was
 *                    received: sync.pull gives them no more (a standby,
 *                    which marks nothing, included), and they are pruned.
 *
 * What a pull served by a hot standby cannot record (it writes nothing) is
 * taken over here, on the primary: a replica that says it applied nothing
 * -- a blank file -- while it acknowledged messages before is provisioned
 * again, as sync.pull does on the primary; a restored one says less than it
 * acknowledged (claimed).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "claim.h"
#include "rewind.h"
#include "digest.h"
#include "fields.h"
#include "file.h"
#include "seal.h"
#include "settings.h"
#include "spi_check.h"
#include "upread.h"
#include "wire.h"
#include "updated.h"

/* the replica is provisioned again: held rows are on their way */
static void
provision(ms_filing *f, const char *why)
{
	Oid			types[2] = {UUIDOID, TEXTOID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), CStringGetTextDatum(why)};

	ms_spi_check(ms_spi_run("UPDATE sync.replicas SET provision = true, last_error = $2,"
									   " last_error_at = now() WHERE id = $1",
									   2, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not mark a replica to provision");
	f->provisioning = true;
	ereport(LOG, (errmsg("magic_sync: replica %s is provisioned again: %s", f->replica_text, why)));
}

void
ms_provision_again(ms_filing *f, const char *why)
{
	provision(f, why);
}

/* What sync.replicas says of the replica as the upload is filed. */
typedef struct replica_row
{
	int64		acked;
	bool		provision;
	bool		has_snapshot_end;
	int64		snapshot_end;
} replica_row;

/* read_replica: the replica's row, locked for the filing */
static void
read_replica(ms_filing *f, replica_row *r)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(&f->replica)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		end;

	/* held_due (77_held_due.sql): a catalog not updated has none */
	ms_spi_check(ms_spi_run(ms_catalog_has_column("replicas", "held_due")
									   ? "SELECT acked_number, provision, snapshot_end, held_due FROM sync.replicas"
									   " WHERE id = $1 FOR UPDATE"
									   : "SELECT acked_number, provision, snapshot_end, NULL::bigint FROM sync.replicas"
									   " WHERE id = $1 FOR UPDATE",
									   1, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.replicas");
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("replica %s is not registered", f->replica_text),
				 errdetail("Its registration went while its upload was being filed."),
				 errhint("Register it with sync.replica_add('%s').", f->replica_text)));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	r->acked = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	r->provision = DatumGetBool(SPI_getbinval(tup, desc, 2, &isnull));
	end = SPI_getbinval(tup, desc, 3, &isnull);
	r->has_snapshot_end = !isnull;
	r->snapshot_end = isnull ? 0 : DatumGetInt64(end);
	end = SPI_getbinval(tup, desc, 4, &isnull);
	SPI_freetuptable(SPI_tuptable);

	/*
	 * The held rows of its snapshot are not all recorded yet (the worker
	 * records them once its pass committed, record.c): nothing is filed
	 * against a held set that lacks them.  The worker holds this replica's
	 * row while it records them, so a filing waits for it; this is the moment
	 * between its two transactions, or a worker that died in between, whose
	 * next pass provisions the replica again.  Transient: filed again later.
	 */
	if (!isnull)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("replica %s cannot file yet: the relay is recording what its snapshot %lld carries",
						f->replica_text, (long long) DatumGetInt64(end)),
				 errdetail("Nothing of the upload was filed; the replica keeps it."),
				 errhint("File it again in a moment; if the relay stopped before it recorded them, its next pass"
						 " provisions the replica again.")));
}

/* whether the server has a record of sending message number with nonce: in the outbox, or acknowledged */
static bool
recorded(ms_filing *f, Sync__Applied *a)
{
	Oid			types[3] = {UUIDOID, INT8OID, BYTEAOID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int64GetDatum((int64) a->number),
	PointerGetDatum(ms_to_bytea(a->nonce.data, a->nonce.len))};

	return ms_spi_bool("SELECT EXISTS (SELECT FROM sync.outbox WHERE replica = $1 AND number = $2 AND nonce = $3)"
					   " OR EXISTS (SELECT FROM sync.replicas WHERE id = $1 AND acked_number = $2 AND acked_nonce = $3)",
					   3, types, values, false, "could not read sync.outbox");
}

/*
 * The messages through number leave the outbox; those that were owed
 * (beyond the latest snapshot, not dropped: 76_owed.sql) are owed no more.
 * Not held at zero: a worker's pass adds what it wrote after its commit
 * (relay.c), maybe after they were acknowledged, and the sum comes right in
 * either order.  A catalog not updated yet keeps no such figure.
 */
static void
leave_outbox(Oid *types, Datum *values)
{
	bool		owed = ms_catalog_has_column("replicas", "owed_messages");
	int			rc;

	if (owed)
		rc = ms_spi_run("WITH d AS (DELETE FROM sync.outbox WHERE replica = $1 AND number <= $2"
								   "            RETURNING number, bytes, dropped)"
								   " UPDATE sync.replicas r SET owed_messages = r.owed_messages - o.n,"
								   "        owed_bytes = r.owed_bytes - o.b"
								   "   FROM (SELECT count(*) AS n, coalesce(sum(d.bytes), 0) AS b FROM d, sync.replicas x"
								   "          WHERE x.id = $1 AND NOT d.dropped AND d.number > coalesce(x.snapshot_end, 0)) o"
								   "  WHERE r.id = $1 AND o.n > 0",
								   2, types, values, NULL, false, 0);
	else
		rc = ms_spi_run("DELETE FROM sync.outbox WHERE replica = $1 AND number <= $2",
								   2, types, values, NULL, false, 0);
	if (rc != (owed ? SPI_OK_UPDATE : SPI_OK_DELETE))
		elog(ERROR, "could not record an acknowledgement");
}

/* what the messages through a->number carried is held; what they took back is gone */
static void
acknowledged(ms_filing *f, Sync__Applied *a)
{
	Oid			types[3] = {UUIDOID, INT8OID, BYTEAOID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int64GetDatum((int64) a->number),
	PointerGetDatum(ms_to_bytea(a->nonce.data, a->nonce.len))};

	/*
	 * A gap is closed once the replica applied the message it could not
	 * follow (or one after it: a snapshot); one naming a message never
	 * numbered for it named nothing to follow, and its next acknowledgement
	 * ends it too (docs/operations.md, "Gaps").
	 */
	ms_spi_check(ms_spi_run("UPDATE sync.replicas SET acked_epoch = (SELECT id FROM sync.epoch WHERE ended IS NULL),"
									   " acked_number = $2, acked_nonce = $3, acked_at = now(),"
									   " gap = CASE WHEN gap <= $2 OR gap > last_number THEN NULL ELSE gap END WHERE id = $1",
									   3, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not record an acknowledgement");
	leave_outbox(types, values);
	/* what they took back is gone, but what a write still pending may point at (reach.c) */
	ms_reach_acknowledged(f, (int64) a->number);
}

static char *
restored(Sync__Applied *a, int64 acked)
{
	return psprintf("the replica says it applied message %llu, before the %lld it said it had applied: it was restored from an older copy",
					(unsigned long long) a->number, (long long) acked);
}

/* restored from an older copy: what went after it goes again (rewind.c), or a snapshot */
static void
rewind_or_provision(ms_filing *f, Sync__Applied *a, replica_row *r)
{
	if (!r->provision && ms_rewind(&f->replica, f->replica_text, a))
		f->acked = (int64) a->number;
	else
		provision(f, restored(a, r->acked));
}

/*
 * claimed: what the seal of the acknowledgement says, and what follows from
 * it.  Returns whether the acknowledgement goes on to count (a message of
 * the current epoch this server recorded); otherwise the replica may be
 * provisioned again, or the upload refused.
 */
static bool
claimed(ms_filing *f, Sync__Applied *a, replica_row *r)
{
	switch (ms_claim_check(&f->replica, a, (int64) a->number))
	{
		case MS_SEAL_UNKNOWN_EPOCH:
			provision(f, "the replica follows an epoch this server never had (was the server restored from before its last epoch?)");
			return false;
		case MS_SEAL_FORGED:
			ms_claim_refuse(&f->replica, MS_CLAIM_FILE, MS_CLAIM_BAD_SEAL, (int64) a->number, 0, 0);
			break;
		case MS_SEAL_PAST_EPOCH:
			/* a past epoch's message: the new epoch's snapshot is on its way */
			return false;
		case MS_SEAL_CURRENT:
			break;
	}
	ms_claim_superseded(&f->replica, MS_CLAIM_FILE, &f->epoch, a, (int64) a->number);
	if (!recorded(f, a))
	{
		if ((int64) a->number < r->acked)
			rewind_or_provision(f, a, r);
		else
		{
			/* history this server lost: what it writes next is numbered beyond it */
			ms_claim_believe(&f->replica, MS_CLAIM_FILE, (int64) a->number);
			provision(f, psprintf("the replica applied message %llu, sealed by this server, which has no record of sending it"
								  " (was the server restored from an older copy, or a standby promoted?)",
								  (unsigned long long) a->number));
		}
		return false;
	}
	if ((int64) a->number < r->acked)
	{
		rewind_or_provision(f, a, r);
		return false;
	}
	return (int64) a->number > r->acked;
}

void
ms_acknowledge(ms_filing *f, Sync__Applied *a)
{
	replica_row r;

	read_replica(f, &r);
	f->acked = f->acked_before = r.acked;
	/* rows let go of before every write still pending: no row it files points at them */
	ms_reach_forget(f);
	/* held rows are on their way while its snapshot is */
	f->provisioning = r.provision || (r.has_snapshot_end && r.snapshot_end > r.acked);
	if (a == NULL || a->number == 0)
	{
		/*
		 * It says it applied nothing (a replica always says what it applied:
		 * an Applied of number 0 is a blank file, or a lost one): what a pull
		 * from a standby could not say.
		 */
		if (a != NULL && r.acked > 0 && !f->provisioning)
			provision(f, psprintf("the replica says it applied nothing, before the %lld it acknowledged:"
								  " its file is new or was lost", (long long) r.acked));
		return;
	}
	if (!claimed(f, a, &r))
		return;
	acknowledged(f, a);
	f->acked = (int64) a->number;
	/* its snapshot is applied now: nothing is on its way but what provisioning sends */
	if (!f->provisioning || (r.has_snapshot_end && r.snapshot_end <= f->acked && !r.provision))
		f->provisioning = false;
}

void
ms_gap(ms_filing *f, Sync__Up *up)
{
	Oid			types[3] = {UUIDOID, INT8OID, BYTEAOID};
	Datum		values[3];
	bool		isnull;

	if (up->gap == 0)
		return;
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = Int64GetDatum((int64) up->gap);
	values[2] = PointerGetDatum(ms_to_bytea(up->gap_epoch.data, up->gap_epoch.len));
	ms_spi_check_one(ms_spi_run("UPDATE sync.replicas r SET gap = $2 WHERE id = $1 RETURNING"
										   " provision OR (snapshot_number > $2 AND acked_number < snapshot_number"
										   "   AND $3 = (SELECT id FROM sync.epoch WHERE ended IS NULL))"
										   " OR ($3 <> (SELECT id FROM sync.epoch WHERE ended IS NULL)"
										   "   AND snapshot_number IS NOT NULL AND acked_number < snapshot_number)",
										   3, types, values, NULL, false, 0), SPI_OK_UPDATE_RETURNING, "could not record a gap");
	/*
	 * Or what the outbox still holds closes it as the replica pulls after what
	 * it applied: a snapshot on its way whole, or a lost message (rewind.c).
	 */
	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) &&
		!ms_gap_resent(&f->replica, (int64) up->gap, up->gap_epoch.data, up->gap_epoch.len, f->range_repair))
		provision(f, psprintf("the replica could not follow message %llu (a gap): a message was lost, or its file restored",
							  (unsigned long long) up->gap));
}

void
ms_refusals(ms_filing *f, Sync__Up *up)
{
	Oid			types[5] = {UUIDOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, INT8OID};
	Datum		values[5];
	Datum	   *tables;
	Datum	   *keys;
	Datum	   *reasons;
	int			n = (int) up->n_refusals;

	if (n == 0)
		return;
	tables = palloc(sizeof(Datum) * n);
	keys = palloc(sizeof(Datum) * n);
	reasons = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
	{
		tables[i] = CStringGetTextDatum(up->refusals[i]->table);
		keys[i] = CStringGetTextDatum(ms_canonical_key(up->refusals[i]->key));
		reasons[i] = CStringGetTextDatum(up->refusals[i]->reason);
	}
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = PointerGetDatum(construct_array(tables, n, TEXTOID, -1, false, TYPALIGN_INT));
	values[2] = PointerGetDatum(construct_array(keys, n, TEXTOID, -1, false, TYPALIGN_INT));
	values[3] = PointerGetDatum(construct_array(reasons, n, TEXTOID, -1, false, TYPALIGN_INT));
	values[4] = Int64GetDatum(f->acked);
	/* sent to it again later (refused.c) */
	if (ms_catalog_has("refused_rows"))
		ms_refused_backoff(f, values[1], values[2]);

	/*
	 * A version sent after what it applied is not the one it refused: a
	 * refusal said again from before it was sent (its answer not applied
	 * yet) would mark refused a row on its way.  A refusal said again with
	 * the same reason writes nothing; of a row refused twice in the chunk,
	 * the last reason stays.  The chunk's rows (file.c: a few hundred) each
	 * looked up by (replica, tab, key).
	 */
	ms_spi_check(ms_spi_run("UPDATE sync.held h SET refused = x.reason"
									   "  FROM (SELECT DISTINCT ON (t.id, a.k) t.id AS tab, a.k AS key, a.why AS reason"
									   "          FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS a(n, k, why, o)"
									   "          JOIN sync.tables t ON t.name = a.n"
									   "         ORDER BY t.id, a.k, a.o DESC) x"
									   " WHERE h.replica = $1 AND h.tab = x.tab AND h.key = x.key AND h.number <= $5"
									   "   AND h.refused IS DISTINCT FROM x.reason",
									   5, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not record a refusal");
}

/*
 * keys_rested: a key digest of t that differs is not acted on while the
 * last narrowing of t found nothing (sync.ranges, split < 0; or the replica
 * answers no range questions) and a digest of the replica was answered with
 * a snapshot less than magic_sync.digest_repair_interval ago.  A replica
 * reporting false key digests costs a question and a snapshot at most that
 * often, not one each round; drift found meanwhile waits for the interval.
 * A digest of a table the server does not mirror (t NULL) answers to the
 * last snapshot of any.
 */
static bool
keys_rested(ms_filing *f, const ms_table *t)
{
	Oid			types[3] = {UUIDOID, INT4OID, FLOAT8OID};
	Datum		values[3] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t ? t->id : 0),
	Float8GetDatum((double) ms_digest_repair_interval)};
	bool		isnull;

	/* a catalog not updated yet (ALTER EXTENSION magic_sync UPDATE) keeps no time */
	if (ms_digest_repair_interval <= 0 || !ms_catalog_has_column("replica_tables", "keys_repaired"))
		return false;
	ms_spi_check_one(ms_spi_run(f->range_repair && t != NULL ?
							  "SELECT EXISTS (SELECT FROM sync.ranges WHERE replica = $1 AND tab = $2 AND split < 0)"
							  "   AND EXISTS (SELECT FROM sync.replica_tables WHERE replica = $1"
							  "                  AND keys_repaired > pg_catalog.now() - pg_catalog.make_interval(secs => $3))" :
							  "SELECT $2 IS NOT NULL AND EXISTS (SELECT FROM sync.replica_tables WHERE replica = $1"
							  "                  AND keys_repaired > pg_catalog.now() - pg_catalog.make_interval(secs => $3))",
							  3, types, values, NULL, true, 1), SPI_OK_SELECT,
					 "could not read when the replica's keys were last repaired");
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* keys_repaired: a digest of t (NULL: of no mirrored table) that ranges could not narrow is answered with a snapshot now */
static void
keys_repaired(ms_filing *f, const ms_table *t)
{
	Oid			types[2] = {UUIDOID, INT4OID};
	Datum		values[2] = {UUIDPGetDatum(&f->replica), Int32GetDatum(t ? t->id : 0)};

	if (!ms_catalog_has_column("replica_tables", "keys_repaired"))
		return;
	ms_spi_check(ms_spi_run("UPDATE sync.replica_tables SET keys_repaired = pg_catalog.now()"
									   " WHERE replica = $1 AND (tab = $2 OR $2 = 0)",
									   2, types, values, NULL, false, 0),
				 SPI_OK_UPDATE, "could not record a repair of keys");
}

/*
 * digest_differs: the first table whose digest differs from the server's, or
 * NULL.  The upload's digests are read one at a time (up to MS_UP_LIST_MAX
 * of them, a name of up to 127 bytes each), each in memory of its own.
 */
static char *
digest_differs(ms_filing *f, int *repaired)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(&f->replica)};
	bool		isnull;
	uint64		n;
	char	  **names;
	uint64	   *counts;
	uint64	   *fnvs;
	size_t		pos = 0;
	const uint8_t *p;
	size_t		len;
	char	   *differs = NULL;
	MemoryContext old;

	ms_spi_check(ms_spi_run("SELECT t.name, (d).count, (d).fnv FROM ("
									   "  SELECT h.tab, sync.digest(h.key) AS d FROM sync.held h"
									   "   WHERE h.replica = $1 AND h.refused IS NULL AND h.taken IS NULL GROUP BY h.tab) s"
									   " JOIN sync.tables t ON t.id = s.tab",
									   1, types, values, NULL, false, 0), SPI_OK_SELECT, "could not compute the server's digests");
	n = SPI_processed;
	names = palloc(sizeof(char *) * Max(n, 1));
	counts = palloc(sizeof(uint64) * Max(n, 1));
	fnvs = palloc(sizeof(uint64) * Max(n, 1));
	for (uint64 j = 0; j < n; j++)
	{
		HeapTuple	tup = SPI_tuptable->vals[j];

		names[j] = TextDatumGetCString(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
		counts[j] = (uint64) DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
		fnvs[j] = strtoull(TextDatumGetCString(SPI_getbinval(tup, SPI_tuptable->tupdesc, 3, &isnull)), NULL, 16);
	}
	SPI_freetuptable(SPI_tuptable);
	old = MemoryContextSwitchTo(f->row_cxt);
	while (differs == NULL && ms_up_next(f->upload, f->upload_len, MS_FIELD_UP_DIGESTS, &pos, &p, &len))
	{
		Sync__Digest *d = sync__digest__unpack(ms_pg_allocator(), len, p);
		uint64		count = 0;
		uint64		fnv = MS_FNV_OFFSET;

		if (d == NULL)
			elog(ERROR, "could not read a digest of an upload checked whole");
		for (uint64 j = 0; j < n; j++)
			if (strcmp(names[j], d->table) == 0)
			{
				count = counts[j];
				fnv = fnvs[j];
			}
		if (count != d->count || fnv != d->fnv)
		{
			ms_filed_table *ft = ms_filed_table_named(f->filer, d->table);

			MemoryContextSwitchTo(old);
			/* ranges found nothing, and a snapshot answered one lately: not again yet */
			if (keys_rested(f, ft ? ft->t : NULL))
			{
				f->keys_rested++;
				MemoryContextReset(f->row_cxt);
				MemoryContextSwitchTo(f->row_cxt);
				continue;
			}
			/* narrowed down by ranges (range.c), when the replica can be asked */
			if (ft != NULL && ms_range_start(f, ft->t))
			{
				f->range_started++;
				MemoryContextReset(f->row_cxt);
				MemoryContextSwitchTo(f->row_cxt);
				continue;
			}
			keys_repaired(f, ft ? ft->t : NULL);
			differs = psprintf("the digest of table \"%s\" differs: the replica holds %llu rows, the server records %llu (drift): provisioned again",
							   d->table, (unsigned long long) d->count, (unsigned long long) count);
		}
		else if (d->values.len == 8 && count > 0)
		{
			/* its keys agree: its values, from a replica that gives them (values.c) */
			ms_filed_table *ft = ms_filed_table_named(f->filer, d->table);
			uint64		theirs = 0;
			uint64		ours;
			ms_range_sum *first;
			size_t		nfirst;

			for (int b = 0; b < 8; b++)
				theirs = theirs << 8 | d->values.data[b];
			if (ft != NULL && ms_values_digest(f, ft, count, &ours, &first, &nfirst) && ours != theirs)
			{
				/* narrowed down by ranges of values hashes, when the replica can be asked (range.c) */
				if (ms_range_start_values(f, ft, first, nfirst))
				{
					ereport(LOG, (errmsg("magic_sync: replica %s holds other values of table \"%s\" than the server sent (drift): narrowed down by ranges",
										 f->replica_text, d->table)));
					f->range_started++;
				}
				else
				{
					ereport(LOG, (errmsg("magic_sync: replica %s holds other values of table \"%s\" than the server sent (drift): its rows go again",
										 f->replica_text, d->table)));
					ms_values_repair(f, ft);
					(*repaired)++;
				}
			}
		}
		MemoryContextReset(f->row_cxt);
	}
	MemoryContextSwitchTo(old);
	return differs;
}

/*
 * ms_digests: compared only once the replica applied every message recorded
 * for it, so a message on its way is never taken for drift.
 */
const char *
ms_digests(ms_filing *f)
{
	Oid			types[1] = {UUIDOID};
	Datum		values[1] = {UUIDPGetDatum(&f->replica)};
	bool		isnull;
	char	   *differs;
	int			repaired = 0;
	size_t		pos = 0;
	const uint8_t *p;
	size_t		len;

	if (!ms_up_next(f->upload, f->upload_len, MS_FIELD_UP_DIGESTS, &pos, &p, &len))
		return "none";
	/* rows marked replace (a refused write answered, a range repaired) are on their way too */
	ms_spi_check_one(ms_spi_run("SELECT provision OR acked_number < " MS_HEAD("r")
										   " OR EXISTS (SELECT FROM sync.held h WHERE h.replica = $1 AND h.replace AND h.taken IS NULL)"
										   " FROM sync.replicas r WHERE id = $1",
										   1, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.replicas");	/* its row is locked since ms_acknowledge */
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) ||
		f->provisioning)
		return "not compared: messages are on their way";
	/* nor the rows of a values repair, before the pass sends them: nothing compared, nothing read */
	if (ms_values_repairing(f))
		return "not compared: rows of a values repair are on their way";
	differs = digest_differs(f, &repaired);
	if (differs != NULL)
	{
		provision(f, differs);
		return "differ";
	}
	if (f->range_started > 0)
		return "differ: narrowed down by ranges";
	if (repaired > 0)
		return "values differ: rows sent again";
	if (f->keys_rested > 0)
		return "keys differ; not repaired: ranges found nothing since a snapshot less than magic_sync.digest_repair_interval ago";
	/* keys that agree, values not looked at: no match recorded */
	if (f->values_rested > 0)
		return "keys match; values not compared: repaired less than magic_sync.values_repair_interval ago";
	ms_spi_check(ms_spi_run("UPDATE sync.replicas SET digests_at = now() WHERE id = $1",
									   1, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not record a digest");
	return "match";
}

/*
 * received_recorded: whether the catalog records answers received
 * (sync.answers.received); one not updated yet (ALTER EXTENSION magic_sync
 * UPDATE) does not: its answers are given again as they were.
 */
static bool
received_recorded(void)
{
	Oid			ns = get_namespace_oid("sync", true);
	Oid			rel = OidIsValid(ns) ? get_relname_relid("answers", ns) : InvalidOid;

	return OidIsValid(rel) && get_attnum(rel, "received") != InvalidAttrNumber;
}

/*
 * answers_received: when no row of the replica waits for an answer but the
 * rows this upload carries, it received every answer queued for it before
 * (applying one lets go of the rows it answers).  Its rows waiting are what
 * its backlog calls unfiled; those this upload carries wait for its own.
 */
static void
answers_received(ms_filing *f, Sync__Up *up)
{
	Oid			types[2] = {UUIDOID, BYTEAOID};
	Datum		values[2];
	uint64		carried = 0;
	uint64		unfiled;

	for (size_t i = 0; i < up->n_rows; i++)
		carried += up->rows[i]->n_upserts + up->rows[i]->n_deletes;
	/* of every table the backlog names, kept or not (ms_backlog) */
	unfiled = f->unfiled;
	if (unfiled > carried || !received_recorded())
		return;
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = PointerGetDatum(ms_to_bytea(up->send_id.data, up->send_id.len));
	ms_spi_check(ms_spi_run("UPDATE sync.answers SET received = now(), pulled = coalesce(pulled, now())"
									   " WHERE replica = $1 AND received IS NULL AND send_id <> $2",
									   2, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not record answers received");
}

/*
 * ms_backlog: the backlog entries read one at a time: of the tables the
 * server mirrors, the last entry of each is kept (in sync.replicas.backlog,
 * which sync.health reads); of every table, what it sent and has not had
 * filed is summed.  An upload may carry MS_UP_LIST_MAX entries of names it
 * makes up: the server keeps at most one per mirrored table (whole, with why
 * its rows are set aside: aside.c), and reads one other entry at a time.
 */
void
ms_backlog(ms_filing *f, Sync__Up *up)
{
	Oid			types[2] = {UUIDOID, TEXTOID};
	Datum		values[2];
	int			ntables = f->filer->ntables;
	Sync__Backlog **kept = palloc0(sizeof(Sync__Backlog *) * Max(ntables, 1));
	size_t		pos = 0;
	const uint8_t *p;
	size_t		len;
	MemoryContext old = MemoryContextSwitchTo(f->row_cxt);

	f->unfiled = 0;
	while (ms_up_next(f->upload, f->upload_len, MS_FIELD_UP_BACKLOG, &pos, &p, &len))
	{
		Sync__Backlog *l = sync__backlog__unpack(ms_pg_allocator(), len, p);
		ms_filed_table *ft;

		if (l == NULL)
			elog(ERROR, "could not read a backlog entry of an upload checked whole");
		ft = ms_filed_table_named(f->filer, l->table);
		f->unfiled += l->unfiled;
		if (ft != NULL)
		{
			int			i = (int) (ft - f->filer->filed);

			/* kept whole (why rows are set aside too, aside.c) beyond the entry's memory, the last only */
			MemoryContextSwitchTo(old);
			if (kept[i] != NULL)
				sync__backlog__free_unpacked(kept[i], ms_pg_allocator());
			kept[i] = sync__backlog__unpack(ms_pg_allocator(), len, p);
			if (kept[i] == NULL)
				elog(ERROR, "could not read a backlog entry of an upload checked whole");
			MemoryContextSwitchTo(f->row_cxt);
		}
		MemoryContextReset(f->row_cxt);
	}
	MemoryContextSwitchTo(old);

	values[0] = UUIDPGetDatum(&f->replica);
	/* with why rows are set aside, and this filing's refusals among them (aside.c) */
	values[1] = CStringGetTextDatum(ms_backlog_json(f, kept, ntables));
	ms_spi_check(ms_spi_run("UPDATE sync.replicas SET backlog = $2::jsonb, heard_at = now() WHERE id = $1",
									   2, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not record a backlog");
	answers_received(f, up);
}
