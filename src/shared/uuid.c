/*-------------------------------------------------------------------------
 * uuid.c
 *	  A uuid read from text and written as text (uuid.h).
 *-------------------------------------------------------------------------
 */
#include "uuid.h"

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

bool
ms_uuid_parse(const char *s, size_t n, uint8_t out[16])
{
	size_t		i = 0;

	if (n != 36)
		return false;
	for (int k = 0; k < 16; k++)
	{
		int			hi,
					lo;

		if (i == 8 || i == 13 || i == 18 || i == 23)
		{
			if (s[i] != '-')
				return false;
			i++;
		}
		hi = hex_value(s[i]);
		lo = hex_value(s[i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[k] = (uint8_t) (hi << 4 | lo);
		i += 2;
	}
	return i == 36;
}

bool
ms_uuid_parse_loose(const char *s, size_t n, uint8_t out[16])
{
	size_t		i = 0;
	bool		braces = n > 0 && s[0] == '{';

	if (braces)
		i++;
	for (int k = 0; k < 16; k++)
	{
		int			hi = i < n ? hex_value(s[i]) : -1;
		int			lo = i + 1 < n ? hex_value(s[i + 1]) : -1;

		if (hi < 0 || lo < 0)
			return false;
		out[k] = (uint8_t) (hi << 4 | lo);
		i += 2;
		if (i < n && s[i] == '-' && k % 2 == 1 && k < 15)
			i++;
	}
	if (braces && (i >= n || s[i++] != '}'))
		return false;
	return i == n;
}

void
ms_uuid_text(const uint8_t u[16], char out[MS_UUID_TEXT])
{
	static const char digits[] = "0123456789abcdef";
	int			o = 0;

	for (int k = 0; k < 16; k++)
	{
		if (k == 4 || k == 6 || k == 8 || k == 10)
			out[o++] = '-';
		out[o++] = digits[u[k] >> 4];
		out[o++] = digits[u[k] & 15];
	}
	out[o] = '\0';
}
