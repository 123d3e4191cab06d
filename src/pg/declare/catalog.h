/*-------------------------------------------------------------------------
 * catalog.h
 *	  Reading declarations: the ground every other server module stands on.
 *
 * sync.tables says what was declared; pg_catalog says what the table is now.
 * ms_catalog_tables() reads both into one description per mirrored table,
 * so that no other module reads sync.tables or pg_attribute itself, and
 * every identifier comes from the catalogs, quoted once, here.  The
 * declaration itself is decl.h; validate.c resolves it into an ms_table.
 *-------------------------------------------------------------------------
 */
#ifndef MS_CATALOG_H
#define MS_CATALOG_H

#include "postgres.h"

#include "access/attnum.h"
#include "nodes/pg_list.h"

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
 * ms_catalog_tables: every declared table that flows, parents first (by
 * depth, then id).  SPI must be connected; everything is allocated in
 * CurrentMemoryContext.  A table whose declaration no longer matches it
 * (sync.check() says which) is held back, with every table joined to it by
 * foreign keys (ms_catalog_hold), and left out; a problem of no one table
 * (a foreign key cycle) errors (ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE).
 */
extern List *ms_catalog_tables(void);

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

/*
 * ms_catalog_read: like ms_catalog_tables, but never errors on a mismatch:
 * it appends an ms_problem to *problems for each, and describes every table
 * that still exists as far as it can (a column that is gone is left out).
 */
extern List *ms_catalog_read(List **problems);

/* A table held back (ms_catalog_hold): why it waits. */
typedef struct ms_held
{
	ms_table   *t;				/* as far as it is described; NULL: not at all (dropped) */
	char	   *name;			/* wire name */
	char	   *why;			/* a sentence */
} ms_held;

/*
 * ms_catalog_hold: the tables of ms_catalog_read that flow while those the
 * problems name (sync.check()'s rows, a foreign key not indexed aside) do
 * not: each of those, and every table joined to one by a foreign key either
 * way (a child follows its parent; a parent is wanted through its
 * children), is held back; *held (when not NULL) gets an ms_held for each.
 * A problem of no one table (a cycle) errors, as it did.
 */
extern List *ms_catalog_hold(List *tables, List *problems, List **held);

/* ms_catalog_find: the table of this id in a list from ms_catalog_tables, or NULL. */
extern ms_table *ms_catalog_find(List *tables, int id);

/*
 * ms_key_expr: an SQL expression computing the canonical key (text COLLATE
 * "C") of a row of t from the columns of the row named alias ("t.id" ...).
 */
extern char *ms_key_expr(const ms_table *t, const char *alias);

/*
 * ms_key_match: an SQL condition matching alias's key columns to the parts of
 * the canonical key in keyexpr ("(t.a, t.b) = (sync.key_parts(k)[1]::int, ...)"),
 * usable by an index on the key.
 */
extern char *ms_key_match(const ms_table *t, const char *alias, const char *keyexpr);

/*
 * ms_key_parts_out / ms_key_match_parts: the same match in two halves, for
 * a key read in a subquery: its parts as values of the key columns, listed
 * as output columns ("..., (sync.key_parts(s.key))[1]::int AS kp1"), and
 * alias's key columns compared with them ("t.a = k.kp1 AND ...").  Each part
 * is then computed once per key, not once per row compared with it: a
 * small table the planner reads whole otherwise parses the key again for
 * every row it reads.
 */
extern char *ms_key_parts_out(const ms_table *t, const char *keyexpr);
extern char *ms_key_match_parts(const ms_table *t, const char *alias, const char *parts);

/*
 * ms_key_part: part i (from 1) of the canonical key in keyexpr as a value of
 * column c: of its type, under its collation, so that c's own index serves a
 * comparison with it (a key is text COLLATE "C", which a column under
 * another collation cannot be looked up by).
 */
extern char *ms_key_part(const ms_column *c, const char *keyexpr, int i);

/*
 * ms_fkey_match: the rows of child (alias c) pointing at the row of its
 * parent (alias p) through fk, compared as the constraint compares them:
 * under the child's collations, when to_child, so that an index on the
 * child's columns serves it; otherwise under the parent's, for its index.
 */
extern char *ms_fkey_match(const ms_table *child, const ms_fkey *fk, const char *c, const char *p,
						   bool to_child);

/*
 * ms_catalog_refuse: the ereport (ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE)
 * of a declaration that no longer matches its table, with hint.
 */
extern void ms_catalog_refuse(const ms_problem *p, const char *hint) pg_attribute_noreturn();

/*
 * ms_fkey_unindexed: NULL when an index of t serves the relay's walk from a
 * parent to the rows of t pointing at it through fk: valid, not partial,
 * leading with fk's columns in any order (or, keyed, with those referencing
 * the parent's key), each under its column's collation, by an operator
 * family holding the constraint's equality.  Otherwise the CREATE INDEX
 * that would: without one, every pass that plans a change to a parent reads
 * t whole, as often as rows in question point at it.
 */
extern char *ms_fkey_unindexed(const ms_table *t, const ms_fkey *fk);

/* sync.check()'s problem for such a foreign key: the one the relay runs with */
#define MS_CHECK_UNINDEXED "foreign key not indexed"

/* Helpers of the files in declare/. */

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
 * ms_member_match: "m.k1 = x.c1 AND ...", a grouped table's member rows
 * (alias m) joined to its rows (alias x), compared as the key columns' own
 * types with their equality, under their collations, so that the table's
 * key index serves the join (a member column of another type or collation
 * is cast to the key's).
 */
extern char *ms_member_match(const ms_table *t, const char *m, const char *x);

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
