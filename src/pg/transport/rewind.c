/*-------------------------------------------------------------------------
 * rewind.c
 *	  A replica restored from an older copy, repaired by what went after
 *	  the copy, not by a snapshot (docs/design.md 4.8, docs/protocol.md 8.1).
 *
 * The replica says (a pull's `applied`, an upload's acknowledgement) it
 * applied message N, before the M it acknowledged: its file was restored.
 * When N is a message this server sealed for it in the current epoch and
 * generation, after the snapshot it follows (so the copy holds that snapshot
 * whole), the server knows what the copy lacks: every held row sent after N
 * (sync.held.number > N) is marked replace, and every row taken back after N
 * (sync.held.taken > N) is held at number 0 and note 0, marked the same:
 * the next pass sends the rows as the server has them, and the deletions
 * (relay/retry.c).  The messages written after N leave the outbox (their
 * rows go again that way), and the record is taken back to N: acknowledged
 * and last written, with N's nonce, so the next message follows the copy's
 * last (its `previous` is N).  No snapshot.  What was deleted after N and
 * acknowledged is no longer recorded: the copy still holds those rows, and
 * its next digest, narrowed down by ranges (range.c), lets go of them.
 *
 * Anything else -- another epoch or generation, a seal the server did not
 * make, a snapshot after N, one due -- is provisioned again, as before.
 *
 * A gap (ms_gap_resent) is repaired the same way, by what the outbox still
 * holds: the replica's next pull, after what it applied, brings it again.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "bytes.h"
#include "claim.h"
#include "rewind.h"
#include "seal.h"
#include "spi_check.h"
#include "updated.h"
#include "wake.h"

bool
ms_rewind(const pg_uuid_t *replica, const char *replica_text, const Sync__Applied *a)
{
	Oid			types[3] = {UUIDOID, INT8OID, BYTEAOID};
	Datum		values[3];
	ms_epoch	e;
	bool		isnull;
	bool		owed = ms_catalog_has_column("replicas", "owed_messages");

	if (a == NULL || a->number == 0 || a->nonce.len != MS_NONCE_BYTES || !ms_catalog_has("ranges") ||
		!ms_epoch_read(&e) || a->generation != e.generation ||
		ms_claim_check(replica, a, (int64) a->number) != MS_SEAL_CURRENT)
		return false;
	values[0] = UUIDPGetDatum(replica);
	values[1] = Int64GetDatum((int64) a->number);
	values[2] = PointerGetDatum(ms_to_bytea(a->nonce.data, MS_NONCE_BYTES));
	/* the snapshot it follows is in the copy whole, and none is due */
	ms_spi_check(SPI_execute_with_args("SELECT NOT provision AND snapshot_end IS NOT NULL AND snapshot_end <= $2"
									   "   AND held_due IS NULL AND acked_number > $2"
									   "   AND acked_epoch = (SELECT id FROM sync.epoch WHERE ended IS NULL)"
									   "  FROM sync.replicas WHERE id = $1 FOR UPDATE",
									   2, types, values, NULL, false, 1), SPI_OK_SELECT, "could not read sync.replicas");
	if (SPI_processed != 1 ||
		!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) || isnull)
		return false;
	/*
	 * Not beside a pass: one in progress chains on from where the record is
	 * now (MS_LOCK_PASSES waits for it, and the next pass for this).
	 */
	ms_spi_check(SPI_execute(MS_LOCK_PASSES, false, 0), SPI_OK_UTILITY, "could not lock sync.replicas");
	/* the messages after N leave the outbox, owed no more (as ack.c's leave_outbox) */
	ms_spi_check(SPI_execute_with_args(owed ?
									   "WITH d AS (DELETE FROM sync.outbox WHERE replica = $1 AND number > $2"
									   "            RETURNING number, bytes, dropped)"
									   " UPDATE sync.replicas r SET owed_messages = r.owed_messages - o.n,"
									   "        owed_bytes = r.owed_bytes - o.b"
									   "   FROM (SELECT count(*) AS n, coalesce(sum(d.bytes), 0) AS b FROM d, sync.replicas x"
									   "          WHERE x.id = $1 AND NOT d.dropped AND d.number > coalesce(x.snapshot_end, 0)) o"
									   "  WHERE r.id = $1 AND o.n > 0" :
									   "DELETE FROM sync.outbox WHERE replica = $1 AND number > $2",
									   2, types, values, NULL, false, 0), owed ? SPI_OK_UPDATE : SPI_OK_DELETE,
				 "could not take the outbox of a restored replica back");
	ms_spi_check(SPI_execute_with_args("DELETE FROM sync.carried WHERE replica = $1 AND number > $2",
									   2, types, values, NULL, false, 0), SPI_OK_DELETE,
				 "could not take the outbox of a restored replica back");
	/* taken back after N: the copy still holds it, its deletion goes again */
	ms_spi_check(SPI_execute_with_args("UPDATE sync.held SET taken = NULL, number = 0, note = 0, replace = true"
									   " WHERE replica = $1 AND taken > $2",
									   2, types, values, NULL, false, 0), SPI_OK_UPDATE,
				 "could not mark the rows a restored replica lacks");
	/* sent after N: the copy lacks it, or holds an older version */
	ms_spi_check(SPI_execute_with_args("UPDATE sync.held SET replace = true WHERE replica = $1 AND number > $2 AND NOT replace",
									   2, types, values, NULL, false, 0), SPI_OK_UPDATE,
				 "could not mark the rows a restored replica lacks");
	ms_spi_check(SPI_execute_with_args("UPDATE sync.replicas SET acked_epoch = (SELECT id FROM sync.epoch WHERE ended IS NULL),"
									   " acked_number = $2, acked_nonce = $3, acked_at = now(), last_number = $2, last_nonce = $3"
									   " WHERE id = $1",
									   3, types, values, NULL, false, 0), SPI_OK_UPDATE, "could not take the record of a restored replica back");
	ms_wake_at_commit();
	ereport(LOG, (errmsg("magic_sync: replica %s was restored from an older copy (it applied message %llu):"
						 " what went after it goes again, without a snapshot",
						 replica_text, (unsigned long long) a->number)));
	return true;
}

/*
 * ms_gap_resent: whether the replica's next pull closes the gap it reports
 * (number gap, of epoch gap_epoch) with what the outbox still holds after
 * what it acknowledged (ack.c reads that first), no snapshot needed.  The
 * outbox of a replica is whole after its acknowledgement but for what a
 * snapshot dropped, and a snapshot drops everything written before its
 * Begin; so what follows the acknowledged is either
 *
 *   - a snapshot's Begin, not dropped: the pull brings it first, and a
 *     Begin is applied whatever gap is open (docs/protocol.md 5.1 rule 6).
 *     A Begin lost or put after a later message of its snapshot, a message
 *     of a snapshot lost before the replica acknowledged any of it: the
 *     snapshot comes again whole, not another one;
 *   - or the messages that follow it, one of them before the gap's message
 *     (the lost one, still there): for a replica that says Up.range_repair
 *     it closes a gap beyond the next number (rule 7), within a snapshot
 *     (its Begin acknowledged, its End not yet) or after it.  A gap at the
 *     next number is sync_resync()'s, which only a snapshot answers.
 *
 * Of this epoch only: a gap of another is a snapshot's to close (ack.c).
 * SPI connected; the replica's row is locked.
 */
bool
ms_gap_resent(const pg_uuid_t *replica, int64 gap, const uint8 *gap_epoch, size_t gap_epoch_len, bool range_repair)
{
	Oid			types[4] = {UUIDOID, INT8OID, BYTEAOID, BOOLOID};
	Datum		values[4];
	bool		isnull;

	values[0] = UUIDPGetDatum(replica);
	values[1] = Int64GetDatum(gap);
	values[2] = PointerGetDatum(ms_to_bytea(gap_epoch, gap_epoch_len));
	values[3] = BoolGetDatum(range_repair);
	ms_spi_check_one(SPI_execute_with_args("SELECT $3 = (SELECT id FROM sync.epoch WHERE ended IS NULL) AND ("
										   "   EXISTS (SELECT FROM sync.outbox o WHERE o.replica = r.id AND o.number > r.acked_number"
										   "             AND o.snapshot AND NOT o.dropped)"
										   "   OR ($4 AND $2 > r.acked_number + 1 AND r.acked_number > 0 AND r.acked_epoch = $3"
										   "       AND EXISTS (SELECT FROM sync.outbox o WHERE o.replica = r.id AND o.number > r.acked_number"
										   "                     AND o.number < $2 AND NOT o.dropped)))"
										   "  FROM sync.replicas r WHERE r.id = $1",
										   4, types, values, NULL, true, 1), SPI_OK_SELECT, "could not read the outbox of a gap");
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) && !isnull;
}
