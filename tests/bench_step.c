/*
 * bench_step.c — one training step of the base model, timed by phase, for
 * profiling on a shared machine (not a ctest test: no test_ prefix).
 *
 * Unlike `projmt bench` it reports, per phase (forward, backward, Adam), the
 * median WALL time and the median PROCESS CPU time over the timed steps, and
 * it does no sgemm-peak run, so a profiler attached to it (perf record,
 * callgrind) sees only training steps plus one model init.
 *
 *   OPENBLAS_CORETYPE=Haswell ./build/bench_step [mode] [threads] [steps] [warmup] [config]
 *   mode: standard | projection | learned (projection with learned σ; default standard)
 *
 * Built with -DPROJMT_BENCH_PROGRAMS=ON; matrix products by the build's backend (nn/gemm.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>

#include "data/batcher.h"
#include "core/config.h"
#include "data/corpus.h"
#include "model/model.h"
#include "nn/gemm.h"
#include "train/optim.h"
#include "core/clock.h"
#include "core/threads.h"
#include "core/memstat.h"

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of each OpenMP pool thread (both GEMM backends run on the same
 * threads): with OMP_WAIT_POLICY=passive, waiting threads
 * sleep, so thread 0 minus the others approximates the serial work. */
static void thread_cpu(double *t) {
#pragma omp parallel
    {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        t[omp_get_thread_num()] = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double med(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "standard";
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    int steps = argc > 3 ? atoi(argv[3]) : 5;
    int warmup = argc > 4 ? atoi(argv[4]) : 1;
    const char *cfgpath = argc > 5 ? argv[5] : "configs/base.ini";
    char err[512];
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    if (pmt_config_load_file(&cfg, cfgpath, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 1; }
    int kind = strcmp(mode, "projection") && strcmp(mode, "learned") ? PMT_ATTN_STANDARD : PMT_ATTN_PROJECTION;
    cfg.sigma_learned = !strcmp(mode, "learned");
    for (int s = 0; s < PMT_SITES; s++) cfg.site_kind[s] = kind;
    pmt_set_threads(threads);
    char path[PMT_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/train.tok", cfg.data_dir);
    pmt_corpus corpus;
    if (pmt_corpus_load(&corpus, path, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 1; }
    const int V = 8000;
    pmt_model m;
    pmt_optim opt;
    pmt_batcher bt;
    if (pmt_model_init(&m, &cfg, V, cfg.batch_tokens, cfg.max_len, err, sizeof err) != 0 ||
        pmt_optim_init(&opt, &cfg, m.tensors, m.n_tensors, m.n_params, err, sizeof err) != 0 ||
        pmt_batcher_init(&bt, &corpus, cfg.batch_tokens, cfg.max_len, cfg.seed, 1, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    pmt_model_init_params(&m, cfg.seed);
    if (getenv("PEAK")) {   /* sgemm 2048^3 CPU-time peak, median of 5 */
        const int n = 2048;
        float *a = calloc((size_t)n * n, 4), *bb = calloc((size_t)n * n, 4), *cc = calloc((size_t)n * n, 4);
        double g[5];
        for (int r = 0; r < 6; r++) {
            double t0 = cpu_s(), w0 = pmt_now_seconds();
            pmt_sgemm(0, 1, n, n, n, 1.0f, a, n, bb, n, 0.0f, cc, n);
            if (r) g[r - 1] = 2.0 * n * n * (double)n / (cpu_s() - t0) / 1e9;
            (void)w0;
        }
        printf("sgemm peak (CPU time, per process CPU-second): %.1f GFLOP/s\n", med(g, 5));
        free(a); free(bb); free(cc);
    }
    double *w[4], *c[4];
    for (int k = 0; k < 4; k++) { w[k] = calloc((size_t)steps, sizeof(double)); c[k] = calloc((size_t)steps, sizeof(double)); }
    double flops = 0, loss = 0, th0[64] = {0}, th1[64] = {0};
    for (int i = 0; i < warmup + steps; i++) {
        const pmt_batch *b = pmt_batcher_fill(&bt, 0, i);
        if (i == warmup) thread_cpu(th0);
        double tw[4], tc[4];
        pmt_stats st;
        tw[0] = pmt_now_seconds(); tc[0] = cpu_s();
        pmt_model_zero_grad(&m);
        loss = pmt_model_forward(&m, b, 1, cfg.seed + (uint64_t)i, &st);
        tw[1] = pmt_now_seconds(); tc[1] = cpu_s();
        pmt_model_backward(&m, b, st.tokens);
        tw[2] = pmt_now_seconds(); tc[2] = cpu_s();
        double norm, lr;
        pmt_optim_step(&opt, m.params, m.grads, loss, i + 1, &norm, &lr);
        tw[3] = pmt_now_seconds(); tc[3] = cpu_s();
        if (i >= warmup) {
            int j = i - warmup;
            for (int k = 0; k < 3; k++) { w[k][j] = tw[k + 1] - tw[k]; c[k][j] = tc[k + 1] - tc[k]; }
            w[3][j] = tw[3] - tw[0]; c[3][j] = tc[3] - tc[0];
            flops += pmt_model_train_flops(&cfg, V, b->B, b->S, b->T);
        }
    }
    thread_cpu(th1);
    printf("  per-thread CPU over the timed steps (ms/step):");
    for (int t = 0; t < threads && t < 64; t++) printf(" %.1f", 1e3 * (th1[t] - th0[t]) / steps);
    printf("\n");
    if (getenv("HASH")) {   /* bitwise fingerprint of the trained parameters and last gradients */
        uint64_t hp = 1469598103934665603ull, hg = hp;
        const unsigned char *bp = (const unsigned char *)m.params, *bg = (const unsigned char *)m.grads;
        for (size_t i = 0; i < m.n_params * sizeof(float); i++) { hp = (hp ^ bp[i]) * 1099511628211ull; hg = (hg ^ bg[i]) * 1099511628211ull; }
        printf("hash params %016llx grads %016llx loss %.9g\n", (unsigned long long)hp, (unsigned long long)hg, loss);
    }
    const char *names[4] = {"forward", "backward", "adam", "step"};
    printf("%s, %d threads, %d steps: loss %.6f, %.2f GFLOP/step\n", mode, threads, steps, loss, flops / steps / 1e9);
    for (int k = 0; k < 4; k++)
        printf("  %-9s wall %8.1f ms  cpu %8.1f ms\n", names[k], 1e3 * med(w[k], steps), 1e3 * med(c[k], steps));
    printf("  peak RSS %.0f MiB\n", pmt_peak_rss_mib());
    pmt_batcher_free(&bt);
    pmt_optim_free(&opt);
    pmt_model_free(&m);
    pmt_corpus_free(&corpus);
    return 0;
}
