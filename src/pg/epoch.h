/*-------------------------------------------------------------------------
 * epoch.h
 *	  Epochs and generations.
 *
 *   epoch       a random id of the installation and the secret that seals
 *               its messages.  A new epoch always begins with a snapshot for
 *               every replica, and only an operator begins one
 *               (sync.epoch_begin), or the first relay pass.
 *   generation  the server's lineage (sync.generations), carried by every
 *               message.  Raised with every new epoch, and when the server's
 *               history changed under its record: a new timeline (a standby
 *               promoted, a point-in-time recovery), another cluster or
 *               database (a copy restored).  A replica never applies a
 *               message of a generation older than the one it follows, so an
 *               old primary's queued messages, and stale snapshots, are
 *               refused; a raise provisions nobody (docs/design.md 4.8).
 *-------------------------------------------------------------------------
 */
#ifndef MS_EPOCH_H
#define MS_EPOCH_H

#include "seal.h"

typedef struct ms_epoch
{
	uint8		id[MS_EPOCH_BYTES];
	uint8		secret[MS_SECRET_BYTES];
	uint64		generation;		/* the current generation; 0 before one was recorded */
} ms_epoch;

/*
 * ms_epoch_current: the current epoch and generation; begins the first epoch
 * when there is none.  SPI connected.  Returns false when there was none and
 * it began one.
 */
extern bool ms_epoch_current(ms_epoch *e);

/* ms_epoch_read: the current epoch and generation, false (and zeroes) when none began yet. */
extern bool ms_epoch_read(ms_epoch *e);

/*
 * ms_epoch_begin: end the current epoch, begin a new one in a new
 * generation, provision every replica.  Never on a replica's word.
 */
extern void ms_epoch_begin(const char *reason, ms_epoch *e);

/* ms_epoch_find: the secret of a past or current epoch; false when unknown. */
extern bool ms_epoch_find(const uint8 *id, ms_epoch *e, bool *current);

/*
 * ms_generation_observe: raise the generation when the server's timeline,
 * cluster or database is not the one its current generation began on
 * (relay passes call it first); e->generation is the current one after.
 */
extern void ms_generation_observe(ms_epoch *e);

#endif
