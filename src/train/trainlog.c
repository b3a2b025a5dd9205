/*
 * trainlog.c — see trainlog.h. The table is trimmed on open (resume) by
 * rewriting it atomically (core/fileio.h) with the rows to keep.
 */
#include "train/trainlog.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/clock.h"

static const char HEADER[] =
    "kind\tstep\tepoch\tloss\taccuracy\tperplexity\tlr\tgrad_norm\ttokens_per_s\telapsed_s\tbleu\tchrf\n";
/* The live line is redrawn at most this often (seconds). */
#define LIVE_INTERVAL 0.2

/* Step number of a data row ("train\t123\t..."), or -1 for anything else. */
static int64_t row_step(const char *line) {
    const char *tab = strchr(line, '\t');
    if (!tab || (strncmp(line, "train\t", 6) && strncmp(line, "valid\t", 6))) return -1;
    char *end;
    long long v = strtoll(tab + 1, &end, 10);
    return (end != tab + 1 && *end == '\t') ? (int64_t)v : -1;
}

/* Rewrites the table atomically with the header and the old rows to keep. */
static int rewrite_table(const char *path, int64_t keep_through, char *err, size_t errlen) {
    pmt_atomic_file af;
    if (pmt_atomic_open(&af, path, err, errlen) != 0) return -1;
    int ok = fputs(HEADER, af.f) >= 0;
    FILE *in = keep_through >= 0 ? fopen(path, "r") : NULL;
    if (in) {
        char *line = NULL;
        size_t cap = 0;
        while (ok && getline(&line, &cap, in) > 0) {
            int64_t step = row_step(line);
            if (step >= 0 && step <= keep_through) ok = fputs(line, af.f) >= 0;
        }
        free(line);
        if (ferror(in)) ok = 0;
        if (fclose(in) != 0) ok = 0;
    }
    if (!ok) {
        snprintf(err, errlen, "cannot rewrite '%s': %s", path, strerror(errno));
        pmt_atomic_discard(&af);
        return -1;
    }
    return pmt_atomic_commit(&af, err, errlen);
}

int pmt_trainlog_open(pmt_trainlog *l, const char *path, int64_t keep_through, int quiet, char *err, size_t errlen) {
    memset(l, 0, sizeof *l);
    snprintf(l->path, sizeof l->path, "%s", path);
    l->quiet = quiet;
    l->tty = !quiet && isatty(STDERR_FILENO);
    if (rewrite_table(path, keep_through, err, errlen) != 0) return -1;
    l->tsv = fopen(path, "a");
    if (!l->tsv) {
        snprintf(err, errlen, "cannot append to '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A value, or nothing for NAN, after a tab. */
static void put_field(FILE *f, const char *fmt, double v) {
    fputc('\t', f);
    if (!isnan(v)) fprintf(f, fmt, v);
}

int pmt_trainlog_row(pmt_trainlog *l, const pmt_log_row *r, char *err, size_t errlen) {
    FILE *f = l->tsv;
    if (!f) return 0;  /* never opened: a data-parallel rank other than 0 keeps no table */
    fprintf(f, "%s\t%lld", r->kind, (long long)r->step);
    put_field(f, "%.4f", r->epoch);
    put_field(f, "%.6f", r->loss);
    put_field(f, "%.6f", r->accuracy);
    put_field(f, "%.4f", r->perplexity);
    put_field(f, "%.6g", r->lr);
    put_field(f, "%.4f", r->grad_norm);
    put_field(f, "%.1f", r->tokens_per_s);
    put_field(f, "%.1f", r->elapsed_s);
    put_field(f, "%.2f", r->bleu);
    put_field(f, "%.2f", r->chrf);
    fputc('\n', f);
    if (fflush(f) != 0 || ferror(f)) {
        snprintf(err, errlen, "cannot write to '%s': %s", l->path, strerror(errno));
        return -1;
    }
    return 0;
}

int pmt_trainlog_close(pmt_trainlog *l, char *err, size_t errlen) {
    if (l->live) fputc('\n', stderr);
    l->live = 0;
    if (!l->tsv) return 0;
    int rc = fclose(l->tsv);
    l->tsv = NULL;
    if (rc != 0) {
        snprintf(err, errlen, "cannot close '%s': %s", l->path, strerror(errno));
        return -1;
    }
    return 0;
}

void pmt_progress_live(pmt_trainlog *l, const char *line, int force) {
    if (!l->tty) return;
    double now = pmt_now_seconds();
    if (!force && l->live && now - l->last_draw < LIVE_INTERVAL) return;
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    l->live = 1;
    l->last_draw = now;
}

void pmt_progress_plain(pmt_trainlog *l, const char *line) {
    if (l->quiet || l->tty) return;
    fprintf(stderr, "%s\n", line);
}

void pmt_progress_message(pmt_trainlog *l, const char *fmt, ...) {
    if (l->quiet) return;
    if (l->live) fputs("\r\033[K", stderr);
    l->live = 0;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void pmt_format_duration(double seconds, char *buf, size_t len) {
    if (!(seconds >= 0) || seconds > 1e8) {
        snprintf(buf, len, "?");
        return;
    }
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, len, "%ldh%02ldm", s / 3600, (s / 60) % 60);
    else if (s >= 60) snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, len, "%lds", s);
}
