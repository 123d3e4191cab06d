/*-------------------------------------------------------------------------
 * hlc_file.c
 *	  Filing a record of an hlc table (docs/protocol.md 12): the newest wins
 *	  by its clock stamp, and equal stamps are ordered by the row, so that
 *	  whichever copy is filed first, the same one is kept.
 *
 *	  A record's key includes its origin: two replicas never write the same
 *	  row, and for the rows of one key the replica tie-break of the clock's
 *	  total order (stamp, replica) is always equal.  Equal stamps of one row
 *	  with other values come only from a replica that lost its clock (a file
 *	  restored from a copy older than its writes): "first filed" would keep
 *	  whichever upload came first, so the greater row, as the text of its
 *	  columns in column order, wins instead — the same on every server,
 *	  whatever the order of the uploads.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "lib/stringinfo.h"

#include "file.h"
#include "hlc_file.h"

/* ARRAY[a.c::text, ...] of every column the replica gives but the version */
static void
row_text(StringInfo sql, const ms_table *t, const char *alias)
{
	int			n = 0;

	appendStringInfoString(sql, "ARRAY[");
	for (int c = 0; c < t->ncolumns; c++)
		if (!ms_server_column(t, c) && c != t->version)
			appendStringInfo(sql, "%s%s.%s::pg_catalog.text", n++ ? ", " : "", alias, t->columns[c].quoted);
	appendStringInfoString(sql, "]::pg_catalog.text[]");
}

void
ms_hlc_newer_expr(StringInfo sql, const ms_table *t, const char *server, const char *replica)
{
	const char *v = t->columns[t->version].quoted;

	appendStringInfo(sql, "((%s.%s, ", server, v);
	row_text(sql, t, server);
	appendStringInfo(sql, ") OPERATOR(pg_catalog.<) (%s.%s, ", replica, v);
	row_text(sql, t, replica);
	appendStringInfoString(sql, "))");
}

void
ms_hlc_newer_sql(StringInfo sql, const ms_table *t, const char *server, const char *replica)
{
	appendStringInfoString(sql, " WHERE ");
	ms_hlc_newer_expr(sql, t, server, replica);
}

char *
ms_hlc_lost_why(const ms_table *t, const char *theirs, const char *ours)
{
	const char *name = t->columns[t->version].name;

	if (theirs != NULL && ours != NULL && strcmp(theirs, ours) == 0)
		return psprintf("the same clock stamp (%s %s) as the server's copy, which orders after it"
						" (equal stamps are ordered by the row): the server keeps its copy", name, theirs);
	return psprintf("an older clock stamp (%s %s) than the server's (%s): the server's copy wins",
					name, theirs ? theirs : "null", ours ? ours : "null");
}
