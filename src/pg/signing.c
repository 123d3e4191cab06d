/*-------------------------------------------------------------------------
 * signing.c
 *	  The installation's signing key, made by the first pass or filing that
 *	  needs one, and signing a message's head (signing.h).  Its public half
 *	  is sync.signing_key(), for whoever asks (src/pg/sql/32_signing.sql).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

#include "bytes.h"
#include "seal.h"
#include "probe.h"
#include "signing.h"
#include "spi_check.h"
#include "updated.h"

/* the key the backend signs with, made once from the seed it was read as */
static ms_signer *cached;
static uint8 cached_seed[MS_SIGN_SEED_BYTES];

/* a probe's read of sync.signing_key's one row: its private key copied out (the row is the scan's) */
static bool
seed_row(HeapTuple row, TupleDesc desc, void *arg)
{
	uint8	   *seed = arg;
	bool		isnull;
	Datum		d = ms_probe_column(row, desc, "private_key", &isnull);
	bytea	   *b = isnull ? NULL : DatumGetByteaPP(d);

	/* cannot happen: the table's CHECK holds the length */
	if (b == NULL || VARSIZE_ANY_EXHDR(b) != MS_SIGN_SEED_BYTES)
		elog(ERROR, "sync.signing_key holds a private key that is not %d bytes", MS_SIGN_SEED_BYTES);
	memcpy(seed, VARDATA_ANY(b), MS_SIGN_SEED_BYTES);
	seed[MS_SIGN_SEED_BYTES] = 1;
	return false;
}

/*
 * read_seed: the private key recorded, false when none; read in C (probe.h)
 * as a statement would, checked as the current user: every pass and filing
 * that signs asks
 */
static bool
read_seed(uint8 seed[MS_SIGN_SEED_BYTES])
{
	uint8		found[MS_SIGN_SEED_BYTES + 1];	/* and whether a row was there */

	found[MS_SIGN_SEED_BYTES] = 0;
	if (!ms_probe_now("signing_key", NULL, seed_row, found) || found[MS_SIGN_SEED_BYTES] == 0)
		return false;
	memcpy(seed, found, MS_SIGN_SEED_BYTES);
	return true;
}

/* make_key: the installation's first key, drawn from the CSPRNG and recorded */
static void
make_key(uint8 seed[MS_SIGN_SEED_BYTES])
{
	uint8		public_key[MS_SIGN_KEY_BYTES];
	ms_signer  *s;
	Oid			types[2] = {BYTEAOID, BYTEAOID};
	Datum		values[2];
	char		hex[2 * MS_SIGN_KEY_BYTES + 1];

	if (!ms_random(seed, MS_SIGN_SEED_BYTES))
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not draw a signing key")));
	s = ms_signer_new(seed, public_key);
	if (s == NULL)
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not make a signing key")));
	ms_signer_free(s);
	values[0] = PointerGetDatum(ms_to_bytea(seed, MS_SIGN_SEED_BYTES));
	values[1] = PointerGetDatum(ms_to_bytea(public_key, MS_SIGN_KEY_BYTES));
	ms_spi_check(SPI_execute_with_args("INSERT INTO sync.signing_key (private_key, public_key) VALUES ($1, $2)"
									   " ON CONFLICT DO NOTHING",
									   2, types, values, NULL, false, 0), SPI_OK_INSERT, "could not record the signing key");
	/* another transaction, begun before this one's snapshot was taken, made it first */
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("the installation's signing key was made by a concurrent transaction"),
				 errhint("Try again: the key is there now.")));
	for (int i = 0; i < MS_SIGN_KEY_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", public_key[i]);
	ereport(LOG,
			(errmsg("magic_sync: the installation's signing key is made: %s", hex),
			 errdetail("Every message to a replica is signed with it; replicas pin it at their next pull"
					   " (sync.signing_key()).")));
}

ms_signer *
ms_signing_key(void)
{
	uint8		seed[MS_SIGN_SEED_BYTES];
	uint8		public_key[MS_SIGN_KEY_BYTES];

	if (!ms_catalog_has("signing_key"))
		return NULL;
	if (!read_seed(seed))
	{
		/* the first: one transaction makes it, whoever comes first (a pass, a filing) */
		if (SPI_execute("LOCK TABLE sync.signing_key IN SHARE ROW EXCLUSIVE MODE", false, 0) < 0)
			elog(ERROR, "could not lock sync.signing_key");
		if (!read_seed(seed))
			make_key(seed);
	}
	if (cached != NULL && memcmp(seed, cached_seed, sizeof seed) == 0)
		return cached;
	/* a key replaced (a restore, an operator's new installation): the old one goes */
	ms_signer_free(cached);
	cached = ms_signer_new(seed, public_key);
	if (cached == NULL)
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not load the signing key")));
	memcpy(cached_seed, seed, sizeof seed);
	return cached;
}

size_t
ms_sign_head(ms_signer *s, uint8 *head, size_t head_len, const uint8 body_sha256[32])
{
	uint8		digest[MS_SIGN_DIGEST_BYTES];
	uint8		signature[MS_SIGNATURE_BYTES];

	ms_sign_digest(head, head_len, body_sha256, digest);
	if (!ms_signer_sign(s, digest, signature))
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not sign a message")));
	return head_len + ms_sign_field(signature, head + head_len);
}
