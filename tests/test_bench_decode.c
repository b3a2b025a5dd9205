/*
 * test_bench_decode.c — the decode benchmark on a tiny random model with
 * synthetic sources: every run decodes every sentence, the capped runs stay
 * within 1.1 × source + 2 tokens, beam 4 is reported, and the numbers are
 * finite and positive.
 */
#include <math.h>
#include <string.h>

#include "tools/bench_decode.h"
#include "testutil.h"

int main(void) {
    pmt_config cfg;
    char err[256];
    pmt_config_defaults(&cfg);
    cfg.d_model = 16;
    cfg.n_heads = 2;
    cfg.d_ff = 32;
    cfg.enc_layers = 1;
    cfg.dec_layers = 1;
    cfg.max_len = 32;
    cfg.batch_tokens = 256;
    pmt_model m;
    if (pmt_model_init(&m, &cfg, 40, 256, 32, err, sizeof err) != 0) {
        CHECK_MSG(0, "%s", err);
        return test_finish();
    }
    pmt_model_init_params(&m, 3);
    pmt_bench_decode_report rep;
    CHECK_MSG(pmt_bench_decode(&m, NULL, NULL, 37, 8, 0, &rep, err, sizeof err) == 0, "%s", err);
    CHECK(rep.sentences == 37 && rep.batch == 8 && strstr(rep.source, "synthetic"));
    CHECK(rep.src_tokens >= 37 * 3 && rep.src_tokens <= 37 * 14);
    for (int k = 0; k < PMT_BENCH_DECODE_RUNS; k++) {
        const pmt_bench_decode_run *r = &rep.run[k];
        CHECK(r->seconds > 0 && isfinite(r->sentences_per_s) && r->sentences_per_s > 0);
        /* synthetic sources: their ids count as words */
        CHECK(rep.src_words == rep.src_tokens && fabs(r->src_words_per_s * r->seconds - rep.src_words) < 1e-6 * rep.src_words);
        CHECK(r->out_tokens >= 0);
        if (r->capped) CHECK(r->out_tokens <= (long)(1.1 * rep.src_tokens) + 2 * 37);
    }
    CHECK(rep.run[0].beam == 1 && rep.run[1].beam == 4 && rep.run[0].capped && !rep.run[3].capped);
    pmt_bench_decode_print(stdout, "tiny", &rep);
    /* missing text file: falls back to synthetic sources */
    CHECK(pmt_bench_decode(&m, NULL, "/nonexistent/test.en", 5, 4, 0, &rep, err, sizeof err) == 0 && rep.sentences == 5);
    CHECK(pmt_bench_decode(&m, NULL, NULL, 0, 4, 0, &rep, err, sizeof err) == -1);
    pmt_model_free(&m);
    return test_finish();
}
