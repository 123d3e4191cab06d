/*-------------------------------------------------------------------------
 * upanswer.c
 *	  Whether a replica waits on the answer to one of its uploads
 *	  (upanswer.h).
 *-------------------------------------------------------------------------
 */
#include "upanswer.h"

#include "pbwrite.h"
#include "wire.h"

/*
 * Up's fields (sync.proto) that say only what the replica says of itself,
 * one bit each by field number: protocol 1, replica 2, send_id 3, applied
 * 4, backlog 8, seq 11, length 12, check 13, build 14, lane 16, clock 17,
 * unfiled_since 18, range_repair 20.  Not: rows 5, refusals 6, digests 7,
 * gap 9, gap_epoch 10, wish_fates 15, ranges 19, nor any later field.
 */
#define REPORT_FIELDS (1u << 1 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 8 | 1u << 11 | 1u << 12 | \
					   1u << 13 | 1u << 14 | 1u << 16 | 1u << 17 | 1u << 18 | 1u << 20)

bool
ms_up_answer_awaited(const uint8_t *up, size_t len)
{
	size_t		at = 0;
	ms_pb_field f;
	ms_pb_next_result r;

	/* a field beyond the replica's report, or bytes that do not read: awaited */
	while ((r = ms_pb_next(up, len, &at, &f)) == MS_PB_FIELD)
		if (f.number > 31 || !(REPORT_FIELDS & (1u << f.number)))
			return true;
	return r != MS_PB_END;
}

bool
ms_filed_is_receipt(const uint8_t *msg, size_t len)
{
	ms_wire_status status;
	char		reason[MS_REASON_MAX];
	Sync__ToReplica *m = ms_to_replica_decode(msg, len, len, NULL, &status, reason);
	const Sync__Filed *f = m != NULL && m->body_case == SYNC__TO_REPLICA__BODY_FILED ? m->filed : NULL;
	bool		receipt = f != NULL && f->rows == 0 && f->n_refused == 0 && f->n_tables == 0 &&
		f->n_dropped == 0 && f->n_kept == 0 && !f->duplicate && f->n_again == 0 && f->n_ranges == 0;

	if (m != NULL)
		sync__to_replica__free_unpacked(m, NULL);
	return receipt;
}
