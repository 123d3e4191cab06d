/*-------------------------------------------------------------------------
 * epoch.h
 *	  Epochs: a random id of the installation and the secret that seals its
 *	  messages.  A new epoch always begins with a snapshot for every replica.
 *-------------------------------------------------------------------------
 */
#ifndef MS_EPOCH_H
#define MS_EPOCH_H

#include "seal.h"

typedef struct ms_epoch
{
	uint8		id[MS_EPOCH_BYTES];
	uint8		secret[MS_SECRET_BYTES];
} ms_epoch;

/*
 * ms_epoch_current: the current epoch; begins the first one when there is
 * none.  SPI connected.  Returns false when there was none and it began one.
 */
extern bool ms_epoch_current(ms_epoch *e);

/* ms_epoch_begin: end the current epoch, begin a new one, provision every replica. */
extern void ms_epoch_begin(const char *reason, ms_epoch *e);

/* ms_epoch_find: the secret of a past or current epoch; false when unknown. */
extern bool ms_epoch_find(const uint8 *id, ms_epoch *e, bool *current);

#endif
