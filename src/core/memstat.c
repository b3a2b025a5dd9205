/* memstat.c — see memstat.h. */
#include "core/memstat.h"

#include <stdio.h>
#include <string.h>

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
