/*
 * bundle.c - libFuzzer target: the bundle reader (src/shared/bundle.c),
 * which both `magic_sync_agent import`s run over a file from a van or a
 * ship before anything of it reaches sync_apply or sync.file.
 *
 * Each input is read twice: as it is (the check must refuse nearly all of
 * it), and with its SHA-256 joined to it, so that the fuzzer reaches the
 * head, the count and every length behind the check.
 *
 * Properties, any failure a finding:
 *   - a bundle that opens hands out exactly its count of messages, each
 *     inside the input, none empty, none beyond the bound, framed so that
 *     head, lengths, messages and check add up to every byte;
 *   - written again by the writer from what was read (kind, replica, time,
 *     messages), it is the same bytes;
 *   - one that does not open says why, and hands out nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "fuzz.h"
#include "sha256.h"

#define BOUND 2048

static void
one(const uint8_t *buf, size_t len)
{
	ms_bundle	b;
	char		reason[MS_REASON_MAX];
	const uint8_t *m;
	size_t		ml;
	size_t		framed = MS_BUNDLE_HEAD + MS_BUNDLE_CHECK;
	uint32_t	n = 0;
	ms_bundle_writer w;
	fz_alloc	a;
	uint8_t    *again;
	size_t		again_len = 0;

	reason[0] = '\0';
	if (!ms_bundle_open(&b, buf, len, BOUND, reason))
	{
		FZ_CHECK(reason[0] != '\0', "a bundle refused without a reason");
		FZ_CHECK(!ms_bundle_next(&b, &m, &ml), "a refused bundle handed out a message");
		return;
	}
	fz_alloc_init(&a, 0);
	ms_bundle_begin(&w, &a.pa, b.kind, b.replica, b.written);
	while (ms_bundle_next(&b, &m, &ml))
	{
		FZ_CHECK(m > buf && m + ml <= buf + len - MS_BUNDLE_CHECK, "message %u outside the bundle", n);
		FZ_CHECK(ml > 0 && ml <= BOUND, "message %u of %zu bytes handed out", n, ml);
		framed += 4 + ml;
		n++;
		ms_bundle_add(&w, m, ml);
	}
	FZ_CHECK(n == b.count, "%u messages handed out of a count of %u", n, b.count);
	FZ_CHECK(framed == len, "head, lengths, messages and check are %zu bytes of %zu", framed, len);
	again = ms_bundle_finish(&w, &again_len);
	FZ_CHECK(again != NULL && again_len == len && memcmp(again, buf, len) == 0,
			 "the bundle written again from what was read differs");
	a.pa.free(a.pa.allocator_data, again);
	FZ_CHECK(a.live == 0, "%ld allocations of the writer left", a.live);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t    *checked;

	one(data, size);
	checked = malloc(size + MS_SHA256_BYTES);
	if (checked == NULL)
		return 0;
	if (size)
		memcpy(checked, data, size);
	ms_sha256(checked, size, checked + size);
	one(checked, size + MS_SHA256_BYTES);
	free(checked);
	return 0;
}
