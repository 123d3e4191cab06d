/*
 * up.c - libFuzzer target: the server's upload decoder, out of process.
 *
 * sync.file (src/pg/transport/file.c) decodes an upload with src/shared
 * only, before any SQL: ms_up_decode under magic_sync.upload_bytes (and
 * with it ms_up_check), then for each row its canonical key
 * (ms_wire_key_write) and its bytes in the table's codec; it answers with
 * a Filed that names every row it refused.  This target runs those steps
 * over the same C code, with the shop's tables (tests/sqlite/msgs.c) as
 * the server's mirrored tables and an allocator that counts.
 *
 * file_row below is where a row's bytes are read: a proto row walked by
 * src/shared/row.c as the server's filer.c walks it (its table's shape
 * from the schema), a json row checked as UTF-8 beginning an object (the
 * rest is PostgreSQL's jsonb input).
 *
 * Properties, any failure a finding:
 *   - a decoded upload holds what file.c reads without checking again
 *     (sizes of the replica, send id, applied seal, gap epoch);
 *   - every key's canonical bytes parse back into as many parts;
 *   - the Filed answer refusing every row, built as file.c's answer()
 *     builds it, is a message the replica decodes (ms_to_replica_decode):
 *     a server never answers what a replica cannot take;
 *   - a refused upload says why and frees everything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "key.h"
#include "msgs.h"
#include "row.h"
#include "wire.h"

/* magic_sync.upload_bytes' default (src/pg) */
#define UPLOAD_BYTES (16 << 20)

typedef struct filing
{
	Sync__Table *tables[4];
	Sync__Refusal **refused;
	size_t		nrefused;
	size_t		cap;
	int			filed;
} filing;

static const Sync__Table *
table_named(filing *f, const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(f->tables[i]->name, name) == 0)
			return f->tables[i];
	return NULL;
}

/* canonical: file.c's canonical() over ms_wire_key_write */
static char *
canonical(const Sync__Key *k, size_t *len)
{
	char	   *out = malloc(ms_wire_key_size(k) + 1);

	FZ_CHECK(out != NULL, "out of memory");
	*len = ms_wire_key_write(k, out);
	out[*len] = '\0';
	FZ_CHECK(*len == ms_wire_key_size(k), "a key writes other than its size");
	FZ_CHECK(ms_key_count_parts(out, *len) == (int) k->n_parts, "a key's canonical bytes count %d parts, not %zu",
			 ms_key_count_parts(out, *len), k->n_parts);
	return out;
}

static void
refuse(filing *f, const char *table, const Sync__Key *k, const char *why)
{
	Sync__Refusal *r = malloc(sizeof *r);

	FZ_CHECK(r != NULL, "out of memory");
	sync__refusal__init(r);
	r->table = (char *) table;
	r->key = (Sync__Key *) k;
	r->reason = strdup(why);
	if (f->nrefused == f->cap)
	{
		f->cap = f->cap ? f->cap * 2 : 16;
		f->refused = realloc(f->refused, sizeof(Sync__Refusal *) * f->cap);
		FZ_CHECK(f->refused != NULL, "out of memory");
	}
	f->refused[f->nrefused++] = r;
}

/* a walked value: the walker has checked it; the server then writes it as JSON */
static bool
take_value(void *arg, int column, const ms_row_value *v, char reason[MS_REASON_MAX])
{
	const ms_row_shape *shape = arg;

	FZ_CHECK(column >= 0 && column < shape->ncols, "the walker handed column %d of %d", column, shape->ncols);
	FZ_CHECK(v->type == shape->cols[column].type, "a value of another type than its column's");
	FZ_CHECK(v->type == MS_INTEGER || v->type == MS_REAL || v->p != NULL || v->n == 0,
			 "a text or blob value with no bytes");
	(void) reason;
	return true;
}

/*
 * file_row: one row's bytes read in its table's codec; NULL when they
 * read, else why not.
 */
static const char *
file_row(const Sync__Table *t, const ProtobufCBinaryData *row)
{
	static char reason[MS_REASON_MAX];

	if (strcmp(t->codec, "proto") == 0)
	{
		ms_row_column cols[16];
		ms_row_shape shape;
		fz_alloc	a;
		bool		ok;

		FZ_CHECK(t->n_columns <= 16, "a test table of %zu columns", t->n_columns);
		for (size_t c = 0; c < t->n_columns; c++)
		{
			cols[c].name = t->columns[c]->name;
			cols[c].field = t->columns[c]->field;
			FZ_CHECK(ms_type_parse(t->columns[c]->type, &cols[c].type), "a test column of no type");
		}
		fz_alloc_init(&a, 0);
		FZ_CHECK(ms_row_shape_init(&shape, t->name, cols, (int) t->n_columns, &a.pa), "no memory for a shape");
		ok = ms_row_walk(&shape, row->data, row->len, take_value, &shape, reason);
		ms_row_shape_free(&shape, &a.pa);
		FZ_CHECK(a.live == 0, "the row shape leaves %ld allocations", a.live);
		return ok ? NULL : reason;
	}
	if (row->len == 0 || row->data[0] != '{' || !ms_utf8_valid((const char *) row->data, row->len))
		return "the row is not a JSON object in UTF-8";
	return NULL;
}

/* file_rows: file.c's file_rows, less the SQL */
static void
file_rows(filing *f, const Sync__Rows *r)
{
	const Sync__Table *t = table_named(f, r->table);

	for (size_t i = 0; i < r->n_upserts + r->n_deletes; i++)
	{
		bool		del = i >= r->n_upserts;
		const Sync__Key *k = del ? r->deletes[i - r->n_upserts] : r->keys[i];
		size_t		len;
		char	   *key = canonical(k, &len);
		const char *why = NULL;
		char		msg[256];

		if (t == NULL)
		{
			snprintf(msg, sizeof msg, "table \"%s\" is not mirrored", r->table);
			why = msg;
		}
		else if (k->n_parts != t->n_key)
		{
			snprintf(msg, sizeof msg, "table \"%s\" has a key of %zu parts, not %zu", t->name, t->n_key, k->n_parts);
			why = msg;
		}
		else if (!del)
			why = file_row(t, &r->upserts[i]);
		if (why != NULL)
			refuse(f, r->table, k, why);
		else
			f->filed++;
		free(key);
	}
}

/* answer: the Filed of file.c's answer(), which the replica must decode */
static void
answer(filing *f, const Sync__Up *up)
{
	Sync__Filed filed = SYNC__FILED__INIT;
	Sync__ToReplica m = SYNC__TO_REPLICA__INIT;
	uint8_t		epoch[16] = {1};
	size_t		size;
	uint8_t    *bytes;
	fz_alloc	a;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	Sync__ToReplica *back;

	filed.send_id = up->send_id;
	filed.rows = (uint32_t) f->filed;
	filed.n_refused = f->nrefused;
	filed.refused = f->refused;
	m.protocol = MS_PROTOCOL;
	m.epoch.data = epoch;
	m.epoch.len = sizeof epoch;
	m.replica = up->replica;
	m.body_case = SYNC__TO_REPLICA__BODY_FILED;
	m.filed = &filed;
	size = sync__to_replica__get_packed_size(&m);
	bytes = malloc(size);
	FZ_CHECK(bytes != NULL, "out of memory");
	sync__to_replica__pack(&m, bytes);
	fz_alloc_init(&a, 0);
	back = ms_to_replica_decode(bytes, size, size, &a.pa, &st, reason);
	FZ_CHECK(back != NULL && st == MS_WIRE_OK, "the server's Filed answer to an upload it took is refused by the replica: %s", reason);
	FZ_CHECK(back->filed->n_refused == f->nrefused, "the Filed answer lost refusals");
	sync__to_replica__free_unpacked(back, &a.pa);
	FZ_CHECK(a.live == 0, "freeing the Filed answer leaves %ld allocations", a.live);
	free(bytes);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_alloc	a;
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	Sync__Up   *up;
	filing		f;
	static Sync__Table *shop[4];

	if (shop[0] == NULL)
		tm_shop(shop);			/* kept for the whole run */
	memset(&f, 0, sizeof f);
	memcpy(f.tables, shop, sizeof shop);
	fz_alloc_init(&a, 0);
	up = ms_up_decode(data, size, UPLOAD_BYTES, &a.pa, &st, reason);
	if (up == NULL)
	{
		FZ_CHECK(reason[0] != '\0' && a.live == 0, "a refused upload says no reason or leaves allocations");
		return 0;
	}
	if (st == MS_WIRE_LATER_PROTOCOL)
	{
		/* refused whole: the server is upgraded before its replicas */
		sync__up__free_unpacked(up, &a.pa);
		FZ_CHECK(a.live == 0, "freeing an upload leaves allocations");
		return 0;
	}
	FZ_CHECK(st == MS_WIRE_OK, "a decoded upload has status %d", (int) st);
	FZ_CHECK(up->replica.len == 16 && up->send_id.len == 16, "a checked upload lacks its replica or send id");
	if (up->applied != NULL && up->applied->number != 0)
		FZ_CHECK(up->applied->epoch.len == 16 && up->applied->nonce.len == 16 && up->applied->seal.len == 32,
				 "a checked upload's applied message lacks its epoch, nonce or seal");
	FZ_CHECK(up->gap_epoch.len == 0 || up->gap_epoch.len == 16, "a checked upload's gap epoch has another size");
	for (size_t i = 0; i < up->n_refusals; i++)
	{
		size_t		len;

		free(canonical(up->refusals[i]->key, &len));
	}
	for (size_t i = 0; i < up->n_rows; i++)
		file_rows(&f, up->rows[i]);
	answer(&f, up);
	for (size_t i = 0; i < f.nrefused; i++)
	{
		free(f.refused[i]->reason);
		free(f.refused[i]);
	}
	free(f.refused);
	sync__up__free_unpacked(up, &a.pa);
	FZ_CHECK(a.live == 0, "freeing an upload leaves %ld allocations", a.live);
	return 0;
}
