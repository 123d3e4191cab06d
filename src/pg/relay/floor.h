/*-------------------------------------------------------------------------
 * floor.h
 *	  The relay worker's floor under the notes it reads (docs/design.md 4.3).
 *
 * A pass reads the oldest notes not done (batch.c).  Walked from the first
 * id, that read crosses the index entries of every note deleted since
 * sync.notes was last vacuumed: after a large change, thousands of pages at
 * every pass, however small.  The worker reads from a floor instead: an id
 * under which no note it could read remains.
 *
 * "The last id read, plus one" is no floor: ids are drawn before commit, so a
 * transaction that drew a smaller id may commit after a pass read a larger
 * one.  A floor is settled first.  Before a pass's snapshot the worker
 * records the sequence's last value, then the transactions running (their
 * virtual ids); once every one of them has ended, every note numbered up to
 * that value is committed or gone, and a pass whose snapshot is taken after
 * that sees all of them that remain.  Such a pass that read every note from
 * its floor up (not a full batch) leaves none up to that value; one that
 * read a full batch leaves none up to its last note.  That is the next floor,
 * taken once the pass commits.
 *
 * What lowers it: a parked note read again (batch.c); the sequence going
 * back, renamed or numbering in another way (a cache, a cycle); the worker
 * starting again; and a pass the naptime started (nothing woke it), which
 * reads from the first note, once a minute at most (a read from the first
 * crosses the dead entries again), so whatever a floor might have skipped
 * waits at most for the relay's first quiet moment a minute after the last.
 * A transaction that stays open holds the floor where it was (never lower):
 * the reads cost what they did without it.  Passes by hand
 * (sync.relay_pass) have no floor.
 *-------------------------------------------------------------------------
 */
#ifndef MS_FLOOR_H
#define MS_FLOOR_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "storage/lock.h"

typedef struct ms_floor
{
	int64		floor;			/* the read begins here: no note it could read has a smaller id */
	int64		settled;		/* every note numbered up to this is committed or gone */
	int64		next;			/* the floor once the pass commits (batch.c sets it) */
	Oid			seq;			/* sync.note_seq when these were taken */
	int64		candidate;		/* its last value, waiting for ... */
	VirtualTransactionId *running;	/* ... these transactions to end (NULL: no candidate) */
	int			nrunning;
	TimestampTz from_first_at;	/* when a pass last read from the first note (0: never) */
} ms_floor;

/*
 * ms_floor_before_snapshot: in the worker's pass transaction, holding the
 * relay lock, before its snapshot: settle the candidate if its transactions
 * ended, or record one.  quiet: the naptime started the pass; it reads from
 * the first note if none did for a minute.
 */
extern void ms_floor_before_snapshot(ms_floor *f, bool quiet);

/* ms_floor_committed: the pass committed; its reads begin at f->next from now on. */
extern void ms_floor_committed(ms_floor *f);

/* ms_seq_last_value: the last value the sequence seq gave (pg_sequence_last_value), 0 before its first */
extern int64 ms_seq_last_value(Oid seq);

#endif
