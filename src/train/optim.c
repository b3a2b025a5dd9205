/*
 * optim.c — see optim.h. The update is the llm.c AdamW loop:
 *   m = β1 m + (1-β1) g,  v = β2 v + (1-β2) g²,
 *   p -= lr (m̂ / (√v̂ + ε) + λ p)   with m̂ = m/(1-β1^t), v̂ = v/(1-β2^t),
 * with g = clip_scale · grad and λ = 0 for exempt (1-D) tensors.
 */
#include "train/optim.h"

#include "nn/gemm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The norm's fixed partition: same chunks, same summation order, whatever
 * the number of threads. */
enum { NORM_CHUNKS = 64 };

/* Matrices decay; vectors (biases, LayerNorm gains and biases, log σ) do not. */
static int tensor_decays(const pmt_tensor *t) { return t->rows > 1 && t->cols > 1; }

int pmt_optim_init(pmt_optim *o, const pmt_config *cfg, const pmt_tensor *tensors, int n_tensors,
                   size_t n_params, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->n = n_params;
    o->schedule = pmt_lr_schedule_of(cfg);
    o->beta1 = cfg->beta1;
    o->beta2 = cfg->beta2;
    o->eps = cfg->adam_eps;
    o->weight_decay = cfg->weight_decay;
    o->clip_norm = cfg->clip_norm;
    o->max_bad_steps = cfg->max_bad_steps;
    o->m = calloc(n_params ? n_params : 1, sizeof(float));
    o->v = calloc(n_params ? n_params : 1, sizeof(float));
    if (o->weight_decay != 0) o->decay = calloc(n_params ? n_params : 1, 1);
    if (!o->m || !o->v || (o->weight_decay != 0 && !o->decay)) {
        snprintf(err, errlen, "optimizer: out of memory for %zu parameters", n_params);
        pmt_optim_free(o);
        return -1;
    }
    if (o->decay)
        for (int i = 0; i < n_tensors; i++)
            if (tensor_decays(&tensors[i])) memset(o->decay + tensors[i].offset, 1, tensors[i].size);
    return 0;
}

void pmt_optim_free(pmt_optim *o) {
    free(o->m);
    free(o->v);
    free(o->decay);
    memset(o, 0, sizeof *o);
}

pmt_lr_schedule pmt_lr_schedule_of(const pmt_config *cfg) {
    pmt_lr_schedule s = {pmt_lr_schedule_kind(cfg->lr_schedule), cfg->lr, cfg->min_lr, cfg->warmup,
                         pmt_config_decay_end(cfg)};
    if (s.kind < 0) s.kind = PMT_LR_INVERSE_SQRT;
    return s;
}

double pmt_lr_at(const pmt_lr_schedule *sc, int64_t step) {
    const double s = step < 1 ? 1.0 : (double)step, w = (double)sc->warmup;
    if (sc->warmup > 0 && s <= w) return sc->lr * s / w;
    if (sc->kind == PMT_LR_INVERSE_SQRT) return sc->warmup > 0 ? sc->lr * sqrt(w / s) : sc->lr;
    if (sc->decay_end <= 0) return sc->lr;
    const double span = (double)sc->decay_end - w;
    double p = span > 0 ? (s - w) / span : 1.0;
    if (p > 1) p = 1;
    const double left = sc->kind == PMT_LR_COSINE ? 0.5 * (1.0 + cos(3.14159265358979323846 * p)) : 1.0 - p;
    return sc->min_lr + (sc->lr - sc->min_lr) * left;
}

double pmt_grad_norm(const float *g, size_t n) {
    double partial[NORM_CHUNKS];
    size_t chunk = (n + NORM_CHUNKS - 1) / NORM_CHUNKS;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < NORM_CHUNKS; c++) {
        size_t lo = (size_t)c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        double s = 0;
        /* omp simd: vector lanes of partial sums (a fixed order, so still
         * the same bits for any thread count); a plain loop would be one
         * dependent double add per element, latency-bound. */
#pragma omp simd reduction(+ : s)
        for (size_t i = lo; i < hi; i++) s += (double)g[i] * (double)g[i];
        partial[c] = s;
    }
    double sum = 0;
    for (int c = 0; c < NORM_CHUNKS; c++) sum += partial[c];
    return sqrt(sum);
}

double pmt_clip_scale(double norm, double clip_norm) {
    return (clip_norm > 0 && norm > clip_norm) ? clip_norm / norm : 1.0;
}

/* Parameters per chunk of the update: the bf16 copy of a chunk is rounded
 * from L1 right after the chunk is updated. */
enum { ADAM_CHUNK = 2048 };

/* One parameter's moments updated for gradient g, and its Adam step
 * m̂ / (√v̂ + ε) (before the learning rate and the decay). */
static inline float adam_moments(float *m, float *v, float g, float b1, float b2, float bc1, float bc2, float eps) {
    const float mi = b1 * *m + (1.0f - b1) * g;
    const float vi = b2 * *v + (1.0f - b2) * g * g;
    *m = mi;
    *v = vi;
    return (mi / bc1) / (sqrtf(vi / bc2) + eps);
}

/* The elementwise Adam(W) update over the flat buffers, and the bf16 copy
 * when one is kept. */
static void adam_update(pmt_optim *o, float *params, const float *grads, double lr, double scale) {
    const float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
    const float bc1 = (float)(1.0 - pow(o->beta1, (double)o->t));
    const float bc2 = (float)(1.0 - pow(o->beta2, (double)o->t));
    const float flr = (float)lr, fscale = (float)scale, wd = (float)o->weight_decay;
    float *m = o->m, *v = o->v;
    uint16_t *params16 = o->params16;
    const uint8_t *decay = o->decay;
    const long n = (long)o->n, chunks = (n + ADAM_CHUNK - 1) / ADAM_CHUNK;
    /* The decay test is a select, not a branch, and its absence a loop of
     * its own, so that both loops vectorise (same values either way). */
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        const long lo = c * ADAM_CHUNK, hi = lo + ADAM_CHUNK < n ? lo + ADAM_CHUNK : n;
        if (decay) {
#pragma omp simd
            for (long i = lo; i < hi; i++) {
                const float update = adam_moments(&m[i], &v[i], grads[i] * fscale, b1, b2, bc1, bc2, eps);
                params[i] -= flr * (decay[i] ? update + wd * params[i] : update);
            }
        } else {
#pragma omp simd
            for (long i = lo; i < hi; i++)
                params[i] -= flr * adam_moments(&m[i], &v[i], grads[i] * fscale, b1, b2, bc1, bc2, eps);
        }
        if (params16) pmt_bf16_convert_row(params16 + lo, params + lo, (int)(hi - lo), 1.0f);
    }
}

void pmt_optim_keep_bf16_copy(pmt_optim *o, uint16_t *params16) { o->params16 = params16; }

pmt_step_status pmt_optim_step(pmt_optim *o, float *params, const float *grads, double loss,
                               int64_t step, double *grad_norm, double *lr_used) {
    double norm = pmt_grad_norm(grads, o->n);
    double lr = pmt_lr_at(&o->schedule, step);
    if (grad_norm) *grad_norm = norm;
    if (lr_used) *lr_used = lr;
    if (!isfinite(loss) || !isfinite(norm)) {
        o->bad_steps++;
        o->skipped++;
        return o->bad_steps >= o->max_bad_steps ? PMT_STEP_DIVERGED : PMT_STEP_SKIPPED;
    }
    o->bad_steps = 0;
    o->t++;
    adam_update(o, params, grads, lr, pmt_clip_scale(norm, o->clip_norm));
    return PMT_STEP_APPLIED;
}

pmt_adam_state pmt_optim_state(const pmt_optim *o) {
    pmt_adam_state st = {o->n, o->m, o->v, o->t, o->bad_steps, o->skipped};
    return st;
}

int pmt_optim_restore(pmt_optim *o, const pmt_checkpoint *ck, char *err, size_t errlen) {
    if (!ck->has_optim || o->n != ck->n_params) {
        snprintf(err, errlen, "checkpoint has %s optimizer state for %zu parameters (optimizer: %zu)",
                 ck->has_optim ? "an" : "no", ck->n_params, o->n);
        return -1;
    }
    memcpy(o->m, ck->adam_m, o->n * sizeof(float));
    memcpy(o->v, ck->adam_v, o->n * sizeof(float));
    o->t = ck->adam_t;
    o->bad_steps = (int)ck->adam_bad_steps;
    o->skipped = ck->adam_skipped;
    return 0;
}

void pmt_ema_update(float *ema, const float *params, size_t n, double decay, int64_t step) {
    const double warm = (1.0 + (double)step) / (10.0 + (double)step);
    const float d = (float)(decay < warm ? decay : warm), keep = 1.0f - d;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) ema[i] = d * ema[i] + keep * params[i];
}
