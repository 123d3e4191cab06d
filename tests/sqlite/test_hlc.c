/*
 * test_hlc.c - the replica's hybrid logical clock (src/sqlite/hlc.c,
 * docs/protocol.md 12): a record table declared version => 'hlc' has its
 * version stamped on every write, monotonic; a clock set back an hour still
 * stamps newer; the server's clock is merged from every message, one an
 * absurd distance ahead is not; the counter's carry; the upload carries the
 * clock; sync_hlc(); the test setting refused outside tests.
 */
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "hlc.h"

/* MAGIC_SYNC_TEST_CLOCK=1 in this process, or not: Windows has no setenv */
static void
test_clock(bool on)
{
#ifdef _WIN32
	_putenv_s("MAGIC_SYNC_TEST_CLOCK", on ? "1" : "");
#else
	if (on)
		setenv("MAGIC_SYNC_TEST_CLOCK", "1", 1);
	else
		unsetenv("MAGIC_SYNC_TEST_CLOCK");
#endif
}

void		test_hlc(void);

#define HOUR INT64_C(3600000)

/* the time as the extension reads it: SQLite's VFS clock (Windows has no clock_gettime) */
static int64_t
wall_ms(void)
{
	sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
	sqlite3_int64 julian_ms = 0;

	if (vfs == NULL || vfs->iVersion < 2 || vfs->xCurrentTimeInt64 == NULL ||
		vfs->xCurrentTimeInt64(vfs, &julian_ms) != SQLITE_OK)
		return 0;
	return (int64_t) (julian_ms - INT64_C(210866760000000));
}

/* a replica holding two record tables: tills (version => 'hlc') and notes (a host's version) */
static sqlite3 *
replica(tm_server *s)
{
	sqlite3    *db = t_open(NULL);
	Sync__Table *schema[2];
	char	   *r;

	tm_server_init(s, 0x30, 0x40);
	schema[0] = tm_table("tills", "record", "json", "store,id", "store TEXT notnull, id INTEGER notnull,"
						 " amount INTEGER, v INTEGER notnull");
	tm_origin(schema[0], "store");
	schema[0]->version = "v";
	schema[0]->hlc = true;
	schema[1] = tm_table("notes", "record", "json", "store,id", "store TEXT notnull, id INTEGER notnull,"
						 " body TEXT, v INTEGER notnull");
	tm_origin(schema[1], "store");
	schema[1]->version = "v";
	r = tm_apply(db, tm_next(s, tm_begin(schema, 2), NULL));
	CHECK(t_has(r, "\"applied\""), "the snapshot begins: %s %s", S(r), tm_error());
	r = tm_apply(db, tm_next(s, NULL, tm_end("tills", "notes", NULL)));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "the snapshot ends: %s %s", S(r), tm_error());
	return db;
}

static void
run(sqlite3 *db, const tm_server *s, const char *fmt)
{
	char	   *sql = sqlite3_mprintf(fmt, tm_replica_text(s));
	char	   *err = NULL;

	CHECK(t_exec(db, sql, &err) == SQLITE_OK, "%s: %s", sql, S(err));
	sqlite3_free(err);
	sqlite3_free(sql);
}

static long long
stamp(sqlite3 *db, int id)
{
	char		sql[96];

	snprintf(sql, sizeof sql, "SELECT v FROM tills WHERE id = %d", id);
	return t_int(db, sql);
}

static void
stamping(void)
{
	tm_server	s;
	sqlite3    *db = replica(&s);
	int64_t		before = wall_ms();
	long long	v1,
				v2,
				v3,
				h;
	char	   *err = NULL;

	test_clock(true);
	run(db, &s, "INSERT INTO tills VALUES ('%s', 1, 10, 0)");
	v1 = stamp(db, 1);
	CHECK(ms_hlc_ms(v1) >= before && ms_hlc_ms(v1) <= wall_ms(), "an insert is stamped with the time: %lld", v1);
	CHECK(t_int(db, "SELECT hlc FROM _sync_state") == v1, "the clock is the last stamp");
	run(db, &s, "UPDATE tills SET amount = 11 WHERE id = 1");
	v2 = stamp(db, 1);
	CHECK(v2 > v1, "an update stamps it again, greater: %lld > %lld", v2, v1);
	run(db, &s, "UPDATE tills SET v = 5 WHERE id = 1");
	CHECK(stamp(db, 1) > v2, "a version the host writes is stamped over: %lld", stamp(db, 1));
	v2 = stamp(db, 1);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'tills'") == 1, "noted once");
	/* the clock set back an hour: the next stamp still beats the last */
	CHECK(t_int(db, "SELECT sync_test_clock_offset(-3600000)") == -3600000, "the test clock goes back an hour");
	run(db, &s, "UPDATE tills SET amount = 12 WHERE id = 1");
	v3 = stamp(db, 1);
	CHECK(v3 > v2 && ms_hlc_ms(v3) == ms_hlc_ms(v2) && ms_hlc_counter(v3) == ms_hlc_counter(v2) + 1,
		  "a clock an hour back counts on: %lld after %lld", v3, v2);
	run(db, &s, "INSERT INTO tills VALUES ('%s', 2, 1, 0)");
	CHECK(stamp(db, 2) > v3, "and a new row is newer too: %lld", stamp(db, 2));
	/* sync_hlc: the next stamp, and a row written with it keeps it */
	h = t_int(db, "SELECT sync_hlc()");
	CHECK(h > stamp(db, 2), "sync_hlc advances the clock: %lld", h);
	run(db, &s, "INSERT INTO tills VALUES ('%s', 3, 1, sync_hlc())");
	CHECK(stamp(db, 3) == h + 1 && t_int(db, "SELECT hlc FROM _sync_state") == h + 1,
		  "a row written with sync_hlc() keeps it, stamped once: %lld", stamp(db, 3));
	/* the counter's carry: the last of a millisecond borrows the next */
	t_exec(db, "UPDATE _sync_state SET hlc = ((CAST(strftime('%s','now') AS INTEGER) * 1000 + 7200000) << 16) | 65535", NULL);
	h = t_int(db, "SELECT hlc FROM _sync_state");
	run(db, &s, "UPDATE tills SET amount = 13 WHERE id = 1");
	CHECK(ms_hlc_ms(stamp(db, 1)) == ms_hlc_ms(h) + 1 && ms_hlc_counter(stamp(db, 1)) == 0,
		  "counter overflow carries into the next ms: %lld after %lld", stamp(db, 1), h);
	/* a table with the host's version is not stamped */
	run(db, &s, "INSERT INTO notes VALUES ('%s', 1, 'x', 42)");
	CHECK(t_int(db, "SELECT v FROM notes WHERE id = 1") == 42, "a host's version is the host's");
	/* applying does not stamp: a row from the server keeps its version */
	{
		Sync__Down *d = tm_down();
		char		row[160];
		char	   *r;

		snprintf(row, sizeof row, "{\"store\":\"%s\",\"id\":9,\"amount\":1,\"v\":77}", tm_replica_text(&s));
		tm_upsert(tm_rows(d, "tills"), row, -1, tm_replica_text(&s), "9", NULL);
		r = tm_apply(db, tm_next(&s, d, NULL));
		CHECK(t_has(r, "\"applied\"") && stamp(db, 9) == 77, "a row applied keeps its version: %s %lld", S(r), stamp(db, 9));
	}
	/* the test setting, outside a test process */
	test_clock(false);
	CHECK(t_exec(db, "SELECT sync_test_clock_offset(0)", &err) == SQLITE_ERROR && t_has(err, "MAGIC_SYNC_TEST_CLOCK=1"),
		  "sync_test_clock_offset is refused outside tests: %s", S(err));
	sqlite3_free(err);
	sqlite3_close(db);
	tm_free_all();
}

static void
merging(void)
{
	tm_server	s;
	sqlite3    *db = replica(&s);
	int64_t		now = wall_ms();
	int64_t		server;
	char	   *r;
	tm_msg		m;
	Sync__Up   *u;
	ms_wire_status status;
	char		reason[MS_REASON_MAX] = "";

	test_clock(true);
	/* this device is an hour behind; the server's clock (its own time) comes with a message */
	t_exec(db, "SELECT sync_test_clock_offset(-3600000)", NULL);
	server = ms_hlc_of_ms(now) + 5;
	s.clock = (uint64_t) server;
	r = tm_apply(db, tm_next(&s, tm_down(), NULL));
	CHECK(t_has(r, "\"applied\"") && t_int(db, "SELECT hlc FROM _sync_state") == server,
		  "the server's clock is merged: %s", S(r));
	run(db, &s, "INSERT INTO tills VALUES ('%s', 1, 10, 0)");
	CHECK(stamp(db, 1) == server + 1, "a device an hour behind writes after what it heard: %lld", stamp(db, 1));
	/* a Filed answer carries it too */
	s.clock = (uint64_t) (server + 100);
	r = tm_apply(db, tm_filed_msg(&s, tm_filed((const uint8_t *) "0123456789abcdef", 0)));
	CHECK(t_int(db, "SELECT hlc FROM _sync_state") == server + 100, "a Filed answer's clock is merged: %s", S(r));
	/* an older clock changes nothing */
	s.clock = (uint64_t) ms_hlc_of_ms(now - 10 * HOUR);
	tm_apply(db, tm_next(&s, tm_down(), NULL));
	CHECK(t_int(db, "SELECT hlc FROM _sync_state") == server + 100, "an older server clock changes nothing");
	/* untrusted bytes: a clock thirty days ahead (or beyond INT64_MAX) is not merged, and says so */
	s.clock = (uint64_t) ms_hlc_of_ms(now + 30 * 24 * HOUR);
	r = tm_apply(db, tm_next(&s, tm_down(), NULL));
	CHECK(t_has(r, "\"applied\"") && t_int(db, "SELECT hlc FROM _sync_state") == server + 100,
		  "an absurd future clock is not merged, the message applied: %s", S(r));
	r = t_text(db, "SELECT last_error FROM _sync_state");
	CHECK(t_has(r, "more than a day ahead") && t_has(r, "not merged"), "and last_error says so: %s", S(r));
	sqlite3_free(r);
	s.clock = UINT64_MAX;
	tm_apply(db, tm_next(&s, tm_down(), NULL));
	CHECK(t_int(db, "SELECT hlc FROM _sync_state") == server + 100, "a clock beyond INT64_MAX is not merged");
	run(db, &s, "UPDATE tills SET amount = 11 WHERE id = 1");
	CHECK(stamp(db, 1) == server + 101, "the next stamp follows the clock, not the absurd one: %lld", stamp(db, 1));
	/* the upload carries the clock */
	m = tm_upload(db);
	u = m.data ? ms_up_decode(m.data, m.len, 1 << 30, NULL, &status, reason) : NULL;
	CHECK(u != NULL && (int64_t) u->clock == server + 101, "the upload carries the clock: %s %lld", reason,
		  u ? (long long) u->clock : -1LL);
	if (u)
		sync__up__free_unpacked(u, NULL);
	t_exec(db, "SELECT sync_test_clock_offset(0)", NULL);
	test_clock(false);
	sqlite3_close(db);
	tm_free_all();
}

/* a schema change declaring a table version => 'hlc' later: its rows are stamped from then on */
static void
declared_later(void)
{
	tm_server	s;
	sqlite3    *db = t_open(NULL);
	Sync__Table *schema[1];
	Sync__Down *d;
	char	   *r;

	tm_server_init(&s, 0x50, 0x60);
	schema[0] = tm_table("tills", "record", "json", "store,id", "store TEXT notnull id=1, id INTEGER notnull id=2,"
						 " amount INTEGER id=3, v INTEGER notnull id=4");
	tm_origin(schema[0], "store");
	schema[0]->version = "v";
	schema[0]->id = 1;
	r = tm_apply(db, tm_next(&s, tm_begin(schema, 1), NULL));
	r = tm_apply(db, tm_next(&s, NULL, tm_end("tills", NULL)));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "the snapshot ends: %s %s", S(r), tm_error());
	run(db, &s, "INSERT INTO tills VALUES ('%s', 1, 10, 3)");
	CHECK(stamp(db, 1) == 3, "before: the host's version");
	schema[0] = tm_table("tills", "record", "json", "store,id", "store TEXT notnull id=1, id INTEGER notnull id=2,"
						 " amount INTEGER id=3, v INTEGER notnull id=4");
	tm_origin(schema[0], "store");
	schema[0]->version = "v";
	schema[0]->id = 1;
	schema[0]->hlc = true;
	d = tm_down();
	tm_change(d, schema[0]);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"applied\""), "the change applies: %s %s", S(r), tm_error());
	run(db, &s, "UPDATE tills SET amount = 11 WHERE id = 1");
	CHECK(ms_hlc_ms(stamp(db, 1)) > 0, "after: stamped by the clock: %lld", stamp(db, 1));
	schema[0] = tm_table("tills", "record", "json", "store,id", "store TEXT notnull id=1, id INTEGER notnull id=2,"
						 " amount INTEGER id=3, v INTEGER notnull id=4");
	tm_origin(schema[0], "store");
	schema[0]->version = "v";
	schema[0]->id = 1;
	d = tm_down();
	tm_change(d, schema[0]);
	r = tm_apply(db, tm_next(&s, d, NULL));
	run(db, &s, "UPDATE tills SET v = 4 WHERE id = 1");
	CHECK(stamp(db, 1) == 4 && t_int(db, "SELECT count(*) FROM sqlite_master WHERE name LIKE '_sync_hlc_%'") == 0,
		  "declared a host's version again: no more stamping: %s", S(r));
	sqlite3_close(db);
	tm_free_all();
}

/* a file from before the clock: its state gains the columns, and sync_hlc says what it lacks */
static void
before_a_snapshot(void)
{
	sqlite3    *db = t_open(NULL);
	char	   *err = NULL;

	CHECK(t_exec(db, "SELECT sync_hlc()", &err) == SQLITE_ERROR && t_has(err, "no clock yet"),
		  "sync_hlc before a snapshot: %s", S(err));
	sqlite3_free(err);
	sqlite3_close(db);
}

void
test_hlc(void)
{
	stamping();
	merging();
	declared_later();
	before_a_snapshot();
}
