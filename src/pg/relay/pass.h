/*-------------------------------------------------------------------------
 * pass.h
 *	  One relay pass: its snapshot, its memory, what it did.
 *
 * Every statement of a pass runs in one registered snapshot whose command id
 * advances (SPI_execute_snapshot), so the notes, the plan, the rows it loads
 * and what it records are one view of the database even when the caller's
 * transaction is READ COMMITTED, and the pass still sees its own writes.
 *-------------------------------------------------------------------------
 */
#ifndef MS_PASS_H
#define MS_PASS_H

#include "postgres.h"

#include "executor/spi.h"
#include "nodes/pg_list.h"
#include "utils/snapshot.h"

#include "epoch.h"

typedef struct ms_pass
{
	MemoryContext cxt;			/* everything the pass allocates */
	Snapshot	snapshot;		/* registered for the pass */
	List	   *tables;			/* ms_table *, parents first */
	ms_epoch	epoch;
	bytea	   *schema_hash;	/* SHA-256 of the schema a snapshot carries now */
	int64		snapshot_rows;	/* one replica provisioned: the rows the plan sends it; -1: count them */
	bool		one_replica;	/* the pass plans for one replica only */

	/* what the pass did (sync.relay_pass returns it) */
	int64		notes_read;
	int64		provisioned;
	int64		forgotten;
	int64		rows_sent;
	int64		rows_taken;
	int64		messages;
	int64		quarantined;
	int64		parked;			/* notes whose plan failed for good (park.c) */
	bool		more;			/* a full batch was read: notes may wait for the next pass */
} ms_pass;

/* ms_pass_begin / end: SPI connected by the caller; registers / releases the snapshot. */
extern void ms_pass_begin(ms_pass *p);
extern void ms_pass_end(ms_pass *p);

/* ms_prepare: a plan for sql with $n arguments of these types, kept for the pass. */
extern SPIPlanPtr ms_prepare(const char *sql, int nargs, Oid *types);

/*
 * ms_run: execute a plan in the pass's snapshot; nulls as SPI takes them
 * (NULL: none).  Errors when SPI fails; returns the SPI result code.
 */
extern int	ms_run(ms_pass *p, SPIPlanPtr plan, Datum *values, const char *nulls, long tcount);

/* ms_exec: prepare, run once, free. */
extern int	ms_exec(ms_pass *p, const char *sql, int nargs, Oid *types,
					Datum *values, const char *nulls, long tcount);

/*
 * ms_temp_table: create pg_temp.name (definition: its column list) unless it
 * exists, and empty it.  The pass's plan lives in such tables.
 */
extern void ms_temp_table(ms_pass *p, const char *name, const char *definition);

/*
 * ms_analyze: ANALYZE the plan's temporary tables (a comma-separated list),
 * in the pass's snapshot when p is given.  Their row counts are what the
 * planner needs; a small sample keeps the memory of ANALYZE from growing
 * with them.
 */
extern void ms_analyze(ms_pass *p, const char *tables);

/* ms_exec_all: statements without arguments, one after the other (NULL-terminated). */
extern void ms_exec_all(ms_pass *p, const char *const *stmts);

/* ms_open: a read-only cursor over sql in the pass's snapshot, seeing the pass's writes. */
extern Portal ms_open(ms_pass *p, const char *sql, int nargs, Oid *types,
					  Datum *values, const char *nulls);

/* ms_int64: the first column of the first row of the last result, as int64 (0 when none or null); frees the result. */
extern int64 ms_int64(void);

#endif
