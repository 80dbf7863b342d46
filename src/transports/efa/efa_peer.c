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
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "efa.h"

#define STUCK_PROBE_MS   500
#define PROBE_EVERY_MS   1000
#define PROBE_TIMEOUT_MS 5000

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
    }
    if (t->sock_probe && b->name_len[0] <= sizeof(p->sa)) {
        memcpy(&p->sa, b->name[0], b->name_len[0]);
        p->salen = (socklen_t)b->name_len[0];
    }
}

void lite_efa_peer_fini(struct lite_transport *t, int peer)
{
    struct efa_peer *p = &t->peers[peer];
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
    if (!t->in_progress) {
        /* A provider refused a post at once, inside msg_send / rma_post / mr_dereg: the op is
         * listed, and the next progress fails the peer with everything owed to it (the core
         * hears of failures only from inside progress, transport.h). */
        if (!p->fail_code) {
            p->fail_code = code ? code : -LITE_ERR_PEER_LOST;
            lite_fmt(p->fail_why, sizeof(p->fail_why), "%s", why);
        }
        t->fail_due = true;
        return;
    }
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

int lite_efa_peer_fail_deferred(struct lite_transport *t)
{
    int n = 0;
    t->fail_due = false;
    for (int i = 0; i < t->world; i++) {
        struct efa_peer *p = &t->peers[i];
        if (p->fail_code) {
            int code = p->fail_code;
            char why[sizeof(p->fail_why)];
            memcpy(why, p->fail_why, sizeof(why));
            p->fail_code = 0;
            lite_efa_peer_fail(t, i, code, why);
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

void lite_efa_peer_tick(struct lite_transport *t)
{
    int64_t now = lite_efa_clock();
    for (int i = 0; i < t->world; i++) {
        struct efa_peer *p = &t->peers[i];
        if (i == t->rank || p->dead)
            continue;
        char why[128];
        if (t->pid_watch && pid_gone(p)) {
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
