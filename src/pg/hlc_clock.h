/*-------------------------------------------------------------------------
 * hlc_clock.h
 *	  The server's hybrid logical clock (docs/protocol.md 12; the arithmetic
 *	  is src/shared/hlc.h): kept in sync.clock, merged from every upload
 *	  filed, carried by every message to a replica.
 *-------------------------------------------------------------------------
 */
#ifndef MS_HLC_CLOCK_H
#define MS_HLC_CLOCK_H

#include "postgres.h"

/*
 * ms_hlc_server_clock: what a message written now carries: the greater of
 * the physical time and sync.clock (read once a transaction: a message
 * written a little after another filing merged a greater one carries the
 * older, which a later message brings).  0 without sync.clock (a catalog
 * not yet updated).
 */
extern uint64 ms_hlc_server_clock(void);

/* ms_hlc_filed: a stamp of a row filed in this call (an hlc table's version) */
extern void ms_hlc_filed(int64 stamp);

/*
 * ms_hlc_merge_upload: at the end of a filing, sync.clock takes the greater
 * of itself, the upload's clock and every stamp filed, when that is ahead of
 * the physical time too (otherwise the physical time is the clock, and
 * nothing is written); one more than a day ahead of the physical time is
 * not merged (a LOG line says so), so that an absurd clock from the network
 * never poisons the server's.
 */
extern void ms_hlc_merge_upload(uint64 clock);

#endif
