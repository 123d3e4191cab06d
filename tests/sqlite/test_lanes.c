/*
 * test_lanes.c - lanes (docs/protocol.md 7.2, src/sqlite/lanes.c): a
 * table's Table puts it in a lane, by a snapshot or a schema change; each
 * lane uploads only its tables' rows and numbers its sends on its own; the
 * first lane says what the engine says (backlog, gap, refusals, digests);
 * an answer of one lane never moves another's numbers; a lane's name is
 * checked wherever it comes from (the server's Table and Filed, the host's
 * argument).
 */
#include "harness.h"

void		test_lanes(void);

static Sync__Up *decoded[32];
static int	ndecoded;

static Sync__Up *
decode(tm_msg m, const char *what)
{
	ms_wire_status status;
	char		reason[MS_REASON_MAX] = "";
	Sync__Up   *u = m.data ? ms_up_decode(m.data, m.len, 1 << 30, NULL, &status, reason) : NULL;

	CHECK(u != NULL, "%s: the upload decodes: %s %s", what, reason, tm_error());
	if (u != NULL && ndecoded < (int) (sizeof decoded / sizeof decoded[0]))
		decoded[ndecoded++] = u;
	return u;
}

/* sync_upload(max_rows, lane), NULL rows when max_rows < 0: its bytes (tm-owned), {NULL, 0} when NULL or an error */
static tm_msg
lane_upload_some(sqlite3 *db, int max_rows, const char *lane)
{
	sqlite3_stmt *st;
	tm_msg		m = {NULL, 0};

	sqlite3_prepare_v2(db, "SELECT sync_upload(?1, ?2)", -1, &st, NULL);
	if (max_rows < 0)
		sqlite3_bind_null(st, 1);
	else
		sqlite3_bind_int(st, 1, max_rows);
	sqlite3_bind_text(st, 2, lane, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_BLOB)
	{
		m.len = (size_t) sqlite3_column_bytes(st, 0);
		m.data = tm_alloc(m.len);
		memcpy(m.data, sqlite3_column_blob(st, 0), m.len);
	}
	sqlite3_finalize(st);
	return m;
}

/* sync_upload(NULL, lane) */
static tm_msg
lane_upload(sqlite3 *db, const char *lane)
{
	return lane_upload_some(db, -1, lane);
}

/* sync_upload_refused(m, reason, blame): its answer (free with sqlite3_free), NULL on an error */
static char *
refuse(sqlite3 *db, tm_msg m, int blame)
{
	sqlite3_stmt *st;
	char	   *r = NULL;

	sqlite3_prepare_v2(db, "SELECT sync_upload_refused(?1, 'too large for the server: over upload_bytes', ?2)",
					   -1, &st, NULL);
	sqlite3_bind_blob(st, 1, m.data, (int) m.len, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, blame);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_TEXT)
		r = sqlite3_mprintf("%s", (const char *) sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return r;
}

static size_t
rows_of(const Sync__Up *u, const char *table)
{
	for (size_t i = 0; u && i < u->n_rows; i++)
		if (strcmp(u->rows[i]->table, table) == 0)
			return u->rows[i]->n_upserts + u->rows[i]->n_deletes;
	return 0;
}

static void
exec_mine(sqlite3 *db, const tm_server *s, const char *fmt, int id)
{
	char	   *sql = sqlite3_mprintf(fmt, tm_replica_text(s), id);
	char	   *err = NULL;

	CHECK(t_exec(db, sql, &err) == SQLITE_OK, "%s: %s", sql, S(err));
	sqlite3_free(err);
	sqlite3_free(sql);
}

/* the shop, and then a schema change that puts sales in lane "sales" */
static sqlite3 *
laned_shop(tm_server *s)
{
	sqlite3    *db = t_shop(s);
	Sync__Table *schema[4];
	Sync__Down *d = tm_down();
	char	   *r;

	tm_shop(schema);
	schema[3]->lane = tm_strdup("sales");
	tm_change(d, schema[3]);
	r = tm_apply(db, tm_next(s, d, NULL));
	CHECK(t_has(r, "\"applied\"") && t_has(r, "\"schema\":{\"changed\":1"),
		  "a schema change moves sales to lane sales: %s %s", S(r), tm_error());
	return db;
}

/* each lane uploads its tables' rows, numbered on its own; the first says what the engine says */
static void
numbering(void)
{
	tm_server	s;
	sqlite3    *db = laned_shop(&s);
	Sync__Up   *first;
	Sync__Up   *lane;
	Sync__Up   *again;
	char	   *r;

	r = t_text(db, "SELECT sync_lanes()");
	CHECK(t_has(r, "{\"lane\":\"\",\"last_seq\":") && t_has(r, "\"tables\":[\"products\",\"orders\"]}") &&
		  t_has(r, "{\"lane\":\"sales\",\"last_seq\":0,\"tables\":[\"sales\"]}"),
		  "sync_lanes: the first lane, then sales: %s", S(r));
	sqlite3_free(r);
	tm_upload(db);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', %d, 1, 1, NULL)", 1);
	exec_mine(db, &s, "INSERT INTO sales(origin, id, product, qty) VALUES ('%s', %d, 1, 2)", 1);
	first = decode(tm_upload(db), "the first lane");
	CHECK(first && rows_of(first, "orders") == 1 && rows_of(first, "sales") == 0 && first->lane[0] == '\0' &&
		  first->n_backlog > 0, "the first lane carries orders and the backlog, not sales");
	lane = decode(lane_upload(db, "sales"), "lane sales");
	CHECK(lane && rows_of(lane, "sales") == 1 && rows_of(lane, "orders") == 0 && strcmp(lane->lane, "sales") == 0,
		  "lane sales carries sales only, and says its lane");
	CHECK(lane && lane->n_backlog == 0 && lane->n_digests == 0 && lane->n_refusals == 0 && lane->gap == 0 &&
		  lane->applied != NULL && lane->applied->number == s.number,
		  "another lane says nothing of the engine's but the message it applied");
	CHECK(lane && first && t_int(db, "SELECT last FROM _sync_seq") == (long long) first->seq &&
		  t_int(db, "SELECT last FROM _sync_lane_seq WHERE lane = 'sales'") == (long long) lane->seq,
		  "each lane records its own last number");
	CHECK(lane_upload(db, "sales").data == NULL, "nothing more to say in lane sales");
	CHECK(lane_upload(db, "spare").data == NULL, "a lane no table is in has nothing to say");
	exec_mine(db, &s, "INSERT INTO sales(origin, id, product, qty) VALUES ('%s', %d, 1, 3)", 2);
	again = decode(lane_upload(db, "sales"), "lane sales again");
	CHECK(again && lane && again->seq > lane->seq && rows_of(again, "sales") == 1 &&
		  t_int(db, "SELECT last FROM _sync_seq") == (long long) first->seq,
		  "a lane's send numbers move on; the first lane's stay");

	/* an answer of lane sales lets go of its rows; the first lane's, lost, keep theirs stamped */
	r = tm_apply(db, tm_filed_msg(&s, tm_filed_all(lane)));
	CHECK(t_has(r, "\"notes\":1") &&
		  t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'orders' AND send_id IS NOT NULL") == 1 &&
		  t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'sales'") == 1,
		  "lane sales' answer lets go of its row only: %s", S(r));

	/* a duplicate of lane sales numbers that lane beyond last_seq, and no other */
	{
		Sync__Filed *f = tm_filed(again->send_id.data, 0);
		Sync__Up   *next;

		f->duplicate = 1;
		f->last_seq = UINT64_C(8000000000000000000);
		f->lane = tm_strdup("sales");
		r = tm_apply(db, tm_filed_msg(&s, f));
		CHECK(t_has(r, "\"ours\":true") && t_has(r, "\"lane\":\"sales\"") &&
			  t_int(db, "SELECT last FROM _sync_lane_seq WHERE lane = 'sales'") == INT64_C(8000000000000000000) &&
			  t_int(db, "SELECT last FROM _sync_seq") == (long long) first->seq,
			  "a duplicate of lane sales moves its numbers only: %s", S(r));
		next = decode(lane_upload(db, "sales"), "numbered beyond");
		CHECK(next && next->seq == UINT64_C(8000000000000000001) && rows_of(next, "sales") == 1,
			  "lane sales numbers beyond the last filed of it, its row again");
		exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', %d, 1, 1, NULL)", 2);
		next = decode(tm_upload(db), "the first lane after");
		CHECK(next && next->seq < UINT64_C(8000000000000000000) && next->seq > first->seq,
			  "the first lane numbers on from its own last");
	}
	sqlite3_close(db);
}

/*
 * narrowing down in a lane other than the first (docs/protocol.md 7,
 * "Narrowing down"): sync_upload(max_rows, lane) carries at most max_rows of
 * the lane's rows; a refused one's rows go again at once, or, blamed, are set
 * aside alone, counted in the backlog; sync_upload(0, lane) is the lane's
 * control; no other lane's rows or numbers are touched
 */
static void
narrowing(void)
{
	tm_server	s;
	sqlite3    *db = laned_shop(&s);
	long long	first_seq;
	Sync__Up   *u;
	tm_msg		m;
	char	   *r;

	tm_upload(db);
	first_seq = t_int(db, "SELECT last FROM _sync_seq");
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', %d, 1, 1, NULL)", 1);
	for (int i = 1; i <= 4; i++)
		exec_mine(db, &s, "INSERT INTO sales(origin, id, product, qty) VALUES ('%s', %d, 1, 2)", i);
	m = lane_upload_some(db, 2, "sales");
	u = decode(m, "lane sales, two rows at most");
	CHECK(u && rows_of(u, "sales") == 2 && rows_of(u, "orders") == 0 && strcmp(u->lane, "sales") == 0 &&
		  u->n_backlog == 0 && u->n_digests == 0 && u->n_refusals == 0,
		  "sync_upload(2, 'sales'): two sales, in lane sales, nothing of the engine's");
	CHECK(u && t_int(db, "SELECT last FROM _sync_lane_seq WHERE lane = 'sales'") == (long long) u->seq &&
		  t_int(db, "SELECT last FROM _sync_seq") == first_seq, "numbered in lane sales only");
	r = refuse(db, m, 0);
	CHECK(r && t_has(r, "\"rows\":2") && t_has(r, "\"set_aside\":0"), "refused: its two rows go again: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'sales' AND send_id IS NULL") == 4,
		  "all four sales unsent");
	m = lane_upload_some(db, 1, "sales");
	u = decode(m, "lane sales, one row");
	CHECK(u && rows_of(u, "sales") == 1, "sync_upload(1, 'sales'): one sale");
	r = refuse(db, m, 1);
	CHECK(r && t_has(r, "\"set_aside\":1"), "blamed: the one sale set aside: %s", S(r));
	sqlite3_free(r);
	CHECK(t_int(db, "SELECT count(*) FROM _sync_notes WHERE set_aside IS NOT NULL") == 1 &&
		  t_int(db, "SELECT count(*) FROM _sync_notes WHERE tbl = 'sales' AND set_aside ="
				" 'too large for the server: over upload_bytes'") == 1,
		  "that sale alone, with the reason");
	r = t_text(db, "SELECT json_extract(sync_progress(), '$.sales.set_aside') || ',' ||"
			   " json_extract(sync_progress(), '$.orders.set_aside') || ',' || json_extract(sync_progress(), '$.orders.unsent')");
	CHECK(r && strcmp(r, "1,0,1") == 0, "counted in sales' backlog; the first lane's order untouched: %s", S(r));
	sqlite3_free(r);

	/* the control: the lane says something with no rows; then the rest of the lane, not the one set aside */
	m = lane_upload_some(db, 0, "sales");
	u = decode(m, "lane sales' control");
	CHECK(u && u->n_rows == 0 && strcmp(u->lane, "sales") == 0, "sync_upload(0, 'sales'): no rows, in lane sales");
	m = lane_upload(db, "sales");
	u = decode(m, "the rest of lane sales");
	CHECK(u && rows_of(u, "sales") == 3 && rows_of(u, "orders") == 0, "the other three sales go, the one set aside not");
	CHECK(lane_upload(db, "sales").data == NULL, "then lane sales has nothing to say");
	u = decode(tm_upload(db), "the first lane");
	CHECK(u && rows_of(u, "orders") == 1 && rows_of(u, "sales") == 0 && (long long) u->seq > first_seq,
		  "the first lane carries its order, numbered on from its own last");
	{
		long long	aside = -1;

		for (size_t i = 0; u && i < u->n_backlog; i++)
			if (strcmp(u->backlog[i]->table, "sales") == 0)
				aside = (long long) u->backlog[i]->set_aside;
		CHECK(aside == 1, "the first lane's backlog says the sale set aside: %lld", aside);
	}
	sqlite3_close(db);
}

/* a replica with no lanes uploads as before: no lane said, everything in one */
static void
unlaned(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Up   *u;
	char	   *r;

	r = t_text(db, "SELECT sync_lanes()");
	CHECK(r && !t_has(r, "\"lane\":\"sales\"") && t_has(r, "\"tables\":[\"products\",\"orders\",\"sales\"]"),
		  "one lane: %s", S(r));
	sqlite3_free(r);
	tm_upload(db);
	exec_mine(db, &s, "INSERT INTO orders VALUES ('%s', %d, 1, 1, NULL)", 1);
	exec_mine(db, &s, "INSERT INTO sales(origin, id, product, qty) VALUES ('%s', %d, 1, 2)", 1);
	u = decode(tm_upload(db), "one lane");
	CHECK(u && rows_of(u, "orders") == 1 && rows_of(u, "sales") == 1 && u->lane[0] == '\0',
		  "sync_upload() carries every table's rows, in no lane");
	CHECK(t_int(db, "SELECT count(*) FROM sqlite_master WHERE name = '_sync_lane_seq'") == 0,
		  "no lane table made for the first lane");
	CHECK(lane_upload(db, "").data == NULL, "sync_upload(NULL, '') is the first lane: nothing more to say");
	sqlite3_close(db);
}

/* untrusted lane names: the server's Table and Filed, refused whole, changing nothing */
static void
untrusted(void)
{
	static const char *const bad[] = {"Sales", "sales lane", "9lanes", "caf\xc3\xa9", "_x",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
	tm_server	s;
	sqlite3    *db = t_shop(&s);

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
	{
		Sync__Table *schema[4];
		Sync__Down *d = tm_down();
		uint64_t	before = tm_checksum(db, 1);
		uint64_t	number = s.number;
		uint8_t		nonce[16];
		char	   *r;
		Sync__Filed *f;
		uint8_t		id[16] = {9};

		memcpy(nonce, s.nonce, sizeof nonce);
		tm_shop(schema);
		schema[3]->lane = tm_strdup(bad[i]);
		tm_change(d, schema[3]);
		r = tm_apply(db, tm_next(&s, d, NULL));
		CHECK(r == NULL && t_has(tm_error(), "lane") && tm_checksum(db, 1) == before,
			  "a Table of lane \"%s\" is refused, changing nothing: %s %s", bad[i], S(r), tm_error());
		/* not applied: the chain goes on from the last applied */
		s.number = number;
		memcpy(s.nonce, nonce, sizeof nonce);
		f = tm_filed(id, 0);
		f->lane = tm_strdup(bad[i]);
		r = tm_apply(db, tm_filed_msg(&s, f));
		CHECK(r == NULL && t_has(tm_error(), "lane") && tm_checksum(db, 1) == before,
			  "a Filed of lane \"%s\" is refused, changing nothing: %s %s", bad[i], S(r), tm_error());
	}
	sqlite3_close(db);
}

void
test_lanes(void)
{
	numbering();
	narrowing();
	unlaned();
	untrusted();
	for (int i = 0; i < ndecoded; i++)
		sync__up__free_unpacked(decoded[i], NULL);
	ndecoded = 0;
}
