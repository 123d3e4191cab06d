/*-------------------------------------------------------------------------
 * replica.c
 *	  The agent's SQLite side: the replica file and the replica's functions.
 *
 * The replica extension is linked into the agent and registered with
 * sqlite3_auto_extension, so the agent needs no .so at run time and always
 * speaks the protocol it was built with.  The file is opened in WAL mode
 * with a busy timeout: the host application keeps reading and writing it
 * while the agent applies, and every function the agent calls runs in a
 * short transaction of its own (autocommit), so nothing is held between
 * steps, and the file stays usable while the server is out of reach.
 *-------------------------------------------------------------------------
 */
#include "replica.h"

#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <unistd.h>

/* the replica extension's entry point (src/sqlite/magic_sync_sqlite.c) */
extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **pzErrMsg,
										 const sqlite3_api_routines *pApi);

#define BUSY_TIMEOUT_MS 5000


agent_status
replica_fail(replica *r, int rc, const char *what, char err[AGENT_ERROR_MAX])
{
	const char *message = sqlite3_errmsg(r->db);

	/* the extension's errors name their function already */
	if (strncmp(message, what, strlen(what)) == 0)
		snprintf(err, AGENT_ERROR_MAX, "%s", message);
	else
		snprintf(err, AGENT_ERROR_MAX, "%s: %s", what, message);
	rc &= 0xff;
	/* whatever failed, what the replica says of itself is asked again */
	r->known = false;
	/* the disk is full: said as such (it was said "busy"), the step waits for room */
	if (rc == SQLITE_FULL)
		return STEP_FULL;
	/* a writer holds the file, or it could not be read or written: the same step may succeed later */
	if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED || rc == SQLITE_IOERR)
		return STEP_BUSY;
	return STEP_FAILED;
}

void
replica_rollback(replica *r)
{
	if (!sqlite3_get_autocommit(r->db))
	{
		sqlite3_step(r->rollback);
		sqlite3_reset(r->rollback);
	}
}

static int
prepare(replica *r, const char *sql, sqlite3_stmt **stmt)
{
	return sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT, stmt, NULL);
}

/*
 * begin: the agent's writes (sync_apply, sync_upload) run in a transaction
 * that takes the write lock first, waiting for it under the busy timeout:
 * a deferred one that reads first could not wait for a writer that came in
 * between (SQLITE_BUSY_SNAPSHOT, at once).  The functions work in a
 * savepoint inside it.
 */
int
replica_begin(replica *r, const char *what, char err[AGENT_ERROR_MAX])
{
	int			rc;

	/* a write of this connection's: what the replica says of itself is asked again, unless the writer knows */
	r->known = false;
	/* and what it has to upload */
	r->said_all = false;
	rc = sqlite3_step(r->begin);

	sqlite3_reset(r->begin);
	return rc == SQLITE_DONE ? STEP_OK : (int) replica_fail(r, rc, what, err);
}

int
replica_commit(replica *r, const char *what, char err[AGENT_ERROR_MAX])
{
	int			rc = sqlite3_step(r->commit);

	sqlite3_reset(r->commit);
	if (rc == SQLITE_DONE)
	{
		r->unsynced = true;
		return STEP_OK;
	}
	rc = (int) replica_fail(r, rc, what, err);
	replica_rollback(r);
	return rc;
}

/* replica_data_version: PRAGMA data_version (moved by another connection's commits), kept in seen */
int64_t
replica_data_version(replica *r)
{
	int64_t		v = 0;

	if (sqlite3_step(r->data_version) == SQLITE_ROW)
		v = sqlite3_column_int64(r->data_version, 0);
	else
		r->known = false;
	sqlite3_reset(r->data_version);
	r->seen = v;
	return v;
}

/*
 * lock_file: one process at a time works on a replica file -- two agents
 * would both number sends and apply messages, and an import under a running
 * agent would apply beside it.  The lock is an flock on FILE-agent.lock,
 * beside the file (never on the file itself: SQLite's own locks are the
 * application's, and on NFS an flock is one of them): the kernel releases
 * it when the process ends, however it ends, so a crash leaves no stale
 * lock; the lock file stays, meaning nothing without a process holding it.
 * It holds the pid of the process that holds it, only to say who.
 */
static bool
lock_file(replica *r, const char *path, char err[AGENT_ERROR_MAX])
{
	char		name[4096];
	char		pid[32] = "";
	ssize_t		n;

	if (snprintf(name, sizeof name, "%s-agent.lock", path) >= (int) sizeof name)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot lock %s: its name is too long", path);
		return false;
	}
	r->lock = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (r->lock < 0)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot lock %.300s-agent.lock: %s", path, strerror(errno));
		return false;
	}
	if (flock(r->lock, LOCK_EX | LOCK_NB) != 0)
	{
		int			e = errno;

		n = e == EWOULDBLOCK ? pread(r->lock, pid, sizeof pid - 1, 0) : -1;
		pid[n > 0 ? n : 0] = '\0';
		pid[strspn(pid, "0123456789")] = '\0';
		if (e == EWOULDBLOCK)
			snprintf(err, AGENT_ERROR_MAX, "another process works on %.300s (magic_sync_agent%s%s holds"
					 " its -agent.lock): one agent, import or export at a time per replica file", path,
					 pid[0] ? " pid " : "", pid);
		else
			snprintf(err, AGENT_ERROR_MAX, "cannot lock %.300s-agent.lock: %s", path, strerror(e));
		return false;
	}
	n = snprintf(pid, sizeof pid, "%ld\n", (long) getpid());
	if (ftruncate(r->lock, 0) != 0 || pwrite(r->lock, pid, (size_t) n, 0) != n)
	{
		/* who holds it is only for the next one to say: nothing depends on it */
	}
	return true;
}

/*
 * What replica_apply reads of sync_apply's answer: one statement, a column
 * a path, so that SQLite parses the JSON once (json_extract keeps the parse
 * for the statement) -- a statement a path parsed it each time, 170 k
 * instructions a one-row round, a quarter of it.
 */
enum
{
	A_RESULT, A_SNAPSHOT, A_NUMBER, A_UPSERTS, A_DELETES, A_RETIRED, A_REFUSED, A_KEPT,
	A_BEGIN_ROWS, A_LET_GO, A_ROWS, A_GAP, A_NOTES, A_SET_ASIDE, A_SCHEMA_CHANGED, A_SCHEMA_LET_GO,
	A_DROPPED, A_WAITING, A_AGAIN, A_STATE_CLAIM, A_STATE_APPLIED, A_STATE_SNAPSHOT,
	A_FAILED					/* then 4 a failed statement: table, statement, error, rest_applied */
};
static const char *const answer_paths[A_FAILED] = {
	"$.result", "$.snapshot", "$.number", "$.upserts", "$.deletes", "$.retired", "$.refused", "$.kept",
	"$.begin_rows", "$.let_go", "$.rows", "$.gap", "$.notes", "$.set_aside", "$.schema.changed",
	"$.schema.let_go", "$.dropped", "$.waiting", "$.again", "$.state.claim", "$.state.applied",
	"$.state.snapshot"
};
static const char *const failed_paths[4] = {"table", "statement", "error", "rest_applied"};

/* answer_sql: the statement's text, of the paths above (constants: nothing spliced from outside) */
static char *
answer_sql(void)
{
	size_t		size = 64 + (A_FAILED + 16) * 64;
	char	   *sql = malloc(size);
	size_t		n;

	if (sql == NULL)
		return NULL;
	n = (size_t) snprintf(sql, size, "SELECT ");
	for (int i = 0; i < A_FAILED; i++)
		n += (size_t) snprintf(sql + n, size - n, "%sjson_extract(?1, '%s')", i ? ", " : "", answer_paths[i]);
	for (int i = 0; i < 4; i++)
		for (int k = 0; k < 4; k++)
			n += (size_t) snprintf(sql + n, size - n, ", json_extract(?1, '$.schema.failed[%d].%s')", i, failed_paths[k]);
	return sql;
}

/* what replica_filing_read reads of a filing's answer, in its order: one statement, one parse */
#define FILING_SQL "SELECT json_extract(?1, '$.filed'), json_extract(?1, '$.refused'), json_extract(?1, '$.dropped')," \
	" json_extract(?1, '$.waiting'), json_extract(?1, '$.set_aside'), json_extract(?1, '$.acknowledged')," \
	" json_extract(?1, '$.provisioning'), json_extract(?1, '$.reasons.dropped[0]')," \
	" json_extract(?1, '$.reasons.refused[0]')"

/*
 * stamped: whether the file is stamped with uuid already (true), not
 * stamped at all (false); an error when it is another replica's
 */
static bool
stamped(replica *r, const char *path, const char *uuid, bool *ok, char err[AGENT_ERROR_MAX])
{
	sqlite3_stmt *stmt = NULL;
	bool		yes = false;
	int			rc = sqlite3_prepare_v2(r->db, "SELECT json_extract(sync_status(), '$.replica')", -1, &stmt, NULL);

	*ok = false;
	if (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW)
	{
		const char *has = (const char *) sqlite3_column_text(stmt, 0);

		*ok = has == NULL || strcasecmp(has, uuid) == 0;
		yes = has != NULL;
		if (!*ok)
			snprintf(err, AGENT_ERROR_MAX, "%s is not replica %s's file: it is replica %s's", path, uuid, has);
	}
	else
		snprintf(err, AGENT_ERROR_MAX, "cannot read %s: %s", path, sqlite3_errmsg(r->db));
	sqlite3_finalize(stmt);
	return yes;
}

/* sync_init(uuid): the file is this replica's from now on */
static bool
stamp(replica *r, const char *path, const char *uuid, char err[AGENT_ERROR_MAX])
{
	sqlite3_stmt *stmt = NULL;
	int			rc = sqlite3_prepare_v2(r->db, "SELECT sync_init(?1)", -1, &stmt, NULL);

	if (rc == SQLITE_OK)
	{
		sqlite3_bind_text(stmt, 1, uuid, -1, SQLITE_STATIC);
		rc = sqlite3_step(stmt);
		rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
	}
	if (rc != SQLITE_OK)
		snprintf(err, AGENT_ERROR_MAX, "%s is not replica %s's file: %s", path, uuid,
				 sqlite3_errmsg(r->db));
	sqlite3_finalize(stmt);
	r->known = false;
	r->said_all = false;
	return rc == SQLITE_OK;
}

/*
 * open_file: opens (or creates) the replica file in WAL mode, locked for
 * this process, with the replica extension registered; tells the replica
 * its uuid (sync_init: an error when the file belongs to another replica),
 * or with later, only checks that it is not another's and leaves a file
 * not stamped yet to replica_stamp.  NULL, with the reason, when it cannot.
 */
static replica *
open_file(const char *path, const char *uuid, bool later, char err[AGENT_ERROR_MAX])
{
	replica    *r = calloc(1, sizeof *r);
	sqlite3_stmt *stmt = NULL;
	int			rc;
	bool		ok;

	if (r == NULL)
	{
		snprintf(err, AGENT_ERROR_MAX, "out of memory");
		return NULL;
	}
	r->lock = -1;
	if (!lock_file(r, path, err))
	{
		replica_close(r);
		return NULL;
	}
	/*
	 * One thread uses the file's one connection: no mutex around each call,
	 * and no memory statistics (a global mutex around each allocation);
	 * together 8 % of a snapshot's apply.  sqlite3_config only takes effect
	 * before SQLite is first used: later it changes nothing, harmlessly.
	 */
	(void) sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
	rc = sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot open %s: %s", path,
				 r->db ? sqlite3_errmsg(r->db) : sqlite3_errstr(rc));
		replica_close(r);
		return NULL;
	}
	sqlite3_busy_timeout(r->db, BUSY_TIMEOUT_MS);
	/* WAL: readers never wait for the agent, nor it for them */
	rc = sqlite3_prepare_v2(r->db, "PRAGMA journal_mode = WAL", -1, &stmt, NULL);
	if (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW &&
		strcmp((const char *) sqlite3_column_text(stmt, 0), "wal") != 0)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot open %s in WAL mode (journal mode %s)", path,
				 (const char *) sqlite3_column_text(stmt, 0));
		sqlite3_finalize(stmt);
		replica_close(r);
		return NULL;
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_finalize(stmt);
	else
		sqlite3_finalize(stmt);
	if (rc != SQLITE_OK)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot open %s: %s", path, sqlite3_errmsg(r->db));
		replica_close(r);
		return NULL;
	}

	if (later)
	{
		if (!stamped(r, path, uuid, &ok, err))
			snprintf(r->unstamped, sizeof r->unstamped, "%s", uuid);
		if (!ok)
		{
			replica_close(r);
			return NULL;
		}
	}
	else if (!stamp(r, path, uuid, err))
	{
		replica_close(r);
		return NULL;
	}

	rc = prepare(r, "SELECT sync_apply(?1)", &r->apply);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT sync_upload()", &r->upload);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT sync_upload(?1)", &r->upload_some);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT sync_upload(?1, ?2)", &r->upload_lane);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT json_extract(value, '$.lane') FROM json_each(sync_lanes()) ORDER BY key", &r->lanes);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT sync_upload_refused(?1, ?2, ?3, ?4)", &r->refused);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT t.key, a.key, json_extract(a.value, '$.reason'), json_extract(a.value, '$.sqlstate'),"
					 " p.key, p.value, json_extract(a.value, '$.since') FROM json_each(sync_progress()) t"
					 " JOIN json_each(t.value, '$.set_aside_rows') a"
					 " LEFT JOIN json_each(a.value, '$.key') p ORDER BY t.key, a.key, p.key", &r->aside);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT sync_retry('too large')", &r->retry_large);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT json_extract(s, '$.applied'), json_extract(s, '$.snapshot') IS NOT NULL,"
					 " sync_applied() FROM (SELECT sync_status() AS s)", &r->status);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT coalesce(sum(json_extract(value, '$.unsent')), 0),"
					 " coalesce(sum(json_extract(value, '$.unfiled')), 0),"
					 " coalesce(sum(json_extract(value, '$.set_aside')), 0),"
					 " coalesce(sum(json_extract(value, '$.refused')), 0)"
					 " FROM json_each(sync_progress())", &r->progress);
	if (rc == SQLITE_OK)
	{
		char	   *sql = answer_sql();

		rc = sql ? prepare(r, sql, &r->answer) : SQLITE_NOMEM;
		free(sql);
	}
	if (rc == SQLITE_OK)
		rc = prepare(r, FILING_SQL, &r->filing);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT json_extract(?1, ?2)", &r->json_int);
	if (rc == SQLITE_OK)
		rc = prepare(r, "SELECT json_extract(?1, ?2)", &r->json_text);
	if (rc == SQLITE_OK)
		rc = prepare(r, "PRAGMA data_version", &r->data_version);
	if (rc == SQLITE_OK)
		rc = prepare(r, "BEGIN IMMEDIATE", &r->begin);
	if (rc == SQLITE_OK)
		rc = prepare(r, "COMMIT", &r->commit);
	if (rc == SQLITE_OK)
		rc = prepare(r, "ROLLBACK", &r->rollback);
	/*
	 * the extension's own statements kept prepared between calls (kept.c):
	 * their parsing was half of what a one-row message cost; let go in
	 * replica_close, before the file closes
	 */
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(r->db, "SELECT sync_keep_statements(1)", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
	{
		rc = sqlite3_prepare_v2(r->db, "SELECT sync_config('max_message_bytes')", -1, &stmt, NULL);
		if (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
			r->max_message = sqlite3_column_int64(stmt, 0);
		sqlite3_finalize(stmt);
	}
	if (rc != SQLITE_OK)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot prepare the replica's statements: %s",
				 sqlite3_errmsg(r->db));
		replica_close(r);
		return NULL;
	}
	r->version = replica_data_version(r);
	return r;
}

replica *
replica_open(const char *path, const char *uuid, char err[AGENT_ERROR_MAX])
{
	return open_file(path, uuid, false, err);
}

replica *
replica_open_unstamped(const char *path, const char *uuid, char err[AGENT_ERROR_MAX])
{
	return open_file(path, uuid, true, err);
}

/* replica_stamp: the file not stamped yet is stamped now (the server knows the uuid) */
agent_status
replica_stamp(replica *r, char err[AGENT_ERROR_MAX])
{
	if (r->unstamped[0] == '\0')
		return STEP_OK;
	if (!stamp(r, sqlite3_db_filename(r->db, "main"), r->unstamped, err))
		return STEP_FAILED;
	r->unstamped[0] = '\0';
	return STEP_OK;
}

/*
 * replica_lazy: the online agent's commits wait for no fsync (synchronous =
 * NORMAL: the WAL is synced at checkpoints), so that a message shows in the
 * file as soon as it is applied; replica_sync then makes everything
 * committed durable before an upload leaves, the one place the server
 * learns what the file holds.  A crash of the machine can take back what
 * was applied since the last sync, never what was acknowledged: the replica
 * pulls it again (it claims no less than it acknowledged); and no upload
 * the server filed goes again under another's send number.
 */
agent_status
replica_lazy(replica *r, char err[AGENT_ERROR_MAX])
{
	char	   *msg = NULL;
	int			rc = sqlite3_exec(r->db, "PRAGMA synchronous = NORMAL", NULL, NULL, &msg);

	if (rc != SQLITE_OK)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot set the replica's synchronous mode: %s",
				 msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return STEP_FAILED;
	}
	r->lazy = true;
	return STEP_OK;
}

/* replica_sync: with replica_lazy, what was committed since the last sync made durable (one fdatasync) */
agent_status
replica_sync(replica *r, char err[AGENT_ERROR_MAX])
{
	sqlite3_file *wal = NULL;
	int			rc;

	if (!r->lazy || !r->unsynced)
		return STEP_OK;
	/* in WAL mode the journal is the write-ahead log, open while the connection is */
	rc = sqlite3_file_control(r->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
	if (rc == SQLITE_OK && wal != NULL && wal->pMethods != NULL)
		rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
	else if (rc == SQLITE_OK)
		rc = SQLITE_IOERR;
	if (rc != SQLITE_OK)
	{
		snprintf(err, AGENT_ERROR_MAX, "cannot sync the replica's write-ahead log: %s", sqlite3_errstr(rc));
		return STEP_BUSY;
	}
	r->unsynced = false;
	return STEP_OK;
}

void
replica_close(replica *r)
{
	if (r == NULL)
		return;
	sqlite3_finalize(r->apply);
	sqlite3_finalize(r->upload);
	sqlite3_finalize(r->upload_some);
	sqlite3_finalize(r->upload_lane);
	sqlite3_finalize(r->lanes);
	sqlite3_finalize(r->refused);
	sqlite3_finalize(r->aside);
	sqlite3_finalize(r->retry_large);
	sqlite3_finalize(r->status);
	sqlite3_finalize(r->progress);
	sqlite3_finalize(r->answer);
	sqlite3_finalize(r->filing);
	sqlite3_finalize(r->json_int);
	sqlite3_finalize(r->json_text);
	sqlite3_finalize(r->data_version);
	sqlite3_finalize(r->begin);
	sqlite3_finalize(r->commit);
	sqlite3_finalize(r->rollback);
	if (r->db)
	{
		/* kept statements would keep the connection open (sqlite3_close: SQLITE_BUSY) */
		(void) sqlite3_exec(r->db, "SELECT sync_keep_statements(0)", NULL, NULL, NULL);
		sqlite3_close(r->db);
	}
	/* the lock goes with its descriptor */
	if (r->lock >= 0)
		close(r->lock);
	free(r);
}

/*
 * replica_applied: the last message applied (sync_status), and whether a
 * snapshot is open; with claim, what the replica says of it (sync_applied(),
 * at most MS_APPLIED_MAX bytes), for sync.pull to check.  Asked of the
 * replica only when not known: the last apply's answer says all three
 * (sync_apply's "state", read in its transaction), and they hold while no
 * other connection writes the file (a host, an import: PRAGMA data_version
 * moves, read here before each use) and this one writes it only through
 * sync_apply, which says them again, and sync_upload, which never changes
 * them (an impossible state it writes back is the one they said already).
 * Two statements a round less: 85 k instructions of a one-row round's 468 k.
 */
agent_status
replica_applied(replica *r, int64_t *applied, bool *snapshot_open, uint8_t *claim, size_t *claim_len,
				char err[AGENT_ERROR_MAX])
{
	int64_t		version = replica_data_version(r);
	int			rc;
	int			n;

	if (!r->known || version != r->known_version)
	{
		rc = sqlite3_step(r->status);
		if (rc != SQLITE_ROW)
		{
			agent_status st = replica_fail(r, rc, "sync_status", err);

			sqlite3_reset(r->status);
			return st;
		}
		r->known_applied = sqlite3_column_int64(r->status, 0);
		r->known_open = sqlite3_column_int(r->status, 1) != 0;
		n = sqlite3_column_bytes(r->status, 2);
		r->known_claim_len = n > 0 && n <= MS_APPLIED_MAX ? (size_t) n : 0;
		if (r->known_claim_len > 0)
			memcpy(r->known_claim, sqlite3_column_blob(r->status, 2), r->known_claim_len);
		sqlite3_reset(r->status);
		/* read before: a write after it moves data_version past it */
		r->known_version = version;
		r->known = true;
	}
	*applied = r->known_applied;
	*snapshot_open = r->known_open;
	if (claim != NULL)
	{
		*claim_len = r->known_claim_len;
		memcpy(claim, r->known_claim, r->known_claim_len);
	}
	return STEP_OK;
}

static int
hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
		c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int64_t
replica_json_int(replica *r, const char *json, const char *path)
{
	int64_t		v = 0;

	sqlite3_bind_text(r->json_int, 1, json, -1, SQLITE_STATIC);
	sqlite3_bind_text(r->json_int, 2, path, -1, SQLITE_STATIC);
	if (sqlite3_step(r->json_int) == SQLITE_ROW)
		v = sqlite3_column_int64(r->json_int, 0);
	sqlite3_reset(r->json_int);
	sqlite3_clear_bindings(r->json_int);
	return v;
}

bool
replica_json_text(replica *r, const char *json, const char *path, char *out, size_t size)
{
	bool		found = false;

	out[0] = '\0';
	sqlite3_bind_text(r->json_text, 1, json, -1, SQLITE_STATIC);
	sqlite3_bind_text(r->json_text, 2, path, -1, SQLITE_STATIC);
	if (sqlite3_step(r->json_text) == SQLITE_ROW &&
		sqlite3_column_type(r->json_text, 0) != SQLITE_NULL)
	{
		snprintf(out, size, "%s", (const char *) sqlite3_column_text(r->json_text, 0));
		found = true;
	}
	sqlite3_reset(r->json_text);
	sqlite3_clear_bindings(r->json_text);
	return found;
}

/* column_text: column i of st as text, cut to size; whether it is not NULL */
static bool
column_text(sqlite3_stmt *st, int i, char *out, size_t size)
{
	out[0] = '\0';
	if (sqlite3_column_type(st, i) == SQLITE_NULL)
		return false;
	snprintf(out, size, "%s", (const char *) sqlite3_column_text(st, i));
	return true;
}

/*
 * replica_filing_read: what a filing's answer says, in one statement (the
 * JSON parsed once: a statement a path parsed it nine times, 63 k
 * instructions of the agent's 2.1 M a write); zeros and "" for what it
 * does not say
 */
void
replica_filing_read(replica *r, const char *json, filing_said *out)
{
	sqlite3_stmt *st = r->filing;

	memset(out, 0, sizeof *out);
	sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
	{
		out->filed = sqlite3_column_int64(st, 0);
		out->refused = sqlite3_column_int64(st, 1);
		out->dropped = sqlite3_column_int64(st, 2);
		out->waiting = sqlite3_column_int64(st, 3);
		out->set_aside = sqlite3_column_int64(st, 4);
		out->acknowledged = sqlite3_column_int64(st, 5);
		out->provisioning = sqlite3_column_int64(st, 6) != 0;
		column_text(st, 7, out->dropped_reason, sizeof out->dropped_reason);
		column_text(st, 8, out->refused_reason, sizeof out->refused_reason);
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/*
 * known_from: what sync_apply's answer says the replica now says of itself
 * ("state"), kept for replica_applied; version, data_version read before
 * the apply's transaction began.  Not kept when the answer says none.
 */
static void
known_from(replica *r, sqlite3_stmt *st, int64_t version)
{
	const char *hex = (const char *) sqlite3_column_text(st, A_STATE_CLAIM);
	size_t		n = hex ? strlen(hex) : 0;

	r->known = false;
	if (hex == NULL || n % 2 != 0 || n / 2 > MS_APPLIED_MAX)
		return;
	for (size_t i = 0; i < n / 2; i++)
	{
		int			hi = hex_digit(hex[2 * i]);
		int			lo = hex_digit(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return;
		r->known_claim[i] = (uint8_t) (hi << 4 | lo);
	}
	r->known_claim_len = n / 2;
	r->known_applied = sqlite3_column_int64(st, A_STATE_APPLIED);
	r->known_open = sqlite3_column_int64(st, A_STATE_SNAPSHOT) != 0;
	r->known_version = version;
	r->known = true;
}

/* answer_read: what sync_apply's JSON answer says, into out (and what the replica says of itself) */
static void
answer_read(replica *r, const char *json, int64_t version, apply_result *out)
{
	sqlite3_stmt *st = r->answer;

	sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_ROW)
	{
		r->known = false;
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		return;
	}
	known_from(r, st, version);
	column_text(st, A_RESULT, out->result, sizeof out->result);
	column_text(st, A_SNAPSHOT, out->snapshot, sizeof out->snapshot);
	out->number = sqlite3_column_int64(st, A_NUMBER);
	out->upserts = sqlite3_column_int64(st, A_UPSERTS);
	out->deletes = sqlite3_column_int64(st, A_DELETES);
	out->retired = sqlite3_column_int64(st, A_RETIRED);
	out->refused = sqlite3_column_int64(st, A_REFUSED);
	out->kept = sqlite3_column_int64(st, A_KEPT);
	out->begin_rows = sqlite3_column_int64(st, A_BEGIN_ROWS);
	out->let_go = sqlite3_column_int64(st, A_LET_GO);
	out->filed_rows = sqlite3_column_int64(st, A_ROWS);
	out->gap = sqlite3_column_int64(st, A_GAP);
	out->notes = sqlite3_column_int64(st, A_NOTES);
	out->set_aside = sqlite3_column_int64(st, A_SET_ASIDE);
	out->schema_changed = sqlite3_column_int64(st, A_SCHEMA_CHANGED);
	out->schema_let_go = sqlite3_column_int64(st, A_SCHEMA_LET_GO);
	out->schema_failed = 0;
	for (int i = 0; i < 4; i++)
	{
		int			c = A_FAILED + 4 * i;

		if (!column_text(st, c, out->failed[i].table, sizeof out->failed[i].table))
			break;
		out->schema_failed = i + 1;
		column_text(st, c + 1, out->failed[i].statement, sizeof out->failed[i].statement);
		column_text(st, c + 2, out->failed[i].error, sizeof out->failed[i].error);
		out->failed[i].rest_applied = sqlite3_column_int64(st, c + 3) != 0;
	}
	out->dropped = sqlite3_column_int64(st, A_DROPPED);
	out->waiting = sqlite3_column_int64(st, A_WAITING);
	out->again = sqlite3_column_int64(st, A_AGAIN);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/*
 * replica_apply: sync_apply of one message, in a transaction of its own;
 * what it said, read from its JSON result.
 */
agent_status
replica_apply(replica *r, const uint8_t *msg, size_t len, apply_result *out,
			  char err[AGENT_ERROR_MAX])
{
	int			rc;
	char	   *json;
	int64_t		version = r->seen;	/* data_version as last read: before this transaction */

	memset(out, 0, sizeof *out);
	rc = replica_begin(r, "sync_apply", err);
	if (rc != STEP_OK)
		return (agent_status) rc;
	sqlite3_bind_blob64(r->apply, 1, msg, len, SQLITE_STATIC);
	rc = sqlite3_step(r->apply);
	if (rc != SQLITE_ROW)
	{
		agent_status st = replica_fail(r, rc, "sync_apply", err);

		sqlite3_reset(r->apply);
		sqlite3_clear_bindings(r->apply);
		replica_rollback(r);
		return st;
	}
	json = strdup((const char *) sqlite3_column_text(r->apply, 0));
	sqlite3_reset(r->apply);
	sqlite3_clear_bindings(r->apply);
	rc = replica_commit(r, "sync_apply", err);
	if (rc != STEP_OK)
	{
		free(json);
		return (agent_status) rc;
	}
	if (json == NULL)
	{
		snprintf(err, AGENT_ERROR_MAX, "out of memory");
		return STEP_FAILED;
	}
	answer_read(r, json, version, out);
	free(json);
	return STEP_OK;
}

int64_t
replica_max_message_bytes(replica *r)
{
	return r->max_message > 0 ? r->max_message : 64 << 20;
}

/*
 * replica_written: whether another connection committed to the file since
 * the last call (PRAGMA data_version ignores this connection's own writes).
 */
bool
replica_written(replica *r)
{
	int64_t		v = replica_data_version(r);
	bool		changed = v != r->version;

	r->version = v;
	return changed;
}

/* replica_trusted: the server key the replica trusts (sync_trust_key()); *has whether one is pinned */
agent_status
replica_trusted(replica *r, uint8_t key[32], bool *has, char err[AGENT_ERROR_MAX])
{
	sqlite3_stmt *st = NULL;
	int			rc = sqlite3_prepare_v2(r->db, "SELECT sync_trust_key()", -1, &st, NULL);
	agent_status out = STEP_OK;

	*has = false;
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		out = replica_fail(r, rc, "sync_trust_key", err);
	else if (sqlite3_column_type(st, 0) == SQLITE_TEXT && sqlite3_column_bytes(st, 0) == 64)
	{
		const char *hex = (const char *) sqlite3_column_text(st, 0);

		for (int i = 0; i < 32; i++)
		{
			unsigned	v;

			sscanf(hex + 2 * i, "%2x", &v);
			key[i] = (uint8_t) v;
		}
		*has = true;
	}
	sqlite3_finalize(st);
	return out;
}

/* replica_trust: pin the server key (sync_trust_key), in place of another when replace */
agent_status
replica_trust(replica *r, const uint8_t key[32], bool replace, char err[AGENT_ERROR_MAX])
{
	sqlite3_stmt *st = NULL;
	int			rc = sqlite3_prepare_v2(r->db, replace ? "SELECT sync_trust_key(?1, 'replace')" :
										"SELECT sync_trust_key(?1)", -1, &st, NULL);
	agent_status out = STEP_OK;

	if (rc == SQLITE_OK)
	{
		sqlite3_bind_blob(st, 1, key, 32, SQLITE_STATIC);
		rc = sqlite3_step(st);
	}
	if (rc != SQLITE_ROW)
		out = replica_fail(r, rc, "sync_trust_key", err);
	sqlite3_finalize(st);
	r->known = false;
	r->said_all = false;
	return out;
}

/* replica_verify: whether a message's signature verifies under the key pinned (sync_verify); why not in why */
agent_status
replica_verify(replica *r, const uint8_t *msg, size_t len, bool *ok, char *why, size_t size,
			   char err[AGENT_ERROR_MAX])
{
	sqlite3_stmt *st = NULL;
	int			rc = sqlite3_prepare_v2(r->db, "SELECT sync_verify(?1)", -1, &st, NULL);
	agent_status out = STEP_OK;

	*ok = false;
	if (rc == SQLITE_OK)
	{
		sqlite3_bind_blob(st, 1, msg, (int) len, SQLITE_STATIC);
		rc = sqlite3_step(st);
	}
	if (rc != SQLITE_ROW)
		out = replica_fail(r, rc, "sync_verify", err);
	else if (sqlite3_column_type(st, 0) == SQLITE_NULL)
		*ok = true;
	else
		snprintf(why, size, "%s", (const char *) sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return out;
}
