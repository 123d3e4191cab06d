/*
 * test_oom.c - out of memory at every allocation: SQLite's allocator
 * (sqlite3_config(SQLITE_CONFIG_MALLOC), lookaside off, so every allocation
 * of SQLite's and the extension's is one) fails at allocation N, for every
 * N from 1 until a call runs through without reaching N, over:
 *
 *   snapshot   sync_apply of a snapshot's Begin, on a new file
 *   end        sync_apply of its EndSnapshot
 *   down       sync_apply of a Down: upserts in both codecs, a replacement,
 *              a row refused, deletes that let go and retire
 *   kept       the same Down, every table's values sum kept (vsum.c)
 *   filed      sync_apply of a Filed answer refusing a row
 *   upload     sync_upload() with rows, a delete and a refusal to carry
 *   schema     sync_apply of a snapshot of another schema: a column added,
 *              a table rebuilt for its new key, a table no longer mirrored
 *   signed     sync_apply of a Down on a replica that trusts the server's
 *              key: the key read, the signature checked, then applied
 *
 * each on a file database in autocommit, as a host calls them.  For every
 * N the call gives a result or an error, never a crash, and:
 *   - after an error the connection is in no transaction (autocommit) and
 *     no savepoint of ours is open (RELEASE of each name says there is no
 *     such savepoint); every table, the _sync_ ones too, is exactly as
 *     before, on this connection and on a new one; and the call then runs
 *     through as it does with memory enough;
 *   - a result is the one the call gives with memory enough, and leaves
 *     the file as that call does (times and random send ids aside).
 * MS_OOM_PERSISTENT=1 makes every allocation from N on fail (until the
 * call returns), not N alone; MS_OOM_ONLY=name runs one call's loop;
 * MS_OOM_STRIDE=k fails every k-th N only (1, 1 + k, ...): tests/cross/run
 * samples so under an emulator, where every N would take most of the suite,
 * the native suite (ASan + UBSan) still failing every one;
 * MS_OOM_TRACE=N prints where allocation N is made; MS_OOM_FROM=N begins
 * the loop at N (a failure looked at again); MS_OOM_VERBOSE=1 the
 * result and file with memory enough.  The N are shared out
 * between one worker process per processor.  Prints how many N it covered.
 */
#include "harness.h"

#include <stdlib.h>
#include <unistd.h>
#ifdef _WIN32
#include <direct.h>
#include <io.h>
#else
#include <sys/wait.h>
#endif
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/common_interface_defs.h>
#endif

void		test_oom(void);

extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

/* ---- the failing allocator ------------------------------------------------- */

static sqlite3_mem_methods real;
static long counted;			/* allocations since armed */
static long fail_at;			/* 0: none fails */
static bool persistent;
static bool armed;
static bool injected;

static long trace_at;			/* MS_OOM_TRACE=N: where allocation N is made, on stderr */
static long stride = 1;			/* MS_OOM_STRIDE=k: every k-th N fails */
static long first = 1;			/* MS_OOM_FROM=N: the first N */

/*
 * whether the call runs through after failing allocation N: one N sampled in
 * 64 (N % 64 == 0 when every N fails; counted by the sample's index when
 * sampled, since N = 1 + k * i is never a multiple of 64 for an even k)
 */
static bool
runs_through(long n)
{
	return ((n - 1) / stride + 1) % 64 == 0;
}

static bool
fails(void)
{
	if (!armed)
		return false;
	counted++;
	if (fail_at > 0 && (counted == fail_at || (persistent && counted > fail_at)))
	{
#ifdef __SANITIZE_ADDRESS__
		if (counted == trace_at)
			__sanitizer_print_stack_trace();
#endif
		injected = true;
		return true;
	}
	return false;
}

static void *
oom_malloc(int n)
{
	return fails() ? NULL : real.xMalloc(n);
}

static void *
oom_realloc(void *p, int n)
{
	return fails() ? NULL : real.xRealloc(p, n);
}

static void
arm(long n)
{
	counted = 0;
	fail_at = n;
	injected = false;
	armed = true;
}

static void
disarm(void)
{
	armed = false;
}

/* SQLite's allocator wrapped, and lookaside off: every allocation goes through ours */
static void
install(bool on)
{
	static sqlite3_mem_methods mine;

	sqlite3_reset_auto_extension();
	sqlite3_shutdown();
	if (on)
	{
		sqlite3_config(SQLITE_CONFIG_GETMALLOC, &real);
		mine = real;
		mine.xMalloc = oom_malloc;
		mine.xRealloc = oom_realloc;
		sqlite3_config(SQLITE_CONFIG_MALLOC, &mine);
		sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0);
	}
	else
	{
		sqlite3_config(SQLITE_CONFIG_MALLOC, &real);
		sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 1200, 100);
	}
	sqlite3_initialize();
	sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
}

/* ---- the file, and what it holds --------------------------------------------- */

static char dir[64];
static char path[128];

static sqlite3 *
open_file(void)
{
	sqlite3    *db = t_open(path);

	/* durability is not what is tested: no fsync */
	t_exec(db, "PRAGMA synchronous = OFF", NULL);
	return db;
}

static void
put_file(const tm_msg *image)
{
	char		journal[160];
	FILE	   *f = fopen(path, "wb");

	snprintf(journal, sizeof journal, "%s-journal", path);
	unlink(journal);
	if (f == NULL || (image->len && fwrite(image->data, 1, image->len, f) != image->len))
	{
		fprintf(stderr, "cannot write %s\n", path);
		exit(2);
	}
	fclose(f);
}

static tm_msg
get_file(void)
{
	tm_msg		m = {NULL, 0};
	FILE	   *f = fopen(path, "rb");
	long		n;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0)
		exit(2);
	rewind(f);
	m.len = (size_t) n;
	m.data = tm_alloc(m.len);
	if (m.len && fread(m.data, 1, m.len, f) != m.len)
		exit(2);
	fclose(f);
	return m;
}

/*
 * a column whose value is a time, a random send id or a send number (taken
 * from the clock): masked when comparing with a run of its own
 */
static bool
varies(const char *table, const char *column)
{
	size_t		n = strlen(column);

	/* tables_gen: random at each write of _sync_tables or _sync_made (state.c); reach_gen a copy (reach.c) */
	return (strcmp(table, "_sync_seq") == 0 && strcmp(column, "last") == 0) ||
		(strcmp(table, "_sync_state") == 0 && (strcmp(column, "tables_gen") == 0 || strcmp(column, "reach_gen") == 0)) ||
		strcmp(column, "at") == 0 || (n > 3 && strcmp(column + n - 3, "_at") == 0) ||
		strstr(column, "send_id") != NULL;
}

/*
 * dump: the schema and every row of every table, _sync_ ones too, as text
 * (sqlite3_malloc'd); times and send ids masked when mask is true
 */
static char *
dump(sqlite3 *db, bool mask)
{
	sqlite3_stmt *tables;
	sqlite3_str *out = sqlite3_str_new(db);

	sqlite3_str_appendall(out, "the file:\n");
	if (sqlite3_prepare_v2(db, "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY name",
						   -1, &tables, NULL) != SQLITE_OK)
	{
		sqlite3_str_appendf(out, "cannot read the schema: %s", sqlite3_errmsg(db));
		return sqlite3_str_finish(out);
	}
	while (sqlite3_step(tables) == SQLITE_ROW)
	{
		const char *type = (const char *) sqlite3_column_text(tables, 0);
		const char *name = (const char *) sqlite3_column_text(tables, 1);
		sqlite3_stmt *rows;
		char	   *sql;

		sqlite3_str_appendf(out, "%s %s %s: %s\n", type, name, sqlite3_column_text(tables, 2),
							sqlite3_column_text(tables, 3));
		if (strcmp(type, "table") != 0)
			continue;
		sql = sqlite3_mprintf("SELECT * FROM \"%w\"", name);
		if (sqlite3_prepare_v2(db, sql, -1, &rows, NULL) != SQLITE_OK)
		{
			sqlite3_str_appendf(out, "  cannot read: %s\n", sqlite3_errmsg(db));
			sqlite3_free(sql);
			continue;
		}
		sqlite3_free(sql);
		while (sqlite3_step(rows) == SQLITE_ROW)
		{
			sqlite3_str_appendall(out, " ");
			for (int i = 0; i < sqlite3_column_count(rows); i++)
			{
				int			t = sqlite3_column_type(rows, i);

				if (mask && varies(name, sqlite3_column_name(rows, i)))
					sqlite3_str_appendall(out, " ?");
				else if (t == SQLITE_BLOB)
				{
					const uint8_t *b = sqlite3_column_blob(rows, i);
					int			len = sqlite3_column_bytes(rows, i);
					char	   *hex = malloc((size_t) len * 2 + 1);

					for (int k = 0; k < len; k++)
					{
						hex[2 * k] = "0123456789abcdef"[b[k] >> 4];
						hex[2 * k + 1] = "0123456789abcdef"[b[k] & 15];
					}
					hex[2 * len] = '\0';
					sqlite3_str_appendf(out, " x'%s'", hex);
					free(hex);
				}
				else
					sqlite3_str_appendf(out, " %d:%s", t, t == SQLITE_NULL ? "" : (const char *) sqlite3_column_text(rows, i));
			}
			sqlite3_str_appendall(out, "\n");
		}
		sqlite3_finalize(rows);
	}
	sqlite3_finalize(tables);
	return sqlite3_str_finish(out);
}

/* ---- the calls ------------------------------------------------------------------ */

typedef struct call
{
	const char *name;
	void		(*setup) (sqlite3 *db, tm_server *s, tm_msg *m);
	bool		upload;			/* sync_upload(); else sync_apply(m) */
} call;

/*
 * what a call gave: its result as text (an upload: decoded, with what
 * changes from one call to the next left out: its send id, its number,
 * taken from the clock, and the length and check of its frame), or its error
 */
typedef struct outcome
{
	int			rc;
	char	   *text;			/* sqlite3_malloc'd */
} outcome;

static char *
upload_text(const void *blob, int n)
{
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	Sync__Up   *u = ms_up_decode(blob, (size_t) n, 1 << 30, NULL, &st, reason);
	char	   *out;
	uint8_t    *b;
	size_t		len;
	sqlite3_str *s;

	if (u == NULL)
		return sqlite3_mprintf("an upload that does not decode: %s", reason);
	memset(u->send_id.data, 0, u->send_id.len);
	u->seq = 0;
	u->length = 0;
	u->check.len = 0;
	len = sync__up__get_packed_size(u);
	b = malloc(len ? len : 1);
	sync__up__pack(u, b);
	s = sqlite3_str_new(NULL);
	sqlite3_str_appendall(s, "upload x'");
	for (size_t i = 0; i < len; i++)
		sqlite3_str_appendf(s, "%02x", b[i]);
	sqlite3_str_appendall(s, "'");
	out = sqlite3_str_finish(s);
	free(b);
	sync__up__free_unpacked(u, NULL);
	return out;
}

/* run the call on db; allocations fail from fail (0: none); counted says how many it made */
static outcome
run_call(sqlite3 *db, const call *c, const tm_msg *m, long fail)
{
	sqlite3_stmt *st;
	outcome		o = {0, NULL};

	if (sqlite3_prepare_v2(db, c->upload ? "SELECT sync_upload()" : "SELECT sync_apply(?1)", -1, &st, NULL) != SQLITE_OK)
	{
		o.rc = -1;
		o.text = sqlite3_mprintf("cannot prepare: %s", sqlite3_errmsg(db));
		return o;
	}
	if (!c->upload)
		sqlite3_bind_blob(st, 1, m->data, (int) m->len, SQLITE_STATIC);
	arm(fail);
	o.rc = sqlite3_step(st);
	disarm();
	if (o.rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_BLOB)
		o.text = upload_text(sqlite3_column_blob(st, 0), sqlite3_column_bytes(st, 0));
	else if (o.rc == SQLITE_ROW)
		o.text = sqlite3_mprintf("%s", sqlite3_column_text(st, 0));
	else
		o.text = sqlite3_mprintf("error %d: %s", o.rc, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return o;
}

/* savepoints the extension opens */
static const char *const ours[] = {"_sync_apply", "_sync_let_go", "_sync_table", "_sync_upload", "_sync_digest"};

static const char *
savepoint_open(sqlite3 *db)
{
	for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
	{
		char	   *sql = sqlite3_mprintf("RELEASE \"%w\"", ours[i]);
		int			rc = sqlite3_exec(db, sql, NULL, NULL, NULL);

		sqlite3_free(sql);
		if (rc == SQLITE_OK || strstr(sqlite3_errmsg(db), "no such savepoint") == NULL)
			return ours[i];
	}
	return NULL;
}

typedef struct tally
{
	long		covered;		/* N that failed an allocation */
	long		errors;
	long		results;
	long		failures;		/* checks that failed */
	long		bad;			/* N with a check that failed */
} tally;

static void
failure(tally *t, const call *c, long n, const char *fmt, const char *a, const char *b)
{
	if (t->failures++ < 5)
	{
		fprintf(stderr, "FAIL oom %s, allocation %ld failing: ", c->name, n);
		fprintf(stderr, fmt, a ? a : "", b ? b : "");
		fputc('\n', stderr);
	}
}

/* whether the file holds exactly the image, and no journal is left beside it */
static bool
file_is(const tm_msg *image)
{
	char		journal[160];
	FILE	   *f = fopen(path, "rb");
	uint8_t    *now = malloc(image->len + 1);
	bool		same;

	snprintf(journal, sizeof journal, "%s-journal", path);
	same = f != NULL && now != NULL && fread(now, 1, image->len + 1, f) == image->len &&
		(image->len == 0 || memcmp(now, image->data, image->len) == 0) && access(journal, F_OK) != 0;
	if (f)
		fclose(f);
	free(now);
	return same;
}

/*
 * one N: the call with allocation n failing, on the base image; false when
 * the call made fewer than n allocations
 */
static bool
one(const call *c, const tm_msg *image, const char *image_dump, const tm_msg *m, long n,
	const outcome *ref, const char *ref_dump, tally *t)
{
	sqlite3    *db;
	char	   *after;
	outcome		o;
	long		bad = t->failures;

	put_file(image);
	db = open_file();
	o = run_call(db, c, m, n);
	if (!injected)
	{
		sqlite3_free(o.text);
		sqlite3_close(db);
		return false;
	}
	t->covered++;
	if (o.rc == SQLITE_ROW)
	{
		t->results++;
		after = dump(db, true);
		if (strcmp(o.text, ref->text) != 0)
			failure(t, c, n, "a result other than with memory enough: %s%s", o.text, "");
		else if (strcmp(after, ref_dump) != 0)
			failure(t, c, n, "a result, and the file is not as with memory enough%s%s", "", "");
		sqlite3_free(after);
		sqlite3_close(db);
	}
	else
	{
		const char *open;

		t->errors++;
		if (!sqlite3_get_autocommit(db))
			failure(t, c, n, "after the error (%s) the connection is inside a transaction%s", o.text, "");
		else if ((open = savepoint_open(db)) != NULL)
			failure(t, c, n, "after the error (%s) savepoint %s is open", o.text, open);
		after = dump(db, false);
		if (strcmp(image_dump, after) != 0)
			failure(t, c, n, "the error (%s) changed what the connection reads%s", o.text, "");
		sqlite3_free(after);
		/* the call runs through after it, now and then (the file being as before says the rest) */
		if (runs_through(n))
		{
			sqlite3_free(o.text);
			o = run_call(db, c, m, 0);
			if (o.rc != SQLITE_ROW || strcmp(o.text, ref->text) != 0)
				failure(t, c, n, "after the error the call no longer runs through: %s%s", o.text, "");
			put_file(image);
		}
		sqlite3_close(db);
		/* the same bytes, or else what a new connection reads is the same */
		if (!runs_through(n) && !file_is(image))
		{
			db = open_file();
			after = dump(db, false);
			if (strcmp(image_dump, after) != 0)
				failure(t, c, n, "after the error (%s) a new connection reads the file changed%s", o.text, "");
			else if (getenv("MS_OOM_BYTES"))
				fprintf(stderr, "oom %s, allocation %ld: the file's bytes differ (%ld, was %zu), not what it holds\n",
						c->name, n, (long) get_file().len, image->len);
			sqlite3_free(after);
			sqlite3_close(db);
		}
	}
	sqlite3_free(o.text);
	if (t->failures > bad)
		t->bad++;
	return true;
}

static long
loop(const call *c)
{
	tm_server	s;
	tm_msg		m = {NULL, 0};
	tm_msg		image;
	sqlite3    *db;
	outcome		ref;
	char	   *ref_dump;
	char	   *image_dump;
	long		allocations;
	tally		t = {0};

	unlink(path);
	db = open_file();
	c->setup(db, &s, &m);
	sqlite3_close(db);
	image = get_file();

	/* with memory enough */
	put_file(&image);
	db = open_file();
	image_dump = dump(db, false);
	ref = run_call(db, c, &m, 0);
	allocations = counted;
	ref_dump = dump(db, true);
	sqlite3_close(db);
	CHECK(ref.rc == SQLITE_ROW, "oom %s: with memory enough the call runs through: %s", c->name, S(ref.text));
	if (getenv("MS_OOM_VERBOSE"))
		fprintf(stderr, "oom %s with memory enough: %s\n%s", c->name, ref.text, ref_dump);

#ifdef _WIN32
	/* no fork on Windows: the N run in turn, in this process */
	for (long n = first; one(c, &image, image_dump, &m, n, &ref, ref_dump, &t); n += stride)
		;
#else
	/* the N shared out between workers, one per processor (at most 4): the i-th N goes to worker i % workers */
	{
		long		cpus = sysconf(_SC_NPROCESSORS_ONLN);
		int			workers = cpus < 1 ? 1 : cpus > 4 ? 4 : (int) cpus;
		pid_t		pids[4];
		int			fds[4];

		for (int w = 0; w < workers; w++)
		{
			int			p[2];

			if (pipe(p) != 0 || (pids[w] = fork()) < 0)
			{
				perror("fork");
				exit(2);
			}
			if (pids[w] == 0)
			{
				tally		mine = {0};

				close(p[0]);
				snprintf(path, sizeof path, "%s/replica-%d.db", dir, w);
				for (long n = first + w * stride; one(c, &image, image_dump, &m, n, &ref, ref_dump, &mine); n += workers * stride)
					;
				unlink(path);
				if (write(p[1], &mine, sizeof mine) != (ssize_t) sizeof mine)
					_exit(2);
				_exit(0);
			}
			close(p[1]);
			fds[w] = p[0];
		}
		for (int w = 0; w < workers; w++)
		{
			tally		theirs = {0};
			int			status = 0;

			if (read(fds[w], &theirs, sizeof theirs) != (ssize_t) sizeof theirs)
				theirs.bad++;	/* it died: ASan or UBSan said why on stderr */
			close(fds[w]);
			waitpid(pids[w], &status, 0);
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				theirs.bad++;
			t.covered += theirs.covered;
			t.errors += theirs.errors;
			t.results += theirs.results;
			t.failures += theirs.failures;
			t.bad += theirs.bad;
		}
	}
#endif
	printf("oom %-9s %6ld allocations, one in %ld failing in turn%s: %ld errors, %ld results\n",
		   c->name, allocations, stride, persistent ? " with all after it" : "", t.errors, t.results);
	/* an error's way out may allocate more than the call with memory enough */
	CHECK(t.covered >= (allocations + stride - 1) / stride, "oom %s: every allocation sampled failed once (%ld of %ld, one in %ld)",
		  c->name, t.covered, allocations, stride);
	CHECK(t.bad == 0, "oom %s: %ld of %ld failing allocations misbehaved", c->name, t.bad, t.covered);
	sqlite3_free(ref.text);
	sqlite3_free(image_dump);
	sqlite3_free(ref_dump);
	return t.covered;
}

/* ---- the base states -------------------------------------------------------------- */

static void
must_apply(sqlite3 *db, tm_msg m)
{
	char	   *r = tm_apply(db, m);

	CHECK(r != NULL, "oom setup: a message applies: %s", tm_error());
}

static void
exec_mine(sqlite3 *db, const tm_server *s, const char *fmt)
{
	char	   *sql = sqlite3_mprintf(fmt, tm_replica_text(s), tm_replica_text(s), tm_replica_text(s));
	char	   *err = NULL;

	CHECK(t_exec(db, sql, &err) == SQLITE_OK, "oom setup: %s: %s", sql, S(err));
	sqlite3_free(err);
	sqlite3_free(sql);
}

static void
setup_snapshot(sqlite3 *db, tm_server *s, tm_msg *m)
{
	tm_msg		end;

	(void) db;
	tm_server_init(s, 0x20, 0x10);
	tm_shop_snapshot(s, m, &end);
}

static void
setup_end(sqlite3 *db, tm_server *s, tm_msg *m)
{
	tm_msg		begin;

	tm_server_init(s, 0x20, 0x10);
	tm_shop_snapshot(s, &begin, m);
	must_apply(db, begin);
	/* a row the snapshot does not name goes at its end */
	t_exec(db, "UPDATE _sync_state SET applying = 1", NULL);
	t_exec(db, "INSERT INTO customers(id, name, vip) VALUES (9, 'Old', 0)", NULL);
	t_exec(db, "UPDATE _sync_state SET applying = 0", NULL);
}

/* the shop, with the host's own order and sale pointing at customer 2 and product 2 */
static void
shop_with_writes(sqlite3 *db, tm_server *s)
{
	tm_msg		begin,
				end;

	tm_server_init(s, 0x20, 0x10);
	tm_shop_snapshot(s, &begin, &end);
	must_apply(db, begin);
	must_apply(db, end);
	exec_mine(db, s, "INSERT INTO orders(origin, id, customer, total, note) VALUES ('%s', 1, 2, 12.5, 'caf\xc3\xa9');"
			  "INSERT INTO sales(origin, id, product, qty, price, memo, photo) VALUES ('%s', 1, 2, 3, 9.75, 'x', x'00ff');"
			  "INSERT INTO orders(origin, id, customer, total) VALUES ('%s', 2, 1, 1);"
			  "UPDATE products SET stock = 7 WHERE id = 1;");
}

static Sync__Down *
a_down(void)
{
	Sync__Down *d = tm_down();
	tm_buf		b;
	const char *other = "0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1";

	tm_upsert(tm_rows(d, "customers"), "{\"id\":3,\"name\":\"Cy \\u00e9\",\"vip\":false}", -1, "3", NULL);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":4,\"name\":4}", -1, "4", NULL);	/* refused */
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\",\"price\":2.75,\"stock\":8}", -1, "1", NULL);
	tm_replace(tm_rows(d, "products"), "1", NULL);
	tm_upsert(tm_rows(d, "orders"), "{\"origin\":\"0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1\",\"id\":1,"
			  "\"customer\":3,\"total\":12.5,\"note\":\"x\"}", -1, other, "1", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_bytes(&b, 1, other, strlen(other));
	tm_pb_int(&b, 2, 7);
	tm_pb_int(&b, 3, 1);
	tm_pb_int(&b, 4, -2);
	tm_pb_double(&b, 5, 2.5);
	tm_pb_bytes(&b, 6, "memo", 4);
	tm_pb_bytes(&b, 7, "\x00\xff", 2);
	tm_upsert(tm_rows(d, "sales"), b.data, (long) b.len, other, "7", NULL);
	tm_delete(tm_rows(d, "products"), "2", NULL);	/* a sale of its own points at it: retired */
	tm_delete(tm_rows(d, "products"), "3", NULL);	/* let go */
	tm_delete(tm_rows(d, "customers"), "2", NULL);
	return d;
}

static void
setup_down(sqlite3 *db, tm_server *s, tm_msg *m)
{
	shop_with_writes(db, s);
	*m = tm_next(s, a_down(), NULL);
}

/* the same Down, every table's values sum kept (a digest made them): each written row's hash out and in (vsum.c) */
static void
setup_kept(sqlite3 *db, tm_server *s, tm_msg *m)
{
	shop_with_writes(db, s);
	CHECK(t_exec(db, "SELECT sync_digest()", NULL) == SQLITE_OK &&
		  t_int(db, "SELECT count(*) FROM _sync_vsum WHERE fresh = 1") == 4, "oom setup: the sums kept");
	*m = tm_next(s, a_down(), NULL);
}

/* what an upload carries: the host's rows, a delete of a record of its own, a refusal */
static void
setup_upload(sqlite3 *db, tm_server *s, tm_msg *m)
{
	Sync__Down *d = tm_down();

	(void) m;
	shop_with_writes(db, s);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":4,\"name\":4}", -1, "4", NULL);
	must_apply(db, tm_next(s, d, NULL));
	exec_mine(db, s, "DELETE FROM orders WHERE origin = '%s' AND id = 2");
}

/* a Filed answer to an upload, refusing the sale */
static void
setup_filed(sqlite3 *db, tm_server *s, tm_msg *m)
{
	tm_msg		up;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	Sync__Up   *u;
	Sync__Filed *f;

	shop_with_writes(db, s);
	up = tm_upload(db);
	u = up.data ? ms_up_decode(up.data, up.len, 1 << 30, NULL, &st, reason) : NULL;
	CHECK(u != NULL, "oom setup: an upload: %s", tm_error());
	if (u == NULL)
		return;
	f = tm_filed(u->send_id.data, 2);
	tm_filed_refuse(f, "sales", tm_key(tm_replica_text(s), "1", NULL), "no such product");
	*m = tm_filed_msg(s, f);
	sync__up__free_unpacked(u, NULL);
}

/* a Down on a replica that trusts the server's key: its signature checked, then applied */
static void
setup_signed(sqlite3 *db, tm_server *s, tm_msg *m)
{
	Sync__Down *d = tm_down();
	uint8_t		key[32];
	char		hex[65];
	char	   *sql;

	shop_with_writes(db, s);
	tm_server_key(key);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	sql = sqlite3_mprintf("SELECT sync_trust_key('%s')", hex);
	CHECK(t_exec(db, sql, NULL) == SQLITE_OK, "oom setup: the key pinned");
	sqlite3_free(sql);
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\",\"price\":2.75,\"stock\":8}", -1, "1", NULL);
	tm_delete(tm_rows(d, "customers"), "2", NULL);
	*m = tm_next(s, d, NULL);
}

/* a new snapshot of another schema: a column more (ALTER TABLE), a key changed (the table rebuilt), a table no longer mirrored */
static void
setup_schema(sqlite3 *db, tm_server *s, tm_msg *m)
{
	Sync__Table *shop[4];
	Sync__Table *schema[3];
	Sync__Down *d;

	shop_with_writes(db, s);
	tm_shop(shop);
	schema[0] = tm_table("customers", "catalog", "json", "id", "id INTEGER, name TEXT, vip INTEGER, city TEXT");
	schema[1] = tm_table("orders", "record", "json", "id",
						 "origin TEXT server=uuid, id INTEGER, customer INTEGER, total REAL, note TEXT");
	tm_origin(schema[1], "origin");
	tm_fk(schema[1], "customer", "customers", "id");
	schema[2] = shop[3];		/* sales, pointing at products, which go */
	d = tm_begin(schema, 3);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":1,\"city\":\"Oslo\"}", -1, "1", NULL);
	*m = tm_next(s, d, NULL);
}

static const call calls[] = {
	{"snapshot", setup_snapshot, false},
	{"end", setup_end, false},
	{"down", setup_down, false},
	{"kept", setup_kept, false},
	{"filed", setup_filed, false},
	{"upload", setup_upload, true},
	{"schema", setup_schema, false},
	{"signed", setup_signed, false},
};

void
test_oom(void)
{
	long		total = 0;
	const char *only = getenv("MS_OOM_ONLY");

#ifdef _WIN32
	/* no mkdtemp there: a unique name, then the directory */
	snprintf(dir, sizeof dir, "ms_oom_XXXXXX");
	if (_mktemp(dir) == NULL || _mkdir(dir) != 0)
#else
	snprintf(dir, sizeof dir, "/tmp/ms_oom_XXXXXX");
	if (mkdtemp(dir) == NULL)
#endif
	{
		fprintf(stderr, "cannot make a directory for the oom loop\n");
		exit(2);
	}
	snprintf(path, sizeof path, "%s/replica.db", dir);
	trace_at = getenv("MS_OOM_TRACE") ? atol(getenv("MS_OOM_TRACE")) : 0;
	stride = getenv("MS_OOM_STRIDE") ? atol(getenv("MS_OOM_STRIDE")) : 1;
	first = getenv("MS_OOM_FROM") ? atol(getenv("MS_OOM_FROM")) : 1;
	if (stride < 1)
		stride = 1;
	persistent = getenv("MS_OOM_PERSISTENT") != NULL && strcmp(getenv("MS_OOM_PERSISTENT"), "0") != 0;
	install(true);
	for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
		if (only == NULL || strcmp(only, calls[i].name) == 0)
			total += loop(&calls[i]);
	install(false);
	printf("oom loop: %ld allocation failures covered\n", total);
	{
		char		journal[160];

		snprintf(journal, sizeof journal, "%s-journal", path);
		unlink(journal);
		unlink(path);
		rmdir(dir);
	}
}
