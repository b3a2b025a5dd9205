/* signals.c — see signals.h. */
#include "core/signals.h"

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static void stop_set(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

void pmt_stop_signals_catch(pmt_stop_signals *saved, void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &saved->old_int);
    sigaction(SIGTERM, &sa, &saved->old_term);
}

void pmt_stop_signals_restore(const pmt_stop_signals *saved) {
    sigaction(SIGINT, &saved->old_int, NULL);
    sigaction(SIGTERM, &saved->old_term, NULL);
}

void pmt_stop_signals_hold(pmt_stop_signals *saved) {
    sigset_t set;
    stop_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, &saved->old_mask);
    /* Every pool thread runs the region once: with the same count the pool
     * keeps its threads, so each one is blocked for the steps to come. */
#pragma omp parallel
    if (omp_get_thread_num() != 0) pthread_sigmask(SIG_BLOCK, &set, NULL);
    saved->held = 1;
}

void pmt_stop_signals_poll(void) {
    sigset_t set;
    stop_set(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void pmt_stop_signals_unhold(pmt_stop_signals *saved) {
    if (!saved->held) return;
    sigset_t set;
    stop_set(&set);
#pragma omp parallel
    if (omp_get_thread_num() != 0) pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    pthread_sigmask(SIG_SETMASK, &saved->old_mask, NULL);
    saved->held = 0;
}

const char *pmt_signal_name(int signo, char *buf, size_t len) {
    if (signo == SIGINT) return "SIGINT";
    if (signo == SIGTERM) return "SIGTERM";
    snprintf(buf, len, "signal %d", signo);
    return buf;
}
