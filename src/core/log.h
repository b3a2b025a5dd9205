/*
 * log.h — where the library's warnings go.
 *
 * Why a callback and not stderr: libprojmt is embedded in other programs
 * (servers, Python), and a library that writes to their stderr is one they
 * cannot silence or route. Library code (core … translate) reports
 * warnings through pmt_log only; the program decides where they go: the
 * `projmt` command installs pmt_log_to_stderr at start, the C API's
 * projmt_set_log_callback installs the user's function, and with none
 * installed (the library's default) warnings are dropped.
 *
 * Threads: pmt_log may be called from any thread, the callback with it; the
 * callback and its user pointer are swapped together under a lock, so a
 * message never reaches a half-installed pair. The callback must not call
 * pmt_log_set.
 */
#ifndef PROJMT_LOG_H
#define PROJMT_LOG_H

typedef enum pmt_log_level { PMT_LOG_WARNING = 1, PMT_LOG_INFO = 2 } pmt_log_level;

/* message: one line without its newline, valid during the call. */
typedef void (*pmt_log_fn)(pmt_log_level level, const char *message, void *user);

/* Installs fn (NULL: silent) with its user pointer, for every thread. */
void pmt_log_set(pmt_log_fn fn, void *user);
/* Formats and hands one message to the installed callback (nothing when
 * none is installed). Messages longer than 1 KiB are cut. */
void pmt_log(pmt_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A callback writing "projmt: warning: <message>\n" (or the message alone
 * at PMT_LOG_INFO) to stderr: the command-line program's. */
void pmt_log_to_stderr(pmt_log_level level, const char *message, void *user);

#endif
