/*
 * quic.c - the QUIC transport: ngtcp2 0.12 with GnuTLS (quic_tls.c), one UDP socket per rank,
 * one QUIC connection per pair of ranks, driven entirely from progress(). A message-only
 * backend: one-sided ops and the rendezvous of large messages are carried by the core
 * (src/core/rma_emu.c). docs/QUIC.md is the reference page.
 *
 * Connections: the lower rank of a pair dials the higher one, at the address the higher one
 * published in the bootstrap. Each side opens one unidirectional stream and sends on it the
 * core's messages as frames of the stream codec (src/core/wire.c: a 48-byte header, then the
 * payload), the first of them a HELLO: the sender's rank, the receiver's bootstrap nonce and its
 * own (so a connection from another job, or a stale process at a reused port, is refused). One
 * stream per direction keeps the backend's one promise, posting order across channels; a large
 * message therefore delays the small ones behind it (head-of-line blocking), as on tcp.
 *
 * Packets are matched to connections by their destination connection ID, never by source
 * address alone: every ID this rank issues starts with the connection's slot number, so a lookup
 * is one array index plus a check that the ID is one ngtcp2 issued for that connection. An
 * Initial packet with an unknown ID starts a server-side connection, which is anonymous until
 * its HELLO names a rank.
 *
 * Sending: a message of up to COPY_MAX bytes is copied and its send_done reported at once; a
 * longer one stays where the caller has it (ngtcp2 reads stream data from the application's
 * memory, for retransmissions too) and completes when the peer acknowledged its last byte.
 * Packets leave in batches of equal size through UDP GSO (one sendmsg) where the kernel has it;
 * receives use recvmmsg and UDP GRO. Timers (loss recovery, acknowledgements, idle) run from
 * progress via ngtcp2_conn_get_expiry / ngtcp2_conn_handle_expiry.
 *
 * Links (docs/QUIC.md "Reconnection"): a pair's traffic is one byte stream per direction that
 * outlives its QUIC connections. Each connection's stream starts with a preamble, HELLO (ranks,
 * both incarnations, the epoch) then ACK (how many bytes of the peer's link stream this side
 * has taken), and carries the link stream from where the peer says it stopped. A frame's
 * sequence number is its byte offset in the link stream; QUIC's own stream acknowledgement
 * (reported for the gap-free prefix, sent only after the receive callback took the bytes) is the
 * cumulative "applied" acknowledgement, so the frames a sender keeps until acknowledged are the
 * replay set. A break (idle timeout, a CONNECTION_CLOSE other than BYE or a refusal, a failed
 * write) keeps the link: the lower rank, which dialled, redials with backoff and jitter for up to
 * reconnect_timeout_ms.
 *
 * Peer loss: an ICMP "port unreachable" for a peer's address (IP_RECVERR): its process is gone;
 * a refused resume (a new incarnation at the address); no resume within reconnect_timeout_ms
 * after a break (no packet for the idle timeout, LITETX_QUIC_IDLE_MS, default 30 s, is one:
 * keep-alive PINGs every second keep a quiet pair alive). An orderly close is a
 * CONNECTION_CLOSE with the application code BYE after this rank's data was acknowledged.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "tp_support.h"
#include "quic_frame.h"
#include "quic_tls.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define CIDLEN        16                         /* u32 slot | 12 random bytes */
#define BLOB_LEN      (1 + LITE_SOCK_PACKED + 8) /* family | address | nonce */
#define COPY_MAX      (64 * 1024)    /* payloads copied (send_done at once) up to this */
#define SMALL_MAX     QUIC_SMALL_MAX /* payloads handed over whole (recv_msg) up to this */
#define RX_BATCH      16             /* datagrams per recvmmsg */
#define RX_BUF        65536
#define TX_BUF        65536 /* one GSO batch: at most 64 KiB in all */
#define TX_PKTS_CALL  256   /* packets one write pass sends to a peer at most */
#define GSO_SEGS      64
#define WHY_LEN       160
#define LINGER_MS     2000                /* close waits this long for its data to be acked */
#define HELLO_WAIT_NS (10LL * 1000000000) /* an anonymous connection's time to say HELLO */
#define MAX_STRANGERS 64                  /* anonymous connections at once */
#define REFUSE_LOG_NS 1000000000LL        /* refusals: at most one warn line per this period */
/* A lone short packet's acknowledgement waits this long for stream data to ride on (the reply
 * of a ping-pong) before it goes alone; two packets or more, or a long one, are acknowledged at
 * once. */
#define ACK_HOLD_NS (100LL * 1000)
#define PRE_LEN     QUIC_PRE_LEN /* a connection's preamble: HELLO, then ACK */
/* Redials after a break: 5 ms doubling to 500 ms, each with a jitter of 50-150 %; an attempt
 * whose handshake and preamble are not through in ATTEMPT_NS is abandoned for the next. */
#define BACKOFF_MIN_MS    5
#define BACKOFF_MAX_MS    500
#define ATTEMPT_NS        (1000LL * 1000000)
#define RECONNECT_DEFAULT 10000

/* Application close codes. BREAK: a connection dropped on purpose (the test hook); a link
 * resumes after it as after any other break. */
enum { APP_BYE = 1, APP_PROTO = 2, APP_REFUSED = 3, APP_BREAK = 4 };
enum {
    LINK_INIT = QUIC_LINK_INIT,
    LINK_UP = QUIC_LINK_UP,
    LINK_DOWN = QUIC_LINK_DOWN,
    LINK_FAILED = QUIC_LINK_FAILED
};

struct qmsg {
    struct qmsg *next;
    uint64_t end; /* link-stream offset just past this message */
    size_t total; /* header + payload */
    const uint8_t *payload;
    void *op; /* send_done owed when acknowledged (not copied), else NULL */
    uint8_t hdr[LITE_WIRE_HDR_LEN];
    uint8_t data[]; /* the copy */
};

struct qconn {
    ngtcp2_crypto_conn_ref ref; /* GnuTLS's session pointer: how ngtcp2 finds the connection */
    struct lite_transport *t;
    ngtcp2_conn *conn;
    gnutls_session_t tls;
    uint32_t slot;
    int peer;    /* its rank, -1 until its HELLO */
    int dialled; /* the rank this rank dialled (client side), -1 on the server side */
    bool server, ready, dead, want_write, hello_rx, closed_sent;
    uint32_t rx_unacked;  /* packets read since this connection last wrote */
    int64_t hold_until;   /* writes for acknowledgements alone wait until then (0: none held) */
    ngtcp2_tstamp expiry; /* ngtcp2_conn_get_expiry as of the last call into ngtcp2; 0: ask */
    int fail_code;        /* set inside callbacks, acted on after them */
    char fail_why[160];
    struct sockaddr_storage remote;
    socklen_t remote_len;
    ngtcp2_cid odcid; /* server side: the client's first destination ID */
    int64_t tx_sid, rx_sid;
    /* This side's preamble (pre_ready once made), pre_pos of it given to ngtcp2; then the
     * link's queue from wcur/wpos (the first byte not yet given), once tx_go: the peer's ACK said
     * where its link stream stands, and tx_base is that link offset (this stream's PRE_LEN). */
    uint8_t pre[PRE_LEN];
    size_t pre_pos;
    bool pre_ready, tx_go;
    struct qmsg *wcur;
    size_t wpos;
    uint64_t tx_base, acked_end; /* acked_end: stream offset acknowledged (gap-free) */
    uint8_t rpre[PRE_LEN];       /* the peer's preamble being gathered */
    size_t rpre_fill;
    uint32_t epoch;
    uint64_t park_unext; /* bytes taken while parked: the windows reopen by them at unpark */
    int hook;            /* the test hook broke it: 1 close, 2 drop silently */
    int64_t born_ns;
    char desc[80];
};

/* A pair's link: its byte stream each way, across connections (epochs). */
struct qlink {
    struct lite_transport *t;
    int peer, state;
    bool was_up;
    struct qconn *c; /* the connection carrying it (dialler: also an attempt not yet through) */
    /* send: frames not yet acknowledged, in order; tx_end link bytes queued, tx_acked taken by
     * the peer */
    struct qmsg *head, *tail;
    uint64_t tx_end, tx_acked;
    /* receive: the peer's link stream cut into frames, rx_got bytes of it taken */
    struct quic_rx rx;
    uint64_t rx_got;
    uint8_t *park; /* link bytes that came while parked (handed over at unpark) */
    size_t park_len, park_cap;
    uint32_t epoch;
    unsigned attempts;
    int64_t down_ns, next_dial_ns;
    uint64_t breaks, resumes;
    char down_why[WHY_LEN];
};

struct lite_transport {
    int rank, world;
    struct lite_core *core;
    const struct lite_core_upcalls *up;
    int fd, family;
    struct sockaddr_storage addr, adv;
    socklen_t addr_len;
    uint64_t nonce, *peer_nonce;
    struct sockaddr_storage *peer_addr;
    socklen_t *peer_addr_len;
    struct quic_tls *tls;
    const struct lite_security *sec;
    struct qconn **slots;
    uint32_t nslots;
    struct qconn **by_rank;
    struct qlink *links; /* per rank */
    bool *failed;        /* reported to the core (at most once each) */
    char *lost_why;      /* connect_all: why each rank failed, WHY_LEN bytes each */
    bool connecting;     /* inside connect_all: failures are recorded, not reported */
    bool closing;        /* inside close: no upcalls */
    /* Parked: between connect_all and the core's first call, a thread keeps the pairs moving
     * (the core's bootstrap barrier makes no progress), holding back what is for the core. */
    bool parked;
    int park_stop;
    pthread_t parker;
    int in_ng; /* inside ngtcp2 calls: msg_send only queues */
    bool gso, gro;
    size_t max_payload;
    uint64_t idle_ns;
    int cc;
    uint64_t win_stream, win_conn;
    int events;
    uint8_t *txbuf;
    uint8_t *rxbuf;
    struct mmsghdr rxm[RX_BATCH];
    struct iovec rxiov[RX_BATCH];
    struct sockaddr_storage rxaddr[RX_BATCH];
    char rxctl[RX_BATCH][64];
    uint64_t dropped; /* datagrams no connection took */
    bool send_warned;
    uint32_t strangers;
    /* Refused connections: the first of a quiet spell is logged in full, the ones after it
     * counted and summed up in one line per REFUSE_LOG_NS (a flood of noise Initials is one
     * refusal each). */
    uint64_t refused, refused_quiet; /* in all; not logged yet */
    int64_t refuse_next_ns, refuse_since_ns;
    char refuse_last[240];
    int reconnect_ms;    /* 0: a break is final */
    bool links_down;     /* some link is down: link_tick runs */
    unsigned rng;        /* backoff jitter */
    uint64_t *break_at;  /* LITETX_TEST_BREAK_AT: link bytes taken at which to break, ascending */
    uint8_t *break_drop; /* per entry: drop silently (suffix d) rather than close */
    int nbreak, next_break;
    uint64_t rx_total; /* link bytes taken from all peers */
};

static void refuse_flush(struct lite_transport *t, int64_t now)
{
    if (!t->refused_quiet)
        return;
    LITE_WARN("quic rank %d: refused %llu more connection(s) in the last %.1f s, not logged one by "
              "one (the last from %s)",
              t->rank, (unsigned long long)t->refused_quiet,
              (double)(now - t->refuse_since_ns) / 1e9, t->refuse_last);
    t->refused_quiet = 0;
    t->refuse_next_ns = now + REFUSE_LOG_NS;
}

static void refuse_log(struct lite_transport *t, const char *desc, const char *why)
{
    int64_t now = lite_now_ns();
    t->refused++;
    if (now >= t->refuse_next_ns && !t->refused_quiet) {
        LITE_WARN("quic rank %d: refused a connection from %s: %s", t->rank, desc, why);
        t->refuse_next_ns = now + REFUSE_LOG_NS;
        return;
    }
    if (!t->refused_quiet++)
        t->refuse_since_ns = now;
    lite_fmt(t->refuse_last, sizeof(t->refuse_last), "%s: %s", desc, why);
    if (now >= t->refuse_next_ns)
        refuse_flush(t, now);
}

static ngtcp2_tstamp now_ts(void)
{
    return (ngtcp2_tstamp)lite_now_ns();
}

static void rand_bytes(uint8_t *p, size_t n)
{
    if (gnutls_rnd(GNUTLS_RND_NONCE, p, n) != 0) {
        for (size_t i = 0; i < n; i++) /* never expected: gnutls_rnd does not fail once inited */
            p[i] = (uint8_t)(lite_now_ns() >> (i % 8));
    }
}

/* ---- failures and links ---- */

static struct qlink *link_of(struct qconn *c)
{
    struct lite_transport *t = c->t;
    int peer = c->peer >= 0 ? c->peer : c->dialled;
    return peer >= 0 && t->links[peer].c == c ? &t->links[peer] : NULL;
}

/* Complete (status 0) or fail every kept frame the peer has taken up to `upto` (UINT64_MAX with
 * an error status: all of them). */
static void link_release(struct lite_transport *t, struct qlink *l, uint64_t upto, int status)
{
    while (l->head && l->head->end <= upto) {
        struct qmsg *m = l->head;
        if (l->c && l->c->wcur == m)
            break; /* never: the peer cannot take bytes not yet given to it */
        l->head = m->next;
        if (!l->head)
            l->tail = NULL;
        if (m->op && !t->closing) {
            t->up->send_done(t->core, m->op, status);
            t->events++;
        }
        free(m);
    }
}

/* A connection is finished with: no more packets are read or written on it, and it is freed at
 * the end of the pass (reap). */
static void conn_kill(struct qconn *c)
{
    struct lite_transport *t = c->t;
    if (c->dead)
        return;
    c->dead = true;
    struct qlink *l = link_of(c);
    if (l) {
        l->c = NULL;
        if (t->by_rank[l->peer] == c)
            t->by_rank[l->peer] = NULL;
    }
}

/* The link is lost for good: tell the core once (or record it during connect_all) and fail what
 * is queued. */
static void link_fail(struct lite_transport *t, struct qlink *l, int status, const char *why)
{
    if (l->c)
        conn_kill(l->c);
    if (l->state == LINK_FAILED)
        return;
    l->state = LINK_FAILED;
    int peer = l->peer;
    if (t->connecting) {
        lite_fmt(t->lost_why + (size_t)peer * WHY_LEN, WHY_LEN, "%s", why);
    } else if (!t->failed[peer] && !t->closing) {
        t->failed[peer] = true;
        LITE_INFO("quic rank %d: rank %d: %s", t->rank, peer, why);
        t->up->peer_failed(t->core, peer, status, why);
    }
    if (!t->connecting)
        t->failed[peer] = true;
    link_release(t, l, UINT64_MAX, status);
}

/* A failure that ends the pair (or, for a connection no link has, just that connection). */
static void conn_fail(struct qconn *c, int status, const char *why)
{
    struct lite_transport *t = c->t;
    if (c->dead)
        return;
    struct qlink *l = link_of(c);
    if (l) {
        link_fail(t, l, status, why);
        return;
    }
    c->dead = true;
    if (c->server && c->peer < 0 && !t->closing)
        refuse_log(t, c->desc, why);
}

static int64_t backoff_ns(struct lite_transport *t, unsigned attempts)
{
    int64_t ms = attempts >= 7 ? BACKOFF_MAX_MS : (int64_t)BACKOFF_MIN_MS << attempts;
    if (ms > BACKOFF_MAX_MS)
        ms = BACKOFF_MAX_MS;
    int64_t ns = ms * 1000000;
    return ns / 2 + (int64_t)(rand_r(&t->rng) % 1000) * ns / 1000;
}

/* The link's connection broke (or a redial attempt failed): it waits for the next one. */
static void link_down(struct lite_transport *t, struct qlink *l, const char *why)
{
    int64_t now = lite_now_ns();
    if (l->c)
        conn_kill(l->c);
    if (l->state == LINK_UP) {
        l->down_ns = now;
        l->attempts = 0;
        l->breaks++;
        lite_fmt(l->down_why, sizeof(l->down_why), "%s", why);
        LITE_WARN("quic rank %d: link to rank %d broke (epoch %u): %s; reconnecting for up to %d "
                  "ms",
                  t->rank, l->peer, l->epoch, why, t->reconnect_ms);
    } else {
        LITE_DEBUG("quic rank %d: reconnection to rank %d failed: %s", t->rank, l->peer, why);
    }
    l->state = LINK_DOWN;
    l->next_dial_ns = now + backoff_ns(t, l->attempts);
    t->links_down = true;
}

/* A break that a link may survive: resumed when reconnection is on and the link was up once. */
static void conn_break(struct qconn *c, const char *why)
{
    struct lite_transport *t = c->t;
    if (c->dead)
        return;
    struct qlink *l = link_of(c);
    if (!l) {
        conn_fail(c, -LITE_ERR_PEER_LOST, why);
        return;
    }
    if (t->reconnect_ms > 0 && l->was_up && (l->state == LINK_UP || l->state == LINK_DOWN))
        link_down(t, l, why);
    else
        link_fail(t, l, -LITE_ERR_PEER_LOST, why);
}

/* ---- sending packets ---- */

static void send_batch(struct lite_transport *t, struct qconn *c, const uint8_t *buf, size_t len,
                       size_t seg)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    char ctl[CMSG_SPACE(sizeof(uint16_t))];
    struct msghdr mh = {
        .msg_name = &c->remote, .msg_namelen = c->remote_len, .msg_iov = &iov, .msg_iovlen = 1};
    if (seg && len > seg) {
        memset(ctl, 0, sizeof(ctl));
        mh.msg_control = ctl;
        mh.msg_controllen = sizeof(ctl);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t s = (uint16_t)seg;
        memcpy(CMSG_DATA(cm), &s, sizeof(s));
    }
    for (int tries = 0; tries < 50; tries++) {
        if (sendmsg(t->fd, &mh, MSG_DONTWAIT) >= 0)
            return;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == ENOBUFS) {
            /* The socket's buffer is full: wait a little for room; past that the batch counts
             * as lost and QUIC's recovery sends it again. */
            struct pollfd p = {.fd = t->fd, .events = POLLOUT};
            poll(&p, 1, 1);
            continue;
        }
        if (errno == EIO && seg) { /* GSO refused by the route's device: plain datagrams now */
            t->gso = false;
            for (size_t off = 0; off < len; off += seg)
                send_batch(t, c, buf + off, len - off < seg ? len - off : seg, 0);
            return;
        }
        /* ECONNREFUSED and the like: an ICMP error queued for an earlier packet (read from the
         * error queue by the receive pass); this packet counts as lost. */
        if (errno != ECONNREFUSED && errno != EHOSTUNREACH && !t->send_warned) {
            t->send_warned = true;
            LITE_WARN("quic rank %d: sendmsg of %zu bytes (segments of %zu) to %s failed: %s; "
                      "counted as lost",
                      t->rank, len, seg, c->desc, strerror(errno));
        }
        return;
    }
}

/* Whether the connection has stream bytes not yet given to ngtcp2. */
static inline bool conn_has_data(const struct qconn *c)
{
    return (c->pre_ready && c->pre_pos < PRE_LEN) || (c->tx_go && c->wcur);
}

/* Give ngtcp2 the stream bytes from the write cursor on: the preamble's rest, then the link's. */
static size_t build_vecs(struct qconn *c, ngtcp2_vec *v, size_t max, bool *all)
{
    size_t n = 0, pos = c->wpos;
    if (c->pre_ready && c->pre_pos < PRE_LEN) {
        v[n].base = c->pre + c->pre_pos;
        v[n].len = PRE_LEN - c->pre_pos;
        n++;
    }
    struct qmsg *m = c->tx_go ? c->wcur : NULL;
    for (; m && n < max; m = m->next, pos = 0) {
        if (pos < LITE_WIRE_HDR_LEN) {
            v[n].base = m->hdr + pos;
            v[n].len = LITE_WIRE_HDR_LEN - pos;
            n++;
            pos = LITE_WIRE_HDR_LEN;
        }
        size_t plen = m->total - LITE_WIRE_HDR_LEN;
        if (n < max && pos < m->total) {
            v[n].base = (uint8_t *)m->payload + (pos - LITE_WIRE_HDR_LEN);
            v[n].len = plen - (pos - LITE_WIRE_HDR_LEN);
            n++;
        } else if (pos < m->total) {
            break; /* out of vectors inside this message */
        }
    }
    *all = m == NULL;
    return n;
}

static void advance_cursor(struct qconn *c, size_t n)
{
    if (c->pre_ready && c->pre_pos < PRE_LEN) {
        size_t k = PRE_LEN - c->pre_pos < n ? PRE_LEN - c->pre_pos : n;
        c->pre_pos += k;
        n -= k;
    }
    while (n && c->wcur) {
        size_t left = c->wcur->total - c->wpos;
        if (n < left) {
            c->wpos += n;
            return;
        }
        n -= left;
        c->wcur = c->wcur->next;
        c->wpos = 0;
    }
}

static void conn_close_error(struct qconn *c, uint64_t app_code, int liberr, const char *reason)
{
    struct lite_transport *t = c->t;
    if (c->closed_sent || !c->conn || ngtcp2_conn_is_in_closing_period(c->conn) ||
        ngtcp2_conn_is_in_draining_period(c->conn))
        return;
    c->closed_sent = true;
    c->expiry = 0;
    ngtcp2_connection_close_error ccerr;
    ngtcp2_connection_close_error_default(&ccerr);
    size_t rlen = reason ? strlen(reason) : 0;
    if (liberr)
        ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, liberr,
                                                                 (const uint8_t *)reason, rlen);
    else if (!c->hello_rx)
        /* Before the pair is up (an application close needs the handshake confirmed first:
         * ngtcp2 asserts it): a transport-level refusal. */
        ngtcp2_connection_close_error_set_transport_error(&ccerr, NGTCP2_CONNECTION_REFUSED,
                                                          (const uint8_t *)reason, rlen);
    else
        ngtcp2_connection_close_error_set_application_error(&ccerr, app_code,
                                                            (const uint8_t *)reason, rlen);
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    t->in_ng++;
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->conn, &ps.path, &pi, t->txbuf,
                                                        t->max_payload, &ccerr, now_ts());
    t->in_ng--;
    if (n > 0)
        send_batch(t, c, t->txbuf, (size_t)n, 0);
}

/* Write what ngtcp2 has for this connection: stream data, acknowledgements, retransmissions. */
static void conn_write(struct lite_transport *t, struct qconn *c)
{
    if (c->dead || !c->conn)
        return;
    c->want_write = false;
    c->rx_unacked = 0;
    c->hold_until = 0;
    c->expiry = 0;
    ngtcp2_tstamp ts = now_ts();
    if (c->tx_sid < 0 && ngtcp2_conn_get_handshake_completed(c->conn)) {
        int64_t sid;
        if (ngtcp2_conn_open_uni_stream(c->conn, &sid, NULL) == 0)
            c->tx_sid = sid;
    }
    size_t maxpkt = ngtcp2_conn_get_max_tx_udp_payload_size(c->conn);
    if (maxpkt > t->max_payload)
        maxpkt = t->max_payload;
    /* A GSO batch is one UDP datagram until the kernel splits it: at most 64 KiB in all. */
    size_t cap = t->gso ? (t->family == AF_INET6 ? 65527 : 65507) : maxpkt;
    size_t off = 0, seg = 0, npkt = 0;
    bool blocked = false;
    t->in_ng++;
    for (int total = 0; total < TX_PKTS_CALL;) {
        ngtcp2_vec vec[16];
        size_t nv = 0;
        int64_t sid = -1;
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_NONE;
        if (c->tx_sid >= 0 && conn_has_data(c) && !blocked) {
            bool all;
            nv = build_vecs(c, vec, 16, &all);
            sid = c->tx_sid;
            /* MORE only when queued bytes remain past these vectors: a lone message is one
             * call (an 8-byte ping's packet is done at once). */
            flags = all ? NGTCP2_WRITE_STREAM_FLAG_NONE : NGTCP2_WRITE_STREAM_FLAG_MORE;
        }
        ngtcp2_path_storage ps;
        ngtcp2_path_storage_zero(&ps);
        ngtcp2_pkt_info pi;
        ngtcp2_ssize ndata = -1;
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(c->conn, &ps.path, &pi, t->txbuf + off, maxpkt,
                                                   &ndata, flags, sid, vec, nv, ts);
        if (ndata > 0)
            advance_cursor(c, (size_t)ndata);
        if (n == NGTCP2_ERR_WRITE_MORE)
            continue; /* the packet has room for more: the next vectors */
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR) {
            blocked = true; /* flow control: acks and other frames only */
            continue;
        }
        if (n < 0) {
            char why[WHY_LEN];
            lite_fmt(why, sizeof(why), "QUIC write failed: %s", ngtcp2_strerror((int)n));
            t->in_ng--;
            conn_close_error(c, 0, (int)n, NULL);
            t->in_ng++;
            conn_break(c, why);
            break;
        }
        if (n == 0)
            break; /* nothing more, or the congestion window is full */
        total++;
        /* A short packet with no stream data left behind it took all ngtcp2 had: asking again
         * would cost a pass through its writer for nothing (a lone message's packet). */
        bool last = !conn_has_data(c) && (size_t)n < 1200 && c->tx_sid >= 0;
        /* GSO: equal-size packets in one buffer, a shorter one ends the batch. */
        if (npkt == 0) {
            seg = (size_t)n;
        } else if ((size_t)n > seg) {
            send_batch(t, c, t->txbuf, off, seg);
            memmove(t->txbuf, t->txbuf + off, (size_t)n);
            off = 0;
            npkt = 0;
            seg = (size_t)n;
        }
        off += (size_t)n;
        npkt++;
        if ((size_t)n < seg || !t->gso || npkt >= GSO_SEGS || off + maxpkt > cap) {
            send_batch(t, c, t->txbuf, off, seg);
            off = 0;
            npkt = 0;
        }
        if (total == TX_PKTS_CALL)
            c->want_write = true; /* more next pass: other peers get their turn */
        if (last)
            break;
    }
    if (off)
        send_batch(t, c, t->txbuf, off, seg);
    t->in_ng--;
}

/* ---- queueing messages ---- */

static int queue_frame(struct lite_transport *t, struct qlink *l, const struct lite_wire_hdr *h,
                       const void *payload, uint64_t len, void *op, bool copy)
{
    (void)t;
    if (len > ((uint64_t)1 << 48))
        return -EMSGSIZE;
    struct qmsg *m = malloc(sizeof(*m) + (copy ? len : 0));
    if (!m)
        return -ENOMEM;
    m->next = NULL;
    m->total = LITE_WIRE_HDR_LEN + len;
    m->op = copy ? NULL : op;
    lite_wire_encode(h, m->hdr);
    if (copy && len)
        memcpy(m->data, payload, len);
    m->payload = copy ? m->data : payload;
    l->tx_end += m->total;
    m->end = l->tx_end;
    if (l->tail)
        l->tail->next = m;
    else
        l->head = m;
    l->tail = m;
    struct qconn *c = l->c;
    if (c) {
        if (c->tx_go && !c->wcur) {
            c->wcur = m;
            c->wpos = 0;
        }
        c->want_write = true;
    }
    return 0;
}

/* This side's preamble on connection c to rank `to`: HELLO (its rank, the incarnation it
 * expects of the peer, its own, the epoch), then ACK (link bytes taken from the peer). */
static void make_preamble(struct lite_transport *t, struct qconn *c, int to)
{
    struct lite_wire_hdr h = {.type = LITE_WIRE_HELLO,
                              .tag = (uint64_t)t->rank,
                              .key = t->peer_nonce[to],
                              .offset = t->nonce,
                              .imm = c->epoch};
    struct lite_wire_hdr a = {.type = LITE_WIRE_FENCE, .key = t->links[to].rx_got};
    lite_wire_encode(&h, c->pre);
    lite_wire_encode(&a, c->pre + LITE_WIRE_HDR_LEN);
    c->pre_pos = 0;
    c->pre_ready = true;
    c->want_write = true;
}

/* The peer took `a` bytes of this side's link stream: what it took completes, the link goes on
 * from there on connection c. */
static void link_tx_start(struct lite_transport *t, struct qlink *l, struct qconn *c, uint64_t a)
{
    l->tx_acked = a;
    link_release(t, l, a, 0);
    c->tx_base = a;
    c->tx_go = true;
    c->wcur = l->head;
    c->wpos = l->head ? (size_t)(a - (l->head->end - l->head->total)) : 0;
    c->want_write = true;
}

/* ---- ngtcp2 callbacks ---- */

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
    return ((struct qconn *)ref)->conn;
}

static void cb_rand(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    rand_bytes(dest, len);
}

static void make_cid(struct qconn *c, ngtcp2_cid *cid)
{
    uint8_t b[CIDLEN];
    lite_put32(b, c->slot);
    rand_bytes(b + 4, CIDLEN - 4);
    ngtcp2_cid_init(cid, b, CIDLEN);
}

static int cb_new_cid(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *user)
{
    (void)conn;
    (void)cidlen;
    make_cid(user, cid);
    rand_bytes(token, NGTCP2_STATELESS_RESET_TOKENLEN);
    return 0;
}

static int cb_handshake_done(ngtcp2_conn *conn, void *user)
{
    (void)conn;
    struct qconn *c = user;
    if (!quic_tls_alpn_ok(c->tls)) {
        lite_fmt(c->fail_why, sizeof(c->fail_why), "the handshake did not agree on ALPN %s",
                 QUIC_ALPN);
        c->fail_code = -EACCES;
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    struct lite_transport *t = c->t;
    if (c->server && t->sec && t->sec->mode == LITE_SEC_CA) {
        /* Refused before the handshake is confirmed: only a lower rank dials this one. */
        int cr = quic_tls_peer_rank(c->tls);
        if (cr < 0 || cr >= t->rank) {
            if (cr < 0)
                lite_fmt(c->fail_why, sizeof(c->fail_why), "its certificate names no rank");
            else
                lite_fmt(c->fail_why, sizeof(c->fail_why),
                         "its certificate is rank %d's, which never dials rank %d", cr, t->rank);
            c->fail_code = -EACCES;
            return NGTCP2_ERR_CALLBACK_FAILURE;
        }
    }
    if (!c->server && t->sec && t->sec->mode == LITE_SEC_CA) {
        int cr = quic_tls_peer_rank(c->tls);
        if (cr != c->dialled) {
            if (cr >= 0)
                lite_fmt(c->fail_why, sizeof(c->fail_why),
                         "the server at its address has rank %d's certificate, not rank %d's", cr,
                         c->dialled);
            else
                lite_fmt(c->fail_why, sizeof(c->fail_why),
                         "the server at its address has a certificate naming no rank");
            c->fail_code = -EACCES;
            return NGTCP2_ERR_CALLBACK_FAILURE;
        }
    }
    c->want_write = true;
    return 0;
}

static int cb_acked(ngtcp2_conn *conn, int64_t sid, uint64_t offset, uint64_t len, void *user,
                    void *sud)
{
    (void)conn;
    (void)sid;
    (void)sud;
    struct qconn *c = user;
    if (offset + len > c->acked_end)
        c->acked_end = offset + len;
    struct qlink *l = link_of(c);
    if (l && c->tx_go && c->acked_end > PRE_LEN) {
        uint64_t a = c->tx_base + (c->acked_end - PRE_LEN);
        if (a > l->tx_acked) {
            l->tx_acked = a;
            link_release(c->t, l, a, 0);
        }
    }
    return 0;
}

static int proto_error(struct qconn *c, int code, const char *fmt, const char *detail)
{
    char d[120];
    lite_fmt(d, sizeof(d), fmt, detail ? detail : "");
    lite_fmt(c->fail_why, sizeof(c->fail_why), "%s", d);
    c->fail_code = code;
    return NGTCP2_ERR_CALLBACK_FAILURE;
}

static void link_up(struct lite_transport *t, struct qlink *l, struct qconn *c)
{
    if (l->state == LINK_DOWN) {
        l->resumes++;
        LITE_WARN("quic rank %d: link to rank %d resumed (epoch %u) after %.1f ms, %u attempt(s)",
                  t->rank, l->peer, l->epoch, (double)(lite_now_ns() - l->down_ns) / 1e6,
                  l->attempts);
    }
    l->state = LINK_UP;
    l->was_up = true;
    c->ready = true;
}

/* The peer's preamble on connection c: who it is (quic_hello_check), which epoch, and where
 * this side's link stream resumes. 0, or a negative code with why filled. */
static int preamble_rx(struct qconn *c, char *why, size_t why_len)
{
    struct lite_transport *t = c->t;
    bool ca = t->sec && t->sec->mode == LITE_SEC_CA;
    struct quic_hello_ctx x = {.rank = t->rank,
                               .world = t->world,
                               .nonce = t->nonce,
                               .peer_nonce = t->peer_nonce,
                               .dialled = c->dialled,
                               .cert_checked = ca,
                               .cert_rank = ca ? quic_tls_peer_rank(c->tls) : -1};
    struct quic_preamble p;
    int r = quic_preamble_decode(&x, c->rpre, &p, why, why_len);
    if (r < 0)
        return r;
    struct qlink *l = &t->links[r];
    struct quic_link_view v = {.server = c->server,
                               .state = l->state,
                               .other_conn = l->c && l->c != c && !l->c->dead,
                               .resumable = t->reconnect_ms > 0,
                               .link_epoch = l->epoch,
                               .conn_epoch = c->epoch,
                               .tx_acked = l->tx_acked,
                               .tx_end = l->tx_end};
    int rc = quic_preamble_link_check(&v, &p, why, why_len);
    if (rc < 0)
        return rc;
    if (c->server) {
        if (p.takeover) /* the peer saw a break first: this side breaks too, and resumes */
            link_down(t, l, "the peer reconnected (it saw the connection break)");
        if (l->c && l->c != c)
            conn_kill(l->c);
        l->c = c;
        t->by_rank[r] = c;
        l->epoch = p.epoch;
        c->epoch = p.epoch;
        lite_fmt(c->desc, sizeof(c->desc), "rank %d", r);
        if (t->strangers)
            t->strangers--;
    }
    c->peer = r;
    if (c->server)
        make_preamble(t, c, r);
    link_tx_start(t, l, c, p.applied);
    c->hello_rx = true;
    link_up(t, l, c);
    return 0;
}

/* A whole short message (payload in hand). */
static int rx_msg(void *u, const struct lite_msg_hdr *h, const uint8_t *p, char *why,
                  size_t why_len)
{
    struct qlink *l = u;
    struct lite_transport *t = l->t;
    int rc = t->up->recv_msg(t->core, l->peer, h, p);
    t->events++;
    if (rc < 0) {
        lite_fmt(why, why_len,
                 "it sent a message the core refused (%d; channel %u, tag %#llx, %llu bytes, "
                 "flags %#x)",
                 rc, h->channel, (unsigned long long)h->tag, (unsigned long long)h->len, h->flags);
        return rc;
    }
    return 0;
}

static int rx_begin(void *u, const struct lite_msg_hdr *h, void **dst, void **token)
{
    struct qlink *l = u;
    struct lite_transport *t = l->t;
    t->events++;
    return t->up->recv_begin(t->core, l->peer, h, dst, token);
}

static void rx_end(void *u, void *token)
{
    struct qlink *l = u;
    l->t->up->recv_end(l->t->core, l->peer, token);
}

static int rx_hello_never(void *u, const struct lite_wire_hdr *h, char *why, size_t why_len)
{
    (void)u;
    (void)h;
    lite_fmt(why, why_len, "it sent a HELLO inside its link stream");
    return -LITE_ERR_PROTOCOL;
}

static const struct quic_rx_ops g_rx_ops = {
    .hello = rx_hello_never, .msg = rx_msg, .begin = rx_begin, .end = rx_end};

/* Bytes of a link's receive stream, in order: 0, or a negative code with why filled. */
static int rx_bytes(struct qlink *l, const uint8_t *p, size_t n, char *why, size_t why_len)
{
    l->rx.discard = l->t->closing;
    return quic_rx_feed(&l->rx, &g_rx_ops, l, p, n, why, why_len);
}

/* n link bytes taken from connection c: handed to the frame parser, or kept while parked. */
static int take(struct qconn *c, struct qlink *l, const uint8_t *p, size_t n)
{
    struct lite_transport *t = c->t;
    t->rx_total += n;
    l->rx_got += n;
    if (t->parked) {
        /* Kept for the core; the windows stay where they are until it takes them. */
        if (l->park_len + n > l->park_cap) {
            size_t cap = l->park_cap ? l->park_cap : 65536;
            while (cap < l->park_len + n)
                cap *= 2;
            uint8_t *b = realloc(l->park, cap);
            if (!b)
                return proto_error(c, -ENOMEM, "out of memory%s", NULL);
            l->park = b;
            l->park_cap = cap;
        }
        memcpy(l->park + l->park_len, p, n);
        l->park_len += n;
        c->park_unext += n;
        return 0;
    }
    /* Taken at once (into the core's buffers): the windows reopen by what arrived. */
    ngtcp2_conn_extend_max_stream_offset(c->conn, c->rx_sid, n);
    ngtcp2_conn_extend_max_offset(c->conn, n);
    c->want_write = true;
    int rc = rx_bytes(l, p, n, c->fail_why, sizeof(c->fail_why));
    if (rc) {
        c->fail_code = rc;
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int cb_recv_stream(ngtcp2_conn *conn, uint32_t flags, int64_t sid, uint64_t offset,
                          const uint8_t *data, size_t len, void *user, void *sud)
{
    (void)flags;
    (void)offset;
    (void)sud;
    struct qconn *c = user;
    struct lite_transport *t = c->t;
    if (c->dead)
        return NGTCP2_ERR_CALLBACK_FAILURE; /* nothing more is taken from it (nor acknowledged) */
    if (c->rx_sid < 0)
        c->rx_sid = sid;
    else if (sid != c->rx_sid)
        return proto_error(c, -LITE_ERR_PROTOCOL, "it opened a second stream%s", NULL);
    if (c->rpre_fill < PRE_LEN) {
        size_t k = PRE_LEN - c->rpre_fill < len ? PRE_LEN - c->rpre_fill : len;
        memcpy(c->rpre + c->rpre_fill, data, k);
        c->rpre_fill += k;
        data += k;
        len -= k;
        ngtcp2_conn_extend_max_stream_offset(conn, sid, k);
        ngtcp2_conn_extend_max_offset(conn, k);
        c->want_write = true;
        if (c->rpre_fill < PRE_LEN)
            return 0;
        int rc = preamble_rx(c, c->fail_why, sizeof(c->fail_why));
        if (rc) {
            c->fail_code = rc;
            return NGTCP2_ERR_CALLBACK_FAILURE;
        }
    }
    if (!len)
        return 0;
    struct qlink *l = link_of(c);
    if (!l || !c->hello_rx)
        return proto_error(c, -LITE_ERR_PROTOCOL, "stream data on a connection no link has%s",
                           NULL);
    /* Test hook: take the bytes up to the next break point, then break the connection (the
     * packet is not acknowledged: the rest comes again on the next connection). */
    while (t->next_break < t->nbreak && t->break_at[t->next_break] < t->rx_total)
        t->next_break++;
    if (t->next_break < t->nbreak && t->rx_total + len >= t->break_at[t->next_break]) {
        size_t k = (size_t)(t->break_at[t->next_break] - t->rx_total);
        c->hook = t->break_drop[t->next_break] ? 2 : 1;
        t->next_break++;
        int rc = k ? take(c, l, data, k) : 0;
        if (rc)
            return rc;
        lite_fmt(c->fail_why, sizeof(c->fail_why), "broken on purpose after %llu bytes (%s)",
                 (unsigned long long)t->rx_total, c->hook == 2 ? "dropped" : "closed");
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return take(c, l, data, len);
}

static const ngtcp2_callbacks g_callbacks = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = cb_handshake_done,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = cb_recv_stream,
    .acked_stream_data_offset = cb_acked,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .rand = cb_rand,
    .get_new_connection_id = cb_new_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

/* ---- connections ---- */

static struct qconn *conn_alloc(struct lite_transport *t)
{
    uint32_t slot = 0;
    while (slot < t->nslots && t->slots[slot])
        slot++;
    if (slot == t->nslots) {
        uint32_t n = t->nslots ? t->nslots * 2 : 16;
        struct qconn **s = realloc(t->slots, n * sizeof(*s));
        if (!s)
            return NULL;
        memset(s + t->nslots, 0, (n - t->nslots) * sizeof(*s));
        t->slots = s;
        t->nslots = n;
    }
    struct qconn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->ref.get_conn = get_conn;
    c->ref.user_data = c;
    c->t = t;
    c->slot = slot;
    c->peer = c->dialled = -1;
    c->tx_sid = c->rx_sid = -1;
    c->born_ns = lite_now_ns();
    t->slots[slot] = c;
    return c;
}

static void conn_free(struct qconn *c)
{
    struct lite_transport *t = c->t;
    if (c->conn)
        ngtcp2_conn_del(c->conn);
    if (c->tls)
        gnutls_deinit(c->tls);
    t->slots[c->slot] = NULL;
    for (int r = 0; r < t->world; r++) {
        if (t->by_rank[r] == c)
            t->by_rank[r] = NULL;
        if (t->links[r].c == c)
            t->links[r].c = NULL;
    }
    if (c->peer < 0 && c->server && t->strangers)
        t->strangers--;
    free(c);
}

static void settings_for(struct lite_transport *t, ngtcp2_settings *s, ngtcp2_transport_params *p)
{
    ngtcp2_settings_default(s);
    s->initial_ts = now_ts();
    s->cc_algo = (ngtcp2_cc_algo)t->cc;
    s->max_tx_udp_payload_size = t->max_payload;
    s->no_tx_udp_payload_size_shaping = 1; /* the configured size from the first packet on */
    s->no_pmtud = 1;
    s->initial_rtt = 10 * NGTCP2_MILLISECONDS;
    s->max_window = t->win_conn;
    s->max_stream_window = t->win_stream;
    s->handshake_timeout = 30 * NGTCP2_SECONDS;
    /* Every packet that needs an acknowledgement makes the next packet written carry one (by
     * default a lone packet's waits srtt / 8, a few microseconds here, so a ping-pong's reply
     * went without it and an ACK-only packet followed each way). When that next packet is
     * written is the backend's choice: see write_all. */
    s->ack_thresh = 1;
    ngtcp2_transport_params_default(p);
    p->initial_max_streams_uni = 1;
    p->initial_max_streams_bidi = 0;
    p->initial_max_stream_data_uni = t->win_stream;
    p->initial_max_data = t->win_conn;
    p->max_idle_timeout = t->idle_ns;
    p->max_udp_payload_size = t->max_payload;
    p->max_ack_delay = NGTCP2_MILLISECONDS; /* a lone last packet is acknowledged soon */
    p->disable_active_migration = 1;
}

static int conn_finish_setup(struct lite_transport *t, struct qconn *c, int expect_rank, char *why,
                             size_t why_len)
{
    c->tls = quic_tls_session(t->tls, c->server, expect_rank, &c->ref, why, why_len);
    if (!c->tls)
        return -LITE_ERR_CONFIG;
    ngtcp2_conn_set_tls_native_handle(c->conn, c->tls);
    ngtcp2_conn_set_keep_alive_timeout(c->conn, NGTCP2_SECONDS);
    return 0;
}

/* Dial rank r (this rank is the lower of the pair): epoch 0 at init, then each redial. */
static int conn_dial(struct lite_transport *t, int r, uint32_t epoch, char *why, size_t why_len)
{
    struct qconn *c = conn_alloc(t);
    if (!c)
        return -ENOMEM;
    c->dialled = r;
    c->epoch = epoch;
    c->remote = t->peer_addr[r];
    c->remote_len = t->peer_addr_len[r];
    lite_fmt(c->desc, sizeof(c->desc), "rank %d", r);
    ngtcp2_cid dcid, scid;
    uint8_t b[18];
    rand_bytes(b, sizeof(b));
    ngtcp2_cid_init(&dcid, b, sizeof(b));
    make_cid(c, &scid);
    ngtcp2_path path = {
        .local = {.addr = (ngtcp2_sockaddr *)&t->addr, .addrlen = t->addr_len},
        .remote = {.addr = (ngtcp2_sockaddr *)&c->remote, .addrlen = c->remote_len}};
    ngtcp2_settings s;
    ngtcp2_transport_params p;
    settings_for(t, &s, &p);
    int rc = ngtcp2_conn_client_new(&c->conn, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1,
                                    &g_callbacks, &s, &p, NULL, c);
    if (rc) {
        lite_fmt(why, why_len, "quic: ngtcp2_conn_client_new: %s", ngtcp2_strerror(rc));
        conn_free(c);
        return -ENOMEM;
    }
    rc = conn_finish_setup(t, c, r, why, why_len);
    if (rc) {
        conn_free(c);
        return rc;
    }
    t->links[r].c = c;
    t->by_rank[r] = c;
    make_preamble(t, c, r);
    return 0;
}

/* A new Initial from an unknown ID: a server-side connection, anonymous until its HELLO. */
static struct qconn *conn_accept(struct lite_transport *t, const uint8_t *pkt, size_t len,
                                 const struct sockaddr_storage *from, socklen_t fromlen)
{
    ngtcp2_pkt_hd hd;
    if (ngtcp2_accept(&hd, pkt, len) != 0)
        return NULL;
    if (t->strangers >= MAX_STRANGERS) {
        t->dropped++;
        return NULL;
    }
    struct qconn *c = conn_alloc(t);
    if (!c)
        return NULL;
    c->server = true;
    c->remote = *from;
    c->remote_len = fromlen;
    c->odcid = hd.dcid;
    char host[64];
    uint16_t port;
    lite_sock_name(from, host, sizeof(host), &port);
    lite_fmt(c->desc, sizeof(c->desc), "%s port %u", host, port);
    t->strangers++;
    ngtcp2_cid scid;
    make_cid(c, &scid);
    ngtcp2_path path = {
        .local = {.addr = (ngtcp2_sockaddr *)&t->addr, .addrlen = t->addr_len},
        .remote = {.addr = (ngtcp2_sockaddr *)&c->remote, .addrlen = c->remote_len}};
    ngtcp2_settings s;
    ngtcp2_transport_params p;
    settings_for(t, &s, &p);
    p.original_dcid = hd.dcid;
    char why[WHY_LEN];
    int rc = ngtcp2_conn_server_new(&c->conn, &hd.scid, &scid, &path, hd.version, &g_callbacks, &s,
                                    &p, NULL, c);
    if (rc || conn_finish_setup(t, c, -1, why, sizeof(why))) {
        conn_free(c);
        return NULL;
    }
    return c;
}

/* ---- receiving packets ---- */

static struct qconn *conn_by_dcid(struct lite_transport *t, const uint8_t *dcid, size_t len)
{
    if (len == CIDLEN) {
        uint32_t slot = lite_get32(dcid);
        struct qconn *c = slot < t->nslots ? t->slots[slot] : NULL;
        if (c && c->conn) {
            ngtcp2_cid ids[16];
            size_t n = ngtcp2_conn_get_num_scid(c->conn);
            if (n <= 16) {
                n = ngtcp2_conn_get_scid(c->conn, ids);
                for (size_t i = 0; i < n; i++)
                    if (ids[i].datalen == len && memcmp(ids[i].data, dcid, len) == 0)
                        return c;
            }
        }
    }
    /* A client's Initial and 0-RTT packets name the ID it made up itself. */
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct qconn *c = t->slots[i];
        if (c && c->server && c->odcid.datalen == len && memcmp(c->odcid.data, dcid, len) == 0)
            return c;
    }
    return NULL;
}

/* Whether a peer's CONNECTION_CLOSE ends the pair: BYE (it finalized), a refusal (a new
 * incarnation at the address, or a link it has failed) or a protocol error it found. */
static bool close_is_final(const ngtcp2_connection_close_error *e)
{
    if (e->type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION)
        return e->error_code == APP_BYE || e->error_code == APP_PROTO ||
               e->error_code == APP_REFUSED;
    return e->error_code == NGTCP2_CONNECTION_REFUSED;
}

static void conn_read_error(struct qconn *c, int rv)
{
    char why[WHY_LEN];
    if (rv == NGTCP2_ERR_DRAINING) {
        ngtcp2_connection_close_error ccerr;
        ngtcp2_conn_get_connection_close_error(c->conn, &ccerr);
        const ngtcp2_connection_close_error *e = &ccerr;
        if (e->type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION &&
            e->error_code == APP_BYE) {
            lite_fmt(why, sizeof(why), "rank %d finalized and closed", c->peer);
            conn_fail(c, -ESHUTDOWN, why);
            return;
        }
        lite_fmt(why, sizeof(why), "the peer closed the connection (%s code %llu%s%.*s)",
                 e->type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION ? "application"
                                                                                : "transport",
                 (unsigned long long)e->error_code, e->reasonlen ? ": " : "",
                 (int)(e->reasonlen < 100 ? e->reasonlen : 100), (const char *)e->reason);
        if (close_is_final(e))
            conn_fail(c, -LITE_ERR_PEER_LOST, why);
        else
            conn_break(c, why);
        return;
    }
    if (rv == NGTCP2_ERR_CALLBACK_FAILURE && c->fail_code) {
        conn_close_error(c, c->fail_code == -EACCES ? APP_REFUSED : APP_PROTO, 0, "refused");
        conn_fail(c, c->fail_code, c->fail_why);
        return;
    }
    if (rv == NGTCP2_ERR_CALLBACK_FAILURE && c->hook) {
        if (c->hook == 1)
            conn_close_error(c, APP_BREAK, 0, "test break");
        lite_fmt(why, sizeof(why), "%s", c->fail_why);
        conn_break(c, why);
        return;
    }
    if (rv == NGTCP2_ERR_CRYPTO) {
        char v[WHY_LEN];
        quic_tls_verify_text(c->tls, v, sizeof(v));
        uint8_t alert = ngtcp2_conn_get_tls_alert(c->conn);
        lite_fmt(why, sizeof(why), "TLS handshake failed%s%s%s (alert %u: %s)", v[0] ? " (" : "", v,
                 v[0] ? ")" : "", alert,
                 gnutls_alert_get_strname((gnutls_alert_description_t)alert)
                     ? gnutls_alert_get_strname((gnutls_alert_description_t)alert)
                     : "?");
        conn_close_error(c, 0, rv, NULL);
        conn_fail(c, -EACCES, why);
        return;
    }
    if (rv == NGTCP2_ERR_DROP_CONN) {
        if (c->server && c->peer < 0)
            conn_fail(c, -LITE_ERR_PEER_LOST,
                      "its Initial packet did not decrypt or parse (noise, or not QUIC)");
        else
            conn_break(c, "the connection was dropped");
        return;
    }
    lite_fmt(why, sizeof(why), "QUIC error: %s", ngtcp2_strerror(rv));
    conn_close_error(c, 0, rv, NULL);
    conn_break(c, why);
}

static void rx_packet(struct lite_transport *t, const uint8_t *pkt, size_t len,
                      const struct sockaddr_storage *from, socklen_t fromlen)
{
    ngtcp2_version_cid vc;
    if (!len)
        return; /* a probe of a rank whose link is down (link_tick): it only checks we listen */
    int rv = ngtcp2_pkt_decode_version_cid(&vc, pkt, len, CIDLEN);
    if (rv != 0) {
        t->dropped++;
        return;
    }
    struct qconn *c = conn_by_dcid(t, vc.dcid, vc.dcidlen);
    if (!c) {
        if (!(pkt[0] & 0x80) || t->closing) {
            t->dropped++; /* a short-header packet for no connection: dropped, no reset */
            return;
        }
        c = conn_accept(t, pkt, len, from, fromlen);
        if (!c) {
            t->dropped++;
            return;
        }
    }
    if (c->dead)
        return;
    ngtcp2_path path = {.local = {.addr = (ngtcp2_sockaddr *)&t->addr, .addrlen = t->addr_len},
                        .remote = {.addr = (ngtcp2_sockaddr *)from, .addrlen = fromlen}};
    ngtcp2_pkt_info pi = {0};
    ngtcp2_tstamp ts = now_ts();
    t->in_ng++;
    rv = ngtcp2_conn_read_pkt(c->conn, &path, &pi, pkt, len, ts);
    t->in_ng--;
    t->events++;
    c->want_write = true;
    c->expiry = 0;
    if (c->rx_unacked++ == 0)
        c->hold_until = (int64_t)ts + ACK_HOLD_NS;
    if (len >= 1200)
        c->rx_unacked = 2; /* part of a large transfer, whose sender waits for the ack: now */
    if (rv)
        conn_read_error(c, rv);
}

/* ICMP errors for packets this rank sent (IP_RECVERR): "port unreachable" from a peer's
 * address means nothing listens there any more, its process is gone. */
static void rx_errqueue(struct lite_transport *t)
{
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage dst;
        char ctl[512];
        uint8_t dummy[64];
        struct iovec iov = {.iov_base = dummy, .iov_len = sizeof(dummy)};
        struct msghdr mh = {.msg_name = &dst,
                            .msg_namelen = sizeof(dst),
                            .msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = ctl,
                            .msg_controllen = sizeof(ctl)};
        if (recvmsg(t->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            return;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
                  (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)))
                continue;
            struct sock_extended_err ee;
            memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
            bool unreach =
                (ee.ee_origin == SO_EE_ORIGIN_ICMP && ee.ee_type == 3 && ee.ee_code == 3) ||
                (ee.ee_origin == SO_EE_ORIGIN_ICMP6 && ee.ee_type == 1 && ee.ee_code == 4);
            if (!unreach)
                continue;
            const char *why = "its port is closed (ICMP port unreachable): the process is gone";
            for (uint32_t s = 0; s < t->nslots; s++) {
                struct qconn *c = t->slots[s];
                if (!c || c->dead || c->remote_len != mh.msg_namelen ||
                    memcmp(&c->remote, &dst, c->remote_len) != 0)
                    continue;
                conn_fail(c, -LITE_ERR_PEER_LOST, why);
            }
            /* a link that is down: the probe or a redial found nobody listening */
            for (int r = 0; r < t->world; r++)
                if (t->links && t->links[r].state == LINK_DOWN &&
                    t->peer_addr_len[r] == mh.msg_namelen &&
                    memcmp(&t->peer_addr[r], &dst, mh.msg_namelen) == 0)
                    link_fail(t, &t->links[r], -LITE_ERR_PEER_LOST, why);
        }
    }
}

static void split_gro(struct lite_transport *t, int i, size_t len)
{
    struct msghdr *mh = &t->rxm[i].msg_hdr;
    size_t seg = len;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm))
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
            int v;
            memcpy(&v, CMSG_DATA(cm), sizeof(v));
            if (v > 0)
                seg = (size_t)v;
        }
    const uint8_t *b = t->rxbuf + (size_t)i * RX_BUF;
    for (size_t off = 0; off < len; off += seg)
        rx_packet(t, b + off, len - off < seg ? len - off : seg, &t->rxaddr[i], mh->msg_namelen);
}

/* Read what the socket has (a bounded number of batches). */
static void rx_drain(struct lite_transport *t)
{
    if (!t->gro) {
        /* Most polls find nothing: recvfrom costs about half of what recvmmsg does (no message
         * header and vector to copy in). A short datagram (a lone message, an acknowledgement)
         * goes up at once; a long one means a stream is flowing: read on in batches. */
        socklen_t alen = sizeof(t->rxaddr[0]);
        ssize_t n = recvfrom(t->fd, t->rxbuf, RX_BUF, MSG_DONTWAIT,
                             (struct sockaddr *)&t->rxaddr[0], &alen);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            rx_errqueue(t);
        } else {
            rx_packet(t, t->rxbuf, (size_t)n, &t->rxaddr[0], alen);
            if (n < 1200)
                return;
        }
    }
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < RX_BATCH; i++) {
            t->rxm[i].msg_hdr.msg_namelen = sizeof(t->rxaddr[i]);
            t->rxm[i].msg_hdr.msg_controllen = sizeof(t->rxctl[i]);
        }
        int n = recvmmsg(t->fd, t->rxm, RX_BATCH, MSG_DONTWAIT, NULL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            rx_errqueue(t); /* ECONNREFUSED etc.: an ICMP error is queued */
            continue;
        }
        for (int i = 0; i < n; i++)
            split_gro(t, i, t->rxm[i].msg_len);
        if (n < RX_BATCH)
            return;
    }
}

/* ---- timers, writing, reaping ---- */

/* Links that are down: past the budget they fail; the dialling rank redials (an attempt not
 * through in ATTEMPT_NS gives way to the next), the other probes that the peer still listens
 * (an empty datagram: a closed port answers with ICMP, rx_errqueue). */
static void link_tick(struct lite_transport *t, int64_t now)
{
    for (int r = 0; r < t->world; r++) {
        struct qlink *l = &t->links[r];
        if (l->state != LINK_DOWN || r == t->rank)
            continue;
        if (now - l->down_ns > (int64_t)t->reconnect_ms * 1000000) {
            char w[WHY_LEN + 160];
            lite_fmt(w, sizeof(w),
                     "no resume within reconnect_timeout_ms (%d): %u reconnection attempt(s) in "
                     "%lld ms; it broke: %s",
                     t->reconnect_ms, l->attempts, (long long)((now - l->down_ns) / 1000000),
                     l->down_why);
            link_fail(t, l, -LITE_ERR_PEER_LOST, w);
            continue;
        }
        if (l->c && !l->c->dead && now - l->c->born_ns > ATTEMPT_NS)
            link_down(t, l, "the attempt took too long");
        if (l->c || now < l->next_dial_ns)
            continue;
        l->attempts++;
        l->next_dial_ns = now + backoff_ns(t, l->attempts);
        if (r > t->rank) {
            char why[WHY_LEN];
            int rc = conn_dial(t, r, l->epoch + 1, why, sizeof(why));
            if (rc)
                link_fail(t, l, rc, why);
            else
                l->epoch++;
        } else {
            (void)!sendto(t->fd, "", 0, MSG_DONTWAIT, (struct sockaddr *)&t->peer_addr[r],
                          t->peer_addr_len[r]);
        }
    }
}

static int64_t timers(struct lite_transport *t)
{
    ngtcp2_tstamp now = now_ts(), next = UINT64_MAX;
    if (t->refused_quiet && (int64_t)now >= t->refuse_next_ns)
        refuse_flush(t, (int64_t)now);
    if (t->links_down) {
        link_tick(t, (int64_t)now);
        t->links_down = false;
        for (int r = 0; r < t->world; r++) {
            struct qlink *l = &t->links[r];
            if (l->state == LINK_DOWN) {
                t->links_down = true;
                if (!l->c && (ngtcp2_tstamp)l->next_dial_ns < next)
                    next = (ngtcp2_tstamp)l->next_dial_ns;
            }
        }
    }
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct qconn *c = t->slots[i];
        if (!c || c->dead || !c->conn)
            continue;
        if (c->server && c->peer < 0 && (int64_t)now - c->born_ns > HELLO_WAIT_NS) {
            conn_fail(c, -LITE_ERR_PROTOCOL, "it said no HELLO in time");
            continue;
        }
        /* Only calls into ngtcp2 move its timers: a poll that found nothing asks no one. */
        ngtcp2_tstamp e = c->expiry ? c->expiry : ngtcp2_conn_get_expiry(c->conn);
        if (e <= now) {
            t->in_ng++;
            int rv = ngtcp2_conn_handle_expiry(c->conn, now);
            t->in_ng--;
            if (rv == NGTCP2_ERR_IDLE_CLOSE) {
                char why[WHY_LEN];
                lite_fmt(why, sizeof(why), "no packet for %llu ms (QUIC idle timeout)",
                         (unsigned long long)(t->idle_ns / 1000000));
                conn_break(c, why);
                continue;
            }
            if (rv) {
                conn_read_error(c, rv);
                continue;
            }
            c->want_write = true;
            e = ngtcp2_conn_get_expiry(c->conn);
        }
        c->expiry = e;
        if (e < next)
            next = e;
        if (c->want_write && c->hold_until && (ngtcp2_tstamp)c->hold_until < next)
            next = (ngtcp2_tstamp)c->hold_until; /* a held acknowledgement is a timer too */
    }
    if (next == UINT64_MAX)
        return -1;
    return next > now ? (int64_t)(next - now) : 0;
}

/* Whether a connection writes now. Stream data goes at once, with the acknowledgement of what
 * came in riding along. A write owed only to packets read (an acknowledgement, a window update)
 * waits: at once for two packets or more (a bulk stream is acknowledged every other packet),
 * up to ACK_HOLD_NS for a lone one, the time a ping-pong's reply takes to be posted; an
 * ACK-only packet each way doubled the packets, syscalls and decryptions of a round trip. */
static bool write_due(struct qconn *c, int64_t now)
{
    if (!c->want_write)
        return conn_has_data(c) && c->tx_sid < 0;
    if (conn_has_data(c) || c->hold_until == 0 || c->rx_unacked >= 2)
        return true;
    return now >= c->hold_until || !ngtcp2_conn_get_handshake_completed(c->conn);
}

/* flush: write what is held too (the rank is about to sleep in poll). */
static void write_all(struct lite_transport *t, bool flush)
{
    int64_t now = flush ? INT64_MAX : 0;
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct qconn *c = t->slots[i];
        if (!c || c->dead || !c->conn)
            continue;
        if (c->hold_until && !now)
            now = lite_now_ns();
        if (write_due(c, now))
            conn_write(t, c);
    }
}

static void reap(struct lite_transport *t)
{
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct qconn *c = t->slots[i];
        if (c && c->dead)
            conn_free(c);
    }
}

static int pass(struct lite_transport *t, int timeout_ms)
{
    t->events = 0;
    rx_drain(t);
    int64_t next_ns = timers(t);
    write_all(t, false);
    if (t->events == 0 && timeout_ms > 0) {
        write_all(t, true); /* nothing comes to carry a held acknowledgement while asleep */
        next_ns = timers(t);
        int wait = timeout_ms;
        if (next_ns >= 0 && (next_ns + 999999) / 1000000 < wait)
            wait = (int)((next_ns + 999999) / 1000000); /* the timer's millisecond, not before */
        struct pollfd p = {.fd = t->fd, .events = POLLIN};
        if (wait > 0 && poll(&p, 1, wait) > 0 && (p.revents & POLLERR))
            rx_errqueue(t);
        rx_drain(t);
        timers(t);
        write_all(t, false);
    }
    if (!t->in_ng)
        reap(t);
    return t->events;
}

/* ---- parking (between connect_all and the core's first call) ---- */

static void *park_main(void *arg)
{
    struct lite_transport *t = arg;
    while (!__atomic_load_n(&t->park_stop, __ATOMIC_ACQUIRE))
        pass(t, 5);
    return NULL;
}

static void park(struct lite_transport *t)
{
    t->connecting = true; /* failures are recorded, reported at unpark */
    t->parked = true;
    t->park_stop = 0;
    if (pthread_create(&t->parker, NULL, park_main, t) != 0) {
        t->parked = false;
        t->connecting = false;
    }
}

/* The core is back: stop the thread, hand over what it held, report what failed meanwhile. */
static void unpark(struct lite_transport *t)
{
    if (!t->parked)
        return;
    __atomic_store_n(&t->park_stop, 1, __ATOMIC_RELEASE);
    pthread_join(t->parker, NULL);
    t->parked = false;
    t->connecting = false;
    for (int r = 0; r < t->world; r++) {
        struct qlink *l = &t->links[r];
        if (r == t->rank || !l->park_len || l->state == LINK_FAILED)
            continue;
        size_t n = l->park_len;
        l->park_len = 0;
        char why[WHY_LEN];
        t->in_ng++; /* like a callback: posts from the upcalls only queue */
        int rc = rx_bytes(l, l->park, n, why, sizeof(why));
        t->in_ng--;
        if (rc) {
            if (l->c)
                conn_close_error(l->c, rc == -EACCES ? APP_REFUSED : APP_PROTO, 0, "refused");
            t->connecting = true; /* reported with the others below */
            link_fail(t, l, rc, why);
            t->connecting = false;
        }
    }
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct qconn *c = t->slots[i];
        if (!c || c->dead || !c->park_unext || c->rx_sid < 0)
            continue;
        ngtcp2_conn_extend_max_stream_offset(c->conn, c->rx_sid, c->park_unext);
        ngtcp2_conn_extend_max_offset(c->conn, c->park_unext);
        c->park_unext = 0;
        c->want_write = true;
        c->expiry = 0;
    }
    for (int r = 0; r < t->world; r++) {
        const char *why = t->lost_why + (size_t)r * WHY_LEN;
        if (r != t->rank && why[0] && !t->failed[r] && !t->closing) {
            t->failed[r] = true;
            t->up->peer_failed(t->core, r, -LITE_ERR_PEER_LOST, why);
        }
    }
}

/* ---- the ops ---- */

static int quic_probe(const struct lite_tp_env *env, char *why, size_t why_len)
{
    lite_tp_env_attach(env);
    (void)why;
    (void)why_len;
    return 0;
}

static int bind_socket(struct lite_transport *t, const struct lite_tp_env *env, const char *host,
                       char *why, size_t why_len)
{
    long base = (long)lite_tp_num(env, "LITETX_QUIC_PORT_BASE", 0);
    uint16_t port = base ? (uint16_t)(base + t->rank) : 0;
    if (base && base + t->rank > 65535) {
        lite_fmt(why, why_len, "LITETX_QUIC_PORT_BASE=%ld + rank %d is past port 65535", base,
                 t->rank);
        return -LITE_ERR_CONFIG;
    }
    int rc = lite_sock_resolve(host, port, &t->addr, &t->addr_len, why, why_len);
    if (rc)
        return rc;
    t->family = t->addr.ss_family;
    t->fd = socket(t->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (t->fd < 0)
        return -errno;
    if (bind(t->fd, (struct sockaddr *)&t->addr, t->addr_len) != 0) {
        rc = -errno;
        lite_fmt(why, why_len, "quic: cannot bind UDP %s port %u: %s", host, port, strerror(errno));
        return rc;
    }
    t->addr_len = sizeof(t->addr);
    getsockname(t->fd, (struct sockaddr *)&t->addr, &t->addr_len);
    /* Room for a window's worth of 64 KiB datagrams (root may exceed rmem_max). */
    int big = 8 << 20;
    if (setsockopt(t->fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) != 0)
        setsockopt(t->fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    if (setsockopt(t->fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) != 0)
        setsockopt(t->fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    int one = 1;
    if (t->family == AF_INET6)
        setsockopt(t->fd, SOL_IPV6, IPV6_RECVERR, &one, sizeof(one));
    else
        setsockopt(t->fd, SOL_IP, IP_RECVERR, &one, sizeof(one));
    /* GSO and GRO where the kernel has them (LITETX_QUIC_GSO=0 turns both off). */
    long want = (long)lite_tp_num(env, "LITETX_QUIC_GSO", 1);
    int seg = 1200;
    t->gso = want && setsockopt(t->fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg)) == 0;
    if (t->gso) {
        seg = 0;
        setsockopt(t->fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg));
    }
    t->gro = want && setsockopt(t->fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
    return 0;
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return false;
}

static void quic_close(struct lite_transport *t);

/* lite_config_t.reconnect_timeout_ms, and LITETX_TEST_BREAK_AT=N[d][,N[d]...] (for tests: break
 * a connection when this rank has taken N link bytes from its peers in all; with d it is dropped
 * silently, as a path that went dead, else closed). */
static int parse_link_env(struct lite_transport *t, const struct lite_transport_params *p)
{
    t->reconnect_ms = RECONNECT_DEFAULT;
    if (p->size > offsetof(struct lite_transport_params, reconnect_timeout_ms) &&
        p->reconnect_timeout_ms >= 0)
        t->reconnect_ms = p->reconnect_timeout_ms;
    uint64_t seed;
    rand_bytes((uint8_t *)&seed, sizeof(seed));
    t->rng = (unsigned)(seed ^ (seed >> 32));
    const char *v = lite_tp_str(p->env, "LITETX_TEST_BREAK_AT");
    if (!v || !*v)
        return 0;
    for (const char *q = v; *q; q++)
        t->nbreak += *q == ',';
    t->nbreak++;
    t->break_at = calloc((size_t)t->nbreak, sizeof(*t->break_at));
    t->break_drop = calloc((size_t)t->nbreak, 1);
    if (!t->break_at || !t->break_drop)
        return -ENOMEM;
    const char *q = v;
    for (int i = 0; i < t->nbreak; i++) {
        char *end;
        unsigned long long n = strtoull(q, &end, 10);
        if (end != q && *end == 'd') {
            t->break_drop[i] = 1;
            end++;
        }
        if (end == q || (*end && *end != ',') || (i && n <= t->break_at[i - 1])) {
            LITE_ERROR("LITETX_TEST_BREAK_AT=\"%s\": must be ascending byte counts (each may end "
                       "in d: drop), comma separated",
                       v);
            return -LITE_ERR_CONFIG;
        }
        t->break_at[i] = n;
        q = *end ? end + 1 : end;
    }
    LITE_WARN("quic rank %d: LITETX_TEST_BREAK_AT is set: connections are broken on purpose",
              t->rank);
    return 0;
}

static int quic_open(const struct lite_transport_params *p, struct lite_transport **out)
{
    lite_tp_env_attach(p->env);
    struct lite_transport *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->fd = -1;
    t->rank = p->rank;
    t->world = p->world_size;
    t->core = p->core;
    t->up = p->up;
    t->sec = p->size >= offsetof(struct lite_transport_params, security) + sizeof(p->security)
                 ? p->security
                 : NULL;
    size_t w = (size_t)t->world;
    t->by_rank = calloc(w, sizeof(*t->by_rank));
    t->links = calloc(w, sizeof(*t->links));
    t->failed = calloc(w, sizeof(*t->failed));
    t->peer_nonce = calloc(w, sizeof(*t->peer_nonce));
    t->peer_addr = calloc(w, sizeof(*t->peer_addr));
    t->peer_addr_len = calloc(w, sizeof(*t->peer_addr_len));
    t->lost_why = calloc(w, WHY_LEN);
    t->txbuf = malloc(TX_BUF);
    t->rxbuf = malloc((size_t)RX_BATCH * RX_BUF);
    if (!t->by_rank || !t->links || !t->failed || !t->peer_nonce || !t->peer_addr ||
        !t->peer_addr_len || !t->lost_why || !t->txbuf || !t->rxbuf) {
        quic_close(t);
        return -ENOMEM;
    }
    for (int i = 0; i < RX_BATCH; i++) {
        t->rxiov[i] = (struct iovec){.iov_base = t->rxbuf + (size_t)i * RX_BUF, .iov_len = RX_BUF};
        t->rxm[i].msg_hdr = (struct msghdr){.msg_name = &t->rxaddr[i],
                                            .msg_iov = &t->rxiov[i],
                                            .msg_iovlen = 1,
                                            .msg_control = t->rxctl[i]};
    }
    for (int r = 0; r < t->world; r++) {
        t->links[r].t = t;
        t->links[r].peer = r;
        t->links[r].rx.hello_rx = true; /* the HELLO is the connection's, not the link's */
    }
    char why[256] = "";
    int rc = parse_link_env(t, p);
    if (rc) {
        quic_close(t);
        return rc;
    }
    rc = bind_socket(t, p->env, p->bind_host, why, sizeof(why));
    if (!rc)
        rc = quic_tls_open(t->sec, t->rank, &t->tls, why, sizeof(why));
    if (rc) {
        LITE_ERROR("quic rank %d: %s", t->rank, why[0] ? why : lite_strerror(rc));
        quic_close(t);
        return rc;
    }
    /* Largest datagram: the whole 64 KiB on loopback, an Ethernet frame's otherwise. */
    long dflt = is_loopback(&t->addr) ? (t->family == AF_INET6 ? 65527 : 65507)
                                      : (t->family == AF_INET6 ? 1432 : 1452);
    t->max_payload = (size_t)lite_tp_num(p->env, "LITETX_QUIC_UDP_PAYLOAD", dflt);
    if (t->gro && t->max_payload >= 32768) {
        /* Full-size packets leave one per datagram: GRO has nothing to join, and without it a
         * poll reads with recvfrom (rx_drain), the cheaper call. */
        int zero = 0;
        if (setsockopt(t->fd, SOL_UDP, UDP_GRO, &zero, sizeof(zero)) == 0)
            t->gro = false;
    }
    t->idle_ns = (uint64_t)lite_tp_num(p->env, "LITETX_QUIC_IDLE_MS", 30000) * NGTCP2_MILLISECONDS;
    /* LITETX_QUIC_CC: the index of its word in the table's "cubic|reno|bbr|bbr2" */
    static const ngtcp2_cc_algo ccs[] = {NGTCP2_CC_ALGO_CUBIC, NGTCP2_CC_ALGO_RENO,
                                         NGTCP2_CC_ALGO_BBR, NGTCP2_CC_ALGO_BBR2};
    int64_t cc = lite_tp_num(p->env, "LITETX_QUIC_CC", 0);
    t->cc = ccs[cc >= 0 && cc < 4 ? cc : 0];
    t->win_stream = (uint64_t)lite_tp_num(p->env, "LITETX_QUIC_WINDOW", 4L << 20);
    t->win_conn = t->win_stream + t->win_stream / 2;
    rand_bytes((uint8_t *)&t->nonce, sizeof(t->nonce));
    /* Test and deployment knob: publish A + rank instead of the bound address (a relay there
     * forwards to this rank's port). */
    t->adv = t->addr;
    long adv = (long)lite_tp_num(p->env, "LITETX_QUIC_ADVERTISE_BASE", 0);
    if (adv) {
        if (adv + t->rank > 65535) {
            LITE_ERROR("quic rank %d: LITETX_QUIC_ADVERTISE_BASE=%ld + rank is past port 65535",
                       t->rank, adv);
            quic_close(t);
            return -LITE_ERR_CONFIG;
        }
        struct sockaddr_in *a4 = (struct sockaddr_in *)&t->adv;
        memset(&t->adv, 0, sizeof(t->adv));
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)(adv + t->rank));
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    char host[64];
    uint16_t port;
    lite_sock_name(&t->addr, host, sizeof(host), &port);
    LITE_INFO("quic rank %d: UDP %s port %u, datagrams up to %zu bytes, GSO %s, GRO %s, "
              "idle timeout %llu ms",
              t->rank, host, port, t->max_payload, t->gso ? "on" : "off", t->gro ? "on" : "off",
              (unsigned long long)(t->idle_ns / 1000000));
    *out = t;
    return 0;
}

static void quic_close(struct lite_transport *t)
{
    if (!t)
        return;
    t->closing = true; /* no upcalls from here on */
    unpark(t);
    /* Linger until what this rank sent was acknowledged (the last barrier message, say), then
     * say BYE: the peers report -ESHUTDOWN, not a loss. */
    int64_t until = lite_now_ns() + (int64_t)LINGER_MS * 1000000;
    while (t->fd >= 0 && lite_now_ns() < until) {
        bool waiting = false;
        for (int r = 0; t->links && r < t->world; r++) {
            struct qlink *l = &t->links[r];
            /* a link that is down counts too: it may resume within the linger */
            if ((l->state == LINK_UP || l->state == LINK_DOWN) && l->tx_acked < l->tx_end)
                waiting = true;
        }
        if (!waiting)
            break;
        pass(t, 5);
    }
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct qconn *c = t->slots[i];
        if (c && !c->dead && c->conn)
            conn_close_error(c, APP_BYE, 0, "bye");
    }
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct qconn *c = t->slots[i];
        if (c && c->conn && c->peer >= 0) {
            ngtcp2_conn_stat cs;
            ngtcp2_conn_get_conn_stat(c->conn, &cs);
            LITE_DEBUG("quic rank %d: rank %d: srtt %.3f ms, cwnd %llu, ssthresh %llu (below "
                       "the maximum: a loss was seen), %llu bytes acknowledged",
                       t->rank, c->peer, cs.smoothed_rtt / 1e6, (unsigned long long)cs.cwnd,
                       (unsigned long long)cs.ssthresh, (unsigned long long)c->acked_end);
        }
        if (c)
            conn_free(c);
    }
    for (int r = 0; t->links && r < t->world; r++) {
        struct qlink *l = &t->links[r];
        link_release(t, l, UINT64_MAX, -LITE_ERR_PEER_LOST);
        quic_rx_free(&l->rx);
        free(l->park);
    }
    refuse_flush(t, lite_now_ns());
    if (t->refused)
        LITE_INFO("quic rank %d: refused %llu connection(s) in all", t->rank,
                  (unsigned long long)t->refused);
    if (t->dropped)
        LITE_INFO("quic rank %d: %llu datagrams matched no connection and were dropped", t->rank,
                  (unsigned long long)t->dropped);
    if (t->fd >= 0)
        close(t->fd);
    quic_tls_close(t->tls);
    free(t->slots);
    free(t->links);
    free(t->break_at);
    free(t->break_drop);
    free(t->by_rank);
    free(t->failed);
    free(t->peer_nonce);
    free(t->peer_addr);
    free(t->peer_addr_len);
    free(t->lost_why);
    free(t->txbuf);
    free(t->rxbuf);
    free(t);
}

static int quic_addr_get(struct lite_transport *t, void *blob, size_t *len)
{
    if (*len < BLOB_LEN)
        return -ENOSPC;
    uint8_t *b = blob;
    lite_sock_pack(&t->adv, &b[0], b + 1);
    lite_put64(b + 1 + LITE_SOCK_PACKED, t->nonce);
    *len = BLOB_LEN;
    return 0;
}

static int quic_connect_all(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                            int64_t deadline_ns, char *why, size_t why_len)
{
    for (int r = 0; r < t->world; r++) {
        if (r == t->rank)
            continue;
        const uint8_t *b = blobs[r];
        if (lens[r] != BLOB_LEN ||
            lite_sock_unpack(b[0], b + 1, &t->peer_addr[r], &t->peer_addr_len[r]) != 0) {
            lite_fmt(why, why_len, "quic: rank %d published no QUIC address", r);
            return -LITE_ERR_PROTOCOL;
        }
        t->peer_nonce[r] = lite_get64(b + 1 + LITE_SOCK_PACKED);
    }
    t->connecting = true;
    int rc = 0;
    for (int r = t->rank + 1; r < t->world && !rc; r++)
        rc = conn_dial(t, r, 0, why, why_len);
    while (!rc) {
        int missing = 0, failed = -1;
        for (int r = 0; r < t->world; r++) {
            if (r == t->rank)
                continue;
            if (t->lost_why[(size_t)r * WHY_LEN])
                failed = r;
            struct qconn *c = t->by_rank[r];
            struct qlink *l = &t->links[r];
            /* Up: its preamble is in and ours acknowledged (the core's bootstrap barrier
             * follows, during which nobody makes progress to send ours again). */
            if (!c || !c->ready || c->dead || c->acked_end < PRE_LEN || l->tx_acked < l->tx_end)
                missing++;
        }
        if (failed >= 0) {
            lite_fmt(why, why_len, "quic: rank %d: %s", failed,
                     t->lost_why + (size_t)failed * WHY_LEN);
            rc = -LITE_ERR_PEER_LOST;
            break;
        }
        if (!missing)
            break;
        if (lite_now_ns() > deadline_ns) {
            size_t used = (size_t)snprintf(why, why_len, "quic: no connection with rank");
            for (int r = 0; r < t->world && used < why_len; r++) {
                struct qconn *c = t->by_rank[r];
                if (r != t->rank && (!c || !c->ready))
                    used += (size_t)snprintf(why + used, why_len - used, " %d", r);
            }
            rc = -ETIMEDOUT;
            break;
        }
        pass(t, 10);
    }
    t->connecting = false;
    if (!rc)
        park(t); /* the bootstrap barrier follows, during which the core makes no progress */
    return rc;
}

static int post(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                const void *payload, void *op, bool inject)
{
    if (peer < 0 || peer >= t->world || peer == t->rank)
        return -EINVAL;
    unpark(t);
    struct qlink *l = &t->links[peer];
    if (t->failed[peer] || l->state == LINK_FAILED)
        return -LITE_ERR_PEER_LOST;
    if (l->state == LINK_INIT)
        return -EINVAL;
    struct lite_wire_hdr h = {.type = LITE_WIRE_MSG,
                              .channel = hdr->channel,
                              .flags = hdr->flags,
                              .credits = hdr->credits,
                              .tag = hdr->tag,
                              .len = hdr->len};
    bool copy = inject || hdr->len <= COPY_MAX;
    int rc = queue_frame(t, l, &h, payload, hdr->len, op, copy);
    if (rc)
        return rc;
    if (copy && !inject)
        t->up->send_done(t->core, op, 0);
    /* (a link that is down keeps it for the next connection) */
    if (!t->in_ng && l->c && l->c->tx_go)
        conn_write(t, l->c);
    return 0;
}

static int quic_msg_send(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                         const void *payload, void *op)
{
    return post(t, peer, hdr, payload, op, false);
}

static int quic_msg_inject(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                           const void *payload)
{
    if (hdr->len > SMALL_MAX)
        return -EAGAIN;
    return post(t, peer, hdr, payload, NULL, true);
}

static int quic_progress(struct lite_transport *t, int timeout_ms)
{
    unpark(t);
    return pass(t, timeout_ms);
}

static int quic_peer_stats(struct lite_transport *t, int peer, uint64_t *breaks, uint64_t *resumes)
{
    if (peer < 0 || peer >= t->world)
        return -EINVAL;
    *breaks = t->links[peer].breaks;
    *resumes = t->links[peer].resumes;
    return 0;
}

#define B LITE_TUN_BACKEND
static const struct lite_tunable quic_tunables[] = {
    {"LITETX_QUIC_PORT_BASE", "any free port", "rank r binds UDP port base + r; 0: any",
     LITE_TUN_INT, B, 0, 65535, NULL},
    {"LITETX_QUIC_ADVERTISE_BASE", "the bound address",
     "publish 127.0.0.1:(base + r) instead (a relay there forwards; tests); 0: off", LITE_TUN_INT,
     B, 0, 65535, NULL},
    {"LITETX_QUIC_GSO", "1", "0: no UDP GSO/GRO even where the kernel has them", LITE_TUN_BOOL, B,
     0, 1, NULL},
    {"LITETX_QUIC_IDLE_MS", "30000",
     "a peer silent this long is lost; also the longest gap between progress calls", LITE_TUN_SIZE,
     B, 1000, 3600000, NULL},
    {"LITETX_QUIC_UDP_PAYLOAD", "65507 on loopback, 1452 otherwise",
     "largest UDP payload sent (bytes)", LITE_TUN_SIZE, B, 1200, 65527, NULL},
    /* the order of the words is quic_open's ccs[] */
    {"LITETX_QUIC_CC", "cubic", "congestion control", LITE_TUN_ENUM, B, 0, 0,
     "cubic|reno|bbr|bbr2"},
    {"LITETX_QUIC_WINDOW", "4194304", "flow-control window of a stream (bytes)", LITE_TUN_SIZE, B,
     65536, 1 << 30, NULL},
    {"LITETX_TEST_BREAK_AT", "none",
     "for tests: break a connection when this rank has received N bytes (N[,N...]; Nd: drop it "
     "silently)",
     LITE_TUN_STRING, B, 0, 0, NULL},
    {NULL, NULL, NULL, 0, 0, 0, 0, NULL},
};
#undef B

const struct lite_transport_ops lite_quic_ops = {
    .size = sizeof(struct lite_transport_ops),
    .abi_version = LITE_TRANSPORT_ABI_VERSION,
    .name = "quic",
    .caps = LITE_CAP_ENCRYPTED,
    .probe = quic_probe,
    .open = quic_open,
    .close = quic_close,
    .addr_get = quic_addr_get,
    .connect_all = quic_connect_all,
    .msg_send = quic_msg_send,
    .progress = quic_progress,
    .msg_inject = quic_msg_inject,
    .tunables = quic_tunables,
    .peer_stats = quic_peer_stats,
};
