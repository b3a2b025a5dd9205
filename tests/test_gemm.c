/*
 * test_gemm.c — the matrix-product layer (nn/gemm.h): every backend built
 * into this binary against a double-precision reference, for all four
 * transpose combinations, leading dimensions wider than the matrices,
 * alpha/beta (beta = 1 accumulates, as the backward kernels need; beta = 0
 * overwrites, even NaN), the empty shapes, repeatability of a call, the
 * active backend being the one CMake was asked for, and the fp32 products
 * of pmt_sgemm / pmt_sgemm_lp running on the library pmt_gemm_fp32_backend
 * names (weight gradients on OpenBLAS without AVX-512, in a oneDNN build).
 */
#include "nn/gemm.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Deterministic values in [-1, 1). */
static void fill(float *x, size_t n, unsigned seed) {
    unsigned s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) / 8388608.0 - 1.0);
    }
}

/* Max |pmt_sgemm_on - reference| relative to the largest reference entry. */
static double check_shape(pmt_gemm_backend be, int ta, int tb, int M, int N, int K, float alpha, float beta) {
    const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
    const int arows = ta ? K : M, brows = tb ? N : K;
    float *A = malloc(sizeof(float) * (size_t)arows * lda), *B = malloc(sizeof(float) * (size_t)brows * ldb);
    float *C = malloc(sizeof(float) * (size_t)M * ldc);
    double *ref = malloc(sizeof(double) * (size_t)M * ldc);
    fill(A, (size_t)arows * lda, 1 + M);
    fill(B, (size_t)brows * ldb, 2 + N);
    fill(C, (size_t)M * ldc, 3 + K);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            double s = 0.0;
            for (int k = 0; k < K && j < N; k++) {
                const double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                const double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
            }
            ref[(size_t)i * ldc + j] = j < N ? alpha * s + beta * (double)C[(size_t)i * ldc + j] : C[(size_t)i * ldc + j];
        }
    pmt_sgemm_on(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    double err = 0.0, scale = 1e-30;
    for (size_t i = 0; i < (size_t)M * ldc; i++) {
        err = fmax(err, fabs(C[i] - ref[i]));
        scale = fmax(scale, fabs(ref[i]));
    }
    /* Padding columns of C (j >= N) must be untouched, exactly. */
    for (int i = 0; i < M; i++)
        for (int j = N; j < ldc; j++) CHECK(C[(size_t)i * ldc + j] == (float)ref[(size_t)i * ldc + j]);
    free(A); free(B); free(C); free(ref);
    return err / scale;
}

static void test_backend(pmt_gemm_backend be) {
    static const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 256, 256}, {200, 96, 1}, {5, 300, 129}};
    double worst = 0.0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                const double e0 = check_shape(be, ta, tb, M, N, K, 1.0f, 0.0f);
                const double e1 = check_shape(be, ta, tb, M, N, K, -0.5f, 1.0f);
                const double e2 = check_shape(be, ta, tb, M, N, K, 1.0f, 1.0f);
                CHECK_MSG(e0 < 1e-5 && e1 < 1e-5 && e2 < 1e-5, "%s ta=%d tb=%d %dx%dx%d: rel. error %.3g / %.3g / %.3g",
                          pmt_gemm_name(be), ta, tb, M, N, K, e0, e1, e2);
                worst = fmax(worst, fmax(e0, fmax(e1, e2)));
            }
    printf("%s: worst relative error %.3g over %zu shapes x 4 transposes x 3 (alpha, beta)\n", pmt_gemm_name(be),
           worst, sizeof shapes / sizeof shapes[0] * 4);

    /* beta = 0 overwrites: NaN already in C must not survive. */
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4] = {NAN, NAN, NAN, NAN};
    pmt_sgemm_on(be, 0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    CHECK(c[0] == 1 && c[1] == 2 && c[2] == 3 && c[3] == 4);
    /* K = 0: C = beta · C. M = 0 or N = 0: nothing is touched. */
    float d[4] = {1, 2, 3, 4};
    pmt_sgemm_on(be, 0, 0, 2, 2, 0, 1.0f, a, 1, b, 2, 2.0f, d, 2);
    CHECK(d[0] == 2 && d[3] == 8);
    pmt_sgemm_on(be, 0, 0, 0, 2, 2, 1.0f, a, 2, b, 2, 0.0f, NULL, 2);
    pmt_sgemm_on(be, 0, 0, 2, 0, 2, 1.0f, a, 2, b, 1, 0.0f, NULL, 1);

    /* The same call twice gives the same bits (resume is bit-exact per backend). */
    enum { M = 300, N = 257, K = 129 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
    float *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
    fill(A, (size_t)M * K, 7);
    fill(B, (size_t)N * K, 8);
    pmt_sgemm_on(be, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C1, N);
    pmt_sgemm_on(be, 0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C2, N);
    CHECK(memcmp(C1, C2, sizeof(float) * M * N) == 0);
    free(A); free(B); free(C1); free(C2);
}

/* pmt_sgemm and pmt_sgemm_lp (fp32) give, bit for bit, the product of the
 * library pmt_gemm_fp32_backend names for their transpose of A; the shape
 * (K = 2,046, a batch's tokens) is one where the two libraries' sums
 * differ, so a product on the other library fails the check. */
static void test_routing(void) {
    const int active_onednn = pmt_gemm_active() == PMT_GEMM_ONEDNN;
    const int avx512 = !strncmp(pmt_cpu_isa_name(), "avx512", 6);
    CHECK(pmt_gemm_fp32_backend(0) == pmt_gemm_active());
    CHECK_MSG(pmt_gemm_fp32_backend(1) == (active_onednn && !avx512 ? PMT_GEMM_OPENBLAS : pmt_gemm_active()),
              "transposed-A products on %s (CPU %s, active %s)", pmt_gemm_name(pmt_gemm_fp32_backend(1)),
              pmt_cpu_isa_name(), pmt_gemm_name(pmt_gemm_active()));
    enum { M = 40, N = 24, K = 2046 };
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
    float *C[PMT_GEMM_BACKENDS], *routed = malloc(sizeof(float) * M * N), *routed_lp = malloc(sizeof(float) * M * N);
    fill(A, (size_t)M * K, 11);
    fill(B, (size_t)N * K, 12);
    for (int ta = 0; ta < 2; ta++) {
        const int lda = ta ? M : K;   /* A as stored: [K, M] when transposed */
        for (int be = 0; be < PMT_GEMM_BACKENDS; be++) {
            C[be] = malloc(sizeof(float) * M * N);
            pmt_sgemm_on((pmt_gemm_backend)be, ta, 1, M, N, K, 1.0f, A, lda, B, K, 0.0f, C[be], N);
        }
        CHECK_MSG(memcmp(C[PMT_GEMM_ONEDNN], C[PMT_GEMM_OPENBLAS], sizeof(float) * M * N) != 0,
                  "ta=%d: the two libraries gave the same bits, so this shape cannot tell them apart", ta);
        pmt_sgemm(ta, 1, M, N, K, 1.0f, A, lda, B, K, 0.0f, routed, N);
        pmt_sgemm_lp(0, ta, 1, M, N, K, 1.0f, A, NULL, lda, B, NULL, K, 0.0f, routed_lp, N);
        const float *want = C[pmt_gemm_fp32_backend(ta)];
        CHECK_MSG(memcmp(routed, want, sizeof(float) * M * N) == 0, "pmt_sgemm ta=%d did not run on %s", ta,
                  pmt_gemm_name(pmt_gemm_fp32_backend(ta)));
        CHECK_MSG(memcmp(routed_lp, want, sizeof(float) * M * N) == 0, "pmt_sgemm_lp ta=%d did not run on %s", ta,
                  pmt_gemm_name(pmt_gemm_fp32_backend(ta)));
        for (int be = 0; be < PMT_GEMM_BACKENDS; be++) free(C[be]);
    }
    printf("fp32 products on this CPU (%s): A as stored on %s, A transposed on %s\n", pmt_cpu_isa_name(),
           pmt_gemm_name(pmt_gemm_fp32_backend(0)), pmt_gemm_name(pmt_gemm_fp32_backend(1)));
    free(A); free(B); free(routed); free(routed_lp);
}

int main(void) {
    /* The backend pmt_sgemm uses is the one CMake was configured with
     * (-DPROJMT_GEMM, compiled into every test), whatever runs the binary. */
    CHECK_MSG(!strcmp(PROJMT_CONFIGURED_GEMM, pmt_gemm_name(pmt_gemm_active())), "active %s, configured %s",
              pmt_gemm_name(pmt_gemm_active()), PROJMT_CONFIGURED_GEMM);
    CHECK(strcmp(pmt_gemm_name(PMT_GEMM_ONEDNN), pmt_gemm_name(PMT_GEMM_OPENBLAS)) != 0);
    printf("active backend: %s\n", pmt_gemm_name(pmt_gemm_active()));
    for (int be = 0; be < PMT_GEMM_BACKENDS; be++)
        if (pmt_gemm_available((pmt_gemm_backend)be)) test_backend((pmt_gemm_backend)be);
        else printf("%s: not built in\n", pmt_gemm_name((pmt_gemm_backend)be));
    float e[4] = {0};
    pmt_sgemm(0, 0, 2, 2, 2, 1.0f, (const float[]){1, 0, 0, 1}, 2, (const float[]){5, 6, 7, 8}, 2, 0.0f, e, 2);
    CHECK(e[0] == 5 && e[1] == 6 && e[2] == 7 && e[3] == 8);
    test_routing();
    return test_finish();
}
