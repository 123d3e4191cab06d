/*-------------------------------------------------------------------------
 * validate_int.h
 *	  Inside the validator: what validate.c (the table and its columns) and
 *	  validate_links.c (what the table points at and leans on) share.  No
 *	  other file includes it.
 *-------------------------------------------------------------------------
 */
#ifndef MS_VALIDATE_INT_H
#define MS_VALIDATE_INT_H

#include "access/htup_details.h"
#include "catalog/pg_attribute.h"
#include "utils/relcache.h"

#include "validate.h"

/* One validation under way. */
typedef struct ms_vcx
{
	const ms_decl *d;
	List	   *decls;
	bool		declaring;
	List	  **problems;
	Relation	rel;
	const char *tabname;		/* quoted and qualified: sync.mirror's messages */
	ms_table   *t;
} ms_vcx;

/*
 * ms_v_report: one problem.  Declaring, it is sync.mirror's error; otherwise
 * a row of sync.check (its sentence made from its message when it has none).
 */
extern void ms_v_report(ms_vcx *v, ms_problem p);

/* ms_v_in_list: whether name (may be NULL) is one of the n names. */
extern bool ms_v_in_list(const char *name, char **list, int n);

/* ms_v_att: the live attribute of the table named name, or NULL. */
extern Form_pg_attribute ms_v_att(ms_vcx *v, const char *name);

/* ms_v_column: the index in t->columns of the column named name, or -1. */
extern int	ms_v_column(const ms_table *t, const char *name);

/*
 * ms_v_relation_there: relation relid, the declaration's `what` ("active
 * view", say), was not dropped: its qualified name; NULL, reported as the
 * problem given, when it was.
 */
extern char *ms_v_relation_there(ms_vcx *v, Oid relid, const char *what, char *problem);

/* ms_v_named: a column the declaration names as its role, which must exist when declaring. */
extern void ms_v_named(ms_vcx *v, const char *name, const char *role);

/* ms_v_refuse_in: col, when it is in the list names, cannot also be the table's role. */
extern void ms_v_refuse_in(ms_vcx *v, const char *col, char **names, int n,
						   const char *list, const char *role);

/* A foreign key of a table, from pg_constraint. */
typedef struct ms_fk_row
{
	char	   *name;
	Oid			parent;
	int			ncols;
	char	  **cols;			/* attnames, in constraint order */
	char	  **parent_cols;
	Oid		   *eqop;			/* conpfeqop: parent's value = child's */
	Oid		   *types;			/* the child's columns' */
	Oid		   *collations;
	Oid		   *parent_types;	/* the referenced columns' */
	Oid		   *parent_collations;
} ms_fk_row;

/* ms_v_read_fks: relid's foreign keys, by name, as ms_fk_rows. */
extern List *ms_v_read_fks(Oid relid);

/* validate_links.c: the foreign keys, the rule's column, the group tables. */
extern void ms_v_check_fkeys(ms_vcx *v);
extern void ms_v_check_rule_column(ms_vcx *v);
extern void ms_v_check_grouped(ms_vcx *v);

/* hlc_decl.c: an hlc version's column */
extern void ms_v_check_hlc(ms_vcx *v);

#endif
