/*
 * test_gemm_bf16.c — the bf16 products of training (nn/gemm.h, --precision
 * bf16):
 *   - the refusal: without native bf16 dot products the check fails with a
 *     message naming the feature and the way out (runs on every CPU);
 *   - the vectorised fp32 -> bf16 conversion equals the scalar
 *     round-to-nearest-even reference bit for bit (ties, carries into the
 *     exponent, overflow to infinity, NaN, signed zeros; subnormals flush to
 *     ±0, the instruction's documented behaviour), with scale and row tails;
 *   - products in bf16 equal, within fp32 accumulation error, the exact
 *     product of the bf16-rounded operands (so alpha is applied before the
 *     rounding of A and nothing else is rounded), for all four transposes,
 *     wide leading dimensions, beta 0 and 1, alpha != 1; and they really are
 *     bf16: their distance to the fp32 product is of bf16's size;
 *   - more shapes than the primitive cache holds (evictions, rebuilds);
 *   - pmt_sgemm_same_a reuses A's conversion only for the same A and alpha;
 *   - switching back to fp32 gives fp32 products again.
 * Everything but the refusal needs avx512_bf16: elsewhere it SKIPs.
 */
#include "nn/gemm.h"
#include "nn/gemm_lowp.h"
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void fill(float *x, size_t n, unsigned seed) {
    unsigned s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) / 8388608.0 - 1.0);
    }
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void test_refusal(void) {
    char err[256] = "";
    CHECK(pmt_gemm_bf16_check(0, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "avx512_bf16") && strstr(err, "--precision fp32"), "message: %s", err);
    err[0] = '\0';
    CHECK(pmt_gemm_bf16_check(1, err, sizeof err) == 0 && err[0] == '\0');
}

/* The expected bf16 bits of x: the scalar reference, with subnormals as ±0. */
static uint16_t expected_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    return pmt_bf16_from_float(x);
}

static void test_conversion(void) {
    enum { ROWS = 7, COLS = 37, LD = 41 };   /* 37 = two vectors and a 5-wide tail */
    float src[ROWS * LD];
    uint16_t got[ROWS * COLS];
    const uint32_t specials[] = {
        0x3f808000u, 0x3f818000u,   /* exact ties: to even (down, up) */
        0x3f808001u, 0x3f807fffu,   /* just above / below a tie */
        0x3fffffffu,                /* carries into the exponent */
        0x7f7fffffu, 0xff7fffffu,   /* FLT_MAX rounds to infinity */
        0x7f800000u, 0xff800000u,   /* infinities */
        0x7fc00001u, 0x7f800001u,   /* quiet and signalling NaN */
        0x00000000u, 0x80000000u,   /* signed zeros */
        0x00000001u, 0x807fffffu,   /* subnormals */
        0x00800000u, 0x80800000u,   /* smallest normals */
    };
    const int n_special = (int)(sizeof specials / sizeof specials[0]);
    fill(src, sizeof src / sizeof src[0], 11);
    for (int i = 0; i < ROWS * LD; i++) src[i] *= (i % 3 == 0) ? 1e30f : (i % 3 == 1) ? 1e-30f : 1.0f;
    for (int i = 0; i < n_special; i++) src[(i % ROWS) * LD + (i * 5) % COLS] = from_bits(specials[i]);
    int mismatches = 0, nan_ok = 1;
    for (int pass = 0; pass < 2; pass++) {
        const float scale = pass ? 0.375f : 1.0f;
        pmt_bf16_convert(got, src, ROWS, COLS, LD, scale);
        for (int r = 0; r < ROWS; r++)
            for (int c = 0; c < COLS; c++) {
                const float x = src[r * LD + c] * scale;
                const uint16_t g = got[r * COLS + c];
                if (isnan(x)) nan_ok &= isnan(pmt_bf16_to_float(g));
                else mismatches += g != expected_bf16(x);
            }
    }
    CHECK_MSG(mismatches == 0, "%d conversions differ from the scalar round-to-nearest-even", mismatches);
    CHECK_MSG(nan_ok, "a NaN did not stay NaN");
    /* A row tail of 0 and a single value. */
    float one = 1.00390625f;   /* 1 + 2^-8: a tie, rounds to 1 */
    uint16_t h = 0;
    pmt_bf16_convert(&h, &one, 1, 1, 1, 1.0f);
    CHECK(h == 0x3f80);
}

/* Product in bf16 of one shape: max |C - ref_bf16| relative to Σ|a||b|
 * (must be fp32 accumulation error) and max |C - ref_exact| likewise
 * (must be bf16-sized, not fp32-sized). */
static void check_bf16_shape(int ta, int tb, int M, int N, int K, float alpha, float beta, double *acc_err,
                             double *round_err) {
    const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
    const int arows = ta ? K : M, brows = tb ? N : K;
    float *A = malloc(sizeof(float) * (size_t)arows * lda), *B = malloc(sizeof(float) * (size_t)brows * ldb);
    float *C = malloc(sizeof(float) * (size_t)M * ldc), *C0 = malloc(sizeof(float) * (size_t)M * ldc);
    fill(A, (size_t)arows * lda, 5 + M);
    fill(B, (size_t)brows * ldb, 6 + N);
    fill(C, (size_t)M * ldc, 7 + K);
    memcpy(C0, C, sizeof(float) * (size_t)M * ldc);
    pmt_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    double worst_acc = 0, worst_round = 0;
    int untouched = 1;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double rounded = 0, exact = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                const float a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                const float b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                rounded += (double)pmt_bf16_to_float(pmt_bf16_from_float(alpha * a)) *
                           pmt_bf16_to_float(pmt_bf16_from_float(b));
                exact += (double)alpha * a * b;
                mag += fabs((double)alpha * a * b);
            }
            const double c0 = beta * (double)C0[(size_t)i * ldc + j], c = C[(size_t)i * ldc + j];
            mag += fabs(c0) + 1e-30;
            worst_acc = fmax(worst_acc, fabs(c - (rounded + c0)) / mag);
            worst_round = fmax(worst_round, fabs(c - (exact + c0)) / mag);
        }
        for (int j = N; j < ldc; j++) untouched &= C[(size_t)i * ldc + j] == C0[(size_t)i * ldc + j];
    }
    CHECK_MSG(untouched, "bf16 %c%c %dx%dx%d wrote past N", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K);
    *acc_err = fmax(*acc_err, worst_acc);
    *round_err = fmax(*round_err, worst_round);
    free(A); free(B); free(C); free(C0);
}

static void test_products(void) {
    static const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 256, 256}, {130, 96, 300}};
    char err[256];
    CHECK_MSG(pmt_gemm_bf16_reserve(300 * 300, 300 * 300, err, sizeof err) == 0, "%s", err);
    CHECK(pmt_gemm_set_precision(PMT_PRECISION_BF16) == PMT_PRECISION_FP32);
    CHECK(pmt_gemm_precision() == PMT_PRECISION_BF16);
    double acc = 0, round = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                check_bf16_shape(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 0.0f, &acc, &round);
                check_bf16_shape(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 1.0f, &acc, &round);
                check_bf16_shape(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f / 3.0f, 0.0f, &acc, &round);
            }
    printf("bf16 products: error vs exact product of the bf16 operands %.3g, vs the fp32 operands %.3g "
           "(relative to sum |a||b|)\n", acc, round);
    /* fp32 accumulation of at most 300 terms: well under 300 · 2^-24 ≈ 1.8e-5. */
    CHECK_MSG(acc < 2e-5, "bf16 products differ from the bf16 operands' product by %.3g", acc);
    /* Two roundings of 2^-9 each bound the error; bf16 must show it (> fp32's). */
    CHECK_MSG(round < 2.0 * 0x1p-9 + 2e-5 && round > 1e-4, "bf16 rounding error %.3g outside (1e-4, 2^-8]", round);

    /* More shapes than the 64 cached primitives, twice: evicted ones are
     * rebuilt and still compute the right product. */
    double acc_many = 0, round_many = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int rows = 1; rows <= 80; rows++)
            check_bf16_shape(rows & 1, 0, rows, 24, 40, 1.0f, (float)pass, &acc_many, &round_many);
    CHECK_MSG(acc_many < 2e-5, "many shapes: bf16 products differ from the bf16 operands' product by %.3g", acc_many);

    /* pmt_sgemm_same_a: the backward pair of a linear layer, dout the A of
     * both; the second product must equal a fresh pmt_sgemm bitwise, also
     * when its alpha differs (then A is converted again). */
    enum { NR = 50, OUT = 40, IN = 30 };
    float *dout = malloc(sizeof(float) * NR * OUT), *w = malloc(sizeof(float) * OUT * IN);
    float *inp = malloc(sizeof(float) * NR * IN), *dinp = malloc(sizeof(float) * NR * IN);
    float *dw1 = calloc(OUT * IN, sizeof(float)), *dw2 = calloc(OUT * IN, sizeof(float));
    fill(dout, NR * OUT, 21);
    fill(w, OUT * IN, 22);
    fill(inp, NR * IN, 23);
    for (int k = 0; k < 2; k++) {
        const float alpha2 = k ? 0.5f : 0.25f;
        pmt_sgemm(0, 0, NR, IN, OUT, 0.25f, dout, OUT, w, IN, 0.0f, dinp, IN);
        pmt_sgemm_same_a(1, 0, OUT, IN, NR, alpha2, dout, OUT, inp, IN, 0.0f, dw1, IN);
        pmt_sgemm(1, 0, OUT, IN, NR, alpha2, dout, OUT, inp, IN, 0.0f, dw2, IN);
        CHECK_MSG(memcmp(dw1, dw2, sizeof(float) * OUT * IN) == 0, "pmt_sgemm_same_a (alpha %g) differs", alpha2);
    }
    free(dout); free(w); free(inp); free(dinp); free(dw1); free(dw2);

    /* Back to fp32: products are fp32 again (error at fp32 level). */
    CHECK(pmt_gemm_set_precision(PMT_PRECISION_FP32) == PMT_PRECISION_BF16);
    double acc32 = 0, round32 = 0;
    check_bf16_shape(0, 1, 64, 256, 256, 1.0f, 0.0f, &acc32, &round32);
    CHECK_MSG(round32 < 1e-5, "fp32 after bf16: error %.3g", round32);
}

int main(void) {
    test_refusal();
    if (!pmt_cpu_has_bf16()) {
        const int rc = test_finish();
        if (rc != 0) return rc;
        test_skip("this CPU has no avx512_bf16 (only the refusal was tested)");
    }
    test_conversion();
    test_products();
    return test_finish();
}
