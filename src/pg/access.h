/*-------------------------------------------------------------------------
 * access.h
 *	  Who may act for a replica.
 *-------------------------------------------------------------------------
 */
#ifndef MS_ACCESS_H
#define MS_ACCESS_H

#include "utils/uuid.h"

#include "probe.h"

/*
 * ms_replica_access: the caller may pull and file for this replica: it is
 * the replica's own role, or a member of sync_admin.  Errors otherwise (42501,
 * the same for a uuid not registered, so no role learns which are), and,
 * to those who may, when the replica is unknown or dropped.  SPI connected.
 */
extern void ms_replica_access(pg_uuid_t *replica, const char *what);

/*
 * ms_replica_access_row: the same, and also(row, its descriptor, arg) on
 * the replica's row of sync.replicas as the check read it (the caller's
 * snapshot), when it found one: one probe of the row for the check and the
 * caller's own look (sync.pull, issue 37).  also is called before the check
 * decides, and its caller uses what it read only once this returns.
 */
extern void ms_replica_access_row(pg_uuid_t *replica, const char *what, ms_probe_fn also, void *arg);

/*
 * ms_require_owner: caller owns relid, as CREATE TRIGGER asks (42501, as
 * PostgreSQL says it, otherwise); a relation gone is not checked.
 */
extern void ms_require_owner(Oid relid, Oid caller);

/* ms_require_select: caller may SELECT relid (a declaration's active view). */
extern void ms_require_select(Oid relid, Oid caller);

/*
 * ms_require_grant: caller may grant role, as GRANT asks: a superuser for a
 * superuser role, else CREATEROLE or ADMIN OPTION on it (42501 otherwise).
 * The role exists.
 */
extern void ms_require_grant(const char *role, Oid caller);

#endif
