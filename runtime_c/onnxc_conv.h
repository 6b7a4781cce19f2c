/* onnxc direct convolution for small images (LeNet-size layers: few channels, 5x5 taps): the
 * packed-GEMM path's im2col, packing and register-tile padding cost more than the products there.
 *
 * Stride 1, 2-D (1-D as H = 1). The caller copies X zero-padded into planes of PH x PW floats
 * (onnxc_conv_pad) and computes on "wide" output positions q = oh * PW + ow with ow < PW: the
 * input of tap (c, kh, kw) for position q is then plane_c[q + kh * DH * PW + kw * DW], so a
 * vector of consecutive positions reads consecutive inputs (no im2col). Positions with
 * ow >= OW are garbage and dropped when the caller compacts the wide output (its epilogue).
 * Each tile: MR output channels x NV vectors of positions in registers, one broadcast weight
 * per channel and tap.
 */
#ifndef ONNXC_CONV_H
#define ONNXC_CONV_H

#include "onnxc_gemm.h"

#if defined(ONNXC_GEMM_VEC)
#define ONNXC_CONV_VL ONNXC_SGEMM_VL
#if ONNXC_SGEMM_VL >= 16
#define ONNXC_CONV_NV 4           /* 6 x 4 accumulators + 4 inputs of 32 registers */
#else
#define ONNXC_CONV_NV 2           /* 6 x 2 + 2 of 16 */
#endif

#define ONNXC__CONV_TILE(NAME, MR, NV)                                                            \
    ONNXC_GEMM_INL void NAME(int64_t C, int64_t KH, int64_t KW, int64_t plane, int64_t dh,       \
                             int64_t dw, const float *x, const float *w, int64_t K, float *y,    \
                             int64_t ldy)                                                        \
    {                                                                                            \
        onnxc_vf acc[MR][NV];                                                         \
        _Pragma("GCC unroll 8") for (int r = 0; r < MR; ++r)                                     \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v) acc[r][v] = (onnxc_vf){0}; \
        for (int64_t c = 0; c < C; ++c)                                                          \
            for (int64_t kh = 0; kh < KH; ++kh) {                                                \
                const float *xr = x + c * plane + kh * dh;                                       \
                const float *wr = w + (c * KH + kh) * KW;                                        \
                for (int64_t kw = 0; kw < KW; ++kw) {                                            \
                    onnxc_vf xv[NV];                                                  \
                    _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v)              \
                        xv[v] = onnxc__vload(xr + kw * dw + v * ONNXC_CONV_VL);                  \
                    _Pragma("GCC unroll 8") for (int r = 0; r < MR; ++r) {                       \
                        const float a = wr[r * K + kw];                                          \
                        _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v)          \
                            acc[r][v] += a * xv[v];                                              \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
        _Pragma("GCC unroll 8") for (int r = 0; r < MR; ++r)                                     \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v)                          \
            onnxc__vstore(y + r * ldy + v * ONNXC_CONV_VL, acc[r][v]);                           \
    }

ONNXC__CONV_TILE(onnxc__conv_t6, 6, ONNXC_CONV_NV)
ONNXC__CONV_TILE(onnxc__conv_t4, 4, ONNXC_CONV_NV)
ONNXC__CONV_TILE(onnxc__conv_t2, 2, ONNXC_CONV_NV)
ONNXC__CONV_TILE(onnxc__conv_t1, 1, ONNXC_CONV_NV)
/* the last positions of a row: one vector (less work on positions past Q) */
ONNXC__CONV_TILE(onnxc__conv_t6v, 6, 1)
ONNXC__CONV_TILE(onnxc__conv_t4v, 4, 1)
ONNXC__CONV_TILE(onnxc__conv_t2v, 2, 1)
ONNXC__CONV_TILE(onnxc__conv_t1v, 1, 1)
#define ONNXC_CONV_QB (ONNXC_CONV_NV * ONNXC_CONV_VL)   /* positions per tile */

/* ---- channel-vectorised variant: 16 output channels per block (weights prepacked at compile
 * time as [block][c][kh][kw][16], channels past M zero), P positions of one output row per
 * tile: one weight load per tap for P broadcast inputs, and no garbage positions (the wide
 * variant computes OH * PW of them). Results go to the same wide output rows. */
#define ONNXC_CONVC_NV (16 / ONNXC_CONV_VL)          /* vectors per channel block */
#define ONNXC_CONVC_PMAX (12 / ONNXC_CONVC_NV)       /* positions per tile: <= 12 accumulators */
#define ONNXC__CONVC_TILE(NAME, P)                                                              \
    ONNXC_GEMM_INL void NAME(int64_t C, int64_t KH, int64_t KW, int64_t plane, int64_t dh,       \
                             int64_t dw, const float *x, const float *w, float *y, int64_t ldy,  \
                             int64_t mvalid)                                                     \
    {                                                                                            \
        onnxc_vf acc[P][ONNXC_CONVC_NV];                                                         \
        _Pragma("GCC unroll 16") for (int q = 0; q < P; ++q)                                     \
        _Pragma("GCC unroll 4") for (int v = 0; v < ONNXC_CONVC_NV; ++v) acc[q][v] = (onnxc_vf){0}; \
        for (int64_t c = 0; c < C; ++c)                                                          \
            for (int64_t kh = 0; kh < KH; ++kh) {                                                \
                const float *xr = x + c * plane + kh * dh;                                       \
                const float *wr = w + (c * KH + kh) * KW * 16;                                   \
                for (int64_t kw = 0; kw < KW; ++kw) {                                            \
                    onnxc_vf wv[ONNXC_CONVC_NV];                                                 \
                    _Pragma("GCC unroll 4") for (int v = 0; v < ONNXC_CONVC_NV; ++v)             \
                        wv[v] = onnxc__vload(wr + kw * 16 + v * ONNXC_CONV_VL);                  \
                    const float *xs = xr + kw * dw;                                              \
                    _Pragma("GCC unroll 16") for (int q = 0; q < P; ++q) {                       \
                        const float a = xs[q];                                                   \
                        _Pragma("GCC unroll 4") for (int v = 0; v < ONNXC_CONVC_NV; ++v)         \
                            acc[q][v] += a * wv[v];                                              \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
        float t[P][16];                                                                          \
        _Pragma("GCC unroll 16") for (int q = 0; q < P; ++q)                                     \
        _Pragma("GCC unroll 4") for (int v = 0; v < ONNXC_CONVC_NV; ++v)                         \
            onnxc__vstore(&t[q][v * ONNXC_CONV_VL], acc[q][v]);                                  \
        for (int64_t m = 0; m < mvalid; ++m)                                                     \
            _Pragma("GCC unroll 16") for (int q = 0; q < P; ++q) y[m * ldy + q] = t[q][m];       \
    }

ONNXC__CONVC_TILE(onnxc__convc_1, 1)
ONNXC__CONVC_TILE(onnxc__convc_2, 2)
ONNXC__CONVC_TILE(onnxc__convc_3, 3)
ONNXC__CONVC_TILE(onnxc__convc_4, 4)
ONNXC__CONVC_TILE(onnxc__convc_5, 5)
ONNXC__CONVC_TILE(onnxc__convc_6, 6)
ONNXC__CONVC_TILE(onnxc__convc_7, 7)
ONNXC__CONVC_TILE(onnxc__convc_8, 8)
ONNXC__CONVC_TILE(onnxc__convc_9, 9)
ONNXC__CONVC_TILE(onnxc__convc_10, 10)
ONNXC__CONVC_TILE(onnxc__convc_11, 11)
ONNXC__CONVC_TILE(onnxc__convc_12, 12)
#else
#define ONNXC_CONV_QB 8
#endif

/* yw (M rows of ldy floats, real positions oh * PW + ow only) = W * xp, with the weights `wc`
 * prepacked in channel blocks of 16 (see above). Without vector support: M rows one by one. */
ONNXC_GEMM_FN void onnxc_conv_direct_c(int64_t M, int64_t C, int64_t KH, int64_t KW, int64_t PH, int64_t PW,
                                       int64_t DH, int64_t DW, int64_t OH, int64_t OW, const float *xp,
                                       const float *wc, float *yw, int64_t ldy);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_conv_direct_c(int64_t M, int64_t C, int64_t KH, int64_t KW, int64_t PH, int64_t PW,
                                       int64_t DH, int64_t DW, int64_t OH, int64_t OW, const float *xp,
                                       const float *wc, float *yw, int64_t ldy)
{
    const int64_t plane = PH * PW, K = C * KH * KW;
#if defined(ONNXC_GEMM_VEC)
    const int64_t nch = (OW + ONNXC_CONVC_PMAX - 1) / ONNXC_CONVC_PMAX;   /* near-equal chunks of a row */
    for (int64_t mb = 0; mb < M; mb += 16) {
        const float *w = wc + mb * K;
        const int64_t mv = M - mb < 16 ? M - mb : 16;
        for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ch = 0; ch < nch; ++ch) {
                const int64_t o0 = ch * OW / nch, o1 = (ch + 1) * OW / nch;
                const float *x = xp + oh * PW + o0;
                float *y = yw + mb * ldy + oh * PW + o0;
                switch (o1 - o0) {
#define ONNXC__CONVC_CASE(P) case P: onnxc__convc_##P(C, KH, KW, plane, DH * PW, DW, x, w, y, ldy, mv); break;
                ONNXC__CONVC_CASE(1) ONNXC__CONVC_CASE(2) ONNXC__CONVC_CASE(3) ONNXC__CONVC_CASE(4)
                ONNXC__CONVC_CASE(5) ONNXC__CONVC_CASE(6) ONNXC__CONVC_CASE(7) ONNXC__CONVC_CASE(8)
                ONNXC__CONVC_CASE(9) ONNXC__CONVC_CASE(10) ONNXC__CONVC_CASE(11) ONNXC__CONVC_CASE(12)
#undef ONNXC__CONVC_CASE
                default: break;
                }
            }
    }
#else
    for (int64_t m = 0; m < M; ++m)
        for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
                float s = 0.0f;
                for (int64_t c = 0; c < C; ++c)
                    for (int64_t kh = 0; kh < KH; ++kh)
                        for (int64_t kw = 0; kw < KW; ++kw)
                            s += wc[(m / 16 * K + (c * KH + kh) * KW + kw) * 16 + m % 16] *
                                 xp[c * plane + (oh + kh * DH) * PW + ow + kw * DW];
                yw[m * ldy + oh * PW + ow] = s;
            }
#endif
}
#endif

/* Wide positions rounded up to whole tiles (the row length of the wide output). */
#define ONNXC_CONV_WIDE(Q) (((Q) + ONNXC_CONV_QB - 1) / ONNXC_CONV_QB * ONNXC_CONV_QB)

/* xp (C planes of PH x PW, then `slack` zeros) = X (C planes of IH x IW) padded by pt rows on top
 * and pl columns on the left. */
ONNXC_GEMM_INL void onnxc_conv_pad(const float *x, int64_t C, int64_t IH, int64_t IW, int64_t PH, int64_t PW,
                                   int64_t pt, int64_t pl, float *xp, int64_t slack)
{
    if (PH == IH && PW == IW) {
        memcpy(xp, x, sizeof(float) * (size_t)(C * IH * IW));
    } else {
        memset(xp, 0, sizeof(float) * (size_t)(C * PH * PW));
        for (int64_t c = 0; c < C; ++c)
            for (int64_t h = 0; h < IH; ++h)
                memcpy(xp + (c * PH + pt + h) * PW + pl, x + (c * IH + h) * IW, sizeof(float) * (size_t)IW);
    }
    memset(xp + C * PH * PW, 0, sizeof(float) * (size_t)slack);
}

/* yw (M rows of ldy = ONNXC_CONV_WIDE(Q) floats) = W (M x C x KH x KW) * xp on positions [0, Q) */
ONNXC_GEMM_FN void onnxc_conv_direct(int64_t M, int64_t C, int64_t KH, int64_t KW, int64_t PH, int64_t PW,
                                     int64_t DH, int64_t DW, int64_t Q, const float *xp, const float *w,
                                     float *yw);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_conv_direct(int64_t M, int64_t C, int64_t KH, int64_t KW, int64_t PH, int64_t PW,
                                     int64_t DH, int64_t DW, int64_t Q, const float *xp, const float *w,
                                     float *yw)
{
    const int64_t K = C * KH * KW, ldy = ONNXC_CONV_WIDE(Q), plane = PH * PW;
#if defined(ONNXC_GEMM_VEC)
#define ONNXC__CONV_ROWS(SUF)                                                                   \
    do {                                                                                        \
        int64_t m = 0;                                                                          \
        for (; m + 6 <= M; m += 6)                                                              \
            onnxc__conv_t6##SUF(C, KH, KW, plane, DH * PW, DW, xp + q, w + m * K, K, yw + m * ldy + q, ldy); \
        if (m + 4 <= M) {                                                                       \
            onnxc__conv_t4##SUF(C, KH, KW, plane, DH * PW, DW, xp + q, w + m * K, K, yw + m * ldy + q, ldy); \
            m += 4;                                                                             \
        }                                                                                       \
        if (m + 2 <= M) {                                                                       \
            onnxc__conv_t2##SUF(C, KH, KW, plane, DH * PW, DW, xp + q, w + m * K, K, yw + m * ldy + q, ldy); \
            m += 2;                                                                             \
        }                                                                                       \
        if (m < M)                                                                              \
            onnxc__conv_t1##SUF(C, KH, KW, plane, DH * PW, DW, xp + q, w + m * K, K, yw + m * ldy + q, ldy); \
    } while (0)
    int64_t q = 0;
    for (; q + ONNXC_CONV_QB <= Q || (q < Q && Q - q > ONNXC_CONV_QB - ONNXC_CONV_VL); q += ONNXC_CONV_QB)
        ONNXC__CONV_ROWS();
    for (; q < Q; q += ONNXC_CONV_VL)
        ONNXC__CONV_ROWS(v);
#undef ONNXC__CONV_ROWS
#else
    for (int64_t m = 0; m < M; ++m)
        for (int64_t q = 0; q < ldy; ++q) {
            float s = 0.0f;
            for (int64_t c = 0; c < C; ++c)
                for (int64_t kh = 0; kh < KH; ++kh)
                    for (int64_t kw = 0; kw < KW; ++kw)
                        s += w[m * K + (c * KH + kh) * KW + kw] * xp[c * plane + q + kh * DH * PW + kw * DW];
            yw[m * ldy + q] = s;
        }
#endif
}
#endif

#endif
