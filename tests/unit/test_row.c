/*
 * test_row.c - the row walker (src/shared/row.c) over both sides' encodings
 * of the proto codec: a row written the way the relay writes it
 * (src/pg/relay/load.c: ms_pb_len_field) and the way a replica writes it
 * (src/sqlite/codec.c: ms_pb_len_head, then the bytes) is the same bytes and
 * walks to the same values, which are the values written; every way a row
 * can break is refused with its reason, a field given twice among them; the
 * field map and the column-by-column lookup agree on every truncation and
 * single-bit flip of a valid row.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pbwrite.h"
#include "row.h"
#include "vectors.h"

/* id INTEGER 1, r REAL 2, t TEXT 3, b BLOB 4, n INTEGER 7, and a replica's retired column */
static const ms_row_column cols[] = {
	{"id", MS_INTEGER, 1},
	{"r", MS_REAL, 2},
	{"t", MS_TEXT, 3},
	{"b", MS_BLOB, 4},
	{"n", MS_INTEGER, 7},
	{"gone", MS_INTEGER, 0},
};
#define NCOLS ((int) (sizeof cols / sizeof cols[0]))

/* What a walk saw: the values by column, in the order they came. */
typedef struct seen
{
	int			n;
	int			order[16];
	bool		present[NCOLS];
	ms_row_value v[NCOLS];
	int			refuse_at;		/* the visitor refuses this column; -1 never */
} seen;

static bool
collect(void *arg, int column, const ms_row_value *v, char reason[MS_REASON_MAX])
{
	seen	   *s = arg;

	if (column == s->refuse_at)
	{
		snprintf(reason, MS_REASON_MAX, "the visitor refuses column %d", column);
		return false;
	}
	s->present[column] = true;
	s->v[column] = *v;
	if (s->n < 16)
		s->order[s->n++] = column;
	return true;
}

static bool
ignore(void *arg, int column, const ms_row_value *v, char reason[MS_REASON_MAX])
{
	(void) arg;
	(void) column;
	(void) v;
	(void) reason;
	return true;
}

static bool
walk(const ms_row_shape *shape, const uint8_t *row, size_t len, seen *s, char reason[MS_REASON_MAX])
{
	memset(s, 0, sizeof *s);
	s->refuse_at = -1;
	reason[0] = '\0';
	return ms_row_walk(shape, row, len, collect, s, reason);
}

static bool
same_value(const ms_row_value *a, const ms_row_value *b)
{
	if (a->type != b->type)
		return false;
	switch (a->type)
	{
		case MS_INTEGER:
			return a->i == b->i;
		case MS_REAL:
			return memcmp(&a->d, &b->d, sizeof a->d) == 0;	/* NaN and -0.0 too */
		default:
			return a->n == b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
	}
}

static bool
same_rows(const seen *a, const seen *b)
{
	for (int c = 0; c < NCOLS; c++)
		if (a->present[c] != b->present[c] || (a->present[c] && !same_value(&a->v[c], &b->v[c])))
			return false;
	return true;
}

/* One row to write: which columns, with what. */
typedef struct row_in
{
	int64_t		id;
	bool		has_r;
	double		r;
	const char *t;				/* NULL: absent */
	size_t		tn;
	const char *b;
	size_t		bn;
	bool		has_n;
	int64_t		n;
} row_in;

/* the relay's way (load.c encode_proto): each field whole, in column order */
static size_t
write_like_relay(const row_in *in, uint8_t *out)
{
	size_t		n = 0;

	n += ms_pb_varint_field(out + n, 1, ms_pb_zigzag(in->id));
	if (in->has_r)
		n += ms_pb_double_field(out + n, 2, in->r);
	if (in->t)
		n += ms_pb_len_field(out + n, 3, in->t, in->tn);
	if (in->b)
		n += ms_pb_len_field(out + n, 4, in->b, in->bn);
	if (in->has_n)
		n += ms_pb_varint_field(out + n, 7, ms_pb_zigzag(in->n));
	return n;
}

/* a replica's way (codec.c ms_row_encode): a length-delimited field's head, then its bytes */
static size_t
write_like_replica(const row_in *in, uint8_t *out)
{
	size_t		n = 0;

	n += ms_pb_varint_field(out + n, 1, ms_pb_zigzag(in->id));
	if (in->has_r)
		n += ms_pb_double_field(out + n, 2, in->r);
	if (in->t)
	{
		n += ms_pb_len_head(out + n, 3, in->tn);
		memcpy(out + n, in->t, in->tn);
		n += in->tn;
	}
	if (in->b)
	{
		n += ms_pb_len_head(out + n, 4, in->bn);
		memcpy(out + n, in->b, in->bn);
		n += in->bn;
	}
	if (in->has_n)
		n += ms_pb_varint_field(out + n, 7, ms_pb_zigzag(in->n));
	return n;
}

/* the values walked are the values written */
static bool
walked_is_written(const seen *s, const row_in *in)
{
	return s->present[0] && s->v[0].type == MS_INTEGER && s->v[0].i == in->id &&
		s->present[1] == in->has_r &&
		(!in->has_r || (s->v[1].type == MS_REAL && memcmp(&s->v[1].d, &in->r, sizeof in->r) == 0)) &&
		s->present[2] == (in->t != NULL) &&
		(!in->t || (s->v[2].type == MS_TEXT && s->v[2].n == in->tn && memcmp(s->v[2].p, in->t, in->tn) == 0)) &&
		s->present[3] == (in->b != NULL) &&
		(!in->b || (s->v[3].type == MS_BLOB && s->v[3].n == in->bn && memcmp(s->v[3].p, in->b, in->bn) == 0)) &&
		s->present[4] == in->has_n && (!in->has_n || s->v[4].i == in->n) &&
		!s->present[5];
}

static void
both_ways(const ms_row_shape *shape)
{
	const row_in rows[] = {
		{INT64_MIN, true, -0.0, "", 0, "", 0, true, INT64_MAX},
		{INT64_MAX, true, HUGE_VAL, "h\xc3\xa9llo \xf0\x9f\x98\x80", 11, "\x00\x01\xff", 3, true, -1},
		{0, true, NAN, "0", 1, "\x00", 1, true, 0},
		{-1, false, 0, NULL, 0, NULL, 0, false, 0},
		{1, true, 2.25, "{\"a\":1}", 7, NULL, 0, false, 0},
	};
	uint8_t		a[256];
	uint8_t		b[256];
	char		reason[MS_REASON_MAX];

	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
	{
		size_t		na = write_like_relay(&rows[i], a);
		size_t		nb = write_like_replica(&rows[i], b);
		seen		sa;
		seen		sb;
		bool		oka = walk(shape, a, na, &sa, reason);
		bool		okb;

		CHECK(oka, "row %zu as the relay writes it walks: %s", i, reason);
		okb = walk(shape, b, nb, &sb, reason);
		CHECK(okb, "row %zu as a replica writes it walks: %s", i, reason);
		CHECK(na == nb && memcmp(a, b, na) == 0, "row %zu: the relay and a replica write the same bytes", i);
		CHECK(oka && okb && same_rows(&sa, &sb), "row %zu: the same rows on server and replica", i);
		CHECK(oka && walked_is_written(&sa, &rows[i]), "row %zu: the values walked are those written", i);
	}
}

static void
any_order(const ms_row_shape *shape)
{
	uint8_t		row[64];
	size_t		n = 0;
	seen		s;
	char		reason[MS_REASON_MAX];

	n += ms_pb_len_field(row + n, 4, "", 0);
	n += ms_pb_varint_field(row + n, 7, ms_pb_zigzag(0));
	n += ms_pb_varint_field(row + n, 1, ms_pb_zigzag(2));
	CHECK(walk(shape, row, n, &s, reason), "fields in any order: %s", reason);
	CHECK(s.n == 3 && s.order[0] == 3 && s.order[1] == 4 && s.order[2] == 0,
		  "each value handed over in the row's order");
	CHECK(s.present[3] && s.v[3].n == 0 && s.present[4] && s.v[4].i == 0,
		  "zero and empty are values");
	CHECK(!s.present[1] && !s.present[2], "absent fields are NULL: never handed over");
	CHECK(walk(shape, row, 0, &s, reason) && s.n == 0, "the empty row is all NULL");
}

typedef struct bad_row
{
	const char *what;
	const uint8_t *bytes;
	size_t		len;
	const char *reason;			/* a part of the reason */
} bad_row;

#define BAD(what, lit, reason) {what, (const uint8_t *) lit, sizeof lit - 1, reason}

static void
refusals(const ms_row_shape *shape)
{
	static const bad_row bad[] = {
		BAD("INTEGER as length-delimited", "\x0a\x01\x78", "(INTEGER) is not a varint"),
		BAD("INTEGER as 64 bits", "\x09\x00\x00\x00\x00\x00\x00\x00\x00", "is not a varint"),
		BAD("REAL as a varint", "\x08\x02\x10\x01", "(REAL) is not a 64-bit field"),
		BAD("REAL as 32 bits", "\x08\x02\x15\x00\x00\x00\x00", "not a 64-bit field"),
		BAD("TEXT as a varint", "\x08\x02\x18\x01", "(TEXT) is not length-delimited"),
		BAD("BLOB as 64 bits", "\x21\x00\x00\x00\x00\x00\x00\x00\x00", "(BLOB) is not length-delimited"),
		BAD("a field that is no column", "\x08\x02\x98\x06\x01", "field 99 of the row is not a column of table \"things\""),
		BAD("field 0", "\x00\x01", "field 0 of the row is not a column"),
		BAD("the retired column's field 0, as a string", "\x02\x00", "field 0 of the row"),
		BAD("a field given twice", "\x08\x02\x08\x02", "field 1 (column \"id\") is given twice"),
		BAD("a field given twice, with another value", "\x1a\x01\x61\x08\x02\x1a\x01\x62", "field 3 (column \"t\") is given twice"),
		BAD("a field given twice, of another wire type", "\x08\x02\x0a\x00", "given twice"),
		BAD("a truncated tag", "\x08\x02\x80", "malformed at byte 2"),
		BAD("a truncated varint", "\x08\x02\x38\xff", "malformed at byte 2"),
		BAD("a varint over 64 bits", "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", "malformed at byte 0"),
		BAD("a truncated double", "\x11\x00\x00\x00", "malformed at byte 0"),
		BAD("a length past the end", "\x08\x02\x1a\x05\x61", "malformed at byte 2"),
		BAD("a length over 64 bits", "\x22\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "malformed at byte 0"),
		BAD("TEXT that is not UTF-8", "\x1a\x01\xc3", "(TEXT) is not valid UTF-8"),
		BAD("TEXT holding NUL", "\x1a\x03\x61\x00\x62", "holds a NUL byte"),
		BAD("TEXT, an overlong form", "\x1a\x02\xc0\xaf", "not valid UTF-8"),
	};
	char		reason[MS_REASON_MAX];
	seen		s;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
	{
		bool		ok = walk(shape, bad[i].bytes, bad[i].len, &s, reason);

		CHECK(!ok && strstr(reason, bad[i].reason) != NULL, "%s is refused (%s): %s",
			  bad[i].what, bad[i].reason, ok ? "it walked" : reason);
	}
	/* a BLOB may hold anything: NUL and bytes that are no UTF-8 */
	CHECK(walk(shape, (const uint8_t *) "\x22\x03\x00\xc3\xff", 5, &s, reason) &&
		  s.present[3] && s.v[3].n == 3, "a BLOB holds any bytes: %s", reason);
	/* the visitor's refusal is the walk's, and the walk stops there */
	memset(&s, 0, sizeof s);
	s.refuse_at = 2;
	CHECK(!ms_row_walk(shape, (const uint8_t *) "\x08\x02\x1a\x01\x61\x22\x00", 7, collect, &s, reason) &&
		  strstr(reason, "the visitor refuses column 2") != NULL && s.n == 1 && !s.present[3],
		  "a visitor refuses the row: %s", reason);
	CHECK(!walk(shape, NULL, 3, &s, reason), "no bytes is refused");
	CHECK(walk(shape, NULL, 0, &s, reason), "no bytes and no length is the empty row");
}

static void
shapes(void)
{
	ms_row_column many[MS_ROW_COLUMNS_MAX + 1];
	ms_row_column sparse[] = {{"a", MS_INTEGER, 5}, {"b", MS_TEXT, 536870911}, {"c", MS_INTEGER, 5}};
	ms_row_shape s;
	char		reason[MS_REASON_MAX];
	seen		v;
	uint8_t		row[32];
	size_t		n = 0;

	CHECK(ms_row_shape_init(&s, "sparse", sparse, 3, &ms_test_allocator) && s.by_field == NULL,
		  "a sparse numbering has no map");
	n += ms_pb_len_field(row + n, 536870911, "z", 1);
	n += ms_pb_varint_field(row + n, 5, ms_pb_zigzag(-3));
	CHECK(walk(&s, row, n, &v, reason) && v.present[1] && v.present[0] && v.v[0].i == -3 && !v.present[2],
		  "the greatest field number, and a shared number goes to the first column: %s", reason);
	ms_row_shape_free(&s, &ms_test_allocator);
	CHECK(ms_row_shape_init(&s, "shared", sparse, 1, &ms_test_allocator) && s.by_field != NULL, "a dense numbering has a map");
	ms_row_shape_free(&s, &ms_test_allocator);
	for (int i = 0; i <= MS_ROW_COLUMNS_MAX; i++)
		many[i] = (ms_row_column) {"c", MS_INTEGER, (uint32_t) i + 1};
	CHECK(ms_row_shape_init(&s, "wide", many, MS_ROW_COLUMNS_MAX, &ms_test_allocator), "the widest table");
	n = ms_pb_varint_field(row, MS_ROW_COLUMNS_MAX, 1);
	n += ms_pb_varint_field(row + n, MS_ROW_COLUMNS_MAX, 1);
	CHECK(!ms_row_walk(&s, row, n, ignore, NULL, reason) &&
		  strstr(reason, "given twice") != NULL, "the last column of the widest table, twice: %s", reason);
	ms_row_shape_free(&s, &ms_test_allocator);
	CHECK(ms_row_shape_init(&s, "wider", many, MS_ROW_COLUMNS_MAX + 1, &ms_test_allocator), "a wider table");
	CHECK(!ms_row_walk(&s, row, 0, ignore, NULL, reason) &&
		  strstr(reason, "more than 2048 columns") != NULL, "is refused: %s", reason);
	ms_row_shape_free(&s, &ms_test_allocator);
}

/* the map and the one-by-one lookup say the same of every truncation and bit flip */
static void
mutations(const ms_row_shape *mapped)
{
	ms_row_shape linear = *mapped;
	const row_in in = {-42, true, 1.5, "h\xc3\xa9", 3, "\x01\x02", 2, true, 300};
	uint8_t		row[128];
	uint8_t		m[128];
	size_t		n = write_like_relay(&in, row);
	int			disagree = 0;
	int			refused = 0;

	linear.by_field = NULL;
	for (size_t cut = 0; cut <= n; cut++)
		for (int bit = -1; bit < (int) (8 * cut); bit++)
		{
			char		r1[MS_REASON_MAX];
			char		r2[MS_REASON_MAX];
			seen		s1;
			seen		s2;
			bool		ok1;
			bool		ok2;

			memcpy(m, row, cut);
			if (bit >= 0)
				m[bit / 8] ^= (uint8_t) (1u << (bit % 8));
			ok1 = walk(mapped, m, cut, &s1, r1);
			ok2 = walk(&linear, m, cut, &s2, r2);
			if (ok1 != ok2 || (ok1 && !same_rows(&s1, &s2)) || (!ok1 && strcmp(r1, r2) != 0))
				disagree++;
			refused += !ok1;
		}
	CHECK(disagree == 0, "the map and the lookup agree on every mutation (%d disagree)", disagree);
	CHECK(refused > 0, "mutations are refused (%d)", refused);
}

void
test_row(void)
{
	ms_row_shape shape;
	ms_type		t;

	CHECK(ms_type_parse("INTEGER", &t) && t == MS_INTEGER && ms_type_parse("REAL", &t) && t == MS_REAL &&
		  ms_type_parse("TEXT", &t) && t == MS_TEXT && ms_type_parse("BLOB", &t) && t == MS_BLOB,
		  "the four types by name");
	CHECK(!ms_type_parse("integer", &t) && !ms_type_parse("", &t), "no other name");
	CHECK(strcmp(ms_type_name(MS_BLOB), "BLOB") == 0 && strcmp(ms_type_name(MS_INTEGER), "INTEGER") == 0,
		  "names of types");
	CHECK(ms_row_shape_init(&shape, "things", cols, NCOLS, &ms_test_allocator), "the shape of things");
	CHECK(shape.by_field != NULL && shape.max_field == 7 && shape.by_field[5] == -1 && shape.by_field[0] == -1,
		  "its map: field 0 and the gap are no column");
	both_ways(&shape);
	any_order(&shape);
	refusals(&shape);
	mutations(&shape);
	ms_row_shape_free(&shape, &ms_test_allocator);
	shapes();
}
