/*
 * apply_chain.c - libFuzzer target: sync_apply over messages that follow
 * the chain, correctly numbered and sealed (tests/sqlite/msgs.c builds them
 * as the server does), whose rows come from the fuzzer: the checks of the
 * chain pass, so the decoders behind it (codec.c's json and proto readers,
 * keys, the schema, letting go, Filed answers, sync_upload) are reached.
 *
 * Every run starts from an in-memory replica where a snapshot's Begin, with
 * the schema the input's first byte picks (no rows), applied; the run's
 * messages follow it in a transaction rolled back at the end (sync_apply
 * works in a savepoint of it).  The input is read as a program:
 *
 *   input   := variant command*        variant: the first snapshot's schema
 *   command := op (byte % 10) and what it reads:
 *     0, 1  upsert   table mode [id origin] row   a row into the Down being built
 *     2     delete   table keyspec
 *     3     replace  table keyspec                 (Rows.replaces)
 *     4     send     the Down so far goes; the next one begins
 *     5     end      the Down so far goes, then an EndSnapshot of the tables
 *                    in a mask byte (0: all)
 *     6     upload   sync_upload(), then its Filed answer refusing row i when
 *                    bit i of a byte is set (bit 7: answered twice)
 *     7     write    a host's own write: which (byte), then its values
 *     8     begin    the Down so far goes; the next is a Begin of variant (byte)
 *     9     lose     the Down so far is numbered and never arrives
 *   table   := byte % (tables + 2): one of the schema's, "ghost" (held by
 *              none), or a name read from the input
 *   mode    := byte: bit 0 raw row bytes (else built from the schema's
 *              columns, values chosen by the input); bit 1 raw key parts
 *              (else the key is the row's own, from id and origin bytes)
 *   keyspec := byte: bit 0 raw parts, else id and origin bytes
 * What is left when the input ends goes as a last message.
 *
 * Properties, any failure a finding (abort):
 *   - sync_apply gives an error or a result, never a crash, leak or UB;
 *   - an error changes nothing (every table, the _sync_ ones too);
 *   - a result that applies nothing changes no row of the replica's tables;
 *   - while the chain is whole (nothing lost, nothing refused since the
 *     last Begin), every message applies: it is never a gap;
 *   - what sync_upload returns decodes as an Up (ms_up_decode);
 *   - at the end sync_digest() and sync_upload() still work.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "chain_values.h"
#include "fuzz.h"
#include "msgs.h"
#include "wire.h"

extern int	sqlite3_magicsyncsqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api);

#define MAX_TABLES 4
#define OTHER_ORIGIN "0b8e9b2c-1a86-4a43-9f0b-1c5d4bf5f0d1"

/*
 * grow: room for element n of an array of n (tm-owned, freed with the run):
 * its capacity is the power of two at or above n, so growing copies little
 */
static void *
grow(void *old, size_t n, size_t elem)
{
	void	   *p;

	if (n != 0 && (n < 4 || (n & (n - 1)) != 0))
		return old;
	p = tm_alloc(elem * (n < 4 ? 4 : 2 * n));
	if (n)
		memcpy(p, old, elem * n);
	return p;
}

typedef struct run
{
	sqlite3    *db;
	fz			in;
	tm_server	s;
	Sync__Table *schema[MAX_TABLES];
	int			ntables;
	Sync__Down *down;			/* the Down being built */
	bool		whole;			/* the chain is whole: every message must apply */
	bool		begun;			/* a Begin applied */
} run;

/* ---- schemas ------------------------------------------------------------ */

/*
 * the variants of the shop: as it is; customers with a column more;
 * without products; orders keyed by id alone and sales in json
 */
static int
schema_variant(Sync__Table **out, int v)
{
	tm_shop(out);
	switch (v % 4)
	{
		case 1:
			out[0] = tm_table("customers", "catalog", "json", "id", "id INTEGER, name TEXT, vip INTEGER, city TEXT");
			return 4;
		case 2:
			out[1] = out[2];
			out[2] = out[3];
			return 3;
		case 3:
			out[2] = tm_table("orders", "record", "json", "id",
							  "origin TEXT server=uuid, id INTEGER, customer INTEGER, total REAL, note TEXT");
			tm_origin(out[2], "origin");
			tm_fk(out[2], "customer", "customers", "id");
			out[3] = tm_table("sales", "record", "json", "origin,id",
							  "origin TEXT server=uuid, id INTEGER, product INTEGER, qty INTEGER, price REAL, memo TEXT, photo BLOB");
			tm_origin(out[3], "origin");
			tm_fk(out[3], "product", "products", "id");
			return 4;
		default:
			return 4;
	}
}

/* ---- applying, and what must hold ---------------------------------------- */

/*
 * checksum: tm_checksum's (tests/sqlite/msgs.c) FNV-1a over the schema and
 * every row of every table, with and without the _sync_ ones, with its
 * statements kept per connection: preparing them again for every message
 * would be most of a run's time
 */
typedef struct cached
{
	sqlite3    *db;
	char	   *name;
	sqlite3_stmt *st;
} cached;

static cached cache[256];
static int	ncache;

static sqlite3_stmt *
cached_stmt(sqlite3 *db, const char *name)
{
	char	   *sql;
	sqlite3_stmt *st = NULL;

	for (int i = 0; i < ncache; i++)
		if (cache[i].db == db && strcmp(cache[i].name, name) == 0)
			return cache[i].st;
	FZ_CHECK(ncache < (int) (sizeof cache / sizeof cache[0]), "too many tables to keep statements for");
	sql = sqlite3_mprintf(name[0] ? "SELECT * FROM \"%w\" ORDER BY 1, 2" :
						  "SELECT name, coalesce(sql, ''), tbl_name FROM sqlite_master ORDER BY name", name);
	if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK)
	{
		sqlite3_free(sql);
		sql = sqlite3_mprintf("SELECT * FROM \"%w\" ORDER BY 1", name);
		if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK)
			st = NULL;
	}
	sqlite3_free(sql);
	if (st == NULL)
		return NULL;			/* not kept: a table of this run only, made and gone */
	cache[ncache].db = db;
	cache[ncache].name = strdup(name);
	cache[ncache++].st = st;
	return st;
}

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
	{
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* checksum: both at once, in one pass: *all with the _sync_ tables, *rows without */
static void
checksum(sqlite3 *db, uint64_t *all, uint64_t *rows)
{
	sqlite3_stmt *tables = cached_stmt(db, "");

	*all = *rows = 0xcbf29ce484222325ULL;
	FZ_CHECK(tables != NULL, "cannot read sqlite_master");
	while (sqlite3_step(tables) == SQLITE_ROW)
	{
		const char *name = (const char *) sqlite3_column_text(tables, 0);
		const char *sql = (const char *) sqlite3_column_text(tables, 1);
		bool		ours = strncmp((const char *) sqlite3_column_text(tables, 2), "_sync_", 6) == 0;
		uint64_t	h = *all;
		uint64_t	r = *rows;
		sqlite3_stmt *st;

		h = fnv(h, name, strlen(name) + 1);
		h = fnv(h, sql, strlen(sql) + 1);
		if (!ours)
		{
			r = fnv(r, name, strlen(name) + 1);
			r = fnv(r, sql, strlen(sql) + 1);
		}
		if (strncmp(sql, "CREATE TABLE", 12) == 0 && (st = cached_stmt(db, name)) != NULL)
		{
			while (sqlite3_step(st) == SQLITE_ROW)
				for (int i = 0; i < sqlite3_column_count(st); i++)
				{
					int			type = sqlite3_column_type(st, i);
					const void *p = sqlite3_column_blob(st, i);
					size_t		n = (size_t) sqlite3_column_bytes(st, i);

					h = fnv(fnv(h, &type, sizeof type), p, n);
					if (!ours)
						r = fnv(fnv(r, &type, sizeof type), p, n);
				}
			sqlite3_reset(st);
		}
		*all = h;
		*rows = r;
	}
	sqlite3_reset(tables);
}

static char *
apply_bytes(sqlite3 *db, tm_msg m, char *err, size_t errlen)
{
	sqlite3_stmt *st;
	char	   *out = NULL;

	err[0] = '\0';
	if (sqlite3_prepare_v2(db, "SELECT sync_apply(?1)", -1, &st, NULL) != SQLITE_OK)
		fz_finding("cannot prepare sync_apply: %s", sqlite3_errmsg(db));
	sqlite3_bind_blob(st, 1, m.len ? (const void *) m.data : "", (int) m.len, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		out = tm_strdup((const char *) sqlite3_column_text(st, 0));
	else
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return out;
}

/* FUZZ_TRACE=1 in the environment: every message's result on stderr */
static bool
tracing(void)
{
	static int	on = -1;

	if (on < 0)
		on = getenv("FUZZ_TRACE") != NULL;
	return on;
}

static void
apply_checked(run *r, tm_msg m, bool begins)
{
	uint64_t	all,
				rows,
				all_after,
				rows_after;
	char		err[512];
	char	   *res;

	checksum(r->db, &all, &rows);
	res = apply_bytes(r->db, m, err, sizeof err);

	if (tracing())
		fprintf(stderr, "apply %zu bytes: %s%s\n", m.len, res ? res : "error: ", res ? "" : err);

	if (res == NULL)
	{
		FZ_CHECK(err[0] != '\0', "sync_apply failed without a message");
		checksum(r->db, &all_after, &rows_after);
		FZ_CHECK(all_after == all, "an error changed the replica: %s", err);
		r->whole = false;
		return;
	}
	if (strstr(res, "\"result\":\"applied\"") != NULL || strstr(res, "\"result\":\"filed\"") != NULL)
	{
		if (begins)
		{
			r->begun = true;
			r->whole = true;
		}
		return;
	}
	checksum(r->db, &all_after, &rows_after);
	FZ_CHECK(rows_after == rows, "%s, yet rows changed", res);
	FZ_CHECK(!r->whole || !r->begun, "a message of a whole chain did not apply: %s", res);
	r->whole = false;
}

/* send: the Down being built goes (lost: numbered, never applied) */
static void
send(run *r, bool lost)
{
	Sync__Down *d = r->down;
	tm_msg		m;

	if (d == NULL)
		return;
	r->down = NULL;
	m = tm_next(&r->s, d, NULL);
	if (lost)
	{
		r->whole = false;
		return;
	}
	apply_checked(r, m, d->begin != NULL);
}

static Sync__Down *
down(run *r)
{
	if (r->down == NULL)
		r->down = tm_down();
	return r->down;
}

static void
end(run *r)
{
	uint8_t		mask = fz_byte(&r->in);
	Sync__EndSnapshot *e = tm_end(NULL);

	send(r, false);
	for (int i = 0; i < r->ntables; i++)
		if (mask == 0 || (mask & (1u << i)))
		{
			e->tables = grow(e->tables, e->n_tables, sizeof(char *));
			e->tables[e->n_tables++] = r->schema[i]->name;
		}
	apply_checked(r, tm_next(&r->s, NULL, e), false);
}

static void
begin(run *r, int variant)
{
	send(r, false);
	r->ntables = schema_variant(r->schema, variant);
	r->down = tm_begin(r->schema, r->ntables);
}

/* ---- rows from the input ----------------------------------------------------- */

static bool
is_key(const Sync__Table *t, const char *name)
{
	for (size_t i = 0; i < t->n_key; i++)
		if (strcmp(t->key[i], name) == 0)
			return true;
	return false;
}

/* a key: the id and origin the input picks, as the row's key columns say them */
typedef struct keyvals
{
	char		id[24];
	const char *origin;
} keyvals;

static void
pick_key(run *r, keyvals *k)
{
	snprintf(k->id, sizeof k->id, "%d", fz_byte(&r->in) % 8);
	k->origin = fz_byte(&r->in) % 2 ? OTHER_ORIGIN : tm_replica_text(&r->s);
}

static const char *
key_value(const Sync__Table *t, const keyvals *k, const char *col)
{
	return t->origin && strcmp(col, t->origin) == 0 ? k->origin : k->id;
}

static Sync__Key *
key_of(const Sync__Table *t, const keyvals *k)
{
	Sync__Key  *key = tm_key(NULL);

	key->parts = tm_alloc(sizeof(char *) * (t->n_key + 1));
	for (size_t i = 0; i < t->n_key; i++)
		key->parts[key->n_parts++] = tm_strdup(key_value(t, k, t->key[i]));
	return key;
}

/* raw parts: a count, then each part's bytes (a NUL ends a C string early) */
static Sync__Key *
raw_key(run *r)
{
	Sync__Key  *key = tm_key(NULL);
	int			n = 1 + fz_byte(&r->in) % 3;

	key->parts = tm_alloc(sizeof(char *) * (size_t) n);
	for (int i = 0; i < n; i++)
	{
		const uint8_t *p;
		size_t		len = fz_bytes(&r->in, 24, &p);
		char	   *part = tm_alloc(len + 1);

		memcpy(part, p, len);
		key->parts[key->n_parts++] = part;
	}
	return key;
}

/* the key columns' values in the row's codec */
static void
key_column(text *out, const Sync__Table *t, const Sync__Column *c, const keyvals *k, bool proto)
{
	const char *v = key_value(t, k, c->name);

	if (proto)
	{
		if (strcmp(c->type, "INTEGER") == 0)
		{
			int64_t		i = atoll(v);

			chain_pb_varint(out, (uint64_t) c->field << 3);
			chain_pb_varint(out, ((uint64_t) i << 1) ^ (uint64_t) (i >> 63));
		}
		else
		{
			chain_pb_varint(out, (uint64_t) c->field << 3 | 2);
			chain_pb_varint(out, strlen(v));
			chain_puts(out, v);
		}
		return;
	}
	if (strcmp(c->type, "INTEGER") == 0)
		chain_puts(out, v);
	else
	{
		chain_puts(out, "\"");
		chain_puts(out, v);
		chain_puts(out, "\"");
	}
}

/* a row of t from the input: each column present or not, of a kind the input says */
static void
built_row(run *r, const Sync__Table *t, const keyvals *k, text *out)
{
	bool		proto = strcmp(t->codec, "proto") == 0;
	bool		first = true;

	if (!proto)
		chain_puts(out, "{");
	for (size_t i = 0; i < t->n_columns; i++)
	{
		const Sync__Column *c = t->columns[i];
		uint8_t		b = is_key(t, c->name) ? 1 : fz_byte(&r->in);

		if ((b & 7) == 0 || (proto && c->field == 0))
			continue;
		if (!proto)
		{
			if (!first)
				chain_puts(out, ",");
			first = false;
			chain_puts(out, "\"");
			chain_puts(out, c->name);
			chain_puts(out, "\":");
		}
		if (is_key(t, c->name))
			key_column(out, t, c, k, proto);
		else if (proto)
			chain_proto_value(out, &r->in, c, b >> 3);
		else
			chain_json_value(out, &r->in, c, b >> 3);
	}
	if (!proto)
		chain_puts(out, "}");
}

/* table: one of the schema's (NULL for the others), and the name it goes by */
static const Sync__Table *
table(run *r, const char **name)
{
	int			i = fz_byte(&r->in) % (r->ntables + 2);

	if (i < r->ntables)
	{
		*name = r->schema[i]->name;
		return r->schema[i];
	}
	if (i == r->ntables)
		*name = "ghost";
	else
	{
		const uint8_t *p;
		size_t		n = fz_bytes(&r->in, 20, &p);
		char	   *s = tm_alloc(n + 1);

		memcpy(s, p, n);
		*name = s;
	}
	return NULL;
}

static void
upsert(run *r)
{
	const char *name;
	const Sync__Table *t = table(r, &name);
	uint8_t		mode = fz_byte(&r->in);
	Sync__Rows *rows = tm_rows(down(r), name);
	keyvals		k;
	Sync__Key  *key;
	text	   *row = tm_alloc(sizeof(text));

	pick_key(r, &k);
	if ((mode & 1) || t == NULL)
	{
		const uint8_t *p;
		size_t		n = fz_bytes(&r->in, 255, &p);

		chain_put(row, p, n);
	}
	else
		built_row(r, t, &k, row);
	key = (mode & 2) || t == NULL ? raw_key(r) : key_of(t, &k);
	rows->upserts = grow(rows->upserts, rows->n_upserts, sizeof(ProtobufCBinaryData));
	rows->keys = grow(rows->keys, rows->n_keys, sizeof(Sync__Key *));
	rows->upserts[rows->n_upserts].data = (uint8_t *) row->data;
	rows->upserts[rows->n_upserts++].len = row->len;
	rows->keys[rows->n_keys++] = key;
}

static Sync__Key *
keyspec(run *r, const Sync__Table *t)
{
	uint8_t		b = fz_byte(&r->in);
	keyvals		k;

	if ((b & 1) || t == NULL)
		return raw_key(r);
	pick_key(r, &k);
	return key_of(t, &k);
}

static void
delete_or_replace(run *r, bool replace)
{
	const char *name;
	const Sync__Table *t = table(r, &name);
	Sync__Rows *rows = tm_rows(down(r), name);
	Sync__Key  *key = keyspec(r, t);
	Sync__Key ***list = replace ? &rows->replaces : &rows->deletes;
	size_t	   *n = replace ? &rows->n_replaces : &rows->n_deletes;

	*list = grow(*list, *n, sizeof(Sync__Key *));
	(*list)[(*n)++] = key;
}

/* ---- uploads and the host's own writes -------------------------------------- */

static void
upload(run *r)
{
	uint8_t		refuse = fz_byte(&r->in);
	tm_msg		up = tm_upload(r->db);
	Sync__Up   *u;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	Sync__Filed *f;
	int			n = 0;
	tm_msg		answer;

	if (up.data == NULL)
		return;
	u = ms_up_decode(up.data, up.len, 1u << 30, NULL, &st, reason);
	FZ_CHECK(u != NULL && st == MS_WIRE_OK, "what sync_upload returned does not decode: %s", reason);
	f = tm_filed(u->send_id.data, 0);
	for (size_t i = 0; i < u->n_rows; i++)
		for (size_t j = 0; j < u->rows[i]->n_keys + u->rows[i]->n_deletes; j++, n++)
		{
			Sync__Key  *k = j < u->rows[i]->n_keys ? u->rows[i]->keys[j] : u->rows[i]->deletes[j - u->rows[i]->n_keys];
			Sync__Key  *copy = tm_key(NULL);

			if (!(refuse & (1u << (n % 7))))
			{
				f->rows++;
				continue;
			}
			copy->parts = tm_alloc(sizeof(char *) * (k->n_parts + 1));
			for (size_t p = 0; p < k->n_parts; p++)
				copy->parts[copy->n_parts++] = tm_strdup(k->parts[p]);
			tm_filed_refuse(f, u->rows[i]->table, copy, "the server refused it");
		}
	sync__up__free_unpacked(u, NULL);
	answer = tm_filed_msg(&r->s, f);
	apply_checked(r, answer, false);
	if (refuse & 0x80)
		apply_checked(r, answer, false);
}

static const char *const writes[] = {
	"INSERT OR REPLACE INTO orders(origin, id, customer, total, note) VALUES (?1, ?2, ?3, ?4, ?5)",
	"INSERT OR REPLACE INTO sales(origin, id, product, qty, price, memo, photo) VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)",
	"UPDATE products SET stock = ?3 WHERE id = ?2",
	"DELETE FROM orders WHERE origin = ?1 AND id = ?2",
	"UPDATE sales SET memo = ?5, qty = ?3 WHERE origin = ?1 AND id = ?2",
	"DELETE FROM sales WHERE id = ?2",
	"UPDATE customers SET name = ?5 WHERE id = ?2",
	"INSERT INTO customers(id, name) VALUES (?2, ?5)",
};

/* write: the host writes a row of its own (errors are the host's business) */
static void
write_row(run *r)
{
	sqlite3_stmt *st;
	uint8_t		which = fz_byte(&r->in) % (sizeof writes / sizeof writes[0]);
	uint8_t		b = fz_byte(&r->in);
	const uint8_t *p;
	size_t		n;

	if (sqlite3_prepare_v2(r->db, writes[which], -1, &st, NULL) != SQLITE_OK)
		return;					/* a table this schema has not */
	sqlite3_bind_text(st, 1, b & 1 ? OTHER_ORIGIN : tm_replica_text(&r->s), -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(st, 2, fz_byte(&r->in) % 8);
	sqlite3_bind_int64(st, 3, (int8_t) fz_byte(&r->in));
	sqlite3_bind_double(st, 4, (double) (int8_t) fz_byte(&r->in) / 4);
	n = fz_bytes(&r->in, 40, &p);
	if (b & 2)
		sqlite3_bind_blob(st, 5, p, (int) n, SQLITE_TRANSIENT);
	else
		sqlite3_bind_text(st, 5, (const char *) p, (int) n, SQLITE_TRANSIENT);
	n = fz_bytes(&r->in, 40, &p);
	sqlite3_bind_blob(st, 6, p, (int) n, SQLITE_TRANSIENT);
	sqlite3_step(st);
	sqlite3_finalize(st);
}

/* ---- the target ------------------------------------------------------------------- */

static void
still_works(sqlite3 *db)
{
	char	   *err = NULL;

	if (sqlite3_exec(db, "SELECT sync_digest()", NULL, NULL, &err) != SQLITE_OK)
		fz_finding("sync_digest() no longer works: %s", err);
	if (sqlite3_exec(db, "SELECT sync_upload()", NULL, NULL, &err) != SQLITE_OK &&
		strstr(err, "uuid is unknown") == NULL)
		fz_finding("sync_upload() no longer works: %s", err);
	sqlite3_free(err);
}

/*
 * the replicas every run starts from, one per schema variant: the Begin of
 * a snapshot with that schema applied (message 1, no rows), the snapshot
 * open; a run's messages follow it, and roll back when the run ends
 */
typedef struct base
{
	sqlite3    *db;
	tm_server	s;
} base;

static base *
base_of(int variant)
{
	static base bases[4];
	base	   *b = &bases[variant % 4];
	run			r;

	if (b->db != NULL)
		return b;
	if (sqlite3_open(":memory:", &b->db) != SQLITE_OK)
		abort();
	/* SQLite's small allocations from its lookaside: the run's time goes to our code */
	sqlite3_db_config(b->db, SQLITE_DBCONFIG_LOOKASIDE, NULL, 512, 4096);
	memset(&r, 0, sizeof r);
	r.db = b->db;
	tm_server_init(&r.s, 0x20, 0x10);
	begin(&r, variant);
	send(&r, false);
	FZ_CHECK(r.begun, "the Begin of schema variant %d does not apply", variant);
	b->s = r.s;
	tm_free_all();
	return b;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool registered;
	run			r;
	base	   *b;
	int			variant;

	if (!registered)
	{
		sqlite3_auto_extension((void (*) (void)) sqlite3_magicsyncsqlite_init);
		registered = true;
	}
	memset(&r, 0, sizeof r);
	r.in.p = data;
	r.in.n = size;
	variant = fz_byte(&r.in) % 4;
	b = base_of(variant);
	r.db = b->db;
	r.s = b->s;
	r.ntables = schema_variant(r.schema, variant);
	r.begun = r.whole = true;
	if (sqlite3_exec(r.db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		abort();
	while (r.in.n > 0)
	{
		switch (fz_byte(&r.in) % 10)
		{
			case 0:
			case 1:
				upsert(&r);
				break;
			case 2:
				delete_or_replace(&r, false);
				break;
			case 3:
				delete_or_replace(&r, true);
				break;
			case 4:
				send(&r, false);
				break;
			case 5:
				end(&r);
				break;
			case 6:
				send(&r, false);
				upload(&r);
				break;
			case 7:
				write_row(&r);
				break;
			case 8:
				begin(&r, fz_byte(&r.in));
				break;
			default:
				send(&r, true);
		}
	}
	send(&r, false);
	still_works(r.db);
	if (sqlite3_exec(r.db, "ROLLBACK", NULL, NULL, NULL) != SQLITE_OK)
		abort();
	tm_free_all();
	return 0;
}
