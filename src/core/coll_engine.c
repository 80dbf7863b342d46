/*
 * coll_engine.c - the round engine under every collective.
 *
 * ROUNDS. An op posts the requests of a round and does its local work in round_fn(op, r); every
 * request carries the round that must not start before it is done ("due"). advance() retires
 * finished requests (checking error, exact length and argument headers) and starts the next round
 * as soon as nothing due at it is pending. Blocking collectives start an op and drive it here;
 * non-blocking ones wrap it in a lite_request and live in their context's registry, so that any
 * test or wait on a context advances all of that context's collectives.
 *
 * ORDER. Tags sent to a peer must strictly increase (the core refuses anything else), so
 * collectives cannot interleave their messages: an op starts (posts its first message) only when
 * every earlier op of its context has finished; until then it is queued, and driving any op
 * advances the earlier ones. Non-blocking collectives overlap with computation and point-to-point
 * traffic, and run one after another among themselves.
 *
 * ARGUMENT CHECK. Every rank sends every peer a 40-byte header of its arguments (step 0); a
 * receiver compares it with its own and fails the op on any difference. For small collectives in
 * which every pair exchanges data in the first data round (step 1), the header rides in front of
 * that data instead ("piggy-backing": one message instead of two); a step-0 "guard" receive then
 * catches a peer that sent a separate header, i.e. one whose arguments differ.
 *
 * NOTICES. A rank that cannot see a disagreement may wait for a message the disagreeing rank will
 * never send. So every op also posts a receive at step LITE_COLL_STEP_MAX from each peer, and a
 * rank whose op fails (for any reason but its own deadline) sends each peer an 8-byte notice
 * there: everyone fails at once instead of at its deadline. Guards and notices are "side"
 * requests: withdrawn, unused, when everything else is done; they cost no message when all goes
 * well.
 *
 * ERRORS. Receives that no message matched yet are withdrawn; transfers already moving cannot be
 * stopped, so the op's memory is kept ("zombie") until they end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "match.h"
#include "post.h"
#include "progress.h"
#include "reduce.h"
#include "rndv.h"

#define DUE_NEVER UINT32_MAX
#define DRAIN_NS  (200 * 1000000LL) /* how long an error waits for in-flight transfers */
#define HDR       LITE_COLL_HDR_LEN

/* ---- registry of non-blocking ops (and zombies), per context ---- */

/* Oldest first (ops are added when they start), so advancing in list order lets a finished
 * op's successor start in the same pass. Each context keeps its own list: a context is used by
 * one thread at a time, so contexts of different threads share nothing here and need no lock. */
static void reg_add(struct lite_coll_op *op)
{
    struct lite_coll_op **pp = &op->ctx->coll_head;
    while (*pp)
        pp = &(*pp)->next;
    op->next = NULL;
    *pp = op;
    op->registered = true;
    op->ctx->coll_count++;
}

static void reg_remove(struct lite_coll_op *op)
{
    if (!op->registered)
        return;
    for (struct lite_coll_op **pp = &op->ctx->coll_head; *pp; pp = &(*pp)->next) {
        if (*pp == op) {
            *pp = op->next;
            break;
        }
    }
    op->registered = false;
    op->next = NULL;
    op->ctx->coll_count--;
}

/* True while an earlier collective of op's context has not finished. */
static bool earlier_active(const struct lite_coll_op *op)
{
    bool busy = false;
    for (const struct lite_coll_op *o = op->ctx->coll_head; o && !busy; o = o->next)
        busy = o != op && o->seq < op->seq && !o->zombie && !o->done && !o->error;
    return busy;
}

/* ---- op lifetime ---- */

struct lite_coll_op *lite_coll_op_new(void)
{
    return calloc(1, sizeof(struct lite_coll_op));
}

void lite_coll_op_free(struct lite_coll_op *op)
{
    if (!op)
        return;
    free(op->pend);
    free(op->hdr_tx);
    free(op->hdr_rx);
    free(op->tmp);
    free(op->v);
    free(op->disputed);
    if (op->stage)
        for (int i = 0; i < 2 * op->n; i++)
            free(op->stage[i]);
    free(op->stage);
    free(op->piggy_done);
    free(op->notice_rx);
    free(op);
}

int lite_coll_timeout(struct lite_ctx *ctx, int timeout_ms)
{
    return timeout_ms == LITE_TIMEOUT_DEFAULT ? ctx->s.op_timeout_ms : timeout_ms;
}

static void notify(struct lite_coll_op *op);

int lite_coll_fail(struct lite_coll_op *op, int code, const char *fmt, ...)
{
    if (op->error)
        return op->error;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    lite_fmt(op->detail, sizeof(op->detail), "%s #%llu on rank %d: %s",
             lite_coll_kind_name(op->kind), (unsigned long long)op->seq, op->me, msg);
    op->error = code;
    notify(op);
    lite_fail(op->ctx, code, "%s", op->detail);
    return code;
}

int lite_coll_op_init(struct lite_coll_op *op, struct lite_ctx *ctx, int kind, size_t count,
                      int dtype, size_t esz)
{
    op->ctx = ctx;
    op->kind = kind;
    /* Taken first, even if the arguments turn out invalid, so that a rank that fails alone stays
     * in step with the others for the collectives that follow. */
    op->seq = ctx->coll_seq++;
    op->n = ctx->s.world_size;
    op->me = ctx->s.rank;
    op->count = count;
    op->dtype = dtype;
    op->esz = esz;
    op->redop = -1;
    op->root = -1;
    /* The configuration at the call: a later lite_coll_set leaves a started op alone. */
    const struct lite_coll_cfg *cfg = &ctx->s.coll;
    op->check = cfg->check && op->n > 1;
    lite_coll_select(kind, op->n, count, esz ? esz : 1, cfg, &op->plan);
    return 0;
}

/* ---- the public options (lite_coll_opts_t) ---- */

_Static_assert(sizeof(lite_coll_opts_t) == 64, "lite_coll_opts_t grows only into reserved[]");

LITE_API lite_coll_opts_t lite_coll_opts_default(void)
{
    lite_coll_opts_t o;
    memset(&o, 0, sizeof(o));
    o.struct_size = (uint32_t)sizeof(o);
    o.algo = LITE_COLL_ALGO_AUTO;
    o.chunk = 0;
    o.check = 1;
    return o;
}

LITE_API int lite_coll_get(const lite_ctx_t *ctx, lite_coll_opts_t *opts)
{
    if (!ctx || !opts || opts->struct_size != sizeof(*opts))
        return -EINVAL;
    *opts = lite_coll_opts_default();
    opts->algo = ctx->s.coll.algo;
    opts->chunk = ctx->s.coll.chunk;
    opts->check = ctx->s.coll.check;
    return 0;
}

LITE_API int lite_coll_set(lite_ctx_t *ctx, const lite_coll_opts_t *opts)
{
    if (!ctx || !opts)
        return -EINVAL;
    const char *bad = NULL;
    bool reserved = opts->reserved0 != 0;
    for (size_t i = 0; i < sizeof(opts->reserved) / sizeof(opts->reserved[0]); i++)
        reserved |= opts->reserved[i] != 0;
    if (opts->struct_size != sizeof(*opts))
        bad = "struct_size is not sizeof(lite_coll_opts_t) (use lite_coll_opts_default)";
    else if (opts->algo < 0 || opts->algo >= LITE_COLL_ALGO_COUNT)
        bad = "algo is not an enum lite_coll_algo";
    else if (opts->chunk > (1ull << 40))
        bad = "chunk is above 2^40 bytes";
    else if (opts->check != 0 && opts->check != 1)
        bad = "check is neither 0 nor 1";
    else if (reserved)
        bad = "reserved fields are not zero";
    if (bad)
        return lite_fail(ctx, -EINVAL, "lite_coll_set: %s", bad);
    ctx->s.coll.algo = opts->algo;
    ctx->s.coll.chunk = (size_t)opts->chunk;
    ctx->s.coll.check = opts->check == 1;
    return 0;
}

/* Messages of a collective that ended without them (given up after an error or a timeout on
 * this rank while others went on) can never match: unexpected ones below every live op's
 * sequence number are dropped, so they give their credit back instead of pinning it for good. */
static void purge_stale(struct lite_ctx *ctx, uint64_t seq)
{
    uint64_t low = seq;
    for (const struct lite_coll_op *o = ctx->coll_head; o; o = o->next)
        if (o->seq < low)
            low = o->seq;
    lite_match_purge_coll(ctx, lite_coll_tag(low, 0));
}

int lite_coll_op_begin(struct lite_ctx *ctx, int kind, size_t count, int dtype, int redop,
                       struct lite_coll_op **opp)
{
    *opp = NULL;
    if (!ctx)
        return -EINVAL;
    struct lite_coll_op *op = lite_coll_op_new();
    if (!op) {
        ctx->coll_seq++; /* spent all the same, so that this rank stays in step with the others */
        return lite_fail(ctx, -ENOMEM, "%s: out of memory", lite_coll_kind_name(kind));
    }
    *opp = op;
    size_t esz = lite_dtype_size(dtype);
    int rc = lite_coll_op_init(op, ctx, kind, count, dtype, esz);
    purge_stale(ctx, op->seq);
    bool reduction = kind == LITE_COLL_ALLREDUCE || kind == LITE_COLL_REDUCE_SCATTER;
    /* A reduction checks dtype together with its op, so that the error names the pair. */
    if (!rc && reduction && lite_reduce_check(dtype, redop))
        rc = lite_coll_fail(op, -EINVAL, "unsupported dtype %d / op %d (%s %s)", dtype, redop,
                            lite_coll_dtype_name(dtype), lite_coll_op_name(redop));
    else if (!rc && !esz)
        rc = lite_coll_fail(op, -EINVAL, "invalid dtype %d", dtype);
    return rc;
}

/* ---- posting ---- */

/* Room for one more pending request. */
static int reserve(struct lite_coll_op *op)
{
    if (op->npend < op->cap)
        return 0;
    int cap = op->cap ? 2 * op->cap : 16;
    struct lite_coll_pend *p = realloc(op->pend, (size_t)cap * sizeof(*p));
    if (!p)
        return -ENOMEM;
    op->pend = p;
    op->cap = cap;
    return 0;
}

static int post(struct lite_coll_op *op, bool send, int peer, uint32_t step, void *buf, size_t len,
                uint32_t due, uint8_t role, void *copy_to)
{
    if (step > LITE_COLL_STEP_MAX)
        return lite_coll_fail(op, -EOVERFLOW, "step %u does not fit a tag", step);
    /* Room first, so that a posted request is never lost to an allocation failure. */
    if (reserve(op))
        return lite_coll_fail(op, -ENOMEM, "out of memory");
    struct lite_request *r = NULL;
    uint64_t tag = lite_coll_tag(op->seq, step);
    int rc = send ? lite_post_send(op->ctx, LITE_CHAN_COLL, peer, tag, buf, len, &r)
                  : lite_post_recv(op->ctx, LITE_CHAN_COLL, peer, tag, buf, len, &r);
    if (rc)
        return lite_coll_fail(op, rc, "%s rank %d (step %u): %s", send ? "send to" : "recv from",
                              peer, step, op->ctx->last_error);
    op->pend[op->npend++] = (struct lite_coll_pend){
        .r = r, .due = due, .step = step, .expect = len, .role = role, .copy_to = copy_to};
    if (role == LITE_COLL_GUARD || role == LITE_COLL_NOTICE)
        op->nside++;
    return 0;
}

/* A staging buffer for a piggy-backed message: [header | len bytes]. */
static uint8_t *stage_buf(struct lite_coll_op *op, int idx, size_t len)
{
    if (!op->stage && !(op->stage = calloc(2 * (size_t)op->n, sizeof(*op->stage))))
        return NULL;
    free(op->stage[idx]);
    op->stage[idx] = malloc(HDR + len);
    return op->stage[idx];
}

static const uint8_t *hdr_for(const struct lite_coll_op *op, int peer)
{
    return op->hdr_tx + (op->kind == LITE_COLL_ALLTOALLV ? (size_t)peer * HDR : 0);
}

int lite_coll_send(struct lite_coll_op *op, int peer, uint32_t step, const void *buf, size_t len,
                   uint32_t due)
{
    if (op->piggy && !(op->piggy_done[peer] & 1)) {
        op->piggy_done[peer] |= 1;
        uint8_t *m = stage_buf(op, peer, len);
        if (!m)
            return lite_coll_fail(op, -ENOMEM, "out of memory");
        memcpy(m, hdr_for(op, peer), HDR);
        if (len)
            memcpy(m + HDR, buf, len);
        return post(op, true, peer, step, m, HDR + len, due, LITE_COLL_DATA, NULL);
    }
    return post(op, true, peer, step, (void *)buf, len, due, LITE_COLL_DATA, NULL);
}

int lite_coll_recv(struct lite_coll_op *op, int peer, uint32_t step, void *buf, size_t len,
                   uint32_t due)
{
    if (op->piggy && !(op->piggy_done[peer] & 2)) {
        op->piggy_done[peer] |= 2;
        uint8_t *m = stage_buf(op, op->n + peer, len);
        if (!m)
            return lite_coll_fail(op, -ENOMEM, "out of memory");
        return post(op, false, peer, step, m, HDR + len, due, LITE_COLL_PIGGY, buf ? buf : m + HDR);
    }
    return post(op, false, peer, step, buf, len, due, LITE_COLL_DATA, NULL);
}

/* ---- argument headers and notices ---- */

/* The header this rank sends to (rx = false) or expects from (rx = true) `peer`. */
static void make_hdr(const struct lite_coll_op *op, int peer, bool rx, struct lite_coll_hdr *h)
{
    memset(h, 0, sizeof(*h));
    h->kind = (uint8_t)op->kind;
    h->dtype = (uint8_t)op->dtype;
    h->redop = (uint8_t)(op->redop < 0 ? 0xff : op->redop);
    h->algo = (uint8_t)op->plan.algo;
    h->root = op->root;
    h->chunk = op->plan.chunk_elems;
    h->count = op->count;
    if (op->kind == LITE_COLL_ALLTOALLV) {
        /* pair: what the sender sends the receiver; count: what it expects back. Both sides
         * check both directions, so both see a disagreement. */
        size_t to = op->v[peer], from = op->v[2 * (size_t)op->n + peer];
        h->pair = rx ? from : to;
        h->count = rx ? to : from;
    }
}

/*
 * A disagreement only `peer` and this rank can see (alltoallv counts): the other ranks expect our
 * messages, so the op goes on without peer (its receives are withdrawn; our sends to it still go,
 * its receiver refuses them) and fails when it ends.
 */
static int soft_fail(struct lite_coll_op *op, int peer, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int soft_fail(struct lite_coll_op *op, int peer, const char *fmt, ...)
{
    if (!op->disputed && !(op->disputed = calloc((size_t)op->n, sizeof(bool))))
        return lite_coll_fail(op, -ENOMEM, "out of memory");
    op->disputed[peer] = true;
    if (!op->soft_error) {
        char msg[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        lite_fmt(op->detail, sizeof(op->detail), "%s #%llu on rank %d: %s",
                 lite_coll_kind_name(op->kind), (unsigned long long)op->seq, op->me, msg);
        op->soft_error = -EINVAL;
    }
    for (int i = 0; i < op->npend;) {
        struct lite_coll_pend *p = &op->pend[i];
        if (p->r->peer == peer && p->r->kind == LITE_REQ_RECV && p->r->state == LITE_REQ_POSTED &&
            p->role == LITE_COLL_DATA) {
            lite_request_cancel(op->ctx, p->r);
            op->pend[i] = op->pend[--op->npend];
        } else {
            i++;
        }
    }
    return 0;
}

bool lite_coll_disputed(const struct lite_coll_op *op, int peer)
{
    return op->disputed && op->disputed[peer];
}

static int check_hdr(struct lite_coll_op *op, int peer)
{
    struct lite_coll_hdr got, want;
    if (lite_coll_hdr_decode(op->hdr_rx + (size_t)peer * HDR, &got))
        return lite_coll_fail(op, -EINVAL,
                              "rank %d sent something other than an argument header: is it "
                              "running a different collective (or LITETX_COLL_CHECK=0)?",
                              peer);
    make_hdr(op, peer, true, &want);
    if (!memcmp(&got, &want, sizeof(got)))
        return 0;
    char a[160], b[160];
    lite_coll_hdr_describe(&got, a, sizeof(a));
    if (op->kind == LITE_COLL_ALLTOALLV && got.kind == want.kind && got.dtype == want.dtype) {
        if (got.pair != want.pair)
            return soft_fail(op, peer,
                             "arguments differ across ranks: rank %d sends %llu elements to "
                             "rank %d, whose recvcounts[%d] = %llu",
                             peer, (unsigned long long)got.pair, op->me, peer,
                             (unsigned long long)want.pair);
        if (got.count != want.count)
            return soft_fail(op, peer,
                             "arguments differ across ranks: rank %d sends %llu elements to "
                             "rank %d, whose recvcounts[%d] = %llu",
                             op->me, (unsigned long long)want.count, peer, op->me,
                             (unsigned long long)got.count);
    }
    lite_coll_hdr_describe(&want, b, sizeof(b));
    return lite_coll_fail(op, -EINVAL,
                          "arguments differ across ranks: rank %d called %s, rank %d %s", peer, a,
                          op->me, b);
}

/* Tell every peer that this rank gave up (once; only when the op may send: see ORDER). */
static void notify(struct lite_coll_op *op)
{
    if (op->notified || op->n == 1 || (!op->started && earlier_active(op)))
        return;
    op->notified = true;
    uint64_t code = (uint64_t)(int64_t)op->error;
    for (int i = 0; i < 8; i++)
        op->notice_tx[i] = (uint8_t)(code >> (8 * i));
    for (int i = 1; i < op->n; i++) {
        int p = (op->me + i) % op->n;
        if (op->ctx->peers[p].lost)
            continue;
        struct lite_request *r = NULL;
        if (reserve(op) == 0 &&
            lite_post_send(op->ctx, LITE_CHAN_COLL, p, lite_coll_tag(op->seq, LITE_COLL_STEP_MAX),
                           op->notice_tx, 8, &r) == 0)
            op->pend[op->npend++] = (struct lite_coll_pend){
                .r = r, .due = DUE_NEVER, .step = LITE_COLL_STEP_MAX, .role = LITE_COLL_DATA};
    }
}

static int notice_arrived(struct lite_coll_op *op, int peer)
{
    const uint8_t *b = op->notice_rx + (size_t)peer * 8;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    int code = (int)(int64_t)v;
    if (code >= 0 || code < -100000)
        code = -LITE_ERR_REMOTE;
    return lite_coll_fail(op, code,
                          "rank %d gave up on this collective (%s; its own error says why: "
                          "usually arguments that differ across ranks)",
                          peer, lite_strerror(code));
}

/* Post the side receives (notices; guards or separate headers) and send headers. */
static int start_now(struct lite_coll_op *op)
{
    int n = op->n, me = op->me, rc;
    op->started = true;
    if (n == 1) {
        op->piggy = false;
        return 0;
    }
    if (!(op->notice_rx = malloc((size_t)n * 8)))
        return lite_coll_fail(op, -ENOMEM, "out of memory");
    for (int i = 1; i < n; i++) {
        int p = (me - i + n) % n;
        if ((rc = post(op, false, p, LITE_COLL_STEP_MAX, op->notice_rx + (size_t)p * 8, 8,
                       DUE_NEVER, LITE_COLL_NOTICE, NULL)))
            return rc;
    }
    bool per_peer = op->kind == LITE_COLL_ALLTOALLV;
    op->piggy = op->piggy && op->check && op->eager && !per_peer;
    if (!op->check)
        return 0;
    op->hdr_rx = malloc((size_t)n * HDR);
    op->hdr_tx = malloc((size_t)(per_peer ? n : 1) * HDR);
    if (op->piggy)
        op->piggy_done = calloc((size_t)n, 1);
    if (!op->hdr_rx || !op->hdr_tx || (op->piggy && !op->piggy_done))
        return lite_coll_fail(op, -ENOMEM, "out of memory");
    /* A separate header gates the first data round unless the op is small (eager). */
    uint32_t due = op->eager ? DUE_NEVER : 1;
    for (int i = 1; i < n; i++) {
        int p = (me - i + n) % n;
        if ((rc = post(op, false, p, 0, op->hdr_rx + (size_t)p * HDR, HDR, due,
                       op->piggy ? LITE_COLL_GUARD : LITE_COLL_HDR, NULL)))
            return rc;
    }
    for (int i = 1; i < n; i++) {
        int p = (me + i) % n;
        uint8_t *h = op->hdr_tx + (per_peer ? (size_t)p * HDR : 0);
        if (per_peer || i == 1) {
            struct lite_coll_hdr hd;
            make_hdr(op, p, false, &hd);
            lite_coll_hdr_encode(&hd, h);
        }
        if (!op->piggy && (rc = post(op, true, p, 0, h, HDR, DUE_NEVER, LITE_COLL_DATA, NULL)))
            return rc;
    }
    return 0;
}

/* ---- advancing ---- */

/* Check one finished request (errors are recorded on the op). */
static void check_done(struct lite_coll_op *op, const struct lite_coll_pend *p, int err, int peer,
                       bool recv, size_t bytes)
{
    if (lite_coll_disputed(op, peer))
        return;
    /* A side receive that failed (its peer closed, e.g. after finishing this collective, or
     * was lost) says nothing about this collective: transfers that need the peer report it. */
    if (err && (p->role == LITE_COLL_NOTICE || p->role == LITE_COLL_GUARD))
        return;
    if (!err && p->role == LITE_COLL_NOTICE) {
        notice_arrived(op, peer);
        return;
    }
    if (!err && p->role == LITE_COLL_PIGGY && bytes >= HDR) {
        /* the header first: it explains a wrong length best */
        const uint8_t *m = op->stage[op->n + peer];
        memcpy(op->hdr_rx + (size_t)peer * HDR, m, HDR);
        if (check_hdr(op, peer))
            return;
        if (bytes == p->expect) {
            memcpy(p->copy_to, m + HDR, bytes - HDR);
            return;
        }
    }
    if (!err && p->role == LITE_COLL_GUARD && bytes != HDR) {
        lite_coll_fail(op, -EINVAL,
                       "rank %d sent a %zu-byte message where an argument header was expected: "
                       "is it running a different collective?",
                       peer, bytes);
        return;
    }
    if (err == -LITE_ERR_TRUNCATED)
        lite_coll_fail(op, -EINVAL,
                       "rank %d sent more than the %zu bytes expected at step %u: the ranks' "
                       "arguments differ",
                       peer, p->expect, p->step);
    else if (err)
        lite_coll_fail(op, err, "%s rank %d (step %u): %s%s%s", recv ? "recv from" : "send to",
                       peer, p->step, lite_strerror(err), op->ctx->peers[peer].lost ? ": " : "",
                       op->ctx->peers[peer].lost ? op->ctx->peers[peer].lost_why : "");
    else if (recv && bytes != p->expect)
        lite_coll_fail(op, -EINVAL,
                       "rank %d sent %zu bytes where %zu were expected (step %u): the ranks' "
                       "arguments differ",
                       peer, bytes, p->expect, p->step);
    else if (p->role == LITE_COLL_HDR || p->role == LITE_COLL_GUARD)
        check_hdr(op, peer);
}

/* Retire finished requests. `quiet`: only free them (an op that already failed). */
static int retire(struct lite_coll_op *op, bool quiet)
{
    for (int i = 0; i < op->npend;) {
        struct lite_coll_pend p = op->pend[i];
        struct lite_request *r = p.r;
        if (r->state != LITE_REQ_DONE) {
            i++;
            continue;
        }
        int err = r->error, peer = r->peer;
        bool recv = r->kind == LITE_REQ_RECV;
        size_t bytes = r->bytes;
        lite_request_release(op->ctx, r);
        op->pend[i] = op->pend[--op->npend];
        if (p.role == LITE_COLL_GUARD || p.role == LITE_COLL_NOTICE)
            op->nside--;
        if (!quiet && !op->error)
            check_done(op, &p, err, peer, recv, bytes);
    }
    return op->error;
}

static bool blocked(const struct lite_coll_op *op)
{
    for (int i = 0; i < op->npend; i++)
        if (op->pend[i].due <= op->round)
            return true;
    return false;
}

/* Withdraw the side receives no message matched. Returns false while one is being filled. */
static bool withdraw_side(struct lite_coll_op *op)
{
    bool all = true;
    for (int i = 0; i < op->npend;) {
        struct lite_coll_pend *p = &op->pend[i];
        bool side = p->role == LITE_COLL_GUARD || p->role == LITE_COLL_NOTICE;
        if (side && p->r->state == LITE_REQ_POSTED) {
            lite_request_cancel(op->ctx, p->r);
            op->pend[i] = op->pend[--op->npend];
            op->nside--;
        } else {
            all &= !side;
            i++;
        }
    }
    return all;
}

static void advance(struct lite_coll_op *op)
{
    if (op->zombie) {
        retire(op, true);
        return;
    }
    if (!op->started && !op->done && !op->error) {
        if (earlier_active(op) || start_now(op))
            return;
    }
    while (!op->done && !op->error) {
        if (retire(op, false))
            return;
        if (op->round < op->nrounds) {
            if (blocked(op))
                return;
            uint32_t r = op->round++;
            if (op->round_fn(op, r))
                return;
            continue;
        }
        if (op->npend > op->nside || !withdraw_side(op) || op->npend)
            return;
        if (op->soft_error) {
            op->error = op->soft_error;
            lite_fail(op->ctx, op->error, "%s", op->detail);
        } else {
            op->done = true;
        }
    }
}

/* Advance every registered op of ctx except `skip`; free zombies whose transfers ended. */
static void reg_advance(struct lite_ctx *ctx, struct lite_coll_op *skip)
{
    int total = ctx->coll_count;
    if (total == 0)
        return;
    /* A snapshot: advancing an op may add or free registered ops. */
    struct lite_coll_op *few[16], **mine = few;
    int k = 0;
    if (total > (int)LITE_ARRAY_LEN(few) && !(mine = malloc((size_t)total * sizeof(*mine))))
        mine = few, total = (int)LITE_ARRAY_LEN(few); /* the oldest ones: enough to progress */
    for (struct lite_coll_op *o = ctx->coll_head; o && k < total; o = o->next)
        if (o != skip)
            mine[k++] = o;
    for (int i = 0; i < k; i++) {
        advance(mine[i]);
        if (mine[i]->zombie && mine[i]->npend == 0) {
            reg_remove(mine[i]);
            lite_coll_op_free(mine[i]);
        }
    }
    if (mine != few)
        free(mine);
}

/* waiting: a step of a wait loop (lite_progress_once, with the spin pause); else one poll. */
static int backend_progress(struct lite_coll_op *op, int sleep_ms, bool waiting)
{
    int rc = waiting ? lite_progress_once(op->ctx, sleep_ms) : lite_progress_poll(op->ctx);
    if (rc < 0)
        return lite_coll_fail(op, rc, "transport %s progress failed: %s", op->ctx->ops.name,
                              lite_strerror(rc));
    return 0;
}

static int timed_out(struct lite_coll_op *op)
{
    const struct lite_coll_pend *w = NULL;
    for (int i = 0; i < op->npend && !w; i++)
        if (op->pend[i].due <= op->round)
            w = &op->pend[i];
    for (int i = 0; i < op->npend && !w; i++)
        if (op->pend[i].role != LITE_COLL_GUARD && op->pend[i].role != LITE_COLL_NOTICE)
            w = &op->pend[i];
    if (!w)
        return lite_fail(op->ctx, -ETIMEDOUT, "%s #%llu on rank %d: timed out%s",
                         lite_coll_kind_name(op->kind), (unsigned long long)op->seq, op->me,
                         op->started ? "" : " queued behind an unfinished collective");
    return lite_fail(op->ctx, -ETIMEDOUT,
                     "%s #%llu on rank %d: timed out in round %u of %u waiting for %s rank %d "
                     "(step %u; %d transfer(s) pending)",
                     lite_coll_kind_name(op->kind), (unsigned long long)op->seq, op->me, op->round,
                     op->nrounds, w->r->kind == LITE_REQ_SEND ? "a send to" : "a message from",
                     w->r->peer, w->step, op->npend - op->nside);
}

/* Drive op until it is done, failed or the deadline passes (-ETIMEDOUT, op left as it is). */
static int drive(struct lite_coll_op *op, int64_t deadline)
{
    struct lite_ctx *ctx = op->ctx;
    struct lite_waiter w;
    lite_waiter_start(&w, deadline, 0, ctx->spin_ns);
    for (;;) {
        advance(op);
        reg_advance(ctx, op);
        if (op->error)
            return op->error;
        if (op->done)
            return 0;
        int ms = lite_waiter_next(&w);
        if (ms < 0)
            return timed_out(op);
        if (backend_progress(op, ms, true))
            return op->error;
    }
}

/* Withdraw what can be withdrawn. Returns the number of transfers still moving. */
static int withdraw(struct lite_coll_op *op)
{
    for (int i = 0; i < op->npend;) {
        struct lite_request *r = op->pend[i].r;
        if (r->state == LITE_REQ_DONE ||
            (r->kind == LITE_REQ_RECV && r->state == LITE_REQ_POSTED) || lite_rndv_send_parked(r)) {
            lite_request_cancel(op->ctx, r); /* releases a finished request too */
            op->pend[i] = op->pend[--op->npend];
        } else {
            i++;
        }
    }
    return op->npend;
}

/* An op that ended in error (or timed out and is abandoned): withdraw, then free it, or keep
 * it as a zombie while transfers still move (a bounded drain first when allowed). */
static void dispose_failed(struct lite_coll_op *op, bool may_drain)
{
    op->zombie = true;
    if (withdraw(op) && may_drain) {
        int64_t until = lite_now_ns() + DRAIN_NS;
        while (op->npend && lite_now_ns() < until) {
            if (lite_progress_once(op->ctx, 1) < 0)
                break;
            retire(op, true);
        }
    }
    if (op->npend) {
        LITE_WARN("%s #%llu: %d transfer(s) still in flight after an error; their buffers stay "
                  "in use until they end",
                  lite_coll_kind_name(op->kind), (unsigned long long)op->seq, op->npend);
        if (!op->registered)
            reg_add(op);
        return;
    }
    reg_remove(op);
    lite_coll_op_free(op);
}

/* ---- starting and finishing ---- */

int lite_coll_abort(struct lite_coll_op *op)
{
    int rc = op->error ? op->error : -EINVAL;
    struct lite_ctx *ctx = op->ctx;
    char detail[sizeof(ctx->last_error)];
    memcpy(detail, ctx->last_error, sizeof(detail));
    dispose_failed(op, true);
    memcpy(ctx->last_error, detail, sizeof(detail));
    return rc;
}

int lite_coll_start(struct lite_coll_op *op)
{
    advance(op);
    return op->error;
}

int lite_coll_run(struct lite_coll_op *op, int timeout_ms)
{
    int rc = op->error;
    if (!rc && !op->done)
        rc = drive(op, lite_deadline_ns(lite_coll_timeout(op->ctx, timeout_ms)));
    if (!rc) {
        lite_coll_op_free(op);
        return 0;
    }
    /* Keep the detail: a zombie's later progress must not replace it. */
    struct lite_ctx *ctx = op->ctx;
    char detail[sizeof(ctx->last_error)];
    memcpy(detail, ctx->last_error, sizeof(detail));
    dispose_failed(op, rc != -ETIMEDOUT);
    memcpy(ctx->last_error, detail, sizeof(detail));
    return rc;
}

int lite_coll_to_request(struct lite_coll_op *op, lite_request_t **req)
{
    struct lite_request *r = lite_request_alloc(op->ctx);
    if (!r) {
        lite_coll_fail(op, -ENOMEM, "out of memory");
        dispose_failed(op, true);
        return -ENOMEM;
    }
    r->kind = LITE_REQ_COLL;
    r->state = LITE_REQ_POSTED;
    r->channel = LITE_CHAN_COLL;
    r->peer = -1;
    r->tag = lite_coll_tag(op->seq, 0);
    r->coll = op;
    reg_add(op);
    *req = r;
    return 0;
}

/* Complete a finished (done or failed) collective request: status, release, result. */
static int finish_request(struct lite_ctx *ctx, struct lite_request *req, lite_status_t *status)
{
    struct lite_coll_op *op = req->coll;
    int err = op->error;
    if (req->stage) /* device buffers: the result leaves the bounce buffer before "done" */
        ctx->stage_coll_end(req, err); /* gpu_stage.c, installed by lite_init */
    if (status) {
        status->peer = -1;
        status->tag = req->tag;
        status->bytes = err ? 0 : op->bytes_out;
        status->error = err;
    }
    lite_request_free(ctx, req);
    if (!err) {
        reg_remove(op);
        lite_coll_op_free(op);
        return 0;
    }
    lite_fail(ctx, err, "%s", op->detail[0] ? op->detail : lite_strerror(err));
    dispose_failed(op, false);
    return err;
}

int lite_coll_test(struct lite_ctx *ctx, struct lite_request *req, lite_status_t *status)
{
    struct lite_coll_op *op = req->coll;
    if (!op->done && !op->error) {
        if (op->n > 1)
            backend_progress(op, 0, false);
        advance(op);
        reg_advance(ctx, op);
        if (!op->done && !op->error)
            return 0;
    }
    int rc = finish_request(ctx, req, status);
    return rc ? rc : 1;
}

int lite_coll_wait(struct lite_ctx *ctx, struct lite_request *req, int timeout_ms,
                   lite_status_t *status)
{
    struct lite_coll_op *op = req->coll;
    int64_t deadline = lite_deadline_ns(lite_coll_timeout(ctx, timeout_ms));
    if (!op->done && !op->error && drive(op, deadline) == -ETIMEDOUT && !op->error)
        return -ETIMEDOUT; /* still pending, still the caller's */
    return finish_request(ctx, req, status);
}

int lite_coll_cancel(struct lite_ctx *ctx, struct lite_request *req)
{
    struct lite_coll_op *op = req->coll;
    if (!op->done && !op->error)
        return lite_fail(ctx, -EBUSY,
                         "cancel: %s #%llu has started on every rank and cannot be withdrawn; "
                         "wait for it",
                         lite_coll_kind_name(op->kind), (unsigned long long)op->seq);
    finish_request(ctx, req, NULL);
    return 0;
}

void lite_coll_fini(struct lite_ctx *ctx)
{
    for (;;) {
        struct lite_coll_op *op = ctx->coll_head;
        if (!op)
            return;
        reg_remove(op);
        /* lite_finalize has closed the transport (nothing refers to these transfers any more)
         * and rndv.c has let go of its rendezvous lists: release them with their op. */
        for (int i = 0; i < op->npend; i++)
            if (op->pend[i].r) {
                /* an op never finished (its peer died, or it was not waited for) may still
                 * have receives posted: p2p_fini must not find them there afterwards */
                lite_match_unpost(ctx, op->pend[i].r);
                lite_request_release(ctx, op->pend[i].r);
            }
        lite_coll_op_free(op);
    }
}
