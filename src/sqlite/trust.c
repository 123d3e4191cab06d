/*
** trust.c - the server's key a replica trusts, and every message checked
** against it before anything of it is read (docs/protocol.md 2.4).
**
**   _sync_trust    one row: the server's Ed25519 public key, pinned by
**                  sync_trust_key, and when
**
** The server signs every ToReplica with its installation's key.  Once a
** key is pinned, sync_apply applies nothing -- and a Filed answer lets go
** of no note -- of a message that carries no signature, or one that does
** not verify under the key: it is an error that says why, and changes
** nothing.  A signature is checked on the bytes as they came, before they
** are decoded (src/shared/sign.h).
**
** With no key pinned, a message is applied as before: a file of an earlier
** build learns the key at its next pull over the agent's authenticated
** connection.  A key is never learnt from a message: the host pins it from
** what the server says over a connection it trusts (the agent asks
** sync.signing_key()), or an operator pins it; and bytes that came by any
** other way (a bundle on a stick) are for a replica that has a key pinned
** (magic_sync_agent import refuses them otherwise).
**
**   sync_trust_key() -> TEXT
**       The key pinned, as 64 hexadecimal digits, or NULL.
**   sync_trust_key(key) -> TEXT
**       Pins key (a BLOB of 32 bytes, or 64 hexadecimal digits); an error
**       when another key is pinned already.  Returns the key.
**   sync_trust_key(key, 'replace') -> TEXT
**       Pins key in place of the one pinned: the operator's re-pin after
**       the server was installed anew (a restored server keeps its key).
**   sync_verify(message BLOB) -> TEXT
**       NULL when the message's signature verifies under the key pinned,
**       else why not (no key pinned included).  Reads only: what
**       magic_sync_agent import checks every message of a bundle with
**       before it applies any.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <string.h>

#include "sign.h"

static const char *const trust_ddl =
"CREATE TABLE IF NOT EXISTS _sync_trust("
"  id INTEGER PRIMARY KEY CHECK (id = 1),"
"  key BLOB NOT NULL CHECK (typeof(key) = 'blob' AND length(key) = 32),"
"  pinned_at INTEGER NOT NULL)";

/* pinned: the key pinned into key, *has whether there is one */
static int
pinned(ms_ctx *c, uint8_t key[MS_SIGN_KEY_BYTES], bool *has)
{
	sqlite3_stmt *st;
	int			rc;
	bool		exists = false;

	*has = false;
	/*
	 * In a savepoint of ours, the schema SQLite holds is the file's (its
	 * first statement checked it, in the transaction still open): asked
	 * without a statement (a scan of sqlite_master was a tenth of a one-row
	 * sync_apply).  Else, or without the routine, of sqlite_master.
	 */
	if (c->savepoints > 0 && sqlite3_api->table_column_metadata != NULL)
	{
		rc = sqlite3_table_column_metadata(c->db, "main", "_sync_trust", NULL, NULL, NULL, NULL, NULL, NULL);
		exists = rc == SQLITE_OK;
		if (rc != SQLITE_OK && rc != SQLITE_ERROR)
			return ms_dberr(c, rc);
		rc = SQLITE_OK;
	}
	else
	{
		rc = ms_prepare(c, &st, "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = '_sync_trust'");
		if (rc == SQLITE_OK)
		{
			rc = ms_step(c, st);
			exists = rc == SQLITE_ROW;
			if (rc == SQLITE_ROW || rc == SQLITE_DONE)
				rc = SQLITE_OK;
		}
		sqlite3_finalize(st);
	}
	if (rc != SQLITE_OK || !exists)
		return rc;
	rc = ms_prepare(c, &st, "SELECT key FROM main._sync_trust WHERE id = 1");
	if (rc == SQLITE_OK)
	{
		rc = ms_step(c, st);
		if (rc == SQLITE_ROW)
		{
			if (sqlite3_column_type(st, 0) != SQLITE_BLOB || sqlite3_column_bytes(st, 0) != MS_SIGN_KEY_BYTES)
				rc = ms_fail(c, SQLITE_CORRUPT, "the server key this replica trusts (_sync_trust) is not 32 bytes:"
							 " pin it again with sync_trust_key(key, 'replace')");
			else
			{
				memcpy(key, sqlite3_column_blob(st, 0), MS_SIGN_KEY_BYTES);
				*has = true;
				rc = SQLITE_OK;
			}
		}
		else if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

/*
 * judge: why a message's signature is not taken under key (NULL: it is),
 * written into why
 */
static const char *
judge(const uint8_t key[MS_SIGN_KEY_BYTES], const uint8_t *msg, size_t len, char why[MS_REASON_MAX + 200])
{
	size_t		at = 0,
				after = 0;
	const uint8_t *sig = NULL;
	char		reason[MS_REASON_MAX];
	char		hex[2 * 8 + 1];
	uint8_t		digest[MS_SIGN_DIGEST_BYTES];

	ms_hex(key, 8, hex);
	switch (ms_sign_find(msg, len, &at, &after, &sig, reason))
	{
		case MS_SIGN_NONE:
			sqlite3_snprintf(MS_REASON_MAX + 200, why, "the message is not signed, and this replica trusts"
							 " the server key %s...: refused, nothing applied", hex);
			return why;
		case MS_SIGN_MALFORMED:
			sqlite3_snprintf(MS_REASON_MAX + 200, why, "the message's signature cannot be read (%s):"
							 " refused, nothing applied", reason);
			return why;
		case MS_SIGN_FOUND:
			break;
	}
	ms_sign_message_digest(msg, len, at, after, digest);
	if (ms_verify(key, digest, sig))
		return NULL;
	sqlite3_snprintf(MS_REASON_MAX + 200, why, "the message's signature does not verify under the server key"
					 " %s... this replica trusts (forged, damaged, or signed by another server): refused,"
					 " nothing applied", hex);
	return why;
}

int
ms_trust_check(ms_ctx *c, const uint8_t *msg, size_t len)
{
	uint8_t		key[MS_SIGN_KEY_BYTES];
	bool		has;
	char		why[MS_REASON_MAX + 200];
	int			rc = pinned(c, key, &has);

	if (rc != SQLITE_OK || !has)
		return rc;
	if (judge(key, msg, len, why) != NULL)
		return ms_fail(c, SQLITE_ERROR, "%s", why);
	return SQLITE_OK;
}

/* key_arg: a key as a BLOB of 32 bytes or 64 hexadecimal digits */
static bool
key_arg(sqlite3_value *v, uint8_t key[MS_SIGN_KEY_BYTES])
{
	if (sqlite3_value_type(v) == SQLITE_BLOB && sqlite3_value_bytes(v) == MS_SIGN_KEY_BYTES)
	{
		memcpy(key, sqlite3_value_blob(v), MS_SIGN_KEY_BYTES);
		return true;
	}
	if (sqlite3_value_type(v) == SQLITE_TEXT && sqlite3_value_bytes(v) == 2 * MS_SIGN_KEY_BYTES)
	{
		const unsigned char *s = sqlite3_value_text(v);

		for (int i = 0; i < MS_SIGN_KEY_BYTES; i++)
		{
			int			d[2];

			for (int k = 0; k < 2; k++)
			{
				unsigned char ch = s[2 * i + k];

				d[k] = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
					ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
				if (d[k] < 0)
					return false;
			}
			key[i] = (uint8_t) (d[0] << 4 | d[1]);
		}
		return true;
	}
	return false;
}

static void
trust_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	uint8_t		key[MS_SIGN_KEY_BYTES],
				now[MS_SIGN_KEY_BYTES];
	char		hex[2 * MS_SIGN_KEY_BYTES + 1];
	bool		has = false;
	bool		replace = false;
	int			rc;

	ms_ctx_init(&c, ctx, "sync_trust_key");
	if (argc == 0)
	{
		rc = pinned(&c, now, &has);
		if (rc == SQLITE_OK && has)
		{
			ms_hex(now, MS_SIGN_KEY_BYTES, hex);
			sqlite3_result_text(ctx, hex, -1, SQLITE_TRANSIENT);
		}
		else if (rc == SQLITE_OK)
			sqlite3_result_null(ctx);
		else
			ms_ctx_error(&c, ctx, rc);
		ms_ctx_done(&c);
		return;
	}
	if (!key_arg(argv[0], key))
	{
		ms_ctx_error(&c, ctx, ms_fail(&c, SQLITE_ERROR, "the server key must be a BLOB of 32 bytes or 64"
									 " hexadecimal digits, as sync.signing_key() returns it"));
		ms_ctx_done(&c);
		return;
	}
	if (argc == 2)
	{
		const unsigned char *how = sqlite3_value_text(argv[1]);

		replace = how != NULL && strcmp((const char *) how, "replace") == 0;
		if (!replace)
		{
			ms_ctx_error(&c, ctx, ms_fail(&c, SQLITE_ERROR, "the second argument is 'replace' or nothing"));
			ms_ctx_done(&c);
			return;
		}
	}
	rc = ms_begin(&c, "_sync_trust");
	if (rc != SQLITE_OK)
	{
		ms_ctx_error(&c, ctx, rc);
		ms_ctx_done(&c);
		return;
	}
	rc = pinned(&c, now, &has);
	if (rc == SQLITE_OK && has && memcmp(now, key, MS_SIGN_KEY_BYTES) != 0 && !replace)
	{
		char		other[2 * MS_SIGN_KEY_BYTES + 1];

		ms_hex(now, MS_SIGN_KEY_BYTES, other);
		rc = ms_fail(&c, SQLITE_ERROR, "this replica trusts another server key (%s): a server installed anew"
					 " is pinned with sync_trust_key(key, 'replace') by an operator", other);
	}
	if (rc == SQLITE_OK && !(has && memcmp(now, key, MS_SIGN_KEY_BYTES) == 0))
	{
		sqlite3_stmt *st = NULL;

		rc = ms_exec(&c, "%s", trust_ddl);
		if (rc == SQLITE_OK)
			rc = ms_prepare(&c, &st, "INSERT OR REPLACE INTO main._sync_trust(id, key, pinned_at) VALUES (1, ?1, ?2)");
		if (rc == SQLITE_OK)
		{
			sqlite3_bind_blob(st, 1, key, MS_SIGN_KEY_BYTES, SQLITE_STATIC);
			sqlite3_bind_int64(st, 2, c.now);
			rc = ms_done(&c, st);
		}
		sqlite3_finalize(st);
	}
	rc = ms_end(&c, "_sync_trust", rc);
	if (rc == SQLITE_OK)
	{
		ms_hex(key, MS_SIGN_KEY_BYTES, hex);
		sqlite3_result_text(ctx, hex, -1, SQLITE_TRANSIENT);
	}
	else
		ms_ctx_error(&c, ctx, rc);
	ms_ctx_done(&c);
}

static void
verify_func(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	ms_ctx		c;
	uint8_t		key[MS_SIGN_KEY_BYTES];
	bool		has = false;
	char		why[MS_REASON_MAX + 200];
	const char *no;
	int			rc;

	(void) argc;
	ms_ctx_init(&c, ctx, "sync_verify");
	if (sqlite3_value_type(argv[0]) != SQLITE_BLOB)
	{
		ms_ctx_error(&c, ctx, ms_fail(&c, SQLITE_ERROR, "the message must be a BLOB"));
		ms_ctx_done(&c);
		return;
	}
	rc = pinned(&c, key, &has);
	if (rc != SQLITE_OK)
		ms_ctx_error(&c, ctx, rc);
	else if (!has)
		sqlite3_result_text(ctx, "this replica trusts no server key yet: pin one with sync_trust_key(key)",
							-1, SQLITE_STATIC);
	else if ((no = judge(key, sqlite3_value_blob(argv[0]), (size_t) sqlite3_value_bytes(argv[0]), why)) != NULL)
		sqlite3_result_text(ctx, no, -1, SQLITE_TRANSIENT);
	else
		sqlite3_result_null(ctx);
	ms_ctx_done(&c);
}

int
ms_trust_register(sqlite3 *db)
{
	int			flags = SQLITE_UTF8 | SQLITE_DIRECTONLY;
	int			rc = sqlite3_create_function(db, "sync_trust_key", 0, flags, NULL, trust_func, NULL, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_trust_key", 1, flags, NULL, trust_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_trust_key", 2, flags, NULL, trust_func, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "sync_verify", 1, flags, NULL, verify_func, NULL, NULL);
	return rc;
}
