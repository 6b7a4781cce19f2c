/* onnxc string kernels' helpers: UTF-8 decoding, Python's str.split rules, code point mapping
 * through sorted constant tables (generated at compile time from Python's unicodedata, see
 * onnxc/ops/strings.py), Python's Final_Sigma rule for str.lower, stopword removal.
 * Strings are NUL-terminated UTF-8; a malformed byte is one unit that is copied unchanged. */
#ifndef ONNXC_STRINGS_H
#define ONNXC_STRINGS_H

#include <stdint.h>
#include <string.h>

/* The code point at s and its byte count (*n); -1 for a malformed byte (n = 1). Never reads
 * past a NUL: a NUL is not a continuation byte. */
static inline int32_t onnxc_utf8_next(const unsigned char *s, int *n)
{
    const unsigned c = s[0];
    *n = 1;
    if (c < 0x80) return (int32_t)c;
    if (c >= 0xC2 && c <= 0xDF) {
        if ((s[1] & 0xC0) != 0x80) return -1;
        *n = 2;
        return (int32_t)(((c & 0x1F) << 6) | (s[1] & 0x3F));
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return -1;
        const int32_t cp = (int32_t)(((c & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F));
        if (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000)) return -1;   /* overlong, surrogate */
        *n = 3;
        return cp;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return -1;
        const int32_t cp = (int32_t)(((c & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6)
                                     | (s[3] & 0x3F));
        if (cp < 0x10000 || cp > 0x10FFFF) return -1;
        *n = 4;
        return cp;
    }
    return -1;
}

/* UTF-8 bytes of cp (valid code point) into out (when not NULL); returns the byte count. */
static inline int onnxc_utf8_put(int32_t cp, char *out)
{
    unsigned char b[4];
    int n;
    if (cp < 0x80) { b[0] = (unsigned char)cp; n = 1; }
    else if (cp < 0x800) { b[0] = (unsigned char)(0xC0 | (cp >> 6)); b[1] = (unsigned char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12)); b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F)); n = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | (cp >> 18)); b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); b[3] = (unsigned char)(0x80 | (cp & 0x3F)); n = 4;
    }
    if (out) memcpy(out, b, (size_t)n);
    return n;
}

/* Python's str.isspace (what str.split() with no separator splits on). */
static inline int onnxc_str_isspace(int32_t cp)
{
    if (cp < 0x80) return (cp >= 9 && cp <= 13) || (cp >= 28 && cp <= 32);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028
           || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* ---- str.split ----------------------------------------------------------------------------- */

/* The pieces of Python's s.split(sep, maxsplit) (sep NULL: split on whitespace runs; maxsplit < 0:
 * no limit): calls emit(ctx, start, len) for each piece when emit is not NULL; returns the count
 * and the pieces' total length in *bytes. */
typedef void (*onnxc_str_piece_fn)(void *ctx, const char *start, int64_t len);

static inline int64_t onnxc_str_split(const char *str, const char *sep, int64_t seplen, int64_t maxsplit,
                                      int64_t *bytes, onnxc_str_piece_fn emit, void *ctx)
{
    const unsigned char *s = (const unsigned char *)str;
    const int64_t len = (int64_t)strlen(str);
    int64_t count = 0, total = 0, i = 0;
    if (maxsplit < 0) maxsplit = INT64_MAX;
    if (sep) {
        int64_t start = 0;
        while (maxsplit > 0 && i + seplen <= len) {
            if (memcmp(s + i, sep, (size_t)seplen) == 0) {
                if (emit) emit(ctx, str + start, i - start);
                total += i - start; ++count; --maxsplit;
                i += seplen; start = i;
            } else {
                ++i;
            }
        }
        if (emit) emit(ctx, str + start, len - start);
        total += len - start; ++count;
        *bytes = total;
        return count;
    }
    int n;
    for (; maxsplit > 0; --maxsplit) {           /* CPython's split_whitespace */
        while (i < len && onnxc_str_isspace(onnxc_utf8_next(s + i, &n))) i += n;
        if (i == len) break;
        const int64_t j = i;
        while (i < len && !onnxc_str_isspace(onnxc_utf8_next(s + i, &n))) i += n;
        if (emit) emit(ctx, str + j, i - j);
        total += i - j; ++count;
    }
    if (i < len) {                               /* maxsplit reached: the rest, leading space dropped */
        while (i < len && onnxc_str_isspace(onnxc_utf8_next(s + i, &n))) i += n;
        if (i != len) {
            if (emit) emit(ctx, str + i, len - i);
            total += len - i; ++count;
        }
    }
    *bytes = total;
    return count;
}

/* A piece sink for onnxc_str_split: copies each piece, NUL-terminated, into pool and stores its
 * address in the next row slot. */
typedef struct {
    char *pool;
    const char **row;
} onnxc_str_sink;

static inline void onnxc_str_sink_put(void *ctx, const char *start, int64_t len)
{
    onnxc_str_sink *k = (onnxc_str_sink *)ctx;
    memcpy(k->pool, start, (size_t)len);
    k->pool[len] = '\0';
    *k->row++ = k->pool;
    k->pool += len + 1;
}

/* ---- code point mapping ------------------------------------------------------------------- */

/* cp -> UTF-8 text: cps sorted; entry k maps to pool[offs[k] .. offs[k + 1]). */
typedef struct {
    const int32_t *cps;
    const int32_t *offs;
    const char *pool;
    int64_t n;
    int ascii;     /* 0: ASCII unchanged, 1: A-Z lowered, 2: a-z uppered */
    int hangul;    /* decompose Hangul syllables (NFKD) */
    int sigma;     /* U+03A3 by Python's Final_Sigma rule (str.lower) */
    const int32_t *cls;   /* sigma: sorted [lo, hi, class] triples, class 1 cased, 2 case-ignorable */
    int64_t ncls;
} onnxc_str_map_t;

static inline int64_t onnxc_str_find_cp(const int32_t *cps, int64_t n, int32_t cp)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (cps[mid] < cp) lo = mid + 1; else hi = mid;
    }
    return lo < n && cps[lo] == cp ? lo : -1;
}

static inline int onnxc_str_class(const onnxc_str_map_t *m, int32_t cp)
{
    int64_t lo = 0, hi = m->ncls;     /* last triple with lo <= cp */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (m->cls[3 * mid] <= cp) lo = mid + 1; else hi = mid;
    }
    if (lo == 0) return 0;
    const int32_t *t = m->cls + 3 * (lo - 1);
    return cp <= t[1] ? t[2] : 0;
}

/* CPython's handle_capital_sigma: s[i] (U+03A3, 2 bytes) becomes final sigma when preceded by a
 * cased letter and not followed by one, case-ignorable code points skipped both ways. */
static inline int onnxc_str_final_sigma(const onnxc_str_map_t *m, const unsigned char *s, int64_t i,
                                        int64_t len)
{
    int64_t j = i;
    int cls = 0, n;
    while (j > 0) {
        int64_t k = j - 1;
        while (k > 0 && (s[k] & 0xC0) == 0x80 && j - k < 4) --k;
        int32_t cp = onnxc_utf8_next(s + k, &n);
        if (k + n != j) { k = j - 1; cp = -1; }   /* malformed tail: one byte */
        j = k;
        cls = cp < 0 ? 0 : onnxc_str_class(m, cp);
        if (cls != 2) break;
    }
    if (j == i || cls != 1) return 0;
    for (j = i + 2; j < len; j += n) {
        const int32_t cp = onnxc_utf8_next(s + j, &n);
        cls = cp < 0 ? 0 : onnxc_str_class(m, cp);
        if (cls != 2) return cls != 1;
    }
    return 1;
}

/* The mapped text of s into out (NULL: only count); returns its byte length (no NUL written). */
static inline int64_t onnxc_str_map(const onnxc_str_map_t *m, const char *str, char *out)
{
    const unsigned char *s = (const unsigned char *)str;
    const int64_t len = (int64_t)strlen(str);
    int64_t w = 0;
    int n;
    for (int64_t i = 0; i < len; i += n) {
        const unsigned c = s[i];
        if (c < 0x80) {
            unsigned char r = (unsigned char)c;
            if (m->ascii == 1 && c >= 'A' && c <= 'Z') r = (unsigned char)(c + 32);
            else if (m->ascii == 2 && c >= 'a' && c <= 'z') r = (unsigned char)(c - 32);
            if (out) out[w] = (char)r;
            ++w; n = 1;
            continue;
        }
        const int32_t cp = onnxc_utf8_next(s + i, &n);
        if (cp >= 0 && m->hangul && cp >= 0xAC00 && cp <= 0xD7A3) {   /* L V (T), Unicode 3.12 */
            const int32_t k = cp - 0xAC00, t = k % 28;
            w += onnxc_utf8_put(0x1100 + k / 588, out ? out + w : NULL);
            w += onnxc_utf8_put(0x1161 + (k % 588) / 28, out ? out + w : NULL);
            if (t) w += onnxc_utf8_put(0x11A7 + t, out ? out + w : NULL);
            continue;
        }
        if (cp == 0x3A3 && m->sigma) {
            w += onnxc_utf8_put(onnxc_str_final_sigma(m, s, i, len) ? 0x3C2 : 0x3C3, out ? out + w : NULL);
            continue;
        }
        const int64_t k = cp < 0 ? -1 : onnxc_str_find_cp(m->cps, m->n, cp);
        if (k < 0) {
            if (out) memcpy(out + w, s + i, (size_t)n);
            w += n;
        } else {
            const int64_t a = m->offs[k], b = m->offs[k + 1];
            if (out) memcpy(out + w, m->pool + a, (size_t)(b - a));
            w += b - a;
        }
    }
    return w;
}

/* ---- stopwords ------------------------------------------------------------------------------ */

/* stops sorted by (length, bytes) */
static inline int onnxc_str_is_stop(const char *const *stops, const int32_t *lens, int64_t n,
                                    const char *w, int64_t len)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        int c = lens[mid] < len ? -1 : lens[mid] > len ? 1 : memcmp(stops[mid], w, (size_t)len);
        if (c == 0) return 1;
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return 0;
}

/* Python's " ".join(w for w in s.split(" ") if w not in stops), in place; returns the new length. */
static inline int64_t onnxc_str_drop_words(char *s, const char *const *stops, const int32_t *lens, int64_t n)
{
    const int64_t len = (int64_t)strlen(s);
    int64_t r = 0, w = 0, kept = 0;
    for (;;) {
        int64_t e = r;
        while (e < len && s[e] != ' ') ++e;
        if (!onnxc_str_is_stop(stops, lens, n, s + r, e - r)) {
            if (kept++) s[w++] = ' ';
            memmove(s + w, s + r, (size_t)(e - r));
            w += e - r;
        }
        if (e >= len) break;
        r = e + 1;
    }
    s[w] = '\0';
    return w;
}

#endif
