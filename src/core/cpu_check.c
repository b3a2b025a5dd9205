/*
 * cpu_check.c — the comparison of cpu_check.h, compiled for the x86-64
 * baseline (CMakeLists.txt sets its flags) so that it runs on any x86-64
 * CPU, the ones it refuses included.
 */
#include "core/cpu_check.h"

#include <stdio.h>
#include <string.h>

int pmt_cpu_lacks(const pmt_cpu_features *need, char *err, size_t errlen) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    /* __builtin_cpu_supports takes a literal: one row per feature. */
    const struct { int needed, present; const char *name; } rows[] = {
        {need->sse4_2, __builtin_cpu_supports("sse4.2"), "sse4.2"},
        {need->popcnt, __builtin_cpu_supports("popcnt"), "popcnt"},
        {need->avx, __builtin_cpu_supports("avx"), "avx"},
        {need->avx2, __builtin_cpu_supports("avx2"), "avx2"},
        {need->fma, __builtin_cpu_supports("fma"), "fma"},
        {need->f16c, __builtin_cpu_supports("f16c"), "f16c"},
        {need->bmi, __builtin_cpu_supports("bmi"), "bmi"},
        {need->bmi2, __builtin_cpu_supports("bmi2"), "bmi2"},
        {need->lzcnt, __builtin_cpu_supports("lzcnt"), "lzcnt"},
        {need->movbe, __builtin_cpu_supports("movbe"), "movbe"},
        {need->avx512f, __builtin_cpu_supports("avx512f"), "avx512f"},
        {need->avx512bw, __builtin_cpu_supports("avx512bw"), "avx512bw"},
        {need->avx512dq, __builtin_cpu_supports("avx512dq"), "avx512dq"},
        {need->avx512vl, __builtin_cpu_supports("avx512vl"), "avx512vl"},
        {need->avx512cd, __builtin_cpu_supports("avx512cd"), "avx512cd"},
        {need->avx512vnni, __builtin_cpu_supports("avx512vnni"), "avx512vnni"},
        {need->avx512bf16, __builtin_cpu_supports("avx512bf16"), "avx512bf16"},
        {need->avx512ifma, __builtin_cpu_supports("avx512ifma"), "avx512ifma"},
        {need->avx512vbmi, __builtin_cpu_supports("avx512vbmi"), "avx512vbmi"},
        {need->avx512vbmi2, __builtin_cpu_supports("avx512vbmi2"), "avx512vbmi2"},
        {need->avx512bitalg, __builtin_cpu_supports("avx512bitalg"), "avx512bitalg"},
        {need->avx512vpopcntdq, __builtin_cpu_supports("avx512vpopcntdq"), "avx512vpopcntdq"},
        {need->avxvnni, __builtin_cpu_supports("avxvnni"), "avxvnni"},
        {need->gfni, __builtin_cpu_supports("gfni"), "gfni"},
        {need->vaes, __builtin_cpu_supports("vaes"), "vaes"},
        {need->vpclmulqdq, __builtin_cpu_supports("vpclmulqdq"), "vpclmulqdq"},
    };
    size_t used = 0;
    int missing = 0;
    if (errlen) err[0] = '\0';
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!rows[i].needed || rows[i].present) continue;
        missing++;
        if (used < errlen) {
            int n = snprintf(err + used, errlen - used, "%s%s", missing > 1 ? ", " : "", rows[i].name);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    return missing ? -1 : 0;
#else
    (void)need;
    if (errlen) err[0] = '\0';
    return 0;
#endif
}

int pmt_cpu_check(char *err, size_t errlen) {
    char missing[160];
    if (pmt_cpu_lacks(&pmt_cpu_built_for, missing, sizeof missing) == 0) return 0;
    if (pmt_cpu_built_portable) {
        snprintf(err, errlen,
                 "this CPU lacks %s, which the loaded engine (-march=%s) uses: the loader was made to load it "
                 "(LD_LIBRARY_PATH, ld.so --glibc-hwcaps-prepend), or the CPU is below the package's x86-64-v2 "
                 "base; drop that setting, or build projmt on this machine (cmake -DPROJMT_MARCH=native)",
                 missing, pmt_cpu_built_march);
        return -1;
    }
    snprintf(err, errlen,
             "this projmt was compiled for other CPUs (-march=%s) and this CPU lacks %s; build it on this machine "
             "(cmake -DPROJMT_MARCH=native, the default) or use a build made with -DPROJMT_MARCH=x86-64-v2",
             pmt_cpu_built_march, missing);
    return -1;
}
