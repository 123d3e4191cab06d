/*-------------------------------------------------------------------------
 * rule.h
 *	  The sync rule: which replicas hold which rows (docs/design.md 3).
 *
 *	  broadcast | assigned(col) | follows(col)
 *	  | grouped(members => table, assigned => table [, group => col] [, replica => col])
 *-------------------------------------------------------------------------
 */
#ifndef MS_RULE_H
#define MS_RULE_H

#include "decl.h"

/*
 * ms_rule_parse: reads the rule text into d->rule and its arguments
 * (rule_column; members, assignments, group_column, assignment_replica).
 * Names are read as PostgreSQL reads identifiers, and a grouped rule's
 * tables are looked up through the caller's search_path: d holds them as
 * oids.  Each malformed rule is its own ereport (ERRCODE_SYNTAX_ERROR; an
 * unknown rule ERRCODE_INVALID_PARAMETER_VALUE; a table that does not exist
 * ERRCODE_UNDEFINED_TABLE).
 */
extern void ms_rule_parse(const char *text, ms_decl *d);

/* The hint of every malformed rule. */
#define MS_RULE_HINT "Write 'broadcast', 'assigned(col)', 'follows(col)' or " \
	"'grouped(members => table, assigned => table)'."

#endif
