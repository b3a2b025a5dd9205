/*
 * gemm_internal.h — private to nn/: the process's one oneDNN CPU engine and
 * stream, shared by nn/gemm.c (matmul primitives) and nn/gemm_lowp.c
 * (inference products), created on first use, thread-safely, and living
 * until exit; and the output a failed product leaves.
 */
#ifndef PROJMT_GEMM_INTERNAL_H
#define PROJMT_GEMM_INTERNAL_H

#include <oneapi/dnnl/dnnl.h>

/* 0 with the engine and stream, or -1 when oneDNN cannot make them. */
int pmt_dnnl_cpu(dnnl_engine_t *engine, dnnl_stream_t *stream);

/* C [M, N] (leading dimension ldc) = NaN: what a failed product leaves, so
 * that nothing wrong passes for a result. */
void pmt_gemm_fail_output(float *C, int M, int N, int ldc);

#endif
