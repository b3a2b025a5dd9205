/*
 * ops_basic.c — the non-attention layers of ops.h: embedding, positional
 * table, LayerNorm, linear, ReLU, residual and dropout.
 *
 * Why the structure looks like this:
 *   - Row-wise work (one token per row) is parallel over rows with OpenMP.
 *   - Reductions across rows (bias gradients, the embedding scatter) are
 *     parallel over COLUMN blocks instead: each gradient element is then
 *     summed by one thread in row order, so results are race-free and
 *     bit-identical for any thread count. The LayerNorm weight gradients
 *     are summed in the row pass itself, into per-chunk partials (see
 *     layernorm_backward), with the same guarantee.
 *   - GEMMs go through nn/gemm.h (oneDNN or OpenBLAS, on our thread pool); backward
 *     calls use beta = 1 so gradients accumulate as ops.h requires.
 */
#include "nn/ops.h"
#include "nn/ops_internal.h"
#include "nn/gemm.h"
#include "nn/profile.h"

#include <math.h>
#include <string.h>

/* ---- embedding ---- */

/* out [B*T, C], ids [B*T], wte [V, C], pos [Tmax, C]. */
void embedding_forward(float *out, const int32_t *ids, const float *wte, const float *pos,
                       int B, int T, int C, float scale) {
    const long N = (long)B * T;
#pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN)
    for (long n = 0; n < N; n++) {
        const float *w = wte + (size_t)ids[n] * C;
        const float *p = pos + (size_t)(n % T) * C;
        float *o = out + (size_t)n * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = w[c] * scale + p[c];
    }
}

/* dwte [V, C] += scale * dout [B*T, C] scattered by ids. Repeated ids make
 * this a scatter-add, so threads split the columns, never the tokens: every
 * dwte element is then written by one thread, in token order. */
void embedding_backward(float *dwte, const float *dout, const int32_t *ids,
                        int B, int T, int C, float scale) {
    const long N = (long)B * T;
    const int nblk = (C + OPS_COL_BLOCK - 1) / OPS_COL_BLOCK;
#pragma omp parallel for schedule(static) if (N * C > OPS_PAR_MIN)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * OPS_COL_BLOCK;
        const int c1 = c0 + OPS_COL_BLOCK < C ? c0 + OPS_COL_BLOCK : C;
        for (long n = 0; n < N; n++) {
            float *g = dwte + (size_t)ids[n] * C;
            const float *d = dout + (size_t)n * C;
#pragma omp simd
            for (int c = c0; c < c1; c++) g[c] += scale * d[c];
        }
    }
}

/* pos [Tmax, C]; computed in double so the table is exact to fp32 rounding
 * even for large t, where t·freq loses digits in single precision. */
void positional_table_init(float *pos, int Tmax, int C) {
    for (int t = 0; t < Tmax; t++) {
        for (int i = 0; 2 * i < C; i++) {
            double angle = t / pow(10000.0, (2.0 * i) / C);
            pos[(size_t)t * C + 2 * i] = (float)sin(angle);
            if (2 * i + 1 < C) pos[(size_t)t * C + 2 * i + 1] = (float)cos(angle);
        }
    }
}

/* ---- layernorm ---- */

#define LN_EPS 1e-5

/* out [N, C], mean [N], rstd [N], inp [N, C], w [C], b [C].
 * Two-pass mean/variance in double: the one-pass E[x²]−E[x]² form cancels
 * badly for rows with a large mean. Biased variance, as PyTorch. */
void layernorm_forward_lp(float *out, uint16_t *out16, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int N, int C) {
#pragma omp parallel for schedule(static) if ((long)N * C > OPS_PAR_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int c = 0; c < C; c++) s += x[c];
        const double m = s / C;
        double v = 0.0;
#pragma omp simd reduction(+ : v)
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        const float rs = (float)(1.0 / sqrt(v / C + LN_EPS));
        const float mf = (float)m;
        float *o = out + (size_t)n * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = (x[c] - mf) * rs * w[c] + b[c];
        if (out16) pmt_bf16_convert_row(out16 + (size_t)n * C, o, C, 1.0f);
        mean[n] = mf;
        rstd[n] = rs;
    }
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *w, const float *b, int N, int C) {
    layernorm_forward_lp(out, NULL, mean, rstd, inp, w, b, N, C);
}

/* Row chunks of the LayerNorm backward: a fixed count, so the rows each
 * partial sum covers depend on N only — never on the thread count. */
#define LN_BWD_CHUNKS 64

size_t layernorm_backward_scratch_floats(int C) { return (size_t)LN_BWD_CHUNKS * 2 * (size_t)C; }

/* dinp [N, C] += ..., dw [C] += Σ_n dout·x̂, db [C] += Σ_n dout, in ONE pass
 * over the rows (llm.c's fused form): each row's x̂ and dout are in
 * registers for dinp anyway, so the weight gradients are summed there too,
 * instead of a second column-blocked pass reading inp and dout again.
 * The rows are cut into at most LN_BWD_CHUNKS contiguous chunks (as a
 * function of N), each summing its rows in fp32 into its own slice of
 * scratch [LN_BWD_CHUNKS, 2, C] — threads never share a partial, so no
 * atomics — and the chunk partials are added in chunk order in double. The
 * result is the same for any thread count and schedule, so a resumed run
 * repeats a step bit for bit. */
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, const float *mean,
                        const float *rstd, int N, int C, float *scratch) {
    if (N <= 0) return;
    const int nchunk = N < LN_BWD_CHUNKS ? N : LN_BWD_CHUNKS;
#pragma omp parallel for schedule(static) if ((long)N * C > OPS_PAR_MIN)
    for (int k = 0; k < nchunk; k++) {
        const int n0 = (int)((long)N * k / nchunk), n1 = (int)((long)N * (k + 1) / nchunk);
        float *pw = scratch + (size_t)k * 2 * C, *pb = pw + C;
        memset(pw, 0, sizeof(float) * 2 * (size_t)C);
        for (int n = n0; n < n1; n++) {
            const float *x = inp + (size_t)n * C;
            const float *d = dout + (size_t)n * C;
            const float m = mean[n], rs = rstd[n];
            double sum_dn = 0.0, sum_dn_xh = 0.0;
#pragma omp simd reduction(+ : sum_dn, sum_dn_xh)
            for (int c = 0; c < C; c++) {
                const float dn = w[c] * d[c];
                sum_dn += dn;
                sum_dn_xh += dn * ((x[c] - m) * rs);
            }
            const float mean_dn = (float)(sum_dn / C), mean_dn_xh = (float)(sum_dn_xh / C);
            float *g = dinp + (size_t)n * C;
#pragma omp simd
            for (int c = 0; c < C; c++) {
                const float xh = (x[c] - m) * rs;
                g[c] += (w[c] * d[c] - mean_dn - xh * mean_dn_xh) * rs;
                pw[c] += d[c] * xh;
                pb[c] += d[c];
            }
        }
    }
    for (int c = 0; c < C; c++) {
        double aw = 0.0, ab = 0.0;
        for (int k = 0; k < nchunk; k++) {
            aw += scratch[(size_t)k * 2 * C + c];
            ab += scratch[(size_t)k * 2 * C + C + c];
        }
        dw[c] += (float)aw;
        db[c] += (float)ab;
    }
}

/* ---- linear ---- */

/* The product flags of a layer's weight operand (nn/gemm.h). */
static int w_flags(const linear_bf16 *lp) { return lp && lp->w && lp->w_fixed ? PMT_LP_B_FIXED : 0; }

/* The A operand of a forward product: in bf16 with an inp16 slot, inp is
 * rounded into the slot here, where backward's weight-gradient product
 * finds it. */
static const uint16_t *forward_input16(const float *inp, int N, int IN, const linear_bf16 *lp) {
    if (!lp || !lp->inp || pmt_gemm_precision() != PMT_PRECISION_BF16) return NULL;
    if (!lp->inp_rounded) {
        const double t0 = pmt_profile_begin();
        pmt_bf16_convert(lp->inp, inp, N, IN, IN, 1.0f);
        pmt_profile_end(PMT_PHASE_CONVERT, t0);
    }
    return lp->inp;
}

/* out [N, OUT] = inp [N, IN] · w [OUT, IN]ᵀ + b [OUT]. The bias is broadcast
 * into out first and sgemm adds onto it (beta = 1): one pass over out; in
 * bf16 with both copies at hand the bias is the product's epilogue (no
 * pass, and the product does not read out). */
void linear_forward_lp(float *out, const float *inp, const float *w, const float *b, int N, int IN, int OUT,
                       const linear_bf16 *lp) {
    if (N <= 0 || OUT <= 0) return;
    const uint16_t *inp16 = forward_input16(inp, N, IN, lp);
    if (inp16 && lp->w && IN > 0) {   /* bf16 with both copies: the bias in the product's epilogue */
        pmt_gemm_bf16_bias(w_flags(lp), 0, 1, N, OUT, IN, inp16, lp->w, b, out, OUT);
        return;
    }
    float beta = 0.0f;
    if (b) {
#pragma omp parallel for schedule(static) if ((long)N * OUT > OPS_PAR_MIN)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OUT, b, sizeof(float) * OUT);
        beta = 1.0f;
    }
    pmt_sgemm_lp(w_flags(lp), 0, 1, N, OUT, IN, 1.0f, inp, inp16, IN, w, lp ? lp->w : NULL, IN, beta, out, OUT);
}

void linear_forward(float *out, const float *inp, const float *w, const float *b, int N, int IN, int OUT) {
    linear_forward_lp(out, inp, w, b, N, IN, OUT, NULL);
}

/* out [N, OUT] = max(inp · wᵀ + b, 0): the GEMM writes (beta = 0) and one
 * pass adds the bias and applies the ReLU, instead of a bias broadcast
 * before the GEMM and a ReLU pass after it (two passes over [N, OUT]); the
 * same pass rounds the row for out16. */
void linear_relu_forward_lp(float *out, uint16_t *out16, const float *inp, const float *w, const float *b, int N,
                            int IN, int OUT, const linear_bf16 *lp) {
    if (N <= 0 || OUT <= 0) return;
    pmt_sgemm_lp(w_flags(lp), 0, 1, N, OUT, IN, 1.0f, inp, forward_input16(inp, N, IN, lp), IN, w,
                 lp ? lp->w : NULL, IN,
                 0.0f, out, OUT);
#pragma omp parallel for schedule(static) if ((long)N * OUT > OPS_PAR_MIN)
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * OUT;
#pragma omp simd
        for (int j = 0; j < OUT; j++) {
            const float x = o[j] + b[j];
            o[j] = x > 0.0f ? x : 0.0f;
        }
        if (out16) pmt_bf16_convert_row(out16 + (size_t)n * OUT, o, OUT, 1.0f);
    }
}

void linear_relu_forward_bf16(uint16_t *out16, const uint16_t *inp16, const uint16_t *w16, int w_fixed,
                              const float *b, int N, int IN, int OUT) {
    pmt_gemm_bf16_out(w_fixed ? PMT_LP_B_FIXED : 0, 0, 1, N, OUT, IN, inp16, w16, b, 1, out16, OUT);
}

void linear_relu_forward(float *out, const float *inp, const float *w, const float *b, int N, int IN, int OUT) {
    linear_relu_forward_lp(out, NULL, inp, w, b, N, IN, OUT, NULL);
}

/* dout is the A of both products (stored [N, OUT] either way): without a
 * dout16 its bf16 conversion by the first serves the second (same_a) — only
 * when the first ran, or the workspace could hold an earlier matrix that
 * lived at the same address. The input slot holds bf16(inp) from the
 * forward pass. */
void linear_backward_lp(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                        int N, int IN, int OUT, float dinp_beta, float alpha, const linear_bf16 *lp) {
    if (N <= 0 || IN <= 0) return;
    if (OUT <= 0) {
        if (dinp && dinp_beta == 0.0f) memset(dinp, 0, sizeof(float) * (size_t)N * IN);
        return;
    }
    const int bf16 = lp && pmt_gemm_precision() == PMT_PRECISION_BF16;
    const uint16_t *dout16 = bf16 ? lp->dout : NULL, *w16 = bf16 ? lp->w : NULL, *inp16 = bf16 ? lp->inp : NULL;
    if (dinp) pmt_sgemm_lp(w_flags(lp), 0, 0, N, IN, OUT, alpha, dout, dout16, OUT, w, w16, IN, dinp_beta, dinp, IN);
    pmt_sgemm_lp(dinp ? PMT_LP_SAME_A : 0, 1, 0, OUT, IN, N, alpha, dout, dout16, OUT, inp, inp16, IN, 1.0f, dw, IN);
    if (!db) return;
    const int nblk = (OUT + OPS_COL_BLOCK - 1) / OPS_COL_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * OUT > OPS_PAR_MIN)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * OPS_COL_BLOCK;
        const int w_ = (c0 + OPS_COL_BLOCK < OUT ? OPS_COL_BLOCK : OUT - c0);
        double acc[OPS_COL_BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * OUT + c0;
#pragma omp simd
            for (int i = 0; i < w_; i++) acc[i] += d[i];
        }
        for (int i = 0; i < w_; i++) db[c0 + i] += alpha * (float)acc[i];
    }
}

void linear_backward(float *dinp, float *dw, float *db, const float *dout,
                     const float *inp, const float *w, int N, int IN, int OUT) {
    linear_backward_lp(dinp, dw, db, dout, inp, w, N, IN, OUT, 1.0f, 1.0f, NULL);
}

void linear_backward_set(float *dinp, float *dw, float *db, const float *dout,
                         const float *inp, const float *w, int N, int IN, int OUT) {
    linear_backward_lp(dinp, dw, db, dout, inp, w, N, IN, OUT, 0.0f, 1.0f, NULL);
}

void linear_backward_scaled_set(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                                const float *w, int N, int IN, int OUT, float alpha) {
    linear_backward_lp(dinp, dw, db, dout, inp, w, N, IN, OUT, 0.0f, alpha, NULL);
}

/* ---- relu ---- */

void relu_forward(float *out, const float *inp, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

/* The saved output decides the gate: out > 0 exactly where inp > 0. */
void relu_backward(float *dinp, const float *dout, const float *out, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) dinp[i] += out[i] > 0.0f ? dout[i] : 0.0f;
}

/* In place: d = out > 0 ? d : 0 (relu_backward into a zeroed buffer). */
void relu_backward_inplace(float *d, const float *out, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) d[i] = out[i] > 0.0f ? d[i] : 0.0f;
}

/* The element-wise kernels that also round their output work in chunks
 * small enough to be rounded from L1 right after they are written. */
#define ROUND_CHUNK 2048

size_t relu_backward_bias_scratch_floats(int OUT) { return (size_t)LN_BWD_CHUNKS * (size_t)OUT; }

/* As layernorm_backward's weight gradients: row chunks as a function of N,
 * fp32 partials per chunk in scratch, added in chunk order in double. */
void relu_backward_bias_lp16(float *d, uint16_t *d16, float *db, const uint16_t *out16, int N, int OUT,
                             float *scratch) {
    if (N <= 0 || OUT <= 0) return;
    const int nchunk = N < LN_BWD_CHUNKS ? N : LN_BWD_CHUNKS;
#pragma omp parallel for schedule(static) if ((long)N * OUT > OPS_PAR_MIN)
    for (int k = 0; k < nchunk; k++) {
        const int n0 = (int)((long)N * k / nchunk), n1 = (int)((long)N * (k + 1) / nchunk);
        float *pb = scratch + (size_t)k * OUT;
        memset(pb, 0, sizeof(float) * (size_t)OUT);
        for (int n = n0; n < n1; n++) {
            float *dr = d + (size_t)n * OUT;
            const uint16_t *o = out16 + (size_t)n * OUT;
#pragma omp simd
            for (int j = 0; j < OUT; j++) {
                const float x = (int16_t)o[j] > 0 ? dr[j] : 0.0f;
                dr[j] = x;
                pb[j] += x;
            }
            pmt_bf16_convert_row(d16 + (size_t)n * OUT, dr, OUT, 1.0f);
        }
    }
#pragma omp parallel for schedule(static) if ((long)nchunk * OUT > OPS_PAR_MIN)
    for (int j = 0; j < OUT; j++) {
        double acc = 0.0;
        for (int k = 0; k < nchunk; k++) acc += scratch[(size_t)k * OUT + j];
        db[j] += (float)acc;
    }
}

/* ---- residual ---- */

void residual_forward(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* da and db may be the same buffer (out = x + x): two separate passes keep
 * the read-after-write order explicit instead of relying on the vectoriser. */
void residual_backward(float *da, float *db, const float *dout, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) da[i] += dout[i];
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) db[i] += dout[i];
}

/* ---- dropout ---- */

/* splitmix64's finaliser: a bijective avalanche mix, so distinct inputs give
 * independent-looking outputs. */
static inline uint64_t mix64(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15ull

/* Counter-based: mask[i] is a pure function of (seed, stream, i) — element
 * i of the splitmix64 sequence keyed by (seed, stream) — so the mask is the
 * same for any thread count and any chunking, and a resumed run (or the
 * backward pass) can regenerate it instead of storing it. The top 24 bits
 * are compared with p·2^24 in integers. */
typedef struct dropout_stream_t {
    uint64_t key, thr;
    float keep;
} dropout_stream_t;

static dropout_stream_t dropout_stream_init(float p, uint64_t seed, uint64_t stream) {
    dropout_stream_t d;
    d.key = mix64(seed + GOLDEN_GAMMA * (mix64(stream + GOLDEN_GAMMA) | 1u));
    if (!(p > 0.0f)) { d.thr = 0; d.keep = 1.0f; }
    else if (p >= 1.0f) { d.thr = 1ull << 24; d.keep = 0.0f; }
    else { d.thr = (uint64_t)((double)p * 16777216.0); d.keep = (float)(1.0 / (1.0 - (double)p)); }
    return d;
}

/* mask[i]: 0 or 1/(1-p). */
static inline float dropout_mask_at(const dropout_stream_t *d, size_t i) {
    const uint64_t u = mix64(d->key + GOLDEN_GAMMA * (uint64_t)(i + 1)) >> 40;
    return u < d->thr ? 0.0f : d->keep;
}

void dropout_mask_fill(float *mask, size_t n, float p, uint64_t seed, uint64_t stream) {
    const dropout_stream_t d = dropout_stream_init(p, seed, stream);
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) mask[i] = dropout_mask_at(&d, i);
}

/* out = a + sub ⊙ mask in one pass, the mask regenerated (never stored);
 * out may alias a or sub. p <= 0 is a plain residual add. */
void dropout_residual_forward(float *out, const float *a, const float *sub, size_t n, float p,
                              uint64_t seed, uint64_t stream) {
    if (!(p > 0.0f)) {
        residual_forward(out, a, sub, n);
        return;
    }
    const dropout_stream_t d = dropout_stream_init(p, seed, stream);
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + sub[i] * dropout_mask_at(&d, i);
}

/* x = x ⊙ mask in place, the mask regenerated (the embedding dropout). */
void dropout_inplace_forward(float *x, size_t n, float p, uint64_t seed, uint64_t stream) {
    if (!(p > 0.0f)) return;
    const dropout_stream_t d = dropout_stream_init(p, seed, stream);
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] *= dropout_mask_at(&d, i);
}

/* dinp = dout ⊙ mask (SET), the mask of (p, seed, stream) regenerated. */
void dropout_regen_backward_set(float *dinp, const float *dout, size_t n, float p, uint64_t seed,
                                uint64_t stream) {
    const dropout_stream_t d = dropout_stream_init(p, seed, stream);
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) dinp[i] = dout[i] * dropout_mask_at(&d, i);
}

void dropout_regen_backward_set_lp(float *dinp, uint16_t *dinp16, const float *dout, size_t n, float p,
                                   uint64_t seed, uint64_t stream) {
    const dropout_stream_t d = dropout_stream_init(p, seed, stream);
    const long chunks = (long)((n + ROUND_CHUNK - 1) / ROUND_CHUNK);
#pragma omp parallel for schedule(static) if (n > OPS_PAR_MIN)
    for (long k = 0; k < chunks; k++) {
        const size_t lo = (size_t)k * ROUND_CHUNK, hi = lo + ROUND_CHUNK < n ? lo + ROUND_CHUNK : n;
        const dropout_stream_t dk = d;   /* a private copy: the shared one's loads stop the vectoriser */
#pragma omp simd
        for (size_t i = lo; i < hi; i++) dinp[i] = dout[i] * dropout_mask_at(&dk, i);
        pmt_bf16_convert_row(dinp16 + lo, dinp + lo, (int)(hi - lo), 1.0f);
    }
}

/* out may alias inp: the update is elementwise. */
void dropout_forward(float *out, const float *inp, const float *mask, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = inp[i] * mask[i];
}

void dropout_backward(float *dinp, const float *dout, const float *mask, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) dinp[i] += dout[i] * mask[i];
}

/* dinp = dout * mask (dropout_backward into a zeroed buffer). */
void dropout_backward_set(float *dinp, const float *dout, const float *mask, size_t n) {
#pragma omp parallel for simd schedule(static) if (n > OPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) dinp[i] = dout[i] * mask[i];
}
