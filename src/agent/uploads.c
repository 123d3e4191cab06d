/*-------------------------------------------------------------------------
 * uploads.c
 *	  A pass's uploads: filing each (sync.file), lanes in turn, and
 *	  narrowing down an upload the server refuses for good until the row
 *	  to blame is alone.
 *-------------------------------------------------------------------------
 */
#include "loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "upanswer.h"
#include "wire.h"

#define UPLOADS_PER_PASS 1000
#define BOUND_EVERY_MS 5000		/* the server's upload bound, looked at again after */

/*
 * file: sync.file of one upload.  An upload stamps what it carries in the
 * replica as sent; one whose filing failed for the infrastructure (the
 * connection broke, before or after the server committed it) is kept and
 * filed again, the same bytes, before anything else: the server files an
 * upload once however often it comes, and the replica is spared waiting
 * resend_after for rows it sent into a broken connection.  One the server
 * refused for good is the caller's still (STEP_FAILED, its SQLSTATE in
 * sqlstate): refused() narrows it down.
 */
static agent_status
file(agent *a, uint8_t *up, size_t len, round_stats *st, char sqlstate[6], char err[AGENT_ERROR_MAX])
{
	agent_status rc;
	filing_said said;

	/* what it acknowledges and what it stamped sent are durable before the server hears of them */
	rc = replica_sync(a->rep, err);
	if (rc != STEP_OK)
	{
		if (a->unfiled != up)
		{
			free(a->unfiled);
			a->unfiled = up;
			a->unfiled_len = len;
		}
		return rc;
	}
	rc = server_file(a->srv, a->uuid_bytes, up, len, a->answer, sizeof a->answer, sqlstate, err);

	if (rc == STEP_TRANSIENT)
	{
		if (a->unfiled != up)
		{
			free(a->unfiled);
			a->unfiled = up;
			a->unfiled_len = len;
		}
		return rc;
	}
	if (a->unfiled == up)
		a->unfiled = NULL;
	if (rc == STEP_FAILED)
		return rc;
	if (rc == STEP_OK && ms_up_answer_awaited(up, len))
		st->awaited++;
	free(up);
	if (rc != STEP_OK)
		return rc;
	st->uploads++;
	replica_filing_read(a->rep, a->answer, &said);
	st->filed += said.filed;
	st->server_refused += said.refused;
	st->dropped += said.dropped;
	st->waiting += said.waiting;
	st->set_aside += said.set_aside;
	if (st->dropped_reason[0] == '\0')
		snprintf(st->dropped_reason, sizeof st->dropped_reason, "%s", said.dropped_reason);
	if (st->refused_reason[0] == '\0')
		snprintf(st->refused_reason, sizeof st->refused_reason, "%s", said.refused_reason);
	if (said.acknowledged > st->acknowledged)
		st->acknowledged = said.acknowledged;
	/* what the last filing of the round says: acknowledgements mid-snapshot say so too */
	st->provisioning = said.provisioning;
	return STEP_OK;
}

/* rows_in: the rows (upserts and deletes) an upload of the replica's carries */
static int64_t
rows_in(const uint8_t *up, size_t len)
{
	ms_wire_status status;
	char		reason[MS_REASON_MAX];
	Sync__Up   *u = ms_up_decode(up, len, (size_t) 1 << 30, NULL, &status, reason);
	int64_t		n = 0;

	if (u == NULL)
		return 0;
	for (size_t i = 0; i < u->n_rows; i++)
		n += (int64_t) (u->rows[i]->n_upserts + u->rows[i]->n_deletes);
	sync__up__free_unpacked(u, NULL);
	return n;
}

/* lane_of: the lane of an upload ("" the first, or when it does not decode) */
static void
lane_of(const uint8_t *up, size_t len, char lane[AGENT_LANE_BYTES])
{
	ms_wire_status status;
	char		reason[MS_REASON_MAX];
	Sync__Up   *u = ms_up_decode(up, len, (size_t) 1 << 30, NULL, &status, reason);

	snprintf(lane, AGENT_LANE_BYTES, "%s", u != NULL && u->lane != NULL ? u->lane : "");
	if (u != NULL)
		sync__up__free_unpacked(u, NULL);
}

void
narrowing_ends(narrowing *n)
{
	free(n->suspect);
	n->suspect = NULL;
	n->limit = -1;
	n->took = false;
}

/* blame: the one row of a refused upload is set aside, counted in the backlog */
static agent_status
blame(agent *a, const uint8_t *up, size_t len, round_stats *st, char err[AGENT_ERROR_MAX])
{
	int64_t		rows = 0;
	agent_status rc = replica_upload_refused(a->rep, up, len, a->narrow.reason, a->narrow.sqlstate, true, &rows, err);

	st->blamed += rows;
	if (st->blamed_reason[0] == '\0')
		snprintf(st->blamed_reason, sizeof st->blamed_reason, "%.*s", (int) sizeof st->blamed_reason - 1,
				 a->narrow.reason);
	return rc;
}

/*
 * refused: the server refused an upload for good.  Its rows go again, half
 * as many at a time; a row alone that the server refuses is blamed -- set
 * aside, counted in the backlog -- only once the server took some other
 * upload meanwhile, or else took the control, an upload with no rows at
 * all: a server or transport that refuses everything sets nothing aside,
 * and the agent backs off (STEP_FAILED).  STEP_OK: go on uploading.
 */
static agent_status
refused(agent *a, uint8_t *up, size_t len, const char *sqlstate, round_stats *st, char err[AGENT_ERROR_MAX])
{
	narrowing  *n = &a->narrow;
	int64_t		rows = rows_in(up, len);
	int64_t		again = 0;
	char		ignored[AGENT_ERROR_MAX];
	agent_status rc = STEP_OK;

	if (n->limit < 0)
		lane_of(up, len, n->lane);
	if (n->suspect == NULL)
	{
		snprintf(n->reason, sizeof n->reason, "%s%.*s",
				 strcmp(sqlstate, "54000") == 0 ? "too large for the server: " : "refused by the server for good: ",
				 AGENT_ERROR_MAX, err);
		snprintf(n->sqlstate, sizeof n->sqlstate, "%s", sqlstate);
	}
	if (n->suspect != NULL || rows == 0)
	{
		/* the control, or an upload without rows, refused: nothing is to blame but the server */
		if (n->suspect)
			replica_upload_refused(a->rep, n->suspect, n->suspect_len, n->reason, NULL, false, &again, ignored);
		if (rows > 0)
			replica_upload_refused(a->rep, up, len, n->reason, NULL, false, &again, ignored);
		free(up);
		narrowing_ends(n);
		return STEP_FAILED;
	}
	st->narrowed++;
	if (rows == 1 && n->took)
	{
		rc = blame(a, up, len, st, err);
		free(up);
		narrowing_ends(n);
		return rc;
	}
	if (rows == 1)
	{
		/* kept, until the control says whether the server takes anything */
		n->suspect = up;
		n->suspect_len = len;
		n->limit = 0;
		return STEP_OK;
	}
	rc = replica_upload_refused(a->rep, up, len, n->reason, NULL, false, &again, err);
	free(up);
	n->limit = rows / 2;
	return rc;
}

/* took: the server took an upload; while narrowing, a kept row alone is now to blame */
static agent_status
took(agent *a, round_stats *st, char err[AGENT_ERROR_MAX])
{
	narrowing  *n = &a->narrow;
	agent_status rc = STEP_OK;

	if (n->limit < 0)
		return STEP_OK;
	n->took = true;
	if (n->suspect)
	{
		rc = blame(a, n->suspect, n->suspect_len, st, err);
		narrowing_ends(n);
	}
	return rc;
}

/*
 * next_lane: the lane whose turn it is, after *turn, that has not said all
 * it has this pass; -1 when none has more.  While narrowing, only the lane
 * narrowed down uploads.
 */
static int
next_lane(agent *a, char lanes[][AGENT_LANE_BYTES], int n, const bool *done, int *turn)
{
	if (a->narrow.limit >= 0)
	{
		for (int l = 0; l < n; l++)
			if (strcmp(lanes[l], a->narrow.lane) == 0 && !done[l])
				return l;
		/* its lane is gone (its tables moved): nothing left of it to narrow */
		narrowing_ends(&a->narrow);
	}
	for (int k = 0; k < n; k++)
	{
		int			l = (*turn + k) % n;

		if (!done[l])
		{
			*turn = (l + 1) % n;
			return l;
		}
	}
	return -1;
}

/*
 * bound: the server's upload bound, looked at before a round's first upload
 * -- not before its first pull, which a notification is waiting on -- and
 * at most every BOUND_EVERY_MS: a busy replica's rounds follow each other
 * by milliseconds, each a round trip more for a setting that seldom
 * changes.  Rows set aside as too large go up again when it changes (and
 * when the agent starts).
 */
static void
bound(agent *a)
{
	int64_t		now;
	char		err[AGENT_ERROR_MAX];

	if (a->bound_looked || (a->bound >= 0 && agent_mono_ms() - a->bound_at < BOUND_EVERY_MS))
		return;
	now = server_upload_bound(a->srv);
	if (a->bound >= 0 && now != a->bound)
		replica_retry_too_large(a->rep, err);
	a->bound = now;
	a->bound_at = agent_mono_ms();
	a->bound_looked = true;
}

/*
 * uploads: the upload kept from a broken connection, then every upload the
 * replica has, a lane at a time in turn (docs/protocol.md 7.2): a busy lane
 * takes one upload's turn, then the next lane its, so it never keeps
 * another's rows waiting, nor they its.  One the server refuses for good is
 * narrowed down; a lane the server takes nothing of (its control refused
 * too) is asked no more this pass, and the other lanes go on: the pass
 * fails (STEP_FAILED, the agent backs off) once they have had their turns.
 */
agent_status
uploads(agent *a, round_stats *st, char err[AGENT_ERROR_MAX])
{
	agent_status rc;
	char		sqlstate[6];
	char		(*lanes)[AGENT_LANE_BYTES] = a->lanes;
	bool		done[AGENT_LANES_MAX] = {false};
	bool		refused_whole[AGENT_LANES_MAX] = {false};	/* the server takes nothing of it: asked no more */
	char		failure[AGENT_ERROR_MAX] = "";
	bool		failed = false;
	int			nlanes = 0;
	int			turn = 0;

	bound(a);
	if (!a->lanes_read)
	{
		rc = replica_lanes(a->rep, a->lanes, AGENT_LANES_MAX, &a->nlanes, err);
		if (rc != STEP_OK)
			return rc;
		a->lanes_read = true;
	}
	nlanes = a->nlanes;
	for (int i = 0; i < UPLOADS_PER_PASS && !stop_signal; i++)
	{
		uint8_t    *up = a->unfiled;
		size_t		len = a->unfiled_len;
		int			l = -1;
		bool		all;

		if (up == NULL)
		{
			l = next_lane(a, lanes, nlanes, done, &turn);
			if (l < 0)
				break;
			rc = replica_upload_lane(a->rep, lanes[l], a->narrow.limit, &up, &len, err);
			if (rc != STEP_OK)
				return rc;
			if (up == NULL)
			{
				/* nothing more to say: what was refused went through, half at a time */
				if (a->narrow.limit >= 0)
					narrowing_ends(&a->narrow);
				done[l] = true;
				continue;
			}
		}
		/* a lane said something: the others are asked again in turn, so a busy one never keeps them waiting */
		memcpy(done, refused_whole, sizeof done);
		/* made just now, whole (not narrowed), saying all: once filed, asked again only after a write */
		all = l >= 0 && lanes[l][0] == '\0' && a->narrow.limit < 0 && replica_says_all(up, len);
		rc = file(a, up, len, st, sqlstate, err);
		if (rc == STEP_TRANSIENT && strcmp(sqlstate, "55P03") == 0)
		{
			/*
			 * The relay is recording what the replica's snapshot carries
			 * (ack.c): the upload is kept and filed again shortly, the
			 * connection kept, and the snapshot pulled meanwhile.
			 */
			a->file_soon = true;
			break;
		}
		if (rc == STEP_FAILED)
		{
			rc = refused(a, up, len, sqlstate, st, err);
			if (rc == STEP_FAILED && l >= 0 && nlanes > 1)
			{
				/* nothing to blame but the server, for this lane: the others still have their turns */
				refused_whole[l] = done[l] = true;
				if (!failed)
					snprintf(failure, sizeof failure, "%s", err);
				failed = true;
				continue;
			}
		}
		else if (rc == STEP_OK)
		{
			rc = took(a, st, err);
			if (all)
				replica_said_all(a->rep);
		}
		if (rc != STEP_OK)
			return rc;
	}
	if (failed)
	{
		snprintf(err, AGENT_ERROR_MAX, "%s", failure);
		return STEP_FAILED;
	}
	return STEP_OK;
}
