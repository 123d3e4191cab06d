/*-------------------------------------------------------------------------
 * table.h
 *	  A mirrored table as the server knows it (ms_table: its columns, key and
 *	  foreign keys), what a declaration that does not match it is
 *	  (ms_problem), and what the validator reads of pg_catalog to make one.
 *	  Below both catalog.c, which reads every declaration into ms_tables,
 *	  and validate.c, which makes each: neither includes the other's header
 *	  to know the shape.
 *-------------------------------------------------------------------------
 */
#ifndef MS_TABLE_H
#define MS_TABLE_H

#include "postgres.h"

#include "access/attnum.h"

#include "decl.h"
#include "row.h"				/* ms_type: the SQLite type a column travels as */

/* One mirrored column (unmirrored columns are left out). */
typedef struct ms_column
{
	char	   *name;			/* attname */
	char	   *quoted;			/* quote_identifier(name) */
	AttrNumber	attnum;
	Oid			type;
	Oid			base_type;		/* getBaseType(type): what a domain's values are */
	Oid			collation;		/* attcollation: what its index compares by, or InvalidOid */
	char	   *type_name;		/* format_type_be(type) */
	ms_type	sqlite_type;	/* its name: ms_type_name() */
	bool		not_null;
	bool		key;			/* one of the key columns */
	int32		typmod;			/* its typmod, or its domain's: what bounds a key part */
	bool		spelled;		/* travels in its key spelling (keys.h): a
								 * column of the key or a foreign key, or one a
								 * foreign key of a mirrored table references */
	bool		replica_owned;
	int			field;			/* field number in the proto codec */
	int			id;				/* its id for good (docs/protocol.md 5.3); 0: not known */
} ms_column;

/*
 * A foreign key to a mirrored table (read from pg_constraint), through any
 * unique constraint or index of the parent: a row points at a parent when
 * none of its columns is null (MATCH SIMPLE).  Keyed, the referenced columns
 * include the parent's declared key, and the columns referencing it name the
 * parent; otherwise the parent is the row whose referenced columns hold the
 * row's values, looked up by them (wanted.h: ms_fkey_key).
 */
typedef struct ms_fkey
{
	char	   *name;			/* conname */
	int			parent;			/* sync.tables.id of the referenced table */
	int			ncols;
	int		   *cols;			/* indexes into the table's columns[], in constraint order */
	char	  **parent_cols;	/* the referenced columns' names, in the same order */
	Oid		   *eqop;			/* per column, the constraint's own equality
								 * (conpfeqop), parent's value on its left */
	char	  **eq;				/* the same, as "OPERATOR(schema.op)" */
	char	  **collate;		/* per column, "" or " COLLATE x": the parent's
								 * value compared as the child's column is */
	char	  **parent_collate;	/* and the child's compared as the parent's is */
	Oid		   *parent_types;	/* the referenced columns' types and collations */
	Oid		   *parent_collations;
	bool		keyed;			/* the referenced columns include the parent's key */
	int			nby;			/* keyed: the parent's key columns */
	int		   *by_parent_key;	/* keyed: those of cols referencing the parent's
								 * key, in its order: a row's parent key is their values */
	int		   *noted;			/* cols in the order the noting trigger spells
								 * them in a note's "pointed": keyed, the parent's
								 * key (by_parent_key) first, then the others */
} ms_fkey;

/*
 * A mirrored table: its declaration resolved against what the table is now
 * (validate.c).  Indexes into columns[] are -1 where a column is gone.
 */
typedef struct ms_table
{
	const ms_decl *decl;		/* what was declared */
	int			id;				/* sync.tables.id */
	Oid			relid;
	char	   *name;			/* wire name */
	char	   *qualified;		/* quote_qualified_identifier(nspname, relname) */
	bool		record;			/* mirror: record or setting (true) or catalog (false) */
	bool		setting;		/* mirror: setting, keyed by its origin alone */
	ms_rule		rule;
	int			rule_column;	/* assigned / follows: index into columns[], else -1 */
	int			follows_fkey;	/* follows: index into fkeys[], else -1 */
	/* grouped */
	Oid			members;
	char	   *members_qualified;
	char	  **member_key;		/* the member table's columns pointing at this
								 * table, in this table's key order (nkey of
								 * them), quoted */
	Oid			assignments;
	char	   *assignments_qualified;
	char	   *assignment_replica;	/* quoted */
	char	   *group_column;	/* quoted */
	char	  **member_key_names;	/* the same three, as attnames */
	char	   *assignment_replica_name;
	char	   *group_column_name;

	int			ncolumns;
	ms_column  *columns;		/* mirrored columns, in attnum order */
	int			nkey;
	int		   *key;			/* indexes into columns[], in key order */
	int			nfkeys;
	ms_fkey    *fkeys;			/* foreign keys to mirrored tables */
	int			origin;			/* index into columns[], or -1 */
	int			version;		/* index into columns[], or -1 */
	bool		hlc;			/* version => 'hlc': the replicas' clock stamps it */
	int			partition;		/* index into columns[], or -1 */
	int			created;		/* index into columns[], or -1 */
	char	   *sender;			/* column stamped with sync.file's sender, or NULL */
	char	   *retired;		/* replica-side column name, or NULL */
	int			nunmirrored;
	char	  **unmirrored;		/* attnames of the columns that never travel */
	int			ngenerated;
	int		   *generated;		/* indexes into columns[] */
	Oid			active;			/* a view, or InvalidOid */
	char	   *active_qualified;
	bool		proto;			/* codec: proto (true) or json (false) */
	int			depth;			/* 0 for a table pointing at no mirrored table; parents first */
} ms_table;

/*
 * A declaration that does not match its table: a row of sync.check(), and
 * when declaring, sync.mirror's error.
 */
typedef struct ms_problem
{
	char	   *table;			/* wire name */
	char	   *problem;		/* a short phrase: "column dropped", ... */
	char	   *detail;			/* a sentence: what sync.check() says */
	/* sync.mirror's error */
	int			sqlerrcode;
	char	   *message;		/* errmsg */
	char	   *why;			/* errdetail, or NULL */
	char	   *hint;			/* errhint, or NULL */
} ms_problem;

/* What declare/ reads of pg_catalog to make an ms_table (table.c). */

/* ms_wire_name: relname in public, else schema.relname. */
extern char *ms_wire_name(Oid relid);

/* ms_sqlite_type: the SQLite type a server type travels as (docs/protocol.md 4). */
extern ms_type ms_sqlite_type(Oid type);


/* ms_operator_sql: "OPERATOR(schema.name)" of an operator, for SQL. */
extern char *ms_operator_sql(Oid opno);

/*
 * ms_eq_operator: "OPERATOR(schema.=)", the equality of type's default
 * operator class wherever it lives (an extension's type: not pg_catalog),
 * named so that no search_path can put another in its place.
 */
extern char *ms_eq_operator(Oid type);

/*
 * ms_key_type_ok: smallint, integer, bigint, numeric, text, varchar, uuid,
 * date, time, timestamp, timestamptz, an enum (or a domain over one): a
 * type whose every value has one spelling (keys.h).
 */
extern bool ms_key_type_ok(Oid type);

/*
 * ms_unique_on: whether relid has a unique, immediate, non-partial index on
 * exactly these columns (in any order), so that they identify a row.
 */
extern bool ms_unique_on(Oid relid, int n, const AttrNumber *attnums);

#endif
