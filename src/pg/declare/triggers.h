/*-------------------------------------------------------------------------
 * triggers.h
 *	  The triggers a declaration installs (docs/design.md 4.1): sync.mirror and
 *	  sync.retrigger create them, sync.check compares pg_trigger with them,
 *	  sync.unmirror drops them.  The trigger function itself, sync.note, is
 *	  relay/notes.c: it reads what the arguments written here say.
 *
 * Everything a trigger needs is in its arguments, so firing never reads
 * sync.tables.  The second argument is the kind of note:
 *
 *	 r (a mirrored table):  id, 'r', nkey, key columns..., nignore, columns a
 *			change of which is not noted (replica-owned, unmirrored)...,
 *			partition column or '', nfkeys, then per foreign key to a
 *			mirrored table: its name, ncols, its columns in the parent's
 *			key order...
 *	 m (a group's members): id, 'm', nkey, the member columns pointing at the
 *			grouped row in its key order..., group column
 *	 a (a group's assignments): id, 'a', replica column, group column
 *	 t (TRUNCATE):			id, 't'
 *-------------------------------------------------------------------------
 */
#ifndef MS_TRIGGERS_H
#define MS_TRIGGERS_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "catalog.h"

/* The kinds of note, a trigger's second argument. */
#define MS_NOTE_ROW			'r'
#define MS_NOTE_MEMBER		'm'
#define MS_NOTE_ASSIGNMENT	'a'
#define MS_NOTE_TRUNCATE	't'

/* One trigger as sync.mirror writes it. */
typedef struct ms_trigger
{
	Oid			relid;			/* the table it is on */
	char	   *name;
	int16		tgtype;			/* pg_trigger.tgtype */
	int			nargs;
	char	  **args;			/* pg_trigger.tgargs */
} ms_trigger;

/*
 * ms_triggers_of: the triggers of a declared table: the noting and
 * TRUNCATE-refusing triggers on the table, and for a grouped table the same
 * on its member and assignment tables.
 */
extern List *ms_triggers_of(const ms_table *t);

/*
 * ms_trigger_create: CREATE TRIGGER for tg through SPI (a TRUNCATE trigger
 * on a partitioned table also on each partition), first dropping one of
 * the same name when replace.
 */
extern void ms_trigger_create(const ms_trigger *tg, bool replace);

/*
 * ms_partitions: the partitions of a partitioned table at every level, by
 * name (NIL for another table).  A row trigger is cloned onto each, a
 * TRUNCATE trigger is not: each gets its own.
 */
extern List *ms_partitions(Oid relid);

/* ms_triggers_drop: drops the triggers of d, where their tables still are. */
extern void ms_triggers_drop(const ms_decl *d);

#endif
