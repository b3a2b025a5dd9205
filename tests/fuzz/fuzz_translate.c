/*
 * fuzz_translate.c — the translate input path: raw bytes → lines →
 * UTF-8 repair → SentencePiece pieces → beam search with a tiny random
 * model → detokenized text. The model and tokenizer are built once at start
 * (a 60-piece SentencePiece model trained on a few made-up sentences, a
 * 1+1-layer model of width 16 with projection attention in the decoder and
 * max_len 12, so truncation is reached often). The input is split at '\n'
 * into up to 4 lines translated as one batch; its first byte picks the beam
 * size (1..3) and n-best.
 *
 * Properties: one result per line; empty lines give no hypothesis; every
 * output is valid UTF-8 and no longer than the search allows; scores are
 * finite.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "core/utf8.h"
#include "testutil.h"
#include "translate/translator.h"

enum { MAX_LINES = 4, MAX_LEN = 12 };
static pmt_translator translator;

static const char *const made_up[] = {
    "the red kite flies over the quiet lake", "la cometa roja vuela sobre el lago tranquilo",
    "my neighbour bakes bread on sundays", "mi vecino hornea pan los domingos",
    "two owls argue about the moon", "dos búhos discuten sobre la luna",
    "¿dónde guardas las llaves? ¡aquí!", "where do you keep the keys? here!",
};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char text[512], prefix[512], model_file[600], err[512];
    const char *dir = test_tmpdir("fuzz-translate");
    snprintf(text, sizeof text, "%s/text.txt", dir);
    snprintf(prefix, sizeof prefix, "%s/spm", dir);
    snprintf(model_file, sizeof model_file, "%s.model", prefix);
    FILE *f = fopen(text, "w");
    if (!f) abort();
    for (int rep = 0; rep < 20; rep++)
        for (size_t i = 0; i < sizeof made_up / sizeof *made_up; i++) fprintf(f, "%s\n", made_up[i]);
    if (fclose(f) != 0 || test_train_spm(text, prefix, 60) != 0) abort();
    pmt_spm *spm = pmt_spm_load_file(model_file, err, sizeof err);
    if (!spm) abort();
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    cfg.d_model = 16;
    cfg.n_heads = 2;
    cfg.d_ff = 32;
    cfg.enc_layers = 1;
    cfg.dec_layers = 1;
    cfg.max_len = MAX_LEN;
    cfg.site_kind[PMT_SITE_DEC_SELF] = PMT_ATTN_PROJECTION;
    cfg.site_kind[PMT_SITE_DEC_CROSS] = PMT_ATTN_PROJECTION;
    cfg.sigma_learned = 1;
    cfg.beam_size = 3;
    cfg.n_best = 3;
    pmt_model m;
    if (pmt_model_init(&m, &cfg, pmt_spm_vocab_size(spm), MAX_LINES * 3 * MAX_LEN, MAX_LEN, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_translate: %s\n", err);
        abort();
    }
    pmt_model_init_params(&m, 5);
    pmt_decode_options opt;
    pmt_decode_options_from_config(&opt, &cfg);
    if (pmt_translator_init(&translator, &m, spm, &opt, MAX_LINES, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_translate: %s\n", err);
        abort();
    }
    translator.warn = NULL;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    pmt_decode_options opt = translator.opt;
    opt.beam_size = 1 + data[0] % 3;
    opt.n_best = 1 + (data[0] / 3) % opt.beam_size;
    char err[512];
    if (pmt_translator_set_options(&translator, &opt, err, sizeof err) != 0) abort();
    char *text = malloc(size);
    if (!text) abort();
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    /* A NUL inside the bytes ends that line early, as in a C string. */
    const char *lines[MAX_LINES];
    int n = 0;
    for (char *p = text; n < MAX_LINES && p;) {
        lines[n++] = p;
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        p = nl ? nl + 1 : NULL;
    }
    pmt_translation out[MAX_LINES];
    if (pmt_translator_translate(&translator, lines, n, out, err, sizeof err) != 0) abort();
    for (int i = 0; i < n; i++) {
        if (out[i].n < 0 || out[i].n > opt.n_best) abort();
        for (int k = 0; k < out[i].n; k++) {
            size_t len = strlen(out[i].text[k]);
            char *clean = malloc(3 * len + 1);
            if (!clean || pmt_utf8_sanitize(out[i].text[k], len, clean) != 0) abort();
            free(clean);
            if (out[i].hyp[k].len > MAX_LEN - 1 || !isfinite(out[i].hyp[k].score)) abort();
        }
    }
    free(text);
    return 0;
}
