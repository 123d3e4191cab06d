/*-------------------------------------------------------------------------
 * replica_up.c
 *	  The agent's SQLite side, what goes up: the replica's uploads
 *	  (sync_upload, a lane's, of at most some rows), its lanes, an upload
 *	  the server refused (sync_upload_refused), the rows set aside, the
 *	  backlog.
 *-------------------------------------------------------------------------
 */
#include "replica.h"

#include "wire.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * replica_upload: the next upload (sync_upload), or *up NULL: nothing to
 * say; with max_rows >= 0, of at most that many rows (sync_upload(max_rows):
 * narrowing down an upload the server refused).
 */
agent_status
replica_upload(replica *r, int64_t max_rows, uint8_t **up, size_t *len, char err[AGENT_ERROR_MAX])
{
	return replica_upload_lane(r, "", max_rows, up, len, err);
}

agent_status
replica_upload_lane(replica *r, const char *lane, int64_t max_rows, uint8_t **up, size_t *len,
					char err[AGENT_ERROR_MAX])
{
	sqlite3_stmt *st = lane[0] != '\0' ? r->upload_lane : max_rows >= 0 ? r->upload_some : r->upload;
	int			rc;
	/* sync_upload never changes what sync_status and sync_applied() say (replica_applied): kept across it */
	bool		known = r->known;

	*up = NULL;
	*len = 0;
	/* the last upload said all, and nothing wrote the file since: sync_upload would say nothing */
	if (r->said_all && lane[0] == '\0' && max_rows < 0 && replica_data_version(r) == r->said_version)
		return STEP_OK;
	rc = replica_begin(r, "sync_upload", err);
	if (rc != STEP_OK)
		return (agent_status) rc;
	/*
	 * read in the transaction, which holds the write lock: no other commit
	 * comes in before the upload is made, and the file's lock is taken
	 * once (outside one, the read takes and lets go of a read lock)
	 */
	r->upload_version = replica_data_version(r);
	if (lane[0] != '\0')
	{
		if (max_rows >= 0)
			sqlite3_bind_int64(st, 1, max_rows);
		else
			sqlite3_bind_null(st, 1);
		sqlite3_bind_text(st, 2, lane, -1, SQLITE_TRANSIENT);
	}
	else if (max_rows >= 0)
		sqlite3_bind_int64(st, 1, max_rows);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
	{
		agent_status status = replica_fail(r, rc, "sync_upload", err);

		sqlite3_reset(st);
		replica_rollback(r);
		return status;
	}
	if (sqlite3_column_type(st, 0) != SQLITE_NULL)
	{
		const void *blob = sqlite3_column_blob(st, 0);
		int			n = sqlite3_column_bytes(st, 0);

		*up = malloc(n > 0 ? (size_t) n : 1);
		if (*up == NULL)
		{
			sqlite3_reset(st);
			replica_rollback(r);
			snprintf(err, AGENT_ERROR_MAX, "out of memory");
			return STEP_FAILED;
		}
		memcpy(*up, blob, (size_t) n);
		*len = (size_t) n;
	}
	sqlite3_reset(st);
	rc = replica_commit(r, "sync_upload", err);
	if (rc != STEP_OK)
	{
		free(*up);
		*up = NULL;
		*len = 0;
	}
	else
		r->known = known;
	return (agent_status) rc;
}

/*
 * replica_lanes: the lanes the replica uploads in (sync_lanes()), the first
 * ("") first; at most max of them, each cut at AGENT_LANE_BYTES.
 */
agent_status
replica_lanes(replica *r, char lanes[][AGENT_LANE_BYTES], int max, int *n, char err[AGENT_ERROR_MAX])
{
	int			rc;

	*n = 0;
	while ((rc = sqlite3_step(r->lanes)) == SQLITE_ROW)
	{
		const char *lane = (const char *) sqlite3_column_text(r->lanes, 0);

		if (*n < max)
			snprintf(lanes[(*n)++], AGENT_LANE_BYTES, "%s", lane ? lane : "");
	}
	sqlite3_reset(r->lanes);
	if (rc != SQLITE_DONE)
		return replica_fail(r, rc, "sync_lanes", err);
	if (*n == 0)
		snprintf(lanes[(*n)++], AGENT_LANE_BYTES, "%s", "");
	return STEP_OK;
}

/*
 * replica_says_all: whether an upload says nothing that sync_upload could say
 * again at once or later without a write: no rows, refusals, digests,
 * wishes' fates or range answers, no gap, and nothing in any table's
 * backlog (rows unsent, unfiled, set aside or refused: some of those go
 * again with time).  What it says then is the last message applied, as
 * the next upload would until a message is applied (a write).
 */
bool
replica_says_all(const uint8_t *up, size_t len)
{
	ms_wire_status status;
	char		reason[MS_REASON_MAX];
	Sync__Up   *u = ms_up_decode(up, len, len, NULL, &status, reason);
	bool		all;

	if (u == NULL)
		return false;
	all = u->n_rows == 0 && u->n_refusals == 0 && u->n_digests == 0 && u->n_wish_fates == 0 &&
		u->n_ranges == 0 && u->gap == 0 && (u->lane == NULL || u->lane[0] == '\0');
	for (size_t i = 0; all && i < u->n_backlog; i++)
	{
		Sync__Backlog *b = u->backlog[i];

		all = b->unsent == 0 && b->unfiled == 0 && b->set_aside == 0 && b->refused == 0 && b->n_aside == 0;
	}
	sync__up__free_unpacked(u, NULL);
	return all;
}

void
replica_said_all(replica *r)
{
	r->said_all = true;
	r->said_version = r->upload_version;
}

void
replica_said_forget(replica *r)
{
	r->said_all = false;
}

/*
 * replica_upload_refused: the server refused an upload for good: its rows
 * go again at once, or, blamed, are set aside with the reason
 * (sync_upload_refused); how many in *rows.
 */
agent_status
replica_upload_refused(replica *r, const uint8_t *up, size_t len, const char *reason, const char *sqlstate,
					   bool blame, int64_t *rows, char err[AGENT_ERROR_MAX])
{
	int			rc = replica_begin(r, "sync_upload_refused", err);

	*rows = 0;
	if (rc != STEP_OK)
		return (agent_status) rc;
	sqlite3_bind_blob64(r->refused, 1, up, len, SQLITE_STATIC);
	sqlite3_bind_text(r->refused, 2, reason, -1, SQLITE_STATIC);
	sqlite3_bind_int(r->refused, 3, blame ? 1 : 0);
	if (sqlstate != NULL && sqlstate[0] != '\0')
		sqlite3_bind_text(r->refused, 4, sqlstate, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(r->refused, 4);
	rc = sqlite3_step(r->refused);
	if (rc != SQLITE_ROW)
	{
		agent_status status = replica_fail(r, rc, "sync_upload_refused", err);

		sqlite3_reset(r->refused);
		sqlite3_clear_bindings(r->refused);
		replica_rollback(r);
		return status;
	}
	{
		char	   *json = strdup((const char *) sqlite3_column_text(r->refused, 0));

		sqlite3_reset(r->refused);
		sqlite3_clear_bindings(r->refused);
		rc = replica_commit(r, "sync_upload_refused", err);
		if (json != NULL && rc == STEP_OK)
			*rows = replica_json_int(r, json, "$.rows");
		free(json);
	}
	return (agent_status) rc;
}

/* fnv: FNV-1a of n bytes, on from h */
static uint64_t
fnv(uint64_t h, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
	{
		h ^= (unsigned char) p[i];
		h *= UINT64_C(1099511628211);
	}
	return h;
}

/* column i as text, cut to fit out ("" when NULL) */
static void
column_text(sqlite3_stmt *st, int i, char *out, size_t size)
{
	const char *v = (const char *) sqlite3_column_text(st, i);

	snprintf(out, size, "%s", v ? v : "");
}

/*
 * replica_set_aside: the rows set aside sync_progress() lists (per table
 * the newest), at most max; a row's id hashes its table, since when, and
 * its key whole
 */
agent_status
replica_set_aside(replica *r, aside_row *rows, int max, int *n, char err[AGENT_ERROR_MAX])
{
	int			rc;
	char		table[128] = "";
	int64_t		row = -1;

	*n = 0;
	while ((rc = sqlite3_step(r->aside)) == SQLITE_ROW)
	{
		aside_row  *a;
		const char *t = (const char *) sqlite3_column_text(r->aside, 0);
		int64_t		at = sqlite3_column_int64(r->aside, 1);
		const char *part = (const char *) sqlite3_column_text(r->aside, 5);

		if (t == NULL)
			continue;
		if (*n == 0 || at != row || strcmp(t, table) != 0)
		{
			/* a row begins */
			if (*n == max)
				break;
			a = &rows[(*n)++];
			memset(a, 0, sizeof *a);
			snprintf(table, sizeof table, "%s", t);
			row = at;
			column_text(r->aside, 0, a->table, sizeof a->table);
			column_text(r->aside, 2, a->reason, sizeof a->reason);
			column_text(r->aside, 3, a->sqlstate, sizeof a->sqlstate);
			/* since when: a row set aside again is told again */
			a->id = fnv(UINT64_C(14695981039346656037), t, strlen(t) + 1);
			a->id = fnv(a->id, (const char *) sqlite3_column_blob(r->aside, 6),
						(size_t) sqlite3_column_bytes(r->aside, 6));
		}
		a = &rows[*n - 1];
		if (sqlite3_column_type(r->aside, 4) == SQLITE_NULL)
			continue;			/* a key not said */
		a->id = fnv(a->id, part ? part : "", part ? strlen(part) + 1 : 0);
		if (a->nparts < AGENT_ASIDE_PARTS)
			column_text(r->aside, 5, a->parts[a->nparts++], sizeof a->parts[0]);
		else
			a->more_parts = true;
	}
	sqlite3_reset(r->aside);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return replica_fail(r, rc, "sync_progress", err);
	return STEP_OK;
}

/* replica_retry_too_large: rows set aside as too large go up again (sync_retry('too large')) */
agent_status
replica_retry_too_large(replica *r, char err[AGENT_ERROR_MAX])
{
	int			rc = replica_begin(r, "sync_retry", err);

	if (rc != STEP_OK)
		return (agent_status) rc;
	rc = sqlite3_step(r->retry_large);
	sqlite3_reset(r->retry_large);
	if (rc != SQLITE_ROW)
	{
		agent_status status = replica_fail(r, rc, "sync_retry", err);

		replica_rollback(r);
		return status;
	}
	return (agent_status) replica_commit(r, "sync_retry", err);
}

/* replica_backlog: sync_progress() summed over the replica's tables */
agent_status
replica_backlog(replica *r, backlog *out, char err[AGENT_ERROR_MAX])
{
	int			rc = sqlite3_step(r->progress);

	memset(out, 0, sizeof *out);
	if (rc != SQLITE_ROW)
	{
		agent_status st = replica_fail(r, rc, "sync_progress", err);

		sqlite3_reset(r->progress);
		return st;
	}
	out->unsent = sqlite3_column_int64(r->progress, 0);
	out->unfiled = sqlite3_column_int64(r->progress, 1);
	out->set_aside = sqlite3_column_int64(r->progress, 2);
	out->refused = sqlite3_column_int64(r->progress, 3);
	sqlite3_reset(r->progress);
	return STEP_OK;
}

