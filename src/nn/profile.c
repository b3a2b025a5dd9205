/* profile.c — see profile.h. */
#include "nn/profile.h"

#include "core/clock.h"

/* The calling thread's profile: `projmt bench` times the products and
 * kernels its own thread calls (they run from serial code), and a
 * translator on another thread neither adds to it nor races on it. */
static _Thread_local int enabled;
static _Thread_local double seconds[PMT_PHASES], flops;

void pmt_profile_enable(int on) { enabled = on; }

void pmt_profile_reset(void) {
    for (int i = 0; i < PMT_PHASES; i++) seconds[i] = 0.0;
    flops = 0.0;
}

double pmt_profile_seconds(pmt_phase phase) { return seconds[phase]; }

double pmt_profile_begin(void) { return enabled ? pmt_now_seconds() : 0.0; }

void pmt_profile_end(pmt_phase phase, double t0) {
    if (enabled) seconds[phase] += pmt_now_seconds() - t0;
}

void pmt_profile_add_flops(double n) {
    if (enabled) flops += n;
}

double pmt_profile_flops(void) { return flops; }
