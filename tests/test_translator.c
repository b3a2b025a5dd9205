/*
 * test_translator.c — text in, text out over a real checkpoint file: a tiny
 * SentencePiece model trained here and a tiny random Transformer, saved with
 * pmt_checkpoint_save and loaded back with pmt_translator_load.
 *
 * Checks: one result per input in order; empty input -> no hypothesis;
 * invalid UTF-8 replaced with a warning and valid UTF-8 out; over-long input
 * truncated with a warning; batch == one-by-one; n-best sizes; options
 * change (beam growth); the chunked translate-all loop; loader errors;
 * pmt_utf8_sanitize cases.
 *
 * `test_translator --make-checkpoint PATH` only writes the checkpoint (used by
 * tests/test_translate_cli.sh).
 */
#include <stdlib.h>
#include <string.h>

#include "model/checkpoint.h"
#include "model/model_file.h"
#include "core/utf8.h"
#include "testutil.h"
#include "translate/translator.h"

static const char *const corpus_lines[] = {
    "the cat sleeps on the sofa", "el gato duerme en el sofá", "I like green tea", "me gusta el té verde",
    "where is the station", "dónde está la estación", "we are going home now", "ahora vamos a casa",
    "the children play in the garden", "los niños juegan en el jardín", "she reads a book", "ella lee un libro",
};

/* Trains a tiny tokenizer and saves a random tiny model with it. 0 or -1. */
static int make_checkpoint(const char *path) {
    char dir[4096], text[4096 + 32], prefix[4096 + 32], model_file[4096 + 64], err[512];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("translator"));
    snprintf(text, sizeof text, "%s/corpus.txt", dir);
    snprintf(prefix, sizeof prefix, "%s/spm", dir);
    snprintf(model_file, sizeof model_file, "%s.model", prefix);
    FILE *f = fopen(text, "w");
    if (!f) return -1;
    for (int rep = 0; rep < 20; rep++)
        for (size_t i = 0; i < sizeof corpus_lines / sizeof *corpus_lines; i++) fprintf(f, "%s\n", corpus_lines[i]);
    fclose(f);
    if (test_train_spm(text, prefix, 80) != 0) return -1;
    pmt_spm *spm = pmt_spm_load_file(model_file, err, sizeof err);
    if (!spm) {
        fprintf(stderr, "spm load: %s\n", err);
        return -1;
    }
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    cfg.d_model = 16;
    cfg.n_heads = 2;
    cfg.d_ff = 32;
    cfg.enc_layers = 1;
    cfg.dec_layers = 1;
    cfg.max_len = 12;
    cfg.batch_tokens = 64;
    cfg.site_kind[PMT_SITE_DEC_CROSS] = PMT_ATTN_PROJECTION;
    pmt_model m;
    int rc = -1;
    if (pmt_model_init(&m, &cfg, pmt_spm_vocab_size(spm), 64, cfg.max_len, err, sizeof err) == 0) {
        pmt_model_init_params(&m, 17);
        size_t size;
        const void *bytes = pmt_spm_serialized(spm, &size);
        rc = pmt_checkpoint_save(path, &m, bytes, size, NULL, NULL, NULL, err, sizeof err);
        pmt_model_free(&m);
    }
    if (rc != 0) fprintf(stderr, "checkpoint: %s\n", err);
    pmt_spm_free(spm);
    return rc;
}

static void test_sanitize(void) {
    char out[64];
    CHECK(pmt_utf8_sanitize("a\xC3\xB1o", 4, out) == 0 && !strcmp(out, "a\xC3\xB1o"));
    CHECK(pmt_utf8_sanitize("\xC0\xAF", 2, out) == 2 && !strcmp(out, "\xEF\xBF\xBD\xEF\xBF\xBD"));    /* overlong */
    CHECK(pmt_utf8_sanitize("\xED\xA0\x80", 3, out) == 3);                                             /* surrogate */
    CHECK(pmt_utf8_sanitize("x\xE2\x82", 3, out) == 2 && !strncmp(out, "x\xEF\xBF\xBD", 4));            /* cut */
    CHECK(pmt_utf8_sanitize("\xF4\x90\x80\x80", 4, out) == 4);                                         /* > U+10FFFF */
    CHECK(pmt_utf8_sanitize("\xF0\x9F\x98\x80!", 5, out) == 0 && !strcmp(out, "\xF0\x9F\x98\x80!"));    /* emoji */
}

static int read_all(FILE *f, char *buf, size_t cap) {
    rewind(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    return (int)n;
}

/* pmt_best_fn collecting hypotheses; stops with an error at line stop_at. */
typedef struct {
    char text[16][512];
    size_t seen;
    size_t stop_at;
} collected;

static int collect(void *user, size_t i, const char *best, char *err, size_t errlen) {
    collected *c = user;
    if (i != c->seen || i >= 16) return -1;   /* must come in input order */
    if (i == c->stop_at) {
        snprintf(err, errlen, "stopped at %zu", i);
        return -1;
    }
    snprintf(c->text[i], sizeof c->text[i], "%s", best);
    c->seen++;
    return 0;
}

static void test_translate(const char *path) {
    char err[512];
    pmt_decode_options opt = {2, 2, 1.0, 1.5, 3, PMT_COMPUTE_AUTO, 0, NULL, NULL};
    pmt_translator t;
    CHECK_MSG(pmt_translator_load(&t, path, &opt, 6, err, sizeof err) == 0, "%s", err);
    if (!t.spm) return;
    FILE *warn = tmpfile();
    t.warn = pmt_translator_warn_file;
    t.warn_ctx = warn;
    char long_line[2048] = "";
    for (int i = 0; i < 60; i++) strcat(long_line, "the children play ");
    const char *lines[5] = {"the cat sleeps", "", "where \xFF\xFE is the station", long_line, "she reads"};
    pmt_translation res[5];
    CHECK_MSG(pmt_translator_translate(&t, lines, 5, res, err, sizeof err) == 0, "%s", err);
    char log[4096];
    read_all(warn, log, sizeof log);
    CHECK_MSG(strstr(log, "line 3: 2 invalid UTF-8 byte(s) replaced by U+FFFD") != NULL, "warnings: %s", log);
    CHECK_MSG(strstr(log, "line 4:") && strstr(log, "truncated to the model's limit of 11"), "warnings: %s", log);
    CHECK(res[1].n == 0);
    /* What was repaired is in each result too (this tiny vocabulary cuts
     * even short lines at 11 pieces: only the long line's cut is certain). */
    CHECK_MSG(res[2].replaced_bytes == 2 && res[3].cut && res[3].source_tokens > 11 && res[0].replaced_bytes == 0 &&
                  res[3].replaced_bytes == 0,
              "%d %d %d", res[2].replaced_bytes, res[3].cut, res[3].source_tokens);
    for (int i = 0; i < 5; i++) {
        if (i == 1) continue;
        CHECK(res[i].n == 2);
        for (int k = 0; k < res[i].n; k++) {
            CHECK(res[i].text[k] != NULL);
            CHECK(!strchr(res[i].text[k], '\n'));
            char clean[1024];
            size_t len = strlen(res[i].text[k]);
            CHECK(len < 300 && pmt_utf8_sanitize(res[i].text[k], len, clean) == 0);
        }
        CHECK(res[i].hyp[0].score >= res[i].hyp[1].score);
    }
    CHECK(t.totals.sentences == 5 && t.totals.src_tokens > 11);

    /* one by one == batched (copy the batched texts first: results are
     * valid only until the next call) */
    char saved[5][512];
    for (int i = 0; i < 5; i++) snprintf(saved[i], sizeof saved[i], "%s", res[i].n ? res[i].text[0] : "");
    for (int i = 0; i < 5; i++) {
        pmt_translation one;
        CHECK(pmt_translator_translate(&t, &lines[i], 1, &one, err, sizeof err) == 0);
        CHECK_MSG(!strcmp(one.n ? one.text[0] : "", saved[i]), "line %d: '%s' alone vs '%s' batched", i + 1,
                  one.n ? one.text[0] : "", saved[i]);
    }

    /* The chunked loop: 8 lines through max_batch 6 come back in order, each
     * as its own call gives it; a failing callback stops the loop. */
    const char *cycled[8];
    for (int i = 0; i < 8; i++) cycled[i] = lines[i % 5];
    collected c = {.stop_at = 99};
    CHECK_MSG(pmt_translator_translate_all(&t, cycled, 8, collect, &c, err, sizeof err) == 0, "%s", err);
    CHECK(c.seen == 8);
    for (int i = 0; i < 8; i++)
        CHECK_MSG(!strcmp(c.text[i], saved[i % 5]), "line %d: '%s' in the loop vs '%s'", i + 1, c.text[i], saved[i % 5]);
    collected stop = {.stop_at = 6};
    CHECK(pmt_translator_translate_all(&t, cycled, 8, collect, &stop, err, sizeof err) == -1);
    CHECK(stop.seen == 6 && strstr(err, "stopped at 6") != NULL);

    /* growing the beam re-sizes the search; bad n-best is refused */
    pmt_decode_options wide = {5, 3, 1.0, 1.5, 3, PMT_COMPUTE_AUTO, 0, NULL, NULL};
    CHECK(pmt_translator_set_options(&t, &wide, err, sizeof err) == 0);
    CHECK(pmt_translator_translate(&t, lines, 5, res, err, sizeof err) == 0 && res[0].n == 3 && res[1].n == 0);
    pmt_decode_options bad = {2, 3, 1.0, 1.5, 3, PMT_COMPUTE_AUTO, 0, NULL, NULL};
    CHECK(pmt_translator_set_options(&t, &bad, err, sizeof err) == -1 && strstr(err, "n-best"));
    CHECK(pmt_translator_translate(&t, lines, 7, res, err, sizeof err) == -1 && strstr(err, "batch size"));
    fclose(warn);
    pmt_translator_free(&t);
}

/* Translates lines with the model at path: the texts and scores of every
 * hypothesis, concatenated, into out. */
static void translate_to(const char *path, const char *const *lines, int n, char *out, size_t cap) {
    char err[512];
    pmt_decode_options opt = {3, 2, 1.0, 1.5, 3, PMT_COMPUTE_AUTO, 0, NULL, NULL};
    pmt_translator t;
    out[0] = '\0';
    CHECK_MSG(pmt_translator_load(&t, path, &opt, n, err, sizeof err) == 0, "%s: %s", path, err);
    if (!t.spm) return;
    pmt_translation res[8];
    CHECK_MSG(pmt_translator_translate(&t, lines, n, res, err, sizeof err) == 0, "%s", err);
    size_t used = 0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < res[i].n; k++)
            used += (size_t)snprintf(out + used, cap - used, "%s|%.9g\n", res[i].text[k], res[i].hyp[k].score);
    pmt_translator_free(&t);
}

/* An exported fp32 file translates exactly as its checkpoint; bf16 and int8
 * files load and translate every line. */
static void test_exported(const char *ckpt, const char *dir) {
    static const char *const lines[] = {"the cat", "she reads", "we go", "the tea"};
    static char want[8192], got[8192];
    char out[4096 + 32], err[512];
    translate_to(ckpt, lines, 4, want, sizeof want);
    CHECK(strlen(want) > 8);
    pmt_checkpoint ck;
    CHECK_MSG(pmt_checkpoint_load(&ck, ckpt, err, sizeof err) == 0, "%s", err);
    static const pmt_weight_type types[] = {PMT_WEIGHTS_FP32, PMT_WEIGHTS_BF16, PMT_WEIGHTS_INT8};
    for (int k = 0; k < 3; k++) {
        snprintf(out, sizeof out, "%s/tiny.%s", dir, pmt_weight_type_name(types[k]));
        CHECK_MSG(pmt_model_file_export(out, &ck, types[k], 0, err, sizeof err) == 0, "%s", err);
        translate_to(out, lines, 4, got, sizeof got);
        if (types[k] == PMT_WEIGHTS_FP32) CHECK_MSG(!strcmp(want, got), "checkpoint:\n%s\nexported:\n%s", want, got);
        int rows = 0;
        for (const char *p = got; *p; p++) rows += *p == '\n';
        CHECK_MSG(rows == 8, "%s: %d hypotheses", pmt_weight_type_name(types[k]), rows);
    }
    pmt_checkpoint_free(&ck);
}

static void test_load_errors(const char *dir) {
    char err[512], path[4096 + 32];
    pmt_decode_options opt = {1, 1, 1.0, 1.5, 3, PMT_COMPUTE_AUTO, 0, NULL, NULL};
    pmt_translator t;
    snprintf(path, sizeof path, "%s/missing.ckpt", dir);
    CHECK(pmt_translator_load(&t, path, &opt, 1, err, sizeof err) == -1 && strstr(err, "missing.ckpt"));
    snprintf(path, sizeof path, "%s/garbage.ckpt", dir);
    test_write_file(path, "this is not a checkpoint\n");
    CHECK(pmt_translator_load(&t, path, &opt, 1, err, sizeof err) == -1 && strstr(err, "garbage.ckpt"));
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--make-checkpoint")) return make_checkpoint(argv[2]) == 0 ? 0 : 1;
    test_sanitize();
    char dir[4096], path[4096 + 32];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("translator-ckpt"));
    snprintf(path, sizeof path, "%s/tiny.ckpt", dir);
    CHECK(make_checkpoint(path) == 0);
    test_translate(path);
    test_exported(path, dir);
    test_load_errors(dir);
    return test_finish();
}
