/*
 * bench.h: what the C benchmarks of the replica each need: the process's
 * CPU time (what a step costs, whatever else the machine runs) and a
 * statement that must work.
 */
#ifndef MS_BENCH_H
#define MS_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sqlite3.h>

static inline double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* sql run, or the benchmark ends saying why */
static inline void
exec(sqlite3 *db, const char *sql)
{
	char	   *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
	{
		fprintf(stderr, "%s: %s\n", sql, err);
		exit(1);
	}
}

/* the file at path, opened with these pragmas, or the benchmark ends */
static inline sqlite3 *
open_with(const char *path, const char *pragmas)
{
	sqlite3    *db;

	if (sqlite3_open(path, &db) != SQLITE_OK)
	{
		fprintf(stderr, "cannot open %s\n", path);
		exit(1);
	}
	exec(db, pragmas);
	return db;
}

#endif
