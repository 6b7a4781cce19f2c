/* onnxc_attention.h: scaled dot-product attention as exporters write it, as one kernel
 * (passes/fuse_attention.py, ops/fused_attention.py):
 *
 *   onnxc_attention_f32(&g, Q, K, V, mask, Y, mode, c, work, nt)
 *
 * For each batch entry b and head h: S = Q_bh K_bh^T (Sq x Skv), then S * c (mode 1), S / c
 * (mode 2) or S (mode 0), plus the mask (broadcast; NULL: none), softmax along each row (the
 * Softmax op's kernel, onnxc_softmax.h), and Y_bh = P V_bh (Sq x Dv). The operations and their
 * order are the unfused graph's (MatMul, Mul/Div, Add, Softmax, MatMul), so only the products'
 * summation order differs. Every operand is read through strides (batch, head, row, column;
 * one of the two inner strides is 1, Y's column stride is 1), so the export's head split and
 * merge Transposes are never copied. Query rows go in blocks of g.rows: a block's scores stay in
 * L2 between the products, one (b, h, block) per thread at a time, each thread in its own
 * workspace slot.
 */
#ifndef ONNXC_ATTENTION_H
#define ONNXC_ATTENTION_H

#include <stdint.h>
#include "onnxc_gemm.h"
#include "onnxc_softmax.h"

typedef struct {
    int64_t B, H, Sq, Skv, D, Dv;
    int64_t rows;                          /* query rows per block (>= 1) */
    int64_t q[4], k[4], v[4], y[4];        /* strides (elements): Q (b, h, i, d), K (b, h, j, d),
                                              V (b, h, j, e), Y (b, h, i, e) */
    int64_t m[4];                          /* the mask's strides over (b, h, i, j); 0: broadcast */
} onnxc_attn_geom;

/* workspace bytes of one thread's slot: a block of scores and the products' SGEMM workspace */
#define ONNXC_ATTN_SLOT_BYTES(R, Skv, D, Dv)                                                  \
    ((((int64_t)4 * (R) * (Skv) + 63) / 64 * 64) +                                         \
     (ONNXC_SGEMM_WORK_BYTES((R), (Skv), (D)) > ONNXC_SGEMM_WORK_BYTES((R), (Dv), (Skv))      \
          ? ONNXC_SGEMM_WORK_BYTES((R), (Skv), (D))                                        \
          : ONNXC_SGEMM_WORK_BYTES((R), (Dv), (Skv))) + 128)

/* one block: rows [i0, i0 + r) of head (b, h) */
static inline void onnxc__attn_block(const onnxc_attn_geom *g, int64_t b, int64_t h, int64_t i0, int64_t r,
                                     const float *Q, const float *K, const float *V, const float *mask,
                                     float *Y, int mode, float c, float *S, void *gw)
{
    const int64_t Skv = g->Skv;
    const float *const q = Q + b * g->q[0] + h * g->q[1] + i0 * g->q[2];
    const float *const k = K + b * g->k[0] + h * g->k[1];
    const float *const v = V + b * g->v[0] + h * g->v[1];
    float *const y = Y + b * g->y[0] + h * g->y[1] + i0 * g->y[2];
    /* op(A) = Q rows, op(B) = K^T (d, j) and V (j, e): transposed where the unit stride says */
    const int tq = g->q[3] != 1, tk = g->k[3] == 1, tv = g->v[3] != 1;
    onnxc_sgemm(tq, tk, r, Skv, g->D, 1.0f, q, tq ? g->q[3] : g->q[2], k, tk ? g->k[2] : g->k[3], 0.0f, S,
                Skv, gw, 1);
    for (int64_t i = 0; i < r; i += 4) {
        const int64_t n = r - i < 4 ? r - i : 4;
        /* scale and mask four rows, then their softmax while they are in L1 */
        for (int64_t t = i; t < i + n; ++t) {
            float *const s = S + t * Skv;
            if (mode == 1)
                for (int64_t j = 0; j < Skv; ++j)
                    s[j] = s[j] * c;
            else if (mode == 2)
                for (int64_t j = 0; j < Skv; ++j)
                    s[j] = s[j] / c;
            if (mask) {
                const float *const mr = mask + b * g->m[0] + h * g->m[1] + (i0 + t) * g->m[2];
                if (g->m[3] == 1)
                    for (int64_t j = 0; j < Skv; ++j)
                        s[j] = s[j] + mr[j];
                else
                    for (int64_t j = 0; j < Skv; ++j)
                        s[j] = s[j] + mr[j * g->m[3]];
            }
        }
        onnxc_softmax_rowsf(S + i * Skv, S + i * Skv, Skv, n, Skv);
    }
    onnxc_sgemm(0, tv, r, g->Dv, Skv, 1.0f, S, Skv, v, tv ? g->v[3] : g->v[2], 0.0f, y, g->y[2], gw, 1);
}

/* work: `slots` slots of ONNXC_ATTN_SLOT_BYTES (rounded up to 64) each, plus 64 bytes to align */
static void onnxc_attention_f32(const onnxc_attn_geom *g, const float *Q, const float *K, const float *V,
                                const float *mask, float *Y, int mode, float c, void *work, int nt, int slots)
{
    if (g->B <= 0 || g->H <= 0 || g->Sq <= 0 || g->Dv <= 0)
        return;
    const int64_t R = g->rows;
    const int64_t nblk = (g->Sq + R - 1) / R;
    const int64_t items = g->B * g->H * nblk;
    const int64_t slot = (ONNXC_ATTN_SLOT_BYTES(R, g->Skv, g->D, g->Dv) + 63) / 64 * 64;
    const int nts = nt < slots ? nt : slots;
    const double macs = (double)g->B * g->H * g->Sq * g->Skv * (double)(g->D + g->Dv);
    (void)nts;
    (void)macs;
#pragma omp parallel for schedule(static) num_threads(nts) if(nts > 1 && items > 1 && macs >= ONNXC_GEMM_PAR_MIN)
    for (int64_t t = 0; t < items; ++t) {
        const int64_t blk = t % nblk, bh = t / nblk;
        const int64_t b = bh / g->H, h = bh % g->H, i0 = blk * R;
        unsigned char *const mine = (unsigned char *)onnxc__align64(work) + (int64_t)ONNXC_THREAD_NUM() * slot;
        float *const S = (float *)mine;
        void *const gw = mine + ((int64_t)4 * R * g->Skv + 63) / 64 * 64;
        onnxc__attn_block(g, b, h, i0, g->Sq - i0 < R ? g->Sq - i0 : R, Q, K, V, mask, Y, mode, c, S, gw);
    }
}

#endif
