/*
 * tls_interop_test.c [CERTDIR] - the library's own TLS 1.3 record layer (src/core/tls.c, built
 * into this program) against plain OpenSSL (SSL_connect/SSL_accept, SSL_read/SSL_write) on the
 * other end of a socketpair. Library-to-library tests cannot see a nonce, AAD or key schedule
 * that is wrong the same way on both sides; a real TLS 1.3 implementation can.
 *
 * For the library as client and as server (its socket non-blocking), psk mode, and ca mode when
 * CERTDIR (tests/tls/gen_certs.sh) is given:
 *   - the peer writes right after its handshake (bytes that may arrive with the last flight);
 *   - 1 MiB each way, written in pieces of 32720, 70000 or 16362 bytes, checked byte by byte;
 *   - the peer asks for a KeyUpdate (SSL_KEY_UPDATE_REQUESTED): the library must take the new
 *     key and answer with its own, which the peer must see and read on with;
 *   - the peer's SSL_shutdown: the library's read returns 0 (the end), and the library's
 *     close_notify reaches the peer as a clean end (SSL_ERROR_ZERO_RETURN);
 *   - the peer's stream ends without close_notify: the library's read fails (EPROTO, truncated)
 *     after the bytes that came, never a clean end;
 *   - a relay that flips one byte of the peer's second record: the library places the first
 *     record and not one byte more, its read fails with EPROTO, and the peer gets an alert.
 *     Read with room for 1 MiB, the flipped record is decrypted in place (tls.c's direct path):
 *     its bytes in the buffer must be zeros, not bytes derived from the altered ciphertext, and
 *     nothing after it touched; read 3000 bytes at a time (through the record buffer), not one
 *     byte of it or after it may be touched;
 *   - the peer pads every record by up to 5000 bytes (RFC 8446 5.4): large padded records are
 *     decrypted in place with their content type inside the destination, small reads take the
 *     same records through the record buffer, the padded KeyUpdate is still acted on;
 *   - a record body of 2^14 + 256 bytes (the limit: it fails its tag, bad_record_mac) and one
 *     byte longer (record_overflow), written raw by the peer: the alert the peer gets.
 * Built twice (tests/tls/CMakeLists.txt): as the library is, and with KEY_UPDATE_RECORDS=2, so
 * that the library's own KeyUpdates (every second record) are checked by OpenSSL as well.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "litetx/transport.h"
#include "tls.h"
#include "tp_support.h"

#define MIB        (1 << 20)
#define EARLY      3000
#define TAIL       1000
#define DEADLINE_S 20
#define PSK_ID     "litetx-job-psk" /* tls.c's identity */

static const uint8_t psk[32] = {0x6c, 0x69, 0x74, 0x65, 0x74, 0x78, 0x2d, 0x69, 0x6e, 0x74, 0x65,
                                0x72, 0x6f, 0x70, 0x2d, 0x74, 0x65, 0x73, 0x74, 0x2d, 0x6b, 0x65,
                                0x79, 0x2d, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37};
static const char *certdir;
static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__);                                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            ERR_print_errors_fp(stderr);                                                           \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static void pattern(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(i * 7 + seed + i / 251);
}

static int64_t deadline(void)
{
    return lite_now_ns() + (int64_t)DEADLINE_S * 1000000000;
}

/* ---- the OpenSSL peer ---- */

static SSL_SESSION *peer_psk_session(SSL *s)
{
    static const unsigned char suite[2] = {0x13, 0x01}; /* TLS_AES_128_GCM_SHA256 */
    SSL_SESSION *x = SSL_SESSION_new();
    if (x && (!SSL_SESSION_set1_master_key(x, psk, sizeof(psk)) ||
              !SSL_SESSION_set_cipher(x, SSL_CIPHER_find(s, suite)) ||
              !SSL_SESSION_set_protocol_version(x, TLS1_3_VERSION))) {
        SSL_SESSION_free(x);
        x = NULL;
    }
    return x;
}

static int peer_psk_use(SSL *s, const EVP_MD *md, const unsigned char **id, size_t *idlen,
                        SSL_SESSION **sess)
{
    *sess = peer_psk_session(s);
    *id = (const unsigned char *)PSK_ID;
    *idlen = strlen(PSK_ID);
    return *sess != NULL;
}

static int peer_psk_find(SSL *s, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
    *sess = idlen == strlen(PSK_ID) && !memcmp(id, PSK_ID, idlen) ? peer_psk_session(s) : NULL;
    return 1;
}

struct peer {
    int fd;
    bool client, ca, tamper;
    size_t wsz;
    size_t pad; /* > 0: padding added to each record (as much as the record has room for) */
    /* > 0: after the handshake, a record header of this body length and as many bytes of
     * garbage, straight to the socket; the alert (OpenSSL's reason) the library must answer */
    size_t raw_body;
    int alert_reason;
    bool truncate;          /* after EARLY bytes, the end of the stream without close_notify */
    atomic_int ku_seen;     /* KeyUpdate messages the peer received */
    atomic_long hs_written; /* bytes the peer wrote during its handshake (-1: not yet) */
    bool ok;
};

/* Counts the KeyUpdates the peer receives (OpenSSL reports each handshake message). */
static void peer_msg(int write_p, int version, int type, const void *buf, size_t len, SSL *s,
                     void *arg)
{
    struct peer *p = arg;
    if (!write_p && type == SSL3_RT_HANDSHAKE && len >= 1 && ((const uint8_t *)buf)[0] == 24)
        atomic_fetch_add(&p->ku_seen, 1);
}

static size_t peer_pad(SSL *s, int type, size_t len, void *arg)
{
    (void)s, (void)type, (void)len;
    return ((struct peer *)arg)->pad; /* OpenSSL keeps the record within 2^14 + 1 */
}

static SSL_CTX *peer_ctx(struct peer *p)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    if (!ctx)
        return NULL;
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_msg_callback(ctx, peer_msg);
    SSL_CTX_set_msg_callback_arg(ctx, p);
    if (p->pad) {
        SSL_CTX_set_record_padding_callback(ctx, peer_pad);
        SSL_CTX_set_record_padding_callback_arg(ctx, p);
    }
    if (p->ca) {
        char cert[512], key[512], ca[512];
        snprintf(cert, sizeof(cert), "%s/rank1.pem", certdir);
        snprintf(key, sizeof(key), "%s/rank1.key", certdir);
        snprintf(ca, sizeof(ca), "%s/ca.pem", certdir);
        if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_load_verify_file(ctx, ca) != 1) {
            SSL_CTX_free(ctx);
            return NULL;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    } else {
        SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
        SSL_CTX_set_psk_use_session_callback(ctx, peer_psk_use);
        SSL_CTX_set_psk_find_session_callback(ctx, peer_psk_find);
    }
    return ctx;
}

static int read_all(SSL *s, uint8_t *b, size_t n)
{
    size_t got = 0, k;
    while (got < n) {
        if (!SSL_read_ex(s, b + got, n - got, &k))
            return -1;
        got += k;
    }
    return 0;
}

static int write_all(SSL *s, const uint8_t *b, size_t n, size_t piece)
{
    size_t k;
    for (size_t put = 0; put < n; put += k)
        if (!SSL_write_ex(s, b + put, n - put < piece ? n - put : piece, &k))
            return -1;
    return 0;
}

static int peer_run(struct peer *p, SSL *s)
{
    uint8_t *mine = malloc(MIB), *want = malloc(MIB), *in = malloc(MIB);
    CHECK(mine && want && in, "no memory");
    pattern(mine, MIB, 2);
    pattern(want, MIB, 1);
    CHECK((p->client ? SSL_connect(s) : SSL_accept(s)) == 1, "peer: handshake");
    atomic_store(&p->hs_written, (long)BIO_number_written(SSL_get_wbio(s)));
    if (p->raw_body) {
        uint8_t *rec = calloc(1, 5 + p->raw_body);
        CHECK(rec, "no memory");
        rec[0] = 23;
        rec[1] = rec[2] = 3;
        rec[3] = (uint8_t)(p->raw_body >> 8);
        rec[4] = (uint8_t)p->raw_body;
        size_t put = 0;
        while (put < 5 + p->raw_body) {
            ssize_t w = write(p->fd, rec + put, 5 + p->raw_body - put);
            if (w <= 0)
                break;
            put += (size_t)w;
        }
        free(rec);
        CHECK(put == 5 + p->raw_body, "peer: write of a raw record");
        size_t k;
        int r = SSL_read_ex(s, in, 1, &k);
        unsigned long e = ERR_peek_error();
        CHECK(r == 0 && ERR_GET_REASON(e) == p->alert_reason,
              "peer: after a %zu-byte record body, not the alert expected (%d) but %d", p->raw_body,
              p->alert_reason, ERR_GET_REASON(e));
        ERR_clear_error();
        goto out;
    }
    if (p->truncate) {
        CHECK(write_all(s, mine, EARLY, EARLY) == 0, "peer: SSL_write");
        goto out;
    }
    if (p->tamper) {
        /* Two full records; the relay flips a byte of the second. The library's alert must
         * end our read. */
        CHECK(write_all(s, mine, 2 * 16384, 2 * 16384) == 0, "peer: SSL_write");
        size_t k;
        int r = SSL_read_ex(s, in, 1, &k);
        CHECK(r == 0 && SSL_get_error(s, r) == SSL_ERROR_SSL,
              "peer: no alert from the library after the flipped byte (read %d, error %d)", r,
              SSL_get_error(s, r));
        ERR_clear_error();
        goto out;
    }
    CHECK(write_all(s, mine, EARLY, EARLY) == 0, "peer: SSL_write right after the handshake");
    CHECK(read_all(s, in, MIB) == 0, "peer: SSL_read of the library's 1 MiB");
    CHECK(!memcmp(in, want, MIB), "peer: the library's 1 MiB arrived wrong");
    int ku_before = atomic_load(&p->ku_seen);
#if KEY_UPDATE_RECORDS == 2
    CHECK(ku_before > 0, "peer: none of the library's own KeyUpdates arrived");
#else
    CHECK(ku_before == 0, "peer: %d KeyUpdates before any was asked for", ku_before);
#endif
    CHECK(SSL_key_update(s, SSL_KEY_UPDATE_REQUESTED) == 1, "peer: SSL_key_update");
    CHECK(write_all(s, mine, MIB, p->wsz) == 0, "peer: SSL_write of 1 MiB");
    CHECK(read_all(s, in, TAIL) == 0, "peer: SSL_read after the KeyUpdate");
    CHECK(!memcmp(in, want, TAIL), "peer: bytes after the KeyUpdate arrived wrong");
    CHECK(atomic_load(&p->ku_seen) > ku_before,
          "peer: the library did not answer the requested KeyUpdate");
    CHECK(SSL_shutdown(s) >= 0, "peer: SSL_shutdown");
    /* The library answers our close_notify with its own. */
    size_t k;
    int r = SSL_read_ex(s, in, 1, &k);
    CHECK(r == 0 && SSL_get_error(s, r) == SSL_ERROR_ZERO_RETURN,
          "peer: no close_notify from the library (read %d, error %d)", r, SSL_get_error(s, r));
out:
    free(mine);
    free(want);
    free(in);
    return 0;
}

static void *peer_main(void *arg)
{
    struct peer *p = arg;
    SSL_CTX *ctx = peer_ctx(p);
    SSL *s = ctx ? SSL_new(ctx) : NULL;
    if (s && SSL_set_fd(s, p->fd) == 1)
        p->ok = peer_run(p, s) == 0;
    else
        fprintf(stderr, "FAILED: peer setup\n");
    SSL_free(s);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    /* The end of the stream, as a closing process's would be; after a failure, both ways, so
     * that the library's end stops waiting at once. */
    shutdown(p->fd, p->ok ? SHUT_WR : SHUT_RDWR);
    return NULL;
}

/* ---- the relay: forwards both ways, flips one byte of the peer's second record ---- */

struct relay {
    int lib, peer; /* its ends toward each */
    struct peer *p;
    atomic_bool stop;
};

static void *relay_main(void *arg)
{
    struct relay *r = arg;
    uint8_t buf[65536];
    long from_peer = 0;
    bool flipped = false;
    while (!atomic_load(&r->stop)) {
        struct pollfd f[2] = {{.fd = r->lib, .events = POLLIN}, {.fd = r->peer, .events = POLLIN}};
        if (poll(f, 2, 100) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (!(f[i].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t n = recv(f[i].fd, buf, sizeof(buf), 0);
            int to = i == 0 ? r->peer : r->lib;
            if (n <= 0) {
                shutdown(to, SHUT_WR);
                return NULL;
            }
            if (i == 1) {
                long hs = atomic_load(&r->p->hs_written);
                /* The second record's body: after the handshake, one full record (5 + 16384 +
                 * 1 + 16 bytes) and the next header. */
                long at = hs + 16406 + 5 + 1000;
                if (hs >= 0 && !flipped && at >= from_peer && at < from_peer + n) {
                    buf[at - from_peer] ^= 0x20;
                    flipped = true;
                }
                from_peer += n;
            }
            for (ssize_t o = 0; o < n;) {
                ssize_t w = send(to, buf + o, (size_t)(n - o), MSG_NOSIGNAL);
                if (w <= 0)
                    return NULL;
                o += w;
            }
        }
    }
    return NULL;
}

/* ---- the library's end ---- */

static int lib_open(bool ca, struct lite_tls **tls)
{
    struct lite_security sec = {.mode = ca ? LITE_SEC_CA : LITE_SEC_PSK};
    if (ca) {
        snprintf(sec.cert, sizeof(sec.cert), "%s/rank0.pem", certdir);
        snprintf(sec.key, sizeof(sec.key), "%s/rank0.key", certdir);
        snprintf(sec.ca, sizeof(sec.ca), "%s/ca.pem", certdir);
    } else {
        memcpy(sec.psk, psk, sizeof(psk));
        sec.psk_len = sizeof(psk);
    }
    char why[256];
    int rc = lite_tls_open(&sec, tls, why, sizeof(why));
    CHECK(rc == 0, "lite_tls_open: %s", why);
    return 0;
}

/* Read until the end or an error, at most piece bytes per read (0: all that is left): 0 at the
 * end, else -errno; *got the bytes placed. */
static int lib_read_until_end(struct lite_tls_conn *c, int fd, uint8_t *buf, size_t len,
                              size_t piece, size_t *got)
{
    int64_t dl = deadline();
    *got = 0;
    while (lite_now_ns() < dl) {
        bool ww;
        size_t want = piece && piece < len - *got ? piece : len - *got;
        ssize_t n = lite_tls_read(c, buf + *got, want, &ww);
        if (n > 0) {
            *got += (size_t)n;
            continue;
        }
        if (n == 0)
            return 0;
        if (errno != EAGAIN)
            return -errno;
        struct pollfd f = {.fd = fd, .events = ww ? POLLOUT : POLLIN};
        (void)poll(&f, 1, 100);
    }
    return -ETIMEDOUT;
}

/* tamper: 0 none, 1 the flipped record read with room for it (in place), 2 read in pieces of
 * 3000 bytes (through the record buffer). pad: the peer's padding per record. */
static int run_case(bool lib_client, bool ca, size_t wsz, int tamper, size_t raw_body,
                    int alert_reason, const char *why_want, bool truncate, size_t pad)
{
    int a[2], b[2] = {-1, -1};
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, a) == 0, "socketpair");
    if (tamper)
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, b) == 0, "socketpair");
    CHECK(fcntl(a[0], F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
    struct lite_tls *tls;
    if (lib_open(ca, &tls))
        return -1;
    struct lite_tls_conn *c = lite_tls_conn_new(tls, a[0], lib_client);
    CHECK(c, "lite_tls_conn_new");
    struct peer p = {.fd = tamper ? b[1] : a[1],
                     .client = !lib_client,
                     .ca = ca,
                     .tamper = tamper != 0,
                     .wsz = wsz,
                     .pad = pad,
                     .raw_body = raw_body,
                     .alert_reason = alert_reason,
                     .truncate = truncate,
                     .hs_written = -1};
    struct relay r = {.lib = a[1], .peer = b[0], .p = &p};
    pthread_t pt, rt;
    CHECK(pthread_create(&pt, NULL, peer_main, &p) == 0, "pthread_create");
    if (tamper)
        CHECK(pthread_create(&rt, NULL, relay_main, &r) == 0, "pthread_create");

    uint8_t *mine = malloc(MIB), *want = malloc(MIB), *in = malloc(MIB + 1);
    int ret = -1;
    char why[256];
    pattern(mine, MIB, 1);
    pattern(want, MIB, 2);
    if (!mine || !want || !in) {
        fprintf(stderr, "FAILED: no memory\n");
    } else if (lite_tls_handshake_wait(c, deadline(), why, sizeof(why)) != 0) {
        fprintf(stderr, "FAILED: library handshake: %s\n", why);
    } else if (truncate) {
        size_t got;
        int rc = lib_read_until_end(c, a[0], in, MIB, 0, &got);
        if (rc != -EPROTO || got != EARLY || memcmp(in, want, EARLY) || !lite_tls_truncated(c) ||
            !strstr(lite_tls_error(), "without close_notify"))
            fprintf(stderr,
                    "FAILED: the end without close_notify: read -> %d (%s), %zu bytes placed\n", rc,
                    lite_tls_error(), got);
        else
            ret = 0;
    } else if (raw_body) {
        size_t got;
        int rc = lib_read_until_end(c, a[0], in, MIB, 0, &got);
        if (rc != -EPROTO || got || !strstr(lite_tls_error(), why_want))
            fprintf(stderr, "FAILED: a %zu-byte record body: read -> %d (%s), %zu bytes placed\n",
                    raw_body, rc, lite_tls_error(), got);
        else
            ret = 0;
    } else if (tamper) {
        /* The first record is placed, nothing of the flipped one or after it: in place, the
         * flipped record's bytes are zeros (its last byte, the content type, never goes
         * there); through the record buffer they are untouched. */
        memset(in, 0xee, MIB);
        size_t got;
        int rc = lib_read_until_end(c, a[0], in, MIB, tamper == 2 ? 3000 : 0, &got);
        bool untouched = true;
        for (size_t i = got; i < 3 * 16384; i++) {
            uint8_t w = tamper == 1 && i >= 16384 && i < 2 * 16384 ? 0 : 0xee;
            untouched = untouched && in[i] == w;
        }
        if (rc != -EPROTO || got != 16384 || memcmp(in, want, got) || !untouched)
            fprintf(stderr,
                    "FAILED: flipped byte (%s): read -> %d (%s), %zu bytes placed (want -EPROTO, "
                    "16384, the flipped record %s, the rest untouched: %s)\n",
                    tamper == 1 ? "in place" : "through the record buffer", rc, lite_tls_error(),
                    got, tamper == 1 ? "zeros" : "untouched", untouched ? "yes" : "no");
        else
            ret = 0;
    } else {
        int64_t dl = deadline();
        int rc = lite_tls_read_full(c, in, EARLY, dl);
        if (rc || memcmp(in, want, EARLY)) {
            fprintf(stderr, "FAILED: the peer's first bytes: %d (%s)\n", rc, lite_tls_error());
            goto done;
        }
        for (size_t put = 0; put < MIB; put += wsz) {
            size_t k = MIB - put < wsz ? MIB - put : wsz;
            rc = lite_tls_write_full(c, mine + put, k, dl);
            if (rc) {
                fprintf(stderr, "FAILED: library write at %zu: %d (%s)\n", put, rc,
                        lite_tls_error());
                goto done;
            }
        }
        rc = lite_tls_read_full(c, in, MIB, dl);
        if (rc || memcmp(in, want, MIB)) {
            fprintf(stderr,
                    "FAILED: library read of 1 MiB (across the peer's KeyUpdate): %d (%s)\n", rc,
                    lite_tls_error());
            goto done;
        }
        rc = lite_tls_write_full(c, mine, TAIL, dl);
        if (rc) {
            fprintf(stderr, "FAILED: library write after the KeyUpdate: %d (%s)\n", rc,
                    lite_tls_error());
            goto done;
        }
        size_t got;
        rc = lib_read_until_end(c, a[0], in, MIB, 0, &got);
        if (rc != 0 || got != 0) {
            fprintf(stderr, "FAILED: after the peer's close_notify: read -> %d (%s), %zu bytes\n",
                    rc, lite_tls_error(), got);
            goto done;
        }
        rc = lite_tls_close_notify(c);
        bool wr;
        if (rc || lite_tls_write(c, mine, 1, &wr) != -1 || errno != EPIPE) {
            fprintf(stderr, "FAILED: lite_tls_close_notify -> %d, or a write after it went out\n",
                    rc);
            goto done;
        }
        ret = 0;
    }
done:
    if (ret) /* let the peer's blocking calls end */
        shutdown(a[0], SHUT_RDWR);
    pthread_join(pt, NULL);
    if (tamper) {
        atomic_store(&r.stop, true);
        pthread_join(rt, NULL);
    }
    if (!p.ok)
        ret = -1;
    lite_tls_conn_free(c);
    lite_tls_close(tls);
    for (int i = 0; i < 2; i++) {
        close(a[i]);
        if (b[i] >= 0)
            close(b[i]);
    }
    free(mine);
    free(want);
    free(in);
    return ret;
}

int main(int argc, char **argv)
{
    certdir = argc > 1 ? argv[1] : NULL;
    static const size_t sizes[] = {32720, 70000, 16362};
    for (int client = 1; client >= 0; client--) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            int rc = run_case(client, false, sizes[i], 0, 0, 0, NULL, false, 0);
            printf("%s psk, library as %s, pieces of %zu bytes\n", rc ? "FAILED" : "ok",
                   client ? "client" : "server", sizes[i]);
            failures += rc != 0;
        }
        for (int how = 1; how <= 2; how++) {
            int rc = run_case(client, false, 0, how, 0, 0, NULL, false, 0);
            printf("%s psk, library as %s, a flipped byte (%s)\n", rc ? "FAILED" : "ok",
                   client ? "client" : "server",
                   how == 1 ? "in place: zeros" : "through the record buffer: untouched");
            failures += rc != 0;
        }
        int rc = run_case(client, false, 70000, 0, 0, 0, NULL, false, 5000);
        printf("%s psk, library as %s, pieces of 70000 bytes, records padded by up to 5000\n",
               rc ? "FAILED" : "ok", client ? "client" : "server");
        failures += rc != 0;
        if (certdir) {
            rc = run_case(client, true, 70000, 0, 0, 0, NULL, false, 0);
            printf("%s ca, library as %s, pieces of 70000 bytes\n", rc ? "FAILED" : "ok",
                   client ? "client" : "server");
            failures += rc != 0;
        }
    }
    /* RFC 8446 5.2: a body of 2^14 + 256 bytes is allowed (this one then fails its tag), one
     * byte more is record_overflow. */
    static const struct {
        size_t body;
        int reason;
        const char *why;
    } raw[] = {{16640, SSL_AD_REASON_OFFSET + SSL_AD_BAD_RECORD_MAC, "bad record mac"},
               {16641, SSL_AD_REASON_OFFSET + SSL_AD_RECORD_OVERFLOW, "2^14 + 256"}};
    for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
        int rc = run_case(true, false, 0, 0, raw[i].body, raw[i].reason, raw[i].why, false, 0);
        printf("%s psk, a record body of %zu bytes -> %s\n", rc ? "FAILED" : "ok", raw[i].body,
               raw[i].why);
        failures += rc != 0;
    }
    int rc = run_case(false, false, 0, 0, 0, 0, NULL, true, 0);
    printf("%s psk, the end without close_notify -> an error\n", rc ? "FAILED" : "ok");
    failures += rc != 0;
#if KEY_UPDATE_RECORDS == 2
    printf("%s (the library updates its key every 2 records)\n", failures ? "FAILED" : "PASS");
#else
    printf("%s\n", failures ? "FAILED" : "PASS");
#endif
    return failures ? 1 : 0;
}
