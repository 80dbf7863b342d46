/*
 * badinput_client.c - a stranger's QUIC client (ngtcp2 + GnuTLS, ALPN "litetx") that dials one
 * rank's UDP port while a job runs (tests/quic/badinput.sh), to check what the rank does with it.
 *
 *   badinput_client PORT nocert|cert [CERT KEY] [-a|-e] [-H RANK] [-t MS]
 *
 *   nocert   present no client certificate
 *   cert     present CERT/KEY (e.g. a certificate from another CA)
 *   -a       the rank is expected to accept the handshake (security off: anybody can complete
 *            TLS); the client then writes noise on a stream, which the rank must refuse without
 *            harm to the job
 *   -e       either outcome is fine (a rank's own certificate used by a stranger: the rank may
 *            complete TLS and refuse at its identity check); the job must go on
 *   -H RANK  once accepted, start the stream with a HELLO frame claiming RANK (with made-up
 *            bootstrap nonces) before the noise: a stranger claiming a rank's identity
 *   -t MS    how long to try (default 5000)
 *
 * "Accepted" means the handshake was confirmed (the server's HANDSHAKE_DONE came: in TLS 1.3 the
 * client finishes before the server has judged its certificate, so completion alone says
 * nothing). Prints one line saying what happened. Exit 0 when that is what was expected
 * (refused without -a, accepted with -a), 1 otherwise, 2 on a local error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "lite_int.h" /* the stream codec's constants, for the forged HELLO */

struct client {
    ngtcp2_crypto_conn_ref ref;
    ngtcp2_conn *conn;
    gnutls_session_t tls;
    gnutls_certificate_credentials_t cred;
    int fd;
    struct sockaddr_in local, remote;
    bool confirmed, closed;
    int64_t stream;
    uint64_t noise_sent;
    int hello_rank; /* -1: no HELLO */
};

/* The stream codec's 48-byte header (src/core/lite_int.h), little-endian: a HELLO from `rank`. */
static void forge_hello(uint8_t *out, int rank)
{
    memset(out, 0, LITE_WIRE_HDR_LEN);
    out[0] = LITE_WIRE_MAGIC & 0xFF, out[1] = LITE_WIRE_MAGIC >> 8;
    out[2] = LITE_WIRE_VERSION;
    out[3] = LITE_WIRE_HELLO;
    for (int i = 0; i < 8; i++) {
        out[8 + i] = (uint8_t)((uint64_t)rank >> (8 * i));         /* tag: the rank */
        out[24 + i] = (uint8_t)(0x1122334455667788ull >> (8 * i)); /* key: a made-up nonce */
        out[32 + i] = (uint8_t)(0x8877665544332211ull >> (8 * i)); /* offset: another */
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NGTCP2_SECONDS + (uint64_t)ts.tv_nsec;
}

static void rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    (void)gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

static int new_cid_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *user)
{
    (void)conn;
    (void)user;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) ||
        gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN))
        return NGTCP2_ERR_CALLBACK_FAILURE;
    cid->datalen = cidlen;
    return 0;
}

static int confirmed_cb(ngtcp2_conn *conn, void *user)
{
    (void)conn;
    ((struct client *)user)->confirmed = true;
    return 0;
}

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
    return ((struct client *)ref->user_data)->conn;
}

static int fail(const char *what, const char *why)
{
    fprintf(stderr, "badinput_client: %s: %s\n", what, why);
    exit(2);
}

/* Sends what ngtcp2 has to send (and, once confirmed, noise on a stream, 256 KiB at most). */
static void flush(struct client *c)
{
    static uint8_t noise[4096];
    uint8_t buf[1452];
    for (int i = 0; i < 256; i++) {
        ngtcp2_path_storage ps;
        ngtcp2_path_storage_zero(&ps);
        ngtcp2_pkt_info pi;
        ngtcp2_ssize wlen = -1;
        int64_t sid = -1;
        ngtcp2_vec v = {noise, 0};
        if (c->confirmed && c->noise_sent < 256 * 1024) {
            /* a unidirectional stream, as the ranks use; a bidirectional one if refused */
            if (c->stream < 0 && ngtcp2_conn_open_uni_stream(c->conn, &c->stream, NULL) != 0 &&
                ngtcp2_conn_open_bidi_stream(c->conn, &c->stream, NULL) != 0)
                c->stream = -1;
            if (c->stream >= 0) {
                (void)gnutls_rnd(GNUTLS_RND_NONCE, noise, sizeof noise);
                if (c->noise_sent == 0 && c->hello_rank >= 0)
                    forge_hello(noise, c->hello_rank);
                sid = c->stream;
                v.len = sizeof noise;
            }
        }
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(c->conn, &ps.path, &pi, buf, sizeof buf, &wlen,
                                                   NGTCP2_WRITE_STREAM_FLAG_NONE, sid, &v,
                                                   sid >= 0 ? 1 : 0, now_ns());
        if (wlen > 0)
            c->noise_sent += (uint64_t)wlen;
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR ||
            n == NGTCP2_ERR_STREAM_NOT_FOUND) {
            c->noise_sent = UINT64_MAX; /* the server stopped the stream: no more noise */
            continue;
        }
        if (n <= 0)
            return;
        (void)send(c->fd, buf, (size_t)n, 0);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3)
        fail("usage", "badinput_client PORT nocert|cert [CERT KEY] [-a|-e] [-H RANK] [-t MS]");
    int port = atoi(argv[1]);
    const char *mode = argv[2];
    const char *cert = NULL, *key = NULL;
    int argi = 3;
    if (!strcmp(mode, "cert")) {
        if (argc < 5)
            fail("usage", "cert needs CERT and KEY");
        cert = argv[3], key = argv[4], argi = 5;
    } else if (strcmp(mode, "nocert")) {
        fail("usage", "mode is nocert or cert");
    }
    bool expect_accept = false, either = false;
    int hello_rank = -1;
    long timeout_ms = 5000;
    for (; argi < argc; argi++) {
        if (!strcmp(argv[argi], "-a"))
            expect_accept = true;
        else if (!strcmp(argv[argi], "-e"))
            either = true;
        else if (!strcmp(argv[argi], "-H") && argi + 1 < argc)
            hello_rank = atoi(argv[++argi]);
        else if (!strcmp(argv[argi], "-t") && argi + 1 < argc)
            timeout_ms = atol(argv[++argi]);
        else
            fail("usage", argv[argi]);
    }

    struct client c = {.stream = -1, .hello_rank = hello_rank};
    c.ref.get_conn = get_conn;
    c.ref.user_data = &c;
    c.fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (c.fd < 0)
        fail("socket", strerror(errno));
    c.remote = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    c.remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c.fd, (struct sockaddr *)&c.remote, sizeof c.remote) < 0)
        fail("connect", strerror(errno));
    socklen_t sl = sizeof c.local;
    getsockname(c.fd, (struct sockaddr *)&c.local, &sl);

    /* TLS: any server certificate (the rank's is not what is under test), AES-GCM, ALPN litetx */
    if (gnutls_certificate_allocate_credentials(&c.cred))
        fail("gnutls", "credentials");
    if (cert) {
        int rc = gnutls_certificate_set_x509_key_file(c.cred, cert, key, GNUTLS_X509_FMT_PEM);
        if (rc < 0)
            fail(cert, gnutls_strerror(rc));
    }
    if (gnutls_init(&c.tls, GNUTLS_CLIENT) ||
        ngtcp2_crypto_gnutls_configure_client_session(c.tls) != 0)
        fail("gnutls", "session");
    if (gnutls_priority_set_direct(c.tls,
                                   "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:"
                                   "+AES-256-GCM:%DISABLE_TLS13_COMPAT_MODE",
                                   NULL))
        fail("gnutls", "priority");
    gnutls_session_set_ptr(c.tls, &c.ref);
    gnutls_credentials_set(c.tls, GNUTLS_CRD_CERTIFICATE, c.cred);
    gnutls_datum_t alpn = {(unsigned char *)"litetx", 6};
    gnutls_alpn_set_protocols(c.tls, &alpn, 1, GNUTLS_ALPN_MANDATORY);
    gnutls_server_name_set(c.tls, GNUTLS_NAME_DNS, "localhost", 9);

    ngtcp2_callbacks cb = {
        .client_initial = ngtcp2_crypto_client_initial_cb,
        .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
        .encrypt = ngtcp2_crypto_encrypt_cb,
        .decrypt = ngtcp2_crypto_decrypt_cb,
        .hp_mask = ngtcp2_crypto_hp_mask_cb,
        .recv_retry = ngtcp2_crypto_recv_retry_cb,
        .rand = rand_cb,
        .get_new_connection_id = new_cid_cb,
        .update_key = ngtcp2_crypto_update_key_cb,
        .handshake_confirmed = confirmed_cb,
        .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
        .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
        .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
        .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
    };
    ngtcp2_cid dcid = {.datalen = 16}, scid = {.datalen = 8};
    (void)gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen);
    (void)gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen);
    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = now_ns();
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    params.initial_max_streams_bidi = 4;
    params.initial_max_streams_uni = 4;
    params.initial_max_stream_data_bidi_local = 1 << 20;
    params.initial_max_stream_data_bidi_remote = 1 << 20;
    params.initial_max_data = 4 << 20;
    ngtcp2_path path = {{(struct sockaddr *)&c.local, sizeof c.local},
                        {(struct sockaddr *)&c.remote, sizeof c.remote},
                        NULL};
    if (ngtcp2_conn_client_new(&c.conn, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb, &settings,
                               &params, NULL, &c))
        fail("ngtcp2", "client_new");
    ngtcp2_conn_set_tls_native_handle(c.conn, c.tls);

    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u, accepted_at = 0;
    char why[256] = "no answer before the deadline";
    static uint8_t buf[65536];
    while (now_ns() < deadline && !c.closed) {
        flush(&c);
        uint64_t exp = ngtcp2_conn_get_expiry(c.conn), now = now_ns();
        int wait_ms = exp <= now ? 0 : (int)((exp - now) / 1000000u) + 1;
        if (wait_ms > 100)
            wait_ms = 100;
        struct pollfd p = {.fd = c.fd, .events = POLLIN};
        poll(&p, 1, wait_ms);
        for (;;) {
            ssize_t n = recv(c.fd, buf, sizeof buf, 0);
            if (n < 0)
                break;
            ngtcp2_pkt_info pi = {0};
            int rc = ngtcp2_conn_read_pkt(c.conn, &path, &pi, buf, (size_t)n, now_ns());
            if (rc) {
                ngtcp2_connection_close_error ce;
                ngtcp2_conn_get_connection_close_error(c.conn, &ce);
                snprintf(why, sizeof why,
                         "closed: %s, the server's close: type %d code 0x%llx reason '%.*s', tls "
                         "alert %u",
                         ngtcp2_strerror(rc), (int)ce.type, (unsigned long long)ce.error_code,
                         (int)ce.reasonlen, ce.reason ? (const char *)ce.reason : "",
                         ngtcp2_conn_get_tls_alert(c.conn));
                c.closed = true;
                break;
            }
        }
        if (!c.closed && ngtcp2_conn_handle_expiry(c.conn, now_ns()) != 0) {
            snprintf(why, sizeof why, "timed out (idle or handshake timeout)");
            c.closed = true;
        }
        if (c.confirmed && !accepted_at)
            accepted_at = now_ns();
        /* Accepted: 1 s of noise on a stream, then done. */
        if (accepted_at && now_ns() - accepted_at > NGTCP2_SECONDS)
            break;
    }
    bool accepted = c.confirmed;
    printf("badinput_client: %s by 127.0.0.1:%d (%s); %s; %llu bytes of noise sent on a stream\n",
           accepted ? "accepted" : "refused", port, mode, why,
           c.noise_sent == UINT64_MAX ? 0ull : (unsigned long long)c.noise_sent);
    ngtcp2_conn_del(c.conn);
    gnutls_deinit(c.tls);
    gnutls_certificate_free_credentials(c.cred);
    close(c.fd);
    return either || accepted == expect_accept ? 0 : 1;
}
