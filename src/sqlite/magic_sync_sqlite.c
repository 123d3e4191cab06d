/*
** magic_sync_sqlite.c - the replica side of magic_sync, as a SQLite
** loadable extension (docs/protocol.md is the specification).
**
**   .load ./magic_sync_sqlite                      -- sqlite3 shell
**   conn.load_extension("./magic_sync_sqlite")     -- Python, and so on
**
** A replica holds partial copies of the server's tables and writes rows of
** its own.  The host moves bytes: every message from sync.pull goes to
** sync_apply, every non-NULL sync_upload goes to sync.file.
**
**   SELECT sync_apply(msg);
**   SELECT sync_upload();          -- NULL: nothing to say
**
** SQL functions.  Those that read or write the replica's data are
** SQLITE_DIRECTONLY: callable from top-level SQL, never from triggers or
** views.  Each checks its arguments first and, on any error, changes
** nothing.  Call the writing ones from a statement that writes nothing
** itself (SELECT f(...)); inside the caller's transaction they work in a
** savepoint of their own, and never roll back the caller's work.
**
**   sync_apply(message BLOB) -> TEXT (JSON)
**       Applies one ToReplica in one transaction, all of it or nothing.
**       {"result":"applied","number":42,"snapshot":"begin"|"open"|"end"|null,
**        "upserts":N,"deletes":N,"retired":N,"kept":N,"refused":N,"let_go":N}
**       {"result":"filed","send_id":"hex","rows":N,"notes":N,"set_aside":N,
**        "dropped":N,"waiting":N,"unaccounted":N}
**       {"result":"filed","send_id":"hex","duplicate":true,"ours":B,
**        "last_seq":N,"again":N,...}
**       {"result":"duplicate","number":N,"last":N}
**       {"result":"gap","number":N,"gap":N,"reason":"..."}
**       {"result":"wrong_replica","number":N,"replica":"uuid"}
**       {"result":"later_protocol","protocol":P,"number":N}
**       {"result":"older_generation","number":N,"generation":G,"follows":F}
**       An error (nothing changed) when the message is not a BLOB, is over
**       max_message_bytes, or cannot be decoded.  A snapshot's schema
**       creates and alters the tables; rows that cannot be taken are
**       refused (recorded, reported upward), never fatal to the message.
**       A table, view or index of the host's own is never altered: a
**       server's table of its name waits, its rows refused, and is made at
**       the first message once the host renamed its own ("made":N).
**       An error with SQLITE_FULL when the file's disk is full.
**
**   sync_applied() -> BLOB
**       The last message applied, as an Applied (epoch, number, nonce, seal,
**       the generation it follows), as uploads carry it; an empty BLOB
**       before the first.  The host passes it to sync.pull as the replica's
**       claim of where it is.
**
**   sync_upload() -> BLOB or NULL
**       The next Up (rows written, refusals, last applied with its seal,
**       digests when due, backlog, gap), at most max_upload_bytes, numbered,
**       its length first and its check last, its rows stamped with its random
**       send id.  NULL when there is nothing to say (before the replica's uuid
**       is known, too).
**   sync_upload(max_rows INTEGER) -> BLOB or NULL
**       The same with at most max_rows rows and no refusals or digests, for
**       narrowing down an upload the server refused; sync_upload(0) always
**       returns one.
**
**   sync_upload(lane TEXT) -> BLOB or NULL
**   sync_upload(max_rows INTEGER or NULL, lane TEXT or NULL) -> BLOB or NULL
**       The next Up of a lane (lanes.c): only the rows of the tables its
**       Table puts in the lane, numbered by the lane's own send numbers.
**       '' or NULL is the first lane, which sync_upload() uploads: it says
**       what the engine says too (applied, gap, refusals, digests, backlog).
**       An error when the lane is no lane's name (lane.h).
**
**   sync_lanes() -> TEXT (JSON)
**       [{"lane":"","last_seq":N,"tables":[...]},{"lane":"sales",...}]
**       The first lane, then each lane a table the replica writes is in.
**
**   sync_upload_refused(upload BLOB, reason TEXT[, blame INTEGER[, sqlstate TEXT]]) -> TEXT
**       The server refused this upload for good: its rows go again at once,
**       or, blamed, are set aside with the reason and the SQLSTATE the
**       server refused it with.  {"rows":N,"set_aside":N}
**
**   sync_digest() -> TEXT (JSON)     {"products":{"count":3,"fnv":"..."},...}
**   sync_digest(table TEXT)          {"count":3,"fnv":"..."}
**       Per held table: rows and FNV-1a 64 of their sorted canonical keys,
**       retired and refused rows left out, as the server computes it.
**
**   sync_progress() -> TEXT (JSON)
**       {"products":{"unsent":0,"unfiled":2,"set_aside":0,"refused":1,
**        "waiting":0,"dropped":1,"dropped_reasons":["..."]},...}
**       waiting: in the server's inbox; dropped: edits the server did not take;
**       "not_held":"why" for a table not held as the snapshot made it (the
**       host's own table has its name, or the host broke it)
**       e.g. SELECT key, value->>'unsent' FROM json_each(sync_progress());
**       A table with rows set aside (they never go up) lists the newest ten:
**       "set_aside_rows":[{"key":["..."],"reason":"refused by the server: ...",
**        "sqlstate":"42501"|null,"since":unix|null}]
**       A setting table's newest wishes of the server's (wish.c), newest first:
**       "wishes":[{"id":7,"fate":"applied","why":null,"apply":"always",
**        "values":"{...}","got_at":...,"decided_at":...,"answered":true}]
**
**   sync_status() -> TEXT (JSON)
**       {"replica":"uuid"|null,"epoch":"hex"|null,"applied":42,"generation":G,
**        "applied_at":unix|null,"gap":0,"gap_epoch":"hex"|null,
**        "snapshot":N|null,"tables":3,"digest_due":false,
**        "last_error":"..."|null,"error_at":unix|null}
**
**   sync_init(uuid TEXT | BLOB(16)) -> TEXT
**       Sets the replica's uuid before anything arrives (otherwise it is
**       learnt from the first snapshot).  An error when it is another.
**
**   sync_config(name TEXT) -> INTEGER
**   sync_config(name TEXT, value INTEGER) -> INTEGER
**       Reads or sets: max_message_bytes (64 MiB), max_upload_bytes
**       (1 MiB), digest_interval (3600 s), resend_after (300 s), app_build (0:
**       the host app's build, which uploads carry in their build: raise it when
**       the app deploys a fix, and the server sends the rows refused again at once).
**
**   sync_retry() -> INTEGER
**       Rows set aside (too large, not encodable, refused by the server),
**       and rows waiting in the server's inbox, go up again; returns how many.
**   sync_retry('too large') -> INTEGER
**       Only the rows set aside as too large (a bound changed).
**
**   sync_resync() -> INTEGER
**       Asks the server to provision the replica again ("re-sync
**       everything"): a gap after the last message applied, said by the
**       next upload.  Every write not filed yet is kept and goes up.
**       1 when asked, 0 when a snapshot is already due or open.
**
**   sync_key(part, ...) -> TEXT      the canonical key: sync_key(42) = '2:42'
**   sync_digest_keys(key) -> TEXT    aggregate: the digest of canonical keys
**       These two are pure and INNOCUOUS.
**
**   sync_hlc() -> INTEGER
**       The next stamp of the replica's hybrid logical clock, advancing it
**       (a write): (ms << 16) | counter (hlc.c, docs/protocol.md 12).  The
**       version of a table declared version => 'hlc' is stamped so on
**       every write; a row written with sync_hlc() keeps it.
**   sync_trust_key() -> TEXT         the server key this replica trusts (hex), or NULL
**   sync_trust_key(key) -> TEXT      pins it (32-byte BLOB or 64 hex digits);
**                                    an error when another is pinned
**   sync_trust_key(key, 'replace')   pins it in place of another (an operator's re-pin)
**       Once a key is pinned, sync_apply refuses (an error, nothing
**       changed) every message whose Ed25519 signature is missing or does
**       not verify under it, a Filed answer included (trust.c,
**       docs/protocol.md 2.4).  A key is never learnt from a message.
**   sync_verify(message BLOB) -> TEXT
**       NULL when the message's signature verifies under the key pinned,
**       else why not.  Reads only.
**
**   sync_test_clock_offset(ms INTEGER) -> INTEGER
**       Tests only: shifts this file's physical clock by ms; refused unless
**       the process has MAGIC_SYNC_TEST_CLOCK=1 in its environment.
**
** The extension keeps its state in tables named _sync_* (state.c).
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT1

#include <stddef.h>

static void *
sqlite_alloc(void *data, size_t size)
{
	(void) data;
	return sqlite3_malloc64(size == 0 ? 1 : size);
}

static void
sqlite_free(void *data, void *pointer)
{
	(void) data;
	sqlite3_free(pointer);
}

static ms_allocator sqlite_allocator = {sqlite_alloc, sqlite_free, NULL};

ms_allocator *
ms_sqlite_allocator(void)
{
	return &sqlite_allocator;
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int			sqlite3_magicsyncsqlite_init(sqlite3 *db, char **pzErrMsg,
										 const sqlite3_api_routines *pApi);

int
sqlite3_magicsyncsqlite_init(sqlite3 *db, char **pzErrMsg,
							 const sqlite3_api_routines *pApi)
{
	int			rc;

	SQLITE_EXTENSION_INIT2(pApi);
	(void) pzErrMsg;
	rc = ms_keys_register(db);
	if (rc == SQLITE_OK)
		rc = ms_apply_register(db);
	if (rc == SQLITE_OK)
		rc = ms_digest_register(db);
	if (rc == SQLITE_OK)
		rc = ms_upload_register(db);
	if (rc == SQLITE_OK)
		rc = ms_sends_register(db);
	if (rc == SQLITE_OK)
		rc = ms_status_register(db);
	if (rc == SQLITE_OK)
		rc = ms_state_register(db);
	if (rc == SQLITE_OK)
		rc = ms_hlc_register(db);
	if (rc == SQLITE_OK)
		rc = ms_lanes_register(db);
	if (rc == SQLITE_OK)
		rc = ms_trust_register(db);
	if (rc == SQLITE_OK)
		rc = ms_kept_register(db);
	return rc;
}
