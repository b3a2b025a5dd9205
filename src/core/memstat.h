/*
 * memstat.h — peak resident memory of this process, for the benchmarks and
 * the eval report (Linux /proc; -1 where it is not available).
 */
#ifndef PROJMT_MEMSTAT_H
#define PROJMT_MEMSTAT_H

/* Peak resident set size of this process in MiB since start or the last
 * reset, or -1 when /proc cannot tell. */
double pmt_peak_rss_mib(void);
/* Resets the kernel's peak-RSS counter (Linux clear_refs 5); 0 if it worked. */
int pmt_reset_peak_rss(void);

#endif
