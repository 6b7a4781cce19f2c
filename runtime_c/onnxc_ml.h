/* onnxc runtime for the ai.onnx.ml operators: score transforms, SVM probability coupling, lookups.
 * Arithmetic follows onnxruntime's CPU kernels (float, same formulas, same constants) so that
 * labels chosen from near-tied scores agree with it. C99, no allocation. */
#ifndef ONNXC_ML_H
#define ONNXC_ML_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* post_transform values (params use these numbers) */
#define ONNXC_ML_NONE 0
#define ONNXC_ML_LOGISTIC 1
#define ONNXC_ML_SOFTMAX 2
#define ONNXC_ML_SOFTMAX_ZERO 3
#define ONNXC_ML_PROBIT 4

/* The build contracts a * b + c into fma (-ffp-contract=fast); onnxruntime's scalar float code
 * rounds each product. Here v * v - v2 cancels most digits near erfinv(0), so the products go
 * through volatile floats: rounded as onnxruntime rounds them (else PROBIT is off by ~1e-4). */
static inline float onnxc_ml_erfinv(float x)
{
    const float sgn = x < 0 ? -1.0f : 1.0f;
    x = (1 - x) * (1 + x);
    const float lg = logf(x);
    volatile float half_lg = 0.5f * lg, v2 = 1 / (0.147f) * lg;
    const float v = 2 / (3.14159265358979323846f * 0.147f) + half_lg;
    volatile float vv = v * v;
    const float v3 = -v + sqrtf(vv - v2);
    return sgn * sqrtf(v3);
}

static inline float onnxc_ml_logistic(float v)
{
    const float e = 1 / (1 + expf(-fabsf(v)));
    return v < 0 ? 1 - e : e;
}

static inline float onnxc_ml_probit(float v) { return 1.41421356237309504880f * onnxc_ml_erfinv(2 * v - 1); }

static inline void onnxc_ml_softmax(float *s, int64_t n)
{
    float m = -FLT_MAX, sum = 0.f;
    for (int64_t i = 0; i < n; ++i) m = s[i] > m ? s[i] : m;
    for (int64_t i = 0; i < n; ++i) { s[i] = expf(s[i] - m); sum += s[i]; }
    for (int64_t i = 0; i < n; ++i) s[i] = s[i] / sum;
}

/* softmax that leaves (near-)zero scores out of the exponentials */
static inline void onnxc_ml_softmax_zero(float *s, int64_t n)
{
    float m = -FLT_MAX, sum = 0.f;
    for (int64_t i = 0; i < n; ++i) m = s[i] > m ? s[i] : m;
    const float e0 = expf(-m);
    for (int64_t i = 0; i < n; ++i) {
        if (s[i] > 0.0000001f || s[i] < -0.0000001f) { s[i] = expf(s[i] - m); sum += s[i]; }
        else s[i] = s[i] * e0;
    }
    for (int64_t i = 0; i < n; ++i) s[i] = s[i] / sum;
}

/* a row of n >= 2 scores, in place */
static inline void onnxc_ml_transform(float *s, int64_t n, int kind)
{
    switch (kind) {
    case ONNXC_ML_LOGISTIC: for (int64_t i = 0; i < n; ++i) s[i] = onnxc_ml_logistic(s[i]); break;
    case ONNXC_ML_SOFTMAX: onnxc_ml_softmax(s, n); break;
    case ONNXC_ML_SOFTMAX_ZERO: onnxc_ml_softmax_zero(s, n); break;
    case ONNXC_ML_PROBIT: for (int64_t i = 0; i < n; ++i) s[i] = onnxc_ml_probit(s[i]); break;
    default: break;
    }
}

/* One score s expanded into two columns (onnxruntime's add_second_class):
 * 0/1: [1 - s, s], under LOGISTIC [1 - logistic(s), logistic(s)] (onnxruntime 1.31);
 * 2/3: [-s, s], or [logistic(-s), logistic(s)] under LOGISTIC;
 * PROBIT: probit(s) alone; other: s alone. The second column is 0 when not written. */
static inline void onnxc_ml_binary_scores(float s, float *z, int add_second, int kind)
{
    if (kind == ONNXC_ML_PROBIT) { z[0] = onnxc_ml_probit(s); z[1] = 0.f; return; }
    switch (add_second) {
    case 0: case 1:
        if (kind == ONNXC_ML_LOGISTIC) s = onnxc_ml_logistic(s);
        z[0] = 1.f - s; z[1] = s;
        break;
    case 2: case 3:
        if (kind == ONNXC_ML_LOGISTIC) { z[0] = onnxc_ml_logistic(-s); z[1] = onnxc_ml_logistic(s); }
        else { z[0] = -s; z[1] = s; }
        break;
    default: z[0] = s; z[1] = 0.f; break;
    }
}

/* libsvm's Platt sigmoid */
static inline float onnxc_ml_sigmoid_probability(float score, float a, float b)
{
    return 1 - onnxc_ml_logistic(score * a + b);
}

/* Pairwise coupling (Wu, Lin, Weng 2004), as libsvm and onnxruntime: r is k x k, p gets k.
 * Q and Qp are caller scratch of k*k and k floats. */
static inline void onnxc_ml_multiclass_probability(int64_t k, const float *r, float *p, float *Q, float *Qp)
{
    const float eps = 0.005f / (float)k;
    for (int64_t i = 0; i < k * k; ++i) Q[i] = 0.f;
    for (int64_t i = 0; i < k; ++i) {
        p[i] = 1.0f / (float)k;
        Qp[i] = 0.f;
        for (int64_t j = 0; j < i; ++j) {
            Q[i * k + i] += r[j * k + i] * r[j * k + i];
            Q[i * k + j] = Q[j * k + i];
        }
        for (int64_t j = i + 1; j < k; ++j) {
            Q[i * k + i] += r[j * k + i] * r[j * k + i];
            Q[i * k + j] = -r[j * k + i] * r[i * k + j];
        }
    }
    for (int loop = 0; loop < 100; ++loop) {
        float pQp = 0;
        for (int64_t i = 0; i < k; ++i) {
            Qp[i] = 0;
            for (int64_t j = 0; j < k; ++j) Qp[i] += Q[i * k + j] * p[j];
            pQp += p[i] * Qp[i];
        }
        float max_error = 0;
        for (int64_t i = 0; i < k; ++i) {
            const float e = fabsf(Qp[i] - pQp);
            if (e > max_error) max_error = e;
        }
        if (max_error < eps) break;
        for (int64_t i = 0; i < k; ++i) {
            const float diff = (-Qp[i] + pQp) / Q[i * k + i];
            p[i] += diff;
            pQp = (pQp + diff * (diff * Q[i * k + i] + 2 * Qp[i])) / (1 + diff) / (1 + diff);
            for (int64_t j = 0; j < k; ++j) {
                Qp[j] = (Qp[j] + diff * Q[i * k + j]) / (1 + diff);
                p[j] /= (1 + diff);
            }
        }
    }
}

/* Index of key in a sorted table, or -1. Strings compare bytewise (strcmp), as the Python side
 * sorted them (UTF-8 bytes). NULL input strings never match. */
static inline int64_t onnxc_ml_find_str(const char *const *keys, int64_t n, const char *x)
{
    if (!x) return -1;
    int64_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        const int c = strcmp(keys[mid], x);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

static inline int64_t onnxc_ml_find_i64(const int64_t *keys, int64_t n, int64_t x)
{
    int64_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] == x) return mid;
        if (keys[mid] < x) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

/* sorted float/double keys (NaN keys excluded: the caller checks x != x first) */
static inline int64_t onnxc_ml_find_f64(const double *keys, int64_t n, double x)
{
    int64_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] == x) return mid;
        if (keys[mid] < x) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

#endif

#ifndef ONNXC_ML_ENCODERS_H
#define ONNXC_ML_ENCODERS_H
#include <errno.h>
#include <stdlib.h>

/* a value an op cannot map: unknown category (OneHotEncoder zeros=0), unparsable CastMap string */
#ifndef ONNXC_ERR_VALUE
#define ONNXC_ERR_VALUE 3
#endif

/* double -> int64 as x86's cvttsd2si (what onnxruntime's static_cast does there): truncation,
 * NaN and out-of-range values give INT64_MIN; never undefined behaviour in C. */
static inline int64_t onnxc_ml_to_i64(double v)
{
    return (v >= -9223372036854775808.0 && v < 9223372036854775808.0) ? (int64_t)v : INT64_MIN;
}

/* std::stof / std::stoll: leading blanks skipped, trailing text ignored; no digits or a result out
 * of range fails (return 0). */
static inline int onnxc_ml_parse_f32(const char *s, float *out)
{
    char *end;
    errno = 0;
    *out = strtof(s, &end);
    return end != s && errno != ERANGE;
}

static inline int onnxc_ml_parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    *out = (int64_t)v;
    return end != s && errno != ERANGE;
}
#endif
