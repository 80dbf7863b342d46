/*
 * gpu_bench.c - the reduction kernel's throughput against the device's copy bandwidth: a
 * 64 MiB cuMemcpyAsync device-to-device and lite_gpu_reduce (f32 and bf16 SUM) on 64 MiB
 * buffers, interleaved, medians of 21 runs each. Bandwidth counts the bytes each moves: the
 * copy reads and writes 64 MiB, the reduction reads two buffers and writes one (192 MiB).
 * Exits 77 without a CUDA device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu.h"
#include "lite_int.h"

#define RUNS 21

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_) {                                                                                 \
            fprintf(stderr, "%s failed: %d\n", #call, rc_);                                        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    char why[256];
    if (lite_gpu_available(why, sizeof(why)) != 0) {
        printf("SKIPPED: %s\n", why);
        return 77;
    }
    if (!lite_gpu_have_kernels()) {
        printf("SKIPPED: built without the CUDA kernels\n");
        return 77;
    }
    const size_t bytes = 64u << 20;
    struct lite_gpu_stream *s;
    void *a, *b, *c;
    OK(lite_gpu_stream_create(0, &s));
    OK(lite_gpu_mem_alloc(0, bytes, &a));
    OK(lite_gpu_mem_alloc(0, bytes, &b));
    OK(lite_gpu_mem_alloc(0, bytes, &c));
    OK(lite_gpu_memset(a, 0x3c, bytes)); /* finite f32 and bf16 values */
    OK(lite_gpu_memset(b, 0x3b, bytes));
    double tc[RUNS], tf[RUNS], tb[RUNS];
    for (int i = -2; i < RUNS; i++) { /* two warm-up rounds */
        double t0 = now_s();
        OK(lite_gpu_copy_async(c, a, bytes, s));
        OK(lite_gpu_stream_sync(s));
        double t1 = now_s();
        OK(lite_gpu_reduce(a, b, bytes / 4, LITE_F32, LITE_SUM, s));
        OK(lite_gpu_stream_sync(s));
        double t2 = now_s();
        OK(lite_gpu_reduce(a, b, bytes / 2, LITE_BF16, LITE_SUM, s));
        OK(lite_gpu_stream_sync(s));
        double t3 = now_s();
        if (i >= 0) {
            tc[i] = t1 - t0;
            tf[i] = t2 - t1;
            tb[i] = t3 - t2;
        }
    }
    qsort(tc, RUNS, sizeof(double), cmp_d);
    qsort(tf, RUNS, sizeof(double), cmp_d);
    qsort(tb, RUNS, sizeof(double), cmp_d);
    double copy_bw = 2.0 * (double)bytes / tc[RUNS / 2] / 1e9;
    double f32_bw = 3.0 * (double)bytes / tf[RUNS / 2] / 1e9;
    double bf16_bw = 3.0 * (double)bytes / tb[RUNS / 2] / 1e9;
    printf("bench kernel 64 MiB, medians of %d: D2D copy %.3f ms = %.0f GB/s; f32 sum %.3f ms = "
           "%.0f GB/s (%.0f%% of copy); bf16 sum %.3f ms = %.0f GB/s (%.0f%% of copy)\n",
           RUNS, tc[RUNS / 2] * 1e3, copy_bw, tf[RUNS / 2] * 1e3, f32_bw, 100.0 * f32_bw / copy_bw,
           tb[RUNS / 2] * 1e3, bf16_bw, 100.0 * bf16_bw / copy_bw);
    lite_gpu_mem_free(a);
    lite_gpu_mem_free(b);
    lite_gpu_mem_free(c);
    lite_gpu_stream_destroy(s);
    return 0;
}
