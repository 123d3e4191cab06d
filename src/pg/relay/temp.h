/*-------------------------------------------------------------------------
 * temp.h
 *	  The pass's temporary tables (temp.c).
 *-------------------------------------------------------------------------
 */
#ifndef MS_TEMP_H
#define MS_TEMP_H

#include "pass.h"

/* ms_temp_tables: create every temporary table of the pass this session lacks (a relay pass's first step) */
extern void ms_temp_tables(ms_executor *x);

/*
 * ms_temp_table: empty pg_temp.name (ms_temp_empty), one temp.c declares;
 * created first if this session lacks it.  What a pass leaves in one stays
 * until the next empties it.
 */
extern void ms_temp_table(ms_executor *x, const char *name);

/* ms_temp_empty: empty pg_temp.name cheaply: its rows deleted, or TRUNCATE once it outgrew MS_TEMP_PAGES. */
#define MS_TEMP_PAGES 64
extern void ms_temp_empty(ms_executor *x, const char *name);

/*
 * MS_NOT_BLOCKED(s): the row s (tab, key) is not in pg_temp.ms_blocked.  A
 * wanted set is closed over the rows that go only: a row that cannot go is
 * left out before its parents are looked for (ms_planned.blocked says when any is).
 * Beside the table it reads, so that plan.c, question.c and wanted.c each
 * see it without including one another.
 */
#define MS_NOT_BLOCKED(s) \
	"NOT EXISTS (SELECT FROM pg_temp.ms_blocked b WHERE b.tab = " s ".tab AND b.key = " s ".key)"

#endif							/* MS_TEMP_H */
