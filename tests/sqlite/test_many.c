/*
 * test_many.c - a schema of many tables or of many columns (issue 38.8):
 * what the maps and the catalog that replaced the quadratic walks look up
 * is right.  Timings are bench/replica_schema.c's, not a test's.
 *
 *   tables   300 tables, each pointing at the one before (a chain 300
 *            deep), listed children first: held, indexed and guarded, in
 *            parents-first order; the same snapshot again runs no DDL (the
 *            schema's version stays); one changed table changes alone.
 *   columns  a table of 1,500 columns: a row naming every one lands in its
 *            columns; a column named twice is refused; a schema change
 *            renames, drops and adds columns matched by id.
 */
#include "harness.h"

#include <stdlib.h>

void		test_many(void);

#define NTABLES 300
#define NCOLS 1500

/* the chain: t000 (id, name), then t<i> (id, name, up -> t<i-1>) */
static Sync__Table *
chained(int i, bool extra)
{
	char		name[16];
	char		parent[16];
	Sync__Table *t;

	snprintf(name, sizeof name, "t%03d", i);
	t = tm_table(name, "catalog", "json", "id",
				 i == 0 ? "id INTEGER, name TEXT" : extra ? "id INTEGER, name TEXT, up INTEGER, more TEXT"
				 : "id INTEGER, name TEXT, up INTEGER");
	if (i > 0)
	{
		snprintf(parent, sizeof parent, "t%03d", i - 1);
		tm_fk(t, "up", parent, "id");
	}
	return t;
}

static tm_msg
chain_begin(tm_server *s, int changed)
{
	Sync__Table *schema[NTABLES];
	Sync__Down *d;

	/* children first: the order of the replica's tables is its own */
	for (int i = 0; i < NTABLES; i++)
		schema[i] = chained(NTABLES - 1 - i, NTABLES - 1 - i == changed);
	d = tm_begin(schema, NTABLES);
	for (int i = 0; i < NTABLES; i++)
	{
		char		row[64];

		snprintf(row, sizeof row, i ? "{\"id\":1,\"name\":\"n%d\",\"up\":1}" : "{\"id\":1,\"name\":\"n%d\"}", i);
		tm_upsert(tm_rows(d, schema[NTABLES - 1 - i]->name), row, -1, "1", NULL);
	}
	return tm_next(s, d, NULL);
}

static tm_msg
chain_end(tm_server *s)
{
	Sync__EndSnapshot *e = tm_end(NULL);

	e->tables = tm_alloc(sizeof(char *) * NTABLES);
	for (int i = 0; i < NTABLES; i++)
	{
		e->tables[i] = tm_alloc(16);
		snprintf(e->tables[i], 16, "t%03d", i);
	}
	e->n_tables = NTABLES;
	return tm_next(s, NULL, e);
}

static void
many_tables(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	long long	version;
	char	   *r;
	char	   *first;
	char	   *last;

	tm_server_init(&s, 0x20, 0x10);
	r = tm_apply(db, chain_begin(&s, -1));
	CHECK(t_has(r, "\"upserts\":300") && t_has(r, "\"refused\":0"), "300 tables, a row each: %s %s", S(r), tm_error());
	r = tm_apply(db, chain_end(&s));
	CHECK(t_has(r, "\"snapshot\":\"end\"") && t_has(r, "\"deletes\":0"), "its end: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_tables") == NTABLES &&
		  t_int(db, "SELECT count(*) FROM _sync_made") == NTABLES, "every table held, made by the replica");
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name LIKE '\\_sync\\_fk\\_%' ESCAPE '\\'") ==
		  NTABLES - 1, "every foreign key indexed");
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name <> '_sync_vsum_hand'"
				" AND name NOT GLOB '_sync_gen_*'") == 3 * NTABLES,
		  "every table guarded (insert, update, delete)");
	/* parents first, however deep: sync_digest lists the tables in the replica's order */
	r = t_text(db, "SELECT sync_digest()");
	first = r ? strstr(r, "\"t000\"") : NULL;
	last = r ? strstr(r, "\"t299\"") : NULL;
	CHECK(first != NULL && last != NULL && first < last && strstr(r, "\"t150\"") > first &&
		  strstr(r, "\"t150\"") < last, "parents first, 300 deep");
	sqlite3_free(r);

	/* the same snapshot again: nothing to make, no DDL */
	version = t_int(db, "PRAGMA schema_version");
	r = tm_apply(db, chain_begin(&s, -1));
	CHECK(t_has(r, "\"upserts\":300"), "the same snapshot again: %s %s", S(r), tm_error());
	tm_apply(db, chain_end(&s));
	CHECK(t_int(db, "PRAGMA schema_version") == version, "runs no DDL: the schema's version stays (%lld, %lld)",
		  version, t_int(db, "PRAGMA schema_version"));
	/* one table changed: it alone */
	r = tm_apply(db, chain_begin(&s, 150));
	CHECK(t_has(r, "\"upserts\":300"), "one table changed: %s %s", S(r), tm_error());
	tm_apply(db, chain_end(&s));
	CHECK(t_int(db, "SELECT count(*) FROM pragma_table_info('t150') WHERE name = 'more'") == 1 &&
		  t_int(db, "SELECT count(*) FROM t150 WHERE up = 1") == 1, "t150 takes its column, its row stays");
	CHECK(t_int(db, "PRAGMA schema_version") - version <= 3,
		  "and the DDL is its own: the column and its guard, not 300 tables' (%lld)",
		  t_int(db, "PRAGMA schema_version") - version);
	sqlite3_close(db);
}

/* a table of NCOLS columns: id, c1, c2 ... (ids 1, 2, ...) */
static Sync__Table *
wide(const char *extra)
{
	size_t		cap = NCOLS * 32 + 64;
	char	   *cols = malloc(cap);
	size_t		n;
	Sync__Table *t;

	n = (size_t) snprintf(cols, cap, "id INTEGER id=1");
	for (int i = 1; i < NCOLS; i++)
		n += (size_t) snprintf(cols + n, cap - n, ", c%d TEXT id=%d", i, i + 1);
	if (extra)
		snprintf(cols + n, cap - n, ", %s", extra);
	t = tm_table("wide", "catalog", "json", "id", cols);
	t->id = 1;
	free(cols);
	return t;
}

static void
many_columns(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *t = wide(NULL);
	Sync__Down *d;
	size_t		cap = NCOLS * 24 + 64;
	char	   *row = malloc(cap);
	size_t		n;
	char	   *r;

	tm_server_init(&s, 0x20, 0x10);
	/* every column, the last ones first */
	n = (size_t) snprintf(row, cap, "{");
	for (int i = NCOLS - 1; i >= 1; i--)
		n += (size_t) snprintf(row + n, cap - n, "\"c%d\":\"v%d\",", i, i);
	snprintf(row + n, cap - n, "\"id\":1}");
	d = tm_begin(&t, 1);
	tm_upsert(tm_rows(d, "wide"), row, -1, "1", NULL);
	tm_upsert(tm_rows(d, "wide"), "{\"id\":2,\"c1400\":\"a\",\"c7\":\"b\",\"c1400\":\"c\"}", -1, "2", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1") && t_has(r, "\"refused\":1"), "a row of 1,500 columns, and one naming a column twice:"
		  " %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM wide WHERE id = 1 AND c1 = 'v1' AND c750 = 'v750' AND c1499 = 'v1499'") == 1,
		  "each value in its column");
	r = t_text(db, "SELECT reason FROM _sync_refused WHERE tbl = 'wide'");
	CHECK(t_has(r, "column \"c1400\" is given twice"), "the other refused, saying which: %s", S(r));
	sqlite3_free(r);
	tm_apply(db, tm_next(&s, NULL, tm_end("wide", NULL)));

	/* a change: c10 renamed d10 (its id), c20 dropped, e1 added with a fill */
	t = wide("e1 TEXT id=5000");
	t->columns[10]->name = "d10";
	memmove(&t->columns[20], &t->columns[21], sizeof(Sync__Column *) * (t->n_columns - 21));
	t->n_columns--;
	tm_fill(t, "{\"e1\":\"filled\"}", -1);
	d = tm_down();
	tm_change(d, t);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"changed\":1") && t_has(r, "\"failed\":[]"), "a change of the wide table: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM wide WHERE d10 = 'v10' AND e1 = 'filled' AND c1499 = 'v1499'") == 1,
		  "renamed, added, the rest as it was");
	CHECK(t_int(db, "SELECT count(*) FROM pragma_table_info('wide') WHERE name IN ('c10', 'c20')") == 0 &&
		  t_int(db, "SELECT count(*) FROM pragma_table_info('wide')") == NCOLS, "c10 and c20 gone");
	free(row);
	sqlite3_close(db);
}

void
test_many(void)
{
	many_tables();
	many_columns();
}
