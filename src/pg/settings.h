/*-------------------------------------------------------------------------
 * settings.h
 *	  The GUCs magic_sync.*.
 *-------------------------------------------------------------------------
 */
#ifndef MS_SETTINGS_H
#define MS_SETTINGS_H

extern char *ms_database;		/* magic_sync.database: where the preloaded worker relays */
extern char *ms_role;			/* magic_sync.role: who the worker connects as; empty: the bootstrap superuser */
extern int	ms_naptime;			/* magic_sync.naptime: ms between passes */
extern int	ms_coalesce;		/* magic_sync.coalesce: ms a pass waits for more commits */
extern int	ms_batch_notes;		/* magic_sync.batch_notes: notes a pass reads, before closing the batch */
extern int	ms_chunk_rows;		/* magic_sync.chunk_rows: rows loaded and encoded at a time */
extern int	ms_message_bytes;	/* magic_sync.message_bytes: bound of one message */
extern int	ms_fill_bytes;		/* magic_sync.fill_bytes (kB): bound of every message being filled, relay-wide */
extern int	ms_outbox_messages; /* magic_sync.outbox_messages: bound of one replica's outbox */
extern int	ms_outbox_bytes;	/* magic_sync.outbox_bytes (kB): bound of one replica's outbox */
extern int	ms_upload_bytes;	/* magic_sync.upload_bytes: bound of one upload */
extern int	ms_values_repair_interval;	/* magic_sync.values_repair_interval: s between a table's values repairs */
extern int	ms_digest_repair_interval;	/* magic_sync.digest_repair_interval: s between a replica's key repairs that found nothing */
extern int	ms_prune_rows;		/* magic_sync.prune_rows: rows the worker prunes per batch */
extern bool ms_full_plan;		/* magic_sync.full_plan: compare whole wanted sets */
extern bool ms_whole_tables;	/* magic_sync.whole_tables: a snapshot reads a table it sends whole once */
extern bool ms_held_later;		/* magic_sync.held_later: the worker records their held rows after its pass commits */
extern int	ms_held_wait;		/* magic_sync.held_wait (ms): those held rows wait for the snapshot's pulls at most */
extern int	ms_held_pull_gap;	/* magic_sync.held_pull_gap (ms): and no longer once the pulls stopped this long */
extern bool ms_check_scans;		/* magic_sync.check_scans: warn of a pass's statements reading a table whole */
extern int	ms_unreachable_after;	/* magic_sync.unreachable_after (s): not heard from since, unreachable */
extern int	ms_wishes_kept;		/* magic_sync.wishes_kept (s): a decided wish pruned after (sync.prune) */
extern int	ms_temp_buffers;	/* magic_sync.temp_buffers (blocks): the worker's temp_buffers */
extern int	ms_standby_lag;		/* magic_sync.standby_lag (s): a hot standby replaying further behind refuses sync.pull; 0: never */

extern void ms_settings_init(void);

#endif
