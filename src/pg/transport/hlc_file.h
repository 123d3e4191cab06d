/*-------------------------------------------------------------------------
 * hlc_file.h
 *	  Filing a record of an hlc table (hlc_file.c, docs/protocol.md 12).
 *-------------------------------------------------------------------------
 */
#ifndef MS_HLC_FILE_H
#define MS_HLC_FILE_H

#include "lib/stringinfo.h"

#include "catalog.h"

/*
 * ms_hlc_newer_expr: SQL true when the replica's copy (alias replica) is
 * newer than the server's (alias server): a greater stamp, or an equal
 * stamp and a greater row.  ms_hlc_newer_sql: the same as ON CONFLICT's
 * " WHERE ...".
 */
extern void ms_hlc_newer_expr(StringInfo sql, const ms_table *t, const char *server, const char *replica);
extern void ms_hlc_newer_sql(StringInfo sql, const ms_table *t, const char *server, const char *replica);

/* ms_hlc_lost_why: why the replica's copy was not taken (its stamp and the server's, as text) */
extern char *ms_hlc_lost_why(const ms_table *t, const char *theirs, const char *ours);

#endif
