/*
** evolver.h - what evolve.c and alter.c share: a Down's schema change under way.
*/
#ifndef MS_EVOLVER_H
#define MS_EVOLVER_H

#include "magic_sync_sqlite.h"

typedef struct evolver
{
	ms_ctx	   *c;
	int			changed;		/* tables made or altered */
	int			let_go;			/* tables let go of */
	int			nfailed;
	ms_buf		failed;			/* JSON objects: table, statement, error */
	/* the statement that failed, while a table's change unwinds */
	char	   *stmt;
	char	   *error;
} evolver;

/*
 * evolve.c: ms_ev_report, a statement that failed, in the result and in
 * last_error; ms_ev_fatal, an error no savepoint absorbs; ms_ev_run, one
 * statement of a table's change (its failure kept in e->stmt, e->error);
 * ms_ev_attempt, one whose failure the rest of the change survives;
 * ms_ev_drop_ours, a table's noting triggers and our indexes.
 */
extern int	ms_ev_report(evolver *e, const char *table, const char *stmt, const char *error, bool applied);
extern bool ms_ev_fatal(int rc);
extern int	ms_ev_run(evolver *e, const char *fmt,...);
extern int	ms_ev_attempt(evolver *e, const char *table, const char *sql);
extern int	ms_ev_drop_ours(evolver *e, const char *table);

/* alter.c: each Table of the Down's schema matched and the table changed to it */
extern int	ms_ev_schema_changes(evolver *e, const Sync__Down *d);

#endif							/* MS_EVOLVER_H */
