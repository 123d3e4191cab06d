/*
** upload.h - what upload.c and uprows.c share: an upload as it is built.
*/
#ifndef MS_UPLOAD_H
#define MS_UPLOAD_H

#include "magic_sync_sqlite.h"

typedef struct table_rows
{
	Sync__Rows	msg;
	size_t		content;		/* bytes of msg's fields */
	size_t		cap_up;
	size_t		cap_keys;
	size_t		cap_del;
} table_rows;

typedef struct uploader
{
	ms_ctx	   *c;
	Sync__Up	up;
	Sync__Applied applied;
	size_t		bound;
	size_t		minimal;		/* header, applied, gap, backlog */
	size_t		size;			/* as the upload stands */
	int64_t		resend_after;
	uint8_t		send_id[MS_SEND_ID_BYTES];
	char		build[MS_BUILD_MAX + 1];
	int64_t		max_rows;		/* -1: as many as fit */
	const char *lane;			/* the lane uploaded (lanes.c): "" the first, which says what the engine says */
	bool		first;			/* lane is the first */
	int			rows;
	int			refusals;
	bool		full;
	bool		rekeyed;		/* keys were spelled as their types print them: walk again */
	sqlite3_stmt *stamp;
	sqlite3_stmt *aside;
	sqlite3_stmt *drop;
	/* carried notes, to stamp: (table, key) pairs */
	ms_buf		carried;
	/* notes to set aside, drop or key again, once the walk over them ends */
	ms_buf		later;
} uploader;

/* what later() puts off */
typedef enum later_kind
{
	LATER_DROP,
	LATER_ASIDE,				/* text: the SQLSTATE's 5 characters, then why */
	LATER_REKEY					/* text: the key as its types print it */
} later_kind;

/* upload.c: an array grown in the arena; the bytes of a field of n bytes */
extern void *ms_up_grow(ms_ctx *c, void *old, size_t elem, size_t n, size_t *cap);
extern size_t ms_up_field(size_t n);

/* uprows.c: a wire Key of a canonical key (NULL, *why: it cannot travel); a table's noted rows, while they fit */
extern Sync__Key *ms_up_wire_key(ms_ctx *c, const char *key, size_t len, size_t *size, const char **why);
extern int	ms_up_rows_of(uploader *u, const ms_tbl *t, table_rows *tr);

#endif							/* MS_UPLOAD_H */
