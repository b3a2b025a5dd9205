/*
 * test_ops_values.c — value-level facts about the ops of ops.h, the things
 * finite differences cannot see: forward values against double-precision
 * references, the vectorisable exp, softmax normalisation and exact zeros
 * under masks, projection attention reducing to standard attention, the
 * cross-entropy identities, the dropout stream's statistics and
 * reproducibility, and bit-identical results for 1 and 2 OpenMP threads.
 */
#include "nn/ops.h"
#include "nn/ops_internal.h"
#include "ops_testutil.h"
#include "testutil.h"

#include <omp.h>

/* ops_exp against libm's double exp over the whole softmax range, plus the
 * special values the masks and NaN checks rely on. */
static void test_exp(void) {
    double max_rel = 0.0;
    for (int i = 0; i <= 2000000; i++) {
        const float x = (float)(-87.0 + 175.0 * i / 2000000.0);
        const double ref = exp((double)x);
        max_rel = fmax(max_rel, fabs(ops_exp(x) - ref) / ref);
    }
    printf("ops_exp: max relative error on [-87, 88] = %.3e (fp32 ulp 1.19e-07)\n", max_rel);
    CHECK_MSG(max_rel <= 2.5e-7, "ops_exp relative error %.3e", max_rel);
    CHECK(ops_exp(-INFINITY) == 0.0f);
    CHECK(ops_exp(-1000.0f) == 0.0f);
    CHECK(ops_exp(0.0f) == 1.0f);
    CHECK(isinf(ops_exp(1000.0f)) && ops_exp(1000.0f) > 0);
    CHECK(isnan(ops_exp(NAN)));
}

static void test_positional_and_embedding(void) {
    enum { TMAX = 50, C = 16, B = 2, T = 3, V = 4 };
    float *pos = tu_alloc(TMAX * C);
    positional_table_init(pos, TMAX, C);
    double max_err = 0.0;
    for (int t = 0; t < TMAX; t++)
        for (int i = 0; i < C / 2; i++) {
            const double a = t / pow(10000.0, 2.0 * i / C);
            max_err = fmax(max_err, fabs(pos[t * C + 2 * i] - sin(a)));
            max_err = fmax(max_err, fabs(pos[t * C + 2 * i + 1] - cos(a)));
        }
    printf("positional table: max error = %.3e\n", max_err);
    CHECK(max_err <= 1e-7);
    CHECK(pos[0] == 0.0f && pos[1] == 1.0f);

    const int32_t ids[B * T] = {2, 0, 2, 3, 1, 1};
    float *wte = tu_alloc(V * C), *out = tu_alloc(B * T * C);
    tu_fill(wte, V * C, -1, 1);
    embedding_forward(out, ids, wte, pos, B, T, C, 4.0f);
    max_err = 0.0;
    for (int n = 0; n < B * T; n++)
        for (int c = 0; c < C; c++)
            max_err = fmax(max_err, fabs(out[n * C + c] - (4.0 * wte[ids[n] * C + c] + pos[(n % T) * C + c])));
    printf("embedding forward: max error = %.3e\n", max_err);
    CHECK(max_err <= 1e-6);
    free(pos); free(wte); free(out);
}

static void test_layernorm_values(void) {
    enum { N = 4, C = 64 };
    float *inp = tu_alloc(N * C), *out = tu_alloc(N * C), *w = tu_alloc(C), *b = tu_alloc(C);
    float mean[N], rstd[N];
    tu_fill(inp, N * C, -1, 1);
    for (int c = 0; c < C; c++) { inp[C + c] += 1000.0f; w[c] = 1.0f; } /* large-mean row */
    layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    /* The saved mean is fp32, so a row's output mean can be off by up to
     * half an ulp of its mean times rstd (~5e-5 for the +1000 row). */
    double max_mean = 0.0, max_var = 0.0;
    int mean_ok = 1;
    for (int n = 0; n < N; n++) {
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++) m += out[n * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (out[n * C + c] - m) * (out[n * C + c] - m);
        v /= C;
        max_mean = fmax(max_mean, fabs(m));
        mean_ok &= fabs(m) <= 1e-6 + 0.5 * (nextafterf(fabsf(mean[n]), INFINITY) - fabsf(mean[n])) * rstd[n];
        /* biased variance with eps 1e-5: var(out) = var / (var + eps) */
        double vin = 0.0, min_ = 0.0;
        for (int c = 0; c < C; c++) min_ += inp[n * C + c];
        min_ /= C;
        for (int c = 0; c < C; c++) vin += (inp[n * C + c] - min_) * (inp[n * C + c] - min_);
        vin /= C;
        max_var = fmax(max_var, fabs(v - vin / (vin + 1e-5)));
    }
    printf("layernorm: max |row mean| = %.3e, max |row var - var/(var+eps)| = %.3e\n", max_mean, max_var);
    CHECK(mean_ok);
    CHECK(max_var <= 1e-4);
    free(inp); free(out); free(w); free(b);
}

static void test_linear_values(void) {
    enum { N = 7, IN = 9, OUT = 5 };
    float *inp = tu_alloc(N * IN), *w = tu_alloc(OUT * IN), *b = tu_alloc(OUT), *out = tu_alloc(N * OUT);
    tu_fill(inp, N * IN, -1, 1);
    tu_fill(w, OUT * IN, -1, 1);
    tu_fill(b, OUT, -1, 1);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < N * OUT; i++) out[i] = NAN; /* forward must overwrite */
        linear_forward(out, inp, w, pass ? NULL : b, N, IN, OUT);
        double max_err = 0.0;
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OUT; o++) {
                double ref = pass ? 0.0 : b[o];
                for (int i = 0; i < IN; i++) ref += (double)inp[n * IN + i] * w[o * IN + i];
                max_err = fmax(max_err, fabs(out[n * OUT + o] - ref));
            }
        printf("linear forward (%s): max error = %.3e\n", pass ? "no bias" : "bias", max_err);
        CHECK(max_err <= 1e-5);
    }
    free(inp); free(w); free(b); free(out);
}

static void test_dropout_values(void) {
    const size_t n = 1000000;
    const float p = 0.1f;
    float *m1 = tu_alloc(n), *m2 = tu_alloc(n), *x = tu_alloc(n);
    dropout_mask_fill(m1, n, p, 42, 7);
    size_t zeros = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        zeros += m1[i] == 0.0f;
        bad += m1[i] != 0.0f && m1[i] != (float)(1.0 / (1.0 - p));
    }
    const double frac = (double)zeros / n;
    printf("dropout p = 0.1: zero fraction %.5f over %zu\n", frac, n);
    CHECK(bad == 0);
    CHECK(fabs(frac - p) < 3e-3); /* ~10 standard deviations */

    dropout_mask_fill(m2, 1000, p, 42, 7);
    CHECK_MSG(memcmp(m1, m2, 1000 * sizeof(float)) == 0, "mask depends on n");
    omp_set_num_threads(1);
    dropout_mask_fill(m2, n, p, 42, 7);
    omp_set_num_threads(2);
    CHECK_MSG(memcmp(m1, m2, n * sizeof(float)) == 0, "mask depends on thread count");
    dropout_mask_fill(m2, n, p, 42, 8);
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += m1[i] == m2[i];
    CHECK_MSG(same < n - n / 10, "another stream gives a nearly identical mask (%zu equal)", same);
    dropout_mask_fill(m2, n, p, 43, 7);
    CHECK(memcmp(m1, m2, n * sizeof(float)) != 0);

    dropout_mask_fill(m2, 100, 0.0f, 1, 1);
    int ones = 0;
    for (int i = 0; i < 100; i++) ones += m2[i] == 1.0f;
    CHECK(ones == 100);

    tu_fill(x, 100, -1, 1);
    float ref[100];
    for (int i = 0; i < 100; i++) ref[i] = x[i] * m1[i];
    dropout_forward(x, x, m1, 100); /* in place */
    CHECK(memcmp(x, ref, sizeof ref) == 0);
    free(m1); free(m2); free(x);
}

/* Attention probabilities against a double-precision masked softmax. */
/* The regenerated-mask kernels equal the stored-mask ones bit for bit:
 * out = a + sub ⊙ mask, x ⊙ mask, and dout ⊙ mask in backward — the same
 * mask, so the model's forward and backward agree without storing it. */
static void test_dropout_regenerated(void) {
    const size_t n = 100003;
    const float p = 0.25f;
    float *mask = tu_alloc(n), *a = tu_alloc(n), *sub = tu_alloc(n), *want = tu_alloc(n), *got = tu_alloc(n);
    tu_fill(a, n, -1, 1);
    tu_fill(sub, n, -1, 1);
    dropout_mask_fill(mask, n, p, 11, 5);
    for (size_t i = 0; i < n; i++) want[i] = a[i] + sub[i] * mask[i];
    dropout_residual_forward(got, a, sub, n, p, 11, 5);
    CHECK(memcmp(want, got, n * sizeof(float)) == 0);
    memcpy(got, sub, n * sizeof(float));
    dropout_residual_forward(got, a, got, n, p, 11, 5);   /* in place, as the model calls it */
    CHECK(memcmp(want, got, n * sizeof(float)) == 0);
    for (size_t i = 0; i < n; i++) want[i] = sub[i] * mask[i];
    memcpy(got, sub, n * sizeof(float));
    dropout_inplace_forward(got, n, p, 11, 5);
    CHECK(memcmp(want, got, n * sizeof(float)) == 0);
    dropout_regen_backward_set(got, sub, n, p, 11, 5);
    CHECK(memcmp(want, got, n * sizeof(float)) == 0);
    dropout_residual_forward(got, a, sub, n, 0.0f, 11, 5);   /* p = 0: plain residual */
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += got[i] != a[i] + sub[i];
    CHECK(bad == 0);
    free(mask); free(a); free(sub); free(want); free(got);
}

/* The fused bias + ReLU GEMM against linear_forward then relu_forward. */
static void test_linear_relu(void) {
    enum { N = 37, IN = 48, OUT = 70 };
    float *x = tu_alloc(N * IN), *w = tu_alloc(OUT * IN), *b = tu_alloc(OUT), *want = tu_alloc(N * OUT),
          *got = tu_alloc(N * OUT);
    tu_fill(x, N * IN, -1, 1);
    tu_fill(w, OUT * IN, -0.5, 0.5);
    tu_fill(b, OUT, -1, 1);
    linear_forward(want, x, w, b, N, IN, OUT);
    relu_forward(want, want, N * OUT);
    linear_relu_forward(got, x, w, b, N, IN, OUT);
    double err = 0;
    size_t zeros = 0, zero_mismatch = 0;
    for (int i = 0; i < N * OUT; i++) {
        err = fmax(err, fabs(want[i] - got[i]));
        zeros += want[i] == 0.0f;
        zero_mismatch += (want[i] == 0.0f) != (got[i] == 0.0f) && fabs(want[i] - got[i]) > 1e-6;
    }
    CHECK_MSG(err < 1e-5, "linear_relu_forward differs by %.3g", err);
    CHECK(zeros > N * OUT / 5 && zero_mismatch == 0);
    free(x); free(w); free(b); free(want); free(got);
}

/* The decoder's cache kernels with a random position → row table equal the
 * few-queries kernels run on the cache gathered by that table, bit for bit. */
static void test_cached_attention(void) {
    enum { R = 6, ROWS = 9, CAP = 12, NK = 10, C = 32, NH = 4 };
    float *kc = tu_alloc(ROWS * CAP * C), *vc = tu_alloc(ROWS * CAP * C), *q = tu_alloc(R * C);
    float *kg = tu_alloc(R * CAP * C), *vg = tu_alloc(R * CAP * C);
    float *o1 = tu_alloc(R * C), *o2 = tu_alloc(R * C), *p1 = tu_alloc(R * NH * CAP), *p2 = tu_alloc(R * NH * CAP);
    float log_sigma[NH] = {0.1f, -0.2f, 0.3f, 0.0f};
    int32_t map[NK * R], klen[R];
    tu_fill(kc, ROWS * CAP * C, -1, 1);
    tu_fill(vc, ROWS * CAP * C, -1, 1);
    tu_fill(q, R * C, -1, 1);
    memset(kg, 0, sizeof(float) * R * CAP * C);
    memset(vg, 0, sizeof(float) * R * CAP * C);
    for (int j = 0; j < NK; j++)
        for (int r = 0; r < R; r++) {
            map[j * R + r] = (r * 7 + j * 3) % ROWS;
            memcpy(kg + ((size_t)r * CAP + j) * C, kc + ((size_t)map[j * R + r] * CAP + j) * C, sizeof(float) * C);
            memcpy(vg + ((size_t)r * CAP + j) * C, vc + ((size_t)map[j * R + r] * CAP + j) * C, sizeof(float) * C);
        }
    for (int r = 0; r < R; r++) klen[r] = NK;
    attention_forward_few_queries(o1, p1, q, kg, vg, C, C, klen, 0, R, 1, CAP, C, NH, 0.35f);
    attention_forward_cached(o2, p2, q, kc, vc, C, map, R, R, NK, CAP, C, NH, 0.35f);
    CHECK(memcmp(o1, o2, sizeof(float) * R * C) == 0 && memcmp(p1, p2, sizeof(float) * R * NH * CAP) == 0);
    projattn_forward_few_queries(o1, p1, q, kg, log_sigma, klen, 0, R, 1, CAP, C, NH);
    projattn_forward_cached(o2, p2, q, kc, map, R, log_sigma, R, NK, CAP, C, NH);
    CHECK(memcmp(o1, o2, sizeof(float) * R * C) == 0 && memcmp(p1, p2, sizeof(float) * R * NH * CAP) == 0);
    free(kc); free(vc); free(q); free(kg); free(vg); free(o1); free(o2); free(p1); free(p2);
}

/* The fused training cross-entropy equals forward then backward (scale 1)
 * up to fp32 rounding, with the same loss, count and argmax hits, exact
 * zeros for ignored rows, and nll = −log p[target]. */
static void test_crossentropy_fused(void) {
    enum { N = 9, V = 301 };
    float *lg = tu_alloc(N * V), *p = tu_alloc(N * V), *d = tu_alloc(N * V);
    float l1[N], l2[N], nll[N];
    int32_t tg[N] = {3, 0, 300, 7, 0, 150, 42, 0, 1};   /* 0 = ignored */
    tu_fill(lg, N * V, -6, 6);
    int c1 = 0, c2 = 0;
    const int n1 = crossentropy_forward(l1, p, lg, tg, N, V, 0.1f, 0, &c1);
    const int n2 = crossentropy_fused(l2, nll, d, lg, tg, N, V, 0.1f, 0, &c2);
    double nll_err = 0;
    for (int i = 0; i < N; i++)
        if (tg[i] != 0) nll_err = fmax(nll_err, fabs(nll[i] + log(p[(size_t)i * V + tg[i]])));
        else CHECK(nll[i] == 0.0f && l2[i] == 0.0f);
    crossentropy_backward(p, p, tg, N, V, 0.1f, 0, 1.0f);
    double err = 0, lerr = 0;
    for (int i = 0; i < N * V; i++) err = fmax(err, fabs(p[i] - d[i]));
    for (int i = 0; i < N; i++) lerr = fmax(lerr, fabs(l1[i] - l2[i]));
    CHECK(n1 == n2 && n1 == 6 && c1 == c2);
    CHECK_MSG(err < 1e-7 && lerr < 1e-6 && nll_err < 1e-5, "fused CE: grad %.3g, loss %.3g, nll %.3g", err, lerr,
              nll_err);
    for (int j = 0; j < V; j++) CHECK(d[(size_t)1 * V + j] == 0.0f);
    free(lg); free(p); free(d);
}

/* attention_forward against a double-precision reference for one shape:
 * probabilities and outputs, masked keys (beyond klen, or after the query
 * when causal) exactly 0. The softmax takes one path for rows shorter than
 * a vector block and another for longer rows, so callers cover both and
 * the boundary between them. */
static void check_attention_reference(int B, int T, int S, const int32_t *klen, int causal, float scale,
                                      int big_logits) {
    enum { C = 32, NH = 2, HS = C / NH };
    float *q = tu_alloc(B * T * C), *k = tu_alloc(B * S * C), *v = tu_alloc(B * S * C);
    float *out = tu_alloc(B * T * C), *probs = tu_alloc(B * NH * T * S);
    double *l = malloc(sizeof(double) * (size_t)S);
    CHECK(l != NULL);
    tu_fill(q, B * T * C, -2, 2);
    tu_fill(k, B * S * C, -2, 2);
    tu_fill(v, B * S * C, -1, 1);
    if (big_logits) {
        /* Small integers, with a first component of −12 in every query head
         * and 6..11 in the key heads: every logit is an exact integer (the
         * reference sees the kernel's logits), from about −140 to −60, where
         * fp32 exp underflows (below −87). Only a softmax with the row's max
         * subtracted gets these rows right. */
        for (int i = 0; i < B * T * C; i++) q[i] = i % HS == 0 ? -12.0f : rintf(q[i]);
        for (int i = 0; i < B * S * C; i++) k[i] = i % HS == 0 ? (float)(6 + (i / C) % 6) : rintf(k[i]);
    }
    attention_forward(out, probs, q, k, v, C, C, klen, causal, B, T, S, C, NH, scale);
    double max_p = 0.0, max_o = 0.0;
    int masked_nonzero = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0.0;
                const float *prow = probs + ((size_t)(b * NH + h) * T + t) * S;
                for (int j = 0; j < S; j++) {
                    l[j] = -INFINITY;
                    if (j < klen[b] && (!causal || j <= t)) {
                        l[j] = 0.0;
                        for (int d = 0; d < HS; d++)
                            l[j] += (double)q[(b * T + t) * C + h * HS + d] * k[(b * S + j) * C + h * HS + d];
                        l[j] *= scale;
                    } else if (prow[j] != 0.0f) {
                        masked_nonzero++;
                    }
                    mx = fmax(mx, l[j]);
                }
                for (int j = 0; j < S; j++) sum += exp(l[j] - mx);
                for (int d = 0; d < HS; d++) {
                    double o = 0.0;
                    for (int j = 0; j < S; j++) o += exp(l[j] - mx) / sum * v[(b * S + j) * C + h * HS + d];
                    max_o = fmax(max_o, fabs(o - out[(b * T + t) * C + h * HS + d]));
                }
                for (int j = 0; j < S; j++) max_p = fmax(max_p, fabs(exp(l[j] - mx) / sum - prow[j]));
            }
    printf("attention vs double reference (B %d T %d S %d causal %d%s): max |dprob| = %.3e, max |dout| = %.3e\n",
           B, T, S, causal, big_logits ? ", logits -140 to -60" : "", max_p, max_o);
    CHECK_MSG(masked_nonzero == 0, "%d masked probabilities are not exactly 0", masked_nonzero);
    CHECK(max_p <= 1e-6);
    CHECK(max_o <= 1e-5);
    free(q); free(k); free(v); free(out); free(probs); free(l);
}

static void test_attention_reference(void) {
    const int32_t klen_small[2] = {6, 3};
    check_attention_reference(2, 4, 6, klen_small, 1, 0.25f, 0);
    /* Cross-attention rows of every length from 1 to 33 keys in one batch
     * (S 40 leaves masked tails), and causal rows growing past 16 keys. */
    int32_t klen_all[33];
    for (int b = 0; b < 33; b++) klen_all[b] = b + 1;
    check_attention_reference(33, 2, 40, klen_all, 0, 0.25f, 0);
    check_attention_reference(2, 20, 20, (const int32_t[]){20, 17}, 1, 0.25f, 0);
    check_attention_reference(20, 1, 20, klen_all, 0, 1.0f, 1);
}

/* With every key row (per head) of the same norm, |q|² and |k|² are constant
 * along a softmax row, so projection attention with σ² = √HS is exactly
 * standard attention with scale 1/√HS and q = k = v. */
static void test_projattn_equals_attention(void) {
    enum { B = 2, T = 5, C = 32, NH = 2, HS = C / NH };
    const int32_t klen[B] = {5, 3};
    float *x = tu_alloc(B * T * C), *o1 = tu_alloc(B * T * C), *o2 = tu_alloc(B * T * C);
    float *p1 = tu_alloc(B * NH * T * T), *p2 = tu_alloc(B * NH * T * T);
    tu_fill(x, B * T * C, -1, 1);
    for (int n = 0; n < B * T; n++)
        for (int h = 0; h < NH; h++) {
            float *s = x + n * C + h * HS;
            double nn = 0.0;
            for (int d = 0; d < HS; d++) nn += (double)s[d] * s[d];
            for (int d = 0; d < HS; d++) s[d] = (float)(s[d] * 2.0 / sqrt(nn)); /* norm 2 */
        }
    float log_sigma[NH];
    for (int h = 0; h < NH; h++) log_sigma[h] = (float)(log((double)HS) / 4.0); /* σ² = √HS */
    for (int causal = 0; causal <= 1; causal++) {
        projattn_forward(o1, p1, x, x, log_sigma, klen, causal, B, T, T, C, NH);
        attention_forward(o2, p2, x, x, x, C, C, klen, causal, B, T, T, C, NH, 1.0f / sqrtf((float)HS));
        double max_o = 0.0, max_p = 0.0;
        for (int i = 0; i < B * T * C; i++) max_o = fmax(max_o, fabs(o1[i] - o2[i]));
        for (int i = 0; i < B * NH * T * T; i++) max_p = fmax(max_p, fabs(p1[i] - p2[i]));
        printf("projattn(σ²=√HS) vs attention(1/√HS), causal=%d: max |dout| = %.3e, max |dprob| = %.3e\n",
               causal, max_o, max_p);
        CHECK(max_o <= 1e-5);
        CHECK(max_p <= 1e-5);
    }
    free(x); free(o1); free(o2); free(p1); free(p2);
}

static void test_crossentropy_values(void) {
    enum { N = 5, V = 1000 };
    const int32_t targets[N] = {7, -1, 999, 0, 500}; /* ignore_id -1 */
    float *logits = tu_alloc(N * V), *probs = tu_alloc(N * V), *loss = tu_alloc(N);
    int correct = -1;
    for (int i = 0; i < N * V; i++) logits[i] = 3.5f; /* uniform */
    int counted = crossentropy_forward(loss, probs, logits, targets, N, V, 0.1f, -1, &correct);
    CHECK(counted == 4);
    double max_err = 0.0;
    for (int n = 0; n < N; n++)
        if (n != 1) max_err = fmax(max_err, fabs(loss[n] - log((double)V)));
    printf("crossentropy uniform logits: max |loss - log V| = %.3e\n", max_err);
    CHECK(max_err <= 1e-5);
    CHECK(loss[1] == 0.0f);
    CHECK(correct == 1); /* ties: argmax is the first index, 0 = target of row 3 */

    /* Random logits with one huge row, against a double reference; in place. */
    tu_fill(logits, N * V, -5, 5);
    for (int j = 0; j < V; j++) logits[2 * V + j] += 1000.0f;
    logits[0 * V + 7] = 20.0f; /* row 0 predicts its target */
    float *ref_logits = tu_copy(logits, N * V);
    counted = crossentropy_forward(loss, logits, logits, targets, N, V, 0.1f, -1, &correct);
    CHECK(counted == 4 && correct == 1);
    double max_loss = 0.0, max_row = 0.0;
    for (int n = 0; n < N; n++) {
        const float *l = ref_logits + (size_t)n * V;
        double mx = -INFINITY, s = 0.0, nll = 0.0, psum = 0.0;
        for (int j = 0; j < V; j++) mx = fmax(mx, l[j]);
        for (int j = 0; j < V; j++) s += exp(l[j] - mx);
        for (int j = 0; j < V; j++) {
            const double lp = l[j] - mx - log(s);
            nll -= ((j == targets[n] ? 0.9 : 0.0) + 0.1 / V) * lp;
            psum += logits[(size_t)n * V + j];
        }
        if (n != 1) max_loss = fmax(max_loss, fabs(loss[n] - nll) / nll);
        max_row = fmax(max_row, fabs(psum - 1.0));
    }
    printf("crossentropy (in place, one row +1000): max rel loss err = %.3e, max |Σp - 1| = %.3e\n",
           max_loss, max_row);
    CHECK(max_loss <= 1e-5);
    CHECK(max_row <= 1e-5);
    CHECK(tu_all_finite(logits, N * V) && tu_all_finite(loss, N));

    /* Backward in place equals backward into a separate buffer. */
    float *d = tu_alloc(N * V);
    crossentropy_backward(d, logits, targets, N, V, 0.1f, -1, 0.5f);
    crossentropy_backward(logits, logits, targets, N, V, 0.1f, -1, 0.5f);
    CHECK(memcmp(d, logits, sizeof(float) * N * V) == 0);
    double gsum = 0.0;
    for (int j = 0; j < V; j++) gsum += d[j];
    CHECK_NEAR(gsum, 0.0, 1e-5); /* Σ_j (p_j − q_j) = 0 */
    free(logits); free(probs); free(loss); free(ref_logits); free(d);
}

/* Runs backward passes whose gradients are reductions across threads' work
 * with 1 and with 2 threads; the results must be bit-identical. */
/* layernorm_backward sums dw/db in its row pass into per-chunk partials:
 * against a double-precision reference over many rows (N not a multiple of
 * the chunk count, C not of the vector width), accumulating onto values
 * already in the gradients, and bit-identical for 1, 2 and 3 threads. */
static void test_layernorm_backward_chunks(void) {
    enum { N = 1003, C = 72 };
    float *x = tu_alloc(N * C), *dout = tu_alloc(N * C), *w = tu_alloc(C), *b = tu_alloc(C), *out = tu_alloc(N * C);
    float *mean = tu_alloc(N), *rstd = tu_alloc(N), *scratch = tu_alloc(layernorm_backward_scratch_floats(C));
    tu_fill(x, N * C, -2, 2);
    for (int n = 0; n < N; n += 7) x[(size_t)n * C] += 5.0f;
    tu_fill(dout, N * C, -1, 1);
    tu_fill(w, C, 0.5, 1.5);
    tu_fill(b, C, -0.5, 0.5);
    layernorm_forward(out, mean, rstd, x, w, b, N, C);
    double *rdx = calloc((size_t)N * C, sizeof *rdx), rdw[C] = {0}, rdb[C] = {0};
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *d = dout + (size_t)n * C;
        double m = 0, var = 0, s1 = 0, s2 = 0;
        for (int c = 0; c < C; c++) m += xr[c];
        m /= C;
        for (int c = 0; c < C; c++) var += (xr[c] - m) * (xr[c] - m);
        const double rs = 1.0 / sqrt(var / C + 1e-5);
        for (int c = 0; c < C; c++) {
            const double xh = (xr[c] - m) * rs;
            s1 += w[c] * d[c];
            s2 += w[c] * d[c] * xh;
            rdw[c] += d[c] * xh;
            rdb[c] += d[c];
        }
        for (int c = 0; c < C; c++) {
            const double xh = (xr[c] - m) * rs;
            rdx[(size_t)n * C + c] = (w[c] * d[c] - s1 / C - xh * s2 / C) * rs;
        }
    }
    float *g[3];
    for (int run = 0; run < 3; run++) {
        omp_set_num_threads(run + 1);
        g[run] = tu_alloc(N * C + 2 * C);
        for (size_t i = 0; i < (size_t)N * C + 2 * C; i++) g[run][i] = 0.25f;   /* backward accumulates */
        layernorm_backward(g[run], g[run] + N * C, g[run] + N * C + C, dout, x, w, mean, rstd, N, C, scratch);
    }
    omp_set_num_threads(2);
    double ex = 0, ew = 0, eb = 0, sw = 0;
    for (size_t i = 0; i < (size_t)N * C; i++) ex = fmax(ex, fabs(g[0][i] - 0.25 - rdx[i]));
    for (int c = 0; c < C; c++) {
        ew = fmax(ew, fabs(g[0][N * C + c] - 0.25 - rdw[c]));
        eb = fmax(eb, fabs(g[0][N * C + C + c] - 0.25 - rdb[c]));
        sw = fmax(sw, fabs(rdw[c]) + fabs(rdb[c]));
    }
    CHECK_MSG(ex < 2e-5 && ew < 1e-5 * sw + 1e-4 && eb < 1e-5 * sw + 1e-4,
              "layernorm backward vs double: dinp %.3g, dw %.3g, db %.3g (scale %.3g)", ex, ew, eb, sw);
    CHECK_MSG(!memcmp(g[0], g[1], sizeof(float) * (N * C + 2 * C)) &&
              !memcmp(g[0], g[2], sizeof(float) * (N * C + 2 * C)),
              "layernorm backward differs between 1, 2 and 3 threads");
    for (int run = 0; run < 3; run++) free(g[run]);
    free(rdx); free(x); free(dout); free(w); free(b); free(out); free(mean); free(rstd); free(scratch);
}

static void test_thread_determinism(void) {
    enum { B = 16, T = 12, C = 256, NH = 4, V = 50, N = B * T };
    int32_t klen[B], ids[N];
    for (int b = 0; b < B; b++) klen[b] = 1 + (b * 5) % T;
    for (int n = 0; n < N; n++) ids[n] = (n * 7) % V;
    float *x = tu_alloc(N * C), *dout = tu_alloc(N * C), *probs = tu_alloc(B * NH * T * T);
    float *out = tu_alloc(N * C), *w = tu_alloc(C), *mean = tu_alloc(N), *rstd = tu_alloc(N);
    float log_sigma[NH] = {0.5f, 1.0f, 1.5f, 2.0f};
    tu_fill(x, N * C, -1, 1);
    tu_fill(dout, N * C, -1, 1);
    tu_fill(w, C, 0.5, 1.5);
    projattn_forward(out, probs, x, x, log_sigma, klen, 1, B, T, T, C, NH);
    layernorm_forward(out, mean, rstd, x, w, w, N, C);

    const size_t ng = (size_t)N * C + V * C + 2 * C + NH;
    float *g[2];
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        float *gr = g[run] = tu_alloc(ng);
        projattn_backward(gr, gr, gr + N * C + V * C + 2 * C, dout, probs, x, x, log_sigma, klen, 1,
                          B, T, T, C, NH);
        float *scratch = tu_alloc(layernorm_backward_scratch_floats(C));
        layernorm_backward(gr, gr + N * C + V * C, gr + N * C + V * C + C, dout, x, w, mean, rstd, N, C, scratch);
        free(scratch);
        embedding_backward(gr + N * C, dout, ids, B, T, C, 16.0f);
    }
    omp_set_num_threads(2);
    CHECK_MSG(memcmp(g[0], g[1], ng * sizeof(float)) == 0,
              "projattn/layernorm/embedding gradients differ between 1 and 2 threads");
    printf("1 vs 2 threads: projattn (incl. dlog_sigma), layernorm, embedding gradients %s\n",
           memcmp(g[0], g[1], ng * sizeof(float)) == 0 ? "bit-identical" : "DIFFER");
    free(x); free(dout); free(probs); free(out); free(w); free(mean); free(rstd); free(g[0]); free(g[1]);
}

int main(void) {
    tu_seed(977);
    test_exp();
    test_positional_and_embedding();
    test_layernorm_values();
    test_linear_values();
    test_dropout_values();
    test_dropout_regenerated();
    test_linear_relu();
    test_cached_attention();
    test_crossentropy_fused();
    test_attention_reference();
    test_projattn_equals_attention();
    test_crossentropy_values();
    test_thread_determinism();
    test_layernorm_backward_chunks();
    return test_finish();
}
