/*
 * main.c - runs the SQLite suite: every test group below, then prints
 * "N passed, N failed".  MS_TESTS=evolve,apply runs those groups only.
 */
#define MS_HARNESS_MAIN
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <direct.h>
#include <io.h>
#else
#include <unistd.h>
#endif

int			ms_passed;
int			ms_failed;

extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

/* the test groups, one file each */
extern void test_keys(void);
extern void test_apply(void);
extern void test_codec(void);
extern void test_letgo(void);
extern void test_upload(void);
extern void test_sends(void);
extern void test_digest(void);
extern void test_misuse(void);
extern void test_evolve(void);
extern void test_guard(void);
extern void test_reach(void);
extern void test_found(void);
extern void test_oom(void);
extern void test_claims(void);
extern void test_seal(void);
extern void test_wish(void);
extern void test_hlc(void);
extern void test_lanes(void);
extern void test_sign(void);
extern void test_host(void);
extern void test_backfill(void);
extern void test_full(void);
extern void test_many(void);
extern void test_kept(void);

static char t_dir[64];
static char *t_paths[32];
static int	t_npaths;

const char *
t_path(const char *name)
{
	char	   *path;

	if (t_dir[0] == '\0')
	{
#ifdef _WIN32
		/* no mkdtemp there: a unique name, then the directory */
		snprintf(t_dir, sizeof t_dir, "ms_test_XXXXXX");
		if (_mktemp(t_dir) == NULL || _mkdir(t_dir) != 0)
#else
		snprintf(t_dir, sizeof t_dir, "/tmp/ms_test_XXXXXX");
		if (mkdtemp(t_dir) == NULL)
#endif
		{
			fprintf(stderr, "cannot make a directory for the test files\n");
			exit(2);
		}
	}
	path = t_npaths < 32 ? sqlite3_mprintf("%s/%s", t_dir, name) : NULL;
	if (path == NULL)
	{
		fprintf(stderr, "out of memory, or too many test files\n");
		exit(2);
	}
	t_paths[t_npaths++] = path;
	return path;
}

sqlite3 *
t_open(const char *path)
{
	sqlite3    *db = NULL;

	if (sqlite3_open(path ? path : ":memory:", &db) != SQLITE_OK)
	{
		fprintf(stderr, "cannot open %s\n", path ? path : ":memory:");
		exit(2);
	}
	/* a connection opened without the extension on purpose (test_upload.c) keeps nothing */
	if (getenv("MS_TEST_KEEP") != NULL && strcmp(getenv("MS_TEST_KEEP"), "1") == 0 &&
		sqlite3_exec(db, "SELECT sync_keep_statements(1)", NULL, NULL, NULL) != SQLITE_OK &&
		strstr(sqlite3_errmsg(db), "no such function") == NULL)
	{
		fprintf(stderr, "cannot keep statements: %s\n", sqlite3_errmsg(db));
		exit(2);
	}
	return db;
}

int
t_close(sqlite3 *db)
{
	/* a connection that keeps none: 0 kept, nothing to do */
	if (db != NULL && getenv("MS_TEST_KEEP") != NULL)
		sqlite3_exec(db, "SELECT sync_keep_statements(0)", NULL, NULL, NULL);
	return sqlite3_close(db);
}

char *
t_text(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	char	   *out = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
	{
		fprintf(stderr, "prepare failed: %s: %s\n", sql, sqlite3_errmsg(db));
		return NULL;
	}
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		out = sqlite3_mprintf("%s", (const char *) sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return out;
}

typedef struct t_traced
{
	const char *const *words;
	int		   *counts;
} t_traced;

static int
t_trace_stmt(unsigned type, void *arg, void *p, void *x)
{
	t_traced   *t = arg;
	const char *sql = sqlite3_sql((sqlite3_stmt *) p);

	(void) type;
	(void) x;
	for (int i = 0; sql != NULL && t->words[i] != NULL; i++)
		if (strstr(sql, t->words[i]) != NULL)
			t->counts[i]++;
	return 0;
}

void
t_trace(sqlite3 *db, const char *const *words, int *counts)
{
	static t_traced t;

	if (words == NULL)
	{
		sqlite3_trace_v2(db, 0, NULL, NULL);
		return;
	}
	for (int i = 0; words[i] != NULL; i++)
		counts[i] = 0;
	t.words = words;
	t.counts = counts;
	sqlite3_trace_v2(db, SQLITE_TRACE_STMT, t_trace_stmt, &t);
}

long long
t_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long long	out = -999999;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
	{
		fprintf(stderr, "prepare failed: %s: %s\n", sql, sqlite3_errmsg(db));
		return out;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		out = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return out;
}

sqlite3 *
t_shop(tm_server *s)
{
	sqlite3    *db = t_open(NULL);
	tm_msg		begin,
				end;
	char	   *r;

	tm_server_init(s, 0x20, 0x10);
	tm_shop_snapshot(s, &begin, &end);
	r = tm_apply(db, begin);
	CHECK(t_has(r, "\"applied\""), "the shop's snapshot begins: %s %s", S(r), tm_error());
	r = tm_apply(db, end);
	CHECK(t_has(r, "\"snapshot\":\"end\""), "the shop's snapshot ends: %s %s", S(r), tm_error());
	return db;
}

int
t_exec(sqlite3 *db, const char *sql, char **err)
{
	char	   *msg = NULL;
	int			rc = sqlite3_exec(db, sql, NULL, NULL, &msg);

	if (err)
		*err = msg;
	else
		sqlite3_free(msg);
	return rc;
}

/* named: whether list (names: "evolve,apply") names name */
static int
named(const char *list, const char *name)
{
	size_t		n = strlen(name);

	for (const char *p = list; p != NULL && *p; p += strcspn(p, ","), p += *p == ',')
		if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return 1;
	return 0;
}

/*
 * run: a test group, unless MS_TESTS (a list of names: "evolve,apply") leaves
 * it out, or MS_TESTS_SKIP names it
 */
static void
run(const char *name, void (*group) (void))
{
	const char *only = getenv("MS_TESTS");

	if ((only == NULL || named(only, name)) && !named(getenv("MS_TESTS_SKIP"), name))
		group();
}

int
main(void)
{
	sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
	run("keys", test_keys);
	run("apply", test_apply);
	run("codec", test_codec);
	run("letgo", test_letgo);
	run("upload", test_upload);
	run("wish", test_wish);
	run("sends", test_sends);
	run("digest", test_digest);
	run("misuse", test_misuse);
	run("evolve", test_evolve);
	run("guard", test_guard);
	run("reach", test_reach);
	run("found", test_found);
	run("oom", test_oom);
	run("claims", test_claims);
	run("seal", test_seal);
	run("hlc", test_hlc);
	run("lanes", test_lanes);
	run("sign", test_sign);
	run("host", test_host);
	run("backfill", test_backfill);
	run("full", test_full);
	run("many", test_many);
	run("kept", test_kept);
	tm_free_all();
	while (t_npaths > 0)
		sqlite3_free(t_paths[--t_npaths]);
#ifdef _WIN32
	if (t_dir[0] != '\0' && _rmdir(t_dir) != 0)
#else
	if (t_dir[0] != '\0' && rmdir(t_dir) != 0)
#endif
	{
		fprintf(stderr, "FAIL a test left a file in %s\n", t_dir);
		ms_failed++;
	}
	printf("%d passed, %d failed\n", ms_passed, ms_failed);
	sqlite3_reset_auto_extension();
	return ms_failed == 0 ? 0 : 1;
}
