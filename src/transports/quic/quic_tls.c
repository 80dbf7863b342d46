/*
 * quic_tls.c - GnuTLS credentials and sessions for the quic backend (docs/QUIC.md, "Security").
 *
 * TLS 1.3 only, AES-GCM only, ALPN "litetx" required, no session tickets, no 0-RTT.
 *   ca:  both ends present a certificate chaining to the configured CA; the client checks that
 *        the server's names the rank it dialled (GnuTLS's host name check against
 *        litetx-rank-<n>), the server checks the client's against the rank its HELLO claims.
 *   psk: both ends prove the job's external PSK (TLS 1.3 ECDHE-PSK): mutual authentication of
 *        the job, no rank binding (as on tcp).
 *   off: each rank makes an ephemeral self-signed certificate at open and nobody checks it:
 *        the traffic is encrypted but NOT authenticated (QUIC has no plaintext mode).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "tp_support.h"
#include "quic_tls.h"

#define PSK_IDENTITY "litetx-job-psk"
/* AES-GCM suites only (ChaCha20 is several times slower in GnuTLS here); no TLS 1.3
 * middlebox compatibility mode (QUIC forbids it). */
#define PRIO_CERT                                                                                  \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:%DISABLE_TLS13_COMPAT_"   \
    "MODE"
#define PRIO_PSK PRIO_CERT ":-KX-ALL:+ECDHE-PSK"

struct quic_tls {
    int mode;
    gnutls_certificate_credentials_t cred;
    gnutls_psk_client_credentials_t pskc;
    gnutls_psk_server_credentials_t psks;
    gnutls_priority_t prio;
    uint8_t psk[LITE_SEC_PSK_MAX];
    size_t psk_len;
};

/* The server's PSK lookup has no user pointer of its own: the session's db pointer (unused
 * otherwise; the session pointer belongs to ngtcp2's crypto helper) carries the instance. */
static int psk_server_key(gnutls_session_t s, const gnutls_datum_t *user, gnutls_datum_t *key)
{
    const struct quic_tls *tls = gnutls_db_get_ptr(s);
    if (!tls || user->size != sizeof(PSK_IDENTITY) - 1 ||
        memcmp(user->data, PSK_IDENTITY, user->size) != 0)
        return -1; /* unknown identity: the handshake fails */
    key->data = gnutls_malloc(tls->psk_len);
    if (!key->data)
        return -1;
    memcpy(key->data, tls->psk, tls->psk_len);
    key->size = (unsigned)tls->psk_len;
    return 0;
}

/* An ephemeral P-256 key and a self-signed certificate naming `rank` (security off). */
static int self_signed(gnutls_certificate_credentials_t cred, int rank, const char **step)
{
    gnutls_x509_privkey_t key = NULL;
    gnutls_x509_crt_t crt = NULL;
    char name[32];
    uint8_t serial[8];
    time_t now = time(NULL);
    snprintf(name, sizeof(name), "%s%d", LITE_SEC_RANK_PREFIX, rank);
    int rc = gnutls_x509_privkey_init(&key);
    *step = "making an ephemeral key";
    if (!rc)
        rc = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
                                          GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
    if (!rc) {
        *step = "making a self-signed certificate";
        rc = gnutls_x509_crt_init(&crt);
    }
    if (!rc)
        rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
    if (!rc) {
        serial[0] &= 0x7f; /* a positive serial */
        rc = gnutls_x509_crt_set_version(crt, 3);
    }
    if (!rc)
        rc = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial));
    if (!rc)
        rc = gnutls_x509_crt_set_activation_time(crt, now - 3600);
    if (!rc)
        rc = gnutls_x509_crt_set_expiration_time(crt, now + 10 * 365 * 86400L);
    if (!rc)
        rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, name,
                                           (unsigned)strlen(name));
    if (!rc)
        rc = gnutls_x509_crt_set_key(crt, key);
    if (!rc)
        rc = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
    if (!rc)
        rc = gnutls_certificate_set_x509_key(cred, &crt, 1, key); /* copies both */
    if (crt)
        gnutls_x509_crt_deinit(crt);
    if (key)
        gnutls_x509_privkey_deinit(key);
    return rc;
}

int quic_tls_open(const struct lite_security *sec, int rank, struct quic_tls **out, char *why,
                  size_t len)
{
    struct quic_tls *tls = calloc(1, sizeof(*tls));
    if (!tls)
        return -ENOMEM;
    tls->mode = sec ? sec->mode : LITE_SEC_OFF;
    const char *step = "the priority string";
    const char *err_pos = NULL;
    int rc = gnutls_priority_init(&tls->prio, tls->mode == LITE_SEC_PSK ? PRIO_PSK : PRIO_CERT,
                                  &err_pos);
    if (!rc && tls->mode == LITE_SEC_PSK) {
        step = "PSK credentials";
        memcpy(tls->psk, sec->psk, sec->psk_len);
        tls->psk_len = sec->psk_len;
        gnutls_datum_t k = {.data = tls->psk, .size = (unsigned)tls->psk_len};
        rc = gnutls_psk_allocate_client_credentials(&tls->pskc);
        if (!rc)
            rc = gnutls_psk_set_client_credentials(tls->pskc, PSK_IDENTITY, &k, GNUTLS_PSK_KEY_RAW);
        if (!rc)
            rc = gnutls_psk_allocate_server_credentials(&tls->psks);
        if (!rc)
            gnutls_psk_set_server_credentials_function2(tls->psks, psk_server_key);
    } else if (!rc) {
        step = "certificate credentials";
        rc = gnutls_certificate_allocate_credentials(&tls->cred);
        if (!rc && tls->mode == LITE_SEC_CA) {
            step = "loading the certificate and key";
            rc = gnutls_certificate_set_x509_key_file(tls->cred, sec->cert, sec->key,
                                                      GNUTLS_X509_FMT_PEM);
            if (rc >= 0) {
                step = "loading the CA";
                rc =
                    gnutls_certificate_set_x509_trust_file(tls->cred, sec->ca, GNUTLS_X509_FMT_PEM);
                rc = rc > 0 ? 0 : rc == 0 ? GNUTLS_E_NO_CERTIFICATE_FOUND : rc;
            }
        } else if (!rc) {
            rc = self_signed(tls->cred, rank, &step);
        }
    }
    if (rc < 0) {
        lite_fmt(why, len, "quic: TLS setup failed (%s): %s", step, gnutls_strerror(rc));
        quic_tls_close(tls);
        return -LITE_ERR_CONFIG;
    }
    *out = tls;
    return 0;
}

void quic_tls_close(struct quic_tls *tls)
{
    if (!tls)
        return;
    if (tls->cred)
        gnutls_certificate_free_credentials(tls->cred);
    if (tls->pskc)
        gnutls_psk_free_client_credentials(tls->pskc);
    if (tls->psks)
        gnutls_psk_free_server_credentials(tls->psks);
    if (tls->prio)
        gnutls_priority_deinit(tls->prio);
    gnutls_memset(tls->psk, 0, sizeof(tls->psk));
    free(tls);
}

gnutls_session_t quic_tls_session(struct quic_tls *tls, bool server, int expect_rank,
                                  void *conn_ref, char *why, size_t len)
{
    gnutls_session_t s = NULL;
    const char *step = "gnutls_init";
    int rc = gnutls_init(&s, (server ? GNUTLS_SERVER : GNUTLS_CLIENT) | GNUTLS_NO_TICKETS |
                                 GNUTLS_NO_END_OF_EARLY_DATA);
    if (!rc) {
        step = "priorities";
        rc = gnutls_priority_set(s, tls->prio);
    }
    if (!rc) {
        step = "ngtcp2's QUIC hooks";
        rc = server ? ngtcp2_crypto_gnutls_configure_server_session(s)
                    : ngtcp2_crypto_gnutls_configure_client_session(s);
        rc = rc ? GNUTLS_E_INTERNAL_ERROR : 0;
    }
    if (!rc) {
        step = "credentials";
        gnutls_session_set_ptr(s, conn_ref);
        gnutls_db_set_ptr(s, tls);
        if (tls->mode == LITE_SEC_PSK)
            rc = gnutls_credentials_set(s, GNUTLS_CRD_PSK,
                                        server ? (void *)tls->psks : (void *)tls->pskc);
        else
            rc = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, tls->cred);
    }
    if (!rc) {
        step = "ALPN";
        gnutls_datum_t alpn = {.data = (unsigned char *)QUIC_ALPN, .size = sizeof(QUIC_ALPN) - 1};
        rc = gnutls_alpn_set_protocols(s, &alpn, 1, GNUTLS_ALPN_MANDATORY);
    }
    if (!rc && tls->mode == LITE_SEC_CA) {
        step = "certificate checks";
        /* The chain is checked by GnuTLS; the rank a certificate names by quic.c (the client
         * against the rank it dialled once the handshake is done, the server against the
         * HELLO), which can then say whose certificate it was. */
        if (server)
            gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
        gnutls_session_set_verify_cert(s, NULL, 0);
    }
    if (rc) {
        lite_fmt(why, len, "quic: TLS session setup failed (%s): %s", step, gnutls_strerror(rc));
        if (s)
            gnutls_deinit(s);
        return NULL;
    }
    return s;
}

/* "litetx-rank-<n>" -> n, else -1. */
static int rank_of_name(const char *s, size_t n)
{
    size_t p = sizeof(LITE_SEC_RANK_PREFIX) - 1;
    if (n <= p || n > p + 9 || memcmp(s, LITE_SEC_RANK_PREFIX, p) != 0)
        return -1;
    long v = 0;
    for (size_t i = p; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v <= 0x7fffffff ? (int)v : -1;
}

int quic_tls_peer_rank(gnutls_session_t s)
{
    unsigned n = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers(s, &n);
    gnutls_x509_crt_t crt;
    if (!certs || n == 0 || gnutls_x509_crt_init(&crt) < 0)
        return -1;
    int rank = -1;
    bool any_san = false, conflict = false;
    if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) == 0) {
        for (unsigned i = 0; i < 64; i++) {
            char buf[256];
            size_t sz = sizeof(buf);
            unsigned critical = 0;
            int type = gnutls_x509_crt_get_subject_alt_name(crt, i, buf, &sz, &critical);
            if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
                break;
            if (type != GNUTLS_SAN_DNSNAME)
                continue;
            any_san = true;
            int r = rank_of_name(buf, sz);
            if (r >= 0 && rank >= 0 && r != rank)
                conflict = true;
            if (r >= 0)
                rank = r;
        }
        if (!any_san) {
            char buf[256];
            size_t sz = sizeof(buf);
            if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, buf, &sz) ==
                0)
                rank = rank_of_name(buf, sz);
        }
    }
    gnutls_x509_crt_deinit(crt);
    return conflict ? -1 : rank;
}

bool quic_tls_alpn_ok(gnutls_session_t s)
{
    gnutls_datum_t p;
    return gnutls_alpn_get_selected_protocol(s, &p) == 0 && p.size == sizeof(QUIC_ALPN) - 1 &&
           memcmp(p.data, QUIC_ALPN, p.size) == 0;
}

void quic_tls_verify_text(gnutls_session_t s, char *out, size_t len)
{
    out[0] = '\0';
    unsigned st = gnutls_session_get_verify_cert_status(s);
    gnutls_datum_t txt;
    if (st == 0 || gnutls_certificate_verification_status_print(st, GNUTLS_CRT_X509, &txt, 0) < 0)
        return;
    lite_fmt(out, len, "%s", (const char *)txt.data);
    gnutls_free(txt.data);
}
