/*
 * rdma_credit.c - receive-window accounting, the SEND frame header, and the decode of the
 * side channel's resumption messages (RESUME, RESUMED).
 *
 * A SEND (or an RDMA write with immediate) that reaches a queue pair with no posted receive is
 * answered "receiver not ready" and retried by the NIC: slow, and with rnr_retry 0 (what this
 * backend sets) a hard error. So a sender posts only into receives it knows are posted: the
 * receiver pre-posts `depth` of them and reports its cumulative repost count by an RDMA write
 * into the sender's mailbox (no receive consumed), once a quarter of the window is due.
 */
#include <errno.h>

#include "tp_support.h" /* wire-field helpers */
#include "transports/rdma/rdma_logic.h"

void lite_rdma_window_init(struct lite_rdma_window *w, uint32_t depth)
{
    w->depth = depth;
    w->used = 0;
    w->granted = depth;
}

uint64_t lite_rdma_window_avail(const struct lite_rdma_window *w)
{
    return w->granted > w->used ? w->granted - w->used : 0;
}

bool lite_rdma_window_take(struct lite_rdma_window *w, uint32_t n)
{
    if (lite_rdma_window_avail(w) < n)
        return false;
    w->used += n;
    return true;
}

int lite_rdma_window_grant(struct lite_rdma_window *w, uint64_t total)
{
    /* The peer cannot have reposted more receives than this side has consumed. */
    if (total > w->used)
        return -EPROTO;
    uint64_t g = (uint64_t)w->depth + total;
    if (g <= w->granted)
        return 0;
    w->granted = g;
    return 1;
}

void lite_rdma_rxacct_init(struct lite_rdma_rxacct *a, uint32_t depth)
{
    a->depth = depth;
    a->consumed = a->reposted = a->reported = 0;
}

void lite_rdma_rxacct_consume(struct lite_rdma_rxacct *a)
{
    a->consumed++;
}

void lite_rdma_rxacct_repost(struct lite_rdma_rxacct *a)
{
    if (a->reposted < a->consumed)
        a->reposted++;
}

bool lite_rdma_rxacct_due(const struct lite_rdma_rxacct *a)
{
    uint64_t q = a->depth / 4 ? a->depth / 4 : 1;
    return a->reposted - a->reported >= q;
}

uint64_t lite_rdma_rxacct_report(struct lite_rdma_rxacct *a)
{
    a->reported = a->reposted;
    return a->reposted;
}

uint32_t lite_rdma_recv_depth(uint32_t credits)
{
    return credits + LITE_RDMA_CTRL_RESERVE;
}

/* ---- frames ---- */

size_t lite_rdma_frame_encode(const struct lite_rdma_frame *f, uint8_t *out)
{
    for (int i = 0; i < LITE_RDMA_CONT_HDR; i++)
        out[i] = 0;
    out[0] = f->type;
    if (f->type == LITE_RDMA_FRAME_CONT)
        return LITE_RDMA_CONT_HDR;
    out[1] = f->channel;
    out[2] = f->flags;
    lite_put16(out + 4, f->credits);
    lite_put64(out + 8, f->tag);
    lite_put64(out + 16, f->len);
    return LITE_RDMA_FIRST_HDR;
}

int lite_rdma_frame_decode(const uint8_t *in, size_t n, struct lite_rdma_frame *f, const char **why)
{
    if (n < LITE_RDMA_CONT_HDR) {
        *why = "SEND shorter than a frame header";
        return -EPROTO;
    }
    f->type = in[0];
    if (f->type == LITE_RDMA_FRAME_CONT) {
        for (int i = 1; i < LITE_RDMA_CONT_HDR; i++)
            if (in[i]) {
                *why = "non-zero reserved bytes in a continuation header";
                return -EPROTO;
            }
        return LITE_RDMA_CONT_HDR;
    }
    if (f->type != LITE_RDMA_FRAME_FIRST) {
        *why = "unknown frame type";
        return -EPROTO;
    }
    if (n < LITE_RDMA_FIRST_HDR) {
        *why = "SEND shorter than a message header";
        return -EPROTO;
    }
    if (in[3] || in[6] || in[7]) {
        *why = "non-zero reserved bytes in a message header";
        return -EPROTO;
    }
    f->channel = in[1];
    f->flags = in[2];
    f->credits = (uint16_t)(in[4] | in[5] << 8);
    f->tag = lite_get64(in + 8);
    f->len = lite_get64(in + 16);
    if (n - LITE_RDMA_FIRST_HDR > f->len) {
        *why = "SEND carries more bytes than its message";
        return -EPROTO;
    }
    return LITE_RDMA_FIRST_HDR;
}

uint64_t lite_rdma_frag_count(uint64_t len, uint32_t slot)
{
    uint64_t first = slot - LITE_RDMA_FIRST_HDR, cont = slot - LITE_RDMA_CONT_HDR;
    if (len <= first)
        return 1;
    uint64_t rest = len - first;
    return 1 + rest / cont + (rest % cont != 0);
}

/* ---- RESUME / RESUMED ---- */

_Static_assert(LITE_MAX_RAILS <= LITE_RDMA_RESUME_MAX_RAIL, "a RESUME holds every rail");

int lite_rdma_resume_decode(const uint8_t *p, size_t len, uint32_t nrails,
                            struct lite_rdma_resume *m, const char **why)
{
    if (len < LITE_RDMA_RESUME_FIXED) {
        *why = "a RESUME shorter than its fixed part";
        return -LITE_ERR_PROTOCOL;
    }
    uint32_t nr = lite_get32(p + 4);
    /* nr is compared first: the size below cannot overflow */
    if (nr != nrails || nr > LITE_RDMA_RESUME_MAX_RAIL ||
        len != LITE_RDMA_RESUME_FIXED + 8 * (size_t)nr +
                   LITE_RDMA_RESUME_EP_LEN * (1 + 2 * (size_t)nr)) {
        *why = "a RESUME of the wrong size";
        return -LITE_ERR_PROTOCOL;
    }
    m->epoch = lite_get32(p);
    m->nrails = nr;
    m->applied = lite_get64(p + 8);
    for (uint32_t r = 0; r < nr; r++)
        m->imm_applied[r] = lite_get64(p + LITE_RDMA_RESUME_FIXED + 8 * r);
    m->eps = p + LITE_RDMA_RESUME_FIXED + 8 * (size_t)nr;
    return 0;
}

bool lite_rdma_resume_frames_ok(uint64_t applied, uint64_t tx_seq, bool kept, uint64_t kept_seq)
{
    return !(applied > tx_seq || (kept && kept_seq != applied) || (!kept && applied != tx_seq));
}

int lite_rdma_resumed_decode(const uint8_t *p, size_t len, uint32_t *epoch)
{
    if (len != 4)
        return -LITE_ERR_PROTOCOL;
    *epoch = lite_get32(p);
    return 0;
}

int lite_rdma_resumed_check(bool ready, bool retry, uint32_t link_epoch, uint32_t epoch)
{
    if (ready && retry)
        return 0; /* our QPs could not be connected: the next progress breaks the link again */
    if (ready && epoch == link_epoch)
        return 1;
    if (epoch >= link_epoch)
        return -LITE_ERR_PROTOCOL;
    return 0; /* for an earlier epoch: late */
}
