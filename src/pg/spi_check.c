/*-------------------------------------------------------------------------
 * spi_check.c
 *	  What every use of SPI repeated, written once (spi_check.h).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/tuplestore.h"

#include "spi_check.h"

void
ms_spi_check(int rc, int expect, const char *fmt,...)
{
	va_list		args;

	if (rc == expect)
		return;
	va_start(args, fmt);
	elog(ERROR, "%s: %s", ms_vformat(fmt, args), SPI_result_code_string(rc));
	va_end(args);
}

void
ms_spi_check_one(int rc, int expect, const char *fmt,...)
{
	va_list		args;

	if (rc == expect && SPI_processed == 1)
		return;
	va_start(args, fmt);
	if (rc != expect)
		elog(ERROR, "%s: %s", ms_vformat(fmt, args), SPI_result_code_string(rc));
	elog(ERROR, "%s: " UINT64_FORMAT " rows, not one", ms_vformat(fmt, args), SPI_processed);
	va_end(args);
}

bool
ms_spi_bool(const char *sql, int nargs, Oid *types, Datum *values, bool read_only, const char *what)
{
	bool		isnull;
	bool		yes;

	ms_spi_check_one(SPI_execute_with_args(sql, nargs, types, values, NULL, read_only, 1), SPI_OK_SELECT,
					 "%s", what);
	yes = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return yes;
}

SPIPlanPtr
ms_spi_prepare(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

	if (plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	return plan;
}

void
ms_spi_rows_out(ReturnSetInfo *rsinfo)
{
	int			n = SPI_tuptable->tupdesc->natts;
	Datum	   *values = palloc(sizeof(Datum) * n);
	bool	   *nulls = palloc(sizeof(bool) * n);

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(values);
	pfree(nulls);
}
