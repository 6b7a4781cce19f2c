/* onnxc low-precision element types: 8-bit floats, float4e2m1 and the 4/2-bit integers.
 *
 * Storage: one element per uint8_t, exactly as ml_dtypes holds them in numpy (sub-byte types are
 * NOT packed in memory: the low bits hold the value, the high bits are zero; ONNX packs them only
 * in TensorProto, which numpy_helper unpacks). Arithmetic happens in float (floats) or in
 * int8_t/uint8_t (integers): load with onnxc_ld_<type>(), store with onnxc_st_<type>().
 *
 * Conversions from float round to nearest even, like ml_dtypes and onnx.reference. The plain
 * onnxc_st_<float8>() saturates (ONNX Cast's default saturate=1: out of range and +-inf go to
 * +-max, NaN stays NaN); onnxc_st_<float8>_nosat() gives the IEEE-like result (overflow and inf
 * become inf where the type has one, else NaN). */
#ifndef ONNXC_LOWP_H
#define ONNXC_LOWP_H

#include <stdint.h>
#include <string.h>

/* kinds of special-value encoding */
#define ONNXC_F8_FN 0     /* no inf; NaN = S.1111.111 (e4m3fn) */
#define ONNXC_F8_IEEE 1   /* inf = S.11111.00, NaN = S.11111.xx (e5m2) */
#define ONNXC_F8_FNUZ 2   /* no inf, no -0; NaN = 1.0000.000 */
#define ONNXC_F4 3        /* float4e2m1: no inf, no NaN (NaN -> -0 like ml_dtypes, overflow saturates) */

static inline float onnxc_lowp_bits2f(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* small float (ebits exponent, mbits mantissa, bias) -> float: exact */
static inline float onnxc_small2f(uint32_t c, int ebits, int mbits, int bias, int kind)
{
    const uint32_t nb = 1u + (uint32_t)ebits + (uint32_t)mbits;
    const uint32_t smask = 1u << (nb - 1), emax = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u;
    c &= (1u << nb) - 1u;
    uint32_t sign = (c & smask) ? 0x80000000u : 0u, e = (c >> mbits) & emax, m = c & mmask;
    if (kind == ONNXC_F8_FNUZ && c == smask)
        return onnxc_lowp_bits2f(0x7fc00000u);
    if (kind == ONNXC_F8_FN && e == emax && m == mmask)
        return onnxc_lowp_bits2f(sign | 0x7fc00000u);
    if (kind == ONNXC_F8_IEEE && e == emax)
        return onnxc_lowp_bits2f(sign | (m ? 0x7fc00000u : 0x7f800000u));
    if (e == 0) {    /* zero or subnormal: m * 2^(1 - bias - mbits), exact in float */
        float v = (float)m * onnxc_lowp_bits2f((uint32_t)(127 + 1 - bias - mbits) << 23);
        return sign ? -v : v;
    }
    return onnxc_lowp_bits2f(sign | ((e - (uint32_t)bias + 127u) << 23) | (m << (23 - mbits)));
}

/* float -> small float, round to nearest even. sat: overflow and +-inf give +-max. */
static inline uint8_t onnxc_f2small(float f, int ebits, int mbits, int bias, int kind, int sat)
{
    const uint32_t nb = 1u + (uint32_t)ebits + (uint32_t)mbits;
    const uint32_t smask = 1u << (nb - 1), emax = (1u << ebits) - 1u, mmask = (1u << mbits) - 1u;
    /* largest finite code (magnitude) */
    const uint32_t maxc = kind == ONNXC_F8_FN ? (emax << mbits) | (mmask - 1u)
                        : kind == ONNXC_F8_IEEE ? ((emax - 1u) << mbits) | mmask
                        : (emax << mbits) | mmask;
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x & 0x80000000u) ? smask : 0u, ax = x & 0x7fffffffu, c;
    if (ax > 0x7f800000u) {                                   /* NaN */
        if (kind == ONNXC_F8_FNUZ) return (uint8_t)smask;
        if (kind == ONNXC_F8_FN) return (uint8_t)(sign | (emax << mbits) | mmask);
        if (kind == ONNXC_F8_IEEE) return (uint8_t)(sign | (emax << mbits) | (1u << (mbits - 1)));
        return (uint8_t)smask;                                /* float4: -0 */
    }
    int e = (int)(ax >> 23) - 127;
    if (ax >= 0x7f800000u || e > (int)emax + 1 - bias + 1) {
        c = maxc + 1u;                                        /* certainly overflows */
    } else {
        int emin = 1 - bias;                                  /* smallest normal exponent */
        uint32_t man = (ax & 0x7fffffu) | (ax >= 0x00800000u ? 0x800000u : 0u);
        int shift;                                            /* bits of man to drop */
        if (e < emin) {                                       /* subnormal in the target */
            int fe = ax >= 0x00800000u ? e : -126;
            shift = 23 - mbits + (emin - fe);
            if (shift > 31) shift = 31;
            uint32_t q = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1);
            if (rem > half || (rem == half && (q & 1u))) ++q;
            c = q;                                            /* q == 2^mbits is the smallest normal */
        } else {
            shift = 23 - mbits;
            uint32_t q = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1);
            if (rem > half || (rem == half && (q & 1u))) ++q; /* a carry moves into the exponent */
            c = ((uint32_t)(e - emin + 1) << mbits) + (q - (1u << mbits));
        }
    }
    if (c > maxc) {
        if (sat || kind == ONNXC_F4) c = maxc;
        else if (kind == ONNXC_F8_IEEE) c = emax << mbits;                 /* inf */
        else if (kind == ONNXC_F8_FN) c = (emax << mbits) | mmask;         /* NaN */
        else return (uint8_t)smask;                                        /* FNUZ NaN */
    }
    if (kind == ONNXC_F8_FNUZ && c == 0) return 0;                         /* no -0 */
    return (uint8_t)(sign | c);
}

#define onnxc_ld_float8e4m3fn(x) onnxc_small2f((x), 4, 3, 7, ONNXC_F8_FN)
#define onnxc_ld_float8e4m3fnuz(x) onnxc_small2f((x), 4, 3, 8, ONNXC_F8_FNUZ)
#define onnxc_ld_float8e5m2(x) onnxc_small2f((x), 5, 2, 15, ONNXC_F8_IEEE)
#define onnxc_ld_float8e5m2fnuz(x) onnxc_small2f((x), 5, 2, 16, ONNXC_F8_FNUZ)
#define onnxc_ld_float4e2m1(x) onnxc_small2f((x), 2, 1, 1, ONNXC_F4)
#define onnxc_st_float8e4m3fn(x) onnxc_f2small((float)(x), 4, 3, 7, ONNXC_F8_FN, 1)
#define onnxc_st_float8e4m3fnuz(x) onnxc_f2small((float)(x), 4, 3, 8, ONNXC_F8_FNUZ, 1)
#define onnxc_st_float8e5m2(x) onnxc_f2small((float)(x), 5, 2, 15, ONNXC_F8_IEEE, 1)
#define onnxc_st_float8e5m2fnuz(x) onnxc_f2small((float)(x), 5, 2, 16, ONNXC_F8_FNUZ, 1)
#define onnxc_st_float4e2m1(x) onnxc_f2small((float)(x), 2, 1, 1, ONNXC_F4, 1)
#define onnxc_st_float8e4m3fn_nosat(x) onnxc_f2small((float)(x), 4, 3, 7, ONNXC_F8_FN, 0)
#define onnxc_st_float8e4m3fnuz_nosat(x) onnxc_f2small((float)(x), 4, 3, 8, ONNXC_F8_FNUZ, 0)
#define onnxc_st_float8e5m2_nosat(x) onnxc_f2small((float)(x), 5, 2, 15, ONNXC_F8_IEEE, 0)
#define onnxc_st_float8e5m2fnuz_nosat(x) onnxc_f2small((float)(x), 5, 2, 16, ONNXC_F8_FNUZ, 0)
#define onnxc_st_float4e2m1_nosat(x) onnxc_st_float4e2m1(x)

/* float8e8m0: an unsigned power of two 2^(c - 127); 0xff is NaN. */
static inline float onnxc_e8m02f(uint8_t c)
{
    if (c == 0xffu) return onnxc_lowp_bits2f(0x7fc00000u);
    return onnxc_lowp_bits2f(c ? (uint32_t)c << 23 : 0x00400000u);
}

/* float -> e8m0 as onnx.numpy_helper.to_float8e8m0 does: the sign is dropped, the float's
 * exponent field kept; mode 0 rounds up (any fraction), 1 to nearest, 2 down. sat: no step from
 * the largest exponent (0xfe) into NaN. */
static inline uint8_t onnxc_f2e8m0(float f, int mode, int sat)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t e = (x >> 23) & 0xffu;
    if (e == 0xffu) return 0xffu;
    int up = 0;
    if (mode == 0)
        up = (x & 0x7fffffu) != 0;
    else if (mode == 1)
        up = (x & 0x400000u) && ((x & 0x200000u) || (x & 0x1fffffu) || e > 0);
    if (up && sat && e == 0xfeu) up = 0;
    return (uint8_t)(e + (uint32_t)up);
}
#define onnxc_ld_float8e8m0(x) onnxc_e8m02f(x)
#define onnxc_st_float8e8m0(x) onnxc_f2e8m0((float)(x), 0, 1)

/* 4- and 2-bit integers: the value in the low bits (two's complement for the signed ones). */
#define onnxc_ld_int4(x) ((int8_t)((int8_t)((uint8_t)(x) << 4) >> 4))
#define onnxc_st_int4(x) ((uint8_t)((uint8_t)(x) & 0x0fu))
#define onnxc_ld_uint4(x) ((uint8_t)((x) & 0x0fu))
#define onnxc_st_uint4(x) ((uint8_t)((uint8_t)(x) & 0x0fu))
#define onnxc_ld_int2(x) ((int8_t)((int8_t)((uint8_t)(x) << 6) >> 6))
#define onnxc_st_int2(x) ((uint8_t)((uint8_t)(x) & 0x03u))
#define onnxc_ld_uint2(x) ((uint8_t)((x) & 0x03u))
#define onnxc_st_uint2(x) ((uint8_t)((uint8_t)(x) & 0x03u))

#endif
