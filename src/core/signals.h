/*
 * signals.h — the graceful stop on SIGINT / SIGTERM shared by train and
 * translate.
 *
 * While caught, SIGINT and SIGTERM only call the command's handler, which
 * records the signal; the command finishes its unit of work (a training
 * step, a batch of translations), leaves every file whole and exits
 * 128 + signal. The handler is reset on delivery, so a second signal kills
 * at once. No SA_RESTART: a read blocked on input returns with EINTR. A
 * signal ignored by the parent (SIGINT of a background job) is caught too.
 *
 * Ownership: pmt_stop_signals holds the handlers to put back; nothing is
 * allocated.
 */
#ifndef PROJMT_SIGNALS_H
#define PROJMT_SIGNALS_H

#include <signal.h>
#include <stddef.h>

typedef struct pmt_stop_signals {
    struct sigaction old_int, old_term;
} pmt_stop_signals;

/* Installs handler for SIGINT and SIGTERM, saving the previous handlers. */
void pmt_stop_signals_catch(pmt_stop_signals *saved, void (*handler)(int));
/* Puts back the handlers saved by pmt_stop_signals_catch. */
void pmt_stop_signals_restore(const pmt_stop_signals *saved);
/* "SIGINT", "SIGTERM" or "signal N" (in buf), for messages. */
const char *pmt_signal_name(int signo, char *buf, size_t len);

#endif
