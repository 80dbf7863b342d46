/*
 * bootstrap.c - the rendezvous at rank 0: every rank's transport address is gathered there and
 * sent back to all, and a barrier ends lite_init(). The root serves every connection at once
 * (poll, non-blocking, a partial hello and a deadline per connection), so that connections
 * that are not ranks (silent, slow, garbage, half-open) cannot delay the ranks; the other ranks
 * use plain blocking-with-deadline calls.
 *
 * Frame: u32 magic | u32 type | u32 rank | u32 world | u32 len, then len bytes (little-endian).
 * An ABORT carries the error code (positive) in its rank field and the reason as its bytes.
 *
 * With security on, every bootstrap connection is TLS 1.3 with the context's credentials
 * (tls.c) before its first frame: the root refuses a client that does not complete the
 * handshake (plaintext, another CA, another PSK) and, in ca mode, a hello whose rank is not the
 * one the client's certificate names; a rank refuses a root whose certificate is not rank 0's.
 * A stranger so learns nothing of the address table and cannot place an address in it.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "lite_int.h"
#include "tls.h"

#define BS_MAGIC       0x5342544cu /* "LTBS" */
#define BS_HDR         20
#define BS_MAX_PAYLOAD (1u << 24)
/* How long an accepted connection gets to introduce itself. Generous: a rank's connect and its
 * hello are apart by one scheduling delay, which on a host running thousands of ranks (or
 * threads) exceeded 2 s, and a dropped rank has to start again; strangers are bounded by count
 * (below), not by this wait. */
#define BS_HELLO_WAIT_MS 10000
/* Connections held before they said hello: the ranks still to come plus this many strangers;
 * past that the oldest stranger is dropped (a rank it was retries). */
#define BS_STRANGER_MARGIN 32
#define BS_ACCEPT_BATCH    64  /* accepts per turn of the loop, so reads are not starved */
#define BS_TELL_MS         100 /* a frame to a rank that does not read is not waited for long */
/* After a configuration failure the root waits this long at most for the ranks not yet
 * connected, to tell them why rather than leave them to time out. */
#define BS_ABORT_LINGER_MS 3000
/* Each connect attempt to the root is given this long before a fresh one (a SYN lost to a full
 * listen queue is retried sooner than the kernel's backoff would). */
#define BS_CONNECT_TRY_MS 2000
/* Non-root ranks wait this much past the deadline for the root's verdict, so that when a rank
 * is missing every rank hears from the root which one, rather than timing out on its own. */
#define BS_VERDICT_GRACE_NS (1500 * 1000000LL)

enum { BS_HELLO = 1, BS_TABLE = 2, BS_ABORT = 3, BS_READY = 4, BS_GO = 5 };

struct lite_bootstrap {
    int rank, world;
    int listen_fd; /* root only */
    int root_fd;   /* non-root: connection to the root */
    int *fds;      /* root: fds[r] for r >= 1 */
    char local_host[LITE_HOST_MAX];
    char root_desc[LITE_HOST_MAX + 8];
    struct sockaddr_storage root_ss; /* non-root: the root's address, to connect again */
    socklen_t root_sl;
    struct lite_tls *tls;          /* security on: every connection below is TLS */
    int sec_mode;                  /* enum lite_sec_mode */
    struct lite_tls_conn *root_tc; /* non-root: the session with the root */
    struct lite_tls_conn **tcs;    /* root: tcs[r], the session on fds[r] */
};

struct bs_frame {
    uint32_t type, rank, world, len;
    uint8_t *payload; /* malloc'd, NUL-terminated for convenience */
};

/* A connection's bytes: through its TLS session when it has one (tc), else the socket's. */
static int link_write(int fd, struct lite_tls_conn *tc, const void *p, size_t n, int64_t deadline)
{
    return tc ? lite_tls_write_full(tc, p, n, deadline) : lite_sock_write_full(fd, p, n, deadline);
}

static int link_read(int fd, struct lite_tls_conn *tc, void *p, size_t n, int64_t deadline)
{
    return tc ? lite_tls_read_full(tc, p, n, deadline) : lite_sock_read_full(fd, p, n, deadline);
}

static int send_frame(int fd, struct lite_tls_conn *tc, uint32_t type, uint32_t rank,
                      uint32_t world, const void *payload, uint32_t len, int64_t deadline)
{
    uint8_t h[BS_HDR];
    lite_put32(h, BS_MAGIC);
    lite_put32(h + 4, type);
    lite_put32(h + 8, rank);
    lite_put32(h + 12, world);
    lite_put32(h + 16, len);
    int rc = link_write(fd, tc, h, sizeof(h), deadline);
    if (rc == 0 && len)
        rc = link_write(fd, tc, payload, len, deadline);
    return rc;
}

int lite_bootstrap_frame_decode(const uint8_t *h, struct lite_boot_frame *f)
{
    if (lite_get32(h) != BS_MAGIC)
        return -LITE_ERR_PROTOCOL;
    f->type = lite_get32(h + 4);
    f->rank = lite_get32(h + 8);
    f->world = lite_get32(h + 12);
    f->len = lite_get32(h + 16);
    if (f->type < BS_HELLO || f->type > BS_GO || f->len > BS_MAX_PAYLOAD)
        return -LITE_ERR_PROTOCOL;
    return 0;
}

int lite_bootstrap_hello_check(const uint8_t *h, const char **bad)
{
    struct lite_boot_frame f;
    if (lite_bootstrap_frame_decode(h, &f) && lite_get32(h) != BS_MAGIC) {
        *bad = "not a liblitetx bootstrap frame";
        return -LITE_ERR_PROTOCOL;
    }
    if (lite_get32(h + 4) != BS_HELLO) {
        *bad = "first frame is not a hello";
        return -LITE_ERR_PROTOCOL;
    }
    if (f.len > LITE_BOOT_BLOB_MAX) {
        *bad = "address blob too long";
        return -LITE_ERR_PROTOCOL;
    }
    return 0;
}

int lite_bootstrap_table_parse(const uint8_t *p, uint32_t len, int world, void **blobs,
                               size_t *lens)
{
    size_t off = 0;
    for (int r = 0; r < world; r++) {
        if (off + 4 > len)
            return -LITE_ERR_PROTOCOL;
        uint32_t l = lite_get32(p + off);
        if (l > len - off - 4)
            return -LITE_ERR_PROTOCOL;
        if (!(blobs[r] = malloc(l + 1)))
            return -ENOMEM;
        memcpy(blobs[r], p + off + 4, l);
        lens[r] = l;
        off += 4 + l;
    }
    return 0;
}

/* Read one frame; -LITE_ERR_PROTOCOL for anything that is not a bootstrap frame, -EPROTO for a
 * TLS error (lite_tls_error: e.g. the root's alert that refuses this rank's certificate). */
static int recv_frame(int fd, struct lite_tls_conn *tc, struct bs_frame *f, int64_t deadline)
{
    uint8_t h[BS_HDR];
    memset(f, 0, sizeof(*f));
    int rc = link_read(fd, tc, h, sizeof(h), deadline);
    if (rc)
        return rc;
    struct lite_boot_frame hf;
    if (lite_bootstrap_frame_decode(h, &hf))
        return -LITE_ERR_PROTOCOL;
    f->type = hf.type;
    f->rank = hf.rank;
    f->world = hf.world;
    f->len = hf.len;
    f->payload = malloc(f->len + 1);
    if (!f->payload)
        return -ENOMEM;
    f->payload[f->len] = 0;
    rc = f->len ? link_read(fd, tc, f->payload, f->len, deadline) : 0;
    if (rc) {
        free(f->payload);
        f->payload = NULL;
    }
    return rc;
}

/* The code an ABORT frame carries; one without (an older root) is read from its reason. */
int lite_bootstrap_abort_code(uint32_t code, const char *reason)
{
    switch (code) {
    case ETIMEDOUT:
    case LITE_ERR_PEER_LOST:
    case LITE_ERR_CONFIG:
    case LITE_ERR_PROTOCOL:
        return -(int)code;
    default:
        return strstr(reason, "did not arrive") ? -ETIMEDOUT : -LITE_ERR_PEER_LOST;
    }
}

static int abort_code(const struct bs_frame *f)
{
    return lite_bootstrap_abort_code(f->rank, (const char *)f->payload);
}

static int listen_root(struct lite_bootstrap *b, const struct lite_settings *s, char *why,
                       size_t why_len)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int rc = lite_sock_resolve(s->root_host, s->root_port, &ss, &sl, why, why_len);
    if (rc)
        return rc;
    int fd = lite_sock_tcp(ss.ss_family);
    if (fd < 0)
        return fd;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* Every rank may connect at once: a queue that holds them all (the kernel caps it at
     * net.core.somaxconn), so none waits for a SYN retransmission. */
    int backlog = b->world + BS_STRANGER_MARGIN > 128 ? b->world + BS_STRANGER_MARGIN : 128;
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, backlog) != 0) {
        rc = -errno;
        lite_fmt(why, why_len, "rank 0 cannot listen on the root address %s: %s", b->root_desc,
                 strerror(errno));
        close(fd);
        return rc;
    }
    b->listen_fd = fd;
    lite_fmt(b->local_host, sizeof(b->local_host), "%s", s->root_host);
    return 0;
}

/* A connection to the root before the deadline: lite_sock_connect retries refusals (the root
 * may not listen yet: ranks start in any order); an attempt left pending for BS_CONNECT_TRY_MS
 * is started afresh. */
static int dial_root(struct lite_bootstrap *b, int64_t deadline, int *last_err)
{
    for (;;) {
        int64_t now = lite_now_ns(), try_dl = now + (int64_t)BS_CONNECT_TRY_MS * 1000000;
        int fd = lite_sock_connect(&b->root_ss, b->root_sl, try_dl < deadline ? try_dl : deadline,
                                   last_err);
        if (fd != -ETIMEDOUT || try_dl >= deadline)
            return fd;
    }
}

/*
 * Security on: TLS with the root on fd (this rank the client), and in ca mode the root's
 * certificate must be rank 0's. 0, or negative with why: -LITE_ERR_PEER_LOST when the root
 * closed the connection (it drops connections that crowd it: worth another try), -EACCES when
 * either side refused the other's credentials.
 */
static int root_secure(struct lite_bootstrap *b, int fd, int64_t deadline, char *why,
                       size_t why_len)
{
    lite_tls_conn_free(b->root_tc);
    b->root_tc = NULL;
    if (!b->tls)
        return 0;
    if (!(b->root_tc = lite_tls_conn_new(b->tls, fd, true))) {
        lite_fmt(why, why_len, "rank %d: out of memory for a TLS session", b->rank);
        return -ENOMEM;
    }
    char hw[224];
    int rc = lite_tls_handshake_wait(b->root_tc, deadline, hw, sizeof(hw));
    int named = rc ? 0 : lite_tls_peer_rank(b->root_tc);
    if (!rc && b->sec_mode == LITE_SEC_CA && named != 0) {
        lite_fmt(hw, sizeof(hw), "its certificate is rank %d's, not rank 0's (-1: none)", named);
        rc = -EACCES;
    }
    if (rc)
        lite_fmt(why, why_len, "rank %d: TLS with the root (rank 0) at %s failed: %s", b->rank,
                 b->root_desc, hw);
    return rc;
}

static int connect_root(struct lite_bootstrap *b, const struct lite_settings *s, int64_t deadline,
                        char *why, size_t why_len)
{
    int rc = lite_sock_resolve(s->root_host, s->root_port, &b->root_ss, &b->root_sl, why, why_len);
    if (rc)
        return rc;
    int last_err = 0, fd;
    for (;;) {
        fd = dial_root(b, deadline, &last_err);
        if (fd < 0)
            break;
        rc = root_secure(b, fd, deadline, why, why_len);
        if (!rc)
            break;
        close(fd);
        /* Dropped mid-handshake (a crowded root): again while there is time. */
        if (rc != -LITE_ERR_PEER_LOST || lite_now_ns() + 50 * 1000000LL >= deadline)
            return rc;
        usleep(50 * 1000);
    }
    if (fd < 0) {
        char lb[96];
        if (fd == -ETIMEDOUT)
            lite_fmt(why, why_len, "rank %d could not reach the root (rank 0) at %s in time%s",
                     b->rank, b->root_desc, lite_sock_last_err(last_err, lb, sizeof(lb)));
        else
            lite_fmt(why, why_len, "rank %d: no socket for the root (rank 0) at %s: %s", b->rank,
                     b->root_desc, lite_strerror(fd));
        return fd;
    }
    struct sockaddr_storage me;
    socklen_t ml = sizeof(me);
    uint16_t port;
    getsockname(fd, (struct sockaddr *)&me, &ml);
    lite_sock_name(&me, b->local_host, sizeof(b->local_host), &port);
    b->root_fd = fd;
    return 0;
}

int lite_bootstrap_connect(const struct lite_settings *s, int64_t deadline_ns,
                           struct lite_bootstrap **out, char *why, size_t why_len)
{
    struct lite_bootstrap *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->rank = s->rank;
    b->world = s->world_size;
    b->listen_fd = b->root_fd = -1;
    b->sec_mode = s->sec.mode;
    lite_fmt(b->root_desc, sizeof(b->root_desc), "%s:%u", s->root_host, s->root_port);
    lite_fmt(b->local_host, sizeof(b->local_host), "%s", s->root_host);
    int rc = 0;
    if (b->world > 1 && b->sec_mode != LITE_SEC_OFF) {
        char tw[200] = "";
        rc = lite_tls_open(&s->sec, &b->tls, tw, sizeof(tw));
        if (rc)
            lite_fmt(why, why_len, "rank %d: bootstrap: %s", b->rank, tw);
    }
    if (b->world > 1 && !rc) {
        if (b->rank == 0) {
            b->fds = malloc(sizeof(int) * (size_t)b->world);
            b->tcs = calloc((size_t)b->world, sizeof(*b->tcs));
            if (!b->fds || !b->tcs)
                rc = -ENOMEM;
            for (int r = 0; b->fds && r < b->world; r++)
                b->fds[r] = -1;
            if (!rc)
                rc = listen_root(b, s, why, why_len);
        } else {
            rc = connect_root(b, s, deadline_ns, why, why_len);
        }
    }
    if (rc) {
        lite_bootstrap_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

int lite_bootstrap_local_host(struct lite_bootstrap *b, char *host, size_t len)
{
    lite_fmt(host, len, "%s", b->local_host);
    return 0;
}

/* Root: tell a rank why init failed (the code, positive, rides in the frame's rank field). */
static void tell_abort(int fd, struct lite_tls_conn *tc, int code, const char *why)
{
    send_frame(fd, tc, BS_ABORT, (uint32_t)-code, 0, why, (uint32_t)strlen(why),
               lite_deadline_ns(BS_TELL_MS));
}

/* Root: tell every connected rank why init failed, so they fail with the same reason. */
static void root_abort(struct lite_bootstrap *b, int code, const char *why)
{
    for (int r = 1; r < b->world; r++)
        if (b->fds[r] >= 0)
            tell_abort(b->fds[r], b->tcs[r], code, why);
}

static void list_ranks(char *out, size_t len, const int *fds, int world, bool want_missing)
{
    size_t used = 0;
    int shown = 0;
    out[0] = 0;
    for (int r = 1; r < world && used + 16 < len; r++) {
        if ((fds[r] < 0) != want_missing)
            continue;
        if (shown++ == 8) {
            used += (size_t)snprintf(out + used, len - used, ", ...");
            break;
        }
        used += (size_t)snprintf(out + used, len - used, "%s%d", shown > 1 ? ", " : "", r);
    }
}

/* An accepted connection that has not yet introduced itself, with its hello read so far. */
struct bs_conn {
    int fd;
    int64_t since;    /* accepted at: the oldest stranger gives way when the table is full */
    int64_t deadline; /* its hello must be complete by then */
    uint32_t got;     /* bytes of the hello read (header, then payload) */
    uint8_t hdr[BS_HDR];
    uint8_t *payload;
    struct lite_tls_conn *tc; /* security on: its TLS session, */
    bool secure;              /* ... whose handshake is done, */
    bool want_write;          /* ... or waits for the socket to take bytes */
    char peer[LITE_HOST_MAX + 8];
};

/* The root's event loop: the listener, the ranks that said hello, the strangers. */
struct bs_root {
    struct lite_bootstrap *b;
    void **blobs;
    size_t *lens;
    struct bs_conn *c; /* strangers, c[0..nc) */
    int nc, cap;
    int arrived;    /* ranks in, the root included */
    int rc;         /* the failure found, once found */
    bool *told;     /* after a configuration failure: the ranks told why */
    int ntold;      /* ... and how many */
    int64_t linger; /* ... and until when the root waits to tell the rest */
    char *why;
    size_t why_len;
    char bad[256]; /* why a connection was refused */
};

static void conn_drop(struct bs_root *g, int k, const char *bad)
{
    struct bs_conn *c = &g->c[k];
    if (bad)
        LITE_WARN("bootstrap root %s: refused a connection from %s: %s", g->b->root_desc, c->peer,
                  bad);
    lite_tls_conn_free(c->tc);
    close(c->fd);
    free(c->payload);
    g->c[k] = g->c[--g->nc];
}

/*
 * Read what a stranger sent, without blocking: 1 when its hello is complete, 0 when more is to
 * come, -1 when it must go (*bad says why). Bytes are checked as they come, so garbage is
 * dropped at its first wrong byte. With security on the TLS handshake comes first: a client
 * that fails it (plaintext, other credentials) goes, having been sent nothing but the root's
 * handshake messages.
 */
static int conn_read(struct bs_root *g, struct bs_conn *c, const char **bad)
{
    uint8_t magic[4];
    lite_put32(magic, BS_MAGIC);
    if (c->tc && !c->secure) {
        int rc = lite_tls_handshake(c->tc, &c->want_write, g->bad, sizeof(g->bad));
        if (rc == 0)
            return 0;
        if (rc < 0) {
            *bad = rc == -LITE_ERR_PEER_LOST ? NULL : g->bad; /* closed: no news, as below */
            return -1;
        }
        c->secure = true;
    }
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (c->got < BS_HDR) {
            dst = c->hdr + c->got;
            want = BS_HDR - c->got;
        } else {
            uint32_t len = lite_get32(c->hdr + 16), have = c->got - BS_HDR;
            if (have == len)
                return 1;
            dst = c->payload + have;
            want = len - have;
        }
        ssize_t n =
            c->tc ? lite_tls_read(c->tc, dst, want, &c->want_write) : recv(c->fd, dst, want, 0);
        if (n == 0 || (n < 0 && errno == EPROTO && c->tc && lite_tls_truncated(c->tc))) {
            *bad = NULL; /* a client that closed is no news (with or without close_notify) */
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            *bad = NULL;
            if (errno == EPROTO) {
                lite_fmt(g->bad, sizeof(g->bad), "TLS: %s", lite_tls_error());
                *bad = g->bad;
            }
            return -1;
        }
        uint32_t before = c->got;
        c->got += (uint32_t)n;
        for (uint32_t i = before; i < c->got && i < 4; i++)
            if (c->hdr[i] != magic[i]) {
                *bad = "not a liblitetx bootstrap frame";
                return -1;
            }
        if (before < BS_HDR && c->got == BS_HDR) {
            uint32_t len = lite_get32(c->hdr + 16);
            if (lite_bootstrap_hello_check(c->hdr, bad))
                return -1;
            if (!(c->payload = malloc(len + 1))) {
                *bad = "out of memory";
                return -1;
            }
            c->payload[len] = 0;
        }
    }
}

/* Fail init for a configuration every rank must share: tell who is connected, then linger a
 * little to tell the ranks still arriving, so that every rank reports the cause. */
static void config_fail(struct bs_root *g, int k, uint32_t rank, uint32_t world)
{
    struct lite_bootstrap *b = g->b;
    lite_fmt(g->why, g->why_len,
             "rank %u runs world size %u, the root (rank 0) %d: every rank must use the same "
             "world size",
             rank, world, b->world);
    g->rc = -LITE_ERR_CONFIG;
    g->linger = lite_deadline_ns(BS_ABORT_LINGER_MS);
    tell_abort(g->c[k].fd, g->c[k].tc, g->rc, g->why);
    root_abort(b, g->rc, g->why);
    for (int r = 1; r < b->world; r++)
        if (b->fds[r] >= 0 || (uint32_t)r == rank) {
            g->told[r] = true;
            g->ntold++;
        }
}

/* A stranger's hello is complete: take the rank in, or refuse it. */
static void conn_hello(struct bs_root *g, int k)
{
    struct lite_bootstrap *b = g->b;
    struct bs_conn *c = &g->c[k];
    uint32_t rank = lite_get32(c->hdr + 8), world = lite_get32(c->hdr + 12);
    int named = c->tc && b->sec_mode == LITE_SEC_CA ? lite_tls_peer_rank(c->tc) : (int)rank;
    if (named != (int)rank) {
        /* Only the rank its certificate names: its hello changes nothing, and it hears why
         * (it passed the CA, so it is a misconfigured member of the job, not a stranger). */
        lite_fmt(g->bad, sizeof(g->bad), "it says it is rank %u, but its certificate is rank %d's",
                 rank, named);
        char told[300];
        lite_fmt(told, sizeof(told), "the root %s refused this connection: %s", b->root_desc,
                 g->bad);
        tell_abort(c->fd, c->tc, -LITE_ERR_CONFIG, told);
        conn_drop(g, k, g->bad);
        return;
    }
    if (g->rc) { /* failing: every rank that turns up hears why */
        tell_abort(c->fd, c->tc, g->rc, g->why);
        if (rank >= 1 && rank < (uint32_t)b->world && !g->told[rank]) {
            g->told[rank] = true;
            g->ntold++;
        }
        conn_drop(g, k, NULL);
        return;
    }
    if (world != (uint32_t)b->world) {
        config_fail(g, k, rank, world);
        conn_drop(g, k, NULL);
        return;
    }
    if (rank == 0 || rank >= (uint32_t)b->world) {
        conn_drop(g, k, "rank out of range");
        return;
    }
    if (b->fds[rank] >= 0) {
        conn_drop(g, k, "rank already connected");
        return;
    }
    b->fds[rank] = c->fd;
    b->tcs[rank] = c->tc;
    g->blobs[rank] = c->payload;
    g->lens[rank] = lite_get32(c->hdr + 16);
    g->arrived++;
    g->c[k] = g->c[--g->nc];
}

/* Accept what waits at the listener; a full table of strangers loses its oldest. */
static void root_accept(struct bs_root *g)
{
    for (int i = 0; i < BS_ACCEPT_BATCH; i++) {
        struct sockaddr_storage pa;
        socklen_t pl = sizeof(pa);
        int fd =
            accept4(g->b->listen_fd, (struct sockaddr *)&pa, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && g->nc > 0) {
            int old = 0;
            for (int k = 1; k < g->nc; k++)
                old = g->c[k].since < g->c[old].since ? k : old;
            conn_drop(g, old, "out of file descriptors: the oldest stranger gives way");
            continue;
        }
        if (fd < 0)
            return; /* EAGAIN: no more; a connection already reset: ignored */
        if (g->nc == g->cap) {
            int old = 0;
            for (int k = 1; k < g->nc; k++)
                old = g->c[k].since < g->c[old].since ? k : old;
            conn_drop(g, old, "too many connections that have not said hello");
        }
        int one = 1; /* a frame goes in two writes: the second must not wait for an ACK */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct lite_tls_conn *tc = NULL;
        if (g->b->tls && !(tc = lite_tls_conn_new(g->b->tls, fd, false))) {
            LITE_WARN("bootstrap root %s: out of memory for a TLS session", g->b->root_desc);
            close(fd);
            continue;
        }
        int64_t now = lite_now_ns();
        struct bs_conn *c = &g->c[g->nc++];
        *c = (struct bs_conn){.fd = fd,
                              .tc = tc,
                              .since = now,
                              .deadline = now + (int64_t)BS_HELLO_WAIT_MS * 1000000};
        char host[LITE_HOST_MAX];
        uint16_t port = 0;
        lite_sock_name(&pa, host, sizeof(host), &port);
        lite_fmt(c->peer, sizeof(c->peer), "%s:%u", host, port);
    }
}

/*
 * Root: serve every connection at once until every rank said hello or the deadline passed.
 * Strangers (port scanners, health checks, a silent or slow client) each have their own
 * deadline and partial hello, and at most world_size + BS_STRANGER_MARGIN of them are held, so
 * none can delay or keep out a rank.
 */
static int root_gather(struct lite_bootstrap *b, void **blobs, size_t *lens, int64_t deadline,
                       char *why, size_t why_len)
{
    struct bs_root g = {.b = b,
                        .blobs = blobs,
                        .lens = lens,
                        .cap = b->world + BS_STRANGER_MARGIN,
                        .arrived = 1,
                        .why = why,
                        .why_len = why_len};
    size_t npfd = 1 + (size_t)b->world + (size_t)g.cap;
    g.c = calloc((size_t)g.cap, sizeof(*g.c));
    g.told = calloc((size_t)b->world, sizeof(bool));
    struct pollfd *pfd = malloc(sizeof(*pfd) * npfd);
    int *map = malloc(sizeof(int) * npfd);
    if (!g.c || !g.told || !pfd || !map) {
        free(g.c);
        free(g.told);
        free(pfd);
        free(map);
        return -ENOMEM;
    }
    for (;;) {
        int64_t now = lite_now_ns();
        if (!g.rc && g.arrived == b->world)
            break;
        if (g.rc && (g.ntold == b->world - 1 || now >= g.linger || now >= deadline))
            break;
        if (!g.rc && now >= deadline) {
            char missing[200];
            list_ranks(missing, sizeof(missing), b->fds, b->world, true);
            lite_fmt(why, why_len, "rank(s) %s did not arrive at the root %s before the deadline",
                     missing, b->root_desc);
            root_abort(b, -ETIMEDOUT, why);
            g.rc = -ETIMEDOUT;
            break;
        }
        int64_t wake = g.rc && g.linger < deadline ? g.linger : deadline;
        for (int k = g.nc - 1; k >= 0; k--) {
            if (g.c[k].deadline <= now)
                conn_drop(&g, k, "no hello in time");
            else if (g.c[k].deadline < wake)
                wake = g.c[k].deadline;
        }
        /* The listener, the ranks in (one leaving early fails init at once), the strangers. */
        int n = 0;
        pfd[n] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
        map[n++] = 0;
        for (int r = 1; r < b->world && !g.rc; r++)
            if (b->fds[r] >= 0) {
                pfd[n] = (struct pollfd){.fd = b->fds[r], .events = POLLIN};
                map[n++] = r;
            }
        int first_stranger = n;
        for (int k = 0; k < g.nc; k++)
            pfd[n++] = (struct pollfd){.fd = g.c[k].fd,
                                       .events = POLLIN | (g.c[k].want_write ? POLLOUT : 0)};
        int got = poll(pfd, (nfds_t)n, lite_ms_left(wake, 1000));
        if (got <= 0)
            continue;
        for (int i = 1; i < first_stranger && !g.rc; i++) {
            if (pfd[i].revents) {
                lite_fmt(why, why_len, "rank %d left during the bootstrap", map[i]);
                root_abort(b, -LITE_ERR_PEER_LOST, why);
                g.rc = -LITE_ERR_PEER_LOST;
            }
        }
        if (g.rc == -LITE_ERR_PEER_LOST)
            break;
        /* Backwards: a dropped stranger's slot takes the last one's, already looked at. */
        for (int k = g.nc - 1; k >= 0; k--) {
            if (!pfd[first_stranger + k].revents)
                continue;
            const char *bad = NULL;
            int st = conn_read(&g, &g.c[k], &bad);
            if (st < 0)
                conn_drop(&g, k, bad);
            else if (st > 0)
                conn_hello(&g, k);
        }
        if (pfd[0].revents & POLLIN)
            root_accept(&g);
    }
    while (g.nc > 0)
        conn_drop(&g, g.nc - 1, NULL);
    free(g.c);
    free(g.told);
    free(pfd);
    free(map);
    return g.rc;
}

int lite_bootstrap_allgather(struct lite_bootstrap *b, const void *blob, size_t len,
                             int64_t deadline_ns, void ***blobs_out, size_t **lens_out, char *why,
                             size_t why_len)
{
    if (len > LITE_BOOT_BLOB_MAX)
        return -EINVAL;
    void **blobs = calloc((size_t)b->world, sizeof(void *));
    size_t *lens = calloc((size_t)b->world, sizeof(size_t));
    uint8_t *table = NULL;
    int rc = 0;
    if (!blobs || !lens) {
        rc = -ENOMEM;
        goto out;
    }
    if (b->rank == 0) {
        blobs[0] = malloc(len + 1);
        if (!blobs[0]) {
            rc = -ENOMEM;
            goto out;
        }
        memcpy(blobs[0], blob, len);
        lens[0] = len;
        if (b->world > 1) {
            rc = root_gather(b, blobs, lens, deadline_ns, why, why_len);
            if (rc)
                goto out;
            /* The table: for each rank, u32 length then the blob. */
            size_t tlen = 0;
            for (int r = 0; r < b->world; r++)
                tlen += 4 + lens[r];
            table = malloc(tlen);
            if (!table) {
                rc = -ENOMEM;
                goto out;
            }
            size_t off = 0;
            for (int r = 0; r < b->world; r++) {
                lite_put32(table + off, (uint32_t)lens[r]);
                memcpy(table + off + 4, blobs[r], lens[r]);
                off += 4 + lens[r];
            }
            for (int r = 1; r < b->world && !rc; r++) {
                rc = send_frame(b->fds[r], b->tcs[r], BS_TABLE, 0, (uint32_t)b->world, table,
                                (uint32_t)tlen, deadline_ns);
                if (rc)
                    lite_fmt(why, why_len, "root could not send the address table to rank %d: %s",
                             r, lite_strerror(rc));
            }
        }
    } else {
        struct bs_frame f = {0};
        int64_t verdict_dl = deadline_ns > INT64_MAX - BS_VERDICT_GRACE_NS
                                 ? INT64_MAX
                                 : deadline_ns + BS_VERDICT_GRACE_NS;
        int drops = 0, pause_ms = 10;
        for (;;) {
            if (!rc) /* else the TLS handshake after a drop closed too: the same case */
                rc = send_frame(b->root_fd, b->root_tc, BS_HELLO, (uint32_t)b->rank,
                                (uint32_t)b->world, blob, (uint32_t)len, deadline_ns);
            if (!rc)
                rc = recv_frame(b->root_fd, b->root_tc, &f, verdict_dl);
            /* Closed without a word: the root drops connections whose hello is late or that
             * crowd its table of strangers. While it still accepts, it lives: say hello again. */
            if (rc != -LITE_ERR_PEER_LOST ||
                lite_now_ns() + (int64_t)pause_ms * 1000000 >= deadline_ns)
                break;
            usleep((useconds_t)pause_ms * 1000);
            pause_ms = pause_ms < 200 ? pause_ms * 2 : 200;
            int64_t again_dl = lite_deadline_ns(BS_HELLO_WAIT_MS);
            int fd = lite_sock_connect(&b->root_ss, b->root_sl,
                                       again_dl < deadline_ns ? again_dl : deadline_ns, NULL);
            if (fd < 0)
                break; /* the root is gone (its listener refuses): peer lost */
            close(b->root_fd);
            b->root_fd = fd;
            drops++;
            LITE_INFO("rank %d: the root %s dropped this rank's connection; connected again",
                      b->rank, b->root_desc);
            rc = root_secure(b, fd, deadline_ns, why, why_len);
            if (rc && rc != -LITE_ERR_PEER_LOST)
                goto out;
        }
        if (rc == -EPROTO) { /* the root's TLS alert, e.g. its refusal of our certificate */
            lite_fmt(why, why_len, "rank %d: the root %s refused this rank's TLS session: %s",
                     b->rank, b->root_desc, lite_tls_error());
            rc = -EACCES;
            goto out;
        }
        if (rc) {
            char dropped[48] = "";
            if (drops)
                lite_fmt(dropped, sizeof(dropped), " (dropped and connected again %d time(s))",
                         drops);
            lite_fmt(why, why_len, "rank %d: no address table from the root %s: %s%s", b->rank,
                     b->root_desc,
                     rc == -ETIMEDOUT            ? "timed out (some rank did not arrive?)"
                     : rc == -LITE_ERR_PEER_LOST ? "the root closed the connection"
                                                 : lite_strerror(rc),
                     dropped);
            goto out;
        }
        if (f.type == BS_ABORT) {
            lite_fmt(why, why_len, "root aborted the bootstrap: %s", (char *)f.payload);
            rc = abort_code(&f);
            free(f.payload);
            goto out;
        }
        rc = f.type != BS_TABLE
                 ? -LITE_ERR_PROTOCOL
                 : lite_bootstrap_table_parse(f.payload, f.len, b->world, blobs, lens);
        free(f.payload);
        if (rc)
            lite_fmt(why, why_len, "rank %d: malformed address table from the root", b->rank);
    }
out:
    free(table);
    if (rc) {
        lite_bootstrap_free_blobs(blobs, lens, b->world);
        return rc;
    }
    *blobs_out = blobs;
    *lens_out = lens;
    return 0;
}

int lite_bootstrap_barrier(struct lite_bootstrap *b, int64_t deadline_ns, char *why, size_t why_len)
{
    if (b->world == 1)
        return 0;
    struct bs_frame f;
    if (b->rank != 0) {
        int rc = send_frame(b->root_fd, b->root_tc, BS_READY, (uint32_t)b->rank, (uint32_t)b->world,
                            NULL, 0, deadline_ns);
        if (!rc)
            rc = recv_frame(b->root_fd, b->root_tc, &f, deadline_ns);
        if (rc) {
            lite_fmt(why, why_len, "rank %d: init barrier with the root failed: %s", b->rank,
                     lite_strerror(rc));
            return rc;
        }
        if (f.type != BS_GO) {
            lite_fmt(why, why_len, "root aborted init: %s", (char *)f.payload);
            rc = f.type == BS_ABORT ? abort_code(&f) : -LITE_ERR_PROTOCOL;
        }
        free(f.payload);
        return rc;
    }
    for (int r = 1; r < b->world; r++) {
        int rc = recv_frame(b->fds[r], b->tcs[r], &f, deadline_ns);
        if (!rc && f.type != BS_READY)
            rc = -LITE_ERR_PROTOCOL;
        free(f.payload);
        if (rc) {
            lite_fmt(why, why_len, "init barrier: rank %d did not get ready: %s", r,
                     lite_strerror(rc));
            root_abort(b, rc == -LITE_ERR_PROTOCOL ? -LITE_ERR_PEER_LOST : rc, why);
            return rc;
        }
    }
    for (int r = 1; r < b->world; r++) {
        int rc =
            send_frame(b->fds[r], b->tcs[r], BS_GO, 0, (uint32_t)b->world, NULL, 0, deadline_ns);
        if (rc) {
            lite_fmt(why, why_len, "init barrier: rank %d lost: %s", r, lite_strerror(rc));
            return rc;
        }
    }
    return 0;
}

void lite_bootstrap_close(struct lite_bootstrap *b)
{
    if (!b)
        return;
    if (b->listen_fd >= 0)
        close(b->listen_fd);
    if (b->root_tc) /* an orderly end, best effort */
        (void)lite_tls_close_notify(b->root_tc);
    lite_tls_conn_free(b->root_tc);
    if (b->root_fd >= 0)
        close(b->root_fd);
    for (int r = 0; b->tcs && r < b->world; r++) {
        if (b->tcs[r])
            (void)lite_tls_close_notify(b->tcs[r]);
        lite_tls_conn_free(b->tcs[r]);
    }
    for (int r = 0; b->fds && r < b->world; r++)
        if (b->fds[r] >= 0)
            close(b->fds[r]);
    free(b->fds);
    free(b->tcs);
    lite_tls_close(b->tls);
    free(b);
}

void lite_bootstrap_free_blobs(void **blobs, size_t *lens, int n)
{
    for (int r = 0; blobs && r < n; r++)
        free(blobs[r]);
    free(blobs);
    free(lens);
}
