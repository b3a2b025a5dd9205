/*
 * ops_attention.c — standard scaled dot-product attention and Sanger's
 * projection attention (softmax over negative Gaussian distances, values =
 * keys), forward and backward, sharing one masked softmax.
 *
 * Why hand loops instead of sgemm: per (batch, head) the matrices are tiny
 * (T, S ~ 5–30, HS ~ 64), where a BLAS call costs more in dispatch than in
 * arithmetic. Each (b, h) is one OpenMP task; inside it every inner loop runs
 * over HS contiguous floats of a head's column slice, so it vectorises, and
 * the whole k/v slice of a sentence (S·HS floats) stays in L1.
 *
 * Masks: key j of sentence b is visible to query t iff j < klen[b] and
 * (!causal || j <= t). The visible keys therefore always form a PREFIX
 * 0..nvis-1 of the row. Masked logits are -INFINITY by definition; since
 * exp(-INFINITY - max) is exactly 0 we never materialise them: the softmax
 * runs over the prefix and the masked tail of the probability row is
 * written as exact zeros. A row with nvis = 0 gets all-zero weights (and so
 * zero output and zero gradient), never 0/0 = NaN.
 *
 * Aliasing: self-attention passes the same pointer for q, k (and v) and for
 * their gradients. Every (b, h) touches only its own column slice of
 * sentence b's rows, so tasks never overlap; within a task gradients are
 * only ever accumulated (never read back), one gradient per loop.
 */
#include "ops.h"
#include "ops_internal.h"

#include <math.h>

/* Keys visible to query t (the length of the visible prefix). */
static inline int visible_keys(int32_t klen, int causal, int t, int S) {
    int n = klen < S ? (int)klen : S;
    if (causal && t + 1 < n) n = t + 1;
    return n > 0 ? n : 0;
}

/* In place over row [S]: softmax of the logits row[0..nvis-1] with the max
 * subtracted (no overflow), normaliser summed in double; row[nvis..S-1] are
 * masked and set to exactly 0; nvis == 0 gives an all-zero row. */
static void masked_softmax_row(float *row, int nvis, int S) {
    if (nvis > 0) {
        float mx = row[0];
#pragma omp simd reduction(max : mx)
        for (int j = 1; j < nvis; j++) mx = row[j] > mx ? row[j] : mx;
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < nvis; j++) {
            const float e = ops_exp(row[j] - mx);
            row[j] = e;
            sum += e;
        }
        const float inv = (float)(1.0 / sum);
#pragma omp simd
        for (int j = 0; j < nvis; j++) row[j] *= inv;
    }
    for (int j = nvis; j < S; j++) row[j] = 0.0f;
}

/* Softmax backward, in place over dp [nvis]: on entry dp = dL/dweights, on
 * exit dL/dlogits = p ⊙ (dp − Σ_j p_j dp_j). Masked entries are never touched
 * (their weights are 0, so their logit gradient is 0). */
static void masked_softmax_backward_row(float *dp, const float *p, int nvis) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < nvis; j++) s += p[j] * dp[j];
    const float sf = (float)s;
#pragma omp simd
    for (int j = 0; j < nvis; j++) dp[j] = p[j] * (dp[j] - sf);
}

/* y[0..n) += a · x[0..n). y never aliases x (gradient vs. saved input). */
static inline void axpy(float *y, float a, const float *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* Pointer to row r's head-h slice of a [rows, C] token matrix. */
#define HEAD(ptr, r, C, h, HS) ((ptr) + (size_t)(r) * (C) + (size_t)(h) * (HS))

/* ---- standard attention ---- */

/* out [B*T, C], probs [B, NH, T, S], q [B*T, C], k, v [B*S, C], klen [B]. */
void attention_forward(float *out, float *probs, const float *q, const float *k,
                       const float *v, const int32_t *klen, int causal,
                       int B, int T, int S, int C, int NH, float scale) {
    const int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const int nvis = visible_keys(klen[b], causal, t, S);
                const float *qt = HEAD(q, (size_t)b * T + t, C, h, HS);
                float *p = probs + (((size_t)b * NH + h) * T + t) * S;
                for (int j = 0; j < nvis; j++)
                    p[j] = scale * ops_dot(qt, HEAD(k, (size_t)b * S + j, C, h, HS), HS);
                masked_softmax_row(p, nvis, S);
                float *ot = HEAD(out, (size_t)b * T + t, C, h, HS);
                for (int d = 0; d < HS; d++) ot[d] = 0.0f;
                for (int j = 0; j < nvis; j++)
                    axpy(ot, p[j], HEAD(v, (size_t)b * S + j, C, h, HS), HS);
            }
        }
    }
}

/* dq [B*T, C], dk, dv [B*S, C] += ... (may all be one buffer when q = k = v).
 * Per query row t: dP = dout_t·v_jᵀ, dlogits = softmax backward,
 * dq_t += scale Σ_j g_j k_j, dk_j += scale g_j q_t, dv_j += p_j dout_t. */
void attention_backward(float *dq, float *dk, float *dv, const float *dout,
                        const float *probs, const float *q, const float *k,
                        const float *v, const int32_t *klen, int causal,
                        int B, int T, int S, int C, int NH, float scale) {
    const int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float g[S > 0 ? S : 1];
            for (int t = 0; t < T; t++) {
                const int nvis = visible_keys(klen[b], causal, t, S);
                const float *p = probs + (((size_t)b * NH + h) * T + t) * S;
                const float *dot_ = HEAD(dout, (size_t)b * T + t, C, h, HS);
                const float *qt = HEAD(q, (size_t)b * T + t, C, h, HS);
                for (int j = 0; j < nvis; j++)
                    g[j] = ops_dot(dot_, HEAD(v, (size_t)b * S + j, C, h, HS), HS);
                masked_softmax_backward_row(g, p, nvis);
                float *dqt = HEAD(dq, (size_t)b * T + t, C, h, HS);
                for (int j = 0; j < nvis; j++)
                    axpy(dqt, scale * g[j], HEAD(k, (size_t)b * S + j, C, h, HS), HS);
                for (int j = 0; j < nvis; j++)
                    axpy(HEAD(dk, (size_t)b * S + j, C, h, HS), scale * g[j], qt, HS);
                for (int j = 0; j < nvis; j++)
                    axpy(HEAD(dv, (size_t)b * S + j, C, h, HS), p[j], dot_, HS);
            }
        }
    }
}

/* ---- projection attention ---- */

/* c_h = 1 / (2 σ_h²) with σ_h² = exp(2 log_sigma[h]). */
static inline float inv_two_sigma2(const float *log_sigma, int h) {
    return (float)(0.5 * exp(-2.0 * (double)log_sigma[h]));
}

/* Squared norms of the head-h slices of sentence b's S key rows, into kn [S]. */
static void key_norms(float *kn, const float *k, int b, int h, int S, int C, int HS) {
    for (int j = 0; j < S; j++) {
        const float *kj = HEAD(k, (size_t)b * S + j, C, h, HS);
        kn[j] = ops_dot(kj, kj, HS);
    }
}

/* out [B*T, C], probs [B, NH, T, S], q [B*T, C], k [B*S, C] (may be q),
 * log_sigma [NH], klen [B]. logit = −c (|q_t|² + |k_j|² − 2 q_t·k_j). */
void projattn_forward(float *out, float *probs, const float *q, const float *k,
                      const float *log_sigma, const int32_t *klen, int causal,
                      int B, int T, int S, int C, int NH) {
    const int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float c = inv_two_sigma2(log_sigma, h);
            float kn[S > 0 ? S : 1];
            key_norms(kn, k, b, h, S, C, HS);
            for (int t = 0; t < T; t++) {
                const int nvis = visible_keys(klen[b], causal, t, S);
                const float *qt = HEAD(q, (size_t)b * T + t, C, h, HS);
                const float qn = ops_dot(qt, qt, HS);
                float *p = probs + (((size_t)b * NH + h) * T + t) * S;
                for (int j = 0; j < nvis; j++) {
                    const float cross = ops_dot(qt, HEAD(k, (size_t)b * S + j, C, h, HS), HS);
                    p[j] = -c * (qn + kn[j] - 2.0f * cross);
                }
                masked_softmax_row(p, nvis, S);
                float *ot = HEAD(out, (size_t)b * T + t, C, h, HS);
                for (int d = 0; d < HS; d++) ot[d] = 0.0f;
                for (int j = 0; j < nvis; j++)
                    axpy(ot, p[j], HEAD(k, (size_t)b * S + j, C, h, HS), HS);
            }
        }
    }
}

/* One (b, h) task of projattn_backward; returns its contribution to
 * dlog_sigma[h] (0 when !want_sigma). With g = dlogits of row t:
 *   dq_t += c (2 Σ_j g_j k_j − 2 (Σ_j g_j) q_t)
 *   dk_j += c (2 g_j q_t − 2 g_j k_j) + p_j dout_t      (distance + value path)
 *   dlog_sigma += Σ_j g_j · (−2 logit_j) = Σ_j g_j · 2c·dist_j
 * q-gradient and k-gradient updates are separate loops, so dq == dk works. */
static double projattn_backward_head(float *dq, float *dk, const float *dout,
                                     const float *probs, const float *q, const float *k,
                                     float c, int32_t klen, int causal, int want_sigma,
                                     int b, int h, int T, int S, int C, int NH) {
    const int HS = C / NH;
    float g[S > 0 ? S : 1], dist[S > 0 ? S : 1], kn[S > 0 ? S : 1], acc[HS];
    if (want_sigma) key_norms(kn, k, b, h, S, C, HS);
    double dsig = 0.0;
    for (int t = 0; t < T; t++) {
        const int nvis = visible_keys(klen, causal, t, S);
        if (nvis == 0) continue;
        const float *p = probs + (((size_t)b * NH + h) * T + t) * S;
        const float *dot_ = HEAD(dout, (size_t)b * T + t, C, h, HS);
        const float *qt = HEAD(q, (size_t)b * T + t, C, h, HS);
        const float qn = want_sigma ? ops_dot(qt, qt, HS) : 0.0f;
        for (int j = 0; j < nvis; j++) {
            const float *kj = HEAD(k, (size_t)b * S + j, C, h, HS);
            g[j] = ops_dot(dot_, kj, HS);
            if (want_sigma) dist[j] = qn + kn[j] - 2.0f * ops_dot(qt, kj, HS);
        }
        masked_softmax_backward_row(g, p, nvis);
        double gsum = 0.0;
        for (int j = 0; j < nvis; j++) {
            gsum += g[j];
            if (want_sigma) dsig += (double)g[j] * (2.0 * c) * dist[j];
        }
        for (int d = 0; d < HS; d++) acc[d] = 0.0f;
        for (int j = 0; j < nvis; j++) axpy(acc, g[j], HEAD(k, (size_t)b * S + j, C, h, HS), HS);
        float *dqt = HEAD(dq, (size_t)b * T + t, C, h, HS);
        const float qcoef = -2.0f * c * (float)gsum;
#pragma omp simd
        for (int d = 0; d < HS; d++) dqt[d] += 2.0f * c * acc[d] + qcoef * qt[d];
        for (int j = 0; j < nvis; j++) {
            const float *kj = HEAD(k, (size_t)b * S + j, C, h, HS);
            float *dkj = HEAD(dk, (size_t)b * S + j, C, h, HS);
            const float a = 2.0f * c * g[j], pj = p[j];
#pragma omp simd
            for (int d = 0; d < HS; d++) dkj[d] += a * (qt[d] - kj[d]) + pj * dot_[d];
        }
    }
    return dsig;
}

/* (b, h) tasks per round of the dlog_sigma reduction; bounds the stack array
 * of per-task partials (8 KiB). */
#define PROJ_TASKS_PER_ROUND 1024

/* dq [B*T, C], dk [B*S, C] += ... (dq == dk for self-attention), dlog_sigma
 * [NH] += ... when not NULL. dlog_sigma[h] sums over sentences, which run in
 * parallel: each task writes its partial to its own slot and the slots are
 * added in task order afterwards, so the result does not depend on thread
 * count or schedule (an atomic add would). */
void projattn_backward(float *dq, float *dk, float *dlog_sigma, const float *dout,
                       const float *probs, const float *q, const float *k,
                       const float *log_sigma, const int32_t *klen, int causal,
                       int B, int T, int S, int C, int NH) {
    const int ntask = B * NH;
    const int want_sigma = dlog_sigma != NULL;
    double part[PROJ_TASKS_PER_ROUND], sig[NH > 0 ? NH : 1];
    for (int h = 0; h < NH; h++) sig[h] = 0.0;
    for (int base = 0; base < ntask; base += PROJ_TASKS_PER_ROUND) {
        const int n = ntask - base < PROJ_TASKS_PER_ROUND ? ntask - base : PROJ_TASKS_PER_ROUND;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            const int b = (base + i) / NH, h = (base + i) % NH;
            part[i] = projattn_backward_head(dq, dk, dout, probs, q, k,
                                             inv_two_sigma2(log_sigma, h), klen[b], causal,
                                             want_sigma, b, h, T, S, C, NH);
        }
        for (int i = 0; i < n; i++) sig[(base + i) % NH] += part[i];
    }
    if (want_sigma)
        for (int h = 0; h < NH; h++) dlog_sigma[h] += (float)sig[h];
}
