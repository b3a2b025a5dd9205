/*
 * rng.h — small deterministic random numbers (splitmix64), the same on every
 * machine and thread count, so seeds reproduce runs and a checkpoint can save
 * the whole generator state (one uint64).
 */
#ifndef PROJMT_RNG_H
#define PROJMT_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct pmt_rng { uint64_t state; } pmt_rng;

static inline uint64_t pmt_splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}
static inline uint64_t pmt_rng_next(pmt_rng *r) {
    r->state += 0x9E3779B97F4A7C15ULL;
    uint64_t x = r->state;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}
/* Uniform in [0, 1) with 53 random bits. */
static inline double pmt_rng_uniform(pmt_rng *r) { return (double)(pmt_rng_next(r) >> 11) * 0x1.0p-53; }
/* Uniform integer in [0, n). */
static inline uint64_t pmt_rng_below(pmt_rng *r, uint64_t n) { return (uint64_t)(pmt_rng_uniform(r) * (double)n); }
/* Standard normal (Box–Muller; one draw per call keeps the state a single word). */
static inline double pmt_rng_normal(pmt_rng *r) {
    double u1 = pmt_rng_uniform(r), u2 = pmt_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
