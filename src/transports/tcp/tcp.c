/*
 * tcp.c - the TCP transport: non-blocking sockets driven by epoll from inside progress(),
 * length-prefixed frames (src/core/wire.c), TCP_NODELAY, vectored sends that gather queued
 * messages, and receives that land straight in the caller's buffer for large payloads.
 *
 * Three connections per pair of ranks. The main one carries messages, control frames and small
 * one-sided payloads both ways. Large one-sided payloads (writes and read responses of at least
 * LITETX_TCP_BULK_MIN bytes, default 256 KiB) go on a bulk connection per direction, which carries
 * data one way only. Why: when both ranks stream megabytes at each other on one connection, each
 * socket is locked by its own sender while the other's data and acknowledgements pile up in its
 * backlog, and a 1 MiB exchange over loopback takes twice as long as on two one-way connections
 * (measured: docs/PERFORMANCE.md). Small frames stay on the main connection because a one-way
 * connection costs a pure ACK per message (8-byte ping-pong 11 -> 15 us).
 *
 * Order: a rank's frames to a peer are handled in the order they were sent, across both of its
 * streams. When the sender switches stream it first sends a FENCE on the new one naming how many
 * frames the other stream has carried; the receiver stops reading that connection until it has
 * handled that many from the other. A fence names only earlier frames, so no two wait on each
 * other. (A message after a write is thus handled after the write's data is in place, which the
 * core's rendezvous relies on: LITE_CAP_ORDERED_WRITE_MSG.)
 *
 * Connections are made deterministically: rank i opens the main connection to every rank j < i
 * and a bulk connection to every j != i; the first frame on each is a HELLO naming the connecting
 * rank (flagged BULK on bulk connections). The listening socket stays open after init so that
 * stray or hostile connections are read, refused and logged rather than left to time out in the
 * kernel's backlog.
 *
 * Security (lite_config_t.security ca or psk, docs/TCP.md "Security"): every connection is
 * TLS 1.3 (tcp_tls.c), handshakes driven by the same epoll loop, the HELLO inside the channel.
 * In ca mode the rank a certificate names must be the rank its holder claims: the dialling side
 * checks the server's certificate against the rank it dialled, the accepting side the client's
 * against its HELLO. Bytes enter and leave through SSL_read / SSL_write at the two places the
 * plaintext path calls recv / sendmsg: large payloads are decrypted straight into their
 * destination, small frames are gathered into one record.
 *
 * LITETX_TCP_PORT=<base> makes rank r listen on port base + r (for firewalls); default: any port.
 * LITETX_TCP_BULK_MIN=<bytes>: the bulk threshold; 0 keeps everything on the main connection
 * (the default on a crowded host, see parse_bulk_env).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tp_support.h"
#ifdef LITE_HAVE_TLS
#include "tcp_tls.h"
#else /* never called: no session is ever made without TLS */
struct tcp_tls;
static inline void tcp_tls_free(void *ssl) {}
static inline ssize_t tcp_tls_read(void *ssl, void *b, size_t n, bool *w)
{
    return -1;
}
static inline ssize_t tcp_tls_writev(void *ssl, const struct iovec *v, int n, bool *r)
{
    return -1;
}
static inline bool tcp_tls_pending(void *ssl)
{
    return false;
}
static inline void tcp_tls_close_notify(void *ssl) {}
static inline bool tcp_tls_truncated(void *ssl)
{
    return false;
}
static inline int tcp_tls_peer_rank(void *ssl)
{
    return -1;
}
static inline const char *tcp_tls_error(void)
{
    return "";
}
#endif

#define STAGE_SIZE        (256 * 1024)
#define BULK_STAGE        4096 /* bulk connections stage headers only: their payloads are large */
#define BULK_MIN          (256 * 1024)
#define BULK_IDLE_POLLS   64 /* a quiet bulk connection is left to epoll after this many polls */
#define MAX_RESUME_ROUNDS 16
#define DIRECT_MIN        (32 * 1024) /* a payload remainder this large is read straight into place */
#define MAX_IOV           64
#define MAX_PAYLOAD       (1ull << 40)
#define CLOSE_DRAIN_MS    2000
#define MAX_STRANGERS     16   /* unidentified connections held beyond what the peers need */
#define HELLO_WAIT_MS     2000 /* a full table drops one that said nothing for this long */
/* Reconnection (docs/TCP.md "Reconnection"). */
#define COPY_MAX          4096 /* a message or answer this small completes when written (copied) */
#define ACK_EVERY         32   /* frames applied between cumulative acknowledgements */
#define BACKOFF_MIN_MS    5
#define BACKOFF_MAX_MS    500
#define RECONNECT_DEFAULT 10000
#define KEEPALIVE_S       1 /* TCP keepalive: idle and interval, seconds */
#define KEEPALIVE_CNT     3
/* TLS: a payload remainder this large is read into place (records are opened into the session's
 * record buffer and copied from there once their tag checked out; staging would copy twice). */
#define TLS_DIRECT_MIN 4096

/* What happens when a frame has been written out completely. */
enum tx_done {
    TX_DONE_NONE = 0,   /* internal frame, or an op that completes on the peer's answer */
    TX_DONE_OP = 1,     /* a message: send_done(op, 0) */
    TX_DONE_TARGET = 2, /* a read response: release the target region (rma_target_done) */
};

struct tx_op {
    struct tx_op *next;
    uint8_t hdr[LITE_WIRE_HDR_LEN];
    const uint8_t *payload;
    size_t len;  /* payload bytes */
    size_t done; /* bytes of hdr + payload written so far */
    uint8_t on_done;
    uint8_t stream; /* reconnection: the stream (0 main, 1 bulk) a sequenced frame belongs to */
    void *op;       /* the core's op or target token, per on_done */
    /* Reconnection (see "links" below): the frame's sequence number on its stream (a FENCE
     * takes the number of the frame it precedes); 0: not replayed (HELLO, ACK). */
    uint64_t seq;
    uint8_t *copy;                  /* the payload copied at completion (COPY_MAX), or NULL */
    uint8_t inl[LITE_WIRE_HDR_LEN]; /* small copies live here */
};

enum rx_state { RX_HDR = 0, RX_PAYLOAD = 1 };

/* What the payload being received is, and what to do when it is in place. */
enum rx_kind { RX_MSG = 0, RX_WRITE = 1, RX_READ_RESP = 2 };

/* A one-sided op this rank started and the peer has not answered yet. The id on the wire is
 * (generation << 32 | index) so a stale or forged answer is recognised and refused. */
struct rma_slot {
    void *op;
    uint8_t *dst; /* read: where the data goes */
    uint64_t len;
    uint32_t gen;
    uint8_t kind;  /* LITE_RMA_WRITE / LITE_RMA_READ; 0 = free */
    bool answered; /* read: its response is arriving; a second one is a protocol error */
};

/* A connection's part in the pair's traffic (see the top of the file). */
enum conn_role {
    ROLE_MAIN = 0,     /* both ways; in lazy mode: the one this rank dialled */
    ROLE_BULK_OUT = 1, /* large one-sided payloads from this rank */
    ROLE_BULK_IN = 2,  /* large one-sided payloads from the peer */
    ROLE_MAIN_IN = 3,  /* lazy mode: the main connection the peer dialled */
    ROLE_COUNT = 4
};

struct conn {
    int fd;
    int peer; /* -1 while a new connection has not said HELLO */
    uint8_t role;
    bool dead;
    bool eof;
    bool bye; /* the peer announced an orderly close */
    bool out_armed;
    bool in_rx; /* inside conn_rx: answers wait in txq and leave together at its end */
    bool held;  /* frames wait in txq for the end of a batch (LITE_RMA_F_MORE) */
    int broken; /* a send outside progress broke a link that may resume: the break is
                 * handled at the next progress (drain_link reads, which no post may do) */
    char broken_why[96];
    int broken_errno;
    struct tx_op *txq, *txq_tail;
    uint8_t *stage;
    size_t stage_size;
    size_t lo, hi;
    uint64_t delivered;  /* frames received and handled in full (HELLO and FENCE not counted) */
    uint64_t fence_at;   /* while paused: the partner's `delivered` this connection waits for */
    bool paused;         /* a FENCE waits for the partner connection: nothing is read or parsed */
    bool resume;         /* the wait ended: parse what is staged on the next progress */
    unsigned idle;       /* bulk in: polls since data last came */
    int64_t accepted_ns; /* when an unidentified connection was accepted */
    uint8_t rx_state;
    bool last_large; /* the last payload was large: read only the next header */
    uint8_t rx_kind;
    uint8_t *dst; /* NULL while discarding */
    uint64_t remaining;
    void *token;
    /* the frame being received (RX_WRITE / RX_READ_RESP) */
    uint64_t rx_id;
    uint32_t rx_imm;
    bool rx_has_imm;
    bool rx_noack;    /* the initiator wants no RMA_ACK for this write */
    bool rx_sticky;   /* ... and a refusal goes with the next RMA_ACK */
    int sticky_error; /* such a refusal, not yet reported */
    int rx_status;
    /* one-sided ops in flight from this rank to the peer */
    struct rma_slot *slots;
    uint32_t nslots, *free_slots, nfree;
    char desc[64];
    /* Reconnection: a payload was being placed when the connection broke; its frame comes
     * again first and is placed from its start at the same place (same token, no new match). */
    bool part;
    uint8_t *rx_dst0;
    uint64_t rx_len;
    bool probe;  /* a connection this rank opened only to see whether the peer still listens */
    void *ssl;   /* the TLS session when security is on (moves with the socket in adopt) */
    bool tls_ok; /* its handshake is done and the peer's rank checked */
};

/* Per peer, per outgoing stream (0 main, 1 bulk): frames sent (FENCE not counted), and the
 * other stream's count named by the last FENCE sent on this one. */
struct route {
    uint64_t sent[2], fenced[2];
    /* The link (reconnection, docs/TCP.md "Reconnection"). The sequence number of a frame is
     * its position in its stream (sent[s] after it was counted), across epochs; the peer's
     * cumulative acknowledgement names how many it has applied. rtx[s]: frames of stream s
     * not yet acknowledged, in order (written ones, then, while the link is down, the ones
     * queued since). */
    struct tx_op *rtx[2], *rtx_tail[2];
    uint64_t acked[2];    /* the peer applied this many of our frames on stream s */
    uint64_t ack_sent[2]; /* the applied counts of the peer's streams we last told it */
    uint64_t peer_inc;    /* the peer's incarnation, from its address */
    uint8_t state;        /* LINK_* */
    bool ack_due;         /* a frame the peer waits on was applied: acknowledge at once */
    bool draining;        /* conn_lost is reading the link's other connections (drain_link) */
    uint32_t epoch;       /* connections of the link so far */
    uint32_t attempts;    /* redials since the break */
    uint64_t resumes, breaks;
    int64_t down_ns, next_dial_ns, last_rx_ns, last_tx_ns;
    char down_why[128];
};

enum link_state {
    LINK_UP = 0,     /* frames flow (or the link is not resumable) */
    LINK_DOWN = 1,   /* broken: the dialler redials; frames wait in rtx */
    LINK_RESUME = 2, /* a new main connection: waiting for the peer's resume statement */
};

struct lite_transport {
    int rank, world;
    struct lite_core *core;
    const struct lite_core_upcalls *up;
    int epfd;
    int listen_fd;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    struct sockaddr_storage adv; /* published address: addr, or LITETX_TCP_ADVERTISE_BASE's */
    struct conn *conns;          /* ROLE_COUNT x world: by role, then by peer rank (see conn_of) */
    int nconns;
    struct route *routes; /* by peer */
    uint64_t bulk_min;    /* one-sided payloads this large go on the bulk connection; 0: never */
    /* Accepted connections that have not said HELLO yet. Room for every connection the peers
     * make to this rank at once (a main one from each higher rank, a bulk one from each rank
     * that has a bulk stream) plus MAX_STRANGERS, so that the job's own ranks can never crowd
     * each other out, whatever the world size, and strangers are still bounded. */
    struct conn **pending;
    int npending; /* slots in pending */
    /* Lazy mode (LITETX_TCP_CONNECT): a pair is connected by the first frame between them.
     * peer_addr/peer_len: every rank's listening address, from connect_all. */
    bool lazy;
    struct sockaddr_storage *peer_addr;
    socklen_t *peer_len;
    int dialled; /* connections this rank opened (main and bulk), for the log */
    bool closing;
    bool resumed; /* some connection's fence wait ended (conn.resume) */
    struct tx_op *free_ops;
    unsigned polls;
    uint64_t rx_reads;   /* recv calls that returned data, all connections */
    bool rx_recent;      /* the last poll found data: poll each socket directly (tcp_progress) */
    bool held;           /* some connection has held frames */
    bool in_progress;    /* inside tcp_progress / tcp_close: a link may break now */
    bool broken;         /* some connection's break waits for progress (conn.broken) */
    struct tcp_tls *tls; /* security on: every connection is TLS */
    int sec_mode;
    char refused_why[160]; /* the last connection refused for its credentials, for init's message */
    int auth_err;          /* a peer this rank dialled failed authentication ... */
    char auth_why[160];    /* ... and why */
    char fail_why[160];    /* the last connection failure, for init's message */
    /* Reconnection */
    int reconnect_ms;     /* 0: a break is final */
    uint64_t incarnation; /* random per context: a restarted process has another */
    bool links_down;      /* some link is down or resuming */
    bool links_ready;     /* init connected every pair: breaks from now on are resumed */
    unsigned rng;
    int64_t next_check_ns;
    uint64_t rx_total;  /* test hook: bytes received on peers' connections */
    uint64_t *break_at; /* LITETX_TEST_BREAK_AT: byte counts at which to break, ascending */
    int nbreak, next_break;
};

static struct conn *conn_of(struct lite_transport *t, int role, int peer)
{
    return &t->conns[role * t->world + peer];
}

static bool is_main(const struct conn *c)
{
    return c->role == ROLE_MAIN || c->role == ROLE_MAIN_IN;
}

/* Frames handled from the peer's other stream, which a FENCE on c counts: for a main
 * connection its bulk stream; for the bulk stream its main one. In lazy mode the peer's main
 * stream is one of two connections (the one it dialled, or ours if it never dialled) and it never
 * uses the other, so the two are summed. */
static uint64_t partner_delivered(struct lite_transport *t, const struct conn *c)
{
    if (is_main(c))
        return conn_of(t, ROLE_BULK_IN, c->peer)->delivered;
    return conn_of(t, ROLE_MAIN, c->peer)->delivered + conn_of(t, ROLE_MAIN_IN, c->peer)->delivered;
}

/* epoll data: conns by pointer, the listener by this marker. */
static char listener_marker;

static struct tx_op *op_get(struct lite_transport *t)
{
    struct tx_op *o = t->free_ops;
    if (o) {
        t->free_ops = o->next;
        return o;
    }
    return malloc(sizeof(*o));
}

static void op_put(struct lite_transport *t, struct tx_op *o)
{
    if (o->copy && o->copy != o->inl)
        free(o->copy);
    o->copy = NULL;
    o->seq = 0;
    o->next = t->free_ops;
    t->free_ops = o;
}

static void conn_drop_tls(struct conn *c)
{
    if (c->ssl) {
        tcp_tls_free(c->ssl);
        c->ssl = NULL;
    }
    c->tls_ok = false;
}

static int tcp_probe(const struct lite_tp_env *env, char *why, size_t why_len)
{
    lite_tp_env_attach(env);
    return 0; /* TCP works wherever there are sockets */
}

static void ep_set(struct lite_transport *t, struct conn *c, bool want_out)
{
    /* a paused connection is not read: without EPOLLIN its unread data cannot spin epoll_wait */
    struct epoll_event ev = {.events = (c->paused ? 0 : EPOLLIN) | (want_out ? EPOLLOUT : 0),
                             .data.ptr = c};
    epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->out_armed = want_out;
}

/* A frame left (status 0) or will never leave (status < 0). */
static void tx_complete(struct lite_transport *t, struct tx_op *o, int status)
{
    if (o->on_done == TX_DONE_OP)
        t->up->send_done(t->core, o->op, status);
    else if (o->on_done == TX_DONE_TARGET)
        t->up->rma_target_done(t->core, o->op);
    op_put(t, o);
}

/* Frames that will never leave: each ends with `code`. */
static void drop_txq(struct lite_transport *t, struct conn *c, int code)
{
    while (c->txq) {
        struct tx_op *o = c->txq;
        c->txq = o->next;
        tx_complete(t, o, code);
    }
    c->txq_tail = NULL;
}

static void link_drop(struct lite_transport *t, int peer, int code);
static void link_written(struct lite_transport *t, struct conn *c, struct tx_op *o);
static void conn_lost(struct lite_transport *t, struct conn *c, int code, const char *why, int err);
static bool link_resumable(struct lite_transport *t, const struct conn *c);

/* The connection is unusable: fail its queued sends and tell the core once. */
static void conn_fail(struct lite_transport *t, struct conn *c, int code, const char *why)
{
    if (c->dead)
        return;
    c->dead = true;
    if (c->fd >= 0) {
        epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    conn_drop_tls(c);
    if (why && why != t->fail_why)
        lite_fmt(t->fail_why, sizeof(t->fail_why), "%s", why);
    drop_txq(t, c, code);
    for (uint32_t i = 0; i < c->nslots; i++) {
        if (c->slots[i].kind) {
            c->slots[i].kind = 0;
            t->up->send_done(t->core, c->slots[i].op, code);
        }
    }
    /* A payload being placed into a region keeps it registered: release it. */
    if ((c->rx_state == RX_PAYLOAD || c->part) && c->rx_kind == RX_WRITE && c->token)
        t->up->rma_target_done(t->core, c->token);
    c->token = NULL;
    c->part = false;
    c->rx_state = RX_HDR;
    /* Frames kept for a replay end too (their ops, exactly once). */
    if (c->peer >= 0 && c >= t->conns && c < t->conns + t->nconns)
        link_drop(t, c->peer, code);
    c->paused = false;
    if (c->peer >= 0 && !t->closing)
        t->up->peer_failed(t->core, c->peer, code, why);
    /* The pair's other connections go too: their queued frames fail now, and no fence waits
     * on a stream that will deliver nothing more. */
    if (c->peer >= 0 && c >= t->conns && c < t->conns + t->nconns)
        for (int r = 0; r < ROLE_COUNT; r++)
            conn_fail(t, conn_of(t, r, c->peer), code, why);
}

/* `left` bytes of the queue's head left: complete the frames they finish. */
static inline void tx_advance(struct lite_transport *t, struct conn *c, size_t left)
{
    while (c->txq && left > 0) {
        struct tx_op *o = c->txq;
        size_t total = LITE_WIRE_HDR_LEN + o->len, need = total - o->done;
        if (left < need) {
            o->done += left;
            break;
        }
        left -= need;
        c->txq = o->next;
        if (!c->txq)
            c->txq_tail = NULL;
        if (o->seq)
            link_written(t, c, o); /* kept until the peer says it applied it */
        else
            tx_complete(t, o, 0);
    }
}

/* A send (or handshake) failed. A failure is handled at once, inside a post too: the op being
 * posted is queued by then and ends with the rest, and the core defers its own handling of
 * peer_failed (transport.h, FAILURES). A break that may resume is no failure: outside progress
 * it waits for the next one, since resuming first reads what the pair's other connections hold
 * (drain_link), and a post must not deliver messages. */
static void fail_soon(struct lite_transport *t, struct conn *c, int code, const char *why)
{
    int err = errno;
    if (!t->in_progress && code == -LITE_ERR_PEER_LOST && link_resumable(t, c) &&
        !(err == ECONNREFUSED && t->routes[c->peer].state != LINK_UP)) {
        c->broken = code;
        c->broken_errno = err;
        lite_fmt(c->broken_why, sizeof(c->broken_why), "%s", why);
        t->broken = true;
        return;
    }
    conn_lost(t, c, code, why, err);
}

/* An unidentified connection is closed, and why kept for init's message. */
static void refuse(struct lite_transport *t, struct conn *c, const char *why)
{
    LITE_WARN("tcp rank %d: refused a connection from %s: %s", t->rank, c->desc, why);
    lite_fmt(t->refused_why, sizeof(t->refused_why), "%s: %s", c->desc, why);
    epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->dead = true;
    conn_drop_tls(c);
}

/* Drive c's TLS handshake one step; true once it is done and the peer is who it must be. On a
 * connection this rank dialled, the certificate must name the rank dialled (ca mode). */
static bool tls_step(struct lite_transport *t, struct conn *c)
{
#ifdef LITE_HAVE_TLS
    bool want_write = false;
    char why[160];
    int rc = tcp_tls_handshake(c->ssl, &want_write, why, sizeof(why));
    int hs_errno = errno;
    bool named_wrong = false;
    if (rc == 0) {
        if (want_write != c->out_armed)
            ep_set(t, c, want_write);
        return false;
    }
    if (rc > 0 && c->peer >= 0 && t->sec_mode == LITE_SEC_CA) {
        int named = tcp_tls_peer_rank(c->ssl);
        if (named != c->peer) {
            lite_fmt(why, sizeof(why), "its certificate is rank %d's, not rank %d's (-1: none)",
                     named, c->peer);
            rc = -EACCES;
            named_wrong = true;
        }
    }
    if (rc < 0) {
        if (c->peer < 0) {
            refuse(t, c, why);
            return false;
        }
        if (t->links_ready && !named_wrong) {
            /* a redial's handshake broke (the peer went away, or the network): the link
             * tries again, or ends (nothing listens) */
            errno = hs_errno;
            fail_soon(t, c, -LITE_ERR_PEER_LOST, why);
            return false;
        }
        lite_fmt(t->auth_why, sizeof(t->auth_why), "%s refused: %s", c->desc, why);
        t->auth_err = rc;
        LITE_ERROR("tcp rank %d: %s", t->rank, t->auth_why);
        fail_soon(t, c, rc, t->auth_why);
        return false;
    }
    c->tls_ok = true;
    ep_set(t, c, c->txq != NULL);
    return true;
#else
    return false;
#endif
}

/* The queue's unwritten bytes, from its head, as at most MAX_IOV pieces: their count. */
static int tx_iov(const struct conn *c, struct iovec *iov)
{
    int n = 0;
    for (struct tx_op *o = c->txq; o && n + 2 <= MAX_IOV; o = o->next) {
        size_t skip = o->done;
        if (skip < LITE_WIRE_HDR_LEN) {
            iov[n].iov_base = (void *)(o->hdr + skip);
            iov[n++].iov_len = LITE_WIRE_HDR_LEN - skip;
            skip = 0;
        } else {
            skip -= LITE_WIRE_HDR_LEN;
        }
        if (o->len > skip) {
            iov[n].iov_base = (void *)(o->payload + skip);
            iov[n++].iov_len = o->len - skip;
        }
    }
    return n;
}

/* conn_flush for a TLS connection: the same pieces as a plain one, sealed into records that
 * span them (small frames share a record, a header shares one with its payload's first bytes)
 * straight from where they lie. A write that must be retried is retried with the same bytes
 * first: the pieces are taken again from the same head of the queue. */
static void conn_flush_tls(struct lite_transport *t, struct conn *c)
{
    if (c->broken || c->dead || (!c->tls_ok && !tls_step(t, c)))
        return;
    while (c->txq && !c->dead && !c->broken) {
        struct iovec iov[MAX_IOV];
        int n = tx_iov(c, iov);
        bool want_read;
        ssize_t w = tcp_tls_writev(c->ssl, iov, n, &want_read);
        if (w < 0) {
            if (errno == EAGAIN) {
                if (!want_read && !c->out_armed)
                    ep_set(t, c, true);
                return;
            }
            int e = errno;
            char why[192];
            lite_fmt(why, sizeof(why), "send to %s failed: %s", c->desc,
                     e == EPROTO ? tcp_tls_error() : strerror(e));
            errno = e;
            fail_soon(t, c, -LITE_ERR_PEER_LOST, why);
            return;
        }
        tx_advance(t, c, (size_t)w);
    }
    if (!c->txq && c->out_armed && !c->dead)
        ep_set(t, c, false);
}

/* Write as much of the queue as the socket takes, gathering several frames per call. */
static void conn_flush(struct lite_transport *t, struct conn *c)
{
    c->held = false;
    if (c->ssl) {
        conn_flush_tls(t, c);
        return;
    }
    while (c->txq && !c->dead && !c->broken) {
        struct iovec iov[MAX_IOV];
        int n = tx_iov(c, iov);
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (!c->out_armed)
                    ep_set(t, c, true);
                return;
            }
            int e = errno;
            char why[96];
            lite_fmt(why, sizeof(why), "send to %s failed: %s", c->desc, strerror(e));
            errno = e;
            fail_soon(t, c, -LITE_ERR_PEER_LOST, why);
            return;
        }
        tx_advance(t, c, (size_t)w);
    }
    if (!c->txq && c->out_armed && !c->dead)
        ep_set(t, c, false);
}

/* Send every connection's held frames (answers gathered during a receive, ends of batches). */
static void flush_held(struct lite_transport *t)
{
    t->held = false;
    for (int i = 0; i < t->nconns; i++)
        if (t->conns[i].held && !t->conns[i].dead && t->conns[i].fd >= 0)
            conn_flush(t, &t->conns[i]);
}

static struct tx_op *op_make(struct lite_transport *t, const struct lite_wire_hdr *h,
                             const void *payload, uint8_t on_done, void *op, uint64_t seq, int s)
{
    struct tx_op *o = op_get(t);
    if (!o)
        return NULL;
    lite_wire_encode(h, o->hdr);
    o->payload = payload;
    o->len = lite_wire_payload(h);
    o->done = 0;
    o->on_done = on_done;
    o->op = op;
    o->next = NULL;
    o->seq = seq;
    o->stream = (uint8_t)s;
    o->copy = NULL;
    return o;
}

static int enqueue_seq(struct lite_transport *t, struct conn *c, const struct lite_wire_hdr *h,
                       const void *payload, uint8_t on_done, void *op, bool flush, uint64_t seq,
                       int s)
{
    struct tx_op *o = op_make(t, h, payload, on_done, op, seq, s);
    if (!o)
        return -ENOMEM;
    bool was_empty = c->txq == NULL;
    if (c->txq_tail)
        c->txq_tail->next = o;
    else
        c->txq = o;
    c->txq_tail = o;
    if (!flush) {
        c->held = t->held = true;
        return 0;
    }
    if (t->held)
        flush_held(t); /* the end of a batch: send what it held, on every connection */
    if (was_empty || c->held)
        conn_flush(t, c); /* latency: try to send now rather than on the next progress */
    return 0;
}

static int enqueue_frame(struct lite_transport *t, struct conn *c, const struct lite_wire_hdr *h,
                         const void *payload, uint8_t on_done, void *op, bool flush)
{
    return enqueue_seq(t, c, h, payload, on_done, op, flush, 0, 0);
}

/* ---- links: reconnection with exactly-once delivery (docs/TCP.md "Reconnection") ----
 *
 * A pair of ranks has a link; each main connection is one epoch of it. Frames of each stream
 * (main, bulk) are numbered by their position in it, across epochs (route.sent), and the
 * receiver counts the ones it applied (conn.delivered: the bytes are in place, the match is
 * committed, the immediate is counted). A written frame stays in route.rtx until the peer's
 * cumulative acknowledgement (an ACK: a FENCE naming 0 frames, key/offset = the counts applied
 * of our main/bulk stream) covers it. On a break every connection of the pair is closed; the
 * rank that dialled the main connection redials, the other probes that the peer still
 * listens; each side's first ACK on the new main connection states what it applied, and the
 * other replays the rest in order. */

/* Frames of the peer's main and bulk streams this rank applied. */
static uint64_t applied(struct lite_transport *t, int peer, int s)
{
    if (s)
        return conn_of(t, ROLE_BULK_IN, peer)->delivered;
    return conn_of(t, ROLE_MAIN, peer)->delivered + conn_of(t, ROLE_MAIN_IN, peer)->delivered;
}

static int send_ack(struct lite_transport *t, struct conn *c, bool flush)
{
    struct route *r = &t->routes[c->peer];
    r->ack_sent[0] = applied(t, c->peer, 0);
    r->ack_sent[1] = applied(t, c->peer, 1);
    r->ack_due = false;
    struct lite_wire_hdr h = {
        .type = LITE_WIRE_FENCE, .tag = 0, .key = r->ack_sent[0], .offset = r->ack_sent[1]};
    return enqueue_frame(t, c, &h, NULL, TX_DONE_NONE, NULL, flush);
}

/* Heartbeat: the kernel's keepalive finds a dead host while this rank is idle, and
 * TCP_USER_TIMEOUT a path that swallows data; either breaks the link, which then resumes. */
static void link_sockopts(struct lite_transport *t, int fd)
{
    if (!t->reconnect_ms)
        return;
    int one = 1, idle = KEEPALIVE_S, cnt = KEEPALIVE_CNT;
    unsigned uto = (unsigned)(KEEPALIVE_S * 1000 * (KEEPALIVE_CNT + 1));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
}

static void rtx_push(struct route *r, struct tx_op *o)
{
    int s = o->stream;
    o->next = NULL;
    if (r->rtx_tail[s])
        r->rtx_tail[s]->next = o;
    else
        r->rtx[s] = o;
    r->rtx_tail[s] = o;
}

/* o (a sequenced frame) has been written out: keep it for a replay. A small payload is copied
 * and its op completes now (eager completion at copy); a large one completes when acknowledged. */
static void link_written(struct lite_transport *t, struct conn *c, struct tx_op *o)
{
    /* Kept first: the completion below may reach the core, which may send, fail a send and
     * break the link, which moves the frames behind this one to rtx. */
    o->done = 0;
    rtx_push(&t->routes[c->peer], o);
    if (o->on_done != TX_DONE_NONE && o->len <= COPY_MAX) {
        uint8_t *cp = o->len <= sizeof(o->inl) ? o->inl : (o->len ? malloc(o->len) : NULL);
        if (cp || !o->len) {
            if (o->len)
                memcpy(cp, o->payload, o->len);
            o->copy = cp;
            o->payload = cp;
            uint8_t d = o->on_done;
            o->on_done = TX_DONE_NONE;
            if (d == TX_DONE_OP)
                t->up->send_done(t->core, o->op, 0);
            else
                t->up->rma_target_done(t->core, o->op);
        }
    }
}

/* The peer applied the first n frames of our stream s: their ops complete. */
static int link_acked(struct lite_transport *t, int peer, int s, uint64_t n)
{
    struct route *r = &t->routes[peer];
    if (n > r->sent[s])
        return -LITE_ERR_PROTOCOL;
    if (n <= r->acked[s])
        return 0;
    r->acked[s] = n;
    while (r->rtx[s] && r->rtx[s]->seq <= n) {
        struct tx_op *o = r->rtx[s];
        r->rtx[s] = o->next;
        if (!r->rtx[s])
            r->rtx_tail[s] = NULL;
        tx_complete(t, o, 0);
    }
    return 0;
}

/* The link is over: frames kept for a replay end with code (their ops exactly once). */
static void link_drop(struct lite_transport *t, int peer, int code)
{
    struct route *r = &t->routes[peer];
    for (int s = 0; s < 2; s++) {
        while (r->rtx[s]) {
            struct tx_op *o = r->rtx[s];
            r->rtx[s] = o->next;
            tx_complete(t, o, code);
        }
        r->rtx_tail[s] = NULL;
    }
    r->state = LINK_UP; /* nothing to resume: later frames fail at once (the conns are dead) */
}

static bool link_resumable(struct lite_transport *t, const struct conn *c)
{
    return t->reconnect_ms > 0 && t->links_ready && !t->closing && c->peer >= 0 && c >= t->conns &&
           c < t->conns + t->nconns && !c->dead;
}

static int64_t backoff_ns(struct lite_transport *t, unsigned attempts)
{
    int64_t ms = attempts >= 7 ? BACKOFF_MAX_MS : (int64_t)BACKOFF_MIN_MS << attempts;
    if (ms > BACKOFF_MAX_MS)
        ms = BACKOFF_MAX_MS;
    /* jitter: 50..150 %, so that ranks that broke together do not redial together */
    int64_t ns = ms * 1000000;
    return ns / 2 + (int64_t)(rand_r(&t->rng) % 1000) * ns / 1000;
}

/* Close every connection of the pair; sequenced frames queued on them go back to rtx (behind
 * the written ones, in order), a payload being placed is kept as partial (conn.part). */
static void link_break(struct lite_transport *t, int peer, const char *why)
{
    struct route *r = &t->routes[peer];
    int64_t now = lite_now_ns();
    for (int role = 0; role < ROLE_COUNT; role++) {
        struct conn *c = conn_of(t, role, peer);
        if (c->fd >= 0) {
            epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);
            c->fd = -1;
        }
        conn_drop_tls(c);
        while (c->txq) {
            struct tx_op *o = c->txq;
            c->txq = o->next;
            if (o->seq) {
                o->done = 0;
                rtx_push(r, o);
            } else {
                tx_complete(t, o, 0);
            }
        }
        c->txq_tail = NULL;
        if (c->rx_state == RX_PAYLOAD) {
            c->part = true;
            c->rx_state = RX_HDR;
        }
        c->lo = c->hi = 0;
        c->paused = c->resume = c->held = c->out_armed = c->probe = c->eof = false;
        c->broken = 0;
        c->last_large = c->role == ROLE_BULK_IN;
    }
    if (r->state == LINK_UP) {
        r->down_ns = now;
        r->attempts = 0;
        r->breaks++;
        lite_fmt(r->down_why, sizeof(r->down_why), "%s", why);
        LITE_WARN("tcp rank %d: link to rank %d broke (epoch %u): %s; reconnecting for up to %d ms",
                  t->rank, peer, r->epoch, why, t->reconnect_ms);
    } else {
        LITE_DEBUG("tcp rank %d: reconnection to rank %d failed: %s", t->rank, peer, why);
    }
    r->state = LINK_DOWN;
    r->next_dial_ns = now + backoff_ns(t, r->attempts);
    t->links_down = true;
}

/* Budget spent (or the peer is gone for sure): the link fails, every op exactly once. */
static void link_fail(struct lite_transport *t, int peer, const char *reason)
{
    struct route *r = &t->routes[peer];
    char why[256];
    lite_fmt(why, sizeof(why),
             "rank %d lost: %s; %u reconnection attempt(s) in %lld ms (the link broke: %s)", peer,
             reason, r->attempts, (long long)((lite_now_ns() - r->down_ns) / 1000000), r->down_why);
    LITE_WARN("tcp rank %d: %s", t->rank, why);
    r->state = LINK_UP;
    conn_fail(t, conn_of(t, ROLE_MAIN, peer), -LITE_ERR_PEER_LOST, why);
}

static int dial(struct lite_transport *t, struct conn *c);

static void conn_rx(struct lite_transport *t, struct conn *c);

/* One connection of an up link ended: what the peer sent on the link's other connections
 * before that is still in their sockets (a peer that exits right after its last message closes
 * every connection at once, and the bulk one's end may be seen first). Read it in before the
 * break closes them, or it would be lost for good when the peer does not come back. False when
 * that reading found the link broken already (an end or an error on another connection). */
static bool drain_link(struct lite_transport *t, struct conn *c)
{
    struct route *r = &t->routes[c->peer];
    if (r->state != LINK_UP || r->draining)
        return true;
    r->draining = true;
    for (int role = 0; role < ROLE_COUNT && r->state == LINK_UP; role++) {
        struct conn *o = conn_of(t, role, c->peer);
        if (o != c && o->fd >= 0 && !o->dead && !o->probe && !o->eof)
            conn_rx(t, o);
    }
    r->draining = false;
    return r->state == LINK_UP;
}

/* A connection of a resumable link broke (or a code that is final): break or fail. */
static void conn_lost(struct lite_transport *t, struct conn *c, int code, const char *why, int err)
{
    if (code != -LITE_ERR_PEER_LOST || !link_resumable(t, c)) {
        char w[320];
        if (code == -LITE_ERR_PEER_LOST && t->lazy && why && !t->closing) {
            /* lazy mode never resumes (docs/TCP.md "Reconnection"): say so where it is seen */
            lite_fmt(w, sizeof(w), "%s (LITETX_TCP_CONNECT=lazy: no reconnection)", why);
            why = w;
        }
        conn_fail(t, c, code, why);
        return;
    }
    if (err == ECONNREFUSED && t->routes[c->peer].state != LINK_UP) {
        /* A live context listens as long as it exists: nobody listening means it exited. */
        link_fail(t, c->peer, "nothing listens at its address any more (the process exited)");
        return;
    }
    if (!drain_link(t, c))
        return;
    link_break(t, c->peer, why);
}

/* The peer's statement of what it applied arrived on the new main connection: replay the rest
 * of each stream in order, and the link is up again. */
static void link_replay(struct lite_transport *t, int peer)
{
    struct route *r = &t->routes[peer];
    uint64_t n[2] = {0, 0};
    r->state = LINK_UP;
    r->resumes++;
    for (int s = 0; s < 2; s++) {
        struct conn *c = conn_of(t, s ? ROLE_BULK_OUT : ROLE_MAIN, peer);
        if (!r->rtx[s])
            continue;
        if (c->fd < 0 && dial(t, c)) {
            link_break(t, peer, "cannot redial the bulk connection");
            return;
        }
        for (struct tx_op *o = r->rtx[s]; o; o = o->next)
            n[s]++;
        if (c->txq_tail)
            c->txq_tail->next = r->rtx[s];
        else
            c->txq = r->rtx[s];
        c->txq_tail = r->rtx_tail[s];
        r->rtx[s] = r->rtx_tail[s] = NULL;
        conn_flush(t, c);
        if (r->state != LINK_UP)
            return; /* it broke again: the frames are back in rtx */
    }
    /* the bulk stream is reopened with the link, so that the peer's fd count stays as at init */
    struct conn *b = conn_of(t, ROLE_BULK_OUT, peer);
    if (t->bulk_min && b->fd < 0 && r->state == LINK_UP && dial(t, b))
        link_break(t, peer, "cannot redial the bulk connection");
    if (r->state == LINK_UP)
        LITE_WARN("tcp rank %d: link to rank %d resumed (epoch %u) after %.1f ms and %u "
                  "attempt(s); replaying %llu + %llu frame(s)",
                  t->rank, peer, r->epoch, (double)(lite_now_ns() - r->down_ns) / 1e6, r->attempts,
                  (unsigned long long)n[0], (unsigned long long)n[1]);
}

/* An ACK from the peer (on a main connection). */
static int link_ack_frame(struct lite_transport *t, struct conn *c, const struct lite_wire_hdr *h)
{
    if (!is_main(c))
        return -LITE_ERR_PROTOCOL;
    if (!t->reconnect_ms)
        return 0; /* the peer resumes links, this rank does not: nothing kept to trim */
    int rc = link_acked(t, c->peer, 0, h->key);
    if (!rc)
        rc = link_acked(t, c->peer, 1, h->offset);
    if (!rc && t->routes[c->peer].state == LINK_RESUME)
        link_replay(t, c->peer);
    return rc;
}

/* Acknowledge what was applied now and then (every ACK_EVERY frames, or at once for a frame
 * whose sender waits for it), on the main connection. */
static void ack_maybe(struct lite_transport *t, int peer)
{
    struct route *r = &t->routes[peer];
    if (r->state != LINK_UP)
        return;
    if (!r->ack_due &&
        applied(t, peer, 0) + applied(t, peer, 1) < r->ack_sent[0] + r->ack_sent[1] + ACK_EVERY)
        return;
    struct conn *c = conn_of(t, ROLE_MAIN, peer);
    if (c->fd < 0 || c->dead)
        c = conn_of(t, ROLE_MAIN_IN, peer);
    if (c->fd < 0 || c->dead)
        return;
    send_ack(t, c, false);
}

/* The rank that accepted the main connection does not redial; it checks now and then that the
 * peer still listens, so that a peer that exited is known at once, not at the end of the
 * budget. A plain connect (no TLS, nothing sent): the kernel's answer is all it needs. */
static void probe_open(struct lite_transport *t, struct conn *c)
{
    const struct sockaddr_storage *ss = &t->peer_addr[c->peer];
    int fd = lite_sock_tcp(ss->ss_family);
    if (fd < 0)
        return;
    if (connect(fd, (const struct sockaddr *)ss, t->peer_len[c->peer]) != 0 &&
        errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        if (e == ECONNREFUSED)
            link_fail(t, c->peer, "nothing listens at its address any more (the process exited)");
        return;
    }
    c->fd = fd;
    c->probe = true;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
    epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void probe_event(struct lite_transport *t, struct conn *c)
{
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->probe = false;
    if (err == ECONNREFUSED && t->routes[c->peer].state != LINK_UP)
        link_fail(t, c->peer, "nothing listens at its address any more (the process exited)");
}

/* Redial or probe the links that are down; fail those past the budget. */
static void link_tick(struct lite_transport *t)
{
    int64_t now = lite_now_ns();
    bool down = false;
    for (int p = 0; p < t->world; p++) {
        struct route *r = &t->routes[p];
        if (r->state == LINK_UP || p == t->rank)
            continue;
        if (now - r->down_ns > (int64_t)t->reconnect_ms * 1000000) {
            char w[96];
            lite_fmt(w, sizeof(w), "no resume within reconnect_timeout_ms (%d)", t->reconnect_ms);
            link_fail(t, p, w);
            continue;
        }
        down = true;
        if (r->state != LINK_DOWN || now < r->next_dial_ns)
            continue;
        r->attempts++;
        r->next_dial_ns = now + backoff_ns(t, r->attempts);
        if (p < t->rank) { /* this rank dialled the main connection: it redials */
            r->state = LINK_RESUME;
            r->epoch++;
            int rc = dial(t, conn_of(t, ROLE_MAIN, p));
            if (rc == -LITE_ERR_PEER_LOST || rc == -ECONNREFUSED)
                link_break(t, p, "redial failed");
            else if (rc)
                link_fail(t, p, lite_strerror(rc));
        } else if (conn_of(t, ROLE_MAIN_IN, p)->fd < 0) {
            probe_open(t, conn_of(t, ROLE_MAIN_IN, p));
        }
    }
    t->links_down = down;
}

/* Security on: c's socket gets a TLS session (client: this rank dialled). */
static int conn_tls_start(struct lite_transport *t, struct conn *c, bool client)
{
#ifdef LITE_HAVE_TLS
    if (!t->tls)
        return 0;
    c->ssl = tcp_tls_new(t->tls, c->fd, client);
    return c->ssl ? 0 : -ENOMEM;
#else
    return 0;
#endif
}

/* A connection gets its receive stage when it gets a socket (lazy mode allocates none ahead). */
static int conn_stage(struct conn *c)
{
    if (!c->stage) {
        c->stage_size = is_main(c) ? STAGE_SIZE : BULK_STAGE;
        c->stage = malloc(c->stage_size);
    }
    return c->stage ? 0 : -ENOMEM;
}

/* c gets fd, a socket this rank connected (or is connecting): TLS starts if it is on, and the
 * HELLO is queued first, to leave when the socket is writable (EPOLLOUT). */
static int conn_dialled(struct lite_transport *t, struct conn *c, int fd, bool flush)
{
    c->fd = fd;
    int rc = conn_tls_start(t, c, true);
    if (rc) {
        close(fd);
        c->fd = -1;
        return rc;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev);
    c->out_armed = true;
    link_sockopts(t, fd);
    struct route *r = &t->routes[c->peer];
    struct lite_wire_hdr h = {.type = LITE_WIRE_HELLO,
                              .flags = c->role == ROLE_BULK_OUT ? LITE_WIRE_F_BULK : 0,
                              .tag = (uint64_t)t->rank,
                              .key = t->incarnation,
                              .offset = r->peer_inc,
                              .imm = r->epoch};
    rc = enqueue_frame(t, c, &h, NULL, TX_DONE_NONE, NULL, flush && r->state == LINK_UP);
    /* A resumed main connection: what this rank applied of the peer's streams follows. */
    if (!rc && c->role == ROLE_MAIN && r->state != LINK_UP)
        rc = send_ack(t, c, flush);
    return rc;
}

/* Lazy mode: open c (this rank's main or bulk connection to c->peer) now. The connect completes
 * in the background; the HELLO and the frames queued behind it leave once it has (EPOLLOUT). */
static int dial(struct lite_transport *t, struct conn *c)
{
    int rc = conn_stage(c);
    if (rc)
        return rc;
    const struct sockaddr_storage *ss = &t->peer_addr[c->peer];
    int fd = lite_sock_tcp(ss->ss_family);
    if (fd < 0)
        return fd;
    if (connect(fd, (const struct sockaddr *)ss, t->peer_len[c->peer]) != 0 &&
        errno != EINPROGRESS) {
        rc = -errno;
        LITE_ERROR("tcp rank %d: cannot connect to %s: %s", t->rank, c->desc, strerror(errno));
        close(fd);
        return rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM ? rc : -LITE_ERR_PEER_LOST;
    }
    rc = conn_dialled(t, c, fd, false);
    if (!rc) {
        t->dialled++;
        if (t->routes[c->peer].epoch) /* a resume (link_tick, link_replay), not a first use */
            LITE_DEBUG("tcp rank %d: connecting to %s (epoch %u of the link)", t->rank, c->desc,
                       t->routes[c->peer].epoch);
        else
            LITE_DEBUG("tcp rank %d: connecting to %s on first use", t->rank, c->desc);
    }
    return rc;
}

/* The connection this rank sends `peer` its main (s = 0) or bulk (s = 1) frames on, connected
 * now in lazy mode if there is none. A rank sends on one main connection per peer for good, so
 * its frames stay in order: the one it dialled, or the peer's if that came first. */
static int send_conn(struct lite_transport *t, int peer, int s, struct conn **out)
{
    struct conn *c = conn_of(t, s ? ROLE_BULK_OUT : ROLE_MAIN, peer);
    if (c->dead)
        return -LITE_ERR_PEER_LOST;
    if (c->fd < 0 && !s && t->lazy) {
        struct conn *in = conn_of(t, ROLE_MAIN_IN, peer);
        if (in->fd >= 0 && !in->dead) {
            *out = in;
            return 0;
        }
    }
    if (c->fd < 0) {
        if (!t->lazy)
            return -LITE_ERR_PEER_LOST;
        int rc = dial(t, c);
        if (rc)
            return rc;
    }
    *out = c;
    return 0;
}

/* Queue a frame for `peer` on its main or its bulk connection, with a FENCE first when the
 * other stream has carried frames since this one last named its count (see the top). */
static int send_frame(struct lite_transport *t, int peer, const struct lite_wire_hdr *h,
                      const void *payload, uint8_t on_done, void *op, bool flush)
{
    int s = t->bulk_min && (h->type == LITE_WIRE_WRITE || h->type == LITE_WIRE_READ_RESP) &&
            h->len >= t->bulk_min;
    struct route *r = &t->routes[peer];
    /* Sequenced when reconnection is on: the frame's number is its position in the stream. */
    uint64_t seq = t->reconnect_ms ? r->sent[s] + 1 : 0;
    if (r->state != LINK_UP) {
        /* The link is down or resuming: the frame waits for the replay, behind the others. */
        if (conn_of(t, ROLE_MAIN, peer)->dead)
            return -LITE_ERR_PEER_LOST;
        if (r->sent[!s] > r->fenced[s]) {
            struct lite_wire_hdr f = {.type = LITE_WIRE_FENCE, .tag = r->sent[!s]};
            struct tx_op *fo = op_make(t, &f, NULL, TX_DONE_NONE, NULL, seq, s);
            if (!fo)
                return -ENOMEM;
            rtx_push(r, fo);
            r->fenced[s] = r->sent[!s];
        }
        struct tx_op *o = op_make(t, h, payload, on_done, op, seq, s);
        if (!o)
            return -ENOMEM;
        rtx_push(r, o);
        r->sent[s]++;
        return 0;
    }
    struct conn *c;
    int rc0 = send_conn(t, peer, s, &c);
    if (rc0)
        return rc0;
    if (r->sent[!s] > r->fenced[s]) {
        struct lite_wire_hdr f = {.type = LITE_WIRE_FENCE, .tag = r->sent[!s]};
        int rc = enqueue_seq(t, c, &f, NULL, TX_DONE_NONE, NULL, false, seq, s);
        if (rc)
            return rc;
        r->fenced[s] = r->sent[!s];
    }
    /* Counted before it is queued: queueing may flush, and a completion met there may send
     * again (the next frame must get the next number). */
    r->sent[s]++;
    int rc = enqueue_seq(t, c, h, payload, on_done, op, flush, seq, s);
    if (rc)
        r->sent[s]--; /* nothing was queued (out of memory before any flush) */
    return rc;
}

static int tcp_msg_send(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                        const void *payload, void *op)
{
    if (peer < 0 || peer >= t->world || peer == t->rank)
        return -EINVAL;
    struct lite_wire_hdr h = {.type = LITE_WIRE_MSG,
                              .channel = hdr->channel,
                              .flags = hdr->flags,
                              .credits = hdr->credits,
                              .tag = hdr->tag,
                              .len = hdr->len};
    return send_frame(t, peer, &h, payload, TX_DONE_OP, op, true);
}

/* ---- one-sided ops (emulated: frames on the same connection) ---- */

static int slot_get(struct conn *c, uint64_t *id)
{
    if (c->nfree == 0) {
        uint32_t n = c->nslots ? c->nslots * 2 : 64;
        struct rma_slot *s = realloc(c->slots, n * sizeof(*s));
        if (!s)
            return -ENOMEM;
        c->slots = s;
        uint32_t *f = realloc(c->free_slots, n * sizeof(*f));
        if (!f)
            return -ENOMEM;
        c->free_slots = f;
        for (uint32_t i = n; i > c->nslots; i--) {
            memset(&c->slots[i - 1], 0, sizeof(c->slots[0]));
            c->free_slots[c->nfree++] = i - 1;
        }
        c->nslots = n;
    }
    uint32_t i = c->free_slots[--c->nfree];
    c->slots[i].gen++;
    *id = (uint64_t)c->slots[i].gen << 32 | i;
    return (int)i;
}

/* The slot an answer names, or NULL when the id is unknown, stale or of the wrong kind. */
static struct rma_slot *slot_find(struct conn *c, uint64_t id, uint8_t kind)
{
    uint32_t i = (uint32_t)id;
    if (i >= c->nslots || c->slots[i].gen != (uint32_t)(id >> 32) || c->slots[i].kind != kind)
        return NULL;
    return &c->slots[i];
}

static void slot_put(struct conn *c, struct rma_slot *sl)
{
    sl->kind = 0;
    c->free_slots[c->nfree++] = (uint32_t)(sl - c->slots);
}

static int tcp_mr_reg(struct lite_transport *t, const struct lite_tp_mr *mr,
                      struct lite_tp_mr_keys *keys)
{
    /* Emulated one-sided ops name regions by the core's key; nothing to pin here. */
    keys->handle = NULL;
    keys->nrails = 0;
    return 0;
}

static int tcp_mr_dereg(struct lite_transport *t, void *handle)
{
    return 0;
}

static int tcp_rma_post(struct lite_transport *t, const struct lite_tp_rma *r, void *op)
{
    if (r->peer < 0 || r->peer >= t->world || r->peer == t->rank)
        return -EINVAL;
    struct conn *c = conn_of(t, ROLE_MAIN, r->peer); /* holds the pair's slots */
    if (c->dead || (c->fd < 0 && !t->lazy && t->routes[r->peer].state == LINK_UP))
        return -LITE_ERR_PEER_LOST;
    bool more = (r->flags & LITE_RMA_F_MORE) != 0;
    if (r->kind == LITE_RMA_WRITE && (r->flags & LITE_RMA_F_LOCAL_DONE)) {
        /* Done when the bytes are in the socket: no slot, and the target sends no answer. */
        struct lite_wire_hdr h = {
            .type = LITE_WIRE_WRITE,
            .flags = LITE_WIRE_F_NOACK |
                     (r->flags & LITE_RMA_F_REFUSAL_TO_NEXT ? LITE_WIRE_F_STICKY : 0) |
                     (r->has_imm ? LITE_WIRE_F_IMM : 0),
            .imm = r->imm,
            .len = r->len,
            .key = r->remote_core_key,
            .offset = r->remote_offset};
        return send_frame(t, r->peer, &h, r->local, TX_DONE_OP, op, !more);
    }
    uint64_t id;
    int i = slot_get(c, &id);
    if (i < 0)
        return i;
    struct rma_slot *sl = &c->slots[i];
    sl->op = op;
    sl->kind = (uint8_t)r->kind;
    sl->dst = r->local;
    sl->len = r->len;
    sl->answered = false;
    struct lite_wire_hdr h = {
        .tag = id, .len = r->len, .key = r->remote_core_key, .offset = r->remote_offset};
    if (r->kind == LITE_RMA_WRITE) {
        h.type = LITE_WIRE_WRITE;
        h.flags = r->has_imm ? LITE_WIRE_F_IMM : 0;
        h.imm = r->imm;
    } else {
        h.type = LITE_WIRE_READ_REQ;
    }
    /* Completion comes with the peer's answer, not when the bytes leave. Frames of a batch
     * leave together (one gathered sendmsg) when its last op is posted. */
    int rc = send_frame(t, r->peer, &h, r->kind == LITE_RMA_WRITE ? r->local : NULL, TX_DONE_NONE,
                        NULL, !more);
    if (rc)
        slot_put(c, sl);
    return rc;
}

/* ---- receiving ---- */

/* A HELLO on a new connection: adopt it as peer `rank`'s main or incoming bulk connection if
 * that makes sense. Nothing past the HELLO has been read (see conn_rx_frames), so only the
 * socket moves. */
static int adopt(struct lite_transport *t, struct conn *pc, const struct lite_wire_hdr *hh,
                 const char **why)
{
    uint64_t rank = hh->tag;
    bool bulk = (hh->flags & LITE_WIRE_F_BULK) != 0;
    /* After init, a HELLO resumes a link: only from the incarnation this rank knows, to this
     * incarnation. A new incarnation is a restarted process: its predecessor's link fails and
     * nothing is resumed into it. */
    if (t->links_ready && rank < (uint64_t)t->world && (int)rank != t->rank) {
        struct route *r = &t->routes[rank];
        static __thread char w[128];
        struct conn *m = conn_of(t, ROLE_MAIN, (int)rank);
        if (!t->reconnect_ms || t->closing || m->dead) {
            *why = "second connection from the same rank";
            return -LITE_ERR_PROTOCOL;
        }
        if (hh->key != r->peer_inc && r->state == LINK_UP) {
            /* the link is fine: a stranger, or a stale dial */
            *why = "second connection from the same rank";
            return -LITE_ERR_PROTOCOL;
        }
        if (hh->key != r->peer_inc) {
            lite_fmt(w, sizeof(w), "rank %d restarted (a new incarnation): not resumed", (int)rank);
            *why = w;
            conn_fail(t, m, -LITE_ERR_PEER_LOST, w);
            return -LITE_ERR_PEER_LOST;
        }
        if (hh->offset != t->incarnation) {
            *why = "a resume meant for an earlier incarnation of this rank";
            return -LITE_ERR_PROTOCOL;
        }
        /* Epochs: a main connection names a newer one than the last (a dial of an earlier
         * attempt that arrives late is stale); a bulk connection the current one, and only
         * once it has begun (one opened before the last break would carry frames of an old
         * replay, applied after this rank stated what it applied). */
        if (bulk ? hh->imm != r->epoch || r->state == LINK_DOWN : hh->imm <= r->epoch) {
            *why = "a connection of an earlier epoch of the link";
            return -LITE_ERR_PROTOCOL;
        }
        struct conn *slot = conn_of(t, bulk ? ROLE_BULK_IN : ROLE_MAIN, (int)rank);
        /* A new main connection, or a second bulk one: the peer saw a break this rank has
         * not seen yet. (A bulk connection follows each resume: no break.) */
        if ((!bulk && r->state == LINK_UP) || slot->fd >= 0)
            link_break(t, (int)rank, "it reconnected (it saw the connection break first)");
        if (!bulk) {
            r->state = LINK_RESUME;
            r->epoch = hh->imm;
        }
    }
    /* At init only the higher rank of a pair dials the main connection; in lazy mode whoever
     * sends first does, and both may. */
    if (rank >= (uint64_t)t->world || (int)rank == t->rank ||
        (!bulk && !t->lazy && (int)rank < t->rank)) {
        *why = "hello from a rank that should not connect to this one";
        return -LITE_ERR_PROTOCOL;
    }
    /* The rank it claims must be the rank its certificate names (ca mode). */
    if (pc->ssl && t->sec_mode == LITE_SEC_CA && tcp_tls_peer_rank(pc->ssl) != (int)rank) {
        static __thread char w[96];
        lite_fmt(w, sizeof(w), "it says it is rank %d, but its certificate is rank %d's", (int)rank,
                 tcp_tls_peer_rank(pc->ssl));
        *why = w;
        return -EACCES;
    }
    struct conn *c =
        conn_of(t, bulk ? ROLE_BULK_IN : (t->lazy ? ROLE_MAIN_IN : ROLE_MAIN), (int)rank);
    if (c->fd >= 0 || c->dead) {
        *why = "second connection from the same rank";
        return -LITE_ERR_PROTOCOL;
    }
    if (conn_stage(c)) {
        *why = "out of memory for its receive buffer";
        return -ENOMEM;
    }
    c->fd = pc->fd;
    pc->fd = -1;
    pc->lo = pc->hi = 0;
    c->ssl = pc->ssl;
    c->tls_ok = pc->tls_ok;
    pc->ssl = NULL;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->out_armed = false;
    link_sockopts(t, c->fd);
    /* What the session read past the HELLO is not the socket's to signal any more. */
    if (c->ssl && tcp_tls_pending(c->ssl))
        c->resume = t->resumed = true;
    /* A resumed main connection: state what this rank applied, first. */
    if (!bulk && t->routes[rank].state == LINK_RESUME && send_ack(t, c, true) == -ENOMEM) {
        *why = "out of memory";
        return -ENOMEM;
    }
    return 1;
}

/* c has handled one more frame: a connection fenced on its stream may go on. */
static void delivered(struct lite_transport *t, struct conn *c)
{
    c->delivered++;
    if (c->role == ROLE_BULK_OUT || c->peer < 0)
        return;
    static const int main_roles[] = {ROLE_MAIN, ROLE_MAIN_IN}, bulk_role[] = {ROLE_BULK_IN};
    const int *roles = is_main(c) ? bulk_role : main_roles;
    int nroles = is_main(c) ? 1 : 2;
    for (int i = 0; i < nroles; i++) {
        struct conn *o = conn_of(t, roles[i], c->peer);
        if (o->paused && partner_delivered(t, o) >= o->fence_at) {
            o->paused = false;
            o->resume = t->resumed = true;
            if (o->fd >= 0)
                ep_set(t, o, o->out_armed);
        }
    }
}

/* Answer a one-sided op of the peer's (write acknowledgement or read refusal). */
static void send_answer(struct lite_transport *t, struct conn *c, uint8_t type, uint64_t id,
                        int status)
{
    struct lite_wire_hdr h = {.type = type, .tag = id, .status = status};
    /* Inside conn_rx the answers to a burst of writes (e.g. the pages of a paged write) are
     * gathered into one sendmsg at its end instead of one system call each. */
    int rc = send_frame(t, c->peer, &h, NULL, TX_DONE_NONE, NULL, !c->in_rx);
    if (rc == -ENOMEM)
        conn_fail(t, c, -ENOMEM, "out of memory for a one-sided answer");
}

/* All payload bytes of the current frame are in place (or discarded). */
static void payload_done(struct lite_transport *t, struct conn *c)
{
    c->rx_state = RX_HDR;
    switch (c->rx_kind) {
    case RX_MSG:
        t->up->recv_end(t->core, c->peer, c->token);
        break;
    case RX_WRITE: {
        if (c->rx_status == 0) {
            /* The data is in place before its immediate is counted. */
            if (c->rx_has_imm)
                t->up->imm_arrived(t->core, c->peer, c->rx_imm);
            t->up->rma_target_done(t->core, c->token);
        }
        c->token = NULL;
        /* a peer's pages may come on either of its streams: the refusal is kept per peer */
        struct conn *m = conn_of(t, ROLE_MAIN, c->peer);
        if (c->rx_noack) {
            if (c->rx_sticky && c->rx_status && !m->sticky_error)
                m->sticky_error = c->rx_status;
        } else {
            /* a refusal of an earlier page of the batch is this batch's outcome too */
            int st = c->rx_status ? c->rx_status : m->sticky_error;
            m->sticky_error = 0;
            send_answer(t, c, LITE_WIRE_RMA_ACK, c->rx_id, st);
        }
        break;
    }
    case RX_READ_RESP: {
        struct conn *m = conn_of(t, ROLE_MAIN, c->peer);
        struct rma_slot *sl = slot_find(m, c->rx_id, LITE_RMA_READ);
        if (sl) { /* else the pair failed while the payload arrived: conn_fail ended the read */
            void *op = sl->op;
            slot_put(m, sl);
            t->up->send_done(t->core, op, c->rx_status);
        }
        break;
    }
    }
    /* Its sender completes it on our acknowledgement (a write with an answer completes on the
     * answer: no hurry for that one). */
    if (c->rx_len > COPY_MAX && t->reconnect_ms && (c->rx_kind != RX_WRITE || c->rx_noack))
        t->routes[c->peer].ack_due = true;
    delivered(t, c);
}

/* Start receiving a frame's payload into dst (NULL = discard). */
static void payload_begin(struct lite_transport *t, struct conn *c, uint8_t kind, void *dst,
                          uint64_t len)
{
    c->rx_kind = kind;
    c->rx_dst0 = dst;
    c->rx_len = len;
    c->dst = dst;
    c->remaining = len;
    if (len && c->fd < 0 && c->peer >= 0 && !c->dead) {
        /* The link broke while the frame's handler ran (a send it made failed: link_break).
         * The payload comes again with the replay and goes where it was to go (conn.part);
         * it must not be taken from the first bytes of the link's next connection. */
        LITE_DEBUG("tcp rank %d: the link to rank %d broke inside a frame's handler", t->rank,
                   c->peer);
        c->part = true;
        c->rx_state = RX_HDR;
        return;
    }
    c->last_large = len >= DIRECT_MIN;
    c->rx_state = RX_PAYLOAD;
    if (len == 0)
        payload_done(t, c);
}

/* A decoded header on an identified connection. 0 or a negative code (with *why). */
static int frame_begin(struct lite_transport *t, struct conn *c, const struct lite_wire_hdr *h,
                       const char **why)
{
    switch (h->type) {
    case LITE_WIRE_MSG: {
        struct lite_msg_hdr mh = {.tag = h->tag,
                                  .len = h->len,
                                  .channel = h->channel,
                                  .flags = h->flags,
                                  .credits = h->credits};
        void *dst = NULL;
        int rc = t->up->recv_begin(t->core, c->peer, &mh, &dst, &c->token);
        if (rc) {
            *why = "message refused by the core";
            return rc;
        }
        payload_begin(t, c, RX_MSG, dst, h->len);
        return 0;
    }
    case LITE_WIRE_WRITE: {
        void *dst = NULL;
        c->rx_id = h->tag;
        c->rx_imm = h->imm;
        c->rx_has_imm = (h->flags & LITE_WIRE_F_IMM) != 0;
        c->rx_noack = (h->flags & LITE_WIRE_F_NOACK) != 0;
        c->rx_sticky = (h->flags & LITE_WIRE_F_STICKY) != 0;
        c->token = NULL;
        /* Key, bounds and rights are checked before a single byte is placed; a refused
         * write's payload is read and dropped, and the refusal goes back to the initiator. */
        c->rx_status = t->up->rma_target(t->core, c->peer, h->key, h->offset, h->len,
                                         LITE_TP_ACCESS_REMOTE_WRITE, &dst, &c->token);
        payload_begin(t, c, RX_WRITE, c->rx_status == 0 ? dst : NULL, h->len);
        return 0;
    }
    case LITE_WIRE_READ_REQ: {
        void *src = NULL, *token = NULL;
        int rc = t->up->rma_target(t->core, c->peer, h->key, h->offset, h->len,
                                   LITE_TP_ACCESS_REMOTE_READ, &src, &token);
        struct lite_wire_hdr r = {.type = LITE_WIRE_READ_RESP, .tag = h->tag, .status = rc};
        if (rc == 0)
            r.len = h->len;
        rc = send_frame(t, c->peer, &r, src, rc == 0 ? TX_DONE_TARGET : TX_DONE_NONE, token, true);
        if (rc && token)
            t->up->rma_target_done(t->core, token);
        if (rc == -ENOMEM) {
            *why = "out of memory for a read response";
            return rc;
        }
        return 0; /* or the pair's bulk connection failed: so did this one (conn_fail) */
    }
    case LITE_WIRE_RMA_ACK: {
        struct conn *m = conn_of(t, ROLE_MAIN, c->peer);
        struct rma_slot *sl = slot_find(m, h->tag, LITE_RMA_WRITE);
        if (!sl) {
            *why = "acknowledgement of an unknown write";
            return -LITE_ERR_PROTOCOL;
        }
        void *op = sl->op;
        slot_put(m, sl);
        t->up->send_done(t->core, op, h->status);
        return 0;
    }
    case LITE_WIRE_READ_RESP: {
        struct rma_slot *sl = slot_find(conn_of(t, ROLE_MAIN, c->peer), h->tag, LITE_RMA_READ);
        if (!sl || sl->answered || (h->status == 0 && h->len != sl->len) ||
            (h->status != 0 && h->len != 0)) {
            *why = "read response that matches no read";
            return -LITE_ERR_PROTOCOL;
        }
        sl->answered = true;
        c->rx_id = h->tag;
        c->rx_status = h->status;
        payload_begin(t, c, RX_READ_RESP, sl->dst, h->len);
        return 0;
    }
    default:
        *why = "unexpected frame type";
        return -LITE_ERR_PROTOCOL;
    }
}

/* What each kind of connection carries; anything else from a peer is a protocol error (a
 * message on a bulk stream would break the core's one-message-at-a-time per peer). */
static bool frame_fits(const struct conn *c, uint8_t type)
{
    switch (c->role) {
    case ROLE_BULK_IN:
        return type == LITE_WIRE_WRITE || type == LITE_WIRE_READ_RESP || type == LITE_WIRE_FENCE ||
               type == LITE_WIRE_BYE;
    case ROLE_BULK_OUT:
        return type == LITE_WIRE_BYE; /* the peer only says goodbye on our outgoing stream */
    default:
        return true;
    }
}

/* Parse what is staged. Returns 0 (also when a FENCE paused the connection), 1 when the
 * connection moved (adopt), or a negative code. */
static int parse_stage(struct lite_transport *t, struct conn *c, const char **why)
{
    while (c->lo < c->hi && !c->dead && !c->paused) {
        if (c->rx_state == RX_PAYLOAD) {
            size_t k = c->hi - c->lo;
            if (k > c->remaining)
                k = (size_t)c->remaining;
            if (c->dst) {
                memcpy(c->dst, c->stage + c->lo, k);
                c->dst += k;
            }
            c->lo += k;
            c->remaining -= k;
            if (c->remaining == 0)
                payload_done(t, c);
            continue;
        }
        if (c->hi - c->lo < LITE_WIRE_HDR_LEN)
            break;
        struct lite_wire_hdr h;
        int rc = lite_wire_decode(c->stage + c->lo, MAX_PAYLOAD, &h, why);
        if (rc)
            return rc;
        c->lo += LITE_WIRE_HDR_LEN;
        if (h.type == LITE_WIRE_HELLO) {
            if (c->peer >= 0) {
                *why = "hello on an established connection";
                return -LITE_ERR_PROTOCOL;
            }
            return adopt(t, c, &h, why);
        }
        if (c->peer < 0) {
            *why = "frame before hello";
            return -LITE_ERR_PROTOCOL;
        }
        if (!frame_fits(c, h.type)) {
            *why = c->role == ROLE_MAIN ? "unexpected frame type"
                                        : "frame type that a bulk connection does not carry";
            return -LITE_ERR_PROTOCOL;
        }
        if (h.type == LITE_WIRE_FENCE && h.tag == 0) { /* an ACK (a fence naming nothing) */
            rc = link_ack_frame(t, c, &h);
            if (rc) {
                *why = "acknowledgement of frames never sent";
                return rc;
            }
            continue;
        }
        if (c->part && (h.type == LITE_WIRE_MSG || h.type == LITE_WIRE_WRITE ||
                        h.type == LITE_WIRE_READ_RESP)) {
            /* the frame that was arriving when the link broke, again: placed from its start
             * where it went before (same match, same region), nothing begun twice */
            c->part = false;
            if (h.len != c->rx_len) {
                *why = "a replayed frame differs from the one it replays";
                return -LITE_ERR_PROTOCOL;
            }
            payload_begin(t, c, c->rx_kind, c->rx_dst0, c->rx_len);
            continue;
        }
        if (h.type == LITE_WIRE_FENCE) {
            if (partner_delivered(t, c) < h.tag) {
                c->fence_at = h.tag;
                c->paused = true;
                ep_set(t, c, c->out_armed);
            }
            continue;
        }
        if (h.type == LITE_WIRE_BYE) {
            c->bye = true;
            delivered(t, c);
            continue;
        }
        rc = frame_begin(t, c, &h, why);
        if (rc)
            return rc;
        if (h.type == LITE_WIRE_READ_REQ || h.type == LITE_WIRE_RMA_ACK)
            delivered(t, c); /* frames with a payload count in payload_done */
    }
    if (c->lo == c->hi)
        c->lo = c->hi = 0;
    return 0;
}

/* Parse the stage; false when the receive must stop here (moved, paused, dead or refused). */
static bool rx_parse(struct lite_transport *t, struct conn *c)
{
    const char *why = "protocol error";
    int rc = parse_stage(t, c, &why);
    if (rc == 1)
        return false; /* adopted: the peer's slot handles the rest on its next event */
    if (rc < 0) {
        char w[128];
        lite_fmt(w, sizeof(w), "bad data from %s: %s", c->desc, why);
        if (c->peer < 0) {
            refuse(t, c, why);
        } else {
            LITE_ERROR("tcp rank %d: %s; dropping the connection", t->rank, w);
            conn_fail(t, c, rc, w);
        }
        return false;
    }
    return !c->paused && !c->dead;
}

/* recv, or SSL_read on a TLS connection (same results, see tcp_tls_read). */
static inline ssize_t conn_recv(struct lite_transport *t, struct conn *c, void *buf, size_t len)
{
    if (!c->ssl)
        return recv(c->fd, buf, len, 0);
    bool want_write;
    ssize_t n = tcp_tls_read(c->ssl, buf, len, &want_write);
    if (n < 0 && want_write && !c->out_armed)
        ep_set(t, c, true);
    return n;
}

static void conn_rx_frames(struct lite_transport *t, struct conn *c)
{
    if (c->paused)
        return;
    if (c->ssl && !c->tls_ok && !tls_step(t, c))
        return;
    if (c->lo < c->hi && !rx_parse(t, c)) /* frames left staged by a fence now passed */
        return;
    for (int iter = 0; iter < 64 && !c->dead && c->fd >= 0; iter++) {
        ssize_t n;
        size_t want = 0;
        /* Test hook (LITETX_TEST_BREAK_AT): reads stop at the next break point, and the
         * connection is shut down there. */
        size_t cap = SIZE_MAX;
        if (t->next_break < t->nbreak && c->peer >= 0 && !c->probe) {
            uint64_t at = t->break_at[t->next_break];
            if (t->rx_total >= at) {
                t->next_break++;
                char w[96];
                lite_fmt(w, sizeof(w), "test break at byte %llu (%s)", (unsigned long long)at,
                         c->desc);
                shutdown(c->fd, SHUT_RDWR);
                conn_lost(t, c, -LITE_ERR_PEER_LOST, w, 0);
                return;
            }
            cap = (size_t)(at - t->rx_total);
        }
        bool direct = c->rx_state == RX_PAYLOAD && c->lo == c->hi && c->dst &&
                      c->remaining >= (c->ssl ? TLS_DIRECT_MIN : DIRECT_MIN);
        if (direct) {
            if (t->held)
                flush_held(t); /* answers go before a long read keeps us here */
            size_t len = (size_t)c->remaining < cap ? (size_t)c->remaining : cap;
            n = conn_recv(t, c, c->dst, len);
        } else {
            if (c->hi == c->stage_size ||
                (c->lo > 0 && c->stage_size - c->hi < LITE_WIRE_HDR_LEN)) {
                memmove(c->stage, c->stage + c->lo, c->hi - c->lo);
                c->hi -= c->lo;
                c->lo = 0;
            }
            want = c->stage_size - c->hi;
            /* After a large payload, and before HELLO (so that adopt moves only a socket),
             * read just the next header. */
            if ((c->last_large || c->peer < 0) && c->rx_state == RX_HDR &&
                c->hi - c->lo < LITE_WIRE_HDR_LEN)
                want = LITE_WIRE_HDR_LEN - (c->hi - c->lo);
            if (want > cap)
                want = cap;
            n = conn_recv(t, c, c->stage + c->hi, want);
        }
        /* A TLS stream that ended without close_notify may have been cut short: an error,
         * unless the peer's BYE (authenticated, after all it sent), our own close or the
         * absence of a HELLO means nothing can be missing. */
        if (n < 0 && errno == EPROTO && c->ssl && tcp_tls_truncated(c->ssl) &&
            (c->bye || c->peer < 0 || t->closing))
            n = 0;
        if (n == 0) {
            c->eof = true;
            char w[96];
            lite_fmt(w, sizeof(w), "%s %s", c->desc,
                     c->bye ? "finalized and closed the connection" : "closed the connection");
            if (c->peer < 0 || t->closing) {
                /* Orderly end: close quietly. */
                epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->fd = -1;
                c->dead = true;
                if (c->peer < 0 && c->hi == 0) /* a peer's probe (probe_open) sends nothing */
                    LITE_DEBUG("tcp rank %d: %s closed without a byte", t->rank, c->desc);
                else if (c->peer < 0)
                    LITE_WARN("tcp rank %d: %s closed before saying hello", t->rank, c->desc);
            } else {
                conn_lost(t, c, c->bye ? -ESHUTDOWN : -LITE_ERR_PEER_LOST, w, 0);
            }
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            int e = errno;
            char w2[192];
            lite_fmt(w2, sizeof(w2), "receive from %s failed: %s", c->desc,
                     e == EPROTO ? tcp_tls_error() : strerror(e));
            if (c->peer < 0)
                refuse(t, c, w2);
            else
                conn_lost(t, c, -LITE_ERR_PEER_LOST, w2, e);
            return;
        }
        c->idle = 0;
        t->rx_reads++;
        if (c->peer >= 0)
            t->rx_total += (uint64_t)n;
        if (direct) {
            /* a TLS read returns a record at most: only EAGAIN says the socket is empty */
            bool drained = (uint64_t)n < c->remaining && !c->ssl;
            c->dst += n;
            c->remaining -= (uint64_t)n;
            if (c->remaining == 0) {
                c->last_large = true;
                payload_done(t, c);
            }
            if (drained)
                return; /* a short read: the socket is empty (epoll is level-triggered) */
            continue;
        }
        bool drained = (size_t)n < want && !c->ssl;
        c->hi += (size_t)n;
        if (!rx_parse(t, c) || drained)
            return;
    }
}

static void conn_rx(struct lite_transport *t, struct conn *c)
{
    c->in_rx = true;
    conn_rx_frames(t, c);
    c->in_rx = false;
    /* Bytes held by the TLS session wake no epoll: read them on the next round. */
    if (c->ssl && c->tls_ok && !c->paused && !c->dead && c->fd >= 0 && tcp_tls_pending(c->ssl))
        c->resume = t->resumed = true;
    if (t->reconnect_ms && c->peer >= 0 && !c->dead && c >= t->conns && c < t->conns + t->nconns)
        ack_maybe(t, c->peer);
    if (t->held)
        flush_held(t); /* the answers gathered during this receive, on whichever connection */
    else if (c->txq && !c->dead && c->fd >= 0)
        conn_flush(t, c);
}

/* Connections whose fence wait ended: parse what they had staged, and read on. */
static void run_resumed(struct lite_transport *t)
{
    for (int round = 0; round < MAX_RESUME_ROUNDS && t->resumed; round++) {
        t->resumed = false;
        for (int i = 0; i < t->nconns; i++) {
            struct conn *c = &t->conns[i];
            if (c->resume) {
                c->resume = false;
                if (!c->dead && c->fd >= 0)
                    conn_rx(t, c);
            }
        }
    }
}

static void pending_free(struct conn *c)
{
    conn_drop_tls(c);
    if (c->fd >= 0)
        close(c->fd);
    free(c->stage);
    free(c);
}

/* A free slot of the pending table, or -1. Entries whose socket moved to a peer's slot (adopt)
 * or was refused are freed here. When the table is full, the oldest entry that has been silent
 * for HELLO_WAIT_MS is dropped: a peer of ours says HELLO as soon as it is connected. */
static int pending_slot(struct lite_transport *t)
{
    int slot = -1, old = -1;
    for (int i = 0; i < t->npending; i++) {
        struct conn *p = t->pending[i];
        if (p && p->fd < 0) {
            pending_free(p);
            t->pending[i] = p = NULL;
        }
        if (!p && slot < 0)
            slot = i;
        if (p && (old < 0 || p->accepted_ns < t->pending[old]->accepted_ns))
            old = i;
    }
    if (slot >= 0 || old < 0)
        return slot;
    struct conn *o = t->pending[old];
    if (lite_now_ns() - o->accepted_ns <= (int64_t)HELLO_WAIT_MS * 1000000)
        return -1;
    LITE_WARN("tcp rank %d: dropping %s, silent for over %d ms", t->rank, o->desc, HELLO_WAIT_MS);
    epoll_ctl(t->epfd, EPOLL_CTL_DEL, o->fd, NULL);
    pending_free(o);
    t->pending[old] = NULL;
    return old;
}

static void accept_new(struct lite_transport *t)
{
    /* Bounded: a flood of connections must not keep progress here. */
    for (int accepted = 0; accepted < t->npending; accepted++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(t->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                LITE_WARN("tcp rank %d: cannot accept a connection: %s", t->rank, strerror(errno));
            return;
        }
        int slot = pending_slot(t);
        struct conn *c = slot >= 0 ? calloc(1, sizeof(*c)) : NULL;
        if (c) {
            c->stage_size = LITE_WIRE_HDR_LEN; /* it reads nothing past its HELLO */
            c->stage = malloc(c->stage_size);
        }
        if (!c || !c->stage) {
            free(c);
            LITE_WARN("tcp rank %d: too many unidentified connections; refusing one", t->rank);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->fd = fd;
        c->peer = -1;
        if (conn_tls_start(t, c, false)) {
            LITE_WARN("tcp rank %d: out of memory for a TLS session; refusing a connection",
                      t->rank);
            pending_free(c);
            continue;
        }
        c->accepted_ns = lite_now_ns();
        char host[64];
        uint16_t port;
        lite_sock_name(&ss, host, sizeof(host), &port);
        lite_fmt(c->desc, sizeof(c->desc), "%s:%u", host, port);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev);
        t->pending[slot] = c;
        /* A peer wrote its HELLO right after connecting, so it is usually here already: read it
         * now, and the slot is free again for the next connection. */
        conn_rx(t, c);
    }
}

/* Break the links whose send broke outside progress (fail_soon). Returns how many. */
static int fail_broken(struct lite_transport *t)
{
    int n = 0;
    t->broken = false;
    for (int i = 0; i < t->nconns; i++) {
        struct conn *c = &t->conns[i];
        if (c->broken) {
            int code = c->broken;
            c->broken = 0;
            conn_lost(t, c, code, c->broken_why, c->broken_errno);
            n++;
        }
    }
    return n;
}

static int progress_once(struct lite_transport *t, int timeout_ms);

static int tcp_progress(struct lite_transport *t, int timeout_ms)
{
    bool was = t->in_progress;
    t->in_progress = true;
    int n = t->broken ? fail_broken(t) : 0;
    if (t->links_down) {
        link_tick(t);
        if (t->links_down && (timeout_ms < 0 || timeout_ms > 10))
            timeout_ms = 10; /* redials are due */
    }
    int rc = progress_once(t, n ? 0 : timeout_ms);
    if (rc >= 0 && t->broken)
        n += fail_broken(t);
    t->in_progress = was;
    return rc < 0 ? rc : n + rc;
}

static int progress_once(struct lite_transport *t, int timeout_ms)
{
    int handled = 0;
    if (t->resumed)
        timeout_ms = 0; /* staged or decrypted frames wait: no sleep in epoll_wait */
    for (int i = 0; i < t->nconns; i++)
        if (t->conns[i].txq && !t->conns[i].dead)
            conn_flush(t, &t->conns[i]);
    /* Polling (timeout 0) with few peers: recv on each socket directly, one syscall per peer
     * instead of epoll_wait + recv + recv(EAGAIN), but with more than one peer only while data
     * is flowing (the last poll found some). A quiet wait (a barrier, a small message's round
     * trip) costs one epoll_wait per poll instead of a recv per peer: 4 ranks on 2 CPUs,
     * barrier 83 -> 80 us, alltoall level. epoll still runs now and then (accepts).
     * An incoming bulk connection is read here only while it is busy or awaited; outgoing
     * ones (only a goodbye comes back) are left to epoll. */
    bool direct = t->world <= 2 || (t->world <= 8 && t->rx_recent);
    if (timeout_ms == 0 && direct && (++t->polls & 31) != 0) {
        uint64_t before = t->rx_reads;
        for (int p = 0; p < t->world; p++) {
            struct conn *c = conn_of(t, ROLE_MAIN, p), *b = conn_of(t, ROLE_BULK_IN, p),
                        *ci = conn_of(t, ROLE_MAIN_IN, p);
            if (c->fd >= 0 && !c->dead) {
                conn_rx(t, c);
                handled++;
            }
            if (ci->fd >= 0 && !ci->dead && !ci->probe)
                conn_rx(t, ci);
            if (b->fd >= 0 && !b->dead &&
                (b->idle++ < BULK_IDLE_POLLS || c->paused || b->rx_state == RX_PAYLOAD))
                conn_rx(t, b);
        }
        t->rx_recent = t->rx_reads != before;
        run_resumed(t);
        return handled;
    }
    struct epoll_event evs[64];
    int n = epoll_wait(t->epfd, evs, 64, timeout_ms);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    t->rx_recent = n > 0;
    for (int i = 0; i < n; i++) {
        if (evs[i].data.ptr == &listener_marker) {
            accept_new(t);
            continue;
        }
        struct conn *c = evs[i].data.ptr;
        if (c->dead || c->fd < 0)
            continue;
        if (c->probe) {
            probe_event(t, c);
            continue;
        }
        if (evs[i].events & EPOLLOUT)
            conn_flush(t, c);
        if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            conn_rx(t, c);
        handled++;
    }
    run_resumed(t);
    return handled;
}

/* ---- setup ---- */

static int parse_port_env(const struct lite_tp_env *env, int rank, uint16_t *port)
{
    *port = 0;
    long base = (long)lite_tp_num(env, "LITETX_TCP_PORT", 0); /* 1..65535 (checked by the core) */
    if (!base)
        return 0;
    if (base + rank > 65535) {
        LITE_ERROR("LITETX_TCP_PORT=%ld: must be a port number such that port + rank <= 65535",
                   base);
        return -LITE_ERR_CONFIG;
    }
    *port = (uint16_t)(base + rank);
    return 0;
}

/* LITETX_TCP_BULK_MIN: bytes (0 = no bulk stream); ranks may differ, a receiver takes both.
 * Default: BULK_MIN, or 0 on a crowded host, where the two ends of a pair never send at the same
 * moment and the extra sockets only cost (alltoall of 1 MiB per peer, 4 ranks on 2 CPUs: 30 %
 * slower with them). */
static void parse_bulk_env(const struct lite_tp_env *env, bool crowded, uint64_t *min)
{
    *min = (uint64_t)lite_tp_num(env, "LITETX_TCP_BULK_MIN", crowded ? 0 : BULK_MIN);
}

/* LITETX_TCP_CONNECT=all|lazy|auto: connect every pair at init, or each pair at its first
 * frame; auto (the default): all up to LAZY_WORLD ranks, lazy beyond. */
#define LAZY_WORLD 64
enum { CONNECT_AUTO, CONNECT_ALL, CONNECT_LAZY }; /* the table's "auto|all|lazy" */
static void parse_connect_env(const struct lite_tp_env *env, int world, bool *lazy)
{
    int64_t how = lite_tp_num(env, "LITETX_TCP_CONNECT", CONNECT_AUTO);
    *lazy = how == CONNECT_AUTO ? world > LAZY_WORLD : how == CONNECT_LAZY;
}

/* lite_config_t.reconnect_timeout_ms, and LITETX_TEST_BREAK_AT=N[,N...] (for tests: shut a
 * peer's connection down when this rank has received N bytes from its peers in all). */
static int parse_link_env(struct lite_transport *t, const struct lite_transport_params *p)
{
    t->reconnect_ms = RECONNECT_DEFAULT;
    if (p->size > offsetof(struct lite_transport_params, reconnect_timeout_ms) &&
        p->reconnect_timeout_ms >= 0)
        t->reconnect_ms = p->reconnect_timeout_ms;
    const char *v;
    if (t->lazy && t->reconnect_ms) {
        LITE_INFO("tcp rank %d: lazy connections: a broken connection ends its link at once "
                  "(no reconnection; docs/TCP.md \"Reconnection\")",
                  t->rank);
        t->reconnect_ms = 0;
    }
    uint64_t inc = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &inc, sizeof(inc)) != (ssize_t)sizeof(inc))
            inc = 0;
        close(fd);
    }
    t->incarnation = (inc ^ (uint64_t)lite_now_ns() ^ ((uint64_t)getpid() << 32)) | 1;
    t->rng = (unsigned)(t->incarnation ^ (t->incarnation >> 32));
    v = lite_tp_str(p->env, "LITETX_TEST_BREAK_AT");
    if (v && *v) {
        for (const char *q = v; *q; q++)
            t->nbreak += *q == ',';
        t->nbreak++;
        t->break_at = calloc((size_t)t->nbreak, sizeof(*t->break_at));
        if (!t->break_at)
            return -ENOMEM;
        const char *q = v;
        for (int i = 0; i < t->nbreak; i++) {
            char *end;
            unsigned long long n = strtoull(q, &end, 10);
            if (end == q || (*end && *end != ',') || (i && n <= t->break_at[i - 1])) {
                LITE_ERROR("LITETX_TEST_BREAK_AT=\"%s\": must be ascending byte counts, comma "
                           "separated",
                           v);
                return -LITE_ERR_CONFIG;
            }
            t->break_at[i] = n;
            q = *end ? end + 1 : end;
        }
        LITE_WARN("tcp rank %d: LITETX_TEST_BREAK_AT is set: connections are broken on purpose",
                  t->rank);
    }
    return 0;
}

static void tcp_close(struct lite_transport *t);

static int tcp_open(const struct lite_transport_params *p, struct lite_transport **out)
{
    struct lite_transport *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->rank = p->rank;
    t->world = p->world_size;
    t->core = p->core;
    t->up = p->up;
    t->listen_fd = -1;
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->nconns = ROLE_COUNT * t->world;
    t->conns = calloc((size_t)t->nconns, sizeof(struct conn));
    t->routes = calloc((size_t)t->world, sizeof(struct route));
    t->npending = 2 * (t->world - 1) + MAX_STRANGERS;
    t->pending = calloc((size_t)t->npending, sizeof(*t->pending));
    int rc = t->epfd < 0 ? -errno : (!t->conns || !t->routes || !t->pending ? -ENOMEM : 0);
    static const char *const role_desc[ROLE_COUNT] = {"", " (bulk out)", " (bulk in)",
                                                      " (dialled by it)"};
    lite_tp_env_attach(p->env);
    if (!rc)
        parse_connect_env(p->env, t->world, &t->lazy);
    for (int i = 0; !rc && i < t->nconns; i++) {
        struct conn *c = &t->conns[i];
        c->fd = -1;
        c->role = (uint8_t)(i / t->world);
        c->peer = i % t->world;
        c->last_large = c->role == ROLE_BULK_IN; /* its frames are large: headers read alone */
        lite_fmt(c->desc, sizeof(c->desc), "rank %d%s", c->peer, role_desc[c->role]);
        /* At init every pair is connected, so the stages are allocated now; lazy mode
         * allocates one when its connection is made. */
        if (c->peer != t->rank && !t->lazy && c->role != ROLE_MAIN_IN)
            rc = conn_stage(c);
    }
    uint16_t port = 0;
    if (!rc)
        rc = parse_link_env(t, p);
    if (!rc)
        rc = parse_port_env(p->env, t->rank, &port);
    if (!rc)
        parse_bulk_env(p->env,
                       p->size > offsetof(struct lite_transport_params, crowded) && p->crowded,
                       &t->bulk_min);
    char why[256];
    const struct lite_security *sec =
        p->size > offsetof(struct lite_transport_params, security) ? p->security : NULL;
    if (!rc && sec && sec->mode != LITE_SEC_OFF) {
#ifdef LITE_HAVE_TLS
        t->sec_mode = sec->mode;
        rc = tcp_tls_open(sec, &t->tls, why, sizeof(why));
        if (rc)
            LITE_ERROR("tcp rank %d: %s", t->rank, why);
#else
        rc = -LITE_ERR_CONFIG; /* the core refuses first: no LITE_CAP_ENCRYPTED */
#endif
    }
    if (!rc)
        rc = lite_sock_resolve(p->bind_host, port, &t->addr, &t->addr_len, why, sizeof(why));
    if (!rc) {
        t->listen_fd = lite_sock_tcp(t->addr.ss_family);
        rc = t->listen_fd < 0 ? t->listen_fd : 0;
    }
    if (!rc) {
        /* A fixed port (LITETX_TCP_PORT) can be listened on again at once after a job ends,
         * despite its connections in TIME_WAIT (never two listeners: Linux refuses that). */
        int one = 1;
        setsockopt(t->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    if (!rc && (bind(t->listen_fd, (struct sockaddr *)&t->addr, t->addr_len) != 0 ||
                listen(t->listen_fd, SOMAXCONN) != 0)) {
        rc = -errno;
        LITE_ERROR("tcp rank %d: cannot listen on %s port %u: %s", t->rank, p->bind_host, port,
                   strerror(errno));
    }
    if (!rc) {
        t->addr_len = sizeof(t->addr);
        getsockname(t->listen_fd, (struct sockaddr *)&t->addr, &t->addr_len);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listener_marker};
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->listen_fd, &ev);
        char host[64];
        uint16_t lp;
        lite_sock_name(&t->addr, host, sizeof(host), &lp);
        LITE_INFO("tcp rank %d listening on %s port %u; bulk connections for payloads of %llu "
                  "bytes and more (0: none)",
                  t->rank, host, lp, (unsigned long long)t->bulk_min);
    }
    if (!rc) {
        /* Test and deployment knob: publish 127.0.0.1:(A + rank) instead of the listening
         * address, so that every dial to this rank (main, bulk, redial) goes through a proxy
         * or port forward there. */
        t->adv = t->addr;
        long adv = (long)lite_tp_num(p->env, "LITETX_TCP_ADVERTISE_BASE", 0);
        if (adv && adv + t->rank > 65535) {
            LITE_ERROR("tcp rank %d: LITETX_TCP_ADVERTISE_BASE=%ld + rank is past port 65535",
                       t->rank, adv);
            rc = -LITE_ERR_CONFIG;
        } else if (adv) {
            struct sockaddr_in *a4 = (struct sockaddr_in *)&t->adv;
            memset(&t->adv, 0, sizeof(t->adv));
            a4->sin_family = AF_INET;
            a4->sin_port = htons((uint16_t)(adv + t->rank));
            a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            LITE_INFO("tcp rank %d: advertising 127.0.0.1 port %ld", t->rank, adv + t->rank);
        }
    }
    if (rc) {
        tcp_close(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* Address blob: u8 family | u8 flags | u16 port (network order) | 16 bytes address.
 * BLOB_F_BULK: this rank sends large payloads on bulk connections, so it opens one to every
 * peer; a rank without it (LITETX_TCP_BULK_MIN=0, the default on a crowded host) opens none,
 * and its peers do not wait for one: a job of N ranks then holds N - 1 sockets per rank, not
 * 3 (N - 1). */
#define BLOB_LEN    28 /* ... | u64 incarnation (reconnection) */
#define BLOB_F_BULK 0x01

static int tcp_addr_get(struct lite_transport *t, void *blob, size_t *len)
{
    if (*len < BLOB_LEN)
        return -ENOSPC;
    uint8_t *b = blob;
    b[1] = t->bulk_min ? BLOB_F_BULK : 0;
    lite_sock_pack(&t->adv, &b[0], b + 2);
    lite_put64(b + 20, t->incarnation);
    *len = BLOB_LEN;
    return 0;
}

static int blob_to_addr(const uint8_t *b, size_t len, struct sockaddr_storage *ss, socklen_t *sl)
{
    if (len != BLOB_LEN)
        return -LITE_ERR_PROTOCOL;
    return lite_sock_unpack(b[0], b + 2, ss, sl);
}

/* Does rank j open bulk connections (BLOB_F_BULK in its address)? */
static bool has_bulk(const void *const *blobs, const size_t *lens, int j)
{
    return lens[j] == BLOB_LEN && (((const uint8_t *)blobs[j])[1] & BLOB_F_BULK);
}

static int connect_one(struct lite_transport *t, int peer, int role,
                       const struct sockaddr_storage *ss, socklen_t sl, int64_t deadline,
                       int *last_err)
{
    int fd = lite_sock_connect(ss, sl, deadline, last_err);
    if (fd < 0)
        return fd;
    /* With TLS the handshake and then the HELLO inside it are driven by progress (connect_all
     * waits for them). */
    if (t->tls)
        return conn_dialled(t, conn_of(t, role, peer), fd, true);
    struct lite_wire_hdr h = {.type = LITE_WIRE_HELLO,
                              .flags = role == ROLE_BULK_OUT ? LITE_WIRE_F_BULK : 0,
                              .tag = (uint64_t)t->rank};
    uint8_t hdr[LITE_WIRE_HDR_LEN];
    lite_wire_encode(&h, hdr);
    int rc = lite_sock_write_full(fd, hdr, sizeof(hdr), deadline);
    if (rc) {
        close(fd);
        return rc;
    }
    link_sockopts(t, fd);
    struct conn *c = conn_of(t, role, peer);
    c->fd = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

/* Lazy mode's connect_all: keep every rank's address for the first frame to it. */
/* Every rank's listening address (lazy dials, redials) and incarnation. */
static int keep_addrs(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                      char *why, size_t why_len)
{
    t->peer_addr = calloc((size_t)t->world, sizeof(*t->peer_addr));
    t->peer_len = calloc((size_t)t->world, sizeof(*t->peer_len));
    if (!t->peer_addr || !t->peer_len)
        return -ENOMEM;
    for (int j = 0; j < t->world; j++) {
        if (j != t->rank && blob_to_addr(blobs[j], lens[j], &t->peer_addr[j], &t->peer_len[j])) {
            lite_fmt(why, why_len, "tcp rank %d: rank %d published an unusable address", t->rank,
                     j);
            return -LITE_ERR_PROTOCOL;
        }
        if (j != t->rank)
            t->routes[j].peer_inc = lite_get64((const uint8_t *)blobs[j] + 20);
    }
    return 0;
}

static int lazy_addrs(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                      char *why, size_t why_len)
{
    int krc = keep_addrs(t, blobs, lens, why, why_len);
    if (krc)
        return krc;
    /* A rank that talks to every peer needs one descriptor each (two where both dialled at
     * once): raise the limit now if it can be, else say so; each connect fails cleanly if the
     * job does reach it. */
    char fwhy[192];
    if (lite_fd_reserve(t->world - 1, fwhy, sizeof(fwhy)))
        LITE_WARN("tcp rank %d: connections are made on first use; talking to all %d peers %s",
                  t->rank, t->world - 1, fwhy);
    LITE_INFO("tcp rank %d: connections to the %d peers are made on first use", t->rank,
              t->world - 1);
    return 0;
}

/* TLS: the connections this rank dialled to j finished their handshake and sent the HELLO
 * (so that a peer that refuses our credentials fails init here, not the first send). */
static bool tls_dialled_ready(struct lite_transport *t, int j)
{
    static const int roles[] = {ROLE_MAIN, ROLE_BULK_OUT};
    for (int i = 0; i < 2; i++) {
        struct conn *c = conn_of(t, roles[i], j);
        if (roles[i] == ROLE_MAIN && j > t->rank)
            continue; /* j dialled that one */
        if (c->fd >= 0 && (!c->tls_ok || c->txq))
            return false;
    }
    return true;
}

static int tcp_connect_all(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                           int64_t deadline, char *why, size_t why_len)
{
    if (t->lazy)
        return lazy_addrs(t, blobs, lens, why, why_len);
    int krc = keep_addrs(t, blobs, lens, why, why_len);
    if (krc)
        return krc;
    /* Descriptors: a main connection per peer, a bulk one to each peer if this rank has a bulk
     * stream, and one from each peer that has. Checked before the first connect, so that a job
     * too large for the limit fails here, naming it, not halfway through with EMFILE. */
    long fds = t->world - 1, nbulk_in = 0;
    for (int j = 0; j < t->world; j++)
        nbulk_in += j != t->rank && has_bulk(blobs, lens, j);
    fds += nbulk_in + (t->bulk_min ? t->world - 1 : 0);
    char fwhy[192];
    int frc = lite_fd_reserve(fds, fwhy, sizeof(fwhy));
    if (frc) {
        lite_fmt(why, why_len, "tcp rank %d: %d peers %s", t->rank, t->world - 1, fwhy);
        return frc;
    }
    /* Main connections to the lower ranks, then a bulk connection to every other rank. */
    for (int k = 0; k < t->rank + (t->bulk_min ? t->world : 0); k++) {
        int role = k < t->rank ? ROLE_MAIN : ROLE_BULK_OUT;
        int j = k < t->rank ? k : k - t->rank;
        if (j == t->rank)
            continue;
        struct sockaddr_storage ss;
        socklen_t sl;
        int last = 0;
        int rc = blob_to_addr(blobs[j], lens[j], &ss, &sl);
        if (rc) {
            lite_fmt(why, why_len, "tcp rank %d: rank %d published an unusable address", t->rank,
                     j);
            return rc;
        }
        rc = connect_one(t, j, role, &ss, sl, deadline, &last);
        if (rc) {
            char host[64], lb[96];
            uint16_t port = 0;
            lite_sock_name(&ss, host, sizeof(host), &port);
            lite_fmt(why, why_len, "tcp rank %d could not connect to rank %d at %s port %u: %s%s",
                     t->rank, j, host, port, lite_strerror(rc),
                     lite_sock_last_err(last, lb, sizeof(lb)));
            return rc;
        }
    }
    /* Accept the main connections of the higher ranks and every rank's bulk connection; their
     * HELLOs are handled by progress. */
    for (;;) {
        int missing = -1, nmissing = 0;
        for (int j = 0; j < t->world; j++)
            if (j != t->rank &&
                ((j > t->rank && conn_of(t, ROLE_MAIN, j)->fd < 0) ||
                 (conn_of(t, ROLE_BULK_IN, j)->fd < 0 && has_bulk(blobs, lens, j)) ||
                 (t->tls && !tls_dialled_ready(t, j)))) {
                nmissing++;
                missing = missing < 0 ? j : missing;
            }
        if (!nmissing) {
            t->links_ready = true; /* from now on a break is resumed (reconnect_ms > 0) */
            return 0;
        }
        if (t->auth_err) {
            lite_fmt(why, why_len, "tcp rank %d: %s", t->rank, t->auth_why);
            return t->auth_err;
        }
        /* A connection lost during init (a peer that refused our credentials closes it). */
        for (int j = 0; j < t->world; j++) {
            if (j != t->rank && conn_of(t, ROLE_MAIN, j)->dead) {
                lite_fmt(why, why_len, "tcp rank %d: connection to rank %d lost during init: %s",
                         t->rank, j, t->fail_why);
                return -LITE_ERR_PEER_LOST;
            }
        }
        if (lite_now_ns() >= deadline) {
            lite_fmt(why, why_len,
                     "tcp rank %d: %d rank(s) did not connect in time (first: rank %d)%s%s",
                     t->rank, nmissing, missing, t->refused_why[0] ? "; refused: " : "",
                     t->refused_why);
            return -ETIMEDOUT;
        }
        int rc = tcp_progress(t, lite_ms_left(deadline, 50));
        if (rc < 0)
            return rc;
    }
}

static void tcp_close(struct lite_transport *t)
{
    if (!t)
        return;
    /* A link that is down gets its budget to resume, so that what is queued for it leaves. */
    int64_t resume_by = lite_deadline_ns(t->reconnect_ms);
    while (t->links_down && lite_now_ns() < resume_by)
        tcp_progress(t, 10);
    t->closing = true;
    t->in_progress = true; /* failures met while closing are handled at once */
    if (t->broken)
        fail_broken(t);
    /* Orderly shutdown: flush what is queued, half-close, and read until every peer did the
     * same, so no unread data turns the close into a reset that could destroy data in flight. */
    int64_t deadline = lite_deadline_ns(CLOSE_DRAIN_MS);
    if (t->conns && t->epfd >= 0) {
        for (;;) {
            bool busy = false;
            for (int i = 0; i < t->nconns; i++)
                busy |= t->conns[i].txq && !t->conns[i].dead;
            if (!busy || lite_now_ns() >= deadline)
                break;
            tcp_progress(t, 10);
        }
        /* BYE on every connection; on the main one it goes through send_frame so that it is
         * handled after the bulk data before it. */
        for (int i = 0; i < t->nconns; i++) {
            struct conn *c = &t->conns[i];
            if (c->fd < 0 || c->dead)
                continue;
            struct lite_wire_hdr bye = {.type = LITE_WIRE_BYE};
            struct conn *sc = NULL;
            if (is_main(c) && !send_conn(t, c->peer, 0, &sc) && sc == c) {
                send_frame(t, c->peer, &bye, NULL, TX_DONE_NONE, NULL, true);
            } else {
                /* The other main connection (lazy mode) is counted with the main stream, as
                 * the peer counts what it handles on both. */
                if (is_main(c))
                    t->routes[c->peer].sent[0]++;
                enqueue_frame(t, c, &bye, NULL, TX_DONE_NONE, NULL, true);
            }
            conn_flush(t, c);
            /* Half-close only with nothing queued; else the drain below ends it. TLS: our
             * close_notify goes first. */
            if (c->fd >= 0 && !c->txq) {
                if (c->ssl && c->tls_ok)
                    tcp_tls_close_notify(c->ssl);
                shutdown(c->fd, SHUT_WR);
            }
        }
        for (;;) {
            bool open = false;
            for (int i = 0; i < t->nconns; i++)
                open |= t->conns[i].fd >= 0 && !t->conns[i].eof;
            if (!open || lite_now_ns() >= deadline)
                break;
            tcp_progress(t, 10);
        }
    }
    for (int i = 0; t->conns && i < t->nconns; i++) {
        struct conn *c = &t->conns[i];
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        conn_fail(t, c, -LITE_ERR_CANCELLED, "transport closed");
        drop_txq(t, c, -LITE_ERR_CANCELLED); /* a connection closed in order may still hold some */
        free(c->stage);
        free(c->slots);
        free(c->free_slots);
        conn_drop_tls(c);
    }
    for (int i = 0; t->pending && i < t->npending; i++)
        if (t->pending[i])
            pending_free(t->pending[i]);
    free(t->pending);
    while (t->free_ops) {
        struct tx_op *o = t->free_ops;
        t->free_ops = o->next;
        free(o);
    }
    if (t->listen_fd >= 0)
        close(t->listen_fd);
    if (t->epfd >= 0)
        close(t->epfd);
#ifdef LITE_HAVE_TLS
    tcp_tls_close(t->tls);
#endif
    if (t->dialled)
        LITE_DEBUG("tcp rank %d: opened %d connection(s) on first use", t->rank, t->dialled);
    free(t->conns);
    free(t->routes);
    free(t->peer_addr);
    free(t->peer_len);
    free(t->break_at);
    free(t);
}

static int tcp_peer_stats(struct lite_transport *t, int peer, uint64_t *breaks, uint64_t *resumes)
{
    if (peer < 0 || peer >= t->world)
        return -EINVAL;
    *breaks = t->routes[peer].breaks;
    *resumes = t->routes[peer].resumes;
    return 0;
}

/* The variables this backend reads (litetx-info --config; docs/CONFIG.md). */
#define B LITE_TUN_BACKEND
/* Not static: the nccl backend runs a tcp instance inside and lists these as its own too. */
const struct lite_tunable lite_tcp_tunables[] = {
    {"LITETX_TCP_PORT", "any free port", "rank r listens on this port + r", LITE_TUN_INT, B, 1,
     65535, NULL},
    {"LITETX_TCP_ADVERTISE_BASE", "the listening address",
     "rank r publishes 127.0.0.1:(base + r) instead (a proxy or port forward there); 0: off",
     LITE_TUN_INT, B, 0, 65535, NULL},
    {"LITETX_TCP_BULK_MIN", "262144 (0 when crowded)",
     "one-sided payloads this large use a bulk connection; 0: none", LITE_TUN_SIZE, B, 0, INT64_MAX,
     NULL},
    /* the order of the words is parse_connect_env's enum */
    {"LITETX_TCP_CONNECT", "auto",
     "all: connect every pair at init; lazy: at first use; auto: all up to 64 ranks", LITE_TUN_ENUM,
     B, 0, 0, "auto|all|lazy"},
    {"LITETX_TEST_BREAK_AT", "none",
     "for tests: break a connection when this rank has received N bytes (N[,N...])",
     LITE_TUN_STRING, B, 0, 0, NULL},
    {NULL, NULL, NULL, 0, 0, 0, 0, NULL},
};
#undef B

const struct lite_transport_ops lite_tcp_ops = {
    .size = sizeof(struct lite_transport_ops),
    .abi_version = LITE_TRANSPORT_ABI_VERSION,
    .name = "tcp",
    .caps = LITE_CAP_WRITE | LITE_CAP_WRITE_IMM | LITE_CAP_READ | LITE_CAP_EMULATED_RMA |
            LITE_CAP_ORDERED_WRITE_MSG | /* a peer's frames are handled in order (fences) */
            LITE_CAP_REVOCABLE_RMA |     /* keys are checked per frame; a refusal is an answer */
#ifdef LITE_HAVE_TLS
            LITE_CAP_ENCRYPTED | /* TLS 1.3 when security is on */
#endif
            0,
    .probe = tcp_probe,
    .open = tcp_open,
    .close = tcp_close,
    .addr_get = tcp_addr_get,
    .connect_all = tcp_connect_all,
    .msg_send = tcp_msg_send,
    .progress = tcp_progress,
    .mr_reg = tcp_mr_reg,
    .mr_dereg = tcp_mr_dereg,
    .rma_post = tcp_rma_post,
    .tunables = lite_tcp_tunables,
    .peer_stats = tcp_peer_stats,
    /* 64 KiB messages eager: a rendezvous round trip costs more than the copy at that size
     * (docs/PERFORMANCE.md, "Rendezvous threshold"). */
    .rndv_threshold_pref = 128 * 1024,
};
