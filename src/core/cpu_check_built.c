/*
 * cpu_check_built.c — which x86 features this build's flags let the
 * compiler use (see cpu_check.h). Compiled with the build's flags like the
 * kernels; data only, no code that could run on a CPU without them. A
 * portable build compiles it once per instruction-set level (CMakeLists.txt,
 * PROJMT_MARCH_NAME), so each engine library names its own level, which
 * `projmt --version` prints.
 */
#include "core/cpu_check.h"

#ifndef PROJMT_MARCH_NAME
#define PROJMT_MARCH_NAME "unknown"
#endif

#if defined(__x86_64__) || defined(__i386__)
const pmt_cpu_features pmt_cpu_built_for = {
#ifdef __SSE4_2__
    .sse4_2 = 1,
#endif
#ifdef __POPCNT__
    .popcnt = 1,
#endif
#ifdef __AVX__
    .avx = 1,
#endif
#ifdef __AVX2__
    .avx2 = 1,
#endif
#ifdef __FMA__
    .fma = 1,
#endif
#ifdef __F16C__
    .f16c = 1,
#endif
#ifdef __BMI__
    .bmi = 1,
#endif
#ifdef __BMI2__
    .bmi2 = 1,
#endif
#ifdef __LZCNT__
    .lzcnt = 1,
#endif
#ifdef __MOVBE__
    .movbe = 1,
#endif
#ifdef __AVX512F__
    .avx512f = 1,
#endif
#ifdef __AVX512BW__
    .avx512bw = 1,
#endif
#ifdef __AVX512DQ__
    .avx512dq = 1,
#endif
#ifdef __AVX512VL__
    .avx512vl = 1,
#endif
#ifdef __AVX512CD__
    .avx512cd = 1,
#endif
#ifdef __AVX512VNNI__
    .avx512vnni = 1,
#endif
#ifdef __AVX512BF16__
    .avx512bf16 = 1,
#endif
#ifdef __AVX512IFMA__
    .avx512ifma = 1,
#endif
#ifdef __AVX512VBMI__
    .avx512vbmi = 1,
#endif
#ifdef __AVX512VBMI2__
    .avx512vbmi2 = 1,
#endif
#ifdef __AVX512BITALG__
    .avx512bitalg = 1,
#endif
#ifdef __AVX512VPOPCNTDQ__
    .avx512vpopcntdq = 1,
#endif
#ifdef __AVXVNNI__
    .avxvnni = 1,
#endif
#ifdef __GFNI__
    .gfni = 1,
#endif
#ifdef __VAES__
    .vaes = 1,
#endif
#ifdef __VPCLMULQDQ__
    .vpclmulqdq = 1,
#endif
};
#else
const pmt_cpu_features pmt_cpu_built_for = {0};
#endif

const char pmt_cpu_built_march[] = PROJMT_MARCH_NAME;

#ifdef PROJMT_PORTABLE_ENGINE
const int pmt_cpu_built_portable = 1;
#else
const int pmt_cpu_built_portable = 0;
#endif
