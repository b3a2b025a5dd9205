/*
 * test_valid_bleu.c — validation BLEU/chrF (valid_bleu.h) over a data
 * directory made here: a tiny SentencePiece model and valid.{en,es}.
 *
 * Checks: the scores equal those of a separate greedy translator over the
 * same parameters scored with pmt_metrics_score_lines, across several
 * translate calls (more lines than one batch) and an empty line; scoring is
 * repeatable and follows the parameters it is given; only the first
 * valid_bleu_sentences lines count; valid_bleu_sentences = 0 and missing
 * files disable it with a note, or fail naming the setting / file when
 * early_stopping_metric is bleu or chrf; misaligned files and a different
 * architecture are refused.
 */
#include <stdlib.h>
#include <string.h>

#include "eval/metrics.h"
#include "testutil.h"
#include "translate/translator.h"
#include "train/valid_bleu.h"

static const char *const pairs[][2] = {
    {"the cat sleeps on the sofa", "el gato duerme en el sofá"}, {"I like green tea", "me gusta el té verde"},
    {"where is the station", "dónde está la estación"}, {"we are going home now", "ahora vamos a casa"},
    {"the children play in the garden", "los niños juegan en el jardín"}, {"she reads a book", "ella lee un libro"},
};
enum { N_PAIRS = sizeof pairs / sizeof *pairs, N_LINES = 150, SAMPLE = 140 };

static char data_dir[PMT_PATH_MAX];

/* Line i of valid.en / valid.es: the pairs over and over, line 3 empty. */
static const char *line_of(int i, int side) { return i == 2 ? "" : pairs[i % N_PAIRS][side]; }

static void write_lines(const char *name, int n, int side) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", data_dir, name);
    FILE *f = fopen(path, "w");
    for (int i = 0; f && i < n; i++) fprintf(f, "%s\n", line_of(i, side));
    if (f) fclose(f);
}

/* spm.model and valid.{en,es} in a fresh data_dir; 0 or -1. */
static int make_data_dir(void) {
    char text[4200], prefix[4200];
    snprintf(data_dir, sizeof data_dir, "%s", test_tmpdir("valid-bleu"));
    snprintf(text, sizeof text, "%s/corpus.txt", data_dir);
    snprintf(prefix, sizeof prefix, "%s/spm", data_dir);
    FILE *f = fopen(text, "w");
    if (!f) return -1;
    for (int rep = 0; rep < 20; rep++)
        for (int i = 0; i < N_PAIRS; i++) fprintf(f, "%s\n%s\n", pairs[i][0], pairs[i][1]);
    fclose(f);
    if (test_train_spm(text, prefix, 80) != 0) return -1;
    write_lines("valid.en", N_LINES, 0);
    write_lines("valid.es", N_LINES, 1);
    return 0;
}

static void tiny_config(pmt_config *cfg) {
    pmt_config_defaults(cfg);
    snprintf(cfg->data_dir, sizeof cfg->data_dir, "%s", data_dir);
    cfg->d_model = 16;
    cfg->n_heads = 2;
    cfg->d_ff = 32;
    cfg->enc_layers = 1;
    cfg->dec_layers = 1;
    cfg->max_len = 12;
    cfg->site_kind[PMT_SITE_DEC_SELF] = PMT_ATTN_PROJECTION;
    cfg->valid_bleu_sentences = SAMPLE;
}

static pmt_spm *load_spm(void) {
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/spm.model", data_dir);
    pmt_spm *spm = pmt_spm_load_file(path, err, sizeof err);
    CHECK_MSG(spm != NULL, "%s", err);
    return spm;
}

/* A "training" model of cfg with parameters from seed. */
static int make_model(pmt_model *m, const pmt_config *cfg, int V, uint64_t seed) {
    char err[512];
    int rc = pmt_model_init(m, cfg, V, 64, cfg->max_len, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    if (rc == 0) pmt_model_init_params(m, seed);
    return rc;
}

/* What `projmt translate --beam-size 1` + `projmt eval` compute: a separate
 * greedy translator over a copy of m, all SAMPLE lines in one call. */
static void reference_scores(const pmt_config *cfg, const pmt_model *m, double *bleu, double *chrf) {
    char err[512];
    pmt_model copy;
    if (make_model(&copy, cfg, m->V, 0) != 0) return;
    memcpy(copy.params, m->params, m->n_params * sizeof *m->params);
    pmt_decode_options opt;
    pmt_decode_options_from_config(&opt, cfg);
    opt.beam_size = opt.n_best = 1;
    pmt_translator t;
    CHECK_MSG(pmt_translator_init(&t, &copy, load_spm(), &opt, SAMPLE, err, sizeof err) == 0, "%s", err);
    t.warn = NULL;
    const char *src[SAMPLE], *ref[SAMPLE], *hyp[SAMPLE];
    pmt_translation out[SAMPLE];
    for (int i = 0; i < SAMPLE; i++) src[i] = line_of(i, 0), ref[i] = line_of(i, 1);
    CHECK_MSG(pmt_translator_translate(&t, src, SAMPLE, out, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < SAMPLE; i++) hyp[i] = out[i].n ? out[i].text[0] : "";
    CHECK(out[2].n == 0);
    pmt_metrics_report report;
    CHECK_MSG(pmt_metrics_score_lines(hyp, ref, SAMPLE, PMT_METRIC_ALL, &report, err, sizeof err) == 0, "%s", err);
    *bleu = report.bleu.score;
    *chrf = report.chrf;
    pmt_translator_free(&t);
}

static void test_scores_match_translate_and_eval(void) {
    pmt_config cfg;
    tiny_config(&cfg);
    char err[512];
    pmt_valid_bleu v;
    FILE *notes = tmpfile();
    CHECK_MSG(pmt_valid_bleu_init(&v, &cfg, notes, err, sizeof err) == 0, "%s", err);
    CHECK(v.enabled && v.n == SAMPLE && v.tr.max_batch < SAMPLE);   /* several translate calls */
    pmt_model m;
    if (!v.enabled || make_model(&m, &cfg, v.tr.model.V, 7) != 0) {
        pmt_valid_bleu_free(&v);
        return;
    }
    double bleu = -1, chrf = -1, bleu2 = -1, chrf2 = -1, want_bleu = -2, want_chrf = -2;
    CHECK_MSG(pmt_valid_bleu_score(&v, &m, &bleu, &chrf, err, sizeof err) == 0, "%s", err);
    reference_scores(&cfg, &m, &want_bleu, &want_chrf);
    CHECK_NEAR(bleu, want_bleu, 0.0);
    CHECK_NEAR(chrf, want_chrf, 0.0);
    CHECK(bleu >= 0 && bleu <= 100 && chrf > 0 && chrf <= 100);
    CHECK(v.seconds > 0);

    CHECK(pmt_valid_bleu_score(&v, &m, &bleu2, &chrf2, err, sizeof err) == 0);
    CHECK_NEAR(bleu2, bleu, 0.0);
    CHECK_NEAR(chrf2, chrf, 0.0);

    /* other parameters, other translations: the copy follows the model */
    pmt_model_init_params(&m, 8);
    CHECK(pmt_valid_bleu_score(&v, &m, &bleu2, &chrf2, err, sizeof err) == 0);
    reference_scores(&cfg, &m, &want_bleu, &want_chrf);
    CHECK_NEAR(bleu2, want_bleu, 0.0);
    CHECK_NEAR(chrf2, want_chrf, 0.0);
    CHECK(chrf2 != chrf);
    pmt_model_free(&m);

    /* a model of another architecture is refused */
    pmt_config other = cfg;
    other.d_ff = 48;
    if (make_model(&m, &other, v.tr.model.V, 7) == 0) {
        CHECK(pmt_valid_bleu_score(&v, &m, &bleu2, &chrf2, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, "architecture") != NULL, "%s", err);
        pmt_model_free(&m);
    }
    char log[1024] = "";
    rewind(notes);
    log[fread(log, 1, sizeof log - 1, notes)] = '\0';
    CHECK_MSG(strstr(log, "first 140 of 150 sentences") != NULL, "notes: %s", log);
    fclose(notes);
    pmt_valid_bleu_free(&v);
}

/* init with cfg; returns its status, the note it wrote and err. */
static int init_status(const pmt_config *cfg, int *enabled, char *note, size_t notelen, char *err, size_t errlen) {
    pmt_valid_bleu v;
    FILE *notes = tmpfile();
    err[0] = '\0';
    int rc = pmt_valid_bleu_init(&v, cfg, notes, err, errlen);
    *enabled = v.enabled;
    rewind(notes);
    note[fread(note, 1, notelen - 1, notes)] = '\0';
    fclose(notes);
    pmt_valid_bleu_free(&v);
    return rc;
}

static void test_disabled_and_errors(void) {
    pmt_config cfg;
    tiny_config(&cfg);
    char err[512], note[1024], path[4200], away[4200];
    int enabled;

    cfg.valid_bleu_sentences = 0;
    CHECK(init_status(&cfg, &enabled, note, sizeof note, err, sizeof err) == 0 && !enabled);
    CHECK_MSG(strstr(note, "valid_bleu_sentences is 0") != NULL, "%s", note);
    snprintf(cfg.early_stopping_metric, sizeof cfg.early_stopping_metric, "bleu");
    CHECK(init_status(&cfg, &enabled, note, sizeof note, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "early_stopping_metric = bleu") && strstr(err, "valid_bleu_sentences"), "%s", err);

    tiny_config(&cfg);
    snprintf(path, sizeof path, "%s/valid.es", data_dir);
    snprintf(away, sizeof away, "%s/valid.es.away", data_dir);
    CHECK(rename(path, away) == 0);
    CHECK(init_status(&cfg, &enabled, note, sizeof note, err, sizeof err) == 0 && !enabled);
    CHECK_MSG(strstr(note, path) && strstr(note, "does not exist"), "%s", note);
    snprintf(cfg.early_stopping_metric, sizeof cfg.early_stopping_metric, "chrf");
    CHECK(init_status(&cfg, &enabled, note, sizeof note, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "early_stopping_metric = chrf") && strstr(err, path), "%s", err);
    CHECK(rename(away, path) == 0);

    tiny_config(&cfg);
    write_lines("valid.es", N_LINES - 1, 1);
    CHECK(init_status(&cfg, &enabled, note, sizeof note, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "150 lines") && strstr(err, "149") && strstr(err, "aligned"), "%s", err);
    write_lines("valid.es", N_LINES, 1);
}

int main(void) {
    if (make_data_dir() != 0) {
        CHECK(!"could not build the data directory");
        return test_finish();
    }
    test_scores_match_translate_and_eval();
    test_disabled_and_errors();
    return test_finish();
}
