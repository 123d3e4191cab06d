/*
 * fuzz_seeds.c - every truncation and every single-bit flip of valid
 * messages through sync_apply, under ASan and UBSan.
 *
 *   build/fuzz_seeds tests/fuzz/seeds           run (scripts/test: fuzz)
 *   build/fuzz_seeds --write tests/fuzz/seeds   write the seeds again
 *
 * The seeds are messages of one chain to one replica, named NN_what.bin:
 * 00 begins a snapshot of the shop (tests/sqlite/msgs.c), 01 ends it, and
 * every later one follows 01.  A seed is applied to a fresh database that
 * holds what came before it (nothing for 00, 00 for 01, 00 and 01 for the
 * rest).  Unchanged it must apply.  Each mutation is applied to that
 * database inside a transaction rolled back afterwards (sync_apply works in
 * a savepoint of it), and must give an error or a result, never a crash, and:
 *   - an error changes nothing at all (every table, the _sync_ ones too);
 *   - a result that applies nothing (duplicate, gap, wrong replica, later
 *     protocol) changes no row of the replica's own tables;
 *   - whatever applied, sync_digest() and sync_upload() still work.
 * Then again on databases that trust the server's key (sync_trust_key,
 * docs/protocol.md 2.4): the seeds are signed as the server signs, so each
 * still applies, and every mutation of one must be an error that changes
 * nothing -- no cut or flipped bit gets past the signature.
 *
 * The mutations of a seed are shared out between one worker process per
 * processor (at most 8).
 *
 * Built with -DMS_LIBFUZZER (clang -fsanitize=fuzzer), the same check is a
 * libFuzzer target over a database holding seeds 00 and 01:
 *   clang -DMS_LIBFUZZER -fsanitize=fuzzer,address,undefined -Isrc/shared \
 *     -Isrc/sqlite tests/fuzz/fuzz_seeds.c tests/sqlite/msgs.c \
 *     src/sqlite/[a-z]*.c src/shared/[a-z]*.c -lsqlite3 -lprotobuf-c -lcrypto
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sqlite3.h>

#include "../sqlite/msgs.h"

extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

typedef struct seed
{
	char		name[256];
	uint8_t    *data;
	size_t		len;
} seed;

typedef struct counts
{
	long		runs;
	long		errors;
	long		applied;
	long		refusing;		/* applied, with rows refused */
	long		other;			/* duplicate, gap, wrong replica, later protocol */
	long		failures;
} counts;

/* ---- the seeds ------------------------------------------------------------ */

static int
write_file(const char *dir, const char *name, tm_msg m)
{
	char		path[1024];
	FILE	   *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(m.data, 1, m.len, f) != m.len)
	{
		fprintf(stderr, "cannot write %s\n", path);
		if (f)
			fclose(f);
		return 1;
	}
	fclose(f);
	printf("wrote %s (%zu bytes)\n", path, m.len);
	return 0;
}

static int
write_seeds(const char *dir)
{
	tm_server	s;
	tm_server	after;
	tm_msg		begin,
				end;
	Sync__Down *d;
	Sync__Filed *f;
	tm_buf		b;
	uint8_t		send_id[16] = {0x5e, 0x4d, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
	char		origin[64];
	int			rc = 0;

	tm_server_init(&s, 0x20, 0x10);
	tm_shop_snapshot(&s, &begin, &end);
	rc |= write_file(dir, "00_snapshot.bin", begin);
	rc |= write_file(dir, "01_end.bin", end);
	after = s;

	/* 02: json upserts and deletes of catalog tables, a record of another replica */
	d = tm_down();
	tm_upsert(tm_rows(d, "customers"), "{\"id\":3,\"name\":\"Cy \\u00e9\",\"vip\":false}", -1, "3", NULL);
	tm_upsert(tm_rows(d, "products"), "{\"id\":1,\"name\":\"tea\",\"price\":2.75,\"stock\":8}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "orders"), "{\"origin\":\"0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1\",\"id\":1,"
			  "\"customer\":3,\"total\":12.5,\"note\":\"x\"}", -1, "0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1", "1", NULL);
	tm_delete(tm_rows(d, "products"), "2", NULL);
	tm_delete(tm_rows(d, "customers"), "2", NULL);
	rc |= write_file(dir, "02_down_json.bin", tm_next(&s, d, NULL));

	/* 03: proto records */
	s = after;
	d = tm_down();
	snprintf(origin, sizeof origin, "%s", "0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1");
	memset(&b, 0, sizeof b);
	tm_pb_bytes(&b, 1, origin, strlen(origin));
	tm_pb_int(&b, 2, 7);
	tm_pb_int(&b, 3, 1);
	tm_pb_int(&b, 4, -2);
	tm_pb_double(&b, 5, 2.5);
	tm_pb_bytes(&b, 6, "memo", 4);
	tm_pb_bytes(&b, 7, "\x00\xff", 2);
	tm_upsert(tm_rows(d, "sales"), b.data, (long) b.len, origin, "7", NULL);
	tm_delete(tm_rows(d, "sales"), origin, "6", NULL);
	rc |= write_file(dir, "03_down_proto.bin", tm_next(&s, d, NULL));

	/* 04: a Filed answer with a refusal */
	f = tm_filed(send_id, 2);
	tm_filed_refuse(f, "orders", tm_key(tm_replica_text(&s), "1", NULL), "total must be positive");
	rc |= write_file(dir, "04_filed.bin", tm_filed_msg(&s, f));

	/* 05: a new snapshot: customers gain a column, products are no longer mirrored */
	s = after;
	{
		Sync__Table *schema[1];

		schema[0] = tm_table("customers", "catalog", "json", "id", "id INTEGER, name TEXT, vip INTEGER, city TEXT");
		d = tm_begin(schema, 1);
		tm_upsert(tm_rows(d, "customers"), "{\"id\":1,\"name\":\"Ada\",\"vip\":1,\"city\":\"Oslo\"}", -1, "1", NULL);
		rc |= write_file(dir, "05_begin_again.bin", tm_next(&s, d, NULL));
	}

	/* 06: the server's wishes, untrusted: for a record table, for a table the replica does not hold */
	s = after;
	{
		static Sync__Wish w[2];
		static Sync__Wish *ws[2] = {&w[0], &w[1]};

		d = tm_down();
		for (int i = 0; i < 2; i++)
		{
			sync__wish__init(&w[i]);
			w[i].id = (uint64_t) i + 1;
			w[i].table = i == 0 ? "orders" : "nowhere";
			w[i].key = tm_key(tm_replica_text(&s), NULL);
			w[i].values = "{\"note\":\"x\"}";
			w[i].apply = i == 0 ? "always" : "if_unchanged";
			w[i].expected = i == 0 ? "" : "{\"note\":\"y\"}";
		}
		d->n_wishes = 2;
		d->wishes = ws;
		rc |= write_file(dir, "06_wishes.bin", tm_next(&s, d, NULL));
	}
	tm_free_all();
	return rc;
}

static int
seed_order(const void *a, const void *b)
{
	return strcmp(((const seed *) a)->name, ((const seed *) b)->name);
}

static int
read_seeds(const char *dir, seed **out, int *n)
{
	DIR		   *dh = opendir(dir);
	struct dirent *e;
	int			cap = 0;

	*out = NULL;
	*n = 0;
	if (dh == NULL)
	{
		fprintf(stderr, "cannot open %s\n", dir);
		return 1;
	}
	while ((e = readdir(dh)) != NULL)
	{
		char		path[1024];
		FILE	   *f;
		seed	   *sd;
		long		len;

		if (strlen(e->d_name) < 5 || strcmp(e->d_name + strlen(e->d_name) - 4, ".bin") != 0)
			continue;
		if (*n == cap)
		{
			cap = cap ? cap * 2 : 8;
			*out = realloc(*out, sizeof(seed) * (size_t) cap);
		}
		sd = &(*out)[(*n)++];
		snprintf(sd->name, sizeof sd->name, "%s", e->d_name);
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		f = fopen(path, "rb");
		if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0)
		{
			fprintf(stderr, "cannot read %s\n", path);
			closedir(dh);
			return 1;
		}
		rewind(f);
		sd->len = (size_t) len;
		sd->data = malloc(sd->len ? sd->len : 1);
		if (fread(sd->data, 1, sd->len, f) != sd->len)
		{
			fprintf(stderr, "cannot read %s\n", path);
			fclose(f);
			closedir(dh);
			return 1;
		}
		fclose(f);
	}
	closedir(dh);
	qsort(*out, (size_t) *n, sizeof(seed), seed_order);
	return 0;
}

/* ---- one run ------------------------------------------------------------- */

static char *
apply(sqlite3 *db, const uint8_t *data, size_t len, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	char	   *out = NULL;

	err[0] = '\0';
	if (sqlite3_prepare_v2(db, "SELECT sync_apply(?1)", -1, &st, NULL) != SQLITE_OK)
	{
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
		return NULL;
	}
	sqlite3_bind_blob(st, 1, len ? (const void *) data : "", (int) len, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		out = strdup((const char *) sqlite3_column_text(st, 0));
	else
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return out;
}

static sqlite3 *
from_image(const uint8_t *image, sqlite3_int64 size)
{
	sqlite3    *db = NULL;
	unsigned char *copy;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		exit(2);
	if (size > 0)
	{
		copy = sqlite3_malloc64((sqlite3_uint64) size);
		memcpy(copy, image, (size_t) size);
		if (sqlite3_deserialize(db, "main", copy, size, size,
								SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE) != SQLITE_OK)
			exit(2);
	}
	return db;
}

static int
still_works(sqlite3 *db)
{
	char	   *err = NULL;
	int			ok = 1;

	if (sqlite3_exec(db, "SELECT sync_digest()", NULL, NULL, &err) != SQLITE_OK ||
		(sqlite3_exec(db, "SELECT sync_upload()", NULL, NULL, &err) != SQLITE_OK &&
		 strstr(err, "uuid is unknown") == NULL))
	{
		fprintf(stderr, "  the replica no longer works: %s\n", err);
		ok = 0;
	}
	sqlite3_free(err);
	return ok;
}

/* the second pass: the bases trust the pretend server's key */
static bool pinned;

typedef struct base
{
	unsigned char *image;
	sqlite3_int64 size;
	uint64_t	all;			/* tm_checksum of it, with the _sync_ tables */
	uint64_t	rows;			/* without */
} base;

/*
 * one mutated message, on the base: db holds it, and each run is rolled
 * back (sync_apply works in a savepoint of the caller's transaction), so
 * every run starts from the same base; 0 when it misbehaved
 */
static int
check_one(sqlite3 *db, const base *b, const uint8_t *data, size_t len, counts *n, const char *what)
{
	char		err[512];
	char	   *r;
	int			ok = 1;

	if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		exit(2);
	r = apply(db, data, len, err, sizeof err);
	n->runs++;
	if (r == NULL)
	{
		n->errors++;
		if (err[0] == '\0' || tm_checksum(db, 1) != b->all)
		{
			fprintf(stderr, "FAIL %s: an error that changed something (%s)\n", what, err);
			ok = 0;
		}
	}
	else if (pinned)
	{
		n->other++;
		fprintf(stderr, "FAIL %s: %s, on a replica that trusts the key it was signed with\n", what, r);
		ok = 0;
	}
	else if (strstr(r, "\"result\":\"applied\"") || strstr(r, "\"result\":\"filed\""))
	{
		n->applied++;
		if (strstr(r, "\"refused\":0") == NULL && strstr(r, "\"result\":\"applied\""))
			n->refusing++;
	}
	else
	{
		n->other++;
		if (tm_checksum(db, 0) != b->rows)
		{
			fprintf(stderr, "FAIL %s: %s, yet rows changed\n", what, r);
			ok = 0;
		}
	}
	if (r != NULL && !still_works(db))
	{
		fprintf(stderr, "FAIL %s: after %s\n", what, r);
		ok = 0;
	}
	free(r);
	if (sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK)
		exit(2);
	if (!ok)
		n->failures++;
	return ok;
}

/* the base of a seed: the database holding what came before it */
static void
base_image(seed *seeds, int nseeds, int index, base *b)
{
	sqlite3    *db = NULL;
	char		err[512];

	sqlite3_open(":memory:", &db);
	if (pinned)
	{
		uint8_t		key[32];
		char		sql[128];
		int			n = snprintf(sql, sizeof sql, "SELECT sync_trust_key(x'");

		tm_server_key(key);
		for (int i = 0; i < 32; i++)
			n += snprintf(sql + n, sizeof sql - (size_t) n, "%02x", key[i]);
		snprintf(sql + n, sizeof sql - (size_t) n, "')");
		if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		{
			fprintf(stderr, "FAIL cannot pin the key: %s\n", sqlite3_errmsg(db));
			exit(1);
		}
	}
	for (int i = 0; i < nseeds && i < index && i < 2; i++)
	{
		char	   *r = apply(db, seeds[i].data, seeds[i].len, err, sizeof err);

		if (r == NULL || strstr(r, "\"applied\"") == NULL)
		{
			fprintf(stderr, "FAIL base seed %s does not apply: %s %s\n", seeds[i].name, r ? r : "", err);
			exit(1);
		}
		free(r);
	}
	b->image = sqlite3_serialize(db, "main", &b->size, 0);
	sqlite3_close(db);
	db = from_image(b->image, b->size);
	b->all = tm_checksum(db, 1);
	b->rows = tm_checksum(db, 0);
	sqlite3_close(db);
}

static int
run(const char *dir)
{
	seed	   *seeds;
	int			nseeds;
	counts		total = {0};
	long		cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int			workers = cpus < 1 ? 1 : cpus > 8 ? 8 : (int) cpus;

	if (read_seeds(dir, &seeds, &nseeds) != 0)
		return 2;
	if (nseeds < 2 || strncmp(seeds[0].name, "00_", 3) != 0 || strncmp(seeds[1].name, "01_", 3) != 0)
	{
		fprintf(stderr, "the seeds must begin with 00_*.bin and 01_*.bin\n");
		return 2;
	}
	for (int i = 0; i < nseeds; i++)
	{
		seed	   *sd = &seeds[i];
		base		b;
		counts		n = {0};
		uint8_t    *buf = malloc(sd->len ? sd->len : 1);
		char		what[512];
		sqlite3    *db;
		sqlite3    *work;
		char		err[512];
		char	   *r;
		pid_t		pids[8];
		int			rfd[8];

		/* unchanged, it applies */
		base_image(seeds, nseeds, i, &b);
		db = from_image(b.image, b.size);
		r = apply(db, sd->data, sd->len, err, sizeof err);
		if (r == NULL || (strstr(r, "\"result\":\"applied\"") == NULL && strstr(r, "\"result\":\"filed\"") == NULL) ||
			(strstr(r, "\"refused\":0") == NULL && strstr(r, "\"result\":\"filed\"") == NULL))
		{
			fprintf(stderr, "FAIL %s: the seed itself does not apply cleanly: %s %s\n", sd->name, r ? r : "", err);
			total.failures++;
		}
		free(r);
		sqlite3_close(db);
		/* the mutations, shared out between workers: mutation m goes to worker m % workers */
		for (int w = 0; w < workers; w++)
		{
			int			fds[2];

			if (pipe(fds) != 0 || (pids[w] = fork()) < 0)
			{
				perror("fork");
				return 2;
			}
			if (pids[w] == 0)
			{
				counts		mine = {0};
				size_t		m = 0;

				close(fds[0]);
				work = from_image(b.image, b.size);
				for (size_t len = 0; len < sd->len; len++, m++)
				{
					if (m % (size_t) workers != (size_t) w)
						continue;
					snprintf(what, sizeof what, "%s cut to %zu bytes", sd->name, len);
					check_one(work, &b, sd->data, len, &mine, what);
				}
				for (size_t bit = 0; bit < sd->len * 8; bit++, m++)
				{
					if (m % (size_t) workers != (size_t) w)
						continue;
					memcpy(buf, sd->data, sd->len);
					buf[bit / 8] ^= (uint8_t) (1u << (bit % 8));
					snprintf(what, sizeof what, "%s with bit %zu flipped", sd->name, bit);
					check_one(work, &b, buf, sd->len, &mine, what);
				}
				sqlite3_close(work);
				if (write(fds[1], &mine, sizeof mine) != (ssize_t) sizeof mine)
					_exit(2);
				_exit(0);
			}
			close(fds[1]);
			rfd[w] = fds[0];
		}
		for (int w = 0; w < workers; w++)
		{
			counts		theirs = {0};
			int			status = 0;

			if (read(rfd[w], &theirs, sizeof theirs) != (ssize_t) sizeof theirs)
				theirs.failures++;	/* it died: ASan or UBSan said why on stderr */
			close(rfd[w]);
			waitpid(pids[w], &status, 0);
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				theirs.failures++;
			n.runs += theirs.runs;
			n.errors += theirs.errors;
			n.applied += theirs.applied;
			n.refusing += theirs.refusing;
			n.other += theirs.other;
			n.failures += theirs.failures;
		}
		printf("%-22s %5zu bytes%s: %6ld runs, %5ld errors, %5ld applied (%ld refusing rows), %5ld applied nothing,"
			   " %ld failures\n", sd->name, sd->len, pinned ? ", key pinned" : "", n.runs, n.errors, n.applied,
			   n.refusing, n.other, n.failures);
		fflush(stdout);
		total.runs += n.runs;
		total.failures += n.failures;
		free(buf);
		sqlite3_free(b.image);
	}
	for (int i = 0; i < nseeds; i++)
		free(seeds[i].data);
	free(seeds);
	printf("%ld runs, %ld failures\n", total.runs, total.failures);
	return total.failures == 0 ? 0 : 1;
}

#ifdef MS_LIBFUZZER
int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static base b;
	static counts n;
	static sqlite3 *work;

	if (b.image == NULL)
	{
		tm_server	s;
		tm_msg		begin,
					end;
		sqlite3    *db;
		char		err[512];

		sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
		tm_server_init(&s, 0x20, 0x10);
		tm_shop_snapshot(&s, &begin, &end);
		sqlite3_open(":memory:", &db);
		free(apply(db, begin.data, begin.len, err, sizeof err));
		free(apply(db, end.data, end.len, err, sizeof err));
		b.image = sqlite3_serialize(db, "main", &b.size, 0);
		b.all = tm_checksum(db, 1);
		b.rows = tm_checksum(db, 0);
		sqlite3_close(db);
		work = from_image(b.image, b.size);
	}
	if (!check_one(work, &b, data, size, &n, "input"))
		abort();
	return 0;
}
#else
int
main(int argc, char **argv)
{
	int			rc;

	sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
	if (argc == 3 && strcmp(argv[1], "--write") == 0)
		rc = write_seeds(argv[2]);
	else if (argc == 2)
	{
		rc = run(argv[1]);
		pinned = true;
		rc |= run(argv[1]);
	}
	else
	{
		fprintf(stderr, "usage: %s [--write] DIR\n", argv[0]);
		rc = 2;
	}
	sqlite3_reset_auto_extension();
	return rc;
}
#endif
