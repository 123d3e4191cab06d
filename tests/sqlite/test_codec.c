/*
 * test_codec.c - rows in both codecs (docs/protocol.md 4): every type, and
 * every way a row can fail to decode, each refused with its reason while the
 * rest of the message applies; rows of a table the replica does not hold;
 * a proto row as the relay writes it and as this replica writes it: the
 * same bytes, the same row (both sides walk it with src/shared/row.c).
 */
#include "harness.h"

#include <stdlib.h>

#include "pbwrite.h"
#include "row.h"
#include "vectors.h"

void		test_codec(void);

static const char *const cols =
"id INTEGER, i INTEGER, r REAL, t TEXT, b BLOB, j TEXT server=jsonb, n TEXT server=numeric";

static sqlite3 *
things(tm_server *s)
{
	sqlite3    *db = t_open(NULL);
	Sync__Table *schema[2];
	char	   *r;

	tm_server_init(s, 0x20, 0x10);
	schema[0] = tm_table("things", "catalog", "json", "id", cols);
	schema[1] = tm_table("pthings", "catalog", "proto", "id", cols);
	r = tm_apply(db, tm_next(s, tm_begin(schema, 2), NULL));
	CHECK(t_has(r, "\"applied\""), "the things: %s %s", S(r), tm_error());
	r = tm_apply(db, tm_next(s, NULL, tm_end("things", "pthings", NULL)));
	return db;
}

static void
json_types(void)
{
	tm_server	s;
	sqlite3    *db = things(&s);
	Sync__Down *d = tm_down();
	Sync__Rows *r = tm_rows(d, "things");
	char	   *res;
	char	   *t;

	tm_upsert(r, "{\"id\":1,\"i\":-9223372036854775808,\"r\":1.5e3,"
			  "\"t\":\"h\\u00e9llo \\ud83d\\ude00 \\\"q\\\" \\\\ \\/\\n\","
			  "\"b\":\"\\\\x00ff10\",\"j\":{\"a\":[1, 2,{\"b\":null}]},\"n\":12.50}", -1, "1", NULL);
	tm_upsert(r, " { \"id\" : 2 , \"i\" : true , \"r\" : \"-Infinity\" , \"t\" : 123 , \"b\" : null } ", -1, "2", NULL);
	tm_upsert(r, "{\"id\":3,\"i\":1e2,\"r\":7,\"t\":false,\"j\":[],\"b\":\"\\\\x\"}", -1, "3", NULL);
	tm_upsert(r, "{\"id\":4,\"i\":9223372036854775807,\"t\":\"\"}", -1, "4", NULL);
	tm_upsert(r, "{\"t\":\"text key\",\"id\":5}", -1, "5", NULL);
	tm_upsert(r, "{}", -1, "6", NULL);	/* no key column: refused */
	res = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(res, "\"upserts\":5") && t_has(res, "\"refused\":1"), "json rows: %s %s", S(res), tm_error());
	CHECK(t_int(db, "SELECT i = -9223372036854775807 - 1 AND typeof(i) = 'integer' FROM things WHERE id = 1") == 1,
		  "the least 64-bit integer");
	CHECK(t_int(db, "SELECT r = 1500.0 AND typeof(r) = 'real' FROM things WHERE id = 1") == 1, "1.5e3 is REAL 1500");
	t = t_text(db, "SELECT t FROM things WHERE id = 1");
	CHECK(t && strcmp(t, "h\xc3\xa9llo \xf0\x9f\x98\x80 \"q\" \\ /\n") == 0, "escapes and surrogate pairs: %s", S(t));
	sqlite3_free(t);
	CHECK(t_int(db, "SELECT b = X'00ff10' FROM things WHERE id = 1") == 1, "\\\\x hex is a BLOB");
	t = t_text(db, "SELECT j FROM things WHERE id = 1");
	CHECK(t && strcmp(t, "{\"a\":[1, 2,{\"b\":null}]}") == 0, "nested JSON in TEXT, as its text: %s", S(t));
	sqlite3_free(t);
	t = t_text(db, "SELECT n || ' ' || typeof(n) FROM things WHERE id = 1");
	CHECK(t && strcmp(t, "12.50 text") == 0, "a number in TEXT keeps its digits: %s", S(t));
	sqlite3_free(t);
	CHECK(t_int(db, "SELECT i = 1 AND r < -1e308 AND t = '123' AND b IS NULL FROM things WHERE id = 2") == 1,
		  "true, -Infinity, a number as TEXT, null");
	CHECK(t_int(db, "SELECT i = 100 AND typeof(i) = 'integer' AND r = 7.0 AND t = 'false' AND j = '[]'"
				" AND b = X'' FROM things WHERE id = 3") == 1, "1e2 as INTEGER, 7 as REAL, false as TEXT, empty blob");
	CHECK(t_int(db, "SELECT i = 9223372036854775807 AND t = '' FROM things WHERE id = 4") == 1, "the greatest integer");
	CHECK(t_int(db, "SELECT i IS NULL AND t = 'text key' FROM things WHERE id = 5") == 1,
		  "keys in any order, absent columns NULL");
	sqlite3_close(db);
}

/*
 * Strings read eight bytes at a time (codec.c, string_at): an escape, a
 * quote, a character of two bytes or a control character at any place of
 * a long string, a key spelled with an escape, and a key that only begins
 * like the column the relay writes next.
 */
static void
json_long_strings(void)
{
	static const struct
	{
		const char *json;		/* as the row spells it */
		const char *text;		/* as the column holds it; NULL: refused */
	}			kinds[] = {
		{"\\\"", "\""},
		{"\\\\", "\\"},
		{"\\u00e9", "\xc3\xa9"},
		{"\xc3\xa9", "\xc3\xa9"},
		{"\\/", "/"},
		{"\x01", NULL},
	};
	enum
	{
		LONG = 27
	};
	int			nkinds = (int) (sizeof kinds / sizeof kinds[0]);
	tm_server	s;
	sqlite3    *db = things(&s);
	Sync__Down *d = tm_down();
	Sync__Rows *r = tm_rows(d, "things");
	int			id = 0;
	int			good = 0;
	int			refused = 0;
	char	   *res;

	for (int k = 0; k < nkinds; k++)
		for (int at = 0; at <= LONG; at++)
		{
			char		key[16];
			char	   *row = sqlite3_mprintf("{\"id\":%d,\"t\":\"%.*s%s%.*s\"}", ++id, at,
											  "abcdefghijklmnopqrstuvwxyz0123456789", kinds[k].json,
											  LONG - at, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");

			snprintf(key, sizeof key, "%d", id);
			tm_upsert(r, row, -1, key, NULL);
			sqlite3_free(row);
			if (kinds[k].text)
				good++;
			else
				refused++;
		}
	/* a key with an escape, and keys that begin as the next column does ("i" of "id", "idx") */
	tm_upsert(r, "{\"\\u0069d\":1000,\"\\u0074\":\"escaped key\",\"i\":7}", -1, "1000", NULL);
	tm_upsert(r, "{\"id\":1001,\"idx\":1}", -1, "1001", NULL);
	/* spaces around every key, colon and value */
	tm_upsert(r, " {\n\t\"id\" : 1002 , \"t\"\r: \"spaced\" ,\"i\" :3 } ", -1, "1002", NULL);
	/* two-byte characters in nested JSON and after an escape */
	tm_upsert(r, "{\"id\":1003,\"t\":\"\\n\xc3\xa9\",\"j\":[\"\xc3\xa9\"]}", -1, "1003", NULL);
	res = tm_apply(db, tm_next(&s, d, NULL));
	{
		char		expect[64];

		snprintf(expect, sizeof expect, "\"upserts\":%d,", good + 3);
		CHECK(t_has(res, expect), "long strings: %s %s", S(res), tm_error());
		snprintf(expect, sizeof expect, "\"refused\":%d,", refused + 1);
		CHECK(t_has(res, expect), "a control character anywhere refused: %s", S(res));
	}
	id = 0;
	for (int k = 0; k < nkinds; k++)
		for (int at = 0; at <= LONG; at++)
		{
			char	   *want;
			char	   *q;
			long long	same;

			++id;
			if (kinds[k].text == NULL)
				continue;
			want = sqlite3_mprintf("%.*s%s%.*s", at, "abcdefghijklmnopqrstuvwxyz0123456789", kinds[k].text,
								   LONG - at, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
			q = sqlite3_mprintf("SELECT t = %Q FROM things WHERE id = %d", want, id);
			same = t_int(db, q);
			CHECK(same == 1, "kind %d at %d: as sent (%s)", k, at, want);
			sqlite3_free(q);
			sqlite3_free(want);
		}
	CHECK(t_int(db, "SELECT t = 'escaped key' AND i = 7 FROM things WHERE id = 1000") == 1, "a key spelled with escapes");
	CHECK(t_int(db, "SELECT t = 'spaced' AND i = 3 FROM things WHERE id = 1002") == 1, "keys and values spaced out");
	CHECK(t_int(db, "SELECT t = char(10, 233) AND j = '[\"' || char(233) || '\"]' FROM things WHERE id = 1003") == 1,
		  "two-byte characters after an escape and nested");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_refused WHERE tbl = 'things' AND key = '4:1001'"
				" AND reason LIKE '%\"idx\" is not a column%'") == 1, "a key that only begins as a column's is not it");
	sqlite3_close(db);
}

typedef struct bad_row
{
	const char *row;
	const char *reason;			/* a part of the refusal's reason */
} bad_row;

static void
json_refusals(void)
{
	static const bad_row bad[] = {
		{"{\"id\":1,\"i\":1.5}", "whole numbers"},
		{"{\"id\":2,\"i\":\"7\"}", "cannot take a string"},
		{"{\"id\":3,\"r\":true}", "cannot take a boolean"},
		{"{\"id\":4,\"b\":\"00ff\"}", "takes a string"},
		{"{\"id\":5,\"b\":\"\\\\x0g\"}", "not a hex digit"},
		{"{\"id\":6,\"zz\":1}", "is not a column"},
		{"{\"id\":7,\"i\":1,\"i\":2}", "given twice"},
		{"{\"id\":8,", "not JSON"},
		{"[8]", "not a JSON object"},
		{"{\"id\":10} x", "bytes after"},
		{"{\"id\":11,\"t\":\"\\ud800\"}", "surrogate"},
		{"{\"id\":12,\"t\":\"a\\u0000b\"}", "\\u0000"},
		{"{\"id\":99}", "are not its key"},
		{"{\"id\":14,\"i\":99999999999999999999}", "out of range"},
		{"{\"id\":15,\"t\":\"\xff\"}", "UTF-8"},
		{"{\"id\":null}", "NULL"},
		{"{\"id\":17,\"j\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
		"too deep"},
		{"{\"id\":18,\"t\":\"tab\there\"}", "control character"},
		{"{\"id\":19,\"t\":\"\\q\"}", "unknown escape"},
		{"{\"id\":20,\"r\":01}", "not JSON"},
		{"{\"id\":21,\"r\":1.}", "not JSON"},
		{"{\"id\":22,\"b\":1}", "cannot take a number"},
		{"{\"id\":23,\"i\":{}}", "nested JSON"},
		{"{\"id\":24,\"r\":\"NaN\"}", "cannot take a string"},
		{"{\"id\":25 \"t\":1}", "',' or '}'"},
		{"{\"id\":26,\"t\":nul}", "not JSON"},
		{"", "not a JSON object"},
		/* UTF-8 broken in a string shorter than eight bytes, and overlong */
		{"{\"id\":28,\"t\":\"\xc3\"}", "UTF-8"},
		{"{\"id\":29,\"t\":\"\xc0\xaf\"}", "UTF-8"},
		/* keys spaced out, cut short, empty, or a column's name with more after it */
		{" \t\n{ \"id\" :30 ,\r\"zz\" : 1 }", "\"zz\" is not a column"},
		{"{\"id\":31,\"t", "not JSON"},
		{"{\"id\":32,\"\":1}", "\"\" is not a column"},
		{"{\"id\":33,\"t\"\"i\":1}", "not followed by ':'"},
		/* broken UTF-8 read where it lies: a long string, after an escape, nested, after a refusal */
		{"{\"id\":34,\"t\":\"abcdefghij\xff klmnop\"}", "UTF-8"},
		{"{\"id\":35,\"t\":\"a\\n\xff\"}", "UTF-8"},
		{"{\"id\":36,\"j\":[\"\xff\"]}", "UTF-8"},
		{"{\"id\":37,\"zz\":1,\"t\":\"\xff\"}", "UTF-8"},
	};
	int			nbad = (int) (sizeof bad / sizeof bad[0]);
	tm_server	s;
	sqlite3    *db = things(&s);
	Sync__Down *d = tm_down();
	Sync__Rows *r = tm_rows(d, "things");
	char	   *res;
	char		key[16];
	char		expect[64];

	for (int i = 0; i < nbad; i++)
	{
		snprintf(key, sizeof key, "%d", i + 1);
		tm_upsert(r, bad[i].row, -1, key, NULL);
	}
	tm_upsert(r, "{\"id\":100,\"t\":\"fine\"}", -1, "100", NULL);
	res = tm_apply(db, tm_next(&s, d, NULL));
	snprintf(expect, sizeof expect, "\"upserts\":1,");
	CHECK(t_has(res, expect), "one good row among the bad: %s %s", S(res), tm_error());
	snprintf(expect, sizeof expect, "\"refused\":%d", nbad);
	CHECK(t_has(res, expect), "every bad row refused: %s", S(res));
	for (int i = 0; i < nbad; i++)
	{
		char	   *q = sqlite3_mprintf("SELECT reason FROM _sync_refused WHERE tbl = 'things' AND key = '%d:%d'",
										i + 1 >= 10 ? 2 : 1, i + 1);
		char	   *reason = t_text(db, q);

		CHECK(t_has(reason, bad[i].reason), "row %d (%s) refused: %s", i + 1, bad[i].row, S(reason));
		sqlite3_free(reason);
		sqlite3_free(q);
	}
	CHECK(t_int(db, "SELECT count(*) FROM things") == 1, "none of them is in the table");
	/* a refused row that comes again, good, is taken and its refusal cleared */
	d = tm_down();
	tm_upsert(tm_rows(d, "things"), "{\"id\":1,\"i\":2}", -1, "1", NULL);
	res = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(res, "\"upserts\":1"), "the row again: %s", S(res));
	CHECK(t_int(db, "SELECT count(*) FROM _sync_refused WHERE key = '1:1'") == 0, "its refusal is cleared");
	sqlite3_close(db);
}

static void
proto_rows(void)
{
	tm_server	s;
	sqlite3    *db = things(&s);
	Sync__Down *d = tm_down();
	Sync__Rows *r = tm_rows(d, "pthings");
	tm_buf		b;
	char	   *res;
	char	   *t;

	memset(&b, 0, sizeof b);
	tm_pb_int(&b, 1, 1);
	tm_pb_int(&b, 2, -5);
	tm_pb_double(&b, 3, 2.25);
	tm_pb_bytes(&b, 4, "h\xc3\xa9llo", 6);
	tm_pb_bytes(&b, 5, "\x00\x01", 2);
	tm_pb_bytes(&b, 6, "{}", 2);
	tm_pb_bytes(&b, 7, "1.0", 3);
	tm_upsert(r, b.data, (long) b.len, "1", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_bytes(&b, 4, "", 0);	/* fields in any order; zero and empty are values */
	tm_pb_int(&b, 2, 0);
	tm_pb_int(&b, 1, 2);
	tm_upsert(r, b.data, (long) b.len, "2", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_int(&b, 1, INT64_MIN);
	tm_upsert(r, b.data, (long) b.len, "-9223372036854775808", NULL);
	/* refused */
	memset(&b, 0, sizeof b);
	tm_pb_int(&b, 1, 10);
	tm_pb_bytes(&b, 2, "x", 1);	/* INTEGER as length-delimited */
	tm_upsert(r, b.data, (long) b.len, "10", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_int(&b, 1, 11);
	tm_pb_int(&b, 99, 1);		/* not a column */
	tm_upsert(r, b.data, (long) b.len, "11", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_int(&b, 1, 12);
	tm_pb_int(&b, 1, 12);		/* twice */
	tm_upsert(r, b.data, (long) b.len, "12", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_int(&b, 1, 13);
	tm_pb_raw(&b, "\x10\xff", 2);	/* truncated varint */
	tm_upsert(r, b.data, (long) b.len, "13", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_int(&b, 1, 14);
	tm_pb_bytes(&b, 4, "\xc3", 1);	/* not UTF-8 */
	tm_upsert(r, b.data, (long) b.len, "14", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_int(&b, 1, 15);
	tm_pb_raw(&b, "\x19\x00\x00\x00\x00\x00\x00\xf8\x7f", 9);	/* NaN */
	tm_upsert(r, b.data, (long) b.len, "15", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_int(&b, 1, 16);
	tm_pb_raw(&b, "\x22\x05\x61", 3);	/* length past the end */
	tm_upsert(r, b.data, (long) b.len, "16", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_raw(&b, "\x00\x01", 2);	/* field 0 */
	tm_upsert(r, b.data, (long) b.len, "17", NULL);
	memset(&b, 0, sizeof b);
	tm_pb_int(&b, 1, 18);
	tm_pb_raw(&b, "\x1d\x00\x00\x00\x00", 5);	/* REAL as 32 bits */
	tm_upsert(r, b.data, (long) b.len, "18", NULL);
	res = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(res, "\"upserts\":3") && t_has(res, "\"refused\":9"), "proto rows: %s %s", S(res), tm_error());
	CHECK(t_int(db, "SELECT i = -5 AND r = 2.25 AND t = 'h\xc3\xa9llo' AND b = X'0001' AND j = '{}' AND n = '1.0'"
				" FROM pthings WHERE id = 1") == 1, "every type");
	CHECK(t_int(db, "SELECT i = 0 AND t = '' AND r IS NULL AND b IS NULL FROM pthings WHERE id = 2") == 1,
		  "zero and empty are values, absent is NULL");
	CHECK(t_int(db, "SELECT count(*) FROM pthings WHERE id = -9223372036854775807 - 1") == 1, "zigzag of the least");
	t = t_text(db, "SELECT group_concat(reason, ' | ') FROM (SELECT reason FROM _sync_refused ORDER BY key)");
	CHECK(t_has(t, "is not a varint") && t_has(t, "field 99") && t_has(t, "given twice") && t_has(t, "truncated") &&
		  t_has(t, "UTF-8") && t_has(t, "NaN") && t_has(t, "not a 64-bit field"), "the reasons: %s", S(t));
	sqlite3_free(t);
	sqlite3_close(db);
}

/* what the walker saw of a row: the values by column */
typedef struct walked
{
	bool		present[8];
	ms_row_value v[8];
} walked;

static bool
walked_value(void *arg, int column, const ms_row_value *v, char reason[MS_REASON_MAX])
{
	walked	   *w = arg;

	(void) reason;
	if (column >= 8)
		return false;
	w->present[column] = true;
	w->v[column] = *v;
	return true;
}

/* walk a row of t with src/shared/row.c, as the server walks an upload */
static bool
walk_row(const Sync__Table *t, const uint8_t *row, size_t len, walked *w, char reason[MS_REASON_MAX])
{
	ms_row_column rc[8];
	ms_row_shape shape;
	bool		ok;

	memset(w, 0, sizeof *w);
	for (size_t i = 0; i < t->n_columns && i < 8; i++)
	{
		rc[i].name = t->columns[i]->name;
		rc[i].field = t->columns[i]->field;
		if (!ms_type_parse(t->columns[i]->type, &rc[i].type))
			return false;
	}
	if (!ms_row_shape_init(&shape, t->name, rc, (int) t->n_columns, &ms_test_allocator))
		return false;
	ok = ms_row_walk(&shape, row, len, walked_value, w, reason);
	ms_row_shape_free(&shape, &ms_test_allocator);
	return ok;
}

/* the row as the relay writes it (src/pg/relay/load.c encode_proto): columns in order, NULL absent */
static size_t
relay_row(uint8_t *out)
{
	size_t		n = 0;

	n += ms_pb_varint_field(out + n, 1, ms_pb_zigzag(1));
	n += ms_pb_varint_field(out + n, 2, ms_pb_zigzag(INT64_MIN));
	n += ms_pb_double_field(out + n, 3, -2.5);
	n += ms_pb_len_field(out + n, 4, "h\xc3\xa9", 3);
	n += ms_pb_len_field(out + n, 5, "\x00\xff", 2);
	/* j (6) is NULL: absent */
	n += ms_pb_len_field(out + n, 7, "", 0);
	return n;
}

static void
proto_both_ways(void)
{
	tm_server	s;
	sqlite3    *db = t_open(NULL);
	Sync__Table *schema[2];
	Sync__Down *d;
	Sync__Up   *up;
	tm_msg		m;
	char	   *res;
	uint8_t		relay[128];
	size_t		nrelay = relay_row(relay);
	const ProtobufCBinaryData *mine = NULL;
	walked		w1;
	walked		w2;
	char		reason[MS_REASON_MAX];
	tm_buf		twice;

	tm_server_init(&s, 0x21, 0x11);
	schema[0] = tm_table("pthings", "catalog", "proto", "id", cols);
	schema[1] = tm_table("precs", "record", "proto", "id", cols);
	res = tm_apply(db, tm_next(&s, tm_begin(schema, 2), NULL));
	res = tm_apply(db, tm_next(&s, NULL, tm_end("pthings", "precs", NULL)));
	CHECK(t_has(res, "\"applied\""), "the tables: %s %s", S(res), tm_error());

	/* the replica writes the row: its upload carries it in the proto codec (codec.c) */
	CHECK(t_exec(db, "INSERT INTO precs (id, i, r, t, b, n) VALUES (1, -9223372036854775807 - 1, -2.5,"
				 " 'h\xc3\xa9', X'00ff', '')", NULL) == SQLITE_OK, "a record written");
	m = tm_upload(db);
	up = m.data ? sync__up__unpack(NULL, m.len, m.data) : NULL;
	CHECK(up != NULL, "the upload: %s", tm_error());
	for (size_t i = 0; up != NULL && i < up->n_rows; i++)
		if (strcmp(up->rows[i]->table, "precs") == 0 && up->rows[i]->n_upserts == 1)
			mine = &up->rows[i]->upserts[0];
	CHECK(mine != NULL, "the upload carries the record");
	if (mine != NULL)
	{
		bool		ok1 = walk_row(schema[1], mine->data, mine->len, &w1, reason);
		bool		ok2 = walk_row(schema[1], relay, nrelay, &w2, reason);
		bool		same = ok1 && ok2;

		CHECK(mine->len == nrelay && memcmp(mine->data, relay, nrelay) == 0,
			  "the replica writes the row's bytes as the relay writes them");
		CHECK(ok1 && ok2, "both walk: %s", reason);
		for (int c = 0; c < 7 && same; c++)
			same = w1.present[c] == w2.present[c] &&
				(!w1.present[c] || (w1.v[c].i == w2.v[c].i && w1.v[c].n == w2.v[c].n &&
									memcmp(&w1.v[c].d, &w2.v[c].d, sizeof(double)) == 0 &&
									(w1.v[c].n == 0 || memcmp(w1.v[c].p, w2.v[c].p, w1.v[c].n) == 0)));
		CHECK(same, "the same row walked from either");
		CHECK(ok1 && w1.v[1].i == INT64_MIN && w1.v[2].d == -2.5 && w1.v[3].n == 3 && w1.v[4].n == 2 &&
			  !w1.present[5] && w1.present[6] && w1.v[6].n == 0, "and it is the row written");
	}
	if (up != NULL)
		sync__up__free_unpacked(up, NULL);

	/* the relay's bytes, applied: the same row as the one the replica wrote */
	d = tm_down();
	tm_upsert(tm_rows(d, "pthings"), relay, (long) nrelay, "1", NULL);
	memset(&twice, 0, sizeof twice);
	tm_pb_raw(&twice, relay, nrelay);
	tm_pb_int(&twice, 1, 2);	/* the key given twice, another value the second time */
	tm_upsert(tm_rows(d, "pthings"), twice.data, (long) twice.len, "2", NULL);
	res = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(res, "\"upserts\":1") && t_has(res, "\"refused\":1"), "the relay's row: %s %s", S(res), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM pthings p JOIN precs q ON p.id = q.id AND p.i = q.i AND p.r = q.r"
				" AND p.t = q.t AND p.b = q.b AND p.j IS NULL AND q.j IS NULL AND p.n = q.n") == 1,
		  "the row the relay wrote is the row the replica wrote");
	res = t_text(db, "SELECT reason FROM _sync_refused WHERE tbl = 'pthings' AND key = '1:2'");
	CHECK(t_has(res, "field 1 (column \"id\") is given twice"), "a field given twice is refused: %s", S(res));
	sqlite3_free(res);
	CHECK(t_int(db, "SELECT count(*) FROM pthings WHERE id = 2") == 0, "and not taken");
	sqlite3_close(db);
}

static void
table_not_held(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d = tm_down();
	char	   *res;
	uint64_t	sum = tm_checksum(db, 0);

	tm_upsert(tm_rows(d, "unknown"), "{\"id\":1}", -1, "1", NULL);
	tm_upsert(tm_rows(d, "unknown"), "{\"id\":2}", -1, "2", NULL);
	tm_delete(tm_rows(d, "unknown"), "3", NULL);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":3,\"name\":\"Cy\"}", -1, "3", NULL);
	res = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(res, "\"upserts\":1") && t_has(res, "\"refused\":2"),
		  "rows of a table it does not hold are refused, the rest applies: %s %s", S(res), tm_error());
	CHECK(tm_checksum(db, 0) != sum && t_int(db, "SELECT count(*) FROM customers") == 3, "the customer is there");
	res = t_text(db, "SELECT reason FROM _sync_refused WHERE tbl = 'unknown' AND key = '1:1'");
	CHECK(t_has(res, "not held"), "its reason: %s", S(res));
	sqlite3_free(res);
	res = t_text(db, "SELECT sync_progress()");
	CHECK(t_has(res, "\"unknown\":{\"unsent\":0,\"unfiled\":0,\"set_aside\":0,\"refused\":2,\"waiting\":0,\"dropped\":0}"),
		  "progress counts them: %s", S(res));
	sqlite3_free(res);
	sqlite3_close(db);
}

static void
constraint_of_the_replica(void)
{
	tm_server	s;
	sqlite3    *db = t_shop(&s);
	Sync__Down *d = tm_down();
	char	   *res;

	/* the host added a rule of its own to a mirrored table */
	t_exec(db, "CREATE UNIQUE INDEX customers_name ON customers(name)", NULL);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":3,\"name\":\"Ada\"}", -1, "3", NULL);
	tm_upsert(tm_rows(d, "customers"), "{\"id\":4,\"name\":\"Dan\"}", -1, "4", NULL);
	res = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(res, "\"upserts\":1") && t_has(res, "\"refused\":1"),
		  "a row a local constraint refuses is refused, not fatal: %s %s", S(res), tm_error());
	res = t_text(db, "SELECT reason FROM _sync_refused WHERE key = '1:3'");
	CHECK(t_has(res, "UNIQUE"), "its reason: %s", S(res));
	sqlite3_free(res);
	sqlite3_close(db);
}

/*
 * A row's key columns against its wire key, compared where they are
 * (applyrows.c): parts of two kinds, a wire key of fewer or more parts, a
 * part that is a prefix of the row's; and a snapshot over rows the replica
 * has, out of key order, naming each row, one of them refused
 */
static void
keys_compared(void)
{
	sqlite3    *db = t_open(NULL);
	tm_server	s;
	Sync__Table *schema[1];
	Sync__Down *d;
	Sync__Rows *r;
	char	   *res;
	char	   *reason;
	static const char *const a = "aaaaaaaa-0000-0000-0000-000000000001";

	tm_server_init(&s, 0x20, 0x10);
	schema[0] = tm_table("pairs", "catalog", "json", "origin,id", "origin TEXT, id INTEGER, v TEXT");
	d = tm_begin(schema, 1);
	r = tm_rows(d, "pairs");
	/* out of key order, into a table the snapshot begins empty (named whole) */
	tm_upsert(r, "{\"origin\":\"aaaaaaaa-0000-0000-0000-000000000001\",\"id\":12,\"v\":\"twelve\"}", -1, a, "12", NULL);
	tm_upsert(r, "{\"origin\":\"aaaaaaaa-0000-0000-0000-000000000001\",\"id\":3,\"v\":\"three\"}", -1, a, "3", NULL);
	tm_upsert(r, "{\"origin\":\"b\",\"id\":-1,\"v\":\"minus\"}", -1, "b", "-1", NULL);
	tm_upsert(r, "{\"origin\":\"aaaaaaaa-0000-0000-0000-000000000001\",\"id\":1,\"v\":\"one\"}", -1, a, "1", NULL);
	/* keys that are not the row's: one part short, one too many, a part a prefix of the row's */
	tm_upsert(r, "{\"origin\":\"c\",\"id\":5}", -1, "c", NULL);
	tm_upsert(r, "{\"origin\":\"c\",\"id\":6}", -1, "c", "6", "x", NULL);
	tm_upsert(r, "{\"origin\":\"c\",\"id\":70}", -1, "c", "7", NULL);
	tm_upsert(r, "{\"origin\":\"cc\",\"id\":8}", -1, "c", "8", NULL);
	res = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(res, "\"upserts\":4,") && t_has(res, "\"refused\":4"), "four rows, four refused: %s %s",
		  S(res), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_refused WHERE tbl = 'pairs' AND reason LIKE '%are not its key%'"
				" AND key IN ('1:c', '1:c1:61:x', '1:c1:7', '1:c1:8')") == 4,
		  "each refused under its wire key");
	res = tm_apply(db, tm_next(&s, NULL, tm_end("pairs", NULL)));
	CHECK(t_has(res, "\"snapshot\":\"end\""), "the end: %s %s", S(res), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM pairs") == 4, "every good row is there");
	reason = t_text(db, "SELECT group_concat(v, ' ') FROM (SELECT v FROM pairs ORDER BY origin, id)");
	CHECK(reason && strcmp(reason, "one three twelve minus") == 0, "as sent: %s", S(reason));
	sqlite3_free(reason);

	/* again, over the rows it has: each named one by one, a bad row's key too, one not sent let go of */
	schema[0] = tm_table("pairs", "catalog", "json", "origin,id", "origin TEXT, id INTEGER, v TEXT");
	d = tm_begin(schema, 1);
	r = tm_rows(d, "pairs");
	tm_upsert(r, "{\"origin\":\"b\",\"id\":-1,\"v\":\"minus again\"}", -1, "b", "-1", NULL);
	tm_upsert(r, "{\"origin\":\"aaaaaaaa-0000-0000-0000-000000000001\",\"id\":3,\"v\":\"three again\"}", -1, a, "3", NULL);
	tm_upsert(r, "{\"origin\":\"aaaaaaaa-0000-0000-0000-000000000001\",\"id\":1,\"v\":7}", -1, a, "1", NULL);
	tm_upsert(r, "{\"origin\":\"aaaaaaaa-0000-0000-0000-000000000001\",\"id\":12", -1, a, "12", NULL);
	res = tm_apply(db, tm_next(&s, d, NULL));
	CHECK(t_has(res, "\"upserts\":3,") && t_has(res, "\"refused\":1"), "three rows, one refused: %s %s",
		  S(res), tm_error());
	CHECK(t_int(db, "SELECT count(*) FROM _sync_named WHERE tbl = 'pairs'") == 4 &&
		  t_int(db, "SELECT count(*) FROM _sync_named WHERE tbl = 'pairs' AND key = ''") == 0,
		  "each row named, the refused one too");
	CHECK(t_int(db, "SELECT count(*) FROM _sync_refused WHERE tbl = 'pairs'"
				" AND key = '36:aaaaaaaa-0000-0000-0000-0000000000012:12' AND reason LIKE '%not JSON%'") == 1,
		  "the row that does not decode, refused under its wire key");
	res = tm_apply(db, tm_next(&s, NULL, tm_end("pairs", NULL)));
	reason = t_text(db, "SELECT group_concat(v, ' ') FROM (SELECT v FROM pairs ORDER BY origin, id)");
	CHECK(reason && strcmp(reason, "7 three again twelve minus again") == 0,
		  "the rows it sent, the refused one kept as it was: %s %s %s", S(reason), S(res), tm_error());
	sqlite3_free(reason);
	sqlite3_close(db);
}

void
test_codec(void)
{
	json_types();
	json_long_strings();
	json_refusals();
	proto_rows();
	proto_both_ways();
	table_not_held();
	constraint_of_the_replica();
	keys_compared();
}
