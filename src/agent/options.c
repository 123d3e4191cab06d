/*-------------------------------------------------------------------------
 * options.c
 *	  magic_sync_agent's command line: its help, its options, each value
 *	  checked (connection strings as libpq reads them) before anything runs.
 *-------------------------------------------------------------------------
 */
#include "loop.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define AGENT_VERSION MS_VERSION	/* magic_sync.control's, from the Makefile */

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
"                     the agent wakes at once when the relay wrote to it.  The\n"
"                     pulls that go to the primary go on it too (its session\n"
"                     has just sent the notification, and is awake), once a\n"
"                     notification sent on --server's connection reached it\n"
"                     (the same database); on --server's when its role may not\n"
"                     pull, or while it is down.  Standbys (--pull) come first\n"
"  --listen-only      the --listen connection only listens: the pulls that go\n"
"                     to the primary go on --server's connection\n"
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

int
usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "magic_sync_agent: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'magic_sync_agent --help'.\n");
	return EXIT_USAGE;
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

/*
 * agent_getopt: the next option of a command line (getopt_long, long
 * options only but shorts' letters), its val; -1 at the end; '?' with why
 * when the command line is wrong: an argument that is no option, an option
 * unknown or abbreviated (only a whole name is taken, so that a new option
 * never changes what an old command line means), one that needs a value
 * and has none, or one given a value (--name=value) that takes none.
 * Values come as --name VALUE or --name=VALUE.
 */
int
agent_getopt(int argc, char **argv, const char *shorts, const struct option *opts, char *why, size_t size)
{
	char		optstring[16];
	int			at = optind;	/* the argument this call reads */
	int			index = -1;
	int			c;
	const char *arg;
	const char *eq;
	int			len;

	snprintf(optstring, sizeof optstring, "+:%s", shorts);
	opterr = 0;
	if (at < argc && argv[at][0] == '-' && argv[at][1] != '-' && argv[at][1] != '\0' &&
		(shorts[0] == '\0' || strchr(shorts, argv[at][1]) == NULL || argv[at][2] != '\0'))
	{
		snprintf(why, size, "unexpected argument '%s'", argv[at]);
		return '?';
	}
	c = getopt_long(argc, argv, optstring, opts, &index);
	if (c == -1)
	{
		if (optind == at + 1 && strcmp(argv[at], "--") == 0)
			snprintf(why, size, "unknown option %s", "--");
		else if (optind < argc)
			snprintf(why, size, "unexpected argument '%s'", argv[optind]);
		else
			return -1;
		return '?';
	}
	arg = argv[at];
	eq = strchr(arg, '=');
	len = eq ? (int) (eq - arg) : (int) strlen(arg);
	if (len > 31)
		len = 31;
	if (c == ':')
		snprintf(why, size, "option %.*s needs a value", len, arg);
	else if (c == '?' && optopt != 0 && eq != NULL)
		snprintf(why, size, "option %.*s takes no value", len, arg);
	else if (c == '?' || (index >= 0 && (strncmp(arg, "--", 2) != 0 || strlen(opts[index].name) != (size_t) len - 2 ||
										  strncmp(arg + 2, opts[index].name, (size_t) len - 2) != 0)))
		snprintf(why, size, "unknown option %.*s", len, arg);
	else
		return c;
	return '?';
}

enum
{
	OPT_SERVER = 1, OPT_PULL, OPT_LISTEN, OPT_LISTEN_ONLY, OPT_REPLICA, OPT_DB, OPT_NAME, OPT_SERVER_KEY, OPT_ONCE,
	OPT_JSON, OPT_QUIET, OPT_INTERVAL, OPT_PULL_BYTES, OPT_HELP, OPT_VERSION
};

static const struct option long_options[] = {
	{"server", required_argument, NULL, OPT_SERVER},
	{"pull", required_argument, NULL, OPT_PULL},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"listen-only", no_argument, NULL, OPT_LISTEN_ONLY},
	{"replica", required_argument, NULL, OPT_REPLICA},
	{"db", required_argument, NULL, OPT_DB},
	{"name", required_argument, NULL, OPT_NAME},
	{"server-key", required_argument, NULL, OPT_SERVER_KEY},
	{"once", no_argument, NULL, OPT_ONCE},
	{"json", no_argument, NULL, OPT_JSON},
	{"quiet", no_argument, NULL, OPT_QUIET},
	{"interval", required_argument, NULL, OPT_INTERVAL},
	{"pull-bytes", required_argument, NULL, OPT_PULL_BYTES},
	{"help", no_argument, NULL, OPT_HELP},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0}
};

/* parse_options: 0 to run, -1 to exit 0 (--help, --version), else an exit code */
int
parse_options(int argc, char **argv, options *o)
{
	int			c;
	char		why[256];

	memset(o, 0, sizeof *o);
	o->interval_ms = 10000;
	o->pull_bytes = 4 << 20;
	o->mode = REPORT_HUMAN;
	while ((c = agent_getopt(argc, argv, "", long_options, why, sizeof why)) != -1)
	{
		const char *value = optarg;

		switch (c)
		{
			case OPT_HELP:
				fputs(usage_text, stdout);
				return -1;
			case OPT_VERSION:
				printf("magic_sync_agent %s (protocol %d)\n", AGENT_VERSION, MS_PROTOCOL);
				return -1;
			case OPT_SERVER:
				o->server = value;
				break;
			case OPT_PULL:
				if (o->npull == PULLS_MAX)
					return usage_error("--pull is given at most %s times", "8");
				o->pull[o->npull++] = value;
				break;
			case OPT_LISTEN:
				o->listen = value;
				break;
			case OPT_LISTEN_ONLY:
				o->listen_only = true;
				break;
			case OPT_REPLICA:
				o->replica = value;
				break;
			case OPT_DB:
				o->db = value;
				break;
			case OPT_NAME:
				o->name = value;
				break;
			case OPT_SERVER_KEY:
				{
					uint8_t		key[32];

					if (!agent_key_parse(value, key))
						return usage_error("--server-key takes the server's key as 64 hexadecimal digits"
										   " (sync.signing_key()), not '%s'", value);
					o->server_key = value;
				}
				break;
			case OPT_ONCE:
				o->once = true;
				break;
			case OPT_JSON:
				o->mode = REPORT_JSON;
				break;
			case OPT_QUIET:
				o->mode = REPORT_QUIET;
				break;
			case OPT_INTERVAL:
				if (!parse_int(value, 10, 3600 * 1000, &o->interval_ms))
					return usage_error("--interval takes milliseconds from 10 to 3600000, not '%s'", value);
				break;
			case OPT_PULL_BYTES:
				if (!parse_int(value, 1024, 1 << 30, &o->pull_bytes))
					return usage_error("--pull-bytes takes a number of bytes from 1024 to 1073741824, not '%s'", value);
				break;
			default:
				return usage_error("%s", why);
		}
	}
	if (o->server == NULL)
		return usage_error("%s", "--server is required (a libpq connection string; '' for the PG* environment)");
	if (o->replica == NULL)
		return usage_error("%s", "--replica is required (the replica's uuid)");
	if (o->db == NULL || o->db[0] == '\0')
		return usage_error("%s", "--db is required (the replica's SQLite file)");
	if (o->listen_only && o->listen == NULL)
		return usage_error("%s", "--listen-only needs --listen (the connection that would only listen)");
	if (check_conninfo("--server", o->server) != 0 || check_conninfo("--listen", o->listen) != 0 ||
		check_pulls(o) != 0)
		return EXIT_USAGE;
	return 0;
}
