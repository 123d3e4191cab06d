/*-------------------------------------------------------------------------
 * transient.c
 *	  Error::is_transient, and sync.is_transient(sqlstate) for operators.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include "transient.h"

PG_FUNCTION_INFO_V1(ms_is_transient);

bool
ms_transient(int sqlerrcode)
{
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_CONNECTION_EXCEPTION:
		case ERRCODE_TRANSACTION_ROLLBACK:
		case ERRCODE_INSUFFICIENT_RESOURCES:
		case ERRCODE_OPERATOR_INTERVENTION:
			return true;
		default:
			return sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE;
	}
}

/*
 * ms_is_transient: sync.is_transient(sqlstate text), for reading errors.
 */
Datum
ms_is_transient(PG_FUNCTION_ARGS)
{
	char	   *s = text_to_cstring(PG_GETARG_TEXT_PP(0));

	if (strlen(s) != 5 || strspn(s, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != 5)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a SQLSTATE", s),
				 errhint("A SQLSTATE is five digits or upper-case letters, such as 40001.")));
	PG_RETURN_BOOL(ms_transient(MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4])));
}
