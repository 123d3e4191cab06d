/*
 * test_hlc.c - the hybrid logical clock both sides use (src/shared/hlc.c):
 * the vector of docs/protocol.md 12, monotonic ticks, a physical clock that
 * goes back, the counter's carry, merging, and a clock from the network too
 * far ahead refused.
 */
#include <string.h>

#include "check.h"
#include "hlc.h"
#include "vectors.h"
#include "wire.h"

/* 2026-01-01T00:00:00Z */
#define T0 INT64_C(1767225600000)

void
test_hlc(void)
{
	uint8_t		a[16] = {0x01};
	uint8_t		b[16] = {0x02};
	char		text[MS_HLC_TEXT];
	int64_t		s;
	int64_t		clock;

	/* the vector */
	CHECK(ms_hlc_of_ms(T0) + 3 == INT64_C(115816896921600003), "vector: 1767225600000 ms, counter 3");
	CHECK(ms_hlc_ms(INT64_C(115816896921600003)) == T0 && ms_hlc_counter(INT64_C(115816896921600003)) == 3,
		  "vector read back");
	ms_hlc_text(INT64_C(115816896921600003), text);
	CHECK(strcmp(text, "1767225600000.3") == 0, "vector as text: %s", text);

	/* monotonic: a tick at a later ms takes it, counter 0; at the same ms counts */
	s = ms_hlc_tick(0, T0);
	CHECK(s == ms_hlc_of_ms(T0), "first tick is the physical time");
	CHECK(ms_hlc_tick(s, T0) == s + 1, "same ms: counter 1");
	CHECK(ms_hlc_tick(s + 1, T0 + 5) == ms_hlc_of_ms(T0 + 5), "later ms: counter 0");
	/* a physical clock gone back an hour keeps counting on */
	s = ms_hlc_tick(ms_hlc_of_ms(T0) + 7, T0 - 3600000);
	CHECK(s == ms_hlc_of_ms(T0) + 8, "clock back an hour: last + 1");
	CHECK(ms_hlc_ms(s) == T0, "clock back: still the later ms");
	/* the counter's carry: the 65,536th in one ms borrows the next ms */
	s = ms_hlc_of_ms(T0) + 0xffff;
	CHECK(ms_hlc_counter(s) == 0xffff, "counter full");
	s = ms_hlc_tick(s, T0);
	CHECK(ms_hlc_ms(s) == T0 + 1 && ms_hlc_counter(s) == 0, "counter overflow carries into the ms");
	CHECK(ms_hlc_tick(s, T0 + 1) == s + 1, "and counts on in the borrowed ms");
	/* the ends */
	CHECK(ms_hlc_tick(INT64_MAX, T0) == INT64_MAX, "the greatest stamp does not wrap");
	CHECK(ms_hlc_tick(-5, T0) == ms_hlc_of_ms(T0), "a negative last is none");
	CHECK(ms_hlc_of_ms(-1) == 0 && ms_hlc_ms(-1) == 0, "negative times are 0");

	/* merge: the greater wins, never back */
	clock = ms_hlc_of_ms(T0);
	CHECK(ms_hlc_merge(&clock, ms_hlc_of_ms(T0) + 9, T0) && clock == ms_hlc_of_ms(T0) + 9, "merge takes a greater");
	CHECK(ms_hlc_merge(&clock, ms_hlc_of_ms(T0 - 1000), T0) && clock == ms_hlc_of_ms(T0) + 9,
		  "merge keeps its own when greater");
	/* a server an hour ahead of a clock set back an hour is taken, and the next tick beats it */
	clock = ms_hlc_of_ms(T0 - 3600000);
	CHECK(ms_hlc_merge(&clock, ms_hlc_of_ms(T0) + 4, T0 - 3600000), "an hour ahead is merged");
	CHECK(ms_hlc_tick(clock, T0 - 3600000) == ms_hlc_of_ms(T0) + 5, "the next stamp beats what was seen");
	/* untrusted: too far ahead, or negative, is not merged */
	clock = ms_hlc_of_ms(T0);
	CHECK(!ms_hlc_merge(&clock, ms_hlc_of_ms(T0 + MS_HLC_MAX_AHEAD_MS + 1), T0) && clock == ms_hlc_of_ms(T0),
		  "a clock more than a day ahead is refused, the own kept");
	CHECK(ms_hlc_merge(&clock, ms_hlc_of_ms(T0 + MS_HLC_MAX_AHEAD_MS), T0) &&
		  clock == ms_hlc_of_ms(T0 + MS_HLC_MAX_AHEAD_MS), "exactly a day ahead is merged");
	clock = 5;
	CHECK(!ms_hlc_merge(&clock, INT64_MAX, T0) && clock == 5, "INT64_MAX from the network is refused");
	CHECK(!ms_hlc_merge(&clock, -1, T0) && clock == 5, "a negative clock is refused");
	CHECK(ms_hlc_merge(&clock, INT64_MAX, MS_HLC_MAX_MS) && clock == INT64_MAX, "no overflow at the end of time");

	/* the total order: stamp, then replica uuid */
	CHECK(ms_hlc_compare(1, b, 2, a) < 0, "a smaller stamp is older whatever the replica");
	CHECK(ms_hlc_compare(2, a, 2, b) < 0 && ms_hlc_compare(2, b, 2, a) > 0, "equal stamps: the replica decides");
	CHECK(ms_hlc_compare(2, a, 2, a) == 0, "equal stamp and replica");

	/* a message's head carries the clock (field 13), after the generation */
	{
		uint8_t		buf[256];
		ms_head		h = {MS_PROTOCOL, ms_vector_epoch, 0, NULL, 0, NULL, NULL, ms_vector_replica, 3,
		INT64_C(115816896921600003)};
		Sync__Filed filed = SYNC__FILED__INIT;
		uint8_t		send_id[16] = {7};
		Sync__ToReplica *m;
		ms_wire_status st;
		char		reason[MS_REASON_MAX];
		size_t		n;

		n = ms_head_pack(&h, buf);
		CHECK(n == ms_head_packed_size(&h) && buf[n - 10] == 0x68, "the clock is field 13, a varint, last of the head");
		filed.send_id.data = send_id;
		filed.send_id.len = sizeof send_id;
		n += ms_body_pack(NULL, NULL, &filed, buf + n);
		m = ms_to_replica_decode(buf, n, 1 << 20, NULL, &st, reason);
		CHECK(m != NULL && m->clock == UINT64_C(115816896921600003), "a Filed's clock decodes: %s", reason);
		if (m)
			sync__to_replica__free_unpacked(m, NULL);
	}
}
