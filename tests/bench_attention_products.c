/*
 * bench_attention_products.c — sizing for issue 23's "attention on the
 * matrix units" (not a ctest test: no test_ prefix). Times the six per-head
 * products of standard attention at training shapes as oneDNN batched
 * matmuls, over strided [B, NH, T, HS] views of the model's [N, 3C] Q|K|V
 * and [N, C] buffers (no copies), in fp32 and, where the CPU has native
 * bf16, in bf16 with bf16 operands and fp32 results; next to projmt's own
 * attention_forward / attention_backward (fp32, products and softmax
 * together). The matmuls cover the whole T × S rectangle: no padding or
 * causal skipping, which projmt's kernels do.
 *
 * Why a program and not a change: on AVX-512 bf16 (Zen 4) the products are
 * ~half of the attention kernels' time and bf16 at best halves them
 * (docs/speed.md); on AMX, whose bf16 products are 7–9× fp32, the trade
 * differs and is to be measured there first. This prints what decides it.
 *
 * Built with -DPROJMT_BENCH_PROGRAMS=ON; run as
 *   [PROJMT_BENCH_T=16] [PROJMT_BENCH_CPU=1 OMP_NUM_THREADS=1] ./build/bench_attention_products
 * (T = S, the sentence length; B = 2048 / T sentences).
 */
#include "nn/gemm.h"
#include "nn/ops.h"
#include "ops_testutil.h"
#define BENCH_REPS 31
#include "bench_timing.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static dnnl_engine_t engine;
static dnnl_stream_t stream;

#define DNNL_OK(call)                                                                  \
    do {                                                                               \
        const dnnl_status_t st_ = (call);                                              \
        if (st_ != dnnl_success) {                                                     \
            fprintf(stderr, "bench_attention_products: %s failed (%d)\n", #call, st_); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* A 4-D [B, NH, rows, cols] view: element (b, h, r, c) at
 * b·sb + h·sh + r·sr + c·sc. */
typedef struct view {
    void *base;
    dnnl_dims_t dims, strides;   /* the first 4 used */
} view;

static view head_view(void *base, int64_t B, int64_t NH, int64_t rows, int64_t cols, int64_t sb, int64_t sh,
                      int64_t sr, int64_t sc) {
    view v = {base, {B, NH, rows, cols}, {sb, sh, sr, sc}};   /* the other dims zero */
    return v;
}

/* One batched product dst = a · b, built once. */
typedef struct product {
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst;
    const char *impl;
} product;

static dnnl_memory_t memory_of(const view *v, dnnl_data_type_t type, dnnl_memory_desc_t *md) {
    DNNL_OK(dnnl_memory_desc_init_by_strides(md, 4, v->dims, type, v->strides));
    dnnl_memory_t m;
    DNNL_OK(dnnl_memory_create(&m, md, engine, v->base));
    return m;
}

static product product_init(view a, view b, view c, dnnl_data_type_t in_type) {
    product p;
    dnnl_memory_desc_t amd, bmd, cmd;
    p.src = memory_of(&a, in_type, &amd);
    p.wei = memory_of(&b, in_type, &bmd);
    p.dst = memory_of(&c, dnnl_f32, &cmd);
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd;
    DNNL_OK(dnnl_matmul_desc_init(&desc, &amd, &bmd, NULL, &cmd));
    DNNL_OK(dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL));
    DNNL_OK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &p.impl));
    DNNL_OK(dnnl_primitive_create(&p.prim, pd));
    dnnl_primitive_desc_destroy(pd);
    return p;
}

static void product_run(const product *p) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->wei}, {DNNL_ARG_DST, p->dst}};
    DNNL_OK(dnnl_primitive_execute(p->prim, stream, 3, args));
    DNNL_OK(dnnl_stream_wait(stream));
}

static void product_free(product *p) {
    dnnl_primitive_destroy(p->prim);
    dnnl_memory_destroy(p->src);
    dnnl_memory_destroy(p->wei);
    dnnl_memory_destroy(p->dst);
}

/* The six products of one attention site: forward S = Q·Kᵀ, O = P·V;
 * backward dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q. */
enum { FWD_SCORES, FWD_VALUES, BWD_DP, BWD_DV, BWD_DQ, BWD_DK, N_PRODUCTS };
static const char *const product_names[N_PRODUCTS] = {"Q·Kᵀ", "P·V", "dO·Vᵀ", "Pᵀ·dO", "dS·K", "dSᵀ·Q"};

typedef struct site {
    product p[N_PRODUCTS];
} site;

/* Buffers, in the model's layouts: qkv and its gradient dqkv [N, 3C]
 * (Q | K | V, head h at columns h·HS of each part), out and dout [N, C]
 * with the same head columns, probs/dscores [B, NH, T, S] dense. esize: bytes per element of
 * the products' inputs (4 fp32, 2 bf16); qkv, dout, probs and dscores are
 * in that type, the results fp32. */
typedef struct buffers {
    void *qkv, *dout, *probs, *dscores;
    float *out, *dqkv, *scores;
} buffers;

static site site_init(const buffers *m, int B, int T, int S, int C, int NH, dnnl_data_type_t type) {
    const int HS = C / NH;
    const int64_t ld = 3 * (int64_t)C, esize = type == dnnl_f32 ? 4 : 2;
    char *qkv = m->qkv;
    /* Q, K, V as [B, NH, T or S, HS], and Kᵀ, Vᵀ as [B, NH, HS, S]. */
    const view q = head_view(qkv, B, NH, T, HS, T * ld, HS, ld, 1);
    const view k = head_view(qkv + C * esize, B, NH, S, HS, S * ld, HS, ld, 1);
    const view v = head_view(qkv + 2 * C * esize, B, NH, S, HS, S * ld, HS, ld, 1);
    const view kt = head_view(k.base, B, NH, HS, S, S * ld, HS, 1, ld);
    const view vt = head_view(v.base, B, NH, HS, S, S * ld, HS, 1, ld);
    /* [N, C] results and dO. */
    const view out = head_view(m->out, B, NH, T, HS, (int64_t)T * C, HS, C, 1);
    const view dout = head_view(m->dout, B, NH, T, HS, (int64_t)T * C, HS, C, 1);
    const view dq = head_view(m->dqkv, B, NH, T, HS, T * ld, HS, ld, 1);
    const view dk = head_view(m->dqkv + C, B, NH, S, HS, S * ld, HS, ld, 1);
    const view dv = head_view(m->dqkv + 2 * C, B, NH, S, HS, S * ld, HS, ld, 1);
    /* [B, NH, T, S] dense, and its transpose. */
    const int64_t TS = (int64_t)T * S;
    const view scores = head_view(m->scores, B, NH, T, S, NH * TS, TS, S, 1);
    const view probs = head_view(m->probs, B, NH, T, S, NH * TS, TS, S, 1);
    const view probs_t = head_view(m->probs, B, NH, S, T, NH * TS, TS, 1, S);
    const view ds = head_view(m->dscores, B, NH, T, S, NH * TS, TS, S, 1);
    const view ds_t = head_view(m->dscores, B, NH, S, T, NH * TS, TS, 1, S);
    const view dp = head_view(m->scores, B, NH, T, S, NH * TS, TS, S, 1);
    site s;
    s.p[FWD_SCORES] = product_init(q, kt, scores, type);
    s.p[FWD_VALUES] = product_init(probs, v, out, type);
    s.p[BWD_DP] = product_init(dout, vt, dp, type);
    s.p[BWD_DV] = product_init(probs_t, dout, dv, type);
    s.p[BWD_DQ] = product_init(ds, k, dq, type);
    s.p[BWD_DK] = product_init(ds_t, q, dk, type);
    return s;
}

typedef struct ctx {
    site *s;
    int first, last;   /* products [first, last) */
    /* projmt's own kernels */
    float *q, *k, *v, *out, *probs, *dout, *dq, *dk, *dv;
    int32_t *klen;
    int B, T, S, C, NH, ld;
} ctx;

static void run_products(void *p) {
    const ctx *c = p;
    for (int i = c->first; i < c->last; i++) product_run(&c->s->p[i]);
}

static void run_own_fwd(void *p) {
    const ctx *c = p;
    attention_forward(c->out, c->probs, c->q, c->k, c->v, c->ld, c->ld, c->klen, 0, c->B, c->T, c->S, c->C, c->NH,
                      0.125f);
}

static void run_own_bwd(void *p) {
    const ctx *c = p;
    attention_backward_set(c->dq, c->dk, c->dv, c->dout, c->probs, c->q, c->k, c->v, c->ld, c->ld, c->klen, 0, c->B,
                           c->T, c->S, c->C, c->NH, 0.125f);
}

/* Times the forward and backward products of one type; prints them. */
static void report_products(const char *label, const buffers *m, int B, int T, int C, int NH, dnnl_data_type_t type,
                            double own_fwd, double own_bwd) {
    site s = site_init(m, B, T, T, C, NH, type);
    ctx c = {.s = &s};
    const double flop_one = 2.0 * B * NH * (double)T * T * (C / NH);   /* one product */
    printf("%s products (oneDNN %s):\n", label, s.p[FWD_SCORES].impl);
    double fwd = 0, bwd = 0;
    for (int i = 0; i < N_PRODUCTS; i++) {
        c.first = i;
        c.last = i + 1;
        const double ms = time_ms(run_products, &c);
        printf("  %-8s %7.3f ms  %6.1f GFLOP/s\n", product_names[i], ms, flop_one / ms / 1e6);
        if (i < BWD_DP) fwd += ms;
        else bwd += ms;
    }
    c.first = FWD_SCORES;
    c.last = BWD_DP;
    const double fwd_all = time_ms(run_products, &c);
    c.first = BWD_DP;
    c.last = N_PRODUCTS;
    const double bwd_all = time_ms(run_products, &c);
    printf("  forward  2 products %7.3f ms (%.2f of projmt's whole fp32 forward)\n", fwd_all, fwd_all / own_fwd);
    printf("  backward 4 products %7.3f ms (%.2f of projmt's whole fp32 backward)\n", bwd_all, bwd_all / own_bwd);
    (void)fwd;
    (void)bwd;
    for (int i = 0; i < N_PRODUCTS; i++) product_free(&s.p[i]);
}

int main(void) {
    const int T = getenv("PROJMT_BENCH_T") ? atoi(getenv("PROJMT_BENCH_T")) : 16;
    if (T < 1 || T > 512) {
        fprintf(stderr, "bench_attention_products: PROJMT_BENCH_T must be 1..512, got %d\n", T);
        return 2;
    }
    const int C = 256, NH = 4, B = 2048 / T > 0 ? 2048 / T : 1, N = B * T;
    DNNL_OK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    DNNL_OK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));

    /* fp32 buffers, shared by projmt's kernels and the fp32 products. */
    const size_t nqkv = (size_t)N * 3 * C, nc = (size_t)N * C, nts = (size_t)B * NH * T * T;
    float *qkv = tu_alloc(nqkv), *dout = tu_alloc(nc), *probs = tu_alloc(nts), *dscores = tu_alloc(nts);
    float *out = tu_alloc(nc), *dqkv = tu_alloc(nqkv), *scores = tu_alloc(nts);
    tu_fill(qkv, nqkv, -1, 1);
    tu_fill(dout, nc, -1, 1);
    tu_fill(probs, nts, 0, 0.1);
    tu_fill(dscores, nts, -0.1, 0.1);
    int32_t *klen = malloc(sizeof *klen * B);
    for (int b = 0; b < B; b++) klen[b] = T;

    printf("threads %d; B=%d T=S=%d C=%d NH=%d HS=%d (N=%d tokens); CPU %s, native bf16: %s; median of %d runs\n",
           omp_get_max_threads(), B, T, C, NH, C / NH, N, pmt_cpu_isa_name(), pmt_cpu_has_bf16() ? "yes" : "no",
           BENCH_REPS);
    if (attention_scratch_reserve(T, T, C / NH) != 0) {
        fprintf(stderr, "bench_attention_products: out of memory\n");
        return 1;
    }
    ctx own = {.q = qkv, .k = qkv + C, .v = qkv + 2 * C, .out = out, .probs = probs, .dout = dout, .dq = dqkv,
               .dk = dqkv + C, .dv = dqkv + 2 * C, .klen = klen, .B = B, .T = T, .S = T, .C = C, .NH = NH, .ld = 3 * C};
    const double own_fwd = time_ms(run_own_fwd, &own), own_bwd = time_ms(run_own_bwd, &own);
    printf("projmt attention (fp32, products + softmax): forward %.3f ms, backward %.3f ms\n", own_fwd, own_bwd);
    tu_fill(probs, nts, 0, 0.1);

    buffers fp32 = {qkv, dout, probs, dscores, out, dqkv, scores};
    report_products("fp32", &fp32, B, T, C, NH, dnnl_f32, own_fwd, own_bwd);

    if (pmt_cpu_has_bf16()) {
        uint16_t *qkv16 = malloc(nqkv * 2), *dout16 = malloc(nc * 2), *probs16 = malloc(nts * 2),
                 *ds16 = malloc(nts * 2);
        if (!qkv16 || !dout16 || !probs16 || !ds16) {
            fprintf(stderr, "bench_attention_products: out of memory\n");
            return 1;
        }
        pmt_bf16_convert(qkv16, qkv, N, 3 * C, 3 * C, 1.0f);
        pmt_bf16_convert(dout16, dout, N, C, C, 1.0f);
        pmt_bf16_convert(probs16, probs, B * NH * T, T, T, 1.0f);
        pmt_bf16_convert(ds16, dscores, B * NH * T, T, T, 1.0f);
        buffers bf16 = {qkv16, dout16, probs16, ds16, out, dqkv, scores};
        report_products("bf16", &bf16, B, T, C, NH, dnnl_bf16, own_fwd, own_bwd);
        free(qkv16);
        free(dout16);
        free(probs16);
        free(ds16);
    } else {
        printf("bf16 products: not timed (no native bf16 on this CPU)\n");
    }
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    return 0;
}
