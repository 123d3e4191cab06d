/*
 * test_sign.c - signatures (src/shared/sign.h, docs/protocol.md 2.4) held to
 * the vectors make_vectors.py derives with its own Ed25519: the server's
 * signing (libsodium) makes them byte for byte, the check both sides run
 * (libsodium) and OpenSSL's, a third implementation, take them, and any
 * other bytes fail.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "check.h"
#include "sha256.h"
#include "sign.h"
#include "vectors.h"
#include "wire.h"

/* openssl_takes: whether OpenSSL's Ed25519 takes the signature of digest under key */
static bool
openssl_takes(const uint8_t key[32], const uint8_t digest[32], const uint8_t sig[64])
{
	EVP_PKEY   *k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, key, 32);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool		ok = k != NULL && ctx != NULL && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k) == 1 &&
		EVP_DigestVerify(ctx, sig, 64, digest, 32) == 1;

	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(k);
	return ok;
}

static size_t
unhex(const char *hex, uint8_t *out, size_t cap)
{
	long		n = ms_hex_decode(hex, out, cap);

	return n < 0 ? 0 : (size_t) n;
}

/* whether a whole message's signature verifies under key, as a replica checks it */
static bool
verifies(const uint8_t *key, const uint8_t *msg, size_t len)
{
	size_t		at,
				after;
	const uint8_t *sig;
	char		reason[MS_REASON_MAX];
	uint8_t		digest[32];

	if (ms_sign_find(msg, len, &at, &after, &sig, reason) != MS_SIGN_FOUND)
		return false;
	ms_sign_message_digest(msg, len, at, after, digest);
	return ms_verify(key, digest, sig);
}

static void
one_vector(ms_signer *s, const uint8_t pub[32], const char *head_hex, const char *body_hex,
		   const char *digest_hex, const char *signature_hex, const char *signed_hex, const char *what)
{
	uint8_t		head[256],
				body[256],
				want[512],
				msg[512],
				digest[32],
				want_digest[32],
				sig[64],
				want_sig[64],
				body_hash[32];
	size_t		hn = unhex(head_hex, head, sizeof head),
				bn = unhex(body_hex, body, sizeof body),
				wn = unhex(signed_hex, want, sizeof want),
				n,
				at = 0,
				after = 0;
	const uint8_t *found = NULL;
	char		reason[MS_REASON_MAX];

	unhex(digest_hex, want_digest, sizeof want_digest);
	unhex(signature_hex, want_sig, sizeof want_sig);
	ms_sha256(body, bn, body_hash);
	ms_sign_digest(head, hn, body_hash, digest);
	CHECK(memcmp(digest, want_digest, 32) == 0, "%s: the digest is the vector's", what);
	CHECK(ms_signer_sign(s, digest, sig) && memcmp(sig, want_sig, 64) == 0,
		  "%s: the server's signature is the vector's", what);
	memcpy(msg, head, hn);
	n = hn + ms_sign_field(sig, msg + hn);
	memcpy(msg + n, body, bn);
	n += bn;
	CHECK(n == wn && memcmp(msg, want, n) == 0, "%s: head, signature field, body: the vector's bytes", what);
	CHECK(ms_sign_find(want, wn, &at, &after, &found, reason) == MS_SIGN_FOUND && at == hn &&
		  after == hn + MS_SIGNATURE_FIELD_BYTES && found == want + hn + 2,
		  "%s: the signature is found between head and body: %s", what, reason);
	CHECK(ms_verify(pub, digest, sig), "%s: libsodium takes it", what);
	CHECK(ms_sign_check(pub, digest, sig, 64), "%s: sync.inspect's check takes it", what);
	CHECK(openssl_takes(pub, digest, sig), "%s: OpenSSL takes it", what);
	CHECK(verifies(pub, want, wn), "%s: the whole message verifies", what);

	/* every bit of the message flipped: refused, whatever it hit (head, tag, length, signature, body) */
	{
		int			bad = 0;

		for (size_t i = 0; i < wn; i++)
			for (int b = 0; b < 8; b++)
			{
				want[i] ^= (uint8_t) (1 << b);
				if (verifies(pub, want, wn))
					bad++;
				want[i] ^= (uint8_t) (1 << b);
			}
		CHECK(bad == 0, "%s: %d single-bit flips of the signed message still verify", what, bad);
	}
	/* every truncation */
	{
		int			bad = 0;

		for (size_t len = 0; len < wn; len++)
			if (verifies(pub, want, len))
				bad++;
		CHECK(bad == 0, "%s: %d truncations still verify", what, bad);
	}
}

void
test_sign(void)
{
	uint8_t		pub[32],
				want_pub[32],
				other_pub[32],
				seed[32],
				msg[512],
				digest[32],
				sig[64];
	size_t		n,
				at,
				after;
	const uint8_t *found;
	char		reason[MS_REASON_MAX];
	ms_signer  *s = ms_signer_new(ms_vector_sign_seed, pub);
	ms_signer  *other;

	CHECK(s != NULL, "a signer of the vector's seed");
	if (s == NULL)
		return;
	unhex(ms_vector_sign_public_hex, want_pub, sizeof want_pub);
	CHECK(memcmp(pub, want_pub, 32) == 0, "the public key is the vector's");
	one_vector(s, pub, ms_vector_head_hex, ms_vector_body_hex, ms_vector_sign_digest_hex,
			   ms_vector_signature_hex, ms_vector_signed_hex, "the sample message");
	one_vector(s, pub, ms_vector_filed_head_hex, ms_vector_filed_body_hex, ms_vector_filed_digest_hex,
			   ms_vector_filed_signature_hex, ms_vector_signed_filed_hex, "a Filed answer");

	/* another key's signature of the same bytes */
	memcpy(seed, ms_vector_sign_seed, 32);
	seed[0] ^= 1;
	other = ms_signer_new(seed, other_pub);
	n = unhex(ms_vector_signed_hex, msg, sizeof msg);
	CHECK(ms_sign_find(msg, n, &at, &after, &found, reason) == MS_SIGN_FOUND, "found: %s", reason);
	ms_sign_message_digest(msg, n, at, after, digest);
	CHECK(other != NULL && ms_signer_sign(other, digest, sig), "another key signs");
	memcpy(msg + at + 2, sig, 64);
	CHECK(!verifies(pub, msg, n), "a message signed by another key does not verify under the server's");
	CHECK(verifies(other_pub, msg, n), "... and does under the other");
	CHECK(!ms_sign_check(pub, digest, sig, 64), "sync.inspect's check agrees");
	CHECK(!openssl_takes(pub, digest, sig), "OpenSSL agrees");
	ms_signer_free(other);

	/* the decoder takes a signed message, and a signature of any other length is refused */
	{
		ms_wire_status st;
		Sync__ToReplica *m;

		n = unhex(ms_vector_signed_hex, msg, sizeof msg);
		m = ms_to_replica_decode(msg, n, 1 << 20, &ms_test_allocator, &st, reason);
		CHECK(m != NULL && m->signature.len == 64 && memcmp(m->signature.data, msg + at + 2, 64) == 0,
			  "a signed message decodes, its signature field 14: %s", reason);
		if (m)
			sync__to_replica__free_unpacked(m, &ms_test_allocator);
		/* a signature cut to 63 bytes (its length byte says 63: the rest is the body, misread) */
		msg[at + 1] = 63;
		CHECK(ms_sign_find(msg, n, &at, &after, &found, reason) == MS_SIGN_MALFORMED &&
			  strstr(reason, "not 64 bytes") != NULL, "a truncated signature is malformed: %s", reason);
		m = ms_to_replica_decode(msg, n, 1 << 20, &ms_test_allocator, &st, reason);
		CHECK(m == NULL, "and the decoder refuses it");
		if (m)
			sync__to_replica__free_unpacked(m, &ms_test_allocator);
	}

	/* two signatures */
	{
		uint8_t		two[600];
		size_t		hn;

		n = unhex(ms_vector_signed_hex, msg, sizeof msg);
		ms_sign_find(msg, n, &at, &after, &found, reason);
		hn = at;
		memcpy(two, msg, after);
		memcpy(two + after, msg + hn, MS_SIGNATURE_FIELD_BYTES);
		memcpy(two + after + MS_SIGNATURE_FIELD_BYTES, msg + after, n - after);
		CHECK(ms_sign_find(two, n + MS_SIGNATURE_FIELD_BYTES, &at, &after, &found, reason) == MS_SIGN_MALFORMED &&
			  strstr(reason, "two signatures") != NULL, "two signatures are malformed: %s", reason);
	}

	/* an unsigned message: none */
	n = unhex(ms_vector_head_hex, msg, sizeof msg);
	n += unhex(ms_vector_body_hex, msg + n, sizeof msg - n);
	CHECK(ms_sign_find(msg, n, &at, &after, &found, reason) == MS_SIGN_NONE, "an unsigned message carries none");
	ms_signer_free(s);
}
