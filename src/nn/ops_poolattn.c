/*
 * ops_poolattn.c — the projection-attention family as Nadaraya–Watson
 * pooling: a kernel K (gaussian, boxcar, constant, Epanechnikov) of a
 * per-head distance (euclidean, learned diagonal metric, cosine on a sphere
 * of learned radius, or the plain dot product), normalised over the visible
 * keys, pooling the raw keys as values. The contract is in nn/ops.h.
 *
 * Why a file of its own: Sanger's form (gaussian, euclidean) stays the tuned
 * projattn_* of ops_attention.c; this file holds the variants of the study
 * (issue 12) without touching that kernel. The gaussian/euclidean member is
 * also computed here, and test_poolattn.c checks it against projattn_*.
 *
 * Structure: one OpenMP task per (sentence b, head h), as in
 * ops_attention.c. Each task works in its own slice of the caller's scratch
 * (no stack arrays sized by S or T, no allocation), so the result does not
 * depend on the thread count: the parameter gradients (σ, metric, radius)
 * are written per task and summed in task order afterwards.
 *
 * Products: the four small matrix products of a task (distances z_q z_kᵀ,
 * weights · keys, dout · kᵀ, and the two gradient products) are sgemm calls
 * on the task's slices; inside the task loop OpenBLAS runs single-threaded.
 * Measured on this machine (2 threads, B=128, T=S=25, C=256, NH=4, forward
 * + backward, median of 21, machine shared): a hand-written outer-product
 * loop took 1.8× projattn_*'s time, these sgemm calls 0.7×. Rounding may
 * differ between the teacher-forced pass and the decoder's one-query steps
 * (as it already does in their linear layers), so boxcar's threshold can in
 * principle place a key differently when its distance is within rounding
 * of σ; test_decode.c checks that the two passes agree.
 *
 * Empty support: boxcar and Epanechnikov give K = 0 to every key beyond σ. A
 * row whose visible keys are all beyond σ takes its nearest visible key
 * (weight 1). Zero output was the alternative; it was rejected because it
 * is discontinuous (as σ shrinks past the nearest key the normalised
 * weights tend to one-hot on that key, then would jump to 0), it silences
 * the value gradient of the whole row, and early in training, when keys
 * are far apart, whole rows would carry nothing. A fully masked row
 * (no visible key) is all zeros, as everywhere.
 */
#include "nn/ops.h"
#include "nn/gemm.h"
#include "nn/ops_internal.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "core/config.h"

/* Added to |x|² before the square root of the cosine metric, so a zero head
 * slice maps to zero instead of 0/0. */
#define SPHERE_EPS 1e-6f

/* Pointer to row r's head-h slice of a [rows, C] token matrix. */
static inline float *head_row(const float *x, size_t r, int C, int h, int HS) {
    return (float *)x + r * (size_t)C + (size_t)h * (size_t)HS;
}

/* One task's scratch: carved from a [per_task] slice (sizes for S keys). */
typedef struct head_ws {
    float *zq, *dzq;          /* [T, HS] mapped queries and their gradient */
    float *zk, *dzk;          /* [S, HS] mapped keys and their gradient */
    float *r, *g;             /* [T, Sv] scaled distances; dL/dweights, then dL/dD */
    float *qn, *qinv, *rs;    /* [T] |z_q|², 1/√(|x_q|²+ε), row sums of dL/dD */
    float *kn, *kinv, *cs;    /* [S] the same for keys (column sums) */
    float *scale;             /* [HS] diagonal metric: exp(log_metric / 2) */
    float *part;              /* [2 + HS] dlog_sigma, dlog_radius, dlog_metric[HS] */
} head_ws;

/* Floats of one task's slice, rounded up to a 64-byte multiple. */
static size_t task_floats(int T, int S, int HS) {
    const size_t t = (size_t)T, s = (size_t)S, hs = (size_t)HS;
    const size_t n = 2 * t * hs + 2 * s * hs + 2 * t * s + 3 * t + 3 * s + 2 * hs + 2;
    return (n + 15) & ~(size_t)15;
}

size_t poolattn_scratch_floats(int B, int T, int S, int C, int NH) {
    return (size_t)B * (size_t)NH * task_floats(T, S, C / NH);
}

/* task_floats is a sum of terms in T·HS, S·HS, T·S, T, S and constants;
 * summed over B tasks per head each is bounded by rows·(…) given
 * B·T <= rows, B·S <= rows, T, S <= len and B <= rows. */
size_t poolattn_scratch_bound(int rows, int len, int C, int NH) {
    const size_t R = (size_t)rows, L = (size_t)len, hs = (size_t)(C / NH);
    return (size_t)NH * (2 * R * hs + 2 * R * hs + 2 * R * L + 6 * R + R * (2 * hs + 2 + 15));
}

static head_ws carve_ws(float *base, int T, int S, int HS) {
    head_ws w;
    const size_t t = (size_t)T, s = (size_t)S, hs = (size_t)HS;
    float *p = base;
    w.zq = p; p += t * hs;
    w.dzq = p; p += t * hs;
    w.zk = p; p += s * hs;
    w.dzk = p; p += s * hs;
    w.r = p; p += t * s;
    w.g = p; p += t * s;
    w.qn = p; p += t;
    w.qinv = p; p += t;
    w.rs = p; p += t;
    w.kn = p; p += s;
    w.kinv = p; p += s;
    w.cs = p; p += s;
    w.scale = p; p += hs;
    w.part = p;
    return w;
}

static inline float inv_sigma2(const poolattn_params *p, int h) {
    return (float)exp(-2.0 * (double)p->log_sigma[h]);
}

/* z [n, HS] = the metric map of the head-h slices of n rows of x from row
 * r0; inv[n] = 1/√(|x|² + ε) (cosine only). */
static void metric_map(float *z, float *inv, const float *x, size_t r0, int n, const poolattn_params *p,
                       const head_ws *w, int C, int h, int HS) {
    const float radius = p->metric == PMT_METRIC_COSINE ? expf(p->log_radius[h]) : 1.0f;
    for (int i = 0; i < n; i++) {
        const float *xr = head_row(x, r0 + (size_t)i, C, h, HS);
        float *zr = z + (size_t)i * HS;
        if (p->metric == PMT_METRIC_DIAGONAL) {
#pragma omp simd
            for (int c = 0; c < HS; c++) zr[c] = xr[c] * w->scale[c];
        } else if (p->metric == PMT_METRIC_COSINE) {
            inv[i] = 1.0f / sqrtf(ops_dot(xr, xr, HS) + SPHERE_EPS);
            const float a = radius * inv[i];
#pragma omp simd
            for (int c = 0; c < HS; c++) zr[c] = a * xr[c];
        } else {
            memcpy(zr, xr, sizeof(float) * (size_t)HS);
        }
    }
}

/* y[0..HS) += a · x[0..HS). */
static inline void axpy(float *y, float a, const float *x, int HS) {
#pragma omp simd
    for (int c = 0; c < HS; c++) y[c] += a * x[c];
}

/* Maps queries and keys of task (b, h) into w and fills r [T, ldr] (first
 * Sv columns) with the scaled distances |z_q − z_k|²/σ² (dot: −2 z_q·z_k/σ²). */
static void head_distances(float *r, int ldr, head_ws *w, const float *q, const float *k,
                           const poolattn_params *p, int b, int h, int T, int S, int Sv, int C, int HS) {
    if (p->metric == PMT_METRIC_DIAGONAL)
        for (int c = 0; c < HS; c++) w->scale[c] = expf(0.5f * p->log_metric[(size_t)h * HS + c]);
    metric_map(w->zq, w->qinv, q, (size_t)b * T, T, p, w, C, h, HS);
    metric_map(w->zk, w->kinv, k, (size_t)b * S, Sv, p, w, C, h, HS);
    const int dot = p->metric == PMT_METRIC_DOT;
    for (int t = 0; t < T; t++) w->qn[t] = dot ? 0.0f : ops_dot(w->zq + (size_t)t * HS, w->zq + (size_t)t * HS, HS);
    for (int j = 0; j < Sv; j++) w->kn[j] = dot ? 0.0f : ops_dot(w->zk + (size_t)j * HS, w->zk + (size_t)j * HS, HS);
    const float s2 = inv_sigma2(p, h);
    pmt_sgemm_in_task(0, 1, T, Sv, HS, 1.0f, w->zq, HS, w->zk, HS, 0.0f, r, ldr);
    for (int t = 0; t < T; t++) {
        float *row = r + (size_t)t * ldr;
        const float qn = w->qn[t];
#pragma omp simd
        for (int j = 0; j < Sv; j++) row[j] = (qn + w->kn[j] - 2.0f * row[j]) * s2;
    }
}

/* Weight 1 on the visible key with the smallest r (the first on ties). */
static void nearest_key(float *row, int nvis) {
    int best = 0;
    for (int j = 1; j < nvis; j++)
        if (row[j] < row[best]) best = j;
    memset(row, 0, sizeof(float) * (size_t)nvis);
    row[best] = 1.0f;
}

/* In place over row [S]: r[0..nvis) → kernel weights normalised over the
 * visible keys; row[nvis..S) = 0; nvis = 0 gives an all-zero row. */
static void kernel_weights_row(float *row, int nvis, int S, int kernel) {
    if (nvis > 0) {
        switch (kernel) {
        case PMT_KERNEL_GAUSSIAN: {
            float mx = -0.5f * row[0];
            for (int j = 0; j < nvis; j++) {
                row[j] *= -0.5f;
                mx = row[j] > mx ? row[j] : mx;
            }
            ops_softmax_from_max(row, row, nvis, mx);
            break;
        }
        case PMT_KERNEL_BOXCAR: {
            int count = 0;
            for (int j = 0; j < nvis; j++) count += row[j] <= 1.0f;
            if (count == 0) {
                nearest_key(row, nvis);
                break;
            }
            const float wt = 1.0f / (float)count;
            for (int j = 0; j < nvis; j++) row[j] = row[j] <= 1.0f ? wt : 0.0f;
            break;
        }
        case PMT_KERNEL_CONSTANT:
            for (int j = 0; j < nvis; j++) row[j] = 1.0f / (float)nvis;
            break;
        case PMT_KERNEL_EPANECHNIKOV: {
            double z = 0.0;
            for (int j = 0; j < nvis; j++) z += row[j] < 1.0f ? 1.0 - (double)row[j] : 0.0;
            if (z <= 0.0) {
                nearest_key(row, nvis);
                break;
            }
            const double inv = 1.0 / z;
            for (int j = 0; j < nvis; j++) row[j] = row[j] < 1.0f ? (float)((1.0 - (double)row[j]) * inv) : 0.0f;
            break;
        }
        default: assert(0 && "unknown pooling kernel");
        }
    }
    for (int j = nvis; j < S; j++) row[j] = 0.0f;
}

static void check_args(const poolattn_params *p, int B, int T, int S, int C, int NH, size_t scratch_floats) {
    assert(p && p->log_sigma && C % NH == 0);
    assert(p->kernel >= 0 && p->kernel < PMT_KERNELS && p->metric >= 0 && p->metric < PMT_METRICS);
    assert(p->metric != PMT_METRIC_DIAGONAL || p->log_metric);
    assert(p->metric != PMT_METRIC_COSINE || p->log_radius);
    assert(p->metric != PMT_METRIC_DOT || p->kernel == PMT_KERNEL_GAUSSIAN);
    assert(scratch_floats >= poolattn_scratch_floats(B, T, S, C, NH));
    (void)p; (void)B; (void)T; (void)S; (void)C; (void)NH; (void)scratch_floats;
}

void poolattn_forward(float *out, float *weights, const float *q, const float *k, const poolattn_params *p,
                      const int32_t *klen, int causal, int B, int T, int S, int C, int NH,
                      float *scratch, size_t scratch_floats) {
    check_args(p, B, T, S, C, NH, scratch_floats);
    const int HS = C / NH, ntask = B * NH;
    const size_t per_task = task_floats(T, S, HS);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < ntask; i++) {
        const int b = i / NH, h = i % NH;
        const int Sv = key_prefix(klen[b], S);
        head_ws w = carve_ws(scratch + (size_t)i * per_task, T, S, HS);
        float *pw = weights + (size_t)i * T * S;
        head_distances(pw, S, &w, q, k, p, b, h, T, S, Sv, C, HS);
        for (int t = 0; t < T; t++)
            kernel_weights_row(pw + (size_t)t * S, visible_keys(klen[b], causal, t, S), S, p->kernel);
        float *o = head_row(out, (size_t)b * T, C, h, HS);
        if (Sv == 0)
            for (int t = 0; t < T; t++) memset(o + (size_t)t * C, 0, sizeof(float) * (size_t)HS);
        pmt_sgemm_in_task(0, 0, T, HS, Sv, 1.0f, pw, S, head_row(k, (size_t)b * S, C, h, HS), C, 0.0f, o, C);
    }
}

/* Row t of one task: g [Sv] holds dL/dweights on entry and dL/dr on exit
 * (0 where the kernel is flat, on the masked tail and on nearest-key rows);
 * returns the row's Σ dL/dr · r. */
static double kernel_backward_row(float *g, const float *pw, const float *r, int nvis, int Sv, int kernel) {
    double wd = 0.0;
    for (int j = 0; j < nvis; j++) wd += (double)pw[j] * g[j];
    const float s = (float)wd;
    double z = 0.0;
    if (kernel == PMT_KERNEL_EPANECHNIKOV)
        for (int j = 0; j < nvis; j++) z += r[j] < 1.0f ? 1.0 - (double)r[j] : 0.0;
    double dot_r = 0.0;
    for (int j = 0; j < Sv; j++) {
        float d = 0.0f;
        if (j < nvis && kernel == PMT_KERNEL_GAUSSIAN) {
            d = -0.5f * pw[j] * (g[j] - s);          /* logit = −r/2, softmax backward */
        } else if (j < nvis && z > 0.0 && r[j] < 1.0f) {
            d = -(float)((g[j] - s) / z);             /* w = K/ΣK, K = 1 − r inside */
        }
        g[j] = d;
        dot_r += (double)d * r[j];
    }
    return dot_r;
}

/* dx rows [n] (from row r0, head h) += (∂z/∂x)ᵀ dz; the cosine radius's
 * gradient Σ dz·z is added to *dradius. */
static void metric_backward(float *dx, size_t r0, const float *dz, const float *z, const float *x,
                            const float *inv, int n, const poolattn_params *p, const head_ws *w,
                            double *dradius, int C, int h, int HS) {
    const float radius = p->metric == PMT_METRIC_COSINE ? expf(p->log_radius[h]) : 1.0f;
    for (int i = 0; i < n; i++) {
        float *dxr = head_row(dx, r0 + (size_t)i, C, h, HS);
        const float *dzr = dz + (size_t)i * HS, *zr = z + (size_t)i * HS;
        if (p->metric == PMT_METRIC_DIAGONAL) {
#pragma omp simd
            for (int c = 0; c < HS; c++) dxr[c] += w->scale[c] * dzr[c];
        } else if (p->metric == PMT_METRIC_COSINE) {
            /* z = ρ x u, u = (|x|² + ε)^(−1/2): dx = ρu (dz − u² x (x·dz)). */
            const float *xr = head_row(x, r0 + (size_t)i, C, h, HS);
            const float a = radius * inv[i], b = inv[i] * inv[i] * ops_dot(xr, dzr, HS);
#pragma omp simd
            for (int c = 0; c < HS; c++) dxr[c] += a * (dzr[c] - b * xr[c]);
            *dradius += ops_dot(dzr, zr, HS);
        } else {
            axpy(dxr, 1.0f, dzr, HS);
        }
    }
}

/* One (b, h) task of poolattn_backward; writes its parameter partials to
 * w.part. Gradient of the scaled distances D/σ² → z through
 * ∂|z_q − z_k|²/∂z_q = 2(z_q − z_k) (dot: −2 z_k), then through the metric. */
static void head_backward(float *dq, float *dk, const float *dout, const float *pw, const float *q,
                          const float *k, const poolattn_params *p, int32_t klen, int causal, int b, int h,
                          int T, int S, int C, int HS, head_ws *w) {
    const int Sv = key_prefix(klen, S);
    memset(w->part, 0, sizeof(float) * (size_t)(HS + 2));
    const float *douth = head_row(dout, (size_t)b * T, C, h, HS), *kh = head_row(k, (size_t)b * S, C, h, HS);
    /* value path: dk_j += Σ_t w_tj dout_t (values = the raw keys) */
    pmt_sgemm_in_task(1, 0, Sv, HS, T, 1.0f, pw, S, douth, C, 1.0f, head_row(dk, (size_t)b * S, C, h, HS), C);
    if (p->kernel != PMT_KERNEL_GAUSSIAN && p->kernel != PMT_KERNEL_EPANECHNIKOV) return;
    if (Sv == 0) return;

    head_distances(w->r, Sv, w, q, k, p, b, h, T, S, Sv, C, HS);
    pmt_sgemm_in_task(0, 1, T, Sv, HS, 1.0f, douth, C, kh, C, 0.0f, w->g, Sv);   /* dL/dweights */
    const float s2 = inv_sigma2(p, h);
    double dsig = 0.0;
    for (int t = 0; t < T; t++) {
        float *g = w->g + (size_t)t * Sv;
        dsig += -2.0 * kernel_backward_row(g, pw + (size_t)t * S, w->r + (size_t)t * Sv,
                                           visible_keys(klen, causal, t, S), Sv, p->kernel);
        double rs = 0.0;
        for (int j = 0; j < Sv; j++) {
            g[j] *= s2;                                /* dL/dD */
            rs += g[j];
        }
        w->rs[t] = (float)rs;
    }
    for (int j = 0; j < Sv; j++) {
        double cs = 0.0;
        for (int t = 0; t < T; t++) cs += w->g[(size_t)t * Sv + j];
        w->cs[j] = (float)cs;
    }
    /* dz_q = −2 dD z_k (+ 2 rowsum(dD) z_q), dz_k = −2 dDᵀ z_q (+ 2 colsum(dD) z_k) */
    pmt_sgemm_in_task(0, 0, T, HS, Sv, -2.0f, w->g, Sv, w->zk, HS, 0.0f, w->dzq, HS);
    pmt_sgemm_in_task(1, 0, Sv, HS, T, -2.0f, w->g, Sv, w->zq, HS, 0.0f, w->dzk, HS);
    if (p->metric != PMT_METRIC_DOT) {
        for (int t = 0; t < T; t++) axpy(w->dzq + (size_t)t * HS, 2.0f * w->rs[t], w->zq + (size_t)t * HS, HS);
        for (int j = 0; j < Sv; j++) axpy(w->dzk + (size_t)j * HS, 2.0f * w->cs[j], w->zk + (size_t)j * HS, HS);
    }

    /* z_c = x_c·exp(m_c/2): dL/dm_c = ½ Σ_rows dz_c z_c. */
    if (p->metric == PMT_METRIC_DIAGONAL) {
        for (int c = 0; c < HS; c++) {
            double s = 0.0;
            for (int t = 0; t < T; t++) s += 0.5 * (double)w->dzq[(size_t)t * HS + c] * w->zq[(size_t)t * HS + c];
            for (int j = 0; j < Sv; j++) s += 0.5 * (double)w->dzk[(size_t)j * HS + c] * w->zk[(size_t)j * HS + c];
            w->part[2 + c] = (float)s;
        }
    }
    double dradius = 0.0;
    metric_backward(dq, (size_t)b * T, w->dzq, w->zq, q, w->qinv, T, p, w, &dradius, C, h, HS);
    metric_backward(dk, (size_t)b * S, w->dzk, w->zk, k, w->kinv, Sv, p, w, &dradius, C, h, HS);
    w->part[0] = (float)dsig;
    w->part[1] = (float)dradius;
}

void poolattn_backward(float *dq, float *dk, const poolattn_grads *dp, const float *dout, const float *weights,
                       const float *q, const float *k, const poolattn_params *p, const int32_t *klen, int causal,
                       int B, int T, int S, int C, int NH, float *scratch, size_t scratch_floats) {
    check_args(p, B, T, S, C, NH, scratch_floats);
    const int HS = C / NH, ntask = B * NH;
    const size_t per_task = task_floats(T, S, HS);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < ntask; i++) {
        head_ws w = carve_ws(scratch + (size_t)i * per_task, T, S, HS);
        head_backward(dq, dk, dout, weights + (size_t)i * T * S, q, k, p, klen[i / NH], causal, i / NH, i % NH,
                      T, S, C, HS, &w);
    }
    /* Parameter gradients: each task's partials, summed over sentences in
     * task order (deterministic for any thread count). */
    for (int h = 0; h < NH; h++) {
        double sig = 0.0, rad = 0.0;
        for (int b = 0; b < B; b++) {
            const head_ws w = carve_ws(scratch + ((size_t)b * NH + h) * per_task, T, S, HS);
            sig += w.part[0];
            rad += w.part[1];
        }
        if (dp && dp->log_sigma) dp->log_sigma[h] += (float)sig;
        if (dp && dp->log_radius && p->metric == PMT_METRIC_COSINE) dp->log_radius[h] += (float)rad;
        if (dp && dp->log_metric && p->metric == PMT_METRIC_DIAGONAL)
            for (int c = 0; c < HS; c++) {
                double s = 0.0;
                for (int b = 0; b < B; b++)
                    s += carve_ws(scratch + ((size_t)b * NH + h) * per_task, T, S, HS).part[2 + c];
                dp->log_metric[(size_t)h * HS + c] += (float)s;
            }
    }
}
