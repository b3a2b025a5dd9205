/*
 * test_lowp_decode.c — int8 and bf16 decoding (nn/gemm.h, the
 * decoder's low-precision steps): the one quantiser rounds ties to even;
 * int8 products are the exact integer products on this ISA, also with
 * weights and inputs that saturate 16-bit pair sums without VNNI (the
 * ISA matrix of scripts/test.sh runs this under each cap), through the
 * packed matmul, the relayout and no-packed fallbacks of the test hook;
 * a product that fails returns an error the decoder passes on, and the
 * decoder goes on with the next batch; the int8 and bf16 linear layers stay
 * within the error bounds their roundings allow, against a double-precision
 * product of the same weights;
 * requantising dequantised int8 weights gives back the same integers (why
 * the decoder may requantise what an int8 file loaded); int8 and bf16
 * decoders' log-probabilities stay close to the fp32 decoder's over several
 * steps with both attention forms, and repeat exactly from run to run;
 * the packed int8 matmul (the decoder's) gives the bits of the per-call
 * integer GEMM for row counts on and off its multiples of 8, reusing its
 * primitives, and with bias or without; the fused form of the decoder's
 * steps (live rows in place, ReLU, residual add, normaliser) gives the
 * bits of the separate passes; the encoder runs in the decoder's
 * precision too (its output moves off the fp32 one, within the roundings).
 * The bf16 half needs native bf16; without it the int8 half runs, then the
 * test SKIPs (77).
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/model_file.h"
#include "nn/gemm.h"
#include "nn/ops.h"
#include "testutil.h"
#include "translate/decoder.h"

/* The one quantiser rounds to nearest, ties to even, and clamps. */
static void test_quantize_rounding(void) {
    const float row[8] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -126.5f, 3.49f};
    int8_t q[8];
    float scale;
    pmt_int8_quantize_rows(q, &scale, row, 1, 8);
    const int8_t want[8] = {127, 0, 2, 2, 0, -2, -126, 3};
    CHECK(scale == 1.0f);
    for (int i = 0; i < 8; i++) CHECK_MSG(q[i] == want[i], "q[%d] = %d, want %d (ties to even)", i, q[i], want[i]);
    const float zero[3] = {0.0f, -0.0f, 0.0f};
    pmt_int8_quantize_rows(q, &scale, zero, 1, 3);
    CHECK(scale == 0.0f && q[0] == 0 && q[1] == 0 && q[2] == 0);
}

/* What an exact int8 product gives: the activations quantised by the
 * same quantiser, int32 dot products written out here, the same rescale. */
static void exact_int8(float *out, const float *x, const int8_t *wq, const float *w_scale, const float *b, int N,
                       int IN, int OUT) {
    int8_t *xq = malloc((size_t)N * IN);
    float *xs = malloc((size_t)N * sizeof *xs);
    pmt_int8_quantize_rows(xq, xs, x, N, IN);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OUT; o++) {
            int32_t acc = 0;
            for (int i = 0; i < IN; i++) acc += (int32_t)xq[(size_t)n * IN + i] * wq[(size_t)o * IN + i];
            out[(size_t)n * OUT + o] = xs[n] * w_scale[o] * (float)acc + (b ? b[o] : 0.0f);
        }
    free(xq);
    free(xs);
}

/* Weights and inputs that saturate a 16-bit pair sum: mostly large and of
 * one sign, so neighbouring products add up past 32767 (oneDNN multiplies
 * x + 128 in [0, 255] by w: 2 · 255 · 127 > 32767). That is what int8
 * products without VNNI get wrong unless the weights are split (nn/gemm.h). */
static void fill_saturating(float *x, int nx, float *w, int nw, pmt_rng *r) {
    for (int i = 0; i < nx; i++) x[i] = (i % 5 ? 1.0f : -1.0f) * (float)(0.5 + 0.5 * pmt_rng_uniform(r));
    for (int i = 0; i < nw; i++) w[i] = (i % 7 ? 1.0f : -1.0f) * (float)(0.1 + 0.02 * pmt_rng_uniform(r));
}

static void test_kernel(void) {
    enum { N = 5, IN = 70, OUT = 33 };
    static float x[N * IN], w[OUT * IN], wd[OUT * IN], b[OUT], out[N * OUT], w_scale[OUT];
    static int8_t wq[OUT * IN], xq[N * IN];
    static float x_scale[N];
    static int32_t acc[N * OUT], acc_lo[N * OUT];
    pmt_rng r = {4};
    for (int i = 0; i < N * IN; i++) x[i] = (float)pmt_rng_normal(&r) * (i % 7 == 0 ? 4.0f : 1.0f);
    for (int i = 0; i < IN; i++) x[3 * IN + i] = 0.0f;   /* an all-zero input row */
    for (int i = 0; i < OUT * IN; i++) w[i] = (float)pmt_rng_normal(&r) * 0.1f;
    for (int o = 0; o < OUT; o++) b[o] = (float)o * 0.01f;
    pmt_int8_quantize_rows(wq, w_scale, w, OUT, IN);
    pmt_int8_dequantize_rows(wd, wq, w_scale, OUT, IN);
    pmt_int8_scratch s = {xq, x_scale, acc, acc_lo};
    char err[256];
    pmt_int8_matmul *mm = pmt_int8_matmul_init(wq, IN, OUT, N, err, sizeof err);
    CHECK_MSG(mm != NULL, "%s", err);
    if (!mm) return;
    CHECK(linear_forward_int8(out, x, mm, w_scale, b, N, &s) == 0);
    int within = 1;
    for (int n = 0; n < N; n++) {
        double amax = 0;
        for (int i = 0; i < IN; i++) amax = fmax(amax, fabs(x[n * IN + i]));
        const double xs = amax / 127.0;
        for (int o = 0; o < OUT; o++) {
            /* |x·w − x̃·w̃| <= Σ |x||w − w̃| + |w̃||x − x̃| with |w − w̃| <= ws/2, |x − x̃| <= xs/2. */
            double ref = b[o], bound = 1e-5;
            for (int i = 0; i < IN; i++) {
                ref += (double)x[n * IN + i] * w[o * IN + i];
                bound += fabs(x[n * IN + i]) * w_scale[o] / 2 + fabs(wd[o * IN + i]) * xs / 2;
            }
            if (fabs(out[n * OUT + o] - ref) > bound) {
                within = 0;
                fprintf(stderr, "    row %d col %d: %g vs %g (bound %g)\n", n, o, out[n * OUT + o], ref, bound);
            }
            if (n == 3) CHECK(out[n * OUT + o] == b[o]);
        }
    }
    CHECK(within);
    /* The product is not trivially the fp32 one: some roundings show. */
    float exact[N * OUT];
    linear_forward(exact, x, w, b, N, IN, OUT);
    CHECK(memcmp(exact, out, sizeof exact) != 0);
    /* Requantising the dequantised weights gives the same integers. */
    static int8_t again[OUT * IN];
    float scale2[OUT];
    pmt_int8_quantize_rows(again, scale2, wd, OUT, IN);
    CHECK(memcmp(again, wq, sizeof wq) == 0);
    for (int o = 0; o < OUT; o++) CHECK(fabsf(scale2[o] - w_scale[o]) <= w_scale[o] * 1e-6f);
    /* Exact integers on this ISA, also where 16-bit pair sums would saturate. */
    fill_saturating(x, N * IN, w, OUT * IN, &r);
    pmt_int8_quantize_rows(wq, w_scale, w, OUT, IN);
    pmt_int8_matmul_free(mm);
    mm = pmt_int8_matmul_init(wq, IN, OUT, N, err, sizeof err);
    CHECK_MSG(mm != NULL, "%s", err);
    if (!mm) return;
    float want[N * OUT];
    exact_int8(want, x, wq, w_scale, b, N, IN, OUT);
    CHECK(linear_forward_int8(out, x, mm, w_scale, b, N, &s) == 0);
    CHECK_MSG(memcmp(want, out, sizeof out) == 0, "int8 one-call product is not the exact integer one on %s (%s)",
              pmt_cpu_isa_name(), pmt_int8_path_name());
    pmt_int8_matmul_free(mm);
}

static void test_packed_int8(void) {
    /* 70 rows: a primitive per row count up to 64, then 72 for 65..70. */
    enum { IN = 48, OUT = 37, MAX_ROWS = 70, PADDED = 72 };
    static float x[MAX_ROWS * IN], w[OUT * IN], b[OUT], w_scale[OUT], plain[MAX_ROWS * OUT], want[MAX_ROWS * OUT],
        packed[(MAX_ROWS + 1) * OUT];
    static int8_t wq[OUT * IN], xq[PADDED * IN], xq2[PADDED * IN];
    static float x_scale[PADDED], x_scale2[PADDED];
    static int32_t acc[PADDED * OUT], acc2[PADDED * OUT], acc_lo[PADDED * OUT], acc_lo2[PADDED * OUT];
    char err[256];
    pmt_rng r = {9};
    fill_saturating(x, MAX_ROWS * IN, w, OUT * IN, &r);
    for (int o = 0; o < OUT; o++) b[o] = (float)o * 0.03f - 0.5f;
    pmt_int8_quantize_rows(wq, w_scale, w, OUT, IN);
    /* A primitive per row count up to 64, per multiple of 8 above. */
    CHECK(pmt_int8_matmul_rows(1) == 1 && pmt_int8_matmul_rows(21) == 21 && pmt_int8_matmul_rows(64) == 64 &&
          pmt_int8_matmul_rows(65) == 72 && pmt_int8_matmul_rows(72) == 72 && pmt_int8_matmul_rows(73) == 80);
    pmt_int8_scratch s = {xq, x_scale, acc, acc_lo}, s2 = {xq2, x_scale2, acc2, acc_lo2};   /* own scratch: no stale rows shared */
    static const int rows[] = {1, 7, 8, 9, 16, 21, 3, 21, 64, 65, 70};
    /* Off, then as oneDNN on a CPU that wants another weights layout from
     * 64 rows on (AMX; each such row count packs a copy, at most 4), then
     * one that builds no packed primitive from 16 rows on: the same bits
     * every time, the exact integer product's. */
    static const pmt_lowp_hook hooks[] = {PMT_LOWP_HOOK_OFF, PMT_LOWP_HOOK_RELAYOUT, PMT_LOWP_HOOK_NO_PACKED};
    static const int hook_rows[] = {16, 64, 16};
    for (size_t h = 0; h < sizeof hooks / sizeof *hooks; h++) {
        pmt_lowp_set_test_hook(hooks[h], hook_rows[h]);
        const long fallbacks = pmt_int8_fallback_count();
        pmt_int8_matmul *mm = pmt_int8_matmul_init(wq, IN, OUT, MAX_ROWS, err, sizeof err);
        CHECK_MSG(mm != NULL, "%s", err);
        if (!mm) return;
        for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
            const float *bias = k % 2 ? b : NULL;
            exact_int8(want, x, wq, w_scale, bias, rows[k], IN, OUT);
            CHECK(linear_forward_int8(plain, x, mm, w_scale, bias, rows[k], &s) == 0);
            memset(packed, 0xff, sizeof packed);
            memset(acc2, 0x5a, sizeof acc2);
            CHECK(linear_forward_int8_packed(packed, x, mm, w_scale, bias, rows[k], &s2) == 0);
            CHECK_MSG(memcmp(plain, packed, sizeof(float) * rows[k] * OUT) == 0, "packed int8 differs at %d rows (hook %d)",
                      rows[k], (int)hooks[h]);
            CHECK_MSG(memcmp(want, packed, sizeof(float) * rows[k] * OUT) == 0,
                      "packed int8 is not the exact integer product at %d rows (hook %d, %s)", rows[k], (int)hooks[h],
                      pmt_cpu_isa_name());
            CHECK_MSG(((uint32_t *)packed)[rows[k] * OUT] == 0xffffffffu, "packed int8 wrote past row %d", rows[k]);
        }
        /* The fallback ran exactly when no packed primitive was allowed: 16,
         * 21, 21, 64, 65 and 70 rows (the last two padded to 72), 6 calls. */
        const long ran = pmt_int8_fallback_count() - fallbacks;
        CHECK_MSG(hooks[h] == PMT_LOWP_HOOK_NO_PACKED ? ran == 6 : ran == 0, "fallback ran %ld times (hook %d)", ran,
                  (int)hooks[h]);
        /* A matmul sharing these weights (its own primitives, and its own
         * copy of a layout only it wants): the same bits, also after it
         * is freed for the one it shares from. */
        pmt_int8_matmul *sh = pmt_int8_matmul_init_sharing(mm, MAX_ROWS, err, sizeof err);
        CHECK_MSG(sh != NULL, "%s", err);
        for (size_t k = 0; sh && k < sizeof rows / sizeof *rows; k++) {
            const float *bias = k % 2 ? b : NULL;
            exact_int8(want, x, wq, w_scale, bias, rows[k], IN, OUT);
            memset(packed, 0xff, sizeof packed);
            CHECK(linear_forward_int8_packed(packed, x, sh, w_scale, bias, rows[k], &s2) == 0);
            CHECK_MSG(memcmp(want, packed, sizeof(float) * rows[k] * OUT) == 0,
                      "sharing int8 matmul differs at %d rows (hook %d)", rows[k], (int)hooks[h]);
        }
        pmt_int8_matmul_free(sh);
        CHECK(linear_forward_int8_packed(packed, x, mm, w_scale, b, MAX_ROWS, &s2) == 0);
        exact_int8(want, x, wq, w_scale, b, MAX_ROWS, IN, OUT);
        CHECK(memcmp(want, packed, sizeof(float) * MAX_ROWS * OUT) == 0);
        /* More rows than the matmul was made for: an error, not a write past
         * the scratch or the output (sized for MAX_ROWS + 1 rows here). */
        memset(packed, 0xff, sizeof packed);
        CHECK(linear_forward_int8_packed(packed, x, mm, w_scale, b, MAX_ROWS + 4, &s2) == -1);
        uint32_t first;
        memcpy(&first, packed, sizeof first);
        CHECK(first == 0xffffffffu);
        CHECK(pmt_gemm_take_error(err, sizeof err) == -1 && strstr(err, "exceeds") != NULL);
        pmt_int8_matmul_free(mm);
    }
    /* A product oneDNN cannot run at all: -1, NaN out, the error recorded
     * once; smaller products still run. */
    pmt_lowp_set_test_hook(PMT_LOWP_HOOK_FAIL, 16);
    pmt_int8_matmul *mm = pmt_int8_matmul_init(wq, IN, OUT, MAX_ROWS, err, sizeof err);
    CHECK_MSG(mm != NULL, "%s", err);
    if (mm) {
        CHECK(pmt_gemm_take_error(err, sizeof err) == 0);
        CHECK(linear_forward_int8_packed(packed, x, mm, w_scale, b, 17, &s2) == -1);
        CHECK(isnan(packed[0]) && isnan(packed[17 * OUT - 1]));
        CHECK(pmt_gemm_take_error(err, sizeof err) == -1 && strstr(err, "oneDNN cannot") != NULL);
        CHECK(pmt_gemm_take_error(err, sizeof err) == 0);
        CHECK(linear_forward_int8_packed(packed, x, mm, w_scale, b, 9, &s2) == 0);
        exact_int8(want, x, wq, w_scale, b, 9, IN, OUT);
        CHECK(memcmp(want, packed, sizeof(float) * 9 * OUT) == 0);
        pmt_int8_matmul_free(mm);
    }
    pmt_lowp_set_test_hook(PMT_LOWP_HOOK_OFF, 0);
}

/* Two matmuls over one packed copy (the search's lanes) multiplying at
 * the same time on two threads, each through its own scratch: every
 * product the exact integer one, with row counts that build primitives
 * while the other runs. */
static void test_shared_int8_threads(void) {
    enum { IN = 64, OUT = 300, MAX_ROWS = 40, ROUNDS = 30 };
    static float x[MAX_ROWS * IN], w[OUT * IN], w_scale[OUT], out[2][MAX_ROWS * OUT];
    static int8_t wq[OUT * IN], xq[2][MAX_ROWS * IN];
    static float x_scale[2][MAX_ROWS];
    static int32_t acc[2][MAX_ROWS * OUT], acc_lo[2][MAX_ROWS * OUT];
    char err[256];
    pmt_rng r = {31};
    fill_saturating(x, MAX_ROWS * IN, w, OUT * IN, &r);
    pmt_int8_quantize_rows(wq, w_scale, w, OUT, IN);
    pmt_int8_matmul *mm[2];
    mm[0] = pmt_int8_matmul_init(wq, IN, OUT, MAX_ROWS, err, sizeof err);
    CHECK_MSG(mm[0] != NULL, "%s", err);
    if (!mm[0]) return;
    mm[1] = pmt_int8_matmul_init_sharing(mm[0], MAX_ROWS, err, sizeof err);
    CHECK_MSG(mm[1] != NULL, "%s", err);
    if (!mm[1]) {
        pmt_int8_matmul_free(mm[0]);
        return;
    }
    int wrong[2] = {0, 0};
#pragma omp parallel num_threads(2)
    {
        const int t = omp_get_thread_num();
        pmt_int8_scratch s = {xq[t], x_scale[t], acc[t], acc_lo[t]};
        static float local_want[2][MAX_ROWS * OUT];
        for (int round = 0; round < ROUNDS; round++) {
            const int n = 1 + (round * 7 + t * 13) % MAX_ROWS;
            if (linear_forward_int8_packed(out[t], x, mm[t], w_scale, NULL, n, &s) != 0) wrong[t]++;
            exact_int8(local_want[t], x, wq, w_scale, NULL, n, IN, OUT);
            if (memcmp(local_want[t], out[t], sizeof(float) * (size_t)n * OUT) != 0) wrong[t]++;
        }
    }
    CHECK_MSG(wrong[0] == 0 && wrong[1] == 0, "int8 matmuls sharing weights on two threads: %d and %d wrong products",
              wrong[0], wrong[1]);
    pmt_int8_matmul_free(mm[1]);
    pmt_int8_matmul_free(mm[0]);
}

/* A pmt_row_visit that copies row c to rows + c·width (and checks that
 * its normaliser is set first and that rows come in order 0, 1, ...). */
typedef struct row_collector {
    float *rows;
    const float *lse;
    int width, calls, in_order;
} row_collector;

static void collect_row(void *ctx, int c, const float *row) {
    row_collector *col = ctx;
    col->in_order &= c == col->calls && isfinite(col->lse[c]) && col->lse[c] != 0.0f;
    memcpy(col->rows + (size_t)c * col->width, row, sizeof(float) * (size_t)col->width);
    col->calls++;
}

/* linear_forward_int8_rows (the decoder's fused steps): the named rows get
 * the bits of the exact integer product of the gathered rows followed by the
 * ReLU, the residual add or the normaliser as their own passes; rows not
 * named are untouched; a failed product makes the named rows and lse NaN
 * and nothing else. */
static void test_int8_rows(void) {
    enum { IN = 48, OUT = 37, R = 12, LIVE = 5 };
    static const int32_t live[LIVE] = {0, 2, 3, 7, 11};
    static float x[R * IN], w[OUT * IN], b[OUT], w_scale[OUT], gathered[R * IN], prod[R * OUT], want[R * OUT],
        got[R * OUT], start[R * OUT], lse[R], want_lse[R], rows_out[R * OUT];
    static int8_t wq[OUT * IN], xq[16 * IN];
    static float x_scale[16];
    static int32_t acc[16 * OUT], acc_lo[16 * OUT];
    char err[256];
    pmt_rng r = {21};
    fill_saturating(x, R * IN, w, OUT * IN, &r);
    for (int o = 0; o < OUT; o++) b[o] = (float)o * 0.05f - 0.9f;
    for (int i = 0; i < R * OUT; i++) start[i] = (float)(pmt_rng_uniform(&r) * 4.0 - 2.0);
    pmt_int8_quantize_rows(wq, w_scale, w, OUT, IN);
    pmt_int8_scratch s = {xq, x_scale, acc, acc_lo};
    pmt_int8_matmul *mm = pmt_int8_matmul_init(wq, IN, OUT, R, err, sizeof err);
    CHECK_MSG(mm != NULL, "%s", err);
    if (!mm) return;
    static const pmt_int8_epilogue ops[] = {PMT_INT8_STORE, PMT_INT8_RELU, PMT_INT8_ADD};
    for (int mapped = 0; mapped < 2; mapped++) {
        const int n = mapped ? LIVE : R;
        for (int c = 0; c < n; c++)
            memcpy(gathered + (size_t)c * IN, x + (size_t)(mapped ? live[c] : c) * IN, sizeof(float) * IN);
        exact_int8(prod, gathered, wq, w_scale, b, n, IN, OUT);
        for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
            /* The separate passes: op over the product rows, then scattered. */
            memcpy(want, start, sizeof want);
            for (int c = 0; c < n; c++) {
                float *dst = want + (size_t)(mapped ? live[c] : c) * OUT;
                const float *y = prod + (size_t)c * OUT;
                if (ops[k] == PMT_INT8_STORE) memcpy(dst, y, sizeof(float) * OUT);
                if (ops[k] == PMT_INT8_RELU) relu_forward(dst, y, OUT);
                if (ops[k] == PMT_INT8_ADD) residual_forward(dst, dst, y, OUT);
                memcpy(rows_out + (size_t)c * OUT, dst, sizeof(float) * OUT);
            }
            logsumexp_rows(want_lse, rows_out, n, OUT);
            memcpy(got, start, sizeof got);
            const pmt_int8_rows how = {.in_rows = mapped ? live : NULL, .out_rows = mapped ? live : NULL, .op = ops[k], .lse = lse};
            CHECK(linear_forward_int8_rows(got, x, mm, w_scale, b, n, &s, &how) == 0);
            CHECK_MSG(memcmp(got, want, sizeof got) == 0, "int8 rows, op %d, %s: not the bits of the separate passes",
                      (int)ops[k], mapped ? "live rows" : "all rows");
            CHECK_MSG(memcmp(lse, want_lse, sizeof(float) * n) == 0, "int8 rows, op %d: normaliser differs",
                      (int)ops[k]);
        }
    }
    /* Input rows by one map, output rows contiguous (the decoder's logits). */
    exact_int8(prod, gathered, wq, w_scale, NULL, LIVE, IN, OUT);
    const pmt_int8_rows logits = {.in_rows = live, .op = PMT_INT8_STORE};
    memcpy(got, start, sizeof got);
    CHECK(linear_forward_int8_rows(got, x, mm, w_scale, NULL, LIVE, &s, &logits) == 0);
    CHECK(memcmp(got, prod, sizeof(float) * LIVE * OUT) == 0);
    CHECK(memcmp(got + LIVE * OUT, start + LIVE * OUT, sizeof(float) * (R - LIVE) * OUT) == 0);
    /* A failed product: NaN in the named rows and lse, the rest untouched. */
    pmt_lowp_set_test_hook(PMT_LOWP_HOOK_FAIL, 1);
    memcpy(got, start, sizeof got);
    const pmt_int8_rows add = {.in_rows = live, .out_rows = live, .op = PMT_INT8_ADD, .lse = lse};
    CHECK(linear_forward_int8_rows(got, x, mm, w_scale, b, LIVE, &s, &add) == -1);
    for (int row = 0, c = 0; row < R; row++) {
        const int named = c < LIVE && live[c] == row;
        for (int o = 0; o < OUT; o++) {
            const float v = got[(size_t)row * OUT + o];
            CHECK_MSG(named ? isnan(v) : v == start[(size_t)row * OUT + o], "failed int8 rows: row %d (%s) holds %g",
                      row, named ? "named" : "not named", (double)v);
        }
        c += named;
    }
    for (int c = 0; c < LIVE; c++) CHECK(isnan(lse[c]));
    CHECK(pmt_gemm_take_error(err, sizeof err) == -1 && strstr(err, "oneDNN cannot") != NULL);
    CHECK(pmt_gemm_take_error(err, sizeof err) == 0);
    pmt_lowp_set_test_hook(PMT_LOWP_HOOK_OFF, 0);
    pmt_int8_matmul_free(mm);
    /* Rows as wide as a vocabulary (the product's parallel branch, a
     * vector tail): the normaliser of each is logsumexp_rows's. */
    enum { WIDE = 4099 };
    static float ww[WIDE * IN], ws[WIDE], wide[LIVE * WIDE], wide_lse[LIVE];
    static int8_t wwq[WIDE * IN];
    static int32_t wacc[16 * WIDE], wacc_lo[16 * WIDE];
    for (int i = 0; i < WIDE * IN; i++) ww[i] = (float)(pmt_rng_uniform(&r) - 0.5);
    pmt_int8_quantize_rows(wwq, ws, ww, WIDE, IN);
    pmt_int8_scratch sw = {xq, x_scale, wacc, wacc_lo};
    mm = pmt_int8_matmul_init(wwq, IN, WIDE, R, err, sizeof err);
    CHECK_MSG(mm != NULL, "%s", err);
    if (!mm) return;
    const pmt_int8_rows vocab = {.in_rows = live, .op = PMT_INT8_STORE, .lse = lse};
    CHECK(linear_forward_int8_rows(wide, x, mm, ws, NULL, LIVE, &sw, &vocab) == 0);
    logsumexp_rows(wide_lse, wide, LIVE, WIDE);
    CHECK_MSG(memcmp(lse, wide_lse, sizeof wide_lse) == 0, "int8 rows: normaliser of %d-wide rows differs", WIDE);
    static float wide_want[LIVE * WIDE];
    exact_int8(wide_want, gathered, wwq, ws, NULL, LIVE, IN, WIDE);
    CHECK(memcmp(wide, wide_want, sizeof wide) == 0);
    /* Visited rows: each handed over once, in order, with the stored
     * form's bits and its normaliser already set; no output written. */
    static float row_buf[WIDE], seen[LIVE * WIDE], untouched[LIVE * WIDE];
    row_collector col = {seen, lse, WIDE, 0, 1};
    memset(untouched, 0, sizeof untouched);
    pmt_int8_rows visited = {.in_rows = live, .op = PMT_INT8_STORE, .lse = lse,
                             .visit = collect_row, .visit_ctx = &col, .row_buf = row_buf};
    memset(lse, 0, sizeof lse);
    CHECK(linear_forward_int8_rows(untouched, x, mm, ws, NULL, LIVE, &sw, &visited) == 0);
    CHECK_MSG(col.calls == LIVE && col.in_order, "visited rows: %d calls (want %d), in order %d", col.calls, LIVE,
              col.in_order);
    CHECK_MSG(memcmp(seen, wide_want, sizeof seen) == 0, "visited rows differ from the stored ones");
    CHECK_MSG(memcmp(lse, wide_lse, sizeof wide_lse) == 0, "visited rows: normaliser differs");
    for (int i = 0; i < LIVE * WIDE; i++) CHECK(untouched[i] == 0.0f);
    /* A residual add cannot be visited (there is no stored row to add to). */
    col.calls = 0;
    visited.op = PMT_INT8_ADD;
    CHECK(linear_forward_int8_rows(NULL, x, mm, ws, NULL, LIVE, &sw, &visited) == -1);
    CHECK(col.calls == 0 && isnan(lse[0]));
    CHECK(pmt_gemm_take_error(err, sizeof err) == -1 && strstr(err, "row buffer") != NULL);
    /* A failed product visits nothing and leaves lse NaN. */
    visited.op = PMT_INT8_STORE;
    pmt_lowp_set_test_hook(PMT_LOWP_HOOK_FAIL, 1);
    CHECK(linear_forward_int8_rows(NULL, x, mm, ws, NULL, LIVE, &sw, &visited) == -1);
    pmt_lowp_set_test_hook(PMT_LOWP_HOOK_OFF, 0);
    CHECK(col.calls == 0);
    for (int c = 0; c < LIVE; c++) CHECK(isnan(lse[c]));
    CHECK(pmt_gemm_take_error(err, sizeof err) == -1);
    pmt_int8_matmul_free(mm);
}

static void test_bf16_kernel(void) {
    enum { N = 4, IN = 40, OUT = 24 };
    static float x[N * IN], w[OUT * IN], b[OUT], out[N * OUT];
    static uint16_t xs[N * IN];
    char err[256];
    pmt_rng r = {6};
    for (int i = 0; i < N * IN; i++) x[i] = (float)pmt_rng_normal(&r);
    for (int i = 0; i < OUT * IN; i++) w[i] = (float)pmt_rng_normal(&r) * 0.1f;
    for (int o = 0; o < OUT; o++) b[o] = 0.5f - (float)o * 0.02f;
    for (int with_bias = 0; with_bias <= 1; with_bias++) {
        pmt_bf16_matmul *mm = pmt_bf16_matmul_init(w, IN, OUT, with_bias, err, sizeof err);
        CHECK_MSG(mm != NULL, "%s", err);
        if (!mm) return;
        void *pad = aligned_alloc(64, (pmt_bf16_matmul_scratchpad_bytes(mm) + 64) & ~(size_t)63);
        CHECK(pad != NULL);
        for (int n = 1; n <= N; n += N - 1) {   /* the row count varies per call */
            memset(out, 0, sizeof out);
            CHECK(linear_forward_bf16(out, x, mm, with_bias ? b : NULL, n, xs, pad) == 0);
            int within = 1, differ = 0;
            float exact[N * OUT];
            linear_forward(exact, x, w, with_bias ? b : NULL, n, IN, OUT);
            for (int k = 0; k < n; k++)
                for (int o = 0; o < OUT; o++) {
                    /* Both factors within 2^-8 relative: the product within 2^-7 + 2^-16. */
                    double ref = with_bias ? b[o] : 0, bound = 1e-6;
                    for (int i = 0; i < IN; i++) {
                        ref += (double)x[k * IN + i] * w[o * IN + i];
                        bound += fabs((double)x[k * IN + i] * w[o * IN + i]) * (0x1p-7 + 0x1p-16);
                    }
                    within &= fabs(out[k * OUT + o] - ref) <= bound;
                    differ |= out[k * OUT + o] != exact[k * OUT + o];
                }
            CHECK_MSG(within, "bf16 product outside its bound (rows %d, bias %d)", n, with_bias);
            CHECK_MSG(differ, "bf16 product equals the fp32 one: were bf16 inputs used?");
        }
        /* Concurrent products (the search's lanes): two threads, each with
         * its own matmul, inputs, scratchpad, give what one thread gives. */
        pmt_bf16_matmul *mm2 = pmt_bf16_matmul_init(w, IN, OUT, with_bias, err, sizeof err);
        void *pad2 = aligned_alloc(64, (pmt_bf16_matmul_scratchpad_bytes(mm) + 64) & ~(size_t)63);
        CHECK(mm2 != NULL && pad2 != NULL);
        if (mm2 && pad2) {
            static float par[2][N * OUT];
            static uint16_t pxs[2][N * IN];
            CHECK(linear_forward_bf16(out, x, mm, with_bias ? b : NULL, N, xs, pad) == 0);
            int same = 1;
#pragma omp parallel for num_threads(2) reduction(& : same)
            for (int th = 0; th < 2; th++)
                for (int rep = 0; rep < 200; rep++) {
                    same &= linear_forward_bf16(par[th], x, th ? mm2 : mm, with_bias ? b : NULL, N, pxs[th],
                                                th ? pad2 : pad) == 0;
                    same &= !memcmp(par[th], out, sizeof par[th]);
                }
            CHECK_MSG(same, "concurrent bf16 products differ from a lone one (bias %d)", with_bias);
        }
        pmt_bf16_matmul_free(mm2);
        free(pad2);
        free(pad);
        pmt_bf16_matmul_free(mm);
    }
}

/* Log-probabilities of STEPS greedy-fed steps of a random model, with the
 * decoder multiplying in fp32 or int8. */
enum { VOCAB = 50, STEPS = 6, SENT = 2, BEAM = 2, S = 5, DM = 32 };

/* A random model of `layers` encoder and decoder blocks with these site
 * kinds, decoding with `weights`, and its decoder. */
static void make_decoder(pmt_model *m, pmt_decoder *d, int layers, const int kinds[PMT_SITES], int weights) {
    pmt_config cfg;
    char err[256];
    pmt_config_defaults(&cfg);
    cfg.d_model = DM;
    cfg.n_heads = 4;
    cfg.d_ff = 64;
    cfg.enc_layers = layers;
    cfg.dec_layers = layers;
    cfg.max_len = 16;
    for (int i = 0; i < PMT_SITES; i++) cfg.site_kind[i] = kinds[i];
    CHECK(pmt_model_init(m, &cfg, VOCAB, 64, 16, err, sizeof err) == 0);
    pmt_model_init_params(m, 11);
    m->decode_weights = weights;
    CHECK_MSG(pmt_decoder_init(d, m, SENT, BEAM, err, sizeof err) == 0, "%s", err);
}

/* logp as above; enc [SENT*S, DM]: the encoder output the decoder started from. */
static void run_decoder(const int kinds[PMT_SITES], int weights, float *logp, float *enc) {
    char err[256];
    pmt_model m;
    pmt_decoder d;
    make_decoder(&m, &d, 2, kinds, weights);
    const int32_t src[SENT * S] = {5, 6, 7, 8, 3, 9, 10, 11, 3, 0}, src_len[SENT] = {5, 4};
    CHECK_MSG(pmt_decoder_start(&d, src, src_len, SENT, S, BEAM, 10, err, sizeof err) == 0, "%s", err);
    memcpy(enc, d.enc_out, sizeof(float) * SENT * S * DM);
    int32_t tok[SENT * BEAM] = {2, 2, 2, 2};
    for (int t = 0; t < STEPS; t++) {
        CHECK_MSG(pmt_decoder_step(&d, tok) != NULL, "%s", d.error);
        for (int r = 0; r < SENT * BEAM; r++)
            for (int v = 0; v < VOCAB; v++) logp[(t * SENT * BEAM + r) * VOCAB + v] = (float)pmt_decoder_logprob(&d, r, v);
        for (int r = 0; r < SENT * BEAM; r++) tok[r] = 4 + (t * 7 + r * 3) % (VOCAB - 4);
    }
    pmt_decoder_free(&d);
    pmt_model_free(&m);
}

/* bf16: the bf16 decoder (else the int8 one) against fp32, both attention forms. */
static void test_decoder(int bf16) {
    enum { N = STEPS * SENT * BEAM * VOCAB };
    static float f32[N], q8[N], q8_again[N], enc32[SENT * S * DM], enc8[SENT * S * DM];
    const int forms[2][PMT_SITES] = {{0, 0, 0}, {1, 1, 1}};
    const int types[2] = {PMT_WEIGHTS_INT8, PMT_WEIGHTS_BF16};
    for (int k = 0; k < 2; k++) {
        const int type = types[bf16];
        run_decoder(forms[k], PMT_WEIGHTS_FP32, f32, enc32);
        run_decoder(forms[k], type, q8, enc8);
        run_decoder(forms[k], type, q8_again, enc8);
        double e_diff = 0, e_norm = 0;
        for (int i = 0; i < SENT * S * DM; i++) {
            e_diff += ((double)enc8[i] - enc32[i]) * ((double)enc8[i] - enc32[i]);
            e_norm += (double)enc32[i] * enc32[i];
        }
        /* LayerNormed rows: a relative L2 change of a few 1e-3 from int8. */
        CHECK_MSG(e_diff > 0 && sqrt(e_diff / e_norm) < 0.03, "%s, %s: encoder output moved by %g (relative L2)",
                  k ? "projection" : "standard", pmt_weight_type_name(type), sqrt(e_diff / e_norm));
        double worst = 0, sum = 0, spread = 0;
        int differ = 0;
        for (int i = 0; i < N; i++) {
            worst = fmax(worst, fabs((double)f32[i] - q8[i]));
            sum += fabs((double)f32[i] - q8[i]);
            spread = fmax(spread, fabs((double)f32[i] - f32[i - i % VOCAB]));
            differ |= f32[i] != q8[i];
        }
        /* Each int8 product is within ~1/127 of its fp32 value (test_kernel); over
         * 2+2 layers the log-probabilities (spread ~4 nats here) move by ~0.01 on
         * average, a few times that at worst. */
        CHECK_MSG(spread > 2 && sum / N < 0.02 && worst < 0.1,
                  "%s, %s: log-probabilities differ from fp32 by %g on average, %g at worst (spread %g)",
                  k ? "projection" : "standard", pmt_weight_type_name(type), sum / N, worst, spread);
        CHECK_MSG(differ, "%s decoding gave exactly the fp32 log-probabilities: was it used?",
                  pmt_weight_type_name(type));
        CHECK(memcmp(q8, q8_again, sizeof q8) == 0);
    }
}

/* A visited decoder step (the search's form) hands over, for every live
 * row in slot order, the logits and normaliser that a stored step keeps:
 * the same bits, with the weights in fp32 (rows visited after the
 * product) and in int8 (inside its epilogue). */
static void test_decoder_visit(int weights) {
    char err[256];
    const int standard[PMT_SITES] = {0, 0, 0};
    pmt_model m;
    pmt_decoder stored, visited;
    make_decoder(&m, &stored, 1, standard, weights);
    CHECK_MSG(pmt_decoder_init(&visited, &m, SENT, BEAM, err, sizeof err) == 0, "%s", err);
    static float seen[SENT * BEAM * VOCAB];
    row_collector col = {seen, visited.lse, VOCAB, 0, 1};
    visited.visit = collect_row;
    visited.visit_ctx = &col;
    const int32_t src[SENT * S] = {5, 6, 7, 8, 3, 9, 10, 11, 3, 0}, src_len[SENT] = {5, 4};
    CHECK_MSG(pmt_decoder_start(&stored, src, src_len, SENT, S, BEAM, 10, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(pmt_decoder_start(&visited, src, src_len, SENT, S, BEAM, 10, err, sizeof err) == 0, "%s", err);
    int32_t tok[SENT * BEAM] = {2, 2, 2, 2};
    const int32_t live[SENT] = {2, 1};   /* row 3 is not live: 3 slots */
    for (int t = 0; t < 3; t++) {
        col.calls = 0;
        CHECK(pmt_decoder_step_live(&stored, tok, live) != NULL);
        CHECK(pmt_decoder_step_live(&visited, tok, live) != NULL);
        CHECK_MSG(col.calls == 3 && col.in_order, "%s step %d: %d rows visited (want 3)",
                  pmt_weight_type_name(weights), t, col.calls);
        for (int r = 0; r < 3; r++) {
            const int slot = stored.logit_slot[r];
            CHECK(slot == visited.logit_slot[r]);
            CHECK_MSG(memcmp(seen + (size_t)slot * VOCAB, pmt_decoder_logits_row(&stored, r), sizeof(float) * VOCAB) == 0 &&
                          stored.lse[slot] == visited.lse[slot],
                      "%s step %d row %d: visited logits or normaliser differ from the stored ones",
                      pmt_weight_type_name(weights), t, r);
        }
        for (int r = 0; r < SENT * BEAM; r++) tok[r] = 4 + (t * 7 + r * 3) % (VOCAB - 4);
    }
    pmt_decoder_free(&visited);
    pmt_decoder_free(&stored);
    pmt_model_free(&m);
}

/* A decoder sharing another's low-precision weights
 * (pmt_decoder_init_sharing, the search's lanes) gives the same logits and
 * normalisers, step by step; sharing is refused across models. */
static void test_decoder_sharing(int weights) {
    char err[256];
    const int standard[PMT_SITES] = {0, 0, 0};
    pmt_model m, other;
    pmt_decoder base, shared, refused;
    make_decoder(&m, &base, 1, standard, weights);
    CHECK_MSG(pmt_decoder_init_sharing(&shared, &m, SENT, BEAM, &base, err, sizeof err) == 0, "%s", err);
    make_decoder(&other, &refused, 1, standard, weights);
    pmt_decoder_free(&refused);
    CHECK(pmt_decoder_init_sharing(&refused, &other, SENT, BEAM, &base, err, sizeof err) == -1 &&
          strstr(err, "same model") != NULL);
    const int32_t src[SENT * S] = {5, 6, 7, 8, 3, 9, 10, 11, 3, 0}, src_len[SENT] = {5, 4};
    CHECK_MSG(pmt_decoder_start(&base, src, src_len, SENT, S, BEAM, 10, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(pmt_decoder_start(&shared, src, src_len, SENT, S, BEAM, 10, err, sizeof err) == 0, "%s", err);
    int32_t tok[SENT * BEAM] = {2, 2, 2, 2};
    for (int t = 0; t < 3; t++) {
        const float *a = pmt_decoder_step(&base, tok), *b = pmt_decoder_step(&shared, tok);
        CHECK(a && b);
        if (!a || !b) break;
        CHECK_MSG(memcmp(a, b, sizeof(float) * SENT * BEAM * VOCAB) == 0 &&
                      memcmp(base.lse, shared.lse, sizeof(float) * SENT * BEAM) == 0,
                  "%s step %d: the sharing decoder's logits differ", pmt_weight_type_name(weights), t);
        for (int r = 0; r < SENT * BEAM; r++) tok[r] = 4 + (t * 5 + r * 3) % (VOCAB - 4);
    }
    pmt_decoder_free(&shared);
    pmt_decoder_free(&base);
    pmt_model_free(&other);
    pmt_model_free(&m);
}

/* A decoder whose products fail (oneDNN refusing a shape): start and step
 * return the error instead of aborting, and the same decoder decodes the
 * next batch once the products run again (serve answers 500, then goes on). */
static void test_decoder_failure(void) {
    char err[512];
    const int standard[PMT_SITES] = {0, 0, 0};
    pmt_model m;
    pmt_decoder d;
    make_decoder(&m, &d, 1, standard, PMT_WEIGHTS_INT8);
    const int32_t src[SENT * S] = {5, 6, 7, 8, 3, 9, 10, 11, 3, 0}, src_len[SENT] = {5, 4};
    int32_t tok[SENT * BEAM] = {2, 2, 2, 2};
    pmt_lowp_set_test_hook(PMT_LOWP_HOOK_FAIL, SENT * S);   /* the encoder's 10 rows fail */
    CHECK(pmt_decoder_start(&d, src, src_len, SENT, S, BEAM, 10, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "encoder") && strstr(err, "oneDNN cannot"), "message: %s", err);
    CHECK(pmt_gemm_take_error(err, sizeof err) == 0);   /* taken by the start */
    pmt_lowp_set_test_hook(PMT_LOWP_HOOK_OFF, 0);
    CHECK_MSG(pmt_decoder_start(&d, src, src_len, SENT, S, BEAM, 10, err, sizeof err) == 0, "%s", err);
    pmt_lowp_set_test_hook(PMT_LOWP_HOOK_FAIL, SENT * BEAM);   /* the steps' 4 rows fail */
    CHECK(pmt_decoder_step(&d, tok) == NULL);
    CHECK_MSG(strstr(d.error, "decoder step 0") && strstr(d.error, "oneDNN cannot"), "message: %s", d.error);
    CHECK(pmt_gemm_take_error(err, sizeof err) == 0);   /* taken by the step, not left for the next caller */
    pmt_lowp_set_test_hook(PMT_LOWP_HOOK_OFF, 0);
    CHECK_MSG(pmt_decoder_start(&d, src, src_len, SENT, S, BEAM, 10, err, sizeof err) == 0, "%s", err);
    const float *logits = pmt_decoder_step(&d, tok);
    CHECK(logits != NULL && isfinite(logits[0]));
    pmt_decoder_free(&d);
    pmt_model_free(&m);
}

int main(void) {
    printf("CPU (oneDNN's effective ISA): %s; %s\n", pmt_cpu_isa_name(), pmt_int8_path_name());
    test_quantize_rounding();
    test_kernel();
    test_packed_int8();
    test_shared_int8_threads();
    test_int8_rows();
    test_decoder(0);
    test_decoder_visit(PMT_WEIGHTS_FP32);
    test_decoder_visit(PMT_WEIGHTS_INT8);
    test_decoder_sharing(PMT_WEIGHTS_INT8);
    test_decoder_failure();
    if (!pmt_cpu_has_bf16()) {   /* the int8 parts ran: report them, then skip */
        const int rc = test_finish();
        if (rc != 0) return rc;
        test_skip("bf16 kernel and decoder not tested: this CPU (as oneDNN sees it) has no native bf16");
    }
    test_bf16_kernel();
    test_decoder(1);
    test_decoder_sharing(PMT_WEIGHTS_BF16);
    return test_finish();
}
