/*
 * watch.h: whether a catalog kept across calls -- the relay's across
 * passes, a session's filer across filings -- still says what the database
 * does.  It is read again when a relation it names is altered (a relcache
 * invalidation: DDL, triggers enabled, disabled or dropped, a partition
 * attached, an index made); one invalidated while it is being read, before
 * it knows which relations it names, leaves it invalid too.
 */
#ifndef MS_WATCH_H
#define MS_WATCH_H

#include "postgres.h"

#include "nodes/pg_list.h"

#define MS_WATCH_SEEN 256

typedef struct ms_watch
{
	bool		valid;			/* nothing it watches changed since it was read */
	bool		reading;
	bool		registered;		/* its relcache callback */
	int			nseen;			/* invalidated while read; > MS_WATCH_SEEN: every relation */
	Oid			seen[MS_WATCH_SEEN];
	Oid		   *watched;		/* in the kept catalog's memory */
	int			nwatched;
} ms_watch;

/* before the catalog is read: invalid, and what is invalidated meanwhile is seen */
extern void ms_watch_reading(ms_watch *w);

/*
 * once it is read, in its memory context: the relations of tables (ms_table *),
 * their partitions and the tables their rules read; valid when keep and none
 * of them was invalidated while it was read
 */
extern void ms_watch_read(ms_watch *w, List *tables, bool keep);

#endif
