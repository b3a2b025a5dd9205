/*
 * valid_bleu.c — see valid_bleu.h.
 */
#include "train/valid_bleu.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "data/spm.h"

/* Sentences per translate call: large enough that length-sorted sub-batches
 * keep the GEMMs busy, small enough that the decoder's caches
 * ([batch, max_len, d_model] per layer) stay a few MB. */
enum { VALID_BATCH = 64 };
/* Encoder arena of the copy, in source tokens per encoder call (as the
 * translator's own: whole sub-batches of short sentences). */
enum { VALID_ENCODER_ROWS = 1024 };

static int wants_scores(const pmt_config *cfg) {
    return !strcmp(cfg->early_stopping_metric, "bleu") || !strcmp(cfg->early_stopping_metric, "chrf");
}

/* Disabled: fine unless early stopping needs the scores (then why is an error). */
static int disable(const pmt_config *cfg, const char *why, FILE *notes, char *err, size_t errlen) {
    if (wants_scores(cfg)) {
        snprintf(err, errlen, "early_stopping_metric = %s needs validation BLEU/chrF, but %s",
                 cfg->early_stopping_metric, why);
        return -1;
    }
    if (notes) fprintf(notes, "note: validation BLEU/chrF off: %s\n", why);
    return 0;
}

/* Loads valid.en / valid.es into v->src / v->ref; 1 if a file is missing. */
static int load_text(pmt_valid_bleu *v, const pmt_config *cfg, char *missing, size_t missing_len, char *err,
                     size_t errlen) {
    char path[2][PMT_PATH_MAX + 16];
    snprintf(path[0], sizeof path[0], "%s/valid.en", cfg->data_dir);
    snprintf(path[1], sizeof path[1], "%s/valid.es", cfg->data_dir);
    for (int k = 0; k < 2; k++)
        if (access(path[k], F_OK) != 0) {
            snprintf(missing, missing_len, "'%s' does not exist (run `projmt prepare --data-dir %s`)", path[k],
                     cfg->data_dir);
            return 1;
        }
    if (pmt_text_lines_load(&v->src, path[0], err, errlen) != 0 ||
        pmt_text_lines_load(&v->ref, path[1], err, errlen) != 0)
        return -1;
    if (v->src.n != v->ref.n) {
        snprintf(err, errlen, "'%s' has %zu lines but '%s' has %zu: they must be aligned (re-run `projmt prepare "
                 "--data-dir %s`)", path[0], v->src.n, path[1], v->ref.n, cfg->data_dir);
        return -1;
    }
    return 0;
}

/* The translator over a freshly allocated model of cfg's architecture. */
static int build_translator(pmt_valid_bleu *v, const pmt_config *cfg, char *err, size_t errlen) {
    char path[PMT_PATH_MAX + 16], inner[512];
    snprintf(path, sizeof path, "%s/spm.model", cfg->data_dir);
    pmt_spm *spm = pmt_spm_load_file(path, err, errlen);
    if (!spm) return -1;
    pmt_config mc = *cfg;
    mc.vocab_size = pmt_spm_vocab_size(spm);
    pmt_model model;
    if (pmt_model_init(&model, &mc, mc.vocab_size, VALID_ENCODER_ROWS, cfg->max_len, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "validation BLEU/chrF: %s", inner);
        pmt_spm_free(spm);
        return -1;
    }
    pmt_decode_options opt;
    pmt_decode_options_from_config(&opt, cfg);
    opt.beam_size = opt.n_best = 1;
    opt.shortlist = 0;   /* a model in training has none; validation is exact */
    int batch = v->n < VALID_BATCH ? v->n : VALID_BATCH;
    if (pmt_translator_init(&v->tr, &model, spm, &opt, batch, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "validation BLEU/chrF: %s", inner);
        return -1;
    }
    return 0;
}

int pmt_valid_bleu_init(pmt_valid_bleu *v, const pmt_config *cfg, FILE *notes, char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    if (cfg->valid_bleu_sentences <= 0) return disable(cfg, "valid_bleu_sentences is 0", notes, err, errlen);
    char missing[PMT_PATH_MAX * 2 + 96];
    int rc = load_text(v, cfg, missing, sizeof missing, err, errlen);
    if (rc != 0) return rc < 0 ? -1 : disable(cfg, missing, notes, err, errlen);
    if (v->src.n == 0) {
        snprintf(missing, sizeof missing, "'%s/valid.en' is empty", cfg->data_dir);
        return disable(cfg, missing, notes, err, errlen);
    }
    v->n = v->src.n < (size_t)cfg->valid_bleu_sentences ? (int)v->src.n : cfg->valid_bleu_sentences;
    if (build_translator(v, cfg, err, errlen) != 0) return -1;
    /* Input warnings (truncation, bad UTF-8) repeat identically at every
     * validation: show them on the first one only. */
    v->tr.warn = notes ? pmt_translator_warn_file : NULL;
    v->tr.warn_ctx = notes;
    v->enabled = 1;
    if (notes)
        fprintf(notes, "validation BLEU/chrF: greedy translation of the first %d of %zu sentences of "
                "%s/valid.{en,es}\n", v->n, v->src.n, cfg->data_dir);
    return 0;
}

void pmt_valid_bleu_free(pmt_valid_bleu *v) {
    pmt_translator_free(&v->tr);
    pmt_text_lines_free(&v->src);
    pmt_text_lines_free(&v->ref);
    memset(v, 0, sizeof *v);
}

/* What scoring one hypothesis needs: the references and the running sums. */
typedef struct {
    const pmt_text_lines *ref;
    pmt_bleu_stats bleu;
    pmt_chrf_stats chrf;
} valid_sums;

/* pmt_best_fn adding hypothesis i against reference i to the sums. */
static int add_hypothesis(void *user, size_t i, const char *best, char *err, size_t errlen) {
    valid_sums *sums = user;
    const char *ref = sums->ref->lines[i];
    if (pmt_bleu_stats_add(&sums->bleu, best, ref) != 0 || pmt_chrf_stats_add(&sums->chrf, best, ref) != 0) {
        snprintf(err, errlen, "out of memory scoring validation sentence %zu", i + 1);
        return -1;
    }
    return 0;
}

int pmt_valid_bleu_score(pmt_valid_bleu *v, const pmt_model *m, double *bleu, double *chrf, char *err,
                         size_t errlen) {
    if (!v->enabled) {
        snprintf(err, errlen, "validation BLEU/chrF is not set up");
        return -1;
    }
    pmt_model *copy = &v->tr.model;
    if (m->n_params != copy->n_params || m->V != copy->V) {
        snprintf(err, errlen, "the training model (%zu parameters, vocab %d) is not the architecture validation "
                 "was set up for (%zu, vocab %d)", m->n_params, m->V, copy->n_params, copy->V);
        return -1;
    }
    const double start = pmt_now_seconds();
    memcpy(copy->params, m->params, m->n_params * sizeof *m->params);
    valid_sums sums = {.ref = &v->ref};
    pmt_bleu_stats_init(&sums.bleu);
    pmt_chrf_stats_init(&sums.chrf);
    const char *const *src = (const char *const *)v->src.lines;
    if (pmt_translator_translate_all(&v->tr, src, (size_t)v->n, add_hypothesis, &sums, err, errlen) != 0) return -1;
    v->tr.warn = NULL;
    *bleu = pmt_bleu_compute(&sums.bleu).score;
    *chrf = pmt_chrf_compute(&sums.chrf);
    v->seconds = pmt_now_seconds() - start;
    return 0;
}

int pmt_valid_bleu_hook(void *user, pmt_model *m, double *bleu, double *chrf, char *err, size_t errlen) {
    return pmt_valid_bleu_score(user, m, bleu, chrf, err, errlen);
}
