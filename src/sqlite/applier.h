/*
** applier.h - what apply.c and applyrows.c share: a message as it is
** applied.
*/
#ifndef MS_APPLIER_H
#define MS_APPLIER_H

#include "magic_sync_sqlite.h"

typedef struct stats
{
	int			upserts;
	int			deletes;
	int			retired;
	int			kept;
	int			refused;
	int			let_go;
} stats;

typedef struct applier
{
	ms_ctx	   *c;
	Sync__ToReplica *m;
	stats		n;
	ms_letgo   *lg;
	sqlite3_stmt *refuse;
	sqlite3_stmt *unrefuse;
	sqlite3_stmt *unretire;
	sqlite3_stmt *named;
	sqlite3_stmt *note;
	ms_buf		key;			/* a canonical key */
	ms_buf		rowkey;
	ms_buf		evolved;		/* the result's "schema" member (evolve.c) */
	signed char *usable;		/* per table: its breakage was reported */
} applier;

/* applyrows.c */
extern int	ms_upserts(applier *a, const Sync__Rows *r);
extern int	ms_deletes(applier *a, const Sync__Rows *r);
extern int	ms_end_snapshot(applier *a, const Sync__EndSnapshot *e);

#endif
