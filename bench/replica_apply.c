/*
 * replica_apply.c - what sync_apply and sync_digest cost, against the
 * plainest SQLite doing the same work, in the same run.  Not a test.
 *
 *   make bench-replica        (or build/bench_replica_apply [rows] [dir] [digest [items]])
 *
 * Two database files with the same settings (WAL, synchronous=NORMAL), the
 * same table of 1M rows (made once by a snapshot, copied with VACUUM INTO):
 *
 *   apply    a message of N upserts (half updates of existing rows, half new
 *            rows) through SELECT sync_apply(?), against a prepared INSERT
 *            ... ON CONFLICT DO UPDATE loop of the same rows in one
 *            transaction.  Ratio: our throughput / bare throughput (the
 *            target is >= 0.7), for N = 1k and 10k, in both codecs (and
 *            50, json); beside it the CPU of the same size of message with
 *            the values sums kept (src/sqlite/vsum.c) and stale.
 *   digest   sync_digest(table) against a plain scan of its key column in
 *            key order, in CPU time.  Ratio: our time / scan time (the
 *            target is <= 3), on five table shapes (integer, text and
 *            two-part keys; narrow and wide rows), each of the rows count.
 *            "digest" as the third argument: this alone; "items" as the
 *            fourth: only the first shape.
 *
 * Each figure is the median of several rounds; the order of the two sides
 * alternates between rounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sqlite3.h>

#include "bench.h"

#include "../tests/sqlite/msgs.h"

extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

#define ROUNDS 7

typedef struct row
{
	long long	id;
	char		name[48];
	double		price;
	long long	qty;
	char		note[48];
} row;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static sqlite3 *
open_db(const char *path)
{
	return open_with(path, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -65536");
}

static char *
apply(sqlite3 *db, tm_msg m)
{
	sqlite3_stmt *st;
	static char out[512];

	sqlite3_prepare_v2(db, "SELECT sync_apply(?1)", -1, &st, NULL);
	sqlite3_bind_blob(st, 1, m.data, (int) m.len, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_ROW)
	{
		fprintf(stderr, "sync_apply: %s\n", sqlite3_errmsg(db));
		exit(1);
	}
	snprintf(out, sizeof out, "%s", (const char *) sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return out;
}

/* a digest of every table: its values sum kept from then on (src/sqlite/vsum.c) */
static void
digest_all(sqlite3 *db)
{
	sqlite3_stmt *st;

	sqlite3_prepare_v2(db, "SELECT sync_digest()", -1, &st, NULL);
	if (sqlite3_step(st) != SQLITE_ROW)
	{
		fprintf(stderr, "sync_digest: %s\n", sqlite3_errmsg(db));
		exit(1);
	}
	sqlite3_finalize(st);
}

static unsigned long long rng = 88172645463325252ULL;

static unsigned long long
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static long long fresh_id;

/* n rows: half updates of existing rows, half new ones, in random order */
static row *
make_rows(int n, long long existing)
{
	row		   *rows = calloc((size_t) n, sizeof(row));

	for (int i = 0; i < n; i++)
	{
		row		   *r = &rows[i];

		r->id = (i % 2) ? (long long) (next() % (unsigned long long) existing) + 1 : ++fresh_id;
		/* a key given twice in one message would be two writes of one row: keep them unique */
		for (int j = 0; j < i; j++)
			if (rows[j].id == r->id)
			{
				r->id = ++fresh_id;
				break;
			}
		snprintf(r->name, sizeof r->name, "item %lld, round %llu", r->id, next() % 1000);
		r->price = (double) (next() % 100000) / 100.0;
		r->qty = (long long) (next() % 1000);
		snprintf(r->note, sizeof r->note, "note %llu", next() % 1000000);
	}
	return rows;
}

static tm_msg
message(tm_server *s, const char *table, int proto, const row *rows, int n)
{
	Sync__Down *d = tm_down();
	Sync__Rows *r = tm_rows(d, table);

	for (int i = 0; i < n; i++)
	{
		char		key[24];

		snprintf(key, sizeof key, "%lld", rows[i].id);
		if (proto)
		{
			tm_buf		b;

			memset(&b, 0, sizeof b);
			tm_pb_int(&b, 1, rows[i].id);
			tm_pb_bytes(&b, 2, rows[i].name, strlen(rows[i].name));
			tm_pb_double(&b, 3, rows[i].price);
			tm_pb_int(&b, 4, rows[i].qty);
			tm_pb_bytes(&b, 5, rows[i].note, strlen(rows[i].note));
			tm_upsert(r, b.data, (long) b.len, key, NULL);
		}
		else
		{
			char		json[256];

			snprintf(json, sizeof json, "{\"id\":%lld,\"name\":\"%s\",\"price\":%.2f,\"qty\":%lld,\"note\":\"%s\"}",
					 rows[i].id, rows[i].name, rows[i].price, rows[i].qty, rows[i].note);
			tm_upsert(r, json, -1, key, NULL);
		}
	}
	return tm_next(s, d, NULL);
}

static double
bare(sqlite3 *db, const char *table, const row *rows, int n)
{
	sqlite3_stmt *st;
	char	   *sql = sqlite3_mprintf("INSERT INTO %s(id, name, price, qty, note) VALUES (?1, ?2, ?3, ?4, ?5)"
									  " ON CONFLICT (id) DO UPDATE SET name = excluded.name, price = excluded.price,"
									  " qty = excluded.qty, note = excluded.note", table);
	double		t0 = now();

	exec(db, "BEGIN");
	sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	for (int i = 0; i < n; i++)
	{
		sqlite3_bind_int64(st, 1, rows[i].id);
		sqlite3_bind_text(st, 2, rows[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_double(st, 3, rows[i].price);
		sqlite3_bind_int64(st, 4, rows[i].qty);
		sqlite3_bind_text(st, 5, rows[i].note, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE)
		{
			fprintf(stderr, "bare upsert: %s\n", sqlite3_errmsg(db));
			exit(1);
		}
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	exec(db, "COMMIT");
	sqlite3_free(sql);
	return now() - t0;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, (size_t) n, sizeof(double), cmp_double);
	return v[n / 2];
}

static void
bench_apply(sqlite3 *ours, sqlite3 *plain, tm_server *s, const char *table, int proto, int n, long long existing)
{
	double		t_ours[ROUNDS],
				t_bare[ROUNDS],
				c_kept[ROUNDS],
				c_stale[ROUNDS];

	for (int round = 0; round < ROUNDS; round++)
	{
		row		   *rows = make_rows(n, existing);
		tm_msg		m = message(s, table, proto, rows, n);
		double		t0,
					c0;
		char	   *r = NULL;

		if (round % 2)
			t_bare[round] = bare(plain, table, rows, n);
		/* the values sums kept (src/sqlite/vsum.c): made fresh by a digest of the table */
		digest_all(ours);
		t0 = now();
		c0 = cpu_now();
		r = apply(ours, m);
		c_kept[round] = cpu_now() - c0;
		t_ours[round] = now() - t0;
		if (strstr(r, "\"applied\"") == NULL)
		{
			fprintf(stderr, "not applied: %s\n", r);
			exit(1);
		}
		if (round % 2 == 0)
			t_bare[round] = bare(plain, table, rows, n);
		free(rows);
		tm_free_all();
		/* the same message's size again, the sums stale: applied as before they were kept */
		rows = make_rows(n, existing);
		m = message(s, table, proto, rows, n);
		exec(ours, "UPDATE _sync_vsum SET fresh = 0");
		c0 = cpu_now();
		r = apply(ours, m);
		c_stale[round] = cpu_now() - c0;
		free(rows);
		tm_free_all();
	}
	{
		double		o = median(t_ours, ROUNDS);
		double		b = median(t_bare, ROUNDS);
		double		k = median(c_kept, ROUNDS);
		double		st = median(c_stale, ROUNDS);

		printf("apply %5d upserts (%-5s): sync_apply %8.2f ms (%7.0f rows/s), bare %8.2f ms (%7.0f rows/s),"
			   " throughput ratio %.2f (target >= 0.70)\n",
			   n, proto ? "proto" : "json", o * 1e3, n / o, b * 1e3, n / b, b / o);
		printf("  CPU: values sums kept %8.2f ms, stale %8.2f ms: keeping them costs %+.1f %%\n",
			   k * 1e3, st * 1e3, (k / st - 1) * 100);
	}
}

/* one table shape of the digest's: its key columns and every column */
typedef struct shape
{
	const char *table;
	const char *what;
	const char *key;			/* the key columns, as ORDER BY takes them */
	const char *cols;			/* every column */
} shape;

/* a scan of cols in key order, each value read: the key alone is the digest's baseline */
static double
scan(sqlite3 *db, const shape *sh, const char *cols, long long *count)
{
	sqlite3_stmt *st;
	char	   *sql = sqlite3_mprintf("SELECT %s FROM %s ORDER BY %s", cols, sh->table, sh->key);
	double		t0 = cpu_now();
	unsigned long long sum = 0;
	int			n;

	*count = 0;
	sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	n = sqlite3_column_count(st);
	while (sqlite3_step(st) == SQLITE_ROW)
	{
		for (int c = 0; c < n; c++)
		{
			sqlite3_value *v = sqlite3_column_value(st, c);

			sum += sqlite3_value_type(v) == SQLITE_TEXT ? (unsigned long long) sqlite3_value_bytes(v) :
				(unsigned long long) sqlite3_value_int64(v);
		}
		(*count)++;
	}
	sqlite3_finalize(st);
	sqlite3_free(sql);
	if (sum == 42)
		printf(" ");
	return cpu_now() - t0;
}

static double
digest(sqlite3 *db, const char *table, char *out, size_t cap)
{
	sqlite3_stmt *st;
	double		t0 = cpu_now();

	sqlite3_prepare_v2(db, "SELECT sync_digest(?1)", -1, &st, NULL);
	sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_ROW)
	{
		fprintf(stderr, "sync_digest: %s\n", sqlite3_errmsg(db));
		exit(1);
	}
	snprintf(out, cap, "%s", (const char *) sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return cpu_now() - t0;
}

static void
bench_digest(sqlite3 *db, const shape *sh)
{
	double		t_digest[ROUNDS],
				t_full[ROUNDS],
				t_scan[ROUNDS],
				t_all[ROUNDS];
	char		out[128] = "",
				full[128] = "";
	char	   *stale = sqlite3_mprintf("UPDATE _sync_vsum SET fresh = 0 WHERE tbl = %Q", sh->table);
	long long	count = 0,
				all = 0;

	for (int round = 0; round < ROUNDS; round++)
	{
		if (round % 2)
			t_scan[round] = scan(db, sh, sh->key, &count);
		/* the sum stale: every value read (a digest after a snapshot, and every 8th) */
		exec(db, stale);
		t_full[round] = digest(db, sh->table, full, sizeof full);
		/* the sum kept: the keys alone read */
		t_digest[round] = digest(db, sh->table, out, sizeof out);
		if (strcmp(out, full) != 0)
		{
			fprintf(stderr, "%s: the sum kept %s, the full walk %s\n", sh->table, out, full);
			exit(1);
		}
		if (round % 2 == 0)
			t_scan[round] = scan(db, sh, sh->key, &count);
		t_all[round] = scan(db, sh, sh->cols, &all);
	}
	sqlite3_free(stale);
	{
		double		d = median(t_digest, ROUNDS);
		double		f = median(t_full, ROUNDS);
		double		sc = median(t_scan, ROUNDS);
		double		a = median(t_all, ROUNDS);
		double		am = (7 * d + f) / 8;

		printf("digest of %lld rows (%s: %s), CPU: sync_digest %7.1f ms, scan of the key in key order %7.1f ms,"
			   " ratio %.2f (target <= 3)  %s\n", count, sh->table, sh->what, d * 1e3, sc * 1e3, d / sc, out);
		printf("  a full walk (after a snapshot, every 8th digest) %7.1f ms, ratio %.2f; over 8 digests %7.1f ms,"
			   " ratio %.2f\n", f * 1e3, f / sc, am * 1e3, am / sc);
		printf("  beside it, a scan reading every column in key order %7.1f ms, ratio %.2f to the key scan\n",
			   a * 1e3, a / sc);
	}
}

/* the digest's table shapes besides items: made by a snapshot, filled as sync_apply fills */
static const shape shapes[] = {
	{"items", "integer key, 5 columns", "id", "id, name, price, qty, note"},
	{"narrow", "integer key, 2 columns", "id", "id, v"},
	{"wide", "integer key, 16 columns", "id",
	"id, a1, a2, a3, a4, a5, b1, b2, b3, b4, b5, c1, c2, c3, c4, c5"},
	{"coded", "text key, 5 columns", "code", "code, name, price, qty, note"},
	{"pairs", "text and integer key, 5 columns", "origin, id", "origin, id, name, price, qty"},
};

static void
make_shapes(sqlite3 *db, long long n)
{
	char	   *sql;

	/* text keys inserted out of their order, as a host's codes and uuids come */
	sql = sqlite3_mprintf("BEGIN; UPDATE _sync_state SET applying = 1 WHERE id = 1;"
						  "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %lld)"
						  " INSERT INTO narrow SELECT i, i * 7 FROM n;"
						  "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %lld)"
						  " INSERT INTO wide SELECT i, i, 'a ' || i, i / 3.0, i %% 17, 'five ' || i, i * 2, 'b ' || i,"
						  " i / 7.0, i %% 5, 'bee ' || i, i * 3, 'c ' || i, i / 9.0, NULL, 'sea ' || i FROM n;"
						  "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %lld)"
						  " INSERT INTO coded SELECT printf('%%08x-c', (i * 2654435761) %% 4294967296),"
						  " 'item ' || i, i / 100.0, i %% 1000, 'note ' || i FROM n;"
						  "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %lld)"
						  " INSERT INTO pairs SELECT printf('%%08x-4e2b-4c1a-9d3e-5f6a7b8c9d0e', (i %% 97) * 40503),"
						  " i, 'item ' || i, i / 100.0, i %% 1000 FROM n;"
						  "UPDATE _sync_state SET applying = 0 WHERE id = 1; COMMIT; PRAGMA wal_checkpoint(TRUNCATE);",
						  n, n, n, n);
	exec(db, sql);
	sqlite3_free(sql);
}

int
main(int argc, char **argv)
{
	long long	existing = argc > 1 ? atoll(argv[1]) : 1000000;
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	char		a_path[512],
				b_path[512];
	sqlite3    *ours,
			   *plain;
	tm_server	s;
	Sync__Table *schema[6];
	char	   *sql;
	double		t0;

	snprintf(a_path, sizeof a_path, "%s/ms_bench_ours.db", dir);
	snprintf(b_path, sizeof b_path, "%s/ms_bench_bare.db", dir);
	remove(a_path);
	remove(b_path);
	sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
	printf("SQLite %s, %lld rows per table, files in %s\n", sqlite3_libversion(), existing, dir);

	/* the table, made by a snapshot, filled by plain SQL, copied */
	t0 = now();
	ours = open_db(a_path);
	tm_server_init(&s, 0x20, 0x10);
	schema[0] = tm_table("items", "catalog", "json", "id", "id INTEGER, name TEXT, price REAL, qty INTEGER, note TEXT");
	schema[1] = tm_table("pitems", "catalog", "proto", "id", "id INTEGER, name TEXT, price REAL, qty INTEGER, note TEXT");
	schema[2] = tm_table("narrow", "catalog", "json", "id", "id INTEGER, v INTEGER");
	schema[3] = tm_table("wide", "catalog", "json", "id",
						 "id INTEGER, a1 INTEGER, a2 TEXT, a3 REAL, a4 INTEGER, a5 TEXT, b1 INTEGER, b2 TEXT,"
						 " b3 REAL, b4 INTEGER, b5 TEXT, c1 INTEGER, c2 TEXT, c3 REAL, c4 INTEGER, c5 TEXT");
	schema[4] = tm_table("coded", "catalog", "json", "code", "code TEXT, name TEXT, price REAL, qty INTEGER, note TEXT");
	schema[5] = tm_table("pairs", "catalog", "json", "origin,id", "origin TEXT, id INTEGER, name TEXT, price REAL, qty INTEGER");
	apply(ours, tm_next(&s, tm_begin(schema, 6), NULL));
	apply(ours, tm_next(&s, NULL, tm_end("items", "pitems", "narrow", "wide", "coded", "pairs", NULL)));
	/* filled as sync_apply fills it: the guards let only it write the server's rows */
	sql = sqlite3_mprintf("BEGIN; UPDATE _sync_state SET applying = 1 WHERE id = 1;"
						  "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %lld)"
						  " INSERT INTO items SELECT i, 'item ' || i, i / 100.0, i %% 1000, 'note ' || i FROM n;"
						  "INSERT INTO pitems SELECT * FROM items; UPDATE _sync_state SET applying = 0 WHERE id = 1;"
						  " COMMIT; PRAGMA wal_checkpoint(TRUNCATE);",
						  existing);
	exec(ours, sql);
	sqlite3_free(sql);
	sql = sqlite3_mprintf("VACUUM INTO %Q", b_path);
	exec(ours, sql);
	sqlite3_free(sql);
	plain = open_db(b_path);
	/* the copy is a bare table: its guards, copied with it, never fire */
	exec(plain, "UPDATE _sync_state SET applying = 1 WHERE id = 1");
	fresh_id = existing;
	printf("made and copied the tables in %.1f s\n", now() - t0);

	if (argc <= 3 || strcmp(argv[3], "digest") != 0)
	{
		/* within src/sqlite/vsum.c's 64 rows a table: each row's hash followed */
		bench_apply(ours, plain, &s, "items", 0, 50, existing);
		bench_apply(ours, plain, &s, "items", 0, 1000, existing);
		bench_apply(ours, plain, &s, "items", 0, 10000, existing);
		bench_apply(ours, plain, &s, "pitems", 1, 1000, existing);
		bench_apply(ours, plain, &s, "pitems", 1, 10000, existing);
	}
	if (argc <= 4 || strcmp(argv[4], "items") != 0)
		make_shapes(ours, existing);
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		if (i == 0 || argc <= 4 || strcmp(argv[4], "items") != 0)
			bench_digest(ours, &shapes[i]);

	sqlite3_close(ours);
	sqlite3_close(plain);
	tm_free_all();
	remove(a_path);
	remove(b_path);
	{
		char		wal[600];

		snprintf(wal, sizeof wal, "%s-wal", a_path);
		remove(wal);
		snprintf(wal, sizeof wal, "%s-shm", a_path);
		remove(wal);
		snprintf(wal, sizeof wal, "%s-wal", b_path);
		remove(wal);
		snprintf(wal, sizeof wal, "%s-shm", b_path);
		remove(wal);
	}
	sqlite3_reset_auto_extension();
	return 0;
}
