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

#endif
