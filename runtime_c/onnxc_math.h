/* onnxc math helpers: elementwise semantics that C leaves undefined or defines differently
 * from numpy (which onnx.reference follows). C99, header-only. */
#ifndef ONNXC_MATH_H
#define ONNXC_MATH_H

#include <stdint.h>
#include <math.h>

/* numpy's float mod: the result takes the divisor's sign; an exact zero is +-0 like the divisor */
static inline float onnxc_pymodf(float a, float b)
{
    float m = fmodf(a, b);
    if (b == 0) return m;                       /* NaN */
    if (m != 0) return ((b < 0) != (m < 0)) ? m + b : m;
    return copysignf(0.0f, b);
}

static inline double onnxc_pymod(double a, double b)
{
    double m = fmod(a, b);
    if (b == 0) return m;
    if (m != 0) return ((b < 0) != (m < 0)) ? m + b : m;
    return copysign(0.0, b);
}

/* Integer remainders without SIGFPE: x % 0 -> 0 and x % -1 -> 0 (INT64_MIN % -1 traps). */
static inline int64_t onnxc_rem_i64(int64_t a, int64_t b)
{
    return (b == 0 || b == -1) ? 0 : a % b;
}

/* Python's integer mod: the result takes the divisor's sign. */
static inline int64_t onnxc_pymod_i64(int64_t a, int64_t b)
{
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static inline uint64_t onnxc_rem_u64(uint64_t a, uint64_t b)
{
    return b == 0 ? 0 : a % b;
}

/* Integer power by squaring, wrapping modulo 2^64 (the caller truncates to its width, which
 * equals wrapping in that width). Negative exponents truncate 1/b^-e toward zero. */
static inline int64_t onnxc_ipow(int64_t base, int64_t e)
{
    if (e < 0) {
        if (base == 1) return 1;
        if (base == -1) return (e & 1) ? -1 : 1;
        return 0;
    }
    uint64_t b = (uint64_t)base, r = 1;
    while (e) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)r;
}

/* pow over mixed base/exponent types, in double as numpy promotes them */
static inline double onnxc_powd(double a, double b) { return pow(a, b); }

#endif
