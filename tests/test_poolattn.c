/*
 * test_poolattn.c — the pooling-attention family of ops_poolattn.c
 * (kernels gaussian, boxcar, constant, Epanechnikov; metrics euclidean,
 * diagonal, cosine, dot).
 *
 *  1. Forward values against a double-precision reference written here from
 *     the definitions in nn/ops.h (metric map, scaled distance, kernel,
 *     normalisation over the visible keys, nearest-key rule for empty
 *     support), plus the facts every row must satisfy: finite, sums to 1
 *     over its visible keys, exact zeros on masked keys, zero output when no
 *     key is visible.
 *  2. Backward against central finite differences (fd_testutil.h) for q, k
 *     and every parameter (σ, diagonal metric, radius) wherever a gradient
 *     exists; for boxcar and constant the queries of cross-attention must get
 *     exactly nothing. Kernels with an edge (boxcar's threshold,
 *     Epanechnikov's kink, the nearest-key choice) are checked on inputs
 *     where no finite-difference step crosses it: σ² is picked so that every
 *     visible r = d²/σ² is EDGE_MARGIN away from 1 and nearest keys are
 *     unique by as much, and the test fails if no such σ² is found.
 *  3. Rows with every key beyond σ (boxcar, Epanechnikov) take exactly the
 *     nearest visible key; no NaN anywhere.
 *  4. Cross-checks with the other kernels: gaussian/euclidean equals
 *     projattn_* (forward and backward), gaussian/dot equals standard
 *     attention with v = k and scale 1/σ².
 *  5. Parameter gradients are bit-identical for 1 and 2 threads.
 */
#include <math.h>
#include <omp.h>

#include "core/config.h"
#include "fd_testutil.h"
#include "nn/ops.h"

enum { B = 2, NH = 2 };

/* How far every visible r must stay from the kernel's edge: a
 * finite-difference step of 1e-2 in one input moves r by about
 * 2|z_q − z_k|·1e-2/σ² <= 0.005 at these sizes, and a step of log σ scales r
 * by e^(±0.02) (±0.02 near the edge); 0.08 keeps every step on one side and
 * rows whose support is a sliver (ΣK tiny, strongly curved in σ) out of the
 * finite differences. Nearest keys must lead their runner-up by 0.1 in d². */
#define EDGE_MARGIN 0.08

typedef struct {
    poolattn_params p;
    int T, S, C, causal;
    const int32_t *klen;
    float *q, *k, *out, *w, *scratch;
    size_t nscratch;
    float log_sigma[NH], log_radius[NH], *log_metric;
    const float *r;
} pa_ctx;

static double pa_loss(void *c_) {
    pa_ctx *c = c_;
    poolattn_forward(c->out, c->w, c->q, c->k, &c->p, c->klen, c->causal, B, c->T, c->S, c->C, NH, c->scratch,
                     c->nscratch);
    return tu_dot_r(c->out, c->r, (size_t)B * c->T * c->C);
}

static int visible(const pa_ctx *c, int b, int t, int j) {
    return j < c->klen[b] && j < c->S && (!c->causal || j <= t);
}

/* Reference r = d²/σ² of (b, h, t, j) in double, from the definitions. */
static double ref_r(const pa_ctx *c, int b, int h, int t, int j) {
    const int HS = c->C / NH;
    const float *x[2] = {c->q + ((size_t)b * c->T + t) * c->C + h * HS, c->k + ((size_t)b * c->S + j) * c->C + h * HS};
    double z[2][64];
    for (int s = 0; s < 2; s++) {
        double n2 = 0;
        for (int i = 0; i < HS; i++) n2 += (double)x[s][i] * x[s][i];
        for (int i = 0; i < HS; i++) {
            z[s][i] = x[s][i];
            if (c->p.metric == PMT_METRIC_DIAGONAL) z[s][i] *= exp(0.5 * c->log_metric[h * HS + i]);
            if (c->p.metric == PMT_METRIC_COSINE) z[s][i] *= exp(c->log_radius[h]) / sqrt(n2 + 1e-6);
        }
    }
    double d = 0;
    for (int i = 0; i < HS; i++)
        d += c->p.metric == PMT_METRIC_DOT ? -2.0 * z[0][i] * z[1][i] : (z[0][i] - z[1][i]) * (z[0][i] - z[1][i]);
    return d * exp(-2.0 * c->log_sigma[h]);
}

static double ref_kernel(int kernel, double r) {
    switch (kernel) {
    case PMT_KERNEL_BOXCAR: return r <= 1.0;
    case PMT_KERNEL_CONSTANT: return 1.0;
    case PMT_KERNEL_EPANECHNIKOV: return r < 1.0 ? 1.0 - r : 0.0;
    default: return NAN;
    }
}

/* Reference weights of row (b, h, t) into w[S]; returns 1 when the row fell
 * back to its nearest key. */
static int ref_row(const pa_ctx *c, int b, int h, int t, double *w) {
    double r[64], z = 0, mn = INFINITY;
    int nearest = -1;
    for (int j = 0; j < c->S; j++) {
        w[j] = 0;
        if (!visible(c, b, t, j)) continue;
        r[j] = ref_r(c, b, h, t, j);
        if (r[j] < mn) { mn = r[j]; nearest = j; }
    }
    if (nearest < 0) return 0;
    if (c->p.kernel == PMT_KERNEL_GAUSSIAN) {
        for (int j = 0; j < c->S; j++) if (visible(c, b, t, j)) z += exp(-0.5 * (r[j] - mn));
        for (int j = 0; j < c->S; j++) if (visible(c, b, t, j)) w[j] = exp(-0.5 * (r[j] - mn)) / z;
        return 0;
    }
    for (int j = 0; j < c->S; j++) if (visible(c, b, t, j)) z += ref_kernel(c->p.kernel, r[j]);
    if (z == 0) {
        w[nearest] = 1;
        return 1;
    }
    for (int j = 0; j < c->S; j++) if (visible(c, b, t, j)) w[j] = ref_kernel(c->p.kernel, r[j]) / z;
    return 0;
}

/* Smallest distance of a visible r to the kernel's edge (r = 1), and on
 * nearest-key rows of the nearest key to the runner-up: how far inputs may
 * move without crossing. */
static double edge_margin(const pa_ctx *c) {
    double margin = INFINITY;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < c->T; t++) {
                double best = INFINITY, second = INFINITY;
                for (int j = 0; j < c->S; j++) {
                    if (!visible(c, b, t, j)) continue;
                    double r = ref_r(c, b, h, t, j);
                    margin = fmin(margin, fabs(r - 1.0));
                    if (r < best) { second = best; best = r; } else if (r < second) second = r;
                }
                /* The nearest key matters only on rows that fall back to
                 * it; a step moves each d² by <= 0.04, whatever σ. */
                if (best > 1.0 && isfinite(second))
                    margin = fmin(margin, EDGE_MARGIN * (second - best) * exp(2.0 * c->log_sigma[h]) / 0.1);
            }
    return margin;
}

/* Forward facts and the reference; returns the number of nearest-key rows. */
static int check_values(const char *name, const pa_ctx *c) {
    const int HS = c->C / NH;
    double worst = 0, sum_err = 0;
    int masked_nonzero = 0, dead_nonzero = 0, fallbacks = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < c->T; t++) {
                const float *row = c->w + (((size_t)b * NH + h) * c->T + t) * c->S;
                double ref[64], sum = 0;
                int nvis = 0;
                fallbacks += ref_row(c, b, h, t, ref);
                for (int j = 0; j < c->S; j++) {
                    worst = fmax(worst, fabs(row[j] - ref[j]));
                    if (visible(c, b, t, j)) { nvis++; sum += row[j]; }
                    else masked_nonzero += row[j] != 0.0f;
                }
                if (nvis) sum_err = fmax(sum_err, fabs(sum - 1.0));
                else
                    for (int d = 0; d < HS; d++) dead_nonzero += c->out[((size_t)b * c->T + t) * c->C + h * HS + d] != 0;
            }
    printf("  %-58s |w - ref| %.1e  row-sum err %.1e  nearest-key rows %d\n", name, worst, sum_err, fallbacks);
    CHECK_MSG(tu_all_finite(c->out, (size_t)B * c->T * c->C) && tu_all_finite(c->w, (size_t)B * NH * c->T * c->S),
              "%s: non-finite output or weights", name);
    CHECK_MSG(worst <= 2e-5, "%s: weights differ from the reference by %.3g", name, worst);
    CHECK_MSG(sum_err <= 2e-6, "%s: row sums off by %.3g", name, sum_err);
    CHECK_MSG(masked_nonzero == 0 && dead_nonzero == 0, "%s: %d masked weights, %d dead outputs non-zero", name,
              masked_nonzero, dead_nonzero);
    return fallbacks;
}

typedef struct {
    const char *tag;
    int32_t klen[B];
    int causal;
} mask_case;

static const mask_case MASKS[] = {
    {"no mask", {99, 99}, 0},
    {"key padding", {99, 2}, 0},
    {"causal + padding", {99, 2}, 1},
    {"klen = 0", {3, 0}, 0},
};
enum { NMASKS = sizeof MASKS / sizeof MASKS[0] };

/* sigma2 <= 0: search σ² for an edge margin (kernels with an edge). Returns
 * the number of nearest-key rows seen. */
static int check_pool(int kernel, int metric, int self, int T, int S, int C, const mask_case *mk, double sigma2) {
    char name[160];
    if (self) S = T;
    snprintf(name, sizeof name, "%s/%s %s T=%d S=%d HS=%d: %s", pmt_kernel_name(kernel), pmt_metric_name(metric),
             self ? "self" : "cross", T, S, C / NH, mk->tag);
    int32_t klen[B] = {mk->klen[0] < S ? mk->klen[0] : S, mk->klen[1] < S ? mk->klen[1] : S};
    const size_t nq = (size_t)B * T * C, nk = (size_t)B * S * C;
    pa_ctx c = {{kernel, metric, NULL, NULL, NULL}, T, S, C, mk->causal, klen, tu_alloc(nq), NULL, tu_alloc(nq),
                tu_alloc((size_t)B * NH * T * S), NULL, poolattn_scratch_floats(B, T, S, C, NH), {0}, {0},
                tu_alloc(C), NULL};
    c.scratch = tu_alloc(c.nscratch);
    c.k = self ? c.q : tu_alloc(nk);
    float *r = tu_alloc(nq);
    tu_fill(c.q, nq, -1, 1);
    if (!self) tu_fill(c.k, nk, -1, 1);
    tu_fill(r, nq, -1, 1);
    tu_fill(c.log_metric, C, -0.5, 0.5);
    for (int h = 0; h < NH; h++) c.log_radius[h] = (float)(0.5 * log(C / NH) + 0.2 * h - 0.1);
    c.r = r;
    c.p.log_sigma = c.log_sigma;
    c.p.log_metric = c.log_metric;
    c.p.log_radius = c.log_radius;
    const int edged = kernel == PMT_KERNEL_BOXCAR || kernel == PMT_KERNEL_EPANECHNIKOV;
    const double base = sigma2 > 0 ? sigma2 : edged ? 2.0 * C / NH : sqrt(C / NH);
    double margin = INFINITY;
    int found = 0;
    /* Edged kernels: other σ² around the default, and every 8 tries fresh
     * inputs, until no visible r is near an edge. */
    for (int attempt = 0; attempt < 400 && !found; attempt++) {
        if (attempt > 0 && attempt % 8 == 0) {
            tu_fill(c.q, nq, -1, 1);
            if (!self) tu_fill(c.k, nk, -1, 1);
        }
        const int step = attempt % 8;
        const double s2 = base * pow(1.1, step % 2 ? -(step + 1) / 2 : step / 2);
        for (int h = 0; h < NH; h++) c.log_sigma[h] = (float)(0.5 * log(s2) + 0.05 * h);
        margin = edged ? edge_margin(&c) : INFINITY;
        found = margin >= EDGE_MARGIN;
    }
    CHECK_MSG(found, "%s: no sigma^2 keeps the kernel edges %.2f away (margin %.3f)", name, EDGE_MARGIN, margin);
    pa_loss(&c);
    const int fallbacks = check_values(name, &c);

    float *dq = tu_alloc(nq), *dk = tu_alloc(nk), dls[NH], dlr[NH], *dlm = tu_alloc(C);
    float *g0q = prefill(dq, nq), *g0k = prefill(dk, nk), *g0s = prefill(dls, NH), *g0r = prefill(dlr, NH);
    float *g0m = prefill(dlm, C);
    float *dkk = self ? dq : dk;
    const poolattn_grads g = {dls, dlm, dlr};
    poolattn_backward(dq, dkk, &g, r, c.w, c.q, c.k, &c.p, klen, mk->causal, B, T, S, C, NH, c.scratch, c.nscratch);
    CHECK_MSG(tu_all_finite(dq, nq) && tu_all_finite(dk, nk) && tu_all_finite(dls, NH) && tu_all_finite(dlm, C),
              "%s: non-finite gradient", name);
    const int smooth = kernel == PMT_KERNEL_GAUSSIAN || kernel == PMT_KERNEL_EPANECHNIKOV;
    fd_param ps[5];
    int np = 0;
    ps[np++] = (fd_param){self ? "q=k" : "q", c.q, dq, g0q, nq};
    if (!self) ps[np++] = (fd_param){"k", c.k, dk, g0k, nk};
    if (smooth) ps[np++] = (fd_param){"log_sigma", c.log_sigma, dls, g0s, NH};
    if (smooth && metric == PMT_METRIC_DIAGONAL) ps[np++] = (fd_param){"log_metric", c.log_metric, dlm, g0m, C};
    if (smooth && metric == PMT_METRIC_COSINE) ps[np++] = (fd_param){"log_radius", c.log_radius, dlr, g0r, NH};
    fd_check(name, pa_loss, &c, ps, np);
    /* Parameters that do not enter (or have no gradient) stay untouched. */
    if (!smooth) CHECK(memcmp(dls, g0s, sizeof dls) == 0);
    if (!smooth || metric != PMT_METRIC_DIAGONAL) CHECK(memcmp(dlm, g0m, sizeof(float) * C) == 0);
    if (!smooth || metric != PMT_METRIC_COSINE) CHECK(memcmp(dlr, g0r, sizeof dlr) == 0);
    if (!smooth && !self) CHECK_MSG(memcmp(dq, g0q, sizeof(float) * nq) == 0, "%s: queries got a gradient", name);
    free(c.q); free(c.out); free(c.w); free(c.scratch); free(c.log_metric); free(r);
    if (!self) free(c.k);
    free(dq); free(dk); free(dlm); free(g0q); free(g0k); free(g0s); free(g0r); free(g0m);
    return fallbacks;
}

static void test_family(void) {
    for (int kernel = 0; kernel < PMT_KERNELS; kernel++)
        for (int metric = 0; metric < PMT_METRICS; metric++) {
            /* the combinations the config accepts (pmt_config_validate) */
            const int flat = kernel == PMT_KERNEL_BOXCAR || kernel == PMT_KERNEL_CONSTANT;
            if ((metric == PMT_METRIC_DOT && kernel != PMT_KERNEL_GAUSSIAN) || (flat && metric != PMT_METRIC_EUCLIDEAN))
                continue;
            for (int self = 0; self <= 1; self++)
                for (int m = 0; m < NMASKS; m++) check_pool(kernel, metric, self, 3, 5, 8, &MASKS[m], 0);
        }
    /* wider heads and longer rows */
    check_pool(PMT_KERNEL_EPANECHNIKOV, PMT_METRIC_DIAGONAL, 0, 5, 6, 40, &MASKS[1], 0);
    check_pool(PMT_KERNEL_GAUSSIAN, PMT_METRIC_COSINE, 1, 6, 6, 40, &MASKS[2], 0);
}

/* Every key beyond σ: the nearest-key rule, for both edged kernels. */
static void test_empty_support(void) {
    for (int kernel = PMT_KERNEL_BOXCAR; kernel <= PMT_KERNEL_EPANECHNIKOV; kernel += 2) {
        int n = check_pool(kernel, PMT_METRIC_EUCLIDEAN, 0, 3, 5, 8, &MASKS[1], 1e-3);
        CHECK_MSG(n == B * NH * 3, "%s: %d of %d rows took their nearest key", pmt_kernel_name(kernel), n, B * NH * 3);
    }
    /* Epanechnikov with every row empty under the cosine metric: still finite. */
    check_pool(PMT_KERNEL_EPANECHNIKOV, PMT_METRIC_COSINE, 0, 3, 5, 8, &MASKS[0], 1e-3);
}

/* gaussian/euclidean = projattn; gaussian/dot = attention with v = k. */
static void test_cross_checks(void) {
    enum { T = 4, S = 6, C = 16 };
    const int32_t klen[B] = {6, 3};
    const size_t nq = (size_t)B * T * C, nk = (size_t)B * S * C, np = (size_t)B * NH * T * S;
    float *q = tu_alloc(nq), *k = tu_alloc(nk), *r = tu_alloc(nq), *o1 = tu_alloc(nq), *o2 = tu_alloc(nq);
    float *w1 = tu_alloc(np), *w2 = tu_alloc(np), *dq1 = tu_alloc(nq), *dk1 = tu_alloc(nk), *dq2 = tu_alloc(nq);
    float *dk2 = tu_alloc(nk);
    const size_t ns = poolattn_scratch_floats(B, T, S, C, NH);
    float *scratch = tu_alloc(ns), ls[NH] = {0.4f, 0.7f}, ds1[NH] = {0}, ds2[NH] = {0};
    tu_fill(q, nq, -1, 1);
    tu_fill(k, nk, -1, 1);
    tu_fill(r, nq, -1, 1);
    for (int causal = 0; causal <= 1; causal++) {
        poolattn_params p = {PMT_KERNEL_GAUSSIAN, PMT_METRIC_EUCLIDEAN, ls, NULL, NULL};
        poolattn_forward(o1, w1, q, k, &p, klen, causal, B, T, S, C, NH, scratch, ns);
        projattn_forward(o2, w2, q, k, ls, klen, causal, B, T, S, C, NH);
        double dw = 0, dout = 0, dg = 0;
        for (size_t i = 0; i < np; i++) dw = fmax(dw, fabs(w1[i] - w2[i]));
        for (size_t i = 0; i < nq; i++) dout = fmax(dout, fabs(o1[i] - o2[i]));
        memset(dq1, 0, nq * 4); memset(dk1, 0, nk * 4); memset(dq2, 0, nq * 4); memset(dk2, 0, nk * 4);
        ds1[0] = ds1[1] = ds2[0] = ds2[1] = 0;
        const poolattn_grads g = {ds1, NULL, NULL};
        poolattn_backward(dq1, dk1, &g, r, w1, q, k, &p, klen, causal, B, T, S, C, NH, scratch, ns);
        projattn_backward(dq2, dk2, ds2, r, w2, q, k, ls, klen, causal, B, T, S, C, NH);
        for (size_t i = 0; i < nq; i++) dg = fmax(dg, fabs(dq1[i] - dq2[i]));
        for (size_t i = 0; i < nk; i++) dg = fmax(dg, fabs(dk1[i] - dk2[i]));
        for (int h = 0; h < NH; h++) dg = fmax(dg, fabs(ds1[h] - ds2[h]));
        printf("  gaussian/euclidean vs projattn (causal %d): |dw| %.1e |dout| %.1e |dgrad| %.1e\n", causal, dw, dout, dg);
        CHECK(dw < 1e-5 && dout < 1e-5 && dg < 1e-4);

        /* dot metric: logits q·k/σ² — standard attention with one σ for all heads */
        float same[NH] = {0.55f, 0.55f};
        p = (poolattn_params){PMT_KERNEL_GAUSSIAN, PMT_METRIC_DOT, same, NULL, NULL};
        poolattn_forward(o1, w1, q, k, &p, klen, causal, B, T, S, C, NH, scratch, ns);
        attention_forward(o2, w2, q, k, k, C, C, klen, causal, B, T, S, C, NH, expf(-2.0f * 0.55f));
        dw = dout = 0;
        for (size_t i = 0; i < np; i++) dw = fmax(dw, fabs(w1[i] - w2[i]));
        for (size_t i = 0; i < nq; i++) dout = fmax(dout, fabs(o1[i] - o2[i]));
        printf("  gaussian/dot vs attention(v = k, scale 1/σ²) (causal %d): |dw| %.1e |dout| %.1e\n", causal, dw, dout);
        CHECK(dw < 1e-5 && dout < 1e-5);
    }
    free(q); free(k); free(r); free(o1); free(o2); free(w1); free(w2); free(dq1); free(dk1); free(dq2); free(dk2);
    free(scratch);
}

/* Parameter gradients are summed per task then in task order: the thread
 * count must not change a bit. */
static void test_threads(void) {
    enum { Bn = 2, T = 5, S = 7, C = 16 };
    const int32_t klen[Bn] = {7, 4};
    const size_t nq = (size_t)Bn * T * C, nk = (size_t)Bn * S * C, np = (size_t)Bn * NH * T * S;
    const size_t ns = poolattn_scratch_floats(Bn, T, S, C, NH);
    float *q = tu_alloc(nq), *k = tu_alloc(nk), *r = tu_alloc(nq), *o = tu_alloc(nq), *w = tu_alloc(np);
    float *scratch = tu_alloc(ns), *lm = tu_alloc(C), ls[NH] = {1.0f, 1.2f};
    tu_fill(q, nq, -1, 1);
    tu_fill(k, nk, -1, 1);
    tu_fill(r, nq, -1, 1);
    tu_fill(lm, C, -0.3, 0.3);
    poolattn_params p = {PMT_KERNEL_EPANECHNIKOV, PMT_METRIC_DIAGONAL, ls, lm, NULL};
    float grads[2][NH + C];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        float *dq = tu_alloc(nq), *dk = tu_alloc(nk);
        memset(grads[run], 0, sizeof grads[run]);
        const poolattn_grads g = {grads[run], grads[run] + NH, NULL};
        poolattn_forward(o, w, q, k, &p, klen, 0, Bn, T, S, C, NH, scratch, ns);
        poolattn_backward(dq, dk, &g, r, w, q, k, &p, klen, 0, Bn, T, S, C, NH, scratch, ns);
        free(dq);
        free(dk);
    }
    CHECK_MSG(memcmp(grads[0], grads[1], sizeof grads[0]) == 0, "parameter gradients differ between 1 and 2 threads");
    free(q); free(k); free(r); free(o); free(w); free(scratch); free(lm);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    tu_seed(1212);
    test_family();
    test_empty_support();
    test_cross_checks();
    test_threads();
    return test_finish();
}
