/*-------------------------------------------------------------------------
 * lane.h
 *	  Lanes: a replica's uploads split by table (docs/protocol.md 7.2).
 *
 * A lane is named by the server's declaration of a table (sync.mirror's
 * lane argument), told to the replica in the table's Table, and said in
 * every Up and Filed of it.  The first lane is "" and carries what the
 * engine says (the applied message, gap, refusals, digests, backlog);
 * another lane carries only its tables' rows.  Each lane numbers its sends
 * on its own (Up.seq), and the server files a send only if it is numbered
 * beyond the last it filed of that lane: a lane's duplicate and in-order
 * rules never mix with another's.
 *
 * A lane's name is one both sides can print, store and compare byte for
 * byte without quoting: a lower-case ASCII letter, then at most
 * MS_LANE_MAX - 1 lower-case letters, digits and underscores.  Checked
 * wherever one comes from outside: sync.mirror's argument, a Table the
 * replica decodes, an Up the server reads, the lane a host passes to
 * sync_upload.
 *-------------------------------------------------------------------------
 */
#ifndef MS_LANE_H
#define MS_LANE_H

#include <stdbool.h>
#include <stddef.h>

#include "reason.h"

#define MS_LANE_MAX 63

/*
 * ms_lane_check: whether s (len bytes, no NUL needed) names a lane: "" (the
 * first) or a name as above; false with the reason, a sentence a person can
 * act on, when it is not.
 */
extern bool ms_lane_check(const char *s, size_t len, char reason[MS_REASON_MAX]);

#endif
