/* onnxc direct convolution for strided layers with few input channels (the first conv of
 * mobilenet / resnet: K = C x KH x KW of 27 or 147), where im2col writes K rows per output pixel.
 *
 * The caller copies a band of input rows into stride-phase planes (ops/conv.py strided_layout):
 * phase (a, b) of channel c holds padded element (row * SH + a, col * SW + b) at row * RW + col,
 * so tap k = (c, kh, kw) of output (oh, ow) is at the constant offset offs[k] from the wide
 * position (oh - oh0) * RW + ow and a vector of consecutive outputs reads consecutive inputs.
 * Tiles: MR output channels (weights packed at compile time as [panel][K][MR], channels past M
 * zero) x NV vectors of one output row; Y = bias + sum stored straight into the output rows.
 * Deep sums (K > ONNXC_SGEMM_KC: deeper layers with long output rows) add up per depth block
 * like the SGEMM, so their rounding error stays the same as im2col's. The first tile of each
 * weight panel prefetches the next panel into L2: a deep layer's weights stream from memory
 * with only a few tiles per panel (ResNet-18, 1 thread: 0.985x time; 2 threads within noise).
 */
#ifndef ONNXC_CONV_STRIDED_H
#define ONNXC_CONV_STRIDED_H

#include "onnxc_gemm.h"

#if defined(ONNXC_GEMM_VEC)
#define ONNXC__CSTR_TILE(NAME, NV)                                                               \
    ONNXC_GEMM_INL void NAME(int64_t K, const float *restrict w, const int32_t *restrict offs,   \
                             const float *restrict x, const float *bias, int mr, float *y,      \
                             int64_t ldy, int64_t n, int64_t pf)                                \
    {                                                                                           \
        onnxc_vf acc[ONNXC_SGEMM_MR][NV];                                                       \
        float tot[ONNXC_SGEMM_MR][NV * ONNXC_SGEMM_VL]; /* sum of the depth blocks (memory) */  \
        for (int64_t k0 = 0; k0 < K; k0 += ONNXC_SGEMM_KC) {                                    \
            const int64_t k1 = K - k0 < ONNXC_SGEMM_KC ? K : k0 + ONNXC_SGEMM_KC;               \
            _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r)                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v) acc[r][v] = (onnxc_vf){0};    \
            for (int64_t k = k0; k < k1; ++k, w += ONNXC_SGEMM_MR) {                            \
                if (pf)                                                                         \
                    __builtin_prefetch(w + pf, 0, 2);                                           \
                const float *xk = x + offs[k];                                                  \
                onnxc_vf xv[NV];                                                                \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v)                            \
                    xv[v] = onnxc__vload(xk + v * ONNXC_SGEMM_VL);                              \
                _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r) {             \
                    const float a = w[r];                                                       \
                    _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v) acc[r][v] += a * xv[v]; \
                }                                                                               \
            }                                                                                   \
            _Pragma("GCC unroll 16") for (int r = 0; r < ONNXC_SGEMM_MR; ++r)                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v) {                              \
                float *const t = tot[r] + v * ONNXC_SGEMM_VL;                                   \
                onnxc__vstore(t, k0 ? onnxc__vload(t) + acc[r][v] : acc[r][v]);                 \
            }                                                                                   \
        }                                                                                       \
        for (int r = 0; r < mr; ++r) {                                                          \
            const float b = bias ? bias[r] : 0.0f;                                              \
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v) {                              \
                const onnxc_vf o = onnxc__vload(tot[r] + v * ONNXC_SGEMM_VL) + b;               \
                const int64_t j = v * ONNXC_SGEMM_VL;                                           \
                if (j + ONNXC_SGEMM_VL <= n) {                                                  \
                    onnxc__vstore(y + r * ldy + j, o);                                          \
                } else if (j < n) {   /* the row's last columns */                              \
                    float t[ONNXC_SGEMM_VL];                                                    \
                    onnxc__vstore(t, o);                                                        \
                    memcpy(y + r * ldy + j, t, sizeof(float) * (size_t)(n - j));                \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }
ONNXC__CSTR_TILE(onnxc__cstr_t1, 1)
ONNXC__CSTR_TILE(onnxc__cstr_t2, 2)
ONNXC__CSTR_TILE(onnxc__cstr_tn, ONNXC_SGEMM_NV)

#endif

/* Y rows [0, rows) of the band (output channel m, row r, column ow at y[m * ldy + r * OW + ow])
 * = bias + W * band, for channels [c0, M) (c0 a multiple of MR). xb: the band's phase planes
 * (row stride RW); offs: K tap offsets; wp: [panel of MR][K][MR]. Reads up to a vector past
 * OW + the largest offset. */
ONNXC_GEMM_FN void onnxc_conv_strided(int64_t c0, int64_t M, int64_t K, const float *wp, const int32_t *offs,
                                      const float *xb, int64_t RW, int64_t rows, int64_t OW,
                                      const float *bias, float *y, int64_t ldy);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_conv_strided(int64_t c0, int64_t M, int64_t K, const float *wp, const int32_t *offs,
                                      const float *xb, int64_t RW, int64_t rows, int64_t OW,
                                      const float *bias, float *y, int64_t ldy)
{
#if defined(ONNXC_GEMM_VEC)
    const int64_t pf = ONNXC_SGEMM_MR * K;   /* the first tile of a panel prefetches the next panel */
#endif
    for (int64_t p = c0 / ONNXC_SGEMM_MR; p * ONNXC_SGEMM_MR < M; ++p) {
        const int64_t m0 = p * ONNXC_SGEMM_MR;
        const int mr = (int)(M - m0 < ONNXC_SGEMM_MR ? M - m0 : ONNXC_SGEMM_MR);
        const float *const w = wp + m0 * K;
        const float *const bp = bias ? bias + m0 : NULL;
        for (int64_t r = 0; r < rows; ++r) {
            const float *const xr = xb + r * RW;
            float *const yr = y + m0 * ldy + r * OW;
#if defined(ONNXC_GEMM_VEC)
            /* whole tiles, but a last tile plus at most a vector (112 = 48 + 48 + 16) as two
             * tiles of two vectors: a one-vector tile loads as much as it multiplies */
            for (int64_t j = 0; j < OW;) {
                const int64_t left = OW - j, pfj = r == 0 && j == 0 ? pf : 0;
                if (left > 2 * ONNXC_SGEMM_VL && !(left > ONNXC_SGEMM_NR && left <= ONNXC_SGEMM_NR + ONNXC_SGEMM_VL)) {
                    onnxc__cstr_tn(K, w, offs, xr + j, bp, mr, yr + j, ldy, left, pfj);
                    j += ONNXC_SGEMM_NR;
                } else if (left > ONNXC_SGEMM_VL) {
                    onnxc__cstr_t2(K, w, offs, xr + j, bp, mr, yr + j, ldy, left, pfj);
                    j += 2 * ONNXC_SGEMM_VL;
                } else {
                    onnxc__cstr_t1(K, w, offs, xr + j, bp, mr, yr + j, ldy, left, pfj);
                    j += ONNXC_SGEMM_VL;
                }
            }
#else
            for (int i = 0; i < mr; ++i)
                for (int64_t ow = 0; ow < OW; ++ow) {
                    float s = 0.0f;
                    for (int64_t k0 = 0; k0 < K; k0 += ONNXC_SGEMM_KC) {
                        float d = 0.0f;
                        for (int64_t k = k0; k < K && k < k0 + ONNXC_SGEMM_KC; ++k)
                            d += w[k * ONNXC_SGEMM_MR + i] * xr[offs[k] + ow];
                        s = k0 ? s + d : d;
                    }
                    yr[i * ldy + ow] = s + (bp ? bp[i] : 0.0f);
                }

#endif
        }
    }
}
#endif


/* The same product for short output rows (14, 7: a row tile would be mostly padding): tiles of
 * NR consecutive wide positions q = r * RW + ow span rows; only ow < OW is copied out (runs of a
 * row). Channels [c0, M). Reads up to NR past the band's last output + the largest offset. */
ONNXC_GEMM_FN void onnxc_conv_strided_wide(int64_t c0, int64_t M, int64_t K, const float *wp, const int32_t *offs,
                                           const float *xb, int64_t RW, int64_t rows, int64_t OW,
                                           const float *bias, float *y, int64_t ldy);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_conv_strided_wide(int64_t c0, int64_t M, int64_t K, const float *wp, const int32_t *offs,
                                           const float *xb, int64_t RW, int64_t rows, int64_t OW,
                                           const float *bias, float *y, int64_t ldy)
{
#if defined(ONNXC_GEMM_VEC)
    const int64_t Q = (rows - 1) * RW + OW;   /* one past the last output's wide position */
    const int64_t pf = ONNXC_SGEMM_MR * K;     /* the first tile of a panel prefetches the next panel */
    float t[ONNXC_SGEMM_MR * ONNXC_SGEMM_NR];
    for (int64_t m0 = c0; m0 < M; m0 += ONNXC_SGEMM_MR) {
        const int mr = (int)(M - m0 < ONNXC_SGEMM_MR ? M - m0 : ONNXC_SGEMM_MR);
        const float *const w = wp + m0 * K;
        const float *const bp = bias ? bias + m0 : NULL;
        for (int64_t q0 = 0; q0 < Q; q0 += ONNXC_SGEMM_NR) {
            const int64_t qe = Q - q0 < ONNXC_SGEMM_NR ? Q : q0 + ONNXC_SGEMM_NR;
            if (qe - q0 <= ONNXC_SGEMM_VL)          /* the last positions: narrower tiles */
                onnxc__cstr_t1(K, w, offs, xb + q0, bp, mr, t, ONNXC_SGEMM_NR, ONNXC_SGEMM_VL, q0 ? 0 : pf);
            else if (qe - q0 <= 2 * ONNXC_SGEMM_VL)
                onnxc__cstr_t2(K, w, offs, xb + q0, bp, mr, t, ONNXC_SGEMM_NR, 2 * ONNXC_SGEMM_VL, q0 ? 0 : pf);
            else
                onnxc__cstr_tn(K, w, offs, xb + q0, bp, mr, t, ONNXC_SGEMM_NR, ONNXC_SGEMM_NR, q0 ? 0 : pf);
            for (int64_t q = q0; q < qe;) {
                const int64_t r = q / RW, ow = q % RW;
                if (ow >= OW) {   /* the wide columns past the row */
                    q += RW - ow;
                    continue;
                }
                const int64_t len = OW - ow < qe - q ? OW - ow : qe - q;
                for (int i = 0; i < mr; ++i)
                    memcpy(y + (m0 + i) * ldy + r * OW + ow, t + i * ONNXC_SGEMM_NR + (q - q0), sizeof(float) * (size_t)len);
                q += len;
            }
        }
    }
#else
    onnxc_conv_strided(c0, M, K, wp, offs, xb, RW, rows, OW, bias, y, ldy);
#endif
}
#endif

#endif
