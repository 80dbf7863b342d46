/*
 * gpu.c - the CUDA driver loaded at run time (see gpu.h for the contract).
 *
 * The driver-API declarations below are our own, with the values of cuda.h (CUDA 12/13; the
 * test gpu.abi compiles them against cuda.h where it is installed). Entry points are looked up
 * by their versioned names (cuMemAlloc_v2, ...): the names cuda.h maps the API to, and the ones
 * that exist in every driver since CUDA 11.
 */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "gpu_cu.h"
#include "lite_int.h"
#include "reduce.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

/* The driver's entry points; NULL members are optional ones this driver lacks. */
struct cu_api {
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxPushCurrent)(CUcontext);
    CUresult (*CtxPopCurrent)(CUcontext *);
    CUresult (*PointerGetAttributes)(unsigned, int *, void **, CUdeviceptr);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamQuery)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventQuery)(CUevent);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*Memcpy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemHostRegister)(void *, size_t, unsigned);
    CUresult (*MemHostUnregister)(void *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
    /* optional (CUDA 11.7+) */
    CUresult (*MemGetHandleForAddressRange)(void *, CUdeviceptr, size_t, int, unsigned long long);
};

#define GPU_MAX_DEVICES 64

struct gpu_dev {
    pthread_mutex_t lock;
    CUcontext ctx; /* the primary context, retained once for the process's lifetime */
    CUmodule mod;  /* the embedded kernels, loaded on first use */
    CUfunction reduce_fn[LITE_DTYPE_COUNT];
    CUfunction avg_fn[LITE_DTYPE_COUNT];
    int sms;
    int mod_rc; /* 1 = not tried yet, else the result of loading the module */
};

static struct {
    pthread_once_t once;
    void *lib;
    struct cu_api api;
    int rc; /* 0, -ENOSYS or -ENODEV */
    char why[256];
    int ndev;
    struct gpu_dev dev[GPU_MAX_DEVICES];
} G = {.once = PTHREAD_ONCE_INIT};

struct lite_gpu_stream {
    int dev;
    CUstream s;
};

struct lite_gpu_event {
    int dev;
    CUevent e;
};

#ifdef LITE_HAVE_CUDA_KERNELS
/* The fatbin of the kernels in src/cuda/, embedded at build time (cuda_fatbin.c, generated). */
extern const unsigned char lite_cuda_fatbin[];
extern const size_t lite_cuda_fatbin_len;
#endif

static const char *cu_name(CUresult r)
{
    const char *s = NULL;
    if (G.api.GetErrorName && G.api.GetErrorName(r, &s) == LCU_SUCCESS && s)
        return s;
    return "unknown CUDA error";
}

/* One translation point from CUresult to our codes; logs the failure. */
static int cu_err(CUresult r, const char *what)
{
    if (r == LCU_SUCCESS)
        return 0;
    if (r == LCU_ERROR_NOT_READY)
        return -EAGAIN;
    LITE_ERROR("gpu: %s failed: %s (%d)", what, cu_name(r), r);
    if (r == LCU_ERROR_OUT_OF_MEMORY)
        return -ENOMEM;
    if (r == LCU_ERROR_INVALID_VALUE)
        return -EINVAL;
    if (r == LCU_ERROR_NO_DEVICE)
        return -ENODEV;
    return -EIO;
}

static int sym(const char *name, void **fn, bool required)
{
    *fn = dlsym(G.lib, name);
    if (!*fn && required) {
        snprintf(G.why, sizeof(G.why), "the CUDA driver lacks %s (driver too old?)", name);
        return -ENOSYS;
    }
    return 0;
}

static void load_once(void)
{
    const char *name = getenv("LITETX_CUDA_DRIVER");
    if (!name || !*name)
        name = "libcuda.so.1";
    __atomic_store_n(&G.lib, dlopen(name, RTLD_NOW | RTLD_LOCAL), __ATOMIC_RELEASE);
    if (!G.lib) {
        const char *e = dlerror();
        snprintf(G.why, sizeof(G.why), "no CUDA driver: cannot load %s (%s)", name,
                 e ? e : "not found");
        G.rc = -ENOSYS;
        return;
    }
    struct cu_api *a = &G.api;
    const struct {
        const char *name;
        void **fn;
        bool required;
    } tab[] = {
        {"cuInit", (void **)&a->Init, true},
        {"cuDriverGetVersion", (void **)&a->DriverGetVersion, true},
        {"cuGetErrorName", (void **)&a->GetErrorName, true},
        {"cuDeviceGetCount", (void **)&a->DeviceGetCount, true},
        {"cuDeviceGet", (void **)&a->DeviceGet, true},
        {"cuDeviceGetAttribute", (void **)&a->DeviceGetAttribute, true},
        {"cuDevicePrimaryCtxRetain", (void **)&a->DevicePrimaryCtxRetain, true},
        {"cuCtxPushCurrent_v2", (void **)&a->CtxPushCurrent, true},
        {"cuCtxPopCurrent_v2", (void **)&a->CtxPopCurrent, true},
        {"cuPointerGetAttributes", (void **)&a->PointerGetAttributes, true},
        {"cuStreamCreate", (void **)&a->StreamCreate, true},
        {"cuStreamDestroy_v2", (void **)&a->StreamDestroy, true},
        {"cuStreamQuery", (void **)&a->StreamQuery, true},
        {"cuStreamSynchronize", (void **)&a->StreamSynchronize, true},
        {"cuStreamWaitEvent", (void **)&a->StreamWaitEvent, true},
        {"cuEventCreate", (void **)&a->EventCreate, true},
        {"cuEventDestroy_v2", (void **)&a->EventDestroy, true},
        {"cuEventRecord", (void **)&a->EventRecord, true},
        {"cuEventQuery", (void **)&a->EventQuery, true},
        {"cuEventSynchronize", (void **)&a->EventSynchronize, true},
        {"cuMemcpyAsync", (void **)&a->MemcpyAsync, true},
        {"cuMemcpy", (void **)&a->Memcpy, true},
        {"cuMemsetD8_v2", (void **)&a->MemsetD8, true},
        {"cuMemHostAlloc", (void **)&a->MemHostAlloc, true},
        {"cuMemFreeHost", (void **)&a->MemFreeHost, true},
        {"cuMemHostRegister_v2", (void **)&a->MemHostRegister, true},
        {"cuMemHostUnregister", (void **)&a->MemHostUnregister, true},
        {"cuMemAlloc_v2", (void **)&a->MemAlloc, true},
        {"cuMemFree_v2", (void **)&a->MemFree, true},
        {"cuModuleLoadData", (void **)&a->ModuleLoadData, true},
        {"cuModuleGetFunction", (void **)&a->ModuleGetFunction, true},
        {"cuLaunchKernel", (void **)&a->LaunchKernel, true},
        {"cuMemGetHandleForAddressRange", (void **)&a->MemGetHandleForAddressRange, false},
    };
    for (size_t i = 0; i < LITE_ARRAY_LEN(tab); i++) {
        if (sym(tab[i].name, tab[i].fn, tab[i].required)) {
            G.rc = -ENOSYS;
            return;
        }
    }
    CUresult r = a->Init(0);
    if (r != LCU_SUCCESS) {
        snprintf(G.why, sizeof(G.why), "CUDA driver %s loaded but cuInit failed: %s (%d)", name,
                 cu_name(r), r);
        G.rc = -ENODEV;
        return;
    }
    int n = 0;
    r = a->DeviceGetCount(&n);
    if (r != LCU_SUCCESS || n <= 0) {
        snprintf(G.why, sizeof(G.why), "CUDA driver loaded but no device is visible (%s)",
                 r == LCU_SUCCESS ? "count 0" : cu_name(r));
        G.rc = -ENODEV;
        return;
    }
    G.ndev = n < GPU_MAX_DEVICES ? n : GPU_MAX_DEVICES;
    for (int i = 0; i < G.ndev; i++) {
        pthread_mutex_init(&G.dev[i].lock, NULL);
        G.dev[i].mod_rc = 1;
    }
    int ver = 0;
    a->DriverGetVersion(&ver);
    LITE_DEBUG("gpu: CUDA driver %d.%d, %d device(s)", ver / 1000, ver % 1000 / 10, n);
    G.rc = 0;
}

static int loaded(void)
{
    pthread_once(&G.once, load_once);
    return G.rc;
}

int lite_gpu_available(char *why, size_t why_len)
{
    int rc = loaded();
    if (why && why_len)
        snprintf(why, why_len, "%s", rc ? G.why : "");
    return rc;
}

int lite_gpu_device_count(void)
{
    return loaded() ? 0 : G.ndev;
}

int lite_gpu_have_kernels(void)
{
#ifdef LITE_HAVE_CUDA_KERNELS
    return 1;
#else
    return 0;
#endif
}

/* Make device d's primary context current (retaining it on first use). */
static int ctx_enter(int d)
{
    int rc = loaded();
    if (rc) {
        LITE_ERROR("gpu: %s", G.why);
        return rc;
    }
    if (d < 0 || d >= G.ndev) {
        LITE_ERROR("gpu: no device %d (%d visible)", d, G.ndev);
        return -ENODEV;
    }
    struct gpu_dev *g = &G.dev[d];
    CUcontext c = __atomic_load_n(&g->ctx, __ATOMIC_ACQUIRE);
    if (!c) {
        pthread_mutex_lock(&g->lock);
        if (!g->ctx) {
            CUdevice dev;
            rc = cu_err(G.api.DeviceGet(&dev, d), "cuDeviceGet");
            if (!rc)
                rc = cu_err(G.api.DevicePrimaryCtxRetain(&c, dev), "cuDevicePrimaryCtxRetain");
            if (!rc) {
                int sms = 0;
                G.api.DeviceGetAttribute(&sms, LCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
                g->sms = sms > 0 ? sms : 1;
                __atomic_store_n(&g->ctx, c, __ATOMIC_RELEASE);
            }
        }
        c = g->ctx;
        pthread_mutex_unlock(&g->lock);
        if (rc)
            return rc;
    }
    return cu_err(G.api.CtxPushCurrent(c), "cuCtxPushCurrent");
}

static void ctx_leave(void)
{
    CUcontext c;
    G.api.CtxPopCurrent(&c);
}

/* The device of the calling thread's pointer, for calls that take no stream. */
static int ptr_dev(const void *p)
{
    int d = 0;
    return lite_gpu_ptr_kind(p, &d) == LITE_MEM_CUDA ? d : 0;
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1; /* the counter is the same in every entry: one is enough */
}

/* Whether the process has the CUDA driver loaded, without loading it: a process that never
 * loaded the driver has no device memory, and cuInit costs time and memory that host-only
 * applications should not pay. dlopen(RTLD_NOLOAD) alone costs tens of microseconds, so it runs
 * only when the loader's count of loaded objects (dlpi_adds) moved since the last look. */
static bool driver_in_process(void)
{
    static unsigned long long seen = ~0ull;
    if (__atomic_load_n(&G.lib, __ATOMIC_ACQUIRE))
        return true;
    unsigned long long adds = 0;
    dl_iterate_phdr(count_adds, &adds);
    if (adds == __atomic_load_n(&seen, __ATOMIC_RELAXED))
        return false;
    const char *name = getenv("LITETX_CUDA_DRIVER");
    void *h = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        dlclose(h);
        return true;
    }
    __atomic_store_n(&seen, adds, __ATOMIC_RELAXED);
    return false;
}

int lite_gpu_ptr_kind(const void *p, int *device)
{
    if (!driver_in_process())
        return LITE_MEM_HOST;
    if (loaded() || !p)
        return LITE_MEM_HOST;
    unsigned int type = 0, managed = 0;
    int ordinal = -1;
    int attrs[3] = {LCU_POINTER_ATTRIBUTE_MEMORY_TYPE, LCU_POINTER_ATTRIBUTE_IS_MANAGED,
                    LCU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *data[3] = {&type, &managed, &ordinal};
    if (G.api.PointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)p) != LCU_SUCCESS)
        return LITE_MEM_HOST;
    if (type != LCU_MEMORYTYPE_DEVICE || managed)
        return LITE_MEM_HOST;
    if (device)
        *device = ordinal;
    return LITE_MEM_CUDA;
}

/* ---- streams and events ---- */

int lite_gpu_stream_create(int device, struct lite_gpu_stream **out)
{
    *out = NULL;
    struct lite_gpu_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    int rc = ctx_enter(device);
    if (rc) {
        free(s);
        return rc;
    }
    rc = cu_err(G.api.StreamCreate(&s->s, LCU_STREAM_NON_BLOCKING), "cuStreamCreate");
    ctx_leave();
    if (rc) {
        free(s);
        return rc;
    }
    s->dev = device;
    *out = s;
    return 0;
}

void lite_gpu_stream_destroy(struct lite_gpu_stream *s)
{
    if (!s)
        return;
    if (ctx_enter(s->dev) == 0) {
        G.api.StreamSynchronize(s->s);
        G.api.StreamDestroy(s->s);
        ctx_leave();
    }
    free(s);
}

int lite_gpu_stream_device(const struct lite_gpu_stream *s)
{
    return s->dev;
}

void *lite_gpu_stream_raw(const struct lite_gpu_stream *s)
{
    return s->s;
}

/* Calls on an object of device d run with d's context current, as the driver expects. */
#define IN_CTX(d, call, what)                                                                      \
    do {                                                                                           \
        int rc_ = ctx_enter(d);                                                                    \
        if (rc_)                                                                                   \
            return rc_;                                                                            \
        rc_ = cu_err(call, what);                                                                  \
        ctx_leave();                                                                               \
        return rc_;                                                                                \
    } while (0)

int lite_gpu_stream_query(struct lite_gpu_stream *s)
{
    IN_CTX(s->dev, G.api.StreamQuery(s->s), "cuStreamQuery");
}

int lite_gpu_stream_sync(struct lite_gpu_stream *s)
{
    IN_CTX(s->dev, G.api.StreamSynchronize(s->s), "cuStreamSynchronize");
}

int lite_gpu_stream_wait_user(struct lite_gpu_stream *s, void *user)
{
    int rc = ctx_enter(s->dev);
    if (rc)
        return rc;
    CUevent e = NULL;
    rc = cu_err(G.api.EventCreate(&e, LCU_EVENT_DISABLE_TIMING), "cuEventCreate");
    if (!rc)
        rc = cu_err(G.api.EventRecord(e, (CUstream)user), "cuEventRecord (caller's stream)");
    if (!rc)
        rc = cu_err(G.api.StreamWaitEvent(s->s, e, 0), "cuStreamWaitEvent");
    if (e)
        G.api.EventDestroy(e); /* released once the wait is satisfied: legal while pending */
    ctx_leave();
    return rc;
}

int lite_gpu_event_create(int device, struct lite_gpu_event **out)
{
    *out = NULL;
    struct lite_gpu_event *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    int rc = ctx_enter(device);
    if (rc) {
        free(e);
        return rc;
    }
    rc = cu_err(G.api.EventCreate(&e->e, LCU_EVENT_DISABLE_TIMING), "cuEventCreate");
    ctx_leave();
    if (rc) {
        free(e);
        return rc;
    }
    e->dev = device;
    *out = e;
    return 0;
}

void lite_gpu_event_destroy(struct lite_gpu_event *e)
{
    if (!e)
        return;
    if (ctx_enter(e->dev) == 0) {
        G.api.EventDestroy(e->e);
        ctx_leave();
    }
    free(e);
}

int lite_gpu_event_record(struct lite_gpu_event *e, struct lite_gpu_stream *s)
{
    IN_CTX(e->dev, G.api.EventRecord(e->e, s->s), "cuEventRecord");
}

int lite_gpu_event_query(struct lite_gpu_event *e)
{
    IN_CTX(e->dev, G.api.EventQuery(e->e), "cuEventQuery");
}

int lite_gpu_event_sync(struct lite_gpu_event *e)
{
    IN_CTX(e->dev, G.api.EventSynchronize(e->e), "cuEventSynchronize");
}

/* ---- copies ---- */

int lite_gpu_copy_async(void *dst, const void *src, size_t n, struct lite_gpu_stream *s)
{
    if (n == 0)
        return 0;
    int rc = ctx_enter(s->dev);
    if (rc)
        return rc;
    rc =
        cu_err(G.api.MemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n, s->s),
               "cuMemcpyAsync");
    ctx_leave();
    return rc;
}

int lite_gpu_copy(void *dst, const void *src, size_t n)
{
    if (n == 0)
        return 0;
    int d = lite_gpu_ptr_kind(dst, NULL) == LITE_MEM_CUDA ? ptr_dev(dst) : ptr_dev(src);
    int rc = ctx_enter(d);
    if (rc)
        return rc;
    rc = cu_err(G.api.Memcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n),
                "cuMemcpy");
    ctx_leave();
    return rc;
}

int lite_gpu_memset(void *dst, int v, size_t n)
{
    int rc = ctx_enter(ptr_dev(dst));
    if (rc)
        return rc;
    rc = cu_err(G.api.MemsetD8((CUdeviceptr)(uintptr_t)dst, (unsigned char)v, n), "cuMemsetD8");
    ctx_leave();
    return rc;
}

/* ---- memory ---- */

int lite_gpu_host_alloc(size_t n, void **out)
{
    *out = NULL;
    int rc = ctx_enter(0);
    if (rc)
        return rc;
    rc = cu_err(G.api.MemHostAlloc(out, n ? n : 1, LCU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
    ctx_leave();
    return rc;
}

void lite_gpu_host_free(void *p)
{
    if (p && ctx_enter(0) == 0) {
        G.api.MemFreeHost(p);
        ctx_leave();
    }
}

int lite_gpu_host_register(void *p, size_t n)
{
    int rc = ctx_enter(0);
    if (rc)
        return rc;
    CUresult r = G.api.MemHostRegister(p, n, LCU_MEMHOSTREGISTER_PORTABLE);
    ctx_leave();
    if (r == LCU_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        return -EEXIST;
    return cu_err(r, "cuMemHostRegister");
}

void lite_gpu_host_unregister(void *p)
{
    if (p && ctx_enter(0) == 0) {
        G.api.MemHostUnregister(p);
        ctx_leave();
    }
}

int lite_gpu_mem_alloc(int device, size_t n, void **out)
{
    *out = NULL;
    int rc = ctx_enter(device);
    if (rc)
        return rc;
    CUdeviceptr p = 0;
    rc = cu_err(G.api.MemAlloc(&p, n ? n : 1), "cuMemAlloc");
    ctx_leave();
    if (!rc)
        *out = (void *)(uintptr_t)p;
    return rc;
}

void lite_gpu_mem_free(void *p)
{
    if (p && ctx_enter(ptr_dev(p)) == 0) {
        G.api.MemFree((CUdeviceptr)(uintptr_t)p);
        ctx_leave();
    }
}

int lite_gpu_dmabuf(const void *addr, size_t len, int *fd, uint64_t *offset)
{
    int rc = loaded();
    if (rc) {
        LITE_ERROR("gpu: %s", G.why);
        return rc;
    }
    if (!G.api.MemGetHandleForAddressRange) {
        LITE_ERROR("gpu: the CUDA driver lacks cuMemGetHandleForAddressRange (dmabuf export "
                   "needs CUDA 11.7 or later)");
        return -ENOSYS;
    }
    rc = ctx_enter(ptr_dev(addr));
    if (rc)
        return rc;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t base = (uintptr_t)addr & ~(page - 1);
    size_t size = ((uintptr_t)addr + len - base + page - 1) & ~(page - 1);
    int h = -1;
    rc = cu_err(G.api.MemGetHandleForAddressRange(&h, (CUdeviceptr)base, size,
                                                  LCU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
                "cuMemGetHandleForAddressRange");
    ctx_leave();
    if (rc)
        return rc;
    if (h < 0)
        return -EIO;
    *fd = h;
    *offset = (uintptr_t)addr - base;
    return 0;
}

/* ---- reduction kernels ---- */

#ifdef LITE_HAVE_CUDA_KERNELS
static const char *const dt_name[LITE_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16", "i8",
                                                      "u8",  "i32", "u32", "i64",  "u64"};
#endif

/* The kernels of device d, loaded into its primary context on first use. Called with the
 * context current. */
static int kernels(int d)
{
    struct gpu_dev *g = &G.dev[d];
    int rc = __atomic_load_n(&g->mod_rc, __ATOMIC_ACQUIRE);
    if (rc != 1)
        return rc;
    pthread_mutex_lock(&g->lock);
    if (g->mod_rc == 1) {
#ifdef LITE_HAVE_CUDA_KERNELS
        rc = cu_err(G.api.ModuleLoadData(&g->mod, lite_cuda_fatbin),
                    "cuModuleLoadData (liblitetx's reduction kernels: is the device older than "
                    "the build's targets?)");
        for (int t = 0; !rc && t < LITE_DTYPE_COUNT; t++) {
            char name[48];
            snprintf(name, sizeof(name), "lite_reduce_%s", dt_name[t]);
            rc = cu_err(G.api.ModuleGetFunction(&g->reduce_fn[t], g->mod, name),
                        "cuModuleGetFunction");
            if (!rc && t <= LITE_BF16) {
                snprintf(name, sizeof(name), "lite_avg_%s", dt_name[t]);
                rc = cu_err(G.api.ModuleGetFunction(&g->avg_fn[t], g->mod, name),
                            "cuModuleGetFunction");
            }
        }
#else
        LITE_ERROR("gpu: this liblitetx was built without its CUDA kernels (LITE_WITH_CUDA=OFF "
                   "or nvcc not found)");
        rc = -ENOSYS;
#endif
        __atomic_store_n(&g->mod_rc, rc, __ATOMIC_RELEASE);
    }
    rc = g->mod_rc;
    pthread_mutex_unlock(&g->lock);
    return rc;
}

/* A grid that fills the device a few blocks deep; the kernels stride over the rest. */
static unsigned grid_for(int d, size_t count)
{
    const size_t per_block = 256 * 4;
    size_t want = (count + per_block - 1) / per_block;
    size_t cap = (size_t)G.dev[d].sms * 8;
    if (want > cap)
        want = cap;
    return want ? (unsigned)want : 1;
}

static int launch(struct lite_gpu_stream *s, CUfunction f, size_t count, void **params)
{
    return cu_err(
        G.api.LaunchKernel(f, grid_for(s->dev, count), 1, 1, 256, 1, 1, 0, s->s, params, NULL),
        "cuLaunchKernel");
}

int lite_gpu_reduce(void *acc, const void *in, size_t count, int dtype, int op,
                    struct lite_gpu_stream *s)
{
    if (lite_reduce_check(dtype, op))
        return -EINVAL;
    if (count == 0)
        return 0;
    size_t es = lite_dtype_size(dtype);
    if (((uintptr_t)acc | (uintptr_t)in) % es) {
        LITE_ERROR("gpu: reduce: device buffers %p and %p must be aligned to the element size "
                   "(%zu bytes)",
                   acc, in, es);
        return -EINVAL;
    }
    int rc = ctx_enter(s->dev);
    if (rc)
        return rc;
    rc = kernels(s->dev);
    if (!rc) {
        CUdeviceptr a = (CUdeviceptr)(uintptr_t)acc, b = (CUdeviceptr)(uintptr_t)in;
        unsigned long long n = count;
        int o = op == LITE_AVG ? LITE_SUM : op;
        void *params[] = {&a, &b, &n, &o};
        rc = launch(s, G.dev[s->dev].reduce_fn[dtype], count, params);
    }
    ctx_leave();
    return rc;
}

int lite_gpu_scale_avg(void *acc, size_t count, int dtype, int nranks, struct lite_gpu_stream *s)
{
    if (dtype < 0 || dtype > LITE_BF16 || nranks < 1)
        return -EINVAL;
    if (count == 0)
        return 0;
    if ((uintptr_t)acc % lite_dtype_size(dtype)) {
        LITE_ERROR("gpu: scale_avg: device buffer %p must be aligned to the element size", acc);
        return -EINVAL;
    }
    int rc = ctx_enter(s->dev);
    if (rc)
        return rc;
    rc = kernels(s->dev);
    if (!rc) {
        CUdeviceptr a = (CUdeviceptr)(uintptr_t)acc;
        unsigned long long n = count;
        void *params[] = {&a, &n, &nranks};
        rc = launch(s, G.dev[s->dev].avg_fn[dtype], count, params);
    }
    ctx_leave();
    return rc;
}
