/*
 * reduce.h - elementwise reduction kernels for the deterministic collectives. Not installed.
 *
 * The exact semantics (per-step rounding for f16/bf16, NaN and signed-zero rules, integer
 * wrap-around, AVG) are specified in docs/REDUCTION.md; the summary:
 *
 *   - lite_reduce_inplace computes acc[i] = acc[i] OP in[i] for i in [0, count). Every element is
 *     combined independently, so the result depends only on the order in which the caller
 *     combines buffers, never on chunking, alignment, or which code path (scalar, SIMD) runs:
 *     all paths are bit-identical for every input.
 *   - Integers: SUM and PROD wrap modulo 2^bits (two's complement for signed types); MIN/MAX
 *     compare as signed or unsigned according to the dtype.
 *   - f32/f64: one IEEE-754 operation per step, round-to-nearest-even.
 *   - f16/bf16: each step converts both operands to f32 exactly, combines them in f32 and rounds
 *     the result back once with round-to-nearest-even ("per-step rounding").
 *   - Any NaN result is written as the canonical quiet NaN of the dtype (f32 0x7FC00000,
 *     f64 0x7FF8000000000000, f16 0x7E00, bf16 0x7FC0): the payload and sign of NaN inputs are not
 *     propagated, so NaN results are bit-identical whatever the operand order or code path.
 *   - MIN/MAX: if either operand is NaN the result is NaN. -0 and +0 compare equal but
 *     min(-0, +0) = min(+0, -0) = -0 and max(-0, +0) = max(+0, -0) = +0.
 *   - AVG is SUM followed by lite_reduce_scale_avg (division by the number of ranks).
 *   - Every op is commutative bit for bit (a OP b has the bits of b OP a); none is associative
 *     for floats, so the collectives fix the order of combination.
 *
 * The kernels assume the default floating-point environment (round-to-nearest-even, no
 * flush-to-zero / denormals-are-zero); the library never changes it.
 */
#ifndef LITE_REDUCE_H
#define LITE_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "litetx/litetx.h"

/* 0 if (dtype, op) is a supported reduction, -EINVAL otherwise (unknown dtype or op, or
 * LITE_AVG on an integer dtype: AVG is defined for f32, f64, f16 and bf16 only). */
int lite_reduce_check(int dtype, int op);

/*
 * acc[i] = acc[i] OP in[i] for i in [0, count). op is LITE_SUM, LITE_PROD, LITE_MIN or LITE_MAX;
 * LITE_AVG is treated as LITE_SUM (the caller divides once at the end with
 * lite_reduce_scale_avg). The pointers need no alignment: any byte address works. acc and in
 * may be the same buffer but must not otherwise overlap. An invalid (dtype, op) leaves acc
 * untouched; validate with lite_reduce_check first.
 */
void lite_reduce_inplace(void *acc, const void *in, size_t count, int dtype, int op);

/*
 * The division step of LITE_AVG: acc[i] = acc[i] / nranks for a float dtype. f32 and f64 divide
 * in their own precision (one correctly rounded division; nranks is converted to the dtype
 * first, which is exact for nranks <= 2^24 in f32). f16 and bf16 convert to f32, divide by
 * (float)nranks and round back once. NaN results are canonical. Returns 0, or -EINVAL (and
 * leaves acc untouched) for a non-float dtype or nranks < 1.
 */
int lite_reduce_scale_avg(void *acc, size_t count, int dtype, int nranks);

/*
 * Exact conversions between f32 and the 16-bit float formats, independent of the floating-point
 * environment.
 *   lite_f16_to_f32   exact for every value; a NaN keeps its sign and payload and is made quiet
 *                     (as F16C's VCVTPH2PS does).
 *   lite_bf16_to_f32  exact: the 16-bit left shift (a NaN's bits are kept as they are).
 *   lite_f32_to_f16   round-to-nearest-even, correct for subnormal results and f32 subnormal
 *   lite_f32_to_bf16  inputs, overflow to +-Inf; a NaN keeps its sign and top payload bits and
 *                     is made quiet (as VCVTPS2PH does; bf16: (x >> 16) | 0x40).
 */
float lite_f16_to_f32(uint16_t h);
uint16_t lite_f32_to_f16(float f);
float lite_bf16_to_f32(uint16_t h);
uint16_t lite_f32_to_bf16(float f);

/*
 * Implementation selection, for tests and benchmarks. AUTO (what lite_reduce_inplace uses)
 * picks AVX2 when the CPU has AVX2 and F16C, else VEC. SCALAR is the plain element-by-element
 * reference; VEC is the portable SIMD code (GCC vector extensions, baseline ISA); AVX2 is the
 * same code compiled for AVX2, with F16C conversions for f16. All are bit-identical.
 */
enum lite_reduce_impl {
    LITE_REDUCE_IMPL_AUTO = 0,
    LITE_REDUCE_IMPL_SCALAR = 1,
    LITE_REDUCE_IMPL_VEC = 2,
    LITE_REDUCE_IMPL_AVX2 = 3,
    LITE_REDUCE_IMPL_COUNT = 4
};

/* 1 if impl can run on this build and CPU, else 0. */
int lite_reduce_impl_available(int impl);
/* The implementation AUTO resolves to (never AUTO itself). */
int lite_reduce_impl_auto(void);
const char *lite_reduce_impl_name(int impl);
/* As lite_reduce_inplace / lite_reduce_scale_avg with a given implementation; an unavailable
 * impl falls back to SCALAR. */
void lite_reduce_inplace_impl(int impl, void *acc, const void *in, size_t count, int dtype, int op);
int lite_reduce_scale_avg_impl(int impl, void *acc, size_t count, int dtype, int nranks);

#endif /* LITE_REDUCE_H */
