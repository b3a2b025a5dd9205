/*
 * bench_ops.c — micro-benchmark of the non-GEMM ops at training shapes (not a
 * ctest test: no test_ prefix). Reports the median of repeated runs, next to
 * an sgemm of one d_model × d_model linear layer for scale.
 *
 * Built with -DPROJMT_BENCH_PROGRAMS=ON; run as
 *   OPENBLAS_CORETYPE=Haswell [PROJMT_BENCH_CPU=1 OMP_NUM_THREADS=1] [PROJMT_BENCH_T=32] ./build/bench_ops
 * (PROJMT_BENCH_T: the sentence length T = S, default 16). On a CPU with
 * native bf16 the attention kernels are timed in their bf16 forms too.
 */
#include "nn/gemm.h"
#include "nn/ops.h"
#include "ops_testutil.h"

#include <omp.h>

#include "bench_timing.h"

typedef struct {
    int B, T, S, C, NH, causal, bf16;   /* bf16: the attention kernels' _bf16 forms */
    int32_t *klen;
    float *q, *k, *v, *out, *probs, *dout, *dq, *dk, *dv, *log_sigma, *dls;
    /* cross-entropy / layernorm / linear */
    int N, V;
    int32_t *targets;
    float *logits, *loss, *w, *mean, *rstd, *ln_scratch;
    float *qkv, *dqkv, *wqkv, *bqkv, *dwqkv, *dbqkv;   /* Q|K|V projections [N, 3C], [3C, C] */
} bctx;

static void b_attn_fwd(void *p) {
    bctx *c = p;
    (c->bf16 ? attention_forward_bf16 : attention_forward)(c->out, c->probs, c->q, c->k, c->v, c->C, c->C, c->klen,
                                                           c->causal, c->B, c->T, c->S, c->C, c->NH, 0.125f);
}
static void b_attn_bwd(void *p) {
    bctx *c = p;
    (c->bf16 ? attention_backward_set_bf16 : attention_backward_set)(c->dq, c->dk, c->dv, c->dout, c->probs, c->q,
                                                                     c->k, c->v, c->C, c->C, c->klen, c->causal,
                                                                     c->B, c->T, c->S, c->C, c->NH, 0.125f);
}
static void b_proj_fwd(void *p) {
    bctx *c = p;
    (c->bf16 ? projattn_forward_bf16 : projattn_forward)(c->out, c->probs, c->q, c->q, c->log_sigma, c->klen,
                                                         c->causal, c->B, c->T, c->S, c->C, c->NH);
}
static void b_proj_bwd(void *p) {
    bctx *c = p;
    (c->bf16 ? projattn_backward_bf16 : projattn_backward)(c->dq, c->dq, c->dls, c->dout, c->probs, c->q, c->q,
                                                           c->log_sigma, c->klen, c->causal, c->B, c->T, c->S, c->C,
                                                           c->NH);
}
static void b_ce_fwd(void *p) {
    bctx *c = p;
    int correct;
    crossentropy_forward(c->loss, c->logits, c->logits, c->targets, c->N, c->V, 0.1f, 0, &correct);
}
static void b_ce_bwd(void *p) {
    bctx *c = p;
    crossentropy_backward(c->logits, c->logits, c->targets, c->N, c->V, 0.1f, 0, 1e-3f);
}
static void b_ln_fwd(void *p) {
    bctx *c = p;
    layernorm_forward(c->out, c->mean, c->rstd, c->q, c->w, c->w, c->N, c->C);
}
static void b_ln_bwd(void *p) {
    bctx *c = p;
    layernorm_backward(c->dq, c->dls, c->dls + c->C, c->dout, c->q, c->w, c->mean, c->rstd, c->N, c->C,
                       c->ln_scratch);
}
static void b_linear_fwd(void *p) {
    bctx *c = p;
    linear_forward(c->out, c->q, c->k, c->w, c->N, c->C, c->C);
}
/* The Q, K, V projections of self-attention, forward and backward: three
 * [C, C] linears (the layout before the fused one) or one [3C, C]. */
static void b_qkv_separate(void *p) {
    bctx *c = p;
    const size_t CC = (size_t)c->C * c->C, NC = (size_t)c->N * c->C;
    for (int i = 0; i < 3; i++) linear_forward(c->qkv + i * NC, c->q, c->wqkv + i * CC, c->bqkv + i * c->C, c->N, c->C, c->C);
    linear_backward_set(c->dv, c->dwqkv, c->dbqkv, c->dqkv, c->q, c->wqkv, c->N, c->C, c->C);
    for (int i = 1; i < 3; i++)
        linear_backward(c->dv, c->dwqkv + i * CC, c->dbqkv + i * c->C, c->dqkv + i * NC, c->q, c->wqkv + i * CC, c->N,
                        c->C, c->C);
}
static void b_qkv_fused(void *p) {
    bctx *c = p;
    linear_forward(c->qkv, c->q, c->wqkv, c->bqkv, c->N, c->C, 3 * c->C);
    linear_backward_set(c->dv, c->dwqkv, c->dbqkv, c->dqkv, c->q, c->wqkv, c->N, c->C, 3 * c->C);
}

int main(void) {
    const int T = getenv("PROJMT_BENCH_T") ? atoi(getenv("PROJMT_BENCH_T")) : 16;
    const int C = 256, NH = 4, V = 8000, B = 2048 / (T > 0 ? T : 1), N = B * T;
    bctx c = {0};
    c.B = B; c.T = T; c.S = T; c.C = C; c.NH = NH; c.N = N; c.V = V;
    c.klen = malloc(sizeof(int32_t) * B);
    c.targets = malloc(sizeof(int32_t) * N);
    for (int b = 0; b < B; b++) c.klen[b] = T;
    for (int n = 0; n < N; n++) c.targets[n] = 1 + (n * 37) % (V - 1);
    const size_t nt = (size_t)N * C;
    c.q = tu_alloc(nt); c.k = tu_alloc(nt); c.v = tu_alloc(nt); c.out = tu_alloc(nt);
    c.dout = tu_alloc(nt); c.dq = tu_alloc(nt); c.dk = tu_alloc(nt); c.dv = tu_alloc(nt);
    c.probs = tu_alloc((size_t)B * NH * T * T);
    c.log_sigma = tu_alloc(NH); c.dls = tu_alloc(2 * C);
    c.ln_scratch = tu_alloc(layernorm_backward_scratch_floats(C));
    c.logits = tu_alloc((size_t)N * V); c.loss = tu_alloc(N);
    c.w = tu_alloc(C * C); c.mean = tu_alloc(N); c.rstd = tu_alloc(N);
    c.qkv = tu_alloc(3 * nt); c.dqkv = tu_alloc(3 * nt); c.wqkv = tu_alloc(3 * C * C); c.bqkv = tu_alloc(3 * C);
    c.dwqkv = tu_alloc(3 * C * C); c.dbqkv = tu_alloc(3 * C);
    tu_fill(c.dqkv, 3 * nt, -1, 1); tu_fill(c.wqkv, 3 * C * C, -0.1, 0.1);
    tu_fill(c.q, nt, -1, 1); tu_fill(c.k, nt, -1, 1); tu_fill(c.v, nt, -1, 1);
    tu_fill(c.dout, nt, -1, 1); tu_fill(c.w, C * C, -1, 1);
    for (int h = 0; h < NH; h++) c.log_sigma[h] = 1.0f;

    printf("threads %d; B=%d T=S=%d C=%d NH=%d (N=%d tokens), V=%d; median of %d runs\n",
           omp_get_max_threads(), B, T, C, NH, N, V, BENCH_REPS);
    for (int bf16 = 0; bf16 <= pmt_cpu_has_bf16(); bf16++)
        for (int causal = 0; causal <= 1; causal++) {
            c.causal = causal;
            c.bf16 = bf16;
            const double af = time_ms(b_attn_fwd, &c), ab = time_ms(b_attn_bwd, &c);
            const double pf = time_ms(b_proj_fwd, &c), pb = time_ms(b_proj_bwd, &c);
            printf("%s, %s products\n  attention  fwd %.3f ms  bwd %.3f ms  total %.3f ms\n"
                   "  projattn   fwd %.3f ms  bwd %.3f ms  total %.3f ms (learned σ)\n",
                   causal ? "causal self-attention" : "unmasked attention", bf16 ? "bf16" : "fp32", af, ab, af + ab,
                   pf, pb, pf + pb);
        }
    const double lf = time_ms(b_ln_fwd, &c), lb = time_ms(b_ln_bwd, &c);
    printf("layernorm [%d, %d]       fwd %.3f ms  bwd %.3f ms\n", N, C, lf, lb);
    const double g = time_ms(b_linear_fwd, &c);
    printf("linear %dx%d on %d rows (sgemm) %.3f ms = %.1f GFLOP/s\n", C, C, N, g, 2.0 * N * C * C / g / 1e6);
    const double qs = time_ms(b_qkv_separate, &c), qf = time_ms(b_qkv_fused, &c);
    printf("Q|K|V projections fwd+bwd: three %dx%d linears %.3f ms, one %dx%d %.3f ms (%.2fx)\n", C, C, qs, 3 * C, C,
           qf, qs / qf);
    tu_fill(c.logits, (size_t)N * V, -3, 3);
    const double cf = time_ms(b_ce_fwd, &c), cb = time_ms(b_ce_bwd, &c);
    printf("crossentropy [%d, %d]  fwd %.3f ms  bwd %.3f ms\n", N, V, cf, cb);
    return 0;
}
