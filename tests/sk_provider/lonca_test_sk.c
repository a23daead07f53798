/*
 * A software FIDO security key for Lonca's tests: an OpenSSH security-key provider library
 * (SecurityKeyProvider, SSH_SK_PROVIDER, `ssh-keygen -w`) that the real ssh-keygen loads
 * through ssh-sk-helper to enrol (-t ed25519-sk / ecdsa-sk) and sign (-Y sign) with, where no
 * FIDO device exists. It is a TEST AUTHENTICATOR, like the console tests' software WebAuthn
 * credential: its "key handle" holds the private key itself, so anyone with the handle file can
 * sign. Never use it for a real key.
 *
 * Written against the interface OpenSSH 9.2 loads (sk-api.h, SSH_SK_VERSION_MAJOR 0x000a0000:
 * ssh-sk-helper refuses any other major version, and the structures below must match its
 * layout byte for byte; a later OpenSSH whose sk-api moved on needs this file moved with it).
 * What the authenticator signs is PROTOCOL.u2f's:
 *     SHA256(application) || flags || uint32 counter (big endian) || SHA256(data)
 * Ed25519 over those bytes, ECDSA P-256 over their SHA-256 (ssh-ed25519-sk.c, ssh-ecdsa-sk.c).
 *
 * Test controls, read from the environment (ssh-keygen passes it to ssh-sk-helper):
 *   LONCA_TEST_SK_COUNTER  a file holding the signature counter; each signature adds one to it,
 *                          as a real key's counter goes up (unset: the counter is 0).
 *   LONCA_TEST_SK_NO_UP    set to 1: the signature's flags say the user was NOT present (a key
 *                          that signed without a touch), to check verifiers refuse it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#define SSH_SK_VERSION_MAJOR 0x000a0000
#define SSH_SK_USER_PRESENCE_REQD 0x01
#define SSH_SK_ECDSA 0x00
#define SSH_SK_ED25519 0x01
#define SSH_SK_ERR_GENERAL -1
#define SSH_SK_ERR_UNSUPPORTED -2

struct sk_enroll_response {
	uint8_t flags;
	uint8_t *public_key;
	size_t public_key_len;
	uint8_t *key_handle;
	size_t key_handle_len;
	uint8_t *signature;
	size_t signature_len;
	uint8_t *attestation_cert;
	size_t attestation_cert_len;
	uint8_t *authdata;
	size_t authdata_len;
};

struct sk_sign_response {
	uint8_t flags;
	uint32_t counter;
	uint8_t *sig_r;
	size_t sig_r_len;
	uint8_t *sig_s;
	size_t sig_s_len;
};

struct sk_resident_key;

struct sk_option {
	char *name;
	char *value;
	uint8_t required;
};

/* The key handle: a tag, SHA256(application) (a real authenticator's credential is bound to
 * its relying party, so a handle presented for another application fails), then the private
 * key as PKCS#8 DER. */
#define HANDLE_TAG "LONCA-TEST-SK-1"
#define HANDLE_HEAD (sizeof(HANDLE_TAG) - 1 + SHA256_DIGEST_LENGTH)

uint32_t sk_api_version(void) { return SSH_SK_VERSION_MAJOR; }

static int required_option(struct sk_option **options)
{
	/* no option is understood here: one the caller requires is an error, as in any provider */
	for (size_t i = 0; options != NULL && options[i] != NULL; i++)
		if (options[i]->required)
			return 1;
	return 0;
}

static int public_point(EVP_PKEY *pkey, uint32_t alg, uint8_t **out, size_t *out_len)
{
	size_t len = 0;
	if (alg == SSH_SK_ED25519) {
		if (EVP_PKEY_get_raw_public_key(pkey, NULL, &len) != 1 || (*out = malloc(len)) == NULL)
			return -1;
		if (EVP_PKEY_get_raw_public_key(pkey, *out, &len) != 1)
			return -1;
	} else {
		/* the SEC1 uncompressed point (04 || x || y), 65 bytes, as OpenSSH expects */
		if (EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, NULL, 0, &len) != 1
		    || (*out = malloc(len)) == NULL)
			return -1;
		if (EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, *out, len, &len) != 1
		    || len != 65 || (*out)[0] != 4)
			return -1;
	}
	*out_len = len;
	return 0;
}

int sk_enroll(uint32_t alg, const uint8_t *challenge, size_t challenge_len, const char *application,
              uint8_t flags, const char *pin, struct sk_option **options,
              struct sk_enroll_response **enroll_response)
{
	struct sk_enroll_response *r = NULL;
	EVP_PKEY *pkey = NULL;
	uint8_t *der = NULL;
	int der_len, ret = SSH_SK_ERR_GENERAL;
	(void)challenge; (void)challenge_len; (void)pin;

	if (enroll_response == NULL || application == NULL)
		return SSH_SK_ERR_GENERAL;
	*enroll_response = NULL;
	if (required_option(options))
		return SSH_SK_ERR_UNSUPPORTED;
	if (alg == SSH_SK_ED25519)
		pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	else if (alg == SSH_SK_ECDSA)
		pkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	else
		return SSH_SK_ERR_UNSUPPORTED;
	if (pkey == NULL || (r = calloc(1, sizeof(*r))) == NULL)
		goto out;
	r->flags = flags;
	if (public_point(pkey, alg, &r->public_key, &r->public_key_len) != 0)
		goto out;
	if ((der_len = i2d_PrivateKey(pkey, &der)) <= 0)
		goto out;
	r->key_handle_len = HANDLE_HEAD + (size_t)der_len;
	if ((r->key_handle = malloc(r->key_handle_len)) == NULL)
		goto out;
	memcpy(r->key_handle, HANDLE_TAG, sizeof(HANDLE_TAG) - 1);
	SHA256((const uint8_t *)application, strlen(application), r->key_handle + sizeof(HANDLE_TAG) - 1);
	memcpy(r->key_handle + HANDLE_HEAD, der, (size_t)der_len);
	/* no attestation: an empty signature and no certificate (attestation "none") */
	if ((r->signature = calloc(1, 1)) == NULL)
		goto out;
	*enroll_response = r;
	r = NULL;
	ret = 0;
out:
	if (r != NULL) {
		free(r->public_key);
		free(r->key_handle);
		free(r->signature);
		free(r);
	}
	OPENSSL_free(der);
	EVP_PKEY_free(pkey);
	return ret;
}

/* The next counter value, kept in the file LONCA_TEST_SK_COUNTER names (0 without one). */
static int next_counter(uint32_t *counter)
{
	const char *path = getenv("LONCA_TEST_SK_COUNTER");
	unsigned long value = 0;
	FILE *f;

	*counter = 0;
	if (path == NULL || *path == '\0')
		return 0;
	if ((f = fopen(path, "r")) != NULL) {
		if (fscanf(f, "%lu", &value) != 1)
			value = 0;
		fclose(f);
	}
	value++;
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	fprintf(f, "%lu\n", value);
	if (fclose(f) != 0)
		return -1;
	*counter = (uint32_t)value;
	return 0;
}

static uint8_t *copy_bn(const BIGNUM *n, size_t *len)
{
	uint8_t *out;
	*len = (size_t)BN_num_bytes(n);
	if ((out = calloc(1, *len ? *len : 1)) != NULL)
		BN_bn2bin(n, out);
	return out;
}

int sk_sign(uint32_t alg, const uint8_t *data, size_t data_len, const char *application,
            const uint8_t *key_handle, size_t key_handle_len, uint8_t flags, const char *pin,
            struct sk_option **options, struct sk_sign_response **sign_response)
{
	struct sk_sign_response *r = NULL;
	uint8_t apphash[SHA256_DIGEST_LENGTH], signed_data[SHA256_DIGEST_LENGTH * 2 + 5];
	const uint8_t *der;
	EVP_PKEY *pkey = NULL;
	EVP_MD_CTX *md = NULL;
	ECDSA_SIG *ec_sig = NULL;
	uint8_t *sig = NULL;
	const uint8_t *p;
	size_t sig_len = 0;
	const char *no_up = getenv("LONCA_TEST_SK_NO_UP");
	int ret = SSH_SK_ERR_GENERAL;
	(void)pin;

	if (sign_response == NULL || application == NULL || key_handle == NULL)
		return SSH_SK_ERR_GENERAL;
	*sign_response = NULL;
	if (required_option(options))
		return SSH_SK_ERR_UNSUPPORTED;
	SHA256((const uint8_t *)application, strlen(application), apphash);
	if (key_handle_len <= HANDLE_HEAD || memcmp(key_handle, HANDLE_TAG, sizeof(HANDLE_TAG) - 1) != 0
	    || memcmp(key_handle + sizeof(HANDLE_TAG) - 1, apphash, SHA256_DIGEST_LENGTH) != 0)
		return SSH_SK_ERR_GENERAL;  /* not this authenticator's credential for this application */
	der = key_handle + HANDLE_HEAD;
	if ((pkey = d2i_AutoPrivateKey(NULL, &der, (long)(key_handle_len - HANDLE_HEAD))) == NULL)
		goto out;
	if ((alg == SSH_SK_ED25519) != (EVP_PKEY_get_base_id(pkey) == EVP_PKEY_ED25519))
		goto out;
	if ((r = calloc(1, sizeof(*r))) == NULL || next_counter(&r->counter) != 0)
		goto out;
	r->flags = flags & SSH_SK_USER_PRESENCE_REQD;  /* the key was touched: user present */
	if (no_up != NULL && strcmp(no_up, "1") == 0)
		r->flags &= (uint8_t)~SSH_SK_USER_PRESENCE_REQD;

	memcpy(signed_data, apphash, sizeof(apphash));
	signed_data[32] = r->flags;
	signed_data[33] = (uint8_t)(r->counter >> 24);
	signed_data[34] = (uint8_t)(r->counter >> 16);
	signed_data[35] = (uint8_t)(r->counter >> 8);
	signed_data[36] = (uint8_t)r->counter;
	SHA256(data, data_len, signed_data + 37);  /* since API 7 the provider hashes the message */

	if ((md = EVP_MD_CTX_new()) == NULL
	    || EVP_DigestSignInit(md, NULL, alg == SSH_SK_ED25519 ? NULL : EVP_sha256(), NULL, pkey) != 1
	    || EVP_DigestSign(md, NULL, &sig_len, signed_data, sizeof(signed_data)) != 1
	    || (sig = malloc(sig_len)) == NULL
	    || EVP_DigestSign(md, sig, &sig_len, signed_data, sizeof(signed_data)) != 1)
		goto out;
	if (alg == SSH_SK_ED25519) {
		r->sig_r = sig;  /* the 64-byte signature, whole, in sig_r */
		r->sig_r_len = sig_len;
		sig = NULL;
	} else {
		const BIGNUM *br, *bs;
		p = sig;
		if ((ec_sig = d2i_ECDSA_SIG(NULL, &p, (long)sig_len)) == NULL)
			goto out;
		ECDSA_SIG_get0(ec_sig, &br, &bs);
		if ((r->sig_r = copy_bn(br, &r->sig_r_len)) == NULL || (r->sig_s = copy_bn(bs, &r->sig_s_len)) == NULL)
			goto out;
	}
	*sign_response = r;
	r = NULL;
	ret = 0;
out:
	if (r != NULL) {
		free(r->sig_r);
		free(r->sig_s);
		free(r);
	}
	free(sig);
	ECDSA_SIG_free(ec_sig);
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(pkey);
	return ret;
}

int sk_load_resident_keys(const char *pin, struct sk_option **options, struct sk_resident_key ***rks, size_t *nrks)
{
	(void)pin; (void)options;
	if (rks != NULL)
		*rks = NULL;
	if (nrks != NULL)
		*nrks = 0;
	return SSH_SK_ERR_UNSUPPORTED;  /* no resident keys on this authenticator */
}
