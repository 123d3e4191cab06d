/*-------------------------------------------------------------------------
 * settings.c
 *	  The GUCs magic_sync.*.  Bounds are what keeps a pass's memory a chunk
 *	  and a message per replica, however much it sends.
 *-------------------------------------------------------------------------
 */
#include "magic_sync.h"

#include "miscadmin.h"
#include "utils/guc.h"

#include "settings.h"

char	   *ms_database = NULL;
char	   *ms_role = NULL;
int			ms_naptime = 1000;
int			ms_coalesce = 100;
int			ms_batch_notes = 100000;
int			ms_chunk_rows = 1000;
int			ms_message_bytes = 256 * 1024;
int			ms_fill_bytes = 64 * 1024;
int			ms_outbox_messages = 10000;
int			ms_outbox_bytes = 256 * 1024;
int			ms_upload_bytes = 16 * 1024 * 1024;
int			ms_values_repair_interval = 300;
int			ms_digest_repair_interval = 300;
int			ms_prune_rows = 10000;
bool		ms_full_plan = false;
bool		ms_whole_tables = true;
bool		ms_held_later = true;
int			ms_held_wait = 5000;
int			ms_held_pull_gap = 1000;
bool		ms_check_scans = false;
int			ms_unreachable_after = 2 * 3600;
int			ms_wishes_kept = 7 * 24 * 3600;
int			ms_temp_buffers = 128;
int			ms_standby_lag = 60;

void
ms_settings_init(void)
{
	/* a server-start setting can only be defined while the library is preloaded */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomStringVariable("magic_sync.database",
								   "Database in which the preloaded relay worker runs.",
								   "Empty: no worker starts at server start (sync.relay_start() starts one).",
								   &ms_database, "", PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("magic_sync.role",
							   "Role the relay worker connects as.",
							   "Empty: the bootstrap superuser.  A least-privileged role is a member of sync_relay (docs/operations.md); it reads each mirrored table as the table's owner.",
							   &ms_role, "", PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.naptime",
							"Time between relay passes when nothing wakes the worker.",
							NULL, &ms_naptime, 1000, 10, 3600 * 1000, PGC_SIGHUP,
							GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.coalesce",
							"Longest a relay pass waits for more commits while they keep coming.",
							"Under a stream of commits, fewer and larger passes cost the relay, the agents and their sessions less per row; a lone commit never waits.  0: the next pass begins at once.",
							&ms_coalesce, 100, 0, 10000, PGC_SIGHUP,
							GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.batch_notes",
							"Notes a relay pass reads at most, oldest first, before it closes the batch over the rows it touches.",
							"A larger backlog is planned over several passes, each one transaction.",
							&ms_batch_notes, 100000, 1, INT_MAX, PGC_SUSET,
							0, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.chunk_rows",
							"Rows a relay pass loads and encodes at a time.",
							NULL, &ms_chunk_rows, 1000, 1, 1000000, PGC_SUSET,
							0, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.message_bytes",
							"Largest message the relay writes; a row that cannot fit is quarantined.",
							NULL, &ms_message_bytes, 256 * 1024, 1024, 64 * 1024 * 1024, PGC_SUSET,
							GUC_UNIT_BYTE, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.fill_bytes",
							"Memory the relay gives to the messages it is filling, every replica's together; past it, they end early.",
							"A change broadcast to many replicas fills a message for each: this bounds the sum, magic_sync.message_bytes each one.",
							&ms_fill_bytes, 64 * 1024, 64, INT_MAX / 1024, PGC_SUSET,
							GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.outbox_messages",
							"Messages a replica's outbox may hold beyond the snapshot it begins with before the replica is provisioned again.",
							NULL, &ms_outbox_messages, 10000, 1, INT_MAX, PGC_SUSET,
							0, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.outbox_bytes",
							"Bytes a replica's outbox may hold beyond the snapshot it begins with before the replica is provisioned again.",
							NULL, &ms_outbox_bytes, 256 * 1024, 64, INT_MAX, PGC_SUSET,
							GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.upload_bytes",
							"Largest upload sync.file accepts.",
							NULL, &ms_upload_bytes, 16 * 1024 * 1024, 1024, 256 * 1024 * 1024, PGC_SUSET,
							GUC_UNIT_BYTE, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.values_repair_interval",
							"Time a replica's values digest of a table is not compared again after it started a repair of the table.",
							"A replica that reports false values digests costs the server a read of the table and a resend of its rows at most this often.",
							&ms_values_repair_interval, 300, 0, 7 * 24 * 3600, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.digest_repair_interval",
							"Time a replica's key digests that differ are not acted on after one was answered with a snapshot and ranges found nothing since.",
							"A replica that reports false key digests costs the server a range question and a snapshot at most this often.",
							&ms_digest_repair_interval, 300, 0, 7 * 24 * 3600, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.prune_rows",
							"Rows the worker removes per pruning batch (done notes, unused bodies, delivered answers).",
							NULL, &ms_prune_rows, 10000, 1, 10000000, PGC_SIGHUP,
							0, NULL, NULL, NULL);
	DefineCustomBoolVariable("magic_sync.full_plan",
							 "Plans by comparing each replica's whole wanted set with what it holds, instead of around what changed.",
							 "Slower, and the same answer: for checking the planner.",
							 &ms_full_plan, false, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("magic_sync.whole_tables",
							 "A replica provisioned is sent each table it wants every row of by one read of the table.",
							 "Off: those rows go through the plan's tables, as every other snapshot's do (slower, the same messages).",
							 &ms_whole_tables, true, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("magic_sync.held_later",
							 "The worker records the held rows of the tables a snapshot reads whole after its pass commits.",
							 "In a transaction of their own, while the replicas provisioned pull and apply; off: in the pass, before its messages go.",
							 &ms_held_later, true, PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.held_wait",
							"How long at most the held rows the worker records after a snapshot's pass wait for the replica to pull the snapshot.",
							"They wait while its pulls move on (magic_sync.held_pull_gap), so they take no CPU from the pulls and the apply; 0: recorded at once.",
							&ms_held_wait, 5000, 0, 3600 * 1000, PGC_SIGHUP,
							GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.held_pull_gap",
							"Held rows waiting for a snapshot's pulls (magic_sync.held_wait) wait no longer once its pulls stopped for this long.",
							"From the pass's commit to the first pull too: a replica not pulling costs the relay this much.",
							&ms_held_pull_gap, 1000, 1, 3600 * 1000, PGC_SIGHUP,
							GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("magic_sync.check_scans",
							 "Each statement of a relay pass is explained first, and a warning names the tables it would read whole.",
							 "For checking the planner: a one-row change should read no table of the application's whole.",
							 &ms_check_scans, false, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.unreachable_after",
							"A live replica not heard from for this long is unreachable in sync.overview and sync.health.",
							"A replica files at least its hourly digests: the default allows one missed.",
							&ms_unreachable_after, 2 * 3600, 1, INT_MAX, PGC_USERSET,
							GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.wishes_kept",
							"How long a decided wish stays in sync.wishes before sync.prune removes it.",
							"A pending wish is never pruned.",
							&ms_wishes_kept, 7 * 24 * 3600, 60, INT_MAX, PGC_SUSET,
							GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.temp_buffers",
							"temp_buffers of the relay worker's session, set when it starts.",
							"The plan's temporary tables are read a page at a time: more local buffers only add memory.",
							&ms_temp_buffers, 128, 100, INT_MAX / 2, PGC_SIGHUP,
							GUC_UNIT_BLOCKS, NULL, NULL, NULL);
	DefineCustomIntVariable("magic_sync.standby_lag",
							"How long a hot standby's replay may stay behind the WAL it received before sync.pull there refuses, leaving the pulls to the primary.",
							"0: a standby serves however far behind its replay is.",
							&ms_standby_lag, 60, 0, INT_MAX / 1000, PGC_SIGHUP,
							GUC_UNIT_S, NULL, NULL, NULL);
	MarkGUCPrefixReserved("magic_sync");
}
