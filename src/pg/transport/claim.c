/*-------------------------------------------------------------------------
 * claim.c
 *	  What a replica says it applied, and what of it the server believes
 *	  (claim.h; docs/design.md 4.8).
 *
 *   a seal        checked under the secret of the epoch it names: one the
 *                 server never made is refused, never a reason for an epoch
 *   a number      beyond what the server wrote for the replica is believed
 *                 only with a seal that verifies, and then moves the
 *                 sequence a bounded distance at most
 *   a generation  newer than the server's own, of its epoch: the server is
 *                 an old primary, superseded, and takes nothing more from
 *                 that replica
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "claim.h"
#include "seal.h"
#include "spi_check.h"

static const char *
call_name(ms_claim_call call)
{
	return call == MS_CLAIM_PULL ? "sync.pull" : "sync.file";
}

void
ms_claim_text(ms_claim_call call, ms_claim_refusal why, int64 number, int64 a, int64 b,
			  char **claim, char **reason)
{
	*claim = call == MS_CLAIM_PULL
		? psprintf("sync.pull after message " INT64_FORMAT, number)
		: psprintf("sync.file of an upload that applied message " INT64_FORMAT, number);
	switch (why)
	{
		case MS_CLAIM_NO_SEAL:
			*reason = psprintf("this server never wrote that message for the replica (its last is " INT64_FORMAT
							   "), and no seal came with the claim to say it did", a);
			break;
		case MS_CLAIM_BAD_SEAL:
			*reason = pstrdup("the seal that came with it is not one this server made for that message");
			break;
		case MS_CLAIM_OUT_OF_REACH:
			*reason = psprintf("its seal verifies, but it is " INT64_FORMAT " beyond the server's sequence (at "
							   INT64_FORMAT "), more than a claim may move it (" INT64_FORMAT ")",
							   number - a, a, b);
			break;
		case MS_CLAIM_SUPERSEDED:
			*reason = psprintf("the replica follows generation " INT64_FORMAT " of this epoch, newer than this server's "
							   INT64_FORMAT ": this server was superseded (a standby promoted past it)", a, b);
			break;
	}
}

void
ms_claim_refuse(const pg_uuid_t *replica, ms_claim_call call, ms_claim_refusal why,
				int64 number, int64 a, int64 b)
{
	char	   *claim;
	char	   *reason;
	char	   *id = DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(replica)));

	ms_claim_text(call, why, number, a, b, &claim, &reason);
	/* the error rolls the call back: the alarm is recorded apart */
	ms_alarm(replica, call, why, number, a, b);
	switch (why)
	{
		case MS_CLAIM_NO_SEAL:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s is not believed: this server never wrote message " INT64_FORMAT " for replica %s",
							call_name(call), number, id),
					 errdetail("Its last message for the replica is " INT64_FORMAT ", and no seal came with the claim; "
							   "a number from a replica moves nothing shared without one.", a),
					 errhint("Pass what the replica applied, as sync_applied() returns it on the replica, "
							 "as sync.pull's fourth argument.")));
			break;
		case MS_CLAIM_BAD_SEAL:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s is not believed: the seal of message " INT64_FORMAT " of replica %s is not one this server made",
							call_name(call), number, id),
					 errdetail("A seal that does not verify is refused, with the call it came with; it begins no epoch."),
					 errhint("The replica's file was edited, or its bytes damaged on the way; when it persists, "
							 "provision the replica again with sync.replica_reprovision.")));
			break;
		case MS_CLAIM_OUT_OF_REACH:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s is not believed: message " INT64_FORMAT " of replica %s is too far beyond this server's sequence",
							call_name(call), number, id),
					 errdetail("Its seal verifies, but a claim moves sync.message_seq at most " INT64_FORMAT
							   " beyond its value (" INT64_FORMAT ").", b, a),
					 errhint("Was the epoch's secret copied?  If this server lost that much history, begin a new "
							 "epoch with sync.epoch_begin().")));
			break;
		case MS_CLAIM_SUPERSEDED:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s is refused: this server was superseded, replica %s follows a newer generation of its epoch",
							call_name(call), id),
					 errdetail("The replica follows generation " INT64_FORMAT ", this server is at " INT64_FORMAT
							   ": a standby was promoted past it, and this server is the old primary.", a, b),
					 errhint("Point the replica's transport at the current primary.")));
			break;
	}
	pg_unreachable();
}

ms_claim_seal
ms_claim_check(const pg_uuid_t *replica, const Sync__Applied *a, int64 number)
{
	ms_epoch	e;
	bool		current;

	if (a->epoch.len != MS_EPOCH_BYTES || !ms_epoch_find(a->epoch.data, &e, &current))
		return MS_SEAL_UNKNOWN_EPOCH;
	if (a->nonce.len != MS_NONCE_BYTES ||
		!ms_seal_verify(e.secret, MS_SECRET_BYTES, replica->data, a->epoch.data, (uint64) number,
						a->nonce.data, a->seal.data, a->seal.len))
		return MS_SEAL_FORGED;
	return current ? MS_SEAL_CURRENT : MS_SEAL_PAST_EPOCH;
}

void
ms_claim_superseded(const pg_uuid_t *replica, ms_claim_call call, const ms_epoch *e,
					const Sync__Applied *a, int64 number)
{
	if (a->epoch.len == MS_EPOCH_BYTES && memcmp(a->epoch.data, e->id, MS_EPOCH_BYTES) == 0 &&
		a->generation > e->generation)
		ms_claim_refuse(replica, call, MS_CLAIM_SUPERSEDED, number, (int64) a->generation,
						(int64) e->generation);
}

void
ms_claim_believe(const pg_uuid_t *replica, ms_claim_call call, int64 number)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(number)};
	bool		isnull;
	int64		seq;

	/* the sequence as it is, not as the caller's snapshot saw it: it is not transactional */
	ms_spi_check_one(SPI_execute("SELECT last_value FROM sync.message_seq", false, 1), SPI_OK_SELECT, "could not read sync.message_seq");
	seq = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (number <= seq)
		return;
	if (number - seq > MS_CLAIM_REACH)
		ms_claim_refuse(replica, call, MS_CLAIM_OUT_OF_REACH, number, seq, MS_CLAIM_REACH);
	/* numbers beyond what it applied, for whatever is written next */
	ms_spi_check(SPI_execute_with_args("SELECT setval('sync.message_seq', $1)", 1, types, values, NULL, false, 0), SPI_OK_SELECT, "could not move sync.message_seq");
	ereport(LOG,
			(errmsg("magic_sync: sync.message_seq moves to " INT64_FORMAT ", past what a replica applied", number),
			 errdetail("The replica applied a message this server sealed and has no record of writing: "
					   "it was restored from an older copy, or is a standby promoted.")));
}
