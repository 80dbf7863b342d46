/*
 * reduce.cu - the reduction step of docs/REDUCTION.md on the GPU, bit-identical to
 * lite_reduce_inplace / lite_reduce_scale_avg (src/core/reduce.c) for every dtype and op.
 *
 * How bit-identity is kept:
 *   - Float arithmetic goes through the _rn intrinsics (__fadd_rn, __fmul_rn, __dadd_rn, ...):
 *     one IEEE operation rounded to nearest-even that the compiler never contracts into a fused
 *     multiply-add, whatever -fmad says. The build also passes -fmad=false -ftz=false
 *     -prec-div=true and refuses a PTX that contains fma, .ftz or approximate instructions
 *     (cmake/LiteCuda.cmake), so denormals are kept as the CPU keeps them.
 *   - f16/bf16 are converted with the same integer code as reduce.c (not the cuda_fp16
 *     intrinsics, whose NaN results differ), combined in f32, rounded back after every step.
 *   - NaN results are written canonical; MIN/MAX follow reduce.c's comparisons and signed-zero
 *     rules; integers wrap in their unsigned type.
 *
 * Launch: one kernel per dtype, the op a uniform argument; grid-stride over 16-byte vectors
 * when both pointers are 16-byte aligned, element by element otherwise (device pointers must be
 * aligned to the element size: gpu.c checks). Names are extern "C" for cuModuleGetFunction.
 */
#include <stdint.h>

namespace {

enum { OP_SUM = 0, OP_PROD = 1, OP_MIN = 2, OP_MAX = 3 };

constexpr uint32_t QNAN_F32 = 0x7FC00000u;
constexpr unsigned long long QNAN_F64 = 0x7FF8000000000000ull;
constexpr uint16_t QNAN_F16 = 0x7E00u;

__device__ __forceinline__ uint32_t fbits(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float bitsf(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ unsigned long long dbits(double d)
{
    return (unsigned long long)__double_as_longlong(d);
}
__device__ __forceinline__ double bitsd(unsigned long long u)
{
    return __longlong_as_double((long long)u);
}
__device__ __forceinline__ bool isnanf_(float f) { return (fbits(f) & 0x7FFFFFFFu) > 0x7F800000u; }
__device__ __forceinline__ bool isnand_(double d)
{
    return (dbits(d) & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull;
}

/* The conversions of reduce.c, line for line. */
__device__ __forceinline__ float f16_to_f32(uint16_t h)
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

__device__ __forceinline__ uint16_t f32_to_f16(float f)
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

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return bitsf((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t f32_to_bf16(float f)
{
    uint32_t x = fbits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

template <int OP> __device__ __forceinline__ float f32_op(float a, float b)
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

template <int OP> __device__ __forceinline__ double f64_op(double a, double b)
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
    template <int OP> __device__ static T op(T a, T b) { return f32_op<OP>(a, b); }
};
struct F64 {
    typedef double T;
    template <int OP> __device__ static T op(T a, T b) { return f64_op<OP>(a, b); }
};
struct F16 {
    typedef uint16_t T;
    template <int OP> __device__ static T op(T a, T b)
    {
        return f32_to_f16(f32_op<OP>(f16_to_f32(a), f16_to_f32(b)));
    }
};
struct BF16 {
    typedef uint16_t T;
    template <int OP> __device__ static T op(T a, T b)
    {
        return f32_to_bf16(f32_op<OP>(bf16_to_f32(a), bf16_to_f32(b)));
    }
};
/* Integers: SUM/PROD in the unsigned type U (wraps), MIN/MAX in the signed-or-not type S. */
template <typename S, typename U> struct INT {
    typedef S T;
    template <int OP> __device__ static T op(T a, T b)
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

/* One vector of 16 bytes, seen as elements of T. */
template <typename T> union Vec {
    uint4 v;
    T e[16 / sizeof(T)];
};

template <typename D, int OP>
__device__ __forceinline__ void reduce_body(typename D::T *acc, const typename D::T *in,
                                            unsigned long long n)
{
    typedef typename D::T T;
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long done = 0;
    if ((((uintptr_t)acc | (uintptr_t)in) & 15u) == 0) {
        const unsigned long long per = 16 / sizeof(T);
        const unsigned long long nv = n / per;
        uint4 *va = reinterpret_cast<uint4 *>(acc);
        const uint4 *vb = reinterpret_cast<const uint4 *>(in);
        for (unsigned long long i = tid; i < nv; i += nth) {
            Vec<T> a, b;
            a.v = va[i];
            b.v = vb[i];
#pragma unroll
            for (unsigned k = 0; k < per; k++)
                a.e[k] = D::template op<OP>(a.e[k], b.e[k]);
            va[i] = a.v;
        }
        done = nv * per;
    }
    for (unsigned long long i = done + tid; i < n; i += nth)
        acc[i] = D::template op<OP>(acc[i], in[i]);
}

template <typename D>
__device__ __forceinline__ void reduce_dispatch(void *acc, const void *in, unsigned long long n,
                                                int op)
{
    typedef typename D::T T;
    T *a = static_cast<T *>(acc);
    const T *b = static_cast<const T *>(in);
    switch (op) {
    case OP_PROD:
        reduce_body<D, OP_PROD>(a, b, n);
        break;
    case OP_MIN:
        reduce_body<D, OP_MIN>(a, b, n);
        break;
    case OP_MAX:
        reduce_body<D, OP_MAX>(a, b, n);
        break;
    default:
        reduce_body<D, OP_SUM>(a, b, n);
        break;
    }
}

/* AVG's division: f32/f64 in their own precision, f16/bf16 through f32; NaN canonical. */
__device__ __forceinline__ float div_f32(float a, float d)
{
    float r = __fdiv_rn(a, d);
    return isnanf_(r) ? bitsf(QNAN_F32) : r;
}

} // namespace

#define LITE_REDUCE_KERNEL(name, D)                                                                \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        name(void *acc, const void *in, unsigned long long n, int op)                              \
    {                                                                                              \
        reduce_dispatch<D>(acc, in, n, op);                                                        \
    }

LITE_REDUCE_KERNEL(lite_reduce_f32, F32)
LITE_REDUCE_KERNEL(lite_reduce_f64, F64)
LITE_REDUCE_KERNEL(lite_reduce_f16, F16)
LITE_REDUCE_KERNEL(lite_reduce_bf16, BF16)
typedef INT<int8_t, uint8_t> I8;
typedef INT<uint8_t, uint8_t> U8;
typedef INT<int32_t, uint32_t> I32;
typedef INT<uint32_t, uint32_t> U32;
typedef INT<long long, unsigned long long> I64;
typedef INT<unsigned long long, unsigned long long> U64;
LITE_REDUCE_KERNEL(lite_reduce_i8, I8)
LITE_REDUCE_KERNEL(lite_reduce_u8, U8)
LITE_REDUCE_KERNEL(lite_reduce_i32, I32)
LITE_REDUCE_KERNEL(lite_reduce_u32, U32)
LITE_REDUCE_KERNEL(lite_reduce_i64, I64)
LITE_REDUCE_KERNEL(lite_reduce_u64, U64)

#define GRID_STRIDE(i, n)                                                                          \
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (unsigned long long)gridDim.x * blockDim.x)

extern "C" __global__ void __launch_bounds__(256)
    lite_avg_f32(float *acc, unsigned long long n, int nranks)
{
    const float d = (float)nranks;
    GRID_STRIDE(i, n) acc[i] = div_f32(acc[i], d);
}

extern "C" __global__ void __launch_bounds__(256)
    lite_avg_f64(double *acc, unsigned long long n, int nranks)
{
    const double d = (double)nranks;
    GRID_STRIDE(i, n)
    {
        double r = __ddiv_rn(acc[i], d);
        acc[i] = isnand_(r) ? bitsd(QNAN_F64) : r;
    }
}

extern "C" __global__ void __launch_bounds__(256)
    lite_avg_f16(uint16_t *acc, unsigned long long n, int nranks)
{
    const float d = (float)nranks;
    GRID_STRIDE(i, n) acc[i] = f32_to_f16(div_f32(f16_to_f32(acc[i]), d));
}

extern "C" __global__ void __launch_bounds__(256)
    lite_avg_bf16(uint16_t *acc, unsigned long long n, int nranks)
{
    const float d = (float)nranks;
    GRID_STRIDE(i, n) acc[i] = f32_to_bf16(div_f32(bf16_to_f32(acc[i]), d));
}
