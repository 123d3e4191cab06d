/*-------------------------------------------------------------------------
 * lane.c
 *	  A lane's name (lane.h).
 *-------------------------------------------------------------------------
 */
#include "lane.h"

bool
ms_lane_check(const char *s, size_t len, char reason[MS_REASON_MAX])
{
	if (len == 0)
		return true;			/* the first lane */
	if (len > MS_LANE_MAX)
		return ms_refuse(reason, "a lane's name is at most %d bytes, not %zu", MS_LANE_MAX, len);
	if (!(s[0] >= 'a' && s[0] <= 'z'))
		return ms_refuse(reason, "a lane's name begins with a lower-case letter (a to z), not byte 0x%02x",
						 (unsigned) (unsigned char) s[0]);
	for (size_t i = 1; i < len; i++)
	{
		unsigned char ch = (unsigned char) s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_'))
			return ms_refuse(reason, "a lane's name is lower-case letters, digits and underscores:"
							 " byte %zu is 0x%02x", i + 1, (unsigned) ch);
	}
	return true;
}
