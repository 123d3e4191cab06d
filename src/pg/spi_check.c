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

/* what: fmt's sentence, formatted (only on the way to an error) */
static char *what_of(const char *fmt, va_list args) pg_attribute_printf(1, 0);

static char *
what_of(const char *fmt, va_list args)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (;;)
	{
		va_list		copy;
		int			needed;

		va_copy(copy, args);
		needed = appendStringInfoVA(&buf, fmt, copy);
		va_end(copy);
		if (needed == 0)
			return buf.data;
		enlargeStringInfo(&buf, needed);
	}
}

void
ms_spi_check(int rc, int expect, const char *fmt,...)
{
	va_list		args;

	if (rc == expect)
		return;
	va_start(args, fmt);
	elog(ERROR, "%s: %s", what_of(fmt, args), SPI_result_code_string(rc));
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
		elog(ERROR, "%s: %s", what_of(fmt, args), SPI_result_code_string(rc));
	elog(ERROR, "%s: " UINT64_FORMAT " rows, not one", what_of(fmt, args), SPI_processed);
	va_end(args);
}

SPIPlanPtr
ms_spi_prepare(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

	if (plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	return plan;
}

int
ms_spi_kept(SPIPlanPtr *plan, const char *sql, bool read_only, long tcount)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = ms_spi_prepare(sql, 0, NULL);

		if (SPI_keepplan(p) != 0)
			elog(ERROR, "could not keep the plan of \"%s\"", sql);
		*plan = p;
	}
	return SPI_execute_plan(*plan, NULL, NULL, read_only, tcount);
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
