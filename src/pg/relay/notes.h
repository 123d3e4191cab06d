/*-------------------------------------------------------------------------
 * notes.h
 *	  What the noting trigger (notes.c) offers a reader of sync.notes in C.
 *
 * ms_notes_written: the notes this transaction buffered written now, as a
 * statement reading sync.notes has them written before it runs: a read of
 * the table in C (a probe) sees them as that statement would.
 *-------------------------------------------------------------------------
 */
#ifndef MS_NOTES_H
#define MS_NOTES_H

extern void ms_notes_written(void);

#endif
