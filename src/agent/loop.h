/*-------------------------------------------------------------------------
 * loop.h
 *	  What the agent's loop shares between main.c (the loop, a pass),
 *	  options.c (its command line) and uploads.c (filing, narrowing down
 *	  an upload the server refuses for good): the agent's own state.
 *-------------------------------------------------------------------------
 */
#ifndef MS_AGENT_LOOP_H
#define MS_AGENT_LOOP_H

#include <signal.h>

#include "agent.h"

#define PULLS_MAX 8				/* --pull: standbys at most */

typedef struct options
{
	const char *server;
	const char *pull[PULLS_MAX];	/* --pull: hot standbys, tried in turn */
	int			npull;
	const char *listen;			/* --listen: a direct connection for notifications */
	bool		listen_only;	/* --listen-only: no pulls on it */
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
	int64_t		bound_at;		/* when (agent_mono_ms) */
	bool		bound_looked;	/* looked at this round */
	uint64_t	told[AGENT_ASIDE_MAX];	/* the rows set aside last listed, told already */
	int			ntold;
	char		lanes[AGENT_LANES_MAX][AGENT_LANE_BYTES];	/* sync_lanes(), read once a round ... */
	int			nlanes;
	bool		lanes_read;		/* ... and again after a message is applied (it may change a table's lane) */
	bool		trusted;		/* the server's key is the one the replica trusts (trust()) */
	bool		held_end;		/* the last pass ended on a held pull's batch (main.c's pass, held_end) */
	bool		file_soon;		/* a filing waited on the relay recording a snapshot's held rows: again shortly */
	int			fatal;			/* an exit code a step decided on (EXIT_CONFIG), 0 none */
	char		fatal_why[AGENT_ERROR_MAX];
} agent;

/* the signal that stops the agent, 0 while it runs (main.c) */
extern volatile sig_atomic_t stop_signal;

/* options.c */
extern int	usage_error(const char *fmt, const char *arg);
extern int	parse_options(int argc, char **argv, options *o);

/* uploads.c */
extern agent_status uploads(agent *a, round_stats *st, char err[AGENT_ERROR_MAX]);
extern void narrowing_ends(narrowing *n);

#endif							/* MS_AGENT_LOOP_H */
