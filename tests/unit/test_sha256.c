/*
 * test_sha256.c - src/shared/sha256.c against FIPS 180-4's examples and
 * against OpenSSL's SHA-256 (the server's) for every length from 0 to 300
 * bytes (each padding case: a block's last 8 bytes free or not) and a few
 * long inputs, by the CPU's SHA instructions (where it has them) and by
 * the portable rounds alike; ms_same_bytes for agreement and every one-byte difference.
 */
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "check.h"
#include "sha256.h"

static void
hex(const uint8_t *d, char *out)
{
	for (int i = 0; i < MS_SHA256_BYTES; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void
known(const char *in, const char *want)
{
	uint8_t		d[MS_SHA256_BYTES];
	char		got[2 * MS_SHA256_BYTES + 1];

	ms_sha256((const uint8_t *) in, strlen(in), d);
	hex(d, got);
	CHECK(strcmp(got, want) == 0, "sha256 of \"%s\": %s, not %s", in, got, want);
}

static void
like_openssl(const uint8_t *buf, size_t len)
{
	uint8_t		ours[MS_SHA256_BYTES];
	uint8_t		theirs[MS_SHA256_BYTES];
	unsigned int n = 0;

	ms_sha256(buf, len, ours);
	EVP_Digest(buf, len, theirs, &n, EVP_sha256(), NULL);
	CHECK(n == MS_SHA256_BYTES && memcmp(ours, theirs, MS_SHA256_BYTES) == 0,
		  "sha256 of %zu bytes agrees with OpenSSL's", len);
}

void
test_sha256(void)
{
	static uint8_t big[1 << 20];
	uint8_t		a[40];
	uint8_t		b[40];
	uint32_t	x = 2463534242u;

	known("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	known("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	known("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	for (size_t i = 0; i < sizeof big; i++)
	{
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		big[i] = (uint8_t) x;
	}
	/* both ways: by the CPU's SHA instructions (where it has them), and by block() alone */
	for (int plain = 0; plain < 2; plain++)
	{
		ms_sha256_plain = plain;
		known("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
		for (size_t len = 0; len <= 300; len++)
			like_openssl(big, len);
		like_openssl(big, 4096);
		like_openssl(big + 1, 65535);
		like_openssl(big, sizeof big);
	}
	ms_sha256_plain = false;
	printf("# sha256: %s\n", ms_sha256_hardware() ? "the CPU's SHA instructions, and block()" : "block() only");

	memcpy(a, big, sizeof a);
	memcpy(b, big, sizeof b);
	CHECK(ms_same_bytes(a, b, sizeof a), "ms_same_bytes: equal bytes agree");
	for (size_t i = 0; i < sizeof a; i++)
	{
		b[i] ^= 1;
		CHECK(!ms_same_bytes(a, b, sizeof a), "ms_same_bytes: a difference at byte %zu is seen", i);
		b[i] ^= 1;
	}
}
