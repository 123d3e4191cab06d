/*-------------------------------------------------------------------------
 * sent.c
 *	  What each replica's pulls returned last, in shared memory: so that a
 *	  pull counts in sync.outbox.pulls only the messages it sends again.
 *
 * sync.live_replicas says a send keeps failing when the oldest message a
 * replica has not acknowledged went out three times (pulls).  Counting every
 * send wrote a new version of each message's row at every pull: a
 * transaction id, WAL and a dead row, between a write and its device.  The
 * first send of a message is the one that is no news: a message never
 * pulled reads pulls = 0 and one pulled once 1, and both mean "no send
 * failed" (send_failures is pulls - 1, at least 0).  So a pull counts a
 * message only when this table says it went out before: pulls becomes
 * greatest(pulls, 1) + 1.
 *
 * A slot per replica, by its uuid's hash, MS_SENT_SLOTS of them: the last
 * number a pull returned it and the key of that message's body (a replica
 * dropped and added again numbers from 1 again; a body key is never
 * reused, so a number that names another message is seen as such), in
 * this database's sync.outbox (the extension dropped and made again starts
 * its keys again, in a table of another oid).  What
 * the table cannot say -- not preloaded, the server restarted, the slot
 * taken by another replica -- the pull counts every message it returns, as
 * before: a count is never more than the sends, and one short at most where
 * the table forgot a send.
 *
 * The relay worker reads it too: the held rows of a snapshot it records
 * after its pass wait for the replica to pull it (relay/worker.c).  In the
 * ground, since both the relay and the transport read it.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#include "sent.h"

#define MS_SENT_SLOTS 4096

typedef struct sent_slot
{
	pg_uuid_t	replica;
	Oid			db;
	Oid			outbox;			/* sync.outbox's: the extension made again is another outbox */
	int64		through;		/* 0: free */
	int64		body;
} sent_slot;

typedef struct sent_shared
{
	slock_t		mutex;
	sent_slot	slots[MS_SENT_SLOTS];
} sent_shared;

static sent_shared *shared = NULL;
static shmem_request_hook_type prev_request = NULL;
static shmem_startup_hook_type prev_startup = NULL;

static void
sent_request(void)
{
	if (prev_request)
		prev_request();
	RequestAddinShmemSpace(MAXALIGN(sizeof(sent_shared)));
}

static void
sent_startup(void)
{
	bool		found;

	if (prev_startup)
		prev_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("magic_sync sent", sizeof(sent_shared), &found);
	if (!found)
	{
		SpinLockInit(&shared->mutex);
		memset(shared->slots, 0, sizeof shared->slots);
	}
	LWLockRelease(AddinShmemInitLock);
}

void
ms_sent_preload(void)
{
	prev_request = shmem_request_hook;
	shmem_request_hook = sent_request;
	prev_startup = shmem_startup_hook;
	shmem_startup_hook = sent_startup;
}

static sent_slot *
slot_of(const pg_uuid_t *replica)
{
	uint32		h = MyDatabaseId;

	/* a uuid's bytes are random enough (v4) or time-ordered (v7): all of them, mixed */
	for (int i = 0; i < UUID_LEN; i++)
		h = h * 31 + replica->data[i];
	return &shared->slots[h % MS_SENT_SLOTS];
}

static bool
same(const sent_slot *s, const pg_uuid_t *replica, Oid outbox)
{
	return s->db == MyDatabaseId && s->outbox == outbox && memcmp(s->replica.data, replica->data, UUID_LEN) == 0;
}

bool
ms_sent_last(const pg_uuid_t *replica, Oid outbox, int64 *through, int64 *body)
{
	sent_slot  *s;
	bool		known;

	if (shared == NULL)
		return false;
	s = slot_of(replica);
	SpinLockAcquire(&shared->mutex);
	known = s->through > 0 && same(s, replica, outbox);
	*through = known ? s->through : 0;
	*body = known ? s->body : 0;
	SpinLockRelease(&shared->mutex);
	return known;
}

void
ms_sent_record(const pg_uuid_t *replica, Oid outbox, int64 through, int64 body, bool forget)
{
	sent_slot  *s;

	if (shared == NULL || through <= 0)
		return;
	s = slot_of(replica);
	SpinLockAcquire(&shared->mutex);
	/* the same replica's: never back to an earlier number (a pull of a smaller batch), unless forgotten */
	if (forget || !(same(s, replica, outbox) && s->through > through))
	{
		s->replica = *replica;
		s->db = MyDatabaseId;
		s->outbox = outbox;
		s->through = through;
		s->body = body;
	}
	SpinLockRelease(&shared->mutex);
}
