/* PNG for onnxc_image.h: zlib inflate (stored, fixed and dynamic Huffman blocks), the five row
 * filters, Adam7 interlacing; gray 1/2/4/8-bit, gray+alpha, RGB, RGBA (8 or 16-bit: high byte,
 * as Pillow) and palette images. Alpha is dropped, as Pillow's convert("RGB"). */
#ifndef ONNXC_IMAGE_PNG_H
#define ONNXC_IMAGE_PNG_H

/* ---- inflate --------------------------------------------------------------------------------- */
#define ONNXC_ZFAST 10
typedef struct {
    const uint8_t *d;
    int64_t n, pos;
    uint64_t buf;
    int cnt;
} onnxc_zbits;

typedef struct {
    uint16_t count[16], sym[288];
    uint16_t fast[1 << ONNXC_ZFAST];   /* next ONNXC_ZFAST bits -> symbol << 4 | length; 0: longer */
} onnxc_zhuff;

static inline void onnxc_z_fill(onnxc_zbits *s)
{
    while (s->cnt <= 56 && s->pos < s->n) {
        s->buf |= (uint64_t)s->d[s->pos++] << s->cnt;
        s->cnt += 8;
    }
}

static inline int onnxc_z_bits(onnxc_zbits *s, int k, uint32_t *v)
{
    if (s->cnt < k) {
        onnxc_z_fill(s);
        if (s->cnt < k) return -1;
    }
    *v = (uint32_t)(s->buf & ((UINT64_C(1) << k) - 1));
    s->buf >>= k;
    s->cnt -= k;
    return 0;
}

static int onnxc_z_build(onnxc_zhuff *h, const uint8_t *len, int n)
{
    int offs[16], left = 1, k = 0, code = 0;
    memset(h->count, 0, sizeof h->count);
    memset(h->fast, 0, sizeof h->fast);
    for (int i = 0; i < n; ++i) h->count[len[i]]++;
    h->count[0] = 0;
    for (int l = 1; l < 16; ++l) {
        left = left * 2 - h->count[l];
        if (left < 0) return -1;   /* over-subscribed */
    }
    offs[1] = 0;
    for (int l = 1; l < 15; ++l) offs[l + 1] = offs[l] + h->count[l];
    for (int i = 0; i < n; ++i)
        if (len[i]) h->sym[offs[len[i]]++] = (uint16_t)i;
    for (int l = 1; l < 16; ++l, code <<= 1)
        for (int j = 0; j < h->count[l]; ++j, ++k, ++code) {
            if (l > ONNXC_ZFAST) continue;
            int rev = 0;
            for (int b = 0; b < l; ++b) rev |= ((code >> b) & 1) << (l - 1 - b);
            for (int r = rev; r < (1 << ONNXC_ZFAST); r += 1 << l)
                h->fast[r] = (uint16_t)(h->sym[k] << 4 | l);
        }
    return 0;
}

static inline int onnxc_z_decode(onnxc_zbits *s, const onnxc_zhuff *h)
{
    if (s->cnt < 15) onnxc_z_fill(s);
    const uint32_t e = h->fast[s->buf & ((1u << ONNXC_ZFAST) - 1)];
    if (e != 0 && (int)(e & 15) <= s->cnt) {
        s->buf >>= e & 15;
        s->cnt -= (int)(e & 15);
        return (int)(e >> 4);
    }
    int code = 0, first = 0, index = 0;   /* canonical decode, one bit at a time */
    for (int l = 1; l < 16; ++l) {
        if (s->cnt < 1) return -1;
        code |= (int)(s->buf & 1);
        s->buf >>= 1;
        s->cnt--;
        const int count = h->count[l];
        if (code - count < first) return h->sym[index + (code - first)];
        index += count;
        first = (first + count) << 1;
        code <<= 1;
    }
    return -1;
}

/* Inflates the zlib stream src into out until cap bytes are written (what follows is not read,
 * as Pillow stops once the image is complete); a stream that ends earlier is truncated. */
static int onnxc_inflate(const uint8_t *src, int64_t n, uint8_t *out, int64_t cap)
{
    static const uint16_t lbase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35,
                                       43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static const uint8_t lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4,
                                     4, 4, 4, 5, 5, 5, 5, 0};
    static const uint16_t dbase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193,
                                       257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
                                       8193, 12289, 16385, 24577};
    static const uint8_t dext[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9,
                                     9, 10, 10, 11, 11, 12, 12, 13, 13};
    static const uint8_t clorder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14,
                                        1, 15};
    onnxc_zhuff lit, dist;
    onnxc_zbits s;
    uint8_t lens[320];
    uint32_t v, last = 0, type;
    int64_t o = 0;
    if (n < 2 || (src[0] & 15) != 8 || (src[0] >> 4) > 7 || (src[0] * 256 + src[1]) % 31 != 0
        || (src[1] & 32))
        return -1;
    s.d = src + 2; s.n = n - 2; s.pos = 0; s.buf = 0; s.cnt = 0;
    while (!last) {
        if (o >= cap) return 0;
        if (onnxc_z_bits(&s, 1, &last) || onnxc_z_bits(&s, 2, &type)) return -1;
        if (type == 0) {                         /* stored */
            uint32_t len, nlen;
            s.buf >>= s.cnt & 7;
            s.cnt -= s.cnt & 7;
            if (onnxc_z_bits(&s, 16, &len) || onnxc_z_bits(&s, 16, &nlen) || (len ^ 0xFFFFu) != nlen)
                return -1;
            for (uint32_t i = 0; i < len; ++i) {
                if (onnxc_z_bits(&s, 8, &v)) return -1;
                out[o++] = (uint8_t)v;
                if (o == cap) return 0;
            }
            continue;
        }
        if (type == 1) {                         /* fixed codes */
            int i = 0;
            for (; i < 144; ++i) lens[i] = 8;
            for (; i < 256; ++i) lens[i] = 9;
            for (; i < 280; ++i) lens[i] = 7;
            for (; i < 288; ++i) lens[i] = 8;
            for (i = 0; i < 30; ++i) lens[288 + i] = 5;
            if (onnxc_z_build(&lit, lens, 288) || onnxc_z_build(&dist, lens + 288, 30)) return -1;
        } else if (type == 2) {                  /* dynamic codes */
            uint32_t hlit, hdist, hclen;
            uint8_t cl[19] = {0};
            onnxc_zhuff clh;
            if (onnxc_z_bits(&s, 5, &hlit) || onnxc_z_bits(&s, 5, &hdist) || onnxc_z_bits(&s, 4, &hclen))
                return -1;
            hlit += 257; hdist += 1; hclen += 4;
            if (hlit > 286 || hdist > 30) return -1;
            for (uint32_t i = 0; i < hclen; ++i) {
                if (onnxc_z_bits(&s, 3, &v)) return -1;
                cl[clorder[i]] = (uint8_t)v;
            }
            if (onnxc_z_build(&clh, cl, 19)) return -1;
            for (uint32_t i = 0; i < hlit + hdist;) {
                int sym = onnxc_z_decode(&s, &clh);
                uint32_t rep, val = 0;
                if (sym < 0) return -1;
                if (sym < 16) { lens[i++] = (uint8_t)sym; continue; }
                if (sym == 16) {
                    if (i == 0 || onnxc_z_bits(&s, 2, &rep)) return -1;
                    val = lens[i - 1]; rep += 3;
                } else if (sym == 17) {
                    if (onnxc_z_bits(&s, 3, &rep)) return -1;
                    rep += 3;
                } else {
                    if (onnxc_z_bits(&s, 7, &rep)) return -1;
                    rep += 11;
                }
                if (i + rep > hlit + hdist) return -1;
                while (rep--) lens[i++] = (uint8_t)val;
            }
            if (lens[256] == 0) return -1;       /* no end-of-block code */
            if (onnxc_z_build(&lit, lens, (int)hlit) || onnxc_z_build(&dist, lens + hlit, (int)hdist))
                return -1;
        } else {
            return -1;
        }
        for (;;) {
            int sym = onnxc_z_decode(&s, &lit);
            if (sym < 0) return -1;
            if (sym < 256) {
                out[o++] = (uint8_t)sym;
                if (o == cap) return 0;
                continue;
            }
            if (sym == 256) break;
            sym -= 257;
            if (sym >= 29) return -1;
            uint32_t len = lbase[sym], dv;
            if (lext[sym] && onnxc_z_bits(&s, lext[sym], &v)) return -1;
            if (lext[sym]) len += v;
            int ds = onnxc_z_decode(&s, &dist);
            if (ds < 0 || ds >= 30) return -1;
            dv = dbase[ds];
            if (dext[ds]) {
                if (onnxc_z_bits(&s, dext[ds], &v)) return -1;
                dv += v;
            }
            if ((int64_t)dv > o) return -1;      /* before the start of the output */
            for (uint32_t i = 0; i < len; ++i, ++o) {
                out[o] = out[o - dv];
                if (o + 1 == cap) return 0;
            }
        }
    }
    return o == cap ? 0 : -1;
}

/* ---- PNG --------------------------------------------------------------------------------------- */
typedef struct {
    int64_t w, h, idat, raw;
    int depth, ctype, interlace, chans, npal;
    const uint8_t *pal;
} onnxc_png;

static uint32_t onnxc_crc32(const uint8_t *p, int64_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (int64_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return c ^ 0xFFFFFFFFu;
}

static const uint8_t onnxc_adam7[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                          {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};

static int onnxc_png_parse(const uint8_t *d, int64_t n, onnxc_png *g)
{
    int64_t pos = 8;
    int seen_idat = 0;
    memset(g, 0, sizeof *g);
    if (n < 33 || onnxc_img_be32(d + 8) != 13 || memcmp(d + 12, "IHDR", 4) != 0) return ONNXC_IMG_BAD;
    if (onnxc_crc32(d + 12, 17) != onnxc_img_be32(d + 29)) return ONNXC_IMG_BAD;
    g->w = onnxc_img_be32(d + 16);
    g->h = onnxc_img_be32(d + 20);
    g->depth = d[24]; g->ctype = d[25]; g->interlace = d[28];
    if (d[26] != 0 || d[27] != 0 || g->interlace > 1) return ONNXC_IMG_BAD;
    switch (g->ctype) {
    case 0: g->chans = 1; if (g->depth != 1 && g->depth != 2 && g->depth != 4 && g->depth != 8 && g->depth != 16) return ONNXC_IMG_BAD; break;
    case 3: g->chans = 1; if (g->depth != 1 && g->depth != 2 && g->depth != 4 && g->depth != 8) return ONNXC_IMG_BAD; break;
    case 2: g->chans = 3; break;
    case 4: g->chans = 2; break;
    case 6: g->chans = 4; break;
    default: return ONNXC_IMG_BAD;
    }
    if (g->ctype != 0 && g->ctype != 3 && g->depth != 8 && g->depth != 16) return ONNXC_IMG_BAD;
    if (g->ctype == 0 && g->depth == 16) return ONNXC_IMG_UNSUPPORTED;   /* Pillow: mode I;16 */
    if (!onnxc_img_dims_ok(g->h, g->w)) return ONNXC_IMG_BAD;
    while (pos + 12 <= n) {
        const int64_t len = onnxc_img_be32(d + pos);
        const uint8_t *t = d + pos + 4;
        if (len > n - pos - 12) return ONNXC_IMG_BAD;
        if (memcmp(t, "IEND", 4) == 0) break;
        if (memcmp(t, "IDAT", 4) == 0) {
            g->idat += len;
            seen_idat = 1;
        } else if (memcmp(t, "PLTE", 4) == 0) {
            if (len % 3 != 0 || len > 768 || onnxc_crc32(t, len + 4) != onnxc_img_be32(t + 4 + len))
                return ONNXC_IMG_BAD;
            g->pal = t + 4;
            g->npal = (int)(len / 3);
        }
        pos += 12 + len;
    }
    if (!seen_idat || (g->ctype == 3 && g->pal == NULL)) return ONNXC_IMG_BAD;
    for (int p = 0; p < (g->interlace ? 7 : 1); ++p) {
        const int x0 = g->interlace ? onnxc_adam7[p][0] : 0, y0 = g->interlace ? onnxc_adam7[p][1] : 0;
        const int dx = g->interlace ? onnxc_adam7[p][2] : 1, dy = g->interlace ? onnxc_adam7[p][3] : 1;
        const int64_t pw = (g->w - x0 + dx - 1) / dx, ph = (g->h - y0 + dy - 1) / dy;
        if (pw > 0 && ph > 0) g->raw += ph * (1 + (pw * g->chans * g->depth + 7) / 8);
    }
    /* deflate expands at most 1032:1: a header claiming more cannot be complete (and must not
       size the workspace) */
    return g->raw > (g->idat + 16) * 1032 ? ONNXC_IMG_BAD : 0;
}

static int onnxc_png_probe(const uint8_t *d, int64_t n, int64_t *h, int64_t *w, int64_t *work)
{
    onnxc_png g;
    int rc = onnxc_png_parse(d, n, &g);
    *h = g.h; *w = g.w;
    *work = g.idat + g.raw + 64;
    return rc;
}

static inline int onnxc_png_sample(const onnxc_png *g, const uint8_t *row, int64_t x, int c)
{
    if (g->depth == 8) return row[x * g->chans + c];
    if (g->depth == 16) return row[(x * g->chans + c) * 2];   /* Pillow keeps the high byte */
    const int64_t bit = x * g->depth;
    return (row[bit >> 3] >> (8 - g->depth - (int)(bit & 7))) & ((1 << g->depth) - 1);
}

static int onnxc_png_decode(const uint8_t *d, int64_t n, int64_t h, int64_t w, uint8_t *rgb,
                            uint8_t *ws, int64_t work)
{
    onnxc_png g;
    int64_t pos = 8, k = 0;
    int rc = onnxc_png_parse(d, n, &g);
    if (rc != 0) return rc;
    if (g.h != h || g.w != w || g.idat + g.raw > work) return ONNXC_IMG_BAD;
    while (pos + 12 <= n) {                   /* the IDAT chunks, concatenated */
        const int64_t len = onnxc_img_be32(d + pos);
        if (memcmp(d + pos + 4, "IEND", 4) == 0) break;
        if (memcmp(d + pos + 4, "IDAT", 4) == 0) {
            memcpy(ws + k, d + pos + 8, (size_t)len);
            k += len;
        }
        pos += 12 + len;
    }
    uint8_t *raw = ws + g.idat;
    if (onnxc_inflate(ws, g.idat, raw, g.raw) != 0) return ONNXC_IMG_BAD;
    const int bpp = g.chans * g.depth >= 8 ? g.chans * g.depth / 8 : 1;
    const int gscale = g.depth == 1 ? 255 : g.depth == 2 ? 85 : g.depth == 4 ? 17 : 1;
    for (int p = 0; p < (g.interlace ? 7 : 1); ++p) {
        const int x0 = g.interlace ? onnxc_adam7[p][0] : 0, y0 = g.interlace ? onnxc_adam7[p][1] : 0;
        const int dx = g.interlace ? onnxc_adam7[p][2] : 1, dy = g.interlace ? onnxc_adam7[p][3] : 1;
        const int64_t pw = (w - x0 + dx - 1) / dx, ph = (h - y0 + dy - 1) / dy;
        if (pw <= 0 || ph <= 0) continue;
        const int64_t rb = (pw * g.chans * g.depth + 7) / 8;
        for (int64_t r = 0; r < ph; ++r, raw += rb + 1) {
            uint8_t *cur = raw + 1;
            const uint8_t *prev = r > 0 ? cur - (rb + 1) : NULL;
            switch (raw[0]) {
            case 0: break;
            case 1: for (int64_t i = bpp; i < rb; ++i) cur[i] = (uint8_t)(cur[i] + cur[i - bpp]); break;
            case 2: if (prev) for (int64_t i = 0; i < rb; ++i) cur[i] = (uint8_t)(cur[i] + prev[i]); break;
            case 3:
                for (int64_t i = 0; i < rb; ++i) {
                    const int a = i >= bpp ? cur[i - bpp] : 0, b = prev ? prev[i] : 0;
                    cur[i] = (uint8_t)(cur[i] + ((a + b) >> 1));
                }
                break;
            case 4:
                for (int64_t i = 0; i < rb; ++i) {
                    const int a = i >= bpp ? cur[i - bpp] : 0, b = prev ? prev[i] : 0;
                    const int c = (i >= bpp && prev) ? prev[i - bpp] : 0;
                    const int pp = a + b - c, pa = abs(pp - a), pb = abs(pp - b), pc = abs(pp - c);
                    cur[i] = (uint8_t)(cur[i] + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c));
                }
                break;
            default: return ONNXC_IMG_BAD;
            }
            const int64_t y = y0 + r * dy;
            for (int64_t i = 0; i < pw; ++i) {
                uint8_t *o = rgb + (y * w + x0 + i * dx) * 3;
                if (g.ctype == 2 || g.ctype == 6) {
                    o[0] = (uint8_t)onnxc_png_sample(&g, cur, i, 0);
                    o[1] = (uint8_t)onnxc_png_sample(&g, cur, i, 1);
                    o[2] = (uint8_t)onnxc_png_sample(&g, cur, i, 2);
                } else if (g.ctype == 3) {
                    const int idx = onnxc_png_sample(&g, cur, i, 0);
                    if (idx < g.npal) {
                        o[0] = g.pal[3 * idx]; o[1] = g.pal[3 * idx + 1]; o[2] = g.pal[3 * idx + 2];
                    } else {
                        o[0] = o[1] = o[2] = 0;
                    }
                } else {
                    o[0] = o[1] = o[2] = (uint8_t)(onnxc_png_sample(&g, cur, i, 0) * gscale);
                }
            }
        }
    }
    return 0;
}

#endif
