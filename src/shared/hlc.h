/*-------------------------------------------------------------------------
 * hlc.h
 *	  The hybrid logical clock of a record table declared version => 'hlc'
 *	  (docs/protocol.md 12): one signed 64-bit integer, the physical time in
 *	  milliseconds since the Unix epoch shifted left 16 bits, or'd with a
 *	  logical counter.  Ordered as integers: a later millisecond is always
 *	  greater, and within one the counter orders the writes.  The counter's
 *	  carry runs into the milliseconds: a 65,536th write in one millisecond
 *	  borrows the next, so a stamp is never repeated and never goes back.
 *
 *	  Between two replicas, a stamp alone is not a total order: (stamp,
 *	  replica uuid) is, the uuid compared as 16 bytes (ms_hlc_compare).
 *
 *	  Both sides merge the other's clock: the replica the server's of every
 *	  message (ToReplica.clock), the server the replica's of every upload
 *	  (Up.clock).  A clock from the network more than MS_HLC_MAX_AHEAD_MS
 *	  ahead of the physical clock is not merged (ms_hlc_merge): an absurd
 *	  future clock would otherwise stamp every later write beyond it for
 *	  good.  No database headers: the server and the replica use it alike.
 *-------------------------------------------------------------------------
 */
#ifndef MS_HLC_H
#define MS_HLC_H

#include <stdbool.h>
#include <stdint.h>

#define MS_HLC_COUNTER_BITS 16
/* a day: a device's clock set back by hours still takes the server's */
#define MS_HLC_MAX_AHEAD_MS INT64_C(86400000)
/* the greatest physical time a stamp can hold (year 10889): beyond it, no stamp */
#define MS_HLC_MAX_MS (INT64_MAX >> MS_HLC_COUNTER_BITS)

/* the stamp of a physical time, counter 0; negative times are 0 */
extern int64_t ms_hlc_of_ms(int64_t ms);
/* a stamp's physical time and counter */
extern int64_t ms_hlc_ms(int64_t stamp);
extern uint32_t ms_hlc_counter(int64_t stamp);

/*
 * ms_hlc_tick: the next stamp after last, at physical time now_ms: the
 * greater of last + 1 and now's own.  A physical clock that went back
 * keeps counting on from last.
 */
extern int64_t ms_hlc_tick(int64_t last, int64_t now_ms);

/*
 * ms_hlc_merge: the clock after hearing remote: the greater of both, or
 * clock unchanged and false when remote is negative or more than
 * MS_HLC_MAX_AHEAD_MS ahead of now_ms (untrusted bytes from the network).
 */
extern bool ms_hlc_merge(int64_t *clock, int64_t remote, int64_t now_ms);

/* -1, 0, 1: stamp a of replica ra against stamp b of replica rb (16 bytes each) */
extern int	ms_hlc_compare(int64_t a, const uint8_t ra[16], int64_t b, const uint8_t rb[16]);

/* "ms.counter", as docs/protocol.md spells a stamp; out holds MS_HLC_TEXT */
#define MS_HLC_TEXT 32
extern void ms_hlc_text(int64_t stamp, char out[MS_HLC_TEXT]);

#endif
