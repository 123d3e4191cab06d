/*-------------------------------------------------------------------------
 * fields.h
 *	  The field numbers of sync.proto that C writes or reads by hand
 *	  (pbwrite.h): the relay streams a snapshot's messages field by field
 *	  rather than building protobuf-c structs of a million rows, and the
 *	  server reads an upload a piece at a time (upread.h).
 *
 * tests/unit/test_fields.c checks every number here, and its wire type,
 * against the descriptors protoc-c generates from sync.proto: a field
 * renumbered there fails the unit tests, never a replica.
 *-------------------------------------------------------------------------
 */
#ifndef MS_FIELDS_H
#define MS_FIELDS_H

/* Key */
#define MS_FIELD_KEY_PARTS 1			/* repeated string */

/* Rows */
#define MS_FIELD_ROWS_TABLE 1			/* string */
#define MS_FIELD_ROWS_UPSERTS 2			/* repeated bytes */
#define MS_FIELD_ROWS_KEYS 3			/* repeated Key */
#define MS_FIELD_ROWS_DELETES 4			/* repeated Key */
#define MS_FIELD_ROWS_REPLACES 5		/* repeated Key */

/* Begin */
#define MS_FIELD_BEGIN_SCHEMA 1			/* repeated Table */
#define MS_FIELD_BEGIN_ROWS 2			/* uint64 */

/* Down */
#define MS_FIELD_DOWN_BEGIN 1			/* Begin */
#define MS_FIELD_DOWN_TABLES 2			/* repeated Rows */
#define MS_FIELD_DOWN_SCHEMA 3			/* repeated Table: schema changes */
#define MS_FIELD_DOWN_LET_GO 4			/* repeated string: tables let go */
#define MS_FIELD_DOWN_WISHES 5			/* repeated Wish */

/* Wish */
#define MS_FIELD_WISH_ID 1				/* uint64 */
#define MS_FIELD_WISH_TABLE 2			/* string */
#define MS_FIELD_WISH_KEY 3				/* Key */
#define MS_FIELD_WISH_VALUES 4			/* string */
#define MS_FIELD_WISH_APPLY 5			/* string */
#define MS_FIELD_WISH_EXPECTED 6		/* string */

/* EndSnapshot */
#define MS_FIELD_END_SNAPSHOT_TABLES 1	/* repeated string */

/* Up: its lists, read a piece at a time; its length and check (upcheck.h) */
#define MS_FIELD_UP_ROWS 5				/* repeated Rows */
#define MS_FIELD_UP_REFUSALS 6			/* repeated Refusal */
#define MS_FIELD_UP_DIGESTS 7			/* repeated Digest */
#define MS_FIELD_UP_BACKLOG 8			/* repeated Backlog */
#define MS_FIELD_UP_LENGTH 12			/* fixed64 */
#define MS_FIELD_UP_CHECK 13			/* bytes */

/* ToReplica: the bodies, appended to a head */
#define MS_FIELD_TO_REPLICA_DOWN 9		/* Down */
#define MS_FIELD_TO_REPLICA_END_SNAPSHOT 10 /* EndSnapshot */
#define MS_FIELD_TO_REPLICA_FILED 11	/* Filed */
/* ToReplica: the signature, between the head and the body (sign.h) */
#define MS_FIELD_TO_REPLICA_SIGNATURE 14	/* bytes */

#endif
