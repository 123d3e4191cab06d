/*
 * write_corpus.c - writes the seed corpus of every libFuzzer target,
 * tests/fuzz/corpus/<target>/seed-*, from the fuzz seeds (tests/fuzz/seeds),
 * the test vectors (tests/unit/vectors.c) and uploads a replica makes:
 *
 *   build/fuzz_corpus tests/fuzz/seeds tests/fuzz/corpus      (make fuzz-corpus)
 *
 * Deterministic: the same tree writes the same bytes.  Files not named
 * seed-* (inputs kept from findings) are left as they are.
 *
 *   apply_raw    the seeds, each a message to the replica of seeds 00 and 01
 *   wire         the seeds, the vectors' message, uploads
 *   up           uploads (tests/sqlite/msgs.c's shop, after host writes,
 *                refusals, a gap, digests due)
 *   key          the vectors' canonical keys, and keys at the edges
 *   bundle       the vectors' bundles, whole and without their check (the
 *                target joins one), and a bundle of the seeds
 *   apply_chain  programs in apply_chain.c's language doing what the
 *                seeds do, and host writes, uploads, Filed answers, gaps,
 *                new schemas
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sqlite3.h>

#include "bundle.h"
#include "key.h"
#include "../../sqlite/msgs.h"
#include "vectors.h"

extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

static const char *out_dir;
static int	failures;

static void
write_one(const char *target, const char *name, const void *data, size_t len)
{
	char		path[1024];
	FILE	   *f;

	snprintf(path, sizeof path, "%s/%s", out_dir, target);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/%s/seed-%s", out_dir, target, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(data, 1, len, f) != len)
	{
		fprintf(stderr, "cannot write %s\n", path);
		failures++;
	}
	if (f)
		fclose(f);
}

/* ---- messages ------------------------------------------------------------- */

typedef struct file
{
	char		name[256];
	tm_msg		m;
} file;

static int
by_name(const void *a, const void *b)
{
	return strcmp(((const file *) a)->name, ((const file *) b)->name);
}

static int
read_seeds(const char *dir, file *out, int max)
{
	DIR		   *d = opendir(dir);
	struct dirent *e;
	int			n = 0;

	if (d == NULL)
	{
		fprintf(stderr, "cannot open %s\n", dir);
		exit(2);
	}
	while ((e = readdir(d)) != NULL && n < max)
	{
		char		path[1024];
		FILE	   *f;
		long		len;

		if (strlen(e->d_name) < 5 || strcmp(e->d_name + strlen(e->d_name) - 4, ".bin") != 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		f = fopen(path, "rb");
		if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0)
			exit(2);
		rewind(f);
		snprintf(out[n].name, sizeof out[n].name, "%.*s", (int) strlen(e->d_name) - 4, e->d_name);
		out[n].m.len = (size_t) len;
		out[n].m.data = tm_alloc(out[n].m.len);
		if (fread(out[n].m.data, 1, out[n].m.len, f) != out[n].m.len)
			exit(2);
		fclose(f);
		n++;
	}
	closedir(d);
	qsort(out, (size_t) n, sizeof(file), by_name);
	return n;
}

static tm_msg
vector_message(void)
{
	tm_msg		m;
	uint8_t    *buf = tm_alloc(4096);
	long		h = ms_hex_decode(ms_vector_head_hex, buf, 4096);
	long		b = ms_hex_decode(ms_vector_body_hex, buf + h, (size_t) (4096 - h));

	if (h < 0 || b < 0)
		exit(2);
	m.data = buf;
	m.len = (size_t) (h + b);
	return m;
}

/* ---- bundles ---------------------------------------------------------------- */

static void
bundles(const file *seeds, int n)
{
	static const char *const names[2] = {"to", "from"};
	const char *hex[2] = {ms_vector_bundle_to_hex, ms_vector_bundle_from_hex};
	uint8_t		buf[4096];
	char		name[64];
	ms_bundle_writer w;
	uint8_t    *all;
	size_t		len = 0;

	for (int i = 0; i < 2; i++)
	{
		long		k = ms_hex_decode(hex[i], buf, sizeof buf);

		if (k < MS_BUNDLE_CHECK)
			exit(2);
		snprintf(name, sizeof name, "vector_%s", names[i]);
		write_one("bundle", name, buf, (size_t) k);
		snprintf(name, sizeof name, "vector_%s_unchecked", names[i]);
		write_one("bundle", name, buf, (size_t) k - MS_BUNDLE_CHECK);
	}
	ms_bundle_begin(&w, &ms_test_allocator, MS_BUNDLE_TO_REPLICA, ms_vector_replica, ms_vector_bundle_written);
	for (int i = 0; i < n; i++)
		if (seeds[i].m.len <= 2048)
			ms_bundle_add(&w, seeds[i].m.data, seeds[i].m.len);
	all = ms_bundle_finish(&w, &len);
	if (all == NULL)
		exit(2);
	write_one("bundle", "seeds_unchecked", all, len - MS_BUNDLE_CHECK);
	free(all);
}

/* ---- uploads ---------------------------------------------------------------- */

static void
exec(sqlite3 *db, const char *sql)
{
	char	   *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
	{
		fprintf(stderr, "%s: %s\n", sql, err);
		failures++;
	}
	sqlite3_free(err);
}

static void
applied(sqlite3 *db, tm_msg m)
{
	char	   *r = tm_apply(db, m);

	if (r == NULL)
	{
		fprintf(stderr, "a corpus message does not apply: %s\n", tm_error());
		failures++;
	}
}

static void
upload(sqlite3 *db, const char *name)
{
	tm_msg		up = tm_upload(db);

	if (up.data == NULL)
	{
		fprintf(stderr, "no upload for %s: %s\n", name, tm_error());
		failures++;
		return;
	}
	write_one("up", name, up.data, up.len);
	write_one("wire", name, up.data, up.len);
}

static void
uploads(void)
{
	tm_server	s;
	tm_msg		begin,
				end;
	sqlite3    *db = NULL;
	Sync__Down *d;
	char		sql[512];

	/* digests due, nothing written */
	sqlite3_open(":memory:", &db);
	tm_server_init(&s, 0x20, 0x10);
	tm_shop_snapshot(&s, &begin, &end);
	applied(db, begin);
	applied(db, end);
	upload(db, "up_digests");
	/* the host's own rows, a refusal of the server's */
	snprintf(sql, sizeof sql,
			 "INSERT INTO orders(origin, id, customer, total, note) VALUES ('%s', 1, 1, 12.5, 'caf\xc3\xa9');"
			 "INSERT INTO sales(origin, id, product, qty, price, memo, photo) VALUES ('%s', 1, 2, 3, 9.75, 'x', x'00ff');"
			 "UPDATE products SET stock = 7 WHERE id = 1;",
			 tm_replica_text(&s), tm_replica_text(&s));
	exec(db, sql);
	d = tm_down();
	tm_upsert(tm_rows(d, "customers"), "{\"id\":3,\"name\":4}", -1, "3", NULL);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":5,\"name\":\"E\"}", -1, "4", NULL);
	applied(db, tm_next(&s, d, NULL));
	upload(db, "up_rows");
	/* a deleted record of its own, then a gap */
	snprintf(sql, sizeof sql, "DELETE FROM orders WHERE origin = '%s' AND id = 1", tm_replica_text(&s));
	exec(db, sql);
	s.number++;
	applied(db, tm_next(&s, tm_down(), NULL));
	upload(db, "up_gap");
	sqlite3_close(db);
}

/* ---- keys ---------------------------------------------------------------------- */

static void
keys(void)
{
	static const char *const edges[] = {
		"0:", "1:a", "2:42", "1:a2:bc", "10:0123456789", "00:", "01:a", "3:ab", "2:abc", "a", ":", "",
		"1073741824:", "99999999999:", "36:0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d11:7",
	};
	char		name[64];

	for (int v = 0; v < ms_vector_ndigests; v++)
	{
		const ms_vector_digest *vd = &ms_vector_digests[v];

		for (int k = 0; k < vd->nkeys; k++)
		{
			const char *parts[2];
			size_t		lens[2];
			size_t		n = 0;
			char		buf[256];
			size_t		len;

			while ((int) n < vd->nparts && vd->keys[k][n] != NULL)
			{
				parts[n] = vd->keys[k][n];
				lens[n] = strlen(parts[n]);
				n++;
			}
			len = ms_key_write(buf, n, parts, lens);
			snprintf(name, sizeof name, "vector_%s_%d", vd->name, k);
			write_one("key", name, buf, len);
		}
	}
	for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
	{
		snprintf(name, sizeof name, "edge_%02zu", i);
		write_one("key", name, edges[i], strlen(edges[i]));
	}
}

/* ---- apply_chain programs ---------------------------------------------------------- */

typedef struct prog
{
	uint8_t		b[4096];
	size_t		n;
} prog;

static void
emit(prog *p, int count,...)
{
	va_list		ap;

	va_start(ap, count);
	for (int i = 0; i < count; i++)
		p->b[p->n++] = (uint8_t) va_arg(ap, int);
	va_end(ap);
}

static void
emit_bytes(prog *p, const void *data, size_t n)
{
	p->b[p->n++] = (uint8_t) n;
	memcpy(p->b + p->n, data, n);
	p->n += n;
}

/* op 0: an upsert of raw row bytes into table i, keyed by id (and origin: 0 its own, 1 another) */
static void
raw_upsert(prog *p, int table, int id, int origin, const void *row, size_t n)
{
	emit(p, 5, 0, table, 1, id, origin);
	emit_bytes(p, row, n);
}

static void
shop_rows(prog *p)
{
	static const char *const customers[] = {
		"{\"id\":1,\"name\":\"Ada\",\"vip\":true}", "{\"id\":2,\"name\":\"Bob\",\"vip\":false}"};
	static const char *const products[] = {
		"{\"id\":1,\"name\":\"tea\",\"price\":2.5,\"stock\":10}",
		"{\"id\":2,\"name\":\"coffee\",\"price\":3.25,\"stock\":5}",
	"{\"id\":3,\"name\":\"cake\",\"price\":4,\"stock\":0}"};

	for (int i = 0; i < 2; i++)
		raw_upsert(p, 0, i + 1, 0, customers[i], strlen(customers[i]));
	for (int i = 0; i < 3; i++)
		raw_upsert(p, 1, i + 1, 0, products[i], strlen(products[i]));
}

static void
programs(void)
{
	static const char order[] = "{\"origin\":\"0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1\",\"id\":1,"
		"\"customer\":1,\"total\":12.5,\"note\":\"x\"}";
	static const char tea[] = "{\"id\":1,\"name\":\"tea\",\"price\":2.75,\"stock\":8}";
	static const char city[] = "{\"id\":1,\"name\":\"Ada\",\"vip\":1,\"city\":\"Oslo\"}";
	tm_buf		sale;
	prog		p;

	memset(&sale, 0, sizeof sale);
	tm_pb_bytes(&sale, 1, "0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1", 36);
	tm_pb_int(&sale, 2, 7);
	tm_pb_int(&sale, 3, 1);
	tm_pb_int(&sale, 4, -2);
	tm_pb_double(&sale, 5, 2.5);
	tm_pb_bytes(&sale, 6, "memo", 4);
	tm_pb_bytes(&sale, 7, "\x00\xff", 2);

	/* the shop's snapshot, ended, uploaded */
	memset(&p, 0, sizeof p);
	emit(&p, 1, 0);
	shop_rows(&p);
	emit(&p, 2, 5, 0);
	emit(&p, 2, 6, 0);
	write_one("apply_chain", "snapshot", p.b, p.n);

	/* then json and proto rows of records, deletes, a replacement */
	raw_upsert(&p, 2, 1, 1, order, sizeof order - 1);
	raw_upsert(&p, 3, 7, 1, sale.data, sale.len);
	emit(&p, 5, 2, 1, 0, 2, 0);	/* delete products 2 */
	emit(&p, 5, 2, 0, 0, 2, 0);	/* delete customers 2 */
	emit(&p, 5, 3, 1, 0, 1, 0);	/* replace products 1 ... */
	raw_upsert(&p, 1, 1, 0, tea, sizeof tea - 1);
	emit(&p, 1, 4);
	write_one("apply_chain", "downs", p.b, p.n);

	/* the host writes, uploads, the server refuses a row (answered twice) */
	memset(&p, 0, sizeof p);
	emit(&p, 1, 0);
	shop_rows(&p);
	emit(&p, 2, 5, 0);
	emit(&p, 8, 7, 0, 0, 1, 1, 8, 0, 0);	/* orders (own, 1), customer 1 */
	emit(&p, 8, 7, 1, 0, 1, 2, 12, 0, 0);	/* sales (own, 1), product 2 */
	emit(&p, 8, 7, 2, 0, 1, 7, 0, 0, 0);	/* products 1 stock 7 */
	emit(&p, 2, 6, 0x81);
	emit(&p, 2, 6, 0);
	write_one("apply_chain", "writes", p.b, p.n);

	/* a new schema: a column more, then without products, then other keys */
	memset(&p, 0, sizeof p);
	emit(&p, 1, 0);
	shop_rows(&p);
	emit(&p, 2, 5, 0);
	emit(&p, 2, 8, 1);
	raw_upsert(&p, 0, 1, 0, city, sizeof city - 1);
	emit(&p, 2, 5, 0);
	emit(&p, 2, 8, 2);
	raw_upsert(&p, 1, 1, 1, order, sizeof order - 1);
	emit(&p, 2, 5, 0);
	emit(&p, 2, 8, 3);
	raw_upsert(&p, 2, 1, 1, order, sizeof order - 1);
	emit(&p, 2, 5, 0);
	write_one("apply_chain", "schemas", p.b, p.n);

	/* a lost message: a gap, until a snapshot begins again */
	memset(&p, 0, sizeof p);
	emit(&p, 1, 0);
	shop_rows(&p);
	emit(&p, 2, 5, 0);
	raw_upsert(&p, 0, 3, 0, "{\"id\":3,\"name\":\"Cy\"}", 20);
	emit(&p, 1, 9);
	raw_upsert(&p, 0, 4, 0, "{\"id\":4,\"name\":\"Di\"}", 20);
	emit(&p, 1, 4);
	emit(&p, 2, 6, 0);
	emit(&p, 2, 8, 0);
	shop_rows(&p);
	emit(&p, 2, 5, 0);
	write_one("apply_chain", "gap", p.b, p.n);

	/* rows built from the schema (customers, products, orders, sales), a ghost table, raw keys */
	memset(&p, 0, sizeof p);
	emit(&p, 1, 0);
	emit(&p, 5, 0, 0, 0, 1, 0);		/* customers 1: */
	emit(&p, 5, 4 << 3 | 1, 3, 'A', 'd', 'a');	/* name "Ada" */
	emit(&p, 2, 5 << 3 | 1, 1);		/* vip true */
	emit(&p, 5, 0, 1, 0, 1, 0);		/* products 1: */
	emit(&p, 2, 4 << 3 | 1, 0);		/* name "" */
	emit(&p, 9, 3 << 3 | 1, 0x40, 0x04, 0, 0, 0, 0, 0, 0);	/* price 2.5 */
	emit(&p, 2, 1 << 3 | 1, 10);	/* stock 10 */
	emit(&p, 1, 0);					/* retired_at absent */
	emit(&p, 5, 0, 3, 0, 5, 1);		/* sales (other, 5): */
	emit(&p, 2, 0 << 3 | 1, 1);		/* product 1 */
	emit(&p, 2, 0 << 3 | 1, 3);		/* qty 3 */
	emit(&p, 9, 1 << 3 | 1, 0x40, 0x04, 0, 0, 0, 0, 0, 0);	/* price */
	emit(&p, 4, 0 << 3 | 1, 2, 'h', 'i');	/* memo */
	emit(&p, 3, 2 << 3 | 1, 1, 2);	/* photo, as another wire type */
	emit(&p, 5, 0, 2, 0, 6, 1);		/* orders (other, 6): */
	emit(&p, 2, 1 << 3 | 1, 1);		/* customer 1 */
	emit(&p, 9, 3 << 3 | 1, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0);	/* total 1 */
	emit(&p, 4, 4 << 3 | 1, 2, 'o', 'k');	/* note */
	emit(&p, 6, 0, 4, 1, 0, 0, 2);	/* a ghost table's row */
	p.b[p.n++] = '{';
	p.b[p.n++] = '}';
	emit(&p, 1, 1);					/* and its key: raw, two parts */
	emit_bytes(&p, "1", 1);
	emit_bytes(&p, "\xc3\xa9", 2);
	emit(&p, 2, 5, 0);
	write_one("apply_chain", "built", p.b, p.n);
}

int
main(int argc, char **argv)
{
	file		seeds[64];
	int			n;

	if (argc != 3)
	{
		fprintf(stderr, "usage: %s SEEDS_DIR CORPUS_DIR\n", argv[0]);
		return 2;
	}
	out_dir = argv[2];
	mkdir(out_dir, 0755);
	sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
	n = read_seeds(argv[1], seeds, 64);
	for (int i = 0; i < n; i++)
	{
		write_one("apply_raw", seeds[i].name, seeds[i].m.data, seeds[i].m.len);
		write_one("wire", seeds[i].name, seeds[i].m.data, seeds[i].m.len);
	}
	{
		tm_msg		v = vector_message();

		write_one("apply_raw", "vector", v.data, v.len);
		write_one("wire", "vector", v.data, v.len);
	}
	uploads();
	bundles(seeds, n);
	keys();
	programs();
	tm_free_all();
	sqlite3_reset_auto_extension();
	return failures ? 1 : 0;
}
