/*
 * cmd_translate.c — `projmt translate --model CKPT [options]`.
 *
 * Two ways to run:
 *   - interactive (stdin and stdout are terminals): a libedit prompt with
 *     line editing and history; prints each translation and its time;
 *     commands :beam N, :nbest N, :shortlist K, :help, :quit.
 *   - stream (otherwise, also -i FILE): exactly one output line per input
 *     line, in order. The lines already waiting on the input (up to --batch,
 *     default 64) are decoded together as one batch and their translations
 *     flushed together; a lone line is decoded at once, never held back to
 *     wait for more (poll with a zero timeout decides what is waiting), so
 *     a coprocess that waits for each answer gets it, and a pipe or a file
 *     is decoded in full batches. Input is read with read(2) into one
 *     growing buffer: lines of any length, CRLF, no final newline.
 *   - with -i FILE and stderr a terminal, a progress line (sentences
 *     done/total, sentences/s, ETA) is redrawn on stderr a few times a second
 *     and cleared at the end.
 * Output: the best translation per line; --scores appends " ||| score";
 * with n_best > 1 every hypothesis is a Moses n-best line
 * "id ||| hypothesis ||| score" (id counts input lines from 0).
 * A summary (sentences, tokens, seconds, sentences/s) goes to stderr at the end.
 */
#define _GNU_SOURCE   /* ppoll */
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

#include "cli/commands.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/path.h"
#include "core/signals.h"
#include "translate/translator.h"

enum { BATCH_CAP = 64 };

typedef struct output_mode {
    int nbest;      /* Moses n-best lines */
    int scores;     /* append the score to the best translation */
    int split;      /* --split-sentences: each line cut into sentences, translated, joined */
} output_mode;

/* The translator call of a batch, with or without sentence splitting. */
static int translate_lines(pmt_translator *t, int split, const char *const *lines, int n, pmt_translation *out,
                           char *err, size_t errlen) {
    return split ? pmt_translator_translate_sentences(t, lines, n, out, err, errlen)
                 : pmt_translator_translate(t, lines, n, out, err, errlen);
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: projmt translate --model CKPT [options]\n\n"
            "Translates English lines to Spanish with a checkpoint (model, config and\n"
            "tokenizer are all inside it). Interactive on a terminal, else one output\n"
            "line per input line.\n\n"
            "  --model FILE       checkpoint or exported model file (projmt export) to load (required)\n"
            "  -i FILE, -o FILE   input / output files (default stdin / stdout)\n"
            "  --batch N          decode up to N lines together: the lines already waiting on\n"
            "                     the input (default %d; a lone line is never held back)\n"
            "  --beam N           beam size (same as --beam-size; 1 = greedy)\n"
            "  --n-best N         print N hypotheses per line as 'id ||| hypothesis ||| score'\n"
            "  --scores           append ' ||| score' (log-prob / length^normalize)\n"
            "  --split-sentences  cut each line into sentences, translate them together and join\n"
            "                     them with a space (for paragraphs: the models learn from one or\n"
            "                     two sentences a line; a joined score is the sentences' sum)\n\n",
            BATCH_CAP);
    pmt_config_print_help(out, "translate");
}

static void print_translation(FILE *out, const pmt_translation *r, long id, output_mode mode) {
    if (mode.nbest) {
        if (r->n == 0) fprintf(out, "%ld |||  ||| %.6f\n", id, 0.0);
        for (int k = 0; k < r->n; k++) fprintf(out, "%ld ||| %s ||| %.6f\n", id, r->text[k], r->hyp[k].score);
    } else if (r->n == 0) {
        fputs(mode.scores ? " ||| 0.000000\n" : "\n", out);
    } else if (mode.scores) {
        fprintf(out, "%s ||| %.6f\n", r->text[0], r->hyp[0].score);
    } else {
        fprintf(out, "%s\n", r->text[0]);
    }
}

/* The line reader of stream mode: read(2) into one buffer that grows to
 * the longest line. Lines are taken in place: [pos, len) holds the bytes not
 * yet taken, scan is where the search for the next '\n' resumes (so a long
 * line arriving in pieces is scanned once). */
typedef struct line_reader {
    int fd;
    char *buf;
    size_t cap, len, pos, scan;
    int eof;
} line_reader;

/* Moves the bytes not yet taken to the front (between batches: taken lines
 * are dead then). */
static void reader_compact(line_reader *r) {
    if (r->pos == 0) return;
    memmove(r->buf, r->buf + r->pos, r->len - r->pos);
    r->len -= r->pos;
    r->scan -= r->pos;
    r->pos = 0;
}

/* The next whole line in the buffer (at end of input also an unterminated
 * last one): its offset and length, NUL-terminated in place without its
 * '\n', and 1; 0 when no whole line is buffered. */
static int reader_take(line_reader *r, size_t *off, size_t *len) {
    if (r->pos == r->len) return 0;
    char *nl = memchr(r->buf + r->scan, '\n', r->len - r->scan);
    if (!nl && !r->eof) {
        r->scan = r->len;
        return 0;
    }
    size_t end = nl ? (size_t)(nl - r->buf) : r->len;   /* r->buf[len] is spare (reader_fill) */
    *off = r->pos;
    *len = end - r->pos;
    r->buf[end] = '\0';
    r->pos = r->scan = nl ? end + 1 : end;
    return 1;
}

/* One read(2) of what is there (blocks only when nothing is). Returns the
 * byte count, 0 at end of input, -1 with errno (EINTR: a signal). */
static ssize_t reader_fill(line_reader *r) {
    enum { CHUNK = 1 << 16 };
    if (r->cap - r->len < CHUNK + 1) {
        size_t cap = r->cap ? r->cap : CHUNK;
        while (cap - r->len < CHUNK + 1) cap *= 2;
        char *p = realloc(r->buf, cap);
        if (!p) {
            errno = ENOMEM;
            return -1;
        }
        r->buf = p;
        r->cap = cap;
    }
    ssize_t got = read(r->fd, r->buf + r->len, CHUNK);
    if (got > 0) r->len += (size_t)got;
    if (got == 0) r->eof = 1;
    return got;
}

/* SIGINT / SIGTERM in stream mode: the batch in progress is finished and
 * flushed, so every line written is whole and line i of the output is the
 * translation of input line i. */
static volatile sig_atomic_t g_stop_signal = 0;
static void on_stop_signal(int signo) { g_stop_signal = signo; }

/* Waits until the input has something to read (1), or a stop signal came
 * (0), or fails (-1). The flag is checked with the stop signals blocked
 * and ppoll unblocks them atomically, so a signal arriving just before the
 * wait is not missed. wait = 0: only says whether input is waiting now. */
static int input_ready(int fd, int wait) {
    struct pollfd pfd = {fd, POLLIN, 0};
    sigset_t stop, orig;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, &orig);
    int rc = 0;
    if (!g_stop_signal) rc = ppoll(&pfd, 1, wait ? NULL : &(struct timespec){0, 0}, &orig);
    sigprocmask(SIG_SETMASK, &orig, NULL);
    if (rc < 0 && errno == EINTR) return 0;
    return rc < 0 ? -1 : rc > 0;
}

/* The progress line of file translation, on stderr when it is a terminal.
 * While it is on, the translator's warnings of a batch are collected in
 * memory and printed above the line after the batch, so they never run into
 * it. */
typedef struct progress {
    int on;
    long total;
    double start, last_draw;
    char *warnings;              /* open_memstream buffer of the batch's warnings */
    size_t warnings_len;
} progress;

/* Lines of a file (a last line without '\n' counts), or -1. */
static long count_lines(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char buf[1 << 16];
    long lines = 0;
    size_t got;
    int last = '\n';
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < got; i++) lines += buf[i] == '\n';
        last = buf[got - 1];
    }
    int bad = ferror(f);
    fclose(f);
    return bad ? -1 : lines + (last != '\n');
}

/* Redraws at most 4 times a second (always after warnings); final clears
 * it. t's warnings go to memory between the draws. */
static void progress_draw(progress *p, pmt_translator *t, long done, int final) {
    if (!p->on) return;
    const double now = pmt_now_seconds();
    int warned = 0;
    if (t->warn_ctx != stderr) {
        fclose(t->warn_ctx);
        t->warn_ctx = stderr;
        warned = p->warnings_len > 0;
        if (warned) {
            fputs("\r\033[K", stderr);
            fwrite(p->warnings, 1, p->warnings_len, stderr);
        }
        free(p->warnings);
        p->warnings = NULL;
    }
    if (final) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        return;
    }
    FILE *mem = open_memstream(&p->warnings, &p->warnings_len);
    if (mem) t->warn_ctx = mem;   /* else warnings go straight to stderr */
    if (!warned && now - p->last_draw < 0.25) return;
    p->last_draw = now;
    const double rate = now > p->start ? done / (now - p->start) : 0.0;
    const long left = p->total > done ? p->total - done : 0;
    const double eta = rate > 0 ? left / rate : 0.0;
    fprintf(stderr, "\r\033[K%ld/%ld sentences (%.0f%%), %.1f sentences/s, ", done, p->total,
            p->total > 0 ? 100.0 * done / p->total : 100.0, rate);
    if (rate > 0) fprintf(stderr, "ETA %d:%02d", (int)(eta / 60), (int)eta % 60);
    else fputs("ETA --:--", stderr);
    fflush(stderr);
}

/* Strips a trailing CR (the reader took the '\n'); a NUL inside the line
 * becomes the byte 0xC0 (never valid UTF-8), so the translator replaces and
 * reports it instead of silently cutting the line. */
static void clean_line(char *line, size_t len) {
    while (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    for (size_t i = 0; i < len; i++)
        if (line[i] == '\0') line[i] = (char)0xC0;
}

/* Stream mode over fd. Returns the exit status. */
static int run_stream(pmt_translator *t, int fd, FILE *out, int batch, output_mode mode, progress *prog) {
    const char **lines = calloc((size_t)batch, sizeof *lines);
    size_t *off = calloc((size_t)batch, sizeof *off), *len = calloc((size_t)batch, sizeof *len);
    pmt_translation *res = calloc((size_t)batch, sizeof *res);
    line_reader r = {.fd = fd};
    char err[512];
    int status = 0;
    long id = 0;
    if (!lines || !off || !len || !res) {
        fprintf(stderr, "projmt translate: out of memory\n");
        status = 1;
    }
    pmt_stop_signals saved;
    pmt_stop_signals_catch(&saved, on_stop_signal);
    progress_draw(prog, t, 0, 0);
    while (!status && !g_stop_signal) {
        reader_compact(&r);
        int n = 0;
        /* The first line may be waited for; after it, only lines already
         * waiting join the batch. */
        while (n < batch) {
            if (reader_take(&r, &off[n], &len[n])) {
                n++;
                continue;
            }
            if (r.eof) break;
            int ready = input_ready(fd, n == 0);
            if (ready == 0) break;   /* nothing waiting, or a stop signal while waiting */
            if (ready < 0 || reader_fill(&r) < 0) {
                if (errno == EINTR) continue;
                fprintf(stderr, "projmt translate: reading input: %s\n", strerror(errno));
                status = 1;
                break;
            }
        }
        if (n == 0 || status) break;
        for (int i = 0; i < n; i++) {
            clean_line(r.buf + off[i], len[i]);
            lines[i] = r.buf + off[i];
        }
        if (translate_lines(t, mode.split, lines, n, res, err, sizeof err) != 0) {
            fprintf(stderr, "projmt translate: %s\n", err);
            status = 1;
            break;
        }
        for (int i = 0; i < n; i++) print_translation(out, &res[i], id++, mode);
        if (fflush(out) != 0) {
            perror("projmt translate: writing output");
            status = 1;
        }
        progress_draw(prog, t, id, 0);
    }
    progress_draw(prog, t, id, 1);
    pmt_stop_signals_restore(&saved);
    if (g_stop_signal && !status) {
        char name[32];
        fprintf(stderr, "projmt translate: stopped by %s after %ld lines; every output line is complete\n",
                pmt_signal_name(g_stop_signal, name, sizeof name), id);
        status = 128 + g_stop_signal;
    }
    free(r.buf);
    free(lines);
    free(off);
    free(len);
    free(res);
    return status;
}

static void prompt_help(void) {
    printf("Type an English sentence and press Enter. Commands:\n"
           "  :beam N    beam size (1 = greedy)\n"
           "  :nbest N   show the N best translations (N <= beam)\n"
           "  :shortlist K  decode over the model's vocabulary shortlist, K candidates per\n"
           "             source piece (0: the whole vocabulary)\n"
           "  :help      this text\n"
           "  :quit      leave (or Ctrl-D)\n");
}

/* Handles a ':' command; returns 1 to quit. */
static int prompt_command(pmt_translator *t, const char *cmd) {
    char err[256];
    int value;
    pmt_decode_options opt = t->opt;
    if (!strcmp(cmd, ":quit") || !strcmp(cmd, ":q")) return 1;
    if (!strcmp(cmd, ":help")) {
        prompt_help();
    } else if (!strncmp(cmd, ":beam ", 6) && pmt_parse_int(cmd + 6, -1000000, 1000000, &value) == 0) {
        opt.beam_size = value;
        if (opt.n_best > value) opt.n_best = value > 0 ? value : 1;
        if (value < 1 || pmt_translator_set_options(t, &opt, err, sizeof err) != 0)
            printf("cannot set beam %d%s%s\n", value, value < 1 ? "" : ": ", value < 1 ? "" : err);
        else
            printf("beam size %d\n", value);
    } else if (!strncmp(cmd, ":nbest ", 7) && pmt_parse_int(cmd + 7, -1000000, 1000000, &value) == 0) {
        opt.n_best = value;
        if (pmt_translator_set_options(t, &opt, err, sizeof err) != 0) printf("%s\n", err);
        else printf("n-best %d\n", value);
    } else if (!strncmp(cmd, ":shortlist ", 11) && pmt_parse_int(cmd + 11, -1000000, 1000000, &value) == 0) {
        opt.shortlist = value;
        if (pmt_translator_set_options(t, &opt, err, sizeof err) != 0) printf("%s\n", err);
        else if (value == 0) printf("the whole vocabulary\n");
        else printf("shortlist %d\n", value);
    } else {
        printf("unknown command '%s' (:help lists them)\n", cmd);
    }
    return 0;
}

static int run_prompt(pmt_translator *t, int split) {
    char err[512];
    printf("projmt translate — English to Spanish (:help for commands)\n");
    using_history();
    char *line;
    while ((line = readline("en> ")) != NULL) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n > 0) add_history(line);
        int quit = 0;
        if (line[0] == ':') {
            quit = prompt_command(t, line);
        } else if (n > 0) {
            pmt_translation r;
            const char *one = line;
            double start = pmt_now_seconds();
            if (translate_lines(t, split, &one, 1, &r, err, sizeof err) != 0) {
                printf("error: %s\n", err);
            } else {
                for (int k = 0; k < r.n; k++) {
                    if (r.n > 1) printf("%d. ", k + 1);
                    printf("%s", r.text[k]);
                    if (r.n > 1) printf("   (%.3f)", r.hyp[k].score);
                    printf("\n");
                }
                printf("   [%.0f ms]\n", 1e3 * (pmt_now_seconds() - start));
            }
        }
        free(line);
        fflush(stdout);
        if (quit) break;
    }
    return 0;
}

static void print_summary(const pmt_translator *t) {
    const pmt_translator_totals *s = &t->totals;
    fprintf(stderr, "projmt translate: %ld sentences, %ld source / %ld output tokens, %.2f s, %.1f sentences/s\n",
            s->sentences, s->src_tokens, s->out_tokens, s->seconds, s->seconds > 0 ? s->sentences / s->seconds : 0.0);
}

int cmd_translate(int argc, char **argv) {
    static const char *const extra[] = {"i=", "o=", "batch=", "beam=", "scores", "split-sentences", NULL};
    const char *val[7];
    pmt_config cfg;
    char err[512];
    int dump = 0;
    int parsed = cmd_parse_args("translate", argc, argv, extra, val, usage, &cfg, &dump);
    if (parsed != CMD_CONTINUE) return parsed;
    int batch = BATCH_CAP;
    if ((val[3] && pmt_config_set(&cfg, "beam_size", val[3], err, sizeof err) != 0) ||
        (val[2] && pmt_parse_int_option("--batch", val[2], 1, 1 << 20, &batch, err, sizeof err) != 0) ||
        (val[0] && pmt_path_check("-i", val[0], 0, err, sizeof err) != 0) ||
        (val[1] && pmt_path_check("-o", val[1], 0, err, sizeof err) != 0)) {
        fprintf(stderr, "projmt translate: %s\n", err);
        return 2;
    }
    if (dump) { pmt_config_dump(&cfg, stdout); return 0; }
    if (!cfg.model[0]) {
        fprintf(stderr, "projmt translate: --model FILE is required (see --help)\n");
        return 2;
    }
    if (batch < 1 || cfg.beam_size < 1 || cfg.n_best < 1 || cfg.n_best > cfg.beam_size) {
        fprintf(stderr, "projmt translate: need --batch >= 1, --beam >= 1 and 1 <= --n-best <= beam\n");
        return 2;
    }
    if (cfg.threads > 0) omp_set_num_threads(cfg.threads);

    int in = STDIN_FILENO;
    FILE *out = stdout;
    if (val[0] && (in = open(val[0], O_RDONLY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "projmt translate: cannot open input '%s': %s\n", val[0], strerror(errno));
        return 1;
    }
    const int interactive = !val[0] && !val[1] && !val[2] && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    if (interactive) setlocale(LC_ALL, "");

    pmt_decode_options opt;
    pmt_decode_options_from_config(&opt, &cfg);
    pmt_translator t;
    if (pmt_translator_load(&t, cfg.model, &opt, batch, err, sizeof err) != 0) {
        fprintf(stderr, "projmt translate: %s\n", err);
        if (in != STDIN_FILENO) close(in);
        return 1;
    }
    t.warn = pmt_translator_warn_file;   /* the program prints what the library only reports */
    t.warn_ctx = stderr;
    cmd_note_compute("translate", &t.model);
    if (val[1] && !(out = fopen(val[1], "wb"))) {
        fprintf(stderr, "projmt translate: cannot create output '%s'\n", val[1]);
        pmt_translator_free(&t);
        if (in != STDIN_FILENO) close(in);
        return 1;
    }
    output_mode mode = {cfg.n_best > 1, val[4] != NULL, val[5] != NULL};
    progress prog = {0};
    if (val[0] && isatty(STDERR_FILENO) && (prog.total = count_lines(val[0])) >= 0) {
        prog.on = 1;
        prog.start = pmt_now_seconds();
    }
    int status = interactive ? run_prompt(&t, mode.split) : run_stream(&t, in, out, batch, mode, &prog);
    print_summary(&t);
    cmd_note_fallbacks("translate");
    pmt_translator_free(&t);
    if (in != STDIN_FILENO) close(in);
    if (out != stdout && fclose(out) != 0) {
        fprintf(stderr, "projmt translate: writing '%s' failed\n", val[1]);
        status = 1;
    }
    return status;
}
