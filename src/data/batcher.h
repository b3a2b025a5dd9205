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
 * Why blocks (issue 44): sorting every pair at start-up costs time and
 * per-pair arrays that grow with the corpus (at 10M pairs seconds and
 * ~300 MB). A training corpus of more than block_pairs pairs is therefore
 * cut into blocks: block k holds pairs k, k + n_blocks, k + 2 n_blocks, ...
 * (strided, so each block samples the whole file: every source, every
 * part), and each block is sorted and cut on its own, when it is first
 * needed. An epoch visits the blocks in an order drawn from (seed, epoch),
 * and each block's batches in an order drawn from (seed, epoch, block);
 * the position is still (epoch, batch index), the index counting through
 * the epoch's blocks in that order (reaching a later index cuts the blocks
 * before it once, so a resume mid-epoch costs a pass over those blocks'
 * lengths). Memory is one block's index arrays whatever the corpus size.
 * A corpus of at most block_pairs pairs — and every batcher without
 * shuffle (validation, evaluation) — is one block, cut at init: batches,
 * order and n_batches exactly as before blocks existed.
 *
 * With several blocks n_batches is exact only once every block has been cut
 * (n_batches_exact); before, it is an estimate from the blocks cut so far,
 * good for progress and ETA but not for finding the end of an epoch: that is
 * pmt_batcher_has_batch.
 *
 * Sentences longer than max_len - 1 ids are truncated (so S, T <= max_len);
 * n_truncated counts the pairs affected (of pairs_seen: every pair with one
 * block, the blocks cut so far with several) so the caller can say so.
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

/* Pairs per block of a shuffled batcher (batcher.h): the size of spa.txt's
 * training split fits in one, so its batches are those of earlier builds. */
enum { PMT_BATCHER_BLOCK_PAIRS = 1 << 17 };

typedef struct pmt_batcher {
    const pmt_corpus *corpus;    /* borrowed */
    int batch_tokens, max_len;
    uint64_t seed;
    int shuffle;                 /* 0: batches in length order every epoch (validation) */

    int n_batches;               /* batches per epoch (an estimate until n_batches_exact) */
    int n_batches_exact;
    int n_truncated;             /* pairs with a side longer than max_len - 1, of pairs_seen */
    int pairs_seen;
    int max_pairs;               /* largest B a batch can have (with blocks: batch_tokens / 2) */

    /* blocks (batcher.h); one block: the whole corpus, cut at init */
    int n_blocks;
    int *block_batches;          /* [n_blocks] batches of each block once cut, else -1 */
    int blocks_counted;
    long batches_counted;
    int *block_order;            /* [n_blocks] the blocks in the order of block_order_epoch */
    int block_order_epoch;
    long *epoch_start;           /* [n_blocks + 1] first index of the p-th block of that epoch, */
    int epoch_known;             /*   known for p <= epoch_known */

    /* the cut of the current block */
    int cur_block;               /* -1: none */
    int *order;                  /* [block pairs] pair indices in length-sorted order */
    int *batch_start;            /* [batches + 1] offsets into order */
    int *perm;                   /* [batches] batch order of (perm_epoch, cur_block) */
    int perm_epoch;              /* epoch perm was drawn for (-1: none yet) */
    void *sort_keys;             /* [block pairs] scratch: cutting a block never allocates */

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
/* pmt_batcher_init with another block size (block_pairs >= 1; tests). */
int pmt_batcher_init_blocks(pmt_batcher *b, const pmt_corpus *c, int batch_tokens, int max_len, uint64_t seed,
                            int shuffle, int block_pairs, char *err, size_t errlen);
void pmt_batcher_free(pmt_batcher *b);

/* 1 if epoch has a batch at position index (0-based), else 0: the end of
 * an epoch, exact with blocks too (cutting blocks as needed). */
int pmt_batcher_has_batch(pmt_batcher *b, int epoch, int index);
/* Which of the current block's cut batches comes at position index of
 * epoch (with one block: which batch of the whole cut). */
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
