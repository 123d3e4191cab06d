/*-------------------------------------------------------------------------
 * agent.h
 *	  magic_sync_agent: what its modules share.
 *
 * The agent moves bytes between a server and one replica file: it pulls
 * what waits for the replica (sync.pull), hands each message to
 * sync_apply, hands each sync_upload to sync.file, and polls in between
 * (or waits on LISTEN magic_sync, on a connection of its own).  It uses libpq, SQLite and the SQL surface of
 * both sides; it decodes a pulled message only to count it (README.md).
 *
 *   main.c     signals, the loop and its backoff, a pass, exit codes
 *   options.c  the command line
 *   uploads.c  a pass's uploads, narrowing down one the server refuses
 *   replica.c  the SQLite side: opening the file, the replica's functions
 *   replica_up.c  what goes up: uploads, lanes, rows set aside, the backlog
 *   server.c   the libpq side: connecting, pulling, filing, waiting
 *   pulls.c    where pulls go: hot standbys (--pull) in turn, the primary
 *   poll.c     between rounds: the poll interval, the --listen connection
 *   report.c   what people and machines see: lines, the snapshot's bar, JSON
 *   json.c     the one JSON string writer: valid UTF-8 whatever it is given
 *-------------------------------------------------------------------------
 */
#ifndef MS_AGENT_H
#define MS_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit codes (sysexits.h's numbers, documented in --help). */
#define EXIT_USAGE			64	/* EX_USAGE: the command line is wrong */
#define EXIT_NOINPUT		66	/* EX_NOINPUT: the replica file cannot be opened or is another's */
#define EXIT_UNAVAILABLE	69	/* EX_UNAVAILABLE: the server cannot be reached, or has no magic_sync yet (with --once) */
#define EXIT_SOFTWARE		70	/* EX_SOFTWARE: an error that retrying will not fix (with --once) */
#define EXIT_IOERR			74	/* EX_IOERR: the replica file's disk is full (with --once) */
#define EXIT_NOPERM			77	/* EX_NOPERM: the server refuses this replica or role */
#define EXIT_CONFIG			78	/* EX_CONFIG: the replica trusts another server key, or none to check a bundle with */

#define AGENT_ERROR_MAX 512

/*
 * What became of a step.  Transient: the infrastructure failed (the server is
 * out of reach, the file is locked by a writer): the same step may succeed
 * later.  Refused: the server will not act for this replica or role.
 * Failed: the data or the code failed; retried after a backoff, since the fix
 * it waits for is a deploy.  Unready: the server's database has no
 * magic_sync (yet): CREATE EXTENSION, which the agent waits for.
 */
typedef enum agent_status
{
	STEP_OK = 0,
	STEP_TRANSIENT,				/* the server is out of reach */
	STEP_BUSY,					/* the replica file is locked by a writer */
	STEP_FULL,					/* the replica file's disk is full: nothing written, room awaited */
	STEP_REFUSED,
	STEP_FAILED,
	STEP_UNREADY				/* the database has no schema sync: magic_sync is not created there */
} agent_status;

/* ---- replica.c ---------------------------------------------------------- */

typedef struct replica replica;

/* What sync_apply said of one message (its JSON result, read). */
typedef struct apply_result
{
	char		result[24];		/* applied, filed, duplicate, gap, wrong_replica, later_protocol, older_generation */
	char		snapshot[8];	/* begin, open, end, or "" */
	int64_t		number;
	int64_t		upserts;
	int64_t		deletes;
	int64_t		retired;
	int64_t		refused;
	int64_t		kept;
	int64_t		let_go;
	int64_t		begin_rows;		/* a snapshot's first message: the rows the snapshot carries */
	int64_t		filed_rows;		/* a Filed answer: rows the server filed */
	int64_t		notes;			/* a Filed answer: notes it let go of */
	int64_t		set_aside;		/* a Filed answer: rows the server refused, set aside */
	int64_t		dropped;		/* a Filed answer: edits the server did not take */
	int64_t		waiting;		/* a Filed answer: rows the server keeps in its inbox */
	int64_t		again;			/* a Filed answer of a duplicate send: rows that go again */
	int64_t		gap;
	/* a schema change (docs/protocol.md 5.3): tables changed, let go of, statements that failed */
	int64_t		schema_changed;
	int64_t		schema_let_go;
	int			schema_failed;
	struct
	{
		char		table[128];
		char		statement[256];
		char		error[256];
		bool		rest_applied;
	}			failed[4];		/* the first of them */
} apply_result;

/*
 * A row the replica wrote and set aside: it never goes up (the server
 * refused it, or it cannot be sent), as sync_progress() lists it (the newest
 * of each table).  id tells one row from another between listings.
 */
#define AGENT_ASIDE_MAX 64
#define AGENT_ASIDE_PARTS 4
typedef struct aside_row
{
	char		table[128];
	char		parts[AGENT_ASIDE_PARTS][128];	/* its key, each part cut at 127 bytes */
	int			nparts;
	bool		more_parts;		/* the key has more parts than are kept */
	char		reason[512];
	char		sqlstate[6];	/* "" when none is known */
	uint64_t	id;
} aside_row;

/* The replica's backlog: sync_progress() summed over its tables. */
typedef struct backlog
{
	int64_t		unsent;
	int64_t		unfiled;
	int64_t		set_aside;
	int64_t		refused;
} backlog;

/*
 * replica_open: the file, locked for this process (FILE-agent.lock: one
 * agent, import or export at a time), created when missing, and stamped
 * with uuid (sync_init) when it is not yet; NULL with why when it cannot
 * be, or is another replica's, or another process works on it.
 * replica_open_unstamped: the same, but a file not stamped yet is stamped
 * only by replica_stamp, once the server said the uuid is this role's
 * replica (a successful pull): a mistyped uuid never stamps a new file.
 */
extern replica *replica_open(const char *path, const char *uuid, char err[AGENT_ERROR_MAX]);
extern replica *replica_open_unstamped(const char *path, const char *uuid, char err[AGENT_ERROR_MAX]);
extern agent_status replica_stamp(replica *r, char err[AGENT_ERROR_MAX]);
extern void replica_close(replica *r);
/* replica_lazy: commits wait for no fsync; replica_sync makes them durable before an upload leaves */
extern agent_status replica_lazy(replica *r, char err[AGENT_ERROR_MAX]);
extern agent_status replica_sync(replica *r, char err[AGENT_ERROR_MAX]);
extern agent_status replica_applied(replica *r, int64_t *applied, bool *snapshot_open,
									uint8_t *claim, size_t *claim_len, char err[AGENT_ERROR_MAX]);
extern agent_status replica_apply(replica *r, const uint8_t *msg, size_t len, apply_result *out,
								  char err[AGENT_ERROR_MAX]);
/*
 * *up is NULL when there is nothing to say; the caller frees it with free().
 * max_rows >= 0: at most that many rows (narrowing down a refusal).
 */
extern agent_status replica_upload(replica *r, int64_t max_rows, uint8_t **up, size_t *len,
								   char err[AGENT_ERROR_MAX]);
/*
 * Lanes (docs/protocol.md 7.2): replica_upload is the first lane's;
 * replica_upload_lane another's ("" the first), replica_lanes the lanes
 * there are, the first first.
 */
#define AGENT_LANES_MAX 64
#define AGENT_LANE_BYTES 64
extern agent_status replica_upload_lane(replica *r, const char *lane, int64_t max_rows, uint8_t **up,
										size_t *len, char err[AGENT_ERROR_MAX]);
/*
 * replica_says_all: an upload says nothing but the last message applied,
 * with an empty backlog.  replica_said_all: the one replica_upload made
 * last said all (and was filed): until anything writes the file,
 * replica_upload finds nothing without asking sync_upload (its ~100 k
 * instructions, each round).  replica_said_forget: asked again from now on
 * (at a round's start: what becomes due with time is looked at each round).
 */
extern bool replica_says_all(const uint8_t *up, size_t len);
extern void replica_said_all(replica *r);
extern void replica_said_forget(replica *r);
extern agent_status replica_lanes(replica *r, char lanes[][AGENT_LANE_BYTES], int max, int *n,
								  char err[AGENT_ERROR_MAX]);
/*
 * the server refused an upload for good: its rows go again, or (blame) are
 * set aside with the reason and the server's SQLSTATE (NULL or "": none)
 */
extern agent_status replica_upload_refused(replica *r, const uint8_t *up, size_t len, const char *reason,
										   const char *sqlstate, bool blame, int64_t *rows,
										   char err[AGENT_ERROR_MAX]);
/* the rows set aside sync_progress() lists, at most max */
extern agent_status replica_set_aside(replica *r, aside_row *rows, int max, int *n, char err[AGENT_ERROR_MAX]);
/* rows set aside as too large go up again */
extern agent_status replica_retry_too_large(replica *r, char err[AGENT_ERROR_MAX]);
extern agent_status replica_backlog(replica *r, backlog *out, char err[AGENT_ERROR_MAX]);
extern int64_t replica_max_message_bytes(replica *r);
/*
 * The server key the replica trusts (docs/protocol.md 2.4): read, pinned
 * (in place of another when replace: an operator's --server-key), and a
 * message checked against it without applying it (*ok, or why not)
 */
extern agent_status replica_trusted(replica *r, uint8_t key[32], bool *has, char err[AGENT_ERROR_MAX]);
extern agent_status replica_trust(replica *r, const uint8_t key[32], bool replace, char err[AGENT_ERROR_MAX]);
extern agent_status replica_verify(replica *r, const uint8_t *msg, size_t len, bool *ok, char *why, size_t size,
								   char err[AGENT_ERROR_MAX]);
/* whether another connection wrote the file since the last call */
extern bool replica_written(replica *r);
/* json_extract of a JSON text, through the replica's connection */
extern int64_t replica_json_int(replica *r, const char *json, const char *path);
extern bool replica_json_text(replica *r, const char *json, const char *path, char *out, size_t size);

/* What a filing's answer (sync.file's JSON) says: read at once, parsed once */
typedef struct filing_said
{
	int64_t		filed;
	int64_t		refused;
	int64_t		dropped;
	int64_t		waiting;
	int64_t		set_aside;
	int64_t		acknowledged;
	bool		provisioning;
	char		dropped_reason[256];	/* the first edit's reason ($.reasons.dropped[0]), or "" */
	char		refused_reason[256];	/* the first refused row's ($.reasons.refused[0]), or "" */
} filing_said;
extern void replica_filing_read(replica *r, const char *json, filing_said *out);

/* ---- server.c ----------------------------------------------------------- */

typedef struct server server;

/* One row of sync.pull: number 0 for a Filed answer. */
typedef struct pulled
{
	int64_t		number;
	const uint8_t *message;
	size_t		len;
} pulled;

/* whether libpq can read a connection string; why not in err */
extern bool server_conninfo_check(const char *conninfo, char err[AGENT_ERROR_MAX]);
extern agent_status server_connect(server **out, const char *conninfo, char err[AGENT_ERROR_MAX]);
extern void server_close(server *s);
/* whether the connection broke */
extern bool server_broken(const server *s);
/* whether a notification sent on other reaches listener: one database of one server */
extern agent_status server_same(server *listener, server *other, bool *same, char err[AGENT_ERROR_MAX]);
/* LISTEN magic_sync: only on a connection straight to the server (--listen) */
extern agent_status server_listen(server *s, char err[AGENT_ERROR_MAX]);
/* server_direct: a session of its own, not a pool's (server_same proved it): its pull is prepared */
extern void server_direct(server *s);
/* the server's pg_current_snapshot(), as text; *none when it cannot say (an older server) */
extern agent_status server_mark(server *s, char *mark, size_t size, char err[AGENT_ERROR_MAX]);
/*
 * sync.settled(replica, mark): *through is the message to apply through to
 * hold what was committed before the mark, -1 while the relay has not got
 * there; *none when the server has no sync.settled (an older one).
 */
extern agent_status server_settled(server *s, const uint8_t replica[16], const char *mark,
								   int64_t *through, bool *none, char err[AGENT_ERROR_MAX]);
/* pull: *rows points into a result freed by the next call or server_pull_done */
extern agent_status server_pull(server *s, const uint8_t replica[16], int64_t after,
								const uint8_t *claim, size_t claim_len, int max_bytes,
								pulled **rows, int *n, char err[AGENT_ERROR_MAX]);
extern void server_pull_done(server *s);
/*
 * the next pull sent ahead, claiming nothing, while the last one's rows are
 * applied; then its rows (server_pull_next: *rows as server_pull's), or it
 * let go of (server_pull_drop) before the connection serves anything else
 */
extern agent_status server_pull_ahead(server *s, const uint8_t replica[16], int64_t after, int max_bytes,
									  char err[AGENT_ERROR_MAX]);
extern agent_status server_pull_next(server *s, pulled **rows, int *n, char err[AGENT_ERROR_MAX]);
extern void server_pull_drop(server *s);
/*
 * a pull that waits on the server for the relay's next pass that writes for
 * the replica (up to timeout_ms), sent: server_wait wakes when its result is
 * in, and the next server_pull with the same arguments takes it
 */
extern agent_status server_pull_wait(server *s, const uint8_t replica[16], int64_t after, int timeout_ms,
									 const uint8_t *claim, size_t claim_len, int max_bytes,
									 char err[AGENT_ERROR_MAX]);
/* whether the server refused a waiting pull (an earlier version, a standby), and why */
extern bool server_wait_refused(const server *s, char why[AGENT_ERROR_MAX]);
/* whether the last server_pull's rows are a waiting pull's the server held (its CALL returned) */
extern bool server_pull_held(const server *s);
/* file: the filing's answer, a JSON text in out; the SQLSTATE of a failure in sqlstate */
extern agent_status server_file(server *s, const uint8_t replica[16], const uint8_t *up, size_t len,
								char *out, size_t size, char sqlstate[6], char err[AGENT_ERROR_MAX]);
/*
 * sync.signing_key(): the key the server signs with; *has when it has one
 * yet, *none when the server has no such function (an earlier version)
 */
extern agent_status server_signing_key(server *s, uint8_t key[32], bool *has, bool *none, char err[AGENT_ERROR_MAX]);
/* whether the connection's role may act for any replica (a superuser, sync_admin's privileges) */
extern agent_status server_acts_for_any(server *s, bool *any, char err[AGENT_ERROR_MAX]);
/* the server's magic_sync.upload_bytes, or 0 when it does not say */
extern int64_t server_upload_bound(server *s);
/* server_bytes: a setting in bytes as SHOW writes it ("16MB", "1025B"); 0 when it is not one */
extern int64_t server_bytes(const char *shown);

typedef enum wake_reason
{
	WAKE_NOTIFIED,				/* the relay wrote to this replica */
	WAKE_WRITTEN,				/* the replica's file was written by someone else */
	WAKE_TIMEOUT,
	WAKE_STOP,					/* SIGINT or SIGTERM */
	WAKE_LOST					/* the connection broke */
} wake_reason;

/* wait up to timeout_ms for one of the reasons above */
extern wake_reason server_wait(server *s, const char *replica_id, int timeout_ms, replica *r,
							   volatile const int *stop, char err[AGENT_ERROR_MAX]);
/* sleep up to ms, returning early on a stop; false when stopped */
extern bool agent_sleep(int ms, volatile const int *stop);
extern int64_t agent_mono_ms(void);

/* ---- pulls.c ------------------------------------------------------------ */

typedef struct pulls pulls;

/* standbys: --pull's connection strings, in turn (n may be 0: the primary pulls) */
extern pulls *pulls_new(const char *const *standbys, int n);
extern void pulls_free(pulls *p);
/* the connection the next pull goes to; *standby: a standby's, not primary */
extern server *pulls_conn(pulls *p, server *primary, bool *standby);
/* the standby pulled from failed: the next one pulls, or the primary */
extern void pulls_failed(pulls *p);
/* the next pull goes to the primary, which checks claims and counts sends */
extern void pulls_primary_next(pulls *p);

/* ---- poll.c ------------------------------------------------------------- */

typedef struct waiter waiter;

/*
 * listen: --listen's connection string, or NULL; pulls: pulls to the
 * primary may go on it (not --listen-only); interval_ms: --interval
 */
extern waiter *waiter_new(const char *listen, bool pulls, int interval_ms);
extern void waiter_free(waiter *w);
/* the listening connection, when the next pull to the primary may go on it; else NULL */
extern server *waiter_puller(waiter *w, server *primary);
/* whether s is the listening connection */
extern bool waiter_listens_on(const waiter *w, const server *s);
/* it broke: polling until it is connected again; its pulls go to primary meanwhile */
extern void waiter_lost(waiter *w, const char *why);
/* it may not pull (its role, its server): its pulls go to primary from now on */
extern void waiter_pulls_refused(waiter *w, const char *why);
/* what the round before the wait did: moved, or not */
extern void waiter_round(waiter *w, bool moved);
/* the next wait, drawn: between half the current interval and all of it */
extern int	waiter_next_ms(waiter *w);
extern bool waiter_listening(const waiter *w);
/* --listen's connection up before a round, when it is due */
extern void waiter_listen(waiter *w);
/*
 * may: the round before the wait settled and pulls from the primary: the
 * wait may be a waiting pull, of first_bytes (the round's first pull's bound);
 * must: the round ended on a held pull's batch, no pull after it found
 * nothing: the wait must be a waiting pull (it looks at the outbox first),
 * else a round goes at once
 */
extern void waiter_may_wait_pull(waiter *w, bool may, bool must, int first_bytes);
/* the wait between rounds; pooled: the connection rounds use */
extern wake_reason waiter_wait(waiter *w, server *pooled, const char *replica_id, replica *r,
							   volatile const int *stop, char err[AGENT_ERROR_MAX]);

/* ---- report.c ----------------------------------------------------------- */

typedef enum report_mode
{
	REPORT_HUMAN,
	REPORT_JSON,
	REPORT_QUIET
} report_mode;

/* What one round did. */
typedef struct round_stats
{
	int64_t		messages;		/* messages applied (chained ones: not answers, not duplicates) */
	int64_t		upserts;
	int64_t		deletes;
	int64_t		retired;
	int64_t		refused;
	int64_t		answers;		/* Filed answers applied */
	int64_t		answered_rows;
	int64_t		duplicates;
	int64_t		uploads;		/* uploads filed */
	int64_t		awaited;		/* of them, ones whose answer the replica waits on (upanswer.h) */
	int64_t		filed;			/* rows the server filed */
	int64_t		server_refused;
	int64_t		dropped;
	int64_t		waiting;
	int64_t		set_aside;
	int64_t		narrowed;		/* uploads sent to narrow down one the server refused for good */
	int64_t		blamed;			/* rows set aside as what the server refuses for good */
	int64_t		acknowledged;	/* the message the server now knows the replica applied */
	int64_t		applied;		/* the last message the replica applied */
	int64_t		snapshots;		/* snapshots completed */
	const char *stopped;		/* gap, later_protocol, wrong_replica: why applying stopped */
	char		dropped_reason[256];	/* why the server did not take an edit (the first of the round) */
	char		blamed_reason[256];		/* why the server refused a row for good */
	char		refused_reason[256];	/* why the server refused a row of an upload (the first of the round) */
	int64_t		gap;
	bool		provisioning;	/* the server provisions the replica again */
} round_stats;

/* options.c: the next option of a command line, getopt_long's way; '?' with why when it is wrong */
struct option;
extern int	agent_getopt(int argc, char **argv, const char *shorts, const struct option *opts, char *why,
						 size_t size);

/* json.c: s as a JSON string on stdout, valid UTF-8 whatever s holds (U+FFFD for a byte that is not) */
extern void agent_json_string(const char *s);
/* json.c: a JSON line's start, {"time":"...","event":"event" (a constant), on stdout */
extern void agent_json_event(const char *event);

extern void report_init(report_mode mode, const char *name);
extern void report_start(const char *replica, const char *db, int64_t applied);
extern void report_connected(void);
extern void report_unreachable(const char *why, int retry_ms);
extern void report_lost(const char *why, int retry_ms);
extern void report_error(const char *what, const char *why, int retry_ms);
extern void report_notice(const char *message);
extern void report_snapshot(int64_t rows, int64_t of, bool begun, bool ended);
/* report_schema: a message that changed the schema, and what of it the replica could not apply */
extern void report_schema(const apply_result *res);
extern void report_round(const round_stats *st, const backlog *b);
/* report_refused: a row the replica wrote that never goes up, with why */
extern void report_refused(const aside_row *row);
/* report_rounds: whether rounds are reported (not --quiet): their figures are worth reading */
extern bool report_rounds(void);
extern void report_stop(const char *why, int code);
/* report_trust: the replica trusts the server key key_hex now, and how it came to */
extern void report_trust(const char *key_hex, const char *how);
/* agent_key_parse: a server key as 64 hexadecimal digits; false when it is not one */
extern bool agent_key_parse(const char *hex, uint8_t key[32]);
extern void agent_key_hex(const uint8_t key[32], char hex[65]);

#endif
