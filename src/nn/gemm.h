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
 * Layout: row-major; op(A) [M, K], op(B) [K, N], C [M, N] with leading
 * dimensions lda/ldb/ldc as in cblas. C = alpha·op(A)·op(B) + beta·C; with
 * beta = 0 C is only written (NaN in C does not propagate).
 */
#ifndef PROJMT_GEMM_H
#define PROJMT_GEMM_H

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
#endif
