/*
 * gemm_lowp.c — see gemm_lowp.h. The integer products are oneDNN's: the
 * decoder's through int8 matmul primitives over weights packed once
 * (linear_forward_int8_packed), and the one-call form through
 * dnnl_gemm_s8s8s32 (row-major, like dnnl_sgemm; it packs the weights on
 * every call, and stays as the plain reference the packed form is tested
 * against). Both pick their VNNI kernels from the CPU; quantising and
 * rescaling are plain loops shared by the two.
 */
#include "nn/gemm_lowp.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <oneapi/dnnl/dnnl.h>

#include "nn/gemm_internal.h"

/* xq, x_scale = per-row symmetric quantisation of in [N, IN]. Written to
 * stay inline and vectorisable (no libm calls: fmaxf and nearbyintf are
 * calls without -ffast-math); rounding is half away from zero. */
static void quantize_rows(int8_t *xq, float *x_scale, const float *in, int N, int IN) {
#pragma omp parallel for schedule(static) if ((long)N * IN > 32768)
    for (int n = 0; n < N; n++) {
        const float *row = in + (size_t)n * IN;
        int8_t *q = xq + (size_t)n * IN;
        float amax = 0.0f;
        for (int i = 0; i < IN; i++) {
            const float a = row[i] < 0.0f ? -row[i] : row[i];
            amax = a > amax ? a : amax;
        }
        x_scale[n] = amax / 127.0f;
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int i = 0; i < IN; i++) {
            const float v = row[i] * inv;
            q[i] = (int8_t)(int)(v + (v < 0.0f ? -0.5f : 0.5f));
        }
    }
}

/* out [N, OUT] = x_scale[n] · w_scale[o] · acc[n][o] + b[o]. */
static void rescale_rows(float *out, const int32_t *acc, const float *x_scale, const float *w_scale, const float *b,
                         int N, int OUT) {
#pragma omp parallel for schedule(static) if ((long)N * OUT > 32768)
    for (int n = 0; n < N; n++) {
        const float xs = x_scale[n];
        float *o = out + (size_t)n * OUT;
        const int32_t *a = acc + (size_t)n * OUT;
        if (b) {
            for (int j = 0; j < OUT; j++) o[j] = xs * w_scale[j] * (float)a[j] + b[j];
        } else {
            for (int j = 0; j < OUT; j++) o[j] = xs * w_scale[j] * (float)a[j];
        }
    }
}

void linear_forward_int8(float *out, const float *in, const int8_t *wq, const float *w_scale, const float *b,
                         int N, int IN, int OUT, const pmt_int8_scratch *s) {
    if (N <= 0 || OUT <= 0) return;
    quantize_rows(s->xq, s->x_scale, in, N, IN);
    const int32_t zero = 0;
    dnnl_status_t st = dnnl_gemm_s8s8s32('N', 'T', 'F', N, OUT, IN, 1.0f, s->xq, IN, 0, wq, IN, 0, 0.0f, s->acc,
                                         OUT, &zero);
    assert(st == dnnl_success);
    (void)st;
    rescale_rows(out, s->acc, s->x_scale, w_scale, b, N, OUT);
}

/* The process's one CPU engine (nn/gemm_internal.h), and one stream per
 * thread that executes: the decoder's lanes (translate/beam_search.c)
 * multiply concurrently, each with its own matmuls and scratchpad, and a
 * oneDNN stream is not meant to be shared between threads. */
static dnnl_engine_t cpu_engine;
static _Thread_local dnnl_stream_t thread_stream;

static int ensure_engine(void) {
    dnnl_stream_t shared_stream;
    return pmt_dnnl_cpu(&cpu_engine, &shared_stream);
}

static dnnl_stream_t this_thread_stream(void) {
    if (!thread_stream && dnnl_stream_create(&thread_stream, cpu_engine, dnnl_stream_default_flags) != dnnl_success)
        thread_stream = NULL;
    return thread_stream;
}

struct pmt_bf16_matmul {
    int IN, OUT, with_bias;
    uint16_t *w;                 /* [OUT, IN] bf16 */
    dnnl_primitive_t prim;
    size_t pad_bytes;            /* its scratchpad (user mode: the caller's memory) */
};

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

pmt_bf16_matmul *pmt_bf16_matmul_init(const float *w, int IN, int OUT, int with_bias, char *err, size_t errlen) {
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
        snprintf(err, errlen, "oneDNN cannot build a bf16 matmul of [*, %d] x [%d, %d]", IN, IN, OUT);
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

size_t pmt_bf16_matmul_scratchpad_bytes(const pmt_bf16_matmul *mm) { return mm->pad_bytes; }

/* ------------------------------------------------------------------ */
/* int8 with packed weights                                            */

#define INT8_ROW_STEP 8

struct pmt_int8_matmul {
    int IN, OUT, n_sizes;          /* n_sizes = primitives: rows 8, 16, ..., 8·n_sizes */
    dnnl_memory_desc_t packed_md;  /* the weights' layout (the same for every row count) */
    dnnl_memory_t packed;          /* oneDNN-owned packed weights (with their s8s8 compensation) */
    dnnl_primitive_t *prim;        /* [n_sizes], NULL until first used */
    void *pad;                     /* user scratchpad: the largest a built primitive needs */
    size_t pad_bytes;
};

int pmt_int8_matmul_rows(int N) { return (N + INT8_ROW_STEP - 1) / INT8_ROW_STEP * INT8_ROW_STEP; }

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

/* The primitive for `rows` (a multiple of 8), built on first use; its
 * weights layout must be the packed one (checked: oneDNN could in
 * principle pick another for another row count). */
static dnnl_primitive_t int8_primitive(pmt_int8_matmul *mm, int rows) {
    dnnl_primitive_t *slot = &mm->prim[rows / INT8_ROW_STEP - 1];
    if (*slot) return *slot;
    dnnl_primitive_desc_t pd = int8_matmul_pd(rows, mm->IN, mm->OUT);
    int ok = pd && dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                                          &mm->packed_md);
    const size_t pad = ok ? dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) : 0;
    if (ok && pad > mm->pad_bytes) {
        free(mm->pad);
        mm->pad = aligned_alloc(64, (pad + 63) & ~(size_t)63);
        mm->pad_bytes = mm->pad ? pad : 0;
        ok = mm->pad != NULL;
    }
    ok = ok && dnnl_primitive_create(slot, pd) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (!ok) {
        fprintf(stderr, "projmt: oneDNN cannot build an int8 matmul of [%d, %d] x [%d, %d] (out of memory?)\n", rows,
                mm->IN, mm->IN, mm->OUT);
        abort();
    }
    return *slot;
}

pmt_int8_matmul *pmt_int8_matmul_init(const int8_t *wq, int IN, int OUT, int max_rows, char *err, size_t errlen) {
    pmt_int8_matmul *mm = calloc(1, sizeof *mm);
    if (!mm || ensure_engine() != 0) {
        snprintf(err, errlen, "int8 matmul: out of memory");
        free(mm);
        return NULL;
    }
    mm->IN = IN;
    mm->OUT = OUT;
    mm->n_sizes = pmt_int8_matmul_rows(max_rows > 0 ? max_rows : 1) / INT8_ROW_STEP;
    mm->prim = calloc((size_t)mm->n_sizes, sizeof *mm->prim);
    dnnl_primitive_desc_t pd = mm->prim ? int8_matmul_pd(INT8_ROW_STEP, IN, OUT) : NULL;
    dnnl_memory_t user = NULL;
    dnnl_primitive_desc_t reorder_pd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_stream_t stream = this_thread_stream();
    int ok = pd != NULL && stream != NULL;
    if (ok) {
        mm->packed_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        dnnl_memory_desc_t user_md;
        dnnl_dims_t dims = {IN, OUT};
        ok = dnnl_memory_desc_init_by_tag(&user_md, 2, dims, dnnl_s8, dnnl_ba) == dnnl_success &&
             dnnl_memory_create(&user, &user_md, cpu_engine, (void *)wq) == dnnl_success &&
             dnnl_memory_create(&mm->packed, &mm->packed_md, cpu_engine, DNNL_MEMORY_ALLOCATE) == dnnl_success &&
             dnnl_reorder_primitive_desc_create(&reorder_pd, &user_md, cpu_engine, &mm->packed_md, cpu_engine,
                                                NULL) == dnnl_success &&
             dnnl_primitive_create(&reorder, reorder_pd) == dnnl_success;
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, mm->packed}};
        ok = ok && dnnl_primitive_execute(reorder, stream, 2, args) == dnnl_success &&
             dnnl_stream_wait(stream) == dnnl_success;
    }
    if (reorder) dnnl_primitive_destroy(reorder);
    if (reorder_pd) dnnl_primitive_desc_destroy(reorder_pd);
    if (user) dnnl_memory_destroy(user);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (!ok) {
        snprintf(err, errlen, "oneDNN cannot pack int8 weights [%d, %d] for its matmul (out of memory?)", OUT, IN);
        pmt_int8_matmul_free(mm);
        return NULL;
    }
    return mm;
}

void pmt_int8_matmul_free(pmt_int8_matmul *mm) {
    if (!mm) return;
    for (int i = 0; mm->prim && i < mm->n_sizes; i++)
        if (mm->prim[i]) dnnl_primitive_destroy(mm->prim[i]);
    if (mm->packed) dnnl_memory_destroy(mm->packed);
    free(mm->prim);
    free(mm->pad);
    free(mm);
}

void linear_forward_int8_packed(float *out, const float *in, pmt_int8_matmul *mm, const float *w_scale,
                                const float *b, int N, const pmt_int8_scratch *s) {
    if (N <= 0) return;
    const int rows = pmt_int8_matmul_rows(N);
    assert(rows / INT8_ROW_STEP <= mm->n_sizes);
    quantize_rows(s->xq, s->x_scale, in, N, mm->IN);
    /* The padding rows multiply too: zeros, so nothing uninitialised is read. */
    memset(s->xq + (size_t)N * mm->IN, 0, (size_t)(rows - N) * mm->IN);
    dnnl_primitive_t prim = int8_primitive(mm, rows);
    dnnl_memory_t src = wrap(s->xq, rows, mm->IN, dnnl_s8, dnnl_ab), dst = wrap(s->acc, rows, mm->OUT, dnnl_s32, dnnl_ab),
                  spad = mm->pad_bytes ? wrap(mm->pad, 1, (int64_t)mm->pad_bytes, dnnl_u8, dnnl_ab) : NULL;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, mm->packed}, {DNNL_ARG_DST, dst}};
    int n_args = 3;
    if (spad) args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, spad};
    dnnl_stream_t stream = this_thread_stream();
    int ok = src && dst && (!mm->pad_bytes || spad) && stream &&
             dnnl_primitive_execute(prim, stream, n_args, args) == dnnl_success &&
             dnnl_stream_wait(stream) == dnnl_success;
    dnnl_memory_t mems[3] = {src, dst, spad};
    for (int i = 0; i < 3; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    if (!ok) {
        fprintf(stderr, "projmt: oneDNN int8 matmul failed\n");
        abort();
    }
    rescale_rows(out, s->acc, s->x_scale, w_scale, b, N, mm->OUT);
}

void linear_forward_bf16(float *out, const float *in, const pmt_bf16_matmul *mm, const float *b, int N,
                         uint16_t *xs, void *pad) {
    if (N <= 0) return;
    assert(!b == !mm->with_bias);
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
    /* A failure here (oneDNN out of memory for a handle) is not recoverable mid-step. */
    int ok = src && wei && dst && (!b || bia) && (!mm->pad_bytes || (pad && spad)) && stream &&
             dnnl_primitive_execute(mm->prim, stream, n_args, args) == dnnl_success &&
             dnnl_stream_wait(stream) == dnnl_success;
    dnnl_memory_t mems[5] = {src, wei, dst, bia, spad};
    for (int i = 0; i < 5; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    if (!ok) {
        fprintf(stderr, "projmt: oneDNN bf16 matmul failed\n");
        abort();
    }
}

int pmt_cpu_has_bf16(void) {
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    const unsigned bf16 = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    return (isa & bf16) == bf16;
}

int pmt_cpu_has_int8_dot(void) {
    /* ISA values are nested bit sets: a CPU with more includes the bits of less. */
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    const unsigned avx512_vnni = (unsigned)dnnl_cpu_isa_avx512_core_vnni, avx2_vnni = (unsigned)dnnl_cpu_isa_avx2_vnni;
    return (isa & avx512_vnni) == avx512_vnni || (isa & avx2_vnni) == avx2_vnni;
}
