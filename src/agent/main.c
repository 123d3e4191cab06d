/*-------------------------------------------------------------------------
 * main.c
 *	  magic_sync_agent: runs one replica's loop against a server.
 *
 *   magic_sync_agent --server CONNINFO --replica UUID --db FILE [options]
 *
 * A pass pulls what waits for the replica after the last message it applied
 * (sync_status) -- from a hot standby (--pull) when it has some, pulls.c --
 * applies each message in order (sync_apply), stopping at a gap, a message
 * of a later protocol or one for another replica, and files every upload
 * the replica has (sync_upload -> sync.file, on the primary), acknowledging
 * what it applied as it goes.  Passes follow each other until nothing moves
 * (a round); the agent then polls, waiting longer while nothing moves
 * (poll.c), or waits on LISTEN magic_sync on a connection of its own
 * (--listen), and wakes at once for a write to the file.  When the server
 * is out of reach it tries again after 1 s, doubling to 30 s, while the
 * file stays usable: every step is a short transaction of its own.
 * SIGINT and SIGTERM finish the step under way, close both sides and exit 0.
 *
 * States: connecting -> round -> waiting -> round ..., or -> backoff ->
 * connecting when the connection breaks; stopping from any of them.
 *-------------------------------------------------------------------------
 */
#include "loop.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sneakernet.h"
#include "upanswer.h"
#include "uuid.h"
#include "wire.h"

#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 30000
#define ROUND_LINE_MS 5000		/* a long round says what it did at least this often */
#define PASSES_MAX 100000		/* --once gives up on a round that never settles */
#define BUSY_TRIES_ONCE 5		/* --once: tries of a step while the file stays locked */
#define ONCE_WAIT_MS (10 * 60 * 1000)	/* --once: the longest wait for the relay to plan */
#define ONCE_POLL_MS 200		/* --once: how often it asks meanwhile */
#define FILE_SOON_MS 200		/* a filing the relay had yet to take (55P03): filed again after */

/*
 * A pass's first pull asks this many bytes, each one after it twice the
 * last, up to --pull-bytes: a snapshot's first message applies once a
 * small batch came rather than 4 MB (0.13-0.23 s of a first sync at 10^6,
 * bench/firstsync.py), and the batches pulled ahead grow faster than the
 * apply takes them.
 */
#define PULL_FIRST_BYTES (256 * 1024)

volatile sig_atomic_t stop_signal;	/* loop.h */

static void
on_signal(int sig)
{
	stop_signal = sig;
}

/* ---- one pass ----------------------------------------------------------- */

/*
 * pull_listening: a pull to the primary, on the listening connection when it
 * may go there (poll.c); on --server's when it may not, and when it fails
 * there: a broken connection is connected again meanwhile; a refusal, or a
 * failure --server's connection then does not repeat, leaves its pulls to
 * --server's connection for good.  After a transient failure on a
 * connection that is up (a lock, a conflict) the next pull tries it again.
 */
static agent_status
pull_listening(agent *a, int64_t after, const uint8_t *claim, size_t claim_len, int bytes,
			   server **from, pulled **rows, int *n, char err[AGENT_ERROR_MAX])
{
	server	   *listener = waiter_puller(a->wait, a->srv);
	agent_status rc;
	agent_status there = STEP_OK;
	char		why[AGENT_ERROR_MAX];

	*from = a->srv;
	if (listener != NULL)
	{
		there = server_pull(listener, a->uuid_bytes, after, claim, claim_len, bytes, rows, n, why);
		if (there == STEP_OK)
		{
			*from = listener;
			return there;
		}
		if (server_broken(listener))
			waiter_lost(a->wait, why);
		else if (there == STEP_REFUSED || there == STEP_UNREADY)
			waiter_pulls_refused(a->wait, why);
	}
	rc = server_pull(a->srv, a->uuid_bytes, after, claim, claim_len, bytes, rows, n, err);
	if (listener != NULL && rc == STEP_OK && there == STEP_FAILED && !server_broken(listener))
		waiter_pulls_refused(a->wait, why);
	return rc;
}

/*
 * pull: sync.pull where pulls.c says, a standby's when one answers; a
 * standby that fails leaves the pull to the next one, then to the primary
 * (on the listening connection when it may: pull_listening).  *from: the
 * connection the rows came from (server_pull_done).
 */
static agent_status
pull(agent *a, int64_t after, const uint8_t *claim, size_t claim_len, int bytes, server **from,
	 pulled **rows, int *n, char err[AGENT_ERROR_MAX])
{
	for (;;)
	{
		bool		standby;
		agent_status rc;

		*from = pulls_conn(a->from, a->srv, &standby);
		if (!standby)
			return pull_listening(a, after, claim, claim_len, bytes, from, rows, n, err);
		rc = server_pull(*from, a->uuid_bytes, after, claim, claim_len, bytes, rows, n, err);
		if (rc != STEP_TRANSIENT || !standby)
			return rc;
		report_error("a standby's pull failed (the next one pulls)", err, 0);
		pulls_failed(a->from);
	}
}


/*
 * trust: the key the server signs with, against the one the replica trusts
 * (docs/protocol.md 2.4).  A replica that trusts none learns it here, from
 * the server over this authenticated connection, before it applies what
 * the server sent; one that trusts another key (a server installed anew,
 * or not the server it followed) applies nothing: the agent stops saying
 * how an operator pins the new key (a->fatal, EXIT_CONFIG).  A server that
 * made no key yet, or signs none (an earlier version), is asked again at the
 * next pass, until it says.
 */
static agent_status
trust(agent *a, char err[AGENT_ERROR_MAX])
{
	uint8_t		server_key[32],
				pinned[32];
	bool		has,
				none,
				pinned_has;
	char		hex[65],
				other[65];
	agent_status rc;

	if (a->trusted)
		return STEP_OK;
	rc = server_signing_key(a->srv, server_key, &has, &none, err);
	if (rc != STEP_OK || none || !has)
		return rc;
	rc = replica_trusted(a->rep, pinned, &pinned_has, err);
	if (rc != STEP_OK)
		return rc;
	agent_key_hex(server_key, hex);
	if (!pinned_has)
	{
		rc = replica_trust(a->rep, server_key, false, err);
		if (rc != STEP_OK)
			return rc;
		report_trust(hex, "learned from the server over its connection");
	}
	else if (memcmp(pinned, server_key, 32) != 0)
	{
		agent_key_hex(pinned, other);
		snprintf(a->fatal_why, sizeof a->fatal_why,
				 "the server signs with key %s, but the replica trusts %s%s: nothing it sends is applied."
				 " If the server was installed anew (not restored from a backup), an operator pins its key:"
				 " magic_sync_agent --server-key %s ...", hex, other,
				 a->opt.server_key ? " (--server-key)" : "", hex);
		snprintf(err, AGENT_ERROR_MAX, "%s", a->fatal_why);
		a->fatal = EXIT_CONFIG;
		return STEP_FAILED;
	}
	a->trusted = true;
	return STEP_OK;
}

/*
 * receipts_last: a held pull's batch begins with the answers waiting for
 * the replica -- the receipt of the last round's acknowledgement, which that
 * round left for this pull (held_end) -- then its messages.  Receipts let go
 * of nothing the messages touch (ms_filed_is_receipt): when every answer
 * before the messages is one, they are applied after them, and the write
 * the messages carry is in the file one commit sooner.
 */
static void
receipts_last(pulled *rows, int n)
{
	pulled		receipts[8];
	int			k = 0;

	while (k < n && k < (int) (sizeof receipts / sizeof receipts[0]) && rows[k].number == 0 &&
		   ms_filed_is_receipt(rows[k].message, rows[k].len))
		k++;
	if (k == 0 || k == n)
		return;
	for (int i = k; i < n; i++)
		if (rows[i].number == 0)
			return;
	memcpy(receipts, rows, (size_t) k * sizeof *rows);
	memmove(rows, rows + k, (size_t) (n - k) * sizeof *rows);
	memcpy(rows + n - k, receipts, (size_t) k * sizeof *rows);
}

/*
 * pass: pull and apply, a batch at a time, acknowledging each batch (a
 * snapshot once it ends); then file what remains to say.  *moved: whether
 * anything changed on either side.  *settled: whether a pass now would
 * find nothing -- its last pull found no message, and nothing was filed
 * after it (a filing's answer waits to be pulled) -- so that, while the
 * relay's notifications wake the agent (--listen), the round ends without
 * a pull more; polling, it pulls again at once, as a message written
 * meanwhile would otherwise wait for the poll.  A batch the server held
 * (server_pull_held) ends the pass too, once its acknowledgement is filed
 * (held_end): no pull after it to find nothing -- one request a write
 * fewer.  The wait after it is a waiting pull, which looks at the outbox
 * before it sleeps and returns at once for what the batch left, or a round
 * goes at once (waiter_may_wait_pull's must); the filing's answer waits for
 * the next pull unless it lets go of more than the report
 * (ms_up_answer_awaited), when the pass pulls it as before.  In a snapshot, the next
 * batch is pulled while this one applies (server_pull_ahead): the server
 * reads and sends it meanwhile.
 */
static agent_status
pass(agent *a, round_stats *st, bool *moved, bool *settled, char err[AGENT_ERROR_MAX])
{
	round_stats before = *st;
	agent_status rc;
	bool		halt = false;
	server	   *from = NULL;
	bool		ahead = false;	/* the next batch is on its way from `from` */
	bool		got;			/* the batch came: the one pulled ahead */
	bool		drained = false;	/* the last pull found no message */
	bool		held = false;	/* the batch is a held pull's (server_pull_held) */
	bool		ended = false;	/* the pass ended on it (held_end) */
	int64_t		filed_then = -1;	/* the filings of the round when it pulled */
	int			bytes = a->opt.pull_bytes < PULL_FIRST_BYTES ? a->opt.pull_bytes : PULL_FIRST_BYTES;

	/* nothing is applied before the replica knows whose signatures to believe */
	rc = trust(a, err);
	if (rc != STEP_OK)
		return rc;
	while (!halt && !stop_signal)
	{
		int64_t		after;
		bool		open;
		uint8_t		claim[MS_APPLIED_MAX];
		size_t		claim_len = 0;
		pulled	   *rows;
		int			n;
		int			chained = 0;
		bool		progressed = false;
		int			pulling = bytes;	/* this batch's bound; `bytes` the next one's */

		bytes = bytes > a->opt.pull_bytes / 2 ? a->opt.pull_bytes : bytes * 2;
		filed_then = st->uploads;
		got = false;
		held = false;
		if (ahead)
		{
			ahead = false;
			rc = server_pull_next(from, &rows, &n, err);
			got = rc == STEP_OK;
			/* the listening connection broke: the pull goes again, on --server's */
			if (!got && waiter_listens_on(a->wait, from) && server_broken(from))
			{
				waiter_lost(a->wait, err);
				from = NULL;
			}
			else if (!got)
				return rc;
		}
		if (!got)
		{
			rc = replica_applied(a->rep, &after, &open, claim, &claim_len, err);
			if (rc != STEP_OK)
				return rc;
			if (open && !a->bar.open)
			{
				/* a snapshot was under way when the agent started: its size is unknown */
				a->bar.open = true;
				a->bar.rows = 0;
				a->bar.of = 0;
			}
			rc = pull(a, after, claim, claim_len, pulling, &from, &rows, &n, err);
			if (rc != STEP_OK)
				return rc;
			held = server_pull_held(from);
			if (held)
				receipts_last(rows, n);
			/* the server answered for the uuid: a new file is this replica's from now on */
			rc = replica_stamp(a->rep, err);
			if (rc != STEP_OK)
			{
				server_pull_done(from);
				return rc;
			}
		}
		for (int i = 0; i < n && !halt && !stop_signal; i++)
		{
			apply_result res;

			if (rows[i].number != 0)
				chained++;

			/*
			 * Mid-snapshot, the next batch is asked for before this one's first
			 * message applies, so that the server reads it while the whole
			 * batch applies; at a snapshot's Begin, once it applied.  It claims
			 * nothing and is let go of unread when the batch stops short.
			 */
			if (i == 0 && !ahead && a->bar.open && rows[n - 1].number > 0)
				ahead = server_pull_ahead(from, a->uuid_bytes, rows[n - 1].number, bytes, err) == STEP_OK;
			rc = replica_apply(a->rep, rows[i].message, rows[i].len, &res, err);
			if (rc == STEP_OK && i == 0 && !ahead && a->bar.open && rows[n - 1].number > 0 &&
				strcmp(res.result, "applied") == 0)
				/* a snapshot's: its rest is pulled while this batch applies */
				ahead = server_pull_ahead(from, a->uuid_bytes, rows[n - 1].number, bytes, err) == STEP_OK;
			if (rc != STEP_OK)
			{
				server_pull_drop(from);
				server_pull_done(from);
				/* the primary counts a send that keeps failing: it serves the next try */
				if (rc == STEP_FAILED)
				{
					pulls_primary_next(a->from);
					/* a signature refused: the next pass asks the server's key again */
					a->trusted = false;
				}
				return rc;
			}
			if (strcmp(res.result, "applied") == 0)
			{
				/* for the bar, what sync_apply says of the message: decoded once, by it */
				bool		begins = strcmp(res.snapshot, "begin") == 0;
				bool		ended = strcmp(res.snapshot, "end") == 0;
				int64_t		of = res.begin_rows;
				int64_t		upserts = res.upserts + res.kept + res.refused;

				progressed = true;
				a->lanes_read = false;
				st->messages++;
				if (res.schema_changed > 0 || res.schema_let_go > 0 || res.schema_failed > 0)
					report_schema(&res);
				st->upserts += res.upserts;
				st->deletes += res.deletes + res.let_go;
				st->retired += res.retired;
				st->refused += res.refused;
				if (begins)
				{
					a->bar.open = true;
					a->bar.of = of;
					a->bar.rows = upserts;
					report_snapshot(a->bar.rows, a->bar.of, true, false);
				}
				else if (a->bar.open)
				{
					a->bar.rows += upserts;
					report_snapshot(a->bar.rows, a->bar.of, false, ended);
				}
				if (ended)
				{
					if (!a->bar.open)
						report_snapshot(0, 0, false, true);
					a->bar.open = false;
					st->snapshots++;
				}
			}
			else if (strcmp(res.result, "filed") == 0)
			{
				/*
				 * sync.pull gives an answer again a minute later, for an hour
				 * (one lost on the way is not lost): only one that let go of
				 * notes is news.
				 */
				if (res.notes > 0 || res.set_aside > 0 || res.dropped > 0 || res.waiting > 0 || res.again > 0)
				{
					progressed = true;
					st->answers++;
					st->answered_rows += res.filed_rows;
				}
			}
			else if (strcmp(res.result, "duplicate") == 0)
				st->duplicates++;
			else
			{
				/* gap, later_protocol, wrong_replica, older_generation: nothing after it applies */
				st->stopped = strcmp(res.result, "gap") == 0 ? "gap" :
					strcmp(res.result, "later_protocol") == 0 ? "later_protocol" :
					strcmp(res.result, "older_generation") == 0 ? "older_generation" : "wrong_replica";
				st->gap = res.gap > 0 ? res.gap : res.number;
				halt = true;
			}
		}
		server_pull_done(from);
		/* stopped short of the batch's end, or done: what was pulled ahead goes */
		if (halt || stop_signal || !progressed || chained == 0 || !a->bar.open)
		{
			server_pull_drop(from);
			ahead = false;
		}
		if (!progressed || chained == 0)
		{
			drained = chained == 0 && !halt && !stop_signal;
			break;
		}

		/*
		 * acknowledge what this batch applied, so the server trims the
		 * outbox; not in the middle of a snapshot, whose rest is waiting:
		 * the relay may still be recording what it carries, and a filing
		 * waits for that (src/pg/relay/record.c)
		 */
		if (a->bar.open)
			continue;
		rc = uploads(a, st, err);
		if (rc != STEP_OK)
			return rc;
		/* a held pull's batch: the next wait pulls what it left (held_end) */
		if (held && !halt && !stop_signal && !a->file_soon && st->awaited == before.awaited)
		{
			ended = true;
			break;
		}
	}
	/* uploads() said all it had just now, when the pass ended on a held batch */
	rc = ended ? STEP_OK : uploads(a, st, err);
	if (rc != STEP_OK)
		return rc;
	/* for the round's line only: --quiet reads nothing it would not use */
	if (report_rounds())
	{
		int64_t		applied;
		bool		open;

		if (replica_applied(a->rep, &applied, &open, NULL, NULL, err) == STEP_OK)
			st->applied = applied;
	}
	*moved = st->messages != before.messages || st->uploads != before.uploads ||
		st->answers != before.answers;
	*settled = (ended || (drained && st->uploads == filed_then)) && !a->file_soon;
	a->held_end = ended;
	return STEP_OK;
}

/* ---- the loop ----------------------------------------------------------- */

/*
 * settled: with --once, whether the replica holds what the server had
 * committed when the agent started: the relay planned it (sync.settled) and
 * the replica applied through the messages that carry it.  0: not yet, 1:
 * settled, else a step's failure.  A server without sync.settled settles
 * when nothing moves, as an earlier one did.
 */
static int
settled(agent *a, char err[AGENT_ERROR_MAX])
{
	int64_t		through;
	int64_t		applied;
	bool		none;
	bool		open;
	agent_status rc;

	if (!a->marked)
		return 1;
	if (a->through < 0)
	{
		rc = server_settled(a->srv, a->uuid_bytes, a->mark, &through, &none, err);
		if (rc != STEP_OK)
			return -(int) rc;
		if (none)
			return 1;
		if (through < 0)
			return 0;
		/* every message carrying what came before the mark is numbered at or below it */
		a->through = through;
	}
	rc = replica_applied(a->rep, &applied, &open, NULL, NULL, err);
	if (rc != STEP_OK)
		return -(int) rc;
	return applied >= a->through && !open ? 1 : 0;
}

static bool
round_did_something(const round_stats *st)
{
	return st->messages > 0 || st->answers > 0 || st->filed > 0 || st->server_refused > 0 ||
		st->dropped > 0 || st->waiting > 0 || st->set_aside > 0 || st->stopped ||
		st->provisioning || st->snapshots > 0 || st->narrowed > 0 || st->blamed > 0;
}

/*
 * tell_aside: what the replica wrote and set aside -- it never goes up --
 * told once per row (the rows sync_progress lists, the newest of each
 * table): those set aside since the last listing, and at the start all of
 * them.  Not told when the file cannot be read: the round says why.
 */
static void
tell_aside(agent *a)
{
	aside_row	rows[AGENT_ASIDE_MAX];
	int			n = 0;
	char		err[AGENT_ERROR_MAX];

	if (replica_set_aside(a->rep, rows, AGENT_ASIDE_MAX, &n, err) != STEP_OK)
		return;
	for (int i = 0; i < n; i++)
	{
		bool		told = false;

		for (int j = 0; j < a->ntold && !told; j++)
			told = a->told[j] == rows[i].id;
		if (!told)
			report_refused(&rows[i]);
	}
	for (int i = 0; i < n; i++)
		a->told[i] = rows[i].id;
	a->ntold = n;
}

static void
say_round(agent *a, round_stats *st)
{
	backlog		b;
	char		err[AGENT_ERROR_MAX];

	/* --quiet: the backlog (sync_progress reads every lane) for no line */
	if (!report_rounds())
		return;
	if (replica_backlog(a->rep, &b, err) != STEP_OK)
		memset(&b, 0, sizeof b);
	report_round(st, &b);
}

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
finish(agent *a, const char *why, int code)
{
	report_stop(why, code);
	free(a->unfiled);
	pulls_free(a->from);
	waiter_free(a->wait);
	narrowing_ends(&a->narrow);
	server_close(a->srv);
	replica_close(a->rep);
	return code;
}

/* once_failed: with --once, a step's failure ends the agent, with its code */
static int
once_failed(agent *a, agent_status status, const char *err)
{
	switch (status)
	{
		case STEP_REFUSED:
			report_error("the server refuses", err, -1);
			return finish(a, "refused by the server", EXIT_NOPERM);
		case STEP_TRANSIENT:
			report_error("transient failure", err, -1);
			return finish(a, "the server is unavailable", EXIT_UNAVAILABLE);
		case STEP_UNREADY:
			report_error("the server is not ready", err, -1);
			return finish(a, "the server's database has no magic_sync", EXIT_UNAVAILABLE);
		case STEP_FULL:
			report_error("the replica file's disk is full", err, -1);
			return finish(a, "the replica file's disk is full", EXIT_IOERR);
		default:
			report_error("failed", err, -1);
			return finish(a, "an error retrying will not fix", EXIT_SOFTWARE);
	}
}

int
main(int argc, char **argv)
{
	agent		a;
	char		err[AGENT_ERROR_MAX];
	struct sigaction sa;
	int			backoff = BACKOFF_FIRST_MS;
	int			busy = 0;
	int			rc;
	int64_t		applied;
	bool		open;
	int64_t		started = mono_ms();

	/* sneakernet: export and import move bundles instead (sneakernet.c) */
	if (argc > 1 && (strcmp(argv[1], "export") == 0 || strcmp(argv[1], "import") == 0))
		return sneakernet_main(argc - 1, argv + 1);
	memset(&a, 0, sizeof a);
	a.through = -1;
	a.narrow.limit = -1;
	a.bound = -1;
	rc = parse_options(argc, argv, &a.opt);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	if (!ms_uuid_parse(a.opt.replica, strlen(a.opt.replica), a.uuid_bytes))
		return usage_error("--replica takes a uuid (8-4-4-4-12 hexadecimal digits), not '%s'", a.opt.replica);
	ms_uuid_text(a.uuid_bytes, a.uuid);
	report_init(a.opt.mode, a.opt.name);
	a.from = pulls_new(a.opt.pull, a.opt.npull);
	a.wait = waiter_new(a.opt.listen, !a.opt.listen_only, a.opt.interval_ms);
	if (a.from == NULL || a.wait == NULL)
	{
		report_error("cannot start", "out of memory", -1);
		return finish(&a, "out of memory", EXIT_SOFTWARE);
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);

	/* a new file is stamped with the uuid only once the server answered for it (pass) */
	a.rep = replica_open_unstamped(a.opt.db, a.uuid, err);
	if (a.rep == NULL)
	{
		report_error("cannot open the replica", err, -1);
		return finish(&a, "cannot open the replica file", EXIT_NOINPUT);
	}
	if (replica_lazy(a.rep, err) != STEP_OK || replica_applied(a.rep, &applied, &open, NULL, NULL, err) != STEP_OK)
	{
		report_error("cannot read the replica", err, -1);
		return finish(&a, "cannot read the replica file", EXIT_NOINPUT);
	}
	report_start(a.uuid, a.opt.db, applied);
	/* an operator's pin, in place of any other: the server must sign with it */
	if (a.opt.server_key)
	{
		uint8_t		key[32],
					pinned[32];
		bool		has = false;

		agent_key_parse(a.opt.server_key, key);
		if (replica_trusted(a.rep, pinned, &has, err) != STEP_OK ||
			((!has || memcmp(pinned, key, 32) != 0) && replica_trust(a.rep, key, true, err) != STEP_OK))
		{
			report_error("cannot pin the server key", err, -1);
			return finish(&a, "cannot pin the server key", EXIT_NOINPUT);
		}
		if (!has || memcmp(pinned, key, 32) != 0)
		{
			char		hex[65];

			agent_key_hex(key, hex);
			report_trust(hex, "pinned by --server-key");
		}
	}
	/* what the file holds that never goes up, told at every start */
	tell_aside(&a);
	/* rows set aside as too large go up again when the agent starts: the bound may have changed since */
	if (replica_retry_too_large(a.rep, err) != STEP_OK)
		report_error("cannot retry the rows set aside as too large", err, -1);

	while (!stop_signal)
	{
		round_stats st;
		int64_t		began;
		agent_status status = STEP_OK;
		int			passes = 0;
		bool		moved = true;
		bool		caught_up = false;
		bool		any = false;	/* a pass of the round moved */

		if (a.srv == NULL)
		{
			status = server_connect(&a.srv, a.opt.server, err);
			if (status == STEP_REFUSED)
			{
				report_error("the server refuses the connection", err, -1);
				return finish(&a, "refused by the server", EXIT_NOPERM);
			}
			if (status != STEP_OK)
			{
				if (a.opt.once)
				{
					report_error("server unreachable", err, -1);
					return finish(&a, "the server is unavailable", EXIT_UNAVAILABLE);
				}
				report_unreachable(err, backoff);
				agent_sleep(backoff, &stop_signal);
				backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
				continue;
			}
			report_connected();
			/* back from a break: the primary checks the claim, and gives what waited long */
			pulls_primary_next(a.from);
			/* listening before the round, not after it: a snapshot's pass commits meanwhile */
			waiter_listen(a.wait);
		}

		/* --once: what the server had committed when the agent started is what it waits for */
		if (a.opt.once && !a.marked)
		{
			status = server_mark(a.srv, a.mark, sizeof a.mark, err);
			a.marked = status == STEP_OK;
			if (status != STEP_OK)
				return once_failed(&a, status, err);
		}

		/* a round: passes until nothing moves */
		memset(&st, 0, sizeof st);
		a.bound_looked = false;
		a.lanes_read = false;
		replica_said_forget(a.rep);
		began = mono_ms();
		while (moved && !caught_up && !stop_signal && passes++ < PASSES_MAX)
		{
			moved = false;
			status = pass(&a, &st, &moved, &caught_up, err);
			if (status != STEP_OK)
				break;
			any = any || moved;
			/* polling, a message written meanwhile is found only by pulling again */
			caught_up = caught_up && waiter_listening(a.wait);
			if (moved && mono_ms() - began >= ROUND_LINE_MS)
			{
				if (round_did_something(&st))
					say_round(&a, &st);
				memset(&st, 0, sizeof st);
				began = mono_ms();
			}
		}
		if (round_did_something(&st))
			say_round(&a, &st);
		/* a round that moved anything may have set rows aside: told once each */
		if (any || round_did_something(&st))
			tell_aside(&a);
		if (stop_signal)
			break;
		if (a.fatal)
		{
			report_error("the replica trusts another server key", a.fatal_why, -1);
			return finish(&a, "the server signs with another key than the replica trusts", a.fatal);
		}

		switch (status)
		{
			case STEP_OK:
				backoff = BACKOFF_FIRST_MS;
				busy = 0;
				break;
			case STEP_REFUSED:
				report_error("the server refuses", err, -1);
				return finish(&a, "refused by the server", EXIT_NOPERM);
			case STEP_TRANSIENT:
				if (a.opt.once)
				{
					report_error("transient failure", err, -1);
					return finish(&a, "the server is unavailable", EXIT_UNAVAILABLE);
				}
				report_lost(err, backoff);
				server_close(a.srv);
				a.srv = NULL;
				agent_sleep(backoff, &stop_signal);
				backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
				continue;
			case STEP_BUSY:
				/* the application holds the file: wait for it, keep the connection */
				if (a.opt.once && ++busy > BUSY_TRIES_ONCE)
				{
					report_error("the replica file stays busy", err, -1);
					return finish(&a, "the replica file stays busy", EXIT_SOFTWARE);
				}
				report_error("the replica file is busy", err, backoff);
				agent_sleep(backoff, &stop_signal);
				backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
				continue;
			case STEP_UNREADY:
				/* CREATE EXTENSION is waited for, keeping the connection */
				if (a.opt.once)
					return once_failed(&a, status, err);
				report_error("the server is not ready", err, backoff);
				agent_sleep(backoff, &stop_signal);
				backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
				continue;
			case STEP_FULL:
				/* nothing was written: the step goes again once there is room */
				if (a.opt.once)
					return once_failed(&a, status, err);
				report_error("the replica file's disk is full", err, backoff);
				agent_sleep(backoff, &stop_signal);
				backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
				continue;
			case STEP_FAILED:
				if (a.opt.once)
				{
					report_error("failed", err, -1);
					return finish(&a, "an error retrying will not fix", EXIT_SOFTWARE);
				}
				report_error("failed", err, backoff);
				agent_sleep(backoff, &stop_signal);
				backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
				continue;
		}

		if (a.opt.once)
		{
			int			done;

			if (passes > PASSES_MAX)
				return finish(&a, "the round never settled", EXIT_SOFTWARE);
			done = settled(&a, err);
			if (done < 0)
				return once_failed(&a, (agent_status) -done, err);
			if (done == 1)
				return finish(&a, "nothing more moves", 0);
			if (mono_ms() - started > ONCE_WAIT_MS)
			{
				report_error("the server's relay did not plan what was committed before the agent started",
							 "gave up after 10 minutes", -1);
				return finish(&a, "the server's relay does not plan", EXIT_UNAVAILABLE);
			}
			/* the relay has yet to plan it, or the replica to pull it (a standby lags) */
			agent_sleep(ONCE_POLL_MS, &stop_signal);
			continue;
		}

		if (a.file_soon)
		{
			a.file_soon = false;
			agent_sleep(FILE_SOON_MS, &stop_signal);
			continue;
		}
		waiter_round(a.wait, any);
		/* settled, pulling from the primary: the wait may be a pull the server holds (poll.c) */
		waiter_may_wait_pull(a.wait, caught_up && a.opt.npull == 0, a.held_end,
							 a.opt.pull_bytes < PULL_FIRST_BYTES ? a.opt.pull_bytes : PULL_FIRST_BYTES);
		switch (waiter_wait(a.wait, a.srv, a.uuid, a.rep, &stop_signal, err))
		{
			case WAKE_LOST:
				report_lost(err, 0);
				server_close(a.srv);
				a.srv = NULL;
				break;
			case WAKE_NOTIFIED:
			case WAKE_WRITTEN:
			case WAKE_TIMEOUT:
			case WAKE_STOP:
				break;
		}
	}
	return finish(&a, stop_signal == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)", 0);
}
