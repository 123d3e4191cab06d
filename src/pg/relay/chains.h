/*-------------------------------------------------------------------------
 * chains.h
 *	  The chains a worker's pass wrote, copied into sync.replicas after its
 *	  commit in C: no statement for the one replica a one-row pass writes
 *	  to (issue 37).  See chains.c.
 *-------------------------------------------------------------------------
 */
#ifndef MS_CHAINS_H
#define MS_CHAINS_H

#include "postgres.h"

#include "utils/array.h"
#include "utils/snapshot.h"

/* what one replica's row became (or, checking, is to become) */
typedef struct ms_chain_copied
{
	pg_uuid_t	id;
	int64		last_number;
	bytea	   *last_nonce;		/* NULL: null */
	int64		owed_messages;
	int64		owed_bytes;
	bool		past;			/* it may be past its outbox's bounds */
} ms_chain_copied;

/*
 * ms_chains_copy: each replica of written (uuid[]) with the messages and
 * bytes the pass made it owed (int8[] each): its chain copied from the
 * outbox, as relay.c's copy_chains does, in snapshot (READ COMMITTED, at
 * the current command).  write false: each row is locked and what it is to
 * become computed, nothing written (magic_sync.full_plan compares it with
 * the statement's).  Returns false when the catalog has not what it needs
 * (the caller runs the statement); *copied: one entry a replica found, in
 * *ncopied.
 */
extern bool ms_chains_copy(Snapshot snapshot, ArrayType *written, ArrayType *messages, ArrayType *bytes,
						   bool owed, bool write, ms_chain_copied **copied, int *ncopied);

#endif							/* MS_CHAINS_H */
