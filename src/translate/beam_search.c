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
 *
 * Lanes: a sub-batch is dealt round-robin (in length order, so every lane
 * gets the same mix of lengths) to lanes_for(n, beam) lanes, each with its
 * own decoder (over lane 0's packed low-precision weights: one copy in the
 * shared cache, pmt_decoder_init_sharing) and row state, run in one OpenMP
 * region, one lane per thread at a time, every kernel of a lane (its
 * encoder pass included, in the lane's own arena: pmt_model_init_view) on
 * that lane's thread alone.
 * Why: an encoder pass or a step is ~20-60 products and kernels; run with
 * all threads each, every one of them ends in a barrier, and on a machine shared with other
 * processes a barrier waits for a thread that is not running (measured on
 * the 2-core reference machine under load: 2 threads decoded 4-10x slower
 * than 1). A lane runs a whole sub-batch without synchronising. The number
 * of lanes and who goes where depend on n and the beam only, never on the
 * thread count, so results are the same bits for any --threads.
 * Lane size: a thread that finishes its last lane waits for the others at
 * the end of the region, so smaller lanes balance better, while products
 * over fewer rows run further from their peak.
 * Measured on AMD EPYC Zen 4 (2 threads, batch 64, 2026-12-04): lanes of
 * 16 sentences beat 8, 12 and 32 for greedy search, and lanes of 8 beat 4,
 * 16 and 32 for beam 4: about 32 rows a lane (docs/speed.md).
 */
#include "translate/beam_search.h"

#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/ops.h"

/* A candidate continuation: row extended by token with cumulative score. */
typedef struct candidate {
    double score;
    int row;
    int32_t token;
} candidate;

/* Rows a lane is sized for, and its sentences at most (the lane size
 * above): a lane takes lane_sentences(beam) sentences (sub-batches of more
 * are split over more lanes), but a sub-batch has at most MAX_LANES lanes
 * (each has its own decoder, caches and encoder arena: ~26 MB resident a
 * lane for the shipped model at beam 4), larger ones when more sentences
 * come; and a sub-batch of two or more sentences has at least two lanes so
 * that two cores share it. */
enum { LANE_ROWS = 32, LANE_MAX_SENTENCES = 16, MIN_LANES = 2, MAX_LANES = 8 };

static int lane_sentences(int beam) {
    const int n = LANE_ROWS / beam;
    return n < 1 ? 1 : (n > LANE_MAX_SENTENCES ? LANE_MAX_SENTENCES : n);
}

/* Lanes for n sentences at this beam: never fewer for a larger n or beam
 * (lane_sentences does not grow with the beam), so the lanes allocated for
 * the search's max_batch and max_beam cover every run. */
static int lanes_for(int n, int beam) {
    const int per_lane = lane_sentences(beam), by_size = (n + per_lane - 1) / per_lane;
    if (n <= 1) return 1;
    return by_size < MIN_LANES ? MIN_LANES : (by_size > MAX_LANES ? MAX_LANES : by_size);
}

/* One lane: a decoder and the row state of the sentences it decodes (its
 * "active sentences" j, in decoder order); every array sized at init for
 * max_sent = lane_max sentences. */
typedef struct search_lane {
    pmt_decoder dec;
    pmt_model view;             /* the lane's encoder arena over the model's weights (dec.encoder) */
    int32_t *src_pad;           /* [max_sent * max_len] its padded sources with EOS */
    int32_t *src_len;           /* [max_sent] their lengths incl. EOS */
    int *sent_id;               /* [max_sent] active sentence -> input index */
    int *max_out;               /* [max_sent] output limit L per active sentence */
    int *live;                  /* [max_sent] live rows per active sentence */
    int32_t *keep;              /* [max_sent] kept active sentences after a step */

    /* rows (double buffered: read the old, write the new, swap) */
    int32_t *hist, *hist2;      /* [max_rows * max_len] output tokens so far */
    double *cum, *cum2;         /* [max_rows] cumulative log-prob */
    int32_t *tokens;            /* [max_rows] token each row feeds next */
    int32_t *parent;            /* [max_rows] old row each new row continues */

    /* Candidates: each sentence and each row has its own slots. */
    candidate *cand;            /* [max_sent * max_beam] sentence j's candidates at j*max_beam */
    int *n_cand;                /* [max_sent] */
    /* Each live row's share of the last step, by its slot (the decoder's
     * logit_slot), taken from its logits as the decoder finished them
     * (take_row): its top tokens by logit at slot*max_beam, how many, and
     * its EOS logit (-INFINITY outside a shortlist). */
    candidate *row_top;         /* [max_rows * max_beam] */
    int *n_top;                 /* [max_rows] */
    float *eos_logit;           /* [max_rows] */

    pmt_search_stats stats;     /* of the last run */
    char err[400];              /* a failed start's or step's message */
    int stopped;                /* the last run stopped at should_stop (err says so) */
} search_lane;

/* Search state and result pool; every array sized at pmt_search_init. */
typedef struct search_pool {
    /* results, by input sentence index (lanes write disjoint sentences) */
    int32_t *fin_ids;           /* [max_batch * max_beam * max_len] */
    pmt_hypothesis *fin;        /* [max_batch * max_beam], sorted best first */
    int *n_fin;                 /* [max_batch] */

    int *order;                 /* [max_batch] input indices, longest source first */

    int n_lanes, lane_max;      /* lanes allocated, sentences each */
    search_lane *lanes;         /* [n_lanes] */
} search_pool;

void pmt_decode_options_from_config(pmt_decode_options *o, const pmt_config *cfg) {
    o->beam_size = cfg->beam_size;
    o->n_best = cfg->n_best;
    o->normalize = cfg->normalize;
    o->max_length_factor = cfg->max_length_factor;
    o->max_length_const = cfg->max_length_const;
    o->compute_type = cfg->compute_type;
    o->shortlist = cfg->shortlist;
    o->should_stop = NULL;
    o->should_stop_ctx = NULL;
}

int pmt_search_max_output(const pmt_model *m, const pmt_decode_options *opt, int src_len) {
    double limit = opt->max_length_factor * src_len + opt->max_length_const;
    int L = limit < 1.0 ? 1 : (limit > m->max_len - 1 ? m->max_len - 1 : (int)limit);
    return L;
}

static void lane_free(search_lane *ln) {
    if (ln->dec.m) pmt_decoder_free(&ln->dec);
    if (ln->view.act) pmt_model_free(&ln->view);
    free(ln->src_pad); free(ln->src_len); free(ln->sent_id); free(ln->max_out); free(ln->live); free(ln->keep);
    free(ln->hist); free(ln->hist2); free(ln->cum); free(ln->cum2); free(ln->tokens); free(ln->parent);
    free(ln->cand); free(ln->n_cand); free(ln->row_top); free(ln->n_top); free(ln->eos_logit);
    memset(ln, 0, sizeof *ln);
}

/* A lane; its decoder's low-precision weights are lane 0's (first: NULL
 * for lane 0 itself). */
static int lane_init(search_lane *ln, pmt_model *m, int max_sent, int max_beam, const search_lane *first, char *err,
                     size_t errlen) {
    memset(ln, 0, sizeof *ln);
    if (pmt_decoder_init_sharing(&ln->dec, m, max_sent, max_beam, first ? &first->dec : NULL, err, errlen) != 0)
        return -1;
    if (pmt_model_init_view(&ln->view, m, err, errlen) != 0) {
        lane_free(ln);
        return -1;
    }
    ln->dec.encoder = &ln->view;
    const size_t ns = (size_t)max_sent, rows = ns * max_beam, L = (size_t)m->max_len;
    ln->src_pad = calloc(ns * L, sizeof *ln->src_pad);
    ln->src_len = calloc(ns, sizeof *ln->src_len);
    ln->sent_id = calloc(ns, sizeof *ln->sent_id);
    ln->max_out = calloc(ns, sizeof *ln->max_out);
    ln->live = calloc(ns, sizeof *ln->live);
    ln->keep = calloc(ns, sizeof *ln->keep);
    ln->hist = malloc(rows * L * sizeof *ln->hist);
    ln->hist2 = malloc(rows * L * sizeof *ln->hist2);
    ln->cum = calloc(rows, sizeof *ln->cum);
    ln->cum2 = calloc(rows, sizeof *ln->cum2);
    ln->tokens = calloc(rows, sizeof *ln->tokens);
    ln->parent = calloc(rows, sizeof *ln->parent);
    ln->cand = calloc(rows, sizeof *ln->cand);
    ln->n_cand = calloc(ns, sizeof *ln->n_cand);
    ln->row_top = calloc(rows * max_beam, sizeof *ln->row_top);
    ln->n_top = calloc(rows, sizeof *ln->n_top);
    ln->eos_logit = calloc(rows, sizeof *ln->eos_logit);
    if (!ln->src_pad || !ln->src_len || !ln->sent_id || !ln->max_out || !ln->live || !ln->keep || !ln->hist ||
        !ln->hist2 || !ln->cum || !ln->cum2 || !ln->tokens || !ln->parent || !ln->cand || !ln->n_cand ||
        !ln->row_top || !ln->n_top || !ln->eos_logit) {
        snprintf(err, errlen, "search: out of memory (%d sentences x beam %d)", max_sent, max_beam);
        lane_free(ln);
        return -1;
    }
    return 0;
}

int pmt_search_init(pmt_search *s, pmt_model *m, int max_batch, int max_beam, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    if (max_batch < 1 || max_beam < 1) {
        snprintf(err, errlen, "search: bad sizes (sentences %d, beam %d)", max_batch, max_beam);
        return -1;
    }
    s->m = m;
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
        p->lanes = calloc((size_t)lanes_for(max_batch, max_beam), sizeof *p->lanes);
    }
    if (!p || !p->fin_ids || !p->fin || !p->n_fin || !p->order || !p->lanes) {
        snprintf(err, errlen, "search: out of memory (%d sentences x beam %d)", max_batch, max_beam);
        pmt_search_free(s);
        return -1;
    }
    /* A lane's sentences at most, for any n <= max_batch and beam: at most
     * lane_sentences(beam) <= LANE_MAX_SENTENCES, or n / MAX_LANES rounded
     * up once the lanes are capped. The decoder caches are sized for
     * lane_max × max_beam rows, but a lane of a large beam takes fewer
     * sentences and touches only the pages of its rows. */
    const int capped = (max_batch + MAX_LANES - 1) / MAX_LANES;
    p->lane_max = capped > LANE_MAX_SENTENCES ? capped : LANE_MAX_SENTENCES;
    if (p->lane_max > max_batch) p->lane_max = max_batch;
    /* Lane 0 now, so that a model the decoder cannot run fails here; the
     * others when first needed (decode_sub_batch). */
    p->n_lanes = lanes_for(max_batch, max_beam);
    if (lane_init(&p->lanes[0], m, p->lane_max, max_beam, NULL, err, errlen) != 0) {
        pmt_search_free(s);
        return -1;
    }
    return 0;
}

/* Makes lane ln on first use (its fields are zero until then). 0, or -1
 * with the message in ln->err. */
static int lane_ready(pmt_search *s, search_lane *ln) {
    if (ln->dec.m) return 0;
    char why[sizeof ln->err];
    const search_pool *p = s->pool;
    if (lane_init(ln, s->m, p->lane_max, s->max_beam, &p->lanes[0], why, sizeof why) == 0) return 0;
    snprintf(ln->err, sizeof ln->err, "%s", why);   /* lane_init left ln zeroed */
    return -1;
}

void pmt_search_free(pmt_search *s) {
    search_pool *p = s->pool;
    if (p) {
        for (int k = p->n_lanes - 1; k >= 0; k--) lane_free(&p->lanes[k]);   /* lane 0, whose weights the others share, last */
        free(p->lanes);
        free(p->fin_ids); free(p->fin); free(p->n_fin); free(p->order);
        free(p);
    }
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

/* Logits per block of the top-token scan (four 512-bit vectors). */
enum { TOP_BLOCK = 64 };

/* The k most probable tokens of row r (ties: lower id) by its logits lg
 * [d->n_vocab], into top.
 * PAD and BOS are never outputs (training never targets them): they are
 * not proposed.
 * Why blocks: once the list is full, almost no logit of a row enters it,
 * and the one-token-at-a-time test with its branch was ~5 % of a beam-4
 * decoding step (V = 8000 per row). A block is first tested as a whole in
 * vector lanes with the same comparison (!(lg <= worst), so NaN still
 * enters as before); a block with no entrant is skipped, and any other
 * block runs the scalar scan, so the list is the one the plain scan gives. */
static int row_top_tokens(const pmt_decoder *d, const float *lg, int r, int k, candidate *top) {
    const int V = d->n_vocab;
    const int32_t *ids = d->shortlisted ? d->vocab_ids : NULL;   /* column → token (increasing) */
    int n = 0;
    float worst = -INFINITY;    /* logit of top[k-1] once the list is full */
    for (int v0 = 0; v0 < V; v0 += TOP_BLOCK) {
        const int v1 = v0 + TOP_BLOCK < V ? v0 + TOP_BLOCK : V;
        if (n == k) {
            int enters = 0;
#pragma omp simd reduction(| : enters)
            for (int v = v0; v < v1; v++) enters |= !(lg[v] <= worst);
            if (!enters) continue;
        }
        for (int v = v0; v < v1; v++) {
            const int32_t token = ids ? ids[v] : v;
            if (token == PMT_PAD_ID || token == PMT_BOS_ID || (n == k && lg[v] <= worst)) continue;
            candidate c = {lg[v], r, token};
            top_insert(top, &n, k, c);
            if (n == k) worst = (float)top[k - 1].score;
        }
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
    search_pool *p;             /* finished hypotheses */
    search_lane *ln;            /* row state */
    const pmt_decode_options *opt;
    int max_beam, max_len, beam, cap;
    int t;                      /* the step being decoded: tokens generated so far */
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

/* Beam width left for active sentence j: beam minus its finished hypotheses. */
static int sentence_width(const run_ctx *x, int j) {
    return x->beam - x->p->n_fin[x->ln->sent_id[j]];
}

/* The decoder's visitor (pmt_decoder.visit, ctx the run_ctx): takes what
 * the search needs of live row slot's logits while they are in cache: the
 * top k = sentence_width tokens of its row, unless its sentence reached
 * the output limit (then only EOS may follow), and the EOS logit. The
 * widths do not change before sentence_candidates reads them: finished
 * hypotheses are only added after every sentence's candidates are taken. */
static void take_row(void *ctx, int slot, const float *logits) {
    const run_ctx *x = ctx;
    const pmt_decoder *d = x->d;
    search_lane *p = x->ln;
    const int r = d->live_rows[slot], j = r / x->beam;
    const int eos_col = d->shortlisted ? d->vocab_col[PMT_EOS_ID] : PMT_EOS_ID;
    p->eos_logit[slot] = eos_col < 0 ? -INFINITY : logits[eos_col];
    p->n_top[slot] = x->t >= p->max_out[j] ? 0
                     : row_top_tokens(d, logits, r, sentence_width(x, j), p->row_top + (size_t)slot * x->max_beam);
}

/* The candidates of active sentence j at step t (t tokens generated so far):
 * the top k tokens of each live row, or only EOS once the limit is reached,
 * into cand[j*max_beam ..], best first (at most k); sets n_cand[j]. A
 * candidate's log-prob is its logit minus its row's normaliser. */
static void sentence_candidates(const run_ctx *x, int j, int t, int k) {
    const pmt_decoder *d = x->d;
    search_lane *p = x->ln;
    const int first = j * x->beam, forced = t >= p->max_out[j];
    candidate *cand = p->cand + (size_t)j * x->max_beam;
    int n = 0;
    for (int r = first; r < first + p->live[j]; r++) {
        const int slot = d->logit_slot[r];
        const double lse = (double)d->lse[slot];
        if (forced) {
            candidate c = {p->cum[r] + ((double)p->eos_logit[slot] - lse), r, PMT_EOS_ID};
            top_insert(cand, &n, k, c);
            continue;
        }
        const candidate *top = p->row_top + (size_t)slot * x->max_beam;
        for (int i = 0; i < p->n_top[slot]; i++) {
            candidate c = {p->cum[r] + (top[i].score - lse), r, top[i].token};
            top_insert(cand, &n, k, c);
        }
    }
    p->n_cand[j] = n;
}

/* One search step for active sentence j: takes its candidates, finishes
 * EOS ones, and writes its continuing rows as new rows from new_first on
 * (hist2/cum2/parent/tokens). Returns 1 if the sentence is done. */
static int sentence_step(run_ctx *x, int j, int t, int new_first) {
    search_lane *p = x->ln;
    const int sid = p->sent_id[j], first = j * x->beam;
    const int n = p->n_cand[j];
    int live = 0;
    for (int i = 0; i < n; i++) {
        const candidate *c = &p->cand[(size_t)j * x->max_beam + i];
        const int32_t *ids = p->hist + (size_t)c->row * x->cap;
        if (c->token == PMT_EOS_ID) {
            finish(x->p, x->max_beam, x->max_len, sid, ids, t, c->score, x->opt->normalize);
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

/* Runs one search step over the lane's active sentences; returns how many remain. */
static int batch_step(run_ctx *x, int t) {
    search_lane *p = x->ln;
    pmt_decoder *d = x->d;
    int n_keep = 0;
    const int n_sent = d->n_sent;
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

/* Decodes lane k of n_lanes of the sub-batch order[0..n): its sentences
 * are order[k], order[k + n_lanes], ... (longest first). Runs on the calling
 * thread only. 0, or -1 with the message in ln->err. */
static int decode_lane(pmt_search *s, search_lane *ln, const pmt_decode_options *opt, const int32_t *const *src,
                       const int *src_len, const int *order, int k, int n_lanes, int n) {
    search_pool *p = s->pool;
    pmt_decoder *d = &ln->dec;
    memset(&ln->stats, 0, sizeof ln->stats);
    ln->stopped = 0;
    if (k >= n) return 0;
    const int S = src_len[order[k]] + 1;   /* its first sentence is its longest */
    int count = 0, cap = 1;
    for (int j = k; j < n; j += n_lanes) {
        const int i = order[j], len = src_len[i];
        int32_t *row = ln->src_pad + (size_t)count * S;
        memcpy(row, src[i], (size_t)len * sizeof *src[i]);
        row[len] = PMT_EOS_ID;
        memset(row + len + 1, 0, (size_t)(S - len - 1) * sizeof *row);
        ln->src_len[count] = len + 1;
        ln->sent_id[count] = i;
        ln->max_out[count] = pmt_search_max_output(s->m, opt, len);
        ln->live[count] = 1;
        p->n_fin[i] = 0;
        if (ln->max_out[count] + 1 > cap) cap = ln->max_out[count] + 1;
        count++;
    }
    d->shortlist_k = opt->shortlist;
    if (pmt_decoder_start(d, ln->src_pad, ln->src_len, count, S, opt->beam_size, cap, ln->err, sizeof ln->err) != 0)
        return -1;
    run_ctx x = {d, p, ln, opt, s->max_beam, s->m->max_len, opt->beam_size, cap, 0};
    for (int r = 0; r < d->rows; r++) {
        ln->tokens[r] = PMT_BOS_ID;
        ln->cum[r] = 0.0;
    }
    d->visit = take_row;
    d->visit_ctx = &x;
    int rc = 0;
    for (x.t = 0; d->n_sent > 0; x.t++) {
        if (opt->should_stop && opt->should_stop(opt->should_stop_ctx)) {
            snprintf(ln->err, sizeof ln->err, "search: stopped by the caller");
            ln->stopped = 1;
            rc = -1;
            break;
        }
        if (!pmt_decoder_step_live(d, ln->tokens, ln->live)) {
            snprintf(ln->err, sizeof ln->err, "%s", d->error);
            rc = -1;
            break;
        }
        ln->stats.steps++;
        ln->stats.row_steps += d->rows;
        if (batch_step(&x, x.t) == 0) break;
    }
    d->visit = NULL;   /* x lives on this stack frame only */
    d->visit_ctx = NULL;
    return rc;
}

/* Decodes the sentences order[0..n) (a sub-batch that fits the encoder
 * arena), their lanes in parallel. */
static int decode_sub_batch(pmt_search *s, const pmt_decode_options *opt, const int32_t *const *src,
                            const int *src_len, const int *order, int n, char *err, size_t errlen) {
    search_pool *p = s->pool;
    const int n_lanes = lanes_for(n, opt->beam_size);
    if (n_lanes > p->n_lanes || (n + n_lanes - 1) / n_lanes > p->lane_max) {   /* never, by lanes_for */
        snprintf(err, errlen, "search: %d sentences at beam %d need %d lanes of %d, %d of %d allocated", n,
                 opt->beam_size, n_lanes, (n + n_lanes - 1) / n_lanes, p->n_lanes, p->lane_max);
        return -1;
    }
    const int threads = omp_get_max_threads() < n_lanes ? omp_get_max_threads() : n_lanes;
    int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) reduction(| : failed)
    for (int k = 0; k < n_lanes; k++) {
        /* Every kernel of the lane on this thread only, also when the region
         * has one thread (this ICV is the lane task's own). */
        omp_set_num_threads(1);
        /* The attention kernels' scratch of this thread, for the model's
         * longest sentences (one compare when it is there already), so that
         * no kernel grows it mid-search. */
        if (attention_scratch_reserve(s->m->max_len, s->m->max_len, s->m->HS) != 0) {
            p->lanes[k].stopped = 0;
            snprintf(p->lanes[k].err, sizeof p->lanes[k].err, "search: out of memory for the attention scratch");
            failed = 1;
            continue;
        }
        failed |= lane_ready(s, &p->lanes[k]) != 0 ||
                  decode_lane(s, &p->lanes[k], opt, src, src_len, order, k, n_lanes, n) != 0;
    }
    int stopped = 0;
    for (int k = 0; k < n_lanes; k++) {
        s->stats.steps += p->lanes[k].stats.steps;
        s->stats.row_steps += p->lanes[k].stats.row_steps;
        stopped |= p->lanes[k].stopped;
    }
    /* A lane's real failure before a stop: a stop is only reported when
     * nothing else went wrong. */
    for (int k = 0; failed && k < n_lanes; k++)
        if (p->lanes[k].err[0] && !p->lanes[k].stopped) {
            snprintf(err, errlen, "%s", p->lanes[k].err);
            return -1;
        }
    if (stopped) {
        snprintf(err, errlen, "search: stopped by the caller");
        return PMT_SEARCH_STOPPED;
    }
    return failed ? -1 : 0;
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

int pmt_search_check_shortlist(const pmt_model *m, const pmt_decode_options *opt, char *err, size_t errlen) {
    if (opt->shortlist < 0) {
        snprintf(err, errlen, "search: shortlist must be >= 0 (got %d)", opt->shortlist);
        return -1;
    }
    if (opt->shortlist > 0 && !m->shortlist) {
        snprintf(err, errlen, "shortlist %d asked for, but the model carries no vocabulary shortlist (export it "
                 "with `projmt export --shortlist`, or use shortlist 0)", opt->shortlist);
        return -1;
    }
    return 0;
}

static int check_options(const pmt_search *s, const pmt_decode_options *opt, const int *src_len, int n,
                         char *err, size_t errlen) {
    const int max_src = s->m->max_len - 1;
    if (pmt_search_check_shortlist(s->m, opt, err, errlen) != 0) return -1;
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
        if (src_len[i] + 1 > s->m->max_rows) {
            snprintf(err, errlen, "search: sentence %d (%d tokens + EOS) exceeds the model's encoder arena (%d rows)",
                     i, src_len[i], s->m->max_rows);
            return -1;
        }
    }
    return 0;
}

int pmt_search_run(pmt_search *s, const pmt_decode_options *opt, const int32_t *const *src,
                   const int *src_len, int n, pmt_nbest *out, char *err, size_t errlen) {
    if (check_options(s, opt, src_len, n, err, errlen) != 0) return -1;
    search_pool *p = s->pool;
    for (int k = 0; k < p->n_lanes; k++) p->lanes[k].err[0] = '\0';
    sort_by_length(p->order, src_len, n);
    const int max_rows = s->m->max_rows;
    for (int pos = 0; pos < n;) {
        const int S = src_len[p->order[pos]] + 1;   /* longest first: the sub-batch's padded length */
        int count = n - pos;
        if (count * S > max_rows) count = max_rows / S;
        if (opt->should_stop && opt->should_stop(opt->should_stop_ctx)) {
            snprintf(err, errlen, "search: stopped by the caller");
            return PMT_SEARCH_STOPPED;
        }
        const int rc = decode_sub_batch(s, opt, src, src_len, p->order + pos, count, err, errlen);
        if (rc != 0) return rc;
        pos += count;
    }
    for (int i = 0; i < n; i++) {
        out[i].n = p->n_fin[i] < opt->n_best ? p->n_fin[i] : opt->n_best;
        out[i].hyp = p->fin + (size_t)i * s->max_beam;
    }
    return 0;
}
