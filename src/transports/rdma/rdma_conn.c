/*
 * rdma_conn.c - the side channel: one TCP connection per pair of ranks, made like the TCP
 * transport's (rank i connects to every j < i at the address in j's bootstrap blob) and kept
 * open for the life of the context.
 *
 * Why: the bootstrap exchanges one blob of at most 256 bytes per rank, but an RC connection
 * needs per-pair data (QP numbers and PSNs of 1 + 2 x rails QPs, receive depths, the mailbox).
 * The pair exchanges it here (HELLO / HELLO_ACK). Kept open, the channel then
 *   - carries re-arm requests after a one-sided op was refused (REARM / REARM_ACK, with the
 *     target's reason: unknown key, out of bounds, no access);
 *   - announces an orderly close (BYE);
 *   - tells at once, by EOF, that a peer process is gone, which RC QPs only notice when they
 *     next send and time out.
 *
 * Frames: u32 magic "LRDM" | u8 type | u8 rail | u16 payload length | payload, little-endian.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/rdma/rdma_int.h"

#define SC_MAGIC   0x4d44524cu
#define SC_HDR     8
#define EP_LEN     28
#define INFO_FIXED 40
#define BLOB_FIXED 24

static void ep_put(uint8_t *p, const struct lite_rdma_ep *e)
{
    lite_put32(p, e->qpn);
    lite_put32(p + 4, e->psn);
    lite_put16(p + 8, e->lid);
    p[10] = e->mtu;
    p[11] = 0;
    memcpy(p + 12, e->gid, 16);
}
static void ep_get(const uint8_t *p, struct lite_rdma_ep *e)
{
    e->qpn = lite_get32(p) & 0xffffff;
    e->psn = lite_get32(p + 4) & 0xffffff;
    e->lid = lite_get16(p + 8);
    e->mtu = p[10];
    memcpy(e->gid, p + 12, 16);
}

/* ---- listening and the bootstrap blob ---- */

int lite_rdma_sc_listen(struct lite_transport *t, const char *bind_host, char *why, size_t why_len)
{
    uint16_t port = 0;
    if (t->port_base) { /* 1..65535, checked by the core */
        if (t->port_base + t->rank > 65535) {
            lite_fmt(why, why_len,
                     "LITETX_RDMA_PORT=%ld: must be a port such that port + rank <= 65535",
                     t->port_base);
            return -LITE_ERR_CONFIG;
        }
        port = (uint16_t)(t->port_base + t->rank);
    }
    int rc = lite_sock_resolve(bind_host, port, &t->addr, &t->addr_len, why, why_len);
    if (rc)
        return rc;
    t->listen_fd = lite_sock_tcp(t->addr.ss_family);
    if (t->listen_fd < 0)
        return t->listen_fd;
    if (bind(t->listen_fd, (struct sockaddr *)&t->addr, t->addr_len) != 0 ||
        listen(t->listen_fd, 128) != 0) {
        rc = -errno;
        lite_fmt(why, why_len, "rdma: cannot listen on %s port %u: %s", bind_host, port,
                 strerror(errno));
        return rc;
    }
    t->addr_len = sizeof(t->addr);
    getsockname(t->listen_fd, (struct sockaddr *)&t->addr, &t->addr_len);
    return 0;
}

/* ---- frames ---- */

int lite_rdma_sc_send(struct lite_rdma_conn *c, uint8_t type, uint8_t rail, const void *p,
                      uint16_t len)
{
    uint8_t b[SC_HDR + 1024];
    if (c->fd < 0 || len > sizeof(b) - SC_HDR)
        return -EINVAL;
    lite_put32(b, SC_MAGIC);
    b[4] = type;
    b[5] = rail;
    lite_put16(b + 6, len);
    if (len)
        memcpy(b + SC_HDR, p, len);
    return lite_sock_write_full(c->fd, b, SC_HDR + (size_t)len, lite_deadline_ns(2000));
}

/* Read one whole frame (blocking until the deadline); used during the handshake only. */
static int read_frame(int fd, uint8_t *type, uint8_t *rail, uint8_t *p, uint16_t *len,
                      int64_t deadline)
{
    uint8_t h[SC_HDR];
    int rc = lite_sock_read_full(fd, h, sizeof(h), deadline);
    if (rc)
        return rc;
    if (lite_get32(h) != SC_MAGIC || lite_get16(h + 6) > 1024)
        return -LITE_ERR_PROTOCOL;
    *type = h[4];
    *rail = h[5];
    *len = lite_get16(h + 6);
    return *len ? lite_sock_read_full(fd, p, *len, deadline) : 0;
}

/* ---- the handshake ---- */

/* This rank's end of the pair with c, as HELLO / HELLO_ACK carry it. */
static uint16_t info_put(struct lite_transport *t, struct lite_rdma_conn *c, uint8_t *p)
{
    lite_put32(p, (uint32_t)t->rank);
    lite_put32(p + 4, (uint32_t)t->world);
    lite_put32(p + 8, c->nrails);
    lite_put32(p + 12, c->rx_depth);
    lite_put32(p + 16, c->slot_bytes);
    lite_put32(p + 20, c->imm_depth);
    lite_put64(p + 24, (uintptr_t)c->mbox_mr->addr); /* the peer's row in our mailbox array */
    lite_put32(p + 32, c->mbox_mr->rkey);
    lite_put32(p + 36, 0);
    return (uint16_t)(INFO_FIXED + lite_rdma_sc_eps_put(t, c, p + INFO_FIXED));
}

int lite_rdma_sc_eps_put(struct lite_transport *t, struct lite_rdma_conn *c, uint8_t *p)
{
    struct lite_rdma_ep e;
    lite_rdma_qp_ep(t, c->msg, &e);
    ep_put(p, &e);
    size_t off = EP_LEN;
    for (uint32_t r = 0; r < c->nrails; r++) {
        lite_rdma_qp_ep(t, c->out[r], &e);
        ep_put(p + off, &e);
        lite_rdma_qp_ep(t, c->in[r], &e);
        ep_put(p + off + EP_LEN, &e);
        off += 2 * EP_LEN;
    }
    return (int)off;
}

int lite_rdma_sc_eps_apply(struct lite_transport *t, struct lite_rdma_conn *c, const uint8_t *p)
{
    struct lite_rdma_ep e;
    ep_get(p, &e);
    int rc = lite_rdma_qp_connect(t, c->msg, &e);
    size_t off = EP_LEN;
    for (uint32_t r = 0; !rc && r < c->nrails; r++) {
        ep_get(p + off, &e); /* the peer's out QP talks to our in QP */
        rc = lite_rdma_qp_connect(t, c->in[r], &e);
        ep_get(p + off + EP_LEN, &e);
        if (!rc)
            rc = lite_rdma_qp_connect(t, c->out[r], &e);
        off += 2 * EP_LEN;
    }
    return rc;
}

/* Connect c's QPs to the peer's ends in its HELLO / HELLO_ACK. */
static int info_apply(struct lite_transport *t, struct lite_rdma_conn *c, const uint8_t *p,
                      uint16_t len, const char **why)
{
    if (len < INFO_FIXED + EP_LEN || lite_get32(p) != (uint32_t)c->peer ||
        lite_get32(p + 4) != (uint32_t)t->world) {
        *why = "handshake from the wrong rank or world";
        return -LITE_ERR_PROTOCOL;
    }
    uint32_t nrails = lite_get32(p + 8), rx_depth = lite_get32(p + 12), slot = lite_get32(p + 16),
             imm_depth = lite_get32(p + 20);
    if (nrails != c->nrails || len != INFO_FIXED + EP_LEN + 2 * EP_LEN * nrails || rx_depth == 0 ||
        imm_depth == 0 || slot < 64 || slot > (64u << 20)) {
        *why = "handshake with inconsistent sizes";
        return -LITE_ERR_PROTOCOL;
    }
    /* our row in its mailbox array, under a key that reaches nothing else */
    c->peer_mbox = lite_get64(p + 24);
    c->peer_mbox_rkey = lite_get32(p + 32);
    c->peer_slot_bytes = slot;
    lite_rdma_window_init(&c->msg_win, rx_depth);
    if (t->use_cm) { /* the QPs are connected through rdma_cm afterwards (rdma_cm.c) */
        for (uint32_t r = 0; r < nrails; r++)
            lite_rdma_window_init(&c->imm_win[r], imm_depth);
        c->hello = true;
        c->state = CONN_UP;
        return 0;
    }
    for (uint32_t r = 0; r < nrails; r++)
        lite_rdma_window_init(&c->imm_win[r], imm_depth);
    int rc = lite_rdma_sc_eps_apply(t, c, p + INFO_FIXED);
    if (rc) {
        *why = "cannot connect the queue pairs";
        return rc;
    }
    c->hello = true;
    c->state = CONN_UP;
    return 0;
}

/* Blob: u8 version | u8 family | u16 port (network order) | 16 B address | u8 rails | u8 cm |
 * u16 rdma_cm port | then each rail's GID (16 B), named in the error of a peer that cannot
 * reach this rank, and its address with rdma_cm (cm = 1: LITETX_RDMA_CM=1). */
int lite_rdma_addr_get(struct lite_transport *t, void *blob, size_t *len)
{
    size_t need = BLOB_FIXED + 16 * (size_t)t->nrails;
    if (*len < need)
        return -ENOSPC;
    uint8_t *b = blob;
    memset(b, 0, need);
    b[0] = 1;
    lite_sock_pack(&t->addr, &b[1], b + 2);
    b[20] = (uint8_t)t->nrails;
    b[21] = t->use_cm;
    lite_put16(b + 22, t->cm_port);
    for (uint32_t r = 0; r < t->nrails; r++)
        memcpy(b + BLOB_FIXED + 16 * r, t->rails[r].gid, 16);
    *len = need;
    return 0;
}

static int blob_parse(const uint8_t *b, size_t len, struct sockaddr_storage *ss, socklen_t *sl,
                      uint32_t *nrails)
{
    memset(ss, 0, sizeof(*ss));
    if (len < BLOB_FIXED || b[0] != 1 || b[20] == 0 || b[20] > LITE_MAX_RAILS ||
        len != BLOB_FIXED + 16u * b[20])
        return -LITE_ERR_PROTOCOL;
    *nrails = b[20];
    return lite_sock_unpack(b[1], b + 2, ss, sl);
}

/* Per-pair resources: slots, QPs, pre-posted receives. */
static int conn_setup(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t nrails)
{
    c->nrails = nrails < t->nrails ? nrails : t->nrails;
    c->rx_depth = lite_rdma_recv_depth(t->credits);
    c->tx_depth = t->tx_depth;
    c->imm_depth = t->imm_depth;
    c->slot_bytes = (LITE_RDMA_FIRST_HDR + t->slot_payload + 63) & ~63u;
    size_t bytes = (size_t)(c->rx_depth + c->tx_depth) * c->slot_bytes;
    if (posix_memalign((void **)&c->slots, 4096, bytes) != 0)
        return -ENOMEM;
    memset(c->slots, 0, bytes);
    struct ibv_pd *pd = t->devs[t->rails[0].dev].pd;
    c->slots_mr = ibv_reg_mr(pd, c->slots, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!c->slots_mr)
        return lite_rdma_errno(errno);
    c->mbox_mr = ibv_reg_mr(pd, (void *)(t->mbox + (size_t)c->peer * LITE_RDMA_MBOX_ROW),
                            LITE_RDMA_MBOX_ROW * sizeof(uint64_t),
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!c->mbox_mr)
        return lite_rdma_errno(errno);
    int rc = lite_rdma_qp_create(t, c, QP_MSG, 0, &c->msg);
    for (uint32_t r = 0; !rc && r < c->nrails; r++) {
        rc = lite_rdma_qp_create(t, c, QP_OUT, r, &c->out[r]);
        if (!rc)
            rc = lite_rdma_qp_create(t, c, QP_IN, r, &c->in[r]);
    }
    for (uint32_t s = 0; !rc && s < c->rx_depth; s++)
        rc = lite_rdma_post_recv_msg(t, c, s);
    lite_rdma_rxacct_init(&c->msg_rx, c->rx_depth);
    for (uint32_t r = 0; !rc && r < c->nrails; r++) {
        rc = lite_rdma_post_recv_imm(t, c->in[r], c->imm_depth);
        lite_rdma_rxacct_init(&c->imm_rx[r], c->imm_depth);
    }
    return rc;
}

static int connect_to(struct lite_transport *t, struct lite_rdma_conn *c,
                      const struct sockaddr_storage *ss, socklen_t sl, int64_t deadline,
                      int *last_err)
{
    int fd = lite_sock_connect(ss, sl, deadline, last_err);
    if (fd < 0)
        return fd;
    c->fd = fd;
    uint8_t p[1024];
    uint16_t n = info_put(t, c, p);
    return lite_rdma_sc_send(c, SC_HELLO, 0, p, n);
}

/* A connection on the listener: it must say HELLO as a higher rank we wait for. */
static void accept_one(struct lite_transport *t, int64_t deadline)
{
    int fd = accept4(t->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    uint8_t type, rail, p[1024];
    uint16_t len;
    int64_t dl = lite_deadline_ns(2000);
    int rc = read_frame(fd, &type, &rail, p, &len, dl < deadline ? dl : deadline);
    const char *why = "not a liblitetx rdma handshake";
    uint32_t rank = len >= 4 ? lite_get32(p) : 0;
    if (!rc && (type != SC_HELLO || rank <= (uint32_t)t->rank || rank >= (uint32_t)t->world ||
                t->conns[rank].hello))
        rc = -LITE_ERR_PROTOCOL;
    struct lite_rdma_conn *c = rc ? NULL : &t->conns[rank];
    if (c) {
        c->fd = fd;
        rc = info_apply(t, c, p, len, &why);
        if (!rc) {
            uint16_t n = info_put(t, c, p);
            rc = lite_rdma_sc_send(c, SC_HELLO_ACK, 0, p, n);
        }
        if (rc)
            c->fd = -1;
    }
    if (rc) {
        LITE_WARN("rdma rank %d: refused a side-channel connection: %s (%s)", t->rank, why,
                  lite_strerror(rc));
        close(fd);
    }
}

static bool sc_all_hello(struct lite_transport *t)
{
    for (int p = 0; p < t->world; p++)
        if (p != t->rank && !t->conns[p].hello)
            return false;
    return true;
}

/* LITETX_RDMA_CM=1: the side channel has carried the per-pair data; now the QPs. */
static int cm_connect(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                      int64_t deadline, char *why, size_t why_len)
{
    const uint8_t **gids = calloc((size_t)(unsigned)t->world, sizeof(*gids));
    uint16_t *ports = calloc((size_t)(unsigned)t->world, sizeof(*ports));
    int rc = gids && ports ? 0 : -ENOMEM;
    for (int p = 0; !rc && p < t->world; p++) {
        if (p == t->rank)
            continue;
        const uint8_t *b = blobs[p];
        gids[p] = b + BLOB_FIXED;
        ports[p] = lite_get16(b + 22);
    }
    if (!rc)
        rc = lite_rdma_cm_connect_all(t, gids, ports, deadline, why, why_len);
    free(gids);
    free(ports);
    return rc;
}

int lite_rdma_sc_connect_all(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                             int64_t deadline, char *why, size_t why_len)
{
    for (int p = 0; p < t->world; p++) {
        if (p == t->rank)
            continue;
        struct sockaddr_storage ss;
        socklen_t sl;
        uint32_t nr;
        int rc = blob_parse(blobs[p], lens[p], &ss, &sl, &nr);
        if (rc) {
            lite_fmt(why, why_len,
                     "rdma rank %d: rank %d published no valid rdma address "
                     "(is it using another transport?)",
                     t->rank, p);
            return rc;
        }
        if (((const uint8_t *)blobs[p])[21] != t->use_cm) {
            lite_fmt(why, why_len,
                     "rdma rank %d: rank %d %s through rdma_cm and this rank %s "
                     "(LITETX_RDMA_CM must be the same on every rank)",
                     t->rank, p, t->use_cm ? "does not connect" : "connects",
                     t->use_cm ? "does" : "does not");
            return -LITE_ERR_CONFIG;
        }
        rc = conn_setup(t, &t->conns[p], nr);
        if (rc) {
            lite_fmt(why, why_len, "rdma rank %d: cannot set up the connection to rank %d: %s",
                     t->rank, p, lite_strerror(rc));
            return rc;
        }
    }
    for (int j = 0; j < t->rank; j++) {
        struct sockaddr_storage ss;
        socklen_t sl;
        uint32_t nr;
        blob_parse(blobs[j], lens[j], &ss, &sl, &nr);
        int last = 0;
        int rc = connect_to(t, &t->conns[j], &ss, sl, deadline, &last);
        if (rc) {
            char host[64], g[64], lb[96];
            uint16_t port;
            lite_sock_name(&ss, host, sizeof(host), &port);
            lite_rdma_gid_str((const uint8_t *)blobs[j] + BLOB_FIXED, g, sizeof(g));
            lite_fmt(why, why_len,
                     "rdma rank %d could not reach rank %d's side channel at %s "
                     "port %u (its rail 0: GID %s): %s%s",
                     t->rank, j, host, port, g, lite_strerror(rc),
                     lite_sock_last_err(last, lb, sizeof(lb)));
            return rc;
        }
    }
    for (;;) {
        int missing = -1, nmissing = 0;
        if (t->use_cm && sc_all_hello(t))
            return cm_connect(t, blobs, lens, deadline, why, why_len);
        struct pollfd pfd[65];
        int np = 0;
        pfd[np++] = (struct pollfd){.fd = t->listen_fd, .events = POLLIN};
        for (int p = 0; p < t->world; p++) {
            if (p == t->rank || t->conns[p].hello)
                continue;
            nmissing++;
            missing = missing < 0 ? p : missing;
            if (p < t->rank && np < 65)
                pfd[np++] = (struct pollfd){.fd = t->conns[p].fd, .events = POLLIN};
        }
        if (!nmissing)
            return 0;
        if (lite_now_ns() >= deadline) {
            lite_fmt(why, why_len,
                     "rdma rank %d: %d peer(s) did not complete the handshake in "
                     "time (first: rank %d)",
                     t->rank, nmissing, missing);
            return -ETIMEDOUT;
        }
        int n = poll(pfd, (nfds_t)np, lite_ms_left(deadline, 100));
        if (n <= 0)
            continue;
        if (pfd[0].revents)
            accept_one(t, deadline);
        for (int i = 1; i < np; i++) {
            if (!pfd[i].revents)
                continue;
            struct lite_rdma_conn *c = NULL;
            for (int p = 0; p < t->rank && !c; p++)
                if (t->conns[p].fd == pfd[i].fd)
                    c = &t->conns[p];
            uint8_t type, rail, b[1024];
            uint16_t len;
            const char *w = "unexpected frame";
            int rc = read_frame(c->fd, &type, &rail, b, &len, deadline);
            if (!rc)
                rc = type == SC_HELLO_ACK ? info_apply(t, c, b, len, &w) : -LITE_ERR_PROTOCOL;
            if (rc) {
                lite_fmt(why, why_len, "rdma rank %d: handshake with rank %d failed: %s (%s)",
                         t->rank, c->peer, w, lite_strerror(rc));
                return rc;
            }
        }
    }
}

/* ---- after the handshake ---- */

int lite_rdma_sc_rearm(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t rail, int kind,
                       uint32_t rkey, uint64_t raddr, uint64_t len)
{
    uint8_t p[24 + EP_LEN];
    p[0] = (uint8_t)kind;
    p[1] = p[2] = p[3] = 0;
    lite_put32(p + 4, rkey);
    lite_put64(p + 8, raddr);
    lite_put64(p + 16, len);
    struct lite_rdma_ep e;
    lite_rdma_qp_ep(t, c->out[rail], &e);
    ep_put(p + 24, &e);
    return lite_rdma_sc_send(c, SC_REARM, (uint8_t)rail, p, sizeof(p));
}

/* The target side of a re-arm: judge the refused op, re-arm our in QP, answer. */
static int on_rearm(struct lite_transport *t, struct lite_rdma_conn *c, uint8_t rail,
                    const uint8_t *p, uint16_t len)
{
    if (rail >= c->nrails || len != 24 + EP_LEN)
        return -LITE_ERR_PROTOCOL;
    /* a re-arm and a break of the same link at once: the two resets of the in QP would leave
     * the pair's epochs apart, so the link ends (rare; docs/RDMA.md) */
    if (!lite_rdma_link_ok(c))
        return -LITE_ERR_PEER_LOST;
    unsigned need =
        p[0] == LITE_RMA_READ ? LITE_TP_ACCESS_REMOTE_READ : LITE_TP_ACCESS_REMOTE_WRITE;
    int code = lite_rdma_mr_diagnose(t, t->rails[rail].dev, lite_get32(p + 4), lite_get64(p + 8),
                                     lite_get64(p + 16), need);
    LITE_INFO("rdma rank %d: rank %d's one-sided op was refused here: %s", t->rank, c->peer,
              lite_strerror(code));
    struct lite_rdma_qp *q = c->in[rail];
    struct lite_rdma_ep e;
    ep_get(p + 24, &e);
    /* Writes with an immediate that landed before the refused op may still sit in the CQ, and
     * some HCAs (mlx4, mlx5, hns) drop a QP's completions from the CQ when it goes to RESET:
     * take them first. Nothing new arrives on this QP: its initiator waits for our answer. */
    lite_rdma_poll_cqs(t);
    if (c->state != CONN_UP)
        return 0;
    int rc = lite_rdma_qp_reset(t, q);
    q->link_reset = false;
    if (!rc)
        rc = lite_rdma_post_recv_imm(t, q, c->imm_depth);
    if (!rc)
        rc = lite_rdma_qp_connect(t, q, &e);
    if (rc)
        return rc;
    lite_rdma_rxacct_init(&c->imm_rx[rail], c->imm_depth);
    uint8_t a[4 + EP_LEN];
    lite_put32(a, (uint32_t)code);
    lite_rdma_qp_ep(t, q, &e);
    ep_put(a + 4, &e);
    return lite_rdma_sc_send(c, SC_REARM_ACK, rail, a, sizeof(a));
}

static int on_frame(struct lite_transport *t, struct lite_rdma_conn *c, uint8_t type, uint8_t rail,
                    const uint8_t *p, uint16_t len)
{
    switch (type) {
    case SC_BYE:
        c->bye = true;
        return 0;
    case SC_REARM:
        return on_rearm(t, c, rail, p, len);
    case SC_RESUME:
    case SC_RESUMED:
        return lite_rdma_link_frame(t, c, type, p, len);
    case SC_REARM_ACK: {
        if (rail >= c->nrails || len != 4 + EP_LEN || !c->rearming[rail])
            return -LITE_ERR_PROTOCOL;
        if (!lite_rdma_link_ok(c))
            return -LITE_ERR_PEER_LOST; /* see on_rearm */
        int code = (int)lite_get32(p);
        if (code != -LITE_ERR_REMOTE_KEY && code != -LITE_ERR_REMOTE_BOUNDS &&
            code != -LITE_ERR_REMOTE_ACCESS)
            code = -LITE_ERR_REMOTE; /* only a refusal's reasons come from the target */
        struct lite_rdma_ep e;
        ep_get(p + 4, &e);
        lite_rdma_rma_rearmed(t, c, rail, &e, code);
        return 0;
    }
    default:
        return -LITE_ERR_PROTOCOL;
    }
}

int lite_rdma_sc_service(struct lite_transport *t, struct lite_rdma_conn *c)
{
    int handled = 0;
    for (int iter = 0; iter < 16 && c->fd >= 0 && c->state != CONN_DEAD; iter++) {
        ssize_t n = recv(c->fd, c->sc + c->sc_len, sizeof(c->sc) - c->sc_len, 0);
        if (n == 0) {
            char w[96];
            lite_fmt(w, sizeof(w), "rank %d %s", c->peer,
                     c->bye ? "finalized and closed the connection"
                            : "closed the connection (process gone?)");
            lite_rdma_conn_fail(t, c, c->bye ? -ESHUTDOWN : -LITE_ERR_PEER_LOST, w);
            return handled + 1;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return handled;
            char w[96];
            lite_fmt(w, sizeof(w), "side channel to rank %d failed: %s", c->peer, strerror(errno));
            lite_rdma_conn_fail(t, c, c->bye ? -ESHUTDOWN : -LITE_ERR_PEER_LOST, w);
            return handled + 1;
        }
        c->sc_len += (size_t)n;
        size_t off = 0;
        while (c->sc_len - off >= SC_HDR && c->state != CONN_DEAD) {
            const uint8_t *h = c->sc + off;
            uint16_t len = lite_get16(h + 6);
            int rc =
                lite_get32(h) == SC_MAGIC && len <= sizeof(c->sc) - SC_HDR ? 0 : -LITE_ERR_PROTOCOL;
            if (!rc && c->sc_len - off < SC_HDR + (size_t)len)
                break;
            if (!rc)
                rc = on_frame(t, c, h[4], h[5], h + SC_HDR, len);
            if (rc) {
                char w[96];
                lite_fmt(w, sizeof(w), "bad side-channel frame from rank %d: %s", c->peer,
                         lite_strerror(rc));
                lite_rdma_conn_fail(t, c, rc == -LITE_ERR_PROTOCOL ? rc : -LITE_ERR_PEER_LOST, w);
                return handled + 1;
            }
            off += SC_HDR + (size_t)len;
            handled++;
        }
        memmove(c->sc, c->sc + off, c->sc_len - off);
        c->sc_len -= off;
    }
    return handled;
}
