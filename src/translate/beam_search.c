/*
 * beam_search.c — greedy and batched beam search over the incremental decoder.
 *
 * The search is Marian's beam search with shrinking beams:
 *   - a sentence owns `beam` rows; at each step it selects the top
 *     k = beam − finished candidates (score = cumulative log-prob) among the
 *     top-k tokens of each live row; a selected EOS finishes a hypothesis
 *     (kept with its normalised score), every other candidate continues as a
 *     live row. So live + finished <= beam, and beam = 1 is exactly greedy
 *     search (argmax, first maximal token on ties).
 *   - Output limit: after L = pmt_search_max_output tokens only EOS may
 *     follow, so every hypothesis ends in EOS within L + 1 tokens.
 *   - Ranking: score = logprob / (len + 1)^α with α = normalize, where len + 1
 *     counts EOS.
 *   - Stopping: a sentence is done when no live row is left, or early when it
 *     already holds n_best finished hypotheses and no live row can still beat
 *     the n_best-th of them. That is decided with a certain bound: a live row
 *     with cumulative log-prob c <= 0 can only lose probability, and its
 *     final length is at most L + 1, so its best reachable score is
 *     c / (L + 1)^α (α >= 0). Early stopping never changes the result of the
 *     search, it only skips steps that cannot change it.
 *
 * Batching: n_sent sentences × beam rows are decoded together; a finished
 * sentence is dropped from the decoder at once (pmt_decoder_reorder compacts
 * the batch). Sentences are sorted by length (longest first) and cut into
 * sub-batches that fit the model's encoder arena; results are written by
 * input index, so the output order is the input order.
 */
#include "translate/beam_search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A candidate continuation: row extended by token with cumulative score. */
typedef struct candidate {
    double score;
    int row;
    int32_t token;
} candidate;

/* Search state and result pool; every array sized at pmt_search_init. */
typedef struct search_pool {
    /* results, by input sentence index */
    int32_t *fin_ids;           /* [max_batch * max_beam * max_len] */
    pmt_hypothesis *fin;        /* [max_batch * max_beam], sorted best first */
    int *n_fin;                 /* [max_batch] */

    /* sub-batch */
    int *order;                 /* [max_batch] input indices, longest source first */
    int32_t *src_pad;           /* [max_batch * max_len] padded sources with EOS */
    int32_t *src_len;           /* [max_batch] incl. EOS */
    int *sent_id;               /* [max_batch] active sentence -> input index */
    int *max_out;               /* [max_batch] output limit L per active sentence */
    int *live;                  /* [max_batch] live rows per active sentence */
    int32_t *keep;              /* [max_batch] kept active sentences after a step */

    /* rows (double buffered: read the old, write the new, swap) */
    int32_t *hist, *hist2;      /* [max_rows * max_len] output tokens so far */
    double *cum, *cum2;         /* [max_rows] cumulative log-prob */
    int32_t *tokens;            /* [max_rows] token each row feeds next */
    int32_t *parent;            /* [max_rows] old row each new row continues */

    /* Candidates are found for all active sentences in parallel (the scans
     * over V dominate the search's own work), then the bookkeeping runs in
     * sentence order: each sentence and each row has its own slots. */
    candidate *cand;            /* [max_batch * max_beam] sentence j's candidates at j*max_beam */
    int *n_cand;                /* [max_batch] */
    candidate *row_top;         /* [max_rows * max_beam] top tokens of row r at r*max_beam */
} search_pool;

void pmt_decode_options_from_config(pmt_decode_options *o, const pmt_config *cfg) {
    o->beam_size = cfg->beam_size;
    o->n_best = cfg->n_best;
    o->normalize = cfg->normalize;
    o->max_length_factor = cfg->max_length_factor;
    o->max_length_const = cfg->max_length_const;
}

int pmt_search_max_output(const pmt_model *m, const pmt_decode_options *opt, int src_len) {
    double limit = opt->max_length_factor * src_len + opt->max_length_const;
    int L = limit < 1.0 ? 1 : (limit > m->max_len - 1 ? m->max_len - 1 : (int)limit);
    return L;
}

int pmt_search_init(pmt_search *s, pmt_model *m, int max_batch, int max_beam, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    if (pmt_decoder_init(&s->dec, m, max_batch, max_beam, err, errlen) != 0) return -1;
    s->max_batch = max_batch;
    s->max_beam = max_beam;
    search_pool *p = calloc(1, sizeof *p);
    s->pool = p;
    const size_t nb = (size_t)max_batch, rows = nb * max_beam, L = (size_t)m->max_len;
    if (p) {
        p->fin_ids = malloc(rows * L * sizeof *p->fin_ids);
        p->fin = calloc(rows, sizeof *p->fin);
        p->n_fin = calloc(nb, sizeof *p->n_fin);
        p->order = calloc(nb, sizeof *p->order);
        p->src_pad = calloc(nb * L, sizeof *p->src_pad);
        p->src_len = calloc(nb, sizeof *p->src_len);
        p->sent_id = calloc(nb, sizeof *p->sent_id);
        p->max_out = calloc(nb, sizeof *p->max_out);
        p->live = calloc(nb, sizeof *p->live);
        p->keep = calloc(nb, sizeof *p->keep);
        p->hist = malloc(rows * L * sizeof *p->hist);
        p->hist2 = malloc(rows * L * sizeof *p->hist2);
        p->cum = calloc(rows, sizeof *p->cum);
        p->cum2 = calloc(rows, sizeof *p->cum2);
        p->tokens = calloc(rows, sizeof *p->tokens);
        p->parent = calloc(rows, sizeof *p->parent);
        p->cand = calloc(rows, sizeof *p->cand);
        p->n_cand = calloc(nb, sizeof *p->n_cand);
        p->row_top = calloc(rows * max_beam, sizeof *p->row_top);
    }
    if (!p || !p->fin_ids || !p->fin || !p->n_fin || !p->order || !p->src_pad || !p->src_len || !p->sent_id ||
        !p->max_out || !p->live || !p->keep || !p->hist || !p->hist2 || !p->cum || !p->cum2 || !p->tokens ||
        !p->parent || !p->cand || !p->n_cand || !p->row_top) {
        snprintf(err, errlen, "search: out of memory (%d sentences x beam %d)", max_batch, max_beam);
        pmt_search_free(s);
        return -1;
    }
    return 0;
}

void pmt_search_free(pmt_search *s) {
    search_pool *p = s->pool;
    if (p) {
        free(p->fin_ids); free(p->fin); free(p->n_fin); free(p->order); free(p->src_pad); free(p->src_len);
        free(p->sent_id); free(p->max_out); free(p->live); free(p->keep); free(p->hist); free(p->hist2);
        free(p->cum); free(p->cum2); free(p->tokens); free(p->parent); free(p->cand); free(p->n_cand); free(p->row_top);
        free(p);
    }
    if (s->dec.m) pmt_decoder_free(&s->dec);
    memset(s, 0, sizeof *s);
}

/* Strict "a ranks before b": higher score, then lower row, then lower token,
 * so the search is deterministic. */
static int cand_before(const candidate *a, const candidate *b) {
    if (a->score != b->score) return a->score > b->score;
    if (a->row != b->row) return a->row < b->row;
    return a->token < b->token;
}

/* Inserts c into the sorted list top[0..*n) of capacity k (drops the worst). */
static void top_insert(candidate *top, int *n, int k, candidate c) {
    if (*n == k && !cand_before(&c, &top[k - 1])) return;
    int i = *n < k ? (*n)++ : k - 1;
    while (i > 0 && cand_before(&c, &top[i - 1])) {
        top[i] = top[i - 1];
        i--;
    }
    top[i] = c;
}

/* The k most probable tokens of row r (ties: lower id), into top, by logit.
 * PAD and BOS are never outputs (training never targets them): they are
 * not proposed. */
static int row_top_tokens(const pmt_decoder *d, int r, int k, candidate *top) {
    const float *lg = d->logits + (size_t)r * d->m->V;
    int n = 0;
    float worst = -INFINITY;    /* logit of top[k-1] once the list is full */
    for (int v = 0; v < d->m->V; v++) {
        if (v == PMT_PAD_ID || v == PMT_BOS_ID || (n == k && lg[v] <= worst)) continue;
        candidate c = {lg[v], r, v};
        top_insert(top, &n, k, c);
        if (n == k) worst = (float)top[k - 1].score;
    }
    return n;
}

static double normalized(double logprob, int len_with_eos, double alpha) {
    return alpha == 0.0 ? logprob : logprob / pow((double)len_with_eos, alpha);
}

/* Keeps a finished hypothesis of input sentence sid (row r's t tokens). */
static void finish(search_pool *p, int max_beam, int max_len, int sid, const int32_t *ids, int t,
                   double logprob, double alpha) {
    pmt_hypothesis *fin = p->fin + (size_t)sid * max_beam;
    int n = p->n_fin[sid];
    int slot = n;   /* storage slot == insertion count: ids never move */
    int32_t *store = p->fin_ids + ((size_t)sid * max_beam + slot) * max_len;
    memcpy(store, ids, (size_t)t * sizeof *ids);
    pmt_hypothesis h = {store, t, logprob, normalized(logprob, t + 1, alpha)};
    int i = n;
    while (i > 0 && h.score > fin[i - 1].score) {   /* stable: earlier wins ties */
        fin[i] = fin[i - 1];
        i--;
    }
    fin[i] = h;
    p->n_fin[sid] = n + 1;
}

/* What one sub-batch's steps share. */
typedef struct run_ctx {
    pmt_decoder *d;
    search_pool *p;
    const pmt_decode_options *opt;
    int max_beam, max_len, beam, cap;
} run_ctx;

/* Can input sentence sid stop, given its live rows' cumulative log-probs
 * cum[0..live)? See the rule at the top of this file. */
static int sentence_done(const run_ctx *x, int sid, const double *cum, int live, int L) {
    if (live == 0) return 1;
    const int n_best = x->opt->n_best;
    if (x->p->n_fin[sid] < n_best) return 0;
    const double kth = x->p->fin[(size_t)sid * x->max_beam + n_best - 1].score;
    for (int i = 0; i < live; i++) {
        /* c > 0 only through fp32 rounding of p ≈ 1; bound it by the shortest
         * reachable length then, which is never smaller. */
        double best = cum[i] <= 0 ? normalized(cum[i], L + 1, x->opt->normalize) : cum[i];
        if (best > kth) return 0;
    }
    return 1;
}

/* The candidates of active sentence j at step t (t tokens generated so far):
 * the top k tokens of each live row, or only EOS once the limit is reached,
 * into cand[j*max_beam ..], best first (at most k); sets n_cand[j]. Touches
 * only sentence j's slots, so sentences run in parallel. */
static void sentence_candidates(const run_ctx *x, int j, int t, int k) {
    const pmt_decoder *d = x->d;
    search_pool *p = x->p;
    const int first = j * x->beam, forced = t >= p->max_out[j];
    candidate *cand = p->cand + (size_t)j * x->max_beam;
    int n = 0;
    for (int r = first; r < first + p->live[j]; r++) {
        candidate *top = p->row_top + (size_t)r * x->max_beam;
        int m = forced ? 1 : row_top_tokens(d, r, k, top);
        if (forced) top[0].token = PMT_EOS_ID;
        for (int i = 0; i < m; i++) {
            candidate c = {p->cum[r] + pmt_decoder_logprob(d, r, top[i].token), r, top[i].token};
            top_insert(cand, &n, k, c);
        }
    }
    p->n_cand[j] = n;
}

/* Beam width left for active sentence j: beam minus its finished hypotheses. */
static int sentence_width(const run_ctx *x, int j) {
    return x->beam - x->p->n_fin[x->p->sent_id[j]];
}

/* One search step for active sentence j: takes its candidates, finishes
 * EOS ones, and writes its continuing rows as new rows from new_first on
 * (hist2/cum2/parent/tokens). Returns 1 if the sentence is done. */
static int sentence_step(run_ctx *x, int j, int t, int new_first) {
    search_pool *p = x->p;
    const int sid = p->sent_id[j], first = j * x->beam;
    const int n = p->n_cand[j];
    int live = 0;
    for (int i = 0; i < n; i++) {
        const candidate *c = &p->cand[(size_t)j * x->max_beam + i];
        const int32_t *ids = p->hist + (size_t)c->row * x->cap;
        if (c->token == PMT_EOS_ID) {
            finish(p, x->max_beam, x->max_len, sid, ids, t, c->score, x->opt->normalize);
            continue;
        }
        const int nr = new_first + live++;
        memcpy(p->hist2 + (size_t)nr * x->cap, ids, (size_t)t * sizeof *ids);
        p->hist2[(size_t)nr * x->cap + t] = c->token;
        p->cum2[nr] = c->score;
        p->parent[nr] = c->row;
        p->tokens[nr] = c->token;
    }
    /* Unused rows still run through the decoder: give them a valid parent
     * in the same sentence and a harmless token; they are never read. */
    for (int i = live; i < x->beam; i++) {
        p->parent[new_first + i] = first;
        p->tokens[new_first + i] = PMT_EOS_ID;
        p->cum2[new_first + i] = -INFINITY;
    }
    p->live[j] = live;
    return sentence_done(x, sid, p->cum2 + new_first, live, p->max_out[j]);
}

/* Runs one search step over all active sentences; returns how many remain. */
static int batch_step(run_ctx *x, int t) {
    search_pool *p = x->p;
    pmt_decoder *d = x->d;
    int n_keep = 0;
    const int n_sent = d->n_sent;
#pragma omp parallel for schedule(dynamic) if ((long)d->rows * d->m->V > 65536)
    for (int j = 0; j < n_sent; j++) sentence_candidates(x, j, t, sentence_width(x, j));
    for (int j = 0; j < n_sent; j++) {
        int done = sentence_step(x, j, t, n_keep * x->beam);
        if (done) continue;
        /* compact the per-sentence arrays in place (n_keep <= j) */
        p->keep[n_keep] = j;
        p->sent_id[n_keep] = p->sent_id[j];
        p->max_out[n_keep] = p->max_out[j];
        p->live[n_keep] = p->live[j];
        n_keep++;
    }
    int32_t *th = p->hist; p->hist = p->hist2; p->hist2 = th;
    double *tc = p->cum; p->cum = p->cum2; p->cum2 = tc;
    if (n_keep > 0) pmt_decoder_reorder(d, p->parent, p->keep, n_keep);
    return n_keep;
}

/* Decodes the sentences order[0..n) (all with source length <= S - 1). */
static int decode_sub_batch(pmt_search *s, const pmt_decode_options *opt, const int32_t *const *src,
                            const int *src_len, const int *order, int n, int S, char *err, size_t errlen) {
    search_pool *p = s->pool;
    pmt_decoder *d = &s->dec;
    int cap = 1;
    memset(p->src_pad, 0, (size_t)n * S * sizeof *p->src_pad);
    for (int j = 0; j < n; j++) {
        const int i = order[j], len = src_len[i];
        memcpy(p->src_pad + (size_t)j * S, src[i], (size_t)len * sizeof *src[i]);
        p->src_pad[(size_t)j * S + len] = PMT_EOS_ID;
        p->src_len[j] = len + 1;
        p->sent_id[j] = i;
        p->max_out[j] = pmt_search_max_output(d->m, opt, len);
        p->live[j] = 1;
        p->n_fin[i] = 0;
        if (p->max_out[j] + 1 > cap) cap = p->max_out[j] + 1;
    }
    if (pmt_decoder_start(d, p->src_pad, p->src_len, n, S, opt->beam_size, cap, err, errlen) != 0) return -1;
    run_ctx x = {d, p, opt, s->max_beam, d->m->max_len, opt->beam_size, cap};
    for (int r = 0; r < d->rows; r++) {
        p->tokens[r] = PMT_BOS_ID;
        p->cum[r] = 0.0;
    }
    for (int t = 0; d->n_sent > 0; t++) {
        pmt_decoder_step(d, p->tokens);
        s->stats.steps++;
        s->stats.row_steps += d->rows;
        if (batch_step(&x, t) == 0) break;
    }
    return 0;
}

/* order[0..n) = 0..n-1 sorted by source length, longest first, ties in input
 * order (insertion sort: stable, no allocation, no global comparator state). */
static void sort_by_length(int *order, const int *src_len, int n) {
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && src_len[order[j - 1]] < src_len[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

static int check_options(const pmt_search *s, const pmt_decode_options *opt, const int *src_len, int n,
                         char *err, size_t errlen) {
    const int max_src = s->dec.m->max_len - 1;
    if (opt->beam_size < 1 || opt->beam_size > s->max_beam) {
        snprintf(err, errlen, "search: beam size %d out of range [1, %d]", opt->beam_size, s->max_beam);
        return -1;
    }
    if (opt->n_best < 1 || opt->n_best > opt->beam_size) {
        snprintf(err, errlen, "search: n-best %d out of range [1, beam size %d]", opt->n_best, opt->beam_size);
        return -1;
    }
    if (!(opt->normalize >= 0.0)) {
        snprintf(err, errlen, "search: normalize must be >= 0 (got %g)", opt->normalize);
        return -1;
    }
    if (n < 0 || n > s->max_batch) {
        snprintf(err, errlen, "search: %d sentences exceed the batch size %d", n, s->max_batch);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (src_len[i] < 0 || src_len[i] > max_src) {
            snprintf(err, errlen, "search: sentence %d has %d source tokens (limit %d)", i, src_len[i], max_src);
            return -1;
        }
        if (src_len[i] + 1 > s->dec.m->max_rows) {
            snprintf(err, errlen, "search: sentence %d (%d tokens + EOS) exceeds the model's encoder arena (%d rows)",
                     i, src_len[i], s->dec.m->max_rows);
            return -1;
        }
    }
    return 0;
}

int pmt_search_run(pmt_search *s, const pmt_decode_options *opt, const int32_t *const *src,
                   const int *src_len, int n, pmt_nbest *out, char *err, size_t errlen) {
    if (check_options(s, opt, src_len, n, err, errlen) != 0) return -1;
    search_pool *p = s->pool;
    sort_by_length(p->order, src_len, n);
    const int max_rows = s->dec.m->max_rows;
    for (int pos = 0; pos < n;) {
        const int S = src_len[p->order[pos]] + 1;   /* longest first: the sub-batch's padded length */
        int count = n - pos;
        if (count * S > max_rows) count = max_rows / S;
        if (decode_sub_batch(s, opt, src, src_len, p->order + pos, count, S, err, errlen) != 0) return -1;
        pos += count;
    }
    for (int i = 0; i < n; i++) {
        out[i].n = p->n_fin[i] < opt->n_best ? p->n_fin[i] : opt->n_best;
        out[i].hyp = p->fin + (size_t)i * s->max_beam;
    }
    return 0;
}
