/*-------------------------------------------------------------------------
 * upanswer.h
 *	  Whether a replica waits on the answer to one of its uploads.
 *
 * Every filing is answered (a Filed, pulled as the messages are).  An
 * upload that says only what the replica says of itself -- the message it
 * applied, its backlog, its build, its clock, its number, length and check
 * -- gets an answer that lets go of nothing the replica waits on: it may
 * wait in the server for the next pull.  One that carries rows, refusals,
 * digests, range answers, wish fates or a gap, or a field not known here,
 * is answered with what the replica waits for (its notes let go of, a
 * question, a repair), and the agent pulls it before its round ends
 * (src/agent/main.c's pass).
 *
 * The answer to the first kind, a receipt, lets go of nothing a message
 * touches: the agent applies it after the messages pulled with it, so that
 * what they carry is in the file one commit sooner.
 *-------------------------------------------------------------------------
 */
#ifndef MS_UPANSWER_H
#define MS_UPANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * ms_up_answer_awaited: whether the replica waits on the answer to the
 * upload up (len bytes, as sync_upload returned it): read by its fields'
 * tags, nothing decoded; bytes that do not read as fields are awaited.
 */
extern bool ms_up_answer_awaited(const uint8_t *up, size_t len);

/*
 * ms_filed_is_receipt: whether msg (len bytes, as sync.pull returned it)
 * is a Filed answer to an upload that carried nothing it accounts for: no
 * rows filed, refused, dropped, kept or to send again, no range asks, not
 * a duplicate.  False for anything else, and for what does not decode.
 */
extern bool ms_filed_is_receipt(const uint8_t *msg, size_t len);

#endif
