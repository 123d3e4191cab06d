/*-------------------------------------------------------------------------
 * schema.h
 *	  A snapshot's Begin: the schema of every mirrored table.
 *-------------------------------------------------------------------------
 */
#ifndef MS_SCHEMA_H
#define MS_SCHEMA_H

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"

/* ms_schema_pack: append the packed Begin message (not its field tag) to out. */
extern void ms_schema_pack(List *tables, StringInfo out);

#endif
