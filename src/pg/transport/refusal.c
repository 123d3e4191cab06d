/*-------------------------------------------------------------------------
 * refusal.c
 *	  A write filing refused is answered with the server's row (issue 40).
 *
 * The replica applied its write before it went up: a delete or an edit of
 * a row the server does not let it write (a catalog's, another's record, a
 * column it does not own, one that does not decode) leaves its copy unlike
 * the server's, and nothing else would ever send the row again.  Whatever
 * the refusal, its held row is marked replace: the next pass sends that
 * replica alone the row as the server has it, overwriting its copy whole,
 * or its deletion when the server no longer has it (relay/retry.c); until
 * then the reads count it outdated.  A row it holds that the server never
 * sent it and that it cannot own (a catalog's, or a record in another's
 * name) is held at number 0 and note 0, marked the same: its deletion goes.
 * A record of its own that the server refused stays on the device: the
 * answer names it, for the replica to fix.  A replica being provisioned
 * again is left to its snapshot.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "file.h"
#include "spi_check.h"
#include "wake.h"

/* the row is one the replica can never own: a catalog's, or a record in another's name */
static bool
not_its_own(ms_filing *f, const ms_table *t, char **parts)
{
	if (!t->record)
		return true;
	for (int k = 0; k < t->nkey; k++)
		if (t->key[k] == t->origin && pg_strcasecmp(parts[k], f->replica_text) != 0)
			return true;
	return false;
}

void
ms_refusal_answer(ms_filing *f, ms_filed_table *ft, char **parts, const char *key, bool del)
{
	Oid			types[4] = {UUIDOID, INT4OID, TEXTOID, BOOLOID};
	Datum		values[4];

	/* prepared at the call's first refusal, kept for the call (SPI's procedure context) */
	if (f->filer->answer == NULL)
		f->filer->answer = ms_spi_prepare(
			"WITH u AS (UPDATE sync.held SET replace = true"
			"            WHERE replica = $1 AND tab = $2 AND key = $3 RETURNING 1)"
			" INSERT INTO sync.held (replica, tab, key, note, number, replace)"
			" SELECT $1, $2, $3, 0, 0, true WHERE $4 AND NOT EXISTS (SELECT FROM u)"
			" ON CONFLICT (replica, tab, key) DO NOTHING", 4, types);
	values[0] = UUIDPGetDatum(&f->replica);
	values[1] = Int32GetDatum(ft->t->id);
	values[2] = CStringGetTextDatum(key);
	/* a row it made up is on the device only when it wrote it, not when it deleted it */
	values[3] = BoolGetDatum(!del && !f->provisioning && not_its_own(f, ft->t, parts));
	ms_filer_run(f->filer->answer, values, NULL, false, 0, SPI_OK_INSERT, "answer a refused write");
	ms_wake_at_commit();
}
