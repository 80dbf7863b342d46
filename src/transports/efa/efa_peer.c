/*
 * efa_peer.c - is the peer still there, and what happens when it is not.
 *
 * An RDM endpoint has no connection to lose, so "the peer died" has to be learned:
 *   - any error completion of a message to the peer (EFA reports an unreachable or vanished
 *     peer this way; tcp;ofi_rxm flushes what was in flight when the connection dies);
 *   - a keepalive: every LITETX_EFA_KEEPALIVE_MS of silence towards a peer, a tiny unsequenced
 *     message is posted, so an idle pair learns of a death too;
 *   - a post that the provider keeps refusing with -FI_EAGAIN: tcp;ofi_rxm does that forever
 *     when the peer is gone (it reconnects, is refused, and starts again). After 500 ms stuck,
 *     peers with socket addresses are probed with a TCP connect() to their listening address:
 *     refused means the endpoint is gone. Other providers declare the peer lost after
 *     LITETX_EFA_PEER_TIMEOUT_MS stuck;
 *   - shm: every peer is on this host, so its process is watched through a pidfd (shm itself
 *     never reports a dead peer: sends fill the dead process's queue and then stay -FI_EAGAIN).
 * A peer that merely stops calling into the library is not declared lost by any of these.
 *
 * SHM AND DEAD LOCK HOLDERS. libfabric's shm provider (1.16-1.19 at least) guards each
 * endpoint's region with a pthread spinlock inside the shared memory: its owner takes it to read
 * its queue, every sender to post into it. A process killed while holding one leaves it held
 * for good, and every later post to that region (fi_inject, fi_send, fi_write...) spins in the
 * provider without end; when the dead process held a *survivor's* lock (it was sending to it),
 * that survivor's own progress spins too. So, on shm, a watcher thread sleeps in poll() on the
 * peers' pidfds: when one exits it marks the peer gone at once (posts check the flag, progress
 * fails the peer), then looks at the locks of the dead peer's regions and of this rank's own.
 * A lock that is free once was not left held (a dead holder never frees it); one seen held at
 * every sample for RESCUE_HELD_MS after the death is taken to be held by the dead process and
 * is released, which lets a post spinning on it return. What the release can break is the dead
 * process's queue (nobody reads it any more), or, had a live process held the lock for that long
 * instead, that region's queue. The region's header is mapped read/write here for the purpose,
 * only where its layout is one of the known versions (the lock's offset); elsewhere the flag
 * alone narrows the window.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "efa.h"

#define STUCK_PROBE_MS   500
#define PROBE_EVERY_MS   1000
#define PROBE_TIMEOUT_MS 5000

/* Dead lock holders (see above). A live holder keeps the lock for microseconds, and even a
 * descheduled one not for half a second at every 1 ms sample. */
#define RESCUE_SAMPLE_MS 1
#define RESCUE_HELD_MS   500
#define RESCUE_TRIES     3 /* releases of one lock after one death at most */
/* struct smr_region (libfabric's include/ofi_shm.h): version (u8) at 0, pid (int) at 4, and in
 * region versions 3 to 5 (libfabric 1.16 to 1.19) the lock (pthread_spinlock_t) at 24. */
#define REGION_VERSION_MIN 3
#define REGION_VERSION_MAX 5
#define REGION_PID_OFF     4
#define REGION_LOCK_OFF    24
#define REGION_MAP_LEN     4096

struct efa_suspect {
    pthread_spinlock_t *lock;
    int owner; /* rank whose region it is */
    uint32_t rail;
    int64_t held_since; /* 0: not seen held yet */
    int released;
};

struct efa_watch {
    pthread_t thread;
    int evfd; /* written to stop the thread */
    struct lite_transport *t;
    void *own[LITE_MAX_RAILS]; /* this rank's regions */
    bool *exited;              /* by rank: seen exit (the thread's own) */
    struct efa_suspect *sus;
    int nsus, cap;
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The first page of the shm region named by a provider address ("fi_shm://<pid>:<uid>:<idx>"),
 * when its header has a layout we know and says it belongs to `pid`; else NULL. */
static void *region_map(const uint8_t *name, size_t len, uint32_t pid)
{
    char buf[300];
    if (!len || len >= sizeof(buf) || !pid)
        return NULL;
    memcpy(buf, name, len);
    buf[len] = 0;
    const char *s = strstr(buf, "://");
    s = s ? s + 3 : buf;
    int fd = shm_open(s, O_RDWR, 0);
    if (fd < 0)
        return NULL;
    void *m = mmap(NULL, REGION_MAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return NULL;
    const uint8_t *h = m;
    int32_t rpid;
    memcpy(&rpid, h + REGION_PID_OFF, sizeof(rpid));
    if (h[0] < REGION_VERSION_MIN || h[0] > REGION_VERSION_MAX || (uint32_t)rpid != pid) {
        munmap(m, REGION_MAP_LEN);
        return NULL;
    }
    return m;
}

static void suspect(struct efa_watch *w, void *region, int owner, uint32_t rail)
{
    if (!region)
        return;
    pthread_spinlock_t *lock = (pthread_spinlock_t *)((uint8_t *)region + REGION_LOCK_OFF);
    for (int i = 0; i < w->nsus; i++)
        if (w->sus[i].lock == lock)
            return;
    if (w->nsus == w->cap) {
        int cap = w->cap ? 2 * w->cap : 8;
        struct efa_suspect *n = realloc(w->sus, (size_t)cap * sizeof(*n));
        if (!n)
            return;
        w->sus = n;
        w->cap = cap;
    }
    w->sus[w->nsus++] = (struct efa_suspect){.lock = lock, .owner = owner, .rail = rail};
}

/* One look at every suspect lock; those seen free are dropped. */
static void sample(struct efa_watch *w)
{
    int64_t now = mono_ns();
    for (int i = 0; i < w->nsus;) {
        struct efa_suspect *s = &w->sus[i];
        bool done = false;
        if (pthread_spin_trylock(s->lock) == 0) {
            pthread_spin_unlock(s->lock);
            done = true;
        } else if (!s->held_since) {
            s->held_since = now;
        } else if (now - s->held_since >= (int64_t)RESCUE_HELD_MS * 1000000) {
            pthread_spin_unlock(s->lock);
            LITE_WARN("%s rank %d: the lock of rank %d's shm region (rail %u) stayed held for "
                      "%d ms after a peer's process exited; released it (the dead process "
                      "held it)",
                      EFA_LOG, w->t->rank, s->owner, s->rail, RESCUE_HELD_MS);
            s->held_since = 0;
            done = ++s->released >= RESCUE_TRIES;
        }
        if (done)
            w->sus[i] = w->sus[--w->nsus];
        else
            i++;
    }
}

static void *watch_main(void *arg)
{
    struct efa_watch *w = arg;
    struct lite_transport *t = w->t;
    struct pollfd *fds = calloc((size_t)t->world + 1, sizeof(*fds));
    int *who = calloc((size_t)t->world + 1, sizeof(*who));
    if (!fds || !who) {
        free(fds);
        free(who);
        return NULL; /* the tick's pidfd polls still notice deaths */
    }
    for (;;) {
        int n = 0;
        fds[n++] = (struct pollfd){.fd = w->evfd, .events = POLLIN};
        for (int i = 0; i < t->world; i++)
            if (i != t->rank && !w->exited[i] && t->peers[i].pidfd >= 0) {
                who[n] = i;
                fds[n++] = (struct pollfd){.fd = t->peers[i].pidfd, .events = POLLIN};
            }
        int rc = poll(fds, (nfds_t)n, w->nsus ? RESCUE_SAMPLE_MS : -1);
        if (rc < 0 && errno != EINTR)
            break;
        if (fds[0].revents)
            break;
        for (int k = 1; rc > 0 && k < n; k++) {
            if (!fds[k].revents)
                continue;
            int i = who[k];
            w->exited[i] = true;
            atomic_store_explicit(&t->peers[i].gone, true, memory_order_relaxed);
            for (uint32_t r = 0; r < LITE_MAX_RAILS; r++) {
                suspect(w, t->peers[i].region[r], i, r);
                suspect(w, w->own[r], t->rank, r);
            }
        }
        if (w->nsus)
            sample(w);
    }
    free(fds);
    free(who);
    return NULL;
}

/* Start the watcher once every peer is known (shm only). */
static void watch_start(struct lite_transport *t)
{
    struct efa_watch *w = calloc(1, sizeof(*w));
    bool *exited = calloc((size_t)t->world, sizeof(bool));
    int evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!w || !exited || evfd < 0) {
        free(w);
        free(exited);
        if (evfd >= 0)
            close(evfd);
        t->watch = NULL;
        return;
    }
    w->t = t;
    w->evfd = evfd;
    w->exited = exited;
    for (uint32_t r = 0; r < t->nrails; r++)
        w->own[r] = region_map(t->rail[r].name, t->rail[r].name_len, (uint32_t)getpid());
    /* The thread takes no signals meant for the application. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, watch_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        LITE_DEBUG("%s rank %d: no watcher thread (%s); the tick watches the peers", EFA_LOG,
                   t->rank, strerror(rc));
        for (uint32_t r = 0; r < LITE_MAX_RAILS; r++)
            if (w->own[r])
                munmap(w->own[r], REGION_MAP_LEN);
        close(evfd);
        free(exited);
        free(w);
        return;
    }
    t->watch = w;
}

static void watch_stop(struct lite_transport *t)
{
    struct efa_watch *w = t->watch;
    if (!w)
        return;
    uint64_t one = 1;
    if (write(w->evfd, &one, sizeof(one)) == sizeof(one))
        pthread_join(w->thread, NULL);
    else
        pthread_detach(w->thread); /* cannot happen (a fresh eventfd); never wait forever */
    close(w->evfd);
    for (uint32_t r = 0; r < LITE_MAX_RAILS; r++)
        if (w->own[r])
            munmap(w->own[r], REGION_MAP_LEN);
    free(w->sus);
    free(w->exited);
    free(w);
    t->watch = NULL;
}

bool lite_efa_peer_gone_slow(struct lite_transport *t, int peer)
{
    /* Not failed here: the caller is in the middle of a post, and this transport's own lists
     * may be half updated. The next progress reaps it (lite_efa_peer_reap). */
    (void)peer;
    t->gone_due = true;
    return true;
}

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

void lite_efa_peer_init(struct lite_transport *t, int peer, const struct lite_efa_blob *b)
{
    struct efa_peer *p = &t->peers[peer];
    p->nrails = b->nrails < t->nrails ? b->nrails : t->nrails;
    p->pid = b->pid;
    p->last_tx_ns = lite_efa_clock();
    if (t->pid_watch && p->pidfd < 0 && b->pid) {
        p->pidfd = pidfd_open_((pid_t)b->pid);
        if (p->pidfd < 0)
            LITE_DEBUG("%s rank %d: pidfd_open(%u) for rank %d: %s; using kill(pid, 0)", EFA_LOG,
                       t->rank, b->pid, peer, strerror(errno));
        for (uint32_t r = 0; r < p->nrails && r < LITE_MAX_RAILS; r++)
            if (!p->region[r])
                p->region[r] = region_map(b->name[r], b->name_len[r], b->pid);
    }
    if (t->sock_probe && b->name_len[0] <= sizeof(p->sa)) {
        memcpy(&p->sa, b->name[0], b->name_len[0]);
        p->salen = (socklen_t)b->name_len[0];
    }
}

void lite_efa_peer_fini(struct lite_transport *t, int peer)
{
    /* The first peer's fini (close: the endpoints are closed by then) stops the watcher, which
     * reads every peer's pidfd and region. */
    watch_stop(t);
    struct efa_peer *p = &t->peers[peer];
    for (uint32_t r = 0; r < LITE_MAX_RAILS; r++)
        if (p->region[r])
            munmap(p->region[r], REGION_MAP_LEN);
    memset(p->region, 0, sizeof(p->region));
    if (p->pidfd >= 0)
        close(p->pidfd);
    if (p->probe_fd >= 0)
        close(p->probe_fd);
    p->pidfd = p->probe_fd = -1;
}

void lite_efa_peer_fail(struct lite_transport *t, int peer, int code, const char *why)
{
    struct efa_peer *p = &t->peers[peer];
    if (p->dead)
        return;
    /* Also from inside msg_send / rma_post / mr_dereg (a provider refused a post at once): the
     * op being posted is listed by then and ends here with the rest, and the core defers its
     * own handling of peer_failed until it is out of the post (transport.h, FAILURES). */
    p->dead = true;
    bool told = p->lost;
    p->lost = true;
    if (!code)
        code = -LITE_ERR_PEER_LOST;
    if (!t->closing)
        LITE_INFO("%s rank %d: lost rank %d: %s", EFA_LOG, t->rank, peer, why);
    /* Every op still owed to the core ends now, then the core hears of the loss once. */
    lite_efa_msg_peer_failed(t, peer, code);
    lite_efa_rma_peer_failed(t, peer, code);
    if (p->probe_fd >= 0)
        close(p->probe_fd);
    p->probe_fd = -1;
    if (!t->closing && !told)
        t->up->peer_failed(t->core, peer, code, why);
    t->events++;
}

int lite_efa_peer_reap(struct lite_transport *t)
{
    int n = 0;
    t->gone_due = false;
    for (int i = 0; i < t->world; i++) {
        struct efa_peer *p = &t->peers[i];
        if (i != t->rank && !p->dead && atomic_load_explicit(&p->gone, memory_order_relaxed)) {
            char why[128];
            lite_fmt(why, sizeof(why), "rank %d's process (pid %u) exited", i, p->pid);
            lite_efa_peer_fail(t, i, -LITE_ERR_PEER_LOST, why);
            n++;
        }
    }
    return n;
}

void lite_efa_peer_stuck(struct lite_transport *t, int peer, bool stuck)
{
    struct efa_peer *p = &t->peers[peer];
    if (!stuck) {
        p->stuck_since = 0;
        return;
    }
    if (!p->stuck_since)
        p->stuck_since = lite_efa_clock();
}

/* Is the process gone? (shm peers only) */
static bool pid_gone(struct efa_peer *p)
{
    if (p->pidfd >= 0) {
        struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
        return poll(&pf, 1, 0) > 0;
    }
    return p->pid && kill((pid_t)p->pid, 0) != 0 && errno == ESRCH;
}

/* One step of the connect() probe. Returns 1 when the peer's listener refused (gone). */
static int probe_step(struct lite_transport *t, struct efa_peer *p, int64_t now)
{
    if (p->probe_fd < 0) {
        if (now < p->next_probe_ns || !p->salen)
            return 0;
        int fd = socket(p->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return 0;
        if (connect(fd, (struct sockaddr *)&p->sa, p->salen) == 0) {
            close(fd);
            p->next_probe_ns = now + (int64_t)PROBE_EVERY_MS * 1000000;
            return 0;
        }
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            p->next_probe_ns = now + (int64_t)PROBE_EVERY_MS * 1000000;
            return e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH;
        }
        p->probe_fd = fd;
        p->probe_started = now;
        return 0;
    }
    struct pollfd pf = {.fd = p->probe_fd, .events = POLLOUT};
    if (poll(&pf, 1, 0) <= 0) {
        if (now - p->probe_started < (int64_t)PROBE_TIMEOUT_MS * 1000000)
            return 0;
        close(p->probe_fd);
        p->probe_fd = -1;
        return 1; /* no answer at all for seconds: unreachable */
    }
    int err = 0;
    socklen_t el = sizeof(err);
    getsockopt(p->probe_fd, SOL_SOCKET, SO_ERROR, &err, &el);
    close(p->probe_fd);
    p->probe_fd = -1;
    p->next_probe_ns = now + (int64_t)PROBE_EVERY_MS * 1000000;
    return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH;
}

/* Every peer has been initialised (connect_all ran): the watcher may start. */
static bool peers_known(const struct lite_transport *t)
{
    for (int i = 0; i < t->world; i++)
        if (i != t->rank && !t->peers[i].pid)
            return false;
    return true;
}

void lite_efa_peer_tick(struct lite_transport *t)
{
    int64_t now = lite_efa_clock();
    if (t->pid_watch && !t->watch && !t->watch_tried && peers_known(t)) {
        t->watch_tried = true;
        watch_start(t);
    }
    for (int i = 0; i < t->world; i++) {
        struct efa_peer *p = &t->peers[i];
        if (i == t->rank || p->dead)
            continue;
        char why[128];
        if (t->pid_watch && (atomic_load_explicit(&p->gone, memory_order_relaxed) || pid_gone(p))) {
            lite_fmt(why, sizeof(why), "rank %d's process (pid %u) exited", i, p->pid);
            lite_efa_peer_fail(t, i, -LITE_ERR_PEER_LOST, why);
            continue;
        }
        if (t->cfg.keepalive_ms && !p->lost && !p->ka_out && !p->txq &&
            now - p->last_tx_ns >= (int64_t)t->cfg.keepalive_ms * 1000000) {
            p->ka_out = true;
            p->last_tx_ns = now;
            if (lite_efa_ctl_send(t, i, LITE_EFA_T_KEEPALIVE, 0, NULL, 0) != 0)
                p->ka_out = false;
            if (p->dead)
                continue;
        }
        if (!p->stuck_since || now - p->stuck_since < (int64_t)STUCK_PROBE_MS * 1000000)
            continue;
        if (t->sock_probe) {
            if (probe_step(t, p, now)) {
                lite_fmt(why, sizeof(why),
                         "rank %d's endpoint refuses connections (the process is gone)", i);
                lite_efa_peer_fail(t, i, -LITE_ERR_PEER_LOST, why);
            }
        } else if (!t->pid_watch &&
                   now - p->stuck_since >= (int64_t)t->cfg.peer_timeout_ms * 1000000) {
            lite_fmt(why, sizeof(why), "rank %d took no message for %d ms", i,
                     t->cfg.peer_timeout_ms);
            lite_efa_peer_fail(t, i, -LITE_ERR_PEER_LOST, why);
        }
    }
}
