/*
 * cmd_translate.c — `projmt translate --model CKPT [options]`.
 *
 * Three ways to run:
 *   - interactive (stdin and stdout are terminals): a libedit prompt with
 *     line editing and history; prints each translation and its time;
 *     commands :beam N, :nbest N, :help, :quit.
 *   - stream (default otherwise): exactly one output line per input line, in
 *     order, flushed at once, reading no line ahead — so it works as a
 *     coprocess that waits for each answer.
 *   - batched (--batch N, or -i FILE where N defaults to 32): reads up to N
 *     lines ahead and decodes them together for throughput.
 * Output: the best translation per line; --scores appends " ||| score";
 * with n_best > 1 every hypothesis is a Moses n-best line
 * "id ||| hypothesis ||| score" (id counts input lines from 0).
 * A summary (sentences, tokens, seconds, sentences/s) goes to stderr at the end.
 */
#include <locale.h>
#include <omp.h>
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

enum { FILE_BATCH = 32 };

typedef struct output_mode {
    int nbest;      /* Moses n-best lines */
    int scores;     /* append the score to the best translation */
} output_mode;

static void usage(FILE *out) {
    fprintf(out,
            "usage: projmt translate --model CKPT [options]\n\n"
            "Translates English lines to Spanish with a checkpoint (model, config and\n"
            "tokenizer are all inside it). Interactive on a terminal, else one output\n"
            "line per input line.\n\n"
            "  --model FILE       checkpoint or exported model file (projmt export) to load (required)\n"
            "  -i FILE, -o FILE   input / output files (default stdin / stdout)\n"
            "  --batch N          decode N lines together (reads N lines ahead; default 1,\n"
            "                     or %d with -i)\n"
            "  --beam N           beam size (same as --beam-size; 1 = greedy)\n"
            "  --n-best N         print N hypotheses per line as 'id ||| hypothesis ||| score'\n"
            "  --scores           append ' ||| score' (log-prob / length^normalize)\n\n",
            FILE_BATCH);
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

/* Strips the line terminator; a NUL inside the line becomes the byte 0xC0
 * (never valid UTF-8), so the translator replaces and reports it instead of
 * silently cutting the line. */
static void clean_line(char *line, ssize_t len) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    for (ssize_t i = 0; i < len; i++)
        if (line[i] == '\0') line[i] = (char)0xC0;
}

/* SIGINT / SIGTERM in stream and batched modes: the batch in progress is
 * finished and flushed, so every line written is whole and line i of the
 * output is the translation of input line i. */
static volatile sig_atomic_t g_stop_signal = 0;
static void on_stop_signal(int signo) { g_stop_signal = signo; }

/* Stream and batched modes. Returns the exit status. */
static int run_stream(pmt_translator *t, FILE *in, FILE *out, int batch, output_mode mode) {
    char **lines = calloc((size_t)batch, sizeof *lines);
    size_t *caps = calloc((size_t)batch, sizeof *caps);
    pmt_translation *res = calloc((size_t)batch, sizeof *res);
    char err[512];
    int status = 0;
    long id = 0;
    if (!lines || !caps || !res) {
        fprintf(stderr, "projmt translate: out of memory\n");
        status = 1;
    }
    pmt_stop_signals saved;
    pmt_stop_signals_catch(&saved, on_stop_signal);
    while (!status && !g_stop_signal) {
        int n = 0;
        ssize_t len;
        while (n < batch && !g_stop_signal && (len = getline(&lines[n], &caps[n], in)) >= 0)
            clean_line(lines[n++], len);
        if (n == 0) break;
        if (pmt_translator_translate(t, (const char *const *)lines, n, res, err, sizeof err) != 0) {
            fprintf(stderr, "projmt translate: %s\n", err);
            status = 1;
            break;
        }
        for (int i = 0; i < n; i++) print_translation(out, &res[i], id++, mode);
        if (fflush(out) != 0) {
            perror("projmt translate: writing output");
            status = 1;
        }
        if (n < batch) break;   /* end of input (or a stop signal) */
    }
    pmt_stop_signals_restore(&saved);
    if (g_stop_signal && !status) {
        char name[32];
        fprintf(stderr, "projmt translate: stopped by %s after %ld lines; every output line is complete\n",
                pmt_signal_name(g_stop_signal, name, sizeof name), id);
        status = 128 + g_stop_signal;
    }
    for (int i = 0; lines && i < batch; i++) free(lines[i]);
    free(lines);
    free(caps);
    free(res);
    return status;
}

static void prompt_help(void) {
    printf("Type an English sentence and press Enter. Commands:\n"
           "  :beam N    beam size (1 = greedy)\n"
           "  :nbest N   show the N best translations (N <= beam)\n"
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
    } else {
        printf("unknown command '%s' (:help lists them)\n", cmd);
    }
    return 0;
}

static int run_prompt(pmt_translator *t) {
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
            if (pmt_translator_translate(t, &one, 1, &r, err, sizeof err) != 0) {
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
    static const char *const extra[] = {"i=", "o=", "batch=", "beam=", "scores", NULL};
    const char *val[6];
    pmt_config cfg;
    char err[512];
    int dump = 0;
    int parsed = cmd_parse_args("translate", argc, argv, extra, val, usage, &cfg, &dump);
    if (parsed != CMD_CONTINUE) return parsed;
    int batch = val[0] ? FILE_BATCH : 1;
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

    FILE *in = stdin, *out = stdout;
    if (val[0] && !(in = fopen(val[0], "rb"))) {
        fprintf(stderr, "projmt translate: cannot open input '%s'\n", val[0]);
        return 1;
    }
    const int interactive = !val[0] && !val[1] && !val[2] && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    if (interactive) setlocale(LC_ALL, "");

    pmt_decode_options opt;
    pmt_decode_options_from_config(&opt, &cfg);
    pmt_translator t;
    if (pmt_translator_load(&t, cfg.model, &opt, batch, err, sizeof err) != 0) {
        fprintf(stderr, "projmt translate: %s\n", err);
        if (in != stdin) fclose(in);
        return 1;
    }
    if (val[1] && !(out = fopen(val[1], "wb"))) {
        fprintf(stderr, "projmt translate: cannot create output '%s'\n", val[1]);
        pmt_translator_free(&t);
        if (in != stdin) fclose(in);
        return 1;
    }
    output_mode mode = {cfg.n_best > 1, val[4] != NULL};
    int status = interactive ? run_prompt(&t) : run_stream(&t, in, out, batch, mode);
    print_summary(&t);
    pmt_translator_free(&t);
    if (in != stdin) fclose(in);
    if (out != stdout && fclose(out) != 0) {
        fprintf(stderr, "projmt translate: writing '%s' failed\n", val[1]);
        status = 1;
    }
    return status;
}
