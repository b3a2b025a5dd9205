/*
 * valid_bleu.h — BLEU and chrF during training: greedy translations of the
 * first valid_bleu_sentences lines of <data_dir>/valid.en scored against
 * <data_dir>/valid.es (sacreBLEU-exact, metrics.h). It is what
 * pmt_train_hooks.valid_metric calls at every validation.
 *
 * Everything is set up once, before training: the text is loaded and a
 * translator is built around a model of the training architecture with its
 * own parameters and arena. Each validation copies the training parameters
 * into it (n_params floats, negligible next to decoding) and translates.
 * Why a copy and not the training model itself: the translator owns its
 * model, and the training model's arena must stay the trainer's.
 *
 * Greedy (beam 1) because validation runs often and only needs to track
 * progress, as in Marian; `projmt translate --beam-size 1` on the same
 * parameters gives the same translations.
 *
 * Ownership: pmt_valid_bleu owns its translator (model, tokenizer) and text;
 * pmt_valid_bleu_free releases them (also after a failed init).
 */
#ifndef PROJMT_VALID_BLEU_H
#define PROJMT_VALID_BLEU_H

#include <stddef.h>
#include <stdio.h>

#include "core/config.h"
#include "eval/metrics.h"
#include "model/model.h"
#include "translate/translator.h"

typedef struct pmt_valid_bleu {
    int enabled;                 /* 0: valid_bleu_sentences = 0 or no valid.{en,es}: scores stay empty */
    int n;                       /* sentences scored per validation */
    pmt_text_lines src, ref;     /* valid.en, valid.es */
    pmt_translator tr;
    double seconds;              /* wall time of the last scoring */
} pmt_valid_bleu;

/* Prepares scoring for cfg (data_dir, valid_bleu_sentences, the model
 * architecture; vocabulary from data_dir/spm.model). Disabled, without an
 * error, when valid_bleu_sentences is 0 or valid.en / valid.es is missing —
 * unless early_stopping_metric is bleu or chrf, which needs the scores.
 * Notes what it will do on `notes` (NULL: silent). 0, or -1 with err
 * naming the file or the setting at fault. */
int pmt_valid_bleu_init(pmt_valid_bleu *v, const pmt_config *cfg, FILE *notes, char *err, size_t errlen);
void pmt_valid_bleu_free(pmt_valid_bleu *v);

/* Translates the sample greedily with the parameters of m (same
 * architecture as cfg at init; eval mode, no dropout) and fills *bleu and
 * *chrf (0..100). 0, or -1 with err. */
int pmt_valid_bleu_score(pmt_valid_bleu *v, const pmt_model *m, double *bleu, double *chrf, char *err,
                         size_t errlen);

/* pmt_train_hooks.valid_metric over the pmt_valid_bleu in user. */
int pmt_valid_bleu_hook(void *user, pmt_model *m, double *bleu, double *chrf, char *err, size_t errlen);

#endif
