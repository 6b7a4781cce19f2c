/* MT19937 as numpy's legacy RandomState(seed) runs it (np.random.seed(seed); np.random.uniform):
 * seeded random ops draw the same numbers as onnx's reference data. Sequential by nature. */
#ifndef ONNXC_MT19937_H
#define ONNXC_MT19937_H

typedef struct {
    uint32_t key[624];
    int pos;
} onnxc_mt;

static inline void onnxc_mt_seed(onnxc_mt *s, uint32_t seed)
{
    for (int i = 0; i < 624; ++i) {
        s->key[i] = seed;
        seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)(i + 1);
    }
    s->pos = 624;
}

static inline uint32_t onnxc_mt_next(onnxc_mt *s)
{
    if (s->pos >= 624) {
        for (int i = 0; i < 624; ++i) {
            const uint32_t y = (s->key[i] & 0x80000000u) | (s->key[(i + 1) % 624] & 0x7fffffffu);
            s->key[i] = s->key[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        s->pos = 0;
    }
    uint32_t y = s->key[s->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* a double in [0, 1) with 53 random bits, as numpy's random_standard_uniform */
static inline double onnxc_mt_double(onnxc_mt *s)
{
    const uint32_t a = onnxc_mt_next(s) >> 5, b = onnxc_mt_next(s) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

#endif
