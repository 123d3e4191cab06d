/*
 * test_claims.c - what a replica follows and what it says of itself
 * (docs/protocol.md 5.1, 7): generations (a message of a generation older
 * than the one the replica follows is refused, a snapshot's Begin included,
 * even of another epoch; a newer generation is never a duplicate), a Filed
 * answer of an older generation, sync_applied(), and a tampered file (an
 * impossible last applied number, a setting out of its range) that reports
 * itself and asks to be provisioned again instead of being wedged.
 *
 * The generation is field 12 of ToReplica (a varint): it is appended to the
 * messages msgs.c builds, as a server that numbers generations writes it.
 */
#include "harness.h"

#include "vectors.h"

void		test_claims(void);

/* with_generation: m with field 12 (generation g) appended */
static tm_msg
with_generation(tm_msg m, uint64_t g)
{
	tm_buf		b = {.len = 0};
	tm_msg		out;

	if (g == 0)
		return m;
	/* a plain varint (uint64), not tm_pb_int's zigzag */
	b.data[b.len++] = 12 << 3;
	for (; g >= 0x80; g >>= 7)
		b.data[b.len++] = (uint8_t) (g | 0x80);
	b.data[b.len++] = (uint8_t) g;
	out.len = m.len + b.len;
	out.data = tm_alloc(out.len);
	memcpy(out.data, m.data, m.len);
	memcpy(out.data + m.len, b.data, b.len);
	return out;
}

static tm_msg
renamed(tm_server *s, const char *id, const char *name, uint64_t generation)
{
	Sync__Down *d = tm_down();
	char		row[128];

	snprintf(row, sizeof row, "{\"id\":%s,\"name\":\"%s\",\"price\":1}", id, name);
	tm_upsert(tm_rows(d, "products"), row, -1, id, NULL);
	return with_generation(tm_next(s, d, NULL), generation);
}

/* shop_at: a replica holding the shop's snapshot, written in generation g */
static sqlite3 *
shop_at(tm_server *s, uint8_t epoch_seed, uint64_t g)
{
	sqlite3    *db = t_open(NULL);
	tm_msg		begin,
				end;
	char	   *r;

	tm_server_init(s, epoch_seed, 0x10);
	tm_shop_snapshot(s, &begin, &end);
	r = tm_apply(db, with_generation(begin, g));
	CHECK(t_has(r, "\"applied\""), "the snapshot begins: %s %s", S(r), tm_error());
	r = tm_apply(db, with_generation(end, g));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "the snapshot ends: %s %s", S(r), tm_error());
	return db;
}

/* a message of an older generation is refused, whatever it carries */
static void
older_generation(void)
{
	tm_server	s;
	sqlite3    *db = shop_at(&s, 0x20, 50);
	tm_server	saved = s;
	char	   *r;
	char	   *st;

	r = tm_apply(db, renamed(&s, "1", "old primary", 40));
	CHECK(t_has(r, "\"result\":\"older_generation\"") && t_has(r, "\"generation\":40") &&
		  t_has(r, "\"follows\":50"), "a message of generation 40 after 50 is refused: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE name = 'old primary'") == 0,
		  "nothing of it was applied");
	st = t_text(db, "SELECT sync_status()");
	CHECK(t_has(st, "\"applied\":2") && t_has(st, "generation 40") && t_has(st, "older"),
		  "the last applied stays, and last_error says why: %s", S(st));
	sqlite3_free(st);
	/* the chain goes on in the generation it follows */
	s = saved;
	r = tm_apply(db, renamed(&s, "1", "current", 50));
	CHECK(t_has(r, "\"result\":\"applied\""), "a message of the generation it follows applies: %s %s",
		  S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM products WHERE name = 'current'") == 1, "and its row is there");
	sqlite3_close(db);
}

/*
 * A stale snapshot replayed (an old primary's, or one of an epoch that
 * ended) never takes the replica back in time: its Begin is refused.
 */
static void
stale_snapshot(void)
{
	tm_server	s;
	tm_server	old;
	tm_msg		begin,
				end;
	sqlite3    *db = shop_at(&s, 0x20, 50);
	char	   *r;

	/* the same epoch's snapshot, numbered later, of an older generation */
	tm_server_init(&old, 0x20, 0x10);
	old.number = 100;
	tm_shop_snapshot(&old, &begin, &end);
	r = tm_apply(db, with_generation(begin, 49));
	CHECK(t_has(r, "\"result\":\"older_generation\""), "an older generation's Begin is refused: %s %s",
		  S(r), tm_error());
	CHECK(t_int(db, "SELECT snapshot IS NULL OR snapshot = 0 FROM _sync_state") == 1, "no snapshot opened");
	/* another epoch's, of an older generation: the epoch is no reason to take it */
	tm_server_init(&old, 0x60, 0x10);
	tm_shop_snapshot(&old, &begin, &end);
	r = tm_apply(db, with_generation(begin, 10));
	CHECK(t_has(r, "\"result\":\"older_generation\""), "another epoch's older Begin is refused: %s %s",
		  S(r), tm_error());
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"epoch\":\"202122232425262728292a2b2c2d2e2f\""), "the replica follows its epoch still: %s", S(r));
	sqlite3_free(r);
	/* a message written before generations were numbered is of generation 0 */
	r = tm_apply(db, renamed(&s, "2", "before generations", 0));
	CHECK(t_has(r, "\"result\":\"older_generation\""), "generation 0 after 50 is refused: %s", S(r));
	sqlite3_close(db);
}

/*
 * A newer generation (a standby promoted, a new epoch) is a newer position,
 * whatever its number: its snapshot applies even numbered at or below the
 * last applied, and the replica follows it from then on.
 */
static void
newer_generation(void)
{
	tm_server	s;
	tm_server	promoted;
	tm_msg		begin,
				end;
	sqlite3    *db = shop_at(&s, 0x20, 50);
	char	   *r;
	char	   *st;

	r = tm_apply(db, renamed(&s, "1", "next", 60));
	CHECK(t_has(r, "\"result\":\"applied\""), "a newer generation that follows the chain applies: %s %s",
		  S(r), tm_error());
	st = t_text(db, "SELECT sync_status()");
	CHECK(t_has(st, "\"generation\":60"), "and the replica follows it: %s", S(st));
	sqlite3_free(st);
	r = tm_apply(db, renamed(&s, "1", "back", 50));
	CHECK(t_has(r, "\"result\":\"older_generation\""), "generation 50 is older now: %s", S(r));

	/* the promoted standby numbers again from where its copy left off */
	tm_server_init(&promoted, 0x20, 0x10);
	promoted.number = 1;
	tm_shop_snapshot(&promoted, &begin, &end);
	r = tm_apply(db, with_generation(begin, 70));
	CHECK(t_has(r, "\"result\":\"applied\"") && t_has(r, "\"snapshot\":\"begin\""),
		  "a newer generation's Begin numbered 2, below the last applied (3), is no duplicate: %s %s",
		  S(r), tm_error());
	r = tm_apply(db, with_generation(end, 70));
	CHECK(t_has(r, "\"snapshot\":\"end\""), "its snapshot ends: %s", S(r));
	CHECK(t_int(db, "SELECT number FROM _sync_state") == 3 &&
		  t_int(db, "SELECT generation FROM _sync_state") == 70,
		  "the replica follows (70, 3)");
	r = tm_apply(db, with_generation(end, 70));
	CHECK(t_has(r, "\"result\":\"duplicate\""), "within a generation, numbers still order: %s", S(r));
	sqlite3_close(db);
}

/* a Filed answer of an older generation lets go of nothing */
static void
older_filed(void)
{
	tm_server	s;
	sqlite3    *db = shop_at(&s, 0x20, 50);
	uint8_t		send[16] = {1, 2, 3};
	char	   *r;

	r = tm_apply(db, with_generation(tm_filed_msg(&s, tm_filed(send, 0)), 40));
	CHECK(t_has(r, "\"result\":\"older_generation\""), "an old primary's answer is refused: %s %s",
		  S(r), tm_error());
	r = tm_apply(db, with_generation(tm_filed_msg(&s, tm_filed(send, 0)), 50));
	CHECK(t_has(r, "\"result\":\"filed\""), "the current generation's is taken: %s %s", S(r), tm_error());
	sqlite3_close(db);
}

static bool
read_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; *i < n && shift < 64; shift += 7)
	{
		uint8_t		b = p[(*i)++];

		*v |= (uint64_t) (b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* the varint of field `field` in protobuf bytes, 0 when absent (read by hand, as a replica of an earlier build would not) */
static uint64_t
varint_field(const uint8_t *p, size_t n, uint32_t field)
{
	size_t		i = 0;
	uint64_t	tag,
				v;

	while (read_varint(p, n, &i, &tag) && read_varint(p, n, &i, &v))
	{
		if ((tag & 7) == 0 && (tag >> 3) == field)
			return v;
		if ((tag & 7) == 2)
			i += (size_t) v;
		else if ((tag & 7) != 0)
			return 0;
	}
	return 0;
}

/* sync_applied(): the Applied an upload carries, for sync.pull's claim */
static void
applied_blob(void)
{
	tm_server	s;
	sqlite3    *db = t_open(NULL);
	sqlite3_stmt *st;
	Sync__Applied *a = NULL;

	CHECK(t_int(db, "SELECT length(sync_applied()) = 0 AND typeof(sync_applied()) = 'blob'") == 1,
		  "a blank file has applied nothing: an empty Applied");
	sqlite3_close(db);
	db = shop_at(&s, 0x20, 50);
	if (sqlite3_prepare_v2(db, "SELECT sync_applied()", -1, &st, NULL) == SQLITE_OK &&
		sqlite3_step(st) == SQLITE_ROW)
		a = sync__applied__unpack(NULL, (size_t) sqlite3_column_bytes(st, 0), sqlite3_column_blob(st, 0));
	CHECK(a != NULL, "sync_applied() is an Applied: %s", sqlite3_errmsg(db));
	if (a != NULL)
	{
		uint64_t	g = varint_field(sqlite3_column_blob(st, 0), (size_t) sqlite3_column_bytes(st, 0), 5);

		CHECK(a->number == 2 && g == 50, "its number and generation (field 5): %llu %llu",
			  (unsigned long long) a->number, (unsigned long long) g);
		CHECK(a->epoch.len == 16 && memcmp(a->epoch.data, s.epoch, 16) == 0, "its epoch");
		CHECK(a->nonce.len == 16 && memcmp(a->nonce.data, s.nonce, 16) == 0, "its nonce");
		CHECK(a->seal.len == 32, "its seal");
		sync__applied__free_unpacked(a, NULL);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/* the upload of a replica: its applied number and gap */
static void
upload_says(sqlite3 *db, uint64_t *number, uint64_t *gap)
{
	tm_msg		m = tm_upload(db);
	Sync__Up   *up = m.data ? sync__up__unpack(NULL, m.len, m.data) : NULL;

	*number = *gap = UINT64_MAX;
	if (up == NULL)
		return;
	*number = up->applied ? up->applied->number : 0;
	*gap = up->gap;
	sync__up__free_unpacked(up, NULL);
}

/*
 * A last applied number of -1 made every message a duplicate for good: it
 * is impossible, reported, and the replica asks to be provisioned again.
 */
static void
tampered_number(void)
{
	tm_server	s;
	sqlite3    *db = shop_at(&s, 0x20, 0);
	tm_server	again;
	tm_msg		begin,
				end;
	uint64_t	number,
				gap;
	char	   *r;
	char	   *st;

	t_exec(db, "UPDATE _sync_state SET number = -1", NULL);
	st = t_text(db, "SELECT sync_status()");
	CHECK(t_has(st, "\"applied\":0"), "an impossible number reads as nothing applied: %s", S(st));
	sqlite3_free(st);
	upload_says(db, &number, &gap);
	CHECK(number == 0 && gap > 0, "its upload claims nothing and reports a gap, asking for a snapshot:"
		  " applied %llu, gap %llu (%s)", (unsigned long long) number, (unsigned long long) gap, tm_error());
	st = t_text(db, "SELECT sync_status()");
	CHECK(t_has(st, "impossible"), "last_error says the state was impossible: %s", S(st));
	sqlite3_free(st);
	r = tm_apply(db, renamed(&s, "1", "next", 0));
	CHECK(t_has(r, "\"result\":\"gap\""), "a message that does not begin a snapshot waits for one: %s %s",
		  S(r), tm_error());
	/* the server's snapshot: applied, and the state is whole again */
	again = s;
	tm_shop_snapshot(&again, &begin, &end);
	r = tm_apply(db, begin);
	CHECK(t_has(r, "\"result\":\"applied\""), "the snapshot applies: %s %s", S(r), tm_error());
	r = tm_apply(db, end);
	CHECK(t_has(r, "\"snapshot\":\"end\""), "and ends: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT number FROM _sync_state") == (long long) again.number && t_int(db, "SELECT gap FROM _sync_state") == 0,
		  "the replica follows the snapshot, no gap");
	sqlite3_close(db);
}

/* a setting out of its range refused every message: reported, and set right */
static void
tampered_config(void)
{
	tm_server	s;
	sqlite3    *db = shop_at(&s, 0x20, 0);
	char	   *r;
	char	   *st;

	t_exec(db, "INSERT OR REPLACE INTO _sync_config VALUES ('max_message_bytes', -5)", NULL);
	r = tm_apply(db, renamed(&s, "1", "next", 0));
	CHECK(r != NULL, "a negative max_message_bytes does not refuse every message: %s", tm_error());
	CHECK(t_has(r, "\"result\":\"gap\""), "the replica asks to be provisioned again: %s", S(r));
	st = t_text(db, "SELECT sync_status()");
	CHECK(t_has(st, "max_message_bytes") && t_has(st, "impossible"), "last_error says which setting: %s", S(st));
	sqlite3_free(st);
	CHECK(t_int(db, "SELECT sync_config('max_message_bytes')") == (64LL << 20),
		  "the setting is back to its default");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_config WHERE value < 0") == 0, "the bad value is gone");
	sqlite3_close(db);
}

/* a file made before generations were numbered takes them */
static void
old_file(void)
{
	tm_server	s;
	sqlite3    *db = shop_at(&s, 0x20, 0);
	char	   *r;

	CHECK(t_exec(db, "ALTER TABLE _sync_state DROP COLUMN generation", NULL) == SQLITE_OK,
		  "a file of an earlier build: no generation column");
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"applied\":2"), "its status reads: %s", S(r));
	sqlite3_free(r);
	r = tm_apply(db, renamed(&s, "1", "next", 50));
	CHECK(t_has(r, "\"result\":\"applied\""), "a message of a numbered generation applies: %s %s",
		  S(r), tm_error());
	CHECK(t_int(db, "SELECT generation FROM _sync_state") == 50, "and the file follows it");
	sqlite3_close(db);
}

/*
 * what another connection changed in the file's schema is seen by this
 * one's next call: the replica reads its tables' columns from the schema
 * SQLite holds (util.c, schema.c), never from one older than the file's
 */
static void
other_connection(void)
{
	const char *path = t_path("claims_other.db");
	tm_server	s;
	tm_msg		begin,
				end;
	sqlite3    *db;
	sqlite3    *other;
	char	   *r;

	remove(path);
	db = t_open(path);
	tm_server_init(&s, 0x20, 0x10);
	tm_shop_snapshot(&s, &begin, &end);
	tm_apply(db, begin);
	r = tm_apply(db, end);
	CHECK(t_has(r, "\"snapshot\":\"end\""), "the snapshot ends: %s %s", S(r), tm_error());
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"applied\":2") && t_has(r, "\"tables\":4"), "its status, read once: %s", S(r));
	sqlite3_free(r);
	r = t_text(db, "SELECT sync_progress() ->> '$.customers.not_held'");
	CHECK(r == NULL, "customers is held: %s", S(r));
	sqlite3_free(r);

	other = t_open(path);
	CHECK(t_exec(other, "ALTER TABLE _sync_state DROP COLUMN generation", NULL) == SQLITE_OK &&
		  t_exec(other, "DROP TABLE customers", NULL) == SQLITE_OK,
		  "another connection drops a column of the state and a table");
	r = t_text(db, "SELECT sync_status()");
	CHECK(t_has(r, "\"applied\":2") && t_has(r, "\"generation\":0"),
		  "the state reads without the column: %s", S(r));
	sqlite3_free(r);
	r = t_text(db, "SELECT sync_progress() ->> '$.customers.not_held'");
	CHECK(t_has(r, "customers"), "the table is not held: %s", S(r));
	sqlite3_free(r);
	r = tm_apply(db, renamed(&s, "1", "next", 50));
	CHECK(t_has(r, "\"result\":\"applied\""), "a message applies: %s %s", S(r), tm_error());
	CHECK(t_int(db, "SELECT generation FROM _sync_state") == 50, "the column made again, the file follows it");
	CHECK(t_int(other, "SELECT generation FROM _sync_state") == 50, "as the other connection sees");
	sqlite3_close(other);
	sqlite3_close(db);
	remove(path);
}

void
test_claims(void)
{
	older_generation();
	stale_snapshot();
	newer_generation();
	older_filed();
	applied_blob();
	tampered_number();
	tampered_config();
	old_file();
	other_connection();
}
