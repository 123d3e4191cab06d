/*-------------------------------------------------------------------------
 * sha256.c
 *	  SHA-256 as FIPS 180-4 specifies it (sha256.h): the message padded to
 *	  whole 64-byte blocks, each block mixed into eight words.
 *-------------------------------------------------------------------------
 */
#include "sha256.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define MS_SHA256_X86 1
#endif

bool		ms_sha256_plain = false;

/* the first 32 bits of the fractional parts of the cube roots of the first 64 primes */
static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void
block(uint32_t h[8], const uint8_t *p)
{
	uint32_t	w[64];
	uint32_t	a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];

	for (int t = 0; t < 16; t++)
		w[t] = (uint32_t) p[4 * t] << 24 | (uint32_t) p[4 * t + 1] << 16 | (uint32_t) p[4 * t + 2] << 8 | p[4 * t + 3];
	for (int t = 16; t < 64; t++)
	{
		uint32_t	s0 = ROTR(w[t - 15], 7) ^ ROTR(w[t - 15], 18) ^ (w[t - 15] >> 3);
		uint32_t	s1 = ROTR(w[t - 2], 17) ^ ROTR(w[t - 2], 19) ^ (w[t - 2] >> 10);

		w[t] = w[t - 16] + s0 + w[t - 7] + s1;
	}
	for (int t = 0; t < 64; t++)
	{
		uint32_t	t1 = k + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t];
		uint32_t	t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));

		k = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
	h[5] += f;
	h[6] += g;
	h[7] += k;
}

#ifdef MS_SHA256_X86
/*
 * blocks_x86: n blocks mixed in by the CPU's SHA extensions (Intel's SHA-NI,
 * AMD's since Zen): an agent verifying a snapshot's signatures hashed 89 MB
 * of bodies at 140 MB/s with block(), a fifth of its first sync's CPU.  The
 * state is kept as the instructions take it, ABEF and CDGH; each step is
 * four rounds, of four words of the schedule, the last four of which make
 * the next (W[t] from W[t-16], W[t-15], W[t-7] and W[t-2]: msg1 and msg2).
 */
__attribute__((target("sha,sse4.1,ssse3")))
static void
blocks_x86(uint32_t h[8], const uint8_t *p, size_t n)
{
	const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
	__m128i		t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *) &h[0]), 0xB1);	/* CDAB */
	__m128i		s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *) &h[4]), 0x1B);	/* EFGH */
	__m128i		s0 = _mm_alignr_epi8(t, s1, 8);	/* ABEF */

	s1 = _mm_blend_epi16(s1, t, 0xF0);	/* CDGH */
	for (size_t b = 0; b < n; b++, p += 64)
	{
		__m128i		abef = s0;
		__m128i		cdgh = s1;
		__m128i		w[4];

		for (int g = 0; g < 16; g++)
		{
			__m128i		m;

			if (g < 4)
				w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *) (p + 16 * g)), swap);
			else
			{
				/* W[4g..4g+3] in the place of W[4g-16..4g-13] */
				m = _mm_add_epi32(_mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]),
								  _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4));
				w[g % 4] = _mm_sha256msg2_epu32(m, w[(g + 3) % 4]);
			}
			m = _mm_add_epi32(w[g % 4], _mm_loadu_si128((const __m128i *) &K[4 * g]));
			s1 = _mm_sha256rnds2_epu32(s1, s0, m);
			s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0E));
		}
		s0 = _mm_add_epi32(s0, abef);
		s1 = _mm_add_epi32(s1, cdgh);
	}
	t = _mm_shuffle_epi32(s0, 0x1B);	/* FEBA */
	s1 = _mm_shuffle_epi32(s1, 0xB1);	/* DCHG */
	_mm_storeu_si128((__m128i *) &h[0], _mm_blend_epi16(t, s1, 0xF0));	/* DCBA */
	_mm_storeu_si128((__m128i *) &h[4], _mm_alignr_epi8(s1, t, 8));	/* HGFE */
}

/* whether this CPU has the SHA extensions (and SSSE3, SSE4.1 beside them): asked once */
static bool
has_sha_x86(void)
{
	static int	known = -1;

	if (known < 0)
	{
		unsigned int a,
					b,
					c,
					d;
		bool		sse = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSSE3) && (c & bit_SSE4_1);

		known = sse && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
	}
	return known;
}
#endif

/* n blocks at p mixed into h, by the CPU's instructions where it has them */
static void
blocks(uint32_t h[8], const uint8_t *p, size_t n)
{
#ifdef MS_SHA256_X86
	if (!ms_sha256_plain && has_sha_x86())
	{
		blocks_x86(h, p, n);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++)
		block(h, p + 64 * i);
}

bool
ms_sha256_hardware(void)
{
#ifdef MS_SHA256_X86
	return has_sha_x86();
#else
	return false;
#endif
}

void
ms_sha256(const uint8_t *buf, size_t len, uint8_t out[MS_SHA256_BYTES])
{
	uint32_t	h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	uint8_t		tail[128];
	size_t		whole = len - len % 64;
	size_t		rest = len % 64;
	size_t		tail_len = rest < 56 ? 64 : 128;
	uint64_t	bits = (uint64_t) len * 8;

	blocks(h, buf, whole / 64);
	/* the last bytes, a one bit, zeros, and the length in bits */
	memset(tail, 0, sizeof tail);
	if (rest > 0)
		memcpy(tail, buf + whole, rest);
	tail[rest] = 0x80;
	for (int i = 0; i < 8; i++)
		tail[tail_len - 1 - i] = (uint8_t) (bits >> (8 * i));
	blocks(h, tail, tail_len / 64);
	for (int i = 0; i < 8; i++)
	{
		out[4 * i] = (uint8_t) (h[i] >> 24);
		out[4 * i + 1] = (uint8_t) (h[i] >> 16);
		out[4 * i + 2] = (uint8_t) (h[i] >> 8);
		out[4 * i + 3] = (uint8_t) h[i];
	}
}

bool
ms_same_bytes(const uint8_t *a, const uint8_t *b, size_t len)
{
	uint8_t		d = 0;

	for (size_t i = 0; i < len; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}
