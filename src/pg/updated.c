/*-------------------------------------------------------------------------
 * updated.c
 *	  Whether the catalog has a relation or a column a later version added
 *	  (updated.h).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/attnum.h"
#include "catalog/namespace.h"
#include "utils/lsyscache.h"

#include "updated.h"

bool
ms_catalog_has(const char *relname)
{
	Oid			ns = get_namespace_oid("sync", true);

	return OidIsValid(ns) && OidIsValid(get_relname_relid(relname, ns));
}

bool
ms_catalog_has_column(const char *relname, const char *column)
{
	Oid			ns = get_namespace_oid("sync", true);
	Oid			rel = OidIsValid(ns) ? get_relname_relid(relname, ns) : InvalidOid;

	return OidIsValid(rel) && get_attnum(rel, column) != InvalidAttrNumber;
}
