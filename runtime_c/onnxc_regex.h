/* onnxc runtime for RegexFullMatch: simulation of a byte-level Thompson NFA compiled at compile
 * time (onnxc/ops/regex_compile.py). The state set advances one byte at a time (no backtracking:
 * time is O(length * states)); the caller gives four arrays of the program's size (on its stack).
 * Small programs are turned into a DFA at compile time instead: one table lookup per byte.
 * C99, no allocation. */
#ifndef ONNXC_REGEX_H
#define ONNXC_REGEX_H

#include <stdint.h>

/* opcodes and assertion kinds (regex_compile.py uses the same numbers) */
#define ONNXC_RE_BYTE 0     /* lo <= byte <= hi -> x */
#define ONNXC_RE_SPLIT 1    /* -> x and -> y */
#define ONNXC_RE_ASSERT 2   /* if the assertion lo holds here -> x */
#define ONNXC_RE_MATCH 3

typedef struct {
    uint8_t op, lo, hi;
    int32_t x, y;
} onnxc_re_inst;

typedef struct {
    int32_t *cur, *nxt, *stack;  /* n, n and 2n + 2 entries */
    uint32_t *mark;              /* n entries, zeroed before the first call */
    uint32_t gen;
} onnxc_re_work;

static inline int onnxc_re_isword(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

/* does assertion `kind` hold between bytes prev (-1 at the start) and next (0 at the end)? */
static inline int onnxc_re_assert(int kind, int prev, int next)
{
    switch (kind) {
    case 1: return prev < 0;                                   /* ^ \A */
    case 2: return next == 0;                                  /* $ \z */
    case 3: return prev < 0 || prev == '\n';                   /* (?m)^ */
    case 4: return next == 0 || next == '\n';                  /* (?m)$ */
    case 5: return onnxc_re_isword(prev) != onnxc_re_isword(next);    /* \b */
    case 6: return onnxc_re_isword(prev) == onnxc_re_isword(next);    /* \B */
    default: return 0;
    }
}

/* adds state k and everything reachable from it without consuming a byte to list (n entries) */
static inline void onnxc_re_add(const onnxc_re_inst *prog, onnxc_re_work *w, int32_t k, int prev,
                                int next, int32_t *list, int32_t *n)
{
    int32_t sp = 0;
    w->stack[sp++] = k;
    while (sp > 0) {
        k = w->stack[--sp];
        if (w->mark[k] == w->gen) continue;
        w->mark[k] = w->gen;
        const onnxc_re_inst *in = &prog[k];
        if (in->op == ONNXC_RE_SPLIT) {
            w->stack[sp++] = in->y;
            w->stack[sp++] = in->x;
        } else if (in->op == ONNXC_RE_ASSERT) {
            if (onnxc_re_assert(in->lo, prev, next)) w->stack[sp++] = in->x;
        } else {
            list[(*n)++] = k;
        }
    }
}

static inline void onnxc_re_newgen(onnxc_re_work *w, int32_t n)
{
    if (++w->gen == 0) {            /* wrapped: forget every old mark */
        for (int32_t i = 0; i < n; ++i) w->mark[i] = 0;
        w->gen = 1;
    }
}

/* 1 when the whole NUL-terminated string s matches the program (NULL reads as "") */
static inline int onnxc_re_fullmatch(const onnxc_re_inst *prog, int32_t n, int32_t entry, const char *s,
                                     onnxc_re_work *w)
{
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    int32_t nc = 0, nn;
    int prev = -1;
    onnxc_re_newgen(w, n);
    onnxc_re_add(prog, w, entry, prev, u[0], w->cur, &nc);
    for (int64_t i = 0; u[i] != 0; ++i) {
        const int b = u[i], next = u[i + 1];
        onnxc_re_newgen(w, n);
        nn = 0;
        for (int32_t j = 0; j < nc; ++j) {
            const onnxc_re_inst *in = &prog[w->cur[j]];
            if (in->op == ONNXC_RE_BYTE && in->lo <= b && b <= in->hi)
                onnxc_re_add(prog, w, in->x, b, next, w->nxt, &nn);
        }
        int32_t *t = w->cur; w->cur = w->nxt; w->nxt = t;
        nc = nn;
        if (nc == 0) return 0;
        prev = b;
    }
    for (int32_t j = 0; j < nc; ++j)
        if (prog[w->cur[j]].op == ONNXC_RE_MATCH) return 1;
    return 0;
}

/* the same with a DFA built at compile time: byte -> class, state * nclasses + class -> state
 * (state 0: dead), acc[state]: accepting at the end of the text */
static inline int onnxc_re_dfa_fullmatch(const uint8_t *cls, const uint16_t *delta, int32_t ncls,
                                         const uint8_t *acc, int32_t start, const char *s)
{
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    int32_t st = start;
    for (; *u; ++u) {
        st = delta[st * ncls + cls[*u]];
        if (st == 0) return 0;
    }
    return acc[st];
}

#endif
