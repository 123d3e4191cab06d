/*-------------------------------------------------------------------------
 * updated.c
 *	  Whether the catalog has a relation a later version added (updated.h).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "utils/lsyscache.h"

#include "updated.h"

bool
ms_catalog_has(const char *relname)
{
	Oid			ns = get_namespace_oid("sync", true);

	return OidIsValid(ns) && OidIsValid(get_relname_relid(relname, ns));
}
