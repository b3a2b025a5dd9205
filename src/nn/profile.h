/*
 * profile.h — where a training step spends its time, by phase, for the
 * step profile of `projmt bench`. Off by default: then begin/end cost one
 * branch and no clock read, so training and tests pay nothing.
 *
 * Phases are timed where they are called (pmt_sgemm times GEMM, the model
 * times its attention kernels, the benchmark the optimizer); everything else
 * of a step (LayerNorm, bias, ReLU, dropout, residual, embedding,
 * cross-entropy, zeroing) is the element-wise remainder. Timed regions never
 * nest. Not thread-safe: begin/end are called from serial code, between
 * parallel regions.
 */
#ifndef PROJMT_PROFILE_H
#define PROJMT_PROFILE_H

typedef enum pmt_phase {
    PMT_PHASE_GEMM,        /* pmt_sgemm */
    PMT_PHASE_ATTENTION,   /* the attention kernels (scores, softmax, weighted sums) */
    PMT_PHASE_OPTIMIZER,   /* gradient norm, clipping, Adam */
    PMT_PHASES
} pmt_phase;

/* Turns timing on or off (it starts off). */
void pmt_profile_enable(int on);
/* Zeroes every phase's seconds. */
void pmt_profile_reset(void);
/* Seconds counted for a phase since the last reset. */
double pmt_profile_seconds(pmt_phase phase);
/* A start time when profiling is on (0 otherwise), to pass to pmt_profile_end. */
double pmt_profile_begin(void);
/* Adds the time since t0 to phase when profiling is on. */
void pmt_profile_end(pmt_phase phase, double t0);

#endif
