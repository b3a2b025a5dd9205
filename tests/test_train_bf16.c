/*
 * test_train_bf16.c — --precision bf16 at the model and checkpoint level
 * (the products themselves: test_gemm_bf16.c; bit-exact resume:
 * test_train_resume.c):
 *   - one training step (forward + backward, dropout and label smoothing on)
 *     in bf16 is within bf16's tolerance of the same step in fp32: loss to
 *     5e-3 relative, the whole gradient to 3e-2 relative (L2), and not
 *     equal to it (the products really ran in bf16);
 *   - pmt_model_train_step gives the bits of pmt_model_forward +
 *     pmt_model_backward in both precisions (in bf16 it hands backward the
 *     logits' gradient already rounded), also after the parameters change
 *     (the bf16 weights are rounded again: a model that has trained equals a
 *     fresh one given the same parameters);
 *   - an evaluation pass of a bf16 model is fp32, bitwise that of the fp32
 *     model (validation and translation judge the weights in fp32);
 *   - checkpoints record the precision (config key `precision`), a config
 *     stored without it (older checkpoints) reads as fp32, and a bf16
 *     checkpoint loads as a model for fp32 inference with the same outputs.
 * SKIPs on a CPU without avx512_bf16 (the refusal is test_gemm_bf16.c's).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/batcher.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "nn/gemm.h"
#include "testutil.h"
#include "train_fixture.h"

enum { MAX_ROWS = 256, MAX_LEN = 16 };

static void step_config(pmt_config *cfg, int precision) {
    fixture_config(cfg, PMT_ATTN_STANDARD, "unused");
    cfg->d_model = 64;
    cfg->n_heads = 4;
    cfg->d_ff = 256;
    cfg->enc_layers = cfg->dec_layers = 2;
    cfg->site_kind[PMT_SITE_DEC_CROSS] = PMT_ATTN_PROJECTION;
    cfg->dropout = 0.1;
    cfg->label_smoothing = 0.1;
    cfg->batch_tokens = MAX_ROWS;
    cfg->max_len = MAX_LEN;
    cfg->precision = precision;
}

/* Inits a training model of this precision with the seed's parameters. */
static int make_model(pmt_model *m, int precision) {
    pmt_config cfg;
    char err[256];
    step_config(&cfg, precision);
    int rc = pmt_model_init(m, &cfg, FIX_VOCAB, MAX_ROWS, MAX_LEN, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) pmt_model_init_params(m, 5);
    return rc;
}

/* One forward + backward; returns the loss per token. */
static double train_pass(pmt_model *m, const pmt_batch *b) {
    pmt_stats st;
    pmt_model_zero_grad(m);
    pmt_model_forward(m, b, 1, 99, &st);
    pmt_model_backward(m, b, st.tokens);
    return st.loss_sum / st.tokens;
}

static double eval_loss(pmt_model *m, const pmt_batch *b) {
    pmt_stats st;
    pmt_model_forward(m, b, 0, 0, &st);
    return st.loss_sum / st.tokens;
}

static void test_step_and_checkpoint(const pmt_batch *b) {
    pmt_model m32, m16;
    if (make_model(&m32, PMT_PRECISION_FP32) != 0) return;
    if (make_model(&m16, PMT_PRECISION_BF16) != 0) { pmt_model_free(&m32); return; }
    CHECK(memcmp(m32.params, m16.params, m32.n_params * sizeof(float)) == 0);

    const double l32 = train_pass(&m32, b), l16 = train_pass(&m16, b);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < m32.n_params; i++) {
        const double d = (double)m16.grads[i] - m32.grads[i];
        diff += d * d;
        norm += (double)m32.grads[i] * m32.grads[i];
    }
    const double grad_rel = sqrt(diff / norm), loss_rel = fabs(l16 - l32) / l32;
    printf("one step, bf16 vs fp32: loss %.6f vs %.6f (rel. %.2g), gradient rel. L2 difference %.3g\n", l16, l32,
           loss_rel, grad_rel);
    CHECK_MSG(loss_rel < 5e-3, "bf16 loss %.6f, fp32 %.6f", l16, l32);
    CHECK_MSG(grad_rel < 3e-2, "bf16 gradient differs from fp32 by %.3g (relative L2)", grad_rel);
    CHECK_MSG(grad_rel > 1e-5 && l16 != l32, "bf16 step equals the fp32 one: bf16 products did not run");
    CHECK(pmt_gemm_precision() == PMT_PRECISION_FP32);   /* switched back after the pass */

    /* Evaluation passes are fp32 in both models: the same bits. */
    const double e32 = eval_loss(&m32, b), e16 = eval_loss(&m16, b);
    CHECK_MSG(e32 == e16, "evaluation of the bf16 model %.9g, of the fp32 one %.9g", e16, e32);

    /* The checkpoint records the precision; the bf16 one loads for fp32
     * inference and scores as the fp32 model does. */
    char path16[1100], path32[1100], err[512];
    const char *dir = test_tmpdir("train-bf16");
    snprintf(path16, sizeof path16, "%s/bf16.ckpt", dir);
    snprintf(path32, sizeof path32, "%s/fp32.ckpt", dir);
    CHECK_MSG(pmt_checkpoint_save(path16, &m16, FIX_SPM, sizeof FIX_SPM, NULL, NULL, NULL, err, sizeof err) == 0,
              "%s", err);
    CHECK_MSG(pmt_checkpoint_save(path32, &m32, FIX_SPM, sizeof FIX_SPM, NULL, NULL, NULL, err, sizeof err) == 0,
              "%s", err);
    pmt_checkpoint ck;
    if (pmt_checkpoint_load(&ck, path16, err, sizeof err) == 0) {
        CHECK(ck.cfg.precision == PMT_PRECISION_BF16 && ck.ignored[0] == '\0');
        pmt_checkpoint_free(&ck);
    } else CHECK_MSG(0, "%s", err);
    if (pmt_checkpoint_load(&ck, path32, err, sizeof err) == 0) {
        CHECK(ck.cfg.precision == PMT_PRECISION_FP32);
        pmt_checkpoint_free(&ck);
    } else CHECK_MSG(0, "%s", err);
    pmt_model inf;
    if (pmt_checkpoint_load_model(path16, &inf, MAX_ROWS, MAX_LEN, NULL, err, sizeof err) == 0) {
        CHECK(inf.cfg.precision == PMT_PRECISION_BF16 && !inf.grads);
        CHECK_MSG(eval_loss(&inf, b) == e32, "the loaded bf16 checkpoint scores %.9g, the model %.9g",
                  eval_loss(&inf, b), e32);
        pmt_model_free(&inf);
    } else CHECK_MSG(0, "%s", err);
    pmt_model_free(&m32);
    pmt_model_free(&m16);
}

/* grads and loss of forward + backward versus pmt_model_train_step, with a
 * denominator that is not a power of two (its 1/x rounds). */
static void check_train_step(pmt_model *m, const pmt_batch *b, const char *what) {
    pmt_stats st1, st2;
    pmt_model_zero_grad(m);
    const double l1 = pmt_model_forward(m, b, 1, 7, &st1);
    const double denominator = st1.tokens + 3;
    pmt_model_backward(m, b, denominator);
    float *g1 = malloc(sizeof(float) * m->n_params);
    memcpy(g1, m->grads, sizeof(float) * m->n_params);
    pmt_model_zero_grad(m);
    const double l2 = pmt_model_train_step(m, b, 7, denominator, &st2);
    CHECK_MSG(l1 == l2 && st1.correct == st2.correct && st1.nll_sum == st2.nll_sum, "%s: train step loss %.9g, "
              "passes %.9g", what, l2, l1);
    CHECK_MSG(memcmp(g1, m->grads, sizeof(float) * m->n_params) == 0,
              "%s: pmt_model_train_step's gradient differs from forward + backward", what);
    free(g1);
}

static void test_train_step(const pmt_batch *b) {
    for (int precision = 0; precision < PMT_PRECISIONS; precision++) {
        pmt_model m, fresh;
        if (make_model(&m, precision) != 0) return;
        const char *what = precision == PMT_PRECISION_BF16 ? "bf16" : "fp32";
        check_train_step(&m, b, what);
        for (size_t i = 0; i < m.n_params; i++) m.params[i] -= 1e-2f * m.grads[i] + 1e-3f;
        check_train_step(&m, b, what);
        if (make_model(&fresh, precision) == 0) {
            memcpy(fresh.params, m.params, sizeof(float) * m.n_params);
            pmt_stats st;
            pmt_model_zero_grad(&m);
            pmt_model_zero_grad(&fresh);
            pmt_model_train_step(&m, b, 8, 100.0, &st);
            pmt_model_train_step(&fresh, b, 8, 100.0, &st);
            CHECK_MSG(memcmp(m.grads, fresh.grads, sizeof(float) * m.n_params) == 0,
                      "%s: after a parameter change the step differs from a fresh model's (stale bf16 weights)", what);
            pmt_model_free(&fresh);
        }
        pmt_model_free(&m);
    }
}

/* The key round-trips through the stored config; without it, fp32; the
 * default is auto, which names this CPU's choice. */
static void test_stored_config(void) {
    pmt_config cfg, back;
    char ignored[256], err[256];
    pmt_config_defaults(&cfg);
    CHECK(cfg.precision == PMT_PRECISION_AUTO && !strcmp(pmt_precision_name(cfg.precision), "auto"));
    CHECK(pmt_gemm_precision_auto() == (pmt_cpu_has_bf16() ? PMT_PRECISION_BF16 : PMT_PRECISION_FP32));
    CHECK(pmt_config_set(&cfg, "precision", "auto", err, sizeof err) == 0 && cfg.precision == PMT_PRECISION_AUTO);
    CHECK(pmt_config_set(&cfg, "precision", "bf16", err, sizeof err) == 0 && cfg.precision == PMT_PRECISION_BF16);
    CHECK(pmt_config_set(&cfg, "precision", "fp16", err, sizeof err) == -1 && strstr(err, "precision"));
    char *text = pmt_config_to_string(&cfg);
    CHECK(text && strstr(text, "precision = bf16"));
    pmt_config_defaults(&back);
    CHECK(text && pmt_config_load_stored(&back, text, ignored, sizeof ignored, err, sizeof err) == 0 &&
          back.precision == PMT_PRECISION_BF16);
    free(text);
    pmt_config_defaults(&back);   /* what the loader starts from */
    CHECK(pmt_config_load_stored(&back, "[model]\nd_model = 64\n[train]\nbatch_tokens = 512\n", ignored,
                                 sizeof ignored, err, sizeof err) == 0 &&
          back.precision == PMT_PRECISION_FP32);
}

int main(void) {
    test_stored_config();
    if (!pmt_cpu_has_bf16()) {
        const int rc = test_finish();
        if (rc != 0) return rc;
        test_skip("this CPU has no avx512_bf16 (bf16 training refuses to run here)");
    }
    pmt_corpus c;
    pmt_batcher bt;
    char err[256];
    fixture_corpus(&c, 64, 4, 12, 31);
    if (pmt_batcher_init(&bt, &c, MAX_ROWS, MAX_LEN, 1, 1, err, sizeof err) != 0) {
        CHECK_MSG(0, "%s", err);
        return test_finish();
    }
    test_step_and_checkpoint(pmt_batcher_fill(&bt, 0, 0));
    test_train_step(pmt_batcher_fill(&bt, 0, 0));
    pmt_batcher_free(&bt);
    fixture_corpus_free(&c);
    return test_finish();
}
