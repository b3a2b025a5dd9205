/*
 * bench_timing.h — the timing of the tests/bench_*.c profiling programs:
 * the median of BENCH_REPS calls (the includer may set it first) after 3
 * warm-ups, of wall time or, with PROJMT_BENCH_CPU=1, of process CPU time:
 * on a shared, loaded machine the wall time of a 2-thread run is dominated
 * by waiting for a descheduled thread, while single-thread CPU time stays
 * honest.
 */
#ifndef PROJMT_BENCH_TIMING_H
#define PROJMT_BENCH_TIMING_H

#include <omp.h>
#include <stdlib.h>
#include <time.h>

#ifndef BENCH_REPS
#define BENCH_REPS 41
#endif

typedef void (*bench_fn)(void *ctx);

static int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double bench_now_ms(void) {
    static int cpu = -1;
    if (cpu < 0) cpu = getenv("PROJMT_BENCH_CPU") && atoi(getenv("PROJMT_BENCH_CPU"));
    if (!cpu) return omp_get_wtime() * 1e3;
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Milliseconds per call of f(ctx). */
static double time_ms(bench_fn f, void *ctx) {
    double t[BENCH_REPS];
    for (int i = 0; i < 3; i++) f(ctx);
    for (int i = 0; i < BENCH_REPS; i++) {
        const double t0 = bench_now_ms();
        f(ctx);
        t[i] = bench_now_ms() - t0;
    }
    qsort(t, BENCH_REPS, sizeof t[0], bench_cmp_double);
    return t[BENCH_REPS / 2];
}

#endif
