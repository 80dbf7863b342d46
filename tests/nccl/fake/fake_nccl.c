/*
 * fake_nccl.c - a named test double of NCCL (built as libnccl.so.2 in its own folder, found
 * through LD_LIBRARY_PATH), with fake_cuda.c, for CI hosts without a GPU. Used only IN ADDITION
 * to the real GPU suite (run_nccl_suite.sh): it checks the nccl backend's own logic (envelopes,
 * the leader's groups, order, staging, aborts), never NCCL.
 *
 * What it keeps of NCCL's behaviour, because the backend depends on it: a communicator of
 * processes built from rank 0's unique id, non-blocking init and group ends that report
 * ncclInProgress, sends and receives matched in posting order per peer, a group that runs on the
 * caller's stream and blocks it until the partner's group moves the bytes, an error reported by
 * ncclCommGetAsyncError when a peer's connection breaks (the stream then stays blocked, as a
 * kernel would, until ncclCommAbort).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nccl.h>

#define API __attribute__((visibility("default")))

struct ncclComm {
    int rank, n;
    int *fd;
    int state;   /* atomic ncclResult_t */
    int aborted; /* atomic */
    int refs;    /* atomic: the owner and each queued group */
    bool nonblocking, group_inprogress;
    uint16_t root_port;
    pthread_t init_th;
    bool init_started;
};

static int g_root_fd = -1; /* rank 0's bootstrap listener, made by ncclGetUniqueId */

static int (*enqueue_fn)(void *, void (*)(void *), void *);

static void comm_unref(struct ncclComm *c)
{
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL))
        return;
    for (int i = 0; i < c->n; i++)
        if (c->fd[i] >= 0)
            close(c->fd[i]);
    free(c->fd);
    free(c);
}

static int listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 256) ||
        getsockname(fd, (struct sockaddr *)&a, &l)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static bool aborted(struct ncclComm *c)
{
    return __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE);
}

/* Whole-buffer IO on a blocking socket, giving up on abort. */
static bool io_all(struct ncclComm *c, int fd, void *buf, size_t n, bool wr)
{
    char *p = buf;
    while (n && !aborted(c)) {
        struct pollfd pf = {.fd = fd, .events = wr ? POLLOUT : POLLIN};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        ssize_t k = wr ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return n == 0;
}

static int connect_to(struct ncclComm *c, uint16_t port)
{
    while (!aborted(c)) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            return fd;
        }
        if (fd >= 0)
            close(fd);
        usleep(10000);
    }
    return -1;
}

static int accept_one(struct ncclComm *c, int lfd)
{
    while (!aborted(c)) {
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        int fd = accept(lfd, NULL, NULL);
        if (fd >= 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            return fd;
        }
    }
    return -1;
}

static void *init_main(void *a)
{
    struct ncclComm *c = a;
    uint16_t my_port = 0, *ports = calloc((size_t)c->n, sizeof(*ports));
    int lfd = listener(&my_port), rc = ncclSystemError;
    if (lfd < 0 || !ports)
        goto out;
    ports[c->rank] = my_port;
    if (c->rank == 0) {
        int *boot = calloc((size_t)c->n, sizeof(*boot));
        bool ok = boot != NULL;
        for (int i = 1; ok && i < c->n; i++) {
            int fd = accept_one(c, g_root_fd);
            int32_t hello[2];
            ok = fd >= 0 && io_all(c, fd, hello, sizeof(hello), false) && hello[0] > 0 &&
                 hello[0] < c->n;
            if (ok) {
                boot[hello[0]] = fd;
                ports[hello[0]] = (uint16_t)hello[1];
            }
        }
        for (int i = 1; ok && i < c->n; i++)
            ok = io_all(c, boot[i], ports, sizeof(*ports) * (size_t)c->n, true);
        for (int i = 1; boot && i < c->n; i++)
            if (boot[i] > 0)
                close(boot[i]);
        free(boot);
        if (!ok)
            goto out;
    } else {
        int fd = connect_to(c, c->root_port);
        int32_t hello[2] = {c->rank, my_port};
        bool ok = fd >= 0 && io_all(c, fd, hello, sizeof(hello), true) &&
                  io_all(c, fd, ports, sizeof(*ports) * (size_t)c->n, false);
        if (fd >= 0)
            close(fd);
        if (!ok)
            goto out;
    }
    /* Every pair: the higher rank dials the lower one's listener and names itself. */
    for (int i = 0; i < c->rank; i++) {
        int32_t me = c->rank;
        c->fd[i] = connect_to(c, ports[i]);
        if (c->fd[i] < 0 || !io_all(c, c->fd[i], &me, sizeof(me), true))
            goto out;
    }
    for (int k = c->rank + 1; k < c->n; k++) {
        int fd = accept_one(c, lfd);
        int32_t who = -1;
        if (fd < 0 || !io_all(c, fd, &who, sizeof(who), false) || who <= c->rank || who >= c->n ||
            c->fd[who] >= 0) {
            if (fd >= 0)
                close(fd);
            goto out;
        }
        c->fd[who] = fd;
    }
    rc = ncclSuccess;
out:
    if (lfd >= 0)
        close(lfd);
    free(ports);
    __atomic_store_n(&c->state, aborted(c) ? ncclInvalidUsage : rc, __ATOMIC_RELEASE);
    return NULL;
}

API ncclResult_t ncclGetVersion(int *v)
{
    *v = 22800;
    return ncclSuccess;
}

API const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
        return "no error (fake NCCL)";
    case ncclInProgress:
        return "operation in progress (fake NCCL)";
    case ncclRemoteError:
        return "remote process exited or there was a network error (fake NCCL)";
    default:
        return "error (fake NCCL)";
    }
}

API ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    uint16_t port = 0;
    if (g_root_fd < 0)
        g_root_fd = listener(&port);
    else {
        struct sockaddr_in a;
        socklen_t l = sizeof(a);
        getsockname(g_root_fd, (struct sockaddr *)&a, &l);
        port = ntohs(a.sin_port);
    }
    if (g_root_fd < 0)
        return ncclSystemError;
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, "FAKENCCL", 8);
    memcpy(id->internal + 8, &port, sizeof(port));
    return ncclSuccess;
}

API ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int n, ncclUniqueId id, int rank,
                                        ncclConfig_t *cfg)
{
    if (memcmp(id.internal, "FAKENCCL", 8) || n < 1 || rank < 0 || rank >= n)
        return ncclInvalidArgument;
    if (!enqueue_fn) {
        const char *drv = getenv("LITETX_CUDA_DRIVER");
        void *h = drv ? dlopen(drv, RTLD_NOW | RTLD_NOLOAD) : NULL;
        enqueue_fn =
            h ? (int (*)(void *, void (*)(void *), void *))dlsym(h, "fakecuda_enqueue") : NULL;
        if (!enqueue_fn)
            return ncclSystemError; /* only with the fake CUDA driver */
    }
    struct ncclComm *c = calloc(1, sizeof(*c));
    if (!c || !(c->fd = malloc(sizeof(int) * (size_t)n))) {
        free(c);
        return ncclSystemError;
    }
    for (int i = 0; i < n; i++)
        c->fd[i] = -1;
    c->rank = rank;
    c->n = n;
    c->refs = 1;
    c->state = ncclInProgress;
    c->nonblocking = cfg && cfg->blocking == 0;
    memcpy(&c->root_port, id.internal + 8, sizeof(c->root_port));
    if (pthread_create(&c->init_th, NULL, init_main, c)) {
        comm_unref(c);
        return ncclSystemError;
    }
    c->init_started = true;
    *out = c;
    if (c->nonblocking)
        return ncclInProgress;
    pthread_join(c->init_th, NULL);
    c->init_started = false;
    return (ncclResult_t)c->state;
}

API ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *err)
{
    int busy = ncclInProgress;
    /* The group is "enqueued" by the next look. Compare-and-swap: an error its stream stored
     * meanwhile must stay. */
    if (c->group_inprogress && __atomic_compare_exchange_n(&c->state, &busy, ncclSuccess, false,
                                                           __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        c->group_inprogress = false;
        *err = ncclInProgress;
        return ncclSuccess;
    }
    c->group_inprogress = false;
    *err = (ncclResult_t)__atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
    return ncclSuccess;
}

API ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *dev)
{
    *dev = 0;
    return ncclSuccess;
}

static void comm_end(ncclComm_t c)
{
    if (c->init_started)
        pthread_join(c->init_th, NULL);
    c->init_started = false;
    comm_unref(c);
}

API ncclResult_t ncclCommAbort(ncclComm_t c)
{
    __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < c->n; i++)
        if (c->fd[i] >= 0)
            shutdown(c->fd[i], SHUT_RDWR);
    /* As NCCL's abort, which returns with its kernels stopped: a group still on its stream
     * (each holds a reference) may not write into buffers its caller frees after this. A group
     * leaves within a poll interval of the abort; bounded for one stuck behind other work. */
    for (int i = 0; i < 10000 && __atomic_load_n(&c->refs, __ATOMIC_ACQUIRE) > 1; i++)
        usleep(1000);
    comm_end(c);
    return ncclSuccess;
}

API ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    return ncclSuccess;
}

API ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    comm_end(c);
    return ncclSuccess;
}

/* ---- groups ---- */

struct op {
    bool send;
    char *buf;
    size_t len, done;
    int peer;
};

struct group {
    struct ncclComm *c;
    void *stream;
    struct op *ops;
    int nops;
};

static __thread int t_depth;
static __thread struct group t_group;

static size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    default:
        return 8;
    }
}

/* On the stream: move every op's bytes; ops of one kind with one peer in posting order. On a
 * broken connection, report it and block like a kernel until the communicator is aborted. */
static void run_group(void *a)
{
    struct group *g = a;
    struct ncclComm *c = g->c;
    struct pollfd *pf = calloc((size_t)g->nops, sizeof(*pf));
    int *which = calloc((size_t)g->nops, sizeof(*which));
    bool failed = !pf || !which;
    for (;;) {
        int n = 0;
        for (int i = 0; i < g->nops && !failed; i++) {
            struct op *o = &g->ops[i];
            if (o->done == o->len)
                continue;
            bool first = true; /* the first unfinished op of its kind and peer */
            for (int j = 0; j < i; j++)
                first &= !(g->ops[j].send == o->send && g->ops[j].peer == o->peer &&
                           g->ops[j].done < g->ops[j].len);
            if (!first)
                continue;
            pf[n] = (struct pollfd){.fd = c->fd[o->peer], .events = o->send ? POLLOUT : POLLIN};
            which[n++] = i;
        }
        if (n == 0 && !failed)
            break;
        if (aborted(c))
            break;
        if (failed) {
            usleep(10000);
            continue;
        }
        if (poll(pf, (nfds_t)n, 100) <= 0)
            continue;
        for (int k = 0; k < n && !failed; k++) {
            if (!pf[k].revents)
                continue;
            struct op *o = &g->ops[which[k]];
            size_t want = o->len - o->done;
            if (want > (1u << 20))
                want = 1u << 20;
            ssize_t r = o->send
                            ? send(pf[k].fd, o->buf + o->done, want, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : recv(pf[k].fd, o->buf + o->done, want, MSG_DONTWAIT);
            if (r > 0)
                o->done += (size_t)r;
            else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                failed = true;
                __atomic_store_n(&c->state, ncclRemoteError, __ATOMIC_RELEASE);
            }
        }
    }
    free(pf);
    free(which);
    free(g->ops);
    comm_unref(c);
    free(g);
}

API ncclResult_t ncclGroupStart(void)
{
    t_depth++;
    return ncclSuccess;
}

API ncclResult_t ncclGroupEnd(void)
{
    if (t_depth <= 0)
        return ncclInvalidUsage;
    if (--t_depth)
        return ncclSuccess;
    struct group *g = malloc(sizeof(*g));
    if (!g) {
        free(t_group.ops);
        t_group = (struct group){0};
        return ncclSystemError;
    }
    *g = t_group;
    t_group = (struct group){0};
    if (!g->nops) {
        free(g);
        return ncclSuccess;
    }
    struct ncclComm *c = g->c;
    __atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
    if (enqueue_fn(g->stream, run_group, g))
        return ncclSystemError;
    int ok = ncclSuccess;
    /* as NCCL may: the group is still being enqueued; the next async-error look ends it (not
     * over an error the stream just stored) */
    if (c->nonblocking && __atomic_compare_exchange_n(&c->state, &ok, ncclInProgress, false,
                                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        c->group_inprogress = true;
        return ncclInProgress;
    }
    return ncclSuccess;
}

static ncclResult_t add_op(bool send, const void *buf, size_t count, ncclDataType_t t, int peer,
                           ncclComm_t c, cudaStream_t s)
{
    if (peer < 0 || peer >= c->n || peer == c->rank || c->fd[peer] < 0)
        return ncclInvalidArgument;
    bool solo = t_depth == 0;
    if (solo)
        ncclGroupStart();
    if (t_group.nops && (t_group.c != c || t_group.stream != (void *)s))
        return ncclInvalidUsage; /* one communicator and stream per group here */
    struct op *ops = realloc(t_group.ops, sizeof(*ops) * (size_t)(t_group.nops + 1));
    if (!ops)
        return ncclSystemError;
    t_group.ops = ops;
    t_group.c = c;
    t_group.stream = (void *)s;
    ops[t_group.nops++] =
        (struct op){.send = send, .buf = (char *)buf, .len = count * type_size(t), .peer = peer};
    return solo ? ncclGroupEnd() : ncclSuccess;
}

API ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                          cudaStream_t s)
{
    return add_op(true, buf, count, t, peer, c, s);
}

API ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                          cudaStream_t s)
{
    return add_op(false, buf, count, t, peer, c, s);
}
