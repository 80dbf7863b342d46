/*
 * rdma.c - the RDMA transport (libibverbs): reliable-connected queue pairs per peer and rail,
 * messages as SENDs into pre-posted receives, one-sided ops as RDMA WRITE / WRITE_WITH_IMM /
 * READ, several NICs per process. This file holds the ops table, open/close, connect_all, the
 * progress loop that dispatches work completions, and the handling of a lost peer. The design
 * is described in docs/RDMA.md; the files it is split into are listed in rdma_int.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "transports/rdma/rdma_int.h"

#define EP_DEV  1u
#define EP_CONN 2u

uint32_t lite_rdma_env_u32(const struct lite_transport *t, const char *name, uint32_t def)
{
    return (uint32_t)lite_tp_num(t->env, name, def);
}

void lite_rdma_later(struct lite_transport *t, void *op, int status)
{
    struct lite_rdma_later *l = malloc(sizeof(*l));
    if (!l) {
        /* no memory even for this: report at once rather than lose the completion */
        t->up->send_done(t->core, op, status ? status : -ENOMEM);
        return;
    }
    l->op = op;
    l->status = status;
    l->next = NULL;
    struct lite_rdma_later **pp = &t->later;
    while (*pp)
        pp = &(*pp)->next;
    *pp = l;
}

static int run_later(struct lite_transport *t)
{
    int n = 0;
    while (t->later) {
        struct lite_rdma_later *l = t->later;
        t->later = l->next;
        void *op = l->op;
        int st = l->status;
        free(l);
        t->up->send_done(t->core, op, st);
        n++;
    }
    return n;
}

void lite_rdma_conn_fail(struct lite_transport *t, struct lite_rdma_conn *c, int code,
                         const char *why)
{
    if (c->state == CONN_DEAD)
        return;
    /* Also from inside msg_send or rma_post: the op being posted is listed by then and ends
     * here with the rest; the core defers peer_failed until it is out of the post. */
    bool was_up = c->state == CONN_UP || c->state == CONN_BROKEN || c->state == CONN_READY;
    c->state = CONN_DEAD;
    c->brk = false;
    if (c->fd >= 0) {
        epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    /* Stop the NIC retrying towards a dead peer: every QP of the pair goes to the error state,
     * and the flushed completions that follow are ignored (the connection is dead). */
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    if (c->msg)
        ibv_modify_qp(c->msg->qp, &a, IBV_QP_STATE);
    for (uint32_t r = 0; r < c->nrails; r++) {
        if (c->out[r])
            ibv_modify_qp(c->out[r]->qp, &a, IBV_QP_STATE);
        if (c->in[r])
            ibv_modify_qp(c->in[r]->qp, &a, IBV_QP_STATE);
        free(c->again[r]);
        c->again[r] = NULL;
        c->nagain[r] = 0;
        c->rearming[r] = false;
    }
    lite_rdma_msg_fail(t, c, code);
    lite_rdma_rma_fail(t, c, code);
    lite_rdma_link_free(c);
    if (was_up && !t->closing) {
        if (!c->bye)
            LITE_INFO("rdma rank %d: lost rank %d: %s", t->rank, c->peer, why);
        t->up->peer_failed(t->core, c->peer, code, why);
    }
}

/* ---- completions ---- */

static void wc_error(struct lite_transport *t, struct lite_rdma_conn *c, const char *what,
                     enum ibv_wc_status st)
{
    bool fatal;
    int code = lite_rdma_wc_code(st, &fatal);
    char w[128];
    lite_fmt(w, sizeof(w), "%s rank %d failed: %s", what, c->peer, ibv_wc_status_str(st));
    if (code == -LITE_ERR_PROTOCOL) {
        if (!c->bye)
            LITE_WARN("rdma rank %d: %s", t->rank, w);
        lite_rdma_conn_fail(t, c, code, w);
        return;
    }
    /* the QP is in the error state: the link is re-established (or ends, see link_break) */
    lite_rdma_link_break(t, c, w);
}

static void on_wc(struct lite_transport *t, const struct ibv_wc *wc)
{
    uint32_t qi = WRID_QP(wc->wr_id);
    if (qi >= t->nqps || !t->qps[qi])
        return;
    struct lite_rdma_qp *q = t->qps[qi];
    struct lite_rdma_conn *c = q->conn;
    bool stale = WRID_EPOCH(wc->wr_id) != (q->epoch & 0xff);
    bool ok = wc->status == IBV_WC_SUCCESS;
    /* UP and READY: everything. A link marked broken, or BROKEN (its QPs are drained before
     * they are reset): what completed is applied (it counts in what this side says it
     * applied), errors are the flush of the break. A flushed WR of an older epoch is
     * the flush of a reset QP. */
    if (c->state == CONN_DEAD || c->state == CONN_NONE)
        return;
    if (!ok && (c->brk || c->state == CONN_BROKEN || stale))
        return;
    /* A success of an epoch that a break ended, seen only after the reset (the device was
     * still finishing it): this side's RESUME did not count it, so the peer sends it again
     * (a frame, an immediate) or this side posts it again (a SEND): taken then, not now. */
    if (stale && (q->kind == QP_MSG || q->link_reset) && WRID_TYPE(wc->wr_id) != WR_RMA)
        return;
    uint32_t slot = WRID_SLOT(wc->wr_id);
    switch (WRID_TYPE(wc->wr_id)) {
    case WR_RECV_MSG:
        /* A flush while the connection is up: the message QP went into the error state
         * without an error completion of ours (forced, or an async error), so the messages
         * posted on it are lost: the peer is, too. */
        if (ok)
            lite_rdma_msg_recv(t, c, slot, wc->byte_len);
        else
            wc_error(t, c, "a message from", wc->status);
        break;
    case WR_RECV_IMM:
        /* An error here means the peer had an op refused: it re-arms the pair itself. */
        if (!ok || !(wc->wc_flags & IBV_WC_WITH_IMM))
            break;
        c->imm_applied[q->rail]++;
        if (!stale && !c->brk && c->state != CONN_BROKEN) {
            lite_rdma_rxacct_consume(&c->imm_rx[q->rail]);
            if (lite_rdma_post_recv_imm(t, q, 1) != 0) {
                lite_rdma_link_break(t, c, "reposting a receive failed");
            } else {
                lite_rdma_rxacct_repost(&c->imm_rx[q->rail]);
                if (lite_rdma_rxacct_due(&c->imm_rx[q->rail]))
                    lite_rdma_report(t, c, false);
            }
        }
        /* the write's data is in place before its completion is generated */
        t->up->imm_arrived(t->core, c->peer, ntohl(wc->imm_data));
        break;
    case WR_SEND:
    case WR_CREDIT:
    case WR_FENCE:
        if (ok)
            lite_rdma_sq_retire(q, slot);
        else
            wc_error(t, c, "a message to", wc->status);
        break;
    case WR_RMA:
        if (!stale)
            lite_rdma_rma_done(t, q, slot, wc->status);
        break;
    default:
        break;
    }
}

int lite_rdma_poll_cqs(struct lite_transport *t)
{
    int n = 0;
    struct ibv_wc wc[32];
    for (int d = 0; d < t->ndevs; d++) {
        if (!t->devs[d].cq)
            continue;
        for (int round = 0; round < 8; round++) {
            int k = ibv_poll_cq(t->devs[d].cq, 32, wc);
            if (k <= 0)
                break;
            for (int i = 0; i < k; i++)
                on_wc(t, &wc[i]);
            n += k;
            if (k < 32)
                break;
        }
    }
    return n;
}

static bool rma_replay_left(const struct lite_rdma_conn *c)
{
    for (uint32_t r = 0; r < c->nrails; r++)
        if (c->rma_replay[r].rec)
            return true;
    return false;
}

/* Queued messages and ops, and window reports that wait for room. */
static int flush_blocked(struct lite_transport *t, bool *blocked)
{
    int n = lite_rdma_link_run(t);
    *blocked = false;
    for (int p = 0; p < t->world; p++) {
        struct lite_rdma_conn *c = &t->conns[p];
        /* a link being re-established waits on the side channel and its budget */
        *blocked |= c->state == CONN_BROKEN || c->state == CONN_READY;
        if ((c->state != CONN_UP && c->state != CONN_READY) ||
            !(c->pend || c->wait || c->report_due || c->replay || rma_replay_left(c)))
            continue;
        n += lite_rdma_msg_flush(t, c);
        n += lite_rdma_rma_flush(t, c);
        *blocked |= c->state == CONN_UP && (c->pend || c->wait || c->replay);
    }
    return n;
}

/* Completion-channel events and side-channel frames, waiting at most timeout_ms. */
static int wait_events(struct lite_transport *t, int timeout_ms)
{
    struct epoll_event ev[16];
    int n = 0, k = epoll_wait(t->epfd, ev, 16, timeout_ms);
    t->events_at = lite_now_ns();
    for (int i = 0; i < k; i++) {
        uint32_t id = (uint32_t)ev[i].data.u64;
        if ((ev[i].data.u64 >> 32) == EP_CONN) {
            n += lite_rdma_sc_service(t, &t->conns[id]);
            continue;
        }
        if ((ev[i].data.u64 >> 32) == LITE_RDMA_EP_CM) {
            n += lite_rdma_cm_service(t);
            continue;
        }
        struct lite_rdma_dev *dv = &t->devs[id];
        struct ibv_cq *cq;
        void *cq_ctx;
        while (ibv_get_cq_event(dv->ch, &cq, &cq_ctx) == 0) {
            ibv_ack_cq_events(cq, 1);
            dv->armed = false;
        }
    }
    return n;
}

static int rdma_progress(struct lite_transport *t, int timeout_ms)
{
    bool blocked;
    t->budget = t->post_budget;
    int n = lite_rdma_poll_cqs(t) + run_later(t);
    n += flush_blocked(t, &blocked);
    /* The side channels carry rare events (re-arm, BYE, a peer gone): looked at when idle, and
     * at least every millisecond when busy, so a busy loop makes no syscall per call. */
    if (n == 0 || lite_now_ns() - t->events_at > 1000000)
        n += wait_events(t, 0);
    if (n) {
        t->active_ns = t->events_at;
        return n;
    }
    if (t->events_at - t->active_ns > 5000000000ll)
        lite_rdma_link_stall(t);
    if (timeout_ms == 0)
        return n;
    /* Nothing to do: sleep until a completion or a side-channel frame. A sender waiting for a
     * window report polls its mailbox (an RDMA write raises no event), so it naps 1 ms. */
    for (int d = 0; d < t->ndevs; d++) {
        if (t->devs[d].cq && !t->devs[d].armed && ibv_req_notify_cq(t->devs[d].cq, 0) == 0)
            t->devs[d].armed = true;
    }
    n = lite_rdma_poll_cqs(t); /* what arrived before the arming */
    if (!n)
        n = wait_events(t, blocked ? 1 : timeout_ms);
    n += lite_rdma_poll_cqs(t);
    return n + flush_blocked(t, &blocked);
}

/* ---- setup and teardown ---- */

static void rdma_close(struct lite_transport *t);

static int cq_create(struct lite_transport *t, char *why, size_t why_len)
{
    uint32_t rx = lite_rdma_recv_depth(t->credits);
    for (int d = 0; d < t->ndevs; d++) {
        uint64_t rails_here = 0;
        for (uint32_t r = 0; r < t->nrails; r++)
            rails_here += t->rails[r].dev == d;
        uint64_t per_peer = rails_here * (t->sq_depth + t->imm_depth + 2);
        if (t->rails[0].dev == d)
            per_peer += t->tx_depth + rx;
        uint64_t need = per_peer * (uint64_t)(t->world - 1) + 64;
        if (need > (uint64_t)t->devs[d].max_cqe) {
            lite_fmt(why, why_len,
                     "rdma: %s can queue %d completions, %llu are needed for %d "
                     "peers; lower LITETX_RDMA_SQ_DEPTH / LITETX_RDMA_IMM_DEPTH / "
                     "LITETX_RDMA_TX_DEPTH / LITETX_CREDITS",
                     t->devs[d].name, t->devs[d].max_cqe, (unsigned long long)need, t->world - 1);
            return -ENOSPC;
        }
        t->devs[d].cq = ibv_create_cq(t->devs[d].ctx, (int)need, NULL, t->devs[d].ch, 0);
        if (!t->devs[d].cq) {
            int rc = lite_rdma_errno(errno);
            lite_fmt(why, why_len, "rdma: cannot create a completion queue on %s: %s",
                     t->devs[d].name, strerror(-rc));
            return rc;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)EP_DEV << 32 | d};
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->devs[d].ch->fd, &ev);
    }
    return 0;
}

/* For tests: LITETX_RDMA_TEST_QP_ERROR=N[:K] (force the message QP into the error state after
 * every N SENDs, K times; K defaults to 1) and LITETX_RDMA_TEST_RESUME=0 (this rank never
 * re-establishes a link: its peer's budget runs out). */
static int test_hooks(struct lite_transport *t)
{
    t->test_qp_errors = 1;
    const char *v = lite_tp_str(t->env, "LITETX_RDMA_TEST_QP_ERROR");
    if (v && *v) {
        char *end;
        unsigned long n = strtoul(v, &end, 10), k = 1;
        if (*end == ':')
            k = strtoul(end + 1, &end, 10);
        if (*end || n > UINT32_MAX || k == 0 || k > UINT32_MAX) {
            LITE_ERROR("rdma: LITETX_RDMA_TEST_QP_ERROR=\"%s\": want N or N:K", v);
            return -LITE_ERR_CONFIG;
        }
        t->test_qp_error = (uint32_t)n;
        t->test_qp_errors = (uint32_t)k;
    }
    t->test_no_resume = lite_rdma_env_u32(t, "LITETX_RDMA_TEST_RESUME", 1) == 0;
    return 0;
}

static int rdma_open(const struct lite_transport_params *p, struct lite_transport **out)
{
    int rc;
    struct lite_transport *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->rank = p->rank;
    t->world = p->world_size;
    t->core = p->core;
    t->up = p->up;
    t->listen_fd = -1;
    t->env = p->env;
    lite_tp_env_attach(p->env);
    t->port_base = (long)lite_tp_num(p->env, "LITETX_RDMA_PORT", 0);
    /* Receive windows follow the core's flow control (credits and eager size). */
    bool has_flow = p->size >= offsetof(struct lite_transport_params, rndv_threshold) +
                                   sizeof(p->rndv_threshold);
    t->credits = has_flow ? p->credits : 64;
    uint32_t rndv = has_flow ? (uint32_t)p->rndv_threshold : 65536;
    t->tx_depth = lite_rdma_env_u32(t, "LITETX_RDMA_TX_DEPTH", RDMA_TX_DEPTH);
    /* Each peer gets (receive depth + send depth) registered slots: 64 KiB slots are ~6 MiB
     * per peer, which a job of a few dozen ranks per host cannot pay (a 2 GiB VM holds 16
     * ranks). Past RDMA_SLOT_BUDGET in all, slots shrink (down to RDMA_MIN_SLOT); a message
     * larger than a slot goes in pieces (FIRST + CONT frames) as before. */
    uint32_t slot = rndv < RDMA_MAX_SLOT ? rndv : RDMA_MAX_SLOT;
    uint64_t per_peer_slots = (uint64_t)lite_rdma_recv_depth(t->credits) + t->tx_depth;
    if (t->world > 1) {
        uint64_t fit = RDMA_SLOT_BUDGET / ((uint64_t)(t->world - 1) * per_peer_slots);
        fit = fit > LITE_RDMA_FIRST_HDR ? (fit - LITE_RDMA_FIRST_HDR) & ~63ull : 0;
        if (fit < slot)
            slot = fit > RDMA_MIN_SLOT ? (uint32_t)fit : RDMA_MIN_SLOT;
    }
    t->slot_payload = lite_rdma_env_u32(t, "LITETX_RDMA_SLOT", slot);
    t->sq_depth = lite_rdma_env_u32(t, "LITETX_RDMA_SQ_DEPTH", RDMA_SQ_DEPTH);
    t->imm_depth = lite_rdma_env_u32(t, "LITETX_RDMA_IMM_DEPTH", RDMA_IMM_DEPTH);
    t->stripe_min = lite_rdma_env_u32(t, "LITETX_RDMA_STRIPE_MIN", RDMA_STRIPE_MIN);
    t->rnr_retry = (int)lite_rdma_env_u32(t, "LITETX_RDMA_RNR_RETRY", 0);
    t->timeout = (uint8_t)lite_rdma_env_u32(t, "LITETX_RDMA_TIMEOUT", 14);
    t->reg_cache = lite_rdma_env_u32(t, "LITETX_RDMA_REG_CACHE", 0);
    t->post_budget = lite_rdma_env_u32(t, "LITETX_RDMA_POST_BUDGET", RDMA_POST_BUDGET);
    rc = test_hooks(t);
    t->reconnect_ms = 10000;
    if (p->size > offsetof(struct lite_transport_params, reconnect_timeout_ms) &&
        p->reconnect_timeout_ms >= 0)
        t->reconnect_ms = p->reconnect_timeout_ms;
    t->budget = t->post_budget;
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->conns = calloc((size_t)t->world, sizeof(*t->conns));
    char why[768] = "";
    if (!rc)
        rc = t->epfd < 0 ? -errno : !t->conns ? -ENOMEM : 0;
    for (int i = 0; !rc && i < t->world; i++) {
        t->conns[i].peer = i;
        t->conns[i].fd = -1;
    }
    if (!rc)
        rc = lite_rdma_rails_open(t, p->bind_host, why, sizeof(why));
    if (!rc)
        rc = cq_create(t, why, sizeof(why));
    if (!rc) {
        size_t mb = (size_t)t->world * LITE_RDMA_MBOX_ROW * sizeof(uint64_t);
        void *m = NULL;
        if (posix_memalign(&m, 4096, mb) != 0) {
            rc = -ENOMEM;
        } else {
            memset(m, 0, mb);
            t->mbox = m;
        }
    }
    if (!rc)
        rc = lite_rdma_sc_listen(t, p->bind_host, why, sizeof(why));
    if (!rc && lite_rdma_cm_wanted(t)) {
        t->use_cm = true;
        rc = lite_rdma_cm_open(t, why, sizeof(why));
    }
    t->env = NULL; /* valid during open only */
    if (rc) {
        LITE_ERROR("rdma rank %d: %s", t->rank, why[0] ? why : lite_strerror(rc));
        rdma_close(t);
        return rc;
    }
    *out = t;
    return 0;
}

static int rdma_addr_get(struct lite_transport *t, void *blob, size_t *len)
{
    return lite_rdma_addr_get(t, blob, len);
}

static int rdma_connect_all(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                            int64_t deadline, char *why, size_t why_len)
{
    int rc = lite_rdma_sc_connect_all(t, blobs, lens, deadline, why, why_len);
    if (rc)
        return rc;
    /* every pair is connected: nobody else may come to the listener */
    close(t->listen_fd);
    t->listen_fd = -1;
    for (int p = 0; p < t->world; p++) {
        struct lite_rdma_conn *c = &t->conns[p];
        if (p == t->rank)
            continue;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)EP_CONN << 32 | p};
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, c->fd, &ev);
        lite_fmt(c->desc, sizeof(c->desc), "rank %d", p);
    }
    return 0;
}

/* Orderly close: drain what is queued, make sure our last SENDs were received (a signalled
 * fence behind them), say BYE, and keep our QPs until every peer has done the same, so no
 * peer's last message meets a destroyed QP. */
static void drain(struct lite_transport *t)
{
    int64_t deadline = lite_deadline_ns(RDMA_CLOSE_MS);
    for (int iter = 0; iter < 100000 && lite_now_ns() < deadline; iter++) {
        bool busy = false;
        for (int p = 0; p < t->world; p++) {
            struct lite_rdma_conn *c = &t->conns[p];
            /* a link being re-established is waited for too (within the close deadline) */
            busy |= ((c->state == CONN_UP && (c->pend || c->wait || c->live)) ||
                     c->state == CONN_BROKEN || c->state == CONN_READY);
        }
        if (!busy)
            break;
        rdma_progress(t, 1);
    }
    for (int p = 0; p < t->world; p++) {
        struct lite_rdma_conn *c = &t->conns[p];
        if (c->state != CONN_UP || !c->msg)
            continue;
        uint64_t word = lite_rdma_mbox_pack(c->msg->epoch, c->msg_rx.reported);
        int rc = lite_rdma_post_word(t, c, c->peer_mbox, word, WR_FENCE, true);
        /* -EAGAIN: the queue is full, so its last WR is signalled already */
        if (rc && rc != -EAGAIN)
            lite_rdma_conn_fail(t, c, -LITE_ERR_PEER_LOST, "closing");
    }
    for (int iter = 0; iter < 100000 && lite_now_ns() < deadline; iter++) {
        bool busy = false;
        for (int p = 0; p < t->world; p++) {
            struct lite_rdma_conn *c = &t->conns[p];
            busy |= c->state == CONN_UP && c->msg && c->msg->sq_tail != c->msg->sq_head;
        }
        if (!busy)
            break;
        rdma_progress(t, 1);
    }
    for (int p = 0; p < t->world; p++)
        if (t->conns[p].state == CONN_UP &&
            lite_rdma_sc_send(&t->conns[p], SC_BYE, 0, NULL, 0) != 0)
            lite_rdma_conn_fail(t, &t->conns[p], -LITE_ERR_PEER_LOST, "closing");
    for (int iter = 0; iter < 100000 && lite_now_ns() < deadline; iter++) {
        bool busy = false;
        for (int p = 0; p < t->world; p++)
            busy |= t->conns[p].state == CONN_UP && !t->conns[p].bye;
        if (!busy)
            break;
        rdma_progress(t, 5);
    }
}

static void rdma_close(struct lite_transport *t)
{
    if (!t)
        return;
    /* peers that leave while we drain are expected: no peer_failed upcalls from here on */
    t->closing = true;
    if (t->conns && t->epfd >= 0)
        drain(t);
    for (int p = 0; t->conns && p < t->world; p++) {
        struct lite_rdma_conn *c = &t->conns[p];
        lite_rdma_conn_fail(t, c, -LITE_ERR_CANCELLED, "transport closed");
    }
    run_later(t);
    lite_rdma_cm_close(t);
    for (uint32_t i = 0; i < t->nqps; i++)
        if (t->qps[i])
            lite_rdma_qp_destroy(t, t->qps[i]);
    free(t->qps);
    for (int p = 0; t->conns && p < t->world; p++) {
        struct lite_rdma_conn *c = &t->conns[p];
        if (c->slots_mr)
            ibv_dereg_mr(c->slots_mr);
        if (c->mbox_mr)
            ibv_dereg_mr(c->mbox_mr);
        free(c->slots);
    }
    lite_rdma_mr_fini(t);
    free((void *)t->mbox);
    lite_rdma_rails_close(t);
    if (t->listen_fd >= 0)
        close(t->listen_fd);
    if (t->epfd >= 0)
        close(t->epfd);
    free(t->conns);
    free(t);
}

static int rdma_mr_reg(struct lite_transport *t, const struct lite_tp_mr *mr,
                       struct lite_tp_mr_keys *keys)
{
    return lite_rdma_mr_reg(t, mr, keys);
}

static int rdma_mr_dereg(struct lite_transport *t, void *handle)
{
    return lite_rdma_mr_dereg(t, handle);
}

#ifdef LITE_RDMA_CUDA
#define RDMA_CAPS_GPU LITE_CAP_DEVICE_MEM
#else
#define RDMA_CAPS_GPU 0
#endif

/* The variables this backend reads (litetx-info --config; docs/CONFIG.md). */
#define B LITE_TUN_BACKEND
static const struct lite_tunable rdma_tunables[] = {
    {"LITETX_RDMA_DEVICES", "auto", "auto or dev[:port],... (a device may repeat)", LITE_TUN_STRING,
     B, 0, 0, NULL},
    {"LITETX_RDMA_GID_INDEX", "chosen", "GID index for every rail, or N,M,... per rail",
     LITE_TUN_STRING, B, 0, 0, NULL},
    {"LITETX_RDMA_PORT", "any free port", "side channel: rank r listens on this TCP port + r",
     LITE_TUN_INT, B, 1, 65535, NULL},
    {"LITETX_RDMA_SLOT", "min(rndv, 64 KiB)", "receive slot payload bytes (smaller past 9 ranks)",
     LITE_TUN_SIZE, B, 256, 16 << 20, NULL},
    {"LITETX_RDMA_TX_DEPTH", "32", "SENDs in flight per peer", LITE_TUN_SIZE, B, 4, 4096, NULL},
    {"LITETX_RDMA_SQ_DEPTH", "128", "one-sided WRs in flight per peer and rail", LITE_TUN_SIZE, B,
     8, 16384, NULL},
    {"LITETX_RDMA_IMM_DEPTH", "128", "immediates in flight per peer and rail", LITE_TUN_SIZE, B, 4,
     16384, NULL},
    {"LITETX_RDMA_STRIPE_MIN", "262144", "smallest stripe per rail (bytes)", LITE_TUN_SIZE, B, 4096,
     1 << 30, NULL},
    {"LITETX_RDMA_POST_BUDGET", "262144", "message bytes one progress call posts at most",
     LITE_TUN_SIZE, B, 4096, 1 << 30, NULL},
    {"LITETX_RDMA_REG_CACHE", "0", "temporary send-buffer registrations kept (0: off)",
     LITE_TUN_SIZE, B, 0, 4096, NULL},
    {"LITETX_RDMA_TIMEOUT", "14", "RC ACK timeout exponent (4.096 us x 2^n)", LITE_TUN_SIZE, B, 1,
     31, NULL},
    {"LITETX_RDMA_RNR_RETRY", "0", "RNR retries (0: an RNR NAK is an error)", LITE_TUN_SIZE, B, 0,
     7, NULL},
    {"LITETX_RDMA_CM", "0", "1: connect the queue pairs through librdmacm (rdma_cm)", LITE_TUN_BOOL,
     B, 0, 1, NULL},
    {"LITETX_RDMA_TEST_QP_ERROR", "0",
     "for tests: N[:K]: force the message QP into the error state every N SENDs, K times",
     LITE_TUN_STRING, B, 0, 0, NULL},
    {"LITETX_RDMA_TEST_RESUME", "1", "for tests: 0: this rank never re-establishes a link",
     LITE_TUN_BOOL, B, 0, 1, NULL},
    {NULL, NULL, NULL, 0, 0, 0, 0, NULL},
};
#undef B

static int rdma_peer_stats(struct lite_transport *t, int peer, uint64_t *breaks, uint64_t *resumes)
{
    if (peer < 0 || peer >= t->world)
        return -EINVAL;
    *breaks = t->conns[peer].breaks;
    *resumes = t->conns[peer].resumes;
    return 0;
}

const struct lite_transport_ops lite_rdma_ops = {
    .size = sizeof(struct lite_transport_ops),
    .abi_version = LITE_TRANSPORT_ABI_VERSION,
    .name = "rdma",
    .caps =
        LITE_CAP_WRITE | LITE_CAP_WRITE_IMM | LITE_CAP_READ | LITE_CAP_MULTI_RAIL | RDMA_CAPS_GPU,
    .probe = lite_rdma_probe,
    .open = rdma_open,
    .close = rdma_close,
    .addr_get = rdma_addr_get,
    .connect_all = rdma_connect_all,
    .msg_send = lite_rdma_msg_send,
    .progress = rdma_progress,
    .mr_reg = rdma_mr_reg,
    .mr_dereg = rdma_mr_dereg,
    .rma_post = lite_rdma_rma_post,
    .tunables = rdma_tunables,
    .peer_stats = rdma_peer_stats,
};
