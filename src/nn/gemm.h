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
 * Precision (training's --precision): with pmt_gemm_set_precision(BF16),
 * pmt_sgemm / pmt_sgemm_on round both operands to bfloat16 (round to
 * nearest even) into a workspace this layer owns, and multiply them with a
 * oneDNN matmul primitive (avx512_bf16 dot products, fp32 accumulation, fp32
 * C) — whichever fp32 backend is built, since oneDNN is always linked. The
 * workspace is reserved before the first step (pmt_gemm_bf16_reserve, which
 * refuses a CPU without native bf16: there is no emulation); products never
 * allocate. pmt_sgemm_in_task stays fp32 (the small attention products).
 *
 * State: the precision is per thread (a training pass switching to bf16
 * never changes what another thread's products run in, a translator's
 * say), and so is the recorded failure below. The workspace, the cache of
 * matmul primitives and the blocked weight copies are process-wide, under
 * one lock, until exit; the workspace only grows. bf16 products from
 * several threads at once are serialised on that lock (each one uses
 * every thread anyway); the reservation is meant for serial code (the
 * model switches its thread's precision around a training step's forward
 * and backward). Who rounds which operand in a training pass:
 * model/model.c's top comment.
 *
 * Layout: row-major; op(A) [M, K], op(B) [K, N], C [M, N] with leading
 * dimensions lda/ldb/ldc as in cblas. C = alpha·op(A)·op(B) + beta·C; with
 * beta = 0 C is only written (NaN in C does not propagate).
 *
 * Failures: no product aborts or exits. oneDNN can fail at run time (a
 * primitive it cannot build for a shape on this CPU, out of memory); a
 * failed product fills its output with NaN (nothing wrong passes for a
 * result) and records the calling thread's first failure, which
 * pmt_gemm_take_error hands to whoever can report it (the decoder after a
 * step, the training loop after a step). The low-precision products of
 * inference (second half of this header, nn/gemm_lowp.c) also return -1.
 *
 * "This CPU" is oneDNN's effective ISA (dnnl_get_effective_cpu_isa), which
 * ONEDNN_MAX_CPU_ISA caps: every feature check of projmt asks it, so one
 * capped run behaves as the whole program would on the older CPU.
 */
#ifndef PROJMT_GEMM_H
#define PROJMT_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

typedef enum pmt_gemm_backend {
    PMT_GEMM_OPENBLAS = 0,
    PMT_GEMM_ONEDNN = 1,
    PMT_GEMM_BACKENDS
} pmt_gemm_backend;

/* C [M, N] = alpha · op(A) · op(B) + beta · C with the backend
 * pmt_gemm_fp32_backend(trans_a) names (the active one, but for the
 * transposed-A products on a CPU without AVX-512); trans_a/trans_b nonzero
 * means the operand is stored transposed. */
void pmt_sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
               const float *B, int ldb, float beta, float *C, int ldc);
/* The same with an explicit backend (benchmarks; must be available). */
void pmt_sgemm_on(pmt_gemm_backend backend, int trans_a, int trans_b, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* How the bf16 products may treat their operands (the flags of
 * pmt_sgemm_lp, pmt_gemm_bf16_out and pmt_gemm_bf16_bias; 0: no promise).
 *   PMT_LP_SAME_A: A is the previous product's A, unchanged since (the two
 *     backward products of a linear layer share dout), so in bf16 its
 *     converted copy is used again when the stored matrix (pointer, shape,
 *     leading dimension) and alpha match; the caller must know that
 *     previous product ran.
 *   PMT_LP_B_FIXED: B16 is a weight matrix that stays unchanged until the
 *     next pmt_gemm_bf16_weights_changed. This layer then keeps a copy of
 *     it in the blocked layout the matmul primitive asks for (oneDNN's
 *     "any" weights format), made by one reorder per matrix, layout and
 *     change, so the product skips its own per-call packing of B: on AMD
 *     EPYC Zen 4 the forward products of a base step ran 10-25 % faster
 *     (docs/speed.md). The same bits as without the flag. Ignored without
 *     B16; falls back to the plain product when the copy cannot be made. */
enum { PMT_LP_SAME_A = 1, PMT_LP_B_FIXED = 2 };

/* pmt_sgemm whose operands may come with their
 * bf16 copies, kept by the caller so that no product converts the same
 * matrix twice: A16 = bf16(alpha · A) and B16 = bf16(B), dense (leading
 * dimension = the stored width, rows as stored), each NULL when there is
 * none. In the bf16 precision a given copy replaces the conversion of its
 * operand (which may then be NULL); the result is bit-identical to
 * converting here. In fp32 the copies and the flags are ignored and A, B
 * are required. flags: PMT_LP_* above. */
void pmt_sgemm_lp(int flags, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                  const uint16_t *A16, int lda, const float *B, const uint16_t *B16, int ldb, float beta, float *C,
                  int ldc);

/* bf16 precision only: C16 [M, N] (bf16, leading dimension ldc) =
 * bf16(op(A16) · op(B16) + bias), with ReLU before the rounding when relu:
 * one oneDNN matmul that adds the bias, applies the ReLU and rounds in its
 * epilogue, so that a kernel reading bf16 needs no fp32 result and no pass
 * over it (the FFN's hidden layer, the logits). A16, B16 are bf16 copies as
 * in pmt_sgemm_lp (dense, alpha 1), both required; bias [N] f32 or NULL;
 * flags: PMT_LP_B_FIXED or 0. Outside the bf16 precision, or on failure:
 * C16 is bf16 NaN and the error recorded (pmt_gemm_take_error). */
void pmt_gemm_bf16_out(int flags, int trans_a, int trans_b, int M, int N, int K, const uint16_t *A16,
                       const uint16_t *B16, const float *bias, int relu, uint16_t *C16, int ldc);

/* The same with an fp32 C = op(A16) · op(B16) + bias (bias [N], or NULL):
 * the bias added in the epilogue, instead of a broadcast pass over C before
 * a product that reads C back (beta = 1). */
void pmt_gemm_bf16_bias(int flags, int trans_a, int trans_b, int M, int N, int K, const uint16_t *A16,
                        const uint16_t *B16, const float *bias, float *C, int ldc);

/* Every weight matrix given with PMT_LP_B_FIXED may have changed (the
 * model calls it when a training pass starts on new bf16 weights): the
 * blocked copies are made again at their next use. Serial code only. */
void pmt_gemm_bf16_weights_changed(void);

/* Bytes held by the blocked weight copies (memory accounting, tests). */
size_t pmt_gemm_bf16_packed_bytes(void);

/* For the small per-task products inside an OpenMP parallel region (the
 * pooling-attention kernels run one per sentence and head): the active
 * backend on the calling thread only (both libraries run single-threaded
 * inside a parallel region), without the per-step phase profile and without
 * touching thread counts. M, N or K <= 0 does nothing (C untouched). */
void pmt_sgemm_in_task(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc);
/* The backend of the build (fixed at build time): pmt_sgemm's, but for
 * the exception of pmt_gemm_fp32_backend. */
pmt_gemm_backend pmt_gemm_active(void);
/* The backend an fp32 product of pmt_sgemm / pmt_sgemm_lp runs on: the
 * active one, except that in a oneDNN build on a CPU without AVX-512
 * (oneDNN's effective ISA avx2 or older) a product with A transposed —
 * the weight gradients dW = dYᵀ·X, K = the batch's tokens — runs on
 * OpenBLAS. Why: oneDNN 2.6's avx2 sgemm takes 1.1–2.2× as long as
 * OpenBLAS's Haswell/Zen kernels on exactly those shapes (AMD EPYC Zen 3,
 * 2 threads: dW of [1024, 256] over 2,046 tokens 76 against 164 GFLOP/s,
 * docs/speed.md), while it is as fast or faster on every other product of
 * a step. A function of the ISA and the call site only, so a run (and its
 * resume) always multiplies each product on the same library. */
pmt_gemm_backend pmt_gemm_fp32_backend(int trans_a);
/* 1 when the backend is linked into this build. */
int pmt_gemm_available(pmt_gemm_backend backend);
/* "onednn" or "openblas". */
const char *pmt_gemm_name(pmt_gemm_backend backend);

/* Whether bf16 products can run on a CPU that has (1) or lacks (0) native
 * bf16 dot products: 0, or -1 with a message naming the missing feature.
 * Takes the feature as a parameter so the refusal is testable anywhere. */
int pmt_gemm_bf16_check(int cpu_has_bf16, char *err, size_t errlen);
/* Checks this CPU (pmt_gemm_bf16_check with oneDNN's ISA query) and grows
 * the bf16 workspace to hold an A operand of max_a and a B operand of max_b
 * elements. 0, or -1 with err (no avx512_bf16, out of memory). */
int pmt_gemm_bf16_reserve(size_t max_a, size_t max_b, char *err, size_t errlen);
/* Sets the precision of pmt_sgemm/pmt_sgemm_on (pmt_precision) and returns
 * the previous one. BF16 needs a reservation: without one the precision
 * stays fp32 and the error is recorded (pmt_gemm_take_error); products
 * whose beta is not 0 or 1 stay fp32. */
int pmt_gemm_set_precision(int precision);
int pmt_gemm_precision(void);
/* What precision auto (core/config.h) means on this CPU: PMT_PRECISION_BF16
 * with native bf16 dot products (pmt_cpu_has_bf16), else FP32. */
int pmt_gemm_precision_auto(void);

/* bf16: the upper 16 bits of x rounded to nearest even (NaN stays NaN). */
uint16_t pmt_bf16_from_float(float x);
float pmt_bf16_to_float(uint16_t h);

/* dst [rows, cols] (dense) = bf16(scale · src) for src [rows, cols] with
 * leading dimension ld, rounded to nearest even with the CPU's conversion
 * (vcvtneps2bf16: NaN stays NaN; fp32 subnormals become ±0). The
 * vectorised form of pmt_bf16_from_float, which stands in (keeping
 * subnormals) on a CPU without avx512_bf16. */
void pmt_bf16_convert(uint16_t *dst, const float *src, int rows, int cols, int ld, float scale);
/* One row of pmt_bf16_convert on the calling thread (for kernels that round
 * a row they have just computed, inside their own parallel loop). */
void pmt_bf16_convert_row(uint16_t *dst, const float *src, int cols, float scale);

/* The calling thread's first product or attention-kernel failure (ops.h)
 * since it was last taken:
 * 0 when there was none, else -1 with its message in err (err may be NULL)
 * and the record cleared. */
int pmt_gemm_take_error(char *err, size_t errlen);
/* Records a failure as the calling thread's error (the first one sticks
 * until pmt_gemm_take_error takes it): a product's, an attention kernel's
 * (nn/ops.h) or a model pass's (model/model.h), so that the one check a
 * caller makes after a pass or a decoder step sees them all. */
void pmt_gemm_record_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------ */
/* This CPU, as oneDNN sees it (nn/gemm.c)                             */

/* oneDNN's effective ISA by name: "avx2", "avx2_vnni", "avx512_core",
 * "avx512_core_vnni", "avx512_core_bf16", "avx512_core_amx", ... */
const char *pmt_cpu_isa_name(void);
/* The linked oneDNN's version, "2.6.3". */
const char *pmt_onednn_version(void);
/* 1 when the ISA has native bf16 dot products (avx512_bf16 or AMX). */
int pmt_cpu_has_bf16(void);
/* 1 when the ISA has int8 dot products that accumulate without
 * saturating (AVX-512 VNNI, AVX-VNNI or AMX). */
int pmt_cpu_has_int8_dot(void);

/* ------------------------------------------------------------------ */
/* Low-precision products of inference (nn/gemm_lowp.c)                */
/*
 * int8 (`projmt export --weights int8`, or --compute-type int8): why int8
 * here: a decoding step multiplies a handful of rows by every weight
 * matrix (the V x C logits matrix above all), so it is bound by reading
 * the weights; int8 weights are a quarter of the bytes.
 *
 * Scheme (as CTranslate2's int8): weights per output row, symmetric
 * (w[o][i] ≈ w_scale[o]·wq[o][i], pmt_int8_quantize_rows); activations
 * quantised per input row on the fly, the same way; exact int32
 * accumulation; out[n][o] = x_scale[n]·w_scale[o]·acc[n][o] + b[o].
 *
 * The integer products are oneDNN's, and exact on every ISA:
 *   - with int8 dot products (VNNI, AMX): s8 × s8 as they are;
 *   - without (AVX2, AVX-512 without VNNI): oneDNN's instruction sequence
 *     (vpmaddubsw) sums pairs of u8·s8 products in 16 bits, which saturate
 *     for large weights (oneDNN issue #717). The weights are split as
 *     wq = 2·hi + lo with hi in [-64, 63] and lo in {0, 1}: neither part can
 *     saturate, and acc = 2·acc_hi + acc_lo gives the same integers.
 * So every ISA gives the same bits (test_lowp_decode, under each cap).
 *
 * bf16 (`projmt export --weights bf16`): weights and activations rounded
 * to bfloat16, fp32 accumulation, through oneDNN's matmul primitive — only
 * on a CPU with native bf16 dot products; elsewhere the caller multiplies
 * the fp32 widening of the bf16 weights (the same weights, exact).
 *
 * Ownership: the products never allocate but for a packed matmul's
 * primitive of a row count it has not multiplied yet; the caller owns
 * every other buffer.
 */

/* Per-row symmetric int8 quantisation, the one of weights (export, the
 * decoder) and of activations: scale[r] = max_i |w[r][i]| / 127 and
 * q[r][i] = w[r][i]·127/max rounded to nearest, ties to even, in [-127, 127]
 * (an all-zero row: scale 0, q 0). Inline arithmetic (no libm calls), so
 * the activation rows of every product vectorise. */
void pmt_int8_quantize_rows(int8_t *q, float *scale, const float *w, int rows, int cols);
/* q, scale → w [rows, cols]. */
void pmt_int8_dequantize_rows(float *w, const int8_t *q, const float *scale, int rows, int cols);

/* How the int8 products run on this CPU (fixed per process, from the ISA):
 * a one-line description for verbose output and `projmt bench`. */
const char *pmt_int8_path_name(void);
/* Products that could not use their packed primitive and ran through the
 * one-call integer GEMM instead (same bits, slower), since the start. */
long pmt_int8_fallback_count(void);

/* Per-row int8 scratch for up to N rows of up to IN inputs and OUT outputs
 * (N rounded up by pmt_int8_matmul_rows for the packed form): xq [N*IN],
 * x_scale [N], acc [N*OUT] and acc_lo [N*OUT] (the split form's second
 * product: needed only when !pmt_cpu_has_int8_dot(), may be NULL else). */
typedef struct pmt_int8_scratch {
    int8_t *xq;
    float *x_scale;
    int32_t *acc, *acc_lo;
} pmt_int8_scratch;

/* The same product with the weights packed once into the layout of
 * oneDNN's int8 matmul: dnnl_gemm_s8s8s32 packs them on every call, which
 * is most of the work at a decoding step's few rows. oneDNN 2.6 only picks
 * its brgemm kernels for a fixed row count, so the matmul keeps one
 * primitive per row count up to 64 and per multiple of 8 above (see
 * pmt_int8_matmul_rows), built on first use (~0.15 ms each); a call
 * multiplies its rows padded up to that count. A row count whose
 * primitive wants another weights layout (AMX picks its own for larger row
 * counts) gets the weights packed again in that layout, once; one whose
 * primitive oneDNN cannot build runs through the one-call form. Exact
 * integer accumulation either way: the bits of linear_forward_int8.
 * Opaque; owns its copies of the weights, or shares another's. One matmul
 * must not run on two threads at once (its primitives' memory objects and
 * scratchpad are its own); matmuls sharing weights may. */
typedef struct pmt_int8_matmul pmt_int8_matmul;
/* Packs wq [OUT, IN] for products of up to max_rows rows. NULL with err. */
pmt_int8_matmul *pmt_int8_matmul_init(const int8_t *wq, int IN, int OUT, int max_rows, char *err, size_t errlen);
/* A matmul over base's weights and the layouts base has packed so far
 * (read, never written: a layout only this one's row counts want is
 * packed into its own copy), with its own primitives and scratchpad, for
 * products of up to max_rows rows on another thread than base's. Why: the
 * search's lanes multiply by the same weights; one packed copy instead of
 * one per lane (~8 MB for the shipped model) stays in the shared cache.
 * base must outlive it and must not be freed while it runs. NULL with err. */
pmt_int8_matmul *pmt_int8_matmul_init_sharing(const pmt_int8_matmul *base, int max_rows, char *err, size_t errlen);
void pmt_int8_matmul_free(pmt_int8_matmul *mm);
/* out [N, OUT] = in [N, IN] · (w_scale ⊙ wq [OUT, IN])ᵀ + b [OUT] (b may be
 * NULL) for mm's wq, in one dnnl_gemm_s8s8s32 call (per weights part) that
 * packs the weights each time: the reference of the packed form below, and
 * its fallback. N <= max_rows; scratch as below. 0, or -1 (out NaN, the
 * message for pmt_gemm_take_error). */
int linear_forward_int8(float *out, const float *in, const pmt_int8_matmul *mm, const float *w_scale, const float *b,
                        int N, const pmt_int8_scratch *scratch);
/* Rows the scratch of linear_forward_int8_packed needs for N <= max_rows:
 * N itself up to 64 rows, else N rounded up to a multiple of 8 (xq, acc and
 * acc_lo of that many rows). */
int pmt_int8_matmul_rows(int N);
/* linear_forward_int8 with the packed weights of mm (w_scale, b as there);
 * scratch rows: pmt_int8_matmul_rows(max_rows). N above the matmul's
 * max_rows is an error that leaves out untouched. 0, or -1 as
 * linear_forward_int8. */
int linear_forward_int8_packed(float *out, const float *in, pmt_int8_matmul *mm, const float *w_scale,
                               const float *b, int N, const pmt_int8_scratch *scratch);

/* What linear_forward_int8_rows does with product row c (c < N): why: a
 * decoding step's products are a few rows each, and a separate pass for
 * the live rows' gather and scatter, the ReLU, the residual add or the
 * logits' normaliser reads the whole output again from a cache level
 * further out; here each row is finished while it is in registers or L1.
 * The same bits as linear_forward_int8_packed followed by those passes. */
typedef enum pmt_int8_epilogue {
    PMT_INT8_STORE,   /* out row = x_scale·w_scale·acc + b */
    PMT_INT8_RELU,    /* out row = max(0, that) (relu_forward's test: NaN → 0) */
    PMT_INT8_ADD      /* out row += that (residual_forward's sum) */
} pmt_int8_epilogue;
/* A consumer of finished product rows: row c (c < N) of a call, valid
 * during the call only. */
typedef void (*pmt_row_visit)(void *ctx, int c, const float *row);
typedef struct pmt_int8_rows {
    const int32_t *in_rows;    /* NULL, or row c reads in + in_rows[c]·IN */
    const int32_t *out_rows;   /* NULL, or row c lands at out + out_rows[c]·OUT; distinct rows */
    pmt_int8_epilogue op;
    float *lse;                /* NULL, or [N]: lse[c] = log Σ_o exp(out row c) after the op (ops_log_sum_exp_row) */
    /* NULL, or each finished row is handed to visit instead of being
     * stored: the rows are finished one after another on the calling
     * thread into row_buf [OUT] (the caller's; out and out_rows are unused,
     * op is STORE or RELU), lse[c] is set, then visit(visit_ctx, c, row_buf)
     * runs. Why: a consumer that needs a few values of each row (the
     * search's top tokens) reads it while it is in L1, and no [N, OUT]
     * output is written and read back from memory. */
    pmt_row_visit visit;
    void *visit_ctx;
    float *row_buf;
} pmt_int8_rows;
/* linear_forward_int8_packed over rows chosen by how (NULL: rows 0..N-1,
 * stored). The caller owns everything: how and its maps are only read
 * during the call; in and out hold at least every row the maps name, and
 * out rows not named are untouched. Every input row is quantised before
 * any output row is written, so in may be out. 0, or -1 with the message
 * for pmt_gemm_take_error: the named out rows and lse NaN (no row
 * visited), except when N exceeds the matmul's rows (out and lse
 * untouched, as linear_forward_int8_packed). */
int linear_forward_int8_rows(float *out, const float *in, pmt_int8_matmul *mm, const float *w_scale, const float *b,
                             int N, const pmt_int8_scratch *scratch, const pmt_int8_rows *how);

/* A bf16 weight matrix [OUT, IN] and the oneDNN matmul that multiplies by
 * it (any number of rows, bias optional). Opaque; owns its copy of w. */
typedef struct pmt_bf16_matmul pmt_bf16_matmul;
/* Rounds w [OUT, IN] to bf16 and builds the matmul. NULL with err when
 * oneDNN refuses (or out of memory). */
pmt_bf16_matmul *pmt_bf16_matmul_init(const float *w, int IN, int OUT, int with_bias, char *err, size_t errlen);
void pmt_bf16_matmul_free(pmt_bf16_matmul *mm);
/* Bytes of scratchpad linear_forward_bf16 needs for mm (may be 0). */
size_t pmt_bf16_matmul_scratchpad_bytes(const pmt_bf16_matmul *mm);
/* out [N, OUT] = bf16(in [N, IN]) · W_bf16ᵀ + b (b given iff with_bias,
 * else an error); xs is caller scratch of N*IN bf16 values, pad of
 * pmt_bf16_matmul_scratchpad_bytes(mm) bytes (64-byte aligned). Matmuls
 * may run concurrently on different threads with different xs and pad.
 * 0, or -1 as linear_forward_int8. */
int linear_forward_bf16(float *out, const float *in, const pmt_bf16_matmul *mm, const float *b, int N,
                        uint16_t *xs, void *pad);

/* Test hook: makes the low-precision products behave as on a CPU where
 * oneDNN refuses some shapes, for products of at least `rows` rows
 * (PMT_LOWP_HOOK_OFF: normal). PROJMT_TEST_LOWP=<mode>:<rows> in the
 * environment sets it at the first int8 or bf16 matmul (modes: relayout,
 * no-packed, fail), so the command-line and server tests reach it too. */
typedef enum pmt_lowp_hook {
    PMT_LOWP_HOOK_OFF = 0,
    PMT_LOWP_HOOK_RELAYOUT,    /* each such row count's primitive "wants" its own weights layout */
    PMT_LOWP_HOOK_NO_PACKED,   /* their packed primitives cannot be built (the one-call form runs) */
    PMT_LOWP_HOOK_FAIL         /* their products fail outright (as if oneDNN could build nothing) */
} pmt_lowp_hook;
void pmt_lowp_set_test_hook(pmt_lowp_hook mode, int rows);
#endif
