/*
 * gpu_stage.c - device buffers staged through pinned host memory (see gpu_stage.h).
 *
 * Every collective here is the host collective run on bounce buffers, so a device-buffer call
 * gives the bytes of the host-buffer call. The copies use one non-blocking library stream per
 * device (process-wide) and one event per bounce slot; nothing waits on the caller's streams.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "ctx.h"
#include "match.h"
#include "p2p.h"
#include "post.h"
#include "request.h"
#include "gpu.h"
#include "gpu_stage.h"
#include "reduce.h"
#include "tunables.h"

#define STAGE_CHUNK_DEFAULT (4L << 20)
#define STAGE_CACHE_MAX     4

bool lite_stage_is_dev(const void *p)
{
    return p && p != LITE_IN_PLACE && lite_gpu_ptr_kind(p, NULL) == LITE_MEM_CUDA;
}

bool lite_stage_msg_dev(const struct lite_ctx *ctx, const void *p)
{
    return !(ctx->ops.caps & LITE_CAP_DEVICE_MSG) && lite_stage_is_dev(p);
}

size_t lite_stage_chunk_env(void)
{
    return (size_t)lite_tun_long("LITETX_GPU_STAGE_CHUNK", STAGE_CHUNK_DEFAULT);
}

size_t lite_stage_chunk(size_t chunk_bytes, size_t esize)
{
    if (esize == 0)
        esize = 1;
    size_t n = chunk_bytes / esize;
    return (n ? n : 1) * esize;
}

size_t lite_stage_nseg(size_t count, size_t seg_elems)
{
    return seg_elems ? (count + seg_elems - 1) / seg_elems : 0;
}

int lite_stage_pipeline(const struct lite_stage_io *io, void *const slots[2], void *dst,
                        const void *src, size_t count, size_t esize, size_t seg_elems,
                        lite_stage_work_fn work, void *warg)
{
    size_t nseg = lite_stage_nseg(count, seg_elems);
    const unsigned char *s = src;
    unsigned char *d = dst;
    int rc = 0;
    if (nseg == 0)
        return 0;
        /* segment k: elements [k * seg_elems, min(count, (k + 1) * seg_elems)) */
#define SEG_N(k) ((k) + 1 < nseg ? seg_elems : count - (k)*seg_elems)
    rc = io->fetch(io->arg, 0, slots[0], s, SEG_N(0) * esize);
    for (size_t k = 0; !rc && k < nseg; k++) {
        int slot = (int)(k & 1);
        size_t first = k * seg_elems, n = SEG_N(k);
        rc = io->fetch_wait(io->arg, slot);
        /* The next segment's fetch goes into the other slot; the put of the segment that used
         * it was issued earlier on the same stream, so it has read the slot first. */
        if (!rc && k + 1 < nseg)
            rc = io->fetch(io->arg, slot ^ 1, slots[slot ^ 1], s + (first + seg_elems) * esize,
                           SEG_N(k + 1) * esize);
        if (!rc)
            rc = work(warg, slots[slot], first, n);
        if (!rc)
            rc = io->put(io->arg, slot, d + first * esize, slots[slot], n * esize);
    }
#undef SEG_N
    int drc = io->drain(io->arg);
    return rc ? rc : drc;
}

/* ---- bounce buffers: a few cached per process, largest kept ---- */

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    size_t n;
} cache[STAGE_CACHE_MAX];

/* The size of each live bounce buffer, so put() can cache it: a small table, bounce buffers are
 * few (two per staged call). */
#define STAGE_LIVE_MAX 256
static struct {
    void *p;
    size_t n;
} live[STAGE_LIVE_MAX];

int lite_stage_get(size_t n, void **out)
{
    *out = NULL;
    size_t want = (n + 0xFFFFu) & ~(size_t)0xFFFFu;
    if (want == 0)
        want = 0x10000u;
    void *p = NULL;
    size_t have = 0;
    pthread_mutex_lock(&cache_lock);
    int best = -1;
    for (int i = 0; i < STAGE_CACHE_MAX; i++)
        if (cache[i].p && cache[i].n >= want && (best < 0 || cache[i].n < cache[best].n))
            best = i;
    if (best >= 0) {
        p = cache[best].p;
        have = cache[best].n;
        cache[best].p = NULL;
    }
    pthread_mutex_unlock(&cache_lock);
    if (!p) {
        int rc = lite_gpu_host_alloc(want, &p);
        if (rc)
            return rc;
        have = want;
    }
    pthread_mutex_lock(&cache_lock);
    int slot = -1;
    for (int i = 0; i < STAGE_LIVE_MAX && slot < 0; i++)
        if (!live[i].p)
            slot = i;
    if (slot >= 0) {
        live[slot].p = p;
        live[slot].n = have;
    }
    pthread_mutex_unlock(&cache_lock);
    *out = p;
    return 0;
}

void lite_stage_put(void *p)
{
    if (!p)
        return;
    size_t n = 0;
    void *drop = p;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < STAGE_LIVE_MAX; i++)
        if (live[i].p == p) {
            n = live[i].n;
            live[i].p = NULL;
            break;
        }
    if (n) {
        /* keep it in an empty slot, or instead of a smaller one */
        int victim = -1;
        for (int i = 0; i < STAGE_CACHE_MAX; i++)
            if (!cache[i].p) {
                victim = i;
                break;
            } else if (cache[i].n < n && (victim < 0 || cache[i].n < cache[victim].n)) {
                victim = i;
            }
        if (victim >= 0) {
            drop = cache[victim].p;
            cache[victim].p = p;
            cache[victim].n = n;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    lite_gpu_host_free(drop);
}

/* ---- the library's stream of each device ---- */

static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lite_gpu_stream *streams[64];

static int lib_stream(int dev, struct lite_gpu_stream **out)
{
    if (dev < 0 || dev >= (int)LITE_ARRAY_LEN(streams))
        return -ENODEV;
    pthread_mutex_lock(&stream_lock);
    int rc = 0;
    if (!streams[dev])
        rc = lite_gpu_stream_create(dev, &streams[dev]);
    *out = streams[dev];
    pthread_mutex_unlock(&stream_lock);
    return rc;
}

/* Copy between any two of host and device memory, synchronously. */
static int copy_any(void *dst, const void *src, size_t n)
{
    if (n == 0)
        return 0;
    if (!lite_stage_is_dev(dst) && !lite_stage_is_dev(src)) {
        memcpy(dst, src, n);
        return 0;
    }
    return lite_gpu_copy(dst, src, n);
}

/* ---- point to point ---- */

static int stage_fail(struct lite_ctx *ctx, int rc, const char *what)
{
    char why[200];
    lite_gpu_available(why, sizeof(why));
    return lite_fail(ctx, rc, "%s: staging a device buffer failed: %s%s%s", what, lite_strerror(rc),
                     why[0] ? ": " : "", why);
}

/* A rendezvous-sized send to another rank: its device-to-host copy runs chunk by chunk on the
 * library stream while the rendezvous starts, and rndv.c writes each chunk as it lands. */
static bool pipe_fits(const struct lite_ctx *ctx, int peer, size_t len)
{
    return peer != ctx->s.rank && len >= ctx->rndv_threshold && len > 0;
}

/* Wait for every copy of p (they read the caller's buffer) and free it. */
static void pipe_free(struct lite_pipe *p)
{
    if (!p)
        return;
    for (size_t k = 0; k < p->nchunk && p->ev && p->ev[k]; k++)
        lite_gpu_event_sync(p->ev[k]);
    for (size_t k = 0; k < p->nchunk && p->ev; k++)
        lite_gpu_event_destroy(p->ev[k]);
    free(p->ev);
    free(p->w);
    free(p);
}

static int pipe_make(struct lite_ctx *ctx, const void *dev, void *host, size_t len,
                     struct lite_pipe **out)
{
    int d = 0;
    lite_gpu_ptr_kind(dev, &d);
    struct lite_gpu_stream *s;
    int rc = lib_stream(d, &s);
    if (rc)
        return rc;
    struct lite_pipe *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->host = host;
    p->len = len;
    p->chunk = ctx->stage_chunk ? ctx->stage_chunk : len;
    p->nchunk = (len + p->chunk - 1) / p->chunk;
    p->ev = calloc(p->nchunk, sizeof(*p->ev));
    p->w = calloc(p->nchunk, sizeof(*p->w));
    rc = p->ev && p->w ? 0 : -ENOMEM;
    for (size_t k = 0; !rc && k < p->nchunk; k++) {
        size_t off = k * p->chunk, n = len - off < p->chunk ? len - off : p->chunk;
        rc = lite_gpu_event_create(d, &p->ev[k]);
        if (!rc)
            rc = lite_gpu_copy_async((unsigned char *)host + off, (const unsigned char *)dev + off,
                                     n, s);
        if (!rc)
            rc = lite_gpu_event_record(p->ev[k], s);
    }
    if (rc) {
        pipe_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int lite_stage_send(struct lite_ctx *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                    int timeout_ms)
{
    void *b;
    if (pipe_fits(ctx, peer, len) && lite_stage_is_dev(buf)) {
        struct lite_pipe *p = NULL;
        int rc = lite_stage_get(len, &b);
        if (!rc)
            rc = pipe_make(ctx, buf, b, len, &p);
        if (rc) {
            lite_stage_put(b);
            return stage_fail(ctx, rc, "send");
        }
        ctx->pipe_next = p; /* taken by the rendezvous of this send (rndv.c) */
        rc = lite_p2p_send(ctx, peer, tag, b, len, timeout_ms);
        ctx->pipe_next = NULL;
        pipe_free(p); /* a withdrawn send never writes: the pipe is no longer used */
        if (rc != -ETIMEDOUT)
            lite_stage_put(b);
        return rc;
    }
    int rc = lite_stage_get(len, &b);
    if (!rc)
        rc = copy_any(b, buf, len);
    if (rc) {
        lite_stage_put(b);
        return stage_fail(ctx, rc, "send");
    }
    rc = lite_p2p_send(ctx, peer, tag, b, len, timeout_ms);
    if (rc != -ETIMEDOUT) /* after a timeout the backend may still read it: leak, never reuse */
        lite_stage_put(b);
    return rc;
}

int lite_stage_recv(struct lite_ctx *ctx, int peer, uint64_t tag, void *buf, size_t len,
                    size_t *received, int timeout_ms)
{
    void *b;
    size_t got = 0;
    int rc = lite_stage_get(len, &b);
    if (rc)
        return stage_fail(ctx, rc, "recv");
    rc = lite_p2p_recv(ctx, peer, tag, b, len, &got, timeout_ms);
    if (rc == 0) {
        int crc = copy_any(buf, b, got);
        if (crc)
            rc = stage_fail(ctx, crc, "recv");
    }
    if (received)
        *received = rc ? 0 : got;
    if (rc != -ETIMEDOUT)
        lite_stage_put(b);
    return rc;
}

int lite_stage_isend(struct lite_ctx *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                     struct lite_request **req)
{
    void *b;
    struct lite_pipe *p = NULL;
    bool pipe = pipe_fits(ctx, peer, len) && lite_stage_is_dev(buf);
    int rc = lite_stage_get(len, &b);
    if (!rc)
        rc = pipe ? pipe_make(ctx, buf, b, len, &p) : copy_any(b, buf, len);
    if (rc) {
        lite_stage_put(b);
        return stage_fail(ctx, rc, "isend");
    }
    ctx->pipe_next = p; /* taken by the rendezvous of this send (rndv.c) */
    rc = lite_post_send(ctx, LITE_CHAN_USER, peer, tag, b, len, req);
    ctx->pipe_next = NULL;
    if (rc) {
        pipe_free(p);
        lite_stage_put(b);
        return rc;
    }
    if (p && (*req)->pipe != p)
        pipe_free(p); /* not a rendezvous after all: the copies must land first */
    (*req)->stage = b;
    return 0;
}

int lite_stage_irecv(struct lite_ctx *ctx, int peer, uint64_t tag, void *buf, size_t len,
                     struct lite_request **req)
{
    void *b;
    int rc = lite_stage_get(len, &b);
    if (rc)
        return stage_fail(ctx, rc, "irecv");
    rc = lite_post_recv(ctx, LITE_CHAN_USER, peer, tag, b, len, req);
    if (rc) {
        lite_stage_put(b);
        return rc;
    }
    (*req)->stage = b;
    (*req)->stage_dst = buf;
    return 0;
}

/* A staged non-blocking collective: its bounce buffers, and where its result goes. */
struct stage_coll {
    void *b[2];
    void *dst;       /* device (or host) destination, NULL: nothing to copy out */
    const void *src; /* the result in a bounce buffer */
    size_t len;
    int nseg;        /* > 0: copy out only these byte ranges of dst/src (alltoallv's gaps are
                      * the caller's), else all len bytes */
    size_t seg[][2]; /* offset, length */
};

static int coll_copy_out(const struct stage_coll *sc)
{
    if (!sc->dst)
        return 0;
    if (sc->nseg == 0)
        return copy_any(sc->dst, sc->src, sc->len);
    for (int i = 0; i < sc->nseg; i++) {
        int rc = copy_any((unsigned char *)sc->dst + sc->seg[i][0],
                          (const unsigned char *)sc->src + sc->seg[i][0], sc->seg[i][1]);
        if (rc)
            return rc;
    }
    return 0;
}

static void coll_end(struct lite_request *r, int err)
{
    struct stage_coll *sc = r->stage;
    r->stage = NULL;
    if (err) /* the op may still be moving bytes: never reuse its buffers */
        return;
    if (coll_copy_out(sc) != 0)
        LITE_ERROR("gpu: a staged non-blocking collective could not copy its result to %p",
                   sc->dst);
    lite_stage_put(sc->b[0]);
    lite_stage_put(sc->b[1]);
    free(sc);
}

void lite_stage_coll_end(struct lite_request *r, int err)
{
    if (r->stage)
        coll_end(r, err);
}

void lite_stage_req_end(struct lite_request *r)
{
    if (r->kind == LITE_REQ_COLL) {
        coll_end(r, 0);
        return;
    }
    if (r->stage_dst && r->kind == LITE_REQ_RECV && r->state == LITE_REQ_DONE && !r->error &&
        copy_any(r->stage_dst, r->stage, r->bytes) != 0)
        r->error = -EIO; /* logged by the loader */
    if (r->pipe) {
        pipe_free(r->pipe);
        r->pipe = NULL;
    }
    lite_stage_put(r->stage);
    r->stage = NULL;
    r->stage_dst = NULL;
}

/* ---- collectives ---- */

bool lite_stage_coll_dev(const void *sendbuf, const void *recvbuf)
{
    return lite_stage_is_dev(sendbuf) || lite_stage_is_dev(recvbuf);
}

/* Arguments the host collective would refuse, refused here before any staging. */
static int bad_args(struct lite_ctx *ctx, const char *what, int dtype)
{
    ctx->coll_seq++; /* as the host collectives count a call refused at its start */
    return lite_fail(ctx, -EINVAL,
                     "%s: invalid arguments (dtype %d, op, root, or a NULL/in-place buffer where "
                     "none is allowed)",
                     what, dtype);
}

static int resolve_timeout(struct lite_ctx *ctx, int timeout_ms)
{
    return timeout_ms == LITE_TIMEOUT_DEFAULT ? ctx->s.op_timeout_ms : timeout_ms;
}

/* The staging of one call: bounce buffers to give back. */
struct stage_bufs {
    void *b[2];
};

static int bufs_get(struct lite_ctx *ctx, struct stage_bufs *sb, size_t n0, size_t n1,
                    const char *what)
{
    memset(sb, 0, sizeof(*sb));
    int rc = lite_stage_get(n0, &sb->b[0]);
    if (!rc && n1)
        rc = lite_stage_get(n1, &sb->b[1]);
    if (rc) {
        lite_stage_put(sb->b[0]);
        return stage_fail(ctx, rc, what);
    }
    return 0;
}

static int bufs_end(struct stage_bufs *sb, int rc)
{
    if (rc == -ETIMEDOUT)
        return rc; /* a timed-out collective may still be moving bytes: never reuse */
    lite_stage_put(sb->b[0]);
    lite_stage_put(sb->b[1]);
    return rc;
}

/* The GPU side of the allreduce pipeline. */
struct gio {
    struct lite_gpu_stream *s;
    struct lite_gpu_event *ev[3];
};

static int gio_fetch(void *arg, int slot, void *dst, const void *src, size_t n)
{
    struct gio *g = arg;
    int rc = lite_gpu_copy_async(dst, src, n, g->s);
    return rc ? rc : lite_gpu_event_record(g->ev[slot], g->s);
}

static int gio_fetch_wait(void *arg, int slot)
{
    struct gio *g = arg;
    return lite_gpu_event_sync(g->ev[slot]);
}

static int gio_put(void *arg, int slot, void *dst, const void *src, size_t n)
{
    struct gio *g = arg;
    (void)slot;
    return lite_gpu_copy_async(dst, src, n, g->s);
}

static int gio_drain(void *arg)
{
    struct gio *g = arg;
    int rc = lite_gpu_event_record(g->ev[2], g->s);
    return rc ? rc : lite_gpu_event_sync(g->ev[2]);
}

struct ar_work {
    struct lite_ctx *ctx;
    int dtype, op;
    int64_t deadline;
    bool infinite;
};

static int ar_segment(void *arg, void *host, size_t first, size_t n)
{
    struct ar_work *w = arg;
    (void)first;
    int ms = w->infinite ? LITE_TIMEOUT_INFINITE : lite_ms_left(w->deadline, INT_MAX);
    return lite_coll_allreduce(w->ctx, LITE_IN_PLACE, host, n, w->dtype, w->op, ms);
}

int lite_stage_allreduce(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                         int dtype, int op, int timeout_ms)
{
    size_t es = lite_dtype_size(dtype);
    if (es == 0 || !recvbuf || !sendbuf || lite_reduce_check(dtype, op))
        return bad_args(ctx, "allreduce", dtype);
    const void *src = sendbuf == LITE_IN_PLACE ? recvbuf : sendbuf;
    int dev = 0;
    if (lite_gpu_ptr_kind(recvbuf, &dev) != LITE_MEM_CUDA)
        lite_gpu_ptr_kind(src, &dev);
    size_t seg = lite_stage_chunk(ctx->stage_chunk, es) / es;
    if (seg > count)
        seg = count ? count : 1;
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, seg * es, seg * es, "allreduce");
    if (rc)
        return rc;
    struct gio g = {0};
    rc = lib_stream(dev, &g.s);
    for (int i = 0; !rc && i < 3; i++)
        rc = lite_gpu_event_create(dev, &g.ev[i]);
    if (rc) {
        for (int i = 0; i < 3; i++)
            lite_gpu_event_destroy(g.ev[i]);
        return bufs_end(&sb, stage_fail(ctx, rc, "allreduce"));
    }
    int t = resolve_timeout(ctx, timeout_ms);
    struct ar_work w = {.ctx = ctx,
                        .dtype = dtype,
                        .op = op,
                        .deadline = lite_deadline_ns(t),
                        .infinite = t == LITE_TIMEOUT_INFINITE};
    struct lite_stage_io io = {.fetch = gio_fetch,
                               .fetch_wait = gio_fetch_wait,
                               .put = gio_put,
                               .drain = gio_drain,
                               .arg = &g};
    void *const slots[2] = {sb.b[0], sb.b[1]};
    rc = lite_stage_pipeline(&io, slots, recvbuf, src, count, es, seg, ar_segment, &w);
    for (int i = 0; i < 3; i++)
        lite_gpu_event_destroy(g.ev[i]);
    return bufs_end(&sb, rc);
}

int lite_stage_reduce_scatter(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf,
                              size_t recvcount, int dtype, int op, int timeout_ms)
{
    size_t es = lite_dtype_size(dtype);
    int n = ctx->s.world_size, me = ctx->s.rank;
    if (es == 0 || !recvbuf || !sendbuf || lite_reduce_check(dtype, op))
        return bad_args(ctx, "reduce_scatter", dtype);
    const unsigned char *in = sendbuf == LITE_IN_PLACE ? recvbuf : sendbuf;
    unsigned char *out =
        sendbuf == LITE_IN_PLACE ? (unsigned char *)recvbuf + (size_t)me * recvcount * es : recvbuf;
    size_t total = (size_t)n * recvcount * es;
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, total, 0, "reduce_scatter");
    if (rc)
        return rc;
    rc = copy_any(sb.b[0], in, total);
    if (rc)
        return bufs_end(&sb, stage_fail(ctx, rc, "reduce_scatter"));
    unsigned char *h = sb.b[0];
    rc = lite_coll_reduce_scatter(ctx, LITE_IN_PLACE, h, recvcount, dtype, op, timeout_ms);
    if (!rc && (rc = copy_any(out, h + (size_t)me * recvcount * es, recvcount * es)))
        rc = stage_fail(ctx, rc, "reduce_scatter");
    return bufs_end(&sb, rc);
}

int lite_stage_bcast(struct lite_ctx *ctx, void *buf, size_t count, int dtype, int root,
                     int timeout_ms)
{
    size_t es = lite_dtype_size(dtype);
    if (es == 0 || root < 0 || root >= ctx->s.world_size)
        return bad_args(ctx, "bcast", dtype);
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, count * es, 0, "bcast");
    if (rc)
        return rc;
    bool am_root = root == ctx->s.rank;
    if (am_root && (rc = copy_any(sb.b[0], buf, count * es)))
        return bufs_end(&sb, stage_fail(ctx, rc, "bcast"));
    rc = lite_coll_bcast(ctx, sb.b[0], count, dtype, root, timeout_ms);
    if (!rc && !am_root && (rc = copy_any(buf, sb.b[0], count * es)))
        rc = stage_fail(ctx, rc, "bcast");
    return bufs_end(&sb, rc);
}

int lite_stage_allgather(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                         int dtype, int timeout_ms)
{
    size_t es = lite_dtype_size(dtype);
    int n = ctx->s.world_size, me = ctx->s.rank;
    if (es == 0 || !recvbuf || !sendbuf)
        return bad_args(ctx, "allgather", dtype);
    size_t blk = count * es;
    unsigned char *mine = (unsigned char *)recvbuf + (size_t)me * blk;
    const void *in = sendbuf == LITE_IN_PLACE ? mine : sendbuf;
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, (size_t)n * blk, 0, "allgather");
    if (rc)
        return rc;
    unsigned char *h = sb.b[0];
    if ((rc = copy_any(h + (size_t)me * blk, in, blk)))
        return bufs_end(&sb, stage_fail(ctx, rc, "allgather"));
    rc = lite_coll_allgather(ctx, LITE_IN_PLACE, h, count, dtype, timeout_ms);
    if (!rc && (rc = copy_any(recvbuf, h, (size_t)n * blk)))
        rc = stage_fail(ctx, rc, "allgather");
    return bufs_end(&sb, rc);
}

int lite_stage_alltoall(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, int timeout_ms)
{
    size_t es = lite_dtype_size(dtype);
    if (es == 0 || !recvbuf || !sendbuf || sendbuf == LITE_IN_PLACE)
        return bad_args(ctx, "alltoall", dtype);
    size_t total = (size_t)ctx->s.world_size * count * es;
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, total, total, "alltoall");
    if (rc)
        return rc;
    if ((rc = copy_any(sb.b[0], sendbuf, total)))
        return bufs_end(&sb, stage_fail(ctx, rc, "alltoall"));
    rc = lite_coll_alltoall(ctx, sb.b[0], sb.b[1], count, dtype, timeout_ms);
    if (!rc && (rc = copy_any(recvbuf, sb.b[1], total)))
        rc = stage_fail(ctx, rc, "alltoall");
    return bufs_end(&sb, rc);
}

/* The elements [0, extent) that the segments (displs[p], counts[p]) reach; false on overflow. */
static bool extent_of(const size_t *counts, const size_t *displs, int n, size_t *out)
{
    size_t e = 0;
    for (int p = 0; p < n; p++) {
        if (counts[p] == 0)
            continue;
        if (displs[p] > SIZE_MAX - counts[p])
            return false;
        if (displs[p] + counts[p] > e)
            e = displs[p] + counts[p];
    }
    *out = e;
    return true;
}

/* alltoallv's arguments, checked as the host collective checks them; the extents in elements. */
static bool alltoallv_ok(struct lite_ctx *ctx, const void *sendbuf, const size_t *sendcounts,
                         const size_t *sdispls, const void *recvbuf, const size_t *recvcounts,
                         const size_t *rdispls, size_t es, size_t *sext, size_t *rext)
{
    int n = ctx->s.world_size;
    return es && sendbuf && sendbuf != LITE_IN_PLACE && recvbuf && sendcounts && sdispls &&
           recvcounts && rdispls && extent_of(sendcounts, sdispls, n, sext) &&
           extent_of(recvcounts, rdispls, n, rext) && *sext <= SIZE_MAX / es &&
           *rext <= SIZE_MAX / es;
}

int lite_stage_alltoallv(struct lite_ctx *ctx, const void *sendbuf, const size_t *sendcounts,
                         const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                         const size_t *rdispls, int dtype, int timeout_ms)
{
    size_t es = lite_dtype_size(dtype), sext = 0, rext = 0;
    int n = ctx->s.world_size;
    if (!alltoallv_ok(ctx, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, es, &sext,
                      &rext))
        return bad_args(ctx, "alltoallv", dtype);
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, sext * es, rext ? rext * es : 1, "alltoallv");
    if (rc)
        return rc;
    if ((rc = copy_any(sb.b[0], sendbuf, sext * es)))
        return bufs_end(&sb, stage_fail(ctx, rc, "alltoallv"));
    rc = lite_coll_alltoallv(ctx, sb.b[0], sendcounts, sdispls, sb.b[1], recvcounts, rdispls, dtype,
                             timeout_ms);
    /* only the received segments go back: the gaps between them are the caller's */
    for (int p = 0; !rc && p < n; p++) {
        size_t off = rdispls[p] * es, len = recvcounts[p] * es;
        if (len &&
            (rc = copy_any((unsigned char *)recvbuf + off, (unsigned char *)sb.b[1] + off, len)))
            rc = stage_fail(ctx, rc, "alltoallv");
    }
    return bufs_end(&sb, rc);
}

/* ---- non-blocking collectives: whole buffers staged, the result copied out at completion ---- */

/* Attach the staging to the request the host collective returned, or give it up. */
static int attach_segs(struct lite_ctx *ctx, int rc, struct lite_request **req,
                       struct stage_bufs *sb, void *dst, const void *src, size_t len, int nseg,
                       const size_t *counts, const size_t *displs, size_t es)
{
    if (rc)
        return bufs_end(sb, rc);
    struct stage_coll *sc = malloc(sizeof(*sc) + (size_t)nseg * sizeof(sc->seg[0]));
    if (sc) {
        *sc = (struct stage_coll){
            .b = {sb->b[0], sb->b[1]}, .dst = dst, .src = src, .len = len, .nseg = nseg};
        for (int i = 0; i < nseg; i++) {
            sc->seg[i][0] = displs[i] * es;
            sc->seg[i][1] = counts[i] * es;
        }
        (*req)->stage = sc;
        return 0;
    }
    /* the collective runs: wait for it, then copy (rare: out of memory) */
    rc = lite_coll_wait(ctx, *req, LITE_TIMEOUT_DEFAULT, NULL);
    *req = NULL;
    for (int i = 0; !rc && dst && i < (nseg ? nseg : 1); i++) {
        size_t off = nseg ? displs[i] * es : 0, n = nseg ? counts[i] * es : len;
        if ((rc = copy_any((unsigned char *)dst + off, (const unsigned char *)src + off, n)))
            rc = stage_fail(ctx, rc, "non-blocking collective");
    }
    return bufs_end(sb, rc);
}

static int attach(struct lite_ctx *ctx, int rc, struct lite_request **req, struct stage_bufs *sb,
                  void *dst, const void *src, size_t len)
{
    return attach_segs(ctx, rc, req, sb, dst, src, len, 0, NULL, NULL, 0);
}

int lite_stage_iallreduce(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                          int dtype, int op, struct lite_request **req)
{
    size_t es = lite_dtype_size(dtype);
    if (es == 0 || !recvbuf || !sendbuf || !req || lite_reduce_check(dtype, op))
        return bad_args(ctx, "iallreduce", dtype);
    const void *src = sendbuf == LITE_IN_PLACE ? recvbuf : sendbuf;
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, count * es, 0, "iallreduce");
    if (rc)
        return rc;
    if ((rc = copy_any(sb.b[0], src, count * es))) {
        ctx->coll_seq++;
        return bufs_end(&sb, stage_fail(ctx, rc, "iallreduce"));
    }
    rc = lite_coll_iallreduce(ctx, LITE_IN_PLACE, sb.b[0], count, dtype, op, req);
    return attach(ctx, rc, req, &sb, recvbuf, sb.b[0], count * es);
}

int lite_stage_ireduce_scatter(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf,
                               size_t recvcount, int dtype, int op, struct lite_request **req)
{
    size_t es = lite_dtype_size(dtype);
    int n = ctx->s.world_size, me = ctx->s.rank;
    if (es == 0 || !recvbuf || !sendbuf || !req || lite_reduce_check(dtype, op))
        return bad_args(ctx, "ireduce_scatter", dtype);
    const unsigned char *in = sendbuf == LITE_IN_PLACE ? recvbuf : sendbuf;
    unsigned char *out =
        sendbuf == LITE_IN_PLACE ? (unsigned char *)recvbuf + (size_t)me * recvcount * es : recvbuf;
    size_t total = (size_t)n * recvcount * es;
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, total, 0, "ireduce_scatter");
    if (rc)
        return rc;
    if ((rc = copy_any(sb.b[0], in, total))) {
        ctx->coll_seq++;
        return bufs_end(&sb, stage_fail(ctx, rc, "ireduce_scatter"));
    }
    unsigned char *h = sb.b[0];
    rc = lite_coll_ireduce_scatter(ctx, LITE_IN_PLACE, h, recvcount, dtype, op, req);
    return attach(ctx, rc, req, &sb, out, h + (size_t)me * recvcount * es, recvcount * es);
}

int lite_stage_ibcast(struct lite_ctx *ctx, void *buf, size_t count, int dtype, int root,
                      struct lite_request **req)
{
    size_t es = lite_dtype_size(dtype);
    if (es == 0 || !req || root < 0 || root >= ctx->s.world_size)
        return bad_args(ctx, "ibcast", dtype);
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, count * es, 0, "ibcast");
    if (rc)
        return rc;
    bool am_root = root == ctx->s.rank;
    if (am_root && (rc = copy_any(sb.b[0], buf, count * es))) {
        ctx->coll_seq++;
        return bufs_end(&sb, stage_fail(ctx, rc, "ibcast"));
    }
    rc = lite_coll_ibcast(ctx, sb.b[0], count, dtype, root, req);
    return attach(ctx, rc, req, &sb, am_root ? NULL : buf, sb.b[0], count * es);
}

int lite_stage_iallgather(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                          int dtype, struct lite_request **req)
{
    size_t es = lite_dtype_size(dtype);
    int n = ctx->s.world_size, me = ctx->s.rank;
    if (es == 0 || !recvbuf || !sendbuf || !req)
        return bad_args(ctx, "iallgather", dtype);
    size_t blk = count * es;
    unsigned char *mine = (unsigned char *)recvbuf + (size_t)me * blk;
    const void *in = sendbuf == LITE_IN_PLACE ? mine : sendbuf;
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, (size_t)n * blk, 0, "iallgather");
    if (rc)
        return rc;
    unsigned char *h = sb.b[0];
    if ((rc = copy_any(h + (size_t)me * blk, in, blk))) {
        ctx->coll_seq++;
        return bufs_end(&sb, stage_fail(ctx, rc, "iallgather"));
    }
    rc = lite_coll_iallgather(ctx, LITE_IN_PLACE, h, count, dtype, req);
    return attach(ctx, rc, req, &sb, recvbuf, h, (size_t)n * blk);
}

int lite_stage_ialltoall(struct lite_ctx *ctx, const void *sendbuf, void *recvbuf, size_t count,
                         int dtype, struct lite_request **req)
{
    size_t es = lite_dtype_size(dtype);
    if (es == 0 || !recvbuf || !sendbuf || sendbuf == LITE_IN_PLACE || !req)
        return bad_args(ctx, "ialltoall", dtype);
    size_t total = (size_t)ctx->s.world_size * count * es;
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, total, total, "ialltoall");
    if (rc)
        return rc;
    if ((rc = copy_any(sb.b[0], sendbuf, total))) {
        ctx->coll_seq++;
        return bufs_end(&sb, stage_fail(ctx, rc, "ialltoall"));
    }
    rc = lite_coll_ialltoall(ctx, sb.b[0], sb.b[1], count, dtype, req);
    return attach(ctx, rc, req, &sb, recvbuf, sb.b[1], total);
}

int lite_stage_ialltoallv(struct lite_ctx *ctx, const void *sendbuf, const size_t *sendcounts,
                          const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                          const size_t *rdispls, int dtype, struct lite_request **req)
{
    size_t es = lite_dtype_size(dtype), sext = 0, rext = 0;
    if (!req || !alltoallv_ok(ctx, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, es,
                              &sext, &rext))
        return bad_args(ctx, "ialltoallv", dtype);
    struct stage_bufs sb;
    int rc = bufs_get(ctx, &sb, sext ? sext * es : 1, rext ? rext * es : 1, "ialltoallv");
    if (rc)
        return rc;
    if ((rc = copy_any(sb.b[0], sendbuf, sext * es))) {
        ctx->coll_seq++;
        return bufs_end(&sb, stage_fail(ctx, rc, "ialltoallv"));
    }
    rc = lite_coll_ialltoallv(ctx, sb.b[0], sendcounts, sdispls, sb.b[1], recvcounts, rdispls,
                              dtype, req);
    /* only the received segments go back at completion: the gaps between them are the caller's */
    return attach_segs(ctx, rc, req, &sb, recvbuf, sb.b[1], rext * es, ctx->s.world_size,
                       recvcounts, rdispls, es);
}
