/*
 * seal.c - the pretend server's seal (msgs.c): HMAC-SHA256 over
 * ms_seal_input's 56 bytes, written out here so that the SQLite suite links
 * what a replica links and no more -- no libcrypto, on any target it is
 * cross-built for.  test_seal.c checks it against the server's seal of the
 * shared vectors (tests/unit/vectors.c, made with OpenSSL).
 */
#include "msgs.h"

#include <string.h>

typedef struct
{
	uint32_t	h[8];
	uint8_t		block[64];
	size_t		fill;
	uint64_t	bytes;
} sha256;

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void
sha256_block(sha256 *s, const uint8_t *b)
{
	uint32_t	w[64],
				v[8];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t) b[4 * i] << 24 | (uint32_t) b[4 * i + 1] << 16 |
			(uint32_t) b[4 * i + 2] << 8 | b[4 * i + 3];
	for (int i = 16; i < 64; i++)
		w[i] = w[i - 16] + (ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3)) +
			w[i - 7] + (ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10));
	memcpy(v, s->h, sizeof v);
	for (int i = 0; i < 64; i++)
	{
		uint32_t	t1 = v[7] + (ROR(v[4], 6) ^ ROR(v[4], 11) ^ ROR(v[4], 25)) +
			((v[4] & v[5]) ^ (~v[4] & v[6])) + K[i] + w[i];
		uint32_t	t2 = (ROR(v[0], 2) ^ ROR(v[0], 13) ^ ROR(v[0], 22)) +
			((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));

		memmove(v + 1, v, 7 * sizeof v[0]);
		v[4] += t1;
		v[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		s->h[i] += v[i];
}

static void
sha256_init(sha256 *s)
{
	static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

	memcpy(s->h, h0, sizeof h0);
	s->fill = 0;
	s->bytes = 0;
}

static void
sha256_add(sha256 *s, const uint8_t *p, size_t n)
{
	s->bytes += n;
	while (n--)
	{
		s->block[s->fill++] = *p++;
		if (s->fill == 64)
		{
			sha256_block(s, s->block);
			s->fill = 0;
		}
	}
}

static void
sha256_end(sha256 *s, uint8_t out[32])
{
	uint64_t	bits = s->bytes * 8;
	uint8_t		len[8];

	sha256_add(s, (const uint8_t *) "\x80", 1);
	while (s->fill != 56)
		sha256_add(s, (const uint8_t *) "", 1);
	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t) (bits >> (56 - 8 * i));
	sha256_add(s, len, 8);
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (uint8_t) (s->h[i] >> (24 - 8 * j));
}

void
tm_seal(const uint8_t *secret, size_t secret_len, const uint8_t replica[MS_REPLICA_BYTES],
		const uint8_t epoch[MS_EPOCH_BYTES], uint64_t number,
		const uint8_t nonce[MS_NONCE_BYTES], uint8_t out[MS_SEAL_BYTES])
{
	uint8_t		input[MS_SEAL_INPUT_BYTES],
				pad[64] = {0},
				inner[32];
	sha256		s;

	/* keys of up to a block, as the server's secrets (32 bytes) are */
	memcpy(pad, secret, secret_len < sizeof pad ? secret_len : sizeof pad);
	ms_seal_input(replica, epoch, number, nonce, input);
	for (int i = 0; i < 64; i++)
		pad[i] ^= 0x36;
	sha256_init(&s);
	sha256_add(&s, pad, sizeof pad);
	sha256_add(&s, input, sizeof input);
	sha256_end(&s, inner);
	for (int i = 0; i < 64; i++)
		pad[i] ^= 0x36 ^ 0x5c;
	sha256_init(&s);
	sha256_add(&s, pad, sizeof pad);
	sha256_add(&s, inner, sizeof inner);
	sha256_end(&s, out);
}
