/*
 * reduce_tmpl.h - the SIMD template of reduce.c, included by it once per vector width. Not a
 * header to include anywhere else: it has no include guard on purpose (each pass defines RW,
 * RSFX, RPFX, RATTR and RF16C first) and uses reduce.c's helpers.
 */
#ifndef RED_TEMPLATE_PASS
#error "reduce_tmpl.h is included only by reduce.c"
#endif

/* =============================================================================================
 * SIMD template, included twice from above with RW (vector bytes), RSFX (name suffix), RPFX
 * (implementation prefix), RATTR (target attribute) and RF16C (use F16C for f16) defined.
 * ============================================================================================= */

/* Every name defined here gets the pass's suffix, so both instantiations can coexist. */
#define RN(name)     RED_CAT(name, RSFX)
#define vf32         RN(vf32)
#define vf64         RN(vf64)
#define vi32         RN(vi32)
#define vu32         RN(vu32)
#define vi64         RN(vi64)
#define vu64         RN(vu64)
#define vi8          RN(vi8)
#define vu8          RN(vu8)
#define v_f32_canon  RN(v_f32_canon)
#define v_f64_canon  RN(v_f64_canon)
#define v_f32_op     RN(v_f32_op)
#define v_f64_op     RN(v_f64_op)
#define v_i8_op      RN(v_i8_op)
#define v_u8_op      RN(v_u8_op)
#define v_i32_op     RN(v_i32_op)
#define v_u32_op     RN(v_u32_op)
#define v_i64_op     RN(v_i64_op)
#define v_u64_op     RN(v_u64_op)
#define v_h2f        RN(v_h2f)
#define v_f2h        RN(v_f2h)
#define v_f2bf_hi    RN(v_f2bf_hi)
#define v_f16_op     RN(v_f16_op)
#define v_bf16_op    RN(v_bf16_op)
#define v_f32_div    RN(v_f32_div)
#define v_f64_div    RN(v_f64_div)
#define v_f16_div    RN(v_f16_div)
#define v_bf16_div   RN(v_bf16_div)
#define f16c_h2f     RN(f16c_h2f)
#define f16c_f2h     RN(f16c_f2h)
#define f16c_f16_op  RN(f16c_f16_op)
#define f16c_f16_div RN(f16c_f16_div)
#define vl_f32       RN(vl_f32)
#define vl_f64       RN(vl_f64)
#define vl_f16       RN(vl_f16)
#define vl_bf16      RN(vl_bf16)
#define vl_i8        RN(vl_i8)
#define vl_u8        RN(vl_u8)
#define vl_i32       RN(vl_i32)
#define vl_u32       RN(vl_u32)
#define vl_i64       RN(vl_i64)
#define vl_u64       RN(vl_u64)
#define vs_f32       RN(vs_f32)
#define vs_f64       RN(vs_f64)
#define vs_f16       RN(vs_f16)
#define vs_bf16      RN(vs_bf16)
#define vl_f16c      RN(vl_f16c)
#define vs_f16c      RN(vs_f16c)

typedef float vf32 __attribute__((vector_size(RW)));
typedef double vf64 __attribute__((vector_size(RW)));
typedef int32_t vi32 __attribute__((vector_size(RW)));
typedef uint32_t vu32 __attribute__((vector_size(RW)));
typedef int64_t vi64 __attribute__((vector_size(RW)));
typedef uint64_t vu64 __attribute__((vector_size(RW)));
typedef int8_t vi8 __attribute__((vector_size(RW)));
typedef uint8_t vu8 __attribute__((vector_size(RW)));

/* ---- f32 / f64 ---- */

AI vf32 v_f32_canon(const vf32 *pr)
{
    vf32 r = *pr;
    vi32 nan = (vi32)(r != r);
    return (vf32)(((vi32)r & ~nan) | (nan & (int32_t)QNAN_F32));
}

AI vf64 v_f64_canon(const vf64 *pr)
{
    vf64 r = *pr;
    vi64 nan = (vi64)(r != r);
    return (vf64)(((vi64)r & ~nan) | (nan & (int64_t)QNAN_F64));
}

/* MIN/MAX from the three exclusive masks lt, gt, eq; a lane in none of them is unordered. On
 * equal operands (which includes -0 == +0) MIN takes the OR of the bits (-0 wins) and MAX the
 * AND (+0 wins). */
AI vf32 v_f32_op(const vf32 *pa, const vf32 *pb, int op)
{
    vf32 a = *pa, b = *pb, t;
    vi32 ai = (vi32)a, bi = (vi32)b, r;
    vi32 lt, gt, eq;
    switch (op) {
    case LITE_PROD:
        t = a * b;
        return v_f32_canon(&t);
    case LITE_MIN:
    case LITE_MAX:
        lt = (vi32)(a < b);
        gt = (vi32)(a > b);
        eq = (vi32)(a == b);
        if (op == LITE_MIN)
            r = (lt & ai) | (gt & bi) | (eq & (ai | bi));
        else
            r = (gt & ai) | (lt & bi) | (eq & (ai & bi));
        r |= ~(lt | gt | eq) & (int32_t)QNAN_F32;
        return (vf32)r;
    default:
        t = a + b;
        return v_f32_canon(&t);
    }
}

AI vf64 v_f64_op(const vf64 *pa, const vf64 *pb, int op)
{
    vf64 a = *pa, b = *pb, t;
    vi64 ai = (vi64)a, bi = (vi64)b, r;
    vi64 lt, gt, eq;
    switch (op) {
    case LITE_PROD:
        t = a * b;
        return v_f64_canon(&t);
    case LITE_MIN:
    case LITE_MAX:
        lt = (vi64)(a < b);
        gt = (vi64)(a > b);
        eq = (vi64)(a == b);
        if (op == LITE_MIN)
            r = (lt & ai) | (gt & bi) | (eq & (ai | bi));
        else
            r = (gt & ai) | (lt & bi) | (eq & (ai & bi));
        r |= ~(lt | gt | eq) & (int64_t)QNAN_F64;
        return (vf64)r;
    default:
        t = a + b;
        return v_f64_canon(&t);
    }
}

AI vf32 v_f32_div(const vf32 *pa, float d)
{
    vf32 t = *pa / d;
    return v_f32_canon(&t);
}

AI vf64 v_f64_div(const vf64 *pa, double d)
{
    vf64 t = *pa / d;
    return v_f64_canon(&t);
}

/* ---- integers: SUM/PROD in the unsigned vector type (wraps), MIN/MAX by compare mask ---- */

#define DEF_V_INT(fn, V, UV)                                                                       \
    AI V fn(const V *pa, const V *pb, int op)                                                      \
    {                                                                                              \
        V a = *pa, b = *pb, m;                                                                     \
        switch (op) {                                                                              \
        case LITE_PROD:                                                                            \
            return (V)((UV)a * (UV)b);                                                             \
        case LITE_MIN:                                                                             \
            m = (V)(a < b);                                                                        \
            return (a & m) | (b & ~m);                                                             \
        case LITE_MAX:                                                                             \
            m = (V)(a > b);                                                                        \
            return (a & m) | (b & ~m);                                                             \
        default:                                                                                   \
            return (V)((UV)a + (UV)b);                                                             \
        }                                                                                          \
    }

DEF_V_INT(v_i8_op, vi8, vu8)
DEF_V_INT(v_u8_op, vu8, vu8)
DEF_V_INT(v_i32_op, vi32, vu32)
DEF_V_INT(v_u32_op, vu32, vu32)
DEF_V_INT(v_i64_op, vi64, vu64)
DEF_V_INT(v_u64_op, vu64, vu64)
#undef DEF_V_INT

/* ---- f16 / bf16 with integer SIMD. A vector of 32-bit lanes holds two 16-bit values per lane;
 * the low and high halves are split with shifts and masks, combined in f32 and packed back into
 * the same halves, so no lane-crossing shuffles are needed (and byte order does not matter:
 * both halves get the same treatment). The conversions give the scalar helpers' results for
 * every input. ---- */

/* f16 bits in the low 16 bits of each lane (upper bits zero) -> f32, exact. */
AI vf32 v_h2f(const vu32 *ph)
{
    vu32 u = *ph;
    vu32 sign = (u & 0x8000u) << 16;
    vi32 em = (vi32)(u & 0x7FFFu);
    vi32 e = em & 0x7C00;
    vu32 o = ((vu32)em << 13) + (112u << 23); /* rebias 15 -> 127 */
    vu32 special = (vu32)(e == 0x7C00);       /* Inf/NaN: exponent to 255 */
    vu32 nan = (vu32)(em > 0x7C00);           /* NaN: set the quiet bit */
    vu32 den = (vu32)(e == 0);                /* zero or subnormal */
    o += special & (112u << 23);
    o |= nan & 0x00400000u;
    /* zero/subnormal: o has exponent field 112; one more exponent step is 2^-14 + m * 2^-24,
     * and subtracting 2^-14 leaves m * 2^-24 exactly */
    vu32 sub = (vu32)((vf32)(o + (1u << 23)) - 0x1p-14f);
    o = (den & sub) | (~den & o);
    return (vf32)(o | sign);
}

/* f32 -> f16 bits (RNE) in the low 16 bits of each lane, upper bits zero. */
AI vu32 v_f2h(const vf32 *pf)
{
    vu32 x = (vu32)*pf;
    vu32 sign = (x >> 16) & 0x8000u;
    vi32 ax = (vi32)(x & 0x7FFFFFFFu);
    /* normal result: rebias, RNE on the 13 dropped bits */
    vu32 a = (vu32)ax - 0x38000000u;
    vu32 nrm = (a + 0xFFFu + ((a >> 13) & 1u)) >> 13;
    /* subnormal result: adding 0.5f aligns the value to 2^-24 units and rounds it RNE; the units
     * are then the low mantissa bits of the sum */
    vu32 sub = (vu32)((vf32)ax + 0.5f) - 0x3F000000u;
    /* NaN (quiet, top payload bits), or overflow / Inf */
    vu32 nan = (vu32)(ax > 0x7F800000);
    vu32 spc = 0x7C00u | (nan & (0x200u | (((vu32)ax & 0x7FFFFFu) >> 13)));
    vu32 big = (vu32)(ax >= 0x477FF000);
    vu32 small = (vu32)(ax < 0x38800000);
    vu32 r = (big & spc) | (small & sub) | (~(big | small) & nrm);
    return r | sign;
}

/* f32 -> bf16 (RNE), the result left in the upper 16 bits of the lane, lower bits zero.
 * Precondition: a NaN input is the canonical 0x7FC00000 (every caller canonicalises first), for
 * which the rounding formula itself gives the right answer, 0x7FC0; other NaNs would need the
 * (x >> 16) | 0x40 case of lite_f32_to_bf16. */
AI vu32 v_f2bf_hi(const vf32 *pf)
{
    vu32 x = (vu32)*pf;
    return (x + 0x7FFFu + ((x >> 16) & 1u)) & 0xFFFF0000u;
}

AI vu32 v_f16_op(const vu32 *pa, const vu32 *pb, int op)
{
    vu32 a_lo = *pa & 0xFFFFu, b_lo = *pb & 0xFFFFu, a_hi = *pa >> 16, b_hi = *pb >> 16;
    vf32 x = v_h2f(&a_lo), y = v_h2f(&b_lo);
    vf32 r = v_f32_op(&x, &y, op);
    vu32 lo = v_f2h(&r);
    x = v_h2f(&a_hi);
    y = v_h2f(&b_hi);
    r = v_f32_op(&x, &y, op);
    return lo | (v_f2h(&r) << 16);
}

AI vu32 v_bf16_op(const vu32 *pa, const vu32 *pb, int op)
{
    vf32 x = (vf32)(*pa << 16), y = (vf32)(*pb << 16); /* bf16 -> f32 is a 16-bit shift */
    vf32 r = v_f32_op(&x, &y, op);
    vu32 lo = v_f2bf_hi(&r) >> 16;
    x = (vf32)(*pa & 0xFFFF0000u);
    y = (vf32)(*pb & 0xFFFF0000u);
    r = v_f32_op(&x, &y, op);
    return lo | v_f2bf_hi(&r);
}

AI vu32 v_f16_div(const vu32 *pa, float d)
{
    vu32 a_lo = *pa & 0xFFFFu, a_hi = *pa >> 16;
    vf32 t = v_h2f(&a_lo) / d;
    t = v_f32_canon(&t);
    vu32 lo = v_f2h(&t);
    t = v_h2f(&a_hi) / d;
    t = v_f32_canon(&t);
    return lo | (v_f2h(&t) << 16);
}

AI vu32 v_bf16_div(const vu32 *pa, float d)
{
    vf32 t = (vf32)(*pa << 16) / d;
    t = v_f32_canon(&t);
    vu32 lo = v_f2bf_hi(&t) >> 16;
    t = (vf32)(*pa & 0xFFFF0000u) / d;
    t = v_f32_canon(&t);
    return lo | v_f2bf_hi(&t);
}

/* ---- loops and the implementation table ---- */

DEF_VLOOP(vl_f32, 4, vf32, v_f32_op, RATTR)
DEF_VLOOP(vl_f64, 8, vf64, v_f64_op, RATTR)
DEF_VLOOP(vl_f16, 2, vu32, v_f16_op, RATTR)
DEF_VLOOP(vl_bf16, 2, vu32, v_bf16_op, RATTR)
DEF_VLOOP(vl_i8, 1, vi8, v_i8_op, RATTR)
DEF_VLOOP(vl_u8, 1, vu8, v_u8_op, RATTR)
DEF_VLOOP(vl_i32, 4, vi32, v_i32_op, RATTR)
DEF_VLOOP(vl_u32, 4, vu32, v_u32_op, RATTR)
DEF_VLOOP(vl_i64, 8, vi64, v_i64_op, RATTR)
DEF_VLOOP(vl_u64, 8, vu64, v_u64_op, RATTR)
DEF_VSCALE(vs_f32, 4, vf32, v_f32_div, float, RATTR)
DEF_VSCALE(vs_f64, 8, vf64, v_f64_div, double, RATTR)
DEF_VSCALE(vs_f16, 2, vu32, v_f16_div, float, RATTR)
DEF_VSCALE(vs_bf16, 2, vu32, v_bf16_div, float, RATTR)

#if RF16C
/* f16 through F16C, 8 values per step: VCVTPH2PS is exact (a signalling NaN is made quiet),
 * VCVTPS2PH rounds with the immediate's round-to-nearest-even whatever MXCSR.RC says. */
typedef uint16_t vh8_f16c __attribute__((vector_size(16)));

AI RATTR vf32 f16c_h2f(const vh8_f16c *ph)
{
    return (vf32)_mm256_cvtph_ps((__m128i)*ph);
}

AI RATTR vh8_f16c f16c_f2h(const vf32 *pf)
{
    return (vh8_f16c)_mm256_cvtps_ph((__m256)*pf, _MM_FROUND_TO_NEAREST_INT);
}

AI RATTR vh8_f16c f16c_f16_op(const vh8_f16c *pa, const vh8_f16c *pb, int op)
{
    vf32 a = f16c_h2f(pa), b = f16c_h2f(pb);
    vf32 r = v_f32_op(&a, &b, op);
    return f16c_f2h(&r);
}

AI RATTR vh8_f16c f16c_f16_div(const vh8_f16c *pa, float d)
{
    vf32 t = f16c_h2f(pa) / d;
    t = v_f32_canon(&t);
    return f16c_f2h(&t);
}

DEF_VLOOP(vl_f16c, 2, vh8_f16c, f16c_f16_op, RATTR)
DEF_VSCALE(vs_f16c, 2, vh8_f16c, f16c_f16_div, float, RATTR)
DEF_IMPL_X(RPFX, RATTR, vl_f16c, vs_f16c)
#else
DEF_IMPL_X(RPFX, RATTR, vl_f16, vs_f16)
#endif

#undef RN
#undef vf32
#undef vf64
#undef vi32
#undef vu32
#undef vi64
#undef vu64
#undef vi8
#undef vu8
#undef v_f32_canon
#undef v_f64_canon
#undef v_f32_op
#undef v_f64_op
#undef v_i8_op
#undef v_u8_op
#undef v_i32_op
#undef v_u32_op
#undef v_i64_op
#undef v_u64_op
#undef v_h2f
#undef v_f2h
#undef v_f2bf_hi
#undef v_f16_op
#undef v_bf16_op
#undef v_f32_div
#undef v_f64_div
#undef v_f16_div
#undef v_bf16_div
#undef f16c_h2f
#undef f16c_f2h
#undef f16c_f16_op
#undef f16c_f16_div
#undef vl_f32
#undef vl_f64
#undef vl_f16
#undef vl_bf16
#undef vl_i8
#undef vl_u8
#undef vl_i32
#undef vl_u32
#undef vl_i64
#undef vl_u64
#undef vs_f32
#undef vs_f64
#undef vs_f16
#undef vs_bf16
#undef vl_f16c
#undef vs_f16c
