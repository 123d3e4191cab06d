/*-------------------------------------------------------------------------
 * spi_check.c
 *	  The one check of what an SPI call returned (spi_check.h).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "executor/spi.h"

#include "spi_check.h"

void
ms_spi_check(int rc, int expect, const char *what)
{
	if (rc != expect)
		elog(ERROR, "%s: %s", what, SPI_result_code_string(rc));
}

void
ms_spi_check_one(int rc, int expect, const char *what)
{
	ms_spi_check(rc, expect, what);
	if (SPI_processed != 1)
		elog(ERROR, "%s: " UINT64_FORMAT " rows, not one", what, SPI_processed);
}
