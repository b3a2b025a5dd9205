/*
 * test_cpu_check.c — core/cpu_check.h: the CPU that built this test runs
 * it (the check passes here, and names the build's -march); a need of
 * nothing passes; a need of a feature this CPU lacks fails and names
 * exactly the missing features, however many; a need of features it has
 * passes. What "lacks" means is asked of the compiler's own
 * __builtin_cpu_supports; the check reads CPUID itself (clang 14 knows
 * too few of the names), and under GCC every feature it reports is
 * compared with GCC's answer.
 */
#include "core/cpu_check.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>

int main(void) {
    char err[400];
    CHECK_MSG(pmt_cpu_check(err, sizeof err) == 0, "the build machine refused: %s", err);
    CHECK(pmt_cpu_built_march[0] != '\0');
    printf("built for -march=%s\n", pmt_cpu_built_march);
    const pmt_cpu_features none = {0};
    CHECK(pmt_cpu_lacks(&none, err, sizeof err) == 0 && err[0] == '\0');
#if defined(__x86_64__)
    __builtin_cpu_init();
    /* Two features this CPU has, two it may lack (checked in that order). */
    pmt_cpu_features have = {0};
    have.sse4_2 = __builtin_cpu_supports("sse4.2") != 0;
    have.popcnt = __builtin_cpu_supports("popcnt") != 0;
    CHECK(pmt_cpu_lacks(&have, err, sizeof err) == 0);
    pmt_cpu_features need = have;
    need.avx512f = 1;
    need.avx512bf16 = 1;
    const int lacks_f = !__builtin_cpu_supports("avx512f"), lacks_bf16 = !__builtin_cpu_supports("avx512bf16");
    const int rc = pmt_cpu_lacks(&need, err, sizeof err);
    CHECK_MSG(rc == ((lacks_f || lacks_bf16) ? -1 : 0), "rc %d for avx512f (lacking %d), avx512bf16 (lacking %d)", rc,
              lacks_f, lacks_bf16);
    const char *want = lacks_f && lacks_bf16 ? "avx512f, avx512bf16" : lacks_f ? "avx512f" : lacks_bf16 ? "avx512bf16" : "";
    CHECK_MSG(!strcmp(err, want), "missing '%s', expected '%s'", err, want);
    printf("a need of avx512f and avx512bf16 on this CPU: %s\n", rc ? err : "met");
#if !defined(__clang__)
    /* CPUID as read by the check, feature by feature, against GCC's own
     * reading (the OS-state rules for AVX and AVX-512 included). */
    pmt_cpu_features got;
    pmt_cpu_detect(&got);
    const struct { int got, gcc; const char *name; } rows[] = {
        {got.sse4_2, __builtin_cpu_supports("sse4.2"), "sse4.2"},
        {got.popcnt, __builtin_cpu_supports("popcnt"), "popcnt"},
        {got.avx, __builtin_cpu_supports("avx"), "avx"},
        {got.avx2, __builtin_cpu_supports("avx2"), "avx2"},
        {got.fma, __builtin_cpu_supports("fma"), "fma"},
        {got.f16c, __builtin_cpu_supports("f16c"), "f16c"},
        {got.bmi, __builtin_cpu_supports("bmi"), "bmi"},
        {got.bmi2, __builtin_cpu_supports("bmi2"), "bmi2"},
        {got.lzcnt, __builtin_cpu_supports("lzcnt"), "lzcnt"},
        {got.movbe, __builtin_cpu_supports("movbe"), "movbe"},
        {got.avx512f, __builtin_cpu_supports("avx512f"), "avx512f"},
        {got.avx512bw, __builtin_cpu_supports("avx512bw"), "avx512bw"},
        {got.avx512dq, __builtin_cpu_supports("avx512dq"), "avx512dq"},
        {got.avx512vl, __builtin_cpu_supports("avx512vl"), "avx512vl"},
        {got.avx512cd, __builtin_cpu_supports("avx512cd"), "avx512cd"},
        {got.avx512vnni, __builtin_cpu_supports("avx512vnni"), "avx512vnni"},
        {got.avx512bf16, __builtin_cpu_supports("avx512bf16"), "avx512bf16"},
        {got.avx512ifma, __builtin_cpu_supports("avx512ifma"), "avx512ifma"},
        {got.avx512vbmi, __builtin_cpu_supports("avx512vbmi"), "avx512vbmi"},
        {got.avx512vbmi2, __builtin_cpu_supports("avx512vbmi2"), "avx512vbmi2"},
        {got.avx512bitalg, __builtin_cpu_supports("avx512bitalg"), "avx512bitalg"},
        {got.avx512vpopcntdq, __builtin_cpu_supports("avx512vpopcntdq"), "avx512vpopcntdq"},
        {got.avxvnni, __builtin_cpu_supports("avxvnni"), "avxvnni"},
        {got.gfni, __builtin_cpu_supports("gfni"), "gfni"},
        {got.vaes, __builtin_cpu_supports("vaes"), "vaes"},
        {got.vpclmulqdq, __builtin_cpu_supports("vpclmulqdq"), "vpclmulqdq"},
    };
    CHECK(sizeof rows / sizeof rows[0] == sizeof got / sizeof got.avx);   /* every field compared */
    printf("this CPU has:");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        CHECK_MSG(rows[i].got == (rows[i].gcc != 0), "%s: CPUID reads %d, GCC's __builtin_cpu_supports %d",
                  rows[i].name, rows[i].got, rows[i].gcc != 0);
        if (rows[i].got) printf(" %s", rows[i].name);
    }
    printf("\n");
#endif
    /* A short buffer is cut, never overrun. */
    char tiny[5];
    memset(tiny, 'x', sizeof tiny);
    pmt_cpu_lacks(&need, tiny, sizeof tiny);
    CHECK(memchr(tiny, '\0', sizeof tiny) != NULL);
#endif
    return test_finish();
}
