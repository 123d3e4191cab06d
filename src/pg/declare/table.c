/*-------------------------------------------------------------------------
 * table.c
 *	  What the validator reads of pg_catalog to make an ms_table (table.h):
 *	  a table's wire name, the SQLite type of a server type, operators as
 *	  SQL, the types a key may have, whether a unique index covers columns.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "keys.h"
#include "table.h"

char *
ms_wire_name(Oid relid)
{
	Oid			nsp = get_rel_namespace(relid);
	char	   *rel = get_rel_name(relid);

	if (rel == NULL)
		return NULL;
	if (nsp == PG_PUBLIC_NAMESPACE)
		return rel;
	return psprintf("%s.%s", get_namespace_name(nsp), rel);
}

ms_type
ms_sqlite_type(Oid type)
{
	switch (getBaseType(type))
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case BOOLOID:
			return MS_INTEGER;
		case FLOAT4OID:
		case FLOAT8OID:
			return MS_REAL;
		case BYTEAOID:
			return MS_BLOB;
		default:
			return MS_TEXT;
	}
}

char *
ms_operator_sql(Oid opno)
{
	List	   *names = NIL;
	List	   *args = NIL;

	format_operator_parts(opno, &names, &args, false);
	return psprintf("OPERATOR(%s.%s)", quote_identifier(linitial(names)), (char *) lsecond(names));
}

char *
ms_eq_operator(Oid type)
{
	TypeCacheEntry *tc = lookup_type_cache(type, TYPECACHE_EQ_OPR);

	return OidIsValid(tc->eq_opr) ? ms_operator_sql(tc->eq_opr) : "OPERATOR(pg_catalog.=)";
}

bool
ms_key_type_ok(Oid type)
{
	Oid			base = getBaseType(type);

	switch (base)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case NUMERICOID:
		case TEXTOID:
		case VARCHAROID:
		case UUIDOID:
		case DATEOID:
		case TIMEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return true;
		default:
			/* an enum's label: renamed, its tables are provisioned again (follow.c) */
			return type_is_enum(base) || ms_key_kind_of(base) == MS_KEY_FOLDED;
	}
}

bool
ms_unique_on(Oid relid, int n, const AttrNumber *attnums)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	bool		found = false;

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index index;

		if (!HeapTupleIsValid(tup))
			continue;
		index = (Form_pg_index) GETSTRUCT(tup);
		if (index->indisunique && index->indimmediate && index->indisvalid &&
			index->indnkeyatts == n &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL) &&
			heap_attisnull(tup, Anum_pg_index_indexprs, NULL))
		{
			bool		all = true;

			for (int i = 0; i < n && all; i++)
			{
				bool		in = false;

				for (int j = 0; j < n; j++)
					if (index->indkey.values[j] == attnums[i])
						in = true;
				all = in;
			}
			found = all;
		}
		ReleaseSysCache(tup);
		if (found)
			break;
	}
	list_free(indexes);
	relation_close(rel, AccessShareLock);
	return found;
}
