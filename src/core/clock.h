/*
 * clock.h — the one monotonic clock every timing in projmt reads (phase
 * times, tokens per second, decode latency, ETA): wall-clock adjustments
 * (NTP, a changed date) never make a duration negative.
 */
#ifndef PROJMT_CLOCK_H
#define PROJMT_CLOCK_H

/* Seconds on a monotonic clock (CLOCK_MONOTONIC); only differences mean anything. */
double pmt_now_seconds(void);
/* CPU seconds used by the whole process so far (all threads;
 * CLOCK_PROCESS_CPUTIME_ID). On a shared machine, a single-threaded run's
 * CPU time per step is far steadier than its wall-clock time. */
double pmt_cpu_seconds(void);

#endif
