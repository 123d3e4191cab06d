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
#include "agent.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sneakernet.h"
#include "wire.h"

#define AGENT_VERSION MS_VERSION	/* magic_sync.control's, from the Makefile */
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 30000
#define ROUND_LINE_MS 5000		/* a long round says what it did at least this often */
#define PASSES_MAX 100000		/* --once gives up on a round that never settles */
#define UPLOADS_PER_PASS 1000
#define BUSY_TRIES_ONCE 5		/* --once: tries of a step while the file stays locked */
#define PULLS_MAX 8				/* --pull: standbys at most */
#define ONCE_WAIT_MS (10 * 60 * 1000)	/* --once: the longest wait for the relay to plan */
#define ONCE_POLL_MS 200		/* --once: how often it asks meanwhile */
#define FILE_SOON_MS 200		/* a filing the relay had yet to take (55P03): filed again after */

static volatile sig_atomic_t stop_signal;

static void
on_signal(int sig)
{
	stop_signal = sig;
}

typedef struct options
{
	const char *server;
	const char *pull[PULLS_MAX];	/* --pull: hot standbys, tried in turn */
	int			npull;
	const char *listen;			/* --listen: a direct connection for notifications */
	const char *replica;
	const char *db;
	const char *name;
	bool		once;
	int			interval_ms;
	int			pull_bytes;
	const char *server_key;		/* --server-key: an operator's pin, 64 hexadecimal digits */
	report_mode mode;
} options;

/*
 * Narrowing down an upload the server refused for good (too large for its
 * bound, a decode error, a bug): the uploads after it carry half as many
 * rows, then half again, until the row to blame is alone.
 */
typedef struct narrowing
{
	int64_t		limit;			/* rows an upload may carry while narrowing; -1: not narrowing */
	bool		took;			/* the server took an upload since the narrowing began */
	uint8_t    *suspect;		/* a one-row upload refused, kept until the control says whether to blame it */
	size_t		suspect_len;
	char		reason[AGENT_ERROR_MAX + 64];
	char		sqlstate[6];	/* what the server refused it with */
	char		lane[AGENT_LANE_BYTES];	/* the lane narrowed down: only it uploads meanwhile */
} narrowing;

/* what the agent knows of a snapshot being applied, for the bar */
typedef struct snapshot_bar
{
	bool		open;
	int64_t		rows;
	int64_t		of;				/* 0: unknown (the agent started mid-snapshot) */
} snapshot_bar;

typedef struct agent
{
	options		opt;
	char		uuid[37];
	uint8_t		uuid_bytes[16];
	replica    *rep;
	server	   *srv;			/* the primary: uploads, acknowledgements, some pulls */
	pulls	   *from;			/* where pulls go */
	waiter	   *wait;			/* between rounds */
	snapshot_bar bar;
	char		mark[256];		/* --once: the server's snapshot when the agent started */
	bool		marked;
	int64_t		through;		/* --once: applied through this, it holds what came before the mark */
	char		answer[4096];	/* sync.file's answer */
	uint8_t    *unfiled;		/* an upload whose filing failed for the infrastructure */
	size_t		unfiled_len;
	narrowing	narrow;
	int64_t		bound;			/* the server's upload_bytes when last looked at; -1: not yet */
	bool		bound_looked;	/* looked at this round */
	uint64_t	told[AGENT_ASIDE_MAX];	/* the rows set aside last listed, told already */
	int			ntold;
	char		lanes[AGENT_LANES_MAX][AGENT_LANE_BYTES];	/* sync_lanes(), read once a round ... */
	int			nlanes;
	bool		lanes_read;		/* ... and again after a message is applied (it may change a table's lane) */
	bool		trusted;		/* the server's key is the one the replica trusts (trust()) */
	bool		file_soon;		/* a filing waited on the relay recording a snapshot's held rows: again shortly */
	int			fatal;			/* an exit code a step decided on (EXIT_CONFIG), 0 none */
	char		fatal_why[AGENT_ERROR_MAX];
} agent;

static const char usage_text[] =
"Usage: magic_sync_agent --server CONNINFO --replica UUID --db FILE [OPTION]...\n"
"       magic_sync_agent export|import ...  (files instead of a network: export --help)\n"
"\n"
"Runs one replica's loop: pulls what the server's relay wrote for the replica\n"
"(sync.pull), applies each message to the SQLite file (sync_apply), files\n"
"what the replica wrote and what it applied (sync_upload -> sync.file), and\n"
"polls between rounds.  It keeps no session state on the server: --server\n"
"may be pgbouncer in transaction pooling.  The replica extension is built\n"
"into the agent: the file needs nothing else, and the tables are created by\n"
"the first snapshot.\n"
"\n"
"Required:\n"
"  --server CONNINFO  the server's database, as a libpq connection string or\n"
"                     URI (\"host=hq dbname=shop user=store_1\"); '' takes\n"
"                     everything from PGHOST, PGDATABASE, PGUSER, ... The role\n"
"                     is the replica's own (sync.replica_add(..., role => ...))\n"
"                     or a member of sync_admin.\n"
"                     The primary: uploads and acknowledgements go there.\n"
"  --replica UUID     the replica's uuid, as registered with sync.replica_add\n"
"  --db FILE          the replica's SQLite file; created when missing, put in\n"
"                     WAL mode, and stamped with UUID once the server answers\n"
"                     for it.  The application reads and writes it meanwhile;\n"
"                     one agent at a time works on it (FILE-agent.lock).\n"
"\n"
"Options:\n"
"  --pull CONNINFO    a hot standby of the primary to pull from; given more\n"
"                     than once, tried in turn; the primary pulls when none\n"
"                     answers (and checks what the replica claims: at the\n"
"                     start, every 10 minutes, after a failure)\n"
"  --listen CONNINFO  keep one more connection, straight to the server (not\n"
"                     through a pool), listening for the relay's notifications:\n"
"                     the agent wakes at once when the relay wrote to it\n"
"  --once             run rounds until the replica holds what the server had\n"
"                     committed when the agent started (planned and applied),\n"
"                     then exit\n"
"  --interval MS      the longest wait between rounds (default 10000): the\n"
"                     agent polls after 1 s, then waits twice as long each\n"
"                     time nothing moves, up to MS, each wait drawn between\n"
"                     half and all of it; after a change, 1 s again.  With\n"
"                     --listen, MS, since a notification wakes it.  It wakes\n"
"                     within 250 ms of a write to the file by another process.\n"
"  --pull-bytes N     bytes of messages to pull at a time (default 4194304)\n"
"  --server-key HEX   the server's signing key (64 hexadecimal digits, as\n"
"                     sync.signing_key() returns it), pinned into the file in\n"
"                     place of any other: an operator's pin, for a server\n"
"                     installed anew.  Without it the replica learns the key\n"
"                     from the server over this connection at its first pull,\n"
"                     and from then on applies only what that key signed\n"
"  --name LABEL       put LABEL in front of every line (and in JSON: \"name\")\n"
"  --json             one JSON object per line on stdout, for machines:\n"
"                     events start, connected, unreachable, lost, error,\n"
"                     snapshot, round, stop (see docs/operations.md)\n"
"  --quiet            print errors only\n"
"  --help             print this help and exit\n"
"  --version          print the version and exit\n"
"\n"
"Output: while a snapshot is applied, a bar of its rows (the first message\n"
"of a snapshot says how many it carries); then one line per round that did\n"
"something: messages and rows applied, uploads filed and what the server\n"
"did with their rows, filings confirmed, and the backlog (rows written not\n"
"yet sent, sent not yet filed).  Errors go to stderr.\n"
"\n"
"When the server is out of reach, or the connection breaks, the agent tries\n"
"again after 1 s, doubling up to 30 s; the file stays usable meanwhile.\n"
"SIGINT or SIGTERM: the agent finishes the step under way and exits 0.\n"
"\n"
"Exit codes:\n"
"   0  stopped by SIGINT/SIGTERM, or (--once) nothing more moves\n"
"  64  the command line is wrong (a connection string libpq cannot read\n"
"      included)\n"
"  66  the file cannot be opened, belongs to another replica, or another\n"
"      agent (or import, export) works on it (FILE-agent.lock)\n"
"  69  the server cannot be reached, its database has no magic_sync yet\n"
"      (CREATE EXTENSION), or its relay does not plan in 10 minutes\n"
"      (--once only; otherwise it retries)\n"
"  70  an error retrying will not fix (--once only; otherwise it retries\n"
"      after a backoff, since the fix is a deploy)\n"
"  74  the replica file's disk is full (--once only; otherwise it retries\n"
"      after a backoff, until there is room)\n"
"  77  the server refuses: authentication failed, the role may not act for\n"
"      this replica, or the replica is not registered or was dropped\n"
"  78  the server signs with another key than the replica trusts (or than\n"
"      --server-key names): nothing it sends is applied; if the server was\n"
"      installed anew, an operator pins its key with --server-key\n";

static int
usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "magic_sync_agent: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'magic_sync_agent --help'.\n");
	return EXIT_USAGE;
}

/* parse_uuid: a uuid in its 36-character form, any case; lowercased into text */
static bool
parse_uuid(const char *in, char text[37], uint8_t bytes[16])
{
	int			b = 0;

	if (strlen(in) != 36)
		return false;
	for (int i = 0; i < 36; i++)
	{
		bool		dash = i == 8 || i == 13 || i == 18 || i == 23;

		if (dash ? in[i] != '-' : !isxdigit((unsigned char) in[i]))
			return false;
		text[i] = (char) tolower((unsigned char) in[i]);
	}
	text[36] = '\0';
	for (int i = 0; i < 36; i++)
	{
		if (text[i] == '-')
			continue;
		{
			int			hi = isdigit((unsigned char) text[i]) ? text[i] - '0' : text[i] - 'a' + 10;
			int			lo = isdigit((unsigned char) text[i + 1]) ? text[i + 1] - '0' : text[i + 1] - 'a' + 10;

			bytes[b++] = (uint8_t) (hi * 16 + lo);
			i++;
		}
	}
	return b == 16;
}

static bool
parse_int(const char *s, long min, long max, int *out)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return false;
	*out = (int) v;
	return true;
}

/* check_conninfo: a connection string libpq cannot read is the command line's fault */
static int
check_conninfo(const char *option, const char *conninfo)
{
	char		err[AGENT_ERROR_MAX];
	char		line[AGENT_ERROR_MAX + 64];

	if (conninfo == NULL || server_conninfo_check(conninfo, err))
		return 0;
	snprintf(line, sizeof line, "%s: %s", option, err);
	return usage_error("%s", line);
}

static int
check_pulls(const options *o)
{
	for (int i = 0; i < o->npull; i++)
		if (check_conninfo("--pull", o->pull[i]) != 0)
			return EXIT_USAGE;
	return 0;
}

/* parse_options: 0 to run, -1 to exit 0 (--help, --version), else an exit code */
static int
parse_options(int argc, char **argv, options *o)
{
	memset(o, 0, sizeof *o);
	o->interval_ms = 10000;
	o->pull_bytes = 4 << 20;
	o->mode = REPORT_HUMAN;
	for (int i = 1; i < argc; i++)
	{
		const char *arg = argv[i];
		const char *value = NULL;
		const char *eq = strchr(arg, '=');
		char		name[32];
		bool		takes;

		if (strncmp(arg, "--", 2) != 0)
			return usage_error("unexpected argument '%s'", arg);
		snprintf(name, sizeof name, "%.*s", eq ? (int) (eq - arg) : (int) strlen(arg), arg);
		takes = strcmp(name, "--server") == 0 || strcmp(name, "--replica") == 0 ||
			strcmp(name, "--pull") == 0 || strcmp(name, "--listen") == 0 ||
			strcmp(name, "--db") == 0 || strcmp(name, "--interval") == 0 ||
			strcmp(name, "--pull-bytes") == 0 || strcmp(name, "--name") == 0 ||
			strcmp(name, "--server-key") == 0;
		if (takes)
		{
			if (eq)
				value = eq + 1;
			else if (i + 1 < argc)
				value = argv[++i];
			else
				return usage_error("option %s needs a value", name);
		}
		else if (eq)
			return usage_error("option %s takes no value", name);

		if (strcmp(name, "--help") == 0)
		{
			fputs(usage_text, stdout);
			return -1;
		}
		else if (strcmp(name, "--version") == 0)
		{
			printf("magic_sync_agent %s (protocol %d)\n", AGENT_VERSION, MS_PROTOCOL);
			return -1;
		}
		else if (strcmp(name, "--server") == 0)
			o->server = value;
		else if (strcmp(name, "--pull") == 0)
		{
			if (o->npull == PULLS_MAX)
				return usage_error("--pull is given at most %s times", "8");
			o->pull[o->npull++] = value;
		}
		else if (strcmp(name, "--listen") == 0)
			o->listen = value;
		else if (strcmp(name, "--replica") == 0)
			o->replica = value;
		else if (strcmp(name, "--db") == 0)
			o->db = value;
		else if (strcmp(name, "--name") == 0)
			o->name = value;
		else if (strcmp(name, "--server-key") == 0)
		{
			uint8_t		key[32];

			if (!agent_key_parse(value, key))
				return usage_error("--server-key takes the server's key as 64 hexadecimal digits"
								   " (sync.signing_key()), not '%s'", value);
			o->server_key = value;
		}
		else if (strcmp(name, "--once") == 0)
			o->once = true;
		else if (strcmp(name, "--json") == 0)
			o->mode = REPORT_JSON;
		else if (strcmp(name, "--quiet") == 0)
			o->mode = REPORT_QUIET;
		else if (strcmp(name, "--interval") == 0)
		{
			if (!parse_int(value, 10, 3600 * 1000, &o->interval_ms))
				return usage_error("--interval takes milliseconds from 10 to 3600000, not '%s'", value);
		}
		else if (strcmp(name, "--pull-bytes") == 0)
		{
			if (!parse_int(value, 1024, 1 << 30, &o->pull_bytes))
				return usage_error("--pull-bytes takes a number of bytes from 1024 to 1073741824, not '%s'", value);
		}
		else
			return usage_error("unknown option %s", name);
	}
	if (o->server == NULL)
		return usage_error("%s", "--server is required (a libpq connection string; '' for the PG* environment)");
	if (o->replica == NULL)
		return usage_error("%s", "--replica is required (the replica's uuid)");
	if (o->db == NULL || o->db[0] == '\0')
		return usage_error("%s", "--db is required (the replica's SQLite file)");
	if (check_conninfo("--server", o->server) != 0 || check_conninfo("--listen", o->listen) != 0 ||
		check_pulls(o) != 0)
		return EXIT_USAGE;
	return 0;
}

/* ---- one pass ----------------------------------------------------------- */

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
	int64_t		acked;

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
	free(up);
	if (rc != STEP_OK)
		return rc;
	st->uploads++;
	st->filed += replica_json_int(a->rep, a->answer, "$.filed");
	st->server_refused += replica_json_int(a->rep, a->answer, "$.refused");
	st->dropped += replica_json_int(a->rep, a->answer, "$.dropped");
	st->waiting += replica_json_int(a->rep, a->answer, "$.waiting");
	st->set_aside += replica_json_int(a->rep, a->answer, "$.set_aside");
	if (st->dropped_reason[0] == '\0')
		replica_json_text(a->rep, a->answer, "$.reasons.dropped[0]", st->dropped_reason, sizeof st->dropped_reason);
	if (st->refused_reason[0] == '\0')
		replica_json_text(a->rep, a->answer, "$.reasons.refused[0]", st->refused_reason, sizeof st->refused_reason);
	acked = replica_json_int(a->rep, a->answer, "$.acknowledged");
	if (acked > st->acknowledged)
		st->acknowledged = acked;
	/* what the last filing of the round says: acknowledgements mid-snapshot say so too */
	st->provisioning = replica_json_int(a->rep, a->answer, "$.provisioning") != 0;
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

static void
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
 * bound: the server's upload bound, looked at once a round, before its first
 * upload -- not before its first pull, which a notification is waiting on: rows
 * set aside as too large go up again when it changes (and when the agent starts)
 */
static void
bound(agent *a)
{
	int64_t		now;
	char		err[AGENT_ERROR_MAX];

	if (a->bound_looked)
		return;
	now = server_upload_bound(a->srv);
	if (a->bound >= 0 && now != a->bound)
		replica_retry_too_large(a->rep, err);
	a->bound = now;
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
static agent_status
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
			rc = took(a, st, err);
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

/*
 * pull: sync.pull where pulls.c says, a standby's when one answers; a
 * standby that fails leaves the pull to the next one, then to the primary.
 * *from: the connection the rows came from (server_pull_done).
 */
static agent_status
pull(agent *a, int64_t after, const uint8_t *claim, size_t claim_len, server **from,
	 pulled **rows, int *n, char err[AGENT_ERROR_MAX])
{
	for (;;)
	{
		bool		standby;
		agent_status rc;

		*from = pulls_conn(a->from, a->srv, &standby);
		rc = server_pull(*from, a->uuid_bytes, after, claim, claim_len, a->opt.pull_bytes, rows, n, err);
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
 * pass: pull and apply, a batch at a time, acknowledging each batch (a
 * snapshot once it ends); then file what remains to say.  *moved: whether
 * anything changed on either side.  In a snapshot, the next batch is pulled
 * while this one applies (server_pull_ahead): the server reads and sends it
 * meanwhile.
 */
static agent_status
pass(agent *a, round_stats *st, bool *moved, char err[AGENT_ERROR_MAX])
{
	round_stats before = *st;
	agent_status rc;
	bool		halt = false;
	server	   *from = NULL;
	bool		ahead = false;	/* the next batch is on its way from `from` */

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

		if (ahead)
		{
			ahead = false;
			rc = server_pull_next(from, &rows, &n, err);
			if (rc != STEP_OK)
				return rc;
		}
		else
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
			rc = pull(a, after, claim, claim_len, &from, &rows, &n, err);
			if (rc != STEP_OK)
				return rc;
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
			rc = replica_apply(a->rep, rows[i].message, rows[i].len, &res, err);
			if (rc == STEP_OK && i == 0 && a->bar.open && rows[n - 1].number > 0 &&
				strcmp(res.result, "applied") == 0)
				/* a snapshot's: its rest is pulled while this batch applies */
				ahead = server_pull_ahead(from, a->uuid_bytes, rows[n - 1].number, a->opt.pull_bytes, err) == STEP_OK;
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
			break;

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
	}
	rc = uploads(a, st, err);
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
	if (!parse_uuid(a.opt.replica, a.uuid, a.uuid_bytes))
		return usage_error("--replica takes a uuid (8-4-4-4-12 hexadecimal digits), not '%s'", a.opt.replica);
	report_init(a.opt.mode, a.opt.name);
	a.from = pulls_new(a.opt.pull, a.opt.npull);
	a.wait = waiter_new(a.opt.listen, a.opt.interval_ms);
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
		began = mono_ms();
		while (moved && !stop_signal && passes++ < PASSES_MAX)
		{
			moved = false;
			status = pass(&a, &st, &moved, err);
			if (status != STEP_OK)
				break;
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
		if (passes > 1 || round_did_something(&st))
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
		waiter_round(a.wait, passes > 1);
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
