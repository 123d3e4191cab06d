/*-------------------------------------------------------------------------
 * transient.h
 *	  Error::is_transient: which failures are the infrastructure's.
 *-------------------------------------------------------------------------
 */
#ifndef MS_TRANSIENT_H
#define MS_TRANSIENT_H

/*
 * ms_transient: whether an error of this SQLSTATE may succeed if the same
 * work is retried unchanged.  The transient side is the listed one: 08
 * connection, 40 transaction rollback, 53 insufficient resources, 57
 * operator intervention, 55P03 lock not available.  Everything else is
 * permanent, so it is set aside and shows instead of being retried forever.
 */
extern bool ms_transient(int sqlerrcode);

#endif
