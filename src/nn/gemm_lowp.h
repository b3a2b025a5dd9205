/*
 * gemm_lowp.h — low-precision matrix products for inference: the int8
 * linear layer of decoding with int8 weights (`projmt export --weights int8`,
 * or --weights int8 at decode time).
 *
 * Why int8 here: a decoding step multiplies a handful of rows by every
 * weight matrix (the V x C logits matrix above all), so it is bound by
 * reading the weights; int8 weights are a quarter of the bytes, and
 * oneDNN's integer GEMM runs on AVX-512 VNNI.
 *
 * Scheme (as CTranslate2's int8): weights per output row, symmetric
 * (model/model_file.h: w[o][i] ≈ w_scale[o]·wq[o][i]); activations
 * quantised per input row on the fly, symmetric: x[n][i] ≈ x_scale[n]·xq[n][i]
 * with x_scale[n] = max_i |x[n][i]| / 127; int32 accumulation, then
 * out[n][o] = x_scale[n]·w_scale[o]·acc[n][o] + b[o].
 *
 * bf16 (`projmt export --weights bf16`): weights and activations rounded to
 * bfloat16, fp32 accumulation, through oneDNN's matmul primitive — only on
 * a CPU with native bf16 dot products (avx512_bf16); elsewhere the caller
 * multiplies the fp32 widening of the bf16 weights (the same weights, exact).
 *
 * These belong next to pmt_sgemm in nn/gemm.c once the matrix-product layer
 * of the speed work is on main; they live apart until then.
 *
 * Ownership: kernels never allocate; the caller owns every buffer.
 */
#ifndef PROJMT_GEMM_LOWP_H
#define PROJMT_GEMM_LOWP_H

#include <stddef.h>
#include <stdint.h>

/* Per-row int8 scratch for linear_forward_int8 of up to N rows of up to IN
 * inputs and OUT outputs: xq [N*IN], x_scale [N], acc [N*OUT]. */
typedef struct pmt_int8_scratch {
    int8_t *xq;
    float *x_scale;
    int32_t *acc;
} pmt_int8_scratch;

/* out [N, OUT] = in [N, IN] · (w_scale ⊙ wq [OUT, IN])ᵀ + b [OUT] (b may be NULL),
 * in one call that packs wq each time: the reference of the packed form below. */
void linear_forward_int8(float *out, const float *in, const int8_t *wq, const float *w_scale, const float *b,
                         int N, int IN, int OUT, const pmt_int8_scratch *scratch);

/* The same product with the weights packed once into oneDNN's layout for
 * its int8 matmul (brgemm, AVX-512 VNNI): dnnl_gemm_s8s8s32 packs them on
 * every call, which is most of the work at a decoding step's few rows.
 * oneDNN 2.6 only picks brgemm for a fixed row count, so the matmul keeps
 * one primitive per multiple of 8 rows, built on first use (~0.15 ms each);
 * a call multiplies its rows padded up to that multiple. Exact integer
 * accumulation either way: linear_forward_int8_packed gives the bits of
 * linear_forward_int8. Opaque; owns the packed copy. One matmul must not
 * run on two threads at once (the decoder's lanes each have their own). */
typedef struct pmt_int8_matmul pmt_int8_matmul;
/* Packs wq [OUT, IN] for products of up to max_rows rows. NULL with err. */
pmt_int8_matmul *pmt_int8_matmul_init(const int8_t *wq, int IN, int OUT, int max_rows, char *err, size_t errlen);
void pmt_int8_matmul_free(pmt_int8_matmul *mm);
/* Rows the scratch of linear_forward_int8_packed needs for N <= max_rows:
 * N rounded up to a multiple of 8 (xq and acc of that many rows). */
int pmt_int8_matmul_rows(int N);
/* As linear_forward_int8 with the packed weights of mm (w_scale, b as
 * there); scratch rows: pmt_int8_matmul_rows(max_rows). */
void linear_forward_int8_packed(float *out, const float *in, pmt_int8_matmul *mm, const float *w_scale,
                                const float *b, int N, const pmt_int8_scratch *scratch);

/* bf16: the upper 16 bits of x rounded to nearest even (NaN stays NaN). */
uint16_t pmt_bf16_from_float(float x);
float pmt_bf16_to_float(uint16_t h);

/* A bf16 weight matrix [OUT, IN] and the oneDNN matmul that multiplies by
 * it (any number of rows, bias optional). Opaque; owns its copy of w. */
typedef struct pmt_bf16_matmul pmt_bf16_matmul;

/* Rounds w [OUT, IN] to bf16 and builds the matmul. NULL with err when
 * oneDNN refuses (or out of memory). */
pmt_bf16_matmul *pmt_bf16_matmul_init(const float *w, int IN, int OUT, int with_bias, char *err, size_t errlen);
void pmt_bf16_matmul_free(pmt_bf16_matmul *mm);

/* Bytes of scratchpad linear_forward_bf16 needs for mm (may be 0). */
size_t pmt_bf16_matmul_scratchpad_bytes(const pmt_bf16_matmul *mm);

/* out [N, OUT] = bf16(in [N, IN]) · W_bf16ᵀ + b (b given iff with_bias);
 * xs is caller scratch of N*IN bf16 values, pad of
 * pmt_bf16_matmul_scratchpad_bytes(mm) bytes (64-byte aligned). Matmuls
 * may run concurrently on different threads with different xs and pad. */
void linear_forward_bf16(float *out, const float *in, const pmt_bf16_matmul *mm, const float *b, int N,
                         uint16_t *xs, void *pad);

/* 1 when oneDNN reports native bf16 dot products (avx512_bf16 or AMX). */
int pmt_cpu_has_bf16(void);

/* 1 when oneDNN reports a CPU with AVX-512 VNNI (or AMX) integer dot products. */
int pmt_cpu_has_int8_dot(void);

#endif
