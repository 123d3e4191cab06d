/*-------------------------------------------------------------------------
 * magic_sync_sqlite.h
 *	  What the modules of the replica extension share.
 *-------------------------------------------------------------------------
 */
#ifndef MAGIC_SYNC_SQLITE_H
#define MAGIC_SYNC_SQLITE_H

#include <sqlite3ext.h>

#include "alloc.h"

/* ms_sqlite_allocator: a protobuf-c allocator on sqlite3_malloc64. */
extern ms_allocator *ms_sqlite_allocator(void);

/* Each module registers its SQL functions; SQLITE_OK or an error code. */
extern int	ms_keys_register(sqlite3 *db);

#endif
