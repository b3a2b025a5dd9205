/*
 * ops_internal.h — inline math shared by the nn/ops_*.c kernels; private to
 * nn/ (everything outside nn/ uses the kernels declared in nn/ops.h).
 *
 * Everything here is static inline so the compiler can inline it into the
 * `omp simd` loops of the kernels: a per-element call into libm or a helper
 * would stop vectorisation of the softmax and cross-entropy inner loops.
 */
#ifndef PROJMT_OPS_INTERNAL_H
#define PROJMT_OPS_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Element count below which elementwise loops stay serial: an OpenMP
 * fork/join costs a few microseconds, more than streaming 32k floats. */
#define OPS_PAR_MIN 32768

/* Columns per task of the column-sum reductions (bias/LayerNorm gradients):
 * a multiple of a 64-byte cache line, so two threads never share a line of
 * the gradient they accumulate, and each row visit reads whole lines. */
#define OPS_COL_BLOCK 32

/* exp(xc) for xc already clamped to [-87.33654, 88.3]: the polynomial and
 * exponent-bits core that ops_exp and ops_exp_nonpos share. */
static inline float ops_exp_clamped(float xc) {
    const float shifter = 12582912.0f;
    const float t = xc * 1.44269504088896341f + shifter;
    const float fn = t - shifter;
    int32_t tbits, sbits;
    memcpy(&tbits, &t, sizeof tbits);
    memcpy(&sbits, &shifter, sizeof sbits);
    float r = xc - fn * 0.693359375f;
    r = r + fn * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    int32_t bits = (tbits - sbits + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n;
}

/* ops_exp: expf written so GCC can vectorise it inside `omp simd` loops.
 * glibc only exposes its vector expf under -ffast-math, which projmt does not
 * use (it would break the meaning of -INFINITY and NaN checks), so softmax
 * would otherwise pay one scalar libm call per element. Algorithm of Cephes
 * expf: x = n·ln2 + r with |r| <= ln2/2 (ln2 split in two for exactness),
 * exp(r) by a degree-7 minimax polynomial, times 2^n built in the exponent
 * bits. Max error about 1 ulp on [-87.33, 88.3]; below that the result is
 * exactly 0 (so exp(-INFINITY) = 0), above it +INFINITY, and NaN stays NaN.
 * The clamps come first so n stays in [-126, 127], a normal exponent. */
static inline float ops_exp(float x) {
    const float lo = -87.33654f, hi = 88.3f;
    float xc = x > lo ? x : lo;
    xc = xc < hi ? xc : hi;
    /* n = round(x·log2 e) by the 1.5·2^23 shifter: the addition rounds to
     * an integer held in the low mantissa bits. floorf/nearbyintf would be
     * libm calls here (GCC inlines them only with -fno-trapping-math), which
     * stops vectorisation. */
    float y = ops_exp_clamped(xc);
    y = x < lo ? 0.0f : y;
    y = x > hi ? INFINITY : y;
    return x != x ? x : y;
}

/* ops_exp for arguments x <= 0 or NaN — the max-subtracted logits of every
 * softmax and log-sum-exp. Bit-identical to ops_exp there, with fewer vector
 * operations in the hot loops: no upper clamp and no +INFINITY select
 * (x <= 0 < 88.3). The lower clamp and the NaN select stay as in ops_exp:
 * written as one condition (x < lo ? ...) GCC turns them into a branch and
 * the loop no longer vectorises. */
static inline float ops_exp_nonpos(float x) {
    const float lo = -87.33654f;
    const float xc = x > lo ? x : lo;
    float y = ops_exp_clamped(xc);
    y = x < lo ? 0.0f : y;
    return x != x ? x : y;
}

/* log Σ_v exp(l[v]) over one row of V >= 1 values, max-subtracted: the
 * search's normaliser over a row of logits. Shared by logsumexp_rows and
 * the int8 product that computes it while the row it just wrote is in
 * cache (gemm_lowp.c), so both give the same bits. */
static inline float ops_log_sum_exp_row(const float *l, int V) {
    float mx = l[0];
#pragma omp simd reduction(max : mx)
    for (int v = 1; v < V; v++) mx = l[v] > mx ? l[v] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; v++) sum += ops_exp_nonpos(l[v] - mx);
    return mx + logf(sum);
}

/* Dot product of two fp32 vectors with an fp32 accumulator, as sgemm does:
 * these are head-size (<= ~100) inner products, where fp32 rounding is far
 * below the noise of training; `omp simd` lets the reduction vectorise
 * without -ffast-math. */
static inline float ops_dot(const float *a, const float *b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* out[i] = a · b_i for four vectors b_0..b_3, each with an fp32
 * accumulator. Why: one query against many keys (the decoder's attention)
 * made one ops_dot per key, a chain of dependent FMAs and a horizontal
 * reduction each; four independent chains share every load of a and keep
 * the FMA units busy. A caller that mixes it with ops_dot for a key tail
 * does so the same way wherever it must give the same bits. Always inlined:
 * as a call it kept its four sums on the stack. */
static inline __attribute__((always_inline)) void ops_dot4(float out[4], const float *a, const float *b0,
                                                           const float *b1, const float *b2, const float *b3, int n) {
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int i = 0; i < n; i++) {
        const float x = a[i];
        s0 += x * b0[i];
        s1 += x * b1[i];
        s2 += x * b2[i];
        s3 += x * b3[i];
    }
    out[0] = s0;
    out[1] = s1;
    out[2] = s2;
    out[3] = s3;
}

/* out[j] = exp(in[j] - mx) / Σ exp(in[k] - mx) - shift for j < n, with
 * mx >= every in[j] (so every argument is <= 0); returns the sum (in double)
 * for callers that also need the log-sum-exp. out may alias in. The shared
 * core of the attention softmax (shift 0) and the fused cross-entropy
 * (shift ε/V: the smoothed target's off-target mass, subtracted in the same
 * pass); inline so both loops vectorise. */
static inline double ops_softmax_from_max_minus(float *out, const float *in, int n, float mx, float shift) {
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++) {
        const float e = ops_exp_nonpos(in[j] - mx);
        out[j] = e;
        sum += e;
    }
    const float inv = (float)(1.0 / sum);
#pragma omp simd
    for (int j = 0; j < n; j++) out[j] = out[j] * inv - shift;
    return sum;
}

/* The softmax itself (p − 0 is p exactly: p is never −0). */
static inline double ops_softmax_from_max(float *out, const float *in, int n, float mx) {
    return ops_softmax_from_max_minus(out, in, n, mx, 0.0f);
}

/* ---- attention masks (ops.h: key j of sentence b is visible to query t
 * iff j < klen[b] and (!causal || j <= t)); the visible keys always form a
 * PREFIX of the row ---- */

/* Keys visible to any query of a sentence with klen keys: the prefix
 * 0..klen-1 of the S key rows. Every GEMM of a (b, h) task runs over this
 * prefix only: columns/rows beyond it would only produce logits that are
 * masked to -INFINITY, zero weights and zero gradients (adding 0·x to a
 * finite sum leaves it unchanged, so the results are bit-identical). This
 * matters for padded batches and most for the decoder's self-attention,
 * whose cache has cap rows of which only t+1 are filled. */
static inline int key_prefix(int32_t klen, int S) {
    return klen <= 0 ? 0 : (klen < S ? (int)klen : S);
}

/* Keys visible to query t (the length of the visible prefix). */
static inline int visible_keys(int32_t klen, int causal, int t, int S) {
    int n = klen < S ? (int)klen : S;
    if (causal && t + 1 < n) n = t + 1;
    return n > 0 ? n : 0;
}

#endif
