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
	sqlite3_stmt *json_int;
	sqlite3_stmt *json_text;
	sqlite3_stmt *data_version;
	sqlite3_stmt *begin;
	sqlite3_stmt *commit;
	sqlite3_stmt *rollback;
	int64_t		version;		/* PRAGMA data_version when last looked at */
	int64_t		max_message;
	int			lock;			/* FILE-agent.lock, flock'd while the file is open; -1: none */
	char		unstamped[37];	/* the uuid replica_stamp gives the file; "": stamped already */
	bool		lazy;			/* commits wait for no fsync: replica_sync before anything leaves */
	bool		unsynced;		/* committed since the last fsync (lazy) */
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

#endif							/* MS_AGENT_REPLICA_H */
