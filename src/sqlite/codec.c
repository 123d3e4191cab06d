/*
** codec.c - a row in its table's codec, both ways (docs/protocol.md 4).
**
** json   one object of the mirrored columns, read by a small strict reader
**        that binds each value by its column's SQLite type:
**          INTEGER  numbers that are whole and within 64 bits, true/false
**          REAL     numbers; the strings "Infinity" and "-Infinity" (how
**                   PostgreSQL's to_json writes them)
**          TEXT     strings; numbers and nested JSON as their JSON text
**          BLOB     a string "\x" followed by hex digits
**        null is NULL, an absent column NULL; a key that is not a column,
**        a key given twice, or anything else is refused with the reason.
**        The retired column is the replica's: a value for it is ignored.
** proto  one protobuf message per table, a column's field number its
**        Column.field: INTEGER sint64 (zigzag varint), REAL double
**        (fixed64), TEXT string and BLOB bytes (length-delimited); NULL is
**        an absent field.  Walked by src/shared/row.c, as the server walks
**        an upload: a field that is not a column, given twice, or of the
**        wrong wire type is refused; so is a NaN, which SQLite cannot store.
**        Written with src/shared/pbwrite.h, as the relay writes it.
*/
#include "magic_sync_sqlite.h"

SQLITE_EXTENSION_INIT3

#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "pbwrite.h"

#define JSON_DEPTH 64

/* ---- a strict JSON reader --------------------------------------------- */

typedef struct jp
{
	const char *p;
	const char *end;
} jp;

static inline void
ws(jp *j)
{
	/* one test for the byte that is no space, nearly every one */
	while (j->p < j->end && (unsigned char) *j->p <= ' ' &&
		   (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

/*
 * plain_key: j->p at '"': the key written as the plain bytes of col's name
 * (one that needs no escape: plain_len), quotes around (the relay writes
 * each column's name so): read past it.  Anything else (an escape, another
 * name, a name that needs one) is left to the reader, unmoved.
 */
static inline bool
plain_key(jp *j, const ms_col *col)
{
	size_t		n = col->plain_len;
	const char *p = j->p + 1;

	if (n == 0 || (size_t) (j->end - j->p) < n + 2 || p[n] != '"')
		return false;
	/* a short name a byte at a time, in line: a call of memcmp cost more than most names */
	if (n > 16)
		return memcmp(p, col->name, n) == 0 && ((j->p += n + 2), true);
	for (size_t i = 0; i < n; i++)
		if (p[i] != col->name[i])
			return false;
	j->p += n + 2;
	return true;
}

static int
hex4(const char *p)
{
	int			v = 0;

	for (int i = 0; i < 4; i++)
	{
		char		ch = p[i];

		v <<= 4;
		if (ch >= '0' && ch <= '9')
			v |= ch - '0';
		else if (ch >= 'a' && ch <= 'f')
			v |= ch - 'a' + 10;
		else if (ch >= 'A' && ch <= 'F')
			v |= ch - 'A' + 10;
		else
			return -1;
	}
	return v;
}

static size_t
utf8_put(char *out, uint32_t cp)
{
	if (cp < 0x80)
	{
		out[0] = (char) cp;
		return 1;
	}
	if (cp < 0x800)
	{
		out[0] = (char) (0xc0 | (cp >> 6));
		out[1] = (char) (0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000)
	{
		out[0] = (char) (0xe0 | (cp >> 12));
		out[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char) (0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char) (0xf0 | (cp >> 18));
	out[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char) (0x80 | (cp & 0x3f));
	return 4;
}

/*
 * string: j->p at '"'; unescape into out (NULL: only check), its length in
 * *n.  The input is valid UTF-8 already; an unescaped string is never
 * longer than its escaped form.
 */
static bool
string(jp *j, char *out, size_t *n, const char **why)
{
	size_t		o = 0;

	j->p++;
	for (;;)
	{
		unsigned char ch;

		if (j->p >= j->end)
			return (*why = "a string is not closed"), false;
		ch = (unsigned char) *j->p;
		if (ch == '"')
		{
			j->p++;
			*n = o;
			return true;
		}
		if (ch < 0x20)
			return (*why = "a string holds a control character"), false;
		if (ch != '\\')
		{
			/* a run of plain characters, copied at once: most strings are nothing else */
			const char *run = j->p;
			const char *q = run + 1;
			const char *end = j->end;

			while (q < end && (ch = (unsigned char) *q) != '"' && ch != '\\' && ch >= 0x20)
				q++;
			if (out)
				memcpy(out + o, run, (size_t) (q - run));
			o += (size_t) (q - run);
			j->p = q;
			continue;
		}
		if (j->end - j->p < 2)
			return (*why = "a string is not closed"), false;
		j->p++;
		ch = (unsigned char) *j->p++;
		switch (ch)
		{
			case '"':
			case '\\':
			case '/':
				break;
			case 'b':
				ch = '\b';
				break;
			case 'f':
				ch = '\f';
				break;
			case 'n':
				ch = '\n';
				break;
			case 'r':
				ch = '\r';
				break;
			case 't':
				ch = '\t';
				break;
			case 'u':
				{
					int			u;
					uint32_t	cp;

					if (j->end - j->p < 4 || (u = hex4(j->p)) < 0)
						return (*why = "a \\u escape is not four hex digits"), false;
					j->p += 4;
					cp = (uint32_t) u;
					if (cp >= 0xdc00 && cp <= 0xdfff)
						return (*why = "a \\u escape is a lone low surrogate"), false;
					if (cp >= 0xd800 && cp <= 0xdbff)
					{
						int			lo;

						if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
							(lo = hex4(j->p + 2)) < 0xdc00 || lo > 0xdfff)
							return (*why = "a \\u escape is a lone high surrogate"), false;
						j->p += 6;
						cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t) lo - 0xdc00);
					}
					if (cp == 0)
						return (*why = "a string holds \\u0000"), false;
					if (out)
						o += utf8_put(out + o, cp);
					else
						o += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
					continue;
				}
			default:
				return (*why = "a string has an unknown escape"), false;
		}
		if (out)
			out[o] = (char) ch;
		o++;
	}
}

/*
 * raw_utf8: the row's bytes [from, to) read as they came are valid UTF-8.
 * A row is not checked whole before it is read (that was a ninth of its
 * reading): outside strings its grammar takes ASCII alone, so each string,
 * and nested JSON, is checked where it lies; a row refused for anything is
 * checked whole then, so its reason is the same (json_row).
 */
static bool
raw_utf8(const char *from, const char *to, const char **why)
{
	return ms_utf8_valid(from, (size_t) (to - from)) || ((*why = "a string is not valid UTF-8"), false);
}

/*
 * string_at: as string(), but a string without escapes (nearly every one)
 * is left where it is: *at points into the row, nothing copied; one with
 * escapes is unescaped into out, *at = out.
 */
static inline bool
string_at(jp *j, char *out, const char **at, size_t *n, const char **why)
{
	const char *open = j->p;
	const char *q = j->p + 1;
	unsigned char ch = 0;
	uint64_t	high = 0;		/* a byte of 0x80 or more was passed (or lies after the end) */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* eight bytes at a time to the first '"', '\\' or control character (the lowest byte flagged is one) */
	while (j->end - q >= 8)
	{
		const uint64_t ones = 0x0101010101010101ULL;
		uint64_t	w,
					quote,
					slash,
					flagged;

		memcpy(&w, q, 8);
		high |= w;
		quote = w ^ (ones * '"');
		slash = w ^ (ones * '\\');
		flagged = (((quote - ones) & ~quote) | ((slash - ones) & ~slash) | ((w - ones * 0x20) & ~w)) &
			(ones * 0x80);
		if (flagged != 0)
		{
			q += __builtin_ctzll(flagged) / 8;
			break;
		}
		q += 8;
	}
#endif
	while (q < j->end && (ch = (unsigned char) *q) != '"' && ch != '\\' && ch >= 0x20)
	{
		high |= ch;
		q++;
	}
	if (q < j->end && ch == '"')
	{
		*at = j->p + 1;
		*n = (size_t) (q - *at);
		j->p = q + 1;
		return (high & 0x8080808080808080ULL) == 0 || ms_utf8_valid(*at, *n) ||
			((*why = "a string is not valid UTF-8"), false);
	}
	*at = out;
	return string(j, out, n, why) && raw_utf8(open, j->p, why);
}

/* number: the JSON grammar; *integral when it has no fraction or exponent */
static bool
number(jp *j, bool *integral)
{
	const char *p = j->p;

	*integral = true;
	if (p < j->end && *p == '-')
		p++;
	if (p >= j->end)
		return false;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (p < j->end && *p >= '0' && *p <= '9')
			p++;
	else
		return false;
	if (p < j->end && *p == '.')
	{
		*integral = false;
		p++;
		if (p >= j->end || *p < '0' || *p > '9')
			return false;
		while (p < j->end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < j->end && (*p == 'e' || *p == 'E'))
	{
		*integral = false;
		p++;
		if (p < j->end && (*p == '+' || *p == '-'))
			p++;
		if (p >= j->end || *p < '0' || *p > '9')
			return false;
		while (p < j->end && *p >= '0' && *p <= '9')
			p++;
	}
	j->p = p;
	return true;
}

static bool
literal(jp *j, const char *word)
{
	size_t		n = strlen(word);

	if ((size_t) (j->end - j->p) < n || memcmp(j->p, word, n) != 0)
		return false;
	j->p += n;
	return true;
}

/* value: check one JSON value of any kind, nested at most JSON_DEPTH deep */
static bool
value(jp *j, int depth, const char **why)
{
	bool		integral;
	size_t		n;

	if (depth > JSON_DEPTH)
		return (*why = "JSON nested too deep"), false;
	ws(j);
	if (j->p >= j->end)
		return (*why = "a value is missing"), false;
	switch (*j->p)
	{
		case '"':
			return string(j, NULL, &n, why);
		case '{':
		case '[':
			{
				char		close = *j->p == '{' ? '}' : ']';
				bool		object = close == '}';

				j->p++;
				ws(j);
				if (j->p < j->end && *j->p == close)
				{
					j->p++;
					return true;
				}
				for (;;)
				{
					if (object)
					{
						ws(j);
						if (j->p >= j->end || *j->p != '"')
							return (*why = "an object key is not a string"), false;
						if (!string(j, NULL, &n, why))
							return false;
						ws(j);
						if (j->p >= j->end || *j->p != ':')
							return (*why = "an object key is not followed by ':'"), false;
						j->p++;
					}
					if (!value(j, depth + 1, why))
						return false;
					ws(j);
					if (j->p < j->end && *j->p == ',')
					{
						j->p++;
						continue;
					}
					if (j->p < j->end && *j->p == close)
					{
						j->p++;
						return true;
					}
					return (*why = "a ',' or a closing bracket is missing"), false;
				}
			}
		case 't':
			return literal(j, "true") || ((*why = "not JSON"), false);
		case 'f':
			return literal(j, "false") || ((*why = "not JSON"), false);
		case 'n':
			return literal(j, "null") || ((*why = "not JSON"), false);
		default:
			return number(j, &integral) || ((*why = "not JSON"), false);
	}
}

bool
ms_json_valid(const char *p, size_t n)
{
	jp			j = {p, p + n};
	const char *why;

	if (!ms_utf8_valid(p, n) || !value(&j, 0, &why))
		return false;
	ws(&j);
	return j.p == j.end;
}

/* a whole JSON integer within 64 bits */
static bool
parse_int(const char *p, size_t n, sqlite3_int64 *out)
{
	bool		neg = p[0] == '-';
	uint64_t	v = 0;
	uint64_t	limit = neg ? (uint64_t) INT64_MAX + 1 : (uint64_t) INT64_MAX;

	/* 18 digits or fewer never pass the limit: no division a digit */
	if (n - (neg ? 1 : 0) <= 18)
		for (size_t i = neg ? 1 : 0; i < n; i++)
			v = v * 10 + (unsigned) (p[i] - '0');
	else
		for (size_t i = neg ? 1 : 0; i < n; i++)
		{
			unsigned	d = (unsigned) (p[i] - '0');

			if (v > (limit - d) / 10)
				return false;
			v = v * 10 + d;
		}
	if (neg)
		*out = v == (uint64_t) INT64_MAX + 1 ? INT64_MIN : -(sqlite3_int64) v;
	else
		*out = (sqlite3_int64) v;
	return true;
}

static bool
parse_double(const char *p, size_t n, double *out)
{
	char		buf[512];

	if (n >= sizeof buf)
		return false;
	memcpy(buf, p, n);
	buf[n] = '\0';
	*out = strtod(buf, NULL);
	return true;
}

/*
 * plain_int: at j->p, a JSON number that is whole, of 18 digits or fewer
 * (no fraction, no exponent): read past, its value in *out.  Anything else
 * is left unmoved for number() and parse_int(), which read the same.
 */
static inline bool
plain_int(jp *j, sqlite3_int64 *out)
{
	const char *p = j->p;
	const char *end = j->end;
	bool		neg = p < end && *p == '-';
	uint64_t	v = 0;
	const char *digits;
	const char *last;			/* 19 digits at most are read: one more than are taken */

	if (neg)
		p++;
	digits = p;
	last = end - p > 19 ? p + 19 : end;
	while (p < last && (unsigned) (*p - '0') < 10)
		v = v * 10 + (unsigned) (*p++ - '0');
	if (p == digits || p - digits > 18 || (*digits == '0' && p - digits > 1) ||
		(p < end && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9'))))
		return false;
	*out = neg ? -(sqlite3_int64) v : (sqlite3_int64) v;
	j->p = p;
	return true;
}

/*
 * json_value: the value at j->p of column col into v, by the column's type;
 * strings and blobs are unescaped into scratch at *used.
 */
static bool
json_value(jp *j, const ms_col *col, ms_val *v, char *scratch, size_t *used,
		   char reason[MS_REASON_MAX])
{
	const char *start;
	bool		integral;
	const char *why = NULL;

	start = j->p;
	switch (*j->p)
	{
		case 'n':
			if (!literal(j, "null"))
				return ms_refuse(reason, "the row is not JSON");
			v->type = SQLITE_NULL;
			break;
		case 't':
		case 'f':
			{
				bool		yes = *j->p == 't';

				if (!literal(j, yes ? "true" : "false"))
					return ms_refuse(reason, "the row is not JSON");
				if (col->type == MS_INTEGER)
				{
					v->type = SQLITE_INTEGER;
					v->i = yes;
				}
				else if (col->type == MS_TEXT)
				{
					v->type = SQLITE_TEXT;
					v->p = start;
					v->n = (size_t) (j->p - start);
				}
				else
					return ms_refuse(reason, "column \"%s\" (%s) cannot take a boolean",
								  col->name, col->type == MS_REAL ? "REAL" : "BLOB");
				break;
			}
		case '"':
			{
				char	   *s = scratch + *used;
				const char *at;	/* the string: in the row, or unescaped into s */
				size_t		n;

				if (!string_at(j, s, &at, &n, &why))
					return ms_refuse(reason, "the row is not JSON: %s", why);
				if (col->type == MS_TEXT)
				{
					v->type = SQLITE_TEXT;
					v->p = at;
					v->n = n;
					if (at == s)
						*used += n;
				}
				else if (col->type == MS_BLOB)
				{
					/* the bytes go into s, never into the row: read ahead of where they are written */
					if (n < 2 || at[0] != '\\' || at[1] != 'x' || (n - 2) % 2 != 0)
						return ms_refuse(reason, "column \"%s\" (BLOB) takes a string \"\\\\x\" and hex digits", col->name);
					for (size_t k = 0; k < (n - 2) / 2; k++)
					{
						char		two[5] = {'0', '0', at[2 + 2 * k], at[3 + 2 * k], 0};
						int			b = hex4(two);

						if (b < 0)
							return ms_refuse(reason, "column \"%s\" (BLOB) holds a character that is not a hex digit", col->name);
						s[k] = (char) b;
					}
					v->type = SQLITE_BLOB;
					v->p = s;
					v->n = (n - 2) / 2;
					*used += v->n;
				}
				else if (col->type == MS_REAL &&
						 ((n == 8 && memcmp(at, "Infinity", 8) == 0) ||
						  (n == 9 && memcmp(at, "-Infinity", 9) == 0)))
				{
					v->type = SQLITE_FLOAT;
					v->d = at[0] == '-' ? -HUGE_VAL : HUGE_VAL;
				}
				else
					return ms_refuse(reason, "column \"%s\" (%s) cannot take a string", col->name,
								  col->type == MS_INTEGER ? "INTEGER" : "REAL");
				break;
			}
		case '{':
		case '[':
			if (!value(j, 1, &why) || !raw_utf8(start, j->p, &why))
				return ms_refuse(reason, "the row is not JSON: %s", why);
			if (col->type != MS_TEXT)
				return ms_refuse(reason, "column \"%s\" cannot take nested JSON: only a TEXT column can", col->name);
			v->type = SQLITE_TEXT;
			v->p = start;
			v->n = (size_t) (j->p - start);
			break;
		default:
			/* a whole number of at most 18 digits into an INTEGER column (most): read once */
			if (col->type == MS_INTEGER && plain_int(j, &v->i))
			{
				v->type = SQLITE_INTEGER;
				break;
			}
			if (!number(j, &integral))
				return ms_refuse(reason, "the row is not JSON: a value of column \"%s\" is not one", col->name);
			if (col->type == MS_INTEGER)
			{
				double		d;

				v->type = SQLITE_INTEGER;
				if (integral)
				{
					if (!parse_int(start, (size_t) (j->p - start), &v->i))
						return ms_refuse(reason, "column \"%s\" (INTEGER): %.*s is out of range", col->name,
									  (int) (j->p - start > 40 ? 40 : j->p - start), start);
				}
				else if (!parse_double(start, (size_t) (j->p - start), &d) || !isfinite(d) ||
						 d != floor(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0)
					return ms_refuse(reason, "column \"%s\" (INTEGER) takes whole numbers within 64 bits", col->name);
				else
					v->i = (sqlite3_int64) d;
			}
			else if (col->type == MS_REAL)
			{
				if (!parse_double(start, (size_t) (j->p - start), &v->d))
					return ms_refuse(reason, "column \"%s\" (REAL): the number is too long", col->name);
				v->type = SQLITE_FLOAT;
			}
			else if (col->type == MS_TEXT)
			{
				v->type = SQLITE_TEXT;
				v->p = start;
				v->n = (size_t) (j->p - start);
			}
			else
				return ms_refuse(reason, "column \"%s\" (BLOB) cannot take a number", col->name);
	}
	return true;
}

static bool
json_read(const ms_tbl *t, const char *row, size_t len, ms_val *vals, char *scratch,
		  char reason[MS_REASON_MAX])
{
	jp			j = {row, row + len};
	size_t		used = 0;
	uint8_t		seen[MS_ROW_COLUMNS_MAX];	/* its first ncols zeroed: all of it was a sixth of a row's reading */
	const char *why = NULL;
	int			next = 0;		/* the column expected next */

	memset(seen, 0, (size_t) t->ncols);
	ws(&j);
	if (j.p >= j.end || *j.p != '{')
		return ms_refuse(reason, "the row is not a JSON object");
	j.p++;
	ws(&j);
	if (j.p < j.end && *j.p == '}')
		j.p++;
	else
		for (;;)
		{
			size_t		klen;
			const char *key;
			int			i;
			ms_val	   *v;
			const ms_col *col;

			ws(&j);
			if (j.p >= j.end)
				return ms_refuse(reason, "the row is not JSON: its object is not closed");
			if (*j.p != '"')
				return ms_refuse(reason, "the row is not JSON: a key of its object is not a string");
			/*
			 * the relay writes the columns in order: the one after the last
			 * is tried first, as written, where it is; else the key is read,
			 * then found by a map for a table of many columns (a walk per
			 * key was quadratic in them)
			 */
			if (next < t->ncols && plain_key(&j, &t->cols[next]))
				i = next;
			else
			{
				if (!string_at(&j, scratch + used, &key, &klen, &why))
					return ms_refuse(reason, "the row is not JSON: %s", why);
				if (next < t->ncols && strncmp(t->cols[next].name, key, klen) == 0 && t->cols[next].name[klen] == '\0')
					i = next;
				else
					i = ms_tbl_column(t, key, klen);
				/* a NUL only comes escaped: a key left in the row stopped at any control character */
				if (i < 0 || (key == scratch + used && memchr(key, '\0', klen) != NULL))
					return ms_refuse(reason, "\"%.*s\" is not a column of table \"%s\"",
								  (int) (klen > 64 ? 64 : klen), key, t->name);
			}
			if (seen[i])
				return ms_refuse(reason, "column \"%s\" is given twice", t->cols[i].name);
			seen[i] = 1;
			next = i + 1;
			col = &t->cols[i];
			v = &vals[i];
			/* as the relay writes it (no space): each step's byte tested first */
			if (j.p >= j.end || *j.p != ':')
			{
				ws(&j);
				if (j.p >= j.end || *j.p != ':')
					return ms_refuse(reason, "the row is not JSON: a key is not followed by ':'");
			}
			j.p++;
			ws(&j);
			if (j.p >= j.end)
				return ms_refuse(reason, "the row is not JSON: a value is missing");
			if (!json_value(&j, col, v, scratch, &used, reason))
				return false;
			if (col->retired)
				v->type = SQLITE_NULL;	/* the replica's own: what the server says is ignored */
			if (j.p < j.end && *j.p == ',')
			{
				j.p++;
				continue;
			}
			ws(&j);
			if (j.p < j.end && *j.p == ',')
			{
				j.p++;
				continue;
			}
			if (j.p < j.end && *j.p == '}')
			{
				j.p++;
				break;
			}
			return ms_refuse(reason, "the row is not JSON: a ',' or '}' is missing");
		}
	ws(&j);
	if (j.p != j.end)
		return ms_refuse(reason, "the row has bytes after its JSON object");
	return true;
}

/*
 * json_row: a row read (json_read, its strings checked as UTF-8 where they
 * lie); one refused for anything that is not valid UTF-8 whole, or holds a
 * NUL byte, is refused as that, as when it was checked first
 */
static bool
json_row(const ms_tbl *t, const char *row, size_t len, ms_val *vals, char *scratch,
		 char reason[MS_REASON_MAX])
{
	if (json_read(t, row, len, vals, scratch, reason))
		return true;
	if (!ms_utf8_valid(row, len))
		return ms_refuse(reason, "the row is not valid UTF-8 (or holds a NUL byte)");
	return false;
}

/* ---- proto ------------------------------------------------------------- */

/* the row being decoded, for the walker's visits */
typedef struct proto_row
{
	const ms_tbl *t;
	ms_val	   *vals;
} proto_row;

/* a value the walker (row.h) handed over, as SQLite binds it */
static bool
proto_value(void *arg, int column, const ms_row_value *rv, char reason[MS_REASON_MAX])
{
	proto_row  *r = arg;
	ms_val	   *v = &r->vals[column];

	switch (rv->type)
	{
		case MS_INTEGER:
			v->type = SQLITE_INTEGER;
			v->i = (sqlite3_int64) rv->i;
			break;
		case MS_REAL:
			if (isnan(rv->d))
				return ms_refuse(reason, "column \"%s\" (REAL) is NaN, which SQLite cannot store",
							  r->t->cols[column].name);
			v->type = SQLITE_FLOAT;
			v->d = rv->d;
			break;
		case MS_TEXT:
		case MS_BLOB:
			v->type = rv->type == MS_TEXT ? SQLITE_TEXT : SQLITE_BLOB;
			v->p = (const char *) rv->p;
			v->n = rv->n;
			break;
	}
	return true;
}

bool
ms_row_decode(const ms_tbl *t, const uint8_t *row, size_t len, ms_val *vals,
			  char *scratch, char reason[MS_REASON_MAX])
{
	for (int i = 0; i < t->ncols; i++)
		vals[i].type = SQLITE_NULL;
	if (t->ncols > MS_ROW_COLUMNS_MAX)
		return ms_refuse(reason, "table \"%s\" has more than %d columns", t->name, MS_ROW_COLUMNS_MAX);
	if (t->proto)
	{
		proto_row	r = {t, vals};

		return ms_row_walk(&t->shape, row, len, proto_value, &r, reason);
	}
	/* an empty upsert decodes as NULL bytes: never arithmetic on NULL */
	return json_row(t, len ? (const char *) row : "", len, vals, scratch, reason);
}

bool
ms_row_key(const ms_tbl *t, const ms_val *vals, ms_buf *out)
{
	out->len = 0;
	for (int k = 0; k < t->nkey; k++)
	{
		const ms_val *v = &vals[t->key[k]];

		if (v->type == SQLITE_INTEGER)
			ms_key_append_int(out, v->i);
		else if (v->type == SQLITE_TEXT)
			ms_key_append(out, v->p, v->n);
		else
			return false;
	}
	return !out->oom;
}

/* ---- writing a row ----------------------------------------------------- */

/* a field of a row of the proto codec, written by pbwrite.h as the relay writes it */
static void
put_field(ms_buf *b, const uint8_t *head, size_t n, const void *bytes, size_t len)
{
	ms_buf_add(b, head, n);
	ms_buf_add(b, bytes, len);
}

static void
json_real(ms_buf *b, double d)
{
	char		num[64];

	if (isinf(d))
	{
		ms_buf_str(b, d < 0 ? "\"-Infinity\"" : "\"Infinity\"");
		return;
	}
	sqlite3_snprintf((int) sizeof num, num, "%!.17g", d);
	/* SQLite writes a whole number as "1.0" and large ones as "1.0e+20": JSON either way */
	ms_buf_str(b, num);
}

bool
ms_row_encode(const ms_tbl *t, sqlite3_stmt *st, const int *cols, int n,
			  ms_buf *out, char reason[MS_REASON_MAX])
{
	out->len = 0;
	if (!t->proto)
		ms_buf_byte(out, '{');
	for (int k = 0; k < n; k++)
	{
		const ms_col *col = &t->cols[cols[k]];
		int			type = sqlite3_column_type(st, k);
		uint8_t		tmp[24];		/* a tag and a varint, or a tag and 8 bytes */

		if (!t->proto)
		{
			if (k > 0)
				ms_buf_byte(out, ',');
			ms_buf_json_string(out, col->name, strlen(col->name));
			ms_buf_byte(out, ':');
			switch (type)
			{
				case SQLITE_NULL:
					ms_buf_str(out, "null");
					break;
				case SQLITE_INTEGER:
					ms_buf_printf(out, "%lld", (long long) sqlite3_column_int64(st, k));
					break;
				case SQLITE_FLOAT:
					json_real(out, sqlite3_column_double(st, k));
					break;
				case SQLITE_TEXT:
					{
						const char *p = (const char *) sqlite3_column_text(st, k);
						size_t		len = (size_t) sqlite3_column_bytes(st, k);

						if (!ms_utf8_valid(p, len))
							return ms_refuse(reason, "column \"%s\" is not valid UTF-8 text", col->name);
						if (col->json && ms_json_valid(p, len))
							ms_buf_add(out, p, len);
						else
							ms_buf_json_string(out, p, len);
						break;
					}
				default:
					{
						const uint8_t *p = sqlite3_column_blob(st, k);

						ms_buf_str(out, "\"\\\\x");
						ms_buf_hex(out, p, (size_t) sqlite3_column_bytes(st, k));
						ms_buf_byte(out, '"');
					}
			}
			continue;
		}
		if (type == SQLITE_NULL || col->field == 0)
			continue;
		switch (col->type)
		{
			case MS_INTEGER:
				{
					sqlite3_int64 i;

					if (type == SQLITE_INTEGER)
						i = sqlite3_column_int64(st, k);
					else if (type == SQLITE_FLOAT && sqlite3_column_double(st, k) == floor(sqlite3_column_double(st, k)) &&
							 fabs(sqlite3_column_double(st, k)) < 9.2e18)
						i = (sqlite3_int64) sqlite3_column_double(st, k);
					else
						return ms_refuse(reason, "column \"%s\" (INTEGER) holds a value that is not an integer", col->name);
					put_field(out, tmp, ms_pb_varint_field(tmp, col->field, ms_pb_zigzag(i)), NULL, 0);
					break;
				}
			case MS_REAL:
				if (type != SQLITE_INTEGER && type != SQLITE_FLOAT)
					return ms_refuse(reason, "column \"%s\" (REAL) holds a value that is not a number", col->name);
				put_field(out, tmp, ms_pb_double_field(tmp, col->field, sqlite3_column_double(st, k)), NULL, 0);
				break;
			default:
				{
					const char *p;
					size_t		len;

					if (col->type == MS_TEXT || type != SQLITE_BLOB)
						p = (const char *) sqlite3_column_text(st, k);
					else
						p = sqlite3_column_blob(st, k);
					len = (size_t) sqlite3_column_bytes(st, k);
					if (col->type == MS_TEXT && !ms_utf8_valid(p, len))
						return ms_refuse(reason, "column \"%s\" (TEXT) is not valid UTF-8 text", col->name);
					put_field(out, tmp, ms_pb_len_head(tmp, col->field, len), p, len);
				}
		}
	}
	if (!t->proto)
		ms_buf_byte(out, '}');
	if (out->oom)
		return ms_refuse(reason, "out of memory");
	return true;
}
