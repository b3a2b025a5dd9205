/*
 * trainlog.h — what a training run tells the outside: the train.tsv table
 * and the human progress display.
 *
 * train.tsv is ONE table with a `kind` column (train | valid) and fixed
 * columns, empty where a value does not apply, so a plot reads it with one
 * call (pandas.read_csv(sep="\t")):
 *   kind step epoch loss accuracy perplexity lr grad_norm tokens_per_s elapsed_s bleu chrf
 * step: optimizer steps so far; epoch: epochs completed (fractional);
 * loss: label-smoothed cross-entropy per target token; accuracy: teacher-
 * forced argmax == reference over non-pad target tokens; perplexity:
 * exp(plain NLL per token); tokens_per_s: non-pad source + target tokens per
 * second of training steps; elapsed_s: training time over all sessions;
 * bleu/chrf (valid rows): BLEU/chrF of greedy translations of the first
 * valid_bleu_sentences validation sentences (valid_bleu.h; empty when off).
 *
 * On resume, rows after the checkpoint's step are dropped (the file is
 * rewritten through a temporary + rename), so a crash between checkpoints
 * never leaves duplicate steps. Every row is flushed as written.
 *
 * Progress: on a terminal (isatty(stderr)) one `\r`-updated line; otherwise
 * plain lines at each train row. Messages clear the live line first.
 *
 * Ownership: pmt_trainlog owns its FILE; pmt_trainlog_close closes it.
 */
#ifndef PROJMT_TRAINLOG_H
#define PROJMT_TRAINLOG_H

#include <stdint.h>
#include <stdio.h>

typedef struct pmt_trainlog {
    FILE *tsv;
    char path[1100];
    int quiet;                   /* no progress output at all */
    int tty;                     /* stderr is a terminal: live line */
    int live;                    /* a live line is on screen */
    double last_draw;            /* monotonic seconds of the last live draw */
} pmt_trainlog;

/* One row's values; NAN means "not applicable" (empty field). */
typedef struct pmt_log_row {
    const char *kind;            /* "train" | "valid" */
    int64_t step;
    double epoch, loss, accuracy, perplexity, lr, grad_norm, tokens_per_s, elapsed_s, bleu, chrf;
} pmt_log_row;

/* Opens path for appending, keeping the header and rows with step <=
 * keep_through (keep_through < 0: start a new table). 0, or -1 with err. */
int pmt_trainlog_open(pmt_trainlog *l, const char *path, int64_t keep_through, int quiet, char *err, size_t errlen);
/* Appends and flushes one row; 0, or -1 with err (disk full, ...). A log
 * that was never opened (zeroed: data-parallel ranks other than 0) ignores it. */
int pmt_trainlog_row(pmt_trainlog *l, const pmt_log_row *row, char *err, size_t errlen);
/* Closes the table; 0, or -1 with err if the final flush failed. */
int pmt_trainlog_close(pmt_trainlog *l, char *err, size_t errlen);

/* The progress display: a live line on a terminal (throttled unless force). */
void pmt_progress_live(pmt_trainlog *l, const char *line, int force);
/* A plain progress line when stderr is not a terminal (nothing on a terminal). */
void pmt_progress_plain(pmt_trainlog *l, const char *line);
/* A message on its own line (printf-style), clearing the live line first. */
void pmt_progress_message(pmt_trainlog *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Seconds as "4m10s" / "2h05m" / "37s" into buf. */
void pmt_format_duration(double seconds, char *buf, size_t len);

#endif
