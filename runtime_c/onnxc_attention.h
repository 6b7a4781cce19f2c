/* onnxc_attention.h: scaled dot-product attention as exporters write it, as one kernel
 * (passes/fuse_attention.py, ops/fused_attention.py):
 *
 *   onnxc_attention_f32(&a, Q, K, V, mask, Y, work, nt, slots)
 *
 * For each batch entry b and head h: S = (Q_bh [* cq]) (K_bh [* ck])^T (Sq x Skv), then S * c
 * (mode 1), S / c (mode 2) or S (mode 0), plus the mask (broadcast; NULL: none), softmax along
 * each row (the Softmax op's kernel, onnxc_softmax.h), NaN probabilities replaced by a constant
 * (nan_fill: PyTorch's scaled_dot_product_attention export), and Y_bh = P V_bh (Sq x Dv). The
 * operations and their order are the unfused graph's (an operand's Mul on a copy of it, as the
 * Mul node computed it), so only the products' summation order differs. Every operand is read
 * through strides (batch, head, row, column; one of the two inner strides is 1, Y's column
 * stride is 1), so the export's head split and merge Transposes are never copied. Query rows go
 * in blocks of a.rows: a block's scores stay in L2 between the products, one (b, h, block) per
 * thread at a time, each thread in its own workspace slot.
 */
#ifndef ONNXC_ATTENTION_H
#define ONNXC_ATTENTION_H

#include <math.h>
#include <stdint.h>
#include "onnxc_gemm.h"
#include "onnxc_softmax.h"

typedef struct {
    int64_t B, H, Sq, Skv, D, Dv;
    int64_t rows;                          /* query rows per block (>= 1) */
    int64_t q[4], k[4], v[4], y[4];        /* strides (elements): Q (b, h, i, d), K (b, h, j, d),
                                              V (b, h, j, e), Y (b, h, i, e) */
    int64_t m[4];                          /* the mask's strides over (b, h, i, j); 0: broadcast */
    int mode;                              /* scores: 0 as they are, 1 times c, 2 divided by c */
    float c;
    int qscale, kscale;                    /* Q, K multiplied by cq, ck first (on a copy) */
    float cq, ck;
    int nan_fill;                          /* NaN probabilities become `fill` */
    float fill;
} onnxc_attn;

/* workspace bytes of one thread's slot: a block of scores, the scaled copies of Q's block and of
 * K's head (qs, ks: 0 or 1), the products' SGEMM workspace */
#define ONNXC__ATTN_UP64(x) ((((int64_t)(x)) + 63) / 64 * 64)
/* the products' part of a slot (gw) */
#define ONNXC__ATTN_GW_BYTES(R, Skv, D, Dv)                                                   \
    (ONNXC_SGEMM_WORK_BYTES((R), (Skv), (D)) > ONNXC_SGEMM_WORK_BYTES((R), (Dv), (Skv))      \
         ? ONNXC_SGEMM_WORK_BYTES((R), (Skv), (D))                                         \
         : ONNXC_SGEMM_WORK_BYTES((R), (Dv), (Skv)))
#define ONNXC_ATTN_SLOT_BYTES(R, Skv, D, Dv, qs, ks)                                          \
    (ONNXC__ATTN_UP64((int64_t)4 * (R) * (Skv)) + ONNXC__ATTN_UP64((int64_t)4 * (qs) * (R) * (D)) + \
     ONNXC__ATTN_UP64((int64_t)4 * (ks) * (Skv) * (D)) + ONNXC__ATTN_GW_BYTES(R, Skv, D, Dv) + 128)

/* rows x cols of x (element (i, j) at x[i * rs + j * cs]) times c, into dst (row-major, cols wide) */
static inline void onnxc__attn_scaled(const float *x, int64_t rs, int64_t cs, int64_t rows, int64_t cols,
                                      float c, float *dst)
{
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
            dst[i * cols + j] = x[i * rs + j * cs] * c;
}

/* one block: rows [i0, i0 + r) of head (b, h); S, Qc, Kc, gw: this thread's workspace */
static inline void onnxc__attn_block(const onnxc_attn *a, int64_t b, int64_t h, int64_t i0, int64_t r,
                                     const float *Q, const float *K, const float *V, const float *mask,
                                     float *Y, float *S, float *Qc, float *Kc, void *gw)
{
    const int64_t Skv = a->Skv, D = a->D;
    const float *q = Q + b * a->q[0] + h * a->q[1] + i0 * a->q[2];
    const float *k = K + b * a->k[0] + h * a->k[1];
    const float *const v = V + b * a->v[0] + h * a->v[1];
    float *const y = Y + b * a->y[0] + h * a->y[1] + i0 * a->y[2];
    int64_t qi = a->q[2], qd = a->q[3], kj = a->k[2], kd = a->k[3];
    if (a->qscale) {
        onnxc__attn_scaled(q, qi, qd, r, D, a->cq, Qc);
        q = Qc, qi = D, qd = 1;
    }
    if (a->kscale) {
        onnxc__attn_scaled(k, kj, kd, Skv, D, a->ck, Kc);
        k = Kc, kj = D, kd = 1;
    }
    /* op(A) = Q rows, op(B) = K^T (d, j) and V (j, e): transposed where the unit stride says */
    const int tq = qd != 1, tk = kd == 1, tv = a->v[3] != 1;
    /* Q's rows and V in place, only K^T packed (onnxc_sgemm_direct), where Q's rows are that way
     * round, a few hundred deep at most and the workspace holds it; else onnxc_sgemm packs both.
     * K either way round: rows of K are transposed into the panels, rows of a K^T that an export
     * wrote out (nn.MultiheadAttention's q @ k^T) are copied, not packed with both operands by
     * onnxc_sgemm (a ViT's 3-head, 197-token attention: 0.985x the time) */
    const int64_t gw_bytes = ONNXC__ATTN_GW_BYTES(r, Skv, D, a->Dv);
    const int64_t kp_floats = onnxc__roundup(Skv, ONNXC_SGEMM_NR) * D;
    if (!tq && (kd == 1 || kj == 1) && D <= ONNXC_SGEMM_KC &&
        64 + 4 * kp_floats + ONNXC_SGEMM_DIRECT_BYTES(D) <= gw_bytes) {
        float *const kp = onnxc__align64(gw);
        for (int64_t j = 0; j < Skv; j += ONNXC_SGEMM_NR)
            onnxc__sgemm_pack(onnxc__gmin(ONNXC_SGEMM_NR, Skv - j), D, k + j * kj, kj, kd, kp + j * D,
                              ONNXC_SGEMM_NR);
        onnxc_sgemm_direct(r, Skv, D, q, qi, kp, D * ONNXC_SGEMM_NR, ONNXC_SGEMM_NR, 1, 0.0f, S, Skv,
                           kp + kp_floats);
    } else
        onnxc_sgemm(tq, tk, r, Skv, D, 1.0f, q, tq ? qd : qi, k, tk ? kj : kd, 0.0f, S, Skv, gw, 1);
    for (int64_t i = 0; i < r; i += 4) {
        const int64_t n = r - i < 4 ? r - i : 4;
        /* scale and mask four rows, then their softmax while they are in L1 */
        for (int64_t t = i; t < i + n; ++t) {
            float *const s = S + t * Skv;
            if (a->mode == 1)
                for (int64_t j = 0; j < Skv; ++j)
                    s[j] = s[j] * a->c;
            else if (a->mode == 2)
                for (int64_t j = 0; j < Skv; ++j)
                    s[j] = s[j] / a->c;
            if (mask) {
                const float *const mr = mask + b * a->m[0] + h * a->m[1] + (i0 + t) * a->m[2];
                if (a->m[3] == 1)
                    for (int64_t j = 0; j < Skv; ++j)
                        s[j] = s[j] + mr[j];
                else
                    for (int64_t j = 0; j < Skv; ++j)
                        s[j] = s[j] + mr[j * a->m[3]];
            }
        }
        onnxc_softmax_rowsf(S + i * Skv, S + i * Skv, Skv, n, Skv);
        if (a->nan_fill)
            for (int64_t t = i * Skv; t < (i + n) * Skv; ++t)
                S[t] = S[t] != S[t] ? a->fill : S[t];
    }
    if (!tv && Skv <= ONNXC_SGEMM_KC && ONNXC_SGEMM_DIRECT_BYTES(Skv) <= gw_bytes)
        onnxc_sgemm_direct(r, a->Dv, Skv, S, Skv, v, ONNXC_SGEMM_NR, a->v[2], 0, 0.0f, y, a->y[2], gw);
    else
        onnxc_sgemm(0, tv, r, a->Dv, Skv, 1.0f, S, Skv, v, tv ? a->v[3] : a->v[2], 0.0f, y, a->y[2], gw, 1);
}

/* work: `slots` slots of ONNXC_ATTN_SLOT_BYTES (rounded up to 64) each, plus 64 bytes to align */
static void onnxc_attention_f32(const onnxc_attn *a, const float *Q, const float *K, const float *V,
                                const float *mask, float *Y, void *work, int nt, int slots)
{
    if (a->B <= 0 || a->H <= 0 || a->Sq <= 0 || a->Dv <= 0)
        return;
    const int64_t R = a->rows, Skv = a->Skv, D = a->D;
    const int64_t nblk = (a->Sq + R - 1) / R;
    const int64_t items = a->B * a->H * nblk;
    const int64_t slot = ONNXC__ATTN_UP64(ONNXC_ATTN_SLOT_BYTES(R, Skv, D, a->Dv, a->qscale, a->kscale));
    const int nts = nt < slots ? nt : slots;
    const double macs = (double)a->B * a->H * a->Sq * Skv * (double)(D + a->Dv);
    (void)nts;
    (void)macs;
#pragma omp parallel for schedule(static) num_threads(nts) if(nts > 1 && items > 1 && macs >= ONNXC_GEMM_PAR_MIN)
    for (int64_t t = 0; t < items; ++t) {
        const int64_t blk = t % nblk, bh = t / nblk;
        const int64_t b = bh / a->H, h = bh % a->H, i0 = blk * R;
        unsigned char *const mine = (unsigned char *)onnxc__align64(work) + (int64_t)ONNXC_THREAD_NUM() * slot;
        float *const S = (float *)mine;
        float *const Qc = (float *)(mine + ONNXC__ATTN_UP64(4 * R * Skv));
        float *const Kc = (float *)((unsigned char *)Qc + ONNXC__ATTN_UP64(4 * a->qscale * R * D));
        void *const gw = (unsigned char *)Kc + ONNXC__ATTN_UP64(4 * a->kscale * Skv * D);
        onnxc__attn_block(a, b, h, i0, a->Sq - i0 < R ? a->Sq - i0 : R, Q, K, V, mask, Y, S, Qc, Kc, gw);
    }
}

#endif
