/*
 * test_cpu_check.c — core/cpu_check.h: the CPU that built this test runs
 * it (the check passes here, and names the build's -march); a need of
 * nothing passes; a need of a feature this CPU lacks fails and names
 * exactly the missing features, however many; a need of features it has
 * passes. What "lacks" means is asked of the compiler's own
 * __builtin_cpu_supports, the same source the check uses.
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
    /* A short buffer is cut, never overrun. */
    char tiny[5];
    memset(tiny, 'x', sizeof tiny);
    pmt_cpu_lacks(&need, tiny, sizeof tiny);
    CHECK(memchr(tiny, '\0', sizeof tiny) != NULL);
#endif
    return test_finish();
}
