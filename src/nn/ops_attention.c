/*
 * ops_attention.c — standard scaled dot-product attention and Sanger's
 * projection attention (softmax over negative Gaussian distances, values =
 * keys), forward and backward, sharing one masked softmax.
 *
 * Why a hand-written GEMM instead of sgemm: per (batch, head) the matrices
 * are tiny (T, S ~ 5–30, HS ~ 64), where a BLAS call spends more on dispatch
 * and packing than on arithmetic. Each (b, h) is one OpenMP task that works
 * on L1-resident slices with small_gemm (C += α·A·B, register-blocked 4 rows
 * × 16 columns, one AVX-512 vector); operands that are needed transposed
 * (Kᵀ, Vᵀ, dlogitsᵀ, Pᵀ) are first copied into per-thread scratch. Per-row
 * dot-product loops were several times slower: their horizontal reductions
 * and store-to-load chains on the output row dominated.
 *
 * Masks: key j of sentence b is visible to query t iff j < klen[b] and
 * (!causal || j <= t). The visible keys therefore always form a PREFIX
 * 0..nvis-1 of the row. Masked logits are -INFINITY by definition; since
 * exp(-INFINITY - max) is exactly 0 we never materialise them: the softmax
 * runs over the prefix and the masked tail of the probability row is
 * written as exact zeros. A row with nvis = 0 gets all-zero weights (and so
 * zero output and zero gradient), never 0/0 = NaN.
 *
 * Aliasing: self-attention passes column blocks of one buffer for q, k, v
 * (the fused Q|K|V projection; projection attention the same pointer for q
 * and k) and likewise for their gradients. Every (b, h) touches only its own
 * column slice of sentence b's rows, so tasks never overlap; within a task gradients are
 * only ever accumulated (read-modify-write of the gradient itself, never
 * used as an operand), one gradient update after another.
 */
#include "nn/ops.h"
#include "nn/ops_internal.h"

#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- per-thread scratch ----
 * Each (b, h) task needs transposed copies and a [T, S] gradient block:
 * HS·S + 2·T·S + 2·(T + S) floats, 8.6 MB at T = S = 1024. On the stack
 * that could overflow an OpenMP worker's stack (often 2–8 MB), so it lives
 * in one heap buffer, a slice per thread, reserved once for the largest
 * shapes by the model and the decoder (attention_scratch_reserve) and only
 * checked by the kernels. It is process-wide (released at exit) and only
 * grows; kernels and the reservation are called from serial code, as every
 * ops.h kernel. */
static float *scratch_buf;
static size_t scratch_per_thread;   /* floats per thread slice */
static int scratch_threads;

/* Key columns as the score products see them: S rounded up to whole register
 * blocks (GW = 16 floats, defined below), so that their output columns never
 * fall into small_gemm's narrow tail loop (spa-eng's sentences have S < 16:
 * every score product would). The padding columns of the transposed keys
 * (and values) are zeros, and the padding scores are never read. */
#define PAD_COLS(n) (((n) + 15) / 16 * 16)

static size_t scratch_need(int T, int S, int HS) {
    const size_t t = (size_t)(T > 0 ? T : 0), k = (size_t)PAD_COLS(S > 0 ? S : 0);
    return (size_t)HS * k + 2 * t * k + 2 * (t + k) + 64;   /* + one slot per buffer for empty shapes */
}

int attention_scratch_reserve(int T, int S, int HS) {
    const size_t need = scratch_need(T, S, HS);
    const int threads = omp_get_max_threads();
    if (need <= scratch_per_thread && threads <= scratch_threads) return 0;
    const size_t per = need > scratch_per_thread ? need : scratch_per_thread;
    const int nt = threads > scratch_threads ? threads : scratch_threads;
    float *buf = malloc(per * (size_t)nt * sizeof(float));
    if (!buf) return -1;
    free(scratch_buf);
    scratch_buf = buf;
    scratch_per_thread = per;
    scratch_threads = nt;
    return 0;
}

/* Called before each parallel region. The model and the decoder reserve
 * for their max_len at init, so in training and decoding this is one
 * compare; a direct caller of the kernels (tests, tools) that did not
 * reserve gets the buffer grown here, once per larger shape or thread
 * count. Out of memory there is fatal (the kernels return nothing). */
static void scratch_check(int T, int S, int HS) {
    if (scratch_need(T, S, HS) <= scratch_per_thread && omp_get_max_threads() <= scratch_threads) return;
    if (attention_scratch_reserve(T, S, HS) == 0) return;
    fprintf(stderr, "projmt: out of memory for the attention scratch (T=%d S=%d HS=%d, %d threads)\n", T, S, HS,
            omp_get_max_threads());
    abort();
}

/* This thread's slice of the scratch buffer, by its number in the one
 * active parallel region: a kernel called inside an outer region (the
 * decoder's lanes, beam_search.c) runs in an inner team of one thread, whose
 * number is 0 on every lane, so the number is taken at the innermost level
 * whose team has several threads. */
static inline float *scratch_slice(void) {
    assert(omp_get_active_level() <= 1);
    int thread = 0;
    for (int level = omp_get_level(); level > 0; level--)
        if (omp_get_team_size(level) > 1) {
            thread = omp_get_ancestor_thread_num(level);
            break;
        }
    return scratch_buf + (size_t)thread * scratch_per_thread;
}

/* Rows shorter than this take softmax_short_row. */
enum { SHORT_ROW = 16 };

/* The softmax of a row of n < SHORT_ROW logits, as one padded block.
 * Why: the decoder's attention rows are a few keys long (a sentence's
 * source, a hypothesis's prefix), and a row shorter than a vector ran
 * entirely in the simd loops' scalar remainders, one exp polynomial per
 * key: most of the softmax time of a decoding step. Here the max and
 * ops_softmax_from_max run over a fixed block of SHORT_ROW lanes; the
 * padding keys are −∞, so they never win the max, give exp 0 (adding
 * nothing to the normaliser) and are not stored. */
static void softmax_short_row(float *row, int n) {
    float x[SHORT_ROW];
    for (int j = 0; j < SHORT_ROW; j++) x[j] = j < n ? row[j] : -INFINITY;
    float mx = x[0];
#pragma omp simd reduction(max : mx)
    for (int j = 1; j < SHORT_ROW; j++) mx = x[j] > mx ? x[j] : mx;
    ops_softmax_from_max(x, x, SHORT_ROW, mx);
    memcpy(row, x, sizeof(float) * (size_t)n);
}

/* In place over row [S]: softmax of the logits row[0..nvis-1] with the max
 * subtracted (no overflow), normaliser summed in double; row[nvis..S-1] are
 * masked and set to exactly 0; nvis == 0 gives an all-zero row. */
static void masked_softmax_row(float *row, int nvis, int S) {
    if (nvis > 0 && nvis < SHORT_ROW) {
        softmax_short_row(row, nvis);
    } else if (nvis > 0) {
        float mx = row[0];
#pragma omp simd reduction(max : mx)
        for (int j = 1; j < nvis; j++) mx = row[j] > mx ? row[j] : mx;
        ops_softmax_from_max(row, row, nvis, mx);
    }
    for (int j = nvis; j < S; j++) row[j] = 0.0f;
}

/* Softmax backward, in place over dp [nvis]: on entry dp = dL/dweights, on
 * exit dL/dlogits = p ⊙ (dp − Σ_j p_j dp_j). Masked entries are never touched
 * (their weights are 0, so their logit gradient is 0). */
static void masked_softmax_backward_row(float *dp, const float *p, int nvis) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < nvis; j++) s += p[j] * dp[j];
    const float sf = (float)s;
#pragma omp simd
    for (int j = 0; j < nvis; j++) dp[j] = p[j] * (dp[j] - sf);
}

/* Pointer to row r's head-h slice of a [rows, C] token matrix. */
#define HEAD(ptr, r, C, h, HS) ((ptr) + (size_t)(r) * (C) + (size_t)(h) * (HS))

/* Output columns per register block: one 512-bit vector of floats. */
#define GW 16

/* C[M, N] += alpha · A[M, K] · B[K, N], all row-major with leading dimensions.
 * Four rows of C are accumulated at once in four independent vector
 * accumulators (hiding FMA latency and sharing each load of B); a column
 * tail narrower than GW runs a plain loop. A and B never alias C. */
static void small_gemm(int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float *C, int ldc) {
    int n0 = 0;
    for (; n0 + GW <= N; n0 += GW) {
        int i = 0;
        for (; i + 4 <= M; i += 4) {
            float c0[GW] = {0}, c1[GW] = {0}, c2[GW] = {0}, c3[GW] = {0};
            const float *a = A + (size_t)i * lda;
            for (int k = 0; k < K; k++) {
                const float *b = B + (size_t)k * ldb + n0;
                const float x0 = a[k], x1 = a[lda + k], x2 = a[2 * lda + k], x3 = a[3 * lda + k];
#pragma omp simd
                for (int j = 0; j < GW; j++) {
                    c0[j] += x0 * b[j];
                    c1[j] += x1 * b[j];
                    c2[j] += x2 * b[j];
                    c3[j] += x3 * b[j];
                }
            }
            float *c = C + (size_t)i * ldc + n0;
#pragma omp simd
            for (int j = 0; j < GW; j++) {
                c[j] += alpha * c0[j];
                c[ldc + j] += alpha * c1[j];
                c[2 * ldc + j] += alpha * c2[j];
                c[3 * ldc + j] += alpha * c3[j];
            }
        }
        for (; i < M; i++) {
            float c0[GW] = {0};
            for (int k = 0; k < K; k++) {
                const float *b = B + (size_t)k * ldb + n0;
                const float x0 = A[(size_t)i * lda + k];
#pragma omp simd
                for (int j = 0; j < GW; j++) c0[j] += x0 * b[j];
            }
            float *c = C + (size_t)i * ldc + n0;
#pragma omp simd
            for (int j = 0; j < GW; j++) c[j] += alpha * c0[j];
        }
    }
    if (n0 == N) return;
    const int nw = N - n0;
    for (int i = 0; i < M; i++) {
        float c0[GW] = {0};
        for (int k = 0; k < K; k++) {
            const float *b = B + (size_t)k * ldb + n0;
            const float x0 = A[(size_t)i * lda + k];
            for (int j = 0; j < nw; j++) c0[j] += x0 * b[j];
        }
        float *c = C + (size_t)i * ldc + n0;
        for (int j = 0; j < nw; j++) c[j] += alpha * c0[j];
    }
}

/* dst [cols, rows] = srcᵀ for src [rows, cols] with leading dimension ld. */
static void transpose(float *dst, const float *src, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) dst[(size_t)c * rows + r] = src[(size_t)r * ld + c];
}

/* dst [cols, ldd] = srcᵀ for src [rows, cols] (leading dimension ld), its
 * columns rows..ldd-1 zero: the keys (values) as a score product's B
 * operand with whole register blocks of columns (PAD_COLS). */
static void transpose_padded(float *dst, int ldd, const float *src, int rows, int cols, int ld) {
    for (int c = 0; c < cols; c++) memset(dst + (size_t)c * ldd + rows, 0, sizeof(float) * (size_t)(ldd - rows));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) dst[(size_t)c * ldd + r] = src[(size_t)r * ld + c];
}

/* Zeroes the head-h slices of n rows starting at row r0. */
static void zero_head_rows(float *x, size_t r0, int n, int C, int h, int HS) {
    for (int r = 0; r < n; r++) memset(HEAD(x, r0 + r, C, h, HS), 0, sizeof(float) * HS);
}

/* ---- causal row blocks ----
 * Under a causal mask query t sees keys 0..t only, so the upper triangle
 * of every [T, Sv] product is masked: its scores would be overwritten by
 * the softmax and its weights and gradients are exact zeros. The causal
 * products therefore run per block of CAUSAL_ROWS query rows, each over the
 * keys its last row can see (and the key-side products of backward per
 * block of keys, over the queries that can see them) instead of over the
 * whole square. Products skip only terms that are exactly zero, so the
 * results are the bits of the full products. Without a mask a "block" is
 * all T rows. Where the keys are the output columns of a product they are
 * rounded up to a whole register block (GW) over operands padded with zero
 * columns to PAD_COLS(Sv), into a scratch of that width, so small_gemm
 * never drops to its narrow-column loop; the extra columns lie in the
 * masked part or the padding and are never read. */
#define CAUSAL_ROWS 8

/* Rows per block of a product over n query (or key) rows. */
static inline int block_rows(int causal, int n) { return causal ? CAUSAL_ROWS : (n > 0 ? n : 1); }

/* Keys visible to some row of the block ending (exclusively) at row t1. */
static inline int block_keys(int causal, int t1, int Sv) { return causal && t1 < Sv ? t1 : Sv; }

/* block_keys rounded up to a whole register block: the output columns of a
 * score product over PAD_COLS-padded operands. */
static inline int block_key_blocks(int causal, int t1, int Sv) { return PAD_COLS(block_keys(causal, t1, Sv)); }

/* First query that sees key j0 (and every later key of its block). */
static inline int first_query(int causal, int j0) { return causal ? j0 : 0; }

/* Softmax (forward) of every row of one (b, h) logits block p [T, S]. */
static void softmax_rows(float *p, int32_t klen, int causal, int T, int S) {
    for (int t = 0; t < T; t++) masked_softmax_row(p + (size_t)t * S, visible_keys(klen, causal, t, S), S);
}

/* In place over g [T, Sv] (leading dimension Sv = key_prefix) = dL/dweights
 * of one (b, h), with p [T, S] its weights: softmax backward on the visible
 * prefix of every row, exact zeros on the masked tail (the GEMM that
 * produced g does not know the mask). */
static void softmax_backward_rows(float *g, int Sv, const float *p, int S, int32_t klen, int causal, int T) {
    for (int t = 0; t < T; t++) {
        const int nvis = visible_keys(klen, causal, t, S);
        masked_softmax_backward_row(g + (size_t)t * Sv, p + (size_t)t * S, nvis);
        for (int j = nvis; j < Sv; j++) g[(size_t)t * Sv + j] = 0.0f;
    }
}

/* ---- standard attention ---- */

/* out [B*T, C], probs [B, NH, T, S], q [B*T, C], k, v [B*S, C], klen [B]. */
/* p [T, ldp] (first Sv columns) = alpha · q_h k_hᵀ by one dot product per
 * (query, key): no transposed copy of the keys. For a handful of queries
 * (the decoder: T = 1 or the beam) the Sv·HS scalar moves of the transpose
 * cost more than all the arithmetic. */
static void scores_by_dots(float *p, int ldp, const float *qh, int ldq, const float *kh, int ldk, float alpha,
                           int T, int Sv, int HS) {
    for (int t = 0; t < T; t++) {
        const float *qt = qh + (size_t)t * ldq;
        float *pt = p + (size_t)t * ldp;
        int j = 0;
        for (; j + 4 <= Sv; j += 4) {   /* four keys at a time, as cached_head */
            float s[4];
            ops_dot4(s, qt, kh + (size_t)j * ldk, kh + (size_t)(j + 1) * ldk, kh + (size_t)(j + 2) * ldk,
                     kh + (size_t)(j + 3) * ldk, HS);
            for (int i = 0; i < 4; i++) pt[j + i] = alpha * s[i];
        }
        for (; j < Sv; j++) pt[j] = alpha * ops_dot(qt, kh + (size_t)j * ldk, HS);
    }
}

static void attention_forward_impl(float *out, float *probs, const float *q, const float *k,
                                   const float *v, int ldq, int ldkv, const int32_t *klen, int causal,
                                   int B, int T, int S, int C, int NH, float scale, int dots) {
    const int HS = C / NH;
    scratch_check(T, S, HS);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const int Sv = key_prefix(klen[b], S);
            float *p = probs + ((size_t)b * NH + h) * T * S;
            const float *qh = HEAD(q, (size_t)b * T, ldq, h, HS);
            const float *kh = HEAD(k, (size_t)b * S, ldkv, h, HS);
            float *oh = HEAD(out, (size_t)b * T, C, h, HS);
            const int RB = block_rows(causal, T);
            if (dots) {
                memset(p, 0, sizeof(float) * T * S);
                scores_by_dots(p, S, qh, ldq, kh, ldkv, scale, T, Sv, HS);
                softmax_rows(p, klen[b], causal, T, S);
            } else {
                /* Scores into sc [T, Sp] over whole register blocks of keys,
                 * then the softmax from sc into p. */
                const int Sp = PAD_COLS(Sv);
                float *kT = scratch_slice(), *sc = kT + (size_t)HS * Sp;   /* [HS, Sp] [T, Sp] */
                transpose_padded(kT, Sp, kh, Sv, HS, ldkv);
                memset(sc, 0, sizeof(float) * T * Sp);
                for (int t0 = 0; t0 < T; t0 += RB) {
                    const int t1 = t0 + RB < T ? t0 + RB : T;
                    small_gemm(t1 - t0, block_key_blocks(causal, t1, Sv), HS, scale, qh + (size_t)t0 * ldq, ldq, kT,
                               Sp, sc + (size_t)t0 * Sp, Sp);
                }
                for (int t = 0; t < T; t++) {
                    const int nvis = visible_keys(klen[b], causal, t, S);
                    float *row = p + (size_t)t * S;
                    memcpy(row, sc + (size_t)t * Sp, sizeof(float) * (size_t)nvis);
                    masked_softmax_row(row, nvis, S);
                }
            }
            zero_head_rows(out, (size_t)b * T, T, C, h, HS);
            for (int t0 = 0; t0 < T; t0 += RB) {
                const int t1 = t0 + RB < T ? t0 + RB : T;
                small_gemm(t1 - t0, HS, block_keys(causal, t1, Sv), 1.0f, p + (size_t)t0 * S, S,
                           HEAD(v, (size_t)b * S, ldkv, h, HS), ldkv, oh + (size_t)t0 * C, C);
            }
        }
    }
}

/* out [B*T, C], probs [B, NH, T, S], q [B*T, ldq], k, v [B*S, ldkv], klen [B]. */
void attention_forward(float *out, float *probs, const float *q, const float *k,
                       const float *v, int ldq, int ldkv, const int32_t *klen, int causal,
                       int B, int T, int S, int C, int NH, float scale) {
    attention_forward_impl(out, probs, q, k, v, ldq, ldkv, klen, causal, B, T, S, C, NH, scale, 0);
}

void attention_forward_few_queries(float *out, float *probs, const float *q, const float *k,
                                   const float *v, int ldq, int ldkv, const int32_t *klen, int causal,
                                   int B, int T, int S, int C, int NH, float scale) {
    attention_forward_impl(out, probs, q, k, v, ldq, ldkv, klen, causal, B, T, S, C, NH, scale, 1);
}

/* dq [B*T, ldq], dk, dv [B*S, ldkv] += ... (one buffer at three column
 * offsets when q, k, v are the fused projection of self-attention).
 * Per (b, h): dP = dout vᵀ, g = softmax backward, dq += scale g k,
 * dk += scale gᵀ q, dv += Pᵀ dout. */
static void attention_backward_impl(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                                    const float *q, const float *k, const float *v, int ldq, int ldkv,
                                    const int32_t *klen, int causal, int B, int T, int S, int C, int NH, float scale,
                                    int set) {
    const int HS = C / NH;
    scratch_check(T, S, HS);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            if (set) {   /* this task's slices only, just before it accumulates into them (they stay in cache) */
                zero_head_rows(dq, (size_t)b * T, T, ldq, h, HS);
                zero_head_rows(dk, (size_t)b * S, S, ldkv, h, HS);
                zero_head_rows(dv, (size_t)b * S, S, ldkv, h, HS);
            }
            /* g is [T, Sv] here: keys beyond the prefix get no gradient. */
            const int Sv = key_prefix(klen[b], S), Sp = PAD_COLS(Sv);
            float *vT = scratch_slice(), *g = vT + (size_t)HS * Sp, *tr = g + (size_t)T * Sp;   /* [HS,Sp] [T,Sp] [Sv,T] */
            const float *p = probs + ((size_t)b * NH + h) * T * S;
            const float *qh = HEAD(q, (size_t)b * T, ldq, h, HS);
            const float *kh = HEAD(k, (size_t)b * S, ldkv, h, HS);
            const float *doh = HEAD(dout, (size_t)b * T, C, h, HS);
            float *dqh = HEAD(dq, (size_t)b * T, ldq, h, HS);
            float *dkh = HEAD(dk, (size_t)b * S, ldkv, h, HS), *dvh = HEAD(dv, (size_t)b * S, ldkv, h, HS);
            const int RB = block_rows(causal, T);
            transpose_padded(vT, Sp, HEAD(v, (size_t)b * S, ldkv, h, HS), Sv, HS, ldkv);
            memset(g, 0, sizeof(float) * T * Sp);
            for (int t0 = 0; t0 < T; t0 += RB) {   /* dP = dout vᵀ, visible blocks */
                const int t1 = t0 + RB < T ? t0 + RB : T;
                small_gemm(t1 - t0, block_key_blocks(causal, t1, Sv), HS, 1.0f, doh + (size_t)t0 * C, C, vT, Sp,
                           g + (size_t)t0 * Sp, Sp);
            }
            softmax_backward_rows(g, Sp, p, S, klen[b], causal, T);
            for (int t0 = 0; t0 < T; t0 += RB) {   /* dq += scale g k */
                const int t1 = t0 + RB < T ? t0 + RB : T;
                small_gemm(t1 - t0, HS, block_keys(causal, t1, Sv), scale, g + (size_t)t0 * Sp, Sp, kh, ldkv,
                           dqh + (size_t)t0 * ldq, ldq);
            }
            transpose(tr, g, T, Sv, Sp);
            const int KB = block_rows(causal, Sv);
            for (int j0 = 0; j0 < Sv; j0 += KB) {   /* dk += scale gᵀ q over the queries that see the keys */
                const int j1 = j0 + KB < Sv ? j0 + KB : Sv, t0 = first_query(causal, j0);
                small_gemm(j1 - j0, HS, T - t0, scale, tr + (size_t)j0 * T + t0, T, qh + (size_t)t0 * ldq, ldq,
                           dkh + (size_t)j0 * ldkv, ldkv);
            }
            transpose(tr, p, T, Sv, S);
            for (int j0 = 0; j0 < Sv; j0 += KB) {   /* dv += Pᵀ dout */
                const int j1 = j0 + KB < Sv ? j0 + KB : Sv, t0 = first_query(causal, j0);
                small_gemm(j1 - j0, HS, T - t0, 1.0f, tr + (size_t)j0 * T + t0, T, doh + (size_t)t0 * C, C,
                           dvh + (size_t)j0 * ldkv, ldkv);
            }
        }
    }
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout,
                        const float *probs, const float *q, const float *k,
                        const float *v, int ldq, int ldkv, const int32_t *klen, int causal,
                        int B, int T, int S, int C, int NH, float scale) {
    attention_backward_impl(dq, dk, dv, dout, probs, q, k, v, ldq, ldkv, klen, causal, B, T, S, C, NH, scale, 0);
}

void attention_backward_set(float *dq, float *dk, float *dv, const float *dout, const float *probs, const float *q,
                            const float *k, const float *v, int ldq, int ldkv, const int32_t *klen, int causal, int B,
                            int T, int S, int C, int NH, float scale) {
    attention_backward_impl(dq, dk, dv, dout, probs, q, k, v, ldq, ldkv, klen, causal, B, T, S, C, NH, scale, 1);
}

/* ---- projection attention ---- */

/* log σ_h limited to [PMT_LOG_SIGMA_MIN, PMT_LOG_SIGMA_MAX] (ops.h). Without
 * it a learned log σ drifting to about −44 makes c overflow to +inf, and the
 * self-attention diagonal (distance 0) gives inf · 0 = NaN. NaN passes
 * through (the comparisons are false), so a broken step is still seen. */
static inline double clamp_log_sigma(float v) {
    return v < PMT_LOG_SIGMA_MIN ? PMT_LOG_SIGMA_MIN : v > PMT_LOG_SIGMA_MAX ? PMT_LOG_SIGMA_MAX : (double)v;
}

/* c_h = 1 / (2 σ_h²) with σ_h² = exp(2 log σ_h), log σ_h clamped. */
static inline float inv_two_sigma2(const float *log_sigma, int h) {
    return (float)(0.5 * exp(-2.0 * clamp_log_sigma(log_sigma[h])));
}

/* Squared norms of the head-h slices of n rows of x starting at row r0. */
static void head_norms(float *nrm, const float *x, size_t r0, int n, int C, int h, int HS) {
    for (int r = 0; r < n; r++) {
        const float *xr = HEAD(x, r0 + r, C, h, HS);
        nrm[r] = ops_dot(xr, xr, HS);
    }
}

/* Fills d [T, Sp] (Sp = PAD_COLS(Sv)) with the squared distances
 * |q_t|² + |k_j|² − 2 q_t·k_j of one (b, h) for the visible keys j < Sv,
 * using kT [HS, Sp] (kᵀ, zero-padded: transpose_padded) for the cross term
 * over whole register blocks of keys; the rest is 0. Causal: only each row
 * block's visible keys (causal row blocks above); the masked rest stays 0. */
static void sq_distances(float *d, const float *qh, const float *kT, const float *qn, const float *kn, int causal,
                         int T, int Sv, int C, int HS) {
    const int Sp = PAD_COLS(Sv);
    memset(d, 0, sizeof(float) * T * Sp);
    const int RB = block_rows(causal, T);
    for (int t0 = 0; t0 < T; t0 += RB) {
        const int t1 = t0 + RB < T ? t0 + RB : T, nk = block_key_blocks(causal, t1, Sv);
        const int nn = nk < Sv ? nk : Sv;
        small_gemm(t1 - t0, nk, HS, -2.0f, qh + (size_t)t0 * C, C, kT, Sp, d + (size_t)t0 * Sp, Sp);
        for (int t = t0; t < t1; t++)
#pragma omp simd
            for (int j = 0; j < nn; j++) d[(size_t)t * Sp + j] += qn[t] + kn[j];
    }
}

static void projattn_forward_impl(float *out, float *probs, const float *q, const float *k,
                                  const float *log_sigma, const int32_t *klen, int causal,
                                  int B, int T, int S, int C, int NH, int dots) {
    const int HS = C / NH;
    scratch_check(T, S, HS);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            /* Only the visible key prefix: its norms, distances, weights. */
            const int Sv = key_prefix(klen[b], S), Sp = PAD_COLS(Sv);
            float *qn = scratch_slice(), *kn = qn + T + 1, *kT = kn + Sv + 1;   /* [T] [Sv] [HS, Sp] */
            float *sc = kT + (size_t)HS * Sp;                                   /* [T, Sp] */
            const float c = inv_two_sigma2(log_sigma, h);
            float *p = probs + ((size_t)b * NH + h) * T * S;
            const float *qh = HEAD(q, (size_t)b * T, C, h, HS);
            const float *kh = HEAD(k, (size_t)b * S, C, h, HS);
            head_norms(qn, q, (size_t)b * T, T, C, h, HS);
            head_norms(kn, k, (size_t)b * S, Sv, C, h, HS);
            if (dots) {
                memset(p, 0, sizeof(float) * T * S);
                scores_by_dots(p, S, qh, C, kh, C, -2.0f, T, Sv, HS);
                for (int t = 0; t < T; t++)
#pragma omp simd
                    for (int j = 0; j < Sv; j++) p[(size_t)t * S + j] += qn[t] + kn[j];
                for (int t = 0; t < T; t++) {
                    const int nvis = visible_keys(klen[b], causal, t, S);   /* the softmax zeroes the rest */
#pragma omp simd
                    for (int j = 0; j < nvis; j++) p[(size_t)t * S + j] *= -c;
                }
            } else {
                /* Distances into sc [T, Sp], the logits from there into p. */
                transpose_padded(kT, Sp, kh, Sv, HS, C);
                sq_distances(sc, qh, kT, qn, kn, causal, T, Sv, C, HS);
                for (int t = 0; t < T; t++) {
                    const int nvis = visible_keys(klen[b], causal, t, S);   /* the softmax zeroes the rest */
#pragma omp simd
                    for (int j = 0; j < nvis; j++) p[(size_t)t * S + j] = sc[(size_t)t * Sp + j] * -c;
                }
            }
            softmax_rows(p, klen[b], causal, T, S);
            zero_head_rows(out, (size_t)b * T, T, C, h, HS);
            const int RB = block_rows(causal, T);
            for (int t0 = 0; t0 < T; t0 += RB) {
                const int t1 = t0 + RB < T ? t0 + RB : T;
                small_gemm(t1 - t0, HS, block_keys(causal, t1, Sv), 1.0f, p + (size_t)t0 * S, S, kh, C,
                           HEAD(out, (size_t)b * T + t0, C, h, HS), C);
            }
        }
    }
}

/* out [B*T, C], probs [B, NH, T, S], q [B*T, C], k [B*S, C] (may be q),
 * log_sigma [NH], klen [B]. logit = −c (|q_t|² + |k_j|² − 2 q_t·k_j). */
void projattn_forward(float *out, float *probs, const float *q, const float *k,
                      const float *log_sigma, const int32_t *klen, int causal,
                      int B, int T, int S, int C, int NH) {
    projattn_forward_impl(out, probs, q, k, log_sigma, klen, causal, B, T, S, C, NH, 0);
}

void projattn_forward_few_queries(float *out, float *probs, const float *q, const float *k,
                                  const float *log_sigma, const int32_t *klen, int causal,
                                  int B, int T, int S, int C, int NH) {
    projattn_forward_impl(out, probs, q, k, log_sigma, klen, causal, B, T, S, C, NH, 1);
}

/* One (b, h) task of projattn_backward; returns its contribution to
 * dlog_sigma[h] (0 when !want_sigma). With g = dlogits [T, S]:
 *   dq_t += 2c Σ_j g_tj k_j − 2c (Σ_j g_tj) q_t
 *   dk_j += 2c Σ_t g_tj q_t − 2c (Σ_t g_tj) k_j + Σ_t p_tj dout_t   (value path)
 *   dlog_sigma += Σ_tj g_tj · (−2 logit_tj) = Σ_tj g_tj · 2c·dist_tj
 * (masked entries have g = 0, so they drop out of the sum).
 * The updates of dq and dk run one after the other, so dq == dk works. */
static double projattn_backward_head(float *dq, float *dk, const float *dout,
                                     const float *probs, const float *q, const float *k,
                                     float c, int32_t klen, int causal, int want_sigma,
                                     int b, int h, int T, int S, int C, int NH) {
    const int HS = C / NH;
    /* Keys beyond the visible prefix get no gradient: g is [T, Sv]. */
    const int Sv = key_prefix(klen, S), Sp = PAD_COLS(Sv);
    /* [HS, Sp] [T, Sp] [T, Sp] (also [Sv, T]) [T] [Sv] from this thread's scratch; qn/kn below reuse
     * rsum/csum's room before those are filled. g's columns Sv..Sp-1 are 0. */
    float *kT = scratch_slice(), *g = kT + (size_t)HS * Sp, *tr = g + (size_t)T * Sp;
    float *rsum = tr + (size_t)Sp * T, *csum = rsum + T + 1;
    const float *p = probs + ((size_t)b * NH + h) * T * S;
    const float *qh = HEAD(q, (size_t)b * T, C, h, HS);
    const float *kh = HEAD(k, (size_t)b * S, C, h, HS);
    const float *doh = HEAD(dout, (size_t)b * T, C, h, HS);
    const int RB = block_rows(causal, T), KB = block_rows(causal, Sv);
    transpose_padded(kT, Sp, kh, Sv, HS, C);
    memset(g, 0, sizeof(float) * T * Sp);
    for (int t0 = 0; t0 < T; t0 += RB) {   /* dP = dout kᵀ (values = keys), visible blocks */
        const int t1 = t0 + RB < T ? t0 + RB : T;
        small_gemm(t1 - t0, block_key_blocks(causal, t1, Sv), HS, 1.0f, doh + (size_t)t0 * C, C, kT, Sp,
                   g + (size_t)t0 * Sp, Sp);
    }
    softmax_backward_rows(g, Sp, p, S, klen, causal, T);

    double dsig = 0.0;
    if (want_sigma) {
        float *qn = rsum, *kn = csum;   /* rsum/csum are written only after this block */
        head_norms(qn, q, (size_t)b * T, T, C, h, HS);
        head_norms(kn, k, (size_t)b * S, Sv, C, h, HS);
        sq_distances(tr, qh, kT, qn, kn, causal, T, Sv, C, HS); /* tr as [T, Sp] scratch */
        for (int t = 0; t < T; t++)
            for (int j = 0; j < Sv; j++) dsig += (double)g[(size_t)t * Sp + j] * tr[(size_t)t * Sp + j];
        dsig *= 2.0 * c;
    }
    for (int t = 0; t < T; t++) {
        double s = 0.0;
        for (int j = 0; j < Sv; j++) s += g[(size_t)t * Sp + j];
        rsum[t] = (float)s;
    }
    for (int j = 0; j < Sv; j++) {
        double s = 0.0;
        for (int t = 0; t < T; t++) s += g[(size_t)t * Sp + j];
        csum[j] = (float)s;
    }

    float *dqh = HEAD(dq, (size_t)b * T, C, h, HS);
    for (int t0 = 0; t0 < T; t0 += RB) {
        const int t1 = t0 + RB < T ? t0 + RB : T;
        small_gemm(t1 - t0, HS, block_keys(causal, t1, Sv), 2.0f * c, g + (size_t)t0 * Sp, Sp, kh, C,
                   dqh + (size_t)t0 * C, C);
    }
    for (int t = 0; t < T; t++) {
        float *dqt = dqh + (size_t)t * C;
        const float *qt = qh + (size_t)t * C;
        const float a = -2.0f * c * rsum[t];
#pragma omp simd
        for (int d = 0; d < HS; d++) dqt[d] += a * qt[d];
    }

    float *dkh = HEAD(dk, (size_t)b * S, C, h, HS);
    transpose(tr, g, T, Sv, Sp);
    for (int j0 = 0; j0 < Sv; j0 += KB) {   /* over the queries that see the keys */
        const int j1 = j0 + KB < Sv ? j0 + KB : Sv, t0 = first_query(causal, j0);
        small_gemm(j1 - j0, HS, T - t0, 2.0f * c, tr + (size_t)j0 * T + t0, T, qh + (size_t)t0 * C, C,
                   dkh + (size_t)j0 * C, C);
    }
    for (int j = 0; j < Sv; j++) {
        float *dkj = dkh + (size_t)j * C;
        const float *kj = kh + (size_t)j * C;
        const float a = -2.0f * c * csum[j];
#pragma omp simd
        for (int d = 0; d < HS; d++) dkj[d] += a * kj[d];
    }
    transpose(tr, p, T, Sv, S);
    for (int j0 = 0; j0 < Sv; j0 += KB) {
        const int j1 = j0 + KB < Sv ? j0 + KB : Sv, t0 = first_query(causal, j0);
        small_gemm(j1 - j0, HS, T - t0, 1.0f, tr + (size_t)j0 * T + t0, T, doh + (size_t)t0 * C, C,
                   dkh + (size_t)j0 * C, C);
    }
    return dsig;
}

/* (b, h) tasks per round of the dlog_sigma reduction; bounds the stack array
 * of per-task partials (8 KiB). */
#define PROJ_TASKS_PER_ROUND 1024

/* dq [B*T, C], dk [B*S, C] += ... (dq == dk for self-attention), dlog_sigma
 * [NH] += ... when not NULL. dlog_sigma[h] sums over sentences, which run in
 * parallel: each task writes its partial to its own slot and the slots are
 * added in task order afterwards, so the result does not depend on thread
 * count or schedule (an atomic add would). */
void projattn_backward(float *dq, float *dk, float *dlog_sigma, const float *dout,
                       const float *probs, const float *q, const float *k,
                       const float *log_sigma, const int32_t *klen, int causal,
                       int B, int T, int S, int C, int NH) {
    const int ntask = B * NH;
    const int want_sigma = dlog_sigma != NULL;
    scratch_check(T, S, C / NH);
    double part[PROJ_TASKS_PER_ROUND], sig[NH > 0 ? NH : 1];
    for (int h = 0; h < NH; h++) sig[h] = 0.0;
    for (int base = 0; base < ntask; base += PROJ_TASKS_PER_ROUND) {
        const int n = ntask - base < PROJ_TASKS_PER_ROUND ? ntask - base : PROJ_TASKS_PER_ROUND;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            const int b = (base + i) / NH, h = (base + i) % NH;
            part[i] = projattn_backward_head(dq, dk, dout, probs, q, k,
                                             inv_two_sigma2(log_sigma, h), klen[b], causal,
                                             want_sigma, b, h, T, S, C, NH);
        }
        for (int i = 0; i < n; i++) sig[(base + i) % NH] += part[i];
    }
    /* Outside the clamp the forward is flat in log σ: no gradient. */
    if (want_sigma)
        for (int h = 0; h < NH; h++)
            if (log_sigma[h] >= PMT_LOG_SIGMA_MIN && log_sigma[h] <= PMT_LOG_SIGMA_MAX) dlog_sigma[h] += (float)sig[h];
}

/* ---- decoder self-attention over a cache addressed by a row table ----
 * One query per hypothesis row r (T = 1). Key j of row r is position j of
 * cache row map[j·ld_map + r]: beam search reorders hypotheses by rewriting
 * this table of ints instead of copying every cached position of every row
 * at every step (which made a sentence's decoding quadratic in its output
 * length in bytes moved). The arithmetic is that of the few-queries kernels
 * above, in the same order, so both give the same bits for the same keys. */

/* The logit of one cached key k from its dot product qk with the query:
 * standard scale · q·k, projection −c (|q|² + |k|² − 2 q·k) in the order of
 * projattn_forward_few_queries (distance first, then the factor). */
static inline float cached_logit(float qk, const float *k, float qn, int HS, int projection, float scale_or_c) {
    if (!projection) return scale_or_c * qk;
    float s = -2.0f * qk;
    s += qn + ops_dot(k, k, HS);
    return s * -scale_or_c;
}

/* Position j of hypothesis row r in a [rows, cap, C] cache (this head's
 * column offset applied by the caller): the cache row the row table names. */
static inline const float *cache_row(const float *cache, const int32_t *map, int ld_map, int r, int j, int cap,
                                     int C) {
    return cache + ((size_t)map[(size_t)j * ld_map + r] * cap + j) * C;
}

/* One (r, h): p [nkeys] scores then weights (tail to cap zeroed), out_h = Σ_j p_j val_j.
 * kind: 0 standard (scale · q·k), 1 projection (−c (|q|² + |k|² − 2 q·k)). */
static void cached_head(float *outh, float *p, const float *qh, const float *kcache, const float *vcache,
                        const int32_t *map, int ld_map, int r, int nkeys, int cap, int C, int HS, int projection,
                        float scale_or_c) {
    const float qn = projection ? ops_dot(qh, qh, HS) : 0.0f;
    int j = 0;
    for (; j + 4 <= nkeys; j += 4) {   /* four keys at a time, as scores_by_dots */
        const float *k4[4];
        float s[4];
        for (int i = 0; i < 4; i++) k4[i] = cache_row(kcache, map, ld_map, r, j + i, cap, C);
        ops_dot4(s, qh, k4[0], k4[1], k4[2], k4[3], HS);
        for (int i = 0; i < 4; i++) p[j + i] = cached_logit(s[i], k4[i], qn, HS, projection, scale_or_c);
    }
    for (; j < nkeys; j++) {
        const float *kj = cache_row(kcache, map, ld_map, r, j, cap, C);
        p[j] = cached_logit(ops_dot(qh, kj, HS), kj, qn, HS, projection, scale_or_c);
    }
    masked_softmax_row(p, nkeys, cap);
    /* Σ_j p_j v_j, each output element summed over j in order (the bits of
     * small_gemm's PV), four values per pass: with one value per pass GCC
     * turned every second one into gathers (half of this kernel's time). */
    float acc[HS];
    for (int d = 0; d < HS; d++) acc[d] = 0.0f;
    j = 0;
    for (; j + 4 <= nkeys; j += 4) {
        const float *v[4];
        for (int i = 0; i < 4; i++) v[i] = cache_row(vcache, map, ld_map, r, j + i, cap, C);
        const float *v0 = v[0], *v1 = v[1], *v2 = v[2], *v3 = v[3];
        const float p0 = p[j], p1 = p[j + 1], p2 = p[j + 2], p3 = p[j + 3];
#pragma omp simd
        for (int d = 0; d < HS; d++) {
            float a = acc[d];
            a += p0 * v0[d];
            a += p1 * v1[d];
            a += p2 * v2[d];
            a += p3 * v3[d];
            acc[d] = a;
        }
    }
    for (; j < nkeys; j++) {
        const float *vj = cache_row(vcache, map, ld_map, r, j, cap, C);
        const float pj = p[j];
#pragma omp simd
        for (int d = 0; d < HS; d++) acc[d] += pj * vj[d];
    }
    /* As small_gemm stores into the zeroed output: 0 + 1·acc (−0 becomes +0). */
#pragma omp simd
    for (int d = 0; d < HS; d++) outh[d] = 0.0f + 1.0f * acc[d];
}

/* out [R, C], probs [R, NH, cap], q [R, ldq], kcache/vcache [rows, cap, C],
 * map [nkeys, ld_map]. */
void attention_forward_cached(float *out, float *probs, const float *q, const float *kcache, const float *vcache,
                              int ldq, const int32_t *map, int ld_map, int R, int nkeys, int cap, int C, int NH,
                              float scale) {
    const int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static) if ((long)R * nkeys * C > OPS_PAR_MIN)
    for (int r = 0; r < R; r++)
        for (int h = 0; h < NH; h++)
            cached_head(HEAD(out, r, C, h, HS), probs + ((size_t)r * NH + h) * cap, HEAD(q, r, ldq, h, HS),
                        kcache + (size_t)h * HS, vcache + (size_t)h * HS, map, ld_map, r, nkeys, cap, C, HS, 0, scale);
}

/* As attention_forward_cached with projection logits; values = keys. */
void projattn_forward_cached(float *out, float *probs, const float *q, const float *kcache, const int32_t *map,
                             int ld_map, const float *log_sigma, int R, int nkeys, int cap, int C, int NH) {
    const int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static) if ((long)R * nkeys * C > OPS_PAR_MIN)
    for (int r = 0; r < R; r++)
        for (int h = 0; h < NH; h++)
            cached_head(HEAD(out, r, C, h, HS), probs + ((size_t)r * NH + h) * cap, HEAD(q, r, C, h, HS),
                        kcache + (size_t)h * HS, kcache + (size_t)h * HS, map, ld_map, r, nkeys, cap, C, HS, 1,
                        inv_two_sigma2(log_sigma, h));
}
