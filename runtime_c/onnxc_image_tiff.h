/* TIFF for onnxc_image.h: the first image (IFD 0), in strips, uncompressed or PackBits, chunky;
 * 8-bit gray (BlackIsZero / WhiteIsZero), RGB, RGBA (alpha dropped), palette, 1-bit bilevel. */
#ifndef ONNXC_IMAGE_TIFF_H
#define ONNXC_IMAGE_TIFF_H

typedef struct {
    const uint8_t *d;
    int64_t n, w, h, rps, rowbytes;
    int le, comp, photo, spp, bps, nstrips;
    int64_t offs_e, cnts_e, cmap_e;   /* entry positions of StripOffsets, StripByteCounts, ColorMap */
} onnxc_tiff;

static inline uint32_t onnxc_tiff_u16(const onnxc_tiff *t, int64_t p)
{
    return t->le ? onnxc_img_le16(t->d + p) : onnxc_img_be16(t->d + p);
}
static inline uint32_t onnxc_tiff_u32(const onnxc_tiff *t, int64_t p)
{
    return t->le ? onnxc_img_le32(t->d + p) : onnxc_img_be32(t->d + p);
}

/* Value k of the IFD entry at e (BYTE, SHORT or LONG), bounds-checked; -1 when absent. */
static int64_t onnxc_tiff_val(const onnxc_tiff *t, int64_t e, int64_t k)
{
    const uint32_t type = onnxc_tiff_u16(t, e + 2), count = onnxc_tiff_u32(t, e + 4);
    const int size = type == 1 ? 1 : type == 3 ? 2 : type == 4 ? 4 : 0;
    int64_t at = e + 8;
    if (size == 0 || k < 0 || k >= (int64_t)count) return -1;
    if ((int64_t)count * size > 4) at = onnxc_tiff_u32(t, e + 8);
    if (at + ((int64_t)count) * size > t->n) return -1;
    at += k * size;
    return size == 1 ? t->d[at] : size == 2 ? (int64_t)onnxc_tiff_u16(t, at) : (int64_t)onnxc_tiff_u32(t, at);
}

static int onnxc_tiff_parse(const uint8_t *d, int64_t n, onnxc_tiff *t)
{
    int64_t ifd, cnt, planar = 1, pred = 1, fill = 1;
    memset(t, 0, sizeof *t);
    t->d = d; t->n = n; t->le = d[0] == 'I';
    t->comp = 1; t->photo = -1; t->spp = 1; t->bps = 1; t->rps = -1;
    t->offs_e = t->cnts_e = t->cmap_e = -1;
    ifd = onnxc_tiff_u32(t, 4);
    if (ifd < 8 || ifd + 2 > n) return ONNXC_IMG_BAD;
    cnt = onnxc_tiff_u16(t, ifd);
    if (ifd + 2 + cnt * 12 > n) return ONNXC_IMG_BAD;
    for (int64_t i = 0; i < cnt; ++i) {
        const int64_t e = ifd + 2 + 12 * i;
        const uint32_t tag = onnxc_tiff_u16(t, e);
        const int64_t v = onnxc_tiff_val(t, e, 0);
        switch (tag) {
        case 256: t->w = v; break;
        case 257: t->h = v; break;
        case 258:
            t->bps = (int)v;
            if (v < 0 || onnxc_tiff_u32(t, e + 4) > 16) return ONNXC_IMG_BAD;   /* one per sample */
            for (int64_t k = 1; k < (int64_t)onnxc_tiff_u32(t, e + 4); ++k)
                if (onnxc_tiff_val(t, e, k) != v) return ONNXC_IMG_UNSUPPORTED;
            break;
        case 259: t->comp = (int)v; break;
        case 262: t->photo = (int)v; break;
        case 266: fill = v; break;
        case 273: t->offs_e = e; break;
        case 277: t->spp = (int)v; break;
        case 278: t->rps = v; break;
        case 279: t->cnts_e = e; break;
        case 284: planar = v; break;
        case 317: pred = v; break;
        case 320: t->cmap_e = e; break;
        case 322: case 323: case 324: case 325: return ONNXC_IMG_UNSUPPORTED;   /* tiled */
        default: break;
        }
    }
    if (!onnxc_img_dims_ok(t->h, t->w) || t->offs_e < 0 || t->photo < 0) return ONNXC_IMG_BAD;
    if ((t->comp != 1 && t->comp != 32773) || pred != 1 || fill != 1 || (planar != 1 && t->spp > 1))
        return ONNXC_IMG_UNSUPPORTED;
    if (!((t->bps == 8 && t->spp == 1 && (t->photo <= 1 || t->photo == 3))
          || (t->bps == 1 && t->spp == 1 && t->photo <= 1)
          || (t->bps == 8 && (t->spp == 3 || t->spp == 4) && t->photo == 2)))
        return ONNXC_IMG_UNSUPPORTED;
    if (t->photo == 3 && (t->cmap_e < 0 || onnxc_tiff_val(t, t->cmap_e, 767) < 0)) return ONNXC_IMG_BAD;
    if (t->rps <= 0 || t->rps > t->h) t->rps = t->h;
    t->nstrips = (int)((t->h + t->rps - 1) / t->rps);
    t->rowbytes = (t->w * t->spp * t->bps + 7) / 8;
    if (onnxc_tiff_val(t, t->offs_e, t->nstrips - 1) < 0) return ONNXC_IMG_BAD;
    if (t->comp != 1 && (t->cnts_e < 0 || onnxc_tiff_val(t, t->cnts_e, t->nstrips - 1) < 0))
        return ONNXC_IMG_BAD;
    if (t->h * t->rowbytes > 64 * n) return ONNXC_IMG_BAD;   /* beyond PackBits' 64:1 */
    return 0;
}

static int onnxc_tiff_probe(const uint8_t *d, int64_t n, int64_t *h, int64_t *w, int64_t *work)
{
    onnxc_tiff t;
    int rc = onnxc_tiff_parse(d, n, &t);
    *h = t.h; *w = t.w;
    *work = t.h * t.rowbytes + 64;
    return rc;
}

static int onnxc_tiff_decode(const uint8_t *d, int64_t n, int64_t h, int64_t w, uint8_t *rgb,
                             uint8_t *ws, int64_t work)
{
    onnxc_tiff t;
    int rc = onnxc_tiff_parse(d, n, &t);
    if (rc != 0) return rc;
    if (t.h != h || t.w != w || h * t.rowbytes > work) return ONNXC_IMG_BAD;
    for (int s = 0; s < t.nstrips; ++s) {
        const int64_t rows = onnxc_min64(t.rps, h - s * t.rps), need = rows * t.rowbytes;
        const int64_t off = onnxc_tiff_val(&t, t.offs_e, s);
        uint8_t *o = ws + s * t.rps * t.rowbytes;
        if (t.comp == 1) {
            if (off < 0 || off > n - need) return ONNXC_IMG_BAD;
            memcpy(o, d + off, (size_t)need);
            continue;
        }
        const int64_t len = onnxc_tiff_val(&t, t.cnts_e, s);   /* PackBits */
        int64_t i = off, got = 0;
        if (off < 0 || len < 0 || len > n - off) return ONNXC_IMG_BAD;
        while (got < need) {
            if (i >= off + len) return ONNXC_IMG_BAD;
            const int c = (int8_t)d[i++];
            if (c >= 0) {
                if (c + 1 > off + len - i || c + 1 > need - got) return ONNXC_IMG_BAD;
                memcpy(o + got, d + i, (size_t)(c + 1));
                i += c + 1; got += c + 1;
            } else if (c != -128) {
                if (i >= off + len || 1 - c > need - got) return ONNXC_IMG_BAD;
                memset(o + got, d[i++], (size_t)(1 - c));
                got += 1 - c;
            }
        }
    }
    for (int64_t y = 0; y < h; ++y) {
        const uint8_t *row = ws + y * t.rowbytes;
        for (int64_t x = 0; x < w; ++x) {
            uint8_t *o = rgb + (y * w + x) * 3;
            if (t.photo == 2) {
                o[0] = row[x * t.spp]; o[1] = row[x * t.spp + 1]; o[2] = row[x * t.spp + 2];
            } else if (t.photo == 3) {
                for (int c = 0; c < 3; ++c)   /* 16-bit colormap: Pillow keeps the high byte */
                    o[c] = (uint8_t)(onnxc_tiff_val(&t, t.cmap_e, c * 256 + row[x]) >> 8);
            } else {
                int v = t.bps == 8 ? row[x] : ((row[x >> 3] >> (7 - (x & 7))) & 1) * 255;
                o[0] = o[1] = o[2] = (uint8_t)(t.photo == 0 ? 255 - v : v);
            }
        }
    }
    return 0;
}

#endif
