/*
 * test_train_learn.c — the training loop learns: one small batch is
 * memorised (loss < 0.1 without label smoothing) with standard and with
 * projection attention, and a short run on a made-up corpus lowers the
 * validation loss and writes train.tsv, last.ckpt and best.ckpt.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "data/batcher.h"
#include "model/checkpoint.h"
#include "testutil.h"
#include "train/train.h"
#include "train_fixture.h"

typedef struct { double first, last; int64_t steps; } loss_trace;

static void record(void *user, int64_t step, double loss, pmt_step_status status) {
    loss_trace *tr = user;
    if (status != PMT_STEP_APPLIED) return;
    if (tr->steps == 0) tr->first = loss;
    tr->last = loss;
    tr->steps = step;
}

static void test_overfit_one_batch(int kind) {
    pmt_corpus c;
    fixture_corpus(&c, 8, 4, 8, 1 + (uint64_t)kind);
    char dir[1024], err[512];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("overfit"));
    pmt_config cfg;
    fixture_config(&cfg, kind, dir);
    cfg.max_steps = 300;
    cfg.valid_every = 0;
    pmt_train_data data = {&c, &c, FIX_SPM, sizeof FIX_SPM, FIX_VOCAB};
    pmt_train_options opt = {0, 1, 0};
    loss_trace tr = {0, 0, 0};
    pmt_train_hooks hooks = {&tr, record, NULL};
    pmt_train_result res;
    int rc = pmt_train_run(&cfg, &data, &opt, &hooks, &res, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(res.stop == PMT_TRAIN_DONE && res.steps == 300 && tr.steps == 300);
    CHECK_MSG(tr.first > 2.0 && tr.last < 0.1, "%s attention: loss %.4f -> %.4f", pmt_attention_kind_name(kind),
              tr.first, tr.last);
    /* The final validation ran on the same batch, teacher-forced: near perfect. */
    CHECK_MSG(res.valid_accuracy > 0.99, "valid accuracy %.4f", res.valid_accuracy);
    fixture_corpus_free(&c);
}

/* Counts rows of a kind in train.tsv and checks the header; returns -1 if unreadable. */
static int count_rows(const char *path, const char *kind, double *first_loss, double *last_loss) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    int n = 0;
    if (!fgets(line, sizeof line, f) || strncmp(line, "kind\tstep\tepoch\tloss\taccuracy\tperplexity", 40) != 0) {
        fclose(f);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, kind, strlen(kind)) != 0) continue;
        long long step;
        double epoch, loss;
        char k[16];
        if (sscanf(line, "%15s %lld %lf %lf", k, &step, &epoch, &loss) != 4) continue;
        if (n == 0) *first_loss = loss;
        *last_loss = loss;
        n++;
    }
    fclose(f);
    return n;
}

static void test_short_run_lowers_valid_loss(void) {
    pmt_corpus train, valid;
    fixture_corpus(&train, 400, 3, 10, 11);
    fixture_corpus(&valid, 40, 3, 10, 12);
    char dir[1024], path[1100], err[512];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("learn"));
    pmt_config cfg;
    fixture_config(&cfg, PMT_ATTN_STANDARD, dir);
    cfg.dropout = 0.1;
    cfg.label_smoothing = 0.1;
    cfg.max_steps = 0;
    cfg.epochs = 20;
    cfg.warmup = 100;
    cfg.valid_every = 40;
    pmt_train_data data = {&train, &valid, FIX_SPM, sizeof FIX_SPM, FIX_VOCAB};
    pmt_train_options opt = {0, 1, 0};
    pmt_train_result res;
    int rc = pmt_train_run(&cfg, &data, &opt, NULL, &res, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(res.stop == PMT_TRAIN_DONE && fabs(res.epochs - 20.0) < 1e-9);
    double first = NAN, last = NAN, train_first, train_last;
    snprintf(path, sizeof path, "%s/train.tsv", dir);
    int n_valid = count_rows(path, "valid", &first, &last);
    CHECK_MSG(n_valid >= 8, "%d valid rows (one per epoch at least)", n_valid);
    CHECK_MSG(last < 0.6 * first && last < 0.6 * log((double)FIX_VOCAB), "valid loss %.4f -> %.4f", first, last);
    CHECK(count_rows(path, "train", &train_first, &train_last) == (int)(res.steps / cfg.log_every));
    CHECK_MSG(train_last < 0.6 * train_first, "train loss %.4f -> %.4f", train_first, train_last);
    snprintf(path, sizeof path, "%s/last.ckpt", dir);
    CHECK(access(path, R_OK) == 0);
    /* best.ckpt holds the best validation: loss is the default metric. */
    pmt_checkpoint ck;
    snprintf(path, sizeof path, "%s/best.ckpt", dir);
    rc = pmt_checkpoint_load(&ck, path, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(ck.has_state && !ck.has_optim && ck.state.has_best);
        CHECK(ck.state.best_metric == res.best_metric);
        CHECK(-ck.state.best_metric <= last + 1e-4);
        pmt_checkpoint_free(&ck);
    }
    fixture_corpus_free(&train);
    fixture_corpus_free(&valid);
}

/* With no improvement in validation accuracy (a learning rate too small to
 * flip any argmax), `patience` validations end the run. */
static void test_patience_stops(void) {
    pmt_corpus c;
    fixture_corpus(&c, 40, 3, 8, 5);
    char dir[1024], err[512];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("patience"));
    pmt_config cfg;
    fixture_config(&cfg, PMT_ATTN_STANDARD, dir);
    cfg.lr = 1e-12;
    cfg.max_steps = 100;
    cfg.valid_every = 0;  /* validate at epoch ends only */
    cfg.patience = 2;
    snprintf(cfg.early_stopping_metric, sizeof cfg.early_stopping_metric, "accuracy");
    pmt_train_data data = {&c, &c, FIX_SPM, sizeof FIX_SPM, FIX_VOCAB};
    pmt_train_options opt = {0, 1, 0};
    pmt_train_result res;
    int rc = pmt_train_run(&cfg, &data, &opt, NULL, &res, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    /* Best at the first epoch end, stale at the second and third: stop. */
    pmt_batcher b;
    CHECK(pmt_batcher_init(&b, &c, cfg.batch_tokens, cfg.max_len, cfg.seed, 1, err, sizeof err) == 0);
    CHECK_MSG(res.stop == PMT_TRAIN_DONE && res.steps == 3 * b.n_batches, "stopped at step %lld, %d batches/epoch",
              (long long)res.steps, b.n_batches);
    pmt_batcher_free(&b);
    CHECK(res.best_metric == res.valid_accuracy);
    fixture_corpus_free(&c);
}

static void count_status(void *user, int64_t step, double loss, pmt_step_status status) {
    int *counts = user;
    (void)step;
    (void)loss;
    counts[status]++;
}

/* An absurd learning rate makes every step after the first non-finite: they
 * are skipped, and max_bad_steps of them in a row stop the run with an error. */
static void test_divergence_stops(void) {
    pmt_corpus c;
    fixture_corpus(&c, 40, 3, 8, 5);
    char dir[1024], err[512] = "";
    snprintf(dir, sizeof dir, "%s", test_tmpdir("diverge"));
    pmt_config cfg;
    fixture_config(&cfg, PMT_ATTN_STANDARD, dir);
    cfg.lr = 1e30;
    cfg.warmup = 0;
    cfg.clip_norm = 0;
    cfg.max_bad_steps = 3;
    pmt_train_data data = {&c, &c, FIX_SPM, sizeof FIX_SPM, FIX_VOCAB};
    pmt_train_options opt = {0, 1, 0};
    int counts[3] = {0, 0, 0};
    pmt_train_hooks hooks = {counts, count_status, NULL};
    pmt_train_result res;
    CHECK(pmt_train_run(&cfg, &data, &opt, &hooks, &res, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "diverged at step 4") && strstr(err, "--lr"), "message: %s", err);
    CHECK(counts[PMT_STEP_APPLIED] == 1 && counts[PMT_STEP_SKIPPED] == 2 && counts[PMT_STEP_DIVERGED] == 1);
    fixture_corpus_free(&c);
}

int main(void) {
    test_patience_stops();
    test_divergence_stops();
    test_overfit_one_batch(PMT_ATTN_STANDARD);
    test_overfit_one_batch(PMT_ATTN_PROJECTION);
    test_short_run_lowers_valid_loss();
    return test_finish();
}
