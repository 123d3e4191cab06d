/*-------------------------------------------------------------------------
 * sneakernet.h
 *	  magic_sync_agent export / import: a replica's messages carried as
 *	  files (src/shared/bundle.h), for a van or a ship without a network.
 *
 *   sneakernet.c  the commands: options, bundle files, what they say
 *   sneak_down.c  the server's side: export (sync.pull), import (sync.file)
 *   sneak_up.c    the replica's side: import (sync_apply), its upload
 *-------------------------------------------------------------------------
 */
#ifndef MS_SNEAKERNET_H
#define MS_SNEAKERNET_H

#include "agent.h"

#include "bundle.h"

/* a bundle refused: damaged, of the wrong kind or replica, applied already, out of order, forged (EX_DATAERR) */
#define EXIT_DATAERR		65
/* the bundle cannot be written (EX_CANTCREAT) */
#define EXIT_CANTCREAT		73

/* the largest bundle file read: 1 GiB */
#define SNEAK_FILE_MAX ((size_t) 1 << 30)

typedef struct sneak_options
{
	const char *server;
	const char *replica;		/* a uuid, or NULL */
	const char *db;
	const char *from;
	const char *to;
	const char *name;
	int			pull_bytes;
	const char *server_key;		/* import --db: an operator's pin, 64 hexadecimal digits */
	report_mode mode;
} sneak_options;

/* What a command did, said by sneak_say as one line (or one JSON object). */
typedef struct sneak_result
{
	const char *event;			/* export, import */
	const char *result;			/* written, applied, filed, or why refused */
	char		replica[37];
	const char *bundle;
	const char *upload;			/* import on the replica's side: the upload bundle written */
	int64_t		messages;		/* chained messages (export: written; import: applied) */
	int64_t		answers;		/* Filed answers */
	int64_t		duplicates;		/* messages or uploads applied or filed before */
	int64_t		first;			/* chained messages' numbers, 0 when none */
	int64_t		last;
	int64_t		applied;		/* the replica's last applied message, after */
	int64_t		uploads;		/* uploads written or filed */
	int64_t		filed;			/* rows the server filed */
	int64_t		refused;
	int64_t		dropped;
	int64_t		waiting;
	int64_t		acknowledged;
	char		server_key[65];	/* export: the key the server signs with, "" when none */
	char		reason[AGENT_ERROR_MAX + 160];
} sneak_result;

extern int	sneakernet_main(int argc, char **argv);

/* sneakernet.c */
extern void sneak_say(const sneak_options *o, const sneak_result *r, int code);
extern uint8_t *sneak_read(const char *path, size_t *len, bool *damaged, char err[AGENT_ERROR_MAX]);
extern bool sneak_write(const char *path, const uint8_t *buf, size_t len, char err[AGENT_ERROR_MAX]);
extern ms_allocator sneak_malloc;
/* sneak_now_us: the time, in microseconds since 1970, a bundle is stamped with */
extern uint64_t sneak_now_us(void);

/* sneak_down.c */
extern int	sneak_export(const sneak_options *o, const uint8_t uuid[16], sneak_result *r);
extern int	sneak_file(const sneak_options *o, const ms_bundle *b, sneak_result *r);

/* sneak_up.c */
extern int	sneak_apply(const sneak_options *o, const ms_bundle *b, sneak_result *r);
extern int	sneak_upload_only(const sneak_options *o, const uint8_t uuid[16], sneak_result *r);

#endif
