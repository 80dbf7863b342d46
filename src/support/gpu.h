/*
 * gpu.h - the library's one CUDA loader. Not installed.
 *
 * Every use of CUDA in liblitetx (the core's staging of device buffers, the reduction kernels,
 * the backends' device-memory registration, the NCCL backend's stream) goes through this file.
 * Nothing here needs CUDA at build time: gpu.c declares the few driver-API types and constants
 * it uses itself, and loads the CUDA driver (libcuda.so.1; LITETX_CUDA_DRIVER=path overrides
 * the name, for tests) with dlopen on first use, once per process (pthread_once). A process
 * without a driver or without a device gets a clear error from the calls below and keeps
 * working for host memory. The driver API is used rather than the runtime because the driver
 * is one library per machine, while the runtime is one per CUDA major version (an application
 * built against another libcudart must not get a second runtime loaded under it).
 *
 * Contexts: every call that touches a device makes that device's primary context current for
 * the duration of the call (push/pop), the context the CUDA runtime uses, so pointers from
 * cudaMalloc, streams from cudaStreamCreate and our own objects all live in the same context.
 * The caller's current context is left as it was.
 *
 * Errors: 0 or a negative errno. -ENOSYS: no driver (or a driver without a needed entry
 * point); -ENODEV: driver present but no usable device (cuInit failed, no device, device
 * ordinal out of range); -ENOMEM: out of device or pinned memory; -EINVAL: bad argument or a
 * pointer the driver does not know; -EIO: any other CUDA error. Every CUDA failure is logged
 * once at the call with the driver's error name (LITE_ERROR), so the caller need not log again.
 *
 * Threads: every function is safe to call from any thread.
 *
 * For the NCCL backend: a lite_gpu_stream's CUstream (lite_gpu_stream_raw) is a valid
 * cudaStream_t for ncclSend/ncclRecv; poll it with lite_gpu_stream_query (0 done, -EAGAIN not
 * yet) against the op deadline; lite_gpu_reduce/lite_gpu_scale_avg enqueue the deterministic
 * reduction on it.
 */
#ifndef LITE_GPU_H
#define LITE_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- availability ---- */

/* 0 when the driver loaded, cuInit succeeded and at least one device is visible; otherwise
 * -ENOSYS or -ENODEV with the reason in why (NUL-terminated; why may be NULL). Cheap after the
 * first call. */
int lite_gpu_available(char *why, size_t why_len);
/* Number of visible devices, 0 when lite_gpu_available fails. */
int lite_gpu_device_count(void);
/* 1 when the reduction kernels are embedded in this build (LITE_WITH_CUDA), else 0. */
int lite_gpu_have_kernels(void);

/* ---- pointers ---- */

/* The memory kind of p: LITE_MEM_CUDA for device memory (cuMemAlloc/cudaMalloc, also pointers
 * into such an allocation), with its device ordinal in *device (may be NULL); LITE_MEM_HOST for
 * anything else, including pinned host memory, managed memory (the CPU may touch it) and every
 * pointer of a process without a driver. Never fails. */
int lite_gpu_ptr_kind(const void *p, int *device);
static inline bool lite_gpu_ptr_is_device(const void *p, int *device)
{
    return lite_gpu_ptr_kind(p, device) == 1; /* LITE_MEM_CUDA */
}

/* ---- streams and events ---- */

struct lite_gpu_stream; /* a non-blocking stream of one device's primary context */
struct lite_gpu_event;  /* an event without timing, of one device */

int lite_gpu_stream_create(int device, struct lite_gpu_stream **out);
void lite_gpu_stream_destroy(struct lite_gpu_stream *s); /* NULL is a no-op; waits for it */
int lite_gpu_stream_device(const struct lite_gpu_stream *s);
/* The CUstream (== cudaStream_t) for libraries that take one (NCCL). */
void *lite_gpu_stream_raw(const struct lite_gpu_stream *s);
/* 0 when all work enqueued on s has finished, -EAGAIN while some is pending, <0 on error. */
int lite_gpu_stream_query(struct lite_gpu_stream *s);
/* Blocks until s is idle. Prefer polling stream_query against a deadline on paths that must
 * not hang. */
int lite_gpu_stream_sync(struct lite_gpu_stream *s);
/* Orders everything enqueued on the caller's stream `user` (a CUstream/cudaStream_t, NULL = the
 * legacy default stream) so far before anything enqueued on s from now on. Does not block. */
int lite_gpu_stream_wait_user(struct lite_gpu_stream *s, void *user);

int lite_gpu_event_create(int device, struct lite_gpu_event **out);
void lite_gpu_event_destroy(struct lite_gpu_event *e); /* NULL is a no-op */
int lite_gpu_event_record(struct lite_gpu_event *e, struct lite_gpu_stream *s);
/* 0 when the work before the last record has finished, -EAGAIN while pending, <0 on error. */
int lite_gpu_event_query(struct lite_gpu_event *e);
int lite_gpu_event_sync(struct lite_gpu_event *e);

/* ---- copies ---- */

/* Copy n bytes between any two of host, pinned host and device memory (unified addressing:
 * the driver infers the direction from the pointers). Async: enqueued on s, and the source
 * must stay valid and the destination untouched until s reaches it; from pageable host memory
 * the driver may copy synchronously. */
int lite_gpu_copy_async(void *dst, const void *src, size_t n, struct lite_gpu_stream *s);
/* Synchronous copy (ordered after all earlier work of the legacy default stream, as cuMemcpy
 * is). For tests, setup and cold paths. */
int lite_gpu_copy(void *dst, const void *src, size_t n);
/* Sets n bytes of device memory to byte v, synchronously (tests). */
int lite_gpu_memset(void *dst, int v, size_t n);

/* ---- memory ---- */

/* Page-locked host memory, usable by every context (PORTABLE), for bounce buffers. */
int lite_gpu_host_alloc(size_t n, void **out);
void lite_gpu_host_free(void *p); /* NULL is a no-op */
/* Page-lock existing host memory [p, p + n) (PORTABLE); -EEXIST if it already is. */
int lite_gpu_host_register(void *p, size_t n);
void lite_gpu_host_unregister(void *p);
/* Device memory on `device` (tests, benchmarks). */
int lite_gpu_mem_alloc(int device, size_t n, void **out);
void lite_gpu_mem_free(void *p); /* NULL is a no-op */
/* A dmabuf file descriptor for the page-aligned range around [addr, addr + len) of device
 * memory, and addr's offset in it (for ibv_reg_dmabuf_mr); the caller closes *fd. */
int lite_gpu_dmabuf(const void *addr, size_t len, int *fd, uint64_t *offset);

/* ---- reduction kernels (src/cuda/reduce.cu) ---- */

/* Enqueue acc[i] = acc[i] OP in[i] on s, bit-identical to lite_reduce_inplace (reduce.h) for
 * every dtype and op: one left-fold step. acc and in are device memory of s's device (in may
 * also be pinned host memory mapped into the device's address space). -ENOSYS when the build
 * has no kernels, -EINVAL for an invalid (dtype, op). */
int lite_gpu_reduce(void *acc, const void *in, size_t count, int dtype, int op,
                    struct lite_gpu_stream *s);
/* Enqueue the AVG division step on s, bit-identical to lite_reduce_scale_avg. */
int lite_gpu_scale_avg(void *acc, size_t count, int dtype, int nranks, struct lite_gpu_stream *s);

#endif /* LITE_GPU_H */
