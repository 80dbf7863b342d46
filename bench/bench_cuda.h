/*
 * bench_cuda.h - device buffers for the bench programs (--mem cuda), header-only.
 *
 * The benches link only the public library, so they load the CUDA driver themselves, at run
 * time like the library does (LITETX_CUDA_DRIVER=path overrides libcuda.so.1, which also lets
 * the named CUDA test double of tests/nccl/fake stand in). Every rank uses device
 * LITETX_BENCH_DEVICE (default 0). The library recognises the pointers as device memory by
 * itself (pointer query); nothing else is needed to pass them.
 */
#ifndef LITE_BENCH_CUDA_H
#define LITE_BENCH_CUDA_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static struct {
    int (*Init)(unsigned);
    int (*DeviceGet)(int *, int);
    int (*PrimaryCtxRetain)(void **, int);
    int (*CtxPush)(void *);
    int (*MemAlloc)(uint64_t *, size_t);
    int (*MemFree)(uint64_t);
    int (*Memcpy)(uint64_t, uint64_t, size_t);
} bcu;

/* 0, or -1 with the reason in why. */
static int bcuda_init(char *why, size_t why_len)
{
    const char *path = getenv("LITETX_CUDA_DRIVER");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, why_len, "cannot load the CUDA driver: %s", dlerror());
        return -1;
    }
    *(void **)&bcu.Init = dlsym(lib, "cuInit");
    *(void **)&bcu.DeviceGet = dlsym(lib, "cuDeviceGet");
    *(void **)&bcu.PrimaryCtxRetain = dlsym(lib, "cuDevicePrimaryCtxRetain");
    *(void **)&bcu.CtxPush = dlsym(lib, "cuCtxPushCurrent_v2");
    *(void **)&bcu.MemAlloc = dlsym(lib, "cuMemAlloc_v2");
    *(void **)&bcu.MemFree = dlsym(lib, "cuMemFree_v2");
    *(void **)&bcu.Memcpy = dlsym(lib, "cuMemcpy");
    if (!bcu.Init || !bcu.DeviceGet || !bcu.PrimaryCtxRetain || !bcu.CtxPush || !bcu.MemAlloc ||
        !bcu.MemFree || !bcu.Memcpy) {
        snprintf(why, why_len, "the CUDA driver lacks an entry point the bench needs");
        return -1;
    }
    const char *ds = getenv("LITETX_BENCH_DEVICE");
    int ord = ds ? atoi(ds) : 0, dev = 0, rc;
    void *ctx = NULL;
    if ((rc = bcu.Init(0)) || (rc = bcu.DeviceGet(&dev, ord)) ||
        (rc = bcu.PrimaryCtxRetain(&ctx, dev)) || (rc = bcu.CtxPush(ctx))) {
        snprintf(why, why_len, "no usable CUDA device %d (CUDA error %d)", ord, rc);
        return -1;
    }
    return 0;
}

static void *bcuda_alloc(size_t n)
{
    uint64_t p = 0;
    return bcu.MemAlloc(&p, n ? n : 1) ? NULL : (void *)(uintptr_t)p;
}

static void bcuda_free(void *p)
{
    if (p)
        bcu.MemFree((uint64_t)(uintptr_t)p);
}

/* Synchronous copy between any two of host and device memory (unified addressing). */
static int bcuda_copy(void *dst, const void *src, size_t n)
{
    return n ? bcu.Memcpy((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, n) : 0;
}

#endif /* LITE_BENCH_CUDA_H */
