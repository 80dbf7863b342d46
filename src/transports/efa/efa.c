/*
 * efa.c - the EFA transport: libfabric FI_EP_RDM endpoints, one per rail, with native one-sided
 * writes (the 32-bit immediate as remote CQ data), reads, and messages for the core's eager
 * path. The same code runs on AWS EFA (provider "efa", the default) and, for real, on
 * libfabric's "tcp;ofi_rxm" and "shm" providers (LITETX_EFA_PROVIDER=tcp or shm).
 * docs/EFA.md describes the design, the settings and what each provider offers.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "efa.h"

#define CLOSE_DRAIN_MS 2000
#define TICK_MS        5
#define SPIN_BUDGET_NS 600      /* extra empty CQ reads of a polling progress call, in time, */
#define SPIN_MAX       8        /* and in count */
#define SPIN_TIMED     4        /* reads per timing of an empty read, */
#define SPIN_TRIES     3        /* and timings (the least counts) */
#define TICK_POLLS     63       /* polls between reads of the liveness clock: a poll is >= 30 ns */
#define POLL_SLEEP_NS  50000    /* first nap between polls when the CQs cannot be slept on, */
#define NAP_MAX_NS     1000000  /* doubling while nothing happens, up to this */
#define IDLE_SPIN_NS   200000   /* a waiting progress call polls this long before it sleeps, */
#define POLL_SPIN_NS   20000000 /* or this long on CQs without a wait fd (see efa_open) */

static int efa_probe(const struct lite_tp_env *env, char *why, size_t why_len)
{
    lite_tp_env_attach(env);
    struct efa_cfg cfg;
    int rc = lite_efa_cfg_read(&cfg, env, NULL, why, why_len);
    if (rc)
        return -ENODEV;
    struct fi_info *info = NULL;
    rc = lite_efa_getinfo(&cfg, NULL, &info, why, why_len);
    if (info)
        fi_freeinfo(info);
    return rc ? -ENODEV : 0;
}

/* Every TICK_POLLS polls: read the liveness clock, and run the liveness tick when due. */
static void tick(struct lite_transport *t)
{
    t->polls_left = TICK_POLLS;
    t->clock_ns = lite_efa_clock();
    if (t->clock_ns >= t->next_tick_ns) {
        t->next_tick_ns = t->clock_ns + (int64_t)TICK_MS * 1000000;
        lite_efa_peer_tick(t);
    }
}

/* Read the CQs unless writes arrived less than cfg.imm_yield_ns ago. Reading them is what
 * runs the provider's progress, and on shm that takes the lock a writer's next post needs, so
 * a target that reads again at once lets the writer queue one write per round trip of that
 * lock; a moment's pause lets it queue several for one pass (docs/EFA.md, Progress). */
static int cq_poll_paced(struct lite_transport *t)
{
    if (t->yield_until) {
        if (lite_now_ns() < t->yield_until)
            return 0;
        t->yield_until = 0;
    }
    t->imm_seen = false;
    int n = lite_efa_cq_poll(t);
    if (t->imm_seen && t->cfg.imm_yield_ns)
        t->yield_until = lite_now_ns() + t->cfg.imm_yield_ns;
    return n;
}

/* One round: completions, queued posts, liveness. Returns how much happened. Inlined into
 * both callers: a waiting core polls through it back to back, and every instruction here
 * delays the sight of a message that arrives meanwhile. */
static inline int poll_once(struct lite_transport *t)
{
    if (t->batch_open)
        lite_efa_batch_close(t, false);
    int n = t->rx_retry ? lite_efa_rx_flush(t) : 0;
    n += cq_poll_paced(t);
    if (t->flush_pending)
        n += lite_efa_msg_flush(t);
    if (t->rq_peers >= 0 || t->rma_later || t->dc_retry)
        n += lite_efa_rma_flush(t);
    if (t->polls_left-- == 0)
        tick(t);
    return n;
}

/* Sleep until a CQ has something or `ms` pass (bounded by the liveness tick). */
static void wait_some(struct lite_transport *t, int ms)
{
    t->polls_left = 0; /* time passed: the next poll reads the clock */
    if (t->use_wait && t->epfd >= 0) {
        bool ok = true;
        for (uint32_t r = 0; r < t->nrails && ok; r++) {
            struct fid *f = &t->rail[r].cq->fid;
            ok = fi_trywait(t->rail[r].fabric, &f, 1) == 0;
        }
        if (ok) {
            struct epoll_event ev[LITE_MAX_RAILS];
            epoll_wait(t->epfd, ev, LITE_MAX_RAILS, ms < TICK_MS * 4 ? ms : TICK_MS * 4);
        }
        return;
    }
    int64_t nap = t->nap_ns < POLL_SLEEP_NS ? POLL_SLEEP_NS : t->nap_ns;
    if (nap > (int64_t)ms * 1000000)
        nap = ms > 0 ? (int64_t)ms * 1000000 : POLL_SLEEP_NS;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = nap};
    nanosleep(&ts, NULL);
    t->nap_ns = nap * 2 > NAP_MAX_NS ? NAP_MAX_NS : nap * 2;
}

/* A round that found something: what progress reports (events: upcalls made meanwhile). */
static inline int busy_round(struct lite_transport *t, int n)
{
    if (n == 0 && t->events == 0)
        return 0;
    t->nap_ns = POLL_SLEEP_NS;
    return n + t->events;
}

/* Poll, then nap, until something happens or timeout_ms (> 0) pass; the first round found
 * nothing. Out of line: efa_progress's one round is what a spinning core repeats. */
static __attribute__((noinline)) int progress_wait(struct lite_transport *t, int timeout_ms)
{
    int64_t now = lite_now_ns();
    int64_t deadline = now + (int64_t)timeout_ms * 1000000;
    /* Poll a little before the first sleep. The peer's next op usually follows soon, and this
     * side's progress moves its data (shm: the target copies a write; tcp;ofi_rxm: the target
     * reads the socket): a blind 50 us nap (shm has no wait fd) or a wakeup through the CQ's
     * fd would hold every such op up. The core spins before it asks to wait at all; this covers
     * long waits (one imm_wait for a whole transfer) in the middle of traffic. */
    int64_t spin_until = now + t->idle_spin_ns;
    while (now < deadline) {
        if (now >= spin_until)
            wait_some(t, lite_ms_left(deadline, 1000));
        int n = busy_round(t, poll_once(t));
        if (n)
            return n;
        now = lite_now_ns();
    }
    return 0;
}

/* Nothing a round's bookkeeping must see to first, and no later rail whose completions are
 * due: the extra reads of rail 0 may follow. */
static inline bool spin_ok(const struct lite_transport *t)
{
    return !t->rx_retry && !t->flush_pending && t->rq_peers < 0 && !t->batch_open &&
           !t->rma_later && !t->dc_retry && !t->yield_until && !t->gone_due &&
           lite_efa_later_rails_idle(t);
}

/* The extra reads of a polling call that found nothing. A waiting core calls progress back to
 * back, and the round around each read (the core's loop, this call, the pending-work checks)
 * costs about half as much as shm's empty read itself: reading rail 0 again at once sees an
 * arriving message sooner (docs/EFA.md, Progress). How many: what fits SPIN_BUDGET_NS, by the
 * cost of an empty read, timed on the first calls (least of SPIN_TRIES), so a provider whose
 * read is a system call (tcp;ofi_rxm: poll + read) keeps one read per call. */
static int spin_reads(struct lite_transport *t)
{
    if (t->spin_tries == 0)
        return t->spin_polls ? lite_efa_cq_spin(t, t->spin_polls) : 0;
    int64_t t0 = lite_now_ns();
    int n = lite_efa_cq_spin(t, SPIN_TIMED);
    int64_t per = (lite_now_ns() - t0) / SPIN_TIMED;
    if (n)
        return n; /* a completion in the timing: not an empty read's cost */
    if (t->spin_read_ns == 0 || per < t->spin_read_ns)
        t->spin_read_ns = per > 0 ? per : 1;
    if (--t->spin_tries == 0) {
        int64_t k = SPIN_BUDGET_NS / t->spin_read_ns;
        t->spin_polls = (int)(k > SPIN_MAX ? SPIN_MAX : k);
        LITE_DEBUG("%s rank %d: empty CQ read %lld ns: %d extra reads per polling call", EFA_LOG,
                   t->rank, (long long)t->spin_read_ns, t->spin_polls);
    }
    return 0;
}

static int efa_progress(struct lite_transport *t, int timeout_ms)
{
    bool was = t->in_progress;
    t->in_progress = true;
    int n = t->gone_due ? lite_efa_peer_reap(t) : 0;
    t->events = 0;
    int rc = busy_round(t, poll_once(t));
    if (rc == 0 && n == 0 && timeout_ms == 0 && spin_ok(t))
        rc = busy_round(t, spin_reads(t));
    if (rc == 0 && n == 0 && timeout_ms > 0)
        rc = progress_wait(t, timeout_ms);
    if (rc >= 0 && t->gone_due)
        n += lite_efa_peer_reap(t);
    t->in_progress = was;
    return rc < 0 ? rc : n + rc;
}

static void efa_close(struct lite_transport *t);

#define SHM_MAX_ENDPOINTS 256 /* libfabric shm's SMR_MAX_PEERS */

/* Rails: distinct domains (NICs) when the provider lists several, else independent endpoints
 * on the first one. */
static struct fi_info *rail_info(struct fi_info *list, uint32_t i)
{
    struct fi_info *seen[LITE_MAX_RAILS];
    uint32_t n = 0;
    for (struct fi_info *f = list; f && n < LITE_MAX_RAILS; f = f->next) {
        bool dup = false;
        for (uint32_t k = 0; k < n && !dup; k++)
            dup = !strcmp(seen[k]->domain_attr->name, f->domain_attr->name);
        if (!dup)
            seen[n++] = f;
    }
    return i < n ? seen[i] : list;
}

static int efa_open(const struct lite_transport_params *prm, struct lite_transport **out)
{
    lite_tp_env_attach(prm->env);
    struct lite_transport *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->rank = prm->rank;
    t->world = prm->world_size;
    t->core = prm->core;
    t->up = prm->up;
    t->epfd = -1;
    t->rq_peers = -1;
    t->clock_ns = lite_efa_clock();
    t->spin_tries = SPIN_TRIES;
    for (uint32_t i = 0; i < LITE_MAX_RAILS; i++)
        t->rail[i].wait_fd = -1;
    char why[384];
    struct fi_info *info = NULL;
    int rc = lite_efa_cfg_read(&t->cfg, prm->env, prm, why, sizeof(why));
    if (!rc)
        rc = lite_efa_getinfo(&t->cfg, prm->bind_host, &info, why, sizeof(why));
    if (rc) {
        LITE_ERROR("%s rank %d: %s", EFA_LOG, t->rank, why);
        free(t);
        return rc;
    }
    const char *prov = info->fabric_attr->prov_name;
    t->mr_mode = info->domain_attr->mr_mode;
    t->mr_local = (t->mr_mode & FI_MR_LOCAL) != 0;
    t->virt_addr = (t->mr_mode & FI_MR_VIRT_ADDR) != 0;
    t->prov_key = (t->mr_mode & FI_MR_PROV_KEY) != 0;
    t->mr_endpoint = (t->mr_mode & FI_MR_ENDPOINT) != 0;
    t->hmem = (info->caps & FI_HMEM) != 0;
    t->inject_size = info->tx_attr->inject_size;
    /* Segments one paged-batch write may carry (efa_rma.c): what both iov limits allow. */
    size_t iovs = info->tx_attr->iov_limit < info->tx_attr->rma_iov_limit
                      ? info->tx_attr->iov_limit
                      : info->tx_attr->rma_iov_limit;
    t->iov_max = iovs < 1 ? 1 : iovs > LITE_EFA_BATCH_IOV ? LITE_EFA_BATCH_IOV : (uint32_t)iovs;
    /* Batched write acknowledgements rely on the provider placing a peer's writes in order. */
    t->rma_waw = (info->tx_attr->msg_order & FI_ORDER_RMA_WAW) != 0;
    t->dc_batch = t->cfg.dc_batch && t->rma_waw;
    size_t cqd = info->domain_attr->cq_data_size;
    /* The best path the provider allows, unless LITETX_EFA_IMM forces one (a forced path the
     * provider cannot take falls back to the message). */
    int want_imm = t->cfg.imm ? t->cfg.imm : cqd >= 8 ? IMM_CQDATA64 : IMM_CQDATA32;
    if (want_imm == IMM_CQDATA64 && cqd >= 8)
        t->imm_mode = IMM_CQDATA64;
    else if (want_imm != IMM_MSG && cqd >= 4 && (info->caps & FI_SOURCE))
        t->imm_mode = IMM_CQDATA32;
    else
        t->imm_mode = IMM_MSG;
    /* shm signals its peers through shared memory, not through the CQ's file descriptor. */
    t->pid_watch = !strcmp(prov, "shm");
    if (t->pid_watch && t->cfg.shm_clean)
        lite_efa_shm_clean("/dev/shm");
    t->use_wait = !t->cfg.no_wait_fd && !t->pid_watch;
    t->sock_probe = lite_efa_sockaddr_format(info->addr_format);

    rc = lite_efa_rail_open(t, 0, rail_info(info, 0));
    uint32_t want = t->cfg.rails, max = 0;
    if (!rc) {
        max = lite_efa_blob_max_rails(t->rail[0].name_len);
        if (max == 0)
            rc = -ENOSPC;
    }
    if (!rc && want > max) {
        LITE_WARN("%s rank %d: %u rails asked for, but only %u addresses of %zu bytes fit the "
                  "%d-byte bootstrap blob; using %u",
                  EFA_LOG, t->rank, want, max, t->rail[0].name_len, LITE_TRANSPORT_ADDR_MAX, max);
        want = max;
    }
    /* libfabric's shm provider maps at most SMR_MAX_PEERS (256) peer regions, and a job's
     * endpoints count together: measured, 256 ranks x 1 rail and 128 x 2 work, 256 x 2 fails
     * with EIO on the first receives. So fewer rails past 128 ranks, and none past 256. */
    if (!rc && t->pid_watch && (uint64_t)t->world * want > SHM_MAX_ENDPOINTS) {
        if (t->world > SHM_MAX_ENDPOINTS) {
            LITE_ERROR("%s rank %d: the shm provider connects at most %d endpoints, and this job "
                       "has %d ranks on one host; use the tcp transport (or fewer ranks per host)",
                       EFA_LOG, t->rank, SHM_MAX_ENDPOINTS, t->world);
            rc = -ENOSPC;
        } else {
            uint32_t fit = SHM_MAX_ENDPOINTS / (uint32_t)t->world;
            LITE_INFO("%s rank %d: %u rails asked for; %u fit the shm provider's %d endpoints at "
                      "%d ranks",
                      EFA_LOG, t->rank, want, fit, SHM_MAX_ENDPOINTS, t->world);
            want = fit;
        }
    }
    t->nrails = rc ? 0 : 1;
    for (uint32_t i = 1; !rc && i < want; i++) {
        rc = lite_efa_rail_open(t, i, rail_info(info, i));
        if (!rc)
            t->nrails = i + 1;
    }
    /* shm's writer-side copy ("fast RMA": a plain write, copied with process_vm_writev inside
     * fi_write) is on where the domain has FI_MR_VIRT_ADDR and no RMA order; a large write's
     * second stripe then goes that way while the target copies the first (efa_rma.c). */
    const uint64_t rma_order = FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAR |
                               FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAR | FI_ORDER_SAW |
                               FI_ORDER_RMA_RAR | FI_ORDER_RMA_RAW | FI_ORDER_RMA_WAR |
                               FI_ORDER_RMA_WAW;
    t->writer_copy = t->cfg.writer_copy && t->virt_addr && t->nrails >= 2 &&
                     !(info->tx_attr->msg_order & rma_order);
    t->peers = rc ? NULL : calloc((size_t)t->world, sizeof(*t->peers));
    if (!rc && !t->peers)
        rc = -ENOMEM;
    for (int p = 0; !rc && p < t->world; p++) {
        t->peers[p].pidfd = t->peers[p].probe_fd = -1;
        t->peers[p].rq_next = -1;
        for (uint32_t r = 0; r < LITE_MAX_RAILS; r++) {
            t->peers[p].dc[r].peer = p;
            t->peers[p].dc[r].rail = r;
        }
    }
    if (!rc)
        rc = lite_efa_msg_init(t);
    if (!rc)
        rc = lite_efa_dc_init(t);
    if (!rc && t->use_wait) {
        t->epfd = epoll_create1(EPOLL_CLOEXEC);
        for (uint32_t r = 0; r < t->nrails && t->epfd >= 0; r++) {
            struct epoll_event ev = {.events = EPOLLIN, .data.u32 = r};
            if (t->rail[r].wait_fd < 0 ||
                epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->rail[r].wait_fd, &ev) != 0) {
                t->use_wait = false;
            }
        }
        if (t->epfd < 0)
            t->use_wait = false;
    }
    /* Without a wait fd a manual-progress provider moves data only while this side polls
     * (tcp;ofi_rxm reads and writes its sockets, shm's target copies a write), and a blind nap
     * stalls a transfer that is under way but has not completed anything yet: a 16 MiB write
     * over tcp;ofi_rxm takes ~4 ms, and with 200 us of polling before the naps it ran at
     * 2.3-2.6 GB/s against 3.5-3.7 with 20 ms. So poll 20 ms after the last event, unless the
     * ranks take turns on the CPUs, where polling only delays the rank that has work. */
    bool crowded = prm->size > offsetof(struct lite_transport_params, crowded) && prm->crowded;
    t->idle_spin_ns = t->use_wait || crowded ? IDLE_SPIN_NS : POLL_SPIN_NS;
    if (!rc) {
        static const char *const imm_names[] = {"", "remote CQ data (+ sender rank)",
                                                "remote CQ data (+ FI_SOURCE)",
                                                "a message after the write"};
        LITE_INFO("%s rank %d: provider %s, %u rail(s), domain %s, mr_mode %#llx, cq_data %zu "
                  "bytes, immediate as %s, inject %zu, %u eager buffers of %zu bytes, %s%s",
                  EFA_LOG, t->rank, prov, t->nrails, info->domain_attr->name,
                  (unsigned long long)t->mr_mode, cqd, imm_names[t->imm_mode], t->inject_size,
                  t->nrx, t->rx_size, t->use_wait ? "sleeps on CQ fds" : "polls",
                  t->writer_copy ? ", writer copies one stripe of large writes" : "");
    }
    fi_freeinfo(info);
    if (rc) {
        LITE_ERROR("%s rank %d: open failed: %s", EFA_LOG, t->rank, lite_strerror(rc));
        efa_close(t);
        return rc;
    }
    *out = t;
    return 0;
}

static int efa_addr_get(struct lite_transport *t, void *blob, size_t *len)
{
    const void *names[LITE_MAX_RAILS];
    size_t lens[LITE_MAX_RAILS];
    for (uint32_t i = 0; i < t->nrails; i++) {
        names[i] = t->rail[i].name;
        lens[i] = t->rail[i].name_len;
    }
    return lite_efa_blob_pack(blob, *len, len, (uint32_t)getpid(), t->nrails, names, lens);
}

/* Progress until every peer's n-th HELLO is in (and, with `sent`, ours have all completed:
 * a large one completes only when the peer has pulled it, which needs our progress), or the
 * deadline. */
static int wait_hellos(struct lite_transport *t, uint8_t n, bool sent, int64_t deadline, char *why,
                       size_t why_len)
{
    for (;;) {
        int missing = -1, nmissing = 0;
        for (int p = 0; p < t->world; p++) {
            struct efa_peer *pe = &t->peers[p];
            if (p != t->rank && (pe->hellos < n || (sent && (pe->txq || pe->inflight)))) {
                nmissing++;
                missing = missing < 0 ? p : missing;
            }
        }
        if (!nmissing)
            return 0;
        if (t->peers[missing].dead) {
            lite_fmt(why, why_len, "efa rank %d: rank %d failed while connecting", t->rank,
                     missing);
            return -LITE_ERR_PEER_LOST;
        }
        if (lite_now_ns() >= deadline) {
            lite_fmt(why, why_len,
                     "efa rank %d: %d rank(s) did not answer in time (first: rank %d)", t->rank,
                     nmissing, missing);
            return -ETIMEDOUT;
        }
        int rc = efa_progress(t, lite_ms_left(deadline, 10));
        if (rc < 0)
            return rc;
    }
}

static int connect_all_body(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                            int64_t deadline, char *why, size_t why_len);

static int efa_connect_all(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                           int64_t deadline, char *why, size_t why_len)
{
    t->in_progress = true; /* init: a failure is reported as it happens */
    int rc = connect_all_body(t, blobs, lens, deadline, why, why_len);
    t->in_progress = false;
    return rc;
}

static int connect_all_body(struct lite_transport *t, const void *const *blobs, const size_t *lens,
                            int64_t deadline, char *why, size_t why_len)
{
    for (int p = 0; p < t->world; p++) {
        struct lite_efa_blob b;
        if (lite_efa_blob_unpack(blobs[p], lens[p], &b) != 0) {
            lite_fmt(why, why_len, "efa rank %d: the address of rank %d is malformed (%zu bytes)",
                     t->rank, p, lens[p]);
            return -LITE_ERR_PROTOCOL;
        }
        uint32_t n = b.nrails < t->nrails ? b.nrails : t->nrails;
        for (uint32_t i = 0; i < n; i++) {
            int rc = lite_efa_rail_av(t, i, b.name[i], p);
            if (rc) {
                lite_fmt(why, why_len, "efa rank %d: cannot add rank %d's rail %u address", t->rank,
                         p, i);
                return rc;
            }
        }
        if (p != t->rank)
            lite_efa_peer_init(t, p, &b);
    }
    t->av_is_rank = true;
    for (uint32_t i = 0; i < t->nrails; i++)
        for (int p = 0; p < t->world; p++)
            if (t->rail[i].addr[p] != (fi_addr_t)p && t->rail[i].addr[p] != FI_ADDR_NOTAVAIL)
                t->av_is_rank = false;
    /* A HELLO each way proves the pair works and makes tcp;ofi_rxm connect now. */
    for (int p = t->rank + 1; p < t->world; p++) {
        t->peers[p].hello_sent = true;
        int rc = lite_efa_ctl_send(t, p, LITE_EFA_T_HELLO, 0, NULL, 0);
        if (rc) {
            lite_fmt(why, why_len, "efa rank %d: cannot send to rank %d: %s", t->rank, p,
                     lite_strerror(rc));
            return rc;
        }
    }
    int rc = wait_hellos(t, 1, false, deadline, why, why_len);
    if (rc)
        return rc;
    /* A second HELLO carries a full eager payload, so that providers allocate their pools for
     * large eager messages (tcp;ofi_rxm: ~32 MiB for its rendezvous path, once) during init
     * rather than in the middle of traffic. It starts with this rank's flush targets. */
    _Static_assert(LITE_EFA_FLUSH_LEN(LITE_MAX_RAILS) <= LITE_EFA_EAGER_MIN,
                   "the flush targets fit the smallest eager payload");
    uint8_t *warm = calloc(1, t->cfg.eager_max);
    if (!warm)
        return -ENOMEM;
    if (lite_efa_dc_hello(t, warm, t->cfg.eager_max) == 0) {
        free(warm);
        return -EINVAL;
    }
    for (int p = 0; p < t->world && !rc; p++)
        if (p != t->rank)
            rc = lite_efa_ctl_send(t, p, LITE_EFA_T_HELLO, 0, warm, t->cfg.eager_max);
    free(warm);
    if (rc) {
        lite_fmt(why, why_len, "efa rank %d: warm-up send failed: %s", t->rank, lite_strerror(rc));
        return rc;
    }
    return wait_hellos(t, 2, true, deadline, why, why_len);
}

/* Peers whose BYE (or loss) we have and to whom nothing of ours is still on its way. */
static bool close_settled(struct lite_transport *t)
{
    for (int p = 0; p < t->world; p++) {
        struct efa_peer *pe = &t->peers[p];
        if (p == t->rank || pe->dead || !pe->hellos)
            continue;
        if (!pe->bye_rcvd || pe->txq || pe->inflight)
            return false;
    }
    return true;
}

static void efa_close(struct lite_transport *t)
{
    if (!t)
        return;
    t->closing = true;
    t->in_progress = true;
    if (t->gone_due)
        lite_efa_peer_reap(t);
    if (t->peers && t->nrails) {
        /* Orderly end: a BYE each way, after everything already posted, so neither side closes
         * its endpoint while the other still has something on its way to it. */
        for (int p = 0; p < t->world; p++)
            if (p != t->rank && !t->peers[p].dead && t->peers[p].hellos)
                lite_efa_ctl_send(t, p, LITE_EFA_T_BYE, 0, NULL, 0);
        int64_t deadline = lite_deadline_ns(CLOSE_DRAIN_MS);
        while (!close_settled(t) && lite_now_ns() < deadline)
            efa_progress(t, 1);
        for (int p = 0; p < t->world; p++)
            if (p != t->rank)
                lite_efa_peer_fail(t, p, -LITE_ERR_CANCELLED, "transport closed");
    }
    /* Endpoints first; then nothing the provider held can complete any more. */
    for (uint32_t r = 0; r < t->nrails; r++)
        if (t->rail[r].ep) {
            fi_close(&t->rail[r].ep->fid);
            t->rail[r].ep = NULL;
        }
    lite_efa_qcache_fini(t);
    lite_efa_msg_fini(t);
    lite_efa_mr_fini(t);
    lite_efa_dc_fini(t); /* before the domains */
    for (int p = 0; t->peers && p < t->world; p++)
        lite_efa_peer_fini(t, p);
    for (uint32_t r = 0; r < LITE_MAX_RAILS; r++)
        if (t->rail[r].fabric || t->rail[r].info)
            lite_efa_rail_close(&t->rail[r]);
    if (t->epfd >= 0)
        close(t->epfd);
    free(t->peers);
    free(t);
}

static int efa_mr_reg(struct lite_transport *t, const struct lite_tp_mr *mr,
                      struct lite_tp_mr_keys *keys)
{
    return lite_efa_mr_reg(t, mr, keys);
}

static int efa_mr_dereg(struct lite_transport *t, void *handle)
{
    return lite_efa_mr_dereg(t, handle);
}

static int efa_msg_send(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                        const void *payload, void *op)
{
    return lite_efa_msg_send(t, peer, hdr, payload, op);
}

static int efa_msg_inject(struct lite_transport *t, int peer, const struct lite_msg_hdr *hdr,
                          const void *payload)
{
    return lite_efa_msg_inject(t, peer, hdr, payload);
}

static int efa_rma_post(struct lite_transport *t, const struct lite_tp_rma *r, void *op)
{
    return lite_efa_rma_post(t, r, op);
}

const struct lite_transport_ops lite_efa_ops = {
    .size = sizeof(struct lite_transport_ops),
    .abi_version = LITE_TRANSPORT_ABI_VERSION,
    .name = "efa",
    .caps = LITE_CAP_WRITE | LITE_CAP_WRITE_IMM | LITE_CAP_READ | LITE_CAP_MULTI_RAIL
#ifdef LITE_EFA_CUDA
            | LITE_CAP_DEVICE_MEM
#endif
    ,
    .probe = efa_probe,
    .open = efa_open,
    .close = efa_close,
    .addr_get = efa_addr_get,
    .connect_all = efa_connect_all,
    .msg_send = efa_msg_send,
    .progress = efa_progress,
    .mr_reg = efa_mr_reg,
    .mr_dereg = efa_mr_dereg,
    .rma_post = efa_rma_post,
    .msg_inject = efa_msg_inject,
    .tunables = lite_efa_tunables,
};
