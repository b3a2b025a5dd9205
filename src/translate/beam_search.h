/*
 * beam_search.h — greedy and batched beam search with length normalisation
 * and n-best lists over a pmt_decoder (translate/decoder.h), for up to
 * max_batch sentences at once; results come back in input order.
 *
 * Token conventions (data/vocab.h): source ids are given WITHOUT the trailing
 * EOS (the search appends it); hypotheses are returned without BOS/EOS.
 *
 * Ownership: a pmt_search borrows its model and owns its decoders (one per
 * lane, see beam_search.c) and its result pool; the
 * pmt_nbest lists it fills point into that pool and stay valid until the next
 * pmt_search_run or pmt_search_free. Nothing allocates after init but a
 * lane: init makes the first; each further one (a decoder with its
 * low-precision weights, and an encoder arena) is made the first time a
 * sub-batch needs it, and kept until pmt_search_free (a run that cannot
 * make one fails with the message). Why: one sentence needs one lane, and
 * a batch of 64 at beam 4 eight.
 */
#ifndef PROJMT_BEAM_SEARCH_H
#define PROJMT_BEAM_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "model/model.h"
#include "translate/decoder.h"

typedef struct pmt_decode_options {
    int beam_size;               /* 1 = greedy */
    int n_best;                  /* hypotheses returned per sentence, <= beam_size */
    double normalize;            /* α: hypotheses are ranked by logprob / len^α */
    double max_length_factor;    /* output limit = factor * source tokens + const, */
    int max_length_const;        /*   capped at m->max_len - 1 (tokens before EOS) */
    int compute_type;            /* pmt_compute_type: applied when a model is loaded (translator.h) */
    int shortlist;               /* 0: the whole vocabulary; k > 0: each batch's logits over its sources'
                                    first k shortlist candidates and the frequent pieces (the model must
                                    carry a shortlist: model/shortlist.h, translate/decoder.h) */
    /* Cancellation (NULL: never; pmt_decode_options_from_config sets NULL):
     * asked before each sub-batch and once per search step of every lane,
     * from the lanes' threads (several at once: it must be thread-safe);
     * non-zero stops the search, which fails with PMT_SEARCH_STOPPED. */
    int (*should_stop)(void *ctx);
    void *should_stop_ctx;
} pmt_decode_options;

/* What pmt_search_run returns when should_stop stopped it (other failures: -1). */
enum { PMT_SEARCH_STOPPED = -2 };

/* Copies the translation keys of cfg (beam_size, n_best, normalize, max_length_*, compute_type, shortlist). */
void pmt_decode_options_from_config(pmt_decode_options *o, const pmt_config *cfg);

typedef struct pmt_hypothesis {
    const int32_t *ids;          /* output tokens without BOS/EOS (search pool) */
    int len;                     /* number of ids */
    double logprob;              /* sum of token log-probs, EOS included */
    double score;                /* logprob / (len + 1)^α — the ranking key */
} pmt_hypothesis;

typedef struct pmt_nbest {
    int n;                       /* hypotheses, best first (1..n_best) */
    const pmt_hypothesis *hyp;   /* [n] (search pool) */
} pmt_nbest;

typedef struct pmt_search_stats {
    long steps;                  /* decoder steps run */
    long row_steps;              /* hypothesis rows computed, summed over steps */
} pmt_search_stats;

typedef struct pmt_search {
    pmt_model *m;                /* borrowed */
    int max_batch, max_beam;
    void *pool;                  /* search state and result storage (beam_search.c) */
    pmt_search_stats stats;      /* accumulated over runs */
} pmt_search;

/* Allocates a search for up to max_batch sentences per run and beams up to
 * max_beam. Returns 0, or -1 with err. */
int pmt_search_init(pmt_search *s, pmt_model *m, int max_batch, int max_beam, char *err, size_t errlen);
void pmt_search_free(pmt_search *s);

/* Translates n <= max_batch sentences, src[i] of src_len[i] ids (no EOS,
 * src_len[i] <= m->max_len - 1), into out[i] (input order). Sentences are
 * sorted by length and decoded in sub-batches that fit the model's encoder
 * arena. Returns 0, PMT_SEARCH_STOPPED (opt->should_stop), or -1 with err
 * (bad options or sizes, a failed product or kernel, out of memory). */
int pmt_search_run(pmt_search *s, const pmt_decode_options *opt, const int32_t *const *src,
                   const int *src_len, int n, pmt_nbest *out, char *err, size_t errlen);

/* Whether m can decode with opt's shortlist (0: always). 0, or -1 with err. */
int pmt_search_check_shortlist(const pmt_model *m, const pmt_decode_options *opt, char *err, size_t errlen);

/* The output length limit (tokens before EOS) for a source of src_len ids. */
int pmt_search_max_output(const pmt_model *m, const pmt_decode_options *opt, int src_len);

#endif
