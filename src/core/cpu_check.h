/*
 * cpu_check.h — does this CPU run the instructions projmt was compiled
 * for? projmt's own kernels are built for one instruction set
 * (-DPROJMT_MARCH, `native` by default: the build machine's), so a binary
 * or a .deb taken to an older CPU would die of an illegal instruction in
 * the middle of a kernel. The program and the C library ask first and stop
 * with a message that names what is missing and how to rebuild.
 *
 * Two files, because the check must not itself need the features it
 * checks: cpu_check_built.c is compiled with the build's flags and only
 * records, as data, which features the compiler was allowed to use;
 * cpu_check.c is compiled for the x86-64 baseline (CMakeLists.txt) and
 * compares that record with the CPU (CPUID and XGETBV).
 */
#ifndef PROJMT_CPU_CHECK_H
#define PROJMT_CPU_CHECK_H

#include <stddef.h>

/* The x86 features a build may use, one flag each: what GCC's -march
 * values up to AVX-512 (Zen 4, Sapphire Rapids) turn on. A new one goes
 * in three places: here, cpu_check_built.c (its macro) and cpu_check.c
 * (its CPUID bit and its name). */
typedef struct pmt_cpu_features {
    int sse4_2, popcnt, avx, avx2, fma, f16c, bmi, bmi2, lzcnt, movbe, avx512f, avx512bw, avx512dq,
        avx512vl, avx512cd, avx512vnni, avx512bf16, avx512ifma, avx512vbmi, avx512vbmi2, avx512bitalg,
        avx512vpopcntdq, avxvnni, gfni, vaes, vpclmulqdq;
} pmt_cpu_features;

/* What this build's compiler flags allow (cpu_check_built.c), and the
 * -march it was given. */
extern const pmt_cpu_features pmt_cpu_built_for;
extern const char pmt_cpu_built_march[];
/* 1 in a portable build's engine (CMake's PROJMT_PORTABLE), of which the
 * loader normally picks a level the CPU runs: then only a forced load
 * (LD_LIBRARY_PATH, ld.so --glibc-hwcaps-prepend) or a CPU below the
 * x86-64-v2 base gets here, and the way out differs. */
extern const int pmt_cpu_built_portable;

/* The features this CPU has and its OS lets programs use (CPUID, and
 * XGETBV for the AVX and AVX-512 register states), as GCC's
 * __builtin_cpu_supports reports them; all 0 off x86. */
void pmt_cpu_detect(pmt_cpu_features *have);

/* 0 when the CPU has every feature of *need; else -1 with err naming the
 * missing ones. */
int pmt_cpu_lacks(const pmt_cpu_features *need, char *err, size_t errlen);

/* pmt_cpu_lacks for this build, with the way out in err: 0 or -1. */
int pmt_cpu_check(char *err, size_t errlen);

#endif
