/*
 * reduce_ops.cuh - one reduction step on one element, for the kernels of reduce.cu and, compiled
 * as plain C++ (no __CUDACC__), for the host test that checks this logic against reduce.c on
 * 31 partners of every 16-bit value and on random wider values (tests/gpu/test_kernel_ops.cpp). On
 * the host the _rn intrinsics are the C++ operators with FLT_EVAL_METHOD 0 and no contraction: the
 * same single IEEE operation rounded to nearest-even.
 */
#ifndef LITE_REDUCE_OPS_CUH
#define LITE_REDUCE_OPS_CUH

#include <stdint.h>

#ifndef __CUDACC__
#include <cfloat>
#include <cstring>
#if FLT_EVAL_METHOD != 0
#error "the host build of the kernel ops needs FLT_EVAL_METHOD == 0"
#endif
#define __host__
#define __device__
#define __forceinline__ inline
static inline float __fadd_rn(float a, float b)
{
    return a + b;
}
static inline float __fmul_rn(float a, float b)
{
    return a * b;
}
static inline float __fdiv_rn(float a, float b)
{
    return a / b;
}
static inline double __dadd_rn(double a, double b)
{
    return a + b;
}
static inline double __dmul_rn(double a, double b)
{
    return a * b;
}
static inline double __ddiv_rn(double a, double b)
{
    return a / b;
}
static inline unsigned __float_as_uint(float f)
{
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
static inline float __uint_as_float(unsigned u)
{
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
static inline long long __double_as_longlong(double d)
{
    long long u;
    std::memcpy(&u, &d, 8);
    return u;
}
static inline double __longlong_as_double(long long u)
{
    double d;
    std::memcpy(&d, &u, 8);
    return d;
}
#endif

namespace lite_red
{

enum { OP_SUM = 0, OP_PROD = 1, OP_MIN = 2, OP_MAX = 3 };

constexpr uint32_t QNAN_F32 = 0x7FC00000u;
constexpr unsigned long long QNAN_F64 = 0x7FF8000000000000ull;
constexpr uint16_t QNAN_F16 = 0x7E00u;

__host__ __device__ __forceinline__ uint32_t fbits(float f)
{
    return __float_as_uint(f);
}
__host__ __device__ __forceinline__ float bitsf(uint32_t u)
{
    return __uint_as_float(u);
}
__host__ __device__ __forceinline__ unsigned long long dbits(double d)
{
    return (unsigned long long)__double_as_longlong(d);
}
__host__ __device__ __forceinline__ double bitsd(unsigned long long u)
{
    return __longlong_as_double((long long)u);
}
__host__ __device__ __forceinline__ bool isnanf_(float f)
{
    return (fbits(f) & 0x7FFFFFFFu) > 0x7F800000u;
}
__host__ __device__ __forceinline__ bool isnand_(double d)
{
    return (dbits(d) & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull;
}

/* The conversions of reduce.c, line for line. */
__host__ __device__ __forceinline__ float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
    uint32_t u;
    if (e == 0x1Fu) {
        u = sign | 0x7F800000u | (m ? 0x00400000u | (m << 13) : 0u);
    } else if (e != 0) {
        u = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) {
        u = sign;
    } else {
        e = 113u;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        u = sign | (e << 23) | ((m & 0x3FFu) << 13);
    }
    return bitsf(u);
}

__host__ __device__ __forceinline__ uint16_t f32_to_f16(float f)
{
    uint32_t x = fbits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u)
        return (uint16_t)(sign | QNAN_F16 | ((ax & 0x7FFFFFu) >> 13));
    if (ax >= 0x477FF000u)
        return (uint16_t)(sign | 0x7C00u);
    if (ax >= 0x38800000u) {
        uint32_t a = ax - 0x38000000u;
        return (uint16_t)(sign | ((a + 0xFFFu + ((a >> 13) & 1u)) >> 13));
    }
    if (ax < 0x33000000u)
        return sign;
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
    uint32_t s = 126u - e;
    uint32_t q = m >> s;
    uint32_t rem = m & ((1u << s) - 1u);
    uint32_t half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
}

__host__ __device__ __forceinline__ float bf16_to_f32(uint16_t h)
{
    return bitsf((uint32_t)h << 16);
}

__host__ __device__ __forceinline__ uint16_t f32_to_bf16(float f)
{
    uint32_t x = fbits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

template <int OP> __host__ __device__ __forceinline__ float f32_op(float a, float b)
{
    float r;
    if (OP == OP_PROD) {
        r = __fmul_rn(a, b);
    } else if (OP == OP_MIN) {
        if (a < b)
            r = a;
        else if (b < a)
            r = b;
        else if (a == b)
            r = bitsf(fbits(a) | fbits(b));
        else
            r = bitsf(QNAN_F32);
    } else if (OP == OP_MAX) {
        if (a > b)
            r = a;
        else if (b > a)
            r = b;
        else if (a == b)
            r = bitsf(fbits(a) & fbits(b));
        else
            r = bitsf(QNAN_F32);
    } else {
        r = __fadd_rn(a, b);
    }
    return isnanf_(r) ? bitsf(QNAN_F32) : r;
}

template <int OP> __host__ __device__ __forceinline__ double f64_op(double a, double b)
{
    double r;
    if (OP == OP_PROD) {
        r = __dmul_rn(a, b);
    } else if (OP == OP_MIN) {
        if (a < b)
            r = a;
        else if (b < a)
            r = b;
        else if (a == b)
            r = bitsd(dbits(a) | dbits(b));
        else
            r = bitsd(QNAN_F64);
    } else if (OP == OP_MAX) {
        if (a > b)
            r = a;
        else if (b > a)
            r = b;
        else if (a == b)
            r = bitsd(dbits(a) & dbits(b));
        else
            r = bitsd(QNAN_F64);
    } else {
        r = __dadd_rn(a, b);
    }
    return isnand_(r) ? bitsd(QNAN_F64) : r;
}

/* Element types: how one step combines two stored values. */
struct F32 {
    typedef float T;
    template <int OP> __host__ __device__ static T op(T a, T b)
    {
        return f32_op<OP>(a, b);
    }
};
struct F64 {
    typedef double T;
    template <int OP> __host__ __device__ static T op(T a, T b)
    {
        return f64_op<OP>(a, b);
    }
};
struct F16 {
    typedef uint16_t T;
    template <int OP> __host__ __device__ static T op(T a, T b)
    {
        return f32_to_f16(f32_op<OP>(f16_to_f32(a), f16_to_f32(b)));
    }
};
struct BF16 {
    typedef uint16_t T;
    template <int OP> __host__ __device__ static T op(T a, T b)
    {
        return f32_to_bf16(f32_op<OP>(bf16_to_f32(a), bf16_to_f32(b)));
    }
};
/* Integers: SUM/PROD in the unsigned type U (wraps), MIN/MAX in the signed-or-not type S. */
template <typename S, typename U> struct INT {
    typedef S T;
    template <int OP> __host__ __device__ static T op(T a, T b)
    {
        if (OP == OP_PROD)
            return (S)(U)((unsigned long long)(U)a * (unsigned long long)(U)b);
        if (OP == OP_MIN)
            return a < b ? a : b;
        if (OP == OP_MAX)
            return a > b ? a : b;
        return (S)(U)((unsigned long long)(U)a + (unsigned long long)(U)b);
    }
};

/* AVG's division: f32/f64 in their own precision, f16/bf16 through f32; NaN canonical. */
__host__ __device__ __forceinline__ float div_f32(float a, float d)
{
    float r = __fdiv_rn(a, d);
    return isnanf_(r) ? bitsf(QNAN_F32) : r;
}

__host__ __device__ __forceinline__ double div_f64(double a, double d)
{
    double r = __ddiv_rn(a, d);
    return isnand_(r) ? bitsd(QNAN_F64) : r;
}

typedef INT<int8_t, uint8_t> I8;
typedef INT<uint8_t, uint8_t> U8;
typedef INT<int32_t, uint32_t> I32;
typedef INT<uint32_t, uint32_t> U32;
typedef INT<long long, unsigned long long> I64;
typedef INT<unsigned long long, unsigned long long> U64;

} // namespace lite_red

#endif /* LITE_REDUCE_OPS_CUH */
