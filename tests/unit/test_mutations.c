/*
 * test_mutations.c - the messages of the unit suite broken every way: each
 * truncation and single-bit flip of a Down, a snapshot, its end, a Filed and
 * an Up is refused with a reason or decodes to a message that passes the
 * checks and packs again, and the replica's read of it (ms_to_replica_read)
 * agrees with the decode; and the refusals each bound gives.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "digest.h"
#include "range.h"
#include "read_same.h"
#include "key.h"
#include "pbwrite.h"
#include "row.h"
#include "seal.h"
#include "vectors.h"
#include "upcheck.h"
#include "wire.h"

/* A snapshot's first message: schema of two tables, rows of both. */
static size_t
pack_snapshot(uint8_t *out)
{
	uint8_t		seal[MS_SEAL_BYTES] = {0};
	uint8_t		nonce[16] = {9};
	ms_head		h = {MS_PROTOCOL, ms_vector_epoch, 100, nonce, 0, NULL, seal, ms_vector_replica, 0, 0};
	Sync__Column c_id = SYNC__COLUMN__INIT,
				c_name = SYNC__COLUMN__INIT,
				c_pid = SYNC__COLUMN__INIT,
				c_qty = SYNC__COLUMN__INIT;
	Sync__Column *pc[] = {&c_id, &c_name};
	Sync__Column *sc[] = {&c_pid, &c_qty};
	Sync__ForeignKey fk = SYNC__FOREIGN_KEY__INIT;
	Sync__ForeignKey *fkp = &fk;
	char	   *fkcols[] = {"product_id"};
	char	   *fkrefs[] = {"id"};
	char	   *pkey[] = {"id"};
	char	   *skey[] = {"product_id"};
	Sync__Table products = SYNC__TABLE__INIT,
				stock = SYNC__TABLE__INIT;
	Sync__Table *schema[] = {&products, &stock};
	Sync__Begin begin = SYNC__BEGIN__INIT;
	Sync__Down	down = SYNC__DOWN__INIT;
	Sync__Rows	r1 = SYNC__ROWS__INIT,
				r2 = SYNC__ROWS__INIT;
	Sync__Rows *rs[] = {&r1, &r2};
	Sync__Key	k = SYNC__KEY__INIT;
	Sync__Key  *kp[] = {&k};
	char	   *parts[] = {"1"};
	ProtobufCBinaryData u1 = {20, (uint8_t *) "{\"id\":1,\"name\":\"a\"}"};
	ProtobufCBinaryData u2 = {27, (uint8_t *) "{\"product_id\":1,\"qty\":5.5}"};
	size_t		n;

	c_id.name = "id";
	c_id.type = "INTEGER";
	c_id.not_null = 1;
	c_id.server_type = "bigint";
	c_name.name = "name";
	c_name.type = "TEXT";
	c_name.server_type = "text";
	c_pid.name = "product_id";
	c_pid.type = "INTEGER";
	c_pid.server_type = "bigint";
	c_qty.name = "qty";
	c_qty.type = "REAL";
	c_qty.replica_owned = 1;
	c_qty.server_type = "double precision";
	products.name = "products";
	products.mirror = "catalog";
	products.codec = "json";
	products.n_columns = 2;
	products.columns = pc;
	products.n_key = 1;
	products.key = pkey;
	stock.name = "stock";
	stock.mirror = "catalog";
	stock.codec = "json";
	stock.n_columns = 2;
	stock.columns = sc;
	stock.n_key = 1;
	stock.key = skey;
	fk.n_columns = 1;
	fk.columns = fkcols;
	fk.table = "products";
	fk.n_references = 1;
	fk.references = fkrefs;
	stock.n_foreign_keys = 1;
	stock.foreign_keys = &fkp;
	begin.n_schema = 2;
	begin.schema = schema;
	down.begin = &begin;
	k.n_parts = 1;
	k.parts = parts;
	r1.table = "products";
	r1.n_upserts = r1.n_keys = 1;
	r1.upserts = &u1;
	r1.keys = kp;
	r2.table = "stock";
	r2.n_upserts = r2.n_keys = 1;
	r2.upserts = &u2;
	r2.keys = kp;
	down.n_tables = 2;
	down.tables = rs;
	n = ms_head_pack(&h, out);
	n += ms_body_pack(&down, NULL, NULL, out + n);
	return n;
}

static size_t
pack_end_and_filed(uint8_t *out, int which)
{
	uint8_t		seal[MS_SEAL_BYTES] = {1};
	uint8_t		nonce[16] = {2};
	uint8_t		send_id[16] = {3};
	char	   *tables[] = {"products", "stock"};
	Sync__EndSnapshot end = SYNC__END_SNAPSHOT__INIT;
	Sync__Filed filed = SYNC__FILED__INIT;
	Sync__Refusal ref = SYNC__REFUSAL__INIT;
	Sync__Refusal *refp = &ref;
	Sync__Key	k = SYNC__KEY__INIT;
	char	   *parts[] = {"x", "y"};
	size_t		n;

	end.n_tables = 2;
	end.tables = tables;
	k.n_parts = 2;
	k.parts = parts;
	ref.table = "sales";
	ref.key = &k;
	ref.reason = "a constraint refused it";
	filed.send_id.data = send_id;
	filed.send_id.len = 16;
	filed.rows = 3;
	filed.n_refused = 1;
	filed.refused = &refp;
	if (which == 0)
	{
		ms_head		h = {MS_PROTOCOL, ms_vector_epoch, 101, nonce, 100, nonce, seal, ms_vector_replica, 0, 0};

		n = ms_head_pack(&h, out);
		return n + ms_body_pack(NULL, &end, NULL, out + n);
	}
	else
	{
		ms_head		h = {MS_PROTOCOL, ms_vector_epoch, 0, NULL, 0, NULL, NULL, ms_vector_replica, 0, 0};

		n = ms_head_pack(&h, out);
		return n + ms_body_pack(NULL, NULL, &filed, out + n);
	}
}

static size_t
pack_up(uint8_t *out)
{
	Sync__Up	up = SYNC__UP__INIT;
	Sync__Applied ap = SYNC__APPLIED__INIT;
	Sync__Rows	r = SYNC__ROWS__INIT;
	Sync__Rows *rp = &r;
	Sync__Key	k = SYNC__KEY__INIT,
				kd = SYNC__KEY__INIT;
	Sync__Key  *kp = &k,
			   *kdp = &kd;
	char	   *parts[] = {"0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1", "5"};
	char	   *dparts[] = {"0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1", "4"};
	ProtobufCBinaryData row = {12, (uint8_t *) "{\"total\":12}"};
	Sync__Digest d = SYNC__DIGEST__INIT;
	Sync__Digest *dp = &d;
	Sync__Backlog b = SYNC__BACKLOG__INIT;
	Sync__Backlog *bp = &b;
	uint8_t		send_id[16] = {7};
	uint8_t		seal[32] = {8};

	up.protocol = MS_PROTOCOL;
	up.replica.data = (uint8_t *) ms_vector_replica;
	up.replica.len = 16;
	up.send_id.data = send_id;
	up.send_id.len = 16;
	ap.epoch.data = (uint8_t *) ms_vector_epoch;
	ap.epoch.len = 16;
	ap.number = 42;
	ap.nonce.data = (uint8_t *) ms_vector_nonce;
	ap.nonce.len = 16;
	ap.seal.data = seal;
	ap.seal.len = 32;
	up.applied = &ap;
	k.n_parts = 2;
	k.parts = parts;
	kd.n_parts = 2;
	kd.parts = dparts;
	r.table = "sales";
	r.n_upserts = r.n_keys = 1;
	r.upserts = &row;
	r.keys = &kp;
	r.n_deletes = 1;
	r.deletes = &kdp;
	up.n_rows = 1;
	up.rows = &rp;
	d.table = "products";
	d.count = 3;
	d.fnv = 0x20ea5df0c6c56817;
	up.n_digests = 1;
	up.digests = &dp;
	b.table = "sales";
	b.unsent = 2;
	up.n_backlog = 1;
	up.backlog = &bp;
	return sync__up__pack(&up, out);
}

/*
 * Decode every truncation and every single-bit flip: each is refused with a
 * reason, or decodes to a message that passes the checks and packs again.
 */
static void
mutate_all(const char *what, const uint8_t *msg, size_t n, int is_up)
{
	uint8_t    *buf = malloc(n);
	int			decoded = 0,
				refused = 0,
				bad = 0,
				differ = 0;
	const char *first = NULL;

	for (size_t cut = 0; cut <= n + 8 * n; cut++)
	{
		size_t		len = n;
		ms_wire_status st;
		char		reason[MS_REASON_MAX];
		void	   *m;

		memcpy(buf, msg, n);
		if (cut < n)
			len = cut;
		else if (cut > n)
			buf[(cut - n - 1) / 8] ^= (uint8_t) (1 << ((cut - n - 1) % 8));
		else
			continue;
		if (!is_up)
		{
			/* out of memory at an allocation the cut picks */
			const char *why = rs_same(buf, len, 1 << 20, 1 + (long) (cut % 7));

			if (why != NULL)
			{
				differ++;
				if (first == NULL)
					first = why;
			}
		}
		if (is_up)
			m = ms_up_decode(buf, len, 1 << 20, &ms_test_allocator, &st, reason);
		else
			m = ms_to_replica_decode(buf, len, 1 << 20, &ms_test_allocator, &st, reason);
		if (m == NULL)
		{
			refused++;
			if (reason[0] == '\0')
				bad++;
			continue;
		}
		decoded++;
		if (st == MS_WIRE_OK)
		{
			char		r2[MS_REASON_MAX];
			bool		ok = is_up ? ms_up_check(m, r2) : ms_to_replica_check(m, r2);

			if (!ok)
				bad++;
		}
		if (is_up)
			sync__up__free_unpacked(m, &ms_test_allocator);
		else
			sync__to_replica__free_unpacked(m, &ms_test_allocator);
	}
	CHECK(bad == 0, "%s: every mutation refused with a reason or valid (%d decoded, %d refused)",
		  what, decoded, refused);
	CHECK(refused > 0, "%s: mutations are refused", what);
	CHECK(differ == 0, "%s: the replica's read agrees with the decode on every mutation (%d differ: %s)",
		  what, differ, first ? first : "");
	free(buf);
}

void
test_mutations(void)
{
	uint8_t		buf[2048];
	size_t		n;

	n = pack_vector(buf);
	mutate_all("vector Down", buf, n, 0);
	n = pack_snapshot(buf);
	mutate_all("snapshot Down", buf, n, 0);
	{
		rs_arena	a = {NULL, 0, 0};
		ms_allocator pa = {rs_alloc, rs_free, &a};
		ms_wire_status st;
		char		reason[MS_REASON_MAX];
		Sync__ToReplica *m = ms_to_replica_read(buf, n, 1 << 20, &pa, &st, reason);

		CHECK(rs_same(buf, n, 1 << 20, 0) == NULL, "the replica reads a snapshot as the decode does");
		/* its rows were read in one walk: left where they are, not copied by protobuf-c */
		CHECK(m != NULL && st == MS_WIRE_OK && m->down->n_tables == 2 &&
			  m->down->tables[1]->upserts[0].data > buf && m->down->tables[1]->upserts[0].data < buf + n &&
			  strcmp(m->down->tables[1]->keys[0]->parts[0], "1") == 0,
			  "a snapshot's rows are read where they are: %s", reason);
		rs_arena_free(&a);
	}
	n = pack_end_and_filed(buf, 0);
	mutate_all("EndSnapshot", buf, n, 0);
	n = pack_end_and_filed(buf, 1);
	mutate_all("Filed", buf, n, 0);
	n = pack_up(buf);
	mutate_all("Up", buf, n, 1);
}

void
test_refusals(void)
{
	uint8_t		buf[2048];
	size_t		n;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	Sync__ToReplica *m;

	/* each valid sample decodes */
	n = pack_snapshot(buf);
	m = ms_to_replica_decode(buf, n, 1 << 20, &ms_test_allocator, &st, reason);
	CHECK(m != NULL && m->down->begin && m->down->begin->n_schema == 2, "snapshot decodes: %s", reason);
	if (m)
		sync__to_replica__free_unpacked(m, &ms_test_allocator);
	n = pack_end_and_filed(buf, 0);
	m = ms_to_replica_decode(buf, n, 1 << 20, &ms_test_allocator, &st, reason);
	CHECK(m != NULL && m->body_case == SYNC__TO_REPLICA__BODY_END_SNAPSHOT, "EndSnapshot decodes: %s", reason);
	if (m)
		sync__to_replica__free_unpacked(m, &ms_test_allocator);
	n = pack_end_and_filed(buf, 1);
	m = ms_to_replica_decode(buf, n, 1 << 20, &ms_test_allocator, &st, reason);
	CHECK(m != NULL && m->body_case == SYNC__TO_REPLICA__BODY_FILED, "Filed decodes: %s", reason);
	if (m)
		sync__to_replica__free_unpacked(m, &ms_test_allocator);
	{
		Sync__Up   *u;

		n = pack_up(buf);
		u = ms_up_decode(buf, n, 1 << 20, &ms_test_allocator, &st, reason);
		CHECK(u != NULL && u->n_rows == 1 && u->applied->number == 42, "Up decodes: %s", reason);
		if (u)
			sync__up__free_unpacked(u, &ms_test_allocator);
	}

	/*
	 * Rows naming their table twice, the longer first (the fuzz target's
	 * wire/found-table-twice): protobuf-c takes the last; the replica's read
	 * wrote each into room for the last
	 */
	{
		ms_head		h = {MS_PROTOCOL, ms_vector_epoch, 5, ms_vector_nonce, 0, NULL,
		ms_vector_secret, ms_vector_replica, 0, 0};
		uint8_t		rows[128],
					key[16],
					down[160];
		size_t		nr = 0,
					nk,
					nd;
		rs_arena	a = {NULL, 0, 0};
		ms_allocator pa = {rs_alloc, rs_free, &a};

		nk = ms_pb_len_field(key, 1, "7", 1);
		nr += ms_pb_len_field(rows + nr, 1, "a_table_of_a_longer_name", 24);
		nr += ms_pb_len_field(rows + nr, 1, "t", 1);
		nr += ms_pb_len_field(rows + nr, 2, "{\"id\":7}", 8);
		nr += ms_pb_len_field(rows + nr, 3, key, nk);
		nd = ms_pb_len_field(down, 2, rows, nr);
		n = ms_head_pack(&h, buf);
		n += ms_pb_len_field(buf + n, 9, down, nd);
		CHECK(rs_same(buf, n, 1 << 20, 0) == NULL, "a table named twice: read as the decode reads it");
		m = ms_to_replica_read(buf, n, 1 << 20, &pa, &st, reason);
		CHECK(m != NULL && m->down->n_tables == 1 && strcmp(m->down->tables[0]->table, "t") == 0 &&
			  m->down->tables[0]->n_upserts == 1, "a table named twice: the last name: %s", reason);
		rs_arena_free(&a);
		/* and nothing else: the names alone in their block, past its end (ASan) */
		nr = ms_pb_len_field(rows, 1, "a_table_of_a_longer_name", 24);
		nr += ms_pb_len_field(rows + nr, 1, "t", 1);
		nd = ms_pb_len_field(down, 2, rows, nr);
		n = ms_head_pack(&h, buf);
		n += ms_pb_len_field(buf + n, 9, down, nd);
		CHECK(rs_same(buf, n, 1 << 20, 0) == NULL, "a table named twice, no rows: read as the decode reads it");
	}
	/* a head alone has no body */
	{
		ms_head		h = {MS_PROTOCOL, ms_vector_epoch, 5, ms_vector_nonce, 0, NULL,
		ms_vector_secret, ms_vector_replica, 0, 0};

		n = ms_head_pack(&h, buf);
		m = ms_to_replica_decode(buf, n, 1 << 20, &ms_test_allocator, &st, reason);
		CHECK(m == NULL && st == MS_WIRE_MALFORMED, "a head alone is refused: %s", reason);
	}
	/* a later protocol decodes, flagged */
	{
		ms_head		h = {MS_PROTOCOL + 1, ms_vector_epoch, 5, ms_vector_nonce, 0, NULL,
		NULL, ms_vector_replica, 0, 0};
		Sync__EndSnapshot end = SYNC__END_SNAPSHOT__INIT;

		n = ms_head_pack(&h, buf);
		n += ms_body_pack(NULL, &end, NULL, buf + n);
		m = ms_to_replica_decode(buf, n, 1 << 20, &ms_test_allocator, &st, reason);
		CHECK(m != NULL && st == MS_WIRE_LATER_PROTOCOL && m->number == 5,
			  "a later protocol is recognised: %s", reason);
		if (m)
			sync__to_replica__free_unpacked(m, &ms_test_allocator);
	}
	/* upserts without keys */
	{
		Sync__Rows	r = SYNC__ROWS__INIT;
		ProtobufCBinaryData u = {2, (uint8_t *) "{}"};

		r.table = "t";
		r.n_upserts = 1;
		r.upserts = &u;
		CHECK(!ms_rows_check(&r, reason) && strstr(reason, "keys") != NULL, "an upsert needs its key: %s", reason);
	}
	/* UTF-8 */
	CHECK(ms_utf8_valid("caf\xc3\xa9", 5), "valid UTF-8");
	CHECK(!ms_utf8_valid("\xc3", 1), "truncated UTF-8");
	CHECK(!ms_utf8_valid("\xc0\xaf", 2), "overlong UTF-8");
	CHECK(!ms_utf8_valid("\xed\xa0\x80", 3), "a surrogate");
	CHECK(!ms_utf8_valid("a\0b", 3), "an embedded NUL");
	/* the ASCII fast path (eight bytes at a time): a bad byte anywhere in a long run is found */
	{
		char		s[40];

		memset(s, 'a', sizeof s);
		CHECK(ms_utf8_valid(s, sizeof s), "a long ASCII run");
		for (size_t at = 0; at < sizeof s; at++)
		{
			s[at] = '\0';
			CHECK(!ms_utf8_valid(s, sizeof s), "a NUL at byte %zu of a long run", at);
			s[at] = '\x80';
			CHECK(!ms_utf8_valid(s, sizeof s), "a stray continuation byte at byte %zu", at);
			s[at] = '\x7f';
			CHECK(ms_utf8_valid(s, sizeof s), "DEL at byte %zu is ASCII", at);
			s[at] = 'a';
		}
		memcpy(s + 30, "caf\xc3\xa9", 5);
		CHECK(ms_utf8_valid(s, sizeof s), "a two-byte character after a long run");
		CHECK(!ms_utf8_valid(s, 34), "a two-byte character cut short after a long run");
	}
	/* scan reasons */
	{
		uint8_t		t[] = {0x0a, 0x05, 'a'};

		CHECK(!ms_wire_scan(t, sizeof t, reason) && strstr(reason, "truncated") != NULL,
			  "scan says truncated: %s", reason);
	}
}
