/* signals.c — see signals.h. */
#include "core/signals.h"

#include <stdio.h>
#include <string.h>

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

const char *pmt_signal_name(int signo, char *buf, size_t len) {
    if (signo == SIGINT) return "SIGINT";
    if (signo == SIGTERM) return "SIGTERM";
    snprintf(buf, len, "signal %d", signo);
    return buf;
}
