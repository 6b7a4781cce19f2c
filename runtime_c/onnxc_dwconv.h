/* onnxc depthwise and pointwise convolution helpers (templates/c/ops/conv.c.j2).
 *
 * Depthwise: per channel, the zero-padded input plane is split into stride phases (ops/conv.py
 * depthwise_phases) so that every tap reads its input at a constant offset from the "wide"
 * output position q = oh * RW + ow; a vector of consecutive positions then reads consecutive
 * inputs for any stride. Positions with ow >= OW are computed and dropped by the epilogue.
 */
#ifndef ONNXC_DWCONV_H
#define ONNXC_DWCONV_H

#include "onnxc_gemm.h"

/* Stride-1 depthwise on small planes (templates/c/ops/_conv_dw_flat.c.j2): masked loads of 16
 * output positions per tap straight from the unpadded plane, no copy. Other ISAs keep the phase
 * kernel below. */
#if defined(ONNXC_GEMM_VEC) && defined(__AVX512F__)
#include <immintrin.h>
#define ONNXC_DW_FLAT 1
#endif

/* Depthwise at stride 1 or 2 with 8-float vectors straight from the input rows
 * (templates/c/ops/_conv_dw_rows8.c.j2): a tap's inputs for 8 outputs are one load, or at stride 2
 * the even lanes of two; those at a row's ends masked (AVX's vmaskmovps: masked lanes read as
 * zero and never fault). */
#if defined(ONNXC_GEMM_VEC) && ONNXC_SGEMM_VL == 8 && defined(__AVX__)
#define ONNXC_DW_ROWS8 1
/* lanes i with bit i of m set (m a constant: folds to one vector constant) */
ONNXC_GEMM_INL onnxc_v8i onnxc__dw_mask(int m)
{
    return (onnxc_v8i){-(m & 1), -(m >> 1 & 1), -(m >> 2 & 1), -(m >> 3 & 1),
                       -(m >> 4 & 1), -(m >> 5 & 1), -(m >> 6 & 1), -(m >> 7 & 1)};
}

ONNXC_GEMM_INL onnxc_vf onnxc__dw_loadm(const float *p, int m)
{
    if (m == 255)
        return onnxc__vload(p);
    if (m == 0)
        return (onnxc_vf){0};
    return __builtin_ia32_maskloadps256((const onnxc_vf *)p, onnxc__dw_mask(m));
}

/* the first n lanes (m = 2^n - 1, a constant: the stores a copy of n floats compiles to; AMD's
 * masked vector store is microcoded, ~10x a plain one) */
typedef float onnxc__dw_v4f __attribute__((vector_size(16)));
ONNXC_GEMM_INL void onnxc__dw_storem(float *p, int m, onnxc_vf v)
{
    if (m == 255) {
        onnxc__vstore(p, v);
        return;
    }
    const int n = __builtin_ctz(~(unsigned)m);
    onnxc__dw_v4f q = {v[0], v[1], v[2], v[3]};
    if (n & 4) {
        memcpy(p, &q, 4 * sizeof(float));
        q = (onnxc__dw_v4f){v[4], v[5], v[6], v[7]};
        p += 4;
    }
    if (n & 2) {
        memcpy(p, &q, 2 * sizeof(float));
        q = (onnxc__dw_v4f){q[2], q[3], q[2], q[3]};
        p += 2;
    }
    if (n & 1)
        memcpy(p, &q, sizeof(float));
}

/* p[0], p[2], .. p[14]: lo / hi the lanes of p[0..7] / p[8..15] that may be read */
ONNXC_GEMM_INL onnxc_vf onnxc__dw_even(const float *p, int lo, int hi)
{
    /* in-lane pairs (vshufps), then the 64-bit halves in order (vpermpd): two shuffles where
     * the one two-source permute took two vpermd and a blend */
    const onnxc_vf t = ONNXC__SHUF(onnxc__dw_loadm(p, lo), onnxc__dw_loadm(p + 8, hi), 0, 2, 8, 10, 4, 6, 12, 14);
    return ONNXC__SHUF(t, t, 0, 1, 4, 5, 2, 3, 6, 7);
}
#endif

#if defined(ONNXC_GEMM_VEC)
#define ONNXC_DW_VL ONNXC_SGEMM_VL
/* a in every lane: one broadcast. (`a - 0` is a for every a, -0 and NaN included, and folds
 * away; `(onnxc_vf){0} + a` costs a scalar add first, and filling the lanes one by one became
 * a chain of 5 inserts on AVX2.) */
ONNXC_GEMM_INL onnxc_vf onnxc_dw_splat(float a)
{
    return a - (onnxc_vf){0};
}
#endif

/* Pointwise (1x1, stride 1, no pad) with weights packed at compile time like onnxc_sgemm_wpack
 * (passes/prepack.py, not swapped: per depth block of ONNXC_SGEMM_KC, panels of MR output
 * channels stored k-major, Rp = channels rounded up to MR). One panel p of MR channels times n
 * pixel columns of X (row stride ldx), read in place (no packing): Y = bias + W X (+ Z) stored
 * once from the register tile. tmp: K * NR + 2 * MR * NR floats for the last partial tile. */
#define ONNXC_PW_TMP_FLOATS(K) ((int64_t)(K) * ONNXC_SGEMM_NR + 2 * ONNXC_SGEMM_MR * ONNXC_SGEMM_NR)

#if defined(ONNXC_GEMM_VEC)
/* clamp = {lo, hi}: the fused Relu / Clip, lo > v ? lo : v then hi < v ? hi : v (NaN passes;
 * -INFINITY and INFINITY when absent), read as vectors once per tile after the products. clamp
 * is often a constant array, and GCC would hoist its vectors out of the tile loop: the registers
 * they hold then cost the K loop its X vectors (each multiply-add reading X from memory, 12
 * loads + 6 broadcasts per k: load-bound at 2/3 of the FMA peak on AVX2). The empty asm hides
 * the pointer's target, so the loads stay after the products. */
ONNXC_GEMM_INL void onnxc__pw_bounds(const float *clamp, onnxc_vf *lo, onnxc_vf *hi)
{
#if defined(__GNUC__)
    __asm__ volatile("" : "+r"(clamp));
#endif
    *lo = onnxc_dw_splat(clamp[0]);
    *hi = onnxc_dw_splat(clamp[1]);
}

ONNXC_GEMM_INL onnxc_vf onnxc__pw_clamp(onnxc_vf v, onnxc_vf l, onnxc_vf h)
{
#if defined(ONNXC_DW_FLAT) && ONNXC_SGEMM_VL == 16
    return (onnxc_vf)_mm512_min_ps((__m512)h, _mm512_max_ps((__m512)l, (__m512)v));
#elif ONNXC_SGEMM_VL == 8 && defined(__AVX__)
    /* maxps(a, b) is a > b ? a : b, minps(a, b) a < b ? a : b: the same comparisons, 2 instructions
     * and 2 registers where the compare-and-blend took 4 of each */
    return __builtin_ia32_minps256(h, __builtin_ia32_maxps256(l, v));
#else
    typedef int32_t onnxc__pwvi __attribute__((vector_size(ONNXC_SGEMM_VL * 4)));
    onnxc__pwvi m = l > v;
    v = (onnxc_vf)(((onnxc__pwvi)l & m) | ((onnxc__pwvi)v & ~m));
    m = h < v;
    return (onnxc_vf)(((onnxc__pwvi)h & m) | ((onnxc__pwvi)v & ~m));
#endif
}
#endif

ONNXC_GEMM_INL void onnxc__pw_tile(int64_t K, int64_t Rp, const float *wp, int64_t p, const float *x,
                                   int64_t ldx, const float *bias, const float *z, int64_t ldz, float *y,
                                   int64_t ldy, int rows, int nv, const float *clamp)
{
#if defined(ONNXC_GEMM_VEC)
    onnxc_vf acc[ONNXC_SGEMM_MR][ONNXC_SGEMM_NV];
    _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r) {
        const onnxc_vf b0 = onnxc_dw_splat(bias && r < rows ? bias[r] : 0.0f);
        _Pragma("GCC unroll 4") for (int v = 0; v < ONNXC_SGEMM_NV; ++v) if (v < nv) acc[r][v] = b0;
    }
    _Pragma("GCC unroll 1") for (int64_t pc = 0; pc < K; pc += ONNXC_SGEMM_KC) {
        const int64_t kc = K - pc < ONNXC_SGEMM_KC ? K - pc : ONNXC_SGEMM_KC;
        const float *w = wp + pc * Rp + p * ONNXC_SGEMM_MR * kc;
        const float *xk = x + pc * ldx;
        for (int64_t k = 0; k < kc; ++k, w += ONNXC_SGEMM_MR, xk += ldx) {
            onnxc_vf xv[ONNXC_SGEMM_NV];
            _Pragma("GCC unroll 4") for (int v = 0; v < ONNXC_SGEMM_NV; ++v) if (v < nv)
                xv[v] = onnxc__vload(xk + v * ONNXC_SGEMM_VL);
            _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r) {
                const float ws = w[r];   /* scalar x vector: a broadcast from memory, as in the SGEMM */
                _Pragma("GCC unroll 4") for (int v = 0; v < ONNXC_SGEMM_NV; ++v) if (v < nv) acc[r][v] += ws * xv[v];
            }
        }
    }
    onnxc_vf lo, hi;
    onnxc__pw_bounds(clamp, &lo, &hi);
    /* unrolled (rows <= MR): a loop over `rows` indexes acc at run time, which spills it */
    _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r) if (r < rows)
        _Pragma("GCC unroll 4") for (int v = 0; v < ONNXC_SGEMM_NV; ++v) if (v < nv) {
            onnxc_vf o = acc[r][v];
            if (z)
                o += onnxc__vload(z + r * ldz + v * ONNXC_SGEMM_VL);
            onnxc__vstore(y + r * ldy + v * ONNXC_SGEMM_VL, onnxc__pw_clamp(o, lo, hi));
        }
#else
    float acc[ONNXC_SGEMM_MR][ONNXC_SGEMM_NR];
    for (int r = 0; r < ONNXC_SGEMM_MR; ++r)
        for (int j = 0; j < ONNXC_SGEMM_NR; ++j) acc[r][j] = bias && r < rows ? bias[r] : 0.0f;
    for (int64_t pc = 0; pc < K; pc += ONNXC_SGEMM_KC) {
        const int64_t kc = K - pc < ONNXC_SGEMM_KC ? K - pc : ONNXC_SGEMM_KC;
        const float *w = wp + pc * Rp + p * ONNXC_SGEMM_MR * kc;
        for (int64_t k = 0; k < kc; ++k)
            for (int r = 0; r < ONNXC_SGEMM_MR; ++r)
                for (int j = 0; j < ONNXC_SGEMM_NR; ++j) acc[r][j] += w[k * ONNXC_SGEMM_MR + r] * x[(pc + k) * ldx + j];
    }
    for (int r = 0; r < rows; ++r)
        for (int j = 0; j < ONNXC_SGEMM_NR; ++j) {
            float o = acc[r][j] + (z ? z[r * ldz + j] : 0.0f);
            o = clamp[0] > o ? clamp[0] : o;
            y[r * ldy + j] = clamp[1] < o ? clamp[1] : o;
        }
#endif
}

/* xpad: every row of X is readable up to a multiple of 16 columns past n (a padded copy), so the
 * last columns are read in place (no per-panel copy of K x NR floats). Inlined into each node, so
 * its constants (K, strides, bias / residual present) shape the tile loop: a shared copy left that
 * to GCC's per-call-site clones, whose register allocation changed from build to build (one build
 * spilled the X vectors; MobileNetV2 25% slower at one thread). */
ONNXC_GEMM_INL void onnxc_pw_rows(int64_t K, int64_t Rp, const float *wp, int64_t p, const float *x, int64_t ldx,
                                 int64_t n, const float *bias, const float *z, int64_t ldz, float *y, int64_t ldy,
                                 int rows, float *tmp, int xpad, const float *clamp)
{
    int64_t j = 0;
    for (; j + ONNXC_SGEMM_NR <= n; j += ONNXC_SGEMM_NR)
        onnxc__pw_tile(K, Rp, wp, p, x + j, ldx, bias, z ? z + j : z, ldz, y + j, ldy, rows, ONNXC_SGEMM_NV, clamp);
    const int64_t rem = n - j;
    if (rem <= 0)
        return;
    /* the last columns: copied into a zero-padded tile (no read past X's or Z's rows) */
    float *const zt = tmp + K * ONNXC_SGEMM_NR, *const yt = zt + ONNXC_SGEMM_MR * ONNXC_SGEMM_NR;
    const float *xt = x + j;
    int64_t ldt = ldx;
    if (!xpad) {
        float *const xc = tmp;
        for (int64_t k = 0; k < K; ++k)
            for (int c = 0; c < ONNXC_SGEMM_NR; ++c)
                xc[k * ONNXC_SGEMM_NR + c] = c < rem ? x[k * ldx + j + c] : 0.0f;
        xt = xc;
        ldt = ONNXC_SGEMM_NR;
    }
    if (z)
        for (int r = 0; r < rows; ++r) {
            memcpy(zt + r * ONNXC_SGEMM_NR, z + r * ldz + j, sizeof(float) * rem);
            memset(zt + r * ONNXC_SGEMM_NR + rem, 0, sizeof(float) * (ONNXC_SGEMM_NR - rem));
        }
#if defined(ONNXC_GEMM_VEC)
    /* only the vectors that hold columns (a 4-column tail costs one vector of NV) */
    const int nvt = (int)((rem + ONNXC_SGEMM_VL - 1) / ONNXC_SGEMM_VL);
#else
    const int nvt = 1;
#endif
    if (nvt == 1)
        onnxc__pw_tile(K, Rp, wp, p, xt, ldt, bias, z ? zt : z, ONNXC_SGEMM_NR, yt, ONNXC_SGEMM_NR, rows, 1, clamp);
#if ONNXC_SGEMM_NV == 3
    else if (nvt == 2)
        onnxc__pw_tile(K, Rp, wp, p, xt, ldt, bias, z ? zt : z, ONNXC_SGEMM_NR, yt, ONNXC_SGEMM_NR, rows, 2, clamp);
#endif
    else
        onnxc__pw_tile(K, Rp, wp, p, xt, ldt, bias, z ? zt : z, ONNXC_SGEMM_NR, yt, ONNXC_SGEMM_NR, rows,
                       ONNXC_SGEMM_NV, clamp);
    for (int r = 0; r < rows; ++r)
        memcpy(y + r * ldy + j, yt + r * ONNXC_SGEMM_NR, sizeof(float) * rem);
}
#endif
