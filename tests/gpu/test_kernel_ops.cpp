/*
 * test_kernel_ops.cpp - the element logic of the CUDA kernels (src/cuda/reduce_ops.cuh, built
 * here as plain C++) against the CPU reference of reduce.c (the SCALAR implementation), on any
 * machine: every f16 and bf16 value against 31 others for every op, and a million random pairs
 * of every wider dtype (NaNs of all payloads, infinities, signed zeros, subnormals included), and
 * AVG's division for 1..9 ranks. The GPU run (gpu.kernels) then checks that the device computes
 * what this logic says.
 */
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "../../src/cuda/reduce_ops.cuh"

extern "C" {
#include "reduce.h"
}

using namespace lite_red;

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next()
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static long failures;

template <typename D, int OP> static typename D::T step(typename D::T a, typename D::T b)
{
    return D::template op<OP>(a, b);
}

/* The kernel's step on (a, b) against lite_reduce_inplace_impl(SCALAR) on one element. */
template <typename D> static void pair(int dtype, typename D::T a, typename D::T b)
{
    typedef typename D::T T;
    for (int op = 0; op < 4; op++) {
        T got;
        switch (op) {
        case 0:
            got = step<D, OP_SUM>(a, b);
            break;
        case 1:
            got = step<D, OP_PROD>(a, b);
            break;
        case 2:
            got = step<D, OP_MIN>(a, b);
            break;
        default:
            got = step<D, OP_MAX>(a, b);
            break;
        }
        T want = a;
        lite_reduce_inplace_impl(LITE_REDUCE_IMPL_SCALAR, &want, &b, 1, dtype, op);
        if (std::memcmp(&got, &want, sizeof(T)) != 0 && failures++ < 10) {
            uint64_t x = 0, y = 0, g = 0, w = 0;
            std::memcpy(&x, &a, sizeof(T));
            std::memcpy(&y, &b, sizeof(T));
            std::memcpy(&g, &got, sizeof(T));
            std::memcpy(&w, &want, sizeof(T));
            std::fprintf(stderr, "dtype %d op %d: %#llx, %#llx: kernel %#llx, reduce.c %#llx\n",
                         dtype, op, (unsigned long long)x, (unsigned long long)y,
                         (unsigned long long)g, (unsigned long long)w);
        }
    }
}

template <typename D> static void random_pairs(int dtype, long n)
{
    typedef typename D::T T;
    for (long i = 0; i < n; i++) {
        uint64_t r1 = next(), r2 = next();
        T a, b;
        std::memcpy(&a, &r1, sizeof(T));
        std::memcpy(&b, &r2, sizeof(T));
        if ((r1 >> 62) == 0) /* sometimes equal magnitudes, for MIN/MAX's equal branch */
            b = a;
        pair<D>(dtype, a, b);
    }
}

static void avg16(int dtype, uint16_t v, int nranks)
{
    float d = (float)nranks;
    uint16_t got = dtype == LITE_F16 ? f32_to_f16(div_f32(f16_to_f32(v), d))
                                     : f32_to_bf16(div_f32(bf16_to_f32(v), d));
    uint16_t want = v;
    lite_reduce_scale_avg_impl(LITE_REDUCE_IMPL_SCALAR, &want, 1, dtype, nranks);
    if (got != want && failures++ < 10)
        std::fprintf(stderr, "avg dtype %d %#x / %d: kernel %#x, reduce.c %#x\n", dtype, v, nranks,
                     got, want);
}

int main()
{
    /* 16-bit floats: every value against 97 spread-out others (and itself) */
    for (uint32_t a = 0; a < 65536; a++) {
        for (uint32_t k = 0; k < 31; k++) {
            uint16_t b = (uint16_t)(a * 40503u + k * 677u + (k << 11));
            pair<F16>(LITE_F16, (uint16_t)a, b);
            pair<BF16>(LITE_BF16, (uint16_t)a, b);
        }
        pair<F16>(LITE_F16, (uint16_t)a, (uint16_t)a);
        pair<BF16>(LITE_BF16, (uint16_t)a, (uint16_t)(a ^ 0x8000u));
        for (int n = 1; n <= 9; n++) {
            avg16(LITE_F16, (uint16_t)a, n);
            avg16(LITE_BF16, (uint16_t)a, n);
        }
    }
    const long n = 1000000;
    random_pairs<F32>(LITE_F32, n);
    random_pairs<F64>(LITE_F64, n);
    random_pairs<I8>(LITE_I8, n);
    random_pairs<U8>(LITE_U8, n);
    random_pairs<I32>(LITE_I32, n);
    random_pairs<U32>(LITE_U32, n);
    random_pairs<I64>(LITE_I64, n);
    random_pairs<U64>(LITE_U64, n);
    /* f32 values near each other, so sums round and subnormals appear */
    for (long i = 0; i < n; i++) {
        uint32_t x = (uint32_t)next(), y = x ^ ((uint32_t)next() & 0x807FFFFFu);
        float a, b;
        std::memcpy(&a, &x, 4);
        std::memcpy(&b, &y, 4);
        pair<F32>(LITE_F32, a, b);
        float da = a, want = a;
        for (int r = 1; r <= 9; r++) {
            da = div_f32(a, (float)r);
            want = a;
            lite_reduce_scale_avg_impl(LITE_REDUCE_IMPL_SCALAR, &want, 1, LITE_F32, r);
            if (std::memcmp(&da, &want, 4) != 0 && failures++ < 10)
                std::fprintf(stderr, "avg f32 %#x / %d differs\n", x, r);
        }
        double dd = (double)a, dw = dd;
        dd = div_f64(dd, 3.0);
        lite_reduce_scale_avg_impl(LITE_REDUCE_IMPL_SCALAR, &dw, 1, LITE_F64, 3);
        if (std::memcmp(&dd, &dw, 8) != 0 && failures++ < 10)
            std::fprintf(stderr, "avg f64 differs\n");
    }
    std::printf("kernel element logic vs reduce.c: %ld mismatches\n", failures);
    return failures ? 1 : 0;
}
