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
#else
    return onnxc__vclamp(v, l, h);
#endif
}
#endif

/* The first n (1..VL) floats at p in a vector, the other lanes zero, never reading past them
 * (masked loads do not fault): a plane's last pixels read in place (onnxc_pw_rows, xpad == 2). */
#if defined(ONNXC_GEMM_VEC) && ONNXC_SGEMM_VL == 16 && defined(__AVX512F__)
#define ONNXC_PW_MASKED_TAIL 1
ONNXC_GEMM_INL onnxc_vf onnxc__pw_loadn(const float *p, int n)
{
    return (onnxc_vf)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), p);
}
#elif defined(ONNXC_DW_ROWS8)
#define ONNXC_PW_MASKED_TAIL 1
ONNXC_GEMM_INL onnxc_vf onnxc__pw_loadn(const float *p, int n)
{
    return __builtin_ia32_maskloadps256((const onnxc_vf *)p, onnxc__dw_mask((1 << n) - 1));
}
#endif
/* X's vector at p, the last of the tile (last != 0) holding only `tail` floats (0: whole) */
#if defined(ONNXC_PW_MASKED_TAIL)
#define ONNXC__PW_LOAD(p, last, tail) ((last) && (tail) ? onnxc__pw_loadn(p, tail) : onnxc__vload(p))
#else
#define ONNXC__PW_LOAD(p, last, tail) onnxc__vload(p)
#endif

ONNXC_GEMM_INL void onnxc__pw_tile(int64_t K, int64_t Rp, const float *wp, int64_t p, const float *x,
                                   int64_t ldx, const float *bias, const float *z, int64_t ldz, float *y,
                                   int64_t ldy, int rows, int nv, const float *clamp, int tail)
{
    (void)tail;
#if defined(ONNXC_GEMM_VEC)
    onnxc_vf acc[ONNXC_SGEMM_MR][ONNXC_SGEMM_NV];
    _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r) {
        const onnxc_vf b0 = onnxc_dw_splat(bias && r < rows ? bias[r] : 0.0f);
        _Pragma("GCC unroll 4") for (int v = 0; v < ONNXC_SGEMM_NV; ++v) if (v < nv) acc[r][v] = b0;
    }
    if (ONNXC_SGEMM_MR * nv < 8) {
        /* one vector (a plane's last few pixels): MR chains of multiply-adds would wait on each
         * other (AVX2: 6 chains, 4 cycles per k), so odd depths go to a second set */
        onnxc_vf odd[ONNXC_SGEMM_MR];
        _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r) odd[r] = (onnxc_vf){0};
        _Pragma("GCC unroll 1") for (int64_t pc = 0; pc < K; pc += ONNXC_SGEMM_KC) {
            const int64_t kc = K - pc < ONNXC_SGEMM_KC ? K - pc : ONNXC_SGEMM_KC;
            const float *w = wp + pc * Rp + p * ONNXC_SGEMM_MR * kc;
            const float *xk = x + pc * ldx;
            int64_t k = 0;
            for (; k + 2 <= kc; k += 2, w += 2 * ONNXC_SGEMM_MR, xk += 2 * ldx) {
                const onnxc_vf x0 = ONNXC__PW_LOAD(xk, 1, tail), x1 = ONNXC__PW_LOAD(xk + ldx, 1, tail);
                _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r) {
                    acc[r][0] += w[r] * x0;
                    odd[r] += w[ONNXC_SGEMM_MR + r] * x1;
                }
            }
            if (k < kc) {
                const onnxc_vf x0 = ONNXC__PW_LOAD(xk, 1, tail);
                _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r) acc[r][0] += w[r] * x0;
            }
        }
        _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r) acc[r][0] += odd[r];
    } else
    _Pragma("GCC unroll 1") for (int64_t pc = 0; pc < K; pc += ONNXC_SGEMM_KC) {
        const int64_t kc = K - pc < ONNXC_SGEMM_KC ? K - pc : ONNXC_SGEMM_KC;
        const float *w = wp + pc * Rp + p * ONNXC_SGEMM_MR * kc;
        const float *xk = x + pc * ldx;
        for (int64_t k = 0; k < kc; ++k, w += ONNXC_SGEMM_MR, xk += ldx) {
            onnxc_vf xv[ONNXC_SGEMM_NV];
            _Pragma("GCC unroll 4") for (int v = 0; v < ONNXC_SGEMM_NV; ++v) if (v < nv)
                xv[v] = ONNXC__PW_LOAD(xk + v * ONNXC_SGEMM_VL, v == nv - 1, tail);
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

#if defined(ONNXC_GEMM_VEC) && ONNXC_SGEMM_VL == 8 && ONNXC_SGEMM_MR == 6 && defined(__AVX__)
#include <immintrin.h>
/* One pixel of panel p (its 6 rows) with k across the vector lanes: the packed weights (6 per k)
 * read as they lie, times X's column repeated 6 times per k (4 broadcasts and 3 blends per 24
 * weights), two accumulator sets; s[r] = the sum for row r. The 6-row x 1-vector tile a few
 * last pixels took instead has only 6 multiply-add chains, 4 cycles per k whatever it holds:
 * on a 7 x 7 plane (49 = 3 x 16 + 1 pixels) the last pixel cost 2/3 of a 16-pixel tile. */
#define ONNXC__PW_COL_MAX 2      /* up to this many last pixels (4: 1.03-1.06x the time of the tile) */
ONNXC_GEMM_INL void onnxc__pw_col(int64_t K, int64_t Rp, const float *wp, int64_t p, const float *x,
                                  int64_t ldx, float s[6])
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, b0 = a0, b1 = a0, b2 = a0;
    float t[6] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#define ONNXC__PW_COL4(A0, A1, A2)                                                                 \
    do {                                                                                           \
        const __m256 x0 = _mm256_broadcast_ss(xk), x1 = _mm256_broadcast_ss(xk + ldx);             \
        const __m256 x2 = _mm256_broadcast_ss(xk + 2 * ldx), x3 = _mm256_broadcast_ss(xk + 3 * ldx); \
        A0 = _mm256_add_ps(A0, _mm256_mul_ps(_mm256_blend_ps(x0, x1, 0xC0), _mm256_loadu_ps(w)));  \
        A1 = _mm256_add_ps(A1, _mm256_mul_ps(_mm256_blend_ps(x1, x2, 0xF0), _mm256_loadu_ps(w + 8))); \
        A2 = _mm256_add_ps(A2, _mm256_mul_ps(_mm256_blend_ps(x2, x3, 0xFC), _mm256_loadu_ps(w + 16))); \
        w += 24;                                                                                   \
        xk += 4 * ldx;                                                                             \
    } while (0)
    for (int64_t pc = 0; pc < K; pc += ONNXC_SGEMM_KC) {
        const int64_t kc = K - pc < ONNXC_SGEMM_KC ? K - pc : ONNXC_SGEMM_KC;
        const float *w = wp + pc * Rp + p * ONNXC_SGEMM_MR * kc;
        const float *xk = x + pc * ldx;
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8) {
            ONNXC__PW_COL4(a0, a1, a2);
            ONNXC__PW_COL4(b0, b1, b2);
        }
        for (; k + 4 <= kc; k += 4)
            ONNXC__PW_COL4(a0, a1, a2);
        for (; k < kc; ++k, w += 6, xk += ldx)
            for (int r = 0; r < 6; ++r)
                t[r] += w[r] * xk[0];
    }
#undef ONNXC__PW_COL4
    float v[24];
    _mm256_storeu_ps(v, _mm256_add_ps(a0, b0));
    _mm256_storeu_ps(v + 8, _mm256_add_ps(a1, b1));
    _mm256_storeu_ps(v + 16, _mm256_add_ps(a2, b2));
    for (int r = 0; r < 6; ++r)
        s[r] = ((v[r] + v[r + 6]) + (v[r + 12] + v[r + 18])) + t[r];
}
#endif

/* xpad: 1: every row of X is readable up to a multiple of 16 columns past n (a padded copy, or
 * rows of whole vectors), so the last columns are read in place (no per-panel copy of K x NR
 * floats); 2: the same from X's own rows with the last vector's load masked to the columns left
 * (where masked loads exist, ONNXC_PW_MASKED_TAIL; else as 0); 0: copied. Inlined into each node, so
 * its constants (K, strides, bias / residual present) shape the tile loop: a shared copy left that
 * to GCC's per-call-site clones, whose register allocation changed from build to build (one build
 * spilled the X vectors; MobileNetV2 25% slower at one thread). */
ONNXC_GEMM_INL void onnxc_pw_rows(int64_t K, int64_t Rp, const float *wp, int64_t p, const float *x, int64_t ldx,
                                 int64_t n, const float *bias, const float *z, int64_t ldz, float *y, int64_t ldy,
                                 int rows, float *tmp, int xpad, const float *clamp)
{
    int64_t j = 0;
    for (; j + ONNXC_SGEMM_NR <= n; j += ONNXC_SGEMM_NR)
        onnxc__pw_tile(K, Rp, wp, p, x + j, ldx, bias, z ? z + j : z, ldz, y + j, ldy, rows, ONNXC_SGEMM_NV, clamp, 0);
    const int64_t rem = n - j;
#if !defined(ONNXC_PW_MASKED_TAIL)
    if (xpad == 2)
        xpad = 0;
#endif
    if (rem <= 0)
        return;
#if defined(ONNXC__PW_COL_MAX)
    if (rem <= ONNXC__PW_COL_MAX) {   /* a few last pixels: one at a time, k across the lanes */
        for (int64_t c = j; c < n; ++c) {
            float s[6];
            onnxc__pw_col(K, Rp, wp, p, x + c, ldx, s);
            for (int r = 0; r < rows; ++r) {
                float o = (bias ? bias[r] : 0.0f) + s[r];
                if (z)
                    o += z[r * ldz + c];
                o = clamp[0] > o ? clamp[0] : o;   /* onnxc__pw_clamp's comparisons (NaN passes) */
                y[r * ldy + c] = clamp[1] < o ? clamp[1] : o;
            }
        }
        return;
    }
#endif
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
    /* only the vectors that hold columns (a 4-column tail costs one vector of NV); the last one's
     * load masked to the columns in it when X is read in place (xpad == 2) */
    const int nvt = (int)((rem + ONNXC_SGEMM_VL - 1) / ONNXC_SGEMM_VL);
    const int tl = xpad == 2 ? (int)(rem % ONNXC_SGEMM_VL) : 0;
#else
    const int nvt = 1, tl = 0;
#endif
    if (nvt == 1)
        onnxc__pw_tile(K, Rp, wp, p, xt, ldt, bias, z ? zt : z, ONNXC_SGEMM_NR, yt, ONNXC_SGEMM_NR, rows, 1, clamp, tl);
#if ONNXC_SGEMM_NV == 3
    else if (nvt == 2)
        onnxc__pw_tile(K, Rp, wp, p, xt, ldt, bias, z ? zt : z, ONNXC_SGEMM_NR, yt, ONNXC_SGEMM_NR, rows, 2, clamp, tl);
#endif
    else   /* nvt == NV (NV <= 3) */
        onnxc__pw_tile(K, Rp, wp, p, xt, ldt, bias, z ? zt : z, ONNXC_SGEMM_NR, yt, ONNXC_SGEMM_NR, rows,
                       ONNXC_SGEMM_NV, clamp, tl);
    for (int r = 0; r < rows; ++r)
        memcpy(y + r * ldy + j, yt + r * ONNXC_SGEMM_NR, sizeof(float) * rem);
}
#endif
