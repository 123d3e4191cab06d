/*-------------------------------------------------------------------------
 * upread.h
 *	  An upload read a piece at a time (docs/protocol.md 9), so that filing
 *	  it takes memory for one piece, never for the whole decoded: a 16 MiB
 *	  upload of empty rows is its 16 MiB, not the gigabyte protobuf-c would
 *	  make of its millions of pointers and structs.
 *
 * ms_up_read checks the whole upload field by field, every check
 * ms_up_decode makes, unpacking one element of a list at a time and freeing
 * it, and returns its head: the fields that are not lists.  The lists are
 * then read a piece at a time: ms_up_next walks one of them (rows,
 * refusals, digests, backlog), and a Rows is read one upsert or delete at
 * a time with ms_rows_open and ms_rows_next.
 *-------------------------------------------------------------------------
 */
#ifndef MS_UPREAD_H
#define MS_UPREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "sync.pb-c.h"
#include "wire.h"

/* Digests and backlog entries an upload may carry: the replica sends one per table. */
#define MS_UP_LIST_MAX 65536

/*
 * ms_up_read: check an upload of len bytes (at most bound) and unpack its
 * head with alloc (its lists left empty; the caller frees it).  NULL, with
 * the status and reason, when it does not pass; a well-formed head of a
 * later protocol comes back unchecked with MS_WIRE_LATER_PROTOCOL.
 */
extern Sync__Up *ms_up_read(const uint8_t *buf, size_t len, size_t bound, ms_allocator *alloc,
							ms_wire_status *status, char reason[MS_REASON_MAX]);

/*
 * ms_up_next: the next element after *pos (0 to begin) of one of the
 * upload's lists (field: MS_FIELD_UP_ROWS ...), as its bytes; false after
 * the last.  For an upload ms_up_read passed.
 */
extern bool ms_up_next(const uint8_t *buf, size_t len, uint32_t field, size_t *pos,
					   const uint8_t **elem, size_t *elem_len);

/* One Rows of an upload, read an upsert or a delete at a time. */
typedef struct ms_rows_reader
{
	const uint8_t *buf;
	size_t		len;
	char		table[MS_NAME_MAX + 1];
	size_t		upsert_at;		/* where the next upsert, key and delete are looked for */
	size_t		key_at;
	size_t		delete_at;
} ms_rows_reader;

/* ms_rows_open: a Rows as ms_up_next gave it (ms_up_read checked it). */
extern void ms_rows_open(ms_rows_reader *r, const uint8_t *rows, size_t len);

/*
 * ms_rows_next: the next upsert (*row its bytes) and, after the last
 * upsert, the next delete (*row NULL); *key unpacked with alloc (the caller
 * frees it).  False after the last, or when alloc fails (*key NULL).
 */
extern bool ms_rows_next(ms_rows_reader *r, ms_allocator *alloc, Sync__Key **key,
						 const uint8_t **row, size_t *row_len);

#endif
