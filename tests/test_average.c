/*
 * test_average.c — checkpoint averaging and the moving average
 * (model/average.h, pmt_ema_update): the average of identical checkpoints
 * is the input bitwise; of two it is their element-wise mean; a checkpoint
 * with a moving average contributes that; another model's checkpoint
 * (tensor table, or only its config: the kernel) is refused, and so is a
 * mix of moving averages and raw weights; step-<N>.ckpt files are listed in step order; the EMA update
 * follows its formula, warm-up included.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/average.h"
#include "model/checkpoint.h"
#include "testutil.h"
#include "train/optim.h"
#include "train_fixture.h"

static void make_model_of(pmt_model *m, int kind, int kernel, int d_ff, uint64_t seed) {
    pmt_config cfg;
    char err[256];
    fixture_config(&cfg, kind, "unused");
    cfg.proj_kernel = kernel;
    cfg.d_ff = d_ff;
    CHECK(pmt_model_init(m, &cfg, FIX_VOCAB, 64, 16, err, sizeof err) == 0);
    pmt_model_init_params(m, seed);
}

static void make_model(pmt_model *m, int d_ff, uint64_t seed) {
    make_model_of(m, PMT_ATTN_STANDARD, PMT_KERNEL_GAUSSIAN, d_ff, seed);
}

static void save(const char *path, const pmt_model *m, const float *ema) {
    char err[512];
    CHECK_MSG(pmt_checkpoint_save(path, m, FIX_SPM, sizeof FIX_SPM, NULL, NULL, ema, err, sizeof err) == 0, "%s", err);
}

static int load(const char *path, pmt_checkpoint *ck) {
    char err[512];
    int rc = pmt_checkpoint_load(ck, path, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    return rc;
}

static void test_average(const char *dir) {
    char a[1100], b[1100], c[1100], d[1100], other[1100], out[1100], err[1024];
    snprintf(a, sizeof a, "%s/a.ckpt", dir);
    snprintf(b, sizeof b, "%s/b.ckpt", dir);
    snprintf(c, sizeof c, "%s/c.ckpt", dir);
    snprintf(d, sizeof d, "%s/d.ckpt", dir);
    snprintf(other, sizeof other, "%s/other.ckpt", dir);
    snprintf(out, sizeof out, "%s/avg.ckpt", dir);
    pmt_model ma, mb, mo;
    make_model(&ma, 64, 1);
    make_model(&mb, 64, 2);
    make_model(&mo, 48, 1);
    save(a, &ma, NULL);
    save(b, &mb, NULL);
    save(other, &mo, NULL);
    /* c: b's parameters with a's as the moving average; d: a's with a's. */
    save(c, &mb, ma.params);
    save(d, &ma, ma.params);

    const char *same[] = {a, a, a};
    CHECK_MSG(pmt_checkpoint_average(same, 3, out, err, sizeof err) == 0, "%s", err);
    pmt_checkpoint ck;
    if (load(out, &ck) == 0) {
        CHECK(ck.n_params == ma.n_params && !memcmp(ck.params, ma.params, ma.n_params * sizeof(float)));
        CHECK(!ck.has_optim && !ck.has_state && !ck.has_ema && ck.spm_size == sizeof FIX_SPM);
        CHECK(ck.cfg.d_ff == 64);
        pmt_checkpoint_free(&ck);
    }
    const char *two[] = {a, b};
    CHECK_MSG(pmt_checkpoint_average(two, 2, out, err, sizeof err) == 0, "%s", err);
    if (load(out, &ck) == 0) {
        size_t wrong = 0;
        for (size_t i = 0; i < ck.n_params; i++)
            wrong += ck.params[i] != (float)(((double)ma.params[i] + (double)mb.params[i]) / 2);
        CHECK_MSG(wrong == 0, "%zu averaged values differ from the mean", wrong);
        pmt_checkpoint_free(&ck);
    }
    /* c contributes its moving average (a's values): the average of c and d is a. */
    const char *with_ema[] = {c, d};
    CHECK_MSG(pmt_checkpoint_average(with_ema, 2, out, err, sizeof err) == 0, "%s", err);
    if (load(out, &ck) == 0) {
        CHECK(!memcmp(ck.params, ma.params, ma.n_params * sizeof(float)));
        pmt_checkpoint_free(&ck);
    }
    /* A moving average and raw weights are different estimates: not mixed. */
    const char *ema_and_raw[] = {a, c};
    CHECK(pmt_checkpoint_average(ema_and_raw, 2, out, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "c.ckpt") && strstr(err, "mix moving averages with raw weights"), "message: %s", err);
    const char *mixed[] = {a, other};
    CHECK(pmt_checkpoint_average(mixed, 2, out, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "other.ckpt") && strstr(err, "another model"), "message: %s", err);
    const char *missing[] = {a, "/nonexistent/x.ckpt"};
    CHECK(pmt_checkpoint_average(missing, 2, out, err, sizeof err) == -1 && strstr(err, "/nonexistent/x.ckpt"));
    pmt_model_free(&ma);
    pmt_model_free(&mb);
    pmt_model_free(&mo);
}

/* Same tensor table, another kernel: once averaged silently under the
 * first file's config. */
static void test_config_differs(const char *dir) {
    char gauss[1100], epan[1100], out[1100], err[1024];
    snprintf(gauss, sizeof gauss, "%s/gaussian.ckpt", dir);
    snprintf(epan, sizeof epan, "%s/epanechnikov.ckpt", dir);
    snprintf(out, sizeof out, "%s/avg-kernels.ckpt", dir);
    pmt_model mg, me;
    make_model_of(&mg, PMT_ATTN_PROJECTION, PMT_KERNEL_GAUSSIAN, 64, 1);
    make_model_of(&me, PMT_ATTN_PROJECTION, PMT_KERNEL_EPANECHNIKOV, 64, 2);
    CHECK(mg.n_params == me.n_params);
    save(gauss, &mg, NULL);
    save(epan, &me, NULL);
    const char *kernels[] = {gauss, epan};
    CHECK(pmt_checkpoint_average(kernels, 2, out, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "epanechnikov.ckpt") && strstr(err, "kernel = gaussian vs epanechnikov"), "message: %s", err);
    pmt_model_free(&mg);
    pmt_model_free(&me);
}

static void test_step_listing(const char *dir) {
    char path[1100], err[512];
    const int64_t made[] = {1200, 80, 400};
    for (int i = 0; i < 3; i++) {
        pmt_step_checkpoint_path(path, sizeof path, dir, made[i]);
        CHECK(test_write_file(path, "x") == 0);
    }
    const char *decoys[] = {"step-.ckpt", "step-12.ckpt.tmp", "step-x1.ckpt", "last.ckpt", "step--3.ckpt"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, decoys[i]);
        CHECK(test_write_file(path, "x") == 0);
    }
    int64_t *steps;
    int n;
    CHECK(pmt_step_checkpoints(dir, &steps, &n, err, sizeof err) == 0);
    CHECK_MSG(n == 3 && steps[0] == 80 && steps[1] == 400 && steps[2] == 1200, "found %d", n);
    free(steps);
    pmt_step_checkpoint_path(path, sizeof path, "/some/dir", 42);
    CHECK(!strcmp(path, "/some/dir/step-42.ckpt"));
    CHECK(pmt_step_checkpoints("/nonexistent/dir", &steps, &n, err, sizeof err) == -1 && strstr(err, "/nonexistent"));
}

static void test_ema_math(void) {
    float ema[3] = {1.0f, -2.0f, 0.5f};
    const float p[3] = {3.0f, 2.0f, 0.5f};
    /* Step 1: d = min(0.999, 2/11) = 2/11. */
    pmt_ema_update(ema, p, 3, 0.999, 1);
    const float d1 = (float)(2.0 / 11.0);
    CHECK(ema[0] == d1 * 1.0f + (1.0f - d1) * 3.0f);
    CHECK(ema[1] == d1 * -2.0f + (1.0f - d1) * 2.0f);
    CHECK(ema[2] == 0.5f);
    /* Late steps: d = decay. */
    float e2[1] = {1.0f};
    const float q[1] = {0.0f};
    pmt_ema_update(e2, q, 1, 0.9, 1000000);
    CHECK(e2[0] == 0.9f);
    for (int i = 0; i < 10; i++) pmt_ema_update(e2, q, 1, 0.9, 1000000);
    CHECK_NEAR(e2[0], pow(0.9, 11), 1e-6);
}

int main(void) {
    char dir[1024], steps[1024];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("average"));
    snprintf(steps, sizeof steps, "%s", test_tmpdir("average-steps"));
    (void)fixture_corpus;   /* the fixture's corpus half is for the training tests */
    (void)fixture_corpus_free;
    test_ema_math();
    test_step_listing(steps);
    test_average(dir);
    test_config_differs(dir);
    return test_finish();
}
