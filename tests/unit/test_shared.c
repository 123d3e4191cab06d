/*
 * test_shared.c - unit tests of src/shared: canonical keys, digests, seals,
 * the wire format, and decoding of every truncation and single-bit flip of
 * valid messages (test_mutations.c); the row walker (test_row.c) and the field numbers written
 * by hand (test_fields.c).  Built with AddressSanitizer and UBSan; prints a closing
 * "N passed, N failed" line and exits non-zero on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "digest.h"
#include "range.h"
#include "key.h"
#include "row.h"
#include "seal.h"
#include "vectors.h"
#include "upcheck.h"
#include "wire.h"

int			ms_unit_passed;
int			ms_unit_failed;

/* canonical key of NUL-terminated parts */
static size_t
canon(char *out, int n, const char *const *parts)
{
	size_t		lens[4];

	for (int i = 0; i < n; i++)
		lens[i] = strlen(parts[i]);
	return ms_key_write(out, (size_t) n, parts, lens);
}

static void
test_keys(void)
{
	const char *p1[] = {"42"};
	const char *p2[] = {"a", "bc"};
	const char *p3[] = {"", "x"};
	char		buf[64];
	size_t		n;
	size_t		pos = 0;
	const char *part;
	size_t		plen;
	const char *bad[] = {"", "2:4", "01:a", ":a", "1a", "1:a1", "x", "11111111111:a"};

	n = canon(buf, 1, p1);
	CHECK(n == 4 && memcmp(buf, "2:42", 4) == 0, "key [42] is 2:42");
	n = canon(buf, 2, p2);
	CHECK(n == 7 && memcmp(buf, "1:a2:bc", 7) == 0, "key [a,bc] is 1:a2:bc");
	CHECK(ms_key_count_parts(buf, n) == 2, "two parts");
	CHECK(ms_key_next_part(buf, n, &pos, &part, &plen) == 1 && plen == 1 && part[0] == 'a', "first part");
	CHECK(ms_key_next_part(buf, n, &pos, &part, &plen) == 1 && plen == 2 && memcmp(part, "bc", 2) == 0, "second part");
	CHECK(ms_key_next_part(buf, n, &pos, &part, &plen) == 0, "end of key");
	n = canon(buf, 2, p3);
	CHECK(n == 5 && memcmp(buf, "0:1:x", 5) == 0, "empty part");
	CHECK(ms_key_count_parts(buf, n) == 2, "empty part counts");
	CHECK(ms_key_size(2, p3, (size_t[]) {0, 1}) == 5, "size agrees with write");
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(ms_key_count_parts(bad[i], strlen(bad[i])) <= 0 || i == 0,
			  "\"%s\" is not canonical", bad[i]);
	CHECK(ms_key_count_parts("", 0) == 0, "the empty string has no parts");
	/* [a,bc] and [ab,c] differ, where plain concatenation would collide */
	{
		const char *q[] = {"ab", "c"};
		char		b2[64];
		size_t		n1 = canon(buf, 2, p2);
		size_t		n2 = canon(b2, 2, q);

		CHECK(ms_key_cmp(buf, n1, b2, n2) != 0, "no collision of [a,bc] and [ab,c]");
		CHECK(ms_key_cmp("1:a", 3, "1:a", 3) == 0, "equal keys");
		CHECK(ms_key_cmp("1:a", 3, "1:a1:b", 6) < 0, "prefix first");
		CHECK(ms_key_cmp("2:\xc3\xa9", 4, "1:e", 3) > 0, "unsigned byte order");
	}
}

static void
test_digests(void)
{
	for (int v = 0; v < ms_vector_ndigests; v++)
	{
		const ms_vector_digest *vd = &ms_vector_digests[v];
		char		storage[4][128];
		ms_keyref	refs[4];
		ms_digest	d;
		char		hex[17];

		for (int k = 0; k < vd->nkeys; k++)
		{
			int			np = 0;

			while (np < vd->nparts && vd->keys[k][np] != NULL)
				np++;
			refs[k].key = storage[k];
			refs[k].len = canon(storage[k], np, vd->keys[k]);
		}
		ms_digest_keys(&d, refs, (size_t) vd->nkeys);
		ms_digest_hex(d.fnv, hex);
		CHECK(d.count == vd->count, "digest %s count %llu", vd->name, (unsigned long long) d.count);
		CHECK(strcmp(hex, vd->fnv) == 0, "digest %s fnv %s, expected %s", vd->name, hex, vd->fnv);
	}
	CHECK(ms_fnv1a(MS_FNV_OFFSET, "a", 1) == UINT64_C(0xaf63dc4c8601ec8c), "FNV-1a 64 of \"a\"");
}

/* a row's hash and a values digest: the vectors, and that every value counts */
static void
test_row_hashes(void)
{
	ms_digest_value rows[2][5] = {
		{{MS_DV_INTEGER, 7, 0, NULL, 0}, {MS_DV_TEXT, 0, 0, "tea, green", 10}, {MS_DV_REAL, 0, 2.5, NULL, 0},
		{MS_DV_BLOB, 0, 0, "\x01\x02", 2}, {MS_DV_NULL, 0, 0, NULL, 0}},
		{{MS_DV_INTEGER, -3, 0, NULL, 0}, {MS_DV_TEXT, 0, 0, "\xc3\xa9", 2}, {MS_DV_REAL, 0, -0.0, NULL, 0},
		{MS_DV_BLOB, 0, 0, "", 0}, {MS_DV_TEXT, 0, 0, "n", 1}},
	};
	const char *keys[2] = {"1:7", "2:-3"};
	uint64_t	sum = 0;
	uint64_t	base;
	char		hex[17];

	for (int r = 0; r < 2; r++)
	{
		uint64_t	h = ms_digest_row(keys[r], strlen(keys[r]), rows[r], 5);
		uint64_t	step = ms_digest_row_begin(keys[r], strlen(keys[r]));

		ms_digest_hex(h, hex);
		CHECK(strcmp(hex, ms_vector_row_hashes[r]) == 0, "row %d hash %s, expected %s", r, hex,
			  ms_vector_row_hashes[r]);
		for (int c = 0; c < 5; c++)
			step = ms_digest_row_value(step, &rows[r][c]);
		CHECK(ms_digest_row_end(step) == h, "row %d a value at a time", r);
		sum += h;
	}
	ms_digest_hex(sum, hex);
	CHECK(strcmp(hex, ms_vector_values) == 0, "values digest %s, expected %s", hex, ms_vector_values);
	/* drift anywhere changes it: a value, a type, a NULL moved, the key */
	base = ms_digest_row(keys[0], 3, rows[0], 5);
	rows[0][2].d = 2.25;
	CHECK(ms_digest_row(keys[0], 3, rows[0], 5) != base, "another price");
	rows[0][2].d = 2.5;
	rows[0][0].tag = MS_DV_REAL;
	rows[0][0].d = 7;
	CHECK(ms_digest_row(keys[0], 3, rows[0], 5) != base, "7 as a REAL is not 7");
	rows[0][0].tag = MS_DV_INTEGER;
	rows[0][1].tag = MS_DV_BLOB;
	CHECK(ms_digest_row(keys[0], 3, rows[0], 5) != base, "'tea' as a BLOB is not TEXT");
	rows[0][1].tag = MS_DV_TEXT;
	CHECK(ms_digest_row("1:8", 3, rows[0], 5) != base, "another key");
	{
		ms_digest_value a[2] = {{MS_DV_NULL, 0, 0, NULL, 0}, {MS_DV_TEXT, 0, 0, "x", 1}};
		ms_digest_value b[2] = {{MS_DV_TEXT, 0, 0, "x", 1}, {MS_DV_NULL, 0, 0, NULL, 0}};
		ms_digest_value c[2] = {{MS_DV_TEXT, 0, 0, "ab", 2}, {MS_DV_TEXT, 0, 0, "c", 1}};
		ms_digest_value d[2] = {{MS_DV_TEXT, 0, 0, "a", 1}, {MS_DV_TEXT, 0, 0, "bc", 2}};

		CHECK(ms_digest_row("1:1", 3, a, 2) != ms_digest_row("1:1", 3, b, 2), "a NULL in another column");
		CHECK(ms_digest_row("1:1", 3, c, 2) != ms_digest_row("1:1", 3, d, 2), "bytes moved between columns");
	}
	{
		/* a word at a time: the padding is no byte, and high bits of two words do not cancel */
		ms_digest_value a = {MS_DV_BLOB, 0, 0, "a", 1};
		ms_digest_value b = {MS_DV_BLOB, 0, 0, "a\0", 2};
		ms_digest_value c = {MS_DV_BLOB, 0, 0, "0123456701234567", 16};
		ms_digest_value d = {MS_DV_BLOB, 0, 0, "0123456\xb7" "0123456\xb7", 16};

		CHECK(ms_digest_row("1:1", 3, &a, 1) != ms_digest_row("1:1", 3, &b, 1), "a zero byte is not padding");
		CHECK(ms_digest_row("1:1", 3, &c, 1) != ms_digest_row("1:1", 3, &d, 1), "the top bits of two words");
	}
}

static void
test_seals(void)
{
	uint8_t		input[MS_SEAL_INPUT_BYTES];
	uint8_t		seal[MS_SEAL_BYTES];
	char		hex[2 * MS_SEAL_INPUT_BYTES + 1];
	uint8_t		a[32],
				b[32];

	ms_seal_input(ms_vector_replica, ms_vector_epoch, ms_vector_number, ms_vector_nonce, input);
	ms_hex_encode(input, sizeof input, hex);
	CHECK(strcmp(hex, ms_vector_seal_input_hex) == 0, "seal input %s", hex);
	CHECK(ms_seal(ms_vector_secret, 32, ms_vector_replica, ms_vector_epoch, ms_vector_number,
				  ms_vector_nonce, seal), "seal computes");
	ms_hex_encode(seal, sizeof seal, hex);
	CHECK(strcmp(hex, ms_vector_seal_hex) == 0, "seal %s", hex);
	CHECK(ms_seal_verify(ms_vector_secret, 32, ms_vector_replica, ms_vector_epoch, ms_vector_number,
						 ms_vector_nonce, seal, sizeof seal), "seal verifies");
	for (int i = 0; i < MS_SEAL_BYTES; i++)
	{
		seal[i] ^= 1;
		CHECK(!ms_seal_verify(ms_vector_secret, 32, ms_vector_replica, ms_vector_epoch,
							  ms_vector_number, ms_vector_nonce, seal, sizeof seal),
			  "a seal with byte %d flipped is refused", i);
		seal[i] ^= 1;
	}
	CHECK(!ms_seal_verify(ms_vector_secret, 32, ms_vector_replica, ms_vector_epoch,
						  ms_vector_number + 1, ms_vector_nonce, seal, sizeof seal),
		  "the seal of another number is refused");
	CHECK(!ms_seal_verify(ms_vector_secret, 32, ms_vector_replica, ms_vector_epoch,
						  ms_vector_number, ms_vector_nonce, seal, sizeof seal - 1),
		  "a short seal is refused");
	CHECK(ms_random(a, sizeof a) && ms_random(b, sizeof b) && memcmp(a, b, sizeof a) != 0,
		  "the CSPRNG gives different bytes");
}

/* The vector message: a Down of one row and one delete (check.h). */
size_t
pack_vector(uint8_t *out)
{
	uint8_t		seal[MS_SEAL_BYTES];
	ms_head		h = {MS_PROTOCOL, ms_vector_epoch, ms_vector_number, ms_vector_nonce,
	41, ms_vector_previous_nonce, seal, ms_vector_replica, 0, 0};
	Sync__Down	down = SYNC__DOWN__INIT;
	Sync__Rows	rows = SYNC__ROWS__INIT;
	Sync__Rows *rowsp = &rows;
	Sync__Key	k7 = SYNC__KEY__INIT;
	Sync__Key	k8 = SYNC__KEY__INIT;
	Sync__Key  *k7p = &k7;
	Sync__Key  *k8p = &k8;
	char	   *p7 = "7";
	char	   *p8 = "8";
	const char *json = "{\"id\":7,\"name\":\"tea\"}";
	ProtobufCBinaryData up = {strlen(json), (uint8_t *) json};
	size_t		n;

	ms_seal(ms_vector_secret, 32, ms_vector_replica, ms_vector_epoch, ms_vector_number,
			ms_vector_nonce, seal);
	k7.n_parts = 1;
	k7.parts = &p7;
	k8.n_parts = 1;
	k8.parts = &p8;
	rows.table = "products";
	rows.n_upserts = 1;
	rows.upserts = &up;
	rows.n_keys = 1;
	rows.keys = &k7p;
	rows.n_deletes = 1;
	rows.deletes = &k8p;
	down.n_tables = 1;
	down.tables = &rowsp;
	n = ms_head_pack(&h, out);
	CHECK(n == ms_head_packed_size(&h), "head size");
	n += ms_body_pack(&down, NULL, NULL, out + n);
	return n;
}

/*
 * The sample's head in a generation: field 12 after the replica, decoded
 * back; and the Applied a replica that applied it gives back.
 */
static void
test_vector_generation(void)
{
	uint8_t		seal[MS_SEAL_BYTES];
	ms_head		h = {MS_PROTOCOL, ms_vector_epoch, ms_vector_number, ms_vector_nonce,
	41, ms_vector_previous_nonce, seal, ms_vector_replica, ms_vector_generation, 0};
	uint8_t		buf[256];
	uint8_t		want[256];
	char		reason[MS_REASON_MAX];
	long		wn = ms_hex_decode(ms_vector_generation_head_hex, want, sizeof want);
	size_t		n;
	Sync__Applied *a;
	Sync__Applied mine = SYNC__APPLIED__INIT;

	ms_seal(ms_vector_secret, 32, ms_vector_replica, ms_vector_epoch, ms_vector_number,
			ms_vector_nonce, seal);
	n = ms_head_pack(&h, buf);
	CHECK(n == ms_head_packed_size(&h) && wn > 0 && n == (size_t) wn && memcmp(buf, want, n) == 0,
		  "the head in a generation as documented");
	{
		uint8_t		body[256];
		long		bn = ms_hex_decode(ms_vector_body_hex, body, sizeof body);
		ms_wire_status st;
		Sync__ToReplica *m;

		memcpy(buf + n, body, (size_t) bn);
		m = ms_to_replica_decode(buf, n + (size_t) bn, 1 << 20, &ms_test_allocator, &st, reason);
		CHECK(m != NULL && m->generation == ms_vector_generation, "its generation decodes: %s", reason);
		if (m)
			sync__to_replica__free_unpacked(m, &ms_test_allocator);
	}
	wn = ms_hex_decode(ms_vector_applied_hex, want, sizeof want);
	a = ms_applied_decode(want, (size_t) wn, &ms_test_allocator, reason);
	CHECK(a != NULL, "the Applied decodes: %s", reason);
	if (a)
	{
		CHECK(a->number == ms_vector_number && a->generation == ms_vector_generation &&
			  a->seal.len == MS_SEAL_BYTES && memcmp(a->seal.data, seal, MS_SEAL_BYTES) == 0,
			  "with its number, seal and generation");
		sync__applied__free_unpacked(a, &ms_test_allocator);
	}
	mine.epoch.data = (uint8_t *) ms_vector_epoch;
	mine.epoch.len = MS_EPOCH_BYTES;
	mine.number = ms_vector_number;
	mine.nonce.data = (uint8_t *) ms_vector_nonce;
	mine.nonce.len = MS_NONCE_BYTES;
	mine.seal.data = seal;
	mine.seal.len = MS_SEAL_BYTES;
	mine.generation = ms_vector_generation;
	n = sync__applied__pack(&mine, buf);
	CHECK(wn > 0 && n == (size_t) wn && memcmp(buf, want, n) == 0, "and packs as documented");
	/* what a replica cannot have given */
	CHECK(ms_applied_decode(want, (size_t) wn - 3, &ms_test_allocator, reason) == NULL, "a truncated one: %s", reason);
	CHECK(ms_applied_decode(want, 300, &ms_test_allocator, reason) == NULL, "an oversized one: %s", reason);
	want[1] = 15;				/* an epoch of 15 bytes */
	CHECK(ms_applied_decode(want, (size_t) wn, &ms_test_allocator, reason) == NULL, "a short epoch: %s", reason);
}

static void
test_vector_message(void)
{
	uint8_t		buf[512];
	uint8_t		head[256];
	uint8_t		body[256];
	long		hn = ms_hex_decode(ms_vector_head_hex, head, sizeof head);
	long		bn = ms_hex_decode(ms_vector_body_hex, body, sizeof body);
	size_t		n = pack_vector(buf);
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	Sync__ToReplica *m;

	CHECK(hn > 0 && bn > 0 && n == (size_t) (hn + bn), "message is head and body: %zu bytes", n);
	CHECK(hn > 0 && memcmp(buf, head, (size_t) hn) == 0, "head bytes as documented");
	CHECK(bn > 0 && memcmp(buf + hn, body, (size_t) bn) == 0, "body bytes as documented");
	m = ms_to_replica_decode(buf, n, 1 << 20, &ms_test_allocator, &st, reason);
	CHECK(m != NULL && st == MS_WIRE_OK, "the vector decodes: %s", reason);
	/* written by a server that numbered no generations: generation 0 */
	CHECK(m == NULL || m->generation == 0, "a message without field 12 is of generation 0");
	if (m)
	{
		CHECK(m->number == 42 && m->previous == 41 && m->body_case == SYNC__TO_REPLICA__BODY_DOWN,
			  "fields decode");
		CHECK(m->down->n_tables == 1 && strcmp(m->down->tables[0]->table, "products") == 0 &&
			  m->down->tables[0]->n_deletes == 1, "rows decode");
		CHECK(ms_seal_verify(ms_vector_secret, 32, m->replica.data, m->epoch.data, m->number,
							 m->nonce.data, m->seal.data, m->seal.len), "the decoded seal verifies");
		sync__to_replica__free_unpacked(m, &ms_test_allocator);
	}
	m = ms_to_replica_decode(buf, n, n - 1, &ms_test_allocator, &st, reason);
	CHECK(m == NULL && st == MS_WIRE_TOO_LARGE, "over the bound: %s", reason);
}

/*
 * The sample wish: it decodes as documented, and passes the wire checks;
 * its Up, saying the wish was applied, is whole and passes the server's.
 * A wish whose key is of two parts, or whose apply is unknown, does not.
 */
static void
test_vector_wish(void)
{
	uint8_t		buf[1024];
	uint8_t		seal[MS_SEAL_BYTES];
	long		hn = ms_hex_decode(ms_vector_wish_head_hex, buf, sizeof buf);
	long		bn = hn > 0 ? ms_hex_decode(ms_vector_wish_body_hex, buf + hn, sizeof buf - (size_t) hn) : -1;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	Sync__ToReplica *m;
	Sync__Up   *u;
	long		un;

	CHECK(hn > 0 && bn > 0, "the wish's vector is hex");
	CHECK(ms_hex_decode(ms_vector_wish_seal_hex, seal, sizeof seal) == MS_SEAL_BYTES &&
		  ms_seal_verify(ms_vector_secret, 32, ms_vector_replica, ms_vector_epoch, 43,
						 ms_vector_wish_nonce, seal, sizeof seal), "its seal is message 43's");
	if (hn <= 0 || bn <= 0)
		return;
	m = ms_to_replica_decode(buf, (size_t) (hn + bn), 1 << 20, &ms_test_allocator, &st, reason);
	CHECK(m != NULL && st == MS_WIRE_OK, "the wish decodes: %s", reason);
	if (m == NULL)
		return;
	CHECK(m->body_case == SYNC__TO_REPLICA__BODY_DOWN && m->down->n_wishes == 1 && m->down->n_tables == 0,
		  "a Down of one wish");
	if (m->body_case == SYNC__TO_REPLICA__BODY_DOWN && m->down->n_wishes == 1)
	{
		Sync__Wish *w = m->down->wishes[0];
		char	   *apply = w->apply;

		CHECK(w->id == 5 && strcmp(w->table, "settings") == 0 && w->key->n_parts == 1 &&
			  strcmp(w->key->parts[0], "10111213-1415-1617-1819-1a1b1c1d1e1f") == 0 &&
			  strcmp(w->values, "{\"printer\":\"hall\"}") == 0 && strcmp(w->apply, "if_unchanged") == 0 &&
			  strcmp(w->expected, "{\"printer\":\"desk\"}") == 0, "wish 5 as documented");
		w->apply = "sometimes";
		CHECK(!ms_wish_check(w, reason) && strstr(reason, "neither always") != NULL, "an unknown apply: %s", reason);
		w->apply = apply;
		w->key->n_parts = 0;
		CHECK(!ms_wish_check(w, reason), "no key: %s", reason);
		w->key->n_parts = 1;
		w->id = 0;
		CHECK(!ms_wish_check(w, reason) && strstr(reason, "numbered 0") != NULL, "wish 0: %s", reason);
	}
	sync__to_replica__free_unpacked(m, &ms_test_allocator);
	/* cut anywhere, the message is refused */
	for (long k = hn; k < hn + bn; k++)
	{
		m = ms_to_replica_decode(buf, (size_t) k, 1 << 20, &ms_test_allocator, &st, reason);
		CHECK(m == NULL, "cut at %ld of %ld: refused", k, hn + bn);
		if (m)
			sync__to_replica__free_unpacked(m, &ms_test_allocator);
	}

	un = ms_hex_decode(ms_vector_wish_up_hex, buf, sizeof buf);
	CHECK(un > 0 && ms_up_verify(buf, (size_t) un, reason), "the wish's Up is whole: %s", reason);
	u = un > 0 ? ms_up_decode(buf, (size_t) un, 1 << 20, &ms_test_allocator, &st, reason) : NULL;
	CHECK(u != NULL && u->n_wish_fates == 1 && u->wish_fates[0]->id == 5 &&
		  strcmp(u->wish_fates[0]->fate, "applied") == 0 && u->wish_fates[0]->why[0] == '\0',
		  "it says wish 5 was applied: %s", reason);
	if (u && u->n_wish_fates == 1)
	{
		char	   *fate = u->wish_fates[0]->fate;

		u->wish_fates[0]->fate = "maybe";
		CHECK(!ms_up_check(u, reason) && strstr(reason, "none of applied") != NULL, "an unknown fate: %s", reason);
		u->wish_fates[0]->fate = fate;
		u->wish_fates[0]->id = 0;
		CHECK(!ms_up_check(u, reason), "wish 0: %s", reason);
		sync__up__free_unpacked(u, &ms_test_allocator);
	}
}

/*
 * The sample schema change: it decodes as documented, and protobuf-c packs
 * the decoded body back to the same bytes (fields in number order).
 */
static void
test_vector_evolve(void)
{
	uint8_t		buf[1024];
	uint8_t		again[512];
	uint8_t		seal[MS_SEAL_BYTES];
	long		hn = ms_hex_decode(ms_vector_evolve_head_hex, buf, sizeof buf);
	long		bn = hn > 0 ? ms_hex_decode(ms_vector_evolve_body_hex, buf + hn, sizeof buf - (size_t) hn) : -1;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	Sync__ToReplica *m;

	CHECK(hn > 0 && bn > 0, "the schema change's vector is hex");
	CHECK(ms_hex_decode(ms_vector_evolve_seal_hex, seal, sizeof seal) == MS_SEAL_BYTES &&
		  ms_seal_verify(ms_vector_secret, 32, ms_vector_replica, ms_vector_epoch, 43,
						 ms_vector_evolve_nonce, seal, sizeof seal), "its seal is message 43's");
	if (hn <= 0 || bn <= 0)
		return;
	m = ms_to_replica_decode(buf, (size_t) (hn + bn), 1 << 20, &ms_test_allocator, &st, reason);
	CHECK(m != NULL && st == MS_WIRE_OK, "the schema change decodes: %s", reason);
	if (m == NULL)
		return;
	CHECK(m->number == 43 && m->previous == 42 && m->body_case == SYNC__TO_REPLICA__BODY_DOWN &&
		  m->down->begin == NULL, "message 43 follows 42, no snapshot");
	CHECK(m->down->n_schema == 1 && m->down->n_let_go == 0, "one table changes");
	if (m->down->n_schema == 1)
	{
		const Sync__Table *t = m->down->schema[0];

		CHECK(strcmp(t->name, "products") == 0 && t->id == 1 && t->n_columns == 3, "the table and its id");
		CHECK(t->n_columns == 3 && strcmp(t->columns[1]->name, "title") == 0 && t->columns[1]->id == 2 &&
			  strcmp(t->columns[2]->name, "price") == 0 && t->columns[2]->id == 3,
			  "the renamed column keeps its id; the new one has its own");
		CHECK(t->fill.len == 11 && memcmp(t->fill.data, "{\"price\":0}", 11) == 0, "the fill row");
	}
	CHECK(m->down->n_tables == 1 && m->down->tables[0]->n_upserts == 1, "and the row after it");
	CHECK(sync__down__get_packed_size(m->down) + 3 == (size_t) bn &&
		  sync__down__pack(m->down, again) + 3 == (size_t) bn &&
		  memcmp(again, buf + hn + 3, (size_t) bn - 3) == 0, "protobuf-c packs the body as documented");
	sync__to_replica__free_unpacked(m, &ms_test_allocator);

	/* a column id given twice, a unique index on no column: refused */
	{
		Sync__Column a = SYNC__COLUMN__INIT,
					b = SYNC__COLUMN__INIT;
		Sync__Column *cols[] = {&a, &b};
		char	   *key[] = {"a"};
		char	   *ucols[] = {"c"};
		Sync__Unique u = SYNC__UNIQUE__INIT;
		Sync__Unique *us[] = {&u};
		Sync__Table t = SYNC__TABLE__INIT;

		a.name = "a";
		a.type = "INTEGER";
		a.id = 4;
		b.name = "b";
		b.type = "TEXT";
		b.id = 4;
		t.name = "t";
		t.mirror = "catalog";
		t.codec = "json";
		t.n_columns = 2;
		t.columns = cols;
		t.n_key = 1;
		t.key = key;
		CHECK(!ms_table_check(&t, reason) && strstr(reason, "one id") != NULL, "one id twice: %s", reason);
		b.id = 5;
		u.name = "t_c";
		u.n_columns = 1;
		u.columns = ucols;
		t.n_unique = 1;
		t.unique = us;
		CHECK(!ms_table_check(&t, reason) && strstr(reason, "not a column") != NULL,
			  "a unique index on no column: %s", reason);
		ucols[0] = "b";
		CHECK(ms_table_check(&t, reason), "a unique index on a column: %s", reason);
	}
}

/*
 * A Table of many columns is checked in time linear in them (issue 38.8:
 * each check walked the columns for each column), and one of more columns
 * than a row can have is refused: what each check finds stays the same.
 */
static void
test_wide_table(void)
{
	enum
	{
		N = MS_ROW_COLUMNS_MAX + 1
	};
	static Sync__Column cols[N];
	static Sync__Column *ptrs[N];
	static char names[N][16];
	char	   *key[] = {"c0"};
	char	   *fk_cols[] = {"c2047"};
	char	   *fk_refs[] = {"id"};
	Sync__ForeignKey fk = SYNC__FOREIGN_KEY__INIT;
	Sync__ForeignKey *fks[] = {&fk};
	Sync__Table t = SYNC__TABLE__INIT;
	char		reason[MS_REASON_MAX];

	for (int i = 0; i < N; i++)
	{
		sync__column__init(&cols[i]);
		snprintf(names[i], sizeof names[i], "c%d", i);
		cols[i].name = names[i];
		cols[i].type = i % 2 ? "TEXT" : "INTEGER";
		cols[i].id = (uint32_t) i + 1;
		ptrs[i] = &cols[i];
	}
	t.name = "wide";
	t.mirror = "catalog";
	t.codec = "json";
	t.columns = ptrs;
	t.n_key = 1;
	t.key = key;
	fk.table = "other";
	fk.n_columns = fk.n_references = 1;
	fk.columns = fk_cols;
	fk.references = fk_refs;
	t.n_foreign_keys = 1;
	t.foreign_keys = fks;
	t.n_columns = N;
	CHECK(!ms_table_check(&t, reason) && strstr(reason, "more than a row can have") != NULL,
		  "2049 columns: refused: %s", reason);
	t.n_columns = N - 1;
	CHECK(ms_table_check(&t, reason), "2048 columns, a key and a foreign key on the last: %s", reason);
	names[2000][1] = '1';		/* c2000 is now c1000's name */
	CHECK(!ms_table_check(&t, reason) && strstr(reason, "names column \"c1000\" twice") != NULL,
		  "a name twice among 2048: %s", reason);
	snprintf(names[2000], sizeof names[2000], "c2000");
	cols[1999].id = 7;
	CHECK(!ms_table_check(&t, reason) && strstr(reason, "one id") != NULL, "an id twice among 2048: %s", reason);
	cols[1999].id = 2000;
	fk_cols[0] = "c2048";
	CHECK(!ms_table_check(&t, reason) && strstr(reason, "is not a column") != NULL,
		  "a foreign key on the column past the last: %s", reason);
}

/* range repair's buckets and messages: the vectors of docs/protocol.md 10 */
static void
test_ranges(void)
{
	ms_range_sum s[4] = {{3, 1, 10}, {1, 1, 5}, {3, 1, 7}, {1, 1, UINT64_MAX}};
	uint64_t	zero = 0,
				b27 = 27,
				one = 1,
				sum = UINT64_C(0xda55ea5f46f524c3);
	uint64_t	buckets[3] = {2, 5, 9};
	Sync__RangeAsk ask = SYNC__RANGE_ASK__INIT;
	Sync__RangeAnswer ans = SYNC__RANGE_ANSWER__INIT;
	uint8_t		out[128];
	char		hex[257];
	size_t		n;

	CHECK(ms_range_key_hash("2:42", 4) == UINT64_C(0x6ecf420b669028bb), "key hash of [42]");
	CHECK(ms_range_bucket(UINT64_C(0x6ecf420b669028bb), 6) == 27, "[42] at depth 6: 27");
	CHECK(ms_range_bucket(UINT64_C(0x6ecf420b669028bb), 12) == 1772, "[42] at depth 12: 1772");
	CHECK(ms_range_bucket(UINT64_C(0x6ecf420b669028bb), 0) == 0, "depth 0: the whole table");
	CHECK(ms_range_row("2:42", 4) == sum, "row hash of [42]");
	CHECK(ms_range_row("1:a2:bc", 7) == UINT64_C(0xd2bf8cb44c3c8f2c), "row hash of [a,bc]");
	CHECK(ms_range_bucket(ms_range_key_hash("4:1234", 6), 6) == 51, "[1234] at depth 6: 51");
	n = ms_range_aggregate(s, 4);
	CHECK(n == 2 && s[0].bucket == 1 && s[0].count == 2 && s[0].sum == 4 &&
		  s[1].bucket == 3 && s[1].count == 2 && s[1].sum == 17, "aggregated by bucket, sums mod 2^64");
	CHECK(ms_range_find(s, n, 3) == &s[1] && ms_range_find(s, n, 2) == NULL, "found by bucket");
	CHECK(ms_range_member(buckets, 3, 5) && !ms_range_member(buckets, 3, 6) && !ms_range_member(buckets, 0, 2),
		  "member of ascending buckets");

	ask.table = "products";
	ask.round = 1;
	ask.n_buckets = 1;
	ask.buckets = &zero;
	ask.split = 6;
	n = sync__range_ask__pack(&ask, out);
	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", out[i]);
	CHECK(strcmp(hex, "0a0870726f647563747310012201002806") == 0, "RangeAsk vector: %s", hex);
	ans.table = "products";
	ans.round = 2;
	ans.depth = 6;
	ans.n_buckets = ans.n_counts = ans.n_sums = 1;
	ans.buckets = &b27;
	ans.counts = &one;
	ans.sums = &sum;
	n = sync__range_answer__pack(&ans, out);
	for (size_t i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", out[i]);
	CHECK(strcmp(hex, "0a0870726f64756374731002180622011b2a01013208c324f5465fea55da") == 0, "RangeAnswer vector: %s", hex);

	/* of values: the ask says so, the answer's sums are values hashes (8.1) */
	{
		ms_digest_value v42 = {MS_DV_INTEGER, 42, 0, NULL, 0};
		ms_digest_value tea = {MS_DV_TEXT, 0, 0, "tea", 3};
		uint64_t	vh = ms_digest_row_end(ms_digest_row_value(ms_digest_row_value(ms_digest_row_begin("2:42", 4), &v42), &tea));

		CHECK(vh == UINT64_C(0xfa20d9c9d4eded91), "values hash of [42] = (42, 'tea'): %016llx", (unsigned long long) vh);
		ask.values = 1;
		n = sync__range_ask__pack(&ask, out);
		for (size_t i = 0; i < n; i++)
			snprintf(hex + 2 * i, 3, "%02x", out[i]);
		CHECK(strcmp(hex, "0a0870726f6475637473100122010028063001") == 0, "values RangeAsk vector: %s", hex);
		ans.sums = &vh;
		ans.values = 1;
		n = sync__range_answer__pack(&ans, out);
		for (size_t i = 0; i < n; i++)
			snprintf(hex + 2 * i, 3, "%02x", out[i]);
		CHECK(strcmp(hex, "0a0870726f64756374731002180622011b2a0101320891ededd4c9d920fa4801") == 0,
			  "values RangeAnswer vector: %s", hex);
	}
}

int
main(void)
{
	test_keys();
	test_digests();
	test_row_hashes();
	test_ranges();
	test_seals();
	test_vector_message();
	test_vector_evolve();
	test_wide_table();
	test_vector_wish();
	test_vector_generation();
	test_refusals();
	test_mutations();
	test_row();
	test_fields();
	test_up();
	test_sha256();
	test_bundle();
	test_hlc();
	test_sign();
	test_uuid();
	printf("%d passed, %d failed\n", ms_unit_passed, ms_unit_failed);
	return ms_unit_failed == 0 ? 0 : 1;
}
