/*
 * apply_fixed.c - what the agent's SQLite calls cost a replica per message,
 * whatever the message carries: its round under a steady writer (issue 37,
 * "capture costs the writer less").  Not a test.
 *
 *   make bench-apply-fixed   (or build/bench_apply_fixed [rounds] [tx] [dir] [keep])
 *
 * tx 0: a message of one row (an account updated), the rest as for 1.
 *
 * keep 1 (the default): the replica's connection keeps the extension's
 * statements prepared between calls, as the agent's does
 * (sync_keep_statements, src/sqlite/kept.c); 0: every call prepares its own.
 *
 * pgbench's four tables (json, as bench/pgbench_mirror.sql mirrors them),
 * made by a snapshot.  Each round is what magic_sync_agent does for one
 * pass of the relay: sync_status() and sync_applied() (before its pull),
 * sync_apply of a message carrying TX TPC-B transactions' rows (an account,
 * a teller and a branch updated, a history row inserted) in BEGIN IMMEDIATE,
 * then sync_upload() (the acknowledgement) in BEGIN IMMEDIATE.  Beside it,
 * in the same run, the plainest SQLite doing the same writes: BEGIN
 * IMMEDIATE, a prepared upsert of each row, COMMIT.  Printed: CPU
 * microseconds a round of each, and of each call, and the fixed cost (ours
 * less the bare writes).  Run it under valgrind --tool=callgrind with
 * rounds small to count instructions instead.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sqlite3.h>

#include "bench.h"

#include "../tests/sqlite/msgs.h"

extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

static sqlite3 *
open_db(const char *path)
{
	return open_with(path, "PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000");
}

/* one statement, stepped once; its first column as text (copied) */
static char *
one(sqlite3_stmt *st, const char *what)
{
	static char out[4096];
	int			rc = sqlite3_step(st);

	if (rc != SQLITE_ROW)
	{
		fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(sqlite3_db_handle(st)));
		exit(1);
	}
	snprintf(out, sizeof out, "%s", sqlite3_column_type(st, 0) == SQLITE_NULL ? "" :
			 (const char *) sqlite3_column_text(st, 0));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return out;
}

static long long history = 0;

/* the rows of tx TPC-B transactions (not inlined: its signing is the server's, not ours) */
static tm_msg __attribute__((noinline))
message(tm_server *s, int tx, unsigned *seed)
{
	Sync__Down *d = tm_down();
	Sync__Rows *acc = tm_rows(d, "pgbench_accounts");
	Sync__Rows *tel = tx ? tm_rows(d, "pgbench_tellers") : NULL;
	Sync__Rows *bra = tx ? tm_rows(d, "pgbench_branches") : NULL;
	Sync__Rows *his = tx ? tm_rows(d, "pgbench_history") : NULL;

	for (int i = 0; i < (tx ? tx : 1); i++)
	{
		int			aid = (int) (rand_r(seed) % 100000) + 1 + i * 100000;
		int			tid = (int) (rand_r(seed) % 10) + 1 + i * 10;
		int			bid = i + 1;
		int			delta = (int) (rand_r(seed) % 10000) - 5000;
		char		json[256],
					key[24];

		snprintf(json, sizeof json, "{\"aid\":%d,\"bid\":%d,\"abalance\":%d,\"filler\":\"%84s\"}", aid, bid, delta, "");
		snprintf(key, sizeof key, "%d", aid);
		tm_upsert(acc, json, -1, key, NULL);
		if (tx == 0)
			break;
		snprintf(json, sizeof json, "{\"tid\":%d,\"bid\":%d,\"tbalance\":%d,\"filler\":null}", tid, bid, delta);
		snprintf(key, sizeof key, "%d", tid);
		tm_upsert(tel, json, -1, key, NULL);
		snprintf(json, sizeof json, "{\"bid\":%d,\"bbalance\":%d,\"filler\":null}", bid, delta);
		snprintf(key, sizeof key, "%d", bid);
		tm_upsert(bra, json, -1, key, NULL);
		history++;
		snprintf(json, sizeof json, "{\"tid\":%d,\"bid\":%d,\"aid\":%d,\"delta\":%d,"
				 "\"mtime\":\"2026-12-06T17:00:00\",\"filler\":null,\"id\":%lld}", tid, bid, aid, delta, history);
		snprintf(key, sizeof key, "%lld", history);
		tm_upsert(his, json, -1, key, NULL);
	}
	return tm_next(s, d, NULL);
}

/* the same rows, written plainly (not inlined: callgrind tells its cost from ours) */
static void __attribute__((noinline))
bare(sqlite3 *db, sqlite3_stmt **up, int tx, unsigned *seed, long long *hist)
{
	sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	for (int i = 0; i < (tx ? tx : 1); i++)
	{
		int			aid = (int) (rand_r(seed) % 100000) + 1 + i * 100000;
		int			tid = (int) (rand_r(seed) % 10) + 1 + i * 10;
		int			bid = i + 1;
		int			delta = (int) (rand_r(seed) % 10000) - 5000;

		sqlite3_bind_int(up[0], 1, aid);
		sqlite3_bind_int(up[0], 2, bid);
		sqlite3_bind_int(up[0], 3, delta);
		sqlite3_bind_text(up[0], 4, "                                                                                    ", -1, SQLITE_STATIC);
		sqlite3_bind_int(up[1], 1, tid);
		sqlite3_bind_int(up[1], 2, bid);
		sqlite3_bind_int(up[1], 3, delta);
		sqlite3_bind_int(up[2], 1, bid);
		sqlite3_bind_int(up[2], 2, delta);
		(*hist)++;
		sqlite3_bind_int(up[3], 1, tid);
		sqlite3_bind_int(up[3], 2, bid);
		sqlite3_bind_int(up[3], 3, aid);
		sqlite3_bind_int(up[3], 4, delta);
		sqlite3_bind_text(up[3], 5, "2026-12-06T17:00:00", -1, SQLITE_STATIC);
		sqlite3_bind_int64(up[3], 6, *hist);
		for (int k = 0; k < (tx ? 4 : 1); k++)
		{
			if (sqlite3_step(up[k]) != SQLITE_DONE)
			{
				fprintf(stderr, "bare: %s\n", sqlite3_errmsg(db));
				exit(1);
			}
			sqlite3_reset(up[k]);
		}
	}
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
}

int
main(int argc, char **argv)
{
	int			rounds = argc > 1 ? atoi(argv[1]) : 2000;
	int			tx = argc > 2 ? atoi(argv[2]) : 1;
	const char *dir = argc > 3 ? argv[3] : "/tmp";
	bool		keep = argc > 4 ? atoi(argv[4]) != 0 : true;
	char		a_path[512],
				b_path[512];
	sqlite3    *db,
			   *plain;
	sqlite3_stmt *status,
			   *apply,
			   *upload,
			   *begin,
			   *commit,
			   *up[4];
	tm_server	s;
	Sync__Table *schema[4];
	unsigned	seed = 1,
				bseed = 1;
	long long	bhist = 0;
	double		t_status = 0,
				t_apply = 0,
				t_upload = 0,
				t_bare = 0;

	snprintf(a_path, sizeof a_path, "%s/ms_bench_fixed.db", dir);
	snprintf(b_path, sizeof b_path, "%s/ms_bench_fixed_bare.db", dir);
	for (int k = 0; k < 2; k++)
	{
		char		p[600];

		snprintf(p, sizeof p, "%s%s", k ? b_path : a_path, "");
		remove(p);
		snprintf(p, sizeof p, "%s-wal", k ? b_path : a_path);
		remove(p);
		snprintf(p, sizeof p, "%s-shm", k ? b_path : a_path);
		remove(p);
	}
	sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);

	db = open_db(a_path);
	if (keep)
		exec(db, "SELECT sync_keep_statements(1)");
	tm_server_init(&s, 0x31, 0x41);
	schema[0] = tm_table("pgbench_branches", "catalog", "json", "bid", "bid INTEGER, bbalance INTEGER, filler TEXT");
	schema[1] = tm_table("pgbench_tellers", "catalog", "json", "tid", "tid INTEGER, bid INTEGER, tbalance INTEGER, filler TEXT");
	schema[2] = tm_table("pgbench_accounts", "catalog", "json", "aid", "aid INTEGER, bid INTEGER, abalance INTEGER, filler TEXT");
	schema[3] = tm_table("pgbench_history", "catalog", "json", "id",
						 "tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, mtime TEXT, filler TEXT, id INTEGER");
	sqlite3_prepare_v2(db, "SELECT sync_apply(?1)", -1, &apply, NULL);
	sqlite3_prepare_v2(db, "SELECT json_extract(s, '$.applied'), json_extract(s, '$.snapshot') IS NOT NULL,"
					   " sync_applied() FROM (SELECT sync_status() AS s)", -1, &status, NULL);
	sqlite3_prepare_v2(db, "SELECT sync_upload()", -1, &upload, NULL);
	sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, NULL);
	sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL);
	{
		tm_msg		m = tm_next(&s, tm_begin(schema, 4), NULL);

		sqlite3_bind_blob(apply, 1, m.data, (int) m.len, SQLITE_STATIC);
		one(apply, "the snapshot's begin");
		m = tm_next(&s, NULL, tm_end("pgbench_branches", "pgbench_tellers", "pgbench_accounts", "pgbench_history", NULL));
		sqlite3_bind_blob(apply, 1, m.data, (int) m.len, SQLITE_STATIC);
		one(apply, "the snapshot's end");
		tm_free_all();
	}
	{
		char	   *sql = sqlite3_mprintf("VACUUM INTO %Q", b_path);

		exec(db, sql);
		sqlite3_free(sql);
	}
	plain = open_db(b_path);
	exec(plain, "UPDATE _sync_state SET applying = 1 WHERE id = 1");
	sqlite3_prepare_v2(plain, "INSERT INTO pgbench_accounts(aid, bid, abalance, filler) VALUES (?1, ?2, ?3, ?4)"
					   " ON CONFLICT (aid) DO UPDATE SET bid = excluded.bid, abalance = excluded.abalance,"
					   " filler = excluded.filler", -1, &up[0], NULL);
	sqlite3_prepare_v2(plain, "INSERT INTO pgbench_tellers(tid, bid, tbalance, filler) VALUES (?1, ?2, ?3, NULL)"
					   " ON CONFLICT (tid) DO UPDATE SET bid = excluded.bid, tbalance = excluded.tbalance,"
					   " filler = excluded.filler", -1, &up[1], NULL);
	sqlite3_prepare_v2(plain, "INSERT INTO pgbench_branches(bid, bbalance, filler) VALUES (?1, ?2, NULL)"
					   " ON CONFLICT (bid) DO UPDATE SET bbalance = excluded.bbalance, filler = excluded.filler",
					   -1, &up[2], NULL);
	sqlite3_prepare_v2(plain, "INSERT INTO pgbench_history(tid, bid, aid, delta, mtime, filler, id)"
					   " VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6) ON CONFLICT (id) DO UPDATE SET tid = excluded.tid,"
					   " bid = excluded.bid, aid = excluded.aid, delta = excluded.delta, mtime = excluded.mtime,"
					   " filler = excluded.filler", -1, &up[3], NULL);
	for (int k = 0; k < 4; k++)
		if (up[k] == NULL)
		{
			fprintf(stderr, "bare statement %d: %s\n", k, sqlite3_errmsg(plain));
			return 1;
		}

	for (int r = 0; r < rounds; r++)
	{
		tm_msg		m = message(&s, tx, &seed);
		double		t0 = cpu_now(),
					t1,
					t2,
					t3;
		char	   *res;

		one(status, "sync_status");
		t1 = cpu_now();
		sqlite3_step(begin);
		sqlite3_reset(begin);
		sqlite3_bind_blob(apply, 1, m.data, (int) m.len, SQLITE_STATIC);
		res = one(apply, "sync_apply");
		if (strstr(res, "\"applied\"") == NULL)
		{
			fprintf(stderr, "not applied: %s\n", res);
			return 1;
		}
		sqlite3_step(commit);
		sqlite3_reset(commit);
		t2 = cpu_now();
		sqlite3_step(begin);
		sqlite3_reset(begin);
		one(upload, "sync_upload");
		sqlite3_step(commit);
		sqlite3_reset(commit);
		t3 = cpu_now();
		bare(plain, up, tx, &bseed, &bhist);
		t_status += t1 - t0;
		t_apply += t2 - t1;
		t_upload += t3 - t2;
		t_bare += cpu_now() - t3;
		tm_free_all();
	}
	printf("%d rounds of %d TPC-B transactions' rows (%d rows) a message, statements %s, CPU us a round:\n",
		   rounds, tx, tx ? 4 * tx : 1, keep ? "kept (as the agent)" : "prepared each call");
	printf("  sync_status + sync_applied %8.1f\n  sync_apply                 %8.1f\n  sync_upload                %8.1f\n",
		   t_status * 1e6 / rounds, t_apply * 1e6 / rounds, t_upload * 1e6 / rounds);
	printf("  ours, all                  %8.1f\n  bare upserts in BEGIN IMMEDIATE / COMMIT %8.1f\n"
		   "  ours less bare             %8.1f (%.1f x bare)\n",
		   (t_status + t_apply + t_upload) * 1e6 / rounds, t_bare * 1e6 / rounds,
		   (t_status + t_apply + t_upload - t_bare) * 1e6 / rounds, (t_status + t_apply + t_upload) / t_bare);
	for (int k = 0; k < 4; k++)
		sqlite3_finalize(up[k]);
	sqlite3_finalize(status);
	sqlite3_finalize(apply);
	sqlite3_finalize(upload);
	sqlite3_finalize(begin);
	sqlite3_finalize(commit);
	if (keep)
		exec(db, "SELECT sync_keep_statements(0)");
	sqlite3_close(db);
	sqlite3_close(plain);
	sqlite3_reset_auto_extension();
	return 0;
}
