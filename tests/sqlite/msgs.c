/*
 * msgs.c - building the server's messages in tests.  See msgs.h.
 */
#include "msgs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seal.h"

static void **owned;
static size_t nowned;
static size_t capowned;

void *
tm_alloc(size_t n)
{
	void	   *p = calloc(1, n ? n : 1);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	if (nowned == capowned)
	{
		capowned = capowned ? capowned * 2 : 256;
		owned = realloc(owned, sizeof(void *) * capowned);
		if (owned == NULL)
			exit(2);
	}
	owned[nowned++] = p;
	return p;
}

char *
tm_strdup(const char *s)
{
	char	   *p = tm_alloc(strlen(s) + 1);

	memcpy(p, s, strlen(s));
	return p;
}

void
tm_free_all(void)
{
	for (size_t i = 0; i < nowned; i++)
		free(owned[i]);
	free(owned);
	owned = NULL;
	nowned = capowned = 0;
}

/* grow an array of pointers by one */
static void *
push(void *arr, size_t n, size_t elem)
{
	void	   *p = tm_alloc(elem * (n + 1));

	if (n)
		memcpy(p, arr, elem * n);
	return p;
}

void
tm_server_init(tm_server *s, uint8_t epoch_seed, uint8_t replica_seed)
{
	memset(s, 0, sizeof *s);
	for (int i = 0; i < 16; i++)
	{
		s->epoch[i] = (uint8_t) (epoch_seed + i);
		s->replica[i] = (uint8_t) (replica_seed + i);
	}
	s->replica[6] = (uint8_t) ((s->replica[6] & 0x0f) | 0x40);
}

const char *
tm_replica_text(const tm_server *s)
{
	static char out[37];
	static const char hex[] = "0123456789abcdef";
	int			o = 0;

	for (int i = 0; i < 16; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[s->replica[i] >> 4];
		out[o++] = hex[s->replica[i] & 15];
	}
	out[o] = '\0';
	return out;
}

/* split on commas, trimming spaces */
static char **
split(const char *csv, size_t *n)
{
	char	  **out = NULL;
	char	   *copy = tm_strdup(csv);
	char	   *save = NULL;

	*n = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
	{
		while (*tok == ' ')
			tok++;
		for (char *e = tok + strlen(tok); e > tok && e[-1] == ' ';)
			*--e = '\0';
		out = push(out, *n, sizeof(char *));
		out[(*n)++] = tok;
	}
	return out;
}

Sync__Table *
tm_table(const char *name, const char *mirror, const char *codec, const char *key, const char *cols)
{
	Sync__Table *t = tm_alloc(sizeof *t);
	size_t		ncols;
	char	  **defs = split(cols, &ncols);

	sync__table__init(t);
	t->name = tm_strdup(name);
	t->mirror = tm_strdup(mirror);
	t->codec = tm_strdup(codec);
	t->key = split(key, &t->n_key);
	t->n_columns = ncols;
	t->columns = tm_alloc(sizeof(Sync__Column *) * ncols);
	for (size_t i = 0; i < ncols; i++)
	{
		Sync__Column *c = tm_alloc(sizeof *c);
		char	   *save = NULL;
		char	   *w;

		sync__column__init(c);
		c->name = strtok_r(defs[i], " ", &save);
		c->type = strtok_r(NULL, " ", &save);
		c->field = (uint32_t) i + 1;
		c->server_type = "text";
		while ((w = strtok_r(NULL, " ", &save)) != NULL)
		{
			if (strcmp(w, "owned") == 0)
				c->replica_owned = 1;
			else if (strcmp(w, "notnull") == 0)
				c->not_null = 1;
			else if (strncmp(w, "server=", 7) == 0)
				c->server_type = w + 7;
			else if (strncmp(w, "field=", 6) == 0)
				c->field = (uint32_t) atoi(w + 6);
			else if (strncmp(w, "id=", 3) == 0)
				c->id = (uint32_t) atoi(w + 3);
		}
		t->columns[i] = c;
	}
	return t;
}

void
tm_ids(Sync__Table *t, uint32_t id)
{
	t->id = id;
	for (size_t i = 0; i < t->n_columns; i++)
		if (t->columns[i]->id == 0 && strcmp(t->columns[i]->name, t->retired) != 0)
			t->columns[i]->id = (uint32_t) i + 1;
}

void
tm_unique(Sync__Table *t, const char *name, const char *cols)
{
	Sync__Unique *u = tm_alloc(sizeof *u);

	sync__unique__init(u);
	u->name = tm_strdup(name);
	u->columns = split(cols, &u->n_columns);
	t->unique = push(t->unique, t->n_unique, sizeof(Sync__Unique *));
	t->unique[t->n_unique++] = u;
}

void
tm_fill(Sync__Table *t, const void *row, long len)
{
	size_t		n = len < 0 ? strlen(row) : (size_t) len;

	t->fill.data = tm_alloc(n + 1);
	memcpy(t->fill.data, row, n);
	t->fill.len = n;
}

void
tm_change(Sync__Down *d, Sync__Table *t)
{
	d->schema = push(d->schema, d->n_schema, sizeof(Sync__Table *));
	d->schema[d->n_schema++] = t;
}

void
tm_let_go(Sync__Down *d, const char *table)
{
	d->let_go = push(d->let_go, d->n_let_go, sizeof(char *));
	d->let_go[d->n_let_go++] = tm_strdup(table);
}

void
tm_fk(Sync__Table *t, const char *cols, const char *parent, const char *refs)
{
	Sync__ForeignKey *fk = tm_alloc(sizeof *fk);

	sync__foreign_key__init(fk);
	fk->columns = split(cols, &fk->n_columns);
	fk->table = tm_strdup(parent);
	fk->references = split(refs, &fk->n_references);
	t->foreign_keys = push(t->foreign_keys, t->n_foreign_keys, sizeof(Sync__ForeignKey *));
	t->foreign_keys[t->n_foreign_keys++] = fk;
}

void
tm_retired(Sync__Table *t, const char *column)
{
	t->retired = tm_strdup(column);
}

void
tm_origin(Sync__Table *t, const char *column)
{
	t->origin = tm_strdup(column);
}

Sync__Down *
tm_down(void)
{
	Sync__Down *d = tm_alloc(sizeof *d);

	sync__down__init(d);
	return d;
}

Sync__Down *
tm_begin(Sync__Table **schema, int n)
{
	Sync__Down *d = tm_down();

	d->begin = tm_alloc(sizeof(Sync__Begin));
	sync__begin__init(d->begin);
	d->begin->n_schema = (size_t) n;
	d->begin->schema = tm_alloc(sizeof(Sync__Table *) * (size_t) (n + 1));
	for (int i = 0; i < n; i++)
		d->begin->schema[i] = schema[i];
	return d;
}

Sync__Rows *
tm_rows(Sync__Down *d, const char *table)
{
	Sync__Rows *r;

	for (size_t i = 0; i < d->n_tables; i++)
		if (strcmp(d->tables[i]->table, table) == 0)
			return d->tables[i];
	r = tm_alloc(sizeof *r);
	sync__rows__init(r);
	r->table = tm_strdup(table);
	d->tables = push(d->tables, d->n_tables, sizeof(Sync__Rows *));
	d->tables[d->n_tables++] = r;
	return r;
}

static Sync__Key *
key_va(const char *first, va_list ap)
{
	Sync__Key  *k = tm_alloc(sizeof *k);

	sync__key__init(k);
	for (const char *p = first; p != NULL; p = va_arg(ap, const char *))
	{
		k->parts = push(k->parts, k->n_parts, sizeof(char *));
		k->parts[k->n_parts++] = tm_strdup(p);
	}
	return k;
}

Sync__Key *
tm_key(const char *first,...)
{
	va_list		ap;
	Sync__Key  *k;

	va_start(ap, first);
	k = key_va(first, ap);
	va_end(ap);
	return k;
}

void
tm_upsert(Sync__Rows *r, const void *row, long len,...)
{
	va_list		ap;
	size_t		n = len < 0 ? strlen(row) : (size_t) len;
	uint8_t    *copy = tm_alloc(n);
	const char *first;

	memcpy(copy, row, n);
	r->upserts = push(r->upserts, r->n_upserts, sizeof(ProtobufCBinaryData));
	r->upserts[r->n_upserts].data = copy;
	r->upserts[r->n_upserts].len = n;
	r->n_upserts++;
	va_start(ap, len);
	first = va_arg(ap, const char *);
	r->keys = push(r->keys, r->n_keys, sizeof(Sync__Key *));
	r->keys[r->n_keys++] = key_va(first, ap);
	va_end(ap);
}

void
tm_delete(Sync__Rows *r,...)
{
	va_list		ap;
	const char *first;

	va_start(ap, r);
	first = va_arg(ap, const char *);
	r->deletes = push(r->deletes, r->n_deletes, sizeof(Sync__Key *));
	r->deletes[r->n_deletes++] = key_va(first, ap);
	va_end(ap);
}

void
tm_replace(Sync__Rows *r,...)
{
	va_list		ap;
	const char *first;

	va_start(ap, r);
	first = va_arg(ap, const char *);
	r->replaces = push(r->replaces, r->n_replaces, sizeof(Sync__Key *));
	r->replaces[r->n_replaces++] = key_va(first, ap);
	va_end(ap);
}

Sync__EndSnapshot *
tm_end(const char *first,...)
{
	va_list		ap;
	Sync__EndSnapshot *e = tm_alloc(sizeof *e);

	sync__end_snapshot__init(e);
	va_start(ap, first);
	for (const char *p = first; p != NULL; p = va_arg(ap, const char *))
	{
		e->tables = push(e->tables, e->n_tables, sizeof(char *));
		e->tables[e->n_tables++] = tm_strdup(p);
	}
	va_end(ap);
	return e;
}

Sync__Filed *
tm_filed(const uint8_t send_id[16], uint32_t rows)
{
	Sync__Filed *f = tm_alloc(sizeof *f);
	uint8_t    *id = tm_alloc(16);

	sync__filed__init(f);
	memcpy(id, send_id, 16);
	f->send_id.data = id;
	f->send_id.len = 16;
	f->rows = rows;
	return f;
}

void
tm_filed_refuse(Sync__Filed *f, const char *table, Sync__Key *key, const char *reason)
{
	Sync__Refusal *r = tm_alloc(sizeof *r);

	sync__refusal__init(r);
	r->table = tm_strdup(table);
	r->key = key;
	r->reason = tm_strdup(reason);
	f->refused = push(f->refused, f->n_refused, sizeof(Sync__Refusal *));
	f->refused[f->n_refused++] = r;
}

static void
named(Sync__Refusal ***list, size_t *n, const char *table, Sync__Key *key, const char *reason)
{
	Sync__Refusal *r = tm_alloc(sizeof *r);

	sync__refusal__init(r);
	r->table = tm_strdup(table);
	r->key = key;
	r->reason = tm_strdup(reason);
	*list = push(*list, *n, sizeof(Sync__Refusal *));
	(*list)[(*n)++] = r;
}

void
tm_filed_drop(Sync__Filed *f, const char *table, Sync__Key *key, const char *reason)
{
	named(&f->dropped, &f->n_dropped, table, key, reason);
}

void
tm_filed_keep(Sync__Filed *f, const char *table, Sync__Key *key, const char *reason)
{
	named(&f->kept, &f->n_kept, table, key, reason);
}

void
tm_filed_table(Sync__Filed *f, const char *table, uint32_t filed, uint32_t refused,
			   uint32_t dropped, uint32_t waiting, uint32_t set_aside)
{
	Sync__FiledTable *t = tm_alloc(sizeof *t);

	sync__filed_table__init(t);
	t->table = tm_strdup(table);
	t->filed = filed;
	t->refused = refused;
	t->dropped = dropped;
	t->waiting = waiting;
	t->set_aside = set_aside;
	f->tables = push(f->tables, f->n_tables, sizeof(Sync__FiledTable *));
	f->tables[f->n_tables++] = t;
}

Sync__Filed *
tm_filed_all(const Sync__Up *u)
{
	Sync__Filed *f = tm_filed(u->send_id.data, 0);

	for (size_t i = 0; i < u->n_rows; i++)
	{
		uint32_t	n = (uint32_t) (u->rows[i]->n_upserts + u->rows[i]->n_deletes);

		tm_filed_table(f, u->rows[i]->table, n, 0, 0, 0, 0);
		f->rows += n;
	}
	return f;
}

static const uint8_t secret[32] = "magic_sync test secret, 32 bytes";

tm_msg
tm_message(const tm_server *s, uint32_t protocol, uint64_t number, const uint8_t *nonce,
		   uint64_t previous, const uint8_t *previous_nonce,
		   Sync__Down *down, Sync__EndSnapshot *end, Sync__Filed *filed)
{
	uint8_t		seal[MS_SEAL_BYTES];
	ms_head		h;
	tm_msg		m;
	size_t		hn,
				bn;

	if (nonce)
		tm_seal(secret, sizeof secret, s->replica, s->epoch, number, nonce, seal);
	h.protocol = protocol;
	h.epoch = s->epoch;
	h.number = number;
	h.nonce = nonce;
	h.previous = previous;
	h.previous_nonce = previous ? previous_nonce : NULL;
	h.seal = nonce ? seal : NULL;
	h.replica = s->replica;
	h.generation = s->generation;
	h.clock = s->clock;
	hn = ms_head_packed_size(&h);
	bn = ms_body_packed_size(down, end, filed);
	m.len = hn + bn + (s->unsigned_messages ? 0 : MS_SIGNATURE_FIELD_BYTES);
	m.data = tm_alloc(m.len);
	ms_head_pack(&h, m.data);
	if (s->unsigned_messages)
		ms_body_pack(down, end, filed, m.data + hn);
	else
	{
		/* head, signature, body: as the server writes them (record.c, answers.c) */
		uint8_t		sig[MS_SIGNATURE_BYTES];
		uint8_t    *body = m.data + hn + MS_SIGNATURE_FIELD_BYTES;

		ms_body_pack(down, end, filed, body);
		tm_sign(m.data, hn, body, bn, s->key_xor, sig);
		ms_sign_field(sig, m.data + hn);
	}
	return m;
}

tm_msg
tm_next(tm_server *s, Sync__Down *down, Sync__EndSnapshot *end)
{
	uint8_t		nonce[16];
	uint8_t		prev[16];
	uint64_t	previous = s->number;
	tm_msg		m;

	memcpy(prev, s->nonce, 16);
	s->draws++;
	for (int i = 0; i < 16; i++)
		nonce[i] = (uint8_t) (s->draws * 31 + (uint64_t) i * 7 + s->epoch[0]);
	m = tm_message(s, MS_PROTOCOL, s->number + 1, nonce, previous, prev, down, end, NULL);
	s->number++;
	memcpy(s->nonce, nonce, 16);
	return m;
}

tm_msg
tm_filed_msg(const tm_server *s, Sync__Filed *f)
{
	return tm_message(s, MS_PROTOCOL, 0, NULL, 0, NULL, NULL, NULL, f);
}

static void
pb_varint(tm_buf *b, uint64_t v)
{
	do
	{
		uint8_t		byte = (uint8_t) (v & 0x7f);

		v >>= 7;
		if (v)
			byte |= 0x80;
		b->data[b->len++] = byte;
	} while (v);
}

void
tm_pb_int(tm_buf *b, uint32_t field, int64_t v)
{
	pb_varint(b, (uint64_t) field << 3);
	pb_varint(b, ((uint64_t) v << 1) ^ (uint64_t) (v >> 63));
}

void
tm_pb_double(tm_buf *b, uint32_t field, double v)
{
	uint64_t	u;

	memcpy(&u, &v, 8);
	pb_varint(b, (uint64_t) field << 3 | 1);
	for (int i = 0; i < 8; i++)
		b->data[b->len++] = (uint8_t) (u >> (8 * i));
}

void
tm_pb_bytes(tm_buf *b, uint32_t field, const void *p, size_t n)
{
	pb_varint(b, (uint64_t) field << 3 | 2);
	pb_varint(b, n);
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void
tm_pb_raw(tm_buf *b, const void *p, size_t n)
{
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

/* ---- database helpers --------------------------------------------------- */

static char last_error[512];

const char *
tm_error(void)
{
	return last_error;
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

uint64_t
tm_checksum(sqlite3 *db, int state)
{
	sqlite3_stmt *tables;
	uint64_t	h = 0xcbf29ce484222325ULL;

	if (sqlite3_prepare_v2(db, "SELECT name, coalesce(sql, ''), tbl_name FROM sqlite_master ORDER BY name", -1,
						   &tables, NULL) != SQLITE_OK)
		return 0;
	while (sqlite3_step(tables) == SQLITE_ROW)
	{
		const char *name = (const char *) sqlite3_column_text(tables, 0);
		const char *sql = (const char *) sqlite3_column_text(tables, 1);
		char	   *q;
		sqlite3_stmt *rows;

		if (!state && strncmp((const char *) sqlite3_column_text(tables, 2), "_sync_", 6) == 0)
			continue;
		h = fnv(h, name, strlen(name) + 1);
		h = fnv(h, sql, strlen(sql) + 1);
		if (strncmp(sql, "CREATE TABLE", 12) != 0)
			continue;
		q = sqlite3_mprintf("SELECT * FROM \"%w\" ORDER BY 1, 2", name);
		if (sqlite3_prepare_v2(db, q, -1, &rows, NULL) != SQLITE_OK)
		{
			sqlite3_free(q);
			q = sqlite3_mprintf("SELECT * FROM \"%w\" ORDER BY 1", name);
			if (sqlite3_prepare_v2(db, q, -1, &rows, NULL) != SQLITE_OK)
				rows = NULL;
		}
		sqlite3_free(q);
		while (rows && sqlite3_step(rows) == SQLITE_ROW)
			for (int i = 0; i < sqlite3_column_count(rows); i++)
			{
				int			type = sqlite3_column_type(rows, i);
				const void *p = sqlite3_column_blob(rows, i);

				h = fnv(h, &type, sizeof type);
				h = fnv(h, p, (size_t) sqlite3_column_bytes(rows, i));
			}
		sqlite3_finalize(rows);
	}
	sqlite3_finalize(tables);
	return h;
}

char *
tm_apply(sqlite3 *db, tm_msg m)
{
	sqlite3_stmt *st;
	char	   *out = NULL;

	last_error[0] = '\0';
	if (sqlite3_prepare_v2(db, "SELECT sync_apply(?1)", -1, &st, NULL) != SQLITE_OK)
	{
		snprintf(last_error, sizeof last_error, "%s", sqlite3_errmsg(db));
		return NULL;
	}
	sqlite3_bind_blob(st, 1, m.data ? (const void *) m.data : "", (int) m.len, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		out = tm_strdup((const char *) sqlite3_column_text(st, 0));
	else
		snprintf(last_error, sizeof last_error, "%s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return out;
}

tm_msg
tm_upload(sqlite3 *db)
{
	sqlite3_stmt *st;
	tm_msg		m = {NULL, 0};

	last_error[0] = '\0';
	if (sqlite3_prepare_v2(db, "SELECT sync_upload()", -1, &st, NULL) != SQLITE_OK)
	{
		snprintf(last_error, sizeof last_error, "%s", sqlite3_errmsg(db));
		return m;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
	{
		if (sqlite3_column_type(st, 0) == SQLITE_BLOB)
		{
			m.len = (size_t) sqlite3_column_bytes(st, 0);
			m.data = tm_alloc(m.len);
			memcpy(m.data, sqlite3_column_blob(st, 0), m.len);
		}
	}
	else
		snprintf(last_error, sizeof last_error, "%s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return m;
}

void
tm_shop(Sync__Table *out[4])
{
	out[0] = tm_table("customers", "catalog", "json", "id", "id INTEGER, name TEXT, vip INTEGER");
	out[1] = tm_table("products", "catalog", "json", "id",
					  "id INTEGER, name TEXT, price REAL, stock INTEGER owned, retired_at INTEGER field=0");
	tm_retired(out[1], "retired_at");
	out[2] = tm_table("orders", "record", "json", "origin,id",
					  "origin TEXT server=uuid, id INTEGER, customer INTEGER, total REAL, note TEXT");
	tm_origin(out[2], "origin");
	tm_fk(out[2], "customer", "customers", "id");
	out[3] = tm_table("sales", "record", "proto", "origin,id",
					  "origin TEXT server=uuid, id INTEGER, product INTEGER, qty INTEGER, price REAL, memo TEXT, photo BLOB");
	tm_origin(out[3], "origin");
	tm_fk(out[3], "product", "products", "id");
}

void
tm_shop_snapshot(tm_server *s, tm_msg *begin, tm_msg *end)
{
	Sync__Table *schema[4];
	Sync__Down *d;
	Sync__Rows *r;

	tm_shop(schema);
	d = tm_begin(schema, 4);
	r = tm_rows(d, "customers");
	tm_upsert(r, "{\"id\":1,\"name\":\"Ada\",\"vip\":true}", -1, "1", NULL);
	tm_upsert(r, "{\"id\":2,\"name\":\"Bob\",\"vip\":false}", -1, "2", NULL);
	r = tm_rows(d, "products");
	tm_upsert(r, "{\"id\":1,\"name\":\"tea\",\"price\":2.5,\"stock\":10}", -1, "1", NULL);
	tm_upsert(r, "{\"id\":2,\"name\":\"coffee\",\"price\":3.25,\"stock\":5}", -1, "2", NULL);
	tm_upsert(r, "{\"id\":3,\"name\":\"cake\",\"price\":4,\"stock\":0}", -1, "3", NULL);
	*begin = tm_next(s, d, NULL);
	*end = tm_next(s, NULL, tm_end("customers", "products", "orders", "sales", NULL));
}
