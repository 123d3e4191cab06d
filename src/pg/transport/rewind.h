/*-------------------------------------------------------------------------
 * rewind.h
 *	  A replica restored from an older copy, its chain taken up where the
 *	  copy left it (rewind.c).
 *-------------------------------------------------------------------------
 */
#ifndef MS_REWIND_H
#define MS_REWIND_H

#include "postgres.h"

#include "utils/uuid.h"

#include "sync.pb-c.h"

/*
 * ms_rewind: the replica says it applied a, before what it acknowledged:
 * when a is a message of the current epoch and generation this server
 * sealed, after the snapshot it follows, the record is taken back to a and
 * what went after it goes again (true); false: provision it again.
 * SPI connected; the replica's row is locked.
 */
extern bool ms_rewind(const pg_uuid_t *replica, const char *replica_text, const Sync__Applied *a);

/*
 * ms_gap_resent: a gap the replica reports closes with what its outbox still
 * holds after what it acknowledged (a snapshot whole, or the lost message):
 * no snapshot is needed.  SPI connected; the replica's row is locked.
 */
extern bool ms_gap_resent(const pg_uuid_t *replica, int64 gap, const uint8 *gap_epoch, size_t gap_epoch_len,
						  bool range_repair);

#endif
