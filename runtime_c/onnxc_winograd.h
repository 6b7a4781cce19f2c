/* onnxc Winograd convolution F(m x m, 3 x 3), stride 1 (onnxc/ops/conv.py picks it, the
 * template conv.c.j2 lays out the input and output transforms, unrolled from the matrices).
 *
 * Per block of Tb tiles: V_t (C x Tb, t < nn = (m+2)^2) from the input transform, packed as
 * the SGEMM micro-kernel's panels; O_t = U_t V_t with U_t packed at compile time
 * (passes/prepack.py); then the output transform, bias and epilogue. Packed layouts follow
 * onnxc__sgemm_prepack: per depth block pc of ONNXC_SGEMM_KC channels, panels of P lines
 * (tiles or output channels) stored k-major at pc * Lp + p * kc.
 */
#ifndef ONNXC_WINOGRAD_H
#define ONNXC_WINOGRAD_H

#include "onnxc_gemm.h"

/* Before the transform loops: their reads and writes never overlap (different scratch regions),
 * but GCC cannot prove it inside an OpenMP region and gives up on more than 10 alias checks. */
#if defined(__GNUC__) && !defined(__clang__)
#define ONNXC_WINO_IVDEP _Pragma("GCC ivdep")
#else
#define ONNXC_WINO_IVDEP
#endif
/* Loops over the tiles of one row segment (often fewer than 16): 8-lane vectors, so AVX-512
 * builds do not leave them all to the scalar remainder. */
#if defined(_OPENMP)
#define ONNXC_WINO_SHORT _Pragma("omp simd simdlen(8)")
#else
#define ONNXC_WINO_SHORT ONNXC_WINO_IVDEP
#endif

/* The swapped orientation (few tiles: 14x14 and 7x7 maps) streams U once per call from memory
 * (ResNet-18's U is ~88 MB, past any L3), each U panel serving only one or two tile panels: the
 * first tile of a panel prefetches the next panel (this many floats ahead) into L2. Measured
 * (Zen 5, ResNet-18, 1 thread): the 512-channel 7x7 convs 988-1013 -> 815-821 us, the
 * 256-channel 14x14 ones 595 -> 541, the model 0.95x time; at 2 threads within noise (0.98-1.02x
 * for 1, 2 and 4 panels ahead). */
#ifndef ONNXC_WINO_PF
#define ONNXC_WINO_PF (ONNXC_SGEMM_NR * ONNXC_SGEMM_KC)
#endif

/* Offset of V_t element (c, tile) in a block of Tb tiles packed in panels of P tiles. */
ONNXC_GEMM_INL int64_t onnxc_wino_voff(int64_t C, int64_t Tb, int64_t P, int64_t c, int64_t tile)
{
    const int64_t pc = c / ONNXC_SGEMM_KC * ONNXC_SGEMM_KC;
    const int64_t kc = onnxc__gmin(ONNXC_SGEMM_KC, C - pc);
    return pc * Tb + tile / P * P * kc + (c - pc) * P + tile % P;
}

/* One whole register tile of the plain orientation. Functions of their own: inlined into
 * onnxc_wino_gemm's loops, GCC's clones kept one B vector on the stack in the k loop (a store and
 * eight reloads per k). */
ONNXC_GEMM_FN void onnxc__wino_tile(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float beta);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc__wino_tile(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float beta)
{
    onnxc__sgemm_kernel(kc, a, b, c, ldc, 1, ONNXC_SGEMM_MR, ONNXC_SGEMM_NR, 1.0f, beta);
}
#endif

/* the swapped orientation's tile, stored transposed (mr x nr of it) */
ONNXC_GEMM_FN void onnxc__wino_tile_t(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                      int mr, int nr, float beta, int64_t pf);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc__wino_tile_t(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                      int mr, int nr, float beta, int64_t pf)
{
    onnxc__sgemm_kernel_pf(kc, a, b, c, 1, ldc, mr, nr, 1.0f, beta, pf);
}
#endif

/* O_t[m][tile] (row stride Tb, t at O + t * ostride) = U_t V_t for output channels [m0, m1)
 * and the first nb tiles of the block.
 * swapped = 0: U in MR-row panels (Mp rows), V in NR-tile panels; whole register tiles are
 *              stored (O has Mp rows and Tb, a multiple of NR, columns). m0: a multiple of MR.
 * swapped = 1: V in MR-tile panels, U in NR-column panels; tiles stored transposed. m0 and m1 (or
 *              M): multiples of ONNXC_WINO_MUNIT, a vector, so a range may start or end inside a
 *              panel (the tile reads its vectors from the panel's rows of NR): threads that split
 *              few channels get even shares, not whole panels (a 512-channel layer: 256 + 256
 *              instead of 288 + 224). */
#if defined(ONNXC_GEMM_VEC)
#define ONNXC_WINO_MUNIT ONNXC_SGEMM_VL
#else
#define ONNXC_WINO_MUNIT ONNXC_SGEMM_NR   /* the plain tile reads whole panel rows */
#endif
ONNXC_GEMM_FN void onnxc_wino_gemm(int swapped, int64_t nn, int64_t M, int64_t Mp, int64_t C, int64_t Tb,
                                   int64_t nb, const float *U, int64_t ustride, const float *V,
                                   int64_t vstride, float *O, int64_t ostride, int64_t m0, int64_t m1);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_wino_gemm(int swapped, int64_t nn, int64_t M, int64_t Mp, int64_t C, int64_t Tb,
                                   int64_t nb, const float *U, int64_t ustride, const float *V,
                                   int64_t vstride, float *O, int64_t ostride, int64_t m0, int64_t m1)
{
    for (int64_t t = 0; t < nn; ++t) {
        const float *const Ut = U + t * ustride, *const Vt = V + t * vstride;
        float *const Ot = O + t * ostride;
        for (int64_t pc = 0; pc < C; pc += ONNXC_SGEMM_KC) {
            const int64_t kc = onnxc__gmin(ONNXC_SGEMM_KC, C - pc);
            const float beta = pc == 0 ? 0.0f : 1.0f;
            if (!swapped) {
                for (int64_t i = m0; i < m1; i += ONNXC_SGEMM_MR)
                    for (int64_t j = 0; j < nb; j += ONNXC_SGEMM_NR)
                        onnxc__wino_tile(kc, Ut + pc * Mp + i * kc, Vt + pc * Tb + j * kc, Ot + i * Tb + j, Tb, beta);
            } else {
                const int64_t mend = onnxc__gmin(m1, M);
                for (int64_t j = m0, je; j < mend; j = je) {
                    const int64_t pj = j / ONNXC_SGEMM_NR * ONNXC_SGEMM_NR;   /* j's panel */
                    je = onnxc__gmin(pj + ONNXC_SGEMM_NR, mend);
                    for (int64_t i = 0; i < nb; i += ONNXC_SGEMM_MR)
                        onnxc__wino_tile_t(kc, Vt + pc * Tb + i * kc, Ut + pc * Mp + pj * kc + (j - pj),
                                           Ot + j * Tb + i, Tb, (int)onnxc__gmin(ONNXC_SGEMM_MR, nb - i),
                                           (int)(je - j), beta, i == 0 ? ONNXC_WINO_PF : 0);
                }
            }
        }
    }
}
#endif

/* The direct convolution of one m x m output tile of channel oc (rows oh0.., columns ow0..)
 * into y (element (i, j) at y[(i * m + j) * ld]): used where the input transform met a non-finite value, so NaN and
 * inf come out exactly as the direct product gives them. */
ONNXC_GEMM_FN void onnxc_wino_direct_tile(int64_t C, int64_t IH, int64_t IW, int64_t PH, int64_t PW, int m,
                                          const float *x, const float *w, int64_t oh0, int64_t ow0,
                                          float *y, int64_t ld);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_wino_direct_tile(int64_t C, int64_t IH, int64_t IW, int64_t PH, int64_t PW, int m,
                                          const float *x, const float *w, int64_t oh0, int64_t ow0,
                                          float *y, int64_t ld)
{
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < m; ++j) {
            float acc = 0.0f;
            for (int64_t c = 0; c < C; ++c)
                for (int kh = 0; kh < 3; ++kh) {
                    const int64_t ih = oh0 + i - PH + kh;
                    if (ih < 0 || ih >= IH)
                        continue;
                    for (int kw = 0; kw < 3; ++kw) {
                        const int64_t iw = ow0 + j - PW + kw;
                        if (iw >= 0 && iw < IW)
                            acc += w[(c * 3 + kh) * 3 + kw] * x[(c * IH + ih) * IW + iw];
                    }
                }
            y[(i * m + j) * ld] = acc;
        }
}
#endif

#endif
