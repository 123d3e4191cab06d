/*
 * hops_reader: bench/hops.py's device reader.  A SQLite reader of the replica
 * file, its connection and its statement kept open, that waits for a row to
 * show a value and says when it did.
 *
 *   hops_reader FILE INTERVAL_US [poll]      then, on stdin, lines "KEY VALUE"
 *
 * It runs the query `SELECT name FROM items WHERE id = ?` through SQLite only
 * when the file's WAL index header (FILE-shm, mapped read-only) changed since
 * its last query, as it does at every commit, or 20 ms passed.  It looks at
 * that header when the WAL file is written (inotify), then every INTERVAL_US
 * until the header changes (the writer updates it just after writing the
 * commit's frame) or 2 ms pass; with "poll", every INTERVAL_US, always (the
 * wake-ups cost CPU: ~15 us each in the kernel here).  It answers
 * "SEEN_NS LOOKS QUERIES" (CLOCK_MONOTONIC, Python's time.monotonic() clock)
 * once the query returns VALUE, "cpu USER_NS SYS_NS SETUP_NS" on EOF (SETUP_NS:
 * the CPU of opening the file and the first query, which reads the schema).  For
 * bench/hops.py's trace, each query begun on a changed header is marked by
 * kill(itself, 0) and the query seeing the value by kill(its parent, 0):
 * system calls perf trace shows, that do nothing.  It waits for nothing
 * between requests: it blocks on stdin.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HDR 48					/* the WAL index header's first copy */
#define ANYWAY_NS 20000000		/* a query at least this often, header or not */
#define SPIN_NS 2000000			/* after the WAL is written, how long to look for the header's change */

static long long
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static const volatile unsigned char *
map_shm(const char *db)
{
	char		path[4096];
	int			fd;
	void	   *p;

	snprintf(path, sizeof(path), "%s-shm", db);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

int
main(int argc, char **argv)
{
	sqlite3    *db;
	sqlite3_stmt *q;
	const volatile unsigned char *shm;
	unsigned char seen[HDR];
	long		interval_us;
	char		line[512];
	struct rusage ru;
	long long	setup_ns;
	char		wal[4096];
	int			watch = -1;

	if (argc < 3)
	{
		fprintf(stderr, "usage: hops_reader FILE INTERVAL_US [poll]\n");
		return 64;
	}
	interval_us = atol(argv[2]);
	snprintf(wal, sizeof(wal), "%s-wal", argv[1]);
	if (argc < 4 || strcmp(argv[3], "poll") != 0)
	{
		watch = inotify_init1(IN_NONBLOCK);
		if (watch < 0 || inotify_add_watch(watch, wal, IN_MODIFY) < 0)
		{
			perror("hops_reader: inotify");
			return 1;
		}
	}
	/* sleeps as long as asked, not the default 50 us more */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
		sqlite3_prepare_v2(db, "SELECT name FROM items WHERE id = ?", -1, &q, NULL) != SQLITE_OK)
	{
		fprintf(stderr, "hops_reader: %s\n", sqlite3_errmsg(db));
		return 1;
	}
	shm = map_shm(argv[1]);
	memset(seen, 0, sizeof(seen));
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* the first query reads the schema: not a poll's cost */
	sqlite3_bind_int64(q, 1, 0);
	(void) sqlite3_step(q);
	sqlite3_reset(q);
	getrusage(RUSAGE_SELF, &ru);
	setup_ns = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
		(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
	while (fgets(line, sizeof(line), stdin) != NULL)
	{
		long long	key;
		char		value[256];
		long		polls = 0,
					queries = 0;
		long long	last_query = 0;
		long long	spin_until = 0;
		struct timespec pause = {0, interval_us * 1000};

		if (sscanf(line, "%lld %255s", &key, value) != 2)
			break;
		for (;;)
		{
			unsigned char hdr[HDR];
			int			changed = 1;
			long long	t = now_ns();

			polls++;
			if (shm != NULL)
			{
				for (int i = 0; i < HDR; i++)
					hdr[i] = shm[i];
				changed = memcmp(hdr, seen, HDR) != 0;
				if (changed)
					kill(getpid(), 0);
			}
			if (changed || t - last_query >= ANYWAY_NS)
			{
				int			found;

				if (shm != NULL)
					memcpy(seen, hdr, HDR);
				last_query = t;
				queries++;
				sqlite3_bind_int64(q, 1, key);
				found = sqlite3_step(q) == SQLITE_ROW &&
					sqlite3_column_text(q, 0) != NULL &&
					strcmp((const char *) sqlite3_column_text(q, 0), value) == 0;
				sqlite3_reset(q);
				if (found)
				{
					long long	at = now_ns();

					kill(getppid(), 0);
					printf("%lld %ld %ld\n", at, polls, queries);
					break;
				}
				spin_until = 0;
			}
			if (watch >= 0 && now_ns() >= spin_until)
			{
				struct pollfd pfd = {watch, POLLIN, 0};
				char		events[4096];

				/* until the WAL is written (or 2 ms pass), then look until its header changes */
				if (poll(&pfd, 1, ANYWAY_NS / 1000000) > 0)
					spin_until = now_ns() + SPIN_NS;
				while (read(watch, events, sizeof(events)) > 0)
					;
				continue;
			}
			nanosleep(&pause, NULL);
		}
	}
	getrusage(RUSAGE_SELF, &ru);
	printf("cpu %lld %lld %lld\n",
		   ru.ru_utime.tv_sec * 1000000000LL + ru.ru_utime.tv_usec * 1000LL,
		   ru.ru_stime.tv_sec * 1000000000LL + ru.ru_stime.tv_usec * 1000LL, setup_ns);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return 0;
}
