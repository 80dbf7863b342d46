/*
 * test_reduce.c - the reduction kernels (src/core/reduce.c) against references written here.
 *
 * Every implementation that can run on this CPU (scalar, portable vector, AVX2/F16C) is checked
 * bit for bit against the test's own reference, which shares no code with the library: 16-bit
 * floats are decoded and rounded with ldexp/ilogb/nearbyint in double precision, NaN/±0 rules are
 * spelled out case by case, integers are computed in 64 bits and truncated.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define TEST_HAVE_F16C_REF 1
#else
#define TEST_HAVE_F16C_REF 0
#endif

static const int k_ops[] = {LITE_SUM, LITE_PROD, LITE_MIN, LITE_MAX};
static const char *const k_op_names[] = {"sum", "prod", "min", "max", "avg"};
static const char *const k_dtype_names[] = {"f32", "f64", "f16", "bf16", "i8",
                                            "u8",  "i32", "u32", "i64",  "u64"};
#define NOPS 4

/* ---------------------------------------------------------------------------------------------
 * helpers
 * ------------------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t dbits(double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    return u;
}

static double bitsd(uint64_t u)
{
    double f;
    memcpy(&f, &u, 8);
    return f;
}

/* The implementations that can run here. */
static int impls[LITE_REDUCE_IMPL_COUNT];
static int nimpls;

static int setup_impls(void **state)
{
    (void)state;
    nimpls = 0;
    for (int i = LITE_REDUCE_IMPL_SCALAR; i < LITE_REDUCE_IMPL_COUNT; i++) {
        if (lite_reduce_impl_available(i))
            impls[nimpls++] = i;
        else
            printf("# reduce impl %s not available on this machine: not tested\n",
                   lite_reduce_impl_name(i));
    }
    printf("# reduce impl auto = %s\n", lite_reduce_impl_name(lite_reduce_impl_auto()));
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Independent 16-bit float reference: decode to double, round RNE to the format, encode.
 * mbits = 10, bias = 15 for f16; mbits = 7, bias = 127 for bf16.
 * ------------------------------------------------------------------------------------------- */

#define F16_M  10
#define F16_B  15
#define BF16_M 7
#define BF16_B 127

static double dec16(uint16_t h, int mbits, int bias)
{
    int ebits = 15 - mbits;
    unsigned emask = (1u << ebits) - 1u;
    unsigned e = (h >> mbits) & emask, m = h & ((1u << mbits) - 1u);
    double s = (h & 0x8000u) ? -1.0 : 1.0;
    if (e == emask)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp((double)m, 1 - bias - mbits);
    return s * ldexp((double)(m + (1u << mbits)), (int)e - bias - mbits);
}

/* Round v (finite double) to the format, RNE, overflow to Inf, keeps the sign of zero. */
static double round16(double v, int mbits, int bias)
{
    if (isnan(v) || isinf(v) || v == 0)
        return v;
    double a = fabs(v);
    int e = ilogb(a);
    if (e < 1 - bias)
        e = 1 - bias;
    double ulp = ldexp(1.0, e - mbits);
    double r = nearbyint(a / ulp) * ulp;
    if (r >= ldexp(1.0, bias + 1))
        r = INFINITY;
    return copysign(r, v);
}

/* Encode a value exactly representable in the format (or +-Inf). */
static uint16_t enc16(double v, int mbits, int bias)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0u;
    double a = fabs(v);
    unsigned emax_field = (1u << (15 - mbits)) - 1u;
    if (isinf(a))
        return (uint16_t)(sign | (emax_field << mbits));
    if (a == 0)
        return sign;
    int e = ilogb(a);
    if (e < 1 - bias)
        return (uint16_t)(sign | (unsigned)ldexp(a, bias - 1 + mbits));
    return (uint16_t)(sign | ((unsigned)(e + bias) << mbits) |
                      ((unsigned)ldexp(a, mbits - e) - (1u << mbits)));
}

/* ---------------------------------------------------------------------------------------------
 * Independent element reference for every dtype and op
 * ------------------------------------------------------------------------------------------- */

#define CANON_F32  0x7FC00000u
#define CANON_F64  0x7FF8000000000000ull
#define CANON_F16  0x7E00u
#define CANON_BF16 0x7FC0u

/* MIN/MAX/SUM/PROD on two floats with the documented rules; returns the value (NaN = any NaN,
 * the caller canonicalises). */
static double ref_fop(double x, double y, int op, int is_f32)
{
    if (isnan(x) || isnan(y))
        return NAN;
    if (op == LITE_MIN || op == LITE_MAX) {
        if (x == 0 && y == 0) { /* +-0 vs +-0: min is -0 if either is, max is +0 if either is */
            int neg = (op == LITE_MIN) ? (signbit(x) || signbit(y)) : (signbit(x) && signbit(y));
            return neg ? -0.0 : 0.0;
        }
        if (op == LITE_MIN)
            return x < y ? x : y;
        return x > y ? x : y;
    }
    if (is_f32) { /* one f32 operation, rounded in f32 */
        float fx = (float)x, fy = (float)y;
        volatile float r = (op == LITE_SUM) ? fx + fy : fx * fy;
        return r;
    }
    volatile double r = (op == LITE_SUM) ? x + y : x * y;
    return r;
}

static uint32_t ref_f32(uint32_t a, uint32_t b, int op)
{
    double r = ref_fop(bitsf(a), bitsf(b), op, 1);
    return isnan(r) ? CANON_F32 : fbits((float)r);
}

static uint64_t ref_f64(uint64_t a, uint64_t b, int op)
{
    double r = ref_fop(bitsd(a), bitsd(b), op, 0);
    return isnan(r) ? CANON_F64 : dbits(r);
}

/* f16/bf16: exact decode, one f32 operation, one RNE rounding to the format. */
static uint16_t ref_h(uint16_t a, uint16_t b, int op, int mbits, int bias)
{
    double r = ref_fop(dec16(a, mbits, bias), dec16(b, mbits, bias), op, 1);
    if (isnan(r))
        return mbits == F16_M ? CANON_F16 : CANON_BF16;
    return enc16(round16(r, mbits, bias), mbits, bias);
}

static uint64_t ref_int(uint64_t a, uint64_t b, int op, int bits, int is_signed)
{
    uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1u);
    switch (op) {
    case LITE_SUM:
        return (a + b) & mask;
    case LITE_PROD:
        return (a * b) & mask;
    default: {
        int a_lt_b;
        if (is_signed) {
            uint64_t sb = 1ull << (bits - 1);
            int64_t sa = (int64_t)((a & mask) ^ sb) - (int64_t)(sb - 1) - 1; /* sign-extend */
            int64_t sbv = (int64_t)((b & mask) ^ sb) - (int64_t)(sb - 1) - 1;
            a_lt_b = sa < sbv;
        } else {
            a_lt_b = (a & mask) < (b & mask);
        }
        if (op == LITE_MIN)
            return a_lt_b ? a : b;
        return a_lt_b ? b : a;
    }
    }
}

static void ref_elem(int dtype, int op, const void *pa, const void *pb, void *out)
{
    size_t es = lite_dtype_size(dtype);
    uint64_t a = 0, b = 0, r = 0;
    memcpy(&a, pa, es); /* little-endian: low bytes */
    memcpy(&b, pb, es);
    switch (dtype) {
    case LITE_F32:
        r = ref_f32((uint32_t)a, (uint32_t)b, op);
        break;
    case LITE_F64:
        r = ref_f64(a, b, op);
        break;
    case LITE_F16:
        r = ref_h((uint16_t)a, (uint16_t)b, op, F16_M, F16_B);
        break;
    case LITE_BF16:
        r = ref_h((uint16_t)a, (uint16_t)b, op, BF16_M, BF16_B);
        break;
    case LITE_I8:
        r = ref_int(a, b, op, 8, 1);
        break;
    case LITE_U8:
        r = ref_int(a, b, op, 8, 0);
        break;
    case LITE_I32:
        r = ref_int(a, b, op, 32, 1);
        break;
    case LITE_U32:
        r = ref_int(a, b, op, 32, 0);
        break;
    case LITE_I64:
        r = ref_int(a, b, op, 64, 1);
        break;
    case LITE_U64:
        r = ref_int(a, b, op, 64, 0);
        break;
    }
    memcpy(out, &r, es);
}

/* ---------------------------------------------------------------------------------------------
 * Array comparison
 * ------------------------------------------------------------------------------------------- */

static uint64_t load_elem(const unsigned char *p, size_t i, size_t es)
{
    uint64_t v = 0;
    memcpy(&v, p + i * es, es);
    return v;
}

/* Fail with the first differing element. */
static void expect_same(const char *what, int impl, int dtype, int op, const void *a0,
                        const void *b, const void *got, const void *want, size_t n)
{
    size_t es = lite_dtype_size(dtype);
    if (n == 0 || memcmp(got, want, n * es) == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (memcmp((const unsigned char *)got + i * es, (const unsigned char *)want + i * es, es) !=
            0) {
            fail_msg("%s: impl %s dtype %s op %s n %zu: element %zu: 0x%llx op 0x%llx = 0x%llx, "
                     "expected 0x%llx",
                     what, lite_reduce_impl_name(impl), k_dtype_names[dtype], k_op_names[op], n, i,
                     (unsigned long long)(a0 ? load_elem(a0, i, es) : 0),
                     (unsigned long long)(b ? load_elem(b, i, es) : 0),
                     (unsigned long long)load_elem(got, i, es),
                     (unsigned long long)load_elem(want, i, es));
        }
    }
}

/* Run every available impl on (a0 op b) at the given byte offsets and compare with want. */
static void check_all_impls(const char *what, int dtype, int op, const void *a0, const void *b,
                            const void *want, size_t n, size_t off_a, size_t off_b)
{
    size_t es = lite_dtype_size(dtype), bytes = n * es;
    const size_t guard = 64;
    unsigned char *wa = malloc(bytes + off_a + 2 * guard);
    unsigned char *wb = malloc(bytes + off_b + 2 * guard);
    assert_non_null(wa);
    assert_non_null(wb);
    for (int k = 0; k < nimpls; k++) {
        memset(wa, 0xA5, bytes + off_a + 2 * guard);
        memset(wb, 0x5A, bytes + off_b + 2 * guard);
        unsigned char *pa = wa + guard + off_a, *pb = wb + guard + off_b;
        if (bytes) {
            memcpy(pa, a0, bytes);
            memcpy(pb, b, bytes);
        }
        lite_reduce_inplace_impl(impls[k], pa, pb, n, dtype, op);
        expect_same(what, impls[k], dtype, op, a0, b, pa, want, n);
        /* nothing outside [0, n) written, and the input untouched */
        for (size_t i = 0; i < guard + off_a; i++)
            assert_int_equal(wa[i], 0xA5);
        for (size_t i = 0; i < guard; i++)
            assert_int_equal(pa[bytes + i], 0xA5);
        for (size_t i = 0; i < guard + off_b; i++)
            assert_int_equal(wb[i], 0x5A);
        for (size_t i = 0; i < guard; i++)
            assert_int_equal(pb[bytes + i], 0x5A);
        if (bytes)
            assert_memory_equal(pb, b, bytes);
    }
    free(wa);
    free(wb);
}

static void ref_array(int dtype, int op, const void *a, const void *b, void *out, size_t n)
{
    size_t es = lite_dtype_size(dtype);
    for (size_t i = 0; i < n; i++)
        ref_elem(dtype, op, (const unsigned char *)a + i * es, (const unsigned char *)b + i * es,
                 (unsigned char *)out + i * es);
}

/* Random element of a dtype, biased towards interesting values. */
static uint64_t rnd_elem(int dtype)
{
    uint64_t r = rnd();
    unsigned pick = (unsigned)(r >> 58); /* 0..63 */
    switch (dtype) {
    case LITE_F32: {
        static const uint32_t sp[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,
                                      0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x00000001u,
                                      0x807FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0x3F800000u};
        if (pick < 6)
            return sp[rnd() % (sizeof sp / sizeof sp[0])];
        if (pick < 30)
            return (uint32_t)rnd(); /* any bit pattern */
        /* moderate magnitudes so sums and products are mostly finite and do round */
        return fbits((float)ldexp((double)(int32_t)(uint32_t)rnd(), (int)(rnd() % 40) - 50));
    }
    case LITE_F64: {
        static const uint64_t sp[] = {0,
                                      0x8000000000000000ull,
                                      0x7FF0000000000000ull,
                                      0xFFF0000000000000ull,
                                      0x7FF8000000000000ull,
                                      0xFFF8000000000001ull,
                                      0x7FF0000000000001ull,
                                      1,
                                      0x7FEFFFFFFFFFFFFFull,
                                      0x3FF0000000000000ull};
        if (pick < 6)
            return sp[rnd() % (sizeof sp / sizeof sp[0])];
        if (pick < 30)
            return rnd();
        return dbits(ldexp((double)(int64_t)rnd(), (int)(rnd() % 200) - 160));
    }
    case LITE_F16:
    case LITE_BF16: {
        if (pick < 4) {
            static const uint16_t sp[] = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7F80,
                                          0xFF80, 0x7FC0, 0x0001, 0x8001, 0x7FFF, 0xFFFF};
            return sp[rnd() % (sizeof sp / sizeof sp[0])];
        }
        return (uint16_t)rnd();
    }
    default:
        if (pick < 8) { /* extremes, to hit wrap-around */
            static const uint64_t sp[] = {0,
                                          1,
                                          ~0ull,
                                          0x7F,
                                          0x80,
                                          0xFF,
                                          0x7FFFFFFF,
                                          0x80000000u,
                                          0x7FFFFFFFFFFFFFFFull,
                                          0x8000000000000000ull};
            return sp[rnd() % (sizeof sp / sizeof sp[0])];
        }
        return rnd();
    }
}

static void fill_random(int dtype, void *p, size_t n)
{
    size_t es = lite_dtype_size(dtype);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = rnd_elem(dtype);
        memcpy((unsigned char *)p + i * es, &v, es);
    }
}

/* ---------------------------------------------------------------------------------------------
 * dtype size, checks
 * ------------------------------------------------------------------------------------------- */

static void test_dtype_size(void **state)
{
    (void)state;
    assert_int_equal(lite_dtype_size(LITE_F32), 4);
    assert_int_equal(lite_dtype_size(LITE_F64), 8);
    assert_int_equal(lite_dtype_size(LITE_F16), 2);
    assert_int_equal(lite_dtype_size(LITE_BF16), 2);
    assert_int_equal(lite_dtype_size(LITE_I8), 1);
    assert_int_equal(lite_dtype_size(LITE_U8), 1);
    assert_int_equal(lite_dtype_size(LITE_I32), 4);
    assert_int_equal(lite_dtype_size(LITE_U32), 4);
    assert_int_equal(lite_dtype_size(LITE_I64), 8);
    assert_int_equal(lite_dtype_size(LITE_U64), 8);
    for (int d = -1000; d <= 1000; d++)
        if (d < 0 || d >= LITE_DTYPE_COUNT)
            assert_int_equal(lite_dtype_size(d), 0);
    assert_int_equal(lite_dtype_size(INT32_MIN), 0);
    assert_int_equal(lite_dtype_size(INT32_MAX), 0);
}

static void test_check(void **state)
{
    (void)state;
    for (int dt = 0; dt < LITE_DTYPE_COUNT; dt++) {
        int is_float = dt == LITE_F32 || dt == LITE_F64 || dt == LITE_F16 || dt == LITE_BF16;
        for (int k = 0; k < NOPS; k++)
            assert_int_equal(lite_reduce_check(dt, k_ops[k]), 0);
        assert_int_equal(lite_reduce_check(dt, LITE_AVG), is_float ? 0 : -EINVAL);
        assert_int_equal(lite_reduce_check(dt, LITE_REDOP_COUNT), -EINVAL);
        assert_int_equal(lite_reduce_check(dt, -1), -EINVAL);
    }
    for (int d = -100; d <= 100; d++)
        for (int op = -100; op <= 100; op++)
            if (d < 0 || d >= LITE_DTYPE_COUNT || op < 0 || op >= LITE_REDOP_COUNT)
                assert_int_equal(lite_reduce_check(d, op), -EINVAL);
}

/* An invalid (dtype, op) leaves the buffer untouched; count 0 touches nothing. */
static void test_invalid_noop(void **state)
{
    (void)state;
    uint32_t acc[4] = {1, 2, 3, 4}, in[4] = {10, 20, 30, 40};
    const uint32_t orig[4] = {1, 2, 3, 4};
    lite_reduce_inplace(acc, in, 4, LITE_I32, LITE_AVG);
    assert_memory_equal(acc, orig, sizeof acc);
    lite_reduce_inplace(acc, in, 4, LITE_DTYPE_COUNT, LITE_SUM);
    assert_memory_equal(acc, orig, sizeof acc);
    lite_reduce_inplace(acc, in, 4, LITE_I32, 99);
    assert_memory_equal(acc, orig, sizeof acc);
    lite_reduce_inplace(acc, in, 0, LITE_I32, LITE_SUM);
    assert_memory_equal(acc, orig, sizeof acc);
    lite_reduce_inplace(NULL, NULL, 0, LITE_F32, LITE_SUM); /* count 0: pointers not touched */
    /* and a valid call does change it (so the checks above can fail) */
    lite_reduce_inplace(acc, in, 4, LITE_I32, LITE_SUM);
    assert_int_equal(acc[0], 11);
    assert_int_equal(acc[3], 44);
}

/* ---------------------------------------------------------------------------------------------
 * Conversions
 * ------------------------------------------------------------------------------------------- */

#if TEST_HAVE_F16C_REF
static int have_f16c(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
}

__attribute__((target("f16c,avx"))) static float hw_h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

__attribute__((target("f16c,avx"))) static uint16_t hw_f2h(float f)
{
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#endif

static void test_f16_to_f32_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float got = lite_f16_to_f32((uint16_t)h);
        double want = dec16((uint16_t)h, F16_M, F16_B);
        uint32_t gb = fbits(got);
        if (isnan(want)) {
            /* NaN: sign and payload kept, quiet bit set */
            uint32_t wb = ((h & 0x8000u) << 16) | 0x7FC00000u | ((h & 0x3FFu) << 13);
            if (gb != wb)
                fail_msg("f16 0x%04x -> f32 0x%08x, expected NaN 0x%08x", h, gb, wb);
        } else if (gb != fbits((float)want)) {
            fail_msg("f16 0x%04x -> f32 0x%08x, expected 0x%08x", h, gb, fbits((float)want));
        }
        /* round trip: every f16 comes back from f32 unchanged (NaN: quieted) */
        uint16_t back = lite_f32_to_f16(got);
        uint16_t wback = (uint16_t)(isnan(want) ? (h | 0x200u) : h);
        if (back != wback)
            fail_msg("f16 0x%04x round trip gave 0x%04x, expected 0x%04x", h, back, wback);
    }
#if TEST_HAVE_F16C_REF
    if (have_f16c()) {
        for (uint32_t h = 0; h < 65536; h++) {
            uint32_t g = fbits(lite_f16_to_f32((uint16_t)h)), w = fbits(hw_h2f((uint16_t)h));
            if (g != w)
                fail_msg("f16 0x%04x -> 0x%08x but VCVTPH2PS gives 0x%08x", h, g, w);
        }
    }
#endif
}

static void check_f2h_one(uint32_t x)
{
    float f = bitsf(x);
    uint16_t got = lite_f32_to_f16(f);
    uint16_t want;
    if (isnan(f))
        want = (uint16_t)(((x >> 16) & 0x8000u) | 0x7E00u | ((x & 0x7FFFFFu) >> 13));
    else
        want = enc16(round16(f, F16_M, F16_B), F16_M, F16_B);
    if (got != want)
        fail_msg("f32 0x%08x -> f16 0x%04x, expected 0x%04x", x, got, want);
#if TEST_HAVE_F16C_REF
    static int hw = -1;
    if (hw < 0)
        hw = have_f16c();
    if (hw && got != hw_f2h(f))
        fail_msg("f32 0x%08x -> f16 0x%04x but VCVTPS2PH gives 0x%04x", x, got, hw_f2h(f));
#endif
}

static void test_f32_to_f16(void **state)
{
    (void)state;
    /* Every f16 value, the exact midpoints between neighbours (the ties) and the f32 values
     * one ulp either side of them, both signs: all rounding boundaries, subnormal, overflow. */
    for (uint32_t h = 0; h < 0x7C00u; h++) {
        for (uint32_t s = 0; s < 2; s++) {
            double lo = dec16((uint16_t)h, F16_M, F16_B);
            double hi = (h + 1 < 0x7C00u) ? dec16((uint16_t)(h + 1), F16_M, F16_B) : 65536.0;
            uint32_t mid = fbits((float)((lo + hi) / 2)), sg = s << 31;
            check_f2h_one(sg | fbits((float)lo));
            check_f2h_one(sg | mid);
            check_f2h_one(sg | (mid - 1));
            check_f2h_one(sg | (mid + 1));
        }
    }
    /* a stride over all 2^32 patterns (includes NaNs, f32 subnormals, huge values) */
    for (uint64_t x = 0; x < (1ull << 32); x += 1021)
        check_f2h_one((uint32_t)x);
    static const uint32_t sp[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFFFFFFFu,
                                  0x7F800001u, 0x7FBFFFFFu, 0x00000001u, 0x477FEFFFu,
                                  0x477FF000u, 0x477FF001u, 0x33000000u, 0x33000001u,
                                  0x337FFFFFu, 0x387FC000u, 0x387FE000u, 0x387FFFFFu};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        check_f2h_one(sp[i]);
        check_f2h_one(sp[i] ^ 0x80000000u);
    }
    /* a few by value */
    assert_int_equal(lite_f32_to_f16(65520.0f), 0x7C00);   /* tie at the top: to Inf */
    assert_int_equal(lite_f32_to_f16(65519.0f), 0x7BFF);   /* below: max finite */
    assert_int_equal(lite_f32_to_f16(0x1p-25f), 0x0000);   /* tie at zero: to even (0) */
    assert_int_equal(lite_f32_to_f16(0x1.8p-24f), 0x0002); /* 1.5 units: to even (2) */
    assert_int_equal(lite_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(lite_f32_to_f16(1.0f + 0x1p-11f), 0x3C00); /* tie: to even */
    assert_int_equal(lite_f32_to_f16(1.0f + 0x1.8p-10f), 0x3C02);
}

static void test_bf16_conversions(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t gb = fbits(lite_bf16_to_f32((uint16_t)h));
        double want = dec16((uint16_t)h, BF16_M, BF16_B);
        uint32_t wb = isnan(want) ? (h << 16) : fbits((float)want); /* NaN: the bits, shifted */
        if (gb != wb)
            fail_msg("bf16 0x%04x -> f32 0x%08x, expected 0x%08x", h, gb, wb);
        if (!isnan(want) && lite_f32_to_bf16(bitsf(gb)) != h)
            fail_msg("bf16 0x%04x round trip gave 0x%04x", h, lite_f32_to_bf16(bitsf(gb)));
    }
    /* f32 -> bf16: every tie and its neighbours, a stride over all patterns */
    for (uint64_t x = 0; x < (1ull << 32); x += 1021) {
        uint32_t cand[4] = {(uint32_t)x, ((uint32_t)x & 0xFFFF0000u) | 0x8000u,
                            ((uint32_t)x & 0xFFFF0000u) | 0x7FFFu,
                            ((uint32_t)x & 0xFFFF0000u) | 0x8001u};
        for (int c = 0; c < 4; c++) {
            float f = bitsf(cand[c]);
            uint16_t got = lite_f32_to_bf16(f), want;
            if (isnan(f))
                want = (uint16_t)((cand[c] >> 16) | 0x40u);
            else
                want = enc16(round16(f, BF16_M, BF16_B), BF16_M, BF16_B);
            if (got != want)
                fail_msg("f32 0x%08x -> bf16 0x%04x, expected 0x%04x", cand[c], got, want);
        }
    }
    assert_int_equal(lite_f32_to_bf16(bitsf(0x7F7FFFFFu)), 0x7F80); /* FLT_MAX: to Inf */
    assert_int_equal(lite_f32_to_bf16(bitsf(0x7F7F7FFFu)), 0x7F7F); /* just below the tie */
    assert_int_equal(lite_f32_to_bf16(bitsf(0x7FFFFFFFu)), 0x7FFF); /* NaN keeps sign, stays NaN */
    assert_int_equal(lite_f32_to_bf16(bitsf(0xFF800001u)), 0xFFC0); /* sNaN made quiet */
    assert_int_equal(lite_f32_to_bf16(bitsf(0x3F808000u)), 0x3F80); /* tie: to even */
    assert_int_equal(lite_f32_to_bf16(bitsf(0x3F818000u)), 0x3F82); /* tie: to even (up) */
    assert_int_equal(lite_f32_to_bf16(bitsf(0x00008000u)), 0x0000); /* subnormal tie */
    assert_int_equal(lite_f32_to_bf16(bitsf(0x80018000u)), 0x8002);
}

/* ---------------------------------------------------------------------------------------------
 * f16 / bf16 kernels: every 16-bit value against a few hundred others, both operand orders
 * ------------------------------------------------------------------------------------------- */

static void exhaustive16(int dtype)
{
    const int mb = dtype == LITE_F16 ? F16_M : BF16_M, bias = dtype == LITE_F16 ? F16_B : BF16_B;
    static const uint16_t sp_f16[] = {
        0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x7BFF, 0xFBFF,
        0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFD55, 0x7FFF, 0x3C00, 0xBC00, 0x3C01,
        0xBBFF, 0x3800, 0x4000, 0x0200, 0x3555, 0x7800, 0xF800, 0x6800, 0x1400, 0x0C00,
        0x1000, 0x2400, 0x5BFF, 0x7A00, 0x0401, 0x83FE, 0x3BFF, 0x3E00, 0xC500, 0x6400};
    static const uint16_t sp_bf16[] = {
        0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x807F, 0x0080, 0x8080, 0x7F7F, 0xFF7F,
        0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFA5, 0x7FFF, 0x3F80, 0xBF80, 0x3F81,
        0xBF7F, 0x3F00, 0x4000, 0x0040, 0x3EAB, 0x7F00, 0xFF00, 0x4300, 0x1F80, 0x2000,
        0x0100, 0x3C00, 0x5F7F, 0x7E80, 0x0081, 0x807E, 0x3F7F, 0x3FC0, 0xC0A0, 0x4B80};
    const uint16_t *sp = dtype == LITE_F16 ? sp_f16 : sp_bf16;
    const size_t nsp = 40, nrand = 160, n = 65536;

    uint16_t *all = malloc(n * 2), *other = malloc(n * 2), *want = malloc(n * 2),
             *work = malloc(n * 2);
    assert_non_null(all);
    assert_non_null(other);
    assert_non_null(want);
    assert_non_null(work);
    /* decode table for the reference */
    double *dec = malloc(n * sizeof *dec);
    assert_non_null(dec);
    for (size_t i = 0; i < n; i++)
        dec[i] = dec16((uint16_t)i, mb, bias);
    const uint16_t canon = dtype == LITE_F16 ? CANON_F16 : CANON_BF16;

    for (size_t t = 0; t < nsp + nrand; t++) {
        uint16_t b = t < nsp ? sp[t] : (uint16_t)rnd();
        /* every value, shifted by one element every other round so each value also takes the
         * other position in the vector code's pairs of 16-bit lanes */
        for (size_t i = 0; i < n; i++) {
            all[i] = (uint16_t)(i + (t & 1));
            other[i] = b;
        }
        for (int k = 0; k < NOPS; k++) {
            int op = k_ops[k];
            for (size_t i = 0; i < n; i++) {
                double r = ref_fop(dec[all[i]], dec[b], op, 1);
                want[i] = isnan(r) ? canon : enc16(round16(r, mb, bias), mb, bias);
            }
            for (int m = 0; m < nimpls; m++) {
                /* all op b */
                memcpy(work, all, n * 2);
                lite_reduce_inplace_impl(impls[m], work, other, n, dtype, op);
                expect_same("exhaustive a op b", impls[m], dtype, op, all, other, work, want, n);
                /* b op all: the rules make every op commutative, bit for bit */
                memcpy(work, other, n * 2);
                lite_reduce_inplace_impl(impls[m], work, all, n, dtype, op);
                expect_same("exhaustive b op a", impls[m], dtype, op, other, all, work, want, n);
            }
        }
    }
    free(dec);
    free(all);
    free(other);
    free(want);
    free(work);
}

static void test_f16_exhaustive(void **state)
{
    (void)state;
    exhaustive16(LITE_F16);
}

static void test_bf16_exhaustive(void **state)
{
    (void)state;
    exhaustive16(LITE_BF16);
}

/* ---------------------------------------------------------------------------------------------
 * Every dtype x op: random data, odd counts, unaligned pointers
 * ------------------------------------------------------------------------------------------- */

static void run_random(int dtype, int op, size_t n, size_t off_a, size_t off_b)
{
    size_t es = lite_dtype_size(dtype);
    size_t bytes = (n > 0) ? n * es : 1;
    void *a = malloc(bytes), *b = malloc(bytes), *want = malloc(bytes);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(want);
    fill_random(dtype, a, n);
    fill_random(dtype, b, n);
    /* some lanes get b == a or b == -a, for exact cancellation and equal-operand min/max */
    for (size_t i = 0; i < n; i += 5) {
        memcpy((unsigned char *)b + i * es, (unsigned char *)a + i * es, es);
        if ((i & 1) && dtype <= LITE_BF16) /* flip the sign bit of a float */
            ((unsigned char *)b)[i * es + es - 1] ^= 0x80;
    }
    ref_array(dtype, op, a, b, want, n);
    char what[64];
    snprintf(what, sizeof what, "random off %zu/%zu", off_a, off_b);
    check_all_impls(what, dtype, op, a, b, want, n, off_a, off_b);
    free(a);
    free(b);
    free(want);
}

static void test_all_dtypes_ops_counts(void **state)
{
    (void)state;
    static const size_t counts[] = {0,  1,  2,  3,  7,  8,  9,   15,  16,  17,
                                    31, 32, 33, 63, 64, 65, 100, 255, 1000};
    static const size_t offs[][2] = {{0, 0}, {1, 3}, {3, 1}, {2, 0}, {0, 5}};
    for (int dt = 0; dt < LITE_DTYPE_COUNT; dt++)
        for (int k = 0; k < NOPS; k++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
                    run_random(dt, k_ops[k], counts[c], offs[o][0], offs[o][1]);
}

static void test_large_counts(void **state)
{
    (void)state;
    for (int dt = 0; dt < LITE_DTYPE_COUNT; dt++)
        for (int k = 0; k < NOPS; k++)
            run_random(dt, k_ops[k], 1000003, (size_t)(dt & 1), (size_t)k);
}

/* acc and in the same buffer */
static void test_self_alias(void **state)
{
    (void)state;
    for (int dt = 0; dt < LITE_DTYPE_COUNT; dt++) {
        size_t es = lite_dtype_size(dt), n = 77;
        unsigned char *a = malloc(n * es), *want = malloc(n * es), *w = malloc(n * es);
        assert_non_null(a);
        assert_non_null(want);
        assert_non_null(w);
        fill_random(dt, a, n);
        for (int k = 0; k < NOPS; k++) {
            ref_array(dt, k_ops[k], a, a, want, n);
            for (int m = 0; m < nimpls; m++) {
                memcpy(w, a, n * es);
                lite_reduce_inplace_impl(impls[m], w, w, n, dt, k_ops[k]);
                expect_same("self alias", impls[m], dt, k_ops[k], a, a, w, want, n);
            }
        }
        free(a);
        free(want);
        free(w);
    }
}

/* ---------------------------------------------------------------------------------------------
 * The documented rules, spelled out
 * ------------------------------------------------------------------------------------------- */

/* Run one element through every impl (at count 1 and inside a count-19 buffer, so both the
 * vector body and the tail see it) and return the common result; fail if impls disagree. */
static uint64_t one(int dtype, int op, uint64_t a, uint64_t b)
{
    size_t es = lite_dtype_size(dtype);
    uint64_t first = 0;
    for (int m = 0; m < nimpls; m++) {
        for (size_t n = 1; n <= 19; n += 18) {
            unsigned char acc[19 * 8], in[19 * 8];
            for (size_t i = 0; i < n; i++) {
                memcpy(acc + i * es, &a, es);
                memcpy(in + i * es, &b, es);
            }
            lite_reduce_inplace_impl(impls[m], acc, in, n, dtype, op);
            for (size_t i = 0; i < n; i++) {
                uint64_t r = 0;
                memcpy(&r, acc + i * es, es);
                if (m == 0 && n == 1 && i == 0)
                    first = r;
                else if (r != first)
                    fail_msg("impl %s dtype %s op %s: 0x%llx op 0x%llx = 0x%llx, other path "
                             "gave 0x%llx",
                             lite_reduce_impl_name(impls[m]), k_dtype_names[dtype], k_op_names[op],
                             (unsigned long long)a, (unsigned long long)b, (unsigned long long)r,
                             (unsigned long long)first);
            }
        }
    }
    return first;
}

static void test_float_rules(void **state)
{
    (void)state;
    /* f32 */
    const uint32_t pz = 0x00000000u, nz = 0x80000000u, pinf = 0x7F800000u, ninf = 0xFF800000u;
    const uint32_t one_ = 0x3F800000u, two = 0x40000000u, nan_neg_payload = 0xFFC12345u;
    for (int swap = 0; swap < 2; swap++) {
        uint32_t x = swap ? nz : pz, y = swap ? pz : nz;
        assert_int_equal(one(LITE_F32, LITE_MIN, x, y), nz);
        assert_int_equal(one(LITE_F32, LITE_MAX, x, y), pz);
        assert_int_equal(one(LITE_F32, LITE_SUM, x, y), pz);
    }
    assert_int_equal(one(LITE_F32, LITE_SUM, nz, nz), nz);
    assert_int_equal(one(LITE_F32, LITE_MIN, nz, nz), nz);
    assert_int_equal(one(LITE_F32, LITE_MAX, nz, nz), nz);
    assert_int_equal(one(LITE_F32, LITE_MIN, one_, two), one_);
    assert_int_equal(one(LITE_F32, LITE_MIN, two, one_), one_);
    assert_int_equal(one(LITE_F32, LITE_MAX, one_, two), two);
    assert_int_equal(one(LITE_F32, LITE_MAX, ninf, pinf), pinf);
    assert_int_equal(one(LITE_F32, LITE_MIN, ninf, pinf), ninf);
    /* NaN in either operand: canonical NaN, for min and max too */
    for (int k = 0; k < NOPS; k++) {
        assert_int_equal(one(LITE_F32, k_ops[k], nan_neg_payload, one_), CANON_F32);
        assert_int_equal(one(LITE_F32, k_ops[k], one_, nan_neg_payload), CANON_F32);
        assert_int_equal(one(LITE_F32, k_ops[k], 0x7F800001u, pinf), CANON_F32); /* sNaN */
        assert_int_equal(one(LITE_F32, k_ops[k], ninf, 0xFFFFFFFFu), CANON_F32);
    }
    /* invalid operations: the hardware's default NaN is negative on x86; ours is canonical */
    assert_int_equal(one(LITE_F32, LITE_SUM, pinf, ninf), CANON_F32);
    assert_int_equal(one(LITE_F32, LITE_PROD, pz, pinf), CANON_F32);
    assert_int_equal(one(LITE_F32, LITE_SUM, pinf, pinf), pinf);
    assert_int_equal(one(LITE_F32, LITE_PROD, fbits(1e30f), fbits(1e30f)), pinf);
    assert_int_equal(one(LITE_F32, LITE_PROD, fbits(-1e30f), fbits(1e30f)), ninf);
    assert_int_equal(one(LITE_F32, LITE_PROD, fbits(1e-30f), fbits(-1e-30f)), nz);
    assert_int_equal(one(LITE_F32, LITE_SUM, 0x00000001u, 0x00000001u), 0x00000002u); /* subn. */

    /* f64 */
    const uint64_t dpz = 0, dnz = 0x8000000000000000ull, dpinf = 0x7FF0000000000000ull;
    assert_true(one(LITE_F64, LITE_MIN, dpz, dnz) == dnz);
    assert_true(one(LITE_F64, LITE_MIN, dnz, dpz) == dnz);
    assert_true(one(LITE_F64, LITE_MAX, dpz, dnz) == dpz);
    assert_true(one(LITE_F64, LITE_MAX, dnz, dpz) == dpz);
    assert_true(one(LITE_F64, LITE_SUM, dpinf, dpinf | dnz) == CANON_F64);
    assert_true(one(LITE_F64, LITE_MAX, 0xFFF8000000000123ull, dpinf) == CANON_F64);
    assert_true(one(LITE_F64, LITE_MIN, dpinf, 0x7FF0000000000001ull) == CANON_F64);
    assert_true(one(LITE_F64, LITE_SUM, dbits(0.1), dbits(0.2)) == dbits(0.1 + 0.2));

    /* f16 / bf16 */
    for (int swap = 0; swap < 2; swap++) {
        assert_int_equal(one(LITE_F16, LITE_MIN, swap ? 0x8000 : 0, swap ? 0 : 0x8000), 0x8000);
        assert_int_equal(one(LITE_F16, LITE_MAX, swap ? 0x8000 : 0, swap ? 0 : 0x8000), 0x0000);
        assert_int_equal(one(LITE_BF16, LITE_MIN, swap ? 0x8000 : 0, swap ? 0 : 0x8000), 0x8000);
        assert_int_equal(one(LITE_BF16, LITE_MAX, swap ? 0x8000 : 0, swap ? 0 : 0x8000), 0x0000);
    }
    for (int k = 0; k < NOPS; k++) {
        assert_int_equal(one(LITE_F16, k_ops[k], 0xFD55, 0x3C00), CANON_F16);
        assert_int_equal(one(LITE_F16, k_ops[k], 0x3C00, 0x7C01), CANON_F16);
        assert_int_equal(one(LITE_BF16, k_ops[k], 0xFFA5, 0x3F80), CANON_BF16);
        assert_int_equal(one(LITE_BF16, k_ops[k], 0x3F80, 0x7F81), CANON_BF16);
    }
    assert_int_equal(one(LITE_F16, LITE_SUM, 0x7C00, 0xFC00), CANON_F16);
    assert_int_equal(one(LITE_F16, LITE_SUM, 0x7BFF, 0x7BFF), 0x7C00);  /* overflow: Inf */
    assert_int_equal(one(LITE_F16, LITE_SUM, 0x0001, 0x0001), 0x0002);  /* subnormals */
    assert_int_equal(one(LITE_F16, LITE_PROD, 0x0001, 0x3800), 0x0000); /* 2^-25: tie->0 */
    assert_int_equal(one(LITE_F16, LITE_PROD, 0x0003, 0x3800), 0x0002); /* 1.5: tie->2 */
    assert_int_equal(one(LITE_BF16, LITE_SUM, 0x7F7F, 0x7F7F), 0x7F80); /* overflow */
    assert_int_equal(one(LITE_BF16, LITE_SUM, 0x3F80, 0x3B80), 0x3F80); /* 1+2^-8: tie */
}

/* Per-step rounding: f16 2048 + 1 + 1 is 2048 (each step rounds; 2049 is a tie to even), where
 * accumulating in f32 and rounding once would give 2050. */
static void test_per_step_rounding(void **state)
{
    (void)state;
    for (int m = 0; m < nimpls; m++) {
        uint16_t acc[3] = {0x6800, 0x6800, 0x6800}, onev[3] = {0x3C00, 0x3C00, 0x3C00};
        lite_reduce_inplace_impl(impls[m], acc, onev, 3, LITE_F16, LITE_SUM);
        lite_reduce_inplace_impl(impls[m], acc, onev, 3, LITE_F16, LITE_SUM);
        for (int i = 0; i < 3; i++)
            assert_int_equal(acc[i], 0x6800);
        /* 2048 + 3 = 2051 -> tie between 2050 and 2052 -> 2052 (even mantissa) */
        uint16_t a2[1] = {0x6800}, three[1] = {0x4200};
        lite_reduce_inplace_impl(impls[m], a2, three, 1, LITE_F16, LITE_SUM);
        assert_int_equal(a2[0], 0x6802);
        /* bf16: 256 + 1 = 257 -> tie -> 256 */
        uint16_t b1[1] = {0x4380}, bone[1] = {0x3F80};
        lite_reduce_inplace_impl(impls[m], b1, bone, 1, LITE_BF16, LITE_SUM);
        assert_int_equal(b1[0], 0x4380);
    }
}

static void test_integer_wrap(void **state)
{
    (void)state;
    assert_int_equal((int8_t)one(LITE_I8, LITE_SUM, 127, 1), -128);
    assert_int_equal((int8_t)one(LITE_I8, LITE_SUM, (uint8_t)-128, (uint8_t)-1), 127);
    assert_int_equal((int8_t)one(LITE_I8, LITE_PROD, (uint8_t)-128, (uint8_t)-1), -128);
    assert_int_equal((int8_t)one(LITE_I8, LITE_PROD, 16, 16), 0);
    assert_int_equal((int8_t)one(LITE_I8, LITE_MIN, (uint8_t)-1, 1), -1);
    assert_int_equal((int8_t)one(LITE_I8, LITE_MAX, (uint8_t)-128, 127), 127);
    assert_int_equal((uint8_t)one(LITE_U8, LITE_SUM, 255, 2), 1);
    assert_int_equal((uint8_t)one(LITE_U8, LITE_PROD, 200, 2), 144);
    assert_int_equal((uint8_t)one(LITE_U8, LITE_MIN, 255, 1), 1);
    assert_int_equal((uint8_t)one(LITE_U8, LITE_MAX, 255, 1), 255);
    assert_int_equal((int32_t)one(LITE_I32, LITE_SUM, 0x7FFFFFFF, 1), INT32_MIN);
    assert_int_equal((int32_t)one(LITE_I32, LITE_PROD, 0x10000, 0x10000), 0);
    assert_int_equal((int32_t)one(LITE_I32, LITE_PROD, 0x80000000u, 0xFFFFFFFFu), INT32_MIN);
    assert_int_equal((int32_t)one(LITE_I32, LITE_MIN, 0x80000000u, 0x7FFFFFFF), INT32_MIN);
    assert_int_equal((int32_t)one(LITE_I32, LITE_MAX, 0xFFFFFFFFu, 0), 0);
    assert_int_equal((uint32_t)one(LITE_U32, LITE_SUM, 0xFFFFFFFFu, 1), 0);
    assert_int_equal((uint32_t)one(LITE_U32, LITE_PROD, 0xFFFFFFFFu, 0xFFFFFFFFu), 1);
    assert_int_equal((uint32_t)one(LITE_U32, LITE_MAX, 0xFFFFFFFFu, 0), 0xFFFFFFFFu);
    assert_int_equal((uint32_t)one(LITE_U32, LITE_MIN, 0x80000000u, 0x7FFFFFFF), 0x7FFFFFFF);
    assert_true((int64_t)one(LITE_I64, LITE_SUM, 0x7FFFFFFFFFFFFFFFull, 1) == INT64_MIN);
    assert_true((int64_t)one(LITE_I64, LITE_PROD, 0x8000000000000000ull, ~0ull) == INT64_MIN);
    assert_true((int64_t)one(LITE_I64, LITE_PROD, 0x100000000ull, 0x100000000ull) == 0);
    assert_true((int64_t)one(LITE_I64, LITE_MIN, ~0ull, 1) == -1);
    assert_true((int64_t)one(LITE_I64, LITE_MAX, 0x8000000000000000ull, 0) == 0);
    assert_true(one(LITE_U64, LITE_SUM, ~0ull, 2) == 1);
    assert_true(one(LITE_U64, LITE_PROD, 0xFFFFFFFFFFFFFFFFull, 3) == 0xFFFFFFFFFFFFFFFDull);
    assert_true(one(LITE_U64, LITE_MIN, 0x8000000000000000ull, 1) == 1);
    assert_true(one(LITE_U64, LITE_MAX, 0x8000000000000000ull, 1) == 0x8000000000000000ull);
}

/* LITE_AVG through lite_reduce_inplace is a SUM */
static void test_avg_op_is_sum(void **state)
{
    (void)state;
    float a[5] = {1, 2, 3, 4, 5}, b[5] = {10, 20, 30, 40, 50};
    lite_reduce_inplace(a, b, 5, LITE_F32, LITE_AVG);
    for (int i = 0; i < 5; i++)
        assert_true(a[i] == (float)(11 * (i + 1)));
}

/* ---------------------------------------------------------------------------------------------
 * AVG scaling
 * ------------------------------------------------------------------------------------------- */

static uint64_t ref_scale(int dtype, uint64_t a, int nranks)
{
    switch (dtype) {
    case LITE_F32: {
        volatile float r = bitsf((uint32_t)a) / (float)nranks;
        return isnan(r) ? CANON_F32 : fbits(r);
    }
    case LITE_F64: {
        volatile double r = bitsd(a) / (double)nranks;
        return isnan(r) ? CANON_F64 : dbits(r);
    }
    default: {
        int mb = dtype == LITE_F16 ? F16_M : BF16_M, bias = dtype == LITE_F16 ? F16_B : BF16_B;
        volatile float r = (float)dec16((uint16_t)a, mb, bias) / (float)nranks;
        if (isnan(r))
            return dtype == LITE_F16 ? CANON_F16 : CANON_BF16;
        return enc16(round16(r, mb, bias), mb, bias);
    }
    }
}

static void test_scale_avg(void **state)
{
    (void)state;
    static const int nr[] = {1, 2, 3, 7, 64, 1000, 12345};
    static const size_t counts[] = {0, 1, 7, 31, 100, 4099};
    for (int dt = LITE_F32; dt <= LITE_BF16; dt++) {
        size_t es = lite_dtype_size(dt);
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t n = counts[c];
            unsigned char *a = malloc(n * es + 8), *want = malloc(n * es + 8),
                          *w = malloc(n * es + 8);
            assert_non_null(a);
            assert_non_null(want);
            assert_non_null(w);
            fill_random(dt, a, n);
            if (dt == LITE_F16 || dt == LITE_BF16) { /* spread over all 16-bit patterns */
                for (size_t i = 0; i < n; i++) {
                    uint16_t v = (uint16_t)(i * 16 + (n == 4099 ? 0 : rnd() % 16));
                    memcpy(a + i * es, &v, 2);
                }
            }
            for (size_t r = 0; r < sizeof nr / sizeof nr[0]; r++) {
                for (size_t i = 0; i < n; i++) {
                    uint64_t x = load_elem(a, i, es), y = ref_scale(dt, x, nr[r]);
                    memcpy(want + i * es, &y, es);
                }
                for (int m = 0; m < nimpls; m++) {
                    memcpy(w + 1, a, n * es); /* unaligned */
                    assert_int_equal(lite_reduce_scale_avg_impl(impls[m], w + 1, n, dt, nr[r]), 0);
                    expect_same("scale_avg", impls[m], dt, LITE_AVG, a, NULL, w + 1, want, n);
                }
            }
            free(a);
            free(want);
            free(w);
        }
    }
    /* f16 and bf16: every 16-bit value, for several world sizes. 14, 28, 30, 250007 (f16) and
     * 65535, 16777213 (bf16) are sizes where multiplying by a rounded reciprocal instead of
     * dividing changes some results. */
    static const int nr16[] = {3, 7, 10, 14, 28, 30, 1000, 65535, 250007, 16777213};
    uint16_t *all = malloc(65536 * 2), *want16 = malloc(65536 * 2), *w16 = malloc(65536 * 2 + 2);
    assert_non_null(all);
    assert_non_null(want16);
    assert_non_null(w16);
    for (int dt = LITE_F16; dt <= LITE_BF16; dt++) {
        for (size_t r = 0; r < 2 * sizeof nr16 / sizeof nr16[0]; r++) {
            /* second round: shifted by one element, so each value also takes the other position
             * in the vector code's pairs of 16-bit lanes */
            uint32_t shift = r >= sizeof nr16 / sizeof nr16[0];
            int nranks = nr16[r % (sizeof nr16 / sizeof nr16[0])];
            for (uint32_t i = 0; i < 65536; i++) {
                all[i] = (uint16_t)(i + shift);
                want16[i] = (uint16_t)ref_scale(dt, all[i], nranks);
            }
            for (int m = 0; m < nimpls; m++) {
                memcpy(w16, all, 65536 * 2);
                assert_int_equal(lite_reduce_scale_avg_impl(impls[m], w16, 65536, dt, nranks), 0);
                expect_same("scale_avg all 16-bit", impls[m], dt, LITE_AVG, all, NULL, w16, want16,
                            65536);
            }
        }
    }
    free(all);
    free(want16);
    free(w16);

    /* f16 by value: exact results, and the ties of subnormal results (to even) */
    uint16_t h[4] = {0x6802, 0x0003, 0x0001, 0x0005}; /* 2052, 3, 1 and 5 units of 2^-24 */
    assert_int_equal(lite_reduce_scale_avg(h, 1, LITE_F16, 8), 0);
    assert_int_equal(h[0], 0x5C02); /* 2052 / 8 = 256.5, exact */
    assert_int_equal(lite_reduce_scale_avg(h + 1, 3, LITE_F16, 2), 0);
    assert_int_equal(h[1], 0x0002); /* 1.5 units: tie, to even */
    assert_int_equal(h[2], 0x0000); /* 0.5 units: tie, to even (zero) */
    assert_int_equal(h[3], 0x0002); /* 2.5 units: tie, to even */
    float f[2] = {1.0f, -0.0f};
    assert_int_equal(lite_reduce_scale_avg(f, 2, LITE_F32, 3), 0);
    assert_true(fbits(f[0]) == fbits(1.0f / 3.0f));
    assert_true(fbits(f[1]) == 0x80000000u);
    /* errors, and nothing written */
    int32_t iv[2] = {6, 9};
    assert_int_equal(lite_reduce_scale_avg(iv, 2, LITE_I32, 3), -EINVAL);
    assert_int_equal(iv[0], 6);
    float fv[1] = {6.0f};
    assert_int_equal(lite_reduce_scale_avg(fv, 1, LITE_F32, 0), -EINVAL);
    assert_int_equal(lite_reduce_scale_avg(fv, 1, LITE_F32, -2), -EINVAL);
    assert_int_equal(lite_reduce_scale_avg(fv, 1, LITE_DTYPE_COUNT, 2), -EINVAL);
    assert_true(fv[0] == 6.0f);
    assert_int_equal(lite_reduce_scale_avg(fv, 1, LITE_F32, 2), 0);
    assert_true(fv[0] == 3.0f);
}

/* AUTO is one of the tested impls, and the public entry point gives the same bits. */
static void test_auto_dispatch(void **state)
{
    (void)state;
    int a = lite_reduce_impl_auto();
    assert_true(a == LITE_REDUCE_IMPL_SCALAR || a == LITE_REDUCE_IMPL_VEC ||
                a == LITE_REDUCE_IMPL_AVX2);
    assert_true(lite_reduce_impl_available(a));
    assert_true(lite_reduce_impl_available(LITE_REDUCE_IMPL_SCALAR));
    assert_false(lite_reduce_impl_available(LITE_REDUCE_IMPL_COUNT));
    /* AUTO is the best available: AVX2, else VEC, else SCALAR */
    if (lite_reduce_impl_available(LITE_REDUCE_IMPL_AVX2))
        assert_int_equal(a, LITE_REDUCE_IMPL_AVX2);
    else if (lite_reduce_impl_available(LITE_REDUCE_IMPL_VEC))
        assert_int_equal(a, LITE_REDUCE_IMPL_VEC);
    else
        assert_int_equal(a, LITE_REDUCE_IMPL_SCALAR);
#if defined(__GNUC__) && defined(__x86_64__)
    /* x86_64 builds have the AVX2 path: it must be found on a CPU with AVX2 and F16C */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
        assert_true(lite_reduce_impl_available(LITE_REDUCE_IMPL_AVX2));
#endif
    const size_t n = 1003;
    uint16_t *x = malloc(n * 2), *y = malloc(n * 2), *z = malloc(n * 2);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(z);
    fill_random(LITE_F16, x, n);
    fill_random(LITE_F16, y, n);
    memcpy(z, x, n * 2);
    lite_reduce_inplace(x, y, n, LITE_F16, LITE_SUM);
    lite_reduce_inplace_impl(LITE_REDUCE_IMPL_SCALAR, z, y, n, LITE_F16, LITE_SUM);
    assert_memory_equal(x, z, n * 2);
    free(x);
    free(y);
    free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_size),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_invalid_noop),
        cmocka_unit_test(test_auto_dispatch),
        cmocka_unit_test(test_f16_to_f32_exhaustive),
        cmocka_unit_test(test_f32_to_f16),
        cmocka_unit_test(test_bf16_conversions),
        cmocka_unit_test(test_float_rules),
        cmocka_unit_test(test_per_step_rounding),
        cmocka_unit_test(test_integer_wrap),
        cmocka_unit_test(test_avg_op_is_sum),
        cmocka_unit_test(test_self_alias),
        cmocka_unit_test(test_all_dtypes_ops_counts),
        cmocka_unit_test(test_large_counts),
        cmocka_unit_test(test_scale_avg),
        cmocka_unit_test(test_f16_exhaustive),
        cmocka_unit_test(test_bf16_exhaustive),
    };
    return cmocka_run_group_tests(tests, setup_impls, NULL);
}
