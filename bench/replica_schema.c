/*
 * replica_schema.c - what a snapshot of many tables, or of one table of many
 * columns, costs sync_apply, and how it grows.  Not a test.
 *
 *   make bench-replica-schema
 *   build/bench_replica_schema [dir [tables tables [columns columns]]]
 *
 * CPU time of this process (getrusage), not wall clock:
 *
 *   tables   a snapshot's Begin naming N tables (half catalogs, half records
 *            pointing at a catalog), its EndSnapshot, then the same snapshot
 *            again (a replica provisioned again, nothing changed), for N =
 *            1,000 and 5,000.  Beside it, plain SQLite running the DDL the
 *            replica's file ends with (sqlite_master, replayed in one
 *            transaction): SQLite's own DDL reads its whole schema each time
 *            (OP_ParseSchema), so the bare figure is not linear either.
 *   columns  a Begin of one table of C columns and a row of it, for C = 200
 *            and 2,000 (SQLite's column bound in most builds), and C = 3,000
 *            and 30,000 (more than a row can have: the message is refused
 *            as it is decoded).
 *
 * Each line prints the growth of the larger against the smaller, divided by
 * the growth of the input: 1.0 is linear, 5 (or 10) is quadratic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sqlite3.h>

#include "../tests/sqlite/msgs.h"
#include "row.h"

extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

static const char *dir = "/tmp";

static double
cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec / 1e6 +
		(double) ru.ru_stime.tv_sec + (double) ru.ru_stime.tv_usec / 1e6;
}

static void
exec(sqlite3 *db, const char *sql)
{
	char	   *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
	{
		fprintf(stderr, "%.200s: %s\n", sql, err);
		exit(1);
	}
}

static void
unlink_db(const char *path)
{
	char		other[600];

	remove(path);
	snprintf(other, sizeof other, "%s-wal", path);
	remove(other);
	snprintf(other, sizeof other, "%s-shm", path);
	remove(other);
}

static sqlite3 *
open_db(const char *name)
{
	sqlite3    *db;
	char		path[512];

	snprintf(path, sizeof path, "%s/%s", dir, name);
	unlink_db(path);
	if (sqlite3_open(path, &db) != SQLITE_OK)
	{
		fprintf(stderr, "cannot open %s\n", path);
		exit(1);
	}
	exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL");
	return db;
}

static void
close_db(sqlite3 *db, const char *name)
{
	char		path[512];

	snprintf(path, sizeof path, "%s/%s", dir, name);
	sqlite3_close(db);
	unlink_db(path);
}

/* apply: SELECT sync_apply(?), its CPU time in *t; its error, when one is expected */
static char *
apply_or_error(sqlite3 *db, tm_msg m, double *t, bool error)
{
	sqlite3_stmt *st;
	static char out[2048];
	double		t0 = cpu();
	int			rc;

	sqlite3_prepare_v2(db, "SELECT sync_apply(?1)", -1, &st, NULL);
	sqlite3_bind_blob(st, 1, m.data, (int) m.len, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if ((rc != SQLITE_ROW) != error)
	{
		fprintf(stderr, "sync_apply: %s\n", rc == SQLITE_ROW ? "no error" : sqlite3_errmsg(db));
		exit(1);
	}
	snprintf(out, sizeof out, "%s", rc == SQLITE_ROW ? (const char *) sqlite3_column_text(st, 0) : sqlite3_errmsg(db));
	sqlite3_finalize(st);
	*t = cpu() - t0;
	return out;
}

static char *
apply(sqlite3 *db, tm_msg m, double *t)
{
	return apply_or_error(db, m, t, false);
}

static void
expect(const char *r, const char *what)
{
	if (strstr(r, what) == NULL)
	{
		fprintf(stderr, "expected %s: %.500s\n", what, r);
		exit(1);
	}
}

static Sync__Column *
column(const char *name, const char *type, uint32_t field)
{
	Sync__Column *c = tm_alloc(sizeof *c);

	sync__column__init(c);
	c->name = tm_strdup(name);
	c->type = (char *) type;
	c->server_type = "text";
	c->field = field;
	return c;
}

/* a Table of n columns (built here: tm_table grows its arrays one by one) */
static Sync__Table *
table(const char *name, const char *mirror, Sync__Column **cols, size_t n, const char *key)
{
	Sync__Table *t = tm_alloc(sizeof *t);

	sync__table__init(t);
	t->name = tm_strdup(name);
	t->mirror = (char *) mirror;
	t->codec = "json";
	t->columns = cols;
	t->n_columns = n;
	t->key = tm_alloc(sizeof(char *) * 2);
	t->key[t->n_key++] = tm_strdup(key);
	return t;
}

/*
 * the snapshot of n tables: catalog c<i> (id, name, stock owned) and record
 * r<i> (origin, id, item -> c<i>, qty), keyed by origin and id
 */
static Sync__Table **
many_tables(int n)
{
	Sync__Table **schema = tm_alloc(sizeof(Sync__Table *) * (size_t) n);

	for (int i = 0; i < n; i++)
	{
		char		name[32];
		Sync__Column **cols = tm_alloc(sizeof(Sync__Column *) * 4);
		Sync__Table *t;

		if (i % 2 == 0)
		{
			snprintf(name, sizeof name, "c%05d", i);
			cols[0] = column("id", "INTEGER", 1);
			cols[1] = column("name", "TEXT", 2);
			cols[2] = column("stock", "INTEGER", 3);
			cols[2]->replica_owned = 1;
			t = table(name, "catalog", cols, 3, "id");
		}
		else
		{
			Sync__ForeignKey *fk = tm_alloc(sizeof *fk);

			snprintf(name, sizeof name, "r%05d", i);
			cols[0] = column("origin", "TEXT", 1);
			cols[0]->server_type = "uuid";
			cols[1] = column("id", "INTEGER", 2);
			cols[2] = column("item", "INTEGER", 3);
			cols[3] = column("qty", "INTEGER", 4);
			t = table(name, "record", cols, 4, "origin");
			t->key[t->n_key++] = "id";
			t->origin = "origin";
			sync__foreign_key__init(fk);
			snprintf(name, sizeof name, "c%05d", i - 1);
			fk->table = tm_strdup(name);
			fk->columns = tm_alloc(sizeof(char *));
			fk->columns[0] = "item";
			fk->n_columns = 1;
			fk->references = tm_alloc(sizeof(char *));
			fk->references[0] = "id";
			fk->n_references = 1;
			t->foreign_keys = tm_alloc(sizeof(Sync__ForeignKey *));
			t->foreign_keys[0] = fk;
			t->n_foreign_keys = 1;
		}
		schema[i] = t;
	}
	return schema;
}

static Sync__EndSnapshot *
end_of(Sync__Table **schema, int n)
{
	Sync__EndSnapshot *e = tm_alloc(sizeof *e);

	sync__end_snapshot__init(e);
	e->tables = tm_alloc(sizeof(char *) * (size_t) n);
	for (int i = 0; i < n; i++)
		e->tables[i] = schema[i]->name;
	e->n_tables = (size_t) n;
	return e;
}

/* bare: the DDL the replica's file ends with, run again by plain SQLite in one transaction */
static double
bare(sqlite3 *made)
{
	sqlite3    *db = open_db("ms_bench_schema_bare.db");
	sqlite3_stmt *st;
	double		t0;

	/* every object of the tables held: theirs, and the replica's indexes and triggers on them */
	sqlite3_prepare_v2(made, "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND tbl_name NOT LIKE '\\_sync\\_%' ESCAPE '\\'"
					   " AND tbl_name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid", -1, &st, NULL);
	t0 = cpu();
	exec(db, "BEGIN");
	/* the triggers name _sync_ tables: made empty first, as the replica's file has them */
	exec(db, "CREATE TABLE _sync_state(id INTEGER PRIMARY KEY, applying INTEGER);"
		 "CREATE TABLE _sync_notes(tbl TEXT, key TEXT, writes INTEGER DEFAULT 1, send_id BLOB, sent_at INTEGER,"
		 " set_aside TEXT, PRIMARY KEY (tbl, key)) WITHOUT ROWID");
	while (sqlite3_step(st) == SQLITE_ROW)
		exec(db, (const char *) sqlite3_column_text(st, 0));
	exec(db, "COMMIT");
	t0 = cpu() - t0;
	sqlite3_finalize(st);
	close_db(db, "ms_bench_schema_bare.db");
	return t0;
}

typedef struct figures
{
	double		begin;
	double		end;
	double		again;
	double		bare;
} figures;

static figures
bench_tables(int n)
{
	sqlite3    *db = open_db("ms_bench_schema.db");
	tm_server	s;
	Sync__Table **schema = many_tables(n);
	figures		f;
	double		t;
	size_t		bytes = sync__begin__get_packed_size(tm_begin(schema, n)->begin);

	tm_server_init(&s, 0x20, 0x10);
	expect(apply(db, tm_next(&s, tm_begin(schema, n), NULL), &f.begin), "\"snapshot\":\"begin\"");
	expect(apply(db, tm_next(&s, NULL, end_of(schema, n)), &f.end), "\"snapshot\":\"end\"");
	expect(apply(db, tm_next(&s, tm_begin(schema, n), NULL), &f.again), "\"snapshot\":\"begin\"");
	expect(apply(db, tm_next(&s, NULL, end_of(schema, n)), &t), "\"snapshot\":\"end\"");
	f.again += t;
	{
		sqlite3_stmt *st;

		sqlite3_prepare_v2(db, "SELECT count(*) FROM _sync_tables", -1, &st, NULL);
		if (sqlite3_step(st) != SQLITE_ROW || sqlite3_column_int(st, 0) != n)
		{
			fprintf(stderr, "%d tables held, not %d\n", sqlite3_column_int(st, 0), n);
			exit(1);
		}
		sqlite3_finalize(st);
	}
	f.bare = bare(db);
	close_db(db, "ms_bench_schema.db");
	tm_free_all();
	printf("%5d tables (%7zu bytes of Begin): begin %7.2f s, end %6.2f s, the same snapshot again %7.2f s;"
		   " bare DDL %6.2f s\n", n, bytes, f.begin, f.end,
		   f.again, f.bare);
	return f;
}

/* one table of n columns, and one row of it */
static double
bench_columns(int n, bool made)
{
	sqlite3    *db = open_db("ms_bench_schema.db");
	tm_server	s;
	Sync__Column **cols = tm_alloc(sizeof(Sync__Column *) * (size_t) n);
	Sync__Table *t;
	Sync__Down *d;
	size_t		cap = (size_t) n * 24 + 64;
	char	   *row = tm_alloc(cap);
	size_t		len;
	double		secs;
	char	   *r;

	cols[0] = column("id", "INTEGER", 1);
	len = (size_t) snprintf(row, cap, "{\"id\":1");
	for (int i = 1; i < n; i++)
	{
		char		name[32];

		snprintf(name, sizeof name, "col%d", i);
		cols[i] = column(name, i % 2 ? "TEXT" : "INTEGER", (uint32_t) i + 1);
		len += (size_t) snprintf(row + len, cap - len, i % 2 ? ",\"%s\":\"v%d\"" : ",\"%s\":%d", name, i);
	}
	snprintf(row + len, cap - len, "}");
	t = table("wide", "catalog", cols, (size_t) n, "id");
	tm_server_init(&s, 0x20, 0x10);
	d = tm_begin(&t, 1);
	tm_upsert(tm_rows(d, "wide"), row, -1, "1", NULL);
	r = apply_or_error(db, tm_next(&s, d, NULL), &secs, !made && n > MS_ROW_COLUMNS_MAX);
	expect(r, made ? "\"upserts\":1" : n > MS_ROW_COLUMNS_MAX ? "more than a row can have" : "\"refused\":1");
	close_db(db, "ms_bench_schema.db");
	tm_free_all();
	printf("a table of %5d columns (%s): begin and its row %7.3f s\n", n,
		   made ? "made" : n > MS_ROW_COLUMNS_MAX ? "more than a row can have: the message refused"
		   : "over SQLite's column bound: the table refused", secs);
	return secs;
}

static void
growth(const char *what, double small, double big, double factor)
{
	printf("  %-34s grew %6.1fx for %2.0fx the input: %5.2f against linear%s\n", what, big / small, factor,
		   big / small / factor, big / small / factor > 2 ? "  (worse than linear)" : "");
}

int
main(int argc, char **argv)
{
	figures		a,
				b;
	double		c1,
				c2;
	int			max_columns;
	int			small = argc > 3 ? atoi(argv[2]) : 1000;
	int			big = argc > 3 ? atoi(argv[3]) : 5000;
	int			over_small = argc > 5 ? atoi(argv[4]) : 3000;
	int			over_big = argc > 5 ? atoi(argv[5]) : 30000;

	if (argc > 1)
		dir = argv[1];
	sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
	{
		sqlite3    *db = open_db("ms_bench_schema.db");

		max_columns = sqlite3_limit(db, SQLITE_LIMIT_COLUMN, -1);
		close_db(db, "ms_bench_schema.db");
	}
	printf("SQLite %s (at most %d columns a table), CPU seconds of this process; files in %s\n",
		   sqlite3_libversion(), max_columns, dir);
	a = bench_tables(small);
	b = bench_tables(big);
	growth("begin", a.begin, b.begin, (double) big / small);
	growth("end", a.end, b.end, (double) big / small);
	growth("the same snapshot again", a.again, b.again, (double) big / small);
	growth("bare DDL (SQLite's own)", a.bare, b.bare, (double) big / small);
	printf("  begin against the bare DDL: %.2fx at %d tables, %.2fx at %d\n",
		   a.begin / a.bare, small, b.begin / b.bare, big);
	c1 = bench_columns(max_columns / 10, true);
	c2 = bench_columns(max_columns, true);
	growth("columns, made", c1, c2, 10);
	if (over_small <= max_columns)
		over_small = max_columns + 1;
	if (over_big <= over_small)
		over_big = over_small * 10;
	c1 = bench_columns(over_small, false);
	c2 = bench_columns(over_big, false);
	growth("columns, refused", c1, c2, (double) over_big / over_small);
	sqlite3_reset_auto_extension();
	return 0;
}
