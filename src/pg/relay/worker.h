/*-------------------------------------------------------------------------
 * worker.h
 *	  The relay's background worker.
 *-------------------------------------------------------------------------
 */
#ifndef MS_WORKER_H
#define MS_WORKER_H

#include "postgres.h"

/* ms_worker_register_static: at server start, the launcher of the worker for magic_sync.database. */
extern void ms_worker_register_static(void);

extern PGDLLEXPORT void ms_launcher_main(Datum arg);
extern PGDLLEXPORT void ms_worker_main(Datum arg);

#endif
