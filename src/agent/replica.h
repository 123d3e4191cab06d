/*-------------------------------------------------------------------------
 * replica.h
 *	  What replica.c and replica_up.c share: the replica file as it is
 *	  open, its statements prepared once.
 *-------------------------------------------------------------------------
 */
#ifndef MS_AGENT_REPLICA_H
#define MS_AGENT_REPLICA_H

#include <sqlite3.h>

#include "agent.h"
#include "wire.h"

struct replica
{
	sqlite3    *db;
	sqlite3_stmt *apply;
	sqlite3_stmt *upload;
	sqlite3_stmt *upload_some;	/* sync_upload(max_rows): narrowing down a refusal */
	sqlite3_stmt *upload_lane;	/* sync_upload(max_rows or NULL, lane): another lane's */
	sqlite3_stmt *lanes;		/* sync_lanes(): the lanes to upload, the first first */
	sqlite3_stmt *refused;		/* sync_upload_refused(upload, reason, blame, sqlstate) */
	sqlite3_stmt *aside;		/* the rows set aside sync_progress() lists, a key part a row */
	sqlite3_stmt *retry_large;	/* sync_retry('too large') */
	sqlite3_stmt *status;
	sqlite3_stmt *progress;
	sqlite3_stmt *answer;		/* sync_apply's answer read: a column a path */
	sqlite3_stmt *filing;		/* sync.file's answer read, the same way */
	sqlite3_stmt *json_int;
	sqlite3_stmt *json_text;
	sqlite3_stmt *data_version;
	sqlite3_stmt *begin;
	sqlite3_stmt *commit;
	sqlite3_stmt *rollback;
	int64_t		version;		/* PRAGMA data_version when replica_written last looked */
	int64_t		seen;			/* PRAGMA data_version when anything last looked */
	/*
	 * What sync_status and sync_applied() say, as the last apply's answer
	 * (or their own call) said it, while known: the file has been written
	 * by no other connection since data_version was `known_version`, and
	 * by this one only through sync_apply and sync_upload (replica_applied).
	 */
	bool		known;
	bool		known_open;
	int64_t		known_applied;
	int64_t		known_version;
	size_t		known_claim_len;
	uint8_t		known_claim[MS_APPLIED_MAX];
	int64_t		max_message;
	int			lock;			/* FILE-agent.lock, flock'd while the file is open; -1: none */
	char		unstamped[37];	/* the uuid replica_stamp gives the file; "": stamped already */
	bool		lazy;			/* commits wait for no fsync: replica_sync before anything leaves */
	bool		unsynced;		/* committed since the last fsync (lazy) */
	/*
	 * The last upload said all the replica had to say (replica_said_all),
	 * and nothing wrote the file since: no write of this connection's
	 * (replica_begin, stamp and trust forget it) nor another's (data_version
	 * still said_version, read before that upload's transaction).
	 */
	bool		said_all;
	int64_t		said_version;
	int64_t		upload_version;	/* data_version in the last upload's transaction */
};

/*
 * replica_fail: an SQLite error as a step's outcome, said in err;
 * replica_begin / replica_commit: the agent's write transaction (BEGIN
 * IMMEDIATE), a commit that fails rolled back; replica_rollback: whatever
 * is open.
 */
extern agent_status replica_fail(replica *r, int rc, const char *what, char err[AGENT_ERROR_MAX]);
extern int	replica_begin(replica *r, const char *what, char err[AGENT_ERROR_MAX]);
extern int	replica_commit(replica *r, const char *what, char err[AGENT_ERROR_MAX]);
extern void replica_rollback(replica *r);
extern int64_t replica_data_version(replica *r);

#endif							/* MS_AGENT_REPLICA_H */
