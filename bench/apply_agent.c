/*
 * apply_agent.c - the agent's own SQLite side of a one-row round, through
 * src/agent/replica.c as magic_sync_agent calls it (issue 37, write ->
 * device).  Not a test.
 *
 *   build/bench_apply_agent [rounds] [dir] [other] [pin]
 *
 * A round: replica_applied with the claim (before the pull), replica_apply
 * of a message of one row (an account updated) in its BEGIN IMMEDIATE,
 * the acknowledging upload, made durable before it would leave
 * (replica_sync: the file is lazy, as the agent's), and the one that finds
 * nothing more (replica_upload: unasked when the first said all), then
 * replica_applied without a claim (the round's line).  other 1: another connection writes the file before each round
 * (a host's row), so that what the replica says of itself is read again.
 * pin 1 (the default): the server's key pinned, as the agent pins it, so
 * that each message's signature is checked; 0: none pinned.  Printed: CPU microseconds a round.  Under valgrind --tool=callgrind with
 * rounds small, instructions instead (the difference of two round counts).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "bench.h"

#include "../tests/sqlite/msgs.h"
#include "../src/agent/agent.h"

static replica *
open_replica(const char *path, const char *uuid)
{
	char		err[AGENT_ERROR_MAX];
	replica    *r = replica_open(path, uuid, err);

	if (r == NULL)
	{
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	return r;
}

static void
apply(replica *r, tm_msg m, const char *what)
{
	char		err[AGENT_ERROR_MAX];
	apply_result res;

	if (replica_apply(r, m.data, m.len, &res, err) != STEP_OK || strcmp(res.result, "applied") != 0)
	{
		fprintf(stderr, "%s: %s %s\n", what, err, res.result);
		exit(1);
	}
}

/* one round of the agent's (not inlined: callgrind tells it from the message's making) */
static void __attribute__((noinline))
round_of(replica *r, tm_msg m)
{
	char		err[AGENT_ERROR_MAX];
	uint8_t		claim[MS_APPLIED_MAX];
	size_t		claim_len;
	int64_t		applied;
	bool		open;
	uint8_t    *up;
	size_t		len;

	/* a round's start: sync_upload asked again */
	replica_said_forget(r);
	if (replica_applied(r, &applied, &open, claim, &claim_len, err) != STEP_OK)
	{
		fprintf(stderr, "replica_applied: %s\n", err);
		exit(1);
	}
	apply(r, m, "replica_apply");
	for (int k = 0; k < 2; k++)
	{
		if (replica_upload(r, -1, &up, &len, err) != STEP_OK)
		{
			fprintf(stderr, "replica_upload: %s\n", err);
			exit(1);
		}
		/* the agent's file(): what the upload acknowledges made durable before it leaves */
		if (up != NULL && replica_sync(r, err) != STEP_OK)
		{
			fprintf(stderr, "replica_sync: %s\n", err);
			exit(1);
		}
		/* filed: one that said all spares the next sync_upload (uploads.c) */
		if (up != NULL && replica_says_all(up, len))
			replica_said_all(r);
		free(up);
	}
	replica_applied(r, &applied, &open, NULL, NULL, err);
}

int
main(int argc, char **argv)
{
	int			rounds = argc > 1 ? atoi(argv[1]) : 2000;
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	bool		other = argc > 3 && atoi(argv[3]) != 0;
	bool		pin = argc <= 4 || atoi(argv[4]) != 0;
	char		path[512];
	replica    *r;
	sqlite3    *host = NULL;
	tm_server	s;
	Sync__Table *schema[1];
	unsigned	seed = 1;
	double		t = 0;

	snprintf(path, sizeof path, "%s/ms_bench_agent.db", dir);
	for (int k = 0; k < 4; k++)
	{
		char		p[600];

		snprintf(p, sizeof p, "%s%s", path, (const char *[]) {"", "-wal", "-shm", "-agent.lock"}[k]);
		remove(p);
	}
	tm_server_init(&s, 0x31, 0x41);
	r = open_replica(path, tm_replica_text(&s));
	{
		char		err[AGENT_ERROR_MAX];

		/* as the online agent: commits wait for no fsync, one before each upload leaves */
		if (replica_lazy(r, err) != STEP_OK)
		{
			fprintf(stderr, "replica_lazy: %s\n", err);
			return 1;
		}
	}
	if (pin)
	{
		uint8_t		key[MS_SIGN_KEY_BYTES];
		char		err[AGENT_ERROR_MAX];

		tm_server_key(key);
		if (replica_trust(r, key, false, err) != STEP_OK)
		{
			fprintf(stderr, "replica_trust: %s\n", err);
			return 1;
		}
	}
	schema[0] = tm_table("pgbench_accounts", "catalog", "json", "aid", "aid INTEGER, bid INTEGER, abalance INTEGER, filler TEXT");
	apply(r, tm_next(&s, tm_begin(schema, 1), NULL), "the snapshot's begin");
	apply(r, tm_next(&s, NULL, tm_end("pgbench_accounts", NULL)), "the snapshot's end");
	tm_free_all();
	if (other)
	{
		host = open_with(path, "PRAGMA busy_timeout = 5000");
		exec(host, "CREATE TABLE host_own(x)");
	}
	for (int i = 0; i < rounds; i++)
	{
		Sync__Down *d = tm_down();
		Sync__Rows *acc = tm_rows(d, "pgbench_accounts");
		int			aid = (int) (rand_r(&seed) % 100000) + 1;
		char		json[256],
					key[24];
		tm_msg		m;
		double		t0;

		snprintf(json, sizeof json, "{\"aid\":%d,\"bid\":1,\"abalance\":%d,\"filler\":\"%84s\"}", aid,
				 (int) (rand_r(&seed) % 10000) - 5000, "");
		snprintf(key, sizeof key, "%d", aid);
		tm_upsert(acc, json, -1, key, NULL);
		m = tm_next(&s, d, NULL);
		if (host)
			exec(host, "INSERT INTO host_own VALUES (1)");
		t0 = cpu_now();
		round_of(r, m);
		t += cpu_now() - t0;
		tm_free_all();
	}
	printf("%d one-row rounds through the agent's replica.c%s%s: %.1f CPU us a round\n", rounds,
		   other ? ", another connection writing before each" : "", pin ? "" : ", no key pinned",
		   t * 1e6 / rounds);
	if (host)
		sqlite3_close(host);
	replica_close(r);
	return 0;
}
