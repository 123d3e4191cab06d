/*-------------------------------------------------------------------------
 * hlc.c
 *	  The hybrid logical clock's arithmetic (hlc.h), for both sides.
 *-------------------------------------------------------------------------
 */
#include "hlc.h"

#include <stdio.h>
#include <string.h>

int64_t
ms_hlc_of_ms(int64_t ms)
{
	if (ms <= 0)
		return 0;
	if (ms > MS_HLC_MAX_MS)
		ms = MS_HLC_MAX_MS;
	return ms << MS_HLC_COUNTER_BITS;
}

int64_t
ms_hlc_ms(int64_t stamp)
{
	return stamp < 0 ? 0 : stamp >> MS_HLC_COUNTER_BITS;
}

uint32_t
ms_hlc_counter(int64_t stamp)
{
	return stamp < 0 ? 0 : (uint32_t) (stamp & ((INT64_C(1) << MS_HLC_COUNTER_BITS) - 1));
}

int64_t
ms_hlc_tick(int64_t last, int64_t now_ms)
{
	int64_t		now = ms_hlc_of_ms(now_ms);

	if (last < 0)
		last = 0;
	/* the counter's carry runs into the milliseconds; INT64_MAX stays (no wrap) */
	if (last < INT64_MAX)
		last++;
	return now > last ? now : last;
}

bool
ms_hlc_merge(int64_t *clock, int64_t remote, int64_t now_ms)
{
	int64_t		bound = now_ms > MS_HLC_MAX_MS - MS_HLC_MAX_AHEAD_MS ? MS_HLC_MAX_MS : now_ms + MS_HLC_MAX_AHEAD_MS;

	if (remote < 0 || ms_hlc_ms(remote) > bound)
		return false;
	if (remote > *clock)
		*clock = remote;
	return true;
}

int
ms_hlc_compare(int64_t a, const uint8_t ra[16], int64_t b, const uint8_t rb[16])
{
	int			c;

	if (a != b)
		return a < b ? -1 : 1;
	c = memcmp(ra, rb, 16);
	return c < 0 ? -1 : c > 0;
}

void
ms_hlc_text(int64_t stamp, char out[MS_HLC_TEXT])
{
	snprintf(out, MS_HLC_TEXT, "%lld.%u", (long long) ms_hlc_ms(stamp), ms_hlc_counter(stamp));
}
