/*-------------------------------------------------------------------------
 * canon.c
 *	  A key part as its column's type prints it (canon.h): integers as
 *	  int2in/int4in/int8in take them and int8out prints them, uuids as
 *	  uuid_in takes them and uuid_out prints them.
 *-------------------------------------------------------------------------
 */
#include "canon.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

ms_key_kind
ms_key_kind_named(const char *server_type, bool sqlite_integer)
{
	if (strcmp(server_type, "uuid") == 0)
		return MS_KEY_UUID;
	if (strcmp(server_type, "smallint") == 0)
		return MS_KEY_INT2;
	if (strcmp(server_type, "integer") == 0)
		return MS_KEY_INT4;
	if (strcmp(server_type, "bigint") == 0 || sqlite_integer)
		return MS_KEY_INT8;
	return MS_KEY_TEXT;
}

static bool
space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* an integer: spaces, a sign, digits, spaces; within the kind's range */
static bool
canon_int(ms_key_kind kind, const char *p, size_t n, char out[MS_KEY_CANON_MAX], size_t *out_len,
		  char reason[MS_REASON_MAX])
{
	static const char *const names[] = {"", "smallint", "integer", "bigint"};
	uint64_t	limit = kind == MS_KEY_INT2 ? 32767 : kind == MS_KEY_INT4 ? 2147483647 : INT64_MAX;
	uint64_t	v = 0;
	bool		negative = false;
	size_t		i = 0;
	size_t		digits = 0;

	while (i < n && space(p[i]))
		i++;
	if (i < n && (p[i] == '+' || p[i] == '-'))
		negative = p[i++] == '-';
	for (; i < n && p[i] >= '0' && p[i] <= '9'; i++, digits++)
	{
		uint64_t	d = (uint64_t) (p[i] - '0');

		/* the most negative value is one beyond the most positive */
		if (v > (limit + (negative ? 1 : 0) - d) / 10)
			return ms_refuse(reason, "key part \"%.*s\" is out of range for type %s",
							 (int) (n > 40 ? 40 : n), p, names[kind]);
		v = v * 10 + d;
	}
	while (i < n && space(p[i]))
		i++;
	if (digits == 0 || i != n)
		return ms_refuse(reason, "key part \"%.*s\" is not a %s", (int) (n > 40 ? 40 : n), p, names[kind]);
	if (negative && v > 0)
		*out_len = (size_t) snprintf(out, MS_KEY_CANON_MAX, "-%llu", (unsigned long long) v);
	else
		*out_len = (size_t) snprintf(out, MS_KEY_CANON_MAX, "%llu", (unsigned long long) v);
	return true;
}

/* a uuid: in braces or not, 32 hex digits, a hyphen allowed after each group of four */
static bool
canon_uuid(const char *p, size_t n, char out[MS_KEY_CANON_MAX], size_t *out_len, char reason[MS_REASON_MAX])
{
	static const char digits[] = "0123456789abcdef";
	uint8_t		b[16];
	size_t		i = 0;
	bool		braces = n > 0 && p[0] == '{';
	size_t		o = 0;

	if (braces)
		i++;
	for (int k = 0; k < 16; k++)
	{
		int			hi = i < n ? hex_value(p[i]) : -1;
		int			lo = i + 1 < n ? hex_value(p[i + 1]) : -1;

		if (hi < 0 || lo < 0)
			return ms_refuse(reason, "key part \"%.*s\" is not a uuid", (int) (n > 40 ? 40 : n), p);
		b[k] = (uint8_t) (hi << 4 | lo);
		i += 2;
		if (i < n && p[i] == '-' && k % 2 == 1 && k < 15)
			i++;
	}
	if (braces && (i >= n || p[i++] != '}'))
		return ms_refuse(reason, "key part \"%.*s\" is not a uuid", (int) (n > 40 ? 40 : n), p);
	if (i != n)
		return ms_refuse(reason, "key part \"%.*s\" is not a uuid", (int) (n > 40 ? 40 : n), p);
	for (int k = 0; k < 16; k++)
	{
		if (k == 4 || k == 6 || k == 8 || k == 10)
			out[o++] = '-';
		out[o++] = digits[b[k] >> 4];
		out[o++] = digits[b[k] & 15];
	}
	out[o] = '\0';
	*out_len = o;
	return true;
}

bool
ms_key_canon(ms_key_kind kind, const char *part, size_t n, char out[MS_KEY_CANON_MAX], size_t *out_len,
			 char reason[MS_REASON_MAX])
{
	if (kind == MS_KEY_UUID)
		return canon_uuid(part, n, out, out_len, reason);
	if (kind == MS_KEY_TEXT)
		return ms_refuse(reason, "a text key part is its own spelling");
	return canon_int(kind, part, n, out, out_len, reason);
}
