/*
 * tcp_tls.c - TLS 1.3 sessions for the tcp backend (see tcp_tls.h and docs/TCP.md, "Security").
 *
 * TLS 1.3 only, AES-GCM suites only, mutual authentication: in ca mode both ends present a
 * certificate that chains to the configured CA (the rank it names is checked by tcp.c against
 * the rank the peer claims); in psk mode both ends prove the job's external PSK (with an
 * ephemeral ECDHE exchange, so a leaked PSK does not open recorded traffic). No session
 * tickets, no resumption, no renegotiation. kTLS is asked for (SSL_OP_ENABLE_KTLS) and used
 * where the kernel has the tls module.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "lite_int.h"
#include "security.h"
#include "tcp_tls.h"

#define PSK_IDENTITY "litetx-job-psk"
/* TLS_AES_128_GCM_SHA256 */
static const unsigned char psk_suite[2] = {0x13, 0x01};

struct tcp_tls {
    SSL_CTX *ctx;
    int mode;
    uint8_t psk[LITE_SEC_PSK_MAX];
    size_t psk_len;
};

static __thread char tls_err[160];

const char *tcp_tls_error(void)
{
    return tls_err[0] ? tls_err : "TLS error";
}

/* OpenSSL's queued errors as one line (the earliest is the cause). */
static const char *take_errors(char *out, size_t len)
{
    unsigned long e = ERR_get_error();
    if (!e) {
        lite_fmt(out, len, "no detail from OpenSSL");
    } else {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof(buf));
        lite_fmt(out, len, "%s", buf);
    }
    ERR_clear_error();
    return out;
}

static SSL_SESSION *psk_session(SSL *ssl, const struct tcp_tls *tls)
{
    const SSL_CIPHER *c = SSL_CIPHER_find(ssl, psk_suite);
    SSL_SESSION *s = c ? SSL_SESSION_new() : NULL;
    if (s &&
        (!SSL_SESSION_set1_master_key(s, tls->psk, tls->psk_len) || !SSL_SESSION_set_cipher(s, c) ||
         !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION))) {
        SSL_SESSION_free(s);
        s = NULL;
    }
    return s;
}

static int psk_use(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
                   SSL_SESSION **sess)
{
    const struct tcp_tls *tls = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    const SSL_CIPHER *c = SSL_CIPHER_find(ssl, psk_suite);
    *sess = NULL;
    if (!c || (md && md != SSL_CIPHER_get_handshake_digest(c)))
        return 1; /* not after a retry with another hash: no PSK then, and the handshake fails */
    *sess = psk_session(ssl, tls);
    *id = (const unsigned char *)PSK_IDENTITY;
    *idlen = sizeof(PSK_IDENTITY) - 1;
    return *sess ? 1 : 0;
}

static int psk_find(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
    const struct tcp_tls *tls = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    *sess = NULL;
    if (idlen != sizeof(PSK_IDENTITY) - 1 || memcmp(id, PSK_IDENTITY, idlen) != 0)
        return 1; /* unknown identity: no PSK, and with no certificate the handshake fails */
    *sess = psk_session(ssl, tls);
    return *sess ? 1 : 0;
}

int tcp_tls_open(const struct lite_security *sec, struct tcp_tls **out, char *why, size_t len)
{
    struct tcp_tls *tls = calloc(1, sizeof(*tls));
    if (!tls)
        return -ENOMEM;
    tls->mode = sec->mode;
    SSL_CTX *ctx = tls->ctx = SSL_CTX_new(TLS_method());
    const char *step = "SSL_CTX_new";
    bool ok = ctx != NULL;
    if (ok) {
        step = "TLS 1.3 settings";
        ok = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) &&
             SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) &&
             SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384");
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION |
                                     SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_ENABLE_KTLS);
        SSL_CTX_set_num_tickets(ctx, 0);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        /* Writes return after each record that left, from a buffer that may move between
         * retries (tcp.c gathers small frames into its own buffer, rebuilt on a retry). */
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        /* Read what the socket has, not a record header then its body: half the recv calls. */
        SSL_CTX_set_read_ahead(ctx, 1);
        SSL_CTX_set_default_read_buffer_len(ctx, 64 * 1024);
        SSL_CTX_set_app_data(ctx, tls);
    }
    if (ok && sec->mode == LITE_SEC_CA) {
        step = "loading the certificate, key and CA";
        ok = SSL_CTX_use_certificate_chain_file(ctx, sec->cert) == 1 &&
             SSL_CTX_use_PrivateKey_file(ctx, sec->key, SSL_FILETYPE_PEM) == 1 &&
             SSL_CTX_check_private_key(ctx) == 1 && SSL_CTX_load_verify_file(ctx, sec->ca) == 1;
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    } else if (ok) {
        memcpy(tls->psk, sec->psk, sec->psk_len);
        tls->psk_len = sec->psk_len;
        SSL_CTX_set_psk_use_session_callback(ctx, psk_use);
        SSL_CTX_set_psk_find_session_callback(ctx, psk_find);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    if (!ok) {
        char e[200];
        lite_fmt(why, len, "TLS setup failed (%s): %s", step, take_errors(e, sizeof(e)));
        tcp_tls_close(tls);
        return -LITE_ERR_CONFIG;
    }
    *out = tls;
    return 0;
}

void tcp_tls_close(struct tcp_tls *tls)
{
    if (!tls)
        return;
    SSL_CTX_free(tls->ctx);
    OPENSSL_cleanse(tls->psk, sizeof(tls->psk));
    free(tls);
}

void *tcp_tls_new(struct tcp_tls *tls, int fd, bool client)
{
    SSL *ssl = SSL_new(tls->ctx);
    if (!ssl)
        return NULL;
    if (!SSL_set_fd(ssl, fd)) {
        SSL_free(ssl);
        return NULL;
    }
    if (client)
        SSL_set_connect_state(ssl);
    else
        SSL_set_accept_state(ssl);
    return ssl;
}

void tcp_tls_free(void *ssl)
{
    SSL_free(ssl);
}

int tcp_tls_handshake(void *p, bool *want_write, char *why, size_t len)
{
    SSL *ssl = p;
    ERR_clear_error();
    errno = 0;
    int r = SSL_do_handshake(ssl);
    if (r == 1)
        return 1;
    int e = SSL_get_error(ssl, r);
    *want_write = e == SSL_ERROR_WANT_WRITE;
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    char buf[200];
    if (e == SSL_ERROR_SYSCALL || (e == SSL_ERROR_SSL && ERR_peek_error() == 0))
        lite_fmt(why, len, "TLS handshake failed: %s",
                 errno ? strerror(errno) : "the connection closed");
    else
        lite_fmt(why, len, "TLS handshake failed: %s", take_errors(buf, sizeof(buf)));
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
        size_t n = strlen(why);
        lite_fmt(why + n, len - n, " (certificate: %s)", X509_verify_cert_error_string(v));
    }
    ERR_clear_error();
    return -EACCES;
}

int tcp_tls_peer_rank(void *ssl)
{
    X509 *x = SSL_get0_peer_certificate(ssl);
    return x ? lite_security_cert_rank(x) : -1;
}

ssize_t tcp_tls_read(void *p, void *buf, size_t len, bool *want_write)
{
    SSL *ssl = p;
    size_t n = 0;
    *want_write = false;
    errno = 0;
    int r = SSL_read_ex(ssl, buf, len, &n);
    if (r == 1)
        return (ssize_t)n;
    int e = SSL_get_error(ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_WRITE:
        *want_write = true;
        /* fall through */
    case SSL_ERROR_WANT_READ:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        return errno ? -1 : 0; /* a socket error, or the peer's FIN */
    default:
        take_errors(tls_err, sizeof(tls_err));
        errno = EPROTO;
        return -1;
    }
}

ssize_t tcp_tls_write(void *p, const void *buf, size_t len, bool *want_read)
{
    SSL *ssl = p;
    size_t n = 0;
    *want_read = false;
    errno = 0;
    int r = SSL_write_ex(ssl, buf, len, &n);
    if (r == 1)
        return (ssize_t)n;
    int e = SSL_get_error(ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        *want_read = true;
        /* fall through */
    case SSL_ERROR_WANT_WRITE:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_SYSCALL:
        if (errno) {
            ERR_clear_error();
            return -1;
        }
        /* fall through */
    default:
        take_errors(tls_err, sizeof(tls_err));
        errno = EPROTO;
        return -1;
    }
}

bool tcp_tls_pending(void *ssl)
{
    return SSL_has_pending(ssl) != 0;
}
