/*
 * harness.h - the SQLite suite's small test framework.  Every test file
 * defines test functions listed in main.c; each opens its own database with
 * the extension registered (built into the harness, under ASan and UBSan).
 */
#ifndef MS_HARNESS_H
#define MS_HARNESS_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "msgs.h"

extern int	ms_passed;
extern int	ms_failed;

#define CHECK(cond, ...) \
	do { \
		if (cond) \
			ms_passed++; \
		else \
		{ \
			ms_failed++; \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

/*
 * t_path: NAME in a directory of this run's own (made at the first call,
 * removed at the end once the tests removed their files), so that runs side
 * by side never share a file.  The string lasts until the suite ends.
 */
extern const char *t_path(const char *name);

/* t_open: a new in-memory database (or file, when path is not NULL) with the extension. */
extern sqlite3 *t_open(const char *path);

/*
 * t_close: sqlite3_close, every test's: with MS_TEST_KEEP=1 in the
 * environment, t_open has each connection keep its statements
 * (sync_keep_statements, src/sqlite/kept.c) and t_close lets them go first,
 * so that the whole suite runs both ways.
 */
extern int	t_close(sqlite3 *db);
#ifndef MS_HARNESS_MAIN
#define sqlite3_close t_close
#endif

/* t_text: the first column of the first row of sql, as a new string (free with sqlite3_free), or NULL. */
extern char *t_text(sqlite3 *db, const char *sql);

/* t_int: the first column of the first row of sql, as an integer (-999999 on error). */
extern long long t_int(sqlite3 *db, const char *sql);

/* t_exec: run sql; returns the SQLite result code, and the error in *err when asked. */
extern int	t_exec(sqlite3 *db, const char *sql, char **err);

/* t_has: whether s (may be NULL) holds sub */
#define t_has(s, sub) ((s) != NULL && strstr((s), (sub)) != NULL)
/* S: a possibly NULL string, for messages */
#define S(s) ((s) ? (s) : "(null)")

/*
 * t_trace: from now on, counts[i] counts the statements run on db (those the
 * extension's functions run too) whose text holds words[i] (words ends with
 * NULL; counts zeroed); t_trace(db, NULL, NULL) stops counting.
 */
extern void t_trace(sqlite3 *db, const char *const *words, int *counts);

/* t_shop: a new in-memory replica holding the shop snapshot of server s. */
extern sqlite3 *t_shop(tm_server *s);

#endif
