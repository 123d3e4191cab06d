/*-------------------------------------------------------------------------
 * wanted.h
 *	  The wanted set (seed 4.2), from scratch: the oracle every plan is
 *	  checked against, and what provisioning sends.
 *-------------------------------------------------------------------------
 */
#ifndef MS_WANTED_H
#define MS_WANTED_H

#include "postgres.h"

#include "utils/array.h"

/*
 * ms_wanted_fill: fill pg_temp.ms_wanted(replica uuid, tab int, key text
 * COLLATE "C", PRIMARY KEY (replica, tab, key)) -- created when missing,
 * emptied first -- with the wanted sets of the given replicas (a uuid[]; NULL:
 * every live replica not dropped), all at once, in the current snapshot.
 * SPI must be connected.  Returns the number of rows.
 */
extern uint64 ms_wanted_fill(ArrayType *replicas);

#endif
