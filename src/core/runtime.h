/*
 * runtime.h — process-level helpers every command shares: thread counts for
 * OpenMP and OpenBLAS together, a monotonic clock, and resident memory.
 */
#ifndef PROJMT_RUNTIME_H
#define PROJMT_RUNTIME_H

/* Sets OpenMP and OpenBLAS thread counts together (0 = all cores) — with the
 * OpenMP build of OpenBLAS both draw from one pool; returns the count used. */
int pmt_set_threads(int threads);
/* Seconds on a monotonic clock. */
double pmt_now_seconds(void);
/* Peak resident set size of this process in MiB since start or the last reset. */
double pmt_peak_rss_mib(void);
/* Resets the kernel's peak-RSS counter (Linux clear_refs 5); 0 if it worked. */
int pmt_reset_peak_rss(void);

#endif
