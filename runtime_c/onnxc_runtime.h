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

/* Error returns carry the failing node: code + 256 * (node index + 1). model.c redefines
 * ONNXC_HERE before each node's block, so a template's `return ONNXC_ERR_SHAPE;` names its node. */
#define ONNXC_OK 0
#define ONNXC_HERE (-1)
/* Each error return goes through a cold function, so GCC predicts every check's failure as never
 * taken. As plain early returns, each was predicted taken about one time in ten: after some fifty
 * checks (a ViT's index checks) GCC took the later nodes for cold code and compiled their loops
 * for size, scalar (the GELU of its last four layers 2.3x the time of the first's). */
#if defined(__GNUC__)
static __attribute__((cold, noinline, unused)) int onnxc_err(int code) { return code; }
#define ONNXC_ERR_AT(code) onnxc_err((code) + 256 * (ONNXC_HERE + 1))
#else
#define ONNXC_ERR_AT(code) ((code) + 256 * (ONNXC_HERE + 1))
#endif
#define ONNXC_ERR_SHAPE ONNXC_ERR_AT(1)   /* run-time dims disagree with what the node needs */
#define ONNXC_ERR_INDEX ONNXC_ERR_AT(2)   /* an index input is out of range */
#define ONNXC_ERR_VALUE ONNXC_ERR_AT(3)   /* a value the node cannot map (unknown category, ...) */
#define ONNXC_ERR_HEAP ONNXC_ERR_AT(4)    /* the run's heap is too small: dims' last entry says how big */

/* The run's heap: a bump allocator over the arena's tail for values whose size is known only
 * while the model runs (onnxc.dynamic "heap" dims, sequences, strings made by the model). Nothing
 * is freed before the run ends. When full, `need` keeps the bytes a run would need at least. */
typedef struct {
    unsigned char *base;
    int64_t cap, used, need;
} onnxc_heap;

static inline void *onnxc_halloc(onnxc_heap *h, int64_t bytes)
{
    if (bytes < 0 || bytes > (INT64_C(1) << 50)) {   /* no heap holds it (negative: a size overflowed) */
        h->need = INT64_MAX;
        h->cap = -1;
        return NULL;
    }
    const int64_t n = bytes > 0 ? (bytes + 63) & ~(int64_t)63 : 64;
    if (h->used + n > h->cap) {
        if (h->need != INT64_MAX && h->used + n > h->need)
            h->need = h->used + n;
        if (h->used < (INT64_C(1) << 60))
            h->used += n;        /* later requests of this run add to what it needs ... */
        h->cap = -1;             /* ... and all fail: the run stops at the first check */
        return NULL;
    }
    void *p = h->base + h->used;
    h->used += n;
    return p;
}

/* Sequences and optionals (onnxc.dtypes.ContainerType): a 16-byte header whose items (tensors:
 * data and dims) live on the heap or in the caller's memory; never written once made. count -1:
 * an empty optional. */
#define ONNXC_SEQ_MAXRANK 8
typedef struct {
    const void *data;
    int64_t rank;
    int64_t dims[ONNXC_SEQ_MAXRANK];
} onnxc_item;
typedef struct {
    int64_t count;
    const onnxc_item *items;
} onnxc_seq;

/* Largest dim (and element count) a run-time dim read from data may take: keeps every size
 * computation of the plan (products of dims, times element size) far from int64 overflow. */
#define ONNXC_MAX_DIM (INT64_C(1) << 40)

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

#ifndef ONNXC_HALF_H
#define ONNXC_HALF_H
/* float16 / bfloat16 are stored as uint16_t and computed in float. Conversions round to nearest
 * even and keep NaN (quiet), infinities and signed zeros; float16 subnormals are exact. */
static inline float onnxc_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0x1fu) {
        bits = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {            /* subnormal: normalise */
        int e = -1;
        do { man <<= 1; ++e; } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t onnxc_f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                                  /* inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u)                                  /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {                                 /* below the smallest normal half */
        if (ax < 0x33000000u) return (uint16_t)sign;        /* < 2^-25: rounds to zero */
        uint32_t man = (ax & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(ax >> 23);                  /* 14..24 */
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1u), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) ++half;
        return (uint16_t)(sign | half);
    }
    uint32_t h = ((ax >> 13) - (112u << 10)), rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return (uint16_t)(sign | h);
}

static inline float onnxc_bf2f(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t onnxc_f2bf(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);               /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* onnxc_ld_<type>(stored) -> compute value; onnxc_st_<type>(compute value) -> stored */
#if defined(__F16C__) && (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
/* the CPU's conversion instructions: same results (round to nearest even), ~15x faster. Called
 * through the compiler's builtins, as <immintrin.h>'s _cvtsh_ss / _cvtss_sh do: that header is
 * ~60k lines, and parsing it was 0.5 s of the 0.6 s a small model took to compile. */
typedef short onnxc__v8hi __attribute__((vector_size(16)));
typedef float onnxc__v4sf __attribute__((vector_size(16)));
static inline float onnxc__cvtsh_ss(uint16_t h)
{
    const onnxc__v8hi v = {(short)h, 0, 0, 0, 0, 0, 0, 0};
    return __builtin_ia32_vcvtph2ps(v)[0];
}
static inline uint16_t onnxc__cvtss_sh(float f)
{
    const onnxc__v4sf v = {f, 0.0f, 0.0f, 0.0f};
    return (uint16_t)__builtin_ia32_vcvtps2ph(v, 0)[0];   /* 0: round to nearest even */
}
#define onnxc_ld_float16(x) onnxc__cvtsh_ss((uint16_t)(x))
#define onnxc_st_float16(x) onnxc__cvtss_sh((float)(x))
#else
#define onnxc_ld_float16(x) onnxc_h2f(x)
#define onnxc_st_float16(x) onnxc_f2h((float)(x))
#endif
#define onnxc_ld_bfloat16(x) onnxc_bf2f(x)
#define onnxc_st_bfloat16(x) onnxc_f2bf((float)(x))
#define onnxc_ld_float(x) (x)
#define onnxc_st_float(x) ((float)(x))
#define onnxc_ld_double(x) (x)
#define onnxc_st_double(x) ((double)(x))
#define onnxc_ld_int8(x) (x)
#define onnxc_st_int8(x) ((int8_t)(x))
#define onnxc_ld_int16(x) (x)
#define onnxc_st_int16(x) ((int16_t)(x))
#define onnxc_ld_int32(x) (x)
#define onnxc_st_int32(x) ((int32_t)(x))
#define onnxc_ld_int64(x) (x)
#define onnxc_st_int64(x) ((int64_t)(x))
#define onnxc_ld_uint8(x) (x)
#define onnxc_st_uint8(x) ((uint8_t)(x))
#define onnxc_ld_uint16(x) (x)
#define onnxc_st_uint16(x) ((uint16_t)(x))
#define onnxc_ld_uint32(x) (x)
#define onnxc_st_uint32(x) ((uint32_t)(x))
#define onnxc_ld_uint64(x) (x)
#define onnxc_st_uint64(x) ((uint64_t)(x))
#define onnxc_ld_string(x) (x)
#define onnxc_ld_bool(x) (x)
#define onnxc_st_bool(x) ((uint8_t)((x) != 0))
#endif

/* the small float and sub-byte integer types (float8, float4, int4, int2): their ld/st macros */
#include "onnxc_lowp.h"
