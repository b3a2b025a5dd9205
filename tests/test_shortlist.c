/*
 * test_shortlist.c — the vocabulary shortlist (model/shortlist.h) and the
 * decoder and search over it:
 *  1. IBM Model 1 finds the word-for-word translations of a corpus built
 *     from them, keeps the frequent pieces by count, pads rows with -1,
 *     repeats bit for bit, and refuses bad sizes and ids out of range;
 *  2. a batch's vocabulary is the sorted union of EOS, UNK, the frequent
 *     pieces and the first k candidates of the real (not padding) source
 *     ids, with col_of its inverse;
 *  3. the model file stores it (version 2; version 1 without one) and the
 *     reader refuses a damaged one with a message;
 *  4. a shortlisted decoder's logits are the full decoder's at the listed
 *     ids (int8: the same bits; fp32 within rounding) normalised over the
 *     list, tokens outside it have log-probability −∞, the list covering
 *     every id gives the full decoder's log-probabilities (bf16 too, on a
 *     CPU with native bf16), and the search only outputs listed tokens; a
 *     model without a shortlist is refused.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/vocab.h"
#include "model/checkpoint.h"
#include "model/model_file.h"
#include "model/shortlist.h"
#include "nn/gemm.h"
#include "translate/beam_search.h"
#include "testutil.h"

/* ---------------------------------------------------------------- */
/* 1. IBM Model 1                                                    */

enum { LV = 16 };   /* source pieces 4..8 translate to 9..13 (f → f + 5) */

/* A corpus of n pairs: each source is a few of the pieces 4..8 in a
 * pseudo-random order, its target their translations reversed, and every
 * target starts with the filler piece 14 (the most frequent). */
static void make_corpus(pmt_corpus *c, int n) {
    c->n_pairs = n;
    c->src_off = calloc((size_t)n + 1, sizeof *c->src_off);
    c->tgt_off = calloc((size_t)n + 1, sizeof *c->tgt_off);
    c->src_ids = malloc((size_t)n * 5 * sizeof *c->src_ids);
    c->tgt_ids = malloc((size_t)n * 6 * sizeof *c->tgt_ids);
    unsigned st = 7;
    uint64_t s = 0, t = 0;
    for (int i = 0; i < n; i++) {
        st = st * 1103515245u + 12345u;
        const int len = 1 + (int)((st >> 16) % 4);
        int32_t words[4];
        for (int k = 0; k < len; k++) {
            st = st * 1103515245u + 12345u;
            words[k] = 4 + (int32_t)((st >> 16) % 5);
        }
        for (int k = 0; k < len; k++) c->src_ids[s++] = words[k];
        c->tgt_ids[t++] = 14;
        for (int k = len - 1; k >= 0; k--) c->tgt_ids[t++] = words[k] + 5;
        c->src_off[i + 1] = s;
        c->tgt_off[i + 1] = t;
    }
}

static void test_build(void) {
    char err[256];
    pmt_corpus c;
    make_corpus(&c, 300);
    pmt_shortlist *s = pmt_shortlist_build(&c, LV, 3, 2, 5, err, sizeof err);
    CHECK_MSG(s != NULL, "%s", err);
    if (!s) return;
    CHECK(s->vocab_size == LV && s->per_source == 3 && s->n_frequent == 2);
    for (int f = 4; f <= 8; f++) CHECK_MSG(s->candidates[f * 3] == f + 5, "piece %d: best %d", f, s->candidates[f * 3]);
    /* 14 precedes every target: the most frequent piece, and then the
     * translation that is most frequent. */
    CHECK(s->frequent[0] == 14);
    CHECK(s->frequent[1] >= 9 && s->frequent[1] <= 13);
    /* A source piece never seen has no candidates (the row is all -1). */
    for (int r = 0; r < 3; r++) CHECK(s->candidates[2 * 3 + r] == -1 && s->candidates[15 * 3 + r] == -1);
    CHECK(pmt_shortlist_validate(s, err, sizeof err) == 0);
    pmt_shortlist *again = pmt_shortlist_build(&c, LV, 3, 2, 5, err, sizeof err);
    CHECK(again && !memcmp(again->candidates, s->candidates, (size_t)LV * 3 * sizeof(int32_t)) &&
          !memcmp(again->frequent, s->frequent, 2 * sizeof(int32_t)));
    pmt_shortlist_free(again);
    /* A frequent list longer than the pieces ever seen shrinks to them (9..14). */
    pmt_shortlist *all = pmt_shortlist_build(&c, LV, 3, LV, 1, err, sizeof err);
    CHECK(all && all->n_frequent == 6);
    pmt_shortlist_free(all);

    err[0] = '\0';
    CHECK(pmt_shortlist_build(&c, LV, 0, 2, 5, err, sizeof err) == NULL && strstr(err, "bad sizes"));
    CHECK(pmt_shortlist_build(&c, LV, 3, LV + 1, 5, err, sizeof err) == NULL);
    CHECK(pmt_shortlist_build(&c, LV, 3, 2, 0, err, sizeof err) == NULL);
    c.tgt_ids[3] = LV;
    CHECK(pmt_shortlist_build(&c, LV, 3, 2, 5, err, sizeof err) == NULL && strstr(err, "target id 16"));
    c.tgt_ids[3] = 9;

    /* validate: -1 inside a row, an id out of range, sizes. */
    s->candidates[4 * 3 + 1] = -1;
    CHECK(pmt_shortlist_validate(s, err, sizeof err) != 0 && strstr(err, "source piece 4"));
    s->candidates[4 * 3 + 1] = LV;
    CHECK(pmt_shortlist_validate(s, err, sizeof err) != 0);
    s->candidates[4 * 3 + 1] = 10;
    s->frequent[1] = -3;
    CHECK(pmt_shortlist_validate(s, err, sizeof err) != 0 && strstr(err, "frequent"));
    pmt_shortlist_free(s);
    free(c.src_off); free(c.tgt_off); free(c.src_ids); free(c.tgt_ids);
}

/* A shortlist over V pieces with K candidates each: row f holds
 * (f·3 + r) mod V for r < K (wrapping, so rows overlap) and frequent the
 * given pieces. */
static pmt_shortlist *make_shortlist(int V, int K, const int32_t *frequent, int n_frequent) {
    pmt_shortlist *s = calloc(1, sizeof *s);
    s->vocab_size = V;
    s->per_source = K;
    s->n_frequent = n_frequent;
    s->frequent = malloc((size_t)(n_frequent ? n_frequent : 1) * sizeof *s->frequent);
    memcpy(s->frequent, frequent, (size_t)n_frequent * sizeof *frequent);
    s->candidates = malloc((size_t)V * K * sizeof *s->candidates);
    for (int f = 0; f < V; f++)
        for (int r = 0; r < K; r++) s->candidates[f * K + r] = (f * 3 + r) % V;
    return s;
}

/* ---------------------------------------------------------------- */
/* 2. a batch's vocabulary                                           */

static void test_batch(void) {
    enum { V = 40, K = 4, S = 4 };
    const int32_t frequent[] = {30, 31};
    pmt_shortlist *s = make_shortlist(V, K, frequent, 2);
    int32_t ids[V], col_of[V];
    /* Sentence 0: 5 6 EOS; sentence 1: 20 EOS, then ids past its length
     * (35, 36) that must not be read: their candidates (25, 26, 28, 29)
     * would be in the list. */
    const int32_t src[2 * S] = {5, 6, PMT_EOS_ID, 0, 20, PMT_EOS_ID, 35, 36}, len[2] = {3, 2};
    int n = pmt_shortlist_batch(s, 2, src, len, 2, S, ids, col_of);
    /* EOS 3, UNK 1, 30, 31; 5 → 15, 16; 6 → 18, 19; EOS (3) → 9, 10; 20 → 60 % 40 = 20, 21. */
    const int32_t want[] = {1, 3, 9, 10, 15, 16, 18, 19, 20, 21, 30, 31};
    CHECK_MSG(n == (int)(sizeof want / sizeof want[0]), "n = %d", n);
    for (int i = 0; i < n && i < (int)(sizeof want / sizeof want[0]); i++) CHECK(ids[i] == want[i]);
    for (int v = 0; v < V; v++) {
        int at = -1;
        for (int i = 0; i < n; i++)
            if (ids[i] == v) at = i;
        CHECK(col_of[v] == at);
    }
    /* k above K uses K; one sentence only. */
    n = pmt_shortlist_batch(s, 99, src, len, 1, S, ids, col_of);
    CHECK_MSG(n == 2 + 2 + 4 + 4 + 4 - 1, "n = %d", n);   /* UNK, EOS, 30, 31; 9..12 (EOS), 15..18, 18..21 */
    pmt_shortlist_free(s);
}

/* ---------------------------------------------------------------- */
/* 3. the model file                                                 */

enum { DV = 150, DM = 32 };

static int make_model(pmt_model *m, int weights) {
    pmt_config cfg;
    char err[256];
    pmt_config_defaults(&cfg);
    cfg.d_model = DM;
    cfg.n_heads = 2;
    cfg.d_ff = 64;
    cfg.enc_layers = cfg.dec_layers = 2;
    cfg.dropout = cfg.label_smoothing = 0.0;
    cfg.max_len = 16;
    if (pmt_model_init(m, &cfg, DV, 64, 16, err, sizeof err) != 0) {
        CHECK_MSG(0, "%s", err);
        return -1;
    }
    pmt_model_init_params(m, 5);
    m->decode_weights = weights;
    return 0;
}

static void test_model_file(const char *dir) {
    char ckpt[1100], out[1100], err[512];
    static const char spm[] = "spm stand-in";
    pmt_model m;
    if (make_model(&m, PMT_WEIGHTS_FP32) != 0) return;
    snprintf(ckpt, sizeof ckpt, "%s/m.ckpt", dir);
    CHECK_MSG(pmt_checkpoint_save(ckpt, &m, spm, sizeof spm, NULL, NULL, NULL, err, sizeof err) == 0, "%s", err);
    pmt_checkpoint ck;
    CHECK_MSG(pmt_checkpoint_load(&ck, ckpt, err, sizeof err) == 0, "%s", err);
    /* Without a shortlist: version 1, none read back. */
    snprintf(out, sizeof out, "%s/plain.pmt", dir);
    CHECK_MSG(pmt_model_file_export(out, &ck, PMT_WEIGHTS_INT8, 0, err, sizeof err) == 0, "%s", err);
    pmt_checkpoint e;
    CHECK_MSG(pmt_checkpoint_load(&e, out, err, sizeof err) == 0, "%s", err);
    CHECK(e.version == PMT_MODEL_FILE_VERSION_PLAIN && e.shortlist == NULL);
    pmt_checkpoint_free(&e);

    const int32_t frequent[] = {7, 3, 100};
    ck.shortlist = make_shortlist(DV, 5, frequent, 3);
    ck.shortlist->candidates[17 * 5 + 4] = -1;   /* a shorter row */
    snprintf(out, sizeof out, "%s/listed.pmt", dir);
    CHECK_MSG(pmt_model_file_export(out, &ck, PMT_WEIGHTS_INT8, 0, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(pmt_checkpoint_load(&e, out, err, sizeof err) == 0, "%s", err);
    CHECK(e.version == PMT_MODEL_FILE_VERSION && e.shortlist != NULL);
    if (e.shortlist) {
        const pmt_shortlist *a = ck.shortlist, *b = e.shortlist;
        CHECK(b->vocab_size == DV && b->per_source == 5 && b->n_frequent == 3);
        CHECK(!memcmp(a->frequent, b->frequent, 3 * sizeof(int32_t)));
        CHECK(!memcmp(a->candidates, b->candidates, (size_t)DV * 5 * sizeof(int32_t)));
    }
    /* The model takes it over from the file. */
    pmt_model loaded;
    CHECK_MSG(pmt_checkpoint_load_model(out, &loaded, 64, 0, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(loaded.shortlist && loaded.shortlist->per_source == 5);
    pmt_model_free(&loaded);
    pmt_checkpoint_free(&e);

    /* A damaged list (written as is: the writer trusts its caller) is refused. */
    ck.shortlist->candidates[3] = DV + 2;
    snprintf(out, sizeof out, "%s/bad.pmt", dir);
    CHECK_MSG(pmt_model_file_export(out, &ck, PMT_WEIGHTS_INT8, 0, err, sizeof err) == 0, "%s", err);
    err[0] = '\0';
    CHECK(pmt_checkpoint_load(&e, out, err, sizeof err) != 0);
    CHECK_MSG(strstr(err, "bad.pmt") && strstr(err, "corrupted") && strstr(err, "candidate"), "%s", err);
    /* A list for another vocabulary is not written. */
    ck.shortlist->candidates[3] = 1;
    ck.shortlist->vocab_size = DV - 1;
    CHECK(pmt_model_file_export(out, &ck, PMT_WEIGHTS_INT8, 0, err, sizeof err) != 0 && strstr(err, "vocabulary"));
    ck.shortlist->vocab_size = DV;
    pmt_checkpoint_free(&ck);
    pmt_model_free(&m);
}

/* ---------------------------------------------------------------- */
/* 4. the decoder and the search                                     */

enum { SENT = 2, BEAM = 2, S = 5, STEPS = 4, ROWS = SENT * BEAM };
static const int32_t SRC[SENT * S] = {5, 6, 7, 8, PMT_EOS_ID, 9, 10, 11, PMT_EOS_ID, 0};
static const int32_t SRC_LEN[SENT] = {5, 4};

/* The token row r is fed after step t: a listed one (ids: the batch's
 * n listed ids) or any (ids NULL), by the same rule, so that a list of
 * every id feeds what the full decoder is fed. */
static int32_t fed_token(const int32_t *ids, int n, int t, int r) {
    const int i = 4 + t * 5 + r * 3;
    return ids ? ids[i % n] : i % DV;
}

/* Runs STEPS steps of a decoder with shortlist_k k over m, fed the tokens
 * of fed_token over `feed` (NULL: the decoder's own list, or any token),
 * into logp [STEPS, ROWS, DV] (log-probabilities by token id) and logits
 * (by token id; NAN where the batch has no column). Returns n_vocab. */
static int run_decoder(pmt_model *m, int k, const int32_t *feed, int n_feed, double *logp, float *logits) {
    char err[256];
    pmt_decoder d;
    CHECK_MSG(pmt_decoder_init(&d, m, SENT, BEAM, err, sizeof err) == 0, "%s", err);
    /* The [V, C] rows of a shortlist are held from the first start that
     * uses it, never by a decoder that decodes without. */
    CHECK_MSG(!d.vocab_w && !d.vocab_ids, "the shortlist's arrays are allocated before any start uses them");
    d.shortlist_k = k;
    CHECK_MSG(pmt_decoder_start(&d, SRC, SRC_LEN, SENT, S, BEAM, 10, err, sizeof err) == 0, "%s", err);
    CHECK_MSG((d.vocab_w != NULL) == (k > 0), "k = %d: the shortlist's arrays are %s", k,
              d.vocab_w ? "allocated" : "missing");
    const int n_vocab = d.n_vocab;
    if (!feed && d.shortlisted) {
        feed = d.vocab_ids;
        n_feed = d.n_vocab;
    }
    int32_t tok[ROWS] = {PMT_BOS_ID, PMT_BOS_ID, PMT_BOS_ID, PMT_BOS_ID};
    for (int t = 0; t < STEPS; t++) {
        CHECK_MSG(pmt_decoder_step(&d, tok) != NULL, "%s", d.error);
        for (int r = 0; r < ROWS; r++) {
            const float *row = pmt_decoder_logits_row(&d, r);
            for (int v = 0; v < DV; v++) {
                const size_t at = ((size_t)t * ROWS + r) * DV + v;
                logp[at] = pmt_decoder_logprob(&d, r, v);
                const int col = d.shortlisted ? d.vocab_col[v] : v;
                logits[at] = col >= 0 ? row[col] : NAN;
            }
        }
        for (int r = 0; r < ROWS; r++) tok[r] = fed_token(feed, n_feed, t, r);
    }
    pmt_decoder_free(&d);
    return n_vocab;
}

static void test_decoder(int weights) {
    enum { N = STEPS * ROWS * DV };
    static double full_p[N], list_p[N];
    static float full_l[N], list_l[N];
    const double tol = weights == PMT_WEIGHTS_BF16 ? 1e-4 : 1e-5;
    pmt_model m;
    if (make_model(&m, weights) != 0) return;
    const int32_t frequent[] = {40, 41, 42};
    m.shortlist = make_shortlist(DV, 6, frequent, 3);
    int32_t ids[DV], col_of[DV];
    const int n = pmt_shortlist_batch(m.shortlist, 3, SRC, SRC_LEN, SENT, S, ids, col_of);
    CHECK_MSG(n > 4 && n < DV, "n = %d", n);
    /* The same listed tokens fed to both. */
    CHECK(run_decoder(&m, 3, ids, n, list_p, list_l) == n);
    CHECK(run_decoder(&m, 0, ids, n, full_p, full_l) == DV);
    size_t wrong = 0, outside = 0, normalised = 0;
    for (int t = 0; t < STEPS; t++)
        for (int r = 0; r < ROWS; r++) {
            const size_t base = ((size_t)t * ROWS + r) * DV;
            double lse = -INFINITY;   /* log Σ over the listed ids of the full logits */
            for (int v = 0; v < DV; v++)
                if (col_of[v] >= 0) lse = fmax(lse, (double)full_l[base + v]);
            double sum = 0;
            for (int v = 0; v < DV; v++)
                if (col_of[v] >= 0) sum += exp((double)full_l[base + v] - lse);
            lse += log(sum);
            for (int v = 0; v < DV; v++) {
                const size_t at = base + v;
                if (col_of[v] < 0) {
                    outside += !(list_p[at] == -INFINITY && isnan(list_l[at]));
                    continue;
                }
                /* int8: the same integer products per listed row, so the same
                 * bits; fp32 and bf16 products of another width may sum in
                 * another order. */
                if (weights == PMT_WEIGHTS_INT8 ? list_l[at] != full_l[at]
                                                : fabs((double)list_l[at] - full_l[at]) > tol * (1 + fabs(full_l[at])))
                    wrong++;
                if (fabs(list_p[at] - ((double)full_l[at] - lse)) > 1e-4) normalised++;
            }
        }
    CHECK_MSG(wrong == 0, "%s: %zu listed logits differ from the full decoder's", pmt_weight_type_name(weights), wrong);
    CHECK_MSG(outside == 0, "%zu unlisted tokens have a column or a finite log-probability", outside);
    CHECK_MSG(normalised == 0, "%zu log-probabilities are not normalised over the list", normalised);

    /* One decoder, with and without the list in turn: a start without it
     * is the whole vocabulary again, and one with it the same list. */
    {
        char err[256];
        pmt_decoder d;
        CHECK_MSG(pmt_decoder_init(&d, &m, SENT, BEAM, err, sizeof err) == 0, "%s", err);
        const int ks[3] = {3, 0, 3}, want[3] = {n, DV, n};
        for (int i = 0; i < 3; i++) {
            d.shortlist_k = ks[i];
            CHECK_MSG(pmt_decoder_start(&d, SRC, SRC_LEN, SENT, S, BEAM, 10, err, sizeof err) == 0, "%s", err);
            CHECK_MSG(d.n_vocab == want[i] && d.shortlisted == (ks[i] > 0), "start %d (k = %d): %d columns, want %d",
                      i, ks[i], d.n_vocab, want[i]);
        }
        pmt_decoder_free(&d);
    }

    /* A list that covers every id is the full decoder. */
    pmt_shortlist_free(m.shortlist);
    m.shortlist = make_shortlist(DV, DV, frequent, 3);
    CHECK(run_decoder(&m, DV, NULL, 0, list_p, list_l) == DV);
    CHECK(run_decoder(&m, 0, NULL, 0, full_p, full_l) == DV);
    size_t far = 0;
    for (size_t i = 0; i < N; i++) far += fabs(list_p[i] - full_p[i]) > tol;
    CHECK_MSG(far == 0, "%zu log-probabilities of the all-ids list differ from the full vocabulary's", far);
    pmt_model_free(&m);
}

/* The search outputs only listed tokens, and refuses a model without a list. */
static void test_search(void) {
    char err[256];
    pmt_model m;
    if (make_model(&m, PMT_WEIGHTS_FP32) != 0) return;
    const int32_t src0[] = {5, 6, 7}, src1[] = {9, 10, 11, 12};
    const int32_t *src[2] = {src0, src1};
    const int len[2] = {3, 4};
    pmt_decode_options opt = {3, 2, 1.0, 1.5, 3, PMT_COMPUTE_AUTO, 2, NULL, NULL};
    pmt_search s;
    CHECK_MSG(pmt_search_init(&s, &m, 4, 3, err, sizeof err) == 0, "%s", err);
    pmt_nbest out[2];
    err[0] = '\0';
    CHECK(pmt_search_run(&s, &opt, src, len, 2, out, err, sizeof err) != 0 && strstr(err, "no vocabulary shortlist"));
    pmt_search_free(&s);
    const int32_t frequent[] = {40};
    m.shortlist = make_shortlist(DV, 4, frequent, 1);
    CHECK_MSG(pmt_search_init(&s, &m, 4, 3, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(pmt_search_run(&s, &opt, src, len, 2, out, err, sizeof err) == 0, "%s", err);
    /* Both sentences decode in one lane, so one list: their union. */
    int32_t ids[DV], col_of[DV];
    int32_t padded[2 * 5] = {5, 6, 7, PMT_EOS_ID, 0, 9, 10, 11, 12, PMT_EOS_ID};
    const int32_t plen[2] = {4, 5};
    (void)pmt_shortlist_batch(m.shortlist, 2, padded, plen, 2, 5, ids, col_of);
    int hyps = 0, unlisted = 0;
    for (int i = 0; i < 2; i++)
        for (int h = 0; h < out[i].n; h++, hyps++)
            for (int j = 0; j < out[i].hyp[h].len; j++) unlisted += col_of[out[i].hyp[h].ids[j]] < 0;
    CHECK(hyps == 4);
    CHECK_MSG(unlisted == 0, "%d output tokens are outside the batch's shortlist", unlisted);
    opt.shortlist = -1;
    CHECK(pmt_search_run(&s, &opt, src, len, 2, out, err, sizeof err) != 0);
    pmt_search_free(&s);
    pmt_model_free(&m);
}

int main(void) {
    test_build();
    test_batch();
    test_model_file(test_tmpdir("shortlist"));
    test_decoder(PMT_WEIGHTS_FP32);
    test_decoder(PMT_WEIGHTS_INT8);
    if (pmt_cpu_has_bf16()) test_decoder(PMT_WEIGHTS_BF16);   /* the bf16 matmuls need native bf16 */
    test_search();
    return test_finish();
}
