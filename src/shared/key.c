/*-------------------------------------------------------------------------
 * key.c
 *	  Canonical key bytes: "<length>:<bytes>" for each part.  See key.h.
 *-------------------------------------------------------------------------
 */
#include "key.h"

#include <string.h>

static size_t
decimal_digits(size_t n)
{
	size_t		d = 1;

	while (n >= 10)
	{
		n /= 10;
		d++;
	}
	return d;
}

size_t
ms_key_size(size_t nparts, const char *const *parts, const size_t *lens)
{
	size_t		total = 0;

	(void) parts;
	for (size_t i = 0; i < nparts; i++)
		total += decimal_digits(lens[i]) + 1 + lens[i];
	return total;
}

size_t
ms_key_part_head(char out[MS_KEY_HEAD_MAX], size_t len)
{
	size_t		digits = decimal_digits(len);
	size_t		n = len;

	for (size_t d = digits; d > 0; d--)
	{
		out[d - 1] = (char) ('0' + n % 10);
		n /= 10;
	}
	out[digits] = ':';
	return digits + 1;
}

size_t
ms_key_write(char *out, size_t nparts, const char *const *parts, const size_t *lens)
{
	char	   *p = out;

	for (size_t i = 0; i < nparts; i++)
	{
		p += ms_key_part_head(p, lens[i]);
		if (lens[i] > 0)
			memcpy(p, parts[i], lens[i]);
		p += lens[i];
	}
	return (size_t) (p - out);
}

int
ms_key_next_part(const char *key, size_t len, size_t *pos,
				 const char **part, size_t *plen)
{
	size_t		i = *pos;
	size_t		n = 0;
	size_t		digits = 0;

	if (i == len)
		return 0;
	while (i < len && key[i] >= '0' && key[i] <= '9')
	{
		/* no leading zeros but "0" itself: one spelling per key */
		if (digits == 1 && n == 0)
			return -1;
		n = n * 10 + (size_t) (key[i] - '0');
		if (++digits > 10 || n > MS_KEY_PART_MAX)
			return -1;
		i++;
	}
	if (digits == 0 || i == len || key[i] != ':')
		return -1;
	i++;
	if (n > len - i)
		return -1;
	*part = key + i;
	*plen = n;
	*pos = i + n;
	return 1;
}

int
ms_key_count_parts(const char *key, size_t len)
{
	size_t		pos = 0;
	const char *part;
	size_t		plen;
	int			n = 0;
	int			rc;

	while ((rc = ms_key_next_part(key, len, &pos, &part, &plen)) == 1)
		n++;
	return rc < 0 ? -1 : n;
}

int
ms_key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t		n = alen < blen ? alen : blen;
	int			c = n > 0 ? memcmp(a, b, n) : 0;

	if (c != 0)
		return c;
	return alen < blen ? -1 : (alen > blen ? 1 : 0);
}
