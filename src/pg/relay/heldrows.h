/*-------------------------------------------------------------------------
 * heldrows.h
 *	  Held rows of a table read whole written a page at a time (heldrows.c).
 *-------------------------------------------------------------------------
 */
#ifndef MS_HELDROWS_H
#define MS_HELDROWS_H

#include "postgres.h"

/*
 * ms_held_insert: n rows (replica, tab, key, number) into sync.held, with no
 * note and since = number, in the current transaction; false, writing
 * nothing, when sync.held is not as this build knows it (the caller writes
 * them by SQL then).  A row held already raises the unique violation.
 */
extern bool ms_held_insert(int n, const Datum *replicas, const Datum *tabs, const Datum *keys,
						   const Datum *numbers);

#endif
