/*
 * bench_decode.h — decoding speed: sentences/s and output tokens/s of greedy
 * and beam-4 batched search over a fixed set of source sentences.
 *
 * Sources: the first n lines of a text file (e.g. data/spa-eng/test.en)
 * encoded with the given SentencePiece model, or — when either is missing —
 * n synthetic sentences of 3..14 random ids (about the length distribution
 * of the spa-eng English side), deterministic.
 *
 * A randomly initialised model rarely emits EOS, so it decodes to the output
 * limit; a trained one stops near the source length. Each search therefore
 * runs twice: "capped" with the output limit of a typical trained model
 * (1.1 × source + 2 tokens) and "limits" with the model config's
 * max_length_factor / max_length_const. Report both.
 *
 * Ownership: the report is a plain value; nothing returned needs freeing.
 */
#ifndef PROJMT_BENCH_DECODE_H
#define PROJMT_BENCH_DECODE_H

#include <stdio.h>

#include "core/config.h"
#include "model/model.h"
#include "data/spm.h"

enum { PMT_BENCH_DECODE_RUNS = 4 };

typedef struct pmt_bench_decode_run {
    char label[32];          /* e.g. "beam 4, capped" */
    int beam, capped;
    long out_tokens;         /* output tokens, EOS excluded */
    double seconds;          /* wall time of the searches (encoder included) */
    double sentences_per_s, tokens_per_s;
    double src_words_per_s;  /* whitespace-separated words of the source lines per second
                                (synthetic sources: their ids, as words) */
} pmt_bench_decode_run;

typedef struct pmt_bench_decode_report {
    char source[PMT_PATH_MAX + 64];   /* where the sentences came from */
    int sentences, batch;
    const char *weights;     /* what the decoder multiplies by: "fp32" | "bf16" | "int8" (--compute-type) */
    int shortlist;           /* candidates per source piece of the vocabulary shortlist (0: none) */
    long src_tokens;
    long src_words;          /* whitespace-separated words of the source lines */
    pmt_bench_decode_run run[PMT_BENCH_DECODE_RUNS];
} pmt_bench_decode_report;

/* Decodes n_sentences (batch per search call) with greedy and beam-4 search,
 * capped and with the config limits, over the whole vocabulary (shortlist
 * 0) or the model's shortlist with that many candidates per source piece. spm and src_text may be NULL (synthetic
 * sources). m's encoder arena must hold at least one max_len sentence.
 * Returns 0, or -1 with err. */
int pmt_bench_decode(pmt_model *m, const pmt_spm *spm, const char *src_text, int n_sentences, int batch,
                     int shortlist, pmt_bench_decode_report *rep, char *err, size_t errlen);

/* One line per run, titled (e.g. "standard"). */
void pmt_bench_decode_print(FILE *out, const char *title, const pmt_bench_decode_report *rep);

#endif
