/*
 * profile.h — where a training step spends its time, by phase, for the
 * step profile of `projmt bench`. Off by default: then begin/end cost one
 * branch and no clock read, so training and tests pay nothing.
 *
 * Phases are timed where they are called (nn/gemm.c times the products and
 * the bf16 rounding of their operands, the model its attention kernels,
 * LayerNorms and loss, the benchmark the optimizer); everything else of a
 * step (bias, ReLU, dropout, residual, embedding, zeroing) is the
 * element-wise remainder. The products also count their FLOPs, so that the
 * benchmark can say how near its peak the GEMM phase ran. Timed regions
 * never nest. Per thread: the profile is the calling thread's own
 * (begin/end are called from serial code, between parallel regions, on the
 * thread that runs the step), so enabling it on one thread changes nothing
 * on another.
 */
#ifndef PROJMT_PROFILE_H
#define PROJMT_PROFILE_H

typedef enum pmt_phase {
    PMT_PHASE_GEMM,        /* the matrix products of pmt_sgemm* themselves */
    PMT_PHASE_CONVERT,     /* bf16 rounding of operands no producer rounded (nn/gemm.c, the weights' copy) */
    PMT_PHASE_ATTENTION,   /* the attention kernels (scores, softmax, weighted sums) */
    PMT_PHASE_NORM,        /* LayerNorm forward and backward (with the roundings fused into them) */
    PMT_PHASE_LOSS,        /* gathering the counted rows, the cross-entropy over the logits */
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
/* Adds n floating-point operations to the products' count (when on). */
void pmt_profile_add_flops(double n);
/* The products' FLOPs counted since the last reset. */
double pmt_profile_flops(void);

#endif
