/*
 * batcher.h — token-budgeted, length-bucketed batches over a pmt_corpus.
 *
 * Why this shape: padding is wasted work, so pairs are sorted by length
 * (a seeded random tie-break keeps equal-length pairs from always meeting in
 * the same order), then cut greedily into batches of at most batch_tokens
 * tokens counting padding (B*S + B*T <= batch_tokens, S = longest source + 1
 * for the appended eos, T = longest target + 1 for bos/eos). The cut is fixed
 * for a run; only the ORDER of the batches changes per epoch, as a pure
 * function of (seed, epoch). So the data position of a run is just
 * (epoch, batch index), which is what a checkpoint stores to resume exactly.
 *
 * Sentences longer than max_len - 1 ids are truncated (so S, T <= max_len);
 * n_truncated counts the pairs affected so the caller can say so once.
 * Every batch then fits a model arena of max_rows = batch_tokens and
 * max_len = max_len.
 *
 * Ownership: the batcher borrows the corpus (it must outlive the batcher) and
 * owns its index arrays and the one pmt_batch buffer set, sized at init;
 * pmt_batcher_fill never allocates. pmt_batcher_free releases them.
 */
#ifndef PROJMT_BATCHER_H
#define PROJMT_BATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "data/corpus.h"
#include "data/batch.h"

typedef struct pmt_batcher {
    const pmt_corpus *corpus;    /* borrowed */
    int batch_tokens, max_len;
    uint64_t seed;
    int shuffle;                 /* 0: batches in length order every epoch (validation) */

    int n_batches;
    int *order;                  /* [n_pairs] pair indices in length-sorted order */
    int *batch_start;            /* [n_batches + 1] offsets into order */
    int *perm;                   /* [n_batches] batch order of perm_epoch */
    int perm_epoch;              /* epoch perm was drawn for (-1: none yet) */
    int n_truncated;             /* pairs with a side longer than max_len - 1 */
    int max_pairs;               /* largest B of any batch */
    /* Set by the caller after init (0: off): the vocabulary every filled id
     * must be in. An id outside it (a damaged mapped file) is replaced by
     * unk in the batch and counted here, for the caller to stop on. */
    int vocab_size;
    long bad_ids;
    int32_t first_bad_id;
    int first_bad_pair;

    pmt_batch batch;             /* buffers below, filled by pmt_batcher_fill */
} pmt_batcher;

/* Builds the batches of corpus c. shuffle = 1 for training (per-epoch order
 * from seed), 0 for evaluation. Returns 0, or -1 with a message in err
 * (empty corpus, budget smaller than two max_len sentences, out of memory). */
int pmt_batcher_init(pmt_batcher *b, const pmt_corpus *c, int batch_tokens, int max_len,
                     uint64_t seed, int shuffle, char *err, size_t errlen);
void pmt_batcher_free(pmt_batcher *b);

/* Which of the cut batches comes at position index of epoch (0-based). */
int pmt_batcher_batch_id(pmt_batcher *b, int epoch, int index);
/* Target tokens (non-pad, eos included) of the batch at (epoch, index):
 * the loss denominator, known before running the model. */
int pmt_batcher_target_tokens(pmt_batcher *b, int epoch, int index);
/* Fills b->batch with the batch at (epoch, index) and returns it (owned by b,
 * valid until the next fill). */
const pmt_batch *pmt_batcher_fill(pmt_batcher *b, int epoch, int index);
/* Data-parallel training (dist.h): fills b->batch with part `part` of `parts`
 * of the batch at (epoch, index) — its pairs part, part + parts, ... in
 * length order, so every part gets long and short pairs alike — padded only
 * to that part's longest pair. B is 0 when the batch has fewer pairs than
 * parts. pmt_batcher_fill is part 0 of 1. */
const pmt_batch *pmt_batcher_fill_part(pmt_batcher *b, int epoch, int index, int part, int parts);

#endif
