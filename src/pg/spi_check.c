/*-------------------------------------------------------------------------
 * spi_check.c
 *	  What every use of SPI repeated, written once (spi_check.h).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/htup_details.h"
#include "executor/spi.h"
#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
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

	ms_spi_check_one(ms_spi_run(sql, nargs, types, values, NULL, read_only, 1), SPI_OK_SELECT,
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

/*
 * Kept plans (ms_spi_kept), by a hash of their text and argument types.  At
 * most KEPT_MAX: beyond, every one goes (a text spelled from data, such as a
 * table's name, makes one per table).
 */
#define KEPT_MAX 500

typedef struct kept_stmt
{
	uint64		hash;			/* hash key: of the text and the types */
	char	   *sql;			/* the text, in TopMemoryContext */
	int			nargs;
	Oid		   *types;
	SPIPlanPtr	plan;
} kept_stmt;

static HTAB *kept = NULL;

static void
kept_flush(void)
{
	HASH_SEQ_STATUS seq;
	kept_stmt  *k;

	hash_seq_init(&seq, kept);
	while ((k = hash_seq_search(&seq)) != NULL)
	{
		SPI_freeplan(k->plan);
		pfree(k->sql);
		if (k->types != NULL)
			pfree(k->types);
	}
	hash_destroy(kept);
	kept = NULL;
}

SPIPlanPtr
ms_spi_kept(const char *sql, int nargs, Oid *types)
{
	uint64		hash;
	kept_stmt  *k;
	bool		found;
	SPIPlanPtr	plan;

	if (kept != NULL && hash_get_num_entries(kept) >= KEPT_MAX)
		kept_flush();
	if (kept == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(kept_stmt);
		ctl.hcxt = TopMemoryContext;
		kept = hash_create("magic_sync kept statements", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	hash = hash_bytes_extended((const unsigned char *) sql, (int) strlen(sql),
							   nargs > 0 ? hash_bytes_extended((const unsigned char *) types,
															   (int) (sizeof(Oid) * nargs), nargs) : 0);
	k = hash_search(kept, &hash, HASH_ENTER, &found);
	if (found)
	{
		if (k->nargs == nargs && strcmp(k->sql, sql) == 0 &&
			(nargs == 0 || memcmp(k->types, types, sizeof(Oid) * nargs) == 0))
			return k->plan;
		/* another statement of the same hash: planned for this call only */
		return ms_spi_prepare(sql, nargs, types);
	}
	PG_TRY();
	{
		plan = ms_spi_prepare(sql, nargs, types);
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "could not keep the plan of \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	}
	PG_CATCH();
	{
		hash_search(kept, &hash, HASH_REMOVE, NULL);
		PG_RE_THROW();
	}
	PG_END_TRY();
	k->sql = MemoryContextStrdup(TopMemoryContext, sql);
	k->nargs = nargs;
	k->types = NULL;
	if (nargs > 0)
	{
		k->types = MemoryContextAlloc(TopMemoryContext, sizeof(Oid) * nargs);
		memcpy(k->types, types, sizeof(Oid) * nargs);
	}
	k->plan = plan;
	return plan;
}

int
ms_spi_run(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls,
		   bool read_only, long tcount)
{
	return SPI_execute_plan(ms_spi_kept(sql, nargs, types), values, nulls, read_only, tcount);
}
