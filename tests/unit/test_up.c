/*
 * test_up.c - what an upload is on the wire, as src/shared writes and reads
 * it: its length and check (upcheck.c, the vector of docs/protocol.md 10),
 * read a piece at a time (upread.c, with every check ms_up_decode makes),
 * key parts spelled as their types print them (canon.c), and whether the
 * replica waits on its answer (upanswer.c).
 */
#include <stdlib.h>
#include <string.h>

#include "canon.h"
#include "check.h"
#include "fields.h"
#include "upanswer.h"
#include "upcheck.h"
#include "upread.h"
#include "vectors.h"
#include "wire.h"

/* up, framed as a replica packs it, into buf: its bytes */
static size_t
pack_framed(Sync__Up *up, uint8_t *buf)
{
	size_t		n = sync__up__get_packed_size(up) + MS_UP_FRAME;

	sync__up__pack(up, buf + MS_UP_LENGTH_FIELD);
	CHECK(ms_up_close(buf, n), "the frame is written");
	return n;
}

/* the vector Up, as a replica packs one: its fields, then the frame */
static size_t
pack_vector_up(uint8_t *out)
{
	Sync__Up	up = SYNC__UP__INIT;
	Sync__Rows	rows = SYNC__ROWS__INIT;
	Sync__Rows *list[1] = {&rows};
	Sync__Key	key = SYNC__KEY__INIT;
	Sync__Key  *keys[1] = {&key};
	char	   *parts[1] = {"7"};
	ProtobufCBinaryData row = {8, (uint8_t *) "{\"id\":7}"};

	key.n_parts = 1;
	key.parts = parts;
	rows.table = "orders";
	rows.n_upserts = 1;
	rows.upserts = &row;
	rows.n_keys = 1;
	rows.keys = keys;
	up.protocol = MS_PROTOCOL;
	up.replica.data = (uint8_t *) ms_vector_replica;
	up.replica.len = 16;
	up.send_id.data = (uint8_t *) ms_vector_send_id;
	up.send_id.len = 16;
	up.n_rows = 1;
	up.rows = list;
	up.seq = ms_vector_seq;
	return pack_framed(&up, out);
}

/*
 * the lane vector (docs/protocol.md 7.2): a replica's Up of lane "till",
 * packed as sync_upload(NULL, 'till') packs it, reads back with its lane;
 * a lane that is no lane's name makes no Up
 */
static void
test_lane_vector(void)
{
	Sync__Up	up = SYNC__UP__INIT;
	Sync__Rows	rows = SYNC__ROWS__INIT;
	Sync__Rows *list[1] = {&rows};
	Sync__Key	key = SYNC__KEY__INIT;
	Sync__Key  *keys[1] = {&key};
	char	   *parts[1] = {"8"};
	ProtobufCBinaryData row = {8, (uint8_t *) "{\"id\":8}"};
	uint8_t		buf[512];
	uint8_t		want[512];
	char		hex[1025];
	char		reason[MS_REASON_MAX] = "";
	ms_wire_status status;
	Sync__Up   *back;
	size_t		n;
	long		wn = ms_hex_decode(ms_vector_up_lane_hex, want, sizeof want);

	key.n_parts = 1;
	key.parts = parts;
	rows.table = "sales";
	rows.n_upserts = 1;
	rows.upserts = &row;
	rows.n_keys = 1;
	rows.keys = keys;
	up.protocol = MS_PROTOCOL;
	up.replica.data = (uint8_t *) ms_vector_replica;
	up.replica.len = 16;
	up.send_id.data = (uint8_t *) ms_vector_send_id;
	up.send_id.len = 16;
	up.n_rows = 1;
	up.rows = list;
	up.seq = ms_vector_seq + 1;
	up.lane = "till";
	n = sync__up__get_packed_size(&up) + MS_UP_FRAME;
	sync__up__pack(&up, buf + MS_UP_LENGTH_FIELD);
	CHECK(ms_up_close(buf, n), "the lane Up's frame is written");
	ms_hex_encode(buf, n, hex);
	CHECK(wn == (long) n && memcmp(buf, want, n) == 0, "the lane vector Up: %s", hex);
	CHECK(ms_up_verify(buf, n, reason), "it is whole: %s", reason);
	back = ms_up_read(buf, n, 1 << 20, &ms_test_allocator, &status, reason);
	CHECK(back != NULL && strcmp(back->lane, "till") == 0 && back->seq == ms_vector_seq + 1,
		  "it reads back with its lane and number: %s", reason);
	if (back)
		sync__up__free_unpacked(back, &ms_test_allocator);
	up.lane = "Till";
	n = sync__up__get_packed_size(&up) + MS_UP_FRAME;
	sync__up__pack(&up, buf + MS_UP_LENGTH_FIELD);
	CHECK(ms_up_close(buf, n), "the frame is written");
	back = ms_up_read(buf, n, 1 << 20, &ms_test_allocator, &status, reason);
	CHECK(back == NULL && strstr(reason, "lower-case letter") != NULL, "a lane that is no lane's name is refused: %s", reason);
	if (back)
		sync__up__free_unpacked(back, &ms_test_allocator);
}

static void
test_check(void)
{
	uint8_t		buf[512];
	uint8_t		want[512];
	char		hex[1025];
	char		reason[MS_REASON_MAX];
	size_t		n = pack_vector_up(buf);
	long		wn = ms_hex_decode(ms_vector_up_hex, want, sizeof want);
	int			whole = 0;

	ms_hex_encode(buf, n, hex);
	CHECK(wn == (long) n && memcmp(buf, want, n) == 0, "the vector Up: %s", hex);
	CHECK(ms_up_verify(buf, n, reason), "it is whole: %s", reason);
	for (size_t k = 0; k < n; k++)
		whole += ms_up_verify(buf, k, reason);
	CHECK(whole == 0, "no prefix of it is whole (%d)", whole);
	CHECK(!ms_up_verify(buf, 38, reason) && strstr(reason, "cut short") != NULL, "38 bytes are cut short: %s", reason);
	for (size_t k = 0; k < n; k++)
		for (int bit = 0; bit < 8; bit++)
		{
			buf[k] ^= (uint8_t) (1 << bit);
			whole += ms_up_verify(buf, n, reason);
			buf[k] ^= (uint8_t) (1 << bit);
		}
	CHECK(whole == 0, "no flipped bit leaves it whole (%d)", whole);
	buf[40] ^= 1;
	CHECK(!ms_up_verify(buf, n, reason) && strstr(reason, "damaged") != NULL, "a flipped bit is damage: %s", reason);
	buf[40] ^= 1;
	/* joined to other bytes, or with the check elsewhere than last */
	memcpy(want, buf, n);
	want[n] = 0x08;
	want[n + 1] = 0x01;
	CHECK(!ms_up_verify(want, n + 2, reason) && strstr(reason, "joined") != NULL, "bytes after it: %s", reason);
	CHECK(!ms_up_verify(buf + MS_UP_LENGTH_FIELD, n - MS_UP_LENGTH_FIELD, reason) &&
		  strstr(reason, "does not say its length") != NULL, "without its length: %s", reason);
	/* and it decodes as an Up, its length and check among its fields */
	{
		ms_wire_status st;
		Sync__Up   *u = ms_up_decode(buf, n, 1 << 20, &ms_test_allocator, &st, reason);

		CHECK(u != NULL && u->seq == ms_vector_seq && u->length == n && u->check.len == 32,
			  "it decodes: %s", reason);
		if (u)
			sync__up__free_unpacked(u, &ms_test_allocator);
	}
}

/* ms_up_read's answer for bytes, compared with ms_up_decode's */
static bool
reads(const uint8_t *buf, size_t n, char reason[MS_REASON_MAX])
{
	ms_wire_status st;
	char		r2[MS_REASON_MAX];
	Sync__Up   *u = ms_up_read(buf, n, 1 << 20, &ms_test_allocator, &st, reason);
	Sync__Up   *v = ms_up_decode(buf, n, 1 << 20, &ms_test_allocator, &st, r2);
	bool		ok = u != NULL;

	/* they agree, but for a key part with a NUL (refused here only) */
	CHECK((u != NULL) == (v != NULL) || strstr(reason, "NUL") != NULL,
		  "ms_up_read and ms_up_decode agree: %s / %s", reason, r2);
	if (u)
		sync__up__free_unpacked(u, &ms_test_allocator);
	if (v)
		sync__up__free_unpacked(v, &ms_test_allocator);
	return ok;
}

static size_t
field(uint8_t *out, uint32_t number, const void *p, size_t n)
{
	size_t		k = 0;
	uint64_t	tag = (uint64_t) number << 3 | 2;

	while (tag >= 0x80)
	{
		out[k++] = (uint8_t) (tag | 0x80);
		tag >>= 7;
	}
	out[k++] = (uint8_t) tag;
	out[k++] = (uint8_t) n;		/* the tests' fields are short */
	memcpy(out + k, p, n);
	return k + n;
}

static void
test_read(void)
{
	uint8_t		up[512];
	uint8_t		rows[256];
	uint8_t		key[64];
	size_t		n = pack_vector_up(up);
	size_t		rn = 0;
	size_t		kn;
	size_t		m;
	char		reason[MS_REASON_MAX];
	ms_wire_status st;
	Sync__Up   *head = ms_up_read(up, n, 1 << 20, &ms_test_allocator, &st, reason);
	size_t		pos = 0;
	const uint8_t *p;
	size_t		pn;

	CHECK(head != NULL && st == MS_WIRE_OK && head->seq == ms_vector_seq && head->n_rows == 0,
		  "the head of the vector, its lists left to read: %s", reason);
	if (head)
		sync__up__free_unpacked(head, &ms_test_allocator);
	CHECK(ms_up_next(up, n, MS_FIELD_UP_ROWS, &pos, &p, &pn), "its rows");
	{
		ms_rows_reader r;
		Sync__Key  *k;
		const uint8_t *row;
		size_t		len;

		ms_rows_open(&r, p, pn);
		CHECK(strcmp(r.table, "orders") == 0, "of table orders");
		CHECK(ms_rows_next(&r, &ms_test_allocator, &k, &row, &len) && k && k->n_parts == 1 &&
			  strcmp(k->parts[0], "7") == 0 && len == 8 && memcmp(row, "{\"id\":7}", 8) == 0, "its one upsert");
		if (k)
			sync__key__free_unpacked(k, &ms_test_allocator);
		CHECK(!ms_rows_next(&r, &ms_test_allocator, &k, &row, &len), "and no more");
	}
	CHECK(!ms_up_next(up, n, MS_FIELD_UP_ROWS, &pos, &p, &pn), "one Rows");

	/* a Rows of upserts, keys apart, and deletes, read in pairs */
	rn += field(rows + rn, 1, "t", 1);
	rn += field(rows + rn, 2, "a", 1);
	rn += field(rows + rn, 2, "", 0);
	kn = field(key, 1, "1", 1);
	rn += field(rows + rn, 3, key, kn);
	kn = field(key, 1, "2", 1);
	rn += field(rows + rn, 3, key, kn);
	kn = field(key, 1, "3", 1);
	rn += field(rows + rn, 4, key, kn);
	{
		ms_rows_reader r;
		Sync__Key  *k;
		const uint8_t *row;
		size_t		len;
		const char *want[] = {"1a", "2", "3-"};
		int			i = 0;

		ms_rows_open(&r, rows, rn);
		while (ms_rows_next(&r, &ms_test_allocator, &k, &row, &len))
		{
			char		got[8];

			snprintf(got, sizeof got, "%s%.*s", k->parts[0], row ? (int) len : 1, row ? (const char *) row : "-");
			CHECK(i < 3 && strcmp(got, want[i]) == 0, "row %d is %s", i, got);
			sync__key__free_unpacked(k, &ms_test_allocator);
			i++;
		}
		CHECK(i == 3, "three rows, deletes after upserts");
	}
	/* the checks ms_up_decode makes, made as the bytes are walked */
	{
		uint8_t		bad[512];
		size_t		bn;
		uint8_t		noparts[4];
		size_t		nn = field(noparts, 1, "", 0);

		/* protocol 1, the replica, a send id: then what is wrong */
		bn = 0;
		bad[bn++] = 0x08;
		bad[bn++] = 0x01;
		bad[bn++] = 0x12;
		bad[bn++] = 16;
		memcpy(bad + bn, ms_vector_replica, 16);
		bn += 16;
		bad[bn++] = 0x1a;
		bad[bn++] = 16;
		memcpy(bad + bn, ms_vector_send_id, 16);
		bn += 16;
		{
			uint8_t		r2[64];
			size_t		r2n = field(r2, 1, "t", 1);

			r2n += field(r2 + r2n, 2, "x", 1);
			r2n += field(r2 + r2n, 3, "", 0);
			m = bn + field(bad + bn, MS_FIELD_UP_ROWS, r2, r2n);
			CHECK(!reads(bad, m, reason) && strstr(reason, "no parts") != NULL, "a key with no parts: %s", reason);
			r2n = field(r2, 1, "t", 1);
			r2n += field(r2 + r2n, 2, "x", 1);
			m = bn + field(bad + bn, MS_FIELD_UP_ROWS, r2, r2n);
			CHECK(!reads(bad, m, reason) && strstr(reason, "1 upserts but 0 keys") != NULL, "an upsert without a key: %s", reason);
			r2n = field(r2, 2, "x", 1);
			r2n += field(r2 + r2n, 3, noparts, nn);
			m = bn + field(bad + bn, MS_FIELD_UP_ROWS, r2, r2n);
			CHECK(!reads(bad, m, reason) && strstr(reason, "table name is missing") != NULL, "no table: %s", reason);
			r2n = field(r2, 1, "t", 1);
			r2n += field(r2 + r2n, 2, "x", 1);
			r2n += field(r2 + r2n, 3, noparts, nn);
			m = bn + field(bad + bn, MS_FIELD_UP_ROWS, r2, r2n);
			CHECK(reads(bad, m, reason), "an empty part is a part: %s", reason);
			m += field(bad + m, MS_FIELD_UP_REFUSALS, "\x0a\x00", 2);
			CHECK(!reads(bad, m, reason) && strstr(reason, "empty") != NULL, "a refusal of no table: %s", reason);
			m = bn + field(bad + bn, MS_FIELD_UP_DIGESTS, "\x0a\x01t", 3);
			CHECK(reads(bad, m, reason), "a digest: %s", reason);
			bad[m++] = MS_FIELD_UP_ROWS << 3;	/* a list field as a varint */
			bad[m++] = 1;
			CHECK(!reads(bad, m, reason) && strstr(reason, "wire type") != NULL, "a list of the wrong wire type: %s", reason);
		}
		CHECK(ms_up_read(bad, 10, 5, &ms_test_allocator, &st, reason) == NULL && st == MS_WIRE_TOO_LARGE,
			  "over the bound: %s", reason);
	}
}

static void
test_canon(void)
{
	struct
	{
		ms_key_kind kind;
		const char *in;
		const char *out;		/* NULL: refused */
	}			cases[] = {
		{MS_KEY_INT8, "950", "950"},
		{MS_KEY_INT8, "0950", "950"},
		{MS_KEY_INT8, "+950", "950"},
		{MS_KEY_INT8, " 950 ", "950"},
		{MS_KEY_INT8, "-0", "0"},
		{MS_KEY_INT8, "-007", "-7"},
		{MS_KEY_INT8, "9223372036854775807", "9223372036854775807"},
		{MS_KEY_INT8, "-9223372036854775808", "-9223372036854775808"},
		{MS_KEY_INT8, "9223372036854775808", NULL},
		{MS_KEY_INT8, "", NULL},
		{MS_KEY_INT8, "-", NULL},
		{MS_KEY_INT8, "9 5", NULL},
		{MS_KEY_INT8, "1e3", NULL},
		{MS_KEY_INT8, "0x10", NULL},
		{MS_KEY_INT4, "2147483647", "2147483647"},
		{MS_KEY_INT4, "2147483648", NULL},
		{MS_KEY_INT4, "-2147483648", "-2147483648"},
		{MS_KEY_INT2, "32767", "32767"},
		{MS_KEY_INT2, "-32769", NULL},
		{MS_KEY_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{MS_KEY_UUID, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{MS_KEY_UUID, "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{MS_KEY_UUID, "a0eebc999c0b4ef8bb6d6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{MS_KEY_UUID, "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{MS_KEY_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", NULL},
		{MS_KEY_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111", NULL},
		{MS_KEY_UUID, "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11", NULL},
		{MS_KEY_UUID, "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", NULL},
		{MS_KEY_UUID, "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", NULL},
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
	{
		char		out[MS_KEY_CANON_MAX];
		size_t		n = 0;
		char		reason[MS_REASON_MAX] = "";
		bool		ok = ms_key_canon(cases[i].kind, cases[i].in, strlen(cases[i].in), out, &n, reason);

		if (cases[i].out)
			CHECK(ok && n == strlen(cases[i].out) && strcmp(out, cases[i].out) == 0,
				  "\"%s\" is spelled \"%s\": %s %s", cases[i].in, cases[i].out, ok ? out : "refused", reason);
		else
			CHECK(!ok && reason[0] != '\0', "\"%s\" is refused: %s", cases[i].in, ok ? out : reason);
	}
	/* numerics, dates and times: docs/protocol.md 3's vectors, as make_vectors.py derived them */
	for (int i = 0; i < ms_vector_nspellings; i++)
	{
		const ms_vector_spelling *v = &ms_vector_spellings[i];
		size_t		len = strlen(v->written);
		char	   *out = malloc(MS_KEY_CANON_ROOM(len));
		size_t		n = 0;
		char		reason[MS_REASON_MAX] = "";
		ms_key_kind kind = ms_key_kind_named(v->kind, false);
		bool		ok = out != NULL && ms_key_canon(kind, v->written, len, out, &n, reason);

		CHECK(kind != MS_KEY_TEXT, "%s is a kind of key part", v->kind);
		if (v->spelled)
			CHECK(ok && n == strlen(v->spelled) && strcmp(out, v->spelled) == 0,
				  "%s \"%s\" is spelled \"%s\": %s %s", v->kind, v->written, v->spelled, ok ? out : "refused", reason);
		else
			CHECK(!ok && reason[0] != '\0', "%s \"%s\" is refused: %s", v->kind, v->written, ok ? out : reason);
		free(out);
	}
	/* spelled once: a spelling spells itself */
	for (int i = 0; i < ms_vector_nspellings; i++)
	{
		const ms_vector_spelling *v = &ms_vector_spellings[i];
		char		out[MS_KEY_CANON_MAX];
		size_t		n = 0;
		char		reason[MS_REASON_MAX] = "";

		if (v->spelled)
			CHECK(ms_key_canon(ms_key_kind_named(v->kind, false), v->spelled, strlen(v->spelled), out, &n, reason) &&
				  strcmp(out, v->spelled) == 0, "\"%s\" is its own spelling: %s %s", v->spelled, out, reason);
	}
	{
		/* a numeric's exponent spelled out at its longest, in the room it is given */
		const char *big = "-1.5e-1000";
		char	   *out = malloc(MS_KEY_CANON_ROOM(strlen(big)));
		size_t		n = 0;
		char		reason[MS_REASON_MAX] = "";

		CHECK(out && ms_key_canon(MS_KEY_NUMERIC, big, strlen(big), out, &n, reason) && n == 1004 &&
			  strncmp(out, "-0.000", 6) == 0 && strcmp(out + n - 2, "15") == 0, "%s is %zu bytes: %s", big, n, reason);
		free(out);
	}
	CHECK(ms_key_kind_named("uuid", false) == MS_KEY_UUID && ms_key_kind_named("bigint", false) == MS_KEY_INT8 &&
		  ms_key_kind_named("integer", false) == MS_KEY_INT4 && ms_key_kind_named("smallint", false) == MS_KEY_INT2 &&
		  ms_key_kind_named("text", false) == MS_KEY_TEXT && ms_key_kind_named("my_domain", true) == MS_KEY_INT8 &&
		  ms_key_kind_named("timestamp with time zone", false) == MS_KEY_TIMESTAMPTZ &&
		  ms_key_kind_named("timestamp without time zone", false) == MS_KEY_TIMESTAMP &&
		  ms_key_kind_named("time without time zone", false) == MS_KEY_TIME &&
		  ms_key_kind_named("time with time zone", false) == MS_KEY_TEXT,
		  "kinds by the server's type name");
	{
		int			before,
					after;

		ms_key_canon_digits(MS_KEY_NUMERIC, "-12.345", 7, &before, &after);
		CHECK(before == 2 && after == 3, "-12.345: 2 digits before the point, 3 after: %d %d", before, after);
		ms_key_canon_digits(MS_KEY_NUMERIC, "0.5", 3, &before, &after);
		CHECK(before == 0 && after == 1, "0.5: none before the point, 1 after: %d %d", before, after);
		ms_key_canon_digits(MS_KEY_TIMESTAMPTZ, "2024-01-02T03:04:05.25+00:00", 28, &before, &after);
		CHECK(after == 2, "a timestamptz's fraction: 2 digits: %d", after);
	}
}

/* whether the answer to up, framed into buf, is waited on */
static bool
awaited(Sync__Up *up, uint8_t *buf)
{
	return ms_up_answer_awaited(buf, pack_framed(up, buf));
}

/*
 * ms_up_answer_awaited: an acknowledgement (what the replica says of
 * itself) is not waited on; rows, a gap, digests, refusals, wish fates,
 * range answers, a field not known, and bytes that do not read are
 */
static void
test_answer_awaited(void)
{
	Sync__Up	up = SYNC__UP__INIT;
	Sync__Applied applied = SYNC__APPLIED__INIT;
	Sync__Backlog backlog = SYNC__BACKLOG__INIT;
	Sync__Backlog *backlogs[1] = {&backlog};
	Sync__Digest digest = SYNC__DIGEST__INIT;
	Sync__Digest *digests[1] = {&digest};
	Sync__Refusal refusal = SYNC__REFUSAL__INIT;
	Sync__Refusal *refusals[1] = {&refusal};
	Sync__WishFate fate = SYNC__WISH_FATE__INIT;
	Sync__WishFate *fates[1] = {&fate};
	Sync__RangeAnswer range = SYNC__RANGE_ANSWER__INIT;
	Sync__RangeAnswer *ranges[1] = {&range};
	uint8_t		buf[1024];
	size_t		n;

	applied.number = 42;
	backlog.table = "orders";
	digest.table = "orders";
	refusal.table = "orders";
	backlog.unsent = 3;
	up.protocol = MS_PROTOCOL;
	up.replica.data = (uint8_t *) ms_vector_replica;
	up.replica.len = 16;
	up.send_id.data = (uint8_t *) ms_vector_send_id;
	up.send_id.len = 16;
	up.applied = &applied;
	up.n_backlog = 1;
	up.backlog = backlogs;
	up.seq = ms_vector_seq;
	up.build = "magic_sync_sqlite test";
	up.clock = 12345;
	up.lane = "till";
	up.unfiled_since = 41;
	up.range_repair = 1;
	n = pack_framed(&up, buf);
	CHECK(!ms_up_answer_awaited(buf, n), "an acknowledgement's answer is not waited on");
	CHECK(ms_up_answer_awaited(buf, n - 1), "one cut short is");
	buf[n] = 0xf0;				/* field 30, a varint: a field not known here */
	buf[n + 1] = 0x01;
	buf[n + 2] = 0x01;
	CHECK(ms_up_answer_awaited(buf, n + 3), "one with a field not known here is");
	up.gap = 44;
	CHECK(awaited(&up, buf), "one with a gap is");
	up.gap = 0;
	up.n_digests = 1;
	up.digests = digests;
	CHECK(awaited(&up, buf), "one with a digest is");
	up.n_digests = 0;
	up.n_refusals = 1;
	up.refusals = refusals;
	CHECK(awaited(&up, buf), "one with a refusal is");
	up.n_refusals = 0;
	up.n_wish_fates = 1;
	up.wish_fates = fates;
	CHECK(awaited(&up, buf), "one with a wish's fate is");
	up.n_wish_fates = 0;
	up.n_ranges = 1;
	up.ranges = ranges;
	CHECK(awaited(&up, buf), "one with a range answer is");
	n = pack_vector_up(buf);
	CHECK(ms_up_answer_awaited(buf, n), "one with rows is");
}

/*
 * ms_filed_is_receipt: a Filed answer that accounts for nothing is a
 * receipt; one with rows, a refusal, a table, or a duplicate is not, nor a
 * message that is no Filed, nor bytes that do not decode
 */
static void
test_receipt(void)
{
	Sync__ToReplica m = SYNC__TO_REPLICA__INIT;
	Sync__Filed filed = SYNC__FILED__INIT;
	Sync__Refusal refusal = SYNC__REFUSAL__INIT;
	Sync__Refusal *refusals[1] = {&refusal};
	Sync__FiledTable table = SYNC__FILED_TABLE__INIT;
	Sync__FiledTable *tables[1] = {&table};
	uint8_t		buf[512];
	size_t		n;

	m.protocol = MS_PROTOCOL;
	m.replica.data = (uint8_t *) ms_vector_replica;
	m.replica.len = 16;
	m.epoch.data = (uint8_t *) ms_vector_epoch;
	m.epoch.len = 16;
	m.body_case = SYNC__TO_REPLICA__BODY_FILED;
	m.filed = &filed;
	filed.send_id.data = (uint8_t *) ms_vector_send_id;
	filed.send_id.len = 16;
	n = sync__to_replica__pack(&m, buf);
	CHECK(ms_filed_is_receipt(buf, n), "the answer to an acknowledgement is a receipt");
	CHECK(!ms_filed_is_receipt(buf, n - 1), "cut short, it does not decode: no receipt");
	filed.rows = 1;
	n = sync__to_replica__pack(&m, buf);
	CHECK(!ms_filed_is_receipt(buf, n), "one that filed a row is no receipt");
	filed.rows = 0;
	refusal.table = "orders";
	refusal.reason = "no";
	filed.n_refused = 1;
	filed.refused = refusals;
	n = sync__to_replica__pack(&m, buf);
	CHECK(!ms_filed_is_receipt(buf, n), "nor one that refused a row");
	filed.n_refused = 0;
	table.table = "orders";
	filed.n_tables = 1;
	filed.tables = tables;
	n = sync__to_replica__pack(&m, buf);
	CHECK(!ms_filed_is_receipt(buf, n), "nor one that accounts for a table");
	filed.n_tables = 0;
	filed.duplicate = 1;
	n = sync__to_replica__pack(&m, buf);
	CHECK(!ms_filed_is_receipt(buf, n), "nor a duplicate's");
}

void
test_up(void)
{
	test_answer_awaited();
	test_receipt();
	test_check();
	test_lane_vector();
	test_read();
	test_canon();
}
