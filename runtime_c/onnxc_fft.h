/* onnxc FFT: in-place complex DFT of any length, in double.
 *   X[k] = sum_t x[t] * exp(sign * 2*pi*i * k*t / n)      (no scaling; sign is -1 or +1)
 * Powers of two: iterative radix-2. Other lengths: direct O(n^2) up to ONNXC_FFT_DIRECT_MAX,
 * Bluestein (chirp-z through a power-of-two FFT) above it. Twiddles are computed with cos/sin of
 * exactly reduced angles (no recurrences), so errors stay near one ulp per stage.
 * onnxc_fft_work(n) is the workspace in doubles; the compiler computes the same sizes. */
#ifndef ONNXC_FFT_H
#define ONNXC_FFT_H

#include <stdint.h>
#include <math.h>

#ifdef _OPENMP
#include <omp.h>
#define ONNXC_FFT_THREAD() omp_get_thread_num()
#else
#define ONNXC_FFT_THREAD() 0
#endif

#define ONNXC_FFT_DIRECT_MAX 64
#define ONNXC_FFT_PI 3.14159265358979323846

static inline int onnxc_fft_is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

static inline int64_t onnxc_fft_bluestein_m(int64_t n)
{
    int64_t m = 1;
    while (m < 2 * n - 1) m <<= 1;
    return m;
}

static inline int64_t onnxc_fft_work(int64_t n)
{
    if (n <= 1 || onnxc_fft_is_pow2(n)) return 0;
    if (n <= ONNXC_FFT_DIRECT_MAX) return 4 * n;
    return 4 * onnxc_fft_bluestein_m(n) + 2 * n;
}

static void onnxc_fft_pow2(double *re, double *im, int64_t n, int sign)
{
    for (int64_t i = 1, j = 0; i < n; ++i) {        /* bit-reversal permutation */
        int64_t bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
            double t = re[i]; re[i] = re[j]; re[j] = t;
            t = im[i]; im[i] = im[j]; im[j] = t;
        }
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
        const int64_t half = len >> 1;
        for (int64_t j = 0; j < half; ++j) {
            const double ang = sign * 2.0 * ONNXC_FFT_PI * (double)j / (double)len;
            const double wr = cos(ang), wi = sin(ang);
            for (int64_t s = j; s < n; s += len) {
                const int64_t u = s, v = s + half;
                const double xr = re[v] * wr - im[v] * wi, xi = re[v] * wi + im[v] * wr;
                re[v] = re[u] - xr; im[v] = im[u] - xi;
                re[u] += xr; im[u] += xi;
            }
        }
    }
}

static void onnxc_fft_direct(double *re, double *im, int64_t n, int sign, double *work)
{
    double *cr = work, *ci = work + n, *yr = work + 2 * n, *yi = work + 3 * n;
    for (int64_t k = 0; k < n; ++k) {
        const double ang = sign * 2.0 * ONNXC_FFT_PI * (double)k / (double)n;
        cr[k] = cos(ang); ci[k] = sin(ang);
    }
    for (int64_t k = 0; k < n; ++k) {
        double sr = 0, si = 0;
        int64_t e = 0;                                  /* k*t mod n */
        for (int64_t t = 0; t < n; ++t) {
            sr += re[t] * cr[e] - im[t] * ci[e];
            si += re[t] * ci[e] + im[t] * cr[e];
            e += k;
            if (e >= n) e -= n;
        }
        yr[k] = sr; yi[k] = si;
    }
    memcpy(re, yr, (size_t)n * sizeof(double));
    memcpy(im, yi, (size_t)n * sizeof(double));
}

static void onnxc_fft_bluestein(double *re, double *im, int64_t n, int sign, double *work)
{
    const int64_t m = onnxc_fft_bluestein_m(n);
    double *ar = work, *ai = work + m, *br = work + 2 * m, *bi = work + 3 * m;
    double *cr = work + 4 * m, *ci = cr + n;
    for (int64_t k = 0; k < n; ++k) {       /* chirp exp(sign*i*pi*k^2/n), k^2 reduced mod 2n */
        const int64_t e = (int64_t)(((uint64_t)k * (uint64_t)k) % (uint64_t)(2 * n));
        const double ang = sign * ONNXC_FFT_PI * (double)e / (double)n;
        cr[k] = cos(ang); ci[k] = sin(ang);
    }
    memset(ar, 0, (size_t)(4 * m) * sizeof(double));
    for (int64_t k = 0; k < n; ++k) {
        ar[k] = re[k] * cr[k] - im[k] * ci[k];
        ai[k] = re[k] * ci[k] + im[k] * cr[k];
        br[k] = cr[k]; bi[k] = -ci[k];
        if (k) { br[m - k] = cr[k]; bi[m - k] = -ci[k]; }
    }
    onnxc_fft_pow2(ar, ai, m, -1);
    onnxc_fft_pow2(br, bi, m, -1);
    for (int64_t k = 0; k < m; ++k) {
        const double r = ar[k] * br[k] - ai[k] * bi[k], i = ar[k] * bi[k] + ai[k] * br[k];
        ar[k] = r; ai[k] = i;
    }
    onnxc_fft_pow2(ar, ai, m, 1);
    const double inv = 1.0 / (double)m;
    for (int64_t k = 0; k < n; ++k) {
        const double r = ar[k] * inv, i = ai[k] * inv;
        re[k] = r * cr[k] - i * ci[k];
        im[k] = r * ci[k] + i * cr[k];
    }
}

/* work: onnxc_fft_work(n) doubles (may be NULL when that is 0) */
static inline void onnxc_fft(double *re, double *im, int64_t n, int sign, double *work)
{
    if (n <= 1) return;
    if (onnxc_fft_is_pow2(n)) onnxc_fft_pow2(re, im, n, sign);
    else if (n <= ONNXC_FFT_DIRECT_MAX) onnxc_fft_direct(re, im, n, sign, work);
    else onnxc_fft_bluestein(re, im, n, sign, work);
}

#endif
