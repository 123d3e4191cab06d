/*
 * test_replica.c - the agent's SQLite side (src/agent/replica.c): what the
 * replica says of itself before a pull (replica_applied) is taken from the
 * last apply's answer, and asked again once another connection wrote the
 * file, an apply failed, or it was never known; an upload that said all
 * (replica_said_all) spares the next sync_upload only until anything
 * writes the file.  Built and run by
 * `make sqlite-test` (build/test_agent_replica), under the sanitizers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sqlite3.h>

#include "../../src/agent/replica.h"
#include "../sqlite/msgs.h"
#include "check.h"
#include "wire.h"

int			ms_unit_passed;
int			ms_unit_failed;

/* statements of the agent's connection that asked sync_status, and sync_upload, counted */
static int	status_asked;
static int	upload_asked;

static int
count_status(unsigned type, void *arg, void *p, void *x)
{
	const char *sql = sqlite3_sql((sqlite3_stmt *) p);

	(void) type;
	(void) arg;
	(void) x;
	if (sql != NULL && strstr(sql, "sync_status()") != NULL)
		status_asked++;
	if (sql != NULL && strstr(sql, "sync_upload(") != NULL)
		upload_asked++;
	return 0;
}

/* what a connection of its own says the replica applied: sync_status's number, sync_applied() */
static void
said(sqlite3 *db, int64_t *applied, bool *open, uint8_t *claim, size_t *claim_len)
{
	sqlite3_stmt *st = NULL;

	*applied = -1;
	*claim_len = 0;
	if (sqlite3_prepare_v2(db, "SELECT json_extract(sync_status(), '$.applied'),"
						   " json_extract(sync_status(), '$.snapshot') IS NOT NULL, sync_applied()",
						   -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
	{
		*applied = sqlite3_column_int64(st, 0);
		*open = sqlite3_column_int(st, 1) != 0;
		*claim_len = (size_t) sqlite3_column_bytes(st, 2);
		if (*claim_len > 0 && *claim_len <= MS_APPLIED_MAX)
			memcpy(claim, sqlite3_column_blob(st, 2), *claim_len);
	}
	sqlite3_finalize(st);
}

/* replica_applied agrees with a fresh connection's answer; asked: whether it asked sync_status */
static void
agrees(replica *r, sqlite3 *other, bool asked, const char *when)
{
	char		err[AGENT_ERROR_MAX] = "";
	int64_t		applied = -2,
				want;
	bool		open = true,
				want_open = false;
	uint8_t		claim[MS_APPLIED_MAX],
				want_claim[MS_APPLIED_MAX];
	size_t		claim_len = 0,
				want_len;
	int			before = status_asked;

	CHECK(replica_applied(r, &applied, &open, claim, &claim_len, err) == STEP_OK, "%s: %s", when, err);
	said(other, &want, &want_open, want_claim, &want_len);
	CHECK(applied == want, "%s: applied %lld, the file says %lld", when, (long long) applied, (long long) want);
	CHECK(open == want_open, "%s: snapshot open %d, the file says %d", when, open, want_open);
	CHECK(claim_len == want_len && memcmp(claim, want_claim, claim_len) == 0,
		  "%s: the claim (%zu bytes) is not sync_applied() (%zu bytes)", when, claim_len, want_len);
	CHECK((status_asked > before) == asked, "%s: sync_status %s", when, asked ? "not asked" : "asked again");
}

static void
apply_ok(replica *r, tm_msg m, const char *what)
{
	char		err[AGENT_ERROR_MAX] = "";
	apply_result res;

	CHECK(replica_apply(r, m.data, m.len, &res, err) == STEP_OK && strcmp(res.result, "applied") == 0,
		  "%s: %s %s", what, err, res.result);
}

static tm_msg
one_row(tm_server *s, int id)
{
	Sync__Down *d = tm_down();
	char		json[64],
				key[16];

	snprintf(json, sizeof json, "{\"id\":%d,\"name\":\"n%d\"}", id, id);
	snprintf(key, sizeof key, "%d", id);
	tm_upsert(tm_rows(d, "items"), json, -1, key, NULL);
	return tm_next(s, d, NULL);
}

/* remove_file: a replica file and the three beside it */
static void
remove_file(const char *path)
{
	char		p[200];

	for (int k = 0; k < 4; k++)
	{
		snprintf(p, sizeof p, "%s%s", path, (const char *[]) {"", "-wal", "-shm", "-agent.lock"}[k]);
		unlink(p);
	}
}

/* one_customer: a message of one catalog row of the shop's (a customer) */
static tm_msg
one_customer(tm_server *s)
{
	static int	id = 10;
	Sync__Down *d = tm_down();
	char		json[64],
				key[16];

	id++;
	snprintf(json, sizeof json, "{\"id\":%d,\"name\":\"c%d\",\"vip\":false}", id, id);
	snprintf(key, sizeof key, "%d", id);
	tm_upsert(tm_rows(d, "customers"), json, -1, key, NULL);
	return tm_next(s, d, NULL);
}

/*
 * next_upload: replica_upload's answer; asked: whether it asked sync_upload;
 * rows: the rows the upload carries (-1: nothing to say)
 */
static void
next_upload(replica *r, bool asked, int rows, const char *when, bool said_all_after)
{
	char		err[AGENT_ERROR_MAX] = "";
	uint8_t    *up = NULL;
	size_t		len = 0;
	int			before = upload_asked;
	int			n = -1;

	CHECK(replica_upload(r, -1, &up, &len, err) == STEP_OK, "%s: %s", when, err);
	CHECK((upload_asked > before) == asked, "%s: sync_upload %s", when, asked ? "not asked" : "asked");
	if (up != NULL)
	{
		ms_wire_status status;
		char		reason[MS_REASON_MAX];
		Sync__Up   *u = ms_up_decode(up, len, len, NULL, &status, reason);

		n = 0;
		for (size_t i = 0; u != NULL && i < u->n_rows; i++)
			n += (int) u->rows[i]->n_upserts + (int) u->rows[i]->n_deletes;
		if (u != NULL)
			sync__up__free_unpacked(u, NULL);
		CHECK(replica_says_all(up, len) == said_all_after, "%s: says all: %d", when, !said_all_after);
		/* as uploads.c: filed, and it said all */
		if (replica_says_all(up, len))
			replica_said_all(r);
	}
	CHECK(n == rows, "%s: %d rows carried, not %d", when, n, rows);
	free(up);
}

/*
 * An acknowledgement that said all spares the next sync_upload; a write
 * between the two, by the host or by an apply, is still uploaded.
 */
static void
said_all(const char *dir)
{
	char		path[160];
	char		err[AGENT_ERROR_MAX] = "";
	tm_server	s;
	tm_msg		begin,
				end;
	replica    *r;
	sqlite3    *host;
	char	   *sql;

	snprintf(path, sizeof path, "%s/said.db", dir);
	tm_server_init(&s, 0x22, 0x52);
	r = replica_open(path, tm_replica_text(&s), err);
	CHECK(r != NULL, "replica_open: %s", err);
	if (r == NULL)
		return;
	sqlite3_trace_v2(r->db, SQLITE_TRACE_STMT, count_status, NULL);
	CHECK(sqlite3_open(path, &host) == SQLITE_OK, "the host's connection");
	sqlite3_busy_timeout(host, 5000);
	tm_shop_snapshot(&s, &begin, &end);
	apply_ok(r, begin, "the shop's begin");
	apply_ok(r, end, "the shop's end");

	/* the snapshot's acknowledgement carries its digests: not all */
	next_upload(r, true, 0, "the snapshot's acknowledgement", false);
	next_upload(r, true, -1, "after the snapshot's acknowledgement", false);

	/* a message's acknowledgement says all: the next upload finds nothing, unasked */
	apply_ok(r, one_customer(&s), "a message");
	next_upload(r, true, 0, "the message's acknowledgement", true);
	next_upload(r, false, -1, "right after the acknowledgement", false);
	next_upload(r, false, -1, "right after it, again", false);
	/* a round's start forgets it: asked again (what becomes due with time is looked at) */
	replica_said_forget(r);
	next_upload(r, true, -1, "a round's start", false);

	/* an apply between the two (this connection's write): asked, and acknowledged */
	apply_ok(r, one_customer(&s), "the next message");
	next_upload(r, true, 0, "its acknowledgement", true);
	apply_ok(r, one_customer(&s), "a message after it");
	next_upload(r, true, 0, "an apply after the acknowledgement", true);

	/* the host writes a row between the two: asked, and the row goes up */
	sql = sqlite3_mprintf("INSERT INTO orders(origin, id, customer, total) VALUES (%Q, 1, 1, 9.5)",
						  tm_replica_text(&s));
	CHECK(sqlite3_exec(host, sql, NULL, NULL, NULL) == SQLITE_OK, "the host's row: %s", sqlite3_errmsg(host));
	next_upload(r, true, 1, "a host's write after the acknowledgement", false);
	/* an upload with rows says not all: the next one is asked */
	next_upload(r, true, -1, "after an upload with rows", false);

	sqlite3_free(sql);
	sqlite3_close(host);
	replica_close(r);
	remove_file(path);
}

/* filing_read: a filing's answer read in one statement, every field as sync.file writes it */
static void
filing_read(replica *r)
{
	filing_said f;

	replica_filing_read(r, "{\"filed\": 3, \"refused\": 1, \"dropped\": 2, \"waiting\": 4, \"set_aside\": 5,"
						" \"acknowledged\": 41, \"provisioning\": true, \"rows\": 9,"
						" \"reasons\": {\"dropped\": [\"not wanted\", \"b\"], \"refused\": [\"a check\"]}}", &f);
	CHECK(f.filed == 3 && f.refused == 1 && f.dropped == 2 && f.waiting == 4 && f.set_aside == 5 &&
		  f.acknowledged == 41 && f.provisioning, "a filing's counts: %lld %lld %lld %lld %lld %lld %d",
		  (long long) f.filed, (long long) f.refused, (long long) f.dropped, (long long) f.waiting,
		  (long long) f.set_aside, (long long) f.acknowledged, f.provisioning);
	CHECK(strcmp(f.dropped_reason, "not wanted") == 0 && strcmp(f.refused_reason, "a check") == 0,
		  "a filing's reasons: '%s' '%s'", f.dropped_reason, f.refused_reason);
	replica_filing_read(r, "{\"acknowledged\": 7, \"provisioning\": false}", &f);
	CHECK(f.filed == 0 && f.refused == 0 && f.set_aside == 0 && f.acknowledged == 7 && !f.provisioning &&
		  f.dropped_reason[0] == '\0' && f.refused_reason[0] == '\0', "a filing that says little: %lld %d '%s'",
		  (long long) f.acknowledged, f.provisioning, f.dropped_reason);
}

int
main(void)
{
	char		dir[] = "/tmp/ms_agent_test_XXXXXX";
	char		path[128];
	char		err[AGENT_ERROR_MAX] = "";
	tm_server	s;
	Sync__Table *schema[1];
	replica    *r;
	sqlite3    *other;
	tm_msg		m;
	uint8_t    *up = NULL;
	size_t		len = 0;
	apply_result res;

	if (mkdtemp(dir) == NULL)
		return 2;
	snprintf(path, sizeof path, "%s/replica.db", dir);
	tm_server_init(&s, 0x21, 0x51);
	r = replica_open(path, tm_replica_text(&s), err);
	if (r == NULL)
	{
		fprintf(stderr, "replica_open: %s\n", err);
		return 2;
	}
	sqlite3_trace_v2(r->db, SQLITE_TRACE_STMT, count_status, NULL);
	if (sqlite3_open(path, &other) != SQLITE_OK)
		return 2;
	sqlite3_busy_timeout(other, 5000);

	/* never known: asked */
	agrees(r, other, true, "a new file");
	agrees(r, other, false, "a new file, again");

	schema[0] = tm_table("items", "catalog", "json", "id", "id INTEGER, name TEXT");
	apply_ok(r, tm_next(&s, tm_begin(schema, 1), NULL), "the snapshot's begin");
	agrees(r, other, false, "mid-snapshot, from the apply's answer");
	apply_ok(r, tm_next(&s, NULL, tm_end("items", NULL)), "the snapshot's end");
	agrees(r, other, false, "after the snapshot, from the apply's answer");
	apply_ok(r, one_row(&s, 1), "a row");
	agrees(r, other, false, "after a row, from the apply's answer");

	/* the acknowledgement (sync_upload) changes none of it */
	CHECK(replica_upload(r, -1, &up, &len, err) == STEP_OK && up != NULL, "the acknowledgement: %s", err);
	free(up);
	agrees(r, other, false, "after the acknowledgement");

	/* another connection applies the next message (an import would): seen, and asked again */
	m = one_row(&s, 2);
	{
		sqlite3_stmt *st = NULL;

		CHECK(sqlite3_prepare_v2(other, "SELECT sync_apply(?1)", -1, &st, NULL) == SQLITE_OK &&
			  sqlite3_bind_blob(st, 1, m.data, (int) m.len, SQLITE_STATIC) == SQLITE_OK &&
			  sqlite3_step(st) == SQLITE_ROW &&
			  strstr((const char *) sqlite3_column_text(st, 0), "\"applied\"") != NULL,
			  "another connection's apply: %s", sqlite3_errmsg(other));
		sqlite3_finalize(st);
	}
	agrees(r, other, true, "after another connection applied");
	agrees(r, other, false, "after another connection applied, again");
	/* the agent goes on from there */
	m = one_row(&s, 3);
	apply_ok(r, m, "the row after");
	agrees(r, other, false, "after the row after");
	/* the same message again: a duplicate, which changes none of it */
	CHECK(replica_apply(r, m.data, m.len, &res, err) == STEP_OK && strcmp(res.result, "duplicate") == 0,
		  "a duplicate: %s %s", err, res.result);
	agrees(r, other, false, "after a duplicate");

	/* a host's write to its own table: asked again (data_version cannot tell what was written) */
	CHECK(sqlite3_exec(other, "CREATE TABLE host_own(x); INSERT INTO host_own VALUES (1)", NULL, NULL, NULL) == SQLITE_OK,
		  "the host's write: %s", sqlite3_errmsg(other));
	agrees(r, other, true, "after a host's write");

	/* an apply that fails rolls back, and what was known is asked again */
	{
		static const uint8_t junk[] = {0x0a, 0x03, 'x', 'y', 'z', 0xff};

		memset(&res, 0, sizeof res);
		CHECK(replica_apply(r, junk, sizeof junk, &res, err) != STEP_OK, "junk applied: %s", res.result);
	}
	agrees(r, other, true, "after a failed apply");

	/* a message that does not follow (a gap): not applied, what it says still agrees */
	tm_next(&s, tm_down(), NULL);
	m = one_row(&s, 5);
	CHECK(replica_apply(r, m.data, m.len, &res, err) == STEP_OK && strcmp(res.result, "gap") == 0,
		  "a gap: %s %s", err, res.result);
	agrees(r, other, false, "after a gap");

	/* the same message again: a duplicate, and what it says agrees */
	CHECK(replica_apply(r, m.data, m.len, &res, err) == STEP_OK && strcmp(res.result, "gap") == 0,
		  "the gap's message again: %s %s", err, res.result);
	agrees(r, other, false, "after the gap's message again");

	/* a state another connection made impossible: read again as what it asks for, then written back so */
	CHECK(sqlite3_exec(other, "UPDATE _sync_state SET nonce = NULL WHERE id = 1", NULL, NULL, NULL) == SQLITE_OK,
		  "the state made impossible: %s", sqlite3_errmsg(other));
	agrees(r, other, true, "after the state was made impossible");
	m = one_row(&s, 6);
	CHECK(replica_apply(r, m.data, m.len, &res, err) == STEP_OK && strcmp(res.result, "gap") == 0,
		  "a message after the state was made impossible: %s %s", err, res.result);
	agrees(r, other, false, "after the impossible state was written back");

	filing_read(r);
	said_all(dir);
	tm_free_all();
	sqlite3_close(other);
	replica_close(r);
	remove_file(path);
	rmdir(dir);
	printf("agent replica: %d passed, %d failed\n", ms_unit_passed, ms_unit_failed);
	return ms_unit_failed == 0 ? 0 : 1;
}
