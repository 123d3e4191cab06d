/*-------------------------------------------------------------------------
 * poll.c
 *	  Waiting between rounds: for how long, and on what.
 *
 * The agent's connection to the server keeps no session state (it may go
 * through pgbouncer in transaction pooling), so it hears of nothing: the
 * agent polls.  The wait grows while nothing moves -- from POLL_FLOOR_MS,
 * doubling, to --interval, the longest -- and falls back to the floor after
 * a round that moved something, so a device that is busy keeps up and an
 * idle fleet costs the server --interval's rate of caught-up pulls.  Each
 * wait is drawn between half of it and all of it, so devices started
 * together do not poll together.
 *
 * --listen CONNINFO keeps one more connection, straight to the server (not
 * through a pool: LISTEN is session state), on which the relay's NOTIFY
 * magic_sync wakes the agent at once; while it is up the agent waits the
 * longest interval, since a notification names its replica when the relay
 * wrote to it.  When it breaks the agent polls, and connects it again after
 * a backoff; a round follows each (re)connection, for what it missed.
 *
 * The pulls that go to the primary go on the listening connection too
 * (waiter_puller), unless --listen-only: its session has just sent the
 * notification and is awake, where --server's has slept since the last
 * round and wakes only when the pull arrives (a millisecond on an idle
 * machine).  It adds no connection, and keeps no session state but LISTEN:
 * each pull is a transaction of its own.  Before its first pull it must
 * prove to be --server's database (server_same): a notification sent on
 * --server's connection reaches it.  A role that may not pull there (it is
 * not the replica's: 42501) or a server that refuses its pulls for good
 * leaves them to --server's connection for the life of the agent; one that
 * breaks, until it is connected again.
 *
 * When the round before settled and its pulls go there, the wait itself is
 * a pull that waits on the server (server_pull_wait): the server holds it
 * when the relay's pass that writes for the replica commits, and the pull
 * runs at once, without the NOTIFY's hop to the agent and the pull's back
 * (docs/protocol.md, the pull).  For as long as the wait drawn, with
 * WAIT_MARGIN_MS for the server to say so.  A server that cannot wait (an
 * earlier version without sync.pull_wait, a standby, the library not
 * preloaded) is said once, and the notifications wake the agent as before
 * for the life of the agent.  So they do after a round that did not settle
 * (a gap, a failure: the same wait would end at once), while --pull's
 * standbys serve the pulls, and mid-snapshot.  A round that ended on a held
 * pull's batch, with no pull after it (main.c's pass), is followed by a
 * waiting pull or, when none may go, by a round at once: the waiting pull
 * looks at the outbox before it sleeps, a notification would not come for
 * what that batch left.
 *
 * Whatever it waits on, a write to the replica's file by another
 * connection, a stop and a lost connection end the wait (server_wait).
 *-------------------------------------------------------------------------
 */
#include "agent.h"

#include "uuid.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_FLOOR_MS 1000		/* the wait after a round that moved */
#define LISTEN_RETRY_FIRST_MS 1000
#define LISTEN_RETRY_MAX_MS 30000
#define WAIT_MARGIN_MS 5000		/* past a waiting pull's timeout: the server's answer is late */

struct waiter
{
	const char *listen;			/* --listen, or NULL */
	server	   *listener;		/* its connection, when up */
	bool		pulls;			/* pulls may go on it: not --listen-only, none refused */
	int			same;			/* it is --server's database: 1 yes, -1 no, 0 not asked yet */
	int64_t		listen_retry_at;	/* when to try connecting it again */
	int			listen_backoff;
	int			interval;		/* --interval: the longest wait */
	int			current;		/* the wait now, before its jitter */
	unsigned int seed;
	bool		may_wait;		/* the next wait may be a waiting pull (waiter_may_wait_pull) */
	bool		must_wait;		/* it must be one, else a round goes at once */
	int			first_bytes;	/* its pull's bound */
	bool		no_wait;		/* the server cannot wait: said once, for the life of the agent */
};

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

waiter *
waiter_new(const char *listen, bool pulls, int interval_ms)
{
	waiter	   *w = calloc(1, sizeof *w);
	struct timespec ts;

	if (w == NULL)
		return NULL;
	w->listen = listen;
	w->pulls = pulls;
	w->interval = interval_ms;
	w->current = interval_ms < POLL_FLOOR_MS ? interval_ms : POLL_FLOOR_MS;
	w->listen_backoff = LISTEN_RETRY_FIRST_MS;
	clock_gettime(CLOCK_REALTIME, &ts);
	w->seed = (unsigned int) (ts.tv_nsec ^ (ts.tv_sec << 8) ^ (getpid() << 16));
	return w;
}

void
waiter_free(waiter *w)
{
	if (w == NULL)
		return;
	server_close(w->listener);
	free(w);
}

/*
 * waiter_round: what the round before the wait did.  The wait falls to the
 * floor after a round that moved, and doubles after one that did not.
 */
void
waiter_round(waiter *w, bool moved)
{
	int			floor = w->interval < POLL_FLOOR_MS ? w->interval : POLL_FLOOR_MS;

	if (moved)
		w->current = floor;
	else
		w->current = w->current > w->interval / 2 ? w->interval : w->current * 2;
}

/* waiter_next_ms: the wait to come, jittered: between half of it and all of it */
int
waiter_next_ms(waiter *w)
{
	int			base = w->listener ? w->interval : w->current;
	int			half = base / 2;

	return half + (half > 0 ? (int) (rand_r(&w->seed) % (unsigned int) (base - half + 1)) : 0);
}

bool
waiter_listening(const waiter *w)
{
	return w->listener != NULL;
}

/* listen_up: connect --listen when it is due; true when it came up just now */
static bool
listen_up(waiter *w)
{
	char		err[AGENT_ERROR_MAX];
	agent_status st;

	if (w->listen == NULL || w->listener != NULL || mono_ms() < w->listen_retry_at)
		return false;
	st = server_connect(&w->listener, w->listen, err);
	if (st == STEP_OK)
		st = server_listen(w->listener, err);
	if (st != STEP_OK)
	{
		server_close(w->listener);
		w->listener = NULL;
		report_error("cannot listen for notifications (polling meanwhile)", err, w->listen_backoff);
		w->listen_retry_at = mono_ms() + w->listen_backoff;
		w->listen_backoff = w->listen_backoff * 2 > LISTEN_RETRY_MAX_MS ? LISTEN_RETRY_MAX_MS : w->listen_backoff * 2;
		return false;
	}
	w->listen_backoff = LISTEN_RETRY_FIRST_MS;
	w->same = 0;
	return true;
}

/* waiter_lost: the listening connection broke: polling until it is connected again */
void
waiter_lost(waiter *w, const char *why)
{
	report_error("the connection for notifications is lost (polling meanwhile)", why, w->listen_backoff);
	server_close(w->listener);
	w->listener = NULL;
	w->listen_retry_at = mono_ms() + w->listen_backoff;
}

/*
 * waiter_puller: the listening connection, when the next pull to the
 * primary may go on it; NULL when it goes on `primary`.  Asks once per
 * connection whether it is primary's database.
 */
server *
waiter_puller(waiter *w, server *primary)
{
	char		err[AGENT_ERROR_MAX];
	bool		same;

	if (!w->pulls || w->listener == NULL || w->same < 0 || primary == NULL)
		return NULL;
	if (w->same == 0)
	{
		if (server_same(w->listener, primary, &same, err) != STEP_OK)
		{
			/* asked again at the next pull; a connection that broke is connected again */
			if (server_broken(w->listener))
				waiter_lost(w, err);
			return NULL;
		}
		w->same = same ? 1 : -1;
		if (same)
			server_direct(w->listener);
		if (!same)
		{
			report_error("the connection for notifications only listens: a notification sent on"
						 " --server's did not reach it, so it is not the same database",
						 "pulls go on --server's connection", 0);
			return NULL;
		}
	}
	return w->listener;
}

bool
waiter_listens_on(const waiter *w, const server *s)
{
	return s != NULL && w->listener == s;
}

/* waiter_pulls_refused: the listening connection may not pull: for the life of the agent */
void
waiter_pulls_refused(waiter *w, const char *why)
{
	report_error("the connection for notifications may not pull (pulls go on --server's connection)", why, 0);
	w->pulls = false;
}

/*
 * waiter_listen: --listen's connection up now, when it is due, before a
 * round rather than after it: a new replica's first round waits on its
 * snapshot's pass (its filing waits for the pass's lock), and the pass's
 * notification then wakes the wait after that round at once, where a
 * listener connected only then took a connection's set-up first
 * (bench/firstsync.py).  What came before it, the round reads.
 */
void
waiter_listen(waiter *w)
{
	(void) listen_up(w);
}

void
waiter_may_wait_pull(waiter *w, bool may, bool must, int first_bytes)
{
	w->may_wait = may;
	w->must_wait = may && must;
	w->first_bytes = first_bytes;
}

/*
 * wait_pull: sends a waiting pull on the listening connection, after what
 * the replica applied, when it may (poll.c's head); true when it is on its way
 */
static bool
wait_pull(waiter *w, server *pooled, const char *replica_id, replica *r, int ms)
{
	char		err[AGENT_ERROR_MAX];
	uint8_t		id[16];
	uint8_t		claim[MS_APPLIED_MAX];
	size_t		claim_len = 0;
	int64_t		after;
	bool		open;

	if (!w->may_wait || w->no_wait || waiter_puller(w, pooled) != w->listener || w->listener == NULL ||
		!ms_uuid_parse(replica_id, strlen(replica_id), id))
		return false;
	if (replica_applied(r, &after, &open, claim, &claim_len, err) != STEP_OK || open)
		return false;
	if (server_pull_wait(w->listener, id, after, ms, claim, claim_len, w->first_bytes, err) != STEP_OK)
	{
		if (server_broken(w->listener))
			waiter_lost(w, err);
		return false;
	}
	return true;
}

/* wait_refused: the server refused to wait: said once, and the notifications wake the agent */
static void
wait_refused(waiter *w)
{
	char		why[AGENT_ERROR_MAX];

	if (w->listener == NULL || !server_wait_refused(w->listener, why))
		return;
	report_error("the server cannot hold a pull until the relay writes (the notifications wake the agent)", why, 0);
	w->no_wait = true;
}

/*
 * waiter_wait: waits for the relay to notify this replica (on --listen's
 * connection, when it is up), for a write to the file, for a stop, or for
 * the wait drawn to pass.  `pooled` is the connection rounds use: without a
 * listener its loss ends the wait too (WAKE_LOST).
 */
wake_reason
waiter_wait(waiter *w, server *pooled, const char *replica_id, replica *r,
			volatile const int *stop, char err[AGENT_ERROR_MAX])
{
	int			ms;
	wake_reason why;
	bool		must;

	/* the wait reads notifications only: a pull sent ahead on it is let go of (pass() does already) */
	server_pull_drop(w->listener);
	/* a listener that came up missed what came before it: a round first */
	if (listen_up(w))
		return WAKE_TIMEOUT;
	ms = waiter_next_ms(w);
	/*
	 * must: the round ended on a held pull's batch without a pull that found
	 * nothing (main.c's pass): a waiting pull looks at the outbox before it
	 * sleeps, and returns at once for what that batch left; a notification
	 * would not come for it, nor a poll soon.  A round goes at once instead.
	 */
	must = w->must_wait;
	w->must_wait = false;
	if (w->listener == NULL)
	{
		if (must)
			return WAKE_TIMEOUT;
		/* polling: no longer than until the listener is tried again */
		if (w->listen != NULL && w->listen_retry_at - mono_ms() < ms)
			ms = w->listen_retry_at - mono_ms() > 0 ? (int) (w->listen_retry_at - mono_ms()) : 0;
		return server_wait(pooled, replica_id, ms, r, stop, err);
	}
	if (wait_pull(w, pooled, replica_id, r, ms))
	{
		why = server_wait(w->listener, replica_id, ms + WAIT_MARGIN_MS, r, stop, err);
		wait_refused(w);
	}
	else if (must)
		return WAKE_TIMEOUT;
	else
		why = w->listener != NULL ? server_wait(w->listener, replica_id, ms, r, stop, err) : WAKE_TIMEOUT;
	if (why == WAKE_LOST)
	{
		waiter_lost(w, err);
		return WAKE_TIMEOUT;
	}
	return why;
}
