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
 *
 * Once the handshake is done (our BIO), the record layer is ours, as kTLS would take it into
 * the kernel: OpenSSL hands over the traffic secrets (its keylog callback) and never reads or
 * writes a record again, so no nonce is ever used by both. Records are sealed straight from the
 * caller's buffers into the send batch (one pass: no copy into OpenSSL's buffer and out again)
 * and opened from the receive buffer into a record-sized buffer that stays in the cache, from
 * which the caller's bytes are copied only after the record's tag checked out: no byte of a
 * record that fails is ever placed. Alerts, close_notify and KeyUpdate are handled here; each
 * direction updates its key every KEY_UPDATE_RECORDS records (RFC 8446 5.5).
 */
#ifdef LITE_HAVE_TLS
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
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
/* Records: header, at most 2^14 bytes of content, the content type, the tag. A peer's record
 * body (its ciphertext and tag) may be up to 2^14 + 256 bytes, no longer (RFC 8446 5.2). */
#define REC_HDR     5
#define REC_MAX     16384
#define REC_TAG     16
#define REC_IN_MAX  (REC_HDR + REC_MAX + 256)
#define REC_OUT_MAX (REC_HDR + REC_MAX + 1 + REC_TAG)
/* A direction's key is updated after this many records (2^23: AES-GCM's limit is 2^24.5).
 * Overridable at compile time: tests/tls builds a variant that updates every 2 records. */
#ifndef KEY_UPDATE_RECORDS
#define KEY_UPDATE_RECORDS (1ull << 23)
#endif
#define CT_ALERT      21
#define CT_HANDSHAKE  22
#define CT_APPDATA    23
#define HS_KEY_UPDATE 24
/* TLS_AES_128_GCM_SHA256 */
static const unsigned char psk_suite[2] = {0x13, 0x01};

struct lite_tls {
    SSL_CTX *ctx;
    int mode;
    bool ktls; /* the kernel has the tls ULP: socket BIO and SSL_OP_ENABLE_KTLS */
    uint8_t psk[LITE_SEC_PSK_MAX];
    size_t psk_len;
};

/* One direction of our record layer. */
struct rl_dir {
    EVP_CIPHER_CTX *ctx;
    uint8_t secret[EVP_MAX_MD_SIZE]; /* the traffic secret (the next key derives from it) */
    uint8_t iv[12];
    uint64_t seq; /* records under this key */
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
    /* Our record layer (own: after the handshake on our BIO). */
    bool own;
    bool client;
    uint8_t sec_c[EVP_MAX_MD_SIZE], sec_s[EVP_MAX_MD_SIZE]; /* traffic secrets 0 (keylog) */
    size_t sec_c_len, sec_s_len;
    const EVP_MD *md;
    const EVP_CIPHER *cipher;
    size_t key_len, md_len;
    struct rl_dir tx, rx;
    uint8_t *pt; /* the last record opened: its content pt[pt_lo, pt_hi) not yet read */
    size_t pt_lo, pt_hi;
    int rx_err;       /* after a bad record, an alert or the end: EPROTO, or -1 the end */
    char rx_why[128]; /* ... and for EPROTO, why */
    bool tx_err;      /* a fatal alert went out, or sealing failed: nothing more is written */
    bool tx_closed;   /* our close_notify is sealed: nothing more is written */
    bool truncated;   /* the stream ended without the peer's close_notify */
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

/* One recv into in, after what it still holds (moved to the front: at most a part of one
 * record): its result, as recv's. A short one (less than it had room for) emptied the socket:
 * in_short, until the next recv. */
static ssize_t in_fill(struct lite_tls_conn *c)
{
    if (!c->in && !(c->in = malloc(RX_BUF))) {
        errno = ENOMEM;
        return -1;
    }
    if (c->in_lo > 0) {
        memmove(c->in, c->in + c->in_lo, c->in_hi - c->in_lo);
        c->in_hi -= c->in_lo;
        c->in_lo = 0;
    }
    size_t room = RX_BUF - c->in_hi;
    ssize_t r;
    do
        r = recv(c->fd, c->in + c->in_hi, room, 0);
    while (r < 0 && errno == EINTR);
    c->in_short = r < (ssize_t)room;
    if (r > 0)
        c->in_hi += (size_t)r;
    return r;
}

static int batch_read(BIO *bio, char *buf, int n)
{
    struct lite_tls_conn *c = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (n <= 0)
        return 0;
    if (c->in_lo == c->in_hi) {
        ssize_t r = in_fill(c);
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

/* ---- our record layer (after the handshake) ---- */

/* OpenSSL's keylog lines carry the traffic secrets: keep the two the record layer starts with. */
static void keylog(const SSL *ssl, const char *line)
{
    struct lite_tls_conn *c = SSL_get_ex_data(ssl, 0);
    uint8_t *dst;
    size_t *len;
    if (!c || !c->batched)
        return;
    if (strncmp(line, "CLIENT_TRAFFIC_SECRET_0 ", 24) == 0)
        dst = c->sec_c, len = &c->sec_c_len;
    else if (strncmp(line, "SERVER_TRAFFIC_SECRET_0 ", 24) == 0)
        dst = c->sec_s, len = &c->sec_s_len;
    else
        return;
    const char *hex = strchr(line + 24, ' '); /* after the client random */
    size_t n = 0;
    for (hex = hex ? hex + 1 : ""; hex[0] && hex[1] && n < EVP_MAX_MD_SIZE; hex += 2) {
        unsigned v;
        if (sscanf(hex, "%2x", &v) != 1)
            break;
        dst[n++] = (uint8_t)v;
    }
    *len = n;
}

/* HKDF-Expand-Label(secret, label, "", n) of RFC 8446 7.1, n at most the hash's size (one
 * HMAC block). */
static bool expand_label(const struct lite_tls_conn *c, const uint8_t *secret, const char *label,
                         uint8_t *out, size_t n)
{
    uint8_t info[2 + 1 + 6 + 16 + 1 + 1], t[EVP_MAX_MD_SIZE];
    size_t ll = strlen(label), i = 0;
    unsigned tl = 0;
    info[i++] = (uint8_t)(n >> 8);
    info[i++] = (uint8_t)n;
    info[i++] = (uint8_t)(6 + ll);
    memcpy(info + i, "tls13 ", 6);
    memcpy(info + i + 6, label, ll);
    i += 6 + ll;
    info[i++] = 0; /* no context */
    info[i++] = 1; /* T(1) */
    bool ok = HMAC(c->md, secret, (int)c->md_len, info, i, t, &tl) && tl >= n;
    if (ok)
        memcpy(out, t, n);
    OPENSSL_cleanse(t, sizeof(t));
    return ok;
}

/* d takes the key and IV of its secret (d->secret), its record count from 0. */
static bool dir_key(struct lite_tls_conn *c, struct rl_dir *d, int enc)
{
    uint8_t key[32];
    bool ok = c->key_len <= sizeof(key) && expand_label(c, d->secret, "key", key, c->key_len) &&
              expand_label(c, d->secret, "iv", d->iv, sizeof(d->iv)) &&
              (d->ctx || (d->ctx = EVP_CIPHER_CTX_new())) &&
              EVP_CipherInit_ex(d->ctx, c->cipher, NULL, key, NULL, enc) == 1;
    OPENSSL_cleanse(key, sizeof(key));
    d->seq = 0;
    return ok;
}

/* The next secret of d (KeyUpdate, RFC 8446 7.2) and its key. */
static bool dir_update(struct lite_tls_conn *c, struct rl_dir *d, int enc)
{
    uint8_t next[EVP_MAX_MD_SIZE];
    bool ok = expand_label(c, d->secret, "traffic upd", next, c->md_len);
    memcpy(d->secret, next, c->md_len);
    OPENSSL_cleanse(next, sizeof(next));
    return ok && dir_key(c, d, enc);
}

static void dir_nonce(const struct rl_dir *d, uint8_t nonce[12])
{
    memcpy(nonce, d->iv, 12);
    for (int i = 0; i < 8; i++)
        nonce[11 - i] ^= (uint8_t)(d->seq >> (8 * i));
}

/* The handshake is done: the record layer becomes ours. false: it cannot (why in tls_err). */
static bool rl_start(struct lite_tls_conn *c)
{
    const SSL_CIPHER *cs = SSL_get_current_cipher(c->ssl);
    uint32_t id = cs ? SSL_CIPHER_get_id(cs) & 0xffff : 0;
    c->cipher = id == 0x1301 ? EVP_aes_128_gcm() : id == 0x1302 ? EVP_aes_256_gcm() : NULL;
    c->key_len = id == 0x1301 ? 16 : 32;
    c->md = cs ? SSL_CIPHER_get_handshake_digest(cs) : NULL;
    c->md_len = c->md ? (size_t)EVP_MD_get_size(c->md) : 0;
    const char *bad = NULL;
    if (!c->cipher || !c->md)
        bad = "an unexpected cipher suite";
    else if (c->sec_c_len != c->md_len || c->sec_s_len != c->md_len)
        bad = "no traffic secrets from OpenSSL";
    else if (SSL_has_pending(c->ssl))
        bad = "records read ahead by OpenSSL";
    if (!bad) {
        memcpy(c->tx.secret, c->client ? c->sec_c : c->sec_s, c->md_len);
        memcpy(c->rx.secret, c->client ? c->sec_s : c->sec_c, c->md_len);
        if (!dir_key(c, &c->tx, 1) || !dir_key(c, &c->rx, 0) ||
            !(c->pt = malloc(REC_IN_MAX - REC_HDR - REC_TAG)))
            bad = "no key from the traffic secrets";
    }
    OPENSSL_cleanse(c->sec_c, sizeof(c->sec_c));
    OPENSSL_cleanse(c->sec_s, sizeof(c->sec_s));
    if (bad) {
        lite_fmt(tls_err, sizeof(tls_err), "TLS record layer: %s", bad);
        return false;
    }
    c->own = true;
    return true;
}

/* Room in out for n more bytes. */
static bool out_room(struct lite_tls_conn *c, size_t n)
{
    if (c->out_hi + n <= c->out_cap)
        return true;
    size_t cap = c->out_cap ? c->out_cap : 16 * 1024;
    while (cap < c->out_hi + n)
        cap *= 2;
    uint8_t *p = realloc(c->out, cap);
    if (!p)
        return false;
    c->out = p;
    c->out_cap = cap;
    return true;
}

/* Seal n bytes of the stream iov[] (from its byte skip) and the content type into one record
 * at the end of out (room made by the caller). false: the session is unusable (tx_err). */
static bool seal(struct lite_tls_conn *c, const struct iovec *iov, size_t skip, size_t n,
                 uint8_t type)
{
    struct rl_dir *d = &c->tx;
    uint8_t *rec = c->out + c->out_hi, *p = rec + REC_HDR, nonce[12];
    size_t body = n + 1 + REC_TAG;
    int l;
    if (c->tx_err)
        return false;
    rec[0] = CT_APPDATA;
    rec[1] = rec[2] = 3;
    rec[3] = (uint8_t)(body >> 8);
    rec[4] = (uint8_t)body;
    dir_nonce(d, nonce);
    d->seq++; /* a nonce is used once, even when this fails halfway */
    EVP_CIPHER_CTX *x = d->ctx;
    bool ok = EVP_EncryptInit_ex(x, NULL, NULL, NULL, nonce) == 1 &&
              EVP_EncryptUpdate(x, NULL, &l, rec, REC_HDR) == 1;
    for (; ok && n; iov++) {
        if (skip >= iov->iov_len) {
            skip -= iov->iov_len;
            continue;
        }
        size_t m = iov->iov_len - skip < n ? iov->iov_len - skip : n;
        ok = EVP_EncryptUpdate(x, p, &l, (const uint8_t *)iov->iov_base + skip, (int)m) == 1;
        p += m;
        n -= m;
        skip = 0;
    }
    ok = ok && EVP_EncryptUpdate(x, p, &l, &type, 1) == 1 &&
         EVP_EncryptFinal_ex(x, p + 1, &l) == 1 &&
         EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, REC_TAG, p + 1) == 1;
    if (!ok) {
        c->tx_err = true;
        take_errors(tls_err, sizeof(tls_err));
        return false;
    }
    c->out_hi += REC_HDR + body;
    return true;
}

/* A record of our own (an alert, a KeyUpdate) into out. */
static bool seal_msg(struct lite_tls_conn *c, const uint8_t *msg, size_t n, uint8_t type)
{
    struct iovec v = {.iov_base = (void *)msg, .iov_len = n};
    return out_room(c, REC_OUT_MAX) && seal(c, &v, 0, n, type);
}

/* Before the next record: a KeyUpdate and the new key once this one sealed its share. */
static bool tx_key_check(struct lite_tls_conn *c)
{
    static const uint8_t ku[5] = {HS_KEY_UPDATE, 0, 0, 1, 0}; /* update_not_requested */
    if (c->tx.seq < KEY_UPDATE_RECORDS)
        return true;
    if (!seal_msg(c, ku, sizeof(ku), CT_HANDSHAKE) || !dir_update(c, &c->tx, 1)) {
        c->tx_err = true;
        return false;
    }
    return true;
}

/* A fatal alert to the peer, best effort (the connection ends). */
static void send_alert(struct lite_tls_conn *c, uint8_t desc)
{
    uint8_t a[2] = {2, desc};
    if (!c->tx_err && !c->tx_closed && seal_msg(c, a, sizeof(a), CT_ALERT))
        (void)out_flush(c);
    c->tx_err = true;
}

/* The read side fails from now on: EPROTO with why (an alert with desc goes to the peer, 0:
 * none). */
static void rx_fail(struct lite_tls_conn *c, uint8_t desc, const char *why)
{
    c->rx_err = EPROTO;
    lite_fmt(c->rx_why, sizeof(c->rx_why), "%s", why);
    c->pt_lo = c->pt_hi = 0;
    if (desc)
        send_alert(c, desc);
}

static void rl_content(struct lite_tls_conn *c, uint8_t type, size_t n);

/* Open the complete record at in + in_lo (body bytes after its header) into pt. */
static void rl_open(struct lite_tls_conn *c, size_t body)
{
    struct rl_dir *d = &c->rx;
    uint8_t *rec = c->in + c->in_lo, nonce[12];
    size_t clen = body - REC_TAG;
    int l;
    c->in_lo += REC_HDR + body;
    dir_nonce(d, nonce);
    d->seq++;
    EVP_CIPHER_CTX *x = d->ctx;
    if (EVP_DecryptInit_ex(x, NULL, NULL, NULL, nonce) != 1 ||
        EVP_DecryptUpdate(x, NULL, &l, rec, REC_HDR) != 1 ||
        EVP_DecryptUpdate(x, c->pt, &l, rec + REC_HDR, (int)clen) != 1 ||
        EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, REC_TAG, rec + REC_HDR + clen) != 1 ||
        EVP_DecryptFinal_ex(x, c->pt + clen, &l) != 1) {
        ERR_clear_error();
        OPENSSL_cleanse(c->pt, clen); /* what did not check out leaves no trace */
        rx_fail(c, SSL_AD_BAD_RECORD_MAC, "decryption failed or bad record mac");
        return;
    }
    /* The content ends with its type, then zeros (padding). */
    size_t n = clen;
    while (n && c->pt[n - 1] == 0)
        n--;
    if (!n) {
        rx_fail(c, SSL_AD_UNEXPECTED_MESSAGE, "a record without a content type");
        return;
    }
    uint8_t type = c->pt[--n];
    if (n > REC_MAX) {
        rx_fail(c, SSL_AD_RECORD_OVERFLOW, "a record longer than 2^14 bytes");
        return;
    }
    rl_content(c, type, n);
}

/* The authenticated content pt[0, n) of a record of this type: application data to be read, or
 * an alert or KeyUpdate acted on. */
static void rl_content(struct lite_tls_conn *c, uint8_t type, size_t n)
{
    if (type == CT_APPDATA) {
        c->pt_lo = 0;
        c->pt_hi = n;
    } else if (type == CT_ALERT && n != 2) {
        rx_fail(c, SSL_AD_DECODE_ERROR, "an alert record that is not 2 bytes long");
    } else if (type == CT_ALERT) {
        if (c->pt[1] == SSL_AD_CLOSE_NOTIFY) {
            c->rx_err = -1;
        } else {
            char w[96];
            lite_fmt(w, sizeof(w), "the peer sent alert %s", SSL_alert_desc_string_long(c->pt[1]));
            rx_fail(c, 0, w);
        }
    } else if (type == CT_HANDSHAKE && n >= 1 && c->pt[0] == HS_KEY_UPDATE &&
               (n != 5 || c->pt[1] || c->pt[2] || c->pt[3] != 1)) {
        rx_fail(c, SSL_AD_DECODE_ERROR, "a malformed KeyUpdate");
    } else if (type == CT_HANDSHAKE && n >= 1 && c->pt[0] == HS_KEY_UPDATE && c->pt[4] > 1) {
        rx_fail(c, SSL_AD_ILLEGAL_PARAMETER, "a KeyUpdate with an unknown request_update");
    } else if (type == CT_HANDSHAKE && n >= 1 && c->pt[0] == HS_KEY_UPDATE) {
        static const uint8_t ku[5] = {HS_KEY_UPDATE, 0, 0, 1, 0};
        bool ok = dir_update(c, &c->rx, 0);
        /* update_requested: ours goes out before any new record (RFC 8446 4.6.3) */
        if (ok && c->pt[4] == 1 && !c->tx_err && !c->tx_closed)
            ok = seal_msg(c, ku, sizeof(ku), CT_HANDSHAKE) && dir_update(c, &c->tx, 1);
        if (!ok)
            rx_fail(c, SSL_AD_INTERNAL_ERROR, "a key update failed");
    } else {
        rx_fail(c, SSL_AD_UNEXPECTED_MESSAGE, "an unexpected record after the handshake");
    }
}

/*
 * Open the complete record at in + in_lo straight into dst, which has room for all of its
 * plaintext but the last byte (clen - 1 bytes: without padding, the whole content). The last
 * byte (the content type, or padding) goes to a scratch byte. Nothing is readable before the tag
 * checks out; a bad tag wipes the clen - 1 bytes just written to zeros, so no unauthenticated
 * byte stays in dst. Returns the application data bytes now in dst (0 for any other record,
 * whose content moves to pt, or on a failure).
 */
static size_t rl_open_direct(struct lite_tls_conn *c, size_t body, uint8_t *dst)
{
    struct rl_dir *d = &c->rx;
    uint8_t *rec = c->in + c->in_lo, nonce[12], last[2] = {0, 0}; /* [1]: Final's (empty) output */
    size_t clen = body - REC_TAG, m = clen - 1;
    int l;
    c->in_lo += REC_HDR + body;
    dir_nonce(d, nonce);
    d->seq++;
    EVP_CIPHER_CTX *x = d->ctx;
    if (EVP_DecryptInit_ex(x, NULL, NULL, NULL, nonce) != 1 ||
        EVP_DecryptUpdate(x, NULL, &l, rec, REC_HDR) != 1 ||
        EVP_DecryptUpdate(x, dst, &l, rec + REC_HDR, (int)m) != 1 ||
        EVP_DecryptUpdate(x, last, &l, rec + REC_HDR + m, 1) != 1 ||
        EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, REC_TAG, rec + REC_HDR + clen) != 1 ||
        EVP_DecryptFinal_ex(x, last + 1, &l) != 1) {
        ERR_clear_error();
        OPENSSL_cleanse(dst, m); /* zeros, not bytes derived from a forged ciphertext */
        OPENSSL_cleanse(last, sizeof(last));
        rx_fail(c, SSL_AD_BAD_RECORD_MAC, "decryption failed or bad record mac");
        return 0;
    }
    size_t n = m;
    uint8_t type = last[0];
    if (!type) { /* padding: the type is the last nonzero byte in dst; it becomes 0 there */
        while (n && dst[n - 1] == 0)
            n--;
        if (!n) {
            rx_fail(c, SSL_AD_UNEXPECTED_MESSAGE, "a record without a content type");
            return 0;
        }
        type = dst[--n];
        dst[n] = 0;
    }
    if (n > REC_MAX) {
        OPENSSL_cleanse(dst, m);
        rx_fail(c, SSL_AD_RECORD_OVERFLOW, "a record longer than 2^14 bytes");
        return 0;
    }
    if (type == CT_APPDATA)
        return n;
    /* A padded alert or KeyUpdate: handled from pt, as any small record; dst keeps none of it. */
    memcpy(c->pt, dst, n);
    OPENSSL_cleanse(dst, m);
    rl_content(c, type, n);
    return 0;
}

/* Does in hold a complete record? Its body length in *body; a malformed header fails the read
 * side. */
static bool rl_record_ready(struct lite_tls_conn *c, size_t *body)
{
    size_t avail = c->in_hi - c->in_lo;
    if (avail < REC_HDR)
        return false;
    const uint8_t *h = c->in + c->in_lo;
    size_t b = (size_t)h[3] << 8 | h[4];
    if (h[0] != CT_APPDATA) {
        rx_fail(c, SSL_AD_UNEXPECTED_MESSAGE, "a record that is not application data");
        return false;
    }
    if (h[1] != 3 || h[2] != 3 || b < REC_TAG + 1) {
        rx_fail(c, SSL_AD_DECODE_ERROR, "a malformed record header");
        return false;
    }
    if (b > REC_IN_MAX - REC_HDR) {
        rx_fail(c, SSL_AD_RECORD_OVERFLOW, "a record longer than 2^14 + 256 bytes");
        return false;
    }
    *body = b;
    return avail >= REC_HDR + b;
}

static ssize_t rl_read(struct lite_tls_conn *c, void *buf, size_t len)
{
    size_t got = 0, body;
    if (!len) {
        lite_fmt(tls_err, sizeof(tls_err), "a read of 0 bytes");
        errno = EINVAL;
        return -1;
    }
    while (got < len) {
        if (c->pt_lo < c->pt_hi) {
            size_t k = c->pt_hi - c->pt_lo < len - got ? c->pt_hi - c->pt_lo : len - got;
            memcpy((uint8_t *)buf + got, c->pt + c->pt_lo, k);
            c->pt_lo += k;
            got += k;
            continue;
        }
        if (c->rx_err)
            break;
        if (rl_record_ready(c, &body)) {
            /* A record whose whole plaintext fits the rest of the destination, large enough
             * that a second pass over it costs: decrypted in place, not into pt and copied. */
            size_t m = body - REC_TAG - 1;
            if (m >= LITE_TLS_DIRECT_MIN && m <= len - got)
                got += rl_open_direct(c, body, (uint8_t *)buf + got);
            else
                rl_open(c, body);
            continue;
        }
        if (got || c->rx_err)
            break;
        /* A short recv emptied the socket: the read after it reports EAGAIN at once, as a
         * short recv does for a plain socket (epoll is level-triggered). */
        if (c->in_short) {
            c->in_short = false;
            errno = EAGAIN;
            return -1;
        }
        ssize_t r = in_fill(c);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->in_short = false;
            errno = EAGAIN;
            return -1;
        }
        if (r < 0)
            return -1;
        if (r == 0) { /* the end without close_notify: the stream may have been cut short */
            c->truncated = true;
            rx_fail(c, 0, "the connection ended without close_notify");
        }
    }
    if (got)
        return (ssize_t)got;
    if (c->rx_err < 0)
        return 0;
    lite_fmt(tls_err, sizeof(tls_err), "%s", c->rx_why);
    errno = EPROTO;
    return -1;
}

/*
 * Seal up to LITE_TLS_TX_CHUNK at a time into out, send it, and report the bytes whose
 * ciphertext the kernel took. Bytes sealed but not yet reported (held) are the first bytes of
 * the next call, which sends their ciphertext before sealing anything new.
 */
static ssize_t rl_write(struct lite_tls_conn *c, const struct iovec *iov, int cnt)
{
    size_t len = 0;
    for (int i = 0; i < cnt; i++)
        len += iov[i].iov_len;
    if (c->held > len) {
        lite_fmt(tls_err, sizeof(tls_err),
                 "a write was retried with %zu bytes, fewer than the %zu already encrypted", len,
                 c->held);
        errno = EPROTO;
        return -1;
    }
    if (c->tx_closed) {
        lite_fmt(tls_err, sizeof(tls_err), "a write after close_notify");
        errno = EPIPE;
        return -1;
    }
    size_t done = 0, enc = c->held; /* of the stream: reported, sealed */
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
        if (c->tx_err) { /* after a fatal alert, or a failed seal */
            if (c->rx_err > 0)
                lite_fmt(tls_err, sizeof(tls_err), "%s", c->rx_why);
            errno = EPROTO;
            return done ? (ssize_t)done : -1;
        }
        size_t end = enc + (len - enc < LITE_TLS_TX_CHUNK ? len - enc : LITE_TLS_TX_CHUNK);
        size_t recs = (end - enc + REC_MAX - 1) / REC_MAX;
        if (!out_room(c, (end - enc) + recs * (REC_OUT_MAX - REC_MAX))) {
            errno = ENOMEM;
            return done ? (ssize_t)done : -1;
        }
        while (enc < end) {
            size_t n = end - enc < REC_MAX ? end - enc : REC_MAX;
            /* A KeyUpdate record sealed before this one took room reserved above: make room
             * for this record again (seal writes at out + out_hi, so a move is fine). */
            if (!tx_key_check(c)) {
                errno = EPROTO;
                return done ? (ssize_t)done : -1;
            }
            if (!out_room(c, n + REC_OUT_MAX - REC_MAX)) {
                errno = ENOMEM;
                return done ? (ssize_t)done : -1;
            }
            if (!seal(c, iov, enc, n, CT_APPDATA)) {
                errno = EPROTO;
                return done ? (ssize_t)done : -1;
            }
            enc += n;
            c->held = enc - done;
        }
    }
    if (done)
        return (ssize_t)done;
    errno = EAGAIN;
    return -1;
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
        if (!tls->ktls) /* the traffic secrets, for our record layer */
            SSL_CTX_set_keylog_callback(ctx, keylog);
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
    c->client = client;
    c->ssl = SSL_new(tls->ctx);
    bool ok = c->ssl != NULL && SSL_set_ex_data(c->ssl, 0, c) == 1;
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
    EVP_CIPHER_CTX_free(c->tx.ctx);
    EVP_CIPHER_CTX_free(c->rx.ctx);
    OPENSSL_cleanse(c->tx.secret, sizeof(c->tx.secret));
    OPENSSL_cleanse(c->rx.secret, sizeof(c->rx.secret));
    OPENSSL_cleanse(c->sec_c, sizeof(c->sec_c));
    OPENSSL_cleanse(c->sec_s, sizeof(c->sec_s));
    OPENSSL_cleanse(c->tx.iv, sizeof(c->tx.iv));
    OPENSSL_cleanse(c->rx.iv, sizeof(c->rx.iv));
    if (c->pt) /* the last record's plaintext */
        OPENSSL_cleanse(c->pt, REC_IN_MAX - REC_HDR - REC_TAG);
    free(c->pt);
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
        if (!c->hs_done) {
            LITE_DEBUG("tls: %s %s on fd %d", SSL_get_version(ssl),
                       SSL_CIPHER_get_name(SSL_get_current_cipher(ssl)), c->fd);
            if (c->batched && !rl_start(c)) {
                lite_fmt(why, len, "TLS handshake failed: %s", tls_err);
                return -EACCES;
            }
        }
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
    if (c->own) {
        ssize_t r = rl_read(c, buf, len);
        int saved = errno;
        if (out_waiting(c)) /* what the read made (an alert, a KeyUpdate) */
            (void)out_flush(c);
        errno = saved;
        return r;
    }
    if (c->batched) { /* our BIO carries only the handshake */
        lite_fmt(tls_err, sizeof(tls_err), "a read before the TLS handshake finished");
        errno = EPROTO;
        return -1;
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

ssize_t lite_tls_writev(struct lite_tls_conn *c, const struct iovec *iov, int cnt, bool *want_read)
{
    *want_read = false;
    errno = 0;
    if (c->own)
        return rl_write(c, iov, cnt);
    if (c->batched) {
        lite_fmt(tls_err, sizeof(tls_err), "a write before the TLS handshake finished");
        errno = EPROTO;
        return -1;
    }
    /* The socket BIO (kTLS): one record's worth, gathered when it is in pieces. The same
     * bytes come first again after a retry, as SSL_write requires. */
    const void *buf = cnt > 0 ? iov[0].iov_base : NULL;
    size_t len = cnt > 0 ? iov[0].iov_len : 0;
    if (cnt > 1 && len < REC_MAX) {
        if (!out_room(c, REC_MAX - c->out_hi)) {
            errno = ENOMEM;
            return -1;
        }
        len = 0;
        for (int i = 0; i < cnt && len < REC_MAX; i++) {
            size_t m = iov[i].iov_len < REC_MAX - len ? iov[i].iov_len : REC_MAX - len;
            memcpy(c->out + len, iov[i].iov_base, m);
            len += m;
        }
        buf = c->out;
    }
    size_t n = 0;
    ERR_clear_error();
    int r = SSL_write_ex(c->ssl, buf, len, &n);
    return r == 1 ? (ssize_t)n : write_failed(c->ssl, r, want_read);
}

ssize_t lite_tls_write(struct lite_tls_conn *c, const void *buf, size_t len, bool *want_read)
{
    struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
    return lite_tls_writev(c, &v, 1, want_read);
}

int lite_tls_close_notify(struct lite_tls_conn *c)
{
    static const uint8_t a[2] = {1, SSL_AD_CLOSE_NOTIFY}; /* warning level */
    if (!c->own) { /* kTLS (OpenSSL's records), or no handshake done: nothing of ours to end */
        if (!c->batched && c->hs_done) {
            ERR_clear_error();
            (void)SSL_shutdown(c->ssl);
            ERR_clear_error();
        }
        return 0;
    }
    if (c->tx_err || c->tx_closed)
        return 0;
    bool ok = seal_msg(c, a, sizeof(a), CT_ALERT);
    c->tx_closed = true;
    if (!ok)
        return -EPROTO;
    if (out_flush(c) != 0)
        return -errno;
    return out_waiting(c) ? -EAGAIN : 0;
}

bool lite_tls_truncated(const struct lite_tls_conn *c)
{
    return c->truncated;
}

bool lite_tls_pending(struct lite_tls_conn *c)
{
    if (c->own) {
        size_t body;
        return c->pt_lo < c->pt_hi || (!c->rx_err && rl_record_ready(c, &body)) || c->rx_err != 0;
    }
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
        if (errno == EPROTO) /* cut short: bytes are missing, as when the peer is gone */
            return c->truncated ? -LITE_ERR_PEER_LOST : -EPROTO;
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
