/* onnxc_gemm_small.h: the products where one side is a vector or has few rows (matrix-vector
 * products for every type, and SGEMM with M <= ONNXC_SGEMM_SMALL_M streaming B once). Part of
 * onnxc_gemm.h, which includes it after the register block; not included on its own. */
#ifndef ONNXC_GEMM_SMALL_H
#define ONNXC_GEMM_SMALL_H

#ifndef ONNXC_GEMM_H
#error "include onnxc_gemm.h"
#endif

/* ---- matrix-vector products (one side of the GEMM is a vector) ----------------------------- *
 * y[j*incy] = alpha * sum_k x[k*incx] * m[k*sk + j*sj] + beta * y[j*incy],  j < n.
 * Defined per type by a macro so float, double and the integer types share it; STORE(acc, old)
 * makes the stored value. */
#define ONNXC__GEMV_CHUNK 256
#define ONNXC__GEMV_SIG(NAME, T, AL)                                                            \
    ONNXC_GEMM_FN void NAME(int64_t n, int64_t K, AL alpha, const T *x, int64_t incx,          \
                            const T *m, int64_t sk, int64_t sj, AL beta, T *y, int64_t incy,  \
                            int nt)
#if !ONNXC_KERNEL_BODIES
#define ONNXC__DEFINE_GEMV(NAME, T, AL, STORE) ONNXC__GEMV_SIG(NAME, T, AL);
#else
#define ONNXC__DEFINE_GEMV(NAME, T, AL, STORE)                                                  \
    ONNXC__GEMV_SIG(NAME, T, AL);                                                              \
    ONNXC__GEMV_SIG(NAME, T, AL)                                                               \
    {                                                                                          \
        const int64_t nchunks = (n + ONNXC__GEMV_CHUNK - 1) / ONNXC__GEMV_CHUNK;               \
        (void)alpha; (void)beta; (void)nt;                                                     \
        _Pragma("omp parallel for num_threads(nt) if(n * K >= ONNXC_GEMM_PAR_MIN)")            \
        for (int64_t ch = 0; ch < nchunks; ++ch) {                                             \
            const int64_t j0 = ch * ONNXC__GEMV_CHUNK;                                         \
            const int64_t nj = onnxc__gmin(ONNXC__GEMV_CHUNK, n - j0);                         \
            T acc[ONNXC__GEMV_CHUNK];                                                          \
            if (sj == 1) { /* rows of m are contiguous: axpy form */                           \
                for (int64_t j = 0; j < nj; ++j)                                               \
                    acc[j] = 0;                                                                \
                for (int64_t k = 0; k < K; ++k) {                                              \
                    const T xv = x[k * incx];                                                  \
                    const T *mr = m + k * sk + j0;                                             \
                    for (int64_t j = 0; j < nj; ++j)                                           \
                        acc[j] += xv * mr[j];                                                  \
                }                                                                              \
            } else { /* dot products */                                                        \
                for (int64_t j = 0; j < nj; ++j)                                               \
                    acc[j] = NAME##_dot(K, x, incx, m + (j0 + j) * sj, sk);                    \
            }                                                                                  \
            for (int64_t j = 0; j < nj; ++j) {                                                 \
                T *yp = y + (j0 + j) * incy;                                                   \
                const T s = acc[j];                                                            \
                *yp = STORE(s, *yp);                                                           \
            }                                                                                  \
        }                                                                                      \
    }
#endif

#define ONNXC__DEFINE_DOT(NAME, T)                                                              \
    ONNXC_GEMM_INL T NAME(int64_t K, const T *x, int64_t incx, const T *m, int64_t sk)         \
    {                                                                                          \
        T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                                      \
        int64_t k = 0;                                                                         \
        if (incx == 1 && sk == 1)                                                              \
            for (; k + 4 <= K; k += 4) {                                                       \
                s0 += x[k] * m[k];                                                             \
                s1 += x[k + 1] * m[k + 1];                                                     \
                s2 += x[k + 2] * m[k + 2];                                                     \
                s3 += x[k + 3] * m[k + 3];                                                     \
            }                                                                                  \
        for (; k < K; ++k)                                                                     \
            s0 += x[k * incx] * m[k * sk];                                                     \
        return (s0 + s1) + (s2 + s3);                                                          \
    }

#if defined(ONNXC_GEMM_VEC)
/* horizontal sum of one vector as a tree (depth log2(VL), not VL dependent adds) */
ONNXC_GEMM_INL float onnxc__vsum(onnxc_vf v)
{
    float t[ONNXC_SGEMM_VL];
    memcpy(t, &v, sizeof t);
#pragma GCC unroll 8
    for (int w = ONNXC_SGEMM_VL / 2; w >= 1; w /= 2)
#pragma GCC unroll 8
        for (int l = 0; l < w; ++l)
            t[l] += t[l + w];
    return t[0];
}
#endif

/* float dot: vector accumulators (gcc does not vectorise a float reduction without -ffast-math) */
ONNXC_GEMM_INL float onnxc__sgemv_dot(int64_t K, const float *x, int64_t incx, const float *m, int64_t sk)
{
    int64_t k = 0;
    float s = 0.0f;
#if defined(ONNXC_GEMM_VEC)
    if (incx == 1 && sk == 1 && K >= 4 * ONNXC_SGEMM_VL) {
        onnxc_vf v0 = {0}, v1 = {0}, v2 = {0}, v3 = {0};
        for (; k + 4 * ONNXC_SGEMM_VL <= K; k += 4 * ONNXC_SGEMM_VL) {
            v0 += onnxc__vload(x + k) * onnxc__vload(m + k);
            v1 += onnxc__vload(x + k + ONNXC_SGEMM_VL) * onnxc__vload(m + k + ONNXC_SGEMM_VL);
            v2 += onnxc__vload(x + k + 2 * ONNXC_SGEMM_VL) * onnxc__vload(m + k + 2 * ONNXC_SGEMM_VL);
            v3 += onnxc__vload(x + k + 3 * ONNXC_SGEMM_VL) * onnxc__vload(m + k + 3 * ONNXC_SGEMM_VL);
        }
        v0 = (v0 + v1) + (v2 + v3);
        for (int l = 0; l < ONNXC_SGEMM_VL; ++l)
            s += v0[l];
    }
#endif
    for (; k < K; ++k)
        s += x[k * incx] * m[k * sk];
    return s;
}

#define ONNXC__STORE_FP(s, old) (beta == 0 ? alpha * (s) : alpha * (s) + beta * (old))
#define ONNXC__STORE_EXACT(s, old) (s)

ONNXC__DEFINE_GEMV(onnxc__sgemv, float, float, ONNXC__STORE_FP)
ONNXC__DEFINE_DOT(onnxc__dgemv_dot, double)
ONNXC__DEFINE_GEMV(onnxc__dgemv, double, double, ONNXC__STORE_FP)

ONNXC_GEMM_INL int64_t onnxc__roundup(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* ---- few rows (M <= ONNXC_SGEMM_SMALL_M): stream B once, no packing ---------------------- *
 * Batch-1 layers (Gemm/MatMul/RNN steps) are memory-bound on B: reading it once, in place, beats
 * packing it. Columns are split over threads. B stored N x K (transB, the usual weight layout):
 * eight columns at a time, each a vector dot product over k (the four B rows stay in L1 while
 * every row of A uses them). B stored K x N: vector accumulators over a chunk of columns. */
#define ONNXC_SGEMM_SMALL_M 8
#define ONNXC__SMALL_NB 128  /* columns per task */


ONNXC_GEMM_INL void onnxc__sgemm_small_tn(int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha,
                                          const float *A, int64_t ars, const float *B, int64_t bcs,
                                          float beta, float *C, int64_t ldc)
{
    int64_t j = j0;
#if defined(ONNXC_GEMM_VEC)
    const int64_t kv = K / ONNXC_SGEMM_VL * ONNXC_SGEMM_VL;
    for (; j + 8 <= j1; j += 8) {   /* 8 independent FMA chains hide the FMA latency */
        const float *b = B + j * bcs;
        for (int64_t i = 0; i < M; ++i) {
            const float *a = A + i * ars;
            onnxc_vf acc[8] = {{0}};
            for (int64_t k = 0; k < kv; k += ONNXC_SGEMM_VL) {
                const onnxc_vf av = onnxc__vload(a + k);
#pragma GCC unroll 8
                for (int q = 0; q < 8; ++q)
                    acc[q] += av * onnxc__vload(b + q * bcs + k);
            }
            /* pairwise tree over the 8 vectors, then each is reduced */
            float r[8];
#pragma GCC unroll 8
            for (int q = 0; q < 8; ++q) {
                r[q] = onnxc__vsum(acc[q]);
                for (int64_t k = kv; k < K; ++k)
                    r[q] += a[k] * b[q * bcs + k];
            }
            float *c = C + i * ldc + j;
            for (int q = 0; q < 8; ++q)
                c[q] = beta == 0.0f ? alpha * r[q] : alpha * r[q] + beta * c[q];
        }
    }
#endif
    for (; j < j1; ++j)
        for (int64_t i = 0; i < M; ++i) {
            const float r = onnxc__sgemv_dot(K, A + i * ars, 1, B + j * bcs, 1);
            float *c = C + i * ldc + j;
            *c = beta == 0.0f ? alpha * r : alpha * r + beta * *c;
        }
}

ONNXC_GEMM_INL void onnxc__sgemm_small_nn(int64_t M, int64_t j0, int64_t j1, int64_t K, float alpha,
                                          const float *A, int64_t ars, int64_t acs, const float *B,
                                          int64_t brs, float beta, float *C, int64_t ldc)
{
    int64_t j = j0;
#if defined(ONNXC_GEMM_VEC)
    enum { NV = 8, W = 8 * ONNXC_SGEMM_VL };
    for (; j + W <= j1; j += W)
        for (int64_t i = 0; i < M; ++i) {
            const float *a = A + i * ars;
            onnxc_vf s[NV] = {{0}};
            for (int64_t k = 0; k < K; ++k) {
                const float av = a[k * acs];
                const float *b = B + k * brs + j;
#pragma GCC unroll 8
                for (int v = 0; v < NV; ++v)
                    s[v] += av * onnxc__vload(b + v * ONNXC_SGEMM_VL);
            }
            float *c = C + i * ldc + j;
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) {
                float *p = c + v * ONNXC_SGEMM_VL;
                onnxc__vstore(p, beta == 0.0f ? alpha * s[v] : alpha * s[v] + beta * onnxc__vload(p));
            }
        }
#endif
    if (j < j1)
        for (int64_t i = 0; i < M; ++i)
            onnxc__sgemv(j1 - j, K, alpha, A + i * ars, acs, B + j, brs, 1, beta, C + i * ldc + j, 1, 1);
}

/* C (M x N, row stride ldc) = alpha * op(A) op(B) + beta * C for M <= ONNXC_SGEMM_SMALL_M;
 * returns 0 (nothing done) when neither operand layout suits it. */
ONNXC_GEMM_FN int onnxc__sgemm_small(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                     int64_t ars, int64_t acs, const float *B, int64_t brs, int64_t bcs,
                                     float beta, float *C, int64_t ldc, int nt);
#if ONNXC_KERNEL_BODIES
ONNXC_GEMM_FN int onnxc__sgemm_small(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                     int64_t ars, int64_t acs, const float *B, int64_t brs, int64_t bcs,
                                     float beta, float *C, int64_t ldc, int nt)
{
    const int tn = brs == 1 && acs == 1 && M > 1 && M <= 4, nn = bcs == 1;   /* measured: elsewhere the
                                                                      dots or packing win */
    if (!tn && !nn)
        return 0;
    const int64_t ntask = (N + ONNXC__SMALL_NB - 1) / ONNXC__SMALL_NB;
    (void)nt;
#pragma omp parallel for num_threads(nt) if(nt > 1 && (double)M * N * K >= ONNXC_GEMM_PAR_MIN)
    for (int64_t t = 0; t < ntask; ++t) {
        const int64_t j0 = t * ONNXC__SMALL_NB, j1 = onnxc__gmin(j0 + ONNXC__SMALL_NB, N);
        if (tn)
            onnxc__sgemm_small_tn(M, j0, j1, K, alpha, A, ars, B, bcs, beta, C, ldc);
        else
            onnxc__sgemm_small_nn(M, j0, j1, K, alpha, A, ars, acs, B, brs, beta, C, ldc);
    }
    return 1;
}
#endif

/* C = beta * C (0 when beta is 0, whatever C held): a product with an empty depth */
ONNXC_GEMM_INL void onnxc__sgemm_scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
            C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

#endif
