/* onnxc recurrent step products over a gate-interleaved R (passes/prepack_rnn.py).
 *
 *   onnxc_rnn_tile_G<g>(K, nr, H, X, Rb, out)
 *       out[r][q] = X[r][q] + sum_k H[r][k] * Rb[k * g * 16 + q]   (r < nr <= 4, q < g * 16)
 *       G3 (GRU, linear_before_reset): X is added to gates 0 and 1 only (the candidate gate
 *       multiplies its R product by the reset gate first)
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

#if defined(__GNUC__) && !defined(ONNXC_GEMM_PLAIN_C)
typedef float onnxc__rv __attribute__((vector_size(64)));
static inline __attribute__((always_inline)) onnxc__rv onnxc__rvload(const float *p)
{
    onnxc__rv v;
    memcpy(&v, p, sizeof v);
    return v;
}
#define ONNXC__RNN_TILE(G, MR, KS, XG)                                                             \
    static inline __attribute__((always_inline)) void onnxc__rnn_t##G##_##MR(                 \
        int64_t K, const float *const *H, const float *const *X, const float *Rb, float *out)   \
    {                                                                                          \
        onnxc__rv acc[KS][MR][G];                                                              \
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r)                                   \
        _Pragma("GCC unroll 4") for (int g = 0; g < G; ++g) {                                  \
            acc[0][r][g] = g < XG ? onnxc__rvload(X[r] + g * ONNXC_RNN_U) : (onnxc__rv){0};    \
            _Pragma("GCC unroll 4") for (int s = 1; s < KS; ++s) acc[s][r][g] = (onnxc__rv){0}; \
        }                                                                                      \
        int64_t k = 0;                                                                         \
        for (const int64_t kend = K / KS * KS; k < kend; k += KS)                              \
            _Pragma("GCC unroll 4") for (int s = 0; s < KS; ++s) {                             \
                const float *b = Rb + (k + s) * (G * ONNXC_RNN_U);                             \
                onnxc__rv bv[G];                                                               \
                _Pragma("GCC unroll 4") for (int g = 0; g < G; ++g)                            \
                    bv[g] = onnxc__rvload(b + g * ONNXC_RNN_U);                                \
                _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r) {                         \
                    const float a = H[r][k + s];                                               \
                    _Pragma("GCC unroll 4") for (int g = 0; g < G; ++g) acc[s][r][g] += a * bv[g]; \
                }                                                                              \
            }                                                                                  \
        for (; k < K; ++k) {                                                                   \
            const float *b = Rb + k * (G * ONNXC_RNN_U);                                       \
            _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r) {                             \
                const float a = H[r][k];                                                       \
                _Pragma("GCC unroll 4") for (int g = 0; g < G; ++g)                            \
                    acc[0][r][g] += a * onnxc__rvload(b + g * ONNXC_RNN_U);                    \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 4") for (int r = 0; r < MR; ++r)                                   \
        _Pragma("GCC unroll 4") for (int g = 0; g < G; ++g) {                                  \
            onnxc__rv t = acc[0][r][g];                                                        \
            _Pragma("GCC unroll 4") for (int s = 1; s < KS; ++s) t += acc[s][r][g];            \
            memcpy(out + (r * G + g) * ONNXC_RNN_U, &t, sizeof t);                             \
        }                                                                                      \
    }
#else
#define ONNXC__RNN_TILE(G, MR, KS, XG)                                                             \
    static inline void onnxc__rnn_t##G##_##MR(int64_t K, const float *const *H, const float *const *X, \
                                             const float *Rb, float *out)                      \
    {                                                                                          \
        for (int r = 0; r < MR; ++r)                                                           \
            for (int q = 0; q < G * ONNXC_RNN_U; ++q) {                                        \
                float s = q < XG * ONNXC_RNN_U ? X[r][q] : 0.0f;                               \
                for (int64_t k = 0; k < K; ++k)                                                \
                    s += H[r][k] * Rb[k * (G * ONNXC_RNN_U) + q];                              \
                out[r * G * ONNXC_RNN_U + q] = s;                                              \
            }                                                                                  \
    }
#endif

/* accumulator sets: batch 1 wants >= 8 independent FMA chains; row groups have them already */
#define ONNXC__RNN_TILES(G, KS1, XG)                                                              \
    ONNXC__RNN_TILE(G, 1, KS1, XG)                                                                \
    ONNXC__RNN_TILE(G, 2, 1, XG)                                                                \
    ONNXC__RNN_TILE(G, 4, 1, XG)                                                                \
    static inline void onnxc_rnn_tile_G##G(int64_t K, int nr, const float *const *H, const float *const *X, \
                                           const float *Rb, float *out)                        \
    {                                                                                          \
        if (nr == 4)                                                                           \
            onnxc__rnn_t##G##_4(K, H, X, Rb, out);                                             \
        else if (nr >= 2) {                                                                    \
            onnxc__rnn_t##G##_2(K, H, X, Rb, out);                                             \
            if (nr == 3)                                                                       \
                onnxc__rnn_t##G##_1(K, H + 2, X + 2, Rb, out + 2 * G * ONNXC_RNN_U);           \
        } else                                                                                 \
            onnxc__rnn_t##G##_1(K, H, X, Rb, out);                                             \
    }

ONNXC__RNN_TILES(1, 4, 1)
ONNXC__RNN_TILES(3, 2, 2)
ONNXC__RNN_TILES(4, 2, 4)

#endif
