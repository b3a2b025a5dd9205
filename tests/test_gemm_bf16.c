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
 *   - pmt_sgemm_lp with same_a reuses A's conversion only for the same A and alpha;
 *   - switching back to fp32 gives fp32 products again;
 *   - linear layers with caller-kept bf16 copies (nn/ops.h linear_bf16: the
 *     input slot written by forward, weights rounded once, a pre-scaled
 *     dout16) give the plain layers' bits, forward and backward, and the
 *     fused cross-entropy's rounded gradient rows are those of a separate
 *     conversion pass;
 *   - a backward without an input gradient converts dout afresh even when
 *     the previous backward's dout lived at the same address (a stale
 *     conversion would be reused otherwise);
 *   - products through blocked weight copies (PMT_LP_B_FIXED) give the
 *     plain products' bits for both weight layouts, odd shapes, beta 0 and
 *     1, and the bias / ReLU / bf16-output epilogues; the copy really is
 *     what they multiply (weights changed without telling keep the old
 *     result) and pmt_gemm_bf16_weights_changed makes it again.
 * Everything but the refusal needs avx512_bf16: elsewhere it SKIPs.
 */
#include "nn/gemm.h"
#include "nn/gemm.h"
#include "nn/ops.h"
#include "testutil.h"

#include <math.h>
#include <omp.h>
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

    /* pmt_sgemm_lp with same_a: the backward pair of a linear layer, dout the A of
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
        pmt_sgemm_lp(PMT_LP_SAME_A, 1, 0, OUT, IN, NR, alpha2, dout, NULL, OUT, inp, NULL, IN, 0.0f, dw1, IN);
        pmt_sgemm(1, 0, OUT, IN, NR, alpha2, dout, OUT, inp, IN, 0.0f, dw2, IN);
        CHECK_MSG(memcmp(dw1, dw2, sizeof(float) * OUT * IN) == 0, "same_a (alpha %g) differs", alpha2);
    }
    free(dout); free(w); free(inp); free(dinp); free(dw1); free(dw2);

    /* Back to fp32: products are fp32 again (error at fp32 level). */
    CHECK(pmt_gemm_set_precision(PMT_PRECISION_FP32) == PMT_PRECISION_BF16);
    double acc32 = 0, round32 = 0;
    check_bf16_shape(0, 1, 64, 256, 256, 1.0f, 0.0f, &acc32, &round32);
    CHECK_MSG(round32 < 1e-5, "fp32 after bf16: error %.3g", round32);
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, sizeof(float) * n) == 0; }

/* Runs in bf16: plain linear layers versus the same with linear_bf16 copies. */
static void test_caller_copies(void) {
    enum { N = 45, IN = 36, OUT = 52 };
    char err[256];
    CHECK_MSG(pmt_gemm_bf16_reserve(N * OUT, N * OUT, err, sizeof err) == 0, "%s", err);
    pmt_gemm_set_precision(PMT_PRECISION_BF16);
    float *inp = malloc(sizeof(float) * N * IN), *w = malloc(sizeof(float) * OUT * IN), *b = malloc(sizeof(float) * OUT);
    float *dout = malloc(sizeof(float) * N * OUT);
    float *out1 = malloc(sizeof(float) * N * OUT), *out2 = malloc(sizeof(float) * N * OUT);
    float *dinp1 = calloc(N * IN, sizeof(float)), *dinp2 = calloc(N * IN, sizeof(float));
    float *dw1 = calloc(OUT * IN, sizeof(float)), *dw2 = calloc(OUT * IN, sizeof(float));
    float *db1 = calloc(OUT, sizeof(float)), *db2 = calloc(OUT, sizeof(float));
    uint16_t *inp16 = malloc(sizeof(uint16_t) * N * IN), *w16 = malloc(sizeof(uint16_t) * OUT * IN);
    uint16_t *dout16 = malloc(sizeof(uint16_t) * N * OUT), *expect16 = malloc(sizeof(uint16_t) * N * IN);
    fill(inp, N * IN, 31);
    fill(w, OUT * IN, 32);
    fill(b, OUT, 33);
    fill(dout, N * OUT, 34);
    pmt_bf16_convert(w16, w, OUT, IN, IN, 1.0f);
    const linear_bf16 lp = {inp16, w16, NULL, 0, 0};

    linear_forward(out1, inp, w, b, N, IN, OUT);
    linear_forward_lp(out2, inp, w, b, N, IN, OUT, &lp);
    CHECK_MSG(same_bits(out1, out2, N * OUT), "linear_forward_lp differs from linear_forward in bf16");
    pmt_bf16_convert(expect16, inp, N, IN, IN, 1.0f);
    CHECK_MSG(memcmp(inp16, expect16, sizeof(uint16_t) * N * IN) == 0, "the input slot does not hold bf16(inp)");
    uint16_t *out16 = malloc(sizeof(uint16_t) * N * OUT), *e_out16 = malloc(sizeof(uint16_t) * N * OUT);
    linear_relu_forward(out1, inp, w, b, N, IN, OUT);
    linear_relu_forward_lp(out2, out16, inp, w, b, N, IN, OUT, &lp);
    CHECK_MSG(same_bits(out1, out2, N * OUT), "linear_relu_forward_lp differs from linear_relu_forward in bf16");
    pmt_bf16_convert(e_out16, out1, N, OUT, OUT, 1.0f);
    CHECK_MSG(memcmp(out16, e_out16, sizeof(uint16_t) * N * OUT) == 0, "linear_relu_forward_lp's out16 is not bf16(out)");
    /* A producer-rounded input (inp_rounded): the LayerNorm writes the slot,
     * the layer uses it as is. */
    float *ln = malloc(sizeof(float) * N * IN), *ln2 = malloc(sizeof(float) * N * IN), mean[N], rstd[N];
    layernorm_forward(ln, mean, rstd, inp, w, b, N, IN);   /* w, b: any [IN] gains */
    layernorm_forward_lp(ln2, inp16, mean, rstd, inp, w, b, N, IN);
    pmt_bf16_convert(expect16, ln, N, IN, IN, 1.0f);
    CHECK_MSG(same_bits(ln, ln2, N * IN) && memcmp(inp16, expect16, sizeof(uint16_t) * N * IN) == 0,
              "layernorm_forward_lp: output or its rounding differs");
    const linear_bf16 lp_rounded = {inp16, w16, NULL, 1, 0};
    linear_forward(out1, ln, w, b, N, IN, OUT);
    linear_forward_lp(out2, ln, w, b, N, IN, OUT, &lp_rounded);
    CHECK_MSG(same_bits(out1, out2, N * OUT), "linear_forward_lp on a producer-rounded input differs");
    free(out16); free(e_out16); free(ln); free(ln2);
    linear_forward_lp(out2, inp, w, b, N, IN, OUT, &lp);   /* the slot holds bf16(inp) again for backward */

    linear_backward(dinp1, dw1, db1, dout, inp, w, N, IN, OUT);
    linear_backward_lp(dinp2, dw2, db2, dout, inp, w, N, IN, OUT, 1.0f, 1.0f, &lp);
    CHECK_MSG(same_bits(dinp1, dinp2, N * IN) && same_bits(dw1, dw2, OUT * IN) && same_bits(db1, db2, OUT),
              "linear_backward_lp differs from linear_backward in bf16");
    const float alpha = 1.0f / 37.0f;   /* not a power of two: the rounding of alpha·dout shows */
    pmt_bf16_convert(dout16, dout, N, OUT, OUT, alpha);
    const linear_bf16 lp_dout = {inp16, w16, dout16, 0, 0};
    linear_backward_scaled_set(dinp1, dw1, NULL, dout, inp, w, N, IN, OUT, alpha);
    linear_backward_lp(dinp2, dw2, NULL, NULL, inp, w, N, IN, OUT, 0.0f, alpha, &lp_dout);
    CHECK_MSG(same_bits(dinp1, dinp2, N * IN) && same_bits(dw1, dw2, OUT * IN),
              "linear_backward_lp with a pre-scaled dout16 differs from linear_backward_scaled_set");

    /* The fused cross-entropy's rounded rows (one ignored row) versus a
     * conversion pass over its fp32 gradient. */
    enum { R = 5, V = 333 };
    float *logits = malloc(sizeof(float) * R * V), *d1 = malloc(sizeof(float) * R * V), *d2 = malloc(sizeof(float) * R * V);
    uint16_t *d16 = malloc(sizeof(uint16_t) * R * V), *e16 = malloc(sizeof(uint16_t) * R * V);
    float loss1[R], loss2[R], nll1[R], nll2[R];
    const int32_t targets[R] = {3, 0, 332, 17, 100};
    fill(logits, R * V, 35);
    int c1 = -1, c2 = -2;
    const int n1 = crossentropy_fused(loss1, nll1, d1, logits, targets, R, V, 0.1f, 0, &c1);
    const int n2 = crossentropy_fused_bf16(loss2, nll2, d2, d16, alpha, logits, targets, R, V, 0.1f, 0, &c2);
    pmt_bf16_convert(e16, d1, R, V, V, alpha);
    CHECK(n1 == 4 && n2 == n1 && c1 == c2);
    CHECK_MSG(same_bits(d1, d2, R * V) && same_bits(loss1, loss2, R) && same_bits(nll1, nll2, R),
              "crossentropy_fused_bf16 changes the fp32 outputs");
    CHECK_MSG(memcmp(d16, e16, sizeof(uint16_t) * R * V) == 0, "the rounded gradient rows differ from bf16(scale·dlogits)");

    /* The dropout backward that rounds its output: the fp32 bits of the
     * plain kernel, and the rounding of those (5000 values: two full chunks
     * and a tail). */
    enum { NE = 5000 };
    float *x = malloc(sizeof(float) * NE), *y1 = malloc(sizeof(float) * NE);
    float *y2 = malloc(sizeof(float) * NE);
    uint16_t *y16 = malloc(sizeof(uint16_t) * NE), *e16n = malloc(sizeof(uint16_t) * NE);
    fill(x, NE, 37);
    dropout_regen_backward_set(y1, x, NE, 0.1f, 5, 9);
    dropout_regen_backward_set_lp(y2, y16, x, NE, 0.1f, 5, 9);
    pmt_bf16_convert(e16n, y1, 1, NE, NE, 1.0f);
    CHECK_MSG(same_bits(y1, y2, NE) && memcmp(y16, e16n, sizeof(uint16_t) * NE) == 0,
              "dropout_regen_backward_set_lp differs");
    free(x); free(y1); free(y2); free(y16); free(e16n);

    /* Stale conversion: a backward with dinp, then new values in the same
     * dout buffer and a backward without dinp. */
    linear_backward_set(dinp1, dw1, NULL, dout, inp, w, N, IN, OUT);
    fill(dout, N * OUT, 36);
    memset(dw1, 0, sizeof(float) * OUT * IN);
    memset(dw2, 0, sizeof(float) * OUT * IN);
    linear_backward_set(NULL, dw1, NULL, dout, inp, w, N, IN, OUT);
    pmt_sgemm(1, 0, OUT, IN, N, 1.0f, dout, OUT, inp, IN, 1.0f, dw2, IN);
    CHECK_MSG(same_bits(dw1, dw2, OUT * IN), "a backward without dinp reused the previous dout's conversion");

    pmt_gemm_set_precision(PMT_PRECISION_FP32);
    free(inp); free(w); free(b); free(dout); free(out1); free(out2); free(dinp1); free(dinp2);
    free(dw1); free(dw2); free(db1); free(db2); free(inp16); free(w16); free(dout16); free(expect16);
    free(logits); free(d1); free(d2); free(d16); free(e16);
}

/* The kernels that read or write bf16 without an fp32 matrix beside it:
 *   - pmt_gemm_bf16_out (bias, ReLU and rounding in the matmul's epilogue)
 *     against the fp32-output product of the same bf16 operands, bias and
 *     ReLU added after, rounded: equal to one bf16 step (the epilogue may
 *     add the bias into the accumulator in another order), and exactly 0
 *     where the ReLU cut; outside the bf16 precision it refuses with NaN;
 *   - crossentropy_fused_bf16_logits: the bits of crossentropy_fused_bf16
 *     run on the widened bf16 logits (loss, NLL, argmax hits, the rounded
 *     gradient), in place and with an fp32 gradient kept instead;
 *   - relu_backward_bias_lp16: the bits of relu_backward_inplace gated by
 *     the widened bf16 output, their rounding, and the bias sums, the same
 *     with 1 and 2 threads. */
static void test_bf16_output_kernels(void) {
    enum { M = 37, K = 48, N = 70 };
    float *a = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * N * K), *bias = malloc(sizeof(float) * N);
    float *ref = malloc(sizeof(float) * M * N);
    uint16_t *a16 = malloc(sizeof(uint16_t) * M * K), *w16 = malloc(sizeof(uint16_t) * N * K);
    uint16_t *out16 = malloc(sizeof(uint16_t) * M * N);
    fill(a, M * K, 41);
    fill(w, N * K, 42);
    fill(bias, N, 43);
    pmt_bf16_convert(a16, a, M, K, K, 1.0f);
    pmt_bf16_convert(w16, w, N, K, K, 1.0f);
    pmt_gemm_set_precision(PMT_PRECISION_BF16);
    for (int relu = 0; relu <= 1; relu++) {
        if (relu) linear_relu_forward_bf16(out16, a16, w16, 0, bias, M, K, N);
        else pmt_gemm_bf16_out(0, 0, 1, M, N, K, a16, w16, bias, 0, out16, N);
        pmt_sgemm_lp(0, 0, 1, M, N, K, 1.0f, NULL, a16, K, NULL, w16, K, 0.0f, ref, N);
        int far = 0, cut = 0, zeros_ok = 1;
        for (int i = 0; i < M * N; i++) {
            float x = ref[i] + bias[i % N];
            if (relu && x <= 0.0f) {
                cut++;
                zeros_ok &= out16[i] == 0;
                continue;
            }
            const float got = pmt_bf16_to_float(out16[i]);
            far += fabsf(got - x) > fabsf(x) * (1.0f / 128.0f) + 1e-6f;   /* one bf16 step */
        }
        CHECK_MSG(far == 0 && zeros_ok, "pmt_gemm_bf16_out (relu %d): %d values beyond one bf16 step, zeros %s", relu,
                  far, zeros_ok ? "ok" : "not zero");
        if (relu) CHECK_MSG(cut > M * N / 5, "the test's ReLU cut only %d of %d values", cut, M * N);
    }
    CHECK(pmt_gemm_take_error(NULL, 0) == 0);
    pmt_gemm_set_precision(PMT_PRECISION_FP32);
    pmt_gemm_bf16_out(0, 0, 1, M, N, K, a16, w16, bias, 1, out16, N);
    char err[256];
    CHECK_MSG(out16[0] == 0x7fc0 && out16[M * N - 1] == 0x7fc0 && pmt_gemm_take_error(err, sizeof err) == -1,
              "a bf16-output product outside the bf16 precision must fail loudly");
    pmt_gemm_set_precision(PMT_PRECISION_BF16);

    enum { R = 6, V = 1000 };
    float *logits = malloc(sizeof(float) * R * V), *d1 = malloc(sizeof(float) * R * V);
    float *d3 = malloc(sizeof(float) * R * V), *scratch = malloc(sizeof(float) * V * (size_t)omp_get_max_threads());
    uint16_t *l16 = malloc(sizeof(uint16_t) * R * V), *g16 = malloc(sizeof(uint16_t) * R * V);
    uint16_t *e16 = malloc(sizeof(uint16_t) * R * V);
    const int32_t targets[R] = {5, 0, 999, 0, 17, 512};   /* rows 1 and 3 ignored (id 0) */
    fill(logits, R * V, 44);
    for (int i = 0; i < R * V; i++) logits[i] *= 8.0f;
    pmt_bf16_convert(l16, logits, R, V, V, 1.0f);
    for (int i = 0; i < R * V; i++) logits[i] = pmt_bf16_to_float(l16[i]);
    const float scale = 1.0f / 37.0f;
    float loss1[R], loss2[R], loss3[R], nll1[R], nll2[R], nll3[R];
    int c1 = -1, c2 = -2, c3 = -3;
    const int n1 = crossentropy_fused_bf16(loss1, nll1, d1, e16, scale, logits, targets, R, V, 0.1f, 0, &c1);
    memcpy(g16, l16, sizeof(uint16_t) * R * V);
    const int n2 = crossentropy_fused_bf16_logits(loss2, nll2, g16, scale, NULL, targets, R, V, 0.1f, 0, &c2,
                                                  scratch);
    CHECK(n1 == 4 && n2 == n1 && c2 == c1);
    CHECK_MSG(same_bits(loss1, loss2, R) && same_bits(nll1, nll2, R), "bf16-logits cross-entropy: loss or NLL differ");
    CHECK_MSG(memcmp(g16, e16, sizeof(uint16_t) * R * V) == 0, "bf16-logits cross-entropy: rounded gradient differs");
    const int n3 = crossentropy_fused_bf16_logits(loss3, nll3, l16, 0.0f, d3, targets, R, V, 0.1f, 0, &c3, NULL);
    CHECK_MSG(n3 == n1 && c3 == c1 && same_bits(d3, d1, R * V) && same_bits(loss3, loss1, R),
              "bf16-logits cross-entropy with an fp32 gradient differs from crossentropy_fused");

    enum { NE = 5000 };
    float *x = malloc(sizeof(float) * NE), *h = malloc(sizeof(float) * NE), *y1 = malloc(sizeof(float) * NE);
    float *y2 = malloc(sizeof(float) * NE);
    uint16_t *h16 = malloc(sizeof(uint16_t) * NE), *y16a = malloc(sizeof(uint16_t) * NE);
    uint16_t *y16b = malloc(sizeof(uint16_t) * NE);
    fill(x, NE, 45);
    fill(h, NE, 46);
    for (int i = 0; i < NE; i++) h[i] = h[i] > 0.0f ? h[i] : (i % 3 ? 0.0f : -0.0f);   /* ReLU outputs, ±0 */
    pmt_bf16_convert(h16, h, 1, NE, NE, 1.0f);
    for (int i = 0; i < NE; i++) h[i] = pmt_bf16_to_float(h16[i]);
    /* The reference: the fp32 kernel gated by the widened output, and its
     * rounding; NE = 100 rows of 50, sums onto an initial db. */
    enum { NR = 100, NC = 50 };
    float *ref_y = malloc(sizeof(float) * NE), db1[NC], db2[NC];
    float *bscratch = malloc(sizeof(float) * relu_backward_bias_scratch_floats(NC));
    uint16_t *ref16 = malloc(sizeof(uint16_t) * NE);
    double want[NC];
    memcpy(ref_y, x, sizeof(float) * NE);
    relu_backward_inplace(ref_y, h, NE);
    pmt_bf16_convert(ref16, ref_y, 1, NE, NE, 1.0f);
    for (int j = 0; j < NC; j++) db1[j] = db2[j] = 0.5f, want[j] = 0.5;
    for (int i = 0; i < NE; i++) want[i % NC] += ref_y[i];
    memcpy(y1, x, sizeof(float) * NE);
    memcpy(y2, x, sizeof(float) * NE);
    const int saved_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    relu_backward_bias_lp16(y2, y16b, db1, h16, NR, NC, bscratch);
    omp_set_num_threads(2);
    memcpy(y1, x, sizeof(float) * NE);
    relu_backward_bias_lp16(y1, y16a, db2, h16, NR, NC, bscratch);
    omp_set_num_threads(saved_threads);
    int db_far = 0;
    for (int j = 0; j < NC; j++) db_far += fabs(db1[j] - want[j]) > 1e-5 * (1.0 + fabs(want[j]));
    CHECK_MSG(same_bits(y1, ref_y, NE) && same_bits(y2, ref_y, NE) && memcmp(y16a, ref16, sizeof(uint16_t) * NE) == 0 &&
                  memcmp(y16b, ref16, sizeof(uint16_t) * NE) == 0 && db_far == 0 && same_bits(db1, db2, NC),
              "relu_backward_bias_lp16: gated values, rounding or bias sums wrong (%d sums off)", db_far);
    free(bscratch); free(ref_y); free(ref16);
    pmt_gemm_set_precision(PMT_PRECISION_FP32);
    free(a); free(w); free(bias); free(ref); free(a16); free(w16); free(out16);
    free(logits); free(d1); free(d3); free(scratch); free(l16); free(g16); free(e16);
    free(x); free(h); free(y1); free(y2); free(h16); free(y16a); free(y16b);
}

/* One blocked-weight case: C from the plain product and through the copy of
 * w16, fp32 output (pmt_sgemm_lp, beta 0 and 1) or an epilogue product. */
static int blocked_same_bits(int tb, int M, int N, int K, const uint16_t *a16, const uint16_t *w16,
                             const float *bias, int epilogue, float *c1, float *c2, uint16_t *o1, uint16_t *o2) {
    const int ldb = tb ? K : N;
    for (int flags = 0; flags <= PMT_LP_B_FIXED; flags += PMT_LP_B_FIXED) {
        float *c = flags ? c2 : c1;
        uint16_t *o = flags ? o2 : o1;
        if (epilogue == 0) {
            for (int i = 0; i < M * N; i++) c[i] = 0.25f * (float)(i % 7);   /* beta 1 onto these */
            pmt_sgemm_lp(flags, 0, tb, M, N, K, 1.0f, NULL, a16, K, NULL, w16, ldb, 1.0f, c, N);
        } else if (epilogue == 1) {
            pmt_sgemm_lp(flags, 0, tb, M, N, K, 1.0f, NULL, a16, K, NULL, w16, ldb, 0.0f, c, N);
        } else if (epilogue == 2) {
            pmt_gemm_bf16_bias(flags, 0, tb, M, N, K, a16, w16, bias, c, N);
        } else {
            pmt_gemm_bf16_out(flags, 0, tb, M, N, K, a16, w16, bias, 1, o, N);
        }
    }
    if (epilogue == 3) return memcmp(o1, o2, sizeof(uint16_t) * M * N) == 0;
    return same_bits(c1, c2, M * N);
}

static void test_blocked_weights(void) {
    enum { MAXD = 300 };
    float *a = malloc(sizeof(float) * MAXD * MAXD), *w = malloc(sizeof(float) * MAXD * MAXD);
    float *bias = malloc(sizeof(float) * MAXD), *c1 = malloc(sizeof(float) * MAXD * MAXD);
    float *c2 = malloc(sizeof(float) * MAXD * MAXD);
    uint16_t *a16 = malloc(sizeof(uint16_t) * MAXD * MAXD), *w16 = malloc(sizeof(uint16_t) * MAXD * MAXD);
    uint16_t *o1 = malloc(sizeof(uint16_t) * MAXD * MAXD), *o2 = malloc(sizeof(uint16_t) * MAXD * MAXD);
    fill(a, MAXD * MAXD, 51);
    fill(w, MAXD * MAXD, 52);
    fill(bias, MAXD, 53);
    pmt_bf16_convert(a16, a, MAXD, MAXD, MAXD, 1.0f);
    pmt_bf16_convert(w16, w, MAXD, MAXD, MAXD, 1.0f);
    pmt_gemm_set_precision(PMT_PRECISION_BF16);
    pmt_gemm_bf16_weights_changed();
    /* {M, N, K}: a model-like block, odd sizes, a K below one dot pair's block. */
    const int shapes[][3] = {{64, 256, 256}, {37, 70, 29}, {200, 33, 300}, {5, 300, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int tb = 0; tb <= 1; tb++)
            for (int epilogue = 0; epilogue < 4; epilogue++) {
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                if (epilogue >= 2 && !tb) continue;   /* the epilogue products are forward ones (Wᵀ) */
                CHECK_MSG(blocked_same_bits(tb, M, N, K, a16, w16, bias, epilogue, c1, c2, o1, o2),
                          "blocked weights: M=%d N=%d K=%d tb=%d, product kind %d differs from the plain one", M, N, K,
                          tb, epilogue);
            }
    CHECK(pmt_gemm_take_error(NULL, 0) == 0);
    CHECK_MSG(pmt_gemm_bf16_packed_bytes() > 0, "no blocked weight copy was made");

    /* The copy is what is multiplied: new weights at the same address give
     * the old product until the change is announced. */
    enum { M = 48, N = 96, K = 64 };
    float *old_c = malloc(sizeof(float) * M * N), *new_c = malloc(sizeof(float) * M * N);
    pmt_sgemm_lp(PMT_LP_B_FIXED, 0, 1, M, N, K, 1.0f, NULL, a16, K, NULL, w16, K, 0.0f, old_c, N);
    for (int i = 0; i < N * K; i++) w16[i] ^= 0x0040;   /* other weights, same address */
    pmt_sgemm_lp(0, 0, 1, M, N, K, 1.0f, NULL, a16, K, NULL, w16, K, 0.0f, new_c, N);
    CHECK(!same_bits(old_c, new_c, M * N));
    pmt_sgemm_lp(PMT_LP_B_FIXED, 0, 1, M, N, K, 1.0f, NULL, a16, K, NULL, w16, K, 0.0f, c1, N);
    CHECK_MSG(same_bits(c1, old_c, M * N), "the blocked product did not multiply the copy made before");
    pmt_gemm_bf16_weights_changed();
    pmt_sgemm_lp(PMT_LP_B_FIXED, 0, 1, M, N, K, 1.0f, NULL, a16, K, NULL, w16, K, 0.0f, c1, N);
    CHECK_MSG(same_bits(c1, new_c, M * N), "pmt_gemm_bf16_weights_changed did not renew the blocked copy");
    pmt_gemm_set_precision(PMT_PRECISION_FP32);
    free(a); free(w); free(bias); free(c1); free(c2); free(a16); free(w16); free(o1); free(o2);
    free(old_c); free(new_c);
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
    test_caller_copies();
    test_bf16_output_kernels();
    test_blocked_weights();
    return test_finish();
}
