/*
 * apply_floor.c - the least a replica's apply of pgbench's rows can cost:
 * the plainest SQLite doing it, paced.  bench/apply_floor.sh runs two of
 * these beside pgbench (no magic_sync at all) at the rate the sustained
 * target asks of the agents.  Not a test.
 *
 *   apply_floor init FILE SCALE          pgbench's four tables, as the agent
 *                                        makes them (key as PRIMARY KEY), at
 *                                        pgbench's scale
 *   apply_floor run FILE SCALE RATE SECONDS
 *                                        for SECONDS, the rows of RATE TPC-B
 *                                        transactions a second (an account,
 *                                        a teller and a branch updated, a
 *                                        history row inserted), one SQLite
 *                                        transaction every 200 ms (the
 *                                        relay's passes under load: about 5
 *                                        a second), each row written whole
 *                                        by a prepared upsert, as sync_apply
 *                                        writes it; prints the transactions
 *                                        applied, the seconds it took, its
 *                                        commits and its CPU seconds
 *
 * The file's settings are the agent's: WAL, SQLite's default synchronous.
 * What it leaves out (decoding, the chain, the bookkeeping of refused and
 * retired rows, pulling, acknowledging) only makes the real apply dearer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sqlite3.h>

#define TICK_MS 200

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void
check(sqlite3 *db, int rc, const char *what)
{
	if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
	{
		fprintf(stderr, "apply_floor: %s: %s\n", what, sqlite3_errmsg(db));
		exit(1);
	}
}

static void
exec(sqlite3 *db, const char *sql)
{
	check(db, sqlite3_exec(db, sql, NULL, NULL, NULL), sql);
}

static sqlite3_stmt *
prepare(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;

	check(db, sqlite3_prepare_v2(db, sql, -1, &st, NULL), sql);
	return st;
}

static void
run_stmt(sqlite3 *db, sqlite3_stmt *st)
{
	check(db, sqlite3_step(st), sqlite3_sql(st));
	sqlite3_reset(st);
}

static sqlite3 *
open_file(const char *path)
{
	sqlite3    *db;

	if (sqlite3_open(path, &db) != SQLITE_OK)
	{
		fprintf(stderr, "apply_floor: %s: %s\n", path, sqlite3_errmsg(db));
		exit(1);
	}
	exec(db, "PRAGMA journal_mode = WAL");
	return db;
}

/* pgbench's blank-padded filler of char(84), as the relay sends it */
static char filler[85];

static void
init(const char *path, int scale)
{
	sqlite3    *db = open_file(path);
	sqlite3_stmt *st;

	exec(db, "CREATE TABLE pgbench_branches(bid INTEGER NOT NULL, bbalance INTEGER, filler TEXT, PRIMARY KEY (bid));"
		 "CREATE TABLE pgbench_tellers(tid INTEGER NOT NULL, bid INTEGER, tbalance INTEGER, filler TEXT, PRIMARY KEY (tid));"
		 "CREATE TABLE pgbench_accounts(aid INTEGER NOT NULL, bid INTEGER, abalance INTEGER, filler TEXT, PRIMARY KEY (aid));"
		 "CREATE TABLE pgbench_history(tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, mtime TEXT, filler TEXT,"
		 " id INTEGER NOT NULL, PRIMARY KEY (id));"
		 "BEGIN");
	st = prepare(db, "INSERT INTO pgbench_branches VALUES (?1, 0, NULL)");
	for (int i = 1; i <= scale; i++)
	{
		sqlite3_bind_int(st, 1, i);
		run_stmt(db, st);
	}
	sqlite3_finalize(st);
	st = prepare(db, "INSERT INTO pgbench_tellers VALUES (?1, (?1 - 1) / 10 + 1, 0, NULL)");
	for (int i = 1; i <= 10 * scale; i++)
	{
		sqlite3_bind_int(st, 1, i);
		run_stmt(db, st);
	}
	sqlite3_finalize(st);
	st = prepare(db, "INSERT INTO pgbench_accounts VALUES (?1, (?1 - 1) / 100000 + 1, 0, ?2)");
	for (int i = 1; i <= 100000 * scale; i++)
	{
		sqlite3_bind_int(st, 1, i);
		sqlite3_bind_text(st, 2, filler, 84, SQLITE_STATIC);
		run_stmt(db, st);
	}
	sqlite3_finalize(st);
	exec(db, "COMMIT; PRAGMA wal_checkpoint(TRUNCATE)");
	sqlite3_close(db);
}

static void
run(const char *path, int scale, double rate, double seconds)
{
	sqlite3    *db = open_file(path);
	sqlite3_stmt *account = prepare(db, "INSERT INTO pgbench_accounts(aid, bid, abalance, filler) VALUES (?1, ?2, ?3, ?4)"
									" ON CONFLICT (aid) DO UPDATE SET bid = excluded.bid, abalance = excluded.abalance,"
									" filler = excluded.filler");
	sqlite3_stmt *teller = prepare(db, "INSERT INTO pgbench_tellers(tid, bid, tbalance, filler) VALUES (?1, ?2, ?3, NULL)"
								   " ON CONFLICT (tid) DO UPDATE SET bid = excluded.bid, tbalance = excluded.tbalance,"
								   " filler = excluded.filler");
	sqlite3_stmt *branch = prepare(db, "INSERT INTO pgbench_branches(bid, bbalance, filler) VALUES (?1, ?2, NULL)"
								   " ON CONFLICT (bid) DO UPDATE SET bbalance = excluded.bbalance, filler = excluded.filler");
	sqlite3_stmt *history = prepare(db, "INSERT INTO pgbench_history(tid, bid, aid, delta, mtime, filler, id)"
									" VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6)"
									" ON CONFLICT (id) DO UPDATE SET tid = excluded.tid, bid = excluded.bid,"
									" aid = excluded.aid, delta = excluded.delta, mtime = excluded.mtime,"
									" filler = excluded.filler");
	double		began = now();
	long long	done = 0;
	long long	id = 0;
	int			commits = 0;
	unsigned int seed = 42;

	for (;;)
	{
		double		t = now() - began;
		long long	due = (long long) (rate * (t < seconds ? t : seconds)) - done;

		if (due > 0)
		{
			exec(db, "BEGIN");
			for (long long i = 0; i < due; i++)
			{
				int			aid = rand_r(&seed) % (100000 * scale) + 1;
				int			tid = rand_r(&seed) % (10 * scale) + 1;
				int			bid = rand_r(&seed) % scale + 1;
				int			delta = rand_r(&seed) % 10001 - 5000;

				sqlite3_bind_int(account, 1, aid);
				sqlite3_bind_int(account, 2, (aid - 1) / 100000 + 1);
				sqlite3_bind_int(account, 3, delta);
				sqlite3_bind_text(account, 4, filler, 84, SQLITE_STATIC);
				run_stmt(db, account);
				sqlite3_bind_int(teller, 1, tid);
				sqlite3_bind_int(teller, 2, (tid - 1) / 10 + 1);
				sqlite3_bind_int(teller, 3, delta);
				run_stmt(db, teller);
				sqlite3_bind_int(branch, 1, bid);
				sqlite3_bind_int(branch, 2, delta);
				run_stmt(db, branch);
				sqlite3_bind_int(history, 1, tid);
				sqlite3_bind_int(history, 2, bid);
				sqlite3_bind_int(history, 3, aid);
				sqlite3_bind_int(history, 4, delta);
				sqlite3_bind_text(history, 5, "2026-12-04 15:00:00.123456+00", -1, SQLITE_STATIC);
				sqlite3_bind_int64(history, 6, ++id);
				run_stmt(db, history);
			}
			exec(db, "COMMIT");
			done += due;
			commits++;
		}
		if (t >= seconds)
			break;
		{
			double		next = (double) ((long long) (t * 1000 / TICK_MS) + 1) * TICK_MS / 1000;
			double		left = next - (now() - began);

			if (left > 0)
			{
				struct timespec ts = {(time_t) left, (long) ((left - (time_t) left) * 1e9)};

				nanosleep(&ts, NULL);
			}
		}
	}
	{
		struct rusage ru;

		getrusage(RUSAGE_SELF, &ru);
		printf("%lld %.1f %d %.3f\n", done, now() - began, commits,
			   (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	}
	sqlite3_finalize(account);
	sqlite3_finalize(teller);
	sqlite3_finalize(branch);
	sqlite3_finalize(history);
	sqlite3_close(db);
}

int
main(int argc, char **argv)
{
	memset(filler, ' ', 84);
	if (argc == 4 && strcmp(argv[1], "init") == 0)
		init(argv[2], atoi(argv[3]));
	else if (argc == 6 && strcmp(argv[1], "run") == 0)
		run(argv[2], atoi(argv[3]), atof(argv[4]), atof(argv[5]));
	else
	{
		fprintf(stderr, "usage: apply_floor init FILE SCALE | run FILE SCALE RATE SECONDS\n");
		return 2;
	}
	return 0;
}
