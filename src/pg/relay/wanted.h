/*-------------------------------------------------------------------------
 * wanted.h
 *	  The wanted set (docs/design.md 4.5), from scratch: the oracle every plan is
 *	  checked against, and what provisioning sends.
 *-------------------------------------------------------------------------
 */
#ifndef MS_WANTED_H
#define MS_WANTED_H

#include "postgres.h"

#include "utils/array.h"

#include "pass.h"

/*
 * ms_wanted_fill: fill pg_temp.ms_wanted(replica uuid, tab int, key text
 * COLLATE "C", PRIMARY KEY (replica, tab, key)) -- created when missing,
 * emptied first -- with the wanted sets of the given replicas (a uuid[]; NULL:
 * every live replica not dropped), all at once, in the snapshot of p, over
 * p->tables.  blocked: the plan's pg_temp.ms_blocked has rows, left out
 * (plan.c); a read has none.  Returns the number of rows.
 */
extern uint64 ms_wanted_fill(ms_reader *p, ArrayType *replicas, bool blocked);
/* ms_replica_must_exist: an error (42704), for a person, unless replica id exists */
extern void ms_replica_must_exist(ms_reader *p, Datum id);

/*
 * ms_wanted_read_begin: begin a read of what replica id should hold
 * (sync.wanted, sync.why_all): p->exec begun in the current memory context,
 * the replica checked (ms_replica_must_exist), the catalog read (p->tables)
 * and read as owners (ms_read_as_owners).  The replica as a uuid[] of one.
 */
extern ArrayType *ms_wanted_read_begin(ms_reader *p, Datum id);

/*
 * ms_wanted_into: the same, into pg_temp.<set> (columns replica, tab, key;
 * a unique index on them; others with defaults), not emptied first, leaving
 * out the tables skip names (by id; NULL: none); returns the number of rows
 * it added.
 */
extern uint64 ms_wanted_into(ms_reader *p, ArrayType *replicas, const char *set, const bool *skip,
							 bool blocked);

/*
 * ms_wanted_whole: by table id, the tables a replica wants every row of
 * that is not blocked, whatever it is; NULL when there is none.
 */
extern bool *ms_wanted_whole(List *tables);

/*
 * The SQL the wanted set is made of, shared with the planner so that both
 * say the same thing.  Each is a SELECT of (replica, tab, key):
 *
 * ms_rule_select: the rows of t its rules send (and, for a record table, the
 * rows each replica wrote) to the replicas of pg_temp.<replicas> (id,
 * partition); only the candidate rows of pg_temp.<cand> (replica, tab, key)
 * when cand is not NULL.  NULL when t has no rule.
 *
 * ms_rule_select_rows: the same for the rows of pg_temp.<rows> (tab, key),
 * candidates for every replica: each rule joins the replicas it names (an
 * assigned row its one replica), so the cost follows the rows and the
 * replicas they go to, never rows times replicas.
 *
 * ms_parents_select: the rows of fk's parent (the table parent) that the
 * rows of t listed in pg_temp.<from> (replica, tab, key) point at.
 *
 * ms_followers_select: the rows of t that follow the rows of its parent
 * (the table parent) listed in pg_temp.<from>.
 *
 * ms_children_select: the rows of t pointing by fk at the rows of parent
 * listed in pg_temp.<from>, active or not: the parents step walked back
 * (sync.why).
 */
struct ms_table;
struct ms_fkey;
extern char *ms_rule_select(const struct ms_table *t, const char *replicas, const char *cand);
extern char *ms_rule_select_rows(const struct ms_table *t, const char *replicas, const char *rows);
extern char *ms_parents_select(const struct ms_table *t, const struct ms_fkey *fk,
							   const struct ms_table *parent, const char *from);
extern char *ms_followers_select(const struct ms_table *t, const struct ms_table *parent, const char *from);
extern char *ms_children_select(const struct ms_table *t, const struct ms_fkey *fk,
								const struct ms_table *parent, const char *from);

/*
 * ms_links_round: one round of a closure over foreign keys, the one walk
 * the wanted set, the rows in question, the batch's closure and sync.why
 * share: for each table t of the pass, the rows of each parent t's foreign
 * keys point at from t's rows in pg_temp.<from> (to: the parent; unless
 * skip[its id]), and, with followers, the rows of t following the rows of
 * its parent in from (to: t), each SELECT handed to step with the foreign
 * key it walks (follows: the rule's); the sum of what step returns.  A
 * parent the pass does not describe is passed over.  *links (when not
 * NULL): whether there was any such link to walk.
 */
typedef uint64 (*ms_link_step) (ms_reader *p, const struct ms_table *t, const struct ms_table *to,
								const struct ms_fkey *fk, bool follows, const char *select, void *arg);
extern uint64 ms_links_round(ms_reader *p, const char *from, const bool *skip, bool followers,
							 ms_link_step step, void *arg, bool *links);

/* pieces of those: a key made of some columns, the active view */
extern char *ms_cols_key(const struct ms_table *t, const char *alias, int n, const int *cols);
extern char *ms_active_filter(const struct ms_table *t, const char *alias, const char *by);

/*
 * Through a foreign key fk of t to the table parent:
 *
 * ms_fkey_key: the canonical key of the parent the row alias points at, or
 * NULL when it points at none (a column of the foreign key is null).
 *
 * ms_fkey_noted: the text the noting trigger writes in a note's "pointed"
 * for the row alias (its foreign key's columns, the parent's key first
 * when they reference it), or NULL when it points at none.
 *
 * ms_fkey_pointed: the canonical key of the parent that such a text, the
 * SQL expression noted, names: NULL when none has those values now (a
 * foreign key to other unique columns than the key, whose parent changed
 * them, or was deleted).
 */
extern char *ms_fkey_key(const struct ms_table *t, const struct ms_fkey *fk, const struct ms_table *parent,
						 const char *alias);
extern char *ms_fkey_noted(const struct ms_table *t, const struct ms_fkey *fk, const char *alias);
extern char *ms_fkey_pointed(const struct ms_fkey *fk, const struct ms_table *parent, const char *noted);

#endif
