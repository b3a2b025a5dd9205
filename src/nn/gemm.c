/*
 * gemm.c — see gemm.h. The only file of projmt that calls a BLAS library.
 *
 * Why two backends: on this project's reference machine (AVX-512 EPYC)
 * oneDNN's sgemm runs about twice as fast as OpenBLAS with the kernels the
 * environment selects for it; OpenBLAS stays the portable, first-class
 * choice named by the design. Both are linked when found so `projmt bench`
 * can measure both peaks in one run; PROJMT_GEMM_DEFAULT (from CMake) picks
 * the one pmt_sgemm uses.
 *
 * Why dnnl_sgemm and not matmul primitives: a primitive is fixed to one
 * (M, N, K, transposes, beta), and M changes with every batch, so it would
 * need a cache of primitives keyed by shape. Measured on the model's linear
 * shapes (A·Bᵀ, 4096×{1024,256,8000}×{256,1024}, 2 threads, best of 10, on
 * a heavily shared machine) the reused brgemm primitive was within the noise
 * of dnnl_sgemm (35–60 vs 35–54 GFLOP/s), not a clear win for that cache.
 */
#include "nn/gemm.h"

#include <assert.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn/profile.h"

#include <cblas.h>
#ifdef PROJMT_HAVE_ONEDNN
#include <dnnl.h>
#endif

#ifndef PROJMT_GEMM_DEFAULT
#define PROJMT_GEMM_DEFAULT PMT_GEMM_OPENBLAS
#endif

pmt_gemm_backend pmt_gemm_active(void) { return PROJMT_GEMM_DEFAULT; }

int pmt_gemm_available(pmt_gemm_backend backend) {
    if (backend == PMT_GEMM_OPENBLAS) return 1;
#ifdef PROJMT_HAVE_ONEDNN
    if (backend == PMT_GEMM_ONEDNN) return 1;
#endif
    return 0;
}

const char *pmt_gemm_name(pmt_gemm_backend backend) {
    return backend == PMT_GEMM_ONEDNN ? "onednn" : "openblas";
}

/* The OpenMP build of OpenBLAS follows omp_get_max_threads() by itself; a
 * pthread build keeps its own count, so it is told ours when they differ
 * (an int compare per call otherwise). */
static void openblas_follow_omp(void) {
    const int n = omp_get_max_threads();
    if (openblas_get_num_threads() != n) openblas_set_num_threads(n);
}

static void sgemm_openblas(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                           const float *B, int ldb, float beta, float *C, int ldc) {
    openblas_follow_omp();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
                lda, B, ldb, beta, C, ldc);
}

#ifdef PROJMT_HAVE_ONEDNN
/* dnnl_sgemm is row-major like cblas. It only fails on invalid arguments
 * (a programmer error here), so a failure aborts with the shape. */
static void sgemm_onednn(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc) {
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st != dnnl_success) {
        fprintf(stderr, "projmt: internal error: dnnl_sgemm(%c%c, M=%d N=%d K=%d, ld %d/%d/%d) returned status %d\n",
                ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, lda, ldb, ldc, (int)st);
        abort();
    }
}
#endif

void pmt_sgemm_on(pmt_gemm_backend backend, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    assert(pmt_gemm_available(backend));
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {   /* C = beta · C: the libraries disagree on this edge, so it is done here */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    const double t0 = pmt_profile_begin();
#ifdef PROJMT_HAVE_ONEDNN
    if (backend == PMT_GEMM_ONEDNN)
        sgemm_onednn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
#endif
        sgemm_openblas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    pmt_profile_end(PMT_PHASE_GEMM, t0);
}

void pmt_sgemm_in_task(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                       int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0 || K <= 0) return;
#ifdef PROJMT_HAVE_ONEDNN
    if (PROJMT_GEMM_DEFAULT == PMT_GEMM_ONEDNN) {
        sgemm_onednn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, C, ldc);
}

void pmt_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc) {
    pmt_sgemm_on(PROJMT_GEMM_DEFAULT, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
