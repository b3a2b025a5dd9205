/*
 * cpu_check.c — the comparison of cpu_check.h, compiled for the x86-64
 * baseline (CMakeLists.txt sets its flags) so that it runs on any x86-64
 * CPU, the ones it refuses included.
 *
 * The features are read from CPUID and XGETBV here, not asked of
 * __builtin_cpu_supports: clang 14 (Debian 12's, which builds the fuzz and
 * ThreadSanitizer targets) knows neither "f16c", "lzcnt", "movbe",
 * "avxvnni" nor "vaes" there, and the file would not compile. The rules
 * are GCC's (libgcc's cpuinfo): a feature of the AVX registers counts only
 * when the OS saves their state (XCR0 bits 1–2), one of AVX-512's only when
 * it also saves the mask and upper registers (bits 5–7).
 */
#include "core/cpu_check.h"

#include <stdio.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
/* XCR0, the register states the OS saves (0 when XGETBV is unavailable). */
static unsigned long long os_saved_states(unsigned ecx1) {
    if (!(ecx1 & (1u << 27))) return 0;   /* OSXSAVE: XGETBV may be used */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

void pmt_cpu_detect(pmt_cpu_features *have) {
    memset(have, 0, sizeof *have);
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d, c1 = 0, b7 = 0, c7 = 0, a71 = 0, c81 = 0;
    const unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf >= 1) __cpuid(1, a, b, c1, d);
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b7, c7, d);
        if (a >= 1) __cpuid_count(7, 1, a71, b, c, d);   /* a: the last sub-leaf of leaf 7 */
    }
    if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u) __cpuid(0x80000001u, a, b, c81, d);
    const unsigned long long xcr0 = os_saved_states(c1);
    const int avx_ok = (xcr0 & 0x6) == 0x6, avx512_ok = avx_ok && (xcr0 & 0xe0) == 0xe0;
#define BIT(reg, n) (((reg) >> (n)) & 1u)
    have->sse4_2 = BIT(c1, 20);
    have->popcnt = BIT(c1, 23);
    have->movbe = BIT(c1, 22);
    have->bmi = BIT(b7, 3);
    have->bmi2 = BIT(b7, 8);
    have->lzcnt = BIT(c81, 5);
    have->gfni = BIT(c7, 8);
    if (avx_ok) {
        have->avx = BIT(c1, 28);
        have->fma = BIT(c1, 12);
        have->f16c = BIT(c1, 29);
        have->avx2 = BIT(b7, 5);
        have->vaes = BIT(c7, 9);
        have->vpclmulqdq = BIT(c7, 10);
        have->avxvnni = BIT(a71, 4);
    }
    if (avx512_ok) {
        have->avx512f = BIT(b7, 16);
        have->avx512dq = BIT(b7, 17);
        have->avx512ifma = BIT(b7, 21);
        have->avx512cd = BIT(b7, 28);
        have->avx512bw = BIT(b7, 30);
        have->avx512vl = BIT(b7, 31);
        have->avx512vbmi = BIT(c7, 1);
        have->avx512vbmi2 = BIT(c7, 6);
        have->avx512vnni = BIT(c7, 11);
        have->avx512bitalg = BIT(c7, 12);
        have->avx512vpopcntdq = BIT(c7, 14);
        have->avx512bf16 = BIT(a71, 5);
    }
#undef BIT
#endif
}

int pmt_cpu_lacks(const pmt_cpu_features *need, char *err, size_t errlen) {
    pmt_cpu_features have;
    pmt_cpu_detect(&have);
    const struct { int needed, present; const char *name; } rows[] = {
        {need->sse4_2, have.sse4_2, "sse4.2"},
        {need->popcnt, have.popcnt, "popcnt"},
        {need->avx, have.avx, "avx"},
        {need->avx2, have.avx2, "avx2"},
        {need->fma, have.fma, "fma"},
        {need->f16c, have.f16c, "f16c"},
        {need->bmi, have.bmi, "bmi"},
        {need->bmi2, have.bmi2, "bmi2"},
        {need->lzcnt, have.lzcnt, "lzcnt"},
        {need->movbe, have.movbe, "movbe"},
        {need->avx512f, have.avx512f, "avx512f"},
        {need->avx512bw, have.avx512bw, "avx512bw"},
        {need->avx512dq, have.avx512dq, "avx512dq"},
        {need->avx512vl, have.avx512vl, "avx512vl"},
        {need->avx512cd, have.avx512cd, "avx512cd"},
        {need->avx512vnni, have.avx512vnni, "avx512vnni"},
        {need->avx512bf16, have.avx512bf16, "avx512bf16"},
        {need->avx512ifma, have.avx512ifma, "avx512ifma"},
        {need->avx512vbmi, have.avx512vbmi, "avx512vbmi"},
        {need->avx512vbmi2, have.avx512vbmi2, "avx512vbmi2"},
        {need->avx512bitalg, have.avx512bitalg, "avx512bitalg"},
        {need->avx512vpopcntdq, have.avx512vpopcntdq, "avx512vpopcntdq"},
        {need->avxvnni, have.avxvnni, "avxvnni"},
        {need->gfni, have.gfni, "gfni"},
        {need->vaes, have.vaes, "vaes"},
        {need->vpclmulqdq, have.vpclmulqdq, "vpclmulqdq"},
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
