/*
 * msgs.h - building the server's messages in tests: schemas, Down bodies,
 * chained and sealed ToReplica messages (with src/shared's ms_head_pack and
 * ms_body_pack, as the server writes them), rows in both codecs.
 *
 * Everything built is owned by a list that tm_free_all() frees, so a test
 * builds freely and frees once.
 */
#ifndef MS_TEST_MSGS_H
#define MS_TEST_MSGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sync.pb-c.h"
#include "seal.h"
#include "sign.h"
#include "wire.h"

/* A message's bytes. */
typedef struct tm_msg
{
	uint8_t    *data;
	size_t		len;
} tm_msg;

/* A test's server, as one replica sees it: an epoch and the chain. */
typedef struct tm_server
{
	uint8_t		epoch[16];
	uint8_t		replica[16];
	uint64_t	number;			/* the last number given out */
	uint8_t		nonce[16];		/* its nonce */
	uint64_t	draws;			/* nonces are drawn deterministically */
	uint64_t	generation;		/* the generation its messages carry (0: none) */
	uint64_t	clock;			/* the clock its messages carry (0: none) */
	/*
	 * Its messages are signed with the vectors' key (tm_server_key), as a
	 * server signs them (docs/protocol.md 2.4), unless unsigned; key_xor:
	 * with another key (its seed's first byte xor'd with it)
	 */
	bool		unsigned_messages;
	uint8_t		key_xor;
} tm_server;

extern void *tm_alloc(size_t n);	/* zeroed, freed by tm_free_all */
extern char *tm_strdup(const char *s);
extern void tm_free_all(void);

extern void tm_server_init(tm_server *s, uint8_t epoch_seed, uint8_t replica_seed);
/* tm_replica_text: the replica's uuid as text (a static buffer per server). */
extern const char *tm_replica_text(const tm_server *s);

/*
 * tm_table: a Table.  cols: "id INTEGER, name TEXT, note TEXT owned" (a
 * column per comma: name, type, then words: owned, notnull, server=type,
 * field=N, id=N); fields are
 * numbered 1, 2, ... in order.  key: "id" or "a,b".
 */
extern Sync__Table *tm_table(const char *name, const char *mirror, const char *codec,
							 const char *key, const char *cols);
extern void tm_fk(Sync__Table *t, const char *cols, const char *parent, const char *refs);
extern void tm_retired(Sync__Table *t, const char *column);
extern void tm_origin(Sync__Table *t, const char *column);
/* schema changes: the table's id and its columns' (1, 2, ... unless "id=N"; the retired column none) */
extern void tm_ids(Sync__Table *t, uint32_t id);
extern void tm_unique(Sync__Table *t, const char *name, const char *cols);
extern void tm_fill(Sync__Table *t, const void *row, long len);	/* len -1: strlen */
extern void tm_change(Sync__Down *d, Sync__Table *t);	/* Down.schema */
extern void tm_let_go(Sync__Down *d, const char *table);	/* Down.let_go */

/* A Down, with a Begin when schema is given (n >= 0). */
extern Sync__Down *tm_down(void);
extern Sync__Down *tm_begin(Sync__Table **schema, int n);
/* tm_rows: the Rows of a table in d (added at the end when absent). */
extern Sync__Rows *tm_rows(Sync__Down *d, const char *table);
/* tm_upsert: a row (len -1: strlen) with its key parts (NULL-terminated list). */
extern void tm_upsert(Sync__Rows *r, const void *row, long len, ...);
extern void tm_delete(Sync__Rows *r, ...);
extern void tm_replace(Sync__Rows *r, ...);	/* the key of an upsert that replaces the copy whole */
extern Sync__Key *tm_key(const char *first, ...);

extern Sync__EndSnapshot *tm_end(const char *first, ...);	/* NULL-terminated table names */
extern Sync__Filed *tm_filed(const uint8_t send_id[16], uint32_t rows);
extern void tm_filed_refuse(Sync__Filed *f, const char *table, Sync__Key *key, const char *reason);
/* tm_filed_drop / tm_filed_keep: a row of the answer dropped, or kept in the server's inbox */
extern void tm_filed_drop(Sync__Filed *f, const char *table, Sync__Key *key, const char *reason);
extern void tm_filed_keep(Sync__Filed *f, const char *table, Sync__Key *key, const char *reason);
/* tm_filed_table: what became of the rows of one table of the send */
extern void tm_filed_table(Sync__Filed *f, const char *table, uint32_t filed, uint32_t refused,
						   uint32_t dropped, uint32_t waiting, uint32_t set_aside);
/* tm_filed_all: the answer of an upload every row of which was filed */
extern Sync__Filed *tm_filed_all(const Sync__Up *u);

/* tm_next: the next message of the chain (down or end), sealed. */
extern tm_msg tm_next(tm_server *s, Sync__Down *down, Sync__EndSnapshot *end);
/* tm_seal: HMAC-SHA256 of the message's seal input (seal.c), as the server's ms_seal. */
extern void tm_seal(const uint8_t *secret, size_t secret_len, const uint8_t replica[MS_REPLICA_BYTES],
					const uint8_t epoch[MS_EPOCH_BYTES], uint64_t number,
					const uint8_t nonce[MS_NONCE_BYTES], uint8_t out[MS_SEAL_BYTES]);

/* tm_server_key: the public key the pretend server signs with (the vectors': ms_vector_sign_public_hex). */
extern void tm_server_key(uint8_t out[MS_SIGN_KEY_BYTES]);
/* tm_sign: the Ed25519 signature of head and body (seal.c), by the key whose seed's first byte is xor'd with seed_xor */
extern void tm_sign(const uint8_t *head, size_t head_len, const uint8_t *body, size_t body_len, uint8_t seed_xor,
					uint8_t out[MS_SIGNATURE_BYTES]);

/* tm_message: a message with the head given in full. */
extern tm_msg tm_message(const tm_server *s, uint32_t protocol, uint64_t number, const uint8_t *nonce,
						 uint64_t previous, const uint8_t *previous_nonce,
						 Sync__Down *down, Sync__EndSnapshot *end, Sync__Filed *filed);
extern tm_msg tm_filed_msg(const tm_server *s, Sync__Filed *f);

/* proto rows: fields appended to a buffer */
typedef struct tm_buf
{
	uint8_t		data[4096];
	size_t		len;
} tm_buf;
extern void tm_pb_int(tm_buf *b, uint32_t field, int64_t v);
extern void tm_pb_double(tm_buf *b, uint32_t field, double v);
extern void tm_pb_bytes(tm_buf *b, uint32_t field, const void *p, size_t n);
extern void tm_pb_raw(tm_buf *b, const void *p, size_t n);

/* ---- database helpers (need sqlite3) ---------------------------------- */
#include <sqlite3.h>

/*
 * tm_checksum: FNV-1a over the schema and every row of every table (with
 * the _sync_ tables when state is true, else only the replica's own).
 */
extern uint64_t tm_checksum(sqlite3 *db, int state);

/* tm_apply: SELECT sync_apply(?): the result (tm-owned) or NULL; tm_error() says why. */
extern char *tm_apply(sqlite3 *db, tm_msg m);
/* tm_upload: SELECT sync_upload(): its bytes, {NULL, 0} when NULL or an error. */
extern tm_msg tm_upload(sqlite3 *db);
extern const char *tm_error(void);

/*
 * tm_shop: the tests' schema (out has 4 entries):
 *   customers  catalog json   key id         id, name, vip
 *   products   catalog json   key id         id, name, price, stock (owned), retired_at (retired)
 *   orders     record  json   key origin,id  origin, id, customer -> customers, total, note
 *   sales      record  proto  key origin,id  origin, id, product -> products, qty, price, memo, photo
 */
extern void tm_shop(Sync__Table *out[4]);

/*
 * tm_shop_snapshot: a snapshot of the shop, in two messages (Begin with
 * customers 1, 2 and products 1, 2, 3; then EndSnapshot of all four).
 */
extern void tm_shop_snapshot(tm_server *s, tm_msg *begin, tm_msg *end);

#endif
