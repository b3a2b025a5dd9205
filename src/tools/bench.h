/*
 * bench.h — training-speed benchmark of the attention forms on the same
 * batches in one process, with this machine's sgemm peak measured in the
 * same run so efficiency is a ratio of two numbers taken side by side.
 *
 * Ownership: results are plain values; the caller owns the batch source.
 */
#ifndef PROJMT_BENCH_H
#define PROJMT_BENCH_H

#include <stddef.h>

#include "core/config.h"
#include "data/corpus.h"
#include "nn/gemm.h"

/* The step profile's phases (see nn/profile.h); element-wise is the rest. */
enum {
    PMT_BENCH_GEMM,          /* the products */
    PMT_BENCH_CONVERT,       /* bf16 rounding of product operands in passes of their own */
    PMT_BENCH_ATTENTION,
    PMT_BENCH_NORM,          /* LayerNorm */
    PMT_BENCH_LOSS,          /* cross-entropy over the logits */
    PMT_BENCH_ELEMENTWISE,   /* the rest: bias, ReLU, dropout, residual, embedding, zeroing */
    PMT_BENCH_OPTIMIZER,
    PMT_BENCH_PHASES
};
/* Their names in the text and JSON reports. */
extern const char *const pmt_bench_phase_names[PMT_BENCH_PHASES];

/* The matrix-product peaks of one run (GFLOP/s; 0: not measured here). */
typedef struct pmt_bench_peaks {
    double sgemm[PMT_GEMM_BACKENDS];   /* fp32, per backend */
    double bf16_convert;               /* bf16 matmul, its fp32 operands rounded by the call */
    double bf16;                       /* bf16 matmul on operands already in bf16: the matrix units' own peak */
} pmt_bench_peaks;

typedef struct pmt_bench_result {
    char mode[96];               /* e.g. "standard/standard/standard", "projection/projection/projection+boxcar+euclidean",
                                    with " bf16" appended for --precision bf16 */
    size_t params;
    double flops_per_token;      /* training FLOPs (fwd + bwd) per source+target token */
    double ms_per_step;          /* median over the timed steps */
    double cpu_ms_per_step;      /* median CPU time (all threads) per timed step */
    double tokens_per_s;         /* source + target non-pad tokens per second */
    double gflops;               /* achieved matrix-product GFLOP/s */
    double pct_of_peak;          /* gflops / sgemm peak * 100 */
    double product_gflops;       /* the products alone: their FLOPs / the GEMM phase's time */
    double product_pct_of_peak;  /* product_gflops / the precision's product peak * 100 */
    double peak_rss_mib;         /* peak resident memory while this mode ran */
    double final_loss;           /* loss of the last timed step (sanity) */
    double phase_pct[PMT_BENCH_PHASES]; /* % of the timed steps' time per phase */
} pmt_bench_result;

/* Median GFLOP/s of a square n x n x n product (A·Bᵀ, as linear_forward)
 * over reps runs on the given backend in the given pmt_precision, with the
 * current thread settings; 0 when the backend is not built in or bf16 cannot
 * run here. bf16 with rounded = 0: each call rounds its fp32 operands (as a
 * product with no caller-kept copy runs); rounded = 1: the operands are
 * given in bf16, rounded once before the timing. */
double pmt_bench_sgemm_peak(pmt_gemm_backend backend, int precision, int rounded, int n, int reps);

/* Trains cfg (one attention configuration) for warmup + steps optimizer steps
 * on the first batches of the corpus (or synthetic batches when corpus is
 * NULL: lengths like spa-eng's, 8-14 tokens), timing the last `steps`.
 * V is the vocabulary size. % of peak is of the higher of the two
 * libraries' sgemm peaks in fp32 (a step may use both:
 * pmt_gemm_fp32_backend), of the bf16 peak with conversion in bf16 (the step's
 * throughput) and, for the products alone, of the bf16 peak on rounded
 * operands. 0, or -1 with err. */
int pmt_bench_train(const pmt_config *cfg, const pmt_corpus *corpus, int V, int warmup, int steps,
                    const pmt_bench_peaks *peaks, pmt_bench_result *out, char *err, size_t errlen);

#endif
