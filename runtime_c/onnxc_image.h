/* onnxc image decoders for ImageDecoder: BMP, PNM, PNG (own inflate), TIFF and baseline JPEG
 * (onnxc_image_jpeg.h). C99, no allocation: workspace from the caller, sized by onnxc_img_probe.
 * Every read is bounds-checked: malformed, truncated or unsupported data returns non-zero.
 * Results match Pillow's decoders byte for byte (zlib, libjpeg-turbo's default settings). */
#ifndef ONNXC_IMAGE_H
#define ONNXC_IMAGE_H

#include <stdint.h>
#include <string.h>
#include <math.h>
#include <stdlib.h>

/* Images above this many pixels are refused (Pillow's decompression-bomb limit is 1.8e8). */
#define ONNXC_IMG_MAX_PIXELS (INT64_C(1) << 28)
#define ONNXC_IMG_BAD (-1)          /* malformed or truncated */
#define ONNXC_IMG_UNSUPPORTED (-2)  /* a valid image of a kind not implemented */

static inline uint32_t onnxc_img_le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static inline uint32_t onnxc_img_le32(const uint8_t *p) { return onnxc_img_le16(p) | onnxc_img_le16(p + 2) << 16; }
static inline uint32_t onnxc_img_be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | (uint32_t)p[1]; }
static inline uint32_t onnxc_img_be32(const uint8_t *p) { return onnxc_img_be16(p) << 16 | onnxc_img_be16(p + 2); }

static int onnxc_img_dims_ok(int64_t h, int64_t w)
{
    return h > 0 && w > 0 && h <= (INT64_C(1) << 24) && w <= (INT64_C(1) << 24)
        && h * w <= ONNXC_IMG_MAX_PIXELS;
}

/* ---- BMP (uncompressed 1/4/8-bit palette, 24-bit BGR, 32-bit BGRX) ------------------------ */
typedef struct {
    int64_t w, h, off, stride;
    int bpp, topdown, ncol, palsz;
    const uint8_t *pal;
} onnxc_bmp;

static int onnxc_bmp_parse(const uint8_t *d, int64_t n, onnxc_bmp *b)
{
    uint32_t hs, comp = 0;
    int64_t need;
    if (n < 26) return ONNXC_IMG_BAD;
    b->off = onnxc_img_le32(d + 10);
    hs = onnxc_img_le32(d + 14);
    b->topdown = 0;
    if (hs == 12) {                       /* OS/2 core header: 3-byte palette entries */
        b->w = onnxc_img_le16(d + 18);
        b->h = onnxc_img_le16(d + 20);
        b->bpp = (int)onnxc_img_le16(d + 24);
        b->palsz = 3;
        b->ncol = 0;
    } else if (hs >= 40 && hs <= 1024) {
        if (n < 54) return ONNXC_IMG_BAD;
        b->w = (int32_t)onnxc_img_le32(d + 18);
        b->h = (int32_t)onnxc_img_le32(d + 22);
        b->bpp = (int)onnxc_img_le16(d + 28);
        comp = onnxc_img_le32(d + 30);
        b->ncol = (int)(onnxc_img_le32(d + 46) > 256 ? 257 : onnxc_img_le32(d + 46));
        b->palsz = 4;
        if (b->h < 0) { b->topdown = 1; b->h = -b->h; }
    } else {
        return ONNXC_IMG_BAD;
    }
    if (comp != 0) return ONNXC_IMG_UNSUPPORTED;      /* RLE, bitfields, embedded JPEG/PNG */
    if (b->bpp != 1 && b->bpp != 4 && b->bpp != 8 && b->bpp != 24 && b->bpp != 32)
        return ONNXC_IMG_UNSUPPORTED;
    if (!onnxc_img_dims_ok(b->h, b->w)) return ONNXC_IMG_BAD;
    b->pal = d + 14 + hs;
    if (b->bpp <= 8) {
        if (b->ncol == 0) b->ncol = 1 << b->bpp;
        if (b->ncol > 256 || 14 + (int64_t)hs + (int64_t)b->ncol * b->palsz > n) return ONNXC_IMG_BAD;
    }
    b->stride = (b->w * b->bpp + 31) / 32 * 4;
    need = b->off + b->stride * b->h;
    if (b->off < 14 + (int64_t)hs || need > n) return ONNXC_IMG_BAD;
    return 0;
}

static int onnxc_bmp_decode(const uint8_t *d, int64_t n, int64_t h, int64_t w, uint8_t *rgb)
{
    onnxc_bmp b;
    int rc = onnxc_bmp_parse(d, n, &b);
    if (rc != 0) return rc;
    if (b.h != h || b.w != w) return ONNXC_IMG_BAD;
    for (int64_t y = 0; y < h; ++y) {
        const uint8_t *row = d + b.off + (b.topdown ? y : h - 1 - y) * b.stride;
        uint8_t *o = rgb + y * w * 3;
        for (int64_t x = 0; x < w; ++x, o += 3) {
            if (b.bpp >= 24) {
                const uint8_t *px = row + x * (b.bpp / 8);
                o[0] = px[2]; o[1] = px[1]; o[2] = px[0];
            } else {
                const int64_t bit = x * b.bpp;
                const int idx = (row[bit >> 3] >> (8 - b.bpp - (int)(bit & 7))) & ((1 << b.bpp) - 1);
                if (idx < b.ncol) {
                    const uint8_t *c = b.pal + idx * b.palsz;
                    o[0] = c[2]; o[1] = c[1]; o[2] = c[0];
                } else {
                    o[0] = o[1] = o[2] = 0;
                }
            }
        }
    }
    return 0;
}

/* ---- PNM (P4 bitmap, P5 graymap, P6 pixmap; binary) ---------------------------------------- */
typedef struct { int64_t w, h, off; int kind, maxval; } onnxc_pnm;

/* Pillow's header tokens: whitespace separated, '#' comments to the end of the line, at most 10
 * characters; the whitespace byte after the last token is consumed. */
static int onnxc_pnm_token(const uint8_t *d, int64_t n, int64_t *pos, int64_t *val)
{
    int64_t p = *pos, v = 0;
    int len = 0;
    for (;;) {
        if (p >= n) return ONNXC_IMG_BAD;
        if (d[p] == '#') {
            while (p < n && d[p] != '\n' && d[p] != '\r') ++p;
        } else if (d[p] == ' ' || (d[p] >= 9 && d[p] <= 13)) {
            ++p;
        } else {
            break;
        }
    }
    while (p < n && !(d[p] == ' ' || (d[p] >= 9 && d[p] <= 13))) {
        if (d[p] < '0' || d[p] > '9' || ++len > 10) return ONNXC_IMG_BAD;
        v = v * 10 + (d[p++] - '0');
    }
    if (p >= n) return ONNXC_IMG_BAD;
    *pos = p + 1;
    *val = v;
    return 0;
}

static int onnxc_pnm_parse(const uint8_t *d, int64_t n, onnxc_pnm *m)
{
    int64_t pos = 2, v, per, need;
    if (n < 3 || d[0] != 'P' || d[1] < '4' || d[1] > '6') return ONNXC_IMG_UNSUPPORTED;
    m->kind = d[1] - '0';
    if (onnxc_pnm_token(d, n, &pos, &m->w) || onnxc_pnm_token(d, n, &pos, &m->h)) return ONNXC_IMG_BAD;
    m->maxval = 1;
    if (m->kind != 4) {
        if (onnxc_pnm_token(d, n, &pos, &v) || v < 1 || v > 65535) return ONNXC_IMG_BAD;
        m->maxval = (int)v;
        if (m->kind == 5 && v > 255) return ONNXC_IMG_UNSUPPORTED;   /* Pillow: 32-bit mode I */
    }
    if (!onnxc_img_dims_ok(m->h, m->w)) return ONNXC_IMG_BAD;
    m->off = pos;
    per = m->kind == 6 ? 3 : 1;
    need = m->kind == 4 ? (m->w + 7) / 8 * m->h : m->w * m->h * per * (m->maxval > 255 ? 2 : 1);
    return need > n - pos ? ONNXC_IMG_BAD : 0;
}

static int onnxc_pnm_decode(const uint8_t *d, int64_t n, int64_t h, int64_t w, uint8_t *rgb)
{
    onnxc_pnm m;
    int rc = onnxc_pnm_parse(d, n, &m);
    if (rc != 0) return rc;
    if (m.h != h || m.w != w) return ONNXC_IMG_BAD;
    const uint8_t *s = d + m.off;
    if (m.kind == 4) {                       /* 1 = black */
        for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x) {
                const uint8_t g = (s[y * ((w + 7) / 8) + (x >> 3)] >> (7 - (x & 7))) & 1 ? 0 : 255;
                uint8_t *o = rgb + (y * w + x) * 3;
                o[0] = o[1] = o[2] = g;
            }
        return 0;
    }
    const int per = m.kind == 6 ? 3 : 1, wide = m.maxval > 255;
    for (int64_t i = 0; i < h * w; ++i)
        for (int c = 0; c < 3; ++c) {
            const int64_t k = i * per + (per == 3 ? c : 0);
            int64_t v = wide ? (int64_t)onnxc_img_be16(s + 2 * k) : s[k];
            if (m.maxval != 255) {               /* Pillow: min(255, round(v / maxval * 255)) */
                const double r = rint((double)v / (double)m.maxval * 255.0);
                v = r > 255.0 ? 255 : (int64_t)r;
            }
            rgb[i * 3 + c] = (uint8_t)v;
        }
    return 0;
}

#include "onnxc_image_png.h"
#include "onnxc_image_tiff.h"
#include "onnxc_image_jpeg.h"

/* ---- dispatch -------------------------------------------------------------------------------- */
/* Height, width and the workspace bytes the decoder needs beyond the RGB image. */
static int onnxc_img_probe(const uint8_t *d, int64_t n, int64_t *h, int64_t *w, int64_t *work)
{
    int rc = ONNXC_IMG_UNSUPPORTED;
    *work = 0;
    if (d == NULL || n < 8) return ONNXC_IMG_BAD;
    if (d[0] == 'B' && d[1] == 'M') {
        onnxc_bmp b = {0};
        rc = onnxc_bmp_parse(d, n, &b);
        *h = b.h; *w = b.w;
    } else if (d[0] == 'P' && d[1] >= '4' && d[1] <= '6') {
        onnxc_pnm m = {0};
        rc = onnxc_pnm_parse(d, n, &m);
        *h = m.h; *w = m.w;
    } else if (memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) {
        rc = onnxc_png_probe(d, n, h, w, work);
    } else if (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0) {
        rc = onnxc_tiff_probe(d, n, h, w, work);
    } else if (d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) {
        rc = onnxc_jpeg_probe(d, n, h, w, work);
    }
    if (rc == 0 && (!onnxc_img_dims_ok(*h, *w) || *work < 0 || *work > (INT64_C(1) << 36)))
        rc = ONNXC_IMG_BAD;
    return rc;
}

/* fmt: 0 RGB, 1 BGR, 2 Grayscale (Pillow's "L": (19595 R + 38470 G + 7471 B + 0x8000) >> 16). */
static int onnxc_img_decode(const uint8_t *d, int64_t n, int64_t h, int64_t w, int fmt,
                            uint8_t *out, uint8_t *scratch, int64_t work)
{
    int64_t ph, pw, pwork;
    int rc = onnxc_img_probe(d, n, &ph, &pw, &pwork);
    if (rc != 0) return rc;
    if (ph != h || pw != w || pwork > work) return ONNXC_IMG_BAD;
    uint8_t *rgb = scratch, *ws = scratch + ((3 * h * w + 63) & ~(int64_t)63);
    if (d[0] == 'B') rc = onnxc_bmp_decode(d, n, h, w, rgb);
    else if (d[0] == 'P') rc = onnxc_pnm_decode(d, n, h, w, rgb);
    else if (d[0] == 0x89) rc = onnxc_png_decode(d, n, h, w, rgb, ws, work);
    else if (d[0] == 'I' || d[0] == 'M') rc = onnxc_tiff_decode(d, n, h, w, rgb, ws, work);
    else rc = onnxc_jpeg_decode(d, n, h, w, rgb, ws, work);
    if (rc != 0) return rc;
    const int64_t np = h * w;
    if (fmt == 0) {
        memcpy(out, rgb, (size_t)(np * 3));
    } else if (fmt == 1) {
        for (int64_t i = 0; i < np; ++i) {
            out[3 * i] = rgb[3 * i + 2]; out[3 * i + 1] = rgb[3 * i + 1]; out[3 * i + 2] = rgb[3 * i];
        }
    } else {
        for (int64_t i = 0; i < np; ++i)
            out[i] = (uint8_t)((rgb[3 * i] * 19595u + rgb[3 * i + 1] * 38470u + rgb[3 * i + 2] * 7471u
                                + 0x8000u) >> 16);
    }
    return 0;
}

#endif
