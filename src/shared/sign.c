/*-------------------------------------------------------------------------
 * sign.c
 *	  Ed25519 signatures through OpenSSL libcrypto: the server signs what it
 *	  sends (sign.h).  A replica checks them with libsodium (verify.c) and
 *	  links neither this file nor libcrypto.
 *-------------------------------------------------------------------------
 */
#include "sign.h"

#include <openssl/evp.h>

struct ms_signer
{
	EVP_PKEY   *key;
};

ms_signer *
ms_signer_new(const uint8_t seed[MS_SIGN_SEED_BYTES], uint8_t public_key[MS_SIGN_KEY_BYTES])
{
	EVP_PKEY   *key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, MS_SIGN_SEED_BYTES);
	size_t		len = MS_SIGN_KEY_BYTES;
	ms_signer  *s;

	if (key == NULL)
		return NULL;
	if (EVP_PKEY_get_raw_public_key(key, public_key, &len) != 1 || len != MS_SIGN_KEY_BYTES ||
		(s = OPENSSL_malloc(sizeof *s)) == NULL)
	{
		EVP_PKEY_free(key);
		return NULL;
	}
	s->key = key;
	return s;
}

bool
ms_signer_sign(ms_signer *s, const uint8_t digest[MS_SIGN_DIGEST_BYTES], uint8_t signature[MS_SIGNATURE_BYTES])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t		len = MS_SIGNATURE_BYTES;
	bool		ok;

	if (ctx == NULL)
		return false;
	/* Ed25519 takes no digest of its own: the message is the 32-byte digest, signed whole */
	ok = EVP_DigestSignInit(ctx, NULL, NULL, NULL, s->key) == 1 &&
		EVP_DigestSign(ctx, signature, &len, digest, MS_SIGN_DIGEST_BYTES) == 1 &&
		len == MS_SIGNATURE_BYTES;
	EVP_MD_CTX_free(ctx);
	return ok;
}

void
ms_signer_free(ms_signer *s)
{
	if (s == NULL)
		return;
	EVP_PKEY_free(s->key);
	OPENSSL_free(s);
}

bool
ms_sign_check(const uint8_t key[MS_SIGN_KEY_BYTES], const uint8_t digest[MS_SIGN_DIGEST_BYTES],
			  const uint8_t *signature, size_t signature_len)
{
	EVP_PKEY   *k;
	EVP_MD_CTX *ctx;
	bool		ok;

	if (signature_len != MS_SIGNATURE_BYTES)
		return false;
	k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, key, MS_SIGN_KEY_BYTES);
	if (k == NULL)
		return false;
	ctx = EVP_MD_CTX_new();
	ok = ctx != NULL && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k) == 1 &&
		EVP_DigestVerify(ctx, signature, MS_SIGNATURE_BYTES, digest, MS_SIGN_DIGEST_BYTES) == 1;
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(k);
	return ok;
}
