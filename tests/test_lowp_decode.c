/*
 * test_lowp_decode.c — int8 and bf16 decoding (nn/gemm_lowp.h, the
 * decoder's low-precision steps): the int8 and bf16 linear layers stay
 * within the error bounds their roundings allow, against a double-precision
 * product of the same weights;
 * requantising dequantised int8 weights gives back the same integers (why
 * the decoder may requantise what an int8 file loaded); int8 and bf16
 * decoders' log-probabilities stay close to the fp32 decoder's over several
 * steps with both attention forms, and repeat exactly from run to run;
 * the packed int8 matmul (the decoder's) gives the bits of the per-call
 * integer GEMM for row counts on and off its multiples of 8, reusing its
 * primitives, and with bias or without; the encoder runs in the decoder's
 * precision too (its output moves off the fp32 one, within the roundings).
 * The bf16 half needs a CPU with avx512_bf16 and says so when skipped.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "model/model_file.h"
#include "nn/gemm_lowp.h"
#include "nn/ops.h"
#include "testutil.h"
#include "translate/decoder.h"

static void test_kernel(void) {
    enum { N = 5, IN = 70, OUT = 33 };
    static float x[N * IN], w[OUT * IN], wd[OUT * IN], b[OUT], out[N * OUT], w_scale[OUT];
    static int8_t wq[OUT * IN], xq[N * IN];
    static float x_scale[N];
    static int32_t acc[N * OUT];
    pmt_rng r = {4};
    for (int i = 0; i < N * IN; i++) x[i] = (float)pmt_rng_normal(&r) * (i % 7 == 0 ? 4.0f : 1.0f);
    for (int i = 0; i < IN; i++) x[3 * IN + i] = 0.0f;   /* an all-zero input row */
    for (int i = 0; i < OUT * IN; i++) w[i] = (float)pmt_rng_normal(&r) * 0.1f;
    for (int o = 0; o < OUT; o++) b[o] = (float)o * 0.01f;
    pmt_int8_quantize_rows(wq, w_scale, w, OUT, IN);
    pmt_int8_dequantize_rows(wd, wq, w_scale, OUT, IN);
    pmt_int8_scratch s = {xq, x_scale, acc};
    linear_forward_int8(out, x, wq, w_scale, b, N, IN, OUT, &s);
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
}

static void test_packed_int8(void) {
    enum { IN = 48, OUT = 37, MAX_ROWS = 21 };   /* 21 rows: primitives of 8, 16 and 24 */
    static float x[MAX_ROWS * IN], w[OUT * IN], b[OUT], w_scale[OUT], plain[MAX_ROWS * OUT], packed[(MAX_ROWS + 1) * OUT];
    static int8_t wq[OUT * IN], xq[24 * IN], xq2[24 * IN];
    static float x_scale[24], x_scale2[24];
    static int32_t acc[24 * OUT], acc2[24 * OUT];
    char err[256];
    pmt_rng r = {9};
    for (int i = 0; i < MAX_ROWS * IN; i++) x[i] = (float)pmt_rng_normal(&r);
    for (int i = 0; i < OUT * IN; i++) w[i] = (float)pmt_rng_normal(&r) * 0.1f;
    for (int o = 0; o < OUT; o++) b[o] = (float)o * 0.03f - 0.5f;
    pmt_int8_quantize_rows(wq, w_scale, w, OUT, IN);
    CHECK(pmt_int8_matmul_rows(1) == 8 && pmt_int8_matmul_rows(8) == 8 && pmt_int8_matmul_rows(21) == 24);
    pmt_int8_matmul *mm = pmt_int8_matmul_init(wq, IN, OUT, MAX_ROWS, err, sizeof err);
    CHECK_MSG(mm != NULL, "%s", err);
    if (!mm) return;
    pmt_int8_scratch s = {xq, x_scale, acc}, s2 = {xq2, x_scale2, acc2};   /* own scratch: no stale rows shared */
    static const int rows[] = {1, 7, 8, 9, 16, 21, 3, 21};
    for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
        const float *bias = k % 2 ? b : NULL;
        linear_forward_int8(plain, x, wq, w_scale, bias, rows[k], IN, OUT, &s);
        memset(packed, 0xff, sizeof packed);
        memset(acc2, 0x5a, sizeof acc2);
        linear_forward_int8_packed(packed, x, mm, w_scale, bias, rows[k], &s2);
        CHECK_MSG(memcmp(plain, packed, sizeof(float) * rows[k] * OUT) == 0, "packed int8 differs at %d rows", rows[k]);
        CHECK_MSG(((uint32_t *)packed)[rows[k] * OUT] == 0xffffffffu, "packed int8 wrote past row %d", rows[k]);
    }
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
            linear_forward_bf16(out, x, mm, with_bias ? b : NULL, n, xs, pad);
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
            linear_forward_bf16(out, x, mm, with_bias ? b : NULL, N, xs, pad);
            int same = 1;
#pragma omp parallel for num_threads(2) reduction(& : same)
            for (int th = 0; th < 2; th++)
                for (int rep = 0; rep < 200; rep++) {
                    linear_forward_bf16(par[th], x, th ? mm2 : mm, with_bias ? b : NULL, N, pxs[th], th ? pad2 : pad);
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

/* logp as above; enc [SENT*S, DM]: the encoder output the decoder started from. */
static void run_decoder(const int kinds[PMT_SITES], int weights, float *logp, float *enc) {
    pmt_config cfg;
    char err[256];
    pmt_config_defaults(&cfg);
    cfg.d_model = DM;
    cfg.n_heads = 4;
    cfg.d_ff = 64;
    cfg.enc_layers = 2;
    cfg.dec_layers = 2;
    cfg.max_len = 16;
    for (int i = 0; i < PMT_SITES; i++) cfg.site_kind[i] = kinds[i];
    pmt_model m;
    CHECK(pmt_model_init(&m, &cfg, VOCAB, 64, 16, err, sizeof err) == 0);
    pmt_model_init_params(&m, 11);
    m.decode_weights = weights;
    pmt_decoder d;
    CHECK_MSG(pmt_decoder_init(&d, &m, SENT, BEAM, err, sizeof err) == 0, "%s", err);
    const int32_t src[SENT * S] = {5, 6, 7, 8, 3, 9, 10, 11, 3, 0}, src_len[SENT] = {5, 4};
    CHECK_MSG(pmt_decoder_start(&d, src, src_len, SENT, S, BEAM, 10, err, sizeof err) == 0, "%s", err);
    memcpy(enc, d.enc_out, sizeof(float) * SENT * S * DM);
    int32_t tok[SENT * BEAM] = {2, 2, 2, 2};
    for (int t = 0; t < STEPS; t++) {
        pmt_decoder_step(&d, tok);
        for (int r = 0; r < SENT * BEAM; r++)
            for (int v = 0; v < VOCAB; v++) logp[(t * SENT * BEAM + r) * VOCAB + v] = (float)pmt_decoder_logprob(&d, r, v);
        for (int r = 0; r < SENT * BEAM; r++) tok[r] = 4 + (t * 7 + r * 3) % (VOCAB - 4);
    }
    pmt_decoder_free(&d);
    pmt_model_free(&m);
}

static void test_decoder(void) {
    enum { N = STEPS * SENT * BEAM * VOCAB };
    static float f32[N], q8[N], q8_again[N], enc32[SENT * S * DM], enc8[SENT * S * DM];
    const int forms[2][PMT_SITES] = {{0, 0, 0}, {1, 1, 1}};
    const int types[2] = {PMT_WEIGHTS_INT8, PMT_WEIGHTS_BF16};
    for (int j = 0; j < 4; j++) {
        const int k = j % 2, type = types[j / 2];
        if (type == PMT_WEIGHTS_BF16 && !pmt_cpu_has_bf16()) continue;
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

int main(void) {
    test_kernel();
    test_packed_int8();
    if (pmt_cpu_has_bf16()) test_bf16_kernel();
    else printf("SKIPPED (part): bf16 kernel and decoder: this CPU has no avx512_bf16\n");
    test_decoder();
    return test_finish();
}
