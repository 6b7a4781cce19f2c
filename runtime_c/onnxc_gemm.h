/* onnxc GEMM kernels: C99 (+ GCC vector extensions where available), no allocation, no globals.
 *
 *   onnxc_sgemm       float: packed, cache-blocked, register-blocked, OpenMP over blocks
 *   onnxc_sgemm_wpack / onnxc_sgemm_wmul
 *                     float with a constant left operand (weights) packed once and reused
 *   onnxc_dgemm       double: simple row-wise kernel (no workspace)
 *   onnxc_igemm_<T>   exact integer C = A * B (int32/int64/uint32/uint64), wrapping
 *
 * Layout for all: row-major. op(A) is M x K (A stored M x K, or K x M when transA);
 * op(B) is K x N (B stored K x N, or N x K when transB); C is M x N with leading dim ldc.
 * C = alpha * op(A) op(B) + beta * C; when beta == 0, C is written without being read.
 *
 * Workspaces come from the caller (the node's scratch): ONNXC_SGEMM_WORK_BYTES(M, N, K) for
 * onnxc_sgemm/wmul, ONNXC_SGEMM_WPACK_BYTES(M, K) for packed weights. onnxc/ops/gemm.py
 * computes the same bounds for the memory planner (tests check they agree): keep them in step.
 * Micro-kernels for other ISAs plug in behind this interface by defining ONNXC_SGEMM_MR/NR
 * and onnxc__sgemm_kernel (MR <= ONNXC_SGEMM_MR_MAX, NR <= ONNXC_SGEMM_NR_MAX).
 */
#ifndef ONNXC_GEMM_H
#define ONNXC_GEMM_H

#include "onnxc_runtime.h"

#if defined(_OPENMP)
#include <omp.h>
#define ONNXC_THREAD_NUM() omp_get_thread_num()
#define ONNXC_TEAM_SIZE() omp_get_num_threads()
#else
#define ONNXC_THREAD_NUM() 0
#define ONNXC_TEAM_SIZE() 1
#endif

/* The kernels (ONNXC_GEMM_FN: every function not inlined into a model's own loops) are built in
 * one of three ways. By default each translation unit that includes the headers has its own
 * static copy: the standalone C of `onnxc build --emit-c` stays one .c file plus headers. A model
 * compiled for an onnxc library defines ONNXC_KERNELS_EXTERN and sees declarations only: the
 * bodies come from runtime_c/lib/onnxc_kernels.c (ONNXC_KERNELS_DEFINE), compiled once per
 * toolchain and linked into every library, so a model with a MatMul does not spend seconds
 * recompiling the GEMM. Each function is declared once, then defined under ONNXC_KERNEL_BODIES.
 * ONNXC_MODEL_FN stays static in every mode: the `_here` drivers a model's large products call,
 * compiled with the model so that their callers' constant shapes specialise them. */
#if defined(ONNXC_KERNELS_EXTERN) && defined(ONNXC_KERNELS_DEFINE)
#error "define one of ONNXC_KERNELS_EXTERN and ONNXC_KERNELS_DEFINE"
#endif
#if defined(ONNXC_KERNELS_EXTERN)
#define ONNXC_KERNEL_BODIES 0
#else
#define ONNXC_KERNEL_BODIES 1
#endif
#if defined(__GNUC__)
#if defined(ONNXC_KERNELS_EXTERN)
#define ONNXC_GEMM_FN extern __attribute__((visibility("hidden")))
#elif defined(ONNXC_KERNELS_DEFINE)
#define ONNXC_GEMM_FN __attribute__((visibility("hidden"), noinline))
#else
#define ONNXC_GEMM_FN static __attribute__((unused, noinline))
#endif
#define ONNXC_GEMM_INL static inline __attribute__((always_inline))
#define ONNXC_MODEL_FN static __attribute__((unused, noinline))
#else
#if defined(ONNXC_KERNELS_EXTERN) || defined(ONNXC_KERNELS_DEFINE)
#define ONNXC_GEMM_FN extern
#else
#define ONNXC_GEMM_FN static
#endif
#define ONNXC_GEMM_INL static inline
#define ONNXC_MODEL_FN static
#endif

/* ---- blocking (shared with onnxc/ops/gemm.py) ---------------------------------------------- */
#define ONNXC_SGEMM_KC 256       /* depth of a packed block: A and B micro-panels stay in L1/L2 */
#define ONNXC_SGEMM_MC 192       /* rows of A per L2-resident block (multiple of every MR) */
#define ONNXC_SGEMM_MCH 960      /* rows of A packed at once (one chunk shared by all threads) */
#define ONNXC_SGEMM_NC 1536      /* columns of B packed at once (L3-resident) */
#define ONNXC_SGEMM_MR_MAX 16
#define ONNXC_SGEMM_NR_MAX 64

static inline int64_t onnxc__gmin(int64_t a, int64_t b) { return a < b ? a : b; }

/* Workspace bytes for onnxc_sgemm(M, N, K): an A chunk and a B block, each padded to the
 * register block, plus 64 bytes of alignment slack for each. */
#define ONNXC_SGEMM_WORK_BYTES(M, N, K)                                                         \
    ((int64_t)4 * ((onnxc__gmin((M), ONNXC_SGEMM_MCH) + ONNXC_SGEMM_MR_MAX) *                   \
                       onnxc__gmin((K), ONNXC_SGEMM_KC) +                                       \
                   onnxc__gmin((K), ONNXC_SGEMM_KC) *                                           \
                       (onnxc__gmin((N), ONNXC_SGEMM_NC) + ONNXC_SGEMM_NR_MAX)) + 128)

/* Rows of A up to which a product with B prepacked splits B's columns between threads, not A's
 * rows (onnxc__sgemm_bcols_share). */
#ifndef ONNXC_SGEMM_FEW_ROWS
#define ONNXC_SGEMM_FEW_ROWS 96
#endif

/* Below this many multiply-adds a GEMM stays on one thread. */
#ifndef ONNXC_GEMM_PAR_MIN
#define ONNXC_GEMM_PAR_MIN 262144
#endif

/* ---- register block ------------------------------------------------------------------------ */
#if defined(__GNUC__) && !defined(ONNXC_GEMM_PLAIN_C)
#define ONNXC_GEMM_VEC 1
#if defined(__AVX512F__)
#define ONNXC_SGEMM_VL 16
#define ONNXC_SGEMM_MR 8
#define ONNXC_SGEMM_NV 3
#elif defined(__AVX__)
#define ONNXC_SGEMM_VL 8
#define ONNXC_SGEMM_MR 6
#define ONNXC_SGEMM_NV 2
#elif defined(__aarch64__)
#define ONNXC_SGEMM_VL 4
#define ONNXC_SGEMM_MR 8
#define ONNXC_SGEMM_NV 3
#else
#define ONNXC_SGEMM_VL 4
#define ONNXC_SGEMM_MR 6
#define ONNXC_SGEMM_NV 2
#endif
typedef float onnxc_vf __attribute__((vector_size(ONNXC_SGEMM_VL * 4)));
#define ONNXC_SGEMM_NR (ONNXC_SGEMM_VL * ONNXC_SGEMM_NV)

ONNXC_GEMM_INL onnxc_vf onnxc__vload(const float *p)
{
    onnxc_vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

ONNXC_GEMM_INL void onnxc__vstore(float *p, onnxc_vf v) { memcpy(p, &v, sizeof v); }
#else
#define ONNXC_SGEMM_MR 4
#define ONNXC_SGEMM_NR 8
#endif

#if ONNXC_SGEMM_MR > ONNXC_SGEMM_MR_MAX || ONNXC_SGEMM_NR > ONNXC_SGEMM_NR_MAX || \
    ONNXC_SGEMM_MC % ONNXC_SGEMM_MR != 0 || ONNXC_SGEMM_MCH % ONNXC_SGEMM_MR != 0 || \
    ONNXC_SGEMM_NC % ONNXC_SGEMM_NR != 0
#error "onnxc_gemm.h: register block exceeds the workspace bounds"
#endif

/* ---- register block: micro-kernel ------------------------------------------------------- */
#if defined(ONNXC_GEMM_VEC)
typedef float onnxc_v8f __attribute__((vector_size(32)));
typedef int32_t onnxc_v8i __attribute__((vector_size(32)));
#if defined(__clang__)
#define ONNXC__SHUF(x, y, ...) __builtin_shufflevector((x), (y), __VA_ARGS__)
#else
#define ONNXC__SHUF(x, y, ...) __builtin_shuffle((x), (y), (onnxc_v8i){__VA_ARGS__})
#endif

/* dst[c*dst_stride + r] = src[r*src_stride + c] for an 8 x 8 block (packing row-major panels
 * into k-major order; the shuffles become unpck/shuf/perm instructions). */
ONNXC_GEMM_INL void onnxc__transpose8x8(const float *src, int64_t src_stride, float *dst, int64_t dst_stride)
{
    onnxc_v8f r[8], t[8], u[8];
    /* unrolled, so that the rows stay in registers (see onnxc__transpose6x8) */
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
        memcpy(&r[i], src + i * src_stride, sizeof r[i]);
    for (int i = 0; i < 8; i += 2) {
        t[i] = ONNXC__SHUF(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = ONNXC__SHUF(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4)
        for (int h = 0; h < 2; ++h) {
            u[i + 2 * h] = ONNXC__SHUF(t[i + h], t[i + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[i + 2 * h + 1] = ONNXC__SHUF(t[i + h], t[i + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int i = 0; i < 4; ++i) {
        const onnxc_v8f lo = ONNXC__SHUF(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        const onnxc_v8f hi = ONNXC__SHUF(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        memcpy(dst + i * dst_stride, &lo, sizeof lo);
        memcpy(dst + (i + 4) * dst_stride, &hi, sizeof hi);
    }
}

/* dst[c*6 + r] = src[r*src_stride + c] for 6 rows of 8 floats: the 8 x 8 transpose with two zero
 * rows. Spelled without arrays, and each column stored as a whole vector that the next one
 * overlaps: the loops over arrays kept the rows on the stack, 16-byte stores read back as 32-byte
 * loads (a store-forwarding stall) and the 6-float columns copied out through the stack (BERT at
 * one thread: 7 % of its largest GEMMs' time in this packing). */
ONNXC_GEMM_INL void onnxc__transpose6x8(const float *src, int64_t src_stride, float *dst)
{
#define ONNXC__LO2(x, y) ONNXC__SHUF(x, y, 0, 8, 1, 9, 4, 12, 5, 13)
#define ONNXC__HI2(x, y) ONNXC__SHUF(x, y, 2, 10, 3, 11, 6, 14, 7, 15)
#define ONNXC__LO4(x, y) ONNXC__SHUF(x, y, 0, 1, 8, 9, 4, 5, 12, 13)
#define ONNXC__HI4(x, y) ONNXC__SHUF(x, y, 2, 3, 10, 11, 6, 7, 14, 15)
#define ONNXC__LO8(x, y) ONNXC__SHUF(x, y, 0, 1, 2, 3, 8, 9, 10, 11)
#define ONNXC__HI8(x, y) ONNXC__SHUF(x, y, 4, 5, 6, 7, 12, 13, 14, 15)
    onnxc_v8f r0, r1, r2, r3, r4, r5;
    const onnxc_v8f z = {0};
    memcpy(&r0, src, sizeof r0);
    memcpy(&r1, src + src_stride, sizeof r1);
    memcpy(&r2, src + 2 * src_stride, sizeof r2);
    memcpy(&r3, src + 3 * src_stride, sizeof r3);
    memcpy(&r4, src + 4 * src_stride, sizeof r4);
    memcpy(&r5, src + 5 * src_stride, sizeof r5);
    const onnxc_v8f t0 = ONNXC__LO2(r0, r1), t1 = ONNXC__HI2(r0, r1);
    const onnxc_v8f t2 = ONNXC__LO2(r2, r3), t3 = ONNXC__HI2(r2, r3);
    const onnxc_v8f t4 = ONNXC__LO2(r4, r5), t5 = ONNXC__HI2(r4, r5);
    const onnxc_v8f u0 = ONNXC__LO4(t0, t2), u1 = ONNXC__HI4(t0, t2);
    const onnxc_v8f u2 = ONNXC__LO4(t1, t3), u3 = ONNXC__HI4(t1, t3);
    const onnxc_v8f u4 = ONNXC__LO4(t4, z), u5 = ONNXC__HI4(t4, z);
    const onnxc_v8f u6 = ONNXC__LO4(t5, z), u7 = ONNXC__HI4(t5, z);
    const onnxc_v8f o[8] = {ONNXC__LO8(u0, u4), ONNXC__LO8(u1, u5), ONNXC__LO8(u2, u6), ONNXC__LO8(u3, u7),
                            ONNXC__HI8(u0, u4), ONNXC__HI8(u1, u5), ONNXC__HI8(u2, u6), ONNXC__HI8(u3, u7)};
    /* column c in dst[6c, 6c + 6); its two zero lanes land where column c + 1 goes next */
#pragma GCC unroll 8
    for (int c = 0; c < 7; ++c)
        memcpy(dst + c * 6, &o[c], sizeof o[c]);
    const onnxc_v8f last = ONNXC__SHUF(o[6], o[7], 4, 5, 8, 9, 10, 11, 12, 13);   /* dst[40, 48) */
    memcpy(dst + 40, &last, sizeof last);
#undef ONNXC__LO2
#undef ONNXC__HI2
#undef ONNXC__LO4
#undef ONNXC__HI4
#undef ONNXC__LO8
#undef ONNXC__HI8
}

/* one 8-float row of a transposed tile: p[0..7] = alpha * v + beta * p (p not read when beta == 0) */
ONNXC_GEMM_INL void onnxc__store8(float *p, onnxc_v8f v, float alpha, float beta)
{
    v = alpha * v;
    if (beta != 0.0f) {
        onnxc_v8f o;
        memcpy(&o, p, sizeof o);
        v += beta * o;
    }
    memcpy(p, &v, sizeof v);
}
#endif

/* rows of the vector kernel's stored tile: 8 where the transposed store of a 6-row tile goes
 * through 8 x 8 transposes */
#if ONNXC_SGEMM_MR < 8 && ONNXC_SGEMM_NR % 8 == 0
#define ONNXC__TAIL_ROWS 8
#else
#define ONNXC__TAIL_ROWS ONNXC_SGEMM_MR
#endif

/* Store a partial (mr x nr) or strided accumulator tile (row-major in acc, row stride NR) to C:
 * C = alpha*acc + beta*C, element (i, j) at c[i*rsc + j*csc]. Whole vectors where C's rows
 * (csc == 1) or, for tiles stored transposed (rsc == 1: Winograd, swapped orientations), its
 * columns are contiguous (8 x 8 transposes, a 6-row tile padded to 8). Not inlined: GCC vectorises its strided loop with
 * gathers and hoisted the gathers' constants out of the caller's K loop, where the two registers
 * they held made it read one B vector from memory in every multiply-add. */
ONNXC_GEMM_FN void onnxc__sgemm_store_tail(const float *acc, float *c, int64_t rsc, int64_t csc,
                                            int mr, int nr, float alpha, float beta);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc__sgemm_store_tail(const float *acc, float *c, int64_t rsc, int64_t csc,
                                            int mr, int nr, float alpha, float beta)
{
#if defined(ONNXC_GEMM_VEC)
    if (csc == 1) {
        const int nv = nr / ONNXC_SGEMM_VL * ONNXC_SGEMM_VL;
        for (int i = 0; i < mr; ++i) {
            float *const ci = c + i * rsc;
            const float *const ai = acc + i * ONNXC_SGEMM_NR;
            for (int j = 0; j < nv; j += ONNXC_SGEMM_VL) {
                const onnxc_vf v = alpha * onnxc__vload(ai + j);
                onnxc__vstore(ci + j, beta == 0.0f ? v : v + beta * onnxc__vload(ci + j));
            }
            for (int j = nv; j < nr; ++j)
                ci[j] = beta == 0.0f ? alpha * ai[j] : alpha * ai[j] + beta * ci[j];
        }
        return;
    }
#if ONNXC_SGEMM_MR == 8 && ONNXC_SGEMM_NR % 8 == 0
    if (rsc == 1 && mr == 8) {
        float t[64];
        for (int j0 = 0; j0 < nr; j0 += 8) {
            onnxc__transpose8x8(acc + j0, ONNXC_SGEMM_NR, t, 8);
            for (int j = 0; j < 8 && j0 + j < nr; ++j) {
                onnxc_v8f v;
                memcpy(&v, t + 8 * j, sizeof v);
                onnxc__store8(c + (j0 + j) * csc, v, alpha, beta);
            }
        }
        return;
    }
#endif
#if ONNXC_SGEMM_MR < 8 && ONNXC_SGEMM_NR % 8 == 0
    if (rsc == 1) {   /* acc has 8 rows (ONNXC__TAIL_ROWS), those past mr unused */
        float t[64];
        for (int j0 = 0; j0 < nr; j0 += 8) {
            onnxc__transpose8x8(acc + j0, ONNXC_SGEMM_NR, t, 8);
            for (int j = 0; j < 8 && j0 + j < nr; ++j) {
                float *const p = c + (j0 + j) * csc;
                const float *const v = t + 8 * j;
                if (beta == 0.0f)
                    for (int i = 0; i < mr; ++i)
                        p[i] = alpha * v[i];
                else
                    for (int i = 0; i < mr; ++i)
                        p[i] = alpha * v[i] + beta * p[i];
            }
        }
        return;
    }
#endif
#endif
    for (int i = 0; i < mr; ++i)
        for (int j = 0; j < nr; ++j) {
            const float v = alpha * acc[i * ONNXC_SGEMM_NR + j];
            float *p = c + i * rsc + j * csc;
            *p = beta == 0.0f ? v : v + beta * *p;
        }
}
#endif

/* ---- epilogue: what a fused product does to each element once its sum is complete ---------- */
/* C = act(sum + bias[j]) on each tile as it is finished (in L1), instead of a pass that fills C
 * with the bias before the product and one that clamps after it (paired per call: an MLP at batch
 * 32 0.98-0.99x the time, BERT's 128-row projections 0.97-0.99x). ops/gemm.py picks it only where the template's expressions say the same: Relu / Clip
 * as the clamps `v < lo ? lo : v`, then `v > hi ? hi : v` (NaN passes). Costly activations (Gelu's
 * erf) stay a pass of their own over the share: per tile they took 1.10x the layer's time. */
enum { ONNXC_EPI_NONE = 0, ONNXC_EPI_CLAMP = 1 };
typedef struct {
    const float *bias;  /* added per column (N floats), or NULL */
    int act;            /* ONNXC_EPI_* */
    float lo, hi;       /* ONNXC_EPI_CLAMP's bounds (+-INFINITY: none) */
} onnxc_sgemm_epi;

/* rows x cols of C (c: its first element, column j0 of the product; rows ldc apart). One loop
 * per row that reads, adds and clamps at once. */
#define ONNXC__EPI_ROWS(IN, OUT)                                                                \
    for (int64_t i = 0; i < rows; ++i) {                                                       \
        float *restrict y = c + i * ldc;                                                       \
        for (int64_t j = 0; j < cols; ++j) {                                                   \
            const float v = (IN);                                                              \
            y[j] = (OUT);                                                                      \
        }                                                                                      \
    }
#define ONNXC__EPI_CLAMP(v) ((v) < lo ? lo : (v)) > hi ? hi : ((v) < lo ? lo : (v))
ONNXC_GEMM_FN void onnxc__sgemm_epi_apply(const onnxc_sgemm_epi *e, float *c, int64_t ldc, int64_t rows,
                                          int64_t j0, int64_t cols);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc__sgemm_epi_apply(const onnxc_sgemm_epi *e, float *c, int64_t ldc, int64_t rows,
                                          int64_t j0, int64_t cols)
{
    const float *const bias = e->bias ? e->bias + j0 : NULL;
    const float lo = e->lo, hi = e->hi;
    if (e->act == ONNXC_EPI_CLAMP) {
        if (bias)
            ONNXC__EPI_ROWS(y[j] + bias[j], ONNXC__EPI_CLAMP(v))
        else
            ONNXC__EPI_ROWS(y[j], ONNXC__EPI_CLAMP(v))
    } else if (bias)
        ONNXC__EPI_ROWS(y[j] + bias[j], v)
}
#endif

#if defined(ONNXC_GEMM_VEC)
/* v clamped as `v < l ? l : v`, then `v > h ? h : v` (NaN compares false and passes): maxps(a, b)
 * is a > b ? a : b, minps(a, b) a < b ? a : b, the same comparisons in 2 instructions where the
 * compare-and-blend takes 4 */
ONNXC_GEMM_INL onnxc_vf onnxc__vclamp(onnxc_vf v, onnxc_vf l, onnxc_vf h)
{
#if ONNXC_SGEMM_VL == 8 && defined(__AVX__)
    return __builtin_ia32_minps256(h, __builtin_ia32_maxps256(l, v));
#else
    typedef int32_t onnxc__vi __attribute__((vector_size(ONNXC_SGEMM_VL * 4)));
    onnxc__vi m = l > v;
    v = (onnxc_vf)(((onnxc__vi)l & m) | ((onnxc__vi)v & ~m));
    m = h < v;
    return (onnxc_vf)(((onnxc__vi)h & m) | ((onnxc__vi)v & ~m));
#endif
}

/* onnxc__sgemm_epi_apply on a whole tile in registers (columns j0 ...): the same operations in
 * the same order, so the same results */
ONNXC_GEMM_INL void onnxc__sgemm_epi_regs(const onnxc_sgemm_epi *e, onnxc_vf acc[ONNXC_SGEMM_MR][ONNXC_SGEMM_NV],
                                          int64_t j0)
{
    if (e->bias)
#pragma GCC unroll 4
        for (int j = 0; j < ONNXC_SGEMM_NV; ++j) {
            const onnxc_vf bv = onnxc__vload(e->bias + j0 + j * ONNXC_SGEMM_VL);
#pragma GCC unroll 16
            for (int i = 0; i < ONNXC_SGEMM_MR; ++i)
                acc[i][j] += bv;
        }
    if (e->act == ONNXC_EPI_CLAMP) {
        const onnxc_vf lo = (onnxc_vf){0} + e->lo, hi = (onnxc_vf){0} + e->hi;
#pragma GCC unroll 16
        for (int i = 0; i < ONNXC_SGEMM_MR; ++i)
#pragma GCC unroll 4
            for (int j = 0; j < ONNXC_SGEMM_NV; ++j)
                acc[i][j] = onnxc__vclamp(acc[i][j], lo, hi);
    }
}
#endif

#if defined(ONNXC_GEMM_VEC)
/* acc[i][j] += sum over kc of a[k][i] * b[k][j-th vector], for the first MRU rows and NVU
 * vectors of the tile (edge panels skip the multiply-adds on their zero padding: a 7 x 7 feature
 * map is 6 full row panels and one of a single row); pf != 0: each line of b is also prefetched
 * pf floats ahead into L2 (onnxc_winograd.h) */
#define ONNXC__SGEMM_KLOOP(MRU, NVU, pf)                                                        \
    do {                                                                                       \
        const float *ap = a, *bp = b;                                                          \
        /* four depths per trip: the loop's own adds and branch no longer crowd the multiply- \
         * adds (Zen 3, paired per call: BERT's 128-row layers 0.91-0.98x, an MLP at batch 32 \
         * 0.94-0.98x, 1024^3 0.96-1.0x; bert end to end 0.975-0.986x; the same sums) */      \
        _Pragma("GCC unroll 4")                                                                \
        for (int64_t k = 0; k < kc; ++k) {                                                     \
            onnxc_vf bv[NVU];                                                                  \
            _Pragma("GCC unroll 4") for (int j = 0; j < (NVU); ++j) {                          \
                if (pf)                                                                        \
                    __builtin_prefetch(bp + (pf) + j * ONNXC_SGEMM_VL, 0, 2);                  \
                bv[j] = onnxc__vload(bp + j * ONNXC_SGEMM_VL);                                 \
            }                                                                                  \
            _Pragma("GCC unroll 16") for (int i = 0; i < (MRU); ++i) {                         \
                const float av = ap[i];                                                        \
                _Pragma("GCC unroll 4") for (int j = 0; j < (NVU); ++j)                        \
                    acc[i][j] += av * bv[j];                                                   \
            }                                                                                  \
            ap += ONNXC_SGEMM_MR;                                                              \
            bp += ONNXC_SGEMM_NR;                                                              \
        }                                                                                      \
    } while (0)

/* The n vectors v[0..n-1] materialised in registers: GCC otherwise folds each load into every
 * multiply-add that uses it, and a thin tile's loop then issues more loads than multiply-adds. */
#if defined(__x86_64__) || defined(__i386__)
#define ONNXC__PIN(v, n) _Pragma("GCC unroll 4") for (int p_ = 0; p_ < (n); ++p_) __asm__("" : "+x"((v)[p_]))
#elif defined(__aarch64__)
#define ONNXC__PIN(v, n) _Pragma("GCC unroll 4") for (int p_ = 0; p_ < (n); ++p_) __asm__("" : "+w"((v)[p_]))
#else
#define ONNXC__PIN(v, n) ((void)0)
#endif

/* ONNXC__SGEMM_KLOOP for thin tiles (few rows, or one vector of columns): their MRU x NVU
 * accumulators are too few to hide the multiply-add's latency (4 cycles, 2 per cycle: 8 chains
 * needed), so KS consecutive depths go to KS accumulator sets, summed at the end (a 2-row tail
 * of the 6 x 16 AVX2 tile ran at the cost of 4 rows: 11 % of an MLP's time at batch 32). A tile
 * of r rows runs as the nearest instantiated height >= r, so each costs about r rows (AVX2, a
 * 512 x 784 layer, paired: 2 rows as 2 not 3 0.895x the time, 5 as 5 not 6 0.856x, 8 = 6 + 2
 * 0.926x, 32 rows 0.972x). */
#define ONNXC__SGEMM_KLOOP_KS(MRU, NVU, KS)                                                     \
    do {                                                                                       \
        onnxc_vf part[(KS) > 1 ? (KS) - 1 : 1][MRU][NVU];                                      \
        _Pragma("GCC unroll 4") for (int s = 0; s < (KS) - 1; ++s)                             \
        _Pragma("GCC unroll 16") for (int i = 0; i < (MRU); ++i)                               \
        _Pragma("GCC unroll 4") for (int j = 0; j < (NVU); ++j)                                \
            part[s][i][j] = (onnxc_vf){0};                                                     \
        const float *ap = a, *bp = b;                                                          \
        int64_t k = 0;                                                                         \
        for (; k + (KS) <= kc; k += (KS)) {                                                    \
            _Pragma("GCC unroll 4") for (int s = 0; s < (KS); ++s) {                           \
                onnxc_vf bv[NVU];                                                              \
                _Pragma("GCC unroll 4") for (int j = 0; j < (NVU); ++j)                        \
                    bv[j] = onnxc__vload(bp + s * ONNXC_SGEMM_NR + j * ONNXC_SGEMM_VL);        \
                ONNXC__PIN(bv, NVU);                                                           \
                _Pragma("GCC unroll 16") for (int i = 0; i < (MRU); ++i) {                     \
                    const float av = ap[s * ONNXC_SGEMM_MR + i];                               \
                    _Pragma("GCC unroll 4") for (int j = 0; j < (NVU); ++j) {                  \
                        if (s == 0)                                                            \
                            acc[i][j] += av * bv[j];                                           \
                        else                                                                   \
                            part[s > 0 ? s - 1 : 0][i][j] += av * bv[j];                       \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
            ap += (KS) * ONNXC_SGEMM_MR;                                                       \
            bp += (KS) * ONNXC_SGEMM_NR;                                                       \
        }                                                                                      \
        for (; k < kc; ++k) {                                                                  \
            _Pragma("GCC unroll 16") for (int i = 0; i < (MRU); ++i)                           \
            _Pragma("GCC unroll 4") for (int j = 0; j < (NVU); ++j)                            \
                acc[i][j] += ap[i] * onnxc__vload(bp + j * ONNXC_SGEMM_VL);                    \
            ap += ONNXC_SGEMM_MR;                                                              \
            bp += ONNXC_SGEMM_NR;                                                              \
        }                                                                                      \
        _Pragma("GCC unroll 4") for (int s = 0; s < (KS) - 1; ++s)                             \
        _Pragma("GCC unroll 16") for (int i = 0; i < (MRU); ++i)                               \
        _Pragma("GCC unroll 4") for (int j = 0; j < (NVU); ++j)                                \
            acc[i][j] += part[s][i][j];                                                        \
    } while (0)

/* A tile of MRU rows x NVU vectors: depth split into enough sets for 8 accumulators */
#define ONNXC__SGEMM_KS(MRU, NVU) ((MRU) * (NVU) >= 8 ? 1 : (MRU) * (NVU) >= 4 ? 2 : 4)
#define ONNXC__SGEMM_KLOOP_THIN(MRU, NVU) ONNXC__SGEMM_KLOOP_KS(MRU, NVU, ONNXC__SGEMM_KS(MRU, NVU))

/* A partial or strided accumulator tile to C through onnxc__sgemm_store_tail (rows past MR zero) */
ONNXC_GEMM_INL void onnxc__sgemm_store_acc(onnxc_vf acc[ONNXC_SGEMM_MR][ONNXC_SGEMM_NV], float *c, int64_t rsc,
                                           int64_t csc, int mr, int nr, float alpha, float beta)
{
    float tmp[ONNXC__TAIL_ROWS * ONNXC_SGEMM_NR];
#pragma GCC unroll 16
    for (int i = 0; i < ONNXC__TAIL_ROWS; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < ONNXC_SGEMM_NV; ++j)
            onnxc__vstore(tmp + i * ONNXC_SGEMM_NR + j * ONNXC_SGEMM_VL,
                          i < ONNXC_SGEMM_MR ? acc[i][j] : (onnxc_vf){0});
    onnxc__sgemm_store_tail(tmp, c, rsc, csc, mr, nr, alpha, beta);
}

/* C[mr x nr] = alpha * Ap[kc x MR]^T * Bp[kc x NR] + beta * C; Ap/Bp are packed micro-panels;
 * element (i, j) of C at c[i*rsc + j*csc]. (Starting from C when beta == 1 measured slower: the
 * first multiply-adds wait for C.) */
ONNXC_GEMM_INL void onnxc__sgemm_kernel_epi(int64_t kc, const float *restrict a, const float *restrict b,
                                            float *restrict c, int64_t rsc, int64_t csc, int mr, int nr,
                                            float alpha, float beta, int64_t pf, const onnxc_sgemm_epi *epi,
                                            int64_t j0)
{
    onnxc_vf acc[ONNXC_SGEMM_MR][ONNXC_SGEMM_NV];
#pragma GCC unroll 16
    for (int i = 0; i < ONNXC_SGEMM_MR; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < ONNXC_SGEMM_NV; ++j)
            acc[i][j] = (onnxc_vf){0};
    const int nvu = (nr + ONNXC_SGEMM_VL - 1) / ONNXC_SGEMM_VL;
    if (csc == 1)   /* the tile's rows of C, on their way while the products run (L3 or memory) */
        for (int i = 0; i < mr; ++i) {
            __builtin_prefetch(c + i * rsc, 1, 3);
            __builtin_prefetch(c + i * rsc + nr - 1, 1, 3);
        }
    enum { MR2 = ONNXC_SGEMM_MR / 2, MR4 = ONNXC_SGEMM_MR / 4 };
    if (pf && mr == ONNXC_SGEMM_MR && nvu == ONNXC_SGEMM_NV)
        ONNXC__SGEMM_KLOOP(ONNXC_SGEMM_MR, ONNXC_SGEMM_NV, pf);
    else if (mr <= MR4)
        ONNXC__SGEMM_KLOOP_THIN(MR4, ONNXC_SGEMM_NV);
#if ONNXC_SGEMM_MR == 6
    else if (mr <= 2)   /* not as 3 rows: batch 32 = 5 x 6 + 2, BERT's 128 = 21 x 6 + 2 */
        ONNXC__SGEMM_KLOOP_THIN(2, ONNXC_SGEMM_NV);
#endif
    else if (mr <= MR2)
        ONNXC__SGEMM_KLOOP_THIN(MR2, ONNXC_SGEMM_NV);
    else if (mr <= ONNXC_SGEMM_MR - 2 && nvu == ONNXC_SGEMM_NV)
        ONNXC__SGEMM_KLOOP_THIN(ONNXC_SGEMM_MR - 2, ONNXC_SGEMM_NV);
    else if (mr == ONNXC_SGEMM_MR - 1 && nvu == ONNXC_SGEMM_NV)   /* not as MR rows */
        ONNXC__SGEMM_KLOOP_THIN(ONNXC_SGEMM_MR - 1, ONNXC_SGEMM_NV);
    else if (nvu == 1)
        ONNXC__SGEMM_KLOOP_THIN(ONNXC_SGEMM_MR, 1);
#if ONNXC_SGEMM_NV == 3
    else if (nvu == 2)
        ONNXC__SGEMM_KLOOP(ONNXC_SGEMM_MR, 2, 0);
#endif
    else
        ONNXC__SGEMM_KLOOP(ONNXC_SGEMM_MR, ONNXC_SGEMM_NV, 0);
    if (mr == ONNXC_SGEMM_MR && nr == ONNXC_SGEMM_NR && csc == 1) {
        if (alpha != 1.0f)
#pragma GCC unroll 16
            for (int i = 0; i < ONNXC_SGEMM_MR; ++i)
#pragma GCC unroll 4
                for (int j = 0; j < ONNXC_SGEMM_NV; ++j)
                    acc[i][j] *= alpha;
        if (beta != 0.0f)
#pragma GCC unroll 16
            for (int i = 0; i < ONNXC_SGEMM_MR; ++i)
#pragma GCC unroll 4
                for (int j = 0; j < ONNXC_SGEMM_NV; ++j)
                    acc[i][j] += beta * onnxc__vload(c + i * rsc + j * ONNXC_SGEMM_VL);
        if (epi)   /* in registers: what onnxc__sgemm_epi_apply does to the stored tile */
            onnxc__sgemm_epi_regs(epi, acc, j0);
#pragma GCC unroll 16
        for (int i = 0; i < ONNXC_SGEMM_MR; ++i)
#pragma GCC unroll 4
            for (int j = 0; j < ONNXC_SGEMM_NV; ++j)
                onnxc__vstore(c + i * rsc + j * ONNXC_SGEMM_VL, acc[i][j]);
        return;
    }
    onnxc__sgemm_store_acc(acc, c, rsc, csc, mr, nr, alpha, beta);
    if (epi)
        onnxc__sgemm_epi_apply(epi, c, rsc, mr, j0, nr);
}

ONNXC_GEMM_INL void onnxc__sgemm_kernel_pf(int64_t kc, const float *restrict a, const float *restrict b,
                                           float *restrict c, int64_t rsc, int64_t csc, int mr, int nr,
                                           float alpha, float beta, int64_t pf)
{
    onnxc__sgemm_kernel_epi(kc, a, b, c, rsc, csc, mr, nr, alpha, beta, pf, NULL, 0);
}

ONNXC_GEMM_INL void onnxc__sgemm_kernel(int64_t kc, const float *restrict a, const float *restrict b,
                                        float *restrict c, int64_t rsc, int64_t csc, int mr, int nr,
                                        float alpha, float beta)
{
    onnxc__sgemm_kernel_pf(kc, a, b, c, rsc, csc, mr, nr, alpha, beta, 0);
}
#else
ONNXC_GEMM_INL void onnxc__sgemm_kernel(int64_t kc, const float *restrict a, const float *restrict b,
                                        float *restrict c, int64_t rsc, int64_t csc, int mr, int nr,
                                        float alpha, float beta)
{
    float acc[ONNXC_SGEMM_MR * ONNXC_SGEMM_NR];
    for (int t = 0; t < ONNXC_SGEMM_MR * ONNXC_SGEMM_NR; ++t)
        acc[t] = 0.0f;
    for (int64_t k = 0; k < kc; ++k) {
        float bk[ONNXC_SGEMM_NR];
        for (int j = 0; j < ONNXC_SGEMM_NR; ++j)
            bk[j] = b[j];
        for (int i = 0; i < ONNXC_SGEMM_MR; ++i) {
            const float ai = a[i];
            for (int j = 0; j < ONNXC_SGEMM_NR; ++j)
                acc[i * ONNXC_SGEMM_NR + j] += ai * bk[j];
        }
        a += ONNXC_SGEMM_MR;
        b += ONNXC_SGEMM_NR;
    }
    onnxc__sgemm_store_tail(acc, c, rsc, csc, mr, nr, alpha, beta);
}

ONNXC_GEMM_INL void onnxc__sgemm_kernel_pf(int64_t kc, const float *restrict a, const float *restrict b,
                                           float *restrict c, int64_t rsc, int64_t csc, int mr, int nr,
                                           float alpha, float beta, int64_t pf)
{
    (void)pf;
    onnxc__sgemm_kernel(kc, a, b, c, rsc, csc, mr, nr, alpha, beta);
}

ONNXC_GEMM_INL void onnxc__sgemm_kernel_epi(int64_t kc, const float *restrict a, const float *restrict b,
                                            float *restrict c, int64_t rsc, int64_t csc, int mr, int nr,
                                            float alpha, float beta, int64_t pf, const onnxc_sgemm_epi *epi,
                                            int64_t j0)
{
    (void)pf;
    onnxc__sgemm_kernel(kc, a, b, c, rsc, csc, mr, nr, alpha, beta);
    if (epi)
        onnxc__sgemm_epi_apply(epi, c, rsc, mr, j0, nr);
}
#endif

/* A product over B prepacked whole (weights: they stream from L3 or memory, a model's are larger
 * than L2) walks B panel by panel, every row tile of A against one panel; the first tile of each
 * panel prefetches the next panel into L2, one line per depth step (the prefetch distance of
 * onnxc__sgemm_kernel_pf: one panel of kc x NR floats). Per-call paired against no prefetch, B
 * cycling through 16 weight sets as a model's layers do (Zen 3): BERT's 128-row layers 0.973-0.985x
 * time, an MLP's 32-row layers 0.93-0.98x. */
#define ONNXC__BPF(kc) ((int64_t)ONNXC_SGEMM_NR * (kc))

/* ---- packing ------------------------------------------------------------------------------ */
/* Pack n (<= W) lines of a strided matrix, element (l, k) at x[l*ls + k*ks], into kc groups of
 * W values (k-major), zero padding lines n..W-1. Used for A panels (W = MR, lines = rows) and B
 * panels (W = NR, lines = columns). */
ONNXC_GEMM_INL void onnxc__sgemm_pack(int64_t n, int64_t kc, const float *x, int64_t ls, int64_t ks,
                                      float *restrict out, const int W)
{
    if (n == W && ls == 1) { /* lines adjacent: copy W values per k */
        /* at a constant width: a copy of W floats whose size GCC cannot see becomes `rep movs`,
         * some 30 cycles for 6 floats (28% of a swapped 7x7 pointwise conv's time) */
        if (W == ONNXC_SGEMM_MR)
            for (int64_t k = 0; k < kc; ++k)
                memcpy(out + k * ONNXC_SGEMM_MR, x + k * ks, sizeof(float) * ONNXC_SGEMM_MR);
        else if (W == ONNXC_SGEMM_NR)
            for (int64_t k = 0; k < kc; ++k)
                memcpy(out + k * ONNXC_SGEMM_NR, x + k * ks, sizeof(float) * ONNXC_SGEMM_NR);
        else
            for (int64_t k = 0; k < kc; ++k)
                memcpy(out + k * W, x + k * ks, sizeof(float) * W);
        return;
    }
    int64_t k0 = 0;
#if defined(ONNXC_GEMM_VEC)
    if (n == W && ks == 1 && W % 8 == 0) { /* lines contiguous in k: 8 x 8 transposes */
        const int64_t k8 = kc / 8 * 8;
        for (int l = 0; l < W; l += 8)   /* 8 lines at a time: few streams for the prefetcher */
            for (int64_t k = 0; k < k8; k += 8)
                onnxc__transpose8x8(x + l * ls + k, ls, out + k * W + l, W);
        k0 = k8;
    }
#if ONNXC_SGEMM_MR == 6
    if (n == 6 && ks == 1 && W == 6) {   /* AVX2's 6-row A panels: 6 x 8 transposes */
        const int64_t k8 = kc / 8 * 8;
        for (int64_t k = 0; k < k8; k += 8)
            onnxc__transpose6x8(x + k, ls, out + k * 6);
        k0 = k8;
    }
#endif
#endif
    for (int64_t l = 0; l < W; ++l) {
        if (l < n) {
            const float *xl = x + l * ls;
            for (int64_t k = k0; k < kc; ++k)
                out[k * W + l] = xl[k * ks];
        } else {
            for (int64_t k = k0; k < kc; ++k)
                out[k * W + l] = 0.0f;
        }
    }
}

/* Panels of B for the columns 0..ncols-1 (element (k, j) at x[k*ks + j]: columns contiguous),
 * each NR wide and kc deep, one after another (panel p at out + p*kc*NR): row by row across
 * all of them, so each row of B is read as one run. */
#ifndef ONNXC_SGEMM_BGROUP
#define ONNXC_SGEMM_BGROUP 8     /* panels packed together (a run of 8 * NR floats per row) */
#endif
ONNXC_GEMM_INL void onnxc__sgemm_pack_bcols(int64_t ncols, int64_t kc, const float *x, int64_t ks,
                                            float *restrict out)
{
    const int64_t full = ncols / ONNXC_SGEMM_NR;
    for (int64_t k = 0; k < kc; ++k)
        for (int64_t p = 0; p < full; ++p) {
#if defined(ONNXC_GEMM_VEC)
#pragma GCC unroll 4
            for (int v = 0; v < ONNXC_SGEMM_NV; ++v)
                onnxc__vstore(out + (p * kc + k) * ONNXC_SGEMM_NR + v * ONNXC_SGEMM_VL,
                              onnxc__vload(x + k * ks + p * ONNXC_SGEMM_NR + v * ONNXC_SGEMM_VL));
#else
            memcpy(out + (p * kc + k) * ONNXC_SGEMM_NR, x + k * ks + p * ONNXC_SGEMM_NR,
                   sizeof(float) * ONNXC_SGEMM_NR);
#endif
        }
    if (ncols > full * ONNXC_SGEMM_NR)
        onnxc__sgemm_pack(ncols - full * ONNXC_SGEMM_NR, kc, x + full * ONNXC_SGEMM_NR, 1, ks,
                          out + full * kc * ONNXC_SGEMM_NR, ONNXC_SGEMM_NR);
}

#include "onnxc_gemm_small.h"   /* matrix-vector and few-row products */

/* ---- SGEMM --------------------------------------------------------------------------------- */
ONNXC_GEMM_INL float *onnxc__align64(void *p)
{
    return (float *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* ---- small products read in place ------------------------------------------------------------ *
 * C (M x N, row stride ldc) = op(A) B + beta * C (beta 0 or 1) for op(A) with unit k stride (row i
 * at A + i * lda) and B with unit column stride, its NR-wide panel p's row k at B + p * pstr +
 * k * ldb: a row-major matrix (pstr = NR, ldb = its row stride) or panels packed by
 * onnxc__sgemm_pack (pstr = K * NR, ldb = NR, padded = 1: the last panel's zero columns are
 * there). The full tiles read both operands where they lie; only a row tail (M % MR rows) and an
 * unpadded column tail are copied, zero-padded, into work: ONNXC_SGEMM_DIRECT_BYTES(K). For
 * products a few hundred deep at most (K <= ONNXC_SGEMM_KC: a B panel stays in L1 for every row
 * tile): attention's per-head products, where packing both operands took about a quarter of
 * their time. */
#define ONNXC_SGEMM_DIRECT_BYTES(K) ((int64_t)4 * (ONNXC_SGEMM_MR + ONNXC_SGEMM_NR) * (K) + 64)

#if defined(ONNXC_GEMM_VEC)
ONNXC_GEMM_INL void onnxc__sgemm_kernel_direct(int64_t kc, const float *restrict a, int64_t lda,
                                               const float *restrict b, int64_t ldb, float *restrict c,
                                               int64_t ldc, int mr, int nr, float beta, int64_t pf)
{
    onnxc_vf acc[ONNXC_SGEMM_MR][ONNXC_SGEMM_NV];
    const float *ar[ONNXC_SGEMM_MR];
#pragma GCC unroll 16
    for (int i = 0; i < ONNXC_SGEMM_MR; ++i) {
        ar[i] = a + i * lda;
#pragma GCC unroll 4
        for (int j = 0; j < ONNXC_SGEMM_NV; ++j)
            acc[i][j] = (onnxc_vf){0};
    }
    /* unroll 2 as ONNXC__SGEMM_KLOOP's (attention, paired: 0.96-0.98x the time); the next
     * panel's row k prefetched into L2 (weights stream from L3) */
#define ONNXC__SGEMM_DLOOP(NVU)                                                                \
    _Pragma("GCC unroll 2") for (int64_t k = 0; k < kc; ++k) {                                 \
        onnxc_vf bv[NVU];                                                                      \
        _Pragma("GCC unroll 4") for (int j = 0; j < (NVU); ++j) {                              \
            if (pf)                                                                            \
                __builtin_prefetch(b + k * ldb + pf + j * ONNXC_SGEMM_VL, 0, 2);               \
            bv[j] = onnxc__vload(b + k * ldb + j * ONNXC_SGEMM_VL);                            \
        }                                                                                      \
        _Pragma("GCC unroll 16") for (int i = 0; i < ONNXC_SGEMM_MR; ++i) {                    \
            const float av = ar[i][k];                                                         \
            _Pragma("GCC unroll 4") for (int j = 0; j < (NVU); ++j)                            \
                acc[i][j] += av * bv[j];                                                       \
        }                                                                                      \
    }
    /* only the vectors that hold columns: a classifier's 10 columns are one AVX-512 vector of
     * the 3 a panel has, and all 3 made its 32 x 10 x 512 product 3x the multiply-adds */
    const int nvu = (nr + ONNXC_SGEMM_VL - 1) / ONNXC_SGEMM_VL;
    if (nvu == 1) {
        ONNXC__SGEMM_DLOOP(1)
#if ONNXC_SGEMM_NV == 3
    } else if (nvu == 2) {
        ONNXC__SGEMM_DLOOP(2)
#endif
    } else {
        ONNXC__SGEMM_DLOOP(ONNXC_SGEMM_NV)
    }
#undef ONNXC__SGEMM_DLOOP
    if (mr == ONNXC_SGEMM_MR && nr == ONNXC_SGEMM_NR) {
#pragma GCC unroll 16
        for (int i = 0; i < ONNXC_SGEMM_MR; ++i)
#pragma GCC unroll 4
            for (int j = 0; j < ONNXC_SGEMM_NV; ++j) {
                float *const p = c + i * ldc + j * ONNXC_SGEMM_VL;
                onnxc__vstore(p, beta == 0.0f ? acc[i][j] : acc[i][j] + onnxc__vload(p));
            }
        return;
    }
    onnxc__sgemm_store_acc(acc, c, ldc, 1, mr, nr, 1.0f, beta);
}
#endif

ONNXC_GEMM_FN void onnxc_sgemm_direct(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                                      const float *B, int64_t pstr, int64_t ldb, int padded, float beta,
                                      float *C, int64_t ldc, void *work);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_sgemm_direct(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                                      const float *B, int64_t pstr, int64_t ldb, int padded, float beta,
                                      float *C, int64_t ldc, void *work)
{
    if (M <= 0 || N <= 0)
        return;
#if defined(ONNXC_GEMM_VEC)
    float *const ea = onnxc__align64(work);              /* MR x K: the row tail, zero-padded */
    float *const eb = ea + ONNXC_SGEMM_MR * K;            /* K x NR: an unpadded column tail */
    const int64_t mfull = M / ONNXC_SGEMM_MR * ONNXC_SGEMM_MR;
    /* the row tail: over padded panels packed for the packed kernel, whose thin tiles cost what
     * their rows do (2 rows, not MR); else row-major for the direct one */
    if (mfull < M && padded)
        onnxc__sgemm_pack(M - mfull, K, A + mfull * lda, lda, 1, ea, ONNXC_SGEMM_MR);
    else if (mfull < M)
        for (int64_t i = 0; i < ONNXC_SGEMM_MR; ++i)
            for (int64_t k = 0; k < K; ++k)
                ea[i * K + k] = mfull + i < M ? A[(mfull + i) * lda + k] : 0.0f;
    for (int64_t j = 0; j < N; j += ONNXC_SGEMM_NR) {
        const int nr = (int)onnxc__gmin(ONNXC_SGEMM_NR, N - j);
        const float *bp = B + (j / ONNXC_SGEMM_NR) * pstr;
        int64_t bs = ldb;
        if (nr < ONNXC_SGEMM_NR && !padded) {
            for (int64_t k = 0; k < K; ++k)
                for (int q = 0; q < ONNXC_SGEMM_NR; ++q)
                    eb[k * ONNXC_SGEMM_NR + q] = q < nr ? bp[k * ldb + q] : 0.0f;
            bp = eb;
            bs = ONNXC_SGEMM_NR;
        }
        /* the first row tile fetches the next full panel into L2 (ONNXC__BPF's reason) */
        const int64_t pf = j + 2 * ONNXC_SGEMM_NR <= N ? pstr : 0;
        for (int64_t i = 0; i < mfull; i += ONNXC_SGEMM_MR)
            onnxc__sgemm_kernel_direct(K, A + i * lda, lda, bp, bs, C + i * ldc + j, ldc, ONNXC_SGEMM_MR, nr,
                                       beta, i == 0 ? pf : 0);
        if (mfull < M && padded)
            onnxc__sgemm_kernel_pf(K, ea, bp, C + mfull * ldc + j, ldc, 1, (int)(M - mfull), nr, 1.0f, beta,
                                   mfull == 0 ? pf : 0);
        else if (mfull < M)
            onnxc__sgemm_kernel_direct(K, ea, K, bp, bs, C + mfull * ldc + j, ldc, (int)(M - mfull), nr, beta,
                                       mfull == 0 ? pf : 0);
    }
#else
    /* portable build: one multiply-add at a time */
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            const float *const bp = B + (j / ONNXC_SGEMM_NR) * pstr + j % ONNXC_SGEMM_NR;
            float s = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                s += A[i * lda + k] * bp[k * ldb];
            C[i * ldc + j] = beta == 0.0f ? s : s + C[i * ldc + j];
        }
    (void)padded;
    (void)work;
#endif
}
#endif

/* Blocked product on packed panels: C(i, j) at C[i*rsc + j*csc], op(A)(i, k) at A[i*ars + k*acs],
 * op(B)(k, j) at B[k*brs + j*bcs]. Loops: A chunks of MCH rows -> depth blocks of KC (pack the
 * A chunk) -> B blocks of NC columns (pack) -> tiles (MC rows x column group) over threads ->
 * micro-kernels (a B micro-panel stays in L1 while the A block streams from L2).
 * Apre / Bpre (or NULL): that operand already packed whole by onnxc__sgemm_prepack. */
ONNXC_GEMM_FN void onnxc__sgemm_blocked(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                        int64_t ars, int64_t acs, const float *B, int64_t brs,
                                        int64_t bcs, float beta, float *C, int64_t rsc, int64_t csc,
                                        void *work, int nt, const float *Apre, const float *Bpre);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc__sgemm_blocked(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                        int64_t ars, int64_t acs, const float *B, int64_t brs,
                                        int64_t bcs, float beta, float *C, int64_t rsc, int64_t csc,
                                        void *work, int nt, const float *Apre, const float *Bpre)
{
    const int64_t kcmax = onnxc__gmin(K, ONNXC_SGEMM_KC);
    const int64_t mchmax = onnxc__gmin(M, ONNXC_SGEMM_MCH);
    float *const Ap = onnxc__align64(work);
    float *const Bp = onnxc__align64(Ap + ((mchmax + ONNXC_SGEMM_MR - 1) / ONNXC_SGEMM_MR) *
                                              ONNXC_SGEMM_MR * kcmax);
    const int par = nt > 1 && (double)M * (double)N * (double)K >= ONNXC_GEMM_PAR_MIN;
    (void)par;
    /* equal chunks (1024 rows: 2 x 512, not 960 + 64, which packs all of B for 64 rows) */
    const int64_t nch = (M + ONNXC_SGEMM_MCH - 1) / ONNXC_SGEMM_MCH;
    const int64_t chunk = onnxc__roundup((M + nch - 1) / nch, ONNXC_SGEMM_MR);

#pragma omp parallel num_threads(nt) if(par)
    for (int64_t ic0 = 0; ic0 < M; ic0 += chunk) {
        const int64_t mch = onnxc__gmin(chunk, M - ic0);
        const int64_t npa = (mch + ONNXC_SGEMM_MR - 1) / ONNXC_SGEMM_MR;   /* A panels */
        const int64_t nmb = (mch + ONNXC_SGEMM_MC - 1) / ONNXC_SGEMM_MC;   /* L2 row blocks */
        for (int64_t pc = 0; pc < K; pc += ONNXC_SGEMM_KC) {
            const int64_t kc = onnxc__gmin(ONNXC_SGEMM_KC, K - pc);
            const float bet = pc == 0 ? beta : 1.0f;
            for (int64_t jc = 0; jc < N; jc += ONNXC_SGEMM_NC) {
                const int64_t nc = onnxc__gmin(ONNXC_SGEMM_NC, N - jc);
                const int64_t npb = (nc + ONNXC_SGEMM_NR - 1) / ONNXC_SGEMM_NR;
                const int64_t npa_now = jc == 0 && !Apre ? npa : 0;   /* the A chunk is packed once */
                /* B's panels packed in groups when its columns are contiguous (a row of the
                 * group at once: packing one panel at a time read 64 bytes per row of B, a new
                 * page each) */
                const int64_t bgroup = bcs == 1 ? ONNXC_SGEMM_BGROUP : 1;
                const int64_t npb_now = Bpre ? 0 : (npb + bgroup - 1) / bgroup;
                const float *const Ab = Apre ? Apre + pc * onnxc__roundup(M, ONNXC_SGEMM_MR) + ic0 * kc : Ap;
                const float *const Bb = Bpre ? Bpre + pc * onnxc__roundup(N, ONNXC_SGEMM_NR) + jc * kc : Bp;
                /* more column groups than 1 when threads outnumber row blocks */
                int64_t nnb = 1;
                if (nt > 1 && nmb < 4 * nt)
                    nnb = onnxc__gmin(npb, (4 * nt + nmb - 1) / nmb);
                const int64_t pper = (npb + nnb - 1) / nnb;
#pragma omp for schedule(static)
                for (int64_t t = 0; t < npa_now + npb_now; ++t) {
                    if (t < npa_now) {
                        const int64_t i = t * ONNXC_SGEMM_MR;
                        onnxc__sgemm_pack(onnxc__gmin(ONNXC_SGEMM_MR, mch - i), kc,
                                          A + (ic0 + i) * ars + pc * acs, ars, acs, Ap + i * kc,
                                          ONNXC_SGEMM_MR);
                    } else if (bgroup > 1) {
                        const int64_t j = (t - npa_now) * bgroup * ONNXC_SGEMM_NR;
                        onnxc__sgemm_pack_bcols(onnxc__gmin(bgroup * ONNXC_SGEMM_NR, nc - j), kc,
                                                B + pc * brs + jc + j, brs, Bp + j * kc);
                    } else {
                        const int64_t j = (t - npa_now) * ONNXC_SGEMM_NR;
                        onnxc__sgemm_pack(onnxc__gmin(ONNXC_SGEMM_NR, nc - j), kc,
                                          B + pc * brs + (jc + j) * bcs, bcs, brs, Bp + j * kc,
                                          ONNXC_SGEMM_NR);
                    }
                }
#pragma omp for schedule(static)
                for (int64_t t = 0; t < nmb * nnb; ++t) {
                    const int64_t i0 = (t / nnb) * ONNXC_SGEMM_MC;
                    const int64_t i1 = onnxc__gmin(i0 + ONNXC_SGEMM_MC, mch);
                    const int64_t p0 = (t % nnb) * pper, p1 = onnxc__gmin(p0 + pper, npb);
                    for (int64_t p = p0; p < p1; ++p) {
                        const int64_t j = p * ONNXC_SGEMM_NR;
                        const int nr = (int)onnxc__gmin(ONNXC_SGEMM_NR, nc - j);
                        for (int64_t i = i0; i < i1; i += ONNXC_SGEMM_MR) {
                            const int mr = (int)onnxc__gmin(ONNXC_SGEMM_MR, mch - i);
                            onnxc__sgemm_kernel(kc, Ab + i * kc, Bb + j * kc,
                                                C + (ic0 + i) * rsc + (jc + j) * csc, rsc, csc, mr, nr,
                                                alpha, bet);
                        }
                    }
                }
            }
        }
    }
}
#endif

/* Few rows of A times B prepacked in NR-column panels, over threads: each share takes a run of
 * column panels (balanced by columns) and packs all of A's rows itself, so each thread streams
 * only its share of B (a row split makes every thread stream all of it: a 7x7 conv's 49 pixels
 * times 512 channels, an MLP batch). Share t packs A into the workspace's A region (t = 0) or
 * the B region's t-th Mp x KC slot (B is not packed here); the caller checks they fit. */
/* First column panel of share t of `shares` (the panel boundary nearest t * N / shares). */
ONNXC_GEMM_INL int64_t onnxc__bcols_edge(int64_t t, int64_t N, int64_t shares)
{
    return t == shares ? (N + ONNXC_SGEMM_NR - 1) / ONNXC_SGEMM_NR
                       : (t * N / shares + ONNXC_SGEMM_NR / 2) / ONNXC_SGEMM_NR;
}

/* Share t of `shares`: its column panels times all of A's rows. */
ONNXC_GEMM_FN void onnxc__sgemm_bcols_share(int64_t t, int64_t shares, int64_t M, int64_t N, int64_t K,
                                            float alpha, const float *A, int64_t ars, int64_t acs, float beta,
                                            float *C, int64_t rsc, int64_t csc, float *Ap, float *Bp,
                                            const float *Bpre);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc__sgemm_bcols_share(int64_t t, int64_t shares, int64_t M, int64_t N, int64_t K,
                                            float alpha, const float *A, int64_t ars, int64_t acs, float beta,
                                            float *C, int64_t rsc, int64_t csc, float *Ap, float *Bp,
                                            const float *Bpre)
{
    const int64_t Mp = onnxc__roundup(M, ONNXC_SGEMM_MR), Np = onnxc__roundup(N, ONNXC_SGEMM_NR);
    const int64_t kcmax = onnxc__gmin(K, ONNXC_SGEMM_KC);
    float *const mine = t == 0 ? Ap : Bp + (t - 1) * Mp * kcmax;
    const int64_t q0 = onnxc__bcols_edge(t, N, shares), q1 = onnxc__bcols_edge(t + 1, N, shares);
    for (int64_t pc = 0; pc < K && q0 < q1; pc += ONNXC_SGEMM_KC) {
        const int64_t kc = onnxc__gmin(ONNXC_SGEMM_KC, K - pc);
        const float bet = pc == 0 ? beta : 1.0f;
        for (int64_t i = 0; i < M; i += ONNXC_SGEMM_MR)
            onnxc__sgemm_pack(onnxc__gmin(ONNXC_SGEMM_MR, M - i), kc, A + i * ars + pc * acs, ars, acs,
                              mine + i * kc, ONNXC_SGEMM_MR);
        const float *const Bb = Bpre + pc * Np;
        const int64_t jend = onnxc__gmin(q1 * ONNXC_SGEMM_NR, N);
        for (int64_t j = q0 * ONNXC_SGEMM_NR; j < jend; j += ONNXC_SGEMM_NR) {
            const int nr = (int)onnxc__gmin(ONNXC_SGEMM_NR, N - j);
            for (int64_t i = 0; i < M; i += ONNXC_SGEMM_MR)
                onnxc__sgemm_kernel_pf(kc, mine + i * kc, Bb + j * kc, C + i * rsc + j * csc, rsc, csc,
                                       (int)onnxc__gmin(ONNXC_SGEMM_MR, M - i), nr, alpha, bet,
                                       i == 0 && j + ONNXC_SGEMM_NR < jend ? ONNXC__BPF(kc) : 0);
        }
    }
}
#endif

/* One operand prepacked whole (Apre: MR-row panels, or Bpre: NR-column panels). The other one's
 * panels are split into per-thread shares; each share packs its panels into its own slot of the
 * workspace and computes every tile that uses them, so threads never wait for each other (no
 * barriers: they cost milliseconds when cores are oversubscribed). onnxc_sgemm_split says how
 * C is shared, so a caller may run the shares in a loop of its own (onnxc_sgemm_bpacked_share)
 * with work on each share's part of C before and after it. */
typedef struct {
    int64_t shares;   /* parts of C, one per thread (static schedule); 0: none (M or N is 0) */
    int64_t q;        /* panels per share (the one operand's lines packed here) */
    int64_t slot;     /* panels per pass (the workspace's slot) */
    int by_cols;      /* 1: shares own column panels (A prepacked), 0: row panels (B prepacked) */
    int bcols;        /* 1: B prepacked yet shares own column panels (onnxc__sgemm_bcols_share) */
    int k0;           /* K is 0: the one share scales C by beta */
} onnxc_sgemm_split;

ONNXC_GEMM_FN onnxc_sgemm_split onnxc__sgemm_owned_split(int64_t M, int64_t N, int64_t K, int nt, int by_cols);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN onnxc_sgemm_split onnxc__sgemm_owned_split(int64_t M, int64_t N, int64_t K, int nt, int by_cols)
{
    onnxc_sgemm_split sp = {0, 0, 0, by_cols, 0, 0};
    if (M <= 0 || N <= 0)
        return sp;
    if (K <= 0) {
        sp.shares = 1;
        sp.k0 = 1;
        return sp;
    }
    const int W = by_cols ? ONNXC_SGEMM_NR : ONNXC_SGEMM_MR;
    const int64_t P = ((by_cols ? N : M) + W - 1) / W;          /* panels of the operand packed here */
    const int64_t mchmax = onnxc__gmin(M, ONNXC_SGEMM_MCH);
    const int64_t cap = by_cols ? onnxc__roundup(onnxc__gmin(N, ONNXC_SGEMM_NC), W) / W
                                : onnxc__roundup(mchmax, W) / W; /* panels the workspace holds */
    /* one column panel of prepacked B (the direct path, no packing): a quarter of the work
     * already pays for a second thread (a classifier's 32 x 10 x 512 at 2 threads: 5.8 -> 4.1 us) */
    const double par_min = !by_cols && N <= ONNXC_SGEMM_NR ? ONNXC_GEMM_PAR_MIN / 4 : ONNXC_GEMM_PAR_MIN;
    const int par = nt > 1 && (double)M * (double)N * (double)K >= par_min;
    sp.shares = par ? onnxc__gmin(onnxc__gmin(nt, P), cap) : 1;
    sp.q = (P + sp.shares - 1) / sp.shares;
    sp.slot = onnxc__gmin(sp.q, cap / sp.shares);
    if (par && !by_cols && M <= ONNXC_SGEMM_FEW_ROWS) {
        /* few rows: split the columns instead where the larger share computes less (49 rows:
         * 32 + 17 by row panels; 32 rows split evenly and stay: measured faster for an MLP at
         * batch 32). Share t >= 1 packs A into the B region (not used here). */
        const int64_t Mp = onnxc__roundup(M, ONNXC_SGEMM_MR), Np = onnxc__roundup(N, ONNXC_SGEMM_NR);
        const int64_t fit = 1 + onnxc__roundup(onnxc__gmin(N, ONNXC_SGEMM_NC), ONNXC_SGEMM_NR) / Mp;
        const int64_t cs = onnxc__gmin(onnxc__gmin(nt, Np / ONNXC_SGEMM_NR), fit);
        int64_t cmax = 0;
        for (int64_t t = 0; t < cs; ++t) {
            const int64_t cols = onnxc__gmin(N, onnxc__bcols_edge(t + 1, N, cs) * ONNXC_SGEMM_NR) -
                                 onnxc__bcols_edge(t, N, cs) * ONNXC_SGEMM_NR;
            cmax = cols > cmax ? cols : cmax;
        }
        if (cs > 1 && M * cmax < onnxc__gmin(sp.q * ONNXC_SGEMM_MR, M) * N) {
            sp.shares = cs;
            sp.bcols = 1;
        }
    }
    return sp;
}
#endif

/* The part of C (rows [i0, i1) x columns [j0, j1)) that share t computes (M x N as passed). */
ONNXC_GEMM_INL void onnxc_sgemm_split_part(const onnxc_sgemm_split *sp, int64_t t, int64_t M, int64_t N,
                                           int64_t *i0, int64_t *i1, int64_t *j0, int64_t *j1)
{
    *i0 = *j0 = 0;
    *i1 = M;
    *j1 = N;
    if (sp->k0)
        return;
    if (sp->bcols) {
        *j0 = onnxc__gmin(onnxc__bcols_edge(t, N, sp->shares) * ONNXC_SGEMM_NR, N);
        *j1 = onnxc__gmin(onnxc__bcols_edge(t + 1, N, sp->shares) * ONNXC_SGEMM_NR, N);
    } else if (sp->by_cols) {
        *j0 = onnxc__gmin(t * sp->q * ONNXC_SGEMM_NR, N);
        *j1 = onnxc__gmin((t + 1) * sp->q * ONNXC_SGEMM_NR, N);
    } else {
        *i0 = onnxc__gmin(t * sp->q * ONNXC_SGEMM_MR, M);
        *i1 = onnxc__gmin((t + 1) * sp->q * ONNXC_SGEMM_MR, M);
    }
}

ONNXC_GEMM_FN void onnxc__sgemm_owned_share(const onnxc_sgemm_split *sp, int64_t t, int64_t M, int64_t N,
                                            int64_t K, float alpha, const float *A, int64_t ars, int64_t acs,
                                            const float *B, int64_t brs, int64_t bcs, float beta, float *C,
                                            int64_t rsc, int64_t csc, void *work, const float *Apre,
                                            const float *Bpre, const onnxc_sgemm_epi *epi);

/* the body, inlined into the shared kernel and into a model's own copy (ONNXC_MODEL_FN
 * onnxc_sgemm_bpacked_share_here) */
ONNXC_GEMM_INL void onnxc__sgemm_owned_share_at(const onnxc_sgemm_split *sp, int64_t t, int64_t M, int64_t N,
                                               int64_t K, float alpha, const float *A, int64_t ars, int64_t acs,
                                               const float *B, int64_t brs, int64_t bcs, float beta, float *C,
                                               int64_t rsc, int64_t csc, void *work, const float *Apre,
                                               const float *Bpre, const onnxc_sgemm_epi *epi)
{   /* epi (or NULL): C row-major (csc == 1), as onnxc_sgemm_bpacked_share passes it */
    const int by_cols = sp->by_cols;
    const int W = by_cols ? ONNXC_SGEMM_NR : ONNXC_SGEMM_MR;
    const int64_t L = by_cols ? N : M;                          /* lines of the operand packed here */
    const int64_t P = (L + W - 1) / W;                          /* its panels */
    const int64_t kcmax = onnxc__gmin(K, ONNXC_SGEMM_KC);
    const int64_t mchmax = onnxc__gmin(M, ONNXC_SGEMM_MCH);
    float *const Ap = onnxc__align64(work);
    float *const Bp = onnxc__align64(Ap + onnxc__roundup(mchmax, ONNXC_SGEMM_MR) * kcmax);
    float *const slots = by_cols ? Bp : Ap;
    const int64_t q = sp->q, slot = sp->slot;
    const int64_t Mp = onnxc__roundup(M, ONNXC_SGEMM_MR), Np = onnxc__roundup(N, ONNXC_SGEMM_NR);
    const int direct = !by_cols && !sp->bcols && N <= ONNXC_SGEMM_NR && acs == 1 && csc == 1 &&
                       alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
    if (epi && (sp->k0 || sp->bcols || by_cols || direct)) {
        /* these paths: the epilogue after the share's product, on its part of C */
        onnxc__sgemm_owned_share(sp, t, M, N, K, alpha, A, ars, acs, B, brs, bcs, beta, C, rsc, csc, work, Apre,
                                 Bpre, NULL);
        int64_t i0, i1, j0, j1;
        onnxc_sgemm_split_part(sp, t, M, N, &i0, &i1, &j0, &j1);
        onnxc__sgemm_epi_apply(epi, C + i0 * rsc + j0, rsc, i1 - i0, j0, j1 - j0);
        return;
    }
    if (sp->k0) {           /* an empty depth: C = beta * C (0 when beta is 0) */
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j)
                C[i * rsc + j * csc] = beta == 0.0f ? 0.0f : beta * C[i * rsc + j * csc];
        return;
    }
    if (sp->bcols) {
        onnxc__sgemm_bcols_share(t, sp->shares, M, N, K, alpha, A, ars, acs, beta, C, rsc, csc, Ap, Bp, Bpre);
        return;
    }
    if (direct) {
        /* one column panel: each element of A meets NR columns only, and packing A cost more than
         * the product (a classifier's 32 x 10 x 512, AVX2: 16.4-17.3 -> 6.4-8.0 us); A's rows read
         * in place. (Not for more panels: packed A was 0.88x the time at 32 x 512 x 784.) Shares
         * own whole MR-row panels, so only the last one has a row tail to copy: it does so in its
         * own slot of the A region (its 64-byte rounding at most into the B region, unused here). */
        int64_t i0, i1, j0, j1;
        onnxc_sgemm_split_part(sp, t, M, N, &i0, &i1, &j0, &j1);
        void *const mywork = sp->shares > 1 ? (void *)(slots + t * slot * W * kcmax) : work;
        for (int64_t pc = 0; pc < K && i0 < i1; pc += ONNXC_SGEMM_KC) {
            const int64_t kc = onnxc__gmin(ONNXC_SGEMM_KC, K - pc);
            onnxc_sgemm_direct(i1 - i0, N, kc, A + i0 * ars + pc, ars, Bpre + pc * Np, kc * ONNXC_SGEMM_NR,
                               ONNXC_SGEMM_NR, 1, pc == 0 ? beta : 1.0f, C + i0 * rsc, rsc, mywork);
        }
        return;
    }
    float *const mine = slots + t * slot * W * kcmax;
    for (int64_t q0 = t * q; q0 < onnxc__gmin((t + 1) * q, P); q0 += slot) {
        const int64_t q1 = onnxc__gmin(onnxc__gmin(q0 + slot, (t + 1) * q), P);
        const int64_t l0 = q0 * W, l1 = onnxc__gmin(q1 * W, L);   /* my lines this pass */
        for (int64_t pc = 0; pc < K; pc += ONNXC_SGEMM_KC) {
            const int64_t kc = onnxc__gmin(ONNXC_SGEMM_KC, K - pc);
            const float bet = pc == 0 ? beta : 1.0f;
            for (int64_t l = l0; l < l1; l += W) {
                if (by_cols)
                    onnxc__sgemm_pack(onnxc__gmin(W, l1 - l), kc, B + pc * brs + l * bcs, bcs, brs,
                                      mine + (l - l0) * kc, W);
                else
                    onnxc__sgemm_pack(onnxc__gmin(W, l1 - l), kc, A + l * ars + pc * acs, ars, acs,
                                      mine + (l - l0) * kc, W);
            }
            if (by_cols) {          /* all rows (A prepacked) x my columns */
                const float *const Ab = Apre + pc * Mp;
                for (int64_t i0 = 0; i0 < M; i0 += ONNXC_SGEMM_MC)
                    for (int64_t j = l0; j < l1; j += ONNXC_SGEMM_NR) {
                        const int nr = (int)onnxc__gmin(ONNXC_SGEMM_NR, l1 - j);
                        for (int64_t i = i0; i < onnxc__gmin(i0 + ONNXC_SGEMM_MC, M); i += ONNXC_SGEMM_MR)
                            onnxc__sgemm_kernel(kc, Ab + i * kc, mine + (j - l0) * kc, C + i * rsc + j * csc,
                                                rsc, csc, (int)onnxc__gmin(ONNXC_SGEMM_MR, M - i), nr,
                                                alpha, bet);
                    }
            } else {                /* my rows x all columns (B prepacked) */
                const float *const Bb = Bpre + pc * Np;
                for (int64_t i0 = l0; i0 < l1; i0 += ONNXC_SGEMM_MC)
                    for (int64_t j = 0; j < N; j += ONNXC_SGEMM_NR) {
                        const int nr = (int)onnxc__gmin(ONNXC_SGEMM_NR, N - j);
                        for (int64_t i = i0; i < onnxc__gmin(i0 + ONNXC_SGEMM_MC, l1); i += ONNXC_SGEMM_MR) {
                            const int mr = (int)onnxc__gmin(ONNXC_SGEMM_MR, l1 - i);
                            /* the tile's sums complete (last depth block): its epilogue before
                             * it is stored (a strip of a panel's rows, N floats apart, does not
                             * stay in L1 for a pass after) */
                            onnxc__sgemm_kernel_epi(kc, mine + (i - l0) * kc, Bb + j * kc, C + i * rsc + j * csc,
                                                    rsc, csc, mr, nr, alpha, bet,
                                                    i == i0 && j + ONNXC_SGEMM_NR < N ? ONNXC__BPF(kc) : 0,
                                                    pc + kc >= K ? epi : NULL, j);
                        }
                    }
            }
        }
    }
}
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc__sgemm_owned_share(const onnxc_sgemm_split *sp, int64_t t, int64_t M, int64_t N,
                                            int64_t K, float alpha, const float *A, int64_t ars, int64_t acs,
                                            const float *B, int64_t brs, int64_t bcs, float beta, float *C,
                                            int64_t rsc, int64_t csc, void *work, const float *Apre,
                                            const float *Bpre, const onnxc_sgemm_epi *epi)
{
    onnxc__sgemm_owned_share_at(sp, t, M, N, K, alpha, A, ars, acs, B, brs, bcs, beta, C, rsc, csc, work, Apre,
                                Bpre, epi);
}
#endif

ONNXC_GEMM_FN void onnxc__sgemm_owned(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                      int64_t ars, int64_t acs, const float *B, int64_t brs,
                                      int64_t bcs, float beta, float *C, int64_t rsc, int64_t csc,
                                      void *work, int nt, const float *Apre, const float *Bpre);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc__sgemm_owned(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                      int64_t ars, int64_t acs, const float *B, int64_t brs,
                                      int64_t bcs, float beta, float *C, int64_t rsc, int64_t csc,
                                      void *work, int nt, const float *Apre, const float *Bpre)
{
    const onnxc_sgemm_split sp = onnxc__sgemm_owned_split(M, N, K, nt, Apre != NULL);
    (void)nt;
    if (sp.shares == 1)   /* no region: even one with a false if() costs 0.2-0.3 us */
        onnxc__sgemm_owned_share(&sp, 0, M, N, K, alpha, A, ars, acs, B, brs, bcs, beta, C, rsc, csc, work,
                                 Apre, Bpre, NULL);
    else if (sp.shares > 1) {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t t = 0; t < sp.shares; ++t)
            onnxc__sgemm_owned_share(&sp, t, M, N, K, alpha, A, ars, acs, B, brs, bcs, beta, C, rsc, csc,
                                     work, Apre, Bpre, NULL);
    }
}
#endif

ONNXC_GEMM_FN void onnxc_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                               const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                               float *C, int64_t ldc, void *work, int num_threads);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                               const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                               float *C, int64_t ldc, void *work, int num_threads)
{
    /* element (i, k) of op(A) at A[i*ars + k*acs]; (k, j) of op(B) at B[k*brs + j*bcs] */
    const int64_t ars = transA ? 1 : lda, acs = transA ? lda : 1;
    const int64_t brs = transB ? 1 : ldb, bcs = transB ? ldb : 1;
    const int nt = num_threads > 0 ? num_threads : 1;
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        onnxc__sgemm_scale_c(M, N, beta, C, ldc);
        return;
    }
    if (M <= ONNXC_SGEMM_SMALL_M && onnxc__sgemm_small(M, N, K, alpha, A, ars, acs, B, brs, bcs, beta, C, ldc, nt))
        return;
    if (M == 1) { /* row vector times matrix: no packing */
        onnxc__sgemv(N, K, alpha, A, acs, B, brs, bcs, beta, C, 1, nt);
        return;
    }
    if (N == 1) { /* matrix times column vector */
        onnxc__sgemv(M, K, alpha, B, brs, A, acs, ars, beta, C, ldc, nt);
        return;
    }
    /* Register tiles pad M to MR and N to NR. When N is small (a 7x7 feature map) computing
     * C^T = op(B)^T op(A)^T wastes less; its tiles are stored transposed. */
    const double area = (double)onnxc__roundup(M, ONNXC_SGEMM_MR) * onnxc__roundup(N, ONNXC_SGEMM_NR);
    const double area_t = (double)onnxc__roundup(N, ONNXC_SGEMM_MR) * onnxc__roundup(M, ONNXC_SGEMM_NR);
    const int fits = onnxc__gmin(N, ONNXC_SGEMM_MCH) + onnxc__gmin(M, ONNXC_SGEMM_NC) <=
                     onnxc__gmin(M, ONNXC_SGEMM_MCH) + onnxc__gmin(N, ONNXC_SGEMM_NC); /* workspace */
    if (area_t < 0.9 * area && fits)
        onnxc__sgemm_blocked(N, M, K, alpha, B, bcs, brs, A, acs, ars, beta, C, 1, ldc, work, nt, NULL, NULL);
    else
        onnxc__sgemm_blocked(M, N, K, alpha, A, ars, acs, B, brs, bcs, beta, C, ldc, 1, work, nt, NULL, NULL);
}
#endif

/* ---- constant left operand (weights) packed once, multiplied many times --------------------- *
 * Y (M x N) = alpha * W (M x K) * B (K x N) + beta * Y, with W packed by onnxc_sgemm_wpack into
 * ONNXC_SGEMM_WPACK_BYTES(M, K) bytes and reused (a convolution: every image, every column chunk).
 * `swapped` (from onnxc_sgemm_w_swapped, for the typical N) picks the orientation: W as the
 * left operand (MR-row panels), or, for few columns, C^T = B^T W^T with W^T as the right
 * operand (NR panels). Pass the same value to wpack and wmul. */
#define ONNXC_SGEMM_WPACK_BYTES(M, K) ((int64_t)4 * ((M) + ONNXC_SGEMM_NR_MAX) * (K) + 64)

ONNXC_GEMM_INL int onnxc_sgemm_w_swapped(int64_t M, int64_t N)
{
    const double area = (double)onnxc__roundup(M, ONNXC_SGEMM_MR) * onnxc__roundup(N, ONNXC_SGEMM_NR);
    const double area_t = (double)onnxc__roundup(N, ONNXC_SGEMM_MR) * onnxc__roundup(M, ONNXC_SGEMM_NR);
    return area_t < 0.9 * area;
}

/* R lines (element (l, k) at X[l*ls + k*ks]) as [depth block][panel of W lines][kc][W]. */
ONNXC_GEMM_FN void onnxc__sgemm_prepack(int64_t R, int64_t K, const float *X, int64_t ls, int64_t ks,
                                        float *dst, const int W, int nt);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc__sgemm_prepack(int64_t R, int64_t K, const float *X, int64_t ls, int64_t ks,
                                        float *dst, const int W, int nt)
{
    const int64_t Rp = onnxc__roundup(R, W), npan = Rp / W;
    const int64_t nkb = (K + ONNXC_SGEMM_KC - 1) / ONNXC_SGEMM_KC;
    (void)nt;
#pragma omp parallel for num_threads(nt) if(R * K >= ONNXC_GEMM_PAR_MIN)
    for (int64_t t = 0; t < nkb * npan; ++t) {
        const int64_t pc = (t / npan) * ONNXC_SGEMM_KC, p = (t % npan) * W;
        const int64_t kc = onnxc__gmin(ONNXC_SGEMM_KC, K - pc);
        onnxc__sgemm_pack(onnxc__gmin(W, R - p), kc, X + p * ls + pc * ks, ls, ks, dst + pc * Rp + p * kc, W);
    }
}
#endif

ONNXC_GEMM_FN void onnxc_sgemm_wpack(int swapped, int64_t M, int64_t K, const float *W, int64_t ldw,
                                     void *dst, int num_threads);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_sgemm_wpack(int swapped, int64_t M, int64_t K, const float *W, int64_t ldw,
                                     void *dst, int num_threads)
{
    const int nt = num_threads > 0 ? num_threads : 1;
    if (M > 0 && K > 0)
        onnxc__sgemm_prepack(M, K, W, ldw, 1, onnxc__align64(dst),
                             swapped ? ONNXC_SGEMM_NR : ONNXC_SGEMM_MR, nt);
}
#endif

ONNXC_GEMM_FN void onnxc_sgemm_wmul(int swapped, int64_t M, int64_t N, int64_t K, float alpha, void *Wp,
                                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                                    void *work, int num_threads);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_sgemm_wmul(int swapped, int64_t M, int64_t N, int64_t K, float alpha, void *Wp,
                                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                                    void *work, int num_threads)
{
    const int nt = num_threads > 0 ? num_threads : 1;
    const float *wp = onnxc__align64(Wp);
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        onnxc_sgemm(0, 0, M, N, 0, alpha, NULL, 1, NULL, 1, beta, C, ldc, work, nt);
        return;
    }
    if (swapped)
        onnxc__sgemm_owned(N, M, K, alpha, B, 1, ldb, NULL, 0, 0, beta, C, 1, ldc, work, nt, NULL, wp);
    else
        onnxc__sgemm_owned(M, N, K, alpha, NULL, 0, 0, B, ldb, 1, beta, C, ldc, 1, work, nt, wp, NULL);
}
#endif

/* ---- constant right operand packed at compile time ------------------------------------------ *
 * C (M x N) = alpha * op(A) (M x K) * op(B) (K x N) + beta * C, op(B) a constant packed by
 * passes/prepack_gemm.py as onnxc__sgemm_prepack lays out its N columns in NR-wide panels
 * (64-byte aligned in the weight blob). No call packs B; threads own row panels of A (no
 * barriers). Workspace: ONNXC_SGEMM_WORK_BYTES(M, N, K). */
/* How onnxc_sgemm_bpacked shares C among nt threads, and share t of it (epi: NULL, or the
 * epilogue applied to each tile of the share as it is finished): a template that
 * fills C before the product or applies an activation after it runs the shares in its own
 * parallel loop (static schedule, one share per thread) and does that work on each share's
 * part (onnxc_sgemm_split_part) next to its product: no pass of its own, whose fork/join and
 * rows moved between cores cost an MLP at batch 32 and 2 threads 10% (measured). */
ONNXC_GEMM_INL onnxc_sgemm_split onnxc_sgemm_bpacked_split(int64_t M, int64_t N, int64_t K, int num_threads)
{
    return onnxc__sgemm_owned_split(M, N, K, num_threads > 0 ? num_threads : 1, 0);
}

ONNXC_GEMM_FN void onnxc_sgemm_bpacked_share(const onnxc_sgemm_split *sp, int64_t t, int transA, int64_t M,
                                             int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                                             const void *Bp, float beta, float *C, int64_t ldc, void *work,
                                             const onnxc_sgemm_epi *epi);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_sgemm_bpacked_share(const onnxc_sgemm_split *sp, int64_t t, int transA, int64_t M,
                                             int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                                             const void *Bp, float beta, float *C, int64_t ldc, void *work,
                                             const onnxc_sgemm_epi *epi)
{
    onnxc__sgemm_owned_share(sp, t, M, N, K, alpha, A, transA ? 1 : lda, transA ? lda : 1, NULL, 0, 0, beta,
                             C, ldc, 1, work, NULL, (const float *)Bp, epi);
}
#endif
/* the same in a copy of the model's own, for its large products: its callers' constants (M, N,
 * K, the leading dimensions, alpha, no epilogue) specialise the tile loops (BERT's projections
 * 0.97-0.98x the time of the shared kernel's) */
ONNXC_MODEL_FN void onnxc_sgemm_bpacked_share_here(const onnxc_sgemm_split *sp, int64_t t, int transA, int64_t M,
                                                   int64_t N, int64_t K, float alpha, const float *A,
                                                   int64_t lda, const void *Bp, float beta, float *C,
                                                   int64_t ldc, void *work, const onnxc_sgemm_epi *epi)
{
    onnxc__sgemm_owned_share_at(sp, t, M, N, K, alpha, A, transA ? 1 : lda, transA ? lda : 1, NULL, 0, 0, beta,
                                C, ldc, 1, work, NULL, (const float *)Bp, epi);
}

ONNXC_GEMM_FN void onnxc_sgemm_bpacked(int transA, int64_t M, int64_t N, int64_t K, float alpha,
                                       const float *A, int64_t lda, const void *Bp, float beta,
                                       float *C, int64_t ldc, void *work, int num_threads);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_sgemm_bpacked(int transA, int64_t M, int64_t N, int64_t K, float alpha,
                                       const float *A, int64_t lda, const void *Bp, float beta,
                                       float *C, int64_t ldc, void *work, int num_threads)
{
    const int nt = num_threads > 0 ? num_threads : 1;
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) {
        onnxc_sgemm(0, 0, M, N, 0, alpha, NULL, 1, NULL, 1, beta, C, ldc, work, nt);
        return;
    }
    onnxc__sgemm_owned(M, N, K, alpha, A, transA ? 1 : lda, transA ? lda : 1, NULL, 0, 0, beta, C, ldc, 1,
                       work, nt, NULL, (const float *)Bp);
}
#endif

/* ---- DGEMM: one row of C at a time (axpy or dot form), parallel over rows ------------------ */
ONNXC_GEMM_FN void onnxc_dgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, double alpha,
                               const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
                               double *C, int64_t ldc, void *work, int num_threads);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN void onnxc_dgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, double alpha,
                               const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
                               double *C, int64_t ldc, void *work, int num_threads)
{
    const int64_t ars = transA ? 1 : lda, acs = transA ? lda : 1;
    const int64_t brs = transB ? 1 : ldb, bcs = transB ? ldb : 1;
    const int nt = num_threads > 0 ? num_threads : 1;
    (void)work;
    if (M <= 0 || N <= 0)
        return;
    if (M == 1 || (double)N * (double)K >= ONNXC_GEMM_PAR_MIN) {
        for (int64_t i = 0; i < M; ++i)
            onnxc__dgemv(N, K, alpha, A + i * ars, acs, B, brs, bcs, beta, C + i * ldc, 1, nt);
        return;
    }
#pragma omp parallel for num_threads(nt) if((double)M * N * K >= ONNXC_GEMM_PAR_MIN)
    for (int64_t i = 0; i < M; ++i)
        onnxc__dgemv(N, K, alpha, A + i * ars, acs, B, brs, bcs, beta, C + i * ldc, 1, 1);
}
#endif

/* ---- exact integer products: C = A * B (wrapping, as numpy) -------------------------------- */
#define ONNXC__IGEMM_SIG(SUFFIX, T)                                                             \
    ONNXC_GEMM_FN void onnxc_igemm_##SUFFIX(int transA, int transB, int64_t M, int64_t N,      \
                                            int64_t K, const T *A, int64_t lda, const T *B,    \
                                            int64_t ldb, T *C, int64_t ldc, int num_threads)
#if !ONNXC_KERNEL_BODIES
#define ONNXC__DEFINE_IGEMM(SUFFIX, T) ONNXC__IGEMM_SIG(SUFFIX, T);
#else
#define ONNXC__DEFINE_IGEMM(SUFFIX, T)                                                          \
    ONNXC__DEFINE_DOT(onnxc__igemv_##SUFFIX##_dot, T)                                          \
    ONNXC__DEFINE_GEMV(onnxc__igemv_##SUFFIX, T, int, ONNXC__STORE_EXACT)                      \
    ONNXC__IGEMM_SIG(SUFFIX, T);                                                               \
    ONNXC__IGEMM_SIG(SUFFIX, T)                                                                \
    {                                                                                          \
        const int64_t ars = transA ? 1 : lda, acs = transA ? lda : 1;                          \
        const int64_t brs = transB ? 1 : ldb, bcs = transB ? ldb : 1;                          \
        const int nt = num_threads > 0 ? num_threads : 1;                                      \
        (void)nt;                                                                              \
        _Pragma("omp parallel for num_threads(nt) if((double)M * N * K >= ONNXC_GEMM_PAR_MIN)") \
        for (int64_t i = 0; i < M; ++i)                                                        \
            onnxc__igemv_##SUFFIX(N, K, 1, A + i * ars, acs, B, brs, bcs, 0, C + i * ldc, 1, 1); \
    }
#endif

ONNXC__DEFINE_IGEMM(int32, int32_t)
ONNXC__DEFINE_IGEMM(int64, int64_t)
ONNXC__DEFINE_IGEMM(uint32, uint32_t)
ONNXC__DEFINE_IGEMM(uint64, uint64_t)

#endif
