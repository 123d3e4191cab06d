/*-------------------------------------------------------------------------
 * hlc_clock.c
 *	  The server's hybrid logical clock (hlc_clock.h).
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "storage/proc.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "hlc.h"
#include "hlc_clock.h"
#include "probe.h"
#include "spi_check.h"

/* sync.clock as read in this transaction: whether there is one, its value */
static LocalTransactionId read_in = InvalidLocalTransactionId;
static bool has_clock;
static int64 stored;
/* the greatest stamp filed in this transaction's filing */
static LocalTransactionId filed_in = InvalidLocalTransactionId;
static int64 filed_max;

static int64
now_ms(void)
{
	TimestampTz now = GetCurrentTimestamp();

	return (int64) (now / 1000) +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
}

/* a probe's read of sync.clock's one row: its hlc */
static bool
clock_row(HeapTuple row, TupleDesc desc, void *arg)
{
	bool		isnull;
	Datum		d = ms_probe_column(row, desc, "hlc", &isnull);

	*(int64 *) arg = isnull ? 0 : DatumGetInt64(d);
	return false;
}

/*
 * read_stored: whether there is a sync.clock, and its value into stored;
 * read in C (probe.h), as a read-only statement would, in the snapshot
 * active: every filing and pass asks, and mostly finds no row.
 */
static bool
read_stored(void)
{
	int64		v = 0;

	if (read_in == MyProc->lxid)
		return has_clock;
	has_clock = ActiveSnapshotSet() ? ms_probe_rows(GetActiveSnapshot(), "clock", NULL, true, 0, NULL, clock_row, &v)
		: ms_probe_now("clock", NULL, clock_row, &v);
	read_in = MyProc->lxid;
	stored = has_clock ? v : 0;
	return has_clock;
}

uint64
ms_hlc_server_clock(void)
{
	int64		physical = ms_hlc_of_ms(now_ms());

	if (!read_stored())
		return 0;
	return (uint64) (stored > physical ? stored : physical);
}

void
ms_hlc_filed(int64 stamp)
{
	if (filed_in != MyProc->lxid)
	{
		filed_in = MyProc->lxid;
		filed_max = 0;
	}
	if (stamp > filed_max)
		filed_max = stamp;
}

static void
merge_one(int64 *clock, int64 remote, const char *what)
{
	if (remote == 0)
		return;
	if (!ms_hlc_merge(clock, remote, now_ms()))
	{
		char		text[MS_HLC_TEXT];

		ms_hlc_text(remote, text);
		ereport(LOG,
				(errmsg("magic_sync: %s %s is more than a day ahead of the server's time: not merged", what, text),
				 errdetail("A clock from the network that far ahead would stamp every later write beyond it.")));
	}
}

void
ms_hlc_merge_upload(uint64 clock)
{
	int64		before;
	int64		merged;
	int64		seen = filed_in == MyProc->lxid ? filed_max : 0;
	Oid			types[1] = {INT8OID};
	Datum		values[1];

	filed_max = 0;
	if (!read_stored())
		return;
	before = stored;
	merged = before;
	/* a uint64 beyond INT64_MAX is no clock: as negative, refused */
	merge_one(&merged, (int64) clock, "an upload's clock");
	merge_one(&merged, seen, "a clock stamp filed");
	/*
	 * Written only when ahead of the server's own physical time as well: the
	 * clock messages carry is never behind that, so a replica's clock only
	 * as far as its time needs no write, and filings do not queue on the
	 * one row of sync.clock.
	 */
	if (merged <= before || merged <= ms_hlc_of_ms(now_ms()))
		return;
	values[0] = Int64GetDatum(merged);
	/* the row is made by the first clock stored, never by CREATE EXTENSION: a dump restored brings its own */
	ms_spi_check(SPI_execute_with_args("INSERT INTO sync.clock AS c (one, hlc) VALUES (true, $1)"
									   " ON CONFLICT (one) DO UPDATE SET hlc = EXCLUDED.hlc WHERE c.hlc < EXCLUDED.hlc",
									   1, types, values, NULL, false, 0), SPI_OK_INSERT, "could not advance sync.clock");
	stored = merged;
}
