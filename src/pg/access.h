/*-------------------------------------------------------------------------
 * access.h
 *	  Who may act for a replica.
 *-------------------------------------------------------------------------
 */
#ifndef MS_ACCESS_H
#define MS_ACCESS_H

#include "utils/uuid.h"

/*
 * ms_replica_access: the caller may pull and file for this replica: it is
 * the replica's own role, or a member of sync_admin.  Errors otherwise, and
 * when the replica is unknown or dropped.  SPI connected.
 */
extern void ms_replica_access(pg_uuid_t *replica, const char *what);

#endif
