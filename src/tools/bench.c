/*
 * bench.c — training-step benchmark (see bench.h).
 *
 * Each mode trains real optimizer steps (forward, backward, Adam) on the same
 * batches: the first batches of the training corpus in epoch-0 order, or
 * synthetic batches shaped like spa-eng's when no corpus is given. Step times
 * are reported as medians (shared machines are noisy); throughput and GFLOP/s
 * use the sums over the timed steps.
 */
#include "tools/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/batcher.h"
#include "model/model.h"
#include "nn/gemm.h"
#include "nn/profile.h"
#include "train/optim.h"
#include "core/rng.h"
#include "core/clock.h"
#include "core/memstat.h"

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const char *const pmt_bench_phase_names[PMT_BENCH_PHASES] = {
    "GEMM", "bf16 rounding", "attention", "LayerNorm", "loss", "element-wise", "optimizer"};

double pmt_bench_sgemm_peak(pmt_gemm_backend backend, int precision, int rounded, int n, int reps) {
    size_t nn = (size_t)n * n;
    char err[256];
    const int bf16 = precision == PMT_PRECISION_BF16, pre = bf16 && rounded;
    if (!pmt_gemm_available(backend)) return 0;
    if (bf16 && pmt_gemm_bf16_reserve(nn, nn, err, sizeof err) != 0) return 0;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)), *c = malloc(nn * sizeof(float));
    uint16_t *a16 = pre ? malloc(nn * sizeof(uint16_t)) : NULL, *b16 = pre ? malloc(nn * sizeof(uint16_t)) : NULL;
    double *gflops = malloc((size_t)reps * sizeof(double));
    double med = 0;
    if (!a || !b || !c || !gflops || (pre && (!a16 || !b16))) goto done;
    for (size_t i = 0; i < nn; i++) { a[i] = (float)((i * 7) % 13) * 0.01f; b[i] = (float)((i * 5) % 11) * 0.01f; }
    if (pre) {
        pmt_bf16_convert(a16, a, n, n, n, 1.0f);
        pmt_bf16_convert(b16, b, n, n, n, 1.0f);
    }
    const int before = pmt_gemm_set_precision(precision);
    for (int r = -1; r < reps; r++) {   /* r = -1: warm-up (builds the primitive) */
        double t0 = pmt_now_seconds();
        if (pre)
            pmt_sgemm_lp(0, 0, 1, n, n, n, 1.0f, NULL, a16, n, NULL, b16, n, 0.0f, c, n);
        else
            pmt_sgemm_on(backend, 0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        if (r >= 0) gflops[r] = 2.0 * n * (double)n * n / (pmt_now_seconds() - t0) / 1e9;
    }
    pmt_gemm_set_precision(before);
    med = median(gflops, reps);
done:
    free(a); free(b); free(c); free(a16); free(b16); free(gflops);
    return med;
}

/* Synthetic batches: random ids, lengths 8-14 like spa-eng's p50-p90, as many
 * pairs as fit batch_tokens. */
typedef struct synthetic {
    pmt_batch batch;
    int32_t *buf;
} synthetic;

static int synthetic_fill(synthetic *s, const pmt_config *cfg, int V, uint64_t seed) {
    pmt_rng rng = {seed};
    int S = 10 + (int)pmt_rng_below(&rng, 5), T = S + (int)pmt_rng_below(&rng, 3) - 1;
    int B = cfg->batch_tokens / (S + T);
    free(s->buf);
    s->buf = malloc((size_t)(2 * B + B * S + 2 * B * T) * sizeof(int32_t));
    if (!s->buf) return -1;
    pmt_batch *b = &s->batch;
    b->B = B; b->S = S; b->T = T;
    b->src = s->buf;
    b->tgt_in = b->src + B * S;
    b->tgt_out = b->tgt_in + B * T;
    b->src_len = b->tgt_out + B * T;
    b->tgt_len = b->src_len + B;
    for (int i = 0; i < B; i++) {
        int sl = S - (int)pmt_rng_below(&rng, 3), tl = T - (int)pmt_rng_below(&rng, 3);
        b->src_len[i] = sl;
        b->tgt_len[i] = tl;
        for (int t = 0; t < S; t++)
            b->src[i * S + t] = t < sl - 1 ? 4 + (int32_t)pmt_rng_below(&rng, (uint64_t)(V - 4)) : (t == sl - 1 ? PMT_EOS_ID : PMT_PAD_ID);
        for (int t = 0; t < T; t++) {
            int32_t y = t < tl - 1 ? 4 + (int32_t)pmt_rng_below(&rng, (uint64_t)(V - 4)) : (t == tl - 1 ? PMT_EOS_ID : PMT_PAD_ID);
            b->tgt_out[i * T + t] = y;
            b->tgt_in[i * T + t] = t == 0 ? PMT_BOS_ID : (t < tl ? b->tgt_out[i * T + t - 1] : PMT_PAD_ID);
        }
    }
    return 0;
}

static long non_pad(const int32_t *ids, int n) {
    long c = 0;
    for (int i = 0; i < n; i++) c += ids[i] != PMT_PAD_ID;
    return c;
}

int pmt_bench_train(const pmt_config *cfg, const pmt_corpus *corpus, int V, int warmup, int steps,
                    const pmt_bench_peaks *peaks, pmt_bench_result *out, char *err, size_t errlen) {
    pmt_model m;
    pmt_optim opt;
    pmt_batcher batcher;
    synthetic syn = {0};
    int have_batcher = 0, rc = -1;
    double *step_ms = malloc((size_t)steps * sizeof(double) * 2), *cpu_ms = step_ms + steps;
    memset(out, 0, sizeof *out);
    if (!step_ms) { snprintf(err, errlen, "bench: out of memory"); return -1; }
    pmt_reset_peak_rss();
    if (pmt_model_init(&m, cfg, V, cfg->batch_tokens, cfg->max_len, err, errlen) != 0) { free(step_ms); return -1; }
    pmt_model_init_params(&m, cfg->seed);
    if (pmt_optim_init(&opt, cfg, m.tensors, m.n_tensors, m.n_params, err, errlen) != 0) goto done;
    pmt_optim_keep_bf16_copy(&opt, m.params16);
    if (corpus) {
        if (pmt_batcher_init(&batcher, corpus, cfg->batch_tokens, cfg->max_len, cfg->seed, 1, err, errlen) != 0)
            goto done_optim;
        have_batcher = 1;
        if (batcher.n_batches < warmup + steps) {
            snprintf(err, errlen, "bench: corpus has only %d batches (need %d)", batcher.n_batches, warmup + steps);
            goto done_optim;
        }
    }
    pmt_profile_reset();
    double total_s = 0, total_flops = 0;
    long total_tokens = 0;
    for (int i = 0; i < warmup + steps; i++) {
        const pmt_batch *b;
        if (have_batcher) {
            b = pmt_batcher_fill(&batcher, 0, i);
        } else {
            if (synthetic_fill(&syn, cfg, V, cfg->seed * 1000003u + (uint64_t)i) != 0) {
                snprintf(err, errlen, "bench: out of memory");
                goto done_optim;
            }
            b = &syn.batch;
        }
        /* Profile only the timed steps; the clock reads it adds are a few
         * hundred per step, microseconds against a step of ~100 ms. */
        pmt_profile_enable(i >= warmup);
        double t0 = pmt_now_seconds(), c0 = pmt_cpu_seconds();
        pmt_stats st;
        pmt_model_zero_grad(&m);
        int targets = 0;   /* the loss denominator: counted (non-pad) target tokens */
        for (int k = 0; k < b->B * b->T; k++) targets += b->tgt_out[k] != PMT_PAD_ID;
        double loss = pmt_model_train_step(&m, b, cfg->seed + (uint64_t)i, targets, &st);
        double norm, lr;
        const double t_opt = pmt_profile_begin();
        if (pmt_optim_step(&opt, m.params, m.grads, loss, i + 1, &norm, &lr) == PMT_STEP_APPLIED && opt.params16)
            pmt_model_params16_written(&m);
        pmt_profile_end(PMT_PHASE_OPTIMIZER, t_opt);
        double dt = pmt_now_seconds() - t0;
        pmt_profile_enable(0);
        if (i >= warmup) {
            step_ms[i - warmup] = dt * 1e3;
            cpu_ms[i - warmup] = (pmt_cpu_seconds() - c0) * 1e3;
            total_s += dt;
            total_flops += pmt_model_train_flops(cfg, V, b->B, b->S, b->T);
            total_tokens += non_pad(b->src, b->B * b->S) + non_pad(b->tgt_out, b->B * b->T);
            out->final_loss = loss;
        }
    }
    /* The pooling family's kernel and metric, and a learned σ, are named when
     * a site uses projection attention and they are not Sanger's. */
    const int any_projection = pmt_config_any_projection(cfg);
    char family[64] = "";
    if (any_projection && pmt_model_uses_poolattn(cfg))
        snprintf(family, sizeof family, "+%s+%s", pmt_kernel_name(cfg->proj_kernel), pmt_metric_name(cfg->proj_metric));
    snprintf(out->mode, sizeof out->mode, "%s/%s/%s%s%s", pmt_attention_kind_name(cfg->site_kind[0]),
             pmt_attention_kind_name(cfg->site_kind[1]), pmt_attention_kind_name(cfg->site_kind[2]),
             any_projection && cfg->sigma_learned ? "+learned-sigma" : "", family);
    if (cfg->precision != PMT_PRECISION_FP32)
        snprintf(out->mode + strlen(out->mode), sizeof out->mode - strlen(out->mode), " %s",
                 pmt_precision_name(cfg->precision));
    out->params = m.n_params;
    out->flops_per_token = total_flops / (double)total_tokens;
    out->ms_per_step = median(step_ms, steps);
    out->cpu_ms_per_step = median(cpu_ms, steps);
    out->tokens_per_s = (double)total_tokens / total_s;
    out->gflops = total_flops / total_s / 1e9;
    const int bf16 = cfg->precision == PMT_PRECISION_BF16;
    /* fp32: against the higher of the two libraries' peaks, since a step's
     * products may run on both (pmt_gemm_fp32_backend). */
    double fp32_peak = 0;
    for (int be = 0; be < PMT_GEMM_BACKENDS; be++)
        if (peaks->sgemm[be] > fp32_peak) fp32_peak = peaks->sgemm[be];
    const double step_peak = bf16 ? peaks->bf16_convert : fp32_peak;
    const double product_peak = bf16 ? peaks->bf16 : fp32_peak;
    out->pct_of_peak = step_peak > 0 ? 100.0 * out->gflops / step_peak : 0;
    const double gemm_s = pmt_profile_seconds(PMT_PHASE_GEMM);
    out->product_gflops = gemm_s > 0 ? pmt_profile_flops() / gemm_s / 1e9 : 0;
    out->product_pct_of_peak = product_peak > 0 ? 100.0 * out->product_gflops / product_peak : 0;
    out->peak_rss_mib = pmt_peak_rss_mib();
    static const struct { int bench; pmt_phase phase; } timed[] = {
        {PMT_BENCH_GEMM, PMT_PHASE_GEMM},   {PMT_BENCH_CONVERT, PMT_PHASE_CONVERT},
        {PMT_BENCH_ATTENTION, PMT_PHASE_ATTENTION}, {PMT_BENCH_NORM, PMT_PHASE_NORM},
        {PMT_BENCH_LOSS, PMT_PHASE_LOSS},   {PMT_BENCH_OPTIMIZER, PMT_PHASE_OPTIMIZER}};
    double rest = 100.0;
    for (size_t k = 0; k < sizeof timed / sizeof timed[0]; k++) {
        out->phase_pct[timed[k].bench] = 100.0 * pmt_profile_seconds(timed[k].phase) / total_s;
        rest -= out->phase_pct[timed[k].bench];
    }
    out->phase_pct[PMT_BENCH_ELEMENTWISE] = rest;
    rc = 0;
done_optim:
    if (have_batcher) pmt_batcher_free(&batcher);
    pmt_optim_free(&opt);
done:
    free(syn.buf);
    free(step_ms);
    pmt_model_free(&m);
    return rc;
}
