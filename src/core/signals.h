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
 * Holding (training): between pmt_stop_signals_hold and _unhold the two
 * signals are blocked in the calling thread and in the threads of the OpenMP
 * pool, and reach the handler only in pmt_stop_signals_poll, which the
 * training loop calls between steps. A signal delivered in the middle of a
 * step corrupted the heap inside oneDNN's sgemm in about half of the Ctrl-C
 * stops of a base-config run (glibc abort "corrupted size vs. prev_size",
 * "free(): invalid pointer"); a step cannot use the signal before its end
 * anyway, so it is taken there.
 *
 * Ownership: pmt_stop_signals holds the handlers and the signal mask to put
 * back; nothing is allocated.
 */
#ifndef PROJMT_SIGNALS_H
#define PROJMT_SIGNALS_H

#include <signal.h>
#include <stddef.h>

typedef struct pmt_stop_signals {
    struct sigaction old_int, old_term;
    sigset_t old_mask;   /* the calling thread's mask before pmt_stop_signals_hold */
    int held;
} pmt_stop_signals;

/* Installs handler for SIGINT and SIGTERM, saving the previous handlers. */
void pmt_stop_signals_catch(pmt_stop_signals *saved, void (*handler)(int));
/* Puts back the handlers saved by pmt_stop_signals_catch. */
void pmt_stop_signals_restore(const pmt_stop_signals *saved);
/* Blocks SIGINT and SIGTERM in the calling thread and the OpenMP pool
 * (threads the pool starts later inherit the block). */
void pmt_stop_signals_hold(pmt_stop_signals *saved);
/* Lets a pending SIGINT or SIGTERM reach the handler now, then blocks them
 * again. Call from the thread that called pmt_stop_signals_hold. */
void pmt_stop_signals_poll(void);
/* Puts back the signal masks of pmt_stop_signals_hold (no-op if not held):
 * from here a second signal, after SA_RESETHAND, kills at once. */
void pmt_stop_signals_unhold(pmt_stop_signals *saved);
/* "SIGINT", "SIGTERM" or "signal N" (in buf), for messages. */
const char *pmt_signal_name(int signo, char *buf, size_t len);

#endif
