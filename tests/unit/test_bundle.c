/*
 * test_bundle.c - bundles (src/shared/bundle.c, docs/protocol.md 11): the
 * vectors written and read back; every prefix, every single-bit flip and
 * every byte joined refused whole; lengths beyond the bound or the buffer,
 * a count that lies, a wrong version, kind or magic, each with its reason;
 * a writer that runs out of memory returns nothing and leaks nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "check.h"
#include "sha256.h"
#include "vectors.h"

/* write: a bundle of the given messages, as the agent writes one */
static uint8_t *
write_bundle(ms_allocator *a, ms_bundle_kind kind, const uint8_t *const *msgs, const size_t *lens, int n,
			 size_t *len)
{
	ms_bundle_writer w;

	ms_bundle_begin(&w, a, kind, ms_vector_replica, ms_vector_bundle_written);
	for (int i = 0; i < n; i++)
		ms_bundle_add(&w, msgs[i], lens[i]);
	return ms_bundle_finish(&w, len);
}

static void
test_vector(const char *hex, ms_bundle_kind kind, const char *msg_hex, const char *msg_hex2)
{
	uint8_t		want[1024],
				msg[512];
	char		reason[MS_REASON_MAX];
	long		wn = ms_hex_decode(hex, want, sizeof want);
	long		mn = ms_hex_decode(msg_hex, msg, sizeof msg);
	size_t		len = 0;
	uint8_t    *got;
	const uint8_t *m;
	size_t		ml;
	ms_bundle	b;
	const uint8_t *msgs[1];
	size_t		lens[1];

	if (msg_hex2)
		mn += ms_hex_decode(msg_hex2, msg + mn, sizeof msg - (size_t) mn);
	msgs[0] = msg;
	lens[0] = (size_t) mn;
	got = write_bundle(&ms_test_allocator, kind, msgs, lens, 1, &len);
	CHECK(got != NULL && wn == (long) len && memcmp(got, want, len) == 0, "the vector bundle of kind %d", kind);
	CHECK(ms_bundle_open(&b, want, (size_t) wn, 1 << 20, reason), "the vector opens: %s", reason);
	CHECK(b.kind == kind && b.count == 1 && b.written == ms_vector_bundle_written &&
		  memcmp(b.replica, ms_vector_replica, 16) == 0, "its head reads back");
	CHECK(ms_bundle_next(&b, &m, &ml) && ml == (size_t) mn && memcmp(m, msg, ml) == 0, "its message reads back");
	CHECK(!ms_bundle_next(&b, &m, &ml), "and only one");
	free(got);
}

/* every prefix, every bit flipped, a byte joined: refused, each with a reason */
static void
test_damage(void)
{
	uint8_t		buf[1024];
	char		reason[MS_REASON_MAX];
	long		n = ms_hex_decode(ms_vector_bundle_to_hex, buf, sizeof buf - 1);
	int			opened = 0,
				flips = 0,
				said = 0;
	ms_bundle	b;

	for (long k = 0; k < n; k++)
	{
		reason[0] = '\0';
		opened += ms_bundle_open(&b, buf, (size_t) k, 1 << 20, reason);
		said += reason[0] != '\0';
	}
	CHECK(opened == 0 && said == n, "no prefix opens, each says why (%d opened, %d said)", opened, said);
	CHECK(!ms_bundle_open(&b, buf, 80, 1 << 20, reason) && strstr(reason, "not whole") != NULL,
		  "a bundle cut short: %s", reason);
	CHECK(!ms_bundle_open(&b, buf, 50, 1 << 20, reason) && strstr(reason, "cut short") != NULL,
		  "shorter than head and check: %s", reason);
	for (long k = 0; k < n; k++)
		for (int bit = 0; bit < 8; bit++)
		{
			buf[k] ^= (uint8_t) (1 << bit);
			flips += ms_bundle_open(&b, buf, (size_t) n, 1 << 20, reason);
			buf[k] ^= (uint8_t) (1 << bit);
		}
	CHECK(flips == 0, "no single-bit flip opens (%d did)", flips);
	buf[n] = 0;
	CHECK(!ms_bundle_open(&b, buf, (size_t) n + 1, 1 << 20, reason), "a byte joined: refused (%s)", reason);
	CHECK(ms_bundle_open(&b, buf, (size_t) n, 1 << 20, reason), "the bundle itself still opens: %s", reason);
	CHECK(!ms_bundle_open(&b, buf, (size_t) n, 100, reason) && strstr(reason, "more than the 100") != NULL,
		  "a message beyond the bound: %s", reason);
	CHECK(!ms_bundle_open(&b, (const uint8_t *) "hello, world, this is no bundle of ours, no, not at all, friend",
						  62, 1 << 20, reason) && strstr(reason, "not a magic_sync bundle") != NULL,
		  "another file: %s", reason);
}

/* re-check: a head or a length changed, and the check made again, as a forger would */
static bool
recheck_open(uint8_t *buf, size_t len, char reason[MS_REASON_MAX])
{
	ms_bundle	b;

	ms_sha256(buf, len - MS_BUNDLE_CHECK, buf + len - MS_BUNDLE_CHECK);
	return ms_bundle_open(&b, buf, len, 1 << 20, reason);
}

static void
test_lies(void)
{
	uint8_t		orig[1024],
				buf[1024];
	char		reason[MS_REASON_MAX];
	size_t		n = (size_t) ms_hex_decode(ms_vector_bundle_to_hex, orig, sizeof orig);

#define FRESH() memcpy(buf, orig, n)
	FRESH();
	buf[31] = 2;				/* count 2, one message */
	CHECK(!recheck_open(buf, n, reason) && strstr(reason, "ends inside message 2") != NULL, "a count too high: %s", reason);
	FRESH();
	buf[31] = 0;				/* count 0: the message is left over */
	CHECK(!recheck_open(buf, n, reason) && strstr(reason, "after the bundle's 0") != NULL, "a count too low: %s", reason);
	FRESH();
	buf[28] = 0xff;				/* a count beyond the most a bundle carries */
	CHECK(!recheck_open(buf, n, reason) && strstr(reason, "more than the") != NULL, "a count out of range: %s", reason);
	FRESH();
	buf[41] = 0x01;				/* the message's length beyond what remains, within the bound */
	CHECK(!recheck_open(buf, n, reason) && strstr(reason, "remain") != NULL, "a length beyond the buffer: %s", reason);
	FRESH();
	memset(buf + 40, 0, 4);		/* an empty message */
	CHECK(!recheck_open(buf, n, reason) && strstr(reason, "is empty") != NULL, "an empty message: %s", reason);
	FRESH();
	buf[9] = 2;
	CHECK(!recheck_open(buf, n, reason) && strstr(reason, "version 2") != NULL, "a later version: %s", reason);
	FRESH();
	buf[10] = 3;
	CHECK(!recheck_open(buf, n, reason) && strstr(reason, "kind 3") != NULL, "an unknown kind: %s", reason);
	FRESH();
	buf[11] = 1;
	CHECK(!recheck_open(buf, n, reason) && strstr(reason, "not 0") != NULL, "the reserved byte: %s", reason);
	FRESH();
	CHECK(recheck_open(buf, n, reason), "the vector, checked again, opens: %s", reason);
#undef FRESH
}

/* an allocator that fails after a given number of allocations */
static int	fail_after;

static void *
failing_alloc(void *data, size_t size)
{
	(void) data;
	if (fail_after-- <= 0)
		return NULL;
	return malloc(size);
}

static void
failing_free(void *data, void *p)
{
	(void) data;
	free(p);
}

static void
test_writer(void)
{
	ms_allocator failing = {failing_alloc, failing_free, NULL};
	static uint8_t big[5000];
	const uint8_t *msgs[3] = {big, big, big};
	size_t		lens[3] = {sizeof big, 1, sizeof big};
	size_t		len = 0;
	uint8_t    *got;
	char		reason[MS_REASON_MAX];
	ms_bundle	b;
	const uint8_t *m;
	size_t		ml;
	int			nulls = 0;

	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (uint8_t) i;
	got = write_bundle(&ms_test_allocator, MS_BUNDLE_FROM_REPLICA, msgs, lens, 3, &len);
	CHECK(got != NULL && len == MS_BUNDLE_HEAD + 3 * 4 + 10001 + MS_BUNDLE_CHECK, "three messages, grown past 4096");
	CHECK(got && ms_bundle_open(&b, got, len, 1 << 20, reason) && b.count == 3, "they open: %s", reason);
	for (int i = 0; got && i < 3; i++)
		CHECK(ms_bundle_next(&b, &m, &ml) && ml == lens[i] && memcmp(m, big, ml) == 0, "message %d reads back", i);
	free(got);
	got = write_bundle(&ms_test_allocator, MS_BUNDLE_TO_REPLICA, NULL, NULL, 0, &len);
	CHECK(got && len == MS_BUNDLE_HEAD + MS_BUNDLE_CHECK && ms_bundle_open(&b, got, len, 1, reason) && b.count == 0 &&
		  !ms_bundle_next(&b, &m, &ml), "a bundle of nothing opens, and hands out nothing");
	free(got);
	for (int k = 0; k < 4; k++)
	{
		fail_after = k;
		got = write_bundle(&failing, MS_BUNDLE_FROM_REPLICA, msgs, lens, 3, &len);
		nulls += got == NULL;
		free(got);
	}
	CHECK(nulls == 3, "out of memory at each growth: no bundle, nothing leaked (%d of 4 failed)", nulls);
	{
		ms_bundle_writer w;

		ms_bundle_begin(&w, &ms_test_allocator, MS_BUNDLE_TO_REPLICA, ms_vector_replica, 0);
		CHECK(!ms_bundle_add(&w, big, 0), "an empty message is not written");
		CHECK(ms_bundle_finish(&w, &len) == NULL, "and the bundle fails whole");
	}
}

void
test_bundle(void)
{
	test_vector(ms_vector_bundle_to_hex, MS_BUNDLE_TO_REPLICA, ms_vector_head_hex, ms_vector_body_hex);
	test_vector(ms_vector_bundle_from_hex, MS_BUNDLE_FROM_REPLICA, ms_vector_up_hex, NULL);
	test_damage();
	test_lies();
	test_writer();
}
