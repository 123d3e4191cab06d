/*-------------------------------------------------------------------------
 * pass.h
 *	  One relay pass: its snapshot, its memory, what it did; and the one
 *	  executor every statement of a pass, or of a read, runs through.
 *
 * The executor.  One snapshot is registered when the pass begins; every
 * statement runs in it with its command id advanced (SPI_execute_snapshot,
 * not read-only), and cursors over a copy of it at the current command id.
 * So the batch, the plan, the wanted set, the rows loaded and what is
 * recorded are one view of the database, and each statement sees what the
 * ones before it wrote.  No statement of a pass or a read runs another way
 * (the noting trigger, notes.c, and the worker's housekeeping are neither).
 *
 * A relay pass runs in a REPEATABLE READ (or SERIALIZABLE) transaction, and
 * its snapshot is the transaction's.  The pass writes rows that sync.file
 * and sync.pull write too (sync.replicas, sync.held, sync.outbox).  Under
 * READ COMMITTED, an UPDATE of a row another transaction changed after the
 * snapshot would go to the newer version (EvalPlanQual), and every later
 * statement of the pass would see two versions of it: the snapshot's and its
 * own.  Under REPEATABLE READ that UPDATE is a serialization failure, which
 * is transient: the pass is undone and runs again.  So ms_relay_pass refuses
 * READ COMMITTED, and the worker begins its transactions REPEATABLE READ.
 *
 * A read (read.c, sync.wanted) writes nothing but its own temporary tables,
 * which nobody else writes: under READ COMMITTED too, its registered
 * snapshot is one view for all its statements.  (The declarations, which
 * declare/catalog.c reads with statements of its own, are read as of then:
 * under REPEATABLE READ those too are in the transaction's snapshot.)
 *-------------------------------------------------------------------------
 */
#ifndef MS_PASS_H
#define MS_PASS_H

#include "postgres.h"

#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/array.h"
#include "utils/snapshot.h"

#include "epoch.h"
#include "probe.h"

typedef struct ms_evolve ms_evolve;

/*
 * ms_executor: what runs the statements of a pass or a read, and nothing
 * else: its memory, its snapshot, and as whom.  (The plans kept across
 * passes are pass.c's own.)
 */
typedef struct ms_executor
{
	MemoryContext cxt;			/* everything the pass allocates */
	Snapshot	snapshot;		/* registered for the pass */
	Oid			self;			/* who began it: its statements' sync.* and pg_temp relations are checked as this role (owner.h) */
	bool		as_owners;		/* a relay pass: a table's rows are read as its owner (MS_OWNER_OF) */
} ms_executor;

/*
 * ms_reader: what a read sees of the database (read.c, why.c, sync.wanted),
 * and all the walks the planner shares with the reads (wanted.c,
 * question.c, ms_links_round) are handed: the executor and the tables, and
 * nothing a pass sets or counts.
 */
typedef struct ms_reader
{
	ms_executor *exec;			/* runs every statement */
	List	   *tables;			/* ms_table *, parents first */
} ms_reader;

/* MS_READER: a relay pass p, over these tables, as a reader sees it */
#define MS_READER(p, tables) (&(ms_reader) {&(p)->exec, (tables)})

/*
 * ms_pass_counts: what a pass did (sync.relay_pass returns it, the worker
 * logs it).  relay.c fills it from what each part returns (ms_observe,
 * ms_batch_read, ms_plan: the notes the batch took in, ms_record, ms_park).
 */
typedef struct ms_pass_counts
{
	int64		notes_read;
	int64		provisioned;
	int64		forgotten;
	int64		rows_sent;
	int64		rows_taken;
	int64		messages;
	int64		quarantined;
	int64		parked;			/* notes whose plan failed for good (park.c) */
	bool		more;			/* a full batch was read: notes may wait for the next pass */
	bool		snapshots_left;	/* replicas wait for a snapshot pass (MS_SNAPSHOTS_LEFT) */
} ms_pass_counts;

/*
 * Handed between the parts of a pass as arguments and results, never kept
 * in ms_pass (so that no part sets what another reads behind its back):
 *
 * ms_pass_has: what a catalog updated to this version has, and a 0.1
 * catalog not updated yet has not; ms_observe finds it once per pass
 * (ms_observed.has), and relay.c hands it to ms_record (ms_record_in).
 */
typedef struct ms_pass_has
{
	bool		carried;		/* sync.carried exists */
	bool		owed;			/* sync.replicas has owed_messages and owed_bytes (76_owed.sql) */
} ms_pass_has;

/*
 * ms_pass_fault: what a failure of the plan and record is about, written
 * before the statements that may fail and read by relay.c once they did
 * (so no return value can say it); and what relay.c plans again without.
 * relay.c's, allocated outside the subtransaction it plans and records in,
 * and handed down by pointer (ms_plan_in.fault, ms_record_in.fault).
 */
typedef struct ms_pass_fault
{
	int64		resent;			/* rows refused sent again by the plan (retry.c) */
	bool		whole_failed;	/* reading a table whole failed for good (load.c) */
	bool		resend_held;	/* relay.c: sending them failed for good: held back instead (retry.c) */
	bool		no_whole;		/* relay.c: every table's rows go through the plan (plan.c) */
} ms_pass_fault;

/*
 * ms_pass_catalog: what a pass reads of the catalog once, as it begins
 * (relay.c; a read: its tables alone), and every part after reads as it is:
 * relay.c's, handed to each part that reads it (ms_plan_in.cat,
 * ms_record_in.cat, or an argument).
 */
typedef struct ms_pass_catalog
{
	List	   *tables;			/* ms_table *, parents first */
	List	   *held;			/* ms_held *: the tables held back, with why (declare/catalog.h) */
	ArrayType  *held_ids;		/* their ids (int[]); NULL: none */
	ms_epoch	epoch;
	StringInfoData begin;		/* the schema a snapshot carries now (Begin, packed once: evolve.c) */
	bytea	   *schema_hash;	/* its SHA-256 */
	struct ms_evolve *evolve;	/* the schema changes of the pass (evolve.c's own) */
} ms_pass_catalog;

/*
 * ms_pass_later: the held rows of tables read whole that a pass of the
 * worker writes once it committed, in a transaction of its own
 * (ms_record_held_later): those heldrows.c kept for then, when the pass was
 * told it may (ms_record_in.held_later).  A result: ms_record returns it
 * (ms_recorded.later), ms_relay_pass hands it to its caller, the worker
 * hands it to ms_relay_held.
 *
 * And the replicas the pass wrote to, with the messages and bytes it made
 * each owed (null for a snapshot's), which ms_relay_bounds copies once the
 * pass committed: handed over in memory (ms_record_in.chains_later) when
 * nothing else in the pass reads pg_temp.ms_written, a statement fewer a
 * pass (issue 37); NULL when ms_written holds them.
 */
typedef struct ms_pass_later
{
	struct ms_held_later *kept;	/* in cxt (heldrows.c) */
	int64		rows;			/* how many */
	ArrayType  *written;		/* uuid[], in cxt */
	ArrayType  *written_messages;	/* int8[] */
	ArrayType  *written_bytes;	/* int8[] */
} ms_pass_later;

/*
 * ms_pass: what runs the statements of a pass (the executor: its memory and
 * snapshot; the kept plans are pass.c's own) and what it counts, and
 * nothing else.  What it reads once (ms_pass_catalog), what its caller asks
 * of it (relay.h's ms_relay_in), what one part finds for another and what
 * a failure is about go as arguments and results.
 */
typedef struct ms_pass
{
	ms_executor exec;			/* runs every statement of the pass */
	ms_pass_counts did;			/* what the pass did */
} ms_pass;

/*
 * What a pass does with the replicas to provision (observe.c).  A pass by
 * hand, sync.relay_pass(), provisions them as it goes, holding sync.replicas
 * whole.  The worker's passes that read notes leave them (LEFT) to a
 * snapshot pass of their own (ONLY: sync.relay_snapshots()), which reads
 * no note and holds the rows of the replicas it provisions alone, so that
 * the others' filings and pulls never wait for a snapshot (issue 37).
 */
#define MS_SNAPSHOTS_ALL	0
#define MS_SNAPSHOTS_LEFT	1
#define MS_SNAPSHOTS_ONLY	2

/*
 * ms_pass_begin / end: SPI connected by the caller.  Begin sets *p up empty,
 * allocating in cxt, and registers the snapshot; end releases it (an error
 * releases it with the rest of the transaction's resources).
 */
extern void ms_pass_begin(ms_pass *p, MemoryContext cxt);
extern void ms_pass_end(ms_pass *p);

/* ms_executor_begin / end: the same for an executor alone (a read's) */
extern void ms_executor_begin(ms_executor *x, MemoryContext cxt);
extern void ms_executor_end(ms_executor *x);

/*
 * MS_EXEC_OWNER_OF (an executor) and MS_OWNER_OF (a pass): for
 * ms_owner_begin (owner.h), the relation whose owner runs
 * the statements that read it: relid in a relay pass, and in a read once
 * ms_read_as_owners checked its caller; otherwise none.
 */
#define MS_EXEC_OWNER_OF(x, relid) ((x)->as_owners ? (relid) : InvalidOid)
#define MS_OWNER_OF(p, relid) MS_EXEC_OWNER_OF(&(p)->exec, relid)

/*
 * ms_read_as_owners: a read (sync.wanted, sync.progress) runs each
 * table's code as its owner too, as a pass does -- a superuser reading
 * progress never runs an active view's function with its rights -- for a
 * caller who may read every mirrored table, its group tables and active
 * views itself (42501 otherwise), as it had to when it read them itself.
 * After rd->tables is read.
 */
extern void ms_read_as_owners(ms_reader *rd);

/*
 * ms_prepare: a plan for sql with $n arguments of these types, kept for the
 * pass; prepared by the role running now, never within ms_owner_begin.
 */
extern SPIPlanPtr ms_prepare(const char *sql, int nargs, Oid *types);

/*
 * ms_run: execute a plan in the pass's snapshot; nulls as SPI takes them
 * (NULL: none).  Errors when SPI fails; returns the SPI result code.
 */
extern int	ms_run(ms_executor *x, SPIPlanPtr plan, Datum *values, const char *nulls, long tcount);

/* ms_exec: prepare, run once, free. */
extern int	ms_exec(ms_executor *x, const char *sql, int nargs, Oid *types,
					Datum *values, const char *nulls, long tcount);

/*
 * ms_exec_generic: ms_exec whose kept plan is its generic one from the
 * first pass on.  PostgreSQL plans a kept statement for each pass's values
 * while that looks cheaper than its generic plan, and a statement given the
 * replicas as an array looks so every time (a custom plan knows the array's
 * length): it was planned again at every pass, the same plan
 * (bench/passcost.py: the fast path's send, 41 plans in 40 passes, issue 37).
 * Not keeping (a large pass), it is planned for its values.
 */
extern int	ms_exec_generic(ms_executor *x, const char *sql, int nargs, Oid *types,
							Datum *values, const char *nulls, long tcount);

/*
 * ms_exec_by_index: ms_exec with sequential scans off.  For a statement that
 * reads the few rows a partial index holds (parked notes): kept from a pass
 * that planned it while the table was small, its plan read the table whole
 * at every later pass once the table had grown (sql/34_relay_parked.sql).
 */
extern int	ms_exec_by_index(ms_executor *x, const char *sql, int nargs, Oid *types,
							 Datum *values, const char *nulls, long tcount);

/* ms_exec_all: statements without arguments, one after the other (NULL-terminated). */
extern void ms_exec_all(ms_executor *x, const char *const *stmts);

/* ms_open: a read-only cursor over sql in the pass's snapshot, seeing the pass's writes. */
extern Portal ms_open(ms_executor *x, const char *sql, int nargs, Oid *types,
					  Datum *values, const char *nulls);

/*
 * ms_analyze: ANALYZE the plan's temporary tables (a comma-separated list)
 * when they hold `rows` rows or more (MS_ANALYZE_ROWS): their row counts are
 * what the planner needs of them, and a few rows need no statistics.  A
 * small sample keeps the memory of ANALYZE from growing with them.
 */
#define MS_ANALYZE_ROWS 1000
extern void ms_analyze(ms_executor *x, const char *tables, uint64 rows);

/*
 * Kept plans.  ms_plans_keep(true): until the pass ends, ms_exec, ms_open
 * and ms_prepare_kept use plans prepared once per session and kept, by the
 * statement's text (a relay pass sets it, unless it is a large one, whose
 * statements are planned for what they read); ms_plans_catalog: the
 * declarations, as text: when they changed, every kept plan goes.
 */
extern void ms_plans_keep(bool keep);
extern void ms_plans_catalog(const char *catalog);

/*
 * ms_prepare_kept: a kept plan for sql (never freed by the caller), or, not
 * keeping, a plan of the pass; its sync.* and pg_temp relations checked as
 * x->self wherever it runs (owner.h), so it may be prepared within
 * ms_owner_begin, as a statement naming a user's table must be.
 */
extern SPIPlanPtr ms_prepare_kept(ms_executor *x, const char *sql, int nargs, Oid *types);
/* ms_prepare_kept_generic: the same, its generic plan kept from the first (ms_exec_generic says why) */
extern SPIPlanPtr ms_prepare_kept_generic(ms_executor *x, const char *sql, int nargs, Oid *types);

/*
 * ms_probe: ms_probe_rows (probe.h) as the pass's statements would see
 * sync.<table> now: for a look at a small table, or an index's first
 * entries, that would be a statement of the pass.
 */
extern bool ms_probe(ms_executor *x, const char *table, const char *index, ms_probe_fn fn, void *arg);
/* ms_probe_keyed: the same, by the keys given (probe.h) */
extern bool ms_probe_keyed(ms_executor *x, const char *table, const char *index, int nkeys, ScanKey keys,
						   ms_probe_fn fn, void *arg);

/* ms_value: column col (from 1) of row `row` of the last result. */
extern Datum ms_value(uint64 row, int col, bool *isnull);

/* ms_int64: the first column of the first row of the last result, as int64 (0 when none or null); frees the result. */
extern int64 ms_int64(void);

/* ms_array: the first column of the first row of the last result, an array copied out; NULL when null. */
extern ArrayType *ms_array(void);

#endif
