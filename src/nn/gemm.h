/*
 * gemm.h — the one matrix-product entry point of projmt. Every sgemm of the
 * model, the decoder and the benchmarks goes through pmt_sgemm; nn/gemm.c is
 * the only file that calls a BLAS library.
 *
 * Backends (chosen at build time with -DPROJMT_GEMM=onednn|openblas; the
 * other one, when built in, stays callable for comparisons):
 *   - oneDNN (dnnl_sgemm): detects the CPU itself and runs its AVX-512
 *     kernels; the default when libdnnl is found.
 *   - OpenBLAS (cblas_sgemm), the OpenMP build: its kernel choice follows
 *     the environment (OPENBLAS_CORETYPE), which projmt never changes.
 * Both run on the OpenMP runtime (libgomp) of projmt's own loops, so one
 * thread pool serves everything: each call runs on omp_get_max_threads()
 * threads (pmt_set_threads in core/runtime sets it), and a pthread build of
 * OpenBLAS is told the same count before its first call.
 *
 * Precision (training's --precision): with pmt_gemm_set_precision(BF16),
 * pmt_sgemm / pmt_sgemm_on round both operands to bfloat16 (round to
 * nearest even) into a workspace this layer owns, and multiply them with a
 * oneDNN matmul primitive (avx512_bf16 dot products, fp32 accumulation, fp32
 * C) — whichever fp32 backend is built, since oneDNN is always linked. The
 * workspace is reserved before the first step (pmt_gemm_bf16_reserve, which
 * refuses a CPU without native bf16: there is no emulation); products never
 * allocate. pmt_sgemm_in_task stays fp32 (the small attention products).
 *
 * State: the precision, the workspace and the cache of matmul primitives
 * are process-wide, like the attention scratch; the workspace only grows
 * and is released at exit. bf16 products from several threads at once are
 * serialised on one lock (each one uses every thread anyway); the
 * precision and the reservation are meant for serial code (the model
 * switches the precision around a training step's forward and backward).
 *
 * Layout: row-major; op(A) [M, K], op(B) [K, N], C [M, N] with leading
 * dimensions lda/ldb/ldc as in cblas. C = alpha·op(A)·op(B) + beta·C; with
 * beta = 0 C is only written (NaN in C does not propagate).
 */
#ifndef PROJMT_GEMM_H
#define PROJMT_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

typedef enum pmt_gemm_backend {
    PMT_GEMM_OPENBLAS = 0,
    PMT_GEMM_ONEDNN = 1,
    PMT_GEMM_BACKENDS
} pmt_gemm_backend;

/* C [M, N] = alpha · op(A) · op(B) + beta · C with the active backend;
 * trans_a/trans_b nonzero means the operand is stored transposed. */
void pmt_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);
/* The same with an explicit backend (benchmarks; must be available). */
void pmt_sgemm_on(pmt_gemm_backend backend, int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* pmt_sgemm whose operands may come with their
 * bf16 copies, kept by the caller so that no product converts the same
 * matrix twice: A16 = bf16(alpha · A) and B16 = bf16(B), dense (leading
 * dimension = the stored width, rows as stored), each NULL when there is
 * none. In the bf16 precision a given copy replaces the conversion of its
 * operand (which may then be NULL); the result is bit-identical to
 * converting here. In fp32 the copies are ignored and A, B are required.
 * same_a: A is the previous product's A, unchanged since (the two backward
 * products of a linear layer share dout), so in bf16 its converted copy is
 * used again when the stored matrix (pointer, shape, leading dimension) and
 * alpha match; the caller must know that previous product ran. */
void pmt_sgemm_lp(int same_a, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  const uint16_t *A16, int lda, const float *B, const uint16_t *B16, int ldb, float beta, float *C,
                  int ldc);

/* For the small per-task products inside an OpenMP parallel region (the
 * pooling-attention kernels run one per sentence and head): the active
 * backend on the calling thread only (both libraries run single-threaded
 * inside a parallel region), without the per-step phase profile and without
 * touching thread counts. M, N or K <= 0 does nothing (C untouched). */
void pmt_sgemm_in_task(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc);
/* The backend pmt_sgemm uses (fixed at build time). */
pmt_gemm_backend pmt_gemm_active(void);
/* 1 when the backend is linked into this build. */
int pmt_gemm_available(pmt_gemm_backend backend);
/* "onednn" or "openblas". */
const char *pmt_gemm_name(pmt_gemm_backend backend);

/* Whether bf16 products can run on a CPU that has (1) or lacks (0) native
 * bf16 dot products: 0, or -1 with a message naming the missing feature.
 * Takes the feature as a parameter so the refusal is testable anywhere. */
int pmt_gemm_bf16_check(int cpu_has_bf16, char *err, size_t errlen);
/* Checks this CPU (pmt_gemm_bf16_check with oneDNN's ISA query) and grows
 * the bf16 workspace to hold an A operand of max_a and a B operand of max_b
 * elements. 0, or -1 with err (no avx512_bf16, out of memory). */
int pmt_gemm_bf16_reserve(size_t max_a, size_t max_b, char *err, size_t errlen);
/* Sets the precision of pmt_sgemm/pmt_sgemm_on (pmt_precision) and returns
 * the previous one. BF16 needs a reservation (assert); products whose beta
 * is not 0 or 1 stay fp32. */
int pmt_gemm_set_precision(int precision);
int pmt_gemm_precision(void);

/* dst [rows, cols] (dense) = bf16(scale · src) for src [rows, cols] with
 * leading dimension ld, rounded to nearest even with the CPU's conversion
 * (vcvtneps2bf16: NaN stays NaN; fp32 subnormals become ±0). Needs
 * avx512_bf16 (assert). The vectorised form of pmt_bf16_from_float. */
void pmt_bf16_convert(uint16_t *dst, const float *src, int rows, int cols, int ld, float scale);
/* One row of pmt_bf16_convert on the calling thread (for kernels that round
 * a row they have just computed, inside their own parallel loop). */
void pmt_bf16_convert_row(uint16_t *dst, const float *src, int cols, float scale);
#endif
