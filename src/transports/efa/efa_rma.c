/*
 * efa_rma.c - one-sided writes, writes with immediate, and reads, natively with fi_writemsg /
 * fi_readmsg.
 *
 * KEYS THE TARGET CONFIRMED. A provider that meets a bad key does not answer well: tcp drops
 * the whole connection to the initiator (messages in flight die with it), shm 1.17 never
 * completes the op. So an initiator never puts a key, address or length on the wire that the
 * target has not confirmed: before its first op on a region of a peer it sends QUERY(core key)
 * and parks the op; the target answers from its own table (QREPLY: status, base, length, access,
 * per-rail keys) and remembers who asked. The initiator then checks range and rights itself and
 * refuses with the target's own verdict (-LITE_ERR_REMOTE_KEY / _BOUNDS / _ACCESS); nothing
 * reaches the target's memory. A hostile peer with its own code is still stopped by the
 * provider's key check (but see WRITER COPY). Cost: one round trip per (peer, region), then
 * nothing.
 *
 * WITHDRAWAL. On deregistration the target tells those who asked (INVAL) and keeps the region
 * open until each answered (efa_mr.c). The initiator drops the key (its next op asks again),
 * fails its stripes into the region that are not yet posted (-LITE_ERR_REMOTE_KEY), and answers
 * (INVAL_ACK) once its ops into the region that are under way are over: after lite_mr_dereg
 * returns, no byte of this peer lands there, whether the provider or the writer copies it.
 * Ops the core marks LITE_RMA_F_TRUSTED (a rendezvous write into the buffer the target announced in
 * its own CTS) skip the question: the target sent those keys itself, for that op.
 *
 * STRIPES. A write (or read) of at least 2 x stripe_min bytes is cut into one stripe per rail
 * (efa_plan.h) and the stripes go out at once. A striped write with an immediate must count
 * ONCE at the target: the stripes go as plain writes and, once all have completed (delivery
 * complete: the data is in place at the target), the immediate follows as an IMM message that
 * the target counts and acknowledges. An unstriped write with an immediate is a single
 * fi_writedata-style op whose remote CQ data carries it (and, with 8 bytes of CQ data, the
 * writer's rank).
 *
 * WRITER COPY (shm). shm copies a delivery-complete write on the target's CPU, inside its
 * progress, and a plain write on the writer's, inside the post. With t->writer_copy a striped
 * write is two stripes: the target's (rail 0, delivery complete) posted first, then the writer's
 * (rail 1, plain), so both CPUs copy at once (docs/EFA.md, Writer copy).
 *
 * Writes ask for FI_DELIVERY_COMPLETE so their completion means what the core's contract says:
 * the data is in place at the target.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "efa.h"

#define STRIPE_ALIGN  4096
#define DC_BATCH_MAX  (256 * 1024) /* writes this large always ask for their own acknowledgement */
#define QREPLY_LEN(n) (32 + 8 * (n))
#define FLUSH_LEN     64 /* bytes of this rank's flush region (peers write 0 bytes to it) */
/* shm completes a plain write of at least this many bytes only once the data is in place: the
 * writer copied it inside the post, or (no CMA between the two) the target processed it (fi_shm(7),
 * Progress: "For larger messages, tx completions are not generated until the receiving side has
 * processed the message"). Below it, a write is copied into shm's queue and completes at once. */
#define SELF_COPY_MIN 4096

_Static_assert(QREPLY_LEN(LITE_MAX_RAILS) <= LITE_EFA_EAGER_MIN,
               "a key confirmation's reply fits the smallest eager payload");

/* ---- the initiator's cache of confirmed regions ---- */

static uint32_t qbucket(uint64_t key)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 58) & (EFA_QBUCKETS - 1);
}

static struct efa_qent *qfind(struct efa_peer *p, uint64_t key)
{
    for (struct efa_qent *q = p->qcache[qbucket(key)]; q; q = q->next)
        if (q->key == key)
            return q;
    return NULL;
}

static void qremove(struct efa_peer *p, struct efa_qent *q)
{
    for (struct efa_qent **pp = &p->qcache[qbucket(q->key)]; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            break;
        }
    free(q);
}

/* ---- op bookkeeping ---- */

static void link_op(struct efa_peer *p, struct efa_rma *m)
{
    m->prev = NULL;
    m->next = p->rma;
    if (p->rma)
        p->rma->prev = m;
    p->rma = m;
}

static void unlink_op(struct efa_peer *p, struct efa_rma *m)
{
    if (m->prev)
        m->prev->next = m->next;
    else if (p->rma == m)
        p->rma = m->next;
    if (m->next)
        m->next->prev = m->prev;
    m->next = m->prev = NULL;
}

/* Op records (1.3 KB) are reused: calloc + free cost ~400 instructions per write, a tenth of a
 * 64 KiB write's whole path on shm. Sanitizer builds free each one, so ASan still sees a use
 * after release. */
#if defined(__SANITIZE_ADDRESS__)
#define RMA_FREE_MAX 0
#else
#define RMA_FREE_MAX 64
#endif

static struct efa_rma *rma_new(struct lite_transport *t)
{
    struct efa_rma *m = t->rma_free;
    if (!m)
        return calloc(1, sizeof(*m));
    t->rma_free = m->next;
    t->rma_nfree--;
    memset(m, 0, sizeof(*m));
    return m;
}

static void rma_drop(struct lite_transport *t, struct efa_rma *m)
{
    if (t->rma_nfree < RMA_FREE_MAX) {
        m->next = t->rma_free;
        t->rma_free = m;
        t->rma_nfree++;
    } else {
        free(m);
    }
}

static void batch_free(struct efa_batch *b)
{
    if (b) {
        free(b->ops);
        free(b->seg);
        free(b->pieces);
        free(b);
    }
}

static void release(struct lite_transport *t, struct efa_rma *m)
{
    for (uint32_t i = 0; i < LITE_MAX_RAILS; i++)
        if (m->fly[i])
            fi_close(&m->fly[i]->fid);
    if (t->batch_open == m)
        t->batch_open = NULL;
    batch_free(m->batch);
    rma_drop(t, m);
}

/* Tell the core that the op (or every op of a batch) ended, once, and release the record. The
 * record goes first: an upcall may post, and reuse it. */
static void release_done(struct lite_transport *t, struct efa_rma *m, int status)
{
    void *op = m->op;
    struct efa_batch *b = m->batch;
    m->batch = NULL;
    release(t, m);
    if (!b) {
        t->up->send_done(t->core, op, status);
        t->events++;
        return;
    }
    for (uint32_t i = 0; i < b->nops; i++)
        t->up->send_done(t->core, b->ops[i], status);
    t->events += (int)b->nops;
    batch_free(b);
}

/* The same without the release (the peer failed while the provider still owes stripes). */
static void ops_done(struct lite_transport *t, struct efa_rma *m, int status)
{
    if (!m->batch) {
        t->up->send_done(t->core, m->op, status);
        return;
    }
    uint32_t n = m->batch->nops;
    m->batch->nops = 0;
    for (uint32_t i = 0; i < n; i++)
        t->up->send_done(t->core, m->batch->ops[i], status);
}

/* The op is over: tell the core, now (from progress) or from the next progress (inside
 * rma_post, where the core is still setting the request up). */
static void inval_answer(struct lite_transport *t, int peer);

static void finish(struct lite_transport *t, struct efa_rma *m, int status, bool later)
{
    struct efa_peer *p = &t->peers[m->peer];
    unlink_op(p, m);
    if (p->inval_due)
        inval_answer(t, m->peer);
    if (later) {
        m->status = status;
        m->next = t->rma_later;
        t->rma_later = m;
        return;
    }
    release_done(t, m, status);
}

static uint64_t cq_data(struct lite_transport *t, uint32_t imm)
{
    if (t->imm_mode == IMM_CQDATA64)
        return (uint64_t)(uint32_t)(t->rank + 1) << 32 | imm;
    return imm;
}

static int post_piece(struct lite_transport *t, struct efa_piece *pc)
{
    struct efa_rma *m = pc->parent;
    struct efa_rail *r = &t->rail[pc->rail];
    struct iovec iov = {.iov_base = (uint8_t *)m->r.local + pc->off, .iov_len = pc->len};
    void *desc = pc->desc;
    struct fi_rma_iov riov = {.addr = m->raddr + pc->off, .len = pc->len, .key = m->rkey[pc->rail]};
    struct fi_msg_rma msg = {.msg_iov = &iov,
                             .desc = &desc,
                             .iov_count = 1,
                             .addr = r->addr[m->peer],
                             .rma_iov = &riov,
                             .rma_iov_count = 1,
                             .context = &pc->c.fi};
    struct iovec biov[LITE_EFA_BATCH_IOV];
    void *bdesc[LITE_EFA_BATCH_IOV];
    struct fi_rma_iov briov[LITE_EFA_BATCH_IOV];
    if (m->batch) {
        for (uint32_t k = 0; k < pc->nseg; k++) {
            const struct efa_seg *g = &m->batch->seg[pc->seg + k];
            biov[k] = (struct iovec){.iov_base = g->local, .iov_len = g->len};
            bdesc[k] = pc->desc;
            briov[k] = (struct fi_rma_iov){
                .addr = m->raddr + g->roff, .len = g->len, .key = m->rkey[pc->rail]};
        }
        msg.msg_iov = biov;
        msg.desc = bdesc;
        msg.rma_iov = briov;
        msg.iov_count = msg.rma_iov_count = pc->nseg;
    }
    uint64_t flags = FI_COMPLETION;
    ssize_t rc;
    if (m->r.kind == LITE_RMA_WRITE) {
        struct efa_dc *d = &t->peers[m->peer].dc[pc->rail];
        /* Batched: a write asks for its acknowledgement when none is on its way, or when it
         * is large enough that one acknowledgement more costs nothing (1 MiB writes on
         * tcp;ofi_rxm ran ~25 % slower batched), or while the peer's flush region is not
         * known (nothing could ask for a later acknowledgement). */
        bool dc = !t->dc_batch || !d->fready || !d->inflight || pc->len >= DC_BATCH_MAX;
        /* A writer-copied stripe goes plain: shm copies it inside fi_writemsg, and its
         * completion means the data is in place all the same (SELF_COPY_MIN). */
        if (dc && !pc->self_copy)
            flags |= FI_DELIVERY_COMPLETE;
        if (m->r.has_imm && !m->imm_after && (!m->batch || pc->carry)) {
            flags |= FI_REMOTE_CQ_DATA;
            msg.data = cq_data(t, m->r.imm);
            /* A batch's write counts its pages, or its rail's since the last count (imm_mode
             * is IMM_CQDATA64 then). */
            if (m->batch)
                msg.data |= (uint64_t)(pc->carry - 1) << LITE_EFA_CQ_COUNT_SHIFT;
        }
        rc = fi_writemsg(r->ep, &msg, flags);
        t->self_copied += rc == 0 && pc->self_copy;
        if (rc == 0 && t->dc_batch) {
            pc->seq = ++d->posted;
            pc->dc = dc;
            if (dc)
                d->inflight = pc->seq;
        }
    } else {
        rc = fi_readmsg(r->ep, &msg, flags);
    }
    if (rc == 0) {
        pc->posted = true;
        r->out++;
    }
    return (int)rc;
}

/* Queue a stripe behind the peer's others; the peer joins the list lite_efa_rma_flush walks. */
static void retry_push(struct lite_transport *t, struct efa_piece *pc)
{
    int peer = pc->parent->peer;
    struct efa_peer *p = &t->peers[peer];
    p->rma_queued++;
    pc->next_retry = NULL;
    if (p->rq_tail)
        p->rq_tail->next_retry = pc;
    else
        p->rq = pc;
    p->rq_tail = pc;
    if (!p->rq_listed) {
        p->rq_listed = true;
        p->rq_next = t->rq_peers;
        t->rq_peers = peer;
    }
}

/* The immediate as a message, once the data is in place; the op ends at its acknowledgement. */
static int send_imm(struct lite_transport *t, struct efa_rma *m)
{
    struct efa_peer *p = &t->peers[m->peer];
    uint8_t b[8];
    lite_put32(b, m->r.imm);
    /* A paged batch's one message counts all its pages. */
    lite_put32(b + 4, m->imm_count);
    m->stage = RMA_WAIT_ACK;
    m->ack_id = ++p->next_ack_id;
    return lite_efa_ctl_send(t, m->peer, LITE_EFA_T_IMM, m->ack_id, b, m->imm_count > 1 ? 8 : 4);
}

/* Post m's n pieces, in order behind this peer's queued stripes (other peers' queues do not hold
 * it up). A piece the provider refuses for now waits in the peer's queue; one it refuses for
 * good fails the rest of m (pieces already posted complete later). */
static void post_pieces(struct lite_transport *t, struct efa_rma *m, struct efa_piece *piece,
                        uint32_t n, bool later)
{
    struct efa_peer *p = &t->peers[m->peer];
    for (uint32_t i = 0; i < n; i++) {
        struct efa_piece *pc = &piece[i];
        bool queued = p->rma_queued > 0;
        int rc = queued ? -FI_EAGAIN : post_piece(t, pc);
        if (rc == -FI_EAGAIN) {
            if (!queued)
                lite_efa_peer_stuck(t, m->peer, true); /* counts towards liveness, as messages */
            retry_push(t, pc);
        } else if (rc) {
            int peer = m->peer;
            m->status = lite_efa_loss_code(t, lite_efa_err(rc));
            m->left -= n - i;
            if (m->left == 0)
                finish(t, m, m->status, later);
            /* A refused connection (tcp;ofi_rxm: the peer is gone) breaks the pair, as a
             * refused message does. */
            if (lite_efa_err_is_conn(rc) && !t->closing)
                lite_efa_peer_fail(t, peer, -LITE_ERR_PEER_LOST,
                                   "one-sided op: connection refused");
            return;
        } else {
            lite_efa_peer_stuck(t, m->peer, false);
        }
    }
}

/* The key is confirmed (q): check the op against it and post its stripes. */
static void start(struct lite_transport *t, struct efa_rma *m, const struct efa_qent *q, bool later)
{
    struct efa_peer *p = &t->peers[m->peer];
    const struct lite_tp_rma *r = &m->r;
    unsigned need =
        r->kind == LITE_RMA_WRITE ? LITE_TP_ACCESS_REMOTE_WRITE : LITE_TP_ACCESS_REMOTE_READ;
    if (!(q->access & need)) {
        finish(t, m, -LITE_ERR_REMOTE_ACCESS, later);
        return;
    }
    if (r->remote_offset > q->len || r->len > q->len - r->remote_offset) {
        finish(t, m, -LITE_ERR_REMOTE_BOUNDS, later);
        return;
    }
    m->stage = RMA_DATA;
    m->raddr = (t->virt_addr ? q->base : 0) + r->remote_offset;
    uint32_t rails = t->nrails;
    if (rails > q->nrails)
        rails = q->nrails;
    if (rails > p->nrails)
        rails = p->nrails;
    for (uint32_t i = 0; i < q->nrails && i < LITE_MAX_RAILS; i++)
        m->rkey[i] = q->rkey[i];
    bool imm = r->kind == LITE_RMA_WRITE && r->has_imm;
    if (r->len == 0) {
        /* Nothing to place: a write with an immediate still counts once at the target. */
        int rc = imm ? send_imm(t, m) : 0;
        if (rc || !imm)
            finish(t, m, rc, later);
        return;
    }
    /* Writer copy: two stripes, the target's on rail 0 and this side's on rail 1, always the
     * same rails so that neither side waits for the lock of the endpoint the other copies on.
     * Every op starts on rail 0 then, so rail 1 carries only stripes the writer copies, and
     * peers read its CQ lazily (efa_cq.c). */
    bool wcopy = t->writer_copy && r->kind == LITE_RMA_WRITE && rails >= 2;
    if (wcopy)
        rails = 2;
    struct lite_efa_stripe st[LITE_MAX_RAILS];
    uint32_t n = lite_efa_plan(r->len, rails, t->cfg.stripe_min, STRIPE_ALIGN,
                               t->writer_copy ? 0 : t->rma_rr % rails, st);
    t->rma_rr++;
    if (n > 1)
        LITE_DEBUG("%s rank %d: %s of %zu bytes to rank %d striped over %u rails", EFA_LOG, t->rank,
                   r->kind == LITE_RMA_WRITE ? "write" : "read", r->len, m->peer, n);
    m->imm_after = imm && (n > 1 || t->imm_mode == IMM_MSG);
    m->npieces = m->left = n;
    const struct efa_mr *local = r->local_handle;
    for (uint32_t i = 0; i < n; i++) {
        struct efa_piece *pc = &m->piece[i];
        pc->c.kind = CTX_PIECE;
        pc->parent = m;
        pc->off = st[i].off;
        pc->len = st[i].len;
        pc->rail = st[i].rail;
        /* Posted last, so the target is already copying its stripe while this side copies. */
        pc->self_copy = wcopy && n == 2 && i == 1 && pc->len >= SELF_COPY_MIN;
        if (local) {
            pc->desc = local->desc[pc->rail];
        } else if (t->mr_local) {
            /* A rendezvous source: registered for this op only. */
            int rc = lite_efa_mr_fly(t, pc->rail, (uint8_t *)r->local + pc->off, pc->len,
                                     FI_READ | FI_WRITE, &m->fly[i], &pc->desc);
            if (rc) {
                m->left = 0;
                finish(t, m, rc, later);
                return;
            }
        }
    }
    post_pieces(t, m, m->piece, n, later);
}

/* ---- paged batches ----
 *
 * lite_write_paged posts one op per page, every one but the last with LITE_RMA_F_MORE. One
 * fi_writemsg per page costs a provider command and a completion each (and a remote CQ entry): 4
 * KiB pages ran at a tenth of a contiguous write's speed. So the pages of such a batch to one peer
 * and one confirmed region are gathered instead: runs of pages adjacent at both ends coalesce into
 * one segment, and each write carries up to t->iov_max segments (shm and tcp;ofi_rxm: 4). The
 * target still counts one immediate per page: with 8 bytes of CQ data a write says how many
 * pages it counts (LITE_EFA_CQ_COUNT_SHIFT: its own, or on an ordered provider those of its
 * rail's earlier writes too, carry_counts); otherwise the writes go plain and, once all are in
 * place, one IMM message counts them all. With writer copy (shm) the batch goes without the
 * provider instead (PULLED PAGES, below). Every page's op completes when the batch does. The batch
 * is posted at its last op, at an op that does not fit it, or at the next progress.
 */
#define BATCH_MAX_OPS 4096         /* pages gathered before the batch is posted anyway */
#define BATCH_SEG_MAX (256 * 1024) /* bytes a coalesced segment grows to */

static int grow(void **arr, uint32_t *cap, size_t elem)
{
    uint32_t nc = *cap ? *cap * 2 : 64;
    void *na = realloc(*arr, nc * elem);
    if (!na)
        return -ENOMEM;
    *arr = na;
    *cap = nc;
    return 0;
}

/* Which of a batch's writes carry CQ data, and the count each carries. Where the provider
 * places one endpoint's writes in order (FI_ORDER_RMA_WAW), the count of a rail's writes rides
 * on its last one, or on the one that would overflow the count: the target's CQ entry for that
 * write means every earlier write on the rail is in place too. One remote completion per rail
 * instead of one per write: the tcp provider writes the target's CQ wait fd for each. Elsewhere
 * each write counts its own pages. */
static void carry_counts(const struct lite_transport *t, struct efa_batch *b)
{
    uint32_t n = b->npieces;
    if (!t->rma_waw) {
        for (uint32_t i = 0; i < n; i++)
            b->pieces[i].carry = b->pieces[i].pages;
        return;
    }
    /* Accumulate per rail; carry at the rail's last write or before the count overflows. */
    uint32_t acc[LITE_MAX_RAILS] = {0};
    for (uint32_t i = 0; i < n; i++) {
        struct efa_piece *pc = &b->pieces[i];
        uint32_t r = pc->rail;
        acc[r] += pc->pages;
        pc->carry = 0;
        uint32_t nx = i + 1; /* the rail's next write (rails alternate: a few steps) */
        while (nx < n && b->pieces[nx].rail != r)
            nx++;
        if (nx >= n || acc[r] + b->pieces[nx].pages > LITE_EFA_CQ_COUNT_MAX) {
            pc->carry = acc[r];
            acc[r] = 0;
        }
    }
}

/* Segments of the write that starts at segment i: at most max_seg, and at most a count's pages. */
static uint32_t group(const struct efa_batch *b, uint32_t i, uint32_t max_seg)
{
    uint32_t k = 0, pages = 0;
    while (i + k < b->nseg && k < max_seg &&
           (k == 0 || pages + b->seg[i + k].pages <= LITE_EFA_CQ_COUNT_MAX)) {
        pages += b->seg[i + k].pages;
        k++;
    }
    return k;
}

/* ---- pulled pages (shm) ----
 *
 * The writes above cost shm a command per fi_writemsg (4 segments), and the target takes the
 * lock of its region for each while the writer's next post waits for it: at 4 KiB pages the
 * writer spent its time spinning on that lock while the target idled. So where this side can
 * copy into the target (writer copy: CMA between the two processes), a paged batch goes without
 * the provider: this side copies about half of the bytes with process_vm_writev, then sends one
 * PULL message (efa_plan.h) listing the rest, which the target reads out of this process with
 * process_vm_readv, up to LITE_EFA_PULL_SEG_MAX segments a call. The target checks the list
 * against its live registration first (the key, that this peer was told it, write access, host
 * memory, each segment inside the region), counts every page (the writer's too: `extra`) and
 * answers IMM_ACK with its verdict; the batch's ops complete then. A region the target is
 * withdrawing refuses the list (the PULL arrives before the INVAL_ACK that would let the
 * withdrawal finish: rail 0's messages are in order). */
#define PULL_IOV 256 /* iovecs per process_vm_writev on this side */

/* Copy segments [from, from + n) into the target; 0, or a negative errno. */
static int cma_write(struct lite_transport *t, struct efa_rma *m, uint32_t from, uint32_t n)
{
    struct iovec liov[PULL_IOV], riov[PULL_IOV];
    const struct efa_seg *seg = m->batch->seg;
    for (uint32_t i = from; i < from + n;) {
        uint32_t k = 0;
        size_t want = 0;
        for (; k < PULL_IOV && i + k < from + n; k++) {
            const struct efa_seg *g = &seg[i + k];
            liov[k] = (struct iovec){.iov_base = g->local, .iov_len = g->len};
            riov[k] = (struct iovec){.iov_base = (void *)(uintptr_t)(m->raddr + g->roff),
                                     .iov_len = g->len};
            want += g->len;
        }
        ssize_t got = process_vm_writev((pid_t)t->peers[m->peer].pid, liov, k, riov, k, 0);
        if (got < 0)
            return -errno;
        if ((size_t)got != want)
            return -EFAULT;
        i += k;
    }
    return 0;
}

/* 1: the batch went this way (done, or failed and finished); 0: this side cannot copy into the
 * peer, post it as writes. */
static int pull_batch(struct lite_transport *t, struct efa_rma *m, bool later)
{
    struct efa_batch *b = m->batch;
    struct efa_peer *p = &t->peers[m->peer];
    uint64_t total = 0, mine = 0;
    for (uint32_t i = 0; i < b->nseg; i++)
        total += b->seg[i].len;
    /* This side's share: whole segments from the front up to half of the bytes, at least one
     * segment left for the target. */
    uint32_t w = 0, wpages = 0;
    while (w + 1 < b->nseg && 2 * (mine + b->seg[w].len) <= total) {
        mine += b->seg[w].len;
        wpages += b->seg[w].pages;
        w++;
    }
    if (w) {
        int rc = cma_write(t, m, 0, w);
        if (rc && !p->self_ok) {
            LITE_INFO("%s rank %d: copying paged writes into rank %d's memory failed (%s): the "
                      "provider carries them from now on",
                      EFA_LOG, t->rank, m->peer, strerror(-rc));
            p->cma_off = true;
            return 0;
        }
        if (rc) {
            finish(t, m, rc == -ESRCH ? -LITE_ERR_PEER_LOST : rc, later);
            return 1;
        }
        p->self_ok = true;
        t->self_pages += wpages;
    }
    uint32_t per = (uint32_t)((t->cfg.eager_max - LITE_EFA_PULL_HDR) / LITE_EFA_PULL_SEG);
    if (per > LITE_EFA_PULL_SEG_MAX)
        per = LITE_EFA_PULL_SEG_MAX;
    uint32_t nmsg = (b->nseg - w + per - 1) / per;
    if (!t->pull_buf && !(t->pull_buf = malloc(LITE_EFA_PULL_LEN(LITE_EFA_PULL_SEG_MAX)))) {
        finish(t, m, -ENOMEM, later);
        return 1;
    }
    m->stage = RMA_WAIT_ACK;
    m->ack_id = ++p->next_ack_id;
    m->left = nmsg;
    uint32_t flags = m->r.has_imm ? LITE_EFA_PULL_F_IMM : 0;
    for (uint32_t j = 0, i = w; j < nmsg; j++) {
        uint32_t n = b->nseg - i < per ? b->nseg - i : per;
        lite_efa_pull_put_hdr(t->pull_buf, m->r.imm, flags, j == 0 ? wpages : 0, n,
                              m->r.remote_core_key);
        for (uint32_t k = 0; k < n; k++) {
            const struct efa_seg *g = &b->seg[i + k];
            struct lite_efa_pull_seg e = {.src = (uint64_t)(uintptr_t)g->local,
                                          .roff = g->roff,
                                          .len = (uint32_t)g->len,
                                          .pages = g->pages};
            lite_efa_pull_put_seg(t->pull_buf, k, &e);
        }
        i += n;
        int rc = lite_efa_ctl_send(t, m->peer, LITE_EFA_T_PULL, m->ack_id, t->pull_buf,
                                   LITE_EFA_PULL_LEN(n));
        if (p->dead)
            return 1; /* failing the peer inside the send ended the op (it waits for acks) */
        if (rc) {
            m->status = rc;
            m->left = j; /* the acknowledgements of those sent finish it */
            if (j == 0)
                finish(t, m, rc, later);
            return 1;
        }
    }
    return 1;
}

/* The target's side: check a PULL against the live registration, copy, count, answer. */
static int on_pull(struct lite_transport *t, int peer, uint64_t tag, const uint8_t *payload,
                   size_t len)
{
    struct lite_efa_pull pl;
    if (lite_efa_pull_unpack(payload, len, &pl))
        return -LITE_ERR_PROTOCOL;
    struct efa_mr *mr = lite_efa_mr_find(t, pl.key);
    int st = 0;
    if (!mr || mr->dying || !(mr->told[peer / 8] & (1u << (peer % 8))))
        st = -LITE_ERR_REMOTE_KEY; /* unknown, being withdrawn, or never shown to this peer */
    else if (!(mr->access & LITE_TP_ACCESS_REMOTE_WRITE) || mr->kind != LITE_MEM_HOST)
        st = -LITE_ERR_REMOTE_ACCESS;
    else
        st = lite_efa_pull_check(&pl, mr->len);
    if (!st && !t->pull_iov &&
        !(t->pull_iov = malloc(2 * LITE_EFA_PULL_SEG_MAX * sizeof(struct iovec))))
        st = -ENOMEM;
    if (!st) {
        struct iovec *liov = t->pull_iov, *riov = liov + LITE_EFA_PULL_SEG_MAX;
        size_t want = 0;
        for (uint32_t i = 0; i < pl.nseg; i++) {
            struct lite_efa_pull_seg g;
            lite_efa_pull_seg(&pl, i, &g);
            liov[i] = (struct iovec){.iov_base = (uint8_t *)mr->addr + g.roff, .iov_len = g.len};
            riov[i] = (struct iovec){.iov_base = (void *)(uintptr_t)g.src, .iov_len = g.len};
            want += g.len;
        }
        ssize_t got = t->peers[peer].pid ? process_vm_readv((pid_t)t->peers[peer].pid, liov,
                                                            pl.nseg, riov, pl.nseg, 0)
                                         : -1;
        if (got < 0)
            st = t->peers[peer].pid ? -errno : -ESRCH;
        else if ((size_t)got != want)
            st = -EFAULT;
    }
    if (st) {
        LITE_WARN("%s rank %d: rank %d's list of %u pages for region %#llx refused: %s", EFA_LOG,
                  t->rank, peer, pl.pages, (unsigned long long)pl.key, lite_strerror(st));
    } else {
        t->pulled_pages += pl.pages - pl.extra;
        if (pl.flags & LITE_EFA_PULL_F_IMM) {
            for (uint32_t i = 0; i < pl.pages; i++)
                t->up->imm_arrived(t->core, peer, pl.imm);
            t->events += (int)pl.pages;
        }
    }
    uint8_t b[4];
    lite_put32(b, (uint32_t)st);
    lite_efa_ctl_must(t, peer, LITE_EFA_T_IMM_ACK, tag, b, 4);
    return 0;
}

void lite_efa_batch_close(struct lite_transport *t, bool later)
{
    struct efa_rma *m = t->batch_open;
    if (!m)
        return;
    t->batch_open = NULL;
    struct efa_batch *b = m->batch;
    struct efa_peer *p = &t->peers[m->peer];
    if (b->nops == 0) {
        unlink_op(p, m);
        release(t, m);
        return;
    }
    if (m->inval || p->dead) {
        finish(t, m, p->dead ? -LITE_ERR_PEER_LOST : -LITE_ERR_REMOTE_KEY, later);
        return;
    }
    const struct efa_mr *lmr = m->r.local_handle;
    if (t->writer_copy && !p->cma_off && p->pid && lmr->kind == LITE_MEM_HOST &&
        pull_batch(t, m, later))
        return;
    /* Writes of up to iov_max segments, and (CQ data) of at most LITE_EFA_CQ_COUNT_MAX pages.
     * Counted first, then built the same way. */
    uint32_t npc = 0;
    for (uint32_t i = 0; i < b->nseg; npc++)
        i += group(b, i, t->iov_max);
    b->pieces = calloc(npc, sizeof(*b->pieces));
    if (!b->pieces) {
        finish(t, m, -ENOMEM, later);
        return;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->nseg; n++) {
        struct efa_piece *pc = &b->pieces[n];
        pc->c.kind = CTX_PIECE;
        pc->parent = m;
        pc->seg = i;
        pc->nseg = group(b, i, t->iov_max);
        for (uint32_t k = 0; k < pc->nseg; k++) {
            pc->pages += b->seg[i + k].pages;
            pc->len += b->seg[i + k].len;
        }
        i += pc->nseg;
        /* With writer copy every op stays on rail 0 (start); otherwise spread over the rails. */
        pc->rail = t->writer_copy ? 0 : t->rma_rr++ % b->nrails;
        pc->desc = lmr->desc[pc->rail];
    }
    b->npieces = n;
    m->imm_after = m->r.has_imm && t->imm_mode != IMM_CQDATA64;
    carry_counts(t, b);
    m->imm_count = b->nops;
    m->npieces = m->left = n;
    post_pieces(t, m, b->pieces, n, later);
}

/* Gather this op into the open batch (or open one). 1: taken; 0: not a batch's op (any open
 * batch was posted first, so order is kept); negative: out of memory. */
static int batch_add(struct lite_transport *t, const struct lite_tp_rma *r, void *op)
{
    struct efa_rma *m = t->batch_open;
    bool fits = m && m->peer == r->peer && m->r.local_handle == r->local_handle &&
                m->r.remote_core_key == r->remote_core_key && m->r.has_imm == r->has_imm &&
                m->r.imm == r->imm && m->batch->nops < BATCH_MAX_OPS;
    if (m && !fits)
        lite_efa_batch_close(t, true);
    if (!fits && !(r->flags & LITE_RMA_F_MORE))
        return 0; /* a lone write, or a batch's only page: the usual path */
    if (r->kind != LITE_RMA_WRITE || r->len == 0 || !r->local_handle ||
        (r->flags & LITE_RMA_F_TRUSTED) || r->len > BATCH_SEG_MAX ||
        r->len >= 2 * t->cfg.stripe_min) {
        if (fits)
            lite_efa_batch_close(t, true);
        return 0;
    }
    struct efa_peer *p = &t->peers[r->peer];
    struct efa_qent *q = qfind(p, r->remote_core_key);
    if (!q || q->state != QENT_VALID || !(q->access & LITE_TP_ACCESS_REMOTE_WRITE) ||
        r->remote_offset > q->len || r->len > q->len - r->remote_offset) {
        /* The key is not confirmed yet, or the op is refused: the usual path says so. */
        if (fits)
            lite_efa_batch_close(t, true);
        return 0;
    }
    if (!fits) {
        m = rma_new(t);
        struct efa_batch *b = m ? calloc(1, sizeof(*b)) : NULL;
        if (!b) {
            if (m)
                rma_drop(t, m);
            return -ENOMEM;
        }
        m->batch = b;
        m->peer = r->peer;
        m->r = *r;
        m->stage = RMA_DATA; /* an INVAL of the region sees it (going_into) */
        m->raddr = t->virt_addr ? q->base : 0;
        uint32_t rails = t->nrails < q->nrails ? t->nrails : q->nrails;
        b->nrails = rails < p->nrails ? rails : p->nrails;
        if (b->nrails == 0)
            b->nrails = 1;
        for (uint32_t i = 0; i < q->nrails && i < LITE_MAX_RAILS; i++)
            m->rkey[i] = q->rkey[i];
        link_op(p, m);
        t->batch_open = m;
    }
    struct efa_batch *b = m->batch;
    if ((b->nops == b->opcap && grow((void **)&b->ops, &b->opcap, sizeof(*b->ops))) ||
        (b->nseg == b->segcap && grow((void **)&b->seg, &b->segcap, sizeof(*b->seg)))) {
        /* Nothing of this op was taken: post what was gathered, and report the failure. */
        lite_efa_batch_close(t, true);
        return -ENOMEM;
    }
    b->ops[b->nops++] = op;
    struct efa_seg *g = b->nseg ? &b->seg[b->nseg - 1] : NULL;
    uint8_t *local = r->local;
    if (g && g->local + g->len == local && g->roff + g->len == r->remote_offset &&
        g->len + r->len <= BATCH_SEG_MAX && g->pages < LITE_EFA_CQ_COUNT_MAX) {
        g->len += r->len;
        g->pages++;
    } else {
        b->seg[b->nseg++] =
            (struct efa_seg){.local = local, .roff = r->remote_offset, .len = r->len, .pages = 1};
    }
    if (!(r->flags & LITE_RMA_F_MORE))
        lite_efa_batch_close(t, true);
    return 1;
}

int lite_efa_rma_post(struct lite_transport *t, const struct lite_tp_rma *r, void *op)
{
    if (r->peer < 0 || r->peer >= t->world || r->peer == t->rank)
        return -EINVAL;
    if (r->kind != LITE_RMA_WRITE && r->kind != LITE_RMA_READ)
        return -EINVAL;
    struct efa_peer *p = &t->peers[r->peer];
    if (p->dead || p->lost || t->rail[0].addr[r->peer] == FI_ADDR_NOTAVAIL ||
        lite_efa_peer_gone(t, r->peer))
        return -LITE_ERR_PEER_LOST;
    if ((r->flags & LITE_RMA_F_MORE) || t->batch_open) {
        int rc = batch_add(t, r, op);
        if (rc)
            return rc < 0 ? rc : 0;
    }
    struct efa_rma *m = rma_new(t);
    if (!m)
        return -ENOMEM;
    m->op = op;
    m->peer = r->peer;
    m->r = *r;
    if (r->flags & LITE_RMA_F_TRUSTED) {
        /* The target sent this descriptor itself for this very op (a rendezvous CTS): its keys
         * and address are what QREPLY would say, and the region lives until the op is over.
         * No round trip, and nothing cached (the region is gone after the op). */
        struct efa_qent q = {.key = r->remote_core_key,
                             .state = QENT_VALID,
                             .base = r->remote_addr,
                             .len = r->remote_offset + r->len,
                             .access = r->kind == LITE_RMA_WRITE ? LITE_TP_ACCESS_REMOTE_WRITE
                                                                 : LITE_TP_ACCESS_REMOTE_READ,
                             .nrails = r->nrails};
        if (q.nrails == 0 || q.nrails > LITE_MAX_RAILS || r->remote_offset + r->len < r->len) {
            rma_drop(t, m);
            return -EINVAL;
        }
        memcpy(q.rkey, r->rkey, sizeof(q.rkey));
        link_op(p, m);
        start(t, m, &q, true);
        return 0;
    }
    struct efa_qent *q = qfind(p, r->remote_core_key);
    if (!q) {
        q = calloc(1, sizeof(*q));
        if (!q) {
            rma_drop(t, m);
            return -ENOMEM;
        }
        q->key = r->remote_core_key;
        q->state = QENT_PENDING;
        int rc = lite_efa_ctl_send(t, r->peer, LITE_EFA_T_QUERY, q->key, NULL, 0);
        /* The provider may refuse the post at once (tcp;ofi_rxm: connect() to a peer that just
         * died) and the peer is failed inside the send, before this op is on any list that
         * would end it. */
        if (!rc && (p->dead || p->lost))
            rc = -LITE_ERR_PEER_LOST;
        if (rc) {
            free(q);
            rma_drop(t, m);
            return rc;
        }
        uint32_t b = qbucket(q->key);
        q->next = p->qcache[b];
        p->qcache[b] = q;
    }
    link_op(p, m);
    if (q->state == QENT_PENDING) {
        m->stage = RMA_WAIT_KEY;
        m->next_parked = NULL;
        if (q->parked_tail)
            q->parked_tail->next_parked = m;
        else
            q->parked = m;
        q->parked_tail = m;
        return 0;
    }
    start(t, m, q, true);
    return 0;
}

/* ---- batched write acknowledgements ----
 *
 * tcp;ofi_rxm acknowledges a delivery-complete write with a message from the target, and
 * without the flag a write completes once it is in the socket, which is not what the core's
 * contract says (in place at the target). The provider places a peer's writes in order
 * (FI_ORDER_RMA_WAW), so one acknowledgement can speak for every write posted before it on the
 * same endpoint: a write asks for one only when none is on its way; the others complete
 * (locally) when sent and wait on the rail's list until an acknowledgement covers them. When an
 * acknowledgement arrives and sent writes are still uncovered, a 0-byte delivery-complete write
 * ("flush") asks for the next. A burst of 64 writes thus costs two acknowledgements instead of
 * 64; a lone write asks for its own, as before.
 *
 * The flush writes to the target's flush region, not to the last write's place: under the
 * ImmCounter contract the target may deregister that region as soon as it has counted the
 * immediates, and tcp checks the key even of a 0-byte write (tcpx_op_write -> ofi_mr_verify)
 * and drops the whole connection when it fails. Every rank registers FLUSH_LEN bytes per rail
 * for its whole life and announces (address, key) per rail in its second HELLO; batching towards
 * a peer starts only once those are known. At most one flush per rail is with the provider (its
 * context is one per rail). */

static void piece_end(struct lite_transport *t, struct efa_piece *pc, int status);

static struct efa_piece *dc_pop(struct efa_dc *d)
{
    struct efa_piece *pc = d->wait;
    if (pc) {
        d->wait = pc->next_wait;
        if (!d->wait)
            d->wait_tail = NULL;
    }
    return pc;
}

static void dc_fail_waiting(struct lite_transport *t, struct efa_dc *d, int status)
{
    for (struct efa_piece *pc; (pc = dc_pop(d));)
        piece_end(t, pc, status);
}

/* Post the flush if sent writes are uncovered and no acknowledgement is on its way. */
static void dc_kick(struct lite_transport *t, struct efa_dc *d)
{
    if (!d->wait || d->inflight || d->flush_busy || t->peers[d->peer].dead)
        return;
    struct efa_rail *r = &t->rail[d->rail];
    /* No local buffer: nothing is read, so no registration has to outlive the last write. */
    struct fi_rma_iov riov = {.addr = d->faddr, .len = 0, .key = d->fkey};
    struct fi_msg_rma msg = {.msg_iov = NULL,
                             .desc = NULL,
                             .iov_count = 0,
                             .addr = r->addr[d->peer],
                             .rma_iov = &riov,
                             .rma_iov_count = 1,
                             .context = &d->flush.fi};
    d->flush.kind = CTX_DCFLUSH;
    ssize_t rc = fi_writemsg(r->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
    if (rc == -FI_EAGAIN) {
        d->flush_due = true;
        t->dc_retry = true;
        return;
    }
    d->flush_due = false;
    if (rc) {
        dc_fail_waiting(t, d, lite_efa_err((int)rc));
        return;
    }
    d->flush_busy = true;
    r->out++;
    d->inflight = d->flush_seq = ++d->posted;
}

/* Every write up to `seq` on this rail is in place: finish the ones that waited for that. */
static void dc_confirm(struct lite_transport *t, struct efa_dc *d, uint64_t seq)
{
    if (seq > d->confirmed)
        d->confirmed = seq;
    if (d->inflight && d->inflight <= seq)
        d->inflight = 0;
    while (d->wait && d->wait->seq <= d->confirmed)
        piece_end(t, dc_pop(d), 0);
    dc_kick(t, d);
}

void lite_efa_dc_flush_done(struct lite_transport *t, struct efa_ctx *c, int status)
{
    struct efa_dc *d = (struct efa_dc *)((char *)c - offsetof(struct efa_dc, flush));
    d->flush_busy = false;
    if (status) {
        if (d->inflight == d->flush_seq)
            d->inflight = 0;
        dc_fail_waiting(t, d, status);
        return;
    }
    /* Its own number: a large write may have asked for another acknowledgement since. */
    dc_confirm(t, d, d->flush_seq);
}

int lite_efa_dc_init(struct lite_transport *t)
{
    /* Only where a peer may batch: the provider must place writes in order. */
    if (!t->rma_waw)
        return 0;
    t->flush_mem = aligned_alloc(FLUSH_LEN, FLUSH_LEN);
    if (!t->flush_mem)
        return -ENOMEM;
    memset(t->flush_mem, 0, FLUSH_LEN);
    /* An internal region (no core key: QUERY never names it) that peers may write: FI_MR_LOCAL,
     * FI_MR_PROV_KEY and FI_MR_ENDPOINT are honoured by efa_mr.c as for every region. */
    return lite_efa_mr_make(t, t->flush_mem, FLUSH_LEN, LITE_MEM_HOST, LITE_TP_ACCESS_REMOTE_WRITE,
                            0, t->nrails, &t->flush_mr);
}

void lite_efa_dc_fini(struct lite_transport *t)
{
    lite_efa_mr_free(t, t->flush_mr);
    t->flush_mr = NULL;
    free(t->flush_mem);
    t->flush_mem = NULL;
}

size_t lite_efa_dc_hello(struct lite_transport *t, uint8_t *out, size_t cap)
{
    struct lite_efa_flush f = {.nrails = t->flush_mr ? t->flush_mr->nrails : 0};
    for (uint32_t i = 0; i < f.nrails; i++) {
        /* The address as the provider wants it in a peer's write: virtual, or the offset. */
        f.addr[i] = t->virt_addr ? (uint64_t)(uintptr_t)t->flush_mem : 0;
        f.key[i] = t->flush_mr->rkey[i];
    }
    return lite_efa_flush_pack(&f, out, cap);
}

void lite_efa_dc_learn(struct lite_transport *t, int peer, const struct lite_efa_flush *f)
{
    struct efa_peer *p = &t->peers[peer];
    for (uint32_t r = 0; r < f->nrails && r < p->nrails; r++) {
        struct efa_dc *d = &p->dc[r];
        d->faddr = f->addr[r];
        d->fkey = f->key[r];
        d->fready = true;
    }
}

/* A write's or read's completion from the provider. */
void lite_efa_piece_done(struct lite_transport *t, struct efa_piece *pc, int status)
{
    struct efa_rma *m = pc->parent;
    /* Once the peer failed, no acknowledgement will cover a write: it ends here. */
    if (pc->seq && !m->orphan && !t->peers[m->peer].dead) {
        struct efa_dc *d = &t->peers[m->peer].dc[pc->rail];
        if (!status && pc->dc) {
            dc_confirm(t, d, pc->seq);
        } else if (!status && pc->seq > d->confirmed) {
            pc->next_wait = NULL;
            if (d->wait_tail)
                d->wait_tail->next_wait = pc;
            else
                d->wait = pc;
            d->wait_tail = pc;
            dc_kick(t, d);
            return;
        } else if (status && pc->dc && d->inflight == pc->seq) {
            d->inflight = 0; /* the rest fail with the connection, or the flush asks again */
            dc_kick(t, d);
        }
    }
    piece_end(t, pc, status);
}

static void piece_end(struct lite_transport *t, struct efa_piece *pc, int status)
{
    struct efa_rma *m = pc->parent;
    if (status && !m->status)
        m->status = status;
    if (--m->left > 0)
        return;
    if (m->orphan) {
        unlink_op(&t->peers[m->peer], m);
        release(t, m);
        return;
    }
    for (uint32_t i = 0; i < LITE_MAX_RAILS; i++)
        if (m->fly[i]) {
            fi_close(&m->fly[i]->fid);
            m->fly[i] = NULL;
        }
    if (m->status) {
        int st = m->status, peer = m->peer;
        bool conn = st == -LITE_ERR_PEER_LOST || st == -LITE_ERR_CANCELLED;
        /* A provider cancels what was on a connection that broke (tcp: FI_ECANCELED): for the
         * application that is a lost peer, unless this side is closing. */
        st = lite_efa_loss_code(t, st);
        finish(t, m, st, false);
        if (conn && !t->peers[peer].dead && !t->closing)
            lite_efa_peer_fail(t, peer, -LITE_ERR_PEER_LOST, "one-sided op: connection lost");
        return;
    }
    if (m->imm_after) {
        int rc = send_imm(t, m);
        if (rc)
            finish(t, m, rc, false);
        return;
    }
    finish(t, m, 0, false);
}

/* Post one peer's queued stripes from the head until the provider refuses one (the rest keep
 * their order behind it). Returns posts made (or stripes ended). */
static int rq_drain(struct lite_transport *t, int peer)
{
    struct efa_peer *p = &t->peers[peer];
    int n = 0;
    while (p->rq) {
        struct efa_piece *pc = p->rq;
        struct efa_rma *m = pc->parent;
        bool drop = m->orphan || m->inval;
        int rc = drop ? 0 : post_piece(t, pc);
        if (rc == -FI_EAGAIN) {
            lite_efa_peer_stuck(t, peer, true);
            break;
        }
        p->rq = pc->next_retry;
        if (!p->rq)
            p->rq_tail = NULL;
        p->rma_queued--;
        n++;
        if (!drop && !rc)
            lite_efa_peer_stuck(t, peer, false);
        /* (may post more: retry_push appends behind p->rq, which this loop still reaches) */
        if (drop || rc)
            lite_efa_piece_done(t, pc,
                                m->orphan  ? -LITE_ERR_PEER_LOST
                                : m->inval ? -LITE_ERR_REMOTE_KEY
                                           : lite_efa_err(rc));
    }
    return n;
}

int lite_efa_rma_flush(struct lite_transport *t)
{
    int n = 0;
    /* In order per peer; a peer whose post is refused keeps the rest of its stripes back, but
     * not other peers' (a dead peer on tcp refuses for as long as it takes to notice). The list
     * is taken whole: a peer that gets stripes queued meanwhile (an upcall posted) joins the
     * fresh one, and is seen by the next pass. */
    int peer = t->rq_peers;
    t->rq_peers = -1;
    while (peer >= 0) {
        struct efa_peer *p = &t->peers[peer];
        int next = p->rq_next;
        p->rq_listed = false;
        p->rq_next = -1;
        n += rq_drain(t, peer);
        if (p->rq && !p->rq_listed) {
            p->rq_listed = true;
            p->rq_next = t->rq_peers;
            t->rq_peers = peer;
        }
        peer = next;
    }
    if (t->dc_retry) {
        t->dc_retry = false;
        for (int p = 0; p < t->world; p++)
            for (uint32_t r = 0; r < LITE_MAX_RAILS; r++)
                if (t->peers[p].dc[r].flush_due)
                    dc_kick(t, &t->peers[p].dc[r]);
    }
    while (t->rma_later) {
        struct efa_rma *m = t->rma_later;
        t->rma_later = m->next;
        release_done(t, m, m->status);
        n++;
    }
    return n;
}

/* ---- control messages ---- */

static void on_query(struct lite_transport *t, int peer, uint64_t key)
{
    uint8_t b[QREPLY_LEN(LITE_MAX_RAILS)];
    memset(b, 0, sizeof(b));
    struct efa_mr *mr = lite_efa_mr_find(t, key);
    uint32_t n = 0;
    if (mr && mr->dying)
        mr = NULL; /* being withdrawn: as good as gone */
    if (!mr) {
        lite_put32(b, (uint32_t)-LITE_ERR_REMOTE_KEY);
        LITE_INFO("%s rank %d: rank %d asked about an unknown region key %#llx", EFA_LOG, t->rank,
                  peer, (unsigned long long)key);
    } else {
        n = mr->nrails;
        lite_put32(b + 4, mr->access);
        lite_put64(b + 8, (uint64_t)(uintptr_t)mr->addr);
        lite_put64(b + 16, mr->len);
        lite_put32(b + 24, n);
        for (uint32_t i = 0; i < n; i++)
            lite_put64(b + 32 + 8 * i, mr->rkey[i]);
        mr->told[peer / 8] |= (uint8_t)(1u << (peer % 8));
    }
    lite_efa_ctl_must(t, peer, LITE_EFA_T_QREPLY, key, b, QREPLY_LEN(n));
}

static int on_qreply(struct lite_transport *t, int peer, uint64_t key, const uint8_t *b, size_t len)
{
    struct efa_peer *p = &t->peers[peer];
    struct efa_qent *q = qfind(p, key);
    if (len < 32 || !q || q->state != QENT_PENDING)
        return -LITE_ERR_PROTOCOL;
    int status = (int)lite_get32(b);
    uint32_t n = lite_get32(b + 24);
    if (status > 0 || (status == 0 && (n == 0 || n > LITE_MAX_RAILS || len != QREPLY_LEN(n))))
        return -LITE_ERR_PROTOCOL;
    struct efa_rma *m = q->parked;
    q->parked = q->parked_tail = NULL;
    if (status) {
        /* Not cached: a region registered later under a fresh key is asked about afresh. */
        qremove(p, q);
        while (m) {
            struct efa_rma *nx = m->next_parked;
            finish(t, m, status, false);
            m = nx;
        }
        return 0;
    }
    q->access = lite_get32(b + 4);
    q->base = lite_get64(b + 8);
    q->len = lite_get64(b + 16);
    q->nrails = n;
    for (uint32_t i = 0; i < n; i++)
        q->rkey[i] = lite_get64(b + 32 + 8 * i);
    q->state = QENT_VALID;
    while (m && !p->dead) {
        struct efa_rma *nx = m->next_parked;
        start(t, m, q, false);
        m = nx;
    }
    return 0;
}

/* Is this op's data still on its way into the target's region `key`? */
static bool going_into(const struct efa_rma *m, uint64_t key)
{
    return m->stage == RMA_DATA && !m->orphan && !(m->r.flags & LITE_RMA_F_TRUSTED) &&
           m->r.remote_core_key == key;
}

static bool busy_with(const struct efa_peer *p, uint64_t key)
{
    for (const struct efa_rma *m = p->rma; m; m = m->next)
        if (going_into(m, key))
            return true;
    return false;
}

/* Answer the INVALs whose ops are over (called as ops finish). */
static void inval_answer(struct lite_transport *t, int peer)
{
    struct efa_peer *p = &t->peers[peer];
    struct efa_inval **pp = &p->inval_due;
    while (*pp) {
        struct efa_inval *e = *pp;
        if (busy_with(p, e->key)) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        uint64_t key = e->key;
        free(e);
        lite_efa_ctl_must(t, peer, LITE_EFA_T_INVAL_ACK, key, NULL, 0);
        if (p->dead)
            return; /* failing the peer dropped the rest of the list */
    }
}

static void on_inval(struct lite_transport *t, int peer, uint64_t key)
{
    struct efa_peer *p = &t->peers[peer];
    struct efa_qent *q = qfind(p, key);
    if (q && q->state == QENT_VALID)
        qremove(p, q);
    bool busy = false;
    for (struct efa_rma *m = p->rma; m; m = m->next)
        if (going_into(m, key)) {
            m->inval = true; /* its stripes still queued fail (lite_efa_rma_flush) */
            busy = true;
        }
    if (busy) {
        struct efa_inval *e = malloc(sizeof(*e));
        if (e) {
            e->key = key;
            e->next = p->inval_due;
            p->inval_due = e;
            return;
        }
        LITE_ERROR("%s rank %d: out of memory: rank %d's region %#llx is answered before this "
                   "side's ops into it are over",
                   EFA_LOG, t->rank, peer, (unsigned long long)key);
    }
    lite_efa_ctl_must(t, peer, LITE_EFA_T_INVAL_ACK, key, NULL, 0);
}

static void inval_drop(struct efa_peer *p)
{
    while (p->inval_due) {
        struct efa_inval *e = p->inval_due;
        p->inval_due = e->next;
        free(e);
    }
}

void lite_efa_rma_ctl(struct lite_transport *t, int peer, const struct lite_efa_hdr *h,
                      const uint8_t *payload, size_t len)
{
    struct efa_peer *p = &t->peers[peer];
    int rc = 0;
    switch (h->type) {
    case LITE_EFA_T_QUERY:
        on_query(t, peer, h->tag);
        break;
    case LITE_EFA_T_QREPLY:
        rc = on_qreply(t, peer, h->tag, payload, len);
        break;
    case LITE_EFA_T_INVAL:
        on_inval(t, peer, h->tag);
        break;
    case LITE_EFA_T_INVAL_ACK:
        lite_efa_mr_inval_acked(t, peer, h->tag);
        break;
    case LITE_EFA_T_IMM: {
        uint32_t count = len == 8 ? lite_get32(payload + 4) : 1;
        /* A batch counts at most BATCH_MAX_OPS pages: a larger count is not ours to loop over. */
        if ((len != 4 && len != 8) || count == 0 || count > BATCH_MAX_OPS) {
            rc = -LITE_ERR_PROTOCOL;
            break;
        }
        /* The writer sends this only once its data is in place here. */
        for (uint32_t i = 0; i < count; i++)
            t->up->imm_arrived(t->core, peer, lite_get32(payload));
        t->events += (int)count;
        lite_efa_ctl_must(t, peer, LITE_EFA_T_IMM_ACK, h->tag, NULL, 0);
        break;
    }
    case LITE_EFA_T_IMM_ACK: {
        struct efa_rma *m = p->rma;
        while (m && !(m->stage == RMA_WAIT_ACK && m->ack_id == h->tag && !m->orphan))
            m = m->next;
        /* A PULL's answer carries the target's verdict: 0 or a negative code. */
        int st = len == 4 ? (int)lite_get32(payload) : 0;
        if (!m || (len != 0 && len != 4) || st > 0 || st < -65536) {
            rc = -LITE_ERR_PROTOCOL;
            break;
        }
        if (st && !m->status)
            m->status = st;
        if (m->left > 1) {
            m->left--; /* a batch listed in several PULLs: one answer each */
            break;
        }
        finish(t, m, m->status, false);
        break;
    }
    case LITE_EFA_T_PULL:
        rc = on_pull(t, peer, h->tag, payload, len);
        break;
    default:
        rc = -LITE_ERR_PROTOCOL;
        break;
    }
    if (rc) {
        char why[96];
        lite_fmt(why, sizeof(why), "rank %d sent a malformed control message (type %u)", peer,
                 h->type);
        lite_efa_peer_fail(t, peer, rc, why);
    }
}

void lite_efa_rma_peer_failed(struct lite_transport *t, int peer, int code)
{
    struct efa_peer *p = &t->peers[peer];
    struct efa_rma *m = p->rma;
    while (m) {
        struct efa_rma *nx = m->next;
        if (!m->orphan) {
            if (m->stage == RMA_DATA && m->left > 0) {
                /* Stripes are with the provider: keep the op until they come back. */
                m->orphan = true;
                ops_done(t, m, code);
            } else {
                unlink_op(p, m);
                release_done(t, m, code);
            }
        }
        m = nx;
    }
    /* Writes that were sent but never acknowledged: their ops are orphans now (above). */
    for (uint32_t r = 0; r < LITE_MAX_RAILS; r++) {
        p->dc[r].flush_due = false;
        dc_fail_waiting(t, &p->dc[r], code);
    }
    for (int b = 0; b < EFA_QBUCKETS; b++)
        while (p->qcache[b])
            qremove(p, p->qcache[b]);
    inval_drop(p);
}

void lite_efa_qcache_fini(struct lite_transport *t)
{
    /* Called with the endpoints closed. */
    for (int i = 0; t->peers && i < t->world; i++) {
        struct efa_peer *p = &t->peers[i];
        for (uint32_t r = 0; r < LITE_MAX_RAILS; r++)
            p->dc[r].wait = p->dc[r].wait_tail = NULL; /* their ops are released below */
        while (p->rma) {
            struct efa_rma *m = p->rma;
            unlink_op(p, m);
            release(t, m);
        }
        for (int b = 0; b < EFA_QBUCKETS; b++)
            while (p->qcache[b])
                qremove(p, p->qcache[b]);
        inval_drop(p);
    }
    while (t->rma_later) {
        struct efa_rma *m = t->rma_later;
        t->rma_later = m->next;
        release(t, m);
    }
    while (t->rma_free) {
        struct efa_rma *m = t->rma_free;
        t->rma_free = m->next;
        free(m);
    }
    t->rma_nfree = 0;
    free(t->pull_buf);
    free(t->pull_iov);
    t->pull_buf = NULL;
    t->pull_iov = NULL;
    for (int i = 0; t->peers && i < t->world; i++) {
        t->peers[i].rq = t->peers[i].rq_tail = NULL;
        t->peers[i].rma_queued = 0;
        t->peers[i].rq_listed = false;
        t->peers[i].rq_next = -1;
    }
    t->rq_peers = -1;
    t->batch_open = NULL;
}
