/*
 * gemm_lowp.c — see gemm_lowp.h. The integer product is oneDNN's
 * dnnl_gemm_s8s8s32 (row-major, like dnnl_sgemm), which picks its VNNI
 * kernel from the CPU; quantising and rescaling are plain loops.
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

void linear_forward_int8(float *out, const float *in, const int8_t *wq, const float *w_scale, const float *b,
                         int N, int IN, int OUT, const pmt_int8_scratch *s) {
    if (N <= 0 || OUT <= 0) return;
    quantize_rows(s->xq, s->x_scale, in, N, IN);
    const int32_t zero = 0;
    dnnl_status_t st = dnnl_gemm_s8s8s32('N', 'T', 'F', N, OUT, IN, 1.0f, s->xq, IN, 0, wq, IN, 0, 0.0f, s->acc,
                                         OUT, &zero);
    assert(st == dnnl_success);
    (void)st;
#pragma omp parallel for schedule(static) if ((long)N * OUT > 32768)
    for (int n = 0; n < N; n++) {
        const float xs = s->x_scale[n];
        float *o = out + (size_t)n * OUT;
        const int32_t *a = s->acc + (size_t)n * OUT;
        if (b) {
            for (int j = 0; j < OUT; j++) o[j] = xs * w_scale[j] * (float)a[j] + b[j];
        } else {
            for (int j = 0; j < OUT; j++) o[j] = xs * w_scale[j] * (float)a[j];
        }
    }
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
