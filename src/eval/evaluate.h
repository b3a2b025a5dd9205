/*
 * evaluate.h — how good a trained model is: teacher-forced loss, perplexity
 * and token accuracy on a prepared split, and BLEU/chrF of its translations.
 *
 * Teacher-forced numbers are computed exactly as training's validation
 * computes them (batches in length order, no dropout), so `projmt eval
 * --split valid` on best.ckpt reproduces the valid row it was saved at.
 *
 * Ownership: pmt_eval_forced_result is a plain value; the hypotheses of
 * pmt_eval_translate_lines are the caller's (pmt_eval_hyps_free).
 */
#ifndef PROJMT_EVALUATE_H
#define PROJMT_EVALUATE_H

#include <stddef.h>
#include <stdio.h>

#include "data/corpus.h"
#include "eval/metrics.h"
#include "model/model.h"
#include "translate/translator.h"

/* Teacher-forced scores of one corpus. */
typedef struct pmt_eval_forced_result {
    int pairs;                   /* sentence pairs scored */
    int truncated;               /* pairs cut to the model's max_len */
    long tokens;                 /* non-pad target tokens (eos included) */
    double loss;                 /* label-smoothed cross-entropy per token (training's loss) */
    double nll;                  /* plain negative log-likelihood per token */
    double perplexity;           /* exp(nll) */
    double accuracy;             /* argmax == reference, fraction of tokens */
    size_t params;               /* parameters of the model scored */
    /* Training FLOPs (pmt_model_train_flops) per non-pad source + target
     * token over these batches: the cost of the architecture on this data. */
    double train_flops_per_token;
} pmt_eval_forced_result;

/* Scores corpus c with model m, in batches of at most batch_tokens tokens
 * (m's arena must hold them: max_rows >= batch_tokens). 0, or -1 with err. */
int pmt_eval_forced(pmt_model *m, const pmt_corpus *c, int batch_tokens, pmt_eval_forced_result *res,
                    char *err, size_t errlen);

/* Loads the checkpoint model_path and data_dir/<split>.tok (split: train,
 * valid or test) and scores it in the batches training used (the stored
 * batch_tokens and max_len); 0, or -1 with err naming the file. */
int pmt_eval_forced_split(const char *model_path, const char *data_dir, const char *split,
                          pmt_eval_forced_result *res, char *err, size_t errlen);

/* 1 if split names a prepared split (train | valid | test). */
int pmt_eval_split_name_ok(const char *split);

/* Translates src[0..n) with t (in chunks of t->max_batch), keeping the best
 * hypothesis of each in *hyps (malloc'd array of malloc'd strings, caller
 * frees with pmt_eval_hyps_free). 0, or -1 with err. */
int pmt_eval_translate_lines(pmt_translator *t, const char *const *src, size_t n, char ***hyps,
                             char *err, size_t errlen);
void pmt_eval_hyps_free(char **hyps, size_t n);

#endif
