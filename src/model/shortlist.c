/*
 * shortlist.c — IBM Model 1 over the prepared training split, and a batch's
 * output vocabulary (see shortlist.h).
 *
 * The table t(e|f) is sparse: only pairs that co-occur in some sentence
 * pair can get probability, ~1.4 M of the 64 M (f, e) pairs of spa-eng. So
 * the co-occurring pairs are collected once, sorted into rows by f, and
 * every sentence pair's (source position, target position) cell is mapped
 * to its table entry once; the EM passes then only read and add through
 * that index. One thread and sums in a fixed order, so the same corpus
 * always gives the same lists.
 */
#include "model/shortlist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"

void pmt_shortlist_free(pmt_shortlist *s) {
    if (!s) return;
    free(s->frequent);
    free(s->candidates);
    free(s);
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A candidate while a row is ranked: higher probability first, then lower id. */
typedef struct {
    double p;
    int32_t id;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Index of key in the sorted keys[0..n) (it is there by construction). */
static uint32_t find_key(const uint64_t *keys, size_t n, uint64_t key) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return (uint32_t)lo;
}

/* The model's arrays while it trains. */
typedef struct {
    uint64_t *keys;       /* [nnz] f·V' + e, sorted (V' = V + 1: f = V is NULL) */
    size_t nnz;
    uint32_t *cell;       /* per pair, (m + 1) · n table indices, source position major */
    size_t n_cells;
    double *t, *count, *total;
} ibm1;

static void ibm1_free(ibm1 *b) {
    free(b->keys);
    free(b->cell);
    free(b->t);
    free(b->count);
    free(b->total);
}

/* Collects the co-occurring pairs and every pair's cells. 0, or -1 (memory). */
static int ibm1_index(ibm1 *b, const pmt_corpus *c, int V) {
    const uint64_t W = (uint64_t)V + 1;
    size_t n = 0;
    for (int i = 0; i < c->n_pairs; i++)
        n += (size_t)(pmt_corpus_src_len(c, i) + 1) * (size_t)pmt_corpus_tgt_len(c, i);
    b->n_cells = n;
    b->keys = malloc((n ? n : 1) * sizeof *b->keys);
    b->cell = malloc((n ? n : 1) * sizeof *b->cell);
    if (!b->keys || !b->cell) return -1;
    size_t k = 0;
    for (int i = 0; i < c->n_pairs; i++) {
        const int32_t *f = c->src_ids + c->src_off[i], *e = c->tgt_ids + c->tgt_off[i];
        const int m = pmt_corpus_src_len(c, i), len = pmt_corpus_tgt_len(c, i);
        for (int a = 0; a <= m; a++)
            for (int j = 0; j < len; j++) b->keys[k++] = (a < m ? (uint64_t)f[a] : (uint64_t)V) * W + (uint64_t)e[j];
    }
    qsort(b->keys, n, sizeof *b->keys, cmp_u64);
    size_t u = 0;
    for (size_t x = 0; x < n; x++)
        if (u == 0 || b->keys[x] != b->keys[u - 1]) b->keys[u++] = b->keys[x];
    b->nnz = u;
    k = 0;
    for (int i = 0; i < c->n_pairs; i++) {
        const int32_t *f = c->src_ids + c->src_off[i], *e = c->tgt_ids + c->tgt_off[i];
        const int m = pmt_corpus_src_len(c, i), len = pmt_corpus_tgt_len(c, i);
        for (int a = 0; a <= m; a++)
            for (int j = 0; j < len; j++)
                b->cell[k++] = find_key(b->keys, u, (a < m ? (uint64_t)f[a] : (uint64_t)V) * W + (uint64_t)e[j]);
    }
    b->t = malloc((u ? u : 1) * sizeof *b->t);
    b->count = malloc((u ? u : 1) * sizeof *b->count);
    b->total = malloc((size_t)W * sizeof *b->total);
    if (!b->t || !b->count || !b->total) return -1;
    for (size_t x = 0; x < u; x++) b->t[x] = 1.0;   /* uniform: the first E-step normalises per target */
    return 0;
}

/* One EM pass: expected counts of every cell, then t(e|f) = count / Σ_e count. */
static void ibm1_pass(ibm1 *b, const pmt_corpus *c, int V) {
    const uint64_t W = (uint64_t)V + 1;
    memset(b->count, 0, b->nnz * sizeof *b->count);
    memset(b->total, 0, (size_t)W * sizeof *b->total);
    size_t k = 0;
    for (int i = 0; i < c->n_pairs; i++) {
        const int m1 = pmt_corpus_src_len(c, i) + 1, len = pmt_corpus_tgt_len(c, i);
        const uint32_t *cell = b->cell + k;   /* cell[a·len + j] */
        for (int j = 0; j < len; j++) {
            double z = 0.0;
            for (int a = 0; a < m1; a++) z += b->t[cell[(size_t)a * len + j]];
            if (!(z > 0.0)) continue;
            for (int a = 0; a < m1; a++) {
                const uint32_t x = cell[(size_t)a * len + j];
                b->count[x] += b->t[x] / z;
            }
        }
        k += (size_t)m1 * len;
    }
    for (size_t x = 0; x < b->nnz; x++) b->total[b->keys[x] / W] += b->count[x];
    for (size_t x = 0; x < b->nnz; x++) {
        const double tot = b->total[b->keys[x] / W];
        b->t[x] = tot > 0.0 ? b->count[x] / tot : 0.0;
    }
}

/* Fills s->candidates from the trained table. 0, or -1 (memory). */
static int keep_candidates(pmt_shortlist *s, const ibm1 *b) {
    const int V = s->vocab_size, K = s->per_source;
    const uint64_t W = (uint64_t)V + 1;
    ranked *row = malloc((size_t)V * sizeof *row);
    if (!row) return -1;
    for (size_t i = 0; i < (size_t)V * K; i++) s->candidates[i] = -1;
    size_t x = 0;
    while (x < b->nnz) {
        const uint64_t f = b->keys[x] / W;
        int n = 0;
        for (; x < b->nnz && b->keys[x] / W == f; x++) row[n++] = (ranked){b->t[x], (int32_t)(b->keys[x] % W)};
        if (f >= (uint64_t)V) continue;   /* NULL's row: it only takes mass from the others */
        qsort(row, (size_t)n, sizeof *row, cmp_ranked);
        for (int r = 0; r < n && r < K; r++) s->candidates[f * (size_t)K + r] = row[r].id;
    }
    free(row);
    return 0;
}

/* Fills s->frequent: the target pieces by count, ties by lower id (pieces
 * never seen are not kept, so n_frequent may shrink). 0, or -1 (memory). */
static int keep_frequent(pmt_shortlist *s, const pmt_corpus *c) {
    const int V = s->vocab_size;
    ranked *all = calloc((size_t)V, sizeof *all);
    if (!all) return -1;
    for (int v = 0; v < V; v++) all[v].id = v;
    for (uint64_t i = 0; i < c->tgt_off[c->n_pairs]; i++) all[c->tgt_ids[i]].p += 1.0;
    qsort(all, (size_t)V, sizeof *all, cmp_ranked);
    int n = 0;
    while (n < s->n_frequent && n < V && all[n].p > 0.0) {
        s->frequent[n] = all[n].id;
        n++;
    }
    s->n_frequent = n;
    free(all);
    return 0;
}

pmt_shortlist *pmt_shortlist_build(const pmt_corpus *train, int vocab_size, int per_source, int n_frequent,
                                   int iterations, char *err, size_t errlen) {
    if (vocab_size < 4 || per_source < 1 || per_source > PMT_SHORTLIST_MAX_PER_SOURCE || n_frequent < 0 ||
        n_frequent > vocab_size || iterations < 1) {
        snprintf(err, errlen, "shortlist: bad sizes (vocabulary %d, %d per source piece, %d frequent, %d passes; "
                 "1..%d per source piece)", vocab_size, per_source, n_frequent, iterations,
                 PMT_SHORTLIST_MAX_PER_SOURCE);
        return NULL;
    }
    const uint64_t n_ids[2] = {train->src_off[train->n_pairs], train->tgt_off[train->n_pairs]};
    const int32_t *ids[2] = {train->src_ids, train->tgt_ids};
    for (int side = 0; side < 2; side++)
        for (uint64_t i = 0; i < n_ids[side]; i++)
            if (ids[side][i] < 0 || ids[side][i] >= vocab_size) {
                snprintf(err, errlen, "shortlist: the training split has %s id %d, outside the vocabulary of %d",
                         side ? "target" : "source", ids[side][i], vocab_size);
                return NULL;
            }
    pmt_shortlist *s = calloc(1, sizeof *s);
    ibm1 b = {0};
    if (!s) goto oom;
    s->vocab_size = vocab_size;
    s->per_source = per_source;
    s->n_frequent = n_frequent;
    s->frequent = malloc((size_t)(n_frequent ? n_frequent : 1) * sizeof *s->frequent);
    s->candidates = malloc((size_t)vocab_size * per_source * sizeof *s->candidates);
    if (!s->frequent || !s->candidates || ibm1_index(&b, train, vocab_size) != 0) goto oom;
    for (int it = 0; it < iterations; it++) ibm1_pass(&b, train, vocab_size);
    if (keep_candidates(s, &b) != 0 || keep_frequent(s, train) != 0) goto oom;
    ibm1_free(&b);
    return s;
oom:
    ibm1_free(&b);
    pmt_shortlist_free(s);
    snprintf(err, errlen, "shortlist: out of memory for the lexical table of %d training pairs", train->n_pairs);
    return NULL;
}

int pmt_shortlist_validate(const pmt_shortlist *s, char *err, size_t errlen) {
    const int V = s->vocab_size, K = s->per_source;
    if (V < 4 || K < 1 || K > PMT_SHORTLIST_MAX_PER_SOURCE || s->n_frequent < 0 || s->n_frequent > V) {
        snprintf(err, errlen, "shortlist sizes out of range (vocabulary %d, %d per source piece, %d frequent)", V, K,
                 s->n_frequent);
        return -1;
    }
    for (int i = 0; i < s->n_frequent; i++)
        if (s->frequent[i] < 0 || s->frequent[i] >= V) {
            snprintf(err, errlen, "shortlist: frequent piece %d is id %d, outside the vocabulary of %d", i,
                     s->frequent[i], V);
            return -1;
        }
    for (int f = 0; f < V; f++) {
        const int32_t *row = s->candidates + (size_t)f * K;
        int ended = 0;
        for (int r = 0; r < K; r++) {
            if (row[r] == -1) ended = 1;
            else if (ended || row[r] < 0 || row[r] >= V) {
                snprintf(err, errlen, "shortlist: candidate %d of source piece %d is %d (ids are 0..%d, and -1 only "
                         "after the last candidate)", r, f, row[r], V - 1);
                return -1;
            }
        }
    }
    return 0;
}

int pmt_shortlist_batch(const pmt_shortlist *s, int k, const int32_t *src, const int32_t *src_len, int n_sent, int S,
                        int32_t *ids, int32_t *col_of) {
    const int V = s->vocab_size, K = s->per_source;
    if (k > K) k = K;
    for (int v = 0; v < V; v++) col_of[v] = -1;
    enum { MEMBER = -2 };   /* a member, numbered below */
    col_of[PMT_EOS_ID] = col_of[PMT_UNK_ID] = MEMBER;
    for (int i = 0; i < s->n_frequent; i++) col_of[s->frequent[i]] = MEMBER;
    for (int j = 0; j < n_sent; j++)
        for (int a = 0; a < src_len[j]; a++) {
            const int32_t f = src[(size_t)j * S + a];
            if (f < 0 || f >= V) continue;
            const int32_t *row = s->candidates + (size_t)f * K;
            for (int r = 0; r < k && row[r] >= 0; r++) col_of[row[r]] = MEMBER;
        }
    int n = 0;
    for (int v = 0; v < V; v++)
        if (col_of[v] == MEMBER) {
            col_of[v] = n;
            ids[n++] = v;
        }
    return n;
}
