/*
 * nccl.c - the NCCL backend: device buffers move with ncclSend/ncclRecv, everything else over
 * an inner tcp instance (docs/NCCL.md).
 *
 * NCCL cannot carry the core's traffic by itself: a receive must name its peer and length
 * before the bytes arrive, both ends must hold device memory, and an unmatched ncclSend blocks
 * the stream. So this backend wraps a tcp instance (lite_tcp_ops, the library's own socket
 * stack) as its message path: host payloads, control messages and a small "envelope" per device
 * payload go there; the device bytes go over NCCL. Messages to a peer stay in posting order:
 * a receiver holds back whatever follows an envelope until its device bytes are in place.
 *
 * Scheduling (why there is a "leader"): NCCL runs a communicator's work on one stream per rank
 * in posting order, and a send or receive blocks that stream until its partner posts the
 * match. Posting freely can deadlock (0 posts recv<-1 then send->1 while 1 posts recv<-0 then
 * send->0, both large). So every transfer of a pair (a, b), a < b, runs in a group that a, the
 * leader, starts: it posts {its next send to b, its next receive from b} only when it has
 * nothing else on its stream, and sends b a GO naming what it posted; b posts the matching
 * group in the order GOs arrive. A leader's group is then always at the front of its stream,
 * and the chain "waits for" only climbs in rank, so it ends (docs/NCCL.md has the argument).
 *
 * NCCL is loaded with dlopen("libnccl.so.2") at run time; CUDA goes through the library's one
 * loader (src/support/gpu.h). Nothing links against either, so the library loads on hosts
 * without them and probe() says why this backend is not usable there.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nccl.h>

#include "gpu.h"
#include "litetx/transport.h"

extern const struct lite_transport_ops lite_tcp_ops;
/* Its host messages go through a tcp instance inside, which reads tcp's variables: nccl lists
 * them as its own, so lite_init checks them and hands them over with nccl's snapshot. */
extern const struct lite_tunable lite_tcp_tunables[];

/* ---- NCCL, loaded at run time ---- */

/* __typeof__ of the header's declarations: the table has exactly NCCL's signatures, without
 * a link-time reference to libnccl. */
struct nc_api {
    __typeof__(ncclGetVersion) *GetVersion;
    __typeof__(ncclGetUniqueId) *GetUniqueId;
    __typeof__(ncclCommInitRankConfig) *CommInitRankConfig;
    __typeof__(ncclCommGetAsyncError) *CommGetAsyncError;
    __typeof__(ncclCommCuDevice) *CommCuDevice;
    __typeof__(ncclCommAbort) *CommAbort;
    __typeof__(ncclCommFinalize) *CommFinalize;
    __typeof__(ncclCommDestroy) *CommDestroy;
    __typeof__(ncclSend) *Send;
    __typeof__(ncclRecv) *Recv;
    __typeof__(ncclGroupStart) *GroupStart;
    __typeof__(ncclGroupEnd) *GroupEnd;
    __typeof__(ncclGetErrorString) *GetErrorString;
    int version;
};

#define NC_MIN_VERSION 21400 /* ncclCommInitRankConfig and non-blocking communicators */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct nc_api g_nc;
static int g_nc_rc;
static char g_nc_why[256];

static void nc_load(void)
{
    /* Never closed: NCCL keeps threads of its own. */
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(g_nc_why, sizeof(g_nc_why), "libnccl.so.2 cannot be loaded (%s)",
                 e ? e : "not found");
        g_nc_rc = -ENODEV;
        return;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"ncclGetVersion", (void **)&g_nc.GetVersion},
        {"ncclGetUniqueId", (void **)&g_nc.GetUniqueId},
        {"ncclCommInitRankConfig", (void **)&g_nc.CommInitRankConfig},
        {"ncclCommGetAsyncError", (void **)&g_nc.CommGetAsyncError},
        {"ncclCommCuDevice", (void **)&g_nc.CommCuDevice},
        {"ncclCommAbort", (void **)&g_nc.CommAbort},
        {"ncclCommFinalize", (void **)&g_nc.CommFinalize},
        {"ncclCommDestroy", (void **)&g_nc.CommDestroy},
        {"ncclSend", (void **)&g_nc.Send},
        {"ncclRecv", (void **)&g_nc.Recv},
        {"ncclGroupStart", (void **)&g_nc.GroupStart},
        {"ncclGroupEnd", (void **)&g_nc.GroupEnd},
        {"ncclGetErrorString", (void **)&g_nc.GetErrorString},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            snprintf(g_nc_why, sizeof(g_nc_why), "libnccl.so.2 lacks %s (NCCL older than 2.14?)",
                     syms[i].name);
            g_nc_rc = -ENODEV;
            return;
        }
    }
    if (g_nc.GetVersion(&g_nc.version) != ncclSuccess || g_nc.version < NC_MIN_VERSION) {
        snprintf(g_nc_why, sizeof(g_nc_why), "libnccl.so.2 is version %d, 2.14 or newer needed",
                 g_nc.version);
        g_nc_rc = -ENODEV;
    }
}

static int nc_api_get(char *why, size_t why_len)
{
    pthread_once(&g_once, nc_load);
    if (g_nc_rc && why && why_len)
        snprintf(why, why_len, "%s", g_nc_why);
    return g_nc_rc;
}

static const char *nc_err(ncclResult_t r)
{
    return g_nc.GetErrorString ? g_nc.GetErrorString(r) : "unknown NCCL error";
}

/* ---- the instance ---- */

/* This backend's own messages on the inner tcp instance, told apart by flag bits the core never
 * sets (its message flags are the rendezvous bit 0x01 and control types 1..31): the wire codec
 * accepts only the core's channels, and every other header field is the core's. */
#define F_ENV 0x80 /* a device payload's envelope: the core's header, 8 bytes of length */
#define F_GO                                                                                       \
    0x40 /* leader -> follower (channel CTRL): tag bit 0 "I send you one", bit 1 "send me one" */
#define ENV_LEN 8

enum op_kind { OP_HOST, OP_CTL };

/* What the inner tcp instance's send_done gets back: a core op, or one of ours. */
struct nc_op {
    struct nc_op *next; /* free list */
    void *core_op;
    uint8_t kind;
    uint8_t env[ENV_LEN]; /* OP_CTL envelope payload: the device payload's length */
};

/* One device payload in either direction. */
struct nc_xfer {
    struct nc_xfer *next;
    int peer;
    bool send;
    void *dev;      /* send: the source; recv: where NCCL writes (the destination or scratch) */
    void *host_dst; /* recv into host memory: copied from scratch once the bytes are in */
    size_t len;
    void *core_op; /* send: completed with send_done */
    void *token;   /* recv: the core's recv_begin token, ended with recv_end */
    struct nc_scratch *scratch;
};

/* Device memory a receive lands in when its destination is host memory (or a discard). */
struct nc_scratch {
    struct nc_scratch *next;
    void *dev;
    size_t cap;
    bool busy;
};

/* One ncclGroupStart..End, completed by an event in stream order. */
struct nc_group {
    struct nc_group *next;
    int peer;
    struct nc_xfer *s, *r;
    struct lite_gpu_event *ev;
    bool recorded;
    int64_t posted_ns;
};

/* A GO received from a leader, waiting to be matched by this rank's group. */
struct nc_go {
    struct nc_go *next;
    int leader;
    unsigned flags; /* bit 0: the leader sends (we receive), bit 1: we send */
};

/* A message from a peer held behind that peer's device receive (order). */
struct nc_held {
    struct nc_held *next;
    bool env;
    struct lite_msg_hdr hdr; /* env: the device payload's header (core channel, real length) */
    uint8_t data[];
};

enum rx_kind { RX_PASS, RX_STAGE, RX_STAGE_FAIL, RX_HOLD, RX_ENV, RX_GO, RX_DROP };

/* One message being received from the inner tcp instance (one at a time per peer). */
struct nc_rx {
    uint8_t kind;
    bool heap; /* a second one while the first is open (should not happen; kept safe) */
    int peer;
    struct lite_msg_hdr hdr;
    void *core_dst, *core_token;
    void *buf; /* RX_STAGE: host bounce; RX_HOLD: the held message */
    uint8_t env[ENV_LEN];
};

struct nc_peer {
    struct nc_xfer *sq_head, *sq_tail; /* device sends announced, not yet posted */
    struct nc_xfer *recv;              /* the device receive begun (at most one) */
    bool recv_posted;
    struct nc_held *held_head, *held_tail;
    bool failed;
    bool rx_open;
    struct nc_rx rx;
    void *stage; /* host bounce for host payloads into device memory */
    size_t stage_cap;
};

struct lite_transport {
    int rank, world;
    struct lite_core *core;
    const struct lite_core_upcalls *up;
    int log_level;
    void (*log)(int level, const char *msg); /* the core's sink (lite_tp_env.log) */
    int op_timeout_ms;
    struct lite_transport *inner; /* the tcp instance */
    struct nc_peer *peers;
    ncclUniqueId id; /* rank 0's, published in its address */
    ncclComm_t comm;
    bool comm_busy; /* a non-blocking call still in progress: no NCCL call until it is over */
    bool comm_dead; /* aborted: no device payload moves any more */
    bool lost_any;  /* a peer was lost: close aborts instead of finalizing */
    int device;
    struct lite_gpu_stream *stream;  /* NCCL's work */
    struct lite_gpu_stream *cstream; /* staging copies, never behind a blocked NCCL kernel */
    struct nc_group *g_head, *g_tail;
    struct nc_go *go_head, *go_tail;
    struct nc_scratch *scratch;
    struct nc_op *op_free;
    int rr; /* leader's round-robin cursor */
};

static void nc_log(const struct lite_transport *t, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void nc_log(const struct lite_transport *t, int level, const char *fmt, ...)
{
    if (level > (t ? t->log_level : LITE_LOG_WARN))
        return;
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (t && t->log) {
        char msg[520];
        snprintf(msg, sizeof(msg), "nccl: %s", line);
        t->log(level, msg);
        return;
    }
    fprintf(stderr, "[litetx %s] nccl: %s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], line);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct nc_op *op_get(struct lite_transport *t, uint8_t kind, void *core_op)
{
    struct nc_op *o = t->op_free;
    if (o)
        t->op_free = o->next;
    else if (!(o = malloc(sizeof(*o))))
        return NULL;
    o->kind = kind;
    o->core_op = core_op;
    return o;
}

static void op_put(struct lite_transport *t, struct nc_op *o)
{
    o->next = t->op_free;
    t->op_free = o;
}

/* ---- failures ---- */

static void peer_fail(struct lite_transport *t, int peer, int code, const char *why);

static void xfer_free(struct lite_transport *t, struct nc_xfer *x)
{
    if (x->scratch)
        x->scratch->busy = false;
    free(x);
}

/* End the communicator: every device payload in flight or waiting fails, and so does every
 * peer it involved (NCCL cannot say how far a transfer got). */
static void nc_abort(struct lite_transport *t, int code, const char *why)
{
    if (t->comm_dead)
        return;
    t->comm_dead = true;
    nc_log(t, LITE_LOG_ERROR, "aborting the NCCL communicator: %s", why);
    if (t->comm)
        g_nc.CommAbort(t->comm);
    t->comm = NULL;
    t->comm_busy = false;
    bool *hit = calloc((size_t)t->world, sizeof(*hit));
    while (t->g_head) {
        struct nc_group *g = t->g_head;
        t->g_head = g->next;
        if (hit)
            hit[g->peer] = true;
        if (g->s) {
            t->up->send_done(t->core, g->s->core_op, code);
            xfer_free(t, g->s);
        }
        if (g->r) {
            t->peers[g->peer].recv = NULL;
            t->peers[g->peer].recv_posted = false;
            xfer_free(t, g->r);
        }
        lite_gpu_event_destroy(g->ev);
        free(g);
    }
    t->g_tail = NULL;
    for (int r = 0; r < t->world; r++) {
        struct nc_peer *p = &t->peers[r];
        if (hit && (p->sq_head || p->recv))
            hit[r] = true;
    }
    for (struct nc_go *g = t->go_head; g && hit; g = g->next)
        hit[g->leader] = true;
    for (int r = 0; r < t->world; r++)
        if (!hit || hit[r])
            if (r != t->rank)
                peer_fail(t, r, code, why);
    free(hit);
}

/* A peer is unusable: complete what waits for it, drop what it sent, tell the core (once). */
static void peer_fail(struct lite_transport *t, int peer, int code, const char *why)
{
    struct nc_peer *p = &t->peers[peer];
    if (p->failed)
        return;
    p->failed = true;
    t->lost_any = true;
    bool in_flight = false;
    for (struct nc_group *g = t->g_head; g; g = g->next)
        in_flight |= g->peer == peer;
    if (in_flight && !t->comm_dead) {
        /* Its kernels would wait for the peer forever. */
        char w[300];
        snprintf(w, sizeof(w), "rank %d is unusable (%s) with NCCL transfers in flight", peer, why);
        nc_abort(t, code, w); /* comes back here for this peer: already marked */
    }
    while (p->sq_head) {
        struct nc_xfer *x = p->sq_head;
        p->sq_head = x->next;
        t->up->send_done(t->core, x->core_op, code);
        xfer_free(t, x);
    }
    p->sq_tail = NULL;
    if (p->recv && !p->recv_posted)
        xfer_free(t, p->recv);
    if (!p->recv_posted)
        p->recv = NULL;
    while (p->held_head) {
        struct nc_held *h = p->held_head;
        p->held_head = h->next;
        free(h);
    }
    p->held_tail = NULL;
    for (struct nc_go **gp = &t->go_head; *gp;) {
        struct nc_go *g = *gp;
        if (g->leader == peer) {
            *gp = g->next;
            free(g);
        } else {
            gp = &g->next;
        }
    }
    t->go_tail = NULL;
    for (struct nc_go *g = t->go_head; g; g = g->next)
        t->go_tail = g;
    t->up->peer_failed(t->core, peer, code, why);
}

/* ---- device payloads ---- */

static int scratch_get(struct lite_transport *t, size_t len, struct nc_scratch **out)
{
    struct nc_scratch *best = NULL;
    if (len > ((size_t)1 << 46))
        return -EMSGSIZE; /* a length off the wire: no device holds it */
    for (struct nc_scratch *s = t->scratch; s; s = s->next)
        if (!s->busy && s->cap >= len && (!best || s->cap < best->cap))
            best = s;
    if (!best) {
        size_t cap = 1u << 20;
        while (cap < len)
            cap *= 2;
        best = calloc(1, sizeof(*best));
        if (!best)
            return -ENOMEM;
        int rc = lite_gpu_mem_alloc(t->device, cap, &best->dev);
        if (rc) {
            free(best);
            return rc;
        }
        best->cap = cap;
        best->next = t->scratch;
        t->scratch = best;
    }
    best->busy = true;
    *out = best;
    return 0;
}

/* A device payload's envelope from `peer`, in order: begin the core's receive now, so the
 * destination is known when the pair's group is posted. */
static void env_begin(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr)
{
    struct nc_peer *p = &t->peers[peer];
    void *dst = NULL, *token = NULL;
    int rc = t->up->recv_begin(t->core, peer, hdr, &dst, &token);
    char why[128];
    if (rc < 0) {
        snprintf(why, sizeof(why), "rank %d sent a message the core refused (%d)", peer, rc);
        peer_fail(t, peer, rc, why);
        return;
    }
    struct nc_xfer *x = calloc(1, sizeof(*x));
    if (!x) {
        peer_fail(t, peer, -ENOMEM, "out of memory for a device receive");
        return;
    }
    x->peer = peer;
    x->len = hdr->len;
    x->token = token;
    if (dst && lite_gpu_ptr_is_device(dst, NULL)) {
        x->dev = dst;
    } else {
        x->host_dst = dst; /* NULL: discard */
        rc = scratch_get(t, hdr->len, &x->scratch);
        if (rc) {
            free(x);
            snprintf(why, sizeof(why), "no device memory to receive %llu bytes from rank %d",
                     (unsigned long long)hdr->len, peer);
            peer_fail(t, peer, rc, why);
            return;
        }
        x->dev = x->scratch->dev;
    }
    p->recv = x;
    p->recv_posted = false;
}

static void deliver_held(struct lite_transport *t, int peer, struct nc_held *h)
{
    if (h->env) {
        env_begin(t, peer, &h->hdr);
        return;
    }
    void *dst = NULL, *token = NULL;
    int rc = t->up->recv_begin(t->core, peer, &h->hdr, &dst, &token);
    if (rc < 0) {
        char why[96];
        snprintf(why, sizeof(why), "rank %d sent a message the core refused (%d)", peer, rc);
        peer_fail(t, peer, rc, why);
        return;
    }
    if (dst && h->hdr.len) {
        if (lite_gpu_ptr_is_device(dst, NULL)) {
            rc = lite_gpu_copy_async(dst, h->data, h->hdr.len, t->cstream);
            if (!rc)
                rc = lite_gpu_stream_sync(t->cstream);
            if (rc)
                peer_fail(t, peer, rc, "copying a message into device memory failed");
        } else {
            memcpy(dst, h->data, h->hdr.len);
        }
    }
    t->up->recv_end(t->core, peer, token);
}

/* The peer's device receive is over: hand over what waited behind it, in order, until the
 * next envelope begins another. */
static void unhold(struct lite_transport *t, int peer)
{
    struct nc_peer *p = &t->peers[peer];
    while (!p->failed && !p->recv && p->held_head) {
        struct nc_held *h = p->held_head;
        p->held_head = h->next;
        if (!p->held_head)
            p->held_tail = NULL;
        deliver_held(t, peer, h);
        free(h);
    }
}

static bool can_post(const struct lite_transport *t)
{
    return t->comm && !t->comm_busy && !t->comm_dead;
}

/* Post {send s, receive r} with `peer` as one NCCL group on the library's stream. */
static int post_group(struct lite_transport *t, int peer, struct nc_xfer *s, struct nc_xfer *r)
{
    struct nc_group *g = calloc(1, sizeof(*g));
    int rc = g ? lite_gpu_event_create(t->device, &g->ev) : -ENOMEM;
    if (rc) {
        /* Nothing posted, but the peer expects this group: the pair cannot go on. */
        free(g);
        if (s) {
            t->up->send_done(t->core, s->core_op, rc);
            xfer_free(t, s);
        }
        if (r) {
            t->peers[peer].recv = NULL;
            t->peers[peer].recv_posted = false;
            xfer_free(t, r);
        }
        peer_fail(t, peer, rc, "no memory for an NCCL group");
        return rc;
    }
    cudaStream_t st = (cudaStream_t)lite_gpu_stream_raw(t->stream);
    ncclResult_t nr = g_nc.GroupStart();
    if (nr == ncclSuccess && s)
        nr = g_nc.Send(s->dev, s->len, ncclUint8, peer, t->comm, st);
    if (nr == ncclSuccess && r)
        nr = g_nc.Recv(r->dev, r->len, ncclUint8, peer, t->comm, st);
    ncclResult_t ne = g_nc.GroupEnd();
    if (nr == ncclSuccess)
        nr = ne;
    g->peer = peer;
    g->s = s;
    g->r = r;
    g->posted_ns = now_ns();
    nc_log(t, LITE_LOG_DEBUG, "group with rank %d: send %zu, receive %zu bytes: %s", peer,
           s ? s->len : 0, r ? r->len : 0, nc_err(nr));
    if (t->g_tail)
        t->g_tail->next = g;
    else
        t->g_head = g;
    t->g_tail = g;
    if (nr == ncclInProgress) {
        t->comm_busy = true; /* recorded once NCCL has enqueued the work */
        return 0;
    }
    if (nr != ncclSuccess) {
        char why[200];
        snprintf(why, sizeof(why), "ncclSend/ncclRecv with rank %d failed: %s", peer, nc_err(nr));
        nc_abort(t, -EIO, why);
        return -EIO;
    }
    rc = lite_gpu_event_record(g->ev, t->stream);
    if (rc) {
        nc_abort(t, rc, "recording a CUDA event failed");
        return rc;
    }
    g->recorded = true;
    return 0;
}

/* Tell `peer` (a follower) what this group moves, then post our side. */
static void lead(struct lite_transport *t, int peer, struct nc_xfer *s, struct nc_xfer *r)
{
    struct nc_peer *p = &t->peers[peer];
    struct nc_op *o = op_get(t, OP_CTL, NULL);
    struct lite_msg_hdr go = {
        .tag = (s ? 1u : 0u) | (r ? 2u : 0u), .channel = LITE_CHAN_CTRL, .flags = F_GO};
    int rc = o ? lite_tcp_ops.msg_send(t->inner, peer, &go, NULL, o) : -ENOMEM;
    if (rc) {
        if (o)
            op_put(t, o);
        peer_fail(t, peer, rc, "sending a GO to the follower failed");
        return;
    }
    if (s) {
        p->sq_head = s->next;
        if (!p->sq_head)
            p->sq_tail = NULL;
        s->next = NULL;
    }
    if (r)
        p->recv_posted = true;
    post_group(t, peer, s, r);
}

/* Leader side: only with nothing on our stream (the group is then at its front; see the
 * header comment), pick the next higher-ranked peer with work, round robin. */
static void try_lead(struct lite_transport *t)
{
    if (!can_post(t) || t->g_head || t->go_head)
        return;
    for (int i = 1; i <= t->world; i++) { /* every rank once, the last one led last */
        int q = (t->rr + i) % t->world;
        if (q <= t->rank)
            continue;
        struct nc_peer *p = &t->peers[q];
        if (p->failed)
            continue;
        struct nc_xfer *s = p->sq_head;
        struct nc_xfer *r = p->recv && !p->recv_posted ? p->recv : NULL;
        if (!s && !r)
            continue;
        t->rr = q;
        lead(t, q, s, r);
        return;
    }
}

/* Follower side: match GOs in the order they came. */
static void follow(struct lite_transport *t)
{
    while (t->go_head && can_post(t)) {
        struct nc_go *g = t->go_head;
        struct nc_peer *p = &t->peers[g->leader];
        struct nc_xfer *r = NULL, *s = NULL;
        if (g->flags & 1) {
            r = p->recv && !p->recv_posted ? p->recv : NULL;
            if (!r)
                return; /* its envelope waits behind an earlier receive from the leader */
        }
        if (g->flags & 2) {
            s = p->sq_head;
            if (!s) {
                peer_fail(t, g->leader, -LITE_ERR_PROTOCOL,
                          "the NCCL leader asked for a device payload this rank never announced");
                continue; /* peer_fail dropped its GOs */
            }
            p->sq_head = s->next;
            if (!p->sq_head)
                p->sq_tail = NULL;
            s->next = NULL;
        }
        if (r)
            p->recv_posted = true;
        t->go_head = g->next;
        if (!t->go_head)
            t->go_tail = NULL;
        int leader = g->leader;
        free(g);
        post_group(t, leader, s, r);
    }
}

/* A group's bytes are in place: complete its sends, end its receive, release what waited. */
static int group_done(struct lite_transport *t, struct nc_group *g)
{
    int peer = g->peer;
    nc_log(t, LITE_LOG_DEBUG, "group with rank %d done", peer);
    if (g->s) {
        t->up->send_done(t->core, g->s->core_op, 0);
        xfer_free(t, g->s);
    }
    if (g->r) {
        struct nc_xfer *x = g->r;
        struct nc_peer *p = &t->peers[peer];
        int rc = 0;
        if (x->host_dst && x->len) {
            rc = lite_gpu_copy_async(x->host_dst, x->dev, x->len, t->cstream);
            if (!rc)
                rc = lite_gpu_stream_sync(t->cstream);
        }
        p->recv = NULL;
        p->recv_posted = false;
        if (rc) {
            xfer_free(t, x);
            peer_fail(t, peer, rc, "copying a device payload to host memory failed");
        } else {
            t->up->recv_end(t->core, peer, x->token);
            xfer_free(t, x);
            unhold(t, peer);
        }
    }
    lite_gpu_event_destroy(g->ev);
    free(g);
    return 1;
}

/* Everything GPU-side that can move without the network. */
static int nc_poll(struct lite_transport *t)
{
    if (!t->comm || t->comm_dead)
        return 0;
    int events = 0;
    if (t->comm_busy || t->g_head) {
        ncclResult_t st = ncclSuccess;
        ncclResult_t rc = g_nc.CommGetAsyncError(t->comm, &st);
        if (rc != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
            char why[200];
            snprintf(why, sizeof(why), "NCCL reported an error: %s",
                     nc_err(rc != ncclSuccess ? rc : st));
            nc_abort(t, -LITE_ERR_PEER_LOST, why);
            return 1;
        }
        if (t->comm_busy && st == ncclSuccess) {
            t->comm_busy = false;
            if (t->g_tail && !t->g_tail->recorded) {
                int erc = lite_gpu_event_record(t->g_tail->ev, t->stream);
                if (erc) {
                    nc_abort(t, erc, "recording a CUDA event failed");
                    return 1;
                }
                t->g_tail->recorded = true;
            }
        }
    }
    /* One stream: groups finish in the order they were posted. */
    while (t->g_head && t->g_head->recorded) {
        struct nc_group *g = t->g_head;
        int q = lite_gpu_event_query(g->ev);
        if (q == -EAGAIN)
            break;
        if (q < 0) {
            nc_abort(t, q, "a CUDA error on the NCCL stream");
            return events + 1;
        }
        t->g_head = g->next;
        if (!t->g_head)
            t->g_tail = NULL;
        events += group_done(t, g);
    }
    if (t->g_head && t->op_timeout_ms > 0 &&
        now_ns() - t->g_head->posted_ns > (int64_t)t->op_timeout_ms * 1000000LL) {
        char why[200];
        snprintf(why, sizeof(why), "an NCCL transfer with rank %d did not finish within %d ms",
                 t->g_head->peer, t->op_timeout_ms);
        nc_abort(t, -ETIMEDOUT, why);
        return events + 1;
    }
    follow(t);
    try_lead(t);
    return events;
}

/* ---- upcalls from the inner tcp instance ---- */

static struct nc_rx *rx_open(struct lite_transport *t, int peer)
{
    struct nc_peer *p = &t->peers[peer];
    struct nc_rx *rx = &p->rx;
    if (p->rx_open) {
        rx = calloc(1, sizeof(*rx));
        if (!rx)
            return NULL;
        rx->heap = true;
    } else {
        memset(rx, 0, sizeof(*rx));
        p->rx_open = true;
    }
    rx->peer = peer;
    return rx;
}

static void rx_close(struct lite_transport *t, struct nc_rx *rx)
{
    if (rx->heap)
        free(rx);
    else
        t->peers[rx->peer].rx_open = false;
}

static bool held(const struct nc_peer *p)
{
    return p->recv || p->held_head;
}

static int up_recv_begin(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr,
                         void **dst, void **token)
{
    struct lite_transport *t = (struct lite_transport *)core;
    struct nc_peer *p = &t->peers[peer];
    struct nc_rx *rx = rx_open(t, peer);
    if (!rx)
        return -ENOMEM;
    rx->hdr = *hdr;
    *token = rx;
    *dst = NULL;
    if (p->failed) {
        rx->kind = RX_DROP;
        return 0;
    }
    if ((hdr->flags & (F_ENV | F_GO)) == F_ENV && hdr->len == ENV_LEN) {
        rx->kind = RX_ENV;
        *dst = rx->env;
        return 0;
    }
    if (hdr->flags == F_GO && hdr->channel == LITE_CHAN_CTRL && hdr->len == 0 && hdr->tag <= 3 &&
        hdr->tag && peer < t->rank) {
        rx->kind = RX_GO;
        return 0;
    }
    if (hdr->channel >= LITE_CHAN_COUNT || (hdr->flags & (F_ENV | F_GO))) {
        rx_close(t, rx);
        return -LITE_ERR_PROTOCOL;
    }
    if (held(p)) {
        struct nc_held *h =
            hdr->len <= SIZE_MAX - sizeof(*h) ? malloc(sizeof(*h) + hdr->len) : NULL;
        if (!h) {
            rx_close(t, rx);
            return -ENOMEM;
        }
        h->next = NULL;
        h->env = false;
        h->hdr = *hdr;
        rx->kind = RX_HOLD;
        rx->buf = h;
        *dst = h->data;
        return 0;
    }
    int rc = t->up->recv_begin(t->core, peer, hdr, &rx->core_dst, &rx->core_token);
    if (rc < 0) {
        rx_close(t, rx);
        return rc;
    }
    rx->kind = RX_PASS;
    *dst = rx->core_dst;
    if (rx->core_dst && hdr->len && lite_gpu_ptr_is_device(rx->core_dst, NULL)) {
        /* A host payload for device memory: through a bounce buffer, copied at the end. */
        if (p->stage_cap < hdr->len) {
            void *b = realloc(p->stage, hdr->len);
            if (!b) {
                rx->kind = RX_STAGE_FAIL; /* discarded, then the pair fails */
                *dst = NULL;
                return 0;
            }
            p->stage = b;
            p->stage_cap = hdr->len;
        }
        rx->kind = RX_STAGE;
        *dst = p->stage;
    }
    return 0;
}

static void up_recv_end(struct lite_core *core, int peer, void *token)
{
    struct lite_transport *t = (struct lite_transport *)core;
    struct nc_peer *p = &t->peers[peer];
    struct nc_rx *rx = token;
    switch (rx->kind) {
    case RX_PASS:
        t->up->recv_end(t->core, peer, rx->core_token);
        break;
    case RX_STAGE: {
        int rc = lite_gpu_copy_async(rx->core_dst, p->stage, rx->hdr.len, t->cstream);
        if (!rc)
            rc = lite_gpu_stream_sync(t->cstream);
        t->up->recv_end(t->core, peer, rx->core_token);
        if (rc)
            peer_fail(t, peer, rc, "copying a message into device memory failed");
        break;
    }
    case RX_STAGE_FAIL:
        t->up->recv_end(t->core, peer, rx->core_token);
        peer_fail(t, peer, -ENOMEM, "no host memory to stage a message for device memory");
        break;
    case RX_HOLD: {
        struct nc_held *h = rx->buf;
        if (p->failed) {
            free(h);
            break;
        }
        if (p->held_tail)
            p->held_tail->next = h;
        else
            p->held_head = h;
        p->held_tail = h;
        break;
    }
    case RX_ENV: {
        struct lite_msg_hdr h = rx->hdr;
        uint64_t len;
        memcpy(&len, rx->env, sizeof(len));
        h.flags &= (uint8_t)~F_ENV;
        h.len = len;
        if (p->failed)
            break;
        if (held(p)) {
            struct nc_held *m = malloc(sizeof(*m));
            if (!m) {
                peer_fail(t, peer, -ENOMEM, "out of memory holding an envelope");
                break;
            }
            m->next = NULL;
            m->env = true;
            m->hdr = h;
            if (p->held_tail)
                p->held_tail->next = m;
            else
                p->held_head = m;
            p->held_tail = m;
        } else {
            env_begin(t, peer, &h);
        }
        break;
    }
    case RX_GO: {
        if (p->failed)
            break;
        struct nc_go *g = malloc(sizeof(*g));
        if (!g) {
            peer_fail(t, peer, -ENOMEM, "out of memory for a GO");
            break;
        }
        g->next = NULL;
        g->leader = peer;
        g->flags = (unsigned)rx->hdr.tag;
        if (t->go_tail)
            t->go_tail->next = g;
        else
            t->go_head = g;
        t->go_tail = g;
        break;
    }
    default:
        break;
    }
    rx_close(t, rx);
}

static int up_recv_msg(struct lite_core *core, int peer, const struct lite_msg_hdr *hdr,
                       const void *payload)
{
    void *dst = NULL, *token = NULL;
    int rc = up_recv_begin(core, peer, hdr, &dst, &token);
    if (rc < 0)
        return rc;
    if (dst && hdr->len)
        memcpy(dst, payload, hdr->len); /* up_recv_begin never hands out device memory */
    up_recv_end(core, peer, token);
    return 0;
}

static void up_send_done(struct lite_core *core, void *op, int status)
{
    struct lite_transport *t = (struct lite_transport *)core;
    struct nc_op *o = op;
    if (o->kind == OP_HOST)
        t->up->send_done(t->core, o->core_op, status);
    op_put(t, o); /* OP_CTL: a failure also breaks the pair, reported by peer_failed */
}

static void up_peer_failed(struct lite_core *core, int peer, int status, const char *why)
{
    peer_fail((struct lite_transport *)core, peer, status, why);
}

static const struct lite_core_upcalls g_inner_up = {
    .size = sizeof(struct lite_core_upcalls),
    .recv_begin = up_recv_begin,
    .recv_end = up_recv_end,
    .recv_msg = up_recv_msg,
    .send_done = up_send_done,
    .peer_failed = up_peer_failed,
};

/* ---- the ops ---- */

/* The longest reason nccl_probe gives: its prefix and w, or g_nc_why. */
#define NC_PROBE_WHY (sizeof("no CUDA device ()") + 300)

static int nccl_probe(const struct lite_tp_env *env, char *why, size_t why_len)
{
    (void)env; /* no variables of its own */
    char w[300];
    if (lite_gpu_available(w, sizeof(w))) {
        snprintf(why, why_len, "no CUDA device (%s)", w);
        return -ENODEV;
    }
    return nc_api_get(why, why_len);
}

static void nccl_close(struct lite_transport *t);

static int nccl_open(const struct lite_transport_params *params, struct lite_transport **out)
{
    char why[NC_PROBE_WHY]; /* room for any reason nccl_probe gives, uncut */
    int rc = nccl_probe(params->env, why, sizeof(why));
    if (rc)
        return rc;
    struct lite_transport *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->rank = params->rank;
    t->world = params->world_size;
    t->core = params->core;
    t->up = params->up;
    t->log_level = params->log_level;
    t->log = params->env && params->env->log ? params->env->log : NULL;
    t->op_timeout_ms = params->size >= offsetof(struct lite_transport_params, op_timeout_ms) +
                                           sizeof(params->op_timeout_ms)
                           ? params->op_timeout_ms
                           : 0;
    t->device = -1;
    t->peers = calloc((size_t)t->world, sizeof(*t->peers));
    if (!t->peers) {
        free(t);
        return -ENOMEM;
    }
    struct lite_transport_params ip = *params;
    ip.core = (struct lite_core *)t;
    ip.up = &g_inner_up;
    rc = lite_tcp_ops.open(&ip, &t->inner);
    if (rc) {
        free(t->peers);
        free(t);
        return rc;
    }
    if (t->rank == 0) {
        ncclResult_t nr = g_nc.GetUniqueId(&t->id);
        if (nr != ncclSuccess) {
            nc_log(t, LITE_LOG_ERROR, "ncclGetUniqueId failed: %s", nc_err(nr));
            nccl_close(t);
            return -EIO;
        }
    }
    *out = t;
    return 0;
}

static void nccl_close(struct lite_transport *t)
{
    if (t->comm) {
        bool clean = !t->lost_any && !t->g_head && !t->comm_busy;
        if (clean) {
            /* Finalize flushes NCCL's own work; bounded, then abort. */
            int64_t end = now_ns() + 5000000000LL;
            ncclResult_t r = g_nc.CommFinalize(t->comm), st = ncclInProgress;
            while (r == ncclSuccess || r == ncclInProgress) {
                if (g_nc.CommGetAsyncError(t->comm, &st) != ncclSuccess || st != ncclInProgress)
                    break;
                if (now_ns() > end)
                    break;
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
            }
            clean = (r == ncclSuccess || r == ncclInProgress) && st == ncclSuccess;
        }
        if (clean)
            g_nc.CommDestroy(t->comm);
        else
            g_nc.CommAbort(t->comm);
        t->comm = NULL;
    }
    /* The communicator is over, so its work on the stream ends: wait for it before freeing
     * what it may still write (scratch, and the application's buffers once we return). */
    if (t->stream)
        lite_gpu_stream_sync(t->stream);
    while (t->g_head) {
        struct nc_group *g = t->g_head;
        t->g_head = g->next;
        if (g->s)
            xfer_free(t, g->s);
        if (g->r) {
            /* The peer's posted receive is this one: freed here, not again below. */
            t->peers[g->peer].recv = NULL;
            t->peers[g->peer].recv_posted = false;
            xfer_free(t, g->r);
        }
        lite_gpu_event_destroy(g->ev);
        free(g);
    }
    t->g_tail = NULL;
    if (t->inner)
        lite_tcp_ops.close(t->inner);
    for (int r = 0; r < t->world; r++) {
        struct nc_peer *p = &t->peers[r];
        while (p->sq_head) {
            struct nc_xfer *x = p->sq_head;
            p->sq_head = x->next;
            xfer_free(t, x);
        }
        if (p->recv)
            xfer_free(t, p->recv);
        while (p->held_head) {
            struct nc_held *h = p->held_head;
            p->held_head = h->next;
            free(h);
        }
        free(p->stage);
    }
    while (t->go_head) {
        struct nc_go *g = t->go_head;
        t->go_head = g->next;
        free(g);
    }
    while (t->scratch) {
        struct nc_scratch *s = t->scratch;
        t->scratch = s->next;
        lite_gpu_mem_free(s->dev);
        free(s);
    }
    while (t->op_free) {
        struct nc_op *o = t->op_free;
        t->op_free = o->next;
        free(o);
    }
    lite_gpu_stream_destroy(t->stream);
    lite_gpu_stream_destroy(t->cstream);
    free(t->peers);
    free(t);
}

/* Address blob: u32 magic | u16 tcp blob length | u8 has id | u8 0 | tcp blob | [rank 0: the
 * 128-byte ncclUniqueId]. */
#define BLOB_MAGIC 0x4c43434eu /* "NCCL" */
#define BLOB_HDR   8

static int nccl_addr_get(struct lite_transport *t, void *blob, size_t *len)
{
    uint8_t *b = blob;
    size_t idlen = t->rank == 0 ? sizeof(ncclUniqueId) : 0;
    if (*len < BLOB_HDR + idlen + 1)
        return -ENOSPC;
    size_t tl = *len - BLOB_HDR - idlen;
    int rc = lite_tcp_ops.addr_get(t->inner, b + BLOB_HDR, &tl);
    if (rc)
        return rc;
    uint32_t magic = BLOB_MAGIC;
    uint16_t tl16 = (uint16_t)tl;
    memcpy(b, &magic, 4);
    memcpy(b + 4, &tl16, 2);
    b[6] = idlen ? 1 : 0;
    b[7] = 0;
    if (idlen)
        memcpy(b + BLOB_HDR + tl, &t->id, idlen);
    *len = BLOB_HDR + tl + idlen;
    return 0;
}

static int nccl_connect_all(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                            int64_t deadline_ns, char *why, size_t why_len)
{
    const void **tb = calloc((size_t)t->world, sizeof(*tb));
    size_t *tl = calloc((size_t)t->world, sizeof(*tl));
    int rc = 0;
    if (!tb || !tl) {
        rc = -ENOMEM;
        goto out;
    }
    for (int r = 0; r < t->world; r++) {
        const uint8_t *b = blobs[r];
        uint32_t magic = 0;
        uint16_t l = 0;
        if (lens[r] >= BLOB_HDR) {
            memcpy(&magic, b, 4);
            memcpy(&l, b + 4, 2);
        }
        size_t want = BLOB_HDR + (size_t)l + (r == 0 ? sizeof(ncclUniqueId) : 0);
        if (magic != BLOB_MAGIC || lens[r] != want || b[6] != (r == 0)) {
            snprintf(why, why_len, "nccl: rank %d published no NCCL address (another transport?)",
                     r);
            rc = -LITE_ERR_PROTOCOL;
            goto out;
        }
        tb[r] = b + BLOB_HDR;
        tl[r] = l;
    }
    memcpy(&t->id, (const uint8_t *)blobs[0] + BLOB_HDR + tl[0], sizeof(t->id));
    rc = lite_tcp_ops.connect_all(t->inner, tb, tl, deadline_ns, why, why_len);
    if (rc)
        goto out;

    /* Non-blocking init, polled against the init deadline: a rank that never joins cannot
     * hang this one. */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t nr = g_nc.CommInitRankConfig(&t->comm, t->world, t->id, t->rank, &cfg);
    ncclResult_t st = nr;
    while (nr == ncclSuccess || nr == ncclInProgress) {
        if (!t->comm) {
            nr = ncclInternalError;
            break;
        }
        nr = g_nc.CommGetAsyncError(t->comm, &st);
        if (nr != ncclSuccess || st != ncclInProgress)
            break;
        if (now_ns() > deadline_ns) {
            g_nc.CommAbort(t->comm);
            t->comm = NULL;
            snprintf(why, why_len,
                     "nccl: the communicator of %d ranks was not ready within the init timeout "
                     "(a rank missing, or NCCL cannot reach it; NCCL_DEBUG=INFO says more)",
                     t->world);
            rc = -ETIMEDOUT;
            goto out;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (nr != ncclSuccess || st != ncclSuccess) {
        snprintf(why, why_len, "nccl: ncclCommInitRankConfig failed: %s",
                 nc_err(nr != ncclSuccess ? nr : st));
        if (t->comm)
            g_nc.CommAbort(t->comm);
        t->comm = NULL;
        rc = -EIO;
        goto out;
    }
    if (g_nc.CommCuDevice(t->comm, &t->device) != ncclSuccess) {
        snprintf(why, why_len, "nccl: ncclCommCuDevice failed");
        rc = -EIO;
        goto out;
    }
    rc = lite_gpu_stream_create(t->device, &t->stream);
    if (!rc)
        rc = lite_gpu_stream_create(t->device, &t->cstream);
    if (rc)
        snprintf(why, why_len, "nccl: creating CUDA streams on device %d failed", t->device);
    else
        nc_log(t, LITE_LOG_INFO, "rank %d/%d on CUDA device %d, NCCL %d", t->rank, t->world,
               t->device, g_nc.version);
out:
    free(tb);
    free(tl);
    return rc;
}

static int nccl_msg_send(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                         const void *payload, void *op)
{
    if (peer < 0 || peer >= t->world || peer == t->rank)
        return -EINVAL;
    struct nc_peer *p = &t->peers[peer];
    if (p->failed)
        return -LITE_ERR_PEER_LOST;
    if (hdr->len && payload && lite_gpu_ptr_is_device(payload, NULL)) {
        if (t->comm_dead || !t->comm) {
            nc_log(t, LITE_LOG_ERROR,
                   "a device payload to rank %d cannot move: the NCCL communicator was aborted",
                   peer);
            return -EIO;
        }
        struct nc_xfer *x = calloc(1, sizeof(*x));
        struct nc_op *o = x ? op_get(t, OP_CTL, NULL) : NULL;
        if (!o) {
            free(x);
            return -ENOMEM;
        }
        x->peer = peer;
        x->send = true;
        x->dev = (void *)payload;
        x->len = hdr->len;
        x->core_op = op;
        uint64_t len = hdr->len;
        memcpy(o->env, &len, ENV_LEN);
        struct lite_msg_hdr env = *hdr;
        env.flags = (uint8_t)(hdr->flags | F_ENV);
        env.len = ENV_LEN;
        int rc = lite_tcp_ops.msg_send(t->inner, peer, &env, o->env, o);
        if (rc) {
            op_put(t, o);
            free(x);
            return rc;
        }
        if (p->sq_tail)
            p->sq_tail->next = x;
        else
            p->sq_head = x;
        p->sq_tail = x;
        try_lead(t);
        return 0;
    }
    struct nc_op *o = op_get(t, OP_HOST, op);
    if (!o)
        return -ENOMEM;
    int rc = lite_tcp_ops.msg_send(t->inner, peer, hdr, payload, o);
    if (rc)
        op_put(t, o);
    return rc;
}

static bool gpu_pending(const struct lite_transport *t)
{
    return t->comm && !t->comm_dead && (t->g_head || t->comm_busy || t->go_head);
}

static int nccl_progress(struct lite_transport *t, int timeout_ms)
{
    int events = nc_poll(t);
    /* With GPU work outstanding, completions come from the GPU, which wakes no socket: sleep at
     * most 1 ms on the sockets (the core has polled back to back before it asks for a sleep). */
    int wait = events ? 0 : gpu_pending(t) && timeout_ms > 1 ? 1 : timeout_ms;
    int rc = lite_tcp_ops.progress(t->inner, wait);
    if (rc < 0)
        return rc;
    events += rc;
    events += nc_poll(t);
    return events;
}

const struct lite_transport_ops lite_nccl_ops = {
    .size = sizeof(struct lite_transport_ops),
    .abi_version = LITE_TRANSPORT_ABI_VERSION,
    .name = "nccl",
    /* Device buffers as they are, in messages and registrations; one-sided ops are emulated by
     * the core over msg_send. */
    .caps = LITE_CAP_DEVICE_MEM | LITE_CAP_DEVICE_MSG,
    .probe = nccl_probe,
    .open = nccl_open,
    .close = nccl_close,
    .addr_get = nccl_addr_get,
    .connect_all = nccl_connect_all,
    .msg_send = nccl_msg_send,
    .progress = nccl_progress,
    .tunables = lite_tcp_tunables, /* the inner tcp instance's */
};
