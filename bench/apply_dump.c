/*
 * apply_dump.c - a first sync's apply alone: the messages bench/firstsync.py
 * dumped (MS_FIRSTSYNC_DUMP=dir), applied to a new file as the agent
 * applies them: the file opened as src/agent/replica.c opens it (WAL, no
 * mutex, no memory statistics, statements kept), sync_init with the replica's uuid, then
 * each message's sync_apply in BEGIN IMMEDIATE ... COMMIT.  Prints the
 * messages, the rows the file holds and the CPU seconds of the applies.
 * Not a test.  Run it under valgrind --tool=callgrind with a limit (30) to
 * count instructions instead.
 *
 * Then the floor, for the same rows: the table of the rows applied (items)
 * read into memory, and its rows written again into a new file (FILE.bare)
 * holding that table alone, made by the same CREATE TABLE, opened alike, by
 * the plainest prepared INSERT ... ON CONFLICT DO UPDATE loop, in as many
 * transactions as there were messages, each of as many rows as its message
 * upserted: the CPU of the two and their ratio (issue 37: <= 1.3).
 *
 *   make build/bench_apply_dump
 *   build/bench_apply_dump DIR FILE [LIMIT [nofloor]]     (nofloor: our side alone, for perf)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sqlite3.h>

#include "bench.h"

extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

/* the file at path opened as the agent opens its file (src/agent/replica.c), or exits */
static sqlite3 *
open_agent(const char *path)
{
	char		aside[4200];
	sqlite3    *db;

	unlink(path);
	snprintf(aside, sizeof aside, "%s-wal", path);
	unlink(aside);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
	{
		fprintf(stderr, "cannot open %s\n", path);
		exit(1);
	}
	exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL");
	return db;
}

/* a statement of db, or the benchmark ends saying why */
static sqlite3_stmt *
prepared(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
	{
		fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
		exit(1);
	}
	return st;
}

/* the floor's loop alone (callgrind --toggle-collect=bare_loop): its CPU seconds */
static __attribute__((noinline)) double
bare_loop(sqlite3 *db, sqlite3_stmt *st, sqlite3_value **vals, int ncols, const int *per, int n)
{
	double		t0 = cpu_now();
	long long	at = 0;

	for (int i = 0; i < n; i++)
	{
		exec(db, "BEGIN IMMEDIATE");
		for (int k = 0; k < per[i]; k++, at++)
		{
			for (int c = 0; c < ncols; c++)
			{
				sqlite3_value *v = vals[at * ncols + c];

				/* bound where they are, as sync_apply binds the row's values */
				switch (sqlite3_value_type(v))
				{
					case SQLITE_INTEGER:
						sqlite3_bind_int64(st, c + 1, sqlite3_value_int64(v));
						break;
					case SQLITE_FLOAT:
						sqlite3_bind_double(st, c + 1, sqlite3_value_double(v));
						break;
					case SQLITE_TEXT:
						sqlite3_bind_text(st, c + 1, (const char *) sqlite3_value_text(v), sqlite3_value_bytes(v),
										  SQLITE_STATIC);
						break;
					case SQLITE_BLOB:
						sqlite3_bind_blob(st, c + 1, sqlite3_value_blob(v), sqlite3_value_bytes(v), SQLITE_STATIC);
						break;
					default:
						sqlite3_bind_null(st, c + 1);
				}
			}
			if (sqlite3_step(st) != SQLITE_DONE)
			{
				fprintf(stderr, "bare upsert: %s\n", sqlite3_errmsg(db));
				exit(1);
			}
			sqlite3_reset(st);
		}
		exec(db, "COMMIT");
	}
	return cpu_now() - t0;
}

/*
 * floor: the rows of items in ours written again into a new file by a bare
 * upsert loop, per[i] rows in the i-th of n transactions; its CPU seconds
 */
static double
floor_cpu(sqlite3 *ours, const char *file, const int *per, int n)
{
	char		path[4200];
	sqlite3    *db;
	sqlite3_stmt *st;
	sqlite3_value **vals = NULL;
	char	   *create;
	char	   *cols = NULL;
	char	   *params = NULL;
	char	   *sets = NULL;
	char	   *keys = NULL;
	char	   *sql;
	int			ncols = 0;
	long long	rows = 0;
	double		cpu;

	st = prepared(ours, "SELECT sql FROM main.sqlite_master WHERE type = 'table' AND name = 'items'");
	if (sqlite3_step(st) != SQLITE_ROW)
		return -1;
	create = sqlite3_mprintf("%s", (const char *) sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	st = prepared(ours, "SELECT name, pk FROM pragma_table_info('items') ORDER BY cid");
	while (sqlite3_step(st) == SQLITE_ROW)
	{
		const char *name = (const char *) sqlite3_column_text(st, 0);
		char	   *next;

		next = sqlite3_mprintf("%z%s\"%w\"", cols, ncols ? ", " : "", name);
		cols = next;
		params = sqlite3_mprintf("%z%s?%d", params, ncols ? ", " : "", ncols + 1);
		if (sqlite3_column_int(st, 1) > 0)
			keys = sqlite3_mprintf("%z%s\"%w\"", keys, keys ? ", " : "", name);
		else
			sets = sqlite3_mprintf("%z%s\"%w\" = excluded.\"%w\"", sets, sets ? ", " : "", name, name);
		ncols++;
	}
	sqlite3_finalize(st);
	/* every value in memory first: the floor reads nothing but its own file */
	sql = sqlite3_mprintf("SELECT %s FROM items", cols);
	st = prepared(ours, sql);
	sqlite3_free(sql);
	for (int i = 0; i < n; i++)
		rows += per[i];
	vals = calloc((size_t) rows * (size_t) ncols, sizeof(sqlite3_value *));
	for (long long r = 0; r < rows && sqlite3_step(st) == SQLITE_ROW; r++)
		for (int c = 0; c < ncols; c++)
			vals[r * ncols + c] = sqlite3_value_dup(sqlite3_column_value(st, c));
	sqlite3_finalize(st);

	snprintf(path, sizeof path, "%s.bare", file);
	db = open_agent(path);
	exec(db, create);
	sql = sqlite3_mprintf("INSERT INTO items(%s) VALUES (%s) ON CONFLICT (%s) DO %s%s", cols, params, keys,
						  sets ? "UPDATE SET " : "NOTHING", sets ? sets : "");
	st = prepared(db, sql);
	sqlite3_free(sql);
	cpu = bare_loop(db, st, vals, ncols, per, n);
	sqlite3_finalize(st);
	sqlite3_close(db);
	unlink(path);
	snprintf(path, sizeof path, "%s.bare-wal", file);
	unlink(path);
	for (long long v = 0; v < rows * ncols; v++)
		sqlite3_value_free(vals[v]);
	free(vals);
	sqlite3_free(create);
	sqlite3_free(cols);
	sqlite3_free(params);
	sqlite3_free(sets);
	sqlite3_free(keys);
	return cpu;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* the whole of a file, *len bytes (exits when it cannot) */
static char *
slurp(const char *path, long *len)
{
	FILE	   *f = fopen(path, "rb");
	char	   *b;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (*len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
		(b = malloc(*len > 0 ? (size_t) *len : 1)) == NULL || fread(b, 1, (size_t) *len, f) != (size_t) *len)
	{
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	return b;
}

int
main(int argc, char **argv)
{
	const char *dir;
	const char *file;
	int			limit;
	char		path[4096];
	char	   *replica;
	long		len;
	DIR		   *d;
	struct dirent *e;
	char	  **names = NULL;
	int			n = 0;
	sqlite3    *db;
	sqlite3_stmt *st;
	double		t0;
	double		cpu;
	int		   *per;

	if (argc < 3)
	{
		fprintf(stderr, "usage: %s DIR FILE [LIMIT [nofloor]]\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	file = argv[2];
	limit = argc > 3 ? atoi(argv[3]) : 1 << 30;
	snprintf(path, sizeof path, "%s/replica", dir);
	replica = slurp(path, &len);
	replica[len > 36 ? 36 : len] = '\0';
	if ((d = opendir(dir)) == NULL)
	{
		fprintf(stderr, "cannot read %s\n", dir);
		return 1;
	}
	while ((e = readdir(d)) != NULL)
		if (strstr(e->d_name, ".msg") != NULL)
		{
			names = realloc(names, sizeof(char *) * (size_t) (n + 1));
			names[n++] = strdup(e->d_name);
		}
	closedir(d);
	qsort(names, (size_t) n, sizeof(char *), by_name);
	if (n > limit)
		n = limit;

	/* as the agent opens its file (src/agent/replica.c) */
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
	db = open_agent(file);
	per = calloc((size_t) n + 1, sizeof(int));
	if (sqlite3_prepare_v2(db, "SELECT sync_init(?1)", -1, &st, NULL) != SQLITE_OK)
		return 1;
	sqlite3_bind_text(st, 1, replica, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_ROW)
	{
		fprintf(stderr, "sync_init: %s\n", sqlite3_errmsg(db));
		return 1;
	}
	sqlite3_finalize(st);
	/* the agent keeps the extension's statements prepared (src/agent/replica.c) */
	exec(db, "SELECT sync_keep_statements(1)");
	if (sqlite3_prepare_v2(db, "SELECT sync_apply(?1)", -1, &st, NULL) != SQLITE_OK)
		return 1;
	cpu = 0;
	for (int i = 0; i < n; i++)
	{
		char	   *m;

		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		m = slurp(path, &len);
		t0 = cpu_now();
		exec(db, "BEGIN IMMEDIATE");
		sqlite3_bind_blob(st, 1, m, (int) len, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_ROW)
		{
			fprintf(stderr, "sync_apply of %s: %s\n", names[i], sqlite3_errmsg(db));
			return 1;
		}
		{
			const char *r = strstr((const char *) sqlite3_column_text(st, 0), "\"upserts\":");

			per[i] = r ? atoi(r + 10) : 0;
		}
		sqlite3_reset(st);
		exec(db, "COMMIT");
		cpu += cpu_now() - t0;
		free(m);
	}
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM main.sqlite_master WHERE type = 'table' AND name = 'items'",
						   -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1)
	{
		double		bare;

		sqlite3_finalize(st);
		sqlite3_prepare_v2(db, "SELECT count(*) FROM items", -1, &st, NULL);
		sqlite3_step(st);
		printf("%d messages applied, items holds %lld rows, CPU %.3f s\n", n,
			   (long long) sqlite3_column_int64(st, 0), cpu);
		sqlite3_finalize(st);
		st = NULL;
		if (argc > 4 && strcmp(argv[4], "nofloor") == 0)
			goto done;
		bare = floor_cpu(db, file, per, n);
		printf("the same rows by a bare upsert loop, as many transactions: CPU %.3f s; ratio %.2f\n",
			   bare, cpu / bare);
	}
	else
		printf("%d messages applied, CPU %.3f s\n", n, cpu);
done:
	sqlite3_finalize(st);
	exec(db, "SELECT sync_keep_statements(0)");
	sqlite3_close(db);
	free(per);
	free(replica);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return 0;
}
