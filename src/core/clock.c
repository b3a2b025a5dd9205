/* clock.c — see clock.h. */
#include "core/clock.h"

#include <time.h>

static double read_clock(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double pmt_now_seconds(void) { return read_clock(CLOCK_MONOTONIC); }

double pmt_cpu_seconds(void) { return read_clock(CLOCK_PROCESS_CPUTIME_ID); }
