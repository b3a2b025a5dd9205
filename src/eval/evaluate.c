/*
 * evaluate.c — teacher-forced scores of a checkpoint on a prepared split.
 */
#include "eval/evaluate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/batcher.h"
#include "model/checkpoint.h"
#include "nn/gemm.h"

int pmt_eval_split_name_ok(const char *split) {
    return split && (!strcmp(split, "train") || !strcmp(split, "valid") || !strcmp(split, "test"));
}

int pmt_eval_forced(pmt_model *m, const pmt_corpus *c, int batch_tokens, pmt_eval_forced_result *res,
                    char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    if (batch_tokens > m->max_rows) {
        snprintf(err, errlen, "batches of %d tokens do not fit the model's arena of %d", batch_tokens, m->max_rows);
        return -1;
    }
    pmt_batcher b;
    /* shuffle = 0: length order, the batches training validates on; the seed
     * only breaks length ties, so it cannot change the sums. */
    if (pmt_batcher_init(&b, c, batch_tokens, m->max_len, m->cfg.seed, 0, err, errlen) != 0) return -1;
    double loss_sum = 0, nll_sum = 0, flops = 0;
    long correct = 0, all_tokens = 0;
    for (int k = 0; k < b.n_batches; k++) {
        pmt_stats s;
        const pmt_batch *batch = pmt_batcher_fill(&b, 0, k);
        pmt_model_forward(m, batch, 0, 0, &s);
        flops += pmt_model_train_flops(&m->cfg, m->V, batch->B, batch->S, batch->T);
        for (int i = 0; i < batch->B; i++) all_tokens += batch->src_len[i] + batch->tgt_len[i];
        loss_sum += s.loss_sum;
        nll_sum += s.nll_sum;
        res->tokens += s.tokens;
        correct += s.correct;
    }
    res->pairs = c->n_pairs;
    res->truncated = b.n_truncated;
    pmt_batcher_free(&b);
    char why[256];
    if (pmt_gemm_take_error(why, sizeof why) != 0) {
        snprintf(err, errlen, "teacher-forced pass: %s", why);
        return -1;
    }
    if (res->tokens == 0) {
        snprintf(err, errlen, "no target tokens to score");
        return -1;
    }
    res->loss = loss_sum / (double)res->tokens;
    res->nll = nll_sum / (double)res->tokens;
    res->perplexity = exp(res->nll);
    res->accuracy = (double)correct / (double)res->tokens;
    res->params = m->n_params;
    res->train_flops_per_token = flops / (double)all_tokens;
    return 0;
}

/* Builds m from the checkpoint at path with an arena for its own batches. */
static int load_for_batches(const char *path, pmt_model *m, char *err, size_t errlen) {
    pmt_checkpoint ck;
    if (pmt_checkpoint_load(&ck, path, err, errlen) != 0) return -1;
    pmt_checkpoint_use_ema(&ck);
    int rc = pmt_model_init(m, &ck.cfg, ck.vocab_size, ck.cfg.batch_tokens, ck.cfg.max_len, err, errlen);
    if (rc == 0 && (rc = pmt_checkpoint_copy_params(&ck, m, err, errlen)) != 0) pmt_model_free(m);
    pmt_checkpoint_free(&ck);
    return rc;
}

int pmt_eval_forced_split(const char *model_path, const char *data_dir, const char *split,
                          pmt_eval_forced_result *res, char *err, size_t errlen) {
    if (!pmt_eval_split_name_ok(split)) {
        snprintf(err, errlen, "unknown split '%s' (train | valid | test)", split ? split : "");
        return -1;
    }
    char path[PMT_PATH_MAX + 32], inner[768];
    snprintf(path, sizeof path, "%s/%s.tok", data_dir, split);
    pmt_corpus c;
    if (pmt_corpus_load(&c, path, err, errlen) != 0) return -1;
    pmt_model m;
    int rc = load_for_batches(model_path, &m, err, errlen);
    if (rc == 0) {
        rc = pmt_eval_forced(&m, &c, m.cfg.batch_tokens, res, inner, sizeof inner);
        if (rc != 0) snprintf(err, errlen, "%s: %s", path, inner);
        pmt_model_free(&m);
    }
    pmt_corpus_free(&c);
    return rc;
}

void pmt_eval_hyps_free(char **hyps, size_t n) {
    if (!hyps) return;
    for (size_t i = 0; i < n; i++) free(hyps[i]);
    free(hyps);
}

/* pmt_best_fn keeping a copy of each best hypothesis in hyps[i]. */
static int keep_hypothesis(void *user, size_t i, const char *best, char *err, size_t errlen) {
    char **hyps = user;
    hyps[i] = strdup(best);
    if (!hyps[i]) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int pmt_eval_translate_lines(pmt_translator *t, const char *const *src, size_t n, char ***hyps,
                             char *err, size_t errlen) {
    *hyps = calloc(n ? n : 1, sizeof **hyps);
    if (!*hyps) {
        snprintf(err, errlen, "out of memory for %zu translations", n);
        return -1;
    }
    if (pmt_translator_translate_all(t, src, n, keep_hypothesis, *hyps, err, errlen) != 0) {
        pmt_eval_hyps_free(*hyps, n);
        *hyps = NULL;
        return -1;
    }
    return 0;
}
