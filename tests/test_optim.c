/*
 * test_optim.c — Adam(W) against a hand computation, the learning-rate
 * schedule at known steps, clipping to the global norm, weight decay only on
 * matrices, NaN/Inf steps skipped without touching the state, and the bf16
 * copy of the parameters an update can write in the same pass.
 */
#include <math.h>
#include <stdio.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "train/optim.h"
#include "nn/gemm.h"
#include "core/rng.h"
#include "testutil.h"

/* A 2x2 matrix "w" (decays) followed by a 2-vector "b" (exempt). */
static const pmt_tensor table[2] = {
    {"w", 0, 4, 2, 2},
    {"b", 4, 2, 2, 1},
};
enum { N = 6 };

static void small_config(pmt_config *cfg, double weight_decay, double clip) {
    pmt_config_defaults(cfg);
    cfg->lr = 0.1;
    cfg->warmup = 0;
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.98;
    cfg->adam_eps = 1e-8;
    cfg->weight_decay = weight_decay;
    cfg->clip_norm = clip;
    cfg->max_bad_steps = 3;
}

/* Two Adam steps by hand, in double, including bias correction at t = 2. */
static void test_adam_by_hand(void) {
    pmt_config cfg;
    small_config(&cfg, 0.01, 0);
    pmt_optim o;
    char err[128];
    CHECK(pmt_optim_init(&o, &cfg, table, 2, N, err, sizeof err) == 0);
    float p[N] = {0.5f, -1.0f, 2.0f, 0.25f, -0.5f, 1.5f};
    const float g1[N] = {0.1f, -0.2f, 0.3f, 0.0f, 1.0f, -2.0f};
    const float g2[N] = {-0.4f, 0.1f, 0.3f, 0.5f, 0.2f, 0.0f};
    double ref[N], m[N] = {0}, v[N] = {0};
    for (int i = 0; i < N; i++) ref[i] = p[i];
    const float *grads[2] = {g1, g2};
    for (int t = 1; t <= 2; t++) {
        double gn, lr;
        CHECK(pmt_optim_step(&o, p, grads[t - 1], 1.0, t, &gn, &lr) == PMT_STEP_APPLIED);
        CHECK_NEAR(lr, 0.1, 1e-15);
        for (int i = 0; i < N; i++) {
            double g = grads[t - 1][i];
            m[i] = 0.9 * m[i] + 0.1 * g;
            v[i] = 0.98 * v[i] + 0.02 * g * g;
            double upd = (m[i] / (1 - pow(0.9, t))) / (sqrt(v[i] / (1 - pow(0.98, t))) + 1e-8);
            if (i < 4) upd += 0.01 * ref[i];
            ref[i] -= 0.1 * upd;
        }
    }
    CHECK(o.t == 2);
    for (int i = 0; i < N; i++) CHECK_NEAR(p[i], ref[i], 2e-6);
    for (int i = 0; i < N; i++) CHECK_NEAR(o.m[i], m[i], 1e-7);
    pmt_optim_free(&o);
}

/* Zero gradients: only the decoupled decay moves parameters, and only matrices. */
static void test_decay_skips_vectors(void) {
    pmt_config cfg;
    small_config(&cfg, 0.5, 0);
    pmt_optim o;
    char err[128];
    CHECK(pmt_optim_init(&o, &cfg, table, 2, N, err, sizeof err) == 0);
    float p[N] = {1, 1, 1, 1, 1, 1};
    const float g[N] = {0};
    CHECK(pmt_optim_step(&o, p, g, 1.0, 1, NULL, NULL) == PMT_STEP_APPLIED);
    for (int i = 0; i < 4; i++) CHECK_NEAR(p[i], 1.0 - 0.1 * 0.5, 1e-7);
    CHECK(p[4] == 1.0f && p[5] == 1.0f);
    pmt_optim_free(&o);
}

/* Validates a config with these schedule keys (lr 1e-3); 0 or -1 with err. */
static int validate_schedule(pmt_config *cfg, const char *kind, int warmup, int decay_steps, int max_steps,
                             double min_lr, char *err, size_t errlen) {
    pmt_config_defaults(cfg);
    snprintf(cfg->lr_schedule, sizeof cfg->lr_schedule, "%s", kind);
    cfg->lr = 1e-3, cfg->warmup = warmup, cfg->decay_steps = decay_steps, cfg->max_steps = max_steps;
    cfg->min_lr = min_lr;
    err[0] = '\0';
    return pmt_config_validate(cfg, err, errlen);
}

/* The schedule a config gives, after pmt_config_validate accepted it. */
static pmt_lr_schedule schedule_of(const char *kind, int warmup, int decay_steps, int max_steps, double min_lr) {
    pmt_config cfg;
    char err[256];
    CHECK(validate_schedule(&cfg, kind, warmup, decay_steps, max_steps, min_lr, err, sizeof err) == 0);
    return pmt_lr_schedule_of(&cfg);
}

static int refused(const char *kind, int warmup, int decay_steps, int max_steps, double min_lr, const char *says) {
    pmt_config cfg;
    char err[256];
    return validate_schedule(&cfg, kind, warmup, decay_steps, max_steps, min_lr, err, sizeof err) != 0 &&
           strstr(err, says) != NULL;
}

static void test_schedule(void) {
    pmt_lr_schedule s = schedule_of("inverse-sqrt", 100, 0, 0, 0);
    CHECK_NEAR(pmt_lr_at(&s, 1), 1e-5, 1e-18);
    CHECK_NEAR(pmt_lr_at(&s, 50), 5e-4, 1e-18);
    CHECK_NEAR(pmt_lr_at(&s, 100), 1e-3, 1e-18);
    CHECK_NEAR(pmt_lr_at(&s, 400), 5e-4, 1e-18);
    CHECK_NEAR(pmt_lr_at(&s, 10000), 1e-4, 1e-18);
    s = schedule_of("inverse-sqrt", 0, 0, 0, 0);
    CHECK_NEAR(pmt_lr_at(&s, 7), 1e-3, 0);

    /* Cosine over steps 100..1100 (decay_steps): the peak, half-way, the floor, then the floor. */
    s = schedule_of("cosine", 100, 1100, 5000, 1e-4);
    CHECK_NEAR(pmt_lr_at(&s, 50), 5e-4, 1e-18);
    CHECK_NEAR(pmt_lr_at(&s, 100), 1e-3, 1e-18);
    CHECK_NEAR(pmt_lr_at(&s, 350), 1e-4 + 9e-4 * (1 + cos(3.14159265358979323846 / 4)) / 2, 1e-15);
    CHECK_NEAR(pmt_lr_at(&s, 600), 5.5e-4, 1e-15);
    CHECK_NEAR(pmt_lr_at(&s, 1100), 1e-4, 1e-15);
    CHECK_NEAR(pmt_lr_at(&s, 4000), 1e-4, 1e-15);
    /* Falls monotonically. */
    for (int64_t t = 101; t <= 1100; t++) CHECK(pmt_lr_at(&s, t) <= pmt_lr_at(&s, t - 1));
    /* Linear, ending at max_steps when decay_steps is 0, no warm-up. */
    s = schedule_of("linear", 0, 0, 1000, 0);
    CHECK_NEAR(pmt_lr_at(&s, 1), 1e-3 * 999.0 / 1000.0, 1e-15);
    CHECK_NEAR(pmt_lr_at(&s, 250), 7.5e-4, 1e-15);
    CHECK_NEAR(pmt_lr_at(&s, 1000), 0, 1e-18);
    CHECK_NEAR(pmt_lr_at(&s, 1200), 0, 1e-18);

    /* What validation refuses, naming the key. */
    CHECK(refused("cosine", 100, 0, 0, 0, "give decay_steps, max_steps or minutes"));
    CHECK(refused("linear", 1000, 800, 0, 0, "must be larger than warmup"));
    CHECK(refused("step", 100, 0, 0, 0, "lr_schedule must be"));
    CHECK(refused("cosine", 100, 1000, 0, 2e-3, "min_lr must be"));
}

static void test_clipping(void) {
    float g[N] = {6, 0, 0, 8, 0, 0};
    CHECK_NEAR(pmt_grad_norm(g, N), 10.0, 0);
    CHECK_NEAR(pmt_clip_scale(10.0, 1.0), 0.1, 1e-16);
    CHECK_NEAR(pmt_clip_scale(0.5, 1.0), 1.0, 0);
    CHECK_NEAR(pmt_clip_scale(10.0, 0.0), 1.0, 0);
    /* The clipped gradient is what enters the moments: m = (1 - β1) g · scale. */
    pmt_config cfg;
    small_config(&cfg, 0, 1.0);
    pmt_optim o;
    char err[128];
    CHECK(pmt_optim_init(&o, &cfg, table, 2, N, err, sizeof err) == 0);
    float p[N] = {0};
    double norm;
    CHECK(pmt_optim_step(&o, p, g, 1.0, 1, &norm, NULL) == PMT_STEP_APPLIED);
    CHECK_NEAR(norm, 10.0, 0);
    CHECK_NEAR(o.m[0], 0.1 * 0.6, 1e-7);
    CHECK_NEAR(o.m[3], 0.1 * 0.8, 1e-7);
    CHECK_NEAR(o.v[3], 0.02 * 0.64, 1e-7);
    pmt_optim_free(&o);
}

/* The norm of a long vector matches a sequential double sum and is bitwise
 * the same with 1 and 2 threads. */
static void test_norm_deterministic(void) {
    size_t n = 100003;
    float *g = malloc(n * sizeof *g);
    pmt_rng rng = {5};
    double ref = 0;
    for (size_t i = 0; i < n; i++) {
        g[i] = (float)pmt_rng_normal(&rng);
        ref += (double)g[i] * g[i];
    }
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    double one = pmt_grad_norm(g, n);
    omp_set_num_threads(2);
    double two = pmt_grad_norm(g, n);
    omp_set_num_threads(threads);
    CHECK(one == two);
    CHECK_NEAR(one, sqrt(ref), 1e-9 * sqrt(ref));
    free(g);
}

static void test_nan_skip(void) {
    pmt_config cfg;
    small_config(&cfg, 0.01, 1.0);
    pmt_optim o;
    char err[128];
    CHECK(pmt_optim_init(&o, &cfg, table, 2, N, err, sizeof err) == 0);
    float p[N] = {1, 2, 3, 4, 5, 6}, before[N];
    float good[N] = {0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f};
    float bad[N] = {0.1f, NAN, 0.1f, 0.1f, 0.1f, 0.1f};
    float inf[N] = {0.1f, 0.1f, INFINITY, 0.1f, 0.1f, 0.1f};
    CHECK(pmt_optim_step(&o, p, good, 1.0, 1, NULL, NULL) == PMT_STEP_APPLIED);
    memcpy(before, p, sizeof p);
    float m_before = o.m[0], v_before = o.v[0];
    CHECK(pmt_optim_step(&o, p, bad, 1.0, 2, NULL, NULL) == PMT_STEP_SKIPPED);
    CHECK(pmt_optim_step(&o, p, good, INFINITY, 3, NULL, NULL) == PMT_STEP_SKIPPED);
    CHECK(memcmp(p, before, sizeof p) == 0 && o.m[0] == m_before && o.v[0] == v_before && o.t == 1);
    CHECK(o.bad_steps == 2 && o.skipped == 2);
    /* A good step resets the consecutive count; three bad ones in a row diverge. */
    CHECK(pmt_optim_step(&o, p, good, 1.0, 4, NULL, NULL) == PMT_STEP_APPLIED);
    CHECK(o.bad_steps == 0 && o.t == 2);
    CHECK(pmt_optim_step(&o, p, inf, 1.0, 5, NULL, NULL) == PMT_STEP_SKIPPED);
    CHECK(pmt_optim_step(&o, p, bad, 1.0, 6, NULL, NULL) == PMT_STEP_SKIPPED);
    CHECK(pmt_optim_step(&o, p, good, NAN, 7, NULL, NULL) == PMT_STEP_DIVERGED);
    CHECK(o.skipped == 5);
    pmt_optim_free(&o);
}

/* The bf16 copy an update writes (pmt_optim_keep_bf16_copy): the bits of
 * pmt_bf16_convert of the updated parameters, over several chunks and a
 * tail; the fp32 update itself is the one without a copy, bit for bit; a
 * skipped step writes nothing. */
static void test_bf16_copy(void) {
    enum { NB = 2048 * 3 + 77 };
    const pmt_tensor big[1] = {{"w", 0, NB, 1, NB}};
    pmt_config cfg;
    small_config(&cfg, 0.01, 1.0);
    pmt_optim with, without;
    char err[128];
    CHECK(pmt_optim_init(&with, &cfg, big, 1, NB, err, sizeof err) == 0);
    CHECK(pmt_optim_init(&without, &cfg, big, 1, NB, err, sizeof err) == 0);
    float *p1 = malloc(sizeof(float) * NB), *p2 = malloc(sizeof(float) * NB), *g = malloc(sizeof(float) * NB);
    uint16_t *copy = malloc(sizeof(uint16_t) * NB), *expect = malloc(sizeof(uint16_t) * NB);
    pmt_rng rng = {17};
    for (int i = 0; i < NB; i++) {
        p1[i] = p2[i] = (float)(2.0 * pmt_rng_uniform(&rng) - 1.0);
        g[i] = (float)(pmt_rng_uniform(&rng) - 0.5);
    }
    memset(copy, 0xff, sizeof(uint16_t) * NB);
    pmt_optim_keep_bf16_copy(&with, copy);
    double gn, lr;
    for (int t = 1; t <= 3; t++) {
        CHECK(pmt_optim_step(&with, p1, g, 1.0, t, &gn, &lr) == PMT_STEP_APPLIED);
        CHECK(pmt_optim_step(&without, p2, g, 1.0, t, &gn, &lr) == PMT_STEP_APPLIED);
    }
    pmt_bf16_convert(expect, p1, 1, NB, NB, 1.0f);
    CHECK_MSG(memcmp(p1, p2, sizeof(float) * NB) == 0, "keeping a bf16 copy changed the fp32 update");
    CHECK_MSG(memcmp(copy, expect, sizeof(uint16_t) * NB) == 0, "the update's bf16 copy differs from pmt_bf16_convert");
    g[5] = NAN;
    memset(copy, 0xff, sizeof(uint16_t) * NB);
    CHECK(pmt_optim_step(&with, p1, g, 1.0, 4, &gn, &lr) == PMT_STEP_SKIPPED);
    CHECK_MSG(copy[0] == 0xffff && copy[NB - 1] == 0xffff, "a skipped step wrote the bf16 copy");
    pmt_optim_free(&with);
    pmt_optim_free(&without);
    free(p1); free(p2); free(g); free(copy); free(expect);
}

int main(void) {
    test_adam_by_hand();
    test_bf16_copy();
    test_decay_skips_vectors();
    test_schedule();
    test_clipping();
    test_norm_deterministic();
    test_nan_skip();
    return test_finish();
}
