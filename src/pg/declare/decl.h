/*-------------------------------------------------------------------------
 * decl.h
 *	  A declaration (docs/design.md 3): what sync.mirror was told about a
 *	  table, as one row of sync.tables holds it.
 *
 * One struct, whether sync.mirror is filling it from its arguments or the
 * relay reads it back; decl.c is the one place that reads and writes
 * sync.tables, validate.c the one that checks a declaration against
 * pg_catalog.  Columns are named (attnames), tables are oids.
 *-------------------------------------------------------------------------
 */
#ifndef MS_DECL_H
#define MS_DECL_H

#include "postgres.h"

#include "nodes/pg_list.h"

/* Which replicas hold which rows (rule.c reads its text). */
typedef enum ms_rule
{
	MS_RULE_NONE,				/* no rule: only as a parent (docs/design.md 3) */
	MS_RULE_BROADCAST,			/* every replica (of the row's partition) */
	MS_RULE_ASSIGNED,			/* the replica whose uuid is in rule_column */
	MS_RULE_FOLLOWS,			/* wherever the parent rule_column points at goes */
	MS_RULE_GROUPED				/* members of a group given to the replica */
} ms_rule;

/* A mirrored column as it was when declared: sync.check compares it with now. */
typedef struct ms_decl_column
{
	char	   *name;
	char	   *type;			/* format_type_with_typemod when declared */
	int			field;			/* proto codec: its field number, for good; else 0 */
	int			id;				/* its id for good: a schema change matches it by it */
	char	   *fill;			/* added since: the value (text) every row then held took, or NULL */
} ms_decl_column;

/* A column of the table (mirrored or not) by the attnum it had when last seen. */
typedef struct ms_decl_att
{
	char	   *name;
	int			attnum;
} ms_decl_att;

/* A foreign key to a mirrored table as it was when declared. */
typedef struct ms_decl_fkey
{
	char	   *name;			/* conname */
	int			parent;			/* sync.tables.id of the table it points at */
} ms_decl_fkey;

typedef struct ms_decl
{
	int			id;				/* sync.tables.id; 0 until stored */
	Oid			relid;
	char	   *name;			/* wire name: relname in public, else schema.relname */
	bool		record;			/* mirror: record or setting (true) or catalog (false) */
	bool		setting;		/* mirror: setting, a record of one row per replica (wish.c) */
	bool		proto;			/* codec: proto (true) or json (false) */

	ms_rule		rule;
	char	   *rule_column;	/* assigned, follows */
	/* grouped */
	Oid			members;		/* the member table (a foreign key to this one) */
	Oid			assignments;	/* the table giving groups to replicas */
	int			nmember_key;
	char	  **member_key;		/* the member table's columns pointing here, in key order */
	char	   *group_column;	/* the column members and assignments share */
	char	   *assignment_replica; /* the assignment table's uuid of the replica */

	/* the columns by what they are */
	int			nkey;
	char	  **key;			/* in key order */
	char	   *origin;
	char	   *version;
	bool		hlc;			/* version => 'hlc' or 'hlc(col)' (hlc_decl.c) */
	int			nowned;
	char	  **owned;			/* replica_owned */
	int			nunmirrored;
	char	  **unmirrored;
	char	   *retired;		/* a column of the replica's copy only */
	char	   *created;
	int			ngenerated;
	char	  **generated;
	Oid			active;			/* a view, or InvalidOid */
	char	   *partition;
	char	   *sender;

	/* fixed when declared */
	int			ncolumns;
	ms_decl_column *columns;	/* the mirrored columns, in attnum order then */
	int			nfkeys;
	ms_decl_fkey *fkeys;

	/* what schema changes follow the table by (follow.c) */
	int			natts;
	ms_decl_att *atts;			/* every column of the table */
	int			last_id;		/* the highest column id given */

	/* the lane replicas upload its rows in (lane.h): "" the first */
	char	   *lane;
} ms_decl;

/* ms_rule_name: the word of a rule as sync.tables stores it; NULL for none. */
extern const char *ms_rule_name(ms_rule rule);

/* ms_rule_of_name: the rule of a stored word (NULL: none). */
extern ms_rule ms_rule_of_name(const char *word);

/*
 * ms_decl_read_all: every row of sync.tables, by id, as ms_decls allocated
 * in CurrentMemoryContext.  SPI must be connected.
 */
extern List *ms_decl_read_all(void);

/* ms_decl_of_relid, ms_decl_of_name: the declaration in decls, or NULL. */
extern ms_decl *ms_decl_of_relid(List *decls, Oid relid);
extern ms_decl *ms_decl_of_name(List *decls, const char *name);

/*
 * ms_decl_store: writes d into sync.tables: a new declaration (id 0) gets
 * its id (a foreign key of d to itself, stored as parent 0 until now, gets
 * it too); one stored already is written over, id kept (a declaration made
 * again, or following its table's DDL).
 */
extern void ms_decl_store(ms_decl *d);

/*
 * ms_decl_evolving: whether the catalog is updated for schema evolution
 * (sync.tables has the columns follow.c keeps): a library newer than its
 * catalog (installed before ALTER EXTENSION UPDATE ran) behaves as the
 * catalog's version did until it is.
 */
extern bool ms_decl_evolving(void);

/*
 * hlc_decl.c: version => 'hlc' (docs/protocol.md 12).  ms_hlc_version_arg
 * reads sync.mirror's version ('hlc', 'hlc(col)', '"col"') into d->version
 * and d->hlc; ms_hlc_decl_read_sql is the hlc column read_sql selects;
 * ms_hlc_decl_store writes d->hlc after ms_decl_store's row.
 */
extern void ms_hlc_version_arg(ms_decl *d);
extern const char *ms_hlc_decl_read_sql(void);
extern void ms_hlc_decl_store(const ms_decl *d);

/*
 * ms_decl_laned: whether sync.tables has lanes (the lane column): before
 * ALTER EXTENSION UPDATE, every table is in the first lane.
 */
extern bool ms_decl_laned(void);

/* ms_decl_delete: deletes the row of sync.tables of this id. */
extern void ms_decl_delete(int id);

#endif
