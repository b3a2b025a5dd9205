/*
 * ops_loss.c — softmax cross-entropy with label smoothing, the root of
 * back-propagation, and the log-normalisers of the decoder's logit rows.
 *
 * Why it is written this way: the [N, V] logits are the largest activation
 * of the model (V ~ 8k), so the row loop is parallel over rows and every
 * pass over a row is an `omp simd` loop (ops_exp instead of libm expf).
 * The loss uses the identity
 *     −Σ_j q_j log p_j = lse − Σ_j q_j l_j
 *                      = lse − (1−ε) l_target − (ε/V) Σ_j l_j
 * (q sums to 1), with lse = max + log Σ exp(l − max) in double, so it never
 * takes the log of an underflowed probability.
 */
#include "nn/ops.h"
#include "nn/ops_internal.h"
#include "nn/gemm.h"

#include <math.h>
#include <omp.h>
#include <string.h>

/* Logits per block of the argmax scan: a few vectors, so the early exit
 * comes soon after the first maximal logit. */
#define CE_SCAN_BLOCK 128

/* One row's max, Σ logits, first argmax (early-exit scan in vectorised
 * blocks: half a row on average, instead of a compare/select/min per
 * element of the exp loop). */
static void row_stats(const float *l, int V, float *mx_out, double *suml_out, int *amax_out) {
    float mx = -INFINITY;
    double suml = 0.0;
#pragma omp simd reduction(max : mx) reduction(+ : suml)
    for (int j = 0; j < V; j++) {
        mx = l[j] > mx ? l[j] : mx;
        suml += l[j];
    }
    int amax = V;
    for (int j0 = 0; j0 < V && amax == V; j0 += CE_SCAN_BLOCK) {
        const int j1 = j0 + CE_SCAN_BLOCK < V ? j0 + CE_SCAN_BLOCK : V;
#pragma omp simd reduction(min : amax)
        for (int j = j0; j < j1; j++) {
            const int cand = l[j] == mx ? j : V;
            amax = cand < amax ? cand : amax;
        }
    }
    *mx_out = mx;
    *suml_out = suml;
    *amax_out = amax;
}

/* loss [N], probs [N, V] (may alias logits), logits [N, V], targets [N].
 * Returns the number of rows with target != ignore_id; *correct (if not NULL)
 * gets how many of those have argmax (first maximal index) == target.
 * Precondition: counted targets lie in [0, V). */
int crossentropy_forward(float *loss, float *probs, const float *logits,
                         const int32_t *targets, int N, int V, float eps,
                         int32_t ignore_id, int *correct) {
    int counted = 0, ncorrect = 0;
#pragma omp parallel for schedule(static) reduction(+ : counted, ncorrect)
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        const int32_t tg = targets[n];
        const int counts = tg != ignore_id;
        float mx;
        double suml;
        int amax;
        row_stats(l, V, &mx, &suml, &amax);
        /* Read before p (possibly the same memory) is overwritten. */
        const float ltg = counts ? l[tg] : 0.0f;
        const double sume = ops_softmax_from_max(p, l, V, mx);
        if (counts) {
            const double lse = (double)mx + log(sume);
            loss[n] = (float)(lse - (1.0 - eps) * (double)ltg - ((double)eps / V) * suml);
            counted += 1;
            ncorrect += amax == tg;
        } else {
            loss[n] = 0.0f;
        }
    }
    if (correct) *correct = ncorrect;
    return counted;
}

/* One counted row of the fused cross-entropy: d [V] = softmax(l) − q (d may
 * be l); its loss and NLL. Returns 1 when the row's argmax is the target.
 * Per row: stats (one read), exp into d with the sum (one write), then the
 * target's −(1−ε) (the −ε/V is subtracted in the exp pass). */
static int fused_row(float *d, const float *l, int32_t tg, int V, float eps, float *loss, float *nll) {
    float mx;
    double suml;
    int amax;
    row_stats(l, V, &mx, &suml, &amax);
    const float ltg = l[tg];
    const double sume = ops_softmax_from_max_minus(d, l, V, mx, eps / V);
    d[tg] -= 1.0f - eps;
    const double lse = (double)mx + log(sume);
    *loss = (float)(lse - (1.0 - eps) * (double)ltg - ((double)eps / V) * suml);
    if (nll) *nll = (float)(lse - (double)ltg);
    return amax == tg;
}

/* See ops.h. Per row fused_row, and with dlogits16 the row's bf16 rounding
 * while it is in cache. */
static int crossentropy_fused_rows(float *loss, float *nll, float *dlogits, uint16_t *dlogits16, float scale,
                                   const float *logits, const int32_t *targets, int N, int V, float eps,
                                   int32_t ignore_id, int *correct) {
    int counted = 0, ncorrect = 0;
#pragma omp parallel for schedule(static) reduction(+ : counted, ncorrect)
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        const int32_t tg = targets[n];
        if (tg == ignore_id) {
#pragma omp simd
            for (int j = 0; j < V; j++) d[j] = 0.0f;
            if (dlogits16) memset(dlogits16 + (size_t)n * V, 0, sizeof(uint16_t) * V);
            loss[n] = 0.0f;
            if (nll) nll[n] = 0.0f;
            continue;
        }
        ncorrect += fused_row(d, l, tg, V, eps, &loss[n], nll ? &nll[n] : NULL);
        if (dlogits16) pmt_bf16_convert_row(dlogits16 + (size_t)n * V, d, V, scale);
        counted += 1;
    }
    if (correct) *correct = ncorrect;
    return counted;
}

int crossentropy_fused(float *loss, float *nll, float *dlogits, const float *logits, const int32_t *targets,
                       int N, int V, float eps, int32_t ignore_id, int *correct) {
    return crossentropy_fused_rows(loss, nll, dlogits, NULL, 1.0f, logits, targets, N, V, eps, ignore_id, correct);
}

/* Per row: widen into an fp32 row (this thread's row of row_scratch, L1/L2-
 * resident: 32 KB at V = 8000; or the row's own dlogits row), run
 * crossentropy_fused's row there, and round the gradient back over the
 * bf16 logits unless it stays in dlogits. */
int crossentropy_fused_bf16_logits(float *loss, float *nll, uint16_t *logits16, float scale, float *dlogits,
                                   const int32_t *targets, int N, int V, float eps, int32_t ignore_id, int *correct,
                                   float *row_scratch) {
    int counted = 0, ncorrect = 0;
#pragma omp parallel for schedule(static) reduction(+ : counted, ncorrect)
    for (int n = 0; n < N; n++) {
        uint16_t *l16 = logits16 + (size_t)n * V;
        float *l = dlogits ? dlogits + (size_t)n * V : row_scratch + (size_t)omp_get_thread_num() * V;
        const int32_t tg = targets[n];
        if (tg == ignore_id) {
            if (dlogits) memset(l, 0, sizeof(float) * V);
            else memset(l16, 0, sizeof(uint16_t) * V);
            loss[n] = 0.0f;
            if (nll) nll[n] = 0.0f;
            continue;
        }
#pragma omp simd
        for (int j = 0; j < V; j++) {   /* widening is exact: the bf16 bits become the top half */
            const uint32_t u = (uint32_t)l16[j] << 16;
            float x;
            memcpy(&x, &u, sizeof x);
            l[j] = x;
        }
        ncorrect += fused_row(l, l, tg, V, eps, &loss[n], nll ? &nll[n] : NULL);
        if (!dlogits) pmt_bf16_convert_row(l16, l, V, scale);
        counted += 1;
    }
    if (correct) *correct = ncorrect;
    return counted;
}

int crossentropy_fused_bf16(float *loss, float *nll, float *dlogits, uint16_t *dlogits16, float scale,
                            const float *logits, const int32_t *targets, int N, int V, float eps, int32_t ignore_id,
                            int *correct) {
    return crossentropy_fused_rows(loss, nll, dlogits, dlogits16, scale, logits, targets, N, V, eps, ignore_id,
                                   correct);
}

/* dlogits [N, V] = (probs − q) · dloss_scale, SET (not accumulated); rows
 * with target == ignore_id are zeroed. dlogits may alias probs: each element
 * is read before it is written, and p[target] is read first. */
void crossentropy_backward(float *dlogits, const float *probs, const int32_t *targets,
                           int N, int V, float eps, int32_t ignore_id, float dloss_scale) {
    const float off = eps / V;
#pragma omp parallel for schedule(static) if ((long)N * V > OPS_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        const int32_t tg = targets[n];
        if (tg == ignore_id) {
#pragma omp simd
            for (int j = 0; j < V; j++) d[j] = 0.0f;
            continue;
        }
        const float ptg = p[tg];
#pragma omp simd
        for (int j = 0; j < V; j++) d[j] = (p[j] - off) * dloss_scale;
        d[tg] = (ptg - off - (1.0f - eps)) * dloss_scale;
    }
}

/* Search needs only the top tokens and this normaliser, never the full
 * softmax: one exp pass instead of a softmax's three. */
void logsumexp_rows(float *lse, const float *logits, int R, int V) {
#pragma omp parallel for schedule(static) if ((long)R * V > OPS_PAR_MIN)
    for (int r = 0; r < R; r++) lse[r] = ops_log_sum_exp_row(logits + (size_t)r * V, V);
}
