/*
 * ops_testutil.h — deterministic fixtures shared by the test_ops_*.c tests:
 * a seeded generator (tests must not depend on libc's rand) and buffer
 * helpers. Header-only because CMake links each test with testutil.c only.
 */
#ifndef PROJMT_OPS_TESTUTIL_H
#define PROJMT_OPS_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* xorshift64*: tiny, seeded, identical on every platform. */
static uint64_t tu_rng_state = 0x2545F4914F6CDD1Dull;
static inline void tu_seed(uint64_t s) { tu_rng_state = s ? s : 1; }
static inline double tu_uniform(double lo, double hi) {
    tu_rng_state ^= tu_rng_state >> 12;
    tu_rng_state ^= tu_rng_state << 25;
    tu_rng_state ^= tu_rng_state >> 27;
    const uint64_t x = tu_rng_state * 0x2545F4914F6CDD1Dull;
    return lo + (hi - lo) * ((double)(x >> 11) * 0x1.0p-53);
}
static inline void tu_fill(float *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) x[i] = (float)tu_uniform(lo, hi);
}

/* calloc that aborts the test on failure (tests never handle OOM). */
static inline float *tu_alloc(size_t n) {
    float *p = (float *)calloc(n ? n : 1, sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}
static inline float *tu_copy(const float *x, size_t n) {
    float *p = tu_alloc(n);
    memcpy(p, x, n * sizeof(float));
    return p;
}

/* Σ x_i r_i in double: the scalar loss whose gradient w.r.t. x is r. */
static inline double tu_dot_r(const float *x, const float *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * r[i];
    return s;
}

static inline int tu_all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

#endif
