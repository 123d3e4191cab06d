/*-------------------------------------------------------------------------
 * schema.h
 *	  The Table of a mirrored table, as a snapshot's Begin and a schema
 *	  change carry it.
 *-------------------------------------------------------------------------
 */
#ifndef MS_SCHEMA_H
#define MS_SCHEMA_H

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"

#include "catalog.h"
#include "pass.h"

/*
 * ms_schema_table: append t's Table, packed, to out (tables: the pass's, for
 * the names its foreign keys point at).  legacy: as a server before schema
 * changes wrote it (no ids, unique indexes or fill), whose hash is what a
 * replica it provisioned recorded.  Runs through the pass's executor.
 */
extern void ms_schema_table(ms_pass *p, List *tables, ms_table *t, bool legacy, StringInfo out);

/* ms_schema_field: append a packed Table to out as a field (tag, length, bytes). */
extern void ms_schema_field(StringInfo out, int field, const StringInfo table);

#endif
