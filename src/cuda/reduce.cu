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

#include "reduce_ops.cuh"

using namespace lite_red;

namespace
{

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
LITE_REDUCE_KERNEL(lite_reduce_i8, I8)
LITE_REDUCE_KERNEL(lite_reduce_u8, U8)
LITE_REDUCE_KERNEL(lite_reduce_i32, I32)
LITE_REDUCE_KERNEL(lite_reduce_u32, U32)
LITE_REDUCE_KERNEL(lite_reduce_i64, I64)
LITE_REDUCE_KERNEL(lite_reduce_u64, U64)

#define GRID_STRIDE(i, n)                                                                          \
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;         \
         i < (n); i += (unsigned long long)gridDim.x * blockDim.x)

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
    GRID_STRIDE(i, n) acc[i] = div_f64(acc[i], d);
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
