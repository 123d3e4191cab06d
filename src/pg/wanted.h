/*-------------------------------------------------------------------------
 * wanted.h
 *	  sync.wanted: what a replica should hold, computed from scratch.
 *-------------------------------------------------------------------------
 */
#ifndef MS_WANTED_H
#define MS_WANTED_H

#include "postgres.h"

#include "utils/array.h"

/*
 * ms_wanted_fill: fill pg_temp.ms_wanted(replica uuid, tab int, key text
 * COLLATE "C") with the wanted sets of these replicas (NULL: every live one
 * not dropped), set by set, in the current snapshot.  SPI connected.
 * Returns the number of rows.
 */
extern uint64 ms_wanted_fill(ArrayType *replicas);

#endif
