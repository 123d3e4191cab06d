/*-------------------------------------------------------------------------
 * server.c
 *	  The agent's libpq side: connecting, pulling, filing, waiting.
 *
 * Two statements carry everything, with binary parameters:
 *
 *   SELECT number, message FROM sync.pull($1, $2, $3, $4)  -- uuid, int8, int4, bytea
 *   SELECT sync.file($1, $2)                           -- uuid, bytea
 *
 * The connection keeps no session state, so it may go through pgbouncer in
 * transaction pooling: unnamed statements only (PQexecParams), nothing SET,
 * no LISTEN.  Only a connection opened for notifications (--listen, a
 * direct one: poll.c) listens on the channel magic_sync: the relay notifies
 * it, at the commit of a pass, with the uuids of the replicas it wrote to
 * (comma-separated).  It pulls too, once it proved to be the same database
 * as --server's (server_same): each pull is one statement, in a transaction
 * of its own, so its session is never left in a transaction, where it
 * would hold back the notifications.  There, a session of its own, the pull
 * is prepared once (server_direct), so that each one binds and runs without
 * being parsed and planned anew: on a pull the server held, that work came
 * after the relay's pass, on the way to the device.
 *
 * Errors are sorted by SQLSTATE, as the server sorts them
 * (sync.is_transient): classes 08, 40, 53, 57 and 55P03, and a broken
 * connection, are the infrastructure's; 28000 and 28P01 (authentication),
 * 3D000 (no such database), 42501 (not this replica's role) and 42704 (no
 * such replica) are refusals; 3F000 (no schema sync) is a database where
 * magic_sync is not created yet, which the agent waits for; anything else
 * is a failure of the data or the code.  A connection refused is sorted by
 * the SQLSTATE the server sent, never by its words (they may be in any
 * language).
 *-------------------------------------------------------------------------
 */
#include "agent.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"

#define UUIDOID 2950
#define BYTEAOID 17
#define INT8OID 20
#define INT4OID 23

struct server
{
	PGconn	   *conn;
	PGresult   *pulled;			/* the last pull's result, alive while its rows are read */
	pulled	   *rows;
	int			cap;
	bool		ahead;			/* a pull sent ahead is on its way (server_pull_ahead) */
	bool		no_claims;		/* the server's sync.pull takes no claim (an earlier version's) */
	bool		direct;			/* a session of its own, not a pool's: its pull may be prepared */
	bool		prepared;		/* the pull is prepared on it (PULL_NAME) */
	/* a waiting pull (server_pull_wait): CALL sync.pull_wait, then sync.pull, in a pipeline */
	int			waiting;		/* WAIT_NONE, WAIT_SENT (on its way), WAIT_DONE (its pull's result in) */
	int			syncs;			/* of its pipeline's two, received */
	int			nulls;			/* results' ends received in a row */
	bool		wait_refused;	/* the CALL failed: the server cannot wait (an earlier version, a standby) */
	bool		wait_failed;	/* this wait's CALL failed (refused, or cancelled): its pull was not held */
	bool		held;			/* the last pull's rows are a waiting pull's the server held (server_pull_held) */
	PGresult   *waited;			/* its pull's result, until a pull with the same arguments takes it */
	int64_t		waited_after;
	int			waited_bytes;
	uint8_t		waited_claim[MS_APPLIED_MAX];
	size_t		waited_claim_len;
	char		wait_why[AGENT_ERROR_MAX];	/* why the server refused to wait */
};

enum
{
	WAIT_NONE, WAIT_SENT, WAIT_DONE
};

static int64_t now_ms(void);
static void cancel(server *s);

/* trim: libpq's messages on one line: runs of white space as one space */
static void
trim(char *s)
{
	char	   *out = s;
	bool		space = false;

	for (char *p = s; *p; p++)
	{
		if (*p == '\n' || *p == '\t' || *p == ' ')
			space = out != s;
		else
		{
			if (space)
				*out++ = ' ';
			space = false;
			*out++ = *p;
		}
	}
	*out = '\0';
}

/* the class of a SQLSTATE: the infrastructure's, a refusal, or a failure */
static agent_status
sqlstate_status(const char *state)
{
	if (strncmp(state, "08", 2) == 0 || strncmp(state, "40", 2) == 0 ||
		strncmp(state, "53", 2) == 0 || strncmp(state, "57", 2) == 0 ||
		strcmp(state, "55P03") == 0)
		return STEP_TRANSIENT;
	if (strncmp(state, "28", 2) == 0 || strcmp(state, "3D000") == 0 ||
		strcmp(state, "42501") == 0 || strcmp(state, "42704") == 0)
		return STEP_REFUSED;
	if (strcmp(state, "3F000") == 0)
		return STEP_UNREADY;
	return STEP_FAILED;
}

/* unready: what the agent waits for when the database has no magic_sync */
static void
unready(char err[AGENT_ERROR_MAX])
{
	size_t		n = strlen(err);

	snprintf(err + n, AGENT_ERROR_MAX - n, " (the database has no magic_sync yet: CREATE EXTENSION magic_sync in it,"
			 " or give --server the database it is in; the agent tries again meanwhile)");
}

/*
 * connect_sqlstate: the SQLSTATE of the error a server sent when it refused
 * the connection, as libpq writes it in verbose mode ("SEVERITY:  XXXXX:
 * message"); false when the server sent none (it was not reached).
 */
static bool
connect_sqlstate(const char *message, char state[6])
{
	for (const char *p = strstr(message, ":  "); p != NULL; p = strstr(p + 1, ":  "))
	{
		const char *c = p + 3;
		int			i;

		for (i = 0; i < 5; i++)
			if (!((c[i] >= '0' && c[i] <= '9') || (c[i] >= 'A' && c[i] <= 'Z')))
				break;
		if (i == 5 && c[5] == ':')
		{
			memcpy(state, c, 5);
			state[5] = '\0';
			return true;
		}
	}
	return false;
}

/* connect_message: libpq's verbose message without its LOCATION line, on one line */
static void
connect_message(const char *message, char err[AGENT_ERROR_MAX])
{
	const char *loc = strstr(message, "LOCATION:");
	int			n = loc ? (int) (loc - message) : (int) strlen(message);

	snprintf(err, AGENT_ERROR_MAX, "%.*s", n, message);
	trim(err);
}

static agent_status
result_status(server *s, PGresult *res, const char *what, char err[AGENT_ERROR_MAX])
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *message = res ? PQresultErrorMessage(res) : PQerrorMessage(s->conn);

	snprintf(err, AGENT_ERROR_MAX, "%s: %s", what, message && *message ? message : "no answer");
	trim(err);
	if (PQstatus(s->conn) == CONNECTION_BAD || state == NULL)
		return STEP_TRANSIENT;
	if (sqlstate_status(state) == STEP_UNREADY)
		unready(err);
	return sqlstate_status(state);
}

/* notice: what the server says besides results (a shutdown, a warning) goes to the report */
static void
notice(void *arg, const char *message)
{
	char		line[AGENT_ERROR_MAX];

	(void) arg;
	snprintf(line, sizeof line, "%s", message);
	trim(line);
	report_notice(line);
}

/*
 * server_conninfo_check: whether libpq can read a connection string (a
 * misspelt keyword, "hots=", is the command line's fault, not the
 * network's); the reason in err when it cannot.
 */
bool
server_conninfo_check(const char *conninfo, char err[AGENT_ERROR_MAX])
{
	char	   *why = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &why);

	if (opts == NULL)
	{
		snprintf(err, AGENT_ERROR_MAX, "%s", why ? why : "out of memory");
		trim(err);
		PQfreemem(why);
		return false;
	}
	PQconninfoFree(opts);
	return true;
}

/* connect_wait: drives a connection started with PQconnectStartParams to its end */
static void
connect_wait(PGconn *conn)
{
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;

	while (st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED)
	{
		struct pollfd pfd;

		pfd.fd = PQsocket(conn);
		pfd.events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT;
		pfd.revents = 0;
		if (pfd.fd < 0)
			break;
		/* connect_timeout bounds the whole attempt inside libpq */
		if (poll(&pfd, 1, 1000) < 0 && errno != EINTR)
			break;
		st = PQconnectPoll(conn);
	}
}

/*
 * server_connect: connects with the caller's connection string (libpq's
 * defaults and PG* variables fill the rest; the string wins over the
 * agent's own defaults: a 10 s connect timeout, TCP keepalives).  Errors in
 * verbose mode while connecting, so that a refusal is known by its SQLSTATE.
 */
agent_status
server_connect(server **out, const char *conninfo, char err[AGENT_ERROR_MAX])
{
	const char *const keys[] = {
		"connect_timeout", "keepalives_idle", "keepalives_interval", "keepalives_count",
		"fallback_application_name", "dbname", NULL
	};
	const char *const values[] = {"10", "30", "10", "3", "magic_sync_agent", conninfo, NULL};
	server	   *s;
	char		state[6];

	*out = NULL;
	s = calloc(1, sizeof *s);
	if (s == NULL)
	{
		snprintf(err, AGENT_ERROR_MAX, "out of memory");
		return STEP_FAILED;
	}
	s->conn = PQconnectStartParams(keys, values, 1);
	if (s->conn != NULL && PQstatus(s->conn) != CONNECTION_BAD)
	{
		PQsetErrorVerbosity(s->conn, PQERRORS_VERBOSE);
		connect_wait(s->conn);
	}
	if (s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK)
	{
		agent_status st = STEP_TRANSIENT;

		if (s->conn == NULL)
			snprintf(err, AGENT_ERROR_MAX, "out of memory");
		else
		{
			connect_message(PQerrorMessage(s->conn), err);
			if (connect_sqlstate(PQerrorMessage(s->conn), state))
				st = sqlstate_status(state) == STEP_REFUSED ? STEP_REFUSED : STEP_TRANSIENT;
		}
		server_close(s);
		return st;
	}
	PQsetErrorVerbosity(s->conn, PQERRORS_DEFAULT);
	PQsetNoticeProcessor(s->conn, notice, NULL);
	*out = s;
	return STEP_OK;
}

/*
 * server_listen: LISTEN magic_sync, on a connection of its own that goes
 * straight to the server (a pooled one would lose it with its session).
 */
agent_status
server_listen(server *s, char err[AGENT_ERROR_MAX])
{
	PGresult   *res = PQexec(s->conn, "LISTEN magic_sync");
	agent_status st = STEP_OK;

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		st = result_status(s, res, "LISTEN magic_sync", err);
	PQclear(res);
	return st;
}

/* server_broken: whether the connection broke (its next statement cannot run) */
bool
server_broken(const server *s)
{
	return s == NULL || PQstatus(s->conn) == CONNECTION_BAD;
}

/*
 * server_same: whether a notification sent on `other` reaches `listener`,
 * that is whether both are sessions of one database of one server (--server
 * may go through a pool, --listen straight: their connection strings cannot
 * tell).  On a channel of its own, named at random, so that no other agent
 * hears it; up to SAME_WAIT_MS.  Other notifications that arrive meanwhile
 * are let go of: the caller pulls next, and the pull finds what they told.
 */
#define SAME_WAIT_MS 2000

agent_status
server_same(server *listener, server *other, bool *same, char err[AGENT_ERROR_MAX])
{
	uint8_t		nonce[8];
	char		channel[64];
	char		sql[96];
	const char *values[1] = {channel};
	PGresult   *res;
	agent_status st = STEP_OK;
	int64_t		deadline;

	*same = false;
	if (getrandom(nonce, sizeof nonce, 0) != (ssize_t) sizeof nonce)
	{
		int64_t		t = now_ms() ^ ((int64_t) getpid() << 32);

		memcpy(nonce, &t, sizeof nonce);
	}
	snprintf(channel, sizeof channel, "magic_sync_same_");
	for (int i = 0; i < 8; i++)
		snprintf(channel + strlen(channel), 3, "%02x", nonce[i]);
	/* LISTEN takes no parameter: the channel is the agent's own, hexadecimal digits */
	snprintf(sql, sizeof sql, "LISTEN %s", channel);
	res = PQexec(listener->conn, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		st = result_status(listener, res, "LISTEN on --listen's connection", err);
	PQclear(res);
	if (st != STEP_OK)
		return st;
	res = PQexecParams(other->conn, "SELECT pg_catalog.pg_notify($1, '')", 1, NULL, values, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		st = result_status(other, res, "pg_notify on --server's connection", err);
	PQclear(res);
	deadline = now_ms() + SAME_WAIT_MS;
	while (st == STEP_OK && !*same && now_ms() < deadline)
	{
		struct pollfd pfd;
		PGnotify   *note;

		pfd.fd = PQsocket(listener->conn);
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (pfd.fd < 0 || (poll(&pfd, 1, 50) > 0 && !PQconsumeInput(listener->conn)))
			st = result_status(listener, NULL, "--listen's connection", err);
		while ((note = PQnotifies(listener->conn)) != NULL)
		{
			*same = *same || strcmp(note->relname, channel) == 0;
			PQfreemem(note);
		}
	}
	if (st != STEP_OK)
		return st;
	snprintf(sql, sizeof sql, "UNLISTEN %s", channel);
	res = PQexec(listener->conn, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		st = result_status(listener, res, "UNLISTEN on --listen's connection", err);
	PQclear(res);
	return st;
}

void
server_close(server *s)
{
	if (s == NULL)
		return;
	server_pull_done(s);
	/* a wait on its way ends now, not at the backend's next look at its client (a second) */
	if (s->waiting == WAIT_SENT && s->conn != NULL && PQstatus(s->conn) == CONNECTION_OK)
		cancel(s);
	PQclear(s->waited);
	free(s->rows);
	if (s->conn)
		PQfinish(s->conn);
	free(s);
}

/* undefined_function: the server has no such function (42883): an earlier version */
static bool
undefined_function(PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	return PQresultStatus(res) == PGRES_FATAL_ERROR && state != NULL && strcmp(state, "42883") == 0;
}

static void
be64(uint8_t out[8], uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		out[i] = (uint8_t) v;
}

static int64_t
get_be64(const uint8_t *b)
{
	uint64_t	v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | b[i];
	return (int64_t) v;
}

static agent_status take(server *s, PGresult *res, pulled **rows, int *n, char err[AGENT_ERROR_MAX]);
static bool wait_collect(server *s);
static void wait_settle(server *s);

/*
 * The pull, in a transaction of its own whose commit waits for no flush:
 * what it writes (the times each message went out, the answers given) is
 * bookkeeping a crash may lose -- the answer goes again, a count is one
 * short -- and a flush would hold back every message it returns by one
 * fsync.  The messages themselves are flushed before they leave
 * (src/pg/transport/pull.c).  set_config(..., true) lasts the transaction:
 * no session state.
 */
#define PULL_SQL(args) "SELECT p.number, p.message FROM pg_catalog.set_config('synchronous_commit', 'off', true) s," \
	" sync.pull(" args ") p"

/*
 * The pull prepared on a direct connection (server_direct): the same
 * statement, with the claim.  Prepared at its first use, with a round trip
 * of its own; a connection where that fails (a server that takes no claim,
 * or one a pool stands in front of after all: 26000 at its execution) pulls
 * unnamed from then on.
 */
#define PULL_NAME "magic_sync_pull"

/*
 * server_direct: the connection is a session of its own, straight to the
 * server (--listen's, proven by server_same): the pull may be prepared on it
 */
void
server_direct(server *s)
{
	if (s != NULL)
		s->direct = true;
}

/* prepare_pull: whether the pull is prepared on s (prepared now if it may be) */
static bool
prepare_pull(server *s)
{
	static const Oid types[4] = {UUIDOID, INT8OID, INT4OID, BYTEAOID};
	PGresult   *res;

	if (!s->direct || s->no_claims || s->prepared)
		return s->prepared;
	res = PQprepare(s->conn, PULL_NAME, PULL_SQL("$1, $2, $3, $4"), 4, types);
	s->prepared = PQresultStatus(res) == PGRES_COMMAND_OK;
	PQclear(res);
	/* not tried again on this connection: the unnamed pull says what failed */
	s->direct = s->prepared;
	return s->prepared;
}

/*
 * lost_prepared: a prepared pull failed because its statement is gone
 * (26000: a pool in front after all) or its plan cannot stand (0A000: the
 * function's result changed under it, an ALTER EXTENSION UPDATE): the
 * connection pulls unnamed from then on; true when the pull goes again so
 */
static bool
lost_prepared(server *s, PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	if (!s->prepared || PQresultStatus(res) != PGRES_FATAL_ERROR || state == NULL ||
		(strcmp(state, "26000") != 0 && strcmp(state, "0A000") != 0) || PQstatus(s->conn) == CONNECTION_BAD)
		return false;
	s->prepared = false;
	s->direct = false;
	return true;
}

/*
 * server_pull: the Filed answers waiting for the replica, then the messages
 * of its outbox numbered after `after`, up to max_bytes (at least one).
 * claim is what the replica says it applied (sync_applied(); empty before
 * the first message): the server checks `after` against it.
 */
agent_status
server_pull(server *s, const uint8_t replica[16], int64_t after, const uint8_t *claim, size_t claim_len,
			int max_bytes, pulled **rows, int *n, char err[AGENT_ERROR_MAX])
{
	const Oid	types[4] = {UUIDOID, INT8OID, INT4OID, BYTEAOID};
	uint8_t		after_be[8];
	uint8_t		bytes_be[4];
	static const uint8_t none[1] = {0};
	const char *values[4] = {(const char *) replica, (const char *) after_be, (const char *) bytes_be,
	(const char *) (claim_len > 0 ? claim : none)};
	const int	lengths[4] = {16, 8, 4, (int) claim_len};
	const int	formats[4] = {1, 1, 1, 1};
	PGresult   *res;

	*rows = NULL;
	*n = 0;
	server_pull_done(s);
	s->held = false;
	if (s->waiting != WAIT_NONE)
	{
		/* a waiting pull's: taken when it pulled what this one asks, else let go of */
		wait_settle(s);
		res = s->waited;
		s->waited = NULL;
		s->waiting = WAIT_NONE;
		if (res != NULL && PQresultStatus(res) == PGRES_TUPLES_OK && s->waited_after == after &&
			s->waited_bytes == max_bytes && s->waited_claim_len == claim_len &&
			(claim_len == 0 || memcmp(s->waited_claim, claim, claim_len) == 0))
		{
			s->held = !s->wait_failed;
			return take(s, res, rows, n, err);
		}
		PQclear(res);
	}
	be64(after_be, (uint64_t) after);
	for (int i = 0; i < 4; i++)
		bytes_be[i] = (uint8_t) ((uint32_t) max_bytes >> (24 - 8 * i));
	if (prepare_pull(s))
	{
		res = PQexecPrepared(s->conn, PULL_NAME, 4, values, lengths, formats, 1);
		if (!lost_prepared(s, res))
			return take(s, res, rows, n, err);
		PQclear(res);
	}
	res = PQexecParams(s->conn, s->no_claims ? PULL_SQL("$1, $2, $3") : PULL_SQL("$1, $2, $3, $4"),
					   s->no_claims ? 3 : 4, types, values, lengths, formats, 1);
	if (!s->no_claims && undefined_function(res))
	{
		/* a server not updated yet (ALTER EXTENSION magic_sync UPDATE): pull as it takes it */
		PQclear(res);
		s->no_claims = true;
		res = PQexecParams(s->conn, PULL_SQL("$1, $2, $3"), 3, types, values, lengths, formats, 1);
		if (undefined_function(res))
		{
			/* no sync.pull at all: a schema sync that is not magic_sync's */
			s->no_claims = false;
			result_status(s, res, "sync.pull", err);
			unready(err);
			PQclear(res);
			return STEP_UNREADY;
		}
	}
	return take(s, res, rows, n, err);
}

/*
 * server_pull_wait: a pull that waits on the server for the relay's next
 * pass that writes for the replica, up to timeout_ms, sent and not waited
 * for: CALL sync.pull_wait, then sync.pull as server_pull sends it, in one
 * pipeline, each with a Sync of its own -- each its own transaction, the
 * procedure's outside any block, so that it holds no snapshot while it
 * waits (src/pg/transport/pull_wait.c) -- and the pull runs the moment the
 * wait ends, without a round trip to the agent.  server_wait says when its
 * result is in; the next server_pull with the same arguments takes it (one
 * with others, or before it came, cancels the wait and pulls anew).  The
 * notifications received so far are let go of: the wait looks at the outbox
 * before it sleeps.
 */
#define WAIT_SQL "CALL sync.pull_wait($1, $2, $3)"

agent_status
server_pull_wait(server *s, const uint8_t replica[16], int64_t after, int timeout_ms,
				 const uint8_t *claim, size_t claim_len, int max_bytes, char err[AGENT_ERROR_MAX])
{
	const Oid	types[4] = {UUIDOID, INT8OID, INT4OID, BYTEAOID};
	uint8_t		after_be[8];
	uint8_t		timeout_be[4];
	uint8_t		bytes_be[4];
	static const uint8_t none[1] = {0};
	const char *wait_values[3] = {(const char *) replica, (const char *) after_be, (const char *) timeout_be};
	const char *pull_values[4] = {(const char *) replica, (const char *) after_be, (const char *) bytes_be,
	(const char *) (claim_len > 0 ? claim : none)};
	const int	lengths[4] = {16, 8, 4, (int) claim_len};
	const int	formats[4] = {1, 1, 1, 1};
	PGnotify   *note;
	bool		prepared;

	if (claim_len > sizeof s->waited_claim)
	{
		snprintf(err, AGENT_ERROR_MAX, "a claim of %zu bytes", claim_len);
		return STEP_FAILED;
	}
	server_pull_drop(s);
	PQclear(s->waited);
	s->waited = NULL;
	/* before the pipeline: prepared once, with a round trip of its own */
	prepared = prepare_pull(s);
	while ((note = PQnotifies(s->conn)) != NULL)
		PQfreemem(note);
	be64(after_be, (uint64_t) after);
	for (int i = 0; i < 4; i++)
	{
		bytes_be[i] = (uint8_t) ((uint32_t) max_bytes >> (24 - 8 * i));
		timeout_be[i] = (uint8_t) ((uint32_t) timeout_ms >> (24 - 8 * i));
	}
	if (!PQenterPipelineMode(s->conn))
		return result_status(s, NULL, "sync.pull_wait", err);
	s->waiting = WAIT_SENT;
	s->syncs = 0;
	s->nulls = 0;
	s->wait_failed = false;
	s->waited_after = after;
	s->waited_bytes = max_bytes;
	s->waited_claim_len = claim_len;
	if (claim_len > 0)
		memcpy(s->waited_claim, claim, claim_len);
	if (!PQsendQueryParams(s->conn, WAIT_SQL, 3, types, wait_values, lengths, formats, 0) ||
		!PQpipelineSync(s->conn) ||
		!(prepared ? PQsendQueryPrepared(s->conn, PULL_NAME, 4, pull_values, lengths, formats, 1) :
		  PQsendQueryParams(s->conn, s->no_claims ? PULL_SQL("$1, $2, $3") : PULL_SQL("$1, $2, $3, $4"),
							s->no_claims ? 3 : 4, types, pull_values, lengths, formats, 1)) ||
		!PQpipelineSync(s->conn))
	{
		agent_status st = result_status(s, NULL, "sync.pull_wait", err);

		/* what went is received and let go of: the connection serves on, or is lost */
		wait_settle(s);
		PQclear(s->waited);
		s->waited = NULL;
		s->waiting = WAIT_NONE;
		return st;
	}
	return STEP_OK;
}

/*
 * server_pull_held: whether the last server_pull's rows are a waiting
 * pull's that the server held: its CALL returned (a pass wrote for the
 * replica, or its timeout passed), not refused nor cancelled
 */
bool
server_pull_held(const server *s)
{
	return s != NULL && s->held;
}

/* server_wait_refused: whether the server refused to wait (no sync.pull_wait, a standby), and why */
bool
server_wait_refused(const server *s, char why[AGENT_ERROR_MAX])
{
	if (s == NULL || !s->wait_refused)
		return false;
	snprintf(why, AGENT_ERROR_MAX, "%s", s->wait_why);
	return true;
}

/*
 * wait_collect: reads what came of the waiting pull so far, without
 * blocking; true once all of it came (both Syncs), or the connection broke.
 * The CALL's own failure, but for the infrastructure's (a cancel, 57014; a
 * backend terminated, 57P01), says the server cannot wait: the pull behind
 * it ran all the same.
 */
static bool
wait_collect(server *s)
{
	while (s->waiting == WAIT_SENT && PQstatus(s->conn) != CONNECTION_BAD && !PQisBusy(s->conn))
	{
		PGresult   *res = PQgetResult(s->conn);
		const char *state;

		if (res == NULL)
		{
			/* a result's end; two in a row: nothing more is on its way */
			if (++s->nulls > 1)
				break;
			continue;
		}
		s->nulls = 0;
		if (PQresultStatus(res) == PGRES_PIPELINE_SYNC)
		{
			if (++s->syncs == 2)
			{
				s->waiting = WAIT_DONE;
				(void) PQexitPipelineMode(s->conn);
			}
		}
		else if (s->syncs == 0 && PQresultStatus(res) == PGRES_FATAL_ERROR)
		{
			/* a cancel, a shutdown, a connection lost: the next wait may go; the rest is for good */
			s->wait_failed = true;
			state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
			if (state != NULL && sqlstate_status(state) != STEP_TRANSIENT && PQstatus(s->conn) != CONNECTION_BAD)
			{
				s->wait_refused = true;
				snprintf(s->wait_why, sizeof s->wait_why, "%s", PQresultErrorMessage(res));
				trim(s->wait_why);
			}
		}
		else if (s->syncs == 1 && s->waited == NULL)
		{
			s->waited = res;
			res = NULL;
		}
		PQclear(res);
	}
	if (s->waiting == WAIT_SENT && PQstatus(s->conn) == CONNECTION_BAD)
		s->waiting = WAIT_DONE;
	return s->waiting != WAIT_SENT;
}

/* cancel: asks the server to cancel what the connection runs (the wait) */
static void
cancel(server *s)
{
	PGcancel   *c = PQgetCancel(s->conn);
	char		why[256];

	if (c == NULL)
		return;
	(void) PQcancel(c, why, sizeof why);
	PQfreeCancel(c);
}

/* wait_settle: a waiting pull still on its way is cancelled, and what came of it received */
static void
wait_settle(server *s)
{
	if (s->waiting != WAIT_SENT || wait_collect(s))
		return;
	cancel(s);
	while (!wait_collect(s))
	{
		struct pollfd pfd;

		pfd.fd = PQsocket(s->conn);
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (pfd.fd < 0 || (poll(&pfd, 1, 1000) < 0 && errno != EINTR) || !PQconsumeInput(s->conn))
			break;
	}
	if (s->waiting == WAIT_SENT)
		s->waiting = WAIT_DONE;
}

/* take: the rows of a pull's result, res, kept alive in s until server_pull_done */
static agent_status
take(server *s, PGresult *res, pulled **rows, int *n, char err[AGENT_ERROR_MAX])
{
	int			count;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		agent_status st = result_status(s, res, "sync.pull", err);

		PQclear(res);
		return st;
	}
	count = PQntuples(res);
	if (count > s->cap)
	{
		pulled	   *grown = realloc(s->rows, (size_t) count * sizeof *grown);

		if (grown == NULL)
		{
			PQclear(res);
			snprintf(err, AGENT_ERROR_MAX, "out of memory");
			return STEP_FAILED;
		}
		s->rows = grown;
		s->cap = count;
	}
	for (int i = 0; i < count; i++)
	{
		s->rows[i].number = PQgetisnull(res, i, 0) || PQgetlength(res, i, 0) != 8 ? 0 :
			get_be64((const uint8_t *) PQgetvalue(res, i, 0));
		s->rows[i].message = (const uint8_t *) PQgetvalue(res, i, 1);
		s->rows[i].len = (size_t) PQgetlength(res, i, 1);
	}
	s->pulled = res;
	*rows = s->rows;
	*n = count;
	return STEP_OK;
}

/*
 * server_pull_ahead: the next pull, sent before the rows of the last one are
 * applied, so that the server reads the next batch meanwhile (the rest of a
 * snapshot).  It claims nothing: the pull before it did, and the server
 * reads what waits after `after`.  STEP_OK when it is on its way.
 */
agent_status
server_pull_ahead(server *s, const uint8_t replica[16], int64_t after, int max_bytes, char err[AGENT_ERROR_MAX])
{
	const Oid	types[3] = {UUIDOID, INT8OID, INT4OID};
	uint8_t		after_be[8];
	uint8_t		bytes_be[4];
	const char *values[3] = {(const char *) replica, (const char *) after_be, (const char *) bytes_be};
	const int	lengths[3] = {16, 8, 4};
	const int	formats[3] = {1, 1, 1};

	be64(after_be, (uint64_t) after);
	for (int i = 0; i < 4; i++)
		bytes_be[i] = (uint8_t) ((uint32_t) max_bytes >> (24 - 8 * i));
	if (!PQsendQueryParams(s->conn, PULL_SQL("$1, $2, $3"),
						   3, types, values, lengths, formats, 1))
		return result_status(s, NULL, "sync.pull", err);
	s->ahead = true;
	return STEP_OK;
}

/* its result's rows, once the last pull's rows are applied (the same as server_pull's) */
agent_status
server_pull_next(server *s, pulled **rows, int *n, char err[AGENT_ERROR_MAX])
{
	PGresult   *res;
	PGresult   *last = NULL;

	*rows = NULL;
	*n = 0;
	server_pull_done(s);
	s->ahead = false;
	while ((res = PQgetResult(s->conn)) != NULL)
	{
		PQclear(last);
		last = res;
	}
	if (last == NULL)
		return result_status(s, NULL, "sync.pull", err);
	return take(s, last, rows, n, err);
}

/* server_pull_drop: a pull sent ahead that is not wanted after all, received and let go */
void
server_pull_drop(server *s)
{
	PGresult   *res;

	if (s == NULL || !s->ahead)
		return;
	while ((res = PQgetResult(s->conn)) != NULL)
		PQclear(res);
	s->ahead = false;
}

void
server_pull_done(server *s)
{
	if (s->pulled)
		PQclear(s->pulled);
	s->pulled = NULL;
}

/* server_mark: pg_current_snapshot(), as text, to ask sync.settled with later */
agent_status
server_mark(server *s, char *mark, size_t size, char err[AGENT_ERROR_MAX])
{
	PGresult   *res = PQexecParams(s->conn, "SELECT pg_current_snapshot()::text", 0, NULL, NULL, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		agent_status st = result_status(s, res, "pg_current_snapshot", err);

		PQclear(res);
		return st;
	}
	snprintf(mark, size, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return STEP_OK;
}

/* server_settled: sync.settled(replica, mark) */
agent_status
server_settled(server *s, const uint8_t replica[16], const char *mark, int64_t *through, bool *none,
			   char err[AGENT_ERROR_MAX])
{
	const Oid	types[2] = {UUIDOID, 0};
	const char *values[2] = {(const char *) replica, mark};
	const int	lengths[2] = {16, 0};
	const int	formats[2] = {1, 0};
	PGresult   *res;

	*through = -1;
	*none = false;
	res = PQexecParams(s->conn, "SELECT sync.settled($1, $2::pg_snapshot)", 2, types, values, lengths, formats, 0);
	if (undefined_function(res))
	{
		/* a server not updated yet: --once ends as it always did */
		PQclear(res);
		*none = true;
		return STEP_OK;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		agent_status st = result_status(s, res, "sync.settled", err);

		PQclear(res);
		return st;
	}
	if (!PQgetisnull(res, 0, 0))
		*through = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return STEP_OK;
}

/*
 * server_signing_key: sync.signing_key(), the public key the server signs
 * its messages with (docs/protocol.md 2.4): *has when it has one (NULL
 * before its first relay pass made it), *none when it has no such function
 * (a server not updated yet: its messages are unsigned)
 */
agent_status
server_signing_key(server *s, uint8_t key[32], bool *has, bool *none, char err[AGENT_ERROR_MAX])
{
	PGresult   *res = PQexecParams(s->conn, "SELECT sync.signing_key()", 0, NULL, NULL, NULL, NULL, 1);

	*has = false;
	*none = false;
	if (undefined_function(res))
	{
		PQclear(res);
		*none = true;
		return STEP_OK;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		agent_status st = result_status(s, res, "sync.signing_key", err);

		PQclear(res);
		return st;
	}
	if (!PQgetisnull(res, 0, 0))
	{
		if (PQgetlength(res, 0, 0) != 32)
		{
			snprintf(err, AGENT_ERROR_MAX, "sync.signing_key() returned %d bytes, not an Ed25519 key's 32",
					 PQgetlength(res, 0, 0));
			PQclear(res);
			return STEP_FAILED;
		}
		memcpy(key, PQgetvalue(res, 0, 0), 32);
		*has = true;
	}
	PQclear(res);
	return STEP_OK;
}

/*
 * server_acts_for_any: whether the connection's role may act for any
 * replica, as sync.pull and sync.file judge it (src/pg/access.c): a
 * superuser, or a role with sync_admin's privileges
 */
agent_status
server_acts_for_any(server *s, bool *any, char err[AGENT_ERROR_MAX])
{
	PGresult   *res = PQexec(s->conn,
							 "SELECT r.rolsuper OR coalesce((SELECT pg_catalog.pg_has_role(r.oid, a.oid, 'USAGE')"
							 "   FROM pg_catalog.pg_roles a WHERE a.rolname = 'sync_admin'), false)"
							 "  FROM pg_catalog.pg_roles r WHERE r.rolname = current_user");

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		agent_status st = result_status(s, res, "the connection's role", err);

		PQclear(res);
		return st;
	}
	*any = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return STEP_OK;
}

/*
 * server_file: sync.file(replica, upload); the filing's answer (jsonb, as
 * text), or the SQLSTATE of its failure
 */
agent_status
server_file(server *s, const uint8_t replica[16], const uint8_t *up, size_t len,
			char *out, size_t size, char sqlstate[6], char err[AGENT_ERROR_MAX])
{
	const Oid	types[2] = {UUIDOID, BYTEAOID};
	const char *values[2] = {(const char *) replica, (const char *) up};
	const int	lengths[2] = {16, (int) len};
	const int	formats[2] = {1, 1};
	PGresult   *res;

	sqlstate[0] = '\0';
	res = PQexecParams(s->conn, "SELECT sync.file($1, $2)", 2, types, values, lengths, formats, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		agent_status st = result_status(s, res, "sync.file", err);
		const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

		snprintf(sqlstate, 6, "%s", state ? state : "");
		PQclear(res);
		return st;
	}
	snprintf(out, size, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return STEP_OK;
}

/*
 * server_bytes: a setting in bytes as SHOW writes it ("16MB", "4kB",
 * "1025B": units of 1024); 0 when it is not one
 */
int64_t
server_bytes(const char *shown)
{
	static const struct
	{
		const char *unit;
		int64_t		times;
	}			units[] = {{"B", 1}, {"kB", 1024}, {"MB", 1024 * 1024}, {"GB", (int64_t) 1024 * 1024 * 1024},
	{"TB", (int64_t) 1024 * 1024 * 1024 * 1024}};
	char	   *end;
	long long	n;

	errno = 0;
	n = strtoll(shown, &end, 10);
	if (errno != 0 || end == shown || n < 0)
		return 0;
	if (*end == '\0')
		return (int64_t) n;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (strcmp(end, units[i].unit) == 0)
			return n > INT64_MAX / units[i].times ? 0 : (int64_t) n * units[i].times;
	return 0;
}

/*
 * server_upload_bound: the largest upload the server takes
 * (magic_sync.upload_bytes), so that rows too large for it are tried again
 * when it changes; 0 when the server does not say
 */
int64_t
server_upload_bound(server *s)
{
	/* not pg_settings: that view shows every setting the server has, a millisecond's work */
	PGresult   *res = PQexec(s->conn, "SELECT pg_catalog.current_setting('magic_sync.upload_bytes', true)");
	int64_t		bound = 0;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
		bound = server_bytes(PQgetvalue(res, 0, 0));
	PQclear(res);
	return bound;
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* whether a notification names this replica: its payload is a list of uuids */
static bool
names(const char *payload, const char *replica_id)
{
	size_t		n = strlen(replica_id);
	const char *p = payload;

	while (p != NULL)
	{
		if (strncmp(p, replica_id, n) == 0 && (p[n] == '\0' || p[n] == ','))
			return true;
		p = strchr(p, ',');
		if (p != NULL)
			p++;
	}
	return false;
}

static bool
notified(server *s, const char *replica_id)
{
	PGnotify   *note;
	bool		ours = false;

	while ((note = PQnotifies(s->conn)) != NULL)
	{
		if (strcmp(note->relname, "magic_sync") == 0 && names(note->extra, replica_id))
			ours = true;
		PQfreemem(note);
	}
	return ours;
}

/*
 * server_wait: waits up to timeout_ms for the relay to notify this replica,
 * for another process to write the replica's file (looked at four times a
 * second), for a stop, or for the connection to break.
 */
wake_reason
server_wait(server *s, const char *replica_id, int timeout_ms, replica *r,
			volatile const int *stop, char err[AGENT_ERROR_MAX])
{
	int64_t		deadline = now_ms() + timeout_ms;

	for (;;)
	{
		struct pollfd pfd;
		int64_t		left;
		int			rc;

		if (*stop)
			return WAKE_STOP;
		/* a waiting pull's result in: the relay wrote to it, or the wait timed out (the round says) */
		if (s->waiting == WAIT_SENT ? wait_collect(s) : notified(s, replica_id))
			return WAKE_NOTIFIED;
		if (replica_written(r))
			return WAKE_WRITTEN;
		left = deadline - now_ms();
		if (left <= 0)
			return WAKE_TIMEOUT;
		pfd.fd = PQsocket(s->conn);
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (pfd.fd < 0)
		{
			snprintf(err, AGENT_ERROR_MAX, "the connection to the server is closed");
			return WAKE_LOST;
		}
		rc = poll(&pfd, 1, (int) (left < 250 ? left : 250));
		if (rc < 0 && errno != EINTR)
		{
			snprintf(err, AGENT_ERROR_MAX, "poll: %s", strerror(errno));
			return WAKE_LOST;
		}
		if (rc > 0 && (!PQconsumeInput(s->conn) || PQstatus(s->conn) == CONNECTION_BAD))
		{
			snprintf(err, AGENT_ERROR_MAX, "%s", PQerrorMessage(s->conn));
			trim(err);
			if (err[0] == '\0')
				snprintf(err, AGENT_ERROR_MAX, "the server closed the connection");
			return WAKE_LOST;
		}
	}
}

/* agent_mono_ms: the monotonic clock, in ms */
int64_t
agent_mono_ms(void)
{
	return now_ms();
}

bool
agent_sleep(int ms, volatile const int *stop)
{
	int64_t		deadline = now_ms() + ms;

	while (!*stop)
	{
		int64_t		left = deadline - now_ms();
		struct timespec ts;

		if (left <= 0)
			return true;
		if (left > 100)
			left = 100;
		ts.tv_sec = 0;
		ts.tv_nsec = (long) left * 1000000L;
		nanosleep(&ts, NULL);
	}
	return false;
}
