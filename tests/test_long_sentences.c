/*
 * test_long_sentences.c — sentences of about 1000 tokens train and translate
 * (issue 13, item 1). The attention kernels used to keep their per-task
 * scratch on the stack, sized by S and T: 8.3 MB per (sentence, head)
 * task at 1020 tokens, beyond an 8 MB thread stack (this test crashed with
 * SIGSEGV before the scratch moved to the heap). Two threads, so the
 * kernels run on a worker too; standard and projection attention; training
 * steps through pmt_train_run, then greedy and beam-2 search over
 * 1000-token sources with a model of the same configuration.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/checkpoint.h"
#include "testutil.h"
#include "train/train.h"
#include "translate/beam_search.h"
#include "train_fixture.h"

enum { LONG_MIN = 1000, LONG_MAX = 1020, MAX_LEN = 1024 };

static void finite_loss(void *user, int64_t step, double loss, pmt_step_status status) {
    int *bad = user;
    (void)step;
    if (status == PMT_STEP_APPLIED && !isfinite(loss)) (*bad)++;
}

static void test_kind(int kind) {
    const char *name = pmt_attention_kind_name(kind);
    pmt_corpus c;
    fixture_corpus(&c, 4, LONG_MIN, LONG_MAX, 31 + (uint64_t)kind);
    char dir[1024], err[512];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("long"));
    pmt_config cfg;
    fixture_config(&cfg, kind, dir);
    cfg.d_model = 16;
    cfg.n_heads = 1;   /* HS = 16: one task per sentence holds ~2·T·S floats of scratch */
    cfg.d_ff = 32;
    cfg.max_len = MAX_LEN;
    cfg.batch_tokens = 2 * MAX_LEN;
    cfg.max_steps = 3;
    cfg.warmup = 1;
    cfg.valid_every = 0;
    cfg.threads = 2;
    cfg.dropout = 0.1;
    pmt_train_data data = {&c, &c, FIX_SPM, sizeof FIX_SPM, FIX_VOCAB};
    pmt_train_options opt = {1, 1, 0};
    int bad = 0;
    pmt_train_hooks hooks = {&bad, finite_loss, NULL};
    pmt_train_result res;
    int rc = pmt_train_run(&cfg, &data, &opt, &hooks, &res, err, sizeof err);
    CHECK_MSG(rc == 0, "%s: %s", name, err);
    CHECK_MSG(res.steps == 3 && bad == 0 && isfinite(res.valid_loss), "%s: %lld steps, %d non-finite, valid loss %g",
              name, (long long)res.steps, bad, res.valid_loss);
    printf("%s: trained 3 steps on pairs of %d-%d tokens, valid loss %.4f\n", name, LONG_MIN, LONG_MAX,
           res.valid_loss);

    pmt_model m;
    CHECK_MSG(pmt_model_init(&m, &cfg, FIX_VOCAB, 2 * MAX_LEN, MAX_LEN, err, sizeof err) == 0, "%s", err);
    pmt_model_init_params(&m, 5);
    pmt_search s;
    CHECK_MSG(pmt_search_init(&s, &m, 2, 2, err, sizeof err) == 0, "%s", err);
    const int32_t *src[2] = {c.src_ids + c.src_off[0], c.src_ids + c.src_off[1]};
    int len[2] = {(int)(c.src_off[1] - c.src_off[0]), (int)(c.src_off[2] - c.src_off[1])};
    for (int beam = 1; beam <= 2; beam++) {
        pmt_decode_options o = {beam, 1, 1.0, 1.0, 5, PMT_COMPUTE_AUTO, 0, NULL, NULL};
        pmt_nbest out[2];
        rc = pmt_search_run(&s, &o, src, len, 2, out, err, sizeof err);
        CHECK_MSG(rc == 0, "%s beam %d: %s", name, beam, err);
        if (rc == 0)
            for (int i = 0; i < 2; i++)
                CHECK_MSG(out[i].n == 1 && out[i].hyp[0].len >= 0 && out[i].hyp[0].len < MAX_LEN &&
                              isfinite(out[i].hyp[0].logprob),
                          "%s beam %d sentence %d: %d hypotheses, length %d", name, beam, i, out[i].n,
                          out[i].n ? out[i].hyp[0].len : -1);
        if (rc == 0) printf("%s beam %d: outputs of %d and %d tokens for sources of %d and %d\n", name, beam,
                            out[0].hyp[0].len, out[1].hyp[0].len, len[0], len[1]);
    }
    pmt_search_free(&s);
    pmt_model_free(&m);
    fixture_corpus_free(&c);
}

int main(void) {
    test_kind(PMT_ATTN_STANDARD);
    test_kind(PMT_ATTN_PROJECTION);
    return test_finish();
}
