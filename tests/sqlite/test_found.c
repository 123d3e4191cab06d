/*
 * test_found.c - what the fuzzers found (tests/fuzz), each as it was found:
 *   - an empty upsert of a json table is refused, the rest applies (clang's
 *     UBSan saw arithmetic on the NULL bytes protobuf-c gives an empty field;
 *     gcc's does not, so the input itself, tests/fuzz/corpus/apply_chain/
 *     found-empty-upsert, is what fails without the fix);
 *   - a field number 0 spelled in two bytes (0x81 0x00) inside a nested
 *     message: protobuf-c took it and packed it again in one byte, which it
 *     then refused, so a snapshot's Begin failed on reading back the schema
 *     it had just stored ("cannot be read"); now the message is refused as
 *     malformed and nothing of it is kept (tests/fuzz/corpus/wire/found-*).
 */
#include "harness.h"

#include "pbwrite.h"

void		test_found(void);

static void
empty_upsert(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d = tm_down();
	char	   *r;

	tm_upsert(tm_rows(d, "customers"), "", 0, "5", NULL);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":6,\"name\":\"Fay\",\"vip\":0}", -1, "6", NULL);
	r = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(r, "\"upserts\":1") && t_has(r, "\"refused\":1"), "an empty upsert is refused, the rest applies: %s %s",
		  S(r), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_refused WHERE tbl = 'customers' AND key = '1:5'"
				" AND reason LIKE '%not a JSON object%'") == 1, "and recorded with why");
	CHECK(t_int(db, "SELECT count(*) FROM customers WHERE id = 6") == 1, "the other row is held");
	sqlite3_close(db);
}

/* a length-delimited field of bytes, appended */
static size_t
field(uint8_t *out, uint32_t number, const uint8_t *p, size_t n)
{
	return ms_pb_len_field(out, number, p, n);
}

static void
field_zero_nested(void)
{
	tm_server	s;
	sqlite3    *db = t_open(NULL);
	Sync__Table *t = tm_table("things", "catalog", "json", "id", "id INTEGER, name TEXT");
	uint8_t		table[512];
	uint8_t		begin[600];
	uint8_t		down[700];
	uint8_t		nonce[16] = {7};
	size_t		n = sync__table__pack(t, table);
	size_t		b,
				d;
	tm_msg		head,
				m;
	uint64_t	before;
	char	   *r;

	/* the table, with a field 0 of 64 bits spelled 0x81 0x00 */
	table[n++] = 0x81;
	table[n++] = 0x00;
	memset(table + n, 0, 8);
	n += 8;
	b = field(begin, 1, table, n);	/* Begin.schema */
	d = field(down, 1, begin, b);	/* Down.begin */
	tm_server_init(&s, 0x20, 0x10);
	head = tm_message(&s, MS_PROTOCOL, 1, nonce, 0, NULL, NULL, NULL, NULL);
	m.data = tm_alloc(head.len + d + 16);
	memcpy(m.data, head.data, head.len);
	m.len = head.len + field(m.data + head.len, 9, down, d);	/* ToReplica.down */
	before = tm_checksum(db, 1);
	r = tm_apply(db, m);
	CHECK(r == NULL && t_has(tm_error(), "invalid field number"), "a nested field 0 is refused: %s %s", S(r), tm_error());
	CHECK(tm_checksum(db, 1) == before, "and nothing of it is kept");

	/* the replica takes the snapshot as it should be, and what follows it */
	{
		tm_msg		begin_ok,
					end;

		tm_shop_snapshot(&s, &begin_ok, &end);
		r = tm_apply(db, begin_ok);
		CHECK(t_has(r, "\"applied\""), "then a snapshot applies: %s %s", S(r), tm_error());
		r = tm_apply(db, end);
		CHECK(t_has(r, "\"applied\""), "and its end, the stored schema read back: %s %s", S(r), tm_error());
	}
	sqlite3_close(db);
}

void
test_found(void)
{
	empty_upsert();
	field_zero_nested();
}
