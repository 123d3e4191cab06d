/*-------------------------------------------------------------------------
 * wish.h
 *	  Settings and wishes (docs/protocol.md 5.4): sync.wish (wish.c), the
 *	  relay sending wishes down (wish_send.c), their fates filed from
 *	  uploads (wish_fates.c).
 *-------------------------------------------------------------------------
 */
#ifndef MS_WISH_H
#define MS_WISH_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/uuid.h"

#include "pass.h"
#include "sync.pb-c.h"

/*
 * ms_wish_replicas: the replicas a pass writes to for their wishes alone:
 * the live ones with a wish not yet sent, with those provisioned
 * (provisioning, or NULL); NULL when there are none of either.
 */
extern ArrayType *ms_wish_replicas(ms_pass *p, ArrayType *provisioning);

/*
 * ms_wish_due: the replicas with wishes not yet sent, read once per pass
 * (one statement, however many replicas the pass writes to); NULL when none.
 * ms_wish_due_for: whether this replica is one of them.
 */
typedef struct ms_wish_due_set ms_wish_due_set;
extern ms_wish_due_set *ms_wish_due(ms_pass *p);
extern bool ms_wish_due_for(const ms_wish_due_set *due, const pg_uuid_t *replica);

/*
 * ms_wish_pack: the wishes not yet sent to this replica, appended to down as
 * Down's field 5 (repeated Wish); false when there are none.  ms_wish_sent:
 * they went in message `number`.
 */
extern bool ms_wish_pack(ms_pass *p, const pg_uuid_t *replica, StringInfo down);
extern void ms_wish_sent(ms_pass *p, const pg_uuid_t *replica, uint64 number);

/* ms_wish_fates: what an upload says became of the replica's wishes (Up field 15). SPI connected. */
extern void ms_wish_fates(const pg_uuid_t *replica, const Sync__Up *up);

#endif
