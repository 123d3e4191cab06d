/*-------------------------------------------------------------------------
 * notes.h
 *	  The noting trigger (sync.note) and the triggers sync.mirror installs:
 *	  declare.c creates them, check.c compares pg_trigger with them.
 *-------------------------------------------------------------------------
 */
#ifndef MS_NOTES_H
#define MS_NOTES_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "catalog.h"

/* One trigger as sync.mirror writes it. */
typedef struct ms_trigger
{
	Oid			relid;			/* the table it is on */
	char	   *name;
	int16		tgtype;			/* pg_trigger.tgtype */
	int			nargs;
	char	  **args;			/* pg_trigger.tgargs: everything the trigger needs */
} ms_trigger;

/*
 * ms_notes_triggers: the triggers of a declared table: the noting and
 * TRUNCATE-refusing triggers on the table, and for a grouped table the same
 * on its member and assignment tables.
 */
extern List *ms_notes_triggers(const ms_table *t);

/*
 * ms_trigger_create: CREATE TRIGGER for tg through SPI (a TRUNCATE trigger
 * on a partitioned table also on each partition), first dropping one of
 * the same name when replace.
 */
extern void ms_trigger_create(const ms_trigger *tg, bool replace);

#endif
