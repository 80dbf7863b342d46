/*
 * rdma_link.c - a link that outlives its queue pairs (docs/RDMA.md, "Breaks and resumption").
 *
 * A QP of a pair that goes into the error state (a forced error, a retry count exceeded, a
 * flushed receive while the link is up), or a CM connection closed while the side channel is
 * open, breaks the link but not the pair: the side channel (a TCP connection of the two
 * processes) still stands, so the peer is the same process and the link is re-established:
 *
 *   1. each side moves every QP of the pair to the error state and takes what completed before
 *      (a received SEND is applied, an immediate counted, a completed WR retired), then keeps
 *      what was in flight: the bytes of every SEND frame not known complete (with its number)
 *      and the one-sided WRs of each rail in posting order;
 *   2. it replaces the QPs by new ones (new QP numbers and PSNs, a new epoch that makes the
 *      old QPs' late completions stale), posts every receive again, and sends RESUME: the link
 *      epoch, the number of the peer's SEND frames it applied, the number of the peer's
 *      immediates it counted per rail, and its QPs' ends (lite_rdma_resume_decode reads it);
 *   3. with the peer's RESUME it drops the frames the peer applied, counts the immediates the
 *      peer counted (and the writes before them on that rail, executed in order) as complete,
 *      connects its QPs to the peer's new ends and answers RESUMED;
 *   4. with the peer's RESUMED the link is up: the kept frames are posted again in order before
 *      anything new, then the kept one-sided WRs (a write rewrites the same bytes, a read reads
 *      again, an immediate the peer did not count is sent once more).
 *
 * So every SEND frame is applied once, in order, and an ImmCounter counts each immediate once.
 * A peer whose process is gone closes the side channel (EOF): the link ends at once, never
 * resumed into another process. Past reconnect_timeout_ms the link ends: every pending op fails
 * once with -LITE_ERR_PEER_LOST.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transports/rdma/rdma_int.h"

#define RESUME_FIXED LITE_RDMA_RESUME_FIXED /* u32 epoch | u32 rails | u64 SEND frames applied */
_Static_assert(LITE_RDMA_EP_LEN == LITE_RDMA_RESUME_EP_LEN, "RESUME's QP ends are eps_put's");

void lite_rdma_link_break(struct lite_transport *t, struct lite_rdma_conn *c, const char *why)
{
    if (c->state == CONN_DEAD || c->state == CONN_NONE || c->state == CONN_BROKEN || c->brk)
        return;
    c->brk = true;
    t->link_work = true;
    lite_fmt(c->brk_why, sizeof(c->brk_why), "%s", why);
}

void lite_rdma_link_free(struct lite_rdma_conn *c)
{
    while (c->replay) {
        struct lite_rdma_frame_copy *f = c->replay;
        c->replay = f->next;
        free(f);
    }
    for (uint32_t r = 0; r < LITE_MAX_RAILS; r++) {
        free(c->rma_replay[r].rec);
        c->rma_replay[r] = (struct lite_rdma_replay){0};
    }
}

static int send_resume(struct lite_transport *t, struct lite_rdma_conn *c)
{
    uint8_t p[RESUME_FIXED + 8 * LITE_MAX_RAILS + LITE_RDMA_EP_LEN * (1 + 2 * LITE_MAX_RAILS)];
    lite_put32(p, c->link_epoch);
    lite_put32(p + 4, c->nrails);
    lite_put64(p + 8, c->rx_applied);
    size_t off = RESUME_FIXED;
    for (uint32_t r = 0; r < c->nrails; r++, off += 8)
        lite_put64(p + off, c->imm_applied[r]);
    off += (size_t)lite_rdma_sc_eps_put(t, c, p + off);
    c->attempts++;
    return lite_rdma_sc_send(c, SC_RESUME, 0, p, (uint16_t)off);
}

/* Keep the SEND frames and one-sided WRs in flight on c's QPs (before the ones kept at an
 * earlier break and not posted yet). */
static int keep_in_flight(struct lite_rdma_conn *c)
{
    struct lite_rdma_qp *q = c->msg;
    struct lite_rdma_frame_copy *head = NULL, **tail = &head;
    for (uint64_t i = q->sq_tail; i < q->sq_head; i++) {
        const struct lite_rdma_sqrec *rec = &q->rec[i % q->sq_depth];
        if (rec->type != WR_SEND)
            continue;
        struct lite_rdma_frame_copy *f = malloc(sizeof(*f) + rec->len);
        if (!f) {
            *tail = c->replay;
            c->replay = head;
            return -ENOMEM;
        }
        f->next = NULL;
        f->seq = rec->seq;
        f->len = rec->len;
        memcpy(f->b, c->slots + (size_t)(c->rx_depth + i % q->sq_depth) * c->slot_bytes, rec->len);
        *tail = f;
        tail = &f->next;
    }
    *tail = c->replay;
    c->replay = head;
    for (uint32_t r = 0; r < c->nrails; r++) {
        q = c->out[r];
        struct lite_rdma_replay *rp = &c->rma_replay[r];
        uint32_t n = (uint32_t)(q->sq_head - q->sq_tail), old = rp->n - rp->next;
        if (n == 0)
            continue;
        struct lite_rdma_sqrec *rec = calloc((size_t)n + old, sizeof(*rec));
        if (!rec)
            return -ENOMEM;
        uint32_t k = 0;
        for (uint64_t i = q->sq_tail; i < q->sq_head; i++)
            if (q->rec[i % q->sq_depth].type == WR_RMA)
                rec[k++] = q->rec[i % q->sq_depth];
        for (uint32_t i = rp->next; i < rp->n; i++)
            rec[k++] = rp->rec[i];
        free(rp->rec);
        *rp = (struct lite_rdma_replay){.rec = rec, .n = k, .next = 0};
    }
    return 0;
}

/* Break the link now (from progress): drain, keep, reset, and ask the peer to resume at
 * `epoch`. */
static void break_now(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t epoch)
{
    const char *why = c->brk_why[0] ? c->brk_why : "a queue pair failed";
    bool rearm = false;
    for (uint32_t r = 0; r < c->nrails; r++)
        rearm |= c->rearming[r];
    if (t->reconnect_ms <= 0 || c->bye || c->fd < 0 || rearm) {
        char w[192];
        lite_fmt(w, sizeof(w), "%s%s", why,
                 c->bye      ? ""
                 : rearm     ? " (during a re-arm: not resumed)"
                 : c->fd < 0 ? ""
                             : " (reconnection off: reconnect_timeout_ms is 0)");
        if (!c->bye)
            LITE_WARN("rdma rank %d: link to rank %d broke: %s", t->rank, c->peer, w);
        lite_rdma_conn_fail(t, c, -LITE_ERR_PEER_LOST, w);
        return;
    }
    int64_t now = lite_now_ns();
    if (c->state == CONN_UP) {
        c->down_ns = now;
        c->resume_deadline = now + (int64_t)t->reconnect_ms * 1000000;
        c->breaks++;
        c->attempts = 0;
        LITE_WARN("rdma rank %d: link to rank %d broke (epoch %u): %s; re-establishing it", t->rank,
                  c->peer, c->link_epoch, why);
    }
    c->brk = true; /* while draining: completions applied, errors ignored */
    c->state = CONN_BROKEN;
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    ibv_modify_qp(c->msg->qp, &a, IBV_QP_STATE);
    for (uint32_t r = 0; r < c->nrails; r++) {
        ibv_modify_qp(c->out[r]->qp, &a, IBV_QP_STATE);
        ibv_modify_qp(c->in[r]->qp, &a, IBV_QP_STATE);
    }
    /* The device may still be finishing a WR it had started: take completions until none
     * came for 2 ms (at most 100 ms). One that comes even later is of the old epoch, and
     * on_wc leaves it to the replay. */
    int64_t quiet = now, end = now + 100000000;
    while (c->state == CONN_BROKEN) {
        int64_t at = lite_now_ns();
        if (lite_rdma_poll_cqs(t) > 0)
            quiet = at;
        else if (at - quiet > 2000000 || at > end)
            break;
    }
    if (c->state != CONN_BROKEN)
        return; /* the drain ended the link (a refused message) */
    int rc = keep_in_flight(c);
    if (!rc)
        rc = lite_rdma_qp_renew(t, c->msg);
    for (uint32_t r = 0; !rc && r < c->nrails; r++) {
        rc = lite_rdma_qp_renew(t, c->out[r]);
        if (!rc)
            rc = lite_rdma_qp_renew(t, c->in[r]);
        c->out[r]->link_reset = c->in[r]->link_reset = true;
    }
    for (uint32_t s = 0; !rc && s < c->rx_depth; s++)
        rc = lite_rdma_post_recv_msg(t, c, s);
    lite_rdma_rxacct_init(&c->msg_rx, c->rx_depth);
    for (uint32_t r = 0; !rc && r < c->nrails; r++) {
        rc = lite_rdma_post_recv_imm(t, c->in[r], c->imm_depth);
        lite_rdma_rxacct_init(&c->imm_rx[r], c->imm_depth);
    }
    c->brk = false;
    c->brk_why[0] = 0;
    c->report_due = false;
    c->link_epoch = epoch;
    if (!rc && !t->test_no_resume)
        rc = send_resume(t, c);
    if (rc) {
        char w[160];
        lite_fmt(w, sizeof(w), "cannot re-establish the link: %s", lite_strerror(rc));
        lite_rdma_conn_fail(t, c, -LITE_ERR_PEER_LOST, w);
    }
}

/* The peer applied `applied` of our SEND frames: drop those from the kept ones. */
static int drop_applied_frames(struct lite_rdma_conn *c, uint64_t applied, char *w, size_t wl)
{
    while (c->replay && c->replay->seq < applied) {
        struct lite_rdma_frame_copy *f = c->replay;
        c->replay = f->next;
        free(f);
    }
    if (!lite_rdma_resume_frames_ok(applied, c->tx_seq, c->replay != NULL,
                                    c->replay ? c->replay->seq : 0)) {
        lite_fmt(w, wl,
                 "the peer applied %llu of our %llu message frames, and frames from %llu on are "
                 "kept",
                 (unsigned long long)applied, (unsigned long long)c->tx_seq,
                 (unsigned long long)(c->replay ? c->replay->seq : c->tx_seq));
        return -LITE_ERR_PROTOCOL;
    }
    return 0;
}

/* The peer counted `applied` of our immediates on rail r: the first ones kept were executed,
 * and so were the writes before them (in order on one QP): complete them. Reads stay. */
static int drop_applied_rma(struct lite_transport *t, struct lite_rdma_conn *c, uint32_t r,
                            uint64_t applied, char *w, size_t wl)
{
    struct lite_rdma_replay *rp = &c->rma_replay[r];
    if (applied < c->imm_done[r]) {
        lite_fmt(w, wl, "the peer counted %llu immediates on rail %u, %llu completed here",
                 (unsigned long long)applied, r, (unsigned long long)c->imm_done[r]);
        return -LITE_ERR_PROTOCOL;
    }
    uint64_t k = applied - c->imm_done[r], seen = 0;
    uint32_t end = rp->next;
    for (uint32_t i = rp->next; i < rp->n && seen < k; i++)
        if (lite_rdma_rma_is_imm(rp->rec[i].op, rp->rec[i].piece)) {
            seen++;
            end = i + 1;
        }
    if (seen < k) {
        lite_fmt(w, wl, "the peer counted %llu immediates on rail %u, only %llu were sent",
                 (unsigned long long)applied, r, (unsigned long long)(c->imm_done[r] + seen));
        return -LITE_ERR_PROTOCOL;
    }
    c->imm_done[r] += k;
    if (end == rp->next)
        return 0;
    /* keep the reads before `end` and everything after it; complete the writes before it */
    uint32_t m = rp->next, ndone = 0;
    struct lite_rdma_sqrec *done = malloc((size_t)(end - rp->next) * sizeof(*done));
    if (!done)
        return -ENOMEM;
    for (uint32_t i = rp->next; i < rp->n; i++) {
        struct lite_rdma_sqrec rec = rp->rec[i];
        if (i < end && rec.op->kind != LITE_RMA_READ)
            done[ndone++] = rec;
        else
            rp->rec[m++] = rec;
    }
    rp->n = m;
    for (uint32_t i = 0; i < ndone; i++)
        lite_rdma_rma_piece_done(t, done[i].op, done[i].piece);
    free(done);
    return 0;
}

static int on_resume(struct lite_transport *t, struct lite_rdma_conn *c, const uint8_t *p,
                     uint16_t len, char *w, size_t wl)
{
    struct lite_rdma_resume m;
    const char *bad = "";
    if (lite_rdma_resume_decode(p, len, c->nrails, &m, &bad) < 0) {
        lite_fmt(w, wl, "%s", bad);
        return -LITE_ERR_PROTOCOL;
    }
    uint32_t e = m.epoch, nr = m.nrails;
    if ((c->state == CONN_UP || c->state == CONN_READY) && e == c->link_epoch + 1) {
        if (c->state == CONN_UP)
            lite_fmt(c->brk_why, sizeof(c->brk_why), "rank %d re-establishes the link", c->peer);
        break_now(t, c, e); /* the peer saw the break first: ours now */
        if (c->state != CONN_BROKEN)
            return 0;
    }
    if (c->state != CONN_BROKEN || e != c->link_epoch) {
        lite_fmt(w, wl, "a RESUME for link epoch %u at epoch %u", e, c->link_epoch);
        return -LITE_ERR_PROTOCOL;
    }
    int rc = drop_applied_frames(c, m.applied, w, wl);
    for (uint32_t r = 0; !rc && r < nr; r++)
        rc = drop_applied_rma(t, c, r, m.imm_applied[r], w, wl);
    if (rc)
        return rc;
    if (c->state != CONN_BROKEN)
        return 0; /* completing an op ended the link */
    lite_rdma_window_init(&c->msg_win, c->msg_win.depth);
    for (uint32_t r = 0; r < nr; r++)
        lite_rdma_window_init(&c->imm_win[r], c->imm_win[r].depth);
    rc = lite_rdma_sc_eps_apply(t, c, m.eps);
    if (rc) {
        /* Seen on Soft-RoCE: a QP back in the error state after its reset (the device was
         * still finishing a packet). Break again: the peer, connected and waiting for our
         * RESUMED, gets a RESUME for the next epoch instead (within the budget). */
        LITE_WARN("rdma rank %d: link to rank %d: connecting the queue pairs again failed (%s); "
                  "breaking it again",
                  t->rank, c->peer, lite_strerror(rc));
        c->state = CONN_READY;
        c->brk = true;
        t->link_work = true;
        lite_fmt(c->brk_why, sizeof(c->brk_why), "connecting the queue pairs again failed");
        return 0;
    }
    c->state = CONN_READY;
    uint8_t a[4];
    lite_put32(a, e);
    return lite_rdma_sc_send(c, SC_RESUMED, 0, a, sizeof(a));
}

int lite_rdma_link_frame(struct lite_transport *t, struct lite_rdma_conn *c, uint8_t type,
                         const uint8_t *p, uint16_t len)
{
    if (t->test_no_resume)
        return 0; /* a test: this rank never resumes */
    char w[160] = "";
    int rc = 0;
    uint32_t e = 0;
    if (type == SC_RESUME) {
        rc = on_resume(t, c, p, len, w, sizeof(w));
    } else if ((rc = lite_rdma_resumed_decode(p, len, &e)) < 0) {
        /* rc says it */
    } else if ((rc = lite_rdma_resumed_check(c->state == CONN_READY, c->brk, c->link_epoch, e)) ==
               1) {
        rc = 0;
        c->state = CONN_UP;
        c->resumes++;
        uint64_t nf = 0, nw = 0;
        for (struct lite_rdma_frame_copy *f = c->replay; f; f = f->next)
            nf++;
        for (uint32_t r = 0; r < c->nrails; r++)
            nw += c->rma_replay[r].n - c->rma_replay[r].next;
        LITE_WARN("rdma rank %d: link to rank %d resumed (epoch %u) after %.1f ms and %u "
                  "attempt(s); replaying %llu message frame(s) and %llu one-sided WR(s)",
                  t->rank, c->peer, c->link_epoch, (double)(lite_now_ns() - c->down_ns) / 1e6,
                  c->attempts, (unsigned long long)nf, (unsigned long long)nw);
        t->link_work = true; /* the replay goes from the next progress */
    } else if (rc < 0) {
        lite_fmt(w, sizeof(w), "a RESUMED for link epoch %u at epoch %u", e, c->link_epoch);
    }
    if (rc && c->state != CONN_DEAD) {
        char b[224];
        lite_fmt(b, sizeof(b), "re-establishing the link failed: %s", w[0] ? w : lite_strerror(rc));
        LITE_WARN("rdma rank %d: link to rank %d: %s", t->rank, c->peer, b);
        lite_rdma_conn_fail(t, c, rc == -LITE_ERR_PROTOCOL ? rc : -LITE_ERR_PEER_LOST, b);
    }
    return 0;
}

int lite_rdma_link_run(struct lite_transport *t)
{
    if (!t->link_work)
        return 0;
    int n = 0;
    bool more = false;
    int64_t now = lite_now_ns();
    for (int p = 0; p < t->world; p++) {
        struct lite_rdma_conn *c = &t->conns[p];
        if (c->brk && (c->state == CONN_UP || c->state == CONN_READY)) {
            break_now(t, c, c->link_epoch + 1);
            n++;
        }
        if ((c->state == CONN_BROKEN || c->state == CONN_READY) && now > c->resume_deadline) {
            char w[192];
            lite_fmt(w, sizeof(w),
                     "no resume within reconnect_timeout_ms (%d): %u re-establishment "
                     "attempt(s) in %.0f ms",
                     t->reconnect_ms, c->attempts, (double)(now - c->down_ns) / 1e6);
            LITE_WARN("rdma rank %d: link to rank %d: %s", t->rank, c->peer, w);
            lite_rdma_conn_fail(t, c, -LITE_ERR_PEER_LOST, w);
            n++;
        }
        more |= c->brk || c->state == CONN_BROKEN || c->state == CONN_READY;
    }
    t->link_work = more;
    return n;
}

void lite_rdma_link_stall(struct lite_transport *t)
{
    int64_t now = lite_now_ns();
    if (now - t->stall_ns < 5000000000ll)
        return;
    t->stall_ns = now;
    for (int p = 0; p < t->world; p++) {
        struct lite_rdma_conn *c = &t->conns[p];
        if (c->state == CONN_NONE || c->state == CONN_DEAD || !(c->live || c->pend || c->wait))
            continue;
        unsigned nl = 0, np = 0, nw = 0, nf = 0;
        for (struct lite_rdma_op *o = c->live; o; o = o->next)
            nl++;
        for (struct lite_rdma_pend *m = c->pend; m; m = m->next)
            np++;
        for (struct lite_rdma_op *o = c->wait; o; o = o->wnext)
            nw++;
        for (struct lite_rdma_frame_copy *f = c->replay; f; f = f->next)
            nf++;
        LITE_INFO("rdma rank %d: link to rank %d quiet for 5 s: state %u epoch %u, %u op(s) in "
                  "flight, %u message(s) and %u op(s) queued, %u frame(s) to replay; frames "
                  "sent %llu, applied %llu; message window %llu, imm window %llu; msg sq "
                  "%llu/%llu, out sq %llu/%llu",
                  t->rank, p, c->state, c->link_epoch, nl, np, nw, nf,
                  (unsigned long long)c->tx_seq, (unsigned long long)c->rx_applied,
                  (unsigned long long)lite_rdma_window_avail(&c->msg_win),
                  (unsigned long long)lite_rdma_window_avail(&c->imm_win[0]),
                  (unsigned long long)c->msg->sq_tail, (unsigned long long)c->msg->sq_head,
                  (unsigned long long)c->out[0]->sq_tail, (unsigned long long)c->out[0]->sq_head);
        for (struct lite_rdma_op *o = c->live; o; o = o->next)
            LITE_INFO("rdma rank %d:   op kind %d imm %d pieces %u posted %u left %u status %d",
                      t->rank, o->kind, o->has_imm, o->npieces, o->next_piece, o->left, o->status);
    }
}
