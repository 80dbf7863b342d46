/*
 * loop.c - the in-process backend: every rank is a thread of one process, and a message is a
 * heap copy put on the receiver's queue. No sockets, no one-sided ops: it implements only the
 * six required ops (open, close, addr_get, connect_all, msg_send, progress), so the core carries
 * one-sided ops and the rendezvous of large messages as messages (src/core/rma_emu.c). It is the
 * template of docs/BACKENDS.md and the stand-in for message-only backends (QUIC, NCCL) in tests.
 *
 * Ranks find each other through the core's bootstrap (over loopback, like any backend): each
 * rank's address blob names its inbox by a process-wide id, and connect_all looks the ids up in
 * a registry of live inboxes (never dereferencing an address that came off the network). An
 * inbox is reference-counted: a peer that connected to it keeps it alive after its owner closed,
 * so a send racing with the owner's close finds it marked closed instead of freed memory.
 *
 * Completions: msg_send copies the payload, so the caller's buffer is free at once, but
 * send_done is reported at the sender's next progress, as a real network's would be. Delivery:
 * short messages in one recv_msg upcall, longer ones through recv_begin / recv_end, copied in
 * pieces straight into the core's destination (as a byte stream backend would).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "litetx/litetx.h"
#include "litetx/transport.h"
#include "loop_gate.h"

#define BLOB_MAGIC 0x504f4f4cu /* "LOOP" */
#define BLOB_LEN   16          /* u32 magic | u32 pid | u64 inbox id */
#define SHORT_MAX  256         /* longer payloads go through recv_begin, in pieces */
#define PIECE      (64 * 1024)

struct loop_msg {
    struct loop_msg *next;
    int src;
    bool bye;     /* the sender closed (in order) or was cut (test gate): nothing follows */
    int bye_code; /* -ESHUTDOWN for a close, -LITE_ERR_PEER_LOST for a cut */
    struct lite_msg_hdr hdr;
    uint8_t data[];
};

/* One rank's inbox, shared with every peer that sends to it. */
struct loop_inbox {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct loop_msg *head, *tail; /* under mu */
    bool closed;                  /* under mu: the owner closed, sends to it fail */
    uint64_t id;
    int rank; /* the owner's (the test gate finds inboxes by rank) */
    int refs; /* under g_mu: the owner and each connected peer */
};

/* Process-wide registry of live inboxes (several jobs of threads may share one process). */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
/* Live inboxes by id (ids are never reused; a closed one's entry is NULL): a rank of an N-rank
 * job looks up N of them, so a list walked per lookup made a job's start cost N^3 under the
 * one lock (minutes at 4,096 ranks). */
static struct loop_inbox **g_by_id;
static uint64_t g_next_id, g_cap;

struct send_done {
    void *op;
    int status;
};

struct lite_transport {
    int rank, world;
    struct lite_core *core;
    const struct lite_core_upcalls *up;
    struct loop_inbox *in;          /* mine */
    struct loop_inbox **peers;      /* each peer's (a reference held), after connect_all */
    bool *failed;                   /* peers reported to the core as failed (at most once each) */
    struct send_done *done, *spare; /* send_done owed, reported at the next progress */
    size_t ndone, cap, spare_cap;
};

static void inbox_unref(struct loop_inbox *b)
{
    pthread_mutex_lock(&g_mu);
    bool last = --b->refs == 0;
    if (last)
        g_by_id[b->id] = NULL;
    pthread_mutex_unlock(&g_mu);
    if (!last)
        return;
    while (b->head) {
        struct loop_msg *m = b->head;
        b->head = m->next;
        free(m);
    }
    pthread_cond_destroy(&b->cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

static int loop_open(const struct lite_transport_params *params, struct lite_transport **out)
{
    struct lite_transport *t = calloc(1, sizeof(*t));
    struct loop_inbox *b = calloc(1, sizeof(*b));
    if (t) {
        t->peers = calloc((size_t)params->world_size, sizeof(*t->peers));
        t->failed = calloc((size_t)params->world_size, sizeof(*t->failed));
    }
    if (!t || !b || !t->peers || !t->failed) {
        if (t) {
            free(t->peers);
            free(t->failed);
        }
        free(t);
        free(b);
        return -ENOMEM;
    }
    t->rank = params->rank;
    t->world = params->world_size;
    t->core = params->core;
    t->up = params->up;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->refs = 1;
    b->rank = params->rank;
    pthread_mutex_lock(&g_mu);
    if (g_next_id + 1 >= g_cap) {
        uint64_t cap = g_cap ? g_cap * 2 : 64;
        struct loop_inbox **by = realloc(g_by_id, cap * sizeof(*by));
        if (!by) {
            pthread_mutex_unlock(&g_mu);
            pthread_cond_destroy(&b->cv);
            pthread_mutex_destroy(&b->mu);
            free(b);
            free(t->peers);
            free(t->failed);
            free(t);
            return -ENOMEM;
        }
        memset(by + g_cap, 0, (cap - g_cap) * sizeof(*by));
        g_by_id = by;
        g_cap = cap;
    }
    b->id = ++g_next_id;
    g_by_id[b->id] = b;
    pthread_mutex_unlock(&g_mu);
    t->in = b;
    *out = t;
    return 0;
}

/* Put m on b's queue; false when b's owner has closed (m is not taken). */
static bool inbox_put(struct loop_inbox *b, struct loop_msg *m)
{
    pthread_mutex_lock(&b->mu);
    bool open = !b->closed;
    if (open) {
        m->next = NULL;
        if (b->tail)
            b->tail->next = m;
        else
            b->head = m;
        b->tail = m;
        pthread_cond_signal(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
    return open;
}

/*
 * The test gate (loop_gate.h): while it is on, every message a loop backend of this process
 * sends waits on one process-wide list, in send order, until the test releases it, so a test
 * decides the order in which the core sees its messages instead of sleeping and hoping. A test
 * can also cut a pair of ranks: what a crash or a broken link looks like to both sides.
 * Meant for one job at a time (ranks are looked up by number among the open inboxes).
 */
struct gate_msg {
    struct gate_msg *next;
    uint64_t id;
    int dst;
    struct loop_inbox *to; /* a reference held */
    struct loop_msg *m;
};

#define GATE_CUTS 64

static pthread_mutex_t g_gate_mu = PTHREAD_MUTEX_INITIALIZER;
static bool g_gate_on;
static uint64_t g_gate_next;
static struct gate_msg *g_gate_head;
static struct {
    int a, b;
} g_cut[GATE_CUTS]; /* pairs whose messages are lost from now on */
static int g_ncut;

static bool is_cut(int a, int b)
{
    for (int i = 0; i < g_ncut; i++)
        if ((g_cut[i].a == a && g_cut[i].b == b) || (g_cut[i].a == b && g_cut[i].b == a))
            return true;
    return false;
}

/* Send m from this rank to `peer`: onto its queue, or onto the gate's list while the gate is
 * on. False when the peer's owner has closed (m is not taken). */
static bool post(struct loop_inbox *to, int dst, struct loop_msg *m)
{
    pthread_mutex_lock(&g_gate_mu);
    if (is_cut(m->src, dst)) { /* lost on the way, as on a broken link */
        pthread_mutex_unlock(&g_gate_mu);
        free(m);
        return true;
    }
    if (!g_gate_on) {
        pthread_mutex_unlock(&g_gate_mu);
        return inbox_put(to, m);
    }
    pthread_mutex_lock(&to->mu);
    bool open = !to->closed;
    pthread_mutex_unlock(&to->mu);
    struct gate_msg *g = open ? malloc(sizeof(*g)) : NULL;
    if (g) {
        pthread_mutex_lock(&g_mu);
        to->refs++;
        pthread_mutex_unlock(&g_mu);
        *g = (struct gate_msg){.id = ++g_gate_next, .dst = dst, .to = to, .m = m};
        struct gate_msg **tail = &g_gate_head;
        while (*tail)
            tail = &(*tail)->next;
        *tail = g;
    }
    pthread_mutex_unlock(&g_gate_mu);
    if (g)
        return true;
    return open ? inbox_put(to, m) : false;
}

/* Hand a held message to its inbox and drop the gate's reference. */
static void gate_deliver(struct gate_msg *g)
{
    if (!inbox_put(g->to, g->m))
        free(g->m);
    inbox_unref(g->to);
    free(g);
}

void lite_loop_gate(bool on)
{
    pthread_mutex_lock(&g_gate_mu);
    g_gate_on = on;
    if (!on) {
        while (g_gate_head) {
            struct gate_msg *g = g_gate_head;
            g_gate_head = g->next;
            gate_deliver(g);
        }
        g_ncut = 0;
    }
    pthread_mutex_unlock(&g_gate_mu);
}

size_t lite_loop_gate_list(struct lite_loop_held *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&g_gate_mu);
    for (struct gate_msg *g = g_gate_head; g; g = g->next, n++)
        if (n < max)
            out[n] = (struct lite_loop_held){
                .id = g->id, .src = g->m->src, .dst = g->dst, .bye = g->m->bye, .hdr = g->m->hdr};
    pthread_mutex_unlock(&g_gate_mu);
    return n;
}

int lite_loop_gate_release(uint64_t id)
{
    pthread_mutex_lock(&g_gate_mu);
    for (struct gate_msg **pp = &g_gate_head; *pp; pp = &(*pp)->next) {
        struct gate_msg *g = *pp;
        if (g->id != id)
            continue;
        /* An older message of the same pair goes first: a pair's order is the backend's
         * promise; the gate only decides when. */
        for (struct gate_msg *o = g_gate_head; o != g; o = o->next)
            if (o->m->src == g->m->src && o->dst == g->dst) {
                pthread_mutex_unlock(&g_gate_mu);
                return -EAGAIN;
            }
        *pp = g->next;
        gate_deliver(g);
        pthread_mutex_unlock(&g_gate_mu);
        return 0;
    }
    pthread_mutex_unlock(&g_gate_mu);
    return -ENOENT;
}

/* The open inbox of rank `rank` (the newest, with a reference), or NULL. */
static struct loop_inbox *inbox_of(int rank)
{
    struct loop_inbox *b = NULL;
    pthread_mutex_lock(&g_mu);
    for (uint64_t id = g_next_id; id > 0 && !b; id--)
        if (g_by_id[id] && g_by_id[id]->rank == rank) {
            pthread_mutex_lock(&g_by_id[id]->mu);
            bool open = !g_by_id[id]->closed;
            pthread_mutex_unlock(&g_by_id[id]->mu);
            if (open) {
                b = g_by_id[id];
                b->refs++;
            }
        }
    pthread_mutex_unlock(&g_mu);
    return b;
}

static void tell_lost(int to_rank, int from)
{
    struct loop_inbox *b = inbox_of(to_rank);
    struct loop_msg *m = b ? calloc(1, sizeof(*m)) : NULL;
    if (m) {
        m->src = from;
        m->bye = true;
        m->bye_code = -LITE_ERR_PEER_LOST;
        if (!inbox_put(b, m))
            free(m);
    }
    if (b)
        inbox_unref(b);
}

int lite_loop_gate_cut(int a, int b)
{
    int dropped = 0;
    pthread_mutex_lock(&g_gate_mu);
    if (g_ncut == GATE_CUTS) {
        pthread_mutex_unlock(&g_gate_mu);
        return -ENOSPC;
    }
    g_cut[g_ncut].a = a;
    g_cut[g_ncut].b = b;
    g_ncut++;
    for (struct gate_msg **pp = &g_gate_head; *pp;) {
        struct gate_msg *g = *pp;
        if (!is_cut(g->m->src, g->dst)) {
            pp = &g->next;
            continue;
        }
        *pp = g->next;
        free(g->m);
        inbox_unref(g->to);
        free(g);
        dropped++;
    }
    pthread_mutex_unlock(&g_gate_mu);
    /* Each side learns it as a crash: the pair ends, nothing after it. */
    tell_lost(a, b);
    tell_lost(b, a);
    return dropped;
}

static void loop_close(struct lite_transport *t)
{
    /* Peers learn of an orderly close from a BYE behind everything this rank sent them. */
    for (int r = 0; r < t->world; r++) {
        if (!t->peers[r])
            continue;
        struct loop_msg *m = calloc(1, sizeof(*m));
        if (m) {
            m->src = t->rank;
            m->bye = true;
            m->bye_code = -ESHUTDOWN;
            if (!post(t->peers[r], r, m))
                free(m);
        }
        inbox_unref(t->peers[r]);
    }
    pthread_mutex_lock(&t->in->mu);
    t->in->closed = true;
    pthread_mutex_unlock(&t->in->mu);
    inbox_unref(t->in);
    free(t->peers);
    free(t->failed);
    free(t->done);
    free(t->spare);
    free(t);
}

static int loop_addr_get(struct lite_transport *t, void *blob, size_t *len)
{
    if (*len < BLOB_LEN)
        return -ENOSPC;
    uint8_t *b = blob;
    uint32_t magic = BLOB_MAGIC, pid = (uint32_t)getpid();
    memcpy(b, &magic, 4);
    memcpy(b + 4, &pid, 4);
    memcpy(b + 8, &t->in->id, 8);
    *len = BLOB_LEN;
    return 0;
}

static int loop_connect_all(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                            int64_t deadline_ns, char *why, size_t why_len)
{
    for (int r = 0; r < t->world; r++) {
        if (r == t->rank)
            continue;
        uint32_t magic = 0, pid = 0;
        uint64_t id = 0;
        if (lens[r] == BLOB_LEN) {
            memcpy(&magic, blobs[r], 4);
            memcpy(&pid, (const uint8_t *)blobs[r] + 4, 4);
            memcpy(&id, (const uint8_t *)blobs[r] + 8, 8);
        }
        if (magic != BLOB_MAGIC) {
            snprintf(why, why_len, "loop: rank %d published no loop address", r);
            return -LITE_ERR_PROTOCOL;
        }
        if (pid != (uint32_t)getpid()) {
            snprintf(why, why_len,
                     "loop: rank %d runs in process %u, this rank in %d: the loop backend "
                     "connects the threads of one process only",
                     r, pid, (int)getpid());
            return -LITE_ERR_CONFIG;
        }
        pthread_mutex_lock(&g_mu);
        struct loop_inbox *b = id < g_cap ? g_by_id[id] : NULL; /* the id came off the wire */
        if (b)
            b->refs++;
        pthread_mutex_unlock(&g_mu);
        if (!b) {
            snprintf(why, why_len, "loop: rank %d closed before it was connected", r);
            return -ETIMEDOUT;
        }
        t->peers[r] = b;
    }
    return 0;
}

/* A failure is told once per peer. From inside msg_send too: the core defers it. */
static void peer_fail(struct lite_transport *t, int peer, int code, const char *why)
{
    if (t->failed[peer])
        return;
    t->failed[peer] = true;
    t->up->peer_failed(t->core, peer, code, why);
}

static int owe_done(struct lite_transport *t, void *op, int status)
{
    if (t->ndone == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        struct send_done *d = realloc(t->done, cap * sizeof(*d));
        if (!d)
            return -ENOMEM;
        t->done = d;
        t->cap = cap;
    }
    t->done[t->ndone++] = (struct send_done){op, status};
    return 0;
}

static int loop_msg_send(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                         const void *payload, void *op)
{
    if (peer < 0 || peer >= t->world || peer == t->rank || !t->peers[peer])
        return -EINVAL;
    if (t->failed[peer])
        return -LITE_ERR_PEER_LOST;
    if (hdr->len > SIZE_MAX - sizeof(struct loop_msg))
        return -EMSGSIZE;
    struct loop_msg *m = malloc(sizeof(*m) + hdr->len);
    if (!m || owe_done(t, op, 0)) {
        free(m);
        return -ENOMEM;
    }
    m->src = t->rank;
    m->bye = false;
    m->hdr = *hdr;
    if (hdr->len)
        memcpy(m->data, payload, hdr->len);
    if (!post(t->peers[peer], peer, m)) {
        free(m);
        t->ndone--;
        char why[64];
        snprintf(why, sizeof(why), "rank %d finalized and closed", peer);
        peer_fail(t, peer, -ESHUTDOWN, why);
        return -ESHUTDOWN;
    }
    return 0;
}

/* Hand one message to the core; false when it refused it (the pair is then broken). */
static bool deliver(struct lite_transport *t, struct loop_msg *m)
{
    const struct lite_msg_hdr *h = &m->hdr;
    int rc;
    if (h->len <= SHORT_MAX) {
        rc = t->up->recv_msg(t->core, m->src, h, m->data);
    } else {
        void *dst = NULL, *token = NULL;
        rc = t->up->recv_begin(t->core, m->src, h, &dst, &token);
        if (rc >= 0) {
            for (uint64_t off = 0; dst && off < h->len; off += PIECE) {
                uint64_t n = h->len - off < PIECE ? h->len - off : PIECE;
                memcpy((uint8_t *)dst + off, m->data + off, n);
            }
            t->up->recv_end(t->core, m->src, token);
        }
    }
    if (rc >= 0)
        return true;
    char why[96];
    snprintf(why, sizeof(why), "rank %d sent a message the core refused (%d)", m->src, rc);
    peer_fail(t, m->src, rc, why);
    return false;
}

static int loop_progress(struct lite_transport *t, int timeout_ms)
{
    int events = 0;
    /* send_done owed: swap the list out first, the upcalls may post (and owe) more. */
    if (t->ndone) {
        struct send_done *d = t->done;
        size_t n = t->ndone, cap = t->cap;
        t->done = t->spare;
        t->cap = t->spare_cap;
        t->ndone = 0;
        for (size_t i = 0; i < n; i++)
            t->up->send_done(t->core, d[i].op, d[i].status);
        t->spare = d;
        t->spare_cap = cap;
        events += (int)n;
        timeout_ms = 0;
    }
    struct loop_inbox *b = t->in;
    pthread_mutex_lock(&b->mu);
    if (!b->head && timeout_ms > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    }
    struct loop_msg *m = b->head;
    b->head = b->tail = NULL;
    pthread_mutex_unlock(&b->mu);
    while (m) {
        struct loop_msg *next = m->next;
        if (m->bye) {
            char why[64];
            snprintf(why, sizeof(why), "rank %d %s", m->src,
                     m->bye_code == -ESHUTDOWN ? "finalized and closed" : "was cut off");
            peer_fail(t, m->src, m->bye_code, why);
        } else if (!t->failed[m->src]) {
            deliver(t, m); /* a refused message breaks the pair: later ones are dropped */
        }
        free(m);
        m = next;
        events++;
    }
    return events;
}

static int loop_probe(const struct lite_tp_env *env, char *why, size_t why_len)
{
    (void)env; /* no variables, and it logs nothing */
    return 0;
}

const struct lite_transport_ops lite_loop_ops = {
    .size = sizeof(struct lite_transport_ops),
    .abi_version = LITE_TRANSPORT_ABI_VERSION,
    .name = "loop",
    .caps = LITE_CAP_NO_AUTO, /* ranks as threads: asked for by name, never picked by "auto" */
    .probe = loop_probe,
    .open = loop_open,
    .close = loop_close,
    .addr_get = loop_addr_get,
    .connect_all = loop_connect_all,
    .msg_send = loop_msg_send,
    .progress = loop_progress,
};
