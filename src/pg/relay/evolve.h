/*-------------------------------------------------------------------------
 * evolve.h
 *	  Schema changes in the chain: each replica is sent the Table of each
 *	  table whose schema changed since it was last sent it, and told to let
 *	  go of the tables no longer mirrored (docs/protocol.md 5.3).
 *-------------------------------------------------------------------------
 */
#ifndef MS_EVOLVE_H
#define MS_EVOLVE_H

#include "utils/array.h"
#include "utils/uuid.h"

#include "pass.h"

/*
 * ms_evolve_schema: each table's Table packed and hashed, once for the
 * pass, over cat->tables; the Begin a snapshot carries (cat->begin) and
 * its hash (cat->schema_hash, which changes with any table a replica can
 * see); cat->evolve, the pass's schema changes.
 */
extern void ms_evolve_schema(ms_pass *p, ms_pass_catalog *cat);

/*
 * ms_evolve_kept: a pass's own schema changes over the schemas a pass
 * before it packed (relay.c keeps them with the catalog), in the current
 * memory context.
 */
extern ms_evolve *ms_evolve_kept(const ms_evolve *kept);

/*
 * ms_evolve_check_race: raises a serialization failure (transient: the
 * pass runs again) when a declaration was written after the pass's
 * snapshot, which the catalog, read as it is now, already follows.
 */
extern void ms_evolve_check_race(ms_pass *p);

/*
 * ms_evolve_observe: part of observe (pg_temp.ms_forget filled): what each
 * live replica not provisioned is to be sent of the schema this pass; a
 * replica a 0.1 server provisioned with another schema is provisioned.
 * forgotten: how many replicas observe forgot.
 */
extern void ms_evolve_observe(ms_pass *p, ms_pass_catalog *cat, int64 forgotten);

/*
 * MS_EVOLVE_DUE(kept): the replicas r ms_evolve_observe has anything to do
 * for, with nothing forgotten: a live one not provisioned whose schema is not
 * the pass's ($1); kept is MS_EVOLVE_KEPT while a table is held back, else "".
 * Observe counts them in its one look at sync.replicas (observe.c).
 */
#define MS_EVOLVE_DUE(kept) \
	"r.live AND NOT r.provision AND r.schema_hash IS DISTINCT FROM $1" kept
#define MS_EVOLVE_KEPT " AND EXISTS (SELECT FROM sync.replica_tables x WHERE x.replica = r.id)"

/* ms_evolve_any: whether a replica is sent a schema change this pass. */
extern bool ms_evolve_any(const ms_pass_catalog *cat);

/*
 * ms_evolve_down: append to a Down being written for the replica the
 * fields of its schema changes (record.c, as the pass's first message for
 * it begins).
 */
extern void ms_evolve_down(const ms_pass_catalog *cat, const pg_uuid_t *replica, StringInfo down);

/*
 * ms_evolve_recorded: after the pass recorded its messages (pg_temp.
 * ms_written): what each replica written to was sent of the schema, by its
 * snapshot (provisioning: those that were to be provisioned) or its changes;
 * the rows of tables let go of taken back by the message that said so.
 */
extern void ms_evolve_recorded(ms_pass *p, ms_pass_catalog *cat, ArrayType *provisioning);

/*
 * ms_evolve_stale: whether an upload the replica made having applied
 * messages through `applied` holds the rows of table `table` in a schema it
 * has been sent a change of since: those are not filed.  SPI connected.
 */
extern bool ms_evolve_stale(const pg_uuid_t *replica, const char *table, uint64 applied);

#endif
