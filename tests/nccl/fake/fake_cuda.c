/*
 * fake_cuda.c - a named test double of the CUDA driver, for CI hosts without a GPU
 * (LITETX_CUDA_DRIVER=libfake_cuda.so). Used only IN ADDITION to the real GPU suite
 * (run_nccl_suite.sh): it exercises the nccl backend's scheduling, ordering and failure logic,
 * never CUDA itself.
 *
 * "Device memory" is host memory from cuMemAlloc, remembered so that cuPointerGetAttributes
 * calls it device memory. A stream is a worker thread running its work in order (copies, event
 * records, and the fake NCCL's groups through fakecuda_enqueue), so an NCCL group waiting for its
 * partner blocks the stream as a real kernel would.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API __attribute__((visibility("default")))
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
enum { OK = 0, E_INVALID = 1, E_OOM = 2, E_NOT_READY = 600, E_NOT_SUPPORTED = 801 };

/* ---- memory ---- */

#define MAX_REGIONS 4096
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uintptr_t base;
    size_t len;
} g_reg[MAX_REGIONS];

API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    void *m = malloc(n ? n : 1);
    if (!m)
        return E_OOM;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_REGIONS; i++) {
        if (!g_reg[i].base) {
            g_reg[i].base = (uintptr_t)m;
            g_reg[i].len = n ? n : 1;
            pthread_mutex_unlock(&g_mu);
            *p = (CUdeviceptr)(uintptr_t)m;
            return OK;
        }
    }
    pthread_mutex_unlock(&g_mu);
    free(m);
    return E_OOM;
}

API CUresult cuMemFree_v2(CUdeviceptr p)
{
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_REGIONS; i++) {
        if (g_reg[i].base == (uintptr_t)p) {
            g_reg[i].base = 0;
            pthread_mutex_unlock(&g_mu);
            free((void *)(uintptr_t)p);
            return OK;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return E_INVALID;
}

static bool is_dev(uintptr_t p)
{
    bool found = false;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_REGIONS && !found; i++)
        found = g_reg[i].base && p >= g_reg[i].base && p - g_reg[i].base < g_reg[i].len;
    pthread_mutex_unlock(&g_mu);
    return found;
}

API CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p)
{
    bool dev = is_dev((uintptr_t)p);
    for (unsigned i = 0; i < n; i++) {
        if (attrs[i] == 2) /* MEMORY_TYPE */
            *(unsigned *)data[i] = dev ? 2 : 0;
        else if (attrs[i] == 8) /* IS_MANAGED */
            *(unsigned *)data[i] = 0;
        else if (attrs[i] == 9) /* DEVICE_ORDINAL */
            *(int *)data[i] = dev ? 0 : -1;
    }
    return OK;
}

API CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n)
{
    memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    return OK;
}

API CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{
    memset((void *)(uintptr_t)d, v, n);
    return OK;
}

API CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
    *p = malloc(n ? n : 1);
    return *p ? OK : E_OOM;
}
API CUresult cuMemFreeHost(void *p)
{
    free(p);
    return OK;
}
API CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
    return OK;
}
API CUresult cuMemHostUnregister(void *p)
{
    return OK;
}

/* ---- streams and events ---- */

struct job {
    struct job *next;
    void (*fn)(void *);
    void *arg;
};

struct CUstream_st {
    pthread_mutex_t mu;
    pthread_cond_t cv, idle;
    struct job *head, *tail;
    bool busy, stop;
    pthread_t th;
};

struct CUevent_st {
    int done;    /* atomic */
    int pending; /* under g_ev_mu: records and stream waits still queued that read it */
    bool dead;   /* under g_ev_mu: destroyed while some were queued (legal in CUDA) */
};
static pthread_mutex_t g_ev_mu = PTHREAD_MUTEX_INITIALIZER;

static void *stream_main(void *a)
{
    struct CUstream_st *s = a;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head)
            break;
        struct job *j = s->head;
        s->head = j->next;
        if (!s->head)
            s->tail = NULL;
        s->busy = true;
        pthread_mutex_unlock(&s->mu);
        j->fn(j->arg);
        free(j);
        pthread_mutex_lock(&s->mu);
        s->busy = false;
        if (!s->head)
            pthread_cond_broadcast(&s->idle);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* For the fake NCCL: run fn(arg) on stream s, in order with the stream's other work. */
API int fakecuda_enqueue(struct CUstream_st *s, void (*fn)(void *), void *arg)
{
    struct job *j = malloc(sizeof(*j));
    if (!j)
        return E_OOM;
    j->next = NULL;
    j->fn = fn;
    j->arg = arg;
    if (!s) { /* the legacy stream: synchronous */
        fn(arg);
        free(j);
        return OK;
    }
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return OK;
}

API CUresult cuStreamCreate(struct CUstream_st **out, unsigned flags)
{
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (!s)
        return E_OOM;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (pthread_create(&s->th, NULL, stream_main, s)) {
        free(s);
        return E_OOM;
    }
    *out = s;
    return OK;
}

API CUresult cuStreamSynchronize(struct CUstream_st *s)
{
    if (!s)
        return OK;
    pthread_mutex_lock(&s->mu);
    while (s->head || s->busy)
        pthread_cond_wait(&s->idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return OK;
}

API CUresult cuStreamDestroy_v2(struct CUstream_st *s)
{
    cuStreamSynchronize(s);
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return OK;
}

API CUresult cuStreamQuery(struct CUstream_st *s)
{
    if (!s)
        return OK;
    pthread_mutex_lock(&s->mu);
    bool pending = s->head || s->busy;
    pthread_mutex_unlock(&s->mu);
    return pending ? E_NOT_READY : OK;
}

API CUresult cuEventCreate(struct CUevent_st **e, unsigned flags)
{
    *e = calloc(1, sizeof(**e));
    if (!*e)
        return E_OOM;
    (*e)->done = 1;
    return OK;
}
API CUresult cuEventDestroy_v2(struct CUevent_st *e)
{
    pthread_mutex_lock(&g_ev_mu);
    bool now = e->pending == 0;
    e->dead = true;
    pthread_mutex_unlock(&g_ev_mu);
    if (now)
        free(e); /* else the last queued record frees it */
    return OK;
}

/* A queued job that read e is finished with it: the last one frees a destroyed event. */
static void ev_unref(struct CUevent_st *e)
{
    pthread_mutex_lock(&g_ev_mu);
    bool gone = --e->pending == 0 && e->dead;
    pthread_mutex_unlock(&g_ev_mu);
    if (gone)
        free(e);
}

static void ev_ref(struct CUevent_st *e)
{
    pthread_mutex_lock(&g_ev_mu);
    e->pending++;
    pthread_mutex_unlock(&g_ev_mu);
}

static void mark(void *a)
{
    struct CUevent_st *e = a;
    __atomic_store_n(&e->done, 1, __ATOMIC_RELEASE);
    ev_unref(e);
}

API CUresult cuEventRecord(struct CUevent_st *e, struct CUstream_st *s)
{
    __atomic_store_n(&e->done, 0, __ATOMIC_RELEASE);
    ev_ref(e);
    CUresult rc = fakecuda_enqueue(s, mark, e);
    if (rc != OK)
        ev_unref(e);
    return rc;
}

API CUresult cuEventQuery(struct CUevent_st *e)
{
    return __atomic_load_n(&e->done, __ATOMIC_ACQUIRE) ? OK : E_NOT_READY;
}

API CUresult cuEventSynchronize(struct CUevent_st *e)
{
    while (!__atomic_load_n(&e->done, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    return OK;
}

struct wait_arg {
    struct CUevent_st *e;
};
static void wait_ev(void *a)
{
    struct CUevent_st *e = ((struct wait_arg *)a)->e;
    free(a);
    cuEventSynchronize(e);
    ev_unref(e);
}
/* The queued wait holds a reference: the caller may destroy e right after this call (as
 * lite_gpu_stream_wait_user does; CUDA allows it) while the wait has not run yet. */
API CUresult cuStreamWaitEvent(struct CUstream_st *s, struct CUevent_st *e, unsigned flags)
{
    struct wait_arg *w = malloc(sizeof(*w));
    if (!w)
        return E_OOM;
    w->e = e;
    ev_ref(e);
    CUresult rc = fakecuda_enqueue(s, wait_ev, w);
    if (rc != OK) {
        free(w);
        ev_unref(e);
    }
    return rc;
}

struct copy_arg {
    void *d;
    const void *s;
    size_t n;
};
/* FAKECUDA_COPY_US: every asynchronous copy takes at least this long (a slow bus), so tests can
 * catch a pipeline with copies still running. */
static long copy_us = -1;
static void do_copy(void *a)
{
    struct copy_arg *c = a;
    memmove(c->d, c->s, c->n);
    free(c);
    long us = __atomic_load_n(&copy_us, __ATOMIC_RELAXED);
    if (us < 0) {
        const char *v = getenv("FAKECUDA_COPY_US");
        us = v ? atol(v) : 0;
        us = us < 0 ? 0 : us > 1000000 ? 1000000 : us;
        __atomic_store_n(&copy_us, us, __ATOMIC_RELAXED);
    }
    if (us > 0) {
        struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
}
API CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, struct CUstream_st *st)
{
    struct copy_arg *c = malloc(sizeof(*c));
    if (!c)
        return E_OOM;
    c->d = (void *)(uintptr_t)d;
    c->s = (const void *)(uintptr_t)s;
    c->n = n;
    return fakecuda_enqueue(st, do_copy, c);
}

/* ---- device, context, modules ---- */

API CUresult cuInit(unsigned f)
{
    return OK;
}
API CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return OK;
}
API CUresult cuGetErrorName(CUresult r, const char **s)
{
    *s = "CUDA_ERROR_FAKE";
    return OK;
}
API CUresult cuDeviceGetCount(int *n)
{
    *n = 1;
    return OK;
}
API CUresult cuDeviceGet(int *d, int i)
{
    *d = i;
    return i == 0 ? OK : E_INVALID;
}
API CUresult cuDeviceGetAttribute(int *v, int a, int d)
{
    *v = 1;
    return OK;
}
API CUresult cuDevicePrimaryCtxRetain(void **c, int d)
{
    static int ctx;
    *c = &ctx;
    return OK;
}
API CUresult cuCtxPushCurrent_v2(void *c)
{
    return OK;
}
API CUresult cuCtxPopCurrent_v2(void **c)
{
    if (c)
        *c = NULL;
    return OK;
}
/* No kernels: the library's reductions stay on the CPU under the double. */
API CUresult cuModuleLoadData(void **m, const void *img)
{
    return E_NOT_SUPPORTED;
}
API CUresult cuModuleGetFunction(void **f, void *m, const char *name)
{
    return E_NOT_SUPPORTED;
}
API CUresult cuLaunchKernel(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e,
                            unsigned g, unsigned sh, void *st, void **p, void **x)
{
    return E_NOT_SUPPORTED;
}
