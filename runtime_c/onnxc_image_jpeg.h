/* Baseline JPEG for onnxc_image.h (SOF0/SOF1, Huffman, 8-bit, 1 or 3 components, restart
 * intervals, interleaved or per-component scans), decoded exactly as libjpeg-turbo with Pillow's
 * settings: the "islow" integer IDCT (jidctint.c), fancy (triangle) chroma upsampling
 * (jdsample.c: h2v1, h2v2, h1v2; plain replication otherwise) and jdcolor.c's YCbCr tables. */
#ifndef ONNXC_IMAGE_JPEG_H
#define ONNXC_IMAGE_JPEG_H

typedef struct {
    int32_t maxcode[18], valoff[17];
    uint8_t val[256];
    uint16_t look[1 << 9];   /* next 9 bits -> length << 8 | value; 0: a longer code */
    int present;
} onnxc_jhuff;

typedef struct {
    int id, h, v, tq, done;
    int64_t bw, bh, dw, dh;  /* plane size in blocks (MCU-padded); downsampled size in pixels */
    uint8_t *plane;
} onnxc_jcomp;

typedef struct {
    int64_t w, h, mcux, mcuy, work;
    int ncomp, hmax, vmax, jfif, adobe, transform, ri;
    onnxc_jcomp c[3];
    uint16_t q[4][64];       /* natural order */
    int qpresent[4];
    onnxc_jhuff dc[4], ac[4];
} onnxc_jpeg;

typedef struct {
    const uint8_t *d;
    int64_t n, pos;
    uint64_t buf;            /* next bits at the top */
    int cnt, zbits, marker, eof, over;
} onnxc_jbits;

static const uint8_t onnxc_jzz[80] = {
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20,
    13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59,
    52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
    63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63};   /* libjpeg's overrun guard */

static int onnxc_jhuff_build(onnxc_jhuff *t, const uint8_t *bits, const uint8_t *vals, int isdc)
{
    int32_t code = 0, k = 0;
    memset(t->look, 0, sizeof t->look);
    for (int l = 1; l <= 16; ++l) {
        t->valoff[l] = k - code;
        for (int i = 0; i < bits[l - 1]; ++i, ++k, ++code) {
            if (code >= (1 << l)) return -1;
            if (l <= 9)
                for (int r = 0; r < (1 << (9 - l)); ++r)
                    t->look[(code << (9 - l)) | r] = (uint16_t)(l << 8 | vals[k]);
        }
        t->maxcode[l] = bits[l - 1] ? code - 1 : -1;
        code <<= 1;
    }
    t->maxcode[17] = INT32_MAX;
    for (int i = 0; i < k; ++i) t->val[i] = vals[i];
    if (isdc)
        for (int i = 0; i < k; ++i)
            if (vals[i] > 15) return -1;
    t->present = 1;
    return 0;
}

/* Next data byte of the entropy-coded segment (0xFF00 -> 0xFF); at a marker or the end of the
 * data, zero bits (libjpeg inserts zeros after a marker; running out of data is truncation). */
static inline void onnxc_jfill(onnxc_jbits *s)
{
    while (s->cnt <= 56) {
        uint32_t b = 0;
        if (!s->marker && !s->eof) {
            if (s->pos >= s->n) {
                s->eof = 1;
            } else if (s->d[s->pos] != 0xFF) {
                b = s->d[s->pos++];
            } else {
                int64_t j = s->pos + 1;
                while (j < s->n && s->d[j] == 0xFF) ++j;
                if (j >= s->n) s->eof = 1;
                else if (s->d[j] == 0) { b = 0xFF; s->pos = j + 1; }
                else s->marker = 1;
            }
        }
        if (s->marker || s->eof) s->zbits += 8;
        s->buf |= (uint64_t)b << (56 - s->cnt);
        s->cnt += 8;
    }
}

static inline void onnxc_jskip(onnxc_jbits *s, int k)
{
    s->buf <<= k;
    s->cnt -= k;
    if (s->cnt < s->zbits) { s->over = 1; s->zbits = s->cnt; }
}

static inline int onnxc_jdecode(onnxc_jbits *s, const onnxc_jhuff *t)
{
    if (s->cnt < 32) onnxc_jfill(s);
    const uint32_t e = t->look[s->buf >> 55];
    if (e != 0) {
        onnxc_jskip(s, (int)(e >> 8));
        return (int)(e & 255);
    }
    for (int l = 10; l <= 16; ++l) {
        const int32_t code = (int32_t)(s->buf >> (64 - l));
        if (code <= t->maxcode[l]) {
            onnxc_jskip(s, l);
            return t->val[(t->valoff[l] + code) & 255];
        }
    }
    return -1;   /* not a code of this table */
}

static inline int32_t onnxc_jreceive(onnxc_jbits *s, int k)
{
    if (k == 0) return 0;
    if (s->cnt < 32) onnxc_jfill(s);
    int32_t v = (int32_t)(s->buf >> (64 - k));
    onnxc_jskip(s, k);
    return v < (1 << (k - 1)) ? v - (1 << k) + 1 : v;
}

/* libjpeg's IDCT range limit: value + 128 wrapped to 10 bits, then clamped. */
static inline uint8_t onnxc_jrange(int64_t x)
{
    const int i = (int)(x & 1023);
    return (uint8_t)(i < 128 ? i + 128 : i < 512 ? 255 : i < 896 ? 0 : i - 896);
}

/* jidctint.c jpeg_idct_islow: coefficients (natural order) times quant into 8x8 samples. */
static void onnxc_jidct(const int16_t *in, const uint16_t *q, uint8_t *out, int64_t stride)
{
    int32_t ws[64];
    for (int c = 0; c < 8; ++c) {
        const int16_t *ip = in + c;
        const uint16_t *qp = q + c;
        if (!ip[8] && !ip[16] && !ip[24] && !ip[32] && !ip[40] && !ip[48] && !ip[56]) {
            const int32_t dc = (int32_t)((int64_t)ip[0] * qp[0] * 4);
            for (int r = 0; r < 8; ++r) ws[r * 8 + c] = dc;
            continue;
        }
        int64_t z1, z2, z3, z4, z5, t0, t1, t2, t3, t10, t11, t12, t13;
        z2 = (int64_t)ip[16] * qp[16]; z3 = (int64_t)ip[48] * qp[48];
        z1 = (z2 + z3) * 4433;
        t2 = z1 + z3 * -15137; t3 = z1 + z2 * 6270;
        z2 = (int64_t)ip[0] * qp[0]; z3 = (int64_t)ip[32] * qp[32];
        t0 = (z2 + z3) * 8192; t1 = (z2 - z3) * 8192;
        t10 = t0 + t3; t13 = t0 - t3; t11 = t1 + t2; t12 = t1 - t2;
        t0 = (int64_t)ip[56] * qp[56]; t1 = (int64_t)ip[40] * qp[40];
        t2 = (int64_t)ip[24] * qp[24]; t3 = (int64_t)ip[8] * qp[8];
        z1 = t0 + t3; z2 = t1 + t2; z3 = t0 + t2; z4 = t1 + t3;
        z5 = (z3 + z4) * 9633;
        t0 *= 2446; t1 *= 16819; t2 *= 25172; t3 *= 12299;
        z1 *= -7373; z2 *= -20995; z3 *= -16069; z4 *= -3196;
        z3 += z5; z4 += z5;
        t0 += z1 + z3; t1 += z2 + z4; t2 += z2 + z3; t3 += z1 + z4;
        ws[0 * 8 + c] = (int32_t)((t10 + t3 + 1024) >> 11);
        ws[7 * 8 + c] = (int32_t)((t10 - t3 + 1024) >> 11);
        ws[1 * 8 + c] = (int32_t)((t11 + t2 + 1024) >> 11);
        ws[6 * 8 + c] = (int32_t)((t11 - t2 + 1024) >> 11);
        ws[2 * 8 + c] = (int32_t)((t12 + t1 + 1024) >> 11);
        ws[5 * 8 + c] = (int32_t)((t12 - t1 + 1024) >> 11);
        ws[3 * 8 + c] = (int32_t)((t13 + t0 + 1024) >> 11);
        ws[4 * 8 + c] = (int32_t)((t13 - t0 + 1024) >> 11);
    }
    for (int r = 0; r < 8; ++r) {
        const int32_t *w = ws + r * 8;
        uint8_t *o = out + r * stride;
        int64_t z1, z2, z3, z4, z5, t0, t1, t2, t3, t10, t11, t12, t13;
        z2 = w[2]; z3 = w[6];
        z1 = (z2 + z3) * 4433;
        t2 = z1 + z3 * -15137; t3 = z1 + z2 * 6270;
        t0 = ((int64_t)w[0] + w[4]) * 8192; t1 = ((int64_t)w[0] - w[4]) * 8192;
        t10 = t0 + t3; t13 = t0 - t3; t11 = t1 + t2; t12 = t1 - t2;
        t0 = w[7]; t1 = w[5]; t2 = w[3]; t3 = w[1];
        z1 = t0 + t3; z2 = t1 + t2; z3 = t0 + t2; z4 = t1 + t3;
        z5 = (z3 + z4) * 9633;
        t0 *= 2446; t1 *= 16819; t2 *= 25172; t3 *= 12299;
        z1 *= -7373; z2 *= -20995; z3 *= -16069; z4 *= -3196;
        z3 += z5; z4 += z5;
        t0 += z1 + z3; t1 += z2 + z4; t2 += z2 + z3; t3 += z1 + z4;
        o[0] = onnxc_jrange((t10 + t3 + (1 << 17)) >> 18);
        o[7] = onnxc_jrange((t10 - t3 + (1 << 17)) >> 18);
        o[1] = onnxc_jrange((t11 + t2 + (1 << 17)) >> 18);
        o[6] = onnxc_jrange((t11 - t2 + (1 << 17)) >> 18);
        o[2] = onnxc_jrange((t12 + t1 + (1 << 17)) >> 18);
        o[5] = onnxc_jrange((t12 - t1 + (1 << 17)) >> 18);
        o[3] = onnxc_jrange((t13 + t0 + (1 << 17)) >> 18);
        o[4] = onnxc_jrange((t13 - t0 + (1 << 17)) >> 18);
    }
}

/* Walks the marker segments from SOI. With ws == NULL it stops after the frame header (probe);
 * otherwise it loads tables and decodes every scan into the component planes until EOI. */
static int onnxc_jpeg_walk(const uint8_t *d, int64_t n, onnxc_jpeg *j, uint8_t *ws, int64_t work);

static int onnxc_jpeg_frame(const uint8_t *s, int64_t len, onnxc_jpeg *j)
{
    if (len < 6) return ONNXC_IMG_BAD;
    if (s[0] != 8) return ONNXC_IMG_UNSUPPORTED;   /* 12-bit samples */
    j->h = onnxc_img_be16(s + 1);
    j->w = onnxc_img_be16(s + 3);
    j->ncomp = s[5];
    if (j->h == 0) return ONNXC_IMG_UNSUPPORTED;   /* height in a DNL marker */
    if (j->ncomp != 1 && j->ncomp != 3) return ONNXC_IMG_UNSUPPORTED;
    if (len < 6 + 3 * j->ncomp || j->w == 0) return ONNXC_IMG_BAD;
    j->hmax = j->vmax = 1;
    for (int i = 0; i < j->ncomp; ++i) {
        onnxc_jcomp *c = &j->c[i];
        c->id = s[6 + 3 * i];
        c->h = s[7 + 3 * i] >> 4;
        c->v = s[7 + 3 * i] & 15;
        c->tq = s[8 + 3 * i];
        if (c->h < 1 || c->h > 4 || c->v < 1 || c->v > 4 || c->tq > 3) return ONNXC_IMG_BAD;
        if (c->h > j->hmax) j->hmax = c->h;
        if (c->v > j->vmax) j->vmax = c->v;
    }
    j->mcux = (j->w + 8 * j->hmax - 1) / (8 * j->hmax);
    j->mcuy = (j->h + 8 * j->vmax - 1) / (8 * j->vmax);
    j->work = 3 * (j->mcux * 8 * j->hmax + 16) + 64;
    for (int i = 0; i < j->ncomp; ++i) {
        onnxc_jcomp *c = &j->c[i];
        if (j->hmax % c->h || j->vmax % c->v) return ONNXC_IMG_UNSUPPORTED;   /* fractional */
        c->bw = j->mcux * c->h;
        c->bh = j->mcuy * c->v;
        c->dw = (j->w * c->h + j->hmax - 1) / j->hmax;
        c->dh = (j->h * c->v + j->vmax - 1) / j->vmax;
        j->work += c->bw * c->bh * 64;
    }
    return 0;
}

static int onnxc_jpeg_probe(const uint8_t *d, int64_t n, int64_t *h, int64_t *w, int64_t *work)
{
    onnxc_jpeg j;
    int rc = onnxc_jpeg_walk(d, n, &j, NULL, 0);
    int64_t blocks = 0;
    *h = j.h; *w = j.w; *work = j.work;
    for (int i = 0; rc == 0 && i < j.ncomp; ++i) blocks += j.c[i].bw * j.c[i].bh;
    /* a coded block takes at least 2 bits (1-bit DC and end-of-block codes), and MCU padding at
       most quadruples the count: more blocks than the data can hold is a truncated image,
       refused before its workspace is sized */
    return rc == 0 && blocks > 16 * n + 64 ? ONNXC_IMG_BAD : rc;
}

/* One scan: ns components (cs: their indices), entropy data from *pos; *pos ends after it. */
static int onnxc_jpeg_scan(const uint8_t *d, int64_t n, int64_t *pos, onnxc_jpeg *j, int ns,
                           const int *cs, const int *td, const int *ta)
{
    onnxc_jbits s;
    int32_t pred[3] = {0, 0, 0};
    int16_t blk[64];
    int64_t ux, uy, left;
    int rst = 0;
    memset(&s, 0, sizeof s);
    s.d = d; s.n = n; s.pos = *pos;
    if (ns == 1) {   /* non-interleaved: one block per MCU, over the component's own size */
        const onnxc_jcomp *c = &j->c[cs[0]];
        ux = (c->dw + 7) / 8;
        uy = (c->dh + 7) / 8;
    } else {
        ux = j->mcux;
        uy = j->mcuy;
    }
    left = j->ri;
    for (int64_t my = 0; my < uy; ++my)
        for (int64_t mx = 0; mx < ux; ++mx) {
            if (j->ri && left == 0) {       /* restart: drop the bits, expect RSTn */
                int64_t p = s.pos;
                while (p + 1 < n && !(d[p] == 0xFF && d[p + 1] != 0 && d[p + 1] != 0xFF)) ++p;
                if (p + 1 >= n || d[p + 1] != 0xD0 + rst) return ONNXC_IMG_BAD;
                rst = (rst + 1) & 7;
                memset(&s, 0, sizeof s);
                s.d = d; s.n = n; s.pos = p + 2;
                pred[0] = pred[1] = pred[2] = 0;
                left = j->ri;
            }
            --left;
            for (int k = 0; k < ns; ++k) {
                onnxc_jcomp *c = &j->c[cs[k]];
                const int bh = ns == 1 ? 1 : c->h, bv = ns == 1 ? 1 : c->v;
                for (int by = 0; by < bv; ++by)
                    for (int bx = 0; bx < bh; ++bx) {
                        int t = onnxc_jdecode(&s, &j->dc[td[k]]);
                        if (t < 0 || t > 16) return ONNXC_IMG_BAD;
                        memset(blk, 0, sizeof blk);
                        pred[k] = (int32_t)((uint32_t)pred[k] + (uint32_t)onnxc_jreceive(&s, t));
                        blk[0] = (int16_t)pred[k];
                        for (int i = 1; i < 64; ++i) {
                            const int rs = onnxc_jdecode(&s, &j->ac[ta[k]]);
                            if (rs < 0) return ONNXC_IMG_BAD;
                            const int r = rs >> 4, sz = rs & 15;
                            if (sz) {
                                i += r;
                                blk[onnxc_jzz[i]] = (int16_t)onnxc_jreceive(&s, sz);
                            } else if (r != 15) {
                                break;
                            } else {
                                i += 15;
                            }
                        }
                        if (s.over && s.eof) return ONNXC_IMG_BAD;   /* truncated */
                        const int64_t bxx = ns == 1 ? mx : mx * c->h + bx;
                        const int64_t byy = ns == 1 ? my : my * c->v + by;
                        onnxc_jidct(blk, j->q[c->tq], c->plane + byy * 8 * c->bw * 8 + bxx * 8, c->bw * 8);
                    }
            }
        }
    for (int k = 0; k < ns; ++k) j->c[cs[k]].done = 1;
    *pos = s.pos;
    return 0;
}

static int onnxc_jpeg_walk(const uint8_t *d, int64_t n, onnxc_jpeg *j, uint8_t *ws, int64_t work)
{
    int64_t pos = 2;
    int have_frame = 0;
    memset(j, 0, sizeof *j);
    for (;;) {
        int m;
        for (;;) {   /* next marker, past fill bytes and garbage (libjpeg warns) */
            if (pos + 1 >= n) return ONNXC_IMG_BAD;   /* no EOI: truncated */
            if (d[pos] == 0xFF && d[pos + 1] != 0 && d[pos + 1] != 0xFF) break;
            ++pos;
        }
        m = d[pos + 1];
        pos += 2;
        if (m == 0xD9) break;
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;
        if (pos + 2 > n) return ONNXC_IMG_BAD;
        const int64_t len = onnxc_img_be16(d + pos);
        if (len < 2 || pos + len > n) return ONNXC_IMG_BAD;
        const uint8_t *s = d + pos + 2;
        const int64_t sl = len - 2;
        pos += len;
        if (m == 0xC0 || m == 0xC1) {
            if (have_frame) return ONNXC_IMG_BAD;
            int rc = onnxc_jpeg_frame(s, sl, j);
            if (rc != 0) return rc;
            have_frame = 1;
            if (ws == NULL) return 0;
            if (j->work > work) return ONNXC_IMG_BAD;
            uint8_t *p = ws;
            for (int i = 0; i < j->ncomp; ++i) {
                j->c[i].plane = p;
                p += j->c[i].bw * j->c[i].bh * 64;
            }
        } else if ((m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC)) {
            return ONNXC_IMG_UNSUPPORTED;          /* progressive, lossless, arithmetic coding */
        } else if (m == 0xDA) {
            int cs[4], td[4], ta[4], ns;
            if (!have_frame) return ONNXC_IMG_BAD;
            if (ws == NULL) return ONNXC_IMG_BAD;
            ns = sl >= 1 ? s[0] : 0;
            if (ns < 1 || ns > j->ncomp || sl < 4 + 2 * ns) return ONNXC_IMG_BAD;
            for (int k = 0; k < ns; ++k) {
                cs[k] = -1;
                for (int i = 0; i < j->ncomp; ++i)
                    if (j->c[i].id == s[1 + 2 * k]) cs[k] = i;
                td[k] = s[2 + 2 * k] >> 4;
                ta[k] = s[2 + 2 * k] & 15;
                if (cs[k] < 0 || td[k] > 3 || ta[k] > 3 || !j->dc[td[k]].present
                    || !j->ac[ta[k]].present || !j->qpresent[j->c[cs[k]].tq])
                    return ONNXC_IMG_BAD;
                for (int i = 0; i < k; ++i)
                    if (cs[i] == cs[k]) return ONNXC_IMG_BAD;
                if (j->c[cs[k]].done) return ONNXC_IMG_BAD;   /* sequential: one scan each */
            }
            int rc = onnxc_jpeg_scan(d, n, &pos, j, ns, cs, td, ta);
            if (rc != 0) return rc;
        } else if (m == 0xC4) {                    /* DHT */
            int64_t p = 0;
            while (p < sl) {
                uint8_t bits[16];
                int tot = 0, tc, th;
                if (p + 17 > sl) return ONNXC_IMG_BAD;
                tc = s[p] >> 4; th = s[p] & 15;
                if (tc > 1 || th > 3) return ONNXC_IMG_BAD;
                for (int i = 0; i < 16; ++i) tot += bits[i] = s[p + 1 + i];
                if (tot > 256 || p + 17 + tot > sl) return ONNXC_IMG_BAD;
                if (onnxc_jhuff_build(tc ? &j->ac[th] : &j->dc[th], bits, s + p + 17, !tc))
                    return ONNXC_IMG_BAD;
                p += 17 + tot;
            }
        } else if (m == 0xDB) {                    /* DQT */
            int64_t p = 0;
            while (p < sl) {
                const int pq = s[p] >> 4, tq = s[p] & 15;
                if (pq > 1 || tq > 3 || p + 1 + 64 * (pq + 1) > sl) return ONNXC_IMG_BAD;
                for (int i = 0; i < 64; ++i)
                    j->q[tq][onnxc_jzz[i]] = (uint16_t)(pq ? onnxc_img_be16(s + p + 1 + 2 * i) : s[p + 1 + i]);
                j->qpresent[tq] = 1;
                p += 1 + 64 * (pq + 1);
            }
        } else if (m == 0xDD) {                    /* DRI */
            if (sl < 2) return ONNXC_IMG_BAD;
            j->ri = (int)onnxc_img_be16(s);
        } else if (m == 0xE0) {
            if (sl >= 14 && memcmp(s, "JFIF\0", 5) == 0) j->jfif = 1;
        } else if (m == 0xEE) {
            if (sl >= 12 && memcmp(s, "Adobe", 5) == 0) { j->adobe = 1; j->transform = s[11]; }
        }
    }
    if (!have_frame) return ONNXC_IMG_BAD;
    for (int i = 0; i < j->ncomp; ++i)
        if (!j->c[i].done) return ONNXC_IMG_BAD;   /* a component no scan covered */
    return 0;
}

/* One output row of component c (jdsample.c with do_fancy_upsampling). */
static void onnxc_jpeg_upsample(const onnxc_jpeg *j, const onnxc_jcomp *c, int64_t y, uint8_t *out)
{
    const int hs = j->hmax / c->h, vs = j->vmax / c->v;
    const int64_t st = c->bw * 8, dw = c->dw, w = j->w;
    if (hs == 1 && vs == 1) {
        memcpy(out, c->plane + y * st, (size_t)w);
    } else if (hs == 2 && vs == 1 && dw > 2) {
        const uint8_t *in = c->plane + y * st;
        out[0] = in[0];
        out[1] = (uint8_t)((in[0] * 3 + in[1] + 2) >> 2);
        for (int64_t x = 1; x < dw - 1; ++x) {
            out[2 * x] = (uint8_t)((in[x] * 3 + in[x - 1] + 1) >> 2);
            out[2 * x + 1] = (uint8_t)((in[x] * 3 + in[x + 1] + 2) >> 2);
        }
        out[2 * dw - 2] = (uint8_t)((in[dw - 1] * 3 + in[dw - 2] + 1) >> 2);
        out[2 * dw - 1] = in[dw - 1];
    } else if (hs == 2 && vs == 2 && dw > 2) {
        const int64_t i = y >> 1, f = onnxc_max64(0, onnxc_min64(c->dh - 1, (y & 1) ? i + 1 : i - 1));
        const uint8_t *a = c->plane + i * st, *b = c->plane + f * st;
        int last = a[0] * 3 + b[0], cur = last, next = a[1] * 3 + b[1];
        out[0] = (uint8_t)((cur * 4 + 8) >> 4);
        out[1] = (uint8_t)((cur * 3 + next + 7) >> 4);
        last = cur; cur = next;
        for (int64_t x = 1; x < dw - 1; ++x) {
            next = a[x + 1] * 3 + b[x + 1];
            out[2 * x] = (uint8_t)((cur * 3 + last + 8) >> 4);
            out[2 * x + 1] = (uint8_t)((cur * 3 + next + 7) >> 4);
            last = cur; cur = next;
        }
        out[2 * dw - 2] = (uint8_t)((cur * 3 + last + 8) >> 4);
        out[2 * dw - 1] = (uint8_t)((cur * 4 + 7) >> 4);
    } else if (hs == 1 && vs == 2) {
        const int64_t i = y >> 1, f = onnxc_max64(0, onnxc_min64(c->dh - 1, (y & 1) ? i + 1 : i - 1));
        const uint8_t *a = c->plane + i * st, *b = c->plane + f * st;
        const int bias = (y & 1) ? 2 : 1;
        for (int64_t x = 0; x < w; ++x) out[x] = (uint8_t)((a[x] * 3 + b[x] + bias) >> 2);
    } else {                                       /* replication */
        const uint8_t *in = c->plane + (y / vs) * st;
        for (int64_t x = 0; x < w; ++x) out[x] = in[x / hs];
    }
}

static int onnxc_jpeg_decode(const uint8_t *d, int64_t n, int64_t h, int64_t w, uint8_t *rgb,
                             uint8_t *ws, int64_t work)
{
    onnxc_jpeg j;
    int rc = onnxc_jpeg_walk(d, n, &j, ws, work);
    if (rc != 0) return rc;
    if (j.h != h || j.w != w) return ONNXC_IMG_BAD;
    const int64_t rowlen = j.mcux * 8 * j.hmax + 16;
    uint8_t *row[3];
    row[0] = ws + (j.work - 64 - 3 * rowlen);
    row[1] = row[0] + rowlen;
    row[2] = row[1] + rowlen;
    const int ycc = j.ncomp == 3 && (j.jfif || (j.adobe ? j.transform != 0
                    : !(j.c[0].id == 82 && j.c[1].id == 71 && j.c[2].id == 66)));
    for (int64_t y = 0; y < h; ++y) {
        uint8_t *o = rgb + y * w * 3;
        for (int i = 0; i < j.ncomp; ++i) onnxc_jpeg_upsample(&j, &j.c[i], y, row[i]);
        if (j.ncomp == 1) {
            for (int64_t x = 0; x < w; ++x) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = row[0][x];
        } else if (!ycc) {
            for (int64_t x = 0; x < w; ++x) {
                o[3 * x] = row[0][x]; o[3 * x + 1] = row[1][x]; o[3 * x + 2] = row[2][x];
            }
        } else {
            for (int64_t x = 0; x < w; ++x) {   /* jdcolor.c ycc_rgb_convert, SCALEBITS 16 */
                const int64_t yy = row[0][x], cb = (int64_t)row[1][x] - 128, cr = (int64_t)row[2][x] - 128;
                const int64_t r = yy + ((91881 * cr + 32768) >> 16);
                const int64_t g = yy + ((-22554 * cb + 32768 - 46802 * cr) >> 16);
                const int64_t b = yy + ((116130 * cb + 32768) >> 16);
                o[3 * x] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
                o[3 * x + 1] = (uint8_t)(g < 0 ? 0 : g > 255 ? 255 : g);
                o[3 * x + 2] = (uint8_t)(b < 0 ? 0 : b > 255 ? 255 : b);
            }
        }
    }
    return 0;
}

#endif
