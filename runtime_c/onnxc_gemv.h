/* onnxc few-row products over a K x N right operand: batch-1 Gemm/MatMul layers, RNN steps.
 *
 *   onnxc_sgemv_kn(M, N, K, alpha, A, lda, B, ldb, nread, beta, C, ldc, nt)
 *       C (M x N) = alpha * A (M x K) * B (K x N) + beta * C     (beta == 0: C not read)
 *
 * B is K x N row-major; `nread` columns of each B row may be read (nread >= N: padding lets the
 * last vector be whole).
 *
 *   onnxc_sgemv_strips(M, N, K, alpha, A, lda, Bs, sw, beta, C, ldc, nt)
 *   onnxc_sgemv_strips_dir(..., nt, reverse)   the strips back to front when reverse != 0
 *       the same with B prepacked at compile time (passes/prepack.py, ONNXC_GEMV_STRIPS_FLOATS):
 *       column strips of sw columns (a multiple of ONNXC_GEMV_PAD), strip s holding K rows of
 *       its width (the last one's width rounded up to ONNXC_GEMV_PAD, zeros) contiguously at
 *       Bs + s * sw * K. With sw = ONNXC_GEMV_TILE_W (what prepack.py picks when it can ask the
 *       compiler) a 1-row product reads the whole operand front to back as one stream: about
 *       15-40% faster than strided rows, and 64 instead of 128 columns on AVX2 read a batch-1
 *       MLP's weights 0.84x the time (two half-row passes per strip before).
 *
 * Columns are vectorised: per k one A element is broadcast and multiplied with NV vectors of
 * B's row k, so there is no horizontal sum and no packing; B streams once per row group
 * (column strips outside, row groups inside: a strip stays in L1/L2 for every row).
 * No workspace. Small products never open an OpenMP region: even a region with if(0) costs
 * 0.2-0.3 us, more than a batch-1 layer's whole product.
 */
#ifndef ONNXC_GEMV_H
#define ONNXC_GEMV_H

#include "onnxc_gemm.h"

/* multiply-adds below which a GEMV stays on one thread: 256 KB of B; above it each thread streams
 * its own columns (two cores read L3 at ~1.6x one core's rate: mlp batch 1 27 -> 13 us at 2
 * threads); below it a fork/join (0.53 us on Zen 4) costs about what the split saves: a 512-column
 * product over 128 KB of B took 1.08 us on one thread and 1.30 on two, over 256 KB 2.32 and 1.88.
 * Counted over the rows read: a batch-1 layer after a Relu, or over a sparse input (an MNIST
 * image's 170 nonzero pixels of 784: 87K multiply-adds), splits once the rows it reads do (512 KB
 * here before: that MLP took 7.9 us at 2 threads, 7.2 with the split; 1.11-1.18x the time in
 * minutes when this 2-vCPU host's second core gave no gain to anything). onnxc_threads.h takes
 * one thread for the whole run where even that does not pay. */
#ifndef ONNXC_GEMV_PAR_MIN
#define ONNXC_GEMV_PAR_MIN 65536
#endif
/* 1-row tiles prefetch B this many bytes of their stream ahead: weights of a batch-1 layer stream
 * from L3, and the hardware prefetcher alone left ~20% of the bandwidth unused (mlp batch 1: 25.9
 * -> 23.7 us at 2 KB ahead, AVX-512 Xeon). On Zen 3, with other tenants on the L3, 8 KB ahead took
 * 0.92-0.94x the time of 1 KB (6 KB 0.94-0.95x, 16 KB 0.99-1.0x); from DRAM all the same. On Zen 4
 * (AVX-512 and AVX2 code alike) 4 KB was 0.96-0.99x the time of 8 KB. Memory latency times
 * bandwidth: ~4 KB from L3, ~8 KB from DRAM. */
#ifndef ONNXC_GEMV_PF_BYTES
#define ONNXC_GEMV_PF_BYTES 4096
#endif
#ifndef ONNXC_GEMV_PF
#define ONNXC_GEMV_PF (ONNXC_GEMV_PF_BYTES / (32 * ONNXC_SGEMM_VL))   /* rows of a 1 x 8-vector tile */
#endif
/* ... one prefetch per this many vectors of a row: a prefetch for every vector (as many
 * prefetches as loads) left the Zen 4 layer below the stream's rate: the mlp benchmark's 784 x 512
 * layer 20.3 -> 17.2 us (AVX-512, one prefetch per 128 bytes) and 22.1 -> 19.8 us (AVX2 code, one
 * per 64-byte line, where every line had two) at 1 thread; none at all was 16.6 and 20.7 */
#ifndef ONNXC_GEMV_PF_STEP
#define ONNXC_GEMV_PF_STEP 2
#endif
/* ... and this many nonzero positions ahead when A's zeros are skipped (the hardware prefetcher
 * no longer sees one stream: a 512 x 512 layer with half its inputs zero 0.78x the dense time at
 * 4 ahead, 0.76x at 8 or 12; a quarter zero 0.99x at 4, 0.96x at 8) */
#ifndef ONNXC_GEMV_NZ_PF
#define ONNXC_GEMV_NZ_PF 8
#endif
#if ONNXC_GEMV_NZ_PF > 14
#error "ONNXC_GEMV_NZ_PF: at most 14 (the nonzero list's slack, ops/gemm.py's GEMV_NZ_SLACK)"
#endif
#define ONNXC_GEMV_PAD 16          /* strips' width rounded up to this many floats (prepack) */
#define ONNXC_GEMV_STRIPS_FLOATS(N, K) ((int64_t)(K) * (((N) + ONNXC_GEMV_PAD - 1) / ONNXC_GEMV_PAD * ONNXC_GEMV_PAD))

#if defined(ONNXC_GEMM_VEC)
#define ONNXC__GV ONNXC_SGEMM_VL
#ifndef ONNXC__GEMV_RB
#if ONNXC_SGEMM_VL >= 16
#define ONNXC__GEMV_RB 6           /* rows per group: 6 x 4 accumulators of 32 registers */
#else
#define ONNXC__GEMV_RB 2           /* 16 registers */
#endif
#endif
/* the widest 1-row tile (8 vectors): prepack.py's strip width for this build */
#define ONNXC_GEMV_TILE_W (8 * ONNXC__GV)
/* Gemm rows up to which the strips beat the packed SGEMM (prepack.py asks; a plain integer, it
 * reads the expansion): with 2-row groups every 2 rows stream the strips again, at about half the
 * SGEMM tiles' multiply-add rate (AVX2, an MLP, paired: 2 rows 0.85-0.88x the time through the
 * SGEMM, 3-8 rows 0.62-0.70x) */
#if ONNXC__GEMV_RB >= 6
#define ONNXC_GEMV_MAX_M 8
#else
#define ONNXC_GEMV_MAX_M 1
#endif
#else
#define ONNXC_GEMV_TILE_W 128
#define ONNXC_GEMV_MAX_M 8
#endif
#if defined(ONNXC_GEMM_VEC)

/* One tile: MR rows x NV vectors of columns, k split over KS accumulator sets (FMA latency:
 * few independent chains otherwise). ncols < NV * VL: only that many columns are stored. */
#define ONNXC__GEMV_TILE(NAME, MR, NV, KS) ONNXC__GEMV_TILE_AT(NAME, MR, NV, KS, 0)
/* NZ = 1: the tile's k runs over the positions nz[0..K) (the nonzero elements of a 1-row A,
 * nz padded with ONNXC_GEMV_NZ_PF readable entries for the prefetch), in increasing order */
#define ONNXC__GEMV_TILE_AT(NAME, MR, NV, KS, NZ)                                               \
    ONNXC_GEMM_INL void NAME(int64_t K, float alpha, const float *A, int64_t lda, const float *B, \
                             int64_t ldb, float beta, float *C, int64_t ldc, int64_t ncols,     \
                             const int32_t *nz)                                                \
    {                                                                                          \
        (void)nz;                                                                              \
        onnxc_vf acc[KS][MR][NV];                                                              \
        _Pragma("GCC unroll 4") for (int s = 0; s < KS; ++s)                                   \
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r)                                   \
        _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v) acc[s][r][v] = (onnxc_vf){0};     \
        int64_t k = 0;                                                                         \
        const int64_t kend = K / KS * KS;                                                      \
        for (; k < kend; k += KS) {                                                            \
            _Pragma("GCC unroll 4") for (int s = 0; s < KS; ++s) {                             \
                const int64_t kk = NZ ? nz[k + s] : k + s;                                     \
                const float *b = B + kk * ldb;                                                 \
                onnxc_vf bv[NV];                                                               \
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v)                           \
                    bv[v] = onnxc__vload(b + v * ONNXC__GV);                                   \
                if (ONNXC_GEMV_PF && MR == 1 && NV == 8) {                                     \
                    const float *pf = NZ ? B + nz[k + s + ONNXC_GEMV_NZ_PF] * ldb              \
                                         : b + ONNXC_GEMV_PF * ldb;                            \
                    _Pragma("GCC unroll 8") for (int v = 0; v < NV; v += ONNXC_GEMV_PF_STEP)   \
                        __builtin_prefetch(pf + v * ONNXC__GV, 0, 3);                          \
                }                                                                              \
                _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r) {                         \
                    const float a = A[r * lda + kk];                                           \
                    _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v)                       \
                        acc[s][r][v] += a * bv[v];                                             \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        for (; k < K; ++k) {                                                                   \
            const int64_t kk = NZ ? nz[k] : k;                                                 \
            const float *b = B + kk * ldb;                                                     \
            _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r) {                             \
                const float a = A[r * lda + kk];                                               \
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v)                           \
                    acc[0][r][v] += a * onnxc__vload(b + v * ONNXC__GV);                       \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r)                                   \
        _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v) {                                 \
            onnxc_vf t = acc[0][r][v];                                                         \
            _Pragma("GCC unroll 4") for (int s = 1; s < KS; ++s) t += acc[s][r][v];            \
            acc[0][r][v] = alpha * t;                                                          \
        }                                                                                      \
        if (ncols == NV * ONNXC__GV) {                                                         \
            _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r)                               \
            _Pragma("GCC unroll 8") for (int v = 0; v < NV; ++v) {                             \
                float *p = C + r * ldc + v * ONNXC__GV;                                        \
                onnxc__vstore(p, beta == 0.0f ? acc[0][r][v] : acc[0][r][v] + beta * onnxc__vload(p)); \
            }                                                                                  \
            return;                                                                            \
        }                                                                                      \
        for (int r = 0; r < MR; ++r) {                                                         \
            float t[NV * ONNXC__GV];                                                           \
            for (int v = 0; v < NV; ++v)                                                       \
                onnxc__vstore(t + v * ONNXC__GV, acc[0][r][v]);                                \
            float *c = C + r * ldc;                                                            \
            for (int64_t j = 0; j < ncols; ++j)                                                \
                c[j] = beta == 0.0f ? t[j] : t[j] + beta * c[j];                               \
        }                                                                                      \
    }

ONNXC__GEMV_TILE(onnxc__gv_1x8, 1, 8, 1)
ONNXC__GEMV_TILE(onnxc__gv_1x4, 1, 4, 2)
ONNXC__GEMV_TILE(onnxc__gv_1x2, 1, 2, 2)
ONNXC__GEMV_TILE(onnxc__gv_1x1, 1, 1, 4)
ONNXC__GEMV_TILE(onnxc__gv_rx4, ONNXC__GEMV_RB, 4, 1)
ONNXC__GEMV_TILE(onnxc__gv_rx2, ONNXC__GEMV_RB, 2, 1)
ONNXC__GEMV_TILE(onnxc__gv_rx1, ONNXC__GEMV_RB, 1, 2)
ONNXC__GEMV_TILE_AT(onnxc__gv_nz_1x8, 1, 8, 1, 1)
ONNXC__GEMV_TILE_AT(onnxc__gv_nz_1x4, 1, 4, 2, 1)
ONNXC__GEMV_TILE_AT(onnxc__gv_nz_1x2, 1, 2, 2, 1)
ONNXC__GEMV_TILE_AT(onnxc__gv_nz_1x1, 1, 1, 4, 1)
#endif

/* C[:, j0:j1) for every row; serial. nz (one row only, else NULL): A's nonzero positions, nnz of
 * them (onnxc__sgemv_nonzeros), the only rows of B read. */
ONNXC_GEMM_INL void onnxc__sgemv_kn_cols_nz(int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha,
                                            const float *A, int64_t lda, const float *B, int64_t ldb,
                                            int64_t nread, float beta, float *C, int64_t ldc,
                                            const int32_t *nz, int64_t nnz)
{
    (void)nz;
    (void)nnz;
    int64_t j = j0;
#if defined(ONNXC_GEMM_VEC)
    const int64_t VL = ONNXC__GV;
    while (j < j1) {
        const int64_t rem = j1 - j;
        const int cap = M >= ONNXC__GEMV_RB ? 4 : 8;   /* row groups: at most 4 vectors */
        /* the rest in one tile when it fits (padded rows: a partial last vector is readable) */
        int nv = rem <= VL ? 1 : rem <= 2 * VL ? 2 : rem <= 4 * VL ? 4 : 8;
        if (nv > cap || j + nv * VL > nread)
            nv = rem >= 8 * VL ? 8 : rem >= 4 * VL ? 4 : rem >= 2 * VL ? 2 : 1;
        if (nv > cap)
            nv = cap;
        if (j + nv * VL > nread)
            break;                                   /* a partial vector past B's row: scalar */
        const int64_t nc = rem < nv * VL ? rem : nv * VL;
        int64_t i = 0;
        for (const int64_t mend = M / ONNXC__GEMV_RB * ONNXC__GEMV_RB; i < mend; i += ONNXC__GEMV_RB) {
            const float *a = A + i * lda;
            float *c = C + i * ldc + j;
            if (nv == 4 || nv == 8)
                onnxc__gv_rx4(K, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, NULL);
            else if (nv == 2)
                onnxc__gv_rx2(K, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, NULL);
            else
                onnxc__gv_rx1(K, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, NULL);
        }
        for (; i < M; ++i) {
            const float *a = A + i * lda;
            float *c = C + i * ldc + j;
            if (nv == 8)
                nz ? onnxc__gv_nz_1x8(nnz, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, nz)
                   : onnxc__gv_1x8(K, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, NULL);
            else if (nv == 4)
                nz ? onnxc__gv_nz_1x4(nnz, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, nz)
                   : onnxc__gv_1x4(K, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, NULL);
            else if (nv == 2)
                nz ? onnxc__gv_nz_1x2(nnz, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, nz)
                   : onnxc__gv_1x2(K, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, NULL);
            else
                nz ? onnxc__gv_nz_1x1(nnz, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, nz)
                   : onnxc__gv_1x1(K, alpha, a, lda, B + j, ldb, beta, c, ldc, nc, NULL);
        }
        j += nc;
    }
#else
    (void)nread;
#endif
    for (int64_t i = 0; i < M && j < j1; ++i)   /* portable build / columns past the padded reads */
        for (int64_t jj = j; jj < j1; ++jj) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                s += A[i * lda + k] * B[k * ldb + jj];
            float *c = C + i * ldc + jj;
            *c = beta == 0.0f ? alpha * s : alpha * s + beta * *c;
        }
}

ONNXC_GEMM_INL void onnxc__sgemv_kn_cols(int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha,
                                         const float *A, int64_t lda, const float *B, int64_t ldb,
                                         int64_t nread, float beta, float *C, int64_t ldc)
{
    onnxc__sgemv_kn_cols_nz(M, j0, j1, K, alpha, A, lda, B, ldb, nread, beta, C, ldc, NULL, 0);
}

ONNXC_GEMM_FN void onnxc_sgemv_kn(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                                  const float *B, int64_t ldb, int64_t nread, float beta, float *C,
                                  int64_t ldc, int num_threads);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_sgemv_kn(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                                  const float *B, int64_t ldb, int64_t nread, float beta, float *C,
                                  int64_t ldc, int num_threads)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        onnxc__sgemm_scale_c(M, N, beta, C, ldc);
        return;
    }
#if defined(_OPENMP)
    if (num_threads > 1 && (double)M * N * K >= ONNXC_GEMV_PAR_MIN) {
        const int64_t W = 128;   /* column chunk: a multiple of every tile width */
        const int64_t nch = (N + W - 1) / W;
#pragma omp parallel for num_threads(num_threads) schedule(static)
        for (int64_t t = 0; t < nch; ++t)
            onnxc__sgemv_kn_cols(M, t * W, onnxc__gmin(N, (t + 1) * W), K, alpha, A, lda, B, ldb, nread,
                                 beta, C, ldc);
        return;
    }
#endif
    (void)num_threads;
    onnxc__sgemv_kn_cols(M, 0, N, K, alpha, A, lda, B, ldb, nread, beta, C, ldc);
}
#endif

/* strips [s0, s1) of a prepacked operand, front to back (reverse: back to front); serial */
ONNXC_GEMM_INL void onnxc__sgemv_strips(int64_t M, int64_t s0, int64_t s1, int64_t N, int64_t K, float alpha,
                                        const float *A, int64_t lda, const float *Bs, int64_t sw, float beta,
                                        float *C, int64_t ldc, int reverse, const int32_t *nz, int64_t nnz)
{
    const int64_t Np = (N + ONNXC_GEMV_PAD - 1) / ONNXC_GEMV_PAD * ONNXC_GEMV_PAD;
    for (int64_t q = s0; q < s1; ++q) {
        const int64_t s = reverse ? s0 + s1 - 1 - q : q;
        const int64_t j = s * sw;
        const int64_t ws = onnxc__gmin(sw, Np - j);
        onnxc__sgemv_kn_cols_nz(M, 0, onnxc__gmin(sw, N - j), K, alpha, A, lda, Bs + j * K, ws, ws,
                                beta, C + j, ldc, nz, nnz);
    }
}

/* A node's run count (a block-scope static of the generated code), for onnxc_sgemv_strips_dir's
 * order below: runs on several threads at once may read the same count, which only changes the
 * order, not results. */
static inline unsigned onnxc_tick(unsigned *count)
{
#if defined(__GNUC__)
    return __atomic_fetch_add(count, 1u, __ATOMIC_RELAXED);
#else
    return (*count)++;
#endif
}

/* Bit i of the result: a[i] != 0 (NaN: set; -0.0: clear), for 8 elements. */
ONNXC_GEMM_INL unsigned onnxc__nonzero_mask8(const float *a)
{
#if defined(ONNXC_GEMM_VEC) && defined(__AVX__)
    typedef float v8 __attribute__((vector_size(32)));
    v8 x;
    memcpy(&x, a, sizeof x);
    /* vcmpps with predicate 4 (_CMP_NEQ_UQ: true where unordered, so for NaN) */
    return (unsigned)__builtin_ia32_movmskps256(__builtin_ia32_cmpps256(x, (v8){0}, 4));
#else
    unsigned m = 0;
    for (int i = 0; i < 8; ++i)
        m |= (unsigned)(a[i] != 0.0f) << i;
    return m;
#endif
}

/* A's nonzero positions (one row of K) into nz, then ONNXC_GEMV_NZ_PF + 1 copies of the last
 * (the prefetch reads ahead); their count. NaN != 0: kept; -0.0 == 0: skipped. Eight elements at
 * a time: their mask picks a row of set-bit positions, all 8 stored (n <= k, so they stay inside
 * the list's K entries) and n advanced by the mask's bit count. The loop of one element at a time
 * (a store whose address waits for the last compare) took 1.5 us of a 512-input layer's 2.2 us
 * inside the batch-1 product, ~5 % of a batch-1 MLP's time in its three layers. */
ONNXC_GEMM_INL int64_t onnxc__sgemv_nonzeros(const float *a, int64_t K, int32_t *nz)
{
    /* row m: the positions of m's set bits, ascending, then zeros (printed by a loop over m) */
    static const unsigned char pos[256][8] = {
        {0,0,0,0,0,0,0,0}, {0,0,0,0,0,0,0,0}, {1,0,0,0,0,0,0,0}, {0,1,0,0,0,0,0,0}, {2,0,0,0,0,0,0,0},
        {0,2,0,0,0,0,0,0}, {1,2,0,0,0,0,0,0}, {0,1,2,0,0,0,0,0}, {3,0,0,0,0,0,0,0}, {0,3,0,0,0,0,0,0},
        {1,3,0,0,0,0,0,0}, {0,1,3,0,0,0,0,0}, {2,3,0,0,0,0,0,0}, {0,2,3,0,0,0,0,0}, {1,2,3,0,0,0,0,0},
        {0,1,2,3,0,0,0,0}, {4,0,0,0,0,0,0,0}, {0,4,0,0,0,0,0,0}, {1,4,0,0,0,0,0,0}, {0,1,4,0,0,0,0,0},
        {2,4,0,0,0,0,0,0}, {0,2,4,0,0,0,0,0}, {1,2,4,0,0,0,0,0}, {0,1,2,4,0,0,0,0}, {3,4,0,0,0,0,0,0},
        {0,3,4,0,0,0,0,0}, {1,3,4,0,0,0,0,0}, {0,1,3,4,0,0,0,0}, {2,3,4,0,0,0,0,0}, {0,2,3,4,0,0,0,0},
        {1,2,3,4,0,0,0,0}, {0,1,2,3,4,0,0,0}, {5,0,0,0,0,0,0,0}, {0,5,0,0,0,0,0,0}, {1,5,0,0,0,0,0,0},
        {0,1,5,0,0,0,0,0}, {2,5,0,0,0,0,0,0}, {0,2,5,0,0,0,0,0}, {1,2,5,0,0,0,0,0}, {0,1,2,5,0,0,0,0},
        {3,5,0,0,0,0,0,0}, {0,3,5,0,0,0,0,0}, {1,3,5,0,0,0,0,0}, {0,1,3,5,0,0,0,0}, {2,3,5,0,0,0,0,0},
        {0,2,3,5,0,0,0,0}, {1,2,3,5,0,0,0,0}, {0,1,2,3,5,0,0,0}, {4,5,0,0,0,0,0,0}, {0,4,5,0,0,0,0,0},
        {1,4,5,0,0,0,0,0}, {0,1,4,5,0,0,0,0}, {2,4,5,0,0,0,0,0}, {0,2,4,5,0,0,0,0}, {1,2,4,5,0,0,0,0},
        {0,1,2,4,5,0,0,0}, {3,4,5,0,0,0,0,0}, {0,3,4,5,0,0,0,0}, {1,3,4,5,0,0,0,0}, {0,1,3,4,5,0,0,0},
        {2,3,4,5,0,0,0,0}, {0,2,3,4,5,0,0,0}, {1,2,3,4,5,0,0,0}, {0,1,2,3,4,5,0,0}, {6,0,0,0,0,0,0,0},
        {0,6,0,0,0,0,0,0}, {1,6,0,0,0,0,0,0}, {0,1,6,0,0,0,0,0}, {2,6,0,0,0,0,0,0}, {0,2,6,0,0,0,0,0},
        {1,2,6,0,0,0,0,0}, {0,1,2,6,0,0,0,0}, {3,6,0,0,0,0,0,0}, {0,3,6,0,0,0,0,0}, {1,3,6,0,0,0,0,0},
        {0,1,3,6,0,0,0,0}, {2,3,6,0,0,0,0,0}, {0,2,3,6,0,0,0,0}, {1,2,3,6,0,0,0,0}, {0,1,2,3,6,0,0,0},
        {4,6,0,0,0,0,0,0}, {0,4,6,0,0,0,0,0}, {1,4,6,0,0,0,0,0}, {0,1,4,6,0,0,0,0}, {2,4,6,0,0,0,0,0},
        {0,2,4,6,0,0,0,0}, {1,2,4,6,0,0,0,0}, {0,1,2,4,6,0,0,0}, {3,4,6,0,0,0,0,0}, {0,3,4,6,0,0,0,0},
        {1,3,4,6,0,0,0,0}, {0,1,3,4,6,0,0,0}, {2,3,4,6,0,0,0,0}, {0,2,3,4,6,0,0,0}, {1,2,3,4,6,0,0,0},
        {0,1,2,3,4,6,0,0}, {5,6,0,0,0,0,0,0}, {0,5,6,0,0,0,0,0}, {1,5,6,0,0,0,0,0}, {0,1,5,6,0,0,0,0},
        {2,5,6,0,0,0,0,0}, {0,2,5,6,0,0,0,0}, {1,2,5,6,0,0,0,0}, {0,1,2,5,6,0,0,0}, {3,5,6,0,0,0,0,0},
        {0,3,5,6,0,0,0,0}, {1,3,5,6,0,0,0,0}, {0,1,3,5,6,0,0,0}, {2,3,5,6,0,0,0,0}, {0,2,3,5,6,0,0,0},
        {1,2,3,5,6,0,0,0}, {0,1,2,3,5,6,0,0}, {4,5,6,0,0,0,0,0}, {0,4,5,6,0,0,0,0}, {1,4,5,6,0,0,0,0},
        {0,1,4,5,6,0,0,0}, {2,4,5,6,0,0,0,0}, {0,2,4,5,6,0,0,0}, {1,2,4,5,6,0,0,0}, {0,1,2,4,5,6,0,0},
        {3,4,5,6,0,0,0,0}, {0,3,4,5,6,0,0,0}, {1,3,4,5,6,0,0,0}, {0,1,3,4,5,6,0,0}, {2,3,4,5,6,0,0,0},
        {0,2,3,4,5,6,0,0}, {1,2,3,4,5,6,0,0}, {0,1,2,3,4,5,6,0}, {7,0,0,0,0,0,0,0}, {0,7,0,0,0,0,0,0},
        {1,7,0,0,0,0,0,0}, {0,1,7,0,0,0,0,0}, {2,7,0,0,0,0,0,0}, {0,2,7,0,0,0,0,0}, {1,2,7,0,0,0,0,0},
        {0,1,2,7,0,0,0,0}, {3,7,0,0,0,0,0,0}, {0,3,7,0,0,0,0,0}, {1,3,7,0,0,0,0,0}, {0,1,3,7,0,0,0,0},
        {2,3,7,0,0,0,0,0}, {0,2,3,7,0,0,0,0}, {1,2,3,7,0,0,0,0}, {0,1,2,3,7,0,0,0}, {4,7,0,0,0,0,0,0},
        {0,4,7,0,0,0,0,0}, {1,4,7,0,0,0,0,0}, {0,1,4,7,0,0,0,0}, {2,4,7,0,0,0,0,0}, {0,2,4,7,0,0,0,0},
        {1,2,4,7,0,0,0,0}, {0,1,2,4,7,0,0,0}, {3,4,7,0,0,0,0,0}, {0,3,4,7,0,0,0,0}, {1,3,4,7,0,0,0,0},
        {0,1,3,4,7,0,0,0}, {2,3,4,7,0,0,0,0}, {0,2,3,4,7,0,0,0}, {1,2,3,4,7,0,0,0}, {0,1,2,3,4,7,0,0},
        {5,7,0,0,0,0,0,0}, {0,5,7,0,0,0,0,0}, {1,5,7,0,0,0,0,0}, {0,1,5,7,0,0,0,0}, {2,5,7,0,0,0,0,0},
        {0,2,5,7,0,0,0,0}, {1,2,5,7,0,0,0,0}, {0,1,2,5,7,0,0,0}, {3,5,7,0,0,0,0,0}, {0,3,5,7,0,0,0,0},
        {1,3,5,7,0,0,0,0}, {0,1,3,5,7,0,0,0}, {2,3,5,7,0,0,0,0}, {0,2,3,5,7,0,0,0}, {1,2,3,5,7,0,0,0},
        {0,1,2,3,5,7,0,0}, {4,5,7,0,0,0,0,0}, {0,4,5,7,0,0,0,0}, {1,4,5,7,0,0,0,0}, {0,1,4,5,7,0,0,0},
        {2,4,5,7,0,0,0,0}, {0,2,4,5,7,0,0,0}, {1,2,4,5,7,0,0,0}, {0,1,2,4,5,7,0,0}, {3,4,5,7,0,0,0,0},
        {0,3,4,5,7,0,0,0}, {1,3,4,5,7,0,0,0}, {0,1,3,4,5,7,0,0}, {2,3,4,5,7,0,0,0}, {0,2,3,4,5,7,0,0},
        {1,2,3,4,5,7,0,0}, {0,1,2,3,4,5,7,0}, {6,7,0,0,0,0,0,0}, {0,6,7,0,0,0,0,0}, {1,6,7,0,0,0,0,0},
        {0,1,6,7,0,0,0,0}, {2,6,7,0,0,0,0,0}, {0,2,6,7,0,0,0,0}, {1,2,6,7,0,0,0,0}, {0,1,2,6,7,0,0,0},
        {3,6,7,0,0,0,0,0}, {0,3,6,7,0,0,0,0}, {1,3,6,7,0,0,0,0}, {0,1,3,6,7,0,0,0}, {2,3,6,7,0,0,0,0},
        {0,2,3,6,7,0,0,0}, {1,2,3,6,7,0,0,0}, {0,1,2,3,6,7,0,0}, {4,6,7,0,0,0,0,0}, {0,4,6,7,0,0,0,0},
        {1,4,6,7,0,0,0,0}, {0,1,4,6,7,0,0,0}, {2,4,6,7,0,0,0,0}, {0,2,4,6,7,0,0,0}, {1,2,4,6,7,0,0,0},
        {0,1,2,4,6,7,0,0}, {3,4,6,7,0,0,0,0}, {0,3,4,6,7,0,0,0}, {1,3,4,6,7,0,0,0}, {0,1,3,4,6,7,0,0},
        {2,3,4,6,7,0,0,0}, {0,2,3,4,6,7,0,0}, {1,2,3,4,6,7,0,0}, {0,1,2,3,4,6,7,0}, {5,6,7,0,0,0,0,0},
        {0,5,6,7,0,0,0,0}, {1,5,6,7,0,0,0,0}, {0,1,5,6,7,0,0,0}, {2,5,6,7,0,0,0,0}, {0,2,5,6,7,0,0,0},
        {1,2,5,6,7,0,0,0}, {0,1,2,5,6,7,0,0}, {3,5,6,7,0,0,0,0}, {0,3,5,6,7,0,0,0}, {1,3,5,6,7,0,0,0},
        {0,1,3,5,6,7,0,0}, {2,3,5,6,7,0,0,0}, {0,2,3,5,6,7,0,0}, {1,2,3,5,6,7,0,0}, {0,1,2,3,5,6,7,0},
        {4,5,6,7,0,0,0,0}, {0,4,5,6,7,0,0,0}, {1,4,5,6,7,0,0,0}, {0,1,4,5,6,7,0,0}, {2,4,5,6,7,0,0,0},
        {0,2,4,5,6,7,0,0}, {1,2,4,5,6,7,0,0}, {0,1,2,4,5,6,7,0}, {3,4,5,6,7,0,0,0}, {0,3,4,5,6,7,0,0},
        {1,3,4,5,6,7,0,0}, {0,1,3,4,5,6,7,0}, {2,3,4,5,6,7,0,0}, {0,2,3,4,5,6,7,0}, {1,2,3,4,5,6,7,0},
        {0,1,2,3,4,5,6,7}
    };
    int64_t n = 0, k = 0;
    for (; k + 8 <= K; k += 8) {
        const unsigned m = onnxc__nonzero_mask8(a + k);
        for (int i = 0; i < 8; ++i)
            nz[n + i] = (int32_t)(k + pos[m][i]);
        unsigned c = m - ((m >> 1) & 0x55u);   /* bits set in 8 bits */
        c = (c & 0x33u) + ((c >> 2) & 0x33u);
        n += (c + (c >> 4)) & 0x0Fu;
    }
    for (; k < K; ++k) {
        nz[n] = (int32_t)k;
        n += a[k] != 0.0f;
    }
    for (int p = 0; p < ONNXC_GEMV_NZ_PF + 1; ++p)
        nz[n + p] = n ? nz[n - 1] : 0;
    return n;
}

/* onnxc_sgemv_strips reading the strips in either order (each thread keeps its own strips, so
 * its share stays in its L2 either way). A caller that alternates the order from run to run
 * starts each run on the strips the last one read last, still in L2 where the weights are a
 * bit larger than it: a batch-1 MLP's 2.6 MB on a 2 MB L2 (Xeon) took 0.80-0.88x the time of
 * always front to back; no change where L2 is much smaller (Zen 3, 512 KB). Every column's
 * arithmetic is the same in both orders: the results are identical.
 *
 * nz (NULL: not used): ONNXC_GEMV_NZ_BYTES(K) of workspace, for a caller whose B has no inf or
 * NaN. A one-row A's zero elements are then skipped, with their rows of B: a batch-1 layer after
 * a Relu streams only the weights its nonzero inputs multiply (the mlp benchmark's second layer,
 * 48 % of its inputs zero: the model 0.89x the time at 1 thread). A zero's products are +-0
 * where B is finite, so the sums are those of the other products (but for the sign of an
 * all-zero sum; tiles narrower than 8 vectors split the list, not k, between accumulators). */
#define ONNXC_GEMV_NZ_BYTES(K) (((int64_t)(K) + ONNXC_GEMV_NZ_PF + 1) * (int64_t)sizeof(int32_t))
ONNXC_GEMM_INL void onnxc__sgemv_strips_dir_at(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                               int64_t lda, const float *Bs, int64_t sw, float beta, float *C,
                                               int64_t ldc, int num_threads, int reverse, int32_t *nz)
{
    const int64_t ns = (N + sw - 1) / sw;
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        onnxc_sgemv_kn(M, N, 0, alpha, A, lda, Bs, N, N, beta, C, ldc, 1);
        return;
    }
    int64_t nnz = K;
#if defined(ONNXC_GEMM_VEC)
    if (nz && M == 1)
        nnz = onnxc__sgemv_nonzeros(A, K, nz);
#endif
    if (nnz == K)
        nz = NULL;
#if defined(_OPENMP)
    if (num_threads > 1 && ns > 1 && (double)M * N * nnz >= ONNXC_GEMV_PAR_MIN) {
#pragma omp parallel num_threads(num_threads)
        {
            const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
            onnxc__sgemv_strips(M, t * ns / n, (t + 1) * ns / n, N, K, alpha, A, lda, Bs, sw, beta, C, ldc,
                                reverse, nz, nnz);
        }
        return;
    }
#endif
    (void)num_threads;
    onnxc__sgemv_strips(M, 0, ns, N, K, alpha, A, lda, Bs, sw, beta, C, ldc, reverse, nz, nnz);
}

ONNXC_GEMM_FN void onnxc_sgemv_strips_dir(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                          int64_t lda, const float *Bs, int64_t sw, float beta, float *C,
                                          int64_t ldc, int num_threads, int reverse, int32_t *nz);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_sgemv_strips_dir(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                          int64_t lda, const float *Bs, int64_t sw, float beta, float *C,
                                          int64_t ldc, int num_threads, int reverse, int32_t *nz)
{
    onnxc__sgemv_strips_dir_at(M, N, K, alpha, A, lda, Bs, sw, beta, C, ldc, num_threads, reverse, nz);
}
#endif

/* the same in a copy of the model's own, for its large layers: the call's constants (M, N, K, the
 * strip width, alpha, beta) specialise the tiles (a batch-1 MLP: 0.92x the time of the shared
 * kernel's) */
ONNXC_MODEL_FN void onnxc_sgemv_strips_dir_here(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                               int64_t lda, const float *Bs, int64_t sw, float beta, float *C,
                                               int64_t ldc, int num_threads, int reverse, int32_t *nz)
{
    onnxc__sgemv_strips_dir_at(M, N, K, alpha, A, lda, Bs, sw, beta, C, ldc, num_threads, reverse, nz);
}

ONNXC_GEMM_FN void onnxc_sgemv_strips(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                      int64_t lda, const float *Bs, int64_t sw, float beta, float *C,
                                      int64_t ldc, int num_threads);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_sgemv_strips(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                      int64_t lda, const float *Bs, int64_t sw, float beta, float *C,
                                      int64_t ldc, int num_threads)
{
    onnxc_sgemv_strips_dir(M, N, K, alpha, A, lda, Bs, sw, beta, C, ldc, num_threads, 0, NULL);
}
#endif

#endif
