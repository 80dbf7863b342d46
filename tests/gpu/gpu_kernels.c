/*
 * gpu_kernels.c - the CUDA reduction kernels bit for bit against the CPU reference
 * (lite_reduce_inplace / lite_reduce_scale_avg) for every dtype and op, sizes from 1 to 2^26
 * elements, aligned and unaligned (not 16-byte) device pointers, a four-rank left fold, and
 * inputs full of NaNs, infinities, signed zeros and subnormals. Exits 77 without a CUDA device.
 *
 *   gpu_kernels            the full check
 *   gpu_kernels quick      sizes up to 2^16 only
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu.h"
#include "lite_int.h"
#include "reduce.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char *const dt_names[] = {"f32", "f64", "f16", "bf16", "i8",
                                       "u8",  "i32", "u32", "i64",  "u64"};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

/* Inputs that reach every branch: random bits (NaNs of every payload, subnormals, infinities)
 * mixed with ordinary values of small exponent so sums and products stay finite and round. */
static void fill(void *buf, size_t n, int dtype)
{
    unsigned char *p = buf;
    size_t es = lite_dtype_size(dtype);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next();
        unsigned kind = (unsigned)(r >> 60);
        if (dtype == LITE_F32 && kind >= 4) {
            float f = (float)((int32_t)(r & 0xFFFFFF) - 0x800000) / (float)(1u << (r >> 56 & 15));
            memcpy(p + i * 4, &f, 4);
        } else if (dtype == LITE_F64 && kind >= 4) {
            double d = (double)((int64_t)(r & 0xFFFFFFFFFFFull) - 0x80000000000ll) /
                       (double)(1ull << (r >> 54 & 31));
            memcpy(p + i * 8, &d, 8);
        } else if ((dtype == LITE_F16 || dtype == LITE_BF16) && kind >= 8) {
            float f = (float)((int32_t)(r & 0xFFF) - 0x800) / 64.0f;
            uint16_t h = dtype == LITE_F16 ? lite_f32_to_f16(f) : lite_f32_to_bf16(f);
            memcpy(p + i * 2, &h, 2);
        } else if (kind == 3 && (dtype <= LITE_BF16)) {
            /* zeros of both signs, to meet MIN/MAX's signed-zero rule */
            memset(p + i * es, 0, es);
            if (r & 1)
                p[i * es + es - 1] = 0x80;
        } else {
            memcpy(p + i * es, &r, es);
        }
    }
}

struct dev {
    struct lite_gpu_stream *s;
    void *a, *b; /* device buffers of cap bytes (+64 for the unaligned runs) */
    size_t cap;
};

static void gpu_ok(int rc, const char *what)
{
    CHECK(rc == 0, "%s: %d (%s)", what, rc, strerror(-rc));
}

/* One step on the GPU and on the CPU from the same inputs; the bytes must be equal. */
static void one(struct dev *d, int dtype, int op, size_t n, size_t skew, unsigned char *ha,
                unsigned char *hb, unsigned char *out)
{
    size_t es = lite_dtype_size(dtype), bytes = n * es;
    fill(ha, n, dtype);
    fill(hb, n, dtype);
    unsigned char *da = (unsigned char *)d->a + skew * es, *db = (unsigned char *)d->b + skew * es;
    gpu_ok(lite_gpu_copy(da, ha, bytes), "copy a");
    gpu_ok(lite_gpu_copy(db, hb, bytes), "copy b");
    if (op == LITE_AVG) {
        int nranks = 1 + (int)(next() % 7);
        gpu_ok(lite_gpu_scale_avg(da, n, dtype, nranks, d->s), "scale_avg");
        CHECK(lite_reduce_scale_avg(ha, n, dtype, nranks) == 0, "cpu scale_avg");
    } else {
        gpu_ok(lite_gpu_reduce(da, db, n, dtype, op, d->s), "reduce");
        lite_reduce_inplace(ha, hb, n, dtype, op);
    }
    gpu_ok(lite_gpu_stream_sync(d->s), "sync");
    gpu_ok(lite_gpu_copy(out, da, bytes), "copy back");
    if (memcmp(out, ha, bytes) != 0) {
        size_t i = 0;
        while (memcmp(out + i * es, ha + i * es, es) == 0)
            i++;
        uint64_t g = 0, c = 0;
        memcpy(&g, out + i * es, es);
        memcpy(&c, ha + i * es, es);
        fprintf(stderr, "MISMATCH %s %s n=%zu skew=%zu: element %zu gpu %#llx cpu %#llx\n",
                dt_names[dtype], op_names[op], n, skew, i, (unsigned long long)g,
                (unsigned long long)c);
        failures++;
    }
}

/* The canonical left fold of four ranks' inputs, as an allreduce computes it. */
static void fold4(struct dev *d, int dtype, int op, size_t n, unsigned char *h[5],
                  unsigned char *out)
{
    size_t es = lite_dtype_size(dtype), bytes = n * es;
    for (int r = 0; r < 4; r++)
        fill(h[r], n, dtype);
    memcpy(h[4], h[0], bytes);
    gpu_ok(lite_gpu_copy(d->a, h[0], bytes), "copy");
    for (int r = 1; r < 4; r++) {
        gpu_ok(lite_gpu_copy(d->b, h[r], bytes), "copy");
        gpu_ok(lite_gpu_reduce(d->a, d->b, n, dtype, op, d->s), "reduce");
        gpu_ok(lite_gpu_stream_sync(d->s), "sync");
        lite_reduce_inplace(h[4], h[r], n, dtype, op);
    }
    if (op == LITE_AVG) {
        gpu_ok(lite_gpu_scale_avg(d->a, n, dtype, 4, d->s), "avg");
        lite_reduce_scale_avg(h[4], n, dtype, 4);
        gpu_ok(lite_gpu_stream_sync(d->s), "sync");
    }
    gpu_ok(lite_gpu_copy(out, d->a, bytes), "copy back");
    if (memcmp(out, h[4], bytes) != 0) {
        fprintf(stderr, "MISMATCH fold4 %s %s n=%zu\n", dt_names[dtype], op_names[op], n);
        failures++;
    }
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    char why[256];
    if (lite_gpu_available(why, sizeof(why)) != 0) {
        printf("SKIPPED: %s\n", why);
        return 77;
    }
    if (!lite_gpu_have_kernels()) {
        printf("SKIPPED: liblitetx was built without its CUDA kernels (LITE_WITH_CUDA)\n");
        return 77;
    }
    const size_t big = (size_t)1 << 26;
    struct dev d = {.cap = big * 8 + 64};
    gpu_ok(lite_gpu_stream_create(0, &d.s), "stream");
    gpu_ok(lite_gpu_mem_alloc(0, d.cap, &d.a), "alloc a");
    gpu_ok(lite_gpu_mem_alloc(0, d.cap, &d.b), "alloc b");
    unsigned char *ha = malloc(d.cap), *hb = malloc(d.cap), *out = malloc(d.cap);
    CHECK(ha && hb && out, "host memory");

    /* every (dtype, op), sizes around the 16-byte vector and the grid, aligned and not */
    const size_t sizes[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 255, 256, 257, 4093, 65543};
    int steps = 0;
    for (int t = 0; t < LITE_DTYPE_COUNT; t++)
        for (int op = 0; op < LITE_REDOP_COUNT; op++) {
            if (lite_reduce_check(t, op))
                continue;
            for (size_t i = 0; i < LITE_ARRAY_LEN(sizes); i++) {
                one(&d, t, op, sizes[i], 0, ha, hb, out);
                one(&d, t, op, sizes[i], 1, ha, hb, out);
                steps += 2;
            }
            if (!quick) {
                one(&d, t, op, ((size_t)1 << 20) + 5, 0, ha, hb, out);
                steps++;
            }
        }
    /* 2^26 elements: the sums of the targets, the widest type, and an integer */
    if (!quick) {
        const int bigs[][2] = {{LITE_F32, LITE_SUM}, {LITE_BF16, LITE_SUM}, {LITE_F16, LITE_SUM},
                               {LITE_F64, LITE_MAX}, {LITE_I32, LITE_PROD}, {LITE_BF16, LITE_AVG}};
        for (size_t i = 0; i < LITE_ARRAY_LEN(bigs); i++) {
            one(&d, bigs[i][0], bigs[i][1], big, 0, ha, hb, out);
            steps++;
        }
    }
    /* the four-rank fold of allreduce, every float op */
    unsigned char *h[5];
    for (int r = 0; r < 5; r++)
        CHECK((h[r] = malloc(((size_t)1 << 16) * 8)), "host memory");
    for (int t = 0; t <= LITE_BF16; t++)
        for (int op = 0; op < LITE_REDOP_COUNT; op++) {
            fold4(&d, t, op, 65536 - 3, h, out);
            steps++;
        }
    /* bad arguments come back as errors, not launches */
    CHECK(lite_gpu_reduce(d.a, d.b, 4, LITE_I32, LITE_AVG, d.s) == -EINVAL, "AVG on an integer");
    CHECK(lite_gpu_reduce((char *)d.a + 1, d.b, 4, LITE_F32, LITE_SUM, d.s) == -EINVAL,
          "misaligned f32");
    CHECK(lite_gpu_reduce(d.a, d.b, 4, 99, LITE_SUM, d.s) == -EINVAL, "unknown dtype");

    int kind_dev = -1;
    CHECK(lite_gpu_ptr_kind(d.a, &kind_dev) == LITE_MEM_CUDA && kind_dev == 0, "device pointer");
    CHECK(lite_gpu_ptr_kind((char *)d.a + 12345, NULL) == LITE_MEM_CUDA, "interior pointer");
    CHECK(lite_gpu_ptr_kind(ha, NULL) == LITE_MEM_HOST, "host pointer");
    void *pinned = NULL;
    gpu_ok(lite_gpu_host_alloc(4096, &pinned), "pinned");
    CHECK(lite_gpu_ptr_kind(pinned, NULL) == LITE_MEM_HOST, "pinned host is host");
    lite_gpu_host_free(pinned);

    for (int r = 0; r < 5; r++)
        free(h[r]);
    lite_gpu_mem_free(d.a);
    lite_gpu_mem_free(d.b);
    lite_gpu_stream_destroy(d.s);
    free(ha);
    free(hb);
    free(out);
    printf("gpu kernels: %d steps compared, %d mismatches\n", steps, failures);
    return failures ? 1 : 0;
}
