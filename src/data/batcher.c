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

static int sort_pairs(pmt_batcher *b) {
    const pmt_corpus *c = b->corpus;
    sort_key *keys = malloc((size_t)c->n_pairs * sizeof *keys);
    if (!keys) return -1;
    pmt_rng rng = {pmt_splitmix64(b->seed ^ 0x6261746368657231ULL)};
    for (int i = 0; i < c->n_pairs; i++) {
        int ls = pmt_corpus_src_len(c, i), lt = pmt_corpus_tgt_len(c, i);
        if (ls > b->max_len - 1 || lt > b->max_len - 1) b->n_truncated++;
        ls = clipped(ls, b->max_len);
        lt = clipped(lt, b->max_len);
        keys[i] = (sort_key){ls > lt ? ls : lt, ls + lt, pmt_rng_next(&rng), i};
    }
    qsort(keys, (size_t)c->n_pairs, sizeof *keys, compare_keys);
    for (int i = 0; i < c->n_pairs; i++) b->order[i] = keys[i].index;
    free(keys);
    return 0;
}

/* Greedy cut of the sorted pairs: a batch grows while B*(S+T) stays within
 * the budget. Called twice: to count (starts == NULL), then to record. */
static int cut_batches(pmt_batcher *b, int *starts) {
    const pmt_corpus *c = b->corpus;
    int n = 0, pairs = 0, S = 0, T = 0;
    b->max_pairs = 0;
    for (int k = 0; k < c->n_pairs; k++) {
        int i = b->order[k];
        int s = clipped(pmt_corpus_src_len(c, i), b->max_len) + 1;
        int t = clipped(pmt_corpus_tgt_len(c, i), b->max_len) + 1;
        int ns = s > S ? s : S, nt = t > T ? t : T;
        if (pairs > 0 && (long)(pairs + 1) * (ns + nt) > b->batch_tokens) {
            if (pairs > b->max_pairs) b->max_pairs = pairs;
            pairs = 0;
            ns = s;
            nt = t;
        }
        if (pairs == 0) {
            if (starts) starts[n] = k;
            n++;
        }
        pairs++;
        S = ns;
        T = nt;
    }
    if (pairs > b->max_pairs) b->max_pairs = pairs;
    if (starts) starts[n] = c->n_pairs;
    return n;
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

int pmt_batcher_init(pmt_batcher *b, const pmt_corpus *c, int batch_tokens, int max_len,
                     uint64_t seed, int shuffle, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    b->perm_epoch = -1;
    if (c->n_pairs < 1) {
        snprintf(err, errlen, "batcher: the corpus has no sentence pairs");
        return -1;
    }
    if (max_len < 2 || batch_tokens < 2 * max_len) {
        snprintf(err, errlen, "batcher: batch_tokens (%d) must be at least 2 * max_len (%d)", batch_tokens, max_len);
        return -1;
    }
    b->corpus = c;
    b->batch_tokens = batch_tokens;
    b->max_len = max_len;
    b->seed = seed;
    b->shuffle = shuffle;
    b->order = malloc((size_t)c->n_pairs * sizeof *b->order);
    if (!b->order || sort_pairs(b) != 0) goto oom;
    b->n_batches = cut_batches(b, NULL);
    b->batch_start = malloc((size_t)(b->n_batches + 1) * sizeof *b->batch_start);
    b->perm = malloc((size_t)b->n_batches * sizeof *b->perm);
    if (!b->batch_start || !b->perm) goto oom;
    cut_batches(b, b->batch_start);
    if (alloc_batch(b) != 0) goto oom;
    return 0;
oom:
    snprintf(err, errlen, "batcher: out of memory for %d pairs", c->n_pairs);
    pmt_batcher_free(b);
    return -1;
}

void pmt_batcher_free(pmt_batcher *b) {
    free(b->order);
    free(b->batch_start);
    free(b->perm);
    free(b->batch.src);
    free(b->batch.tgt_in);
    free(b->batch.tgt_out);
    free(b->batch.src_len);
    free(b->batch.tgt_len);
    memset(b, 0, sizeof *b);
}

/* Fisher–Yates over the batch ids, seeded by (seed, epoch) only. */
static void draw_permutation(pmt_batcher *b, int epoch) {
    for (int i = 0; i < b->n_batches; i++) b->perm[i] = i;
    if (b->shuffle) {
        pmt_rng rng = {pmt_splitmix64(b->seed ^ pmt_splitmix64(0x65706f6368ULL + (uint64_t)epoch))};
        for (int i = b->n_batches - 1; i > 0; i--) {
            int j = (int)pmt_rng_below(&rng, (uint64_t)i + 1);
            int t = b->perm[i];
            b->perm[i] = b->perm[j];
            b->perm[j] = t;
        }
    }
    b->perm_epoch = epoch;
}

int pmt_batcher_batch_id(pmt_batcher *b, int epoch, int index) {
    if (b->perm_epoch != epoch) draw_permutation(b, epoch);
    return b->perm[index];
}

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
