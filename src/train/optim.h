/*
 * optim.h — Adam(W) over the model's one flat parameter buffer, with the
 * warm-up + inverse-square-root schedule, global-norm clipping and NaN/Inf
 * step skipping.
 *
 * Why one flat buffer: params, grads, m and v are parallel arrays of n
 * floats, so an update is one OpenMP loop and the state checkpoints as two
 * arrays. Weight decay (decoupled, AdamW) applies only to matrices: the
 * tensor table marks 1-D tensors (biases, LayerNorm gains/biases, log σ) as
 * exempt in a byte mask built once at init.
 *
 * Determinism: the gradient norm is summed in double over a fixed number of
 * chunks in a fixed order, so it is bitwise the same for any thread count;
 * the update is elementwise. Nothing allocates after init.
 *
 * Ownership: pmt_optim owns m, v and the decay mask; pmt_optim_free releases them.
 */
#ifndef PROJMT_OPTIM_H
#define PROJMT_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "model/checkpoint.h"
#include "model/model.h"

/* The learning rate as a function of the step (a copy of the config's keys). */
typedef struct pmt_lr_schedule {
    int kind;                    /* PMT_LR_* */
    double lr, min_lr;           /* peak (after warm-up) and floor (cosine/linear, at decay_end) */
    int warmup;                  /* linear warm-up steps (0: start at the peak) */
    int64_t decay_end;           /* cosine/linear: the step where lr reaches min_lr; 0 = not known yet
                                    (a minutes budget before its estimate): the peak after warm-up */
} pmt_lr_schedule;

/* The schedule of a validated config (lr, warmup, lr_schedule, decay_steps or max_steps, min_lr). */
pmt_lr_schedule pmt_lr_schedule_of(const pmt_config *cfg);

typedef struct pmt_optim {
    size_t n;
    float *m, *v;                /* [n] first and second moments */
    uint8_t *decay;              /* [n] 1 where weight decay applies; NULL if weight_decay == 0 */
    pmt_lr_schedule schedule;
    double beta1, beta2, eps, weight_decay, clip_norm;
    int max_bad_steps;           /* give up at this many consecutive skips (0: at the first) */
    int64_t t;                   /* updates applied (Adam's bias-correction step) */
    int bad_steps;               /* consecutive skipped (NaN/Inf) steps */
    int64_t skipped;             /* skipped steps in total */
    uint16_t *params16;          /* borrowed, may be NULL: the bf16 copy of the parameters that an
                                    applied update also writes (pmt_optim_keep_bf16_copy) */
} pmt_optim;

typedef enum {
    PMT_STEP_APPLIED = 0,        /* parameters updated */
    PMT_STEP_SKIPPED = 1,        /* loss or gradient norm not finite: parameters untouched */
    PMT_STEP_DIVERGED = 2        /* skipped, and max_bad_steps consecutive skips reached */
} pmt_step_status;

/* Takes lr, betas, eps, weight decay, clip norm, warm-up and max_bad_steps
 * from cfg; n_params floats of state described by the tensor table.
 * Returns 0, or -1 with a message in err (out of memory). */
int pmt_optim_init(pmt_optim *o, const pmt_config *cfg, const pmt_tensor *tensors, int n_tensors,
                   size_t n_params, char *err, size_t errlen);
void pmt_optim_free(pmt_optim *o);
/* bf16 training: every applied update also writes params16 = bf16(params)
 * (the bits of pmt_bf16_convert) in the same pass over the parameters, so
 * the next forward pass need not round them again (the model's
 * params16, pmt_model_params16_written). params16 is borrowed ([n]). */
void pmt_optim_keep_bf16_copy(pmt_optim *o, uint16_t *params16);

/* Learning rate at 1-based step. Warm-up: lr * step / warmup for step <=
 * warmup. Then, with p = (step - warmup) / (decay_end - warmup) capped at 1:
 *   inverse-sqrt  lr * sqrt(warmup / step)   (warmup = 0: a constant lr)
 *   cosine        min_lr + (lr - min_lr) * (1 + cos(pi p)) / 2
 *   linear        min_lr + (lr - min_lr) * (1 - p)
 * (cosine and linear hold the peak while decay_end is 0, not known yet). */
double pmt_lr_at(const pmt_lr_schedule *s, int64_t step);
/* Euclidean norm of g[0..n), accumulated in double, thread-count independent. */
double pmt_grad_norm(const float *g, size_t n);
/* Factor that brings a gradient of this norm to clip_norm (1 if within, or clip off). */
double pmt_clip_scale(double norm, double clip_norm);

/* One optimizer step at schedule step `step` (1-based) after the gradients of
 * a batch whose loss was `loss`: skips on a non-finite loss or gradient norm,
 * else clips and applies Adam(W). Reports the (unclipped) norm and the lr used. */
pmt_step_status pmt_optim_step(pmt_optim *o, float *params, const float *grads, double loss,
                               int64_t step, double *grad_norm, double *lr_used);

/* Exponential moving average of the parameters after an applied update at
 * schedule step `step` (1-based): ema = d*ema + (1-d)*params with
 * d = min(decay, (1 + step) / (10 + step)), the warm-up of Marian's
 * exponential smoothing and TensorFlow's ExponentialMovingAverage, so the
 * average is not dominated by the random initial weights. */
void pmt_ema_update(float *ema, const float *params, size_t n, double decay, int64_t step);

/* The optimizer's state as the checkpoint stores it (pointers into o). */
pmt_adam_state pmt_optim_state(const pmt_optim *o);
/* Copies a checkpoint's Adam moments and counters into o (same size
 * required). 0, or -1 with err when the checkpoint has none or another size. */
int pmt_optim_restore(pmt_optim *o, const pmt_checkpoint *ck, char *err, size_t errlen);

#endif
