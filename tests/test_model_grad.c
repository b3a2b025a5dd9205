/*
 * test_model_grad.c — whole-model gradient check: the analytic gradient of the
 * teacher-forced, label-smoothed loss (pmt_model_backward) against central
 * finite differences of pmt_model_forward, for every parameter tensor of a tiny
 * model, in every combination of attention forms at the three sites, with
 * fixed and learned σ, every kernel and metric of the pooling family
 * (nn/ops.h poolattn_*), with padding, and with dropout on the residual
 * branches and on the attention output (attn_dropout; its masks are a
 * deterministic function of the seed, so the perturbed passes see the same
 * masks).
 *
 * The forward runs in fp32, so finite differences carry rounding noise of
 * about eps_fp32·|loss|/h, and a Richardson step cancels the O(h²)
 * truncation error. h = 5e-4 is set by the ReLU kinks rather than by the
 * noise: with dropout, some ReLU inputs of this tiny model sit within 2e-3
 * of zero, and at h = 2e-3 their quotients were off by 2 % of the RMS
 * gradient without failing to converge (dec.1.ffn.ln_b at 0.0202 of the
 * 0.02 bound once oneDNN was capped to AVX). At 5e-4 no element straddles
 * a kink and the noise floor is 3–7e-3, the worst tensor ~9e-3. We
 * compare per tensor with a norm-wise relative error, which is robust to that
 * noise and to the rare ReLU kink. Some gradients are zero by construction
 * (the key bias b_K: softmax ignores a per-row constant), so each tensor's
 * error is measured against the larger of its own RMS gradient and the
 * model-wide RMS gradient. The worst tensor of each configuration is printed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "model/model.h"
#include "testutil.h"

enum { V = 23, B = 3, S = 5, T = 4 };

static void make_batch(pmt_batch *b, int32_t *src, int32_t *src_len, int32_t *tin, int32_t *tout, int32_t *tlen) {
    /* Sentence lengths differ so key padding and the causal mask both matter. */
    const int slen[B] = {5, 3, 1}, ylen[B] = {4, 2, 3};
    int seed = 7;
    for (int i = 0; i < B; i++) {
        src_len[i] = slen[i];
        tlen[i] = ylen[i];
        for (int s = 0; s < S; s++) src[i * S + s] = s < slen[i] ? 4 + (seed = (seed * 13 + 5) % (V - 4)) : PMT_PAD_ID;
        for (int t = 0; t < T; t++) {
            int32_t y = t < ylen[i] - 1 ? 4 + (seed = (seed * 13 + 5) % (V - 4)) : (t == ylen[i] - 1 ? PMT_EOS_ID : PMT_PAD_ID);
            tout[i * T + t] = y;
            tin[i * T + t] = t == 0 ? PMT_BOS_ID : (t < ylen[i] ? tout[i * T + t - 1] : PMT_PAD_ID);
        }
    }
    *b = (pmt_batch){B, S, T, src, src_len, tin, tout, tlen};
}

static double quotient(pmt_model *m, const pmt_batch *b, int train, uint64_t seed, float *p, float h) {
    pmt_stats st;
    float saved = *p;
    *p = saved + h;
    double lp = pmt_model_forward(m, b, train, seed, &st);
    *p = saved - h;
    double lm = pmt_model_forward(m, b, train, seed, &st);
    *p = saved;
    return (lp - lm) / (2.0 * (double)h);
}

/* Central difference with one Richardson step, (4 D(h/2) - D(h)) / 3, which
 * cancels the O(h²) truncation error: the Gaussian logits of projection
 * attention are strongly curved, and fp32 forbids a much smaller h. */
static double central_difference(pmt_model *m, const pmt_batch *b, int train, uint64_t seed, float *p, float h) {
    return (4.0 * quotient(m, b, train, seed, p, h / 2) - quotient(m, b, train, seed, p, h)) / 3.0;
}

/* attn_dropout of the next checks (0 but for the one that tests it). */
static double g_attn_dropout;

/* Returns the worst norm-wise relative error over all tensors. */
static double check_config_family(const char *label, int kinds[PMT_SITES], int learned_sigma, double dropout,
                                  int kernel, int metric, double sigma_sq) {
    pmt_config cfg;
    char err[256];
    pmt_config_defaults(&cfg);
    cfg.d_model = 8;
    cfg.n_heads = 2;
    cfg.d_ff = 12;
    cfg.enc_layers = 2;
    cfg.dec_layers = 2;
    cfg.dropout = dropout;
    cfg.attn_dropout = g_attn_dropout;
    cfg.label_smoothing = 0.1;
    cfg.max_len = 8;
    cfg.batch_tokens = 64;
    cfg.sigma_learned = learned_sigma;
    cfg.proj_kernel = kernel;
    cfg.proj_metric = metric;
    cfg.sigma_sq = sigma_sq;
    for (int s = 0; s < PMT_SITES; s++) cfg.site_kind[s] = kinds[s];
    pmt_model m;
    if (pmt_model_init(&m, &cfg, V, 32, 8, err, sizeof err) != 0) {
        CHECK_MSG(0, "model init: %s", err);
        return 1e9;
    }
    pmt_model_init_params(&m, 42);
    /* Non-trivial LayerNorm gains/biases and learned σ, so their gradients are tested. */
    for (int i = 0; i < m.n_tensors; i++) {
        const pmt_tensor *t = &m.tensors[i];
        if (t->cols == 1)
            for (size_t j = 0; j < t->size; j++) m.params[t->offset + j] += 0.1f * (float)sin(1.7 * (double)(j + 3 * i));
    }
    int32_t src[B * S], src_len[B], tin[B * T], tout[B * T], tlen[B];
    pmt_batch b;
    make_batch(&b, src, src_len, tin, tout, tlen);
    const uint64_t seed = 7;
    const int train = dropout > 0 || g_attn_dropout > 0;

    pmt_stats st;
    pmt_model_zero_grad(&m);
    pmt_model_forward(&m, &b, train, seed, &st);
    pmt_model_backward(&m, &b, st.tokens);
    float *analytic = malloc(m.n_params * sizeof(float));
    memcpy(analytic, m.grads, m.n_params * sizeof(float));

    double global2 = 0;
    for (size_t j = 0; j < m.n_params; j++) global2 += (double)analytic[j] * analytic[j];
    const double global_rms = sqrt(global2 / (double)m.n_params);
    const float h = 5e-4f;
    int kinks = 0;
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < m.n_tensors; i++) {
        const pmt_tensor *t = &m.tensors[i];
        double diff2 = 0, sum2 = 0;
        for (size_t j = 0; j < t->size; j++) {
            float *p = &m.params[t->offset + j];
            double a = analytic[t->offset + j];
            double numeric = central_difference(&m, &b, train, seed, p, h);
            /* A ReLU input within h of zero makes the difference quotient
             * straddle a kink, where it measures no derivative at all. Such
             * an element is recognised by its quotient not converging (h vs
             * h/4); it is left out, and the count is bounded below. */
            if (fabs(numeric - a) > 0.05 * fabs(a) + 0.05 * global_rms) {
                double finer = central_difference(&m, &b, train, seed, p, h / 4);
                if (fabs(finer - numeric) > 0.02 * fabs(numeric) + 0.02 * global_rms) {
                    kinks++;
                    continue;
                }
            }
            diff2 += (numeric - a) * (numeric - a);
            sum2 += numeric * numeric + a * a;
        }
        double scale = sqrt(sum2 / (2.0 * (double)t->size));
        if (scale < global_rms) scale = global_rms;
        double rel = sqrt(diff2 / (double)t->size) / scale;
        CHECK_MSG(rel < 2e-2, "%s: tensor %s relative gradient error %.3g", label, t->name, rel);
        if (rel > worst) { worst = rel; worst_name = t->name; }
    }
    printf("%-44s params %5zu  worst %-20s rel err %.2e  (%d at ReLU kinks)\n", label, m.n_params, worst_name,
           worst, kinks);
    /* One ReLU input near zero touches every parameter upstream of it, so a
     * few percent can sit at a kink; more would hide a wrong gradient. */
    CHECK_MSG(kinks <= (int)(m.n_params / 25), "%s: %d elements at kinks", label, kinks);
    free(analytic);
    pmt_model_free(&m);
    return worst;
}

static double check_config(const char *label, int kinds[PMT_SITES], int learned_sigma, double dropout) {
    return check_config_family(label, kinds, learned_sigma, dropout, PMT_KERNEL_GAUSSIAN, PMT_METRIC_EUCLIDEAN, 0.0);
}

int main(void) {
    /* ~10^5 tiny forward passes: thread start-up would cost more than the work. */
    omp_set_num_threads(1);
    /* Every combination of attention forms at the three sites. */
    for (int combo = 0; combo < 8; combo++) {
        int kinds[PMT_SITES];
        char label[96];
        for (int s = 0; s < PMT_SITES; s++) kinds[s] = (combo >> s) & 1;
        snprintf(label, sizeof label, "enc_self=%s dec_self=%s dec_cross=%s", pmt_attention_kind_name(kinds[0]),
                 pmt_attention_kind_name(kinds[1]), pmt_attention_kind_name(kinds[2]));
        check_config(label, kinds, 0, 0.0);
    }
    int all_proj[PMT_SITES] = {1, 1, 1}, all_std[PMT_SITES] = {0, 0, 0};
    check_config("all projection, learned sigma", all_proj, 1, 0.0);
    check_config("all standard, dropout 0.2", all_std, 0, 0.2);
    check_config("all projection, learned sigma, dropout 0.2", all_proj, 1, 0.2);
    /* Dropout on the pooled values (attn_dropout), alone and with the
     * residual dropout, in both attention forms. */
    g_attn_dropout = 0.3;
    check_config("all projection, attn_dropout 0.3", all_proj, 0, 0.0);
    check_config("all standard, attn_dropout 0.3, dropout 0.2", all_std, 0, 0.2);
    g_attn_dropout = 0.0;
    /* The pooling family: every kernel and every metric once. A parameter
     * that moves many distances at once (log_metric) makes some key cross
     * Epanechnikov's support edge within a finite-difference step, where the
     * quotient measures no derivative; σ² = 100 (> every d² of these
     * LayerNormed HS = 4 slices) keeps every key inside there. The edge
     * itself is tested per kernel in test_poolattn.c. */
    check_config_family("all projection, gaussian/diagonal, learned sigma", all_proj, 1, 0.0, PMT_KERNEL_GAUSSIAN,
                        PMT_METRIC_DIAGONAL, 0.0);
    check_config_family("all projection, gaussian/cosine, learned sigma", all_proj, 1, 0.0, PMT_KERNEL_GAUSSIAN,
                        PMT_METRIC_COSINE, 0.0);
    check_config_family("all projection, gaussian/dot, learned sigma", all_proj, 1, 0.0, PMT_KERNEL_GAUSSIAN,
                        PMT_METRIC_DOT, 0.0);
    check_config_family("all projection, epanechnikov/cosine, learned sigma", all_proj, 1, 0.0,
                        PMT_KERNEL_EPANECHNIKOV, PMT_METRIC_COSINE, 0.0);
    check_config_family("all projection, epanechnikov/diagonal (sigma^2 100), dropout 0.2", all_proj, 0, 0.2,
                        PMT_KERNEL_EPANECHNIKOV, PMT_METRIC_DIAGONAL, 100.0);
    check_config_family("all projection, boxcar", all_proj, 0, 0.0, PMT_KERNEL_BOXCAR, PMT_METRIC_EUCLIDEAN, 0.0);
    check_config_family("all projection, constant", all_proj, 0, 0.0, PMT_KERNEL_CONSTANT, PMT_METRIC_EUCLIDEAN, 0.0);
    return test_finish();
}
