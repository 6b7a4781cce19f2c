/* onnxc vectorisable float math: exp, tanh, sigmoid without branches or library calls, so that
 * gcc -O3 vectorises the loops that call them (libm's expf/tanhf are opaque calls).
 *
 *   onnxc_vexpf(x)      max error 1.05 ulp (measured 1.008 with FMA, 0.98 without;
 *                       tests/test_vmath.py)
 *   onnxc_vtanhf(x)     max error 1.5 ulp (measured 1.33)
 *   onnxc_vsigmoidf(x)  max error 2.3 ulp (measured 2.22-2.28, with or without FMA);
 *                       1 / (1 + exp(-x)) without overflow, tiny results kept (e / (1 + e) for x < 0)
 *   onnxc_verff(x)      max error 1.8 ulp (measured over every float: 1.64 with FMA, 1.71 without)
 *
 * Errors are against the correctly rounded result, over normal and subnormal results, with or
 * without FMA contraction. NaN in -> NaN out; exp(+inf) = inf, exp(-inf) = 0, tanh(+-inf) = +-1,
 * sigmoid(+-inf) = 1 / 0, erf(+-inf) = +-1; overflow gives inf and underflow 0 like libm. The
 * sign of zero is kept by tanh and erf. C99 (memcpy for bit casts), header-only, no tables.
 */
#ifndef ONNXC_VMATH_H
#define ONNXC_VMATH_H

#include <stdint.h>
#include <string.h>

/* always inlined: out of line, a call per element keeps the loop that uses them scalar, and GCC
 * stops inlining plain `static inline` functions once a model's graph function is large (a
 * 6-layer ViT: the GELU of layers 2-6 called onnxc_verff, their FFN products 2.5x the time) */
#if defined(__GNUC__)
#define ONNXC_VMATH_FN static inline __attribute__((always_inline))
#else
#define ONNXC_VMATH_FN static inline
#endif

ONNXC_VMATH_FN uint32_t onnxc__f2u(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
ONNXC_VMATH_FN float onnxc__u2f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* exp(x) = p 2^n for a clamped x: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite), p = exp(r) =
 * 1 + r + r^2 q(r), q of degree 4 (relative error 3.1e-9 = 0.05 ulp; fitted for onnxc against
 * float64 exp, least squares on Chebyshev nodes reweighted towards minimax: one multiply-add
 * fewer than Cephes' degree 7, 0.95x the time of exp and tanh); returns p, n in *n */
ONNXC_VMATH_FN float onnxc__vexp_reduce(float x, int32_t *n)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float t = x * 1.44269504088896341f + magic;
    const float nf = t - magic;
    *n = (int32_t)(onnxc__f2u(t) - onnxc__f2u(magic));
    float r = x - nf * 0.693359375f;  /* ln2 split: nf * hi is exact */
    r = r - nf * -2.12194440e-4f;
    float p = 1.3814608101e-03f;
    p = p * r + 8.3687100559e-03f;
    p = p * r + 4.1668388993e-02f;
    p = p * r + 1.6666521132e-01f;
    p = p * r + 4.9999994040e-01f;
    return p * (r * r) + r + 1.0f;
}

/* exp: p 2^n by two exact power-of-two scalings so that n in [-150, 128] (subnormal results,
 * overflow) never needs a branch. x is clamped first: below -104 the result rounds to 0, above 89
 * to inf. */
ONNXC_VMATH_FN float onnxc_vexpf(float x)
{
    x = x < -104.0f ? -104.0f : x;   /* NaN passes both clamps */
    x = x > 89.0f ? 89.0f : x;
    int32_t n;
    const float p = onnxc__vexp_reduce(x, &n);
    const int32_t n1 = n / 2, n2 = n - n1;   /* each scale factor stays a normal float */
    const float s1 = onnxc__u2f((uint32_t)(n1 + 127) << 23);
    const float s2 = onnxc__u2f((uint32_t)(n2 + 127) << 23);
    return p * s1 * s2;
}

/* onnxc_vexpf for x >= 0 (or NaN) where every x above 88 may give exp(88) (tanh: 1 either way):
 * n <= 127, so one exact scaling by 2^n (tanh's results bit for bit, 0.85-0.9x the time) */
ONNXC_VMATH_FN float onnxc__vexpf_pos(float x)
{
    x = x > 88.0f ? 88.0f : x;   /* NaN passes */
    int32_t n;                     /* [0, 127] */
    const float p = onnxc__vexp_reduce(x, &n);
    return p * onnxc__u2f((uint32_t)(n + 127) << 23);
}

/* tanh: odd polynomial below 0.625 (Cephes), 1 - 2 / (exp(2|x|) + 1) above; sign restored. */
ONNXC_VMATH_FN float onnxc_vtanhf(float x)
{
    const uint32_t sign = onnxc__f2u(x) & 0x80000000u;
    const float a = onnxc__u2f(onnxc__f2u(x) & 0x7fffffffu);
    const float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    const float small = onnxc__u2f(onnxc__f2u(a + a * z * p) | sign);
    const float e = onnxc__vexpf_pos(2.0f * a);
    const float big = onnxc__u2f(onnxc__f2u(1.0f - 2.0f / (e + 1.0f)) | sign);
    return a < 0.625f ? small : big;   /* NaN: big (NaN) */
}

/* onnxc_vexpf for x <= 0 (or NaN), with the same results: no upper clamp, and since n <= 0 one
 * exact scaling by 2^(n + 64) (a normal float for n >= -150) then one rounding multiply by 2^-64,
 * where the general exp needs two scale factors (sigmoid: 0.7-0.8x the time) */
ONNXC_VMATH_FN float onnxc__vexpf_neg(float x)
{
    x = x < -104.0f ? -104.0f : x;   /* NaN passes */
    int32_t n;                       /* [-150, 0] */
    const float p = onnxc__vexp_reduce(x, &n);
    return p * onnxc__u2f((uint32_t)(n + 64 + 127) << 23) * 0x1p-64f;
}

/* sigmoid: e = exp(-|x|) never overflows; x >= 0: 1 / (1 + e), x < 0: e / (1 + e), one division.
 * The rounding of 1 + e is not corrected: that took 1.47 ulp instead of 2.28 but 1.37x the time
 * (28 cycles per 16 floats on Zen 4 instead of 20.5), and SiLU (x sigmoid(x), every activation of
 * EfficientNet) spent 22% of EfficientNet-B0's time in it at one thread: 0.948x the model's time
 * with this form. Even with a correctly rounded exp this form stays at 2.26 ulp: the error is
 * 1 + e's rounding and the division's. */
ONNXC_VMATH_FN float onnxc_vsigmoidf(float x)
{
    const float a = onnxc__u2f(onnxc__f2u(x) & 0x7fffffffu);
    const float e = onnxc__vexpf_neg(-a);
    return (x < 0.0f ? e : 1.0f) / (1.0f + e);
}

/* erf: below 0.875, x P(x^2) (P: a degree-6 near-minimax fit of erf(x)/x, relative error
 * 4e-10); up to 3.919206 (the last float whose erf rounds below 1), 1 - N(u) / D(u) with
 * u = x - 1.6 (N, D: a degree-6/6 rational fit of erfc with absolute error 6e-9 = 0.1 ulp of
 * the result; erfc <= 0.22 there, so its rounding stays below an ulp of the result); from there
 * on erf rounds to +-1. One division and no exp: 0.6x the time of the former 1 - exp(-x^2) Q
 * form. Coefficients fitted for onnxc (least squares on Chebyshev nodes, reweighted towards
 * minimax) against float64 erf/erfc. */
ONNXC_VMATH_FN float onnxc_verff(float x)
{
    const uint32_t sign = onnxc__f2u(x) & 0x80000000u;
    const float a = onnxc__u2f(onnxc__f2u(x) & 0x7fffffffu);
    const float z = x * x;
    float p = 8.370426804e-05f;
    p = p * z + -8.142794832e-04f;
    p = p * z + 5.201042164e-03f;
    p = p * z + -2.685940266e-02f;
    p = p * z + 1.128369570e-01f;
    p = p * z + -3.761263490e-01f;
    p = p * z + -5.863538277e-08f;      /* 2/sqrt(pi) = 1.12837923f + this */
    const float small = a * 1.12837923f + a * p;   /* big term rounded once */
    const float c = a > 3.919206e+00f ? 3.919206e+00f : a;   /* NaN passes */
    const float u = c - 1.6f;
    float n = 3.8450435e-04f;
    n = n * u + -4.718358e-03f;
    n = n * u + 2.4547925e-02f;
    n = n * u + -6.948333e-02f;
    n = n * u + 1.13101944e-01f;
    n = n * u + -1.0056042e-01f;
    n = n * u + 3.8202718e-02f;
    float d = 2.0283537e-02f;
    d = d * u + 1.1580682e-01f;
    d = d * u + 3.9191332e-01f;
    d = d * u + 8.603265e-01f;
    d = d * u + 1.5401597e+00f;
    d = d * u + 1.7053496e+00f;
    d = d * u + 1.615226e+00f;
    const float big = 1.0f - n / d;
    const float r = a >= 3.919206e+00f ? 1.0f : a < 0.875f ? small : big;   /* NaN: big (NaN) */
    return onnxc__u2f(onnxc__f2u(r) | sign);
}

#endif
