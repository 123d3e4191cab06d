/*-------------------------------------------------------------------------
 * owner.h
 *	  Running a user's code as its owner, as PostgreSQL's own maintenance
 *	  does (REFRESH MATERIALIZED VIEW, VACUUM): the relay's reads of a
 *	  mirrored table and the filing of a replica's rows run as the table's
 *	  owner, in a security-restricted operation, with search_path pinned.
 *
 * What a table's owner may put in the way of the relay or of filing -- an
 * active view, a domain's check on its key, a cast, a default, a CHECK, a
 * trigger, a rule -- is code of its own: run as the worker (the bootstrap
 * superuser, by default) or as sync.file's owner, it would be the owner's
 * way to their rights.  So each statement that reads or writes a user table
 * runs as that table's owner, who cannot, from within it, change the
 * session (SET ROLE, temporary objects, deferred triggers) for what runs
 * after (SECURITY_RESTRICTED_OPERATION).
 *
 * Such a statement also reads the extension's own tables (sync.held, the
 * plan's temporary tables): the owner has no rights on them, and needs none.
 * A statement the extension prepares itself (ms_owner_prepare) is checked,
 * for the relations of schema sync and of the session's temporary schema it
 * names, as the role that prepared it -- as a view's relations are checked
 * as the view's owner -- and for everything else as whoever runs it: the
 * owner's own tables, and whatever the owner's view or rule reads, as the
 * owner.  Only statements the extension wrote are marked so: a statement of
 * the owner's code, parsed as it runs, is an ordinary one.
 *-------------------------------------------------------------------------
 */
#ifndef MS_OWNER_H
#define MS_OWNER_H

#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"

/* Who ran before a switch, to be again after it. */
typedef struct ms_as_owner
{
	bool		active;			/* a switch was made */
	Oid			save_user;
	int			save_sec;
	int			nest;			/* the GUC nest level of the pinned search_path */
} ms_as_owner;

/*
 * ms_owner_begin: from here to ms_owner_end, run as the owner of relid, in a
 * security-restricted operation, with search_path = pg_catalog, pg_temp.
 * InvalidOid: no switch (the caller runs as itself).  An error undoes the
 * switch with the (sub)transaction it aborts, as for SECURITY DEFINER.
 */
extern void ms_owner_begin(ms_as_owner *s, Oid relid);
extern void ms_owner_end(ms_as_owner *s);

/*
 * ms_definer_begin: what SECURITY DEFINER and SET search_path would do, for
 * a C function that first reads what it is given as its caller (names
 * looked up in the caller's search_path): the rest runs as the function's
 * owner with search_path pinned, not restricted.
 */
extern void ms_definer_begin(FunctionCallInfo fcinfo, ms_as_owner *s);
#define ms_definer_end(s) ms_owner_end(s)

/*
 * ms_pinned_begin: search_path = pg_catalog, pg_temp until ms_pinned_end,
 * as whoever runs: for a C function without a SET clause (an event trigger,
 * run by whoever runs DDL, a superuser too) whose SQL must find no operator
 * or function a database's or role's search_path puts ahead of pg_catalog.
 */
extern void ms_pinned_begin(ms_as_owner *s);
#define ms_pinned_end(s) ms_owner_end(s)

/*
 * ms_owner_prepare: SPI_prepare of a statement of the extension's own, whose
 * relations in schema sync and in the session's temporary schema are
 * checked as `self` wherever it runs, however often it is analysed again.
 */
extern SPIPlanPtr ms_owner_prepare(const char *sql, int nargs, Oid *types, Oid self);
/* ms_owner_prepare_cursor: the same, with SPI_prepare_cursor's options (CURSOR_OPT_GENERIC_PLAN) */
extern SPIPlanPtr ms_owner_prepare_cursor(const char *sql, int nargs, Oid *types, Oid self, int options);

/* ms_owner_init: at load, the parse analysis hook that marks those statements. */
extern void ms_owner_init(void);

#endif
