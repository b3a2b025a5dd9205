/*
 * test_decode.c — the incremental decoder and the search.
 *
 *  1. Incremental == teacher-forced: feeding the reference target token by
 *     token through pmt_decoder_step gives the distribution of
 *     pmt_model_forward (eval mode) at every position, for all 8 attention
 *     combinations with fixed σ and the projection ones with learned σ, and
 *     every kernel and metric of the pooling family (also with a narrow σ,
 *     so that rows fall back to their nearest key);
 *     with 2 rows per sentence (shared cross-attention keys), a beam reorder
 *     (rows swapped) and a sentence dropped mid-way.
 *  2. beam 1 == greedy, where greedy is recomputed here from scratch with
 *     full teacher-forced passes over each growing prefix (no cache at all).
 *  3. n-best lists are sorted, scores are logprob/(len+1)^α, batched search
 *     equals one-by-one search, input order is kept, sub-batching forced
 *     by a small encoder arena changes nothing, and 1 or 2 threads give the
 *     same bits (the search's lanes do not depend on the thread count).
 *     Stepping only the live rows gives them the log-probs of stepping all
 *     (with int8 weights, the same bits: the products read and write the
 *     live rows in place).
 *  4. A tiny model overfitted in-test (Adam) to reverse a few sequences: beam
 *     and greedy search both find the trained outputs.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_file.h"
#include "translate/beam_search.h"
#include "testutil.h"

enum { V = 150 };   /* more than two of the search's top-token blocks (TOP_BLOCK = 64), with a tail */

/* The projection family make_model builds (config kernel / proj_metric);
 * main walks every accepted combination for the incremental test. */
static int proj_kernel = PMT_KERNEL_GAUSSIAN, proj_metric = PMT_METRIC_EUCLIDEAN;
static double proj_sigma_sq = 0;   /* 0: the kernel's default */

static int make_model(pmt_model *m, const int kinds[PMT_SITES], int learned, int d_model, int layers,
                      int max_rows, int max_len, uint64_t seed) {
    pmt_config cfg;
    char err[256];
    pmt_config_defaults(&cfg);
    cfg.d_model = d_model;
    cfg.n_heads = 2;
    cfg.d_ff = 2 * d_model;
    cfg.enc_layers = layers;
    cfg.dec_layers = layers;
    cfg.dropout = 0.0;
    cfg.label_smoothing = 0.0;
    cfg.max_len = max_len;
    cfg.batch_tokens = 4 * max_len;
    cfg.sigma_learned = learned;
    cfg.proj_kernel = proj_kernel;
    cfg.proj_metric = proj_metric;
    cfg.sigma_sq = proj_sigma_sq;
    for (int s = 0; s < PMT_SITES; s++) cfg.site_kind[s] = kinds[s];
    if (pmt_model_init(m, &cfg, V, max_rows, max_len, err, sizeof err) != 0) {
        CHECK_MSG(0, "model init: %s", err);
        return -1;
    }
    pmt_model_init_params(m, seed);
    /* Non-trivial LayerNorm/bias/σ values so every parameter matters. */
    for (int i = 0; i < m->n_tensors; i++) {
        const pmt_tensor *t = &m->tensors[i];
        if (t->cols == 1)
            for (size_t j = 0; j < t->size; j++) m->params[t->offset + j] += 0.2f * (float)sin(1.3 * (double)(j + 5 * i));
    }
    return 0;
}

static int32_t lcg_token(unsigned *state) {
    *state = *state * 1103515245u + 12345u;
    return 4 + (int32_t)((*state >> 16) % (V - 4));
}

/* ---------------------------------------------------------------- */
/* 1. incremental == teacher-forced                                  */

enum { NS = 3, HYP = 2, TB = NS * HYP, SMAX = 6, TMAX = 7 };

/* Teacher-forced batch of NS sources × HYP targets each (row b = i*HYP + k). */
static void make_forced_batch(pmt_batch *b, int32_t *src, int32_t *slen, int32_t *tin, int32_t *tout,
                              int32_t *tlen) {
    const int src_lens[NS] = {6, 2, 4}, tgt_lens[TB] = {7, 5, 3, 6, 7, 1};
    unsigned st = 11;
    for (int i = 0; i < NS; i++) {
        int32_t one[SMAX];
        for (int s = 0; s < SMAX; s++) one[s] = s < src_lens[i] - 1 ? lcg_token(&st) : (s == src_lens[i] - 1 ? PMT_EOS_ID : PMT_PAD_ID);
        for (int k = 0; k < HYP; k++) {
            memcpy(src + (i * HYP + k) * SMAX, one, sizeof one);
            slen[i * HYP + k] = src_lens[i];
        }
    }
    for (int r = 0; r < TB; r++) {
        tlen[r] = tgt_lens[r];
        for (int t = 0; t < TMAX; t++) {
            tout[r * TMAX + t] = t < tgt_lens[r] - 1 ? lcg_token(&st) : (t == tgt_lens[r] - 1 ? PMT_EOS_ID : PMT_PAD_ID);
            tin[r * TMAX + t] = t == 0 ? PMT_BOS_ID : (t < tgt_lens[r] ? tout[r * TMAX + t - 1] : PMT_PAD_ID);
        }
    }
    *b = (pmt_batch){TB, SMAX, TMAX, src, slen, tin, tout, tlen};
}

/* Compares decoder row r (at the step just run, position t) with row ref of
 * the teacher-forced output; returns the worst |Δ log p| over tokens. */
static double compare_row(const pmt_decoder *d, const float *ref_probs, int r, int ref, int t) {
    double worst = 0;
    const float *pr = ref_probs + ((size_t)ref * TMAX + t) * V;
    for (int v = 0; v < V; v++) {
        double a = pmt_decoder_logprob(d, r, v), b = log((double)pr[v]);
        double diff = fabs(a - b);
        if (diff > worst) worst = diff;
    }
    return worst;
}

static void test_incremental(const int kinds[PMT_SITES], int learned) {
    char label[96], err[256];
    snprintf(label, sizeof label, "%s/%s/%s%s %s/%s%s", pmt_attention_kind_name(kinds[0]),
             pmt_attention_kind_name(kinds[1]), pmt_attention_kind_name(kinds[2]), learned ? " learned-sigma" : "",
             pmt_kernel_name(proj_kernel), pmt_metric_name(proj_metric), proj_sigma_sq > 0 ? " narrow" : "");
    pmt_model m;
    if (make_model(&m, kinds, learned, 16, 2, 64, 16, 5) != 0) return;
    int32_t src[TB * SMAX], slen[TB], tin[TB * TMAX], tout[TB * TMAX], tlen[TB];
    pmt_batch b;
    make_forced_batch(&b, src, slen, tin, tout, tlen);
    pmt_model_forward(&m, &b, 0, 0, NULL);
    float *ref = malloc((size_t)TB * TMAX * V * sizeof(float));
    pmt_model_output_probs(&m, ref);

    pmt_decoder d;
    CHECK(pmt_decoder_init(&d, &m, NS, HYP, err, sizeof err) == 0);
    int32_t dsrc[NS * SMAX], dlen[NS];
    for (int i = 0; i < NS; i++) {
        memcpy(dsrc + i * SMAX, src + i * HYP * SMAX, SMAX * sizeof(int32_t));
        dlen[i] = slen[i * HYP];
    }
    CHECK_MSG(pmt_decoder_start(&d, dsrc, dlen, NS, SMAX, HYP, TMAX, err, sizeof err) == 0, "%s", err);
    /* which teacher-forced row each decoder row follows */
    int follows[TB];
    for (int r = 0; r < TB; r++) follows[r] = r;
    double worst = 0;
    int compared = 0;
    for (int t = 0; t < TMAX; t++) {
        int32_t tok[TB];
        for (int r = 0; r < d.rows; r++) tok[r] = tin[follows[r] * TMAX + t];
        pmt_decoder_step(&d, tok);
        for (int r = 0; r < d.rows; r++) {
            if (t >= tlen[follows[r]]) continue;   /* padding in the reference */
            double w = compare_row(&d, ref, r, follows[r], t);
            if (w > worst) worst = w;
            compared++;
        }
        if (t == 2) {
            /* Swap the two rows of every sentence and drop sentence 1: new
             * rows continue old rows {1, 0, 5, 4}; the swapped rows then
             * follow each other's teacher-forced targets, which share the
             * prefix only if the gathered cache is right — so make the
             * continuing row follow its parent's reference. */
            const int32_t keep[2] = {0, 2};
            const int32_t parent[4] = {1, 0, 5, 4};
            pmt_decoder_reorder(&d, parent, keep, 2);
            int nf[TB];
            for (int r = 0; r < 4; r++) nf[r] = follows[parent[r]];
            memcpy(follows, nf, sizeof nf);
            CHECK(d.rows == 4 && d.n_sent == 2);
        }
    }
    CHECK_MSG(worst < 2e-4, "%s: incremental vs teacher-forced max |dlogp| = %.3g", label, worst);
    CHECK(compared > 20);
    printf("incremental %-40s max |dlogp| %.2e over %d rows\n", label, worst, compared);
    pmt_decoder_free(&d);
    free(ref);
    pmt_model_free(&m);
}

/* ---------------------------------------------------------------- */
/* 2./3. search                                                      */

/* Greedy from scratch: one full teacher-forced pass per output token. */
static int greedy_reference(pmt_model *m, const int32_t *src, int slen, int L, int32_t *out, double *logprob) {
    int32_t s[64], sl = slen + 1, tin[64], tout[64], tl;
    memcpy(s, src, (size_t)slen * sizeof *src);
    s[slen] = PMT_EOS_ID;
    tin[0] = PMT_BOS_ID;
    float *probs = malloc((size_t)(L + 1) * V * sizeof(float));
    *logprob = 0;
    int n = 0;
    for (;;) {
        tl = n + 1;
        for (int t = 0; t < tl; t++) tout[t] = PMT_EOS_ID;   /* any counted target */
        pmt_batch b = {1, sl, tl, s, &sl, tin, tout, &tl};
        pmt_model_forward(m, &b, 0, 0, NULL);
        pmt_model_output_probs(m, probs);
        const float *p = probs + (size_t)n * V;
        int best = 0;
        for (int v = 1; v < V; v++)
            if (v != PMT_PAD_ID && v != PMT_BOS_ID && (best == PMT_PAD_ID || p[v] > p[best])) best = v;
        if (n == L) best = PMT_EOS_ID;
        *logprob += log((double)p[best]);
        if (best == PMT_EOS_ID) break;
        out[n++] = best;
        tin[n] = best;
    }
    free(probs);
    return n;
}

enum { NSENT = 5 };
static const int sent_lens[NSENT] = {3, 7, 1, 5, 7};

static void make_sources(int32_t src[NSENT][16], const int32_t *ptrs[NSENT], unsigned seed) {
    for (int i = 0; i < NSENT; i++) {
        for (int j = 0; j < sent_lens[i]; j++) src[i][j] = lcg_token(&seed);
        ptrs[i] = src[i];
    }
}

static int same_nbest(const pmt_nbest *a, const pmt_nbest *b) {
    if (a->n != b->n) return 0;
    for (int k = 0; k < a->n; k++) {
        if (a->hyp[k].len != b->hyp[k].len) return 0;
        if (memcmp(a->hyp[k].ids, b->hyp[k].ids, (size_t)a->hyp[k].len * sizeof(int32_t))) return 0;
        if (fabs(a->hyp[k].score - b->hyp[k].score) > 1e-4) return 0;
    }
    return 1;
}

/* pmt_decoder_step_live: the live rows (a prefix of each sentence's beam
 * rows) get the log-probs that stepping every row gives them (products over
 * fewer rows may round differently), over steps where the live counts change
 * and rows are reordered. */
static void test_live_rows(const int kinds[PMT_SITES], int weights) {
    enum { NS = 3, BEAM = 3, S = 6, STEPS = 4 };
    char err[256];
    pmt_model m;
    if (make_model(&m, kinds, 0, 16, 2, 64, 16, 11) != 0) return;
    m.decode_weights = weights;
    pmt_decoder all, live;
    CHECK(pmt_decoder_init(&all, &m, NS, BEAM, err, sizeof err) == 0);
    CHECK(pmt_decoder_init(&live, &m, NS, BEAM, err, sizeof err) == 0);
    int32_t src[NS * S], slen[NS] = {6, 4, 2};
    unsigned seed = 9;
    for (int i = 0; i < NS * S; i++) src[i] = lcg_token(&seed);
    CHECK(pmt_decoder_start(&all, src, slen, NS, S, BEAM, 8, err, sizeof err) == 0);
    CHECK(pmt_decoder_start(&live, src, slen, NS, S, BEAM, 8, err, sizeof err) == 0);
    const int32_t counts[STEPS][NS] = {{1, 1, 1}, {3, 2, 1}, {2, 3, 3}, {1, 0, 2}};
    /* after step t, row r continues row parent[t][r] of its sentence, a
     * row live at step t */
    const int32_t parent[STEPS - 1][NS * BEAM] = {{0, 0, 0, 3, 3, 3, 6, 6, 6},
                                                  {1, 0, 2, 4, 3, 3, 6, 6, 6},
                                                  {1, 0, 0, 5, 3, 4, 8, 7, 6}};
    const int32_t keep[NS] = {0, 1, 2};
    double worst = 0;
    for (int t = 0; t < STEPS; t++) {
        int32_t tok[NS * BEAM];
        for (int r = 0; r < NS * BEAM; r++) tok[r] = 4 + (t * 7 + r * 3) % (V - 4);
        pmt_decoder_step(&all, tok);
        pmt_decoder_step_live(&live, tok, counts[t]);
        CHECK(live.n_live == counts[t][0] + counts[t][1] + counts[t][2]);
        for (int j = 0; j < NS; j++)
            for (int i = 0; i < counts[t][j]; i++)
                for (int id = 0; id < V; id++) {
                    double d = fabs(pmt_decoder_logprob(&all, j * BEAM + i, id) - pmt_decoder_logprob(&live, j * BEAM + i, id));
                    if (d > worst) worst = d;
                }
        for (int j = 0; j < NS; j++)
            for (int i = counts[t][j]; i < BEAM; i++) CHECK(live.logit_slot[j * BEAM + i] == -1);
        if (t + 1 < STEPS) {
            pmt_decoder_reorder(&all, parent[t], keep, NS);
            pmt_decoder_reorder(&live, parent[t], keep, NS);
        }
    }
    /* int8 rows are quantised each by itself and summed exactly in
     * integers, so a row's values do not depend on the rows run with it. */
    if (weights == PMT_WEIGHTS_INT8)
        CHECK_MSG(worst == 0, "int8 live-row steps differ from all-row steps by %.3g", worst);
    else
        CHECK_MSG(worst < 1e-5, "live-row steps differ from all-row steps by %.3g", worst);
    pmt_decoder_free(&all);
    pmt_decoder_free(&live);
    pmt_model_free(&m);
}

static void test_search_random(const int kinds[PMT_SITES]) {
    char err[256];
    pmt_model m;
    if (make_model(&m, kinds, 0, 16, 2, 64, 24, 9) != 0) return;
    int32_t src[NSENT][16];
    const int32_t *ptrs[NSENT];
    make_sources(src, ptrs, 3);
    pmt_decode_options opt = {1, 1, 1.0, 1.0, 4, PMT_COMPUTE_AUTO, 0, NULL, NULL};
    pmt_search s;
    CHECK(pmt_search_init(&s, &m, NSENT, 4, err, sizeof err) == 0);

    /* beam 1 == greedy from scratch */
    pmt_nbest out[NSENT];
    CHECK_MSG(pmt_search_run(&s, &opt, ptrs, sent_lens, NSENT, out, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < NSENT; i++) {
        int32_t ref[64];
        double ref_lp;
        int L = pmt_search_max_output(&m, &opt, sent_lens[i]);
        int n = greedy_reference(&m, src[i], sent_lens[i], L, ref, &ref_lp);
        CHECK(out[i].n == 1);
        CHECK_MSG(out[i].hyp[0].len == n && !memcmp(out[i].hyp[0].ids, ref, (size_t)n * sizeof(int32_t)),
                  "sentence %d: beam-1 length %d, greedy length %d", i, out[i].hyp[0].len, n);
        CHECK_NEAR(out[i].hyp[0].logprob, ref_lp, 1e-3);
        CHECK_NEAR(out[i].hyp[0].score, ref_lp / (n + 1), 1e-3);
    }

    /* beam 4, n-best 3: sorted, consistent scores, batch == one by one */
    opt = (pmt_decode_options){4, 3, 0.7, 1.5, 3, PMT_COMPUTE_AUTO, 0, NULL, NULL};
    pmt_nbest batch[NSENT];
    const long steps_before = s.stats.steps;
    CHECK(pmt_search_run(&s, &opt, ptrs, sent_lens, NSENT, batch, err, sizeof err) == 0);
    const long batch_steps = s.stats.steps - steps_before;
    pmt_search one;
    CHECK(pmt_search_init(&one, &m, 1, 4, err, sizeof err) == 0);
    for (int i = 0; i < NSENT; i++) {
        CHECK(batch[i].n == 3);
        for (int k = 0; k < batch[i].n; k++) {
            const pmt_hypothesis *h = &batch[i].hyp[k];
            CHECK_NEAR(h->score, h->logprob / pow(h->len + 1, 0.7), 1e-9);
            CHECK(h->len <= pmt_search_max_output(&m, &opt, sent_lens[i]));
            for (int j = 0; j < h->len; j++) CHECK(h->ids[j] != PMT_EOS_ID && h->ids[j] != PMT_BOS_ID);
            if (k > 0) CHECK(batch[i].hyp[k - 1].score >= h->score);
        }
        pmt_nbest single;
        CHECK(pmt_search_run(&one, &opt, &ptrs[i], &sent_lens[i], 1, &single, err, sizeof err) == 0);
        CHECK_MSG(same_nbest(&batch[i], &single), "sentence %d: batched n-best differs from one-by-one", i);
    }
    pmt_search_free(&one);

    /* A model whose encoder arena holds only 8 rows: sub-batches of one or
     * two sentences, same results in the same order. */
    pmt_model small;
    if (make_model(&small, kinds, 0, 16, 2, 8, 24, 9) == 0) {
        pmt_search ss;
        CHECK(pmt_search_init(&ss, &small, NSENT, 4, err, sizeof err) == 0);
        pmt_nbest split[NSENT];
        CHECK_MSG(pmt_search_run(&ss, &opt, ptrs, sent_lens, NSENT, split, err, sizeof err) == 0, "%s", err);
        for (int i = 0; i < NSENT; i++) CHECK_MSG(same_nbest(&batch[i], &split[i]), "sentence %d: sub-batched differs", i);
        CHECK(ss.stats.steps > batch_steps);   /* really ran several sub-batches */
        pmt_search_free(&ss);
        pmt_model_free(&small);
    }

    /* The same bits for any thread count: the search's lanes and who goes
     * where depend on the sentences only (2 lanes here, run by 1 or 2
     * threads, also in the other order). */
    pmt_hypothesis hyps[2][NSENT][4];
    int32_t ids[2][NSENT][4][24];
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        pmt_nbest res[NSENT];
        CHECK(pmt_search_run(&s, &opt, ptrs, sent_lens, NSENT, res, err, sizeof err) == 0);
        for (int i = 0; i < NSENT; i++)
            for (int k = 0; k < res[i].n; k++) {
                hyps[threads - 1][i][k] = res[i].hyp[k];
                memcpy(ids[threads - 1][i][k], res[i].hyp[k].ids, (size_t)res[i].hyp[k].len * sizeof(int32_t));
            }
    }
    omp_set_num_threads(2);
    for (int i = 0; i < NSENT; i++)
        for (int k = 0; k < 3; k++) {
            const pmt_hypothesis *a = &hyps[0][i][k], *b = &hyps[1][i][k];
            CHECK_MSG(a->len == b->len && a->logprob == b->logprob && a->score == b->score &&
                          !memcmp(ids[0][i][k], ids[1][i][k], (size_t)a->len * sizeof(int32_t)),
                      "sentence %d hypothesis %d: 1 and 2 threads differ (%.17g vs %.17g)", i, k, a->score, b->score);
        }

    /* bad options fail with a message, not a crash */
    pmt_decode_options bad = opt;
    bad.n_best = 5;
    CHECK(pmt_search_run(&s, &bad, ptrs, sent_lens, NSENT, batch, err, sizeof err) == -1 && strstr(err, "n-best"));
    bad = opt;
    bad.beam_size = 9;
    CHECK(pmt_search_run(&s, &bad, ptrs, sent_lens, NSENT, batch, err, sizeof err) == -1 && strstr(err, "beam"));
    int too_long = 24;
    CHECK(pmt_search_run(&s, &opt, ptrs, &too_long, 1, batch, err, sizeof err) == -1 && strstr(err, "source tokens"));
    pmt_search_free(&s);
    pmt_model_free(&m);
}

/* The lanes a search deals a sub-batch to depend on its size and the beam
 * (beam_search.c: about 32 rows a lane, at most 8 lanes, larger ones
 * beyond): every size from one sentence to past the lane cap, greedy and
 * beam 4, gives each sentence the n-best it gets alone. */
enum { LANE_SENT = 150 };
static void test_search_lanes(void) {
    char err[256];
    const int standard[PMT_SITES] = {0, 0, 0};
    pmt_model m;
    if (make_model(&m, standard, 0, 16, 1, LANE_SENT * 8, 24, 5) != 0) return;
    static int32_t src[LANE_SENT][7];
    const int32_t *ptrs[LANE_SENT];
    int lens[LANE_SENT];
    unsigned seed = 17;
    for (int i = 0; i < LANE_SENT; i++) {
        lens[i] = 1 + (int)(lcg_token(&seed) % 7);
        for (int j = 0; j < lens[i]; j++) src[i][j] = lcg_token(&seed);
        ptrs[i] = src[i];
    }
    pmt_search s, one;
    CHECK_MSG(pmt_search_init(&s, &m, LANE_SENT, 4, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(pmt_search_init(&one, &m, 1, 4, err, sizeof err) == 0, "%s", err);
    static const int sizes[] = {2, 3, 9, 17, 33, 64, 129, LANE_SENT};
    for (int beam = 1; beam <= 4; beam += 3) {
        const pmt_decode_options opt = {beam, beam, 0.6, 1.5, 3, PMT_COMPUTE_AUTO, 0, NULL, NULL};
        static pmt_nbest alone[LANE_SENT], batch[LANE_SENT];
        static int32_t alone_ids[LANE_SENT][4][32];
        static pmt_hypothesis alone_hyp[LANE_SENT][4];
        for (int i = 0; i < LANE_SENT; i++) {
            CHECK(pmt_search_run(&one, &opt, &ptrs[i], &lens[i], 1, &alone[i], err, sizeof err) == 0);
            for (int k = 0; k < alone[i].n; k++) {   /* the next run reuses one's pool */
                alone_hyp[i][k] = alone[i].hyp[k];
                memcpy(alone_ids[i][k], alone[i].hyp[k].ids, (size_t)alone[i].hyp[k].len * sizeof(int32_t));
                alone_hyp[i][k].ids = alone_ids[i][k];
            }
            alone[i].hyp = alone_hyp[i];
        }
        for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
            const int n = sizes[z];
            CHECK_MSG(pmt_search_run(&s, &opt, ptrs, lens, n, batch, err, sizeof err) == 0, "beam %d, %d sentences: %s",
                      beam, n, err);
            int same = 1;
            for (int i = 0; i < n; i++) same &= same_nbest(&batch[i], &alone[i]);
            CHECK_MSG(same, "beam %d, %d sentences: a batched n-best differs from the sentence alone", beam, n);
        }
    }
    pmt_search_free(&one);
    pmt_search_free(&s);
    pmt_model_free(&m);
}

/* ---------------------------------------------------------------- */
/* 4. overfitted reversal model                                      */

enum { NTRAIN = 6, TS = 6 };

static void adam_step(pmt_model *m, float *mom, float *vel, int step, double lr) {
    const double b1 = 0.9, b2 = 0.98, eps = 1e-9;
    const double c1 = 1 - pow(b1, step), c2 = 1 - pow(b2, step);
    for (size_t i = 0; i < m->n_params; i++) {
        double g = m->grads[i];
        mom[i] = (float)(b1 * mom[i] + (1 - b1) * g);
        vel[i] = (float)(b2 * vel[i] + (1 - b2) * g * g);
        m->params[i] -= (float)(lr * (mom[i] / c1) / (sqrt(vel[i] / c2) + eps));
    }
}

static void test_overfit(const int kinds[PMT_SITES], const char *label) {
    char err[256];
    pmt_model m;
    if (make_model(&m, kinds, 0, 32, 1, 64, 12, 21) != 0) return;
    const int lens[NTRAIN] = {3, 5, 4, 2, 5, 3};
    int32_t src[NTRAIN * TS] = {0}, slen[NTRAIN], tin[NTRAIN * TS] = {0}, tout[NTRAIN * TS] = {0}, tlen[NTRAIN];
    const int32_t *ptrs[NTRAIN];
    int raw_len[NTRAIN];
    unsigned st = 77;
    for (int i = 0; i < NTRAIN; i++) {
        int n = lens[i];
        for (int j = 0; j < n; j++) src[i * TS + j] = lcg_token(&st);
        src[i * TS + n] = PMT_EOS_ID;
        slen[i] = n + 1;
        tlen[i] = n + 1;
        tin[i * TS] = PMT_BOS_ID;
        for (int j = 0; j < n; j++) {
            tout[i * TS + j] = src[i * TS + n - 1 - j];   /* reversed */
            tin[i * TS + j + 1] = tout[i * TS + j];
        }
        tout[i * TS + n] = PMT_EOS_ID;
        ptrs[i] = src + i * TS;
        raw_len[i] = n;
    }
    pmt_batch b = {NTRAIN, TS, TS, src, slen, tin, tout, tlen};
    float *mom = calloc(m.n_params, sizeof(float)), *vel = calloc(m.n_params, sizeof(float));
    pmt_stats stats = {0};
    for (int step = 1; step <= 400; step++) {
        pmt_model_zero_grad(&m);
        pmt_model_forward(&m, &b, 0, 0, &stats);
        pmt_model_backward(&m, &b, stats.tokens);
        adam_step(&m, mom, vel, step, 3e-3);
    }
    pmt_model_forward(&m, &b, 0, 0, &stats);
    CHECK_MSG(stats.correct == stats.tokens, "%s: overfit reached %d/%d correct tokens", label, stats.correct, stats.tokens);

    pmt_search s;
    CHECK(pmt_search_init(&s, &m, NTRAIN, 4, err, sizeof err) == 0);
    for (int beam = 1; beam <= 4; beam += 3) {
        pmt_decode_options opt = {beam, beam, 1.0, 1.0, 2, PMT_COMPUTE_AUTO, 0, NULL, NULL};
        pmt_nbest out[NTRAIN];
        CHECK(pmt_search_run(&s, &opt, ptrs, raw_len, NTRAIN, out, err, sizeof err) == 0);
        int found = 0;
        for (int i = 0; i < NTRAIN; i++) {
            const pmt_hypothesis *h = &out[i].hyp[0];
            found += h->len == lens[i] && !memcmp(h->ids, tout + i * TS, (size_t)lens[i] * sizeof(int32_t));
            CHECK(h->logprob > -0.5);   /* confident */
            for (int k = 1; k < out[i].n; k++) CHECK(out[i].hyp[k].score <= h->score);
        }
        CHECK_MSG(found == NTRAIN, "%s beam %d: %d/%d reversals found", label, beam, found, NTRAIN);
        printf("overfit %-12s beam %d: %d/%d reversals found\n", label, beam, found, NTRAIN);
    }
    pmt_search_free(&s);
    free(mom);
    free(vel);
    pmt_model_free(&m);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int combo = 0; combo < 8; combo++) {
        int kinds[PMT_SITES] = {combo & 1, (combo >> 1) & 1, (combo >> 2) & 1};
        test_incremental(kinds, 0);
        if (combo) test_incremental(kinds, 1);
    }
    const int all_std[PMT_SITES] = {0, 0, 0}, all_proj[PMT_SITES] = {1, 1, 1}, mixed[PMT_SITES] = {1, 0, 1};
    /* Every kernel and metric of the projection family (as the config
     * accepts them), at all sites and at the self-attention sites only. */
    const int self_only[PMT_SITES] = {1, 1, 0};
    for (proj_kernel = 0; proj_kernel < PMT_KERNELS; proj_kernel++)
        for (proj_metric = 0; proj_metric < PMT_METRICS; proj_metric++) {
            const int flat = proj_kernel == PMT_KERNEL_BOXCAR || proj_kernel == PMT_KERNEL_CONSTANT;
            if ((proj_kernel == PMT_KERNEL_GAUSSIAN && proj_metric == PMT_METRIC_EUCLIDEAN) ||
                (proj_metric == PMT_METRIC_DOT && proj_kernel != PMT_KERNEL_GAUSSIAN) ||
                (flat && proj_metric != PMT_METRIC_EUCLIDEAN))
                continue;
            test_incremental(all_proj, 0);
            if (!flat) test_incremental(all_proj, 1);
            test_incremental(self_only, 0);
        }
    /* σ² = 2: most rows of the edged kernels have no key in range and take
     * their nearest key, which must be the same key in both passes. */
    proj_metric = PMT_METRIC_EUCLIDEAN;
    proj_sigma_sq = 2.0;
    for (proj_kernel = PMT_KERNEL_BOXCAR; proj_kernel <= PMT_KERNEL_EPANECHNIKOV; proj_kernel += 2)
        test_incremental(all_proj, 0);
    proj_sigma_sq = 0;
    proj_kernel = PMT_KERNEL_GAUSSIAN;
    test_live_rows(all_std, PMT_WEIGHTS_FP32);
    test_live_rows(all_proj, PMT_WEIGHTS_FP32);
    /* int8 weights read and write the live rows in place (nn/gemm.h). */
    test_live_rows(all_std, PMT_WEIGHTS_INT8);
    test_live_rows(all_proj, PMT_WEIGHTS_INT8);
    test_search_random(all_std);
    test_search_random(all_proj);
    test_search_random(mixed);
    test_search_lanes();
    test_overfit(all_std, "standard");
    test_overfit(all_proj, "projection");
    /* The pooling family searches and learns too. */
    proj_kernel = PMT_KERNEL_EPANECHNIKOV;
    proj_metric = PMT_METRIC_COSINE;
    test_search_random(all_proj);
    test_overfit(all_proj, "epanechnikov/cosine");
    return test_finish();
}
