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
enum { PMT_BENCH_GEMM, PMT_BENCH_ATTENTION, PMT_BENCH_ELEMENTWISE, PMT_BENCH_OPTIMIZER, PMT_BENCH_PHASES };

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
    double peak_rss_mib;         /* peak resident memory while this mode ran */
    double final_loss;           /* loss of the last timed step (sanity) */
    double phase_pct[PMT_BENCH_PHASES]; /* % of the timed steps' time per phase */
} pmt_bench_result;

/* Median GFLOP/s of a square n x n x n product (A·Bᵀ, as linear_forward)
 * over reps runs on the given backend in the given pmt_precision (bf16:
 * including the operands' conversion, as a training step runs it), with the
 * current thread settings; 0 when the backend is not built in or bf16 cannot
 * run here. */
double pmt_bench_sgemm_peak(pmt_gemm_backend backend, int precision, int n, int reps);

/* Trains cfg (one attention configuration) for warmup + steps optimizer steps
 * on the first batches of the corpus (or synthetic batches when corpus is
 * NULL: lengths like spa-eng's, 8-14 tokens), timing the last `steps`.
 * V is the vocabulary size. 0, or -1 with err. */
int pmt_bench_train(const pmt_config *cfg, const pmt_corpus *corpus, int V, int warmup, int steps,
                    double sgemm_peak, pmt_bench_result *out, char *err, size_t errlen);

#endif
