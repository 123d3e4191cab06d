/*-------------------------------------------------------------------------
 * pulls.c
 *	  Where the agent pulls from: the hot standbys named by --pull, in
 *	  turn, and the primary (--server) when none answers.
 *
 * A standby of the primary's streaming replication serves sync.pull
 * read-only (src/pg/transport/pull.c): the messages and the answers written
 * on the primary, as far as it has replayed them.  One that lags only
 * delays: the replica applies a message only if it follows the last one it
 * applied, of its epoch, of a generation no older than it follows.  Uploads
 * and acknowledgements always go to the primary (main.c).
 *
 * Some pulls go to the primary all the same, because only it checks what
 * the replica claims and counts what it is sent: the first one after the
 * agent starts (a file restored from an older copy, or blank, is provisioned
 * again there), one every CLAIMS_EVERY_MS, and the ones after a message
 * failed to apply (the primary counts a send that keeps failing).
 *
 * A standby that fails (it cannot be reached, or its connection broke) is
 * left for the next one, then for the primary; the first is tried again
 * after RETRY_FIRST_MS.
 *-------------------------------------------------------------------------
 */
#include "agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLAIMS_EVERY_MS (10 * 60 * 1000)
#define RETRY_FIRST_MS 30000

struct pulls
{
	const char *const *standbys;	/* --pull, in the order given */
	int			n;
	int			at;				/* the standby pulled from; n: the primary */
	server	   *conn;			/* its connection, when open */
	int64_t		failed_at;		/* when `at` moved past the first */
	int64_t		claimed_at;		/* the last pull from the primary */
	bool		primary_next;	/* the next pull goes to the primary */
};

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

pulls *
pulls_new(const char *const *standbys, int n)
{
	pulls	   *p = calloc(1, sizeof *p);

	if (p == NULL)
		return NULL;
	p->standbys = standbys;
	p->n = n;
	p->primary_next = true;		/* the first pull: the primary checks the claim */
	return p;
}

void
pulls_free(pulls *p)
{
	if (p == NULL)
		return;
	server_close(p->conn);
	free(p);
}

/*
 * pulls_conn: the connection the next pull goes to: a standby's (connected
 * now if need be, the next one when it cannot be), else the primary's.
 * *standby says which.
 */
server *
pulls_conn(pulls *p, server *primary, bool *standby)
{
	char		err[AGENT_ERROR_MAX];

	*standby = false;
	if (p->n == 0)
		return primary;
	if (p->primary_next || mono_ms() - p->claimed_at >= CLAIMS_EVERY_MS)
	{
		p->primary_next = false;
		p->claimed_at = mono_ms();
		return primary;
	}
	if (p->at > 0 && mono_ms() - p->failed_at >= RETRY_FIRST_MS)
	{
		server_close(p->conn);
		p->conn = NULL;
		p->at = 0;
	}
	while (p->at < p->n && p->conn == NULL)
	{
		agent_status st = server_connect(&p->conn, p->standbys[p->at], err);

		if (st == STEP_OK)
			break;
		report_error("a standby to pull from cannot be reached (the next one pulls)", err, 0);
		pulls_failed(p);
	}
	if (p->conn == NULL)
		return primary;
	*standby = true;
	return p->conn;
}

/* pulls_failed: the standby pulled from failed: the next one, or the primary */
void
pulls_failed(pulls *p)
{
	server_close(p->conn);
	p->conn = NULL;
	if (p->at < p->n)
	{
		if (p->at == 0)
			p->failed_at = mono_ms();
		p->at++;
	}
}

/* pulls_primary_next: the next pull goes to the primary (a message failed to apply) */
void
pulls_primary_next(pulls *p)
{
	p->primary_next = true;
}
