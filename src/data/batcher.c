/*
 * batcher.c — see batcher.h. Sorting and cutting happen once at init; an
 * epoch only draws a permutation of the batch ids, so a data position
 * (epoch, index) is cheap to reach again after a resume.
 */
#include "data/batcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

/* Sort key of one pair: longer side first, then total, then a seeded random
 * draw, then the index (so the order is total and qsort's instability moot). */
typedef struct {
    int longer, total;
    uint64_t draw;
    int index;
} sort_key;

static int compare_keys(const void *pa, const void *pb) {
    const sort_key *a = pa, *b = pb;
    if (a->longer != b->longer) return a->longer < b->longer ? -1 : 1;
    if (a->total != b->total) return a->total < b->total ? -1 : 1;
    if (a->draw != b->draw) return a->draw < b->draw ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Ids of a side after truncation to max_len - 1 (room for bos/eos). */
static int clipped(int len, int max_len) { return len < max_len - 1 ? len : max_len - 1; }

/* Pairs in block k: k, k + n_blocks, ... below n_pairs. */
static int block_size(const pmt_batcher *b, int k) {
    return (b->corpus->n_pairs - k + b->n_blocks - 1) / b->n_blocks;
}

/* Sorts block k's pairs into b->order (its draws from (seed, k); with one
 * block the generator of the builds before blocks). Counts truncated pairs
 * the first time (count). */
static void sort_block(pmt_batcher *b, int k, int count) {
    const pmt_corpus *c = b->corpus;
    int n = block_size(b, k);
    sort_key *keys = b->sort_keys;
    uint64_t stream = b->n_blocks == 1 ? 0 : pmt_splitmix64(0x626c6f636bULL + (uint64_t)k);
    pmt_rng rng = {pmt_splitmix64(b->seed ^ 0x6261746368657231ULL ^ stream)};
    for (int j = 0; j < n; j++) {
        int i = k + j * b->n_blocks;
        int ls = pmt_corpus_src_len(c, i), lt = pmt_corpus_tgt_len(c, i);
        if (count && (ls > b->max_len - 1 || lt > b->max_len - 1)) b->n_truncated++;
        ls = clipped(ls, b->max_len);
        lt = clipped(lt, b->max_len);
        keys[j] = (sort_key){ls > lt ? ls : lt, ls + lt, pmt_rng_next(&rng), i};
    }
    qsort(keys, (size_t)n, sizeof *keys, compare_keys);
    for (int j = 0; j < n; j++) b->order[j] = keys[j].index;
}

/* Greedy cut of the n sorted pairs of b->order: a batch grows while
 * B*(S+T) stays within the budget. Returns the number of batches and
 * records their starts (and the end) in starts; the largest B in *max_pairs. */
static int cut_batches(pmt_batcher *b, int n_pairs, int *starts, int *max_pairs) {
    const pmt_corpus *c = b->corpus;
    int n = 0, pairs = 0, S = 0, T = 0;
    *max_pairs = 0;
    for (int k = 0; k < n_pairs; k++) {
        int i = b->order[k];
        int s = clipped(pmt_corpus_src_len(c, i), b->max_len) + 1;
        int t = clipped(pmt_corpus_tgt_len(c, i), b->max_len) + 1;
        int ns = s > S ? s : S, nt = t > T ? t : T;
        if (pairs > 0 && (long)(pairs + 1) * (ns + nt) > b->batch_tokens) {
            if (pairs > *max_pairs) *max_pairs = pairs;
            pairs = 0;
            ns = s;
            nt = t;
        }
        if (pairs == 0) starts[n++] = k;
        pairs++;
        S = ns;
        T = nt;
    }
    if (pairs > *max_pairs) *max_pairs = pairs;
    starts[n] = n_pairs;
    return n;
}

/* Makes block k the current one: sorted and cut (counted the first time,
 * which updates the estimate of n_batches). */
static void use_block(pmt_batcher *b, int k) {
    if (b->cur_block == k) return;
    int first = b->block_batches[k] < 0;
    sort_block(b, k, first);
    int max_pairs, n = cut_batches(b, block_size(b, k), b->batch_start, &max_pairs);
    /* a strided block read lengths from every page of the offset tables */
    if (b->n_blocks > 1) pmt_corpus_release_pages(b->corpus);
    b->cur_block = k;
    b->perm_epoch = -1;
    if (first) {
        b->block_batches[k] = n;
        b->blocks_counted++;
        b->batches_counted += n;
        b->pairs_seen += block_size(b, k);
        b->n_batches_exact = b->blocks_counted == b->n_blocks;
        b->n_batches = (int)(b->n_batches_exact ? b->batches_counted
                                                : (b->batches_counted * b->n_blocks + b->blocks_counted / 2) /
                                                      b->blocks_counted);
    }
}

static int alloc_batch(pmt_batcher *b) {
    pmt_batch *x = &b->batch;
    size_t cells = (size_t)b->batch_tokens;
    x->src = malloc(cells * sizeof(int32_t));
    x->tgt_in = malloc(cells * sizeof(int32_t));
    x->tgt_out = malloc(cells * sizeof(int32_t));
    x->src_len = malloc((size_t)b->max_pairs * sizeof(int32_t));
    x->tgt_len = malloc((size_t)b->max_pairs * sizeof(int32_t));
    return (x->src && x->tgt_in && x->tgt_out && x->src_len && x->tgt_len) ? 0 : -1;
}

int pmt_batcher_init_blocks(pmt_batcher *b, const pmt_corpus *c, int batch_tokens, int max_len, uint64_t seed,
                            int shuffle, int block_pairs, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    b->perm_epoch = b->block_order_epoch = b->cur_block = -1;
    if (c->n_pairs < 1) {
        snprintf(err, errlen, "batcher: the corpus has no sentence pairs");
        return -1;
    }
    if (max_len < 2 || batch_tokens < 2 * max_len) {
        snprintf(err, errlen, "batcher: batch_tokens (%d) must be at least 2 * max_len (%d)", batch_tokens, max_len);
        return -1;
    }
    if (block_pairs < 1) {
        snprintf(err, errlen, "batcher: block_pairs (%d) must be at least 1", block_pairs);
        return -1;
    }
    b->corpus = c;
    b->batch_tokens = batch_tokens;
    b->max_len = max_len;
    b->seed = seed;
    b->shuffle = shuffle;
    b->n_blocks = shuffle && c->n_pairs > block_pairs ? (c->n_pairs + block_pairs - 1) / block_pairs : 1;
    int biggest = block_size(b, 0);
    b->order = malloc((size_t)biggest * sizeof *b->order);
    b->batch_start = malloc(((size_t)biggest + 1) * sizeof *b->batch_start);
    b->perm = malloc((size_t)biggest * sizeof *b->perm);
    b->block_batches = malloc((size_t)b->n_blocks * sizeof *b->block_batches);
    b->block_order = malloc((size_t)b->n_blocks * sizeof *b->block_order);
    b->epoch_start = malloc(((size_t)b->n_blocks + 1) * sizeof *b->epoch_start);
    b->sort_keys = malloc((size_t)biggest * sizeof(sort_key));
    if (!b->order || !b->batch_start || !b->perm || !b->block_batches || !b->block_order || !b->epoch_start ||
        !b->sort_keys)
        goto oom;
    for (int k = 0; k < b->n_blocks; k++) b->block_batches[k] = -1;
    /* Block 0 is cut now: with one block that is everything (and the
     * largest batch is known); with several, the first estimate. */
    use_block(b, 0);
    if (b->n_blocks == 1) {
        int max_pairs;
        cut_batches(b, c->n_pairs, b->batch_start, &max_pairs);
        b->max_pairs = max_pairs;
    } else {
        b->max_pairs = batch_tokens / 2;   /* a pair is at least 2 tokens with its eos and bos */
    }
    if (alloc_batch(b) != 0) goto oom;
    return 0;
oom:
    snprintf(err, errlen, "batcher: out of memory for %d pairs", c->n_pairs);
    pmt_batcher_free(b);
    return -1;
}

int pmt_batcher_init(pmt_batcher *b, const pmt_corpus *c, int batch_tokens, int max_len,
                     uint64_t seed, int shuffle, char *err, size_t errlen) {
    return pmt_batcher_init_blocks(b, c, batch_tokens, max_len, seed, shuffle, PMT_BATCHER_BLOCK_PAIRS, err, errlen);
}

void pmt_batcher_free(pmt_batcher *b) {
    free(b->order);
    free(b->batch_start);
    free(b->perm);
    free(b->block_batches);
    free(b->block_order);
    free(b->epoch_start);
    free(b->sort_keys);
    free(b->batch.src);
    free(b->batch.tgt_in);
    free(b->batch.tgt_out);
    free(b->batch.src_len);
    free(b->batch.tgt_len);
    memset(b, 0, sizeof *b);
}

/* Fisher–Yates of ids[0..n) from rng. */
static void shuffle_ids(int *ids, int n, pmt_rng *rng) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)pmt_rng_below(rng, (uint64_t)i + 1);
        int t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
}

/* The current block's batch order for epoch: seeded by (seed, epoch) only
 * with one block (as before blocks), by (seed, epoch, block) with several. */
static void draw_permutation(pmt_batcher *b, int epoch) {
    int n = b->block_batches[b->cur_block];
    for (int i = 0; i < n; i++) b->perm[i] = i;
    if (b->shuffle) {
        uint64_t block = b->n_blocks == 1 ? 0 : pmt_splitmix64(0x626c6f636bULL + (uint64_t)b->cur_block);
        pmt_rng rng = {pmt_splitmix64(b->seed ^ pmt_splitmix64(0x65706f6368ULL + (uint64_t)epoch) ^ block)};
        shuffle_ids(b->perm, n, &rng);
    }
    b->perm_epoch = epoch;
}

/* The order of the blocks in epoch (a new epoch forgets where its blocks start). */
static void draw_block_order(pmt_batcher *b, int epoch) {
    if (b->block_order_epoch == epoch) return;
    for (int k = 0; k < b->n_blocks; k++) b->block_order[k] = k;
    if (b->shuffle && b->n_blocks > 1) {
        pmt_rng rng = {pmt_splitmix64(b->seed ^ pmt_splitmix64(0x626c6f636b73ULL + (uint64_t)epoch))};
        shuffle_ids(b->block_order, b->n_blocks, &rng);
    }
    b->block_order_epoch = epoch;
    b->epoch_start[0] = 0;
    b->epoch_known = 0;
}

/* Finds the block and the position in it of batch index of epoch: the
 * block made current, its permutation drawn, the local position in *local.
 * 0, or 1 when the epoch has no such batch. */
/* Learns where the blocks of epoch start, up to the one holding index
 * (cutting blocks never cut before, to count them); 1 if the epoch has a
 * batch at index. */
static int extend_epoch(pmt_batcher *b, int epoch, int index) {
    draw_block_order(b, epoch);
    while (b->epoch_known < b->n_blocks && b->epoch_start[b->epoch_known] <= index) {
        int k = b->block_order[b->epoch_known];
        if (b->block_batches[k] < 0) use_block(b, k);
        b->epoch_start[b->epoch_known + 1] = b->epoch_start[b->epoch_known] + b->block_batches[k];
        b->epoch_known++;
    }
    return index >= 0 && index < b->epoch_start[b->epoch_known];
}

static int locate(pmt_batcher *b, int epoch, int index, int *local) {
    if (!extend_epoch(b, epoch, index)) return 1;
    int p = b->epoch_known - 1;
    while (b->epoch_start[p] > index) p--;
    use_block(b, b->block_order[p]);
    if (b->perm_epoch != epoch) draw_permutation(b, epoch);
    *local = (int)(index - b->epoch_start[p]);
    return 0;
}

/* locate, for callers that were promised a batch (pmt_batcher_has_batch):
 * asking past the end of an epoch is a bug in the caller, stopped here
 * rather than read out of bounds. */
static int locate_batch(pmt_batcher *b, int epoch, int index) {
    int local = 0;
    if (locate(b, epoch, index, &local) != 0) {
        fprintf(stderr, "batcher: epoch %d has no batch %d (a caller bug)\n", epoch, index);
        abort();
    }
    return b->perm[local];
}

int pmt_batcher_has_batch(pmt_batcher *b, int epoch, int index) { return extend_epoch(b, epoch, index); }

int pmt_batcher_batch_id(pmt_batcher *b, int epoch, int index) { return locate_batch(b, epoch, index); }

int pmt_batcher_target_tokens(pmt_batcher *b, int epoch, int index) {
    int id = pmt_batcher_batch_id(b, epoch, index), tokens = 0;
    for (int k = b->batch_start[id]; k < b->batch_start[id + 1]; k++)
        tokens += clipped(pmt_corpus_tgt_len(b->corpus, b->order[k]), b->max_len) + 1;
    return tokens;
}

/* Writes one padded row: ids (at most n), then the optional suffix id, then pad. */
static void write_row(int32_t *row, int width, int32_t prefix, const int32_t *ids, int n, int32_t suffix) {
    int j = 0;
    if (prefix != PMT_PAD_ID) row[j++] = prefix;
    for (int k = 0; k < n; k++) row[j++] = ids[k];
    if (suffix != PMT_PAD_ID) row[j++] = suffix;
    while (j < width) row[j++] = PMT_PAD_ID;
}

/* The vocabulary check of batcher.h on n filled ids of pair i. */
static void check_row(pmt_batcher *b, int i, int32_t *ids, int n) {
    for (int k = 0; k < n; k++)
        if (ids[k] < 0 || ids[k] >= b->vocab_size) {
            if (b->bad_ids++ == 0) {
                b->first_bad_id = ids[k];
                b->first_bad_pair = i;
            }
            ids[k] = PMT_UNK_ID;
        }
}

const pmt_batch *pmt_batcher_fill(pmt_batcher *b, int epoch, int index) {
    return pmt_batcher_fill_part(b, epoch, index, 0, 1);
}

const pmt_batch *pmt_batcher_fill_part(pmt_batcher *b, int epoch, int index, int part, int parts) {
    const pmt_corpus *c = b->corpus;
    int id = pmt_batcher_batch_id(b, epoch, index);
    int n = b->batch_start[id + 1] - b->batch_start[id] - part;
    int first = b->batch_start[id] + part, B = n > 0 ? (n + parts - 1) / parts : 0, S = 0, T = 0;
    for (int r = 0; r < B; r++) {
        int i = b->order[first + r * parts];
        int s = clipped(pmt_corpus_src_len(c, i), b->max_len), t = clipped(pmt_corpus_tgt_len(c, i), b->max_len);
        if (s + 1 > S) S = s + 1;
        if (t + 1 > T) T = t + 1;
    }
    pmt_batch *x = &b->batch;
    x->B = B;
    x->S = S;
    x->T = T;
    for (int r = 0; r < B; r++) {
        int i = b->order[first + r * parts];
        int s = clipped(pmt_corpus_src_len(c, i), b->max_len), t = clipped(pmt_corpus_tgt_len(c, i), b->max_len);
        const int32_t *src = c->src_ids + c->src_off[i], *tgt = c->tgt_ids + c->tgt_off[i];
        write_row(x->src + (size_t)r * S, S, PMT_PAD_ID, src, s, PMT_EOS_ID);
        write_row(x->tgt_in + (size_t)r * T, T, PMT_BOS_ID, tgt, t, PMT_PAD_ID);
        write_row(x->tgt_out + (size_t)r * T, T, PMT_PAD_ID, tgt, t, PMT_EOS_ID);
        if (b->vocab_size > 0) {
            check_row(b, i, x->src + (size_t)r * S, s);
            check_row(b, i, x->tgt_in + (size_t)r * T + 1, t);
            check_row(b, i, x->tgt_out + (size_t)r * T, t);
        }
        x->src_len[r] = s + 1;
        x->tgt_len[r] = t + 1;
    }
    return x;
}
