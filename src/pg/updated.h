/*-------------------------------------------------------------------------
 * updated.h
 *	  Whether the catalog has a relation or a column a later version of the
 *	  extension added: the library may be newer than a catalog not updated yet
 *	  (ALTER EXTENSION magic_sync UPDATE), and then does without it.
 *-------------------------------------------------------------------------
 */
#ifndef MS_UPDATED_H
#define MS_UPDATED_H

#include "postgres.h"

/* ms_catalog_has: whether schema sync has a relation of this name (a syscache lookup, no query) */
extern bool ms_catalog_has(const char *relname);
/* ms_catalog_has_column: whether sync's relation of this name has this column (syscache lookups) */
extern bool ms_catalog_has_column(const char *relname, const char *column);

#endif
