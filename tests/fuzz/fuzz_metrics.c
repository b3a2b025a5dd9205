/*
 * fuzz_metrics.c — the BLEU (13a) and chrF tokenizers and scorers on
 * arbitrary bytes. The input is "hypothesis\nreference" (no newline: the
 * reference is empty).
 *
 * Properties: tok13a never crashes and returns text with no leading,
 * trailing or double spaces; BLEU and chrF of any pair are finite and in
 * [0, 100]; a sentence scored against itself gets 100 BLEU when it has at
 * least 4 tokens.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/metrics.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

static void check_tok13a(const char *line) {
    char *tok = pmt_tok13a(line);
    if (!tok) abort();
    size_t n = strlen(tok);
    if (n > 0 && (tok[0] == ' ' || tok[n - 1] == ' ')) abort();
    if (strstr(tok, "  ")) abort();
    free(tok);
}

static void check_range(double score) {
    if (!isfinite(score) || score < 0 || score > 100.0 + 1e-9) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = '\0';
    char *newline = memchr(text, '\n', size);
    const char *hyp = text, *ref = "";
    if (newline) {
        *newline = '\0';
        ref = newline + 1;
    }
    check_tok13a(hyp);
    check_tok13a(ref);

    pmt_bleu_stats bleu;
    pmt_bleu_stats_init(&bleu);
    pmt_chrf_stats chrf;
    pmt_chrf_stats_init(&chrf);
    if (pmt_bleu_stats_add(&bleu, hyp, ref) != 0 || pmt_chrf_stats_add(&chrf, hyp, ref) != 0) abort();
    check_range(pmt_bleu_compute(&bleu).score);
    check_range(pmt_chrf_compute(&chrf));
    check_range(pmt_bleu_sentence(hyp, ref));

    pmt_bleu_stats self;
    pmt_bleu_stats_init(&self);
    if (pmt_bleu_stats_add(&self, hyp, hyp) != 0) abort();
    pmt_bleu_score s = pmt_bleu_compute(&self);
    if (self.hyp_len >= 4 && fabs(s.score - 100.0) > 1e-6) abort();
    free(text);
    return 0;
}
