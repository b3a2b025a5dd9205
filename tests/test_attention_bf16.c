/*
 * test_attention_bf16.c — the attention kernels with bf16 products
 * (attention_*_bf16, projattn_*_bf16) against the fp32 kernels.
 *
 * The bf16 kernels round q, k, v and dout to bf16 (nearest even) and
 * multiply the rounded values with fp32 sums; the softmax weights and the
 * logit gradients are rounded where they enter a product. So the reference
 * is the fp32 kernel run on inputs rounded beforehand:
 *   - the scores and distances are then products of the same values and
 *     differ only in the order of fp32 sums: the weights must agree to
 *     2e-5 (standard) and 1e-4 (projection, whose norms must be those of
 *     the rounded vectors: norms of the unrounded ones move the logits by
 *     ~c·2⁻⁸|q|², ~1e-3 in the weights);
 *   - the outputs and gradients differ by the rounding of the weights and
 *     logit gradients (relative 2⁻⁹ per term): they must agree to 1/64 of
 *     the largest reference value. A dropped or misplaced term (a pair
 *     read from the wrong row) is a relative error of order 1/S.
 * Masks must stay exact: masked weights, the gradients of keys beyond a
 * sentence's length and everything of an empty sentence are exact zeros.
 * Shapes: causal and not, key counts across a 16-key block, odd query and
 * key counts (pairs ending in a padding zero), an odd head size, the fused
 * Q|K|V layout, and projection self-attention with q = k and dq = dk.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_check.h"
#include "nn/gemm.h"
#include "nn/ops.h"
#include "ops_testutil.h"
#include "testutil.h"

static float *rounded(const float *x, size_t n) {
    float *y = tu_alloc(n);
    for (size_t i = 0; i < n; i++) y[i] = pmt_bf16_to_float(pmt_bf16_from_float(x[i]));
    return y;
}

static double max_abs(const float *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* a within 1/64 of max|ref| of ref, and not all zero. */
static void check_close(const char *name, const char *what, const float *a, const float *ref, size_t n) {
    const double scale = max_abs(ref, n), d = max_diff(a, ref, n);
    CHECK_MSG(scale > 0 && d <= scale / 64, "%s: %s differs by %.3g (max |ref| %.3g)", name, what, d, scale);
}

static void free_each(float **ptrs, size_t n) {
    for (size_t i = 0; i < n; i++) free(ptrs[i]);
}

/* Every element of rows [r0, r1) of x [rows, ld], columns [c0, c0 + n), exactly 0. */
static int rows_zero(const float *x, int ld, int r0, int r1, int c0, int n) {
    for (int r = r0; r < r1; r++)
        for (int c = 0; c < n; c++)
            if (x[(size_t)r * ld + c0 + c] != 0.0f) return 0;
    return 1;
}

/* Standard attention, self (S == 0: fused [N, 3C], T keys) or cross. */
static void check_standard(const char *name, int B, int T, int S, int C, int NH, int causal, const int32_t *klen) {
    const int self = S == 0, Tk = self ? T : S, HS = C / NH;
    const int Nq = B * T, Nk = B * Tk, ldq = self ? 3 * C : C, ldkv = self ? 3 * C : 2 * C;
    const float scale = 1.0f / sqrtf((float)HS);
    const size_t nq = (size_t)Nq * ldq, nkv = self ? nq : (size_t)Nk * ldkv, np = (size_t)B * NH * T * Tk;
    float *qbuf = tu_alloc(nq), *kvbuf = self ? qbuf : tu_alloc(nkv);
    tu_fill(qbuf, nq, -2, 2);
    if (!self) tu_fill(kvbuf, nkv, -2, 2);
    float *qbuf_r = rounded(qbuf, nq), *kvbuf_r = self ? qbuf_r : rounded(kvbuf, nkv);
    const int kcol = self ? C : 0, vcol = kcol + C;

    float *out = tu_alloc((size_t)Nq * C), *out_ref = tu_alloc((size_t)Nq * C);
    float *p = tu_alloc(np), *p_ref = tu_alloc(np);
    attention_forward_bf16(out, p, qbuf, kvbuf + kcol, kvbuf + vcol, ldq, ldkv, klen, causal, B, T, Tk, C, NH, scale);
    attention_forward(out_ref, p_ref, qbuf_r, kvbuf_r + kcol, kvbuf_r + vcol, ldq, ldkv, klen, causal, B, T, Tk, C,
                      NH, scale);
    CHECK_MSG(max_diff(p, p_ref, np) <= 2e-5, "%s: weights differ by %.3g", name, max_diff(p, p_ref, np));
    check_close(name, "output", out, out_ref, (size_t)Nq * C);
    int masks_exact = 1;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < Tk; j++) {
                    const int visible = j < klen[b] && (!causal || j <= t);
                    if (!visible && p[(((size_t)b * NH + h) * T + t) * Tk + j] != 0.0f) masks_exact = 0;
                }
    CHECK_MSG(masks_exact, "%s: a masked weight is not an exact zero", name);

    /* Backward from the same weights; the gradient buffers start as garbage (set). */
    float *dout = tu_alloc((size_t)Nq * C);
    tu_fill(dout, (size_t)Nq * C, -1, 1);
    float *dout_r = rounded(dout, (size_t)Nq * C);
    float *dq = tu_alloc(nq), *dkv = self ? dq : tu_alloc(nkv), *dq_ref = tu_alloc(nq),
          *dkv_ref = self ? dq_ref : tu_alloc(nkv);
    tu_fill(dq, nq, 5, 6);
    if (!self) tu_fill(dkv, nkv, 5, 6);
    attention_backward_set_bf16(dq, dkv + kcol, dkv + vcol, dout, p_ref, qbuf, kvbuf + kcol, kvbuf + vcol, ldq, ldkv,
                                klen, causal, B, T, Tk, C, NH, scale);
    attention_backward_set(dq_ref, dkv_ref + kcol, dkv_ref + vcol, dout_r, p_ref, qbuf_r, kvbuf_r + kcol,
                           kvbuf_r + vcol, ldq, ldkv, klen, causal, B, T, Tk, C, NH, scale);
    check_close(name, "d(q|k|v)", dq, dq_ref, nq);
    if (!self) check_close(name, "d(k|v)", dkv, dkv_ref, nkv);
    for (int b = 0; b < B; b++) {
        const int kl = klen[b] < 0 ? 0 : klen[b] > Tk ? Tk : klen[b];
        CHECK_MSG(rows_zero(dkv, ldkv, b * Tk + kl, (b + 1) * Tk, kcol, 2 * C),
                  "%s: keys beyond sentence %d's length have a gradient", name, b);
        if (kl == 0) CHECK_MSG(rows_zero(dq, ldq, b * T, (b + 1) * T, 0, C), "%s: empty sentence %d has dq", name, b);
    }
    float *owned[] = {qbuf, qbuf_r, out, out_ref, p, p_ref, dout, dout_r, dq, dq_ref,
                      self ? NULL : kvbuf, self ? NULL : kvbuf_r, self ? NULL : dkv, self ? NULL : dkv_ref};
    free_each(owned, sizeof owned / sizeof owned[0]);
}

/* Projection attention, self (S == 0: q = k, dq = dk) or cross. */
static void check_projection(const char *name, int B, int T, int S, int C, int NH, int causal, const int32_t *klen) {
    const int self = S == 0, Tk = self ? T : S;
    const int Nq = B * T, Nk = B * Tk;
    const size_t nq = (size_t)Nq * C, nk = (size_t)Nk * C, np = (size_t)B * NH * T * Tk;
    float *q = tu_alloc(nq), *k = self ? q : tu_alloc(nk);
    tu_fill(q, nq, -1, 1);
    if (!self) tu_fill(k, nk, -1, 1);
    float *q_r = rounded(q, nq), *k_r = self ? q_r : rounded(k, nk);
    float log_sigma[8];
    for (int h = 0; h < NH; h++) log_sigma[h] = 0.1f + 0.15f * (float)h;

    float *out = tu_alloc(nq), *out_ref = tu_alloc(nq), *p = tu_alloc(np), *p_ref = tu_alloc(np);
    projattn_forward_bf16(out, p, q, k, log_sigma, klen, causal, B, T, Tk, C, NH);
    projattn_forward(out_ref, p_ref, q_r, k_r, log_sigma, klen, causal, B, T, Tk, C, NH);
    CHECK_MSG(max_diff(p, p_ref, np) <= 1e-4, "%s: weights differ by %.3g", name, max_diff(p, p_ref, np));
    check_close(name, "output", out, out_ref, nq);

    float *dout = tu_alloc(nq);
    tu_fill(dout, nq, -1, 1);
    float *dout_r = rounded(dout, nq);
    float *dq = tu_alloc(nq), *dk = self ? dq : tu_alloc(nk);
    float *dq_ref = tu_alloc(nq), *dk_ref = self ? dq_ref : tu_alloc(nk);
    float dsig[8] = {0}, dsig_ref[8] = {0};
    projattn_backward_bf16(dq, dk, dsig, dout, p_ref, q, k, log_sigma, klen, causal, B, T, Tk, C, NH);
    projattn_backward(dq_ref, dk_ref, dsig_ref, dout_r, p_ref, q_r, k_r, log_sigma, klen, causal, B, T, Tk, C, NH);
    check_close(name, "dq", dq, dq_ref, nq);
    if (!self) check_close(name, "dk", dk, dk_ref, nk);
    check_close(name, "dlog_sigma", dsig, dsig_ref, (size_t)NH);
    for (int b = 0; b < B; b++) {
        const int kl = klen[b] < 0 ? 0 : klen[b] > Tk ? Tk : klen[b];
        if (!self)
            CHECK_MSG(rows_zero(dk, C, b * Tk + kl, (b + 1) * Tk, 0, C),
                      "%s: keys beyond sentence %d's length have a gradient", name, b);
    }
    float *owned[] = {q, q_r, out, out_ref, p, p_ref, dout, dout_r, dq, dq_ref,
                      self ? NULL : k, self ? NULL : k_r, self ? NULL : dk, self ? NULL : dk_ref};
    free_each(owned, sizeof owned / sizeof owned[0]);
}

int main(void) {
    if (!pmt_cpu_has_bf16()) test_skip("this CPU (or ONEDNN_MAX_CPU_ISA) has no native bf16 dot products");
    tu_seed(23);
    const int32_t self_len[3] = {13, 7, 0}, enc_len[3] = {21, 17, 1}, cross_len[3] = {19, 4, 0},
                  odd_len[2] = {10, 9}, long_len[2] = {40, 33};
    check_standard("decoder self, causal, fused", 3, 13, 0, 64, 4, 1, self_len);
    check_standard("encoder self, 2 key blocks", 3, 21, 0, 64, 4, 0, enc_len);
    check_standard("cross", 3, 9, 19, 64, 4, 0, cross_len);
    check_standard("odd head size", 2, 10, 0, 18, 2, 1, odd_len);
    check_standard("causal, 40 keys", 2, 40, 0, 32, 2, 1, long_len);
    check_projection("projection self, causal", 3, 13, 0, 64, 4, 1, self_len);
    check_projection("projection self, 2 key blocks", 3, 21, 0, 64, 4, 0, enc_len);
    check_projection("projection cross", 3, 9, 19, 64, 4, 0, cross_len);
    check_projection("projection odd head size", 2, 10, 0, 18, 2, 1, odd_len);
    check_projection("projection causal, 40 keys", 2, 40, 0, 32, 2, 1, long_len);
    return test_finish();
}
