/*
 * reduce.c - elementwise reduction kernels for the deterministic collectives.
 *
 * Three implementations of every (dtype, op) kernel, bit-identical for every input:
 *
 *   SCALAR  element by element, the reference (plain C, any compiler and target).
 *   VEC     GCC/Clang vector extensions on 16-byte vectors compiled for the baseline ISA (SSE2 on
 *           x86_64, NEON on aarch64, ...). f16 and bf16 are converted with integer SIMD.
 *   AVX2    the same source on 32-byte vectors compiled with target("avx2,f16c"); f16 uses the
 *           F16C conversions (VCVTPH2PS / VCVTPS2PH with an explicit round-to-nearest-even
 *           immediate), bf16 integer shifts.
 *
 * lite_reduce_inplace picks AVX2 when __builtin_cpu_supports says the CPU has AVX2 and F16C, else
 * VEC. Vector loops handle the tail (count not a multiple of the vector length) by copying it
 * into a zero-padded vector and running the same vector code, so every element of every buffer
 * goes through one code path per implementation.
 *
 * Bit-identity between the paths rests on: IEEE-754 arithmetic with no excess precision
 * (FLT_EVAL_METHOD == 0, no -ffast-math, no FMA contraction: no op here multiplies and adds),
 * canonical NaN results (so the operand-order-dependent NaN propagation of SSE/AVX does not
 * matter), and MIN/MAX written with explicit compare masks rather than minps/maxps.
 */

#include "reduce.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#ifdef __FAST_MATH__
#error "reduce.c must not be built with -ffast-math: it relies on IEEE NaN and signed-zero rules"
#endif
#if FLT_EVAL_METHOD != 0
#error "reduce.c needs FLT_EVAL_METHOD == 0 (no excess precision) for bit-reproducible results"
#endif

/* RED_HAVE_VEC: GCC/Clang vector extensions (any target). RED_HAVE_AVX2: the AVX2/F16C
 * instantiation and its runtime check (x86_64 only). Without either, only the scalar code. */
#if defined(__GNUC__)
#define RED_HAVE_VEC 1
#else
#define RED_HAVE_VEC 0
#endif
/* Not with clang: it refuses the 32-byte vector helpers outside target("avx2") functions, and
 * (before 16) "f16c" in __builtin_cpu_supports; clang builds (the fuzzers) run VEC, which gives
 * the same bits. */
#if RED_HAVE_VEC && defined(__x86_64__) && !defined(__clang__)
#define RED_HAVE_AVX2 1
#include <immintrin.h>
#else
#define RED_HAVE_AVX2 0
#endif

#define QNAN_F32  0x7FC00000u
#define QNAN_F64  0x7FF8000000000000ull
#define QNAN_F16  0x7E00u
#define QNAN_BF16 0x7FC0u

/* ---------------------------------------------------------------------------------------------
 * dtype table, checks
 * ------------------------------------------------------------------------------------------- */

LITE_API size_t lite_dtype_size(int dtype)
{
    switch (dtype) {
    case LITE_F32:
    case LITE_I32:
    case LITE_U32:
        return 4;
    case LITE_F64:
    case LITE_I64:
    case LITE_U64:
        return 8;
    case LITE_F16:
    case LITE_BF16:
        return 2;
    case LITE_I8:
    case LITE_U8:
        return 1;
    default:
        return 0;
    }
}

static int is_float_dtype(int dtype)
{
    return dtype == LITE_F32 || dtype == LITE_F64 || dtype == LITE_F16 || dtype == LITE_BF16;
}

int lite_reduce_check(int dtype, int op)
{
    if (lite_dtype_size(dtype) == 0)
        return -EINVAL;
    switch (op) {
    case LITE_SUM:
    case LITE_PROD:
    case LITE_MIN:
    case LITE_MAX:
        return 0;
    case LITE_AVG:
        return is_float_dtype(dtype) ? 0 : -EINVAL;
    default:
        return -EINVAL;
    }
}

/* ---------------------------------------------------------------------------------------------
 * bit casts and exact conversions
 * ------------------------------------------------------------------------------------------- */

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint64_t f64_bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline double bits_f64(uint64_t u)
{
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float lite_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
    uint32_t u;

    if (e == 0x1Fu) { /* Inf, or NaN made quiet with its payload */
        u = sign | 0x7F800000u | (m ? 0x00400000u | (m << 13) : 0u);
    } else if (e != 0) { /* normal: rebias 15 -> 127 */
        u = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) { /* +-0 */
        u = sign;
    } else { /* subnormal m * 2^-24: normalise */
        e = 113u;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        u = sign | (e << 23) | ((m & 0x3FFu) << 13);
    }
    return bits_f32(u);
}

uint16_t lite_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7FFFFFFFu;

    if (ax > 0x7F800000u) /* NaN: quiet, keep the top 9 payload bits */
        return (uint16_t)(sign | QNAN_F16 | ((ax & 0x7FFFFFu) >> 13));
    if (ax >= 0x477FF000u) /* >= 65520 (half-way to 2^16, ties to even = up): Inf */
        return (uint16_t)(sign | 0x7C00u);
    if (ax >= 0x38800000u) { /* result normal (>= 2^-14): rebias, RNE on the 13 dropped bits */
        uint32_t a = ax - 0x38000000u;
        return (uint16_t)(sign | ((a + 0xFFFu + ((a >> 13) & 1u)) >> 13));
    }
    if (ax < 0x33000000u) /* < 2^-25 = half the smallest subnormal: rounds to zero */
        return sign;
    /* subnormal result: the value in units of 2^-24 is mant * 2^(e - 126), rounded RNE. A
     * carry out of the 10 bits gives 0x400, the encoding of the smallest normal. */
    uint32_t e = ax >> 23; /* 102..112 */
    uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
    uint32_t s = 126u - e; /* 14..24 */
    uint32_t q = m >> s;
    uint32_t rem = m & ((1u << s) - 1u);
    uint32_t half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
}

float lite_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t lite_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: quiet, keep sign and top payload bits */
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

/* ---------------------------------------------------------------------------------------------
 * Scalar reference
 * ------------------------------------------------------------------------------------------- */

static inline float s_f32_op(float a, float b, int op)
{
    float r;
    switch (op) {
    case LITE_PROD:
        r = a * b;
        break;
    case LITE_MIN:
        if (a < b)
            r = a;
        else if (b < a)
            r = b;
        else if (a == b) /* equal, including -0 == +0: OR of the bits picks -0 */
            r = bits_f32(f32_bits(a) | f32_bits(b));
        else
            r = NAN;
        break;
    case LITE_MAX:
        if (a > b)
            r = a;
        else if (b > a)
            r = b;
        else if (a == b) /* AND of the bits picks +0 */
            r = bits_f32(f32_bits(a) & f32_bits(b));
        else
            r = NAN;
        break;
    default:
        r = a + b;
        break;
    }
    return isnan(r) ? bits_f32(QNAN_F32) : r;
}

static inline double s_f64_op(double a, double b, int op)
{
    double r;
    switch (op) {
    case LITE_PROD:
        r = a * b;
        break;
    case LITE_MIN:
        if (a < b)
            r = a;
        else if (b < a)
            r = b;
        else if (a == b)
            r = bits_f64(f64_bits(a) | f64_bits(b));
        else
            r = NAN;
        break;
    case LITE_MAX:
        if (a > b)
            r = a;
        else if (b > a)
            r = b;
        else if (a == b)
            r = bits_f64(f64_bits(a) & f64_bits(b));
        else
            r = NAN;
        break;
    default:
        r = a + b;
        break;
    }
    return isnan(r) ? bits_f64(QNAN_F64) : r;
}

static inline float s_f32_canon(float r)
{
    return isnan(r) ? bits_f32(QNAN_F32) : r;
}

static inline uint16_t s_f16_op(uint16_t a, uint16_t b, int op)
{
    return lite_f32_to_f16(s_f32_op(lite_f16_to_f32(a), lite_f16_to_f32(b), op));
}

static inline uint16_t s_bf16_op(uint16_t a, uint16_t b, int op)
{
    return lite_f32_to_bf16(s_f32_op(lite_bf16_to_f32(a), lite_bf16_to_f32(b), op));
}

/* Integers: SUM/PROD in the unsigned type (wraps, no UB); MIN/MAX in the dtype's own type. */
#define DEF_S_INT(sfx, T, UT)                                                                      \
    static inline T s_##sfx##_op(T a, T b, int op)                                                 \
    {                                                                                              \
        switch (op) {                                                                              \
        case LITE_PROD:                                                                            \
            return (T)(UT)((UT)a * (UT)b);                                                         \
        case LITE_MIN:                                                                             \
            return a < b ? a : b;                                                                  \
        case LITE_MAX:                                                                             \
            return a > b ? a : b;                                                                  \
        default:                                                                                   \
            return (T)(UT)((UT)a + (UT)b);                                                         \
        }                                                                                          \
    }

/* uint8_t promotes to int for '*': 255 * 255 fits, but uint32_t*uint32_t stays unsigned; the
 * 8-bit case multiplies in unsigned int to stay clear of signed overflow on promotion. */
static inline int8_t s_i8_op(int8_t a, int8_t b, int op)
{
    switch (op) {
    case LITE_PROD:
        return (int8_t)(uint8_t)((unsigned)(uint8_t)a * (unsigned)(uint8_t)b);
    case LITE_MIN:
        return a < b ? a : b;
    case LITE_MAX:
        return a > b ? a : b;
    default:
        return (int8_t)(uint8_t)((unsigned)(uint8_t)a + (unsigned)(uint8_t)b);
    }
}

static inline uint8_t s_u8_op(uint8_t a, uint8_t b, int op)
{
    switch (op) {
    case LITE_PROD:
        return (uint8_t)((unsigned)a * (unsigned)b);
    case LITE_MIN:
        return a < b ? a : b;
    case LITE_MAX:
        return a > b ? a : b;
    default:
        return (uint8_t)((unsigned)a + (unsigned)b);
    }
}

DEF_S_INT(i32, int32_t, uint32_t)
DEF_S_INT(u32, uint32_t, uint32_t)
DEF_S_INT(i64, int64_t, uint64_t)
DEF_S_INT(u64, uint64_t, uint64_t)

/* Scalar kernels: memcpy element access, so any alignment works. */
#define DEF_S_KERN(sfx, T)                                                                         \
    static void sc_##sfx(void *acc, const void *in, size_t n, int op)                              \
    {                                                                                              \
        unsigned char *pa = acc;                                                                   \
        const unsigned char *pb = in;                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            T a, b;                                                                                \
            memcpy(&a, pa + i * sizeof(T), sizeof(T));                                             \
            memcpy(&b, pb + i * sizeof(T), sizeof(T));                                             \
            a = s_##sfx##_op(a, b, op);                                                            \
            memcpy(pa + i * sizeof(T), &a, sizeof(T));                                             \
        }                                                                                          \
    }

DEF_S_KERN(f32, float)
DEF_S_KERN(f64, double)
DEF_S_KERN(f16, uint16_t)
DEF_S_KERN(bf16, uint16_t)
DEF_S_KERN(i8, int8_t)
DEF_S_KERN(u8, uint8_t)
DEF_S_KERN(i32, int32_t)
DEF_S_KERN(u32, uint32_t)
DEF_S_KERN(i64, int64_t)
DEF_S_KERN(u64, uint64_t)

static void sc_scale_f32(void *acc, size_t n, int nranks)
{
    unsigned char *p = acc;
    float d = (float)nranks;
    for (size_t i = 0; i < n; i++) {
        float a;
        memcpy(&a, p + 4 * i, 4);
        a = s_f32_canon(a / d);
        memcpy(p + 4 * i, &a, 4);
    }
}

static void sc_scale_f64(void *acc, size_t n, int nranks)
{
    unsigned char *p = acc;
    double d = (double)nranks;
    for (size_t i = 0; i < n; i++) {
        double a;
        memcpy(&a, p + 8 * i, 8);
        a = a / d;
        if (isnan(a))
            a = bits_f64(QNAN_F64);
        memcpy(p + 8 * i, &a, 8);
    }
}

static void sc_scale_f16(void *acc, size_t n, int nranks)
{
    unsigned char *p = acc;
    float d = (float)nranks;
    for (size_t i = 0; i < n; i++) {
        uint16_t a;
        memcpy(&a, p + 2 * i, 2);
        a = lite_f32_to_f16(s_f32_canon(lite_f16_to_f32(a) / d));
        memcpy(p + 2 * i, &a, 2);
    }
}

static void sc_scale_bf16(void *acc, size_t n, int nranks)
{
    unsigned char *p = acc;
    float d = (float)nranks;
    for (size_t i = 0; i < n; i++) {
        uint16_t a;
        memcpy(&a, p + 2 * i, 2);
        a = lite_f32_to_bf16(s_f32_canon(lite_bf16_to_f32(a) / d));
        memcpy(p + 2 * i, &a, 2);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Implementation tables
 * ------------------------------------------------------------------------------------------- */

typedef void (*kern_fn)(void *acc, const void *in, size_t n, int op);
typedef void (*scale_fn)(void *acc, size_t n, int nranks);

struct impl_tab {
    kern_fn kern[LITE_DTYPE_COUNT];
    scale_fn scale[LITE_DTYPE_COUNT]; /* float dtypes only */
};

static const struct impl_tab tab_scalar = {
    .kern =
        {
            [LITE_F32] = sc_f32,
            [LITE_F64] = sc_f64,
            [LITE_F16] = sc_f16,
            [LITE_BF16] = sc_bf16,
            [LITE_I8] = sc_i8,
            [LITE_U8] = sc_u8,
            [LITE_I32] = sc_i32,
            [LITE_U32] = sc_u32,
            [LITE_I64] = sc_i64,
            [LITE_U64] = sc_u64,
        },
    .scale =
        {
            [LITE_F32] = sc_scale_f32,
            [LITE_F64] = sc_scale_f64,
            [LITE_F16] = sc_scale_f16,
            [LITE_BF16] = sc_scale_bf16,
        },
};

/* ---------------------------------------------------------------------------------------------
 * Vector code (GCC vector extensions)
 *
 * The SIMD kernels are written once, in the template reduce_tmpl.h, and instantiated twice by
 * including it here:
 *   - 16-byte vectors for the baseline ISA (tab_vec): the native width of SSE2 and NEON. (Wider
 *     generic vectors are split by GCC, but their comparisons are scalarised, which is slow.)
 *   - 32-byte vectors inside __attribute__((target("avx2,f16c"))) functions (tab_avx2), plus
 *     the F16C conversions for f16.
 * All template helpers are always_inline, so each instantiation is compiled entirely for its
 * own ISA.
 * ------------------------------------------------------------------------------------------- */

#if RED_HAVE_VEC

/* 32-byte vectors are returned only from always_inline functions, never across an ABI
 * boundary, so GCC's warning about the AVX calling convention does not apply (it is emitted at
 * the end of the translation unit, so it stays off to the end of the file). Vector arguments are
 * passed by pointer, which avoids the matching note about argument alignment. */
#pragma GCC diagnostic ignored "-Wpsabi"

#define AI             static inline __attribute__((always_inline))
#define RED_CAT_(a, b) a##b
#define RED_CAT(a, b)  RED_CAT_(a, b)

/* acc op= in over n elements of size ES using vector type V and the lane op OPF; the tail is run
 * through the same OPF on a zero-padded copy. */
#define DEF_VLOOP(name, ES, V, OPF, ATTR)                                                          \
    AI ATTR void name(void *acc, const void *in, size_t n, int op)                                 \
    {                                                                                              \
        unsigned char *pa = acc;                                                                   \
        const unsigned char *pb = in;                                                              \
        size_t bytes = n * (ES), i = 0;                                                            \
        for (; i + sizeof(V) <= bytes; i += sizeof(V)) {                                           \
            V a, b;                                                                                \
            memcpy(&a, pa + i, sizeof a);                                                          \
            memcpy(&b, pb + i, sizeof b);                                                          \
            a = OPF(&a, &b, op);                                                                   \
            memcpy(pa + i, &a, sizeof a);                                                          \
        }                                                                                          \
        if (i < bytes) {                                                                           \
            V a = {0}, b = {0};                                                                    \
            memcpy(&a, pa + i, bytes - i);                                                         \
            memcpy(&b, pb + i, bytes - i);                                                         \
            a = OPF(&a, &b, op);                                                                   \
            memcpy(pa + i, &a, bytes - i);                                                         \
        }                                                                                          \
    }

#define DEF_VSCALE(name, ES, V, DIVF, DT, ATTR)                                                    \
    AI ATTR void name(void *acc, size_t n, int nranks)                                             \
    {                                                                                              \
        unsigned char *pa = acc;                                                                   \
        size_t bytes = n * (ES), i = 0;                                                            \
        DT d = (DT)nranks;                                                                         \
        for (; i + sizeof(V) <= bytes; i += sizeof(V)) {                                           \
            V a;                                                                                   \
            memcpy(&a, pa + i, sizeof a);                                                          \
            a = DIVF(&a, d);                                                                       \
            memcpy(pa + i, &a, sizeof a);                                                          \
        }                                                                                          \
        if (i < bytes) {                                                                           \
            V a = {0};                                                                             \
            memcpy(&a, pa + i, bytes - i);                                                         \
            a = DIVF(&a, d);                                                                       \
            memcpy(pa + i, &a, bytes - i);                                                         \
        }                                                                                          \
    }

/* One out-of-line kernel per (impl, dtype); the switch gives each op its own loop with the op
 * folded in as a constant. */
#define DEF_KERN(pfx, sfx, LOOP, ATTR)                                                             \
    static ATTR void pfx##_##sfx(void *acc, const void *in, size_t n, int op)                      \
    {                                                                                              \
        switch (op) {                                                                              \
        case LITE_PROD:                                                                            \
            LOOP(acc, in, n, LITE_PROD);                                                           \
            break;                                                                                 \
        case LITE_MIN:                                                                             \
            LOOP(acc, in, n, LITE_MIN);                                                            \
            break;                                                                                 \
        case LITE_MAX:                                                                             \
            LOOP(acc, in, n, LITE_MAX);                                                            \
            break;                                                                                 \
        default:                                                                                   \
            LOOP(acc, in, n, LITE_SUM);                                                            \
            break;                                                                                 \
        }                                                                                          \
    }

#define DEF_SCALE(pfx, sfx, LOOP, ATTR)                                                            \
    static ATTR void pfx##_scale_##sfx(void *acc, size_t n, int nranks)                            \
    {                                                                                              \
        LOOP(acc, n, nranks);                                                                      \
    }

/* The kernels and the table of one implementation. pfx must already be expanded (see
 * DEF_IMPL_X). */
#define DEF_IMPL(pfx, ATTR, F16LOOP, F16SCALE)                                                     \
    DEF_KERN(pfx, f32, vl_f32, ATTR)                                                               \
    DEF_KERN(pfx, f64, vl_f64, ATTR)                                                               \
    DEF_KERN(pfx, f16, F16LOOP, ATTR)                                                              \
    DEF_KERN(pfx, bf16, vl_bf16, ATTR)                                                             \
    DEF_KERN(pfx, i8, vl_i8, ATTR)                                                                 \
    DEF_KERN(pfx, u8, vl_u8, ATTR)                                                                 \
    DEF_KERN(pfx, i32, vl_i32, ATTR)                                                               \
    DEF_KERN(pfx, u32, vl_u32, ATTR)                                                               \
    DEF_KERN(pfx, i64, vl_i64, ATTR)                                                               \
    DEF_KERN(pfx, u64, vl_u64, ATTR)                                                               \
    DEF_SCALE(pfx, f32, vs_f32, ATTR)                                                              \
    DEF_SCALE(pfx, f64, vs_f64, ATTR)                                                              \
    DEF_SCALE(pfx, f16, F16SCALE, ATTR)                                                            \
    DEF_SCALE(pfx, bf16, vs_bf16, ATTR)                                                            \
    static const struct impl_tab tab_##pfx = {                                                     \
        .kern =                                                                                    \
            {                                                                                      \
                [LITE_F32] = pfx##_f32,                                                            \
                [LITE_F64] = pfx##_f64,                                                            \
                [LITE_F16] = pfx##_f16,                                                            \
                [LITE_BF16] = pfx##_bf16,                                                          \
                [LITE_I8] = pfx##_i8,                                                              \
                [LITE_U8] = pfx##_u8,                                                              \
                [LITE_I32] = pfx##_i32,                                                            \
                [LITE_U32] = pfx##_u32,                                                            \
                [LITE_I64] = pfx##_i64,                                                            \
                [LITE_U64] = pfx##_u64,                                                            \
            },                                                                                     \
        .scale =                                                                                   \
            {                                                                                      \
                [LITE_F32] = pfx##_scale_f32,                                                      \
                [LITE_F64] = pfx##_scale_f64,                                                      \
                [LITE_F16] = pfx##_scale_f16,                                                      \
                [LITE_BF16] = pfx##_scale_bf16,                                                    \
            },                                                                                     \
    };
#define DEF_IMPL_X(pfx, ATTR, F16LOOP, F16SCALE) DEF_IMPL(pfx, ATTR, F16LOOP, F16SCALE)

/* Instantiation 1: baseline ISA, 16-byte vectors -> tab_vec */
#define RED_TEMPLATE_PASS 1
#define RW                16
#define RSFX              _w16
#define RPFX              vec
#define RATTR
#define RF16C 0
#include "reduce_tmpl.h"
#undef RW
#undef RSFX
#undef RPFX
#undef RATTR
#undef RF16C

/* Instantiation 2: AVX2 + F16C, 32-byte vectors -> tab_avx2 */
#if RED_HAVE_AVX2
#define RW    32
#define RSFX  _w32
#define RPFX  avx2
#define RATTR __attribute__((target("avx2,f16c")))
#define RF16C 1
#include "reduce_tmpl.h"
#undef RW
#undef RSFX
#undef RPFX
#undef RATTR
#undef RF16C
#endif
#undef RED_TEMPLATE_PASS

#endif /* RED_HAVE_VEC */

/* ---------------------------------------------------------------------------------------------
 * Dispatch
 * ------------------------------------------------------------------------------------------- */

static int cpu_has_avx2(void)
{
#if RED_HAVE_AVX2
    static atomic_int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
#else
    return 0;
#endif
}

int lite_reduce_impl_available(int impl)
{
    switch (impl) {
    case LITE_REDUCE_IMPL_AUTO:
    case LITE_REDUCE_IMPL_SCALAR:
        return 1;
    case LITE_REDUCE_IMPL_VEC:
        return RED_HAVE_VEC;
    case LITE_REDUCE_IMPL_AVX2:
        return cpu_has_avx2();
    default:
        return 0;
    }
}

int lite_reduce_impl_auto(void)
{
    if (cpu_has_avx2())
        return LITE_REDUCE_IMPL_AVX2;
    return RED_HAVE_VEC ? LITE_REDUCE_IMPL_VEC : LITE_REDUCE_IMPL_SCALAR;
}

const char *lite_reduce_impl_name(int impl)
{
    switch (impl) {
    case LITE_REDUCE_IMPL_AUTO:
        return "auto";
    case LITE_REDUCE_IMPL_SCALAR:
        return "scalar";
    case LITE_REDUCE_IMPL_VEC:
        return "vec";
    case LITE_REDUCE_IMPL_AVX2:
        return "avx2";
    default:
        return "?";
    }
}

static const struct impl_tab *impl_table(int impl)
{
    if (impl == LITE_REDUCE_IMPL_AUTO)
        impl = lite_reduce_impl_auto();
#if RED_HAVE_AVX2
    if (impl == LITE_REDUCE_IMPL_AVX2 && cpu_has_avx2())
        return &tab_avx2;
#endif
#if RED_HAVE_VEC
    if (impl == LITE_REDUCE_IMPL_VEC)
        return &tab_vec;
#endif
    return &tab_scalar;
}

void lite_reduce_inplace_impl(int impl, void *acc, const void *in, size_t count, int dtype, int op)
{
    if (lite_reduce_check(dtype, op) != 0 || count == 0)
        return;
    impl_table(impl)->kern[dtype](acc, in, count, op == LITE_AVG ? LITE_SUM : op);
}

void lite_reduce_inplace(void *acc, const void *in, size_t count, int dtype, int op)
{
    lite_reduce_inplace_impl(LITE_REDUCE_IMPL_AUTO, acc, in, count, dtype, op);
}

int lite_reduce_scale_avg_impl(int impl, void *acc, size_t count, int dtype, int nranks)
{
    if (!is_float_dtype(dtype) || nranks < 1)
        return -EINVAL;
    if (count == 0)
        return 0;
    impl_table(impl)->scale[dtype](acc, count, nranks);
    return 0;
}

int lite_reduce_scale_avg(void *acc, size_t count, int dtype, int nranks)
{
    return lite_reduce_scale_avg_impl(LITE_REDUCE_IMPL_AUTO, acc, count, dtype, nranks);
}
