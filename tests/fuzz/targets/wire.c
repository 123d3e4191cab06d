/*
 * wire.c - libFuzzer target: every decoder of src/shared/wire.c on the
 * same bytes.
 *
 *   ms_wire_scan, ms_utf8_valid, ms_to_replica_decode, ms_up_decode (and
 *   with them every ms_*_check), each as a replica or the server calls it.
 *
 * Properties, any failure a finding:
 *   - ms_utf8_valid agrees with an independent reading of Unicode's table
 *     of well-formed byte sequences (no NUL: a C string cannot hold one);
 *   - bytes the scan refuses never decode; a refusal says why and frees
 *     everything it allocated;
 *   - one byte over the bound is refused as too large;
 *   - a decoded message packs again into bytes that decode the same way
 *     and pack to the same bytes (decoding is a fixed point);
 *   - every key of a decoded message has canonical bytes that parse back
 *     into its parts (key.h);
 *   - out of memory at any allocation of a decode: NULL, said as
 *     MS_WIRE_NO_MEMORY, nothing left allocated;
 *   - the replica's single-pass read (ms_to_replica_read) agrees with
 *     ms_to_replica_decode: the same status, reason and message, and out
 *     of memory said as such (tests/unit/read_same.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "key.h"
#include "read_same.h"
#include "wire.h"

/* Unicode 15, table 3-7: the well-formed UTF-8 byte sequences */
static bool
utf8_reference(const uint8_t *p, size_t n)
{
	size_t		i = 0;

	while (i < n)
	{
		uint8_t		c = p[i];
		uint8_t		lo = 0x80,
					hi = 0xbf;
		size_t		more;

		if (c == 0)
			return false;
		if (c < 0x80)
		{
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			more = 1;
		else if (c >= 0xe0 && c <= 0xef)
		{
			more = 2;
			if (c == 0xe0)
				lo = 0xa0;
			else if (c == 0xed)
				hi = 0x9f;
		}
		else if (c >= 0xf0 && c <= 0xf4)
		{
			more = 3;
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f;
		}
		else
			return false;
		if (n - i - 1 < more)
			return false;
		if (p[i + 1] < lo || p[i + 1] > hi)
			return false;
		for (size_t k = 2; k <= more; k++)
			if (p[i + k] < 0x80 || p[i + k] > 0xbf)
				return false;
		i += more + 1;
	}
	return true;
}

/* the canonical bytes of a wire Key parse back into its parts */
static void
key_round_trip(const Sync__Key *k)
{
	size_t		n = ms_wire_key_size(k);
	char	   *buf = malloc(n + 1);
	size_t		pos = 0;

	FZ_CHECK(buf != NULL, "out of memory");
	FZ_CHECK(ms_wire_key_write(k, buf) == n, "ms_wire_key_write wrote other than ms_wire_key_size said");
	for (size_t i = 0; i < k->n_parts; i++)
	{
		const char *part;
		size_t		plen;

		FZ_CHECK(ms_key_next_part(buf, n, &pos, &part, &plen) == 1, "part %zu of a wire key does not parse back", i);
		FZ_CHECK(plen == strlen(k->parts[i]) && memcmp(part, k->parts[i], plen) == 0,
				 "part %zu of a wire key parses back as other bytes", i);
	}
	FZ_CHECK(pos == n, "a wire key's canonical bytes run past its parts");
	FZ_CHECK(ms_key_count_parts(buf, n) == (int) k->n_parts, "a wire key's canonical bytes count other parts");
	free(buf);
}

static void
rows_keys(const Sync__Rows *r)
{
	for (size_t i = 0; i < r->n_keys; i++)
		key_round_trip(r->keys[i]);
	for (size_t i = 0; i < r->n_deletes; i++)
		key_round_trip(r->deletes[i]);
	for (size_t i = 0; i < r->n_replaces; i++)
		key_round_trip(r->replaces[i]);
}

/* what a checked message to a replica promises its reader (apply.c) */
static void
to_replica_promises(const Sync__ToReplica *m)
{
	FZ_CHECK(m->replica.len == 16 && m->epoch.len == 16, "a checked message lacks its replica or epoch");
	if (m->body_case == SYNC__TO_REPLICA__BODY_FILED)
	{
		FZ_CHECK(m->filed->send_id.len == 16, "a checked Filed lacks its send id");
		for (size_t i = 0; i < m->filed->n_refused; i++)
			key_round_trip(m->filed->refused[i]->key);
		return;
	}
	FZ_CHECK(m->body_case == SYNC__TO_REPLICA__BODY_DOWN || m->body_case == SYNC__TO_REPLICA__BODY_END_SNAPSHOT,
			 "a checked message has no body");
	FZ_CHECK(m->nonce.len == 16 && m->seal.len == 32 && m->number > 0 && m->previous < m->number,
			 "a checked message lacks its nonce, seal or number");
	FZ_CHECK(m->previous == 0 ? m->previous_nonce.len == 0 : m->previous_nonce.len == 16,
			 "a checked message's previous nonce does not match its previous number");
	if (m->body_case == SYNC__TO_REPLICA__BODY_DOWN)
		for (size_t i = 0; i < m->down->n_tables; i++)
			rows_keys(m->down->tables[i]);
}

/* what a checked upload promises the server (src/pg/transport/file.c) */
static void
up_promises(const Sync__Up *m)
{
	FZ_CHECK(m->replica.len == 16 && m->send_id.len == 16, "a checked upload lacks its replica or send id");
	if (m->applied != NULL && m->applied->number != 0)
		FZ_CHECK(m->applied->epoch.len == 16 && m->applied->nonce.len == 16 && m->applied->seal.len == 32,
				 "a checked upload's applied message lacks its epoch, nonce or seal");
	FZ_CHECK(m->gap_epoch.len == 0 || m->gap_epoch.len == 16, "a checked upload's gap epoch has another size");
	for (size_t i = 0; i < m->n_rows; i++)
		rows_keys(m->rows[i]);
	for (size_t i = 0; i < m->n_refusals; i++)
		key_round_trip(m->refusals[i]->key);
}

typedef struct direction
{
	const char *name;
	const ProtobufCMessageDescriptor *desc;
	void	   *(*decode) (const uint8_t *, size_t, size_t, ms_allocator *, ms_wire_status *, char *);
	void		(*promises) (const void *);
}			direction;

static void *
decode_to_replica(const uint8_t *b, size_t n, size_t bound, ms_allocator *a, ms_wire_status *st, char *why)
{
	return ms_to_replica_decode(b, n, bound, a, st, why);
}

static void *
decode_up(const uint8_t *b, size_t n, size_t bound, ms_allocator *a, ms_wire_status *st, char *why)
{
	return ms_up_decode(b, n, bound, a, st, why);
}

static void
promises_to_replica(const void *m)
{
	to_replica_promises(m);
}

static void
promises_up(const void *m)
{
	up_promises(m);
}

static const direction directions[] = {
	{"ToReplica", &sync__to_replica__descriptor, decode_to_replica, promises_to_replica},
	{"Up", &sync__up__descriptor, decode_up, promises_up},
};

/* a message decoded: pack it again, decode that, pack again: the same bytes */
static void
fixed_point(const direction *d, ProtobufCMessage *m, ms_wire_status st)
{
	size_t		n = protobuf_c_message_get_packed_size(m);
	uint8_t    *once = malloc(n ? n : 1);
	uint8_t    *twice;
	ProtobufCMessage *again;
	ms_wire_status st2;
	char		reason[MS_REASON_MAX];
	fz_alloc	a;

	FZ_CHECK(once != NULL, "out of memory");
	FZ_CHECK(protobuf_c_message_pack(m, once) == n, "a %s packs to another size than it said", d->name);
	fz_alloc_init(&a, 0);
	again = d->decode(once, n, n, &a.pa, &st2, reason);
	FZ_CHECK(again != NULL && st2 == st, "a decoded %s, packed again, does not decode the same way (%d, %d): %s",
			 d->name, (int) st, (int) st2, reason);
	FZ_CHECK(protobuf_c_message_get_packed_size(again) == n, "a %s packed twice changes size", d->name);
	twice = malloc(n ? n : 1);
	FZ_CHECK(twice != NULL, "out of memory");
	protobuf_c_message_pack(again, twice);
	FZ_CHECK(n == 0 || memcmp(once, twice, n) == 0, "a %s packed twice changes bytes", d->name);
	protobuf_c_message_free_unpacked(again, &a.pa);
	FZ_CHECK(a.live == 0, "freeing a decoded %s leaves %ld allocations", d->name, a.live);
	free(once);
	free(twice);
}

static void
one_direction(const direction *d, const uint8_t *data, size_t size, bool scanned, uint32_t hash)
{
	ms_wire_status st;
	char		reason[MS_REASON_MAX];
	fz_alloc	a;
	ProtobufCMessage *m;
	long		allocs;

	fz_alloc_init(&a, 0);
	m = d->decode(data, size, size, &a.pa, &st, reason);
	allocs = a.count;
	if (!scanned)
		FZ_CHECK(m == NULL && st == MS_WIRE_MALFORMED, "a %s the scan refuses decodes", d->name);
	if (m == NULL)
	{
		FZ_CHECK(st != MS_WIRE_OK && st != MS_WIRE_LATER_PROTOCOL, "a %s that did not decode has status %d", d->name, (int) st);
		FZ_CHECK(reason[0] != '\0', "a %s that did not decode says no reason", d->name);
		FZ_CHECK(strlen(reason) < MS_REASON_MAX, "a reason overran its buffer");
		FZ_CHECK(a.live == 0, "a %s that did not decode leaves %ld allocations", d->name, a.live);
		return;
	}
	FZ_CHECK(st == MS_WIRE_OK || st == MS_WIRE_LATER_PROTOCOL, "a decoded %s has status %d", d->name, (int) st);
	if (st == MS_WIRE_OK)
		d->promises(m);
	fixed_point(d, m, st);
	protobuf_c_message_free_unpacked(m, &a.pa);
	FZ_CHECK(a.live == 0, "freeing a decoded %s leaves %ld allocations", d->name, a.live);

	/* over the bound by one byte */
	if (size > 0)
	{
		fz_alloc_init(&a, 0);
		m = d->decode(data, size, size - 1, &a.pa, &st, reason);
		FZ_CHECK(m == NULL && st == MS_WIRE_TOO_LARGE && a.count == 0, "a %s over the bound is not refused as too large", d->name);
	}
	/* out of memory at one allocation of the decode, and every one after */
	if (allocs > 0)
	{
		fz_alloc_init(&a, 1 + (long) (hash % (uint32_t) allocs));
		m = d->decode(data, size, size, &a.pa, &st, reason);
		FZ_CHECK(m == NULL, "a %s decodes with allocation %ld failing", d->name, a.fail_at);
		FZ_CHECK(st == MS_WIRE_NO_MEMORY, "a %s out of memory at allocation %ld is said as status %d (%s)",
				 d->name, a.fail_at, (int) st, reason);
		FZ_CHECK(a.live == 0, "a %s out of memory leaves %ld allocations", d->name, a.live);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char		reason[MS_REASON_MAX];
	bool		scanned;
	uint32_t	hash = 2166136261u;

	for (size_t i = 0; i < size; i++)
		hash = (hash ^ data[i]) * 16777619u;
	FZ_CHECK(ms_utf8_valid((const char *) data, size) == utf8_reference(data, size),
			 "ms_utf8_valid says %d of %zu bytes", (int) ms_utf8_valid((const char *) data, size), size);
	scanned = ms_wire_scan(data, size, reason);
	if (!scanned)
		FZ_CHECK(reason[0] != '\0' && strlen(reason) < MS_REASON_MAX, "the scan refuses without a reason");
	for (size_t i = 0; i < sizeof directions / sizeof directions[0]; i++)
		one_direction(&directions[i], data, size, scanned, hash);
	{
		const char *why = rs_same(data, size, size, 1 + (long) (hash % 16));

		FZ_CHECK(why == NULL, "ms_to_replica_read differs from ms_to_replica_decode: %s", why);
	}
	return 0;
}
