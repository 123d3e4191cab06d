/*-------------------------------------------------------------------------
 * reason.c
 *	  Saying why bytes are refused; whether bytes are UTF-8 (reason.h).
 *-------------------------------------------------------------------------
 */
#include "reason.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool
ms_refuse(char reason[MS_REASON_MAX], const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(reason, MS_REASON_MAX, fmt, ap);
	va_end(ap);
	return false;
}

bool
ms_utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *) s;
	size_t		i = 0;

	while (i < len)
	{
		unsigned char c;
		size_t		n;
		uint32_t	cp;

		/* ASCII without NUL, eight bytes at a time: most of a row's bytes */
		while (len - i >= 8)
		{
			uint64_t	w;

			memcpy(&w, p + i, 8);
			if ((w & 0x8080808080808080ULL) != 0 ||
				((w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL) != 0)
				break;
			i += 8;
		}
		/* and the ASCII after, a byte at a time: a short string's all */
		while (i < len && (unsigned char) (p[i] - 1) < 0x7f)
			i++;
		if (i >= len)
			break;
		c = p[i];
		if (c == 0)
			return false;
		else if ((c & 0xe0) == 0xc0)
		{
			n = 1;
			cp = c & 0x1f;
		}
		else if ((c & 0xf0) == 0xe0)
		{
			n = 2;
			cp = c & 0x0f;
		}
		else if ((c & 0xf8) == 0xf0)
		{
			n = 3;
			cp = c & 0x07;
		}
		else
			return false;
		if (len - i <= n)
			return false;
		for (size_t k = 1; k <= n; k++)
		{
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + k] & 0x3f);
		}
		/* overlong forms, surrogates and beyond U+10FFFF */
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
			(cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return false;
		i += n + 1;
	}
	return true;
}
