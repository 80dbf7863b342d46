/*
 * security.c - the context's security configuration (lite_config_t.security*), checked at
 * lite_init with OpenSSL so that a wrong file is a configuration error naming key and path,
 * not a handshake that fails later on some connection. Transport-neutral: a backend takes the
 * checked paths and key from struct lite_security (transport.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lite_int.h"
#include "security.h"

#ifdef LITE_HAVE_TLS
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#endif

#define FAILS(...) (lite_fmt(err, errlen, __VA_ARGS__), -LITE_ERR_CONFIG)
#define SAY(...)   lite_fmt(err, errlen, __VA_ARGS__)

#ifdef LITE_HAVE_TLS
static const char *const key_name[LITE_SEC_NF] = {"security_cert", "security_key", "security_ca",
                                                  "security_psk"};

/* "litetx-rank-<n>" -> n, else -1. */
static int rank_of_name(const char *s, size_t n)
{
    size_t p = sizeof(LITE_SEC_RANK_PREFIX) - 1;
    if (n <= p || n > p + 6 || memcmp(s, LITE_SEC_RANK_PREFIX, p) != 0)
        return -1;
    int v = 0;
    for (size_t i = p; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (n > p + 1 && s[p] == '0')
        return -1; /* one spelling per rank */
    return v;
}

int lite_security_cert_rank(const void *x509)
{
    X509 *x = (X509 *)x509;
    int found = -1;
    GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    if (sans) {
        for (int i = 0; i < sk_GENERAL_NAME_num(sans); i++) {
            const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
            if (g->type != GEN_DNS)
                continue;
            const ASN1_STRING *a = g->d.dNSName;
            int r =
                rank_of_name((const char *)ASN1_STRING_get0_data(a), (size_t)ASN1_STRING_length(a));
            if (r >= 0 && found >= 0 && r != found) {
                found = -2; /* two ranks: ambiguous, refused */
                break;
            }
            if (r >= 0)
                found = r;
        }
        GENERAL_NAMES_free(sans);
        if (found != -1)
            return found < 0 ? -1 : found;
    }
    char cn[64];
    int n = X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn));
    return n > 0 ? rank_of_name(cn, (size_t)n) : -1;
}

/* Open path for reading, with a message naming the key for each way it can fail. */
static BIO *open_file(int f, const char *path, const char *src, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        SAY("%s=%s (from %s): cannot open: %s", key_name[f], path, src, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        SAY("%s=%s (from %s): not a regular file", key_name[f], path, src);
        return NULL;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        SAY("%s=%s (from %s): cannot read: %s", key_name[f], path, src, strerror(errno));
        return NULL;
    }
    BIO *b = BIO_new_fp(fp, BIO_CLOSE);
    if (!b) {
        fclose(fp);
        SAY("%s=%s: out of memory", key_name[f], path);
    }
    return b;
}

/* An encrypted key cannot be used unattended: no passphrase is ever asked for. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    return -1;
}

static void asn1_time_text(const ASN1_TIME *t, char *out, size_t len)
{
    out[0] = '\0';
    BIO *b = BIO_new(BIO_s_mem());
    if (!b)
        return;
    if (ASN1_TIME_print(b, t) > 0) {
        int n = BIO_read(b, out, (int)len - 1);
        out[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
}

static int check_ca(struct lite_security *sec, int rank, const char *const path[],
                    const char *const src[], bool rank_check, char *err, size_t errlen)
{
    X509 *cert = NULL;
    EVP_PKEY *key = NULL;
    STACK_OF(X509) *chain = sk_X509_new_null(), *cas = sk_X509_new_null();
    X509_STORE *store = NULL;
    X509_STORE_CTX *vctx = NULL;
    int rc = -LITE_ERR_CONFIG;
    BIO *b = NULL;
    char when[64];
    if (!chain || !cas) {
        SAY("security: out of memory");
        goto out;
    }
    /* The certificate, and any intermediates after it in the same file. */
    if (!(b = open_file(LITE_SEC_F_CERT, path[0], src[0], err, errlen)))
        goto out;
    cert = PEM_read_bio_X509(b, NULL, no_passphrase, NULL);
    if (!cert) {
        SAY("security_cert=%s (from %s): not a PEM certificate", path[0], src[0]);
        goto out;
    }
    for (X509 *x; (x = PEM_read_bio_X509(b, NULL, no_passphrase, NULL)) != NULL;)
        sk_X509_push(chain, x);
    BIO_free(b);
    ERR_clear_error();
    if (!(b = open_file(LITE_SEC_F_KEY, path[1], src[1], err, errlen)))
        goto out;
    key = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL);
    if (!key) {
        SAY("security_key=%s (from %s): not a PEM private key (or one encrypted with a "
            "passphrase, which cannot be used unattended)",
            path[1], src[1]);
        goto out;
    }
    BIO_free(b);
    if (!(b = open_file(LITE_SEC_F_CA, path[2], src[2], err, errlen)))
        goto out;
    for (X509 *x; (x = PEM_read_bio_X509(b, NULL, no_passphrase, NULL)) != NULL;)
        sk_X509_push(cas, x);
    if (sk_X509_num(cas) == 0) {
        SAY("security_ca=%s (from %s): no PEM certificate in it", path[2], src[2]);
        goto out;
    }
    ERR_clear_error();
    if (X509_check_private_key(cert, key) != 1) {
        SAY("security_key=%s (from %s) does not match security_cert=%s (from %s)", path[1], src[1],
            path[0], src[0]);
        goto out;
    }
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
        asn1_time_text(X509_get0_notAfter(cert), when, sizeof(when));
        SAY("security_cert=%s (from %s): expired (not after %s)", path[0], src[0], when);
        goto out;
    }
    if (X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0) {
        asn1_time_text(X509_get0_notBefore(cert), when, sizeof(when));
        SAY("security_cert=%s (from %s): not valid yet (not before %s)", path[0], src[0], when);
        goto out;
    }
    store = X509_STORE_new();
    vctx = X509_STORE_CTX_new();
    if (!store || !vctx) {
        SAY("security: out of memory");
        goto out;
    }
    for (int i = 0; i < sk_X509_num(cas); i++)
        X509_STORE_add_cert(store, sk_X509_value(cas, i));
    if (X509_STORE_CTX_init(vctx, store, cert, chain) != 1 || X509_verify_cert(vctx) != 1) {
        SAY("security_cert=%s (from %s) is not accepted by security_ca=%s (from %s): %s", path[0],
            src[0], path[2], src[2], X509_verify_cert_error_string(X509_STORE_CTX_get_error(vctx)));
        goto out;
    }
    int named = lite_security_cert_rank(cert);
    if (named < 0) {
        SAY("security_cert=%s (from %s) names no rank: its subject CN or a DNS name must be "
            "\"" LITE_SEC_RANK_PREFIX "%d\"",
            path[0], src[0], rank);
        goto out;
    }
    if (named != rank && rank_check) {
        SAY("security_cert=%s (from %s) is rank %d's certificate, but this is rank %d", path[0],
            src[0], named, rank);
        goto out;
    }
    for (int f = 0; f < 3; f++) {
        if (strlen(path[f]) >= LITE_SEC_PATH_MAX) {
            SAY("%s: path longer than %d bytes", key_name[f], LITE_SEC_PATH_MAX - 1);
            goto out;
        }
    }
    memcpy(sec->cert, path[0], strlen(path[0]) + 1);
    memcpy(sec->key, path[1], strlen(path[1]) + 1);
    memcpy(sec->ca, path[2], strlen(path[2]) + 1);
    rc = 0;
out:
    BIO_free(b);
    X509_STORE_CTX_free(vctx);
    X509_STORE_free(store);
    X509_free(cert);
    EVP_PKEY_free(key);
    sk_X509_pop_free(chain, X509_free);
    sk_X509_pop_free(cas, X509_free);
    ERR_clear_error();
    return rc;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The PSK file: the key in hex (16..64 bytes), surrounding white space allowed. */
static int check_psk(struct lite_security *sec, const char *path, const char *src, char *err,
                     size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return FAILS("security_psk=%s (from %s): cannot open: %s", path, src, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return FAILS("security_psk=%s (from %s): not a regular file", path, src);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return FAILS("security_psk=%s (from %s): cannot read: %s", path, src, strerror(errno));
    char buf[4 * LITE_SEC_PSK_MAX];
    size_t n = fread(buf, 1, sizeof(buf), fp);
    bool more = fgetc(fp) != EOF;
    fclose(fp);
    size_t a = 0;
    while (a < n && (buf[a] == ' ' || buf[a] == '\t' || buf[a] == '\n' || buf[a] == '\r'))
        a++;
    while (n > a &&
           (buf[n - 1] == ' ' || buf[n - 1] == '\t' || buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    size_t digits = n - a;
    bool ok = !more && digits % 2 == 0 && digits >= 32 && digits <= 2 * LITE_SEC_PSK_MAX;
    for (size_t i = a; ok && i < n; i++)
        ok = hexval(buf[i]) >= 0;
    if (!ok)
        return FAILS("security_psk=%s (from %s): must hold a key of 16 to %d bytes written in "
                     "hex (32 to %d hex digits), e.g. from \"openssl rand -hex 32\"",
                     path, src, LITE_SEC_PSK_MAX, 2 * LITE_SEC_PSK_MAX);
    if (st.st_mode & (S_IRWXG | S_IRWXO))
        LITE_WARN("security_psk=%s: readable by others than its owner (chmod 600)", path);
    sec->psk_len = digits / 2;
    for (size_t i = 0; i < sec->psk_len; i++)
        sec->psk[i] = (uint8_t)(hexval(buf[a + 2 * i]) << 4 | hexval(buf[a + 2 * i + 1]));
    memset(buf, 0, sizeof(buf));
    return 0;
}

#else
int lite_security_cert_rank(const void *x509)
{
    return -1;
}
#endif

int lite_security_check(struct lite_security *sec, int rank, const char *const path[LITE_SEC_NF],
                        const char *const src[LITE_SEC_NF], bool rank_check, char *err,
                        size_t errlen)
{
    static const char *const mode_name[] = {"off", "ca", "psk"};
#ifndef LITE_HAVE_TLS
    (void)path, (void)src, (void)rank, (void)rank_check;
    if (sec->mode != LITE_SEC_OFF)
        return FAILS("security=%s: this liblitetx was built without OpenSSL (libssl-dev), so it "
                     "cannot encrypt",
                     mode_name[sec->mode]);
    return 0;
#else
    static const char *const env_name[LITE_SEC_NF] = {"LITETX_SECURITY_CERT", "LITETX_SECURITY_KEY",
                                                      "LITETX_SECURITY_CA", "LITETX_SECURITY_PSK"};
    if (sec->mode == LITE_SEC_OFF)
        return 0;
    int first = sec->mode == LITE_SEC_CA ? LITE_SEC_F_CERT : LITE_SEC_F_PSK;
    int last = sec->mode == LITE_SEC_CA ? LITE_SEC_F_CA : LITE_SEC_F_PSK;
    for (int f = first; f <= last; f++)
        if (!path[f])
            return FAILS("security=%s needs %s, which is not set (lite_config_t.%s, %s or the "
                         "config file's \"%s\")",
                         mode_name[sec->mode], key_name[f], key_name[f], env_name[f], key_name[f]);
    if (sec->mode == LITE_SEC_PSK)
        return check_psk(sec, path[LITE_SEC_F_PSK], src[LITE_SEC_F_PSK], err, errlen);
    return check_ca(sec, rank, path, src, rank_check, err, errlen);
#endif
}
