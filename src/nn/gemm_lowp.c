/*
 * gemm_lowp.c — the low-precision products of inference (declared in
 * nn/gemm.h, second half). The integer products are oneDNN's: the
 * decoder's through int8 matmul primitives over weights packed once
 * (linear_forward_int8_packed), and the one-call form through
 * dnnl_gemm_s8s8s32 (row-major, like dnnl_sgemm; it packs the weights on
 * every call: the reference the packed form is tested against, and the
 * packed form's fallback for a row count oneDNN cannot build a primitive
 * for). Quantising and rescaling are plain loops shared by the two.
 *
 * Why the split weights: without int8 dot products (VNNI) oneDNN's s8 × s8
 * sums pairs of u8·s8 products in a 16-bit register, which saturates once
 * |w| > 64 (oneDNN issue #717; seen as 3 % off encoder outputs on AVX2 and
 * AVX-512 without VNNI). Each weight matrix is then held as two parts,
 * hi = floor(wq / 2) in [-64, 63] and lo = wq − 2·hi in {0, 1}; each part's
 * pair sums stay within ±32640, and 2·acc_hi + acc_lo is the exact
 * integer product: twice the integer work, and half the weight bytes of
 * fp32 (docs/isa.md measures it against fp32 under each ISA cap).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <oneapi/dnnl/dnnl.h>

#include "nn/gemm.h"
#include "nn/gemm_internal.h"
#include "nn/ops_internal.h"

/* ------------------------------------------------------------------ */
/* quantisation                                                        */

/* 1.5·2^23: adding and subtracting it rounds |v| < 2^22 to the nearest
 * integer, ties to even, in the default rounding mode, with two vector
 * instructions (nearbyintf is a libm call without -ffast-math). */
#define ROUND_MAGIC 12582912.0f

static inline void quantize_row(int8_t *q, float *scale, const float *row, int cols) {
    float amax = 0.0f;
    /* A max is the same in any order (a NaN loses every comparison in each
     * lane as it did in the serial loop), so the reduction may run in
     * vector lanes: without the pragma it ran one dependent compare per
     * element, most of a decoding step's quantisation time. */
#pragma omp simd reduction(max : amax)
    for (int i = 0; i < cols; i++) {
        const float a = row[i] < 0.0f ? -row[i] : row[i];
        amax = a > amax ? a : amax;
    }
    *scale = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < cols; i++) {
        float v = row[i] * inv;
        v = v < 127.0f ? v : 127.0f;      /* also NaN → 127: never an undefined conversion */
        v = v > -127.0f ? v : -127.0f;
        q[i] = (int8_t)(int)((v + ROUND_MAGIC) - ROUND_MAGIC);
    }
}

/* Row c of a product: row map[c] of its buffer, or row c without a map. */
static inline size_t mapped_row(const int32_t *map, int c) { return map ? (size_t)map[c] : (size_t)c; }

/* q [N, cols], scale [N] = the quantised rows in_rows[c] (or c) of in. */
static void quantize_mapped_rows(int8_t *q, float *scale, const float *in, const int32_t *in_rows, int N, int cols) {
#pragma omp parallel for schedule(static) if ((long)N * cols > 32768)
    for (int c = 0; c < N; c++)
        quantize_row(q + (size_t)c * cols, scale + c, in + mapped_row(in_rows, c) * cols, cols);
}

void pmt_int8_quantize_rows(int8_t *q, float *scale, const float *w, int rows, int cols) {
    quantize_mapped_rows(q, scale, w, NULL, rows, cols);
}

void pmt_int8_dequantize_rows(float *w, const int8_t *q, const float *scale, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) w[(size_t)r * cols + c] = scale[r] * (float)q[(size_t)r * cols + c];
}

/* hi [n] = floor(wq / 2), lo [n] = wq − 2·hi (the split weights above). */
static void split_weights(int8_t *hi, int8_t *lo, const int8_t *wq, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const int v = wq[i];
        const int h = (v - (v & 1)) / 2;
        hi[i] = (int8_t)h;
        lo[i] = (int8_t)(v - 2 * h);
    }
}

/* x_scale · w_scale[j] · acc + b[j] for one product value (acc = 2·acc_hi
 * + acc_lo with split weights): one expression for every epilogue, so
 * each rounds it the same way. */
static inline float rescaled(float xs, const float *w_scale, const float *b, const int32_t *a, const int32_t *lo,
                             int j) {
    const int32_t v = lo ? 2 * a[j] + lo[j] : a[j];
    return xs * w_scale[j] * (float)v + (b ? b[j] : 0.0f);
}

/* One product row a (and lo) finished into o by op. One plain loop per
 * epilogue, so that none relies on the compiler taking a per-value test of
 * the op out of its loop to vectorise. */
static inline void finish_row(float *o, float xs, const int32_t *a, const int32_t *lo, const float *w_scale,
                              const float *b, int OUT, pmt_int8_epilogue op) {
    switch (op) {
    case PMT_INT8_STORE:
        for (int j = 0; j < OUT; j++) o[j] = rescaled(xs, w_scale, b, a, lo, j);
        break;
    case PMT_INT8_RELU:
        for (int j = 0; j < OUT; j++) {
            const float y = rescaled(xs, w_scale, b, a, lo, j);
            o[j] = y > 0.0f ? y : 0.0f;
        }
        break;
    case PMT_INT8_ADD:
        for (int j = 0; j < OUT; j++) o[j] = o[j] + rescaled(xs, w_scale, b, a, lo, j);
        break;
    }
}

/* Product row c of acc [N, OUT] (and acc_lo) finished into out by how
 * (pmt_int8_rows in nn/gemm.h), or into how->row_buf and visited; how
 * NULL: stored in row c. */
static void rescale_rows(float *out, const int32_t *acc, const int32_t *acc_lo, const float *x_scale,
                         const float *w_scale, const float *b, int N, int OUT, const pmt_int8_rows *how) {
    const pmt_int8_rows stored = {.op = PMT_INT8_STORE};
    if (!how) how = &stored;
    if (how->visit) {
        for (int n = 0; n < N; n++) {
            finish_row(how->row_buf, x_scale[n], acc + (size_t)n * OUT, acc_lo ? acc_lo + (size_t)n * OUT : NULL,
                       w_scale, b, OUT, how->op);
            if (how->lse) how->lse[n] = ops_log_sum_exp_row(how->row_buf, OUT);
            how->visit(how->visit_ctx, n, how->row_buf);
        }
        return;
    }
#pragma omp parallel for schedule(static) if ((long)N * OUT > 32768)
    for (int n = 0; n < N; n++) {
        float *o = out + mapped_row(how->out_rows, n) * OUT;
        finish_row(o, x_scale[n], acc + (size_t)n * OUT, acc_lo ? acc_lo + (size_t)n * OUT : NULL, w_scale, b, OUT,
                   how->op);
        if (how->lse) how->lse[n] = ops_log_sum_exp_row(o, OUT);
    }
}

/* ------------------------------------------------------------------ */
/* the path of this CPU and the test hook                              */

static int g_split;                 /* no int8 dot products: split weights */
static pmt_lowp_hook g_hook_mode;
static int g_hook_rows;
static atomic_long g_fallbacks;
static pthread_once_t g_setup_once = PTHREAD_ONCE_INIT;

/* PROJMT_TEST_LOWP=<mode>:<rows>; anything else there is ignored (a test
 * that sets it checks the effect). */
static void read_hook_env(void) {
    const char *v = getenv("PROJMT_TEST_LOWP");
    if (!v) return;
    static const struct { const char *name; pmt_lowp_hook mode; } modes[] = {
        {"relayout:", PMT_LOWP_HOOK_RELAYOUT}, {"no-packed:", PMT_LOWP_HOOK_NO_PACKED}, {"fail:", PMT_LOWP_HOOK_FAIL}};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        const size_t len = strlen(modes[i].name);
        if (!strncmp(v, modes[i].name, len)) {
            const long rows = strtol(v + len, NULL, 10);
            if (rows > 0 && rows < 1L << 30) {
                g_hook_mode = modes[i].mode;
                g_hook_rows = (int)rows;
            }
        }
    }
}

static void setup(void) {
    g_split = !pmt_cpu_has_int8_dot();
    if (g_hook_mode == PMT_LOWP_HOOK_OFF) read_hook_env();
}

static void ensure_setup(void) { pthread_once(&g_setup_once, setup); }

void pmt_lowp_set_test_hook(pmt_lowp_hook mode, int rows) {
    ensure_setup();
    g_hook_mode = mode;
    g_hook_rows = rows;
}

static int hook_hits(pmt_lowp_hook mode, int rows) { return g_hook_mode == mode && rows >= g_hook_rows; }

const char *pmt_int8_path_name(void) {
    ensure_setup();
    return g_split ? "int8: oneDNN s8 matmul, packed weights split into 7-bit and 1-bit parts (no int8 dot "
                     "products on this CPU: exact, two integer products)"
                   : "int8: oneDNN s8 matmul, packed weights (int8 dot products)";
}

long pmt_int8_fallback_count(void) { return atomic_load(&g_fallbacks); }

/* Records a failed product as the thread's error (nn/gemm.h). */
static void record_failure(const char *what, int rows, int IN, int OUT) {
    pmt_gemm_record_error("oneDNN cannot run the %s product of [%d, %d] x [%d, %d] on this CPU (%s); "
                          "--compute-type fp32 avoids it", what, rows, IN, IN, OUT, pmt_cpu_isa_name());
}

/* A failed product: its output [rows, OUT] NaN and the thread's error recorded. */
static int product_failed(float *out, const char *what, int rows, int IN, int OUT) {
    pmt_gemm_fail_output(out, rows, OUT, OUT);
    record_failure(what, rows, IN, OUT);
    return -1;
}

/* ------------------------------------------------------------------ */
/* oneDNN plumbing                                                     */

/* The process's one CPU engine (nn/gemm_internal.h), and one stream per
 * thread that executes: the decoder's lanes (translate/beam_search.c)
 * multiply concurrently, each with its own matmuls and scratchpad, and a
 * oneDNN stream is not meant to be shared between threads. A thread's
 * stream is destroyed when the thread ends (a pthread key's destructor):
 * threads of a program that embeds the library come and go. */
static dnnl_engine_t cpu_engine;
static pthread_key_t stream_key;
static pthread_once_t stream_key_once = PTHREAD_ONCE_INIT;
static int stream_key_ok;

static void destroy_stream(void *stream) { dnnl_stream_destroy(stream); }
static void make_stream_key(void) { stream_key_ok = pthread_key_create(&stream_key, destroy_stream) == 0; }

static pthread_once_t cpu_engine_once = PTHREAD_ONCE_INIT;
static int cpu_engine_ok;

/* cpu_engine is written once (every thread asked for it at once, and
 * rewriting it from each was a data race even with the same value), then
 * only read. */
static void take_engine(void) {
    dnnl_stream_t shared_stream;
    cpu_engine_ok = pmt_dnnl_cpu(&cpu_engine, &shared_stream) == 0;
}

static int ensure_engine(void) {
    pthread_once(&cpu_engine_once, take_engine);
    return cpu_engine_ok ? 0 : -1;
}

static dnnl_stream_t this_thread_stream(void) {
    pthread_once(&stream_key_once, make_stream_key);
    if (!stream_key_ok) return NULL;
    dnnl_stream_t stream = pthread_getspecific(stream_key);
    if (stream) return stream;
    if (dnnl_stream_create(&stream, cpu_engine, dnnl_stream_default_flags) != dnnl_success) return NULL;
    if (pthread_setspecific(stream_key, stream) != 0) {
        dnnl_stream_destroy(stream);
        return NULL;
    }
    return stream;
}

/* A memory object over ptr of dims [rows, cols] (row-major, or its transpose). */
static dnnl_memory_t wrap(const void *ptr, int64_t rows, int64_t cols, dnnl_data_type_t type, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {rows, cols};
    dnnl_memory_t mem = NULL;
    if (dnnl_memory_desc_init_by_tag(&md, 2, dims, type, tag) != dnnl_success ||
        dnnl_memory_create(&mem, &md, cpu_engine, (void *)ptr) != dnnl_success)
        return NULL;
    return mem;
}

/* ------------------------------------------------------------------ */
/* int8, one call                                                      */

/* acc [N, OUT] = xq [N, IN] · wq [OUT, IN]ᵀ in int32. */
static int gemm_s8(int32_t *acc, const int8_t *xq, const int8_t *wq, int N, int IN, int OUT) {
    const int32_t zero = 0;
    return dnnl_gemm_s8s8s32('N', 'T', 'F', N, OUT, IN, 1.0f, xq, IN, 0, wq, IN, 0, 0.0f, acc, OUT, &zero) ==
                   dnnl_success
               ? 0
               : -1;
}

/* ------------------------------------------------------------------ */
/* int8 with packed weights                                            */

/* Row counts with a primitive of their own: every count up to
 * INT8_EXACT_ROWS (a decoding step's products, whose live rows change
 * every step: padding them to a multiple of 8 cost ~5 % of beam-4 decoding
 * on Zen 4, docs/speed.md), multiples of INT8_ROW_STEP above (encoder
 * passes, whose row counts vary with every batch: fewer primitives). */
#define INT8_EXACT_ROWS 64
#define INT8_ROW_STEP 8
#define INT8_MAX_LAYOUTS 4

/* The weights packed in one layout: one copy per part (1, or 2 split). */
typedef struct {
    dnnl_memory_desc_t md;
    dnnl_memory_t packed[2];       /* oneDNN-owned, with their s8s8 compensation */
} int8_layout;

/* What a row count multiplies with. Its memory objects are made with the
 * primitive and pointed at each call's buffers (dnnl_memory_set_data_handle):
 * a decoding step makes ~20 products of a few rows each, and creating and
 * destroying three memory objects per call (allocations inside oneDNN) was
 * a visible part of them. */
typedef struct {
    dnnl_primitive_t prim;         /* NULL: not built yet, or one_call */
    int layout;                    /* index into layouts */
    int one_call;                  /* no primitive for this row count: the one-call form */
    dnnl_memory_t src, dst, spad;  /* [rows, IN] s8, [rows, OUT] s32, its scratchpad (NULL: needs none) */
} int8_rows_slot;

struct pmt_int8_matmul {
    int IN, OUT, max_rows;         /* max_rows: pmt_int8_matmul_rows of the init's */
    int n_sizes;                   /* row counts with a slot: 1..64, then 72, 80, ... max_rows */
    int n_parts;                   /* 1, or 2 with split weights */
    int8_t *plain[2];              /* [OUT, IN] each: the weights (or hi, lo), for repacking and the one-call form */
    /* Packed copies; layouts[0..n_borrowed) are the base's (a sharing
     * matmul: pmt_int8_matmul_init_sharing), as are plain: never freed
     * here. lock guards n_layouts and the entries being appended: a
     * sharing matmul copies them while its base may be packing another. */
    int8_layout layouts[INT8_MAX_LAYOUTS];
    int n_layouts, n_borrowed;
    const pmt_int8_matmul *base;   /* NULL: owns plain */
    pthread_mutex_t lock;
    int8_rows_slot *slots;         /* [n_sizes] */
    void *pad;                     /* user scratchpad: the largest a built primitive needs */
    size_t pad_bytes;
};

int pmt_int8_matmul_rows(int N) {
    if (N < 1) return 1;
    return N <= INT8_EXACT_ROWS ? N : (N + INT8_ROW_STEP - 1) / INT8_ROW_STEP * INT8_ROW_STEP;
}

/* The slot of a row count pmt_int8_matmul_rows gives. */
static int slot_index(int rows) {
    return rows <= INT8_EXACT_ROWS ? rows - 1 : INT8_EXACT_ROWS - 1 + (rows - INT8_EXACT_ROWS) / INT8_ROW_STEP;
}

/* The matmul descriptor of [rows, IN] s8 · [IN, OUT] s8 → [rows, OUT] s32,
 * weights in the layout oneDNN picks (any) and a user scratchpad. */
static dnnl_primitive_desc_t int8_matmul_pd(int rows, int IN, int OUT) {
    dnnl_memory_desc_t src, wei, dst;
    dnnl_dims_t src_dims = {rows, IN}, wei_dims = {IN, OUT}, dst_dims = {rows, OUT};
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return NULL;
    if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&src, 2, src_dims, dnnl_s8, dnnl_ab) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&wei, 2, wei_dims, dnnl_s8, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&dst, 2, dst_dims, dnnl_s32, dnnl_ab) != dnnl_success ||
        dnnl_matmul_desc_init(&desc, &src, &wei, NULL, &dst) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &desc, attr, cpu_engine, NULL) != dnnl_success)
        pd = NULL;
    dnnl_primitive_attr_destroy(attr);
    return pd;
}

/* Packs every part of mm into layout md as layouts[n_layouts]. 0, or -1. */
static int add_layout(pmt_int8_matmul *mm, const dnnl_memory_desc_t *md) {
    if (mm->n_layouts == INT8_MAX_LAYOUTS) return -1;
    int8_layout *l = &mm->layouts[mm->n_layouts];
    l->md = *md;
    dnnl_stream_t stream = this_thread_stream();
    dnnl_memory_desc_t user_md;
    dnnl_dims_t dims = {mm->IN, mm->OUT};
    dnnl_primitive_desc_t reorder_pd = NULL;
    dnnl_primitive_t reorder = NULL;
    int ok = stream && dnnl_memory_desc_init_by_tag(&user_md, 2, dims, dnnl_s8, dnnl_ba) == dnnl_success &&
             dnnl_reorder_primitive_desc_create(&reorder_pd, &user_md, cpu_engine, md, cpu_engine, NULL) ==
                 dnnl_success &&
             dnnl_primitive_create(&reorder, reorder_pd) == dnnl_success;
    for (int p = 0; ok && p < mm->n_parts; p++) {
        dnnl_memory_t user = NULL;
        ok = dnnl_memory_create(&user, &user_md, cpu_engine, mm->plain[p]) == dnnl_success &&
             dnnl_memory_create(&l->packed[p], md, cpu_engine, DNNL_MEMORY_ALLOCATE) == dnnl_success;
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, l->packed[p]}};
        ok = ok && dnnl_primitive_execute(reorder, stream, 2, args) == dnnl_success &&
             dnnl_stream_wait(stream) == dnnl_success;
        if (user) dnnl_memory_destroy(user);
    }
    if (reorder) dnnl_primitive_destroy(reorder);
    if (reorder_pd) dnnl_primitive_desc_destroy(reorder_pd);
    if (!ok) {
        for (int p = 0; p < 2; p++)
            if (l->packed[p]) dnnl_memory_destroy(l->packed[p]);
        memset(l, 0, sizeof *l);
        return -1;
    }
    mm->n_layouts++;
    return 0;
}

/* The layout of md among mm's, packed on first need: its index, or -1.
 * The test hook's relayout gives a row count a copy of its own. */
static int layout_for(pmt_int8_matmul *mm, const dnnl_memory_desc_t *md, int rows) {
    int found = -1;
    pthread_mutex_lock(&mm->lock);
    if (!hook_hits(PMT_LOWP_HOOK_RELAYOUT, rows))
        for (int i = 0; i < mm->n_layouts && found < 0; i++)
            if (dnnl_memory_desc_equal(&mm->layouts[i].md, md)) found = i;
    if (found < 0 && add_layout(mm, md) == 0) found = mm->n_layouts - 1;
    pthread_mutex_unlock(&mm->lock);
    return found;
}

/* Destroys what a slot made, leaving it not built. */
static void slot_release(int8_rows_slot *slot) {
    if (slot->prim) dnnl_primitive_destroy(slot->prim);
    dnnl_memory_t mems[3] = {slot->src, slot->dst, slot->spad};
    for (int i = 0; i < 3; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    memset(slot, 0, sizeof *slot);
}

/* Makes the slot of `rows` (a pmt_int8_matmul_rows count) ready: its
 * primitive with its weights layout, or the one-call form when oneDNN
 * builds none. -1 only when memory runs out. */
static int prepare_slot(pmt_int8_matmul *mm, int rows) {
    int8_rows_slot *slot = &mm->slots[slot_index(rows)];
    if (slot->prim || slot->one_call) return 0;
    dnnl_primitive_desc_t pd = hook_hits(PMT_LOWP_HOOK_NO_PACKED, rows) ? NULL : int8_matmul_pd(rows, mm->IN, mm->OUT);
    int layout = pd ? layout_for(mm, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), rows) : -1;
    const size_t pad =
        layout >= 0 ? dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) : 0;
    int rc = 0;
    if (layout >= 0 && pad > mm->pad_bytes) {
        void *grown = aligned_alloc(64, (pad + 63) & ~(size_t)63);
        if (grown) {
            free(mm->pad);
            mm->pad = grown;
            mm->pad_bytes = pad;
        } else {
            layout = -1;
            rc = -1;
        }
    }
    if (layout >= 0 && dnnl_primitive_create(&slot->prim, pd) == dnnl_success) {
        slot->layout = layout;
        slot->src = wrap(NULL, rows, mm->IN, dnnl_s8, dnnl_ab);
        slot->dst = wrap(NULL, rows, mm->OUT, dnnl_s32, dnnl_ab);
        slot->spad = pad ? wrap(NULL, 1, (int64_t)pad, dnnl_u8, dnnl_ab) : NULL;
        if (!slot->src || !slot->dst || (pad && !slot->spad)) {
            slot_release(slot);
            rc = -1;
        }
    } else {
        slot->prim = NULL;
        slot->one_call = rc == 0;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* The parts of a matmul (own or sharing) but its weights: sizes, lock,
 * slots. NULL with err. */
static pmt_int8_matmul *matmul_shell(int IN, int OUT, int max_rows, char *err, size_t errlen) {
    ensure_setup();
    pmt_int8_matmul *mm = calloc(1, sizeof *mm);
    if (!mm || ensure_engine() != 0 || pthread_mutex_init(&mm->lock, NULL) != 0) {
        snprintf(err, errlen, "int8 matmul: out of memory");
        free(mm);
        return NULL;
    }
    mm->IN = IN;
    mm->OUT = OUT;
    mm->max_rows = pmt_int8_matmul_rows(max_rows);
    mm->n_sizes = slot_index(mm->max_rows) + 1;
    mm->n_parts = g_split ? 2 : 1;
    mm->slots = calloc((size_t)mm->n_sizes, sizeof *mm->slots);
    if (!mm->slots) {
        snprintf(err, errlen, "int8 matmul of [%d, %d] weights: out of memory", OUT, IN);
        pmt_int8_matmul_free(mm);
        return NULL;
    }
    return mm;
}

/* The first row count's primitive and layout now, so that a refusal shows
 * at load; the others on first use. mm or NULL (freed) with err. */
static pmt_int8_matmul *first_slot(pmt_int8_matmul *mm, char *err, size_t errlen) {
    if (prepare_slot(mm, mm->max_rows < INT8_ROW_STEP ? mm->max_rows : INT8_ROW_STEP) == 0) return mm;
    snprintf(err, errlen, "int8 matmul of [%d, %d] weights: out of memory", mm->OUT, mm->IN);
    pmt_int8_matmul_free(mm);
    return NULL;
}

pmt_int8_matmul *pmt_int8_matmul_init(const int8_t *wq, int IN, int OUT, int max_rows, char *err, size_t errlen) {
    pmt_int8_matmul *mm = matmul_shell(IN, OUT, max_rows, err, errlen);
    if (!mm) return NULL;
    int ok = 1;
    for (int p = 0; ok && p < mm->n_parts; p++) ok = (mm->plain[p] = malloc((size_t)IN * OUT)) != NULL;
    if (!ok) {
        snprintf(err, errlen, "int8 matmul of [%d, %d] weights: out of memory", OUT, IN);
        pmt_int8_matmul_free(mm);
        return NULL;
    }
    if (g_split) split_weights(mm->plain[0], mm->plain[1], wq, (size_t)IN * OUT);
    else memcpy(mm->plain[0], wq, (size_t)IN * OUT);
    return first_slot(mm, err, errlen);
}

pmt_int8_matmul *pmt_int8_matmul_init_sharing(const pmt_int8_matmul *base, int max_rows, char *err, size_t errlen) {
    pmt_int8_matmul *mm = matmul_shell(base->IN, base->OUT, max_rows, err, errlen);
    if (!mm) return NULL;
    mm->base = base;
    mm->plain[0] = base->plain[0];
    mm->plain[1] = base->plain[1];
    pthread_mutex_t *lock = &((pmt_int8_matmul *)base)->lock;   /* the lock is not part of base's value */
    pthread_mutex_lock(lock);
    memcpy(mm->layouts, base->layouts, (size_t)base->n_layouts * sizeof *base->layouts);
    mm->n_layouts = mm->n_borrowed = base->n_layouts;
    pthread_mutex_unlock(lock);
    return first_slot(mm, err, errlen);
}

void pmt_int8_matmul_free(pmt_int8_matmul *mm) {
    if (!mm) return;
    for (int i = 0; mm->slots && i < mm->n_sizes; i++) slot_release(&mm->slots[i]);
    for (int l = mm->n_borrowed; l < mm->n_layouts; l++)
        for (int p = 0; p < 2; p++)
            if (mm->layouts[l].packed[p]) dnnl_memory_destroy(mm->layouts[l].packed[p]);
    if (!mm->base) {
        free(mm->plain[0]);
        free(mm->plain[1]);
    }
    free(mm->slots);
    free(mm->pad);
    pthread_mutex_destroy(&mm->lock);
    free(mm);
}

/* s->acc (and s->acc_lo, split weights) [N, OUT] = s->xq [N, IN] · mm's
 * plain weights (or their parts), one dnnl_gemm_s8s8s32 call each. */
static int one_call_products(const pmt_int8_matmul *mm, int N, const pmt_int8_scratch *s) {
    if (gemm_s8(s->acc, s->xq, mm->plain[0], N, mm->IN, mm->OUT) != 0) return -1;
    return mm->n_parts == 2 ? gemm_s8(s->acc_lo, s->xq, mm->plain[1], N, mm->IN, mm->OUT) : 0;
}

/* The checks every int8 product makes first: rows within the matmul's,
 * the split form's second accumulator given, the test hook. 0; 1 when N
 * exceeds the matmul's rows (error recorded; out must stay untouched: the
 * caller's buffers may be sized for those only); -1 for another refusal
 * (error recorded; the caller fills its output with NaN). */
static int int8_refusal(const pmt_int8_matmul *mm, int N, const pmt_int8_scratch *s) {
    if (pmt_int8_matmul_rows(N) > mm->max_rows) {
        pmt_gemm_record_error("int8 product of %d rows exceeds its matmul's %d rows", N, mm->max_rows);
        return 1;
    }
    const char *why = mm->n_parts == 2 && !s->acc_lo ? "int8 (no acc_lo scratch)"
                      : hook_hits(PMT_LOWP_HOOK_FAIL, N) ? "int8" : NULL;
    if (!why) return 0;
    record_failure(why, N, mm->IN, mm->OUT);
    return -1;
}

int linear_forward_int8(float *out, const float *in, const pmt_int8_matmul *mm, const float *w_scale, const float *b,
                        int N, const pmt_int8_scratch *s) {
    if (N <= 0) return 0;
    const int refused = int8_refusal(mm, N, s);
    if (refused < 0) pmt_gemm_fail_output(out, N, mm->OUT, mm->OUT);
    if (refused) return -1;
    pmt_int8_quantize_rows(s->xq, s->x_scale, in, N, mm->IN);
    if (one_call_products(mm, N, s) != 0) return product_failed(out, "int8", N, mm->IN, mm->OUT);
    rescale_rows(out, s->acc, mm->n_parts == 2 ? s->acc_lo : NULL, s->x_scale, w_scale, b, N, mm->OUT, NULL);
    return 0;
}

/* acc_out [rows, OUT] = s->xq [rows, IN] · part p of the weights, by the slot's primitive. */
static int run_packed(pmt_int8_matmul *mm, const int8_rows_slot *slot, int p, int32_t *acc_out,
                      const pmt_int8_scratch *s) {
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, slot->src}, {DNNL_ARG_WEIGHTS, mm->layouts[slot->layout].packed[p]}, {DNNL_ARG_DST, slot->dst}};
    int n_args = 3;
    if (slot->spad) args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, slot->spad};
    dnnl_stream_t stream = this_thread_stream();
    return stream && dnnl_memory_set_data_handle(slot->src, s->xq) == dnnl_success &&
                   dnnl_memory_set_data_handle(slot->dst, acc_out) == dnnl_success &&
                   (!slot->spad || dnnl_memory_set_data_handle(slot->spad, mm->pad) == dnnl_success) &&
                   dnnl_primitive_execute(slot->prim, stream, n_args, args) == dnnl_success &&
                   dnnl_stream_wait(stream) == dnnl_success
               ? 0
               : -1;
}

/* The output of a failed linear_forward_int8_rows: the out rows how names
 * (rows 0..N-1 without a map) NaN, and lse NaN. -1. */
static int rows_failed(float *out, const pmt_int8_matmul *mm, int N, const pmt_int8_rows *how) {
    const int32_t *out_rows = how ? how->out_rows : NULL;
    if (!how || !how->visit)
        for (int c = 0; c < N; c++) pmt_gemm_fail_output(out + mapped_row(out_rows, c) * mm->OUT, 1, mm->OUT, mm->OUT);
    if (how && how->lse)
        for (int c = 0; c < N; c++) how->lse[c] = NAN;
    return -1;
}

int linear_forward_int8_rows(float *out, const float *in, pmt_int8_matmul *mm, const float *w_scale, const float *b,
                             int N, const pmt_int8_scratch *s, const pmt_int8_rows *how) {
    if (N <= 0) return 0;
    const int rows = pmt_int8_matmul_rows(N);
    const int refused = int8_refusal(mm, N, s);
    if (refused) return refused < 0 ? rows_failed(out, mm, N, how) : -1;
    if (how && how->visit && (!how->row_buf || how->op == PMT_INT8_ADD)) {
        pmt_gemm_record_error("int8 product: visited rows need a row buffer and a STORE or RELU epilogue");
        return rows_failed(out, mm, N, how);
    }
    quantize_mapped_rows(s->xq, s->x_scale, in, how ? how->in_rows : NULL, N, mm->IN);
    /* The padding rows multiply too: zeros, so nothing uninitialised is read. */
    memset(s->xq + (size_t)N * mm->IN, 0, (size_t)(rows - N) * mm->IN);
    int32_t *acc_lo = mm->n_parts == 2 ? s->acc_lo : NULL;
    int rc = prepare_slot(mm, rows);
    const int8_rows_slot *slot = &mm->slots[slot_index(rows)];
    if (rc == 0 && slot->one_call) {
        atomic_fetch_add(&g_fallbacks, 1);
        rc = one_call_products(mm, N, s);
    } else if (rc == 0) {
        rc = run_packed(mm, slot, 0, s->acc, s);
        if (rc == 0 && acc_lo) rc = run_packed(mm, slot, 1, acc_lo, s);
    }
    if (rc != 0) {
        record_failure("int8", N, mm->IN, mm->OUT);
        return rows_failed(out, mm, N, how);
    }
    rescale_rows(out, s->acc, acc_lo, s->x_scale, w_scale, b, N, mm->OUT, how);
    return 0;
}

int linear_forward_int8_packed(float *out, const float *in, pmt_int8_matmul *mm, const float *w_scale,
                               const float *b, int N, const pmt_int8_scratch *s) {
    return linear_forward_int8_rows(out, in, mm, w_scale, b, N, s, NULL);
}

/* ------------------------------------------------------------------ */
/* bf16                                                                */

struct pmt_bf16_matmul {
    int IN, OUT, with_bias;
    uint16_t *w;                 /* [OUT, IN] bf16 */
    dnnl_primitive_t prim;
    size_t pad_bytes;            /* its scratchpad (user mode: the caller's memory) */
};

pmt_bf16_matmul *pmt_bf16_matmul_init(const float *w, int IN, int OUT, int with_bias, char *err, size_t errlen) {
    ensure_setup();
    pmt_bf16_matmul *mm = calloc(1, sizeof *mm);
    if (!mm || !(mm->w = malloc((size_t)IN * OUT * sizeof *mm->w))) {
        snprintf(err, errlen, "bf16 matmul: out of memory");
        pmt_bf16_matmul_free(mm);
        return NULL;
    }
    mm->IN = IN;
    mm->OUT = OUT;
    mm->with_bias = with_bias;
    for (size_t i = 0; i < (size_t)IN * OUT; i++) mm->w[i] = pmt_bf16_from_float(w[i]);
    /* src [M, IN] bf16 with M known only at execution, weights [IN, OUT]
     * stored transposed (our [OUT, IN] rows: tag ba), dst [M, OUT] fp32. */
    dnnl_memory_desc_t src, wei, bia, dst;
    dnnl_dims_t src_dims = {DNNL_RUNTIME_DIM_VAL, IN}, wei_dims = {IN, OUT}, bia_dims = {1, OUT},
                dst_dims = {DNNL_RUNTIME_DIM_VAL, OUT};
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    /* User scratchpad: oneDNN's library-mode scratchpad is shared by every
     * primitive of the process (this build has no concurrent-execution
     * option), so concurrent matmuls each bring their own. */
    dnnl_primitive_attr_t attr = NULL;
    int ok = ensure_engine() == 0 && dnnl_primitive_attr_create(&attr) == dnnl_success &&
             dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&src, 2, src_dims, dnnl_bf16, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&wei, 2, wei_dims, dnnl_bf16, dnnl_ba) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&bia, 2, bia_dims, dnnl_f32, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&dst, 2, dst_dims, dnnl_f32, dnnl_ab) == dnnl_success &&
             dnnl_matmul_desc_init(&desc, &src, &wei, with_bias ? &bia : NULL, &dst) == dnnl_success &&
             dnnl_primitive_desc_create(&pd, &desc, attr, cpu_engine, NULL) == dnnl_success &&
             dnnl_primitive_create(&mm->prim, pd) == dnnl_success;
    if (ok) mm->pad_bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        snprintf(err, errlen, "oneDNN cannot build a bf16 matmul of [*, %d] x [%d, %d] on this CPU (%s)", IN, IN,
                 OUT, pmt_cpu_isa_name());
        pmt_bf16_matmul_free(mm);
        return NULL;
    }
    return mm;
}

void pmt_bf16_matmul_free(pmt_bf16_matmul *mm) {
    if (!mm) return;
    if (mm->prim) dnnl_primitive_destroy(mm->prim);
    free(mm->w);
    free(mm);
}

size_t pmt_bf16_matmul_scratchpad_bytes(const pmt_bf16_matmul *mm) { return mm->pad_bytes; }

int linear_forward_bf16(float *out, const float *in, const pmt_bf16_matmul *mm, const float *b, int N,
                        uint16_t *xs, void *pad) {
    if (N <= 0) return 0;
    if (!b != !mm->with_bias || hook_hits(PMT_LOWP_HOOK_FAIL, N))
        return product_failed(out, !b != !mm->with_bias ? "bf16 (bias mismatch)" : "bf16", N,
                              mm->IN, mm->OUT);
    const size_t n_in = (size_t)N * mm->IN;
#pragma omp parallel for schedule(static) if (n_in > 32768)
    for (size_t i = 0; i < n_in; i++) xs[i] = pmt_bf16_from_float(in[i]);
    dnnl_memory_t src = wrap(xs, N, mm->IN, dnnl_bf16, dnnl_ab), wei = wrap(mm->w, mm->IN, mm->OUT, dnnl_bf16, dnnl_ba),
                  dst = wrap(out, N, mm->OUT, dnnl_f32, dnnl_ab), bia = b ? wrap(b, 1, mm->OUT, dnnl_f32, dnnl_ab) : NULL,
                  spad = mm->pad_bytes ? wrap(pad, 1, (int64_t)mm->pad_bytes, dnnl_u8, dnnl_ab) : NULL;
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    int n_args = 3;
    if (b) args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bia};
    if (spad) args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, spad};
    dnnl_stream_t stream = this_thread_stream();
    const int ok = src && wei && dst && (!b || bia) && (!mm->pad_bytes || (pad && spad)) && stream &&
                   dnnl_primitive_execute(mm->prim, stream, n_args, args) == dnnl_success &&
                   dnnl_stream_wait(stream) == dnnl_success;
    dnnl_memory_t mems[5] = {src, wei, dst, bia, spad};
    for (int i = 0; i < 5; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    return ok ? 0 : product_failed(out, "bf16", N, mm->IN, mm->OUT);
}
