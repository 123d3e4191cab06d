/*-------------------------------------------------------------------------
 * load.h
 *	  Loading and encoding the rows a plan sends: each once, however many
 *	  replicas get it, a chunk at a time.
 *-------------------------------------------------------------------------
 */
#ifndef MS_LOAD_H
#define MS_LOAD_H

#include "utils/uuid.h"

#include "catalog.h"
#include "pass.h"

/* A row loaded and encoded, with the replicas that get it. */
typedef struct ms_row
{
	const char *key;			/* canonical key */
	int			keylen;
	const char *bytes;			/* the row in its table's codec */
	int			len;
	pg_uuid_t  *replicas;
	int			nreplicas;
	pg_uuid_t  *replacing;		/* those of them to get it as a replacement (Rows.replaces) */
	int			nreplacing;
} ms_row;

/* A row that cannot go: it does not encode, or no message could carry it. */
typedef struct ms_bad
{
	int			tab;
	char	   *key;
	char	   *reason;
	int			sqlerrcode;
} ms_bad;

/*
 * The caller takes each row; it returns NULL, or the reason the row cannot
 * go (too large for any message).
 */
typedef const char *(*ms_emit) (void *arg, ms_table *t, ms_row *row);

/*
 * ms_load_table: every row of table t in pg_temp.ms_send, in key order, a
 * chunk at a time.  A row that fails to encode for good is appended to *bad
 * and skipped; a transient failure is raised.  one_replica: the pass records
 * for one replica only.
 */
extern void ms_load_table(ms_pass *p, ms_table *t, bool one_replica, ms_emit emit, void *arg, List **bad);

/*
 * ms_load_whole: every row of table t not blocked, in the order the table
 * is read, a chunk at a time: a table the replicas provisioned want whole
 * (plan.c).  The rows name no replica (nreplicas 0): emit sends each to
 * every one.  A row too large for
 * a message is appended to *bad; when a chunk fails for good, it sets
 * *failed and raises the error: the pass plans again, the table's rows
 * through the plan, where each row that fails is found.
 */
extern void ms_load_whole(ms_pass *p, ms_table *t, bool blocked, ms_emit emit, void *arg, List **bad,
						  bool *failed);

/*
 * ms_encode_proto: t's columns, read from the tuple's attributes first,
 * first + 1, ..., as one row in the proto codec (a NULL absent).
 */
extern void ms_encode_proto(const ms_table *t, HeapTuple tup, TupleDesc desc, int first, StringInfo out);

/*
 * ms_output_pin: the settings output functions read (DateStyle,
 * IntervalStyle, TimeZone, extra_float_digits, bytea_output, lc_monetary)
 * pinned, whatever the session's, until AtEOXact_GUC(true, the level
 * returned): a row's values are written the same by the relay, whichever
 * session runs it, and by the values digest of a filing (transport/values.c).
 */
extern int	ms_output_pin(void);

/*
 * ms_load_columns: t's mirrored columns of the row named alias as a select
 * list, as the loads read a row before they encode it (a key column in its
 * key spelling), each named as its column
 */
extern char *ms_load_columns(const ms_table *t, const char *alias);

/* ms_encode_key: append a wire Key (its parts as field 1 strings) of a canonical key. */
extern void ms_encode_key(StringInfo out, const char *key, int keylen);

#endif
