/*
 * clock.h — the one monotonic clock every timing in projmt reads (phase
 * times, tokens per second, decode latency, ETA): wall-clock adjustments
 * (NTP, a changed date) never make a duration negative.
 */
#ifndef PROJMT_CLOCK_H
#define PROJMT_CLOCK_H

/* Seconds on a monotonic clock (CLOCK_MONOTONIC); only differences mean anything. */
double pmt_now_seconds(void);

#endif
