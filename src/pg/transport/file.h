/*-------------------------------------------------------------------------
 * file.h
 *	  What the parts of sync.file share (docs/design.md 5.2): the filing of one upload,
 *	  and what one call prepares once for every row it files.
 *
 *   file.c      sync.file itself: the upload verified whole (its length and
 *               check), read a piece at a time, numbered after the last
 *               filed, then each part in turn, in one transaction
 *   ack.c       acknowledgements and restores: the last message applied and
 *               its seal, gaps, refusals, digests, the backlog
 *   refused.c   rows refused: when each goes to the replica again; its build
 *   refusal.c   a write refused: the replica is sent the server's row again
 *   filer.c     what a call prepares once: per table, its statements and the
 *               shape of its proto rows; a row in its codec, as JSON
 *   filing.c    filing rows: records, two-way columns, deletes, each in a
 *               subtransaction of its own
 *   inbox.c     rows that wait or failed for good; sync.inbox_retry
 *   lanes.c     the upload's lane: its own send numbers and answers; the
 *               first lane says the replica's gap and backlog
 *   reach.c     what a filed row may point at: rows the replica holds,
 *               or held when it wrote it (sync.let_go), or its own records
 *   answers.c   the Filed answer queued for sync.pull (per table what became
 *               of its rows, each row not filed named), a send filed before
 *               or numbered at or below the last filed, what sync.file returns
 *   aside.c     the backlog as recorded: each table's rows the replica can
 *               never send, with why, and the rows this filing refused
 *   values.c    the values digest of a table as the server holds it for a
 *               replica, and its repair: the rows sent again
 *-------------------------------------------------------------------------
 */
#ifndef MS_FILE_H
#define MS_FILE_H

#include "postgres.h"

#include "executor/spi.h"
#include "nodes/pg_list.h"
#include "utils/uuid.h"

#include "bytes.h"
#include "catalog.h"
#include "epoch.h"
#include "range.h"
#include "row.h"
#include "sync.pb-c.h"

/* What became of one uploaded row. */
typedef enum ms_outcome
{
	MS_FILED,
	MS_REFUSED,					/* it never can be: told to the replica */
	MS_DROPPED,					/* the server's change wins */
	MS_WAITS,					/* kept in the inbox until the replica holds the row */
	MS_SET_ASIDE,				/* failed for good: kept in the inbox, retried after a fix */
	MS_OUTCOMES
} ms_outcome;

extern const char *const ms_outcome_names[MS_OUTCOMES];

/*
 * One mirrored table as a call files its rows: the statements that file
 * them, each prepared the first time a row needs it and kept for the call.
 */
typedef struct ms_filed_table
{
	ms_table   *t;
	char	   *held;			/* held back (declare/catalog.h): why; its rows wait in the inbox */
	bool		owned;			/* the replica owns a column of it */
	ms_row_column *cols;		/* proto codec: the walker's view of its columns */
	ms_row_shape shape;
	SPIPlanPtr	exists;			/* $1 key: the row is there */
	SPIPlanPtr	record;			/* $1 row (json), $2 sender: a record filed */
	SPIPlanPtr	compare;		/* $1 row (json), $2 key: a record not taken, against the server's */
	SPIPlanPtr	two_way;		/* $1 row (json), $2 key: the replica's columns */
	SPIPlanPtr	delete_row;		/* $1 key: a record deleted */
} ms_filed_table;

/*
 * What one call of sync.file or sync.inbox_retry prepares once: the tables
 * and the statements on the catalog that every row uses.  Lives in the
 * call's SPI procedure context, so it goes with SPI_finish.
 */
typedef struct ms_filer
{
	MemoryContext cxt;
	List	   *tables;			/* ms_table *, from ms_catalog_tables */
	int			ntables;
	ms_filed_table *filed;		/* one per table, in the order of tables */
	SPIPlanPtr	check;			/* an uploaded row's columns and key */
	SPIPlanPtr	held;			/* a held row: its number, taken, since */
	SPIPlanPtr	mark_held;		/* a filed row is held, at its newest note */
	SPIPlanPtr	note;			/* the replica's version lost: note the row */
	SPIPlanPtr	replace;		/* the row's next send replaces the copy whole */
	SPIPlanPtr	unhold;			/* a deleted record is held no more */
	SPIPlanPtr	keep;			/* a row kept in the inbox */
	SPIPlanPtr	unkeep;			/* a row filed (or refused, dropped) leaves the inbox */
	SPIPlanPtr	drop_note;		/* an edit dropped for the replica to fix, remembered (sync.dropped) */
	SPIPlanPtr	drop_forget;	/* and forgotten once the row is filed */
	SPIPlanPtr	answer;			/* a write refused: its row goes again (refusal.c), prepared when first needed */
	bool		updated;		/* the catalog is 0.2's (ms_uploads_catalog) */
	struct ms_reach *reach;		/* reach.c's statements, made on first use */
} ms_filer;

/* What became of the rows of one table of an upload, for the answer. */
typedef struct ms_filed_counts
{
	char	   *table;			/* as the upload names it */
	int			counts[MS_OUTCOMES];
} ms_filed_counts;

/* Rows an answer names (refused, dropped, kept): at most this many in all. */
#define MS_ANSWER_NAMED_MAX 1000

/* Tables the server does not mirror whose rows it refused, in the backlog it keeps (aside.c): at most. */
#define MS_BACKLOG_UNMIRRORED_MAX 8

/* The filing of one upload (or of one inbox row) of one replica. */
typedef struct ms_filing
{
	ms_filer   *filer;
	pg_uuid_t	replica;
	char	   *replica_text;
	Datum		sender;			/* jsonb, or 0 */
	ms_epoch	epoch;
	int64		acked;			/* what the replica applied, after this upload's acknowledgement */
	int64		acked_before;	/* and before it */
	bool		provisioning;	/* it is being provisioned again: held rows are on their way */
	int			counts[MS_OUTCOMES];
	List	   *tables;			/* ms_filed_counts *, for the answer, in the order first named */
	struct HTAB *table_counts;	/* the same, by name (filing.c) */
	int			unmirrored_counted;	/* tables counted the server does not mirror: MS_ANSWER_NAMED_MAX at most */
	List	   *named[MS_OUTCOMES];	/* Sync__Refusal *: the rows not filed, for the answer */
	int			nnamed;
	List	   *reasons[MS_OUTCOMES];	/* a few distinct reasons, for what sync.file says */
	bool		fix;			/* the row dropped is the replica's to fix (sync.dropped) */
	bool		kept_known;		/* has_inbox and has_dropped were read */
	bool		has_inbox;		/* the replica has rows in the inbox: a row filed leaves it */
	bool		has_dropped;	/* ... or in sync.dropped */
	MemoryContext row_cxt;		/* reset after each row */
	uint64		seq;			/* the upload's send number */
	uint64		last_seq;		/* the last filed for the replica, before it */
	List	   *again;			/* Sync__Refusal *: rows in an old schema, sent again (relay/evolve.c) */
	List	   *again_tables;	/* ms_filed_counts *: how many of each table (counts[MS_FILED]) */
	const char *lane;			/* the upload's lane (lanes.c): "" the first */
	const uint8 *upload;		/* the upload, whose digests and backlog ack.c reads a piece at a time */
	size_t		upload_len;
	uint64		unfiled;		/* rows its backlog says were sent and not yet filed (ms_backlog) */
	uint64		unfiled_since;	/* the message the replica applied before its oldest write not filed (reach.c); 0: not said */
	bool		range_repair;	/* the replica answers range questions (range.c) */
	List	   *range_asks;		/* Sync__RangeAsk *: range questions for the answer */
	int			range_resent;	/* rows range repair marked to go again */
	int			range_let_go;	/* rows range repair marked to be let go of */
	int			range_started;	/* digests that differ, narrowed down by ranges */
	int			values_rested;	/* values digests not compared: a repair of the table started lately */
	int			keys_rested;	/* key digests that differ, not acted on: ranges found nothing, a snapshot lately (ack.c) */
} ms_filing;

/* ---- filer.c ---- */

/*
 * ms_uploads_catalog: whether the catalog records what filing needs since
 * 0.2 (sync.sends, sync.dropped).  A server whose package was
 * upgraded before ALTER EXTENSION UPDATE ran files as 0.1 did: every
 * upload verified whole, but no send numbered before taken for a replay,
 * and no edit dropped remembered.
 */
extern bool ms_uploads_catalog(void);

/* ms_filer_begin: read the catalog and prepare the call's statements; SPI connected. */
extern void ms_filer_begin(ms_filer *fr);
/* ms_filed_table_named: the table of this wire name, or NULL when it is not mirrored. */
extern ms_filed_table *ms_filed_table_named(ms_filer *fr, const char *name);
/* ms_filed_plan: a statement of a table (slot is one of its plans), prepared on first use. */
extern SPIPlanPtr ms_filed_plan(ms_filer *fr, ms_filed_table *ft, SPIPlanPtr *slot);
/*
 * ms_server_column: a column the server fills itself (generated, created,
 * the sender stamp): an upload may carry it, and it is ignored.
 */
extern bool ms_server_column(const ms_table *t, int c);
/* ms_filer_run: run a plan; errors when SPI does not answer with expect. */
extern void ms_filer_run(SPIPlanPtr plan, Datum *values, const char *nulls, bool read_only,
						 long tcount, int expect, const char *what);
/*
 * ms_key_canonical: the parts of a wire key as its key columns' types print
 * them (src/shared/canon.h), into parts; false with *why when one is no
 * value of its type.
 */
extern bool ms_key_canonical(const ms_table *t, const Sync__Key *k, char **parts, char **why);
/* ms_row_json: a row in its table's codec as a JSON object; NULL with *why when it does not decode. */
extern char *ms_row_json(ms_filed_table *ft, const uint8 *bytes, size_t len, char **why);
/* ms_canonical_key: a wire Key's canonical bytes. */
extern char *ms_canonical_key(const Sync__Key *k);

/* ---- lanes.c ---- */

/*
 * ms_lane_admit: the upload's lane into f->lane, refused (nothing of it
 * filed) when no table is declared in it and the replica never had a send
 * of it filed.  SPI connected.
 */
extern void ms_lane_admit(ms_filing *f, Sync__Up *up);

/* ms_lane_first: the upload is of the first lane, which says what the engine says of the replica */
extern bool ms_lane_first(const ms_filing *f);

/* ---- ack.c ---- */

/* ms_acknowledge: the last message the replica applied (a may be NULL); sets f->acked. */
extern void ms_acknowledge(ms_filing *f, Sync__Applied *a);
/* ms_gap: a gap provisions the replica again, unless a snapshot after it is on its way. */
extern void ms_gap(ms_filing *f, Sync__Up *up);
/* ms_refusals: rows the replica could not take are not counted as held. */
extern void ms_refusals(ms_filing *f, Sync__Up *up);
/* ms_provision_again: the replica is provisioned again, for why. */
extern void ms_provision_again(ms_filing *f, const char *why);
/* range.c: a digest that differs narrowed down (false: the replica cannot be asked); the answers compared */
extern bool ms_range_start(ms_filing *f, ms_table *t);
/*
 * the same of a values digest that differs (keys that agree): false, repaired
 * whole; first (n of them): the server's buckets at the first question's
 * depth (MS_RANGE_FIRST_SPLIT), from the digest's walk, kept for its answer
 */
#define MS_RANGE_FIRST_SPLIT 6
extern bool ms_range_start_values(ms_filing *f, ms_filed_table *ft, const ms_range_sum *first, size_t n);
extern void ms_range_answers(ms_filing *f, Sync__Up *up);
/* ms_digests: the upload's digests (f->upload): "none", "not compared: ...", "differ" or "match". */
extern const char *ms_digests(ms_filing *f);

/* ---- values.c ---- */

/*
 * ms_values_digest: the values digest of what the replica holds of ft's
 * table (docs/protocol.md 8), over the server's current rows, into *out,
 * and its buckets at depth MS_RANGE_FIRST_SPLIT (*nfirst, ascending) into
 * *first, for a range question's first answer;
 * false when it cannot be known now (a change of the table on its way, or
 * not count rows read)
 */
extern bool ms_values_digest(ms_filing *f, ms_filed_table *ft, uint64 count, uint64 *out,
							 ms_range_sum **first, size_t *nfirst);
/*
 * ms_values_repairing: whether a values repair of the replica is on its way
 * (rows it marked, not acknowledged yet): its digests are not compared then.
 */
extern bool ms_values_repairing(ms_filing *f);
/*
 * ms_values_repair: every row the replica holds of ft's table goes to it
 * again; its values are not compared again for magic_sync.values_repair_interval
 */
extern void ms_values_repair(ms_filing *f, ms_filed_table *ft);
/* ms_values_repair_keys: the same, of the held rows whose keys are in keys (a text[]) */
extern void ms_values_repair_keys(ms_filing *f, ms_filed_table *ft, Datum keys);
/* ms_values_rest: ft's values of the replica not compared for magic_sync.values_repair_interval */
extern void ms_values_rest(ms_filing *f, ms_filed_table *ft);
/*
 * ms_values_walk: each row the replica holds of ft's table, its canonical
 * key and its values hash (docs/protocol.md 8) as the server's current row
 * makes it, given to fn in the caller's memory; *rows the rows read; false
 * when a row could not be walked (its hash not the replica's)
 */
/* ms_values_on_its_way: a note of t waits, or a row of it is quarantined: values not comparable */
extern bool ms_values_on_its_way(const ms_table *t);
typedef void (*ms_values_row) (void *arg, const char *key, size_t len, uint64 hash);
extern bool ms_values_walk(ms_filing *f, ms_filed_table *ft, ms_values_row fn, void *arg, uint64 *rows);
/*
 * ms_values_walk_keys: the same of the held rows whose keys are in keys (a
 * text[] of held keys): a key the table no longer has reads no row
 */
extern bool ms_values_walk_keys(ms_filed_table *ft, Datum keys, ms_values_row fn, void *arg, uint64 *rows);
/*
 * ms_backlog: what the replica has not sent, has not had filed, set aside,
 * refused (f->upload's backlog), of each table the server mirrors.
 */
extern void ms_backlog(ms_filing *f, Sync__Up *up);

/* ---- aside.c ---- */

/*
 * ms_backlog_json: the backlog the upload says of the mirrored tables (kept:
 * n entries, NULL for a table it does not name: unsent, unfiled, set aside,
 * refused, and why rows are set aside), the rows this filing
 * refused moved to the rows set aside, as JSON for sync.replicas.backlog.
 * Call after the rows are filed.
 */
extern char *ms_backlog_json(const ms_filing *f, Sync__Backlog *const *kept, int n);

/* ---- refused.c ---- */

/*
 * ms_refused_backoff: refusals of held rows (tables and keys, text[] of
 * wire names and canonical keys), before they are marked: when each row
 * goes again.
 */
extern void ms_refused_backoff(ms_filing *f, Datum tables, Datum keys);
/* ms_refused_settle: after the refusals, the counts of rows taken (or no longer held) end. */
extern void ms_refused_settle(ms_filing *f);
/* ms_refused_build: the replica's build and protocol recorded; a change makes its refused rows due. */
extern void ms_refused_build(ms_filing *f, Sync__Up *up);

/* ---- filing.c ---- */

/* ms_file_rows: every upsert and delete of one Rows of an upload (its bytes, read a row at a time). */
extern void ms_file_rows(ms_filing *f, const uint8 *rows, size_t len);
/*
 * ms_file_row: one row (bytes NULL and del for a delete) in a subtransaction
 * of its own; a permanent failure is MS_SET_ASIDE with its reason and
 * SQLSTATE, a transient one is raised.
 */
extern ms_outcome ms_file_row(ms_filing *f, ms_filed_table *ft, char **parts, const char *key,
							  const uint8 *bytes, size_t len, bool del, char **why, char **sqlstate);

/* ---- reach.c ---- */

/*
 * ms_reach_refused: whether a row the replica files (json as filed: a
 * record whole, a two-way row's owned columns) points, through a foreign
 * key it writes, at a row the replica may not reach: then *why (the
 * table, columns and key) and *sqlstate say so.  Raises what the owner's
 * code raises.
 */
extern bool ms_reach_refused(ms_filing *f, ms_filed_table *ft, const char *key, const char *json,
							 char **why, char **sqlstate);
/*
 * ms_reach_acknowledged: the held rows the messages through acked took back
 * are gone, those taken after f->unfiled_since remembered in sync.let_go.
 */
extern void ms_reach_acknowledged(ms_filing *f, int64 acked);
/* ms_reach_forget: sync.let_go forgets the rows taken at or before f->unfiled_since. */
extern void ms_reach_forget(ms_filing *f);

/* ---- refusal.c ---- */

/*
 * ms_refusal_answer: a write of the replica's refused: the next pass sends
 * it the row as the server has it, or its deletion (the held row marked
 * replace).  After the row's subtransaction.
 */
extern void ms_refusal_answer(ms_filing *f, ms_filed_table *ft, char **parts, const char *key, bool del);

/* ---- inbox.c ---- */

/* ms_inbox_keep: keep a row that waits or failed for good in the inbox. */
extern void ms_inbox_keep(ms_filing *f, ms_filed_table *ft, const char *key,
						  const uint8 *bytes, size_t len, bool del,
						  const char *why, const char *sqlstate);

/* ---- answers.c ---- */

/* ms_already_filed: whether this send was filed before (its answer is queued). */
extern bool ms_already_filed(ms_filing *f, Sync__Up *up);
/*
 * ms_numbered_before: whether the send is numbered at or below the last
 * filed for the replica (read into f->last_seq, the replica's row locked):
 * then its answer says so, and nothing of it is filed.
 */
extern bool ms_numbered_before(ms_filing *f, Sync__Up *up);
/* ms_answer: the Filed answer for the send, queued for sync.pull; the send's number recorded as the last filed. */
extern void ms_answer(ms_filing *f, Sync__Up *up);
/* ms_answer_duplicate: the answer of a send numbered before: nothing filed, the last number filed. */
extern void ms_answer_duplicate(ms_filing *f, Sync__Up *up);
/* ms_file_result: what sync.file returns, as jsonb text (call after SPI_finish). */
extern char *ms_file_result(const ms_filing *f, const char *digests);
/* ms_duplicate_result: what sync.file returns of a duplicate. */
extern char *ms_duplicate_result(const ms_filing *f, bool numbered_before);

#endif
