/*-------------------------------------------------------------------------
 * magic_sync_sqlite.h
 *	  What the modules of the replica extension share.
 *
 * Every SQL function runs with an ms_ctx: the connection, the error it will
 * report, an arena for what it allocates, and, once loaded, the replica's
 * state (_sync_state) and schema (_sync_tables).  Modules:
 *
 *   util.c     arena, byte buffer, errors, statements, savepoints, hex, JSON text
 *   kept.c     statements kept prepared between calls (sync_keep_statements)
 *   state.c    the _sync_ tables, the state row, settings
 *   schema.c   the tables as the snapshot declared them, read back; keys
 *   tables.c   a snapshot's schema applied; tables that waited for the host's name
 *   ddl.c      a table made, altered, rebuilt; its indexes and triggers
 *   catalog.c  the file's objects read once, kept in step; the tables the replica made
 *   codec.c    a row in its codec (json, proto), both ways
 *   letgo.c    letting go of rows: delete or retire, and retired rows for good
 *   evolve.c   schema changes: tables made, altered, let go of, before a message's rows
 *   alter.c    a Down's schema: each Table matched, the table changed to it
 *   apply.c    sync_apply
 *   digest.c   sync_digest, and the digests of an upload
 *   upload.c   sync_upload
 *   uprows.c   an upload's rows, as they are now
 *   sends.c    send numbers, what each send carried, Filed answers, sync_upload_refused
 *   status.c   sync_status, sync_progress, sync_init, sync_config, sync_retry
 *   keys.c     sync_key, sync_digest_keys
 *   reach.c    what its writes may point at: the foreign-key triggers; since when its writes wait
 *-------------------------------------------------------------------------
 */
#ifndef MAGIC_SYNC_SQLITE_H
#define MAGIC_SYNC_SQLITE_H

#include <sqlite3ext.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"
#include "row.h"
#include "seal.h"
#include "sync.pb-c.h"
#include "uuid.h"
#include "wire.h"

/* ms_sqlite_allocator: a protobuf-c allocator on sqlite3_malloc64. */
extern ms_allocator *ms_sqlite_allocator(void);

/* Each module registers its SQL functions; SQLITE_OK or an error code. */
extern int	ms_keys_register(sqlite3 *db);
extern int	ms_apply_register(sqlite3 *db);
extern int	ms_digest_register(sqlite3 *db);
extern int	ms_upload_register(sqlite3 *db);
extern int	ms_sends_register(sqlite3 *db);
extern int	ms_status_register(sqlite3 *db);
extern int	ms_state_register(sqlite3 *db);
extern int	ms_hlc_register(sqlite3 *db);
extern int	ms_trust_register(sqlite3 *db);

/* ---- util.c ---------------------------------------------------------- */

/* An arena: everything a call allocates for itself, freed at once. */
typedef struct ms_arena ms_arena;
extern void *ms_alloc(ms_arena **a, size_t n);	/* zeroed; NULL when out of memory */
extern char *ms_strdup(ms_arena **a, const char *s);
extern char *ms_printf(ms_arena **a, const char *fmt,...);	/* sqlite3_mprintf formats */
extern void ms_arena_free(ms_arena **a);
/* ms_arena_allocator: a protobuf-c allocator on an arena (what it unpacks is freed with it) */
extern ProtobufCAllocator ms_arena_allocator(ms_arena **a);

/*
 * A map of names to pointers, its arrays in an arena: names compared
 * exactly, or folding ASCII case (fold) as SQLite compares identifiers.
 * Names are not copied.  ms_map_put replaces a name's value.
 */
typedef struct ms_map
{
	size_t		cap;			/* a power of two; 0: empty */
	size_t		n;
	bool		fold;
	const char **keys;
	size_t	   *lens;
	void	  **vals;
} ms_map;
extern void ms_map_init(ms_map *m, bool fold);
extern int	ms_map_put(ms_arena **a, ms_map *m, const char *key, size_t len, void *val);
extern void *ms_map_get(const ms_map *m, const char *key, size_t len);

/* A growable byte buffer (binary-safe); oom is sticky. */
typedef struct ms_buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		oom;
} ms_buf;
extern void ms_buf_add(ms_buf *b, const void *p, size_t n);
extern void ms_buf_str(ms_buf *b, const char *s);
extern void ms_buf_printf(ms_buf *b, const char *fmt,...);	/* sqlite3_mprintf formats */
extern void ms_buf_byte(ms_buf *b, uint8_t c);
extern void ms_buf_json_string(ms_buf *b, const char *s, size_t n);	/* "..." escaped */
extern void ms_buf_hex(ms_buf *b, const uint8_t *p, size_t n);
extern void ms_buf_free(ms_buf *b);

extern void ms_hex(const uint8_t *p, size_t n, char *out);	/* 2n + 1 bytes */
/* ms_sqlstate_ok: a SQLSTATE, five digits or capital letters */
extern bool ms_sqlstate_ok(const char *s);

/* The context of one SQL function call. */
typedef struct ms_state
{
	bool		has_replica;
	uint8_t		replica[MS_REPLICA_BYTES];
	char		replica_text[37];
	bool		has_epoch;
	uint8_t		epoch[MS_EPOCH_BYTES];
	uint64_t	number;			/* last applied; 0 before the first */
	uint8_t		nonce[MS_NONCE_BYTES];
	uint8_t		seal[MS_SEAL_BYTES];
	uint64_t	generation;		/* the generation it follows: none older is applied */
	uint64_t	gap;			/* the newest message it could not follow; 0 none */
	bool		has_gap_epoch;
	uint8_t		gap_epoch[MS_EPOCH_BYTES];
	uint64_t	snapshot;		/* the message that began the open snapshot; 0 none */
	bool		digest_due;		/* a snapshot ended since the last digests */
	int64_t		digest_at;		/* when the last digests went up */
	char	   *report;			/* what the last upload said (applied, gap, backlog) */
	bool		report_filed;	/* its Filed answer arrived */
	int64_t		report_at;
	uint8_t		report_send_id[MS_SEND_ID_BYTES];
	char	   *last_error;
	int64_t		error_at;
	const char *impossible;		/* why the state as stored cannot be (state.c); NULL when it can */
} ms_state;

typedef struct ms_schema ms_schema;
typedef struct ms_schema_kept ms_schema_kept;
typedef struct ms_catalog ms_catalog;

/* the tables a first snapshot took from the host, to backfill (backfill.c) */
typedef struct ms_backfill
{
	int			n;
	int			cap;
	const char **names;
} ms_backfill;

#define MS_SETTINGS_MAX 16		/* ms_settings' length at most */

typedef struct ms_ctx
{
	sqlite3    *db;
	const char *fn;				/* the SQL function's name, for messages */
	char	   *err;			/* sqlite3_malloc'd: the error reported */
	ms_arena   *arena;
	int64_t		now;			/* unix seconds */
	bool		have_state;		/* the _sync_ tables exist */
	ms_state	st;
	ms_schema  *schema;
	/* the schema kept by the connection, lent to this call (schema.c, kept.c) */
	bool		kept_lent;
	ms_schema_kept *kept_schema;
	/* the file's objects, read once per schema application (schema.c); NULL: not read */
	ms_catalog *catalog;
	/*
	 * our savepoints, open (ms_begin, ms_end), each with its ROLLBACK TO and
	 * RELEASE prepared before it opened: once SQLite is out of memory inside
	 * a function, it prepares nothing until the host's statement ends
	 */
	int			savepoints;
	bool		own_transaction;	/* the first of them began the transaction */
	sqlite3_stmt *undo[4];
	sqlite3_stmt *release[4];
	/*
	 * a read, begun with the first savepoint and left running (a CREATE INDEX
	 * expires every statement not running, the two above too): out of
	 * memory, when it ends SQLite rolls the transaction back (util.c)
	 */
	sqlite3_stmt *sentinel;
	/* set while a file's first snapshot applies its schema: what it takes to backfill */
	ms_backfill *backfill;
	/*
	 * _sync_config as the call read it once (state.c: ms_config and
	 * ms_state_load share one read); forgotten when the call writes it
	 */
	bool		config_read;
	int64_t		config[MS_SETTINGS_MAX];	/* each setting's value, its default when unset or out of range */
	int			config_bad;		/* the first setting out of its range (+1), 0: none */
	int64_t		config_bad_value;
} ms_ctx;

extern void ms_ctx_init(ms_ctx *c, sqlite3_context *ctx, const char *fn);
extern void ms_ctx_done(ms_ctx *c);
/* ms_ctx_error: report c->err (or the code's message) as the call's error. */
extern void ms_ctx_error(ms_ctx *c, sqlite3_context *ctx, int rc);
/* ms_ctx_finish: out as the function's TEXT result, or rc's error; frees out, ends c */
extern void ms_ctx_finish(ms_ctx *c, sqlite3_context *ctx, int rc, ms_buf *out);

/* ms_fail: set the error (the first one wins); returns rc. */
extern int	ms_fail(ms_ctx *c, int rc, const char *fmt,...);
/* ms_dberr: the connection's error as the call's; returns rc. */
extern int	ms_dberr(ms_ctx *c, int rc);

/* ms_exec: run SQL (sqlite3_mprintf formats: %w identifiers, %Q literals). */
extern int	ms_exec(ms_ctx *c, const char *fmt,...);
/* ms_prepare: prepare one statement (sqlite3_mprintf formats), or lend a kept one (kept.c). */
extern int	ms_prepare(ms_ctx *c, sqlite3_stmt **st, const char *fmt,...);
/*
 * ms_exec_one: run one statement of fixed text, no parameters, prepared as
 * ms_prepare does (kept: not parsed again at each call, as ms_exec would).
 */
extern int	ms_exec_one(ms_ctx *c, const char *sql);

/*
 * kept.c: statements kept prepared across calls by a connection that asks
 * (sync_keep_statements).  ms_kept_prepare prepares sql or lends the kept
 * statement of that text; ms_finalize gives a kept one back (reset, its
 * bindings cleared) and finalizes any other.  In this extension
 * sqlite3_finalize is ms_finalize.
 */
extern int	ms_kept_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st);
extern int	ms_finalize(sqlite3_stmt *st);
extern int	ms_kept_register(sqlite3 *db);
/*
 * The schema such a connection keeps between calls (schema.c):
 * ms_kept_schema_lend hands it to a call (*k, NULL when none is kept yet),
 * false when the connection keeps nothing or lent it already;
 * ms_kept_schema_give takes back what the call keeps (k, or NULL), which the
 * connection keeps until the next call (freed when it keeps nothing any
 * more); ms_schema_kept_free frees one.
 */
extern bool ms_kept_schema_lend(sqlite3 *db, ms_schema_kept **k);
/*
 * What apply.c's quiet_triggers found (every trigger of the file ours), kept
 * with the kept schema while what it found of the file's tables holds:
 * ms_schema_quiet_kept says 1 (ours), -1 (not) or 0 (not known: ask);
 * ms_schema_quiet_keep keeps an answer (false: none is kept now).
 * ms_schema_own_expiry: the
 * connection's statements were just expired by the call itself (its
 * triggers turned off and on), and held (a kept answer was read or kept
 * just before, so nothing else expired them since): what was found still
 * holds.
 */
extern int	ms_schema_quiet_kept(ms_ctx *c);
extern bool ms_schema_quiet_keep(ms_ctx *c, bool ours);
extern int	ms_schema_own_expiry(ms_ctx *c, bool held);
extern void ms_kept_schema_give(sqlite3 *db, ms_schema_kept *k);
extern void ms_schema_kept_free(ms_schema_kept *k);
/* ms_kept_expiries: how many times the connection's statements were expired since it kept them (-1: it keeps none). */
extern int	ms_kept_expiries(sqlite3 *db, int *n);
#ifndef MS_KEPT_C
#undef sqlite3_finalize
#define sqlite3_finalize ms_finalize
#endif
/* ms_done: step a statement that returns no row, then reset it. */
extern int	ms_done(ms_ctx *c, sqlite3_stmt *st);
/* ms_step: step; SQLITE_ROW or SQLITE_DONE, or an error recorded. */
extern int	ms_step(ms_ctx *c, sqlite3_stmt *st);
/*
 * ms_keys_read: when rc is SQLITE_OK, every non-NULL text of st's first column
 * into keys, each as its length (size_t) then its bytes; st finalized either
 * way.  Keys are read whole first so that nothing is deleted under a running
 * SELECT.
 */
extern int	ms_keys_read(ms_ctx *c, sqlite3_stmt *st, int rc, ms_buf *keys);
/* ms_keys_next: the next key ms_keys_read wrote, from *pos on; false at the end */
extern bool ms_keys_next(const ms_buf *keys, size_t *pos, const char **key, size_t *n);
/*
 * ms_names_read: when rc is SQLITE_OK, every text of st's first column into
 * *names (*n of them, in c's arena); st finalized either way.
 */
extern int	ms_names_read(ms_ctx *c, sqlite3_stmt *st, int rc, char ***names, int *n);
/*
 * ms_ints_read: when rc is SQLITE_OK, the first n columns of st's first row
 * into out[] (left as they are when there is no row); st finalized either
 * way.  ms_int_read: the first.
 */
extern int	ms_ints_read(ms_ctx *c, sqlite3_stmt *st, int rc, int64_t *out, int n);
#define ms_int_read(c, st, rc, out) ms_ints_read((c), (st), (rc), (out), 1)
/*
 * ms_has_column: whether table has column (NULL: whether the table exists),
 * as files of earlier builds may lack one.
 */
extern int	ms_has_column(ms_ctx *c, const char *table, const char *column, bool *yes);

/*
 * Savepoints: ms_begin opens one (a transaction of our own when the caller
 * has none); ms_end releases it when rc is SQLITE_OK, otherwise rolls back
 * to it and releases it, leaving the caller's work as it was, and returns
 * rc.  When that cannot be done (out of memory all along), or SQLite rolled
 * the whole transaction back under a savepoint that was not its first (as
 * it does when out of memory in a statement), ms_end returns another error
 * than rc, which no caller may take as the one it can absorb.
 */
extern int	ms_begin(ms_ctx *c, const char *name);
extern int	ms_end(ms_ctx *c, const char *name, int rc);

/*
 * trust.c: ms_trust_check, a message's signature against the server key the
 * replica trusts: SQLITE_OK when none is pinned or it verifies, else an
 * error that says why (nothing is applied).
 */
extern int	ms_trust_check(ms_ctx *c, const uint8_t *msg, size_t len);

/* ---- state.c --------------------------------------------------------- */

/* Settings (sync_config): name, default, least, greatest. */
typedef struct ms_setting
{
	const char *name;
	int64_t		def;
	int64_t		min;
	int64_t		max;
	const char *what;
} ms_setting;
extern const ms_setting ms_settings[];
extern const int ms_nsettings;

#define MS_MAX_MESSAGE_DEFAULT ((int64_t) 64 << 20)
#define MS_MAX_UPLOAD_DEFAULT ((int64_t) 1 << 20)
/*
 * The library's version, the first word of the build an upload carries
 * (Up.build): magic_sync.control's, which the Makefile passes (-DMS_VERSION).
 */
#define MS_SQLITE_VERSION MS_VERSION

/*
 * hlc.c, the clock of version => 'hlc' tables (docs/protocol.md 12):
 * ms_hlc_ensure adds its columns to _sync_state; ms_hlc_triggers makes the
 * stamping triggers of a table (none unless it is an hlc record), and
 * ms_hlc_drop_triggers drops them; ms_hlc_current reads the clock (0 when
 * the file has none); ms_hlc_heard merges a message's clock.
 */
extern int	ms_hlc_ensure(ms_ctx *c);
extern int	ms_hlc_drop_triggers(ms_ctx *c, const char *name);
extern int	ms_hlc_current(ms_ctx *c, int64_t *clock);
extern int	ms_hlc_heard(ms_ctx *c, uint64_t remote);

/*
 * ms_gen_triggers: SQL true of a row of sqlite_master that is not one of
 * the triggers _sync_gen_* (state.c): writing only _sync_state, never a
 * held row, and never while a Down's rows are written
 */
extern const char *const ms_gen_triggers;

/* ms_state_exists: whether the _sync_ tables exist (sets c->have_state). */
extern int	ms_state_exists(ms_ctx *c);
/* ms_state_ensure: create the _sync_ tables when they are missing (inside a savepoint). */
extern int	ms_state_ensure(ms_ctx *c);
/*
 * ms_state_load: read the state row into c->st (zeroes when there is none).
 * An impossible state is read as a replica that applied nothing and has a
 * gap, with st.impossible saying why.
 */
extern int	ms_state_load(ms_ctx *c);
/* ms_state_repair: write back what an impossible state was read as (inside a savepoint); a no-op otherwise. */
extern int	ms_state_repair(ms_ctx *c);
/* ms_state_said: ,"state":{...} -- what sync_status and sync_applied() would say now -- appended to out. */
extern int	ms_state_said(ms_ctx *c, ms_buf *out);
/* ms_state_error: record the last error (not fatal to the call). */
extern int	ms_state_error(ms_ctx *c, const char *fmt,...);
/* ms_config: a setting's value (its default when unset or no tables). */
extern int	ms_config(ms_ctx *c, const char *name, int64_t *out);
extern const ms_setting *ms_setting_find(const char *name);

/* ms_backlog_sql: per table: name, unsent, unfiled, set aside, refused, waiting, dropped (upload.c). */
extern const char *const ms_backlog_sql;

/* ---- schema.c, tables.c, ddl.c ---------------------------------------- */

/* ms_type (row.h): INTEGER, REAL, TEXT, BLOB, as server and replica name them */

typedef struct ms_col
{
	const char *name;
	char	   *q;				/* quoted identifier */
	ms_type		type;
	bool		owned;			/* replica_owned */
	bool		key;
	bool		retired;		/* the replica-side retired column */
	bool		json;			/* server type json/jsonb: TEXT holding JSON */
	uint32_t	field;			/* proto field number; 0: none */
	uint32_t	plain_len;		/* the name's length when it needs no escape in JSON (codec.c); else 0 */
} ms_col;

typedef struct ms_fk
{
	int			n;
	int		   *cols;			/* indexes into the child's columns */
	const char *parent_name;
	int			parent;			/* index into the schema, -1 when not held */
	char	  **refs;			/* referenced columns, quoted */
	const char **ref_names;		/* the same, as named */
} ms_fk;

typedef struct ms_tbl
{
	Sync__Table *msg;			/* as the snapshot declared it */
	const char *name;			/* wire name = SQLite table name */
	char	   *q;				/* quoted */
	char	   *lit;			/* as an SQL string literal */
	bool		record;			/* record or setting */
	bool		setting;		/* a record of one row per replica, keyed by its origin alone (wish.c) */
	bool		proto;
	bool		noted;			/* has noting triggers: record, or catalog with owned columns */
	int			ncols;
	ms_col	   *cols;
	int			nkey;
	int		   *key;			/* indexes into cols, key order */
	int			retired;		/* index into cols, or -1 */
	int			origin;			/* index into cols, or -1 */
	bool		origin_in_key;
	int			nfk;
	ms_fk	   *fks;
	int			depth;			/* 0: points at no held table; parents have lower depth */
	int			position;		/* its place in the snapshot's Begin */
	ms_row_shape shape;			/* the columns as the proto codec's walker sees them */
	char	   *keyexpr;		/* SQL: the row's canonical key from its columns */
	char	   *keymatch;		/* SQL: "k1" = ?1 AND "k2" = ?2 ... */
	char	   *keycols;		/* SQL: "k1", "k2" */
	/*
	 * broken: the file's table is not as the snapshot made it (the host
	 * dropped it, or one of its columns): not held until a snapshot makes it
	 * again.  Checked as the schema is loaded, since SQLite would read a
	 * missing column's quoted name as a string.
	 */
	char	   *broken;
	/*
	 * unmade: stored, never made: a table, view or index of the host's own
	 * had its name (never touched: the replica does not take what it did
	 * not make), and the table is made at the first message once it does
	 * not (ms_schema_host); broken says which
	 */
	bool		unmade;
	bool		host;			/* unmade, and the host has an object of its name */
	bool		absent;			/* made, and not in the file (none of its columns is) */
	ms_map	   *colmap;			/* column name -> its ms_col, for a table of many columns; NULL: few */
	char	   *upsert[2];		/* applyrows.c's upsert (1: of a replacement), made at its first use */
} ms_tbl;

/* hlc.c: the stamping triggers of a table, as CREATE TRIGGER statements (NULL: none, unless an hlc record) */
extern int	ms_hlc_trigger_sql(ms_ctx *c, const ms_tbl *t, const char *quiet, char **ins, char **upd);

struct ms_schema
{
	int			n;
	ms_tbl	   *t;				/* parents first: by depth, then position */
	ms_map		byname;			/* name -> its ms_tbl */
	ms_arena  **arena;			/* where it lives (a kept schema's outlives the call) */
};

/* ms_schema_load: read _sync_tables into c->schema (empty without tables). */
extern int	ms_schema_load(ms_ctx *c);
extern ms_tbl *ms_schema_find(ms_ctx *c, const char *name);
/* ms_tbl_column: the index of a column of t by its name (n bytes), or -1 */
extern int	ms_tbl_column(const ms_tbl *t, const char *name, size_t n);
/* ms_schema_begin: apply a snapshot's schema; tables it cannot hold are reported in last_error. */
extern int	ms_schema_begin(ms_ctx *c, Sync__Begin *b);
/*
 * ms_schema_host: what the host did since the last message, before one is
 * applied: a table the replica made and the host dropped is marked gone
 * (its name is no longer the replica's to take), and a table that waited
 * for a name the host had is made once the name is free.  *made: how many.
 */
extern int	ms_schema_host(ms_ctx *c, int *made);
/*
 * What a schema change (evolve.c) makes and alters a table with, as a Begin
 * does: ms_tbl_build describes a checked Table; ms_why_not_held says why a
 * replica cannot hold it (NULL: it can; clash: the name of another table
 * held that is the same in SQLite, or NULL); ms_object_type names what a
 * name is ("table", "view", "index", NULL); ms_table_take creates the table
 * or adds the columns it lacks to the one the replica made, never to the
 * host's (*host: why it waits, unmade, touching nothing);
 * ms_table_rebuild makes it again with its rows (the host's
 * own columns kept); ms_table_finish makes its indexes and triggers and
 * stores its Table at a position (ms_table_store: the Table only, for one
 * that waits); ms_table_untrigger drops its noting triggers;
 * ms_table_failure: an error the table's own savepoint absorbs;
 * ms_table_indexes and ms_table_triggers: a table's own (tables.c).
 */
extern int	ms_tbl_build(ms_ctx *c, Sync__Table *m, ms_tbl *t);
extern char *ms_why_not_held(ms_ctx *c, const Sync__Table *m, const char *clash);
extern int	ms_object_type(ms_ctx *c, const char *name, char **type);
extern int	ms_table_take(ms_ctx *c, const ms_tbl *t, char **host);
extern int	ms_table_rebuild(ms_ctx *c, const ms_tbl *t);
extern int	ms_table_finish(ms_ctx *c, Sync__Table *m, const ms_tbl *t, int position);
extern int	ms_table_store(ms_ctx *c, Sync__Table *m, int position);
extern int	ms_table_untrigger(ms_ctx *c, const char *name);
extern bool ms_table_failure(int rc);
extern int	ms_table_indexes(ms_ctx *c, const ms_tbl *t);
extern int	ms_table_triggers(ms_ctx *c, const ms_tbl *t);

/* ---- backfill.c ------------------------------------------------------- */

/*
 * ms_backfill_fits: whether a table of the host's fits the declaration
 * closely enough to be the replica's at a first snapshot; ms_backfill_take
 * marks it made and remembers it; ms_backfill_rows notes (and, for a
 * record, names in the open snapshot) the rows of every table taken.
 */
extern int	ms_backfill_fits(ms_ctx *c, const struct ms_tbl *t, bool *fits);
extern int	ms_backfill_take(ms_ctx *c, const char *name);
extern int	ms_backfill_rows(ms_ctx *c, const ms_backfill *b);

/* ---- catalog.c -------------------------------------------------------- */

/* An object of the file (sqlite_master), as the catalog keeps it. */
typedef struct ms_object
{
	const char *type;			/* one of ms_object_types: "table", "view", "index", "trigger" */
	const char *name;
	const char *tbl;
	const char *sql;			/* NULL: an index SQLite made itself */
	bool		made;			/* a table the replica made (_sync_made, not gone) */
	bool		gone;			/* dropped since it was read */
	struct ms_object *next;		/* the next index or trigger of its table */
} ms_object;
extern const char *const ms_object_types[4];

/*
 * What schema.c lends ddl.c: a set of names as SQLite compares them (case
 * folded), for matching the columns of a Table against the file's (a list,
 * or a map once it is long), with the slot of a name or -1; the canonical
 * key of a row in SQL (alias "NEW.", "OLD." or ""); why a table waits for
 * an object of the host's that has its name.
 */
typedef struct ms_names
{
	int			n;
	const char **name;
	ms_map	   *map;			/* name -> its slot in name */
} ms_names;
extern int	ms_names_make(ms_ctx *c, ms_names *ns, const char **list, int n);
extern int	ms_names_find(const ms_names *ns, const char *name);
extern char *ms_key_sql(ms_ctx *c, const ms_tbl *t, const char *alias);
extern char *ms_host_has(ms_ctx *c, const ms_object *o, const char *table);

/* ms_catalog_get: the file's objects as they are now (read once, kept in step). */
extern int	ms_catalog_get(ms_ctx *c, ms_catalog **cat);
/* ms_catalog_forget: read again when next needed (a savepoint rolled back). */
extern void ms_catalog_forget(ms_ctx *c);
/* the table, view or index, or trigger, of a name as SQLite compares them; a table's first index or trigger */
extern ms_object *ms_cat_object(ms_catalog *cat, const char *name);
extern ms_object *ms_cat_trigger(ms_catalog *cat, const char *name);
extern ms_object *ms_cat_of_table(ms_catalog *cat, const char *table);
/* ms_cat_add: an object the replica made, which the catalog now has too */
extern int	ms_cat_add(ms_ctx *c, ms_catalog *cat, const char *type, const char *name, const char *tbl,
					   const char *sql, bool made);
/*
 * ms_ddl: one statement of the replica's that changes the file's objects;
 * the catalog, which the caller keeps in step, takes the schema's new
 * version; one that fails may have done anything: the catalog is read again.
 */
extern int	ms_ddl(ms_ctx *c, const char *sql);
/* ms_table_made: a table the replica made (from: renamed from); ms_table_unmade: one it dropped */
extern int	ms_table_made(ms_ctx *c, const char *name, const char *from);
extern int	ms_table_unmade(ms_ctx *c, const char *name);
/* ms_key_parts: parse a canonical key into its parts (arena); -1 when not canonical. */
extern int	ms_key_parts(ms_ctx *c, const char *key, size_t len, const char ***parts, size_t **lens);
/* ms_bind_key: bind a canonical key's parts from parameter first; SQLITE_OK or error. */
extern int	ms_bind_key(ms_ctx *c, sqlite3_stmt *st, int first, const ms_tbl *t,
						const char *key, size_t len);
/* ms_column_key: the canonical key of the row's key columns at columns first.. of st. */
extern int	ms_column_key(ms_ctx *c, sqlite3_stmt *st, int first, int n, ms_buf *out);
/* ms_key_append / ms_key_append_int: one part of a canonical key (key.h), appended */
extern void ms_key_append(ms_buf *out, const char *part, size_t n);
extern void ms_key_append_int(ms_buf *out, sqlite3_int64 v);

/* ---- codec.c --------------------------------------------------------- */

typedef struct ms_val
{
	int			type;			/* SQLITE_NULL, _INTEGER, _FLOAT, _TEXT, _BLOB */
	sqlite3_int64 i;
	double		d;
	const char *p;
	size_t		n;
} ms_val;

/*
 * ms_row_decode: one row of t, in t's codec, into vals[t->ncols] (absent
 * columns NULL).  scratch holds at least len + 1 bytes: unescaped strings
 * and blobs point into it.  false, with the reason, when it cannot.
 */
extern bool ms_row_decode(const ms_tbl *t, const uint8_t *row, size_t len, ms_val *vals,
						  char *scratch, char reason[MS_REASON_MAX]);
/* ms_row_key: the canonical key of decoded values; false when a key value is NULL. */
extern bool ms_row_key(const ms_tbl *t, const ms_val *vals, ms_buf *out);

/*
 * ms_row_encode: encode the columns cols[0..n) of t, read from st's result
 * columns 0..n, in t's codec.  false, with the reason, when a value cannot
 * be written in it.
 */
extern bool ms_row_encode(const ms_tbl *t, sqlite3_stmt *st, const int *cols, int n,
						  ms_buf *out, char reason[MS_REASON_MAX]);

/* ms_json_valid: whether bytes are one JSON value (RFC 8259), nothing around. */
extern bool ms_json_valid(const char *p, size_t n);

/* ---- letgo.c --------------------------------------------------------- */

typedef enum ms_letgo_result
{
	MS_LET_GO,					/* deleted */
	MS_RETIRED,					/* kept, retired: something that stays points at it */
	MS_KEPT,					/* kept: a record of its own with a pending note */
	MS_ABSENT					/* no such row */
} ms_letgo_result;

typedef struct ms_letgo ms_letgo;
extern int	ms_letgo_open(ms_ctx *c, ms_letgo **lg);
extern void ms_letgo_close(ms_letgo *lg);
/* ms_let_go: let go of one row of t: delete it or retire it. */
extern int	ms_let_go(ms_letgo *lg, ms_tbl *t, const char *key, size_t len, ms_letgo_result *res);
/* ms_let_go_retired: let go for good of retired rows nothing points at, children first. */
extern int	ms_let_go_retired(ms_letgo *lg, int *count);
/* ms_let_go_due: whether a retired row exists anywhere (what ms_let_go_retired asks first). */
extern int	ms_let_go_due(ms_letgo *lg, bool *yes);

/* ---- evolve.c -------------------------------------------------------- */

/*
 * ms_evolve_apply: a Down's let_go, then its schema (docs/protocol.md 5.3),
 * before its rows; c->schema is the new one after.  What it did is appended
 * to out as the result's "schema" member (nothing when the Down carries no
 * change).  A change that fails is reported there and absorbed.
 */
extern int	ms_evolve_apply(ms_ctx *c, const Sync__Down *d, ms_buf *out);

/*
 * ms_unique_make_room: an upsert of t (decoded vals, canonical key) that a
 * unique index which travels refused: the other rows holding its values
 * take NULL in the index's columns (their change is on its way).  *made:
 * whether any did; never for a record table (a row may be the replica's own).
 */
extern int	ms_unique_make_room(ms_ctx *c, const ms_tbl *t, const ms_val *vals, const char *key,
								size_t keylen, bool *made);

/*
 * ms_evolve_again: the rows a Filed answer names as not filed, written in
 * a schema the replica has been sent a change of since: their notes no
 * longer wait for that send, and go up again.
 */
extern int	ms_evolve_again(ms_ctx *c, const Sync__Filed *f);

/* ---- sends.c --------------------------------------------------------- */

/* ms_sends_ensure: create the tables of sends.c when the file lacks them (a file of an older build). */
extern int	ms_sends_ensure(ms_ctx *c);
/* ms_send_seq: the next send number of the lane ("" the first), recorded as its last. */
extern int	ms_send_seq(ms_ctx *c, const char *lane, uint64_t *seq);
/* ms_send_carried: what an upload carried of each table, for its answer to account for. */
extern int	ms_send_carried(ms_ctx *c, const uint8_t send_id[MS_SEND_ID_BYTES], const Sync__Up *up);
/* range.c: the server's RangeAsks kept from a Filed answer, answered by the next upload */
extern int	ms_range_asked(ms_ctx *c, const Sync__Filed *f);
extern int	ms_range_answers(ms_ctx *c, Sync__Up *up);

/* ms_apply_filed: a Filed answer (sync_apply, outside the chain). */
extern int	ms_apply_filed(ms_ctx *c, Sync__ToReplica *m, ms_buf *out);

/* ---- lanes.c --------------------------------------------------------- */

/* ms_tbl_lane: the lane the table's Table says ("" the first). */
extern const char *ms_tbl_lane(const ms_tbl *t);
/* ms_lane_last, ms_lane_set_last: a lane's last send number (at_least: never lowered). */
extern int	ms_lane_last(ms_ctx *c, const char *lane, uint64_t *last);
extern int	ms_lane_set_last(ms_ctx *c, const char *lane, uint64_t last, bool at_least);
/* ms_lane_arg: a host's lane argument, checked (lane.h): NULL is the first lane. */
extern int	ms_lane_arg(ms_ctx *c, sqlite3_value *v, const char **lane);
extern int	ms_lanes_register(sqlite3 *db);

/* ---- digest.c -------------------------------------------------------- */

typedef struct ms_table_digest
{
	uint64_t	count;
	uint64_t	fnv;
	uint64_t	values;			/* the sum of its rows' ms_digest_row */
} ms_table_digest;

/* ms_digest_table: count and FNV-1a of what the replica holds of t, and its values digest. */
extern int	ms_digest_table(ms_ctx *c, const ms_tbl *t, ms_table_digest *d);

/* ---- counted.c ------------------------------------------------------- */

/* ms_digest_counted: whether t's column i counts in a row's hash (not owned, not retired) */
extern bool ms_digest_counted(const ms_tbl *t, int i);

#define MS_COUNTED_VALUES 1		/* each row's hash (ms_digest_row) given too */

/* one row a digest counts: its canonical key and (MS_COUNTED_VALUES) its hash; not SQLITE_OK stops */
typedef int (*ms_counted_row) (void *arg, const char *key, size_t len, uint64_t hash);

/*
 * ms_counted_walk: each row of t a digest counts (not retired, no NULL key
 * part, its key neither retired nor refused), given to row in the order
 * SQLite finds them (rowid order, not key order).  keys: NULL, or
 * a buffer each row's key is appended to and left in (one after the other,
 * with no separator: row sees where each ends from keys->len).
 */
extern int	ms_counted_walk(ms_ctx *c, const ms_tbl *t, unsigned flags, ms_buf *keys,
							ms_counted_row row, void *arg);

/*
 * ms_counted_one: one row's canonical key (into key, emptied first) and
 * ms_digest_row hash, from its key parts then its counted values, as the
 * walk reads them; false when a key part is NULL or out of memory (key->oom).
 */
extern bool ms_counted_one(const ms_tbl *t, int argc, sqlite3_value **argv, ms_buf *key, uint64_t *hash);

/* ms_counted_register: _sync_counted, the walk's own function (a host's call of it does nothing) */
extern int	ms_counted_register(sqlite3 *db);

/* ms_counted_room: a sqlite3_malloc'd array of n entries of size, with room for one more (NULL: none, arr kept) */
extern void *ms_counted_room(void *arr, size_t size, size_t n, size_t *cap);

/* ---- vsum.c: each table's values digest kept as rows are written ------- */

/* ms_vsum_ensure: _sync_vsum, which the noting triggers name (ddl.c makes it before them) */
extern int	ms_vsum_ensure(ms_ctx *c);

/* ms_vsum_get: whether t's values digest may be the sum kept (*kept), and that sum */
extern int	ms_vsum_get(ms_ctx *c, const ms_tbl *t, bool *kept, uint64_t *sum);

/* ms_vsum_put: after a digest of t: walked whole (its sum and rows stored fresh), or the kept sum used once more */
extern int	ms_vsum_put(ms_ctx *c, const ms_tbl *t, bool walked, uint64_t sum, uint64_t rows);

/* ms_vsum_stale: the sum of table (NULL: every table) to be walked again at the next digest */
extern int	ms_vsum_stale(ms_ctx *c, const char *table);

/*
 * ms_vsum_before / ms_vsum_after: around a message's writes (sync_apply):
 * the old rows' hashes out of the sums kept, then the new rows' in (or the
 * sums it may change made stale); after frees what before made, and passes
 * a failed rc through
 */
typedef struct ms_vsum ms_vsum;
extern int	ms_vsum_before(ms_ctx *c, const Sync__ToReplica *m, ms_vsum **out);
extern int	ms_vsum_after(ms_ctx *c, ms_vsum *v, int rc);

/* ---- shared helpers ---------------------------------------------------- */

/* ms_own_origin: whether an origin value names this replica. */
extern bool ms_own_origin(ms_ctx *c, sqlite3_value *v);

/* ---- reach.c ----------------------------------------------------------- */

/* ms_reach_untrigger: the foreign-key triggers dropped, before the tables they read change. */
extern int	ms_reach_untrigger(ms_ctx *c);
/* ms_reach_trigger: the foreign-key triggers of c->schema made (again). */
extern int	ms_reach_trigger(ms_ctx *c);
/* ms_reach_ensure: made when the file lacks them (a file of an earlier build). */
extern int	ms_reach_ensure(ms_ctx *c);
/* ms_reach_notes_ensure: _sync_notes.written_after, added to a file of an earlier build. */
extern int	ms_reach_notes_ensure(ms_ctx *c);
/* ms_reach_date: notes not dated yet take the last message applied; before a message applies. */
extern int	ms_reach_date(ms_ctx *c);
/* ms_reach_since: what an upload says in Up.unfiled_since. */
extern int	ms_reach_since(ms_ctx *c, uint64_t *since);

/* ---- wish.c ------------------------------------------------------------ */

/* ms_wishes_ensure: _sync_wishes, made when missing. */
extern int	ms_wishes_ensure(ms_ctx *c);
/* ms_wish_receive: a Down's wishes kept, each once; a newer one supersedes the pending. */
extern int	ms_wish_receive(ms_ctx *c, const Sync__Down *d);
/*
 * ms_wish_decide: the pending wishes applied or declined, and the fates not
 * yet answered into up; *due: one of them makes the upload worth sending
 * alone (never carried, or carried resend_after ago).
 */
extern int	ms_wish_decide(ms_ctx *c, Sync__Up *up, int64_t resend_after, bool *due);
/* ms_wish_carried: the fates up carries stamped with its send, as the upload goes. */
extern int	ms_wish_carried(ms_ctx *c, const Sync__Up *up, const uint8_t send_id[MS_SEND_ID_BYTES]);
/* ms_wish_filed: a Filed answer for this send: the fates it carried are answered. */
extern int	ms_wish_filed(ms_ctx *c, const uint8_t send_id[MS_SEND_ID_BYTES]);
/* ms_wish_progress: the table's wishes as sync_progress says them (",\"wishes\":[...]"), or nothing. */
extern int	ms_wish_progress(ms_ctx *c, const char *table, ms_buf *out);

#endif
