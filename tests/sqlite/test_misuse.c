/*
 * test_misuse.c - every function checks its arguments before use and fails
 * with a clear message, changing nothing; functions that touch the
 * replica's data are DIRECTONLY; reading functions on a file that has
 * nothing yet create nothing.
 */
#include "harness.h"

void		test_misuse(void);

/* run sql; it must fail with a message holding want, and change nothing */
static void
fails(sqlite3 *db, const char *sql, const char *want)
{
	uint64_t	before = tm_checksum(db, 1);
	char	   *err = NULL;
	int			rc = t_exec(db, sql, &err);

	CHECK(rc != SQLITE_OK && t_has(err, want), "%s fails saying \"%s\": %s", sql, want, S(err));
	CHECK(tm_checksum(db, 1) == before, "%s changes nothing", sql);
	sqlite3_free(err);
}

static void
apply_fails(sqlite3 *db, tm_msg m, const char *want, const char *what)
{
	uint64_t	before = tm_checksum(db, 1);
	char	   *r = tm_apply(db, m);

	CHECK(r == NULL && t_has(tm_error(), want), "%s: an error saying \"%s\": %s %s", what, want, S(r), tm_error());
	CHECK(tm_checksum(db, 1) == before, "%s changes nothing", what);
}

static void
empty_file(void)
{
	sqlite3    *db = t_open(NULL);
	char	   *r;

	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"replica\":null") && t_has(r, "\"applied\":0"), "status of an empty file: %s", S(r));
	sqlite3_free(r);
	r = t_text(db, "SELECT sync_progress() || sync_digest() || sync_config('resend_after')");
	CHECK(r && strcmp(r, "{}{}300") == 0, "progress, digest, a default setting: %s", S(r));
	sqlite3_free(r);
	r = t_text(db, "SELECT sync_lanes()");
	CHECK(r && strcmp(r, "[{\"lane\":\"\",\"last_seq\":0,\"tables\":[]}]") == 0, "the first lane of an empty file: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master") == 0, "reading created nothing");
	CHECK(t_int(db, "SELECT sync_retry()") == 0, "nothing to retry");
	CHECK(t_int(db, "SELECT sync_resync()") == 0, "nothing applied: nothing to re-sync");
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master") == 0, "asking created nothing");
	sqlite3_close(db);
}

static void
arguments(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);

	fails(db, "SELECT sync_apply()", "wrong number of arguments");
	fails(db, "SELECT sync_apply(x'00', 1)", "wrong number of arguments");
	fails(db, "SELECT sync_apply(NULL)", "must be a BLOB, not NULL");
	fails(db, "SELECT sync_apply('0801')", "must be a BLOB, not TEXT");
	fails(db, "SELECT sync_apply(42)", "must be a BLOB, not a number");
	fails(db, "SELECT sync_apply(1.5)", "must be a BLOB, not a number");
	fails(db, "SELECT sync_apply(x'')", "cannot be applied");
	fails(db, "SELECT sync_apply(x'0a')", "truncated");
	fails(db, "SELECT sync_apply(x'ffffffffffffffffffffff')", "truncated");
	fails(db, "SELECT sync_apply(zeroblob(100))", "invalid field number");
	fails(db, "SELECT sync_upload(1, 'x', 3)", "wrong number of arguments");
	fails(db, "SELECT sync_upload(1, 2)", "a lane is TEXT");
	fails(db, "SELECT sync_upload(x'00')", "max_rows is a count of rows");
	fails(db, "SELECT sync_upload(1.5, 'sales')", "max_rows is a count of rows");
	/* a lane's name from the host is checked as one from the server is (lane.h) */
	fails(db, "SELECT sync_upload('Sales')", "begins with a lower-case letter");
	fails(db, "SELECT sync_upload(NULL, 'sales lane')", "byte 6 is 0x20");
	fails(db, "SELECT sync_upload(NULL, 'sales' || char(0) || 'x')", "NUL byte");
	fails(db, "SELECT sync_upload(NULL, 'caf' || char(233))", "byte 4 is 0xc3");
	fails(db, "SELECT sync_upload(NULL, printf('%.64c', 'a'))", "at most 63 bytes, not 64");
	fails(db, "SELECT sync_upload(-1)", "max_rows is a count of rows");
	fails(db, "SELECT sync_upload_refused(x'00', 'why')", "takes an upload sync_upload() returned");
	fails(db, "SELECT sync_upload_refused(NULL, 'why', 1)", "takes an upload sync_upload() returned");
	fails(db, "SELECT sync_upload_refused(x'00')", "wrong number of arguments");
	fails(db, "SELECT sync_digest(1)", "must be named by TEXT");
	fails(db, "SELECT sync_digest(NULL)", "must be named by TEXT");
	fails(db, "SELECT sync_digest('a', 'b')", "wrong number of arguments");
	fails(db, "SELECT sync_digest('nowhere')", "not held");
	fails(db, "SELECT sync_progress(1)", "wrong number of arguments");
	fails(db, "SELECT sync_status(1)", "wrong number of arguments");
	fails(db, "SELECT sync_retry(1)", "retries every row set aside (no argument), or those set aside as too large");
	fails(db, "SELECT sync_retry('all', 2)", "wrong number of arguments");
	fails(db, "SELECT sync_init(NULL)", "must be TEXT");
	fails(db, "SELECT sync_init(42)", "must be TEXT");
	fails(db, "SELECT sync_init(x'0011')", "or a BLOB of 16 bytes");
	fails(db, "SELECT sync_init('not-a-uuid')", "not a uuid");
	fails(db, "SELECT sync_init('7c9e6679x7425-40de-944b-e07fc1f90ae7')", "not a uuid");
	fails(db, "SELECT sync_init('7c9e6679-7425-40de-944b-e07fc1f90ae')", "not a uuid");
	fails(db, "SELECT sync_init('7c9e6679-7425-40de-944b-e07fc1f90ae7')", "already");
	fails(db, "SELECT sync_config('nope')", "unknown setting \"nope\": the settings are max_message_bytes");
	fails(db, "SELECT sync_config(NULL)", "unknown setting");
	fails(db, "SELECT sync_config('max_upload_bytes', 'big')", "takes an integer");
	fails(db, "SELECT sync_config('max_upload_bytes', 2048.5)", "takes an integer");
	fails(db, "SELECT sync_config('max_upload_bytes', NULL)", "takes an integer");
	fails(db, "SELECT sync_config('max_message_bytes', 10)", "is 1024 to");
	fails(db, "SELECT sync_config('digest_interval', -1)", "is 0 to");
	fails(db, "SELECT sync_config('max_upload_bytes', 1, 2)", "wrong number of arguments");
	CHECK(t_int(db, "SELECT sync_config('max_message_bytes', 2048)") == 2048 &&
		  t_int(db, "SELECT sync_config('max_message_bytes')") == 2048, "a setting set and read");
	/* the bound is checked before anything is decoded */
	fails(db, "SELECT sync_apply(zeroblob(4096))", "over max_message_bytes (2048)");
	sqlite3_close(db);
}

static void
messages(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d = tm_down();
	uint8_t		nonce[16] = {1};
	tm_msg		m;

	tm_upsert(tm_rows(d, "products"), "{\"id\":9}", -1, "9", NULL);
	apply_fails(db, tm_message(&s, MS_PROTOCOL, 0, nonce, 0, NULL, d, NULL, NULL), "numbered 0", "a Down numbered 0");
	apply_fails(db, tm_message(&s, MS_PROTOCOL, 5, nonce, 5, nonce, d, NULL, NULL), "not before it", "a previous not before it");
	apply_fails(db, tm_message(&s, MS_PROTOCOL, 5, NULL, 4, nonce, d, NULL, NULL), "nonce", "no nonce");
	apply_fails(db, tm_message(&s, 0, 5, nonce, 4, nonce, d, NULL, NULL), "no protocol", "protocol 0");
	apply_fails(db, tm_message(&s, MS_PROTOCOL, 5, nonce, 4, nonce, NULL, NULL, NULL), "no body", "no body");
	m = tm_next(&s, d, NULL);
	apply_fails(db, (tm_msg) {m.data, m.len - 1}, "truncated", "a message cut short");
	s.number--;
	m = tm_next(&s, d, NULL);
	m.data[3] ^= 0x80;
	apply_fails(db, m, "cannot be applied", "a message with a broken length");
	sqlite3_close(db);
}

static void
direct_only(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	static const char *const fns[] = {
		"sync_apply(x'00')", "sync_upload()", "sync_upload('sales')", "sync_lanes()", "sync_digest()", "sync_progress()", "sync_status()",
		"sync_init('7c9e6679-7425-40de-944b-e07fc1f90ae7')", "sync_config('resend_after')", "sync_retry()",
		"sync_resync()"
	};

	for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
	{
		char	   *sql = sqlite3_mprintf("DROP VIEW IF EXISTS v; CREATE VIEW v AS SELECT %s AS x", fns[i]);
		char	   *err = NULL;

		t_exec(db, sql, NULL);
		CHECK(t_exec(db, "SELECT * FROM v", &err) != SQLITE_OK && t_has(err, "unsafe use"),
			  "%s cannot be called from a view: %s", fns[i], S(err));
		sqlite3_free(err);
		sqlite3_free(sql);
	}
	t_exec(db, "CREATE TABLE t(x); CREATE TRIGGER tt AFTER INSERT ON t BEGIN SELECT sync_upload(); END", NULL);
	fails(db, "INSERT INTO t VALUES (1)", "unsafe use of sync_upload");
	CHECK(t_int(db, "SELECT count(*) FROM (SELECT sync_key(1) FROM t)") == 0, "sync_key is innocuous");
	sqlite3_close(db);
}

void
test_misuse(void)
{
	empty_file();
	arguments();
	messages();
	direct_only();
}
