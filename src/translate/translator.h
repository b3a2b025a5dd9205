/*
 * translator.h — text in, text out: SentencePiece encoding, input checks,
 * batched search (beam_search.h) and decoding back to text.
 *
 * Input policy (each case is noted in its result and reported to the
 * translator's warn function when one is set; never an abort): invalid UTF-8 bytes are replaced by U+FFFD; a sentence with more
 * than max_len − 1 source tokens is truncated to that many; an empty (or
 * all-whitespace) line translates to an empty line without running the model.
 *
 * Ownership: pmt_translator owns its model, tokenizer, search and scratch
 * (pmt_translator_free releases all). The pmt_translation results of
 * pmt_translator_translate point into translator storage and stay valid until
 * the next translate call or free.
 */
#ifndef PROJMT_TRANSLATOR_H
#define PROJMT_TRANSLATOR_H

#include <stdio.h>

#include "translate/beam_search.h"
#include "model/model.h"
#include "data/spm.h"

typedef struct pmt_translation {
    int n;                       /* hypotheses, best first (0 for an empty input) */
    char **text;                 /* [n] detokenized UTF-8 */
    const pmt_hypothesis *hyp;   /* [n] ids and scores */
    int replaced_bytes;          /* invalid UTF-8 bytes of the input read as U+FFFD */
    int source_tokens;           /* the input's pieces before any cut */
    int cut;                     /* 1: more pieces than the model takes; only the first max_len - 1 were translated */
} pmt_translation;

typedef struct pmt_translator_totals {
    long sentences, src_tokens, out_tokens;
    double seconds;              /* wall time inside pmt_translator_translate */
} pmt_translator_totals;

/* Where a translator reports what it repaired in an input line (invalid
 * bytes, a cut): the line's number and a message without a newline. */
typedef void (*pmt_translator_warn_fn)(void *ctx, int line, const char *message);

/* A pmt_translator_warn_fn writing "projmt translate: warning: line N: ..."
 * to ctx, a FILE * (the programs' choice; the library itself never prints). */
void pmt_translator_warn_file(void *file, int line, const char *message);

typedef struct pmt_translator {
    pmt_model model;
    pmt_spm *spm;
    pmt_search search;
    pmt_decode_options opt;
    int max_batch;               /* sentences per translate call */
    pmt_translator_warn_fn warn; /* input repairs (NULL, the default: silent; results carry them too) */
    void *warn_ctx;              /* warn's first argument */
    pmt_translator_totals totals;

    /* scratch sized at init / on demand between calls */
    int32_t *ids;                /* [max_batch * max_len] source ids */
    int *lens;                   /* [max_batch] */
    const int32_t **ptrs;        /* [max_batch] */
    int *slot;                   /* [max_batch] input index of each non-empty sentence */
    pmt_nbest *nbest;            /* [max_batch] */
    pmt_translation *results;    /* [max_batch] results of pmt_translator_translate_all's calls */
    char **texts;                /* [max_batch * beam] decoded strings */
    int n_texts;
    char *clean;                 /* UTF-8-sanitized line */
    size_t clean_cap;
    /* pmt_translator_translate_sentences's joined results, freed by the next call */
    char **joined;               /* [n_joined] */
    int n_joined;
    pmt_hypothesis *joined_hyp;  /* [lines * beam] */
} pmt_translator;

/* What pmt_translator_load returns when this CPU cannot run the asked
 * compute type (bf16 without native bf16). */
enum { PMT_TRANSLATOR_UNSUPPORTED = -3 };

/* Loads a checkpoint (model, config, tokenizer) and prepares for up to
 * max_batch sentences per call with the options opt (beam, n-best, ...).
 * Missing, truncated or foreign files give -1 with a message naming the
 * file; PMT_OUT_OF_MEMORY (model/model.h) and PMT_TRANSLATOR_UNSUPPORTED
 * say so. */
int pmt_translator_load(pmt_translator *t, const char *model_path, const pmt_decode_options *opt, int max_batch,
                        char *err, size_t errlen);

/* Same over an already built model and tokenizer, whose ownership passes to
 * the translator (also on failure). -1 (a shortlist the model lacks) or
 * PMT_OUT_OF_MEMORY. */
int pmt_translator_init(pmt_translator *t, pmt_model *model, pmt_spm *spm, const pmt_decode_options *opt,
                        int max_batch, char *err, size_t errlen);
void pmt_translator_free(pmt_translator *t);

/* Changes the search options (e.g. the prompt's :beam / :nbest); re-sizes the
 * search when the beam grows. 0, or -1 with err (options unchanged). */
int pmt_translator_set_options(pmt_translator *t, const pmt_decode_options *opt, char *err, size_t errlen);

/* Translates lines[0..n) (n <= max_batch, NUL-terminated, no newline) into
 * out[0..n), in input order. 0, PMT_SEARCH_STOPPED (the options'
 * should_stop), or -1 with err. */
int pmt_translator_translate(pmt_translator *t, const char *const *lines, int n, pmt_translation *out,
                             char *err, size_t errlen);

/* pmt_translator_translate with each line cut into sentences first
 * (translate/segment.h), all of them translated together and each line's
 * joined again with one space: hypothesis k of a line is hypothesis k of
 * each of its sentences (its best when it has fewer), and its logprob,
 * score and length are their sums. A joined hypothesis has no one token
 * sequence (hyp.ids is NULL): what aligns uses pmt_translator_translate.
 * Any n (sentences go to the model max_batch at a time); the results stay
 * valid until the next translate call or free. 0, or -1 with err. */
int pmt_translator_translate_sentences(pmt_translator *t, const char *const *lines, int n, pmt_translation *out,
                                       char *err, size_t errlen);

/* Receives the best hypothesis of line i ("" for an empty line), valid
 * during the call only; returns 0 to go on, or -1 with err to stop. */
typedef int (*pmt_best_fn)(void *user, size_t i, const char *best, char *err, size_t errlen);

/* Translates lines[0..n), any n, in calls of at most max_batch lines and
 * hands each line's best hypothesis to each(user, ...) in input order (the
 * loop of `projmt eval` and of validation BLEU). 0, or -1 with err. */
int pmt_translator_translate_all(pmt_translator *t, const char *const *lines, size_t n, pmt_best_fn each,
                                 void *user, char *err, size_t errlen);

#endif
