/*
 * bench_decode_cpu.c — decode speed by CPU time, for shared machines (not a
 * ctest test). Mirrors pmt_bench_decode's "capped" runs (output limit
 * 1.1 × source + 2, random model of the given config and mode): greedy and
 * beam 4 over the first n lines of <data-dir>/test.en, batch sentences per
 * search call; prints sentences per WALL second and per process CPU second.
 *
 *   OPENBLAS_CORETYPE=Haswell ./build/bench_decode_cpu [mode] [threads] [n] [batch] [config]
 * Built with -DPROJMT_BENCH_PROGRAMS=ON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "translate/beam_search.h"
#include "model/model.h"
#include "core/clock.h"
#include "core/threads.h"
#include "data/spm.h"

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "standard";
    int threads = argc > 2 ? atoi(argv[2]) : 1, n = argc > 3 ? atoi(argv[3]) : 500;
    int batch = argc > 4 ? atoi(argv[4]) : 64;
    const char *cfgpath = argc > 5 ? argv[5] : "configs/base.ini";
    char err[512], path[PMT_PATH_MAX + 16];
    pmt_config cfg;
    pmt_config_defaults(&cfg);
    if (pmt_config_load_file(&cfg, cfgpath, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 1; }
    int kind = strcmp(mode, "projection") ? PMT_ATTN_STANDARD : PMT_ATTN_PROJECTION;
    for (int s = 0; s < PMT_SITES; s++) cfg.site_kind[s] = kind;
    pmt_set_threads(threads);
    snprintf(path, sizeof path, "%s/spm.model", cfg.data_dir);
    pmt_spm *spm = pmt_spm_load_file(path, err, sizeof err);
    if (!spm) { fprintf(stderr, "%s\n", err); return 1; }
    const int max_src = cfg.max_len - 1;
    int32_t *ids = calloc((size_t)n * max_src, sizeof *ids);
    int *len = calloc((size_t)n, sizeof *len);
    const int32_t **ptr = calloc((size_t)n, sizeof *ptr);
    snprintf(path, sizeof path, "%s/test.en", cfg.data_dir);
    FILE *f = fopen(path, "rb");
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int count = 0;
    while (f && count < n && (got = getline(&line, &cap, f)) >= 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        int l = pmt_spm_encode(spm, line, ids + (size_t)count * max_src, max_src);
        if (l <= 0) continue;
        ptr[count] = ids + (size_t)count * max_src;
        len[count++] = l < max_src ? l : max_src;
    }
    n = count;
    pmt_model m;
    if (pmt_model_init(&m, &cfg, pmt_spm_vocab_size(spm), cfg.max_len * batch, cfg.max_len, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    pmt_model_init_params(&m, cfg.seed);
    pmt_search search;
    if (pmt_search_init(&search, &m, batch, 4, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 1; }
    pmt_nbest *out = calloc((size_t)batch, sizeof *out);
    pmt_decode_options opt;
    pmt_decode_options_from_config(&opt, &cfg);
    opt.n_best = 1;
    opt.max_length_factor = 1.1;
    opt.max_length_const = 2;
    printf("%s, %d threads, %d sentences, batch %d\n", mode, threads, n, batch);
    for (int k = -1; k < 2; k++) {
        opt.beam_size = k == 0 ? 1 : 4;
        int nn = k < 0 ? batch : n;   /* k = -1: warm-up */
        double w0 = pmt_now_seconds(), c0 = cpu_s();
        long toks = 0;
        for (int i = 0; i < nn; i += batch) {
            int b = nn - i < batch ? nn - i : batch;
            if (pmt_search_run(&search, &opt, ptr + i, len + i, b, out, err, sizeof err) != 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            for (int j = 0; j < b; j++) toks += out[j].hyp[0].len;
        }
        double w = pmt_now_seconds() - w0, c = cpu_s() - c0;
        if (k >= 0)
            printf("  %-7s %8.1f sent/s wall  %8.1f sent/CPU-s  (%ld tokens)\n", k == 0 ? "greedy" : "beam 4",
                   nn / w, nn / c, toks);
    }
    pmt_search_free(&search);
    pmt_model_free(&m);
    pmt_spm_free(spm);
    return 0;
}
