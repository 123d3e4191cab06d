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
#include "table.h"

/*
 * ms_catalog_tables: every declared table that flows, parents first (by
 * depth, then id).  SPI must be connected; everything is allocated in
 * CurrentMemoryContext.  A table whose declaration no longer matches it
 * (sync.check() says which) is held back, with every table joined to it by
 * foreign keys (ms_catalog_hold), and left out; so are the tables of a
 * foreign key cycle made after they were declared, each named a problem.
 */
extern List *ms_catalog_tables(void);

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
 * A problem of no one table errors.
 */
extern List *ms_catalog_hold(List *tables, List *problems, List **held);

/*
 * ms_check_triggers: appends to *problems what sync.check() says of the
 * triggers of tables (declare/check.c): one missing, disabled, not ENABLE
 * ALWAYS or altered lets a write go unnoted.  Filing holds back such a table
 * as the relay does, so that no row is filed that no note would send.
 */
extern void ms_check_triggers(List *tables, List **problems);

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

/*
 * ms_member_match: "m.k1 = x.c1 AND ...", a grouped table's member rows
 * (alias m) joined to its rows (alias x), compared as the key columns' own
 * types with their equality, under their collations, so that the table's
 * key index serves the join (a member column of another type or collation
 * is cast to the key's).
 */
extern char *ms_member_match(const ms_table *t, const char *m, const char *x);

#endif
