/*
 * tls.c - TLS 1.3 sessions for the bootstrap and the tcp backend (see tls.h and docs/TCP.md,
 * "Security").
 *
 * The session's socket I/O goes through a BIO of ours: records the session writes gather in a
 * buffer and leave in one send per batch (LITE_TLS_TX_CHUNK of plaintext); reads take many
 * records per recv into a buffer of ours (RX_BUF), from which OpenSSL reads one record at a
 * time. OpenSSL's own read-ahead is off: with it, OpenSSL 3.0 moves every byte still waiting
 * in its read buffer back to the front before each record it parses (to align the payload), so
 * the bigger the recv, the more it copies. When the kernel offers the tls ULP, the socket BIO
 * is used instead, so that SSL_OP_ENABLE_KTLS can move the record layer into the kernel.
 */
#ifdef LITE_HAVE_TLS
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "lite_int.h"
#include "security.h"
#include "tls.h"

#define PSK_IDENTITY "litetx-job-psk"
/* One recv takes up to this much ciphertext (16 records); OpenSSL reads its records from it. */
#define RX_BUF (256 * 1024)
/* The socket BIO's read-ahead buffer (kTLS path only). */
#define KTLS_RX_BUF (64 * 1024)
/* TLS_AES_128_GCM_SHA256 */
static const unsigned char psk_suite[2] = {0x13, 0x01};

struct lite_tls {
    SSL_CTX *ctx;
    int mode;
    bool ktls; /* the kernel has the tls ULP: socket BIO and SSL_OP_ENABLE_KTLS */
    uint8_t psk[LITE_SEC_PSK_MAX];
    size_t psk_len;
};

struct lite_tls_conn {
    SSL *ssl;
    int fd;
    bool batched; /* our BIO (below), not the socket BIO */
    bool hs_done; /* SSL's handshake is done (its last flight may still wait in out) */
    /* Ciphertext made, not yet in the kernel: out[out_lo, out_hi). */
    uint8_t *out;
    size_t out_lo, out_hi, out_cap;
    /* Plaintext encrypted into out but not yet reported to the writer. */
    size_t held;
    /* Ciphertext received, not yet read by OpenSSL: in[in_lo, in_hi) (RX_BUF, made on use). */
    uint8_t *in;
    size_t in_lo, in_hi;
    bool in_short; /* the last recv emptied the socket */
    int in_end;    /* a recv of lite_tls_read's found the end (1) or -errno, for the BIO */
};

static __thread char tls_err[160];
static BIO_METHOD *batch_method;
static pthread_once_t batch_once = PTHREAD_ONCE_INIT;

const char *lite_tls_error(void)
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

/* ---- the batching BIO ---- */

static int batch_write(BIO *bio, const char *data, int n)
{
    struct lite_tls_conn *c = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (n <= 0)
        return 0;
    if (c->out_hi + (size_t)n > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 16 * 1024;
        while (cap < c->out_hi + (size_t)n)
            cap *= 2;
        uint8_t *p = realloc(c->out, cap);
        if (!p)
            return -1;
        c->out = p;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_hi, data, (size_t)n);
    c->out_hi += (size_t)n;
    return n;
}

/* One recv into in (empty): its result, as recv's. A short one (less than RX_BUF) emptied the
 * socket: in_short, until the next recv. */
static ssize_t in_fill(struct lite_tls_conn *c)
{
    c->in_lo = c->in_hi = 0;
    if (!c->in && !(c->in = malloc(RX_BUF))) {
        errno = ENOMEM;
        return -1;
    }
    ssize_t r;
    do
        r = recv(c->fd, c->in, RX_BUF, 0);
    while (r < 0 && errno == EINTR);
    c->in_short = r < (ssize_t)RX_BUF;
    if (r > 0)
        c->in_hi = (size_t)r;
    return r;
}

static int batch_read(BIO *bio, char *buf, int n)
{
    struct lite_tls_conn *c = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (n <= 0)
        return 0;
    if (c->in_lo == c->in_hi) {
        ssize_t r;
        if (c->in_end) { /* what lite_tls_read's recv found: the end, or an error */
            r = c->in_end > 0 ? 0 : -1;
            if (r < 0)
                errno = -c->in_end;
            c->in_end = 0;
        } else {
            r = in_fill(c);
        }
        if (r <= 0) {
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                BIO_set_retry_read(bio);
            return (int)r; /* 0: end of stream; -1: errno kept for SSL_ERROR_SYSCALL */
        }
    }
    size_t k = c->in_hi - c->in_lo < (size_t)n ? c->in_hi - c->in_lo : (size_t)n;
    memcpy(buf, c->in + c->in_lo, k);
    c->in_lo += k;
    return (int)k;
}

static long batch_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
    (void)num, (void)ptr;
    switch (cmd) {
    case BIO_CTRL_FLUSH: /* records leave at the end of each write call (below) */
        return 1;
    case BIO_CTRL_PENDING: {
        const struct lite_tls_conn *c = BIO_get_data(bio);
        return (long)(c->in_hi - c->in_lo);
    }
    default: /* no kTLS, no peeking */
        return 0;
    }
}

static int batch_create(BIO *bio)
{
    BIO_set_init(bio, 1);
    return 1;
}

static void batch_method_make(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "litetx batch");
    if (m && BIO_meth_set_write(m, batch_write) && BIO_meth_set_read(m, batch_read) &&
        BIO_meth_set_ctrl(m, batch_ctrl) && BIO_meth_set_create(m, batch_create)) {
        batch_method = m;
        return;
    }
    BIO_meth_free(m);
}

/* Hand the kernel what waits in out: 0 (all of it, or the socket is full), -1 with errno. */
static int out_flush(struct lite_tls_conn *c)
{
    while (c->out_lo < c->out_hi) {
        ssize_t n = send(c->fd, c->out + c->out_lo, c->out_hi - c->out_lo, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_lo += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return -1;
    }
    c->out_lo = c->out_hi = 0;
    return 0;
}

static bool out_waiting(const struct lite_tls_conn *c)
{
    return c->out_lo < c->out_hi;
}

/* ---- PSK ---- */

static SSL_SESSION *psk_session(SSL *ssl, const struct lite_tls *tls)
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
    const struct lite_tls *tls = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    const SSL_CIPHER *c = SSL_CIPHER_find(ssl, psk_suite);
    *sess = NULL;
    if (!c || (md && md != SSL_CIPHER_get_handshake_digest(c)))
        return 1; /* not after a retry with another hash: no PSK then, and the handshake
                     fails */
    *sess = psk_session(ssl, tls);
    *id = (const unsigned char *)PSK_IDENTITY;
    *idlen = sizeof(PSK_IDENTITY) - 1;
    return *sess ? 1 : 0;
}

static int psk_find(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
    const struct lite_tls *tls = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    *sess = NULL;
    if (idlen != sizeof(PSK_IDENTITY) - 1 || memcmp(id, PSK_IDENTITY, idlen) != 0)
        return 1; /* unknown identity: no PSK, and with no certificate the handshake fails
                   */
    *sess = psk_session(ssl, tls);
    return *sess ? 1 : 0;
}

/* ---- context ---- */

/* Does this kernel offer the tls ULP (kTLS)? */
static bool kernel_has_ktls(char *ulps, size_t len)
{
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r");
    ulps[0] = 0;
    if (f) {
        if (!fgets(ulps, (int)len, f))
            ulps[0] = 0;
        fclose(f);
    }
    ulps[strcspn(ulps, "\n")] = 0;
    for (char *p = ulps; (p = strstr(p, "tls")) != NULL; p += 3)
        if ((p == ulps || p[-1] == ' ') && (p[3] == 0 || p[3] == ' '))
            return true;
    return false;
}

int lite_tls_open(const struct lite_security *sec, struct lite_tls **out, char *why, size_t len)
{
    pthread_once(&batch_once, batch_method_make);
    struct lite_tls *tls = calloc(1, sizeof(*tls));
    if (!tls)
        return -ENOMEM;
    tls->mode = sec->mode;
    char ulps[128];
    tls->ktls = kernel_has_ktls(ulps, sizeof(ulps));
    if (!tls->ktls)
        LITE_DEBUG("tls: no kTLS (the kernel offers no tls ULP: tcp_available_ulp is \"%s\"); "
                   "records are batched in user space",
                   ulps);
    SSL_CTX *ctx = tls->ctx = SSL_CTX_new(TLS_method());
    const char *step = "SSL_CTX_new";
    bool ok = ctx != NULL;
    if (ok && !tls->ktls && !batch_method) {
        step = "BIO_meth_new";
        ok = false;
    }
    if (ok) {
        step = "TLS 1.3 settings";
        ok = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) &&
             SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) &&
             SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384");
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION |
                                     SSL_OP_IGNORE_UNEXPECTED_EOF |
                                     (tls->ktls ? SSL_OP_ENABLE_KTLS : 0));
        SSL_CTX_set_num_tickets(ctx, 0);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        /* The socket BIO (kTLS): writes return after each record that left, from a buffer
         * that may move between retries. Buffers are kept (no SSL_MODE_RELEASE_BUFFERS: a
         * free and a malloc per record). */
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        /* The socket BIO (kTLS): read what the socket has, not a record header then its
         * body. Our BIO reads ahead itself: OpenSSL's read-ahead stays off and its read
         * buffer holds one record. */
        if (tls->ktls) {
            SSL_CTX_set_read_ahead(ctx, 1);
            SSL_CTX_set_default_read_buffer_len(ctx, KTLS_RX_BUF);
        }
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
        lite_tls_close(tls);
        return -LITE_ERR_CONFIG;
    }
    *out = tls;
    return 0;
}

void lite_tls_close(struct lite_tls *tls)
{
    if (!tls)
        return;
    SSL_CTX_free(tls->ctx);
    OPENSSL_cleanse(tls->psk, sizeof(tls->psk));
    free(tls);
}

/* ---- sessions ---- */

struct lite_tls_conn *lite_tls_conn_new(struct lite_tls *tls, int fd, bool client)
{
    struct lite_tls_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->fd = fd;
    c->batched = !tls->ktls;
    c->ssl = SSL_new(tls->ctx);
    bool ok = c->ssl != NULL;
    if (ok && c->batched) {
        BIO *bio = BIO_new(batch_method);
        ok = bio != NULL;
        if (ok) {
            BIO_set_data(bio, c);
            SSL_set_bio(c->ssl, bio, bio);
        }
    } else if (ok) {
        ok = SSL_set_fd(c->ssl, fd) == 1;
    }
    if (!ok) {
        lite_tls_conn_free(c);
        return NULL;
    }
    if (client)
        SSL_set_connect_state(c->ssl);
    else
        SSL_set_accept_state(c->ssl);
    return c;
}

void lite_tls_conn_free(struct lite_tls_conn *c)
{
    if (!c)
        return;
    SSL_free(c->ssl);
    free(c->out);
    free(c->in);
    free(c);
}

int lite_tls_handshake(struct lite_tls_conn *c, bool *want_write, char *why, size_t len)
{
    SSL *ssl = c->ssl;
    *want_write = false;
    ERR_clear_error();
    errno = 0;
    int r = c->hs_done ? 1 : SSL_do_handshake(ssl);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, r);
    int saved = errno;
    /* Whatever the step made (a flight, or an alert that says why we refuse) goes out now.
     */
    if (out_flush(c) != 0 && (e == SSL_ERROR_NONE || e == SSL_ERROR_WANT_READ))
        e = SSL_ERROR_SYSCALL, saved = errno;
    if (e == SSL_ERROR_NONE) {
        if (!c->hs_done)
            LITE_DEBUG("tls: %s %s on fd %d", SSL_get_version(ssl),
                       SSL_CIPHER_get_name(SSL_get_current_cipher(ssl)), c->fd);
        c->hs_done = true;
        if (!out_waiting(c))
            return 1;
        *want_write = true;
        return 0;
    }
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want_write = e == SSL_ERROR_WANT_WRITE || out_waiting(c);
        return 0;
    }
    char buf[200];
    int rc = -EACCES;
    if (e == SSL_ERROR_SYSCALL || (e == SSL_ERROR_SSL && ERR_peek_error() == 0)) {
        lite_fmt(why, len, "TLS handshake failed: %s",
                 saved ? strerror(saved) : "the connection closed");
        rc = -LITE_ERR_PEER_LOST;
    } else {
        lite_fmt(why, len, "TLS handshake failed: %s", take_errors(buf, sizeof(buf)));
    }
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
        size_t n = strlen(why);
        lite_fmt(why + n, len - n, " (certificate: %s)", X509_verify_cert_error_string(v));
        rc = -EACCES;
    }
    ERR_clear_error();
    return rc;
}

int lite_tls_peer_rank(struct lite_tls_conn *c)
{
    X509 *x = SSL_get0_peer_certificate(c->ssl);
    return x ? lite_security_cert_rank(x) : -1;
}

ssize_t lite_tls_read(struct lite_tls_conn *c, void *buf, size_t len, bool *want_write)
{
    SSL *ssl = c->ssl;
    size_t n = 0;
    *want_write = false;
    /* Nothing waits in the session: the socket decides, without OpenSSL's read machinery. A
     * short recv emptied it, so the read after the one that used its last byte reports EAGAIN
     * at once, as a short recv does for a plain socket (epoll is level-triggered: bytes that
     * came since wake the caller). */
    if (c->batched && c->in_lo == c->in_hi && !c->in_end && !SSL_has_pending(ssl)) {
        if (c->in_short) {
            c->in_short = false;
            errno = EAGAIN;
            return -1;
        }
        ssize_t got = in_fill(c);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->in_short = false; /* it said so itself */
            errno = EAGAIN;
            return -1;
        }
        if (got <= 0) /* the end or an error: SSL_read takes it from the BIO */
            c->in_end = got == 0 ? 1 : -(errno ? errno : EIO);
    }
    errno = 0;
    int r = SSL_read_ex(ssl, buf, len, &n);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, r), saved = errno;
    if (out_waiting(c)) /* a reply the read made (an alert, a key update) */
        (void)out_flush(c);
    errno = saved;
    if (r == 1)
        return (ssize_t)n;
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

/* SSL_write_ex's failure as errno (and tls_err): -1. */
static ssize_t write_failed(SSL *ssl, int r, bool *want_read)
{
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

/*
 * Batched: encrypt up to LITE_TLS_TX_CHUNK at a time into out, send it, and report the
 * bytes whose ciphertext the kernel took. Bytes encrypted but not yet reported (held) are
 * the first bytes of the next call, which sends their ciphertext before encrypting anything
 * new.
 */
ssize_t lite_tls_write(struct lite_tls_conn *c, const void *buf, size_t len, bool *want_read)
{
    SSL *ssl = c->ssl;
    *want_read = false;
    errno = 0;
    if (!c->batched) {
        size_t n = 0;
        int r = SSL_write_ex(ssl, buf, len, &n);
        return r == 1 ? (ssize_t)n : write_failed(ssl, r, want_read);
    }
    if (c->held > len) {
        lite_fmt(tls_err, sizeof(tls_err),
                 "a write was retried with %zu bytes, fewer than the %zu already encrypted", len,
                 c->held);
        errno = EPROTO;
        return -1;
    }
    size_t done = 0, enc = c->held; /* of buf: reported, encrypted */
    for (;;) {
        if (out_flush(c) != 0) {
            if (done)
                break; /* the error comes back with the next call */
            return -1;
        }
        if (out_waiting(c))
            break; /* the socket is full */
        done = enc;
        c->held = 0;
        if (enc == len)
            break;
        size_t end = enc + (len - enc < LITE_TLS_TX_CHUNK ? len - enc : LITE_TLS_TX_CHUNK);
        /* Every record of the chunk before it goes out: with SSL_MODE_ENABLE_PARTIAL_WRITE
         * (for the socket BIO) each SSL_write_ex returns after one record. Our BIO never
         * refuses. */
        while (enc < end) {
            size_t wrote = 0;
            ERR_clear_error();
            int r = SSL_write_ex(ssl, (const uint8_t *)buf + enc, end - enc, &wrote);
            if (r != 1) { /* records made before this (held) leave with the next call */
                ssize_t f = write_failed(ssl, r, want_read);
                return done ? (ssize_t)done : f;
            }
            enc += wrote;
            c->held = enc - done;
        }
    }
    if (done)
        return (ssize_t)done;
    errno = EAGAIN;
    return -1;
}

bool lite_tls_pending(struct lite_tls_conn *c)
{
    return c->in_lo < c->in_hi || SSL_has_pending(c->ssl) != 0;
}

/* ---- blocking forms ---- */

static int wait_fd(int fd, bool write, int64_t deadline_ns)
{
    for (;;) {
        int ms = lite_ms_left(deadline_ns, 1000);
        if (ms <= 0 && lite_now_ns() >= deadline_ns)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = write ? POLLOUT : POLLIN};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

int lite_tls_handshake_wait(struct lite_tls_conn *c, int64_t deadline_ns, char *why, size_t len)
{
    for (;;) {
        bool ww;
        int rc = lite_tls_handshake(c, &ww, why, len);
        if (rc > 0)
            return 0;
        if (rc < 0)
            return rc;
        rc = wait_fd(c->fd, ww, deadline_ns);
        if (rc) {
            lite_fmt(why, len, "TLS handshake: %s",
                     rc == -ETIMEDOUT ? "no answer in time" : strerror(-rc));
            return rc;
        }
    }
}

int lite_tls_read_full(struct lite_tls_conn *c, void *buf, size_t len, int64_t deadline_ns)
{
    size_t got = 0;
    while (got < len) {
        bool ww;
        ssize_t n = lite_tls_read(c, (uint8_t *)buf + got, len - got, &ww);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0)
            return -LITE_ERR_PEER_LOST;
        if (errno == EPROTO)
            return -EPROTO;
        if (errno != EAGAIN && errno != EINTR)
            return errno == ECONNRESET || errno == EPIPE ? -LITE_ERR_PEER_LOST : -errno;
        if (errno == EAGAIN) {
            int rc = wait_fd(c->fd, ww, deadline_ns);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int lite_tls_write_full(struct lite_tls_conn *c, const void *buf, size_t len, int64_t deadline_ns)
{
    size_t put = 0;
    while (put < len) {
        bool wr;
        ssize_t n = lite_tls_write(c, (const uint8_t *)buf + put, len - put, &wr);
        if (n > 0) {
            put += (size_t)n;
            continue;
        }
        if (errno == EPROTO)
            return -EPROTO;
        if (errno != EAGAIN && errno != EINTR)
            return errno == ECONNRESET || errno == EPIPE ? -LITE_ERR_PEER_LOST : -errno;
        if (errno == EAGAIN) {
            int rc = wait_fd(c->fd, !wr, deadline_ns);
            if (rc)
                return rc;
        }
    }
    return 0;
}

#endif /* LITE_HAVE_TLS */
