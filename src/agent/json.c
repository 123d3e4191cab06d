/*-------------------------------------------------------------------------
 * json.c
 *	  The agent's one JSON string writer, and a JSON line's start, for
 *	  report.c's lines and the sneakernet commands' (sneakernet.c): valid
 *	  JSON whatever it is given.
 *	  A file path, a server's message or a host's key may hold any bytes,
 *	  and JSON is UTF-8: a byte that is not part of well-formed UTF-8 is
 *	  written as U+FFFD (\ufffd), the replacement character, as a reader
 *	  decoding it leniently would show it; control characters are escaped.
 *-------------------------------------------------------------------------
 */
#include "agent.h"

#include <stdio.h>
#include <time.h>

/*
 * utf8_length: the length of the well-formed UTF-8 sequence at s (RFC 3629:
 * no overlong form, no surrogate, nothing past U+10FFFF), 0 when it is not
 * one.  A file path, or a message, may hold any bytes; JSON is UTF-8.
 */
static int
utf8_length(const unsigned char *s)
{
	int			n;
	uint32_t	cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF)
		n = 2, cp = s[0] & 0x1F;
	else if (s[0] >= 0xE0 && s[0] <= 0xEF)
		n = 3, cp = s[0] & 0x0F;
	else if (s[0] >= 0xF0 && s[0] <= 0xF4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++)
	{
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
		(cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

/* agent_json_string: s as a JSON string on stdout; a byte that is not UTF-8 is U+FFFD */
void
agent_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++)
	{
		unsigned char c = (unsigned char) *s;
		int			n = utf8_length((const unsigned char *) s);

		if (n == 0)
		{
			fputs("\\ufffd", stdout);
			continue;
		}
		if (n > 1)
		{
			fwrite(s, 1, (size_t) n, stdout);
			s += n - 1;
			continue;
		}
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* agent_json_event: the start of a JSON line, {"time":"...","event":"EVENT" (EVENT a constant) */
void
agent_json_event(const char *event)
{
	struct timespec ts;
	struct tm	tm;
	char		stamp[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
	printf("{\"time\":\"%s.%03ldZ\",\"event\":\"%s\"", stamp, ts.tv_nsec / 1000000L, event);
}
