/* onnxc_softmax.h: float Softmax along one contiguous row, in explicit vectors.
 *
 *   onnxc_softmax_rowsf(x, y, ld, rows, n)   per row: y = exp(x - max) / sum (rows ld apart)
 *
 * Same arithmetic as the generic template (templates/c/ops/softmax.c.j2): exp by the same
 * polynomial (within 1 ulp of expf, results below 2^-126 flush to 0), rounding to nearest by the
 * 1.5 * 2^23 trick (= nearbyintf in the default rounding mode); per lane float sums of at most 16
 * terms added up in double (the template sums every term in double); NaN or +inf in a row makes it
 * all NaN. The template's loop leaves the lane folds and the three passes to
 * the compiler; 512 attention rows of 128 took 39 us there, 26 here (rows interleaved four at a time:
 * one short row alone is a chain of dependent steps).
 */
#ifndef ONNXC_SOFTMAX_H
#define ONNXC_SOFTMAX_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "onnxc_gemm.h"
#include "onnxc_vmath.h"

#if defined(ONNXC_GEMM_VEC)
#define ONNXC__SVL ONNXC_SGEMM_VL
typedef int32_t onnxc__svi __attribute__((vector_size(ONNXC__SVL * 4)));
typedef double onnxc__svd __attribute__((vector_size(ONNXC__SVL * 8)));

static inline onnxc_vf onnxc__smx_sel(onnxc__svi m, onnxc_vf a, onnxc_vf b)   /* m ? a : b */
{
    return (onnxc_vf)(((onnxc__svi)a & m) | ((onnxc__svi)b & ~m));
}

static inline onnxc_vf onnxc__smx_expv(onnxc_vf t)
{
    const onnxc_vf zero = {0}, lo = zero - 87.0f;
    const onnxc__svi under = t < lo;
    const onnxc_vf tc = onnxc__smx_sel(under, lo, t);
    const onnxc_vf magic = zero + 12582912.0f;               /* 1.5 * 2^23: rounds to an integer */
    const onnxc_vf n = (tc * 1.44269504088896341f + magic) - magic;
    const onnxc_vf r = (tc - n * 0.693359375f) - n * -2.12194440e-4f;
    onnxc_vf q = zero + 1.9875691500e-4f;
    q = q * r + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    q = q * r * r + r + 1.0f;
    const onnxc__svi bits = (__builtin_convertvector(n, onnxc__svi) + 127) * 8388608;
    const onnxc_vf e = onnxc__smx_sel(under, zero, q * (onnxc_vf)bits);
    return onnxc__smx_sel(t != t, t, e);
}
#endif

/* rows [0, R) of n elements, R <= 4, rows `ld` apart: the rows' chains interleave (one 128-wide row
 * alone is a chain of dependent steps: max, exp, sum, reciprocal, scale) */
static inline void onnxc__softmax_rows(const float *x, float *y, int64_t ld, int R, int64_t n)
{
    float m[4];
    double s[4];
    int nan[4];
    int64_t nv = 0;
#if defined(ONNXC_GEMM_VEC)
    nv = n / ONNXC__SVL * ONNXC__SVL;
#endif
    for (int r = 0; r < R; ++r) {
        m[r] = -INFINITY;
        s[r] = 0;
        nan[r] = 0;
    }
#if defined(ONNXC_GEMM_VEC)
    if (nv > 0) {
        /* max without NaN (a > b ? a : b is one max instruction), NaN noted apart */
        onnxc_vf mv[4];
        onnxc__svi nanv[4];
        for (int r = 0; r < R; ++r) {
            mv[r] = onnxc__vload(x + r * ld);
            nanv[r] = mv[r] != mv[r];
        }
        for (int64_t d = ONNXC__SVL; d < nv; d += ONNXC__SVL)
            for (int r = 0; r < R; ++r) {
                const onnxc_vf v = onnxc__vload(x + r * ld + d);
                mv[r] = onnxc__smx_sel(v > mv[r], v, mv[r]);
                nanv[r] |= v != v;
            }
        for (int r = 0; r < R; ++r) {
            float lanes[ONNXC__SVL];
            onnxc__vstore(lanes, mv[r]);
            for (int u = 0; u < ONNXC__SVL; ++u) {
                m[r] = lanes[u] > m[r] ? lanes[u] : m[r];
                nan[r] |= nanv[r][u];
            }
        }
    }
#endif
    for (int r = 0; r < R; ++r) {
        for (int64_t d = nv; d < n; ++d) {
            const float v = x[r * ld + d];
            m[r] = v > m[r] ? v : m[r];
            nan[r] |= v != v;
        }
        if (nan[r])
            m[r] = NAN;   /* the whole row NaN */
    }
#if defined(ONNXC_GEMM_VEC)
    if (nv > 0) {
        onnxc__svd sv[4];
        onnxc_vf mb[4];
        for (int r = 0; r < R; ++r) {
            sv[r] = (onnxc__svd){0};
            mb[r] = (onnxc_vf){0} + m[r];
        }
        /* float partial sums of at most 16 terms per lane, added up in double */
        for (int64_t d0 = 0; d0 < nv; d0 += 16 * ONNXC__SVL) {
            const int64_t d1 = d0 + 16 * ONNXC__SVL < nv ? d0 + 16 * ONNXC__SVL : nv;
            onnxc_vf sf[4];
            for (int r = 0; r < R; ++r)
                sf[r] = (onnxc_vf){0};
            for (int64_t d = d0; d < d1; d += ONNXC__SVL)
                for (int r = 0; r < R; ++r) {
                    const onnxc_vf e = onnxc__smx_expv(onnxc__vload(x + r * ld + d) - mb[r]);
                    onnxc__vstore(y + r * ld + d, e);
                    sf[r] += e;
                }
            for (int r = 0; r < R; ++r)
                sv[r] += __builtin_convertvector(sf[r], onnxc__svd);
        }
        for (int r = 0; r < R; ++r)
            for (int u = 0; u < ONNXC__SVL; ++u)
                s[r] += sv[r][u];
    }
#endif
    for (int r = 0; r < R; ++r) {
#if defined(ONNXC_GEMM_VEC)
        if (nv < n) {   /* the tail through the same vector exp, in a padded copy */
            float t[ONNXC__SVL];
            for (int u = 0; u < ONNXC__SVL; ++u)
                t[u] = nv + u < n ? x[r * ld + nv + u] - m[r] : 0.0f;
            onnxc__vstore(t, onnxc__smx_expv(onnxc__vload(t)));
            for (int64_t d = nv; d < n; ++d) {
                y[r * ld + d] = t[d - nv];
                s[r] += t[d - nv];
            }
        }
#else
        for (int64_t d = 0; d < n; ++d) {   /* portable C: libm-free exp of onnxc_vmath.h */
            const float t = x[r * ld + d] - m[r];
            const float e = t != t ? t : onnxc_vexpf(t);
            y[r * ld + d] = e;
            s[r] += e;
        }
#endif
    }
    float inv[4];
    for (int r = 0; r < R; ++r)
        inv[r] = (float)(1.0 / s[r]);
    for (int r = 0; r < R; ++r)
        for (int64_t d = 0; d < n; ++d)
            y[r * ld + d] = y[r * ld + d] * inv[r];
}

/* rows [0, rows) of n contiguous elements each, `ld` apart */
static inline void onnxc_softmax_rowsf(const float *x, float *y, int64_t ld, int64_t rows, int64_t n)
{
    for (int64_t i = 0; i < rows; i += 4)
        onnxc__softmax_rows(x + i * ld, y + i * ld, ld, rows - i < 4 ? (int)(rows - i) : 4, n);
}

#endif

