/*
 * test_codec.c - rows in both codecs (docs/protocol.md 4): every type, and
 * every way a row can fail to decode, each refused with its reason while the
 * rest of the message applies; rows of a table the replica does not hold.
 */
#include "harness.h"

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
	CHECK(t_has(res, "\"unknown\":{\"unsent\":0,\"unfiled\":0,\"set_aside\":0,\"refused\":2}"),
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

void
test_codec(void)
{
	json_types();
	json_refusals();
	proto_rows();
	table_not_held();
	constraint_of_the_replica();
}
