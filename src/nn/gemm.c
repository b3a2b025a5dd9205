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
 * Why fp32 stays on dnnl_sgemm: on this machine (2-core AMD EPYC Zen 4,
 * AVX-512 on 256-bit units) one core does 32 fp32 FLOP per cycle, about
 * 105 GFLOP/s per core at its clock, and dnnl_sgemm reaches it: 102–112
 * GFLOP/s per CPU-second on the model's shapes on 1 thread, ~209 GFLOP/s on
 * 2 threads on a quiet machine. A reused fp32 matmul primitive (brgemm) was
 * 0–17% slower per CPU-second on the same shapes and +4% CPU time per base
 * training step (3 alternating runs); it only looked faster (up to 3x on
 * 256×1024×4096 Aᵀ·B) in 2-thread wall-clock timings on a heavily loaded
 * machine. The 300–365 GFLOP/s once reported for "fp32" exceed two cores'
 * fp32 FMA peak; they match bf16 dot products (2x the FMA rate), which is
 * what --precision bf16 runs.
 *
 * Why the weight gradients leave oneDNN without AVX-512 (AMD EPYC Zen 3,
 * avx2, 2 threads, 2026-12-03): oneDNN 2.6's avx2 sgemm runs the products
 * with A transposed (dW = dYᵀ·X over a batch's tokens) at 76–149 GFLOP/s
 * where OpenBLAS's kernels run them at 157–174, and is as fast or faster on
 * the other products of a step; routing those to OpenBLAS took a base step
 * from 725 to 611 ms (pmt_gemm_fp32_backend, docs/speed.md).
 *
 * bf16 (gemm.h): both operands are converted into the workspace (alpha is
 * folded into A's conversion, so every bf16 product is a plain matmul with an
 * optional sum post-op for beta = 1) and multiplied by a bf16 matmul
 * primitive with fp32 output. A primitive is fixed to one (transposes, M, N,
 * K, leading dimensions, beta): runtime dimensions or runtime scales make
 * oneDNN 2.6 fall back from its brgemm kernels to the gemm driver, so
 * primitives are cached per shape (M changes with the batch; building one
 * costs 0.2–0.5 ms against tens of ms for the product).
 *
 * Blocked weights (PMT_LP_B_FIXED): given B in its stored layout, oneDNN's
 * brgemm matmul copies it into its blocked, pair-interleaved layout inside
 * every call. A weight matrix is multiplied three times a step with M up
 * to 4096 (forward, input gradient), so its blocked copy is made once per
 * change instead, by a reorder primitive kept with the copy, and the
 * products read it directly. On AMD EPYC Zen 4 (2 threads, 2026-12-04) a
 * base bf16 step's products fell from 271 to 249 ms for 5.9 ms of reorders
 * and ~25 MB of copies (docs/speed.md). The copies are keyed by the
 * weight's address and layout and renewed after
 * pmt_gemm_bf16_weights_changed, which the model calls whenever a training
 * pass starts on new bf16 weights.
 */
#include "nn/gemm.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gemm_internal.h"
#include "nn/profile.h"

#include <cblas.h>

#ifndef PROJMT_GEMM_DEFAULT
#define PROJMT_GEMM_DEFAULT PMT_GEMM_OPENBLAS
#endif

/* Primitives kept: a training step uses ~20 shapes; batches bring new M. */
enum { MATMUL_CACHE = 64 };

pmt_gemm_backend pmt_gemm_active(void) { return PROJMT_GEMM_DEFAULT; }

int pmt_gemm_available(pmt_gemm_backend backend) {
    return backend == PMT_GEMM_OPENBLAS || backend == PMT_GEMM_ONEDNN;
}

const char *pmt_gemm_name(pmt_gemm_backend backend) {
    return backend == PMT_GEMM_ONEDNN ? "onednn" : "openblas";
}

/* ------------------------------------------------------------------ */
/* the oneDNN engine (gemm_internal.h)                                 */

static dnnl_engine_t g_engine;
static dnnl_stream_t g_stream;
static int g_engine_ok;
static pthread_once_t g_engine_once = PTHREAD_ONCE_INIT;

static void make_engine(void) {
    g_engine_ok = dnnl_engine_create(&g_engine, dnnl_cpu, 0) == dnnl_success &&
                  dnnl_stream_create(&g_stream, g_engine, dnnl_stream_default_flags) == dnnl_success;
}

int pmt_dnnl_cpu(dnnl_engine_t *engine, dnnl_stream_t *stream) {
    pthread_once(&g_engine_once, make_engine);
    if (!g_engine_ok) return -1;
    *engine = g_engine;
    *stream = g_stream;
    return 0;
}

/* ------------------------------------------------------------------ */
/* failures (gemm.h)                                                   */

static _Thread_local char t_error[256];
static _Thread_local int t_failed;

void pmt_gemm_record_error(const char *fmt, ...) {
    if (t_failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_error, sizeof t_error, fmt, ap);
    va_end(ap);
    t_failed = 1;
}

int pmt_gemm_take_error(char *err, size_t errlen) {
    if (!t_failed) return 0;
    if (err && errlen) snprintf(err, errlen, "%s", t_error);
    t_failed = 0;
    return -1;
}

void pmt_gemm_fail_output(float *C, int M, int N, int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = NAN;
}

/* ------------------------------------------------------------------ */
/* this CPU (gemm.h)                                                   */

/* oneDNN's ISA values are nested bit sets: a CPU with more includes the
 * bits of less, so "has X" is "all of X's bits are set". */
static int isa_includes(dnnl_cpu_isa_t feature) {
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), bits = (unsigned)feature;
    return (isa & bits) == bits;
}

const char *pmt_cpu_isa_name(void) {
    static const struct { dnnl_cpu_isa_t isa; const char *name; } names[] = {
        {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
        {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
        {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
        {dnnl_cpu_isa_avx512_core, "avx512_core"},
        {dnnl_cpu_isa_avx512_mic_4ops, "avx512_mic_4ops"},
        {dnnl_cpu_isa_avx512_mic, "avx512_mic"},
        {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
        {dnnl_cpu_isa_avx2, "avx2"},
        {dnnl_cpu_isa_avx, "avx"},
        {dnnl_cpu_isa_sse41, "sse41"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (isa_includes(names[i].isa)) return names[i].name;
    return "generic";
}

const char *pmt_onednn_version(void) {
    static _Thread_local char text[32];   /* the caller's own copy: no thread writes another's */
    const dnnl_version_t *v = dnnl_version();
    snprintf(text, sizeof text, "%d.%d.%d", v->major, v->minor, v->patch);
    return text;
}

int pmt_cpu_has_bf16(void) { return isa_includes(dnnl_cpu_isa_avx512_core_bf16); }

/* AVX-512 (oneDNN's avx512_core), asked once: the effective ISA is fixed
 * at oneDNN's first use. */
static int cpu_avx512(void) {
    static _Atomic int known = -1;
    int v = known;
    if (v < 0) known = v = isa_includes(dnnl_cpu_isa_avx512_core);
    return v;
}

pmt_gemm_backend pmt_gemm_fp32_backend(int ta) {
    if (PROJMT_GEMM_DEFAULT != PMT_GEMM_ONEDNN || !ta) return PROJMT_GEMM_DEFAULT;
    return cpu_avx512() ? PMT_GEMM_ONEDNN : PMT_GEMM_OPENBLAS;
}

int pmt_cpu_has_int8_dot(void) {
    return isa_includes(dnnl_cpu_isa_avx512_core_vnni) || isa_includes(dnnl_cpu_isa_avx2_vnni);
}

/* ------------------------------------------------------------------ */
/* fp32 libraries                                                      */

/* OpenBLAS's thread count is one process-wide number (blas_cpu_number),
 * and its products are not bitwise the same on 1 and 2 threads (the
 * partition changes which kernel computes the edge columns). Its OpenMP
 * build even resets that number to the caller's omp_get_max_threads() at
 * every call. So two translators with different thread counts, calling
 * OpenBLAS from two OS threads at once, changed each other's results
 * (tests/test_api_threads.c, 1 to 2 of 6 rounds on the OpenBLAS build).
 *
 * The gate below makes every call run with its caller's count: calls
 * wanting the same count run together, and a call wanting another count
 * waits until those in flight are done, then sets it. A call from inside an
 * active OpenMP region (a decoder lane) wants 1: OpenBLAS's OpenMP build
 * runs it on the calling thread alone, and the pthread build is told so.
 * While a call waits, new calls queue behind it, so a stream of calls of
 * one count cannot keep another count out for ever. Cost: a mutex per
 * product, uncontended unless translators of different counts overlap. */
static pthread_mutex_t g_blas_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_blas_turn = PTHREAD_COND_INITIALIZER;
static int g_blas_threads;    /* the count the calls in flight run with */
static int g_blas_in_flight;  /* calls inside cblas_sgemm */
static int g_blas_waiting;    /* calls waiting for another count */

static void openblas_enter(int threads) {
    pthread_mutex_lock(&g_blas_lock);
    if (g_blas_in_flight > 0 && (g_blas_threads != threads || g_blas_waiting > 0)) {
        g_blas_waiting++;
        do pthread_cond_wait(&g_blas_turn, &g_blas_lock);
        while (g_blas_in_flight > 0 && g_blas_threads != threads);
        g_blas_waiting--;
    }
    if (g_blas_in_flight == 0 && g_blas_threads != threads) {
        if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
        g_blas_threads = threads;
    }
    g_blas_in_flight++;
    pthread_mutex_unlock(&g_blas_lock);
}

static void openblas_leave(void) {
    pthread_mutex_lock(&g_blas_lock);
    if (--g_blas_in_flight == 0) pthread_cond_broadcast(&g_blas_turn);
    pthread_mutex_unlock(&g_blas_lock);
}

static void sgemm_openblas(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                           const float *B, int ldb, float beta, float *C, int ldc) {
    openblas_enter(omp_in_parallel() ? 1 : omp_get_max_threads());
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
                lda, B, ldb, beta, C, ldc);
    openblas_leave();
}

/* dnnl_sgemm is row-major like cblas. It only fails on invalid arguments
 * (a programmer error here): recorded with the shape (gemm.h, failures). */
static void sgemm_onednn(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc) {
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st != dnnl_success) {
        pmt_gemm_fail_output(C, M, N, ldc);
        pmt_gemm_record_error("internal error: dnnl_sgemm(%c%c, M=%d N=%d K=%d, ld %d/%d/%d) returned status %d",
                              ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, lda, ldb, ldc, (int)st);
    }
}

/* ------------------------------------------------------------------ */
/* cached matmul primitives                                            */

/* One bf16 × bf16 → f32 (or → bf16) primitive and the memory objects it
 * runs on (their data handles are set per call). The key is everything the
 * primitive is fixed to: shapes, strides, beta (accumulate), and the
 * epilogue of the products that write bf16 (bias, ReLU). */
typedef struct {
    int ta, tb, M, N, K, lda, ldb, ldc, accumulate;
    int c_bf16, bias, relu;
    int b_blocked;                 /* B in the primitive's own layout (a blocked weight copy) */
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, bias_mem;
    unsigned long last_use;        /* 0: empty slot */
} matmul_entry;

static matmul_entry g_cache[MATMUL_CACHE];
static unsigned long g_use_clock;
static pthread_mutex_t g_cache_lock = PTHREAD_MUTEX_INITIALIZER;   /* also guards the bf16 workspace */

static void entry_clear(matmul_entry *e) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->a) dnnl_memory_destroy(e->a);
    if (e->b) dnnl_memory_destroy(e->b);
    if (e->c) dnnl_memory_destroy(e->c);
    if (e->bias_mem) dnnl_memory_destroy(e->bias_mem);
    memset(e, 0, sizeof *e);
}

/* The descriptor of a rows × cols matrix stored row-major with leading
 * dimension ld, or transposed (stored cols × rows) when trans. */
static int strided_desc(dnnl_memory_desc_t *md, int rows, int cols, int ld, int trans, dnnl_data_type_t type) {
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, type, strides) == dnnl_success ? 0 : -1;
}

/* A memory object (no data yet) over such a matrix. */
static dnnl_memory_t strided_memory(int rows, int cols, int ld, int trans, dnnl_data_type_t type) {
    dnnl_memory_desc_t md;
    dnnl_memory_t mem = NULL;
    if (strided_desc(&md, rows, cols, ld, trans, type) != 0 ||
        dnnl_memory_create(&mem, &md, g_engine, DNNL_MEMORY_NONE) != dnnl_success)
        return NULL;
    return mem;
}

/* Builds the primitive of e's key: C [M, N] (+)= op(A) [M, K] · op(B) [K, N]. */
static int entry_build(matmul_entry *e) {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    if (pmt_dnnl_cpu(&engine, &stream) != 0) return -1;
    e->a = strided_memory(e->M, e->K, e->lda, e->ta, dnnl_bf16);
    e->c = strided_memory(e->M, e->N, e->ldc, 0, e->c_bf16 ? dnnl_bf16 : dnnl_f32);
    if (e->bias) e->bias_mem = strided_memory(1, e->N, e->N, 0, dnnl_f32);
    if (!e->a || !e->c || (e->bias && !e->bias_mem)) return -1;
    /* B: as stored, or (b_blocked) oneDNN's choice, which the primitive's
     * descriptor then names and e->b takes. */
    dnnl_memory_desc_t b_desc;
    const dnnl_dims_t b_dims = {e->K, e->N};
    if (e->b_blocked ? dnnl_memory_desc_init_by_tag(&b_desc, 2, b_dims, dnnl_bf16, dnnl_format_tag_any) != dnnl_success
                     : strided_desc(&b_desc, e->K, e->N, e->ldb, e->tb, dnnl_bf16) != 0)
        return -1;
    const dnnl_memory_desc_t *a, *c, *bias = NULL;
    dnnl_memory_get_memory_desc(e->a, &a);
    dnnl_memory_get_memory_desc(e->c, &c);
    if (e->bias) dnnl_memory_get_memory_desc(e->bias_mem, &bias);
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int ok = dnnl_matmul_desc_init(&desc, a, &b_desc, bias, c) == dnnl_success &&
             dnnl_primitive_attr_create(&attr) == dnnl_success;
    if (ok && (e->accumulate || e->relu))
        ok = dnnl_post_ops_create(&post) == dnnl_success &&
             (!e->accumulate || dnnl_post_ops_append_sum(post, 1.0f) == dnnl_success) &&
             (!e->relu || dnnl_post_ops_append_eltwise(post, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) == dnnl_success) &&
             dnnl_primitive_attr_set_post_ops(attr, post) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) == dnnl_success &&
         dnnl_primitive_create(&e->prim, pd) == dnnl_success &&
         dnnl_memory_create(&e->b, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), g_engine,
                            DNNL_MEMORY_NONE) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (post) dnnl_post_ops_destroy(post);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return ok ? 0 : -1;
}

/* The cached entry for the key, built into the least recently used slot
 * when missing, or NULL when oneDNN cannot build it (recorded, but for a
 * blocked-B key, whose caller falls back to the plain one). Called with
 * the cache lock held. */
static matmul_entry *cache_get(const matmul_entry *key) {
    matmul_entry *victim = &g_cache[0];
    for (int i = 0; i < MATMUL_CACHE; i++) {
        matmul_entry *e = &g_cache[i];
        if (e->last_use && e->ta == key->ta && e->tb == key->tb && e->M == key->M && e->N == key->N &&
            e->K == key->K && e->lda == key->lda && e->ldb == key->ldb && e->ldc == key->ldc &&
            e->accumulate == key->accumulate && e->c_bf16 == key->c_bf16 && e->bias == key->bias &&
            e->relu == key->relu && e->b_blocked == key->b_blocked) {
            e->last_use = ++g_use_clock;
            return e;
        }
        if (e->last_use < victim->last_use) victim = e;
    }
    entry_clear(victim);
    *victim = *key;
    if (entry_build(victim) != 0) {
        entry_clear(victim);
        if (key->b_blocked) return NULL;
        pmt_gemm_record_error("oneDNN cannot build a bf16 matmul (%c%c, M=%d N=%d K=%d, ld %d/%d/%d) on this CPU (%s)",
                              key->ta ? 'T' : 'N', key->tb ? 'T' : 'N', key->M, key->N, key->K, key->lda, key->ldb,
                              key->ldc, pmt_cpu_isa_name());
        return NULL;
    }
    victim->last_use = ++g_use_clock;
    return victim;
}

/* bf16 NaN in every element of C16 [M, N] (leading dimension ldc): what a
 * failed product that writes bf16 leaves, as pmt_gemm_fail_output for fp32. */
static void fail_output_bf16(uint16_t *C16, int M, int N, int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) C16[(size_t)i * ldc + j] = 0x7fc0;
}

/* ------------------------------------------------------------------ */
/* blocked weight copies (gemm.h, PMT_LP_B_FIXED)                      */

/* A copy of one bf16 weight matrix (B of a product: [K, N] as stored with
 * ldb, transposed when tb) in one blocked layout, and the reorder that
 * makes it, built once. gen: g_weights_gen when the copy was made. */
typedef struct {
    const uint16_t *src;
    int K, N, ldb, tb;
    dnnl_memory_desc_t layout;
    void *data;
    size_t bytes;
    dnnl_primitive_t reorder;
    dnnl_memory_t from, to;
    unsigned long gen, last_use;   /* last_use 0: empty slot */
} blocked_weights;

/* A base model has ~70 weight matrices, used in two layouts (forward and
 * backward); slots beyond that only recycle the least recently used. */
enum { BLOCKED_WEIGHTS = 192 };
static blocked_weights g_blocked[BLOCKED_WEIGHTS];
static unsigned long g_weights_gen = 1, g_blocked_clock;
static size_t g_blocked_bytes;

static void blocked_clear(blocked_weights *w) {
    if (w->reorder) dnnl_primitive_destroy(w->reorder);
    if (w->from) dnnl_memory_destroy(w->from);
    if (w->to) dnnl_memory_destroy(w->to);
    free(w->data);
    g_blocked_bytes -= w->bytes;
    memset(w, 0, sizeof *w);
}

/* Builds w's reorder from the stored matrix to w->layout. */
static int blocked_build(blocked_weights *w) {
    dnnl_memory_desc_t plain;
    dnnl_primitive_desc_t pd = NULL;
    w->bytes = dnnl_memory_desc_get_size(&w->layout);
    w->data = aligned_alloc(64, (w->bytes + 63) & ~(size_t)63);
    if (!w->data) {
        w->bytes = 0;
        return -1;
    }
    g_blocked_bytes += w->bytes;
    int ok = strided_desc(&plain, w->K, w->N, w->ldb, w->tb, dnnl_bf16) == 0 &&
             dnnl_memory_create(&w->from, &plain, g_engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&w->to, &w->layout, g_engine, w->data) == dnnl_success &&
             dnnl_reorder_primitive_desc_create(&pd, &plain, g_engine, &w->layout, g_engine, NULL) == dnnl_success &&
             dnnl_primitive_create(&w->reorder, pd) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    return ok ? 0 : -1;
}

/* The copy of B16 (the key's K, N, ldb, tb) in the layout of the blocked
 * entry e, made again when the weights changed since; NULL when it cannot
 * be made (the caller falls back to the plain product). The reorder is
 * timed as rounding: it is the operand preparation of a step. Called with
 * the cache lock held. */
static const void *blocked_copy(const matmul_entry *e, const uint16_t *B16) {
    const dnnl_memory_desc_t *layout;
    if (dnnl_memory_get_memory_desc(e->b, &layout) != dnnl_success) return NULL;
    blocked_weights *w = NULL, *victim = &g_blocked[0];
    for (int i = 0; i < BLOCKED_WEIGHTS && !w; i++) {
        blocked_weights *x = &g_blocked[i];
        if (x->last_use && x->src == B16 && x->K == e->K && x->N == e->N && x->ldb == e->ldb && x->tb == e->tb &&
            dnnl_memory_desc_equal(&x->layout, layout))
            w = x;
        else if (x->last_use < victim->last_use)
            victim = x;
    }
    if (!w) {
        blocked_clear(victim);
        *victim = (blocked_weights){.src = B16, .K = e->K, .N = e->N, .ldb = e->ldb, .tb = e->tb, .layout = *layout};
        if (blocked_build(victim) != 0) {
            blocked_clear(victim);
            return NULL;
        }
        w = victim;
    }
    w->last_use = ++g_blocked_clock;
    if (w->gen != g_weights_gen) {
        const double t0 = pmt_profile_begin();
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, w->from}, {DNNL_ARG_TO, w->to}};
        const int ok = dnnl_memory_set_data_handle(w->from, (void *)B16) == dnnl_success &&
                       dnnl_primitive_execute(w->reorder, g_stream, 2, args) == dnnl_success &&
                       dnnl_stream_wait(g_stream) == dnnl_success;
        pmt_profile_end(PMT_PHASE_CONVERT, t0);
        if (!ok) return NULL;
        w->gen = g_weights_gen;
    }
    return w->data;
}

void pmt_gemm_bf16_weights_changed(void) {
    pthread_mutex_lock(&g_cache_lock);
    g_weights_gen++;
    pthread_mutex_unlock(&g_cache_lock);
}

size_t pmt_gemm_bf16_packed_bytes(void) {
    pthread_mutex_lock(&g_cache_lock);
    const size_t bytes = g_blocked_bytes;
    pthread_mutex_unlock(&g_cache_lock);
    return bytes;
}

/* C (+)= op(A) · op(B) for bf16 A and B by the cached primitive of this
 * shape (accumulate: beta = 1, else beta = 0), with the cache lock held;
 * key->c_bf16: C is bf16, with the key's bias (the [N] vector `bias`) and
 * ReLU applied before the rounding; key->b_blocked: B is a fixed weight
 * matrix, multiplied through its blocked copy (the plain product when the
 * copy cannot be made). A failure (oneDNN out of memory) leaves C NaN and
 * is recorded. Times the product as the GEMM phase. */
static void matmul_run_key(const matmul_entry *key, const uint16_t *A, const uint16_t *B, const float *bias, void *C) {
    const double t_build = pmt_profile_begin();   /* a missing primitive is built here: part of the product */
    matmul_entry *e = cache_get(key);
    pmt_profile_end(PMT_PHASE_GEMM, t_build);
    const void *b_data = B;
    if (key->b_blocked && (!e || !(b_data = blocked_copy(e, B)))) {
        matmul_entry plain = *key;
        plain.b_blocked = 0;
        matmul_run_key(&plain, A, B, bias, C);
        return;
    }
    const double t0 = pmt_profile_begin();
    int ok = e != NULL;
    if (ok) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c},
                                   {DNNL_ARG_BIAS, e->bias_mem}};
        ok = dnnl_memory_set_data_handle(e->a, (void *)A) == dnnl_success &&
             dnnl_memory_set_data_handle(e->b, (void *)b_data) == dnnl_success &&
             dnnl_memory_set_data_handle(e->c, C) == dnnl_success &&
             (!e->bias || dnnl_memory_set_data_handle(e->bias_mem, (void *)bias) == dnnl_success) &&
             dnnl_primitive_execute(e->prim, g_stream, e->bias ? 4 : 3, args) == dnnl_success &&
             dnnl_stream_wait(g_stream) == dnnl_success;
        if (!ok)
            pmt_gemm_record_error("oneDNN bf16 matmul failed (M=%d N=%d K=%d)", key->M, key->N, key->K);
    }
    pmt_profile_end(PMT_PHASE_GEMM, t0);
    if (ok) return;
    if (key->c_bf16) fail_output_bf16(C, key->M, key->N, key->ldc);
    else pmt_gemm_fail_output(C, key->M, key->N, key->ldc);
}

static void matmul_run(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                       int accumulate, int b_blocked, float *C, int ldc) {
    const matmul_entry key = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
                              .accumulate = accumulate, .b_blocked = b_blocked};
    matmul_run_key(&key, A, B, NULL, C);
}

/* ------------------------------------------------------------------ */
/* bf16                                                                */

/* The precision of the calling thread's products (pmt_gemm_set_precision):
 * per thread, so a training pass switching to bf16 never changes what
 * another thread's products (a translator's, say) run in. The products of
 * a pass are called from the thread that set it. */
static _Thread_local int g_precision = PMT_PRECISION_FP32;
/* The bf16 operand workspace, process-wide and used under g_cache_lock
 * (one training pass at a time converts into it). */
static uint16_t *g_ws_a, *g_ws_b;     /* bf16 copies of the operands */
static size_t g_ws_a_cap, g_ws_b_cap; /* elements */
/* What g_ws_a holds: bf16(scale · src [rows, cols], leading dimension ld),
 * for PMT_LP_SAME_A; src = NULL when nothing. */
static struct {
    const float *src;
    int rows, cols, ld;
    float scale;
} g_ws_a_holds;

int pmt_gemm_bf16_check(int cpu_has_bf16, char *err, size_t errlen) {
    if (cpu_has_bf16) return 0;
    snprintf(err, errlen, "precision bf16 needs a CPU with native bf16 dot products (AVX-512 avx512_bf16, or "
             "AMX); this one has none (projmt does not emulate them): use --precision fp32");
    return -1;
}

int pmt_gemm_bf16_reserve(size_t max_a, size_t max_b, char *err, size_t errlen) {
    if (pmt_gemm_bf16_check(pmt_cpu_has_bf16(), err, errlen) != 0) return -1;
    uint16_t **bufs[2] = {&g_ws_a, &g_ws_b};
    size_t *caps[2] = {&g_ws_a_cap, &g_ws_b_cap}, need[2] = {max_a, max_b};
    for (int i = 0; i < 2; i++) {
        if (need[i] <= *caps[i]) continue;
        uint16_t *buf = aligned_alloc(64, (need[i] * sizeof(uint16_t) + 63) & ~(size_t)63);
        if (!buf) {
            snprintf(err, errlen, "out of memory for the bf16 matrix-product workspace (%zu values)", need[i]);
            return -1;
        }
        free(*bufs[i]);
        *bufs[i] = buf;
        *caps[i] = need[i];
    }
    return 0;
}

int pmt_gemm_set_precision(int precision) {
    const int old = g_precision;
    if (precision == PMT_PRECISION_BF16 && !(g_ws_a && g_ws_b)) {
        pmt_gemm_record_error("internal error: bf16 products without a reserved workspace (pmt_gemm_bf16_reserve)");
        precision = PMT_PRECISION_FP32;
    }
    g_precision = precision == PMT_PRECISION_BF16 ? PMT_PRECISION_BF16 : PMT_PRECISION_FP32;
    pthread_mutex_lock(&g_cache_lock);
    g_ws_a_holds.src = NULL;
    pthread_mutex_unlock(&g_cache_lock);
    return old;
}

int pmt_gemm_precision(void) { return g_precision; }

int pmt_gemm_precision_auto(void) { return pmt_cpu_has_bf16() ? PMT_PRECISION_BF16 : PMT_PRECISION_FP32; }

/* vcvtneps2bf16 rounds to nearest even; the multiply by scale is exact for
 * scale = 1. The tail of a row is a masked vector, so every value takes the
 * same instruction. The scale comes as a float, not a vector: clang
 * outlines an OpenMP loop's body into a function without the target
 * attribute, which may not pass an __m512. */
__attribute__((target("avx512f,avx512bf16,avx512vl")))
static inline void convert_row(uint16_t *y, const float *x, int cols, float scale) {
    const __m512 s = _mm512_set1_ps(scale);
    const __mmask16 tail = (__mmask16)((1u << (cols % 16)) - 1u);
    const int full = cols - cols % 16;
    for (int c = 0; c < full; c += 16) {
        const __m256bh h = _mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(x + c), s));
        _mm256_storeu_si256((__m256i *)(y + c), (__m256i)h);
    }
    if (tail) {
        const __m256bh h = _mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_maskz_loadu_ps(tail, x + full), s));
        _mm256_mask_storeu_epi16(y + full, tail, (__m256i)h);
    }
}

/* Parallel over rows. */
__attribute__((target("avx512f,avx512bf16,avx512vl")))
static void convert_native(uint16_t *dst, const float *src, int rows, int cols, int ld, float scale) {
#pragma omp parallel for schedule(static) if ((long)rows * cols > 65536)
    for (int r = 0; r < rows; r++) convert_row(dst + (size_t)r * cols, src + (size_t)r * ld, cols, scale);
}

__attribute__((target("avx512f,avx512bf16,avx512vl")))
static void convert_row_native(uint16_t *dst, const float *src, int cols, float scale) {
    convert_row(dst, src, cols, scale);
}

uint16_t pmt_bf16_from_float(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                           /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float pmt_bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Without avx512_bf16 (only reached by a caller that skipped the checks:
 * training refuses such a CPU) the portable rounding stands in, never an
 * illegal instruction; it keeps fp32 subnormals. */
static void convert_portable(uint16_t *dst, const float *src, int rows, int cols, int ld, float scale) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) dst[(size_t)r * cols + c] = pmt_bf16_from_float(scale * src[(size_t)r * ld + c]);
}

/* pmt_cpu_has_bf16, asked once: the effective ISA is fixed at oneDNN's first use. */
static int cpu_bf16(void) {
    static _Atomic int known = -1;
    int v = known;
    if (v < 0) known = v = pmt_cpu_has_bf16();
    return v;
}

void pmt_bf16_convert(uint16_t *dst, const float *src, int rows, int cols, int ld, float scale) {
    if (cpu_bf16()) convert_native(dst, src, rows, cols, ld, scale);
    else convert_portable(dst, src, rows, cols, ld, scale);
}

void pmt_bf16_convert_row(uint16_t *dst, const float *src, int cols, float scale) {
    if (cpu_bf16()) convert_row_native(dst, src, cols, scale);
    else convert_portable(dst, src, 1, cols, cols, scale);
}

/* C = alpha·op(A)·op(B) + beta·C, beta ∈ {0, 1}, on bf16 copies of A and B:
 * the caller's (A16, B16: dense, alpha folded into A16), or this layer's
 * workspace, which the operand is converted into (dense too). A's
 * conversion is skipped when PMT_LP_SAME_A and the workspace holds this
 * very A already; PMT_LP_B_FIXED with B16 multiplies B's blocked copy. The
 * lock covers the workspace, the primitive cache and the blocked copies. */
static void sgemm_bf16(int flags, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                       const uint16_t *A16, int lda, const float *B, const uint16_t *B16, int ldb, float beta,
                       float *C, int ldc) {
    const int a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
    if ((!A16 && (size_t)a_rows * a_cols > g_ws_a_cap) || (!B16 && (size_t)b_rows * b_cols > g_ws_b_cap)) {
        pmt_gemm_fail_output(C, M, N, ldc);
        pmt_gemm_record_error("internal error: bf16 product M=%d N=%d K=%d exceeds the reserved workspace (%zu / %zu "
                              "values)", M, N, K, g_ws_a_cap, g_ws_b_cap);
        return;
    }
    pthread_mutex_lock(&g_cache_lock);
    const double t_convert = pmt_profile_begin();
    if (!A16 && !((flags & PMT_LP_SAME_A) && g_ws_a_holds.src == A && g_ws_a_holds.rows == a_rows && g_ws_a_holds.cols == a_cols &&
                  g_ws_a_holds.ld == lda && g_ws_a_holds.scale == alpha)) {
        pmt_bf16_convert(g_ws_a, A, a_rows, a_cols, lda, alpha);
        g_ws_a_holds.src = A;
        g_ws_a_holds.rows = a_rows;
        g_ws_a_holds.cols = a_cols;
        g_ws_a_holds.ld = lda;
        g_ws_a_holds.scale = alpha;
    }
    if (!B16) pmt_bf16_convert(g_ws_b, B, b_rows, b_cols, ldb, 1.0f);
    pmt_profile_end(PMT_PHASE_CONVERT, t_convert);
    matmul_run(ta, tb, M, N, K, A16 ? A16 : g_ws_a, a_cols, B16 ? B16 : g_ws_b, b_cols, beta != 0.0f,
               B16 && (flags & PMT_LP_B_FIXED), C, ldc);
    pthread_mutex_unlock(&g_cache_lock);
}

/* ------------------------------------------------------------------ */
/* entry points                                                        */

static void sgemm_on(pmt_gemm_backend backend, int flags, int ta, int tb, int M, int N, int K, float alpha,
                     const float *A, const uint16_t *A16, int lda, const float *B, const uint16_t *B16, int ldb,
                     float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (!pmt_gemm_available(backend)) {
        pmt_gemm_fail_output(C, M, N, ldc);
        pmt_gemm_record_error("internal error: matrix-product backend %d is not built in", (int)backend);
        return;
    }
    if (K <= 0) {   /* C = beta · C: the libraries disagree on this edge, so it is done here */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    pmt_profile_add_flops(2.0 * M * (double)N * K);
    if (g_precision == PMT_PRECISION_BF16 && (beta == 0.0f || beta == 1.0f)) {
        sgemm_bf16(flags, ta, tb, M, N, K, alpha, A, A16, lda, B, B16, ldb, beta, C, ldc);   /* times its phases */
        return;
    }
    const double t0 = pmt_profile_begin();
    if (!A || !B) {
        pmt_gemm_fail_output(C, M, N, ldc);
        pmt_gemm_record_error("internal error: an fp32 product was given only bf16 operands");
    } else {
        if (backend == PMT_GEMM_ONEDNN)
            sgemm_onednn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        else
            sgemm_openblas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
    pmt_profile_end(PMT_PHASE_GEMM, t0);
}

void pmt_sgemm_on(pmt_gemm_backend backend, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    sgemm_on(backend, 0, ta, tb, M, N, K, alpha, A, NULL, lda, B, NULL, ldb, beta, C, ldc);
}

void pmt_sgemm_lp(int flags, int ta, int tb, int M, int N, int K, float alpha, const float *A, const uint16_t *A16,
                  int lda, const float *B, const uint16_t *B16, int ldb, float beta, float *C, int ldc) {
    sgemm_on(pmt_gemm_fp32_backend(ta), flags, ta, tb, M, N, K, alpha, A, A16, lda, B, B16, ldb, beta, C, ldc);
}

/* The products whose epilogue adds a bias (and a ReLU) and writes fp32 or
 * bf16 C: pmt_gemm_bf16_out, pmt_gemm_bf16_bias. */
static void bf16_epilogue_product(const char *what, int flags, int ta, int tb, int M, int N, int K,
                                  const uint16_t *A16, const uint16_t *B16, const float *bias, int relu, int c_bf16,
                                  void *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (g_precision != PMT_PRECISION_BF16 || K <= 0 || !A16 || !B16) {
        if (c_bf16) fail_output_bf16(C, M, N, ldc);
        else pmt_gemm_fail_output(C, M, N, ldc);
        pmt_gemm_record_error("internal error: a %s product (M=%d N=%d K=%d) outside the bf16 precision or without "
                              "bf16 operands", what, M, N, K);
        return;
    }
    pmt_profile_add_flops(2.0 * M * (double)N * K);
    const matmul_entry key = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = ta ? M : K, .ldb = tb ? K : N,
                              .ldc = ldc, .c_bf16 = c_bf16, .bias = bias != NULL, .relu = relu != 0,
                              .b_blocked = (flags & PMT_LP_B_FIXED) != 0};
    pthread_mutex_lock(&g_cache_lock);
    matmul_run_key(&key, A16, B16, bias, C);
    pthread_mutex_unlock(&g_cache_lock);
}

void pmt_gemm_bf16_out(int flags, int ta, int tb, int M, int N, int K, const uint16_t *A16, const uint16_t *B16,
                       const float *bias, int relu, uint16_t *C16, int ldc) {
    bf16_epilogue_product("bf16-output", flags, ta, tb, M, N, K, A16, B16, bias, relu, 1, C16, ldc);
}

void pmt_gemm_bf16_bias(int flags, int ta, int tb, int M, int N, int K, const uint16_t *A16, const uint16_t *B16,
                        const float *bias, float *C, int ldc) {
    bf16_epilogue_product("bf16 biased", flags, ta, tb, M, N, K, A16, B16, bias, 0, 0, C, ldc);
}

void pmt_sgemm_in_task(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                       int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0 || K <= 0) return;
    if (PROJMT_GEMM_DEFAULT == PMT_GEMM_ONEDNN) {
        sgemm_onednn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, C, ldc);
}

void pmt_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc) {
    pmt_sgemm_on(pmt_gemm_fp32_backend(ta), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
