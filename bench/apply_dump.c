/*
 * apply_dump.c - a first sync's apply alone: the messages bench/firstsync.py
 * dumped (MS_FIRSTSYNC_DUMP=dir), applied to a new file as the agent
 * applies them: the file opened as src/agent/replica.c opens it (WAL, no
 * mutex, no memory statistics), sync_init with the replica's uuid, then
 * each message's sync_apply in BEGIN IMMEDIATE ... COMMIT.  Prints the
 * messages, the rows the file holds and the CPU seconds of the applies.
 * Not a test.  Run it under valgrind --tool=callgrind with a limit (30) to
 * count instructions instead.
 *
 *   make build/bench_apply_dump
 *   build/bench_apply_dump DIR FILE [LIMIT]
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

	if (argc < 3)
	{
		fprintf(stderr, "usage: %s DIR FILE [LIMIT]\n", argv[0]);
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
	unlink(file);
	snprintf(path, sizeof path, "%s-wal", file);
	unlink(path);
	if (sqlite3_open_v2(file, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
	{
		fprintf(stderr, "cannot open %s\n", file);
		return 1;
	}
	exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL");
	if (sqlite3_prepare_v2(db, "SELECT sync_init(?1)", -1, &st, NULL) != SQLITE_OK)
		return 1;
	sqlite3_bind_text(st, 1, replica, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_ROW)
	{
		fprintf(stderr, "sync_init: %s\n", sqlite3_errmsg(db));
		return 1;
	}
	sqlite3_finalize(st);
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
		sqlite3_reset(st);
		exec(db, "COMMIT");
		cpu += cpu_now() - t0;
		free(m);
	}
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM main.sqlite_master WHERE type = 'table' AND name = 'items'",
						   -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1)
	{
		sqlite3_finalize(st);
		sqlite3_prepare_v2(db, "SELECT count(*) FROM items", -1, &st, NULL);
		sqlite3_step(st);
		printf("%d messages applied, items holds %lld rows, CPU %.3f s\n", n,
			   (long long) sqlite3_column_int64(st, 0), cpu);
	}
	else
		printf("%d messages applied, CPU %.3f s\n", n, cpu);
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(replica);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return 0;
}
