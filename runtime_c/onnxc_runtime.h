/* onnxc runtime: helpers every generated model uses. C99, no allocation, no globals. */
#ifndef ONNXC_RUNTIME_H
#define ONNXC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#ifndef INFINITY
#define INFINITY (1.0f / 0.0f)
#endif
#ifndef NAN
#define NAN (0.0f / 0.0f)
#endif

/* Work (elements) below which a loop stays on one thread: thread wake-up costs more. */
#ifndef ONNXC_PAR_MIN
#define ONNXC_PAR_MIN 32768
#endif

#define ONNXC_OK 0
#define ONNXC_ERR_SHAPE 1

static inline int64_t onnxc_floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static inline int64_t onnxc_mod(int64_t a, int64_t b)
{
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static inline int64_t onnxc_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t onnxc_min64(int64_t a, int64_t b) { return a < b ? a : b; }

#endif
