/* onnxc recurrent step products over a gate-interleaved R (passes/prepack_rnn.py).
 *
 *   onnxc_rnn_tile_G<g>(K, nr, H, X, bias, Rb, out)
 *       out[r][q] = X[r][q] + bias[q] + sum_k H[r][k] * Rb[k * g * 16 + q]   (r < nr <= 4, q < g * 16)
 *       G3 (GRU, linear_before_reset): X is added to gates 0 and 1 only (the candidate gate
 *       multiplies its R product by the reset gate first); bias: the block's summed biases
 *
 * Rb is one block of ONNXC_RNN_U = 16 hidden units: K rows of g * 16 floats (gate 0's 16
 * columns, then gate 1's, ...), so a block's gates leave the product together and are applied
 * straight away (L1) instead of round-tripping a whole H R^T row. H[r], X[r]: row pointers
 * (batch entries still running). One R row (g vectors) is loaded once per k for every row of
 * the group; batch 1 splits k over two accumulator sets (FMA latency: 8 chains for g = 4).
 * The step streams R from L2; the caller walks blocks in alternating order on alternate
 * steps so the block it ended with is still in L1 when the next step starts.
 */
#ifndef ONNXC_RNN_H
#define ONNXC_RNN_H

#include <stdint.h>
#include <string.h>

#define ONNXC_RNN_U 16   /* hidden units per block (mirrors passes/prepack_rnn.py U) */

/* multiply-adds per step below which the steps stay on one thread (a barrier per step costs
 * ~0.1-0.3 us; one team for the whole sequence) */
#ifndef ONNXC_RNN_PAR_MIN
#define ONNXC_RNN_PAR_MIN 16384
#endif

#if defined(_OPENMP)
#include <omp.h>
#define ONNXC_RNN_TID() omp_get_thread_num()
#define ONNXC_RNN_NTH() omp_get_num_threads()
#else
#define ONNXC_RNN_TID() 0
#define ONNXC_RNN_NTH() 1
#endif

/* Gates: tanh(x) = x P(x^2) / Q(x^2), the odd 13/6 minimax fit Eigen and onnxruntime's MLAS use
 * (max error 3.1e-7 relative, measured), and sigmoid(x) = 1/2 + tanh(x/2)/2 with the same fit, its
 * coefficients scaled by powers of two (the same bits as tanh(x/2) / 2: no multiply by 1/2 on the
 * way in or out): 1.6e-7 absolute, so tiny results lose their relative accuracy, as in
 * onnxruntime's LSTM. One division, no exp: the gate math is a long chain per block and its
 * instructions share the core with the step's R stream (fewer is faster: 16 and 17 here, were
 * 19 and 21). x is
 * clamped to +-9 (tanh rounds to 1 there: the fit gives exactly +-1 at 9) and the result to
 * [-1, 1] (the fit overshoots by 1 ulp near 8.3), so +-inf give +-1 (sigmoid 1 and 0); NaN
 * passes the clamps. LSTM's tanh gates use onnxc_rnn_tanhf; RNN and GRU use onnxc_vtanhf
 * (their recurrence amplifies tanh's error more). */
#define ONNXC__RNN_RATIONAL(x, c, s2, lim)                                                        \
    const float z = x * x;                                                                     \
    float p = -2.76076847742355e-16f * (s2 * s2 * s2 * s2 * s2 * s2);                          \
    p = p * z + 2.00018790482477e-13f * (s2 * s2 * s2 * s2 * s2);                              \
    p = p * z + -8.60467152213735e-11f * (s2 * s2 * s2 * s2);                                  \
    p = p * z + 5.12229709037114e-08f * (s2 * s2 * s2);                                        \
    p = p * z + 1.48572235717979e-05f * (s2 * s2);                                             \
    p = p * z + 6.37261928875436e-04f * s2;                                                    \
    p = p * z + 4.89352455891786e-03f;                                                         \
    float q = 1.19825839466702e-06f * (c * s2 * s2 * s2);                                      \
    q = q * z + 1.18534705686654e-04f * (c * s2 * s2);                                         \
    q = q * z + 2.26843463243900e-03f * (c * s2);                                              \
    q = q * z + 4.89352518554385e-03f * c;                                                     \
    float r = x * p / q;                                                                       \
    r = r > lim ? lim : r;   /* NaN passes both */                                             \
    r = r < -lim ? -lim : r

/* always inlined where it can be said, as onnxc_vmath.h's functions (a call per element in a
 * large graph function keeps the gate loops scalar) */
#if defined(__GNUC__)
#define ONNXC__RNN_FN static inline __attribute__((always_inline))
#else
#define ONNXC__RNN_FN static inline
#endif

ONNXC__RNN_FN float onnxc_rnn_tanhf(float x0)
{
    float x = x0 > 9.0f ? 9.0f : x0;   /* NaN passes both */
    x = x < -9.0f ? -9.0f : x;
    ONNXC__RNN_RATIONAL(x, 1.0f, 1.0f, 1.0f);
    return r;
}

/* 1/2 + tanh(x/2)/2: x P(x^2/4) / (4 Q(x^2/4)) (powers of two: exact) */
ONNXC__RNN_FN float onnxc_rnn_sigmoidf(float x0)
{
    float x = x0 > 18.0f ? 18.0f : x0;
    x = x < -18.0f ? -18.0f : x;
    ONNXC__RNN_RATIONAL(x, 4.0f, 0.25f, 0.5f);
    return 0.5f + r;
}

#if defined(__GNUC__) && !defined(ONNXC_GEMM_PLAIN_C)
/* The native vector: a 16-unit gate is 1 (AVX-512), 2 (AVX) or 4 (SSE, NEON) of them. A tile
 * keeps at most ~half the vector registers as accumulators (ONNXC__RNN_TILE's NV x MR x KS):
 * wider blocks are done as column parts of NV vectors, each re-reading its H rows (L1). With
 * 64-byte vectors on AVX2, a 4-gate block's 16 accumulators were 32 ymm and spilled every k:
 * the 128-unit LSTM's steps took 1.2 ms instead of ~0.1. */
#if defined(__AVX512F__)
#define ONNXC__RNN_VL 16
#elif defined(__AVX__)
#define ONNXC__RNN_VL 8
#else
#define ONNXC__RNN_VL 4
#endif
typedef float onnxc__rv __attribute__((vector_size(ONNXC__RNN_VL * 4)));
static inline __attribute__((always_inline)) onnxc__rv onnxc__rvload(const float *p)
{
    onnxc__rv v;
    memcpy(&v, p, sizeof v);
    return v;
}
/* R's vectors used by several rows, loaded once: GCC folds them into every row's multiply-add as
 * memory operands (2 loads per FMA on a 2-row tile: load-bound) though registers are free */
#if defined(__AVX__) && !defined(__AVX512F__)
#define ONNXC__RNN_IN_REG(v) __asm__("" : "+x"(v))
#else
#define ONNXC__RNN_IN_REG(v) ((void)0)
#endif
/* out[r][c0 + q] for q < NV * VL of a block G * 16 wide: X added where the column's gate < XG */
#define ONNXC__RNN_PART(G, MR, NV, KS, XG)                                                         \
    static inline __attribute__((always_inline)) void onnxc__rnn_p##G##_##MR(                 \
        int64_t K, const float *const *H, const float *const *X, const float *bias, const float *Rb, \
        float *out, const int c0)                                                              \
    {                                                                                          \
        onnxc__rv acc[KS][MR][NV];                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r)                                   \
        _Pragma("GCC unroll 16") for (int v = 0; v < NV; ++v) {                                \
            const int c = c0 + v * ONNXC__RNN_VL;                                              \
            acc[0][r][v] = onnxc__rvload(bias + c);                                            \
            if (c / ONNXC_RNN_U < XG)                                                          \
                acc[0][r][v] += onnxc__rvload(X[r] + c);                                       \
            _Pragma("GCC unroll 8") for (int s = 1; s < KS; ++s) acc[s][r][v] = (onnxc__rv){0}; \
        }                                                                                      \
        int64_t k = 0;                                                                         \
        for (const int64_t kend = K / KS * KS; k < kend; k += KS)                              \
            _Pragma("GCC unroll 8") for (int s = 0; s < KS; ++s) {                             \
                const float *b = Rb + (k + s) * (G * ONNXC_RNN_U) + c0;                        \
                onnxc__rv bv[NV];                                                              \
                _Pragma("GCC unroll 16") for (int v = 0; v < NV; ++v) {                        \
                    bv[v] = onnxc__rvload(b + v * ONNXC__RNN_VL);                              \
                    if (MR > 1)                                                                \
                        ONNXC__RNN_IN_REG(bv[v]);                                              \
                }                                                                              \
                _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r) {                         \
                    const float a = H[r][k + s];                                               \
                    _Pragma("GCC unroll 16") for (int v = 0; v < NV; ++v) acc[s][r][v] += a * bv[v]; \
                }                                                                              \
            }                                                                                  \
        for (; k < K; ++k) {                                                                   \
            const float *b = Rb + k * (G * ONNXC_RNN_U) + c0;                                  \
            _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r) {                             \
                const float a = H[r][k];                                                       \
                _Pragma("GCC unroll 16") for (int v = 0; v < NV; ++v)                          \
                    acc[0][r][v] += a * onnxc__rvload(b + v * ONNXC__RNN_VL);                  \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r)                                   \
        _Pragma("GCC unroll 16") for (int v = 0; v < NV; ++v) {                                \
            onnxc__rv t = acc[0][r][v];                                                        \
            _Pragma("GCC unroll 8") for (int s = 1; s < KS; ++s) t += acc[s][r][v];            \
            memcpy(out + r * (G * ONNXC_RNN_U) + c0 + v * ONNXC__RNN_VL, &t, sizeof t);        \
        }                                                                                      \
    }
/* a tile: the block's G * 16 columns as parts of NV vectors */
#define ONNXC__RNN_TILE(G, MR, NV, KS, XG)                                                         \
    ONNXC__RNN_PART(G, MR, NV, KS, XG)                                                         \
    static inline __attribute__((always_inline)) void onnxc__rnn_t##G##_##MR(                 \
        int64_t K, const float *const *H, const float *const *X, const float *bias, const float *Rb, float *out) \
    {                                                                                          \
        _Pragma("GCC unroll 16") for (int c0 = 0; c0 < G * ONNXC_RNN_U; c0 += NV * ONNXC__RNN_VL) \
            onnxc__rnn_p##G##_##MR(K, H, X, bias, Rb, out, c0);                                \
    }
#else
#define ONNXC__RNN_TILE(G, MR, NV, KS, XG)                                                             \
    static inline void onnxc__rnn_t##G##_##MR(int64_t K, const float *const *H, const float *const *X, \
                                             const float *bias, const float *Rb, float *out)   \
    {                                                                                          \
        for (int r = 0; r < MR; ++r)                                                           \
            for (int q = 0; q < G * ONNXC_RNN_U; ++q) {                                        \
                float s = bias[q] + (q < XG * ONNXC_RNN_U ? X[r][q] : 0.0f);                   \
                for (int64_t k = 0; k < K; ++k)                                                \
                    s += H[r][k] * Rb[k * (G * ONNXC_RNN_U) + q];                              \
                out[r * G * ONNXC_RNN_U + q] = s;                                              \
            }                                                                                  \
    }
#endif

/* Step hand-off inside a team: thread `self` posts how far it got (a count that only grows) in its
 * own cache line of `flags` (ONNXC_RNN_FLAG_STRIDE int64 apart), and waits until every other
 * thread has posted at least n (no barrier's shared counter). ONNXC_RNN_TEAM_MAX threads at most. */
#define ONNXC_RNN_TEAM_MAX 64
#define ONNXC_RNN_FLAG_STRIDE 8
#if defined(__GNUC__) && defined(_OPENMP)
#define ONNXC_RNN_TEAM 1
#include <sched.h>
static inline void onnxc_rnn_post(int64_t *flags, int self, int64_t n)
{
    __atomic_store_n(&flags[self * ONNXC_RNN_FLAG_STRIDE], n, __ATOMIC_RELEASE);
}
static inline void onnxc_rnn_wait(const int64_t *flags, int nth, int self, int64_t n)
{
    for (int t = 0; t < nth; ++t) {
        if (t == self)
            continue;
        for (long spins = 0; __atomic_load_n(&flags[t * ONNXC_RNN_FLAG_STRIDE], __ATOMIC_ACQUIRE) < n; ++spins) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            if (spins > 20000)        /* the other thread is not running: give the core up */
                sched_yield();
        }
    }
}
#else
#define ONNXC_RNN_TEAM 0            /* no portable atomics: the steps stay on one thread */
#endif

/* a call per block: inlined into the step loop, the gate math overlapped the next block's
 * loads less (measured 5-10% slower) */
#if defined(__GNUC__)
#define ONNXC__RNN_NOINLINE __attribute__((noinline, unused))
#else
#define ONNXC__RNN_NOINLINE
#endif

/* ONNXC__RNN_G<g>: NV (vectors per part) and KS (accumulator sets) for tiles of 1, 2 and 4 rows.
 * Batch 1 splits k (AVX-512: four ways, measured 8% faster than two at H = 128, the loads stay in
 * flight); row groups have enough independent chains already. Narrower vectors: parts of <= 12
 * accumulators (16 registers). */
#if ONNXC__RNN_VL == 16
#define ONNXC__RNN_G1 1, 8, 1, 1, 1, 1
#define ONNXC__RNN_G3 3, 4, 3, 1, 3, 1
#define ONNXC__RNN_G4 4, 4, 4, 1, 4, 1
#elif ONNXC__RNN_VL == 8
#define ONNXC__RNN_G1 2, 4, 2, 2, 2, 1
#define ONNXC__RNN_G3 6, 2, 6, 1, 2, 1
#define ONNXC__RNN_G4 8, 1, 4, 1, 2, 1
#else
#define ONNXC__RNN_G1 4, 2, 4, 1, 2, 1
#define ONNXC__RNN_G3 12, 1, 6, 1, 3, 1
#define ONNXC__RNN_G4 8, 1, 4, 1, 2, 1
#endif
#define ONNXC__RNN_TILES(...) ONNXC__RNN_TILES_(__VA_ARGS__)
#define ONNXC__RNN_TILES_(G, XG, NV1, KS1, NV2, KS2, NV4, KS4)                                     \
    ONNXC__RNN_TILE(G, 1, NV1, KS1, XG)                                                        \
    ONNXC__RNN_TILE(G, 2, NV2, KS2, XG)                                                        \
    ONNXC__RNN_TILE(G, 4, NV4, KS4, XG)                                                        \
    static ONNXC__RNN_NOINLINE void onnxc_rnn_tile_G##G(int64_t K, int nr, const float *const *H, const float *const *X, \
                                           const float *bias, const float *Rb, float *out)   \
    {                                                                                          \
        if (nr == 4)                                                                           \
            onnxc__rnn_t##G##_4(K, H, X, bias, Rb, out);                                             \
        else if (nr >= 2) {                                                                    \
            onnxc__rnn_t##G##_2(K, H, X, bias, Rb, out);                                             \
            if (nr == 3)                                                                       \
                onnxc__rnn_t##G##_1(K, H + 2, X + 2, bias, Rb, out + 2 * G * ONNXC_RNN_U);           \
        } else                                                                                 \
            onnxc__rnn_t##G##_1(K, H, X, bias, Rb, out);                                             \
    }

ONNXC__RNN_TILES(1, 1, ONNXC__RNN_G1)
ONNXC__RNN_TILES(3, 2, ONNXC__RNN_G3)
ONNXC__RNN_TILES(4, 4, ONNXC__RNN_G4)

#endif
