/*
 * gemm_lowp.c — see gemm_lowp.h. The integer product is oneDNN's
 * dnnl_gemm_s8s8s32 (row-major, like dnnl_sgemm), which picks its VNNI
 * kernel from the CPU; quantising and rescaling are plain loops.
 */
#include "nn/gemm_lowp.h"

#include <assert.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>

/* xq, x_scale = per-row symmetric quantisation of in [N, IN]. */
static void quantize_rows(int8_t *xq, float *x_scale, const float *in, int N, int IN) {
#pragma omp parallel for schedule(static) if ((long)N * IN > 32768)
    for (int n = 0; n < N; n++) {
        const float *row = in + (size_t)n * IN;
        float amax = 0.0f;
        for (int i = 0; i < IN; i++) amax = fmaxf(amax, fabsf(row[i]));
        x_scale[n] = amax / 127.0f;
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int i = 0; i < IN; i++) xq[(size_t)n * IN + i] = (int8_t)nearbyintf(row[i] * inv);
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
        for (int j = 0; j < OUT; j++) o[j] = xs * w_scale[j] * (float)a[j] + (b ? b[j] : 0.0f);
    }
}

int pmt_cpu_has_int8_dot(void) {
    /* ISA values are nested bit sets: a CPU with more includes the bits of less. */
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    const unsigned avx512_vnni = (unsigned)dnnl_cpu_isa_avx512_core_vnni, avx2_vnni = (unsigned)dnnl_cpu_isa_avx2_vnni;
    return (isa & avx512_vnni) == avx512_vnni || (isa & avx2_vnni) == avx2_vnni;
}
