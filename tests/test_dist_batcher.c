/*
 * test_dist_batcher.c — pmt_batcher_fill_part, the data split of
 * data-parallel training: for 1..5 parts, the parts of every batch hold each
 * pair of the whole batch exactly once (same rows, same target-token total),
 * each part is padded to its own longest pair only, part 0 of 1 is the whole
 * batch bitwise, and a part beyond the batch's pairs is empty (B = 0).
 */
#include <string.h>

#include "data/batcher.h"
#include "testutil.h"
#include "train_fixture.h"

enum { MAX_ROWS = 256 };  /* >= pairs per batch: batch_tokens / 2 */

/* Row r of batch x as one comparable record: lengths then the padded ids up to them. */
static int row_equal(const pmt_batch *x, int r, const pmt_batch *y, int q) {
    if (x->src_len[r] != y->src_len[q] || x->tgt_len[r] != y->tgt_len[q]) return 0;
    return !memcmp(x->src + r * x->S, y->src + q * y->S, (size_t)x->src_len[r] * sizeof(int32_t)) &&
           !memcmp(x->tgt_in + r * x->T, y->tgt_in + q * y->T, (size_t)x->tgt_len[r] * sizeof(int32_t)) &&
           !memcmp(x->tgt_out + r * x->T, y->tgt_out + q * y->T, (size_t)x->tgt_len[r] * sizeof(int32_t));
}

/* A private copy of a filled batch (the batcher's buffers are reused by the next fill). */
typedef struct {
    pmt_batch b;
    int32_t src[MAX_ROWS * 16], tin[MAX_ROWS * 16], tout[MAX_ROWS * 16], src_len[MAX_ROWS], tgt_len[MAX_ROWS];
} batch_copy;

static void copy_batch(batch_copy *c, const pmt_batch *x) {
    c->b = (pmt_batch){x->B, x->S, x->T, c->src, c->src_len, c->tin, c->tout, c->tgt_len};
    memcpy(c->src, x->src, (size_t)x->B * x->S * sizeof(int32_t));
    memcpy(c->tin, x->tgt_in, (size_t)x->B * x->T * sizeof(int32_t));
    memcpy(c->tout, x->tgt_out, (size_t)x->B * x->T * sizeof(int32_t));
    memcpy(c->src_len, x->src_len, (size_t)x->B * sizeof(int32_t));
    memcpy(c->tgt_len, x->tgt_len, (size_t)x->B * sizeof(int32_t));
}

static void check_parts(pmt_batcher *bt, int epoch, int index, int parts) {
    static batch_copy whole;
    copy_batch(&whole, pmt_batcher_fill(bt, epoch, index));
    int covered = 0, tokens = 0;
    for (int p = 0; p < parts; p++) {
        const pmt_batch *x = pmt_batcher_fill_part(bt, epoch, index, p, parts);
        int S = 0, T = 0;
        for (int r = 0; r < x->B; r++) {
            /* Row r of part p is row p + r * parts of the whole batch. */
            CHECK(row_equal(x, r, &whole.b, p + r * parts));
            if (x->src_len[r] > S) S = x->src_len[r];
            if (x->tgt_len[r] > T) T = x->tgt_len[r];
            tokens += x->tgt_len[r];
        }
        CHECK(x->B == 0 || (x->S == S && x->T == T));
        covered += x->B;
    }
    CHECK(covered == whole.b.B);
    CHECK(tokens == pmt_batcher_target_tokens(bt, epoch, index));
}

int main(void) {
    /* The batches the training tests' fixture config makes (256 tokens, max_len 16). */
    pmt_config cfg;
    fixture_config(&cfg, PMT_ATTN_STANDARD, "unused");
    pmt_corpus c;
    fixture_corpus(&c, 300, 1, cfg.max_len - 2, 5);
    pmt_batcher bt;
    char err[256];
    if (pmt_batcher_init(&bt, &c, cfg.batch_tokens, cfg.max_len, 9, 1, err, sizeof err) != 0) {
        CHECK_MSG(0, "batcher init: %s", err);
        return test_finish();
    }
    CHECK(bt.max_pairs <= MAX_ROWS);
    for (int parts = 1; parts <= 5; parts++)
        for (int k = 0; k < bt.n_batches; k++) check_parts(&bt, 1, k, parts);

    /* Part 0 of 1 is pmt_batcher_fill, bitwise, padding included. */
    static batch_copy whole;
    copy_batch(&whole, pmt_batcher_fill(&bt, 0, 3));
    const pmt_batch *one = pmt_batcher_fill_part(&bt, 0, 3, 0, 1);
    CHECK(one->B == whole.b.B && one->S == whole.b.S && one->T == whole.b.T);
    CHECK(!memcmp(one->src, whole.b.src, (size_t)one->B * one->S * sizeof(int32_t)));
    CHECK(!memcmp(one->tgt_out, whole.b.tgt_out, (size_t)one->B * one->T * sizeof(int32_t)));

    /* More parts than pairs: the parts past the last pair are empty. */
    const int pairs = whole.b.B;
    CHECK(pmt_batcher_fill_part(&bt, 0, 3, pairs - 1, pairs + 2)->B == 1);
    CHECK(pmt_batcher_fill_part(&bt, 0, 3, pairs, pairs + 2)->B == 0);
    CHECK(pmt_batcher_fill_part(&bt, 0, 3, pairs + 1, pairs + 2)->B == 0);

    pmt_batcher_free(&bt);
    fixture_corpus_free(&c);
    return test_finish();
}
