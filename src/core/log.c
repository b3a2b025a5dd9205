/* log.c — see log.h. */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pmt_log_fn log_fn;      /* guarded by log_lock, with log_user */
static void *log_user;

void pmt_log_set(pmt_log_fn fn, void *user) {
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&log_lock);
}

void pmt_log(pmt_log_level level, const char *fmt, ...) {
    pthread_mutex_lock(&log_lock);
    const pmt_log_fn fn = log_fn;
    void *user = log_user;
    pthread_mutex_unlock(&log_lock);
    if (!fn) return;
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    fn(level, message, user);
}

void pmt_log_to_stderr(pmt_log_level level, const char *message, void *user) {
    (void)user;
    fprintf(stderr, "%s%s\n", level == PMT_LOG_WARNING ? "projmt: warning: " : "", message);
}
