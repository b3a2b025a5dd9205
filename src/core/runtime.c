/* runtime.c — see runtime.h. */
#include "core/runtime.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int pmt_set_threads(int threads) {
    int n = threads > 0 ? threads : omp_get_num_procs();
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
    return n;
}

double pmt_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double pmt_peak_rss_mib(void) {
    /* VmHWM (unlike getrusage's ru_maxrss) honours clear_refs resets. */
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double kib = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6) && sscanf(line + 6, "%lf", &kib) == 1) break;
    fclose(f);
    return kib < 0 ? -1 : kib / 1024.0;
}

int pmt_reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    if (fclose(f) != 0) ok = 0;
    return ok ? 0 : -1;
}
