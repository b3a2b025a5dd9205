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
 * bf16 (the _bf16 kernels, bf16 training steps): the same tasks and row
 * blocks, the products as avx512_bf16 dot products over operands rounded
 * once per task where they are laid out (operands section below). Not
 * oneDNN batched matmuls: at these sizes (T, S ≈ 10–30) oneDNN 2.6 runs
 * strided batched bf16 products in gemm:jit at 50–165 GFLOP/s, and
 * forward's two took 0.32–0.66 of this file's whole fp32 forward on Zen 4
 * (tests/bench_attention_products.c, docs/speed.md) before any softmax.
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

#include "nn/gemm.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- per-thread scratch ----
 * Each (b, h) task needs transposed copies and a [T, S] gradient block:
 * HS·S + 2·T·S + 2·(T + S) floats, 8.6 MB at T = S = 1024. On the stack
 * that could overflow an OpenMP worker's stack (often 2–8 MB), so it lives
 * on the heap.
 *
 * Why one buffer per OS thread (thread-local) and not one per process:
 * two translators used from two threads run two OpenMP teams at once, each
 * with its own threads numbered 0, 1, ...; a process-wide buffer sliced by
 * thread number gave both teams' thread 0 the same slice (wrong
 * translations), and growing it for one freed it under the other. A thread
 * runs one task at a time, whichever team or nesting level (a decoder lane
 * is a thread of an outer team), so its own buffer is never shared.
 *
 * The model reserves it at init on its thread and each decoder lane on its
 * own thread (attention_scratch_reserve), so decoding kernels only compare
 * sizes; another thread of a team (training's workers) or a larger shape
 * grows its buffer in its first task, once. Out of memory there is reported to the kernel's caller as a
 * gemm-style error (pmt_gemm_take_error, nn/gemm.h), never an abort. A
 * thread's buffer is freed when the thread exits (a pthread key's
 * destructor). */
static _Thread_local float *thread_buf;
static _Thread_local size_t thread_buf_floats;
static pthread_key_t scratch_key;
static pthread_once_t scratch_key_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_key_make(void) { scratch_key_ok = pthread_key_create(&scratch_key, free) == 0; }

/* This thread's scratch of at least `floats` floats, grown (contents not
 * kept) when smaller. NULL when out of memory. */
static float *thread_scratch(size_t floats) {
    if (floats <= thread_buf_floats) return thread_buf;
    pthread_once(&scratch_key_once, scratch_key_make);
    float *buf = scratch_key_ok ? malloc(floats * sizeof(float)) : NULL;
    if (!buf) return NULL;
    if (pthread_setspecific(scratch_key, buf) != 0) {   /* the destructor must own it before it is used */
        free(buf);
        return NULL;
    }
    free(thread_buf);
    thread_buf = buf;
    thread_buf_floats = floats;
    return buf;
}

/* Key columns as the score products see them: S rounded up to whole register
 * blocks (GW = 16 floats, defined below), so that their output columns never
 * fall into small_gemm's narrow tail loop (spa-eng's sentences have S < 16:
 * every score product would). The padding columns of the transposed keys
 * (and values) are zeros, and the padding scores are never read. */
#define PAD_COLS(n) (((n) + 15) / 16 * 16)

static size_t scratch_need(int T, int S, int HS) {
    /* The most a (b, h) task takes (the backward kernels, bf16), each
     * buffer rounded up to 16 floats by take(): fp32 holds a transposed
     * [HS, Sp] operand, two [T, Sp] blocks and a [Sp, T] transpose; bf16
     * also the rounded rows [T or Sp, HS/2 + 1] and pairs of rows
     * [T/2 + 1 or Sp/2 + 1, HS]. */
    const size_t t = (size_t)(T > 0 ? T : 0) + 16, k = (size_t)PAD_COLS(S > 0 ? S : 0) + 16, hs = (size_t)HS + 16;
    return 3 * hs * k + 4 * t * k + 3 * t * hs + 4 * (t + k) + 256;
}

/* The calling thread's only: a parallel region here would start an OpenMP
 * team at model init, which a program that forks afterwards cannot use in
 * the child (libgomp's pool is not fork-safe: the child waits forever). */
int attention_scratch_reserve(int T, int S, int HS) { return thread_scratch(scratch_need(T, S, HS)) ? 0 : -1; }

/* A kernel's tasks that found no scratch (failed: set by any thread of the
 * region) leave their outputs unwritten; the kernel then records the error
 * for its caller on the calling thread, where the decoder and the trainer
 * collect it. */
static void scratch_report(int failed, int T, int S, int HS) {
    if (failed)
        pmt_gemm_record_error("out of memory for the attention scratch (%zu bytes a thread for T=%d S=%d HS=%d)",
                              scratch_need(T, S, HS) * sizeof(float), T, S, HS);
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

/* c[0..n) += alpha · acc, or with set c = 0 + alpha · acc: the bits of the
 * accumulation into a zeroed c (−0 becomes +0), without zeroing c first. */
static inline void store_row(float *c, const float *acc, int n, float alpha, int set) {
    if (set) {
#pragma omp simd
        for (int j = 0; j < n; j++) c[j] = 0.0f + alpha * acc[j];
    } else {
#pragma omp simd
        for (int j = 0; j < n; j++) c[j] += alpha * acc[j];
    }
}

/* C[M, N] += alpha · A[M, K] · B[K, N] (set: C = alpha · A · B, as into a
 * zeroed C), all row-major with leading dimensions. Four rows of C are
 * accumulated at once in four independent vector accumulators (hiding FMA
 * latency and sharing each load of B); a column tail narrower than GW runs
 * a plain loop. A and B never alias C. */
static void small_gemm(int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float *C, int ldc, int set) {
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
            store_row(c, c0, GW, alpha, set);
            store_row(c + ldc, c1, GW, alpha, set);
            store_row(c + 2 * ldc, c2, GW, alpha, set);
            store_row(c + 3 * ldc, c3, GW, alpha, set);
        }
        for (; i < M; i++) {
            float c0[GW] = {0};
            for (int k = 0; k < K; k++) {
                const float *b = B + (size_t)k * ldb + n0;
                const float x0 = A[(size_t)i * lda + k];
#pragma omp simd
                for (int j = 0; j < GW; j++) c0[j] += x0 * b[j];
            }
            store_row(C + (size_t)i * ldc + n0, c0, GW, alpha, set);
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
        store_row(C + (size_t)i * ldc + n0, c0, nw, alpha, set);
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
    for (int c = 0; c < cols; c++)   /* a loop, not a memset call per column: the padding is a few floats */
        for (int r = rows; r < ldd; r++) dst[(size_t)c * ldd + r] = 0.0f;
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

/* ---- the products' operands, in fp32 or in bf16 ----
 * Every product of a (b, h) task has one of three forms, each over the
 * rows of a block (causal row blocks above):
 *   scores          c[t, j] += α Σ_d a[t, d] y[j, d]   (q kᵀ, dout vᵀ)
 *   weights · rows  c[t, d] += α Σ_j w[t, j] y[j, d]   (P v, g k)
 *   weightsᵀ · rows c[j, d] += α Σ_t w[t, j] x[t, d]   (gᵀ q, Pᵀ dout)
 * with a, x, y head slices of token rows (HS columns) and w a [T, S] block.
 * An operand is prepared once per task, in the layout its product reads,
 * and serves every row block of it.
 *
 * fp32: small_gemm over the rows in place, or over a transposed copy.
 * bf16 (the kernels' _bf16 entry points; a CPU with avx512_bf16): the
 * products run as vdpbf16ps dot products, twice the fp32 FMA rate on
 * AVX-512 bf16 CPUs. Each vector instruction adds, for 16 output columns,
 * the products of one PAIR of consecutive reduction terms: the left
 * operand is stored as bf16 pairs along the reduction (one 32-bit
 * broadcast per pair), the right one as [pairs, columns] of interleaved
 * bf16 pairs. Operands are rounded to nearest even once, where they are
 * laid out (the copies fp32 makes anyway); accumulation, the softmax and
 * every result stay fp32. A reduction of odd length ends in a pair whose
 * second term is a zero on both sides. Where a causal block stops the
 * reduction at an odd key count nk, the pair's second term is key nk,
 * which every row of the block masks: its weight is an exact zero. */

/* bf16 elements rounded from fp32 as uint16_t; a pair as one uint32_t
 * (low half the first term), as vdpbf16ps reads them. The functions
 * compiled for avx512_bf16 are named *_native, as gemm.c's converters: a
 * portable build checks that no other code of its base engine uses AVX
 * registers (tests/test_install.sh). */
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

static inline int pairs_of(int n) { return (n + 1) / 2; }

/* Masks of the first n (0..16) lanes. */
static inline __mmask16 lanes(int n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n > 0 ? n : 0)) - 1u);
}

/* dst [rows, ldd] pairs = bf16 of src [rows, cols] (leading dimension ld):
 * each row's cols values, then zeros up to 2·ldd. */
BF16_TARGET static void bf16_round_rows_native(uint32_t *dst, int ldd, const float *src, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++) {
        uint16_t *d = (uint16_t *)(dst + (size_t)r * ldd);
        const float *s = src + (size_t)r * ld;
        int c = 0;
        for (; c + 16 <= cols && c + 16 <= 2 * ldd; c += 16)   /* whole vectors: masked stores are slow on Zen 4 */
            _mm256_storeu_si256((__m256i *)(d + c), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + c)));
        for (; c < 2 * ldd; c += 16) {
            const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lanes(cols - c), s + c));
            _mm256_mask_storeu_epi16(d + c, lanes(2 * ldd - c), (__m256i)v);
        }
    }
}

/* dst [pairs_of(rows), ldd] = pairs of rows (2p, 2p + 1) of src [rows, cols]
 * (leading dimension ld), elementwise: the right operand of a product that
 * reduces over src's rows. A missing last row is zeros; columns cols..ldd-1
 * are not written. */
BF16_TARGET static void bf16_pair_rows_native(uint32_t *dst, int ldd, const float *src, int rows, int cols, int ld) {
    for (int p = 0; 2 * p < rows; p++) {
        const float *r0 = src + (size_t)(2 * p) * ld, *r1 = r0 + ld;
        const int second = 2 * p + 1 < rows;
        for (int c = 0; c < cols; c += 16) {
            const __mmask16 m = lanes(cols - c);
            const __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, r0 + c)));
            const __m512i hi =
                second ? _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, r1 + c)))
                       : _mm512_setzero_si512();
            const __m512i pair = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
            if (c + 16 <= cols) _mm512_storeu_si512(dst + (size_t)p * ldd + c, pair);
            else _mm512_mask_storeu_epi32(dst + (size_t)p * ldd + c, m, pair);
        }
    }
}

/* dst [cols, ldd] = srcᵀ of 32-bit pairs src [rows, cols] (leading dimension
 * lds), columns rows..ldd-1 of dst zero. */
static void pairs_transpose(uint32_t *dst, int ldd, const uint32_t *src, int lds, int rows, int cols) {
    for (int c = 0; c < cols; c++) {
        uint32_t *d = dst + (size_t)c * ldd;
        for (int r = 0; r < rows; r++) d[r] = src[(size_t)r * lds + c];
        for (int r = rows; r < ldd; r++) d[r] = 0;
    }
}

/* C[M, N] += alpha · A · B (set: C = alpha · A · B) over KP pairs: A [M, KP]
 * pairs (leading dimension lda), B [KP, N] pairs (ldb), C fp32 (ldc); a
 * column tail narrower than 16 is masked. Four rows at a time, as small_gemm, sharing each load of B. */
BF16_TARGET static void small_gemm_bf16_native(int M, int N, int KP, float alpha, const uint32_t *A, int lda,
                                               const uint32_t *B, int ldb, float *C, int ldc, int set) {
    const __m512 al = _mm512_set1_ps(alpha), zero = _mm512_setzero_ps();
    for (int n0 = 0; n0 < N; n0 += 16) {
        const __mmask16 m = lanes(N - n0);
        const int full = N - n0 >= 16;   /* whole vectors unmasked: masked stores are slow on Zen 4 */
#define LOAD_B(p) ((__m512bh)(full ? _mm512_loadu_si512(B + (size_t)(p) * ldb + n0) \
                                   : _mm512_maskz_loadu_epi32(m, B + (size_t)(p) * ldb + n0)))
#define STORE_C(c, acc)                                                                                   \
    do {                                                                                                  \
        const __m512 old_ = set ? zero : full ? _mm512_loadu_ps(c) : _mm512_maskz_loadu_ps(m, c);           \
        if (full) _mm512_storeu_ps(c, _mm512_fmadd_ps(al, acc, old_));                                    \
        else _mm512_mask_storeu_ps(c, m, _mm512_fmadd_ps(al, acc, old_));                                 \
    } while (0)
        int i = 0;
        for (; i + 4 <= M; i += 4) {
            __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
            const uint32_t *a = A + (size_t)i * lda;
            for (int p = 0; p < KP; p++) {
                const __m512bh b = LOAD_B(p);
                c0 = _mm512_dpbf16_ps(c0, (__m512bh)_mm512_set1_epi32((int)a[p]), b);
                c1 = _mm512_dpbf16_ps(c1, (__m512bh)_mm512_set1_epi32((int)a[lda + p]), b);
                c2 = _mm512_dpbf16_ps(c2, (__m512bh)_mm512_set1_epi32((int)a[2 * lda + p]), b);
                c3 = _mm512_dpbf16_ps(c3, (__m512bh)_mm512_set1_epi32((int)a[3 * lda + p]), b);
            }
            float *c = C + (size_t)i * ldc + n0;
            STORE_C(c, c0);
            STORE_C(c + ldc, c1);
            STORE_C(c + 2 * ldc, c2);
            STORE_C(c + 3 * ldc, c3);
        }
        for (; i < M; i++) {
            __m512 c0 = _mm512_setzero_ps();
            const uint32_t *a = A + (size_t)i * lda;
            for (int p = 0; p < KP; p++) c0 = _mm512_dpbf16_ps(c0, (__m512bh)_mm512_set1_epi32((int)a[p]), LOAD_B(p));
            float *c = C + (size_t)i * ldc + n0;
            STORE_C(c, c0);
        }
#undef LOAD_B
#undef STORE_C
    }
}

/* Squared norms of n rows of bf16 pairs x [n, kp]: of the rounded values,
 * so that a distance |q|² + |k|² − 2 q·k of rounded operands is that of one
 * pair of vectors (0 on the self-attention diagonal up to fp32 rounding,
 * not up to bf16's). */
BF16_TARGET static void bf16_norms_native(float *nrm, const uint32_t *x, int n, int kp) {
    for (int r = 0; r < n; r++) {
        const uint16_t *v = (const uint16_t *)(x + (size_t)r * kp);
        __m512 s = _mm512_setzero_ps();
        for (int i = 0; i < 2 * kp; i += 16) {   /* bf16 → fp32 is a shift into the upper half */
            const __m256i h = _mm256_maskz_loadu_epi16(lanes(2 * kp - i), v + i);
            const __m512 f = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            s = _mm512_fmadd_ps(f, f, s);
        }
        nrm[r] = _mm512_reduce_add_ps(s);
    }
}

/* n floats (or pairs) of a task's scratch, 64-byte multiples. */
static inline float *take(float **ws, size_t n) {
    float *p = *ws;
    *ws += (n + 15) / 16 * 16;
    return p;
}

/* Rows of a token matrix as a scores product sees them: the left operand
 * (a, its rows in place in fp32) or the right one (yᵀ, keys as columns
 * padded to Sp with zeros). */
typedef struct head_rows {
    int lowp, HS;
    const float *x;   /* the head slice of the first row, leading dimension ld */
    int ld, rows;
    float *xT;        /* fp32 right operand: xᵀ [HS, Sp] */
    uint32_t *x16;    /* bf16: the rows rounded, [rows, pairs_of(HS)] */
    uint32_t *xT16;   /* bf16 right operand: [pairs_of(HS), Sp] */
    int Sp;
} head_rows;

static head_rows scores_left(int lowp, float **ws, const float *x, int ld, int rows, int HS) {
    head_rows o = {.lowp = lowp, .HS = HS, .x = x, .ld = ld, .rows = rows};
    if (lowp) {
        o.x16 = (uint32_t *)take(ws, (size_t)rows * pairs_of(HS));
        bf16_round_rows_native(o.x16, pairs_of(HS), x, rows, HS, ld);
    }
    return o;
}

static head_rows scores_right(int lowp, float **ws, const float *y, int ld, int rows, int HS, int Sp) {
    head_rows o = scores_left(lowp, ws, y, ld, rows, HS);
    o.Sp = Sp;
    if (lowp) {
        o.xT16 = (uint32_t *)take(ws, (size_t)pairs_of(HS) * Sp);
        pairs_transpose(o.xT16, Sp, o.x16, pairs_of(HS), rows, pairs_of(HS));
    } else {
        o.xT = take(ws, (size_t)HS * Sp);
        transpose_padded(o.xT, Sp, y, rows, HS, ld);
    }
    return o;
}

/* Squared norms of n head slices xh [n, HS] (leading dimension ld). */
static void head_norms(float *nrm, const float *xh, int n, int ld, int HS) {
    for (int r = 0; r < n; r++) nrm[r] = ops_dot(xh + (size_t)r * ld, xh + (size_t)r * ld, HS);
}

/* Squared norms of the operand's rows (of its rounded values in bf16). */
static void head_rows_norms(float *nrm, const head_rows *o) {
    if (o->lowp) bf16_norms_native(nrm, o->x16, o->rows, pairs_of(o->HS));
    else head_norms(nrm, o->x, o->rows, o->ld, o->HS);
}

/* The three products' blocks are inlined into the kernels, so that
 * small_gemm keeps the constant arguments (α = 1) it is specialised for. */

/* c[t, j] += alpha · a_t · y_j for rows t0..t1-1 and keys j < ncols. */
static inline __attribute__((always_inline)) void scores_block(const head_rows *a, const head_rows *y, int t0,
                                                              int t1, int ncols, float alpha, float *c, int ldc,
                                                              int set) {
    if (a->lowp)
        small_gemm_bf16_native(t1 - t0, ncols, pairs_of(a->HS), alpha, a->x16 + (size_t)t0 * pairs_of(a->HS),
                               pairs_of(a->HS), y->xT16, y->Sp, c + (size_t)t0 * ldc, ldc, set);
    else
        small_gemm(t1 - t0, ncols, a->HS, alpha, a->x + (size_t)t0 * a->ld, a->ld, y->xT, y->Sp,
                   c + (size_t)t0 * ldc, ldc, set);
}

/* A weights block w [rows, cols] (leading dimension ldw) with the token rows
 * y [cols, HS] it weights (weights · rows), or its transpose with the rows
 * x [rows, HS] (weightsᵀ · rows). */
typedef struct weighted {
    int lowp, HS;
    const float *w, *y;   /* fp32 weights · rows: both in place */
    int ldw, ldy;
    float *wT;            /* fp32 weightsᵀ: [cols, rows] */
    int rows;
    uint32_t *w16;        /* bf16: w rows as pairs [rows, ldw16], or wᵀ [cols, ldw16] */
    uint32_t *y16;        /* bf16: the token rows as pairs of rows [ldw16, HS] */
    int ldw16;
} weighted;

static weighted weights_by_rows(int lowp, float **ws, const float *w, int ldw, int rows, int cols, const float *y,
                                int ldy, int HS) {
    weighted o = {.lowp = lowp, .HS = HS, .w = w, .y = y, .ldw = ldw, .ldy = ldy, .rows = rows};
    if (lowp) {
        o.ldw16 = pairs_of(cols);
        o.w16 = (uint32_t *)take(ws, (size_t)rows * o.ldw16);
        bf16_round_rows_native(o.w16, o.ldw16, w, rows, cols, ldw);
        o.y16 = (uint32_t *)take(ws, (size_t)o.ldw16 * HS);
        bf16_pair_rows_native(o.y16, HS, y, cols, HS, ldy);
    }
    return o;
}

/* c[t, :] += alpha · Σ_{j < nk} w[t, j] y_j for rows t0..t1-1. */
static inline __attribute__((always_inline)) void weights_block(const weighted *o, int t0, int t1, int nk,
                                                               float alpha, float *c, int ldc, int set) {
    if (o->lowp)
        small_gemm_bf16_native(t1 - t0, o->HS, pairs_of(nk), alpha, o->w16 + (size_t)t0 * o->ldw16, o->ldw16,
                               o->y16, o->HS, c + (size_t)t0 * ldc, ldc, set);
    else
        small_gemm(t1 - t0, o->HS, nk, alpha, o->w + (size_t)t0 * o->ldw, o->ldw, o->y, o->ldy,
                   c + (size_t)t0 * ldc, ldc, set);
}

static weighted weightsT_by_rows(int lowp, float **ws, const float *w, int ldw, int rows, int cols, const float *x,
                                 int ldx, int HS) {
    weighted o = {.lowp = lowp, .HS = HS, .y = x, .ldy = ldx, .rows = rows};
    if (lowp) {
        o.ldw16 = pairs_of(rows);
        uint32_t *pairs = (uint32_t *)take(ws, (size_t)o.ldw16 * cols);   /* [ldw16, cols] */
        bf16_pair_rows_native(pairs, cols, w, rows, cols, ldw);
        o.w16 = (uint32_t *)take(ws, (size_t)cols * o.ldw16);
        pairs_transpose(o.w16, o.ldw16, pairs, cols, o.ldw16, cols);
        o.y16 = (uint32_t *)take(ws, (size_t)o.ldw16 * HS);
        bf16_pair_rows_native(o.y16, HS, x, rows, HS, ldx);
    } else {
        o.wT = take(ws, (size_t)cols * rows);
        transpose(o.wT, w, rows, cols, ldw);
    }
    return o;
}

/* c[j, :] += alpha · Σ_{t >= t0} w[t, j] x_t for keys j0..j1-1; t0 is even
 * (0, or a multiple of CAUSAL_ROWS), so bf16 pairs start at t0. */
static inline __attribute__((always_inline)) void weightsT_block(const weighted *o, int j0, int j1, int t0,
                                                                float alpha, float *c, int ldc, int set) {
    if (o->lowp)
        small_gemm_bf16_native(j1 - j0, o->HS, o->ldw16 - t0 / 2, alpha, o->w16 + (size_t)j0 * o->ldw16 + t0 / 2,
                               o->ldw16, o->y16 + (size_t)(t0 / 2) * o->HS, o->HS, c + (size_t)j0 * ldc, ldc, set);
    else
        small_gemm(j1 - j0, o->HS, o->rows - t0, alpha, o->wT + (size_t)j0 * o->rows + t0, o->rows,
                   o->y + (size_t)t0 * o->ldy, o->ldy, c + (size_t)j0 * ldc, ldc, set);
}

_Static_assert(CAUSAL_ROWS % 2 == 0, "bf16 pairs of queries start at a causal block's first key");

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
                                   int B, int T, int S, int C, int NH, float scale, int dots, int lowp) {
    const int HS = C / NH;
    const size_t need = scratch_need(T, S, HS);
    int failed = 0;
#pragma omp parallel for collapse(2) schedule(static) reduction(| : failed)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float *ws = thread_scratch(need);
            if (!ws) {
                failed = 1;
                continue;
            }
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
                const head_rows qa = scores_left(lowp, &ws, qh, ldq, T, HS);
                const head_rows ky = scores_right(lowp, &ws, kh, ldkv, Sv, HS, Sp);
                float *sc = take(&ws, (size_t)T * Sp);   /* only each row's visible prefix is written and read */
                for (int t0 = 0; t0 < T; t0 += RB) {
                    const int t1 = t0 + RB < T ? t0 + RB : T;
                    scores_block(&qa, &ky, t0, t1, block_key_blocks(causal, t1, Sv), scale, sc, Sp, 1);
                }
                for (int t = 0; t < T; t++) {
                    const int nvis = visible_keys(klen[b], causal, t, S);
                    float *row = p + (size_t)t * S;
                    memcpy(row, sc + (size_t)t * Sp, sizeof(float) * (size_t)nvis);
                    masked_softmax_row(row, nvis, S);
                }
            }
            const weighted pv = weights_by_rows(lowp, &ws, p, S, T, Sv, HEAD(v, (size_t)b * S, ldkv, h, HS), ldkv, HS);
            for (int t0 = 0; t0 < T; t0 += RB) {
                const int t1 = t0 + RB < T ? t0 + RB : T;
                weights_block(&pv, t0, t1, block_keys(causal, t1, Sv), 1.0f, oh, C, 1);   /* sets every row */
            }
        }
    }
    scratch_report(failed, T, S, HS);
}

/* out [B*T, C], probs [B, NH, T, S], q [B*T, ldq], k, v [B*S, ldkv], klen [B]. */
void attention_forward(float *out, float *probs, const float *q, const float *k,
                       const float *v, int ldq, int ldkv, const int32_t *klen, int causal,
                       int B, int T, int S, int C, int NH, float scale) {
    attention_forward_impl(out, probs, q, k, v, ldq, ldkv, klen, causal, B, T, S, C, NH, scale, 0, 0);
}

void attention_forward_bf16(float *out, float *probs, const float *q, const float *k, const float *v, int ldq,
                            int ldkv, const int32_t *klen, int causal, int B, int T, int S, int C, int NH,
                            float scale) {
    attention_forward_impl(out, probs, q, k, v, ldq, ldkv, klen, causal, B, T, S, C, NH, scale, 0, 1);
}

void attention_forward_few_queries(float *out, float *probs, const float *q, const float *k,
                                   const float *v, int ldq, int ldkv, const int32_t *klen, int causal,
                                   int B, int T, int S, int C, int NH, float scale) {
    attention_forward_impl(out, probs, q, k, v, ldq, ldkv, klen, causal, B, T, S, C, NH, scale, 1, 0);
}

/* dq [B*T, ldq], dk, dv [B*S, ldkv] += ... (one buffer at three column
 * offsets when q, k, v are the fused projection of self-attention).
 * Per (b, h): dP = dout vᵀ, g = softmax backward, dq += scale g k,
 * dk += scale gᵀ q, dv += Pᵀ dout. */
static void attention_backward_impl(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                                    const float *q, const float *k, const float *v, int ldq, int ldkv,
                                    const int32_t *klen, int causal, int B, int T, int S, int C, int NH, float scale,
                                    int set, int lowp) {
    const int HS = C / NH;
    const size_t need = scratch_need(T, S, HS);
    int failed = 0;
#pragma omp parallel for collapse(2) schedule(static) reduction(| : failed)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float *ws = thread_scratch(need);
            if (!ws) {
                failed = 1;
                continue;
            }
            /* g is [T, Sv] here: keys beyond the prefix get no gradient. */
            const int Sv = key_prefix(klen[b], S), Sp = PAD_COLS(Sv);
            if (set) {   /* the products below set every row of dq and the prefix's rows of dk, dv: zero the rest */
                zero_head_rows(dk, (size_t)b * S + Sv, S - Sv, ldkv, h, HS);
                zero_head_rows(dv, (size_t)b * S + Sv, S - Sv, ldkv, h, HS);
            }
            const float *p = probs + ((size_t)b * NH + h) * T * S;
            const float *qh = HEAD(q, (size_t)b * T, ldq, h, HS);
            const float *kh = HEAD(k, (size_t)b * S, ldkv, h, HS);
            const float *doh = HEAD(dout, (size_t)b * T, C, h, HS);
            float *dqh = HEAD(dq, (size_t)b * T, ldq, h, HS);
            float *dkh = HEAD(dk, (size_t)b * S, ldkv, h, HS), *dvh = HEAD(dv, (size_t)b * S, ldkv, h, HS);
            const int RB = block_rows(causal, T);
            const head_rows da = scores_left(lowp, &ws, doh, C, T, HS);
            const head_rows vy = scores_right(lowp, &ws, HEAD(v, (size_t)b * S, ldkv, h, HS), ldkv, Sv, HS, Sp);
            float *g = take(&ws, (size_t)T * Sp);   /* [T, Sp]: the blocks, then the softmax backward's zeros */
            for (int t0 = 0; t0 < T; t0 += RB) {   /* dP = dout vᵀ, visible blocks */
                const int t1 = t0 + RB < T ? t0 + RB : T;
                scores_block(&da, &vy, t0, t1, block_key_blocks(causal, t1, Sv), 1.0f, g, Sp, 1);
            }
            softmax_backward_rows(g, Sp, p, S, klen[b], causal, T);
            const weighted gk = weights_by_rows(lowp, &ws, g, Sp, T, Sv, kh, ldkv, HS);
            for (int t0 = 0; t0 < T; t0 += RB) {   /* dq += scale g k */
                const int t1 = t0 + RB < T ? t0 + RB : T;
                weights_block(&gk, t0, t1, block_keys(causal, t1, Sv), scale, dqh, ldq, set);
            }
            float *const mark = ws;   /* the two transposed products take the same room in turn */
            const int KB = block_rows(causal, Sv);
            const weighted gq = weightsT_by_rows(lowp, &ws, g, Sp, T, Sv, qh, ldq, HS);
            for (int j0 = 0; j0 < Sv; j0 += KB) {   /* dk += scale gᵀ q over the queries that see the keys */
                const int j1 = j0 + KB < Sv ? j0 + KB : Sv;
                weightsT_block(&gq, j0, j1, first_query(causal, j0), scale, dkh, ldkv, set);
            }
            ws = mark;
            const weighted pd = weightsT_by_rows(lowp, &ws, p, S, T, Sv, doh, C, HS);
            for (int j0 = 0; j0 < Sv; j0 += KB) {   /* dv += Pᵀ dout */
                const int j1 = j0 + KB < Sv ? j0 + KB : Sv;
                weightsT_block(&pd, j0, j1, first_query(causal, j0), 1.0f, dvh, ldkv, set);
            }
        }
    }
    scratch_report(failed, T, S, HS);
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout,
                        const float *probs, const float *q, const float *k,
                        const float *v, int ldq, int ldkv, const int32_t *klen, int causal,
                        int B, int T, int S, int C, int NH, float scale) {
    attention_backward_impl(dq, dk, dv, dout, probs, q, k, v, ldq, ldkv, klen, causal, B, T, S, C, NH, scale, 0, 0);
}

void attention_backward_set(float *dq, float *dk, float *dv, const float *dout, const float *probs, const float *q,
                            const float *k, const float *v, int ldq, int ldkv, const int32_t *klen, int causal, int B,
                            int T, int S, int C, int NH, float scale) {
    attention_backward_impl(dq, dk, dv, dout, probs, q, k, v, ldq, ldkv, klen, causal, B, T, S, C, NH, scale, 1, 0);
}

void attention_backward_set_bf16(float *dq, float *dk, float *dv, const float *dout, const float *probs,
                                 const float *q, const float *k, const float *v, int ldq, int ldkv,
                                 const int32_t *klen, int causal, int B, int T, int S, int C, int NH, float scale) {
    attention_backward_impl(dq, dk, dv, dout, probs, q, k, v, ldq, ldkv, klen, causal, B, T, S, C, NH, scale, 1, 1);
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

/* Fills d [T, Sp] (Sp = PAD_COLS(Sv)) with the squared distances
 * |q_t|² + |k_j|² − 2 q_t·k_j of one (b, h) for the visible keys j < Sv,
 * the cross term a scores product of the operands qa, ky (ky's keys padded
 * to Sp) over whole register blocks of keys; the rest is 0. Causal: only
 * each row block's visible keys (causal row blocks above); the masked rest
 * stays 0. qn, kn: the operands' squared norms (head_rows_norms). */
static void sq_distances(float *d, const head_rows *qa, const head_rows *ky, const float *qn, const float *kn,
                         int causal, int T, int Sv) {
    const int Sp = PAD_COLS(Sv);
    memset(d, 0, sizeof(float) * T * Sp);
    const int RB = block_rows(causal, T);
    for (int t0 = 0; t0 < T; t0 += RB) {
        const int t1 = t0 + RB < T ? t0 + RB : T, nk = block_key_blocks(causal, t1, Sv);
        const int nn = nk < Sv ? nk : Sv;
        scores_block(qa, ky, t0, t1, nk, -2.0f, d, Sp, 1);
        for (int t = t0; t < t1; t++)
#pragma omp simd
            for (int j = 0; j < nn; j++) d[(size_t)t * Sp + j] += qn[t] + kn[j];
    }
}

static void projattn_forward_impl(float *out, float *probs, const float *q, const float *k,
                                  const float *log_sigma, const int32_t *klen, int causal,
                                  int B, int T, int S, int C, int NH, int dots, int lowp) {
    const int HS = C / NH;
    const size_t need = scratch_need(T, S, HS);
    int failed = 0;
#pragma omp parallel for collapse(2) schedule(static) reduction(| : failed)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float *ws = thread_scratch(need);
            if (!ws) {
                failed = 1;
                continue;
            }
            /* Only the visible key prefix: its norms, distances, weights. */
            const int Sv = key_prefix(klen[b], S), Sp = PAD_COLS(Sv);
            float *qn = take(&ws, (size_t)T), *kn = take(&ws, (size_t)Sv);
            const float c = inv_two_sigma2(log_sigma, h);
            float *p = probs + ((size_t)b * NH + h) * T * S;
            const float *qh = HEAD(q, (size_t)b * T, C, h, HS);
            const float *kh = HEAD(k, (size_t)b * S, C, h, HS);
            if (dots) {
                head_norms(qn, qh, T, C, HS);
                head_norms(kn, kh, Sv, C, HS);
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
                const head_rows qa = scores_left(lowp, &ws, qh, C, T, HS);
                const head_rows ky = scores_right(lowp, &ws, kh, C, Sv, HS, Sp);
                head_rows_norms(qn, &qa);
                head_rows_norms(kn, &ky);
                float *sc = take(&ws, (size_t)T * Sp);
                sq_distances(sc, &qa, &ky, qn, kn, causal, T, Sv);
                for (int t = 0; t < T; t++) {
                    const int nvis = visible_keys(klen[b], causal, t, S);   /* the softmax zeroes the rest */
#pragma omp simd
                    for (int j = 0; j < nvis; j++) p[(size_t)t * S + j] = sc[(size_t)t * Sp + j] * -c;
                }
            }
            softmax_rows(p, klen[b], causal, T, S);
            const int RB = block_rows(causal, T);
            const weighted pk = weights_by_rows(lowp, &ws, p, S, T, Sv, kh, C, HS);
            for (int t0 = 0; t0 < T; t0 += RB) {
                const int t1 = t0 + RB < T ? t0 + RB : T;
                weights_block(&pk, t0, t1, block_keys(causal, t1, Sv), 1.0f, HEAD(out, (size_t)b * T, C, h, HS), C,
                              1);   /* sets every row */
            }
        }
    }
    scratch_report(failed, T, S, HS);
}

/* out [B*T, C], probs [B, NH, T, S], q [B*T, C], k [B*S, C] (may be q),
 * log_sigma [NH], klen [B]. logit = −c (|q_t|² + |k_j|² − 2 q_t·k_j). */
void projattn_forward(float *out, float *probs, const float *q, const float *k,
                      const float *log_sigma, const int32_t *klen, int causal,
                      int B, int T, int S, int C, int NH) {
    projattn_forward_impl(out, probs, q, k, log_sigma, klen, causal, B, T, S, C, NH, 0, 0);
}

void projattn_forward_bf16(float *out, float *probs, const float *q, const float *k, const float *log_sigma,
                           const int32_t *klen, int causal, int B, int T, int S, int C, int NH) {
    projattn_forward_impl(out, probs, q, k, log_sigma, klen, causal, B, T, S, C, NH, 0, 1);
}

void projattn_forward_few_queries(float *out, float *probs, const float *q, const float *k,
                                  const float *log_sigma, const int32_t *klen, int causal,
                                  int B, int T, int S, int C, int NH) {
    projattn_forward_impl(out, probs, q, k, log_sigma, klen, causal, B, T, S, C, NH, 1, 0);
}

/* One (b, h) task of projattn_backward; returns its contribution to
 * dlog_sigma[h] (0 when !want_sigma). With g = dlogits [T, S]:
 *   dq_t += 2c Σ_j g_tj k_j − 2c (Σ_j g_tj) q_t
 *   dk_j += 2c Σ_t g_tj q_t − 2c (Σ_t g_tj) k_j + Σ_t p_tj dout_t   (value path)
 *   dlog_sigma += Σ_tj g_tj · (−2 logit_tj) = Σ_tj g_tj · 2c·dist_tj
 * (masked entries have g = 0, so they drop out of the sum).
 * The updates of dq and dk run one after the other, so dq == dk works. */
static double projattn_backward_head(float *ws, float *dq, float *dk, const float *dout,
                                     const float *probs, const float *q, const float *k,
                                     float c, int32_t klen, int causal, int want_sigma,
                                     int b, int h, int T, int S, int C, int NH, int lowp) {
    const int HS = C / NH;
    /* Keys beyond the visible prefix get no gradient: g is [T, Sv]. */
    const int Sv = key_prefix(klen, S), Sp = PAD_COLS(Sv);
    const float *p = probs + ((size_t)b * NH + h) * T * S;
    const float *qh = HEAD(q, (size_t)b * T, C, h, HS);
    const float *kh = HEAD(k, (size_t)b * S, C, h, HS);
    const float *doh = HEAD(dout, (size_t)b * T, C, h, HS);
    const int RB = block_rows(causal, T), KB = block_rows(causal, Sv);
    float *rsum = take(&ws, (size_t)T), *csum = take(&ws, (size_t)Sv);
    const head_rows da = scores_left(lowp, &ws, doh, C, T, HS);
    const head_rows ky = scores_right(lowp, &ws, kh, C, Sv, HS, Sp);
    float *g = take(&ws, (size_t)T * Sp);   /* [T, Sp]: the blocks, then the softmax backward's zeros */
    for (int t0 = 0; t0 < T; t0 += RB) {   /* dP = dout kᵀ (values = keys), visible blocks */
        const int t1 = t0 + RB < T ? t0 + RB : T;
        scores_block(&da, &ky, t0, t1, block_key_blocks(causal, t1, Sv), 1.0f, g, Sp, 1);
    }
    softmax_backward_rows(g, Sp, p, S, klen, causal, T);

    float *const mark = ws;   /* the distances, then each transposed product, take the same room in turn */
    double dsig = 0.0;
    if (want_sigma) {   /* the distances of the forward pass, from the same operands */
        float *qn = rsum, *kn = csum;   /* rsum/csum are written only after this block */
        const head_rows qa = scores_left(lowp, &ws, qh, C, T, HS);
        head_rows_norms(qn, &qa);
        head_rows_norms(kn, &ky);
        float *dist = take(&ws, (size_t)T * Sp);
        sq_distances(dist, &qa, &ky, qn, kn, causal, T, Sv);
        for (int t = 0; t < T; t++)
            for (int j = 0; j < Sv; j++) dsig += (double)g[(size_t)t * Sp + j] * dist[(size_t)t * Sp + j];
        dsig *= 2.0 * c;
        ws = mark;
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
    const weighted gk = weights_by_rows(lowp, &ws, g, Sp, T, Sv, kh, C, HS);
    for (int t0 = 0; t0 < T; t0 += RB) {
        const int t1 = t0 + RB < T ? t0 + RB : T;
        weights_block(&gk, t0, t1, block_keys(causal, t1, Sv), 2.0f * c, dqh, C, 0);
    }
    for (int t = 0; t < T; t++) {
        float *dqt = dqh + (size_t)t * C;
        const float *qt = qh + (size_t)t * C;
        const float a = -2.0f * c * rsum[t];
#pragma omp simd
        for (int d = 0; d < HS; d++) dqt[d] += a * qt[d];
    }
    ws = mark;

    float *dkh = HEAD(dk, (size_t)b * S, C, h, HS);
    const weighted gq = weightsT_by_rows(lowp, &ws, g, Sp, T, Sv, qh, C, HS);
    for (int j0 = 0; j0 < Sv; j0 += KB) {   /* over the queries that see the keys */
        const int j1 = j0 + KB < Sv ? j0 + KB : Sv;
        weightsT_block(&gq, j0, j1, first_query(causal, j0), 2.0f * c, dkh, C, 0);
    }
    for (int j = 0; j < Sv; j++) {
        float *dkj = dkh + (size_t)j * C;
        const float *kj = kh + (size_t)j * C;
        const float a = -2.0f * c * csum[j];
#pragma omp simd
        for (int d = 0; d < HS; d++) dkj[d] += a * kj[d];
    }
    ws = mark;
    const weighted pd = weightsT_by_rows(lowp, &ws, p, S, T, Sv, doh, C, HS);
    for (int j0 = 0; j0 < Sv; j0 += KB) {
        const int j1 = j0 + KB < Sv ? j0 + KB : Sv;
        weightsT_block(&pd, j0, j1, first_query(causal, j0), 1.0f, dkh, C, 0);
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
static void projattn_backward_impl(float *dq, float *dk, float *dlog_sigma, const float *dout, const float *probs,
                                   const float *q, const float *k, const float *log_sigma, const int32_t *klen,
                                   int causal, int B, int T, int S, int C, int NH, int lowp) {
    const int ntask = B * NH;
    const int want_sigma = dlog_sigma != NULL;
    const size_t need = scratch_need(T, S, C / NH);
    int failed = 0;
    double part[PROJ_TASKS_PER_ROUND], sig[NH > 0 ? NH : 1];
    for (int h = 0; h < NH; h++) sig[h] = 0.0;
    for (int base = 0; base < ntask; base += PROJ_TASKS_PER_ROUND) {
        const int n = ntask - base < PROJ_TASKS_PER_ROUND ? ntask - base : PROJ_TASKS_PER_ROUND;
#pragma omp parallel for schedule(static) reduction(| : failed)
        for (int i = 0; i < n; i++) {
            const int b = (base + i) / NH, h = (base + i) % NH;
            float *ws = thread_scratch(need);
            part[i] = 0.0;
            if (!ws) {
                failed = 1;
                continue;
            }
            part[i] = projattn_backward_head(ws, dq, dk, dout, probs, q, k,
                                             inv_two_sigma2(log_sigma, h), klen[b], causal,
                                             want_sigma, b, h, T, S, C, NH, lowp);
        }
        for (int i = 0; i < n; i++) sig[(base + i) % NH] += part[i];
    }
    scratch_report(failed, T, S, C / NH);
    /* Outside the clamp the forward is flat in log σ: no gradient. */
    if (want_sigma)
        for (int h = 0; h < NH; h++)
            if (log_sigma[h] >= PMT_LOG_SIGMA_MIN && log_sigma[h] <= PMT_LOG_SIGMA_MAX) dlog_sigma[h] += (float)sig[h];
}

void projattn_backward(float *dq, float *dk, float *dlog_sigma, const float *dout,
                       const float *probs, const float *q, const float *k,
                       const float *log_sigma, const int32_t *klen, int causal,
                       int B, int T, int S, int C, int NH) {
    projattn_backward_impl(dq, dk, dlog_sigma, dout, probs, q, k, log_sigma, klen, causal, B, T, S, C, NH, 0);
}

void projattn_backward_bf16(float *dq, float *dk, float *dlog_sigma, const float *dout, const float *probs,
                            const float *q, const float *k, const float *log_sigma, const int32_t *klen, int causal,
                            int B, int T, int S, int C, int NH) {
    projattn_backward_impl(dq, dk, dlog_sigma, dout, probs, q, k, log_sigma, klen, causal, B, T, S, C, NH, 1);
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
