/*
 * test_batcher.c — the batcher keeps the token budget, serves every pair
 * exactly once per epoch with correct bos/eos/padding, truncates long
 * sentences, and its batch order is a pure function of (seed, epoch).
 * With blocks (a corpus larger than block_pairs) the same holds, the epoch's
 * end is exact, n_batches becomes exact after the first epoch, and a
 * batcher that starts mid-epoch (a resume) serves the same batches as one
 * that went through from the start. A batcher given the vocabulary replaces
 * and counts ids outside it.
 */
#include <stdlib.h>
#include <string.h>

#include "data/batcher.h"
#include "core/rng.h"
#include "testutil.h"

enum { N_PAIRS = 500, MAX_LEN = 24, BUDGET = 400 };

/* Pair i: source ids start with 4 + i (so a row names its pair); source
 * lengths random in [1, 30] so some exceed MAX_LEN - 1, target lengths within
 * +-3 of the source, as in real translations. */
static void make_corpus(pmt_corpus *c, int n_pairs, uint64_t seed) {
    pmt_rng rng = {seed};
    c->n_pairs = n_pairs;
    c->src_off = malloc((size_t)(n_pairs + 1) * sizeof(uint64_t));
    c->tgt_off = malloc((size_t)(n_pairs + 1) * sizeof(uint64_t));
    c->src_off[0] = c->tgt_off[0] = 0;
    for (int i = 0; i < n_pairs; i++) {
        c->src_off[i + 1] = c->src_off[i] + 1 + pmt_rng_below(&rng, 30);
        int ls = (int)(c->src_off[i + 1] - c->src_off[i]), lt = ls - 3 + (int)pmt_rng_below(&rng, 7);
        c->tgt_off[i + 1] = c->tgt_off[i] + (uint64_t)(lt > 1 ? lt : 1);
    }
    c->src_ids = malloc(c->src_off[n_pairs] * sizeof(int32_t));
    c->tgt_ids = malloc(c->tgt_off[n_pairs] * sizeof(int32_t));
    for (int i = 0; i < n_pairs; i++) {
        for (uint64_t k = c->src_off[i]; k < c->src_off[i + 1]; k++)
            c->src_ids[k] = k == c->src_off[i] ? 4 + i : 4 + (int32_t)(k % 97);
        for (uint64_t k = c->tgt_off[i]; k < c->tgt_off[i + 1]; k++) c->tgt_ids[k] = 5 + (int32_t)(k % 89);
    }
}

static void free_corpus(pmt_corpus *c) {
    free(c->src_off); free(c->tgt_off); free(c->src_ids); free(c->tgt_ids);
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* Checks one filled batch row by row against the corpus; marks pairs seen. */
static void check_batch(const pmt_corpus *c, const pmt_batch *x, int *seen, long *real, long *cells) {
    CHECK_MSG((long)x->B * (x->S + x->T) <= BUDGET, "B %d S %d T %d", x->B, x->S, x->T);
    CHECK(x->S <= MAX_LEN && x->T <= MAX_LEN);
    int max_s = 0, max_t = 0;
    for (int r = 0; r < x->B; r++) {
        const int32_t *src = x->src + (size_t)r * x->S;
        int i = src[0] - 4;
        if (i < 0 || i >= c->n_pairs) { CHECK_MSG(0, "row %d names no pair (%d)", r, src[0]); continue; }
        seen[i]++;
        int s = min_int(pmt_corpus_src_len(c, i), MAX_LEN - 1), t = min_int(pmt_corpus_tgt_len(c, i), MAX_LEN - 1);
        int ok = x->src_len[r] == s + 1 && x->tgt_len[r] == t + 1;
        ok &= memcmp(src, c->src_ids + c->src_off[i], (size_t)s * sizeof(int32_t)) == 0 && src[s] == PMT_EOS_ID;
        for (int j = s + 1; j < x->S; j++) ok &= src[j] == PMT_PAD_ID;
        const int32_t *in = x->tgt_in + (size_t)r * x->T, *out = x->tgt_out + (size_t)r * x->T;
        ok &= in[0] == PMT_BOS_ID && memcmp(in + 1, c->tgt_ids + c->tgt_off[i], (size_t)t * sizeof(int32_t)) == 0;
        ok &= memcmp(out, c->tgt_ids + c->tgt_off[i], (size_t)t * sizeof(int32_t)) == 0 && out[t] == PMT_EOS_ID;
        for (int j = t + 1; j < x->T; j++) ok &= in[j] == PMT_PAD_ID && out[j] == PMT_PAD_ID;
        CHECK_MSG(ok, "row %d (pair %d) is not bos/eos/pad-formatted as expected", r, i);
        if (s + 1 > max_s) max_s = s + 1;
        if (t + 1 > max_t) max_t = t + 1;
        *real += s + t + 2;
    }
    CHECK(x->S == max_s && x->T == max_t);
    *cells += (long)x->B * (x->S + x->T);
}

static void test_epochs_cover_every_pair(const pmt_corpus *c) {
    char err[256];
    pmt_batcher b;
    CHECK(pmt_batcher_init(&b, c, BUDGET, MAX_LEN, 7, 1, err, sizeof err) == 0);
    int expect_trunc = 0;
    for (int i = 0; i < c->n_pairs; i++)
        expect_trunc += pmt_corpus_src_len(c, i) > MAX_LEN - 1 || pmt_corpus_tgt_len(c, i) > MAX_LEN - 1;
    CHECK(expect_trunc > 0 && b.n_truncated == expect_trunc);
    int *seen = calloc((size_t)c->n_pairs, sizeof *seen);
    for (int epoch = 0; epoch < 3; epoch++) {
        memset(seen, 0, (size_t)c->n_pairs * sizeof *seen);
        long real = 0, cells = 0;
        for (int k = 0; k < b.n_batches; k++) {
            int tokens = pmt_batcher_target_tokens(&b, epoch, k);
            const pmt_batch *x = pmt_batcher_fill(&b, epoch, k);
            int sum = 0;
            for (int r = 0; r < x->B; r++) sum += x->tgt_len[r];
            CHECK(tokens == sum);
            check_batch(c, x, seen, &real, &cells);
        }
        int once = 1;
        for (int i = 0; i < c->n_pairs; i++) once &= seen[i] == 1;
        CHECK_MSG(once, "epoch %d does not serve every pair exactly once", epoch);
        /* Length bucketing keeps padding small. */
        CHECK_MSG((double)real / (double)cells > 0.85, "only %.1f%% of batch cells are real tokens",
                  100.0 * (double)real / (double)cells);
    }
    free(seen);
    pmt_batcher_free(&b);
}

/* Batch ids of an epoch as a list. */
static void epoch_order(pmt_batcher *b, int epoch, int *ids) {
    for (int k = 0; k < b->n_batches; k++) ids[k] = pmt_batcher_batch_id(b, epoch, k);
}

static void test_order_is_function_of_seed_and_epoch(const pmt_corpus *c) {
    char err[256];
    pmt_batcher a, b, d, v;
    CHECK(pmt_batcher_init(&a, c, BUDGET, MAX_LEN, 7, 1, err, sizeof err) == 0);
    CHECK(pmt_batcher_init(&b, c, BUDGET, MAX_LEN, 7, 1, err, sizeof err) == 0);
    CHECK(pmt_batcher_init(&d, c, BUDGET, MAX_LEN, 8, 1, err, sizeof err) == 0);
    CHECK(pmt_batcher_init(&v, c, BUDGET, MAX_LEN, 7, 0, err, sizeof err) == 0);
    int n = a.n_batches;
    CHECK(n > 10 && b.n_batches == n);
    int *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    /* Same seed: same cut and same order, even when epochs are visited out of order. */
    CHECK(memcmp(a.batch_start, b.batch_start, (size_t)(n + 1) * sizeof(int)) == 0);
    epoch_order(&a, 3, x);
    epoch_order(&b, 1, y);
    epoch_order(&b, 3, y);
    CHECK(memcmp(x, y, (size_t)n * sizeof *x) == 0);
    /* Different epochs differ; a different seed differs. */
    epoch_order(&a, 4, y);
    CHECK(memcmp(x, y, (size_t)n * sizeof *x) != 0);
    epoch_order(&d, 3, y);
    CHECK(memcmp(x, y, (size_t)n * sizeof *x) != 0);
    /* No shuffle: length order, the same every epoch. */
    int identity = 1;
    for (int e = 0; e < 3; e++)
        for (int k = 0; k < v.n_batches; k++) identity &= pmt_batcher_batch_id(&v, e, k) == k;
    CHECK(identity);
    free(x);
    free(y);
    pmt_batcher_free(&a);
    pmt_batcher_free(&b);
    pmt_batcher_free(&d);
    pmt_batcher_free(&v);
}

static void test_errors(const pmt_corpus *c) {
    char err[256] = "";
    pmt_batcher b;
    CHECK(pmt_batcher_init(&b, c, 2 * MAX_LEN - 1, MAX_LEN, 1, 1, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "batch_tokens") != NULL, "message: %s", err);
    pmt_corpus empty = {0};
    err[0] = '\0';
    CHECK(pmt_batcher_init(&b, &empty, BUDGET, MAX_LEN, 1, 1, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "no sentence pairs") != NULL, "message: %s", err);
}

/* The smallest legal budget still yields one pair per batch for long pairs. */
static void test_minimal_budget(const pmt_corpus *c) {
    char err[256];
    pmt_batcher b;
    CHECK(pmt_batcher_init(&b, c, 2 * MAX_LEN, MAX_LEN, 3, 1, err, sizeof err) == 0);
    int ok = 1, pairs = 0;
    for (int k = 0; k < b.n_batches; k++) {
        const pmt_batch *x = pmt_batcher_fill(&b, 0, k);
        ok &= x->B >= 1 && (long)x->B * (x->S + x->T) <= 2 * MAX_LEN;
        pairs += x->B;
    }
    CHECK(ok && pairs == c->n_pairs);
    pmt_batcher_free(&b);
}

/* The first row's pair of every batch of epoch, in order, while the epoch
 * has batches; checks each batch and that every pair comes once. Returns
 * the batch count. */
static int walk_epoch(pmt_batcher *b, const pmt_corpus *c, int epoch, int *first_pair, double *fill_rate) {
    int *seen = calloc((size_t)c->n_pairs, sizeof *seen);
    long real = 0, cells = 0;
    int k = 0;
    for (; pmt_batcher_has_batch(b, epoch, k); k++) {
        int tokens = pmt_batcher_target_tokens(b, epoch, k);
        const pmt_batch *x = pmt_batcher_fill(b, epoch, k);
        int sum = 0;
        for (int r = 0; r < x->B; r++) sum += x->tgt_len[r];
        CHECK(tokens == sum && x->B >= 1 && x->B <= b->max_pairs);
        check_batch(c, x, seen, &real, &cells);
        first_pair[k] = x->src[0] - 4;
    }
    int once = 1;
    for (int i = 0; i < c->n_pairs; i++) once &= seen[i] == 1;
    CHECK_MSG(once, "epoch %d (blocks) does not serve every pair exactly once", epoch);
    free(seen);
    *fill_rate = cells ? (double)real / (double)cells : 0;
    return k;
}

static void test_blocks(const pmt_corpus *c) {
    char err[256];
    pmt_batcher a, b, v;
    CHECK(pmt_batcher_init_blocks(&a, c, BUDGET, MAX_LEN, 7, 1, 64, err, sizeof err) == 0);
    CHECK_MSG(a.n_blocks == 8 && !a.n_batches_exact && a.n_batches > 0, "%d blocks, %d batches (exact %d)",
              a.n_blocks, a.n_batches, a.n_batches_exact);
    CHECK(a.pairs_seen == 63 && a.max_pairs == BUDGET / 2);
    const int estimate = a.n_batches;
    int *seq[3];
    int count[3];
    for (int e = 0; e < 3; e++) {
        seq[e] = malloc((size_t)c->n_pairs * sizeof(int));
        double rate;
        count[e] = walk_epoch(&a, c, e, seq[e], &rate);
        CHECK_MSG(rate > 0.8, "epoch %d: only %.1f%% of batch cells are real tokens", e, 100 * rate);
    }
    CHECK(a.n_batches_exact && a.n_batches == count[0] && count[1] == count[0] && count[2] == count[0]);
    CHECK_MSG(abs(estimate - count[0]) * 4 <= count[0], "estimate %d, exact %d", estimate, count[0]);
    CHECK(a.pairs_seen == c->n_pairs);
    CHECK(memcmp(seq[1], seq[2], (size_t)count[0] * sizeof(int)) != 0);
    CHECK(!pmt_batcher_has_batch(&a, 1, count[0]) && pmt_batcher_has_batch(&a, 1, count[0] - 1));

    /* A resume: a new batcher asked first for epoch 2 from its middle. */
    CHECK(pmt_batcher_init_blocks(&b, c, BUDGET, MAX_LEN, 7, 1, 64, err, sizeof err) == 0);
    int same = 1;
    for (int k = count[0] / 2; k < count[0]; k++) same &= pmt_batcher_fill(&b, 2, k)->src[0] - 4 == seq[2][k];
    for (int k = 0; k < count[0]; k++) same &= pmt_batcher_fill(&b, 1, k)->src[0] - 4 == seq[1][k];
    CHECK_MSG(same, "a batcher started mid-epoch serves other batches");
    for (int e = 0; e < 3; e++) free(seq[e]);

    /* Without shuffle (validation) there is one block, cut at init. */
    CHECK(pmt_batcher_init_blocks(&v, c, BUDGET, MAX_LEN, 7, 0, 64, err, sizeof err) == 0);
    CHECK(v.n_blocks == 1 && v.n_batches_exact && v.pairs_seen == c->n_pairs);
    pmt_batcher_free(&a);
    pmt_batcher_free(&b);
    pmt_batcher_free(&v);
}

/* Ids beyond vocab_size (a damaged mapped file) become unk and are counted. */
static void test_vocabulary_guard(const pmt_corpus *c) {
    char err[256];
    pmt_batcher b;
    CHECK(pmt_batcher_init(&b, c, BUDGET, MAX_LEN, 7, 1, err, sizeof err) == 0);
    b.vocab_size = 200;   /* pair i's first source id is 4 + i: pairs 196.. are out */
    int unk_rows = 0;
    for (int k = 0; k < b.n_batches; k++) {
        const pmt_batch *x = pmt_batcher_fill(&b, 0, k);
        for (int r = 0; r < x->B; r++) unk_rows += x->src[(size_t)r * x->S] == PMT_UNK_ID;
    }
    CHECK_MSG(b.bad_ids == c->n_pairs - 196 && unk_rows == c->n_pairs - 196, "%ld bad ids, %d unk rows", b.bad_ids,
              unk_rows);
    CHECK(b.first_bad_id == 4 + b.first_bad_pair && b.first_bad_pair >= 196);
    pmt_batcher_free(&b);
}

int main(void) {
    pmt_corpus c;
    make_corpus(&c, N_PAIRS, 42);
    test_epochs_cover_every_pair(&c);
    test_order_is_function_of_seed_and_epoch(&c);
    test_errors(&c);
    test_minimal_budget(&c);
    test_blocks(&c);
    test_vocabulary_guard(&c);
    free_corpus(&c);
    return test_finish();
}
