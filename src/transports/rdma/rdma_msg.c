/*
 * rdma_msg.c - messages: each is copied into a registered send slot behind a small header and
 * posted as SENDs (inline when tiny) into receive slots the peer pre-posted, one fragment per
 * slot; the receiver copies the payload where the core says and posts the slot again. A sender
 * posts only into receives it knows exist (struct lite_rdma_window), learning of reposted ones
 * from its mailbox, which the receiver writes with an RDMA write. Completions of SENDs are
 * signalled every quarter of the send queue only: they just free send slots.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transports/rdma/rdma_int.h"

static uint8_t *tx_slot(struct lite_rdma_conn *c, uint32_t slot)
{
    return c->slots + (size_t)(c->rx_depth + slot) * c->slot_bytes;
}

/* Largest SEND the peer can take (its slot) that also fits ours. */
static uint32_t frag_bytes(const struct lite_rdma_conn *c)
{
    return c->peer_slot_bytes < c->slot_bytes ? c->peer_slot_bytes : c->slot_bytes;
}

/* LITETX_RDMA_TEST_QP_ERROR=N[:K]: after every N SENDs (K times), force the message QP into
 * the error state, as a NIC or link failure would. */
static void test_qp_error(struct lite_transport *t, struct lite_rdma_conn *c)
{
    if (!t->test_qp_error || ++t->sends % t->test_qp_error != 0 ||
        t->sends / t->test_qp_error > t->test_qp_errors)
        return;
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    LITE_WARN("rdma rank %d: LITETX_RDMA_TEST_QP_ERROR=%u: the message queue pair to rank %d is "
              "forced into the error state (a test)",
              t->rank, t->test_qp_error, c->peer);
    ibv_modify_qp(c->msg->qp, &a, IBV_QP_STATE);
}

/* Post a frame copied before a break again, with its number; false when there is no room. */
static bool post_copy(struct lite_transport *t, struct lite_rdma_conn *c,
                      const struct lite_rdma_frame_copy *f, int *rc)
{
    struct lite_rdma_qp *q = c->msg;
    uint32_t every = q->sq_depth / 4 ? q->sq_depth / 4 : 1;
    *rc = 0;
    if (lite_rdma_sq_room(q) == 0 || lite_rdma_window_avail(&c->msg_win) == 0)
        return false;
    uint8_t *b = tx_slot(c, (uint32_t)(q->sq_head % q->sq_depth));
    memcpy(b, f->b, f->len);
    struct ibv_sge sge = {.addr = (uintptr_t)b, .length = f->len, .lkey = c->slots_mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND};
    if (f->len <= q->max_inline)
        wr.send_flags = IBV_SEND_INLINE;
    *rc = lite_rdma_post_sq(t, q, &wr, WR_SEND, (q->sq_head + 1) % every == 0, NULL, 0);
    if (*rc)
        return false;
    lite_rdma_window_take(&c->msg_win, 1);
    struct lite_rdma_sqrec *rec = &q->rec[(q->sq_head - 1) % q->sq_depth];
    rec->len = f->len;
    rec->seq = f->seq;
    test_qp_error(t, c);
    return true;
}

/* Post as many fragments of m as the window and send queue allow; true when all are posted. */
static bool post_frags(struct lite_transport *t, struct lite_rdma_conn *c, struct lite_rdma_pend *m,
                       int *rc)
{
    struct lite_rdma_qp *q = c->msg;
    uint32_t every = q->sq_depth / 4 ? q->sq_depth / 4 : 1;
    *rc = 0;
    while (!m->started || m->done < m->hdr.len) {
        if (lite_rdma_sq_room(q) == 0 || lite_rdma_window_avail(&c->msg_win) == 0 || t->budget == 0)
            return false;
        uint32_t slot = (uint32_t)(q->sq_head % q->sq_depth);
        uint8_t *b = tx_slot(c, slot);
        struct lite_rdma_frame f = {.type =
                                        m->started ? LITE_RDMA_FRAME_CONT : LITE_RDMA_FRAME_FIRST,
                                    .channel = m->hdr.channel,
                                    .flags = m->hdr.flags,
                                    .credits = m->hdr.credits,
                                    .tag = m->hdr.tag,
                                    .len = m->hdr.len};
        size_t h = lite_rdma_frame_encode(&f, b);
        uint64_t n = m->hdr.len - m->done;
        if (n > frag_bytes(c) - h)
            n = frag_bytes(c) - h;
        if (n)
            memcpy(b + h, m->payload + m->done, (size_t)n);
        struct ibv_sge sge = {
            .addr = (uintptr_t)b, .length = (uint32_t)(h + n), .lkey = c->slots_mr->lkey};
        struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND};
        if (h + n <= q->max_inline)
            wr.send_flags = IBV_SEND_INLINE;
        bool sig = (q->sq_head + 1) % every == 0;
        int err = lite_rdma_post_sq(t, q, &wr, WR_SEND, sig, NULL, 0);
        if (err) {
            *rc = err;
            return false;
        }
        lite_rdma_window_take(&c->msg_win, 1);
        struct lite_rdma_sqrec *rec = &q->rec[(q->sq_head - 1) % q->sq_depth];
        rec->len = (uint32_t)(h + n);
        rec->seq = c->tx_seq++;
        test_qp_error(t, c);
        m->started = true;
        m->done += n;
        t->budget = t->budget > h + n ? t->budget - (h + n) : 0;
    }
    return true;
}

int lite_rdma_msg_send(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                       const void *payload, void *op)
{
    if (peer < 0 || peer >= t->world || peer == t->rank)
        return -EINVAL;
    struct lite_rdma_conn *c = &t->conns[peer];
    if (c->state == CONN_DEAD || c->state == CONN_NONE)
        return -LITE_ERR_PEER_LOST;
    struct lite_rdma_pend m = {.hdr = *hdr, .payload = payload, .op = op};
    int rc = 0;
    /* a broken link queues the message: it goes once the link is resumed */
    if (lite_rdma_link_ok(c) && !c->pend && !c->replay && post_frags(t, c, &m, &rc)) {
        /* every byte is in a send slot: the caller's buffer is free now */
        t->up->send_done(t->core, op, 0);
        return 0;
    }
    if (rc && !m.started)
        return rc; /* nothing left: the caller keeps the message */
    /* Queued (waiting for room), or half posted when a post failed: listed either way, so the
     * connection's failure completes it (lite_rdma_msg_fail). */
    struct lite_rdma_pend *p = malloc(sizeof(*p));
    if (!p) {
        if (!m.started)
            return -ENOMEM;
        lite_rdma_later(t, op, -LITE_ERR_PEER_LOST);
        lite_rdma_conn_fail(t, c, -ENOMEM, "out of memory for a message");
        return 0;
    }
    *p = m;
    p->next = NULL;
    if (c->pend_tail)
        c->pend_tail->next = p;
    else
        c->pend = p;
    c->pend_tail = p;
    if (rc)
        lite_rdma_link_break(t, c, "posting a message failed");
    return 0;
}

/* Read the window reports the peer wrote into our mailbox. */
static int read_mailbox(struct lite_transport *t, struct lite_rdma_conn *c)
{
    const volatile uint64_t *mb = t->mbox + (size_t)c->peer * LITE_RDMA_MBOX_ROW;
    uint64_t w = __atomic_load_n(&mb[0], __ATOMIC_ACQUIRE);
    int grew = 0, rc = 0;
    if (w && lite_rdma_mbox_epoch(w) == c->msg->epoch)
        rc = lite_rdma_window_grant(&c->msg_win, lite_rdma_mbox_count(w));
    grew += rc > 0;
    for (uint32_t r = 0; rc >= 0 && r < c->nrails; r++) {
        w = __atomic_load_n(&mb[1 + r], __ATOMIC_ACQUIRE);
        if (w && lite_rdma_mbox_epoch(w) == c->out[r]->epoch)
            rc = lite_rdma_window_grant(&c->imm_win[r], lite_rdma_mbox_count(w));
        grew += rc > 0;
    }
    if (rc < 0) {
        lite_rdma_conn_fail(t, c, -LITE_ERR_PROTOCOL,
                            "the peer reported more reposted receives than were consumed");
        return 0;
    }
    return grew;
}

int lite_rdma_post_word(struct lite_transport *t, struct lite_rdma_conn *c, uint64_t remote_addr,
                        uint64_t word, uint8_t type, bool signal)
{
    struct lite_rdma_qp *q = c->msg;
    if (lite_rdma_sq_room(q) == 0)
        return -EAGAIN;
    uint8_t *b = tx_slot(c, (uint32_t)(q->sq_head % q->sq_depth));
    memcpy(b, &word, 8);
    struct ibv_sge sge = {.addr = (uintptr_t)b, .length = 8, .lkey = c->slots_mr->lkey};
    struct ibv_send_wr wr = {
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_RDMA_WRITE,
        .wr = {.rdma = {.remote_addr = remote_addr, .rkey = c->peer_mbox_rkey}}};
    if (8 <= q->max_inline)
        wr.send_flags = IBV_SEND_INLINE;
    return lite_rdma_post_sq(t, q, &wr, type, signal, NULL, 0);
}

/* One window report: our cumulative repost count for window k into the peer's mailbox. */
static bool post_report(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t k,
                        uint64_t word)
{
    struct lite_rdma_qp *q = c->msg;
    uint32_t every = q->sq_depth / 4 ? q->sq_depth / 4 : 1;
    int err = lite_rdma_post_word(t, c, c->peer_mbox + 8ull * k, word, WR_CREDIT,
                                  (q->sq_head + 1) % every == 0);
    if (err == -EAGAIN)
        return false;
    if (err) {
        lite_rdma_link_break(t, c, "posting a window report failed");
        return false;
    }
    return true;
}

void lite_rdma_report(struct lite_transport *t, struct lite_rdma_conn *c, bool force)
{
    /* Not while the link is being re-established (the peer's QPs may not be connected yet):
     * from the next progress once it is up. */
    if (!lite_rdma_link_ok(c)) {
        c->report_due = c->state != CONN_DEAD;
        return;
    }
    c->report_due = false;
    struct lite_rdma_rxacct *a = &c->msg_rx;
    if (lite_rdma_rxacct_due(a) || (force && a->reposted != a->reported)) {
        uint64_t word = lite_rdma_mbox_pack(c->msg->epoch, a->reposted);
        if (post_report(t, c, 0, word))
            lite_rdma_rxacct_report(a);
        else
            c->report_due = true;
    }
    for (uint32_t r = 0; r < c->nrails && lite_rdma_link_ok(c); r++) {
        a = &c->imm_rx[r];
        if (!(lite_rdma_rxacct_due(a) || (force && a->reposted != a->reported)))
            continue;
        uint64_t word = lite_rdma_mbox_pack(c->in[r]->epoch, a->reposted);
        if (post_report(t, c, 1 + r, word))
            lite_rdma_rxacct_report(a);
        else
            c->report_due = true;
    }
}

int lite_rdma_msg_flush(struct lite_transport *t, struct lite_rdma_conn *c)
{
    if (!lite_rdma_link_ok(c))
        return 0;
    int n = 0;
    if (c->pend || c->wait || c->replay)
        n += read_mailbox(t, c);
    /* frames the peer had not applied at a break: first, in their order */
    while (c->replay && lite_rdma_link_ok(c)) {
        int rc;
        if (!post_copy(t, c, c->replay, &rc)) {
            if (rc)
                lite_rdma_link_break(t, c, "posting a message failed");
            break;
        }
        struct lite_rdma_frame_copy *f = c->replay;
        c->replay = f->next;
        free(f);
        n++;
    }
    while (c->pend && !c->replay && lite_rdma_link_ok(c)) {
        struct lite_rdma_pend *m = c->pend;
        int rc;
        if (!post_frags(t, c, m, &rc)) {
            if (rc)
                lite_rdma_link_break(t, c, "posting a message failed");
            break;
        }
        c->pend = m->next;
        if (!c->pend)
            c->pend_tail = NULL;
        void *op = m->op;
        free(m);
        t->up->send_done(t->core, op, 0);
        n++;
    }
    if (c->report_due && lite_rdma_link_ok(c))
        lite_rdma_report(t, c, false);
    return n;
}

static void protocol_error(struct lite_transport *t, struct lite_rdma_conn *c, const char *why)
{
    char w[128];
    lite_fmt(w, sizeof(w), "bad message from rank %d: %s", c->peer, why);
    LITE_ERROR("rdma rank %d: %s; dropping the connection", t->rank, w);
    lite_rdma_conn_fail(t, c, -LITE_ERR_PROTOCOL, w);
}

void lite_rdma_msg_recv(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t slot,
                        uint32_t len)
{
    lite_rdma_rxacct_consume(&c->msg_rx);
    const uint8_t *b = c->slots + (size_t)slot * c->slot_bytes;
    struct lite_rdma_frame f;
    const char *why = "";
    int h = len <= c->slot_bytes ? lite_rdma_frame_decode(b, len, &f, &why) : -EPROTO;
    if (h < 0) {
        protocol_error(t, c, len > c->slot_bytes ? "SEND larger than a receive slot" : why);
        return;
    }
    uint64_t n = len - (uint32_t)h;
    bool complete = false;
    c->rx_applied++; /* this frame is applied below (or the link ends): never replayed to us */
    if (f.type == LITE_RDMA_FRAME_FIRST) {
        if (c->rx_active) {
            protocol_error(t, c, "a new message before the previous one ended");
            return;
        }
        struct lite_msg_hdr mh = {.tag = f.tag,
                                  .len = f.len,
                                  .channel = f.channel,
                                  .flags = f.flags,
                                  .credits = f.credits};
        void *dst = NULL, *token = NULL;
        int rc = t->up->recv_begin(t->core, c->peer, &mh, &dst, &token);
        if (rc < 0) {
            char w[96];
            lite_fmt(w, sizeof(w), "message from rank %d refused: %s", c->peer, lite_strerror(rc));
            lite_rdma_conn_fail(t, c, rc, w);
            return;
        }
        c->rx_dst = dst;
        c->rx_left = f.len;
        c->rx_token = token;
        c->rx_active = true;
    } else if (!c->rx_active || n > c->rx_left || n == 0) {
        protocol_error(t, c, "unexpected continuation fragment");
        return;
    }
    if (n && c->rx_dst) {
        memcpy(c->rx_dst, b + h, (size_t)n);
        c->rx_dst += n;
    }
    c->rx_left -= n;
    if (c->rx_left == 0) {
        c->rx_active = false;
        complete = true;
    }
    /* The slot is free again: post it before the core reacts (it may send at once). A broken
     * link's QP is reset with every slot posted again instead. */
    if (!c->brk && c->state != CONN_BROKEN) {
        int rc = lite_rdma_post_recv_msg(t, c, slot);
        if (rc) {
            lite_rdma_link_break(t, c, "reposting a receive failed");
        } else {
            lite_rdma_rxacct_repost(&c->msg_rx);
            if (lite_rdma_rxacct_due(&c->msg_rx))
                lite_rdma_report(t, c, false);
        }
    }
    if (complete)
        t->up->recv_end(t->core, c->peer, c->rx_token);
}

void lite_rdma_msg_fail(struct lite_transport *t, struct lite_rdma_conn *c, int code)
{
    while (c->pend) {
        struct lite_rdma_pend *m = c->pend;
        c->pend = m->next;
        void *op = m->op;
        free(m);
        t->up->send_done(t->core, op, code);
    }
    c->pend_tail = NULL;
    c->rx_active = false;
}
