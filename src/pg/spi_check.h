/*-------------------------------------------------------------------------
 * spi_check.h
 *	  What every use of SPI repeated, written once: the check of what an SPI
 *	  call returned, for the statements whose failure can't happen (the
 *	  extension's own, on its own catalog: a statement that fails raises its
 *	  own error before it returns); a statement prepared or an error; the
 *	  rows a statement returned put out as a set-returning function's.
 *-------------------------------------------------------------------------
 */
#ifndef MS_SPI_CHECK_H
#define MS_SPI_CHECK_H

#include "postgres.h"

#include "executor/spi.h"
#include "nodes/execnodes.h"

/*
 * ms_spi_check: rc, what an SPI_execute* call returned, is expect; else
 * elog(ERROR) saying what was done ("could not read sync.clock", printf
 * formats, formatted only then) and SPI's word for rc.
 */
extern void ms_spi_check(int rc, int expect, const char *fmt,...) pg_attribute_printf(3, 4);

/* ms_spi_check_one: the same, and the statement returned or touched one row exactly */
extern void ms_spi_check_one(int rc, int expect, const char *fmt,...) pg_attribute_printf(3, 4);

/* ms_spi_prepare: SPI_prepare, or an error naming the statement */
extern SPIPlanPtr ms_spi_prepare(const char *sql, int nargs, Oid *types);

/*
 * ms_spi_kept: a statement without arguments run as SPI_execute runs it,
 * through a plan prepared at its first use in the session and kept in
 * *plan (SPI_keepplan; PostgreSQL plans it again when a table it reads
 * changes): for the few every pass and filing runs, whose parsing and
 * planning cost more than their run (issue 37).
 */
extern int	ms_spi_kept(SPIPlanPtr *plan, const char *sql, bool read_only, long tcount);

/*
 * ms_spi_rows_out: every row of SPI_tuptable, its columns as they are, into
 * the tuplestore of a materialized set-returning function (InitMaterializedSRF)
 */
extern void ms_spi_rows_out(ReturnSetInfo *rsinfo);

#endif
