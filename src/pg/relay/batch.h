/*-------------------------------------------------------------------------
 * batch.h
 *	  The batch: the notes a pass reads, and the rows they changed.
 *
 *   pg_temp.ms_notes_read(id, tab, source, key, old_key, pointed, replica, grp)
 *                                        the notes of the batch, copied
 *   pg_temp.ms_pending(tab, key, note, moved)   the newest note of each row
 *       they changed, and whether one of them changed its key (to it or from it)
 *
 * The plan reads the batch (plan.c, question.c); park.c narrows it.
 *-------------------------------------------------------------------------
 */
#ifndef MS_BATCH_H
#define MS_BATCH_H

#include "pass.h"

/*
 * MS_BATCH_NOTES: the notes of the batch as `n`, read once from sync.notes
 * into the batch's own table (the columns the plan reads): a pass reads
 * each note once, however many statements look at the batch.  Under the
 * pass's snapshot they are not done: only the pass marks them done, last.
 */
#define MS_BATCH_NOTES "pg_temp.ms_notes_read n"

/*
 * the columns of sync.notes the batch copies, in the order of
 * pg_temp.ms_notes_read, and where each note is: the pass deletes its notes
 * by their addresses (ms_batch_done)
 */
#define MS_BATCH_COLUMNS "id, tab, source, key, old_key, pointed, replica, grp, ctid"

/*
 * ms_batch_read: note again the rows quarantined, and read again the notes
 * parked, a minute ago; then read the notes not done, oldest first, up to
 * magic_sync.batch_notes (none of the tables held back, held_ids: an int[]
 * or NULL), into a batch of their own, from the worker's floor
 * (floor.h; NULL: a pass by hand, from the first) up, and set the floor
 * the pass leaves.  Returns how many;
 * *more: the batch is full, more may wait (question.c closes the batch
 * over those its rows touch).
 */
struct ms_floor;
extern int64 ms_batch_read(ms_pass *p, struct ms_floor *floor, ArrayType *held_ids, bool *more);

/*
 * ms_batch_floor: the id the batch was read from (floor.h): no note the
 * pass could read has a smaller one.  0 in a pass by hand.
 */
extern int64 ms_batch_floor(const struct ms_floor *floor);

/* ms_batch_rows: pg_temp.ms_pending again, after notes joined or left ms_notes_read. */
extern void ms_batch_rows(ms_executor *x);

/*
 * ms_batch_rows_all: whether `rows` rows are every row of ms_pending, as
 * ms_batch_read read the batch, and no note of it is a group member's;
 * false when it does not know (the batch changed since).
 */
extern bool ms_batch_rows_all(uint64 rows);

/*
 * ms_batch_rows_known: how many rows ms_pending holds, as ms_batch_read read
 * the batch, when no note of it is a group member's; -1 when it does not
 * know (the batch changed since) or one is (fast.c's send ahead).
 */
extern int64 ms_batch_rows_known(void);

/* ms_batch_only: the batch is these notes (a bigint[]; park.c narrows it down). */
extern void ms_batch_only(ms_pass *p, ArrayType *ids);

/* ms_batch_by_table: the notes of the batch, by table then id, into *ids and *tabs; returns how many. */
extern int	ms_batch_by_table(ms_pass *p, int64 **ids, int **tabs);

/* ms_batch_done: the notes of the batch are done. */
extern void ms_batch_done(ms_pass *p);

#endif
