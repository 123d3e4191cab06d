/*-------------------------------------------------------------------------
 * follow.h
 *	  A declaration following its table (docs/design.md 4.11): after DDL
 *	  (ddl.c, the event trigger) and when a table is declared again with
 *	  other options (declare.c), what changed, written into the
 *	  declaration, and what the replicas need for it: nothing more than the
 *	  schema change the relay sends, the table's rows again, the table
 *	  planned again, or -- what a schema change cannot carry -- the replicas
 *	  holding its rows provisioned again.
 *-------------------------------------------------------------------------
 */
#ifndef MS_FOLLOW_H
#define MS_FOLLOW_H

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"

#include "catalog.h"

/* What following a declaration found. */
typedef struct ms_follow
{
	bool		changed;		/* the declaration must be written again */
	bool		dropped;		/* its table is gone */
	bool		rows_again;		/* the replicas holding its rows are sent them again */
	bool		replan;			/* its rows are planned again from what each replica holds */
	List	   *replan_parents; /* ids of tables whose rows are planned again (a foreign key to them went) */
	char	   *reprovision;	/* what a schema change cannot carry, or NULL */
	bool		untriggered;	/* its old triggers are dropped already: made, not replaced */
	List	   *renamed;		/* columns renamed: char * pairs, from then to */
	StringInfoData what;		/* the changes, in words, for the NOTICE */
} ms_follow;

extern void ms_follow_init(ms_follow *f);

/*
 * ms_follow_table: d (a row of decls) brought up to its table as it is now:
 * columns renamed (by attnum), dropped, added (with the value every row
 * took, when PostgreSQL evaluated its default once), retyped; its foreign
 * keys; its wire name.  SPI connected.
 */
extern void ms_follow_table(ms_decl *d, List *decls, ms_follow *f);

/*
 * ms_follow_redeclare: d, made again from sync.mirror's arguments (and
 * completed), keeps what old fixed for good (column ids, proto fields, the
 * fills of columns still mirrored); f says what the new options need.
 */
extern void ms_follow_redeclare(ms_decl *d, const ms_decl *old, ms_follow *f);

/*
 * ms_follow_finish: what f found, done: the declaration written, its
 * triggers made again, the notes its replicas need, a NOTICE saying what
 * travels (cause: "ALTER TABLE", "sync.mirror").  A table dropped is no
 * longer mirrored.  A declaration that no longer matches its table is left
 * for sync.check() to say, with a WARNING.  Runs as the extension's owner.
 */
extern void ms_follow_finish(ms_decl *d, List *decls, ms_follow *f, const char *cause);

/* ms_follow_note_rows: a note of every row of t (source 'r': its rows go again; 'm': planned again). */
extern uint64 ms_follow_note_rows(const ms_table *t, char source);

/*
 * ms_follow_enum_renamed: a label of enum type renamed (ALTER TYPE ... RENAME
 * VALUE), which no row's trigger sees, as t follows it: provisioned again
 * when a key column of t is of the enum (its replicas hold keys spelled
 * with the old label, which names no value any more), its rows sent again
 * when another column is.  Runs as the extension's owner.
 */
extern void ms_follow_enum_renamed(const ms_table *t, Oid type);

/* ms_follow_unmirrored: what a declaration taken back leaves: its pending notes done, quarantine gone. */
extern void ms_follow_unmirrored(int id);

#endif
