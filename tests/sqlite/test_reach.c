/*
 * test_reach.c - a replica's writes point only at rows it holds (issue 39):
 * a record, or an owned column of a two-way row, written to point at a row
 * the file does not have is refused at once, in the writer's statement,
 * naming the table, the column and the parent's; a NULL points at nothing;
 * a retired row is held; sync_apply writes anything.  The checks follow the
 * schema (snapshot, schema change, a file without them), and uploads say
 * since when the replica's writes wait (Up.unfiled_since).
 */
#include "harness.h"

/*
 * The schema: projects <- issues (label: an owned column -> labels) <-
 * comments (records), a setting pointing at a project, lines pointing at
 * sales by a composite key, tags pointing at a table the replica is not
 * sent, and assignments pointing at users by uuid.
 */
static int
schema(Sync__Table **t)
{
	int			n = 10;

	t[0] = tm_table("projects", "catalog", "json", "id", "id TEXT, name TEXT");
	t[1] = tm_table("labels", "catalog", "json", "id", "id INTEGER, name TEXT");
	t[2] = tm_table("issues", "catalog", "json", "id",
					"id TEXT, project TEXT, title TEXT, label INTEGER owned, gone INTEGER field=0");
	tm_fk(t[2], "project", "projects", "id");
	tm_fk(t[2], "label", "labels", "id");
	tm_retired(t[2], "gone");
	t[3] = tm_table("comments", "record", "json", "origin,id",
					"origin TEXT server=uuid, id INTEGER, issue TEXT, body TEXT");
	tm_origin(t[3], "origin");
	tm_fk(t[3], "issue", "issues", "id");
	t[4] = tm_table("prefs", "setting", "json", "origin", "origin TEXT server=uuid, project TEXT");
	tm_origin(t[4], "origin");
	tm_fk(t[4], "project", "projects", "id");
	t[5] = tm_table("sales", "record", "json", "origin,id", "origin TEXT server=uuid, id INTEGER, total REAL");
	tm_origin(t[5], "origin");
	t[6] = tm_table("lines", "record", "json", "origin,id",
					"origin TEXT server=uuid, id INTEGER, sale_origin TEXT server=uuid, sale INTEGER, qty INTEGER");
	tm_origin(t[6], "origin");
	tm_fk(t[6], "sale_origin,sale", "sales", "origin,id");
	t[7] = tm_table("tags", "record", "json", "origin,id", "origin TEXT server=uuid, id INTEGER, secret INTEGER");
	tm_origin(t[7], "origin");
	tm_fk(t[7], "secret", "secrets", "id");
	t[8] = tm_table("users", "catalog", "json", "id", "id TEXT server=uuid, name TEXT");
	t[9] = tm_table("assignments", "record", "json", "origin,id",
					"origin TEXT server=uuid, id INTEGER, user TEXT server=uuid");
	tm_origin(t[9], "origin");
	tm_fk(t[9], "user", "users", "id");
	/* ids, so that a schema change matches tables and columns by them */
	for (int i = 0; i < n; i++)
		tm_ids(t[i], (uint32_t) (i + 1));
	return n;
}

/* a replica holding project p1, labels 1 and 2, issues a and b of p1, user 0a0a... */
static sqlite3 *
replica(tm_server *s)
{
	sqlite3    *db = t_open(NULL);
	Sync__Table *t[10];
	int			n = schema(t);
	Sync__Down *d = tm_begin(t, n);
	char	   *r;

	tm_server_init(s, 0x39, 0x3a);
	tm_upsert(tm_rows(d, "projects"), "{\"id\":\"p1\",\"name\":\"replicache\"}", -1, "p1", NULL);
	tm_upsert(tm_rows(d, "labels"), "{\"id\":1,\"name\":\"bug\"}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "labels"), "{\"id\":2,\"name\":\"perf\"}", -1, "2", NULL);
	tm_upsert(tm_rows(d, "issues"), "{\"id\":\"a\",\"project\":\"p1\",\"title\":\"A\",\"label\":1}", -1, "a", NULL);
	tm_upsert(tm_rows(d, "issues"), "{\"id\":\"b\",\"project\":\"p1\",\"title\":\"B\"}", -1, "b", NULL);
	tm_upsert(tm_rows(d, "users"), "{\"id\":\"0a0a0a0a-0000-4000-8000-000000000001\",\"name\":\"u\"}", -1,
			  "0a0a0a0a-0000-4000-8000-000000000001", NULL);
	r = tm_apply(db, tm_next(s, d, NULL));
	CHECK(t_has(r, "\"applied\""), "the snapshot begins: %s %s", S(r), tm_error());
	r = tm_apply(db, tm_next(s, NULL, tm_end("projects", "labels", "issues", "comments", "prefs", "sales",
											 "lines", "tags", "users", "assignments", NULL)));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "and ends: %s %s", S(r), tm_error());
	return db;
}

/* mine: sql with every %s the replica's uuid; its result code, the error in *err */
static int
mine(sqlite3 *db, const tm_server *s, const char *fmt, char **err)
{
	const char *me = tm_replica_text(s);
	char	   *sql = sqlite3_mprintf(fmt, me, me, me, me);
	int			rc = t_exec(db, sql, err);

	sqlite3_free(sql);
	return rc;
}

/* refused: sql (a %s is the replica's uuid) fails at once with an error naming every word */
static bool
refused(sqlite3 *db, const tm_server *s, const char *sql, const char *const *words)
{
	char	   *err = NULL;
	int			rc = mine(db, s, sql, &err);
	bool		ok = rc == SQLITE_CONSTRAINT && t_has(err, "magic_sync") && t_has(err, "does not hold");

	for (; ok && *words != NULL; words++)
		ok = t_has(err, *words);
	if (!ok)
		fprintf(stderr, "  %s: rc %d, %s\n", sql, rc, S(err));
	sqlite3_free(err);
	return ok;
}

/* ok: sql (a %s is the replica's uuid) goes through */
static bool
ok(sqlite3 *db, const tm_server *s, const char *sql)
{
	char	   *err = NULL;
	int			rc = mine(db, s, sql, &err);

	if (rc != SQLITE_OK)
		fprintf(stderr, "  %s: rc %d, %s\n", sql, rc, S(err));
	sqlite3_free(err);
	return rc == SQLITE_OK;
}

static void
records(void)
{
	tm_server	s;
	sqlite3    *db = replica(&s);
	uint64_t	before = tm_checksum(db, 1);

	CHECK(refused(db, &s, "INSERT INTO comments VALUES ('%s', 1, 'z', 'on a foreign issue')",
				  (const char *const[]) {"comments", "\"issue\"", "issues", "\"id\"", NULL}),
		  "a comment on an issue the file does not have is refused, naming table, column and parent");
	CHECK(tm_checksum(db, 1) == before, "nothing of it was written, nor noted");
	CHECK(ok(db, &s, "INSERT INTO comments VALUES ('%s', 1, 'a', 'on issue a')"), "one on an issue it holds goes");
	CHECK(ok(db, &s, "INSERT INTO comments VALUES ('%s', 2, NULL, 'on nothing')"), "a NULL points at nothing");
	CHECK(refused(db, &s, "UPDATE comments SET issue = 'z' WHERE id = 1", (const char *const[]) {"comments", NULL}),
		  "pointing it elsewhere is refused");
	CHECK(refused(db, &s, "UPDATE comments SET issue = 'z', id = 9 WHERE id = 1", (const char *const[]) {"comments", NULL}),
		  "so is a key changed with it");
	CHECK(ok(db, &s, "UPDATE comments SET issue = 'b' WHERE id = 1"), "at another issue it holds, it goes");
	CHECK(ok(db, &s, "UPDATE comments SET body = 'edited', id = 3 WHERE id = 1"),
		  "a change of other columns, the key too, goes");
	CHECK(ok(db, &s, "UPDATE comments SET issue = NULL WHERE id = 3"), "and pointing at nothing");
	CHECK(refused(db, &s, "INSERT INTO comments VALUES ('%s', 5, 'z', 'x') ON CONFLICT DO NOTHING",
				  (const char *const[]) {NULL}), "an upsert too");
	CHECK(refused(db, &s, "INSERT OR REPLACE INTO comments VALUES ('%s', 2, 'A', 'x')",
				  (const char *const[]) {NULL}), "compared as the server's text is: 'A' is not 'a'");
	CHECK(t_int(db, "PRAGMA foreign_keys") == 0, "with SQLite's own foreign keys off, as the host left them");
	/* a setting */
	CHECK(refused(db, &s, "INSERT INTO prefs VALUES ('%s', 'p2')", (const char *const[]) {"prefs", "projects", NULL}),
		  "a setting pointing at a project the file does not have is refused");
	CHECK(ok(db, &s, "INSERT INTO prefs VALUES ('%s', 'p1')"), "one it holds goes");
	/* a composite key, at a record of its own written in the same transaction */
	CHECK(ok(db, &s, "BEGIN; INSERT INTO sales VALUES ('%s', 1, 9.5);"
			 " INSERT INTO lines VALUES ('%s', 1, '%s', 1, 2); COMMIT"),
		  "a line pointing at its sale, both written together, goes");
	CHECK(refused(db, &s, "INSERT INTO lines VALUES ('%s', 2, '%s', 7, 1)",
				  (const char *const[]) {"\"sale_origin\", \"sale\"", "sales", "\"origin\", \"id\"", NULL}),
		  "one at a sale not there is refused, its columns named");
	t_exec(db, "ROLLBACK", NULL);
	CHECK(ok(db, &s, "INSERT INTO lines VALUES ('%s', 3, NULL, 7, 1)"), "a composite key with a NULL points at nothing");
	/* a table the replica is not sent */
	CHECK(refused(db, &s, "INSERT INTO tags VALUES ('%s', 1, 5)", (const char *const[]) {"tags", "secrets", NULL}),
		  "a pointer into a table the replica does not hold is refused");
	CHECK(ok(db, &s, "INSERT INTO tags VALUES ('%s', 1, NULL)"), "NULL there goes");
	/* uuids: compared as the server compares them */
	CHECK(ok(db, &s, "INSERT INTO assignments VALUES ('%s', 1, '0A0A0A0A-0000-4000-8000-000000000001')"),
		  "a uuid spelled in capitals points at the user it names");
	CHECK(refused(db, &s, "INSERT INTO assignments VALUES ('%s', 2, '0a0a0a0a-0000-4000-8000-000000000002')",
				  (const char *const[]) {"assignments", "users", NULL}), "one not there is refused");
	sqlite3_close(db);
}

static void
two_way(void)
{
	tm_server	s;
	sqlite3    *db = replica(&s);
	char	   *err = NULL;

	CHECK(refused(db, &s, "UPDATE issues SET label = 9 WHERE id = 'a'",
				  (const char *const[]) {"issues", "\"label\"", "labels", NULL}),
		  "an owned column pointing at a label the file does not have is refused");
	CHECK(ok(db, &s, "UPDATE issues SET label = 2 WHERE id = 'a'"), "at one it holds, it goes");
	CHECK(ok(db, &s, "UPDATE issues SET label = NULL WHERE id = 'b'"), "at nothing too");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'issues'") == 1, "noted once, for issue a");
	/* the server's columns stay the guard's */
	CHECK(t_exec(db, "UPDATE issues SET project = 'p1' WHERE id = 'b'", &err) == SQLITE_OK, "unchanged: %s", S(err));
	sqlite3_free(err);
	CHECK(t_exec(db, "UPDATE issues SET project = 'p9' WHERE id = 'b'", &err) == SQLITE_CONSTRAINT &&
		  t_has(err, "is the server's"), "a server column changed is the guard's refusal: %s", S(err));
	sqlite3_free(err);
	sqlite3_close(db);
}

/* retired rows are held: a row of its own may point at one; sync_apply writes anything */
static void
retired_and_apply(void)
{
	tm_server	s;
	sqlite3    *db = replica(&s);
	Sync__Down *d;
	char	   *r;

	CHECK(ok(db, &s, "INSERT INTO comments VALUES ('%s', 1, 'a', 'pending')"), "a comment on issue a");
	d = tm_down();
	tm_delete(tm_rows(d, "issues"), "a", NULL);
	tm_upsert(tm_rows(d, "comments"), "{\"origin\":\"0b0b0b0b-0000-4000-8000-000000000002\",\"id\":1,"
			  "\"issue\":\"elsewhere\",\"body\":\"another's\"}", -1, "0b0b0b0b-0000-4000-8000-000000000002", "1", NULL);
	tm_upsert(tm_rows(d, "issues"), "{\"id\":\"c\",\"project\":\"p7\",\"title\":\"C\",\"label\":99}", -1, "c", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"retired\":1") && t_has(r, "\"upserts\":2") && t_has(r, "\"refused\":0"),
		  "issue a is retired (a comment of its own points at it); the server's rows point anywhere: %s %s",
		  S(r), tm_error());
	CHECK(ok(db, &s, "INSERT INTO comments VALUES ('%s', 2, 'a', 'on the retired issue')"),
		  "a row it holds retired is its to point at");
	CHECK(refused(db, &s, "INSERT INTO comments VALUES ('%s', 3, 'elsewhere', 'x')", (const char *const[]) {NULL}),
		  "what another's record points at is not");
	CHECK(ok(db, &s, "UPDATE issues SET label = 1 WHERE id = 'c'"), "issue c's label set to one it holds");
	CHECK(refused(db, &s, "UPDATE issues SET label = 99 WHERE id = 'c'", (const char *const[]) {NULL}),
		  "and back to what the server's row pointed at, refused: the replica does not hold it");
	sqlite3_close(db);
}

/* the triggers follow the schema: a change, a table let go of, a file without them, a parent dropped */
static void
follows_schema(void)
{
	tm_server	s;
	sqlite3    *db = replica(&s);
	Sync__Table *t[10];
	Sync__Down *d;
	char	   *r;
	char	   *err = NULL;

	schema(t);
	/* renamed: issues to tickets, comments' issue column to ticket (same ids) */
	t[2]->name = "tickets";
	t[3]->columns[2]->name = "ticket";
	t[3]->foreign_keys[0]->columns[0] = "ticket";
	t[3]->foreign_keys[0]->table = "tickets";
	d = tm_down();
	tm_change(d, t[2]);
	tm_change(d, t[3]);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"changed\":2") && t_has(r, "\"failed\":[]"),
		  "a rename of a parent and a child's column applies: %s %s", S(r), tm_error());
	CHECK(refused(db, &s, "INSERT INTO comments VALUES ('%s', 1, 'z', 'x')",
				  (const char *const[]) {"\"ticket\"", "tickets", NULL}),
		  "the check names the new names");
	CHECK(ok(db, &s, "INSERT INTO comments VALUES ('%s', 1, 'a', 'x')"), "and finds issue a in tickets");
	/* a file without them (an earlier build's): the next message makes them */
	t_exec(db, "DROP TRIGGER \"_sync_fk_ins_comments_0\"", NULL);
	CHECK(ok(db, &s, "INSERT INTO comments VALUES ('%s', 2, 'z', 'x')"), "without its trigger a write goes");
	t_exec(db, "DELETE FROM comments WHERE id = 2", NULL);
	r = tm_apply(db, tm_next(&s, tm_down(), NULL));
	CHECK(t_has(r, "\"applied\""), "a message: %s %s", S(r), tm_error());
	CHECK(refused(db, &s, "INSERT INTO comments VALUES ('%s', 2, 'z', 'x')", (const char *const[]) {NULL}),
		  "after it, refused again");
	/* the parent let go of: nothing of it is held any more */
	d = tm_down();
	tm_let_go(d, "tickets");
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\""), "tickets let go of: %s %s", S(r), tm_error());
	CHECK(refused(db, &s, "INSERT INTO comments VALUES ('%s', 4, 'a', 'x')",
				  (const char *const[]) {"which this replica does not hold", NULL}),
		  "a comment pointing into a table no longer held is refused: %s",
		  S(t_text(db, "SELECT group_concat(name) FROM sqlite_master WHERE name GLOB '_sync_fk_*'")));
	/* a parent the host drops: its DDL waits for the next message, which makes the checks without it */
	t_exec(db, "DROP TABLE projects", NULL);
	CHECK(t_exec(db, "ALTER TABLE sales RENAME COLUMN total TO amount", &err) != SQLITE_OK &&
		  t_has(err, "_sync_fk_"), "SQLite refuses the host's DDL, naming the check: %s", S(err));
	sqlite3_free(err);
	r = tm_apply(db, tm_next(&s, tm_down(), NULL));
	CHECK(t_has(r, "\"applied\""), "a message: %s %s", S(r), tm_error());
	CHECK(t_exec(db, "ALTER TABLE sales RENAME COLUMN total TO amount", &err) == SQLITE_OK,
		  "then it runs: %s", S(err));
	sqlite3_free(err);
	CHECK(refused(db, &s, "INSERT INTO prefs VALUES ('%s', 'p1')", (const char *const[]) {"projects", NULL}),
		  "and a setting pointing at it is refused");
	sqlite3_close(db);
}

/* Up.unfiled_since: the last message applied before the oldest write not filed */
static void
unfiled_since(void)
{
	tm_server	s;
	sqlite3    *db = replica(&s);
	Sync__Up   *u;
	Sync__Filed *f;
	tm_msg		m;
	ms_wire_status status;
	char		reason[MS_REASON_MAX];
	char	   *r;

	CHECK(ok(db, &s, "UPDATE issues SET label = 2 WHERE id = 'a'"), "a write at message 2");
	for (int i = 0; i < 3; i++)
		tm_apply(db, tm_next(&s, tm_down(), NULL));
	CHECK(ok(db, &s, "INSERT INTO comments VALUES ('%s', 1, 'b', 'at 5')"), "another at message 5");
	m = tm_upload(db);
	u = m.data ? ms_up_decode(m.data, m.len, 1 << 30, NULL, &status, reason) : NULL;
	CHECK(u != NULL && u->unfiled_since == 2 && u->applied->number == 5,
		  "the upload says its writes wait since message 2: %llu, applied %llu %s",
		  u ? (unsigned long long) u->unfiled_since : 0ULL,
		  u && u->applied ? (unsigned long long) u->applied->number : 0ULL, tm_error());
	f = u ? tm_filed_all(u) : NULL;
	if (f != NULL)
	{
		/* the edit filed, the comment refused (set aside): nothing waits */
		f->rows = 1;
		f->n_tables = 0;
		tm_filed_table(f, "issues", 1, 0, 0, 0, 0);
		tm_filed_table(f, "comments", 0, 1, 0, 0, 0);
		tm_filed_refuse(f, "comments", tm_key(tm_replica_text(&s), "1", NULL), "points at a row it does not hold");
		r = tm_apply(db, tm_filed_msg(&s, f));
		CHECK(t_has(r, "\"set_aside\":1"), "the answer: %s %s", S(r), tm_error());
	}
	sync__up__free_unpacked(u, NULL);
	tm_apply(db, tm_next(&s, tm_down(), NULL));
	CHECK(ok(db, &s, "UPDATE issues SET label = 1 WHERE id = 'b'"), "a write at message 6");
	m = tm_upload(db);
	u = m.data ? ms_up_decode(m.data, m.len, 1 << 30, NULL, &status, reason) : NULL;
	/*
	 * the filed edit waits no more; the comment set aside still counts:
	 * sync_retry, or a narrowing down, sends it again, and the server must
	 * still know what it may point at (a storm of reprovisionings lost a
	 * sale so, its parent forgotten while it was set aside)
	 */
	CHECK(u != NULL && u->unfiled_since == 5,
		  "a write set aside still dates the upload: since message 5: %llu %s",
		  u ? (unsigned long long) u->unfiled_since : 0ULL, tm_error());
	sync__up__free_unpacked(u, NULL);
	sqlite3_close(db);
}

/* ---- what a message costs when nothing changed (issue 37) ---------------- */

/* what a message's statements did */
typedef struct traced
{
	int			listed;			/* reads of sqlite_master for the triggers */
	int			undated;		/* UPDATEs of _sync_notes' undated notes */
} traced;

/* traced_msg: m applied, its statements counted */
static traced
traced_msg(sqlite3 *db, tm_msg m, const char *what)
{
	static const char *const words[] = {"name GLOB '_sync_fk_*'", "UPDATE _sync_notes SET written_after", NULL};
	int			n[2];
	char	   *r;

	t_trace(db, words, n);
	r = tm_apply(db, m);
	t_trace(db, NULL, NULL);
	CHECK(t_has(r, "\"applied\""), "%s: %s %s", what, S(r), tm_error());
	return (traced) {n[0], n[1]};
}

/* traced_apply: the next message, with no rows */
static traced
traced_apply(sqlite3 *db, tm_server *s, const char *what)
{
	return traced_msg(db, tm_next(s, tm_down(), NULL), what);
}

/*
 * A message after one that found the checks as they should be, with no
 * write of the replica's since: neither lists the triggers again nor dates
 * notes (an UPDATE gathering its rows in a temporary table, for none): each
 * was an eighth of a one-row sync_apply.  Any DDL (the host's, a rollback's
 * too), or a note written, and the next message looks again.
 */
static void
nothing_changed(void)
{
	tm_server	s;
	sqlite3    *db = replica(&s);
	traced		t;
	tm_msg		m;

	traced_apply(db, &s, "a message");
	t = traced_apply(db, &s, "another");
	CHECK(t.listed == 0 && t.undated == 0,
		  "nothing changed: the triggers not listed (%d), no notes dated (%d)", t.listed, t.undated);
	CHECK(ok(db, &s, "UPDATE issues SET label = 2 WHERE id = 'a'"), "a write");
	t = traced_apply(db, &s, "a message after a write");
	CHECK(t.undated == 1 && t.listed == 0, "dates its note (%d), lists nothing (%d)", t.undated, t.listed);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE written_after IS NULL") == 0, "every note dated");
	/* a check found in a transaction rolled back is not kept: its schema_version comes back with other DDL */
	t_exec(db, "BEGIN", NULL);
	t_exec(db, "CREATE TABLE host_scratch(x)", NULL);
	m = tm_next(&s, tm_down(), NULL);
	t = traced_msg(db, m, "a message in the host's transaction");
	CHECK(t.listed == 1, "after the host's DDL, the triggers listed (%d)", t.listed);
	t_exec(db, "ROLLBACK", NULL);
	/* the same schema_version again, one trigger fewer */
	t_exec(db, "DROP TRIGGER \"_sync_fk_ins_comments_0\"", NULL);
	CHECK(ok(db, &s, "INSERT INTO comments VALUES ('%s', 7, 'z', 'x')"), "without its trigger a write goes");
	t_exec(db, "DELETE FROM comments WHERE id = 7", NULL);
	t_exec(db, "DELETE FROM _sync_notes", NULL);
	t = traced_msg(db, m, "the message again after the rollback");
	CHECK(t.listed >= 1, "the triggers listed again (%d)", t.listed);
	CHECK(refused(db, &s, "INSERT INTO comments VALUES ('%s', 7, 'z', 'x')", (const char *const[]) {NULL}),
		  "and the check made again");
	t = traced_apply(db, &s, "the next message");
	CHECK(t.listed == 0, "then kept (%d)", t.listed);
	/* a file of an older build: no reach_version yet */
	t_exec(db, "ALTER TABLE _sync_state DROP COLUMN reach_gen", NULL);
	t_exec(db, "ALTER TABLE _sync_state DROP COLUMN reach_version", NULL);
	t_exec(db, "DROP TRIGGER \"_sync_fk_ins_comments_0\"", NULL);
	t = traced_apply(db, &s, "a message to an older build's file");
	CHECK(t.listed >= 1 && t_int(db, "SELECT count(*) FROM pragma_table_info('_sync_state')"
								 " WHERE name IN ('reach_version', 'reach_gen')") == 2,
		  "gains the columns and lists the triggers (%d)", t.listed);
	CHECK(refused(db, &s, "INSERT INTO comments VALUES ('%s', 8, 'z', 'x')", (const char *const[]) {NULL}),
		  "its checks made again");
	sqlite3_close(db);
}

void
test_reach(void)
{
	records();
	two_way();
	retired_and_apply();
	follows_schema();
	unfiled_since();
	nothing_changed();
}
